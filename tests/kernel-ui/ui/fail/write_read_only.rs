#[sycl::kernel]
fn k(x: &[f32]) {
    x[global_id(0)] = 1.0;
}
fn main() {}
