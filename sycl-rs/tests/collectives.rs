//! `sycl::collective` between processes (issue 32): every operation, element type and
//! reduction against a host reference, bit for bit, on every rank; odd, zero and multi-piece
//! counts; one-shot and two-shot; ranks that disagree; a rank that never arrives.
//!
//! `cargo test -p sycl-rs --features mpi --test collectives`: without an MPI launcher around
//! it, the test starts itself under `mpirun` with 2, 3 and 4 ranks, then 4 ranks as two
//! "nodes" of two (`SYCL_RS_RANKS_PER_NODE=2`: a team per node), then 2 ranks where rank 1
//! never calls. Skips with a reason when `mpirun` is missing, unless `SYCL_RS_REQUIRE_MPI=1`.
//! The device is the native CPU (`SYCL_RS_COLLECTIVES_DEVICE=cuda` picks one GPU per rank).

use std::fmt::Debug;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use sycl::collective::{Algorithm, Element, ReduceOp, Team, TeamOptions};
use sycl::half::{bf16, f16};
use sycl::ranks::{DescriptorPath, DeviceChoice, NodeKey, Ranks, RanksOptions};
use sycl::{Device, Errc, Queue};

type R = Result<(), String>;

fn e2s(e: sycl::Error) -> String {
    e.to_string()
}

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// A type the test reduces: a value per rank and index, the host's combination (the same
/// arithmetic as the kernel's), and the bits compared.
trait TestElem: Element + Debug + PartialEq {
    fn value(rank: usize, i: usize) -> Self;
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
    fn bits(self) -> u64;
}

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl TestElem for $t {
            fn value(rank: usize, i: usize) -> Self {
                ((rank as u64 + 1).wrapping_mul(1_000_003) ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) as $t
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
ints!(i32, u32, i64, u64);

macro_rules! floats {
    ($($t:ty => $from:expr, $bits:expr),*) => {$(
        impl TestElem for $t {
            fn value(rank: usize, i: usize) -> Self {
                let x = (rank as f32 + 1.0) * 0.75 + (i % 13) as f32 * 0.125 - 1.5;
                $from(x)
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
            fn bits(self) -> u64 {
                $bits(self)
            }
        }
    )*};
}
floats!(
    f32 => |x: f32| x, |v: f32| v.to_bits() as u64,
    f64 => |x: f32| x as f64 * 1.000_000_1, |v: f64| v.to_bits(),
    f16 => f16::from_f32, |v: f16| v.to_bits() as u64,
    bf16 => bf16::from_f32, |v: bf16| v.to_bits() as u64
);

fn host_reduce<T: TestElem>(op: ReduceOp, ranks: usize, i: usize) -> T {
    (1..ranks).fold(T::value(0, i), |acc, r| T::combine(op, acc, T::value(r, i)))
}

fn upload<T: TestElem>(q: &Queue, data: &[T]) -> Result<sycl::Usm<T>, String> {
    let m = sycl::malloc_device::<T>(data.len().max(1), q).map_err(e2s)?;
    if !data.is_empty() {
        q.write(&m.range(0..data.len()).map_err(e2s)?, data)
            .map_err(e2s)?;
    }
    Ok(m)
}

fn same<T: TestElem>(got: &[T], want: &[T], what: &str) -> R {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, wanted {}",
            got.len(),
            want.len()
        ));
    }
    match (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: [{i}] = {:?}, wanted {:?}",
            got[i], want[i]
        )),
    }
}

/// Every operation on `T` at `count` elements per rank.
fn operations<T: TestElem>(team: &mut Team, q: &Queue, count: usize, what: &str) -> R {
    let (me, n) = (team.rank(), team.size());
    let tq = team.queue().clone();
    let mine: Vec<T> = (0..count).map(|i| T::value(me, i)).collect();
    let range = |m: &sycl::Usm<T>, len: usize| m.range(0..len).map_err(e2s);
    for op in OPS {
        // Out of place, then in place.
        let send = upload(q, &mine)?;
        let recv = upload(q, &vec![T::value(99, 0); count])?;
        team.all_reduce(&range(&send, count)?, &range(&recv, count)?, op, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{what}: all_reduce {op:?}: {e}"))?;
        let want: Vec<T> = (0..count).map(|i| host_reduce(op, n, i)).collect();
        same(
            &tq.to_vec(&range(&recv, count)?).map_err(e2s)?,
            &want,
            &format!("{what}: all_reduce {op:?}"),
        )?;
        team.all_reduce(&range(&send, count)?, &range(&send, count)?, op, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{what}: all_reduce {op:?} in place: {e}"))?;
        same(
            &tq.to_vec(&range(&send, count)?).map_err(e2s)?,
            &want,
            &format!("{what}: all_reduce {op:?} in place"),
        )?;
        // Reduce-scatter: block d of rank r's input is value(r, d * count + i).
        let blocks: Vec<T> = (0..n * count).map(|i| T::value(me, i)).collect();
        let send = upload(q, &blocks)?;
        let recv = upload(q, &vec![T::value(99, 0); count])?;
        team.reduce_scatter(&range(&send, n * count)?, &range(&recv, count)?, op, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{what}: reduce_scatter {op:?}: {e}"))?;
        let want: Vec<T> = (0..count)
            .map(|i| host_reduce(op, n, me * count + i))
            .collect();
        same(
            &tq.to_vec(&range(&recv, count)?).map_err(e2s)?,
            &want,
            &format!("{what}: reduce_scatter {op:?}"),
        )?;
    }
    let send = upload(q, &mine)?;
    let recv = upload(q, &vec![T::value(99, 0); n * count])?;
    team.all_gather(&range(&send, count)?, &range(&recv, n * count)?, &[])
        .and_then(|e| e.wait())
        .map_err(|e| format!("{what}: all_gather: {e}"))?;
    let want: Vec<T> = (0..n * count)
        .map(|j| T::value(j / count.max(1), j % count.max(1)))
        .collect();
    same(
        &tq.to_vec(&range(&recv, n * count)?).map_err(e2s)?,
        &want,
        &format!("{what}: all_gather"),
    )?;
    let root = n - 1;
    let buf = upload(q, &mine)?;
    team.broadcast(&range(&buf, count)?, root, &[])
        .and_then(|e| e.wait())
        .map_err(|e| format!("{what}: broadcast: {e}"))?;
    let want: Vec<T> = (0..count).map(|i| T::value(root, i)).collect();
    same(
        &tq.to_vec(&range(&buf, count)?).map_err(e2s)?,
        &want,
        &format!("{what}: broadcast"),
    )?;
    team.barrier(&[])
        .and_then(|e| e.wait())
        .map_err(|e| format!("{what}: barrier: {e}"))
}

fn every_type(team: &mut Team, q: &Queue, count: usize, what: &str) -> R {
    operations::<i32>(team, q, count, &format!("{what} i32"))?;
    operations::<u32>(team, q, count, &format!("{what} u32"))?;
    operations::<i64>(team, q, count, &format!("{what} i64"))?;
    operations::<u64>(team, q, count, &format!("{what} u64"))?;
    operations::<f32>(team, q, count, &format!("{what} f32"))?;
    operations::<f64>(team, q, count, &format!("{what} f64"))?;
    operations::<f16>(team, q, count, &format!("{what} f16"))?;
    operations::<bf16>(team, q, count, &format!("{what} bf16"))
}

/// Output overlapping the input without being it (not staged: copied in first): the result
/// is still the reduction, and all_gather's output may hold its input.
fn overlapping(team: &mut Team, q: &Queue) -> R {
    let (me, n) = (team.rank(), team.size());
    let c = 37;
    let values: Vec<f32> = (0..c + 1).map(|i| f32::value(me, i)).collect();
    let x = upload(q, &values)?;
    let (send, recv) = (x.range(0..c).map_err(e2s)?, x.range(1..c + 1).map_err(e2s)?);
    team.all_reduce(&send, &recv, ReduceOp::Sum, &[])
        .and_then(|e| e.wait())
        .map_err(|e| format!("overlapping all_reduce: {e}"))?;
    let want: Vec<f32> = (0..c).map(|i| host_reduce(ReduceOp::Sum, n, i)).collect();
    same(
        &team.queue().to_vec(&recv).map_err(e2s)?,
        &want,
        "overlapping all_reduce",
    )?;
    let all: Vec<f32> = (0..n * c).map(|i| f32::value(me, i % c)).collect();
    let y = upload(q, &all)?;
    let (send, recv) = (
        y.range(me * c..(me + 1) * c).map_err(e2s)?,
        y.range(0..n * c).map_err(e2s)?,
    );
    team.all_gather(&send, &recv, &[])
        .and_then(|e| e.wait())
        .map_err(|e| format!("all_gather inside its output: {e}"))?;
    let want: Vec<f32> = (0..n * c).map(|j| f32::value(j / c, j % c)).collect();
    same(
        &team.queue().to_vec(&recv).map_err(e2s)?,
        &want,
        "all_gather inside its output",
    )
}

/// Operations whose dependencies are pending, and operations issued back to back without
/// waits: on the native CPU these run as host tasks of the team queue (not on the calling
/// thread), after their dependencies and in order; a host borrow of the output waits for them
/// (`host_steps`: this rank's team runs host steps; a kernel's argument views refuse borrows).
fn ordering(team: &mut Team, q: &Queue, host_steps: bool) -> R {
    let n = team.size() as u64;
    let c = 300;
    let x = upload(q, &vec![0u64; c])?;
    let range = x.range(0..c).map_err(e2s)?;
    // The input is written only after a 30 ms host task: the all-reduce must wait for it.
    let gate = q
        .host_task(&[], || std::thread::sleep(Duration::from_millis(30)))
        .map_err(e2s)?;
    let filled = q.fill(&range, 3u64, &[&gate]).map_err(e2s)?;
    let mut last = team
        .all_reduce(&range, &range, ReduceOp::Sum, &[&filled])
        .map_err(|e| format!("all_reduce after a pending fill: {e}"))?;
    // Four more in place, back to back, each after the last: 3 n^5 in the end.
    for _ in 0..4 {
        last = team
            .all_reduce(&range, &range, ReduceOp::Sum, &[&last])
            .map_err(|e| format!("chained all_reduce: {e}"))?;
    }
    let want = vec![3 * n.pow(5); c];
    if host_steps {
        // A host borrow waits for the commands that write the memory, the last host task
        // too (no wait on the event first).
        let got = x.as_slice().map_err(e2s)?[..c].to_vec();
        same(
            &got,
            &want,
            "chained all_reduce, read through a host borrow",
        )?;
    }
    last.wait()
        .map_err(|e| format!("chained all_reduce: {e}"))?;
    same(
        &team.queue().to_vec(&range).map_err(e2s)?,
        &want,
        "chained all_reduce",
    )
}

fn wants(r: sycl::Result<()>, code: Errc, what: &str) -> R {
    match r {
        Err(e) if e.code() == code => Ok(()),
        other => Err(format!("{what}: {other:?}, wanted {code:?}")),
    }
}

/// Ranks that disagree: every rank's call fails with `Errc::Invalid`, whether the
/// difference shows in the device-side signatures (counts, roots) or in one rank's own check
/// (a wrong output length); the failed team's later calls fail too. A fresh team per case.
fn mismatches(ranks: &Ranks, q: &Queue, host_steps: bool) -> R {
    let me = ranks.local_rank();
    let x = upload(q, &vec![1.0f32; 64])?;
    let part = |len: usize| x.range(0..len).map_err(e2s);
    let options = || TeamOptions {
        buffer_bytes: 4096,
        host_steps,
        ..TeamOptions::default()
    };
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let count = if me == 0 { 10 } else { 11 };
    let r = team
        .all_reduce(&part(count)?, &part(count)?, ReduceOp::Sum, &[])
        .and_then(|e| e.wait());
    wants(r, Errc::Invalid, "all_reduce with rank 0's count differing")?;
    let r = team.barrier(&[]).and_then(|e| e.wait());
    wants(r, Errc::Invalid, "a barrier after a mismatch")?;
    drop(team);
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let recv_len = if me == 1 { 15 } else { 16 };
    let r = team
        .all_reduce(&part(16)?, &part(recv_len)?, ReduceOp::Max, &[])
        .and_then(|e| e.wait());
    wants(r, Errc::Invalid, "all_reduce with rank 1's recv too short")?;
    drop(team);
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let r = team
        .broadcast(&part(8)?, me % 2, &[])
        .and_then(|e| e.wait());
    wants(r, Errc::Invalid, "broadcast with different roots")?;
    drop(team);
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let r = if me == 0 {
        team.all_gather(&part(4)?, &part(4 * team.size())?, &[])
    } else {
        team.all_reduce(&part(4)?, &part(4)?, ReduceOp::Sum, &[])
    }
    .and_then(|e| e.wait());
    wants(
        r,
        Errc::Invalid,
        "all_gather on rank 0, all_reduce elsewhere",
    )
}

fn ranks_main() -> ExitCode {
    let Some(universe) = sycl::ranks::mpi::initialize() else {
        eprintln!("MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    use sycl::ranks::mpi::traits::Communicator;
    let world = universe.world();
    let device = match std::env::var("SYCL_RS_COLLECTIVES_DEVICE").as_deref() {
        Ok("cuda") => DeviceChoice::RoundRobin(Some("cuda:gpu".into())),
        _ => DeviceChoice::Device(Device::native_cpu()),
    };
    let node_key = match std::env::var("SYCL_RS_RANKS_PER_NODE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(k) => NodeKey::RanksPerNode(k),
        None => NodeKey::SharedMemory,
    };
    let options = RanksOptions {
        node_key,
        device,
        descriptors: DescriptorPath::Auto,
        timeout: Duration::from_secs(30),
    };
    let silent = std::env::var("SYCL_RS_TEST_SILENT_RANK").ok();
    let result = (|| -> R {
        let ranks = Ranks::new(&world, options).map_err(e2s)?;
        let q = Queue::in_order(ranks.device()).map_err(e2s)?;
        if let Some(steps) = silent {
            return silent_rank(&ranks, &q, steps == "host steps");
        }
        let forms = [
            (Algorithm::OneShot, usize::MAX, "one-shot staged"),
            (Algorithm::OneShot, 0, "one-shot copied in, vectors"),
            (Algorithm::TwoShot, 0, "two-shot"),
        ];
        // On the native CPU: host steps (the default), kernels, and both in one team (rank 0
        // on kernels, the others on host steps: one protocol). Other devices run kernels.
        let me = ranks.local_rank();
        let native = q.backend() == sycl::BackendKind::NativeCpu;
        let steps = [
            (if native { "host steps" } else { "kernels" }, true),
            ("kernels", false),
            ("rank 0 on kernels", me != 0),
        ];
        for (steps, host_steps) in steps {
            for (algorithm, staged_max_bytes, name) in forms {
                // 4 KiB halves: the larger counts run in several pieces.
                let options = TeamOptions {
                    buffer_bytes: 4096,
                    algorithm,
                    staged_max_bytes,
                    host_steps,
                    ..TeamOptions::default()
                };
                let mut team = Team::new(&ranks, &q, options).map_err(e2s)?;
                for count in [0, 1, 7, 300, 1500] {
                    let what = format!("{steps}, {name}, {count} elements,");
                    every_type(&mut team, &q, count, &what)?;
                }
                overlapping(&mut team, &q)?;
                ordering(&mut team, &q, native && host_steps)?;
            }
            if !native {
                break;
            }
        }
        mismatches(&ranks, &q, true)?;
        mismatches(&ranks, &q, me != 0)
    })();
    match result {
        Ok(()) => {
            println!("collectives: rank {} of {}: ok", world.rank(), world.size());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "collectives: rank {} of {}: FAILED: {e}",
                world.rank(),
                world.size()
            );
            ExitCode::FAILURE
        }
    }
}

/// Rank 1 forms the team and leaves without calling; rank 0's all-reduce must fail with the
/// time-out error within the team's 2 s time-out (plus the launch), not hang.
fn silent_rank(ranks: &Ranks, q: &Queue, host_steps: bool) -> R {
    let options = TeamOptions {
        timeout: Some(Duration::from_secs(2)),
        host_steps,
        ..TeamOptions::default()
    };
    let mut team = Team::new(ranks, q, options).map_err(e2s)?;
    if team.rank() == 1 {
        std::process::exit(0);
    }
    let x = upload(q, &[1.0f32; 16])?;
    let start = Instant::now();
    let r = team
        .all_reduce(&x, &x, ReduceOp::Sum, &[])
        .and_then(|e| e.wait());
    let took = start.elapsed();
    println!(
        "collectives: silent rank: rank 0 after {:.1}s: {r:?}",
        took.as_secs_f64()
    );
    wants(r, Errc::Runtime, "all_reduce with a rank that never calls")?;
    if took > Duration::from_secs(10) {
        return Err(format!("the time-out took {took:?}"));
    }
    println!("collectives: rank 0 of 2: ok");
    // The team's drop is collective: leave without it.
    std::process::exit(0)
}

fn mpirun(np: usize, env: &[(&str, &str)], extra: &[&str]) -> Result<String, String> {
    let me = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new("timeout");
    cmd.args([
        "-k",
        "5",
        "600",
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
    ])
    .args(extra)
    .args(["-np", &np.to_string()]);
    for (k, v) in env {
        cmd.args(["-x", k]).env(k, v);
    }
    let out = cmd
        .arg(&me)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map_err(|e| format!("running mpirun: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{stdout}");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(stdout)
}

fn main() -> ExitCode {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_RANK").is_some()
    {
        return ranks_main();
    }
    let required = std::env::var("SYCL_RS_REQUIRE_MPI").as_deref() == Ok("1");
    if Command::new("mpirun").arg("--version").output().is_err() {
        if required {
            eprintln!("collectives: mpirun not found, and SYCL_RS_REQUIRE_MPI=1");
            return ExitCode::FAILURE;
        }
        println!("collectives: skipped: no mpirun (install Open MPI: libopenmpi-dev openmpi-bin)");
        return ExitCode::SUCCESS;
    }
    let device = std::env::var("SYCL_RS_COLLECTIVES_DEVICE").unwrap_or_default();
    let runs: &[(usize, Option<&str>)] = &[(2, None), (3, None), (4, None), (4, Some("2"))];
    for &(np, per_node) in runs {
        let mut env = vec![("SYCL_RS_COLLECTIVES_DEVICE", device.as_str())];
        if let Some(k) = per_node {
            env.push(("SYCL_RS_RANKS_PER_NODE", k));
        }
        let start = Instant::now();
        let stdout = match mpirun(np, &env, &[]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("collectives: {e}");
                return ExitCode::FAILURE;
            }
        };
        let oks = stdout.matches(": ok").count();
        let nodes = per_node.map_or(String::new(), |k| format!(", {k} per node"));
        if oks != np {
            eprintln!("collectives: {np} ranks{nodes}: {oks} of {np} ok");
            return ExitCode::FAILURE;
        }
        println!(
            "collectives: {np} ranks{nodes}: every operation ok ({:.1}s)",
            start.elapsed().as_secs_f64()
        );
    }
    // A rank that never calls, with host steps and with kernels (other devices: kernels).
    let steps: &[&str] = match device.as_str() {
        "" => &["host steps", "kernels"],
        _ => &["kernels"],
    };
    for &steps in steps {
        let env = [
            ("SYCL_RS_COLLECTIVES_DEVICE", device.as_str()),
            ("SYCL_RS_TEST_SILENT_RANK", steps),
        ];
        // Ranks leave without MPI_Finalize: mpirun must let the job run on.
        let extra = [
            "--mca",
            "orte_allowed_exit_without_sync",
            "1",
            "--mca",
            "orte_abort_on_non_zero_status",
            "0",
        ];
        match mpirun(2, &env, &extra) {
            Ok(s) if s.contains("collectives: rank 0 of 2: ok") => {
                println!("collectives: a rank that never calls ({steps}): rank 0 failed in time");
            }
            Ok(_) => {
                eprintln!(
                    "collectives: a rank that never calls ({steps}): rank 0 did not fail in time"
                );
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("collectives: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
