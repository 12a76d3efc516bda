#[sycl::kernel]
fn k(y: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    for step in 0..8u32 {
        if l == 3 {
            break;
        }
        tile[l] = step;
        barrier();
    }
    y[global_id(0)] = tile[l];
}
fn main() {}
