#[sycl::kernel]
fn k(y: &mut [u32]) {
    let v: u32 = 1.5;
    y[global_id(0)] = v;
}
fn main() {}
