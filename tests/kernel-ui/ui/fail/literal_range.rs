#[sycl::kernel]
fn k(y: &mut [u32]) {
    y[0] = 4294967296;
}
fn main() {}
