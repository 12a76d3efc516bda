#[sycl::kernel]
fn tile<const TILE: usize>(y: &mut [f32]) {
    let a = [1.0f32; TILE];
    y[0] = a[0];
}

fn main() {
    let q = sycl::Queue::in_order(&sycl::Device::native_cpu()).unwrap();
    let y = sycl::malloc_device::<f32>(4, &q).unwrap();
    let _ = tile::<0>(&y);
}
