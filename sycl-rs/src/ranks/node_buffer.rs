//! [`NodeBuffer`]: one part per rank of a node, every part opened by every rank of the node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytemuck::Pod;

use super::node::NodeWatch;
use super::{DescriptorPath, NodeRanks};
use crate::ipc::transport::{Channel, Listener};
use crate::ipc::{self, Handle};
use crate::{Errc, Error, Event, EventProperties, Queue, Result, Usm};

/// A buffer shared by the ranks of a node: every rank contributed a part (USM device memory on
/// its device) and an IPC event, and opened every other rank's part and event. Writing into a
/// peer's part ([`NodeBuffer::peer`]) is a queue copy or a kernel argument: zero-copy, over
/// NVLink/PCIe peer access on GPUs, plain memory on the native CPU device.
///
/// Made by [`NodeRanks::node_buffer`] or [`NodeRanks::node_share`]; dropping it is collective
/// over the node like `MPI_Win_free`: every rank closes its peers' parts, and no part is freed before
/// every rank has closed it.
pub struct NodeBuffer<'r, T: Pod> {
    ranks: NodeRef<'r>,
    local: Usm<T>,
    local_event: Event,
    exports: Vec<Handle>,
    /// Opened parts of the other ranks, by local rank (`None` at ours).
    peers: Vec<Option<Usm<T>>>,
    peer_events: Vec<Option<Event>>,
    /// How each peer's descriptors came (`None` at ours).
    paths: Vec<Option<DescriptorPath>>,
}

impl<T: Pod> std::fmt::Debug for NodeBuffer<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBuffer")
            .field("local_rank", &self.ranks.local_rank())
            .field("parts", &self.peers.len())
            .field("len", &self.local.len())
            .finish()
    }
}

impl<'r, T: Pod> NodeBuffer<'r, T> {
    /// This rank's part.
    pub fn local(&self) -> &Usm<T> {
        &self.local
    }

    /// The ranks whose parts these are.
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    pub(crate) fn ranks(&self) -> &NodeRanks {
        &self.ranks
    }

    /// The part of local rank `local_rank` (this rank's own part for its own index), opened in
    /// this process; `Errc::Invalid` for an index outside the node.
    pub fn peer(&self, local_rank: usize) -> Result<&Usm<T>> {
        if local_rank == self.ranks.local_rank() {
            return Ok(&self.local);
        }
        self.peers
            .get(local_rank)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.no_such_rank(local_rank))
    }

    /// This rank's IPC event, which [`NodeBuffer::signal`] signals.
    pub fn event(&self) -> &Event {
        &self.local_event
    }

    /// The IPC event of local rank `local_rank` (this rank's own for its own index).
    pub fn peer_event(&self, local_rank: usize) -> Result<&Event> {
        if local_rank == self.ranks.local_rank() {
            return Ok(&self.local_event);
        }
        self.peer_events
            .get(local_rank)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.no_such_rank(local_rank))
    }

    /// Enqueues a signal of this rank's event on `queue` (after what `queue` already has, for
    /// an in-order queue): peers that [`NodeBuffer::wait_for`] it after the next
    /// [`NodeRanks::barrier`] wait for everything before it.
    pub fn signal(&self, queue: &Queue) -> Result<()> {
        queue.enqueue_signal_event(&self.local_event)
    }

    /// Makes `queue` wait (on the device) for the latest signal of each of `local_ranks`
    /// enqueued before the caller's last node barrier.
    pub fn wait_for(&self, queue: &Queue, local_ranks: &[usize]) -> Result<()> {
        let events = local_ranks
            .iter()
            .map(|&r| self.peer_event(r))
            .collect::<Result<Vec<_>>>()?;
        queue.enqueue_wait_events(&events)
    }

    /// How the descriptors of local rank `local_rank`'s part reached this rank:
    /// `DescriptorPath::Pidfd` or `DescriptorPath::Channel` (`None` for this rank itself or an
    /// index outside the node).
    pub fn descriptor_path(&self, local_rank: usize) -> Option<DescriptorPath> {
        self.paths.get(local_rank).copied().flatten()
    }

    fn no_such_rank(&self, local_rank: usize) -> Error {
        Error::invalid(format!(
            "local rank {local_rank} is not on this node of {} ranks",
            self.ranks.local_size()
        ))
    }
}

impl<T: Pod> NodeBuffer<'_, T> {
    /// Closes the buffer now, as dropping it does (collective over the node), and says
    /// whether every rank closed: `Errc::Runtime` when a rank died or the node's time-out
    /// passed first (this rank's own part is then released all the same, once the commands
    /// that use it completed).
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    /// Closes the peers' parts, then waits until every rank has closed ours before it goes
    /// (once: the exports are gone after the first call).
    fn release(&mut self) -> Result<()> {
        if self.exports.is_empty() {
            return Ok(());
        }
        self.peers.clear();
        self.peer_events.clear();
        let closed = self.ranks.barrier();
        let mut put_failure = None;
        for handle in self.exports.drain(..) {
            let put = match handle.kind() {
                ipc::IpcObjectKind::Memory => ipc::memory::put(handle),
                _ => ipc::event::put(handle),
            };
            if let Err(err) = put {
                put_failure.get_or_insert(err);
            }
        }
        closed.and(put_failure.map_or(Ok(()), Err))
    }
}

impl<T: Pod> Drop for NodeBuffer<'_, T> {
    fn drop(&mut self) {
        if let Err(err) = self.release() {
            log::warn!("sycl-rs: NodeBuffer drop: {err}");
        }
    }
}

impl NodeRanks {
    /// A [`NodeBuffer`] of `len` elements per rank: allocates this rank's part on `queue`'s
    /// device (`malloc_device`), exports it and an IPC event, exchanges the handles within the
    /// node through MPI or the hub, and opens every peer's part and event. Collective over the
    /// node (every rank passes the same `len`).
    ///
    /// Errors: `Errc::FeatureNotSupported` when the device lacks `ext_oneapi_ipc_memory` or
    /// `ext_oneapi_ipc_event`; `Errc::Runtime` when a peer's descriptors can be taken neither
    /// with `pidfd_getfd` nor through the rank channel, a peer's channel is not the process MPI
    /// named, a peer dies, or the timeout passes. When any rank fails, every rank of the node
    /// returns an error.
    pub fn node_buffer<T: Pod>(&self, queue: &Queue, len: usize) -> Result<NodeBuffer<'_, T>> {
        let local = crate::malloc_device::<T>(len, queue);
        self.node_share(queue, local)
    }

    /// [`NodeRanks::node_buffer`] for an owner that holds the ranks by `Arc` rather than
    /// borrowing them (a team made by
    /// [`Team::with_shared_ranks`](crate::collective::Team::with_shared_ranks), the Python
    /// bindings): the buffer keeps the ranks alive. Collective over the node, with the same
    /// errors.
    pub fn node_buffer_shared<T: Pod>(
        self: &Arc<Self>,
        queue: &Queue,
        len: usize,
    ) -> Result<NodeBuffer<'static, T>> {
        let local = crate::malloc_device::<T>(len, queue);
        NodeRef::Shared(self.clone()).share(queue, local)
    }

    /// [`NodeRanks::node_buffer`] over memory this rank already has (device USM of `queue`'s
    /// context, a whole allocation). `memory` is `Err` when its allocation failed: the rank
    /// still takes part in the collective, and every rank gets an error.
    pub fn node_share<T: Pod>(
        &self,
        queue: &Queue,
        memory: Result<Usm<T>>,
    ) -> Result<NodeBuffer<'_, T>> {
        NodeRef::Borrowed(self).share(queue, memory)
    }
}

/// The ranks a [`NodeBuffer`] belongs to: borrowed (the Rust API's lifetime) or shared by an
/// owner without one (the Python bindings).
enum NodeRef<'r> {
    Borrowed(&'r NodeRanks),
    Shared(Arc<NodeRanks>),
}

impl std::ops::Deref for NodeRef<'_> {
    type Target = NodeRanks;
    fn deref(&self) -> &NodeRanks {
        match self {
            NodeRef::Borrowed(r) => r,
            NodeRef::Shared(r) => r,
        }
    }
}

impl<'r> NodeRef<'r> {
    fn share<T: Pod>(self, queue: &Queue, memory: Result<Usm<T>>) -> Result<NodeBuffer<'r, T>> {
        let ranks = &*self;
        // 1. This rank's part, event and handles (or the reason it has none).
        let mine = memory.and_then(|local| {
            let event = Event::new_for_queue(
                queue,
                EventProperties {
                    enable_ipc: true,
                    enable_profiling: false,
                },
            )?;
            let mem_handle = ipc::memory::get(&local)?;
            let event_handle = ipc::event::get(&event)?;
            Ok((local, event, mem_handle, event_handle))
        });
        let message = match &mine {
            Ok((_, _, m, e)) => encode_handles(m, e),
            Err(err) => encode_failure(&err.to_string()),
        };
        let messages = ranks.all_gather_bytes("node buffer: handles", &message)?;
        let me = ranks.local_rank();
        let size = ranks.local_size();

        // 2. Open every peer's handles with pidfd_getfd; note the pairs that need the channel.
        let mut peers: Vec<Option<Usm<T>>> = (0..size).map(|_| None).collect();
        let mut peer_events: Vec<Option<Event>> = (0..size).map(|_| None).collect();
        let mut paths: Vec<Option<DescriptorPath>> = vec![None; size];
        let mut need_channel = vec![0u8; size];
        let mut failure: Option<Error> = mine.as_ref().err().cloned();
        for (r, msg) in messages.iter().enumerate() {
            if r == me || failure.is_some() {
                continue;
            }
            let (mem, ev) = match decode_handles(msg, r) {
                Ok(h) => h,
                Err(err) => {
                    failure = Some(err);
                    continue;
                }
            };
            if ranks.options().descriptors == DescriptorPath::Channel {
                need_channel[r] = 1;
                continue;
            }
            match ranks.open_pair::<T>(queue, &mem, &ev, r) {
                Ok((m, e)) => {
                    peers[r] = Some(m);
                    peer_events[r] = Some(e);
                    paths[r] = Some(DescriptorPath::Pidfd);
                }
                Err(err)
                    if ranks.options().descriptors == DescriptorPath::Auto
                        && descriptors_denied(&err) =>
                {
                    log::debug!("sycl-rs: local rank {r}: pidfd_getfd denied ({err}); using the rank channel");
                    need_channel[r] = 1;
                }
                // Anything else (a forged size, a revoked export, a dead peer) is the peer's
                // handle refused: final, and reported now, not after a channel time-out.
                Err(err) => failure = Some(err),
            }
        }

        // 3. The pairs that need the channel: every rank learns who will connect to it.
        let matrix = ranks.all_gather_fixed("node buffer: descriptor paths", &need_channel)?;
        let importers: Vec<usize> = (0..size).filter(|&r| matrix[r * size + me] == 1).collect();
        let exporters: Vec<usize> = (0..size).filter(|&r| need_channel[r] == 1).collect();
        if !importers.is_empty() || !exporters.is_empty() {
            let served = std::thread::scope(|s| {
                let watch = ranks.watch();
                let listener = &ranks.listener;
                let ours = mine.as_ref().ok().map(|(_, _, mem, ev)| (mem, ev));
                let importers = &importers;
                let server = s.spawn(move || match ours {
                    Some((mem, ev)) => serve_handles(listener, &watch, importers, mem, ev),
                    // Nothing to serve: the importers learn our failure from the status round.
                    None => Ok(()),
                });
                // Fetch from every exporter that expects us, even after a failure, so that
                // no exporter waits for a connection that never comes.
                for &r in &exporters {
                    let fetched = ranks.fetch_handles(r);
                    if failure.is_some() {
                        continue;
                    }
                    match fetched.and_then(|(mem, ev)| ranks.open_pair::<T>(queue, &mem, &ev, r)) {
                        Ok((m, e)) => {
                            peers[r] = Some(m);
                            peer_events[r] = Some(e);
                            paths[r] = Some(DescriptorPath::Channel);
                        }
                        Err(err) => failure = Some(err),
                    }
                }
                server
                    .join()
                    .unwrap_or_else(|_| Err(Error::new(Errc::Runtime, "handle server panicked")))
            });
            if let (Err(err), None) = (served, &failure) {
                failure = Some(err);
            }
        }

        // 4. Every rank reports; one failure fails them all.
        let status = [u8::from(failure.is_some())];
        let statuses = ranks.all_gather_fixed("node buffer: status", &status)?;
        if let Some(err) = failure {
            return Err(err);
        }
        if let Some(bad) = statuses.iter().position(|&s| s != 0) {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "node buffer: local rank {bad} (rank {}) failed to share or open its part",
                    ranks.members[bad]
                ),
            ));
        }
        let (local, local_event, mem_handle, event_handle) = mine?;
        Ok(NodeBuffer {
            ranks: self,
            local,
            local_event,
            exports: vec![mem_handle, event_handle],
            peers,
            peer_events,
            paths,
        })
    }
}

impl NodeRanks {
    fn open_pair<T: Pod>(
        &self,
        queue: &Queue,
        mem: &Handle,
        ev: &Handle,
        r: usize,
    ) -> Result<(Usm<T>, Event)> {
        // The handle names the process that exported it: it must be the rank MPI says.
        for h in [mem, ev] {
            if h.exporter_pid() != self.pids[r] {
                return Err(Error::new(
                    Errc::Runtime,
                    format!(
                        "local rank {r} sent a handle of pid {}, but its pid is {}",
                        h.exporter_pid(),
                        self.pids[r]
                    ),
                ));
            }
        }
        let memory = ipc::memory::open::<T>(mem, queue.context(), queue.device())?;
        let event = ipc::event::open(ev, queue.context())?;
        Ok((memory, event))
    }

    /// Receives local rank `r`'s handles through its channel, after checking that the
    /// listening process is the one MPI named.
    fn fetch_handles(&self, r: usize) -> Result<(Handle, Handle)> {
        let channel = Channel::connect(&self.channel_names[r])?;
        let pid = channel.peer_credentials()?.pid;
        if pid != self.pids[r] {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "the rank channel of local rank {r} is held by pid {pid}, not by the rank's \
                     pid {}",
                    self.pids[r]
                ),
            ));
        }
        channel.set_recv_timeout(Some(self.options().timeout))?;
        let mem = channel.recv_handle()?;
        let ev = channel.recv_handle()?;
        Ok((mem, ev))
    }
}

/// Sends our handles, descriptors attached, to each of `importers` that connects; each
/// connection must come from the process MPI named for that rank.
fn serve_handles(
    listener: &Listener,
    watch: &NodeWatch<'_>,
    importers: &[usize],
    mem: &Handle,
    ev: &Handle,
) -> Result<()> {
    let deadline = Instant::now() + watch.timeout;
    let mut pending: Vec<usize> = importers.to_vec();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = left.clamp(Duration::from_millis(1), Duration::from_millis(200));
        let channel = match listener.accept(Some(wait)) {
            Ok(c) => c,
            Err(_) if Instant::now() < deadline => {
                watch.check_alive()?;
                continue;
            }
            Err(err) => return Err(err),
        };
        let pid = channel.peer_credentials()?.pid;
        let Some(at) = pending.iter().position(|&r| watch.pids[r] == pid) else {
            // Not a rank we expect: say nothing and hang up.
            log::warn!("sycl-rs: rank channel: refused a connection from pid {pid}");
            continue;
        };
        pending.swap_remove(at);
        channel.send_handle(mem)?;
        channel.send_handle(ev)?;
    }
    Ok(())
}

/// Whether `err`, from opening a peer's handles with descriptors taken by `pidfd_getfd`, says
/// only that the kernel denied this rank the peer's descriptors (`EPERM`/`EACCES`: no ptrace
/// rights), which the rank channel works around. Every other failure refuses the handle itself.
fn descriptors_denied(err: &Error) -> bool {
    let denied = [rustix::io::Errno::PERM, rustix::io::Errno::ACCESS].map(|e| e.raw_os_error());
    err.code() == Errc::Runtime
        && err
            .native()
            .is_some_and(|n| denied.iter().any(|&d| i64::from(d) == n.code))
}

const TAG_OK: u8 = 1;
const TAG_FAILED: u8 = 2;

fn encode_handles(mem: &Handle, ev: &Handle) -> Vec<u8> {
    let (m, e) = (mem.as_bytes(), ev.as_bytes());
    let mut out = Vec::with_capacity(5 + m.len() + e.len());
    out.push(TAG_OK);
    out.extend_from_slice(&(m.len() as u32).to_le_bytes());
    out.extend_from_slice(m);
    out.extend_from_slice(e);
    out
}

fn encode_failure(why: &str) -> Vec<u8> {
    let mut out = vec![TAG_FAILED];
    out.extend_from_slice(why.as_bytes());
    out
}

/// A peer's message: its two handles, parsed and checked, or the failure it reported.
fn decode_handles(msg: &[u8], r: usize) -> Result<(Handle, Handle)> {
    let bad = || Error::invalid(format!("local rank {r} sent a malformed handle message"));
    match msg.split_first() {
        Some((&TAG_OK, rest)) if rest.len() >= 4 => {
            let (len, rest) = rest.split_at(4);
            let len = u32::from_le_bytes(len.try_into().map_err(|_| bad())?) as usize;
            if len > rest.len() {
                return Err(bad());
            }
            let (m, e) = rest.split_at(len);
            Ok((Handle::from_bytes(m)?, Handle::from_bytes(e)?))
        }
        Some((&TAG_FAILED, why)) => Err(Error::new(
            Errc::Runtime,
            format!(
                "local rank {r} could not share its part: {}",
                String::from_utf8_lossy(why)
            ),
        )),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29, item 5: a peer's handle with a forged size is refused for good, not retried
    /// through the rank channel (which reported "recvmsg: timed out" after the whole time-out);
    /// only a denied `pidfd_getfd` falls back.
    #[test]
    fn only_denied_descriptors_fall_back_to_the_channel() {
        let q = Queue::in_order(&crate::Device::native_cpu()).unwrap();
        let mem = crate::malloc_device::<u32>(1024, &q).unwrap();
        let handle = ipc::memory::get(&mem).unwrap();
        let mut header = handle.header.clone();
        header.object_size *= 16;
        let forged = Handle::from_bytes(header.encode(handle.payload()).unwrap()).unwrap();
        let refused = ipc::memory::open::<u32>(&forged, q.context(), q.device()).unwrap_err();
        assert_eq!(refused.code(), Errc::Invalid, "{refused}");
        assert!(!descriptors_denied(&refused), "{refused}");
        for errno in [rustix::io::Errno::PERM, rustix::io::Errno::ACCESS] {
            let denied = Error::os(
                Errc::Runtime,
                "pidfd_getfd",
                errno,
                crate::BackendKind::NativeCpu,
            );
            assert!(descriptors_denied(&denied), "{denied}");
        }
        let other = Error::os(
            Errc::Runtime,
            "pidfd_getfd",
            rustix::io::Errno::NOMEM,
            crate::BackendKind::NativeCpu,
        );
        assert!(!descriptors_denied(&other));
        ipc::memory::put(handle).unwrap();
    }

    #[test]
    fn malformed_peer_messages_are_errors() {
        for msg in [
            &[][..],
            &[9, 1, 2][..],
            &[TAG_OK][..],
            &[TAG_OK, 200, 0, 0, 0, 1, 2, 3][..],
            &[TAG_OK, 3, 0, 0, 0, 1, 2, 3][..],
        ] {
            let err = decode_handles(msg, 1).unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{msg:?}: {err}");
        }
        let err = decode_handles(&encode_failure("out of memory"), 3).unwrap_err();
        assert_eq!(err.code(), Errc::Runtime);
        assert!(err.to_string().contains("local rank 3"), "{err}");
        assert!(err.to_string().contains("out of memory"), "{err}");
    }
}
