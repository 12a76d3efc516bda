//! OpenCL contexts.
//!
//! A [`Context`] owns one `cl_context` over devices of one platform and decides how USM is
//! provided for all of them (`usm.rs`): Intel USM when every device has
//! `cl_intel_unified_shared_memory`, else SVM when every device has buffer SVM, else none.
//!
//! IPC (spec/backends.md): neither Intel USM nor SVM can be exported to another process
//! (`cl_khr_external_memory` is import-only), but a device with fine-grained system SVM uses
//! any pointer of the process. On such devices device USM is the native CPU backend's
//! [`HostMemory`] (sealed memfd mappings), exported and opened with its handles and checks.
//! IPC events are its shared event pages on every device (`event.rs`). Virtual memory and
//! physical memory keep the interface defaults (`Errc::FeatureNotSupported`): OpenCL has no
//! address-space reservation.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use sycl_backend::ipc::{IpcExport, IpcImport, IpcObjectKind, OpenedMemory};
use sycl_backend::{
    Aspect, BackendKind, Error, EventProperties, KernelIr, KernelSource, PointerInfo,
    QueueProperties, Result, UsmKind,
};
use sycl_backend_native_cpu::host_ipc::{self, HostMemory, SharedEvent};

use crate::device::{Device, UsmSupport};
use crate::event::Event;
use crate::platform::Platform;
use crate::queue::Queue;
use crate::result::{check, error};
use crate::sys::*;
use crate::Handle;

/// One SVM allocation standing in for a USM allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SvmAlloc {
    /// What clSVMAlloc returned (differs from the key when we aligned by over-allocating).
    pub raw_base: u64,
    pub size: usize,
    pub kind: UsmKind,
    pub device_index: Option<usize>,
}

/// How a context provides USM.
pub(crate) enum ContextUsm {
    /// `cl_intel_unified_shared_memory`.
    Intel(UsmFns),
    /// SVM buffers plus our own registry of allocations (base -> allocation).
    Svm {
        fine_buffer: bool,
        registry: Mutex<BTreeMap<u64, SvmAlloc>>,
    },
    /// No USM.
    None,
}

/// The state a context shares with its queues, events and kernels.
pub(crate) struct ContextShared {
    pub api: &'static Api,
    pub raw: Handle,
    pub devices: Vec<Arc<dyn sycl_backend::Device>>,
    pub usm: ContextUsm,
    /// Intel USM allocations we aligned ourselves because the driver ignored the requested
    /// alignment (PoCL 5.0's `clHostMemAllocINTEL` does for 4096): driver base -> (the
    /// pointer handed out, the size asked for).
    pub realigned: Mutex<BTreeMap<u64, (u64, usize)>>,
    /// Device USM when every device has fine-grained system SVM (`DeviceCaps::host_memory_ipc`):
    /// sealed memfd mappings that `ipc::memory` exports and opens.
    pub host_mem: Option<HostMemory>,
    /// Waits on IPC events happen on the host at submission instead of through a user event:
    /// PoCL aborts the process when a user event with dependents fails (`queue.rs`, `gate`),
    /// which is how a waiter reports a peer that died.
    pub gate_on_host: bool,
}

impl ContextShared {
    /// The position of `device` in this context, if it is one of its devices.
    pub fn device_index(&self, device: &Arc<dyn sycl_backend::Device>) -> Option<usize> {
        let dev = device.as_any().downcast_ref::<Device>()?;
        self.index_of_raw(dev.id.0)
    }

    /// The position of the device with this id.
    pub fn index_of_raw(&self, id: cl_device_id) -> Option<usize> {
        self.devices.iter().position(|d| {
            d.as_any()
                .downcast_ref::<Device>()
                .is_some_and(|x| x.id.0 == id)
        })
    }
}

impl Drop for ContextShared {
    fn drop(&mut self) {
        if let ContextUsm::Svm { registry, .. } = &self.usm {
            let registry = registry.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(free) = self.api.clSVMFree {
                for (base, a) in registry.iter() {
                    log::debug!("opencl: freeing leaked SVM allocation {base:#x} with its context");
                    // SAFETY: `raw_base` came from clSVMAlloc on this context and was not
                    // freed; no queue or event of the context is left, so nothing uses it.
                    unsafe { free(self.raw.0, a.raw_base as *mut _) };
                }
            }
        }
        // SAFETY: the context was created by clCreateContext and this is its only owner.
        let rc = unsafe { (self.api.clReleaseContext)(self.raw.0) };
        if rc != CL_SUCCESS {
            log::error!(
                "opencl: clReleaseContext: {}",
                error(rc, "clReleaseContext")
            );
        }
    }
}

/// An OpenCL context.
pub struct Context {
    pub(crate) shared: Arc<ContextShared>,
}

impl Context {
    pub(crate) fn new(
        platform: &Platform,
        devices: &[Arc<dyn sycl_backend::Device>],
    ) -> Result<Self> {
        let api = platform.api;
        let mut raw_devices = Vec::with_capacity(devices.len());
        let mut kinds = Vec::with_capacity(devices.len());
        let mut host_memory_ipc = !devices.is_empty();
        let mut gate_on_host = false;
        for d in devices {
            let dev = sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::OpenCl)?;
            raw_devices.push(dev.id.0);
            kinds.push(dev.caps.usm);
            host_memory_ipc &= dev.caps.host_memory_ipc;
            gate_on_host |= dev.caps.failed_user_event_aborts;
        }
        let props = [
            CL_CONTEXT_PLATFORM,
            platform.id.0 as cl_context_properties,
            0,
        ];
        let mut rc = CL_SUCCESS;
        // SAFETY: `props` is a zero-terminated property list, `raw_devices` holds valid device
        // ids of that platform, no callback is installed.
        let ctx = unsafe {
            (api.clCreateContext)(
                props.as_ptr(),
                raw_devices.len() as cl_uint,
                raw_devices.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut rc,
            )
        };
        check(rc, "clCreateContext")?;
        let usm = match (platform.usm, kinds.as_slice()) {
            (Some(fns), k) if k.iter().all(|u| *u == UsmSupport::Intel) => ContextUsm::Intel(fns),
            (_, k) if k.iter().all(|u| matches!(u, UsmSupport::Svm { .. })) => ContextUsm::Svm {
                fine_buffer: k.iter().all(|u| {
                    matches!(
                        u,
                        UsmSupport::Svm {
                            fine_buffer: true,
                            ..
                        }
                    )
                }),
                registry: Mutex::new(BTreeMap::new()),
            },
            _ => ContextUsm::None,
        };
        Ok(Context {
            shared: Arc::new(ContextShared {
                api,
                raw: Handle(ctx),
                devices: devices.to_vec(),
                usm,
                realigned: Mutex::new(BTreeMap::new()),
                host_mem: host_memory_ipc.then(HostMemory::new),
                gate_on_host,
            }),
        })
    }

    /// The `cl_context`.
    pub fn raw(&self) -> cl_context {
        self.shared.raw.0
    }

    /// The memfd memory of a context whose devices all have fine-grained system SVM.
    fn host_memory(&self, what: &str) -> Result<&HostMemory> {
        self.shared.host_mem.as_ref().ok_or_else(|| {
            Error::unsupported(
                Aspect::ExtOneapiIpcMemory,
                format!(
                    "{what} (OpenCL shares memory only on devices with fine-grained system SVM)"
                ),
            )
        })
    }
}

impl sycl_backend::Context for Context {
    /// SPIR-V where every device takes IL (measured as fast or faster for every bench
    /// kernel on Intel's CPU runtime, and faster to build: spec/kernels.md), then OpenCL C.
    fn kernel_forms(&self) -> Vec<KernelIr> {
        let il = self
            .devices()
            .iter()
            .all(|d| d.has(Aspect::ExtOneapiKernelCompilerSpirv));
        if il {
            vec![KernelIr::SpirV, KernelIr::OpenClC]
        } else {
            vec![KernelIr::OpenClC]
        }
    }

    fn kernel_build_options(&self, form: KernelIr) -> &'static str {
        match form {
            KernelIr::SpirV | KernelIr::OpenClC => {
                sycl_backend::exact_f32_division_option(self.devices())
            }
            _ => "",
        }
    }

    fn backend(&self) -> BackendKind {
        BackendKind::OpenCl
    }
    fn devices(&self) -> &[Arc<dyn sycl_backend::Device>] {
        &self.shared.devices
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn create_queue(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Arc<dyn sycl_backend::Queue>> {
        Ok(Arc::new(Queue::new(&self.shared, device, props)?))
    }

    fn usm_alloc(
        &self,
        kind: UsmKind,
        device: Option<&Arc<dyn sycl_backend::Device>>,
        size: usize,
        align: usize,
    ) -> Result<u64> {
        crate::usm::alloc(&self.shared, kind, device, size, align)
    }

    unsafe fn usm_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { crate::usm::free(&self.shared, ptr) }
    }

    fn usm_pointer_info(&self, ptr: u64) -> PointerInfo {
        crate::usm::pointer_info(&self.shared, ptr)
    }

    fn create_event(&self, props: EventProperties) -> Result<Arc<dyn sycl_backend::Event>> {
        if props.enable_ipc && props.enable_profiling {
            return Err(Error::invalid(
                "an event cannot have both enable_ipc and enable_profiling",
            ));
        }
        if props.enable_ipc {
            let page = SharedEvent::standalone(props)?;
            return Ok(Arc::new(Event::shared(self.shared.clone(), page)));
        }
        Ok(Arc::new(Event::standalone(self.shared.clone())))
    }

    fn ipc_reads(&self, exporter: BackendKind, kind: IpcObjectKind) -> bool {
        // Memory and events of both backends are the same memfds, in the same payloads.
        exporter == BackendKind::OpenCl
            || (exporter == BackendKind::NativeCpu
                && matches!(kind, IpcObjectKind::Memory | IpcObjectKind::Event))
    }

    fn ipc_get_mem(&self, ptr: u64) -> Result<IpcExport> {
        self.host_memory("ipc::memory::get")?.export(ptr)
    }

    fn ipc_put_mem(&self, payload: &[u8]) -> Result<()> {
        self.host_memory("ipc::memory::put")?.put(payload)
    }

    fn ipc_open_mem(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<OpenedMemory> {
        let index = self
            .shared
            .device_index(device)
            .ok_or_else(|| Error::invalid("the device is not one of the context's devices"))?;
        self.host_memory("ipc::memory::open")?.open(index, import)
    }

    unsafe fn ipc_close_mem(&self, ptr: u64) -> Result<()> {
        // SAFETY: forwarded contract: no pending command uses the memory.
        unsafe { self.host_memory("ipc::memory::close")?.close(ptr) }
    }

    fn ipc_get_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<IpcExport> {
        let ours = sycl_backend::downcast::<Event>(event.as_any(), "event", BackendKind::OpenCl)?;
        match ours.shared_page() {
            Some(page) => host_ipc::export_event(page),
            None => Err(Error::invalid(
                "ipc::event::get: the event was not made with the enable_ipc property",
            )),
        }
    }

    fn ipc_put_event(&self, payload: &[u8]) -> Result<()> {
        host_ipc::put_event(payload)
    }

    fn ipc_open_event(&self, import: IpcImport<'_>) -> Result<Arc<dyn sycl_backend::Event>> {
        let page = host_ipc::open_event(import)?;
        Ok(Arc::new(Event::shared(self.shared.clone(), page)))
    }

    fn build_kernel_bundle(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
        source: &KernelSource<'_>,
        options: &str,
    ) -> Result<Arc<dyn sycl_backend::KernelBundle>> {
        Ok(Arc::new(crate::kernel::KernelBundle::build(
            &self.shared,
            devices,
            source,
            options,
        )?))
    }
}
