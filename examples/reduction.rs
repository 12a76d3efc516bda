//! Sum of a large `u32` array with one `#[sycl::kernel]`: each work-group adds a chunk of the
//! array (work-item `l` takes every 256th element from `l`: consecutive work-items read
//! consecutive elements), combines its 256 partial sums in a tree in work-group local memory
//! with barriers, and adds the group's sum to the result with one atomic. Integer sums are
//! exact, so the result must equal the host's sum on every device.
//!
//! ```text
//! cargo run --release --example reduction
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example reduction
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

/// Work-group size: the kernel's local array has this many elements and its tree takes
/// log2(WG) = 8 steps.
const WG: usize = 256;
/// Work-groups launched; each adds n / GROUPS elements.
const GROUPS: usize = 512;

#[sycl::kernel]
fn sum_u32(x: &[u32], out: &mut [u64]) {
    let partial = local_array::<u64, 256>();
    let l = local_id(0);
    // Group g adds the g-th of group_range(0) equal chunks; inside it, work-item l adds
    // elements l, l + 256, l + 512, ...
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut acc = 0u64;
    let mut i = begin + l;
    while i < end {
        acc += x[i] as u64;
        i += local_range(0);
    }
    partial[l] = acc;
    barrier();
    // Tree: at step s the first 256 >> s work-items add in the upper half. The loop's bounds are
    // literals (uniform), so every work-item meets every barrier.
    for s in 1..9 {
        let half = 256 >> s;
        if l < half {
            partial[l] += partial[l + half];
        }
        barrier();
    }
    if l == 0 {
        let total = partial[0];
        atomic_fetch_add(out, 0, total);
    }
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("reduction on {} ({})", device.name(), device.backend());
    let n: usize = 1 << 24;
    // Values up to 2^20 - 1: the sum needs more than 32 bits (hence the u64 accumulator).
    let host: Vec<u32> = (0..n as u64)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 7) & 0xF_FFFF) as u32)
        .collect();
    let want: u64 = host.iter().map(|&v| v as u64).sum();
    let x = sycl::malloc_device::<u32>(n, &q)?;
    let out = sycl::malloc_device::<u64>(1, &q)?;
    q.write(&x, &host)?;
    let range = Range::d1(WG * GROUPS).with_local([WG, 1, 1]);

    // The first launch in a context builds the GPU program: time it apart from the next.
    let mut times = Vec::new();
    for _ in 0..2 {
        q.fill(&out, 0u64, &[])?.wait()?;
        let start = Instant::now();
        q.parallel_for(range, &[], sum_u32(&x, &out))?.wait()?;
        times.push(start.elapsed());
        let got = q.to_vec(&out)?[0];
        if got != want {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!("sum of {n} elements is {got}, expected {want}"),
            ));
        }
    }
    let gbs = (n * 4) as f64 / times[1].as_secs_f64() / 1e9;
    println!(
        "reduction: {n} u32 elements, {GROUPS} groups of {WG}: first launch {:.2?} (with the build), then {:.2?} ({gbs:.1} GB/s); sum {want}: verified",
        times[0], times[1]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reduction: {e}");
            ExitCode::FAILURE
        }
    }
}
