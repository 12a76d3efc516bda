//! Unified shared memory: typed owners that free on drop, ranges, views and host borrows.
//!
//! Every piece of memory sycl-rs hands out (a USM allocation, memory opened through IPC, a
//! virtual-memory mapping, foreign memory another library owns) is a [`MemoryRecord`] behind an `Arc`, shared by its owner and by
//! every range, view and kernel argument made from it. Commands register their event with the
//! record; the record is released (freed, closed, unmapped) only when its last reference goes,
//! after those commands. Who may touch the memory when is decided by the record
//! ([`record`], spec/soundness.md).

mod access;
mod deferred;
mod foreign;
pub(crate) mod record;

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{AccessMode, Aspect, PointerInfo, UsmKind};

pub use access::{HostSlice, HostSliceMut, UsmView};
pub use foreign::{ForeignKind, ForeignMemory, ForeignReady};
pub(crate) use record::{Backing, MemoryRecord, RecordSpec, Release, Use};

use crate::{Context, Device, Errc, Error, Queue, Result};

/// A typed USM allocation that frees itself on drop (`malloc_device`, `malloc_host`,
/// `malloc_shared`), or memory opened with [`crate::ipc::memory::open`], which closes on drop.
///
/// ```
/// # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
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

/// `size_of::<T>()`, or `Errc::Invalid` for a zero-sized `T`: every typed piece of USM
/// (`Usm`, `UsmRange`, views, opened and foreign memory) is made through here, so none of them
/// exists for a zero-sized element type. Such memory would hold no byte, its address could be
/// 0 (an empty allocation), and a slice over it would be a reference to address 0; refusing it
/// everywhere is simpler for callers than a dangling address that no device command could use.
pub(crate) fn element_size<T>() -> Result<usize> {
    match std::mem::size_of::<T>() {
        0 => Err(Error::invalid(format!(
            "{} is a zero-sized type: USM elements must occupy at least one byte",
            std::any::type_name::<T>()
        ))),
        n => Ok(n),
    }
}

impl<T: Pod> Usm<T> {
    /// `len` elements of `T` over `record` (refused for a zero-sized `T`: see
    /// [`element_size`]).
    pub(crate) fn from_record(record: Arc<MemoryRecord>, len: usize) -> Result<Self> {
        element_size::<T>()?;
        Ok(Usm {
            record,
            len,
            _marker: PhantomData,
        })
    }

    /// Allocates `count` elements of `kind` USM on `device` in `context`.
    ///
    /// Errors: `Errc::Invalid` for a zero-sized `T` (USM of `()` holds nothing a device could
    /// address), a device outside `context`, or `UsmKind::Unknown`;
    /// `Errc::FeatureNotSupported` when the device lacks the kind's aspect;
    /// `Errc::MemoryAllocation` when the size overflows or exceeds `max_mem_alloc_size`.
    ///
    /// ```
    /// # std::env::remove_var("ONEAPI_DEVICE_SELECTOR");
    /// let q = sycl::Queue::new(&sycl::Device::native_cpu()).unwrap();
    /// let err = sycl::malloc_shared::<()>(10, &q).unwrap_err();
    /// assert_eq!(err.code(), sycl::Errc::Invalid);
    /// ```
    pub fn alloc(
        kind: UsmKind,
        count: usize,
        device: &Device,
        context: &Context,
    ) -> Result<Usm<T>> {
        let element = element_size::<T>()?;
        context.check_device(device)?;
        let (aspect, what) = match kind {
            UsmKind::Device => (Aspect::UsmDeviceAllocations, "malloc_device"),
            UsmKind::Host => (Aspect::UsmHostAllocations, "malloc_host"),
            UsmKind::Shared => (Aspect::UsmSharedAllocations, "malloc_shared"),
            UsmKind::Unknown => return Err(Error::invalid("cannot allocate USM of kind unknown")),
        };
        device.require(aspect, what)?;
        let bytes = count.checked_mul(element).ok_or_else(|| {
            Error::new(
                Errc::MemoryAllocation,
                format!("{count} elements overflow the address space"),
            )
        })?;
        let record_device = (kind != UsmKind::Host).then(|| device.clone());
        let spec = |ptr, size, release| RecordSpec {
            context: context.clone(),
            ptr,
            size,
            kind,
            device: record_device.clone(),
            release,
            shared: false,
            mode: AccessMode::ReadWrite,
            anchor: None,
            backing: None,
        };
        if bytes == 0 {
            return Usm::from_record(MemoryRecord::new(spec(0, 0, Release::Nothing)), count);
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
        Usm::from_record(MemoryRecord::new(spec(ptr, bytes, Release::Free)), count)
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

    /// Borrows the elements on the host (`&[T]` through the returned guard): waits for the
    /// commands that write the memory first, and while the guard lives, commands that would
    /// write the memory are refused. Like a SYCL host accessor, with refusals instead of
    /// blocking.
    ///
    /// Errors (`Errc::Invalid`): memory the host cannot access; memory shared with other
    /// processes (exported or opened through IPC: they may write it at any time, so use a
    /// [`UsmView`] or queue copies); live views of the memory; a `HostSliceMut` of it.
    pub fn as_slice(&self) -> Result<HostSlice<'_, T>> {
        HostSlice::new(&self.record, self.len)
    }

    /// Borrows the elements mutably on the host (`&mut [T]` through the returned guard):
    /// waits for every command that uses the memory, and while the guard lives, every command
    /// that uses the memory is refused. Errors as [`Usm::as_slice`], plus any other host
    /// borrow of it.
    pub fn as_mut_slice(&mut self) -> Result<HostSliceMut<'_, T>> {
        HostSliceMut::new(&self.record, self.len)
    }

    /// A shareable element view for closure kernels and host threads (atomic accesses);
    /// host-accessible memory only. Errors (`Errc::Invalid`): memory the host cannot access,
    /// a live host borrow of it.
    pub fn view(&self) -> Result<UsmView<T>> {
        UsmView::new(self.record.clone(), self.record.ptr, self.len)
    }

    /// Whether commands may only read this memory (foreign memory lent read-only, see
    /// [`Usm::from_foreign`]): commands that would write it are refused.
    pub fn is_read_only(&self) -> bool {
        self.record.is_read_only()
    }

    /// Whether it is foreign memory ([`Usm::from_foreign`]): another library owns it.
    pub fn is_foreign(&self) -> bool {
        self.record.release == Release::Foreign
    }

    /// Whether another process may map this memory (it was exported with
    /// [`crate::ipc::memory::get`], or opened from such an export). Such memory has no host
    /// borrows, only views and queue copies.
    pub fn is_shared_with_other_processes(&self) -> bool {
        self.record.is_shared()
    }

    /// Frees now and reports errors (dropping frees too, logging errors).
    ///
    /// Errors: `Errc::Invalid` while other references to the memory are alive (ranges, views,
    /// kernel arguments): the memory is then freed when the last of them goes, not now.
    pub fn free(self) -> Result<()> {
        MemoryRecord::release_explicitly(self.record, "usm::free")
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
    /// `len` elements of `T` at the start of `record` (refused for a zero-sized `T`).
    pub(crate) fn from_record(record: Arc<MemoryRecord>, len: usize) -> Result<Self> {
        element_size::<T>()?;
        Ok(UsmRange {
            record,
            offset: 0,
            len,
            _marker: PhantomData,
        })
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

    /// `get_pointer_type` of its allocation: device, host or shared.
    pub fn kind(&self) -> UsmKind {
        self.record.kind
    }

    /// Whether commands may only read it (see [`Usm::is_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.record.is_read_only()
    }

    /// A view for closure kernels and host threads over this range (atomic accesses);
    /// host-accessible memory only. Errors as [`Usm::view`].
    pub fn view(&self) -> Result<UsmView<T>> {
        UsmView::new(self.record.clone(), self.as_ptr(), self.len)
    }

    /// The same bytes seen as another element type (length rounded down).
    ///
    /// Errors (`Errc::Invalid`): a zero-sized `U`, a range not aligned for `U`.
    pub fn cast<U: Pod>(&self) -> Result<UsmRange<U>> {
        let size_u = element_size::<U>()?;
        let byte_off = self.offset * std::mem::size_of::<T>();
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
