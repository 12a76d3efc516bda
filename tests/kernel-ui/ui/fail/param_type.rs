#[sycl::kernel]
fn k(name: String, y: &mut [f32]) {
    y[0] = 1.0;
}
fn main() {}
