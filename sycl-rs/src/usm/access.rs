//! Host access to USM: borrows (`HostSlice`, `HostSliceMut`) and views (`UsmView`).
//!
//! A borrow is a plain Rust slice, so it exists only while nothing else may write the memory:
//! making one waits for the device commands that conflict with it and refuses while views
//! exist or another process may map the memory; while it lives, commands that would write the
//! memory (any command, for `HostSliceMut`) are refused ([`super::record`]).
//!
//! A view reads and writes single elements with atomic (relaxed) accesses of the element's
//! own width (or of its widest aligned part), the way `vm-memory` treats memory a guest may
//! change at any time: views, kernels, device copies and other processes may race on the same
//! elements without undefined behaviour; the value read is then one that some writer wrote
//! (per aligned 8-byte part, for wider elements).
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use bytemuck::Pod;

use super::record::MemoryRecord;
use crate::{Error, Result};

/// A shared host borrow of USM ([`crate::Usm::as_slice`]): derefs to `&[T]`.
///
/// While it lives, device commands may read the memory but not write it (they fail with
/// `Errc::Invalid`), and no view can be made of it.
pub struct HostSlice<'a, T> {
    record: &'a MemoryRecord,
    slice: &'a [T],
}

/// An exclusive host borrow of USM ([`crate::Usm::as_mut_slice`]): derefs to `&mut [T]`.
///
/// While it lives, every device command that uses the memory fails with `Errc::Invalid`.
pub struct HostSliceMut<'a, T> {
    record: &'a MemoryRecord,
    slice: &'a mut [T],
}

impl<'a, T: Pod> HostSlice<'a, T> {
    /// Borrows `len` elements at `record.ptr` (the caller's owner borrows the record for `'a`).
    pub(crate) fn new(record: &'a MemoryRecord, len: usize) -> Result<Self> {
        record.begin_host_borrow(false)?;
        let slice = if len == 0 {
            &[]
        } else {
            // SAFETY: the record owns `len * size_of::<T>()` host-accessible bytes at `ptr`,
            // aligned for T (allocations are aligned to at least align_of::<T>()), alive for
            // 'a (the owner is borrowed for 'a and holds the record). No one can write them
            // while this borrow lives: begin_host_borrow waited for every command that writes
            // them, refuses new writing commands and views until end_host_borrow, and refused
            // memory another process may map. T: Pod, so every bit pattern is a valid T.
            unsafe { std::slice::from_raw_parts(record.ptr as usize as *const T, len) }
        };
        Ok(HostSlice { record, slice })
    }
}

impl<'a, T: Pod> HostSliceMut<'a, T> {
    /// As [`HostSlice::new`], exclusive.
    pub(crate) fn new(record: &'a MemoryRecord, len: usize) -> Result<Self> {
        record.begin_host_borrow(true)?;
        let slice = if len == 0 {
            &mut []
        } else {
            // SAFETY: as in HostSlice::new, and nothing else may read or write the bytes while
            // this borrow lives: every command that used them completed, new commands, views
            // and other host borrows are refused until end_host_borrow, and the owner is
            // borrowed mutably (`Usm::as_mut_slice(&mut self)`), so this is the only slice.
            unsafe { std::slice::from_raw_parts_mut(record.ptr as usize as *mut T, len) }
        };
        Ok(HostSliceMut { record, slice })
    }
}

impl<T> Deref for HostSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> Deref for HostSliceMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T> Drop for HostSlice<'_, T> {
    fn drop(&mut self) {
        self.record.end_host_borrow();
    }
}

impl<T> Drop for HostSliceMut<'_, T> {
    fn drop(&mut self) {
        self.record.end_host_borrow();
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.slice.fmt(f)
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.slice.fmt(f)
    }
}

/// Element access to host-accessible USM for closure kernels and host threads: cheap to
/// clone, `Send + Sync`, bounds-checked, and it keeps the memory alive.
///
/// Every access is atomic (relaxed), in parts of the element's alignment (at most 8 bytes):
/// work-items that write the same element, other views, device commands and other processes
/// may race without undefined behaviour; the value read is then one some writer wrote (per
/// part, for elements wider than their alignment). While any view of the memory is alive, host
/// borrows (`as_slice`, `as_mut_slice`) are refused, and so are views that would access it in
/// parts of another width (a `u8` view beside a live `u32` view).
///
/// ```
/// use sycl::{Device, Queue, Range};
/// let dev = Device::native_cpu();
/// let q = Queue::in_order(&dev)?;
/// let hist = sycl::malloc_shared::<u32>(4, &q)?;
/// q.fill(&hist, 0u32, &[])?.wait()?;
/// let view = hist.view()?;
/// // Every work-item writes element 0: a race, but a defined one.
/// q.parallel_for(Range::d1(1000), &[], move |item: sycl::Item| view.set(0, item.get(0) as u32))?
///     .wait()?;
/// assert!(hist.as_slice()?[0] < 1000);
/// # Ok::<(), sycl::Error>(())
/// ```
pub struct UsmView<T> {
    record: Arc<MemoryRecord>,
    ptr: *mut T,
    len: usize,
    _marker: PhantomData<T>,
}

// SAFETY: a view only reads and writes Pod values (no references, no drop glue) through
// atomic accesses, in memory its `Arc<MemoryRecord>` keeps alive: using it from several
// threads at once is defined.
unsafe impl<T: Pod> Send for UsmView<T> {}
// SAFETY: see `Send`: every method takes `&self` and is atomic per element part.
unsafe impl<T: Pod> Sync for UsmView<T> {}

impl<T: Pod> UsmView<T> {
    /// A view of `len` elements at `ptr` inside `record` (the caller checked the bounds and
    /// that `ptr` is aligned for `T`).
    pub(crate) fn new(record: Arc<MemoryRecord>, ptr: u64, len: usize) -> Result<Self> {
        record.begin_view(part_width::<T>())?;
        Ok(UsmView {
            record,
            ptr: ptr as usize as *mut T,
            len,
            _marker: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn check(&self, i: usize) {
        assert!(
            i < self.len,
            "index {i} out of bounds of {} elements",
            self.len
        );
    }

    /// Reads element `i` (panics when out of bounds; inside a kernel that panic becomes an
    /// `Errc::Kernel` error of the command).
    #[inline]
    pub fn get(&self, i: usize) -> T {
        self.check(i);
        // SAFETY: `i < len`; the record keeps `len` host-accessible elements alive at `ptr`,
        // aligned for T (checked where the view was made).
        unsafe { atomic_load(self.ptr.add(i)) }
    }

    /// Writes element `i` (bounds-checked like [`UsmView::get`]).
    #[inline]
    pub fn set(&self, i: usize, value: T) {
        self.check(i);
        // SAFETY: as in `get`; T: Pod has no drop glue, so overwriting is fine.
        unsafe { atomic_store(self.ptr.add(i), value) }
    }

    /// Copies every element into `dst` (same length), element by element as [`UsmView::get`].
    ///
    /// Errors: `Errc::Invalid` when the lengths differ.
    pub fn copy_to_slice(&self, dst: &mut [T]) -> Result<()> {
        self.check_len(dst.len())?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: as in `get`: `i < len`.
            *d = unsafe { atomic_load(self.ptr.add(i)) };
        }
        Ok(())
    }

    /// Copies `src` (same length) into the elements, as [`UsmView::set`].
    ///
    /// Errors: `Errc::Invalid` when the lengths differ.
    pub fn copy_from_slice(&self, src: &[T]) -> Result<()> {
        self.check_len(src.len())?;
        for (i, &s) in src.iter().enumerate() {
            // SAFETY: as in `set`: `i < len`.
            unsafe { atomic_store(self.ptr.add(i), s) };
        }
        Ok(())
    }

    /// The elements in a new vector (as [`UsmView::copy_to_slice`]).
    pub fn to_vec(&self) -> Vec<T> {
        let mut out = vec![T::zeroed(); self.len];
        for (i, d) in out.iter_mut().enumerate() {
            // SAFETY: as in `get`: `i < len`.
            *d = unsafe { atomic_load(self.ptr.add(i)) };
        }
        out
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n == self.len {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "a slice of {n} elements for a view of {}",
                self.len
            )))
        }
    }
}

impl<T> Clone for UsmView<T> {
    fn clone(&self) -> Self {
        self.record.clone_view();
        UsmView {
            record: self.record.clone(),
            ptr: self.ptr,
            len: self.len,
            _marker: PhantomData,
        }
    }
}

impl<T> Drop for UsmView<T> {
    fn drop(&mut self) {
        self.record.end_view();
    }
}

impl<T> std::fmt::Debug for UsmView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsmView")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// The width of the atomic accesses for `T`: its alignment, at most 8 (its size is a
/// multiple of its alignment, so whole parts cover it).
const fn part_width<T>() -> usize {
    let a = align_of::<T>();
    if a >= 8 {
        8
    } else {
        a
    }
}

/// Reads `*p` with relaxed atomic loads of [`part_width`] bytes each.
///
/// # Safety
/// `p` is valid for reads of a `T` and aligned for `T`; every other access to those bytes
/// while this runs is atomic too (views), or outside this process's memory model (device
/// commands, other processes).
#[inline(always)]
unsafe fn atomic_load<T: Pod>(p: *const T) -> T {
    let mut out = MaybeUninit::<T>::uninit();
    macro_rules! parts {
        ($atomic:ty, $int:ty) => {{
            let n = size_of::<T>() / size_of::<$int>();
            let src = p as *const $atomic;
            let dst = out.as_mut_ptr() as *mut $int;
            for k in 0..n {
                // SAFETY: `p` is aligned for T, so to the part width, and valid for
                // size_of::<T>() bytes; `k < n` stays inside both; atomics of that width have
                // the integer's layout.
                unsafe { dst.add(k).write((*src.add(k)).load(Ordering::Relaxed)) };
            }
        }};
    }
    match part_width::<T>() {
        8 => parts!(AtomicU64, u64),
        4 => parts!(AtomicU32, u32),
        2 => parts!(AtomicU16, u16),
        _ => parts!(AtomicU8, u8),
    }
    // SAFETY: every byte of `out` was written above (the parts cover size_of::<T>()), and
    // T: Pod accepts any bit pattern.
    unsafe { out.assume_init() }
}

/// Writes `value` to `*p` with relaxed atomic stores of [`part_width`] bytes each.
///
/// # Safety
/// As [`atomic_load`], for writes.
#[inline(always)]
unsafe fn atomic_store<T: Pod>(p: *mut T, value: T) {
    macro_rules! parts {
        ($atomic:ty, $int:ty) => {{
            let n = size_of::<T>() / size_of::<$int>();
            let dst = p as *const $atomic;
            let src = &value as *const T as *const $int;
            for k in 0..n {
                // SAFETY: as in atomic_load; `value` is a local T, read in parts of its own
                // alignment or less.
                unsafe { (*dst.add(k)).store(src.add(k).read(), Ordering::Relaxed) };
            }
        }};
    }
    match part_width::<T>() {
        8 => parts!(AtomicU64, u64),
        4 => parts!(AtomicU32, u32),
        2 => parts!(AtomicU16, u16),
        _ => parts!(AtomicU8, u8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Rgb {
        r: u16,
        g: u16,
        b: u16,
    }

    /// Stores `value` into fresh memory and loads it back (one buffer per type: mixing atomic
    /// widths on the same bytes is what views of one record are kept from doing).
    fn round_trip<T: Pod + PartialEq + std::fmt::Debug>(value: T) {
        let mut buf = [0u64; 4];
        let p = buf.as_mut_ptr().cast::<T>();
        assert!(size_of::<T>() <= 32);
        // SAFETY: buf holds 32 bytes aligned to 8, enough for T (asserted), used only here.
        unsafe {
            atomic_store(p, value);
            assert_eq!(atomic_load(p), value);
        }
    }

    #[test]
    fn parts_cover_any_pod_width() {
        round_trip(1.5f64);
        round_trip([1u32, 2, 3]);
        round_trip(Rgb { r: 1, g: 2, b: 3 });
        round_trip([9u8; 5]);
        round_trip([7u64; 4]);
        round_trip(());
        assert_eq!(part_width::<u8>(), 1);
        assert_eq!(part_width::<Rgb>(), 2);
        assert_eq!(part_width::<[f32; 3]>(), 4);
        assert_eq!(part_width::<u128>(), 8);
    }

    /// Threads racing on the same elements through the accessors views use: defined behaviour
    /// (each value read is one some thread wrote, per part). Miri checks it:
    /// `cargo +nightly miri test -p sycl-rs --lib usm::access` (a plain `ptr::write`, as
    /// `UsmView::set` was, is reported there as a data race).
    #[test]
    fn racing_accesses_are_atomic() {
        struct Shared(*mut [u64; 4]);
        // SAFETY: the threads below only access the memory through the atomic accessors.
        unsafe impl Sync for Shared {}
        let mem = Shared(Box::into_raw(Box::new([0u64; 4])));
        std::thread::scope(|s| {
            for t in 1..=3u32 {
                let mem = &mem;
                s.spawn(move || {
                    let word = mem.0.cast::<u64>();
                    let third = mem.0.cast::<u32>().wrapping_add(2).cast::<[u32; 3]>();
                    for _ in 0..50 {
                        // SAFETY: 32 live bytes, aligned to 8; bytes 0..8 are only accessed as
                        // u64 parts and bytes 8..20 only as u32 parts, atomically.
                        unsafe {
                            atomic_store(word, u64::from(t) * 0x1_0000_0001);
                            let v = atomic_load(word);
                            assert_eq!(v >> 32, v & 0xffff_ffff);
                            atomic_store(third, [t; 3]);
                            let w = atomic_load(third);
                            assert!(w.iter().all(|&x| (1..=3).contains(&x)));
                        }
                    }
                });
            }
        });
        // SAFETY: made by Box::into_raw above, no thread uses it any more.
        drop(unsafe { Box::from_raw(mem.0) });
    }
}
