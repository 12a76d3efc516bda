#[sycl::kernel]
fn k(x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = group_sum(x[i]) * 2.0;
}
fn main() {}
