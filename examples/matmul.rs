//! Tiled matrix multiply `C = A B` (`A` m x k, `B` k x n, row-major `f32`) with one
//! `#[sycl::kernel]`: each 16 x 16 work-group walks the `k` dimension a tile at a time,
//! loading a 16 x 16 tile of `A` and one of `B` into work-group local memory, waiting at a
//! barrier, and accumulating with `mul_add` (one rounding, on every device). Checked against
//! a host product in `f64`, within the error bound of an `f32` dot product of length `k`.
//!
//! ```text
//! cargo run --release --example matmul
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example matmul
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use sycl::{Device, Queue, Range};

/// Tile side: work-groups are TS x TS, the kernel's two local arrays TS * TS elements each.
/// Matrix sides must be multiples of it.
const TS: usize = 16;

#[sycl::kernel]
fn matmul(a: &[f32], b: &[f32], c: &mut [f32], n: usize, k: usize) {
    let ta = local_array::<f32, { 16 * 16 }>();
    let tb = local_array::<f32, { 16 * 16 }>();
    let row = global_id(0);
    let col = global_id(1);
    let lr = local_id(0);
    let lc = local_id(1);
    let mut acc = 0.0f32;
    // `k / 16` is the same in every work-item (uniform), so the barriers inside are met by the
    // whole group.
    for t in 0..(k / 16) {
        ta[lr * 16 + lc] = a[row * k + t * 16 + lc];
        tb[lr * 16 + lc] = b[(t * 16 + lr) * n + col];
        barrier();
        for e in 0..16 {
            acc = ta[lr * 16 + e].mul_add(tb[e * 16 + lc], acc);
        }
        barrier();
    }
    c[row * n + col] = acc;
}

/// A reproducible value in [-1, 1).
fn value(i: usize, salt: u64) -> f32 {
    let h = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("matmul on {} ({})", device.name(), device.backend());
    // Smaller in debug builds, where the native CPU device runs unoptimised Rust.
    let (m, k, n) = if cfg!(debug_assertions) {
        (128, 96, 160)
    } else {
        (512, 512, 512)
    };
    assert!(m % TS == 0 && k % TS == 0 && n % TS == 0);
    let ha: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
    let hb: Vec<f32> = (0..k * n).map(|i| value(i, 2)).collect();
    let a = sycl::malloc_device::<f32>(m * k, &q)?;
    let b = sycl::malloc_device::<f32>(k * n, &q)?;
    let c = sycl::malloc_device::<f32>(m * n, &q)?;
    q.write(&a, &ha)?;
    q.write(&b, &hb)?;
    let range = Range::d2(m, n).with_local([TS, TS, 1]);

    // The first launch in a context builds the GPU program: time it apart from the next.
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..2 {
        q.fill(&c, f32::NAN, &[])?.wait()?;
        let start = Instant::now();
        q.parallel_for(range, &[], matmul(&a, &b, &c, n, k))?
            .wait()?;
        times.push(start.elapsed());
    }
    let got = q.to_vec(&c)?;

    // Host product in f64 (rows of B streamed for locality), and sum |a| |b| per element for
    // the bound: an f32 dot product of length k errs by at most about k * eps * sum |a_i b_i|.
    let mut want = vec![0.0f64; m * n];
    let mut mag = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = ha[i * k + p] as f64;
            for j in 0..n {
                let y = hb[p * n + j] as f64;
                want[i * n + j] += x * y;
                mag[i * n + j] += (x * y).abs();
            }
        }
    }
    let gamma = k as f64 * f32::EPSILON as f64;
    let mut worst = 0.0f64;
    for i in 0..m * n {
        let err = (got[i] as f64 - want[i]).abs();
        // NaN (an element never written) fails too.
        if err.is_nan() || err > gamma * mag[i] + f64::MIN_POSITIVE {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!(
                    "C[{}][{}] = {}, expected {} (error {err:e}, bound {:e})",
                    i / n,
                    i % n,
                    got[i],
                    want[i],
                    gamma * mag[i]
                ),
            ));
        }
        if mag[i] > 0.0 {
            worst = worst.max(err / mag[i]);
        }
    }
    let gflops = 2.0 * (m * n * k) as f64 / times[1].as_secs_f64() / 1e9;
    println!(
        "matmul: {m} x {k} times {k} x {n}, tiles {TS} x {TS}: first launch {:.2?} (with the build), then {:.2?} ({gflops:.2} GFLOP/s); largest error {worst:.1e} of sum |a b| (bound {gamma:.1e}): verified",
        times[0], times[1]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("matmul: {e}");
            ExitCode::FAILURE
        }
    }
}
