//! The process-wide registry of loaded backends and their platforms.

use std::sync::{Arc, OnceLock};

use sycl_backend::{Backend, BackendKind};

use crate::platform::{Platform, PlatformShared};

/// A backend that could not be loaded, and why (shown by `sycl-ls` and test skips).
#[derive(Clone, Debug)]
pub struct BackendLoadFailure {
    /// Which backend.
    pub backend: BackendKind,
    /// What went wrong (library missing, no driver, ...).
    pub reason: String,
}

pub(crate) struct Runtime {
    pub(crate) platforms: Vec<Platform>,
    pub(crate) failures: Vec<BackendLoadFailure>,
}

type Loader = fn() -> sycl_backend::Result<Arc<dyn Backend>>;

fn loaders() -> Vec<(BackendKind, Option<Loader>)> {
    vec![
        (
            BackendKind::LevelZero,
            #[cfg(feature = "level-zero")]
            Some(sycl_backend_level_zero::load as Loader),
            #[cfg(not(feature = "level-zero"))]
            None,
        ),
        (
            BackendKind::Cuda,
            #[cfg(feature = "cuda")]
            Some(sycl_backend_cuda::load as Loader),
            #[cfg(not(feature = "cuda"))]
            None,
        ),
        (
            BackendKind::OpenCl,
            #[cfg(feature = "opencl")]
            Some(sycl_backend_opencl::load as Loader),
            #[cfg(not(feature = "opencl"))]
            None,
        ),
        (
            BackendKind::NativeCpu,
            Some(sycl_backend_native_cpu::load as Loader),
        ),
    ]
}

pub(crate) fn get() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        // Computed once now so that the first IPC call does not pay for /proc and urandom.
        let _ = sycl_backend::ipc::ExporterId::current();
        let mut platforms = Vec::new();
        let mut failures = Vec::new();
        for (kind, loader) in loaders() {
            let Some(loader) = loader else {
                failures.push(BackendLoadFailure {
                    backend: kind,
                    reason: "not compiled in (cargo feature off)".into(),
                });
                continue;
            };
            // A backend must never take the process down: a panic while loading is a failure.
            match std::panic::catch_unwind(loader) {
                Ok(Ok(backend)) => {
                    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        backend.platforms()
                    }));
                    match found {
                        Ok(list) if list.is_empty() => {
                            log::info!("sycl-rs: backend {kind} loaded but reports no platform");
                            failures.push(BackendLoadFailure {
                                backend: kind,
                                reason: "driver loaded, no platform or device".into(),
                            });
                        }
                        Ok(list) => {
                            for inner in list {
                                platforms.push(Platform::from_shared(Arc::new(
                                    PlatformShared::new(inner),
                                )));
                            }
                        }
                        Err(_) => failures.push(BackendLoadFailure {
                            backend: kind,
                            reason: "panicked while enumerating platforms".into(),
                        }),
                    }
                }
                Ok(Err(err)) => {
                    log::info!("sycl-rs: backend {kind} not available: {err}");
                    failures.push(BackendLoadFailure {
                        backend: kind,
                        reason: err.to_string(),
                    });
                }
                Err(_) => {
                    log::warn!("sycl-rs: backend {kind} panicked while loading");
                    failures.push(BackendLoadFailure {
                        backend: kind,
                        reason: "panicked while loading".into(),
                    });
                }
            }
        }
        Runtime {
            platforms,
            failures,
        }
    })
}

/// Backends that contributed no platform in this process, with the reason.
pub fn backend_load_failures() -> Vec<BackendLoadFailure> {
    get().failures.clone()
}
