//! OpenCL command queues.
//!
//! Dependencies: events of this context become the command's wait list; events of other
//! contexts or backends are waited for on the host before the command is enqueued. Events of
//! other queues are flushed first (OpenCL requires it for cross-queue waits).
//!
//! IPC events (shared pages, `event.rs`) of any context: a queue signals one from the completion
//! callback of a marker (flushed at once: the waiter may be another process, which cannot
//! flush this queue), and waits on one through a user event of its context that a waiter
//! thread completes when the page's futex word says so (`Queue::gate`).
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
    Aspect, BackendKind, Errc, Error, HostTask, KernelArg, LaunchRange, QueueProperties, Result,
};
use sycl_backend_native_cpu::host_ipc::SharedEvent;

use crate::context::{ContextShared, ContextUsm};
use crate::device::Device;
use crate::event::{raw_status, Event, QueueShared, RawRef};
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
    /// The gates of `enqueue_wait_events` on IPC events that are not known to have completed:
    /// every later command waits for them explicitly, because OpenCL does not fail the later
    /// commands of an in-order queue when a barrier fails (Intel's CPU runtime ran them). A
    /// failed gate (its signaller died) stays, and fails every later command.
    gates: Gates,
}

/// Retained user events of [`Queue::gate`]s, released with the queue.
struct Gates {
    api: &'static Api,
    live: std::sync::Mutex<Vec<Handle>>,
}

impl Drop for Gates {
    fn drop(&mut self) {
        for gate in self
            .live
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // SAFETY: each gate holds one reference, retained in `enqueue_wait_events`.
            unsafe { (self.api.clReleaseEvent)(gate.0) };
        }
    }
}

/// The own-context part of a command's dependencies.
pub(crate) struct WaitList {
    list: Vec<cl_event>,
    /// Retained handles of standalone events, released after the enqueue.
    held: Vec<RawRef>,
    /// The user events among `list` that gate on IPC events (`Queue::gate`).
    gates: Vec<cl_event>,
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
                fires: Default::default(),
            }),
            device: device.clone(),
            address_bits: dev.caps.address_bits,
            props,
            last_barrier: std::sync::Mutex::new(None),
            gates: Gates {
                api,
                live: std::sync::Mutex::new(Vec::new()),
            },
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
            gates: Vec::new(),
        };
        self.add_open_gates(&mut wl)?;
        for dep in deps {
            let ours = dep.as_any().downcast_ref::<Event>();
            if let Some(page) = ours.and_then(Event::shared_page) {
                if let Some(gate) = self.gate(page)? {
                    wl.list.push(gate.raw);
                    wl.gates.push(gate.raw);
                    wl.held.push(gate);
                }
                continue;
            }
            let own = ours.filter(|e| Arc::ptr_eq(&e.ctx, &self.ctx));
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

    /// Adds the gates of earlier `enqueue_wait_events` that are still open to `wl`, forgetting
    /// those that completed; fails if one failed.
    fn add_open_gates(&self, wl: &mut WaitList) -> Result<()> {
        let mut live = self.gates.live.lock().unwrap_or_else(|e| e.into_inner());
        if live.is_empty() {
            return Ok(());
        }
        let api = self.ctx.api;
        let mut failed = None;
        live.retain(|gate| match raw_status(api, gate.0) {
            Ok(CL_COMPLETE) => {
                // SAFETY: the reference retained in `enqueue_wait_events`, dropped once.
                unsafe { (api.clReleaseEvent)(gate.0) };
                false
            }
            Ok(_) => true,
            Err(e) => {
                failed = Some(e);
                true
            }
        });
        if let Some(e) = failed {
            return Err(Error::new(
                Errc::Event,
                format!(
                    "an earlier enqueue_wait_events of this queue waited for an IPC event whose signaller died, so its later commands do not run ({e})"
                ),
            ));
        }
        wl.list.extend(live.iter().map(|gate| gate.0));
        Ok(())
    }

    /// A user event of this context that completes when the IPC event `page` does; `None`
    /// when it already has. A waiter thread sleeps on the page's futex word (checking the
    /// peers that owe the signal every 50 ms); if a peer dies owing it, the user event fails,
    /// and so do the commands waiting for it. PoCL aborts the process on a failed user event
    /// with dependents, so there the wait happens here, on the host, and a dead peer is this
    /// call's error.
    fn gate(&self, page: &Arc<SharedEvent>) -> Result<Option<RawRef>> {
        if page.is_complete() {
            return Ok(None);
        }
        if self.ctx.gate_on_host {
            page.wait_complete(None)
                .map_err(|e| e.context("waiting for an IPC event"))?;
            return Ok(None);
        }
        let api = self.ctx.api;
        let mut rc = CL_SUCCESS;
        // SAFETY: live context; `rc` is an out-param.
        let user = unsafe { (api.clCreateUserEvent)(self.ctx.raw.0, &mut rc) };
        check(rc, "clCreateUserEvent")?;
        // The caller's reference, released once the command holding it is enqueued.
        let held = RawRef::owned(api, user);
        // SAFETY: live user event; this second reference belongs to the waiter thread.
        unsafe { (api.clRetainEvent)(user) };
        let waiter = Handle(user);
        let page = page.clone();
        let spawned = std::thread::Builder::new()
            .name("sycl-opencl-ipc-wait".into())
            .spawn(move || {
                let waiter: Handle = waiter; // the whole `Send` wrapper, not its raw field
                let status = match page.wait_complete(None) {
                    Ok(_) => CL_COMPLETE,
                    Err(e) => {
                        log::error!("opencl: the commands waiting for an IPC event fail: {e}");
                        CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
                    }
                };
                // SAFETY: this thread's reference keeps the user event alive; its status is
                // set once, then the reference is released.
                unsafe {
                    (api.clSetUserEventStatus)(waiter.0, status);
                    (api.clReleaseEvent)(waiter.0);
                }
            });
        if let Err(e) = spawned {
            // SAFETY: the thread never ran: its reference and the status are ours to settle.
            unsafe {
                (api.clSetUserEventStatus)(user, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
                (api.clReleaseEvent)(user);
            }
            return Err(Error::new(
                Errc::Runtime,
                format!("spawning a thread to wait for an IPC event: {e}"),
            ));
        }
        Ok(Some(held))
    }

    /// `enqueue_signal_event` of an IPC event: armed now (owed by this process), fired by the
    /// completion callback of a marker that follows every earlier command.
    fn signal_shared(&self, page: &Arc<SharedEvent>) -> Result<()> {
        exiting::watch();
        let api = self.ctx.api;
        let mut raw: cl_event = std::ptr::null_mut();
        // SAFETY: live queue; an empty wait list makes the marker wait for every earlier command.
        let rc = unsafe {
            (api.clEnqueueMarkerWithWaitList)(self.q.raw.0, 0, std::ptr::null(), &mut raw)
        };
        check(rc, "clEnqueueMarkerWithWaitList")?;
        let marker = RawRef::owned(api, raw);
        page.arm(false);
        // A marker behind nothing may be complete at once: fire now, without a callback.
        // NVIDIA's OpenCL delivered completion callbacks ~8 ms late (a 500-round IPC ping-pong
        // took 15.7 ms per round trip).
        self.q.needs_flush.store(true, Ordering::Release);
        self.q.flush_if_needed()?;
        if matches!(raw_status(api, raw), Ok(CL_COMPLETE)) {
            if !exiting::now() {
                page.fire();
            }
            return Ok(());
        }
        self.q.fires.add();
        let fire = Box::new(Fire {
            page: page.clone(),
            fires: self.q.fires.clone(),
        });
        let user = Box::into_raw(fire) as *mut c_void;
        // SAFETY: live marker; the callback takes over `user` exactly once.
        let rc = unsafe { (api.clSetEventCallback)(raw, CL_COMPLETE, Some(fire_shared), user) };
        self.q.needs_flush.store(true, Ordering::Release);
        if rc != CL_SUCCESS {
            // SAFETY: no callback was registered, so `user` is ours again.
            let fire = unsafe { Box::from_raw(user as *mut Fire) };
            // Armed: the signal is owed, so deliver it once the marker completed.
            let waited = self
                .q
                .flush_if_needed()
                .and_then(|()| crate::event::wait_raw(api, marker.raw));
            fire.run();
            waited?;
            return Err(error(rc, "clSetEventCallback"));
        }
        self.q.flush_if_needed()
    }

    fn no_usm(&self) -> Error {
        Error::unsupported(Aspect::UsmDeviceAllocations, "USM memory operations")
    }
}

/// Fires an IPC event once the marker of `signal_shared` completed, unless the process is
/// exiting: Intel's CPU runtime completes every pending command when the process exits
/// (seen: a marker behind a host task that never returned reported `CL_COMPLETE` during
/// `exit`), which would hand the peers a signal for work that never ran. Left owed, the
/// signal is what a process that dies owes: its waiters fail with `Errc::Event`.
unsafe extern "C" fn fire_shared(_ev: cl_event, _status: cl_int, user: *mut c_void) {
    // SAFETY: `user` is the box `signal_shared` made for this one call.
    unsafe { Box::from_raw(user as *mut Fire) }.run();
}

/// What the completion callback of one IPC signal needs.
struct Fire {
    page: Arc<SharedEvent>,
    /// The queue's count of callbacks to come (not the queue: its drop must not run here).
    fires: Arc<crate::event::PendingFires>,
}

impl Fire {
    fn run(self) {
        if !exiting::now() {
            self.page.fire();
        }
        self.fires.finish();
    }
}

/// Whether the process has begun to exit (`exit` or a return from `main`).
mod exiting {
    use std::sync::atomic::{AtomicBool, Ordering};

    static EXITING: AtomicBool = AtomicBool::new(false);

    extern "C" {
        /// The C library's `atexit` (std links it on every Linux target).
        fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
    }

    extern "C" fn mark() {
        EXITING.store(true, Ordering::SeqCst);
    }

    /// Registers the exit handler, once. Handlers run in reverse order of registration, so
    /// this one, registered after the OpenCL runtime was loaded and used, runs before the
    /// runtime's own teardown.
    pub(super) fn watch() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `mark` is a plain function that only stores to a static atomic: safe to
            // run at any point of the exit sequence.
            if unsafe { atexit(mark) } != 0 {
                log::warn!("opencl: atexit failed; an exiting process may signal IPC events");
            }
        });
    }

    pub(super) fn now() -> bool {
        EXITING.load(Ordering::SeqCst)
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
        if let Some(page) = ev.shared_page() {
            // Host memory: any queue may signal it, whatever the event's context.
            return self.signal_shared(page);
        }
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
        // One wait list (an IPC event's gate is made once), then a barrier on it.
        let wl = self.wait_list(events)?;
        if wl.len() == 0 {
            return Ok(());
        }
        // The gates of IPC events among them: later commands wait for them explicitly.
        if !wl.gates.is_empty() {
            let mut live = self.gates.live.lock().unwrap_or_else(|e| e.into_inner());
            for &gate in &wl.gates {
                // SAFETY: a live user event (`wl` holds it); this reference is the queue's.
                unsafe { (self.ctx.api.clRetainEvent)(gate) };
                live.push(Handle(gate));
            }
        }
        let mut raw: cl_event = std::ptr::null_mut();
        // SAFETY: live queue and wait list of live events of its context.
        let rc = unsafe {
            (self.ctx.api.clEnqueueBarrierWithWaitList)(self.q.raw.0, wl.len(), wl.ptr(), &mut raw)
        };
        drop(wl);
        check(rc, "clEnqueueBarrierWithWaitList")?;
        let ev = self.wrap(raw);
        if !self.props.in_order {
            *self.last_barrier.lock().unwrap_or_else(|e| e.into_inner()) = Some(ev);
        }
        Ok(())
    }

    fn wait(&self) -> Result<()> {
        self.q.needs_flush.store(false, Ordering::Release);
        // SAFETY: live queue.
        check(unsafe { (self.ctx.api.clFinish)(self.q.raw.0) }, "clFinish")?;
        // The IPC signals before this point went out too (their callbacks may run later).
        self.q.fires.wait()
    }
}
