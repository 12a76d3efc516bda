#[sycl::kernel]
fn float_const<const X: f32>(y: &mut [f32]) {
    y[0] = 1.0;
}

#[sycl::kernel]
fn u32_length<const N: u32>(y: &mut [f32]) {
    let a = [0.0f32; N];
    y[0] = a[0];
}

#[sycl::kernel_fn]
fn generic_helper<const N: usize>(x: f32) -> f32 {
    x
}

fn main() {}
