//! Conformance suite: every test runs on every device of every backend present.

mod kernels;
mod soundness;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libtest_mimic::Failed;
use sycl::{
    Aspect, Context, Device, DeviceSelector, Errc, Event, EventProperties, EventStatus, KernelArg,
    KernelBundle, Queue, QueueProperties, Range, UsmKind,
};
use sycl_tests::{check, check_eq, fail, run_suite, DeviceTest, GlobalTest};

pub(crate) type R = Result<(), Failed>;

pub(crate) fn in_order(d: &Device) -> Result<Queue, Failed> {
    Queue::in_order(d).map_err(fail)
}

// ---------------------------------------------------------------- enumeration and selection

fn enumeration() -> R {
    let platforms = sycl::Platform::all();
    check!(!platforms.is_empty(), "no platform at all");
    check!(
        platforms
            .iter()
            .any(|p| p.backend() == sycl::BackendKind::NativeCpu),
        "native CPU platform missing"
    );
    for p in &platforms {
        check!(!p.name().is_empty());
        for d in p.devices() {
            check!(d.platform() == p);
        }
    }
    let default = Device::default_device().map_err(fail)?;
    let any_gpu = Device::all().iter().any(Device::is_gpu);
    if std::env::var("ONEAPI_DEVICE_SELECTOR").is_err() {
        if any_gpu {
            check!(
                default.is_gpu(),
                "a GPU exists but the default device is {:?}",
                default
            );
        } else {
            check_eq!(default.backend(), sycl::BackendKind::NativeCpu);
        }
    }
    Ok(())
}

fn selectors() -> R {
    let native = DeviceSelector::filter("native_cpu:*")
        .map_err(fail)?
        .select()
        .map_err(fail)?;
    check_eq!(native.backend(), sycl::BackendKind::NativeCpu);
    check_eq!(
        DeviceSelector::filter("native_cpu:0")
            .map_err(fail)?
            .select()
            .map_err(fail)?,
        native
    );
    let cpu = DeviceSelector::Cpu.select().map_err(fail)?;
    check!(cpu.is_cpu());
    // Exclusion: everything but native CPU.
    let others = DeviceSelector::filter("!native_cpu:*").map_err(fail)?;
    match others.select() {
        Ok(d) => check!(d.backend() != sycl::BackendKind::NativeCpu),
        Err(e) => check_eq!(e.code(), Errc::Runtime),
    }
    // Lists.
    let both = DeviceSelector::filter("cuda:gpu;native_cpu:cpu")
        .map_err(fail)?
        .select()
        .map_err(fail)?;
    check!(
        both.backend() == sycl::BackendKind::Cuda || both.backend() == sycl::BackendKind::NativeCpu
    );
    // Custom scoring, and negative scores are never picked.
    let picked = DeviceSelector::custom(|d| {
        if d.backend() == sycl::BackendKind::NativeCpu {
            5
        } else {
            1
        }
    })
    .select()
    .map_err(fail)?;
    check_eq!(picked.backend(), sycl::BackendKind::NativeCpu);
    let none = DeviceSelector::custom(|_| -1).select().unwrap_err();
    check_eq!(none.code(), Errc::Runtime);
    // No such index.
    check_eq!(
        DeviceSelector::filter("native_cpu:7")
            .map_err(fail)?
            .select()
            .unwrap_err()
            .code(),
        Errc::Runtime
    );
    // Bad strings: clear errors.
    for bad in [
        "",
        "gpu",
        "vulkan:0",
        "cuda:",
        "cuda:abc",
        "level_zero:0.1",
        "opencl:gpu,,cpu",
    ] {
        let err = DeviceSelector::filter(bad)
            .err()
            .ok_or_else(|| fail(format!("`{bad}` was accepted")))?;
        check_eq!(err.code(), Errc::Invalid);
        check!(
            err.to_string().contains(bad) || bad.is_empty(),
            "message does not name `{bad}`: {err}"
        );
    }
    Ok(())
}

fn selector_env_child(_: &[String]) -> Result<(), String> {
    // ONEAPI_DEVICE_SELECTOR=native_cpu:* hides every other device from the default selector.
    let d = Device::default_device().map_err(|e| e.to_string())?;
    if d.backend() != sycl::BackendKind::NativeCpu {
        return Err(format!(
            "default device {d:?} ignores ONEAPI_DEVICE_SELECTOR"
        ));
    }
    Ok(())
}

fn selector_env_bad_child(_: &[String]) -> Result<(), String> {
    match Device::default_device() {
        Err(e) if e.code() == Errc::Invalid && e.message().contains("ONEAPI_DEVICE_SELECTOR") => {
            Ok(())
        }
        other => Err(format!("bad ONEAPI_DEVICE_SELECTOR gave {other:?}")),
    }
}

fn selector_env() -> R {
    let out = sycl_tests::child_command("selector_env", &[])
        .env("ONEAPI_DEVICE_SELECTOR", "native_cpu:*")
        .output()
        .map_err(fail)?;
    check!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sycl_tests::child_command("selector_env_bad", &[])
        .env("ONEAPI_DEVICE_SELECTOR", "nonsense")
        .output()
        .map_err(fail)?;
    check!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn aspect_names() -> R {
    for &a in Aspect::ALL {
        check_eq!(a.to_string().parse::<Aspect>().map_err(fail)?, a);
    }
    check_eq!(
        Aspect::ExtOneapiIpcEvent.to_string(),
        "ext_oneapi_ipc_event"
    );
    check_eq!(
        "no_such_aspect".parse::<Aspect>().unwrap_err().code(),
        Errc::Invalid
    );
    Ok(())
}

// ---------------------------------------------------------------- device info

fn device_info(d: &Device) -> R {
    check!(!d.name().is_empty());
    check!(d.max_compute_units() > 0);
    check!(d.global_mem_size() > 0);
    check!(d.max_work_group_size() > 0);
    check_eq!(d.has(Aspect::Cpu), d.is_cpu());
    check_eq!(d.has(Aspect::Gpu), d.is_gpu());
    for a in d.aspects() {
        check!(d.has(a));
    }
    if d.has(Aspect::ExtOneapiIpcPhysicalMemory) {
        check!(
            d.has(Aspect::ExtOneapiVirtualMem),
            "ipc physical memory without virtual memory"
        );
    }
    let ctx = Context::default_for(d).map_err(fail)?;
    check!(ctx.devices().contains(d));
    check!(
        Context::default_for(d).map_err(fail)? == ctx,
        "default context is not shared"
    );
    Ok(())
}

// ---------------------------------------------------------------- queues, order, dependencies

fn in_order_queue(d: &Device) -> R {
    let q = in_order(d)?;
    check!(q.properties().in_order);
    // CUDA queues are one stream each (interop: `cuda_stream`); other backends have none.
    let cuda = d.backend() == sycl::BackendKind::Cuda;
    check!(
        q.cuda_stream().is_some() == cuda,
        "cuda_stream {:?} on {}",
        q.cuda_stream(),
        d.backend()
    );
    if cuda {
        let other = in_order(d)?;
        check!(
            other.cuda_stream() != q.cuda_stream(),
            "two queues, one stream"
        );
    }
    let a = sycl::malloc_device::<u32>(4096, &q).map_err(fail)?;
    let b = sycl::malloc_device::<u32>(4096, &q).map_err(fail)?;
    let c = sycl::malloc_device::<u32>(4096, &q).map_err(fail)?;
    for round in 0..20u32 {
        q.fill(&a, round, &[]).map_err(fail)?;
        q.copy(&a, &b, &[]).map_err(fail)?;
        q.fill(&a, round + 1000, &[]).map_err(fail)?;
        q.copy(&a, &c, &[]).map_err(fail)?;
        let (vb, vc) = (q.to_vec(&b).map_err(fail)?, q.to_vec(&c).map_err(fail)?);
        check!(
            vb.iter().all(|&x| x == round),
            "round {round}: b = {}",
            vb[0]
        );
        check!(
            vc.iter().all(|&x| x == round + 1000),
            "round {round}: c = {}",
            vc[0]
        );
    }
    Ok(())
}

fn dependencies_across_queues(d: &Device) -> R {
    let q1 = Queue::new(d).map_err(fail)?;
    let q2 = Queue::new(d).map_err(fail)?;
    let a = sycl::malloc_device::<u64>(1 << 16, &q1).map_err(fail)?;
    let b = sycl::malloc_device::<u64>(1 << 16, &q1).map_err(fail)?;
    let gate_open = Arc::new(AtomicU32::new(0));
    let g = gate_open.clone();
    // A slow host task gates the fill; the copy on the other queue must wait for both.
    let slow = q1
        .host_task(&[], move || {
            std::thread::sleep(Duration::from_millis(50));
            g.store(1, Ordering::SeqCst);
        })
        .map_err(fail)?;
    let fill = q1.fill(&a, 0xdead_beef_u64, &[&slow]).map_err(fail)?;
    let copy = q2.copy(&a, &b, &[&fill]).map_err(fail)?;
    copy.wait().map_err(fail)?;
    check_eq!(gate_open.load(Ordering::SeqCst), 1);
    check_eq!(fill.status().map_err(fail)?, EventStatus::Complete);
    check!(q1
        .to_vec(&b)
        .map_err(fail)?
        .iter()
        .all(|&x| x == 0xdead_beef));
    Ok(())
}

fn host_task_order(d: &Device) -> R {
    let q = Queue::new(d).map_err(fail)?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    let e1 = q
        .host_task(&[], move || {
            std::thread::sleep(Duration::from_millis(30));
            l1.lock().unwrap().push(1)
        })
        .map_err(fail)?;
    let e2 = q
        .host_task(&[&e1], move || l2.lock().unwrap().push(2))
        .map_err(fail)?;
    let e3 = q
        .host_task(&[&e2, &e1], move || l3.lock().unwrap().push(3))
        .map_err(fail)?;
    e3.wait().map_err(fail)?;
    check_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
    // A barrier waits for everything before it.
    let q = in_order(d)?;
    let flag = Arc::new(AtomicU32::new(0));
    let f = flag.clone();
    q.host_task(&[], move || {
        std::thread::sleep(Duration::from_millis(20));
        f.store(7, Ordering::SeqCst)
    })
    .map_err(fail)?;
    q.barrier(&[]).map_err(fail)?.wait().map_err(fail)?;
    check_eq!(flag.load(Ordering::SeqCst), 7);
    Ok(())
}

/// A host task may use the runtime itself (allocate, copy, free on the same device), as
/// interop tasks do; it must see what the queue did before it.
fn host_task_may_call_the_runtime(d: &Device) -> R {
    let q = in_order(d)?;
    let a = Arc::new(sycl::malloc_device::<u32>(4096, &q).map_err(fail)?);
    q.fill(&*a, 5u32, &[]).map_err(fail)?;
    let inner = Queue::new(d).map_err(fail)?;
    let shared = a.clone();
    let outcome = Arc::new(Mutex::new(None::<String>));
    let o = outcome.clone();
    let task = q
        .host_task(&[], move || {
            let run = || -> Result<(), sycl::Error> {
                let before = inner.to_vec(&*shared)?;
                if !before.iter().all(|&x| x == 5) {
                    return Err(sycl::Error::new(
                        sycl::Errc::Runtime,
                        "the task ran before the fill",
                    ));
                }
                let scratch = sycl::malloc_device::<u32>(1 << 16, &inner)?;
                inner.fill(&scratch, 9u32, &[])?.wait()?;
                let back = inner.to_vec(&scratch)?;
                drop(scratch); // frees device memory while the task's stream is held
                if !back.iter().all(|&x| x == 9) {
                    return Err(sycl::Error::new(sycl::Errc::Runtime, "wrong fill"));
                }
                Ok(())
            };
            *o.lock().unwrap() = Some(match run() {
                Ok(()) => "ok".into(),
                Err(e) => e.to_string(),
            });
        })
        .map_err(fail)?;
    let after = q.fill(&*a, 6u32, &[]).map_err(fail)?;
    check!(task.wait_timeout(Duration::from_secs(30)).map_err(fail)?);
    after.wait().map_err(fail)?;
    let outcome = outcome.lock().unwrap().clone();
    check_eq!(outcome.as_deref(), Some("ok"));
    check!(q.to_vec(&*a).map_err(fail)?.iter().all(|&x| x == 6));
    Ok(())
}

/// Other threads keep allocating, copying and freeing on the device while a host task holds
/// a queue.
fn runtime_calls_beside_a_blocked_host_task(d: &Device) -> R {
    let q = in_order(d)?;
    let gate = q
        .host_task(&[], || std::thread::sleep(Duration::from_millis(300)))
        .map_err(fail)?;
    let other = in_order(d)?;
    for _ in 0..4 {
        let m = sycl::malloc_device::<u8>(1 << 20, &other).map_err(fail)?;
        other
            .fill(&m, 1u8, &[])
            .map_err(fail)?
            .wait()
            .map_err(fail)?;
        check!(other.to_vec(&m).map_err(fail)?.iter().all(|&x| x == 1));
        drop(m);
        if d.has(Aspect::UsmHostAllocations) {
            let h = sycl::malloc_host::<u8>(1 << 16, &other).map_err(fail)?;
            drop(h);
        }
    }
    check!(gate.wait_timeout(Duration::from_secs(30)).map_err(fail)?);
    Ok(())
}

fn multithreaded_submission(d: &Device) -> R {
    let q = Queue::new(d).map_err(fail)?;
    const THREADS: usize = 8;
    const PER: usize = 4096;
    let buf = Arc::new(sycl::malloc_device::<u32>(THREADS * PER, &q).map_err(fail)?);
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (q, buf) = (q.clone(), buf.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let slice = buf
                .range(t * PER..(t + 1) * PER)
                .map_err(|e| e.to_string())?;
            let mut last = None;
            for round in 0..50u32 {
                let deps: Vec<&Event> = last.iter().collect();
                last = Some(
                    q.fill(&slice, (t as u32) << 16 | round, &deps)
                        .map_err(|e| e.to_string())?,
                );
            }
            last.unwrap().wait().map_err(|e| e.to_string())
        }));
    }
    for h in handles {
        h.join()
            .map_err(|_| fail("thread panicked"))?
            .map_err(fail)?;
    }
    let v = q.to_vec(&*buf).map_err(fail)?;
    for t in 0..THREADS {
        let want = (t as u32) << 16 | 49;
        check!(
            v[t * PER..(t + 1) * PER].iter().all(|&x| x == want),
            "thread {t}: {:#x}",
            v[t * PER]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- USM

const SIZES: [usize; 11] = [
    0,
    1,
    3,
    7,
    64,
    4095,
    4096,
    4097,
    65536 + 5,
    1 << 20,
    (1 << 20) + 3,
];

fn usm_kinds(d: &Device) -> Vec<UsmKind> {
    let mut k = Vec::new();
    if d.has(Aspect::UsmDeviceAllocations) {
        k.push(UsmKind::Device);
    }
    if d.has(Aspect::UsmHostAllocations) {
        k.push(UsmKind::Host);
    }
    if d.has(Aspect::UsmSharedAllocations) {
        k.push(UsmKind::Shared);
    }
    k
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn usm_copy_sizes(d: &Device) -> R {
    let q = in_order(d)?;
    let ctx = q.context().clone();
    for kind in usm_kinds(d) {
        for &n in &SIZES {
            let a = sycl::Usm::<u8>::alloc(kind, n, d, &ctx).map_err(fail)?;
            let b = sycl::Usm::<u8>::alloc(kind, n, d, &ctx).map_err(fail)?;
            check_eq!(a.len(), n);
            check_eq!(a.kind(), kind);
            let src = pattern(n, n as u32);
            q.write(&a, &src).map_err(fail)?;
            q.copy(&a, &b, &[]).map_err(fail)?;
            check!(
                q.to_vec(&b).map_err(fail)? == src,
                "{kind} size {n}: copy mismatch"
            );
            if n > 2 {
                // Unaligned sub-ranges.
                let a1 = a.range(1..n - 1).map_err(fail)?;
                let b1 = b.range(0..n - 2).map_err(fail)?;
                q.copy(&a1, &b1, &[]).map_err(fail)?;
                let got = q.to_vec(&b).map_err(fail)?;
                check!(
                    got[..n - 2] == src[1..n - 1],
                    "{kind} size {n}: unaligned copy mismatch"
                );
                check!(
                    got[n - 2..] == src[n - 2..],
                    "{kind} size {n}: copy wrote past its end"
                );
            }
            if kind != UsmKind::Device || d.is_cpu() {
                check!(a.is_host_accessible());
                check!(
                    *a.as_slice().map_err(fail)? == *src.as_slice(),
                    "{kind} size {n}: host view mismatch"
                );
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Rgb([u8; 3]);

#[derive(Clone, Copy, PartialEq, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Twelve([u32; 3]);

fn fill_typed<T: bytemuck::Pod + PartialEq + std::fmt::Debug>(
    q: &Queue,
    kind: UsmKind,
    value: T,
) -> R {
    for &n in &SIZES {
        let a = sycl::Usm::<T>::alloc(kind, n, q.device(), q.context()).map_err(fail)?;
        q.memset(&a, 0xab, &[]).map_err(fail)?;
        let bytes: Vec<u8> = bytemuck::cast_slice(&q.to_vec(&a).map_err(fail)?).to_vec();
        check!(bytes.iter().all(|&b| b == 0xab), "memset {kind} n={n}");
        q.fill(&a, value, &[]).map_err(fail)?;
        let got = q.to_vec(&a).map_err(fail)?;
        check!(
            got.iter().all(|x| *x == value),
            "fill {kind} n={n} {} bytes: {:?}",
            std::mem::size_of::<T>(),
            got.first()
        );
        if n > 4 {
            // A fill of an interior range leaves the rest alone.
            let zero: T = bytemuck::Zeroable::zeroed();
            q.fill(&a.range(1..n - 1).map_err(fail)?, zero, &[])
                .map_err(fail)?;
            let got = q.to_vec(&a).map_err(fail)?;
            check!(
                got[0] == value && got[n - 1] == value && got[1..n - 1].iter().all(|x| *x == zero),
                "interior fill n={n}"
            );
        }
    }
    Ok(())
}

fn usm_fill_patterns(d: &Device) -> R {
    let q = in_order(d)?;
    for kind in usm_kinds(d) {
        fill_typed(&q, kind, 0x5au8)?;
        fill_typed(&q, kind, 0x1234u16)?;
        fill_typed(&q, kind, 0xdead_beefu32)?;
        fill_typed(&q, kind, 0x0123_4567_89ab_cdefu64)?;
        fill_typed(&q, kind, Rgb([1, 2, 3]))?;
        fill_typed(&q, kind, Twelve([7, 8, 9]))?;
    }
    Ok(())
}

fn usm_pointer_queries(d: &Device) -> R {
    let q = in_order(d)?;
    let ctx = q.context();
    for kind in usm_kinds(d) {
        let a = sycl::Usm::<u32>::alloc(kind, 1000, d, ctx).map_err(fail)?;
        check_eq!(sycl::get_pointer_type(a.as_ptr(), ctx), kind);
        check_eq!(sycl::get_pointer_type(a.as_ptr() + 400, ctx), kind);
        if kind == UsmKind::Host {
            check_eq!(
                sycl::get_pointer_device(a.as_ptr(), ctx)
                    .unwrap_err()
                    .code(),
                Errc::Invalid
            );
        } else {
            check_eq!(
                &sycl::get_pointer_device(a.as_ptr() + 4, ctx).map_err(fail)?,
                d
            );
        }
    }
    let on_stack = 0u64;
    let addr = &on_stack as *const u64 as usize as u64;
    check_eq!(sycl::get_pointer_type(addr, ctx), UsmKind::Unknown);
    check_eq!(
        sycl::get_pointer_device(addr, ctx).unwrap_err().code(),
        Errc::Invalid
    );
    Ok(())
}

fn usm_free_while_in_use(d: &Device) -> R {
    // Dropping memory while a command uses it must not free it under the command, and (issue
    // 29) must not wait for the command either: the release is deferred until it ends.
    let q = in_order(d)?;
    let ctx = q.context();
    let flag = Arc::new(AtomicU32::new(0));
    let f = flag.clone();
    let gate = q.host_task(&[], move || {
        std::thread::sleep(Duration::from_millis(500));
        f.store(1, Ordering::SeqCst);
    });
    let gate = gate.map_err(fail)?;
    let a = sycl::malloc_device::<u8>(1 << 20, &q).map_err(fail)?;
    let addr = a.as_ptr();
    let ev = q.fill(&a, 1u8, &[&gate]).map_err(fail)?;
    // (CUDA waits on the host for a host task before it submits the next command of the
    // queue: there the fill's submission already waited, and the drop has nothing to wait for.)
    let gate_open_before = flag.load(Ordering::SeqCst);
    drop(a);
    if gate_open_before == 0 {
        check_eq!(
            flag.load(Ordering::SeqCst),
            0,
            "the drop waited for the command"
        );
    }
    // Looked at in this order: if the fill is still pending after the pointer was, the memory
    // was still allocated while the fill could run.
    let kind = sycl::get_pointer_type(addr, ctx);
    if ev.status().map_err(fail)? != EventStatus::Complete {
        check_eq!(kind, UsmKind::Device, "freed under a pending fill");
    }
    ev.wait().map_err(fail)?;
    check_eq!(flag.load(Ordering::SeqCst), 1);
    let start = std::time::Instant::now();
    while sycl::get_pointer_type(addr, ctx) != UsmKind::Unknown {
        check!(
            start.elapsed() < Duration::from_secs(20),
            "the memory was never released after its fill"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn usm_prefetch(d: &Device) -> R {
    let q = in_order(d)?;
    let a = sycl::malloc_shared::<u32>(1 << 16, &q).map_err(fail)?;
    q.fill(&a, 3u32, &[]).map_err(fail)?;
    q.prefetch(&a, &[]).map_err(fail)?.wait().map_err(fail)?;
    check!(q.to_vec(&a).map_err(fail)?.iter().all(|&x| x == 3));
    Ok(())
}

// ---------------------------------------------------------------- errors

fn error_codes(d: &Device) -> R {
    let q = in_order(d)?;
    let huge = usize::MAX / 16;
    let err = sycl::malloc_device::<u64>(huge, &q).unwrap_err();
    check_eq!(err.code(), Errc::MemoryAllocation);
    let a = sycl::malloc_device::<u32>(10, &q).map_err(fail)?;
    let b = sycl::malloc_device::<u32>(11, &q).map_err(fail)?;
    check_eq!(a.range(5..11).unwrap_err().code(), Errc::Invalid);
    check_eq!(q.copy(&a, &b, &[]).unwrap_err().code(), Errc::Invalid);
    check_eq!(q.write(&a, &[1u32; 3]).unwrap_err().code(), Errc::Invalid);
    let both = EventProperties {
        enable_ipc: true,
        enable_profiling: true,
    };
    check_eq!(
        Event::new(q.context(), both).unwrap_err().code(),
        Errc::Invalid
    );
    // A device of another platform is not in this context.
    if let Some(other) = Device::all()
        .into_iter()
        .find(|o| o.platform() != d.platform())
    {
        check_eq!(
            Queue::with_context(q.context(), &other, QueueProperties::default())
                .unwrap_err()
                .code(),
            Errc::Invalid
        );
    }
    check_eq!(Context::new(&[]).unwrap_err().code(), Errc::Invalid);
    // Features the device lacks say so, with the aspect's name.
    for (aspect, result) in [
        (
            Aspect::ExtSyclRsClosureKernels,
            q.parallel_for(Range::d1(1), &[], |_: sycl::Item| {})
                .map(|_| ()),
        ),
        (
            Aspect::ExtOneapiIpcMemory,
            sycl::ipc::memory::get(&a).map(|_| ()),
        ),
    ] {
        if !d.has(aspect) {
            let e = result
                .err()
                .ok_or_else(|| fail(format!("{aspect} missing but call succeeded")))?;
            check_eq!(e.code(), Errc::FeatureNotSupported);
            check!(e.message().contains(aspect.name()), "{e}");
        }
    }
    if d.has(Aspect::ExtOneapiIpcMemory) && d.has(Aspect::UsmHostAllocations) {
        let h = sycl::malloc_host::<u8>(16, &q).map_err(fail)?;
        check_eq!(
            sycl::ipc::memory::get(&h).unwrap_err().code(),
            Errc::Invalid
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- profiling

fn profiling_on(d: &Device) -> R {
    let q = Queue::with_properties(
        d,
        QueueProperties {
            in_order: true,
            enable_profiling: true,
        },
    )
    .map_err(fail)?;
    let a = sycl::malloc_device::<u8>(8 << 20, &q).map_err(fail)?;
    let e = q.memset(&a, 1, &[]).map_err(fail)?;
    e.wait().map_err(fail)?;
    let p = e.profiling_info().map_err(fail)?;
    check!(p.submit_ns <= p.start_ns && p.start_ns <= p.end_ns, "{p:?}");
    check!(p.end_ns > 0);
    Ok(())
}

fn profiling_off(d: &Device) -> R {
    let q = in_order(d)?;
    let a = sycl::malloc_device::<u8>(64, &q).map_err(fail)?;
    let e = q.memset(&a, 1, &[]).map_err(fail)?;
    e.wait().map_err(fail)?;
    let err = e.profiling_info().unwrap_err();
    check_eq!(err.code(), Errc::Profiling);
    Ok(())
}

// ---------------------------------------------------------------- closure kernels

fn closure_ranges(d: &Device) -> R {
    let q = in_order(d)?;
    for range in [
        Range::d1(1),
        Range::d1(1000),
        Range::d1(100_003),
        Range::d2(37, 101),
        Range::d3(7, 11, 13),
        Range::d3(64, 8, 4).with_local([8, 4, 2]),
    ] {
        let n = range.total().map_err(fail)?;
        let counts = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
        let c = counts.clone();
        let out = sycl::malloc_shared::<u32>(n, &q).map_err(fail)?;
        let view = out.view().map_err(fail)?;
        let g = range.global();
        q.parallel_for(range, &[], move |item: sycl::Item| {
            let lin = item.linear_id();
            // SYCL's linearisation: last dimension fastest.
            let [i, j, k] = item.id();
            assert_eq!(lin, (i * g[1] + j) * g[2] + k);
            c[lin].fetch_add(1, Ordering::Relaxed);
            view.set(lin, (lin as u32).wrapping_mul(3));
        })
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
        check!(
            counts.iter().all(|c| c.load(Ordering::Relaxed) == 1),
            "{range:?}: some item ran 0 or 2+ times"
        );
        let host = out.as_slice().map_err(fail)?;
        check!(
            host.iter()
                .enumerate()
                .all(|(i, &v)| v == (i as u32).wrapping_mul(3)),
            "{range:?}: wrong output"
        );
    }
    // nd-range ids.
    let range = Range::d1(64).with_local([16, 1, 1]);
    let groups = sycl::malloc_shared::<u32>(64, &q).map_err(fail)?;
    let v = groups.view().map_err(fail)?;
    q.parallel_for(range, &[], move |it: sycl::Item| {
        v.set(it.get(0), (it.group(0) * 100 + it.local_id(0)) as u32)
    })
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    let g = groups.as_slice().map_err(fail)?;
    check_eq!(g[17], 101);
    check_eq!(g[63], 315);
    // Bad nd-range.
    check_eq!(
        q.parallel_for(Range::d1(10).with_local([3, 1, 1]), &[], |_: sycl::Item| {})
            .unwrap_err()
            .code(),
        Errc::NdRange
    );
    Ok(())
}

fn closure_vector_add(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1 << 20;
    let a = sycl::malloc_shared::<f32>(n, &q).map_err(fail)?;
    let b = sycl::malloc_shared::<f32>(n, &q).map_err(fail)?;
    let c = sycl::malloc_shared::<f32>(n, &q).map_err(fail)?;
    let ha: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let hb: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
    q.write(&a, &ha).map_err(fail)?;
    q.write(&b, &hb).map_err(fail)?;
    let (va, vb, vc) = (
        a.view().map_err(fail)?,
        b.view().map_err(fail)?,
        c.view().map_err(fail)?,
    );
    q.parallel_for(Range::d1(n), &[], move |it: sycl::Item| {
        let i = it.get(0);
        vc.set(i, va.get(i) + vb.get(i));
    })
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    let hc = q.to_vec(&c).map_err(fail)?;
    check!(hc.iter().enumerate().all(|(i, &x)| x == (3 * i) as f32));
    Ok(())
}

fn closure_panic_is_an_error(d: &Device) -> R {
    let q = in_order(d)?;
    let e = q
        .parallel_for(Range::d1(100), &[], |it: sycl::Item| {
            if it.get(0) == 42 {
                panic!("work-item 42 refuses");
            }
        })
        .map_err(fail)?;
    let err = e.wait().unwrap_err();
    check_eq!(err.code(), Errc::Kernel);
    check!(err.message().contains("refuses"), "{err}");
    // An out-of-bounds view access is caught the same way.
    let small = sycl::malloc_shared::<u32>(4, &q).map_err(fail)?;
    let v = small.view().map_err(fail)?;
    let err = q
        .parallel_for(Range::d1(8), &[], move |it: sycl::Item| v.set(it.get(0), 1))
        .map_err(fail)?
        .wait()
        .unwrap_err();
    check_eq!(err.code(), Errc::Kernel);
    // The queue still works.
    let ok = Arc::new(AtomicUsize::new(0));
    let o = ok.clone();
    q.parallel_for(Range::d1(10), &[], move |_: sycl::Item| {
        o.fetch_add(1, Ordering::Relaxed);
    })
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    check_eq!(ok.load(Ordering::Relaxed), 10);
    Ok(())
}

// ---------------------------------------------------------------- kernels from source

fn source_vector_add(d: &Device) -> R {
    let Some(source) = sycl_tests::vector_add_source(d) else {
        return Err(fail(
            "device has a compiler aspect but the test has no source for it",
        ));
    };
    let q = in_order(d)?;
    let bundle =
        KernelBundle::build(q.context(), std::slice::from_ref(d), source, "").map_err(fail)?;
    check!(
        bundle.kernel_names().iter().any(|k| k == "vadd"),
        "{:?}",
        bundle.kernel_names()
    );
    let k = bundle.kernel("vadd").map_err(fail)?;
    let n = 100_003usize;
    let a = sycl::malloc_device::<f32>(n, &q).map_err(fail)?;
    let b = sycl::malloc_device::<f32>(n, &q).map_err(fail)?;
    let c = sycl::malloc_device::<f32>(n, &q).map_err(fail)?;
    q.write(&a, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
        .map_err(fail)?;
    q.write(&b, &(0..n).map(|i| 0.5 * i as f32).collect::<Vec<_>>())
        .map_err(fail)?;
    let global = n.div_ceil(128) * 128;
    // SAFETY: vadd(const float*, const float*, float*, uint n) reads a[i], b[i] and writes
    // c[i] only for i < n, the length of all three.
    unsafe {
        q.launch(
            &k,
            Range::d1(global).with_local([128, 1, 1]),
            &[
                KernelArg::usm(&a),
                KernelArg::usm(&b),
                KernelArg::usm(&c),
                KernelArg::scalar(&(n as u32)),
            ],
            &[],
        )
    }
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    let got = q.to_vec(&c).map_err(fail)?;
    check!(
        got.iter().enumerate().all(|(i, &x)| x == 1.5 * i as f32),
        "vadd result wrong: {:?}",
        &got[..4]
    );
    check!(bundle.kernel("no_such_kernel").is_err());
    // Wrong argument count is refused before launch.
    // SAFETY: refused before launch (too few arguments), as the test checks.
    let err = unsafe { q.launch(&k, Range::d1(128), &[KernelArg::usm(&a)], &[]) }.unwrap_err();
    check!(
        matches!(err.code(), Errc::KernelArgument | Errc::Invalid),
        "{err}"
    );
    Ok(())
}

fn source_build_error(d: &Device) -> R {
    let q = in_order(d)?;
    let source = if d.has(Aspect::ExtOneapiKernelCompilerOpencl) {
        sycl::Source::OpenClC("__kernel void broken(__global float* a) { a[0] = undefined_thing; }")
    } else {
        sycl::Source::CudaC(
            "extern \"C\" __global__ void broken(float* a) { a[0] = undefined_thing; }",
        )
    };
    let err = KernelBundle::build(q.context(), &[], source, "")
        .err()
        .ok_or_else(|| fail("broken source built"))?;
    check_eq!(err.code(), Errc::Build);
    check!(
        err.message().contains("undefined_thing"),
        "build log missing from: {err}"
    );
    Ok(())
}

fn source_local_memory(d: &Device) -> R {
    // Each work-group of 64 sums its inputs through local memory.
    let q = in_order(d)?;
    let source = if d.has(Aspect::ExtOneapiKernelCompilerOpencl) {
        sycl::Source::OpenClC(
            "__kernel void gsum(__global const uint* in, __global uint* out, __local uint* tmp) {\n\
               size_t l = get_local_id(0); tmp[l] = in[get_global_id(0)]; barrier(CLK_LOCAL_MEM_FENCE);\n\
               if (l == 0) { uint s = 0; for (size_t i = 0; i < get_local_size(0); i++) s += tmp[i]; out[get_group_id(0)] = s; }\n}\n",
        )
    } else {
        sycl::Source::CudaC(
            "extern \"C\" __global__ void gsum(const unsigned* in, unsigned* out) {\n\
               extern __shared__ unsigned tmp[]; unsigned l = threadIdx.x; tmp[l] = in[blockIdx.x * blockDim.x + l]; __syncthreads();\n\
               if (l == 0) { unsigned s = 0; for (unsigned i = 0; i < blockDim.x; i++) s += tmp[i]; out[blockIdx.x] = s; }\n}\n",
        )
    };
    let bundle = KernelBundle::build(q.context(), &[], source, "").map_err(fail)?;
    let k = bundle.kernel("gsum").map_err(fail)?;
    let groups = 32usize;
    let input = sycl::malloc_device::<u32>(groups * 64, &q).map_err(fail)?;
    let out = sycl::malloc_device::<u32>(groups, &q).map_err(fail)?;
    q.write(
        &input,
        &(0..groups * 64).map(|i| i as u32).collect::<Vec<_>>(),
    )
    .map_err(fail)?;
    let mut args = vec![KernelArg::usm(&input), KernelArg::usm(&out)];
    args.push(KernelArg::local::<u32>(64).map_err(fail)?);
    // SAFETY: gsum reads in[0..groups*64) and writes out[0..groups), the sizes allocated, and
    // 64 u32 of local memory per group.
    unsafe {
        q.launch(
            &k,
            Range::d1(groups * 64).with_local([64, 1, 1]),
            &args,
            &[],
        )
    }
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    let got = q.to_vec(&out).map_err(fail)?;
    for (g, &s) in got.iter().enumerate() {
        let want: u32 = (g * 64..(g + 1) * 64).map(|i| i as u32).sum();
        check_eq!(s, want);
    }
    Ok(())
}

// ---------------------------------------------------------------- standalone events

fn standalone_events(d: &Device) -> R {
    let producer = in_order(d)?;
    let e = Event::new_for_queue(&producer, EventProperties::default()).map_err(fail)?;
    check_eq!(e.status().map_err(fail)?, EventStatus::Complete);
    e.wait().map_err(fail)?;
    let consumer = in_order(d)?;
    let a = sycl::malloc_device::<u32>(1 << 16, &producer).map_err(fail)?;
    let b = sycl::malloc_device::<u32>(1 << 16, &producer).map_err(fail)?;
    producer
        .host_task(&[], || std::thread::sleep(Duration::from_millis(40)))
        .map_err(fail)?;
    producer.fill(&a, 77u32, &[]).map_err(fail)?;
    producer.enqueue_signal_event(&e).map_err(fail)?;
    consumer.enqueue_wait_event(&e).map_err(fail)?;
    consumer.copy(&a, &b, &[]).map_err(fail)?;
    consumer.wait().map_err(fail)?;
    check!(
        consumer.to_vec(&b).map_err(fail)?.iter().all(|&x| x == 77),
        "consumer ran before the signal"
    );
    check!(e.wait_timeout(Duration::from_secs(5)).map_err(fail)?);
    Ok(())
}

fn signal_counts(d: &Device) -> R {
    let q = in_order(d)?;
    let e = Event::new_for_queue(&q, EventProperties::default()).map_err(fail)?;
    check_eq!(e.ext_signal_count().map_err(fail)?, 0);
    q.host_task(&[], || std::thread::sleep(Duration::from_millis(30)))
        .map_err(fail)?;
    for _ in 0..3 {
        q.enqueue_signal_event(&e).map_err(fail)?;
    }
    check!(
        !e.ext_wait_signal_count(4, Some(Duration::from_millis(100)))
            .map_err(fail)?,
        "count 4 reached with 3 signals"
    );
    check!(e
        .ext_wait_signal_count(3, Some(Duration::from_secs(10)))
        .map_err(fail)?);
    check_eq!(e.ext_signal_count().map_err(fail)?, 3);
    Ok(())
}

fn timed_wait(d: &Device) -> R {
    let q = in_order(d)?;
    let e = q
        .host_task(&[], || std::thread::sleep(Duration::from_millis(300)))
        .map_err(fail)?;
    check!(
        !e.wait_timeout(Duration::from_millis(10)).map_err(fail)?,
        "a 300 ms task finished within 10 ms"
    );
    check!(e.wait_timeout(Duration::from_secs(10)).map_err(fail)?);
    Ok(())
}

// ---------------------------------------------------------------- virtual memory

fn virtual_memory(d: &Device) -> R {
    use sycl::virtual_mem::{get_mem_granularity, PhysicalMem, VirtualRange};
    use sycl::{AccessMode, GranularityMode, PhysicalMemProperties};
    let q = in_order(d)?;
    let ctx = q.context();
    let g = get_mem_granularity(d, ctx, GranularityMode::Minimum).map_err(fail)?;
    check!(g > 0 && g.is_power_of_two());
    check!(get_mem_granularity(d, ctx, GranularityMode::Recommended).map_err(fail)? % g == 0);
    let phys = PhysicalMem::new(d, ctx, 2 * g, PhysicalMemProperties::default()).map_err(fail)?;
    check_eq!(phys.size(), 2 * g);
    check!(!phys.ipc_enabled());
    let range = VirtualRange::reserve(ctx, 4 * g, 0).map_err(fail)?;
    let m = phys
        .map(&range, g, 2 * g, AccessMode::ReadWrite, 0)
        .map_err(fail)?;
    check_eq!(m.as_ptr(), range.as_ptr() + g as u64);
    check_eq!(m.access_mode().map_err(fail)?, AccessMode::ReadWrite);
    let data: Vec<u32> = (0..(2 * g / 4) as u32).collect();
    let view = m.as_range::<u32>().map_err(fail)?;
    q.write(&view, &data).map_err(fail)?;
    check!(q.to_vec(&view).map_err(fail)? == data);
    m.set_access_mode(AccessMode::Read).map_err(fail)?;
    check_eq!(m.access_mode().map_err(fail)?, AccessMode::Read);
    // A second mapping of the whole object elsewhere sees the same bytes. (Reserve another
    // range: mapping part of an object is optional; CUDA refuses it.)
    let range2 = VirtualRange::reserve(ctx, 2 * g, 0).map_err(fail)?;
    let m2 = phys
        .map(&range2, 0, 2 * g, AccessMode::ReadWrite, 0)
        .map_err(fail)?;
    check!(
        q.to_vec(&m2.as_range::<u32>().map_err(fail)?)
            .map_err(fail)?
            == data
    );
    m2.unmap().map_err(fail)?;
    match phys.map(&range2, 0, g, AccessMode::ReadWrite, 0) {
        Ok(part) => {
            check!(
                q.to_vec(&part.as_range::<u32>().map_err(fail)?)
                    .map_err(fail)?
                    == data[..g / 4]
            );
            part.unmap().map_err(fail)?;
        }
        Err(e) => check_eq!(e.code(), Errc::FeatureNotSupported),
    }
    // An unmap while a range of the mapping is alive is refused and left to the last
    // reference: the range still reads the memory (it was unmapped at once before).
    let err = m
        .unmap()
        .err()
        .ok_or_else(|| fail("unmap with a live range"))?;
    check_eq!(err.code(), Errc::Invalid);
    check!(q.to_vec(&view).map_err(fail)? == data);
    drop(view);
    // Errors.
    check_eq!(
        PhysicalMem::new(d, ctx, g + 1, PhysicalMemProperties::default())
            .err()
            .map(|e| e.code()),
        Some(Errc::Invalid)
    );
    check_eq!(
        phys.map(&range, 3 * g, 2 * g, AccessMode::ReadWrite, 0)
            .err()
            .map(|e| e.code()),
        Some(Errc::Invalid)
    );
    check_eq!(
        VirtualRange::reserve(ctx, g + 1, 0).err().map(|e| e.code()),
        Some(Errc::Invalid)
    );
    Ok(())
}

fn main() -> ExitCode {
    sycl_tests::run_child_role_if_any(&[
        ("selector_env", selector_env_child),
        ("selector_env_bad", selector_env_bad_child),
    ]);
    let device_tests = [
        DeviceTest {
            name: "device::info",
            needs: &[],
            run: device_info,
        },
        DeviceTest {
            name: "queue::in_order",
            needs: &[Aspect::UsmDeviceAllocations],
            run: in_order_queue,
        },
        DeviceTest {
            name: "queue::dependencies_across_queues",
            needs: &[Aspect::UsmDeviceAllocations],
            run: dependencies_across_queues,
        },
        DeviceTest {
            name: "queue::host_task_order",
            needs: &[],
            run: host_task_order,
        },
        DeviceTest {
            name: "queue::host_task_may_call_the_runtime",
            needs: &[],
            run: host_task_may_call_the_runtime,
        },
        DeviceTest {
            name: "queue::runtime_calls_beside_a_blocked_host_task",
            needs: &[],
            run: runtime_calls_beside_a_blocked_host_task,
        },
        DeviceTest {
            name: "queue::multithreaded_submission",
            needs: &[Aspect::UsmDeviceAllocations],
            run: multithreaded_submission,
        },
        DeviceTest {
            name: "usm::copy_sizes",
            needs: &[],
            run: usm_copy_sizes,
        },
        DeviceTest {
            name: "usm::fill_patterns",
            needs: &[],
            run: usm_fill_patterns,
        },
        DeviceTest {
            name: "usm::pointer_queries",
            needs: &[],
            run: usm_pointer_queries,
        },
        DeviceTest {
            name: "usm::free_while_in_use",
            needs: &[Aspect::UsmDeviceAllocations],
            run: usm_free_while_in_use,
        },
        DeviceTest {
            name: "usm::prefetch",
            needs: &[Aspect::UsmSharedAllocations],
            run: usm_prefetch,
        },
        DeviceTest {
            name: "errors::codes",
            needs: &[Aspect::UsmDeviceAllocations],
            run: error_codes,
        },
        DeviceTest {
            name: "event::profiling_on",
            needs: &[Aspect::QueueProfiling, Aspect::UsmDeviceAllocations],
            run: profiling_on,
        },
        DeviceTest {
            name: "event::profiling_off",
            needs: &[Aspect::UsmDeviceAllocations],
            run: profiling_off,
        },
        DeviceTest {
            name: "event::standalone_signal_wait",
            needs: &[
                Aspect::ExtOneapiReusableEvents,
                Aspect::UsmDeviceAllocations,
            ],
            run: standalone_events,
        },
        DeviceTest {
            name: "event::signal_counts",
            needs: &[
                Aspect::ExtOneapiReusableEvents,
                Aspect::ExtSyclRsEventSignalCount,
            ],
            run: signal_counts,
        },
        DeviceTest {
            name: "event::timed_wait",
            needs: &[],
            run: timed_wait,
        },
        DeviceTest {
            name: "kernel::closure_ranges",
            needs: &[
                Aspect::ExtSyclRsClosureKernels,
                Aspect::UsmSharedAllocations,
            ],
            run: closure_ranges,
        },
        DeviceTest {
            name: "kernel::closure_vector_add",
            needs: &[
                Aspect::ExtSyclRsClosureKernels,
                Aspect::UsmSharedAllocations,
            ],
            run: closure_vector_add,
        },
        DeviceTest {
            name: "kernel::closure_panic_is_an_error",
            needs: &[
                Aspect::ExtSyclRsClosureKernels,
                Aspect::UsmSharedAllocations,
            ],
            run: closure_panic_is_an_error,
        },
        DeviceTest {
            name: "kernel::source_vector_add",
            needs: &[Aspect::OnlineCompiler, Aspect::UsmDeviceAllocations],
            run: source_vector_add,
        },
        DeviceTest {
            name: "kernel::source_build_error",
            needs: &[Aspect::OnlineCompiler],
            run: source_build_error,
        },
        DeviceTest {
            name: "kernel::source_local_memory",
            needs: &[Aspect::OnlineCompiler, Aspect::UsmDeviceAllocations],
            run: source_local_memory,
        },
        DeviceTest {
            name: "virtual_mem::map_access_unmap",
            needs: &[Aspect::ExtOneapiVirtualMem],
            run: virtual_memory,
        },
        DeviceTest {
            name: "soundness::zero_sized_elements_are_refused",
            needs: &[Aspect::UsmDeviceAllocations],
            run: soundness::zero_sized_elements_are_refused,
        },
        DeviceTest {
            name: "soundness::dropping_the_last_owner_defers_the_release",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: soundness::dropping_the_last_owner_defers_the_release,
        },
        DeviceTest {
            name: "soundness::launches_beyond_the_device_are_refused",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: soundness::launches_beyond_the_device_are_refused,
        },
        DeviceTest {
            name: "soundness::aliasing_across_mappings_is_refused",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::ExtOneapiVirtualMem,
                Aspect::UsmDeviceAllocations,
            ],
            run: soundness::aliasing_across_mappings_is_refused,
        },
        DeviceTest {
            name: "soundness::release_waits_for_the_last_reference",
            needs: &[Aspect::UsmDeviceAllocations],
            run: soundness::release_waits_for_the_last_reference,
        },
        DeviceTest {
            name: "soundness::host_borrows_exclude_device_writes",
            needs: &[Aspect::UsmSharedAllocations],
            run: soundness::host_borrows_exclude_device_writes,
        },
        DeviceTest {
            name: "soundness::racing_views_are_defined",
            needs: &[
                Aspect::ExtSyclRsClosureKernels,
                Aspect::UsmSharedAllocations,
            ],
            run: soundness::racing_views_are_defined,
        },
        DeviceTest {
            name: "soundness::access_modes_refuse_instead_of_faulting",
            needs: &[Aspect::ExtOneapiVirtualMem],
            run: soundness::access_modes_refuse_instead_of_faulting,
        },
        DeviceTest {
            name: "soundness::source_kernels_see_exactly_their_range",
            needs: &[Aspect::OnlineCompiler, Aspect::UsmDeviceAllocations],
            run: soundness::source_kernels_see_exactly_their_range,
        },
        DeviceTest {
            name: "kernels::integer_arithmetic",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::integer_arithmetic,
        },
        DeviceTest {
            name: "kernels::float_arithmetic_f32",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::float_arithmetic_f32,
        },
        DeviceTest {
            name: "kernels::float_arithmetic_f64",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::UsmDeviceAllocations,
                Aspect::Fp64,
            ],
            run: kernels::float_arithmetic_f64,
        },
        DeviceTest {
            name: "kernels::math_library",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::math_library,
        },
        DeviceTest {
            name: "kernels::math_more",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::math_more,
        },
        DeviceTest {
            name: "kernels::math_int",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::math_int,
        },
        DeviceTest {
            name: "kernels::clamp",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::clamp,
        },
        DeviceTest {
            name: "kernels::private_arrays",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::private_arrays,
        },
        DeviceTest {
            name: "kernels::generic_helpers",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::generic_helpers,
        },
        DeviceTest {
            name: "kernels::structs",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::structs,
        },
        DeviceTest {
            name: "kernels::vector_copies",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::vector_copies_of_elements,
        },
        DeviceTest {
            name: "kernels::kernel_fail",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::kernel_failures,
        },
        DeviceTest {
            name: "kernels::generic_kernels",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::generic_kernels,
        },
        DeviceTest {
            name: "kernels::const_generic_kernels",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::const_generic_kernels,
        },
        DeviceTest {
            name: "kernels::helpers_with_slices",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::helpers_with_slices,
        },
        DeviceTest {
            name: "kernels::helpers_with_arrays",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::helpers_with_arrays,
        },
        DeviceTest {
            name: "kernels::casts",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::casts,
        },
        DeviceTest {
            name: "kernels::casts_f64",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::UsmDeviceAllocations,
                Aspect::Fp64,
            ],
            run: kernels::casts_f64,
        },
        DeviceTest {
            name: "kernels::control_flow_matches_the_host",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::control_flow_matches_the_host,
        },
        DeviceTest {
            name: "kernels::short_circuit_evaluation",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::short_circuit_evaluation,
        },
        DeviceTest {
            name: "kernels::language_details",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::language_details,
        },
        DeviceTest {
            name: "kernels::helpers",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::helpers,
        },
        DeviceTest {
            name: "kernels::helper_division_by_zero_fails",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::helper_division_by_zero_fails,
        },
        DeviceTest {
            name: "kernels::work_item_queries_plain_ranges",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::work_item_queries_plain_ranges,
        },
        DeviceTest {
            name: "kernels::work_item_queries_nd_ranges",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::work_item_queries_nd_ranges,
        },
        DeviceTest {
            name: "kernels::bounds_checks",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::bounds_checks,
        },
        DeviceTest {
            name: "kernels::bounds_proofs",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::bounds_proofs,
        },
        DeviceTest {
            name: "kernels::index_forms",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::index_forms,
        },
        DeviceTest {
            name: "kernels::division_failures",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::division_failures,
        },
        DeviceTest {
            name: "kernels::failure_in_a_work_group",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::failure_in_a_work_group,
        },
        DeviceTest {
            name: "kernels::unchecked_access",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::unchecked_access,
        },
        DeviceTest {
            name: "kernels::blocked_loops",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::blocked_loops,
        },
        DeviceTest {
            name: "kernels::aliasing",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::aliasing,
        },
        DeviceTest {
            name: "kernels::range_errors",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::range_errors,
        },
        DeviceTest {
            name: "kernels::barrier_exchange_waits",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::barrier_exchange_waits,
        },
        DeviceTest {
            name: "kernels::barrier_in_uniform_loops",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::barrier_in_uniform_loops,
        },
        DeviceTest {
            name: "kernels::barrier_after_early_return",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::barrier_after_early_return,
        },
        DeviceTest {
            name: "kernels::group_reductions",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::group_reductions,
        },
        DeviceTest {
            name: "kernels::group_scans_and_votes",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::group_scans_and_votes,
        },
        DeviceTest {
            name: "kernels::collectives_after_return",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::collectives_after_return,
        },
        DeviceTest {
            name: "kernels::reduction_value_stays_checked",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::reduction_value_stays_checked,
        },
        DeviceTest {
            name: "kernels::sub_group_operations",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::ExtSyclRsSubGroups,
                Aspect::UsmDeviceAllocations,
            ],
            run: kernels::sub_group_operations,
        },
        DeviceTest {
            name: "kernels::sub_group_after_return_offers_zero",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::ExtSyclRsSubGroups,
                Aspect::UsmDeviceAllocations,
            ],
            run: kernels::sub_group_after_return_offers_zero,
        },
        DeviceTest {
            name: "kernels::sub_group_scan_in_loop",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::ExtSyclRsSubGroups,
                Aspect::UsmDeviceAllocations,
            ],
            run: kernels::sub_group_scan_in_loop,
        },
        DeviceTest {
            name: "kernels::sub_group_sums_through_local_memory",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::ExtSyclRsSubGroups,
                Aspect::UsmDeviceAllocations,
            ],
            run: kernels::sub_group_sums_through_local_memory,
        },
        DeviceTest {
            name: "kernels::sub_group_refusals",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::sub_group_refusals,
        },
        DeviceTest {
            name: "kernels::atomics_under_contention",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::atomics_under_contention,
        },
        DeviceTest {
            name: "kernels::atomics_compare_exchange",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::atomics_compare_exchange,
        },
        DeviceTest {
            name: "kernels::atomics_u64",
            needs: &[
                Aspect::ExtSyclRsKernels,
                Aspect::UsmDeviceAllocations,
                Aspect::Atomic64,
            ],
            run: kernels::atomics_u64,
        },
        DeviceTest {
            name: "kernels::atomics_ordered",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::atomics_ordered,
        },
        DeviceTest {
            name: "kernels::atomics_message_passing",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::atomics_message_passing,
        },
        DeviceTest {
            name: "kernels::halves_in_groups_and_helpers",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::halves_in_groups_and_helpers,
        },
        DeviceTest {
            name: "kernels::halves",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::halves,
        },
        DeviceTest {
            name: "kernels::atomics_local_histogram",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::atomics_local_histogram,
        },
        DeviceTest {
            name: "kernels::local_tiles_3d",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::local_tiles_3d,
        },
        DeviceTest {
            name: "kernels::transpose_2d",
            needs: &[Aspect::ExtSyclRsKernels, Aspect::UsmDeviceAllocations],
            run: kernels::transpose_2d,
        },
    ];
    let global_tests = [
        GlobalTest {
            name: "platform::enumeration",
            run: enumeration,
        },
        GlobalTest {
            name: "selector::filters_and_scores",
            run: selectors,
        },
        GlobalTest {
            name: "selector::oneapi_device_selector_env",
            run: selector_env,
        },
        GlobalTest {
            name: "aspect::names_round_trip",
            run: aspect_names,
        },
        GlobalTest {
            name: "soundness::overflowing_ranges_are_errors",
            run: soundness::overflowing_ranges_are_errors,
        },
    ];
    run_suite(&device_tests, &global_tests)
}
