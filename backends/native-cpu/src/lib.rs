//! # sycl-backend-native-cpu: sycl-rs on the host CPU
//!
//! One platform (`sycl-rs native CPU`) with one device: the machine's CPU. It runs everywhere,
//! is the default device where no GPU exists, and implements every feature of the backend
//! contract except online compilation, including real cross-process IPC.
//!
//! ## Design
//!
//! | SYCL concept | here |
//! |---|---|
//! | USM (device, host, shared) | one `memfd` per allocation, mapped `MAP_SHARED`; a `BTreeMap` of live allocations answers pointer queries, interior pointers included |
//! | queue | a worker thread per queue runs commands in submission order; closure kernels fan out over rayon's pool |
//! | event | a 32-bit futex word `pending` (0 = complete) plus status and timestamps; waits spin briefly, then `FUTEX_WAIT` |
//! | IPC event | the same state in a page of its own `memfd`, mapped shared by every process that opens it; shared (non-private) futex ops wake across processes |
//! | virtual memory | `PROT_NONE` reservations; physical memory is a `memfd` mapped `MAP_FIXED` into them |
//! | IPC memory / physical memory | the payload names the memfd's inode, device and size; the descriptor itself travels beside it (dup, `pidfd_getfd` or `SCM_RIGHTS`, done by `sycl`) |
//!
//! Because every allocation is a file, an importer needs nothing but the payload and the
//! descriptor: memory it opened stays valid after the exporter frees it or exits.
//!
//! Every allocation holds a descriptor, so `load` raises the soft `RLIMIT_NOFILE` to the hard
//! limit (as the Go runtime does); a program that still runs out gets `MemoryAllocation`.
//!
//! Panics inside closure kernels and host tasks are caught; the command's event then reports
//! `Errc::Kernel` and the queue goes on.

mod context;
mod device;
mod event;
mod ipc;
mod kernel;
mod platform;
mod queue;
mod sys;
mod usm;
mod virtual_mem;

/// Memory and events in sealed memfds of the host, for the other backends whose devices use
/// host pointers as they are (OpenCL devices with fine-grained system SVM): the same
/// allocations, handle payloads and checks as this backend's, so memory and events exported
/// by either open in the other.
pub mod host_ipc {
    pub use crate::event::Event as SharedEvent;
    pub use crate::ipc::{export_event, open_event, put_event};
    pub use crate::usm::HostMemory;
}

use std::sync::Arc;

pub use context::Context;
pub use device::Device;
pub use event::Event;
pub use platform::Platform;
pub use queue::Queue;
pub use sys::page_size;
pub use virtual_mem::PhysicalMem;

use sycl_backend::BackendKind;

/// The native CPU backend: its one platform.
pub struct NativeCpuBackend {
    platforms: Vec<Arc<dyn sycl_backend::Platform>>,
}

impl sycl_backend::Backend for NativeCpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::NativeCpu
    }

    fn platforms(&self) -> Vec<Arc<dyn sycl_backend::Platform>> {
        self.platforms.clone()
    }
}

/// Loads the backend. It needs no driver, so this only fails if the machine cannot describe
/// its CPU at all (it never does on Linux).
pub fn load() -> sycl_backend::Result<Arc<dyn sycl_backend::Backend>> {
    sys::raise_fd_limit();
    let platform: Arc<dyn sycl_backend::Platform> = Arc::new(Platform::new());
    Ok(Arc::new(NativeCpuBackend {
        platforms: vec![platform],
    }))
}
