//! Host steps: on the native CPU a team runs each operation as one host task of its queue,
//! on the queue's own thread, instead of launching `team_step` kernels. The protocol is the
//! kernels' (the same pad slots, epoch words, signatures and poison word; spec/collectives.md),
//! so ranks on host steps and ranks on kernels meet each other. What it saves: a kernel launch
//! per step (a hand-off to the worker pool, one spinning thread per work-group, which a
//! 2-core node oversubscribes) and an atomic access per element.
//!
//! Every address here comes from a [`UsmRange`] the team built and bounds-checked when it
//! planned the operation, whose record admitted the use and stays alive (tracked) until the
//! host task's event completed ([`Plan::submit`]). Memory another process maps (the peers'
//! parts and pads, and this rank's, which the peers read and write) and memory other commands
//! may use is never covered by a Rust reference: data moves by volatile accesses, as memory
//! shared with an untrusted party is accessed elsewhere (rust-vmm's `VolatileSlice`), and pad
//! words are atomics, as the kernels' are. A peer that writes garbage makes this rank's
//! results wrong or its wait fail; it cannot make it touch memory outside the ranges planned.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::usm::record::add_use;
use crate::usm::{MemoryRecord, Use, UsmRange};
use crate::{Error, Event, Queue, Result};

use super::halves::{self, HalfFormat};
use super::{Element, PAD_WORDS};

/// Status codes of the kernels' failures (`sycl_backend::kernel_failure`), also what the
/// poison word holds.
const TIMED_OUT: u64 = 4;
const MISMATCHED: u64 = 5;

/// What failing steps report, as the kernels' failures do.
fn failure(code: u64) -> Error {
    sycl_backend::kernel_failure("team_step (host step)", code as u32)
}

/// One command of a host plan.
#[derive(Clone)]
enum Work {
    /// `bytes` from `src` to `dst`, both aligned to `align` (1, 2, 4 or 8), `bytes` a
    /// multiple of it.
    Copy {
        src: usize,
        dst: usize,
        bytes: usize,
        align: usize,
    },
    Meet(Meeting),
    /// A reduction's loop, typed and checked when planned (run again by each replay of a
    /// shared plan).
    Reduce(Arc<dyn Fn() + Send + Sync>),
}

/// The epochs of a step: `first .. first + chunks` (`kernels::team_step`).
#[derive(Clone, Copy, Debug)]
pub(super) struct StepEpochs {
    /// The step's first epoch: its parity picks the pads' slots.
    pub(super) first: u32,
    /// How many epochs the step's words may carry (its chunks).
    pub(super) chunks: u32,
}

/// A step's meeting: the kernels' for work-groups `groups`.
#[derive(Clone)]
struct Meeting {
    /// The epoch (one of `step`'s) and signature this rank arrives with.
    word: u64,
    step: StepEpochs,
    me: usize,
    groups: std::ops::Range<usize>,
    pads: Pads,
    timeout: Duration,
    /// How long a wait spins before it yields.
    spin: Duration,
}

/// The host addresses of the pads a rank's meetings use, checked once when the team formed.
#[derive(Clone)]
pub(super) struct Pads {
    /// This rank's pad.
    own: usize,
    /// Each peer's rank and pad.
    peers: Arc<[(usize, usize)]>,
}

impl Pads {
    /// The pads of rank `me`: its own, and each peer's `(rank, pad)`; all of the team's own
    /// memory (alive as long as the team, which waits for its queue before it frees them).
    pub(super) fn new(
        me: usize,
        own: &UsmRange<u64>,
        peers: &[(usize, UsmRange<u64>)],
    ) -> Result<Pads> {
        let at = |pad: &UsmRange<u64>| -> Result<usize> {
            if pad.len() < PAD_WORDS || !pad.is_host_accessible() {
                return Err(Error::invalid("team: a pad the host cannot reach whole"));
            }
            usize::try_from(pad.as_ptr())
                .map_err(|_| Error::invalid("an address beyond this host's"))
        };
        if me >= super::MAX_RANKS || peers.iter().any(|(r, _)| *r >= super::MAX_RANKS) {
            return Err(Error::invalid("team: a rank beyond the pads' slots"));
        }
        Ok(Pads {
            own: at(own)?,
            peers: peers
                .iter()
                .map(|(r, pad)| Ok((*r, at(pad)?)))
                .collect::<Result<Vec<_>>>()?
                .into(),
        })
    }
}

/// An operation's commands, planned on the calling thread and run in order by one host task.
pub(super) struct Plan {
    work: Vec<Work>,
    /// The caller's memory the plan uses (admitted and tracked when it is submitted).
    uses: Vec<(Arc<MemoryRecord>, Use)>,
    /// The team's own memory (its buffers, pads and scratch, and the peers' opened ones): no
    /// one else holds a range of it, so no host borrow can exist, and the team waits for its
    /// queue before it frees it. Not admitted per operation (`MemoryRecord` addresses).
    private: Arc<[usize]>,
    /// The queue the plan's memory was checked against (`MemoryRecord::check_queue`).
    queue: Queue,
}

/// [`crate::kernel::keep`] for a team's eager call on a GPU: its launches neither admit nor
/// track the team's own memory (`private`, as [`Plan`] lists it), as host plans do not.
pub(super) fn keep_launch(
    queue: &Queue,
    range: crate::kernel::Range,
    def: &'static crate::kernel::__rt::Definition,
    args: &crate::kernel::__rt::Args,
    varying: Option<usize>,
    private: &[usize],
) -> Result<Option<crate::kernel::KeptLaunch>> {
    // The team's own memory (its parts and pads, the peers' as opened here, the spare pads
    // and the scratch) is one owner's that hands out no range of it, so no host borrow of it
    // can exist, never changes its access mode, and waits for its queue before freeing any of
    // it (`Team`'s drop); every kept launch runs on that queue, and the team drops its kept
    // launches with it.
    // SAFETY: `keep`'s contract for `private`, met as the lines above say.
    unsafe { crate::kernel::keep(queue, range, def, args, varying, private) }
}

/// The address of a record, as [`Plan`]'s `private` lists them.
pub(super) fn record_key(record: &Arc<MemoryRecord>) -> usize {
    Arc::as_ptr(record) as usize
}

/// The host address of `r`, recording the use; `Errc::Invalid` for memory this process does
/// not map (never on the native CPU).
fn address<T: bytemuck::Pod>(
    uses: &mut Vec<(Arc<MemoryRecord>, Use)>,
    private: &[usize],
    queue: &Queue,
    r: &UsmRange<T>,
    use_: Use,
) -> Result<usize> {
    if !r.is_host_accessible() {
        return Err(r.record.not_host_accessible());
    }
    if !private.contains(&record_key(&r.record)) {
        // (Once, here: the plan's submissions, kept or replayed, are on this queue.)
        r.record.check_queue(queue)?;
        add_use(uses, &r.record, use_);
    }
    usize::try_from(r.as_ptr()).map_err(|_| Error::invalid("an address beyond this host's"))
}

impl Plan {
    /// An empty plan for `queue` (the team's, which runs every submission of it);
    /// `private`: the team's own records ([`record_key`]s).
    pub(super) fn new(private: Arc<[usize]>, queue: &Queue) -> Plan {
        Plan {
            queue: queue.clone(),
            work: Vec::with_capacity(4),
            uses: Vec::with_capacity(2),
            private,
        }
    }

    /// Copies `src` into `dst` (the same length).
    pub(super) fn copy<T: Element>(&mut self, src: &UsmRange<T>, dst: &UsmRange<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "team: a copy of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let src_at = address(&mut self.uses, &self.private, &self.queue, src, Use::Read)?;
        let dst_at = address(&mut self.uses, &self.private, &self.queue, dst, Use::Write)?;
        let bytes = src.byte_len();
        let align = [8, 4, 2, 1]
            .into_iter()
            .find(|a| (src_at | dst_at | bytes) % a == 0)
            .unwrap_or(1);
        self.work.push(Work::Copy {
            src: src_at,
            dst: dst_at,
            bytes,
            align,
        });
        Ok(())
    }

    /// A meeting under `word` (an epoch of `step`, and the signature) for work-groups
    /// `groups`, of rank `me` over `pads`; its waits spin for `spin` before they yield the
    /// core.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn meet(
        &mut self,
        word: u64,
        step: StepEpochs,
        me: usize,
        groups: std::ops::Range<usize>,
        pads: &Pads,
        timeout: Duration,
        spin: Duration,
    ) -> Result<()> {
        if groups.end * super::MAX_RANKS > super::PAD_SLOTS {
            return Err(Error::invalid("team: a meeting outside the pads"));
        }
        self.work.push(Work::Meet(Meeting {
            word,
            step,
            me,
            groups,
            pads: pads.clone(),
            timeout,
            spin,
        }));
        Ok(())
    }

    /// `out[i] = srcs[0][i] op srcs[1][i] op ..` in order (`op` as the kernels' `combine`).
    pub(super) fn reduce<T: Element>(
        &mut self,
        op: u32,
        srcs: &[UsmRange<T>],
        out: &UsmRange<T>,
    ) -> Result<()> {
        let count = out.len();
        if srcs.is_empty() || srcs.len() > super::MAX_RANKS || srcs.iter().any(|s| s.len() != count)
        {
            return Err(Error::invalid(
                "team: a reduction over ranges of other lengths, or of more sources than ranks",
            ));
        }
        let srcs = srcs
            .iter()
            .map(|s| address(&mut self.uses, &self.private, &self.queue, s, Use::Read))
            .collect::<Result<Vec<_>>>()?;
        let out = address(&mut self.uses, &self.private, &self.queue, out, Use::Write)?;
        self.work.push(Work::Reduce(Arc::new(move || {
            // SAFETY: each address starts `count` aligned `T`s of memory this process maps
            // (bounds checked above), alive until the host task completes (`submit`).
            unsafe { reduce::<T>(op, &srcs, out, count) }
        })));
        Ok(())
    }

    /// Submits the plan after `deps`, as one command of `queue` using the memory it planned
    /// (admitted and tracked). Once `deps` completed and the queue is idle (waiting up to
    /// [`INLINE_WAIT`] for its earlier operations), this thread runs it, up to a meeting whose
    /// peers take longer than [`INLINE_WAIT`]; the rest runs as a host task, so that a call
    /// never blocks on its peers for longer (they may call later, after something this rank
    /// does next). Without the wait for the queue, one late peer would leave every later call
    /// of a back-to-back loop to the queue's worker, a hand-off each (on a rank pinned to one
    /// core, two threads taking turns on it: 1.2-1.4 us per 512-byte all-reduce here instead
    /// of about 0.5). A failure is the call's error when it happens here,
    /// else the event's: a meeting's `Errc::Runtime` (timed out) or `Errc::Invalid`
    /// (mismatched), as the kernels'.
    pub(super) fn submit(self, queue: &Queue, deps: &[&Event]) -> Result<Event> {
        let Plan { work, uses, .. } = self;
        submit_work(queue, &uses, work.into(), 0, deps)
    }

    /// Submits the plan as [`Plan::submit`] does, and gives it back as a [`KeptPlan`] for
    /// the next call of the same operation on the same memory.
    pub(super) fn submit_and_keep(
        self,
        queue: &Queue,
        deps: &[&Event],
    ) -> (Result<Event>, KeptPlan) {
        let Plan { work, uses, .. } = self;
        let work: Arc<[Work]> = work.into();
        let event = submit_work(queue, &uses, work.clone(), 0, deps);
        let kept = KeptPlan {
            work,
            uses: uses.iter().map(|(r, u)| (Arc::downgrade(r), *u)).collect(),
        };
        (event, kept)
    }

    /// The plan kept for replays ([`SharedPlan`]).
    pub(super) fn share(self) -> SharedPlan {
        SharedPlan {
            work: self.work.into(),
            uses: self.uses,
        }
    }
}

/// A plan recorded into a team's graph: its commands, submitted again by each replay with the
/// meetings' epochs moved by the replay's base (recorded epochs count from the graph's
/// start). Its `uses` keep the caller's memory alive (every address in the commands lies in
/// it or in the team's own memory, which outlives the team's replays).
pub(super) struct SharedPlan {
    work: Arc<[Work]>,
    uses: Vec<(Arc<MemoryRecord>, Use)>,
}

impl SharedPlan {
    /// Submits one replay after `deps`, its meetings' epochs `base` later than recorded; as
    /// [`Plan::submit`] otherwise.
    pub(super) fn submit(&self, base: u32, queue: &Queue, deps: &[&Event]) -> Result<Event> {
        submit_work(queue, &self.uses, self.work.clone(), base, deps)
    }
}

/// An eager operation's plan, kept by its team for the next call of the same operation on the
/// same memory at the same half ([`Team`](super::Team)'s `kept`): run again as a replay is,
/// its meetings' epochs moved to the call's. It holds the caller's memory weakly: memory its
/// owner dropped is freed as usual, and the plan then never runs again.
pub(super) struct KeptPlan {
    work: Arc<[Work]>,
    uses: Vec<(Weak<MemoryRecord>, Use)>,
}

impl KeptPlan {
    /// Submits the plan again after `deps`, its meetings' epochs `base` later than planned;
    /// `None` (nothing submitted) when memory it uses was dropped since. Every address in
    /// its commands lies in that memory, alive again here and tracked until the task
    /// completes, or in the team's own.
    pub(super) fn submit(
        &self,
        base: u32,
        queue: &Queue,
        deps: &[&Event],
    ) -> Option<Result<Event>> {
        let submit = |uses: &[(Arc<MemoryRecord>, Use)]| {
            submit_work(queue, uses, self.work.clone(), base, deps)
        };
        // (One record or two, as most calls use, without a list on the heap.)
        let up = |(r, u): &(Weak<MemoryRecord>, Use)| Some((r.upgrade()?, *u));
        Some(match &self.uses[..] {
            [] => submit(&[]),
            [a] => submit(&[up(a)?]),
            [a, b] => submit(&[up(a)?, up(b)?]),
            more => submit(&more.iter().map(up).collect::<Option<Vec<_>>>()?),
        })
    }
}

/// Runs `work` as one command of `queue` after `deps` using `uses` (see [`Plan::submit`]),
/// its meetings' epochs `base` later than planned.
fn submit_work(
    queue: &Queue,
    uses: &[(Arc<MemoryRecord>, Use)],
    work: Arc<[Work]>,
    base: u32,
    deps: &[&Event],
) -> Result<Event> {
    // The next command, and whether this rank arrived at it already (a meeting resumes
    // where it stopped).
    let mut next = 0;
    let mut arrived = false;
    queue.host_work_using(uses, deps, INLINE_WAIT, move |inline| {
        while let Some(w) = work.get(next) {
            if let Work::Meet(m) = w {
                if !meet(m, base, &mut arrived, inline)? {
                    return Ok(false);
                }
                arrived = false;
            } else {
                run(w);
            }
            next += 1;
        }
        Ok(true)
    })
}

/// How long a call run on the calling thread waits for its peers before it hands the rest of
/// the operation to its queue (the native queue's worker spins as long for its next command).
const INLINE_WAIT: Duration = Duration::from_micros(50);

/// Runs a copy or a reduction.
fn run(work: &Work) {
    match *work {
        Work::Copy {
            src,
            dst,
            bytes,
            align,
        } => {
            // SAFETY: as `Plan::copy` checked: both ranges are `bytes` long, aligned to
            // `align`, in memory this process maps and alive until the task completes.
            unsafe { copy(src, dst, bytes, align) };
        }
        Work::Reduce(ref f) => f(),
        Work::Meet(_) => unreachable!("meetings run through `meet`"),
    }
}

/// Word `w` of the pad at `pad`.
///
/// # Safety
/// `pad` is the address of a live pad (`PAD_WORDS` words, 8-byte aligned), which every
/// process accesses only atomically; `w < PAD_WORDS`.
unsafe fn slot<'a>(pad: usize, w: usize) -> &'a AtomicU64 {
    // SAFETY: the caller's contract; `AtomicU64::from_ptr` needs an aligned pointer valid for
    // the reference's life, accessed only atomically meanwhile.
    unsafe { AtomicU64::from_ptr((pad as *mut u64).add(w)) }
}

/// The kernels' meeting on the host: arrive in every peer's pad (release), then wait for every
/// peer's arrival at this epoch or a later one of the step (acquire) in this rank's, per
/// work-group, in the slots of the step's parity; a peer at one of the step's epochs under
/// another signature, or past them, is a mismatch, no arrival within the time-out a
/// time-out; either poisons the pad. A poisoned pad fails at once. `inline`: gives up
/// (`Ok(false)`, to be called again) when the peers have not all arrived within
/// [`INLINE_WAIT`]. `base`: how many epochs later than planned the meeting is (a replay's,
/// or a kept plan's); `arrived`: whether this rank arrived already (a meeting resumes
/// where it stopped), set once it did.
fn meet(m: &Meeting, base: u32, arrived: &mut bool, inline: bool) -> Result<bool> {
    // The pads were checked to hold PAD_WORDS words (`Pads::new`), slots are below
    // `PAD_SLOTS + groups.end * MAX_RANKS <= 2 * PAD_SLOTS < PAD_WORDS`, and pad words are
    // only ever accessed atomically (here, by the kernels and by the peers).
    let own = |w: usize| {
        // SAFETY: as just said; `w` is a slot or the poison word.
        unsafe { slot(m.pads.own, w) }
    };
    let poison = own(PAD_WORDS - 1);
    // The step's slots: the pads' second half for an odd first epoch (as the kernels').
    // The step's first epoch and this rank's word, `base` later than planned.
    let first = m.step.first.wrapping_add(base);
    let word = (((m.word >> 32) as u32).wrapping_add(base) as u64) << 32 | (m.word & 0xffff_ffff);
    let pair = (first & 1) as usize * super::PAD_SLOTS;
    if !*arrived {
        match poison.load(Ordering::Relaxed) {
            0 => {}
            TIMED_OUT => return Err(failure(TIMED_OUT)),
            _ => return Err(failure(MISMATCHED)),
        }
        for &(_, pad) in m.pads.peers.iter() {
            for g in m.groups.clone() {
                let w = pair + g * super::MAX_RANKS + m.me;
                // SAFETY: as above.
                unsafe { slot(pad, w) }.store(word, Ordering::Release);
            }
        }
        *arrived = true;
    }
    let sig = word as u32;
    // How far into the step the wait is (at least this far, the peer has arrived).
    let at = ((word >> 32) as u32).wrapping_sub(first);
    let mut backoff = Backoff::new(if inline { INLINE_WAIT } else { m.timeout }, m.spin);
    for g in m.groups.clone() {
        for &(p, _) in m.pads.peers.iter() {
            let word = own(pair + g * super::MAX_RANKS + p);
            loop {
                let w = word.load(Ordering::Acquire);
                // Words of this slot's earlier steps are before `first`. A peer at or past it
                // is at this step: under another signature, or past the step's epochs, it
                // runs another call.
                let since = ((w >> 32) as u32).wrapping_sub(first);
                if since < 0x8000_0000 {
                    if w as u32 != sig || since >= m.step.chunks {
                        // (The first failure stays: as the kernels' compare-exchange.)
                        let _ = poison.compare_exchange(
                            0,
                            MISMATCHED,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                        return Err(failure(MISMATCHED));
                    }
                    if since >= at {
                        break;
                    }
                }
                if !backoff.pause() {
                    if inline {
                        return Ok(false);
                    }
                    let _ =
                        poison.compare_exchange(0, TIMED_OUT, Ordering::Relaxed, Ordering::Relaxed);
                    return Err(failure(TIMED_OUT));
                }
            }
        }
    }
    Ok(true)
}

/// How a wait spends the time between polls: spinning first (a peer on another core arrives
/// within microseconds; no spinning where ranks outnumber cores), then yielding (the peer may
/// need this core), then sleeping (a peer far behind). The clock is read every 64 polls, from
/// the 64th pause on where the wait may spin, else from the first: a wait that ends within
/// a few microseconds (most, between ranks on cores of their own) reads it never (a 512-byte
/// all-reduce between two ranks read it on every call); the limit counts from there.
struct Backoff {
    polls: u32,
    start: Option<Instant>,
    waited: Duration,
    limit: Duration,
    spin: Duration,
}

impl Backoff {
    const YIELD: Duration = Duration::from_millis(1);

    /// A wait of at most `limit` (from its first pause) that spins for `spin`.
    fn new(limit: Duration, spin: Duration) -> Backoff {
        Backoff {
            polls: 0,
            start: None,
            waited: Duration::ZERO,
            limit,
            spin,
        }
    }

    /// Pauses after a poll; `false` once the wait took its limit.
    fn pause(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if self.start.is_none() && !self.spin.is_zero() && self.polls < 64 {
            std::hint::spin_loop();
            return true;
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        if self.polls % 64 == 0 {
            self.waited = start.elapsed();
            if self.waited >= self.limit {
                return false;
            }
        }
        if self.waited < self.spin {
            std::hint::spin_loop();
        } else if self.waited < Self::YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }
}

/// 16 bytes that one volatile access moves: an unaligned SSE load or store on x86-64 (the
/// packed wrapper keeps it one access at any address), two words elsewhere.
#[cfg(target_arch = "x86_64")]
#[repr(C, packed)]
#[derive(Clone, Copy)]
struct Chunk(std::arch::x86_64::__m128i);
#[cfg(not(target_arch = "x86_64"))]
#[repr(C, packed)]
#[derive(Clone, Copy)]
struct Chunk(u128);

const CHUNK: usize = std::mem::size_of::<Chunk>();

impl Chunk {
    fn to_bytes(self) -> [u8; CHUNK] {
        // SAFETY: both are 16 plain bytes.
        unsafe { std::mem::transmute::<Chunk, [u8; CHUNK]>(self) }
    }

    fn from_bytes(b: [u8; CHUNK]) -> Chunk {
        // SAFETY: both are 16 plain bytes (any bits are a valid vector).
        unsafe { std::mem::transmute::<[u8; CHUNK], Chunk>(b) }
    }
}

/// Copies `bytes` from `src` to `dst` in volatile accesses: 16-byte chunks, then the rest in
/// accesses of `align` bytes.
///
/// # Safety
/// Both ranges are valid for `bytes` bytes and aligned to `align` (1, 2, 4 or 8), which
/// divides `bytes`.
unsafe fn copy(src: usize, dst: usize, bytes: usize, align: usize) {
    /// # Safety
    /// As `copy`'s, for `W` (aligned for it, `bytes` a multiple of its size).
    unsafe fn words<W: Copy>(src: usize, dst: usize, bytes: usize) {
        let (s, d) = (src as *const W, dst as *mut W);
        for i in 0..bytes / std::mem::size_of::<W>() {
            // SAFETY: `i` is below the ranges' length in `W`s; both are aligned for `W`
            // (a `Chunk` needs no alignment).
            unsafe { d.add(i).write_volatile(s.add(i).read_volatile()) };
        }
    }
    let whole = bytes / CHUNK * CHUNK;
    // SAFETY: the caller's contract: the chunks, then the rest (still aligned to `align`,
    // since CHUNK is a multiple of it), in accesses of that width.
    unsafe {
        words::<Chunk>(src, dst, whole);
        let (src, dst, bytes) = (src + whole, dst + whole, bytes - whole);
        match align {
            8 => words::<u64>(src, dst, bytes),
            4 => words::<u32>(src, dst, bytes),
            2 => words::<u16>(src, dst, bytes),
            _ => words::<u8>(src, dst, bytes),
        }
    }
}

/// `f` on each `T` of two chunks (little pieces of `T`s, `T` dividing 16 bytes).
#[inline(always)]
fn lanes<T: Element>(a: Chunk, b: Chunk, f: &impl Fn(T, T) -> T) -> Chunk {
    let size = std::mem::size_of::<T>();
    let (mut x, y) = (a.to_bytes(), b.to_bytes());
    for k in 0..CHUNK / size {
        let at = k * size..(k + 1) * size;
        let p: T = bytemuck::pod_read_unaligned(&x[at.clone()]);
        let q: T = bytemuck::pod_read_unaligned(&y[at.clone()]);
        x[at].copy_from_slice(bytemuck::bytes_of(&f(p, q)));
    }
    Chunk::from_bytes(x)
}

/// `out[i] = srcs[0][i] op srcs[1][i] op ..` for `i < count`, in volatile accesses: 16-byte
/// chunks, then single elements.
///
/// # Safety
/// Every address starts `count` aligned, live `T`s; at most `MAX_RANKS` sources.
unsafe fn reduce<T: Element>(op: u32, srcs: &[usize], out: usize, count: usize) {
    // SAFETY: the caller's contract.
    unsafe { reduce_by::<T>(reduce_halves, op, srcs, out, count) }
}

/// The whole chunks of a 16-bit float's reduction ([`reduce_halves`] or a form of it).
type HalvesFn = unsafe fn(HalfFormat, u32, &[usize], usize, usize) -> usize;

/// [`reduce`] with `halves` for the chunks of the 16-bit float types.
///
/// # Safety
/// As [`reduce`]'s; `halves` has [`reduce_halves`]' contract.
unsafe fn reduce_by<T: Element>(
    halves: HalvesFn,
    op: u32,
    srcs: &[usize],
    out: usize,
    count: usize,
) {
    if let Some(format) = T::HALF {
        // SAFETY: the caller's contract (`T` is that 16-bit format).
        let done = unsafe { halves(format, op, srcs, out, count) };
        let at = done * std::mem::size_of::<T>();
        let mut rest = [0; super::MAX_RANKS];
        for (r, s) in rest.iter_mut().zip(srcs) {
            *r = s + at;
        }
        // The rest (fewer than a chunk's lanes) one element at a time.
        // SAFETY: elements `done..count` of each range, as the caller's contract says.
        return unsafe { reduce_elements::<T>(op, &rest[..srcs.len()], out + at, count - done) };
    }
    // SAFETY: the caller's contract.
    unsafe { reduce_elements::<T>(op, srcs, out, count) }
}

/// [`reduce`] of the whole chunks of `count` 16-bit floats of `format`, through f32 lanes,
/// rounded after each source as the element functions are; returns how many elements it
/// reduced. AVX2 and F16C where the CPU has them ([`avx2`]), else [`reduce_halves_portable`].
///
/// # Safety
/// As [`reduce`]'s, for elements of `format`.
unsafe fn reduce_halves(
    format: HalfFormat,
    op: u32,
    srcs: &[usize],
    out: usize,
    count: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") {
        // SAFETY: the caller's contract, on a CPU with both features (checked just above).
        return unsafe { avx2::reduce_halves(format, op, srcs, out, count) };
    }
    // SAFETY: the caller's contract.
    unsafe { reduce_halves_portable(format, op, srcs, out, count) }
}

/// [`reduce_halves`] in plain Rust over [`halves`]' lane conversions: on any CPU, and twice
/// as fast as the element functions for bf16 (the compiler leaves its lanes scalar).
///
/// # Safety
/// As [`reduce_halves`]'.
unsafe fn reduce_halves_portable(
    format: HalfFormat,
    op: u32,
    srcs: &[usize],
    out: usize,
    count: usize,
) -> usize {
    /// Every chunk of format `L` with `f`.
    ///
    /// # Safety
    /// As `reduce_halves`'.
    #[inline(always)]
    unsafe fn with<L: halves::Lanes>(
        f: impl Fn(f32, f32) -> f32,
        srcs: &[usize],
        out: usize,
        count: usize,
    ) -> usize {
        let (first, rest) = srcs.split_first().expect("a source");
        let chunks = count / halves::LANES;
        for c in 0..chunks {
            let load = |s: usize| -> [u16; halves::LANES] {
                // SAFETY: chunk `c` lies inside every range (`(c + 1) * LANES <= count`); a
                // `Chunk` needs no alignment.
                let chunk = unsafe { (s as *const Chunk).add(c).read_volatile() };
                bytemuck::cast(chunk.to_bytes())
            };
            let mut acc = load(*first);
            for &s in rest {
                let (mut x, y) = (L::widen(acc), L::widen(load(s)));
                for (x, &y) in x.iter_mut().zip(&y) {
                    *x = f(*x, y);
                }
                acc = L::narrow(x);
            }
            let chunk = Chunk::from_bytes(bytemuck::cast(acc));
            // SAFETY: as for the loads, in `out`.
            unsafe { (out as *mut Chunk).add(c).write_volatile(chunk) };
        }
        chunks * halves::LANES
    }
    /// `with` for format `L` and each operation, as `half`'s operators and the kernels'
    /// `combine` compute it before rounding.
    ///
    /// # Safety
    /// As `reduce_halves`'.
    #[inline(always)]
    unsafe fn of<L: halves::Lanes>(op: u32, srcs: &[usize], out: usize, count: usize) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            match op {
                0 => with::<L>(|x, y| x + y, srcs, out, count),
                1 => with::<L>(|x, y| x * y, srcs, out, count),
                2 => with::<L>(f32::min, srcs, out, count),
                _ => with::<L>(f32::max, srcs, out, count),
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        match format {
            HalfFormat::F16 => of::<halves::F16Lanes>(op, srcs, out, count),
            HalfFormat::Bf16 => of::<halves::Bf16Lanes>(op, srcs, out, count),
        }
    }
}

/// [`reduce_halves`] in AVX2 and F16C lanes: f16 through F16C's conversions (the
/// instructions `half` converts with on such a CPU), bf16 through the integer steps of
/// [`halves`]' conversions, which the compiler leaves one lane at a time. Two 64 KiB sources
/// (release build, this 2-core host): bf16 in 15-21 us and f16 in 5-6 us, against 68-88 and
/// 207-251 us element by element (f32: 5-7 us).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Chunk, HalfFormat};

    /// Eight f16 lanes as f32.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    #[allow(unused_unsafe)] // (the value intrinsics are safe here from Rust 1.87 on)
    unsafe fn widen_f16(h: __m128i) -> __m256 {
        // SAFETY: the CPU has AVX2 and F16C (the function's contract); the intrinsics
        // here touch no memory but the arrays they are given.
        unsafe { _mm256_cvtph_ps(h) }
    }

    /// Eight f32 lanes rounded to f16 (to nearest, ties to even).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    #[allow(unused_unsafe)] // (the value intrinsics are safe here from Rust 1.87 on)
    unsafe fn narrow_f16(x: __m256) -> __m128i {
        // SAFETY: the CPU has AVX2 and F16C (the function's contract); the intrinsics
        // here touch no memory but the arrays they are given.
        unsafe { _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x) }
    }

    /// Eight bf16 lanes as f32, NaNs quieted (as `halves::bf16_to_f32`).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    #[allow(unused_unsafe)] // (the value intrinsics are safe here from Rust 1.87 on)
    unsafe fn widen_bf16(h: __m128i) -> __m256 {
        // SAFETY: the CPU has AVX2 and F16C (the function's contract); the intrinsics
        // here touch no memory but the arrays they are given.
        unsafe {
            let x = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
            let nan = _mm256_cmpgt_epi32(
                _mm256_and_si256(x, _mm256_set1_epi32(0x7fff_ffff)),
                _mm256_set1_epi32(0x7f80_0000),
            );
            let quiet = _mm256_and_si256(nan, _mm256_set1_epi32(0x0040_0000));
            _mm256_castsi256_ps(_mm256_or_si256(x, quiet))
        }
    }

    /// Eight f32 lanes rounded to bf16 (as `halves::f32_to_bf16`).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    #[allow(unused_unsafe)] // (the value intrinsics are safe here from Rust 1.87 on)
    unsafe fn narrow_bf16(v: __m256) -> __m128i {
        // SAFETY: the CPU has AVX2 and F16C (the function's contract); the intrinsics
        // here touch no memory but the arrays they are given.
        unsafe {
            let x = _mm256_castps_si256(v);
            let zero = _mm256_setzero_si256();
            let nan = _mm256_cmpgt_epi32(
                _mm256_and_si256(x, _mm256_set1_epi32(0x7fff_ffff)),
                _mm256_set1_epi32(0x7f80_0000),
            );
            // Up (1) unless the round bit or every bit below it and the result's last is clear.
            let clear = _mm256_or_si256(
                _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x8000)), zero),
                _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x17fff)), zero),
            );
            let up = _mm256_andnot_si256(clear, _mm256_set1_epi32(1));
            let high = _mm256_srli_epi32::<16>(x);
            let rounded = _mm256_add_epi32(high, up);
            let quiet = _mm256_or_si256(high, _mm256_set1_epi32(0x0040));
            // (Each lane now holds at most 0xffff; 0xffff + 1 only comes of a NaN, not chosen.)
            let r = _mm256_blendv_epi8(rounded, quiet, nan);
            let r = _mm256_and_si256(r, _mm256_set1_epi32(0xffff));
            _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r))
        }
    }

    /// `a op b` in f32 lanes, as `halves`' (and the element functions') `f32` operations.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    #[allow(unused_unsafe)] // (the value intrinsics are safe here from Rust 1.87 on)
    unsafe fn combine(op: u32, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the CPU has AVX2 and F16C (the function's contract); the intrinsics
        // here touch no memory but the arrays they are given.
        unsafe {
            match op {
                0 => _mm256_add_ps(a, b),
                1 => _mm256_mul_ps(a, b),
                _ => {
                    // Rust's own min and max (their NaN and zero cases), lane by lane.
                    let (mut x, mut y) = ([0f32; 8], [0f32; 8]);
                    _mm256_storeu_ps(x.as_mut_ptr(), a);
                    _mm256_storeu_ps(y.as_mut_ptr(), b);
                    for (x, y) in x.iter_mut().zip(y) {
                        *x = if op == 2 { x.min(y) } else { x.max(y) };
                    }
                    _mm256_loadu_ps(x.as_ptr())
                }
            }
        }
    }

    /// [`super::reduce_halves`] on a CPU with AVX2 and F16C.
    ///
    /// # Safety
    /// As `reduce_halves`', on a CPU with AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn reduce_halves(
        format: HalfFormat,
        op: u32,
        srcs: &[usize],
        out: usize,
        count: usize,
    ) -> usize {
        let (first, rest) = srcs.split_first().expect("a source");
        let chunks = count / super::halves::LANES;
        // Every chunk, with the format's conversions (a macro, so that they inline).
        macro_rules! each_chunk {
            ($widen:ident, $narrow:ident) => {
                for c in 0..chunks {
                    // SAFETY: chunk `c` lies inside every range (`(c + 1) * LANES <= count`);
                    // a `Chunk` needs no alignment; the CPU has the features (the caller's
                    // contract).
                    unsafe {
                        let load =
                            |s: usize| -> __m128i { (s as *const Chunk).add(c).read_volatile().0 };
                        let mut acc = load(*first);
                        for &s in rest {
                            acc = $narrow(combine(op, $widen(acc), $widen(load(s))));
                        }
                        (out as *mut Chunk).add(c).write_volatile(Chunk(acc));
                    }
                }
            };
        }
        match format {
            HalfFormat::F16 => each_chunk!(widen_f16, narrow_f16),
            HalfFormat::Bf16 => each_chunk!(widen_bf16, narrow_bf16),
        }
        chunks * super::halves::LANES
    }
}

/// [`reduce`] in chunks of plain lanes, then single elements.
///
/// # Safety
/// As [`reduce`]'s.
unsafe fn reduce_elements<T: Element>(op: u32, srcs: &[usize], out: usize, count: usize) {
    /// # Safety
    /// As `reduce`'s.
    #[inline(always)]
    unsafe fn with<T: Element>(f: impl Fn(T, T) -> T, srcs: &[usize], out: usize, count: usize) {
        let (first, rest) = srcs.split_first().expect("a source");
        let per_chunk = CHUNK / std::mem::size_of::<T>();
        let chunks = count / per_chunk;
        if let [second] = rest {
            // Two sources (two ranks, or a ring's step): one loop without the inner one,
            // which kept the accumulator in memory.
            let (a, b, o) = (
                *first as *const Chunk,
                *second as *const Chunk,
                out as *mut Chunk,
            );
            for c in 0..chunks {
                // SAFETY: as below.
                unsafe {
                    let v = lanes(a.add(c).read_volatile(), b.add(c).read_volatile(), &f);
                    o.add(c).write_volatile(v);
                }
            }
        } else {
            for c in 0..chunks {
                // SAFETY: chunk `c` lies inside every range (`c * per_chunk + per_chunk <=
                // count`); a `Chunk` needs no alignment.
                unsafe {
                    let mut acc = (*first as *const Chunk).add(c).read_volatile();
                    for s in rest {
                        acc = lanes(acc, (*s as *const Chunk).add(c).read_volatile(), &f);
                    }
                    (out as *mut Chunk).add(c).write_volatile(acc);
                }
            }
        }
        for i in chunks * per_chunk..count {
            // SAFETY: `i < count`: inside every range (the caller's contract).
            unsafe {
                let mut acc = (*first as *const T).add(i).read_volatile();
                for s in rest {
                    acc = f(acc, (*s as *const T).add(i).read_volatile());
                }
                (out as *mut T).add(i).write_volatile(acc);
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        match op {
            0 => with::<T>(T::sum, srcs, out, count),
            1 => with::<T>(T::product, srcs, out, count),
            2 => with::<T>(T::minimum, srcs, out, count),
            _ => with::<T>(T::maximum, srcs, out, count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Errc;

    /// `reduce::<T>` over three sources at an odd element offset (chunks and a tail), for
    /// every count up to 40 and a longer one, and every operation, against the same fold one
    /// element at a time.
    fn reduces_as_a_fold<T: Element + std::fmt::Debug>(value: impl Fn(usize) -> T) {
        reduces_by_as_a_fold(reduce_halves, &value);
        if T::HALF.is_some() {
            // (The form other CPUs take, which this one may not.)
            reduces_by_as_a_fold(reduce_halves_portable, &value);
        }
    }

    /// `reduces_as_a_fold` for the 16-bit floats' chunks in `halves`.
    fn reduces_by_as_a_fold<T: Element + std::fmt::Debug>(
        halves: HalvesFn,
        value: &impl Fn(usize) -> T,
    ) {
        let ops: [fn(T, T) -> T; 4] = [T::sum, T::product, T::minimum, T::maximum];
        // One source, two (the two-rank loop, also in place: the output is the first
        // source, as an in-place push step's) and three.
        for (sources, in_place) in [(1, false), (2, false), (2, true), (3, false)] {
            for count in (0..40).chain([1001]) {
                let src: Vec<Vec<T>> = (0..sources)
                    .map(|r| (0..=count).map(|i| value(r * 41 + i)).collect())
                    .collect();
                for (op, f) in ops.iter().enumerate() {
                    let mut out = match in_place {
                        true => src[0].clone(),
                        false => vec![value(999); count + 1],
                    };
                    let mut srcs: Vec<usize> =
                        src.iter().map(|s| s[1..].as_ptr() as usize).collect();
                    if in_place {
                        srcs[0] = out[1..].as_ptr() as usize;
                    }
                    // SAFETY: every source and the output hold `count` elements from index 1.
                    unsafe {
                        reduce_by::<T>(
                            halves,
                            op as u32,
                            &srcs,
                            out[1..].as_mut_ptr() as usize,
                            count,
                        )
                    };
                    let what = format!("{sources} sources, in place {in_place}, op {op}");
                    for i in 0..count {
                        let want = src[1..]
                            .iter()
                            .fold(src[0][i + 1], |acc, s| f(acc, s[i + 1]));
                        let (got, want) =
                            (bytemuck::bytes_of(&out[i + 1]), bytemuck::bytes_of(&want));
                        assert_eq!(got, want, "{what}, count {count}, element {i}");
                    }
                    let before = if in_place { src[0][0] } else { value(999) };
                    assert_eq!(bytemuck::bytes_of(&out[0]), bytemuck::bytes_of(&before));
                }
            }
        }
    }

    #[test]
    fn reductions_match_one_element_at_a_time() {
        reduces_as_a_fold::<f32>(|i| (i as f32 - 20.0) * 0.37);
        reduces_as_a_fold::<f64>(|i| (i as f64 - 20.0) * 0.37);
        reduces_as_a_fold::<i32>(|i| (i as i32 - 20) * 1_000_003);
        reduces_as_a_fold::<u64>(|i| (i as u64) << 40 | 7);
        reduces_as_a_fold::<half::bf16>(|i| half::bf16::from_f32(i as f32 * 0.7 - 9.0));
        reduces_as_a_fold::<half::f16>(|i| half::f16::from_f32(i as f32 * 0.7 - 9.0));
        // The half types' edges (their lanes go through f32): bit patterns of every class,
        // NaNs of both kinds and signs, infinities, subnormals, zeros of both signs, sums
        // that overflow or round to even.
        reduces_as_a_fold::<half::bf16>(|i| half::bf16::from_bits(spread_bits(i)));
        reduces_as_a_fold::<half::f16>(|i| half::f16::from_bits(spread_bits(i)));
        reduces_as_a_fold::<f32>(|i| f32::from_bits(u32::from(spread_bits(i)).rotate_right(9)));
    }

    /// 16-bit patterns that visit every f16 exponent, both signs and the mantissas' ends.
    fn spread_bits(i: usize) -> u16 {
        const MANTISSAS: [u16; 6] = [0, 1, 0x3f, 0x200, 0x155, 0x3ff];
        let mantissa = MANTISSAS[i % 6];
        let exponent = ((i / 6) * 7 % 32) as u16;
        let sign = ((i / 3) % 2) as u16;
        let f16_like = sign << 15 | exponent << 10 | mantissa;
        // Every other one rotated, so that bf16's exponent field varies too.
        if i % 2 == 0 {
            f16_like
        } else {
            f16_like.rotate_left(3)
        }
    }

    #[test]
    fn copies_at_every_alignment() {
        let src: Vec<u8> = (0..100u8).collect();
        for (offset, len, align) in [(0, 96, 8), (4, 68, 4), (2, 38, 2), (1, 37, 1), (0, 0, 8)] {
            let mut dst = vec![0xffu8; 100];
            let (s, d) = (
                src.as_ptr() as usize + offset,
                dst.as_mut_ptr() as usize + offset,
            );
            // (Vec<u8> is 8-aligned in practice; the test needs it.)
            assert_eq!((s - offset) % 8, 0);
            assert_eq!((d - offset) % 8, 0);
            // SAFETY: both ranges lie inside their vectors, aligned to `align`.
            unsafe { copy(s, d, len, align) };
            assert_eq!(dst[offset..offset + len], src[offset..offset + len]);
            assert!(dst[..offset]
                .iter()
                .chain(&dst[offset + len..])
                .all(|&b| b == 0xff));
        }
    }

    #[test]
    fn failures_are_the_kernels() {
        assert_eq!(failure(TIMED_OUT).code(), Errc::Runtime);
        assert_eq!(failure(MISMATCHED).code(), Errc::Invalid);
    }
}
