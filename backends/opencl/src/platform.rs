//! OpenCL platforms: one per ICD (driver) the loader lists.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use sycl_backend::{BackendKind, Errc, Error, PlatformInfo, Result};

use crate::context::Context;
use crate::device::{Device, UsmSupport};
use crate::result::{check, info_string, InfoFn};
use crate::sys::*;
use crate::Handle;

/// An OpenCL platform and its devices.
pub struct Platform {
    pub(crate) api: &'static Api,
    pub(crate) id: Handle,
    info: PlatformInfo,
    devices: Vec<Arc<dyn sycl_backend::Device>>,
    /// Intel USM entry points, when the platform has them.
    pub(crate) usm: Option<UsmFns>,
}

impl Platform {
    /// Every platform the loader lists; a platform whose devices fail to enumerate is logged
    /// and left out.
    pub(crate) fn enumerate(api: &'static Api) -> Result<Vec<Arc<Platform>>> {
        let mut n: cl_uint = 0;
        // SAFETY: asking for the count only, with a valid out-pointer.
        let rc = unsafe { (api.clGetPlatformIDs)(0, std::ptr::null_mut(), &mut n) };
        if rc == -1001 {
            // CL_PLATFORM_NOT_FOUND_KHR: a loader with no ICD installed.
            return Ok(Vec::new());
        }
        check(rc, "clGetPlatformIDs")?;
        let mut ids = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: `ids` holds `n` entries.
        let rc = unsafe { (api.clGetPlatformIDs)(n, ids.as_mut_ptr(), std::ptr::null_mut()) };
        check(rc, "clGetPlatformIDs")?;
        let mut out = Vec::new();
        for id in ids {
            match Platform::new(api, id) {
                Ok(p) => out.push(Arc::new(p)),
                Err(e) => log::warn!("opencl: skipping a platform: {e}"),
            }
        }
        Ok(out)
    }

    fn new(api: &'static Api, id: cl_platform_id) -> Result<Self> {
        let f = |param: cl_uint, size: usize, value: *mut c_void, size_ret: *mut usize| {
            // SAFETY: `id` came from clGetPlatformIDs; buffers are sized by the helper.
            unsafe { (api.clGetPlatformInfo)(id, param, size, value, size_ret) }
        };
        let f: InfoFn<'_> = &f;
        let info = PlatformInfo {
            name: info_string(f, CL_PLATFORM_NAME, "clGetPlatformInfo(CL_PLATFORM_NAME)")?,
            vendor: info_string(
                f,
                CL_PLATFORM_VENDOR,
                "clGetPlatformInfo(CL_PLATFORM_VENDOR)",
            )?,
            version: info_string(
                f,
                CL_PLATFORM_VERSION,
                "clGetPlatformInfo(CL_PLATFORM_VERSION)",
            )?,
        };
        // SAFETY: `id` came from clGetPlatformIDs of `api`.
        let usm = unsafe { UsmFns::load(api, id) };

        let mut n: cl_uint = 0;
        // SAFETY: count query with a valid out-pointer.
        let rc = unsafe {
            (api.clGetDeviceIDs)(id, CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut n)
        };
        let ids = if rc == CL_DEVICE_NOT_FOUND || n == 0 {
            Vec::new()
        } else {
            check(rc, "clGetDeviceIDs")?;
            let mut ids = vec![std::ptr::null_mut(); n as usize];
            // SAFETY: `ids` holds `n` entries.
            let rc = unsafe {
                (api.clGetDeviceIDs)(
                    id,
                    CL_DEVICE_TYPE_ALL,
                    n,
                    ids.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            check(rc, "clGetDeviceIDs")?;
            ids
        };
        let mut devices: Vec<Arc<dyn sycl_backend::Device>> = Vec::with_capacity(ids.len());
        for dev in ids {
            match Device::new(api, id, dev, devices.len(), usm.is_some()) {
                Ok(d) => devices.push(Arc::new(d)),
                Err(e) => log::warn!("opencl: skipping a device of platform {}: {e}", info.name),
            }
        }
        Ok(Platform {
            api,
            id: Handle(id),
            info,
            devices,
            usm,
        })
    }

    /// The `cl_platform_id`.
    pub fn raw(&self) -> cl_platform_id {
        self.id.0
    }
}

impl sycl_backend::Platform for Platform {
    fn backend(&self) -> BackendKind {
        BackendKind::OpenCl
    }
    fn info(&self) -> &PlatformInfo {
        &self.info
    }
    fn devices(&self) -> Vec<Arc<dyn sycl_backend::Device>> {
        self.devices.clone()
    }
    fn create_context(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
    ) -> Result<Arc<dyn sycl_backend::Context>> {
        if devices.is_empty() {
            return Err(Error::invalid("a context needs at least one device"));
        }
        for d in devices {
            let dev = sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::OpenCl)?;
            if dev.platform.0 != self.id.0 {
                return Err(Error::new(
                    Errc::Invalid,
                    "a context's devices must all belong to its platform",
                ));
            }
            // Coarse-grained SVM (our USM on NVIDIA's OpenCL) is only coherent at map/unmap
            // points, which USM has none of: in a two-GPU context NVIDIA's driver served
            // stale data across queues and refused kernel arguments. One device per context.
            let coarse = matches!(
                dev.caps.usm,
                UsmSupport::Svm {
                    fine_buffer: false,
                    ..
                }
            );
            if coarse && devices.len() > 1 {
                return Err(Error::new(
                    Errc::FeatureNotSupported,
                    format!(
                        "{} keeps USM (coarse-grained SVM) coherent only within a context of one \
                         device: make a context per device",
                        self.info.name
                    ),
                ));
            }
        }
        Ok(Arc::new(Context::new(self, devices)?))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
