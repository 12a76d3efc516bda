//! Layer normalisation over `f16` rows: `y = (x - mean) / sqrt(var + eps) * gamma + beta`,
//! one work-group per row, `f16` in and out (`gamma`, `beta` too), `f32` statistics from two
//! group sums. Verified against the host (the `half` crate in `f32`) within one `f16` ulp.
//!
//! ```text
//! cargo run --release --example layer_norm
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example layer_norm
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::half::f16;
use sycl::{Device, Queue, Range};

/// Work-items per row (a work-group).
const WG: usize = 256;
/// Elements per row: two per work-item.
const COLS: usize = 2 * WG;
const EPS: f32 = 1e-5;

#[sycl::kernel]
fn layer_norm_f16(x: &[f16], gamma: &[f16], beta: &[f16], y: &mut [f16], eps: f32) {
    let row = group_id(0) * 512;
    let l = local_id(0);
    let a = x[row + l].to_f32();
    let b = x[row + l + 256].to_f32();
    let total = group_sum(a + b);
    let mean = total / 512.0;
    let da = a - mean;
    let db = b - mean;
    let squares = group_sum(da * da + db * db);
    let var = squares / 512.0;
    let rstd = 1.0f32 / (var + eps).sqrt();
    y[row + l] = f16::from_f32(da * rstd * gamma[l].to_f32() + beta[l].to_f32());
    y[row + l + 256] = f16::from_f32(db * rstd * gamma[l + 256].to_f32() + beta[l + 256].to_f32());
}

fn layer_norm_row(x: &[f16], gamma: &[f16], beta: &[f16]) -> Vec<f16> {
    let v: Vec<f32> = x.iter().map(|h| h.to_f32()).collect();
    let mean = v.iter().sum::<f32>() / v.len() as f32;
    let var = v.iter().map(|a| (a - mean) * (a - mean)).sum::<f32>() / v.len() as f32;
    let rstd = 1.0 / (var + EPS).sqrt();
    v.iter()
        .zip(gamma.iter().zip(beta))
        .map(|(a, (g, b))| f16::from_f32((a - mean) * rstd * g.to_f32() + b.to_f32()))
        .collect()
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("layer_norm on {} ({})", device.name(), device.backend());
    let rows = 8192;
    let n = rows * COLS;
    let val = |i: u64, scale: f32| {
        ((i.wrapping_mul(2_654_435_761) >> 11) & 0x3FF) as f32 / 1024.0 * scale
    };
    let host: Vec<f16> = (0..n as u64)
        .map(|i| f16::from_f32(val(i, 6.0) - 3.0 + (i as usize / COLS % 5) as f32))
        .collect();
    let gamma: Vec<f16> = (0..COLS as u64)
        .map(|i| f16::from_f32(0.5 + val(i + 7, 1.0)))
        .collect();
    let beta: Vec<f16> = (0..COLS as u64)
        .map(|i| f16::from_f32(val(i + 3, 0.5) - 0.25))
        .collect();
    let x = sycl::malloc_device::<f16>(n, &q)?;
    let g = sycl::malloc_device::<f16>(COLS, &q)?;
    let b = sycl::malloc_device::<f16>(COLS, &q)?;
    let y = sycl::malloc_device::<f16>(n, &q)?;
    q.write(&x, &host)?;
    q.write(&g, &gamma)?;
    q.write(&b, &beta)?;
    let range = Range::d1(rows * WG).with_local([WG, 1, 1]);
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        q.parallel_for(range, &[], layer_norm_f16(&x, &g, &b, &y, EPS))?
            .wait()?;
        times.push(start.elapsed());
    }
    let got = q.to_vec(&y)?;
    for (r, (xs, ys)) in host.chunks(COLS).zip(got.chunks(COLS)).enumerate() {
        let want = layer_norm_row(xs, &gamma, &beta);
        for (c, (gv, wv)) in ys.iter().zip(&want).enumerate() {
            let (gv, wv) = (gv.to_f32(), wv.to_f32());
            // One f16 ulp of the result, or of 2^-14 near zero (subnormal range).
            let tol = (wv.abs() / 1024.0).max(1.0 / 16384.0);
            if (gv - wv).abs() > tol {
                return Err(sycl::Error::new(
                    sycl::Errc::Runtime,
                    format!("row {r}, column {c}: {gv:e}, the host's {wv:e}"),
                ));
            }
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gbs = (2 * n * 2) as f64 / best.as_secs_f64() / 1e9;
    println!(
        "layer_norm: {rows} rows of {COLS} f16: first launch {:.2?} (with the build), then {best:.2?} ({gbs:.1} GB/s); verified within one f16 ulp",
        times[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("layer_norm: {e}");
            ExitCode::FAILURE
        }
    }
}
