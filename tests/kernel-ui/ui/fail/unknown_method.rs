#[sycl::kernel]
fn k(y: &mut [f32]) {
    let i = global_id(0);
    y[i] = y[i].cbrt();
}
fn main() {}
