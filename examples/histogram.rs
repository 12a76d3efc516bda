//! A 256-bin histogram of bytes: each work-group counts its part of the input in work-group
//! local memory with local atomics, then adds its 256 counts to the global histogram with one
//! atomic per bin. Counts are exact, so the result must equal the host's on every device.
//!
//! ```text
//! cargo run --release --example histogram
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example histogram
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

/// Work-items per group: one bin each when the group clears and publishes its counts.
const WG: usize = 256;
/// Work-groups launched.
const GROUPS: usize = 1024;

/// `x` holds four bytes per `u32` (the input's bytes, little-endian).
#[sycl::kernel]
fn histogram_u8(x: &[u32], bins: &mut [u32]) {
    let local = local_array::<u32, 256>();
    let l = local_id(0);
    local[l] = 0;
    barrier();
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    for i in (begin + l..end).step_by(local_range(0)) {
        let w = x[i];
        atomic_fetch_add(local, (w & 255) as usize, 1u32);
        atomic_fetch_add(local, ((w >> 8) & 255) as usize, 1u32);
        atomic_fetch_add(local, ((w >> 16) & 255) as usize, 1u32);
        atomic_fetch_add(local, (w >> 24) as usize, 1u32);
    }
    barrier();
    let c = local[l];
    if c != 0 {
        atomic_fetch_add(bins, l, c);
    }
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("histogram on {} ({})", device.name(), device.backend());
    let words: usize = 1 << 24;
    // Skewed: a quarter of the bytes are 0 (a hot bin), the rest spread.
    let host: Vec<u32> = (0..words as u64)
        .map(|i| {
            let h = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
            h & 0xFFFF_FF00
        })
        .collect();
    let mut want = [0u32; 256];
    for w in &host {
        for k in 0..4 {
            want[((w >> (8 * k)) & 255) as usize] += 1;
        }
    }
    let x = sycl::malloc_device::<u32>(words, &q)?;
    let bins = sycl::malloc_device::<u32>(256, &q)?;
    q.write(&x, &host)?;
    let range = Range::d1(WG * GROUPS).with_local([WG, 1, 1]);
    let mut times = Vec::new();
    for _ in 0..3 {
        q.fill(&bins, 0u32, &[])?.wait()?;
        let start = Instant::now();
        q.parallel_for(range, &[], histogram_u8(&x, &bins))?
            .wait()?;
        times.push(start.elapsed());
        let got = q.to_vec(&bins)?;
        if let Some(b) = (0..256).find(|&b| got[b] != want[b]) {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!("bin {b} counts {}, the host {}", got[b], want[b]),
            ));
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gbs = (words * 4) as f64 / best.as_secs_f64() / 1e9;
    println!(
        "histogram: {} bytes into 256 bins, {GROUPS} groups of {WG}: first launch {:.2?} (with the build), then {best:.2?} ({gbs:.1} GB/s); verified",
        words * 4,
        times[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("histogram: {e}");
            ExitCode::FAILURE
        }
    }
}
