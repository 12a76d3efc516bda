#[sycl::kernel]
fn k(x: &[u32], y: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    for step in 0..x[l] {
        tile[l] = step;
        barrier();
    }
    y[global_id(0)] = tile[l];
}
fn main() {}
