#[sycl::kernel]
fn k(y: &mut [f32]) {
    let tile = local_array::<f32, 64>();
    let l = local_id(0);
    tile[l] = 1.0;
    if l < 32 {
        barrier();
    }
    y[global_id(0)] = tile[63 - l];
}
fn main() {}
