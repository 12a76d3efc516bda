//! Which element accesses are in bounds by construction, so that their checks can go.
//!
//! A small interval analysis over the kernel's unsigned integer values. Every local that is
//! never assigned after its `let` (`Local::mutable == false`) has one value, its initializer's,
//! and every `for` variable lies in its range; from those, an index gets
//! - a lower and an upper bound, as numbers or as C constant expressions of the work-group
//!   size (`SYCL_LX` ...: the GPU program is built for one size, so the C compiler folds
//!   them): a local array's fixed length is then compared with the upper bound;
//! - or a relation to a slice's length (`i < x.len()`): `let n = x.len();`,
//!   `let end = (begin + chunk).min(n);`, `for i in (a..end).step_by(s)` make `i < n` for
//!   every `i` the loop body sees;
//! - or, on the C backends, a guard: a condition over scalar parameters, ranges and slice
//!   lengths, the same in every work-item of a launch (`global_range(d) <= x.len()` for
//!   `global_id(d)`; `hi < x.len()` where `hi` is a run-time upper bound such as
//!   `(group_range(0) - 1) * w + local_range(0) - 1`), which the emitter tests once to pick
//!   between a checked and an unchecked copy of the body.
//!
//! A proof drops the check of one access on one backend; what cannot be proved stays checked
//! (an out-of-range index still fails the work-item). Soundness rests on three facts: bounds
//! are kept in the value's own type, and any operation that may wrap widens its result to the
//! type's whole range (so a wrapped value is never under-estimated); signed values and
//! anything else the analysis does not model have no bounds at all; and a `for` variable's
//! bounds hold in its body, the only place where it can be named.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::ir::*;

/// A bound: a number, or a C expression (of `sycl_u64`, through the `sycl_b*` functions of
/// the preludes): over the work-group size, which the C compiler folds to a constant
/// (`run_time: false`), or also over scalar parameters and ranges (`run_time: true`), the same
/// in every work-item of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
enum V {
    N(u128),
    C(String, bool),
}

impl V {
    fn c(&self) -> String {
        match self {
            V::N(v) => format!("SYCL_U64C({v})"),
            V::C(s, _) => s.clone(),
        }
    }

    fn run_time(&self) -> bool {
        matches!(self, V::C(_, true))
    }

    /// An exact run-time value.
    fn at_run_time(c: String) -> V {
        V::C(c, true)
    }
}

/// A run-time value an index can be bounded by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rel {
    /// The length of slice parameter `p`.
    Len(usize),
    /// `global_range(d)`.
    Range(u8),
}

/// Bounds of an unsigned value: `lo <= v <= hi`, and possibly `v <= rel` (`v < rel` when
/// `strict`).
#[derive(Clone, Debug)]
struct B {
    lo: V,
    hi: V,
    len: Option<(Rel, bool)>,
}

/// A relation that holds for `min(x, y)` when `a` holds for `x` and `b` for `y`: either; a
/// slice length first (it needs no run-time guard), a strict one first.
fn pick(a: Option<(Rel, bool)>, b: Option<(Rel, bool)>) -> Option<(Rel, bool)> {
    let rank = |r: &Option<(Rel, bool)>| match r {
        Some((Rel::Len(_), true)) => 4,
        Some((Rel::Len(_), false)) => 3,
        Some((Rel::Range(_), true)) => 2,
        Some((Rel::Range(_), false)) => 1,
        None => 0,
    };
    if rank(&a) >= rank(&b) {
        a
    } else {
        b
    }
}

/// The largest value of an unsigned type. Other types get no bounds at all: `bounds` and
/// `local` return before using it for them.
fn type_max(t: Ty) -> u128 {
    match t {
        Ty::U32 => u32::MAX as u128,
        Ty::U64 | Ty::Usize => u64::MAX as u128,
        _ => 0,
    }
}

fn full(t: Ty) -> B {
    B {
        lo: V::N(0),
        hi: V::N(type_max(t)),
        len: None,
    }
}

/// `a op b` on bounds: on numbers (u128) with `num`, else the prelude's C function `sycl_b<op>`
/// (folded by the C compiler). The C functions follow the number forms: `add` and `mul`
/// saturate (at u64::MAX in C, which `in_type` treats as "may have wrapped"; numbers above
/// the type's maximum are caught there), `sub` gives 0 instead of wrapping (used where `a >= b`
/// holds or the result is not used), `div` by 0 gives `a`.
fn op(name: &str, a: &V, b: &V, num: fn(u128, u128) -> u128) -> V {
    match (a, b) {
        (V::N(x), V::N(y)) => V::N(num(*x, *y)),
        _ => V::C(
            format!("sycl_b{name}({}, {})", a.c(), b.c()),
            a.run_time() || b.run_time(),
        ),
    }
}

fn add(a: &V, b: &V) -> V {
    op("add", a, b, u128::saturating_add)
}

fn mul(a: &V, b: &V) -> V {
    op("mul", a, b, u128::saturating_mul)
}

fn min(a: &V, b: &V) -> V {
    op("min", a, b, u128::min)
}

fn max(a: &V, b: &V) -> V {
    op("max", a, b, u128::max)
}

fn sub(a: &V, b: &V) -> V {
    op("sub", a, b, u128::saturating_sub)
}

fn div(a: &V, b: &V) -> V {
    op("div", a, b, |x, y| x.checked_div(y).unwrap_or(x))
}

/// What the kernel's immutable locals and loop variables are.
enum Def<'a> {
    Let(&'a Expr),
    For {
        start: &'a Expr,
        end: &'a Expr,
        inclusive: bool,
    },
}

/// Which backend a proof is for: the C programs know the work-group size when they are
/// built; the native CPU form does not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Target {
    C,
    Rust,
}

/// Whether an access is in bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proof {
    /// Not proved: check it.
    No,
    /// Always in bounds.
    Always,
    /// In bounds when this C constant expression (over the work-group size) is true.
    When(String),
    /// In bounds when this C expression is true: a run-time condition over scalar parameters,
    /// ranges and slice lengths, the same for every work-item of a launch, that the emitter
    /// may test once (`global_range(d) <= len(p)` for an index below `global_range(d)`).
    Guard(String),
}

pub struct Bounds<'a> {
    f: &'a Function,
    defs: HashMap<usize, Def<'a>>,
    memo: RefCell<HashMap<usize, B>>,
    /// C declarations of the symbolic bounds (`const sycl_u64 sycl_bN = ..;`), which keep
    /// each bound expression small.
    decls: RefCell<Vec<String>>,
}

impl<'a> Bounds<'a> {
    pub fn new(f: &'a Function) -> Bounds<'a> {
        let mut defs = HashMap::new();
        fn collect<'a>(f: &'a Function, body: &'a [Stmt], defs: &mut HashMap<usize, Def<'a>>) {
            for s in body {
                match &s.kind {
                    StmtKind::Let(l, e) if !f.locals[*l].mutable => {
                        defs.insert(*l, Def::Let(e));
                    }
                    StmtKind::For {
                        var,
                        start,
                        end,
                        inclusive,
                        body,
                        ..
                    } => {
                        if !f.locals[*var].mutable {
                            defs.insert(
                                *var,
                                Def::For {
                                    start,
                                    end,
                                    inclusive: *inclusive,
                                },
                            );
                        }
                        collect(f, body, defs);
                    }
                    StmtKind::If(_, a, b) => {
                        collect(f, a, defs);
                        collect(f, b, defs);
                    }
                    StmtKind::While(_, b) | StmtKind::Loop(b) => collect(f, b, defs),
                    _ => {}
                }
            }
        }
        collect(f, &f.body, &mut defs);
        Bounds {
            f,
            defs,
            memo: Default::default(),
            decls: Default::default(),
        }
    }

    /// The C declarations the proofs so far refer to: they go first in the kernel's body.
    pub fn c_decls(&self) -> Vec<String> {
        self.decls.borrow().clone()
    }

    /// A C bound under a name.
    fn name(&self, value: String, run_time: bool) -> V {
        let mut decls = self.decls.borrow_mut();
        let name = format!("sycl_b{}", decls.len());
        decls.push(format!("const sycl_u64 {name} = {value};"));
        V::C(name, run_time)
    }

    /// The bounds of `lo..=hi` computed in the unbounded integers, as a value of type `t`:
    /// when `hi` may exceed the type's maximum the operation may have wrapped, and the value
    /// may be anything.
    fn in_type(&self, t: Ty, lo: V, hi: V, len: Option<(Rel, bool)>) -> B {
        let m = type_max(t);
        match &hi {
            V::N(h) if *h > m => full(t),
            V::N(_) => B {
                lo: match lo {
                    V::C(l, rt) => self.name(l, rt),
                    n => n,
                },
                hi,
                len,
            },
            // C bounds saturate at u64::MAX: reaching the type's maximum may mean it wrapped.
            V::C(h, rt) => {
                let rt = *rt || lo.run_time();
                let lo = self.name(
                    format!("sycl_bwrap_lo({h}, {}, SYCL_U64C({m}))", lo.c()),
                    rt,
                );
                let hi = self.name(format!("sycl_bmin({h}, SYCL_U64C({m}))"), rt);
                B { lo, hi, len }
            }
        }
    }

    /// Whether `base[index]` is in bounds, as far as `target` can know.
    pub fn access(&self, base: Base, index: &Expr, target: Target) -> Proof {
        let b = self.bounds(index);
        match base {
            Base::Param(p) => match (b.len, &b.hi, target) {
                (Some((Rel::Len(q), true)), _, _) if q == p => Proof::Always,
                (_, _, Target::Rust) => Proof::No,
                (Some((Rel::Range(d), true)), _, _) => {
                    Proof::Guard(format!("(sycl_r{d} <= p{p}_len)"))
                }
                (_, V::N(h), _) if *h >= u64::MAX as u128 => Proof::No,
                (_, hi, _) => Proof::Guard(format!("({} < p{p}_len)", hi.c())),
            },
            Base::Local(l) => {
                let n = self.f.locals[l].array.expect("an array") as u128;
                match (&b.hi, target) {
                    (V::N(h), _) if *h < n => Proof::Always,
                    (V::C(h, false), Target::C) => Proof::When(format!("({h} < SYCL_U64C({n}))")),
                    (V::C(h, true), Target::C) => Proof::Guard(format!("({h} < SYCL_U64C({n}))")),
                    _ => Proof::No,
                }
            }
        }
    }

    /// Whether index `e` can be computed in signed 32-bit arithmetic and sign-extended (how
    /// hand-written OpenCL C with `int` indices reads, and what Intel's CPU vectorizer needs to
    /// see consecutive accesses; zero-extended or truncated 64-bit arithmetic hides them).
    /// Only for indices computed in `u32` (`narrow_tree`), and only when every value of the
    /// tree is below 2^31, so that the signed form computes the same numbers without overflow.
    pub fn narrow_index(&self, e: &Expr, narrowed: &dyn Fn(usize) -> bool) -> Proof {
        let mut his = Vec::new();
        match self.narrow_tree(e, narrowed, &mut his) {
            Some(true) => self.all_below_values(&his, 1u128 << 31),
            _ => Proof::No,
        }
    }

    /// The upper bounds of a narrowable index tree's values into `his`; `Some(true)` when it
    /// has a `u32` part (an index of only
    /// `usize` values stays 64-bit: Intel's vectorizer reads those well), `None` when it
    /// cannot be narrowed. Leaves are pure: the narrow form is emitted beside the wide one,
    /// and only one of them runs.
    fn narrow_tree(
        &self,
        e: &Expr,
        narrowed: &dyn Fn(usize) -> bool,
        his: &mut Vec<V>,
    ) -> Option<bool> {
        let t = self.f.ty(e.ty);
        if !matches!(t, Ty::U32 | Ty::U64 | Ty::Usize) {
            return None;
        }
        his.push(self.bounds(e).hi);
        let small = t == Ty::U32;
        match &e.kind {
            ExprKind::Lit(_) => Some(false),
            ExprKind::Local(l) if self.f.locals[*l].array.is_none() => {
                if small || narrowed(*l) {
                    return Some(true);
                }
                // A `usize` local that is a widened `u32` value (`let c = (..) as usize;`).
                match self.defs.get(l) {
                    Some(Def::Let(d)) => self.narrow_tree(d, narrowed, his),
                    _ => None,
                }
            }
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b) => {
                let x = self.narrow_tree(a, narrowed, his)?;
                let y = self.narrow_tree(b, narrowed, his)?;
                Some(x || y)
            }
            ExprKind::Cast(a, _) => {
                let from = self.f.ty(a.ty);
                match from {
                    // Widening a `u32`: its tree.
                    Ty::U32 => self.narrow_tree(a, narrowed, his).map(|_| true),
                    // Truncating to `u32` (a leaf, emitted by pushing the truncation down).
                    Ty::U64 | Ty::Usize if small && pure(a) => Some(true),
                    _ => None,
                }
            }
            ExprKind::Param(_) if small => Some(true),
            ExprKind::Math(MathFn::Min | MathFn::Max, args) if small && args.iter().all(pure) => {
                Some(true)
            }
            _ => None,
        }
    }

    /// Whether `for v in start..end` (`..=end`, `.step_by(step)`) can count with `v += step`
    /// in a type of `bits` bits: every value it reaches, the last step included, stays below
    /// 2^bits. Then the loop needs no trip count (Intel's vectorizer keeps a work-item-strided
    /// loop whose counter is the index) and, at 32 bits, no 64-bit counter.
    pub fn loop_fits(&self, end: &Expr, step: Option<&Expr>, bits: u32) -> Proof {
        let e = self.bounds(end);
        let st = match step {
            Some(s) => self.bounds(s).hi,
            None => V::N(1),
        };
        // `v <= end - 1`, so `v + step <= hi(end) + hi(step) - 1`, which must be below
        // 2^bits; saturated bounds (u64::MAX, "may have wrapped") never pass at 64 bits.
        let limit = if bits >= 64 {
            u64::MAX as u128
        } else {
            1u128 << bits
        };
        self.all_below_values(&[add(&e.hi, &st)], limit)
    }

    /// Whether every value of `e` is below 2^bits.
    pub fn below(&self, e: &Expr, bits: u32) -> Proof {
        self.all_below_values(&[self.bounds(e).hi], 1u128 << bits)
    }

    /// Whether `u32` arithmetic `e` (`a + b`, `a - b`, `a * b`) has no signed overflow
    /// either: its operands and its result are all below 2^31, so the same operation on
    /// `int`s computes the same numbers. (Intel's reader turns SPIR-V's `NoSignedWrap`, and
    /// its OpenCL C compiler turns `int` arithmetic, into LLVM's `nsw`, which lets LLVM move
    /// a sign extension through `c ± k`: one address with constant displacements.) `No` for
    /// any other expression. Never a run-time guard: a guard taken for a flag alone would add
    /// a second program (an entry point in SPIR-V), and send launches with large parameters
    /// to the checked one.
    pub fn no_signed_wrap(&self, e: &Expr) -> Proof {
        match self.u32_arith(e) {
            Some((a, b)) => {
                let his = [self.bounds(e).hi, self.bounds(a).hi, self.bounds(b).hi];
                without_guard(self.all_below_values(&his, 1u128 << 31))
            }
            None => Proof::No,
        }
    }

    /// `no_signed_wrap` for every node of the tree of `u32` `+ - *` that `e` is the root
    /// of: the whole tree can then be computed in `int` (OpenCL C).
    pub fn no_signed_wrap_tree(&self, e: &Expr) -> Proof {
        fn values(b: &Bounds<'_>, e: &Expr, his: &mut Vec<V>) {
            his.push(b.bounds(e).hi);
            if let Some((x, y)) = b.u32_arith(e) {
                values(b, x, his);
                values(b, y, his);
            }
        }
        if self.u32_arith(e).is_none() {
            return Proof::No;
        }
        let mut his = Vec::new();
        values(self, e, &mut his);
        without_guard(self.all_below_values(&his, 1u128 << 31))
    }

    /// The operands of `e` when it is `u32` `+`, `-` or `*`.
    pub fn u32_arith<'e>(&self, e: &'e Expr) -> Option<(&'e Expr, &'e Expr)> {
        match &e.kind {
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b)
                if self.f.ty(e.ty) == Ty::U32 =>
            {
                Some((a, b))
            }
            _ => None,
        }
    }

    /// Whether `e` differs between the work-items of a group: it reads a local or global id
    /// (directly or through immutable locals).
    pub fn per_work_item(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Query(Query::LocalId | Query::GlobalId, _) => true,
            ExprKind::Local(l) => match self.defs.get(l) {
                Some(Def::Let(d)) => self.per_work_item(d),
                Some(Def::For { start, .. }) => self.per_work_item(start),
                None => false,
            },
            ExprKind::Unary(_, a) | ExprKind::Cast(a, _) => self.per_work_item(a),
            ExprKind::Binary(_, a, b) => self.per_work_item(a) || self.per_work_item(b),
            ExprKind::Math(_, args) => args.iter().any(|a| self.per_work_item(a)),
            _ => false,
        }
    }

    fn all_below_values(&self, his: &[V], limit: u128) -> Proof {
        let mut symbolic: Option<V> = None;
        let mut run_time = false;
        for h in his {
            match h {
                V::N(n) if *n < limit => {}
                V::N(_) => return Proof::No,
                c => {
                    run_time |= c.run_time();
                    symbolic = Some(match symbolic {
                        None => c.clone(),
                        Some(s) => max(&s, c),
                    });
                }
            }
        }
        match symbolic {
            None => Proof::Always,
            Some(s) => {
                let cond = format!("({} < SYCL_U64C({limit}))", s.c());
                if run_time {
                    Proof::Guard(cond)
                } else {
                    Proof::When(cond)
                }
            }
        }
    }

    fn local(&self, l: usize) -> B {
        let t = self.f.ty(self.f.locals[l].ty);
        if !matches!(t, Ty::U32 | Ty::U64 | Ty::Usize) {
            return full(t);
        }
        if let Some(b) = self.memo.borrow().get(&l) {
            return b.clone();
        }
        let b = match self.defs.get(&l) {
            None => full(t),
            Some(Def::Let(e)) => self.bounds(e),
            Some(Def::For {
                start,
                end,
                inclusive,
            }) => {
                let (s, e) = (self.bounds(start), self.bounds(end));
                // In the body, start <= v < end (v <= end when inclusive), whatever the step.
                let (hi, len) = if *inclusive {
                    (e.hi.clone(), e.len)
                } else {
                    (sub(&e.hi, &V::N(1)), e.len.map(|(p, _)| (p, true)))
                };
                self.in_type(t, s.lo, hi, len)
            }
        };
        self.memo.borrow_mut().insert(l, b.clone());
        b
    }

    fn bounds(&self, e: &Expr) -> B {
        let t = self.f.ty(e.ty);
        if !matches!(t, Ty::U32 | Ty::U64 | Ty::Usize) {
            return full(t);
        }
        match &e.kind {
            ExprKind::Lit(Lit::Zero) => self.in_type(t, V::N(0), V::N(0), None),
            ExprKind::Lit(Lit::Int(v)) => self.in_type(t, V::N(*v), V::N(*v), None),
            ExprKind::Local(l) => self.local(*l),
            // Its value at run time (the same in every work-item), and the relation.
            ExprKind::Len(Base::Param(p)) => {
                let v = V::at_run_time(format!("p{p}_len"));
                let mut b = self.in_type(t, v.clone(), v, None);
                b.len = Some((Rel::Len(*p), false));
                b
            }
            ExprKind::Len(Base::Local(l)) => {
                let n = self.f.locals[*l].array.expect("an array") as u128;
                self.in_type(t, V::N(n), V::N(n), None)
            }
            ExprKind::Query(Query::LocalId, d) => {
                let r = V::C(
                    format!("((sycl_u64)SYCL_LOCAL_RANGE(SYCL_AXIS({d})))"),
                    false,
                );
                self.in_type(t, V::N(0), sub(&r, &V::N(1)), None)
            }
            // Every work-item has `global_id(d) < global_range(d)`: a flat kernel's extra
            // GPU work-items leave before the body, and an nd-range launches exactly.
            ExprKind::Query(Query::GlobalId, d) => {
                let r = V::at_run_time(format!("sycl_r{d}"));
                let mut b = self.in_type(t, V::N(0), sub(&r, &V::N(1)), None);
                b.len = Some((Rel::Range(*d), true));
                b
            }
            ExprKind::Query(Query::GlobalRange, d) => {
                let r = V::at_run_time(format!("sycl_r{d}"));
                let mut b = self.in_type(t, r.clone(), r, None);
                b.len = Some((Rel::Range(*d), false));
                b
            }
            ExprKind::Query(Query::GroupId, d) => {
                let r = V::at_run_time(format!("sycl_group_range(SYCL_AXIS({d}))"));
                self.in_type(t, V::N(0), sub(&r, &V::N(1)), None)
            }
            ExprKind::Query(Query::GroupRange, d) => {
                let r = V::at_run_time(format!("sycl_group_range(SYCL_AXIS({d}))"));
                self.in_type(t, r.clone(), r, None)
            }
            // A scalar parameter: its value (the same in every work-item).
            ExprKind::Param(i) => {
                let v = V::at_run_time(format!("((sycl_u64)p{i})"));
                self.in_type(t, v.clone(), v, None)
            }
            ExprKind::Query(Query::LocalRange, d) => {
                let r = V::C(
                    format!("((sycl_u64)SYCL_LOCAL_RANGE(SYCL_AXIS({d})))"),
                    false,
                );
                self.in_type(t, r.clone(), r, None)
            }
            ExprKind::Cast(a, _) => {
                let from = self.f.ty(a.ty);
                if !matches!(from, Ty::U32 | Ty::U64 | Ty::Usize) {
                    return full(t);
                }
                let b = self.bounds(a);
                if type_max(t) >= type_max(from) {
                    b
                } else {
                    // Truncation: the value is unchanged when it fits; `v mod 2^k <= v` keeps
                    // an upper bound by a length in any case.
                    let len = b.len;
                    let mut out = self.in_type(t, b.lo, b.hi, None);
                    out.len = len;
                    out
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.bounds(a), self.bounds(b));
                match op {
                    BinOp::Add => self.in_type(t, add(&x.lo, &y.lo), add(&x.hi, &y.hi), None),
                    BinOp::Mul => self.in_type(t, mul(&x.lo, &y.lo), mul(&x.hi, &y.hi), None),
                    BinOp::Sub => {
                        // No wrap when x.lo >= y.hi: then x - y <= x.
                        match (&x.lo, &y.hi) {
                            (V::N(l), V::N(h)) if l >= h => {
                                self.in_type(t, sub(&x.lo, &y.hi), sub(&x.hi, &y.lo), x.len)
                            }
                            (V::N(_), V::N(_)) => full(t),
                            _ => {
                                let ok = format!("({} >= {})", x.lo.c(), y.hi.c());
                                // Without `ok` it may wrap: anything in the type.
                                let rt = x.lo.run_time()
                                    || y.hi.run_time()
                                    || x.hi.run_time()
                                    || y.lo.run_time();
                                let lo = V::C(
                                    format!("({ok} ? {} : SYCL_U64C(0))", sub(&x.lo, &y.hi).c()),
                                    rt,
                                );
                                let hi = V::C(
                                    format!(
                                        "({ok} ? {} : SYCL_U64C({}))",
                                        sub(&x.hi, &y.lo).c(),
                                        type_max(t)
                                    ),
                                    rt,
                                );
                                self.in_type(t, lo, hi, None)
                            }
                        }
                    }
                    // A failed division gives 0, within every bound below.
                    BinOp::Div => match &y.lo {
                        V::N(l) if *l >= 1 => {
                            self.in_type(t, div(&x.lo, &y.hi), div(&x.hi, &y.lo), x.len)
                        }
                        _ => self.in_type(t, V::N(0), x.hi, x.len),
                    },
                    BinOp::Rem => {
                        let hi = match &y.hi {
                            V::N(h) if *h >= 1 => min(&x.hi, &V::N(h - 1)),
                            _ => x.hi.clone(),
                        };
                        self.in_type(t, V::N(0), hi, x.len)
                    }
                    BinOp::BitAnd => {
                        let len = pick(x.len, y.len);
                        self.in_type(t, V::N(0), min(&x.hi, &y.hi), len)
                    }
                    BinOp::Shr => self.in_type(t, V::N(0), x.hi, x.len),
                    _ => full(t),
                }
            }
            ExprKind::Math(MathFn::Min, args) => {
                let (x, y) = (self.bounds(&args[0]), self.bounds(&args[1]));
                let len = pick(x.len, y.len);
                self.in_type(t, min(&x.lo, &y.lo), min(&x.hi, &y.hi), len)
            }
            ExprKind::Math(MathFn::Max, args) => {
                let (x, y) = (self.bounds(&args[0]), self.bounds(&args[1]));
                let len = match (x.len, y.len) {
                    (Some(a), Some(b)) if a == b => Some(a),
                    _ => None,
                };
                self.in_type(t, max(&x.lo, &y.lo), max(&x.hi, &y.hi), len)
            }
            ExprKind::Select(_, a, b) => {
                let (x, y) = (self.bounds(a), self.bounds(b));
                let len = match (x.len, y.len) {
                    (Some(a), Some(b)) if a == b => Some(a),
                    _ => None,
                };
                self.in_type(t, min(&x.lo, &y.lo), max(&x.hi, &y.hi), len)
            }
            _ => full(t),
        }
    }
}

/// A proof that needs no run-time guard (`Guard` becomes `No`).
fn without_guard(p: Proof) -> Proof {
    match p {
        Proof::Guard(_) => Proof::No,
        p => p,
    }
}

/// An expression without effects or failures: locals, parameters, literals, work-item
/// queries, and arithmetic that cannot fail over those.
pub fn pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Lit(_) | ExprKind::Local(_) | ExprKind::Param(_) | ExprKind::Query(..) => true,
        ExprKind::Len(_) => true,
        ExprKind::Unary(_, a) | ExprKind::Cast(a, _) => pure(a),
        ExprKind::Binary(
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::BitAnd
            | BinOp::BitOr
            | BinOp::BitXor
            // (Shifts mask their amount: they cannot fail.)
            | BinOp::Shl
            | BinOp::Shr
            | BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge,
            a,
            b,
        ) => pure(a) && pure(b),
        ExprKind::Math(MathFn::Min | MathFn::Max, args) => args.iter().all(pure),
        _ => false,
    }
}
