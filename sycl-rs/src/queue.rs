//! `sycl::queue`: commands, dependencies, waits.
#![allow(unsafe_code)]

use std::fmt;
use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{Aspect, QueueProperties};

use crate::kernel::{ArgInner, Item, Kernel, KernelArg, Range};
use crate::usm::{AsUsmRange, MemoryRecord};
use crate::{Context, Device, DeviceSelector, Errc, Error, Event, Result};

/// A queue of commands for one device.
///
/// Every command takes its dependencies (`deps`, events of any queue or backend) and returns
/// an [`Event`]. `Queue` is `Send + Sync`: submitting from many threads is safe.
///
/// ```
/// use sycl::{Queue, Range, Device};
/// let q = Queue::in_order(&Device::default_device().unwrap()).unwrap();
/// let data = sycl::malloc_shared::<f32>(1000, &q).unwrap();
/// q.fill(&data, 1.5f32, &[]).unwrap();
/// q.wait().unwrap();
/// assert!(data.as_slice().unwrap().iter().all(|&x| x == 1.5));
/// ```
#[derive(Clone)]
pub struct Queue {
    inner: Arc<dyn sycl_backend::Queue>,
    context: Context,
    device: Device,
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

    fn finish(&self, raw: Arc<dyn sycl_backend::Event>, memory: &[&Arc<MemoryRecord>]) -> Event {
        for record in memory {
            record.track(&raw);
        }
        Event::from_raw(raw, self.context.clone())
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
        src.record.check_queue(self)?;
        dst.record.check_queue(self)?;
        // SAFETY: both ranges are inside live records (bounds checked when the ranges were
        // made) that `finish` keeps alive until the event completes.
        let raw = unsafe {
            self.inner.memcpy(
                dst.as_ptr(),
                src.as_ptr(),
                src.byte_len(),
                &Event::raw_list(deps),
            )?
        };
        Ok(self.finish(raw, &[&src.record, &dst.record]))
    }

    /// Sets every byte of `dst` to `value` (`memset`).
    pub fn memset<T: Pod>(
        &self,
        dst: &impl AsUsmRange<T>,
        value: u8,
        deps: &[&Event],
    ) -> Result<Event> {
        let dst = dst.usm_range();
        dst.record.check_queue(self)?;
        // SAFETY: as in `copy`.
        let raw = unsafe {
            self.inner.fill(
                dst.as_ptr(),
                &[value],
                dst.byte_len(),
                &Event::raw_list(deps),
            )?
        };
        Ok(self.finish(raw, &[&dst.record]))
    }

    /// Writes `value` into every element of `dst` (`fill`).
    pub fn fill<T: Pod>(
        &self,
        dst: &impl AsUsmRange<T>,
        value: T,
        deps: &[&Event],
    ) -> Result<Event> {
        let dst = dst.usm_range();
        dst.record.check_queue(self)?;
        let pattern = bytemuck::bytes_of(&value);
        if pattern.is_empty() {
            return self.barrier(deps);
        }
        // SAFETY: as in `copy`.
        let raw = unsafe {
            self.inner.fill(
                dst.as_ptr(),
                pattern,
                dst.byte_len(),
                &Event::raw_list(deps),
            )?
        };
        Ok(self.finish(raw, &[&dst.record]))
    }

    /// Hints that `range` is about to be used on the device (`prefetch`).
    pub fn prefetch<T: Pod>(&self, range: &impl AsUsmRange<T>, deps: &[&Event]) -> Result<Event> {
        let range = range.usm_range();
        range.record.check_queue(self)?;
        // SAFETY: as in `copy`.
        let raw = unsafe {
            self.inner
                .prefetch(range.as_ptr(), range.byte_len(), &Event::raw_list(deps))?
        };
        Ok(self.finish(raw, &[&range.record]))
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
        dst.record.check_queue(self)?;
        // SAFETY: `src` is borrowed until we return, and we return only after the copy
        // completed (or failed); `dst` as in `copy`.
        let raw = unsafe {
            self.inner.memcpy(
                dst.as_ptr(),
                src.as_ptr() as usize as u64,
                dst.byte_len(),
                &[],
            )?
        };
        let event = self.finish(raw, &[&dst.record]);
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
        src.record.check_queue(self)?;
        // SAFETY: as in `write`, with `dst` mutably borrowed until the copy completed.
        let raw = unsafe {
            self.inner.memcpy(
                dst.as_mut_ptr() as usize as u64,
                src.as_ptr(),
                src.byte_len(),
                &[],
            )?
        };
        let event = self.finish(raw, &[&src.record]);
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

    /// Runs `kernel` for every work-item of `range` on all cores (closure kernels:
    /// `ext_sycl_rs_closure_kernels`, the native CPU device). Panics inside the closure become
    /// an `Errc::Kernel` error of the returned event.
    ///
    /// ```
    /// use sycl::{Device, DeviceSelector, Queue, Range};
    /// let dev = DeviceSelector::filter("native_cpu:*").unwrap().select().unwrap();
    /// let q = Queue::in_order(&dev).unwrap();
    /// let out = sycl::malloc_shared::<u32>(100, &q).unwrap();
    /// let view = out.view().unwrap();
    /// q.parallel_for(Range::d1(100), &[], move |item| view.set(item.get(0), item.get(0) as u32 * 2))
    ///     .unwrap()
    ///     .wait()
    ///     .unwrap();
    /// assert_eq!(out.as_slice().unwrap()[42], 84);
    /// ```
    pub fn parallel_for<F>(&self, range: Range, deps: &[&Event], kernel: F) -> Result<Event>
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

    /// Launches a kernel of a bundle over `range` with `args`.
    pub fn launch(
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
        for r in &records {
            r.check_queue(self)?;
        }
        // SAFETY: every pointer argument is the start of a live range whose record `finish`
        // keeps alive until the kernel completes; what the kernel does with it is the kernel's
        // contract, as in SYCL.
        let raw = unsafe {
            self.inner.launch(
                &kernel.inner,
                range.inner,
                &raw_args,
                &Event::raw_list(deps),
            )?
        };
        Ok(self.finish(raw, &records))
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
