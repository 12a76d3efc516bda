//! Kernels: ranges and work-items, kernels written in Rust with [`macro@crate::kernel`], and
//! kernel bundles built from source.
//!
//! # Kernels in Rust
//!
//! `#[sycl::kernel]` turns a Rust function into a kernel that runs on every device with one
//! definition: the native CPU runs it as Rust, CUDA devices as CUDA C++ compiled by NVRTC,
//! Level Zero devices and OpenCL devices that take IL as SPIR-V built by sycl-rs, other OpenCL
//! devices as OpenCL C ([`KernelIr`], [`Context::with_kernel_ir`](crate::Context::with_kernel_ir)).
//! The function becomes a constructor of a launch, which
//! [`Queue::parallel_for`](crate::Queue::parallel_for) submits:
//!
//! ```
//! # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
//! #[sycl::kernel]
//! fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
//!     let i = global_id(0);
//!     y[i] = a * x[i] + y[i];
//! }
//!
//! let q = sycl::Queue::in_order(&sycl::Device::default_device()?)?;
//! let x = sycl::malloc_device::<f32>(1000, &q)?;
//! let y = sycl::malloc_device::<f32>(1000, &q)?;
//! q.fill(&x, 1.0f32, &[])?;
//! q.fill(&y, 2.0f32, &[])?;
//! q.parallel_for(sycl::Range::d1(1000), &[], saxpy(3.0, &x, &y))?.wait()?;
//! assert!(q.to_vec(&y)?.iter().all(|&v| v == 5.0));
//! # Ok::<(), sycl::Error>(())
//! ```
//!
//! The kernel language is a subset of Rust, checked at compile time (anything outside it is
//! an error at its span):
//! - types `bool`, `i32`, `u32`, `i64`, `u64`, `usize`, `f32`, `f64` (`f64` on devices with
//!   aspect `fp64`); parameters are scalars by value, and USM slices: `&[T]` is read, `&mut [T]`
//!   written; the launch passes any [`AsUsmRange`] (`&Usm<T>`,
//!   `&UsmRange<T>`) for either;
//! - `let`, `let mut`, arithmetic (integers wrap; division by zero fails), bit operations,
//!   comparisons, `as`, `if`/`else` (also as a value), `while`, `loop`, `for` over integer
//!   ranges, `break`, `continue`, `return`; calls of [`macro@crate::kernel_fn`] helpers (scalar
//!   and slice parameters: `dot(x, y)` passes the slices whole; host code calls them with a
//!   `[T]` or `Vec<T>`, see [`SliceRef`]); private arrays `let mut a = [0.0f32; 8];`; the
//!   methods `sqrt`, `exp`, `ln`, `sin`, `cos`, `powf`, `mul_add`, `min`, `max`, `abs`,
//!   `floor`, `ceil`, `tanh`, `exp2`, `log2`, `log10`, `trunc`, `round`, `copysign`, `atan2`,
//!   `hypot`, `recip`, `fract`, `powi`, `is_nan`, `is_finite`, `clamp`, `rsqrt` and `erf`
//!   (not std methods: the device's, within 2 and 16 ulp; spec/kernels.md), and on integers
//!   `saturating_add`, `saturating_sub`, `wrapping_add`, `wrapping_sub`, `wrapping_mul`,
//!   `rotate_left`, `rotate_right`, `count_ones`, `leading_zeros`, `trailing_zeros`; `len` of
//!   slices;
//! - work-item queries [`global_id`], [`local_id`], [`group_id`], [`global_range`],
//!   [`local_range`], [`group_range`] (dimension 0 to 2, a literal); work-group local arrays
//!   (`let tile = local_array::<f32, 256>();` at the top of the kernel), [`barrier`], group
//!   reductions [`group_sum`], [`group_min`], [`group_max`]; atomics [`atomic_load`],
//!   [`atomic_store`], [`atomic_exchange`], [`atomic_compare_exchange`], [`atomic_fetch_add`],
//!   [`atomic_fetch_sub`], [`atomic_fetch_min`], [`atomic_fetch_max`], [`atomic_fetch_and`],
//!   [`atomic_fetch_or`], [`atomic_fetch_xor`] on slices and local arrays, with an optional
//!   [`Ordering`] and [`MemoryScope`], and [`atomic_fence`];
//! - sub-groups (devices with aspect `ext_sycl_rs_sub_groups`): queries [`sub_group_local_id`],
//!   [`sub_group_local_range`], [`sub_group_max_local_range`], [`sub_group_id`],
//!   [`sub_group_range`]; collectives [`sub_group_broadcast`], [`sub_group_shuffle`],
//!   [`sub_group_shift_left`], [`sub_group_shift_right`], [`sub_group_shuffle_xor`],
//!   [`sub_group_sum`], [`sub_group_min`], [`sub_group_max`];
//! - indexing is bounds-checked: an index out of bounds ends the work-item and the launch's
//!   event reports `Errc::Kernel`; `unsafe { *x.get_unchecked(i) }` opts out.
//!
//! spec/kernels.md has the whole language, how each construct maps to each backend, and the
//! rules for barriers (they must be reached by every work-item of a group: at the top level of
//! the kernel or in a `for` loop with uniform bounds, which the macro checks).
//!
//! `#[sycl::kernel(reqd_work_group_size(x))]` (or `(x, y)`, `(x, y, z)`, in the order of
//! [`Range::with_local`]) is SYCL's `reqd_work_group_size`: every launch must be an nd-range
//! with exactly those work-groups, or it is refused with `Errc::NdRange`. Device compilers
//! know the size as they build (they do anyway: each work-group size is a program of its
//! own), and the native CPU form leaves out its straight-code path for groups of one item,
//! which such a kernel never runs.
//!
//! ```
//! use sycl::kernel::*;
//!
//! /// Each group of 64 sums its items' values (a tree over local memory).
//! #[sycl::kernel(reqd_work_group_size(64))]
//! fn group_sums(x: &[u32], sums: &mut [u32]) {
//!     let tile = local_array::<u32, 64>();
//!     let l = local_id(0);
//!     tile[l] = x[global_id(0)];
//!     barrier();
//!     for k in 0..6u32 {
//!         let stride = 32 >> k;
//!         if l < stride {
//!             tile[l] = tile[l] + tile[l + stride];
//!         }
//!         barrier();
//!     }
//!     if l == 0 {
//!         sums[group_id(0)] = tile[0];
//!     }
//! }
//!
//! let q = sycl::Queue::in_order(&sycl::Device::native_cpu())?;
//! let x = sycl::malloc_shared::<u32>(128, &q)?;
//! let sums = sycl::malloc_shared::<u32>(2, &q)?;
//! q.write(&x, &[1; 128])?;
//! let r = Range::d1(128).with_local([64, 1, 1]);
//! q.parallel_for(r, &[], group_sums(&x, &sums))?.wait()?;
//! assert_eq!(q.to_vec(&sums)?, vec![64, 64]);
//! // Another work-group size is refused before anything runs.
//! let other = Range::d1(128).with_local([32, 1, 1]);
//! let e = q.parallel_for(other, &[], group_sums(&x, &sums)).err().expect("refused");
//! assert_eq!(e.code(), sycl::Errc::NdRange);
//! # Ok::<(), sycl::Error>(())
//! ```
//!
//! Inside a kernel these names need no `use`: the macro knows them (as bare names or as
//! `sycl::kernel::name`), so they are reserved there. The functions below document them;
//! called outside a kernel, they panic.
//!
//! # Half precision
//!
//! `half::f16` and `half::bf16` (through [`crate::half`]) are kernel types: parameters,
//! slice and local-array elements, locals. Each operation computes in `f32` and rounds to the
//! nearest half (ties to even), as the `half` crate's arithmetic does; math functions too.
//! They convert as the `half` crate does (`bf16::from_f32(x)`, `h.to_f32()`, `h.to_f64()`,
//! `f32::from(h)`), never with `as`; an unsuffixed float literal takes the half type of its use.
//!
//! ```
//! #![deny(unused_imports)]
//! use sycl::half::bf16;
//! use sycl::kernel::*;
//!
//! /// `y = a * x + y` on bfloat16 activations, accumulated in f32.
//! #[sycl::kernel]
//! fn axpy_bf16(a: f32, x: &[bf16], y: &mut [bf16]) {
//!     let i = global_id(0);
//!     y[i] = bf16::from_f32(a * x[i].to_f32() + y[i].to_f32());
//! }
//!
//! let q = sycl::Queue::in_order(&sycl::Device::native_cpu())?;
//! let x = sycl::malloc_shared::<bf16>(4, &q)?;
//! let y = sycl::malloc_shared::<bf16>(4, &q)?;
//! q.write(&x, &[bf16::from_f32(1.5); 4])?;
//! q.write(&y, &[bf16::from_f32(0.25); 4])?;
//! q.parallel_for(Range::d1(4), &[], axpy_bf16(2.0, &x, &y))?.wait()?;
//! assert_eq!(q.to_vec(&y)?, vec![bf16::from_f32(3.25); 4]);
//! # Ok::<(), sycl::Error>(())
//! ```
//!
//! # Generic kernels
//!
//! A kernel may take type parameters bounded by [`Float`] (f32, f64, f16, bf16), [`Int`]
//! (i32, u32, i64, u64) or [`Scalar`] (all eight). The macro builds one instance per type the
//! bound admits, each checked and translated like a kernel without generics; an instance that
//! is not in the language (an atomic on halves, say) is left out, and launching it is a
//! compile error whose message says why. Literals take the parameter's type; [`Float`]
//! converts with `T::from_f32(x)` and `v.to_f32()`.
//!
//! Const parameters (`const TILE: usize`, also `u32`, `i32`, `u64`, `i64`) are values in
//! expressions and loop bounds, and a `usize` one may be the length of a private array
//! (`[0.0f32; TILE]`, a register tile) or a local array (`local_array::<f32, TILE>()`). Each
//! value is a separate program, built with the value as a constant (loops over it unroll as
//! in hand-written code), once per context like any kernel. Accesses to arrays of a const
//! length stay checked in the source; the device compilers drop the checks the loops make
//! redundant.
//!
//! ```
//! use sycl::kernel::*;
//!
//! /// `y = a * x + y` for any float type.
//! #[sycl::kernel]
//! fn axpy<T: sycl::Float>(a: T, x: &[T], y: &mut [T]) {
//!     let i = global_id(0);
//!     y[i] = a * x[i] + y[i];
//! }
//!
//! let q = sycl::Queue::in_order(&sycl::Device::native_cpu())?;
//! let x = sycl::malloc_shared::<f64>(4, &q)?;
//! let y = sycl::malloc_shared::<f64>(4, &q)?;
//! q.write(&x, &[1.5; 4])?;
//! q.write(&y, &[0.25; 4])?;
//! q.parallel_for(Range::d1(4), &[], axpy(2.0f64, &x, &y))?.wait()?;
//! assert_eq!(q.to_vec(&y)?, vec![3.25; 4]);
//! # Ok::<(), sycl::Error>(())
//! ```

use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{Aspect, KernelSource, LaunchRange};

use crate::usm::{AsUsmRange, MemoryRecord};
use crate::{Context, Device, Errc, Error, Event, Queue, Result};

#[doc(hidden)]
#[path = "rt.rs"]
pub mod __rt;
mod codegen;
mod launch;

/// What a `#[sycl::kernel_fn]` helper's slice parameters take: a kernel's slices, or on the
/// host a `[T]` or `Vec<T>` (`dot(&x[..], &y[..])`).
pub use __rt::{SliceMutRef, SliceRef};
#[cfg(feature = "collective")]
pub(crate) use launch::{
    definition_of, keep, record, submit_definition, KeptLaunch, LaunchGraph, RecordedLaunch,
};
pub(crate) use launch::{KernelCache, KernelStatus};
pub use launch::{KernelIr, KERNEL_IR_ENV};
/// Memory orders of atomics and fences in kernels: Rust's (`Ordering::Acquire`).
pub use std::sync::atomic::Ordering;
pub use sycl_kernel_ir::MemoryScope;

/// A `#[repr(C)]` struct of kernel scalars (i32, u32, i64, u64, f32, f64, f16, bf16) and
/// arrays of them, without padding: kernels take it by value and in slices (`&[Particle]`),
/// read and write its fields, and copy it whole. Implement it with
/// `#[derive(Clone, Copy, sycl::KernelType)]` and `#[repr(C)]`, which checks the layout
/// against the compiler's and implements `bytemuck::Pod` (USM holds it; do not derive `Pod`
/// as well). Kernels name it by a name in scope in the crate that defines it.
///
/// ```
/// #[derive(Clone, Copy, sycl::KernelType)]
/// #[repr(C)]
/// struct Particle {
///     pos: [f32; 3],
///     mass: f32,
/// }
///
/// #[sycl::kernel]
/// fn drift(p: &mut [Particle], dz: f32) {
///     let i = sycl::kernel::global_id(0);
///     p[i].pos[2] += dz * p[i].mass;
/// }
/// # fn main() {}
/// ```
///
/// # Safety
/// Implemented only by the derive, whose assertions make the layout the one it declares.
// (The derive's `unsafe impl` is where the layout is checked; generated kernels trust it.)
#[allow(unsafe_code)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kernel struct",
    label = "kernels take structs that derive `sycl::KernelType`",
    note = "add `#[derive(Clone, Copy, sycl::KernelType)]` and `#[repr(C)]` to its definition"
)]
pub unsafe trait KernelType: Pod {
    /// Its size in bytes.
    #[doc(hidden)]
    const __SYCL_SIZE: u32;
    /// The parts the native CPU form accesses (`__rt::ElemTy::Struct`).
    #[doc(hidden)]
    const __SYCL_PARTS: u64;
}

// SAFETY: an array of kernel scalars is laid out as the scalars one after another (no
// padding: each scalar's size is a multiple of its alignment), which is what kernels read.
#[allow(unsafe_code)]
unsafe impl<T: Scalar, const N: usize> KernelType for [T; N] {
    const __SYCL_SIZE: u32 = {
        // (Kernels take arrays of at most 256 items; a size that does not fit is refused
        // where it is used, not truncated.)
        assert!(N * std::mem::size_of::<T>() <= u32::MAX as usize);
        (N * std::mem::size_of::<T>()) as u32
    };
    const __SYCL_PARTS: u64 = std::mem::size_of::<T>() as u64;
}

/// A number type of the kernel language: what a generic kernel's type parameter bounded by
/// `Scalar` may be (i32, u32, i64, u64, f32, f64, f16, bf16). Sealed.
pub trait Scalar: __rt::Element + Pod {}
/// A float type of the kernel language (f32, f64, f16, bf16). Sealed.
pub trait Float: Scalar {
    /// `x` rounded to this type (nearest, ties to even), as `half`'s `from_f32`.
    fn from_f32(x: f32) -> Self;
    /// This value as an `f32` (`f64` rounds to nearest).
    fn to_f32(self) -> f32;
}
/// An integer type of the kernel language (i32, u32, i64, u64). Sealed.
pub trait Int: Scalar {}

impl Scalar for i32 {}
impl Scalar for u32 {}
impl Scalar for i64 {}
impl Scalar for u64 {}
impl Scalar for f32 {}
impl Scalar for f64 {}
impl Scalar for half::f16 {}
impl Scalar for half::bf16 {}
impl Int for i32 {}
impl Int for u32 {}
impl Int for i64 {}
impl Int for u64 {}
impl Float for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}
impl Float for f64 {
    fn from_f32(x: f32) -> Self {
        x as f64
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
}
impl Float for half::f16 {
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}
impl Float for half::bf16 {
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}

/// What [`Queue::parallel_for`] runs: a closure over [`Item`]s (native CPU devices), or a
/// launch made by a [`macro@crate::kernel`] function (every device).
pub trait KernelFunctor {
    /// Submits the kernel over `range` after `deps`.
    fn submit(self, queue: &Queue, range: Range, deps: &[&Event]) -> Result<Event>;
}

impl<F> KernelFunctor for F
where
    F: Fn(Item) + Send + Sync + 'static,
{
    fn submit(self, queue: &Queue, range: Range, deps: &[&Event]) -> Result<Event> {
        queue.parallel_for_closure(range, deps, self)
    }
}

macro_rules! kernel_only {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $t:ty),*) -> $ret:ty) => {
        $(#[$doc])*
        ///
        /// Only inside a [`macro@crate::kernel`] function (which translates the call); it panics
        /// anywhere else.
        pub fn $name($($arg: $t),*) -> $ret {
            $(let _ = $arg;)*
            panic!(concat!("sycl::kernel::", stringify!($name), " is only available inside #[sycl::kernel] functions"))
        }
    };
}

kernel_only!(
    /// The work-item's global id in dimension `d` (a literal 0, 1 or 2).
    fn global_id(d: usize) -> usize
);
kernel_only!(
    /// The work-item's id inside its work-group in dimension `d` (nd-range launches).
    fn local_id(d: usize) -> usize
);
kernel_only!(
    /// The work-group's id in dimension `d` (nd-range launches).
    fn group_id(d: usize) -> usize
);
kernel_only!(
    /// The global range in dimension `d`.
    fn global_range(d: usize) -> usize
);
kernel_only!(
    /// The work-group size in dimension `d` (nd-range launches).
    fn local_range(d: usize) -> usize
);
kernel_only!(
    /// The number of work-groups in dimension `d` (nd-range launches).
    fn group_range(d: usize) -> usize
);
kernel_only!(
    /// Waits until every work-item of the group reached it; local and global memory written
    /// before it is visible to the group after it.
    fn barrier() -> ()
);

/// A work-group local array of `N` elements: `let tile = local_array::<f32, 256>();` at the
/// top of a kernel body. Its elements start with unspecified values.
///
/// Only inside a [`macro@crate::kernel`] function; it panics anywhere else.
pub fn local_array<T, const N: usize>() -> [T; N] {
    panic!("sycl::kernel::local_array is only available inside #[sycl::kernel] functions")
}

macro_rules! group_only {
    ($(#[$doc:meta])* fn $name:ident) => {
        $(#[$doc])*
        ///
        /// Called by every work-item of the group together, as `let s = ...(x);` at the top
        /// level of the kernel (or of a `for` loop with uniform bounds). Only inside a
        /// [`macro@crate::kernel`] function; it panics anywhere else.
        pub fn $name<T>(x: T) -> T {
            let _ = x;
            panic!(concat!("sycl::kernel::", stringify!($name), " is only available inside #[sycl::kernel] functions"))
        }
    };
}

group_only!(
    /// The sum of `x` over the work-group (wrapping for integers), returned to every work-item.
    fn group_sum
);
group_only!(
    /// The minimum of `x` over the work-group, returned to every work-item.
    fn group_min
);
group_only!(
    /// The maximum of `x` over the work-group, returned to every work-item.
    fn group_max
);

kernel_only!(
    /// The work-item's lane in its sub-group (nd-range launches, aspect
    /// `ext_sycl_rs_sub_groups`).
    fn sub_group_local_id() -> usize
);
kernel_only!(
    /// The size of the work-item's sub-group (smaller than [`sub_group_max_local_range`] in a
    /// partial sub-group).
    fn sub_group_local_range() -> usize
);
kernel_only!(
    /// The launch's sub-group size (native CPU and CUDA: 32; OpenCL: the driver's choice).
    fn sub_group_max_local_range() -> usize
);
kernel_only!(
    /// The sub-group's index in its work-group.
    fn sub_group_id() -> usize
);
kernel_only!(
    /// The number of sub-groups in the work-group.
    fn sub_group_range() -> usize
);

group_only!(
    /// The sum of `x` over the sub-group (wrapping for integers), returned to every lane.
    fn sub_group_sum
);
group_only!(
    /// The minimum of `x` over the sub-group, returned to every lane.
    fn sub_group_min
);
group_only!(
    /// The maximum of `x` over the sub-group, returned to every lane.
    fn sub_group_max
);

macro_rules! sub_group_only {
    ($(#[$doc:meta])* fn $name:ident($arg:ident)) => {
        $(#[$doc])*
        ///
        /// Called by every work-item of the group together, as `let y = ...(x, ..);` at the top
        /// level of the kernel (or of a `for` loop with uniform bounds); `x` is any number.
        /// Only inside a [`macro@crate::kernel`] function; it panics anywhere else.
        pub fn $name<T>(x: T, $arg: usize) -> T {
            let _ = (x, $arg);
            panic!(concat!("sycl::kernel::", stringify!($name), " is only available inside #[sycl::kernel] functions"))
        }
    };
}

sub_group_only!(
    /// `x` of lane `lane % size` of the sub-group; `lane` is the same in every work-item of the
    /// work-group (the macro checks it).
    fn sub_group_broadcast(lane)
);
sub_group_only!(
    /// `x` of lane `lane % size` of the sub-group, for any `lane` (SYCL `select_from_group`).
    fn sub_group_shuffle(lane)
);
sub_group_only!(
    /// `x` of lane `id + delta`, or the caller's own `x` where that lane is not in the
    /// sub-group.
    fn sub_group_shift_left(delta)
);
sub_group_only!(
    /// `x` of lane `id - delta`, or the caller's own `x` where `delta > id`.
    fn sub_group_shift_right(delta)
);
sub_group_only!(
    /// `x` of lane `id ^ mask`, or the caller's own `x` where that lane is not in the
    /// sub-group (SYCL `permute_group_by_xor`).
    fn sub_group_shuffle_xor(mask)
);

macro_rules! atomic_only {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $t:ty),*)) => {
        $(#[$doc])*
        ///
        /// On an element of a `&mut` slice parameter or a local array (`i32`, `u32`, `u64`;
        /// `atomic_fetch_add` also `f32`); bounds-checked. Returns the element's previous
        /// value. Relaxed and device scope unless an [`Ordering`] and a [`MemoryScope`]
        /// follow the arguments (`atomic_fetch_add(s, i, v, Ordering::AcqRel,
        /// MemoryScope::System)`). Only inside a [`macro@crate::kernel`] function; it panics
        /// anywhere else.
        pub fn $name<T>(slice: &mut [T], index: usize, $($arg: $t),*) -> T {
            let _ = (slice, index, $($arg),*);
            panic!(concat!("sycl::kernel::", stringify!($name), " is only available inside #[sycl::kernel] functions"))
        }
    };
}

atomic_only!(
    /// Adds `value` to `slice[index]`.
    fn atomic_fetch_add(value: T)
);
atomic_only!(
    /// Stores the minimum of `slice[index]` and `value`.
    fn atomic_fetch_min(value: T)
);
atomic_only!(
    /// Stores the maximum of `slice[index]` and `value`.
    fn atomic_fetch_max(value: T)
);
atomic_only!(
    /// Stores `new` if `slice[index]` is `current` (on failure the order less its release).
    fn atomic_compare_exchange(current: T, new: T)
);
atomic_only!(
    /// Stores `value`, returning the old one.
    fn atomic_exchange(value: T)
);
atomic_only!(
    /// Subtracts `value` (wrapping).
    fn atomic_fetch_sub(value: T)
);
atomic_only!(
    /// Bitwise and.
    fn atomic_fetch_and(value: T)
);
atomic_only!(
    /// Bitwise or.
    fn atomic_fetch_or(value: T)
);
atomic_only!(
    /// Bitwise xor.
    fn atomic_fetch_xor(value: T)
);

/// Reads `slice[index]` atomically (`&[T]` or `&mut [T]` of `i32 u32 u64 f32`, or a local
/// array); bounds-checked. Relaxed and device scope unless an [`Ordering`] (`Relaxed`,
/// `Acquire`, `SeqCst`) and a [`MemoryScope`] follow. Only inside a
/// [`macro@crate::kernel`] function; it panics anywhere else.
///
/// ```
/// use sycl::kernel::*;
/// // Waits (boundedly) for a flag another work-group, GPU or process sets with a release
/// // store, then reads what was written before it.
/// #[sycl::kernel]
/// fn consume(flag: &[u32], data: &[u32], out: &mut [u32]) {
///     let mut spins = 0u32;
///     while atomic_load(flag, 0, Ordering::Acquire, MemoryScope::System) == 0 && spins < 1000000 {
///         spins += 1;
///     }
///     out[0] = data[0];
/// }
/// ```
pub fn atomic_load<T>(slice: &[T], index: usize) -> T {
    let _ = (slice, index);
    panic!("sycl::kernel::atomic_load is only available inside #[sycl::kernel] functions")
}

/// Writes `slice[index]` atomically, as a statement (`&mut [T]` of `i32 u32 u64 f32`, or a
/// local array); bounds-checked. Relaxed and device scope unless an [`Ordering`] (`Relaxed`,
/// `Release`, `SeqCst`) and a [`MemoryScope`] follow. Only inside a
/// [`macro@crate::kernel`] function; it panics anywhere else.
pub fn atomic_store<T>(slice: &mut [T], index: usize, value: T) {
    let _ = (slice, index, value);
    panic!("sycl::kernel::atomic_store is only available inside #[sycl::kernel] functions")
}

/// `atomic_fence(order, scope);`: SYCL's `atomic_fence` (C++'s `atomic_thread_fence` at a
/// scope), over global and local memory; `order` is not `Relaxed`. Only inside a
/// [`macro@crate::kernel`] function; it panics anywhere else.
pub fn atomic_fence(order: Ordering, scope: MemoryScope) {
    let _ = (order, scope);
    panic!("sycl::kernel::atomic_fence is only available inside #[sycl::kernel] functions")
}

/// A 1-, 2- or 3-D range of work-items, optionally with a work-group size (an nd-range).
///
/// ```
/// let r = sycl::Range::d2(64, 32).with_local([8, 8, 1]);
/// assert_eq!(r.total()?, 64 * 32);
/// // A range whose work-item count overflows is an error, not a wrapped number.
/// let huge = sycl::Range::d3(1 << 32, 1 << 32, 2);
/// assert_eq!(huge.total().unwrap_err().code(), sycl::Errc::NdRange);
/// # Ok::<(), sycl::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub(crate) inner: LaunchRange,
}

impl Range {
    /// `range<1>(n)`.
    pub fn d1(n: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 1,
                global: [n, 1, 1],
                local: None,
            },
        }
    }

    /// `range<2>(r0, r1)`.
    pub fn d2(r0: usize, r1: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 2,
                global: [r0, r1, 1],
                local: None,
            },
        }
    }

    /// `range<3>(r0, r1, r2)`.
    pub fn d3(r0: usize, r1: usize, r2: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 3,
                global: [r0, r1, r2],
                local: None,
            },
        }
    }

    /// Makes it an nd-range with work-groups of `local` (unused dimensions 1).
    pub fn with_local(mut self, local: [usize; 3]) -> Range {
        self.inner.local = Some(local);
        self
    }

    /// Number of work-items; `Errc::NdRange` when it does not fit in `usize`.
    pub fn total(&self) -> Result<usize> {
        self.inner.total().ok_or_else(|| {
            Error::new(
                Errc::NdRange,
                format!(
                    "range {:?} has more work-items than fit in usize",
                    self.inner.global
                ),
            )
        })
    }

    /// Dimensions (1 to 3).
    pub fn dims(&self) -> u8 {
        self.inner.dims
    }

    /// Global extent per dimension.
    pub fn global(&self) -> [usize; 3] {
        self.inner.global
    }

    /// Work-group extent per dimension, for an nd-range.
    pub fn local(&self) -> Option<[usize; 3]> {
        self.inner.local
    }

    /// The range a `#[sycl::kernel]` launch over `self` runs as on `device`. An nd-range
    /// comes back as it is. A plain range gets the work-group size the runtime picks for the
    /// device, and its global range is rounded up to whole groups; the extra work-items run
    /// nothing. The native CPU runs plain ranges without work-groups, so there a plain range
    /// comes back as it is too. A hand-written kernel launched with this range runs in the
    /// same geometry as ours; a CPU device gets larger groups than a GPU.
    ///
    /// ```
    /// let device = sycl::Device::default_device()?;
    /// let r = sycl::Range::d1(1000).launched_on(&device)?;
    /// if let Some(local) = r.local() {
    ///     assert_eq!(r.global()[0] % local[0], 0);
    ///     assert!(r.global()[0] >= 1000);
    /// }
    /// # Ok::<(), sycl::Error>(())
    /// ```
    pub fn launched_on(&self, device: &Device) -> Result<Range> {
        self.inner.validate(device.max_work_group_size())?;
        if self.inner.local.is_some() || device.has(Aspect::ExtSyclRsClosureKernels) {
            return Ok(*self);
        }
        let gpu = launch::gpu_range(&self.inner, device)?;
        let back = |v| launch::gpu_order(v, self.inner.dims);
        Ok(Range {
            inner: LaunchRange {
                dims: self.inner.dims,
                global: back(gpu.global),
                local: gpu.local.map(back),
            },
        })
    }
}

/// One work-item of a closure kernel (`item` / `nd_item`). The last dimension varies fastest,
/// as in SYCL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    id: [usize; 3],
    range: [usize; 3],
    local: Option<[usize; 3]>,
    linear: usize,
    dims: u8,
}

impl Item {
    #[inline]
    pub(crate) fn from_linear(linear: usize, range: &LaunchRange) -> Item {
        let g = range.global;
        let id = match range.dims {
            1 => [linear, 0, 0],
            2 => [linear / g[1], linear % g[1], 0],
            _ => [
                linear / (g[1] * g[2]),
                (linear / g[2]) % g[1],
                linear % g[2],
            ],
        };
        Item {
            id,
            range: g,
            local: range.local,
            linear,
            dims: range.dims,
        }
    }

    /// Global id in dimension `d`.
    #[inline]
    pub fn get(&self, d: usize) -> usize {
        self.id[d]
    }

    /// Global id (unused dimensions 0).
    #[inline]
    pub fn id(&self) -> [usize; 3] {
        self.id
    }

    /// Global range.
    #[inline]
    pub fn range(&self) -> [usize; 3] {
        self.range
    }

    /// Linear id over the whole range.
    #[inline]
    pub fn linear_id(&self) -> usize {
        self.linear
    }

    /// Dimensions.
    #[inline]
    pub fn dims(&self) -> u8 {
        self.dims
    }

    /// Id inside the work-group (nd-range); equals the global id for a plain range.
    #[inline]
    pub fn local_id(&self, d: usize) -> usize {
        match self.local {
            Some(l) => self.id[d] % l[d],
            None => self.id[d],
        }
    }

    /// Work-group id (nd-range); 0 for a plain range.
    #[inline]
    pub fn group(&self, d: usize) -> usize {
        match self.local {
            Some(l) => self.id[d] / l[d],
            None => 0,
        }
    }
}

/// Kernel source for [`KernelBundle::build`]: OpenCL C, SPIR-V, CUDA C++, PTX or cubin.
pub type Source<'a> = KernelSource<'a>;

/// A built kernel bundle (`kernel_bundle<bundle_state::executable>`).
#[derive(Clone)]
pub struct KernelBundle {
    inner: Arc<dyn sycl_backend::KernelBundle>,
    context: Context,
}

impl KernelBundle {
    /// Builds `source` for `devices` of `context` with compiler `options`.
    ///
    /// Errors: `Errc::FeatureNotSupported` when a device cannot build that kind of source
    /// (aspects `ext_oneapi_kernel_compiler_opencl`, `..._spirv`, `ext_sycl_rs_kernel_compiler_cuda`);
    /// `Errc::Build` with the compiler log when the source does not build.
    pub fn build(
        context: &Context,
        devices: &[Device],
        source: Source<'_>,
        options: &str,
    ) -> Result<KernelBundle> {
        let devices = if devices.is_empty() {
            context.devices()
        } else {
            devices
        };
        let aspect = match source {
            KernelSource::OpenClC(_) => Aspect::ExtOneapiKernelCompilerOpencl,
            KernelSource::SpirV(_) => Aspect::ExtOneapiKernelCompilerSpirv,
            KernelSource::CudaC(_) | KernelSource::Ptx(_) | KernelSource::Cubin(_) => {
                Aspect::ExtSyclRsKernelCompilerCuda
            }
        };
        for d in devices {
            context.check_device(d)?;
            d.require(aspect, &format!("building {} kernels", source.language()))?;
        }
        let raw: Vec<_> = devices.iter().map(|d| d.inner.clone()).collect();
        let inner = context.raw().build_kernel_bundle(&raw, &source, options)?;
        Ok(KernelBundle {
            inner,
            context: context.clone(),
        })
    }

    /// Names of its kernels.
    pub fn kernel_names(&self) -> Vec<String> {
        self.inner.kernel_names()
    }

    /// One kernel; `Errc::Invalid` when there is none of that name.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        Ok(Kernel {
            inner: self.inner.kernel(name)?,
            context: self.context.clone(),
        })
    }
}

/// A kernel of a bundle.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<dyn sycl_backend::Kernel>,
    pub(crate) context: Context,
}

impl Kernel {
    /// Its name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Its argument count, where the backend can tell.
    pub fn num_args(&self) -> Option<u32> {
        self.inner.num_args()
    }
}

/// One argument of a kernel launch: made with [`KernelArg::usm`], [`KernelArg::scalar`] or
/// [`KernelArg::local`].
#[derive(Clone)]
pub struct KernelArg(pub(crate) ArgInner);

#[derive(Clone)]
pub(crate) enum ArgInner {
    /// A USM pointer to the start of a range; the record keeps the memory alive.
    Usm {
        ptr: u64,
        record: Arc<MemoryRecord>,
    },
    Scalar(Vec<u8>),
    Local(usize),
}

impl KernelArg {
    /// A USM pointer argument (keeps the memory alive while the kernel runs).
    pub fn usm<T: Pod>(memory: &impl AsUsmRange<T>) -> KernelArg {
        let range = memory.usm_range();
        KernelArg(ArgInner::Usm {
            ptr: range.as_ptr(),
            record: range.record.clone(),
        })
    }

    /// A scalar argument (its bytes, as the kernel declares it).
    pub fn scalar<T: Pod>(value: &T) -> KernelArg {
        KernelArg(ArgInner::Scalar(bytemuck::bytes_of(value).to_vec()))
    }

    /// `count` elements of work-group local memory.
    pub fn local<T>(count: usize) -> Result<KernelArg> {
        count
            .checked_mul(std::mem::size_of::<T>())
            .map(|n| KernelArg(ArgInner::Local(n)))
            .ok_or_else(|| Error::new(Errc::KernelArgument, "local memory size overflows"))
    }
}

impl std::fmt::Debug for KernelArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            ArgInner::Usm { ptr, .. } => write!(f, "Usm({ptr:#x})"),
            ArgInner::Scalar(b) => write!(f, "Scalar({} bytes)", b.len()),
            ArgInner::Local(n) => write!(f, "Local({n} bytes)"),
        }
    }
}

impl std::fmt::Debug for KernelBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBundle")
            .field("kernels", &self.kernel_names())
            .finish()
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name())
            .finish()
    }
}
