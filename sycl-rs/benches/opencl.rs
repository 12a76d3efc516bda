//! OpenCL benchmarks, each beside the same operation made with raw OpenCL calls in the same run.
//!
//! `cargo bench -p sycl-rs --bench opencl` (add `-- --quick` for a short run).
//!
//! For every OpenCL device: an empty kernel submitted and waited one at a time, 10,000 empty
//! kernels submitted then waited once, and 256 MiB host->device / device->host / fill. The raw
//! side has its own `cl_context` and in-order `cl_command_queue` on the same `cl_device_id`,
//! and its own program built from the same source. Latency rows print ours/raw of the times
//! (lower is better); bandwidth rows print ours/raw of the GB/s (higher is better).
//!
//! IPC (issue 33), for every OpenCL device with `ext_oneapi_ipc_memory` beside the native CPU
//! backend in the same run: a child process opens a 64 MiB export (cold: the first open in the
//! process; cached: again while it is open), copies out of it, and ping-pongs two IPC events
//! with the parent (signal counts). And a kernel over device USM (sealed memfd mappings on such
//! devices) beside the same kernel over the driver's own shared USM (target <= 1.05x).
#![allow(unsafe_code)]

mod common;
use common::{median, row, skip, time_it};
use std::ffi::{c_void, CString};
use std::time::Instant;

use sycl::ipc::{
    self,
    transport::{Channel, Listener},
};
use sycl::{
    Aspect, BackendKind, Device, DeviceSelector, Event, EventProperties, KernelArg, KernelBundle,
    Queue, Range,
};
use sycl_backend_opencl::result::info_string;
use sycl_backend_opencl::sys::{self, cl_int, cl_uint, Api};

const SRC: &str = "__kernel void empty() {}";
const BYTES: usize = 256 << 20;
const WORDS: usize = BYTES / 4;
const PATTERN: u32 = 0x1234_5678;
const BATCH: usize = 10_000;
const TARGET: f64 = 1.2;

fn gbs(t: f64) -> f64 {
    BYTES as f64 / t / 1e9
}

fn gb_row(name: &str, ours_t: f64, raw_t: f64) {
    row(name, "GB/s", gbs(ours_t), gbs(raw_t));
}

// ---------------------------------------------------------------- raw OpenCL

fn ok(rc: cl_int, what: &str) {
    assert_eq!(rc, sys::CL_SUCCESS, "{what} failed: {rc}");
}

/// The `cl_platform_id` and `cl_device_id` of `dev`: its platform by name, then the device at
/// its index there if the name matches, else the first device of that name.
fn find_raw_device(api: &Api, dev: &Device) -> Option<(sys::cl_platform_id, sys::cl_device_id)> {
    let mut n: cl_uint = 0;
    // SAFETY: count query.
    unsafe { (api.clGetPlatformIDs)(0, std::ptr::null_mut(), &mut n) };
    let mut plats = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `plats` holds `n` entries.
    unsafe { (api.clGetPlatformIDs)(n, plats.as_mut_ptr(), std::ptr::null_mut()) };
    for p in plats {
        // SAFETY: platform id from clGetPlatformIDs; buffer sizes from the helper.
        let pname = info_string(
            &|param, s, v, r| unsafe { (api.clGetPlatformInfo)(p, param, s, v, r) },
            sys::CL_PLATFORM_NAME,
            "clGetPlatformInfo",
        )
        .unwrap_or_default();
        if pname != dev.platform().name().trim() {
            continue;
        }
        let mut m: cl_uint = 0;
        // SAFETY: count query on a valid platform.
        unsafe {
            (api.clGetDeviceIDs)(p, sys::CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut m)
        };
        let mut ids = vec![std::ptr::null_mut(); m as usize];
        // SAFETY: `ids` holds `m` entries.
        unsafe {
            (api.clGetDeviceIDs)(
                p,
                sys::CL_DEVICE_TYPE_ALL,
                m,
                ids.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        let name_of = |d: sys::cl_device_id| {
            info_string(
                // SAFETY: device id from clGetDeviceIDs; buffer sizes from the helper.
                &|param, s, v, r| unsafe { (api.clGetDeviceInfo)(d, param, s, v, r) },
                sys::CL_DEVICE_NAME,
                "clGetDeviceInfo",
            )
            .unwrap_or_default()
        };
        let want = dev.name().trim();
        if let Some(&d) = ids.get(dev.index_in_platform()) {
            if name_of(d) == want {
                return Some((p, d));
            }
        }
        if let Some(&d) = ids.iter().find(|&&d| name_of(d) == want) {
            return Some((p, d));
        }
    }
    None
}

/// Raw context, in-order queue and `empty` kernel on one device.
struct Raw<'a> {
    api: &'a Api,
    platform: sys::cl_platform_id,
    dev: sys::cl_device_id,
    ctx: sys::cl_context,
    q: sys::cl_command_queue,
    prog: sys::cl_program,
    kernel: sys::cl_kernel,
}

impl<'a> Raw<'a> {
    fn new(api: &'a Api, platform: sys::cl_platform_id, dev: sys::cl_device_id) -> Raw<'a> {
        let mut rc = 0;
        let props = [sys::CL_CONTEXT_PLATFORM, platform as isize, 0];
        // SAFETY: valid platform/device ids; zero-terminated property list; no callback.
        let ctx = unsafe {
            (api.clCreateContext)(props.as_ptr(), 1, &dev, None, std::ptr::null_mut(), &mut rc)
        };
        ok(rc, "clCreateContext");
        // SAFETY: live context and its device; no properties = in-order, no profiling.
        let q = unsafe {
            match (
                api.clCreateCommandQueueWithProperties,
                api.clCreateCommandQueue,
            ) {
                (Some(f), _) => f(ctx, dev, std::ptr::null(), &mut rc),
                (None, Some(f)) => f(ctx, dev, 0, &mut rc),
                (None, None) => panic!("no clCreateCommandQueue"),
            }
        };
        ok(rc, "clCreateCommandQueue");
        let src = CString::new(SRC).unwrap();
        let src_ptr = src.as_ptr();
        // SAFETY: one NUL-terminated string (null lengths).
        let prog =
            unsafe { (api.clCreateProgramWithSource)(ctx, 1, &src_ptr, std::ptr::null(), &mut rc) };
        ok(rc, "clCreateProgramWithSource");
        // SAFETY: live program, one device of its context, empty options, synchronous build.
        let rc = unsafe {
            (api.clBuildProgram)(prog, 1, &dev, c"".as_ptr(), None, std::ptr::null_mut())
        };
        ok(rc, "clBuildProgram");
        let mut rc = 0;
        // SAFETY: built program; NUL-terminated kernel name.
        let kernel = unsafe { (api.clCreateKernel)(prog, c"empty".as_ptr(), &mut rc) };
        ok(rc, "clCreateKernel");
        Raw {
            api,
            platform,
            dev,
            ctx,
            q,
            prog,
            kernel,
        }
    }

    /// Enqueues the empty kernel on one work-item; returns its event, or none if `want_event`
    /// is false.
    #[inline]
    fn enqueue(&self, want_event: bool) -> sys::cl_event {
        let mut ev: sys::cl_event = std::ptr::null_mut();
        let global = [1usize];
        // SAFETY: live queue and argument-less kernel.
        let rc = unsafe {
            (self.api.clEnqueueNDRangeKernel)(
                self.q,
                self.kernel,
                1,
                std::ptr::null(),
                global.as_ptr(),
                std::ptr::null(),
                0,
                std::ptr::null(),
                if want_event {
                    &mut ev
                } else {
                    std::ptr::null_mut()
                },
            )
        };
        ok(rc, "clEnqueueNDRangeKernel");
        ev
    }

    fn finish(&self) {
        // SAFETY: live queue.
        ok(unsafe { (self.api.clFinish)(self.q) }, "clFinish");
    }

    fn release_event(&self, ev: sys::cl_event) {
        // SAFETY: an event returned by an enqueue, released once.
        unsafe { (self.api.clReleaseEvent)(ev) };
    }
}

impl Drop for Raw<'_> {
    fn drop(&mut self) {
        // SAFETY: objects made in `new`, each released once, the queue idle after clFinish.
        unsafe {
            (self.api.clFinish)(self.q);
            (self.api.clReleaseKernel)(self.kernel);
            (self.api.clReleaseProgram)(self.prog);
            (self.api.clReleaseCommandQueue)(self.q);
            (self.api.clReleaseContext)(self.ctx);
        }
    }
}

// ---------------------------------------------------------------- kernels

fn kernel_latency(q: &Queue, raw: &Raw<'_>, reps: usize, trials: usize) {
    let bundle = KernelBundle::build(
        q.context(),
        std::slice::from_ref(q.device()),
        sycl::Source::OpenClC(SRC),
        "",
    )
    .unwrap();
    let k = bundle.kernel("empty").unwrap();
    let ours_once = || {
        // SAFETY: `empty` takes no parameters and touches no memory.
        unsafe { q.launch(&k, Range::d1(1), &[], &[]) }
            .unwrap()
            .wait()
            .unwrap()
    };
    let raw_once = || {
        let ev = raw.enqueue(true);
        // SAFETY: a live event of this queue.
        ok(
            unsafe { (raw.api.clWaitForEvents)(1, &ev) },
            "clWaitForEvents",
        );
        raw.release_event(ev);
    };
    for _ in 0..200 {
        ours_once();
        raw_once();
    }
    // Alternate halves so that drift (frequency, other load) hits both sides alike.
    let (mut ours, mut raws) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        ours.extend(time_it(reps / 2, ours_once));
        raws.extend(time_it(reps / 2, raw_once));
    }
    row(
        "empty kernel submit+wait (clWaitForEvents)",
        "us",
        median(ours) * 1e6,
        median(raws) * 1e6,
    );

    // Raw with the explicit clFlush our wait does before clWaitForEvents (info: attributes
    // the difference between the two rows above).
    let raw_flush_once = || {
        let ev = raw.enqueue(true);
        // SAFETY: live queue and event of it.
        unsafe {
            ok((raw.api.clFlush)(raw.q), "clFlush");
            ok((raw.api.clWaitForEvents)(1, &ev), "clWaitForEvents");
        }
        raw.release_event(ev);
    };
    let raw_flush = median(time_it(reps / 2, raw_flush_once)) * 1e6;
    println!(
        "{:<46} raw  {raw_flush:>10.2} us",
        "  raw with clFlush before the wait (info)"
    );

    // Each returns (submitting, submitting + the final wait) per kernel.
    let ours_batch = || {
        let t = Instant::now();
        for _ in 0..BATCH {
            // SAFETY: `empty` takes no parameters and touches no memory.
            unsafe { q.launch(&k, Range::d1(1), &[], &[]) }.unwrap();
        }
        let s = t.elapsed().as_secs_f64();
        q.wait().unwrap();
        (s / BATCH as f64, t.elapsed().as_secs_f64() / BATCH as f64)
    };
    let raw_batch = |want_event: bool| {
        let t = Instant::now();
        for _ in 0..BATCH {
            let ev = raw.enqueue(want_event);
            if want_event {
                raw.release_event(ev);
            }
        }
        let s = t.elapsed().as_secs_f64();
        raw.finish();
        (s / BATCH as f64, t.elapsed().as_secs_f64() / BATCH as f64)
    };
    ours_batch();
    raw_batch(true);
    let (mut ours, mut raws, mut raws_noev) = (Vec::new(), Vec::new(), Vec::new());
    // Alternate which side goes first, so that neither always follows the other's tail.
    for i in 0..trials {
        if i % 2 == 0 {
            ours.push(ours_batch());
            raws.push(raw_batch(true));
        } else {
            raws.push(raw_batch(true));
            ours.push(ours_batch());
        }
        raws_noev.push(raw_batch(false));
    }
    let total = |v: &[(f64, f64)]| median(v.iter().map(|x| x.1 * 1e6).collect());
    let submit = |v: &[(f64, f64)]| median(v.iter().map(|x| x.0 * 1e6).collect());
    row(
        "10,000 empty kernels then one wait, per submit",
        "us",
        total(&ours),
        total(&raws),
    );
    row(
        "  of which the submit loop alone (info)",
        "us",
        submit(&ours),
        submit(&raws),
    );
    row(
        "  raw enqueueing without an event (info)",
        "us",
        total(&ours),
        total(&raws_noev),
    );
    let (ours, raws) = (total(&ours), total(&raws));
    let ratio = ours / raws;
    println!(
        "  {}: batched submit ours/raw {ratio:.3} (target <= {TARGET})",
        if ratio <= TARGET { "PASS" } else { "MISS" }
    );
}

// ---------------------------------------------------------------- bandwidth

fn check_all(v: &[u32], f: impl Fn(usize) -> u32, what: &str) {
    for i in [0, 1, 4097, v.len() / 2, v.len() - 2, v.len() - 1] {
        assert_eq!(v[i], f(i), "{what}: element {i}");
    }
    assert!(
        v.iter().enumerate().all(|(i, &x)| x == f(i)),
        "{what}: some element differs"
    );
}

fn bandwidth(q: &Queue, raw: &Raw<'_>, reps: usize) {
    let api = raw.api;
    let (Some(create), Some(write), Some(read), Some(fill), Some(release)) = (
        api.clCreateBuffer,
        api.clEnqueueWriteBuffer,
        api.clEnqueueReadBuffer,
        api.clEnqueueFillBuffer,
        api.clReleaseMemObject,
    ) else {
        println!("256 MiB transfers: skipped (the ICD loader lacks the buffer entry points)");
        return;
    };
    let dev = q.device();
    if !dev.has(Aspect::UsmDeviceAllocations) {
        println!("256 MiB transfers: skipped (no usm_device_allocations)");
        return;
    }
    if dev.max_mem_alloc_size() < BYTES as u64 {
        println!(
            "256 MiB transfers: skipped (max_mem_alloc_size {} bytes)",
            dev.max_mem_alloc_size()
        );
        return;
    }
    let usm = match sycl::malloc_device::<u32>(WORDS, q) {
        Ok(u) => u,
        Err(e) => {
            println!("256 MiB transfers: skipped (malloc_device of 256 MiB failed: {e})");
            return;
        }
    };
    let mut rc = 0;
    // SAFETY: live context; no host pointer.
    let mem = unsafe {
        create(
            raw.ctx,
            sys::CL_MEM_READ_WRITE,
            BYTES,
            std::ptr::null_mut(),
            &mut rc,
        )
    };
    ok(rc, "clCreateBuffer(256 MiB)");
    let src: Vec<u32> = (0..WORDS as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let expect = |i: usize| (i as u32).wrapping_mul(2_654_435_761);
    let mut dst = vec![0u32; WORDS];

    let ours_write = || q.write(&usm, &src).unwrap();
    let raw_write = || {
        // SAFETY: blocking write of BYTES bytes from `src`, which holds BYTES bytes.
        let rc = unsafe {
            write(
                raw.q,
                mem,
                sys::CL_TRUE,
                0,
                BYTES,
                src.as_ptr().cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        ok(rc, "clEnqueueWriteBuffer");
    };
    let ours_fill = || q.fill(&usm, PATTERN, &[]).unwrap().wait().unwrap();
    let raw_fill = || {
        // SAFETY: live buffer of BYTES bytes; the 4-byte pattern is copied at enqueue time.
        let rc = unsafe {
            fill(
                raw.q,
                mem,
                (&PATTERN as *const u32).cast(),
                4,
                0,
                BYTES,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        ok(rc, "clEnqueueFillBuffer");
        raw.finish();
    };
    let raw_read = |dst: &mut [u32]| {
        // SAFETY: blocking read of BYTES bytes into `dst`, which holds BYTES bytes.
        let rc = unsafe {
            read(
                raw.q,
                mem,
                sys::CL_TRUE,
                0,
                BYTES,
                dst.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        ok(rc, "clEnqueueReadBuffer");
    };

    // Host -> device (one warm-up each, which also first-touches the memory).
    ours_write();
    raw_write();
    let ours_t = median(time_it(reps, ours_write));
    let raw_t = median(time_it(reps, raw_write));
    gb_row("host->device 256 MiB (write vs WriteBuffer)", ours_t, raw_t);

    // Device -> host; both devices now hold `src`.
    q.read(&usm, &mut dst).unwrap();
    raw_read(&mut dst);
    let ours_t = median(time_it(reps, || q.read(&usm, &mut dst).unwrap()));
    check_all(&dst, expect, "ours: write then read");
    dst.fill(0);
    let raw_t = median(time_it(reps, || raw_read(&mut dst)));
    check_all(&dst, expect, "raw: WriteBuffer then ReadBuffer");
    gb_row("device->host 256 MiB (read vs ReadBuffer)", ours_t, raw_t);

    // Fill.
    ours_fill();
    raw_fill();
    let ours_t = median(time_it(reps, ours_fill));
    let raw_t = median(time_it(reps, raw_fill));
    q.read(&usm, &mut dst).unwrap();
    check_all(&dst, |_| PATTERN, "ours: fill");
    dst.fill(0);
    raw_read(&mut dst);
    check_all(&dst, |_| PATTERN, "raw: FillBuffer");
    gb_row("fill u32 256 MiB (fill vs FillBuffer)", ours_t, raw_t);

    // SAFETY: the buffer is idle (blocking calls, clFinish) and released once.
    unsafe { release(mem) };
    drop(usm);
    same_path(raw, reps, &src, &mut dst);
}

/// The same transfers through the entry points our backend itself uses (Intel USM, else SVM)
/// on the raw context, blocking: separates the runtime's cost from the memory kind's.
fn same_path(raw: &Raw<'_>, reps: usize, src: &[u32], dst: &mut [u32]) {
    let api = raw.api;
    // Intel USM and SVM copy and fill entry points share their C signatures.
    type Memcpy = sys::clEnqueueMemcpyINTEL_fn;
    type MemFill = sys::clEnqueueMemFillINTEL_fn;
    type Free<'a> = Box<dyn Fn(*mut c_void) + 'a>;
    // SAFETY: the platform id came from clGetPlatformIDs of `api`.
    let intel = unsafe { sys::UsmFns::load(api, raw.platform) };
    let ctx = raw.ctx;
    let (ptr, memcpy, mem_fill, free, label): (*mut c_void, Memcpy, MemFill, Free<'_>, &str) =
        if let Some(f) = intel {
            let mut rc = 0;
            // SAFETY: live context and its device; no properties.
            let p = unsafe { (f.device_alloc)(ctx, raw.dev, std::ptr::null(), BYTES, 0, &mut rc) };
            if rc != sys::CL_SUCCESS || p.is_null() {
                println!("  (same-path rows skipped: clDeviceMemAllocINTEL failed: {rc})");
                return;
            }
            // SAFETY: an idle allocation of this context, freed once.
            let free = Box::new(move |d| unsafe {
                (f.blocking_free)(ctx, d);
            });
            (p, f.memcpy, f.mem_fill, free, "Intel USM")
        } else {
            let (Some(alloc), Some(svm_free), Some(svm_copy), Some(svm_fill)) = (
                api.clSVMAlloc,
                api.clSVMFree,
                api.clEnqueueSVMMemcpy,
                api.clEnqueueSVMMemFill,
            ) else {
                println!("  (same-path rows skipped: no SVM entry points)");
                return;
            };
            let mut caps: sys::cl_bitfield = 0;
            // SAFETY: a cl_bitfield-sized out-param.
            unsafe {
                (api.clGetDeviceInfo)(
                    raw.dev,
                    sys::CL_DEVICE_SVM_CAPABILITIES,
                    std::mem::size_of_val(&caps),
                    (&raw mut caps).cast(),
                    std::ptr::null_mut(),
                )
            };
            let fine = caps & sys::CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0;
            let flags = sys::CL_MEM_READ_WRITE
                | if fine {
                    sys::CL_MEM_SVM_FINE_GRAIN_BUFFER
                } else {
                    0
                };
            // SAFETY: live context.
            let p = unsafe { alloc(ctx, flags, BYTES, 0) };
            if p.is_null() {
                println!("  (same-path rows skipped: clSVMAlloc of 256 MiB failed)");
                return;
            }
            // SAFETY: an idle SVM allocation of this context, freed once.
            let free = Box::new(move |d| unsafe { svm_free(ctx, d) });
            let label = if fine {
                "fine-grain SVM"
            } else {
                "coarse-grain SVM"
            };
            (p, svm_copy, svm_fill, free, label)
        };
    let copy = |d: *mut c_void, s: *const c_void| {
        // SAFETY: both ranges hold BYTES bytes; blocking.
        let rc = unsafe {
            memcpy(
                raw.q,
                sys::CL_TRUE,
                d,
                s,
                BYTES,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        ok(rc, "same-path memcpy");
    };
    let fill = |d: *mut c_void| {
        // SAFETY: `d` holds BYTES bytes; the pattern is copied at enqueue time.
        let rc = unsafe {
            mem_fill(
                raw.q,
                d,
                (&PATTERN as *const u32).cast(),
                4,
                BYTES,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        ok(rc, "same-path fill");
        raw.finish();
    };
    let s = src.as_ptr().cast::<c_void>();
    let d = dst.as_mut_ptr().cast::<c_void>();
    copy(ptr, s);
    let w = median(time_it(reps, || copy(ptr, s)));
    copy(d, ptr);
    let r = median(time_it(reps, || copy(d, ptr)));
    fill(ptr);
    let f = median(time_it(reps, || fill(ptr)));
    free(ptr);
    println!(
        "  raw through {label} (what ours uses): write {:.2} GB/s, read {:.2} GB/s, fill {:.2} GB/s",
        gbs(w),
        gbs(r),
        gbs(f)
    );
}

// ---------------------------------------------------------------- IPC

/// Tells a re-executed bench binary to play the IPC child.
const ROLE: &str = "SYCL_RS_OPENCL_BENCH_ROLE";
const IPC_BYTES: usize = 64 << 20;
const IPC_EVENT: EventProperties = EventProperties {
    enable_ipc: true,
    enable_profiling: false,
};

/// The child: args are the device selector, the channel, repetitions and ping-pong rounds.
fn ipc_child(args: &[String]) {
    let dev = DeviceSelector::filter(&args[0]).unwrap().select().unwrap();
    let ch = Channel::connect(&args[1]).unwrap();
    let (reps, rounds): (usize, u64) = (args[2].parse().unwrap(), args[3].parse().unwrap());
    let q = Queue::in_order(&dev).unwrap();
    let handle = ch.recv_handle().unwrap();
    let ping = ipc::event::open(&ch.recv_handle().unwrap(), q.context()).unwrap();
    let pong = ipc::event::open(&ch.recv_handle().unwrap(), q.context()).unwrap();
    let t = Instant::now();
    let held = ipc::memory::open::<u8>(&handle, q.context(), &dev).unwrap();
    let cold = t.elapsed().as_secs_f64() * 1e6;
    let cached = median(time_it(reps, || {
        let again = ipc::memory::open::<u8>(&handle, q.context(), &dev).unwrap();
        ipc::memory::close(again).unwrap();
    })) * 1e6;
    let local = sycl::malloc_device::<u8>(IPC_BYTES, &q).unwrap();
    q.copy(&held, &local, &[]).unwrap().wait().unwrap();
    let copy = median(time_it(reps.min(20), || {
        q.copy(&held, &local, &[]).unwrap().wait().unwrap();
    }));
    ch.send(format!("{cold} {cached} {copy}").as_bytes())
        .unwrap();
    for i in 1..=rounds {
        assert!(ping.ext_wait_signal_count(i, None).unwrap());
        q.enqueue_signal_event(&pong).unwrap();
    }
    q.wait().unwrap();
}

/// Open (cold, cached), copy-out time and event round trip of `dev`, through a child.
fn ipc_figures(dev: &Device, reps: usize, rounds: u64) -> [f64; 4] {
    let q = Queue::in_order(dev).unwrap();
    let buf = sycl::malloc_device::<u8>(IPC_BYTES, &q).unwrap();
    q.memset(&buf, 7, &[]).unwrap().wait().unwrap();
    let ping = Event::new_for_queue(&q, IPC_EVENT).unwrap();
    let pong = Event::new_for_queue(&q, IPC_EVENT).unwrap();
    let listener = Listener::bind_unique().unwrap();
    let index = Device::all()
        .into_iter()
        .filter(|d| d.backend() == dev.backend())
        .position(|d| &d == dev)
        .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(ROLE, "ipc")
        .args([
            format!("{}:{index}", dev.backend()),
            listener.name().to_string(),
            reps.to_string(),
            rounds.to_string(),
        ])
        .spawn()
        .unwrap();
    let ch = listener
        .accept(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    ch.send_handle(&ipc::memory::get(&buf).unwrap()).unwrap();
    ch.send_handle(&ipc::event::get(&ping).unwrap()).unwrap();
    ch.send_handle(&ipc::event::get(&pong).unwrap()).unwrap();
    let reply = String::from_utf8(ch.recv().unwrap()).unwrap();
    let f: Vec<f64> = reply.split(' ').map(|x| x.parse().unwrap()).collect();
    let t = Instant::now();
    for i in 1..=rounds {
        q.enqueue_signal_event(&ping).unwrap();
        assert!(pong.ext_wait_signal_count(i, None).unwrap());
    }
    let round_trip = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    assert!(child.wait().unwrap().success());
    [f[0], f[1], f[2], round_trip]
}

const TRIAD: &str = "__kernel void triad(__global float* a, __global const float* b, float k) \
    { size_t i = get_global_id(0); a[i] = a[i] * k + b[i]; }";

/// The triad kernel over two arrays of `kind`, median seconds per launch.
fn triad_time(q: &Queue, k: &sycl::Kernel, kind: sycl::UsmKind, reps: usize) -> f64 {
    let n = IPC_BYTES / 4;
    let alloc = || match kind {
        sycl::UsmKind::Shared => sycl::malloc_shared::<f32>(n, q).unwrap(),
        _ => sycl::malloc_device::<f32>(n, q).unwrap(),
    };
    let (a, b) = (alloc(), alloc());
    q.fill(&a, 1.0f32, &[]).unwrap().wait().unwrap();
    q.fill(&b, 2.0f32, &[]).unwrap().wait().unwrap();
    let kf = 0.5f32;
    let launch = || {
        // SAFETY: the kernel reads b and writes a, both n floats, alive until the wait.
        unsafe {
            q.launch(
                k,
                Range::d1(n),
                &[
                    KernelArg::usm(&a),
                    KernelArg::usm(&b),
                    KernelArg::scalar(&kf),
                ],
                &[],
            )
        }
        .unwrap()
        .wait()
        .unwrap()
    };
    launch();
    median(time_it(reps, launch))
}

fn ipc_section(quick: bool) {
    let ipc_devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.backend() == BackendKind::OpenCl && d.has(Aspect::ExtOneapiIpcMemory))
        .collect();
    println!();
    if ipc_devices.is_empty() {
        println!("== IPC: no OpenCL device shares memory (fine-grained system SVM): skipped");
        return;
    }
    let (reps, rounds) = if quick { (50, 200) } else { (300, 2000) };
    let native = Device::native_cpu();
    println!("== IPC: each row is the OpenCL device's figure beside the native CPU backend's");
    for dev in &ipc_devices {
        println!("-- {} / {}", dev.platform().name(), dev.name());
        // Interleaved: native, device, native, device; the medians of each side.
        let mut figs: [Vec<f64>; 8] = Default::default();
        for _ in 0..if quick { 1 } else { 3 } {
            for (side, d) in [(0, &native), (4, dev)] {
                for (i, v) in ipc_figures(d, reps, rounds).into_iter().enumerate() {
                    figs[side + i].push(v);
                }
            }
        }
        let m: Vec<f64> = figs.into_iter().map(median).collect();
        row(
            "ipc::memory::open cold, 64 MiB (vs native CPU)",
            "us",
            m[4],
            m[0],
        );
        row("ipc::memory::open cached (vs native CPU)", "us", m[5], m[1]);
        let gb = |t: f64| IPC_BYTES as f64 / t / 1e9;
        println!(
            "  copy out of opened memory, 64 MiB: {:.2} GB/s (native CPU {:.2} GB/s), ratio {:.3}",
            gb(m[6]),
            gb(m[2]),
            gb(m[6]) / gb(m[2])
        );
        row(
            "ipc::event round trip between processes (vs native CPU)",
            "us",
            m[7],
            m[3],
        );
        // Kernels over memfd device USM beside the driver's own (shared) USM.
        if !dev.has(Aspect::UsmSharedAllocations) {
            continue;
        }
        let q = Queue::in_order(dev).unwrap();
        let bundle = KernelBundle::build(
            q.context(),
            std::slice::from_ref(q.device()),
            sycl::Source::OpenClC(TRIAD),
            "",
        )
        .unwrap();
        let k = bundle.kernel("triad").unwrap();
        let kreps = if quick { 10 } else { 40 };
        let (mut memfd, mut driver) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            memfd.push(triad_time(&q, &k, sycl::UsmKind::Device, kreps));
            driver.push(triad_time(&q, &k, sycl::UsmKind::Shared, kreps));
        }
        let (memfd, driver) = (median(memfd), median(driver));
        let ratio = memfd / driver;
        println!(
            "  triad over 64 MiB: memfd device USM {:.3} ms, driver shared USM {:.3} ms: {ratio:.3} \
             (target <= 1.05): {}",
            memfd * 1e3,
            driver * 1e3,
            if ratio <= 1.05 { "PASS" } else { "MISS" }
        );
    }
}

fn main() {
    if std::env::var(ROLE).is_ok_and(|r| r == "ipc") {
        let args: Vec<String> = std::env::args().skip(1).collect();
        ipc_child(&args);
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (lat_reps, trials, bw_reps) = if quick { (400, 5, 3) } else { (2000, 11, 5) };
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.backend() == BackendKind::OpenCl)
        .collect();
    if devices.is_empty() {
        skip("opencl", "no OpenCL device");
        return;
    }
    let api = match Api::load() {
        Ok(a) => a,
        Err(e) => {
            skip("opencl", &format!("no OpenCL device (raw API: {e})"));
            return;
        }
    };
    println!("OpenCL benchmarks: latency rows ours/raw of times, bandwidth rows ours/raw of GB/s");
    for dev in &devices {
        println!();
        println!(
            "== {} / {} ({} compute units)",
            dev.platform().name(),
            dev.name(),
            dev.max_compute_units()
        );
        let Some((platform, raw_dev)) = find_raw_device(&api, dev) else {
            println!("no raw cl_device_id matches this device: skipped");
            continue;
        };
        if !dev.has(Aspect::ExtOneapiKernelCompilerOpencl) {
            println!("cannot build OpenCL C here: skipped");
            continue;
        }
        let q = Queue::in_order(dev).unwrap();
        let raw = Raw::new(&api, platform, raw_dev);
        kernel_latency(&q, &raw, lat_reps, trials);
        bandwidth(&q, &raw, bw_reps);
    }
    ipc_section(quick);
}
