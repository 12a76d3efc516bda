//! The checked function lowered to the shared IR (`sycl_kernel_ir::Function`) and encoded as
//! words, for the runtime (which decodes, validates and builds SPIR-V from them).
//!
//! Lowering resolves every type, numbers helper calls by the caller's helper list, drops
//! what only the macro needs (spans, paths, type variables), and writes the bounds
//! analysis' results into the IR: for each element access whether it is in bounds
//! (`Check`), and the target-neutral facts back ends shape code by (an index computable in
//! 32-bit signed arithmetic, arithmetic without signed overflow, loops that cannot wrap).
//! The wire format itself is the IR crate's (`sycl_kernel_ir::wire`).

use sycl_kernel_ir as kir;
use sycl_kernel_ir::Check;

use crate::analyze::{path_key, Analysis};
use crate::bounds::{pure, Bounds, Proof, Target};
use crate::ir::*;

/// The IR of a kernel (its steps too when it runs as work-groups).
pub fn kernel(f: &Function, an: &Analysis, bounds: &Bounds<'_>) -> kir::Function {
    let l = Lower {
        f,
        helpers: &an.helpers,
        bounds,
        narrowable: narrowable(f, bounds, true),
    };
    let mut ir = l.function();
    if an.info.group {
        ir.steps = Some(l.steps(&an.steps));
    }
    ir
}

/// The words of a helper (`helpers`: its callees in call-marker order).
pub fn helper(f: &Function, helpers: &[syn::Path], bounds: &Bounds<'_>) -> Vec<u32> {
    let l = Lower {
        f,
        helpers,
        bounds,
        narrowable: narrowable(f, bounds, false),
    };
    kir::wire::encode(&l.function())
}

/// A proof as the IR's check.
fn check(p: Proof) -> Check {
    match p {
        Proof::No => Check::Checked,
        Proof::Always => Check::Proved,
        Proof::When(b) => Check::When(b),
        Proof::Guard(b) => Check::Guard(b),
    }
}

/// A literal's bits at its final type.
fn lit_bits(l: &Lit, t: Ty) -> u64 {
    match (l, t) {
        (Lit::Zero, _) => 0,
        (Lit::Bool(b), _) => *b as u64,
        (Lit::Int(v), Ty::F32) => (*v as f32).to_bits() as u64,
        (Lit::Int(v), Ty::F64) => (*v as f64).to_bits(),
        // In range for its type (checked by `check_common`): the low bits are its value.
        (Lit::Int(v), _) => *v as u64,
        (Lit::Float(d), Ty::F32) => d.parse::<f32>().expect("checked").to_bits() as u64,
        (Lit::Float(d), _) => d.parse::<f64>().expect("checked").to_bits(),
    }
}

struct Lower<'a> {
    f: &'a Function,
    helpers: &'a [syn::Path],
    bounds: &'a Bounds<'a>,
    /// Loop variables that count as `u32` leaves of narrow indices (`kir::For::narrowable`
    /// loops whose `counts_in_u32` holds: always, or in a kernel by a run-time guard).
    narrowable: Vec<usize>,
}

/// Whether `for` loop `start..end` (`..=`) over `ty` is `kir::For::narrowable`.
fn per_item_loop(bounds: &Bounds<'_>, ty: Ty, start: &Expr, inclusive: bool) -> bool {
    !inclusive && matches!(ty, Ty::U64 | Ty::Usize) && pure(start) && bounds.per_work_item(start)
}

/// The variables of `f`'s narrowable loops that count in 32 bits (`kernel`: by a run-time
/// guard too; helpers take no guards).
fn narrowable(f: &Function, bounds: &Bounds<'_>, kernel: bool) -> Vec<usize> {
    let mut out = Vec::new();
    kir::ir::visit_stmts(&f.body, &mut |s| {
        if let StmtKind::For(h, _) = &s.kind {
            if per_item_loop(bounds, f.ty(h.start.ty), &h.start, h.inclusive) {
                match bounds.loop_fits(&h.end, h.step.as_ref(), 32) {
                    Proof::Always => out.push(h.var),
                    Proof::Guard(_) if kernel => out.push(h.var),
                    _ => {}
                }
            }
        }
    });
    out
}

impl Lower<'_> {
    fn function(&self) -> kir::Function {
        let f = self.f;
        kir::Function {
            params: f.params.iter().map(|p| p.kind).collect(),
            ret: f.ret,
            locals: f
                .locals
                .iter()
                .map(|l| kir::Local {
                    ty: f.ty(l.ty),
                    array: l.array,
                    info: (),
                })
                .collect(),
            body: self.block(&f.body),
            steps: None,
        }
    }

    /// Whether `base[index]` needs its check (the user's `get_unchecked` never does).
    fn access(&self, b: Base, index: &Expr, checked: bool) -> Check {
        if !checked {
            return Check::Proved;
        }
        check(self.bounds.access(b, index, Target::Device))
    }

    /// Whether `index` can be computed in signed 32-bit arithmetic.
    fn fits_i32(&self, index: &Expr) -> Check {
        check(
            self.bounds
                .narrow_index(index, &|l| self.narrowable.contains(&l)),
        )
    }

    fn block(&self, body: &[Stmt]) -> Vec<kir::Stmt> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    /// A loop header with the analysis' facts.
    fn for_header(&self, h: &For) -> Box<kir::For> {
        let (start, end, inclusive, step) = (&h.start, &h.end, h.inclusive, h.step.as_ref());
        // Whether the loop can count with `v += step`, every value below 2^(bits - 1), so
        // that its latch may compare signed (a condition over the work-group size counts
        // as not proved: the back ends' loop forms take only constant facts).
        let ty = self.f.ty(start.ty);
        let mut below_half = Proof::No;
        if !inclusive && ty.is_unsigned() {
            let bits = if ty == Ty::U32 { 31 } else { 63 };
            below_half = self.bounds.loop_fits(end, step, bits);
            if matches!(below_half, Proof::When(_)) {
                below_half = Proof::No;
            }
        }
        let fits = !matches!(below_half, Proof::No);
        // Whether the start is below 2^31 as well (a `u32` loop whose values fit).
        let start_below = if ty == Ty::U32 && fits {
            self.bounds.below(start, 31)
        } else {
            Proof::No
        };
        let (in_u32, in_u64) = if !inclusive && ty.is_unsigned() {
            (
                self.bounds.loop_fits(end, step, 32),
                self.bounds.loop_fits(end, step, 64),
            )
        } else {
            (Proof::No, Proof::No)
        };
        Box::new(kir::For {
            var: h.var,
            start: self.expr(start),
            end: self.expr(end),
            inclusive,
            step: step.map(|s| self.expr(s)),
            counts_below_half: check(below_half),
            start_below_half: check(start_below),
            counts_in_u32: check(in_u32),
            counts_in_u64: check(in_u64),
            start_per_item: per_item_loop(self.bounds, ty, start, inclusive),
        })
    }

    fn stmt(&self, s: &Stmt) -> kir::Stmt {
        kir::Stmt::new(match &s.kind {
            StmtKind::Let(l, e) => kir::StmtKind::Let(*l, self.expr(e)),
            StmtKind::AssignLocal(l, op, e) => kir::StmtKind::AssignLocal(*l, *op, self.expr(e)),
            StmtKind::Store {
                base,
                check: checked,
                op,
                index,
                value,
                ..
            } => kir::StmtKind::Store {
                base: *base,
                check: self.access(*base, index, *checked),
                index_fits_i32: self.fits_i32(index),
                op: *op,
                index: self.expr(index),
                value: self.expr(value),
            },
            StmtKind::Expr(e) => kir::StmtKind::Expr(self.expr(e)),
            StmtKind::If(c, a, b) => kir::StmtKind::If(self.expr(c), self.block(a), self.block(b)),
            StmtKind::While(c, b) => kir::StmtKind::While(self.expr(c), self.block(b)),
            StmtKind::Loop(b) => kir::StmtKind::Loop(self.block(b)),
            StmtKind::For(h, body) => kir::StmtKind::For(self.for_header(h), self.block(body)),
            StmtKind::Break => kir::StmtKind::Break,
            StmtKind::Continue => kir::StmtKind::Continue,
            StmtKind::Return(e) => kir::StmtKind::Return(e.as_ref().map(|e| self.expr(e))),
            StmtKind::Barrier => kir::StmtKind::Barrier,
        })
    }

    fn steps(&self, steps: &[Step]) -> Vec<kir::Step> {
        steps
            .iter()
            .map(|s| match s {
                Step::Region(stmts) => kir::Step::Region(self.block(stmts)),
                Step::GroupLet(l, e) => kir::Step::GroupLet(*l, self.expr(e)),
                Step::Barrier => kir::Step::Barrier,
                Step::SubGroup { local, op, args } => kir::Step::SubGroup {
                    local: *local,
                    op: *op,
                    args: self.exprs(args),
                },
                Step::Reduce { local, op, value } => kir::Step::Reduce {
                    local: *local,
                    op: *op,
                    value: self.expr(value),
                },
                Step::SyncFor(h, body) => kir::Step::SyncFor(self.for_header(h), self.steps(body)),
            })
            .collect()
    }

    fn exprs(&self, es: &[Expr]) -> Vec<kir::Expr> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&self, e: &Expr) -> kir::Expr {
        let t = self.f.ty(e.ty);
        let b = |e: &Expr| Box::new(self.expr(e));
        let kind = match &e.kind {
            ExprKind::Lit(l) => kir::ExprKind::Lit(lit_bits(l, t)),
            ExprKind::Local(l) => kir::ExprKind::Local(*l),
            ExprKind::Param(i) => kir::ExprKind::Param(*i),
            ExprKind::Load {
                base,
                index,
                check: checked,
                ..
            } => kir::ExprKind::Load {
                base: *base,
                check: self.access(*base, index, *checked),
                index_fits_i32: self.fits_i32(index),
                index: b(index),
            },
            ExprKind::Len(base) => kir::ExprKind::Len(*base),
            ExprKind::Unary(op, a) => kir::ExprKind::Unary(*op, b(a)),
            ExprKind::Binary(op, x, y, _) => {
                let no_wrap = if self.bounds.u32_arith(e).is_some() {
                    check(self.bounds.no_signed_wrap(e))
                } else {
                    Check::Checked
                };
                kir::ExprKind::Binary(*op, b(x), b(y), no_wrap)
            }
            ExprKind::Cast(a) => kir::ExprKind::Cast(b(a)),
            ExprKind::Math(m, args) => kir::ExprKind::Math(*m, self.exprs(args)),
            ExprKind::Query(q, d) => kir::ExprKind::Query(*q, *d),
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
            } => kir::ExprKind::Atomic {
                op: *op,
                base: *base,
                index: b(index),
                values: self.exprs(values),
            },
            ExprKind::Reduce(op, a) => kir::ExprKind::Reduce(*op, b(a)),
            ExprKind::SubGroupQuery(q) => kir::ExprKind::SubGroupQuery(*q),
            ExprKind::SubGroup(op, args) => kir::ExprKind::SubGroup(*op, self.exprs(args)),
            ExprKind::Call(path, args) => {
                let key = path_key(path);
                let k = self
                    .helpers
                    .iter()
                    .position(|h| path_key(h) == key)
                    .expect("helpers are collected");
                kir::ExprKind::Call(k, self.exprs(args))
            }
            ExprKind::Select(c, x, y) => kir::ExprKind::Select(b(c), b(x), b(y)),
        };
        kir::Expr {
            ty: t,
            kind,
            src: (),
        }
    }
}
