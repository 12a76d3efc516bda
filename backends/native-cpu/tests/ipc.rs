//! Virtual memory and IPC of the native CPU backend, within one process and across processes.

mod common;

use std::io::{BufRead, BufReader, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{dup, env, import_of, read, write};
use sycl_backend::ipc::{ExporterId, IpcImport};
use sycl_backend::{
    AccessMode, Errc, EventProperties, EventStatus, GranularityMode, PhysicalMemProperties, UsmKind,
};

#[test]
fn virtual_memory_reserve_map_access_unmap_free() {
    let e = env();
    let page = e
        .ctx
        .mem_granularity(&e.device, GranularityMode::Minimum)
        .unwrap();
    assert_eq!(page, sycl_backend_native_cpu::page_size());
    assert_eq!(
        e.ctx
            .mem_granularity(&e.device, GranularityMode::Recommended)
            .unwrap(),
        page
    );

    let size = 8 * page;
    let va = e.ctx.reserve_virtual_mem(0, size).unwrap();
    assert_eq!(va % page as u64, 0);
    assert_eq!(
        e.ctx.reserve_virtual_mem(0, page + 1).unwrap_err().code(),
        Errc::Invalid
    );

    // Physical memory: sizes must be multiples of the granularity.
    assert_eq!(
        e.ctx
            .create_physical_mem(&e.device, page + 1, PhysicalMemProperties::default())
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
    let pm = e
        .ctx
        .create_physical_mem(&e.device, 4 * page, PhysicalMemProperties::default())
        .unwrap();
    assert_eq!(pm.size(), 4 * page);
    assert!(!pm.ipc_enabled());

    // Map two views of the same physical memory: writes through one show in the other.
    e.ctx
        .map_physical(va, 4 * page, &pm, 0, AccessMode::ReadWrite)
        .unwrap();
    e.ctx
        .map_physical(
            va + 4 * page as u64,
            2 * page,
            &pm,
            2 * page,
            AccessMode::ReadWrite,
        )
        .unwrap();
    write(va + 2 * page as u64 + 5, b"hello");
    assert_eq!(read(va + 4 * page as u64 + 5, 5), b"hello");
    assert_eq!(
        e.ctx.get_access_mode(va, 4 * page).unwrap(),
        AccessMode::ReadWrite
    );

    // Error cases: overlap, outside the reservation, misaligned, past the physical memory.
    let err = |r: sycl_backend::Result<()>| r.unwrap_err().code();
    assert_eq!(
        err(e
            .ctx
            .map_physical(va + page as u64, page, &pm, 0, AccessMode::ReadWrite)),
        Errc::Invalid
    );
    assert_eq!(
        err(e.ctx.map_physical(
            va + 7 * page as u64,
            2 * page,
            &pm,
            0,
            AccessMode::ReadWrite
        )),
        Errc::Invalid
    );
    assert_eq!(
        err(e.ctx.map_physical(
            va + 6 * page as u64 + 1,
            page,
            &pm,
            0,
            AccessMode::ReadWrite
        )),
        Errc::Invalid
    );
    assert_eq!(
        err(e.ctx.map_physical(
            va + 6 * page as u64,
            page,
            &pm,
            4 * page,
            AccessMode::ReadWrite
        )),
        Errc::Invalid
    );
    let on_heap = vec![0u8; 3 * page];
    let heap = (on_heap.as_ptr() as u64).next_multiple_of(page as u64);
    assert_eq!(
        err(e
            .ctx
            .map_physical(heap, page, &pm, 0, AccessMode::ReadWrite)),
        Errc::Invalid
    );
    assert_eq!(
        err(e.ctx.free_virtual_mem(va, size)),
        Errc::Invalid,
        "freed while mapped"
    );

    // Access modes, including part of a mapping (which splits it).
    e.ctx
        .set_access_mode(va + page as u64, page, AccessMode::Read)
        .unwrap();
    assert_eq!(
        e.ctx.get_access_mode(va + page as u64, page).unwrap(),
        AccessMode::Read
    );
    assert_eq!(
        e.ctx.get_access_mode(va, page).unwrap(),
        AccessMode::ReadWrite
    );
    assert_eq!(
        e.ctx.get_access_mode(va, 2 * page).unwrap_err().code(),
        Errc::Invalid
    );
    assert_eq!(read(va + page as u64, 4), vec![0; 4]);
    e.ctx
        .set_access_mode(va + page as u64, page, AccessMode::ReadWrite)
        .unwrap();
    write(va + page as u64, b"ok");
    assert_eq!(
        err(e
            .ctx
            .set_access_mode(va + 6 * page as u64, page, AccessMode::Read)),
        Errc::Invalid,
        "unmapped"
    );
    assert_eq!(
        e.ctx
            .get_access_mode(va + 6 * page as u64, page)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );

    // Unmap: whole mappings only; the reservation stays and can be mapped again.
    // SAFETY: nothing uses the range.
    unsafe {
        assert_eq!(
            e.ctx.unmap(va + page as u64, page).unwrap_err().code(),
            Errc::Invalid
        );
        assert_eq!(
            e.ctx.unmap(va + 6 * page as u64, page).unwrap_err().code(),
            Errc::Invalid
        );
        e.ctx.unmap(va + 4 * page as u64, 2 * page).unwrap();
        e.ctx.unmap(va, 4 * page).unwrap();
    }
    e.ctx
        .map_physical(va + 2 * page as u64, page, &pm, 2 * page, AccessMode::Read)
        .unwrap();
    assert_eq!(
        read(va + 2 * page as u64 + 5, 5),
        b"hello",
        "physical memory kept its contents"
    );
    assert_eq!(
        e.ctx.get_access_mode(va + 2 * page as u64, page).unwrap(),
        AccessMode::Read
    );
    // SAFETY: nothing uses the range.
    unsafe { e.ctx.unmap(va + 2 * page as u64, page).unwrap() };
    assert_eq!(
        err(e.ctx.free_virtual_mem(va, page)),
        Errc::Invalid,
        "wrong size"
    );
    e.ctx.free_virtual_mem(va, size).unwrap();
    assert_eq!(
        err(e.ctx.free_virtual_mem(va, size)),
        Errc::Invalid,
        "double free"
    );

    // A start hint that is free is honoured.
    let hint = e.ctx.reserve_virtual_mem(0, 4 * page).unwrap();
    e.ctx.free_virtual_mem(hint, 4 * page).unwrap();
    let again = e.ctx.reserve_virtual_mem(hint, 4 * page).unwrap();
    assert_eq!(again, hint);
    e.ctx.free_virtual_mem(again, 4 * page).unwrap();
}

#[test]
fn ipc_memory_round_trip_in_one_process() {
    let e = env();
    let size = 10_000;
    let p = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), size, 0)
        .unwrap();
    write(p, &[0x11; 10_000]);
    let export = e.ctx.ipc_get_mem(p + 100).unwrap();
    assert_eq!(export.fds.len(), 1);

    // Two opens: one mapping of the memory, shared (a reopen maps nothing), already offset,
    // as long as the allocation from the exported address on.
    let a = e.ctx.ipc_open_mem(&e.device, import_of(&export)).unwrap();
    let b = e.ctx.ipc_open_mem(&e.device, import_of(&export)).unwrap();
    assert_eq!((a.size, b.size), (size - 100, size - 100));
    let (a, b) = (a.ptr, b.ptr);
    assert_eq!(a, b);
    assert_ne!(a, p + 100);
    // An export of another address of the allocation shares the mapping too.
    let other = e.ctx.ipc_get_mem(p + 300).unwrap();
    let c = e.ctx.ipc_open_mem(&e.device, import_of(&other)).unwrap();
    assert_eq!((c.ptr, c.size), (a + 200, size - 300));
    assert_eq!(read(a, 4), vec![0x11; 4]);
    write(p + 100, b"from exporter");
    assert_eq!(read(a, 13), b"from exporter");
    write(b + 20, b"from importer");
    assert_eq!(read(p + 120, 13), b"from importer");
    let info = e.ctx.usm_pointer_info(a + 5);
    assert_eq!(info.kind, UsmKind::Device);
    assert_eq!(info.base, a - 100);
    assert_eq!(info.size, size);
    assert_eq!(info.device_index, Some(0));

    // A queue copies between opened and ordinary memory.
    let q = e.queue(true, false);
    // SAFETY: both ranges are live.
    unsafe { q.memcpy(p + 1000, a, 13, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read(p + 1000, 13), b"from exporter");

    // Opened memory is not USM of ours to free, and survives the exporter's free.
    // SAFETY: refused by the bookkeeping.
    assert_eq!(
        // SAFETY: not an allocation: refused by the bookkeeping, nothing is freed.
        unsafe { e.ctx.usm_free(a - 100) }.unwrap_err().code(),
        Errc::Invalid
    );
    // The export is the allocation's own descriptor: put releases nothing here (revoking a
    // handle's bytes is the `sycl` layer's export ticket), and only checks the payload.
    e.ctx.ipc_put_mem(&export.payload).unwrap();
    // SAFETY: no command uses `p`.
    unsafe { e.ctx.usm_free(p).unwrap() };
    assert_eq!(read(b, 13), b"from exporter");
    write(a, b"still alive");
    assert_eq!(read(b, 11), b"still alive");

    // Close each open once; the mapping stays until the last. Interior addresses, closes
    // beyond the opens, and addresses never returned are refused.
    // SAFETY: no command uses the mappings; bad closes are refused by the bookkeeping.
    unsafe {
        assert_eq!(
            e.ctx.ipc_close_mem(a + 1).unwrap_err().code(),
            Errc::Invalid
        );
        e.ctx.ipc_close_mem(c.ptr).unwrap();
        assert_eq!(
            e.ctx.ipc_close_mem(c.ptr).unwrap_err().code(),
            Errc::Invalid
        );
        e.ctx.ipc_close_mem(a).unwrap();
        assert_eq!(
            read(b, 11),
            b"still alive",
            "the other open keeps the mapping"
        );
        e.ctx.ipc_close_mem(b).unwrap();
        assert_eq!(e.ctx.ipc_close_mem(a).unwrap_err().code(), Errc::Invalid);
        assert_eq!(e.ctx.ipc_close_mem(p).unwrap_err().code(), Errc::Invalid);
    }
    assert_eq!(e.ctx.usm_pointer_info(a).kind, UsmKind::Unknown);
}

#[test]
fn ipc_memory_reopen_after_the_last_close_maps_again() {
    let e = env();
    let p = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 8192, 0)
        .unwrap();
    let export = e.ctx.ipc_get_mem(p).unwrap();
    for round in 0..3u8 {
        let a = e.ctx.ipc_open_mem(&e.device, import_of(&export)).unwrap();
        write(a.ptr, &[round; 8]);
        assert_eq!(read(p, 8), vec![round; 8]);
        assert_eq!(e.ctx.usm_pointer_info(a.ptr).kind, UsmKind::Device);
        // SAFETY: no command uses the mapping.
        unsafe { e.ctx.ipc_close_mem(a.ptr).unwrap() };
        assert_eq!(e.ctx.usm_pointer_info(a.ptr).kind, UsmKind::Unknown);
    }
    // SAFETY: no command uses `p`.
    unsafe { e.ctx.usm_free(p).unwrap() };
}

#[test]
fn ipc_memory_refusals() {
    let e = env();
    for kind in [UsmKind::Host, UsmKind::Shared] {
        let dev = (kind != UsmKind::Host).then_some(&e.device);
        let p = e.ctx.usm_alloc(kind, dev, 4096, 0).unwrap();
        let err = e.ctx.ipc_get_mem(p).unwrap_err();
        assert_eq!(err.code(), Errc::Invalid);
        assert!(
            err.message()
                .contains("ipc::memory exports USM device memory"),
            "{err}"
        );
        // SAFETY: live allocation.
        unsafe { e.ctx.usm_free(p).unwrap() };
    }
    let stack = 0u64;
    assert_eq!(
        e.ctx
            .ipc_get_mem(&stack as *const u64 as u64)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
    assert_eq!(
        e.ctx.ipc_put_mem(b"garbage").unwrap_err().code(),
        Errc::Invalid
    );

    // A descriptor of another allocation (stale or reused fd) is refused.
    let p = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 4096, 0)
        .unwrap();
    let other = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 4096, 0)
        .unwrap();
    let export = e.ctx.ipc_get_mem(p).unwrap();
    let other_export = e.ctx.ipc_get_mem(other).unwrap();
    let stale = IpcImport {
        payload: &export.payload,
        fds: vec![dup(other_export.fds[0])],
        exporter: ExporterId::current(),
        same_process: true,
    };
    let err = e.ctx.ipc_open_mem(&e.device, stale).unwrap_err();
    assert_eq!(err.code(), Errc::Invalid);
    assert!(err.message().contains("stale or reused"), "{err}");
    // Bad payloads never panic.
    for n in 0..export.payload.len() {
        let bad = IpcImport {
            payload: &export.payload[..n],
            fds: vec![dup(export.fds[0])],
            exporter: ExporterId::current(),
            same_process: true,
        };
        assert_eq!(
            e.ctx.ipc_open_mem(&e.device, bad).unwrap_err().code(),
            Errc::Invalid
        );
    }
    let no_fd = IpcImport {
        payload: &export.payload,
        fds: vec![],
        exporter: ExporterId::current(),
        same_process: true,
    };
    assert_eq!(
        e.ctx.ipc_open_mem(&e.device, no_fd).unwrap_err().code(),
        Errc::Invalid
    );
    e.ctx.ipc_put_mem(&export.payload).unwrap();
    e.ctx.ipc_put_mem(&other_export.payload).unwrap();
    // SAFETY: live allocations.
    unsafe {
        e.ctx.usm_free(p).unwrap();
        e.ctx.usm_free(other).unwrap();
    }
}

/// Opens `fd` as exported memory of `size` bytes, with a payload written by hand as a hostile
/// exporter would (tag, inode, device, size, offset, descriptor number).
fn open_hostile(e: &common::Env, fd: OwnedFd, size: u64) -> sycl_backend::Result<u64> {
    let st = rustix::fs::fstat(&fd).unwrap();
    let mut p = b"NCM1".to_vec();
    p.extend_from_slice(&(st.st_ino as u64).to_le_bytes());
    p.extend_from_slice(&(st.st_dev as u64).to_le_bytes());
    p.extend_from_slice(&size.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&(fd.as_raw_fd() as u32).to_le_bytes());
    let import = IpcImport {
        payload: &p,
        fds: vec![fd],
        exporter: ExporterId::current(),
        same_process: true,
    };
    e.ctx.ipc_open_mem(&e.device, import).map(|m| m.ptr)
}

#[test]
fn ipc_refuses_unsealed_memfds() {
    // A hostile exporter could send a memfd it can still shrink: every mapping of it would
    // then fault (SIGBUS) on access. Imports take only memfds sealed against resizing.
    let e = env();
    let page = 4096u64;
    use rustix::fs::SealFlags;
    let ours = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
    let seals = [
        None,
        Some(SealFlags::SHRINK),
        Some(SealFlags::SHRINK | SealFlags::GROW),
        // Sealed against writes: could never be mapped writable (found by the fuzzer, which
        // then saw mmap fail as Errc::Runtime).
        Some(ours | SealFlags::WRITE),
        Some(ours | SealFlags::FUTURE_WRITE),
    ];
    for seal in seals {
        let fd = rustix::fs::memfd_create(
            "hostile",
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .unwrap();
        rustix::fs::ftruncate(&fd, page).unwrap();
        if let Some(seal) = seal {
            rustix::fs::fcntl_add_seals(&fd, seal).unwrap();
        }
        let err = open_hostile(&e, fd, page).unwrap_err();
        assert_eq!(err.code(), Errc::Invalid, "{seal:?}: {err}");
        assert!(err.message().contains("sealed"), "{seal:?}: {err}");
    }
    // A regular file is no memfd at all.
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    assert_eq!(
        open_hostile(&e, OwnedFd::from(file), page)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
    // Our own exports are sealed, and stay so for whoever receives them.
    let p = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 4096, 0)
        .unwrap();
    let export = e.ctx.ipc_get_mem(p).unwrap();
    let theirs = dup(export.fds[0]);
    assert!(rustix::fs::ftruncate(&theirs, 0).is_err());
    assert!(rustix::fs::ftruncate(&theirs, 1 << 20).is_err());
    assert!(rustix::fs::fcntl_add_seals(&theirs, rustix::fs::SealFlags::FUTURE_WRITE).is_err());
    drop(theirs);
    // SAFETY: live allocation, no command uses it.
    unsafe { e.ctx.usm_free(p).unwrap() };
}

#[test]
fn ipc_physical_memory_round_trip() {
    let e = env();
    let page = sycl_backend_native_cpu::page_size();
    let plain = e
        .ctx
        .create_physical_mem(&e.device, page, PhysicalMemProperties::default())
        .unwrap();
    assert_eq!(
        e.ctx.ipc_get_physical_mem(&plain).unwrap_err().code(),
        Errc::Invalid
    );

    let pm = e
        .ctx
        .create_physical_mem(
            &e.device,
            2 * page,
            PhysicalMemProperties { enable_ipc: true },
        )
        .unwrap();
    assert!(pm.ipc_enabled());
    let export = e.ctx.ipc_get_physical_mem(&pm).unwrap();
    let opened = e
        .ctx
        .ipc_open_physical_mem(&e.device, import_of(&export))
        .unwrap();
    assert!(opened.ipc_enabled());
    assert_eq!(opened.size(), 2 * page);

    let va = e.ctx.reserve_virtual_mem(0, 2 * page).unwrap();
    let vb = e.ctx.reserve_virtual_mem(0, 2 * page).unwrap();
    e.ctx
        .map_physical(va, 2 * page, &pm, 0, AccessMode::ReadWrite)
        .unwrap();
    e.ctx
        .map_physical(vb, 2 * page, &opened, 0, AccessMode::ReadWrite)
        .unwrap();
    write(va + page as u64, b"physical");
    assert_eq!(read(vb + page as u64, 8), b"physical");
    // Put checks the payload only (revocation is the `sycl` layer's ticket).
    e.ctx.ipc_put_physical_mem(&export.payload).unwrap();
    assert_eq!(
        e.ctx.ipc_put_physical_mem(b"garbage").unwrap_err().code(),
        Errc::Invalid
    );
    // SAFETY: nothing uses the ranges.
    unsafe {
        e.ctx.unmap(va, 2 * page).unwrap();
        e.ctx.unmap(vb, 2 * page).unwrap();
    }
    e.ctx.free_virtual_mem(va, 2 * page).unwrap();
    e.ctx.free_virtual_mem(vb, 2 * page).unwrap();

    // Stale descriptor.
    let other = e
        .ctx
        .create_physical_mem(
            &e.device,
            2 * page,
            PhysicalMemProperties { enable_ipc: true },
        )
        .unwrap();
    let other_export = e.ctx.ipc_get_physical_mem(&other).unwrap();
    let stale = IpcImport {
        payload: &export.payload,
        fds: vec![dup(other_export.fds[0])],
        exporter: ExporterId::current(),
        same_process: true,
    };
    assert_eq!(
        e.ctx
            .ipc_open_physical_mem(&e.device, stale)
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
}

#[test]
fn ipc_events_in_one_process() {
    let e = env();
    let both = EventProperties {
        enable_ipc: true,
        enable_profiling: true,
    };
    assert_eq!(
        e.ctx.create_event(both).err().unwrap().code(),
        Errc::Invalid
    );
    let plain = e.ctx.create_event(EventProperties::default()).unwrap();
    assert_eq!(
        e.ctx.ipc_get_event(&plain).unwrap_err().code(),
        Errc::Invalid
    );

    let ev = e
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    assert!(ev.ipc_enabled());
    assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    let export = e.ctx.ipc_get_event(&ev).unwrap();
    let opened = e.ctx.ipc_open_event(import_of(&export)).unwrap();
    let opened2 = e.ctx.ipc_open_event(import_of(&export)).unwrap();
    assert!(!Arc::ptr_eq(&opened, &opened2));
    assert_eq!(
        e.ctx.ipc_get_event(&opened).unwrap_err().code(),
        Errc::Invalid,
        "re-export of an import"
    );
    assert_eq!(opened.status().unwrap(), EventStatus::Complete);

    // The exporter's queue signals; the importer waits (and the other way round).
    let q = e.queue(true, false);
    for (signal, waiter) in [(&ev, &opened), (&opened, &ev), (&opened2, &opened)] {
        let (tx, rx) = mpsc::channel::<()>();
        q.host_task(Box::new(move || rx.recv().unwrap()), &[])
            .unwrap();
        q.enqueue_signal_event(signal).unwrap();
        assert_ne!(waiter.status().unwrap(), EventStatus::Complete);
        assert!(!waiter.wait_timeout(Duration::from_millis(20)).unwrap());
        let w = waiter.clone();
        let t = std::thread::spawn(move || w.wait());
        std::thread::sleep(Duration::from_millis(10));
        tx.send(()).unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(signal.status().unwrap(), EventStatus::Complete);
    }
    // A queue waits on an opened event.
    let q2 = e.queue(true, false);
    let (tx, rx) = mpsc::channel::<()>();
    q.host_task(Box::new(move || rx.recv().unwrap()), &[])
        .unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    q2.enqueue_wait_events(std::slice::from_ref(&opened))
        .unwrap();
    let after = q2.barrier(&[]).unwrap();
    assert!(!after.wait_timeout(Duration::from_millis(20)).unwrap());
    tx.send(()).unwrap();
    after.wait().unwrap();

    // Stale descriptor and bad payload.
    let other = e
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    let other_export = e.ctx.ipc_get_event(&other).unwrap();
    let stale = IpcImport {
        payload: &export.payload,
        fds: vec![dup(other_export.fds[0])],
        exporter: ExporterId::current(),
        same_process: true,
    };
    assert_eq!(
        e.ctx.ipc_open_event(stale).err().unwrap().code(),
        Errc::Invalid
    );
    e.ctx.ipc_put_event(&export.payload).unwrap();
    e.ctx.ipc_put_event(&other_export.payload).unwrap();
    assert_eq!(
        e.ctx.ipc_put_event(b"garbage").unwrap_err().code(),
        Errc::Invalid
    );
}

// ---- across processes: the test binary re-runs itself as the child ----

const CHILD_ENV: &str = "SYCL_NATIVE_CPU_IPC_CHILD";

fn spawn_child(role: &str, vars: &[(&str, String)]) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn me_vars() -> Vec<(&'static str, String)> {
    let me = ExporterId::current();
    vec![
        ("EXP_PID", me.pid.to_string()),
        ("EXP_START", me.start_time.to_string()),
        ("EXP_NONCE", me.nonce.to_string()),
    ]
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap()
}

/// An inheritable copy of `fd` (no close-on-exec), for a child to use by number.
fn inheritable(fd: i32) -> OwnedFd {
    // SAFETY: the exporter keeps `fd` open.
    rustix::io::dup(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).unwrap()
}

fn child_import(payload: &str, fd: &str) -> (Vec<u8>, OwnedFd, ExporterId) {
    let exporter = ExporterId {
        pid: var("EXP_PID").parse().unwrap(),
        start_time: var("EXP_START").parse().unwrap(),
        nonce: var("EXP_NONCE").parse().unwrap(),
    };
    let raw: i32 = fd.parse().unwrap();
    // SAFETY: the parent made this descriptor inheritable for us; nothing else owns it here.
    (
        hex::decode(payload).unwrap(),
        // SAFETY: the parent made this descriptor inheritable for us; nothing else owns it here.
        unsafe { OwnedFd::from_raw_fd(raw) },
        exporter,
    )
}

fn wait_for_bytes(ptr: u64, want: &[u8]) {
    let t0 = Instant::now();
    while read(ptr, want.len()) != want {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "peer never wrote {want:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The child side of the cross-process tests (does nothing in a normal test run).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let e = env();
    match role.as_str() {
        "importer" | "dying-signaller" => {
            let (payload, fd, exporter) = child_import(&var("MEM_PAYLOAD"), &var("MEM_FD"));
            let import = IpcImport {
                payload: &payload,
                fds: vec![fd],
                exporter,
                same_process: false,
            };
            let mem = e.ctx.ipc_open_mem(&e.device, import).unwrap().ptr;
            let (payload, fd, exporter) = child_import(&var("EV_PAYLOAD"), &var("EV_FD"));
            let import = IpcImport {
                payload: &payload,
                fds: vec![fd],
                exporter,
                same_process: false,
            };
            let ev = e.ctx.ipc_open_event(import).unwrap();
            assert_eq!(read(mem, 6), b"parent");
            let q = e.queue(true, false);
            if role == "dying-signaller" {
                // Arm a signal that never comes, then die.
                q.host_task(
                    Box::new(|| std::thread::sleep(Duration::from_secs(3600))),
                    &[],
                )
                .unwrap();
                q.enqueue_signal_event(&ev).unwrap();
                write(mem, b"ARMD");
                std::thread::sleep(Duration::from_millis(50));
                std::process::exit(3);
            }
            write(mem, b"CHLD");
            // The parent signals once it saw "CHLD".
            assert!(
                ev.wait_timeout(Duration::from_secs(20)).unwrap(),
                "no signal from the parent"
            );
            // Now signal the parent, late enough that it sleeps in the kernel first.
            q.host_task(
                Box::new(|| std::thread::sleep(Duration::from_millis(150))),
                &[],
            )
            .unwrap();
            q.enqueue_signal_event(&ev).unwrap();
            write(mem, b"ARMD");
            q.wait().unwrap();
            assert!(ev.wait_timeout(Duration::from_secs(5)).unwrap());
            // SAFETY: no command uses the mapping.
            unsafe { e.ctx.ipc_close_mem(mem).unwrap() };
        }
        "exporter" => {
            // Export an armed event, hand it to the parent, then get killed.
            let ev = e
                .ctx
                .create_event(EventProperties {
                    enable_ipc: true,
                    enable_profiling: false,
                })
                .unwrap();
            let q = e.queue(true, false);
            q.host_task(
                Box::new(|| std::thread::sleep(Duration::from_secs(3600))),
                &[],
            )
            .unwrap();
            q.enqueue_signal_event(&ev).unwrap();
            let export = e.ctx.ipc_get_event(&ev).unwrap();
            let me = ExporterId::current();
            println!(
                "PAYLOAD {} {} {} {} {}",
                hex::encode(&export.payload),
                export.fds[0],
                me.pid,
                me.start_time,
                me.nonce
            );
            std::io::stdout().flush().unwrap();
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            std::process::exit(0);
        }
        other => panic!("unknown child role {other}"),
    }
}

/// What the parent hands a child: the exported allocation, the event, the child's environment
/// and the inheritable descriptors (closed once the child started).
type ChildSetup = (
    u64,
    Arc<dyn sycl_backend::Event>,
    Vec<(&'static str, String)>,
    Vec<OwnedFd>,
);

fn export_to_child(e: &common::Env) -> ChildSetup {
    let mem = e
        .ctx
        .usm_alloc(UsmKind::Device, Some(&e.device), 1 << 16, 0)
        .unwrap();
    write(mem, b"parent");
    let ev = e
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    let mem_export = e.ctx.ipc_get_mem(mem).unwrap();
    let ev_export = e.ctx.ipc_get_event(&ev).unwrap();
    let mem_fd = inheritable(mem_export.fds[0]);
    let ev_fd = inheritable(ev_export.fds[0]);
    let mut vars = me_vars();
    vars.push(("MEM_PAYLOAD", hex::encode(&mem_export.payload)));
    vars.push(("MEM_FD", mem_fd.as_raw_fd().to_string()));
    vars.push(("EV_PAYLOAD", hex::encode(&ev_export.payload)));
    vars.push(("EV_FD", ev_fd.as_raw_fd().to_string()));
    (mem, ev, vars, vec![mem_fd, ev_fd])
}

#[test]
fn cross_process_memory_and_event_signals() {
    let e = env();
    let (mem, ev, vars, fds) = export_to_child(&e);
    let q = e.queue(true, false);
    let (tx, rx) = mpsc::channel::<()>();
    q.host_task(Box::new(move || rx.recv().unwrap()), &[])
        .unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    let mut child = spawn_child("importer", &vars);
    drop(fds);
    wait_for_bytes(mem, b"CHLD");
    tx.send(()).unwrap(); // our queue signals the event; the child wakes
    wait_for_bytes(mem, b"ARMD");
    // The child armed the event: we wait for its signal, woken across processes.
    assert!(
        ev.wait_timeout(Duration::from_secs(20)).unwrap(),
        "the child's signal never arrived"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "child failed: {status:?}");
}

#[test]
fn cross_process_dead_signaller_is_an_event_error() {
    let e = env();
    let (mem, ev, vars, fds) = export_to_child(&e);
    let mut child = spawn_child("dying-signaller", &vars);
    drop(fds);
    wait_for_bytes(mem, b"ARMD");
    let t0 = Instant::now();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Event, "{err}");
    assert!(
        err.message().contains("exited while the event was pending"),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn cross_process_dead_exporter_is_an_event_error() {
    let e = env();
    let mut child = spawn_child("exporter", &[]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("PAYLOAD ") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "child ended without a payload"
        );
    }
    let at = line.find("PAYLOAD ").unwrap_or(0);
    let parts: Vec<&str> = line[at..].split_whitespace().collect();
    let payload = hex::decode(parts[1]).unwrap();
    let fd: i32 = parts[2].parse().unwrap();
    let exporter = ExporterId {
        pid: parts[3].parse().unwrap(),
        start_time: parts[4].parse().unwrap(),
        nonce: parts[5].parse().unwrap(),
    };
    let owned = match sycl_backend::ipc::acquire_remote_fd(
        &exporter,
        fd,
        sycl_backend::BackendKind::NativeCpu,
    ) {
        Ok(fd) => fd,
        Err(err) if err.code() == Errc::Runtime => {
            eprintln!("skipping: pidfd_getfd is not permitted here: {err}");
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        }
        Err(err) => panic!("{err}"),
    };
    let ev = e
        .ctx
        .ipc_open_event(IpcImport {
            payload: &payload,
            fds: vec![owned],
            exporter,
            same_process: false,
        })
        .unwrap();
    assert_ne!(ev.status().unwrap(), EventStatus::Complete);
    assert!(
        !ev.wait_timeout(Duration::from_millis(120)).unwrap(),
        "time-out while the exporter lives"
    );
    child.stdin.take().unwrap().write_all(b"exit\n").unwrap();
    child.wait().unwrap();
    let err = ev.wait().unwrap_err();
    assert_eq!(err.code(), Errc::Event, "{err}");
    assert!(
        err.message()
            .contains(&format!("the exporting process {} exited", exporter.pid)),
        "{err}"
    );
}
