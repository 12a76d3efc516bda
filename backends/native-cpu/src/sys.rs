//! Thin, safe wrappers over the Linux calls this backend is built from: `memfd_create`,
//! `mmap`/`munmap`/`mprotect`, `fstat` and the monotonic clock.
//!
//! Every mapping is owned by a [`Mapping`], which unmaps it on drop; every descriptor is an
//! [`OwnedFd`].

use std::ffi::c_void;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
use sycl_backend::{AccessMode, BackendKind, Errc, Error, Result};

/// The page size of this machine: the granularity of every mapping this backend makes.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// Raises the soft limit on open descriptors to the hard limit, once: every USM allocation,
/// physical memory object and IPC event holds a memfd.
pub(crate) fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            if let Err(e) = setrlimit(Resource::Nofile, raised) {
                log::debug!("native_cpu: cannot raise RLIMIT_NOFILE: {e}");
            }
        }
    });
}

/// An OS error of this backend, keeping the errno.
pub(crate) fn os_err(errc: Errc, what: impl std::fmt::Display, errno: Errno) -> Error {
    Error::os(errc, what, errno, BackendKind::NativeCpu)
}

/// `MemoryAllocation` for ENOMEM, else `Runtime`.
pub(crate) fn alloc_errc(errno: Errno) -> Errc {
    if errno == Errno::NOMEM
        || errno == Errno::NOSPC
        || errno == Errno::MFILE
        || errno == Errno::NFILE
    {
        Errc::MemoryAllocation
    } else {
        Errc::Runtime
    }
}

/// `x` rounded up to a multiple of `align` (a power of two); `None` on overflow.
pub(crate) fn round_up(x: usize, align: usize) -> Option<usize> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub(crate) fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// The seals every memfd of this backend carries from its creation on: its size can never
/// change (a process that shrank a shared file would make every other mapper of it die of
/// `SIGBUS`), and no further seal can be added (`F_SEAL_FUTURE_WRITE` would stop later
/// importers from mapping it writable).
pub(crate) const SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// A new memfd (close-on-exec) of `size` bytes, sealed with [`SEALS`].
pub(crate) fn memfd(name: &str, size: usize) -> Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| os_err(alloc_errc(e), "memfd_create", e))?;
    rustix::fs::ftruncate(&fd, size as u64).map_err(|e| {
        os_err(
            alloc_errc(e),
            format!("ftruncate of a memfd to {size} bytes"),
            e,
        )
    })?;
    rustix::fs::fcntl_add_seals(&fd, SEALS)
        .map_err(|e| os_err(Errc::Runtime, "sealing a memfd (F_ADD_SEALS)", e))?;
    Ok(fd)
}

/// Checks that a received descriptor is a memfd sealed like ours ([`SEALS`]): only then can
/// no other process change its size under our mappings. A memfd sealed against writes cannot
/// be mapped writable, so it is no export of ours either. Anything else (an unsealed or
/// write-sealed memfd, a regular file, a socket) is `Errc::Invalid`.
pub(crate) fn check_sealed(fd: impl AsFd, what: &str) -> Result<()> {
    let seals = rustix::fs::fcntl_get_seals(fd).map_err(|e| {
        os_err(
            Errc::Invalid,
            format!("{what}: the descriptor is not a sealable memfd"),
            e,
        )
    })?;
    if !seals.contains(SEALS) {
        return Err(Error::invalid(format!(
            "{what}: the memfd is not sealed against resizing (seals {seals:?}); refusing to map \
             a file another process could shrink"
        )));
    }
    if seals.intersects(SealFlags::WRITE | SealFlags::FUTURE_WRITE) {
        return Err(Error::invalid(format!(
            "{what}: the memfd is sealed against writes (seals {seals:?}): not an export of \
             sycl-rs, which shares writable memory"
        )));
    }
    Ok(())
}

/// What identifies a file: checked on import so a descriptor is known to be the exported one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    /// Inode number.
    pub ino: u64,
    /// Device number of the file system holding it.
    pub dev: u64,
}

/// The identity and size of the file behind `fd`.
#[allow(clippy::useless_conversion)]
pub(crate) fn file_id(fd: impl AsFd) -> Result<(FileId, u64)> {
    let st = rustix::fs::fstat(fd)
        .map_err(|e| os_err(Errc::Invalid, "fstat of an IPC descriptor", e))?;
    let id = FileId {
        ino: u64::from(st.st_ino),
        dev: u64::from(st.st_dev),
    };
    Ok((id, u64::try_from(st.st_size).unwrap_or(0)))
}

/// The protection flags of an access mode.
pub(crate) fn prot_of(mode: AccessMode) -> ProtFlags {
    match mode {
        AccessMode::None => ProtFlags::empty(),
        AccessMode::Read => ProtFlags::READ,
        AccessMode::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
    }
}

/// The `mprotect` flags of an access mode.
pub(crate) fn mprotect_of(mode: AccessMode) -> MprotectFlags {
    match mode {
        AccessMode::None => MprotectFlags::empty(),
        AccessMode::Read => MprotectFlags::READ,
        AccessMode::ReadWrite => MprotectFlags::READ | MprotectFlags::WRITE,
    }
}

/// An address range this process mapped and owns; unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    addr: usize,
    len: usize,
}

impl Mapping {
    /// Reserves `len` bytes of address space (`PROT_NONE`, private, anonymous, no swap
    /// reservation), at `hint` if that range is free (0 = anywhere).
    pub(crate) fn reserve(hint: usize, len: usize) -> Result<Mapping> {
        // SAFETY: without MAP_FIXED the kernel never replaces an existing mapping; the hint is
        // only a hint, so no memory that Rust code uses can be affected.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                hint as *mut c_void,
                len,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .map_err(|e| {
            os_err(
                alloc_errc(e),
                format!("reserving {len} bytes of address space"),
                e,
            )
        })?;
        Ok(Mapping {
            addr: ptr as usize,
            len,
        })
    }

    /// Maps `len` bytes of `fd` from `offset`, shared, anywhere.
    pub(crate) fn shared(
        fd: impl AsFd,
        len: usize,
        offset: u64,
        prot: ProtFlags,
    ) -> Result<Mapping> {
        // SAFETY: a null address without MAP_FIXED lets the kernel choose a free range, so no
        // existing mapping is touched.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                MapFlags::SHARED,
                fd,
                offset,
            )
        }
        .map_err(|e| os_err(alloc_errc(e), format!("mapping {len} bytes of a memfd"), e))?;
        Ok(Mapping {
            addr: ptr as usize,
            len,
        })
    }

    /// First address.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: this object owns [addr, addr+len) (it mapped it and nobody else unmaps it);
        // its owner guarantees no reference into the range outlives it.
        if let Err(e) = unsafe { rustix::mm::munmap(self.addr as *mut c_void, self.len) } {
            log::error!(
                "native_cpu: munmap({:#x}, {}) failed: {e}",
                self.addr,
                self.len
            );
        }
    }
}

/// Maps `len` bytes of `fd` at `offset` over `[addr, addr+len)` with `MAP_FIXED | MAP_SHARED`.
///
/// # Safety
/// `[addr, addr+len)` lies inside address space this backend reserved, and no Rust reference
/// into it is live (its old contents become unreachable).
pub(crate) unsafe fn map_fixed_shared(
    addr: usize,
    len: usize,
    fd: impl AsFd,
    offset: u64,
    prot: ProtFlags,
) -> Result<()> {
    // SAFETY: the caller guarantees the range is ours and unused.
    unsafe {
        rustix::mm::mmap(
            addr as *mut c_void,
            len,
            prot,
            MapFlags::SHARED | MapFlags::FIXED,
            fd,
            offset,
        )
    }
    .map(|_| ())
    .map_err(|e| {
        os_err(
            alloc_errc(e),
            format!("mapping {len} bytes at {addr:#x}"),
            e,
        )
    })
}

/// Replaces `[addr, addr+len)` by an inaccessible anonymous reservation.
///
/// # Safety
/// As for [`map_fixed_shared`].
pub(crate) unsafe fn map_fixed_none(addr: usize, len: usize) -> Result<()> {
    // SAFETY: the caller guarantees the range is ours and unused.
    unsafe {
        rustix::mm::mmap_anonymous(
            addr as *mut c_void,
            len,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
        )
    }
    .map(|_| ())
    .map_err(|e| {
        os_err(
            Errc::Runtime,
            format!("unmapping {len} bytes at {addr:#x}"),
            e,
        )
    })
}
