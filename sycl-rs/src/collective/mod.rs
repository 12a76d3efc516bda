//! Collectives between the ranks of one node on shared memory: all-reduce, all-gather,
//! reduce-scatter, broadcast and barrier (spec/collectives.md).
//!
//! A [`Team`] is the ranks of one node: a [`NodeRanks`] made by MPI
//! (`Ranks::node`, feature `mpi`) or joined from a launcher's
//! environment without MPI ([`NodeRanks::join`]: torchrun, `mpirun`). It allocates, once, a symmetric buffer
//! (every rank the same size, every rank's opened by every other rank through `ipc::memory`:
//! zero-copy over NVLink/PCIe peer access on GPUs, shared memory on the native CPU) and a
//! signal pad per rank. Each operation is enqueued on the team's in-order queue and returns
//! an [`Event`]: one kernel per step (written once with `#[sycl::kernel]`, `team_step` in
//! spec/collectives.md) copies this rank's input into its part of the symmetric buffer (small
//! inputs; large ones go in by a queue copy first), meets the peers and moves the data,
//! reading the peers' parts directly.
//!
//! The meeting is device-side: each work-group writes an epoch word into every peer's pad
//! and spins on its own, bounded (the team's time-out): a rank that dies, or never calls,
//! makes the others' events fail with `Errc::Runtime`; ranks that call with different
//! operations, types, counts or roots make every rank's event fail with `Errc::Invalid` (the
//! epoch word carries a signature of the call). Epochs are never reset. Every rank gets
//! bitwise the same result: reductions combine the ranks' values in rank order.
//!
//! Operations can also be recorded once into a [`TeamGraph`] ([`Team::record`]) and replayed
//! as one command ([`Team::replay`]): on CUDA one CUDA graph of every step's kernel, which
//! removes the launch per operation that small operations are made of.
//!
//! ```no_run
//! # fn main() -> sycl::Result<()> {
//! use sycl::collective::{ReduceOp, Team, TeamOptions};
//! // Under torchrun or mpirun (with MPI: `Team::new(&sycl::ranks::Ranks::new(..)?, ..)`).
//! let ranks = sycl::ranks::NodeRanks::from_env(Default::default())?;
//! let q = sycl::Queue::in_order(ranks.device())?;
//! let mut team = Team::new(&ranks, &q, TeamOptions::default())?;
//! let x = sycl::malloc_device::<f32>(1024, &q)?;
//! q.fill(&x, ranks.local_rank() as f32, &[])?.wait()?;
//! team.all_reduce(&x, &x, ReduceOp::Sum, &[])?.wait()?;
//! # Ok(()) }
//! ```

mod graph;
mod halves;
mod host;
mod kernels;
#[cfg(feature = "mpi")]
mod world;

pub use graph::{TeamGraph, TeamRecorder};

#[cfg(feature = "mpi")]
pub use world::WorldTeam;

use std::time::{Duration, Instant};

use bytemuck::Pod;

use crate::ranks::{NodeBuffer, NodeRanks};
use crate::usm::{AsUsmRange, UsmRange};
use crate::{Errc, Error, Event, EventStatus, Queue, QueueProperties, Range, Result, Usm};
use kernels::{team_step, MAX_RANKS, MOVE_FROM_ROOT, MOVE_GATHER, MOVE_NONE, MOVE_REDUCE};

/// The most work-groups a step launches (each has a pad slot per rank): enough loads in
/// flight to fill NVLink (64 groups read 62 GB/s on 2x H200).
const MAX_GROUPS: usize = 1024;
/// Work-items per work-group.
const GROUP: usize = 256;
// (The step kernels require it: `reqd_work_group_size(256)` in kernels.rs.)
const _: () = assert!(GROUP == 256);
/// A pad's slots for one parity of steps: one per work-group and rank.
const PAD_SLOTS: usize = MAX_GROUPS * MAX_RANKS;
/// Pad words per rank: the slots of steps whose first epoch is even, those of steps whose
/// first epoch is odd (every step spans an odd number of epochs, so consecutive steps
/// alternate: `Team::step`), then a graph replay's epoch base (`BASE_WORD`), then the
/// poison word.
const PAD_WORDS: usize = 2 * PAD_SLOTS + 2;
/// The pad word where a replay of a [`TeamGraph`] leaves its epoch base for its steps.
const BASE_WORD: usize = PAD_WORDS - 2;
/// Elements after a push step's inbox that its unused slot arguments view (`MAX_RANKS - 1`
/// of the largest item, `[T; 8]`).
const PUSH_SPARE: usize = (MAX_RANKS - 1) * 8;

/// How values combine in [`Team::all_reduce`] and [`Team::reduce_scatter`]. Integers wrap;
/// floats are IEEE (halves rounded after each operation); `Min`/`Max` on floats are Rust's
/// `min`/`max` (a NaN loses to a number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `a + b`.
    Sum,
    /// `a * b`.
    Prod,
    /// `a.min(b)`.
    Min,
    /// `a.max(b)`.
    Max,
}

impl ReduceOp {
    fn code(self) -> u32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
        }
    }
}

/// Which all-reduce algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// One-shot up to [`TeamOptions::one_shot_max_bytes`], two-shot above.
    Auto,
    /// Every rank reads every peer's whole input and reduces all of it: one step, `n - 1`
    /// times the data read per rank.
    OneShot,
    /// Reduce-scatter (each rank reduces one `1/n` slice, reading it from every peer), then
    /// all-gather of the slices: two steps, about twice the data read per rank, whatever `n`.
    TwoShot,
}

/// Options of [`Team::new`].
#[derive(Clone, Debug)]
pub struct TeamOptions {
    /// Bytes of each of the two halves of a rank's part of the symmetric buffer (rounded up
    /// to 16 bytes; at least 16; the same on every rank). One-shot all-reduces, all-gathers
    /// and broadcasts larger than a half stream through it (two chunk slots per work-group,
    /// one meeting per slot's worth); two-shot all-reduces and reduce-scatters run in pieces
    /// of it. The default, 64 MiB (128 MiB per rank, against the 840 MiB NCCL took on each
    /// of 2x H200), lets a 256 MiB all-reduce stream in 8 rounds at NCCL's bus bandwidth;
    /// 8 MiB halves reach 0.84x there (spec/collectives.md). On the native CPU the memory is
    /// shared pages, taken only as operations touch them.
    pub buffer_bytes: usize,
    /// The longest a rank waits for its peers in one step before its event fails with
    /// `Errc::Runtime` (`None`: the ranks' [`RanksOptions::timeout`](crate::ranks::RanksOptions)).
    pub timeout: Option<Duration>,
    /// The all-reduce algorithm.
    pub algorithm: Algorithm,
    /// [`Algorithm::Auto`] runs one-shot up to this many bytes (with more than two ranks:
    /// two ranks read as much from each other either way).
    pub one_shot_max_bytes: usize,
    /// One-shot all-reduces and all-gathers up to this many bytes copy the input in inside
    /// their step, chunk by chunk while the chunk before moves (one launch; the default, for
    /// every size); larger ones copy it first (a queue copy), then run the step.
    pub staged_max_bytes: usize,
    /// One-shot all-reduces, all-gathers and reduce-scatters whose largest operand is up to
    /// this many bytes (and whose `n` slots fit a half) push instead of pulling: each rank
    /// writes its values into a slot of every rank's half and reads only its own half after
    /// the step's meeting (one step, every read local, no copy in; 2x H200: 3.6 against 4.5
    /// us per all-reduce in a graph at 512 B, and an eager reduce-scatter in one launch
    /// instead of two). Larger ones stage and pull, chunk by chunk
    /// ([`TeamOptions::staged_max_bytes`]). 256 KiB by default; 0 never pushes. The same on
    /// every rank (checked when the team forms).
    pub push_max_bytes: usize,
    /// On the native CPU, run each operation as one host task of the team's queue (its
    /// thread copies, meets and reduces; the default) rather than as `team_step` kernels.
    /// Ranks of one team may differ in this: both follow the same protocol. Other devices
    /// always run kernels.
    pub host_steps: bool,
}

impl Default for TeamOptions {
    fn default() -> Self {
        TeamOptions {
            buffer_bytes: 64 << 20,
            timeout: None,
            algorithm: Algorithm::Auto,
            one_shot_max_bytes: 256 << 10,
            staged_max_bytes: usize::MAX,
            push_max_bytes: 256 << 10,
            host_steps: true,
        }
    }
}

/// One piece of an operation: its index, its first element and length, and the half of the
/// symmetric buffer it uses.
#[derive(Clone, Copy)]
struct Piece {
    index: usize,
    start: usize,
    len: usize,
    half: usize,
}

/// How a step's elements fall to its work-groups, the same on every rank whatever form of
/// `team_step` it runs (scalar or vector, or host steps): work-group `g` owns
/// `[g * block, (g + 1) * block)`, in chunks met one after another (a staged step copies a
/// chunk while the one before moves). Counted in 16-byte vectors, whole work-groups of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Partition {
    /// Elements per 16-byte vector.
    unit: usize,
    /// Vectors per work-group.
    block_vectors: usize,
    /// Vectors per chunk.
    chunk_vectors: usize,
    /// Chunks per work-group (at least one): the step's epochs.
    chunks: usize,
}

impl Partition {
    /// The partition of `count` elements of `T` over `groups` work-groups of `GROUP` items.
    /// `chunked`: a chunk is at least 4 vectors per work-item (16 KiB per group) and a block
    /// at most 8 chunks, so that a meeting per chunk costs little beside its move; else (no
    /// rank stages the step) the block is one chunk: the group barriers around each chunk's
    /// move would only stall its loads (two-shot at 256 MiB on 2x H100 took 1381 us in 8
    /// chunks, 1320 in one).
    fn of<T>(count: usize, groups: usize, chunked: bool) -> Partition {
        let unit = 16 / std::mem::size_of::<T>();
        let per_item = count.div_ceil(unit).div_ceil(groups.max(1)).div_ceil(GROUP);
        let chunk_per_item = match chunked {
            true => per_item.div_ceil(8).max(4),
            false => per_item.max(1),
        };
        Partition {
            unit,
            block_vectors: per_item * GROUP,
            chunk_vectors: chunk_per_item * GROUP,
            chunks: per_item.div_ceil(chunk_per_item).max(1),
        }
    }

    /// The partition of a ring step ([`Move::ring`]) of `count` elements of `T` over
    /// `groups` work-groups, whose chunks fit slots of `slot_vectors` vectors: [`Partition::of`]'s
    /// chunked blocks, their chunks cut to the slot where they are larger.
    fn ring<T>(count: usize, groups: usize, slot_vectors: usize) -> Partition {
        let p = Partition::of::<T>(count, groups, true);
        let chunk_vectors = p.chunk_vectors.min(slot_vectors).max(1);
        Partition {
            chunk_vectors,
            chunks: p.block_vectors.div_ceil(chunk_vectors).max(1),
            ..p
        }
    }

    /// Work-group `g`'s chunk `c` of a ring step of `count` elements: its first and end
    /// element of the step, and where it lies in the halves (its group's slot `c % 2`, as
    /// `team_step`'s `chunk_at`). `None` past the step's end.
    fn ring_chunk(&self, g: usize, c: usize, count: usize) -> Option<(usize, usize, usize)> {
        let (block, chunk) = (
            self.block_vectors * self.unit,
            self.chunk_vectors * self.unit,
        );
        let end = ((g + 1) * block).min(count);
        let lo = g * block + c * chunk;
        if lo >= end {
            return None;
        }
        Some((lo, (lo + chunk).min(end), (2 * g + c % 2) * chunk))
    }
}

/// The element types collectives carry: `i32 u32 i64 u64 f32 f64 f16 bf16`.
pub trait Element: crate::kernel::Scalar + sealed::Sealed + Send + Sync + 'static {
    /// Its code in call signatures.
    #[doc(hidden)]
    const CODE: u32;
}

/// A step's head (`me`, `n`, `word`, `limit`), pads, work-groups and partition.
type StepShape<'a> = ((u32, u32, u64, u64), &'a [UsmRange<u64>], usize, Partition);

/// A push step's head, pads, work-groups and partition, then the move ([`Push`]), the peers'
/// slots for this rank, this rank's inbox, and the unused slot arguments' spare memory.
type PushShape<'a, T> = (
    (u32, u32, u64, u64),
    &'a [UsmRange<u64>],
    usize,
    Partition,
    &'a Push<T>,
    &'a [UsmRange<T>],
    &'a UsmRange<T>,
    &'a UsmRange<T>,
);

mod sealed {
    use super::{Move, PushShape, StepShape, Team};
    use crate::{Event, Result};

    /// What the team needs of an element type beyond [`crate::kernel::Scalar`]. Outside the
    /// crate no one can name it, so no one can call or implement its methods, whose
    /// arguments are the team's private types (hence the allowed lint).
    #[allow(private_interfaces)]
    pub trait Sealed: Sized {
        /// The kernels' `combine` on the host (host steps), bit for bit what `team_step`
        /// computes on the native CPU: ranks on host steps and on kernels agree.
        fn sum(a: Self, b: Self) -> Self;
        fn product(a: Self, b: Self) -> Self;
        fn minimum(a: Self, b: Self) -> Self;
        fn maximum(a: Self, b: Self) -> Self;
        /// The 16-bit float format of the half types, whose host reductions go through f32
        /// lanes ([`super::halves`]); `None` for the others.
        const HALF: Option<super::halves::HalfFormat>;
        /// The step as this type's `team_step_x{8,4,2}_<type>` over its 16-byte vectors where
        /// it fits (`vector_launch!`). Each type has its own vector kernels: the generic
        /// kernels they replace were translated and compiled for every width and type, two
        /// thirds of them never launched (release build 170 s against 114 s here).
        fn vector_step(
            team: &Team<'_>,
            shape: StepShape<'_>,
            m: &Move<Self>,
            deps: &[&Event],
        ) -> Result<Option<Option<Event>>>;
        /// The push step as this type's `push_step_x{8,4,2}_<type>` where it fits
        /// (`push_launch!`), per type for the same reason.
        fn vector_push(
            team: &Team<'_>,
            shape: PushShape<'_, Self>,
            deps: &[&Event],
        ) -> Result<Option<Option<Event>>>;
    }
}

macro_rules! elements {
    ($kind:ident: $($t:ty => $code:expr, $lanes:tt, $step:ident, $push:ident),*) => {$(
        impl sealed::Sealed for $t {
            elements!(@ops $kind $t);
            #[allow(private_interfaces)]
            fn vector_step(
                team: &Team<'_>,
                shape: StepShape<'_>,
                m: &Move<Self>,
                deps: &[&Event],
            ) -> Result<Option<Option<Event>>> {
                Ok(vector_launch!($t, team, $step, $lanes, shape, m, deps))
            }
            #[allow(private_interfaces)]
            fn vector_push(
                team: &Team<'_>,
                shape: PushShape<'_, Self>,
                deps: &[&Event],
            ) -> Result<Option<Option<Event>>> {
                Ok(push_launch!($t, team, $push, $lanes, shape, deps))
            }
        }
        impl Element for $t {
            const CODE: u32 = $code;
        }
    )*};
    (@ops int $t:ty) => {
        #[allow(private_interfaces)]
        const HALF: Option<halves::HalfFormat> = None;
        #[inline(always)]
        fn sum(a: Self, b: Self) -> Self { a.wrapping_add(b) }
        #[inline(always)]
        fn product(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
        #[inline(always)]
        fn minimum(a: Self, b: Self) -> Self { a.min(b) }
        #[inline(always)]
        fn maximum(a: Self, b: Self) -> Self { a.max(b) }
    };
    (@ops float $t:ty) => {
        #[allow(private_interfaces)]
        const HALF: Option<halves::HalfFormat> = None;
        #[inline(always)]
        fn sum(a: Self, b: Self) -> Self { a + b }
        #[inline(always)]
        fn product(a: Self, b: Self) -> Self { a * b }
        #[inline(always)]
        fn minimum(a: Self, b: Self) -> Self { a.min(b) }
        #[inline(always)]
        fn maximum(a: Self, b: Self) -> Self { a.max(b) }
    };
    // As the kernels: `+` and `*` are `half`'s (through f32, rounded), `min`/`max` f32's.
    (@ops half $t:ty) => {
        #[allow(private_interfaces)]
        const HALF: Option<halves::HalfFormat> = Some(<$t as halves::HalfType>::FORMAT);
        #[inline(always)]
        fn sum(a: Self, b: Self) -> Self { a + b }
        #[inline(always)]
        fn product(a: Self, b: Self) -> Self { a * b }
        #[inline(always)]
        fn minimum(a: Self, b: Self) -> Self { <$t>::from_f32(a.to_f32().min(b.to_f32())) }
        #[inline(always)]
        fn maximum(a: Self, b: Self) -> Self { <$t>::from_f32(a.to_f32().max(b.to_f32())) }
    };
}

/// What a call is, as every rank must agree on it: hashed into the low 32 bits of the epoch
/// word (FNV-1a), so that ranks that disagree fail instead of combining unrelated data.
fn signature(parts: &[u64]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// The ranks of one node ([`NodeRanks`]), with their symmetric buffer and signal pads. See the
/// [module](self) docs.
///
/// Every rank of the node must create it (collective, as `MPI_Comm_dup`) and then call the
/// same operations in the same order with the same counts, types and roots, as in MPI.
/// Dropping it waits for its queue and is collective too (like `MPI_Win_free`).
///
/// A failed operation (a mismatch, a time-out) leaves the team failed, as an aborted NCCL
/// communicator: every later operation's event fails with the same error. Form a new team.
pub struct Team<'r> {
    queue: Queue,
    me: usize,
    n: usize,
    /// Two halves of `half_words` each: operation `k` uses half `k % 2`.
    data: NodeBuffer<'r, u64>,
    half_words: usize,
    pads: NodeBuffer<'r, u64>,
    /// Distinct pads (`MAX_RANKS` of `PAD_WORDS`, one allocation: a launch admits one record
    /// for them) for the peer parameters a smaller team leaves unused (a `&mut` argument
    /// may not overlap another).
    spare_pads: Usm<u64>,
    /// Four 16-byte slots for the slice parameters a step does not use (`scratch_slot`), an
    /// allocation per alignment of the element (2, 4 and 8 bytes): a native CPU kernel views
    /// its slices with atomics of the element's width, and live views of one allocation
    /// must share theirs, so a bf16 step followed by a `u32` meeting must not share one.
    scratch: [Usm<u64>; 3],
    epoch: u32,
    operations: u64,
    /// Polls of a pad word before a kernel's wait gives up.
    limit: u64,
    /// The longest wait for a peer (host steps; the kernels poll `limit` times).
    timeout: Duration,
    /// Whether operations run as host steps (`TeamOptions::host_steps` on the native CPU).
    host: bool,
    /// While a host-step operation is being planned: its commands so far.
    plan: Option<host::Plan>,
    /// The records of the team's own memory (host steps and kept launches do not admit it
    /// per operation).
    private: std::sync::Arc<[usize]>,
    /// Host steps: the pads' addresses.
    host_pads: Option<host::Pads>,
    /// Host steps: how long a wait for a peer spins before it yields its core (none where
    /// the node's ranks outnumber the cores this process may run on, as Open MPI's
    /// `mpi_yield_when_idle` when oversubscribed).
    spin: Duration,
    /// Work-groups a step may launch: MAX_GROUPS on GPUs; on the native CPU one per core
    /// (each group's meeting is a spin of its own there, and more groups only wait longer).
    max_groups: usize,
    options: TeamOptions,
    /// Which team this is (a [`TeamGraph`] replays only on the team that recorded it).
    id: u64,
    /// While a graph is being recorded: its launches so far, and the team's live counters.
    recording: Option<graph::Recording>,
    /// Host steps: the plans of the last eager calls, run again by a call of the same
    /// operation on the same memory (at most [`KEPT_PLANS`]).
    kept: Vec<Kept>,
    /// On the native CPU with kernels: the element alignment and event of the last
    /// operation that ran as kernels ([`Team::operation`]).
    last_kernels: Option<(usize, Event)>,
    /// The launches of the eager call being kept, on devices that run kernels.
    capture: Option<Capture>,
}

/// Eager plans a host-step team keeps: a few, for the loops that repeat a handful of calls.
const KEPT_PLANS: usize = 4;

/// What makes two eager calls plan the same commands: the operation and its scalars, the
/// memory (record, address and length) and the half the call starts on.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CallKey {
    call: [u64; 4],
    memory: [(usize, u64, usize); 2],
    half: u64,
}

impl CallKey {
    /// The key of operation `call` on `a` and `b` (the half is set by `Team::operation`).
    fn new<T: bytemuck::Pod>(call: [u64; 4], a: &UsmRange<T>, b: &UsmRange<T>) -> CallKey {
        let at = |r: &UsmRange<T>| (host::record_key(&r.record), r.as_ptr(), r.len());
        CallKey {
            memory: [at(a), at(b)],
            ..CallKey::without_memory(call)
        }
    }

    /// The key of operation `call`, which names no caller memory.
    fn without_memory(call: [u64; 4]) -> CallKey {
        CallKey {
            call,
            memory: [(0, 0, 0); 2],
            half: 0,
        }
    }
}

/// An eager call's plan, kept ([`Team`]'s `kept`).
struct Kept {
    key: CallKey,
    plan: KeptWork,
    /// The team's epoch when it was planned (its meetings' epochs count from there).
    epoch: u32,
    /// The epochs and halves the call takes.
    steps: u32,
    pieces: u64,
}

/// What a kept call runs again: a host plan, or its kernels' launches (GPUs), in order.
enum KeptWork {
    Host(host::KeptPlan),
    Launches(Vec<crate::kernel::KeptLaunch>),
}

/// `team_step`'s parameter that a kept launch sets anew: `word` (the epoch and signature).
const WORD_PARAM: usize = 2;

/// The launches of an eager call being kept ([`Team::operation`]); `None` once the call
/// ran something that is not a kernel launch (a queue copy), which is then not kept.
type Capture = parking_lot::Mutex<Option<Vec<crate::kernel::KeptLaunch>>>;

/// Launches a kernel of an eager call being kept ([`Team::operation`]): checked and kept, then
/// launched; where launches are not kept (CPU devices), launched as usual, and the call not
/// kept.
fn capture_launch(
    capture: &Capture,
    private: &[usize],
    queue: &Queue,
    range: Range,
    def: &'static crate::kernel::__rt::Definition,
    args: crate::kernel::__rt::Args,
    deps: &[&Event],
) -> Result<Event> {
    // (A call that ran something else already is not kept: launched as usual.)
    if capture.lock().is_none() {
        return crate::kernel::submit_definition(queue, range, deps, def, args);
    }
    match host::keep_launch(queue, range, def, &args, Some(WORD_PARAM), private)? {
        Some(kept) => {
            let event = kept
                .launch(None, deps)
                .unwrap_or_else(|| Err(Error::new(Errc::Runtime, "team: memory freed mid-call")))?;
            if let Some(launches) = capture.lock().as_mut() {
                launches.push(kept);
            }
            Ok(event)
        }
        None => {
            *capture.lock() = None;
            crate::kernel::submit_definition(queue, range, deps, def, args)
        }
    }
}

impl std::fmt::Debug for Team<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("rank", &self.me)
            .field("size", &self.n)
            .field("half_bytes", &(self.half_words * 8))
            .field("epoch", &self.epoch)
            .finish()
    }
}

/// Launches kernel value `$k` over `$range` on the team's queue after `$deps`
/// (`Some(event)`), or, while the team records a graph, records it (`None`).
macro_rules! team_kernel {
    ($team:expr, $range:expr, $deps:expr, $k:expr) => {{
        let k = $k;
        match &$team.recording {
            Some(rec) => {
                let def = crate::kernel::definition_of(&k);
                let launch = crate::kernel::record(&$team.queue, $range, def, k.__sycl_args)?;
                rec.launches.lock().push(launch);
                None
            }
            None => match &$team.capture {
                Some(capture) => {
                    let def = crate::kernel::definition_of(&k);
                    Some(capture_launch(
                        capture,
                        &$team.private,
                        &$team.queue,
                        $range,
                        def,
                        k.__sycl_args,
                        $deps,
                    )?)
                }
                None => Some($team.queue.parallel_for($range, $deps, k)?),
            },
        }
    }};
}

/// Launches a push step ([`kernels::push_step_x1`] and its vector forms) as `kernels::$kernel` over
/// `[T; $v]` when every range it passes is whole, aligned items of that form: `Some(event)`
/// (`Some(None)` when the team records it), else `None`. `$shape`: the step's head, pads,
/// work-groups, partition, the move ([`Push`]), the peers' slots for this rank, this rank's
/// inbox, and the unused slot arguments' spare memory.
macro_rules! push_launch {
    ($t:ty, $team:expr, $kernel:ident, $v:literal, $shape:expr, $deps:expr) => {{
        let ((me, n, word, limit), pads, groups, partition, push, slots, inbox, spare): PushShape<
            '_,
            $t,
        > = $shape;
        let team: &Team = $team;
        let in_place = push.input.is_none() as u32;
        let cast = |r: &UsmRange<$t>| {
            r.cast::<[$t; $v]>()
                .ok()
                .filter(|x| x.len() * $v == r.len())
        };
        // (Views made only where every range is whole items of the form; a count of whole
        // items puts every slot at whole items too.)
        let views = || -> Option<_> {
            let mut d = slots.iter().map(cast).collect::<Option<Vec<_>>>()?;
            // Unused slot arguments: items of their own (a `&mut` may not alias another).
            for k in slots.len()..MAX_RANKS - 1 {
                d.push(cast(&spare.sub(k * $v..(k + 1) * $v).ok()?)?);
            }
            let input = match &push.input {
                Some(i) => cast(i)?,
                None => team.scratch_slot::<[$t; $v]>(0).ok()?,
            };
            Some((d, cast(inbox)?, input, cast(&push.out)?))
        };
        match (whole_items(push.count, $v) && whole_items(push.stride, $v))
            .then(views)
            .flatten()
        {
            Some((d, inbox, input, out)) => {
                let range = Range::d1(groups * GROUP).with_local([GROUP, 1, 1]);
                let block = partition.block_vectors * partition.unit / $v;
                let flags = team.relative_flag();
                Some(team_kernel!(
                    team,
                    range,
                    $deps,
                    kernels::$kernel(
                        me,
                        n,
                        word,
                        limit,
                        push.kind,
                        push.op,
                        push.count / $v,
                        push.stride / $v,
                        block,
                        flags,
                        in_place,
                        &pads[0],
                        &pads[1],
                        &pads[2],
                        &pads[3],
                        &pads[4],
                        &pads[5],
                        &pads[6],
                        &pads[7],
                        &d[0],
                        &d[1],
                        &d[2],
                        &d[3],
                        &d[4],
                        &d[5],
                        &d[6],
                        &inbox,
                        &input,
                        &out,
                    )
                ))
            }
            None => None,
        }
    }};
}

/// Launches move `m` as `kernels::$kernel` over `[T; $v]` (16 bytes) when it is a reduce or
/// gather whose offsets, counts and ranges are whole, aligned vectors: `Some(event)`; `None`
/// otherwise (the scalar step runs instead); `Some(None)` when the team records it. `$shape`:
/// the step's head, pads, work-groups and partition. This rank's values come from the stage:
/// the staged move's, or this rank's part (its half, filled by a copy before the launch).
macro_rules! vector_launch {
    ($t:ty, $team:expr, $kernel:ident, $v:literal, $shape:expr, $m:expr, $deps:expr) => {{
        let ((me, n, word, limit), pads, groups, partition): StepShape<'_> = $shape;
        let (team, m): (&Team, &Move<$t>) = ($team, $m);
        let whole = |x: usize| x % $v == 0;
        let cast = |r: &UsmRange<$t>| {
            r.cast::<[$t; $v]>()
                .ok()
                .filter(|v| v.len() * $v == r.len())
        };
        // (A gather's output must hold every rank's whole vectors: no clipping here.)
        let room = m.kind != MOVE_GATHER || m.out.len() >= (m.parts.len() - 1) * m.stride + m.count;
        let fits = (m.kind == MOVE_REDUCE || m.kind == MOVE_GATHER)
            && room
            && whole(m.first)
            && whole(m.count)
            && whole(m.stride);
        let me_at = me as usize;
        // (Views made only for a step that fits.)
        let views = || -> Option<_> {
            let slot = |w| team.scratch_slot::<[$t; $v]>(w).ok();
            let (input, stage, staged, in_place) = match &m.staged {
                None => (slot(0)?, cast(m.parts.get(me_at)?)?, 0u32, 0u32),
                Some((Some(input), stage)) => (cast(input)?, cast(stage)?, 1, 0),
                Some((None, stage)) => (slot(0)?, cast(stage)?, 1, 1),
            };
            let parts = (0..m.parts.len())
                .map(|r| match r == me_at {
                    true => slot(0),
                    false => cast(&m.parts[r]),
                })
                .collect::<Option<Vec<_>>>()?;
            Some((cast(&m.out)?, parts, input, stage, staged, in_place))
        };
        match fits.then(views).flatten() {
            Some((out, parts, input, stage, staged, in_place)) => {
                let b = |k: usize| parts.get(k).unwrap_or(&parts[0]);
                let range = Range::d1(groups * GROUP).with_local([GROUP, 1, 1]);
                let (first, count, stride) = (m.first / $v, m.count / $v, m.stride / $v);
                let flags = staged | (m.ring as u32) << 2 | team.relative_flag();
                Some(team_kernel!(
                    team,
                    range,
                    $deps,
                    kernels::$kernel(
                        me,
                        n,
                        word,
                        limit,
                        m.kind,
                        m.op,
                        first,
                        count,
                        stride,
                        partition.block_vectors,
                        partition.chunk_vectors,
                        flags,
                        in_place,
                        &pads[0],
                        &pads[1],
                        &pads[2],
                        &pads[3],
                        &pads[4],
                        &pads[5],
                        &pads[6],
                        &pads[7],
                        b(0),
                        b(1),
                        b(2),
                        b(3),
                        b(4),
                        b(5),
                        b(6),
                        b(7),
                        &input,
                        &stage,
                        &out,
                    )
                ))
            }
            None => None,
        }
    }};
}

// (After the launch macros they use: each type's code in signatures, then its elements per
// 16-byte vector.)
elements!(
    int: i32 => 1, 4, team_step_x4_i32, push_step_x4_i32,
    u32 => 2, 4, team_step_x4_u32, push_step_x4_u32,
    i64 => 3, 2, team_step_x2_i64, push_step_x2_i64,
    u64 => 4, 2, team_step_x2_u64, push_step_x2_u64
);
elements!(
    float: f32 => 5, 4, team_step_x4_f32, push_step_x4_f32,
    f64 => 6, 2, team_step_x2_f64, push_step_x2_f64
);
elements!(
    half: half::f16 => 7, 8, team_step_x8_f16, push_step_x8_f16,
    half::bf16 => 8, 8, team_step_x8_bf16, push_step_x8_bf16
);

impl<'r> Team<'r> {
    /// The team of this rank's node: collective over the node's ranks. Its queue is a new
    /// in-order queue on `queue`'s device and context (operations take and return events of
    /// that context).
    ///
    /// Errors: `Errc::FeatureNotSupported` for a node of more than 8 ranks, or a device
    /// without IPC memory and events or system-scope acquire/release atomics;
    /// `Errc::Runtime` when a peer fails or dies while the team forms (every rank gets an
    /// error).
    pub fn new<R: AsRef<NodeRanks> + ?Sized>(
        ranks: &'r R,
        queue: &Queue,
        options: TeamOptions,
    ) -> Result<Team<'r>> {
        let ranks = ranks.as_ref();
        Team::form(ranks, queue, options, |q, len| ranks.node_buffer(q, len))
    }

    /// [`Team::new`] for an owner that holds the ranks by `Arc` rather than borrowing them (a
    /// team kept in a Python object): the team keeps them alive.
    pub fn with_shared_ranks(
        ranks: std::sync::Arc<NodeRanks>,
        queue: &Queue,
        options: TeamOptions,
    ) -> Result<Team<'static>> {
        Team::form(&ranks, queue, options, |q, len| {
            ranks.node_buffer_shared(q, len)
        })
    }

    fn form(
        ranks: &NodeRanks,
        queue: &Queue,
        options: TeamOptions,
        node_buffer: impl Fn(&Queue, usize) -> Result<NodeBuffer<'r, u64>>,
    ) -> Result<Team<'r>> {
        let n = ranks.local_size();
        if n > MAX_RANKS {
            return Err(Error::new(
                Errc::FeatureNotSupported,
                format!("a team of {n} ranks: at most {MAX_RANKS} ranks share a node's buffers"),
            ));
        }
        let queue = Queue::with_context(
            queue.context(),
            queue.device(),
            QueueProperties {
                in_order: true,
                enable_profiling: false,
            },
        )?;
        // Whole 16 bytes, so that the second half is aligned for the vector steps too.
        let half_words = options.buffer_bytes.div_ceil(16).max(1) * 2;
        let data = node_buffer(&queue, 2 * half_words)?;
        let pads = node_buffer(&queue, PAD_WORDS)?;
        queue.fill(pads.local(), 0u64, &[])?.wait()?;
        let spare_pads = crate::malloc_device::<u64>(MAX_RANKS * PAD_WORDS, &queue)?;
        let scratch = [
            crate::malloc_device::<u64>(8, &queue)?,
            crate::malloc_device::<u64>(8, &queue)?,
            crate::malloc_device::<u64>(8, &queue)?,
        ];
        let timeout = options.timeout.unwrap_or(ranks.options().timeout);
        let backend = queue.device().backend();
        let host = options.host_steps && backend == sycl_backend::BackendKind::NativeCpu;
        let mine = match backend {
            sycl_backend::BackendKind::NativeCpu => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_GROUPS),
            _ => MAX_GROUPS,
        };
        // Every rank's steps meet as many work-groups and split their elements alike, so
        // the ranks agree on the fewest any of them runs (processes may be allowed different
        // numbers of cores). A peer's figure is only ever clamped to 1..=MAX_GROUPS. Their
        // halves must be as large (pieces and ring slots are cut from them): every rank
        // sees every size, and all refuse alike.
        let mut shape = (mine as u64).to_le_bytes().to_vec();
        shape.extend_from_slice(&(half_words as u64).to_le_bytes());
        shape.extend_from_slice(&(options.push_max_bytes as u64).to_le_bytes());
        let all = ranks.all_gather_fixed("team work-groups and halves", &shape)?;
        let words = |k: usize| {
            all.chunks_exact(24)
                .map(move |b| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes")))
        };
        if words(1).any(|w| w != half_words as u64) {
            return Err(Error::invalid(format!(
                "team: the ranks' buffer_bytes differ ({:?} bytes per half): every rank of a \
                 team passes the same TeamOptions::buffer_bytes",
                words(1).map(|w| w * 8).collect::<Vec<_>>()
            )));
        }
        // (Every rank pushes the same calls: a pushed step's layout is its peers' too.)
        if words(2).any(|w| w != options.push_max_bytes as u64) {
            return Err(Error::invalid(format!(
                "team: the ranks' push_max_bytes differ ({:?}): every rank of a team passes \
                 the same TeamOptions::push_max_bytes",
                words(2).collect::<Vec<_>>()
            )));
        }
        let max_groups = words(0)
            .min()
            .unwrap_or(mine as u64)
            .clamp(1, MAX_GROUPS as u64) as usize;
        let mut team = Team {
            queue,
            me: ranks.local_rank(),
            n,
            data,
            half_words,
            pads,
            spare_pads,
            scratch,
            epoch: 0,
            operations: 0,
            limit: 0,
            timeout,
            host,
            plan: None,
            private: std::sync::Arc::new([]),
            host_pads: None,
            spin: host_spin(n),
            max_groups,
            options,
            id: graph::next_team_id(),
            recording: None,
            kept: Vec::new(),
            last_kernels: None,
            capture: None,
        };
        team.private = team.private_records()?;
        // (On the native CPU a kernel team runs some operations as host steps too.)
        if backend == sycl_backend::BackendKind::NativeCpu {
            let peers = (1..n)
                .map(|k| {
                    let r = (team.me + k) % n;
                    Ok((r, team.pads.peer(r)?.full()))
                })
                .collect::<Result<Vec<_>>>()?;
            team.host_pads = Some(host::Pads::new(team.me, &team.pads.local().full(), &peers)?);
        }
        // (Host steps time their waits by the clock.)
        if !host {
            team.limit = team.calibrate(timeout)?;
        }
        // Every pad is zero before any rank's first step writes into a peer's.
        ranks.barrier()?;
        Ok(team)
    }

    /// The records of the team's own memory: every rank's parts and pads as opened here, the
    /// spare pads and the scratch.
    fn private_records(&self) -> Result<std::sync::Arc<[usize]>> {
        let mut keys: Vec<usize> = self
            .scratch
            .iter()
            .map(|s| host::record_key(&s.record))
            .collect();
        for r in 0..self.n {
            keys.push(host::record_key(&self.data.peer(r)?.record));
            keys.push(host::record_key(&self.pads.peer(r)?.record));
        }
        keys.push(host::record_key(&self.spare_pads.record));
        Ok(keys.into())
    }

    /// This rank's index in the team (its local rank).
    pub fn rank(&self) -> usize {
        self.me
    }

    /// How many ranks the team has.
    pub fn size(&self) -> usize {
        self.n
    }

    /// The team's in-order queue, where its operations run.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// The polls a wait may make within `timeout`: waits on a slot no peer writes yet, with a
    /// fixed number of polls, timed (each fails with the time-out error, which is what it
    /// measures), the number growing until a wait takes 20 ms, which launch costs no longer
    /// distort (the first, which builds the program, is not timed). Found on 2x H200: timed
    /// with the build, a 30 s time-out became a fraction of a second. (No peer writes a pad
    /// before the node barrier that ends `Team::new`.)
    fn calibrate(&mut self, timeout: Duration) -> Result<u64> {
        // The first launch builds the program (JIT on GPUs, 0.1 s and more): not a poll.
        self.timed_out_wait(16)?;
        let mut polls: u64 = 1 << 12;
        loop {
            let start = Instant::now();
            self.timed_out_wait(polls)?;
            let took = start.elapsed();
            if took >= Duration::from_millis(20) || polls >= 1 << 32 {
                let per_poll = took.as_secs_f64() / polls as f64;
                return Ok((timeout.as_secs_f64() / per_poll.max(1e-10)).clamp(1e3, 1e15) as u64);
            }
            polls *= 4;
        }
    }

    /// A wait of `polls` polls that times out: as rank 1 of 2 whose pad is a zeroed spare,
    /// on its slot 0, writing into another spare (the team's pads are left alone).
    fn timed_out_wait(&self, polls: u64) -> Result<()> {
        let word = 1u64 << 32;
        let pads = (0..MAX_RANKS)
            .map(|k| self.spare_pad(k))
            .collect::<Result<Vec<_>>>()?;
        self.queue.fill(&pads[0], 0u64, &[])?;
        let nothing = self.nothing::<u32>()?;
        let parts = Partition::of::<u32>(0, 1, false);
        let ev = self.launch::<u32>((1, 2, word, polls), &pads, 1, parts, &nothing, &[])?;
        let ev = ev.ok_or_else(|| Error::new(Errc::Runtime, "team: calibrated while recording"))?;
        match ev.wait() {
            Err(e) if e.code() == Errc::Runtime => Ok(()),
            Err(e) => Err(e),
            Ok(()) => Err(Error::new(
                Errc::Runtime,
                "team: a wait on a pad slot no peer wrote succeeded",
            )),
        }
    }

    /// The pads a step passes: this rank's, then the peers' after it in rank order, then
    /// spares.
    fn pad_args(&self) -> Result<Vec<UsmRange<u64>>> {
        let mut pads = vec![self.pads.local().full()];
        for k in 1..self.n {
            pads.push(self.pads.peer((self.me + k) % self.n)?.full());
        }
        for k in self.n..MAX_RANKS {
            pads.push(self.spare_pad(k)?);
        }
        Ok(pads)
    }

    /// Spare pad `k`.
    fn spare_pad(&self, k: usize) -> Result<UsmRange<u64>> {
        self.spare_pads.range(k * PAD_WORDS..(k + 1) * PAD_WORDS)
    }

    /// Slot `w` (0 to 3, 16 bytes each) of the private scratch as `T`s: what a step's unused
    /// slice parameters get, each role its own slot (a `&mut` may not alias another
    /// argument); 16 bytes, so that a vector step can take one as one `[T; 16 / size]`.
    fn scratch_slot<T: Pod>(&self, w: usize) -> Result<UsmRange<T>> {
        // (Elements of 2, 4 and 8 bytes, and vectors of them, align as their element.)
        let scratch = match std::mem::align_of::<T>() {
            ..=2 => &self.scratch[0],
            4 => &self.scratch[1],
            _ => &self.scratch[2],
        };
        scratch.range(2 * w..2 * w + 2)?.cast::<T>()
    }

    /// Slot `w`'s first `T`.
    fn scratch_word<T: Element>(&self, w: usize) -> Result<UsmRange<T>> {
        self.scratch_slot::<T>(w)?.sub(0..1)
    }

    /// A move of nothing (a meeting only).
    fn nothing<T: Element>(&self) -> Result<Move<T>> {
        Ok(Move {
            kind: MOVE_NONE,
            op: 0,
            root: 0,
            first: 0,
            count: 0,
            stride: 0,
            parts: vec![self.scratch_word(0)?],
            out: self.scratch_word(2)?,
            staged: None,
            chunked: false,
            ring: false,
        })
    }

    /// Half `half` of rank `rank`'s part of the symmetric buffer, as `T`.
    fn half<T: Element>(&self, rank: usize, half: usize) -> Result<UsmRange<T>> {
        let part = self.data.peer(rank)?;
        part.range(half * self.half_words..(half + 1) * self.half_words)?
            .cast::<T>()
    }

    /// Whether the team runs on the native CPU (where, and only where, it knows its pads'
    /// host addresses: host steps, and a kernel team's operations run as host steps).
    fn native_cpu(&self) -> bool {
        self.host_pads.is_some()
    }

    /// Elements of `T` in a half.
    fn half_len<T: Element>(&self) -> usize {
        self.half_words * 8 / std::mem::size_of::<T>()
    }

    /// Whether a staged step of `count` elements of `T` streams through the halves (a ring,
    /// [`Move::ring`]) rather than running in pieces of a half: where it is larger than a
    /// half, and a half holds two slots (every rank decides alike: the halves' size was
    /// agreed when the team formed). One launch, with the copy in overlapping the peers'
    /// reads throughout, where pieces paid a launch and an unoverlapped first chunk each
    /// (256 MiB in 8 MiB halves on 2x H200: 1069 us streamed, 1186 us in pieces).
    fn streams<T: Element>(&self, count: usize) -> bool {
        count > self.half_len::<T>() && self.half_words >= 4
    }

    /// `send` as the input of a ring or push step (`apart`: the step reads this rank's input
    /// itself, which may not overlap the output it writes through another argument), with
    /// the dependencies the step then takes: `send` and `deps` themselves, or, where `send`
    /// overlaps `recv`, a copy of `send` in memory of its own (freed once the operation has
    /// run) and no dependencies (the copy, on the team's in-order queue, took them).
    fn input_apart<'e, T: Element>(
        &mut self,
        apart: bool,
        send: UsmRange<T>,
        recv: &UsmRange<T>,
        deps: &[&'e Event],
    ) -> Result<(UsmRange<T>, Vec<&'e Event>)> {
        if !apart || !overlap(&send, recv) {
            return Ok((send, deps.to_vec()));
        }
        let aside = crate::malloc_device::<T>(send.len(), &self.queue)?;
        let aside = aside.range(..)?;
        self.copy_in(&send, &aside, deps)?;
        Ok((aside, Vec::new()))
    }

    /// Launches `team_step` on the team queue: `(me, n, word, limit)`, the pads (this rank's
    /// first), the work-groups (the same on every rank for one step) and the move.
    fn launch<T: Element>(
        &self,
        (me, n, word, limit): (u32, u32, u64, u64),
        pads: &[UsmRange<u64>],
        groups: usize,
        parts: Partition,
        m: &Move<T>,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let b = |k: usize| m.parts.get(k).unwrap_or(&m.parts[0]);
        let (input, stage, in_place) = match &m.staged {
            None => (self.scratch_word(0)?, self.scratch_word(1)?, false),
            Some((Some(input), stage)) => (input.clone(), stage.clone(), false),
            Some((None, stage)) => (self.scratch_word(0)?, stage.clone(), true),
        };
        let range = Range::d1(groups * GROUP).with_local([GROUP, 1, 1]);
        let flags = m.staged.is_some() as u32 | (m.ring as u32) << 2 | self.relative_flag();
        Ok(team_kernel!(
            self,
            range,
            deps,
            team_step(
                me,
                n,
                word,
                limit,
                m.kind,
                m.op,
                m.root as u32,
                m.first,
                m.count,
                m.stride,
                parts.block_vectors * parts.unit,
                parts.chunk_vectors * parts.unit,
                flags,
                in_place as u32,
                &pads[0],
                &pads[1],
                &pads[2],
                &pads[3],
                &pads[4],
                &pads[5],
                &pads[6],
                &pads[7],
                b(0),
                b(1),
                b(2),
                b(3),
                b(4),
                b(5),
                b(6),
                b(7),
                &input,
                &stage,
                &m.out,
            )
        ))
    }

    /// `team_step`'s flag for a step recorded into a graph (its epoch relative to the replay's
    /// base word), or 0.
    fn relative_flag(&self) -> u32 {
        match self.recording {
            Some(_) => 2,
            None => 0,
        }
    }

    /// One step of every rank: the next epoch, met under signature `sig`, then the move.
    /// `width`: the elements that set the work-groups (the same on every rank). Launched (its
    /// event), or planned as host commands (`None`).
    fn step<T: Element>(
        &mut self,
        sig: u32,
        width: usize,
        m: &Move<T>,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        // A work-group per 16-byte vector of each of its work-items (4 KiB): a vector step
        // (the usual form) has no idle groups, whose meetings cost as much as a busy one's
        // (256 KiB of bf16 took 8.3 us per op in a graph on 2x H200 with 512 groups, 64 busy).
        let bytes = width.saturating_mul(std::mem::size_of::<T>());
        let mut groups = bytes.div_ceil(16 * GROUP).clamp(1, self.max_groups);
        let parts = match m.ring {
            // Two slots per group in a half (every rank's halves are as large: agreed when
            // the team formed), each a whole number of vectors.
            true => {
                let half_vectors = self.half_words / 2;
                groups = groups.min(half_vectors / (2 * GROUP)).max(1);
                Partition::ring::<T>(width, groups, half_vectors / (2 * groups))
            }
            false => Partition::of::<T>(width, groups, m.chunked),
        };
        // The step's epochs: one per chunk, and one more where that makes them even, so that
        // the next step starts at the other parity and meets on the pads' other slots (a
        // peer's word for it then never hides its word for this one: `kernels::team_step`).
        let first = self.epoch.wrapping_add(1);
        self.epoch = self.epoch.wrapping_add(parts.chunks as u32 | 1);
        let word = ((first as u64) << 32) | sig as u64;
        if self.plan.is_some() {
            self.plan_step(first, sig, groups, parts, m)?;
            return Ok(None);
        }
        let pads = self.pad_args()?;
        let head = (self.me as u32, self.n as u32, word, self.limit);
        // Whole 16-byte vectors where the step allows (the same meeting and work-groups: the
        // ranks need not all take this form).
        // (The step's head, pads, work-groups and partition.)
        let shape = (head, &pads[..], groups, parts);
        match T::vector_step(self, shape, m, deps)? {
            Some(ev) => Ok(ev),
            None => self.launch(head, &pads, groups, parts, m, deps),
        }
    }

    /// Whether an operation whose largest operand is `bytes` long, with `slot` elements per
    /// rank, pushes ([`Team::push`]): the same answer on every rank (the halves and
    /// `push_max_bytes` are agreed when the team forms). Its `n` slots fit a half, so such
    /// an operation never streams ([`Team::streams`]).
    fn pushes<T: Element>(&self, bytes: usize, slot: usize) -> bool {
        slot > 0
            && bytes <= self.options.push_max_bytes
            && slot.saturating_mul(self.n).saturating_add(PUSH_SPARE) <= self.half_len::<T>()
    }

    /// An operation of one push step, on the next half (one piece: [`Team::pushes`] held).
    fn push<T: Element>(
        &mut self,
        sig: u32,
        push: &Push<T>,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        self.in_pieces(push.count, push.count, deps, |team, at, deps| {
            team.push_step(sig, push, at.half, deps)
        })
    }

    /// One push step on half `half` ([`kernels::push_step_x1`] and its vector forms, or the same as
    /// host commands of the plan): this rank's values into slot `me` of every rank's inbox
    /// (the first `n` slots of its half), the meeting under `sig`, then the move from this
    /// rank's inbox into `out` ([`Push`]). The caller checked [`Team::pushes`].
    fn push_step<T: Element>(
        &mut self,
        sig: u32,
        push: &Push<T>,
        half: usize,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let (me, n, c) = (self.me, self.n, push.count);
        let bytes = c * std::mem::size_of::<T>();
        let groups = bytes.div_ceil(16 * GROUP).clamp(1, self.max_groups);
        let parts = Partition::of::<T>(c, groups, false);
        let first = self.epoch.wrapping_add(1);
        self.epoch = first;
        let word = ((first as u64) << 32) | sig as u64;
        let own = self.half::<T>(me, half)?;
        let inbox = own.sub(0..n * c)?;
        // Slot `me` of each peer's inbox, the peers after this rank in order (as the pads).
        let slots = (1..n)
            .map(|k| {
                self.half::<T>((me + k) % n, half)?
                    .sub(me * c..(me + 1) * c)
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some(plan) = &mut self.plan {
            let (timeout, spin) = (self.timeout, self.spin);
            let pads = self
                .host_pads
                .as_ref()
                .expect("host steps: the pads' addresses");
            // (This rank's own values straight from its input: its slot is the kernels'.)
            for (k, slot) in slots.iter().enumerate() {
                plan.copy(&push.values((me + k + 1) % n)?, slot)?;
            }
            let step = host::StepEpochs { first, chunks: 1 };
            plan.meet(word, step, me, 0..groups, pads, timeout, spin)?;
            let from = |r: usize| match r == me {
                true => push.values(me),
                false => inbox.sub(r * c..(r + 1) * c),
            };
            if push.kind == MOVE_REDUCE {
                let srcs = (0..n).map(from).collect::<Result<Vec<_>>>()?;
                plan.reduce(push.op, &srcs, &push.out)?;
            } else {
                for r in 0..n {
                    plan.copy(&from(r)?, &push.out.sub(r * c..(r + 1) * c)?)?;
                }
            }
            return Ok(None);
        }
        let pads = self.pad_args()?;
        let spare = own.sub(n * c..n * c + PUSH_SPARE)?;
        let head = (me as u32, n as u32, word, self.limit);
        let shape = (
            head,
            &pads[..],
            groups,
            parts,
            push,
            &slots[..],
            &inbox,
            &spare,
        );
        // Whole 16-byte vectors where every range allows, else single elements (the same
        // meeting, work-groups and slots: the ranks need not all take one form).
        match T::vector_push(self, shape, deps)? {
            Some(ev) => Ok(ev),
            None => push_launch!(T, self, push_step_x1, 1, shape, deps)
                .ok_or_else(|| Error::new(Errc::Runtime, "team: a push step's views")),
        }
    }

    /// Step `m` as host commands of the plan, as `team_step` does it, from epoch `first`
    /// under `sig` over `groups` work-groups split as `parts` says. Outside a ring it copies
    /// this rank's values into its stage (staged), meets at the step's last epoch (every
    /// chunk's at once) and moves everything. A ring goes as a kernel's work-group does, chunk
    /// by chunk: chunk `c` into its slot, the group's meeting at `first + c`, then its move
    /// (the copy of chunk `c + 2` into the same slot follows the meeting at `first + c + 1`,
    /// where every peer has moved chunk `c`).
    fn plan_step<T: Element>(
        &mut self,
        first: u32,
        sig: u32,
        groups: usize,
        parts: Partition,
        m: &Move<T>,
    ) -> Result<()> {
        let (me, n) = (self.me, self.n);
        let (timeout, spin) = (self.timeout, self.spin);
        let pads = self
            .host_pads
            .as_ref()
            .expect("host steps: the pads' addresses");
        let plan = self.plan.as_mut().expect("an operation being planned");
        let word = |chunk: usize| ((first.wrapping_add(chunk as u32) as u64) << 32) | sig as u64;
        let step = host::StepEpochs {
            first,
            chunks: parts.chunks as u32,
        };
        // Staged: this rank's values are its input (`out` in place), copied into its half
        // before it arrives.
        let staged = m
            .staged
            .as_ref()
            .map(|(input, stage)| (input.as_ref().unwrap_or(&m.out), stage));
        if !m.ring {
            if let Some((input, stage)) = staged {
                plan.copy(
                    &input.sub(0..m.count)?,
                    &stage.sub(m.first..m.first + m.count)?,
                )?;
            }
            plan.meet(
                word(parts.chunks - 1),
                step,
                me,
                0..groups,
                pads,
                timeout,
                spin,
            )?;
            return plan_move(plan, m, me, n, (0, m.count, m.first));
        }
        // Group by group: a peer running kernels may run its groups one after another (a
        // CPU's work-groups on fewer threads), each only once the one before has ended, so
        // a meeting of all groups per chunk could wait for a group that waits for it.
        for g in 0..groups {
            for c in 0..parts.chunks {
                let chunk = parts.ring_chunk(g, c, m.count);
                if let (Some((input, stage)), Some((lo, hi, at))) = (staged, chunk) {
                    plan.copy(&input.sub(lo..hi)?, &stage.sub(at..at + hi - lo)?)?;
                }
                plan.meet(word(c), step, me, g..g + 1, pads, timeout, spin)?;
                if let Some(chunk) = chunk {
                    plan_move(plan, m, me, n, chunk)?;
                }
            }
        }
        Ok(())
    }

    /// Copies `src` into `dst` ahead of the operation's next step: a queue copy, or a host
    /// command of the plan.
    fn copy_in<T: Element>(
        &mut self,
        src: &UsmRange<T>,
        dst: &UsmRange<T>,
        deps: &[&Event],
    ) -> Result<()> {
        if let Some(plan) = &mut self.plan {
            return plan.copy(src, dst);
        }
        let kept = self.capture.as_ref().is_some_and(|c| c.lock().is_some());
        if self.recording.is_some() || kept {
            // (A graph holds kernels, and so does a kept call: the copy is one, of 16-byte
            // vectors where both ranges are whole, aligned vectors.)
            let vectors = |r: &UsmRange<T>| {
                r.cast::<[u32; 4]>()
                    .ok()
                    .filter(|v| v.byte_len() == r.byte_len())
            };
            let items = |len: usize| {
                Range::d1(len.div_ceil(GROUP).max(1) * GROUP).with_local([GROUP, 1, 1])
            };
            match (vectors(src), vectors(dst)) {
                (Some(s), Some(d)) => {
                    team_kernel!(self, items(d.len()), deps, kernels::copy_vectors(&s, &d));
                }
                _ => {
                    team_kernel!(self, items(dst.len()), deps, kernels::copy(src, dst));
                }
            }
            return Ok(());
        }
        self.queue.copy(src, dst, deps).map(|_| ())
    }

    /// Runs an operation: `body` launches its commands (and returns the last one's event) or,
    /// with host steps, plans them, submitted here as one host task after `deps`.
    ///
    /// With host steps, a call with a `key` whose plan the team kept (the same operation on
    /// the same memory, starting on the same half) submits that plan again, its meetings
    /// moved to this call's epochs: planning is most of what a small operation costs on the
    /// host (0.7 us of a 1.1 us all-reduce of 512 bytes between two ranks). Every input of
    /// the planning is in the key, so the commands are the ones planning would give.
    ///
    /// `width`: the alignment of the operation's elements (0 for a barrier, which views no
    /// data). On the native CPU a kernel views its slices with atomics of the element's
    /// width, and live views of one allocation may not mix widths: a kernel team's
    /// operation of another width than the last one that ran as kernels, while that one
    /// still runs, runs as host steps instead (the same protocol and results, no views;
    /// after the last on the team's in-order queue), rather than being refused.
    fn operation(
        &mut self,
        deps: &[&Event],
        key: Option<CallKey>,
        width: usize,
        body: impl FnOnce(&mut Self, &[&Event]) -> Result<Option<Event>>,
    ) -> Result<Event> {
        let clash = !self.host
            && width != 0
            && self.recording.is_none()
            && self.last_kernels.as_ref().is_some_and(|(w, last)| {
                *w != width && !matches!(last.status(), Ok(EventStatus::Complete))
            });
        if !self.host && !clash {
            let event = self.kernel_operation(deps, key, body)?;
            if width != 0 && self.native_cpu() {
                self.last_kernels = Some((width, event.clone()));
            }
            return Ok(event);
        }
        // (A host operation plans into `plan`; `host` itself only matters when recording,
        // which a clash never is.)
        self.host_operation(deps, key, body)
    }

    /// [`Team::operation`] as kernels. On GPUs a call with a `key` keeps its launches (checked
    /// and packed once, [`crate::kernel::KeptLaunch`]) and a repeat of it (the same operation
    /// on the same memory from the same half) launches them again with their words' epochs
    /// moved to this call's: planning and the launch checks were most of an eager small
    /// call's host time (about 10 us at 512 bytes on 2x H200, where the GPU needs 5).
    fn kernel_operation(
        &mut self,
        deps: &[&Event],
        key: Option<CallKey>,
        body: impl FnOnce(&mut Self, &[&Event]) -> Result<Option<Event>>,
    ) -> Result<Event> {
        let key = key
            .filter(|_| self.recording.is_none() && !self.native_cpu())
            .map(|k| CallKey {
                half: self.operations % 2,
                ..k
            });
        if let Some(key) = key {
            if let Some(result) = self.relaunch(key, deps) {
                return result;
            }
            self.capture = Some(parking_lot::Mutex::new(Some(Vec::new())));
        }
        let (epoch, operations) = (self.epoch, self.operations);
        let result = body(self, deps).and_then(|last| self.finish(last, deps));
        let captured = self.capture.take().and_then(|c| c.into_inner());
        let event = result?;
        if let (Some(key), Some(launches)) = (key, captured) {
            if !launches.is_empty() {
                self.keep_call(key, KeptWork::Launches(launches), (epoch, operations));
            }
        }
        Ok(event)
    }

    /// The launches kept for `key` run again after `deps` (`None`: none kept, or their
    /// memory was freed, which drops them).
    fn relaunch(&mut self, key: CallKey, deps: &[&Event]) -> Option<Result<Event>> {
        let i = self
            .kept
            .iter()
            .position(|k| k.key == key && matches!(k.plan, KeptWork::Launches(_)))?;
        let k = &self.kept[i];
        let KeptWork::Launches(launches) = &k.plan else {
            unreachable!("kept launches (found so)")
        };
        if !launches.iter().all(|l| l.alive()) {
            self.kept.swap_remove(i);
            return None;
        }
        let delta = self.epoch.wrapping_sub(k.epoch);
        self.epoch = self.epoch.wrapping_add(k.steps);
        self.operations += k.pieces;
        let mut last = None;
        for (j, launch) in launches.iter().enumerate() {
            // The word's epoch (high 32 bits) moved; its signature (low 32) as it was.
            let word = launch.varying().map(|w| {
                let epoch = ((w >> 32) as u32).wrapping_add(delta);
                (epoch as u64) << 32 | (w & 0xffff_ffff)
            });
            let after: &[&Event] = if j == 0 { deps } else { &[] };
            match launch.launch(word, after) {
                Some(Ok(event)) => last = Some(event),
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    return Some(Err(Error::new(
                        Errc::Runtime,
                        "team: memory of a kept call was freed during it",
                    )))
                }
            }
        }
        Some(last.ok_or_else(|| Error::new(Errc::Runtime, "team: a kept call without launches")))
    }

    /// [`Team::operation`] as host steps.
    fn host_operation(
        &mut self,
        deps: &[&Event],
        key: Option<CallKey>,
        body: impl FnOnce(&mut Self, &[&Event]) -> Result<Option<Event>>,
    ) -> Result<Event> {
        let key = key.map(|k| CallKey {
            half: self.operations % 2,
            ..k
        });
        let host_plan = |k: &Kept| matches!(k.plan, KeptWork::Host(_));
        if let Some(i) =
            key.and_then(|key| self.kept.iter().position(|k| k.key == key && host_plan(k)))
        {
            let k = &self.kept[i];
            let KeptWork::Host(plan) = &k.plan else {
                unreachable!("a kept host plan (found so)")
            };
            match plan.submit(self.epoch.wrapping_sub(k.epoch), &self.queue, deps) {
                Some(result) => {
                    self.epoch = self.epoch.wrapping_add(k.steps);
                    self.operations += k.pieces;
                    return result;
                }
                // (Its memory was dropped: plan the call anew.)
                None => {
                    self.kept.swap_remove(i);
                }
            }
        }
        let (epoch, operations) = (self.epoch, self.operations);
        self.plan = Some(host::Plan::new(self.private.clone(), &self.queue));
        let result = body(self, deps);
        // (A refusal submitted its own plan and returned its error.)
        let plan = self.plan.take();
        let last = result?;
        let (plan, key) = match (plan, key) {
            (Some(plan), Some(key)) => (plan, key),
            (Some(plan), None) => return plan.submit(&self.queue, deps),
            (None, _) => return self.finish(last, deps),
        };
        let (event, plan) = plan.submit_and_keep(&self.queue, deps);
        if event.is_ok() {
            self.keep_call(key, KeptWork::Host(plan), (epoch, operations));
        }
        event
    }

    /// Keeps the call that just ran from `(epoch, operations)` (the team's then) as `work`, in place of the oldest of [`KEPT_PLANS`].
    fn keep_call(&mut self, key: CallKey, work: KeptWork, (epoch, operations): (u32, u64)) {
        if self.kept.len() == KEPT_PLANS {
            self.kept.remove(0);
        }
        self.kept.push(Kept {
            key,
            plan: work,
            epoch,
            steps: self.epoch.wrapping_sub(epoch),
            pieces: self.operations - operations,
        });
    }

    /// The event of an operation: its last launch's, or that of its plan, submitted now.
    fn finish(&mut self, last: Option<Event>, deps: &[&Event]) -> Result<Event> {
        match (self.plan.take(), last) {
            (Some(plan), _) => plan.submit(&self.queue, deps),
            (None, Some(event)) => Ok(event),
            (None, None) => Err(Error::new(
                Errc::Runtime,
                "team: an operation that launched nothing",
            )),
        }
    }

    /// A step that only meets the peers (a barrier, or a call this rank refused: `sig`
    /// poisoned so that the peers fail too).
    fn meet(&mut self, sig: u32, deps: &[&Event]) -> Result<Option<Event>> {
        let nothing = self.nothing::<u32>()?;
        self.step(sig, 0, &nothing, deps)
    }

    /// Refuses a call this rank found invalid: it still meets its peers once, under a
    /// signature no valid call has, so that their events fail with `Errc::Invalid` too
    /// instead of waiting for it.
    fn refuse(&mut self, sig: u32, error: Error) -> Result<Option<Event>> {
        // While recording, the refusal ends the recording and meets the peers now, at the
        // live epoch: a peer that replays its graph meets this poisoned word first.
        if self.stop_recording().is_some() && self.host {
            self.plan = Some(host::Plan::new(self.private.clone(), &self.queue));
        }
        let poisoned = !sig;
        let met = self
            .meet(poisoned, &[])
            .and_then(|last| self.finish(last, &[]));
        if let Ok(ev) = met {
            // Its own failure is the mismatch; the caller gets the reason.
            let _ = ev.wait();
        }
        Err(error)
    }

    /// Every rank's half `half`, elements `range`, in rank order; with `staged`, this rank's
    /// is a scratch word (its values come from its input, and its half is the stage).
    fn parts<T: Element>(
        &self,
        half: usize,
        range: std::ops::Range<usize>,
        staged: bool,
    ) -> Result<Vec<UsmRange<T>>> {
        (0..self.n)
            .map(|r| match staged && r == self.me {
                true => self.scratch_word(0),
                false => self.half::<T>(r, half)?.sub(range.clone()),
            })
            .collect()
    }

    /// Runs `body` on each piece of `total` elements (pieces of `piece`, each in the next half
    /// of the symmetric buffer); the first piece's first command waits for `deps`. The
    /// operation's event is its last piece's.
    fn in_pieces(
        &mut self,
        total: usize,
        piece: usize,
        deps: &[&Event],
        mut body: impl FnMut(&mut Self, Piece, &[&Event]) -> Result<Option<Event>>,
    ) -> Result<Option<Event>> {
        let mut last = None;
        for (index, start) in (0..total).step_by(piece.max(1)).enumerate() {
            let half = (self.operations % 2) as usize;
            self.operations += 1;
            let at = Piece {
                index,
                start,
                len: piece.min(total - start),
                half,
            };
            let first: &[&Event] = if index == 0 { deps } else { &[] };
            last = body(self, at, first)?;
        }
        Ok(last)
    }

    /// `MPI_Barrier` on the device: every rank's later commands on the team queue start after
    /// every rank's earlier ones reached it.
    pub fn barrier(&mut self, deps: &[&Event]) -> Result<Event> {
        let key = CallKey::without_memory([5, 0, 0, 0]);
        self.operation(deps, Some(key), 0, |team, deps| team.barrier_commands(deps))
    }

    /// [`Team::barrier`]'s commands.
    fn barrier_commands(&mut self, deps: &[&Event]) -> Result<Option<Event>> {
        let sig = signature(&[5]);
        self.meet(sig, deps)
    }

    /// `recv[i] = send_0[i] op send_1[i] op ..` over the team's ranks in rank order, on every
    /// rank (`MPI_Allreduce`, `ncclAllReduce`); `send` and `recv` may be the same memory.
    /// One-shot or two-shot as [`TeamOptions::algorithm`] says.
    ///
    /// Errors (`Errc::Invalid`, on every rank): `send` and `recv` of different lengths, or
    /// ranks that call with different counts, types or operations. From the event:
    /// `Errc::Runtime` when a peer does not arrive within the time-out.
    pub fn all_reduce<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let key = CallKey::new([1, T::CODE as u64, op.code() as u64, 0], &send, &recv);
        self.operation(deps, Some(key), std::mem::align_of::<T>(), |team, deps| {
            team.all_reduce_commands(&send, &recv, op, deps)
        })
    }

    /// [`Team::all_reduce`]'s commands.
    fn all_reduce_commands<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let total = send.len();
        let bytes = total * std::mem::size_of::<T>();
        let n = self.n;
        // Two ranks read as much from each other either way: two-shot only adds a step.
        let two_shot = match self.options.algorithm {
            Algorithm::OneShot => false,
            Algorithm::TwoShot => true,
            Algorithm::Auto => n > 2 && bytes > self.options.one_shot_max_bytes,
        };
        // One-shot larger than a half streams through it, every rank staged.
        let ring = !two_shot && self.streams::<T>(total);
        // Small one-shot calls push: every rank writes its input into a slot of every rank's
        // half, and reads only its own half after the meeting. (The choice is in the
        // signature: ranks whose options differ fail as a mismatch.)
        let pushed = !two_shot && self.pushes::<T>(bytes, total);
        let sig = |piece: usize| {
            signature(&[
                1,
                T::CODE as u64,
                total as u64,
                op.code() as u64,
                two_shot as u64 | (pushed as u64) << 1,
                piece as u64,
            ])
        };
        if recv.len() != total {
            return self.refuse(
                sig(0),
                Error::invalid(format!(
                    "all_reduce: send has {total} elements, recv {}",
                    recv.len()
                )),
            );
        }
        if total == 0 {
            return self.meet(sig(0), deps);
        }
        let in_place = send.as_ptr() == recv.as_ptr();
        // (Ranges that overlap otherwise: the input copied aside first.)
        let (send, deps) = self.input_apart((ring || pushed) && !in_place, send, &recv, deps)?;
        if pushed {
            let push = Push {
                kind: MOVE_REDUCE,
                op: op.code(),
                count: total,
                stride: 0,
                input: (!in_place).then_some(send),
                out: recv,
            };
            return self.push(sig(0), &push, &deps);
        }
        // Staged (the input copied in by the step itself) unless the ranges overlap
        // otherwise, which the step's arguments may not.
        let staged = ring
            || (!two_shot
                && bytes <= self.options.staged_max_bytes
                && (in_place || !overlap(&send, &recv)));
        // Two-shot keeps its reduced slice after the input in the half.
        let piece = match (ring, two_shot) {
            (true, _) => total,
            (false, false) => self.half_len::<T>(),
            (false, true) => (self.half_len::<T>() * n / (n + 1)).max(1),
        };
        let op = op.code();
        self.in_pieces(total, piece, &deps, |team, at, deps| {
            let (k, off, c, half) = (at.index, at.start, at.len, at.half);
            let own = team.half::<T>(team.me, half)?;
            let input = send.sub(off..off + c)?;
            let out = recv.sub(off..off + c)?;
            if staged {
                // (A ring's chunks lie anywhere in the halves.)
                let span = if ring { team.half_len::<T>() } else { c };
                let m = Move {
                    kind: MOVE_REDUCE,
                    op,
                    root: 0,
                    first: 0,
                    count: c,
                    stride: 0,
                    parts: team.parts::<T>(half, 0..span, true)?,
                    out,
                    staged: Some(((!in_place).then_some(input), own.sub(0..span)?)),
                    chunked: true,
                    ring,
                };
                return team.step(sig(k), c, &m, deps);
            }
            team.copy_in(&input, &own.sub(0..c)?, deps)?;
            let parts = team.parts::<T>(half, 0..c, false)?;
            if !two_shot {
                // (Its peers may be staged.)
                let mut m = Move::reduce(op, 0, c, parts, out);
                m.chunked = true;
                return team.step(sig(k), c, &m, &[]);
            }
            // Reduce-scatter into each rank's slice area, then gather the slices.
            let s = c.div_ceil(n);
            let mine = (team.me * s).min(c)..((team.me + 1) * s).min(c);
            let m = Move::reduce(op, mine.start, mine.len(), parts, own.sub(c..c + s)?);
            team.step(sig(k), s, &m, &[])?;
            let slices = (0..n)
                .map(|r| team.half::<T>(r, half)?.sub(c..c + s))
                .collect::<Result<Vec<_>>>()?;
            let m = Move::gather(0, s, s, slices, out);
            let gather_sig = sig(k).rotate_left(16) ^ 0x5a5a_5a5a;
            team.step(gather_sig, s, &m, &[])
        })
    }

    /// [`Team::all_reduce`] of a symmetric buffer, read where it lies: `recv[i] =
    /// part_0[range][i] op part_1[range][i] op ..` over every rank's part of `send` (a
    /// [`NodeBuffer`] of this team's node), with no copy into the team's buffer: each rank
    /// reads its peers' parts directly (NVLink or PCIe peer reads on GPUs, shared memory on
    /// the native CPU). Every rank passes the same `range`. The event completes once every
    /// rank has finished reading this rank's part (a closing meeting), so the part may be
    /// written again after it.
    ///
    /// Errors (`Errc::Invalid`, on every rank): `range` outside the buffer, `recv` of
    /// another length or overlapping this rank's part, a buffer of another node or rank,
    /// ranks that pass different ranges, types or operations.
    pub fn all_reduce_symmetric<T: Element>(
        &mut self,
        send: &NodeBuffer<'_, T>,
        range: std::ops::Range<usize>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        self.operation(deps, None, std::mem::align_of::<T>(), |team, deps| {
            team.all_reduce_symmetric_commands(send, range, recv, op, deps)
        })
    }

    /// Every rank's part of `send` over `range`, in rank order, or why not.
    fn symmetric_parts<T: Element>(
        &self,
        send: &NodeBuffer<'_, T>,
        range: std::ops::Range<usize>,
    ) -> std::result::Result<Vec<UsmRange<T>>, String> {
        if !std::ptr::eq(send.ranks(), self.data.ranks()) {
            return Err(
                "all_reduce_symmetric: a node buffer of other ranks than this team's".to_string(),
            );
        }
        (0..self.n)
            .map(|r| send.peer(r).and_then(|p| p.range(range.clone())))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| format!("all_reduce_symmetric: range {range:?}: {e}"))
    }

    /// [`Team::all_reduce_symmetric`]'s commands.
    fn all_reduce_symmetric_commands<T: Element>(
        &mut self,
        send: &NodeBuffer<'_, T>,
        range: std::ops::Range<usize>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let parts = self.symmetric_parts(send, range.clone());
        let recv = &recv.usm_range();
        let count = range.len();
        let sig = signature(&[
            6,
            T::CODE as u64,
            range.start as u64,
            count as u64,
            op.code() as u64,
        ]);
        let problem = match &parts {
            Err(e) => Some(e.clone()),
            Ok(_) if recv.len() != count => Some(format!(
                "all_reduce_symmetric: {count} elements in range, recv has {}",
                recv.len()
            )),
            Ok(p) if count > 0 && overlap(&p[self.me], recv) => Some(
                "all_reduce_symmetric: recv overlaps this rank's part, which its peers read"
                    .to_string(),
            ),
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            return self.refuse(sig, Error::invalid(problem));
        }
        let parts = parts.expect("checked above");
        if count == 0 {
            return self.meet(sig, deps);
        }
        let m = Move::reduce(op.code(), 0, count, parts, recv.clone());
        self.step(sig, count, &m, deps)?;
        // The closing meeting: a peer may still be reading this rank's part.
        self.meet(sig.rotate_left(8) ^ 0x3c3c_3c3c, &[])
    }

    /// `recv[p * count + i] = send_p[i]` for every rank `p` (`MPI_Allgather`): `recv` holds
    /// `size() * send.len()` elements.
    ///
    /// Errors as [`Team::all_reduce`]'s.
    pub fn all_gather<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let key = CallKey::new([2, T::CODE as u64, 0, 0], &send, &recv);
        self.operation(deps, Some(key), std::mem::align_of::<T>(), |team, deps| {
            team.all_gather_commands(&send, &recv, deps)
        })
    }

    /// [`Team::all_gather`]'s commands.
    fn all_gather_commands<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let total = send.len();
        let n = self.n;
        let ring = self.streams::<T>(total);
        let pushed = self.pushes::<T>(total * n * std::mem::size_of::<T>(), total);
        let sig = |piece: usize| {
            signature(&[2, T::CODE as u64, total as u64, piece as u64, pushed as u64])
        };
        if recv.len() != total * n {
            return self.refuse(
                sig(0),
                Error::invalid(format!(
                    "all_gather: recv has {} elements, not {} ranks times send's {total}",
                    recv.len(),
                    self.n
                )),
            );
        }
        if total == 0 {
            return self.meet(sig(0), deps);
        }
        let (send, deps) = self.input_apart(ring || pushed, send, &recv, deps)?;
        if pushed {
            let push = Push {
                kind: MOVE_GATHER,
                op: 0,
                count: total,
                stride: 0,
                input: Some(send),
                out: recv,
            };
            return self.push(sig(0), &push, &deps);
        }
        let staged = ring
            || (total * std::mem::size_of::<T>() <= self.options.staged_max_bytes
                && !overlap(&send, &recv));
        let piece = if ring { total } else { self.half_len::<T>() };
        self.in_pieces(total, piece, &deps, |team, at, deps| {
            let (off, c) = (at.start, at.len);
            let own = team.half::<T>(team.me, at.half)?;
            let input = send.sub(off..off + c)?;
            // Rank p's piece lands at p * total + off: the output starts at `off`, stride
            // `total`.
            let out = recv.sub(off..)?;
            let span = if ring { team.half_len::<T>() } else { c };
            let parts = team.parts::<T>(at.half, 0..span, staged)?;
            let mut m = Move::gather(0, c, total, parts, out);
            m.chunked = true;
            m.ring = ring;
            if staged {
                m.staged = Some((Some(input), own.sub(0..span)?));
                return team.step(sig(at.index), c, &m, deps);
            }
            team.copy_in(&input, &own.sub(0..c)?, deps)?;
            team.step(sig(at.index), c, &m, &[])
        })
    }

    /// `recv[i] = send_0[me * count + i] op send_1[me * count + i] op ..` in rank order
    /// (`MPI_Reduce_scatter_block`): `send` holds `size() * recv.len()` elements.
    ///
    /// Errors as [`Team::all_reduce`]'s.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let key = CallKey::new([3, T::CODE as u64, op.code() as u64, 0], &send, &recv);
        self.operation(deps, Some(key), std::mem::align_of::<T>(), |team, deps| {
            team.reduce_scatter_commands(&send, &recv, op, deps)
        })
    }

    /// [`Team::reduce_scatter`]'s commands.
    fn reduce_scatter_commands<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        let total = recv.len();
        let n = self.n;
        let pushed = self.pushes::<T>(total * n * std::mem::size_of::<T>(), total);
        let sig = |piece: usize| {
            signature(&[
                3,
                T::CODE as u64,
                total as u64,
                op.code() as u64,
                piece as u64,
                pushed as u64,
            ])
        };
        if send.len() != total * n {
            return self.refuse(
                sig(0),
                Error::invalid(format!(
                    "reduce_scatter: send has {} elements, not {n} ranks times recv's {total}",
                    send.len()
                )),
            );
        }
        if total == 0 {
            return self.meet(sig(0), deps);
        }
        let op = op.code();
        if pushed {
            // (A `recv` inside `send`: the input copied aside.)
            let (send, deps) = self.input_apart(true, send, &recv, deps)?;
            let push = Push {
                kind: MOVE_REDUCE,
                op,
                count: total,
                stride: total,
                input: Some(send),
                out: recv,
            };
            return self.push(sig(0), &push, &deps);
        }
        // Each piece holds every rank's block of it: n * c elements in a half.
        let piece = (self.half_len::<T>() / n).max(1);
        self.in_pieces(total, piece, deps, |team, at, deps| {
            let (off, c) = (at.start, at.len);
            let own = team.half::<T>(team.me, at.half)?;
            if c == total {
                // One piece: the blocks lie in `send` as they go into the half, one copy.
                team.copy_in(&send, &own.sub(0..n * c)?, deps)?;
            } else {
                for d in 0..n {
                    let src = send.sub(d * total + off..d * total + off + c)?;
                    let after: &[&Event] = if d == 0 { deps } else { &[] };
                    team.copy_in(&src, &own.sub(d * c..(d + 1) * c)?, after)?;
                }
            }
            let parts = team.parts::<T>(at.half, 0..n * c, false)?;
            let m = Move::reduce(op, team.me * c, c, parts, recv.sub(off..off + c)?);
            team.step(sig(at.index), c, &m, &[])
        })
    }

    /// `buf = root's buf` on every rank (`MPI_Bcast`).
    ///
    /// Errors as [`Team::all_reduce`]'s; `root` outside the team is `Errc::Invalid`.
    pub fn broadcast<T: Element>(
        &mut self,
        buf: &impl AsUsmRange<T>,
        root: usize,
        deps: &[&Event],
    ) -> Result<Event> {
        let buf = buf.usm_range();
        let key = CallKey::new([4, T::CODE as u64, root as u64, 0], &buf, &buf);
        self.operation(deps, Some(key), std::mem::align_of::<T>(), |team, deps| {
            team.broadcast_commands(&buf, root, deps)
        })
    }

    /// [`Team::broadcast`]'s commands.
    fn broadcast_commands<T: Element>(
        &mut self,
        buf: &impl AsUsmRange<T>,
        root: usize,
        deps: &[&Event],
    ) -> Result<Option<Event>> {
        let buf = buf.usm_range();
        let total = buf.len();
        let sig =
            |piece: usize| signature(&[4, T::CODE as u64, total as u64, root as u64, piece as u64]);
        if root >= self.n {
            return self.refuse(
                sig(0),
                Error::invalid(format!("broadcast: root {root} of a team of {}", self.n)),
            );
        }
        if total == 0 {
            return self.meet(sig(0), deps);
        }
        let ring = self.streams::<T>(total);
        let piece = if ring { total } else { self.half_len::<T>() };
        self.in_pieces(total, piece, deps, |team, at, deps| {
            let (off, c) = (at.start, at.len);
            let piece = buf.sub(off..off + c)?;
            let span = if ring { team.half_len::<T>() } else { c };
            if team.me == root {
                // The root stages its piece; it moves nothing itself.
                let own = team.half::<T>(team.me, at.half)?;
                let mut m = team.nothing::<T>()?;
                m.count = c;
                m.staged = Some((Some(piece), own.sub(0..span)?));
                m.chunked = true;
                m.ring = ring;
                return team.step(sig(at.index), c, &m, deps);
            }
            let m = Move {
                kind: MOVE_FROM_ROOT,
                op: 0,
                root,
                first: 0,
                count: c,
                stride: 0,
                parts: team.parts::<T>(at.half, 0..span, false)?,
                out: piece,
                staged: None,
                chunked: true,
                ring,
            };
            team.step(sig(at.index), c, &m, deps)
        })
    }
}

/// How long a host step's wait spins before it yields: 20 us, or nothing where the node's
/// `ranks` outnumber the cores this process may use. A process pinned to one core is taken
/// to be one of ranks pinned to cores of their own (as `mpirun` binds them when they fit).
fn host_spin(ranks: usize) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    match cores == 1 || ranks <= cores {
        true => Duration::from_micros(20),
        false => Duration::ZERO,
    }
}

/// Whether two ranges share bytes.
fn overlap<T: Element>(a: &UsmRange<T>, b: &UsmRange<T>) -> bool {
    let (a0, b0) = (a.as_ptr(), b.as_ptr());
    a0 < b0 + b.byte_len() as u64 && b0 < a0 + a.byte_len() as u64
}

/// Whether `len` elements are whole items of `per` elements.
fn whole_items(len: usize, per: usize) -> bool {
    len % per == 0
}

/// What a push step moves ([`Team::push`], [`kernels::push_step_x1`]): `count` elements per
/// rank's slot; this rank's values for rank `r` are `input`'s (`out` when `None`, an
/// all-reduce in place) from `r * stride`; after the meeting, `kind` `MOVE_REDUCE` combines
/// the slots into `out` (`count` long), `MOVE_GATHER` copies slot `p` to `p * count` of
/// `out` (`n * count` long).
struct Push<T> {
    kind: u32,
    op: u32,
    count: usize,
    stride: usize,
    input: Option<UsmRange<T>>,
    out: UsmRange<T>,
}

impl<T: Element> Push<T> {
    /// This rank's values for rank `r`'s slot.
    fn values(&self, r: usize) -> Result<UsmRange<T>> {
        let from = r * self.stride;
        self.input
            .as_ref()
            .unwrap_or(&self.out)
            .sub(from..from + self.count)
    }
}

/// What a step moves after its meeting (the kernel's `kind` and operands).
struct Move<T> {
    kind: u32,
    op: u32,
    root: usize,
    first: usize,
    count: usize,
    stride: usize,
    /// Every rank's data, in rank order.
    parts: Vec<UsmRange<T>>,
    out: UsmRange<T>,
    /// This rank's input (`None`: `out`, in place) and its half, which the step fills first.
    staged: Option<(Option<UsmRange<T>>, UsmRange<T>)>,
    /// Whether any rank may stage this step (the same on every rank, whichever does): its
    /// meetings then go chunk by chunk ([`Partition`]); else the step is one chunk.
    chunked: bool,
    /// Whether the step streams through the halves, two chunk slots per work-group, instead
    /// of lying in them whole from `first` (the same on every rank: an operation larger than
    /// a half that can stream). Every rank stages, or only reads (a broadcast's non-roots);
    /// `parts` and the stage are whole halves, `first` is 0.
    ring: bool,
}

/// Move `m`'s elements `lo..hi` as host commands of `plan` (rank `me` of `n`), reading the
/// ranks' values at `at` of their halves (this rank's from its input where staged).
fn plan_move<T: Element>(
    plan: &mut host::Plan,
    m: &Move<T>,
    me: usize,
    n: usize,
    (lo, hi, at): (usize, usize, usize),
) -> Result<()> {
    // Rank r's first `len` values of the chunk.
    let values = |r: usize, len: usize| match (&m.staged, r == me) {
        (Some((input, _)), true) => input.as_ref().unwrap_or(&m.out).sub(lo..lo + len),
        _ => m.parts[r].sub(at..at + len),
    };
    let len = hi - lo;
    match m.kind {
        MOVE_REDUCE => {
            let srcs = (0..n).map(|r| values(r, len)).collect::<Result<Vec<_>>>()?;
            plan.reduce(m.op, &srcs, &m.out.sub(lo..hi)?)?;
        }
        MOVE_GATHER => {
            // Rank r's values land at r * stride, where the output has room.
            for r in 0..n {
                let to = r * m.stride + lo;
                let len = len.min(m.out.len().saturating_sub(to));
                if len > 0 {
                    plan.copy(&values(r, len)?, &m.out.sub(to..to + len)?)?;
                }
            }
        }
        MOVE_FROM_ROOT => plan.copy(&values(m.root, len)?, &m.out.sub(lo..hi)?)?,
        _ => {}
    }
    Ok(())
}

impl<T> Move<T> {
    fn reduce(
        op: u32,
        first: usize,
        count: usize,
        parts: Vec<UsmRange<T>>,
        out: UsmRange<T>,
    ) -> Self {
        Move {
            kind: MOVE_REDUCE,
            op,
            root: 0,
            first,
            count,
            stride: 0,
            parts,
            out,
            staged: None,
            chunked: false,
            ring: false,
        }
    }

    fn gather(
        first: usize,
        count: usize,
        stride: usize,
        parts: Vec<UsmRange<T>>,
        out: UsmRange<T>,
    ) -> Self {
        Move {
            kind: MOVE_GATHER,
            op: 0,
            root: 0,
            first,
            count,
            stride,
            parts,
            out,
            staged: None,
            chunked: false,
            ring: false,
        }
    }
}

impl Drop for Team<'_> {
    fn drop(&mut self) {
        // The peers' parts close (collectively) only after this rank's steps are done.
        if let Err(err) = self.queue.wait() {
            log::warn!("sycl-rs: Team drop: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Partition, GROUP};
    use crate::half::bf16;

    /// Every group's chunks cover its block, the blocks cover the step, and the chunk count
    /// stays within 1..=8; a block of at most 4 vectors per work-item is one chunk.
    /// A ring's chunks: every element of the step in exactly one, each inside the slot
    /// `c % 2` of its group (`2 * groups` slots of `slot` vectors), none larger than a slot.
    #[test]
    fn ring_chunks_fit_their_slots() {
        for count in [1, 7, 300, 1500, 4096, 65_560, 1 << 20, (64 << 20) + 3] {
            for (groups, slot) in [(1, 1), (1, 128), (2, 1024), (3, 5), (8, 256), (1024, 256)] {
                let check = |p: Partition| {
                    assert!(p.chunk_vectors <= slot, "{p:?}");
                    assert!(p.chunks * p.chunk_vectors >= p.block_vectors, "{p:?}");
                    if p.chunks * groups > 1 << 20 {
                        return;
                    }
                    let chunk = p.chunk_vectors * p.unit;
                    let mut covered = 0;
                    for g in 0..groups {
                        for c in 0..p.chunks {
                            let Some((lo, hi, at)) = p.ring_chunk(g, c, count) else {
                                continue;
                            };
                            assert_eq!(lo, covered, "{p:?} g {g} c {c}");
                            assert!(lo < hi && hi - lo <= chunk, "{p:?}");
                            assert_eq!(at, (2 * g + c % 2) * chunk, "{p:?}");
                            covered = hi;
                        }
                    }
                    assert_eq!(covered, count, "{p:?}");
                };
                check(Partition::ring::<f32>(count, groups, slot));
                check(Partition::ring::<bf16>(count, groups, slot));
                check(Partition::ring::<u64>(count, groups, slot));
            }
        }
    }

    #[test]
    fn partitions_cover_their_steps() {
        for count in [0, 1, 7, 4096, 65_560, 1 << 20, (64 << 20) + 3, 1 << 26] {
            for groups in [1, 2, 3, 64, 1024] {
                let check = |p: Partition, size: usize| {
                    assert_eq!(p.unit * size, 16);
                    assert!(p.block_vectors * p.unit * groups >= count);
                    assert_eq!(p.block_vectors % GROUP, 0);
                    assert_eq!(p.chunk_vectors % GROUP, 0);
                    assert!(p.chunks * p.chunk_vectors >= p.block_vectors);
                    assert!((1..=8).contains(&p.chunks), "{p:?}");
                    if p.block_vectors <= 4 * GROUP {
                        assert_eq!(p.chunks, 1, "{p:?}");
                    }
                };
                for chunked in [true, false] {
                    check(Partition::of::<f32>(count, groups, chunked), 4);
                    check(Partition::of::<bf16>(count, groups, chunked), 2);
                    check(Partition::of::<u64>(count, groups, chunked), 8);
                }
                assert_eq!(Partition::of::<f32>(count, groups, false).chunks, 1);
            }
        }
        // 256 MiB of f32 over 1024 groups: 256 KiB per group in 8 chunks of 32 KiB.
        let p = Partition::of::<f32>(64 << 20, 1024, false);
        assert_eq!((p.chunk_vectors, p.chunks), (16384, 1));
        let p = Partition::of::<f32>(64 << 20, 1024, true);
        assert_eq!(
            (p.block_vectors, p.chunk_vectors, p.chunks),
            (16384, 2048, 8)
        );
    }
}
