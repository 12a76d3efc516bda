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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::usm::{MemoryRecord, Use, UsmRange};
use crate::{Error, Event, Queue, Result};

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
    /// A reduction's loop, typed and checked when planned.
    Reduce(Box<dyn FnOnce() + Send>),
}

/// A step's meeting: the kernels' for `groups` work-groups.
struct Meeting {
    /// Whether this rank arrived already (a meeting resumes where it stopped).
    arrived: bool,
    word: u64,
    me: usize,
    groups: usize,
    /// This rank's pad.
    own: usize,
    /// Each peer's rank and pad.
    peers: Vec<(usize, usize)>,
    timeout: Duration,
}

/// An operation's commands, planned on the calling thread and run in order by one host task.
#[derive(Default)]
pub(super) struct Plan {
    work: Vec<Work>,
    uses: Vec<(Arc<MemoryRecord>, Use)>,
}

/// The host address of `r`, recording the use; `Errc::Invalid` for memory this process does
/// not map (never on the native CPU).
fn address<T: bytemuck::Pod>(
    uses: &mut Vec<(Arc<MemoryRecord>, Use)>,
    r: &UsmRange<T>,
    use_: Use,
) -> Result<usize> {
    if !r.is_host_accessible() {
        return Err(r.record.not_host_accessible());
    }
    match uses.iter_mut().find(|(rec, _)| Arc::ptr_eq(rec, &r.record)) {
        Some((_, u)) if use_ == Use::Write => *u = Use::Write,
        Some(_) => {}
        None => uses.push((r.record.clone(), use_)),
    }
    usize::try_from(r.as_ptr()).map_err(|_| Error::invalid("an address beyond this host's"))
}

impl Plan {
    /// Copies `src` into `dst` (the same length).
    pub(super) fn copy<T: Element>(&mut self, src: &UsmRange<T>, dst: &UsmRange<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "team: a copy of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let src_at = address(&mut self.uses, src, Use::Read)?;
        let dst_at = address(&mut self.uses, dst, Use::Write)?;
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

    /// A meeting under `word` for `groups` work-groups: this rank's pad `own`, then each
    /// peer's `(rank, pad)`.
    pub(super) fn meet(
        &mut self,
        word: u64,
        me: usize,
        groups: usize,
        own: &UsmRange<u64>,
        peers: &[(usize, UsmRange<u64>)],
        timeout: Duration,
    ) -> Result<()> {
        let slots = groups * super::MAX_RANKS;
        if own.len() < PAD_WORDS || slots >= PAD_WORDS || me >= super::MAX_RANKS {
            return Err(Error::invalid("team: a meeting outside the pads"));
        }
        let own = address(&mut self.uses, own, Use::Write)?;
        let peers = peers
            .iter()
            .map(
                |(rank, pad)| match pad.len() >= PAD_WORDS && *rank < super::MAX_RANKS {
                    true => Ok((*rank, address(&mut self.uses, pad, Use::Write)?)),
                    false => Err(Error::invalid("team: a peer pad shorter than a pad")),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        self.work.push(Work::Meet(Meeting {
            arrived: false,
            word,
            me,
            groups,
            own,
            peers,
            timeout,
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
        if srcs.is_empty() || srcs.iter().any(|s| s.len() != count) {
            return Err(Error::invalid(
                "team: a reduction over ranges of other lengths",
            ));
        }
        let srcs = srcs
            .iter()
            .map(|s| address(&mut self.uses, s, Use::Read))
            .collect::<Result<Vec<_>>>()?;
        let out = address(&mut self.uses, out, Use::Write)?;
        self.work.push(Work::Reduce(Box::new(move || {
            // SAFETY: each address starts `count` aligned `T`s of memory this process maps
            // (bounds checked above), alive until the host task completes (`submit`).
            unsafe { reduce::<T>(op, &srcs, out, count) }
        })));
        Ok(())
    }

    /// Submits the plan after `deps`, as one command of `queue` using the memory it planned
    /// (admitted and tracked). While the queue is idle and `deps` completed, this thread runs
    /// it, up to a meeting whose peers take longer than [`INLINE_WAIT`]; the rest runs as a
    /// host task, so that a call never blocks on its peers (they may call later, after
    /// something this rank does next). A failure is the call's error when it happens here,
    /// else the event's: a meeting's `Errc::Runtime` (timed out) or `Errc::Invalid`
    /// (mismatched), as the kernels'.
    pub(super) fn submit(self, queue: &Queue, deps: &[&Event]) -> Result<Event> {
        let Plan { work, uses } = self;
        let uses: Vec<(&Arc<MemoryRecord>, Use)> = uses.iter().map(|(r, u)| (r, *u)).collect();
        let mut work: VecDeque<Work> = work.into();
        queue.host_work_using(&uses, deps, move |inline| {
            let until = inline.then(|| Instant::now() + INLINE_WAIT);
            while let Some(w) = work.front_mut() {
                if let Work::Meet(m) = w {
                    if !meet(m, until)? {
                        return Ok(false);
                    }
                    work.pop_front();
                    continue;
                }
                run(work.pop_front().expect("a command"));
            }
            Ok(true)
        })
    }
}

/// How long a call run on the calling thread waits for its peers before it hands the rest of
/// the operation to its queue (the native queue's worker spins as long for its next command).
const INLINE_WAIT: Duration = Duration::from_micros(50);

/// Runs a copy or a reduction.
fn run(work: Work) {
    match work {
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
        Work::Reduce(f) => f(),
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
/// peer's arrival at this epoch or a later one (acquire) in this rank's, per work-group; a
/// peer at this epoch under another signature is a mismatch, no arrival within the time-out a
/// time-out; either poisons the pad. A poisoned pad fails at once. With `until`, gives up
/// (`Ok(false)`, to be called again) when the peers have not all arrived by then.
fn meet(m: &mut Meeting, until: Option<Instant>) -> Result<bool> {
    // The pads were checked to hold PAD_WORDS words when planned (`Plan::meet`), slots are
    // below `groups * MAX_RANKS < PAD_WORDS`, and pad words are only ever accessed atomically
    // (here, by the kernels and by the peers).
    let own = |w: usize| {
        // SAFETY: as just said; `w` is a slot or the poison word.
        unsafe { slot(m.own, w) }
    };
    let poison = own(PAD_WORDS - 1);
    if !m.arrived {
        match poison.load(Ordering::Relaxed) {
            0 => {}
            TIMED_OUT => return Err(failure(TIMED_OUT)),
            _ => return Err(failure(MISMATCHED)),
        }
        for &(_, pad) in &m.peers {
            for g in 0..m.groups {
                // SAFETY: as above.
                unsafe { slot(pad, g * super::MAX_RANKS + m.me) }.store(m.word, Ordering::Release);
            }
        }
        m.arrived = true;
    }
    let epoch = (m.word >> 32) as u32;
    let sig = m.word as u32;
    let start = Instant::now();
    let deadline = until.unwrap_or(start + m.timeout);
    for g in 0..m.groups {
        for &(p, _) in &m.peers {
            let word = own(g * super::MAX_RANKS + p);
            let mut polls = 0u32;
            loop {
                let w = word.load(Ordering::Acquire);
                let ahead = ((w >> 32) as u32).wrapping_sub(epoch);
                if ahead < 0x8000_0000 {
                    if ahead == 0 && w as u32 != sig {
                        poison.store(MISMATCHED, Ordering::Relaxed);
                        return Err(failure(MISMATCHED));
                    }
                    break;
                }
                polls = polls.wrapping_add(1);
                pause(polls, start);
                if polls % 64 == 0 && Instant::now() >= deadline {
                    if until.is_some() {
                        return Ok(false);
                    }
                    poison.store(TIMED_OUT, Ordering::Relaxed);
                    return Err(failure(TIMED_OUT));
                }
            }
        }
    }
    Ok(true)
}

/// Between polls: spin first (a peer on another core arrives within microseconds), then yield
/// (ranks may outnumber cores: the peer needs this one), then sleep (a peer far behind).
fn pause(polls: u32, start: Instant) {
    if polls < 256 {
        std::hint::spin_loop();
    } else if polls % 64 != 0 || start.elapsed() < Duration::from_millis(1) {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Copies `bytes` from `src` to `dst` in volatile accesses of `align` bytes.
///
/// # Safety
/// Both ranges are valid for `bytes` bytes and aligned to `align` (1, 2, 4 or 8), which
/// divides `bytes`.
unsafe fn copy(src: usize, dst: usize, bytes: usize, align: usize) {
    /// # Safety
    /// As `copy`'s, for `W`.
    unsafe fn words<W: Copy>(src: usize, dst: usize, bytes: usize) {
        let (s, d) = (src as *const W, dst as *mut W);
        for i in 0..bytes / std::mem::size_of::<W>() {
            // SAFETY: `i` is below the ranges' length in `W`s; both are aligned for `W`.
            unsafe { d.add(i).write_volatile(s.add(i).read_volatile()) };
        }
    }
    // SAFETY: the caller's contract, for the width it gives.
    unsafe {
        match align {
            8 => words::<u64>(src, dst, bytes),
            4 => words::<u32>(src, dst, bytes),
            2 => words::<u16>(src, dst, bytes),
            _ => words::<u8>(src, dst, bytes),
        }
    }
}

/// `out[i] = srcs[0][i] op srcs[1][i] op ..` for `i < count`, in volatile accesses.
///
/// # Safety
/// Every address starts `count` aligned, live `T`s.
unsafe fn reduce<T: Element>(op: u32, srcs: &[usize], out: usize, count: usize) {
    /// # Safety
    /// As `reduce`'s.
    #[inline(always)]
    unsafe fn with<T: Element>(f: impl Fn(T, T) -> T, srcs: &[usize], out: usize, count: usize) {
        let (first, rest) = srcs.split_first().expect("a source");
        for i in 0..count {
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

    #[test]
    fn failures_are_the_kernels() {
        assert_eq!(failure(TIMED_OUT).code(), Errc::Runtime);
        assert_eq!(failure(MISMATCHED).code(), Errc::Invalid);
    }
}
