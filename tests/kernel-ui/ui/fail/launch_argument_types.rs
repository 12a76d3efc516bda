#[sycl::kernel]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = a * x[i] + y[i];
}

fn main() -> sycl::Result<()> {
    let q = sycl::Queue::in_order(&sycl::Device::native_cpu())?;
    let x = sycl::malloc_shared::<u32>(16, &q)?;
    let y = sycl::malloc_shared::<f32>(16, &q)?;
    q.parallel_for(sycl::Range::d1(16), &[], saxpy(2u32, &x, &y))?.wait()?;
    q.parallel_for(sycl::Range::d1(16), &[], saxpy(2.0, &y))?.wait()
}
