/// Every instance fails: the first instance's error, at its span.
#[sycl::kernel]
fn never<T: sycl::Int>(x: &mut [T]) {
    x[0] = x[0].sqrt();
}

#[sycl::kernel]
fn where_clause<T>(x: &mut [T])
where
    T: sycl::Float,
{
    x[0] = x[0];
}

#[sycl::kernel]
fn two_bounds<T: sycl::Float + Copy>(x: &mut [T]) {
    x[0] = x[0];
}

fn main() {}
