//! Queues: one immediate command list each.
//!
//! Every command signals a fresh pool event and waits for the previous command's event, so
//! commands run in submission order on every queue — out-of-order queues included (allowed:
//! in-order execution is a valid schedule of an out-of-order queue). Lists are created with
//! `ZE_COMMAND_QUEUE_FLAG_IN_ORDER` when the driver speaks spec 1.7 or newer (needed to signal
//! counter-based events). Events of commands still running, and the events they wait for, are
//! kept alive by the queue until they complete.

use std::any::Any;
use std::sync::{Arc, Mutex};

use level_zero_sys::*;
use sycl_backend::{
    BackendKind, Errc, Error, HostTask, KernelArg, LaunchRange, QueueProperties, Result,
};

use crate::context::{lock, ContextInner};
use crate::device::Device;
use crate::event::{Event, Timer};
use crate::result::check;

struct Pending {
    /// Released once this event completed.
    event: Arc<dyn sycl_backend::Event>,
    _deps: Vec<Arc<dyn sycl_backend::Event>>,
}

struct State {
    list: ze_command_list_handle_t,
    last: Option<Arc<Event>>,
    pending: Vec<Pending>,
}

/// A Level Zero queue.
pub struct Queue {
    ctx: Arc<ContextInner>,
    device: Arc<dyn sycl_backend::Device>,
    timer: Timer,
    props: QueueProperties,
    state: Mutex<State>,
}

// SAFETY: the command list (not thread-safe in Level Zero) is only used under `state`'s mutex;
// everything else is immutable or itself Send + Sync.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

/// The handles to wait on for `deps`: own events of the same context; others are waited on
/// from the host first (other backends' events, and Level Zero events of other contexts).
fn wait_handles(
    ctx: &ContextInner,
    deps: &[Arc<dyn sycl_backend::Event>],
) -> Result<Vec<ze_event_handle_t>> {
    let mut out = Vec::with_capacity(deps.len() + 1);
    for d in deps {
        match d.as_any().downcast_ref::<Event>() {
            Some(e) if e.ctx.handle == ctx.handle => out.push(e.handle),
            _ => d.wait()?,
        }
    }
    Ok(out)
}

impl Queue {
    pub(crate) fn create(
        ctx: &Arc<ContextInner>,
        device: &Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Queue> {
        let dev: &Device = ctx.our_device(device)?;
        let desc = ze_command_queue_desc_t {
            stype: ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
            pNext: std::ptr::null(),
            ordinal: 0,
            index: 0,
            flags: if ctx.ext.has_in_order_lists() {
                ZE_COMMAND_QUEUE_FLAG_IN_ORDER
            } else {
                0
            },
            mode: ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
            priority: ZE_COMMAND_QUEUE_PRIORITY_NORMAL,
        };
        let mut list = std::ptr::null_mut();
        check(
            // SAFETY: valid context and device of it, tagged desc, out-pointer.
            unsafe {
                (ctx.loader.zeCommandListCreateImmediate)(ctx.handle, dev.handle, &desc, &mut list)
            },
            "zeCommandListCreateImmediate",
        )?;
        Ok(Queue {
            ctx: ctx.clone(),
            device: device.clone(),
            timer: Timer::of(dev),
            props,
            state: Mutex::new(State {
                list,
                last: None,
                pending: Vec::new(),
            }),
        })
    }

    /// Appends one command: `append(list, signal, waits)` with a fresh event to signal and the
    /// previous command plus `deps` to wait for.
    fn submit(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
        signal: Option<Arc<Event>>,
        append: impl FnOnce(
            ze_command_list_handle_t,
            ze_event_handle_t,
            &mut Vec<ze_event_handle_t>,
        ) -> Result<()>,
    ) -> Result<Arc<Event>> {
        let mut waits = wait_handles(&self.ctx, deps)?;
        let event = match signal {
            Some(e) => e,
            None => Event::pooled(&self.ctx, self.props.enable_profiling.then_some(self.timer))?,
        };
        let mut st = lock(&self.state);
        if let Some(last) = &st.last {
            waits.push(last.handle);
        }
        append(st.list, event.handle, &mut waits)?;
        st.last = Some(event.clone());
        st.pending.retain(|p| still_running(&p.event));
        st.pending.push(Pending {
            event: event.clone(),
            _deps: deps.to_vec(),
        });
        Ok(event)
    }

    fn barrier_with(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
        signal: Option<Arc<Event>>,
    ) -> Result<Arc<Event>> {
        let l = self.ctx.loader.clone();
        self.submit(deps, signal, |list, ev, waits| {
            check(
                // SAFETY: list used under the state lock; handles are live events kept in `pending`.
                unsafe {
                    (l.zeCommandListAppendBarrier)(list, ev, waits.len() as u32, wait_ptr(waits))
                },
                "zeCommandListAppendBarrier",
            )
        })
    }
}

/// Whether the command behind `event` has not completed (errors count as running: the event
/// is kept alive rather than recycled under a running command).
fn still_running(event: &Arc<dyn sycl_backend::Event>) -> bool {
    !matches!(event.status(), Ok(sycl_backend::EventStatus::Complete))
}

fn wait_ptr(waits: &mut [ze_event_handle_t]) -> *mut ze_event_handle_t {
    if waits.is_empty() {
        std::ptr::null_mut()
    } else {
        waits.as_mut_ptr()
    }
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
        let l = self.ctx.loader.clone();
        Ok(self.submit(deps, None, |list, ev, waits| {
            check(
                // SAFETY: the caller guarantees both ranges stay valid until the event completes.
                unsafe {
                    (l.zeCommandListAppendMemoryCopy)(
                        list,
                        dst as *mut _,
                        src as *const _,
                        size,
                        ev,
                        waits.len() as u32,
                        wait_ptr(waits),
                    )
                },
                "zeCommandListAppendMemoryCopy",
            )
        })?)
    }

    unsafe fn fill(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        if pattern.is_empty() || size % pattern.len() != 0 {
            return Err(Error::invalid(format!(
                "fill of {size} bytes with a {}-byte pattern",
                pattern.len()
            )));
        }
        let l = self.ctx.loader.clone();
        let pattern = pattern.to_vec();
        Ok(self.submit(deps, None, |list, ev, waits| {
            check(
                // SAFETY: the range is valid per the caller; Level Zero copies the pattern at
                // append time (spec: "pattern ... may be freed after the call").
                unsafe {
                    (l.zeCommandListAppendMemoryFill)(
                        list,
                        dst as *mut _,
                        pattern.as_ptr().cast(),
                        pattern.len(),
                        size,
                        ev,
                        waits.len() as u32,
                        wait_ptr(waits),
                    )
                },
                "zeCommandListAppendMemoryFill",
            )
        })?)
    }

    unsafe fn prefetch(
        &self,
        ptr: u64,
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let l = self.ctx.loader.clone();
        Ok(self.submit(deps, None, |list, ev, waits| {
            // SAFETY: a hint on a live range; the barrier orders it and signals the event.
            let ze_r =
                unsafe { (l.zeCommandListAppendMemoryPrefetch)(list, ptr as *const _, size) };
            check(ze_r, "zeCommandListAppendMemoryPrefetch")?;
            check(
                // SAFETY: as in barrier_with.
                unsafe {
                    (l.zeCommandListAppendBarrier)(list, ev, waits.len() as u32, wait_ptr(waits))
                },
                "zeCommandListAppendBarrier",
            )
        })?)
    }

    /// Runs the task on a new thread after `deps` and the previous command; its event is
    /// signalled from the host, so later device commands wait for it.
    fn host_task(
        &self,
        task: HostTask,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let event = Event::pooled(&self.ctx, None)?;
        let mut waits: Vec<Arc<dyn sycl_backend::Event>> = deps.to_vec();
        {
            let mut st = lock(&self.state);
            if let Some(last) = st.last.take() {
                waits.push(last);
            }
            st.last = Some(event.clone());
            st.pending.push(Pending {
                event: event.clone(),
                _deps: deps.to_vec(),
            });
        }
        let signal = event.clone();
        std::thread::Builder::new()
            .name("l0-host-task".into())
            .spawn(move || {
                for w in &waits {
                    if let Err(e) = w.wait() {
                        log::warn!("level_zero: host task dependency failed: {e}");
                    }
                }
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).is_err() {
                    log::error!("level_zero: a host task panicked");
                }
                if let Err(e) = signal.host_signal() {
                    log::error!("level_zero: cannot signal host task event: {e}");
                }
            })
            .map_err(|e| {
                // Later commands wait for this event: never leave it unsignalled.
                if let Err(se) = event.host_signal() {
                    log::error!("level_zero: cannot signal host task event: {se}");
                }
                Error::new(
                    Errc::Runtime,
                    format!("cannot start a host task thread: {e}"),
                )
            })?;
        Ok(event)
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
            BackendKind::LevelZero,
        )?;
        let dev = self.ctx.our_device(&self.device)?;
        let max_wg = self.device.info().max_work_group_size;
        let l = self.ctx.loader.clone();
        let handle_lock = k.handle_for(dev.handle)?;
        crate::kernel::check_arg_count(&k.name, k.num_args, args.len())?;
        let values = crate::kernel::build_args(args)?;
        Ok(self.submit(deps, None, |list, ev, waits| {
            // The kernel's argument and group-size state is per handle: hold its lock until the
            // launch is appended (Level Zero captures arguments at append time).
            let kh = lock(handle_lock);
            let kh = kh.0;
            for (i, v) in values.iter().enumerate() {
                let ptr = v
                    .bytes
                    .as_ref()
                    .map_or(std::ptr::null(), |b| b.as_ptr().cast());
                // SAFETY: `ptr` is null (local memory) or points at `size` bytes.
                let ze_r = unsafe { (l.zeKernelSetArgumentValue)(kh, i as u32, v.size, ptr) };
                check(ze_r, "zeKernelSetArgumentValue")
                    .map_err(|e| e.context(format!("argument {i}")))?;
            }
            let suggested = if range.local.is_none() {
                let g = crate::kernel::global_u32(&range)?;
                let (mut x, mut y, mut z) = (0, 0, 0);
                check(
                    // SAFETY: valid kernel, out-pointers.
                    unsafe {
                        (l.zeKernelSuggestGroupSize)(kh, g[0], g[1], g[2], &mut x, &mut y, &mut z)
                    },
                    "zeKernelSuggestGroupSize",
                )?;
                Some([x, y, z])
            } else {
                None
            };
            let plan = crate::kernel::launch_plan(&range, max_wg, suggested)?;
            let [x, y, z] = plan.group_size;
            // SAFETY: valid kernel under its lock.
            let ze_r = unsafe { (l.zeKernelSetGroupSize)(kh, x, y, z) };
            check(ze_r, "zeKernelSetGroupSize")?;
            check(
                // SAFETY: the caller guarantees pointer arguments stay valid; the group count is
                // copied at append time.
                unsafe {
                    (l.zeCommandListAppendLaunchKernel)(
                        list,
                        kh,
                        &plan.group_count,
                        ev,
                        waits.len() as u32,
                        wait_ptr(waits),
                    )
                },
                "zeCommandListAppendLaunchKernel",
            )
        })?)
    }

    fn barrier(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        Ok(self.barrier_with(deps, None)?)
    }

    /// Marks the current end of the queue with a fresh pool event (which becomes the queue's
    /// "previous command"), then signals the standalone event with a barrier that waits for it
    /// (timestamps when the event profiles). The standalone event never becomes the queue's
    /// chain link, so re-signalling it elsewhere cannot stall later commands of this queue.
    fn enqueue_signal_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<()> {
        let ours =
            sycl_backend::downcast::<Event>(event.as_any(), "event", BackendKind::LevelZero)?;
        if ours.ctx.handle != self.ctx.handle {
            return Err(Error::invalid(
                "the event and the queue belong to different contexts",
            ));
        }
        let point = self.barrier_with(&[], None)?;
        ours.prepare_resignal()?;
        let l = self.ctx.loader.clone();
        let mut st = lock(&self.state);
        let mut waits = [point.handle];
        // SAFETY: list used under the state lock; `point` and the standalone event are kept
        // alive in `pending` until they complete.
        let r =
            unsafe { (l.zeCommandListAppendBarrier)(st.list, ours.handle, 1, waits.as_mut_ptr()) };
        check(r, "zeCommandListAppendBarrier")?;
        st.pending.push(Pending {
            event: event.clone(),
            _deps: vec![point],
        });
        Ok(())
    }

    fn enqueue_wait_events(&self, events: &[Arc<dyn sycl_backend::Event>]) -> Result<()> {
        self.barrier_with(events, None)?;
        Ok(())
    }

    fn wait(&self) -> Result<()> {
        let last = lock(&self.state).last.clone();
        if let Some(last) = last {
            sycl_backend::Event::wait(&*last)?;
        }
        lock(&self.state)
            .pending
            .retain(|p| still_running(&p.event));
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let st = match self.state.get_mut() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if let Some(last) = st.last.take() {
            if let Err(e) = sycl_backend::Event::wait(&*last) {
                log::warn!("level_zero: waiting for a queue before destroying it: {e}");
            }
        }
        st.pending.clear();
        if let Err(e) = check(
            // SAFETY: every command completed; the list is destroyed once.
            unsafe { (self.ctx.loader.zeCommandListDestroy)(st.list) },
            "zeCommandListDestroy",
        ) {
            log::warn!("level_zero: {e}");
        }
    }
}
