//! Contexts: USM, virtual memory and IPC bookkeeping for the CPU device.

use std::any::Any;
use std::sync::Arc;

use parking_lot::Mutex;
use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory};
use sycl_backend::{
    downcast, AccessMode, Aspect, BackendKind, Error, EventProperties, GranularityMode, KernelIr,
    PhysicalMemProperties, PointerInfo, QueueProperties, Result, UsmKind,
};

use crate::device::Device;
use crate::event::Event;
use crate::queue::Queue;
use crate::sys;
use crate::usm::{self, MemEntry, Registry};
use crate::virtual_mem::{PhysicalMem, VirtualSpace};

/// A context of the native CPU backend.
pub struct Context {
    devices: Vec<Arc<dyn sycl_backend::Device>>,
    pub(crate) mem: Mutex<Registry>,
    pub(crate) vm: Mutex<VirtualSpace>,
}

impl Context {
    pub(crate) fn new(devices: Vec<Arc<dyn sycl_backend::Device>>) -> Context {
        Context {
            devices,
            mem: Mutex::new(Registry::default()),
            vm: Mutex::new(VirtualSpace::default()),
        }
    }

    /// The position of `device` among this context's devices.
    pub(crate) fn device_position(&self, device: &Arc<dyn sycl_backend::Device>) -> Result<usize> {
        downcast::<Device>(device.as_any(), "device", BackendKind::NativeCpu)?;
        self.devices
            .iter()
            .position(|d| d.index() == device.index())
            .ok_or_else(|| Error::invalid("the device is not one of the context's devices"))
    }
}

impl sycl_backend::Context for Context {
    fn kernel_forms(&self) -> Vec<KernelIr> {
        vec![KernelIr::Rust]
    }

    fn backend(&self) -> BackendKind {
        BackendKind::NativeCpu
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
        self.device_position(device)?;
        Ok(Arc::new(Queue::new(device.clone(), props)?))
    }

    fn usm_alloc(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn sycl_backend::Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64> {
        let device_index = match (kind, device) {
            (UsmKind::Unknown, _) => {
                return Err(Error::invalid("usm::alloc::unknown cannot be allocated"))
            }
            (UsmKind::Host, _) => None,
            (_, Some(device)) => Some(self.device_position(device)?),
            (_, None) => return Err(Error::invalid(format!("{kind} USM needs a device"))),
        };
        let (base, alloc) = usm::allocate(size, align, kind, device_index)?;
        self.mem.lock().insert(base, MemEntry::Usm(alloc));
        Ok(base)
    }

    unsafe fn usm_free(&self, ptr: u64) -> Result<()> {
        let alloc = self.mem.lock().remove_usm(ptr)?;
        // Unmapped and closed (which ends its exports) outside the lock.
        drop(alloc);
        Ok(())
    }

    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo {
        self.mem.lock().info(ptr)
    }

    fn create_event(&self, props: EventProperties) -> Result<Arc<dyn sycl_backend::Event>> {
        Ok(Event::standalone(props)?)
    }

    fn mem_granularity(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        _mode: GranularityMode,
    ) -> Result<usize> {
        self.device_position(device)?;
        Ok(sys::page_size())
    }

    fn reserve_virtual_mem(&self, start: u64, size: usize) -> Result<u64> {
        self.vm.lock().reserve(start, size)
    }

    fn free_virtual_mem(&self, ptr: u64, size: usize) -> Result<()> {
        self.vm.lock().free(ptr, size)
    }

    fn create_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        size: usize,
        props: PhysicalMemProperties,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        self.device_position(device)?;
        if props.enable_ipc && !device.has(Aspect::ExtOneapiIpcPhysicalMemory) {
            return Err(Error::unsupported(
                Aspect::ExtOneapiIpcPhysicalMemory,
                "physical_mem with enable_ipc",
            ));
        }
        Ok(Arc::new(PhysicalMem::create(
            device.clone(),
            size,
            props.enable_ipc,
        )?))
    }

    fn map_physical(
        &self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        self.vm.lock().map(ptr, size, mem, offset, mode)
    }

    unsafe fn unmap(&self, ptr: u64, size: usize) -> Result<()> {
        // SAFETY: forwarded contract: no pending command uses the range.
        unsafe { self.vm.lock().unmap(ptr, size) }
    }

    fn set_access_mode(&self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        self.vm.lock().set_access(ptr, size, mode)
    }

    fn get_access_mode(&self, ptr: u64, size: usize) -> Result<AccessMode> {
        self.vm.lock().get_access(ptr, size)
    }

    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        self.ipc_get_mem_impl(ptr)
    }

    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        self.ipc_put_mem_impl(payload)
    }

    fn ipc_open_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        self.ipc_open_mem_impl(device, import)
    }

    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract: no pending command uses the memory.
        unsafe { self.ipc_close_mem_impl(ptr) }
    }

    fn ipc_get_physical_mem(&self, mem: &Arc<dyn sycl_backend::PhysicalMem>) -> Result<IpcExport> {
        self.ipc_get_physical_mem_impl(mem)
    }

    fn ipc_put_physical_mem(&self, payload: &[u8]) -> Result<()> {
        self.ipc_put_physical_mem_impl(payload)
    }

    fn ipc_open_physical_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        self.ipc_open_physical_mem_impl(device, import)
    }

    fn ipc_get_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<IpcExport> {
        self.ipc_get_event_impl(event)
    }

    fn ipc_put_event(&self, payload: &[u8]) -> Result<()> {
        self.ipc_put_event_impl(payload)
    }

    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn sycl_backend::Event>> {
        self.ipc_open_event_impl(import)
    }
}
