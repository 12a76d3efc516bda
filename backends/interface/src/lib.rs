//! # sycl-backend: the contract between `sycl` and its backends
//!
//! sycl-rs splits like wgpu: the `sycl` crate validates what users ask (contexts, bounds,
//! aspects, handle formats) and owns lifetimes; each backend crate (`level_zero`, `cuda`,
//! `opencl`, `native_cpu`) translates checked requests into driver calls and reports only
//! errors the caller could not have foreseen.
//!
//! A backend crate exposes one function, `load() -> Result<Arc<dyn Backend>>`. When its driver
//! library is missing, `load` returns an error that `sycl` logs; the backend then contributes no
//! platforms. Every trait method exists on every backend; features a backend lacks answer
//! `Errc::FeatureNotSupported`, and the matching [`Aspect`] is false on its devices.
//!
//! | SYCL concept | trait |
//! |---|---|
//! | platform | [`Platform`] |
//! | device, aspects | [`Device`], [`DeviceInfo`], [`Aspect`] |
//! | context, USM, virtual memory, IPC | [`Context`] |
//! | queue, commands | [`Queue`] |
//! | event | [`Event`] |
//! | kernel bundle, kernel | [`KernelBundle`], [`Kernel`] |
//! | physical_mem | [`PhysicalMem`] |

mod aspect;
mod error;
pub mod ipc;
mod traits;
mod types;

pub use aspect::Aspect;
pub use error::{kernel_failure, Errc, Error, KernelFailCode, NativeError, Result};
pub use traits::*;
pub use types::*;
