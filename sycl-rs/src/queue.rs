//! `sycl::queue`: commands, dependencies, waits.
#![allow(unsafe_code)]

use std::fmt;
use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{Aspect, QueueProperties};

use crate::kernel::{ArgInner, Item, Kernel, KernelArg, Range};
use crate::usm::{AsUsmRange, MemoryRecord, Use};
use crate::{Context, Device, DeviceSelector, Errc, Error, Event, Result};

/// A queue of commands for one device.
///
/// Every command takes its dependencies (`deps`, events of any queue or backend) and returns
/// an [`Event`]. `Queue` is `Send + Sync`: submitting from many threads is safe.
///
/// ```
/// use sycl::{Queue, Range, Device};
/// let q = Queue::in_order(&Device::native_cpu()).unwrap();
/// let data = sycl::malloc_shared::<f32>(1000, &q).unwrap();
/// q.fill(&data, 1.5f32, &[]).unwrap();
/// q.wait().unwrap();
/// assert!(data.as_slice().unwrap().iter().all(|&x| x == 1.5));
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(crate) inner: Arc<dyn sycl_backend::Queue>,
    pub(crate) context: Context,
    pub(crate) device: Device,
}

impl Queue {
    /// A queue on `device` in its platform's default context (out-of-order, no profiling).
    pub fn new(device: &Device) -> Result<Queue> {
        Queue::with_properties(device, QueueProperties::default())
    }

    /// An in-order queue on `device`.
    pub fn in_order(device: &Device) -> Result<Queue> {
        Queue::with_properties(
            device,
            QueueProperties {
                in_order: true,
                enable_profiling: false,
            },
        )
    }

    /// A queue on `device` with properties, in the default context.
    pub fn with_properties(device: &Device, props: QueueProperties) -> Result<Queue> {
        Queue::with_context(&Context::default_for(device)?, device, props)
    }

    /// A queue on the device `selector` picks.
    pub fn from_selector(selector: &DeviceSelector, props: QueueProperties) -> Result<Queue> {
        Queue::with_properties(&selector.select()?, props)
    }

    /// A queue on `device` of `context` with properties.
    ///
    /// Errors: `Errc::Invalid` if the device is not in the context; `Errc::FeatureNotSupported`
    /// for `enable_profiling` on a device without `queue_profiling`.
    pub fn with_context(
        context: &Context,
        device: &Device,
        props: QueueProperties,
    ) -> Result<Queue> {
        context.check_device(device)?;
        if props.enable_profiling {
            device.require(Aspect::QueueProfiling, "a queue with enable_profiling")?;
        }
        let inner = context.raw().create_queue(&device.inner, props)?;
        Ok(Queue {
            inner,
            context: context.clone(),
            device: device.clone(),
        })
    }

    /// Its device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Its context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Its backend.
    pub fn backend(&self) -> sycl_backend::BackendKind {
        self.device.backend()
    }

    /// Its properties.
    pub fn properties(&self) -> QueueProperties {
        self.inner.properties()
    }

    /// The CUDA stream (a `CUstream` as an integer) a CUDA queue's commands run in, in
    /// submission order; `None` on other backends. For interop: another library may order
    /// its work before this queue's later commands (`cuStreamWaitEvent` on it, or DLPack's
    /// `__dlpack__(stream=..)`), or its own after this queue's earlier ones (an event recorded
    /// on it). The stream belongs to the queue: it lives as long as the queue, and other
    /// libraries must neither destroy nor capture it.
    pub fn cuda_stream(&self) -> Option<u64> {
        self.inner.cuda_stream()
    }

    /// Submits a command over `uses` (checked and tracked by their records, see
    /// [`MemoryRecord::submit`]) and wraps its event.
    pub(crate) fn submit_using(
        &self,
        uses: &[(&Arc<MemoryRecord>, Use)],
        submit: impl FnOnce() -> Result<Arc<dyn sycl_backend::Event>>,
    ) -> Result<Event> {
        for (record, _) in uses {
            record.check_queue(self)?;
        }
        let raw = MemoryRecord::submit(uses, submit)?;
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// Host work that reads and writes `uses`' memory through raw addresses, ordered as a
    /// command of this queue submitted now after `deps`, and admitted and tracked as one (host
    /// borrows wait for it; the memory is freed only after it). When the queue has nothing
    /// pending and `deps` completed, `work(true)` runs on this thread first, inside the
    /// admission, and says whether it finished; what is left (or all of it) runs as a host
    /// task, `work(false)`, which must finish. The task's failure is reported as the native
    /// queue's commands report theirs (an `Error` payload of `resume_unwind`).
    ///
    /// `idle_wait`: when `deps` completed but the queue still runs earlier commands, how long
    /// this thread waits for them (yielding its core, which the queue's worker may share)
    /// before it hands `work` to the queue. Without it, a caller that submits faster than its
    /// peers arrive would leave every later call to the worker for good, each a hand-off.
    ///
    /// `uses` names each record once ([`crate::usm::record::add_use`]), each found reachable
    /// from this queue by the caller (`MemoryRecord::check_queue`: a team's plan checks its
    /// memory once, when it is planned, not at every run of it).
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    pub(crate) fn host_work_using(
        &self,
        uses: &[(Arc<MemoryRecord>, Use)],
        deps: &[&Event],
        idle_wait: std::time::Duration,
        mut work: impl FnMut(bool) -> Result<bool> + Send + 'static,
    ) -> Result<Event> {
        let done = |d: &&Event| {
            matches!(d.status(), Ok(sycl_backend::EventStatus::Complete)) && d.wait().is_ok()
        };
        let now = deps.iter().all(done) && self.idle_within(idle_wait);
        let raw = MemoryRecord::submit_or_run(uses, || {
            if now && work(true)? {
                // Done: nothing to track.
                return Ok(None);
            }
            let task = move || {
                if let Err(error) = work(false) {
                    std::panic::resume_unwind(Box::new(error));
                }
            };
            let deps = Event::raw_list(deps);
            self.inner.host_task(Box::new(task), &deps).map(Some)
        })?;
        let raw = match raw {
            Some(raw) => raw,
            None => self
                .context
                .raw()
                .create_event(sycl_backend::EventProperties::default())?,
        };
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// Whether the queue has no command left to run, waiting up to `limit` for it: a few
    /// polls spinning, then yielding the core between polls.
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    fn idle_within(&self, limit: std::time::Duration) -> bool {
        if self.inner.is_idle() {
            return true;
        }
        if limit.is_zero() {
            return false;
        }
        let start = std::time::Instant::now();
        let mut poll = 0u32;
        loop {
            if poll < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            if self.inner.is_idle() {
                return true;
            }
            if poll % 8 == 0 && start.elapsed() >= limit {
                return false;
            }
            poll = poll.wrapping_add(1);
        }
    }

    /// Copies `src` into `dst` (same length; any USM kinds, IPC-opened memory, mappings).
    pub fn copy<T: Pod>(
        &self,
        src: &impl AsUsmRange<T>,
        dst: &impl AsUsmRange<T>,
        deps: &[&Event],
    ) -> Result<Event> {
        let (src, dst) = (src.usm_range(), dst.usm_range());
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "copy of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let deps = Event::raw_list(deps);
        self.submit_using(
            &[(&src.record, Use::Read), (&dst.record, Use::Write)],
            || {
                // SAFETY: both ranges lie inside their records (bounds checked when the ranges
                // were made); each record frees nothing before the commands it tracks (this one
                // included) completed; the records admitted the uses, so no host borrow reads or
                // writes `dst` meanwhile (spec/soundness.md).
                unsafe {
                    self.inner
                        .memcpy(dst.as_ptr(), src.as_ptr(), src.byte_len(), &deps)
                }
            },
        )
    }

    /// Sets every byte of `dst` to `value` (`memset`).
    pub fn memset<T: Pod>(
        &self,
        dst: &impl AsUsmRange<T>,
        value: u8,
        deps: &[&Event],
    ) -> Result<Event> {
        let dst = dst.usm_range();
        let deps = Event::raw_list(deps);
        self.submit_using(&[(&dst.record, Use::Write)], || {
            // SAFETY: as in `copy`.
            unsafe {
                self.inner
                    .fill(dst.as_ptr(), &[value], dst.byte_len(), &deps)
            }
        })
    }

    /// Writes `value` into every element of `dst` (`fill`).
    pub fn fill<T: Pod>(
        &self,
        dst: &impl AsUsmRange<T>,
        value: T,
        deps: &[&Event],
    ) -> Result<Event> {
        let dst = dst.usm_range();
        let pattern = bytemuck::bytes_of(&value);
        if pattern.is_empty() {
            dst.record.check_queue(self)?;
            return self.barrier(deps);
        }
        let deps = Event::raw_list(deps);
        self.submit_using(&[(&dst.record, Use::Write)], || {
            // SAFETY: as in `copy`.
            unsafe {
                self.inner
                    .fill(dst.as_ptr(), pattern, dst.byte_len(), &deps)
            }
        })
    }

    /// Hints that `range` is about to be used on the device (`prefetch`).
    pub fn prefetch<T: Pod>(&self, range: &impl AsUsmRange<T>, deps: &[&Event]) -> Result<Event> {
        let range = range.usm_range();
        let deps = Event::raw_list(deps);
        self.submit_using(&[(&range.record, Use::Read)], || {
            // SAFETY: as in `copy`; a prefetch changes no byte.
            unsafe { self.inner.prefetch(range.as_ptr(), range.byte_len(), &deps) }
        })
    }

    /// Copies host data into `dst` and waits for the copy.
    pub fn write<T: Pod>(&self, dst: &impl AsUsmRange<T>, src: &[T]) -> Result<()> {
        let dst = dst.usm_range();
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "write of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let event = self.submit_using(&[(&dst.record, Use::Write)], || {
            // SAFETY: `src` is borrowed until we return, and we return only after the copy
            // completed (or failed); `dst` as in `copy`.
            unsafe {
                self.inner.memcpy(
                    dst.as_ptr(),
                    src.as_ptr() as usize as u64,
                    dst.byte_len(),
                    &[],
                )
            }
        })?;
        wait_or_block(&event)
    }

    /// Copies `src` into host memory and waits for the copy.
    pub fn read<T: Pod>(&self, src: &impl AsUsmRange<T>, dst: &mut [T]) -> Result<()> {
        let src = src.usm_range();
        if src.len() != dst.len() {
            return Err(Error::invalid(format!(
                "read of {} elements into {}",
                src.len(),
                dst.len()
            )));
        }
        let dst_addr = dst.as_mut_ptr() as usize as u64;
        let event = self.submit_using(&[(&src.record, Use::Read)], || {
            // SAFETY: as in `write`, with `dst` mutably borrowed until the copy completed.
            unsafe {
                self.inner
                    .memcpy(dst_addr, src.as_ptr(), src.byte_len(), &[])
            }
        })?;
        wait_or_block(&event)
    }

    /// Reads `src` into a new vector (waits).
    pub fn to_vec<T: Pod>(&self, src: &impl AsUsmRange<T>) -> Result<Vec<T>> {
        let src = src.usm_range();
        let mut out = vec![T::zeroed(); src.len()];
        self.read(&src, &mut out)?;
        Ok(out)
    }

    /// Copies `size` bytes between raw addresses.
    ///
    /// # Safety
    /// Both ranges must stay valid for `size` bytes until the returned event completes, and
    /// nothing else may access `dst` meanwhile.
    pub unsafe fn memcpy_raw(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        deps: &[&Event],
    ) -> Result<Event> {
        // SAFETY: forwarded contract.
        let raw = unsafe { self.inner.memcpy(dst, src, size, &Event::raw_list(deps))? };
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// Runs `task` on a host thread once `deps` completed (`host_task`).
    pub fn host_task(
        &self,
        deps: &[&Event],
        task: impl FnOnce() + Send + 'static,
    ) -> Result<Event> {
        let raw = self
            .inner
            .host_task(Box::new(task), &Event::raw_list(deps))?;
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// Runs a kernel over `range` after `deps`: a [`macro@crate::kernel`] function's launch
    /// (every device with native CPU, CUDA or OpenCL), or a closure over [`Item`]s (the native
    /// CPU device: `ext_sycl_rs_closure_kernels`).
    ///
    /// A `#[sycl::kernel]` launch checks its arguments: each slice's memory must be reachable
    /// from this queue and admit the use (read for `&[T]`, write for `&mut [T]`, under the
    /// rules of spec/soundness.md), and a `&mut [T]` argument must not overlap another slice
    /// argument (`Errc::Invalid`). Kernels that use work-groups need an nd-range
    /// ([`Range::with_local`]), otherwise `Errc::NdRange`. A failed bounds check or division
    /// in the kernel makes the returned event's wait report `Errc::Kernel`, as does a panic
    /// in a closure kernel.
    ///
    /// ```
    /// use sycl::{Device, Queue, Range};
    /// let dev = Device::native_cpu();
    /// let q = Queue::in_order(&dev).unwrap();
    /// let out = sycl::malloc_shared::<u32>(100, &q).unwrap();
    /// let view = out.view().unwrap();
    /// q.parallel_for(Range::d1(100), &[], move |item: sycl::Item| view.set(item.get(0), item.get(0) as u32 * 2))
    ///     .unwrap()
    ///     .wait()
    ///     .unwrap();
    /// assert_eq!(out.as_slice().unwrap()[42], 84);
    /// ```
    pub fn parallel_for(
        &self,
        range: Range,
        deps: &[&Event],
        kernel: impl crate::KernelFunctor,
    ) -> Result<Event> {
        kernel.submit(self, range, deps)
    }

    /// A closure kernel: every work-item of `range` on all cores.
    pub(crate) fn parallel_for_closure<F>(
        &self,
        range: Range,
        deps: &[&Event],
        kernel: F,
    ) -> Result<Event>
    where
        F: Fn(Item) + Send + Sync + 'static,
    {
        self.device.require(
            Aspect::ExtSyclRsClosureKernels,
            "parallel_for with a Rust closure",
        )?;
        let launch = range.inner;
        launch.validate(self.device.max_work_group_size())?;
        let chunked: sycl_backend::ClosureKernel =
            Arc::new(move |chunk: std::ops::Range<usize>| {
                for linear in chunk {
                    kernel(Item::from_linear(linear, &launch));
                }
            });
        let raw = self
            .inner
            .parallel_for_closure(launch, chunked, &Event::raw_list(deps))?;
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// Launches a kernel of a bundle over `range` with `args`. The kernel sees exactly
    /// `range` on every backend (without a work-group size, the backend picks one that
    /// divides it).
    ///
    /// The runtime checks what it can: the platform, the range, the argument count and sizes
    /// where the driver reports them (`Errc::KernelArgument`), that every USM argument's
    /// memory is reachable from this queue and admits a write now (no host borrow, a
    /// read-write mapping), and it keeps that memory alive until the kernel completed. It
    /// cannot see what the kernel does.
    ///
    /// # Safety
    /// The kernel is compiled source the runtime cannot inspect, so the caller guarantees:
    /// - `args` match the kernel's parameters in order, count and type (a scalar's bytes are
    ///   a valid value of the parameter's type; a USM argument is passed to a pointer
    ///   parameter, a local argument to local memory);
    /// - the kernel reads and writes only inside the USM ranges passed to it (from the
    ///   range's first element to its last), never through a read-only mapping's range, and
    ///   only memory of its own device or memory that device can reach;
    /// - no other command, view or process writes memory the kernel reads, or accesses memory
    ///   the kernel writes, while it runs, unless the program accepts unspecified values
    ///   there (a data race on the device);
    /// - the kernel terminates, and it indexes only work-items of `range`.
    ///
    /// Being `unsafe`, a launch needs an `unsafe` block and a reason:
    /// ```compile_fail,E0133
    /// fn go(q: &sycl::Queue, k: &sycl::Kernel) -> sycl::Result<sycl::Event> {
    ///     q.launch(k, sycl::Range::d1(1), &[], &[])
    /// }
    /// ```
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        range: Range,
        args: &[KernelArg],
        deps: &[&Event],
    ) -> Result<Event> {
        if kernel.context.platform() != self.context.platform() {
            return Err(Error::new(
                Errc::Invalid,
                "the kernel was built for another platform than this queue's",
            ));
        }
        range.inner.validate(self.device.max_work_group_size())?;
        // The argument count is the backend's to check: local-memory arguments are kernel
        // parameters in OpenCL but the dynamic shared-memory size in CUDA.
        let mut records = Vec::new();
        let raw_args: Vec<sycl_backend::KernelArg<'_>> = args
            .iter()
            .map(|a| match &a.0 {
                ArgInner::Usm { ptr, record } => {
                    records.push(record);
                    sycl_backend::KernelArg::Pointer(*ptr)
                }
                ArgInner::Scalar(bytes) => sycl_backend::KernelArg::Scalar(bytes),
                ArgInner::Local(n) => sycl_backend::KernelArg::Local(*n),
            })
            .collect();
        let uses: Vec<(&Arc<MemoryRecord>, Use)> =
            records.iter().map(|r| (*r, Use::Write)).collect();
        let deps = Event::raw_list(deps);
        self.submit_using(&uses, || {
            // SAFETY: every pointer argument is the start of a live range whose record frees
            // nothing before this command completed; what the kernel does with the arguments is
            // this function's caller's contract (# Safety).
            unsafe {
                self.inner
                    .launch(&kernel.inner, range.inner, &raw_args, &deps)
            }
        })
    }

    /// An event that completes when `deps` (and, in order, all earlier commands) completed
    /// (`ext_oneapi_submit_barrier`).
    pub fn barrier(&self, deps: &[&Event]) -> Result<Event> {
        let raw = self.inner.barrier(&Event::raw_list(deps))?;
        Ok(Event::from_raw(raw, self.context.clone()))
    }

    /// `enqueue_signal_event`: `event` (a standalone event) completes when the queue reaches
    /// this point.
    ///
    /// Errors: `Errc::Invalid` when the event belongs to another context.
    pub fn enqueue_signal_event(&self, event: &Event) -> Result<()> {
        if event.context.platform() != self.context.platform() {
            return Err(Error::new(
                Errc::Invalid,
                "enqueue_signal_event: the event belongs to another platform",
            ));
        }
        self.inner.enqueue_signal_event(&event.inner)
    }

    /// `enqueue_wait_event`: later commands wait for `event` (of any context).
    pub fn enqueue_wait_event(&self, event: &Event) -> Result<()> {
        self.inner
            .enqueue_wait_events(std::slice::from_ref(&event.inner))
    }

    /// `enqueue_wait_events`.
    pub fn enqueue_wait_events(&self, events: &[&Event]) -> Result<()> {
        self.inner.enqueue_wait_events(&Event::raw_list(events))
    }

    /// Blocks until every command submitted so far completed.
    pub fn wait(&self) -> Result<()> {
        self.inner.wait()
    }
}

/// Waits for `event` and, if the wait fails, still blocks until the command can no longer
/// touch borrowed host memory.
fn wait_or_block(event: &Event) -> Result<()> {
    match event.wait() {
        Ok(()) => Ok(()),
        Err(err) => {
            // The command failed; make sure it is over before the caller's borrow ends.
            while !matches!(
                event.status(),
                Ok(sycl_backend::EventStatus::Complete) | Err(_)
            ) {
                std::thread::yield_now();
            }
            Err(err)
        }
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("device", &self.device.name())
            .field("backend", &self.backend())
            .field("properties", &self.properties())
            .finish()
    }
}
