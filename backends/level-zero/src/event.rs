//! Events.
//!
//! * Command events and plain standalone events come from the context's host-visible event
//!   pools (a `ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP` pool when profiling); slots are recycled.
//! * Standalone events made with `enable_ipc` are counter-based IPC events
//!   (`zeEventCounterBasedCreate` with `ZE_EVENT_COUNTER_BASED_FLAG_IPC`, or the `zex`
//!   extension) when the driver has them, else the only event of a dedicated pool made with
//!   `ZE_EVENT_POOL_FLAG_IPC`. IPC events are never pooled.
//! * Imported events are closed with the matching IPC close call, and their waits notice a
//!   dead exporter (`Errc::Event`) instead of hanging.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use level_zero_sys::*;
use sycl_backend::ipc::ExporterId;
use sycl_backend::{BackendKind, Errc, Error, EventProperties, EventStatus, ProfilingInfo, Result};

use crate::context::ContextInner;
use crate::device::Device;
use crate::platform::EventIpcRoute;
use crate::result::{check, map_result};

/// Where an event came from, which decides how it is released.
pub(crate) enum Origin {
    /// A slot of a context pool.
    Pooled {
        pool: ze_event_pool_handle_t,
        index: u32,
        timestamp: bool,
    },
    /// A counter-based IPC event made by the core API (`zeEventCounterBasedCreate`).
    CounterBased,
    /// A counter-based IPC event made by `zexCounterBasedEventCreate2`.
    Zex,
    /// The event of a dedicated IPC pool this process created (pool destroyed with the event).
    IpcPool { pool: ze_event_pool_handle_t },
    /// Opened with `zeEventCounterBasedOpenIpcHandle`.
    ImportedCounterBased,
    /// Opened with `zexCounterBasedEventOpenIpcHandle`.
    ImportedZex,
    /// Created in a pool opened with `zeEventPoolOpenIpcHandle`.
    ImportedPool { pool: ze_event_pool_handle_t },
}

/// Kernel-timestamp conversion of a device: nanoseconds per cycle and valid bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timer {
    pub resolution_ns: u64,
    pub valid_bits: u32,
}

impl Timer {
    pub(crate) fn of(device: &Device) -> Timer {
        Timer {
            resolution_ns: device.timer_resolution_ns,
            valid_bits: device.kernel_timestamp_bits,
        }
    }
}

/// Converts kernel timestamps (cycles) to nanoseconds, handling a wrapped end counter.
pub fn timestamps_to_ns(start: u64, end: u64, resolution_ns: u64, valid_bits: u32) -> (u64, u64) {
    let mask = if valid_bits == 0 || valid_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << valid_bits) - 1
    };
    let (s, e) = (start & mask, end & mask);
    let duration = if e >= s { e - s } else { (mask - s) + e + 1 };
    let start_ns = s.saturating_mul(resolution_ns);
    (
        start_ns,
        start_ns.saturating_add(duration.saturating_mul(resolution_ns)),
    )
}

/// A Level Zero event.
pub struct Event {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: ze_event_handle_t,
    pub(crate) origin: Origin,
    timer: Option<Timer>,
    ipc_enabled: bool,
    exporter: Option<ExporterId>,
}

// SAFETY: event handles may be queried, synchronized, signalled and reset from any thread
// (Level Zero events are thread-safe objects); the struct has no interior mutability.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A fresh, unsignalled event from the context pool.
    pub(crate) fn pooled(ctx: &Arc<ContextInner>, timer: Option<Timer>) -> Result<Arc<Event>> {
        let timestamp = timer.is_some();
        let (pool, index) = ctx.take_slot(timestamp)?;
        let desc = ze_event_desc_t {
            stype: ZE_STRUCTURE_TYPE_EVENT_DESC,
            pNext: std::ptr::null(),
            index,
            signal: ZE_EVENT_SCOPE_FLAG_HOST,
            wait: ZE_EVENT_SCOPE_FLAG_HOST,
        };
        let mut handle = std::ptr::null_mut();
        if let Err(e) = check(
            // SAFETY: valid pool, free index, tagged desc, out-pointer.
            unsafe { (ctx.loader.zeEventCreate)(pool, &desc, &mut handle) },
            "zeEventCreate",
        ) {
            ctx.give_slot(timestamp, (pool, index));
            return Err(e);
        }
        let ev = Event {
            ctx: ctx.clone(),
            handle,
            origin: Origin::Pooled {
                pool,
                index,
                timestamp,
            },
            timer,
            ipc_enabled: false,
            exporter: None,
        };
        // A recycled slot may still hold its previous state.
        // SAFETY: the event is ours and unused.
        let ze_r = unsafe { (ctx.loader.zeEventHostReset)(handle) };
        check(ze_r, "zeEventHostReset")?;
        Ok(Arc::new(ev))
    }

    /// `make_event`: a standalone event in the complete state.
    pub(crate) fn standalone(
        ctx: &Arc<ContextInner>,
        props: EventProperties,
    ) -> Result<Arc<Event>> {
        if props.enable_ipc && props.enable_profiling {
            return Err(Error::invalid(
                "an event cannot have both enable_ipc and enable_profiling",
            ));
        }
        let dev0 = ctx
            .devices
            .first()
            .and_then(|d| d.as_any().downcast_ref::<Device>())
            .ok_or_else(|| Error::invalid("context without Level Zero devices"))?;
        if !props.enable_ipc {
            let ev = Event::pooled(ctx, props.enable_profiling.then(|| Timer::of(dev0)))?;
            // SAFETY: our event; signalling from the host puts it in the complete state.
            let ze_r = unsafe { (ctx.loader.zeEventHostSignal)(ev.handle) };
            check(ze_r, "zeEventHostSignal")?;
            return Ok(ev);
        }
        let l = &ctx.loader;
        let mut handle = std::ptr::null_mut();
        let origin = match ctx.ext.event_ipc_route(l) {
            EventIpcRoute::CounterBased => {
                let create = l.zeEventCounterBasedCreate.ok_or_else(|| {
                    crate::result::missing("zeEventCounterBasedCreate", "an IPC event")
                })?;
                let desc = ze_event_counter_based_desc_t {
                    stype: ZE_STRUCTURE_TYPE_EVENT_COUNTER_BASED_DESC,
                    pNext: std::ptr::null(),
                    flags: ZE_EVENT_COUNTER_BASED_FLAG_IMMEDIATE
                        | ZE_EVENT_COUNTER_BASED_FLAG_NON_IMMEDIATE
                        | ZE_EVENT_COUNTER_BASED_FLAG_HOST_VISIBLE
                        | ZE_EVENT_COUNTER_BASED_FLAG_IPC,
                    signal: ZE_EVENT_SCOPE_FLAG_HOST,
                    wait: ZE_EVENT_SCOPE_FLAG_HOST,
                };
                // SAFETY: valid context and device, tagged desc, out-pointer.
                let ze_r = unsafe { create(ctx.handle, dev0.handle, &desc, &mut handle) };
                check(ze_r, "zeEventCounterBasedCreate")?;
                Origin::CounterBased
            }
            EventIpcRoute::Zex => {
                let zex = ctx.ext.zex.ok_or_else(|| {
                    crate::result::missing("zexCounterBasedEventCreate2", "an IPC event")
                })?;
                let desc = zex_counter_based_event_desc_t {
                    stype: ZEX_STRUCTURE_COUNTER_BASED_EVENT_DESC,
                    pNext: std::ptr::null(),
                    flags: ZEX_COUNTER_BASED_EVENT_FLAG_IMMEDIATE
                        | ZEX_COUNTER_BASED_EVENT_FLAG_NON_IMMEDIATE
                        | ZEX_COUNTER_BASED_EVENT_FLAG_HOST_VISIBLE
                        | ZEX_COUNTER_BASED_EVENT_FLAG_IPC,
                    signalScope: ZE_EVENT_SCOPE_FLAG_HOST,
                    waitScope: ZE_EVENT_SCOPE_FLAG_HOST,
                };
                let c = translate(l, ZEL_HANDLE_CONTEXT, ctx.handle.cast())?;
                let d = translate(l, ZEL_HANDLE_DEVICE, dev0.handle.cast())?;
                // SAFETY: driver-level handles (translated), tagged desc, out-pointer.
                let ze_r = unsafe { (zex.create)(c.cast(), d.cast(), &desc, &mut handle) };
                check(ze_r, "zexCounterBasedEventCreate2")?;
                Origin::Zex
            }
            EventIpcRoute::EventPool => {
                let pool = ctx.create_pool(ZE_EVENT_POOL_FLAG_IPC, 1)?;
                let desc = ze_event_desc_t {
                    stype: ZE_STRUCTURE_TYPE_EVENT_DESC,
                    pNext: std::ptr::null(),
                    index: 0,
                    signal: ZE_EVENT_SCOPE_FLAG_HOST,
                    wait: ZE_EVENT_SCOPE_FLAG_HOST,
                };
                // SAFETY: valid pool, index 0 < count 1, tagged desc, out-pointer.
                let r = unsafe { (l.zeEventCreate)(pool, &desc, &mut handle) };
                if r != ZE_RESULT_SUCCESS {
                    // SAFETY: the pool has no events.
                    let _ = unsafe { (l.zeEventPoolDestroy)(pool) };
                    return Err(map_result(r, "zeEventCreate"));
                }
                // SAFETY: our fresh event; counter-based events start complete, make this
                // one complete too.
                let s = unsafe { (l.zeEventHostSignal)(handle) };
                let ev = Event {
                    ctx: ctx.clone(),
                    handle,
                    origin: Origin::IpcPool { pool },
                    timer: None,
                    ipc_enabled: true,
                    exporter: None,
                };
                check(s, "zeEventHostSignal")?;
                return Ok(Arc::new(ev));
            }
        };
        Ok(Arc::new(Event {
            ctx: ctx.clone(),
            handle,
            origin,
            timer: None,
            ipc_enabled: true,
            exporter: None,
        }))
    }

    /// Wraps an opened IPC event.
    pub(crate) fn imported(
        ctx: &Arc<ContextInner>,
        handle: ze_event_handle_t,
        origin: Origin,
        exporter: ExporterId,
    ) -> Arc<Event> {
        Arc::new(Event {
            ctx: ctx.clone(),
            handle,
            origin,
            timer: None,
            ipc_enabled: false,
            exporter: Some(exporter),
        })
    }

    /// Whether the event is counter-based (no host reset; signalled from in-order lists only).
    pub(crate) fn is_counter_based(&self) -> bool {
        matches!(
            self.origin,
            Origin::CounterBased | Origin::Zex | Origin::ImportedCounterBased | Origin::ImportedZex
        )
    }

    /// Readies a standalone event for a new signal (`enqueue_signal_event`). Counter-based
    /// events need nothing (a new signal replaces the old state). Regular events are reset from
    /// the host, after waiting for any earlier signal still pending on them: a host reset
    /// overtaken by an older pending signal would make the event look complete too early.
    pub(crate) fn prepare_resignal(&self) -> Result<()> {
        if self.is_counter_based() {
            return Ok(());
        }
        sycl_backend::Event::wait(self)?;
        // SAFETY: our event, with no signal pending (waited for above).
        let ze_r = unsafe { (self.ctx.loader.zeEventHostReset)(self.handle) };
        check(ze_r, "zeEventHostReset")
    }

    /// Signals the event from the host (host tasks).
    pub(crate) fn host_signal(&self) -> Result<()> {
        // SAFETY: a pooled host-visible event.
        let ze_r = unsafe { (self.ctx.loader.zeEventHostSignal)(self.handle) };
        check(ze_r, "zeEventHostSignal")
    }

    fn sync(&self, timeout_ns: u64) -> Result<bool> {
        // SAFETY: a live event handle.
        match unsafe { (self.ctx.loader.zeEventHostSynchronize)(self.handle, timeout_ns) } {
            ZE_RESULT_SUCCESS => Ok(true),
            ZE_RESULT_NOT_READY => Ok(false),
            r => Err(map_result(r, "zeEventHostSynchronize")),
        }
    }

    fn exporter_check(&self) -> Result<()> {
        match &self.exporter {
            Some(x) if !x.is_alive() => Err(Error::new(
                Errc::Event,
                format!("the process {} that exported this event has exited", x.pid),
            )),
            _ => Ok(()),
        }
    }
}

/// Translates a loader handle into the driver's handle for extension functions.
pub(crate) fn translate(
    l: &Loader,
    kind: zel_handle_type_t,
    h: *mut std::ffi::c_void,
) -> Result<*mut std::ffi::c_void> {
    let Some(f) = l.zelLoaderTranslateHandle else {
        return Ok(h);
    };
    let mut out = std::ptr::null_mut();
    // SAFETY: `h` is a live handle of `kind`; out-pointer valid.
    let ze_r = unsafe { f(kind, h, &mut out) };
    check(ze_r, "zelLoaderTranslateHandle")?;
    Ok(if out.is_null() { h } else { out })
}

impl sycl_backend::Event for Event {
    fn backend(&self) -> BackendKind {
        BackendKind::LevelZero
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn status(&self) -> Result<EventStatus> {
        // SAFETY: a live event handle.
        match unsafe { (self.ctx.loader.zeEventQueryStatus)(self.handle) } {
            ZE_RESULT_SUCCESS => Ok(EventStatus::Complete),
            ZE_RESULT_NOT_READY => {
                self.exporter_check()?;
                Ok(EventStatus::Submitted)
            }
            r => Err(map_result(r, "zeEventQueryStatus")),
        }
    }
    fn wait(&self) -> Result<()> {
        if self.exporter.is_none() {
            return self.sync(u64::MAX).map(|_| ());
        }
        // Imported: wait in slices and notice a dead exporter.
        loop {
            if self.sync(50_000_000)? {
                return Ok(());
            }
            self.exporter_check()?;
        }
    }
    fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.exporter_check()?;
        let ns = u64::try_from(timeout.as_nanos())
            .unwrap_or(u64::MAX - 1)
            .min(u64::MAX - 1);
        if self.exporter.is_none() {
            return self.sync(ns);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let slice = left.min(Duration::from_millis(50));
            if self.sync(slice.as_nanos() as u64)? {
                return Ok(true);
            }
            self.exporter_check()?;
            if left.is_zero() {
                return Ok(false);
            }
        }
    }
    fn profiling(&self) -> Result<ProfilingInfo> {
        let Some(timer) = self.timer else {
            return Err(Error::new(
                Errc::Profiling,
                "the event was not made with profiling enabled",
            ));
        };
        self.sync(u64::MAX)?;
        let mut ts = ze_kernel_timestamp_result_t::default();
        // SAFETY: a completed timestamp event; valid out-pointer.
        let ze_r = unsafe { (self.ctx.loader.zeEventQueryKernelTimestamp)(self.handle, &mut ts) };
        check(ze_r, "zeEventQueryKernelTimestamp")?;
        let (start_ns, end_ns) = timestamps_to_ns(
            ts.global.kernelStart,
            ts.global.kernelEnd,
            timer.resolution_ns,
            timer.valid_bits,
        );
        // Level Zero has no submit timestamp: report the start.
        Ok(ProfilingInfo {
            submit_ns: start_ns,
            start_ns,
            end_ns,
        })
    }
    fn ipc_enabled(&self) -> bool {
        self.ipc_enabled
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let l = self.ctx.loader.clone();
        let h = self.handle;
        // Every arm releases the handle once, with the call that matches how it was made;
        // queues keep the events of pending commands alive, so none is in use here.
        let destroy = || {
            // SAFETY: see above; `h` is a live event made by zeEventCreate or a counter-based
            // create call, both released with zeEventDestroy.
            let r = unsafe { (l.zeEventDestroy)(h) };
            check(r, "zeEventDestroy")
        };
        let r = match self.origin {
            Origin::Pooled {
                pool,
                index,
                timestamp,
            } => {
                let r = destroy();
                if r.is_ok() {
                    self.ctx.give_slot(timestamp, (pool, index));
                }
                r
            }
            Origin::CounterBased | Origin::Zex => destroy(),
            Origin::IpcPool { pool } => destroy().and_then(|()| {
                // SAFETY: the dedicated pool's only event was destroyed just above.
                let r = unsafe { (l.zeEventPoolDestroy)(pool) };
                check(r, "zeEventPoolDestroy")
            }),
            Origin::ImportedCounterBased => match l.zeEventCounterBasedCloseIpcHandle {
                Some(f) => {
                    // SAFETY: `h` was opened with zeEventCounterBasedOpenIpcHandle.
                    let r = unsafe { f(h) };
                    check(r, "zeEventCounterBasedCloseIpcHandle")
                }
                None => Ok(()),
            },
            Origin::ImportedZex => match self.ctx.ext.zex {
                Some(z) => {
                    // SAFETY: `h` was opened with zexCounterBasedEventOpenIpcHandle.
                    let r = unsafe { (z.close_ipc)(h) };
                    check(r, "zexCounterBasedEventCloseIpcHandle")
                }
                None => Ok(()),
            },
            Origin::ImportedPool { pool } => destroy().and_then(|()| {
                // SAFETY: `pool` came from zeEventPoolOpenIpcHandle; its event is destroyed.
                let r = unsafe { (l.zeEventPoolCloseIpcHandle)(pool) };
                check(r, "zeEventPoolCloseIpcHandle")
            }),
        };
        if let Err(e) = r {
            log::warn!("level_zero: releasing an event: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_convert_and_unwrap() {
        assert_eq!(timestamps_to_ns(100, 150, 2, 32), (200, 300));
        // End wrapped past a 8-bit counter: 250 → 260 is 10 cycles.
        assert_eq!(timestamps_to_ns(250, 4, 1, 8), (250, 260));
        // Bits above the valid ones are ignored.
        assert_eq!(timestamps_to_ns(0x100 + 5, 0x200 + 7, 1, 8), (5, 7));
        assert_eq!(timestamps_to_ns(1, 3, 10, 64), (10, 30));
    }
}
