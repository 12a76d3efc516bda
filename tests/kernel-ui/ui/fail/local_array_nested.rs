#[sycl::kernel]
fn k(y: &mut [f32]) {
    if global_id(0) == 0 {
        let tile = local_array::<f32, 64>();
        tile[0] = 1.0;
    }
    y[0] = 1.0;
}
fn main() {}
