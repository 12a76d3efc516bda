//! A kernel or helper with resolved types: what the macro encodes and every back end reads.

use crate::bound::Check;
use crate::ops::*;
use crate::ty::Scalar;

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
}

/// A local variable, or a work-group local array of `array` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Local {
    /// The variable's or the elements' type.
    pub ty: Scalar,
    /// `Some(len)` for a work-group local array.
    pub array: Option<u32>,
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
pub struct Expr {
    /// Its type.
    pub ty: Scalar,
    /// What it computes.
    pub kind: ExprKind,
}

/// What an expression computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExprKind {
    /// A literal: the value's bits at the expression's type (`f32` in the low 32 bits).
    Lit(u64),
    /// A scalar local.
    Local(usize),
    /// A scalar parameter.
    Param(usize),
    /// An element of a slice or local array.
    Load {
        /// What it reads.
        base: Base,
        /// Whether the index needs its bounds check.
        check: Check,
        /// Whether the index can be computed in signed 32-bit arithmetic (every value of its
        /// tree is below 2^31, and its tree has a `u32` part): a target-neutral fact back ends
        /// may use for narrow indices. A loop variable of a [`For::narrowable`] loop whose
        /// `counts_in_u32` is proved (in a kernel, or guarded) counts as a `u32` leaf; a back
        /// end that keeps such loops 64-bit reads it truncated (its value is below 2^31).
        index_fits_i32: Check,
        /// The index (`usize`).
        index: Box<Expr>,
    },
    /// A slice's or local array's length (`usize`).
    Len(Base),
    /// A unary operator.
    Unary(UnOp, Box<Expr>),
    /// A binary operator. The last field, for `u32` `+ - *` only: whether the operation has
    /// no signed overflow either (its operands and result stay below 2^31; never a guard);
    /// `Checked` for any other.
    Binary(BinOp, Box<Expr>, Box<Expr>, Check),
    /// `as` to the expression's type.
    Cast(Box<Expr>),
    /// A math function: the receiver, then its arguments.
    Math(MathFn, Vec<Expr>),
    /// A work-item query of a SYCL dimension (`usize`).
    Query(Query, u8),
    /// An atomic on an element: its result is the element's old value.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// What it updates.
        base: Base,
        /// The index (`usize`; always checked).
        index: Box<Expr>,
        /// The operand (`compare_exchange`: the expected value, then the new one).
        values: Vec<Expr>,
    },
    /// A group reduction: only in the body of a work-group kernel, whose steps hold it as a
    /// [`Step::Reduce`] (back ends emit such kernels from their steps).
    Reduce(Reduce, Box<Expr>),
    /// A sub-group query (`usize`).
    SubGroupQuery(SubGroupQuery),
    /// A sub-group collective: the value, then the lane (delta, mask) where the op takes
    /// one. Only in the body of a work-group kernel, whose steps hold it as a
    /// [`Step::SubGroup`].
    SubGroup(SubGroupOp, Vec<Expr>),
    /// A call of helper `k` of the caller's helper list.
    Call(usize, Vec<Expr>),
    /// `if c { a } else { b }` as a value.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// A `for` loop's header: `for var in start..end` (`..=end`, `.step_by(step)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct For {
    /// The loop variable (a local).
    pub var: usize,
    /// The first value.
    pub start: Expr,
    /// The end.
    pub end: Expr,
    /// `..=`.
    pub inclusive: bool,
    /// `step_by`'s argument (`usize`).
    pub step: Option<Expr>,
    /// Whether it can count with `var += step`, every value it reaches (the last step
    /// included) below half its type's range: a latch may then compare signed.
    pub counts_below_half: Check,
    /// Whether its start is below half the range too (`u32` loops only).
    pub start_below_half: Check,
    /// Whether it can count with `var += step` in 32 bits: every value it reaches, the last
    /// step included, below 2^32 (a `u32` loop without a trip count; a 64-bit loop counted
    /// in 32 bits).
    pub counts_in_u32: Check,
    /// Whether it can count with `var += step` in 64 bits (64-bit loops: every value below
    /// 2^64 - 1).
    pub counts_in_u64: Check,
    /// Whether its start differs between the work-items of a group (it reads a local or
    /// global id, directly or through immutable locals) and has no effects or failures.
    pub start_per_item: bool,
}

impl For {
    /// Whether its variable is a 64-bit value that back ends may count in 32 bits where
    /// `counts_in_u32` holds: an exclusive, unsigned 64-bit loop whose start differs per
    /// work-item. An index's [`ExprKind::Load::index_fits_i32`] counts such a variable as a
    /// 32-bit leaf.
    pub fn narrowable(&self, var_ty: Scalar) -> bool {
        !self.inclusive && matches!(var_ty, Scalar::U64 | Scalar::Usize) && self.start_per_item
    }
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `let local = value;`
    Let(usize, Expr),
    /// `local = value;` (`local op= value;`).
    AssignLocal(usize, Option<BinOp>, Expr),
    /// `base[index] = value;` (`op=`).
    Store {
        /// What it writes.
        base: Base,
        /// As [`ExprKind::Load`]'s.
        check: Check,
        /// As [`ExprKind::Load`]'s.
        index_fits_i32: Check,
        /// The compound operator.
        op: Option<BinOp>,
        /// The index (`usize`).
        index: Expr,
        /// The value (computed before the index, as Rust does).
        value: Expr,
    },
    /// An expression for its effects.
    Expr(Expr),
    /// `if c { a } else { b }`.
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// `while c { body }`.
    While(Expr, Vec<Stmt>),
    /// `loop { body }`.
    Loop(Vec<Stmt>),
    /// `for`.
    For(Box<For>, Vec<Stmt>),
    /// `break;`
    Break,
    /// `continue;`
    Continue,
    /// `return;` (kernels), `return value;` (helpers).
    Return(Option<Expr>),
    /// `barrier();`
    Barrier,
}

/// A work-group kernel cut at its synchronisation points.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Statements each work-item runs on its own (unless it returned).
    Region(Vec<Stmt>),
    /// `let local = <uniform>;` at a synchronisation level.
    GroupLet(usize, Expr),
    /// `barrier();`
    Barrier,
    /// `let local = group_<op>(value);`
    Reduce {
        /// The result's local.
        local: usize,
        /// The reduction.
        op: Reduce,
        /// Each work-item's value.
        value: Expr,
    },
    /// A `for` with uniform bounds and synchronisation inside.
    SyncFor(Box<For>, Vec<Step>),
    /// `let local = sub_group_<op>(args);`
    SubGroup {
        /// The result's local.
        local: usize,
        /// The collective.
        op: SubGroupOp,
        /// The value, then the lane where the op takes one.
        args: Vec<Expr>,
    },
}

/// A kernel or helper.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Function {
    /// Its parameters.
    pub params: Vec<Param>,
    /// Helpers return a scalar; kernels nothing.
    pub ret: Option<Scalar>,
    /// Its locals and local arrays.
    pub locals: Vec<Local>,
    /// The body.
    pub body: Vec<Stmt>,
    /// Kernels that run as work-groups: the body as steps.
    pub steps: Option<Vec<Step>>,
}

impl Function {
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
            Step::GroupLet(_, e) | Step::Reduce { value: e, .. } => expr_checks(e, f),
            Step::SubGroup { args, .. } => args.iter().for_each(|a| expr_checks(a, f)),
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
            ..
        } => {
            f(check);
            f(index_fits_i32);
        }
        ExprKind::Binary(_, _, _, no_wrap) => f(no_wrap),
        _ => {}
    }
}

/// Calls `f` with every [`Check`] in `e`.
pub fn expr_checks<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Check)) {
    walk_expr(e, &mut |x| node_checks(x, f));
}

/// Calls `f` with every [`Check`] in `body`.
pub fn for_each_check<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Check)) {
    visit_stmts(body, &mut |s| match s {
        Stmt::Store {
            check,
            index_fits_i32,
            ..
        } => {
            f(check);
            f(index_fits_i32);
        }
        Stmt::For(h, _) => {
            f(&h.counts_below_half);
            f(&h.start_below_half);
            f(&h.counts_in_u32);
            f(&h.counts_in_u64);
        }
        _ => {}
    });
    visit_exprs(body, &mut |e| node_checks(e, f));
}

/// Calls `f` with every statement of `body`, nested ones included, outermost first.
pub fn visit_stmts<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in body {
        f(s);
        match s {
            Stmt::If(_, a, b) => {
                visit_stmts(a, f);
                visit_stmts(b, f);
            }
            Stmt::While(_, b) | Stmt::Loop(b) | Stmt::For(_, b) => visit_stmts(b, f),
            _ => {}
        }
    }
}

/// Calls `f` with `e` and every expression inside it, outermost first.
pub fn walk_expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Load { index, .. } => walk_expr(index, f),
        ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Reduce(_, a) => walk_expr(a, f),
        ExprKind::Binary(_, a, b, _) => {
            walk_expr(a, f);
            walk_expr(b, f);
        }
        ExprKind::Math(_, args) | ExprKind::Call(_, args) | ExprKind::SubGroup(_, args) => {
            args.iter().for_each(|a| walk_expr(a, f))
        }
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
        | ExprKind::SubGroupQuery(_) => {}
    }
}

fn walk_for<'a>(h: &'a For, f: &mut dyn FnMut(&'a Expr)) {
    walk_expr(&h.start, f);
    walk_expr(&h.end, f);
    h.step.iter().for_each(|e| walk_expr(e, f));
}

/// Calls `f` with every expression of `body`, nested statements' included.
pub fn visit_exprs<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    for s in body {
        match s {
            Stmt::Let(_, e) | Stmt::AssignLocal(_, _, e) | Stmt::Expr(e) => walk_expr(e, f),
            Stmt::Return(e) => e.iter().for_each(|e| walk_expr(e, f)),
            Stmt::Store { index, value, .. } => {
                walk_expr(index, f);
                walk_expr(value, f);
            }
            Stmt::If(c, a, b) => {
                walk_expr(c, f);
                visit_exprs(a, f);
                visit_exprs(b, f);
            }
            Stmt::While(c, b) => {
                walk_expr(c, f);
                visit_exprs(b, f);
            }
            Stmt::Loop(b) => visit_exprs(b, f),
            Stmt::For(h, b) => {
                walk_for(h, f);
                visit_exprs(b, f);
            }
            Stmt::Break | Stmt::Continue | Stmt::Barrier => {}
        }
    }
}

/// Calls `f` with every expression of `steps`.
pub fn visit_step_exprs<'a>(steps: &'a [Step], f: &mut dyn FnMut(&'a Expr)) {
    for s in steps {
        match s {
            Step::Region(b) => visit_exprs(b, f),
            Step::GroupLet(_, e) | Step::Reduce { value: e, .. } => walk_expr(e, f),
            Step::SubGroup { args, .. } => args.iter().for_each(|a| walk_expr(a, f)),
            Step::SyncFor(h, body) => {
                walk_for(h, f);
                visit_step_exprs(body, f);
            }
            Step::Barrier => {}
        }
    }
}

impl Expr {
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

    /// Whether computing it can fail: a checked access, an atomic, an integer division or
    /// remainder, or a helper call.
    pub fn can_fail(&self) -> bool {
        let mut any = false;
        walk_expr(self, &mut |x| {
            any |= match &x.kind {
                ExprKind::Load { check, .. } => *check != Check::Proved,
                ExprKind::Atomic { .. } | ExprKind::Call(..) => true,
                ExprKind::Binary(BinOp::Div | BinOp::Rem, a, _, _) => a.ty.is_int(),
                _ => false,
            }
        });
        any
    }
}

impl Function {
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
        visit_stmts(&self.body, &mut |s| {
            if let Stmt::Store { check, .. } = s {
                add(check);
            }
        });
        visit_exprs(&self.body, &mut |e| {
            if let ExprKind::Load { check, .. } = &e.kind {
                add(check);
            }
        });
        if let Some(steps) = &self.steps {
            visit_step_exprs(steps, &mut |e| {
                if let ExprKind::Load { check, .. } = &e.kind {
                    add(check);
                }
            });
            visit_step_stmts(steps, &mut |s| {
                if let Stmt::Store { check, .. } = s {
                    add(check);
                }
            });
        }
        out
    }
}

/// Calls `f` with every statement of `steps`' regions, nested ones included.
pub fn visit_step_stmts<'a>(steps: &'a [Step], f: &mut dyn FnMut(&'a Stmt)) {
    for s in steps {
        match s {
            Step::Region(b) => visit_stmts(b, f),
            Step::SyncFor(_, body) => visit_step_stmts(body, f),
            _ => {}
        }
    }
}
