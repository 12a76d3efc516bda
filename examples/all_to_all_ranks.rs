//! All-to-all between ranks, one process per GPU, through sycl-rs IPC, beside the same
//! exchange done with raw CUDA driver calls in the same run.
//!
//! Rank 0 (the launcher) starts ranks 1..N-1 as processes (the example's own binary). Every
//! rank allocates a device buffer of N*size bytes on its GPU and exports it and an IPC event;
//! every rank opens every other rank's buffer on its own device (peer access) and event. For
//! each message size, each rank copies its slice for peer p into slot `rank` of p's buffer
//! (`Queue::copy` into the opened memory), signals its event, and once every rank has
//! signalled (a channel message through rank 0 orders record before wait) waits on all the
//! peers' events; then every rank verifies the slices it received. The raw side does the same
//! with `cuIpcGetMemHandle`/`cuIpcOpenMemHandle_v2`, `cuMemcpyAsync` and interprocess events.
//!
//! ```text
//! cargo run --release --example all_to_all_ranks                      # a rank per CUDA device
//! cargo run --release --example all_to_all_ranks -- --ranks 2 --sizes 1M,64M   # ranks wrap over GPUs
//! ```
#![allow(unsafe_code)]

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use sycl::ipc::{
    self,
    transport::{Channel, Listener},
    Handle,
};
use sycl::{Aspect, BackendKind, Device, DeviceSelector, Event, EventProperties, Queue, Usm};

type R<T> = Result<T, String>;

const CHUNK: usize = 4096;

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

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

// ---------------------------------------------------------------- options

struct Options {
    ranks: Option<usize>,
    sizes: Vec<usize>,
    sizes_arg: Option<String>,
    reps: Option<usize>,
    worker: Option<(String, usize, usize)>,
}

fn parse_size(s: &str) -> R<usize> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = digits.parse().map_err(|e| format!("size `{s}`: {e}"))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("size `{s}` overflows"))?;
    if bytes == 0 || bytes % 4 != 0 {
        return Err(format!("size `{s}` must be a positive multiple of 4 bytes"));
    }
    Ok(bytes)
}

fn parse_args() -> R<Options> {
    let mut o = Options {
        ranks: None,
        sizes: Vec::new(),
        sizes_arg: None,
        reps: None,
        worker: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut next = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--ranks" => {
                o.ranks = Some(
                    next("--ranks")?
                        .parse()
                        .map_err(|e| format!("--ranks: {e}"))?,
                )
            }
            "--sizes" => o.sizes_arg = Some(next("--sizes")?),
            "--reps" => {
                o.reps = Some(
                    next("--reps")?
                        .parse()
                        .map_err(|e| format!("--reps: {e}"))?,
                )
            }
            "--worker" => {
                let name = next("--worker")?;
                let rank = next("--worker")?
                    .parse()
                    .map_err(|e| format!("rank: {e}"))?;
                let n = next("--worker")?
                    .parse()
                    .map_err(|e| format!("ranks: {e}"))?;
                o.worker = Some((name, rank, n));
            }
            "-h" | "--help" => {
                return Err(
                    "usage: all_to_all_ranks [--ranks N] [--sizes 1M,16M,256M,1G] [--reps R]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    o.sizes = match &o.sizes_arg {
        Some(s) => s.split(',').map(parse_size).collect::<R<_>>()?,
        None => (0..6).map(|i| (1usize << 20) << (2 * i)).collect(),
    };
    if o.sizes.is_empty() {
        return Err("--sizes names no size".into());
    }
    Ok(o)
}

fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

// ---------------------------------------------------------------- rank channels

/// Rank 0 holds a channel to every other rank (index i: rank i+1); the others one to rank 0.
enum Comm {
    Root(Vec<Channel>),
    Leaf(Channel),
}

impl Comm {
    /// Every rank's `mine`, in rank order.
    fn allgather(&self, mine: &[u8], n: usize) -> R<Vec<Vec<u8>>> {
        match self {
            Comm::Root(peers) => {
                let mut all = vec![mine.to_vec()];
                for ch in peers {
                    all.push(ch.recv().map_err(e2s)?);
                }
                for ch in peers {
                    for item in &all {
                        ch.send(item).map_err(e2s)?;
                    }
                }
                Ok(all)
            }
            Comm::Leaf(ch) => {
                ch.send(mine).map_err(e2s)?;
                (0..n).map(|_| ch.recv().map_err(e2s)).collect()
            }
        }
    }

    /// Returns once every rank called it.
    fn barrier(&self) -> R<()> {
        match self {
            Comm::Root(peers) => {
                for ch in peers {
                    ch.recv().map_err(e2s)?;
                }
                for ch in peers {
                    ch.send(b"g").map_err(e2s)?;
                }
            }
            Comm::Leaf(ch) => {
                ch.send(b"b").map_err(e2s)?;
                ch.recv().map_err(e2s)?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- raw CUDA

struct RawCuda {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

impl RawCuda {
    /// The primary context of the CUDA ordinal with `device`'s UUID.
    fn init(device: &Device) -> R<RawCuda> {
        // SAFETY: libcuda is present (checked by the launcher and implied by a CUDA device).
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
            // SAFETY: valid out-pointer and device.
            let r = unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) };
            ck(r, "cuDeviceGetUuid_v2")?;
            if want == Some(uuid.bytes.map(|b| b as u8)) {
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
}

impl Drop for RawCuda {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `init`.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// Raw resources of one rank, released in Drop (imports before own memory).
struct RawRank {
    buf: sys::CUdeviceptr,
    send: sys::CUdeviceptr,
    stream: sys::CUstream,
    event: sys::CUevent,
    peer_bufs: Vec<sys::CUdeviceptr>,
    peer_events: Vec<sys::CUevent>,
}

impl RawRank {
    fn new(raw: &RawCuda, bytes: usize) -> R<RawRank> {
        raw.current()?;
        let mut r = RawRank {
            buf: 0,
            send: 0,
            stream: std::ptr::null_mut(),
            event: std::ptr::null_mut(),
            peer_bufs: Vec::new(),
            peer_events: Vec::new(),
        };
        // SAFETY: valid out-pointers with the context current; each resource is released once
        // in Drop (null/zero ones are skipped there).
        unsafe {
            ck(sys::cuMemAlloc_v2(&mut r.buf, bytes), "cuMemAlloc_v2")?;
            ck(sys::cuMemAlloc_v2(&mut r.send, bytes), "cuMemAlloc_v2")?;
            ck(
                sys::cuStreamCreate(
                    &mut r.stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                ),
                "cuStreamCreate",
            )?;
            let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
                | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            ck(sys::cuEventCreate(&mut r.event, flags), "cuEventCreate")?;
        }
        Ok(r)
    }

    fn handles(&self) -> R<(Vec<u8>, Vec<u8>)> {
        let mut m = sys::CUipcMemHandle { reserved: [0; 64] };
        let mut e = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: valid out-pointers; a cuMemAlloc base and an interprocess event.
        unsafe {
            ck(
                sys::cuIpcGetMemHandle(&mut m, self.buf),
                "cuIpcGetMemHandle",
            )?;
            ck(
                sys::cuIpcGetEventHandle(&mut e, self.event),
                "cuIpcGetEventHandle",
            )?;
        }
        Ok((
            m.reserved.iter().map(|&b| b as u8).collect(),
            e.reserved.iter().map(|&b| b as u8).collect(),
        ))
    }
}

impl Drop for RawRank {
    fn drop(&mut self) {
        // SAFETY: every handle below was created once by this struct and is released once;
        // the caller synchronised the stream, so nothing is pending.
        unsafe {
            for &p in &self.peer_bufs {
                if p != 0 {
                    let _ = sys::cuIpcCloseMemHandle(p);
                }
            }
            for &e in &self.peer_events {
                if !e.is_null() {
                    let _ = sys::cuEventDestroy_v2(e);
                }
            }
            if !self.event.is_null() {
                let _ = sys::cuEventDestroy_v2(self.event);
            }
            if !self.stream.is_null() {
                let _ = sys::cuStreamDestroy_v2(self.stream);
            }
            for p in [self.buf, self.send] {
                if p != 0 {
                    let _ = sys::cuMemFree_v2(p);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- one rank

fn frame(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn unframe(mut b: &[u8]) -> R<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 {
            return Err("truncated frame".into());
        }
        let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        b = &b[4..];
        if b.len() < n {
            return Err("truncated frame".into());
        }
        parts.push(b[..n].to_vec());
        b = &b[n..];
    }
    Ok(parts)
}

fn tag(from: usize, to: usize, size: usize) -> u32 {
    0x5a00_0000 ^ ((from as u32) << 16) ^ ((to as u32) << 8) ^ size.trailing_zeros()
}

/// The words of block (from -> to): a hashed head of CHUNK bytes, then `tag` repeated.
fn head_words(t: u32, size: usize) -> Vec<u32> {
    (0..CHUNK.min(size) / 4)
        .map(|k| t.wrapping_mul(2_654_435_761) ^ (k as u32).wrapping_mul(40_503))
        .collect()
}

fn expect_word(t: u32, size: usize, byte_offset: usize) -> u32 {
    if byte_offset < CHUNK.min(size) {
        head_words(t, size)[byte_offset / 4]
    } else {
        t
    }
}

/// Checks the head, a middle chunk and the tail of every received slot of `host_slot_reader`.
fn verify(
    rank: usize,
    n: usize,
    size: usize,
    mut read: impl FnMut(usize, &mut [u32]) -> R<()>,
    what: &str,
) -> R<()> {
    for from in (0..n).filter(|&p| p != rank) {
        let t = tag(from, rank, size);
        let chunk = CHUNK.min(size);
        for off in [0, (size / 2) & !3, size - chunk] {
            let len = chunk.min(size - off);
            let mut words = vec![0u32; len / 4];
            read(from * size + off, &mut words)?;
            for (k, &w) in words.iter().enumerate() {
                let want = expect_word(t, size, off + 4 * k);
                if w != want {
                    return Err(format!(
                        "{what}: rank {rank}, slot {from}, byte {}: {w:#010x}, expected {want:#010x}",
                        off + 4 * k
                    ));
                }
            }
        }
    }
    Ok(())
}

struct Peer {
    mem: Option<Usm<u8>>,
    event: Option<Event>,
}

fn rank_main(rank: usize, n: usize, opts: &Options, comm: &Comm) -> R<()> {
    let cuda: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.backend() == BackendKind::Cuda)
        .collect();
    if cuda.is_empty() {
        return Err(format!("rank {rank}: no CUDA device"));
    }
    let index = rank % cuda.len();
    let dev = DeviceSelector::filter(&format!("cuda:{index}"))
        .and_then(|s| s.select())
        .map_err(e2s)?;
    let q = Queue::in_order(&dev).map_err(e2s)?;
    let raw = RawCuda::init(&dev)?;
    let max = *opts.sizes.iter().max().ok_or("no sizes")?;
    let total = n.checked_mul(max).ok_or("buffer size overflows")?;

    let buf = sycl::malloc_device::<u8>(total, &q).map_err(e2s)?;
    let send = sycl::malloc_device::<u8>(total, &q).map_err(e2s)?;
    let event = Event::new_for_queue(
        &q,
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .map_err(e2s)?;
    let mut rr = RawRank::new(&raw, total)?;
    let (raw_mem_h, raw_ev_h) = rr.handles()?;
    let mem_h = ipc::memory::get(&buf).map_err(e2s)?;
    let ev_h = ipc::event::get(&event).map_err(e2s)?;
    let mine = frame(&[
        mem_h.as_bytes(),
        ev_h.as_bytes(),
        &raw_mem_h,
        &raw_ev_h,
        dev.name().as_bytes(),
    ]);
    let all = comm.allgather(&mine, n)?;

    // Open every peer's buffer and event, ours and raw; time the memory opens.
    let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
    let mut peers: Vec<Peer> = Vec::with_capacity(n);
    rr.peer_bufs = vec![0; n];
    rr.peer_events = vec![std::ptr::null_mut(); n];
    let mut open_line = Vec::new();
    let mut names = Vec::new();
    for (p, bytes) in all.iter().enumerate() {
        let parts = unframe(bytes)?;
        if parts.len() != 5 {
            return Err(format!("rank {p} sent {} parts", parts.len()));
        }
        names.push(String::from_utf8_lossy(&parts[4]).to_string());
        if p == rank {
            peers.push(Peer {
                mem: None,
                event: None,
            });
            open_line.push("-".to_string());
            continue;
        }
        let h = Handle::from_bytes(parts[0].clone()).map_err(e2s)?;
        let mh = sys::CUipcMemHandle {
            reserved: <[u8; 64]>::try_from(&parts[2][..])
                .map_err(|_| "bad raw handle")?
                .map(|b| b as std::ffi::c_char),
        };
        let eh = sys::CUipcEventHandle {
            reserved: <[u8; 64]>::try_from(&parts[3][..])
                .map_err(|_| "bad raw handle")?
                .map(|b| b as std::ffi::c_char),
        };
        // The first cross-GPU open in a process pays the driver's peer setup (milliseconds),
        // whoever makes it: alternate which side opens first so neither always pays it.
        let ours_first = (rank + p) % 2 == 0;
        let raw_open = |rr: &mut RawRank| -> R<f64> {
            raw.current()?;
            let t = Instant::now();
            // SAFETY: valid out-pointer; a handle of the peer's live allocation (freed only
            // after the final barrier, once every rank closed it; RawRank closes it in Drop).
            let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut rr.peer_bufs[p], mh, lazy) };
            ck(r, "cuIpcOpenMemHandle_v2")?;
            Ok(t.elapsed().as_secs_f64() * 1e6)
        };
        let raw_before = if ours_first {
            None
        } else {
            Some(raw_open(&mut rr)?)
        };
        let t = Instant::now();
        let mem = ipc::memory::open::<u8>(&h, q.context(), &dev).map_err(e2s)?;
        let first = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        drop(ipc::memory::open::<u8>(&h, q.context(), &dev).map_err(e2s)?);
        let again = t.elapsed().as_secs_f64() * 1e6;
        let ev = ipc::event::open(
            &Handle::from_bytes(parts[1].clone()).map_err(e2s)?,
            q.context(),
        )
        .map_err(e2s)?;
        let raw_first = match raw_before {
            Some(us) => us,
            None => raw_open(&mut rr)?,
        };
        // SAFETY: valid out-pointer; a handle of the peer's live interprocess event.
        let r = unsafe { sys::cuIpcOpenEventHandle(&mut rr.peer_events[p], eh) };
        ck(r, "cuIpcOpenEventHandle")?;
        let mark = |went_first: bool| if went_first { "*" } else { "" };
        open_line.push(format!(
            "{first:.0}{}/{again:.1}/{raw_first:.0}{}",
            mark(ours_first),
            mark(!ours_first)
        ));
        peers.push(Peer {
            mem: Some(mem),
            event: Some(ev),
        });
    }
    let lines = comm.allgather(open_line.join(" ").as_bytes(), n)?;
    if rank == 0 {
        println!(
            "ranks: {}",
            (0..n)
                .map(|r| format!("{r}={} (cuda:{})", names[r], r % cuda.len()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("\nopen latency of a {} buffer, us: ours first open / ours cached reopen / raw first open\n(* = opened first in its process: pays the driver's first peer setup)",
            human(total)
        );
        print!("{:>8}", "row opens");
        for p in 0..n {
            print!(" {:>20}", format!("rank {p}"));
        }
        println!();
        for (r, l) in lines.iter().enumerate() {
            print!("{:>8}", format!("rank {r}"));
            for cell in String::from_utf8_lossy(l).split(' ') {
                print!(" {cell:>20}");
            }
            println!();
        }
        println!(
            "\n{:>8} {:>5} {:>12} {:>12} {:>9} {:>11} {:>11} {:>11}",
            "size",
            "reps",
            "ours (us)",
            "raw (us)",
            "ours/raw",
            "pair GB/s",
            "aggr GB/s",
            "raw aggr"
        );
    }

    let mut results = Vec::new();
    for &size in &opts.sizes {
        let reps = opts
            .reps
            // Small rounds take tens of microseconds, so the barriers' jitter is a large part of
            // them: more rounds there, for a stable median.
            .unwrap_or(match size {
                s if s >= 256 << 20 => 8,
                s if s > 4 << 20 => 20,
                _ => 100,
            })
            .max(1);
        // Sources: block p (for peer p) holds tag(rank, p) with a hashed head.
        for p in 0..n {
            let t = tag(rank, p, size);
            let block = send.range(p * size..(p + 1) * size).map_err(e2s)?;
            q.fill(&block.cast::<u32>().map_err(e2s)?, t, &[])
                .map_err(e2s)?;
            q.write(
                &block
                    .sub(0..CHUNK.min(size))
                    .map_err(e2s)?
                    .cast::<u32>()
                    .map_err(e2s)?,
                &head_words(t, size),
            )
            .map_err(e2s)?;
        }
        q.memset(&buf, 0, &[]).map_err(e2s)?;
        q.wait().map_err(e2s)?;
        raw.current()?;
        // SAFETY: both are `total`-byte allocations of this context; synchronised right after.
        unsafe {
            ck(
                sys::cuMemcpyDtoD_v2(rr.send, send.as_ptr(), n * size),
                "cuMemcpyDtoD_v2",
            )?;
            ck(sys::cuMemsetD8_v2(rr.buf, 0, total), "cuMemsetD8_v2")?;
            ck(sys::cuCtxSynchronize(), "cuCtxSynchronize")?;
        }

        let ours_round = || -> R<f64> {
            comm.barrier()?;
            let t = Instant::now();
            for k in 1..n {
                let p = (rank + k) % n;
                let dst = peers[p].mem.as_ref().ok_or("no peer memory")?;
                q.copy(
                    &send.range(p * size..(p + 1) * size).map_err(e2s)?,
                    &dst.range(rank * size..(rank + 1) * size).map_err(e2s)?,
                    &[],
                )
                .map_err(e2s)?;
            }
            q.enqueue_signal_event(&event).map_err(e2s)?;
            comm.barrier()?; // every rank has signalled: the waits below see this round's signals
            for p in peers.iter().filter_map(|p| p.event.as_ref()) {
                p.wait().map_err(e2s)?;
            }
            event.wait().map_err(e2s)?;
            comm.barrier()?;
            Ok(t.elapsed().as_secs_f64() * 1e6)
        };
        let raw_round = || -> R<f64> {
            comm.barrier()?;
            let t = Instant::now();
            raw.current()?;
            for k in 1..n {
                let p = (rank + k) % n;
                let (dst, src) = (
                    rr.peer_bufs[p] + (rank * size) as u64,
                    rr.send + (p * size) as u64,
                );
                // SAFETY: source block p of our send buffer and slot `rank` of peer p's opened
                // buffer, both `size` bytes inside their allocations; waited for below.
                let r = unsafe { sys::cuMemcpyAsync(dst, src, size, rr.stream) };
                ck(r, "cuMemcpyAsync")?;
            }
            // SAFETY: live event and stream.
            let r = unsafe { sys::cuEventRecord(rr.event, rr.stream) };
            ck(r, "cuEventRecord")?;
            comm.barrier()?;
            for (p, &e) in rr.peer_events.iter().enumerate() {
                if p != rank {
                    // SAFETY: an opened interprocess event.
                    ck(unsafe { sys::cuEventSynchronize(e) }, "cuEventSynchronize")?;
                }
            }
            // SAFETY: our own live event.
            let r = unsafe { sys::cuEventSynchronize(rr.event) };
            ck(r, "cuEventSynchronize")?;
            comm.barrier()?;
            Ok(t.elapsed().as_secs_f64() * 1e6)
        };

        // One checked round each, then timed rounds alternating ours and raw.
        ours_round()?;
        verify(
            rank,
            n,
            size,
            |off, out| {
                q.read(
                    &buf.range(off..off + out.len() * 4)
                        .map_err(e2s)?
                        .cast::<u32>()
                        .map_err(e2s)?,
                    out,
                )
                .map_err(e2s)
            },
            "ours",
        )?;
        raw_round()?;
        raw.current()?;
        verify(
            rank,
            n,
            size,
            |off, out| {
                // SAFETY: `out` holds out.len()*4 bytes; the range lies inside rr.buf; the
                // exchange that wrote it completed (all events waited).
                ck(
                    unsafe {
                        sys::cuMemcpyDtoH_v2(
                            out.as_mut_ptr().cast(),
                            rr.buf + off as u64,
                            out.len() * 4,
                        )
                    },
                    "cuMemcpyDtoH_v2",
                )
            },
            "raw",
        )?;
        let (mut o, mut w) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            o.push(ours_round()?);
            w.push(raw_round()?);
        }
        let (o, w) = (median(o), median(w));
        results.push((size, o, w));
        if rank == 0 {
            let pair = size as f64 / (o * 1e-6) / 1e9;
            let aggr = (n * (n - 1) * size) as f64 / (o * 1e-6) / 1e9;
            let raw_aggr = (n * (n - 1) * size) as f64 / (w * 1e-6) / 1e9;
            println!(
                "{:>8} {reps:>5} {o:>12.1} {w:>12.1} {:>9.3} {pair:>11.2} {aggr:>11.2} {raw_aggr:>11.2}",
                human(size),
                o / w
            );
        }
    }

    // Close everything opened (ours and raw) before anyone frees.
    q.wait().map_err(e2s)?;
    raw.current()?;
    for p in peers.iter_mut() {
        if let Some(m) = p.mem.take() {
            ipc::memory::close(m).map_err(e2s)?;
        }
        p.event = None;
    }
    // SAFETY: the raw stream is idle after the last round's waits; the imports are closed
    // below by RawRank's Drop, own memory freed after the barrier.
    let r = unsafe { sys::cuStreamSynchronize(rr.stream) };
    ck(r, "cuStreamSynchronize")?;
    for p in rr.peer_bufs.iter_mut().filter(|p| **p != 0) {
        // SAFETY: opened above, nothing pending, closed once (zeroed so Drop skips it).
        let r = unsafe { sys::cuIpcCloseMemHandle(*p) };
        ck(r, "cuIpcCloseMemHandle")?;
        *p = 0;
    }
    for e in rr.peer_events.iter_mut().filter(|e| !e.is_null()) {
        // SAFETY: an imported event, unused now (all waits returned), destroyed once (nulled
        // so Drop skips it), before its exporter may destroy its own.
        let r = unsafe { sys::cuEventDestroy_v2(*e) };
        ck(r, "cuEventDestroy_v2")?;
        *e = std::ptr::null_mut();
    }
    comm.barrier()?;
    if rank == 0 {
        let worst = results
            .iter()
            .map(|&(_, o, w)| o / w)
            .fold(0.0f64, f64::max);
        println!(
            "\n{} all-to-all per round vs raw CUDA IPC: worst ours/raw {worst:.3} (target <= 1.05)",
            if worst <= 1.05 { "PASS" } else { "MISS" }
        );
        println!("OK: every rank verified the slices it received from every peer, for every size, ours and raw");
    }
    drop(rr);
    Ok(())
}

// ---------------------------------------------------------------- launcher and workers

fn worker(name: &str, rank: usize, n: usize, opts: &Options) -> R<()> {
    let ch = Channel::connect(name).map_err(e2s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(600)))
        .map_err(e2s)?;
    ch.send(rank.to_string().as_bytes()).map_err(e2s)?;
    let comm = Comm::Leaf(ch);
    rank_main(rank, n, opts, &comm).map_err(|e| format!("rank {rank}: {e}"))
}

fn launcher(opts: &Options) -> R<bool> {
    if let Ok(out) = Command::new("nvidia-smi").args(["topo", "-m"]).output() {
        if out.status.success() {
            println!(
                "nvidia-smi topo -m:\n{}",
                String::from_utf8_lossy(&out.stdout).trim_end()
            );
        }
    }
    let needed = [
        Aspect::ExtOneapiIpcMemory,
        Aspect::ExtOneapiIpcEvent,
        Aspect::UsmDeviceAllocations,
    ];
    let cuda: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.backend() == BackendKind::Cuda)
        .collect();
    if cuda.is_empty() {
        println!("no CUDA device: skipped");
        return Ok(true);
    }
    // SAFETY: only dlopens candidate library names.
    if !unsafe { sys::is_culib_present() } {
        println!("libcuda cannot be loaded for the raw comparison: skipped");
        return Ok(true);
    }
    if let Some(d) = cuda.iter().find(|d| !needed.iter().all(|a| d.has(*a))) {
        println!(
            "{} lacks IPC memory/events ({:?}): skipped",
            d.name(),
            needed.iter().filter(|a| !d.has(**a)).collect::<Vec<_>>()
        );
        return Ok(true);
    }
    let n = opts.ranks.unwrap_or(cuda.len());
    if n < 2 {
        println!(
            "{} CUDA device(s) and {n} rank(s): an all-to-all needs at least 2 ranks \
             (run with --ranks 2 to put two ranks on one GPU): skipped",
            cuda.len()
        );
        return Ok(true);
    }
    println!(
        "{n} ranks on {} CUDA device(s){}; sizes per peer: {}",
        cuda.len(),
        if n > cuda.len() {
            " (ranks wrap over the devices)"
        } else {
            ""
        },
        opts.sizes
            .iter()
            .map(|&s| human(s))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let listener = Listener::bind_unique().map_err(e2s)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    for rank in 1..n {
        let mut cmd = Command::new(&exe);
        cmd.env("NCCL_NVLS_ENABLE", "0").args([
            "--worker",
            listener.name(),
            &rank.to_string(),
            &n.to_string(),
        ]);
        if let Some(s) = &opts.sizes_arg {
            cmd.args(["--sizes", s]);
        }
        if let Some(r) = opts.reps {
            cmd.args(["--reps", &r.to_string()]);
        }
        children.push(
            cmd.spawn()
                .map_err(|e| format!("starting rank {rank}: {e}"))?,
        );
    }
    let result = (|| -> R<()> {
        let mut chans: Vec<(usize, Channel)> = Vec::new();
        for _ in 1..n {
            let ch = listener
                .accept(Some(Duration::from_secs(120)))
                .map_err(e2s)?;
            ch.set_recv_timeout(Some(Duration::from_secs(600)))
                .map_err(e2s)?;
            let r: usize = String::from_utf8_lossy(&ch.recv().map_err(e2s)?)
                .parse()
                .map_err(|e| format!("rank id: {e}"))?;
            chans.push((r, ch));
        }
        chans.sort_by_key(|(r, _)| *r);
        if chans.iter().enumerate().any(|(i, (r, _))| *r != i + 1) {
            return Err("ranks did not connect as 1..N-1".into());
        }
        let comm = Comm::Root(chans.into_iter().map(|(_, c)| c).collect());
        rank_main(0, n, opts, &comm).map_err(|e| format!("rank 0: {e}"))
    })();
    let mut ok = result.is_ok();
    if let Err(e) = &result {
        eprintln!("all_to_all_ranks: {e}");
    }
    for (i, mut c) in children.into_iter().enumerate() {
        if ok {
            match c.wait() {
                Ok(s) if s.success() => {}
                Ok(s) => {
                    eprintln!("rank {} exited with {s}", i + 1);
                    ok = false;
                }
                Err(e) => {
                    eprintln!("rank {}: {e}", i + 1);
                    ok = false;
                }
            }
        } else {
            // A failed rank 0 leaves the others blocked on the channel; they exit on its
            // closing, so reap them.
            let _ = c.wait();
        }
    }
    Ok(ok)
}

fn main() -> ExitCode {
    // Keep NVLink SHARP (multicast) off for anything CUDA-collective in every rank.
    std::env::set_var("NCCL_NVLS_ENABLE", "0");
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match &opts.worker {
        Some((name, rank, n)) => worker(name, *rank, *n, &opts).map(|_| true),
        None => launcher(&opts),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("all_to_all_ranks: {e}");
            ExitCode::FAILURE
        }
    }
}
