//! Events. Every event of this backend but one kind is a CUDA event (`CUevent`):
//!
//! * command events of profiling queues: a timing event recorded before the command and one
//!   after it (other queues' commands have a `queue::CommandEvent`, which shares one
//!   `DISABLE_TIMING` marker recorded only when needed: see the queue module);
//! * standalone events (`make_event`): never recorded, hence complete, until
//!   `enqueue_signal_event` records them; `enable_ipc` makes them `INTERPROCESS|DISABLE_TIMING`;
//! * imported IPC events (`cuIpcOpenEventHandle`).
//!
//! The exception is the event of a host task ([`HostTaskEvent`]): the host completes it, and
//! CUDA has no event the host can complete without making a stream wait on host memory (see
//! the queue module for why we never do that), so commands that depend on it wait for it on
//! the host before they are enqueued.
//!
//! Profiling times: CUDA only measures time *between* two events, so each profiling queue
//! records a calibration event at creation, waits for it and reads the host's
//! `CLOCK_MONOTONIC`; a command's start/end are that host time plus the elapsed time from the
//! calibration event (`cuEventElapsedTime_v2`, resolution about 0.5 us). The submit time is
//! `CLOCK_MONOTONIC` at submission. Because the calibration is taken slightly after the GPU
//! passed the calibration event, device times can come out a few microseconds early; they are
//! clamped so that `submit <= start <= end`.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys;
use sycl_backend::ipc::ExporterId;
use sycl_backend::{
    Aspect, BackendKind, Errc, Error, EventProperties, EventStatus, ProfilingInfo, Result,
};

use crate::context::PrimaryContext;
use crate::{lock, result};

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// A `CUevent` destroyed (with its context current) on drop.
pub(crate) struct OwnedEvent {
    pub(crate) ctx: Arc<PrimaryContext>,
    pub(crate) raw: sys::CUevent,
    /// A plain `DISABLE_TIMING` event that goes back to the context's pool on drop.
    pub(crate) pooled: bool,
}

/// Most events a context keeps for reuse.
const EVENT_POOL_MAX: usize = 4096;

// SAFETY: CUDA event handles may be used from any thread; every use makes the owning context
// current first.
unsafe impl Send for OwnedEvent {}
// SAFETY: as above; the handle is never mutated through a shared reference.
unsafe impl Sync for OwnedEvent {}

impl OwnedEvent {
    /// `cuEventCreate(flags)` in `ctx`.
    pub(crate) fn create(ctx: &Arc<PrimaryContext>, flags: u32) -> Result<OwnedEvent> {
        let _current = ctx.make_current()?;
        let raw = result::event::create(flags)?;
        Ok(OwnedEvent {
            ctx: ctx.clone(),
            raw,
            pooled: false,
        })
    }

    /// A `DISABLE_TIMING` event from the context's pool (created when the pool is empty).
    /// Re-recording a released event is safe: waits enqueued earlier captured its old state.
    pub(crate) fn pooled(ctx: &Arc<PrimaryContext>) -> Result<OwnedEvent> {
        let reused = crate::lock(&ctx.event_pool).pop();
        let raw = match reused {
            Some(raw) => raw as sys::CUevent,
            None => {
                let _current = ctx.make_current()?;
                result::event::create(result::event::DISABLE_TIMING)?
            }
        };
        Ok(OwnedEvent {
            ctx: ctx.clone(),
            raw,
            pooled: true,
        })
    }
}

impl Drop for OwnedEvent {
    fn drop(&mut self) {
        if self.pooled {
            let mut pool = crate::lock(&self.ctx.event_pool);
            if pool.len() < EVENT_POOL_MAX {
                pool.push(self.raw as usize);
                return;
            }
        }
        let _current = self
            .ctx
            .make_current()
            .map_err(|e| log::debug!("destroying a CUDA event: {e}"))
            .ok();
        // SAFETY: the event is owned by this wrapper and dropped once.
        if let Err(e) = unsafe { result::event::destroy(self.raw) } {
            log::warn!("{e}");
        }
    }
}

/// The time base of one profiling queue.
pub(crate) struct Calibration {
    base: OwnedEvent,
    base_ns: u64,
}

impl Calibration {
    /// Records a timing event on `stream`, waits for it and notes the host clock.
    pub(crate) fn new(ctx: &Arc<PrimaryContext>, stream: sys::CUstream) -> Result<Calibration> {
        let base = OwnedEvent::create(ctx, 0)?;
        result::event::record(base.raw, stream)?;
        result::event::synchronize(base.raw)?;
        Ok(Calibration {
            base,
            base_ns: now_ns(),
        })
    }

    /// Nanoseconds from `start` to `end` (two completed events): the duration itself, exact
    /// to the timer's resolution however long ago the calibration was taken.
    fn between(&self, start: sys::CUevent, end: sys::CUevent) -> Result<u64> {
        let _current = self.base.ctx.make_current()?;
        let ms = result::event::elapsed_ms(start, end)?;
        Ok((f64::from(ms.max(0.0)) * 1e6) as u64)
    }

    fn at(&self, ev: sys::CUevent) -> Result<u64> {
        let _current = self.base.ctx.make_current()?;
        let ms = result::event::elapsed_ms(self.base.raw, ev)?;
        Ok(self
            .base_ns
            .saturating_add((f64::from(ms.max(0.0)) * 1e6) as u64))
    }
}

/// Profiling data of one recorded event.
pub(crate) struct Profile {
    /// The event recorded before the command (`None`: start = end, for signalled events).
    pub(crate) start: Option<OwnedEvent>,
    pub(crate) calib: Arc<Calibration>,
    pub(crate) submit_ns: u64,
}

/// The shared state behind [`Event`]: imported same-process IPC events share it.
pub(crate) struct EventInner {
    pub(crate) ev: OwnedEvent,
    /// The queue whose stream recorded it (0: none / standalone).
    pub(crate) queue_id: u64,
    pub(crate) ipc: bool,
    /// Created with timing enabled.
    pub(crate) timing: bool,
    pub(crate) profile: Mutex<Option<Profile>>,
    /// Set for events opened from another process's handle.
    pub(crate) imported: Option<ExporterId>,
    /// The handle it was exported under, removed from the registry on drop.
    pub(crate) exported_as: Mutex<Option<[u8; 64]>>,
}

impl Drop for EventInner {
    fn drop(&mut self) {
        if let Some(h) = lock(&self.exported_as).take() {
            crate::ipc::forget_event(&h);
        }
    }
}

/// A CUDA event (`cuda::Event`).
#[derive(Clone)]
pub struct Event {
    pub(crate) inner: Arc<EventInner>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Event")
            .field("queue", &self.inner.queue_id)
            .field("ipc", &self.inner.ipc)
            .finish()
    }
}

impl Event {
    fn from_parts(
        ev: OwnedEvent,
        queue_id: u64,
        ipc: bool,
        timing: bool,
        profile: Option<Profile>,
    ) -> Event {
        Event {
            inner: Arc::new(EventInner {
                ev,
                queue_id,
                ipc,
                timing,
                profile: Mutex::new(profile),
                imported: None,
                exported_as: Mutex::new(None),
            }),
        }
    }

    /// A command event (already recorded by the caller) with optional profiling data.
    pub(crate) fn command(ev: OwnedEvent, queue_id: u64, profile: Option<Profile>) -> Event {
        let timing = profile.is_some();
        Event::from_parts(ev, queue_id, false, timing, profile)
    }

    /// `make_event`: a complete, never-recorded event.
    pub(crate) fn standalone(
        ctx: Arc<PrimaryContext>,
        device: &crate::device::Device,
        props: EventProperties,
    ) -> Result<Event> {
        use result::event::{DISABLE_TIMING, INTERPROCESS};
        if props.enable_ipc && props.enable_profiling {
            return Err(Error::invalid(
                "an event cannot have both enable_ipc and enable_profiling",
            ));
        }
        if props.enable_ipc && !device.caps.ipc_event {
            return Err(Error::unsupported(
                Aspect::ExtOneapiIpcEvent,
                "make_event with enable_ipc",
            ));
        }
        let flags = if props.enable_ipc {
            INTERPROCESS | DISABLE_TIMING
        } else if props.enable_profiling {
            0
        } else {
            DISABLE_TIMING
        };
        let ev = OwnedEvent::create(&ctx, flags)?;
        Ok(Event::from_parts(
            ev,
            0,
            props.enable_ipc,
            props.enable_profiling,
            None,
        ))
    }

    /// An event opened from another process's IPC handle.
    pub(crate) fn imported(ev: OwnedEvent, exporter: ExporterId) -> Event {
        Event {
            inner: Arc::new(EventInner {
                ev,
                queue_id: 0,
                ipc: true,
                timing: false,
                profile: Mutex::new(None),
                imported: Some(exporter),
                exported_as: Mutex::new(None),
            }),
        }
    }

    pub(crate) fn raw(&self) -> sys::CUevent {
        self.inner.ev.raw
    }

    /// The native `CUevent` (for interoperation; owned by this event). Two events opened from
    /// the same IPC handle in the exporting process return the same value.
    pub fn native(&self) -> sys::CUevent {
        self.inner.ev.raw
    }

    /// Whether the event has completed (`cuEventQuery`).
    pub(crate) fn query(&self) -> Result<bool> {
        let _current = self.inner.ev.ctx.make_current()?;
        result::event::query(self.inner.ev.raw)
    }

    fn exporter_gone(&self) -> Option<Error> {
        let exporter = self.inner.imported?;
        if exporter.is_alive() {
            None
        } else {
            Some(Error::new(
                Errc::Event,
                format!(
                    "the process {} that exported this event exited before signalling it",
                    exporter.pid
                ),
            ))
        }
    }
}

impl sycl_backend::Event for Event {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    #[doc(alias = "cuEventQuery")]
    fn status(&self) -> Result<EventStatus> {
        Ok(if self.query()? {
            EventStatus::Complete
        } else {
            EventStatus::Submitted
        })
    }

    #[doc(alias = "cuEventSynchronize")]
    fn wait(&self) -> Result<()> {
        if self.inner.imported.is_some() {
            // Poll, so that an exporter that died never leaves us hanging; look at the
            // exporter every 50 ms (reading /proc is too slow to do on every poll).
            let mut last_look = std::time::Instant::now();
            let outcome = sycl_backend::poll_until(Duration::MAX, || {
                if self.query()? {
                    return Ok(true);
                }
                if last_look.elapsed() >= Duration::from_millis(50) {
                    last_look = std::time::Instant::now();
                    if let Some(e) = self.exporter_gone() {
                        // One last look: it may have completed just before the exit.
                        return if self.query().unwrap_or(false) {
                            Ok(true)
                        } else {
                            Err(e)
                        };
                    }
                }
                Ok(false)
            });
            return match outcome {
                Ok(_) => Ok(()),
                Err(e) => Err(self.exporter_gone().unwrap_or(e)),
            };
        }
        let _current = self.inner.ev.ctx.make_current()?;
        result::event::synchronize(self.inner.ev.raw)
    }

    fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        sycl_backend::poll_until(timeout, || self.query())
    }

    fn profiling(&self) -> Result<ProfilingInfo> {
        if !self.inner.timing {
            return Err(no_profiling("queue or event made without enable_profiling"));
        }
        sycl_backend::Event::wait(self)?;
        let guard = lock(&self.inner.profile);
        let Some(p) = guard.as_ref() else {
            return Err(Error::new(
                Errc::Profiling,
                "the event was never signalled, so it has no timestamps",
            ));
        };
        // The start is placed through the calibration (host and GPU clocks drift apart over a
        // queue's life: seen tens of microseconds after half a minute, which clamping to the
        // submit time turned into durations of 0); the duration is the two events' own
        // elapsed time.
        let submit_ns = p.submit_ns;
        let (start_ns, end_ns) = match &p.start {
            Some(s) => {
                let start_ns = p.calib.at(s.raw)?.max(submit_ns);
                let took = p.calib.between(s.raw, self.inner.ev.raw)?;
                (start_ns, start_ns.saturating_add(took))
            }
            None => {
                let end = p.calib.at(self.inner.ev.raw)?.max(submit_ns);
                (end, end)
            }
        };
        Ok(ProfilingInfo {
            submit_ns,
            start_ns,
            end_ns,
        })
    }

    fn ipc_enabled(&self) -> bool {
        self.inner.ipc
    }
}

/// `Errc::Profiling` for an event without timestamps, saying `why`.
pub(crate) fn no_profiling(why: &str) -> Error {
    Error::new(
        Errc::Profiling,
        format!("the event has no profiling information ({why})"),
    )
}

/// What a host task's thread reports.
#[derive(Default)]
struct HostTaskProgress {
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    failure: Option<String>,
}

/// Completion of one host task, shared by its event, its queue and the host-task thread.
#[derive(Default)]
pub(crate) struct HostTaskState {
    progress: Mutex<HostTaskProgress>,
    cv: std::sync::Condvar,
}

impl HostTaskState {
    pub(crate) fn started(&self) {
        lock(&self.progress).start_ns = Some(now_ns());
    }

    /// Marks the task finished (`failure`: why it did not run or did not finish).
    pub(crate) fn finished(&self, failure: Option<String>) {
        let mut p = lock(&self.progress);
        let now = now_ns();
        p.start_ns.get_or_insert(now);
        p.end_ns = Some(now);
        p.failure = failure;
        drop(p);
        self.cv.notify_all();
    }

    pub(crate) fn is_finished(&self) -> bool {
        lock(&self.progress).end_ns.is_some()
    }

    /// Blocks until the task finished; `Errc::Event` if it failed.
    pub(crate) fn wait(&self) -> Result<()> {
        let mut p = lock(&self.progress);
        while p.end_ns.is_none() {
            p = self.cv.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        Self::outcome(&p)
    }

    fn outcome(p: &HostTaskProgress) -> Result<()> {
        match &p.failure {
            Some(why) => Err(Error::new(Errc::Event, why.clone())),
            None => Ok(()),
        }
    }
}

/// The event of a host task on a CUDA queue.
pub(crate) struct HostTaskEvent {
    pub(crate) state: Arc<HostTaskState>,
    submit_ns: u64,
    profiling: bool,
}

impl HostTaskEvent {
    pub(crate) fn new(state: Arc<HostTaskState>, profiling: bool) -> HostTaskEvent {
        HostTaskEvent {
            state,
            submit_ns: now_ns(),
            profiling,
        }
    }
}

impl sycl_backend::Event for HostTaskEvent {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn status(&self) -> Result<EventStatus> {
        let p = lock(&self.state.progress);
        if p.end_ns.is_some() {
            HostTaskState::outcome(&p)?;
            Ok(EventStatus::Complete)
        } else if p.start_ns.is_some() {
            Ok(EventStatus::Running)
        } else {
            Ok(EventStatus::Submitted)
        }
    }

    fn wait(&self) -> Result<()> {
        self.state.wait()
    }

    fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        let mut p = lock(&self.state.progress);
        while p.end_ns.is_none() {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(std::time::Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return Ok(false);
            }
            p = self
                .state
                .cv
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        HostTaskState::outcome(&p)?;
        Ok(true)
    }

    fn profiling(&self) -> Result<ProfilingInfo> {
        if !self.profiling {
            return Err(no_profiling("queue made without enable_profiling"));
        }
        self.state.wait()?;
        let p = lock(&self.state.progress);
        let start_ns = p.start_ns.unwrap_or(self.submit_ns).max(self.submit_ns);
        Ok(ProfilingInfo {
            submit_ns: self.submit_ns,
            start_ns,
            end_ns: p.end_ns.unwrap_or(start_ns).max(start_ns),
        })
    }

    fn ipc_enabled(&self) -> bool {
        false
    }
}
