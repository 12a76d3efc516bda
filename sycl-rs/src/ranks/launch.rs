//! The ranks of one node without MPI: a launcher (torchrun, `mpirun` without MPI in the
//! program, a script) says where each process sits ([`Launch`]), and local rank 0 runs a hub
//! that the others connect to. The hub carries only the node's few collectives (handle
//! exchanges, barriers): data moves through shared memory.
//!
//! The hub listens on an abstract Unix socket named after the user and a hash of the job key.
//! Such names are visible to every user of the network namespace, so both ends check the other's
//! credentials as the kernel recorded them (`SO_PEERCRED`, [`PeerPolicy::same_user`]): a
//! process of another user can neither join the group nor pose as its hub. Every member's pid
//! is the kernel's, never the one a process claims, and it is watched through a pidfd from then
//! on: a rank that exits makes the others' collectives fail at once.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use super::node::{Link, NodeRanks, NodeWatch};
use super::RanksOptions;
use crate::ipc::transport::{Channel, Listener, PeerPolicy};
use crate::{Errc, Error, Result};

/// Where this process sits among the ranks of its node, as a launcher tells it (see
/// [`Launch::from_env`]), for [`NodeRanks::join`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This process's index among the node's ranks, `0..local_size`.
    pub local_rank: usize,
    /// How many ranks the node has: every one of them must join.
    pub local_size: usize,
    /// This process's rank in the whole job, for messages (torchrun's `RANK`).
    pub rank: usize,
    /// A key that every rank of this node's group passes and no other group of this user on
    /// this machine uses at the same time (torchrun's run id and rendezvous endpoint, MPI's
    /// job id, or a string the caller chose, e.g. broadcast by `mpi4py` from rank 0).
    pub job: String,
}

impl Launch {
    /// A launch of `local_size` ranks on this node under key `job`; the job rank is the local
    /// rank.
    pub fn new(local_rank: usize, local_size: usize, job: impl Into<String>) -> Launch {
        Launch {
            local_rank,
            local_size,
            rank: local_rank,
            job: job.into(),
        }
    }

    /// Reads the launch from the environment, the first that is complete of:
    /// - sycl-rs's own: `SYCL_RS_LOCAL_RANK`, `SYCL_RS_LOCAL_SIZE`, `SYCL_RS_JOB` (and
    ///   `SYCL_RS_RANK`, default the local rank);
    /// - torchrun: `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `RANK`; the key is made of
    ///   `TORCHELASTIC_RUN_ID`, `MASTER_ADDR`, `MASTER_PORT`, `GROUP_RANK` and
    ///   `TORCHELASTIC_RESTART_COUNT` (so a restarted group never meets the old one);
    /// - Open MPI's `mpirun` (the program need not use MPI): `OMPI_COMM_WORLD_LOCAL_RANK`,
    ///   `OMPI_COMM_WORLD_LOCAL_SIZE`, `OMPI_COMM_WORLD_RANK`; the key is `PMIX_NAMESPACE`
    ///   (or `OMPI_MCA_ess_base_jobid`).
    ///
    /// Errors: `Errc::Invalid` when none is set, or a value does not parse or is out of range.
    pub fn from_env() -> Result<Launch> {
        Launch::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Launch::from_env`] over any source of variables (tests pass a map).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Launch> {
        let number = |name: &str| -> Result<Option<usize>> {
            match var(name) {
                None => Ok(None),
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::invalid(format!("{name}={v:?} is not a non-negative integer"))
                }),
            }
        };
        let launch = if let (Some(local_rank), Some(local_size)) =
            (number("SYCL_RS_LOCAL_RANK")?, number("SYCL_RS_LOCAL_SIZE")?)
        {
            let job = var("SYCL_RS_JOB").ok_or_else(|| {
                Error::invalid(
                    "SYCL_RS_LOCAL_RANK and SYCL_RS_LOCAL_SIZE are set, SYCL_RS_JOB is not",
                )
            })?;
            Launch {
                local_rank,
                local_size,
                rank: number("SYCL_RS_RANK")?.unwrap_or(local_rank),
                job,
            }
        } else if let (Some(local_rank), Some(local_size), Some(port)) = (
            number("LOCAL_RANK")?,
            number("LOCAL_WORLD_SIZE")?,
            var("MASTER_PORT"),
        ) {
            let part = |name: &str| var(name).unwrap_or_default();
            Launch {
                local_rank,
                local_size,
                rank: number("RANK")?.unwrap_or(local_rank),
                job: format!(
                    "torchrun/{}/{}:{port}/node {}/restart {}",
                    part("TORCHELASTIC_RUN_ID"),
                    part("MASTER_ADDR"),
                    part("GROUP_RANK"),
                    part("TORCHELASTIC_RESTART_COUNT")
                ),
            }
        } else if let (Some(local_rank), Some(local_size)) = (
            number("OMPI_COMM_WORLD_LOCAL_RANK")?,
            number("OMPI_COMM_WORLD_LOCAL_SIZE")?,
        ) {
            let job = var("PMIX_NAMESPACE")
                .or_else(|| var("OMPI_MCA_ess_base_jobid"))
                .ok_or_else(|| {
                    Error::invalid(
                        "Open MPI's local rank is set, but neither PMIX_NAMESPACE nor \
                         OMPI_MCA_ess_base_jobid names the job",
                    )
                })?;
            Launch {
                local_rank,
                local_size,
                rank: number("OMPI_COMM_WORLD_RANK")?.unwrap_or(local_rank),
                job: format!("mpirun/{job}"),
            }
        } else {
            return Err(Error::invalid(
                "no launcher in the environment: set SYCL_RS_LOCAL_RANK, SYCL_RS_LOCAL_SIZE and \
                 SYCL_RS_JOB, or start the ranks with torchrun or Open MPI's mpirun",
            ));
        };
        launch.check()?;
        Ok(launch)
    }

    /// The abstract Unix socket name that local rank 0 of this launch binds for its hub (this
    /// process's user and the job key); for diagnostics.
    pub fn hub_name(&self) -> String {
        hub_name(&self.job)
    }

    fn check(&self) -> Result<()> {
        if self.local_size == 0 || self.local_rank >= self.local_size {
            return Err(Error::invalid(format!(
                "local rank {} of {} ranks",
                self.local_rank, self.local_size
            )));
        }
        if self.local_size > MAX_LOCAL_SIZE {
            return Err(Error::invalid(format!(
                "{} ranks on one node: at most {MAX_LOCAL_SIZE}",
                self.local_size
            )));
        }
        if self.job.is_empty() {
            return Err(Error::invalid("an empty job key"));
        }
        if i32::try_from(self.rank).is_err() {
            return Err(Error::invalid(format!(
                "job rank {} is too large",
                self.rank
            )));
        }
        Ok(())
    }
}

/// The most ranks one node's hub admits (the hub's messages must fit one socket message).
const MAX_LOCAL_SIZE: usize = 1024;

impl NodeRanks {
    /// The ranks of this node, without MPI: every one of the `launch.local_size` processes calls
    /// it with the same `job`. Local rank 0 becomes the hub the others connect to.
    /// `options.node_key` does not apply (the launch says who is on the node).
    ///
    /// Errors: `Errc::Invalid` for a bad launch, or a hub of another user under this key;
    /// `Errc::Runtime` when another group of this user holds the key, or not every rank joins
    /// within [`RanksOptions::timeout`] (a rank with another `local_size` or key is refused and
    /// told why).
    pub fn join(launch: &Launch, options: RanksOptions) -> Result<NodeRanks> {
        launch.check()?;
        let deadline = Instant::now() + options.timeout;
        let (hub, members, pids) = Hub::rendezvous(launch, deadline)?;
        NodeRanks::assemble(launch.local_rank, members, pids, options, Link::Hub(hub))
    }

    /// [`NodeRanks::join`] of [`Launch::from_env`].
    pub fn from_env(options: RanksOptions) -> Result<NodeRanks> {
        NodeRanks::join(&Launch::from_env()?, options)
    }
}

const HELLO: &[u8; 4] = b"SYH1";
const ROSTER: &[u8; 4] = b"SYR1";
const REFUSED: &[u8; 4] = b"SYX1";

/// The hub's name for `job` and this user.
fn hub_name(job: &str) -> String {
    // FNV-1a: the name need only differ between keys; the hello carries the key itself.
    let hash = job.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!(
        "sycl-rs-hub-{}-{hash:016x}",
        rustix::process::geteuid().as_raw()
    )
}

/// Local rank 0's connections to every other rank, or another rank's connection to it.
pub(super) struct Hub {
    role: Role,
    /// The number of the next collective, carried in every message (ranks that disagree on
    /// it called different collectives); held for the whole collective, so that a process
    /// runs one at a time.
    seq: parking_lot::Mutex<u64>,
}

enum Role {
    /// The listener stays bound for the group's life: another group of this user cannot take
    /// the key meanwhile.
    Leader {
        _listener: Listener,
        /// Local ranks 1.. in order.
        members: Vec<Channel>,
    },
    Member {
        leader: Channel,
    },
}

impl Hub {
    /// Forms the group: every rank's job rank and pid (the kernel's), in local rank order.
    fn rendezvous(launch: &Launch, deadline: Instant) -> Result<(Hub, Vec<i32>, Vec<u32>)> {
        let name = hub_name(&launch.job);
        let (role, members, pids) = if launch.local_rank == 0 {
            lead(launch, &name, deadline)?
        } else {
            follow(launch, &name, deadline)?
        };
        let hub = Hub {
            role,
            seq: parking_lot::Mutex::new(0),
        };
        Ok((hub, members, pids))
    }

    /// Every local rank's bytes, in local rank order: each rank sends its own to the leader,
    /// which answers every rank with all of them.
    pub(super) fn all_gather_bytes(
        &self,
        mine: &[u8],
        watch: &NodeWatch<'_>,
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>> {
        let mut next = self.seq.lock();
        let seq = *next;
        *next += 1;
        let deadline = Instant::now() + timeout;
        match &self.role {
            Role::Member { leader } => {
                let mut message = seq.to_le_bytes().to_vec();
                message.extend_from_slice(mine);
                leader.send(&message)?;
                let reply = recv_watched(leader, 0, watch, deadline)?;
                decode_all(&reply, seq, watch.pids.len())
            }
            Role::Leader { members, .. } => {
                let mut all = vec![mine.to_vec()];
                for (i, channel) in members.iter().enumerate() {
                    let message = recv_watched(channel, i + 1, watch, deadline)?;
                    let (got, body) = split_seq(&message, i + 1)?;
                    if got != seq {
                        return Err(out_of_step(i + 1, got, seq));
                    }
                    all.push(body.to_vec());
                }
                let mut reply = seq.to_le_bytes().to_vec();
                for part in &all {
                    reply.extend_from_slice(&(part.len() as u32).to_le_bytes());
                }
                for part in &all {
                    reply.extend_from_slice(part);
                }
                for channel in members {
                    channel.send(&reply)?;
                }
                Ok(all)
            }
        }
    }
}

fn out_of_step(r: usize, got: u64, want: u64) -> Error {
    Error::invalid(format!(
        "local rank {r} is at node collective {got}, this rank at {want}: the ranks called \
         different collectives"
    ))
}

fn split_seq(message: &[u8], r: usize) -> Result<(u64, &[u8])> {
    if message.len() < 8 {
        return Err(Error::invalid(format!(
            "local rank {r} sent a message of {} bytes",
            message.len()
        )));
    }
    let (seq, body) = message.split_at(8);
    Ok((u64::from_le_bytes(seq.try_into().unwrap_or_default()), body))
}

/// The leader's answer: `size` parts, each checked against the message's length.
fn decode_all(reply: &[u8], seq: u64, size: usize) -> Result<Vec<Vec<u8>>> {
    let (got, body) = split_seq(reply, 0)?;
    if got != seq {
        return Err(out_of_step(0, got, seq));
    }
    let bad = || Error::invalid("local rank 0 (the hub) sent a malformed reply");
    let lens_bytes = size.checked_mul(4).ok_or_else(bad)?;
    if body.len() < lens_bytes {
        return Err(bad());
    }
    let (lens, mut data) = body.split_at(lens_bytes);
    let mut parts = Vec::with_capacity(size);
    for len in lens.chunks_exact(4) {
        let len = u32::from_le_bytes(len.try_into().map_err(|_| bad())?) as usize;
        if len > data.len() {
            return Err(bad());
        }
        let (part, rest) = data.split_at(len);
        parts.push(part.to_vec());
        data = rest;
    }
    if !data.is_empty() {
        return Err(bad());
    }
    Ok(parts)
}

/// The next message on `channel` (from local rank `r`), polling so that a rank that exits, or
/// the deadline, ends the wait.
fn recv_watched(
    channel: &Channel,
    r: usize,
    watch: &NodeWatch<'_>,
    deadline: Instant,
) -> Result<Vec<u8>> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "timed out after {:?} waiting for local rank {r}: it did not take part (it \
                     is busy elsewhere, or called another collective)",
                    watch.timeout
                ),
            ));
        }
        let slice = left.min(Duration::from_millis(100));
        if readable(channel, slice)? {
            return channel.recv().map_err(|err| {
                // A closed channel is most often a rank that exited: say which, if so.
                watch.check_alive().err().unwrap_or(err)
            });
        }
        watch.check_alive()?;
    }
}

fn readable(channel: &Channel, wait: Duration) -> Result<bool> {
    let fd = channel.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let ts = rustix::event::Timespec::try_from(wait)
        .map_err(|_| Error::invalid("time-out too large"))?;
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(Error::new(Errc::Runtime, format!("poll: {e}"))),
    }
}

fn timed_out(launch: &Launch, what: &str, why: &str) -> Error {
    Error::new(
        Errc::Runtime,
        format!(
            "rank {} (local rank {} of {}, job {:?}): {what} ({why})",
            launch.rank, launch.local_rank, launch.local_size, launch.job
        ),
    )
}

/// Local rank 0: binds the hub, admits one process per other local rank, and sends each the
/// roster.
fn lead(launch: &Launch, name: &str, deadline: Instant) -> Result<(Role, Vec<i32>, Vec<u32>)> {
    let listener = Listener::bind(name).map_err(|err| {
        err.context(format_args!(
            "job key {:?} is in use: another process on this machine holds its hub's name",
            launch.job
        ))
    })?;
    let size = launch.local_size;
    let mut admitted: Vec<Option<(Channel, u32, i32)>> = (0..size).map(|_| None).collect();
    let mut refusals: Vec<String> = Vec::new();
    let mut waiting = size - 1;
    while waiting > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        let channel = match listener.accept(Some(left.max(Duration::from_millis(1)))) {
            Ok(c) => c,
            Err(err) if Instant::now() >= deadline => {
                refusals.push(err.to_string());
                let missing: Vec<usize> = (1..size).filter(|&r| admitted[r].is_none()).collect();
                return Err(timed_out(
                    launch,
                    &format!("local ranks {missing:?} did not join the hub in time"),
                    &if refusals.is_empty() {
                        "none was refused".to_string()
                    } else {
                        format!("refused: {}", refusals.join("; "))
                    },
                ));
            }
            Err(_) => continue,
        };
        let pid = channel.peer_credentials()?.pid;
        channel.set_recv_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))?;
        let hello = match channel.recv() {
            Ok(h) => h,
            Err(err) => {
                refusals.push(format!("pid {pid}: {err}"));
                continue;
            }
        };
        match check_hello(&hello, launch, pid, &admitted) {
            Ok((local_rank, rank)) => {
                admitted[local_rank] = Some((channel, pid, rank));
                waiting -= 1;
            }
            Err(why) => {
                // Tell the process why: a misconfigured rank fails at once instead of waiting.
                let mut refusal = REFUSED.to_vec();
                refusal.extend_from_slice(why.as_bytes());
                let _ = channel.send(&refusal);
                refusals.push(format!("pid {pid}: {why}"));
            }
        }
    }
    let mut pids = vec![std::process::id()];
    let mut ranks = vec![launch.rank as i32];
    let mut members = Vec::with_capacity(size - 1);
    for slot in admitted.into_iter().skip(1) {
        let (channel, pid, rank) = slot.ok_or_else(|| Error::new(Errc::Runtime, "hub roster"))?;
        pids.push(pid);
        ranks.push(rank);
        members.push(channel);
    }
    let mut roster = ROSTER.to_vec();
    for (&pid, &rank) in pids.iter().zip(&ranks) {
        roster.extend_from_slice(&pid.to_le_bytes());
        roster.extend_from_slice(&rank.to_le_bytes());
    }
    for channel in &members {
        channel.set_recv_timeout(None)?;
        channel.send(&roster)?;
    }
    Ok((
        Role::Leader {
            _listener: listener,
            members,
        },
        ranks,
        pids,
    ))
}

/// Checks a process's hello against this launch; its local rank and job rank.
fn check_hello(
    hello: &[u8],
    launch: &Launch,
    pid: u32,
    admitted: &[Option<(Channel, u32, i32)>],
) -> std::result::Result<(usize, i32), String> {
    let Some(rest) = hello.strip_prefix(HELLO) else {
        return Err("not a sycl-rs hello".into());
    };
    if rest.len() < 16 {
        return Err(format!("a hello of {} bytes", hello.len()));
    }
    let word = |at: usize| u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
    let (local_rank, local_size, rank) = (word(0) as usize, word(4) as usize, word(8));
    let job_len = word(12) as usize;
    let job = &rest[16..];
    if job.len() != job_len || job != launch.job.as_bytes() {
        return Err(format!(
            "job key {:?}, not {:?}",
            String::from_utf8_lossy(job),
            launch.job
        ));
    }
    if local_size != launch.local_size {
        return Err(format!(
            "local size {local_size}, but local rank 0 has {}",
            launch.local_size
        ));
    }
    if local_rank == 0 || local_rank >= launch.local_size {
        return Err(format!("local rank {local_rank} of {local_size}"));
    }
    if admitted[local_rank].is_some() {
        return Err(format!("local rank {local_rank} has already joined"));
    }
    if pid == 0 {
        return Err("its pid is not visible here (another pid namespace)".into());
    }
    if admitted.iter().flatten().any(|(_, p, _)| *p == pid) {
        return Err(format!("pid {pid} has already joined"));
    }
    let rank = i32::try_from(rank).map_err(|_| format!("job rank {rank}"))?;
    Ok((local_rank, rank))
}

/// Another local rank: connects to the hub (retrying until it is bound), says who it is, and
/// takes the roster.
fn follow(launch: &Launch, name: &str, deadline: Instant) -> Result<(Role, Vec<i32>, Vec<u32>)> {
    let leader = loop {
        match Channel::connect_with(name, PeerPolicy::same_user()) {
            Ok(c) => break c,
            // Another user's socket under our name: never talk to it.
            Err(err) if err.code() == Errc::Invalid => return Err(err),
            Err(err) if Instant::now() >= deadline => {
                return Err(timed_out(
                    launch,
                    "local rank 0's hub did not appear in time",
                    &err.to_string(),
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    let leader_pid = leader.peer_credentials()?.pid;
    let mut hello = HELLO.to_vec();
    for word in [
        launch.local_rank as u32,
        launch.local_size as u32,
        launch.rank as u32,
        launch.job.len() as u32,
    ] {
        hello.extend_from_slice(&word.to_le_bytes());
    }
    hello.extend_from_slice(launch.job.as_bytes());
    leader.send(&hello)?;
    leader.set_recv_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    ))?;
    let reply = leader.recv().map_err(|err| {
        timed_out(
            launch,
            "no roster from local rank 0's hub",
            &err.to_string(),
        )
    })?;
    leader.set_recv_timeout(None)?;
    if let Some(why) = reply.strip_prefix(REFUSED) {
        return Err(Error::invalid(format!(
            "local rank 0's hub refused this rank: {}",
            String::from_utf8_lossy(why)
        )));
    }
    let bad = || Error::invalid("local rank 0's hub sent a malformed roster");
    let entries = reply.strip_prefix(ROSTER).ok_or_else(bad)?;
    if entries.len() != launch.local_size * 8 {
        return Err(bad());
    }
    let (mut pids, mut ranks) = (Vec::new(), Vec::new());
    for entry in entries.chunks_exact(8) {
        pids.push(u32::from_le_bytes(
            entry[..4].try_into().map_err(|_| bad())?,
        ));
        ranks.push(i32::from_le_bytes(
            entry[4..].try_into().map_err(|_| bad())?,
        ));
    }
    if pids[0] != leader_pid || pids[launch.local_rank] != std::process::id() {
        return Err(Error::invalid(format!(
            "local rank 0's hub (pid {leader_pid}) sent a roster naming pid {} for itself and \
             {} for this rank",
            pids[0], pids[launch.local_rank]
        )));
    }
    Ok((Role::Member { leader }, ranks, pids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn launchers_environments() {
        let own = Launch::from_vars(vars(&[
            ("SYCL_RS_LOCAL_RANK", "1"),
            ("SYCL_RS_LOCAL_SIZE", "4"),
            ("SYCL_RS_JOB", "k"),
            // sycl-rs's own variables win over a launcher's.
            ("LOCAL_RANK", "3"),
            ("LOCAL_WORLD_SIZE", "8"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap();
        assert_eq!(own, Launch::new(1, 4, "k"));

        let torchrun = Launch::from_vars(vars(&[
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("RANK", "3"),
            ("GROUP_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_RUN_ID", "abc"),
            ("TORCHELASTIC_RESTART_COUNT", "0"),
        ]))
        .unwrap();
        assert_eq!(
            (torchrun.local_rank, torchrun.local_size, torchrun.rank),
            (1, 2, 3)
        );
        assert_eq!(torchrun.job, "torchrun/abc/10.0.0.1:29500/node 1/restart 0");

        let mpirun = Launch::from_vars(vars(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("PMIX_NAMESPACE", "prterun-host-123@1"),
        ]))
        .unwrap();
        assert_eq!((mpirun.local_rank, mpirun.rank), (0, 2));
        assert_eq!(mpirun.job, "mpirun/prterun-host-123@1");
    }

    #[test]
    fn bad_environments_are_invalid() {
        for pairs in [
            &[][..],
            &[("SYCL_RS_LOCAL_RANK", "0"), ("SYCL_RS_LOCAL_SIZE", "2")][..],
            &[
                ("SYCL_RS_LOCAL_RANK", "2"),
                ("SYCL_RS_LOCAL_SIZE", "2"),
                ("SYCL_RS_JOB", "k"),
            ][..],
            &[
                ("SYCL_RS_LOCAL_RANK", "0"),
                ("SYCL_RS_LOCAL_SIZE", "0"),
                ("SYCL_RS_JOB", "k"),
            ][..],
            &[
                ("SYCL_RS_LOCAL_RANK", "-1"),
                ("SYCL_RS_LOCAL_SIZE", "2"),
                ("SYCL_RS_JOB", "k"),
            ][..],
            &[
                ("SYCL_RS_LOCAL_RANK", "0"),
                ("SYCL_RS_LOCAL_SIZE", "2"),
                ("SYCL_RS_JOB", ""),
            ][..],
            &[
                ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ][..],
            &[
                ("LOCAL_RANK", "x"),
                ("LOCAL_WORLD_SIZE", "2"),
                ("MASTER_PORT", "1"),
            ][..],
        ] {
            let err = Launch::from_vars(vars(pairs)).unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{pairs:?}: {err}");
        }
    }

    #[test]
    fn malformed_hub_replies_are_errors() {
        let ok = {
            let mut r = 7u64.to_le_bytes().to_vec();
            r.extend_from_slice(&1u32.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.push(9);
            r
        };
        assert_eq!(decode_all(&ok, 7, 2).unwrap(), vec![vec![9], vec![]]);
        assert_eq!(decode_all(&ok, 8, 2).unwrap_err().code(), Errc::Invalid);
        for cut in 0..ok.len() {
            assert_eq!(
                decode_all(&ok[..cut], 7, 2).unwrap_err().code(),
                Errc::Invalid
            );
        }
        let mut long = ok.clone();
        long.push(0);
        assert_eq!(decode_all(&long, 7, 2).unwrap_err().code(), Errc::Invalid);
        let mut huge = ok.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_all(&huge, 7, 2).unwrap_err().code(), Errc::Invalid);
    }
}
