//! # sycl-backend-cuda: the CUDA driver-API backend of sycl-rs
//!
//! NVIDIA GPUs through `libcuda` (the driver, not the toolkit), loaded at run time with
//! cudarc's raw `sys` bindings. Three layers, as in cudarc:
//!
//! | layer | where | what |
//! |---|---|---|
//! | sys | `cudarc::driver::sys`, `cudarc::nvrtc::sys` | raw C functions |
//! | result | `result.rs` | one `fn(..) -> Result<_, sycl_backend::Error>` per driver call; checks the symbol exists first |
//! | backend | the other modules | the `sycl_backend` traits |
//!
//! | SYCL concept | CUDA object |
//! |---|---|
//! | platform | the driver ([`Platform`]) |
//! | device, aspects | `CUdevice` + attributes ([`Device`]) |
//! | context | the primary context of each device ([`Context`]) |
//! | queue | a non-blocking stream ([`Queue`]) |
//! | event | a `CUevent` ([`Event`]) |
//! | USM device / host / shared | `cuMemAlloc_v2` / `cuMemHostAlloc` / `cuMemAllocManaged` |
//! | kernel bundle, kernel | `CUmodule` from NVRTC cubin, PTX or cubin; `CUfunction` ([`KernelBundle`], [`Kernel`]) |
//! | physical_mem, virtual memory | `cuMemCreate`, `cuMemAddressReserve`, `cuMemMap` ([`PhysicalMem`]) |
//! | IPC | `cuIpc*` for memory and events, POSIX fds for physical memory (see [`ipc`]) |
//!
//! Process rules: CUDA must not be used in a child created by `fork()` after the parent
//! initialised it (spawn peers with `std::process::Command`). Every driver call happens with
//! the right primary context current on the calling thread.
//!
//! Loading never panics: [`load`] returns an error when `libcuda` is absent or unusable, and
//! every driver entry point is checked before the call, so a driver too old for a feature turns
//! that feature's aspect off (or its call into `Errc::FeatureNotSupported`) instead of aborting.

mod context;
mod device;
mod event;
pub mod ipc;
mod kernel;
mod platform;
mod queue;
#[macro_use]
mod result;
mod usm;
mod virtual_mem;

use std::sync::{Arc, Mutex, MutexGuard};

use sycl_backend::{BackendKind, Errc, Error, Result};

pub use context::Context;
pub use device::Device;
pub use event::Event;
pub use kernel::{compile_cubin, Kernel, KernelBundle};
pub use platform::Platform;
pub use queue::Queue;
pub use virtual_mem::PhysicalMem;

/// Locks a mutex, ignoring poisoning (the protected tables stay consistent between
/// statements, and a panic elsewhere must not take the backend down).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The loaded CUDA backend.
struct Backend {
    platforms: Vec<Arc<dyn sycl_backend::Platform>>,
}

impl sycl_backend::Backend for Backend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn platforms(&self) -> Vec<Arc<dyn sycl_backend::Platform>> {
        self.platforms.clone()
    }
}

/// Loads the CUDA backend: finds `libcuda`, calls `cuInit(0)` and enumerates the devices.
/// Fails with `Errc::Platform` when the driver is missing, cannot initialise, or reports no
/// device.
pub fn load() -> Result<Arc<dyn sycl_backend::Backend>> {
    if !result::driver_present() {
        return Err(Error::new(
            Errc::Platform,
            "the CUDA driver library (libcuda.so.1) was not found",
        ));
    }
    result::init::init().map_err(|e| {
        let msg = e.message().to_string();
        match e.native().cloned() {
            Some(n) => Error::with_native(Errc::Platform, msg, n),
            None => Error::new(Errc::Platform, msg),
        }
    })?;
    let version = result::init::driver_version()?;
    let count = result::device::count()?;
    if count <= 0 {
        return Err(Error::new(
            Errc::Platform,
            "the CUDA driver reports no device",
        ));
    }
    let mut devices = Vec::with_capacity(count as usize);
    for ordinal in 0..count {
        devices.push(Arc::new(device::Device::query(
            ordinal,
            ordinal as usize,
            version,
        )?));
    }
    Ok(Arc::new(Backend {
        platforms: vec![Arc::new(Platform::new(version, devices))],
    }))
}
