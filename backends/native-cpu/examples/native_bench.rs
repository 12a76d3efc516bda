//! Measures the native CPU backend: submit+wait latency and copy bandwidth.
//!
//! `cargo run --release -p sycl-backend-native-cpu --example native_bench`

use std::sync::Arc;
use std::time::{Duration, Instant};

use sycl_backend::{ClosureKernel, LaunchRange, QueueProperties, UsmKind};

fn per_call(n: u32, mut f: impl FnMut()) -> Duration {
    for _ in 0..n / 10 {
        f();
    }
    let t0 = Instant::now();
    for _ in 0..n {
        f();
    }
    t0.elapsed() / n
}

fn main() -> sycl_backend::Result<()> {
    let backend = sycl_backend_native_cpu::load()?;
    let platform = backend.platforms().remove(0);
    let device = platform.devices().remove(0);
    let ctx = platform.create_context(std::slice::from_ref(&device))?;
    let q = ctx.create_queue(
        &device,
        QueueProperties {
            in_order: true,
            enable_profiling: false,
        },
    )?;
    println!(
        "device: {} ({} compute units)",
        device.info().name,
        device.info().max_compute_units
    );

    let noop: ClosureKernel = Arc::new(|_| {});
    let one = LaunchRange {
        dims: 1,
        global: [1, 1, 1],
        local: None,
    };
    let t = per_call(50_000, || {
        q.parallel_for_closure(one, noop.clone(), &[])
            .unwrap()
            .wait()
            .unwrap()
    });
    println!("submit+wait, empty 1-item parallel_for: {t:?}");
    let t = per_call(50_000, || q.barrier(&[]).unwrap().wait().unwrap());
    println!("submit+wait, barrier:                   {t:?}");
    let t = per_call(20_000, || {
        q.host_task(Box::new(|| {}), &[]).unwrap().wait().unwrap()
    });
    println!("submit+wait, empty host_task:           {t:?}");
    let big = LaunchRange {
        dims: 1,
        global: [1 << 20, 1, 1],
        local: None,
    };
    let t = per_call(2_000, || {
        q.parallel_for_closure(big, noop.clone(), &[])
            .unwrap()
            .wait()
            .unwrap()
    });
    println!("submit+wait, empty 1M-item parallel_for: {t:?}");

    for size in [16usize << 20, 64 << 20, 256 << 20] {
        let a = ctx.usm_alloc(UsmKind::Device, Some(&device), size, 0)?;
        let b = ctx.usm_alloc(UsmKind::Device, Some(&device), size, 0)?;
        // SAFETY: both allocations are `size` bytes and only this program uses them.
        unsafe { q.fill(a, &[1], size, &[])?.wait()? };
        // SAFETY: as above.
        unsafe { q.fill(b, &[2], size, &[])?.wait()? };
        let reps = (1u32 << 30) / size as u32;
        // SAFETY: as above.
        let t_q = per_call(reps, || unsafe {
            q.memcpy(b, a, size, &[]).unwrap().wait().unwrap()
        });
        // SAFETY: as above; a plain single-threaded copy for comparison.
        let t_s = per_call(reps, || unsafe {
            std::ptr::copy_nonoverlapping(a as *const u8, b as *mut u8, size)
        });
        let gbs = |t: Duration| size as f64 / t.as_secs_f64() / 1e9;
        println!(
            "memcpy {:>4} MiB: queue {:6.1} GB/s, single thread {:6.1} GB/s",
            size >> 20,
            gbs(t_q),
            gbs(t_s)
        );
        // SAFETY: the queue is idle.
        unsafe {
            ctx.usm_free(a)?;
            ctx.usm_free(b)?;
        }
    }
    Ok(())
}
