//! Virtual memory (`sycl_ext_oneapi_virtual_mem`): reserve address ranges, create physical
//! memory, map it, set access modes.
//!
//! ```
//! use sycl::virtual_mem::*;
//! use sycl::{AccessMode, Context, Device, PhysicalMemProperties};
//! let dev = sycl::Device::native_cpu();
//! let ctx = Context::default_for(&dev).unwrap();
//! let gran = get_mem_granularity(&dev, &ctx, sycl::GranularityMode::Recommended).unwrap();
//! let phys = PhysicalMem::new(&dev, &ctx, gran, PhysicalMemProperties::default()).unwrap();
//! let range = VirtualRange::reserve(&ctx, gran, 0).unwrap();
//! let mapping = phys.map(&range, 0, gran, AccessMode::ReadWrite, 0).unwrap();
//! assert_eq!(mapping.access_mode().unwrap(), AccessMode::ReadWrite);
//! ```

use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{AccessMode, Aspect, GranularityMode, PhysicalMemProperties, UsmKind};

use crate::ipc::ExportSet;
use crate::usm::{Backing, MemoryRecord, RecordSpec, Release, UsmRange};
use crate::{Context, Device, Errc, Error, Result};

fn require_vm(context: &Context, what: &str) -> Result<()> {
    context
        .devices()
        .iter()
        .try_for_each(|d| d.require(Aspect::ExtOneapiVirtualMem, what))
}

/// `get_mem_granularity(device, context, mode)`.
pub fn get_mem_granularity(
    device: &Device,
    context: &Context,
    mode: GranularityMode,
) -> Result<usize> {
    context.check_device(device)?;
    device.require(Aspect::ExtOneapiVirtualMem, "get_mem_granularity")?;
    context.raw().mem_granularity(&device.inner, mode)
}

/// A reserved range of virtual addresses (`reserve_virtual_mem`), freed on drop
/// (`free_virtual_mem`) once every mapping in it is gone.
pub struct VirtualRange {
    inner: Arc<VirtualRangeShared>,
}

struct VirtualRangeShared {
    context: Context,
    ptr: u64,
    size: usize,
}

impl Drop for VirtualRangeShared {
    fn drop(&mut self) {
        if let Err(err) = self.context.raw().free_virtual_mem(self.ptr, self.size) {
            log::warn!(
                "sycl-rs: free_virtual_mem({:#x}, {}) failed: {err}",
                self.ptr,
                self.size
            );
        }
    }
}

impl VirtualRange {
    /// Reserves `size` bytes (a multiple of the granularity), at `start` if possible (0: any).
    ///
    /// Errors: `Errc::FeatureNotSupported` when a device of `context` lacks
    /// `ext_oneapi_virtual_mem`; `Errc::Invalid` for a size or start not aligned to the
    /// minimum granularity.
    pub fn reserve(context: &Context, size: usize, start: u64) -> Result<VirtualRange> {
        require_vm(context, "reserve_virtual_mem")?;
        if size == 0 {
            return Err(Error::invalid("cannot reserve 0 bytes"));
        }
        for d in context.devices() {
            let g = context
                .raw()
                .mem_granularity(&d.inner, GranularityMode::Minimum)?;
            if size % g != 0 || start % g as u64 != 0 {
                return Err(Error::invalid(format!(
                    "reserve_virtual_mem: size {size} and start {start:#x} must be multiples of the granularity {g}"
                )));
            }
        }
        let ptr = context.raw().reserve_virtual_mem(start, size)?;
        Ok(VirtualRange {
            inner: Arc::new(VirtualRangeShared {
                context: context.clone(),
                ptr,
                size,
            }),
        })
    }

    /// First address.
    pub fn as_ptr(&self) -> u64 {
        self.inner.ptr
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }
}

/// A physical memory object (`physical_mem`). Clones share the object; the last one releases
/// it. Mappings keep it alive.
#[derive(Clone)]
pub struct PhysicalMem {
    pub(crate) inner: Arc<dyn sycl_backend::PhysicalMem>,
    pub(crate) context: Context,
    pub(crate) device: Device,
    /// Its IPC exports, shared by the clones; revoked when the last clone goes.
    pub(crate) exports: Arc<ExportSet>,
}

impl PhysicalMem {
    /// `physical_mem(device, context, size, props)`: `size` a multiple of the granularity;
    /// `props.enable_ipc` makes it exportable with [`crate::ipc::physical_memory::get`].
    pub fn new(
        device: &Device,
        context: &Context,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<PhysicalMem> {
        context.check_device(device)?;
        device.require(Aspect::ExtOneapiVirtualMem, "physical_mem")?;
        if props.enable_ipc {
            device.require(
                Aspect::ExtOneapiIpcPhysicalMemory,
                "physical_mem with enable_ipc",
            )?;
        }
        let g = context
            .raw()
            .mem_granularity(&device.inner, GranularityMode::Minimum)?;
        if size == 0 || size % g != 0 {
            return Err(Error::invalid(format!(
                "physical_mem size {size} is not a positive multiple of the granularity {g}"
            )));
        }
        let inner = context
            .raw()
            .create_physical_mem(&device.inner, size, props)?;
        Ok(PhysicalMem::from_parts(inner, context, device))
    }

    pub(crate) fn from_parts(
        inner: Arc<dyn sycl_backend::PhysicalMem>,
        context: &Context,
        device: &Device,
    ) -> PhysicalMem {
        PhysicalMem {
            inner,
            context: context.clone(),
            device: device.clone(),
            exports: Arc::new(ExportSet::default()),
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size()
    }

    /// Whether it was made with `enable_ipc` (objects opened through IPC say true).
    pub fn ipc_enabled(&self) -> bool {
        self.inner.ipc_enabled()
    }

    /// Its device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Its context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Maps `size` bytes of this object, from `offset`, at `range_offset` inside `range`, with
    /// `mode`. The returned [`Mapping`] unmaps on drop.
    pub fn map(
        &self,
        range: &VirtualRange,
        range_offset: usize,
        size: usize,
        mode: AccessMode,
        offset: usize,
    ) -> Result<Mapping> {
        if range.inner.context.platform() != self.context.platform() {
            return Err(Error::new(
                Errc::Invalid,
                "the virtual range and the physical memory belong to different platforms",
            ));
        }
        let end = range_offset
            .checked_add(size)
            .ok_or_else(|| Error::invalid("mapping size overflows"))?;
        if size == 0 || end > range.size() {
            return Err(Error::invalid(format!(
                "mapping {range_offset}+{size} does not fit the {}-byte range",
                range.size()
            )));
        }
        let phys_end = offset
            .checked_add(size)
            .ok_or_else(|| Error::invalid("offset overflows"))?;
        if phys_end > self.size() {
            return Err(Error::invalid(format!(
                "mapping {offset}+{size} exceeds the {}-byte physical memory",
                self.size()
            )));
        }
        let ptr = range.as_ptr() + range_offset as u64;
        range
            .inner
            .context
            .raw()
            .map_physical(ptr, size, &self.inner, offset, mode)?;
        // The physical memory object names these bytes too: a second mapping of it is the
        // same memory at another address.
        let backing = Backing {
            object: Arc::as_ptr(&self.inner) as *const () as usize,
            offset: offset as u64,
        };
        let anchor: Box<dyn std::any::Any + Send + Sync> =
            Box::new((self.inner.clone(), range.inner.clone()));
        let record = MemoryRecord::new(RecordSpec {
            context: range.inner.context.clone(),
            ptr,
            size,
            kind: UsmKind::Device,
            device: Some(self.device.clone()),
            release: Release::Unmap,
            // Physical memory made with enable_ipc may be mapped by other processes too.
            shared: self.ipc_enabled(),
            mode,
            anchor: Some(anchor),
            backing: Some(backing),
        });
        Ok(Mapping {
            record,
            context: range.inner.context.clone(),
        })
    }
}

/// A mapped range of physical memory; usable as USM device memory; unmaps on drop.
pub struct Mapping {
    record: Arc<MemoryRecord>,
    context: Context,
}

impl Mapping {
    /// First address.
    pub fn as_ptr(&self) -> u64 {
        self.record.ptr
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.record.size
    }

    /// The mapping as a range of `T` for copies and kernels (its length rounded down to whole
    /// elements); `Errc::Invalid` for a zero-sized `T`, as everywhere in USM.
    pub fn as_range<T: Pod>(&self) -> Result<UsmRange<T>> {
        let element = crate::usm::element_size::<T>()?;
        UsmRange::from_record(self.record.clone(), self.record.size / element)
    }

    /// `set_access_mode` over the whole mapping. Waits for the commands that use the mapping
    /// first; afterwards commands, views and kernels that the new mode forbids are refused
    /// (`Errc::Invalid`) instead of faulting.
    ///
    /// Errors: `Errc::Invalid` while views of the mapping are alive (they could be used after
    /// the change) or another thread is changing the mode.
    pub fn set_access_mode(&self, mode: AccessMode) -> Result<()> {
        self.record.change_mode(mode, || {
            self.context
                .raw()
                .set_access_mode(self.record.ptr, self.record.size, mode)
        })
    }

    /// `get_access_mode` of the whole mapping.
    pub fn access_mode(&self) -> Result<AccessMode> {
        self.context
            .raw()
            .get_access_mode(self.record.ptr, self.record.size)
    }

    /// Unmaps now (after pending commands), reporting errors.
    ///
    /// Errors: `Errc::Invalid` while ranges, views or kernel arguments of the mapping are
    /// alive: it is then unmapped when the last of them goes, not now.
    pub fn unmap(self) -> Result<()> {
        MemoryRecord::release_explicitly(self.record, "Mapping::unmap")
    }
}

impl std::fmt::Debug for PhysicalMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhysicalMem")
            .field("size", &self.size())
            .field("ipc_enabled", &self.ipc_enabled())
            .finish()
    }
}

impl std::fmt::Debug for VirtualRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualRange")
            .field("ptr", &format_args!("{:#x}", self.as_ptr()))
            .field("size", &self.size())
            .finish()
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &format_args!("{:#x}", self.as_ptr()))
            .field("size", &self.size())
            .finish()
    }
}
