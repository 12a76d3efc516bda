#[sycl::kernel]
fn k(y: &mut [u32], d: usize) {
    y[0] = global_id(d) as u32;
    y[1] = global_id(3) as u32;
}
fn main() {}
