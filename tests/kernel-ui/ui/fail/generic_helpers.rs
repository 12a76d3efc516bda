// Generic helpers: a call at a type no instance takes, two type parameters, a bound the
// language does not have.

#[sycl::kernel_fn]
fn sq<T: sycl::Float>(x: T) -> T {
    x * x
}

#[sycl::kernel]
fn squares_ints(y: &mut [u32]) {
    let i = sycl::kernel::global_id(0);
    y[i] = sq(y[i]);
}

#[sycl::kernel_fn]
fn two<T: sycl::Float, U: sycl::Int>(x: T, y: U) -> T {
    x
}

#[sycl::kernel_fn]
fn other_bound<T: Copy>(x: T) -> T {
    x
}

fn main() {}
