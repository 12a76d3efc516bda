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

    let out = sycl::malloc_shared::<u32>(800, &q)?;
    let range = sycl::Range::d1(80).with_local([40, 1, 1]);
    q.parallel_for(range, &[], sub_groups(&out))?.wait()?;
    let out = q.to_vec(&out)?;
    // Work-item 45: lane 5 of sub-group 0 (items 40..72) of group 1.
    let item = |i: usize| &out[i * 10..i * 10 + 10];
    assert_eq!(item(45), [6, 40, 7, 4, 4, 32, 40, 71, 32_020_000, 32]);
    // Work-item 75: lane 3 of the partial sub-group 1 (items 72..80): lanes wrap at 8, shifts
    // past its end give the item's own lane.
    assert_eq!(item(75), [4, 72, 5, 2, 2, 8, 72, 79, 8_020_100, 32]);
    assert_eq!(item(79)[..3], [0, 72, 7]);
    Ok(())
}

// Sub-groups on the native CPU: 32 consecutive work-items (the last of a group of 40 has 8).
#[sycl::kernel]
fn sub_groups(y: &mut [u32]) {
    let i = global_id(0);
    let lane = sub_group_local_id();
    let next = sub_group_shuffle(lane as u32, lane + 1);
    let first = sub_group_broadcast(i as u32, 0);
    let up = sub_group_shift_left(lane as u32, 2);
    let down = sub_group_shift_right(lane as u32, 1);
    let swapped = sub_group_shuffle_xor(lane as u32, 1);
    let count = sub_group_sum(1u32);
    let low = sub_group_min(i as u32);
    let high = sub_group_max(i as u32);
    let ids = sub_group_id() * 100 + sub_group_range() * 10000 + sub_group_local_range() * 1000000;
    y[i * 10] = next;
    y[i * 10 + 1] = first;
    y[i * 10 + 2] = up;
    y[i * 10 + 3] = down;
    y[i * 10 + 4] = swapped;
    y[i * 10 + 5] = count;
    y[i * 10 + 6] = low;
    y[i * 10 + 7] = high;
    y[i * 10 + 8] = ids as u32;
    y[i * 10 + 9] = sub_group_max_local_range() as u32;
}
