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
/// A panic whose payload is an [`Error`] (a kernel's `kernel_fail`, named by the kernel's
/// launch) is that error.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        if let Some(error) = payload.downcast_ref::<Error>() {
            return error.clone();
        }
        Error::new(
            Errc::Kernel,
            format!("{what} panicked: {}", panic_message(&*payload)),
        )
    })
}

/// The smallest chunk of work-items a closure kernel splits into.
pub(crate) const MIN_CHUNK_ITEMS: usize = INLINE_ITEMS / 4;

/// Calls `kernel` on chunks that cover `[0, total)` exactly once, over all cores; chunks hold
/// at least `min_chunk` indices, and ranges up to four such chunks run inline.
pub(crate) fn run_closure(kernel: &ClosureKernel, total: usize, min_chunk: usize) -> Result<()> {
    if total == 0 {
        return Ok(());
    }
    guarded("the kernel", || {
        let threads = rayon::current_num_threads().max(1);
        if total <= min_chunk * 4 || threads == 1 {
            kernel(0..total);
            return;
        }
        let chunk = total.div_ceil(threads * 4).max(min_chunk);
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
    // Two copy streams already saturate the memory bus of small machines; splitting there only
    // adds contention (measured on 2 cores: 0.8x of one memcpy), so only split on 4+ threads.
    if size >= PARALLEL_COPY && !overlap && rayon::current_num_threads() >= 4 {
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
/// The pattern is replicated into a small block that stays in L1, which is then copied over
/// the range: one write stream, like `memset` (doubling the filled prefix instead reads the
/// destination back and halves the speed).
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
    // Aligned 2-, 4- and 8-byte patterns: a typed fill, which compiles to wide vector stores.
    macro_rules! typed_fill {
        ($t:ty) => {
            if pattern.len() == std::mem::size_of::<$t>() && dst % std::mem::align_of::<$t>() == 0 {
                let value = <$t>::from_ne_bytes(pattern.try_into().expect("pattern width"));
                let n = size / std::mem::size_of::<$t>();
                // SAFETY: the caller guarantees `[dst, dst+size)` is writable and unaliased;
                // `dst` is aligned for the type and `n` elements cover exactly `size` bytes.
                unsafe { std::slice::from_raw_parts_mut(dst as *mut $t, n) }.fill(value);
                return;
            }
        };
    }
    if size < PARALLEL_COPY || rayon::current_num_threads() < 4 {
        typed_fill!(u16);
        typed_fill!(u32);
        typed_fill!(u64);
    }
    const BLOCK: usize = 4096;
    let reps = (BLOCK / pattern.len()).max(1);
    let block: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take(reps * pattern.len())
        .collect();
    if size >= PARALLEL_COPY && rayon::current_num_threads() >= 4 {
        // Chunks are whole multiples of the block, so each starts on a pattern boundary.
        let chunk = (4 << 20) / block.len() * block.len();
        (0..size.div_ceil(chunk)).into_par_iter().for_each(|c| {
            let off = c * chunk;
            // SAFETY: [off, off + n) lies inside the caller's range; chunks are disjoint.
            unsafe { fill_with_block((dst + off) as *mut u8, &block, chunk.min(size - off)) };
        });
    } else {
        // SAFETY: the caller guarantees the range.
        unsafe { fill_with_block(p, &block, size) };
    }
}

/// Copies `block` over `[p, p+size)` repeatedly (the last copy may be partial).
///
/// # Safety
/// `[p, p+size)` is valid for writes and does not overlap `block`.
unsafe fn fill_with_block(p: *mut u8, block: &[u8], size: usize) {
    let mut done = 0;
    while done < size {
        let n = block.len().min(size - done);
        // SAFETY: [done, done+n) lies inside the range; `block` is a separate buffer.
        unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), p.add(done), n) };
        done += n;
    }
}
