//! `bench_collectives`: `sycl::collective` between the ranks of one node, timed as
//! back-to-back operations (the wall time of a batch submitted together and waited for once,
//! per operation; the median of 7 batches), beside what the same run measures of the raw
//! alternative: on the native CPU Open MPI's `MPI_Allreduce` (shared memory) over host memory,
//! its batches taking turns with ours (`ratio_to_mpi`: the median of the batches' ratios);
//! on GPUs the NCCL and torch `symm_mem` figures come from `collectives_anchor.py` run in the
//! same device call (`scripts/gpu-test.sh`).
//!
//! Run under MPI, one rank per device:
//! `mpirun -np 2 target/release/deps/collectives-* [--device cuda] [--quick] [--graph]
//! [--auto] [--sizes a,b,..] [--buffer-bytes N] [--push-max-bytes N] [--kernels]`
//! (`cargo bench -p sycl-rs --features mpi --bench collectives --no-run` builds it). Rank 0
//! prints one JSON line per row: operation, algorithm, dtype, bytes, our per-op time in us,
//! the bus bandwidth (nccl-tests' definition), and on the native CPU `mpi_us` and the ratio.

use std::time::{Duration, Instant};

use mpi::traits::*;
use sycl::collective::{Algorithm, Element, ReduceOp, Team, TeamOptions};
use sycl::half::bf16;
use sycl::ranks::{DeviceChoice, Ranks, RanksOptions};
use sycl::{Device, Queue};

/// Whether to time the `auto` team's operations replayed from a graph too (`--graph`).
static GRAPH: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Operations per recorded graph, as the NCCL anchor captures them (20 per CUDA graph).
const GRAPH_OPS: usize = 20;

/// Batches per row (`--reps`).
static REPS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn reps() -> usize {
    *REPS.get().unwrap_or(&7)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// Per-op microseconds of `op` run `iters` times back to back, median of REPS batches; every
/// rank meets before each batch (MPI barrier) so that batches start together.
/// Also the host's part: the per-op time of the calls alone (the batch's submission), median.
fn timed(
    world: &impl Communicator,
    iters: usize,
    mut op: impl FnMut() -> sycl::Event,
) -> (f64, f64) {
    for _ in 0..3 {
        op().wait().expect("warm-up");
    }
    let (per, submit): (Vec<f64>, Vec<f64>) =
        (0..reps()).map(|_| batch(world, iters, &mut op)).unzip();
    (median(per), median(submit))
}

/// One batch of `iters` calls of `op` after a barrier: per-op time (until the last one
/// completed) and per-op submission time, in microseconds.
fn batch(
    world: &impl Communicator,
    iters: usize,
    op: &mut impl FnMut() -> sycl::Event,
) -> (f64, f64) {
    world.barrier();
    let t = Instant::now();
    let mut last = None;
    for _ in 0..iters {
        last = Some(op());
    }
    let submit = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
    last.expect("an op").wait().expect("a batch");
    (t.elapsed().as_secs_f64() * 1e6 / iters as f64, submit)
}

/// [`timed`] of `op` beside `raw` (the raw call it is measured against), their batches taking
/// turns: every rep times a batch of `op`, then one of `raw`. This host's speed drifts by 2x
/// over seconds (a shared VM), so batches timed one after the other compare like with like
/// where two blocks of batches would not. Returns the medians of `op`'s per-op time, its
/// submission, `raw`'s per-op time, and of the reps' ratios `op / raw`.
fn timed_beside(
    world: &impl Communicator,
    iters: usize,
    mut op: impl FnMut() -> sycl::Event,
    mut raw: impl FnMut(),
) -> (f64, f64, f64, f64) {
    for _ in 0..3 {
        op().wait().expect("warm-up");
        raw();
    }
    let (mut per, mut submit, mut raw_per, mut ratio) = (vec![], vec![], vec![], vec![]);
    for _ in 0..reps() {
        let (ours, ours_submit) = batch(world, iters, &mut op);
        submit.push(ours_submit);
        world.barrier();
        let t = Instant::now();
        for _ in 0..iters {
            raw();
        }
        let theirs = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        per.push(ours);
        raw_per.push(theirs);
        ratio.push(ours / theirs);
    }
    (median(per), median(submit), median(raw_per), median(ratio))
}

/// Per-op microseconds of `op` recorded GRAPH_OPS times into one graph, replayed
/// `iters / GRAPH_OPS` times per batch (the anchor's `nccl_graph_us`: replay time / 20).
fn graph_us(
    world: &impl Communicator,
    team: &mut Team,
    iters: usize,
    op: impl Fn(&mut sycl::collective::TeamRecorder) -> sycl::Result<()>,
) -> f64 {
    let graph = team
        .record(|g| (0..GRAPH_OPS).try_for_each(|_| op(g)))
        .expect("record");
    let replays = (iters / GRAPH_OPS).max(1);
    let (us, _) = timed(world, replays, || team.replay(&graph, &[]).expect("replay"));
    us / GRAPH_OPS as f64
}

/// Operations per batch: batches of at least about a millisecond up to 64 KiB (200 batches of
/// 0.5 us ones were as long as the ranks' skew leaving the barrier, and as the native CPU's
/// scheduler ticks).
fn iters_for(bytes: usize) -> usize {
    match bytes {
        b if b <= 64 << 10 => 2000,
        b if b <= 1 << 20 => 200,
        b if b <= 32 << 20 => 50,
        _ => 10,
    }
}

#[allow(clippy::too_many_arguments)]
fn rows<T: Element + Copy>(
    world: &impl Communicator,
    ranks: &Ranks,
    q: &Queue,
    teams: &mut [(&str, Team)],
    dtype: &str,
    sizes: &[usize],
    one: T,
    native: bool,
) {
    let n = ranks.local_size() as f64;
    let me = world.rank();
    for &bytes in sizes {
        let count = bytes / std::mem::size_of::<T>();
        let iters = iters_for(bytes);
        let x = sycl::malloc_device::<T>(count, q).expect("memory");
        q.fill(&x, one, &[]).expect("fill").wait().expect("fill");
        let gathered = sycl::malloc_device::<T>(count * ranks.local_size(), q).expect("memory");
        let sym = ranks.node_buffer::<T>(q, count).expect("node buffer");
        q.fill(sym.local(), one, &[])
            .expect("fill")
            .wait()
            .expect("fill");
        let sym_out = sycl::malloc_device::<T>(count, q).expect("memory");
        for (name, team) in teams.iter_mut() {
            let mut op = || {
                team.all_reduce(&x, &x, ReduceOp::Sum, &[])
                    .expect("all_reduce")
            };
            // Beside Open MPI's MPI_Allreduce over host memory of the same size, same ranks,
            // batches taking turns with ours; `ratio_to_mpi` is the median of the batches'.
            let mpi = (native && *name == "auto").then(|| {
                let send = vec![1.0f32; bytes / 4];
                let mut recv = vec![0.0f32; bytes / 4];
                timed_beside(world, iters, &mut op, || {
                    world.all_reduce_into(
                        &send[..],
                        &mut recv[..],
                        mpi::collective::SystemOperation::sum(),
                    )
                })
            });
            let (us, submit_us) = match mpi {
                Some((us, submit_us, _, _)) => (us, submit_us),
                None => timed(world, iters, op),
            };
            let busbw = bytes as f64 * 2.0 * (n - 1.0) / n / (us * 1e-6) / 1e9;
            let mut row = format!(
                "{{\"op\": \"all_reduce\", \"algorithm\": \"{name}\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}, \"submit_us\": {submit_us:.2}"
            );
            if let Some((_, _, mpi_us, ratio)) = mpi {
                row += &format!(", \"mpi_us\": {mpi_us:.2}, \"ratio_to_mpi\": {ratio:.3}");
            }
            if me == 0 {
                println!("{row}}}");
            }
            if *name == "auto" {
                // The input in a node buffer read where it lies (no copy in), into `sym_out`.
                let (us, submit_us) = timed(world, iters, || {
                    team.all_reduce_symmetric(&sym, 0..count, &sym_out, ReduceOp::Sum, &[])
                        .expect("all_reduce_symmetric")
                });
                let busbw = bytes as f64 * 2.0 * (n - 1.0) / n / (us * 1e-6) / 1e9;
                if me == 0 {
                    println!("{{\"op\": \"all_reduce\", \"algorithm\": \"symmetric\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}, \"submit_us\": {submit_us:.2}}}");
                }
            }
            if *name == "auto" && *GRAPH.get().unwrap_or(&false) {
                // GRAPH_OPS in-place all-reduces recorded once, the graph replayed
                // iters / GRAPH_OPS times per batch: per-op time as the anchor's
                // `nccl_graph_us`.
                let graph = team
                    .record(|g| {
                        (0..GRAPH_OPS).try_for_each(|_| g.all_reduce(&x, &x, ReduceOp::Sum))
                    })
                    .expect("record");
                let replays = (iters / GRAPH_OPS).max(1);
                let (us, submit_us) =
                    timed(world, replays, || team.replay(&graph, &[]).expect("replay"));
                let (us, submit_us) = (us / GRAPH_OPS as f64, submit_us / GRAPH_OPS as f64);
                let busbw = bytes as f64 * 2.0 * (n - 1.0) / n / (us * 1e-6) / 1e9;
                if me == 0 {
                    println!("{{\"op\": \"all_reduce\", \"algorithm\": \"auto graph\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}, \"submit_us\": {submit_us:.2}, \"graph_ops\": {GRAPH_OPS}}}");
                }
            }
        }
        // all_gather (each rank contributes bytes / n) and reduce_scatter (each rank gets
        // bytes / n), beside all_reduce of the same total.
        let part = count / ranks.local_size();
        if part > 0 {
            let (_, team) = &mut teams[0];
            let src = x.range(0..part).expect("range");
            let dst = gathered.range(0..part * ranks.local_size()).expect("range");
            let (us, _) = timed(world, iters, || {
                team.all_gather(&src, &dst, &[]).expect("all_gather")
            });
            let busbw = bytes as f64 * (n - 1.0) / n / (us * 1e-6) / 1e9;
            if me == 0 {
                println!("{{\"op\": \"all_gather\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}}}");
            }
            if *GRAPH.get().unwrap_or(&false) {
                let us = graph_us(world, team, iters, |g| g.all_gather(&src, &dst));
                let busbw = bytes as f64 * (n - 1.0) / n / (us * 1e-6) / 1e9;
                if me == 0 {
                    println!("{{\"op\": \"all_gather\", \"algorithm\": \"graph\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}}}");
                }
            }
            let all = x.range(0..part * ranks.local_size()).expect("range");
            let out = gathered.range(0..part).expect("range");
            let (us, _) = timed(world, iters, || {
                team.reduce_scatter(&all, &out, ReduceOp::Sum, &[])
                    .expect("reduce_scatter")
            });
            let busbw = bytes as f64 * (n - 1.0) / n / (us * 1e-6) / 1e9;
            if me == 0 {
                println!("{{\"op\": \"reduce_scatter\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}}}");
            }
            if *GRAPH.get().unwrap_or(&false) {
                let us = graph_us(world, team, iters, |g| {
                    g.reduce_scatter(&all, &out, ReduceOp::Sum)
                });
                let busbw = bytes as f64 * (n - 1.0) / n / (us * 1e-6) / 1e9;
                if me == 0 {
                    println!("{{\"op\": \"reduce_scatter\", \"algorithm\": \"graph\", \"dtype\": \"{dtype}\", \"bytes\": {bytes}, \"us\": {us:.2}, \"busbw_GBs\": {busbw:.1}}}");
                }
            }
        }
    }
}

fn main() {
    let Some(universe) = mpi::initialize() else {
        println!("bench collectives: run it under mpirun (one rank per device)");
        return;
    };
    let world = universe.world();
    let args: Vec<String> = std::env::args().collect();
    let cuda = args.iter().any(|a| a == "--device") && args.iter().any(|a| a == "cuda");
    let quick = args.iter().any(|a| a == "--quick");
    // `--sizes 512,65536`: only these sizes (bytes); `--auto`: only the `auto` team;
    // `--reps N`: batches per row (7).
    let given: Option<Vec<usize>> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect());
    let only_auto = args.iter().any(|a| a == "--auto");
    // `--graph`: also the `auto` team's operations recorded into a graph and replayed.
    GRAPH
        .set(args.iter().any(|a| a == "--graph"))
        .expect("set once");
    // `--kernels`: team_step kernels on the native CPU too (not host steps).
    let host_steps = !args.iter().any(|a| a == "--kernels");
    if let Some(n) = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
    {
        REPS.set(n).expect("set once");
    }
    let device = if cuda {
        DeviceChoice::RoundRobin(Some("cuda:*".into()))
    } else {
        DeviceChoice::Device(Device::native_cpu())
    };
    let options = RanksOptions {
        device,
        timeout: Duration::from_secs(60),
        ..RanksOptions::default()
    };
    let ranks = Ranks::new(&world, options).expect("ranks");
    let q = Queue::in_order(ranks.device()).expect("queue");
    let sizes: Vec<usize> = if let Some(given) = given {
        given
    } else if quick {
        vec![512, 32 << 10, 256 << 10, 4 << 20]
    } else if cuda {
        vec![
            512,
            4 << 10,
            32 << 10,
            256 << 10,
            1 << 20,
            4 << 20,
            32 << 20,
            256 << 20,
        ]
    } else {
        // (2 KiB: the largest Open MPI sends in one shared-memory fast box, where it is
        // fastest against us.)
        vec![512, 2 << 10, 4 << 10, 64 << 10, 1 << 20, 64 << 20]
    };
    // `--buffer-bytes N`: the teams' halves (default: the largest size, one piece per
    // operation; `TeamOptions::default()`'s is 64 MiB).
    let big = args
        .iter()
        .position(|a| a == "--buffer-bytes")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| *sizes.iter().max().expect("sizes"));
    // `--push-max-bytes N`: the teams' `push_max_bytes` (0: every one-shot all-reduce pulls,
    // as before push steps; the same binary times both).
    let push_max_bytes = args
        .iter()
        .position(|a| a == "--push-max-bytes")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(TeamOptions::default().push_max_bytes);
    let team = |algorithm, staged_max_bytes| {
        let options = TeamOptions {
            buffer_bytes: big,
            algorithm,
            staged_max_bytes,
            push_max_bytes,
            host_steps,
            ..TeamOptions::default()
        };
        Team::new(&ranks, &q, options).expect("team")
    };
    let staged = TeamOptions::default().staged_max_bytes;
    let mut teams = vec![("auto", team(Algorithm::Auto, staged))];
    if !only_auto {
        teams.push(("one-shot copied in", team(Algorithm::OneShot, 0)));
        teams.push(("two-shot", team(Algorithm::TwoShot, staged)));
    }
    if world.rank() == 0 {
        println!(
            "# bench collectives: {} ranks on {} ({})",
            ranks.local_size(),
            ranks.device().name(),
            if cuda { "CUDA" } else { "native CPU" }
        );
    }
    rows::<f32>(&world, &ranks, &q, &mut teams, "f32", &sizes, 1.0, !cuda);
    rows::<bf16>(
        &world,
        &ranks,
        &q,
        &mut teams,
        "bf16",
        &sizes,
        bf16::ONE,
        false,
    );
}
