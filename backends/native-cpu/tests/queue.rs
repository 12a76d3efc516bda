//! Enumeration, USM, queues, kernels and events of the native CPU backend.

mod common;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{env, read, write};
use sycl_backend::{
    Aspect, BackendKind, ClosureKernel, DeviceType, Errc, EventProperties, EventStatus,
    LaunchRange, UsmKind,
};

#[test]
fn enumeration_and_info() {
    let e = env();
    assert_eq!(e.platform.backend(), BackendKind::NativeCpu);
    assert_eq!(e.platform.info().name, "sycl-rs native CPU");
    let devices = e.platform.devices();
    assert_eq!(devices.len(), 1);
    assert!(
        Arc::ptr_eq(&devices[0], &e.platform.devices()[0]),
        "same Arcs every call"
    );
    let info = e.device.info();
    assert_eq!(info.device_type, DeviceType::Cpu);
    assert!(!info.name.is_empty());
    assert_eq!(info.driver_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        info.max_compute_units as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    assert!(info.global_mem_size > 0);
    assert_eq!(info.max_work_group_size, 8192);
    assert!(info.uuid.is_none());
    for a in [
        Aspect::Cpu,
        Aspect::Fp64,
        Aspect::Atomic64,
        Aspect::QueueProfiling,
        Aspect::UsmDeviceAllocations,
        Aspect::UsmHostAllocations,
        Aspect::UsmSharedAllocations,
        Aspect::UsmSystemAllocations,
        Aspect::ExtOneapiVirtualMem,
        Aspect::ExtOneapiIpcMemory,
        Aspect::ExtOneapiIpcPhysicalMemory,
        Aspect::ExtOneapiIpcEvent,
        Aspect::ExtOneapiReusableEvents,
        Aspect::ExtSyclRsClosureKernels,
    ] {
        assert!(e.device.has(a), "missing {a}");
    }
    for a in [Aspect::Gpu, Aspect::Fp16, Aspect::OnlineCompiler] {
        assert!(!e.device.has(a), "unexpected {a}");
    }
    assert_eq!(e.ctx.devices().len(), 1);
    assert!(e.platform.create_context(&[]).is_err());
    let err = e
        .ctx
        .build_kernel_bundle(
            std::slice::from_ref(&e.device),
            &sycl_backend::KernelSource::OpenClC("kernel void k(){}"),
            "",
        )
        .err()
        .unwrap();
    assert_eq!(err.code(), Errc::FeatureNotSupported);
}

#[test]
fn usm_alloc_free_and_pointer_info() {
    let e = env();
    for kind in [UsmKind::Device, UsmKind::Host, UsmKind::Shared] {
        let dev = (kind != UsmKind::Host).then_some(&e.device);
        let p = e.ctx.usm_alloc(kind, dev, 1000, 0).unwrap();
        assert_eq!(p % 64, 0);
        for interior in [p, p + 1, p + 500, p + 999] {
            let info = e.ctx.usm_pointer_info(interior);
            assert_eq!(info.kind, kind);
            assert_eq!(info.base, p);
            assert_eq!(info.size, 1000);
            assert_eq!(
                info.device_index,
                if kind == UsmKind::Host { None } else { Some(0) }
            );
        }
        assert_eq!(e.ctx.usm_pointer_info(p + 1000).kind, UsmKind::Unknown);
        assert_eq!(e.ctx.usm_pointer_info(p - 1).kind, UsmKind::Unknown);
        write(p, &[7u8; 1000]);
        assert_eq!(read(p, 1000), vec![7u8; 1000]);
        // SAFETY: interior pointers are not allocations: refused without touching anything.
        assert_eq!(
            // SAFETY: an interior pointer is refused by the bookkeeping; nothing is freed.
            unsafe { e.ctx.usm_free(p + 8) }.unwrap_err().code(),
            Errc::Invalid
        );
        // SAFETY: `p` is a live allocation no command uses.
        unsafe { e.ctx.usm_free(p).unwrap() };
        assert_eq!(e.ctx.usm_pointer_info(p).kind, UsmKind::Unknown);
        // SAFETY: double free is detected by the bookkeeping.
        assert_eq!(
            // SAFETY: a double free is refused by the bookkeeping; nothing is freed.
            unsafe { e.ctx.usm_free(p) }.unwrap_err().code(),
            Errc::Invalid
        );
    }
    // Unknown pointers.
    assert_eq!(e.ctx.usm_pointer_info(0).kind, UsmKind::Unknown);
    let on_stack = 5u64;
    assert_eq!(
        e.ctx.usm_pointer_info(&on_stack as *const u64 as u64).kind,
        UsmKind::Unknown
    );
    // SAFETY: unknown pointers are refused by the bookkeeping.
    assert_eq!(
        // SAFETY: an unknown pointer is refused by the bookkeeping; nothing is freed.
        unsafe { e.ctx.usm_free(0x1234_5000) }.unwrap_err().code(),
        Errc::Invalid
    );
    // Alignments, up to beyond a page.
    for align in [1usize, 8, 256, 4096, 1 << 16, 1 << 21] {
        let p = e
            .ctx
            .usm_alloc(UsmKind::Device, Some(&e.device), 3000, align)
            .unwrap();
        assert_eq!(p % align as u64, 0, "align {align}");
        write(p, &[1u8; 3000]);
        assert_eq!(e.ctx.usm_pointer_info(p + 2999).base, p);
        // SAFETY: live allocation.
        unsafe { e.ctx.usm_free(p).unwrap() };
    }
    assert_eq!(
        e.ctx
            .usm_alloc(UsmKind::Device, Some(&e.device), 0, 0)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
    assert_eq!(
        e.ctx
            .usm_alloc(UsmKind::Device, Some(&e.device), 16, 3)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
    assert_eq!(
        e.ctx
            .usm_alloc(UsmKind::Device, None, 16, 0)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
}

#[test]
fn memcpy_and_fill_many_sizes() {
    let e = env();
    let q = e.queue(true, false);
    let cap = 1 << 16;
    let a = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), cap + 64, 0)
        .unwrap();
    let b = e
        .ctx
        .usm_alloc(UsmKind::Shared, Some(&e.device), cap + 64, 0)
        .unwrap();
    let mut seed = 12345u32;
    for &size in &[1usize, 2, 3, 7, 63, 64, 65, 4095, 4096, 4097, 65536] {
        for &(src_off, dst_off) in &[(0u64, 0u64), (1, 3), (7, 0), (0, 13)] {
            let src: Vec<u8> = (0..size)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            write(a + src_off, &src);
            // SAFETY: both ranges are live allocations of at least `size` bytes past the offsets.
            let ev = unsafe { q.memcpy(b + dst_off, a + src_off, size, &[]) }.unwrap();
            ev.wait().unwrap();
            assert_eq!(
                read(b + dst_off, size),
                src,
                "memcpy size {size} offsets {src_off}/{dst_off}"
            );
        }
    }
    // Host memory on both sides, and an overlapping copy.
    let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    let mut dst = vec![0u8; 10_000];
    // SAFETY: the vectors outlive the wait below.
    unsafe { q.memcpy(dst.as_mut_ptr() as u64, src.as_ptr() as u64, src.len(), &[]) }
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(dst, src);
    write(a, &src[..1000]);
    // SAFETY: the overlapping ranges lie inside `a`.
    unsafe { q.memcpy(a + 10, a, 1000, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(a + 10, 1000), src[..1000].to_vec());

    for pattern in [
        &[0xabu8][..],
        &[1, 2],
        &[1, 2, 3],
        &[9, 8, 7, 6],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &[0x5a; 16],
    ] {
        for reps in [1usize, 2, 3, 5, 100, 1001, 4095] {
            let size = pattern.len() * reps;
            if size > cap {
                continue;
            }
            for off in [0u64, 1, 5] {
                write(b, &vec![0xee; cap + 64]);
                // SAFETY: the range lies inside `b`.
                unsafe { q.fill(b + off, pattern, size, &[]) }
                    .unwrap()
                    .wait()
                    .unwrap();
                let got = read(b, cap);
                let want: Vec<u8> = pattern.iter().copied().cycle().take(size).collect();
                assert_eq!(
                    &got[off as usize..off as usize + size],
                    &want[..],
                    "pattern {pattern:?} x{reps}"
                );
                assert!(got[..off as usize].iter().all(|&x| x == 0xee));
                assert_eq!(got[off as usize + size], 0xee, "fill wrote past its end");
            }
        }
    }
    // SAFETY: a size that is not a multiple of the pattern is refused before anything runs.
    assert_eq!(
        // SAFETY: the bad size is refused before anything is enqueued.
        unsafe { q.fill(b, &[1, 2, 3], 4, &[]) }
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );

    // A large copy (the parallel path) and a large fill.
    let big = 20 << 20;
    let x = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), big, 0)
        .unwrap();
    let y = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), big, 0)
        .unwrap();
    // SAFETY: both allocations are `big` bytes.
    unsafe {
        q.fill(x, &[1, 2, 3, 4], big, &[]).unwrap();
        q.memcpy(y, x, big, &[]).unwrap().wait().unwrap();
    }
    let got = read(y, big);
    assert!(got.chunks(4).all(|c| c == [1, 2, 3, 4]));
    // SAFETY: no command uses these any more.
    unsafe {
        for p in [a, b, x, y] {
            e.ctx.usm_free(p).unwrap();
        }
    }
}

#[test]
fn in_order_execution_and_queue_wait() {
    let e = env();
    for in_order in [true, false] {
        let q = e.queue(in_order, false);
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..200 {
            let log = log.clone();
            q.host_task(
                Box::new(move || {
                    if i % 50 == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    log.lock().unwrap().push(i);
                }),
                &[],
            )
            .unwrap();
        }
        q.wait().unwrap();
        assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    }
    // A chain of copies through one buffer relies on ordering.
    let q = e.queue(true, false);
    let p = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 64, 0)
        .unwrap();
    for i in 0..32u64 {
        // SAFETY: p..p+64 is live.
        unsafe { q.fill(p + i, &[i as u8], 1, &[]).unwrap() };
        // SAFETY: same allocation.
        unsafe { q.memcpy(p + i + 1, p + i, 1, &[]).unwrap() };
    }
    q.wait().unwrap();
    let got = read(p, 33);
    for (i, &byte) in got.iter().take(32).enumerate() {
        assert_eq!(byte, i as u8);
    }
    assert_eq!(got[32], 31);
    // SAFETY: queue drained.
    unsafe { e.ctx.usm_free(p).unwrap() };
}

#[test]
fn dependencies_across_queues_and_barrier() {
    let e = env();
    let q1 = e.queue(true, false);
    let q2 = e.queue(false, false);
    let flag = Arc::new(AtomicU32::new(0));
    let f = flag.clone();
    let slow = q1
        .host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(60));
                f.store(1, Ordering::SeqCst);
            }),
            &[],
        )
        .unwrap();
    let f = flag.clone();
    let seen = Arc::new(AtomicU32::new(99));
    let s = seen.clone();
    let dependent = q2
        .host_task(
            Box::new(move || s.store(f.load(Ordering::SeqCst), Ordering::SeqCst)),
            std::slice::from_ref(&slow),
        )
        .unwrap();
    let barrier = q2.barrier(std::slice::from_ref(&dependent)).unwrap();
    barrier.wait().unwrap();
    assert_eq!(dependent.status().unwrap(), EventStatus::Complete);
    assert_eq!(slow.status().unwrap(), EventStatus::Complete);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the dependent task ran before its dependency"
    );

    // Barrier on an in-order queue completes after earlier commands.
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let c = count.clone();
        q1.host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(2));
                c.fetch_add(1, Ordering::SeqCst);
            }),
            &[],
        )
        .unwrap();
    }
    q1.barrier(&[]).unwrap().wait().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 10);
    // Prefetch is a no-op that still honours deps.
    let p = e
        .ctx
        .usm_alloc(UsmKind::Shared, Some(&e.device), 128, 0)
        .unwrap();
    // SAFETY: live allocation.
    unsafe { q1.prefetch(p, 128, &[]) }.unwrap().wait().unwrap();
    // SAFETY: drained.
    unsafe { e.ctx.usm_free(p).unwrap() };
}

fn check_cover(e: &common::Env, range: LaunchRange) {
    let total = range.total().expect("a range that fits usize");
    let counts: Arc<Vec<AtomicU32>> = Arc::new((0..total).map(|_| AtomicU32::new(0)).collect());
    let c = counts.clone();
    let kernel: ClosureKernel = Arc::new(move |r: std::ops::Range<usize>| {
        for i in r {
            c[i].fetch_add(1, Ordering::Relaxed);
        }
    });
    let q = e.queue(true, false);
    q.parallel_for_closure(range, kernel, &[])
        .unwrap()
        .wait()
        .unwrap();
    for (i, n) in counts.iter().enumerate() {
        assert_eq!(n.load(Ordering::Relaxed), 1, "item {i} of {range:?}");
    }
}

#[test]
fn closure_kernels_cover_every_index_once() {
    let e = env();
    for n in [1usize, 2, 100, 4096, 4097, 10_000, 1_000_003] {
        check_cover(
            &e,
            LaunchRange {
                dims: 1,
                global: [n, 1, 1],
                local: None,
            },
        );
    }
    check_cover(
        &e,
        LaunchRange {
            dims: 2,
            global: [300, 70, 1],
            local: None,
        },
    );
    check_cover(
        &e,
        LaunchRange {
            dims: 2,
            global: [64, 64, 1],
            local: Some([8, 8, 1]),
        },
    );
    check_cover(
        &e,
        LaunchRange {
            dims: 3,
            global: [20, 30, 40],
            local: None,
        },
    );
    check_cover(
        &e,
        LaunchRange {
            dims: 3,
            global: [16, 16, 16],
            local: Some([4, 4, 4]),
        },
    );
    check_cover(
        &e,
        LaunchRange {
            dims: 1,
            global: [0, 1, 1],
            local: None,
        },
    );

    let q = e.queue(true, false);
    let noop: ClosureKernel = Arc::new(|_| {});
    for bad in [
        LaunchRange {
            dims: 0,
            global: [1, 1, 1],
            local: None,
        },
        LaunchRange {
            dims: 4,
            global: [1, 1, 1],
            local: None,
        },
        LaunchRange {
            dims: 1,
            global: [10, 1, 1],
            local: Some([3, 1, 1]),
        },
        LaunchRange {
            dims: 1,
            global: [16384, 1, 1],
            local: Some([16384, 1, 1]),
        },
        LaunchRange {
            dims: 3,
            global: [usize::MAX, 4, 4],
            local: None,
        },
    ] {
        let err = q
            .parallel_for_closure(bad, noop.clone(), &[])
            .err()
            .expect("bad range accepted");
        assert_eq!(err.code(), Errc::NdRange, "{bad:?}");
    }
}

#[test]
fn panics_become_errors_and_the_queue_survives() {
    let e = env();
    let q = e.queue(true, false);
    let small: ClosureKernel = Arc::new(|r| {
        if r.contains(&3) {
            panic!("boom in kernel");
        }
    });
    let ev = q
        .parallel_for_closure(
            LaunchRange {
                dims: 1,
                global: [10, 1, 1],
                local: None,
            },
            small,
            &[],
        )
        .unwrap();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Kernel);
    assert!(err.message().contains("boom in kernel"), "{err}");
    assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    assert_eq!(
        ev.wait_timeout(Duration::from_millis(1))
            .unwrap_err()
            .code(),
        Errc::Kernel
    );

    let big: ClosureKernel = Arc::new(|r| {
        if r.contains(&777_777) {
            panic!("boom in a parallel chunk");
        }
    });
    let ev = q
        .parallel_for_closure(
            LaunchRange {
                dims: 1,
                global: [1_000_000, 1, 1],
                local: None,
            },
            big,
            &[],
        )
        .unwrap();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Kernel);
    assert!(err.message().contains("boom in a parallel chunk"), "{err}");

    let ev = q
        .host_task(Box::new(|| panic!("host task {} failed", 42)), &[])
        .unwrap();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Kernel);
    assert!(err.message().contains("host task 42 failed"), "{err}");

    // Later commands, including ones that depend on the failed event, still run.
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    q.host_task(Box::new(move || r.store(1, Ordering::SeqCst)), &[ev])
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    q.wait().unwrap();
}

#[test]
fn profiling_on_and_off() {
    let e = env();
    let plain = e.queue(true, false);
    let ev = plain.barrier(&[]).unwrap();
    ev.wait().unwrap();
    let err = ev.profiling().unwrap_err();
    assert_eq!(err.code(), Errc::Profiling);
    assert!(err.message().contains("enable_profiling"));

    let q = e.queue(true, true);
    let ev = q
        .host_task(
            Box::new(|| std::thread::sleep(Duration::from_millis(20))),
            &[],
        )
        .unwrap();
    ev.wait().unwrap();
    let p = ev.profiling().unwrap();
    assert!(
        p.submit_ns > 0 && p.submit_ns <= p.start_ns && p.start_ns <= p.end_ns,
        "{p:?}"
    );
    assert!(p.end_ns - p.start_ns >= 19_000_000, "{p:?}");

    // Standalone events: profiling only when asked for.
    assert_eq!(
        e.ctx
            .create_event(EventProperties::default())
            .unwrap()
            .profiling()
            .unwrap_err()
            .code(),
        Errc::Profiling
    );
    let pe = e
        .ctx
        .create_event(EventProperties {
            enable_profiling: true,
            enable_ipc: false,
        })
        .unwrap();
    plain.enqueue_signal_event(&pe).unwrap();
    pe.wait().unwrap();
    let p = pe.profiling().unwrap();
    assert!(p.submit_ns <= p.start_ns && p.start_ns == p.end_ns);
    // A profiling queue gives timestamps to a plain standalone event it signals.
    let se = e.ctx.create_event(EventProperties::default()).unwrap();
    q.enqueue_signal_event(&se).unwrap();
    se.wait().unwrap();
    assert!(se.profiling().is_ok());
}

#[test]
fn standalone_events_signal_and_wait_across_threads() {
    let e = env();
    let ev = e.ctx.create_event(EventProperties::default()).unwrap();
    assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    ev.wait().unwrap();
    assert!(!ev.ipc_enabled());

    let q = e.queue(true, false);
    let (tx, rx) = mpsc::channel::<()>();
    q.host_task(Box::new(move || rx.recv().unwrap()), &[])
        .unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    assert_ne!(ev.status().unwrap(), EventStatus::Complete);
    let t0 = Instant::now();
    assert!(!ev.wait_timeout(Duration::from_millis(30)).unwrap());
    assert!(t0.elapsed() >= Duration::from_millis(29));

    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let ev = ev.clone();
            std::thread::spawn(move || {
                ev.wait().unwrap();
                Instant::now()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let released = Instant::now();
    tx.send(()).unwrap();
    for w in waiters {
        assert!(w.join().unwrap() >= released);
    }
    assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    assert!(ev.wait_timeout(Duration::ZERO).unwrap());

    // enqueue_wait_events: q2's later commands wait for the event.
    let q2 = e.queue(true, false);
    let (tx, rx) = mpsc::channel::<()>();
    q.host_task(Box::new(move || rx.recv().unwrap()), &[])
        .unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    q2.enqueue_wait_events(std::slice::from_ref(&ev)).unwrap();
    let flag = Arc::new(AtomicU32::new(0));
    let f = flag.clone();
    let after = q2
        .host_task(Box::new(move || f.store(1, Ordering::SeqCst)), &[])
        .unwrap();
    assert!(!after.wait_timeout(Duration::from_millis(30)).unwrap());
    assert_eq!(flag.load(Ordering::SeqCst), 0);
    tx.send(()).unwrap();
    after.wait().unwrap();
    assert_eq!(flag.load(Ordering::SeqCst), 1);
    q2.wait().unwrap();

    // Re-signalling reuses the event.
    for _ in 0..100 {
        q.enqueue_signal_event(&ev).unwrap();
        ev.wait().unwrap();
    }
}

#[test]
fn dropping_a_queue_finishes_its_work() {
    let e = env();
    let count = Arc::new(AtomicU32::new(0));
    let last = {
        let q = e.queue(true, false);
        let mut last = None;
        for _ in 0..20 {
            let c = count.clone();
            last = Some(
                q.host_task(
                    Box::new(move || {
                        c.fetch_add(1, Ordering::SeqCst);
                    }),
                    &[],
                )
                .unwrap(),
            );
        }
        last.unwrap()
    };
    last.wait().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 20);
}

/// Back-to-back submit + wait never loses a wake-up: each of thousands of waits returns, as
/// complete, well within a generous limit. (Its speed is measured by the native_cpu bench,
/// against a bare futex, not asserted here.)
#[test]
fn submit_wait_never_loses_a_wakeup() {
    let e = env();
    let q = e.queue(true, false);
    let noop: ClosureKernel = Arc::new(|_| {});
    let range = LaunchRange {
        dims: 1,
        global: [1, 1, 1],
        local: None,
    };
    for i in 0..6_000 {
        let ev = q.parallel_for_closure(range, noop.clone(), &[]).unwrap();
        assert!(
            ev.wait_timeout(Duration::from_secs(10)).unwrap(),
            "submission {i} never completed"
        );
        assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    }
}

#[test]
fn many_live_allocations() {
    let e = env();
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(u64::MAX);
    // More allocations than the usual soft descriptor limit of 1024, when the hard limit allows.
    let n = 3000.min(hard.saturating_sub(200) as usize);
    let ptrs: Vec<u64> = (0..n)
        .map(|i| {
            let p = e
                .ctx
                .usm_alloc(UsmKind::Device, Some(&e.device), 64, 0)
                .unwrap();
            write(p, &(i as u64).to_le_bytes());
            p
        })
        .collect();
    for (i, &p) in ptrs.iter().enumerate() {
        assert_eq!(read(p, 8), (i as u64).to_le_bytes());
        assert_eq!(e.ctx.usm_pointer_info(p + 63).base, p);
    }
    for p in ptrs {
        // SAFETY: live allocation no command uses.
        unsafe { e.ctx.usm_free(p).unwrap() };
    }
}

/// An event of "another backend": completes when its flag is set.
struct ForeignEvent {
    done: Arc<AtomicU32>,
    fail: bool,
}

impl sycl_backend::Event for ForeignEvent {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn status(&self) -> sycl_backend::Result<EventStatus> {
        Ok(if self.done.load(Ordering::SeqCst) != 0 {
            EventStatus::Complete
        } else {
            EventStatus::Submitted
        })
    }
    fn wait(&self) -> sycl_backend::Result<()> {
        while self.done.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.fail {
            Err(sycl_backend::Error::new(Errc::Runtime, "foreign failure"))
        } else {
            Ok(())
        }
    }
    fn wait_timeout(&self, timeout: Duration) -> sycl_backend::Result<bool> {
        sycl_backend::poll_until(timeout, || Ok(self.done.load(Ordering::SeqCst) != 0))
    }
    fn profiling(&self) -> sycl_backend::Result<sycl_backend::ProfilingInfo> {
        Err(sycl_backend::Error::new(Errc::Profiling, "none"))
    }
}

#[test]
fn foreign_dependencies_are_waited_for() {
    let e = env();
    let q = e.queue(true, false);
    let done = Arc::new(AtomicU32::new(0));
    let foreign: Arc<dyn sycl_backend::Event> = Arc::new(ForeignEvent {
        done: done.clone(),
        fail: false,
    });
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    // Submission does not block on the foreign event.
    let ev = q
        .host_task(Box::new(move || r.store(1, Ordering::SeqCst)), &[foreign])
        .unwrap();
    assert!(!ev.wait_timeout(Duration::from_millis(20)).unwrap());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    done.store(1, Ordering::SeqCst);
    ev.wait().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // A failed foreign dependency fails the command, and the queue goes on.
    let failing: Arc<dyn sycl_backend::Event> = Arc::new(ForeignEvent {
        done: Arc::new(AtomicU32::new(1)),
        fail: true,
    });
    let ev = q.barrier(std::slice::from_ref(&failing)).unwrap();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Runtime);
    assert!(err.message().contains("foreign failure"), "{err}");
    q.barrier(&[]).unwrap().wait().unwrap();
    // A foreign event cannot be signalled by this backend.
    assert_eq!(
        q.enqueue_signal_event(&failing).unwrap_err().code(),
        Errc::BackendMismatch
    );
}

#[test]
fn dropping_a_queue_never_blocks() {
    let e = env();
    let q = e.queue(true, false);
    let (tx, rx) = mpsc::channel::<()>();
    let ev = q
        .host_task(Box::new(move || rx.recv().unwrap()), &[])
        .unwrap();
    let after = q.barrier(&[]).unwrap();
    drop(q); // the host task still waits for us: this must not block
    assert!(!after.wait_timeout(Duration::from_millis(10)).unwrap());
    tx.send(()).unwrap();
    ev.wait().unwrap();
    after.wait().unwrap();
}
