// Every construct of the language in one kernel, compiled and run on the native CPU.
#[sycl::kernel_fn]
fn clamp01(v: f32) -> f32 {
    if v < 0.0 {
        0.0
    } else if v > 1.0 {
        1.0
    } else {
        v
    }
}

#[sycl::kernel]
fn everything(a: f32, n: u32, x: &[f32], y: &mut [f32], hist: &mut [u32]) {
    let tile = local_array::<f32, 16>();
    let i = global_id(0);
    let l = local_id(0);
    tile[l] = x[i];
    barrier();
    let mut acc = 0.0f32;
    for k in 0..local_range(0) {
        acc += tile[k];
    }
    let s = group_sum(acc);
    let mut j = 0u32;
    while j < n {
        j += 1;
        if j == 3 {
            continue;
        }
    }
    loop {
        break;
    }
    // SAFETY: main launches 64 work-items over 64 elements of x, so i < x.len().
    let v = unsafe { *x.get_unchecked(i) };
    let t = (v * a).mul_add(2.0, s).sqrt().max(0.0).min(1e9).floor() as u32;
    atomic_fetch_add(hist, (t % 4) as usize, 1);
    y[i] = clamp01(if j > 2 { v } else { -v }) + (i as f32).abs();
}

fn main() -> sycl::Result<()> {
    let q = sycl::Queue::in_order(&sycl::Device::native_cpu())?;
    let x = sycl::malloc_shared::<f32>(64, &q)?;
    let y = sycl::malloc_shared::<f32>(64, &q)?;
    let h = sycl::malloc_shared::<u32>(4, &q)?;
    q.fill(&x, 0.5f32, &[])?;
    q.fill(&h, 0u32, &[])?;
    let range = sycl::Range::d1(64).with_local([16, 1, 1]);
    q.parallel_for(range, &[], everything(2.0, 5, &x, &y, &h))?.wait()?;
    assert_eq!(q.to_vec(&h)?.iter().sum::<u32>(), 64);
    assert_eq!(q.to_vec(&y)?[3], 3.5);
    Ok(())
}
