//! Unified shared memory: typed owners that free on drop, ranges and views.
//!
//! Every piece of memory sycl-rs hands out (a USM allocation, memory opened through IPC, a
//! virtual-memory mapping) is a [`MemoryRecord`] behind an `Arc`. Commands that use memory
//! clone the `Arc` and register their event with it, and the record waits for those events
//! before it frees, closes or unmaps: dropping an owner while the device still uses it is safe.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytemuck::Pod;
use parking_lot::Mutex;
use sycl_backend::{Aspect, EventStatus, PointerInfo, UsmKind};

use crate::{Context, Device, Errc, Error, Queue, Result};

/// What happens to a record's memory when its last owner goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// `usm_free`.
    Free,
    /// `ipc_close_mem`.
    IpcClose,
    /// `unmap` of a virtual-memory mapping.
    Unmap,
    /// Nothing (zero-sized).
    Nothing,
}

pub(crate) struct MemoryRecord {
    pub(crate) context: Context,
    pub(crate) ptr: u64,
    pub(crate) size: usize,
    pub(crate) kind: UsmKind,
    pub(crate) device: Option<Device>,
    pub(crate) host_accessible: bool,
    pub(crate) release: Release,
    released: AtomicBool,
    pending: Mutex<Vec<Arc<dyn sycl_backend::Event>>>,
    /// Keeps what the memory depends on alive (the physical memory of a mapping).
    _anchor: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl MemoryRecord {
    pub(crate) fn new(
        context: Context,
        ptr: u64,
        size: usize,
        kind: UsmKind,
        device: Option<Device>,
        release: Release,
        anchor: Option<Box<dyn std::any::Any + Send + Sync>>,
    ) -> Arc<MemoryRecord> {
        let host_accessible = match kind {
            UsmKind::Host | UsmKind::Shared => true,
            UsmKind::Device | UsmKind::Unknown => device.as_ref().is_some_and(Device::is_cpu),
        };
        Arc::new(MemoryRecord {
            context,
            ptr,
            size,
            kind,
            device,
            host_accessible,
            release,
            released: AtomicBool::new(false),
            pending: Mutex::new(Vec::new()),
            _anchor: anchor,
        })
    }

    /// Remembers that `event` uses this memory.
    pub(crate) fn track(&self, event: &Arc<dyn sycl_backend::Event>) {
        let mut pending = self.pending.lock();
        if pending.len() >= 8 {
            pending.retain(|e| !matches!(e.status(), Ok(EventStatus::Complete)));
        }
        pending.push(event.clone());
    }

    /// Waits for every command that uses this memory.
    pub(crate) fn wait_pending(&self) {
        let pending = std::mem::take(&mut *self.pending.lock());
        for event in pending {
            // A failed command is reported by its own event; here it only must have ended.
            if let Err(err) = event.wait() {
                log::debug!(
                    "sycl-rs: a command using memory at {:#x} failed: {err}",
                    self.ptr
                );
            }
        }
    }

    /// Releases the memory once (explicit `free`/`close`/`unmap`, or drop).
    pub(crate) fn release_now(&self) -> Result<()> {
        if self.released.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.wait_pending();
        let ctx = self.context.raw();
        match self.release {
            Release::Nothing => Ok(()),
            // SAFETY: the record owns `ptr`, released it at most once (the swap above), and
            // every command that used it has completed (wait_pending).
            Release::Free => unsafe { ctx.usm_free(self.ptr) },
            // SAFETY: as above; `ptr` is what `ipc_open_mem` returned.
            Release::IpcClose => unsafe { ctx.ipc_close_mem(self.ptr) },
            // SAFETY: as above; `[ptr, ptr+size)` is exactly one mapping made by `map_physical`.
            Release::Unmap => unsafe { ctx.unmap(self.ptr, self.size) },
        }
    }

    pub(crate) fn check_queue(&self, queue: &Queue) -> Result<()> {
        let same_platform = self.context.platform() == queue.context().platform();
        if same_platform || self.host_accessible {
            Ok(())
        } else {
            Err(Error::new(
                Errc::Invalid,
                format!(
                    "memory of the {} backend is not accessible from a {} queue",
                    self.context.backend(),
                    queue.backend()
                ),
            ))
        }
    }
}

impl Drop for MemoryRecord {
    fn drop(&mut self) {
        if let Err(err) = self.release_now() {
            log::warn!("sycl-rs: releasing memory at {:#x} failed: {err}", self.ptr);
        }
    }
}

/// A typed USM allocation that frees itself on drop (`malloc_device`, `malloc_host`,
/// `malloc_shared`), or memory opened with [`crate::ipc::memory::open`], which closes on drop.
///
/// ```
/// let q = sycl::Queue::new(&sycl::Device::default_device().unwrap()).unwrap();
/// let buf = sycl::malloc_device::<u32>(1024, &q).unwrap();
/// q.fill(&buf, 7u32, &[]).unwrap().wait().unwrap();
/// assert_eq!(q.to_vec(&buf).unwrap(), vec![7u32; 1024]);
/// ```
pub struct Usm<T> {
    pub(crate) record: Arc<MemoryRecord>,
    len: usize,
    _marker: PhantomData<T>,
}

impl<T: Pod> Usm<T> {
    pub(crate) fn from_record(record: Arc<MemoryRecord>, len: usize) -> Self {
        Usm {
            record,
            len,
            _marker: PhantomData,
        }
    }

    /// Allocates `count` elements of `kind` USM on `device` in `context`.
    pub fn alloc(
        kind: UsmKind,
        count: usize,
        device: &Device,
        context: &Context,
    ) -> Result<Usm<T>> {
        context.check_device(device)?;
        let (aspect, what) = match kind {
            UsmKind::Device => (Aspect::UsmDeviceAllocations, "malloc_device"),
            UsmKind::Host => (Aspect::UsmHostAllocations, "malloc_host"),
            UsmKind::Shared => (Aspect::UsmSharedAllocations, "malloc_shared"),
            UsmKind::Unknown => return Err(Error::invalid("cannot allocate USM of kind unknown")),
        };
        device.require(aspect, what)?;
        let bytes = count.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::new(
                Errc::MemoryAllocation,
                format!("{count} elements overflow the address space"),
            )
        })?;
        let record_device = (kind != UsmKind::Host).then(|| device.clone());
        if bytes == 0 {
            return Ok(Usm::from_record(
                MemoryRecord::new(
                    context.clone(),
                    0,
                    0,
                    kind,
                    record_device,
                    Release::Nothing,
                    None,
                ),
                count,
            ));
        }
        if bytes as u64 > device.max_mem_alloc_size() && device.max_mem_alloc_size() > 0 {
            return Err(Error::new(
                Errc::MemoryAllocation,
                format!(
                    "{bytes} bytes exceed the device's max_mem_alloc_size {}",
                    device.max_mem_alloc_size()
                ),
            ));
        }
        let align = std::mem::align_of::<T>().max(64);
        let raw_device = (kind != UsmKind::Host).then_some(&device.inner);
        let ptr = context.raw().usm_alloc(kind, raw_device, bytes, align)?;
        Ok(Usm::from_record(
            MemoryRecord::new(
                context.clone(),
                ptr,
                bytes,
                kind,
                record_device,
                Release::Free,
                None,
            ),
            count,
        ))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The device address of the first element (0 for an empty allocation).
    pub fn as_ptr(&self) -> u64 {
        self.record.ptr
    }

    /// `get_pointer_type`: device, host or shared.
    pub fn kind(&self) -> UsmKind {
        self.record.kind
    }

    /// The device it was allocated on (`None` for host USM).
    pub fn device(&self) -> Option<&Device> {
        self.record.device.as_ref()
    }

    /// Its context.
    pub fn context(&self) -> &Context {
        &self.record.context
    }

    /// Whether the host may read and write it directly ([`Usm::as_slice`]).
    pub fn is_host_accessible(&self) -> bool {
        self.record.host_accessible
    }

    /// A sub-range of elements; `Errc::Invalid` when out of bounds.
    pub fn range(&self, range: impl RangeBounds<usize>) -> Result<UsmRange<T>> {
        self.full().sub(range)
    }

    /// The whole allocation as a range.
    pub fn full(&self) -> UsmRange<T> {
        UsmRange {
            record: self.record.clone(),
            offset: 0,
            len: self.len,
            _marker: PhantomData,
        }
    }

    /// The elements, read on the host. Only for host-accessible memory; wait for device work
    /// that writes it first (values read while a device writes are unspecified).
    pub fn as_slice(&self) -> Result<&[T]> {
        self.host_check()?;
        self.record.wait_pending();
        if self.len == 0 {
            return Ok(&[]);
        }
        // SAFETY: the record owns `len * size_of::<T>()` host-accessible bytes at `ptr`,
        // aligned to at least align_of::<T>() (allocated with that alignment), alive while
        // `self` is borrowed; T is Pod so every bit pattern is a valid T.
        Ok(unsafe { std::slice::from_raw_parts(self.record.ptr as usize as *const T, self.len) })
    }

    /// The elements, written on the host. As [`Usm::as_slice`].
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.host_check()?;
        self.record.wait_pending();
        if self.len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in `as_slice`; `&mut self` makes this the only host borrow, and pending
        // device commands finished above.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.record.ptr as usize as *mut T, self.len) })
    }

    /// A shareable handle for closure kernels (`parallel_for`); host-accessible memory only.
    pub fn view(&self) -> Result<UsmView<T>> {
        self.host_check()?;
        Ok(UsmView {
            record: self.record.clone(),
            ptr: self.record.ptr as usize as *mut T,
            len: self.len,
        })
    }

    fn host_check(&self) -> Result<()> {
        if self.record.host_accessible {
            Ok(())
        } else {
            Err(Error::new(
                Errc::Invalid,
                format!(
                    "{} USM on a {} device is not accessible from the host",
                    self.record.kind,
                    self.record.context.backend()
                ),
            ))
        }
    }

    /// Frees now and reports errors (dropping frees too, logging errors).
    pub fn free(self) -> Result<()> {
        self.record.release_now()
    }
}

impl<T> std::fmt::Debug for Usm<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Usm")
            .field("ptr", &format_args!("{:#x}", self.record.ptr))
            .field("len", &self.len)
            .field("kind", &self.record.kind)
            .finish()
    }
}

/// A range of elements of some memory, usable in commands; keeps the memory alive.
pub struct UsmRange<T> {
    pub(crate) record: Arc<MemoryRecord>,
    offset: usize,
    len: usize,
    _marker: PhantomData<T>,
}

impl<T> Clone for UsmRange<T> {
    fn clone(&self) -> Self {
        UsmRange {
            record: self.record.clone(),
            offset: self.offset,
            len: self.len,
            _marker: PhantomData,
        }
    }
}

impl<T: Pod> UsmRange<T> {
    pub(crate) fn from_record(record: Arc<MemoryRecord>, len: usize) -> Self {
        UsmRange {
            record,
            offset: 0,
            len,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Address of its first element.
    pub fn as_ptr(&self) -> u64 {
        self.record.ptr + (self.offset * std::mem::size_of::<T>()) as u64
    }

    /// A sub-range (indices relative to this range); `Errc::Invalid` when out of bounds.
    pub fn sub(&self, range: impl RangeBounds<usize>) -> Result<UsmRange<T>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        if start > end || end > self.len {
            return Err(Error::invalid(format!(
                "range {start}..{end} is out of bounds of {} elements",
                self.len
            )));
        }
        Ok(UsmRange {
            record: self.record.clone(),
            offset: self.offset + start,
            len: end - start,
            _marker: PhantomData,
        })
    }

    /// Whether the host may access it directly.
    pub fn is_host_accessible(&self) -> bool {
        self.record.host_accessible
    }

    /// A view for closure kernels over this range; host-accessible memory only.
    pub fn view(&self) -> Result<UsmView<T>> {
        if !self.record.host_accessible {
            return Err(Error::new(
                Errc::Invalid,
                format!(
                    "{} USM on a {} device is not accessible from the host",
                    self.record.kind,
                    self.record.context.backend()
                ),
            ));
        }
        Ok(UsmView {
            record: self.record.clone(),
            ptr: self.as_ptr() as usize as *mut T,
            len: self.len,
        })
    }

    /// The same bytes seen as another element type (length rounded down).
    pub fn cast<U: Pod>(&self) -> Result<UsmRange<U>> {
        let byte_off = self.offset * std::mem::size_of::<T>();
        let size_u = std::mem::size_of::<U>().max(1);
        if byte_off % size_u != 0
            || (self.record.ptr as usize + byte_off) % std::mem::align_of::<U>() != 0
        {
            return Err(Error::invalid(
                "the range is not aligned for the target element type",
            ));
        }
        Ok(UsmRange {
            record: self.record.clone(),
            offset: byte_off / size_u,
            len: self.byte_len() / size_u,
            _marker: PhantomData,
        })
    }
}

/// Anything that names a range of USM elements: `&Usm<T>`, `&UsmRange<T>`.
pub trait AsUsmRange<T> {
    /// The range.
    fn usm_range(&self) -> UsmRange<T>;
}

impl<T: Pod> AsUsmRange<T> for Usm<T> {
    fn usm_range(&self) -> UsmRange<T> {
        self.full()
    }
}

impl<T: Pod> AsUsmRange<T> for UsmRange<T> {
    fn usm_range(&self) -> UsmRange<T> {
        self.clone()
    }
}

/// Element access for closure kernels: cheap to clone, `Send + Sync`, bounds-checked, and it
/// keeps the memory alive. Work-items that write the same element race (unspecified value).
pub struct UsmView<T> {
    record: Arc<MemoryRecord>,
    ptr: *mut T,
    len: usize,
}

// SAFETY: the view only reads and writes Pod values in memory kept alive by `record`; sharing it
// between threads is what kernels do (as with SYCL accessors, the program orders conflicting
// writes).
unsafe impl<T: Pod + Send> Send for UsmView<T> {}
// SAFETY: see `Send`.
unsafe impl<T: Pod + Sync> Sync for UsmView<T> {}

impl<T> Clone for UsmView<T> {
    fn clone(&self) -> Self {
        UsmView {
            record: self.record.clone(),
            ptr: self.ptr,
            len: self.len,
        }
    }
}

impl<T: Pod> UsmView<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads element `i` (panics when out of bounds; inside a kernel that panic becomes an
    /// `Errc::Kernel` error of the command).
    #[inline]
    pub fn get(&self, i: usize) -> T {
        assert!(
            i < self.len,
            "index {i} out of bounds of {} elements",
            self.len
        );
        // SAFETY: `i < len`, the record keeps `len` host-accessible elements alive at `ptr`.
        unsafe { self.ptr.add(i).read() }
    }

    /// Writes element `i` (bounds-checked like [`UsmView::get`]).
    #[inline]
    pub fn set(&self, i: usize, value: T) {
        assert!(
            i < self.len,
            "index {i} out of bounds of {} elements",
            self.len
        );
        // SAFETY: as in `get`; Pod values have no drop glue, so overwriting is fine.
        unsafe { self.ptr.add(i).write(value) }
    }
}

/// `malloc_device<T>(count, queue)`.
pub fn malloc_device<T: Pod>(count: usize, queue: &Queue) -> Result<Usm<T>> {
    Usm::alloc(UsmKind::Device, count, queue.device(), queue.context())
}

/// `malloc_host<T>(count, queue)`.
pub fn malloc_host<T: Pod>(count: usize, queue: &Queue) -> Result<Usm<T>> {
    Usm::alloc(UsmKind::Host, count, queue.device(), queue.context())
}

/// `malloc_shared<T>(count, queue)`.
pub fn malloc_shared<T: Pod>(count: usize, queue: &Queue) -> Result<Usm<T>> {
    Usm::alloc(UsmKind::Shared, count, queue.device(), queue.context())
}

/// `get_pointer_type(ptr, ctx)`: `Unknown` for memory the context does not know.
pub fn get_pointer_type(ptr: u64, context: &Context) -> UsmKind {
    context.raw().usm_pointer_info(ptr).kind
}

/// `get_pointer_device(ptr, ctx)`: `Errc::Invalid` for host USM or unknown pointers.
pub fn get_pointer_device(ptr: u64, context: &Context) -> Result<Device> {
    let info: PointerInfo = context.raw().usm_pointer_info(ptr);
    match (info.kind, info.device_index) {
        (UsmKind::Unknown, _) => Err(Error::invalid(format!(
            "{ptr:#x} is not a USM pointer of this context"
        ))),
        (_, Some(i)) => context.devices().get(i).cloned().ok_or_else(|| {
            Error::new(
                Errc::Runtime,
                format!(
                    "backend named device {i} of a {}-device context",
                    context.devices().len()
                ),
            )
        }),
        (_, None) => Err(Error::invalid(format!(
            "{ptr:#x} is host USM, which belongs to no device"
        ))),
    }
}

impl<T> std::fmt::Debug for UsmRange<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsmRange")
            .field("base", &format_args!("{:#x}", self.record.ptr))
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl<T> std::fmt::Debug for UsmView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsmView")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
