//! A two-layer MLP split over the ranks of a node (Megatron-style tensor parallelism), `bf16`
//! activations and weights with `f32` accumulation: `Y = relu(X W1) W2`. Each rank holds a
//! column block of `W1` and the matching row block of `W2`, computes its partial `Y`, and one
//! `sycl::collective` all-reduce (sum) after the second layer gives every rank the whole `Y`.
//! Verified on the host (the `half` crate in `f32`, the same rounding to `bf16` after each
//! layer): bit for bit against the same split computed there (each rank's partial rounded to
//! `bf16`, summed in rank order), and within 2% of the largest output against the MLP on one
//! rank (which rounds the whole sum once). Prints the time per step (the two layers and the
//! all-reduce) and the all-reduce's share.
//!
//! ```text
//! cargo build --release -p sycl-rs --features mpi --example tensor_parallel
//! mpirun -np 2 target/release/examples/tensor_parallel            # native CPU, or a GPU per rank
//! mpirun -np 2 target/release/examples/tensor_parallel --batch 64 --hidden 4096 --steps 20
//! ```

use std::process::ExitCode;
use std::time::Instant;

use mpi::traits::*;
use sycl::collective::{ReduceOp, Team, TeamOptions};
use sycl::half::bf16;
use sycl::ranks::{Ranks, RanksOptions};
use sycl::{Queue, Range};

/// `c[r][j] = act(sum_t a[r][t] * b[t][j])` for an `m x k` `a` and a `k x n` `b`, rounded to
/// `bf16`; `act` is `relu` when `relu != 0`.
#[sycl::kernel]
fn dense(a: &[bf16], b: &[bf16], c: &mut [bf16], k: usize, n: usize, relu: u32) {
    let r = global_id(0);
    let j = global_id(1);
    let mut acc = 0.0f32;
    for t in 0..k {
        acc = a[r * k + t].to_f32().mul_add(b[t * n + j].to_f32(), acc);
    }
    if relu != 0 && acc < 0.0 {
        acc = 0.0;
    }
    c[r * n + j] = bf16::from_f32(acc);
}

struct Options {
    batch: usize,
    model: usize,
    hidden: usize,
    steps: usize,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        batch: 16,
        model: 256,
        hidden: 1024,
        steps: 10,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{a} takes a number"))
        };
        match a.as_str() {
            "--batch" => o.batch = value()?,
            "--model" => o.model = value()?,
            "--hidden" => o.hidden = value()?,
            "--steps" => o.steps = value()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// A deterministic value in [-0.5, 0.5) from an index and a seed.
fn value(i: usize, seed: u64) -> f32 {
    let x = (i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
}

/// The host's MLP: `(one rank, split over ranks)`. One rank: `Y = relu(X W1) W2` with the
/// same rounding to `bf16` after each layer. Split: each rank's partial `Y` over its block of
/// the hidden units, rounded to `bf16`, summed in rank order in `bf16` (what the all-reduce
/// computes): the ranks' result bit for bit.
fn reference(
    x: &[bf16],
    w1: &[bf16],
    w2: &[bf16],
    o: &Options,
    ranks: usize,
) -> (Vec<f32>, Vec<bf16>) {
    // Rows of `a` (m x k) times columns of `b` (k x n), over the inner indices `inner`.
    let dense =
        |a: &[bf16], b: &[bf16], k: usize, n: usize, inner: std::ops::Range<usize>, relu: bool| {
            let mut c = vec![bf16::ZERO; o.batch * n];
            for r in 0..o.batch {
                for j in 0..n {
                    let mut acc = 0.0f32;
                    for t in inner.clone() {
                        acc = a[r * k + t].to_f32().mul_add(b[t * n + j].to_f32(), acc);
                    }
                    c[r * n + j] = bf16::from_f32(if relu { acc.max(0.0) } else { acc });
                }
            }
            c
        };
    let h = dense(x, w1, o.model, o.hidden, 0..o.model, true);
    let one = dense(&h, w2, o.hidden, o.model, 0..o.hidden, false);
    let part = o.hidden / ranks;
    let mut split = dense(&h, w2, o.hidden, o.model, 0..part, false);
    for p in 1..ranks {
        let partial = dense(&h, w2, o.hidden, o.model, p * part..(p + 1) * part, false);
        for (s, v) in split.iter_mut().zip(partial) {
            *s += v;
        }
    }
    (one.iter().map(|v| v.to_f32()).collect(), split)
}

fn run(o: &Options, world: &impl Communicator) -> sycl::Result<()> {
    let ranks = Ranks::new(world, RanksOptions::default())?;
    let (me, n) = (ranks.local_rank(), ranks.local_size());
    if o.hidden % n != 0 {
        return Err(sycl::Error::invalid(format!(
            "--hidden {} is not a multiple of the {n} ranks",
            o.hidden
        )));
    }
    let part = o.hidden / n;
    let q = Queue::in_order(ranks.device())?;
    let mut team = Team::new(&ranks, &q, TeamOptions::default())?;
    // The whole weights (every rank makes the same), and this rank's blocks of them: the
    // columns [me * part, (me + 1) * part) of W1 and the same rows of W2.
    let x: Vec<bf16> = (0..o.batch * o.model)
        .map(|i| bf16::from_f32(value(i, 1)))
        .collect();
    let w1: Vec<bf16> = (0..o.model * o.hidden)
        .map(|i| bf16::from_f32(value(i, 2)))
        .collect();
    let w2: Vec<bf16> = (0..o.hidden * o.model)
        .map(|i| bf16::from_f32(value(i, 3)))
        .collect();
    let w1_mine: Vec<bf16> = (0..o.model)
        .flat_map(|r| w1[r * o.hidden + me * part..r * o.hidden + (me + 1) * part].to_vec())
        .collect();
    let w2_mine = w2[me * part * o.model..(me + 1) * part * o.model].to_vec();
    let upload = |v: &[bf16]| -> sycl::Result<sycl::Usm<bf16>> {
        let m = sycl::malloc_device::<bf16>(v.len(), &q)?;
        q.write(&m, v)?;
        Ok(m)
    };
    let (dx, dw1, dw2) = (upload(&x)?, upload(&w1_mine)?, upload(&w2_mine)?);
    let h = sycl::malloc_device::<bf16>(o.batch * part, &q)?;
    let y = sycl::malloc_device::<bf16>(o.batch * o.model, &q)?;
    let step = |team: &mut Team| -> sycl::Result<f64> {
        q.parallel_for(
            Range::d2(o.batch, part),
            &[],
            dense(&dx, &dw1, &h, o.model, part, 1),
        )?;
        let partial = q.parallel_for(
            Range::d2(o.batch, o.model),
            &[],
            dense(&h, &dw2, &y, part, o.model, 0),
        )?;
        partial.wait()?;
        let t = Instant::now();
        team.all_reduce(&y, &y, ReduceOp::Sum, &[&partial])?
            .wait()?;
        Ok(t.elapsed().as_secs_f64())
    };
    step(&mut team)?;
    let got = team.queue().to_vec(&y)?;
    let (one, split) = reference(&x, &w1, &w2, o, n);
    // Bit for bit what the split computes; then near what one rank computes: the split
    // rounds each partial to bf16 before the sum (a few bf16 ulps of the partials).
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != split[i].to_bits()) {
        return Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!(
                "tensor_parallel: Y[{i}] = {}, the host's split MLP gives {}",
                got[i], split[i]
            ),
        ));
    }
    let scale = one.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-3);
    let worst = got
        .iter()
        .zip(&one)
        .map(|(g, w)| (g.to_f32() - w).abs() / scale)
        .fold(0.0f32, f32::max);
    if worst > 0.02 {
        return Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!("tensor_parallel: differs from one rank by {worst} of the largest |Y|"),
        ));
    }
    world.barrier();
    let t0 = Instant::now();
    let mut reduce_s = 0.0;
    for _ in 0..o.steps {
        reduce_s += step(&mut team)?;
    }
    let per_step = t0.elapsed().as_secs_f64() / o.steps as f64;
    if ranks.rank() == 0 {
        println!(
            "tensor_parallel: {n} ranks on {}: batch {}, model {}, hidden {} ({} per rank), bf16",
            ranks.device().name(),
            o.batch,
            o.model,
            o.hidden,
            part
        );
        println!(
            "tensor_parallel: bit for bit the host's split MLP; within {worst:.4} of the largest |Y| of one rank's"
        );
        println!(
            "tensor_parallel: {:.1} us per step, all-reduce {:.1} us of it ({} steps)",
            per_step * 1e6,
            reduce_s / o.steps as f64 * 1e6,
            o.steps
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tensor_parallel: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(universe) = mpi::initialize() else {
        eprintln!("tensor_parallel: MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    match run(&o, &world) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tensor_parallel: rank {}: error: {e}", world.rank());
            world.abort(1)
        }
    }
}
