#[sycl::kernel]
fn k(y: &[f32]) -> f32 {
    y[0]
}
fn main() {}
