//! USM: `zeMemAllocDevice/Host/Shared`, `zeMemFree`, and pointer queries through
//! `zeMemGetAllocProperties` + `zeMemGetAddressRange` (the driver tracks allocations; the
//! backend keeps no table).

use std::ffi::c_void;
use std::sync::Arc;

use level_zero_sys::*;
use sycl_backend::{Errc, Error, PointerInfo, Result, UsmKind};

use crate::context::ContextInner;
use crate::result::check;

pub(crate) fn alloc(
    ctx: &ContextInner,
    kind: UsmKind,
    device: Option<&Arc<dyn sycl_backend::Device>>,
    size: usize,
    align: usize,
) -> Result<u64> {
    if size == 0 {
        return Err(Error::invalid("USM allocation of 0 bytes"));
    }
    if align != 0 && !align.is_power_of_two() {
        return Err(Error::invalid(format!(
            "alignment {align} is not a power of two"
        )));
    }
    let l = &ctx.loader;
    let ddesc = ze_device_mem_alloc_desc_t {
        stype: ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
        pNext: std::ptr::null(),
        flags: 0,
        ordinal: 0,
    };
    let hdesc = ze_host_mem_alloc_desc_t {
        stype: ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
        pNext: std::ptr::null(),
        flags: 0,
    };
    let mut ptr: *mut c_void = std::ptr::null_mut();
    let dev = |what: &str| -> Result<ze_device_handle_t> {
        let d = device.ok_or_else(|| Error::invalid(format!("{what} USM needs a device")))?;
        Ok(ctx.our_device(d)?.handle)
    };
    match kind {
        UsmKind::Device => {
            let d = dev("device")?;
            // SAFETY: valid context and device, tagged desc, out-pointer.
            let ze_r =
                unsafe { (l.zeMemAllocDevice)(ctx.handle, &ddesc, size, align, d, &mut ptr) };
            check(ze_r, "zeMemAllocDevice")?
        }
        UsmKind::Host => {
            // SAFETY: valid context, tagged desc, out-pointer.
            let ze_r = unsafe { (l.zeMemAllocHost)(ctx.handle, &hdesc, size, align, &mut ptr) };
            check(ze_r, "zeMemAllocHost")?
        }
        UsmKind::Shared => {
            let d = match device {
                Some(_) => dev("shared")?,
                None => std::ptr::null_mut(),
            };
            check(
                // SAFETY: valid context, device or null (host-side shared), tagged descs.
                unsafe {
                    (l.zeMemAllocShared)(ctx.handle, &ddesc, &hdesc, size, align, d, &mut ptr)
                },
                "zeMemAllocShared",
            )?
        }
        UsmKind::Unknown => {
            return Err(Error::new(
                Errc::Invalid,
                "cannot allocate USM of kind unknown",
            ))
        }
    }
    Ok(ptr as u64)
}

/// # Safety
/// As `Context::usm_free`.
pub(crate) unsafe fn free(ctx: &ContextInner, ptr: u64) -> Result<()> {
    // SAFETY: the caller passes a live allocation of this context with no pending use.
    let ze_r = unsafe { (ctx.loader.zeMemFree)(ctx.handle, ptr as *mut c_void) };
    check(ze_r, "zeMemFree")
}

pub(crate) fn pointer_info(ctx: &ContextInner, ptr: u64) -> PointerInfo {
    let l = &ctx.loader;
    let mut props = ze_memory_allocation_properties_t {
        stype: ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES,
        pNext: std::ptr::null_mut(),
        type_: ZE_MEMORY_TYPE_UNKNOWN,
        id: 0,
        pageSize: 0,
    };
    let mut dev: ze_device_handle_t = std::ptr::null_mut();
    // SAFETY: any pointer value may be queried; tagged out-struct.
    let r = unsafe {
        (l.zeMemGetAllocProperties)(ctx.handle, ptr as *const c_void, &mut props, &mut dev)
    };
    let kind = match (r, props.type_) {
        (ZE_RESULT_SUCCESS, ZE_MEMORY_TYPE_DEVICE) => UsmKind::Device,
        (ZE_RESULT_SUCCESS, ZE_MEMORY_TYPE_HOST) => UsmKind::Host,
        (ZE_RESULT_SUCCESS, ZE_MEMORY_TYPE_SHARED) => UsmKind::Shared,
        _ => return PointerInfo::unknown(),
    };
    let mut base: *mut c_void = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: the pointer is inside a known allocation; out-pointers valid.
    let r =
        unsafe { (l.zeMemGetAddressRange)(ctx.handle, ptr as *const c_void, &mut base, &mut size) };
    if r != ZE_RESULT_SUCCESS {
        return PointerInfo::unknown();
    }
    let device_index = if dev.is_null() {
        None
    } else {
        ctx.ze_devices.iter().position(|&d| d == dev)
    };
    PointerInfo {
        kind,
        device_index: if kind == UsmKind::Host {
            None
        } else {
            device_index
        },
        base: base as u64,
        size,
    }
}
