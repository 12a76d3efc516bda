#[sycl::kernel_fn]
fn first(x: &[f32]) -> f32 {
    x[0]
}
fn main() {}
