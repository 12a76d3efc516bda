//! Host-side execution of commands: copies, fills and closure kernels.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rayon::prelude::*;
use sycl_backend::{ClosureKernel, Errc, Error, Result};

/// Ranges up to this many work-items run directly on the queue's worker thread.
const INLINE_ITEMS: usize = 4096;

/// Copies of at least this many bytes are split over rayon's pool.
const PARALLEL_COPY: usize = 16 << 20;

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// Runs `f`, turning a panic into `Errc::Kernel` naming `what`.
pub(crate) fn guarded(what: &str, f: impl FnOnce()) -> Result<()> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        Error::new(
            Errc::Kernel,
            format!("{what} panicked: {}", panic_message(&*payload)),
        )
    })
}

/// Calls `kernel` on chunks that cover `[0, total)` exactly once, over all cores.
pub(crate) fn run_closure(kernel: &ClosureKernel, total: usize) -> Result<()> {
    if total == 0 {
        return Ok(());
    }
    guarded("the kernel", || {
        if total <= INLINE_ITEMS {
            kernel(0..total);
            return;
        }
        let threads = rayon::current_num_threads().max(1);
        let chunk = total.div_ceil(threads * 4).max(INLINE_ITEMS / 4);
        let chunks = total.div_ceil(chunk);
        (0..chunks).into_par_iter().for_each(|c| {
            let start = c * chunk;
            kernel(start..(start + chunk).min(total));
        });
    })
}

/// `memcpy` of `size` bytes (the ranges may overlap).
///
/// # Safety
/// Both ranges are valid for `size` bytes and not otherwise accessed meanwhile.
pub(crate) unsafe fn copy(dst: usize, src: usize, size: usize) {
    let overlap = dst < src.saturating_add(size) && src < dst.saturating_add(size);
    if size >= PARALLEL_COPY && !overlap {
        const CHUNK: usize = 4 << 20;
        (0..size.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
            let off = c * CHUNK;
            let n = CHUNK.min(size - off);
            // SAFETY: [off, off+n) lies inside both ranges, which do not overlap and are valid
            // for `size` bytes by the caller's contract; chunks are disjoint.
            unsafe {
                std::ptr::copy_nonoverlapping((src + off) as *const u8, (dst + off) as *mut u8, n)
            };
        });
    } else {
        // SAFETY: the caller guarantees both ranges are valid; `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) };
    }
}

/// Fills `size` bytes at `dst` with `pattern` repeated (`size` a multiple of its length).
///
/// # Safety
/// `[dst, dst+size)` is valid for writes and not otherwise accessed meanwhile.
pub(crate) unsafe fn fill(dst: usize, pattern: &[u8], size: usize) {
    let p = dst as *mut u8;
    if pattern.len() == 1 {
        // SAFETY: the caller guarantees the range is writable.
        unsafe { std::ptr::write_bytes(p, pattern[0], size) };
        return;
    }
    let first = pattern.len().min(size);
    // SAFETY: `first <= size` and the pattern is a distinct host buffer.
    unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p, first) };
    let mut filled = first;
    while filled < size {
        let n = filled.min(size - filled);
        // SAFETY: [0, filled) is initialised, [filled, filled+n) lies inside the range and the
        // two do not overlap. `filled` stays a multiple of the pattern length until the last
        // (partial) copy, so the pattern repeats.
        unsafe { std::ptr::copy_nonoverlapping(p, p.add(filled), n) };
        filled += n;
    }
}
