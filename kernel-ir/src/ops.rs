//! Operators, work-item queries, math, atomics, reductions and sub-group operations.

/// A binary operator (Rust's, with Rust's semantics: wrapping integer arithmetic, shifts
/// that mask their amount, failing division by zero).
use crate::ty::Scalar;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// Every operator, in wire-code order.
    pub const ALL: [BinOp; 18] = {
        use BinOp::*;
        [
            Add, Sub, Mul, Div, Rem, BitAnd, BitOr, BitXor, Shl, Shr, Eq, Ne, Lt, Le, Gt, Ge, And,
            Or,
        ]
    };

    /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    /// `&&`, `||`.
    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }

    /// `<<`, `>>`.
    pub fn is_shift(self) -> bool {
        matches!(self, BinOp::Shl | BinOp::Shr)
    }

    /// `&`, `|`, `^`.
    pub fn is_bitwise(self) -> bool {
        matches!(self, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor)
    }
}

/// A unary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-x` (wrapping on integers).
    Neg,
    /// `!x` (logical on `bool`, bitwise on integers).
    Not,
}

/// Work-item and work-group queries (`global_id(d)`, ...), each of a SYCL dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Query {
    GlobalId,
    LocalId,
    GroupId,
    GlobalRange,
    LocalRange,
    GroupRange,
}

impl Query {
    /// Every query, in wire-code order.
    pub const ALL: [Query; 6] = [
        Query::GlobalId,
        Query::LocalId,
        Query::GroupId,
        Query::GlobalRange,
        Query::LocalRange,
        Query::GroupRange,
    ];

    /// The query a kernel-language function names.
    pub fn from_name(name: &str) -> Option<Query> {
        Some(match name {
            "global_id" => Query::GlobalId,
            "local_id" => Query::LocalId,
            "group_id" => Query::GroupId,
            "global_range" => Query::GlobalRange,
            "local_range" => Query::LocalRange,
            "group_range" => Query::GroupRange,
            _ => return None,
        })
    }

    /// The same for every work-item of a work-group.
    pub fn is_uniform(self) -> bool {
        !matches!(self, Query::GlobalId | Query::LocalId)
    }
}

/// Math on floats (and `min`/`max`/`abs` on integers), as Rust's methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum MathFn {
    Sqrt,
    Exp,
    Ln,
    Sin,
    Cos,
    Powf,
    MulAdd,
    Min,
    Max,
    Abs,
    Floor,
    Ceil,
    Tanh,
    Exp2,
    Log2,
    Log10,
    Trunc,
    Round,
    Copysign,
    Atan2,
    Hypot,
    Recip,
    Fract,
    SaturatingAdd,
    SaturatingSub,
    CountOnes,
    LeadingZeros,
    TrailingZeros,
    IsNan,
    IsFinite,
    Powi,
    RotateLeft,
    RotateRight,
    /// Integer `pow(u32)`, wrapping as the language's `*` does (Rust's `wrapping_pow`).
    Pow,
    /// `x.clamp(min, max)`: fails where `min > max` or either is NaN, as Rust panics.
    Clamp,
    /// `x.rsqrt()`, `1 / sqrt(x)` (not a std method: DPC++'s `rsqrt`): the device's reciprocal
    /// square root (CUDA `rsqrtf`, OpenCL `rsqrt`: within 2 ulp), correctly rounded
    /// `1.0 / x.sqrt()` on the native CPU.
    Rsqrt,
    /// `x.erf()`, the error function (not a std method on stable): CUDA `erff` (2 ulp),
    /// OpenCL `erf` (16 ulp allowed), `libm::erf` on the native CPU (1 ulp).
    Erf,
}

impl MathFn {
    /// Every function, in wire-code order.
    pub const ALL: [MathFn; 37] = {
        use MathFn::*;
        [
            Sqrt,
            Exp,
            Ln,
            Sin,
            Cos,
            Powf,
            MulAdd,
            Min,
            Max,
            Abs,
            Floor,
            Ceil,
            Tanh,
            Exp2,
            Log2,
            Log10,
            Trunc,
            Round,
            Copysign,
            Atan2,
            Hypot,
            Recip,
            Fract,
            SaturatingAdd,
            SaturatingSub,
            CountOnes,
            LeadingZeros,
            TrailingZeros,
            IsNan,
            IsFinite,
            Powi,
            RotateLeft,
            RotateRight,
            Pow,
            Clamp,
            Rsqrt,
            Erf,
        ]
    };

    /// The function a method name names.
    pub fn from_name(name: &str) -> Option<MathFn> {
        if name == "wrapping_pow" {
            return Some(MathFn::Pow);
        }
        MathFn::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Arguments besides the receiver.
    pub fn extra_args(self) -> usize {
        match self {
            MathFn::Powf
            | MathFn::Min
            | MathFn::Max
            | MathFn::Copysign
            | MathFn::Atan2
            | MathFn::Hypot
            | MathFn::SaturatingAdd
            | MathFn::SaturatingSub
            | MathFn::Powi
            | MathFn::RotateLeft
            | MathFn::RotateRight
            | MathFn::Pow => 1,
            MathFn::MulAdd | MathFn::Clamp => 2,
            _ => 0,
        }
    }

    /// Its Rust method name.
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Exp => "exp",
            MathFn::Ln => "ln",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Powf => "powf",
            MathFn::MulAdd => "mul_add",
            MathFn::Min => "min",
            MathFn::Max => "max",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Tanh => "tanh",
            MathFn::Exp2 => "exp2",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Trunc => "trunc",
            MathFn::Round => "round",
            MathFn::Copysign => "copysign",
            MathFn::Atan2 => "atan2",
            MathFn::Hypot => "hypot",
            MathFn::Recip => "recip",
            MathFn::Fract => "fract",
            MathFn::SaturatingAdd => "saturating_add",
            MathFn::SaturatingSub => "saturating_sub",
            MathFn::CountOnes => "count_ones",
            MathFn::LeadingZeros => "leading_zeros",
            MathFn::TrailingZeros => "trailing_zeros",
            MathFn::IsNan => "is_nan",
            MathFn::IsFinite => "is_finite",
            MathFn::Powi => "powi",
            MathFn::RotateLeft => "rotate_left",
            MathFn::RotateRight => "rotate_right",
            MathFn::Pow => "pow",
            MathFn::Clamp => "clamp",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Erf => "erf",
        }
    }

    /// Whether integers may use it.
    pub fn for_ints(self) -> bool {
        matches!(
            self,
            MathFn::Min | MathFn::Max | MathFn::Abs | MathFn::Clamp
        ) || self.ints_only()
    }

    /// Whether it can fail the work-item (`clamp` with `min > max`, as Rust panics).
    pub fn can_fail(self) -> bool {
        self == MathFn::Clamp
    }

    /// Whether floats may use it.
    pub fn for_floats(self) -> bool {
        !self.ints_only()
    }

    /// Integer-only functions.
    fn ints_only(self) -> bool {
        matches!(
            self,
            MathFn::SaturatingAdd
                | MathFn::SaturatingSub
                | MathFn::CountOnes
                | MathFn::LeadingZeros
                | MathFn::TrailingZeros
                | MathFn::RotateLeft
                | MathFn::RotateRight
                | MathFn::Pow
        )
    }

    /// The type of its result when it is not its receiver's (as in Rust): bit counts are
    /// `u32`s, `is_nan`/`is_finite` `bool`s.
    pub fn fixed_result(self) -> Option<Scalar> {
        match self {
            MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => Some(Scalar::U32),
            MathFn::IsNan | MathFn::IsFinite => Some(Scalar::Bool),
            _ => None,
        }
    }

    /// The type of its arguments after the receiver when it is not the receiver's (as in
    /// Rust): `powi` takes an `i32`, rotations a `u32`.
    pub fn fixed_arg(self) -> Option<Scalar> {
        match self {
            MathFn::Powi => Some(Scalar::I32),
            MathFn::RotateLeft | MathFn::RotateRight | MathFn::Pow => Some(Scalar::U32),
            _ => None,
        }
    }
}

/// An atomic operation on a slice or local array element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `atomic_fetch_add`: wrapping on integers; `f32` as well.
    FetchAdd,
    /// `atomic_fetch_min`.
    FetchMin,
    /// `atomic_fetch_max`.
    FetchMax,
    /// `atomic_compare_exchange(s, i, current, new)`: the value found.
    CompareExchange,
    /// `atomic_load(s, i)`.
    Load,
    /// `atomic_store(s, i, v)`: a statement (the expression's value is `v`).
    Store,
    /// `atomic_exchange(s, i, v)`: the old value.
    Exchange,
    /// `atomic_fetch_sub` (wrapping).
    FetchSub,
    /// `atomic_fetch_and`.
    FetchAnd,
    /// `atomic_fetch_or`.
    FetchOr,
    /// `atomic_fetch_xor`.
    FetchXor,
}

impl AtomicOp {
    /// Every atomic, in wire-code order.
    pub const ALL: [AtomicOp; 11] = [
        AtomicOp::FetchAdd,
        AtomicOp::FetchMin,
        AtomicOp::FetchMax,
        AtomicOp::CompareExchange,
        AtomicOp::Load,
        AtomicOp::Store,
        AtomicOp::Exchange,
        AtomicOp::FetchSub,
        AtomicOp::FetchAnd,
        AtomicOp::FetchOr,
        AtomicOp::FetchXor,
    ];

    /// The atomic a kernel-language function names.
    pub fn from_name(name: &str) -> Option<AtomicOp> {
        let rest = name.strip_prefix("atomic_")?;
        AtomicOp::ALL.into_iter().find(|op| op.name() == rest)
    }

    /// Its name after `atomic_` (`fetch_add`).
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::FetchAdd => "fetch_add",
            AtomicOp::FetchMin => "fetch_min",
            AtomicOp::FetchMax => "fetch_max",
            AtomicOp::CompareExchange => "compare_exchange",
            AtomicOp::Load => "load",
            AtomicOp::Store => "store",
            AtomicOp::Exchange => "exchange",
            AtomicOp::FetchSub => "fetch_sub",
            AtomicOp::FetchAnd => "fetch_and",
            AtomicOp::FetchOr => "fetch_or",
            AtomicOp::FetchXor => "fetch_xor",
        }
    }

    /// Values after the element (`compare_exchange`: the expected, then the new one).
    pub fn values(self) -> usize {
        match self {
            AtomicOp::Load => 0,
            AtomicOp::CompareExchange => 2,
            _ => 1,
        }
    }

    /// Whether it applies to elements of type `t`: `i32 u32 u64` for all; `f32` for loads,
    /// stores, exchanges and `fetch_add`.
    pub fn takes(self, t: Scalar) -> bool {
        match t {
            Scalar::I32 | Scalar::U32 | Scalar::U64 => true,
            Scalar::F32 => matches!(
                self,
                AtomicOp::FetchAdd | AtomicOp::Load | AtomicOp::Store | AtomicOp::Exchange
            ),
            _ => false,
        }
    }

    /// Whether it takes `order` (as Rust's atomics: a load neither releases nor a store
    /// acquires).
    pub fn allows(self, order: MemoryOrder) -> bool {
        match self {
            AtomicOp::Load => !matches!(order, MemoryOrder::Release | MemoryOrder::AcqRel),
            AtomicOp::Store => !matches!(order, MemoryOrder::Acquire | MemoryOrder::AcqRel),
            _ => true,
        }
    }
}

/// The memory order of an atomic or a fence: Rust's `Ordering` and SYCL's `memory_order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum MemoryOrder {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
    SeqCst,
}

impl MemoryOrder {
    /// Every order, in wire-code (and bit) order.
    pub const ALL: [MemoryOrder; 5] = [
        MemoryOrder::Relaxed,
        MemoryOrder::Acquire,
        MemoryOrder::Release,
        MemoryOrder::AcqRel,
        MemoryOrder::SeqCst,
    ];

    /// The order `Ordering::<name>` names.
    pub fn from_name(name: &str) -> Option<MemoryOrder> {
        MemoryOrder::ALL.into_iter().find(|o| o.rust_name() == name)
    }

    /// Rust's name (`AcqRel`).
    pub fn rust_name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "Relaxed",
            MemoryOrder::Acquire => "Acquire",
            MemoryOrder::Release => "Release",
            MemoryOrder::AcqRel => "AcqRel",
            MemoryOrder::SeqCst => "SeqCst",
        }
    }

    /// SYCL's name (`acq_rel`).
    pub fn sycl_name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
            MemoryOrder::SeqCst => "seq_cst",
        }
    }

    /// Its bit in a set of orders (`1 << code`).
    pub fn bit(self) -> u8 {
        1 << MemoryOrder::ALL
            .iter()
            .position(|o| *o == self)
            .unwrap_or(0)
    }
}

impl From<MemoryOrder> for std::sync::atomic::Ordering {
    fn from(o: MemoryOrder) -> Self {
        use std::sync::atomic::Ordering;
        match o {
            MemoryOrder::Relaxed => Ordering::Relaxed,
            MemoryOrder::Acquire => Ordering::Acquire,
            MemoryOrder::Release => Ordering::Release,
            MemoryOrder::AcqRel => Ordering::AcqRel,
            MemoryOrder::SeqCst => Ordering::SeqCst,
        }
    }
}

/// Why a kernel stops a work-item on purpose (`kernel_fail(Failure::TimedOut);`): the launch's
/// event then fails with the error each names. The codes follow the checks' (1 bounds, 2
/// arithmetic, 3 `clamp`) in the status word every back end reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// A bounded wait gave up (a peer that never arrived): `Errc::Runtime`.
    TimedOut,
    /// Work-items or ranks disagreed on what to do (a collective called with different
    /// arguments): `Errc::Invalid`.
    Mismatched,
}

impl Failure {
    /// Every failure, in wire-code order.
    pub const ALL: [Failure; 2] = [Failure::TimedOut, Failure::Mismatched];

    /// The failure `Failure::<name>` names.
    pub fn from_name(name: &str) -> Option<Failure> {
        Failure::ALL.into_iter().find(|f| f.rust_name() == name)
    }

    /// The kernel language's name (`TimedOut`).
    pub fn rust_name(self) -> &'static str {
        match self {
            Failure::TimedOut => "TimedOut",
            Failure::Mismatched => "Mismatched",
        }
    }

    /// Its code in the launch's status word.
    pub fn code(self) -> u32 {
        match self {
            Failure::TimedOut => 4,
            Failure::Mismatched => 5,
        }
    }
}

/// Which work-items an atomic or a fence orders memory for: SYCL's `memory_scope` (work-group,
/// device, system). On a local array every scope means the work-group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryScope {
    /// The work-items of one work-group.
    WorkGroup,
    /// Every work-item of the device.
    Device,
    /// Every device and host thread that reaches the memory: other GPUs, other processes
    /// (memory opened through `ipc::memory`).
    System,
}

impl MemoryScope {
    /// Every scope, in wire-code (and bit) order.
    pub const ALL: [MemoryScope; 3] = [
        MemoryScope::WorkGroup,
        MemoryScope::Device,
        MemoryScope::System,
    ];

    /// The scope `MemoryScope::<name>` names.
    pub fn from_name(name: &str) -> Option<MemoryScope> {
        MemoryScope::ALL.into_iter().find(|s| s.rust_name() == name)
    }

    /// The kernel language's name (`WorkGroup`).
    pub fn rust_name(self) -> &'static str {
        match self {
            MemoryScope::WorkGroup => "WorkGroup",
            MemoryScope::Device => "Device",
            MemoryScope::System => "System",
        }
    }

    /// SYCL's name (`work_group`).
    pub fn sycl_name(self) -> &'static str {
        match self {
            MemoryScope::WorkGroup => "work_group",
            MemoryScope::Device => "device",
            MemoryScope::System => "system",
        }
    }

    /// Its bit in a set of scopes (`1 << code`).
    pub fn bit(self) -> u8 {
        1 << MemoryScope::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(0)
    }
}

/// Whether an atomic of this order and scope needs the ordered forms of the back ends (the
/// plain ones are relaxed, at device scope).
pub fn is_ordered(order: MemoryOrder, scope: MemoryScope) -> bool {
    order != MemoryOrder::Relaxed || scope == MemoryScope::System
}

/// The operator of a group or sub-group reduction or scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduce {
    /// `+` (integers wrap).
    Sum,
    /// The smaller (floats: `f32::min`, a NaN loses).
    Min,
    /// The larger (floats: `f32::max`).
    Max,
    /// `*` (integers wrap).
    Product,
    /// `&` (integers).
    BitAnd,
    /// `|` (integers).
    BitOr,
    /// `^` (integers).
    BitXor,
}

impl Reduce {
    /// Every operator, in wire-code order.
    pub const ALL: [Reduce; 7] = [
        Reduce::Sum,
        Reduce::Min,
        Reduce::Max,
        Reduce::Product,
        Reduce::BitAnd,
        Reduce::BitOr,
        Reduce::BitXor,
    ];

    /// `sum`, `min`, `max`, `product`, `bit_and`, `bit_or`, `bit_xor`: the last part of the
    /// kernel language's names (`group_sum`, `sub_group_inclusive_bit_or`).
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Min => "min",
            Reduce::Max => "max",
            Reduce::Product => "product",
            Reduce::BitAnd => "bit_and",
            Reduce::BitOr => "bit_or",
            Reduce::BitXor => "bit_xor",
        }
    }

    /// Whether it takes integers only (`& | ^`).
    pub fn is_bitwise(self) -> bool {
        matches!(self, Reduce::BitAnd | Reduce::BitOr | Reduce::BitXor)
    }

    /// Its identity over `t` (a number type other than the halves) as the value's bits, as
    /// [`crate::ExprKind::Lit`] holds them: what a work-item that returned contributes, and an
    /// exclusive scan's first value.
    pub fn identity_bits(self, t: Scalar) -> u64 {
        let ones = match t.bits() {
            32 => u32::MAX as u64,
            _ => u64::MAX,
        };
        match (self, t) {
            (Reduce::Sum | Reduce::BitOr | Reduce::BitXor, _) => 0,
            (Reduce::BitAnd, _) => ones,
            (Reduce::Product, Scalar::F32) => 1f32.to_bits() as u64,
            (Reduce::Product, Scalar::F64) => 1f64.to_bits(),
            (Reduce::Product, _) => 1,
            (Reduce::Min, Scalar::F32) => f32::INFINITY.to_bits() as u64,
            (Reduce::Min, Scalar::F64) => f64::INFINITY.to_bits(),
            (Reduce::Max, Scalar::F32) => f32::NEG_INFINITY.to_bits() as u64,
            (Reduce::Max, Scalar::F64) => f64::NEG_INFINITY.to_bits(),
            (Reduce::Min, Scalar::I32) => i32::MAX as u64,
            (Reduce::Min, Scalar::I64) => i64::MAX as u64,
            (Reduce::Min, _) => ones,
            (Reduce::Max, Scalar::I32) => i32::MIN as u32 as u64,
            (Reduce::Max, Scalar::I64) => i64::MIN as u64,
            (Reduce::Max, _) => 0,
        }
    }
}

/// What a collective computes from the work-items' values with its operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Every work-item gets the combination of all values (`group_sum`).
    Reduce(Reduce),
    /// Work-item `i` gets the combination of the values of `0..=i` in linear-id order
    /// (`group_inclusive_sum`).
    InclusiveScan(Reduce),
    /// Work-item `i` gets the combination of `0..i`, the first the identity
    /// (`group_exclusive_sum`).
    ExclusiveScan(Reduce),
    /// Whether any work-item's `bool` is true (`group_any`).
    Any,
    /// Whether every work-item's `bool` is true (`group_all`).
    All,
}

impl Collective {
    /// Every collective, in wire-code order.
    pub fn all() -> Vec<Collective> {
        let mut out = Vec::new();
        for r in Reduce::ALL {
            out.extend([
                Collective::Reduce(r),
                Collective::InclusiveScan(r),
                Collective::ExclusiveScan(r),
            ]);
        }
        out.extend([Collective::Any, Collective::All]);
        out
    }

    /// Its name after `group_` or `sub_group_` (`sum`, `inclusive_sum`, `any`).
    pub fn name(self) -> String {
        match self {
            Collective::Reduce(r) => r.name().to_string(),
            Collective::InclusiveScan(r) => format!("inclusive_{}", r.name()),
            Collective::ExclusiveScan(r) => format!("exclusive_{}", r.name()),
            Collective::Any => "any".into(),
            Collective::All => "all".into(),
        }
    }

    /// The collective a name after `group_` or `sub_group_` names.
    pub fn from_suffix(rest: &str) -> Option<Collective> {
        Collective::all().into_iter().find(|c| c.name() == rest)
    }

    /// Its operator (`Any`: `BitOr`, `All`: `BitAnd` over 0 and 1).
    pub fn op(self) -> Reduce {
        match self {
            Collective::Reduce(r) | Collective::InclusiveScan(r) | Collective::ExclusiveScan(r) => {
                r
            }
            Collective::Any => Reduce::BitOr,
            Collective::All => Reduce::BitAnd,
        }
    }

    /// Whether every work-item gets the same result.
    pub fn is_uniform(self) -> bool {
        !matches!(
            self,
            Collective::InclusiveScan(_) | Collective::ExclusiveScan(_)
        )
    }

    /// Whether it takes and gives a `bool`.
    pub fn is_vote(self) -> bool {
        matches!(self, Collective::Any | Collective::All)
    }
}

/// A work-group collective: every work-item of the group takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupOp {
    /// A reduction, scan or vote.
    Collective(Collective),
    /// `group_broadcast(x, id)`: `x` of the work-item whose local linear id is `id` (modulo
    /// the group's size; the same `id` in the whole group).
    Broadcast,
}

impl GroupOp {
    /// Every operation, in wire-code order.
    pub fn all() -> Vec<GroupOp> {
        let mut out: Vec<GroupOp> = Collective::all()
            .into_iter()
            .map(GroupOp::Collective)
            .collect();
        out.push(GroupOp::Broadcast);
        out
    }

    /// The operation a kernel-language function names (`group_sum`, `group_broadcast`).
    pub fn from_name(name: &str) -> Option<GroupOp> {
        let rest = name.strip_prefix("group_")?;
        if rest == "broadcast" {
            return Some(GroupOp::Broadcast);
        }
        Collective::from_suffix(rest).map(GroupOp::Collective)
    }

    /// Its name after `group_`.
    pub fn name(self) -> String {
        match self {
            GroupOp::Collective(c) => c.name(),
            GroupOp::Broadcast => "broadcast".into(),
        }
    }

    /// Whether every work-item gets the same result.
    pub fn is_uniform(self) -> bool {
        match self {
            GroupOp::Collective(c) => c.is_uniform(),
            GroupOp::Broadcast => true,
        }
    }
}

/// Sub-group queries (`sub_group_local_id()`, ...): no argument, a `usize`. Sub-groups are
/// one-dimensional.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubGroupQuery {
    /// The work-item's lane in its sub-group (SYCL `sub_group::get_local_id`).
    LocalId,
    /// The size of this work-item's sub-group (the last one of a work-group may be smaller).
    LocalRange,
    /// The sub-group size of the launch (SYCL `get_max_local_range`).
    MaxLocalRange,
    /// The sub-group's index in its work-group.
    Id,
    /// The number of sub-groups in the work-group.
    Range,
}

impl SubGroupQuery {
    /// Every query, in wire-code order.
    pub const ALL: [SubGroupQuery; 5] = [
        SubGroupQuery::LocalId,
        SubGroupQuery::LocalRange,
        SubGroupQuery::MaxLocalRange,
        SubGroupQuery::Id,
        SubGroupQuery::Range,
    ];

    /// The query a kernel-language function names.
    pub fn from_name(name: &str) -> Option<SubGroupQuery> {
        Some(match name {
            "sub_group_local_id" => SubGroupQuery::LocalId,
            "sub_group_local_range" => SubGroupQuery::LocalRange,
            "sub_group_max_local_range" => SubGroupQuery::MaxLocalRange,
            "sub_group_id" => SubGroupQuery::Id,
            "sub_group_range" => SubGroupQuery::Range,
            _ => return None,
        })
    }

    /// The same for every work-item of a work-group.
    pub fn is_uniform(self) -> bool {
        matches!(self, SubGroupQuery::MaxLocalRange | SubGroupQuery::Range)
    }
}

/// Sub-group collectives: every work-item of the sub-group takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubGroupOp {
    /// `sub_group_broadcast(x, lane)`: `x` of `lane` (the same in the whole work-group).
    Broadcast,
    /// `sub_group_shuffle(x, lane)`: `x` of any lane (SYCL `select_from_group`).
    Shuffle,
    /// `sub_group_shift_left(x, delta)`: `x` of lane `id + delta`.
    ShiftLeft,
    /// `sub_group_shift_right(x, delta)`: `x` of lane `id - delta`.
    ShiftRight,
    /// `sub_group_shuffle_xor(x, mask)`: `x` of lane `id ^ mask` (SYCL `permute_group_by_xor`).
    ShuffleXor,
    /// `sub_group_sum(x)`, `sub_group_inclusive_sum(x)`, `sub_group_any(c)` and the other
    /// reductions, scans and votes, over the sub-group's lanes in order.
    Collective(Collective),
}

impl SubGroupOp {
    /// Every collective, in wire-code order.
    pub fn all() -> Vec<SubGroupOp> {
        let mut out = vec![
            SubGroupOp::Broadcast,
            SubGroupOp::Shuffle,
            SubGroupOp::ShiftLeft,
            SubGroupOp::ShiftRight,
            SubGroupOp::ShuffleXor,
        ];
        out.extend(Collective::all().into_iter().map(SubGroupOp::Collective));
        out
    }

    /// The collective a kernel-language function names.
    pub fn from_name(name: &str) -> Option<SubGroupOp> {
        let rest = name.strip_prefix("sub_group_")?;
        SubGroupOp::all().into_iter().find(|op| op.name() == rest)
    }

    /// Its name after `sub_group_` (`broadcast`, `sum`).
    pub fn name(self) -> String {
        match self {
            SubGroupOp::Broadcast => "broadcast".into(),
            SubGroupOp::Shuffle => "shuffle".into(),
            SubGroupOp::ShiftLeft => "shift_left".into(),
            SubGroupOp::ShiftRight => "shift_right".into(),
            SubGroupOp::ShuffleXor => "shuffle_xor".into(),
            SubGroupOp::Collective(c) => c.name(),
        }
    }

    /// Whether it takes a lane (or delta, or mask) after the value.
    pub fn takes_lane(self) -> bool {
        !matches!(self, SubGroupOp::Collective(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `identity_bits` is each operator's identity: combining it with any value gives the value
    /// (what work-items that returned offer, and an exclusive scan's first result).
    #[test]
    fn identities_are_identities() {
        macro_rules! ints {
            ($($t:ident: $s:expr),*) => {$(
                for op in Reduce::ALL {
                    let id = op.identity_bits($s) as $t;
                    for v in [0 as $t, 1, 7, <$t>::MAX, <$t>::MIN, <$t>::MAX / 3] {
                        let r = match op {
                            Reduce::Sum => id.wrapping_add(v),
                            Reduce::Product => id.wrapping_mul(v),
                            Reduce::Min => id.min(v),
                            Reduce::Max => id.max(v),
                            Reduce::BitAnd => id & v,
                            Reduce::BitOr => id | v,
                            Reduce::BitXor => id ^ v,
                        };
                        assert_eq!(r, v, "{op:?} over {}", stringify!($t));
                    }
                }
            )*};
        }
        ints!(i32: Scalar::I32, u32: Scalar::U32, i64: Scalar::I64, u64: Scalar::U64);
        for op in Reduce::ALL.into_iter().filter(|op| !op.is_bitwise()) {
            let id32 = f32::from_bits(op.identity_bits(Scalar::F32) as u32);
            let id64 = f64::from_bits(op.identity_bits(Scalar::F64));
            for v in [0.5f64, -3.0, 1e30, f64::INFINITY, f64::NEG_INFINITY] {
                let (r32, r64) = match op {
                    Reduce::Sum => (id32 + v as f32, id64 + v),
                    Reduce::Product => (id32 * v as f32, id64 * v),
                    Reduce::Min => (id32.min(v as f32), id64.min(v)),
                    _ => (id32.max(v as f32), id64.max(v)),
                };
                assert_eq!(r32, v as f32, "{op:?} over f32");
                assert_eq!(r64, v, "{op:?} over f64");
            }
        }
    }

    /// Every collective's name parses back to it, for work-groups and sub-groups, and the
    /// wire lists hold each once.
    #[test]
    fn collective_names_round_trip() {
        let groups = GroupOp::all();
        for op in &groups {
            assert_eq!(
                GroupOp::from_name(&format!("group_{}", op.name())),
                Some(*op)
            );
        }
        let subs = SubGroupOp::all();
        for op in &subs {
            assert_eq!(
                SubGroupOp::from_name(&format!("sub_group_{}", op.name())),
                Some(*op)
            );
        }
        assert_eq!(groups.len(), 7 * 3 + 2 + 1);
        assert_eq!(subs.len(), 5 + 7 * 3 + 2);
        assert_eq!(
            GroupOp::from_name("group_inclusive_bit_xor"),
            Some(GroupOp::Collective(Collective::InclusiveScan(
                Reduce::BitXor
            )))
        );
        assert_eq!(GroupOp::from_name("group_scan"), None);
        assert_eq!(MathFn::from_name("wrapping_pow"), Some(MathFn::Pow));
    }
}
