//! `sycl::platform`.

use std::fmt;
use std::sync::{Arc, OnceLock};

use sycl_backend::BackendKind;

use crate::{Context, Device, Result};

pub(crate) struct PlatformShared {
    pub(crate) inner: Arc<dyn sycl_backend::Platform>,
    devices: OnceLock<Vec<Device>>,
    default_context: OnceLock<Result<Context>>,
    /// Default contexts of one device each, for platforms that cannot make a context of
    /// several devices (see `Platform::default_context_for`).
    single_device_contexts: parking_lot::Mutex<Vec<(usize, Context)>>,
}

impl PlatformShared {
    pub(crate) fn new(inner: Arc<dyn sycl_backend::Platform>) -> Self {
        PlatformShared {
            inner,
            devices: OnceLock::new(),
            default_context: OnceLock::new(),
            single_device_contexts: parking_lot::Mutex::new(Vec::new()),
        }
    }
}

/// A platform: one driver of one backend, and its devices.
///
/// ```
/// for platform in sycl::Platform::all() {
///     println!("{} ({}): {} device(s)", platform.name(), platform.backend(), platform.devices().len());
/// }
/// ```
#[derive(Clone)]
pub struct Platform {
    pub(crate) shared: Arc<PlatformShared>,
}

impl Platform {
    pub(crate) fn from_shared(shared: Arc<PlatformShared>) -> Self {
        Platform { shared }
    }

    /// Every platform of every backend that loaded, in the order level_zero, cuda, opencl,
    /// native_cpu.
    pub fn all() -> Vec<Platform> {
        crate::runtime::get().platforms.clone()
    }

    /// Its backend.
    pub fn backend(&self) -> BackendKind {
        self.shared.inner.backend()
    }

    /// `info::platform::name`.
    pub fn name(&self) -> &str {
        &self.shared.inner.info().name
    }

    /// `info::platform::vendor`.
    pub fn vendor(&self) -> &str {
        &self.shared.inner.info().vendor
    }

    /// `info::platform::version`.
    pub fn version(&self) -> &str {
        &self.shared.inner.info().version
    }

    /// Its devices.
    pub fn devices(&self) -> Vec<Device> {
        self.shared
            .devices
            .get_or_init(|| {
                self.shared
                    .inner
                    .devices()
                    .into_iter()
                    .map(|inner| Device::from_parts(inner, self.clone()))
                    .collect()
            })
            .clone()
    }

    /// The platform's default context, over all its devices (made once, then shared).
    /// `Errc::FeatureNotSupported` where the backend cannot keep USM coherent across the
    /// devices of one context (OpenCL on coarse-grained SVM, e.g. NVIDIA's OpenCL with
    /// several GPUs); [`Context::default_for`] then gives each device a context of its own.
    pub fn default_context(&self) -> Result<Context> {
        self.shared
            .default_context
            .get_or_init(|| Context::new(&self.devices()))
            .clone()
    }

    /// The default context for `device`: the platform's, or one of `device` alone where the
    /// platform cannot make a context of all its devices.
    pub(crate) fn default_context_for(&self, device: &Device) -> Result<Context> {
        match self.default_context() {
            Err(e) if e.code() == crate::Errc::FeatureNotSupported && self.devices().len() > 1 => {
                let mut cache = self.shared.single_device_contexts.lock();
                let index = device.index_in_platform();
                if let Some((_, ctx)) = cache.iter().find(|(i, _)| *i == index) {
                    return Ok(ctx.clone());
                }
                let ctx = Context::new(std::slice::from_ref(device))?;
                cache.push((index, ctx.clone()));
                Ok(ctx)
            }
            other => other,
        }
    }
}

impl PartialEq for Platform {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}
impl Eq for Platform {}

impl fmt::Debug for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Platform")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}
