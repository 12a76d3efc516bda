//! [`WorldTeam`]: collectives over every rank of a [`Ranks`], across nodes (feature `mpi`).
//!
//! Hierarchical, as the issue asks: a [`Team`] per node on shared memory, MPI between the
//! ranks of the same local rank on different nodes. An all-reduce is a reduce-scatter in the
//! node (each local rank gets one block of its node's reduction), an exchange of those blocks
//! between nodes, a fold of them in node order, and an all-gather in the node: each rank moves
//! `1 / local_size` of the data between nodes, and every rank gets bitwise the same result
//! (node order, then local rank order within each node's reduction).

use super::kernels::fold;
use super::{Element, ReduceOp, Team, TeamOptions};
use crate::ranks::Ranks;
use crate::usm::{AsUsmRange, UsmRange};
use crate::{Errc, Error, Event, Queue, Range, Result, Usm};

/// Collectives over every rank of a [`Ranks`]: a [`Team`] on each node, MPI between nodes.
/// Every rank calls the same operations in the same order (as in MPI); each call takes
/// dependencies and returns the event of its last command.
///
/// The inter-node phase runs on the calling thread ([`Ranks::exchange`]: blocking, staged
/// through pinned host memory where MPI cannot reach device memory), so a call returns once
/// this rank's data has crossed; the node phases are commands of the team's queue.
///
/// Every node must have the same number of ranks (`Errc::FeatureNotSupported` otherwise). With
/// one node it is the node's [`Team`].
///
/// Failures: an operation that fails on one rank makes its node's team fail (`Errc::Invalid`
/// for arguments the ranks disagree on, as in a [`Team`]), and the ranks of other nodes fail
/// when their exchange with it times out ([`RanksOptions::timeout`](crate::ranks::RanksOptions),
/// `Errc::Runtime`). A failed world team refuses every later operation.
///
/// ```no_run
/// # fn main() -> sycl::Result<()> {
/// use sycl::collective::{ReduceOp, TeamOptions, WorldTeam};
/// use sycl::ranks::mpi::traits::*;
/// let universe = sycl::ranks::mpi::initialize().unwrap();
/// let ranks = sycl::ranks::Ranks::new(&universe.world(), Default::default())?;
/// let q = sycl::Queue::in_order(ranks.device())?;
/// let mut world = WorldTeam::new(&ranks, &q, TeamOptions::default())?;
/// let x = sycl::malloc_device::<f32>(1 << 20, &q)?;
/// q.fill(&x, 1.0f32, &[])?.wait()?;
/// world.all_reduce(&x, &x, ReduceOp::Sum, &[])?.wait()?; // every element: ranks.size()
/// # Ok(()) }
/// ```
pub struct WorldTeam<'r> {
    ranks: &'r Ranks,
    team: Team<'r>,
    /// For every node, the world rank of the rank of this local rank there.
    across: Vec<usize>,
    /// For every world rank, its node and local rank.
    place: Vec<(usize, usize)>,
    /// The first failure: every later operation is refused with it.
    failed: Option<Error>,
}

impl std::fmt::Debug for WorldTeam<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldTeam")
            .field("rank", &self.ranks.rank())
            .field("size", &self.ranks.size())
            .field("nodes", &self.ranks.node_count())
            .field("team", &self.team)
            .finish()
    }
}

/// `len` zeroed-or-not elements of device USM on `q` (at least one: zero-sized allocations
/// are refused).
fn scratch<T: Element>(q: &Queue, len: usize) -> Result<Usm<T>> {
    crate::malloc_device::<T>(len.max(1), q)
}

impl<'r> WorldTeam<'r> {
    /// The world team of `ranks`: this node's [`Team`] (`options` as [`Team::new`]), and where
    /// every rank is. Collective over every rank.
    ///
    /// Errors: those of [`Team::new`]; `Errc::FeatureNotSupported` when nodes have different
    /// numbers of ranks; `Errc::Runtime` when a rank does not take part in time.
    pub fn new(ranks: &'r Ranks, queue: &Queue, options: TeamOptions) -> Result<WorldTeam<'r>> {
        let team = Team::new(ranks, queue, options)?;
        let mine = [
            ranks.node_index() as u64,
            ranks.local_rank() as u64,
            ranks.local_size() as u64,
        ];
        let all = ranks.world_all_gather_u64("WorldTeam::new: places", &mine)?;
        let place: Vec<(usize, usize)> = all
            .chunks_exact(3)
            .map(|p| (p[0] as usize, p[1] as usize))
            .collect();
        if let Some(other) = all.chunks_exact(3).find(|p| p[2] != mine[2]) {
            return Err(Error::new(
                Errc::FeatureNotSupported,
                format!(
                    "a world team needs the same number of ranks on every node: node {} has {}, \
                     node {} has {}",
                    ranks.node_index(),
                    mine[2],
                    other[0],
                    other[2]
                ),
            ));
        }
        let me = ranks.local_rank();
        let across = (0..ranks.node_count())
            .map(|j| {
                place.iter().position(|&p| p == (j, me)).ok_or_else(|| {
                    Error::new(Errc::Runtime, format!("node {j} has no local rank {me}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(WorldTeam {
            ranks,
            team,
            across,
            place,
            failed: None,
        })
    }

    /// This rank in the communicator of its [`Ranks`].
    pub fn rank(&self) -> usize {
        self.ranks.rank()
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> usize {
        self.ranks.size()
    }

    /// This node's team (its queue runs the node phases).
    pub fn team(&self) -> &Team<'r> {
        &self.team
    }

    /// Runs `op` unless the team failed before; a failure fails the team.
    fn guarded(&mut self, op: impl FnOnce(&mut Self) -> Result<Event>) -> Result<Event> {
        if let Some(err) = &self.failed {
            return Err(Error::new(
                err.code(),
                format!("the world team failed earlier: {err}"),
            ));
        }
        let result = op(self);
        if let Err(err) = &result {
            self.failed = Some(err.clone());
        }
        result
    }

    fn queue(&self) -> Queue {
        self.team.queue().clone()
    }

    /// `recv` = the reduction of every rank's `send` (in place when they are the same
    /// memory): in the node, then across nodes in node order. `send` and `recv` have one
    /// length.
    pub fn all_reduce<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        if self.ranks.node_count() == 1 {
            return self.team.all_reduce(&send, &recv, op, deps);
        }
        self.guarded(|w| w.all_reduce_across(&send, &recv, op, deps))
    }

    fn all_reduce_across<T: Element>(
        &mut self,
        send: &UsmRange<T>,
        recv: &UsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        if send.len() != recv.len() {
            return Err(Error::invalid(format!(
                "all_reduce of {} elements into {}",
                send.len(),
                recv.len()
            )));
        }
        let q = self.queue();
        let (l, k, c) = (self.team.size(), self.ranks.node_count(), send.len());
        let b = c.div_ceil(l);
        // 1. In the node: this rank's block of the node's reduction. A count that is not a
        //    multiple of the node's ranks is padded with zeros (the padding's results are
        //    dropped).
        let padded_send = if c == l * b {
            None
        } else {
            let p = scratch::<T>(&q, l * b)?;
            let copied = q.copy(send, &p.range(0..c)?, deps)?;
            let filled = q.fill(&p.range(c..l * b)?, T::zeroed(), &[&copied])?;
            Some((p, filled))
        };
        let blocks = scratch::<T>(&q, k * b)?;
        let node = self.ranks.node_index();
        let block = |j: usize| blocks.range(j * b..(j + 1) * b);
        let reduced = match &padded_send {
            None => self.team.reduce_scatter(send, &block(node)?, op, deps)?,
            Some((p, filled)) => {
                self.team
                    .reduce_scatter(&p.range(0..l * b)?, &block(node)?, op, &[filled])?
            }
        };
        // 2. Across nodes: the same block of every other node's reduction.
        for (j, &peer) in self.across.iter().enumerate() {
            if j != node {
                self.ranks
                    .exchange(&q, &block(node)?, &block(j)?, peer, &[&reduced])?;
            }
        }
        // 3. Folded in node order into block 0, the same on every rank that holds this block.
        let mut last = reduced;
        for j in 1..k {
            if b > 0 {
                last = q.parallel_for(
                    Range::d1(b),
                    &[&last],
                    fold(op.code(), &block(0)?, &block(j)?),
                )?;
            }
        }
        // 4. In the node: every rank's folded block.
        if c == l * b {
            self.team.all_gather(&block(0)?, recv, &[&last])
        } else {
            let gathered = scratch::<T>(&q, l * b)?;
            let ev = self
                .team
                .all_gather(&block(0)?, &gathered.range(0..l * b)?, &[&last])?;
            q.copy(&gathered.range(0..c)?, recv, &[&ev])
        }
    }

    /// `recv` (`size()` times `send`'s length) = every rank's `send`, in communicator rank
    /// order.
    pub fn all_gather<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        if self.ranks.node_count() == 1 {
            return self.team.all_gather(&send, &recv, deps);
        }
        self.guarded(|w| w.all_gather_across(&send, &recv, deps))
    }

    fn all_gather_across<T: Element>(
        &mut self,
        send: &UsmRange<T>,
        recv: &UsmRange<T>,
        deps: &[&Event],
    ) -> Result<Event> {
        let (l, k, c) = (self.team.size(), self.ranks.node_count(), send.len());
        if recv.len() != self.size() * c {
            return Err(Error::invalid(format!(
                "all_gather of {c} elements from {} ranks into {}",
                self.size(),
                recv.len()
            )));
        }
        let q = self.queue();
        // 1. Across nodes: the sends of this local rank on every node, in node order.
        let node = self.ranks.node_index();
        let across = scratch::<T>(&q, k * c)?;
        let mine = q.copy(send, &across.range(node * c..(node + 1) * c)?, deps)?;
        for (j, &peer) in self.across.iter().enumerate() {
            if j != node {
                self.ranks
                    .exchange(&q, send, &across.range(j * c..(j + 1) * c)?, peer, deps)?;
            }
        }
        // 2. In the node: [local rank][node][element].
        let all = scratch::<T>(&q, l * k * c)?;
        let gathered = self.team.all_gather(
            &across.range(0..k * c)?,
            &all.range(0..l * k * c)?,
            &[&mine],
        )?;
        // 3. Into communicator rank order.
        let mut last = gathered.clone();
        for (w, &(j, r)) in self.place.iter().enumerate() {
            if c > 0 {
                let from = (r * k + j) * c;
                last = q.copy(
                    &all.range(from..from + c)?,
                    &recv.sub(w * c..(w + 1) * c)?,
                    &[&gathered],
                )?;
            }
        }
        // The queue is in order: the last copy's event completes after every copy.
        Ok(last)
    }

    /// `recv` = this rank's block (communicator rank order) of the reduction of every rank's
    /// `send` (`size()` blocks of `recv`'s length).
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
        deps: &[&Event],
    ) -> Result<Event> {
        let (send, recv) = (send.usm_range(), recv.usm_range());
        if self.ranks.node_count() == 1 {
            return self.team.reduce_scatter(&send, &recv, op, deps);
        }
        self.guarded(|w| {
            let c = recv.len();
            if send.len() != w.size() * c {
                return Err(Error::invalid(format!(
                    "reduce_scatter of {} elements over {} ranks into {c}",
                    send.len(),
                    w.size()
                )));
            }
            let q = w.queue();
            let whole = scratch::<T>(&q, send.len())?;
            let whole = whole.range(0..send.len())?;
            let reduced = w.all_reduce_across(&send, &whole, op, deps)?;
            let me = w.rank();
            q.copy(&whole.sub(me * c..(me + 1) * c)?, &recv, &[&reduced])
        })
    }

    /// `buf` = communicator rank `root`'s `buf` on every rank: in the root's node, to the
    /// same local rank on every other node, then in each of those nodes.
    pub fn broadcast<T: Element>(
        &mut self,
        buf: &impl AsUsmRange<T>,
        root: usize,
        deps: &[&Event],
    ) -> Result<Event> {
        let buf = buf.usm_range();
        if self.ranks.node_count() == 1 {
            let local = self.ranks.local_of_rank(root).ok_or_else(|| {
                Error::invalid(format!("broadcast from rank {root} of {}", self.size()))
            })?;
            return self.team.broadcast(&buf, local, deps);
        }
        self.guarded(|w| {
            let &(root_node, root_local) = w.place.get(root).ok_or_else(|| {
                Error::invalid(format!("broadcast from rank {root} of {}", w.size()))
            })?;
            let q = w.queue();
            let node = w.ranks.node_index();
            let nothing = buf.sub(0..0)?;
            if node == root_node {
                let ev = w.team.broadcast(&buf, root_local, deps)?;
                if w.ranks.local_rank() == root_local {
                    for (j, &peer) in w.across.iter().enumerate() {
                        if j != node {
                            w.ranks.exchange(&q, &buf, &nothing, peer, &[&ev])?;
                        }
                    }
                }
                Ok(ev)
            } else {
                let mut arrived = Vec::new();
                if w.ranks.local_rank() == root_local {
                    w.ranks
                        .exchange(&q, &nothing, &buf, w.across[root_node], deps)?;
                } else {
                    arrived.extend(deps.iter().copied());
                }
                w.team.broadcast(&buf, root_local, &arrived)
            }
        })
    }

    /// Completes when every rank of every node has reached it (and its `deps` completed).
    pub fn barrier(&mut self, deps: &[&Event]) -> Result<Event> {
        if self.ranks.node_count() == 1 {
            return self.team.barrier(deps);
        }
        self.guarded(|w| {
            w.team.barrier(deps)?.wait()?;
            w.ranks.world_barrier("WorldTeam::barrier")?;
            w.team.queue().barrier(&[])
        })
    }
}
