//! Ranks: the processes of a job, grouped by node. sycl-rs shares memory and events zero-copy
//! among the ranks of one node ([`NodeRanks`], [`NodeBuffer`]); between nodes MPI carries data
//! (`Ranks`, feature `mpi`, on the `mpi` crate).
//!
//! A node's ranks come from one of two places:
//! - **MPI** (`mpirun`, `srun`): `Ranks::new` groups the ranks of a communicator by node
//!   (MPI's shared-memory split; a [`NodeKey`] can split further, so that tests form several
//!   "nodes" on one machine) and `Ranks::node` is this rank's node. `Ranks::exchange` moves
//!   bytes between nodes through MPI: straight from device memory when the MPI library is
//!   CUDA-aware (Open MPI's `MPIX_Query_cuda_support`) or the memory is host-accessible, else
//!   staged through pinned host memory, the copies overlapped with the transfer.
//! - **A launcher without MPI** (torchrun, `mpirun` running a program that does not use MPI, a
//!   script): [`NodeRanks::join`] with a [`Launch`] ([`Launch::from_env`] reads the launcher's
//!   variables). Local rank 0 runs a hub of Unix sockets that only processes of the same user
//!   can join.
//!
//! Either way each rank gets its local rank and a device (one rank per GPU, round-robin), and
//! [`NodeRanks::node_buffer`] builds a buffer every rank of the node can read and write: each
//! rank allocates its part and an IPC event, the handles travel through MPI or the hub, and
//! every rank opens every peer's part.
//!
//! Descriptors cannot ride inside MPI messages. A rank takes a peer's descriptors with
//! `pidfd_getfd` where the kernel permits it (the same user, no Yama restriction); where it does
//! not, the pair falls back, automatically, to a rank channel (a Unix socket carrying
//! `SCM_RIGHTS`) whose far end must be the very process MPI or the hub named for that rank (its
//! pid, as the kernel reports it for the socket). [`DescriptorPath`] can force either path.
//!
//! Every collective here waits with a deadline ([`RanksOptions::timeout`]) and watches the
//! node's other ranks through pidfds: a rank that dies makes the others fail with an error
//! instead of hanging.
//!
//! ```no_run
//! # #[cfg(feature = "mpi")]
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
//! # #[cfg(not(feature = "mpi"))]
//! # fn main() {}
//! ```
#![allow(unsafe_code)]

mod launch;
mod node;
mod node_buffer;
#[cfg(feature = "mpi")]
mod timed;
#[cfg(feature = "mpi")]
mod transfer;
#[cfg(feature = "mpi")]
mod world;

use std::time::Duration;

use crate::{Device, DeviceFilter, Errc, Error, Result};

pub use launch::Launch;
#[cfg(feature = "mpi")]
pub use mpi;
pub use node::NodeRanks;
pub use node_buffer::NodeBuffer;
#[cfg(feature = "mpi")]
pub use world::Ranks;

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

/// Options of [`NodeRanks::join`] and `Ranks::new`. `Default` reads `SYCL_RS_RANKS_PER_NODE` (a [`NodeKey`]
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

/// The byte offsets and lengths of `len` bytes in chunks of at most `chunk` (MPI transfers).
/// Outside `transfer` so that its test runs in the default build, without MPI.
#[cfg(any(test, feature = "mpi"))]
fn chunks(len: usize, chunk: usize) -> Vec<(usize, usize)> {
    (0..len.div_ceil(chunk))
        .map(|k| (k * chunk, chunk.min(len - k * chunk)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_cover_every_byte_once() {
        for (len, chunk) in [(0, 4), (1, 4), (4, 4), (9, 4), (10 << 20, 4 << 20)] {
            let parts = chunks(len, chunk);
            let mut next = 0;
            for (off, n) in parts {
                assert_eq!(off, next);
                assert!(n > 0 && n <= chunk);
                next += n;
            }
            assert_eq!(next, len);
        }
    }
}
