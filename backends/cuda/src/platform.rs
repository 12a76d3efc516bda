//! The CUDA platform: one per driver, holding every device the driver reports.

use std::any::Any;
use std::sync::Arc;

use sycl_backend::{BackendKind, Error, PlatformInfo, Result};

use crate::context::Context;
use crate::device::Device;

/// The CUDA platform (`cuda::Platform`).
pub struct Platform {
    info: PlatformInfo,
    devices: Vec<Arc<Device>>,
    dyn_devices: Vec<Arc<dyn sycl_backend::Device>>,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Platform")
            .field("version", &self.info.version)
            .field("devices", &self.devices)
            .finish()
    }
}

impl Platform {
    pub(crate) fn new(driver_version: i32, devices: Vec<Arc<Device>>) -> Platform {
        let dyn_devices = devices
            .iter()
            .map(|d| d.clone() as Arc<dyn sycl_backend::Device>)
            .collect();
        Platform {
            info: PlatformInfo {
                name: "NVIDIA CUDA".into(),
                vendor: "NVIDIA Corporation".into(),
                version: format!(
                    "CUDA {}.{}",
                    driver_version / 1000,
                    (driver_version % 1000) / 10
                ),
            },
            devices,
            dyn_devices,
        }
    }
}

impl sycl_backend::Platform for Platform {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn info(&self) -> &PlatformInfo {
        &self.info
    }

    fn devices(&self) -> Vec<Arc<dyn sycl_backend::Device>> {
        self.dyn_devices.clone()
    }

    fn create_context(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
    ) -> Result<Arc<dyn sycl_backend::Context>> {
        let mut cuda = Vec::with_capacity(devices.len());
        for d in devices {
            let dev = sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::Cuda)?;
            let mine = self
                .devices
                .iter()
                .find(|p| p.cu == dev.cu)
                .ok_or_else(|| Error::invalid("device does not belong to this platform"))?;
            cuda.push(mine.clone());
        }
        Ok(Arc::new(Context::new(devices, cuda)?))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
