//! Halo exchange over MPI ranks: a 2-D Jacobi stencil on a domain split into row blocks, one
//! block per rank. Each step every rank runs one `#[sycl::kernel]` over its block, then sends
//! its first and last rows to the neighbours' halo rows: zero-copy into the opened peer buffer
//! (a `sycl::ranks::NodeBuffer`) and an IPC event when the neighbour is on the same node,
//! through MPI (`Ranks::exchange`) when it is on another. The result is verified, bit for bit,
//! against one rank computing the whole domain; each rank reports compute, intra-node and
//! inter-node time per step (medians), and on CUDA the same intra-node exchange made with raw
//! CUDA IPC calls plus an MPI barrier.
//!
//! ```text
//! cargo build --release -p sycl-rs --features mpi --example halo_exchange
//! mpirun -np 4 target/release/examples/halo_exchange                       # nodes as MPI sees them
//! mpirun -np 4 -x SYCL_RS_RANKS_PER_NODE=2 target/release/examples/halo_exchange   # two "nodes" of two
//! mpirun -np 4 target/release/examples/halo_exchange -- --nx 4096 --ny 4096 --steps 100
//! ```
//! Options: `--nx`, `--ny` (domain), `--steps`, `--bw-mib N` (the inter-node bandwidth
//! measurement, 0: none), `--die-at STEP` (local rank 1 of node 0 exits
//! at that step: the others must fail with an error, not hang).
#![allow(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use mpi::datatype::PartitionMut;
use mpi::traits::*;
use sycl::ranks::{NodeBuffer, Ranks, RanksOptions};
use sycl::{BackendKind, Errc, Error, Queue, Range, UsmRange};

/// One Jacobi step over `rows` interior rows of a block stored with a halo row above and
/// below (`(rows + 2) * nx` cells). Columns 0 and nx-1 keep their value.
#[sycl::kernel]
fn jacobi_rows(src: &[f32], dst: &mut [f32], nx: usize) {
    let y = global_id(0) + 1;
    let x = global_id(1);
    let i = y * nx + x;
    if x == 0 || x == nx - 1 {
        dst[i] = src[i];
    } else {
        dst[i] = ((src[i - nx] + src[i + nx]) + (src[i - 1] + src[i + 1])) * 0.25;
    }
}

/// The initial value of global cell (y, x); rows -1 and ny are the fixed boundary.
fn initial(y: isize, x: usize, ny: usize) -> f32 {
    if y < 0 {
        100.0
    } else if y as usize >= ny {
        0.0
    } else {
        ((y as usize * 7 + x * 13) % 32) as f32
    }
}

struct Options {
    nx: usize,
    ny: usize,
    steps: usize,
    die_at: Option<usize>,
    bw_mib: usize,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        nx: 1024,
        ny: 1024,
        steps: 50,
        die_at: None,
        bw_mib: 16,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a number"))
        };
        match a.as_str() {
            "--" => {}
            "--nx" => o.nx = value("--nx")?,
            "--ny" => o.ny = value("--ny")?,
            "--steps" => o.steps = value("--steps")?,
            "--die-at" => o.die_at = Some(value("--die-at")?),
            "--bw-mib" => o.bw_mib = value("--bw-mib")?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.nx < 3 || o.ny == 0 || o.steps == 0 {
        return Err("need --nx >= 3, --ny >= 1, --steps >= 1".into());
    }
    Ok(o)
}

/// This rank's block: global rows `first..first + rows`.
struct Block {
    first: usize,
    rows: usize,
    /// Cells of one grid in the rank's part (the largest block plus two halo rows).
    grid_len: usize,
}

impl Block {
    fn of(rank: usize, size: usize, ny: usize, nx: usize) -> Block {
        let first = rank * ny / size;
        let end = (rank + 1) * ny / size;
        let max_rows = ny.div_ceil(size);
        Block {
            first,
            rows: end - first,
            grid_len: (max_rows + 2) * nx,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Timings {
    compute: Vec<f64>,
    intra: Vec<f64>,
    inter: Vec<f64>,
}

/// The grid `g` (0 or 1) of a rank's part, rows `r0..r1` of it (row 0 is the upper halo).
fn rows_of(
    part: &sycl::Usm<f32>,
    block: &Block,
    nx: usize,
    g: usize,
    r0: usize,
    r1: usize,
) -> sycl::Result<UsmRange<f32>> {
    part.range(g * block.grid_len + r0 * nx..g * block.grid_len + r1 * nx)
}

fn run_ranks(
    ranks: &Ranks,
    q: &Queue,
    buffer: &NodeBuffer<'_, f32>,
    o: &Options,
) -> sycl::Result<Timings> {
    let (rank, size, nx) = (ranks.rank(), ranks.size(), o.nx);
    let block = Block::of(rank, size, o.ny, nx);
    let part = buffer.local();
    // Both grids start with the initial values, halos (boundary or neighbours' rows) included.
    let mut init = vec![0.0f32; block.grid_len];
    for r in 0..block.rows + 2 {
        let y = block.first as isize + r as isize - 1;
        for x in 0..nx {
            init[r * nx + x] = initial(y, x, o.ny);
        }
    }
    q.write(&part.range(0..block.grid_len)?, &init)?;
    q.write(&part.range(block.grid_len..2 * block.grid_len)?, &init)?;

    let up = (rank > 0).then(|| rank - 1);
    let down = (rank + 1 < size).then_some(rank + 1);
    let (up_local, down_local) = node_neighbours(ranks);
    let mut t = Timings {
        compute: Vec::new(),
        intra: Vec::new(),
        inter: Vec::new(),
    };
    ranks.node_barrier()?;
    for step in 0..o.steps {
        if o.die_at == Some(step) && ranks.node_index() == 0 && ranks.local_rank() == 1 {
            eprintln!("rank {rank}: exiting at step {step} (--die-at)");
            std::process::exit(7);
        }
        let (s, d) = (step % 2, (step + 1) % 2);
        let t0 = Instant::now();
        let src = rows_of(part, &block, nx, s, 0, block.rows + 2)?;
        let dst = rows_of(part, &block, nx, d, 0, block.rows + 2)?;
        let compute =
            q.parallel_for(Range::d2(block.rows, nx), &[], jacobi_rows(&src, &dst, nx))?;
        compute.wait()?;
        let t1 = Instant::now();

        intra_exchange(ranks, q, buffer, o, d)?;
        let t2 = Instant::now();

        // Other nodes: through MPI, into our halo rows.
        if let (Some(u), None) = (up, up_local) {
            ranks.exchange(
                q,
                &rows_of(part, &block, nx, d, 1, 2)?,
                &rows_of(part, &block, nx, d, 0, 1)?,
                u,
                &[],
            )?;
        }
        if let (Some(dn), None) = (down, down_local) {
            ranks.exchange(
                q,
                &rows_of(part, &block, nx, d, block.rows, block.rows + 1)?,
                &rows_of(part, &block, nx, d, block.rows + 1, block.rows + 2)?,
                dn,
                &[],
            )?;
        }
        let t3 = Instant::now();
        t.compute.push((t1 - t0).as_secs_f64());
        t.intra.push((t2 - t1).as_secs_f64());
        t.inter.push((t3 - t2).as_secs_f64());
    }
    Ok(t)
}

/// Same node: our edge rows of grid `d` straight into the neighbours' halo rows, our event,
/// a node barrier (every signal is enqueued before anyone waits for it), then the queue waits
/// for the neighbours' events.
fn intra_exchange(
    ranks: &Ranks,
    q: &Queue,
    buffer: &NodeBuffer<'_, f32>,
    o: &Options,
    d: usize,
) -> sycl::Result<()> {
    let (rank, size, nx) = (ranks.rank(), ranks.size(), o.nx);
    let block = Block::of(rank, size, o.ny, nx);
    let part = buffer.local();
    let (up_local, down_local) = node_neighbours(ranks);
    if let Some(u) = up_local {
        let theirs = Block::of(rank - 1, size, o.ny, nx);
        let dst = rows_of(
            buffer.peer(u)?,
            &theirs,
            nx,
            d,
            theirs.rows + 1,
            theirs.rows + 2,
        )?;
        q.copy(&rows_of(part, &block, nx, d, 1, 2)?, &dst, &[])?;
    }
    if let Some(dn) = down_local {
        let theirs = Block::of(rank + 1, size, o.ny, nx);
        let dst = rows_of(buffer.peer(dn)?, &theirs, nx, d, 0, 1)?;
        q.copy(
            &rows_of(part, &block, nx, d, block.rows, block.rows + 1)?,
            &dst,
            &[],
        )?;
    }
    buffer.signal(q)?;
    ranks.node_barrier()?;
    let peers: Vec<usize> = [up_local, down_local].into_iter().flatten().collect();
    buffer.wait_for(q, &peers)?;
    q.wait()
}

/// The local ranks of the neighbours above and below, where they are on this node.
fn node_neighbours(ranks: &Ranks) -> (Option<usize>, Option<usize>) {
    let rank = ranks.rank();
    let up = (rank > 0).then(|| rank - 1);
    let down = (rank + 1 < ranks.size()).then_some(rank + 1);
    let local_of = |r: Option<usize>| r.and_then(|r| ranks.local_of_rank(r));
    (local_of(up), local_of(down))
}

/// The whole domain on one rank, for the check.
fn run_one_rank(q: &Queue, o: &Options) -> sycl::Result<Vec<f32>> {
    let nx = o.nx;
    let block = Block::of(0, 1, o.ny, nx);
    let part = sycl::malloc_device::<f32>(2 * block.grid_len, q)?;
    let mut init = vec![0.0f32; block.grid_len];
    for r in 0..block.rows + 2 {
        for x in 0..nx {
            init[r * nx + x] = initial(r as isize - 1, x, o.ny);
        }
    }
    q.write(&part.range(0..block.grid_len)?, &init)?;
    q.write(&part.range(block.grid_len..)?, &init)?;
    for step in 0..o.steps {
        let (s, d) = (step % 2, (step + 1) % 2);
        let src = rows_of(&part, &block, nx, s, 0, block.rows + 2)?;
        let dst = rows_of(&part, &block, nx, d, 0, block.rows + 2)?;
        q.parallel_for(Range::d2(block.rows, nx), &[], jacobi_rows(&src, &dst, nx))?;
    }
    q.wait()?;
    q.to_vec(&rows_of(&part, &block, nx, o.steps % 2, 1, block.rows + 1)?)
}

fn run(o: &Options, world: &mpi::topology::SimpleCommunicator) -> sycl::Result<()> {
    let ranks = Ranks::new(world, RanksOptions::default())?;
    let q = Queue::in_order(ranks.device())?;
    let (rank, size) = (ranks.rank(), ranks.size());
    if rank == 0 {
        println!(
            "halo_exchange: {} x {} domain, {} steps, {size} ranks on {} node(s), {} ({}){}",
            o.ny,
            o.nx,
            o.steps,
            ranks.node_count(),
            ranks.device().name(),
            ranks.device().backend(),
            if ranks.mpi_is_cuda_aware() {
                ", CUDA-aware MPI"
            } else {
                ""
            }
        );
    }
    let block = Block::of(rank, size, o.ny, o.nx);
    let buffer = ranks.node_buffer::<f32>(&q, 2 * block.grid_len)?;
    let t = run_ranks(&ranks, &q, &buffer, o)?;
    let report = format!(
        "rank {rank} (node {}, local {}): compute {:.1} us, intra-node {:.1} us, inter-node {:.1} us per step (medians)",
        ranks.node_index(),
        ranks.local_rank(),
        median(t.compute) * 1e6,
        median(t.intra) * 1e6,
        median(t.inter) * 1e6
    );
    // The final interior rows of every rank, gathered on rank 0.
    let mine = q.to_vec(&rows_of(
        buffer.local(),
        &block,
        o.nx,
        o.steps % 2,
        1,
        block.rows + 1,
    )?)?;
    let comm = ranks.communicator();
    let reports = gather_text(comm, &report);
    let counts: Vec<i32> = (0..size)
        .map(|r| (Block::of(r, size, o.ny, o.nx).rows * o.nx) as i32)
        .collect();
    let displs: Vec<i32> = counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect();
    let root = comm.process_at_rank(0);
    if rank == 0 {
        let mut all = vec![0.0f32; o.ny * o.nx];
        let mut partition = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        root.gather_varcount_into_root(&mine[..], &mut partition);
        for line in reports {
            println!("{line}");
        }
        let expected = run_one_rank(&q, o)?;
        if let Some(i) = (0..all.len()).find(|&i| all[i].to_bits() != expected[i].to_bits()) {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "cell ({}, {}) is {} after {} steps on {size} ranks, {} on one rank",
                    i / o.nx,
                    i % o.nx,
                    all[i],
                    o.steps,
                    expected[i]
                ),
            ));
        }
        println!(
            "halo_exchange: {size} ranks equal one rank bit for bit after {} steps: verified",
            o.steps
        );
    } else {
        root.gather_varcount_into(&mine[..]);
    }
    if ranks.node_count() > 1 && o.bw_mib > 0 {
        bandwidth(&ranks, &q, o)?;
    }
    #[cfg(feature = "cuda")]
    if ranks.device().backend() == BackendKind::Cuda {
        raw_cuda::compare(&ranks, &q, &buffer, o)?;
    }
    #[cfg(not(feature = "cuda"))]
    let _ = BackendKind::Cuda;
    drop(buffer);
    Ok(())
}

/// Inter-node bandwidth: `Ranks::exchange` of device memory with the same local rank of the
/// next node, beside a raw MPI send/recv of the same bytes between host buffers.
fn bandwidth(ranks: &Ranks, q: &Queue, o: &Options) -> sycl::Result<()> {
    let comm = ranks.communicator();
    let (rank, size) = (ranks.rank(), ranks.size());
    // Ranks of one node are consecutive here (the example's layouts); pair node k with k ^ 1.
    let peer = (0..size).find(|&r| {
        ranks.node_of(r).ok() == Some(ranks.node_index() ^ 1)
            && ranks.local_of_rank(r).is_none()
            && r % ranks.local_size() == rank % ranks.local_size()
    });
    let bytes = o.bw_mib << 20;
    let send = sycl::malloc_device::<u8>(bytes, q)?;
    let recv = sycl::malloc_device::<u8>(bytes, q)?;
    q.fill(&send, rank as u8, &[])?.wait()?;
    let (mut host_send, mut host_recv) = (vec![rank as u8; bytes], vec![0u8; bytes]);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for rep in 0..6 {
        comm.barrier();
        if let Some(p) = peer {
            let t = Instant::now();
            ranks.exchange(q, &send, &recv, p, &[])?;
            let ours_s = t.elapsed().as_secs_f64();
            let process = comm.process_at_rank(p as i32);
            let t = Instant::now();
            mpi::request::scope(|scope| {
                let r = process.immediate_receive_into(scope, &mut host_recv[..]);
                let s = process.immediate_send(scope, &host_send[..]);
                r.wait();
                s.wait();
            });
            let raw_s = t.elapsed().as_secs_f64();
            if rep > 0 {
                ours.push(ours_s);
                raw.push(raw_s);
            }
        }
    }
    host_send[0] = host_recv[0];
    let line = match peer {
        Some(p) => {
            let got = q.to_vec(&recv.range(0..1)?)?[0];
            if got != p as u8 || host_send[0] != p as u8 {
                return Err(Error::new(
                    Errc::Runtime,
                    format!("bandwidth exchange with rank {p}: wrong bytes"),
                ));
            }
            let gbs = |s: f64| 2.0 * bytes as f64 / s / 1e9;
            let (ours, raw) = (median(ours), median(raw));
            format!(
                "rank {rank} <-> rank {p} (other node), {} MiB each way: Ranks::exchange {:.2} GB/s ({}), raw MPI send/recv of host memory {:.2} GB/s, ratio {:.3}",
                o.bw_mib,
                gbs(ours),
                if ranks.mpi_is_cuda_aware() || ranks.device().backend() != BackendKind::Cuda {
                    "direct"
                } else {
                    "staged through pinned host memory"
                },
                gbs(raw),
                gbs(ours) / gbs(raw)
            )
        }
        None => format!("rank {rank}: no partner on another node"),
    };
    for l in gather_text(comm, &line) {
        println!("{l}");
    }
    Ok(())
}

/// Every rank's line, on rank 0 (others get an empty list).
fn gather_text(comm: &impl Communicator, line: &str) -> Vec<String> {
    let mut fixed = [0u8; 256];
    let n = line.len().min(256);
    fixed[..n].copy_from_slice(&line.as_bytes()[..n]);
    let root = comm.process_at_rank(0);
    if comm.rank() == 0 {
        let mut all = vec![0u8; 256 * comm.size() as usize];
        root.gather_into_root(&fixed[..], &mut all[..]);
        all.chunks(256)
            .map(|c| {
                String::from_utf8_lossy(c)
                    .trim_end_matches('\0')
                    .to_string()
            })
            .collect()
    } else {
        root.gather_into(&fixed[..]);
        Vec::new()
    }
}

#[cfg(feature = "cuda")]
mod raw_cuda {
    //! The same intra-node exchange with raw CUDA driver calls: cuIpcGetMemHandle /
    //! cuIpcOpenMemHandle, interprocess events, cuMemcpyDtoDAsync into the neighbours' halo
    //! rows, cuEventRecord, MPI_Barrier over the node, cuStreamWaitEvent; timed step by step,
    //! alternating with the sycl-rs exchange of the same rows.
    use std::time::Instant;

    use cudarc::driver::sys;
    use mpi::traits::*;
    use sycl::{Errc, Error};

    use super::{intra_exchange, median, node_neighbours, Block, Options};

    fn ck(r: sys::CUresult, what: &str) -> sycl::Result<()> {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(Error::new(Errc::Runtime, format!("{what}: {r:?}")))
        }
    }

    /// Raw resources of this rank, released in Drop (imports before own memory).
    struct Raw {
        dev: sys::CUdevice,
        buf: sys::CUdeviceptr,
        stream: sys::CUstream,
        event: sys::CUevent,
        peer_bufs: Vec<sys::CUdeviceptr>,
        peer_events: Vec<sys::CUevent>,
    }

    impl Drop for Raw {
        fn drop(&mut self) {
            // SAFETY: each handle was created once below and is released once; the stream was
            // synchronised, so nothing is pending.
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
                if self.buf != 0 {
                    let _ = sys::cuMemFree_v2(self.buf);
                }
                let _ = sys::cuDevicePrimaryCtxRelease_v2(self.dev);
            }
        }
    }

    /// The CUDA ordinal with `device`'s UUID, its primary context made current.
    fn init(device: &sycl::Device) -> sycl::Result<Raw> {
        // SAFETY: a CUDA device exists, so libcuda is loaded; valid out-pointers throughout.
        unsafe {
            ck(sys::cuInit(0), "cuInit")?;
            let mut count = 0;
            ck(sys::cuDeviceGetCount(&mut count), "cuDeviceGetCount")?;
            let want = device.uuid();
            for ordinal in 0..count {
                let mut dev = 0;
                ck(sys::cuDeviceGet(&mut dev, ordinal), "cuDeviceGet")?;
                let mut uuid = sys::CUuuid { bytes: [0; 16] };
                ck(
                    sys::cuDeviceGetUuid_v2(&mut uuid, dev),
                    "cuDeviceGetUuid_v2",
                )?;
                if want == Some(uuid.bytes.map(|b| b as u8)) {
                    let mut ctx = std::ptr::null_mut();
                    ck(
                        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                        "cuDevicePrimaryCtxRetain",
                    )?;
                    ck(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
                    return Ok(Raw {
                        dev,
                        buf: 0,
                        stream: std::ptr::null_mut(),
                        event: std::ptr::null_mut(),
                        peer_bufs: Vec::new(),
                        peer_events: Vec::new(),
                    });
                }
            }
        }
        Err(Error::new(
            Errc::Runtime,
            "no CUDA ordinal has this device's UUID",
        ))
    }

    pub(super) fn compare(
        ranks: &sycl::ranks::Ranks,
        q: &sycl::Queue,
        buffer: &sycl::ranks::NodeBuffer<'_, f32>,
        o: &Options,
    ) -> sycl::Result<()> {
        let (rank, size, nx) = (ranks.rank(), ranks.size(), o.nx);
        let node = ranks.node_communicator();
        let block = Block::of(rank, size, o.ny, nx);
        let bytes = 2 * block.grid_len * 4;
        let mut raw = init(ranks.device())?;
        // SAFETY: valid out-pointers with the context current; released once in Drop.
        unsafe {
            ck(sys::cuMemAlloc_v2(&mut raw.buf, bytes), "cuMemAlloc_v2")?;
            ck(
                sys::cuStreamCreate(
                    &mut raw.stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                ),
                "cuStreamCreate",
            )?;
            let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
                | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            ck(sys::cuEventCreate(&mut raw.event, flags), "cuEventCreate")?;
        }
        let mut mh = sys::CUipcMemHandle { reserved: [0; 64] };
        let mut eh = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: valid out-pointers; a cuMemAlloc base and an interprocess event.
        unsafe {
            ck(
                sys::cuIpcGetMemHandle(&mut mh, raw.buf),
                "cuIpcGetMemHandle",
            )?;
            ck(
                sys::cuIpcGetEventHandle(&mut eh, raw.event),
                "cuIpcGetEventHandle",
            )?;
        }
        let mine: Vec<u8> = mh
            .reserved
            .iter()
            .chain(&eh.reserved)
            .map(|&b| b as u8)
            .collect();
        let mut all = vec![0u8; 128 * ranks.local_size()];
        node.all_gather_into(&mine[..], &mut all[..]);
        let me = ranks.local_rank();
        raw.peer_bufs = vec![0; ranks.local_size()];
        raw.peer_events = vec![std::ptr::null_mut(); ranks.local_size()];
        for (p, h) in all.chunks(128).enumerate() {
            if p == me {
                continue;
            }
            let mut pm = sys::CUipcMemHandle { reserved: [0; 64] };
            let mut pe = sys::CUipcEventHandle { reserved: [0; 64] };
            for i in 0..64 {
                pm.reserved[i] = h[i] as _;
                pe.reserved[i] = h[64 + i] as _;
            }
            let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
            // SAFETY: valid out-pointers; handles of the peers' live allocation and event
            // (freed only after the final barrier, once every rank closed them).
            unsafe {
                ck(
                    sys::cuIpcOpenMemHandle_v2(&mut raw.peer_bufs[p], pm, lazy),
                    "cuIpcOpenMemHandle_v2",
                )?;
                ck(
                    sys::cuIpcOpenEventHandle(&mut raw.peer_events[p], pe),
                    "cuIpcOpenEventHandle",
                )?;
            }
        }
        node.barrier();

        let (up_local, down_local) = node_neighbours(ranks);
        let row = nx * 4;
        let grid = block.grid_len * 4;
        let raw_step = |d: usize| -> sycl::Result<()> {
            // SAFETY: every address lies in a live allocation (ours or an opened peer's) of
            // the same layout as the sycl-rs buffers; the stream is ours.
            unsafe {
                if let Some(u) = up_local {
                    let theirs = Block::of(rank - 1, size, o.ny, nx);
                    let dst = raw.peer_bufs[u]
                        + (d * theirs.grid_len * 4 + (theirs.rows + 1) * row) as u64;
                    let src = raw.buf + (d * grid + row) as u64;
                    ck(
                        sys::cuMemcpyDtoDAsync_v2(dst, src, row, raw.stream),
                        "cuMemcpyDtoDAsync",
                    )?;
                }
                if let Some(dn) = down_local {
                    let theirs = Block::of(rank + 1, size, o.ny, nx);
                    let dst = raw.peer_bufs[dn] + (d * theirs.grid_len * 4) as u64;
                    let src = raw.buf + (d * grid + block.rows * row) as u64;
                    ck(
                        sys::cuMemcpyDtoDAsync_v2(dst, src, row, raw.stream),
                        "cuMemcpyDtoDAsync",
                    )?;
                }
                ck(sys::cuEventRecord(raw.event, raw.stream), "cuEventRecord")?;
                node.barrier();
                for p in [up_local, down_local].into_iter().flatten() {
                    ck(
                        sys::cuStreamWaitEvent(raw.stream, raw.peer_events[p], 0),
                        "cuStreamWaitEvent",
                    )?;
                }
                ck(sys::cuStreamSynchronize(raw.stream), "cuStreamSynchronize")
            }
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let reps = o.steps.max(50);
        for step in 0..reps + 5 {
            let d = step % 2;
            let ours_first = step % 2 == 0;
            for pass in 0..2 {
                let t = Instant::now();
                if (pass == 0) == ours_first {
                    intra_exchange(ranks, q, buffer, o, d)?;
                    if step >= 5 {
                        ours.push(t.elapsed().as_secs_f64());
                    }
                } else {
                    raw_step(d)?;
                    if step >= 5 {
                        theirs.push(t.elapsed().as_secs_f64());
                    }
                }
            }
        }
        node.barrier();
        let (ours, theirs) = (median(ours) * 1e6, median(theirs) * 1e6);
        let line = format!(
            "rank {rank}: intra-node halo exchange per step: sycl-rs {ours:.1} us, raw CUDA IPC + MPI_Barrier {theirs:.1} us, ratio {:.3}",
            ours / theirs
        );
        for l in super::gather_text(ranks.communicator(), &line) {
            println!("{l}");
        }
        drop(raw);
        node.barrier();
        Ok(())
    }
}

fn main() -> ExitCode {
    let o = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("halo_exchange: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(universe) = mpi::initialize() else {
        eprintln!("halo_exchange: MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    match run(&o, &world) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The other ranks may be waiting for this one: end the job rather than leave them
            // to their time-outs (MPI_Finalize would wait for them).
            eprintln!("halo_exchange: rank {}: error: {e}", world.rank());
            world.abort(1)
        }
    }
}
