//! Launch overhead of the OpenCL backend against raw OpenCL calls on the same queue.
//!
//! `cargo run --release -p sycl-backend-opencl --example launch_overhead [iterations]`
//!
//! For every OpenCL device: an empty kernel, (a) submitted and waited one at a time, (b)
//! submitted N times then waited once; each through the backend (`Queue::launch`) and through
//! raw `clEnqueueNDRangeKernel` on the backend's own `cl_command_queue` / `cl_kernel`.

use std::sync::Arc;
use std::time::Instant;

use sycl_backend::{KernelArg, KernelSource, LaunchRange, QueueProperties};
use sycl_backend_opencl::sys;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let backend = match sycl_backend_opencl::load() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no OpenCL: {e}");
            return;
        }
    };
    let api = match sys::Api::load() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("no OpenCL: {e}");
            return;
        }
    };
    for platform in backend.platforms() {
        for device in platform.devices() {
            let ctx = platform
                .create_context(std::slice::from_ref(&device))
                .expect("context");
            let q = ctx
                .create_queue(
                    &device,
                    QueueProperties {
                        in_order: true,
                        enable_profiling: false,
                    },
                )
                .expect("queue");
            let bundle = ctx
                .build_kernel_bundle(
                    std::slice::from_ref(&device),
                    &KernelSource::OpenClC("kernel void empty(int x) {}"),
                    "",
                )
                .expect("build");
            let k = bundle.kernel("empty").expect("kernel");
            let raw_q = q
                .as_any()
                .downcast_ref::<sycl_backend_opencl::Queue>()
                .expect("opencl queue")
                .raw();
            let raw_k = k
                .as_any()
                .downcast_ref::<sycl_backend_opencl::Kernel>()
                .expect("opencl kernel")
                .raw();
            let range = LaunchRange {
                dims: 1,
                global: [1, 1, 1],
                local: None,
            };
            let x = 0i32.to_ne_bytes();
            let args = [KernelArg::Scalar(&x)];
            let launch = || {
                // SAFETY: no pointer arguments.
                unsafe { q.launch(&k, range, &args, &[]) }.expect("launch")
            };
            let raw_launch = || {
                let mut ev: sys::cl_event = std::ptr::null_mut();
                let global = [1usize];
                // SAFETY: live queue and kernel (its argument was set by the backend above).
                let rc = unsafe {
                    (api.clEnqueueNDRangeKernel)(
                        raw_q,
                        raw_k,
                        1,
                        std::ptr::null(),
                        global.as_ptr(),
                        std::ptr::null(),
                        0,
                        std::ptr::null(),
                        &mut ev,
                    )
                };
                assert_eq!(rc, 0);
                ev
            };
            // Warm up (and set the argument once).
            for _ in 0..100 {
                launch().wait().expect("wait");
            }
            let per = |t: Instant, n: usize| t.elapsed().as_secs_f64() * 1e6 / n as f64;
            let m = n / 10;
            let t = Instant::now();
            for _ in 0..m {
                launch().wait().expect("wait");
            }
            let sycl_sync = per(t, m);
            let t = Instant::now();
            for _ in 0..m {
                let ev = raw_launch();
                // SAFETY: live event, released once.
                unsafe {
                    assert_eq!((api.clWaitForEvents)(1, &ev), 0);
                    (api.clReleaseEvent)(ev);
                }
            }
            let raw_sync = per(t, m);
            let t = Instant::now();
            let mut events: Vec<Arc<dyn sycl_backend::Event>> = Vec::with_capacity(n);
            for _ in 0..n {
                events.push(launch());
            }
            q.wait().expect("wait");
            let sycl_batch = per(t, n);
            drop(events);
            let t = Instant::now();
            let mut raw_events = Vec::with_capacity(n);
            for _ in 0..n {
                raw_events.push(raw_launch());
            }
            // SAFETY: live queue; then every event released once.
            unsafe {
                assert_eq!((api.clFinish)(raw_q), 0);
                for ev in raw_events {
                    (api.clReleaseEvent)(ev);
                }
            }
            let raw_batch = per(t, n);
            println!(
                "[{} / {}] submit+wait: backend {sycl_sync:.2} us, raw {raw_sync:.2} us | {n} submits + wait: backend {sycl_batch:.2} us/launch, raw {raw_batch:.2} us/launch",
                platform.info().name,
                device.info().name
            );
        }
    }
}
