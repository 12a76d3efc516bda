//! USM: device memory (`cuMemAlloc_v2`, the only kind legacy IPC can export), pinned host
//! memory (`cuMemHostAlloc(PORTABLE|DEVICEMAP)`) and managed memory
//! (`cuMemAllocManaged(ATTACH_GLOBAL)`). Stream-ordered allocations are deliberately not used:
//! memory from the default pool cannot be exported.
//!
//! The driver aligns device and managed allocations to 256 bytes and host allocations to a
//! page; a larger `align` over-allocates and returns an aligned pointer inside the block.

use std::sync::Arc;

use sycl_backend::{Aspect, Errc, Error, PointerInfo, Result, UsmKind};

use crate::context::{Allocation, Context};
use crate::{lock, result};

impl Context {
    pub(crate) fn alloc_usm(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn sycl_backend::Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64> {
        if size == 0 {
            return Err(Error::invalid("USM allocations of 0 bytes are not allowed"));
        }
        if align != 0 && !align.is_power_of_two() {
            return Err(Error::invalid(format!(
                "alignment {align} is not a power of two"
            )));
        }
        let index = match (kind, device) {
            (UsmKind::Host, _) => None,
            (_, Some(d)) => Some(self.device_index(d)?),
            (UsmKind::Unknown, None) | (_, None) => {
                return Err(Error::invalid(format!("{kind} USM needs a device")));
            }
        };
        let natural = if kind == UsmKind::Host { 4096 } else { 256 };
        let extra = if align > natural { align } else { 0 };
        let total = size.checked_add(extra).ok_or_else(|| {
            Error::new(Errc::MemoryAllocation, format!("{size} bytes is too large"))
        })?;
        let (_, _current) = self.with_ctx(index.unwrap_or(0))?;
        let raw = match kind {
            UsmKind::Device => result::mem::alloc(total)?,
            UsmKind::Host => {
                if !self
                    .cuda_devices
                    .iter()
                    .any(|d| d.info_has(Aspect::UsmHostAllocations))
                {
                    return Err(Error::unsupported(
                        Aspect::UsmHostAllocations,
                        "malloc_host",
                    ));
                }
                result::mem::host_alloc(total)?
            }
            UsmKind::Shared => {
                let i = index.unwrap_or(0);
                if !self.cuda_devices[i].caps.managed {
                    return Err(Error::unsupported(
                        Aspect::UsmSharedAllocations,
                        "malloc_shared",
                    ));
                }
                result::mem::alloc_managed(total)?
            }
            UsmKind::Unknown => {
                return Err(Error::invalid("cannot allocate USM of kind `unknown`"))
            }
        };
        let ptr = if extra > 0 {
            (raw + extra as u64 - 1) & !(extra as u64 - 1)
        } else {
            raw
        };
        lock(&self.allocs).insert(
            ptr,
            Allocation {
                raw,
                size,
                kind,
                device: index,
            },
        );
        Ok(ptr)
    }

    /// # Safety
    /// As [`sycl_backend::Context::usm_free`].
    pub(crate) unsafe fn free_usm(&self, ptr: u64) -> Result<()> {
        let alloc = lock(&self.allocs).remove(&ptr).ok_or_else(|| {
            Error::invalid(format!("{ptr:#x} is not a USM allocation of this context"))
        })?;
        if alloc.kind == UsmKind::Device {
            let pctx = self.primary(alloc.device.unwrap_or(0))?;
            if crate::ipc::forget_allocation(alloc.raw, pctx) {
                // Still open through IPC in this process (as the allocation itself): the last
                // close frees it.
                return Ok(());
            }
        }
        let (_, _current) = self.with_ctx(alloc.device.unwrap_or(0))?;
        match alloc.kind {
            // SAFETY: `raw` came from the matching allocation call and the caller guarantees
            // nothing uses it any more.
            UsmKind::Host => unsafe { result::mem::free_host(alloc.raw) },
            // SAFETY: as above.
            _ => unsafe { result::mem::free(alloc.raw) },
        }
    }

    pub(crate) fn pointer_info(&self, ptr: u64) -> PointerInfo {
        let allocs = lock(&self.allocs);
        match allocs.range(..=ptr).next_back() {
            Some((&start, a)) if ptr < start + a.size as u64 => PointerInfo {
                kind: a.kind,
                device_index: a.device,
                base: start,
                size: a.size,
            },
            _ => PointerInfo::unknown(),
        }
    }

    /// [`sycl_backend::Context::foreign_pointer_info`]: the driver's pointer attributes.
    pub(crate) fn foreign_pointer_info(&self, ptr: u64) -> Result<PointerInfo> {
        // Some drivers answer attribute queries only with a context current.
        let (_, _current) = self.with_ctx(0)?;
        let a = result::mem::attributes(ptr).map_err(|e| {
            Error::invalid(format!(
                "{ptr:#x} is not memory the CUDA driver knows (cuPointerGetAttribute: {e})"
            ))
        })?;
        let index = self
            .cuda_devices
            .iter()
            .position(|d| d.ordinal == a.ordinal);
        let kind = match (a.memory_type, a.managed) {
            (_, true) => UsmKind::Shared,
            (1, false) => UsmKind::Host,
            (2, false) => UsmKind::Device,
            (t, _) => {
                return Err(Error::invalid(format!(
                    "{ptr:#x} is CUDA memory of type {t} (neither device, host nor managed)"
                )))
            }
        };
        let device_index = match (kind, index) {
            (UsmKind::Host, _) => None,
            (_, Some(i)) => Some(i),
            (_, None) => {
                return Err(Error::invalid(format!(
                    "{ptr:#x} lives on CUDA device {}, which is not in this context",
                    a.ordinal
                )))
            }
        };
        Ok(PointerInfo {
            kind,
            device_index,
            base: a.start,
            size: a.size,
        })
    }
}

impl crate::device::Device {
    pub(crate) fn info_has(&self, aspect: Aspect) -> bool {
        sycl_backend::Device::info(self).has(aspect)
    }
}
