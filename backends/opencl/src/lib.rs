//! # sycl-backend-opencl: the OpenCL backend of sycl-rs
//!
//! Any OpenCL 1.2+ platform the ICD loader lists becomes a sycl-rs platform. The loader
//! (`libOpenCL.so.1`, or the file `SYCL_RS_OPENCL_LIBRARY` names) is opened at run time: there
//! is no link-time dependency, and a machine without it gets an error from [`load`] and no
//! OpenCL platforms.
//!
//! | SYCL concept | OpenCL object | module |
//! |---|---|---|
//! | platform | `cl_platform_id` | [`platform`] |
//! | device, aspects | `cl_device_id` + `clGetDeviceInfo` | [`device`] |
//! | context | `cl_context` | [`context`] |
//! | USM | Intel USM, or SVM buffers | [`usm`] |
//! | queue | `cl_command_queue` | [`queue`] |
//! | event | `cl_event` (commands, markers, user events) | [`event`] |
//! | kernel bundle, kernel | `cl_program`, `cl_kernel` | [`kernel`] |
//!
//! Layers: [`sys`] (types, constants, the loaded function table), [`result`] (`cl_int` to
//! [`sycl_backend::Error`], info-query helpers), then the trait implementations.
//!
//! Not supported (the interface defaults answer `FeatureNotSupported` and the aspects are
//! false): virtual memory and every IPC entry point.

use std::sync::{Arc, OnceLock};

use sycl_backend::{BackendKind, Errc, Error, Result};

pub mod context;
pub mod device;
pub mod event;
pub mod kernel;
pub mod platform;
pub mod queue;
pub mod result;
pub mod sys;
pub mod usm;

pub use context::Context;
pub use device::Device;
pub use event::Event;
pub use kernel::{Kernel, KernelBundle};
pub use platform::Platform;
pub use queue::Queue;

/// An OpenCL handle (`cl_context`, `cl_event`, ...) as plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle(pub *mut std::ffi::c_void);

// SAFETY: OpenCL objects are thread-safe (OpenCL 1.1+ §A.2: every API call is thread-safe
// except clSetKernelArg and friends on one cl_kernel, which `kernel::Kernel` serialises).
// The pointer is an opaque id, never dereferenced by Rust.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// The OpenCL backend: the platforms found when it was loaded.
pub struct Backend {
    platforms: Vec<Arc<dyn sycl_backend::Platform>>,
}

impl sycl_backend::Backend for Backend {
    fn kind(&self) -> BackendKind {
        BackendKind::OpenCl
    }
    fn platforms(&self) -> Vec<Arc<dyn sycl_backend::Platform>> {
        self.platforms.clone()
    }
}

static BACKEND: OnceLock<Result<Arc<Backend>>> = OnceLock::new();

/// The variables that choose which drivers the ICD loader opens, as they were before the
/// drivers initialised. PoCL 5.0 sets `OCL_ICD_FILENAMES=libpocl.so.2` in the process while it
/// initialises (seen on the H100 machines); every process started afterwards then inherited it
/// and opened PoCL alone, so a child rank (or test child) found no NVIDIA OpenCL device.
struct LoaderEnv(Vec<(&'static str, Option<std::ffi::OsString>)>);

impl LoaderEnv {
    const VARS: [&'static str; 2] = ["OCL_ICD_FILENAMES", "OCL_ICD_VENDORS"];

    fn save() -> LoaderEnv {
        LoaderEnv(
            Self::VARS
                .iter()
                .map(|&name| (name, std::env::var_os(name)))
                .collect(),
        )
    }

    /// Puts back what a driver changed. A driver just called `setenv` from this thread at this
    /// point; undoing it right away races with other threads' `getenv` no more than its call did.
    fn restore(self) {
        for (name, before) in self.0 {
            if std::env::var_os(name) == before {
                continue;
            }
            log::debug!("opencl: a driver changed {name}; restoring it for child processes");
            match before {
                Some(value) => std::env::set_var(name, value),
                None => std::env::remove_var(name),
            }
        }
    }
}

/// Opens the OpenCL ICD loader and enumerates its platforms.
///
/// Fails with `Errc::Platform` when the loader cannot be opened or lacks a core entry point.
/// A loader with no driver installed loads fine and lists no platforms.
///
/// The work is done once per process and the result shared by later calls: drivers are not
/// all safe against concurrent first-time initialisation (PoCL 3.1 crashed in
/// `clGetDeviceInfo` when two threads enumerated at once), and the ICD loader's symbols
/// must stay mapped for the life of every object handed out.
pub fn load() -> Result<Arc<dyn sycl_backend::Backend>> {
    let backend = BACKEND.get_or_init(|| {
        // Leaked on purpose: the function table lives as long as the process, so every
        // object can hold a `&'static` to it.
        let api: &'static sys::Api = match sys::Api::load() {
            Ok(api) => Box::leak(Box::new(api)),
            Err(e) => {
                return Err(Error::new(
                    Errc::Platform,
                    format!("cannot load the OpenCL ICD loader: {e}"),
                ))
            }
        };
        let loader_env = LoaderEnv::save();
        let platforms = platform::Platform::enumerate(api);
        loader_env.restore();
        let platforms = platforms?
            .into_iter()
            .map(|p| p as Arc<dyn sycl_backend::Platform>)
            .collect();
        Ok(Arc::new(Backend { platforms }))
    });
    match backend {
        Ok(b) => Ok(b.clone() as Arc<dyn sycl_backend::Backend>),
        Err(e) => Err(e.clone()),
    }
}
