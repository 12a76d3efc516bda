//! The IR of `#[sycl::kernel]` kernels, shared by the macro (which builds it, proves bounds
//! into it and encodes it) and the runtime (which decodes, validates and reads it).
//!
//! - [`Scalar`]: the one scalar type of the kernel language.
//! - [`ops`]: operators, queries, math, atomics, reductions and sub-group operations.
//! - [`bound`]: bounds conditions as trees ([`Bound`]), evaluated by one saturating `u64`
//!   interpreter, and the per-access [`Check`] state the bounds analysis writes.
//! - [`ir`]: a kernel or helper ([`Function`]), generic over the [`Stage`] that says what
//!   its nodes carry: the macro parses into a stage of its own (type variables, spans, helper
//!   paths), and [`Resolved`] is what it encodes and every back end reads.
//! - [`map`]: a function carried from one stage to another ([`map::map_function`]: the
//!   structure walked once, each node's payload from a [`map::StageMap`]).
//! - [`info`]: what a kernel needs of a device ([`KernelInfo`]).
//! - [`instantiate`](mod@instantiate): a const-generic kernel's template with its values.
//! - [`wire`]: the words the macro embeds in the program (encode and decode, one
//!   [`wire::MAGIC`] and [`wire::VERSION`]), and [`validate`](fn@crate::validate) of a decoded module.
//!
//! Nothing here knows a target: the C printers and the SPIR-V builder read a validated
//! [`Function`] and decide their own shapes from its facts.

pub mod bound;
pub mod info;
pub mod instantiate;
pub mod ir;
pub mod map;
pub mod ops;
pub mod ty;
pub mod validate;
pub mod wire;

pub use bound::{Bound, BoundCmp, BoundFn, Check};
pub use info::KernelInfo;
pub use instantiate::{instantiate, instantiate_guards};
pub use ir::*;
pub use ops::*;
pub use ty::Scalar;
pub use validate::validate;
pub use wire::WireError;
