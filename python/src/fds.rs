//! Descriptors that cross into Python as integers (for `multiprocessing`, which passes them
//! between processes itself) and back.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

use pyo3::exceptions::PyOSError;
use pyo3::PyResult;

/// Our own duplicate of descriptor `fd`, which the caller keeps (and closes) as before.
pub fn duplicate(fd: RawFd) -> PyResult<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC reads no memory; on a number that is not an open descriptor it
    // fails with EBADF. The new descriptor it returns is ours alone, so owning it is sound.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(PyOSError::new_err(format!(
            "descriptor {fd}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `new` is a fresh descriptor nobody else owns (above).
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Gives `fd` up to the caller (Python closes it with `os.close`).
pub fn release(fd: OwnedFd) -> RawFd {
    fd.into_raw_fd()
}
