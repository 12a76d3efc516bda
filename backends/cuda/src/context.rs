//! Contexts. A sycl context over CUDA devices holds each device's *primary* context (one per
//! device per process, shared with any libcudart user) and makes it current on the calling
//! thread before every driver call ([`PrimaryContext::make_current`], the `with_ctx` of the
//! design notes).

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys;
use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory};
use sycl_backend::{
    AccessMode, BackendKind, Errc, Error, EventProperties, GranularityMode, KernelIr, KernelSource,
    PhysicalMemProperties, PointerInfo, QueueProperties, RawIpcMem, Result, UsmKind,
};

use crate::device::Device;
use crate::{lock, result};

/// While alive, a [`PrimaryContext`] is current on this thread ([`PrimaryContext::make_current`]);
/// dropped, the context current before is again. Bound to its thread (a raw pointer: neither
/// `Send` nor `Sync`).
#[must_use = "the context is current only while the guard lives"]
pub(crate) struct Current {
    /// The context to make current again: another one that was current before.
    restore: Option<sys::CUcontext>,
}

impl Drop for Current {
    fn drop(&mut self) {
        if let Some(before) = self.restore {
            // (A context current before this call is still alive: its owner made it current
            // on this thread and cannot have destroyed it during the call.)
            if let Err(e) = result::ctx::set_current(before) {
                log::debug!("making the caller's CUDA context current again: {e}");
            }
        }
    }
}

/// A retained primary context of one device.
pub(crate) struct PrimaryContext {
    pub(crate) dev: sys::CUdevice,
    pub(crate) ordinal: i32,
    ctx: sys::CUcontext,
    /// The embedded fill kernel, loaded with the context (see `Device::primary_context`).
    pub(crate) fill: Mutex<Option<crate::queue::FillKernel>>,
    /// Released `DISABLE_TIMING` command events, reused so that a submission does not pay
    /// `cuEventCreate` + `cuEventDestroy` (stored as addresses to stay `Send`).
    pub(crate) event_pool: Mutex<Vec<usize>>,
    /// Contexts of other devices this one has peer access to: it lasts while both are
    /// retained, so it is enabled once per pair, not on every open.
    peers: Mutex<Vec<Weak<PrimaryContext>>>,
}

// SAFETY: a CUcontext handle may be used from any thread (the driver API is thread-safe and
// every use makes the context current on the using thread first).
unsafe impl Send for PrimaryContext {}
// SAFETY: as above; shared references only read the handle.
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    /// `cuDevicePrimaryCtxRetain`.
    pub(crate) fn retain(dev: sys::CUdevice, ordinal: i32) -> Result<PrimaryContext> {
        let ctx = result::ctx::primary_retain(dev)?;
        Ok(PrimaryContext {
            dev,
            ordinal,
            ctx,
            fill: Mutex::new(None),
            event_pool: Mutex::new(Vec::new()),
            peers: Mutex::new(Vec::new()),
        })
    }

    /// Makes this context current on the calling thread (`cuCtxSetCurrent`) while the guard
    /// lives. The guard puts back the context that was current before, where there was
    /// another: a libcudart user's device (torch's, cupy's) is never left switched to
    /// another device behind its back (torch found rank 1's device current as 0 after a call
    /// of ours). Where none was current, this one stays, as the runtime API leaves its own;
    /// where this one was, no driver call is made.
    pub(crate) fn make_current(&self) -> Result<Current> {
        let before = result::ctx::get_current()?;
        if before == self.ctx {
            return Ok(Current { restore: None });
        }
        result::ctx::set_current(self.ctx)?;
        Ok(Current {
            restore: (!before.is_null()).then_some(before),
        })
    }

    /// Lets kernels and copies of this context reach memory that lives on `owner`'s device.
    pub(crate) fn enable_peer_access_to(&self, owner: &Arc<PrimaryContext>) -> Result<()> {
        if owner.dev == self.dev {
            return Ok(());
        }
        let mut peers = lock(&self.peers);
        peers.retain(|p| p.strong_count() > 0);
        if peers
            .iter()
            .any(|p| std::ptr::eq(p.as_ptr(), Arc::as_ptr(owner)))
        {
            return Ok(());
        }
        let _current = self.make_current()?;
        result::ctx::enable_peer_access(owner.ctx)?;
        peers.push(Arc::downgrade(owner));
        Ok(())
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        let _current = self
            .make_current()
            .map_err(|e| log::debug!("dropping CUDA primary context: {e}"))
            .ok();
        if let Some(fill) = lock(&self.fill).take() {
            fill.unload();
        }
        for raw in lock(&self.event_pool).drain(..) {
            // SAFETY: pooled events are owned by the pool alone; each is destroyed once.
            if let Err(e) = unsafe { result::event::destroy(raw as sys::CUevent) } {
                log::debug!("destroying a pooled CUDA event: {e}");
            }
        }
        if let Err(e) = result::ctx::primary_release(self.dev) {
            log::warn!("cuDevicePrimaryCtxRelease_v2: {e}");
        }
    }
}

/// One USM allocation of a context.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Allocation {
    /// What the driver returned (what is freed); `<=` the user pointer when over-aligned.
    pub(crate) raw: u64,
    pub(crate) size: usize,
    pub(crate) kind: UsmKind,
    /// Index into the context's devices (none for host USM).
    pub(crate) device: Option<usize>,
}

/// One mapping of physical memory into a reservation.
pub(crate) struct Mapping {
    pub(crate) size: usize,
    pub(crate) ordinal: i32,
    /// Keeps the physical memory alive while mapped.
    pub(crate) _mem: Arc<dyn sycl_backend::PhysicalMem>,
}

/// A sycl context over CUDA devices (`cuda::Context`).
pub struct Context {
    pub(crate) devices: Vec<Arc<dyn sycl_backend::Device>>,
    pub(crate) cuda_devices: Vec<Arc<Device>>,
    pub(crate) primaries: Vec<Arc<PrimaryContext>>,
    /// USM allocations by user pointer.
    pub(crate) allocs: Mutex<BTreeMap<u64, Allocation>>,
    /// Physical-memory mappings by start address.
    pub(crate) mappings: Mutex<BTreeMap<u64, Mapping>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Context")
            .field("devices", &self.cuda_devices)
            .finish()
    }
}

impl Context {
    /// A context over `devices` (CUDA devices of one platform).
    pub(crate) fn new(
        devices: &[Arc<dyn sycl_backend::Device>],
        cuda_devices: Vec<Arc<Device>>,
    ) -> Result<Context> {
        if devices.is_empty() {
            return Err(Error::invalid("a context needs at least one device"));
        }
        let primaries = cuda_devices
            .iter()
            .map(|d| d.primary_context())
            .collect::<Result<Vec<_>>>()?;
        Ok(Context {
            devices: devices.to_vec(),
            cuda_devices,
            primaries,
            allocs: Mutex::new(BTreeMap::new()),
            mappings: Mutex::new(BTreeMap::new()),
        })
    }

    /// The index in this context of `device`, or `Errc::Invalid`.
    pub(crate) fn device_index(&self, device: &Arc<dyn sycl_backend::Device>) -> Result<usize> {
        let d = sycl_backend::downcast::<Device>(device.as_any(), "device", BackendKind::Cuda)?;
        self.cuda_devices
            .iter()
            .position(|c| c.cu == d.cu)
            .ok_or_else(|| Error::invalid(format!("device {} is not in this context", d.ordinal)))
    }

    /// A standalone event on device `index` of this context.
    fn standalone_event(
        &self,
        index: usize,
        props: EventProperties,
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        crate::event::Event::standalone(
            self.primaries[index].clone(),
            &self.cuda_devices[index],
            props,
        )
        .map(|e| Arc::new(e) as _)
    }

    /// The index of the device with this IPC identity, if it is in the context.
    pub(crate) fn device_by_identity(&self, id: &[u8; 16]) -> Option<usize> {
        self.cuda_devices.iter().position(|d| &d.identity() == id)
    }

    /// The primary context of device `index`.
    pub(crate) fn primary(&self, index: usize) -> Result<&Arc<PrimaryContext>> {
        self.primaries.get(index).ok_or_else(|| {
            Error::new(
                Errc::Runtime,
                format!("device index {index} is out of range"),
            )
        })
    }

    /// The primary context of device `index`, current while the guard lives.
    pub(crate) fn with_ctx(&self, index: usize) -> Result<(&Arc<PrimaryContext>, Current)> {
        let p = self.primary(index)?;
        let current = p.make_current()?;
        Ok((p, current))
    }
}

impl sycl_backend::Context for Context {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn devices(&self) -> &[Arc<dyn sycl_backend::Device>] {
        &self.devices
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn create_queue(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Arc<dyn sycl_backend::Queue>> {
        let index = self.device_index(device)?;
        let q = crate::queue::Queue::new(
            device.clone(),
            self.cuda_devices[index].clone(),
            self.primaries[index].clone(),
            props,
        )?;
        Ok(Arc::new(q))
    }

    fn usm_alloc(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn sycl_backend::Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64> {
        self.alloc_usm(kind, device, size, align)
    }

    unsafe fn usm_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.free_usm(ptr) }
    }

    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo {
        self.pointer_info(ptr)
    }

    fn foreign_pointer_info(&self, ptr: u64) -> Result<PointerInfo> {
        Context::foreign_pointer_info(self, ptr)
    }

    fn wait_foreign_default_queue(&self, device: &Arc<dyn sycl_backend::Device>) -> Result<()> {
        let (_, _current) = self.with_ctx(self.device_index(device)?)?;
        result::stream::synchronize_legacy()
    }

    fn create_event(&self, props: EventProperties) -> Result<Arc<dyn sycl_backend::Event>> {
        self.standalone_event(0, props)
    }

    fn create_event_on(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        props: EventProperties,
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        self.standalone_event(self.device_index(device)?, props)
    }

    fn kernel_forms(&self) -> Vec<KernelIr> {
        vec![KernelIr::CudaC]
    }

    fn kernel_build_options(&self, form: KernelIr) -> &'static str {
        match form {
            // Rust does not contract `a * b + c` into a fused multiply-add; `mul_add` does.
            KernelIr::CudaC => "--fmad=false",
            _ => "",
        }
    }

    fn build_kernel_bundle(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
        source: &KernelSource<'_>,
        options: &str,
    ) -> Result<Arc<dyn sycl_backend::KernelBundle>> {
        crate::kernel::build(self, devices, source, options)
    }

    fn mem_granularity(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        mode: GranularityMode,
    ) -> Result<usize> {
        self.granularity(device, mode)
    }

    fn reserve_virtual_mem(&self, start: u64, size: usize) -> Result<u64> {
        self.reserve(start, size)
    }

    fn free_virtual_mem(&self, ptr: u64, size: usize) -> Result<()> {
        self.free_reservation(ptr, size)
    }

    fn create_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        self.physical_mem(device, size, props)
    }

    fn map_physical(
        &self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        self.map(ptr, size, mem, offset, mode)
    }

    unsafe fn unmap(&self, ptr: u64, size: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.unmap_range(ptr, size) }
    }

    fn set_access_mode(&self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        self.set_access(ptr, size, mode)
    }

    fn get_access_mode(&self, ptr: u64, size: usize) -> Result<AccessMode> {
        self.get_access(ptr, size)
    }

    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        crate::ipc::get_mem(self, ptr)
    }

    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_mem(payload)
    }

    fn ipc_get_raw_mem(&self, ptr: u64) -> Result<RawIpcMem> {
        crate::ipc::get_raw_mem(self, ptr)
    }

    fn ipc_open_raw_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        raw: &[u8],
    ) -> Result<OpenedMemory> {
        let raw: &[u8; 64] = raw.try_into().map_err(|_| {
            Error::invalid(format!(
                "a raw CUDA IPC memory handle has 64 bytes, not {}",
                raw.len()
            ))
        })?;
        crate::ipc::open_raw_mem(self, device, raw)
    }

    fn ipc_open_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        crate::ipc::open_mem(self, device, import)
    }

    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { crate::ipc::close_mem(ptr) }
    }

    fn ipc_get_physical_mem(&self, mem: &Arc<dyn sycl_backend::PhysicalMem>) -> Result<IpcExport> {
        crate::ipc::get_physical_mem(self, mem)
    }

    fn ipc_put_physical_mem(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_physical_mem(payload)
    }

    fn ipc_open_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        crate::ipc::open_physical_mem(self, device, import)
    }

    fn ipc_get_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<IpcExport> {
        crate::ipc::get_event(self, event)
    }

    fn ipc_put_event(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_event(payload)
    }

    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn sycl_backend::Event>> {
        crate::ipc::open_event(self, import)
    }
}
