//! Native CPU benchmarks, each beside the raw operation in the same run.
//!
//! `cargo bench -p sycl-rs --bench native_cpu` (add `-- --quick` for a short run).
//! Prints one line per measurement: ours, raw, and ours/raw.
#![allow(unsafe_code)]

mod common;
use common::{median, row, time_it};
use std::hint::black_box;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sycl::ipc::{
    self,
    transport::{Channel, Listener},
    Handle,
};
use sycl::{DeviceSelector, Event, EventProperties, Queue, Range};

const ROLE: &str = "SYCL_RS_BENCH_ROLE";

fn bandwidth(q: &Queue, reps: usize) {
    const BYTES: usize = 256 << 20;
    let a = sycl::malloc_device::<u8>(BYTES, q).unwrap();
    let b = sycl::malloc_device::<u8>(BYTES, q).unwrap();
    q.memset(&a, 1, &[]).unwrap();
    q.memset(&b, 2, &[]).unwrap();
    q.wait().unwrap();
    let mut src = vec![1u8; BYTES];
    let mut dst = vec![2u8; BYTES];
    src[7] = 9;
    dst[9] = 7;
    for _ in 0..2 {
        q.copy(&a, &b, &[]).unwrap().wait().unwrap();
        dst.copy_from_slice(black_box(&src));
    }
    let ours = median(time_it(reps, || {
        q.copy(&a, &b, &[]).unwrap().wait().unwrap()
    }));
    let raw = median(time_it(reps, || {
        // SAFETY: both vectors hold BYTES bytes and do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(black_box(src.as_ptr()), dst.as_mut_ptr(), BYTES) };
        black_box(&dst);
    }));
    // The same copy made by hand between the very same (memfd-backed) buffers: separates the
    // runtime's cost from the cost of the memory itself.
    let same = median(time_it(reps, || {
        // Raw addresses, no borrow: the copy writes `b`.
        let (src, dst) = (
            a.as_ptr() as usize as *const u8,
            b.as_ptr() as usize as *mut u8,
        );
        // SAFETY: both are live, host-accessible, non-overlapping BYTES-byte allocations that no
        // command, view or borrow uses while this runs (the queue is idle).
        unsafe { std::ptr::copy_nonoverlapping(black_box(src), dst, BYTES) };
    }));
    let gbs = |t: f64| BYTES as f64 / t / 1e9;
    row(
        "memcpy 256 MiB (vs memcpy, same buffers)",
        "GB/s",
        gbs(ours),
        gbs(same),
    );
    row(
        "memcpy 256 MiB (device->device vs memcpy)",
        "GB/s",
        gbs(ours),
        gbs(raw),
    );
    let ours = median(time_it(reps, || {
        q.memset(&a, 0x5a, &[]).unwrap().wait().unwrap()
    }));
    let raw = median(time_it(reps, || {
        // SAFETY: dst holds BYTES bytes.
        unsafe { std::ptr::write_bytes(black_box(dst.as_mut_ptr()), 0x5a, BYTES) };
        black_box(&dst);
    }));
    row("memset 256 MiB (vs memset)", "GB/s", gbs(ours), gbs(raw));
    let ours = median(time_it(reps, || {
        q.fill(&a.full().cast::<u32>().unwrap(), 0x1234_5678u32, &[])
            .unwrap()
            .wait()
            .unwrap()
    }));
    let raw = median(time_it(reps, || {
        let words: &mut [u32] = bytemuck::cast_slice_mut(&mut dst[..]);
        words.fill(black_box(0x1234_5678));
        black_box(&dst);
    }));
    row(
        "fill u32 256 MiB (vs slice::fill)",
        "GB/s",
        gbs(ours),
        gbs(raw),
    );
}

fn kernel_latency(q: &Queue, reps: usize) {
    for _ in 0..100 {
        q.parallel_for(Range::d1(1), &[], |_: sycl::Item| {})
            .unwrap()
            .wait()
            .unwrap();
    }
    let ours = median(time_it(reps, || {
        q.parallel_for(Range::d1(1), &[], |_: sycl::Item| {})
            .unwrap()
            .wait()
            .unwrap()
    })) * 1e6;
    // Raw: hand a closure to a waiting thread and wait for its completion (the least a queue
    // with a worker thread must do).
    let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
    let worker = std::thread::spawn(move || {
        while let Ok(f) = rx.recv() {
            f();
        }
    });
    let raw = median(time_it(reps, || {
        let (dtx, drx) = std::sync::mpsc::sync_channel(1);
        tx.send(Box::new(move || dtx.send(()).unwrap())).unwrap();
        drx.recv().unwrap();
    })) * 1e6;
    drop(tx);
    worker.join().unwrap();
    row(
        "empty parallel_for submit+wait (vs thread hop)",
        "us",
        ours,
        raw,
    );
    let t = Instant::now();
    for _ in 0..10_000 {
        q.parallel_for(Range::d1(1), &[], |_: sycl::Item| {})
            .unwrap();
    }
    q.wait().unwrap();
    println!(
        "{:<44} {:>10.2} us per submit",
        "10,000 empty parallel_for then one wait",
        t.elapsed().as_secs_f64() * 1e6 / 10_000.0
    );
}

// ---------------------------------------------------------------- IPC latency

fn raw_memfd(size: usize) -> OwnedFd {
    let fd = rustix::fs::memfd_create("bench", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, size as u64).unwrap();
    fd
}

fn ipc_child(args: &[String]) {
    // args: exporter pid, sycl handle hex, raw fd number, size, reps
    let pid: i32 = args[0].parse().unwrap();
    let handle = Handle::from_bytes(hex::decode(&args[1]).unwrap()).unwrap();
    let raw_fd: i32 = args[2].parse().unwrap();
    let size: usize = args[3].parse().unwrap();
    let reps: usize = args[4].parse().unwrap();
    let dev = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    let ctx = sycl::Context::default_for(&dev).unwrap();
    // Cold: the first open in this process. Whichever side goes first pays the process's
    // first-touch costs, so the parent alternates and keeps only the first side's figure.
    let ours_first = args[5] == "ours_first";
    let mut cold = 0.0;
    let mut raw_cold = 0.0;
    for side in if ours_first {
        [true, false]
    } else {
        [false, true]
    } {
        if side {
            let t = Instant::now();
            let first = ipc::memory::open::<u8>(&handle, &ctx, &dev).unwrap();
            cold = t.elapsed().as_secs_f64() * 1e6;
            ipc::memory::close(first).unwrap();
        } else {
            let t = Instant::now();
            let raw_first = raw_open(pid, raw_fd, size);
            raw_cold = t.elapsed().as_secs_f64() * 1e6;
            raw_close(raw_first, size);
        }
    }
    // Repeated opens and closes.
    let mut open_t = Vec::new();
    let mut close_t = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let m = ipc::memory::open::<u8>(&handle, &ctx, &dev).unwrap();
        open_t.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        ipc::memory::close(m).unwrap();
        close_t.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // Reopens while one open is kept (the mapping is shared, the checks are not skipped).
    let keep = ipc::memory::open::<u8>(&handle, &ctx, &dev).unwrap();
    let mut reopen_t = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let m = ipc::memory::open::<u8>(&handle, &ctx, &dev).unwrap();
        reopen_t.push(t.elapsed().as_secs_f64() * 1e6);
        ipc::memory::close(m).unwrap();
    }
    ipc::memory::close(keep).unwrap();
    let mut raw_open_t = Vec::new();
    let mut raw_close_t = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let m = raw_open(pid, raw_fd, size);
        raw_open_t.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        raw_close(m, size);
        raw_close_t.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "{cold} {raw_cold} {} {} {} {} {}",
        median(open_t),
        median(raw_open_t),
        median(close_t),
        median(raw_close_t),
        median(reopen_t)
    );
}

fn raw_open(pid: i32, fd: i32, size: usize) -> (OwnedFd, *mut std::ffi::c_void) {
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .unwrap();
    let local =
        rustix::process::pidfd_getfd(pidfd.as_fd(), fd, rustix::process::PidfdGetfdFlags::empty())
            .unwrap();
    // SAFETY: a fresh shared mapping of a memfd of `size` bytes; unmapped in raw_close.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            size,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            &local,
            0,
        )
    }
    .unwrap();
    (local, p)
}

fn raw_close(m: (OwnedFd, *mut std::ffi::c_void), size: usize) {
    // SAFETY: `m.1` is a mapping of `size` bytes made by raw_open and not used afterwards.
    unsafe { rustix::mm::munmap(m.1, size) }.unwrap();
    drop(m.0);
}

fn ipc_latency(reps: usize) {
    let dev = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    let q = Queue::in_order(&dev).unwrap();
    let size = 2 << 20;
    let buf = sycl::malloc_device::<u8>(size, &q).unwrap();
    q.memset(&buf, 1, &[]).unwrap().wait().unwrap();
    let raw = raw_memfd(size);
    // get latency: ours vs the raw equivalent (fstat of the fd the handle names).
    let get_t = median(time_it(reps, || {
        let h = ipc::memory::get(&buf).unwrap();
        black_box(h.as_bytes());
    })) * 1e6;
    let raw_get = median(time_it(reps, || {
        black_box(rustix::fs::fstat(&raw).unwrap());
    })) * 1e6;
    row("ipc::memory::get (vs fstat)", "us", get_t, raw_get);
    let handle = ipc::memory::get(&buf).unwrap();
    let mut colds = Vec::new();
    let mut raw_colds = Vec::new();
    let mut last = String::new();
    for i in 0..10 {
        let order = if i % 2 == 0 {
            "ours_first"
        } else {
            "raw_first"
        };
        let out = Command::new(std::env::current_exe().unwrap())
            .env(ROLE, "ipc")
            .args([
                std::process::id().to_string(),
                hex::encode(handle.as_bytes()),
                raw.as_raw_fd().to_string(),
                size.to_string(),
                reps.to_string(),
                order.to_string(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        last = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let f: Vec<f64> = last.split(' ').map(|x| x.parse().unwrap()).collect();
        if i % 2 == 0 {
            colds.push(f[0]);
        } else {
            raw_colds.push(f[1]);
        }
    }
    let f: Vec<f64> = last.split(' ').map(|x| x.parse().unwrap()).collect();
    row(
        "ipc::memory::open cold, 2 MiB (vs pidfd+mmap)",
        "us",
        median(colds),
        median(raw_colds),
    );
    row(
        "ipc::memory::open repeated (vs pidfd+mmap)",
        "us",
        f[2],
        f[3],
    );
    row("ipc::memory::close (vs munmap+close)", "us", f[4], f[5]);
    row(
        "ipc::memory::open again while open here (vs pidfd+mmap)",
        "us",
        f[6],
        f[3],
    );
}

// ---------------------------------------------------------------- event ping-pong

/// Whether the raw futex baseline spins ~20 us before sleeping, as the native backend's waits
/// do (the bench measures both ways).
static SPIN_FIRST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn futex_wait(word: &AtomicU32, expected: u32) {
    if SPIN_FIRST.load(Ordering::Relaxed) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(20) {
            if word.load(Ordering::Acquire) != expected {
                return;
            }
            std::hint::spin_loop();
        }
    }
    let _ =
        rustix::thread::futex::wait(word, rustix::thread::futex::Flags::empty(), expected, None);
}

fn futex_wake(word: &AtomicU32) {
    let _ =
        rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

fn shared_words(fd: &OwnedFd) -> &'static [AtomicU32; 2] {
    // SAFETY: one page of a memfd mapped shared for the rest of the process; AtomicU32 has the
    // layout of u32 and the page is zero-initialised by ftruncate.
    unsafe {
        let p = rustix::mm::mmap(
            std::ptr::null_mut(),
            4096,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            fd,
            0,
        )
        .unwrap();
        &*(p as *const [AtomicU32; 2])
    }
}

fn pingpong_child(args: &[String]) {
    let rounds: u64 = args[1].parse().unwrap();
    let ch = Channel::connect(&args[0]).unwrap();
    // Raw: the futex page arrives as a handle-less descriptor message? Use pidfd_getfd.
    let pid: i32 = args[2].parse().unwrap();
    let fdnum: i32 = args[3].parse().unwrap();
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .unwrap();
    let fd = rustix::process::pidfd_getfd(
        pidfd.as_fd(),
        fdnum,
        rustix::process::PidfdGetfdFlags::empty(),
    )
    .unwrap();
    let w = shared_words(&fd);
    // Two raw passes: plain futex waits, then spin-then-futex waits.
    for i in 1..=2 * rounds as u32 {
        if i == rounds as u32 + 1 {
            SPIN_FIRST.store(true, Ordering::Relaxed);
        }
        while w[0].load(Ordering::Acquire) < i {
            futex_wait(&w[0], i - 1);
        }
        w[1].store(i, Ordering::Release);
        futex_wake(&w[1]);
    }
    // Ours.
    let dev = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    let q = Queue::in_order(&dev).unwrap();
    let ab = ipc::event::open(&ch.recv_handle().unwrap(), q.context()).unwrap();
    let ba = ipc::event::open(&ch.recv_handle().unwrap(), q.context()).unwrap();
    ch.send(b"ready").unwrap();
    for i in 1..=rounds {
        ab.ext_wait_signal_count(i, None).unwrap();
        q.enqueue_signal_event(&ba).unwrap();
    }
    q.wait().unwrap();
}

fn pingpong(rounds: u64) {
    let listener = Listener::bind_unique().unwrap();
    let page = raw_memfd(4096);
    let w = shared_words(&page);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(ROLE, "pingpong")
        .args([
            listener.name().to_string(),
            rounds.to_string(),
            std::process::id().to_string(),
            page.as_raw_fd().to_string(),
        ])
        .spawn()
        .unwrap();
    let ch = listener.accept(Some(Duration::from_secs(30))).unwrap();
    let mut raw = [0.0; 2];
    for (pass, spin) in [false, true].into_iter().enumerate() {
        SPIN_FIRST.store(spin, Ordering::Relaxed);
        let t = Instant::now();
        let base = pass as u32 * rounds as u32;
        for i in base + 1..=base + rounds as u32 {
            w[0].store(i, Ordering::Release);
            futex_wake(&w[0]);
            while w[1].load(Ordering::Acquire) < i {
                futex_wait(&w[1], i - 1);
            }
        }
        raw[pass] = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    }
    let dev = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    let q = Queue::in_order(&dev).unwrap();
    let props = EventProperties {
        enable_ipc: true,
        enable_profiling: false,
    };
    let ab = Event::new_for_queue(&q, props).unwrap();
    let ba = Event::new_for_queue(&q, props).unwrap();
    ch.send_handle(&ipc::event::get(&ab).unwrap()).unwrap();
    ch.send_handle(&ipc::event::get(&ba).unwrap()).unwrap();
    assert_eq!(ch.recv().unwrap(), b"ready");
    let t = Instant::now();
    for i in 1..=rounds {
        q.enqueue_signal_event(&ab).unwrap();
        ba.ext_wait_signal_count(i, None).unwrap();
    }
    let ours = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    assert!(child.wait().unwrap().success());
    row(
        "event ping-pong round trip (vs bare futex)",
        "us",
        ours,
        raw[0],
    );
    row(
        "event ping-pong round trip (vs spin+futex)",
        "us",
        ours,
        raw[1],
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match std::env::var(ROLE).as_deref() {
        Ok("ipc") => return ipc_child(&args),
        Ok("pingpong") => return pingpong_child(&args),
        _ => {}
    }
    let quick = args.iter().any(|a| a == "--quick");
    let _reps = if quick { 5 } else { 21 };
    ipc::allow_fd_access_from(ipc::FdAccess::AnyProcess).unwrap();
    let dev = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    println!(
        "native CPU benchmarks on {} ({} cores)",
        dev.name(),
        dev.max_compute_units()
    );
    let q = Queue::in_order(&dev).unwrap();
    bandwidth(&q, if quick { 3 } else { 9 });
    kernel_latency(&q, if quick { 200 } else { 2000 });
    ipc_latency(if quick { 200 } else { 1000 });
    pingpong(if quick { 2000 } else { 20000 });
}
