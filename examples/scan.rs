//! An inclusive prefix sum of 16 Mi `u32`s (wrapping) in three passes, each a
//! `#[sycl::kernel]` written once:
//!
//! 1. `scan_chunks`: each work-group scans its contiguous chunk, a tile of one element per
//!    work-item at a time (`group_inclusive_sum`), carrying the total of the tiles before
//!    (`group_broadcast` of the tile's last sum); it writes its chunk's total to `sums`;
//! 2. the same kernel, as one work-group, scans `sums` in place;
//! 3. `add_offsets`: each work-group adds the total of the chunks before its own.
//!
//! The result must equal the host's sequential scan exactly on every device.
//!
//! ```text
//! cargo run --release --example scan
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example scan
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range, Usm};

/// Work-items per group.
const WG: usize = 256;
/// Work-groups of the first and last pass (the second scans their totals in one group).
const GROUPS: usize = 1024;

/// Scans each group's contiguous chunk of `x` into `y`; the chunk's total into
/// `sums[group_id(0)]`.
#[sycl::kernel]
fn scan_chunks(x: &[u32], y: &mut [u32], sums: &mut [u32]) {
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut carry = 0u32;
    for tile in (begin..end).step_by(local_range(0)) {
        let i = tile + local_id(0);
        let v = if i < end { x[i] } else { 0 };
        let s = group_inclusive_sum(v);
        if i < end {
            y[i] = carry.wrapping_add(s);
        }
        // The tile's total: its last work-item's sum (those past `end` added 0).
        let total = group_broadcast(s, local_range(0) - 1);
        carry = carry.wrapping_add(total);
    }
    if local_id(0) == 0 {
        sums[group_id(0)] = carry;
    }
}

/// Adds to each group's chunk of `y` the total of the chunks before it (`scanned`: the
/// inclusive scan of the chunks' totals).
#[sycl::kernel]
fn add_offsets(y: &mut [u32], scanned: &[u32]) {
    let n = y.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    if group_id(0) > 0 {
        let offset = scanned[group_id(0) - 1];
        for i in (begin + local_id(0)..end).step_by(local_range(0)) {
            y[i] = y[i].wrapping_add(offset);
        }
    }
}

/// The three passes: `x` scanned into `y`.
fn scan(
    q: &Queue,
    x: &Usm<u32>,
    y: &Usm<u32>,
    sums: &Usm<u32>,
    scanned: &Usm<u32>,
) -> sycl::Result<()> {
    let wide = Range::d1(WG * GROUPS).with_local([WG, 1, 1]);
    let one = Range::d1(WG).with_local([WG, 1, 1]);
    q.parallel_for(wide, &[], scan_chunks(x, y, sums))?;
    let chunk_offsets = scanned.range(0..GROUPS)?;
    let grand_total = scanned.range(GROUPS..GROUPS + 1)?;
    q.parallel_for(one, &[], scan_chunks(sums, &chunk_offsets, &grand_total))?;
    q.parallel_for(wide, &[], add_offsets(y, &chunk_offsets))?
        .wait()
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("scan on {} ({})", device.name(), device.backend());
    let n: usize = 1 << 24;
    let host: Vec<u32> = (0..n as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32)
        .collect();
    let mut want = Vec::with_capacity(n);
    let mut acc = 0u32;
    for &v in &host {
        acc = acc.wrapping_add(v);
        want.push(acc);
    }
    let x = sycl::malloc_device::<u32>(n, &q)?;
    let y = sycl::malloc_device::<u32>(n, &q)?;
    let sums = sycl::malloc_device::<u32>(GROUPS, &q)?;
    // The chunks' scanned totals, and the second pass's own total after them.
    let scanned = sycl::malloc_device::<u32>(GROUPS + 1, &q)?;
    q.write(&x, &host)?;
    let mut times = Vec::new();
    for _ in 0..3 {
        q.fill(&y, 0u32, &[])?.wait()?;
        let start = Instant::now();
        scan(&q, &x, &y, &sums, &scanned)?;
        times.push(start.elapsed());
        let got = q.to_vec(&y)?;
        if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!("element {i} is {}, the host's {}", got[i], want[i]),
            ));
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gbs = (n * 8) as f64 / best.as_secs_f64() / 1e9;
    println!(
        "scan: {n} u32s in three passes, {GROUPS} groups of {WG}: first run {:.2?} (with the builds), then {best:.2?} ({gbs:.1} GB/s read and written); verified",
        times[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scan: {e}");
            ExitCode::FAILURE
        }
    }
}
