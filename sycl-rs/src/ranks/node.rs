//! [`NodeRanks`]: the ranks of one node, what the kernel says of them (pids, pidfds), and the
//! link their node-local collectives run over: an MPI communicator ([`super::Ranks`]) or the
//! hub of a launcher's job ([`super::Launch`]).

use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags};

use super::launch::Hub;
use super::{pick_device, RanksOptions};
use crate::ipc::transport::Listener;
use crate::{Device, Errc, Error, Result};

/// How the node's ranks reach each other for their few node-local collectives (handle
/// exchanges, barriers); never on a data path.
pub(super) enum Link {
    /// The node's MPI communicator, ordered by communicator rank.
    #[cfg(feature = "mpi")]
    Mpi(mpi::topology::SimpleCommunicator),
    /// Local rank 0's hub of Unix sockets ([`super::Launch`]).
    Hub(Hub),
}

/// The ranks of one node: every rank's process, this rank's device, and node-local collectives
/// that fail instead of hanging. Made by `Ranks::new` (MPI, as
/// `Ranks::node`, feature `mpi`) or, without MPI, by [`NodeRanks::join`] from a
/// launcher's environment (torchrun, `mpirun`, or sycl-rs's own variables).
///
/// [`NodeRanks::node_buffer`] shares memory among them, and a
/// [`Team`](crate::collective::Team) runs collectives over them.
///
/// ```no_run
/// # fn main() -> sycl::Result<()> {
/// // Under torchrun, mpirun, or with SYCL_RS_LOCAL_RANK / SYCL_RS_LOCAL_SIZE / SYCL_RS_JOB set:
/// let ranks = sycl::ranks::NodeRanks::join(&sycl::ranks::Launch::from_env()?, Default::default())?;
/// let q = sycl::Queue::in_order(ranks.device())?;
/// let buffer = ranks.node_buffer::<f32>(&q, 1 << 20)?;
/// let next = (ranks.local_rank() + 1) % ranks.local_size();
/// q.fill(&buffer.peer(next)?.range(0..16)?, 1.0f32, &[])?.wait()?;
/// # Ok(()) }
/// ```
pub struct NodeRanks {
    local_rank: usize,
    /// For every local rank, its rank in the job (MPI's communicator rank, the launcher's
    /// `RANK`): for messages only.
    pub(super) members: Vec<i32>,
    /// For every local rank, its process id (checked against the kernel's view where
    /// descriptors are taken).
    pub(super) pids: Vec<u32>,
    /// pidfds of the node's other ranks (`None` at our own local rank): a rank that exits
    /// makes its pidfd readable.
    peer_pidfds: Vec<Option<OwnedFd>>,
    /// Our end of the rank channel, and every local rank's channel name.
    pub(super) listener: Listener,
    pub(super) channel_names: Vec<String>,
    device: Device,
    options: RanksOptions,
    pub(super) link: Link,
    /// Why a collective of these ranks was abandoned (a time-out, a rank that exited): the
    /// link's state is unknown then (MPI cannot cancel a collective; a hub message may be in
    /// flight), so every later collective is refused.
    pub(super) abandoned: OnceLock<String>,
}

impl std::fmt::Debug for NodeRanks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRanks")
            .field("local_rank", &self.local_rank)
            .field("local_size", &self.local_size())
            .field("members", &self.members)
            .field("device", &self.device.name())
            .finish()
    }
}

impl AsRef<NodeRanks> for NodeRanks {
    fn as_ref(&self) -> &NodeRanks {
        self
    }
}

impl NodeRanks {
    /// Completes a node whose ranks know each other's job ranks and pids: opens the peers'
    /// pidfds, binds the rank channel, picks the device, and gathers every rank's channel name.
    /// Collective over the node.
    pub(super) fn assemble(
        local_rank: usize,
        members: Vec<i32>,
        pids: Vec<u32>,
        options: RanksOptions,
        link: Link,
    ) -> Result<NodeRanks> {
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
        let mut node = NodeRanks {
            local_rank,
            members,
            pids,
            peer_pidfds,
            listener,
            channel_names: Vec::new(),
            device,
            options,
            link,
            abandoned: OnceLock::new(),
        };
        let names = node.all_gather_bytes("rank channels", node.listener.name().as_bytes())?;
        node.channel_names = names
            .into_iter()
            .map(|b| {
                String::from_utf8(b)
                    .map_err(|_| Error::invalid("a rank sent a channel name that is not UTF-8"))
            })
            .collect::<Result<_>>()?;
        // Every rank has its channel bound and its pidfds open before anyone uses them.
        node.barrier()?;
        Ok(node)
    }

    /// This rank's index within its node.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// Ranks on this node.
    pub fn local_size(&self) -> usize {
        self.pids.len()
    }

    /// The job rank (MPI communicator rank, launcher's `RANK`) of local rank `local`;
    /// `Errc::Invalid` when out of range.
    pub fn rank_of_local(&self, local: usize) -> Result<usize> {
        self.members
            .get(local)
            .map(|&r| r as usize)
            .ok_or_else(|| Error::invalid(format!("local rank {local} of {}", self.local_size())))
    }

    /// This rank's device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The options in force.
    pub fn options(&self) -> &RanksOptions {
        &self.options
    }

    /// A barrier over this node's ranks that fails, instead of hanging, when another rank of
    /// the node exits (`Errc::Runtime`, naming it) or [`RanksOptions::timeout`] passes.
    pub fn barrier(&self) -> Result<()> {
        match &self.link {
            #[cfg(feature = "mpi")]
            Link::Mpi(comm) => self.mpi_wait("node barrier")?.barrier(comm),
            Link::Hub(_) => self.all_gather_bytes("node barrier", &[]).map(drop),
        }
    }

    /// `Errc::Runtime` naming the first other rank of this node that has exited.
    pub fn check_alive(&self) -> Result<()> {
        self.watch().check_alive()
    }

    /// Every local rank's bytes (of any length), in local rank order, under the deadline and
    /// the node watch; refused (`Errc::Runtime`) once an earlier collective was abandoned.
    pub(super) fn all_gather_bytes(&self, what: &'static str, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.refuse_if_abandoned(what)?;
        match &self.link {
            #[cfg(feature = "mpi")]
            Link::Mpi(comm) => self.mpi_wait(what)?.all_gather_bytes(comm, mine),
            Link::Hub(hub) => hub
                .all_gather_bytes(mine, &self.watch(), self.options.timeout)
                .map_err(|err| {
                    let err = err.context(format_args!(
                        "rank {}: {what}",
                        self.members[self.local_rank]
                    ));
                    let _ = self.abandoned.set(err.to_string());
                    err
                }),
        }
    }

    /// Every local rank's byte string of one length (that of `mine`), concatenated in local
    /// rank order; a rank that sent another length is `Errc::Invalid`.
    pub(crate) fn all_gather_fixed(&self, what: &'static str, mine: &[u8]) -> Result<Vec<u8>> {
        #[cfg(feature = "mpi")]
        if let Link::Mpi(comm) = &self.link {
            return self.mpi_wait(what)?.all_gather(comm, mine);
        }
        let parts = self.all_gather_bytes(what, mine)?;
        let mut out = Vec::with_capacity(mine.len() * parts.len());
        for (r, part) in parts.iter().enumerate() {
            if part.len() != mine.len() {
                return Err(Error::invalid(format!(
                    "{what}: local rank {r} sent {} bytes, not {}",
                    part.len(),
                    mine.len()
                )));
            }
            out.extend_from_slice(part);
        }
        Ok(out)
    }

    /// `Errc::Runtime` once an earlier collective was abandoned.
    fn refuse_if_abandoned(&self, what: &str) -> Result<()> {
        match self.abandoned.get() {
            None => Ok(()),
            Some(why) => Err(Error::new(
                Errc::Runtime,
                format!(
                    "rank {}: {what}: refused, an earlier collective of these ranks failed \
                     ({why}); these ranks can run no more collectives",
                    self.members[self.local_rank]
                ),
            )),
        }
    }

    /// The deadline and watch of an MPI collective of these ranks, on the node's communicator
    /// or (`Ranks`) the world's: refused once one was abandoned.
    #[cfg(feature = "mpi")]
    pub(super) fn mpi_wait(&self, what: &'static str) -> Result<super::timed::Wait<'_>> {
        self.refuse_if_abandoned(what)?;
        Ok(super::timed::Wait {
            what,
            rank: self.members[self.local_rank],
            timeout: self.options.timeout,
            watch: Some(self.watch()),
            abandoned: Some(&self.abandoned),
        })
    }

    /// What a thread needs to watch the node's ranks.
    pub(super) fn watch(&self) -> NodeWatch<'_> {
        NodeWatch {
            pids: &self.pids,
            pidfds: &self.peer_pidfds,
            members: &self.members,
            timeout: self.options.timeout,
        }
    }
}

/// The node's ranks as the kernel sees them: pids and pidfds (`Sync`, unlike communicators).
pub(super) struct NodeWatch<'a> {
    pub(super) pids: &'a [u32],
    pub(super) pidfds: &'a [Option<OwnedFd>],
    pub(super) members: &'a [i32],
    pub(super) timeout: Duration,
}

impl NodeWatch<'_> {
    pub(super) fn check_alive(&self) -> Result<()> {
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
