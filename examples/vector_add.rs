//! Vector add on the default device, with one kernel written in Rust (`#[sycl::kernel]`) that
//! runs as Rust on the native CPU device, as OpenCL C on OpenCL devices and as CUDA C++ on
//! CUDA devices. Checks its result.
//!
//! ```text
//! cargo run --release --example vector_add
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example vector_add
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

#[sycl::kernel]
fn vadd(a: &[f32], b: &[f32], c: &mut [f32]) {
    let i = global_id(0);
    c[i] = a[i] + b[i];
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("vector_add on {} ({})", device.name(), device.backend());
    let n = 1 << 22;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (n - i) as f32).collect();
    let (da, db, dc) = (
        sycl::malloc_device::<f32>(n, &q)?,
        sycl::malloc_device::<f32>(n, &q)?,
        sycl::malloc_device::<f32>(n, &q)?,
    );
    q.write(&da, &a)?;
    q.write(&db, &b)?;
    // The first launch in a context builds the GPU program (cached for the context's life):
    // time it apart from a second launch.
    let start = Instant::now();
    q.parallel_for(Range::d1(n), &[], vadd(&da, &db, &dc))?
        .wait()?;
    let first = start.elapsed();
    q.fill(&dc, 0.0f32, &[])?.wait()?;
    let start = Instant::now();
    q.parallel_for(Range::d1(n), &[], vadd(&da, &db, &dc))?
        .wait()?;
    let second = start.elapsed();
    let c = q.to_vec(&dc)?;
    if let Some(i) = c.iter().position(|&x| x != n as f32) {
        return Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!("c[{i}] = {}, expected {n}", c[i]),
        ));
    }
    println!(
        "vector_add: {n} elements, first launch {first:.2?} (with the build), then {second:.2?}: verified"
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vector_add: {e}");
            ExitCode::FAILURE
        }
    }
}
