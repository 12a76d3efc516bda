//! CUDA benchmarks, each beside the raw CUDA driver call in the same run.
//!
//! `cargo bench -p sycl-rs --bench cuda` (add `-- --quick` for a short run). Runs on the first
//! CUDA device (`cuda:0`); without one it prints "no CUDA device: skipped" and exits 0, unless
//! `SYCL_RS_REQUIRE_BACKENDS` names `cuda` (then it fails).
//! Prints one line per measurement (ours, raw, ours/raw) and a PASS/MISS line per target.
//! The raw side uses `cudarc::driver::sys` in the same primary context as sycl-rs.
//! Child processes are the bench binary itself, started with `std::process::Command` (never
//! `fork` after `cuInit`), their role chosen by an environment variable.
#![allow(unsafe_code)]

mod common;
use common::{median, row, skip, us_since};
use std::ffi::{c_char, c_void, CString};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use cudarc::nvrtc::sys as nv;
use sycl::ipc::{self, transport::Listener, Handle};
use sycl::{Device, DeviceSelector, Event, EventProperties, KernelBundle, Queue, Range, Source};

const ROLE: &str = "SYCL_RS_CUDA_BENCH_ROLE";
const EMPTY_KERNEL: &str = "extern \"C\" __global__ void empty() {}\n";
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

type R<T> = Result<T, String>;

fn ck(r: sys::CUresult, what: &str) -> R<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {r:?}"))
    }
}

fn e2s(e: sycl::Error) -> String {
    e.to_string()
}

/// Raw driver state: the primary context of the CUDA ordinal whose UUID matches `device`.
struct RawCuda {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

impl RawCuda {
    fn init(device: &Device) -> R<RawCuda> {
        // SAFETY: cuInit may be called any number of times; libcuda is present (checked in main).
        ck(unsafe { sys::cuInit(0) }, "cuInit")?;
        let mut count = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { sys::cuDeviceGetCount(&mut count) };
        ck(r, "cuDeviceGetCount")?;
        let want = device.uuid();
        let mut chosen = None;
        for ordinal in 0..count {
            let mut dev = 0;
            // SAFETY: valid out-pointer, ordinal < count.
            let r = unsafe { sys::cuDeviceGet(&mut dev, ordinal) };
            ck(r, "cuDeviceGet")?;
            let mut uuid = sys::CUuuid { bytes: [0; 16] };
            // SAFETY: valid out-pointer, valid device.
            let r = unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) };
            ck(r, "cuDeviceGetUuid_v2")?;
            let bytes: [u8; 16] = uuid.bytes.map(|b| b as u8);
            if want.map_or(true, |w| w == bytes) {
                chosen = Some(dev);
                break;
            }
        }
        let dev = chosen.ok_or("no CUDA ordinal has this device's UUID")?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device; released in Drop.
        let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) };
        ck(r, "cuDevicePrimaryCtxRetain")?;
        let raw = RawCuda { dev, ctx };
        raw.current()?;
        Ok(raw)
    }

    fn current(&self) -> R<()> {
        // SAFETY: a retained primary context.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    fn attr(&self, a: sys::CUdevice_attribute) -> R<i32> {
        let mut v = 0;
        // SAFETY: valid out-pointer and device.
        let r = unsafe { sys::cuDeviceGetAttribute(&mut v, a, self.dev) };
        ck(r, "cuDeviceGetAttribute")?;
        Ok(v)
    }

    fn alloc(&self, size: usize) -> R<RawBuf> {
        self.current()?;
        let mut p = 0;
        // SAFETY: valid out-pointer, context current.
        ck(unsafe { sys::cuMemAlloc_v2(&mut p, size) }, "cuMemAlloc_v2")?;
        let buf = RawBuf { ptr: p };
        // SAFETY: `p` holds `size` bytes.
        ck(unsafe { sys::cuMemsetD8_v2(p, 1, size) }, "cuMemsetD8_v2")?;
        Ok(buf)
    }

    fn stream(&self) -> R<RawStream> {
        self.current()?;
        let mut s = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: valid out-pointer, context current.
        let r = unsafe { sys::cuStreamCreate(&mut s, flags) };
        ck(r, "cuStreamCreate")?;
        Ok(RawStream(s))
    }
}

impl Drop for RawCuda {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `init`.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

struct RawBuf {
    ptr: sys::CUdeviceptr,
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2, freed once; the primary context stays current on
        // this thread (the bench is single-threaded for raw calls).
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

struct RawStream(sys::CUstream);

impl RawStream {
    fn sync(&self) -> R<()> {
        // SAFETY: a live stream.
        let r = unsafe { sys::cuStreamSynchronize(self.0) };
        ck(r, "cuStreamSynchronize")
    }
}

impl Drop for RawStream {
    fn drop(&mut self) {
        // SAFETY: created by cuStreamCreate, destroyed once.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

struct RawEvent(sys::CUevent);

impl Drop for RawEvent {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate or cuIpcOpenEventHandle, destroyed once.
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

fn mem_handle_bytes(h: &sys::CUipcMemHandle) -> Vec<u8> {
    h.reserved.iter().map(|&b| b as u8).collect()
}

/// A sycl-rs IPC handle from its hex form on a child's command line.
fn handle_from(hex_bytes: &str) -> R<Handle> {
    Handle::from_bytes(hex::decode(hex_bytes).map_err(|e| e.to_string())?).map_err(e2s)
}

/// A raw `CUipcMemHandle` from its hex form on a child's command line.
fn mem_handle_from(hex_bytes: &str) -> R<sys::CUipcMemHandle> {
    let bytes = hex::decode(hex_bytes).map_err(|e| e.to_string())?;
    let arr: [u8; 64] = bytes[..]
        .try_into()
        .map_err(|_| "a raw IPC handle must be 64 bytes")?;
    Ok(sys::CUipcMemHandle {
        reserved: arr.map(|b| b as c_char),
    })
}

fn event_handle_from(bytes: &[u8]) -> R<sys::CUipcEventHandle> {
    let arr: [u8; 64] = bytes
        .try_into()
        .map_err(|_| "a raw IPC event handle must be 64 bytes")?;
    Ok(sys::CUipcEventHandle {
        reserved: arr.map(|b| b as c_char),
    })
}

fn select() -> Option<Device> {
    DeviceSelector::filter("cuda:0")
        .and_then(|s| s.select())
        .ok()
}

// ---------------------------------------------------------------- IPC open (child side)

/// Child: args `size ours_hex raw_hex warm_raw_hex warm_ours_hex order reps bandwidth`. Prints
/// `cold_ours cold_raw repeat_ours repeat_raw bw_ours bw_raw` (us, us, us, us, GB/s, GB/s).
fn open_child(args: &[String]) -> R<()> {
    let [size, ours_hex, raw_hex, warm_hex, warm_ours_hex, order, reps, bw] = args else {
        return Err(format!(
            "open child: 8 arguments expected, got {}",
            args.len()
        ));
    };
    let size: usize = size.parse().map_err(|e| format!("size: {e}"))?;
    let order: u32 = order.parse().map_err(|e| format!("order: {e}"))?;
    let reps: usize = reps.parse().map_err(|e| format!("reps: {e}"))?;
    let bw = bw == "1";
    let dev = select().ok_or("child: no CUDA device")?;
    let q = Queue::in_order(&dev).map_err(e2s)?;
    let raw = RawCuda::init(&dev)?;
    let handle = handle_from(ours_hex)?;
    let raw_handle = mem_handle_from(raw_hex)?;
    let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
    // Make sure both sides start with the context created and current, and that the driver's
    // one-time IPC set-up of this process is done (a raw open and close of a third buffer), so
    // that "cold" means: the first open of this handle in this process.
    q.wait().map_err(e2s)?;
    raw.current()?;
    let warm = mem_handle_from(warm_hex)?;
    let mut warm_ptr = 0;
    // SAFETY: valid out-pointer; a handle of a live allocation of the parent; closed at once.
    let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut warm_ptr, warm, lazy) };
    ck(r, "cuIpcOpenMemHandle_v2 (warm-up)")?;
    // SAFETY: opened just above, unused.
    let r = unsafe { sys::cuIpcCloseMemHandle(warm_ptr) };
    ck(r, "cuIpcCloseMemHandle (warm-up)")?;
    // The same warm-up for our path (first-use costs of the runtime's own code and tables), with
    // a handle of a fourth buffer, so both sides' "cold" is the first open of a new handle.
    let warm_ours = handle_from(warm_ours_hex)?;
    ipc::memory::close(ipc::memory::open::<u8>(&warm_ours, q.context(), &dev).map_err(e2s)?)
        .map_err(e2s)?;

    let mut cold_ours = 0.0;
    let mut cold_raw = 0.0;
    let mut first = None;
    let mut raw_ptr: sys::CUdeviceptr = 0;
    for step in 0..2 {
        if (step == 0) == (order == 0) {
            let t = Instant::now();
            let m = ipc::memory::open::<u8>(&handle, q.context(), &dev).map_err(e2s)?;
            cold_ours = us_since(t);
            first = Some(m);
        } else {
            raw.current()?;
            let t = Instant::now();
            // SAFETY: valid out-pointer; a 64-byte handle of a live cuMemAlloc allocation of
            // the parent, which stays alive until this child exits.
            let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut raw_ptr, raw_handle, lazy) };
            cold_raw = us_since(t);
            ck(r, "cuIpcOpenMemHandle_v2")?;
        }
    }
    let first = first.ok_or("no first open")?;
    if first.len() != size {
        return Err(format!("opened {} bytes, expected {size}", first.len()));
    }

    // Repeated: ours opens again while `first` is alive (the cache), then drops; raw closes
    // and opens again (the driver maps it again).
    let mut rep_ours = Vec::with_capacity(reps);
    let mut rep_raw = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let again = ipc::memory::open::<u8>(&handle, q.context(), &dev).map_err(e2s)?;
        drop(again);
        rep_ours.push(us_since(t));
        raw.current()?;
        let t = Instant::now();
        // SAFETY: `raw_ptr` came from cuIpcOpenMemHandle_v2 and nothing uses it now; it is
        // reopened right after from the same live handle.
        let r = unsafe {
            let c = sys::cuIpcCloseMemHandle(raw_ptr);
            if c == sys::CUresult::CUDA_SUCCESS {
                sys::cuIpcOpenMemHandle_v2(&mut raw_ptr, raw_handle, lazy)
            } else {
                c
            }
        };
        rep_raw.push(us_since(t));
        ck(r, "cuIpcCloseMemHandle + cuIpcOpenMemHandle_v2")?;
    }

    let (mut bw_ours, mut bw_raw) = (0.0, 0.0);
    if bw {
        let local = sycl::malloc_device::<u8>(size, &q).map_err(e2s)?;
        let raw_local = raw.alloc(size)?;
        let stream = raw.stream()?;
        let mut o = Vec::new();
        let mut w = Vec::new();
        for i in 0..12 {
            let t = Instant::now();
            q.copy(&first, &local, &[])
                .map_err(e2s)?
                .wait()
                .map_err(e2s)?;
            let to = t.elapsed().as_secs_f64();
            raw.current()?;
            let t = Instant::now();
            // SAFETY: both pointers name `size` live bytes on this device (opened and
            // allocated above); the stream is synchronised before the next use.
            let r = unsafe { sys::cuMemcpyDtoDAsync_v2(raw_local.ptr, raw_ptr, size, stream.0) };
            ck(r, "cuMemcpyDtoDAsync_v2")?;
            stream.sync()?;
            let tr = t.elapsed().as_secs_f64();
            if i >= 2 {
                o.push(size as f64 / to / 1e9);
                w.push(size as f64 / tr / 1e9);
            }
        }
        // Check the copy really happened: the parent filled both sources with 1s.
        let mut head = [0u8; 16];
        q.read(&local.range(0..16).map_err(e2s)?, &mut head)
            .map_err(e2s)?;
        if head != [1u8; 16] {
            return Err(format!("copied data is wrong: {head:?}"));
        }
        bw_ours = median(o);
        bw_raw = median(w);
    }
    raw.current()?;
    // SAFETY: opened above, closed once, unused from here on.
    let r = unsafe { sys::cuIpcCloseMemHandle(raw_ptr) };
    ck(r, "cuIpcCloseMemHandle")?;
    drop(first);
    println!(
        "{cold_ours} {cold_raw} {} {} {bw_ours} {bw_raw}",
        median(rep_ours),
        median(rep_raw)
    );
    Ok(())
}

struct Target {
    name: String,
    pass: bool,
    detail: String,
}

fn ipc_open(q: &Queue, raw: &RawCuda, quick: bool, targets: &mut Vec<Target>) -> R<()> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let warm = raw.alloc(2 * MIB)?;
    let mut wh = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: valid out-pointer; the base of a live cuMemAlloc allocation.
    let r = unsafe { sys::cuIpcGetMemHandle(&mut wh, warm.ptr) };
    ck(r, "cuIpcGetMemHandle")?;
    let warm_ours = sycl::malloc_device::<u8>(2 * MIB, q).map_err(e2s)?;
    let warm_ours_handle = ipc::memory::get(&warm_ours).map_err(e2s)?;
    for (size, label) in [(2 * MIB, "2 MiB"), (GIB, "1 GiB")] {
        let ours = sycl::malloc_device::<u8>(size, q).map_err(e2s)?;
        q.memset(&ours, 1, &[]).map_err(e2s)?.wait().map_err(e2s)?;
        let handle = ipc::memory::get(&ours).map_err(e2s)?;
        let raw_buf = raw.alloc(size)?;
        let mut rh = sys::CUipcMemHandle { reserved: [0; 64] };
        // SAFETY: valid out-pointer; the base of a live cuMemAlloc allocation.
        let r = unsafe { sys::cuIpcGetMemHandle(&mut rh, raw_buf.ptr) };
        ck(r, "cuIpcGetMemHandle")?;
        // 48 children: the per-order medians of 12 each swung the balanced ratio by +-3% from
        // run to run on one H100 (1.018 to 1.068 for the same binary).
        let children = if quick { 2 } else { 48 };
        let reps = match (quick, size >= GIB) {
            (true, _) => 5,
            (false, true) => 15,
            (false, false) => 60,
        };
        let mut lines = Vec::new();
        for c in 0..children {
            let bw = size >= GIB && c == 0;
            let out = Command::new(&exe)
                .env(ROLE, "open")
                .args([
                    size.to_string(),
                    hex::encode(handle.as_bytes()),
                    hex::encode(mem_handle_bytes(&rh)),
                    hex::encode(mem_handle_bytes(&wh)),
                    hex::encode(warm_ours_handle.as_bytes()),
                    (c % 2).to_string(),
                    reps.to_string(),
                    if bw { "1".into() } else { "0".into() },
                ])
                .output()
                .map_err(|e| format!("starting a child: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "open child failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let text = stdout.lines().last().unwrap_or("");
            let f: Vec<f64> = text
                .split_whitespace()
                .map(|x| {
                    x.parse::<f64>()
                        .map_err(|e| format!("child output `{text}`: {e}"))
                })
                .collect::<R<_>>()?;
            if f.len() != 6 {
                return Err(format!("child output `{text}`"));
            }
            lines.push(f);
        }
        let col = |i: usize| median(lines.iter().map(|f| f[i]).collect());
        let (co, cr) = (col(0), col(1));
        row(
            &format!("cold ipc::memory::open {label} ({children} children)"),
            "us",
            co,
            cr,
        );
        // One cold open per side per process, so the ratio is taken within each process (both
        // sides see the same machine state). Children alternate which side opens first and
        // the first open of a process pays extra, so the figure is the geometric mean of the
        // median ratio of each order: the order effect cancels.
        let order_median = |order: usize| {
            median(
                lines
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| c % 2 == order)
                    .map(|(_, f)| f[0] / f[1])
                    .collect(),
            )
        };
        let (ours_first, raw_first) = (order_median(0), order_median(1));
        let paired = (ours_first * raw_first).sqrt();
        println!(
            "{:<52} ours/raw per process: ours first {ours_first:.3}, raw first {raw_first:.3}, \
             balanced {paired:.3}",
            ""
        );
        targets.push(Target {
            name: format!("cold IPC open {label}: ours/raw <= 1.05"),
            pass: paired <= 1.05,
            detail: format!("{paired:.3}"),
        });
        let (ro, rr) = (col(2), col(3));
        row(
            &format!("repeated open {label} (cache vs close+reopen)"),
            "us",
            ro,
            rr,
        );
        println!("{:<52} raw/ours {:>8.1}x", "", rr / ro);
        targets.push(Target {
            name: format!("repeated open {label}: ours >= 20x faster than raw reopen"),
            pass: rr / ro >= 20.0,
            detail: format!("{:.1}x", rr / ro),
        });
        if size >= GIB {
            let (bo, br) = (lines[0][4], lines[0][5]);
            row("copy 1 GiB from opened buffer (GB/s)", "GB/s", bo, br);
            targets.push(Target {
                name: "bandwidth through opened buffer: ours >= 0.97 of raw".into(),
                pass: bo / br >= 0.97,
                detail: format!("{:.3}", bo / br),
            });
        }
        ipc::memory::put(handle).map_err(e2s)?;
        raw.current()?;
        drop(raw_buf);
    }
    Ok(())
}

// ---------------------------------------------------------------- event round trip

/// Schedule shared by both sides: (ours?, rounds, timed?).
fn event_schedule(rounds: usize) -> Vec<(bool, usize, bool)> {
    vec![
        (true, 50, false),
        (false, 50, false),
        (true, rounds, true),
        (false, rounds, true),
        (true, rounds, true),
        (false, rounds, true),
    ]
}

fn events_child(args: &[String]) -> R<()> {
    let [name, rounds] = args else {
        return Err("events child: 2 arguments expected".into());
    };
    let rounds: usize = rounds.parse().map_err(|e| format!("rounds: {e}"))?;
    let dev = select().ok_or("child: no CUDA device")?;
    let q = Queue::in_order(&dev).map_err(e2s)?;
    let raw = RawCuda::init(&dev)?;
    let ch = ipc::transport::Channel::connect(name).map_err(e2s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(60)))
        .map_err(e2s)?;
    let e_ab = ipc::event::open(&ch.recv_handle().map_err(e2s)?, q.context()).map_err(e2s)?;
    let e_ba = ipc::event::open(&ch.recv_handle().map_err(e2s)?, q.context()).map_err(e2s)?;
    let h_ab = event_handle_from(&ch.recv().map_err(e2s)?)?;
    let h_ba = event_handle_from(&ch.recv().map_err(e2s)?)?;
    raw.current()?;
    let (mut r_ab, mut r_ba) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers; handles of live interprocess events of the parent.
    let r = unsafe { sys::cuIpcOpenEventHandle(&mut r_ab, h_ab) };
    ck(r, "cuIpcOpenEventHandle")?;
    let r_ab = RawEvent(r_ab);
    // SAFETY: as above.
    let r = unsafe { sys::cuIpcOpenEventHandle(&mut r_ba, h_ba) };
    ck(r, "cuIpcOpenEventHandle")?;
    let r_ba = RawEvent(r_ba);
    let stream = raw.stream()?;
    ch.send(b"ready").map_err(e2s)?;
    for (ours, n, _) in event_schedule(rounds) {
        for _ in 0..n {
            ch.recv().map_err(e2s)?;
            if ours {
                e_ab.wait().map_err(e2s)?;
                q.enqueue_signal_event(&e_ba).map_err(e2s)?;
            } else {
                raw.current()?;
                // SAFETY: live events and stream of this context.
                unsafe {
                    ck(sys::cuEventSynchronize(r_ab.0), "cuEventSynchronize")?;
                    ck(sys::cuEventRecord(r_ba.0, stream.0), "cuEventRecord")?;
                }
            }
            ch.send(b"b").map_err(e2s)?;
        }
    }
    q.wait().map_err(e2s)?;
    stream.sync()?;
    // Release the imported events before the exporter may destroy its own.
    drop((e_ab, e_ba, r_ab, r_ba));
    ch.send(b"closed").map_err(e2s)?;
    Ok(())
}

fn event_round_trip(q: &Queue, raw: &RawCuda, quick: bool, targets: &mut Vec<Target>) -> R<()> {
    let rounds = if quick { 100 } else { 500 };
    let listener = Listener::bind_unique().map_err(e2s)?;
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .env(ROLE, "events")
        .args([listener.name().to_string(), rounds.to_string()])
        .spawn()
        .map_err(|e| format!("starting the events child: {e}"))?;
    let result = (|| -> R<(f64, f64)> {
        let ch = listener
            .accept(Some(Duration::from_secs(60)))
            .map_err(e2s)?;
        ch.set_recv_timeout(Some(Duration::from_secs(60)))
            .map_err(e2s)?;
        let props = EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        };
        let e_ab = Event::new_for_queue(q, props).map_err(e2s)?;
        let e_ba = Event::new_for_queue(q, props).map_err(e2s)?;
        ch.send_handle(&ipc::event::get(&e_ab).map_err(e2s)?)
            .map_err(e2s)?;
        ch.send_handle(&ipc::event::get(&e_ba).map_err(e2s)?)
            .map_err(e2s)?;
        raw.current()?;
        let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
            | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        let (mut a, mut b) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers, context current.
        let r = unsafe { sys::cuEventCreate(&mut a, flags) };
        ck(r, "cuEventCreate")?;
        let r_ab = RawEvent(a);
        // SAFETY: as above.
        let r = unsafe { sys::cuEventCreate(&mut b, flags) };
        ck(r, "cuEventCreate")?;
        let r_ba = RawEvent(b);
        for e in [&r_ab, &r_ba] {
            let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
            // SAFETY: valid out-pointer, an interprocess event.
            let r = unsafe { sys::cuIpcGetEventHandle(&mut h, e.0) };
            ck(r, "cuIpcGetEventHandle")?;
            let bytes: Vec<u8> = h.reserved.iter().map(|&x| x as u8).collect();
            ch.send(&bytes).map_err(e2s)?;
        }
        let stream = raw.stream()?;
        if ch.recv().map_err(e2s)? != b"ready" {
            return Err("events child did not get ready".into());
        }
        let (mut ours_t, mut raw_t) = (Vec::new(), Vec::new());
        for (ours, n, timed) in event_schedule(rounds) {
            for _ in 0..n {
                let t = Instant::now();
                if ours {
                    q.enqueue_signal_event(&e_ab).map_err(e2s)?;
                    ch.send(b"a").map_err(e2s)?;
                    ch.recv().map_err(e2s)?;
                    e_ba.wait().map_err(e2s)?;
                } else {
                    raw.current()?;
                    // SAFETY: live event and stream of this context.
                    let r = unsafe { sys::cuEventRecord(r_ab.0, stream.0) };
                    ck(r, "cuEventRecord")?;
                    ch.send(b"a").map_err(e2s)?;
                    ch.recv().map_err(e2s)?;
                    // SAFETY: a live event.
                    let r = unsafe { sys::cuEventSynchronize(r_ba.0) };
                    ck(r, "cuEventSynchronize")?;
                }
                let dt = us_since(t);
                if timed {
                    if ours {
                        ours_t.push(dt)
                    } else {
                        raw_t.push(dt)
                    }
                }
            }
        }
        if ch.recv().map_err(e2s)? != b"closed" {
            return Err("events child did not close its events".into());
        }
        Ok((median(ours_t), median(raw_t)))
    })();
    let status = child.wait().map_err(|e| e.to_string())?;
    let (o, r) = result?;
    if !status.success() {
        return Err(format!("events child exited with {status}"));
    }
    row(
        &format!("IPC event round trip, 2 processes ({rounds}x2 rounds)"),
        "us",
        o,
        r,
    );
    targets.push(Target {
        name: "cross-process event round trip: ours/raw <= 1.10".into(),
        pass: o / r <= 1.10,
        detail: format!("{:.3}", o / r),
    });
    Ok(())
}

// ---------------------------------------------------------------- empty kernel

fn nvrtc_cubin(source: &str, arch: (i32, i32)) -> R<Vec<u8>> {
    // SAFETY: only dlopens candidate names.
    if !unsafe { nv::is_culib_present() } {
        return Err("NVRTC not found for the raw side".into());
    }
    let ok = |r: nv::nvrtcResult, what: &str| -> R<()> {
        if r == nv::nvrtcResult::NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(format!("{what}: {r:?}"))
        }
    };
    let src = CString::new(source).map_err(|e| e.to_string())?;
    let arch = CString::new(format!("-arch=sm_{}{}", arch.0, arch.1)).map_err(|e| e.to_string())?;
    let mut prog = std::ptr::null_mut();
    let (name, null) = (c"empty.cu".as_ptr(), std::ptr::null());
    // SAFETY: valid out-pointer and NUL-terminated strings; no headers.
    let r = unsafe { nv::nvrtcCreateProgram(&mut prog, src.as_ptr(), name, 0, null, null) };
    ok(r, "nvrtcCreateProgram")?;
    let opts = [arch.as_ptr()];
    let res = (|| -> R<Vec<u8>> {
        // SAFETY: a created program and one NUL-terminated option that outlives the call.
        let r = unsafe { nv::nvrtcCompileProgram(prog, 1, opts.as_ptr()) };
        ok(r, "nvrtcCompileProgram")?;
        let mut size = 0usize;
        // SAFETY: a compiled program; valid out-pointer.
        let r = unsafe { nv::nvrtcGetCUBINSize(prog, &mut size) };
        ok(r, "nvrtcGetCUBINSize")?;
        let mut cubin = vec![0u8; size];
        // SAFETY: the buffer holds `size` bytes.
        let r = unsafe { nv::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) };
        ok(r, "nvrtcGetCUBIN")?;
        Ok(cubin)
    })();
    // SAFETY: created above, destroyed once.
    unsafe { nv::nvrtcDestroyProgram(&mut prog) };
    res
}

fn empty_kernel(q: &Queue, raw: &RawCuda, quick: bool, targets: &mut Vec<Target>) -> R<()> {
    let dev = q.device().clone();
    let bundle =
        KernelBundle::build(q.context(), &[dev], Source::CudaC(EMPTY_KERNEL), "").map_err(e2s)?;
    let kernel = bundle.kernel("empty").map_err(e2s)?;
    let major = raw.attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = raw.attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let cubin = nvrtc_cubin(EMPTY_KERNEL, (major, minor))?;
    raw.current()?;
    let mut module = std::ptr::null_mut();
    // SAFETY: a valid cubin image for this device; context current.
    let r = unsafe { sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast::<c_void>()) };
    ck(r, "cuModuleLoadData")?;
    let mut func = std::ptr::null_mut();
    // SAFETY: a loaded module; NUL-terminated name.
    let r = unsafe { sys::cuModuleGetFunction(&mut func, module, c"empty".as_ptr()) };
    ck(r, "cuModuleGetFunction")?;
    let stream = raw.stream()?;
    let launch_raw = || -> R<()> {
        let (null, s) = (std::ptr::null_mut(), stream.0);
        // SAFETY: a kernel without parameters, one block of one thread, on a live stream.
        let r = unsafe { sys::cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, s, null, null) };
        ck(r, "cuLaunchKernel")
    };
    let launch_ours = || -> R<Event> {
        // SAFETY: `empty` takes no parameters and touches no memory.
        unsafe { q.launch(&kernel, Range::d1(1), &[], &[]) }.map_err(e2s)
    };
    for _ in 0..1000 {
        launch_ours()?;
        launch_raw()?;
    }
    q.wait().map_err(e2s)?;
    stream.sync()?;
    const N: usize = 10_000;
    let trials = if quick { 3 } else { 7 };
    let (mut o, mut w) = (Vec::new(), Vec::new());
    for _ in 0..trials {
        let t = Instant::now();
        for _ in 0..N {
            launch_ours()?;
        }
        q.wait().map_err(e2s)?;
        o.push(us_since(t) / N as f64);
        raw.current()?;
        let t = Instant::now();
        for _ in 0..N {
            launch_raw()?;
        }
        stream.sync()?;
        w.push(us_since(t) / N as f64);
    }
    let (o, w) = (median(o), median(w));
    row(
        "empty kernel, 10,000 submits + 1 wait (per launch)",
        "us",
        o,
        w,
    );
    targets.push(Target {
        name: "empty-kernel submit overhead: ours/raw <= 1.2".into(),
        pass: o / w <= 1.2,
        detail: format!("{:.3}", o / w),
    });
    let reps = if quick { 300 } else { 3000 };
    let (mut lo, mut lw) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        launch_ours()?.wait().map_err(e2s)?;
        lo.push(us_since(t));
        raw.current()?;
        let t = Instant::now();
        launch_raw()?;
        stream.sync()?;
        lw.push(us_since(t));
    }
    row(
        "empty kernel submit + wait latency",
        "us",
        median(lo),
        median(lw),
    );
    drop(stream);
    raw.current()?;
    // SAFETY: no launch of the module is pending (the stream was synchronised).
    ck(unsafe { sys::cuModuleUnload(module) }, "cuModuleUnload")?;
    Ok(())
}

fn run(quick: bool) -> R<()> {
    let Some(dev) = select() else {
        skip("cuda", "no CUDA device");
        return Ok(());
    };
    // SAFETY: only dlopens candidate library names.
    if !unsafe { sys::is_culib_present() } {
        skip(
            "cuda",
            "no CUDA device (libcuda not loadable for the raw side)",
        );
        return Ok(());
    }
    let q = Queue::in_order(&dev).map_err(e2s)?;
    let raw = RawCuda::init(&dev)?;
    let mut version = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { sys::cuDriverGetVersion(&mut version) };
    ck(r, "cuDriverGetVersion")?;
    println!(
        "CUDA benchmarks on {} (driver {}, CUDA {}.{}){}",
        dev.name(),
        dev.driver_version(),
        version / 1000,
        version % 1000 / 10,
        if quick { ", quick" } else { "" }
    );
    let mut targets = Vec::new();
    let t = Instant::now();
    let mut failed = 0;
    for (name, section) in [
        (
            "IPC open",
            ipc_open as fn(&Queue, &RawCuda, bool, &mut Vec<Target>) -> R<()>,
        ),
        ("event round trip", event_round_trip),
        ("empty kernel", empty_kernel),
    ] {
        if let Err(e) = section(&q, &raw, quick, &mut targets) {
            println!("FAILED section {name}: {e}");
            failed += 1;
        }
    }
    println!("--- targets ({:.1} s)", t.elapsed().as_secs_f64());
    for t in &targets {
        println!(
            "{} {} ({})",
            if t.pass { "PASS" } else { "MISS" },
            t.name,
            t.detail
        );
    }
    if failed > 0 {
        return Err(format!("{failed} section(s) failed"));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = match std::env::var(ROLE).as_deref() {
        Ok("open") => open_child(&args),
        Ok("events") => events_child(&args),
        _ => run(args.iter().any(|a| a == "--quick")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuda bench: {e}");
            ExitCode::FAILURE
        }
    }
}
