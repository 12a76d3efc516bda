//! A kernel or helper: the tree the macro checks while it parses ([`Stage`] of its own, with
//! type variables, spans and helper paths) and, [`Resolved`], what it encodes and every back
//! end reads. One set of types serves both, so no stage mirrors another.

use std::fmt::Debug;
use std::hash::Hash;

use crate::bound::Check;
use crate::ops::*;
use crate::ty::Scalar;

/// What a stage of the IR knows at each node. [`Resolved`] is the IR every back end reads; the
/// macro defines the stage it parses into (type variables it infers, literals as written,
/// helper paths, whether the source checks an access, spans).
pub trait Stage: Clone + Debug + PartialEq + Eq + Hash {
    /// An expression's or local's type.
    type Ty: Clone + Debug + PartialEq + Eq + Hash;
    /// A literal.
    type Lit: Clone + Debug + PartialEq + Eq + Hash;
    /// The helper a call calls.
    type Callee: Clone + Debug + PartialEq + Eq + Hash;
    /// An element access's bounds check.
    type Access: Clone + Debug + PartialEq + Eq + Hash;
    /// A fact the bounds analysis establishes (index width, no signed wrap, loop forms).
    type Fact: Clone + Debug + PartialEq + Eq + Hash;
    /// A yes-or-no fact of the analysis.
    type Flag: Clone + Debug + PartialEq + Eq + Hash;
    /// Where a node came from.
    type Src: Clone + Debug + PartialEq + Eq + Hash;
    /// What else is known of a local.
    type LocalInfo: Clone + Debug + PartialEq + Eq + Hash;
}

/// The IR the macro encodes and every back end reads: resolved types, literals as bits, calls
/// by their index in the caller's helper list, each access's [`Check`] and the analysis'
/// facts, no source positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resolved;

impl Stage for Resolved {
    /// The scalar type.
    type Ty = Scalar;
    /// The value's bits at the expression's type (`f32` in the low 32 bits).
    type Lit = u64;
    /// An index into the caller's helper list.
    type Callee = usize;
    type Access = Check;
    type Fact = Check;
    type Flag = bool;
    type Src = ();
    type LocalInfo = ();
}

/// A kernel or helper parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// A scalar passed by value.
    Scalar(Scalar),
    /// `&[T]` (read) or `&mut [T]` (written): USM memory and its length.
    Slice {
        /// The element type.
        elem: Scalar,
        /// Written by the kernel.
        mutable: bool,
    },
    /// `&[S]` or `&mut [S]` of a `#[repr(C)]` struct of scalars and scalar arrays: USM memory
    /// and its length in structs, read and written a field at a time ([`Field`]).
    Structs {
        /// The struct's size in bytes (a multiple of every field's size).
        size: u32,
        /// Written by the kernel.
        mutable: bool,
    },
}

impl Param {
    /// Whether it is a slice of scalars or of structs.
    pub fn is_slice(&self) -> bool {
        !matches!(self, Param::Scalar(_))
    }

    /// Whether it is a slice the function may write.
    pub fn is_mutable_slice(&self) -> bool {
        matches!(
            self,
            Param::Slice { mutable: true, .. } | Param::Structs { mutable: true, .. }
        )
    }
}

/// The field of a struct slice's element that an access reaches: `p[i].mass` (the element
/// index is the access's), `p[i].pos[k]` (an array field's item).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field<S: Stage = Resolved> {
    /// Its scalar type (an array field's element type).
    pub ty: S::Ty,
    /// Its byte offset in the struct: a multiple of the access type's size (`repr(C)` aligns
    /// every field to its scalars' size, and the struct's size to the largest).
    pub offset: u32,
    /// For an array field, the item it reaches.
    pub item: Option<FieldItem<S>>,
}

/// The item of an array field an access reaches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldItem<S: Stage = Resolved> {
    /// The array's length.
    pub len: u32,
    /// Whether the index needs its bounds check (against `len`).
    pub check: S::Access,
    /// The index (`usize`), computed after the element's.
    pub index: Expr<S>,
}

/// A local variable, or an array of `ty` elements (work-group local or private).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Local<S: Stage = Resolved> {
    /// The variable's or the elements' type.
    pub ty: S::Ty,
    /// `Some` for an array.
    pub array: Option<Array>,
    /// What else the stage knows of it.
    pub info: S::LocalInfo,
}

/// An array local: its length and where it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Array {
    /// Its number of elements (1 to [`MAX_LOCAL_ARRAY`](crate::validate::MAX_LOCAL_ARRAY)).
    pub len: u32,
    /// Work-group local memory or the work-item's own.
    pub space: ArraySpace,
    /// In a const-generic kernel's template: the const parameter that is its length (`len`
    /// is then 1 until [`instantiate`](crate::instantiate()) sets it).
    pub len_param: Option<usize>,
}

/// Where an array local lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArraySpace {
    /// Work-group local memory (`local_array::<T, N>()`): shared by the group's work-items,
    /// declared once at the top of a kernel, its elements never initialised.
    WorkGroup,
    /// The work-item's own (`[v; N]`, a register tile): its `Let` gives every element the
    /// value; kernels and helpers may declare it anywhere.
    Private,
}

impl Array {
    /// A work-group local array.
    pub fn work_group(len: u32) -> Self {
        Array {
            len,
            space: ArraySpace::WorkGroup,
            len_param: None,
        }
    }

    /// A private array.
    pub fn private(len: u32) -> Self {
        Array {
            len,
            space: ArraySpace::Private,
            len_param: None,
        }
    }

    /// Whether it is work-group local memory.
    pub fn is_work_group(&self) -> bool {
        self.space == ArraySpace::WorkGroup
    }
}

impl<S: Stage> Local<S> {
    /// Whether it is a work-group local array.
    pub fn is_work_group_array(&self) -> bool {
        self.array.is_some_and(|a| a.is_work_group())
    }

    /// Whether it is a private array.
    pub fn is_private_array(&self) -> bool {
        self.array.is_some_and(|a| !a.is_work_group())
    }

    /// An array's length.
    pub fn array_len(&self) -> Option<u32> {
        self.array.map(|a| a.len)
    }
}

/// What an element access reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// A slice parameter (its index).
    Param(usize),
    /// A work-group local array (its local's index).
    Local(usize),
}

/// An expression and its type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Expr<S: Stage = Resolved> {
    /// Its type.
    pub ty: S::Ty,
    /// What it computes.
    pub kind: ExprKind<S>,
    /// Where it came from.
    pub src: S::Src,
}

/// What an expression computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExprKind<S: Stage = Resolved> {
    /// A literal (resolved: the value's bits at the expression's type).
    Lit(S::Lit),
    /// A scalar local.
    Local(usize),
    /// A scalar parameter.
    Param(usize),
    /// An element of a slice or local array.
    Load {
        /// What it reads.
        base: Base,
        /// Whether the index needs its bounds check.
        check: S::Access,
        /// Whether the index can be computed in signed 32-bit arithmetic (every value of its
        /// tree is below 2^31, and its tree has a `u32` part): a target-neutral fact back ends
        /// may use for narrow indices. A loop variable of a [`For::narrowable`] loop whose
        /// `counts_in_u32` is proved (in a kernel, or guarded) counts as a `u32` leaf; a back
        /// end that keeps such loops 64-bit reads it truncated (its value is below 2^31).
        index_fits_i32: S::Fact,
        /// The index (`usize`).
        index: Box<Expr<S>>,
        /// On a struct slice, the field it reads (the expression's type is the field's
        /// scalar); `None` elsewhere.
        field: Option<Box<Field<S>>>,
    },
    /// A slice's or local array's length (`usize`; a struct slice's in structs).
    Len(Base),
    /// A unary operator.
    Unary(UnOp, Box<Expr<S>>),
    /// A binary operator. The last field, for `u32` `+ - *` only: whether the operation has
    /// no signed overflow either (its operands and result stay below 2^31; never a guard);
    /// `Checked` for any other.
    Binary(BinOp, Box<Expr<S>>, Box<Expr<S>>, S::Fact),
    /// `as` to the expression's type.
    Cast(Box<Expr<S>>),
    /// A math function: the receiver, then its arguments.
    Math(MathFn, Vec<Expr<S>>),
    /// A work-item query of a SYCL dimension (`usize`).
    Query(Query, u8),
    /// An atomic on an element: its result is the element's old value.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// What it updates.
        base: Base,
        /// The index (`usize`; always checked).
        index: Box<Expr<S>>,
        /// The operand (`compare_exchange`: the expected value, then the new one).
        values: Vec<Expr<S>>,
        /// Its memory order (`compare_exchange` fails with the order less its release).
        order: MemoryOrder,
        /// Its scope (on local arrays always `WorkGroup`).
        scope: MemoryScope,
    },
    /// A work-group collective: the value, then (broadcast) the source's local linear id.
    /// Only in the body of a work-group kernel, whose steps hold it as a [`Step::Group`]
    /// (back ends emit such kernels from their steps).
    Group(GroupOp, Vec<Expr<S>>),
    /// A sub-group query (`usize`).
    SubGroupQuery(SubGroupQuery),
    /// A sub-group collective: the value, then the lane (delta, mask) where the op takes
    /// one. Only in the body of a work-group kernel, whose steps hold it as a
    /// [`Step::SubGroup`].
    SubGroup(SubGroupOp, Vec<Expr<S>>),
    /// A call of a helper (resolved: its index in the caller's helper list).
    Call(S::Callee, Vec<Expr<S>>),
    /// `if c { a } else { b }` as a value.
    Select(Box<Expr<S>>, Box<Expr<S>>, Box<Expr<S>>),
    /// A slice parameter of the caller (its index) passed whole to a helper: only as a call's
    /// argument; its type is the element type. The helper's parameter is `&[T]` or, where
    /// the caller's slice is written, `&mut [T]` (no other argument of the call is that
    /// slice then).
    SliceArg(usize),
    /// An array local of the caller (its index: work-group local or private) passed whole to
    /// a helper's slice parameter: only as a call's argument; its type is the element type.
    /// The helper reads it through a pointer of the array's address space.
    ArrayArg(usize),
    /// The value of a kernel's const generic parameter (its index), at the expression's
    /// integer type. Only in a const-generic kernel's template, which the runtime
    /// instantiates ([`instantiate`](crate::instantiate())) before it validates or reads it.
    ConstParam(usize),
}

/// A `for` loop's header: `for var in start..end` (`..=end`, `.step_by(step)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct For<S: Stage = Resolved> {
    /// The loop variable (a local).
    pub var: usize,
    /// The first value.
    pub start: Expr<S>,
    /// The end.
    pub end: Expr<S>,
    /// `..=`.
    pub inclusive: bool,
    /// `step_by`'s argument (`usize`).
    pub step: Option<Expr<S>>,
    /// Whether it can count with `var += step`, every value it reaches (the last step
    /// included) below half its type's range: a latch may then compare signed.
    pub counts_below_half: S::Fact,
    /// Whether its start is below half the range too (`u32` loops only).
    pub start_below_half: S::Fact,
    /// Whether it can count with `var += step` in 32 bits: every value it reaches, the last
    /// step included, below 2^32 (a `u32` loop without a trip count; a 64-bit loop counted
    /// in 32 bits).
    pub counts_in_u32: S::Fact,
    /// Whether it can count with `var += step` in 64 bits (64-bit loops: every value below
    /// 2^64 - 1).
    pub counts_in_u64: S::Fact,
    /// Whether it can count with `var += step` in `int`: every value it reaches, the last
    /// step included, below 2^31 (an unsigned, exclusive loop; a back end may count a
    /// [`For::narrowable`] loop in a signed 32-bit counter then).
    pub counts_in_i32: S::Fact,
    /// Whether its start differs between the work-items of a group (it reads a local or
    /// global id, directly or through immutable locals) and has no effects or failures.
    pub start_per_item: S::Flag,
}

impl For<Resolved> {
    /// Whether its variable is a 64-bit value that back ends may count in 32 bits where
    /// `counts_in_u32` holds: an exclusive, unsigned 64-bit loop whose start differs per
    /// work-item. An index's [`ExprKind::Load::index_fits_i32`] counts such a variable as a
    /// 32-bit leaf.
    pub fn narrowable(&self, var_ty: Scalar) -> bool {
        !self.inclusive && matches!(var_ty, Scalar::U64 | Scalar::Usize) && self.start_per_item
    }
}

/// A statement and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stmt<S: Stage = Resolved> {
    /// What it does.
    pub kind: StmtKind<S>,
    /// Where it came from.
    pub src: S::Src,
}

impl Stmt<Resolved> {
    /// A statement of the resolved IR (which keeps no source positions).
    pub fn new(kind: StmtKind) -> Stmt {
        Stmt { kind, src: () }
    }
}

/// What a statement does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StmtKind<S: Stage = Resolved> {
    /// `let local = value;`
    Let(usize, Expr<S>),
    /// `local = value;` (`local op= value;`).
    AssignLocal(usize, Option<BinOp>, Expr<S>),
    /// `base[index] = value;` (`op=`).
    Store {
        /// What it writes.
        base: Base,
        /// As [`ExprKind::Load`]'s.
        check: S::Access,
        /// As [`ExprKind::Load`]'s.
        index_fits_i32: S::Fact,
        /// The compound operator.
        op: Option<BinOp>,
        /// The index (`usize`).
        index: Expr<S>,
        /// The value (computed before the index, as Rust does).
        value: Expr<S>,
        /// As [`ExprKind::Load`]'s: the field of a struct slice's element it writes, whose
        /// type the value has.
        field: Option<Box<Field<S>>>,
    },
    /// A whole array field of a struct slice's element copied to or from a private array of
    /// the field's length and element type: `let a = v[i];` and `v[i] = a;` on `&[[f32; 4]]`,
    /// or an array field of a struct copied whole. Back ends may move it as one vector.
    CopyField {
        /// The struct slice (a parameter).
        param: usize,
        /// As [`ExprKind::Load`]'s (the element index's check; the field's items need none).
        check: S::Access,
        /// As [`ExprKind::Load`]'s.
        index_fits_i32: S::Fact,
        /// The element index (`usize`).
        index: Expr<S>,
        /// The field's byte offset in the struct (a multiple of its element size).
        offset: u32,
        /// The private array: its element type and length are the field's.
        array: usize,
        /// `true`: the array is written to the slice; `false`: read from it.
        to_slice: bool,
    },
    /// An expression for its effects.
    Expr(Expr<S>),
    /// `if c { a } else { b }`.
    If(Expr<S>, Vec<Stmt<S>>, Vec<Stmt<S>>),
    /// `while c { body }`.
    While(Expr<S>, Vec<Stmt<S>>),
    /// `loop { body }`.
    Loop(Vec<Stmt<S>>),
    /// `for`.
    For(Box<For<S>>, Vec<Stmt<S>>),
    /// `break;`
    Break,
    /// `continue;`
    Continue,
    /// `return;` (kernels), `return value;` (helpers).
    Return(Option<Expr<S>>),
    /// `barrier();`
    Barrier,
    /// `atomic_fence(order, scope);` (never `Relaxed`).
    Fence(MemoryOrder, MemoryScope),
    /// Records the work-item's failure (`kernel_fail(Failure::TimedOut);` in kernels; the
    /// macro follows it with `return;`). A failure already recorded is kept.
    Fail(Failure),
}

/// A work-group kernel cut at its synchronisation points.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step<S: Stage = Resolved> {
    /// Statements each work-item runs on its own (unless it returned).
    Region(Vec<Stmt<S>>),
    /// `let local = <uniform>;` at a synchronisation level.
    GroupLet(usize, Expr<S>),
    /// `barrier();`
    Barrier,
    /// `let local = group_<op>(args);`
    Group {
        /// The result's local.
        local: usize,
        /// The collective.
        op: GroupOp,
        /// Each work-item's value, then (broadcast) the source's id.
        args: Vec<Expr<S>>,
    },
    /// A `for` with uniform bounds and synchronisation inside.
    SyncFor(Box<For<S>>, Vec<Step<S>>),
    /// `let local = sub_group_<op>(args);`
    SubGroup {
        /// The result's local.
        local: usize,
        /// The collective.
        op: SubGroupOp,
        /// The value, then the lane where the op takes one.
        args: Vec<Expr<S>>,
    },
}

/// A kernel or helper.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Function<S: Stage = Resolved> {
    /// Its parameters.
    pub params: Vec<Param>,
    /// Helpers return a scalar; kernels nothing.
    pub ret: Option<Scalar>,
    /// Its locals and local arrays.
    pub locals: Vec<Local<S>>,
    /// The body.
    pub body: Vec<Stmt<S>>,
    /// Kernels that run as work-groups: the body as steps.
    pub steps: Option<Vec<Step<S>>>,
}

impl Function<Resolved> {
    /// Calls `f` with every [`Check`] of the function (accesses, facts and loop headers,
    /// in the body and the steps).
    pub fn for_each_check<'a>(&'a self, f: &mut dyn FnMut(&'a Check)) {
        for_each_check(&self.body, f);
        if let Some(steps) = &self.steps {
            steps_checks(steps, f);
        }
    }

    /// The run-time guards of its checks ([`Check::Guard`]), each once, in order of first use.
    pub fn guards(&self) -> Vec<crate::Bound> {
        let mut out: Vec<crate::Bound> = Vec::new();
        self.for_each_check(&mut |c| {
            if let Check::Guard(b) = c {
                if !out.contains(b) {
                    out.push(b.clone());
                }
            }
        });
        out
    }
}

fn steps_checks<'a>(steps: &'a [Step], f: &mut dyn FnMut(&'a Check)) {
    for s in steps {
        match s {
            Step::Region(b) => for_each_check(b, f),
            Step::GroupLet(_, e) => expr_checks(e, f),
            Step::Group { args, .. } | Step::SubGroup { args, .. } => {
                args.iter().for_each(|a| expr_checks(a, f))
            }
            Step::SyncFor(h, body) => {
                for_checks(h, f);
                steps_checks(body, f);
            }
            Step::Barrier => {}
        }
    }
}

fn for_checks<'a>(h: &'a For, f: &mut dyn FnMut(&'a Check)) {
    f(&h.counts_below_half);
    f(&h.start_below_half);
    f(&h.counts_in_u32);
    f(&h.counts_in_u64);
    f(&h.counts_in_i32);
    expr_checks(&h.start, f);
    expr_checks(&h.end, f);
    h.step.iter().for_each(|e| expr_checks(e, f));
}

/// Calls `f` with the checks of this expression node (not of its operands).
fn node_checks<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Check)) {
    match &e.kind {
        ExprKind::Load {
            check,
            index_fits_i32,
            field,
            ..
        } => {
            f(check);
            f(index_fits_i32);
            field_checks(field, f);
        }
        ExprKind::Binary(_, _, _, no_wrap) => f(no_wrap),
        _ => {}
    }
}

fn field_checks<'a>(field: &'a Option<Box<Field>>, f: &mut dyn FnMut(&'a Check)) {
    if let Some(item) = field.as_ref().and_then(|x| x.item.as_ref()) {
        f(&item.check);
    }
}

/// Calls `f` with every [`Check`] in `e`.
pub fn expr_checks<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Check)) {
    walk_expr(e, &mut |x| node_checks(x, f));
}

/// Calls `f` with every [`Check`] in `body`.
pub fn for_each_check<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Check)) {
    visit_stmts(body, &mut |s| match &s.kind {
        StmtKind::Store {
            check,
            index_fits_i32,
            field,
            ..
        } => {
            f(check);
            f(index_fits_i32);
            field_checks(field, f);
        }
        StmtKind::CopyField {
            check,
            index_fits_i32,
            ..
        } => {
            f(check);
            f(index_fits_i32);
        }
        StmtKind::For(h, _) => {
            f(&h.counts_below_half);
            f(&h.start_below_half);
            f(&h.counts_in_u32);
            f(&h.counts_in_u64);
            f(&h.counts_in_i32);
        }
        _ => {}
    });
    visit_exprs(body, &mut |e| node_checks(e, f));
}

/// Calls `f` with every statement of `body`, nested ones included, outermost first.
pub fn visit_stmts<'a, S: Stage>(body: &'a [Stmt<S>], f: &mut dyn FnMut(&'a Stmt<S>)) {
    for s in body {
        f(s);
        match &s.kind {
            StmtKind::If(_, a, b) => {
                visit_stmts(a, f);
                visit_stmts(b, f);
            }
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => visit_stmts(b, f),
            _ => {}
        }
    }
}

/// Calls `f` with `e` and every expression inside it, outermost first.
pub fn walk_expr<'a, S: Stage>(e: &'a Expr<S>, f: &mut dyn FnMut(&'a Expr<S>)) {
    f(e);
    match &e.kind {
        ExprKind::Load { index, field, .. } => {
            walk_expr(index, f);
            if let Some(item) = field.as_ref().and_then(|x| x.item.as_ref()) {
                walk_expr(&item.index, f);
            }
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => walk_expr(a, f),
        ExprKind::Binary(_, a, b, _) => {
            walk_expr(a, f);
            walk_expr(b, f);
        }
        ExprKind::Math(_, args)
        | ExprKind::Call(_, args)
        | ExprKind::SubGroup(_, args)
        | ExprKind::Group(_, args) => args.iter().for_each(|a| walk_expr(a, f)),
        ExprKind::Atomic { index, values, .. } => {
            walk_expr(index, f);
            values.iter().for_each(|a| walk_expr(a, f));
        }
        ExprKind::Select(c, a, b) => {
            walk_expr(c, f);
            walk_expr(a, f);
            walk_expr(b, f);
        }
        ExprKind::Lit(_)
        | ExprKind::Local(_)
        | ExprKind::Param(_)
        | ExprKind::Len(_)
        | ExprKind::Query(..)
        | ExprKind::SubGroupQuery(_)
        | ExprKind::ConstParam(_)
        | ExprKind::SliceArg(_)
        | ExprKind::ArrayArg(_) => {}
    }
}

fn walk_for<'a, S: Stage>(h: &'a For<S>, f: &mut dyn FnMut(&'a Expr<S>)) {
    walk_expr(&h.start, f);
    walk_expr(&h.end, f);
    h.step.iter().for_each(|e| walk_expr(e, f));
}

/// Calls `f` with every expression of `body`, nested statements' included.
pub fn visit_exprs<'a, S: Stage>(body: &'a [Stmt<S>], f: &mut dyn FnMut(&'a Expr<S>)) {
    for s in body {
        stmt_exprs_shallow(s, f);
        match &s.kind {
            StmtKind::If(_, a, b) => {
                visit_exprs(a, f);
                visit_exprs(b, f);
            }
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => visit_exprs(b, f),
            _ => {}
        }
    }
}

/// Calls `f` with every expression of statement `s` itself (a loop's header, an `if`'s or a
/// `while`'s condition), with its sub-expressions, not of the statements it holds.
pub fn stmt_exprs_shallow<'a, S: Stage>(s: &'a Stmt<S>, f: &mut dyn FnMut(&'a Expr<S>)) {
    stmt_roots(s, &mut |e| walk_expr(e, f));
}

/// Calls `f` with each top-level expression of statement `s` (not their sub-expressions, not
/// nested statements').
pub fn stmt_roots<'a, S: Stage>(s: &'a Stmt<S>, f: &mut dyn FnMut(&'a Expr<S>)) {
    match &s.kind {
        StmtKind::Let(_, e)
        | StmtKind::AssignLocal(_, _, e)
        | StmtKind::Expr(e)
        | StmtKind::Return(Some(e)) => f(e),
        StmtKind::Store {
            index,
            value,
            field,
            ..
        } => {
            f(index);
            f(value);
            if let Some(item) = field.as_ref().and_then(|x| x.item.as_ref()) {
                f(&item.index);
            }
        }
        StmtKind::CopyField { index, .. } => f(index),
        StmtKind::If(c, ..) | StmtKind::While(c, _) => f(c),
        StmtKind::For(h, _) => {
            f(&h.start);
            f(&h.end);
            if let Some(st) = &h.step {
                f(st);
            }
        }
        StmtKind::Return(None)
        | StmtKind::Loop(_)
        | StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Barrier
        | StmtKind::Fence(..)
        | StmtKind::Fail(_) => {}
    }
}

/// Whether a function orders memory beyond relaxed device-scope atomics: it has a fence, or an
/// atomic whose order is not relaxed or whose scope is the system. Back ends then keep its
/// plain accesses coherent with other work-items, devices and processes (no `restrict`, no
/// read-only caches) and use their ordered atomics. The one place this is decided: the C
/// form's build (`SYCL_ORDERED_ATOMICS`, `-cl-std`) reads it from the printed program.
pub fn orders_memory<S: Stage>(body: &[Stmt<S>]) -> bool {
    let mut ordered = false;
    visit_stmts(body, &mut |s| {
        ordered |= matches!(s.kind, StmtKind::Fence(..))
    });
    visit_exprs(body, &mut |e| {
        if let ExprKind::Atomic { order, scope, .. } = &e.kind {
            ordered |= is_ordered(*order, *scope);
        }
    });
    ordered
}

/// Calls `f` with every expression of `steps`.
pub fn visit_step_exprs<'a, S: Stage>(steps: &'a [Step<S>], f: &mut dyn FnMut(&'a Expr<S>)) {
    for s in steps {
        match s {
            Step::Region(b) => visit_exprs(b, f),
            Step::GroupLet(_, e) => walk_expr(e, f),
            Step::Group { args, .. } | Step::SubGroup { args, .. } => {
                args.iter().for_each(|a| walk_expr(a, f))
            }
            Step::SyncFor(h, body) => {
                walk_for(h, f);
                visit_step_exprs(body, f);
            }
            Step::Barrier => {}
        }
    }
}

impl<S: Stage> Expr<S> {
    /// Whether it has no effects and cannot fail: literals, locals, parameters, lengths,
    /// work-item queries, and arithmetic that cannot fail over those (a back end may then
    /// compute it twice, or in another form beside the written one).
    pub fn is_pure(&self) -> bool {
        match &self.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Param(_)
            | ExprKind::Query(..)
            | ExprKind::Len(_) => true,
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => a.is_pure(),
            // (Shifts mask their amount: they cannot fail.)
            ExprKind::Binary(op, a, b, _) => {
                !matches!(op, BinOp::Div | BinOp::Rem | BinOp::And | BinOp::Or)
                    && a.is_pure()
                    && b.is_pure()
            }
            ExprKind::Math(MathFn::Min | MathFn::Max, args) => args.iter().all(Expr::is_pure),
            _ => false,
        }
    }
}

impl Expr<Resolved> {
    /// Whether computing it can fail: a checked access, an atomic, an integer division or
    /// remainder, or a helper call.
    pub fn can_fail(&self) -> bool {
        let mut any = false;
        walk_expr(self, &mut |x| {
            any |= match &x.kind {
                ExprKind::Load { check, field, .. } => {
                    *check != Check::Proved
                        || field
                            .as_ref()
                            .and_then(|x| x.item.as_ref())
                            .is_some_and(|i| i.check != Check::Proved)
                }
                ExprKind::Atomic { .. } | ExprKind::Call(..) => true,
                ExprKind::Math(m, _) => m.can_fail(),
                ExprKind::Binary(BinOp::Div | BinOp::Rem, a, _, _) => a.ty.is_int(),
                _ => false,
            }
        });
        any
    }
}

impl Function<Resolved> {
    /// The run-time guards of its element accesses' bounds checks (not of its other facts),
    /// each once, in order of first use: what a form that drops exactly the checks proved
    /// under a guard relies on.
    pub fn access_guards(&self) -> Vec<crate::Bound> {
        let mut out: Vec<crate::Bound> = Vec::new();
        let mut add = |c: &Check| {
            if let Check::Guard(b) = c {
                if !out.contains(b) {
                    out.push(b.clone());
                }
            }
        };
        let mut add_access = |check: &Check, field: &Option<Box<Field>>| {
            add(check);
            if let Some(item) = field.as_ref().and_then(|x| x.item.as_ref()) {
                add(&item.check);
            }
        };
        visit_stmts(&self.body, &mut |s| match &s.kind {
            StmtKind::Store { check, field, .. } => add_access(check, field),
            StmtKind::CopyField { check, .. } => add_access(check, &None),
            _ => {}
        });
        visit_exprs(&self.body, &mut |e| {
            if let ExprKind::Load { check, field, .. } = &e.kind {
                add_access(check, field);
            }
        });
        if let Some(steps) = &self.steps {
            visit_step_exprs(steps, &mut |e| {
                if let ExprKind::Load { check, field, .. } = &e.kind {
                    add_access(check, field);
                }
            });
            visit_step_stmts(steps, &mut |s| match &s.kind {
                StmtKind::Store { check, field, .. } => add_access(check, field),
                StmtKind::CopyField { check, .. } => add_access(check, &None),
                _ => {}
            });
        }
        out
    }
}

/// Calls `f` with every statement of `steps`' regions, nested ones included.
pub fn visit_step_stmts<'a, S: Stage>(steps: &'a [Step<S>], f: &mut dyn FnMut(&'a Stmt<S>)) {
    for s in steps {
        match s {
            Step::Region(b) => visit_stmts(b, f),
            Step::SyncFor(_, body) => visit_step_stmts(body, f),
            _ => {}
        }
    }
}
