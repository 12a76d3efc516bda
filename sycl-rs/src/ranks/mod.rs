//! Ranks started by MPI (`mpirun`, `srun`): sycl-rs shares memory and events zero-copy among
//! the ranks of one node, and MPI carries data between nodes (feature `mpi`, on the `mpi`
//! crate).
//!
//! [`Ranks::new`] groups the ranks of a communicator by node (MPI's shared-memory split; a
//! [`NodeKey`] can split further, so that tests form several "nodes" on one machine), gives
//! each rank its local rank and a device (one rank per GPU, round-robin), and
//! [`Ranks::node_buffer`] builds a buffer every rank of the node can read and write: each rank
//! allocates its part and an IPC event, the handles travel through MPI, and every rank opens
//! every peer's part. Between nodes, [`Ranks::exchange`] moves bytes through MPI: straight from
//! device memory when the MPI library is CUDA-aware (Open MPI's `MPIX_Query_cuda_support`) or
//! the memory is host-accessible, else staged through pinned host memory, the copies
//! overlapped with the transfer.
//!
//! Descriptors cannot ride inside MPI messages. A rank takes a peer's descriptors with
//! `pidfd_getfd` where the kernel permits it (the same user, no Yama restriction); where it does
//! not, the pair falls back, automatically, to a rank channel (a Unix socket carrying
//! `SCM_RIGHTS`) whose far end must be the very process MPI named for that rank (its pid, as
//! the kernel reports it for the socket). [`DescriptorPath`] can force either path.
//!
//! Every collective here waits with a deadline ([`RanksOptions::timeout`]) and watches the
//! node's other ranks through pidfds: a rank that dies makes the others fail with an error
//! instead of hanging.
//!
//! ```no_run
//! # fn main() -> sycl::Result<()> {
//! use mpi::traits::*;
//! let universe = mpi::initialize().unwrap();
//! let ranks = sycl::ranks::Ranks::new(&universe.world(), sycl::ranks::RanksOptions::default())?;
//! let q = sycl::Queue::in_order(ranks.device())?;
//! let buffer = ranks.node_buffer::<f32>(&q, 1 << 20)?;
//! // Write into the next rank's part of the node buffer, zero-copy.
//! let next = (ranks.local_rank() + 1) % ranks.local_size();
//! q.fill(&buffer.peer(next)?.range(0..16)?, 1.0f32, &[])?.wait()?;
//! # Ok(()) }
//! ```
#![allow(unsafe_code)]

mod node_buffer;
mod timed;
mod transfer;

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::time::Duration;

use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags};

use crate::ipc::transport::Listener;
use crate::{Device, DeviceFilter, Errc, Error, Result};
use timed::Wait;

pub use mpi;
pub use node_buffer::NodeBuffer;

/// How ranks are grouped into nodes. Ranks are on one node only if MPI's shared-memory split
/// puts them together: a key can split a node further, never join two hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKey {
    /// MPI's shared-memory split alone (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`).
    SharedMemory,
    /// Consecutive blocks of this many ranks of the communicator (rank / n) form a node:
    /// `SYCL_RS_RANKS_PER_NODE=2` with 4 ranks on one machine makes two nodes of two.
    RanksPerNode(usize),
    /// Ranks that pass the same key (and share memory) form a node.
    Key(u32),
}

/// Which device each rank gets.
#[derive(Clone, Debug)]
pub enum DeviceChoice {
    /// The devices an `ONEAPI_DEVICE_SELECTOR`-style filter names (`None`: the environment's
    /// `ONEAPI_DEVICE_SELECTOR` if set, else every GPU, else the default device), one per local
    /// rank, round-robin.
    RoundRobin(Option<String>),
    /// This device for every rank.
    Device(Device),
}

/// How descriptors of node-local handles reach the importing rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescriptorPath {
    /// `pidfd_getfd` where the kernel permits it, the rank channel for the pairs where it does
    /// not.
    Auto,
    /// `pidfd_getfd` only (an error where it is not permitted).
    Pidfd,
    /// The rank channel only (`SCM_RIGHTS`).
    Channel,
}

/// Options of [`Ranks::new`]. `Default` reads `SYCL_RS_RANKS_PER_NODE` (a [`NodeKey`]
/// override), `SYCL_RS_DESCRIPTOR_PATH` (`auto`, `pidfd`, `channel`) and
/// `SYCL_RS_RANKS_TIMEOUT_S` from the environment.
#[derive(Clone, Debug)]
pub struct RanksOptions {
    /// How ranks group into nodes.
    pub node_key: NodeKey,
    /// Each rank's device.
    pub device: DeviceChoice,
    /// How descriptors travel.
    pub descriptors: DescriptorPath,
    /// The longest any wait on another rank may take before it is an error.
    pub timeout: Duration,
}

impl Default for RanksOptions {
    fn default() -> Self {
        let node_key = match std::env::var("SYCL_RS_RANKS_PER_NODE")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            Some(n) if n > 0 => NodeKey::RanksPerNode(n),
            _ => NodeKey::SharedMemory,
        };
        let descriptors = match std::env::var("SYCL_RS_DESCRIPTOR_PATH").as_deref() {
            Ok("pidfd") => DescriptorPath::Pidfd,
            Ok("channel") => DescriptorPath::Channel,
            _ => DescriptorPath::Auto,
        };
        let timeout = std::env::var("SYCL_RS_RANKS_TIMEOUT_S")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(Duration::from_secs(60), Duration::from_secs_f64);
        RanksOptions {
            node_key,
            device: DeviceChoice::RoundRobin(None),
            descriptors,
            timeout,
        }
    }
}

/// The ranks of an MPI communicator, grouped by node. See the [module](self) docs.
pub struct Ranks {
    /// A duplicate of the caller's communicator: our messages never match the caller's.
    world: SimpleCommunicator,
    /// The ranks of this node, ordered by their rank in `world`.
    node: SimpleCommunicator,
    /// For every rank of `world`, the index of its node.
    node_of: Vec<usize>,
    node_count: usize,
    /// For every local rank, its rank in `world`.
    node_members: Vec<i32>,
    /// For every local rank, its process id (as MPI's peers reported it, checked against
    /// the kernel's view where descriptors are taken).
    pids: Vec<u32>,
    /// pidfds of the node's other ranks (`None` at our own local rank): a rank that exits
    /// makes its pidfd readable.
    peer_pidfds: Vec<Option<OwnedFd>>,
    /// Our end of the rank channel, and every local rank's channel name.
    listener: Listener,
    channel_names: Vec<String>,
    device: Device,
    options: RanksOptions,
    cuda_aware_mpi: bool,
    /// Pinned host memory for staged transfers, kept between calls.
    stage_send: parking_lot::Mutex<Option<crate::Usm<u8>>>,
    stage_recv: parking_lot::Mutex<Option<crate::Usm<u8>>>,
    /// Why a collective of these ranks was abandoned (a time-out, a rank that exited): MPI
    /// cannot cancel it, so every later collective is refused.
    abandoned: OnceLock<String>,
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
            .field("device", &self.device.name())
            .finish()
    }
}

fn mpi_err(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(Errc::Runtime, format!("{what}: {why}"))
}

impl Ranks {
    /// Groups the ranks of `comm` by node and picks each rank's device. Collective over
    /// `comm`: every rank calls it with the same options.
    ///
    /// Errors: `Errc::Invalid` for `NodeKey::RanksPerNode(0)`; `Errc::Runtime` when no device
    /// matches the [`DeviceChoice`], a rank's channel cannot be bound, or a rank does not
    /// take part within [`RanksOptions::timeout`] (or, once the node's pidfds are open, exits).
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

        let node_members = wait("Ranks::new: node members").all_gather(&node, &[rank])?;
        let pids = wait("Ranks::new: pids").all_gather(&node, &[std::process::id()])?;
        let peer_pidfds = pids
            .iter()
            .enumerate()
            .map(|(r, &pid)| {
                if r == local_rank {
                    return Ok(None);
                }
                let pid = Pid::from_raw(pid as i32)
                    .ok_or_else(|| Error::invalid(format!("local rank {r} reported pid {pid}")))?;
                rustix::process::pidfd_open(pid, PidfdFlags::empty())
                    .map(Some)
                    .map_err(|e| {
                        Error::new(
                            Errc::Runtime,
                            format!("pidfd_open of local rank {r} (pid {pid:?}): {e}"),
                        )
                    })
            })
            .collect::<Result<Vec<_>>>()?;

        let listener = Listener::bind_unique()?;
        let device = pick_device(&options.device, local_rank)?;
        let mut ranks = Ranks {
            world,
            node,
            node_of,
            node_count: distinct.len(),
            node_members,
            pids,
            peer_pidfds,
            listener,
            channel_names: Vec::new(),
            device,
            options,
            cuda_aware_mpi: transfer::mpi_is_cuda_aware(),
            stage_send: parking_lot::Mutex::new(None),
            stage_recv: parking_lot::Mutex::new(None),
            abandoned: OnceLock::new(),
        };
        ranks.channel_names = ranks.collective("Ranks::new: rank channels", |w| {
            gather_strings(w, &ranks.node, ranks.listener.name())
        })?;
        // Every rank has its channel bound and its pidfds open before anyone uses them.
        ranks.node_barrier()?;
        Ok(ranks)
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

    /// This rank's index within its node.
    pub fn local_rank(&self) -> usize {
        self.node.rank() as usize
    }

    /// Ranks on this node.
    pub fn local_size(&self) -> usize {
        self.node.size() as usize
    }

    /// The communicator rank of local rank `local`; `Errc::Invalid` when out of range.
    pub fn rank_of_local(&self, local: usize) -> Result<usize> {
        self.node_members
            .get(local)
            .map(|&r| r as usize)
            .ok_or_else(|| Error::invalid(format!("local rank {local} of {}", self.local_size())))
    }

    /// The local rank of communicator rank `rank`, if it is on this node.
    pub fn local_of_rank(&self, rank: usize) -> Option<usize> {
        self.node_members.iter().position(|&r| r as usize == rank)
    }

    /// This rank's device.
    pub fn device(&self) -> &Device {
        &self.device
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
        &self.node
    }

    /// The options in force.
    pub fn options(&self) -> &RanksOptions {
        &self.options
    }

    /// A barrier over this node's ranks that fails, instead of hanging, when another rank of
    /// the node exits (`Errc::Runtime`, naming it) or [`RanksOptions::timeout`] passes.
    pub fn node_barrier(&self) -> Result<()> {
        self.collective("node barrier", |w| w.barrier(&self.node))
    }

    /// Runs a collective of these ranks through `run`, with the deadline and the node watch;
    /// refused (`Errc::Runtime`) once an earlier collective was abandoned.
    fn collective<R>(&self, what: &'static str, run: impl FnOnce(&Wait) -> Result<R>) -> Result<R> {
        if let Some(why) = self.abandoned.get() {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "rank {}: {what}: refused, an earlier collective of these ranks failed \
                     ({why}); MPI cannot cancel it, so these ranks can run no more collectives",
                    self.rank()
                ),
            ));
        }
        run(&Wait {
            what,
            rank: self.world.rank(),
            timeout: self.options.timeout,
            watch: Some(self.watch()),
            abandoned: Some(&self.abandoned),
        })
    }

    /// `Errc::Runtime` naming the first other rank of this node that has exited.
    pub fn check_node_alive(&self) -> Result<()> {
        self.watch().check_alive()
    }

    /// What a thread without MPI needs to watch the node's ranks.
    fn watch(&self) -> NodeWatch<'_> {
        NodeWatch {
            pids: &self.pids,
            pidfds: &self.peer_pidfds,
            members: &self.node_members,
            timeout: self.options.timeout,
        }
    }
}

/// The node's ranks as the kernel sees them: pids and pidfds (`Sync`, unlike communicators).
struct NodeWatch<'a> {
    pids: &'a [u32],
    pidfds: &'a [Option<OwnedFd>],
    members: &'a [i32],
    timeout: Duration,
}

impl NodeWatch<'_> {
    fn check_alive(&self) -> Result<()> {
        for (local, pidfd) in self.pidfds.iter().enumerate() {
            let Some(pidfd) = pidfd else { continue };
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            let zero = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let exited = matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0);
            if exited {
                return Err(Error::new(
                    Errc::Runtime,
                    format!(
                        "rank {} (local rank {local}, pid {}) on this node exited",
                        self.members[local], self.pids[local]
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Every rank's string of `comm`, in rank order.
fn gather_strings(wait: &Wait, comm: &SimpleCommunicator, mine: &str) -> Result<Vec<String>> {
    let parts = wait.all_gather_bytes(comm, mine.as_bytes())?;
    parts
        .into_iter()
        .map(|b| {
            String::from_utf8(b).map_err(|_| Error::invalid("a rank sent a name that is not UTF-8"))
        })
        .collect()
}

fn pick_device(choice: &DeviceChoice, local_rank: usize) -> Result<Device> {
    let candidates = match choice {
        DeviceChoice::Device(device) => return Ok(device.clone()),
        DeviceChoice::RoundRobin(Some(spec)) => DeviceFilter::parse(spec)?.apply(&Device::all()),
        DeviceChoice::RoundRobin(None) => match std::env::var("ONEAPI_DEVICE_SELECTOR") {
            Ok(spec) if !spec.trim().is_empty() => {
                DeviceFilter::parse(&spec)?.apply(&Device::all())
            }
            _ => {
                let gpus: Vec<Device> = Device::all().into_iter().filter(|d| d.is_gpu()).collect();
                if gpus.is_empty() {
                    vec![Device::default_device()?]
                } else {
                    gpus
                }
            }
        },
    };
    if candidates.is_empty() {
        return Err(Error::new(
            Errc::Runtime,
            format!("no device matches {choice:?}"),
        ));
    }
    Ok(candidates[local_rank % candidates.len()].clone())
}
