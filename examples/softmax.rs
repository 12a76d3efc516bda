//! Row-wise softmax over `bf16` activations, the shape of an attention or a classifier head:
//! one work-group per row, `bf16` in and out, `f32` accumulation. Each work-item loads four
//! elements of its row, the group finds the row's maximum (`group_max`) and the sum of
//! `exp(x - max)` (`group_sum`), and each work-item writes its four results rounded to `bf16`.
//! Verified against the host (the `half` crate in `f32`): within one `bf16` ulp, as the
//! devices' `exp` may differ from the host's by a few `f32` ulps, and each row sums to 1.
//!
//! ```text
//! cargo run --release --example softmax
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example softmax
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::half::bf16;
use sycl::{Device, Queue, Range};

/// Work-items per row (a work-group).
const WG: usize = 256;
/// Elements per row: four per work-item.
const COLS: usize = 4 * WG;

#[sycl::kernel]
fn softmax_bf16(x: &[bf16], y: &mut [bf16]) {
    let row = group_id(0) * 1024;
    let l = local_id(0);
    // Work-item l takes elements l, l + 256, l + 512, l + 768: neighbours read neighbours.
    let a = x[row + l].to_f32();
    let b = x[row + l + 256].to_f32();
    let c = x[row + l + 512].to_f32();
    let d = x[row + l + 768].to_f32();
    let m = group_max(a.max(b).max(c.max(d)));
    let ea = (a - m).exp();
    let eb = (b - m).exp();
    let ec = (c - m).exp();
    let ed = (d - m).exp();
    let s = group_sum((ea + eb) + (ec + ed));
    let r = 1.0f32 / s;
    y[row + l] = bf16::from_f32(ea * r);
    y[row + l + 256] = bf16::from_f32(eb * r);
    y[row + l + 512] = bf16::from_f32(ec * r);
    y[row + l + 768] = bf16::from_f32(ed * r);
}

/// The host's softmax of one row, in `f32` from the `bf16` inputs, rounded to `bf16`.
fn softmax_row(x: &[bf16]) -> Vec<bf16> {
    let v: Vec<f32> = x.iter().map(|h| h.to_f32()).collect();
    let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = v.iter().map(|&a| (a - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.iter().map(|&a| bf16::from_f32(a / s)).collect()
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("softmax on {} ({})", device.name(), device.backend());
    let rows = 4096;
    let n = rows * COLS;
    // Logits in about [-8, 8), some rows shifted far up (the maximum keeps exp finite).
    let host: Vec<bf16> = (0..n as u64)
        .map(|i| {
            let r = ((i.wrapping_mul(2_654_435_761) >> 9) & 0xFFFF) as f32 / 4096.0 - 8.0;
            let shift = if (i as usize / COLS) % 7 == 0 {
                60.0
            } else {
                0.0
            };
            bf16::from_f32(r + shift)
        })
        .collect();
    let x = sycl::malloc_device::<bf16>(n, &q)?;
    let y = sycl::malloc_device::<bf16>(n, &q)?;
    q.write(&x, &host)?;
    let range = Range::d1(rows * WG).with_local([WG, 1, 1]);
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        q.parallel_for(range, &[], softmax_bf16(&x, &y))?.wait()?;
        times.push(start.elapsed());
    }
    let got = q.to_vec(&y)?;
    let ulp = 1.0 / 128.0; // bf16 has 8 significant bits
    for (r, (xs, ys)) in host.chunks(COLS).zip(got.chunks(COLS)).enumerate() {
        let want = softmax_row(xs);
        for (c, (g, w)) in ys.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f32(), w.to_f32());
            if (g - w).abs() > ulp * w.abs() + 1e-30 {
                return Err(sycl::Error::new(
                    sycl::Errc::Runtime,
                    format!("row {r}, column {c}: {g:e}, the host's {w:e}"),
                ));
            }
        }
        let sum: f32 = ys.iter().map(|h| h.to_f32()).sum();
        if (sum - 1.0).abs() > 0.02 {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!("row {r} sums to {sum}"),
            ));
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gbs = (2 * n * 2) as f64 / best.as_secs_f64() / 1e9;
    println!(
        "softmax: {rows} rows of {COLS} bf16: first launch {:.2?} (with the build), then {best:.2?} ({gbs:.1} GB/s); verified within one bf16 ulp",
        times[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("softmax: {e}");
            ExitCode::FAILURE
        }
    }
}
