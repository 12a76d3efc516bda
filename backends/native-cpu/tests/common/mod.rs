//! Shared helpers of the native CPU backend tests.
#![allow(dead_code)]

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use sycl_backend::ipc::{ExporterId, IpcExport, IpcImport};
use sycl_backend::{Context, Device, Platform, Queue, QueueProperties};

pub struct Env {
    pub platform: Arc<dyn Platform>,
    pub device: Arc<dyn Device>,
    pub ctx: Arc<dyn Context>,
}

pub fn env() -> Env {
    let backend = sycl_backend_native_cpu::load().expect("the native backend always loads");
    let platforms = backend.platforms();
    assert_eq!(platforms.len(), 1);
    let platform = platforms[0].clone();
    let device = platform.devices()[0].clone();
    let ctx = platform
        .create_context(std::slice::from_ref(&device))
        .expect("context");
    Env {
        platform,
        device,
        ctx,
    }
}

impl Env {
    pub fn queue(&self, in_order: bool, enable_profiling: bool) -> Arc<dyn Queue> {
        self.ctx
            .create_queue(
                &self.device,
                QueueProperties {
                    in_order,
                    enable_profiling,
                },
            )
            .expect("queue")
    }
}

pub fn dup(fd: RawFd) -> OwnedFd {
    // SAFETY: the exporter keeps `fd` open while the test runs.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_dupfd_cloexec(borrowed, 0).expect("dup")
}

/// An import of `export` in this very process, as `sycl` would make it.
pub fn import_of(export: &IpcExport) -> IpcImport<'_> {
    IpcImport {
        payload: &export.payload,
        fds: export.fds.iter().map(|&fd| dup(fd)).collect(),
        exporter: ExporterId::current(),
        same_process: true,
    }
}

/// Reads `n` bytes at a host address.
pub fn read(ptr: u64, n: usize) -> Vec<u8> {
    // SAFETY: tests only read live mappings they made.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, n).to_vec() }
}

/// Writes bytes at a host address.
pub fn write(ptr: u64, bytes: &[u8]) {
    // SAFETY: tests only write live mappings they made.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, bytes.len()) }
}
