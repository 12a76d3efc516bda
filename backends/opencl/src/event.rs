//! OpenCL events.
//!
//! An [`Event`] wraps a `cl_event` (of a command, a marker or a user event) together with the
//! queue that must be flushed before anyone waits for it from the host or from another queue:
//! submissions only mark their queue "needs flush", and the flush happens lazily here, so a
//! stream of launches costs no `clFlush` each.
//!
//! Standalone events (`make_event`, reusable events) start with no `cl_event` (= complete);
//! `enqueue_signal_event` swaps in the `cl_event` of a marker, releasing the old one.
//!
//! IPC events (`make_event` with `enable_ipc`, or opened from a handle) need no driver support:
//! their state is the native CPU backend's shared event page (a futex word in a sealed memfd,
//! [`SharedEvent`]), so the same handle opens on either backend. A queue signals one from the
//! completion callback of a marker, and waits on one through a user event that a waiter
//! thread completes when the word says so (`queue.rs`, `gate`).

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sycl_backend::{BackendKind, Errc, Error, EventStatus, ProfilingInfo, Result};
use sycl_backend_native_cpu::host_ipc::SharedEvent;

use crate::context::ContextShared;
use crate::result::{check, error, native};
use crate::sys::*;
use crate::Handle;

/// A command queue as far as events need it: the handle and its lazy-flush flag.
pub(crate) struct QueueShared {
    pub api: &'static Api,
    pub raw: Handle,
    pub needs_flush: AtomicBool,
    /// IPC signals whose marker completed or will, but whose completion callback has not run.
    pub fires: Arc<PendingFires>,
}

/// Counts the completion callbacks of `enqueue_signal_event` on IPC events still to run.
/// OpenCL calls callbacks asynchronously: NVIDIA's ran after `clFinish` returned, so a process
/// that waited for its queue and exited still owed its last signal (its peer then saw a dead
/// signaller). Waits for the queue wait for these as well.
#[derive(Default)]
pub(crate) struct PendingFires {
    count: std::sync::Mutex<usize>,
    done: std::sync::Condvar,
}

impl PendingFires {
    /// How long a wait gives callbacks of completed markers before it reports a driver fault.
    const PATIENCE: Duration = Duration::from_secs(30);

    pub fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    pub fn finish(&self) {
        let mut n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.done.notify_all();
        }
    }

    /// Waits until every counted callback ran (call after the markers completed).
    pub fn wait(&self) -> Result<()> {
        let n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (n, timeout) = self
            .done
            .wait_timeout_while(n, Self::PATIENCE, |n| *n > 0)
            .unwrap_or_else(|e| e.into_inner());
        if timeout.timed_out() {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "{} completion callbacks of IPC event signals did not run within {:?} of \
                     their markers completing",
                    *n,
                    Self::PATIENCE
                ),
            ));
        }
        Ok(())
    }
}

impl QueueShared {
    /// Flushes the queue if anything was submitted since the last flush.
    pub fn flush_if_needed(&self) -> Result<()> {
        if self.needs_flush.swap(false, Ordering::AcqRel) {
            // SAFETY: `raw` is a live queue owned by this object.
            let rc = unsafe { (self.api.clFlush)(self.raw.0) };
            if rc != CL_SUCCESS {
                self.needs_flush.store(true, Ordering::Release);
                return Err(error(rc, "clFlush"));
            }
        }
        Ok(())
    }
}

impl Drop for QueueShared {
    fn drop(&mut self) {
        // Wait for what is still queued: once the queue's `Queue` and all its events are
        // gone, the context may go next and free the SVM memory those commands use.
        // SAFETY: live queue.
        let rc = unsafe { (self.api.clFinish)(self.raw.0) };
        if rc != CL_SUCCESS {
            log::error!("opencl: {}", error(rc, "clFinish"));
        }
        // Signals owed to other processes go out before the queue does.
        if let Err(e) = self.fires.wait() {
            log::error!("opencl: {e}");
        }
        crate::usm::free_guard::release_queue(self.api, Handle(self.raw.0));
    }
}

/// What an event currently stands for.
pub(crate) struct Signal {
    /// The `cl_event` (owned: one reference), or `None` for a never-signalled standalone
    /// event, which is complete.
    pub raw: Option<Handle>,
    /// The queue to flush before waiting (`None` for user events of host tasks that never
    /// need one).
    pub queue: Option<Arc<QueueShared>>,
    /// Whether the command recorded profiling timestamps.
    pub profiling: bool,
}

enum State {
    /// A command's event: never changes.
    Fixed(Signal),
    /// A standalone event: re-signalled by `enqueue_signal_event`.
    Standalone { signal: Mutex<Signal> },
    /// An IPC event: state in a shared page, seen by every process that opened it.
    Shared(Arc<SharedEvent>),
}

/// An OpenCL event.
pub struct Event {
    pub(crate) ctx: Arc<ContextShared>,
    state: State,
    /// Set by a host task that panicked (or whose dependencies failed) before it completes
    /// its user event. The user event itself is completed normally: PoCL 3.1 aborts in
    /// `pocl_update_event_failed` when a user event with dependents gets a negative status, so
    /// failure travels here instead, and `wait`/`status` report it as `Errc::Event`.
    pub(crate) host_failure: OnceLock<String>,
}

/// A `cl_event` borrowed from an [`Event`], retained if it may be replaced meanwhile.
pub(crate) struct RawRef {
    api: &'static Api,
    pub raw: cl_event,
    pub queue: Option<Arc<QueueShared>>,
    pub profiling: bool,
    retained: bool,
}

impl Drop for RawRef {
    fn drop(&mut self) {
        if self.retained {
            // SAFETY: balanced with the clRetainEvent done in `Event::current`.
            unsafe { (self.api.clReleaseEvent)(self.raw) };
        }
    }
}

impl RawRef {
    /// Takes over the caller's reference to `raw` (released on drop).
    pub(crate) fn owned(api: &'static Api, raw: cl_event) -> RawRef {
        RawRef {
            api,
            raw,
            queue: None,
            profiling: false,
            retained: true,
        }
    }

    fn flush(&self) -> Result<()> {
        match &self.queue {
            Some(q) => q.flush_if_needed(),
            None => Ok(()),
        }
    }
}

impl Event {
    /// Wraps `raw` (taking over its reference).
    pub(crate) fn new(
        ctx: Arc<ContextShared>,
        raw: cl_event,
        queue: Option<Arc<QueueShared>>,
        profiling: bool,
    ) -> Self {
        Event {
            ctx,
            state: State::Fixed(Signal {
                raw: Some(Handle(raw)),
                queue,
                profiling,
            }),
            host_failure: OnceLock::new(),
        }
    }

    /// A standalone event in the complete state. It has timestamps once signalled on a
    /// queue made with `enable_profiling` (the marker's), whatever `make_event` was given.
    pub(crate) fn standalone(ctx: Arc<ContextShared>) -> Self {
        Event {
            ctx,
            state: State::Standalone {
                signal: Mutex::new(Signal {
                    raw: None,
                    queue: None,
                    profiling: false,
                }),
            },
            host_failure: OnceLock::new(),
        }
    }

    /// An IPC event over `page` (made here with `enable_ipc`, or opened from a handle).
    pub(crate) fn shared(ctx: Arc<ContextShared>, page: Arc<SharedEvent>) -> Self {
        Event {
            ctx,
            state: State::Shared(page),
            host_failure: OnceLock::new(),
        }
    }

    /// Whether this event was made by `make_event` (without `enable_ipc`).
    pub(crate) fn is_standalone(&self) -> bool {
        matches!(self.state, State::Standalone { .. })
    }

    /// The shared page of an IPC event.
    pub(crate) fn shared_page(&self) -> Option<&Arc<SharedEvent>> {
        match &self.state {
            State::Shared(page) => Some(page),
            _ => None,
        }
    }

    /// The `cl_event` this event stands for now, if any: borrowed from `self` for a fixed
    /// event, retained for a standalone one (which may be re-signalled meanwhile).
    pub(crate) fn current(&self) -> Option<RawRef> {
        match &self.state {
            State::Fixed(s) => s.raw.map(|raw| RawRef {
                api: self.ctx.api,
                raw: raw.0,
                queue: s.queue.clone(),
                profiling: s.profiling,
                retained: false,
            }),
            State::Standalone { signal } => {
                let s = signal.lock().unwrap_or_else(|e| e.into_inner());
                let raw = s.raw?;
                // SAFETY: `raw` is a live event owned by `s`; retaining keeps it alive after
                // the lock is dropped, even if the event is re-signalled meanwhile.
                unsafe { (self.ctx.api.clRetainEvent)(raw.0) };
                Some(RawRef {
                    api: self.ctx.api,
                    raw: raw.0,
                    queue: s.queue.clone(),
                    profiling: s.profiling,
                    retained: true,
                })
            }
            State::Shared(_) => None,
        }
    }

    /// For a fixed event: the raw handle and queue without any reference counting (the
    /// caller holds the `Event`). `None` for standalone events (use [`Event::current`]).
    #[inline]
    pub(crate) fn fixed(&self) -> Option<&Signal> {
        match &self.state {
            State::Fixed(s) => Some(s),
            State::Standalone { .. } | State::Shared(_) => None,
        }
    }

    /// The handle of a fixed event (null for a standalone one).
    pub(crate) fn fixed_raw(&self) -> cl_event {
        self.fixed()
            .and_then(|s| s.raw)
            .map_or(std::ptr::null_mut(), |h| h.0)
    }

    /// Makes a standalone event stand for `raw` (taking over its reference).
    pub(crate) fn resignal(
        &self,
        raw: cl_event,
        queue: Arc<QueueShared>,
        profiling: bool,
    ) -> Result<()> {
        match &self.state {
            State::Fixed(_) | State::Shared(_) => {
                // SAFETY: we own `raw` and drop it unused.
                unsafe { (self.ctx.api.clReleaseEvent)(raw) };
                Err(Error::invalid(
                    "enqueue_signal_event needs an event made by make_event",
                ))
            }
            State::Standalone { signal } => {
                let mut s = signal.lock().unwrap_or_else(|e| e.into_inner());
                let old = s.raw.replace(Handle(raw));
                s.queue = Some(queue);
                s.profiling = profiling;
                drop(s);
                if let Some(old) = old {
                    // SAFETY: the old handle was owned by the signal and is no longer referenced.
                    unsafe { (self.ctx.api.clReleaseEvent)(old.0) };
                }
                Ok(())
            }
        }
    }
}

impl Event {
    fn check_host_failure(&self) -> Result<()> {
        match self.host_failure.get() {
            Some(msg) => Err(Error::new(Errc::Event, msg.clone())),
            None => Ok(()),
        }
    }
}

/// Reads `CL_EVENT_COMMAND_EXECUTION_STATUS`.
pub(crate) fn raw_status(api: &Api, raw: cl_event) -> Result<cl_int> {
    let mut st: cl_int = 0;
    // SAFETY: `raw` is live for the call; the value is a cl_int.
    let rc = unsafe {
        (api.clGetEventInfo)(
            raw,
            CL_EVENT_COMMAND_EXECUTION_STATUS,
            std::mem::size_of::<cl_int>(),
            (&raw mut st).cast(),
            std::ptr::null_mut(),
        )
    };
    check(rc, "clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)")?;
    if st < 0 {
        return Err(Error::with_native(
            Errc::Event,
            "the command of this event failed",
            native(st),
        ));
    }
    Ok(st)
}

/// Blocks on `raw`.
pub(crate) fn wait_raw(api: &Api, raw: cl_event) -> Result<()> {
    // SAFETY: one live event.
    let rc = unsafe { (api.clWaitForEvents)(1, &raw) };
    if rc == -14 {
        // CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: report the command's own status.
        raw_status(api, raw)?;
    }
    check(rc, "clWaitForEvents")
}

impl sycl_backend::Event for Event {
    fn backend(&self) -> BackendKind {
        BackendKind::OpenCl
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn status(&self) -> Result<EventStatus> {
        if let State::Shared(page) = &self.state {
            return sycl_backend::Event::status(&**page);
        }
        let Some(r) = self.current() else {
            return Ok(EventStatus::Complete);
        };
        r.flush()?;
        Ok(match raw_status(self.ctx.api, r.raw)? {
            CL_COMPLETE => {
                self.check_host_failure()?;
                EventStatus::Complete
            }
            CL_RUNNING => EventStatus::Running,
            _ => EventStatus::Submitted,
        })
    }
    fn wait(&self) -> Result<()> {
        if let State::Shared(page) = &self.state {
            return sycl_backend::Event::wait(&**page);
        }
        let Some(r) = self.current() else {
            return Ok(());
        };
        r.flush()?;
        wait_raw(self.ctx.api, r.raw)?;
        self.check_host_failure()
    }
    fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        if let State::Shared(page) = &self.state {
            return sycl_backend::Event::wait_timeout(&**page, timeout);
        }
        let Some(r) = self.current() else {
            return Ok(true);
        };
        r.flush()?;
        let api = self.ctx.api;
        let done =
            sycl_backend::poll_until(timeout, || Ok(raw_status(api, r.raw)? == CL_COMPLETE))?;
        if done {
            self.check_host_failure()?;
        }
        Ok(done)
    }
    fn profiling(&self) -> Result<ProfilingInfo> {
        if self.shared_page().is_some() {
            return Err(Error::new(
                Errc::Profiling,
                "IPC events carry no timestamps (enable_ipc excludes enable_profiling)",
            ));
        }
        let Some(r) = self.current() else {
            return Err(Error::new(
                Errc::Profiling,
                "the event was never signalled, so it has no timestamps",
            ));
        };
        if !r.profiling {
            return Err(Error::new(
                Errc::Profiling,
                "the event's queue was not created with enable_profiling (or the command is a host task)",
            ));
        }
        r.flush()?;
        wait_raw(self.ctx.api, r.raw)?;
        let get = |param| -> Result<u64> {
            let mut v: cl_ulong = 0;
            // SAFETY: live event, cl_ulong out-value.
            let rc = unsafe {
                (self.ctx.api.clGetEventProfilingInfo)(
                    r.raw,
                    param,
                    std::mem::size_of::<cl_ulong>(),
                    (&raw mut v).cast(),
                    std::ptr::null_mut(),
                )
            };
            check(rc, "clGetEventProfilingInfo")?;
            Ok(v)
        };
        Ok(ProfilingInfo {
            submit_ns: get(CL_PROFILING_COMMAND_SUBMIT)?,
            start_ns: get(CL_PROFILING_COMMAND_START)?,
            end_ns: get(CL_PROFILING_COMMAND_END)?,
        })
    }
    fn ipc_enabled(&self) -> bool {
        self.shared_page()
            .is_some_and(|page| sycl_backend::Event::ipc_enabled(&**page))
    }
    fn signal_count(&self) -> Result<u64> {
        match &self.state {
            State::Shared(page) => sycl_backend::Event::signal_count(&**page),
            _ => Err(Error::unsupported(
                sycl_backend::Aspect::ExtSyclRsEventSignalCount,
                "Event::signal_count of an OpenCL event without enable_ipc",
            )),
        }
    }
    fn wait_signal_count(&self, target: u64, timeout: Option<Duration>) -> Result<bool> {
        match &self.state {
            State::Shared(page) => sycl_backend::Event::wait_signal_count(&**page, target, timeout),
            _ => Err(Error::unsupported(
                sycl_backend::Aspect::ExtSyclRsEventSignalCount,
                "Event::wait_signal_count of an OpenCL event without enable_ipc",
            )),
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let raw = match &mut self.state {
            State::Fixed(s) => s.raw.take(),
            State::Standalone { signal } => signal
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .raw
                .take(),
            State::Shared(_) => None,
        };
        if let Some(raw) = raw {
            // SAFETY: the event owned one reference to `raw`.
            let rc = unsafe { (self.ctx.api.clReleaseEvent)(raw.0) };
            if rc != CL_SUCCESS {
                log::error!("opencl: {}", error(rc, "clReleaseEvent"));
            }
        }
    }
}
