//! The collectives' one kernel, written once with `#[sycl::kernel]` for every device.
//!
//! Each launch is one step of one operation: every work-group first meets the same work-group
//! of every peer (a signal word per group and rank in each rank's pad, written by the peers,
//! spun on locally), then moves its share of the elements. See spec/collectives.md.

// The kernel takes every rank's pad and data as parameters of its own (the language has no
// pointer tables): many arguments, by design.
#![allow(clippy::too_many_arguments)]

// (The vector forms name their element types: the halves are the `half` crate's.)
use half::{bf16, f16};

/// The most ranks a team has: one pad and one data parameter each.
pub(crate) const MAX_RANKS: usize = 8;

/// What a step does after the meeting (`kind`).
pub(crate) const MOVE_NONE: u32 = 0;
/// `out[i] = b0[first + i] op b1[first + i] op ..` over the team's ranks, in rank order.
pub(crate) const MOVE_REDUCE: u32 = 1;
/// `out[p * stride + i] = bp[first + i]` for every rank `p` (where `out` has room).
pub(crate) const MOVE_GATHER: u32 = 2;
/// `out[i] = b_root[first + i]`.
pub(crate) const MOVE_FROM_ROOT: u32 = 3;

/// `a op b`: 0 sum, 1 product, 2 minimum, 3 maximum (wrapping for integers; IEEE for floats,
/// halves rounded after each operation).
#[sycl::kernel_fn]
fn combine<T: sycl::Scalar>(op: u32, a: T, b: T) -> T {
    if op == 0 {
        a + b
    } else if op == 1 {
        a * b
    } else if op == 2 {
        a.min(b)
    } else {
        a.max(b)
    }
}

/// Where work-group `g`'s chunk `c` lies in the halves: in a ring (`ring` set), slot `c % 2`
/// of the group's two, each `chunk` long; else at `place`, its offset in the step plus
/// `first`.
#[sycl::kernel_fn]
fn chunk_at(ring: u32, g: usize, c: usize, chunk: usize, place: usize) -> usize {
    if ring != 0 {
        (2 * g + c % 2) * chunk
    } else {
        place
    }
}

/// `acc[i] = acc[i] op other[i]`: one node's contribution folded into a block, in node order,
/// by the inter-node phase of [`WorldTeam`](super::WorldTeam) (the same arithmetic as
/// `team_step`'s, so every rank folds to the same bits).
#[sycl::kernel]
pub(crate) fn fold<T: sycl::Scalar>(op: u32, acc: &mut [T], other: &[T]) {
    let i = global_id(0);
    if i < acc.len() && i < other.len() {
        acc[i] = combine(op, acc[i], other[i]);
    }
}

/// `dst[i] = src[i]`: a graph's copy into the symmetric buffer (a queue copy is not a
/// kernel, and graphs hold kernels).
#[sycl::kernel]
pub(crate) fn copy<T: sycl::Scalar>(src: &[T], dst: &mut [T]) {
    let i = global_id(0);
    if i < dst.len() && i < src.len() {
        dst[i] = src[i];
    }
}

/// `dst[i] = src[i]` over 16-byte vectors: [`copy`] for ranges that are whole, aligned
/// vectors (one 16-byte load and store per work-item where the device has them).
#[sycl::kernel]
pub(crate) fn copy_vectors(src: &[[u32; 4]], dst: &mut [[u32; 4]]) {
    let i = global_id(0);
    if i < dst.len() && i < src.len() {
        dst[i] = src[i];
    }
}

/// One step of a collective. Work-group `g` owns elements `[g * block, (g + 1) * block)` of
/// the step (clipped to `count`), in chunks of `chunk` elements; for each chunk `c` it:
/// 1. writes `word` (epoch `e + c`, where `e` is the step's first epoch, in the high 32 bits;
///    its signature in the low 32) into slot `group * 8 + me` of each peer's pad (`q1`..: the
///    peers after this rank, in order), release, system scope; a step that is not staged
///    (below) has its values in place from the start and writes its last epoch, once;
/// 2. waits until slot `group * 8 + p` of its own pad holds epoch `e + c` (or a later one of
///    the step) for every peer `p`, acquire; a peer at one of the step's epochs under another
///    signature, or past the step's epochs, is a mismatch (`Failure::Mismatched`), and more
///    than `limit` polls a time-out (`Failure::TimedOut`);
/// 3. moves the chunk as `kind` says (the `MOVE_` constants), reading the ranks' data `b0`..
///    (rank order) from element `first`.
///
/// A step of `chunks` chunks takes the epochs `e .. e + chunks` (and the runtime skips one
/// more where `chunks` is even: every step spans an odd number). Its slots are in the pad's
/// first half where `e` is even, in its second where `e` is odd: consecutive steps alternate,
/// and a peer meets this rank's next step on the other half's slots, so a word in this step's
/// slot at or past `e` is the peer's word for this step, which must be within its epochs.
/// `block` and `chunk` are whole 16-byte vectors' worth of elements, set by the runtime the
/// same way on every rank and in every form of the kernel, so that every rank's group `g`
/// covers the same elements.
///
/// `flags` bit 0, staged: each group also copies its chunks of this rank's input (`out` when
/// `in_place`) into `stage` (this rank's half, from `first`), chunk 0 before the first
/// arrival and chunk `c + 1` while chunk `c` moves, and the moves read this rank's values
/// from the input: the copy costs no launch of its own, `b{me}` is not read, and from the
/// second chunk on the copy overlaps the peers' reads (the step's input is copied and read at
/// once instead of one after the other).
///
/// `flags` bit 2, ring: the step streams through the halves, which need not hold it. Group
/// `g`'s chunk `c` lies at `(2 g + c % 2) * chunk` of each half (two slots per group)
/// instead of at `first` plus its offset, and every rank arrives chunk by chunk, staged or
/// not: a rank that arrived at `e + c + 1` has moved chunk `c`, so a staged rank may put
/// chunk `c + 2` into that slot once every peer is there (its wait before chunk `c + 1`'s
/// move). Every rank of a ring step stages or reads only (a broadcast's non-roots).
///
/// `flags` bit 1, relative: the step is part of a replayed graph, and its epoch is the high
/// 32 bits of `word` plus the base in the low 32 bits of this rank's pad word `len - 2`
/// (set by the replay before its first step).
///
/// Epochs compare in serial-number arithmetic (peers are never more than two steps apart), so
/// they wrap harmlessly and no pad is ever reset. The pad's last word is this rank's poison:
/// the code of the first failed wait (4 timed out, 5 mismatched; a compare-exchange, so a
/// later failure does not hide it); a step that finds it set fails at once with the same
/// error, so a team that failed stays failed, and a wait that finds it set (another group's
/// failure: a mismatch seen in one group leaves the others' peers silent) fails with it at
/// once instead of at the time-out.
///
/// Every step kernel runs in work-groups of 256 (`GROUP`, checked beside it).
#[sycl::kernel(reqd_work_group_size(256))]
pub(crate) fn team_step<T: sycl::Scalar>(
    me: u32,
    n: u32,
    word: u64,
    limit: u64,
    kind: u32,
    op: u32,
    root: u32,
    first: usize,
    count: usize,
    stride: usize,
    block: usize,
    chunk: usize,
    flags: u32,
    in_place: u32,
    own: &mut [u64],
    q1: &mut [u64],
    q2: &mut [u64],
    q3: &mut [u64],
    q4: &mut [u64],
    q5: &mut [u64],
    q6: &mut [u64],
    q7: &mut [u64],
    b0: &[T],
    b1: &[T],
    b2: &[T],
    b3: &[T],
    b4: &[T],
    b5: &[T],
    b6: &[T],
    b7: &[T],
    input: &[T],
    stage: &mut [T],
    out: &mut [T],
) {
    let g = group_id(0);
    let lid = local_id(0);
    // A replayed graph's steps carry epochs relative to the base word its replay set.
    let base = if (flags & 2) != 0 {
        atomic_load(own, own.len() - 2, Ordering::Relaxed, MemoryScope::Device) as u32
    } else {
        0u32
    };
    let epoch = ((word >> 32) as u32).wrapping_add(base);
    let sig = word as u32;
    // Slots of steps whose first epoch is odd lie in the pad's second half: every step
    // spans an odd number of epochs, so consecutive steps alternate, and a peer's word for
    // its next step never lands on its word for this one before this rank read it.
    let pair = ((epoch & 1) as usize) * ((own.len() - 2) / 2);
    let at = pair + g * 8 + me as usize;
    // Each work-group moves one contiguous block, its work-items strided within it: adjacent
    // work-items touch adjacent elements (coalesced on GPUs), and on the CPU, where a group's
    // work-items run one after another, the block stays in cache between them.
    let l = local_range(0);
    let start = g * block;
    let end = if start + block < count {
        start + block
    } else {
        count
    };
    let chunks = if block > chunk {
        (block + chunk - 1) / chunk
    } else {
        1
    };
    let staged = flags & 1;
    // Ring: chunk c lies in slot c % 2 of this group's two in the half (`chunk_at`).
    let ring = (flags >> 2) & 1;
    // Every chunk's arrival is its own: a staged rank's tells that chunk is in its half, and
    // in a ring every rank's also tells that it has read the chunk before.
    let stepwise = staged | ring;
    // Staged: chunk 0 of this rank's input goes into its half before this group's first
    // arrival, which the peers' same group waits for.
    if staged != 0 {
        let hi = if start + chunk < end {
            start + chunk
        } else {
            end
        };
        let place = chunk_at(ring, g, 0usize, chunk, first + start);
        for i in (start + lid..hi).step_by(l) {
            let v = if in_place != 0 { out[i] } else { input[i] };
            stage[place + i - start] = v;
        }
    }
    // A failed step poisons the team: every later step of this rank fails at once, with the
    // first failure's error, instead of meeting peers whose steps no longer line up.
    let poison = own.len() - 1;
    let earlier = atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
    if earlier == 4 {
        kernel_fail(Failure::TimedOut);
    } else if earlier != 0 {
        kernel_fail(Failure::Mismatched);
    }
    barrier();
    // Rank p's value of element i: its part's, or for this rank when staged, its input's.
    let mine_at = if staged != 0 { me } else { 8u32 };
    for c in 0..chunks {
        let now = epoch.wrapping_add(c as u32);
        // A staged rank arrives chunk by chunk, as its copy goes; any other has all its
        // values in place already and arrives at the step's last epoch at once, so that its
        // peers' later waits pass at their first poll instead of keeping step with it.
        let arrive = if stepwise != 0 {
            now
        } else {
            epoch.wrapping_add(chunks as u32 - 1)
        };
        let stamped = ((arrive as u64) << 32) | (sig as u64);
        if lid == 0 && (stepwise != 0 || c == 0) {
            if n > 1 {
                atomic_store(q1, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 2 {
                atomic_store(q2, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 3 {
                atomic_store(q3, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 4 {
                atomic_store(q4, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 5 {
                atomic_store(q5, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 6 {
                atomic_store(q6, at, stamped, Ordering::Release, MemoryScope::System);
            }
            if n > 7 {
                atomic_store(q7, at, stamped, Ordering::Release, MemoryScope::System);
            }
        }
        if lid < n as usize && lid != me as usize {
            let slot = pair + g * 8 + lid;
            let mut polls = 0u64;
            loop {
                let w = atomic_load(own, slot, Ordering::Acquire, MemoryScope::System);
                // Words of this slot's earlier steps are before `epoch`. A peer at or past it
                // is at this step: under another signature, or past the step's epochs (its
                // step spans more), it runs another call.
                let since = ((w >> 32) as u32).wrapping_sub(epoch);
                if since < 0x8000_0000u32 {
                    if w as u32 != sig || since >= chunks as u32 {
                        atomic_compare_exchange(
                            own,
                            poison,
                            0u64,
                            5u64,
                            Ordering::Relaxed,
                            MemoryScope::Device,
                        );
                        kernel_fail(Failure::Mismatched);
                    }
                    if since >= c as u32 {
                        break;
                    }
                }
                polls += 1;
                // Another group of this rank failed (a mismatch it saw, which this group's
                // peer may never resolve): fail with it now, not at the time-out.
                if (polls & 1023) == 0 {
                    let failed = atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
                    if failed == 4 {
                        kernel_fail(Failure::TimedOut);
                    } else if failed != 0 {
                        kernel_fail(Failure::Mismatched);
                    }
                }
                if polls >= limit {
                    atomic_compare_exchange(
                        own,
                        poison,
                        0u64,
                        4u64,
                        Ordering::Relaxed,
                        MemoryScope::Device,
                    );
                    kernel_fail(Failure::TimedOut);
                }
            }
        }
        barrier();
        let lo = start + c * chunk;
        let hi = if lo + chunk < end { lo + chunk } else { end };
        let place = chunk_at(ring, g, c, chunk, first + lo);
        let next_place = chunk_at(ring, g, c + 1, chunk, first + hi);
        // Staged: the next chunk into the stage while this one moves; the peers wait for it
        // at the next arrival. (In a ring its slot held chunk c - 1, which every peer has
        // read: each arrived at this chunk's epoch after its move of that one.)
        if staged != 0 && c + 1 < chunks {
            let next = if hi + chunk < end { hi + chunk } else { end };
            for i in (hi + lid..next).step_by(l) {
                let v = if in_place != 0 { out[i] } else { input[i] };
                stage[next_place + i - hi] = v;
            }
        }
        if kind == 1 {
            for i in (lo + lid..hi).step_by(l) {
                let k = place + i - lo;
                let v = if mine_at == 8 {
                    b0[k]
                } else if in_place != 0 {
                    out[i]
                } else {
                    input[i]
                };
                let mut acc = if mine_at == 0 { v } else { b0[k] };
                if n > 1 {
                    acc = combine(op, acc, if mine_at == 1 { v } else { b1[k] });
                }
                if n > 2 {
                    acc = combine(op, acc, if mine_at == 2 { v } else { b2[k] });
                }
                if n > 3 {
                    acc = combine(op, acc, if mine_at == 3 { v } else { b3[k] });
                }
                if n > 4 {
                    acc = combine(op, acc, if mine_at == 4 { v } else { b4[k] });
                }
                if n > 5 {
                    acc = combine(op, acc, if mine_at == 5 { v } else { b5[k] });
                }
                if n > 6 {
                    acc = combine(op, acc, if mine_at == 6 { v } else { b6[k] });
                }
                if n > 7 {
                    acc = combine(op, acc, if mine_at == 7 { v } else { b7[k] });
                }
                out[i] = acc;
            }
        } else if kind == 2 {
            // Rank p's element i lands at p * stride + i, where the output has room (the last
            // slice of a two-shot all-reduce is short).
            let len = out.len();
            for i in (lo + lid..hi).step_by(l) {
                let k = place + i - lo;
                let v = if mine_at == 8 { b0[k] } else { input[i] };
                if i < len {
                    out[i] = if mine_at == 0 { v } else { b0[k] };
                }
                if n > 1 && stride + i < len {
                    out[stride + i] = if mine_at == 1 { v } else { b1[k] };
                }
                if n > 2 && 2 * stride + i < len {
                    out[2 * stride + i] = if mine_at == 2 { v } else { b2[k] };
                }
                if n > 3 && 3 * stride + i < len {
                    out[3 * stride + i] = if mine_at == 3 { v } else { b3[k] };
                }
                if n > 4 && 4 * stride + i < len {
                    out[4 * stride + i] = if mine_at == 4 { v } else { b4[k] };
                }
                if n > 5 && 5 * stride + i < len {
                    out[5 * stride + i] = if mine_at == 5 { v } else { b5[k] };
                }
                if n > 6 && 6 * stride + i < len {
                    out[6 * stride + i] = if mine_at == 6 { v } else { b6[k] };
                }
                if n > 7 && 7 * stride + i < len {
                    out[7 * stride + i] = if mine_at == 7 { v } else { b7[k] };
                }
            }
        } else if kind == 3 {
            for i in (lo + lid..hi).step_by(l) {
                let k = place + i - lo;
                let v = if root == 0 {
                    b0[k]
                } else if root == 1 {
                    b1[k]
                } else if root == 2 {
                    b2[k]
                } else if root == 3 {
                    b3[k]
                } else if root == 4 {
                    b4[k]
                } else if root == 5 {
                    b5[k]
                } else if root == 6 {
                    b6[k]
                } else {
                    b7[k]
                };
                out[i] = v;
            }
        }
        // Every work-item's copy of the next chunk is done before its arrival.
        barrier();
    }
}

/// `team_step` for whole 16-byte vectors of `T` (`[T; 16 / size_of::<T>()]`): the meeting as
/// there, then a reduce or gather of a vector per work-item and iteration, each load and
/// store one 16-byte access where the device has one (`CopyField`). This rank's own values
/// come from `stage` (its half: filled here from the input when `staged`, before the arrival,
/// else by a copy before the launch); `b{me}` is not read. The runtime uses it for steps
/// whose offsets, counts and ranges are whole vectors.
macro_rules! vector_step {
    ($name:ident, $t:ident, $v:tt) => {
        #[sycl::kernel(reqd_work_group_size(256))]
        pub(crate) fn $name(
            me: u32,
            n: u32,
            word: u64,
            limit: u64,
            kind: u32,
            op: u32,
            first: usize,
            count: usize,
            stride: usize,
            block: usize,
            chunk: usize,
            flags: u32,
            in_place: u32,
            own: &mut [u64],
            q1: &mut [u64],
            q2: &mut [u64],
            q3: &mut [u64],
            q4: &mut [u64],
            q5: &mut [u64],
            q6: &mut [u64],
            q7: &mut [u64],
            b0: &[[$t; $v]],
            b1: &[[$t; $v]],
            b2: &[[$t; $v]],
            b3: &[[$t; $v]],
            b4: &[[$t; $v]],
            b5: &[[$t; $v]],
            b6: &[[$t; $v]],
            b7: &[[$t; $v]],
            input: &[[$t; $v]],
            stage: &mut [[$t; $v]],
            out: &mut [[$t; $v]],
        ) {
            let g = group_id(0);
            let lid = local_id(0);
            let base = if (flags & 2) != 0 {
                atomic_load(own, own.len() - 2, Ordering::Relaxed, MemoryScope::Device) as u32
            } else {
                0u32
            };
            let epoch = ((word >> 32) as u32).wrapping_add(base);
            let sig = word as u32;
            let pair = ((epoch & 1) as usize) * ((own.len() - 2) / 2);
            let at = pair + g * 8 + me as usize;
            let l = local_range(0);
            let start = g * block;
            let end = if start + block < count {
                start + block
            } else {
                count
            };
            let chunks = if block > chunk {
                (block + chunk - 1) / chunk
            } else {
                1
            };
            let staged = flags & 1;
            let ring = (flags >> 2) & 1;
            let stepwise = staged | ring;
            if staged != 0 {
                let hi = if start + chunk < end {
                    start + chunk
                } else {
                    end
                };
                let place = chunk_at(ring, g, 0usize, chunk, first + start);
                if in_place != 0 {
                    for i in (start + lid..hi).step_by(l) {
                        let v = out[i];
                        stage[place + i - start] = v;
                    }
                } else {
                    for i in (start + lid..hi).step_by(l) {
                        let v = input[i];
                        stage[place + i - start] = v;
                    }
                }
            }
            let poison = own.len() - 1;
            let earlier = atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
            if earlier == 4 {
                kernel_fail(Failure::TimedOut);
            } else if earlier != 0 {
                kernel_fail(Failure::Mismatched);
            }
            barrier();
            for c in 0..chunks {
                let now = epoch.wrapping_add(c as u32);
                let arrive = if stepwise != 0 {
                    now
                } else {
                    epoch.wrapping_add(chunks as u32 - 1)
                };
                let stamped = ((arrive as u64) << 32) | (sig as u64);
                if lid == 0 && (stepwise != 0 || c == 0) {
                    if n > 1 {
                        atomic_store(q1, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 2 {
                        atomic_store(q2, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 3 {
                        atomic_store(q3, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 4 {
                        atomic_store(q4, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 5 {
                        atomic_store(q5, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 6 {
                        atomic_store(q6, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                    if n > 7 {
                        atomic_store(q7, at, stamped, Ordering::Release, MemoryScope::System);
                    }
                }
                if lid < n as usize && lid != me as usize {
                    let slot = pair + g * 8 + lid;
                    let mut polls = 0u64;
                    loop {
                        let w = atomic_load(own, slot, Ordering::Acquire, MemoryScope::System);
                        let since = ((w >> 32) as u32).wrapping_sub(epoch);
                        if since < 0x8000_0000u32 {
                            if w as u32 != sig || since >= chunks as u32 {
                                atomic_compare_exchange(
                                    own,
                                    poison,
                                    0u64,
                                    5u64,
                                    Ordering::Relaxed,
                                    MemoryScope::Device,
                                );
                                kernel_fail(Failure::Mismatched);
                            }
                            if since >= c as u32 {
                                break;
                            }
                        }
                        polls += 1;
                        // Another group of this rank failed (a mismatch it saw, which this group's
                        // peer may never resolve): fail with it now, not at the time-out.
                        if (polls & 1023) == 0 {
                            let failed =
                                atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
                            if failed == 4 {
                                kernel_fail(Failure::TimedOut);
                            } else if failed != 0 {
                                kernel_fail(Failure::Mismatched);
                            }
                        }
                        if polls >= limit {
                            atomic_compare_exchange(
                                own,
                                poison,
                                0u64,
                                4u64,
                                Ordering::Relaxed,
                                MemoryScope::Device,
                            );
                            kernel_fail(Failure::TimedOut);
                        }
                    }
                }
                barrier();
                let lo = start + c * chunk;
                let hi = if lo + chunk < end { lo + chunk } else { end };
                let place = chunk_at(ring, g, c, chunk, first + lo);
                let next_place = chunk_at(ring, g, c + 1, chunk, first + hi);
                // Staged: chunk c + 1 goes into the stage in the same loop as chunk c's move, so
                // that the copy's loads and the peers' reads are in flight together.
                let ahead = if staged != 0 && c + 1 < chunks {
                    1u32
                } else {
                    0u32
                };
                if kind == 1 {
                    for i in (lo + lid..hi).step_by(l) {
                        if ahead != 0 && i + chunk < end {
                            let nx = i + chunk;
                            if in_place != 0 {
                                let y = out[nx];
                                stage[next_place + i - lo] = y;
                            } else {
                                let y = input[nx];
                                stage[next_place + i - lo] = y;
                            }
                        }
                        let k = place + i - lo;
                        // Rank 0's value, then each next rank's combined in, in rank order.
                        let mine = stage[k];
                        let mut acc = stage[k];
                        if me != 0 {
                            let x = b0[k];
                            for j in 0..$v {
                                acc[j] = x[j];
                            }
                        }
                        if n > 1 {
                            if me == 1 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b1[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 2 {
                            if me == 2 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b2[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 3 {
                            if me == 3 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b3[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 4 {
                            if me == 4 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b4[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 5 {
                            if me == 5 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b5[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 6 {
                            if me == 6 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b6[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        if n > 7 {
                            if me == 7 {
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], mine[j]);
                                }
                            } else {
                                let x = b7[k];
                                for j in 0..$v {
                                    acc[j] = combine(op, acc[j], x[j]);
                                }
                            }
                        }
                        out[i] = acc;
                    }
                } else if kind == 2 {
                    for i in (lo + lid..hi).step_by(l) {
                        if ahead != 0 && i + chunk < end {
                            let nx = i + chunk;
                            if in_place != 0 {
                                let y = out[nx];
                                stage[next_place + i - lo] = y;
                            } else {
                                let y = input[nx];
                                stage[next_place + i - lo] = y;
                            }
                        }
                        let k = place + i - lo;
                        let mine = stage[k];
                        if me == 0 {
                            out[i] = mine;
                        } else {
                            let x = b0[k];
                            out[i] = x;
                        }
                        if n > 1 {
                            if me == 1 {
                                out[stride + i] = mine;
                            } else {
                                let x = b1[k];
                                out[stride + i] = x;
                            }
                        }
                        if n > 2 {
                            if me == 2 {
                                out[2 * stride + i] = mine;
                            } else {
                                let x = b2[k];
                                out[2 * stride + i] = x;
                            }
                        }
                        if n > 3 {
                            if me == 3 {
                                out[3 * stride + i] = mine;
                            } else {
                                let x = b3[k];
                                out[3 * stride + i] = x;
                            }
                        }
                        if n > 4 {
                            if me == 4 {
                                out[4 * stride + i] = mine;
                            } else {
                                let x = b4[k];
                                out[4 * stride + i] = x;
                            }
                        }
                        if n > 5 {
                            if me == 5 {
                                out[5 * stride + i] = mine;
                            } else {
                                let x = b5[k];
                                out[5 * stride + i] = x;
                            }
                        }
                        if n > 6 {
                            if me == 6 {
                                out[6 * stride + i] = mine;
                            } else {
                                let x = b6[k];
                                out[6 * stride + i] = x;
                            }
                        }
                        if n > 7 {
                            if me == 7 {
                                out[7 * stride + i] = mine;
                            } else {
                                let x = b7[k];
                                out[7 * stride + i] = x;
                            }
                        }
                    }
                }
                barrier();
            }
        }
    };
}

/// One step that pushes instead of pulling: each work-item writes its items of this rank's
/// values into slot `me` of every rank's inbox (`d1`..: slot `me` of the peers after this
/// rank, in order, as the pads; `inbox`: this rank's own, `n` slots of `count` items, slot
/// `p` at `p * count`), then its group meets as in `team_step` (one epoch: `word`'s,
/// relative when `flags` bit 1 is set), then moves from its own inbox only, as `kind` says:
/// - `MOVE_REDUCE`: `out[i]` is the `n` slots' item `i` combined in rank order (a one-shot
///   all-reduce with `stride` 0: every rank gets the same values; a reduce-scatter with
///   `stride` the block length: rank `r`'s slot gets block `r` of `input`, at `r * stride`);
/// - `MOVE_GATHER`: `out[p * count + i]` is slot `p`'s item `i` (an all-gather).
///
/// This rank's values are `input` (`out` when `in_place`, an all-reduce in place). Every
/// read after the meeting is local, where a pulling step reads every peer's values across
/// the link after it (2x H200, f32 all-reduce, 512 B: 3.6 against 4.5 us per op in a graph).
///
/// Work-group `g` owns items `[g * block, (g + 1) * block)` (clipped to `count`), the same
/// on every rank and in every form (`[T; 1]` to `[T; 8]`): the peers' group `g` wrote
/// exactly those before their arrival. A peer writes this rank's inbox only from the step
/// after this rank's previous step on the same half met it, as every step of the team.
macro_rules! push_step {
    ($name:ident $(<$g:ident: sycl::Scalar>)?, $t:ident, $v:tt) => {
        #[sycl::kernel(reqd_work_group_size(256))]
        pub(crate) fn $name$(<$g: sycl::Scalar>)?(
            me: u32,
            n: u32,
            word: u64,
            limit: u64,
            kind: u32,
            op: u32,
            count: usize,
            stride: usize,
            block: usize,
            flags: u32,
            in_place: u32,
            own: &mut [u64],
            q1: &mut [u64],
            q2: &mut [u64],
            q3: &mut [u64],
            q4: &mut [u64],
            q5: &mut [u64],
            q6: &mut [u64],
            q7: &mut [u64],
            d1: &mut [[$t; $v]],
            d2: &mut [[$t; $v]],
            d3: &mut [[$t; $v]],
            d4: &mut [[$t; $v]],
            d5: &mut [[$t; $v]],
            d6: &mut [[$t; $v]],
            d7: &mut [[$t; $v]],
            inbox: &mut [[$t; $v]],
            input: &[[$t; $v]],
            out: &mut [[$t; $v]],
        ) {
            let g = group_id(0);
            let lid = local_id(0);
            let l = local_range(0);
            let base = if (flags & 2) != 0 {
                atomic_load(own, own.len() - 2, Ordering::Relaxed, MemoryScope::Device) as u32
            } else {
                0u32
            };
            let epoch = ((word >> 32) as u32).wrapping_add(base);
            let sig = word as u32;
            let start = g * block;
            let end = if start + block < count {
                start + block
            } else {
                count
            };
            let mine = me as usize * count;
            let ranks = n as usize;
            // This rank's values into every inbox, its own too (read back below by the same
            // work-item: the move then reads every rank's values alike).
            if in_place != 0 {
                for i in (start + lid..end).step_by(l) {
                    let v = out[i];
                    inbox[mine + i] = v;
                    if n > 1 {
                        d1[i] = v;
                    }
                    if n > 2 {
                        d2[i] = v;
                    }
                    if n > 3 {
                        d3[i] = v;
                    }
                    if n > 4 {
                        d4[i] = v;
                    }
                    if n > 5 {
                        d5[i] = v;
                    }
                    if n > 6 {
                        d6[i] = v;
                    }
                    if n > 7 {
                        d7[i] = v;
                    }
                }
            } else if stride == 0 {
                for i in (start + lid..end).step_by(l) {
                    let v = input[i];
                    inbox[mine + i] = v;
                    if n > 1 {
                        d1[i] = v;
                    }
                    if n > 2 {
                        d2[i] = v;
                    }
                    if n > 3 {
                        d3[i] = v;
                    }
                    if n > 4 {
                        d4[i] = v;
                    }
                    if n > 5 {
                        d5[i] = v;
                    }
                    if n > 6 {
                        d6[i] = v;
                    }
                    if n > 7 {
                        d7[i] = v;
                    }
                }
            } else {
                // Rank r's block of the input into rank r's inbox.
                for i in (start + lid..end).step_by(l) {
                    let v = input[mine_block(me, stride) + i];
                    inbox[mine + i] = v;
                    if n > 1 {
                        let w = input[peer_block(me, 1usize, n, stride) + i];
                        d1[i] = w;
                    }
                    if n > 2 {
                        let w = input[peer_block(me, 2usize, n, stride) + i];
                        d2[i] = w;
                    }
                    if n > 3 {
                        let w = input[peer_block(me, 3usize, n, stride) + i];
                        d3[i] = w;
                    }
                    if n > 4 {
                        let w = input[peer_block(me, 4usize, n, stride) + i];
                        d4[i] = w;
                    }
                    if n > 5 {
                        let w = input[peer_block(me, 5usize, n, stride) + i];
                        d5[i] = w;
                    }
                    if n > 6 {
                        let w = input[peer_block(me, 6usize, n, stride) + i];
                        d6[i] = w;
                    }
                    if n > 7 {
                        let w = input[peer_block(me, 7usize, n, stride) + i];
                        d7[i] = w;
                    }
                }
            }
            // A team that failed stays failed (as `team_step`).
            let poison = own.len() - 1;
            let earlier = atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
            if earlier == 4 {
                kernel_fail(Failure::TimedOut);
            } else if earlier != 0 {
                kernel_fail(Failure::Mismatched);
            }
            // Every work-item's writes are in before the group's arrival (released by it).
            barrier();
            let pair = ((epoch & 1) as usize) * ((own.len() - 2) / 2);
            let at = pair + g * 8 + me as usize;
            let stamped = ((epoch as u64) << 32) | (sig as u64);
            if lid == 0 {
                if n > 1 {
                    atomic_store(q1, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 2 {
                    atomic_store(q2, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 3 {
                    atomic_store(q3, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 4 {
                    atomic_store(q4, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 5 {
                    atomic_store(q5, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 6 {
                    atomic_store(q6, at, stamped, Ordering::Release, MemoryScope::System);
                }
                if n > 7 {
                    atomic_store(q7, at, stamped, Ordering::Release, MemoryScope::System);
                }
            }
            if lid < ranks && lid != me as usize {
                let slot = pair + g * 8 + lid;
                let mut polls = 0u64;
                loop {
                    let w = atomic_load(own, slot, Ordering::Acquire, MemoryScope::System);
                    let since = ((w >> 32) as u32).wrapping_sub(epoch);
                    if since < 0x8000_0000u32 {
                        if w as u32 != sig || since != 0 {
                            atomic_compare_exchange(
                                own,
                                poison,
                                0u64,
                                5u64,
                                Ordering::Relaxed,
                                MemoryScope::Device,
                            );
                            kernel_fail(Failure::Mismatched);
                        }
                        break;
                    }
                    polls += 1;
                    // Another group of this rank failed (a mismatch it saw, which this group's
                    // peer may never resolve): fail with it now, not at the time-out.
                    if (polls & 1023) == 0 {
                        let failed =
                            atomic_load(own, poison, Ordering::Relaxed, MemoryScope::Device);
                        if failed == 4 {
                            kernel_fail(Failure::TimedOut);
                        } else if failed != 0 {
                            kernel_fail(Failure::Mismatched);
                        }
                    }
                    if polls >= limit {
                        atomic_compare_exchange(
                            own,
                            poison,
                            0u64,
                            4u64,
                            Ordering::Relaxed,
                            MemoryScope::Device,
                        );
                        kernel_fail(Failure::TimedOut);
                    }
                }
            }
            barrier();
            if kind == 1 {
                for i in (start + lid..end).step_by(l) {
                    let mut acc = inbox[i];
                    for r in 1..ranks {
                        let x = inbox[r * count + i];
                        for j in 0..$v {
                            acc[j] = combine(op, acc[j], x[j]);
                        }
                    }
                    out[i] = acc;
                }
            } else {
                for i in (start + lid..end).step_by(l) {
                    for r in 0..ranks {
                        let x = inbox[r * count + i];
                        out[r * count + i] = x;
                    }
                }
            }
        }
    };
}

/// Where this rank's own block of a push step's input starts (`stride` 0: the whole input).
#[sycl::kernel_fn]
fn mine_block(me: u32, stride: usize) -> usize {
    me as usize * stride
}

/// Where the block for the peer `k` after this rank starts in a push step's input.
#[sycl::kernel_fn]
fn peer_block(me: u32, k: usize, n: u32, stride: usize) -> usize {
    (me as usize + k) % n as usize * stride
}

push_step!(push_step_x1<T: sycl::Scalar>, T, 1);

/// Each element type's vector forms, over its own 16-byte width: a generic kernel would
/// translate and compile every width for every type, two thirds of them never launched.
macro_rules! vector_forms {
    ($($t:ident: $v:tt, $step:ident, $push:ident;)*) => {$(
        vector_step!($step, $t, $v);
        push_step!($push, $t, $v);
    )*};
}

vector_forms! {
    i32: 4, team_step_x4_i32, push_step_x4_i32;
    u32: 4, team_step_x4_u32, push_step_x4_u32;
    i64: 2, team_step_x2_i64, push_step_x2_i64;
    u64: 2, team_step_x2_u64, push_step_x2_u64;
    f32: 4, team_step_x4_f32, push_step_x4_f32;
    f64: 2, team_step_x2_f64, push_step_x2_f64;
    f16: 8, team_step_x8_f16, push_step_x8_f16;
    bf16: 8, team_step_x8_bf16, push_step_x8_bf16;
}
