//! Checks that need the whole typed function, and what the emitters need to know about it:
//! where work-group synchronisation happens (and that it happens in every work-item
//! together), which locals live across it, the device features the kernel needs.

use proc_macro2::Span;
use syn::{Error, Result};

use sycl_kernel_ir::KernelInfo;

use crate::ir::*;
pub use sycl_kernel_ir::ir::{stmt_exprs_shallow, stmt_roots, visit_exprs, walk_expr};

/// Where a local lives in a kernel that synchronises its work-group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// An ordinary local of one work-item's straight-line code.
    Plain,
    /// Declared at a synchronisation level and per work-item: kept across barriers (a field of
    /// the CPU's per-item state; hoisted to the top of the GPU kernel).
    Item,
    /// Declared at a synchronisation level, immutable, and the same in every work-item of the
    /// group (a uniform `let`, a group reduction's result, a synchronising loop's variable):
    /// computed once per group on the CPU, by every work-item on GPUs.
    Group,
}

/// Which work-item queries a kernel makes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Queries {
    pub global_id: bool,
    pub local_id: bool,
    pub group_id: bool,
}

pub struct Analysis {
    /// Barriers or group reductions.
    pub sync: bool,
    /// What the kernel needs of a device and a launch (`group`: it runs as work-groups,
    /// for sync or work-group local arrays, and needs an nd-range).
    pub info: KernelInfo,
    pub class: Vec<Class>,
    /// The body as steps (group kernels only; empty otherwise).
    pub steps: Vec<Step>,
    /// Distinct helpers called, in order of first call: `Call`s index into it by their path's
    /// token text and their types.
    pub helpers: Vec<(syn::Path, CallKey)>,
    pub queries: Queries,
}

fn err(span: Span, msg: impl std::fmt::Display) -> Error {
    Error::new(span, msg)
}

const SYNC_RULE: &str =
    "barrier(), group reductions and sub-group operations run in all work-items of a group together: \
write them at the top level of the kernel body, or of a `for` loop whose bounds are the same in \
every work-item (see spec/kernels.md)";

pub fn path_key(p: &syn::Path) -> String {
    quote::quote!(#p).to_string()
}

/// The types a call passes and returns (every type is resolved once parsing succeeded).
pub fn call_key(f: &Function, args: &[Expr], ret: TyId) -> CallKey {
    CallKey {
        args: args
            .iter()
            .map(|a| match a.kind {
                ExprKind::SliceArg(p) => match f.params[p].kind {
                    ParamKind::Slice { elem, .. } => (elem, true),
                    _ => unreachable!("slice arguments are scalar slices"),
                },
                ExprKind::ArrayArg(l) => (f.ty(f.locals[l].ty), true),
                _ => (f.ty(a.ty), false),
            })
            .collect(),
        ret: f.ty(ret),
    }
}

/// Adds the callee of every call in `f` to `helpers`, once per path and types.
pub fn collect_calls(f: &Function, helpers: &mut Vec<(syn::Path, CallKey)>) {
    visit_exprs(&f.body, &mut |e| {
        if let ExprKind::Call(path, args) = &e.kind {
            let key = (path_key(path), call_key(f, args, e.ty));
            if !helpers
                .iter()
                .any(|(p, k)| path_key(p) == key.0 && *k == key.1)
            {
                helpers.push((path.clone(), key.1));
            }
        }
    });
}

/// How deep blocks and expressions may nest in a kernel or helper: the kernel IR allows
/// `sycl_kernel_ir::wire::MAX_DEPTH` levels in all, bounds proofs included (which
/// `bounds.rs` keeps to `MAX_PROOF_DEPTH`).
pub const MAX_NESTING: usize = 160;

/// Refuses blocks and expressions nested deeper than [`MAX_NESTING`] (counted as the IR's
/// reader counts them: each block and each expression one level).
fn check_nesting(body: &[Stmt], depth: usize) -> Result<()> {
    fn expr(e: &Expr, depth: usize) -> Result<()> {
        if depth > MAX_NESTING {
            return Err(err(
                e.src.0,
                format!("this expression nests deeper than kernels may ({MAX_NESTING} levels of blocks and expressions): split it with `let`"),
            ));
        }
        match &e.kind {
            ExprKind::Load { index: a, .. } | ExprKind::Unary(_, a) | ExprKind::Cast(a) => {
                expr(a, depth + 1)
            }
            ExprKind::Binary(_, a, b, _) => {
                expr(a, depth + 1)?;
                expr(b, depth + 1)
            }
            ExprKind::Math(_, args)
            | ExprKind::Call(_, args)
            | ExprKind::SubGroup(_, args)
            | ExprKind::Group(_, args) => args.iter().try_for_each(|a| expr(a, depth + 1)),
            ExprKind::Atomic { index, values, .. } => {
                expr(index, depth + 1)?;
                values.iter().try_for_each(|a| expr(a, depth + 1))
            }
            ExprKind::Select(c, a, b) => {
                expr(c, depth + 1)?;
                expr(a, depth + 1)?;
                expr(b, depth + 1)
            }
            _ => Ok(()),
        }
    }
    let depth = depth + 1;
    for s in body {
        if depth > MAX_NESTING {
            return Err(err(
                s.src.0,
                format!("this block nests deeper than kernels may ({MAX_NESTING} levels of blocks and expressions)"),
            ));
        }
        let mut own = Vec::new();
        stmt_roots(s, &mut |e| own.push(e));
        for e in own {
            expr(e, depth + 1)?;
        }
        match &s.kind {
            StmtKind::If(_, a, b) => {
                check_nesting(a, depth)?;
                check_nesting(b, depth)?;
            }
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => {
                check_nesting(b, depth)?
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks shared by kernels and helpers: literals fit their types, one atomic per statement.
pub fn check_common(f: &Function) -> Result<()> {
    let mut result = Ok(());
    let mut check_stmt = |s: &Stmt| {
        let mut atomics = 0;
        stmt_exprs_shallow(s, &mut |e| {
            if matches!(e.kind, ExprKind::Atomic { .. }) {
                atomics += 1;
            }
        });
        if atomics > 1 && result.is_ok() {
            result = Err(err(
                s.src.0,
                "one atomic operation per statement (GPU backends do not order two in one expression): split it with `let`",
            ));
        }
    };
    fn each_stmt(body: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
        for s in body {
            f(s);
            match &s.kind {
                StmtKind::If(_, a, b) => {
                    each_stmt(a, f);
                    each_stmt(b, f);
                }
                StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => each_stmt(b, f),
                _ => {}
            }
        }
    }
    each_stmt(&f.body, &mut check_stmt);
    result?;
    check_nesting(&f.body, 0)?;
    let mut result = Ok(());
    let mut negated: Vec<*const Expr> = Vec::new();
    visit_exprs(&f.body, &mut |e| {
        if let ExprKind::Unary(UnOp::Neg, inner) = &e.kind {
            negated.push(&**inner as *const Expr);
        }
        if result.is_err() {
            return;
        }
        match &e.kind {
            ExprKind::Lit(Lit::Int(v)) => {
                let ty = f.ty(e.ty);
                let bits = ty.bits();
                let max: u128 = if ty.is_signed() {
                    let m = 1u128 << (bits - 1);
                    if negated.contains(&(e as *const Expr)) {
                        m
                    } else {
                        m - 1
                    }
                } else {
                    (1u128 << bits) - 1
                };
                if *v > max {
                    result = Err(err(
                        e.src.0,
                        format!("literal out of range for `{}`", ty.name()),
                    ));
                }
            }
            ExprKind::Lit(Lit::Float(digits))
                if f.ty(e.ty) == Ty::F32
                    && digits.parse::<f32>().map_or(true, |x| !x.is_finite()) =>
            {
                result = Err(err(e.src.0, "literal out of range for `f32`"));
            }
            ExprKind::Lit(Lit::Float(digits))
                if f.ty(e.ty).is_half()
                    && !crate::encode::half_from_f32(
                        f.ty(e.ty),
                        digits.parse::<f32>().unwrap_or(f32::INFINITY),
                    )
                    .is_finite() =>
            {
                result = Err(err(
                    e.src.0,
                    format!("literal out of range for `{}`", f.ty(e.ty).name()),
                ));
            }
            _ => {}
        }
    });
    result
}

/// The full analysis of a kernel.
pub fn kernel(f: &Function) -> Result<Analysis> {
    check_common(f)?;
    let mut a = Analysis {
        sync: false,
        info: KernelInfo {
            dims: 1,
            ..KernelInfo::default()
        },
        class: vec![Class::Plain; f.locals.len()],
        steps: Vec::new(),
        helpers: Vec::new(),
        queries: Queries::default(),
    };
    collect_calls(f, &mut a.helpers);
    for p in &f.params {
        if let ParamKind::Scalar(Ty::F64) | ParamKind::Slice { elem: Ty::F64, .. } = p.kind {
            a.info.fp64 = true;
        }
    }
    for l in &f.locals {
        let ty = f.ty(l.ty);
        a.info.fp64 |= ty == Ty::F64;
        if let Some(arr) = l.array.filter(|a| a.is_work_group()) {
            a.info.group = true;
            a.info.local_bytes += arr.len as usize * (ty.bits() as usize / 8);
        }
    }
    let mut sync_seen = false;
    visit_exprs(&f.body, &mut |e| {
        a.info.fp64 |= f.types.resolve(e.ty) == Some(Ty::F64);
        match &e.kind {
            ExprKind::Query(q, d) => {
                a.info.dims = a.info.dims.max(d + 1);
                match q {
                    Query::GlobalId => a.queries.global_id = true,
                    Query::LocalId => a.queries.local_id = true,
                    Query::GroupId => a.queries.group_id = true,
                    Query::GlobalRange => {}
                    Query::LocalRange | Query::GroupRange => {}
                }
                if !matches!(q, Query::GlobalId | Query::GlobalRange) {
                    a.info.nd_queries = true;
                }
            }
            ExprKind::Atomic {
                base, order, scope, ..
            } => {
                a.info.atomic64 |= f.ty(e.ty).bits() == 64;
                a.info.memory_orders |= order.bit();
                if matches!(base, Base::Param(_)) {
                    a.info.memory_scopes |= scope.bit();
                }
            }
            ExprKind::SubGroupQuery(_) => {
                a.info.sub_groups = true;
                a.info.nd_queries = true;
                // The CPU computes them from the local id.
                a.queries.local_id = true;
            }
            ExprKind::SubGroup(..) => {
                a.info.sub_groups = true;
                sync_seen = true;
            }
            ExprKind::Group(..) => {
                sync_seen = true;
                // (The scratch of the OpenCL C and SPIR-V forms: a `bool` travels as a `u32`.)
                let bytes = (f.ty(e.ty).bits() as usize / 8).max(4);
                a.info.reduce_bytes = a.info.reduce_bytes.max(bytes);
            }
            _ => {}
        }
    });
    fn has_barrier(body: &[Stmt]) -> bool {
        body.iter().any(|s| match &s.kind {
            StmtKind::Barrier => true,
            StmtKind::If(_, x, y) => has_barrier(x) || has_barrier(y),
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => has_barrier(b),
            _ => false,
        })
    }
    fn fences(body: &[Stmt], info: &mut KernelInfo) {
        for s in body {
            match &s.kind {
                StmtKind::Fence(order, scope) => {
                    info.memory_orders |= order.bit();
                    info.memory_scopes |= scope.bit();
                }
                StmtKind::If(_, x, y) => {
                    fences(x, info);
                    fences(y, info);
                }
                StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => fences(b, info),
                _ => {}
            }
        }
    }
    fences(&f.body, &mut a.info);
    a.sync = sync_seen || has_barrier(&f.body);
    a.info.group |= a.sync;
    if a.info.group {
        let mut b = StepBuilder { f, a: &mut a };
        let steps = b.steps(&f.body)?;
        a.steps = steps;
    }
    Ok(a)
}

struct StepBuilder<'a> {
    f: &'a Function,
    a: &'a mut Analysis,
}

/// Whether a statement list synchronises anywhere inside.
fn synchronises(body: &[Stmt]) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::Barrier => true,
        StmtKind::Let(_, e) => matches!(e.kind, ExprKind::Group(..) | ExprKind::SubGroup(..)),
        StmtKind::If(_, x, y) => synchronises(x) || synchronises(y),
        StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => synchronises(b),
        _ => false,
    })
}

impl StepBuilder<'_> {
    /// A statement list at a synchronisation level, as steps.
    fn steps(&mut self, body: &[Stmt]) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        let mut region: Vec<Stmt> = Vec::new();
        let flush = |region: &mut Vec<Stmt>, steps: &mut Vec<Step>| {
            if !region.is_empty() {
                steps.push(Step::Region(std::mem::take(region)));
            }
        };
        for s in body {
            match &s.kind {
                StmtKind::Barrier => {
                    flush(&mut region, &mut steps);
                    steps.push(Step::Barrier);
                }
                StmtKind::Let(id, e) => {
                    if let ExprKind::Group(op, args) = &e.kind {
                        for arg in args {
                            self.no_sync_in_expr(arg)?;
                        }
                        if *op == GroupOp::Broadcast && !self.uniform(&args[1]) {
                            return Err(err(
                                args[1].src.0,
                                "the id of `group_broadcast` must be the same in every work-item of the group (parameters, literals, ranges, group ids, `len()`, and immutable locals made of those)",
                            ));
                        }
                        flush(&mut region, &mut steps);
                        // Scans give each work-item its own value.
                        self.a.class[*id] = if self.f.locals[*id].info.mutable || !op.is_uniform() {
                            Class::Item
                        } else {
                            Class::Group
                        };
                        steps.push(Step::Group {
                            local: *id,
                            op: *op,
                            args: args.clone(),
                        });
                    } else if let ExprKind::SubGroup(op, args) = &e.kind {
                        for arg in args {
                            self.no_sync_in_expr(arg)?;
                        }
                        if *op == SubGroupOp::Broadcast && !self.uniform(&args[1]) {
                            return Err(err(
                                args[1].src.0,
                                "the lane of `sub_group_broadcast` must be the same in every work-item of the group (parameters, literals, ranges, group ids, `len()`, and immutable locals made of those): use `sub_group_shuffle` for a lane that varies",
                            ));
                        }
                        flush(&mut region, &mut steps);
                        // Per work-item: lanes get different values.
                        self.a.class[*id] = Class::Item;
                        steps.push(Step::SubGroup {
                            local: *id,
                            op: *op,
                            args: args.clone(),
                        });
                    } else {
                        self.no_sync_in_expr(e)?;
                        // A private array is each work-item's own, whatever fills it.
                        let array = self.f.locals[*id].array.is_some();
                        if !self.f.locals[*id].info.mutable && !array && self.uniform(e) {
                            flush(&mut region, &mut steps);
                            self.a.class[*id] = Class::Group;
                            steps.push(Step::GroupLet(*id, e.clone()));
                        } else {
                            self.a.class[*id] = Class::Item;
                            region.push(s.clone());
                        }
                    }
                }
                StmtKind::For(h, inner) if synchronises(inner) => {
                    for bound in [Some(&h.start), Some(&h.end), h.step.as_ref()]
                        .into_iter()
                        .flatten()
                    {
                        self.no_sync_in_expr(bound)?;
                        if !self.uniform(bound) {
                            return Err(err(
                                bound.src.0,
                                format!("this loop synchronises the work-group, so its bounds must be the same in every work-item (parameters, literals, ranges, group ids, `len()`, and immutable locals made of those): {SYNC_RULE}"),
                            ));
                        }
                    }
                    no_escape(inner, 0)?;
                    flush(&mut region, &mut steps);
                    self.a.class[h.var] = Class::Group;
                    let body = self.steps(inner)?;
                    steps.push(Step::SyncFor(h.clone(), body));
                }
                _ => {
                    self.no_sync_below(std::slice::from_ref(s))?;
                    region.push(s.clone());
                }
            }
        }
        flush(&mut region, &mut steps);
        Ok(steps)
    }

    fn no_sync_in_expr(&self, e: &Expr) -> Result<()> {
        let mut found = None;
        walk_expr(e, &mut |x| {
            if matches!(x.kind, ExprKind::Group(..) | ExprKind::SubGroup(..)) && found.is_none() {
                found = Some(x.src.0);
            }
        });
        match found {
            Some(span) => Err(err(
                span,
                format!("a group or sub-group collective stands alone in a `let` (`let s = group_sum(x);`, `let y = sub_group_shuffle(x, lane);`): {SYNC_RULE}"),
            )),
            None => Ok(()),
        }
    }

    /// No barrier or reduction anywhere in `body` (statements below a synchronisation level).
    fn no_sync_below(&self, body: &[Stmt]) -> Result<()> {
        for s in body {
            match &s.kind {
                StmtKind::Barrier => return Err(err(s.src.0, SYNC_RULE)),
                StmtKind::If(_, x, y) => {
                    self.no_sync_below(x)?;
                    self.no_sync_below(y)?;
                }
                StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => {
                    self.no_sync_below(b)?
                }
                _ => {}
            }
            let mut found = None;
            stmt_exprs_shallow(s, &mut |x| {
                if matches!(x.kind, ExprKind::Group(..) | ExprKind::SubGroup(..)) && found.is_none()
                {
                    found = Some(x.src.0);
                }
            });
            if let Some(span) = found {
                return Err(err(span, SYNC_RULE));
            }
        }
        Ok(())
    }

    /// The same value in every work-item of a group.
    fn uniform(&self, e: &Expr) -> bool {
        let mut ok = true;
        walk_expr(e, &mut |x| {
            ok &= match &x.kind {
                ExprKind::Lit(_)
                | ExprKind::Param(_)
                | ExprKind::ConstParam(_)
                | ExprKind::SliceArg(_)
                | ExprKind::Len(_)
                | ExprKind::Unary(..)
                | ExprKind::Binary(..)
                | ExprKind::Cast(..)
                | ExprKind::Math(..)
                | ExprKind::Call(..)
                | ExprKind::Select(..) => true,
                ExprKind::Local(l) => self.a.class[*l] == Class::Group,
                ExprKind::Query(q, _) => q.is_uniform(),
                ExprKind::SubGroupQuery(q) => q.is_uniform(),
                ExprKind::Load { .. }
                | ExprKind::ArrayArg(_)
                | ExprKind::Atomic { .. }
                | ExprKind::Group(..)
                | ExprKind::SubGroup(..) => false,
            };
        });
        ok
    }
}

/// No `break`/`continue` leaves a synchronising loop (`depth`: loops entered below it).
fn no_escape(body: &[Stmt], depth: usize) -> Result<()> {
    for s in body {
        match &s.kind {
            StmtKind::Break | StmtKind::Continue if depth == 0 => {
                return Err(err(
                    s.src.0,
                    "`break` and `continue` cannot leave a loop that synchronises the work-group (every work-item runs all its iterations); `return` ends a work-item's part instead",
                ))
            }
            StmtKind::If(_, x, y) => {
                no_escape(x, depth)?;
                no_escape(y, depth)?;
            }
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => {
                no_escape(b, depth + 1)?
            }
            _ => {}
        }
    }
    Ok(())
}
