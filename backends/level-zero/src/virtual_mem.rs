//! Virtual memory: `zeVirtualMemQueryPageSize/Reserve/Free/Map/Unmap/SetAccessAttribute/
//! GetAccessAttribute` and `zePhysicalMemCreate/Destroy` (with
//! `ze_external_memory_export_desc_t` chained when the object must be exportable).

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use level_zero_sys::*;
use sycl_backend::{
    AccessMode, BackendKind, Error, GranularityMode, PhysicalMemProperties, Result,
};

use crate::context::ContextInner;
use crate::result::check;

/// The size hint passed to `zeVirtualMemQueryPageSize` for the recommended granularity: the
/// driver answers the page size it would use for an allocation of this size (2 MiB pages on
/// discrete GPUs); for the minimum it is asked about a 1-byte allocation.
pub const RECOMMENDED_SIZE_HINT: usize = 2 << 20;

pub(crate) fn access_to_ze(mode: AccessMode) -> ze_memory_access_attribute_t {
    match mode {
        AccessMode::None => ZE_MEMORY_ACCESS_ATTRIBUTE_NONE,
        AccessMode::Read => ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY,
        AccessMode::ReadWrite => ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE,
    }
}

pub(crate) fn access_from_ze(a: ze_memory_access_attribute_t) -> Result<AccessMode> {
    match a {
        ZE_MEMORY_ACCESS_ATTRIBUTE_NONE => Ok(AccessMode::None),
        ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY => Ok(AccessMode::Read),
        ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE => Ok(AccessMode::ReadWrite),
        other => Err(Error::new(
            sycl_backend::Errc::Runtime,
            format!("driver reported access attribute {other}"),
        )),
    }
}

pub(crate) fn granularity(
    ctx: &ContextInner,
    device: &Arc<dyn sycl_backend::Device>,
    mode: GranularityMode,
) -> Result<usize> {
    let dev = ctx.our_device(device)?;
    let hint = match mode {
        GranularityMode::Minimum => 1,
        GranularityMode::Recommended => RECOMMENDED_SIZE_HINT,
    };
    let mut page = 0usize;
    // SAFETY: valid context and device, out-pointer.
    let ze_r =
        unsafe { (ctx.loader.zeVirtualMemQueryPageSize)(ctx.handle, dev.handle, hint, &mut page) };
    check(ze_r, "zeVirtualMemQueryPageSize")?;
    Ok(page)
}

pub(crate) fn reserve(ctx: &ContextInner, start: u64, size: usize) -> Result<u64> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    check(
        // SAFETY: `start` is only a hint; out-pointer valid.
        unsafe {
            (ctx.loader.zeVirtualMemReserve)(ctx.handle, start as *const c_void, size, &mut ptr)
        },
        "zeVirtualMemReserve",
    )?;
    Ok(ptr as u64)
}

pub(crate) fn free(ctx: &ContextInner, ptr: u64, size: usize) -> Result<()> {
    // SAFETY: the driver checks that the range is a reservation of this context.
    let ze_r = unsafe { (ctx.loader.zeVirtualMemFree)(ctx.handle, ptr as *const c_void, size) };
    check(ze_r, "zeVirtualMemFree")
}

pub(crate) fn map(
    ctx: &ContextInner,
    ptr: u64,
    size: usize,
    mem: &Arc<dyn sycl_backend::PhysicalMem>,
    offset: usize,
    mode: AccessMode,
) -> Result<()> {
    let pm = sycl_backend::downcast::<PhysicalMem>(
        mem.as_any(),
        "physical memory",
        BackendKind::LevelZero,
    )?;
    check(
        // SAFETY: valid context; the driver validates range, object and offset.
        unsafe {
            (ctx.loader.zeVirtualMemMap)(
                ctx.handle,
                ptr as *const c_void,
                size,
                pm.handle,
                offset,
                access_to_ze(mode),
            )
        },
        "zeVirtualMemMap",
    )
}

pub(crate) fn unmap(ctx: &ContextInner, ptr: u64, size: usize) -> Result<()> {
    // SAFETY: the caller guarantees no pending use of the range.
    let ze_r = unsafe { (ctx.loader.zeVirtualMemUnmap)(ctx.handle, ptr as *const c_void, size) };
    check(ze_r, "zeVirtualMemUnmap")
}

pub(crate) fn set_access(
    ctx: &ContextInner,
    ptr: u64,
    size: usize,
    mode: AccessMode,
) -> Result<()> {
    check(
        // SAFETY: the driver validates the range.
        unsafe {
            (ctx.loader.zeVirtualMemSetAccessAttribute)(
                ctx.handle,
                ptr as *const c_void,
                size,
                access_to_ze(mode),
            )
        },
        "zeVirtualMemSetAccessAttribute",
    )
}

pub(crate) fn get_access(ctx: &ContextInner, ptr: u64, size: usize) -> Result<AccessMode> {
    let mut a = 0;
    let mut out_size = 0usize;
    check(
        // SAFETY: out-pointers valid; the driver validates the range.
        unsafe {
            (ctx.loader.zeVirtualMemGetAccessAttribute)(
                ctx.handle,
                ptr as *const c_void,
                size,
                &mut a,
                &mut out_size,
            )
        },
        "zeVirtualMemGetAccessAttribute",
    )?;
    access_from_ze(a)
}

/// A physical memory object.
pub struct PhysicalMem {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: ze_physical_mem_handle_t,
    pub(crate) device: Arc<dyn sycl_backend::Device>,
    pub(crate) size: usize,
    pub(crate) ipc_enabled: bool,
    pub(crate) imported: bool,
}

// SAFETY: physical memory handles are immutable identifiers used in thread-safe calls.
unsafe impl Send for PhysicalMem {}
// SAFETY: as above.
unsafe impl Sync for PhysicalMem {}

impl PhysicalMem {
    pub(crate) fn create(
        ctx: &Arc<ContextInner>,
        device: &Arc<dyn sycl_backend::Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<PhysicalMem>> {
        let dev = ctx.our_device(device)?;
        let export = ze_external_memory_export_desc_t {
            stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC,
            pNext: std::ptr::null(),
            flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD,
        };
        let mut desc = ze_physical_mem_desc_t {
            stype: ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC,
            pNext: if props.enable_ipc {
                (&export as *const ze_external_memory_export_desc_t).cast()
            } else {
                std::ptr::null()
            },
            flags: 0,
            size,
        };
        let mut handle = std::ptr::null_mut();
        check(
            // SAFETY: valid context and device; desc (and the chained export desc) live for the call.
            unsafe {
                (ctx.loader.zePhysicalMemCreate)(ctx.handle, dev.handle, &mut desc, &mut handle)
            },
            "zePhysicalMemCreate",
        )?;
        Ok(Arc::new(PhysicalMem {
            ctx: ctx.clone(),
            handle,
            device: device.clone(),
            size,
            ipc_enabled: props.enable_ipc,
            imported: false,
        }))
    }
}

impl sycl_backend::PhysicalMem for PhysicalMem {
    fn size(&self) -> usize {
        self.size
    }
    fn device(&self) -> &Arc<dyn sycl_backend::Device> {
        &self.device
    }
    fn ipc_enabled(&self) -> bool {
        self.ipc_enabled
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for PhysicalMem {
    fn drop(&mut self) {
        if let Err(e) = check(
            // SAFETY: the object is ours, unmapped per the SYCL contract, destroyed once.
            unsafe { (self.ctx.loader.zePhysicalMemDestroy)(self.ctx.handle, self.handle) },
            "zePhysicalMemDestroy",
        ) {
            log::warn!("level_zero: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_round_trip() {
        for m in [AccessMode::None, AccessMode::Read, AccessMode::ReadWrite] {
            assert_eq!(access_from_ze(access_to_ze(m)).unwrap(), m);
        }
        assert_eq!(
            access_to_ze(AccessMode::Read),
            ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY
        );
        assert!(access_from_ze(7).is_err());
    }
}
