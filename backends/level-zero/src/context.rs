//! Contexts: `ze_context_handle_t`, the event pools events are drawn from, and the `Context`
//! trait (USM, virtual memory and IPC delegate to `usm.rs`, `virtual_mem.rs` and `ipc.rs`).

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use level_zero_sys::*;
use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory};
use sycl_backend::{
    AccessMode, BackendKind, Errc, Error, EventProperties, GranularityMode, KernelIr, KernelSource,
    PhysicalMemProperties, PointerInfo, QueueProperties, Result, UsmKind,
};

use crate::device::Device;
use crate::platform::DriverExt;
use crate::result::check;

/// Events per pool.
const POOL_SIZE: u32 = 256;

#[derive(Default)]
struct PoolSlots {
    pools: Vec<ze_event_pool_handle_t>,
    free: Vec<(ze_event_pool_handle_t, u32)>,
}

/// The shared state of a context; queues, events, kernels and physical memory hold an `Arc`.
pub struct ContextInner {
    pub(crate) loader: Arc<Loader>,
    pub(crate) handle: ze_context_handle_t,
    pub(crate) ext: Arc<DriverExt>,
    pub(crate) devices: Vec<Arc<dyn sycl_backend::Device>>,
    pub(crate) ze_devices: Vec<ze_device_handle_t>,
    /// `[plain host-visible, host-visible + kernel timestamp]`.
    pools: Mutex<[PoolSlots; 2]>,
    /// Pointers returned by `ipc_open_mem` → the base `zeMemOpenIpcHandle` returned.
    pub(crate) opened_mem: Mutex<HashMap<u64, u64>>,
    /// Descriptors exported by `ipc_get_physical_mem`, kept open until `put`.
    pub(crate) exported_phys: Mutex<HashMap<i32, OwnedFd>>,
}

// SAFETY: the context handle and pool handles are used through thread-safe Level Zero calls;
// the mutable bookkeeping sits behind mutexes.
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

/// Locks a mutex, recovering from poisoning (a panic elsewhere must not wedge the backend).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ContextInner {
    pub(crate) fn create(
        loader: Arc<Loader>,
        driver: ze_driver_handle_t,
        ext: Arc<DriverExt>,
        devices: Vec<Arc<dyn sycl_backend::Device>>,
        ze_devices: Vec<ze_device_handle_t>,
    ) -> Result<ContextInner> {
        let desc = ze_context_desc_t {
            stype: ZE_STRUCTURE_TYPE_CONTEXT_DESC,
            pNext: std::ptr::null(),
            flags: 0,
        };
        let mut handle = std::ptr::null_mut();
        // SAFETY: valid driver, tagged desc, valid out-pointer.
        let ze_r = unsafe { (loader.zeContextCreate)(driver, &desc, &mut handle) };
        check(ze_r, "zeContextCreate")?;
        Ok(ContextInner {
            loader,
            handle,
            ext,
            devices,
            ze_devices,
            pools: Mutex::new(Default::default()),
            opened_mem: Mutex::new(HashMap::new()),
            exported_phys: Mutex::new(HashMap::new()),
        })
    }

    /// Our device for `device` if it is one of this context's devices.
    pub(crate) fn our_device<'a>(
        &self,
        device: &'a Arc<dyn sycl_backend::Device>,
    ) -> Result<&'a Device> {
        let dev =
            sycl_backend::downcast::<Device>(device.as_any(), "device", BackendKind::LevelZero)?;
        if !self.ze_devices.contains(&dev.handle) {
            return Err(Error::invalid("the device is not in this context"));
        }
        Ok(dev)
    }

    /// Creates a host-visible event pool (`flags` added) over this context's devices.
    pub(crate) fn create_pool(
        &self,
        flags: ze_event_pool_flags_t,
        count: u32,
    ) -> Result<ze_event_pool_handle_t> {
        let desc = ze_event_pool_desc_t {
            stype: ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
            pNext: std::ptr::null(),
            flags: ZE_EVENT_POOL_FLAG_HOST_VISIBLE | flags,
            count,
        };
        let mut devs = self.ze_devices.clone();
        let mut pool = std::ptr::null_mut();
        check(
            // SAFETY: valid context, tagged desc, an array of this context's devices, out-pointer.
            unsafe {
                (self.loader.zeEventPoolCreate)(
                    self.handle,
                    &desc,
                    devs.len() as u32,
                    devs.as_mut_ptr(),
                    &mut pool,
                )
            },
            "zeEventPoolCreate",
        )?;
        Ok(pool)
    }

    /// A free event slot: from the timestamp pools when `timestamp`.
    pub(crate) fn take_slot(&self, timestamp: bool) -> Result<(ze_event_pool_handle_t, u32)> {
        let mut pools = lock(&self.pools);
        let slots = &mut pools[usize::from(timestamp)];
        if let Some(s) = slots.free.pop() {
            return Ok(s);
        }
        let flags = if timestamp {
            ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP
        } else {
            0
        };
        let pool = self.create_pool(flags, POOL_SIZE)?;
        slots.pools.push(pool);
        slots.free.extend((1..POOL_SIZE).rev().map(|i| (pool, i)));
        Ok((pool, 0))
    }

    /// Returns a slot whose event was destroyed.
    pub(crate) fn give_slot(&self, timestamp: bool, slot: (ze_event_pool_handle_t, u32)) {
        lock(&self.pools)[usize::from(timestamp)].free.push(slot);
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        let pools = std::mem::take(&mut *lock(&self.pools));
        for slots in pools {
            for pool in slots.pools {
                if let Err(e) = check(
                    // SAFETY: every event of the pool was destroyed (events hold an Arc to this
                    // context); the pool is destroyed once.
                    unsafe { (self.loader.zeEventPoolDestroy)(pool) },
                    "zeEventPoolDestroy",
                ) {
                    log::warn!("level_zero: {e}");
                }
            }
        }
        for (ptr, base) in lock(&self.opened_mem).drain() {
            log::warn!(
                "level_zero: IPC memory {ptr:#x} was never closed; closing it with the context"
            );
            // SAFETY: `base` came from zeMemOpenIpcHandle on this context and was not closed.
            let _ = unsafe { (self.loader.zeMemCloseIpcHandle)(self.handle, base as *const _) };
        }
        if let Err(e) = check(
            // SAFETY: nothing else refers to the context any more (all holders kept an Arc).
            unsafe { (self.loader.zeContextDestroy)(self.handle) },
            "zeContextDestroy",
        ) {
            log::warn!("level_zero: {e}");
        }
    }
}

/// A Level Zero context.
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl sycl_backend::Context for Context {
    fn backend(&self) -> BackendKind {
        BackendKind::LevelZero
    }
    fn devices(&self) -> &[Arc<dyn sycl_backend::Device>] {
        &self.inner.devices
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn create_queue(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Arc<dyn sycl_backend::Queue>> {
        Ok(Arc::new(crate::queue::Queue::create(
            &self.inner,
            device,
            props,
        )?))
    }

    fn usm_alloc(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn sycl_backend::Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64> {
        crate::usm::alloc(&self.inner, kind, device, size, align)
    }

    unsafe fn usm_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { crate::usm::free(&self.inner, ptr) }
    }

    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo {
        crate::usm::pointer_info(&self.inner, ptr)
    }

    fn create_event(&self, props: EventProperties) -> Result<Arc<dyn sycl_backend::Event>> {
        Ok(crate::event::Event::standalone(&self.inner, props)?)
    }

    fn kernel_forms(&self) -> Vec<KernelIr> {
        vec![KernelIr::SpirV]
    }

    fn kernel_build_options(&self, form: KernelIr) -> &'static str {
        match form {
            KernelIr::SpirV => sycl_backend::exact_f32_division_option(self.devices()),
            _ => "",
        }
    }

    fn build_kernel_bundle(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
        source: &KernelSource<'_>,
        options: &str,
    ) -> Result<Arc<dyn sycl_backend::KernelBundle>> {
        match source {
            KernelSource::SpirV(bytes) => Ok(crate::kernel::KernelBundle::build(
                &self.inner,
                devices,
                bytes,
                options,
            )?),
            other => Err(Error::new(
                Errc::FeatureNotSupported,
                format!(
                    "the level_zero backend builds SPIR-V only, not {}",
                    other.language()
                ),
            )),
        }
    }

    fn mem_granularity(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        mode: GranularityMode,
    ) -> Result<usize> {
        crate::virtual_mem::granularity(&self.inner, device, mode)
    }
    fn reserve_virtual_mem(&self, start: u64, size: usize) -> Result<u64> {
        crate::virtual_mem::reserve(&self.inner, start, size)
    }
    fn free_virtual_mem(&self, ptr: u64, size: usize) -> Result<()> {
        crate::virtual_mem::free(&self.inner, ptr, size)
    }
    fn create_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        Ok(crate::virtual_mem::PhysicalMem::create(
            &self.inner,
            device,
            size,
            props,
        )?)
    }
    fn map_physical(
        &self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        crate::virtual_mem::map(&self.inner, ptr, size, mem, offset, mode)
    }
    unsafe fn unmap(&self, ptr: u64, size: usize) -> Result<()> {
        crate::virtual_mem::unmap(&self.inner, ptr, size)
    }
    fn set_access_mode(&self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        crate::virtual_mem::set_access(&self.inner, ptr, size, mode)
    }
    fn get_access_mode(&self, ptr: u64, size: usize) -> Result<AccessMode> {
        crate::virtual_mem::get_access(&self.inner, ptr, size)
    }

    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        crate::ipc::get_mem(&self.inner, ptr)
    }
    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_mem(&self.inner, payload)
    }
    fn ipc_open_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        crate::ipc::open_mem(&self.inner, device, import)
    }
    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        crate::ipc::close_mem(&self.inner, ptr)
    }
    fn ipc_get_physical_mem(&self, mem: &Arc<dyn sycl_backend::PhysicalMem>) -> Result<IpcExport> {
        crate::ipc::get_physical_mem(&self.inner, mem)
    }
    fn ipc_put_physical_mem(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_physical_mem(&self.inner, payload)
    }
    fn ipc_open_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        crate::ipc::open_physical_mem(&self.inner, device, import)
    }
    fn ipc_get_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<IpcExport> {
        crate::ipc::get_event(&self.inner, event)
    }
    fn ipc_put_event(&self, payload: &[u8]) -> Result<()> {
        crate::ipc::put_event(&self.inner, payload)
    }
    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn sycl_backend::Event>> {
        crate::ipc::open_event(&self.inner, import)
    }
}
