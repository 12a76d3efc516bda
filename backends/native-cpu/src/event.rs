//! Events: a futex word `pending` (0 = complete) plus status and profiling fields.
//!
//! Command events and ordinary standalone events keep their state inline and use private
//! futex operations. IPC events keep it in a page of their own memfd, mapped `MAP_SHARED` by
//! every process that opened the event, and use shared futex operations, so a signal in one
//! process wakes waiters in another without polling.

use std::any::Any;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::io::Errno;
use rustix::mm::ProtFlags;
use rustix::thread::futex;
use sycl_backend::ipc::{process_start_time, ExporterId};
use sycl_backend::{BackendKind, Errc, Error, EventProperties, EventStatus, ProfilingInfo, Result};

use crate::sys::{self, FileId, Mapping};

/// Written into a shared event page so an importer can tell it mapped an event.
const SHARED_MAGIC: u32 = 0x5359_4556; // "SYEV"

/// How long a waiter spins before it sleeps in the kernel.
const SPIN: Duration = Duration::from_micros(20);

/// How long a wait on a shared event sleeps before it checks that its peers still live.
const PEER_CHECK_SLICE: Duration = Duration::from_millis(50);

/// The state of an event; lives inline or in a shared page (hence `repr(C)` and only atomics).
#[repr(C)]
#[derive(Default)]
pub(crate) struct EventState {
    magic: AtomicU32,
    /// Outstanding signals: 0 = complete. The futex word.
    pending: AtomicU32,
    /// Threads (of any process) sleeping on `pending`.
    waiters: AtomicU32,
    /// 0 = submitted, 1 = running.
    phase: AtomicU32,
    /// 1 when the timestamps below are meaningful.
    timestamps: AtomicU32,
    /// Pid of the process that armed the latest signal.
    signaller_pid: AtomicU32,
    /// Start time of that process (`/proc/PID/stat` field 22).
    signaller_start: AtomicU64,
    submit_ns: AtomicU64,
    start_ns: AtomicU64,
    end_ns: AtomicU64,
    /// Completed `enqueue_signal_event`s, wrapping (`ext_sycl_rs_event_signal_count`). A
    /// futex word of its own, so count waiters sleep apart from completion waiters.
    signals: AtomicU32,
    /// Threads (of any process) sleeping on `signals`.
    signal_waiters: AtomicU32,
}

enum Storage {
    Local(EventState),
    Shared {
        map: Mapping,
        /// The memfd of the page; kept open so the event can be exported (exporter side only).
        fd: Option<OwnedFd>,
        id: FileId,
    },
}

/// An event of the native CPU backend.
pub struct Event {
    storage: Storage,
    /// The error of the command, if it failed (process-local).
    error: Mutex<Option<Error>>,
    /// For an imported event: who exported it.
    peer: Option<ExporterId>,
    /// Standalone event made with `enable_profiling`.
    profiling: bool,
}

impl Event {
    fn with_storage(storage: Storage, peer: Option<ExporterId>, profiling: bool) -> Event {
        Event {
            storage,
            error: Mutex::new(None),
            peer,
            profiling,
        }
    }

    /// The event of a command just submitted (one pending signal).
    pub(crate) fn command(profiling: bool) -> Arc<Event> {
        let state = EventState::default();
        state.pending.store(1, Ordering::Relaxed);
        if profiling {
            state.timestamps.store(1, Ordering::Relaxed);
            state.submit_ns.store(sys::now_ns(), Ordering::Relaxed);
        }
        Arc::new(Event::with_storage(Storage::Local(state), None, false))
    }

    /// A standalone event in the complete state (`make_event`); with `enable_ipc`, its state
    /// lives in a page of its own sealed memfd, which [`crate::host_ipc::export_event`] exports.
    pub fn standalone(props: EventProperties) -> Result<Arc<Event>> {
        if props.enable_ipc && props.enable_profiling {
            return Err(Error::invalid(
                "an event cannot have both enable_ipc and enable_profiling",
            ));
        }
        let storage = if props.enable_ipc {
            let page = sys::page_size();
            let fd = sys::memfd("sycl-rs-event", page)?;
            let (id, _) = sys::file_id(&fd)?;
            let map = Mapping::shared(&fd, page, 0, ProtFlags::READ | ProtFlags::WRITE)?;
            let event = Storage::Shared {
                map,
                fd: Some(fd),
                id,
            };
            // The page is zero-filled, which is the complete state; mark it as an event page.
            shared_state(&event)
                .magic
                .store(SHARED_MAGIC, Ordering::Release);
            event
        } else {
            Storage::Local(EventState::default())
        };
        let event = Event::with_storage(storage, None, props.enable_profiling);
        if props.enable_profiling {
            let now = sys::now_ns();
            let s = event.state();
            s.submit_ns.store(now, Ordering::Relaxed);
            s.start_ns.store(now, Ordering::Relaxed);
            s.end_ns.store(now, Ordering::Relaxed);
            s.timestamps.store(1, Ordering::Relaxed);
        }
        Ok(Arc::new(event))
    }

    /// An event over a shared page received from another process (or this one).
    pub(crate) fn open_shared(
        fd: OwnedFd,
        expected: FileId,
        exporter: ExporterId,
    ) -> Result<Arc<Event>> {
        let (id, size) = sys::file_id(&fd)?;
        let page = sys::page_size();
        if id != expected || size < page as u64 {
            return Err(Error::invalid(
                "ipc::event: descriptor does not match the handle (stale or reused)",
            ));
        }
        sys::check_sealed(&fd, "ipc::event::open")?;
        let map = Mapping::shared(&fd, page, 0, ProtFlags::READ | ProtFlags::WRITE)?;
        let storage = Storage::Shared { map, fd: None, id };
        if shared_state(&storage).magic.load(Ordering::Acquire) != SHARED_MAGIC {
            return Err(Error::invalid(
                "ipc::event: the descriptor is not an event page",
            ));
        }
        Ok(Arc::new(Event::with_storage(
            storage,
            Some(exporter),
            false,
        )))
    }

    /// Whether no signal is pending.
    pub fn is_complete(&self) -> bool {
        self.state().pending.load(Ordering::Acquire) == 0
    }

    pub(crate) fn state(&self) -> &EventState {
        match &self.storage {
            Storage::Local(state) => state,
            shared => shared_state(shared),
        }
    }

    fn futex_flags(&self) -> futex::Flags {
        match self.storage {
            Storage::Local(_) => futex::Flags::PRIVATE,
            Storage::Shared { .. } => futex::Flags::empty(),
        }
    }

    /// For export: the page's file identity and descriptor, if this event was made with
    /// `enable_ipc` in this process (imported events cannot be re-exported).
    pub(crate) fn export_info(&self) -> Result<(FileId, RawFd)> {
        use std::os::fd::AsRawFd;
        match &self.storage {
            Storage::Shared {
                fd: Some(fd), id, ..
            } => Ok((*id, fd.as_fd().as_raw_fd())),
            Storage::Shared { fd: None, .. } => Err(Error::invalid(
                "ipc::event::get: an imported event cannot be exported again",
            )),
            Storage::Local(_) => Err(Error::invalid(
                "ipc::event::get: the event was not made with the enable_ipc property",
            )),
        }
    }

    /// The command starts running.
    pub(crate) fn begin(&self) {
        let s = self.state();
        if s.timestamps.load(Ordering::Relaxed) != 0 {
            s.start_ns.store(sys::now_ns(), Ordering::Relaxed);
        }
        s.phase.store(1, Ordering::Relaxed);
    }

    /// The command finished (successfully or not): records the error and signals.
    pub(crate) fn complete(&self, result: Result<()>) {
        if let Err(e) = result {
            *self.error.lock() = Some(e);
        }
        let s = self.state();
        if s.timestamps.load(Ordering::Relaxed) != 0 {
            s.end_ns.store(sys::now_ns(), Ordering::Relaxed);
        }
        self.signal_one();
    }

    /// `enqueue_signal_event`, at submission: one more pending signal, owed by this process
    /// (waiters elsewhere fail if it exits before [`Event::fire`]).
    pub fn arm(&self, queue_profiling: bool) {
        *self.error.lock() = None;
        let s = self.state();
        let me = ExporterId::current();
        s.signaller_pid.store(me.pid, Ordering::Relaxed);
        s.signaller_start.store(me.start_time, Ordering::Relaxed);
        s.phase.store(0, Ordering::Relaxed);
        if queue_profiling || self.profiling {
            s.submit_ns.store(sys::now_ns(), Ordering::Relaxed);
            s.timestamps.store(1, Ordering::Relaxed);
        }
        s.pending.fetch_add(1, Ordering::SeqCst);
    }

    /// `enqueue_signal_event`, when the queue reaches that point: completes one armed signal
    /// and counts it (`signal_count`), waking waiters in every process.
    pub fn fire(&self) {
        let s = self.state();
        if s.timestamps.load(Ordering::Relaxed) != 0 {
            let now = sys::now_ns();
            s.start_ns.store(now, Ordering::Relaxed);
            s.end_ns.store(now, Ordering::Relaxed);
        }
        self.signal_one();
        s.signals.fetch_add(1, Ordering::SeqCst);
        if s.signal_waiters.load(Ordering::SeqCst) != 0 {
            if let Err(e) = futex::wake(&s.signals, self.futex_flags(), i32::MAX as u32) {
                log::error!("native_cpu: FUTEX_WAKE failed: {e}");
            }
        }
    }

    /// Waits until at least `target` signals completed (`Ok(true)`) or `deadline`
    /// (`Ok(false)`); on a shared event, a dead exporter or signaller is an error.
    pub(crate) fn wait_signals(&self, target: u64, deadline: Option<Instant>) -> Result<bool> {
        let s = self.state();
        let reached = |v: u32| u64::from(v) >= target;
        let spin_start = Instant::now();
        while spin_start.elapsed() < SPIN {
            if reached(s.signals.load(Ordering::Acquire)) {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        let shared = matches!(self.storage, Storage::Shared { .. });
        loop {
            let value = s.signals.load(Ordering::Acquire);
            if reached(value) {
                return Ok(true);
            }
            if !self.sleep_on(&s.signals, &s.signal_waiters, value, deadline)? {
                return Ok(false);
            }
            // Only a signal that is owed can be lost with its process: a signaller that died
            // after its signal completed (pending 0) owes nothing, and later signals may come
            // from anyone (the timeout bounds the wait).
            if shared
                && !reached(s.signals.load(Ordering::Acquire))
                && s.pending.load(Ordering::Acquire) != 0
            {
                self.check_peers()?;
            }
        }
    }

    /// Removes one pending signal; the last one wakes every waiter.
    fn signal_one(&self) {
        let s = self.state();
        let previous = s.pending.fetch_sub(1, Ordering::SeqCst);
        if previous == 0 {
            // Never armed: undo rather than wrap around (a bookkeeping bug, not user input).
            s.pending.fetch_add(1, Ordering::SeqCst);
            log::error!("native_cpu: an event was signalled more often than armed");
            return;
        }
        // FUTEX_WAKE takes a signed count: i32::MAX wakes every waiter (u32::MAX would be -1).
        if previous == 1 && s.waiters.load(Ordering::SeqCst) != 0 {
            if let Err(e) = futex::wake(&s.pending, self.futex_flags(), i32::MAX as u32) {
                log::error!("native_cpu: FUTEX_WAKE failed: {e}");
            }
        }
    }

    /// Waits until complete (`Ok(true)`) or `deadline` (`Ok(false)`). Fails only when a peer
    /// process that owed a signal died; a failed command still completes.
    pub fn wait_complete(&self, deadline: Option<Instant>) -> Result<bool> {
        let s = self.state();
        if s.pending.load(Ordering::Acquire) == 0 {
            return Ok(true);
        }
        // Spin briefly: commands of a busy queue complete within microseconds.
        let spin_start = Instant::now();
        let mut spins = 0u32;
        loop {
            std::hint::spin_loop();
            if s.pending.load(Ordering::Acquire) == 0 {
                return Ok(true);
            }
            spins += 1;
            if spins % 64 == 0 && spin_start.elapsed() >= SPIN {
                break;
            }
        }
        let shared = matches!(self.storage, Storage::Shared { .. });
        loop {
            let value = s.pending.load(Ordering::Acquire);
            if value == 0 {
                return Ok(true);
            }
            if !self.sleep_on(&s.pending, &s.waiters, value, deadline)? {
                return Ok(false);
            }
            if shared && s.pending.load(Ordering::Acquire) != 0 {
                self.check_peers()?;
            }
        }
    }

    /// One sleep on the futex `word` while it still holds `value`: until a wake, `deadline`,
    /// or (shared events) a peer-check slice. `Ok(false)` when the deadline had passed.
    fn sleep_on(
        &self,
        word: &AtomicU32,
        waiters: &AtomicU32,
        value: u32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let now = Instant::now();
        let mut sleep = match deadline {
            Some(d) if now >= d => return Ok(false),
            Some(d) => Some(d - now),
            None => None,
        };
        if matches!(self.storage, Storage::Shared { .. }) {
            sleep = Some(sleep.map_or(PEER_CHECK_SLICE, |t| t.min(PEER_CHECK_SLICE)));
        }
        let timeout = sleep.map(|t| futex::Timespec {
            tv_sec: t.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: t.subsec_nanos().into(),
        });
        waiters.fetch_add(1, Ordering::SeqCst);
        let result = futex::wait(word, self.futex_flags(), value, timeout.as_ref());
        waiters.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(()) | Err(Errno::AGAIN) | Err(Errno::INTR) | Err(Errno::TIMEDOUT) => Ok(true),
            Err(e) => Err(sys::os_err(Errc::Runtime, "FUTEX_WAIT on an event", e)),
        }
    }

    /// For a shared event still pending: fails if the process that owes the signal died.
    fn check_peers(&self) -> Result<()> {
        let s = self.state();
        let me = ExporterId::current();
        let signaller = s.signaller_pid.load(Ordering::Relaxed);
        let signaller_start = s.signaller_start.load(Ordering::Relaxed);
        if signaller == me.pid && signaller_start == me.start_time {
            // Our own queue owes the signal; it will come.
            return Ok(());
        }
        if let Some(exporter) = &self.peer {
            if !exporter.is_alive() {
                return Err(Error::new(
                    Errc::Event,
                    format!(
                        "the exporting process {} exited while the event was pending",
                        exporter.pid
                    ),
                ));
            }
        }
        if signaller != 0 {
            let alive = process_start_time(signaller)
                .is_some_and(|start| signaller_start == 0 || start == signaller_start);
            if !alive {
                return Err(Error::new(
                    Errc::Event,
                    format!(
                        "the signalling process {signaller} exited while the event was pending"
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn stored_error(&self) -> Result<()> {
        match &*self.error.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// The state inside a shared page.
fn shared_state(storage: &Storage) -> &EventState {
    match storage {
        Storage::Local(state) => state,
        Storage::Shared { map, .. } => {
            // SAFETY: the mapping is page-aligned, at least one page long (larger than
            // `EventState`), readable and writable, and lives as long as `storage`. Every field
            // is an atomic, so concurrent access from other processes through their own
            // mappings of the same page is ordinary atomic access.
            unsafe { &*(map.addr() as *const EventState) }
        }
    }
}

impl sycl_backend::Event for Event {
    fn backend(&self) -> BackendKind {
        BackendKind::NativeCpu
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn status(&self) -> Result<EventStatus> {
        let s = self.state();
        Ok(if s.pending.load(Ordering::Acquire) == 0 {
            EventStatus::Complete
        } else if s.phase.load(Ordering::Relaxed) == 1 {
            EventStatus::Running
        } else {
            EventStatus::Submitted
        })
    }

    fn wait(&self) -> Result<()> {
        self.wait_complete(None)?;
        self.stored_error()
    }

    fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now().checked_add(timeout);
        if !self.wait_complete(deadline)? {
            return Ok(false);
        }
        self.stored_error().map(|()| true)
    }

    fn profiling(&self) -> Result<ProfilingInfo> {
        let s = self.state();
        if s.timestamps.load(Ordering::Relaxed) == 0 {
            return Err(Error::new(
                Errc::Profiling,
                "the event has no profiling information: its queue was not made with \
                 property::queue::enable_profiling (or, for make_event, the event lacks enable_profiling)",
            ));
        }
        self.wait_complete(None)?;
        Ok(ProfilingInfo {
            submit_ns: s.submit_ns.load(Ordering::Relaxed),
            start_ns: s.start_ns.load(Ordering::Relaxed),
            end_ns: s.end_ns.load(Ordering::Relaxed),
        })
    }

    fn ipc_enabled(&self) -> bool {
        matches!(self.storage, Storage::Shared { fd: Some(_), .. })
    }

    fn signal_count(&self) -> Result<u64> {
        Ok(u64::from(self.state().signals.load(Ordering::Acquire)))
    }

    fn wait_signal_count(&self, target: u64, timeout: Option<Duration>) -> Result<bool> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        self.wait_signals(target, deadline)
    }
}

/// Waits for a dependency: ours by futex, others through their own `wait`.
pub(crate) fn wait_dependency(dep: &Arc<dyn sycl_backend::Event>) -> Result<()> {
    if dep.backend() == BackendKind::NativeCpu {
        if let Some(ours) = dep.as_any().downcast_ref::<Event>() {
            // A failed command is still complete: its error is reported on its own event.
            return ours.wait_complete(None).map(|_| ());
        }
    }
    dep.wait().map_err(|e| e.context("a dependency failed"))
}
