//! Contexts: USM, virtual memory and IPC bookkeeping for the CPU device.

use std::any::Any;
use std::sync::Arc;

use parking_lot::Mutex;
use sycl_backend::ipc::{IpcExport, IpcImport, IpcObjectKind, OpenedMemory};
use sycl_backend::{
    downcast, AccessMode, Aspect, BackendKind, Error, EventProperties, GranularityMode, KernelIr,
    PhysicalMemProperties, PointerInfo, QueueProperties, Result, UsmKind,
};

use crate::device::Device;
use crate::event::Event;
use crate::queue::Queue;
use crate::sys;
use crate::usm::HostMemory;
use crate::virtual_mem::{PhysicalMem, VirtualSpace};

/// A context of the native CPU backend.
pub struct Context {
    devices: Vec<Arc<dyn sycl_backend::Device>>,
    pub(crate) mem: HostMemory,
    pub(crate) vm: Mutex<VirtualSpace>,
}

impl Context {
    pub(crate) fn new(devices: Vec<Arc<dyn sycl_backend::Device>>) -> Context {
        Context {
            devices,
            mem: HostMemory::new(),
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
        self.mem.alloc(size, align, kind, device_index)
    }

    unsafe fn usm_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract: `ptr` came from `usm_alloc` and nothing uses it.
        unsafe { self.mem.free(ptr) }
    }

    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo {
        self.mem.pointer_info(ptr)
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

    fn ipc_reads(&self, exporter: BackendKind, kind: IpcObjectKind) -> bool {
        // OpenCL exports memory and events as this backend's memfds, in its payloads.
        exporter == BackendKind::NativeCpu
            || (exporter == BackendKind::OpenCl
                && matches!(kind, IpcObjectKind::Memory | IpcObjectKind::Event))
    }

    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        self.mem.export(ptr)
    }

    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        self.mem.put(payload)
    }

    fn ipc_open_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        self.mem.open(self.device_position(device)?, import)
    }

    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract: no pending command uses the memory.
        unsafe { self.mem.close(ptr) }
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
        crate::ipc::put_event(payload)
    }

    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn sycl_backend::Event>> {
        Ok(crate::ipc::open_event(import)?)
    }
}
