//! # sycl-rs: a SYCL-shaped runtime for Rust
//!
//! Pick a GPU or CPU, make queues, allocate USM memory, launch kernels, and share buffers and
//! events between processes on one node without copying.
//!
//! ## Design
//! This crate is the safe, validating layer (the part wgpu-core plays for wgpu). It checks
//! what users ask — aspects, contexts, bounds, handle formats — and owns lifetimes: every
//! piece of memory is reference-counted and waits for the commands that use it before it is
//! freed, closed or unmapped. Backends (`sycl-backend-*` crates: `level_zero`, `cuda`,
//! `opencl`, `native_cpu`) only translate checked requests into driver calls. They are chosen
//! at run time: a backend whose driver library is missing contributes no platform (see
//! [`backend_load_failures`]), so one binary runs on any machine. The native CPU backend runs
//! everywhere, with real memfd-backed memory that other processes can map.
//!
//! Optional features are aspects: a call that needs one the device lacks returns
//! `Errc::FeatureNotSupported` naming it, and [`Device::has`] says so in advance.
//!
//! | SYCL | sycl-rs |
//! |---|---|
//! | `platform`, `device`, `aspect` | [`Platform`], [`Device`], [`Aspect`] |
//! | device selectors, `ONEAPI_DEVICE_SELECTOR` | [`DeviceSelector`] |
//! | `context` | [`Context`] |
//! | `queue`, `property::queue::in_order` | [`Queue`], [`QueueProperties`] |
//! | `event`, `make_event` | [`Event`] |
//! | `malloc_device<T>` + `free` | [`malloc_device`] → [`Usm<T>`] (frees on drop) |
//! | `parallel_for(range, lambda)` | [`Queue::parallel_for`] with a [`macro@kernel`] function (every device) or a closure (native CPU) |
//! | `kernel_bundle` from source | [`KernelBundle`], [`Queue::launch`] |
//! | `physical_mem`, `reserve_virtual_mem` | [`virtual_mem`] |
//! | `ipc::memory`, `ipc::physical_memory`, `ipc::event` | [`ipc`] |
//!
//! ```
//! # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
//! use sycl::{Device, Queue, Range};
//! let q = Queue::in_order(&Device::default_device()?)?;
//! let a = sycl::malloc_device::<f32>(1 << 16, &q)?;
//! q.fill(&a, 2.0f32, &[])?;
//! let host = q.to_vec(&a)?;
//! assert!(host.iter().all(|&x| x == 2.0));
//! # Ok::<(), sycl::Error>(())
//! ```
#![deny(unsafe_code)]

// Generated kernel code names this crate `::sycl`, also inside it (unit tests).
extern crate self as sycl;

#[cfg(feature = "collective")]
pub mod collective;
mod context;
mod device;
mod event;
pub mod ipc;
pub mod kernel;
mod platform;
mod queue;
pub mod ranks;
mod runtime;
mod selector;
mod usm;
pub mod virtual_mem;

pub use context::Context;
pub use device::Device;
pub use event::Event;
/// The `half` crate, whose `f16` and `bf16` kernels and USM take: name them through this
/// re-export (`sycl::half::bf16`) so that the versions match.
pub use half;
pub use kernel::{
    Float, Int, Item, Kernel, KernelArg, KernelBundle, KernelFunctor, KernelType, Range, Scalar,
    Source,
};
pub use platform::Platform;
pub use queue::Queue;
pub use runtime::{backend_load_failures, BackendLoadFailure};
pub use selector::{DeviceFilter, DeviceSelector};
#[doc(hidden)]
pub use sycl_macros::__kernel_with_types;
/// Makes a function a kernel for every device: see [the kernel language](mod@kernel#kernels-in-rust).
pub use sycl_macros::kernel;
/// Makes a function callable from kernels: see [the kernel language](mod@kernel#kernels-in-rust).
pub use sycl_macros::kernel_fn;
/// Makes a `#[repr(C)]` struct a [`KernelType`] (kernels take it by value and in slices): see
/// [structs](mod@kernel#structs).
pub use sycl_macros::KernelType;
pub use usm::{
    get_pointer_device, get_pointer_type, malloc_device, malloc_host, malloc_shared, AsUsmRange,
    ForeignKind, ForeignMemory, ForeignReady, HostSlice, HostSliceMut, Usm, UsmRange, UsmView,
};
pub use virtual_mem::PhysicalMem;

pub use sycl_backend::{
    AccessMode, Aspect, BackendKind, DeviceType, Errc, Error, EventProperties, EventStatus,
    GranularityMode, KernelSource, NativeError, PhysicalMemProperties, ProfilingInfo,
    QueueProperties, Result, UsmKind,
};
