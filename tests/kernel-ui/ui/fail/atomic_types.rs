#[sycl::kernel]
fn k(x: &[u32], y: &mut [f64]) {
    atomic_fetch_add(y, 0, 1.0);
    atomic_fetch_add(x, 0, 1);
}
fn main() {}
