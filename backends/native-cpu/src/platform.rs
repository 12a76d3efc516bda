//! The one platform of the native CPU backend.

use std::any::Any;
use std::sync::Arc;

use sycl_backend::{downcast, BackendKind, Error, PlatformInfo, Result};

use crate::context::Context;
use crate::device::Device;

/// `sycl-rs native CPU`: one device, the host CPU.
pub struct Platform {
    info: PlatformInfo,
    devices: Vec<Arc<dyn sycl_backend::Device>>,
}

impl Platform {
    pub(crate) fn new() -> Platform {
        let device: Arc<dyn sycl_backend::Device> = Arc::new(Device::new(0));
        Platform {
            info: PlatformInfo {
                name: "sycl-rs native CPU".to_owned(),
                vendor: "sycl-rs".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
            devices: vec![device],
        }
    }
}

impl sycl_backend::Platform for Platform {
    fn backend(&self) -> BackendKind {
        BackendKind::NativeCpu
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
        for device in devices {
            downcast::<Device>(device.as_any(), "device", BackendKind::NativeCpu)?;
            if !self.devices.iter().any(|d| d.index() == device.index()) {
                return Err(Error::invalid(
                    "the device does not belong to this platform",
                ));
            }
        }
        Ok(Arc::new(Context::new(devices.to_vec())))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
