#[sycl::kernel]
fn k(x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = *x.get_unchecked(i);
}
fn main() {}
