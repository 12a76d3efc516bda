//! Vector add on the default device: a Rust closure on the native CPU device, a CUDA C or
//! OpenCL C kernel on GPUs. Checks its result.
//!
//! ```text
//! cargo run --release --example vector_add
//! ONEAPI_DEVICE_SELECTOR=opencl:* cargo run --release --example vector_add
//! ```

use sycl::{Aspect, Device, KernelArg, KernelBundle, Queue, Range};

fn main() -> Result<(), sycl::Error> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
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
    let start = std::time::Instant::now();
    if device.has(Aspect::ExtSyclRsClosureKernels) {
        let (va, vb, vc) = (da.view()?, db.view()?, dc.view()?);
        q.parallel_for(Range::d1(n), &[], move |it: sycl::Item| {
            let i = it.get(0);
            vc.set(i, va.get(i) + vb.get(i));
        })?
        .wait()?;
    } else {
        let source = if device.has(Aspect::ExtSyclRsKernelCompilerCuda) {
            sycl::Source::CudaC("extern \"C\" __global__ void vadd(const float* a, const float* b, float* c, unsigned n) {\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n")
        } else {
            sycl::Source::OpenClC("__kernel void vadd(__global const float* a, __global const float* b, __global float* c, uint n) {\n  size_t i = get_global_id(0); if (i < n) c[i] = a[i] + b[i]; }\n")
        };
        let bundle = KernelBundle::build(q.context(), &[], source, "")?;
        let k = bundle.kernel("vadd")?;
        let args = [
            KernelArg::usm(&da),
            KernelArg::usm(&db),
            KernelArg::usm(&dc),
            KernelArg::scalar(&(n as u32)),
        ];
        // SAFETY: vadd reads a[i], b[i] and writes c[i] only for i < n, the length of all three;
        // the arguments match its parameters.
        unsafe {
            q.launch(
                &k,
                Range::d1(n.div_ceil(256) * 256).with_local([256, 1, 1]),
                &args,
                &[],
            )
        }?
        .wait()?;
    }
    let elapsed = start.elapsed();
    let c = q.to_vec(&dc)?;
    let bad = c.iter().position(|&x| x != n as f32);
    match bad {
        None => {
            println!(
                "vector_add: {n} elements on {} ({}) in {elapsed:?}: OK",
                device.name(),
                device.backend()
            );
            Ok(())
        }
        Some(i) => Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!("c[{i}] = {}, expected {n}", c[i]),
        )),
    }
}
