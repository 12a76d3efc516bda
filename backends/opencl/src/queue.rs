//! OpenCL command queues.
//!
//! Dependencies: events of this context become the command's wait list; events of other
//! contexts or backends are waited for on the host before the command is enqueued. Events of
//! other queues are flushed first (OpenCL requires it for cross-queue waits).
//!
//! Host tasks run on a fresh host thread that waits for the dependencies (and, on an in-order
//! queue, for a marker that stands for every earlier command), runs the task and completes a
//! user event. A barrier (in-order) or marker (out-of-order) that waits for the user event is
//! enqueued on the queue, so later commands and `Queue::wait` see the host task.

use std::any::Any;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sycl_backend::{
    Aspect, BackendKind, Error, HostTask, KernelArg, LaunchRange, QueueProperties, Result,
};

use crate::context::{ContextShared, ContextUsm};
use crate::device::Device;
use crate::event::{Event, QueueShared, RawRef};
use crate::result::{check, error};
use crate::sys::*;
use crate::Handle;

/// An OpenCL command queue.
pub struct Queue {
    pub(crate) ctx: Arc<ContextShared>,
    pub(crate) q: Arc<QueueShared>,
    device: Arc<dyn sycl_backend::Device>,
    /// The device's `CL_DEVICE_ADDRESS_BITS`, for the launch checks (`kernel::check_launch`).
    pub(crate) address_bits: u32,
    props: QueueProperties,
    /// Out-of-order queues: the latest barrier (`barrier`, `enqueue_wait_events`). OpenCL
    /// commands honour it by themselves, but host tasks start from a marker with an explicit
    /// wait list, which Intel's CPU runtime does not hold back behind earlier barriers, so
    /// host tasks add this event to their wait list.
    last_barrier: std::sync::Mutex<Option<Arc<dyn sycl_backend::Event>>>,
}

/// The own-context part of a command's dependencies.
pub(crate) struct WaitList {
    list: Vec<cl_event>,
    /// Retained handles of standalone events, released after the enqueue.
    held: Vec<RawRef>,
}

impl WaitList {
    #[inline]
    pub fn len(&self) -> cl_uint {
        self.list.len() as cl_uint
    }
    #[inline]
    pub fn ptr(&self) -> *const cl_event {
        if self.list.is_empty() {
            std::ptr::null()
        } else {
            self.list.as_ptr()
        }
    }
}

impl Queue {
    pub(crate) fn new(
        ctx: &Arc<ContextShared>,
        device: &Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Self> {
        let dev = sycl_backend::downcast::<Device>(device.as_any(), "device", BackendKind::OpenCl)?;
        if ctx.index_of_raw(dev.id.0).is_none() {
            return Err(Error::invalid(
                "the queue's device is not a device of the context",
            ));
        }
        let api = ctx.api;
        let mut flags: cl_command_queue_properties = 0;
        if props.enable_profiling {
            if !sycl_backend::Device::info(dev).has(Aspect::QueueProfiling) {
                return Err(Error::unsupported(
                    Aspect::QueueProfiling,
                    "a queue with enable_profiling",
                ));
            }
            flags |= CL_QUEUE_PROFILING_ENABLE;
        }
        if !props.in_order && dev.caps.out_of_order {
            flags |= CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;
        }
        let create = |flags: cl_command_queue_properties| -> (cl_command_queue, cl_int) {
            let mut rc = CL_SUCCESS;
            let q = if let Some(f) = api.clCreateCommandQueueWithProperties {
                let list = [CL_QUEUE_PROPERTIES, flags, 0];
                // SAFETY: live context and device of it; zero-terminated property list.
                unsafe { f(ctx.raw.0, dev.id.0, list.as_ptr(), &mut rc) }
            } else if let Some(f) = api.clCreateCommandQueue {
                // SAFETY: as above, OpenCL 1.x form.
                unsafe { f(ctx.raw.0, dev.id.0, flags, &mut rc) }
            } else {
                rc = -59; // CL_INVALID_OPERATION: no queue-creating entry point.
                std::ptr::null_mut()
            };
            (q, rc)
        };
        let (mut raw, mut rc) = create(flags);
        if rc == CL_INVALID_QUEUE_PROPERTIES && flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0
        {
            // An in-order queue is a valid out-of-order queue.
            (raw, rc) = create(flags & !CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
        }
        check(rc, "clCreateCommandQueueWithProperties")?;
        Ok(Queue {
            ctx: ctx.clone(),
            q: Arc::new(QueueShared {
                api,
                raw: Handle(raw),
                needs_flush: AtomicBool::new(false),
            }),
            device: device.clone(),
            address_bits: dev.caps.address_bits,
            props,
            last_barrier: std::sync::Mutex::new(None),
        })
    }

    /// The `cl_command_queue`.
    pub fn raw(&self) -> cl_command_queue {
        self.q.raw.0
    }

    /// Splits `deps` into a wait list of this context's events and host waits for the rest.
    pub(crate) fn wait_list(&self, deps: &[Arc<dyn sycl_backend::Event>]) -> Result<WaitList> {
        let mut wl = WaitList {
            list: Vec::new(),
            held: Vec::new(),
        };
        for dep in deps {
            let own = dep
                .as_any()
                .downcast_ref::<Event>()
                .filter(|e| Arc::ptr_eq(&e.ctx, &self.ctx));
            let Some(ev) = own else {
                dep.wait()?;
                continue;
            };
            if let Some(s) = ev.fixed() {
                if let Some(raw) = s.raw {
                    if let Some(q) = &s.queue {
                        if !Arc::ptr_eq(q, &self.q) {
                            q.flush_if_needed()?;
                        }
                    }
                    wl.list.push(raw.0);
                }
            } else if let Some(r) = ev.current() {
                if let Some(q) = &r.queue {
                    if !Arc::ptr_eq(q, &self.q) {
                        q.flush_if_needed()?;
                    }
                }
                wl.list.push(r.raw);
                wl.held.push(r);
            }
        }
        Ok(wl)
    }

    /// Enqueues one command through `f(num_events, wait_list, out_event)` and wraps its event.
    #[inline]
    pub(crate) fn submit(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
        what: &str,
        f: impl FnOnce(cl_uint, *const cl_event, *mut cl_event) -> cl_int,
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let wl = self.wait_list(deps)?;
        let mut ev: cl_event = std::ptr::null_mut();
        let rc = f(wl.len(), wl.ptr(), &mut ev);
        drop(wl);
        check(rc, what)?;
        Ok(self.wrap(ev))
    }

    /// Wraps the event of a command just enqueued on this queue.
    #[inline]
    pub(crate) fn wrap(&self, ev: cl_event) -> Arc<dyn sycl_backend::Event> {
        self.q.needs_flush.store(true, Ordering::Release);
        Arc::new(Event::new(
            self.ctx.clone(),
            ev,
            Some(self.q.clone()),
            self.props.enable_profiling,
        ))
    }

    fn marker(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let q = self.q.raw.0;
        let api = self.ctx.api;
        self.submit(deps, "clEnqueueMarkerWithWaitList", |n, list, ev| {
            // SAFETY: live queue; wait list of live events of its context.
            unsafe { (api.clEnqueueMarkerWithWaitList)(q, n, list, ev) }
        })
    }

    fn no_usm(&self) -> Error {
        Error::unsupported(Aspect::UsmDeviceAllocations, "USM memory operations")
    }
}

/// Frees a staging buffer once the command that reads it completed.
unsafe extern "C" fn free_staging(_ev: cl_event, _status: cl_int, user: *mut c_void) {
    // SAFETY: `user` is the `Box<Vec<u8>>` leaked by `Queue::fill` for this callback only.
    drop(unsafe { Box::from_raw(user.cast::<Vec<u8>>()) });
}

impl sycl_backend::Queue for Queue {
    fn device(&self) -> &Arc<dyn sycl_backend::Device> {
        &self.device
    }
    fn properties(&self) -> QueueProperties {
        self.props
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    unsafe fn memcpy(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        if size == 0 {
            return self.marker(deps);
        }
        let q = self.q.raw.0;
        let (d, s) = (dst as *mut c_void, src as *const c_void);
        match &self.ctx.usm {
            ContextUsm::Intel(f) => self.submit(deps, "clEnqueueMemcpyINTEL", |n, l, ev| {
                // SAFETY: the caller guarantees both ranges are valid for `size` bytes until
                // the event completes.
                unsafe { (f.memcpy)(q, CL_FALSE, d, s, size, n, l, ev) }
            }),
            ContextUsm::Svm { .. } => {
                let Some(copy) = self.ctx.api.clEnqueueSVMMemcpy else {
                    return Err(self.no_usm());
                };
                self.submit(deps, "clEnqueueSVMMemcpy", |n, l, ev| {
                    // SAFETY: as above; SVM memcpy accepts SVM and plain host pointers.
                    unsafe { copy(q, CL_FALSE, d, s, size, n, l, ev) }
                })
            }
            ContextUsm::None => Err(self.no_usm()),
        }
    }

    unsafe fn fill(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let p = pattern.len();
        if p == 0 || size % p != 0 {
            return Err(Error::invalid(format!(
                "fill of {size} bytes with a pattern of {p} bytes"
            )));
        }
        if size == 0 {
            return self.marker(deps);
        }
        let q = self.q.raw.0;
        let d = dst as *mut c_void;
        let native_ok = p.is_power_of_two() && p <= 128 && dst % p as u64 == 0;
        if native_ok {
            let pat = pattern.as_ptr().cast::<c_void>();
            return match &self.ctx.usm {
                ContextUsm::Intel(f) => self.submit(deps, "clEnqueueMemFillINTEL", |n, l, ev| {
                    // SAFETY: `dst` is valid for `size` bytes (caller); the pattern is copied
                    // by the driver at enqueue time.
                    unsafe { (f.mem_fill)(q, d, pat, p, size, n, l, ev) }
                }),
                ContextUsm::Svm { .. } => {
                    let Some(fill) = self.ctx.api.clEnqueueSVMMemFill else {
                        return Err(self.no_usm());
                    };
                    self.submit(deps, "clEnqueueSVMMemFill", |n, l, ev| {
                        // SAFETY: as above.
                        unsafe { fill(q, d, pat, p, size, n, l, ev) }
                    })
                }
                ContextUsm::None => Err(self.no_usm()),
            };
        }
        // Patterns OpenCL cannot fill natively (not a power of two, over 128 bytes, or `dst`
        // not aligned to them): copy from a host staging buffer that a completion callback
        // frees.
        let staging: Box<Vec<u8>> = Box::new(pattern.iter().copied().cycle().take(size).collect());
        // SAFETY: `staging` lives until the callback below (or the wait) frees it, i.e. until
        // the copy completed; `dst` is the caller's.
        let ev = unsafe { self.memcpy(dst, staging.as_ptr() as u64, size, deps)? };
        let raw = ev
            .as_any()
            .downcast_ref::<Event>()
            .and_then(|e| e.fixed())
            .and_then(|s| s.raw);
        let user = Box::into_raw(staging);
        let rc = match raw {
            // SAFETY: live event; the callback takes ownership of `user` exactly once.
            Some(raw) => unsafe {
                (self.ctx.api.clSetEventCallback)(
                    raw.0,
                    CL_COMPLETE,
                    Some(free_staging),
                    user.cast(),
                )
            },
            None => CL_INVALID_VALUE,
        };
        if rc != CL_SUCCESS {
            // No callback: wait here, then free.
            let waited = ev.wait();
            // SAFETY: `user` was not handed to any callback.
            drop(unsafe { Box::from_raw(user) });
            waited?;
        }
        Ok(ev)
    }

    unsafe fn prefetch(
        &self,
        ptr: u64,
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let q = self.q.raw.0;
        let p = ptr as *const c_void;
        let res = match &self.ctx.usm {
            ContextUsm::Intel(f) => self.submit(deps, "clEnqueueMigrateMemINTEL", |n, l, ev| {
                // SAFETY: the range is a live allocation until the event completes (caller).
                unsafe { (f.migrate)(q, p, size, 0, n, l, ev) }
            }),
            ContextUsm::Svm { .. } => match self.ctx.api.clEnqueueSVMMigrateMem {
                Some(migrate) => self.submit(deps, "clEnqueueSVMMigrateMem", |n, l, ev| {
                    // SAFETY: as above; one pointer and one size.
                    unsafe { migrate(q, 1, &p, &size, 0, n, l, ev) }
                }),
                None => return self.marker(deps),
            },
            ContextUsm::None => return Err(self.no_usm()),
        };
        match res {
            Ok(ev) => Ok(ev),
            // A prefetch is only a hint: a driver refusing it still orders like a marker.
            Err(e) => {
                log::debug!("opencl: prefetch ignored: {e}");
                self.marker(deps)
            }
        }
    }

    fn host_task(
        &self,
        task: HostTask,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let api = self.ctx.api;
        let q = self.q.raw.0;
        // The "start" marker completes when the task may run: after the dependencies and, on
        // an in-order queue, every earlier command; on an out-of-order queue after any earlier
        // barrier too (markers honour barriers). An empty wait list would mean "every earlier
        // command" on an out-of-order queue, so a completed user event stands in for none.
        let mut wl = if self.props.in_order {
            self.wait_list(deps)?
        } else {
            let barrier = self
                .last_barrier
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            match barrier {
                Some(b) => {
                    self.wait_list(&deps.iter().cloned().chain(Some(b)).collect::<Vec<_>>())?
                }
                None => self.wait_list(deps)?,
            }
        };
        let mut gate = None;
        if !self.props.in_order && wl.len() == 0 {
            let mut rc = CL_SUCCESS;
            // SAFETY: live context.
            let g = unsafe { (api.clCreateUserEvent)(self.ctx.raw.0, &mut rc) };
            check(rc, "clCreateUserEvent")?;
            // Owned from here on, released at the end of this call.
            let g = Event::new(self.ctx.clone(), g, None, false);
            // SAFETY: our own fresh user event, completed once.
            let rc = unsafe { (api.clSetUserEventStatus)(g.fixed_raw(), CL_COMPLETE) };
            check(rc, "clSetUserEventStatus")?;
            wl.list.push(g.fixed_raw());
            gate = Some(g);
        }
        let mut start: cl_event = std::ptr::null_mut();
        // SAFETY: live queue and wait list of live events of its context.
        let rc = unsafe { (api.clEnqueueMarkerWithWaitList)(q, wl.len(), wl.ptr(), &mut start) };
        drop(wl);
        drop(gate);
        check(rc, "clEnqueueMarkerWithWaitList")?;
        let start = Event::new(self.ctx.clone(), start, Some(self.q.clone()), false);

        let mut rc = CL_SUCCESS;
        // SAFETY: live context.
        let user = unsafe { (api.clCreateUserEvent)(self.ctx.raw.0, &mut rc) };
        check(rc, "clCreateUserEvent")?;
        let user_ev = Arc::new(Event::new(self.ctx.clone(), user, None, false));
        // Later commands (in order) and `wait` see the task through a command waiting for it.
        // SAFETY: live queue; the wait list is the one live user event.
        let rc = unsafe {
            if self.props.in_order {
                (api.clEnqueueBarrierWithWaitList)(q, 1, &user, std::ptr::null_mut())
            } else {
                (api.clEnqueueMarkerWithWaitList)(q, 1, &user, std::ptr::null_mut())
            }
        };
        if let Err(e) = check(rc, "enqueueing the host task's barrier") {
            let _ = user_ev
                .host_failure
                .set(format!("the host task was not submitted: {e}"));
            // SAFETY: our own user event, completed once.
            unsafe { (api.clSetUserEventStatus)(user, CL_COMPLETE) };
            return Err(e);
        }
        self.q.needs_flush.store(true, Ordering::Release);
        self.q.flush_if_needed()?;

        let done = Handle(user);
        let keep = user_ev.clone();
        let spawned = std::thread::Builder::new()
            .name("sycl-opencl-host-task".into())
            .spawn(move || {
                let done: Handle = done; // the whole `Send` wrapper, not its raw field
                let keep = keep; // keeps the user event alive until its status is set
                match sycl_backend::Event::wait(&start) {
                    Err(e) => {
                        log::error!(
                            "opencl: a host task's dependency failed, the task does not run: {e}"
                        );
                        let _ = keep
                            .host_failure
                            .set(format!("a dependency of the host task failed: {e}"));
                    }
                    Ok(()) => {
                        let run = || std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
                        if crate::usm::host_task_frees::run_task(run).is_err() {
                            log::error!("opencl: a host task panicked");
                            let _ = keep.host_failure.set("the host task panicked".into());
                        }
                    }
                }
                // SAFETY: `done` is the user event kept alive by `keep`; its status is set once.
                let rc = unsafe { (api.clSetUserEventStatus)(done.0, CL_COMPLETE) };
                if rc != CL_SUCCESS {
                    log::error!("opencl: {}", error(rc, "clSetUserEventStatus"));
                }
                crate::usm::host_task_frees::flush();
                // Only now: `start` may hold the last reference to the queue, whose drop waits
                // for the queue's commands, including the barrier on the user event just set.
                drop(start);
            });
        if let Err(e) = spawned {
            let _ = user_ev
                .host_failure
                .set(format!("the host task's thread did not start: {e}"));
            // SAFETY: as above; the thread never ran, so the status is set only here.
            unsafe { (api.clSetUserEventStatus)(user, CL_COMPLETE) };
            return Err(Error::new(
                sycl_backend::Errc::Runtime,
                format!("spawning a host-task thread: {e}"),
            ));
        }
        Ok(user_ev)
    }

    unsafe fn launch(
        &self,
        kernel: &Arc<dyn sycl_backend::Kernel>,
        range: LaunchRange,
        args: &[KernelArg<'_>],
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let k = sycl_backend::downcast::<crate::kernel::Kernel>(
            kernel.as_any(),
            "kernel",
            BackendKind::OpenCl,
        )?;
        // SAFETY: forwarded contract on pointer arguments.
        unsafe { k.launch(self, range, args, deps) }
    }

    fn barrier(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let q = self.q.raw.0;
        let api = self.ctx.api;
        let ev = self.submit(deps, "clEnqueueBarrierWithWaitList", |n, list, ev| {
            // SAFETY: live queue and wait list.
            unsafe { (api.clEnqueueBarrierWithWaitList)(q, n, list, ev) }
        })?;
        if !self.props.in_order {
            *self.last_barrier.lock().unwrap_or_else(|e| e.into_inner()) = Some(ev.clone());
        }
        Ok(ev)
    }

    fn enqueue_signal_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<()> {
        let ev = sycl_backend::downcast::<Event>(event.as_any(), "event", BackendKind::OpenCl)?;
        if !Arc::ptr_eq(&ev.ctx, &self.ctx) {
            return Err(Error::invalid(
                "enqueue_signal_event: the event and the queue have different contexts",
            ));
        }
        if !ev.is_standalone() {
            return Err(Error::invalid(
                "enqueue_signal_event needs an event made by make_event",
            ));
        }
        let mut raw: cl_event = std::ptr::null_mut();
        // SAFETY: live queue; an empty wait list makes the marker wait for every earlier command.
        let rc = unsafe {
            (self.ctx.api.clEnqueueMarkerWithWaitList)(self.q.raw.0, 0, std::ptr::null(), &mut raw)
        };
        check(rc, "clEnqueueMarkerWithWaitList")?;
        self.q.needs_flush.store(true, Ordering::Release);
        ev.resignal(raw, self.q.clone(), self.props.enable_profiling)
    }

    fn enqueue_wait_events(&self, events: &[Arc<dyn sycl_backend::Event>]) -> Result<()> {
        let wl = self.wait_list(events)?;
        if wl.len() == 0 {
            return Ok(());
        }
        drop(wl);
        sycl_backend::Queue::barrier(self, events).map(drop)
    }

    fn wait(&self) -> Result<()> {
        self.q.needs_flush.store(false, Ordering::Release);
        // SAFETY: live queue.
        check(unsafe { (self.ctx.api.clFinish)(self.q.raw.0) }, "clFinish")
    }
}
