//! The record behind every piece of memory sycl-rs hands out, and the rules of who may touch
//! it when (spec/soundness.md).
//!
//! A [`MemoryRecord`] is shared (`Arc`) by its owner (`Usm`, `Mapping`) and by every range,
//! view and kernel argument made from it; the memory is released when the last of them goes
//! and the commands that used it have ended, never before (an explicit `free`, `close` or
//! `unmap` that is not the last reference is refused; a drop while commands run leaves the
//! release to [`super::deferred`]). Its [`AccessState`] arbitrates between the agents that can touch the memory:
//!
//! | agent | how it is tracked | excludes |
//! |---|---|---|
//! | device commands (copies, fills, kernels) | an in-flight count while submitting, then their events | host writers; host readers for commands that write |
//! | host borrows (`HostSlice`, `HostSliceMut`) | a reader count or a writer flag | everything but device reads, for readers |
//! | views (`UsmView`, for closure kernels and host threads) | a count of live views | host borrows |
//! | other processes | the `shared` flag, set once exported or opened | host borrows, for ever |
//!
//! Views use atomic accesses, so views, device commands and other processes may race with
//! each other without undefined behaviour (the values are unspecified, as on a device). Host
//! borrows are plain Rust references: they exist only while nothing else can write.
#![allow(unsafe_code)]

use std::borrow::Borrow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};
use sycl_backend::{AccessMode, EventStatus, UsmKind};

use crate::ipc::ExportSet;
use crate::{Context, Device, Errc, Error, Queue, Result};

/// What happens to a record's memory when its last reference goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// `usm_free`.
    Free,
    /// `ipc_close_mem`.
    IpcClose,
    /// `unmap` of a virtual-memory mapping.
    Unmap,
    /// Nothing: foreign memory (`Usm::from_foreign`), whose owner, the record's anchor, is
    /// dropped after the release and gives the memory back to its producer.
    Foreign,
    /// Nothing (zero-sized).
    Nothing,
}

/// How a device command uses a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// Only reads it (a copy's source, a prefetch).
    Read,
    /// May write it (a copy's destination, a fill, a kernel argument).
    Write,
}

/// The host's borrow of a record's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostBorrow {
    None,
    /// `HostSlice`s alive.
    Readers(usize),
    /// A `HostSliceMut` alive.
    Writer,
}

/// The access mode of the memory, for mappings and foreign memory (USM is always
/// read-write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Set(AccessMode),
    /// `set_access_mode` is waiting for commands before it changes the protection.
    Changing,
}

/// The fewest commands a record tracks before it drops completed ones (`AccessState::prune_at`).
const PRUNE_FLOOR: usize = 64;

/// A command that uses the memory and may not have completed.
struct Pending {
    event: Arc<dyn sycl_backend::Event>,
    writes: bool,
}

/// Everything the access rules decide on, under one lock.
struct AccessState {
    pending: Vec<Pending>,
    /// `pending`'s length at which completed commands are dropped from it next: twice what
    /// the last pruning kept (at least [`PRUNE_FLOOR`]), so that a record used by many commands in flight
    /// asks each event's status a bounded number of times per command (a status can be a
    /// driver call) instead of every command asking all of them again.
    prune_at: usize,
    /// Submissions admitted but not yet tracked (their event does not exist yet).
    in_flight: usize,
    host: HostBorrow,
    /// Another process may map this memory (it was exported, or opened from an export).
    shared: bool,
    mode: Mode,
    /// The width of the atomic parts the live views use (see `begin_view`).
    view_width: usize,
}

pub(crate) struct MemoryRecord {
    pub(crate) context: Context,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    pub(crate) kind: UsmKind,
    pub(crate) device: Option<Device>,
    pub(crate) host_accessible: bool,
    pub(crate) release: Release,
    /// See [`Backing`].
    pub(crate) backing: Option<Backing>,
    /// Set once the release was handed out (`take_releasable`).
    released: bool,
    state: Mutex<AccessState>,
    /// Signalled when `in_flight` drops to 0.
    settled: Condvar,
    /// Live `UsmView`s. Counted outside the lock: a view is only *made* under it (after the
    /// host-borrow check), and clones and drops of existing views cannot change whether the
    /// count is zero in a way a borrow check could miss.
    views: AtomicUsize,
    /// IPC exports of this memory (`ipc::memory::get`), revoked on release; made by the
    /// first export (most memory is never exported: no allocation for it).
    pub(crate) exports: OnceLock<Arc<ExportSet>>,
    /// Keeps what the memory depends on alive (the physical memory of a mapping, the owner
    /// of foreign memory). Moved into the release and dropped after it (`Releasable`), so
    /// after every command that used the memory.
    _anchor: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// Where a record's bytes live when its address is not their only name: a mapping of physical
/// memory is `object` (the physical memory's identity) from byte `offset`, and a second mapping
/// of the same bytes elsewhere names them the same way. Checks that must see every name of the
/// same bytes (a `&mut [T]` kernel argument aliasing another) compare these too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backing {
    pub(crate) object: usize,
    pub(crate) offset: u64,
}

/// Describes a record for [`MemoryRecord::new`].
pub(crate) struct RecordSpec {
    pub(crate) context: Context,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    pub(crate) kind: UsmKind,
    pub(crate) device: Option<Device>,
    pub(crate) release: Release,
    /// Another process may map it from the start (opened through IPC, IPC physical memory).
    pub(crate) shared: bool,
    pub(crate) mode: AccessMode,
    pub(crate) anchor: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Another name of the same bytes (mappings of physical memory), `None` for the rest.
    pub(crate) backing: Option<Backing>,
}

fn refuse(why: impl Into<String>) -> Error {
    Error::new(Errc::Invalid, why)
}

impl MemoryRecord {
    pub(crate) fn new(spec: RecordSpec) -> Arc<MemoryRecord> {
        let host_accessible = match spec.kind {
            UsmKind::Host | UsmKind::Shared => true,
            // Foreign system memory: ordinary host memory of this process.
            UsmKind::Unknown if spec.release == Release::Foreign => true,
            UsmKind::Device | UsmKind::Unknown => spec.device.as_ref().is_some_and(Device::is_cpu),
        };
        Arc::new(MemoryRecord {
            context: spec.context,
            ptr: spec.ptr,
            size: spec.size,
            kind: spec.kind,
            device: spec.device,
            host_accessible,
            release: spec.release,
            backing: spec.backing,
            released: false,
            state: Mutex::new(AccessState {
                pending: Vec::new(),
                prune_at: PRUNE_FLOOR,
                in_flight: 0,
                host: HostBorrow::None,
                shared: spec.shared,
                mode: Mode::Set(spec.mode),
                view_width: 0,
            }),
            settled: Condvar::new(),
            views: AtomicUsize::new(0),
            exports: OnceLock::new(),
            _anchor: spec.anchor,
        })
    }

    // ---- device commands

    /// Submits a command that uses `uses` (records may repeat: the strongest use counts):
    /// checks that each record admits the use now, runs `submit`, and tracks the event it
    /// returns on every record, so that host borrows and the release wait for it.
    ///
    /// The records are not locked while `submit` runs (a backend may wait there, e.g. for a
    /// host task that itself submits); they count the submission as in flight instead, which
    /// a host borrow waits out.
    pub(crate) fn submit(
        uses: &[(&Arc<MemoryRecord>, Use)],
        submit: impl FnOnce() -> Result<Arc<dyn sycl_backend::Event>>,
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let merged = merge_uses(uses);
        let mut in_flight = InFlight::admit(&merged)?;
        let event = submit()?;
        in_flight.event = Some(event.clone());
        Ok(event)
    }

    /// As [`MemoryRecord::submit`], for work that may finish inside `submit` (it returns
    /// `None` then): the records count it in flight while it runs and track its event only
    /// when it made one. `uses` names each record once (see [`add_use`]), so that nothing
    /// needs merging on the way: the eager collectives' path, where every cycle shows.
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    pub(crate) fn submit_or_run(
        uses: &[(Arc<MemoryRecord>, Use)],
        submit: impl FnOnce() -> Result<Option<Arc<dyn sycl_backend::Event>>>,
    ) -> Result<Option<Arc<dyn sycl_backend::Event>>> {
        let mut in_flight = InFlight::admit(uses)?;
        let event = submit()?;
        in_flight.event = event.clone();
        Ok(event)
    }

    /// Runs `transfer`, an agent outside any queue that reads or writes the records' memory
    /// through raw pointers until it returns (MPI moving bytes in or out, `sycl::ranks`),
    /// admitted and counted in flight like a device command (records may repeat, as in
    /// `submit`): no host borrow can exist while it runs, and a read-only mapping refuses a
    /// writing transfer.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn during_transfer<R>(
        uses: &[(&Arc<MemoryRecord>, Use)],
        transfer: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let merged = merge_uses(uses);
        let in_flight = InFlight::admit(&merged)?;
        let result = transfer();
        drop(in_flight);
        result
    }

    fn admit(&self, use_: Use) -> Result<()> {
        // (Counted as in flight on success; `InFlight` settles it, whatever happens next.)
        let mut st = self.state.lock();
        match st.mode {
            Mode::Changing => {
                return Err(refuse(
                    "the mapping's access mode is being changed by another thread",
                ))
            }
            Mode::Set(AccessMode::None) => {
                return Err(refuse(
                    "the mapping's access mode is none: no command may read or write it",
                ))
            }
            Mode::Set(AccessMode::Read) if use_ == Use::Write => {
                return Err(refuse(if self.release == Release::Foreign {
                    "the foreign memory is read-only (its producer lent it so): no command may \
                     write it"
                } else {
                    "the mapping's access mode is read: no command may write it"
                }))
            }
            Mode::Set(_) => {}
        }
        match (st.host, use_) {
            (HostBorrow::Writer, _) => {
                return Err(refuse(
                    "the memory is borrowed by the host (a HostSliceMut is alive): drop it before \
                     submitting commands that use the memory",
                ))
            }
            (HostBorrow::Readers(_), Use::Write) => {
                return Err(refuse(
                    "the memory is borrowed by the host (a HostSlice is alive): drop it before \
                     submitting commands that write the memory",
                ))
            }
            _ => {}
        }
        st.in_flight += 1;
        Ok(())
    }

    fn settle(&self, tracked: Option<Pending>) {
        let mut st = self.state.lock();
        if let Some(p) = tracked {
            if st.pending.len() >= st.prune_at {
                // The completed commands at the front: the first that has not completed ends
                // the pass, so a pass asks a driver at most once about a command still running
                // (a status is a driver call; asking every command cost about 2 us per launch
                // of an eager collective on CUDA). What it keeps is only waited for sooner.
                let done = st
                    .pending
                    .iter()
                    .take_while(|p| matches!(p.event.status(), Ok(EventStatus::Complete)))
                    .count();
                st.pending.drain(..done);
                st.prune_at = (2 * st.pending.len()).max(PRUNE_FLOOR);
            }
            st.pending.push(p);
        }
        st.in_flight -= 1;
        if st.in_flight == 0 {
            self.settled.notify_all();
        }
    }

    /// Waits until no submission is in flight, under the lock.
    fn settle_in_flight(&self, st: &mut parking_lot::MutexGuard<'_, AccessState>) {
        while st.in_flight > 0 {
            self.settled.wait(st);
        }
    }

    /// Waits for `events` (commands that used the memory). A failed command is reported by
    /// its own event; here it only must have ended.
    fn wait_all(&self, events: Vec<Arc<dyn sycl_backend::Event>>) {
        for event in events {
            if let Err(err) = event.wait() {
                log::debug!(
                    "sycl-rs: a command using memory at {:#x} failed: {err}",
                    self.ptr
                );
            }
        }
    }

    // ---- host borrows

    /// Starts a host borrow (shared for `write == false`): waits for the commands that
    /// conflict with it, and refuses while views exist, another process may write the memory,
    /// or a conflicting borrow exists. Pair with [`MemoryRecord::end_host_borrow`].
    pub(crate) fn begin_host_borrow(&self, write: bool) -> Result<()> {
        if !self.host_accessible {
            return Err(self.not_host_accessible());
        }
        let conflicting = {
            let mut st = self.state.lock();
            if self.release == Release::Foreign {
                return Err(refuse(
                    "the memory is foreign (another library owns it and may write it at any \
                     time): a Rust slice over it would be unsound. Read and write it through a \
                     UsmView (atomic accesses) or with queue copies",
                ));
            }
            if st.shared {
                return Err(refuse(
                    "the memory is shared with other processes (exported or opened through \
                     IPC), which may write it at any time: a Rust slice over it would be \
                     unsound. Read and write it through a UsmView (atomic accesses) or with \
                     queue copies",
                ));
            }
            let views = self.views.load(Ordering::Acquire);
            if views > 0 {
                return Err(refuse(format!(
                    "{views} UsmView(s) of the memory are alive (kernels or threads may write \
                     through them): drop them, and wait for the kernels that hold them, first"
                )));
            }
            match (st.host, write) {
                (HostBorrow::Writer, _) => {
                    return Err(refuse("the memory is already borrowed mutably by the host"))
                }
                (HostBorrow::Readers(_), true) => {
                    return Err(refuse("the memory is already borrowed by the host"))
                }
                _ => {}
            }
            self.settle_in_flight(&mut st);
            st.host = match st.host {
                HostBorrow::Readers(n) if !write => HostBorrow::Readers(n + 1),
                _ if write => HostBorrow::Writer,
                _ => HostBorrow::Readers(1),
            };
            st.pending
                .retain(|p| !matches!(p.event.status(), Ok(EventStatus::Complete)));
            st.pending
                .iter()
                .filter(|p| write || p.writes)
                .map(|p| p.event.clone())
                .collect::<Vec<_>>()
        };
        self.wait_all(conflicting);
        Ok(())
    }

    pub(crate) fn end_host_borrow(&self) {
        let mut st = self.state.lock();
        st.host = match st.host {
            HostBorrow::Readers(n) if n > 1 => HostBorrow::Readers(n - 1),
            _ => HostBorrow::None,
        };
    }

    // ---- views

    /// Counts a new view whose atomic accesses are `part_width` bytes wide: refused while the
    /// host borrows the memory, the mapping is not read-write, or live views use another
    /// width (racing atomic accesses of different sizes to the same bytes are undefined
    /// behaviour; views of one element width never mix them).
    pub(crate) fn begin_view(&self, part_width: usize) -> Result<()> {
        if !self.host_accessible {
            return Err(self.not_host_accessible());
        }
        let mut st = self.state.lock();
        if self.views.load(Ordering::Acquire) > 0 && st.view_width != part_width {
            return Err(refuse(format!(
                "live views of this memory access it in {}-byte parts; a view accessing it in \
                 {part_width}-byte parts could race with them (mixed-size atomics): drop them, \
                 or view it with an element type of the same alignment",
                st.view_width
            )));
        }
        st.view_width = part_width;
        match st.mode {
            Mode::Set(AccessMode::ReadWrite) => {}
            _ => {
                return Err(refuse(
                    "a view needs a read-write mapping (its access mode is not read_write)",
                ))
            }
        }
        if st.host != HostBorrow::None {
            return Err(refuse(
                "the memory is borrowed by the host (a HostSlice or HostSliceMut is alive)",
            ));
        }
        self.views.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Another view of a record that already has one.
    pub(crate) fn clone_view(&self) {
        self.views.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn end_view(&self) {
        self.views.fetch_sub(1, Ordering::AcqRel);
    }

    // ---- sharing with other processes and access modes

    /// Marks the memory as reachable by other processes (before its first export): refused
    /// while the host borrows it.
    pub(crate) fn mark_shared(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.host != HostBorrow::None {
            return Err(refuse(
                "the memory is borrowed by the host (a HostSlice or HostSliceMut is alive): \
                 another process could write it under the borrow",
            ));
        }
        st.shared = true;
        Ok(())
    }

    /// Whether another process may map the memory.
    pub(crate) fn is_shared(&self) -> bool {
        self.state.lock().shared
    }

    /// Whether commands may only read the memory (a read mapping, read-only foreign memory).
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self.state.lock().mode, Mode::Set(AccessMode::Read))
    }

    /// Changes the access mode with `apply` (the backend's `set_access_mode`) once the commands
    /// that use the memory completed; refused while views exist. Commands submitted meanwhile
    /// are refused.
    pub(crate) fn change_mode(
        &self,
        mode: AccessMode,
        apply: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let (old, pending) = {
            let mut st = self.state.lock();
            let views = self.views.load(Ordering::Acquire);
            if views > 0 {
                return Err(refuse(format!(
                    "{views} UsmView(s) of the mapping are alive: drop them before changing its \
                     access mode"
                )));
            }
            let Mode::Set(old) = st.mode else {
                return Err(refuse(
                    "the mapping's access mode is being changed by another thread",
                ));
            };
            self.settle_in_flight(&mut st);
            st.mode = Mode::Changing;
            let pending = st.pending.drain(..).map(|p| p.event).collect::<Vec<_>>();
            (old, pending)
        };
        self.wait_all(pending);
        let result = apply();
        self.state.lock().mode = Mode::Set(if result.is_ok() { mode } else { old });
        result
    }

    // ---- release

    /// What releasing the memory takes, moved out of the record once (`None` the second
    /// time). The exports are revoked here, at once: whoever releases the memory is its last
    /// owner, so no process may start opening it any more, even while commands still run.
    fn take_releasable(&mut self) -> Option<Releasable> {
        if std::mem::replace(&mut self.released, true) {
            return None;
        }
        if let Some(exports) = self.exports.take() {
            exports.revoke_all();
        }
        Some(Releasable {
            context: self.context.clone(),
            ptr: self.ptr,
            size: self.size,
            release: self.release,
            anchor: self._anchor.take(),
        })
    }

    /// The commands that used the memory and have not ended.
    fn unfinished_commands(&self) -> Vec<Arc<dyn sycl_backend::Event>> {
        let mut st = self.state.lock();
        st.pending
            .drain(..)
            .map(|p| p.event)
            .filter(unfinished)
            .collect()
    }

    /// The explicit release (`free`, `close`, `unmap`) of a record owned through `record`:
    /// when that is the last reference, waits for the commands that used the memory and
    /// releases it now, reporting errors; otherwise refuses with `Errc::Invalid` and leaves
    /// the release to the last reference.
    pub(crate) fn release_explicitly(record: Arc<MemoryRecord>, what: &str) -> Result<()> {
        match Arc::try_unwrap(record) {
            Ok(mut record) => {
                let Some(memory) = record.take_releasable() else {
                    return Ok(());
                };
                let pending = record.unfinished_commands();
                record.wait_all(pending);
                memory.release()
            }
            Err(record) => {
                let others = Arc::strong_count(&record) - 1;
                Err(refuse(format!(
                    "{what}: {others} other reference(s) to the memory (ranges, views, kernel \
                     arguments or opened copies) are alive; it is released when the last of \
                     them is dropped, not now"
                )))
            }
        }
    }

    // ---- checks

    pub(crate) fn check_queue(&self, queue: &Queue) -> Result<()> {
        if self.release == Release::Foreign
            && self.kind == UsmKind::Unknown
            && !queue
                .device()
                .has(sycl_backend::Aspect::UsmSystemAllocations)
        {
            return Err(Error::new(
                Errc::Invalid,
                format!(
                    "foreign host memory is reachable only from queues on devices with \
                     usm_system_allocations, which {} lacks",
                    queue.device().name()
                ),
            ));
        }
        let same_platform = self.context.platform() == queue.context().platform();
        if same_platform || self.host_accessible {
            Ok(())
        } else {
            Err(Error::new(
                Errc::Invalid,
                format!(
                    "memory of the {} backend is not accessible from a {} queue",
                    self.context.backend(),
                    queue.backend()
                ),
            ))
        }
    }

    pub(crate) fn not_host_accessible(&self) -> Error {
        refuse(format!(
            "{} USM on a {} device is not accessible from the host",
            self.kind,
            self.context.backend()
        ))
    }
}

/// The records a submission was admitted to: settled when it ends, with its event when it
/// made one, also if the backend's submission fails or panics (a count left in flight would
/// make every later host borrow of the memory wait for ever).
struct InFlight<'a, R: Borrow<Arc<MemoryRecord>>> {
    admitted: &'a [(R, Use)],
    event: Option<Arc<dyn sycl_backend::Event>>,
}

/// Adds `use_` of `record` to `uses`, which names each record once, at the strongest use it
/// appears with (as [`merge_uses`] gives).
#[cfg_attr(not(feature = "collective"), allow(dead_code))]
pub(crate) fn add_use(
    uses: &mut Vec<(Arc<MemoryRecord>, Use)>,
    record: &Arc<MemoryRecord>,
    use_: Use,
) {
    add_merged(uses, record, use_, Arc::clone);
}

/// `uses` with each record once, at the strongest use it appears with.
pub(crate) fn merge_uses<'a>(
    uses: &[(&'a Arc<MemoryRecord>, Use)],
) -> Vec<(&'a Arc<MemoryRecord>, Use)> {
    let mut merged = Vec::with_capacity(uses.len());
    for &(record, use_) in uses {
        add_merged(&mut merged, record, use_, |r| r);
    }
    merged
}

/// Adds `use_` of `record` to `uses` (each record once, at its strongest use), as `own`
/// makes an entry of it.
fn add_merged<'a, R: Borrow<Arc<MemoryRecord>>>(
    uses: &mut Vec<(R, Use)>,
    record: &'a Arc<MemoryRecord>,
    use_: Use,
    own: impl FnOnce(&'a Arc<MemoryRecord>) -> R,
) {
    match uses
        .iter_mut()
        .find(|(r, _)| Arc::ptr_eq(r.borrow(), record))
    {
        Some((_, u)) if use_ == Use::Write => *u = Use::Write,
        Some(_) => {}
        None => uses.push((own(record), use_)),
    }
}

impl<'a, R: Borrow<Arc<MemoryRecord>>> InFlight<'a, R> {
    /// Admits every use (each record once: see `merge_uses`), or none: on a refusal the ones
    /// already admitted settle again.
    fn admit(merged: &'a [(R, Use)]) -> Result<InFlight<'a, R>> {
        let mut in_flight = InFlight {
            admitted: &merged[..0],
            event: None,
        };
        for (i, (record, use_)) in merged.iter().enumerate() {
            record.borrow().admit(*use_)?;
            in_flight.admitted = &merged[..=i];
        }
        Ok(in_flight)
    }
}

impl<R: Borrow<Arc<MemoryRecord>>> Drop for InFlight<'_, R> {
    fn drop(&mut self) {
        for (record, use_) in self.admitted {
            let tracked = self.event.as_ref().map(|e| Pending {
                event: e.clone(),
                writes: *use_ == Use::Write,
            });
            record.borrow().settle(tracked);
        }
    }
}

/// Whether the command of `event` may still use memory: submitted or running. A completed
/// command has ended, and so has a failed one (its status is an error).
pub(super) fn unfinished(event: &Arc<dyn sycl_backend::Event>) -> bool {
    matches!(
        event.status(),
        Ok(EventStatus::Submitted | EventStatus::Running)
    )
}

/// Memory whose last reference went, with what its release needs: the record's context
/// (kept alive until then), the release itself, and the anchor, dropped after it.
pub(crate) struct Releasable {
    context: Context,
    ptr: u64,
    size: usize,
    release: Release,
    anchor: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Releasable {
    /// Frees, closes or unmaps. Called only once every command that used the memory has
    /// ended (the caller waited, or [`super::deferred`] saw them complete).
    pub(super) fn release(self) -> Result<()> {
        let ctx = self.context.raw();
        let result = match self.release {
            // Foreign: the anchor (the owner) is dropped below, after this.
            Release::Nothing | Release::Foreign => Ok(()),
            // No range, view or kernel argument can reach `ptr` any more: the record this came
            // from lost its last reference (`Arc` dropped or unwrapped), and
            // `take_releasable` hands a release out once.
            // SAFETY: as just said; every command that used the memory has ended (this
            // function's contract); `ptr` came from `usm_alloc` of this context.
            Release::Free => unsafe { ctx.usm_free(self.ptr) },
            // SAFETY: as above; `ptr` is what `ipc_open_mem` returned.
            Release::IpcClose => unsafe { ctx.ipc_close_mem(self.ptr) },
            // SAFETY: as above; `[ptr, ptr+size)` is exactly one mapping made by `map_physical`.
            Release::Unmap => unsafe { ctx.unmap(self.ptr, self.size) },
        };
        drop(self.anchor);
        result
    }

    /// For messages.
    pub(super) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The backend whose driver releases it.
    pub(super) fn backend(&self) -> sycl_backend::BackendKind {
        self.context.backend()
    }
}

impl Drop for MemoryRecord {
    /// The last reference went. Commands that used the memory may still run (the memory model
    /// allows dropping the owner then, and a queue's worker may drop a kernel's arguments
    /// before that kernel's event completes): the release then waits for them on the
    /// runtime's release thread, never here, since this thread may be the one they wait for.
    fn drop(&mut self) {
        let Some(memory) = self.take_releasable() else {
            return;
        };
        let pending = self.unfinished_commands();
        if pending.is_empty() {
            if let Err(err) = memory.release() {
                log::warn!("sycl-rs: releasing memory at {:#x} failed: {err}", self.ptr);
            }
        } else {
            super::deferred::release_after(pending, memory);
        }
    }
}
