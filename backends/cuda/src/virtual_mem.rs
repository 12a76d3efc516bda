//! Virtual memory (`sycl_ext_oneapi_virtual_mem`) on the CUDA VMM API: granularity
//! (`cuMemGetAllocationGranularity`), reservations (`cuMemAddressReserve`/`Free`), physical
//! memory (`cuMemCreate`, pinned device memory; with `enable_ipc` it requests POSIX
//! file-descriptor handles), mappings (`cuMemMap` + `cuMemSetAccess` for the physical memory's
//! device) and access modes (`cuMemSetAccess`/`cuMemGetAccess`).
//!
//! A mapping keeps its physical memory alive until it is unmapped.

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use sycl_backend::{AccessMode, Aspect, Error, GranularityMode, PhysicalMemProperties, Result};

use crate::context::{Context, Mapping, PrimaryContext};
use crate::{lock, result};

/// A physical memory object (`cuda::PhysicalMem`): a `CUmemGenericAllocationHandle`.
pub struct PhysicalMem {
    pub(crate) ctx: Arc<PrimaryContext>,
    pub(crate) handle: u64,
    size: usize,
    device: Arc<dyn sycl_backend::Device>,
    pub(crate) ordinal: i32,
    ipc: bool,
    /// Descriptors handed out by `ipc::physical_memory::get`, by export serial, closed on
    /// `put` or with the object.
    pub(crate) exports: Mutex<HashMap<u64, OwnedFd>>,
}

impl std::fmt::Debug for PhysicalMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::PhysicalMem")
            .field("size", &self.size)
            .field("device", &self.ordinal)
            .finish()
    }
}

impl PhysicalMem {
    pub(crate) fn new(
        ctx: Arc<PrimaryContext>,
        handle: u64,
        size: usize,
        device: Arc<dyn sycl_backend::Device>,
        ordinal: i32,
        ipc: bool,
    ) -> PhysicalMem {
        PhysicalMem {
            ctx,
            handle,
            size,
            device,
            ordinal,
            ipc,
            exports: Mutex::new(HashMap::new()),
        }
    }
}

impl Drop for PhysicalMem {
    fn drop(&mut self) {
        lock(&self.exports).clear();
        let _current = self
            .ctx
            .make_current()
            .map_err(|e| log::debug!("releasing physical memory: {e}"))
            .ok();
        // SAFETY: the handle is owned by this object; mappings hold the object alive, so none
        // remains (and the driver keeps mapped memory alive anyway).
        if let Err(e) = unsafe { result::vmm::release(self.handle) } {
            log::warn!("{e}");
        }
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
        self.ipc
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn access_flags(mode: AccessMode) -> u32 {
    match mode {
        AccessMode::None => 0,
        AccessMode::Read => 1,
        AccessMode::ReadWrite => 3,
    }
}

impl Context {
    fn vmm_index(&self, device: &Arc<dyn sycl_backend::Device>) -> Result<usize> {
        let i = self.device_index(device)?;
        if !self.cuda_devices[i].caps.vmm {
            return Err(Error::unsupported(
                Aspect::ExtOneapiVirtualMem,
                "virtual memory",
            ));
        }
        Ok(i)
    }

    fn any_vmm_index(&self) -> Result<usize> {
        self.cuda_devices
            .iter()
            .position(|d| d.caps.vmm)
            .ok_or_else(|| Error::unsupported(Aspect::ExtOneapiVirtualMem, "virtual memory"))
    }

    pub(crate) fn granularity(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        mode: GranularityMode,
    ) -> Result<usize> {
        let i = self.vmm_index(device)?;
        let dev = &self.cuda_devices[i];
        let (_, _current) = self.with_ctx(i)?;
        let prop = result::vmm::prop(dev.ordinal, dev.caps.posix_fd);
        result::vmm::granularity(&prop, mode == GranularityMode::Recommended)
    }

    pub(crate) fn reserve(&self, start: u64, size: usize) -> Result<u64> {
        let i = self.any_vmm_index()?;
        if size == 0 {
            return Err(Error::invalid("cannot reserve 0 bytes"));
        }
        let (_, _current) = self.with_ctx(i)?;
        result::vmm::address_reserve(size, start)
    }

    pub(crate) fn free_reservation(&self, ptr: u64, size: usize) -> Result<()> {
        let i = self.any_vmm_index()?;
        let (_, _current) = self.with_ctx(i)?;
        result::vmm::address_free(ptr, size)
    }

    pub(crate) fn physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        let i = self.vmm_index(device)?;
        let dev = &self.cuda_devices[i];
        if props.enable_ipc && !dev.caps.posix_fd {
            return Err(Error::unsupported(
                Aspect::ExtOneapiIpcPhysicalMemory,
                "physical_mem with enable_ipc",
            ));
        }
        if size == 0 {
            return Err(Error::invalid("physical memory of 0 bytes"));
        }
        let (ctx, _current) = self.with_ctx(i)?;
        let ctx = ctx.clone();
        let prop = result::vmm::prop(dev.ordinal, props.enable_ipc);
        let handle = result::vmm::create(size, &prop)?;
        Ok(Arc::new(PhysicalMem::new(
            ctx,
            handle,
            size,
            device.clone(),
            dev.ordinal,
            props.enable_ipc,
        )))
    }

    pub(crate) fn map(
        &self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        let m = sycl_backend::downcast::<PhysicalMem>(
            mem.as_any(),
            "physical memory",
            sycl_backend::BackendKind::Cuda,
        )?;
        let _current = m.ctx.make_current()?;
        result::vmm::map(ptr, size, offset, m.handle)?;
        if mode != AccessMode::None {
            if let Err(e) = result::vmm::set_access(ptr, size, m.ordinal, access_flags(mode)) {
                // SAFETY: the range was mapped just above and nothing has used it.
                if let Err(u) = unsafe { result::vmm::unmap(ptr, size) } {
                    log::warn!("{u}");
                }
                return Err(e);
            }
        }
        lock(&self.mappings).insert(
            ptr,
            Mapping {
                size,
                ordinal: m.ordinal,
                _mem: mem.clone(),
            },
        );
        Ok(())
    }

    /// The device ordinal of the mapping containing `[ptr, ptr+size)`.
    fn mapping_ordinal(&self, ptr: u64, size: usize) -> Result<i32> {
        let maps = lock(&self.mappings);
        match maps.range(..=ptr).next_back() {
            Some((&start, m)) if ptr + size as u64 <= start + m.size as u64 => Ok(m.ordinal),
            _ => Err(Error::invalid(format!(
                "[{ptr:#x}, +{size}) is not inside a mapping of this context"
            ))),
        }
    }

    /// # Safety
    /// No pending command uses the range.
    pub(crate) unsafe fn unmap_range(&self, ptr: u64, size: usize) -> Result<()> {
        let i = self.any_vmm_index()?;
        let (_, _current) = self.with_ctx(i)?;
        // SAFETY: guaranteed by the caller.
        unsafe { result::vmm::unmap(ptr, size)? };
        let mut maps = lock(&self.mappings);
        // Forget every mapping that started inside the unmapped range.
        let gone: Vec<u64> = maps
            .range(ptr..ptr + size as u64)
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            maps.remove(&k);
        }
        Ok(())
    }

    pub(crate) fn set_access(&self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        let ordinal = self.mapping_ordinal(ptr, size)?;
        let i = self.any_vmm_index()?;
        let (_, _current) = self.with_ctx(i)?;
        result::vmm::set_access(ptr, size, ordinal, access_flags(mode))
    }

    pub(crate) fn get_access(&self, ptr: u64, size: usize) -> Result<AccessMode> {
        let ordinal = self.mapping_ordinal(ptr, size.max(1))?;
        let i = self.any_vmm_index()?;
        let (_, _current) = self.with_ctx(i)?;
        Ok(match result::vmm::get_access(ptr, ordinal)? {
            0 => AccessMode::None,
            1 => AccessMode::Read,
            _ => AccessMode::ReadWrite,
        })
    }
}
