#[sycl::kernel]
fn k(x: &mut [f32], n: &mut [u32]) {
    let i = global_id(0);
    n[i] = x[i].count_ones();
}
#[sycl::kernel]
fn k2(n: &mut [u32]) {
    let i = global_id(0);
    n[i] = n[i].fract();
}
#[sycl::kernel]
fn k3(x: &mut [f32]) {
    let i = global_id(0);
    x[i] = x[i].powi(2.0);
}
fn main() {}
