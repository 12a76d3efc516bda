//! C = A * B for square `f32` matrices, one `#[sycl::kernel]` with a register tile from const
//! generics: each work-item of a 16 x 16 group computes a `TM` x `TM` block of C in a private
//! array (`[0.0f32; TT]`, `TT` = `TM` * `TM`: Rust's const generics cannot compute the product
//! as a length, so the launch names both), from 16-deep tiles of A and B in local memory.
//! Every access is bounds-checked in the source; the macro proves them for each instance (the
//! tiles' indices from the group size and `TM`, the matrices' under a guard the host
//! evaluates), so the built program has none left on the hot path.
//!
//! The inputs are small integers, so every sum is exact: the result must equal the host's.
//!
//! ```text
//! cargo run --release --example sgemm
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example sgemm
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

/// C = A * B, n x n row-major, n a multiple of 16 * TM.
#[sycl::kernel]
fn sgemm<const TM: usize, const TT: usize>(a: &[f32], b: &[f32], c: &mut [f32]) {
    // A's block transposed (at[k * 64 + row]) and B's block (bt[k * 64 + col]), 16 deep.
    let at = local_array::<f32, 1024>();
    let bt = local_array::<f32, 1024>();
    let n = global_range(0) * TM;
    let ty = local_id(0);
    let tx = local_id(1);
    let bm = 16 * TM;
    let row0 = group_id(0) * bm;
    let col0 = group_id(1) * bm;
    let lin = ty * 16 + tx;
    let mut acc = [0.0f32; TT];
    let mut ar = [0.0f32; TM];
    let mut br = [0.0f32; TM];
    for kb in (0..n).step_by(16) {
        // 256 work-items load the 16 * bm elements of each block, TM each.
        for i in 0..TM {
            let e = lin + i * 256;
            let r = e / 16;
            let k = e % 16;
            at[k * 64 + r] = a[(row0 + r) * n + kb + k];
            let k2 = e / bm;
            let cc = e % bm;
            bt[k2 * 64 + cc] = b[(kb + k2) * n + col0 + cc];
        }
        barrier();
        for k in 0..16 {
            for i in 0..TM {
                ar[i] = at[k * 64 + ty * TM + i];
                br[i] = bt[k * 64 + tx * TM + i];
            }
            for i in 0..TM {
                for j in 0..TM {
                    acc[i * TM + j] = ar[i].mul_add(br[j], acc[i * TM + j]);
                }
            }
        }
        barrier();
    }
    for i in 0..TM {
        for j in 0..TM {
            c[(row0 + ty * TM + i) * n + col0 + tx * TM + j] = acc[i * TM + j];
        }
    }
}

/// The register tile's side, and its elements.
const TM: usize = 4;
const TT: usize = TM * TM;

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("sgemm on {} ({})", device.name(), device.backend());
    let n: usize = if device.is_gpu() { 2048 } else { 512 };
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 3) % 5) as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 9) as f32 - 4.0).collect();
    let da = sycl::malloc_device::<f32>(n * n, &q)?;
    let db = sycl::malloc_device::<f32>(n * n, &q)?;
    let dc = sycl::malloc_device::<f32>(n * n, &q)?;
    q.write(&da, &a)?;
    q.write(&db, &b)?;
    let range = Range::d2(n / TM, n / TM).with_local([16, 16, 1]);
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        q.parallel_for(range, &[], sgemm::<TM, TT>(&da, &db, &dc))?
            .wait()?;
        times.push(start.elapsed());
    }
    let got = q.to_vec(&dc)?;
    // The host's product, row by row (exact: small integers).
    for i in 0..n {
        let mut row = vec![0.0f32; n];
        for k in 0..n {
            let aik = a[i * n + k];
            for (j, r) in row.iter_mut().enumerate() {
                *r += aik * b[k * n + j];
            }
        }
        if let Some(j) = (0..n).find(|&j| got[i * n + j] != row[j]) {
            return Err(sycl::Error::new(
                sycl::Errc::Runtime,
                format!("C[{i}][{j}] is {}, the host's {}", got[i * n + j], row[j]),
            ));
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gflops = 2.0 * (n as f64).powi(3) / best.as_secs_f64() / 1e9;
    println!(
        "sgemm: {n} x {n}, {TM} x {TM} register tiles: first run {:.2?} (with the build), then {best:.2?} ({gflops:.1} GFLOP/s); verified",
        times[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sgemm: {e}");
            ExitCode::FAILURE
        }
    }
}
