//! [`Ranks`]: the ranks of an MPI communicator, grouped by node (feature `mpi`).

use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

use super::node::{Link, NodeRanks};
use super::timed::Wait;
use super::{NodeKey, RanksOptions};
use crate::{Device, Error, Result};

/// The ranks of an MPI communicator, grouped by node. See the [module](super) docs.
pub struct Ranks {
    /// A duplicate of the caller's communicator: our messages never match the caller's.
    pub(super) world: SimpleCommunicator,
    /// For every rank of `world`, the index of its node.
    node_of: Vec<usize>,
    node_count: usize,
    /// This rank's node: its ranks (ordered by their rank in `world`) and their communicator.
    node: NodeRanks,
    pub(super) cuda_aware_mpi: bool,
    /// Pinned host memory for staged transfers, kept between calls.
    pub(super) stage_send: parking_lot::Mutex<Option<crate::Usm<u8>>>,
    pub(super) stage_recv: parking_lot::Mutex<Option<crate::Usm<u8>>>,
}

impl std::fmt::Debug for Ranks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranks")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("node", &self.node_index())
            .field("node_count", &self.node_count)
            .field("local_rank", &self.local_rank())
            .field("local_size", &self.local_size())
            .field("device", &self.device().name())
            .finish()
    }
}

fn mpi_err(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(crate::Errc::Runtime, format!("{what}: {why}"))
}

impl AsRef<NodeRanks> for Ranks {
    fn as_ref(&self) -> &NodeRanks {
        &self.node
    }
}

impl Ranks {
    /// Groups the ranks of `comm` by node and picks each rank's device. Collective over
    /// `comm`: every rank calls it with the same options.
    ///
    /// Errors: `Errc::Invalid` for `NodeKey::RanksPerNode(0)`; `Errc::Runtime` when no device
    /// matches the [`DeviceChoice`](super::DeviceChoice), a rank's channel cannot be bound, or
    /// a rank does not take part within [`RanksOptions::timeout`] (or, once the node's pidfds
    /// are open, exits).
    pub fn new(comm: &impl Communicator, options: RanksOptions) -> Result<Ranks> {
        let rank = comm.rank();
        let key = match options.node_key {
            NodeKey::SharedMemory => 0,
            NodeKey::RanksPerNode(0) => {
                return Err(Error::invalid(
                    "NodeKey::RanksPerNode(0): a node needs ranks",
                ))
            }
            NodeKey::RanksPerNode(n) => rank as usize / n,
            NodeKey::Key(k) => k as usize,
        };
        // Before the pidfds are open only the deadline is watched.
        let wait = |what| Wait {
            what,
            rank,
            timeout: options.timeout,
            watch: None,
            abandoned: None,
        };
        // MPI has no non-blocking communicator constructors: every rank must have arrived
        // before the blocking ones run, or one rank that never calls `new` hangs the others.
        wait("Ranks::new (every rank must call it)").barrier(comm)?;
        let world = comm.duplicate();
        let shared = world.split_shared(rank);
        // Within a host, ranks with the same key form a node. Colors must be non-negative.
        let node = shared
            .split_by_color_with_key(Color::with_value((key & 0x7fff_ffff) as i32), rank)
            .ok_or_else(|| mpi_err("MPI_Comm_split", "no communicator"))?;
        let local_rank = node.rank() as usize;

        // Which node every rank is on: the world rank of its node's first rank, numbered.
        let leader = wait("Ranks::new: node leaders").broadcast(&node, 0, rank)?;
        let leaders = wait("Ranks::new: node leaders").all_gather(&world, &[leader])?;
        let mut distinct = leaders.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let node_of: Vec<usize> = leaders
            .iter()
            .map(|l| distinct.binary_search(l).unwrap_or(0))
            .collect();

        let members = wait("Ranks::new: node members").all_gather(&node, &[rank])?;
        let pids = wait("Ranks::new: pids").all_gather(&node, &[std::process::id()])?;
        let node = NodeRanks::assemble(local_rank, members, pids, options, Link::Mpi(node))?;
        Ok(Ranks {
            world,
            node_of,
            node_count: distinct.len(),
            node,
            cuda_aware_mpi: super::transfer::mpi_is_cuda_aware(),
            stage_send: parking_lot::Mutex::new(None),
            stage_recv: parking_lot::Mutex::new(None),
        })
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// The index of this rank's node (0..[`Ranks::node_count`]).
    pub fn node_index(&self) -> usize {
        self.node_of[self.rank()]
    }

    /// How many nodes the ranks form.
    pub fn node_count(&self) -> usize {
        self.node_count
    }

    /// The node of `rank`; `Errc::Invalid` for a rank outside the communicator.
    pub fn node_of(&self, rank: usize) -> Result<usize> {
        self.node_of
            .get(rank)
            .copied()
            .ok_or_else(|| Error::invalid(format!("rank {rank} of {}", self.size())))
    }

    /// Whether `rank` is on this rank's node (its memory can be opened here).
    pub fn is_on_my_node(&self, rank: usize) -> bool {
        self.node_of.get(rank) == Some(&self.node_index())
    }

    /// This rank's node: what [`Ranks::node_buffer`] and a
    /// [`Team`](crate::collective::Team) use.
    pub fn node(&self) -> &NodeRanks {
        &self.node
    }

    /// This rank's index within its node.
    pub fn local_rank(&self) -> usize {
        self.node.local_rank()
    }

    /// Ranks on this node.
    pub fn local_size(&self) -> usize {
        self.node.local_size()
    }

    /// The communicator rank of local rank `local`; `Errc::Invalid` when out of range.
    pub fn rank_of_local(&self, local: usize) -> Result<usize> {
        self.node.rank_of_local(local)
    }

    /// The local rank of communicator rank `rank`, if it is on this node.
    pub fn local_of_rank(&self, rank: usize) -> Option<usize> {
        self.node.members.iter().position(|&r| r as usize == rank)
    }

    /// This rank's device.
    pub fn device(&self) -> &Device {
        self.node.device()
    }

    /// Whether the MPI library moves CUDA device memory itself (Open MPI's
    /// `MPIX_Query_cuda_support`); if not, [`Ranks::exchange`] stages CUDA memory through
    /// pinned host memory.
    pub fn mpi_is_cuda_aware(&self) -> bool {
        self.cuda_aware_mpi
    }

    /// Our duplicate of the communicator passed to [`Ranks::new`] (same ranks and order), for
    /// the caller's own MPI calls.
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// The communicator of this node's ranks, ordered by communicator rank.
    pub fn node_communicator(&self) -> &SimpleCommunicator {
        match &self.node.link {
            Link::Mpi(comm) => comm,
            Link::Hub(_) => unreachable!("a Ranks node is linked by MPI"),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &RanksOptions {
        self.node.options()
    }

    /// A barrier over this node's ranks that fails, instead of hanging, when another rank of
    /// the node exits (`Errc::Runtime`, naming it) or [`RanksOptions::timeout`] passes.
    pub fn node_barrier(&self) -> Result<()> {
        self.node.barrier()
    }

    /// [`NodeRanks::node_buffer`] of this rank's node.
    pub fn node_buffer<T: bytemuck::Pod>(
        &self,
        queue: &crate::Queue,
        len: usize,
    ) -> Result<super::NodeBuffer<'_, T>> {
        self.node.node_buffer(queue, len)
    }

    /// [`NodeRanks::node_share`] of this rank's node.
    pub fn node_share<T: bytemuck::Pod>(
        &self,
        queue: &crate::Queue,
        memory: Result<crate::Usm<T>>,
    ) -> Result<super::NodeBuffer<'_, T>> {
        self.node.node_share(queue, memory)
    }

    /// Every rank's `mine` (all of one length), in rank order: a timed `MPI_Iallgather` over
    /// every rank, watching this node's ranks; refused once a collective was abandoned.
    // (Used by the collectives' `WorldTeam` only.)
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    pub(crate) fn world_all_gather_u64(
        &self,
        what: &'static str,
        mine: &[u64],
    ) -> Result<Vec<u64>> {
        self.node.mpi_wait(what)?.all_gather(&self.world, mine)
    }

    /// A timed `MPI_Ibarrier` over every rank.
    // (Used by the collectives' `WorldTeam` only.)
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    pub(crate) fn world_barrier(&self, what: &'static str) -> Result<()> {
        self.node.mpi_wait(what)?.barrier(&self.world)
    }

    /// `Errc::Runtime` naming the first other rank of this node that has exited.
    pub fn check_node_alive(&self) -> Result<()> {
        self.node.check_alive()
    }
}
