#[sycl::kernel]
fn k(c: &mut [u32]) {
    let v = atomic_fetch_add(c, 0, 1) + atomic_fetch_add(c, 1, 1);
    c[2] = v;
}
fn main() {}
