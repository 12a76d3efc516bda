//! OpenCL contexts.
//!
//! A [`Context`] owns one `cl_context` over devices of one platform and decides how USM is
//! provided for all of them (`usm.rs`): Intel USM when every device has
//! `cl_intel_unified_shared_memory`, else SVM when every device has buffer SVM, else none.
//!
//! Virtual memory and IPC keep the interface defaults (`Errc::FeatureNotSupported` naming
//! `ext_oneapi_virtual_mem` / `ext_oneapi_ipc_*`): OpenCL has no address-space reservation, and
//! neither Intel USM nor SVM can be exported to another process (`cl_khr_external_memory` is
//! import-only). So this backend has no `virtual_mem.rs` or `ipc.rs`.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use sycl_backend::{
    Aspect, BackendKind, Error, EventProperties, KernelIr, KernelSource, PointerInfo,
    QueueProperties, Result, UsmKind,
};

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
        for d in devices {
            let dev = sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::OpenCl)?;
            raw_devices.push(dev.id.0);
            kinds.push(dev.caps.usm);
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
            }),
        })
    }

    /// The `cl_context`.
    pub fn raw(&self) -> cl_context {
        self.shared.raw.0
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
            return Err(Error::unsupported(
                Aspect::ExtOneapiIpcEvent,
                "make_event with enable_ipc",
            ));
        }
        Ok(Arc::new(Event::standalone(self.shared.clone())))
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
