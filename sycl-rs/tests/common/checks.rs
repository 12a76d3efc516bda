//! Checks shared by the collective tests (`collectives.rs` over MPI, `launch.rs` over a
//! launcher's environment): every operation, element type and reduction against a host
//! reference, bit for bit; ranks that disagree; a rank that never calls.
#![allow(dead_code)]

use std::fmt::Debug;
use std::time::{Duration, Instant};

use sycl::collective::{Element, ReduceOp, Team, TeamOptions};
use sycl::half::{bf16, f16};
use sycl::ranks::{DeviceChoice, NodeRanks};
use sycl::{Device, Errc, Queue};

pub type R = Result<(), String>;

/// The ranks' device, from `SYCL_RS_COLLECTIVES_DEVICE`: unset or empty, the native CPU;
/// `cuda`, one GPU per rank; anything else, an `ONEAPI_DEVICE_SELECTOR`-style filter (such
/// as `opencl:1`) whose devices the ranks take round-robin.
pub fn device_choice() -> DeviceChoice {
    match std::env::var("SYCL_RS_COLLECTIVES_DEVICE").as_deref() {
        Ok("cuda") => DeviceChoice::RoundRobin(Some("cuda:gpu".into())),
        Ok(filter) if !filter.is_empty() => DeviceChoice::RoundRobin(Some(filter.into())),
        _ => DeviceChoice::Device(Device::native_cpu()),
    }
}

pub fn e2s(e: sycl::Error) -> String {
    e.to_string()
}

pub const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];

/// A type the test reduces: a value per rank and index, the host's combination (the same
/// arithmetic as the kernel's), and the bits compared.
pub trait TestElem: Element + Debug + PartialEq {
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

pub fn host_reduce<T: TestElem>(op: ReduceOp, ranks: usize, i: usize) -> T {
    (1..ranks).fold(T::value(0, i), |acc, r| T::combine(op, acc, T::value(r, i)))
}

pub fn upload<T: TestElem>(q: &Queue, data: &[T]) -> Result<sycl::Usm<T>, String> {
    let m = sycl::malloc_device::<T>(data.len().max(1), q).map_err(e2s)?;
    if !data.is_empty() {
        q.write(&m.range(0..data.len()).map_err(e2s)?, data)
            .map_err(e2s)?;
    }
    Ok(m)
}

pub fn same<T: TestElem>(got: &[T], want: &[T], what: &str) -> R {
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
pub fn operations<T: TestElem>(team: &mut Team, q: &Queue, count: usize, what: &str) -> R {
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

pub fn every_type(team: &mut Team, q: &Queue, count: usize, what: &str) -> R {
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
pub fn overlapping(team: &mut Team, q: &Queue) -> R {
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

/// Operations of other element widths issued back to back without waits (bf16, a barrier,
/// f64, u32): on the native CPU with kernels, a kernel's views of the team's buffers use the
/// element's width, and views of two widths may not be live at once; such an operation must
/// still run (as host steps), never be refused.
pub fn widths(team: &mut Team, q: &Queue) -> R {
    let n = team.size();
    let c = 300;
    let halves = upload(q, &(0..c).map(|i| bf16::value(0, i)).collect::<Vec<_>>())?;
    let doubles = upload(q, &(0..c).map(|i| f64::value(0, i)).collect::<Vec<_>>())?;
    let words = upload(q, &(0..c).map(|i| u32::value(0, i)).collect::<Vec<_>>())?;
    let mut events = Vec::new();
    let mut run = |what: &str, r: sycl::Result<sycl::Event>| -> R {
        events.push(r.map_err(|e| format!("widths: {what}: {e}"))?);
        Ok(())
    };
    run(
        "bf16",
        team.all_reduce(&halves, &halves, ReduceOp::Sum, &[]),
    )?;
    run("barrier", team.barrier(&[]))?;
    run(
        "f64",
        team.all_reduce(&doubles, &doubles, ReduceOp::Sum, &[]),
    )?;
    run("u32", team.all_reduce(&words, &words, ReduceOp::Sum, &[]))?;
    run(
        "bf16 again",
        team.all_reduce(&halves, &halves, ReduceOp::Max, &[]),
    )?;
    // A graph of another width replayed while that bf16 call may still run (its launches are
    // replayed as kernels on the native CPU).
    let replayed = upload(q, &(0..c).map(|i| f64::value(0, i)).collect::<Vec<_>>())?;
    let graph = team
        .record(|g| g.all_reduce(&replayed, &replayed, ReduceOp::Max))
        .map_err(|e| format!("widths: record: {e}"))?;
    run(
        "bf16, then the f64 graph",
        team.all_reduce(&halves, &halves, ReduceOp::Max, &[]),
    )?;
    run("f64 graph", team.replay(&graph, &[]))?;
    for e in events {
        e.wait().map_err(|e| format!("widths: {e}"))?;
    }
    let tq = team.queue().clone();
    // Every rank held rank 0's values: the sum is n times them (then their maximum).
    let scaled = |v: Vec<f64>| v.into_iter().map(|x| x * n as f64).collect::<Vec<_>>();
    let want_bf16: Vec<bf16> = (0..c)
        .map(|i| (0..n).fold(bf16::ZERO, |a, _| a + bf16::value(0, i)))
        .collect();
    same(
        &tq.to_vec(&halves).map_err(e2s)?,
        &want_bf16,
        "widths: bf16",
    )?;
    let doubles_want = scaled((0..c).map(|i| f64::value(0, i)).collect());
    same(
        &tq.to_vec(&doubles).map_err(e2s)?,
        &doubles_want,
        "widths: f64",
    )?;
    // (Every rank held rank 0's values: their maximum is them.)
    same(
        &tq.to_vec(&replayed).map_err(e2s)?,
        &(0..c).map(|i| f64::value(0, i)).collect::<Vec<_>>(),
        "widths: the f64 graph",
    )?;
    let words_want: Vec<u32> = (0..c)
        .map(|i| u32::value(0, i).wrapping_mul(n as u32))
        .collect();
    same(&tq.to_vec(&words).map_err(e2s)?, &words_want, "widths: u32")
}

/// Operations whose dependencies are pending, and operations issued back to back without
/// waits: on the native CPU these run as host tasks of the team queue (not on the calling
/// thread), after their dependencies and in order; a host borrow of the output waits for them
/// (`host_steps`: this rank's team runs host steps; a kernel's argument views refuse borrows).
pub fn ordering(team: &mut Team, q: &Queue, host_steps: bool) -> R {
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

pub fn wants(r: sycl::Result<()>, code: Errc, what: &str) -> R {
    match r {
        Err(e) if e.code() == code => Ok(()),
        other => Err(format!("{what}: {other:?}, wanted {code:?}")),
    }
}

/// Ranks that form a team with halves of different sizes (the pieces and ring slots of
/// their steps would not line up): every rank's `Team::new` fails with `Errc::Invalid`.
pub fn halves_mismatch(ranks: &NodeRanks, q: &Queue) -> R {
    let options = TeamOptions {
        buffer_bytes: 4096 << ranks.local_rank(),
        ..TeamOptions::default()
    };
    match Team::new(ranks, q, options) {
        Err(e) if e.code() == Errc::Invalid => {}
        Err(e) => return Err(format!("a team of unequal halves: {e}")),
        Ok(_) => return Err("a team whose ranks' halves differ formed".to_string()),
    }
    // Pushed steps write into the peers' halves as the writer lays them out: the ranks
    // agree on which calls push.
    let options = TeamOptions {
        push_max_bytes: 1024 << ranks.local_rank(),
        ..TeamOptions::default()
    };
    match Team::new(ranks, q, options) {
        Err(e) if e.code() == Errc::Invalid => Ok(()),
        Err(e) => Err(format!("a team of unequal push_max_bytes: {e}")),
        Ok(_) => Err("a team whose ranks' push_max_bytes differ formed".to_string()),
    }
}

/// Ranks that disagree: every rank's call fails with `Errc::Invalid`, whether the
/// difference shows in the device-side signatures (counts, roots) or in one rank's own check
/// (a wrong output length); the failed team's later calls fail too. A fresh team per case.
pub fn mismatches(ranks: &NodeRanks, q: &Queue, host_steps: bool) -> R {
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
    )?;
    drop(team);
    // Counts whose steps span different numbers of epochs (rank 0's one chunk, or one push
    // step, against its peers' chunked pull: several chunks per work-group, over a GPU's 1024
    // groups from 8 MB, over a CPU's one group per core from 256 KB): a peer's word past
    // rank 0's step once read as "finished it".
    let long = if q.device().is_gpu() {
        2 << 20
    } else {
        1 << 16
    };
    let y = upload(q, &vec![1.0f32; long])?;
    for push_max_bytes in [0, TeamOptions::default().push_max_bytes] {
        let mut team = Team::new(
            ranks,
            q,
            TeamOptions {
                buffer_bytes: 4 * long + 4096,
                push_max_bytes,
                host_steps,
                ..TeamOptions::default()
            },
        )
        .map_err(e2s)?;
        let count = if me == 0 { 1000 } else { long };
        let part = y.range(0..count).map_err(e2s)?;
        let r = team
            .all_reduce(&part, &part, ReduceOp::Sum, &[])
            .and_then(|e| e.wait());
        wants(
            r,
            Errc::Invalid,
            &format!(
                "all_reduce of 1000 on rank 0, {long} elsewhere, pushing up to {push_max_bytes} B"
            ),
        )?;
        let r = team.barrier(&[]).and_then(|e| e.wait());
        wants(r, Errc::Invalid, "a barrier after steps of other spans")?;
    }
    Ok(())
}

/// Rank 1 forms the team and leaves without calling; rank 0's all-reduce must fail with the
/// time-out error within the team's 2 s time-out (plus the launch), not hang.
pub fn silent_rank(ranks: &NodeRanks, q: &Queue, host_steps: bool) -> R {
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

/// A recorded graph (`Team::record`) of five operations (an odd number of halves: the
/// recording pads it) replayed three times with new inputs each time, with eager operations
/// between replays that leave the team on an odd half: each replay's results bitwise the
/// host reference. A graph is refused by another team.
pub fn graphs(team: &mut Team, q: &Queue, other: &mut Team, what: &str) -> R {
    let (me, n) = (team.rank(), team.size());
    let tq = team.queue().clone();
    let c = 300;
    let up = |data: &[f32]| upload(q, data);
    let x = up(&vec![0.0; c])?;
    let y = up(&vec![0.0; c])?;
    let z = upload(q, &vec![bf16::ZERO; c])?;
    let g = upload(q, &vec![0i32; c])?;
    let gathered = upload(q, &vec![0i32; n * c])?;
    let b = upload(q, &vec![0u64; c])?;
    let blocks = up(&vec![0.0; n * c])?;
    let scattered = up(&vec![0.0; c])?;
    let r = |m: &sycl::Usm<f32>, len: usize| m.range(0..len).map_err(e2s);
    let graph = team
        .record(|rec| {
            rec.all_reduce(&x.range(0..c)?, &y.range(0..c)?, ReduceOp::Sum)?;
            rec.all_reduce(&z.range(0..c)?, &z.range(0..c)?, ReduceOp::Max)?;
            rec.all_gather(&g.range(0..c)?, &gathered.range(0..n * c)?)?;
            rec.broadcast(&b.range(0..c)?, n - 1)?;
            rec.reduce_scatter(
                &blocks.range(0..n * c)?,
                &scattered.range(0..c)?,
                ReduceOp::Sum,
            )
        })
        .map_err(|e| format!("{what}: record: {e}"))?;
    if graph.operations() != 5 {
        return Err(format!(
            "{what}: a graph of {} operations, wanted 5",
            graph.operations()
        ));
    }
    let eager = up(&[1.0; 7])?;
    for round in 0..3usize {
        let off = round * 11;
        let vals = |rank: usize, len: usize| {
            (0..len)
                .map(|i| f32::value(rank, i + off))
                .collect::<Vec<_>>()
        };
        q.write(&r(&x, c)?, &vals(me, c)).map_err(e2s)?;
        let zs: Vec<bf16> = (0..c).map(|i| bf16::value(me, i + off)).collect();
        q.write(&z.range(0..c).map_err(e2s)?, &zs).map_err(e2s)?;
        let gs: Vec<i32> = (0..c).map(|i| i32::value(me, i + off)).collect();
        q.write(&g.range(0..c).map_err(e2s)?, &gs).map_err(e2s)?;
        let bs: Vec<u64> = (0..c).map(|i| u64::value(me, i + off)).collect();
        q.write(&b.range(0..c).map_err(e2s)?, &bs).map_err(e2s)?;
        q.write(&r(&blocks, n * c)?, &vals(me, n * c))
            .map_err(e2s)?;
        team.replay(&graph, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{what}: replay {round}: {e}"))?;
        let at = format!("{what}: replay {round}");
        let want: Vec<f32> = (0..c)
            .map(|i| host_reduce(ReduceOp::Sum, n, i + off))
            .collect();
        same(
            &tq.to_vec(&r(&y, c)?).map_err(e2s)?,
            &want,
            &format!("{at}: all_reduce"),
        )?;
        let want: Vec<bf16> = (0..c)
            .map(|i| host_reduce(ReduceOp::Max, n, i + off))
            .collect();
        same(
            &tq.to_vec(&z.range(0..c).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: all_reduce in place"),
        )?;
        let want: Vec<i32> = (0..n * c).map(|j| i32::value(j / c, j % c + off)).collect();
        same(
            &tq.to_vec(&gathered.range(0..n * c).map_err(e2s)?)
                .map_err(e2s)?,
            &want,
            &format!("{at}: all_gather"),
        )?;
        let want: Vec<u64> = (0..c).map(|i| u64::value(n - 1, i + off)).collect();
        same(
            &tq.to_vec(&b.range(0..c).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: broadcast"),
        )?;
        let want: Vec<f32> = (0..c)
            .map(|i| host_reduce(ReduceOp::Sum, n, me * c + i + off))
            .collect();
        same(
            &tq.to_vec(&r(&scattered, c)?).map_err(e2s)?,
            &want,
            &format!("{at}: reduce_scatter"),
        )?;
        // An eager operation of one half between replays: the next replay starts on the
        // other half unless it meets first.
        if round == 1 {
            team.all_reduce(&r(&eager, 7)?, &r(&eager, 7)?, ReduceOp::Sum, &[])
                .and_then(|e| e.wait())
                .map_err(|e| format!("{what}: eager all_reduce between replays: {e}"))?;
            same(
                &tq.to_vec(&r(&eager, 7)?).map_err(e2s)?,
                &[n as f32; 7],
                &format!("{what}: eager all_reduce"),
            )?;
        }
    }
    wants(
        other.replay(&graph, &[]).map(drop),
        Errc::Invalid,
        &format!("{what}: another team's replay of the graph"),
    )
}

/// Ranks that record different graphs (rank 0 all-reduces 10 elements, the others 11): every
/// rank's replay fails with `Errc::Invalid`, and so does the team's next operation.
pub fn graph_mismatch(ranks: &NodeRanks, q: &Queue, host_steps: bool) -> R {
    let me = ranks.local_rank();
    let x = upload(q, &vec![1.0f32; 64])?;
    let options = TeamOptions {
        buffer_bytes: 4096,
        host_steps,
        ..TeamOptions::default()
    };
    let mut team = Team::new(ranks, q, options).map_err(e2s)?;
    let count = if me == 0 { 10 } else { 11 };
    let part = x.range(0..count).map_err(e2s)?;
    let graph = team
        .record(|rec| rec.all_reduce(&part, &part, ReduceOp::Sum))
        .map_err(|e| format!("graph_mismatch: record: {e}"))?;
    let r = team.replay(&graph, &[]).and_then(|e| e.wait());
    wants(r, Errc::Invalid, "replays of graphs that differ in count")?;
    let r = team.barrier(&[]).and_then(|e| e.wait());
    wants(r, Errc::Invalid, "a barrier after a mismatched replay")
}

/// `Team::all_reduce_symmetric` over a node buffer read where it lies: f32 sums over an odd,
/// offset range and bf16 maxima over whole vectors, bitwise the host reference; then the
/// same recorded into a graph and replayed on new values.
pub fn symmetric(team: &mut Team, ranks: &NodeRanks, q: &Queue, what: &str) -> R {
    let (me, n) = (team.rank(), team.size());
    let tq = team.queue().clone();
    let len = 1001;
    let buf = ranks.node_buffer::<f32>(q, len).map_err(e2s)?;
    let halves = ranks.node_buffer::<bf16>(q, 64).map_err(e2s)?;
    let recv = upload(q, &vec![0.0f32; len])?;
    let recv16 = upload(q, &[bf16::ZERO; 64])?;
    // This rank's values of a round, into its parts.
    let fill = |off: usize| -> R {
        let values: Vec<f32> = (0..len).map(|i| f32::value(me, i + off)).collect();
        q.write(&buf.local().range(0..len).map_err(e2s)?, &values)
            .map_err(e2s)?;
        let values: Vec<bf16> = (0..64).map(|i| bf16::value(me, i + off)).collect();
        q.write(&halves.local().range(0..64).map_err(e2s)?, &values)
            .map_err(e2s)
    };
    for round in 0..2usize {
        let off = round * 5;
        fill(off)?;
        let at = format!("{what}: round {round}");
        team.all_reduce_symmetric(
            &buf,
            3..1000,
            &recv.range(0..997).map_err(e2s)?,
            ReduceOp::Sum,
            &[],
        )
        .and_then(|e| e.wait())
        .map_err(|e| format!("{at}: f32 sum: {e}"))?;
        let want: Vec<f32> = (0..997)
            .map(|i| host_reduce(ReduceOp::Sum, n, i + 3 + off))
            .collect();
        same(
            &tq.to_vec(&recv.range(0..997).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: f32 sum"),
        )?;
        team.all_reduce_symmetric(&halves, 0..64, &recv16, ReduceOp::Max, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{at}: bf16 max: {e}"))?;
        let want: Vec<bf16> = (0..64)
            .map(|i| host_reduce(ReduceOp::Max, n, i + off))
            .collect();
        same(
            &tq.to_vec(&recv16.range(0..64).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: bf16 max"),
        )?;
    }
    let graph = team
        .record(|g| {
            g.all_reduce_symmetric(&buf, 0..len, &recv, ReduceOp::Sum)?;
            g.all_reduce_symmetric(&halves, 8..40, &recv16.range(0..32)?, ReduceOp::Min)
        })
        .map_err(|e| format!("{what}: record: {e}"))?;
    for round in 2..4usize {
        let off = round * 5;
        fill(off)?;
        let at = format!("{what}: replay {round}");
        team.replay(&graph, &[])
            .and_then(|e| e.wait())
            .map_err(|e| format!("{at}: {e}"))?;
        let want: Vec<f32> = (0..len)
            .map(|i| host_reduce(ReduceOp::Sum, n, i + off))
            .collect();
        same(
            &tq.to_vec(&recv.range(0..len).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: f32 sum"),
        )?;
        let want: Vec<bf16> = (0..32)
            .map(|i| host_reduce(ReduceOp::Min, n, i + 8 + off))
            .collect();
        same(
            &tq.to_vec(&recv16.range(0..32).map_err(e2s)?).map_err(e2s)?,
            &want,
            &format!("{at}: bf16 min"),
        )?;
    }
    Ok(())
}

/// Ranks that pass different ranges of a node buffer (rank 0 from 0, the others from 1), and
/// a `recv` overlapping the range read: `Errc::Invalid` on every rank. Then the buffer's
/// collective `close`.
pub fn symmetric_misuse(ranks: &NodeRanks, q: &Queue, host_steps: bool) -> R {
    let me = ranks.local_rank();
    let options = || TeamOptions {
        buffer_bytes: 4096,
        host_steps,
        ..TeamOptions::default()
    };
    let buf = ranks.node_buffer::<f32>(q, 64).map_err(e2s)?;
    let recv = upload(q, &[0.0f32; 16])?;
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let start = if me == 0 { 0 } else { 1 };
    let r = team
        .all_reduce_symmetric(&buf, start..start + 16, &recv, ReduceOp::Sum, &[])
        .and_then(|e| e.wait());
    wants(
        r,
        Errc::Invalid,
        "all_reduce_symmetric over different ranges",
    )?;
    drop(team);
    let mut team = Team::new(ranks, q, options()).map_err(e2s)?;
    let inside = buf.local().range(8..24).map_err(e2s)?;
    let r = team
        .all_reduce_symmetric(&buf, 0..16, &inside, ReduceOp::Sum, &[])
        .and_then(|e| e.wait());
    wants(
        r,
        Errc::Invalid,
        "all_reduce_symmetric into the range it reads",
    )?;
    // Closed by every rank (collective): every rank hears that all closed.
    buf.close()
        .map_err(|e| format!("node buffer close: {}", e2s(e)))
}

/// Steps large enough to run in several chunks (`team` must have halves of at least 1 MiB),
/// where rank 0's operands start one element into their allocations, so that its steps take
/// the scalar form of `team_step` while the other ranks' take the vector form: every form
/// must split a step's elements into the same chunks, met in the same order. Three rounds on
/// shifted values, so that a chunk read before its owner copied it in shows stale values.
pub fn chunked(team: &mut Team, q: &Queue, what: &str) -> R {
    // Whole 16-byte vectors (else no rank takes the vector form), not whole work-groups of
    // them: f32 8 chunks of a work-group's block where every rank runs one group, bf16 7,
    // u64 8.
    chunked_ops::<f32>(team, q, 65_536 + 24, &format!("{what} f32"))?;
    chunked_ops::<bf16>(team, q, 65_536 + 40, &format!("{what} bf16"))?;
    chunked_ops::<u64>(team, q, 32_768 + 6, &format!("{what} u64"))
}

fn chunked_ops<T: TestElem>(team: &mut Team, q: &Queue, count: usize, what: &str) -> R {
    let (me, n) = (team.rank(), team.size());
    let tq = team.queue().clone();
    let skew = usize::from(me == 0);
    // `count` elements from `skew` on, holding rank r's values shifted by `shift`.
    let operand = |r: usize, shift: usize, len: usize| -> Result<sycl::Usm<T>, String> {
        let values: Vec<T> = (0..skew + len)
            .map(|i| T::value(r, (i + shift).wrapping_sub(skew)))
            .collect();
        upload(q, &values)
    };
    let range = |m: &sycl::Usm<T>, len: usize| m.range(skew..skew + len).map_err(e2s);
    let read = |m: &sycl::Usm<T>, len: usize| tq.to_vec(&range(m, len)?).map_err(e2s);
    let wait = |r: sycl::Result<sycl::Event>| r.and_then(|e| e.wait());
    for round in 0..3 {
        let shift = round * 5;
        let what = format!("{what}, {count} elements, round {round}");
        let want: Vec<T> = (0..count)
            .map(|i| host_reduce(ReduceOp::Sum, n, i + shift))
            .collect();
        let send = operand(me, shift, count)?;
        let recv = operand(99, 0, count)?;
        sum_out_and_in_place(
            team,
            &range(&send, count)?,
            &range(&recv, count)?,
            &want,
            &what,
        )?;
        let send = operand(me, shift, count)?;
        let recv = operand(99, 0, n * count)?;
        wait(team.all_gather(&range(&send, count)?, &range(&recv, n * count)?, &[]))
            .map_err(|e| format!("{what}: all_gather: {e}"))?;
        let want: Vec<T> = (0..n * count)
            .map(|j| T::value(j / count, j % count + shift))
            .collect();
        same(
            &read(&recv, n * count)?,
            &want,
            &format!("{what}: all_gather"),
        )?;
        let root = round % n;
        let buf = operand(me, shift, count)?;
        wait(team.broadcast(&range(&buf, count)?, root, &[]))
            .map_err(|e| format!("{what}: broadcast from {root}: {e}"))?;
        let want: Vec<T> = (0..count).map(|i| T::value(root, i + shift)).collect();
        same(&read(&buf, count)?, &want, &format!("{what}: broadcast"))?;
    }
    Ok(())
}

/// Calls repeated on the same memory with new values each round (with host steps, each
/// repeat runs the plan the team kept from the first call), starting on either half (a
/// barrier, one piece, between rounds moves the parity), then on memory allocated after the
/// first was dropped (often at the same address: it must be planned anew).
pub fn kept_plans(team: &mut Team, q: &Queue, what: &str) -> R {
    let (me, n) = (team.rank(), team.size());
    let tq = team.queue().clone();
    let wait = |r: sycl::Result<sycl::Event>| r.and_then(|e| e.wait());
    // 1500 f32: more than a 4 KiB half (a ring step, or two pieces two-shot).
    let (count, small) = (1500usize, 7usize);
    let values = |r: usize, shift: usize, len: usize| -> Vec<f32> {
        (0..len).map(|i| f32::value(r, i + shift)).collect()
    };
    let reduced = |shift: usize| -> Vec<f32> {
        (0..count)
            .map(|i| host_reduce(ReduceOp::Sum, n, i + shift))
            .collect()
    };
    let mut send = upload(q, &values(me, 0, count))?;
    let mut recv = upload(q, &values(99, 0, count))?;
    let part = upload(q, &values(me, 0, small))?;
    let gathered = upload(q, &values(99, 0, n * small))?;
    let buf = upload(q, &values(me, 0, small))?;
    for round in 0..6 {
        let what = format!("{what}, kept plans, round {round}");
        if round == 5 {
            // Dropped, then allocated again.
            drop((send, recv));
            send = upload(q, &values(me, round, count))?;
            recv = upload(q, &values(99, 0, count))?;
        }
        q.write(&send, &values(me, round, count)).map_err(e2s)?;
        let whole = |m: &sycl::Usm<f32>| m.range(..).map_err(e2s);
        sum_out_and_in_place(team, &whole(&send)?, &whole(&recv)?, &reduced(round), &what)?;
        q.write(&part, &values(me, round, small)).map_err(e2s)?;
        wait(team.all_gather(&part, &gathered, &[]))
            .map_err(|e| format!("{what}: all_gather: {e}"))?;
        let want: Vec<f32> = (0..n * small)
            .map(|j| f32::value(j / small, j % small + round))
            .collect();
        same(
            &tq.to_vec(&gathered).map_err(e2s)?,
            &want,
            &format!("{what}: all_gather"),
        )?;
        let root = round % n;
        q.write(&buf, &values(me, round, small)).map_err(e2s)?;
        wait(team.broadcast(&buf, root, &[]))
            .map_err(|e| format!("{what}: broadcast from {root}: {e}"))?;
        same(
            &tq.to_vec(&buf).map_err(e2s)?,
            &values(root, round, small),
            &format!("{what}: broadcast from {root}"),
        )?;
        if round % 2 == 1 {
            wait(team.barrier(&[])).map_err(|e| format!("{what}: barrier: {e}"))?;
        }
    }
    Ok(())
}

/// `all_reduce` (sum) of `send` into `recv`, then of `send` in place: each must give `want`.
fn sum_out_and_in_place<T: TestElem>(
    team: &mut Team,
    send: &sycl::UsmRange<T>,
    recv: &sycl::UsmRange<T>,
    want: &[T],
    what: &str,
) -> R {
    let tq = team.queue().clone();
    let wait = |r: sycl::Result<sycl::Event>| r.and_then(|e| e.wait());
    wait(team.all_reduce(send, recv, ReduceOp::Sum, &[]))
        .map_err(|e| format!("{what}: all_reduce: {e}"))?;
    same(
        &tq.to_vec(recv).map_err(e2s)?,
        want,
        &format!("{what}: all_reduce"),
    )?;
    wait(team.all_reduce(send, send, ReduceOp::Sum, &[]))
        .map_err(|e| format!("{what}: all_reduce in place: {e}"))?;
    same(
        &tq.to_vec(send).map_err(e2s)?,
        want,
        &format!("{what}: all_reduce in place"),
    )
}
