//! `sycl::context`.

use std::fmt;
use std::sync::Arc;

use crate::{Device, Errc, Error, Platform, Result};

pub(crate) struct ContextShared {
    pub(crate) inner: Arc<dyn sycl_backend::Context>,
    pub(crate) devices: Vec<Device>,
    pub(crate) platform: Platform,
    /// Programs built from `#[sycl::kernel]` definitions, and their status words.
    pub(crate) kernels: crate::kernel::KernelCache,
}

/// A context: the scope in which memory and events of one or more devices of one platform live.
///
/// Each platform has a default context ([`Platform::default_context`]); queues made without an
/// explicit context use it.
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<ContextShared>,
}

impl Context {
    /// A new context over `devices` (at least one, all of one platform).
    ///
    /// Its `#[sycl::kernel]` programs take the backend's form; on OpenCL, SPIR-V where every
    /// device takes it and OpenCL C elsewhere, unless the environment variable
    /// `SYCL_RS_KERNEL_IR` is `opencl_c` (see [`Context::with_kernel_ir`]).
    pub fn new(devices: &[Device]) -> Result<Context> {
        Context::create(devices, None)
    }

    /// A new context over `devices` whose `#[sycl::kernel]` programs take the form `ir`
    /// (whatever `SYCL_RS_KERNEL_IR` says): `Errc::FeatureNotSupported` where a device cannot
    /// take it (SPIR-V needs aspect `ext_oneapi_kernel_compiler_spirv`; each backend has its
    /// own other form).
    pub fn with_kernel_ir(devices: &[Device], ir: crate::kernel::KernelIr) -> Result<Context> {
        Context::create(devices, Some(ir))
    }

    /// The form of its `#[sycl::kernel]` programs.
    pub fn kernel_ir(&self) -> crate::kernel::KernelIr {
        self.shared.kernels.ir()
    }

    fn create(devices: &[Device], ir: Option<crate::kernel::KernelIr>) -> Result<Context> {
        let first = devices
            .first()
            .ok_or_else(|| Error::new(Errc::Invalid, "a context needs at least one device"))?;
        let platform = first.platform().clone();
        if let Some(other) = devices.iter().find(|d| d.platform() != &platform) {
            return Err(Error::new(
                Errc::Invalid,
                format!(
                    "devices {} and {} belong to different platforms",
                    first.name(),
                    other.name()
                ),
            ));
        }
        let raw: Vec<_> = devices.iter().map(|d| d.inner.clone()).collect();
        let inner = platform.shared.inner.create_context(&raw)?;
        let kernels = crate::kernel::KernelCache::new(inner.as_ref(), ir)?;
        Ok(Context {
            shared: Arc::new(ContextShared {
                inner,
                devices: devices.to_vec(),
                platform,
                kernels,
            }),
        })
    }

    /// The default context of `device`'s platform (of `device` alone on platforms that
    /// cannot make a context of all their devices: see [`Platform::default_context`]).
    pub fn default_for(device: &Device) -> Result<Context> {
        device.platform().default_context_for(device)
    }

    /// Its devices.
    pub fn devices(&self) -> &[Device] {
        &self.shared.devices
    }

    /// Its platform.
    pub fn platform(&self) -> &Platform {
        &self.shared.platform
    }

    /// Its backend.
    pub fn backend(&self) -> sycl_backend::BackendKind {
        self.shared.platform.backend()
    }

    pub(crate) fn raw(&self) -> &Arc<dyn sycl_backend::Context> {
        &self.shared.inner
    }

    /// `Errc::Invalid` unless `device` is one of this context's devices.
    pub(crate) fn check_device(&self, device: &Device) -> Result<()> {
        if self.shared.devices.contains(device) {
            Ok(())
        } else {
            Err(Error::new(
                Errc::Invalid,
                format!(
                    "device {} ({}) is not in this context",
                    device.name(),
                    device.backend()
                ),
            ))
        }
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}
impl Eq for Context {}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("backend", &self.backend())
            .field("devices", &self.shared.devices.len())
            .finish()
    }
}
