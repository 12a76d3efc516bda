//! `sycl::platform`.

use std::fmt;
use std::sync::{Arc, OnceLock};

use sycl_backend::BackendKind;

use crate::{Context, Device, Result};

pub(crate) struct PlatformShared {
    pub(crate) inner: Arc<dyn sycl_backend::Platform>,
    devices: OnceLock<Vec<Device>>,
    default_context: OnceLock<Result<Context>>,
}

impl PlatformShared {
    pub(crate) fn new(inner: Arc<dyn sycl_backend::Platform>) -> Self {
        PlatformShared {
            inner,
            devices: OnceLock::new(),
            default_context: OnceLock::new(),
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
    pub fn default_context(&self) -> Result<Context> {
        self.shared
            .default_context
            .get_or_init(|| Context::new(&self.devices()))
            .clone()
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
