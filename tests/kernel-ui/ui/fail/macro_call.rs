#[sycl::kernel]
fn k(y: &mut [f32]) {
    println!("hello");
    y[0] = 1.0;
}
fn main() {}
