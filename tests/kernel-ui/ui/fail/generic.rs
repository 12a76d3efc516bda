#[sycl::kernel]
fn k<T>(y: &mut [f32]) {
    y[0] = 1.0;
}
fn main() {}
