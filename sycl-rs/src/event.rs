//! `sycl::event`, standalone events (`make_event`) and profiling.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use sycl_backend::{EventProperties, EventStatus, ProfilingInfo};

use crate::ipc::ExportSet;
use crate::kernel::KernelStatus;
use crate::{Context, Device, Errc, Error, Result};

/// An event: the completion of a command, or a standalone event that queues signal and wait on.
///
/// Cheap to clone; clones name the same event.
#[derive(Clone)]
pub struct Event {
    pub(crate) inner: Arc<dyn sycl_backend::Event>,
    pub(crate) context: Context,
    /// IPC exports of a standalone event made with `enable_ipc` (`None` for every other).
    pub(crate) exports: Option<Arc<ExportSet>>,
    /// A `#[sycl::kernel]` launch on a GPU: where its work-items report failures.
    pub(crate) kernel_status: Option<Arc<KernelStatus>>,
}

/// The checks of `make_event`: `enable_ipc` excludes `enable_profiling`, and every device
/// that may signal the event has the aspects the properties need.
fn check_standalone(devices: &[crate::Device], props: EventProperties) -> Result<()> {
    if props.enable_ipc && props.enable_profiling {
        return Err(Error::new(
            Errc::Invalid,
            "an event cannot have both enable_ipc and enable_profiling (IPC events carry no timestamps)",
        ));
    }
    for device in devices {
        device.require(sycl_backend::Aspect::ExtOneapiReusableEvents, "make_event")?;
        if props.enable_ipc {
            device.require(
                sycl_backend::Aspect::ExtOneapiIpcEvent,
                "an event with enable_ipc",
            )?;
        }
    }
    Ok(())
}

impl Event {
    pub(crate) fn from_raw(inner: Arc<dyn sycl_backend::Event>, context: Context) -> Self {
        Event {
            inner,
            context,
            exports: None,
            kernel_status: None,
        }
    }

    /// A standalone event: exportable when made with `enable_ipc`.
    fn standalone(
        inner: Arc<dyn sycl_backend::Event>,
        context: Context,
        props: EventProperties,
    ) -> Self {
        Event {
            inner,
            context,
            exports: props.enable_ipc.then(Default::default),
            kernel_status: None,
        }
    }

    /// `make_event`: a standalone event in the complete state, with properties.
    ///
    /// Errors: `Errc::Invalid` for `enable_ipc` with `enable_profiling`;
    /// `Errc::FeatureNotSupported` when a device of `context` lacks `ext_oneapi_ipc_event`
    /// (for `enable_ipc`) or `ext_oneapi_reusable_events`.
    ///
    /// ```
    /// # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
    /// let device = sycl::Device::default_device().unwrap();
    /// let ctx = sycl::Context::default_for(&device).unwrap();
    /// let both = sycl::EventProperties { enable_ipc: true, enable_profiling: true };
    /// assert_eq!(sycl::Event::new(&ctx, both).unwrap_err().code(), sycl::Errc::Invalid);
    /// ```
    pub fn new(context: &Context, props: EventProperties) -> Result<Event> {
        check_standalone(context.devices(), props)?;
        let inner = context.raw().create_event(props)?;
        Ok(Event::standalone(inner, context.clone(), props))
    }

    /// A standalone event in `queue`'s context that `queue` (and other queues of its device)
    /// can signal. Prefer it to [`Event::new`] on multi-device contexts: a CUDA event belongs
    /// to one device, and [`Event::new`] makes it on the context's first device.
    pub fn new_for_queue(queue: &crate::Queue, props: EventProperties) -> Result<Event> {
        let device = queue.device();
        check_standalone(std::slice::from_ref(device), props)?;
        let inner = queue
            .context()
            .raw()
            .create_event_on(&device.inner, props)?;
        Ok(Event::standalone(inner, queue.context().clone(), props))
    }

    /// A standalone event on the default context of `device`'s platform.
    pub fn new_default(device: &Device, props: EventProperties) -> Result<Event> {
        Event::new(&Context::default_for(device)?, props)
    }

    /// Blocks until the event completes. Errors raised by the command (a panicking closure
    /// kernel, an exporter that died) come back here.
    pub fn wait(&self) -> Result<()> {
        self.inner.wait()?;
        self.check_kernel()
    }

    /// Blocks until completion or `timeout`; `Ok(false)` when the time ran out.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        let done = self.inner.wait_timeout(timeout)?;
        if done {
            self.check_kernel()?;
        }
        Ok(done)
    }

    /// A completed `#[sycl::kernel]` launch: `Errc::Kernel` if a work-item failed.
    fn check_kernel(&self) -> Result<()> {
        match &self.kernel_status {
            Some(status) => status.check(),
            None => Ok(()),
        }
    }

    /// Waits for every event in `events`.
    pub fn wait_all(events: &[Event]) -> Result<()> {
        events.iter().try_for_each(Event::wait)
    }

    /// `info::event::command_execution_status`.
    pub fn status(&self) -> Result<EventStatus> {
        let status = self.inner.status()?;
        if status == EventStatus::Complete {
            self.check_kernel()?;
        }
        Ok(status)
    }

    /// Profiling timestamps (`info::event_profiling::command_submit/start/end`), in ns.
    ///
    /// Errors: `Errc::Profiling` when the queue was made without `enable_profiling`.
    pub fn profiling_info(&self) -> Result<ProfilingInfo> {
        self.inner.profiling()
    }

    /// Whether this event may be exported with [`crate::ipc::event::get`].
    pub fn ipc_enabled(&self) -> bool {
        self.inner.ipc_enabled()
    }

    /// sycl-rs extension (aspect `ext_sycl_rs_event_signal_count`): how many
    /// `enqueue_signal_event`s of this standalone event have completed, in every process that
    /// shares it. Lets ranks wait for "the next signal" without a side channel.
    pub fn ext_signal_count(&self) -> Result<u64> {
        self.inner.signal_count()
    }

    /// sycl-rs extension: blocks until [`Event::ext_signal_count`] reaches `target` or
    /// `timeout` passes (`None`: no limit); `Ok(false)` on time-out. A peer that died while the
    /// signal was pending is an `Errc::Event` error.
    pub fn ext_wait_signal_count(&self, target: u64, timeout: Option<Duration>) -> Result<bool> {
        self.inner.wait_signal_count(target, timeout)
    }

    /// Its context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    pub(crate) fn raw_list(events: &[&Event]) -> Vec<Arc<dyn sycl_backend::Event>> {
        events.iter().map(|e| e.inner.clone()).collect()
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("status", &self.status().ok())
            .finish()
    }
}
