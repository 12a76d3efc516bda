//! The backend end to end against a mock Level Zero driver (`tests/mock/mock_ze_driver.c`),
//! loaded by the real `libze_loader.so.1` through `ZE_ENABLE_ALT_DRIVERS`.
//!
//! What this proves: the backend's calls, structs, handles, call order and fd plumbing work
//! through the real loader against a driver that follows the spec as we read it. What it does
//! not prove: anything about Intel's driver (see spec/level-zero.md).
//!
//! The mock is compiled with `cc` at test time. Without `cc`, the loader or the headers, the
//! tests skip with a message (they fail instead when `SYCL_RS_REQUIRE_BACKENDS` names
//! `level_zero`). The tests share one process-wide loader and run one at a time.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::time::Duration;

use sycl_backend::ipc::{acquire_remote_fd, ExporterId, IpcImport};
use sycl_backend::{
    AccessMode, Aspect, BackendKind, Errc, EventProperties, EventStatus, GranularityMode,
    KernelArg, KernelSource, LaunchRange, PhysicalMemProperties, QueueProperties, UsmKind,
};
use sycl_backend_level_zero::ipc::PhysPayload;

mod common;
use common::*;

#[test]
fn device_info_and_aspects_come_from_the_driver() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let info = env.device.info();
    assert_eq!(env.device.backend(), BackendKind::LevelZero);
    assert_eq!(info.name, "sycl-rs mock GPU");
    assert_eq!(info.vendor_id, 0x8086);
    assert_eq!(info.uuid, Some(*b"mock-gpu-uuid-01"));
    assert_eq!(info.max_compute_units, 64);
    assert_eq!(info.max_work_group_size, 1024);
    assert_eq!(info.max_work_item_sizes, [1024, 1024, 64]);
    assert_eq!(info.global_mem_size, 8 << 30);
    assert_eq!(info.version, "1.4");
    for a in [
        Aspect::Gpu,
        Aspect::Fp16,
        Aspect::Atomic64,
        Aspect::UsmDeviceAllocations,
        Aspect::ExtOneapiVirtualMem,
        Aspect::ExtOneapiIpcMemory,
    ] {
        assert!(env.device.has(a), "{a}");
    }
    // The mock has no fp64; the 1.8 loader has neither zePhysicalMemGetProperties nor the
    // counter-based IPC entry points, and the mock no zex extension functions.
    for a in [
        Aspect::Fp64,
        Aspect::ExtOneapiIpcPhysicalMemory,
        Aspect::ExtOneapiIpcEvent,
        Aspect::Cpu,
    ] {
        assert!(!env.device.has(a), "{a}");
    }
    assert!(env.device.can_access_peer(&env.device));
}

#[test]
fn usm_fill_copy_and_pointer_info() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let before = live_allocations(env);
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let dev = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 4096, 0)
        .unwrap();
    let shared = ctx
        .usm_alloc(UsmKind::Shared, Some(&env.device), 64, 0)
        .unwrap();
    assert_eq!(live_allocations(env), before + 2);

    let info = ctx.usm_pointer_info(dev + 100);
    assert_eq!(
        (info.kind, info.device_index, info.base, info.size),
        (UsmKind::Device, Some(0), dev, 4096)
    );
    assert_eq!(ctx.usm_pointer_info(shared).kind, UsmKind::Shared);
    assert_eq!(ctx.usm_pointer_info(0x10).kind, UsmKind::Unknown);

    // SAFETY: live allocations, waited for below.
    let fill = unsafe { q.fill(dev, &[1, 2, 3, 4], 4096, &[]) }.unwrap();
    // SAFETY: as above; the dependency orders it after the fill.
    let copy = unsafe { q.memcpy(dev + 8, dev, 4, std::slice::from_ref(&fill)) }.unwrap();
    copy.wait().unwrap();
    assert_eq!(copy.status().unwrap(), EventStatus::Complete);
    let bytes = read_back(&q, &ctx, dev, 16);
    assert_eq!(bytes, [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]);
    // A fill whose size is not a multiple of the pattern is refused before the driver.
    // SAFETY: not submitted.
    assert_eq!(
        // SAFETY: refused before submission.
        unsafe { q.fill(dev, &[1, 2, 3], 4096, &[]) }.err_().code(),
        Errc::Invalid
    );
    // Host USM needs no device; device USM does.
    assert_eq!(
        ctx.usm_alloc(UsmKind::Device, None, 64, 0).err_().code(),
        Errc::Invalid
    );
    // Driver errors keep their native code.
    let e = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 64, 1 << 20)
        .err_();
    assert_eq!(e.code(), Errc::FeatureNotSupported);
    assert_eq!(
        e.native().unwrap().name.as_deref(),
        Some("ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT")
    );
    q.wait().unwrap();
    // SAFETY: nothing pending.
    unsafe {
        ctx.usm_free(dev).unwrap();
        ctx.usm_free(shared).unwrap();
    }
    assert_eq!(live_allocations(env), before);
}

#[test]
fn queue_order_host_tasks_and_profiling() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(
            &env.device,
            QueueProperties {
                in_order: false,
                enable_profiling: true,
            },
        )
        .unwrap();
    let host = ctx.usm_alloc(UsmKind::Host, None, 4, 0).unwrap();
    let dev = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 4, 0)
        .unwrap();
    let h = host;
    // The host task writes after a delay; the copy submitted after it must see the write.
    let task = q
        .host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(50));
                // SAFETY: host USM of 4 bytes, alive until the queue is waited for.
                unsafe { (h as *mut u32).write(0xfeed_beef) };
            }),
            &[],
        )
        .unwrap();
    // SAFETY: live allocations until q.wait().
    let copy = unsafe { q.memcpy(dev, host, 4, &[]) }.unwrap();
    q.wait().unwrap();
    assert_eq!(task.status().unwrap(), EventStatus::Complete);
    assert_eq!(read_back(&q, &ctx, dev, 4), 0xfeed_beefu32.to_ne_bytes());
    let p = copy.profiling().unwrap();
    assert!(p.end_ns > p.start_ns && p.start_ns % 10 == 0, "{p:?}");
    // Host-task events carry no timestamps.
    assert_eq!(task.profiling().err_().code(), Errc::Profiling);
    let b = q.barrier(&[copy]).unwrap();
    assert!(b.wait_timeout(Duration::from_secs(5)).unwrap());
    // SAFETY: nothing pending.
    unsafe {
        ctx.usm_free(host).unwrap();
        ctx.usm_free(dev).unwrap();
    }
}

#[test]
fn spirv_kernels_build_and_launch() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let module = spirv(&["iota_u32", "launch_probe", "local_probe"]);
    let bundle = ctx
        .build_kernel_bundle(
            std::slice::from_ref(&env.device),
            &KernelSource::SpirV(&module),
            "-g",
        )
        .unwrap();
    assert_eq!(
        bundle.kernel_names(),
        ["iota_u32", "launch_probe", "local_probe"]
    );
    assert_eq!(bundle.kernel("nope").err_().code(), Errc::Invalid);
    let out = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 4000, 0)
        .unwrap();

    // No local range: the backend asks zeKernelSuggestGroupSize (the mock answers 8 for 1000).
    let iota = bundle.kernel("iota_u32").unwrap();
    assert_eq!(iota.num_args(), Some(2));
    let base = 7u32.to_ne_bytes();
    let range = LaunchRange {
        dims: 1,
        global: [1000, 1, 1],
        local: None,
    };
    // SAFETY: `out` holds 1000 u32 until the wait.
    let e = unsafe {
        q.launch(
            &iota,
            range,
            &[KernelArg::Pointer(out), KernelArg::Scalar(&base)],
            &[],
        )
    }
    .unwrap();
    e.wait().unwrap();
    let bytes = read_back(&q, &ctx, out, 4000);
    let vals: Vec<u32> = bytes
        .chunks(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, (7..1007).collect::<Vec<u32>>());

    // An nd-range: group size and counts as the driver received them.
    let probe = bundle.kernel("launch_probe").unwrap();
    let range = LaunchRange {
        dims: 2,
        global: [64, 4, 1],
        local: Some([16, 2, 1]),
    };
    // SAFETY: as above.
    unsafe { q.launch(&probe, range, &[KernelArg::Pointer(out)], &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let got: Vec<u32> = read_back(&q, &ctx, out, 24)
        .chunks(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [16, 2, 1, 4, 2, 1]);

    // Local memory arrives as (size, null).
    let local = bundle.kernel("local_probe").unwrap();
    let range = LaunchRange {
        dims: 1,
        global: [16, 1, 1],
        local: Some([16, 1, 1]),
    };
    // SAFETY: as above.
    unsafe {
        q.launch(
            &local,
            range,
            &[KernelArg::Pointer(out), KernelArg::Local(256)],
            &[],
        )
    }
    .unwrap()
    .wait()
    .unwrap();
    let got: Vec<u32> = read_back(&q, &ctx, out, 8)
        .chunks(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [256, 1]);

    // Validation before the driver: argument count, nd-range.
    // SAFETY: refused before submission.
    let e = unsafe { q.launch(&local, range, &[KernelArg::Pointer(out)], &[]) }.err_();
    assert_eq!(e.code(), Errc::KernelArgument);
    let bad = LaunchRange {
        dims: 1,
        global: [10, 1, 1],
        local: Some([4, 1, 1]),
    };
    // SAFETY: refused before submission.
    let e = unsafe { q.launch(&probe, bad, &[KernelArg::Pointer(out)], &[]) }.err_();
    assert_eq!(e.code(), Errc::NdRange);

    // Build failures carry the log.
    let e = ctx
        .build_kernel_bundle(
            std::slice::from_ref(&env.device),
            &KernelSource::SpirV(&spirv(&["fail_build"])),
            "-O2",
        )
        .err_();
    assert_eq!(e.code(), Errc::Build);
    assert!(
        e.message()
            .contains("fail_build does not compile (flags: -O2)"),
        "{e}"
    );
    assert_eq!(
        e.native().unwrap().name.as_deref(),
        Some("ZE_RESULT_ERROR_MODULE_BUILD_FAILURE")
    );
    let e = ctx
        .build_kernel_bundle(
            std::slice::from_ref(&env.device),
            &KernelSource::SpirV(&[1, 2, 3, 4]),
            "",
        )
        .err_();
    assert_eq!(e.code(), Errc::Build);
    let e = ctx
        .build_kernel_bundle(
            std::slice::from_ref(&env.device),
            &KernelSource::OpenClC("kernel void k(){}"),
            "",
        )
        .err_();
    assert_eq!(e.code(), Errc::FeatureNotSupported);
    q.wait().unwrap();
    // SAFETY: nothing pending.
    unsafe { ctx.usm_free(out) }.unwrap();
}

#[test]
fn standalone_events_signal_and_wait() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let e = ctx.create_event(EventProperties::default()).unwrap();
    assert_eq!(e.status().unwrap(), EventStatus::Complete);
    assert!(!e.ipc_enabled());
    q.enqueue_signal_event(&e).unwrap();
    e.wait().unwrap();
    q.enqueue_wait_events(std::slice::from_ref(&e)).unwrap();
    q.wait().unwrap();
    let p = ctx
        .create_event(EventProperties {
            enable_ipc: false,
            enable_profiling: true,
        })
        .unwrap();
    q.enqueue_signal_event(&p).unwrap();
    assert!(p.profiling().is_ok());
    let err = ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: true,
        })
        .err_();
    assert_eq!(err.code(), Errc::Invalid);
    // An event of another context is refused by enqueue_signal_event.
    let other = context(env)
        .create_event(EventProperties::default())
        .unwrap();
    assert_eq!(q.enqueue_signal_event(&other).err_().code(), Errc::Invalid);
}

#[test]
fn ipc_memory_in_one_process() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let before = live_allocations(env);
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let dev = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 8192, 0)
        .unwrap();
    // SAFETY: live allocation, waited for.
    unsafe { q.fill(dev, &[0xab], 8192, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let export = ctx.ipc_get_mem(dev + 256).unwrap();
    assert_eq!(export.fds.len(), 1);
    let opened = ctx
        .ipc_open_mem(&env.device, import(&export.payload, &export.fds))
        .unwrap();
    assert_eq!(
        opened.size,
        8192 - 256,
        "the driver's size from the exported address"
    );
    let opened = opened.ptr;
    assert_ne!(opened, dev + 256, "an open maps the memory again");
    assert_eq!(ctx.usm_pointer_info(opened).kind, UsmKind::Device);
    // Writes through the opened pointer (at the exported offset) reach the original.
    // SAFETY: both live until the waits.
    unsafe { q.fill(opened, &[0x5a], 16, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read_back(&q, &ctx, dev + 256, 16), [0x5a; 16]);
    assert_eq!(read_back(&q, &ctx, dev + 240, 16), [0xab; 16]);
    // A second open gives another pointer; both are closed.
    let again = ctx
        .ipc_open_mem(&env.device, import(&export.payload, &export.fds))
        .unwrap()
        .ptr;
    assert_ne!(again, opened);
    // A payload claiming a larger allocation than the driver mapped is refused (and the
    // mapping it made closed again).
    let mut forged = export.payload.clone();
    let size_at = 4 + 64 + 8;
    forged[size_at..size_at + 8].copy_from_slice(&(1u64 << 30).to_le_bytes());
    assert_eq!(
        ctx.ipc_open_mem(&env.device, import(&forged, &export.fds))
            .err_()
            .code(),
        Errc::Invalid
    );
    // SAFETY: nothing pending on them.
    unsafe {
        ctx.ipc_close_mem(opened).unwrap();
        ctx.ipc_close_mem(again).unwrap();
        assert_eq!(ctx.ipc_close_mem(opened).err_().code(), Errc::Invalid);
    }
    ctx.ipc_put_mem(&export.payload).unwrap();
    // Garbage and wrong fds are refused.
    assert_eq!(
        ctx.ipc_open_mem(&env.device, import(&export.payload[1..], &export.fds))
            .err_()
            .code(),
        Errc::Invalid
    );
    assert_eq!(
        ctx.ipc_open_mem(&env.device, import(&export.payload, &[]))
            .err_()
            .code(),
        Errc::Invalid
    );
    // Host USM cannot be exported.
    let host = ctx.usm_alloc(UsmKind::Host, None, 64, 0).unwrap();
    assert_eq!(ctx.ipc_get_mem(host).err_().code(), Errc::Invalid);
    // SAFETY: nothing pending.
    unsafe {
        ctx.usm_free(host).unwrap();
        ctx.usm_free(dev).unwrap();
    }
    assert_eq!(live_allocations(env), before);
}

/// The importer half of `ipc_memory_across_processes`: runs only in the child process.
#[test]
fn ipc_memory_child_importer() {
    let Ok(spec) = std::env::var("L0_MOCK_CHILD") else {
        return;
    };
    let Some(env) = setup(&[]) else { return };
    let mut parts = spec.split(':');
    let pid: u32 = parts.next().unwrap().parse().unwrap();
    let start: u64 = parts.next().unwrap().parse().unwrap();
    let fd: i32 = parts.next().unwrap().parse().unwrap();
    let payload: Vec<u8> = parts
        .next()
        .unwrap()
        .as_bytes()
        .chunks(2)
        .map(|h| u8::from_str_radix(std::str::from_utf8(h).unwrap(), 16).unwrap())
        .collect();
    let exporter = ExporterId {
        pid,
        start_time: start,
        nonce: 0,
    };
    let local = acquire_remote_fd(&exporter, fd, BackendKind::LevelZero).unwrap();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let ptr = ctx
        .ipc_open_mem(
            &env.device,
            IpcImport {
                payload: &payload,
                fds: vec![local],
                exporter,
                same_process: false,
            },
        )
        .unwrap()
        .ptr;
    let seen = read_back(&q, &ctx, ptr, 8);
    // SAFETY: waited for.
    unsafe { q.fill(ptr, &[0x77], 8, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    // SAFETY: nothing pending.
    unsafe { ctx.ipc_close_mem(ptr) }.unwrap();
    println!("CHILD-SAW {seen:?}");
}

#[test]
fn ipc_memory_across_processes() {
    if std::env::var("L0_MOCK_CHILD").is_ok() {
        return;
    }
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let dev = ctx
        .usm_alloc(UsmKind::Device, Some(&env.device), 4096, 0)
        .unwrap();
    // SAFETY: waited for.
    unsafe { q.fill(dev, &[0x42], 4096, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let export = ctx.ipc_get_mem(dev + 64).unwrap();
    sycl_backend::ipc::allow_fd_access_from(sycl_backend::ipc::FdAccess::AnyProcess).unwrap();
    let me = ExporterId::current();
    let hex: String = export.payload.iter().map(|b| format!("{b:02x}")).collect();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "ipc_memory_child_importer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "L0_MOCK_CHILD",
            format!("{}:{}:{}:{hex}", me.pid, me.start_time, export.fds[0]),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success()
        && (stdout.contains("no permission to take descriptor")
            || stderr.contains("no permission to take descriptor"))
    {
        assert!(!required(), "pidfd_getfd denied here:\n{stdout}\n{stderr}");
        eprintln!("SKIPPED: pidfd_getfd is not permitted on this machine");
        // SAFETY: nothing pending.
        unsafe { ctx.usm_free(dev) }.unwrap();
        return;
    }
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("CHILD-SAW"),
        "child did not import:\n{stdout}"
    );
    assert!(
        stdout.contains("CHILD-SAW [66, 66, 66, 66, 66, 66, 66, 66]"),
        "{stdout}"
    );
    // The child's write through its mapping is visible here.
    assert_eq!(read_back(&q, &ctx, dev + 64, 8), [0x77; 8]);
    assert_eq!(read_back(&q, &ctx, dev + 72, 8), [0x42; 8]);
    // SAFETY: nothing pending.
    unsafe { ctx.usm_free(dev) }.unwrap();
}

#[test]
fn ipc_events_through_the_event_pool_route() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let e = ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    assert!(e.ipc_enabled());
    assert_eq!(e.status().unwrap(), EventStatus::Complete);
    let export = ctx.ipc_get_event(&e).unwrap();
    assert!(export.fds.is_empty());
    let opened = ctx.ipc_open_event(import(&export.payload, &[])).unwrap();
    assert!(!opened.ipc_enabled());
    assert_eq!(opened.status().unwrap(), EventStatus::Complete);
    // Re-signal after a host task (the mock executes at append time, so the pending state in
    // between cannot be observed here); both sides see the completion.
    q.host_task(
        Box::new(|| std::thread::sleep(Duration::from_millis(20))),
        &[],
    )
    .unwrap();
    q.enqueue_signal_event(&e).unwrap();
    opened.wait().unwrap();
    assert!(opened.wait_timeout(Duration::from_millis(1)).unwrap());
    assert_eq!(e.status().unwrap(), EventStatus::Complete);
    // The imported event can be signalled from this side too (a queue of the same context).
    q.enqueue_signal_event(&opened).unwrap();
    e.wait().unwrap();
    // Imported events cannot be exported again; ordinary events not at all.
    assert_eq!(ctx.ipc_get_event(&opened).err_().code(), Errc::Invalid);
    let plain = ctx.create_event(EventProperties::default()).unwrap();
    assert_eq!(ctx.ipc_get_event(&plain).err_().code(), Errc::Invalid);
    ctx.ipc_put_event(&export.payload).unwrap();
    assert_eq!(
        ctx.ipc_open_event(import(&export.payload[..10], &[]))
            .err_()
            .code(),
        Errc::Invalid
    );
    drop(opened);
    q.wait().unwrap();
}

#[test]
fn virtual_memory_and_physical_memory_import() {
    let Some(env) = setup(&[]) else { return };
    let _g = serial();
    let ctx = context(env);
    let q = ctx
        .create_queue(&env.device, QueueProperties::default())
        .unwrap();
    let min = ctx
        .mem_granularity(&env.device, GranularityMode::Minimum)
        .unwrap();
    assert_eq!(min, 65536);
    assert_eq!(
        ctx.mem_granularity(&env.device, GranularityMode::Recommended)
            .unwrap(),
        2 << 20
    );
    let va = ctx.reserve_virtual_mem(0, 2 * min).unwrap();
    let pm = ctx
        .create_physical_mem(&env.device, min, PhysicalMemProperties::default())
        .unwrap();
    assert!(!pm.ipc_enabled());
    ctx.map_physical(va, min, &pm, 0, AccessMode::ReadWrite)
        .unwrap();
    // SAFETY: mapped read-write, waited for.
    unsafe { q.fill(va, &[9, 8], min, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read_back(&q, &ctx, va, 4), [9, 8, 9, 8]);
    assert_eq!(ctx.get_access_mode(va, min).unwrap(), AccessMode::ReadWrite);
    ctx.set_access_mode(va, min, AccessMode::Read).unwrap();
    assert_eq!(ctx.get_access_mode(va, min).unwrap(), AccessMode::Read);
    // Export: an object without enable_ipc is refused; with it, the 1.8 loader lacks
    // zePhysicalMemGetProperties, so the export is unsupported.
    assert_eq!(ctx.ipc_get_physical_mem(&pm).err_().code(), Errc::Invalid);
    let exportable = ctx
        .create_physical_mem(&env.device, min, PhysicalMemProperties { enable_ipc: true })
        .unwrap();
    assert!(exportable.ipc_enabled());
    assert_eq!(
        ctx.ipc_get_physical_mem(&exportable).err_().code(),
        Errc::FeatureNotSupported
    );
    // Import: a descriptor (here a memfd standing in for a DMA-BUF) chained into
    // zePhysicalMemCreate, mapped into the second half of the reservation.
    let memfd = rustix::fs::memfd_create("l0-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    let mut file = std::fs::File::from(memfd);
    file.set_len(min as u64).unwrap();
    file.write_all(b"imported!").unwrap();
    let payload = PhysPayload {
        size: min as u64,
        device_uuid: [0; 16],
        fd: file.as_raw_fd(),
    }
    .encode();
    // A payload claiming more than the descriptor holds is refused before the driver sees it.
    let forged = PhysPayload {
        size: 2 * min as u64,
        device_uuid: [0; 16],
        fd: file.as_raw_fd(),
    }
    .encode();
    assert_eq!(
        ctx.ipc_open_physical_mem(&env.device, import(&forged, &[file.as_raw_fd()]))
            .err_()
            .code(),
        Errc::Invalid
    );
    let imported = ctx
        .ipc_open_physical_mem(&env.device, import(&payload, &[file.as_raw_fd()]))
        .unwrap();
    drop(file);
    assert_eq!(imported.size(), min);
    assert!(imported.ipc_enabled());
    assert_eq!(
        ctx.ipc_get_physical_mem(&imported).err_().code(),
        Errc::Invalid
    );
    ctx.map_physical(va + min as u64, min, &imported, 0, AccessMode::ReadWrite)
        .unwrap();
    assert_eq!(read_back(&q, &ctx, va + min as u64, 9), *b"imported!");
    // SAFETY: nothing pending on the ranges.
    unsafe {
        ctx.unmap(va, min).unwrap();
        ctx.unmap(va + min as u64, min).unwrap();
    }
    ctx.free_virtual_mem(va, 2 * min).unwrap();
    assert_eq!(
        ctx.ipc_put_physical_mem(&payload).err_().code(),
        Errc::Invalid
    );
}
