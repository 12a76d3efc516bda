//! Which element accesses are in bounds by construction, so that their checks can go.
//!
//! A small interval analysis over the kernel's unsigned integer values. Every local that is
//! never assigned after its `let` (`Local::mutable == false`) has one value, its initializer's,
//! and every `for` variable lies in its range; from those, an index gets
//! - a lower and an upper bound, as numbers or as [`Bound`] trees over the work-group size
//!   (each program is built for one size, so they fold to numbers then): a local array's
//!   fixed length is then compared with the upper bound;
//! - or a relation to a slice's length (`i < x.len()`): `let n = x.len();`,
//!   `let end = (begin + chunk).min(n);`, `for i in (a..end).step_by(s)` make `i < n` for
//!   every `i` the loop body sees;
//! - or, on the GPU and OpenCL back ends, a guard: a [`Bound`] condition over scalar
//!   parameters, ranges and slice lengths, the same in every work-item of a launch (`global_range(d) <= x.len()` for
//!   `global_id(d)`; `hi < x.len()` where `hi` is a run-time upper bound such as
//!   `(group_range(0) - 1) * w + local_range(0) - 1`), which the host tests once per launch
//!   to pick between a checked and an unchecked copy of the body.
//!
//! Bounds are data (`sycl_kernel_ir::Bound`): the C printers spell them with the preludes'
//! `sycl_b*` functions, the IR carries them to the runtime, the host evaluates them with
//! `Bound::eval`. One [`Bounds`] serves every emitter of a kernel.
//!
//! A proof drops the check of one access on one backend; what cannot be proved stays checked
//! (an out-of-range index still fails the work-item). Soundness rests on three facts: bounds
//! are kept in the value's own type, and any operation that may wrap widens its result to the
//! type's whole range (so a wrapped value is never under-estimated); signed values and
//! anything else the analysis does not model have no bounds at all; and a `for` variable's
//! bounds hold in its body, the only place where it can be named.

use std::cell::RefCell;
use std::collections::HashMap;

use sycl_kernel_ir::ir::stmt_roots;
use sycl_kernel_ir::{Bound, BoundCmp, BoundFn};

use crate::ir::*;

/// A bound: a number, or a symbolic [`Bound`] in saturating `u64` arithmetic: over the
/// work-group size only, which folds to a number for each built program (`run_time:
/// false`), or also over scalar parameters, ranges and lengths (`run_time: true`), the same
/// in every work-item of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
enum V {
    N(u128),
    S(Bound, bool),
}

impl V {
    /// As a [`Bound`]; a number beyond `u64` saturates, as the `u64` forms do ("may have
    /// wrapped"), which no proof accepts.
    fn bound(&self) -> Bound {
        match self {
            V::N(v) => Bound::Num(u64::try_from(*v).unwrap_or(u64::MAX)),
            V::S(b, _) => b.clone(),
        }
    }

    fn run_time(&self) -> bool {
        matches!(self, V::S(_, true))
    }

    /// An exact run-time value.
    fn at_run_time(b: Bound) -> V {
        V::S(b, true)
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

/// `a op b` on bounds: on numbers (u128) with `num`, else a [`Bound`] of `f`. The symbolic
/// forms follow the number forms: `add` and `mul` saturate (at u64::MAX, which `in_type`
/// treats as "may have wrapped"; numbers above the type's maximum are caught there), `sub`
/// gives 0 instead of wrapping (used where `a >= b` holds or the result is not used), `div`
/// by 0 gives `a`.
fn op(f: BoundFn, a: &V, b: &V, num: fn(u128, u128) -> u128) -> V {
    match (a, b) {
        (V::N(x), V::N(y)) => V::N(num(*x, *y)),
        _ => V::S(
            Bound::Fn(f, Box::new(a.bound()), Box::new(b.bound())),
            a.run_time() || b.run_time(),
        ),
    }
}

fn add(a: &V, b: &V) -> V {
    op(BoundFn::Add, a, b, u128::saturating_add)
}

fn mul(a: &V, b: &V) -> V {
    op(BoundFn::Mul, a, b, u128::saturating_mul)
}

fn min(a: &V, b: &V) -> V {
    op(BoundFn::Min, a, b, u128::min)
}

fn max(a: &V, b: &V) -> V {
    op(BoundFn::Max, a, b, u128::max)
}

fn sub(a: &V, b: &V) -> V {
    op(BoundFn::Sub, a, b, u128::saturating_sub)
}

fn div(a: &V, b: &V) -> V {
    op(BoundFn::Div, a, b, |x, y| x.checked_div(y).unwrap_or(x))
}

/// The most nodes a symbolic bound keeps (see `Bounds::in_type`): far above what real
/// kernels make (the bench's stencil: up to 1078 in a proof, 25 levels), low enough that a
/// chain of symbolic subtractions, which doubles its bounds at each step, stays cheap.
const MAX_BOUND_NODES: usize = 4096;

/// `v`, or `N(instead)` when it is a symbolic bound of more than [`MAX_BOUND_NODES`].
fn capped(v: V, instead: u128) -> V {
    match &v {
        V::S(b, _) if b.size() > MAX_BOUND_NODES => V::N(instead),
        _ => v,
    }
}

/// `a < b` as a condition.
fn lt(a: Bound, b: Bound) -> Bound {
    Bound::cmp(BoundCmp::Lt, a, b)
}

/// How deep a proof's condition may nest: with `analyze::MAX_NESTING` levels of the
/// kernel's own, within the kernel IR's `MAX_DEPTH`. Deeper conditions (long chains of
/// symbolic arithmetic) are dropped: the access stays checked.
pub const MAX_PROOF_DEPTH: usize = 64;

/// What the kernel's immutable locals and loop variables are.
enum Def<'a> {
    Let(&'a Expr),
    For {
        start: &'a Expr,
        end: &'a Expr,
        inclusive: bool,
    },
}

/// Whether an access is in bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proof {
    /// Not proved: check it.
    No,
    /// Always in bounds.
    Always,
    /// In bounds when this condition over the work-group size holds for the size the
    /// program is built for.
    When(Bound),
    /// In bounds when this run-time condition over scalar parameters, ranges and slice
    /// lengths holds: the same for every work-item of a launch, so the host tests it once
    /// (`global_range(d) <= len(p)` for an index below `global_range(d)`).
    Guard(Bound),
}

pub struct Bounds<'a> {
    f: &'a Function,
    defs: HashMap<usize, Def<'a>>,
    memo: RefCell<HashMap<usize, B>>,
    /// `false`: every query answers `Proof::No` (`#[sycl::kernel(__no_proofs)]`, the
    /// differential test's twin of each kernel).
    proofs: bool,
}

impl<'a> Bounds<'a> {
    pub fn new(f: &'a Function) -> Bounds<'a> {
        let mut defs = HashMap::new();
        fn collect<'a>(f: &'a Function, body: &'a [Stmt], defs: &mut HashMap<usize, Def<'a>>) {
            for s in body {
                match &s.kind {
                    StmtKind::Let(l, e)
                        if !f.locals[*l].info.mutable && f.locals[*l].array.is_none() =>
                    {
                        defs.insert(*l, Def::Let(e));
                    }
                    StmtKind::For(h, body) => {
                        if !f.locals[h.var].info.mutable {
                            defs.insert(
                                h.var,
                                Def::For {
                                    start: &h.start,
                                    end: &h.end,
                                    inclusive: h.inclusive,
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
            proofs: true,
        }
    }

    /// The analysis of a kernel that proves nothing: every access stays checked, every code
    /// form stays general (the differential test compares kernels with and without proofs).
    pub fn without_proofs(mut self) -> Bounds<'a> {
        self.proofs = false;
        self
    }

    /// `p`, or `No` when proofs are off or its condition nests deeper than
    /// [`MAX_PROOF_DEPTH`] (which the IR could not carry beside the kernel's own nesting).
    fn gate(&self, p: Proof) -> Proof {
        match &p {
            _ if !self.proofs => Proof::No,
            Proof::When(b) | Proof::Guard(b) if b.depth() > MAX_PROOF_DEPTH => Proof::No,
            _ => p,
        }
    }

    /// The bounds of `lo..=hi` computed in the unbounded integers, as a value of type `t`:
    /// when `hi` may exceed the type's maximum the operation may have wrapped, and the value
    /// may be anything.
    fn in_type(&self, t: Ty, lo: V, hi: V, len: Option<(Rel, bool)>) -> B {
        let m = type_max(t);
        // Symbolic bounds grow with the arithmetic they follow (a subtraction repeats its
        // operands): past a size they are replaced by the type's range, which is always
        // sound (0 below, the maximum above) and keeps the analysis linear.
        let (lo, hi) = (capped(lo, 0), capped(hi, m));
        match &hi {
            V::N(h) if *h > m => full(t),
            V::N(_) => B { lo, hi, len },
            // Symbolic bounds saturate at u64::MAX: reaching the type's maximum may mean it
            // wrapped.
            V::S(h, rt) => {
                let rt = *rt || lo.run_time();
                let max = Bound::Num(m as u64);
                let lo = V::S(
                    Bound::WrapLo(
                        Box::new(h.clone()),
                        Box::new(lo.bound()),
                        Box::new(max.clone()),
                    ),
                    rt,
                );
                let hi = V::S(Bound::op(BoundFn::Min, h.clone(), max), rt);
                B { lo, hi, len }
            }
        }
    }

    /// Whether `base[index]` is in bounds. (The native CPU form, which knows no work-group
    /// size when it is compiled and takes only the access guards, drops a check where this is
    /// `Always`, and where it is `Guard` in the copy of its loop for launches whose guards
    /// hold.)
    pub fn access(&self, base: Base, index: &Expr) -> Proof {
        self.gate(self.access_proof(base, index))
    }

    /// As [`Bounds::access`], for an index read where conditions `index < end` held for each
    /// of `ends` ([`guarded_accesses`]): the index is below what an `end` is below.
    pub fn access_under(&self, base: Base, index: &Expr, ends: &[&Expr]) -> Proof {
        if let Base::Param(p) = base {
            for end in ends {
                let proof = match self.bounds(end).len {
                    Some((Rel::Len(q), _)) if q == p => Proof::Always,
                    // Below another slice's length: in bounds where that is no longer.
                    Some((Rel::Len(q), _)) => {
                        Proof::Guard(Bound::cmp(BoundCmp::Le, Bound::Len(q), Bound::Len(p)))
                    }
                    Some((Rel::Range(d), _)) => Proof::Guard(Bound::cmp(
                        BoundCmp::Le,
                        Bound::GlobalRange(d),
                        Bound::Len(p),
                    )),
                    None => continue,
                };
                return self.gate(proof);
            }
        }
        self.access(base, index)
    }

    /// Whether an array field's item index is below the field's length `len`.
    pub fn item(&self, index: &Expr, len: u32) -> Proof {
        let n = len as u128;
        self.gate(match &self.bounds(index).hi {
            V::N(h) if *h < n => Proof::Always,
            V::S(h, false) => Proof::When(lt(h.clone(), Bound::Num(n as u64))),
            V::S(h, true) => Proof::Guard(lt(h.clone(), Bound::Num(n as u64))),
            _ => Proof::No,
        })
    }

    fn access_proof(&self, base: Base, index: &Expr) -> Proof {
        let b = self.bounds(index);
        match base {
            Base::Param(p) => match (b.len, &b.hi) {
                (Some((Rel::Len(q), true)), _) if q == p => Proof::Always,
                (Some((Rel::Range(d), true)), _) => Proof::Guard(Bound::cmp(
                    BoundCmp::Le,
                    Bound::GlobalRange(d),
                    Bound::Len(p),
                )),
                (_, V::N(h)) if *h >= u64::MAX as u128 => Proof::No,
                (_, hi) => Proof::Guard(lt(hi.bound(), Bound::Len(p))),
            },
            // A const parameter's length: a condition over it, which each instance knows
            // when it is built (the runtime replaces the parameter by its number).
            Base::Local(l) if self.const_len(l).is_some() => {
                let n = Bound::Const(self.const_len(l).expect("a const length"));
                match &b.hi {
                    V::N(h) if *h <= u64::MAX as u128 => Proof::When(lt(Bound::Num(*h as u64), n)),
                    V::S(h, false) => Proof::When(lt(h.clone(), n)),
                    V::S(h, true) => Proof::Guard(lt(h.clone(), n)),
                    _ => Proof::No,
                }
            }
            Base::Local(l) => {
                let n = self.f.locals[l].array_len().expect("an array") as u128;
                match &b.hi {
                    V::N(h) if *h < n => Proof::Always,
                    V::S(h, false) => Proof::When(lt(h.clone(), Bound::Num(n as u64))),
                    V::S(h, true) => Proof::Guard(lt(h.clone(), Bound::Num(n as u64))),
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
            Some(true) => self.gate(self.all_below_values(&his, 1u128 << 31)),
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
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b, _) => {
                let x = self.narrow_tree(a, narrowed, his)?;
                let y = self.narrow_tree(b, narrowed, his)?;
                Some(x || y)
            }
            ExprKind::Cast(a) => {
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
        self.gate(self.all_below_values(&[add(&e.hi, &st)], limit))
    }

    /// Whether every value of `e` is below 2^bits.
    pub fn below(&self, e: &Expr, bits: u32) -> Proof {
        self.gate(self.all_below_values(&[self.bounds(e).hi], 1u128 << bits))
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
                self.gate(without_guard(self.all_below_values(&his, 1u128 << 31)))
            }
            None => Proof::No,
        }
    }

    /// The operands of `e` when it is `u32` `+`, `-` or `*`.
    pub fn u32_arith<'e>(&self, e: &'e Expr) -> Option<(&'e Expr, &'e Expr)> {
        match &e.kind {
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b, _)
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
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.per_work_item(a),
            ExprKind::Binary(_, a, b, _) => self.per_work_item(a) || self.per_work_item(b),
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
                let cond = lt(s.bound(), Bound::Num(limit as u64));
                if run_time {
                    Proof::Guard(cond)
                } else {
                    Proof::When(cond)
                }
            }
        }
    }

    /// The const parameter that is array `l`'s length, if one is.
    fn const_len(&self, l: usize) -> Option<usize> {
        self.f.locals[l].array.and_then(|a| a.len_param)
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
                let v = V::at_run_time(Bound::Len(*p));
                let mut b = self.in_type(t, v.clone(), v, None);
                b.len = Some((Rel::Len(*p), false));
                b
            }
            ExprKind::Len(Base::Local(l)) if self.const_len(*l).is_some() => {
                let v = V::S(
                    Bound::Const(self.const_len(*l).expect("a const length")),
                    false,
                );
                self.in_type(t, v.clone(), v, None)
            }
            ExprKind::Len(Base::Local(l)) => {
                let n = self.f.locals[*l].array_len().expect("an array") as u128;
                self.in_type(t, V::N(n), V::N(n), None)
            }
            // Its value: known when each instance is built (the runtime replaces the
            // parameter by its number before anything reads the proofs).
            ExprKind::ConstParam(p) => {
                let v = V::S(Bound::Const(*p), false);
                self.in_type(t, v.clone(), v, None)
            }
            ExprKind::Query(Query::LocalId, d) => {
                let r = V::S(Bound::LocalRange(*d), false);
                self.in_type(t, V::N(0), sub(&r, &V::N(1)), None)
            }
            // Every work-item has `global_id(d) < global_range(d)`: a flat kernel's extra
            // GPU work-items leave before the body, and an nd-range launches exactly.
            ExprKind::Query(Query::GlobalId, d) => {
                let r = V::at_run_time(Bound::GlobalRange(*d));
                let mut b = self.in_type(t, V::N(0), sub(&r, &V::N(1)), None);
                b.len = Some((Rel::Range(*d), true));
                b
            }
            ExprKind::Query(Query::GlobalRange, d) => {
                let r = V::at_run_time(Bound::GlobalRange(*d));
                let mut b = self.in_type(t, r.clone(), r, None);
                b.len = Some((Rel::Range(*d), false));
                b
            }
            ExprKind::Query(Query::GroupId, d) => {
                let r = V::at_run_time(Bound::GroupRange(*d));
                self.in_type(t, V::N(0), sub(&r, &V::N(1)), None)
            }
            ExprKind::Query(Query::GroupRange, d) => {
                let r = V::at_run_time(Bound::GroupRange(*d));
                self.in_type(t, r.clone(), r, None)
            }
            // A scalar parameter: its value (the same in every work-item).
            ExprKind::Param(i) => {
                let v = V::at_run_time(Bound::Param(*i));
                self.in_type(t, v.clone(), v, None)
            }
            ExprKind::Query(Query::LocalRange, d) => {
                let r = V::S(Bound::LocalRange(*d), false);
                self.in_type(t, r.clone(), r, None)
            }
            ExprKind::Cast(a) => {
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
            ExprKind::Binary(op, a, b, _) => {
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
                                let ok = Bound::cmp(BoundCmp::Ge, x.lo.bound(), y.hi.bound());
                                // Without `ok` it may wrap: anything in the type.
                                let rt = x.lo.run_time()
                                    || y.hi.run_time()
                                    || x.hi.run_time()
                                    || y.lo.run_time();
                                let cond = |a: Bound, b: u128| {
                                    Bound::Cond(
                                        Box::new(ok.clone()),
                                        Box::new(a),
                                        Box::new(V::N(b).bound()),
                                    )
                                };
                                let lo = V::S(cond(sub(&x.lo, &y.hi).bound(), 0), rt);
                                let hi = V::S(cond(sub(&x.hi, &y.lo).bound(), type_max(t)), rt);
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
    e.is_pure()
}

/// The element indices that are immutable locals `l` read where a condition `l < end` held
/// (inside `if l < end { .. }`, the `then` value of such a select, after `l < end &&`), each
/// with those `end`s, by the index expression's address in `body` and `steps` (the tree the
/// checks are computed on: `encode::checked` maps a copy of the function).
pub fn guarded_accesses<'a>(
    locals: &'a [Local],
    body: &'a [Stmt],
    steps: Option<&'a [Step]>,
) -> HashMap<*const Expr, Vec<&'a Expr>> {
    let mut out = HashMap::new();
    let mut conds = Vec::new();
    guarded_stmts(locals, body, &mut conds, &mut out);
    fn in_steps<'a>(
        locals: &'a [Local],
        steps: &'a [Step],
        out: &mut HashMap<*const Expr, Vec<&'a Expr>>,
    ) {
        let mut conds = Vec::new();
        for s in steps {
            match s {
                Step::Region(b) => guarded_stmts(locals, b, &mut conds, out),
                Step::GroupLet(_, e) => guarded_expr(locals, e, &mut conds, out),
                Step::Group { args, .. } | Step::SubGroup { args, .. } => args
                    .iter()
                    .for_each(|a| guarded_expr(locals, a, &mut conds, out)),
                Step::SyncFor(h, b) => {
                    guarded_expr(locals, &h.start, &mut conds, out);
                    guarded_expr(locals, &h.end, &mut conds, out);
                    if let Some(st) = &h.step {
                        guarded_expr(locals, st, &mut conds, out);
                    }
                    in_steps(locals, b, out);
                }
                Step::Barrier => {}
            }
        }
    }
    if let Some(steps) = steps {
        in_steps(locals, steps, &mut out);
    }
    out
}

/// The facts `l < end` of condition `c` (its `&&` operands too), for immutable locals `l`.
fn conditions<'a>(locals: &[Local], c: &'a Expr, out: &mut Vec<(usize, &'a Expr)>) {
    match &c.kind {
        ExprKind::Binary(BinOp::And, a, b, _) => {
            conditions(locals, a, out);
            conditions(locals, b, out);
        }
        ExprKind::Binary(BinOp::Lt, a, b, _) => {
            if let ExprKind::Local(l) = a.kind {
                if locals[l].array.is_none() && !locals[l].info.mutable {
                    out.push((l, b));
                }
            }
        }
        ExprKind::Binary(BinOp::Gt, a, b, _) => {
            if let ExprKind::Local(l) = b.kind {
                if locals[l].array.is_none() && !locals[l].info.mutable {
                    out.push((l, a));
                }
            }
        }
        _ => {}
    }
}

/// Records, for every element index of `body` that is an immutable local, the ends of the
/// conditions `l < end` that hold where it is read (`conds`: those of the enclosing code).
fn guarded_stmts<'a>(
    locals: &'a [Local],
    body: &'a [Stmt],
    conds: &mut Vec<(usize, &'a Expr)>,
    out: &mut HashMap<*const Expr, Vec<&'a Expr>>,
) {
    for s in body {
        match &s.kind {
            StmtKind::If(c, a, b) => {
                guarded_expr(locals, c, conds, out);
                let depth = conds.len();
                conditions(locals, c, conds);
                guarded_stmts(locals, a, conds, out);
                conds.truncate(depth);
                guarded_stmts(locals, b, conds, out);
            }
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => {
                stmt_roots(s, &mut |e| guarded_expr(locals, e, conds, out));
                guarded_stmts(locals, b, conds, out);
            }
            StmtKind::Store { index, .. } | StmtKind::CopyField { index, .. } => {
                record(index, conds, out);
                stmt_roots(s, &mut |e| guarded_expr(locals, e, conds, out));
            }
            _ => stmt_roots(s, &mut |e| guarded_expr(locals, e, conds, out)),
        }
    }
}

fn record<'a>(
    index: &'a Expr,
    conds: &[(usize, &'a Expr)],
    out: &mut HashMap<*const Expr, Vec<&'a Expr>>,
) {
    if let ExprKind::Local(l) = index.kind {
        let ends: Vec<&Expr> = conds.iter().filter(|c| c.0 == l).map(|c| c.1).collect();
        if !ends.is_empty() {
            out.insert(index as *const Expr, ends);
        }
    }
}

fn guarded_expr<'a>(
    locals: &'a [Local],
    e: &'a Expr,
    conds: &mut Vec<(usize, &'a Expr)>,
    out: &mut HashMap<*const Expr, Vec<&'a Expr>>,
) {
    match &e.kind {
        ExprKind::Load { index, .. } => {
            record(index, conds, out);
            guarded_expr(locals, index, conds, out);
        }
        ExprKind::Select(c, a, b) => {
            guarded_expr(locals, c, conds, out);
            let depth = conds.len();
            conditions(locals, c, conds);
            guarded_expr(locals, a, conds, out);
            conds.truncate(depth);
            guarded_expr(locals, b, conds, out);
        }
        ExprKind::Binary(BinOp::And, a, b, _) => {
            guarded_expr(locals, a, conds, out);
            let depth = conds.len();
            conditions(locals, a, conds);
            guarded_expr(locals, b, conds, out);
            conds.truncate(depth);
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => guarded_expr(locals, a, conds, out),
        ExprKind::Binary(_, a, b, _) => {
            guarded_expr(locals, a, conds, out);
            guarded_expr(locals, b, conds, out);
        }
        ExprKind::Math(_, args)
        | ExprKind::Call(_, args)
        | ExprKind::SubGroup(_, args)
        | ExprKind::Group(_, args) => args
            .iter()
            .for_each(|a| guarded_expr(locals, a, conds, out)),
        ExprKind::Atomic { index, values, .. } => {
            guarded_expr(locals, index, conds, out);
            values
                .iter()
                .for_each(|a| guarded_expr(locals, a, conds, out));
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

#[cfg(test)]
mod tests {
    //! One test per proof rule: each parses a small kernel, takes the index of every element
    //! access in order, and asks what the analysis proves for it, on the native CPU form
    //! (no guards, no work-group size) and on the device forms.

    use super::*;
    use crate::analyze::visit_exprs;
    use crate::parse;

    fn kernel(src: &str) -> Function {
        let item: syn::ItemFn = syn::parse_str(src).expect("Rust");
        parse::function(&item, parse::Role::Kernel, &Default::default()).expect("a kernel")
    }

    /// Every element access of `f` (loads and stores), in source order.
    fn accesses(f: &Function) -> Vec<(Base, &Expr)> {
        fn stmts<'a>(body: &'a [Stmt], out: &mut Vec<(Base, &'a Expr)>) {
            for s in body {
                // Stores after the loads of their value and index (emitters' order is not
                // the point here: only which accesses there are).
                visit_exprs(std::slice::from_ref(s), &mut |e| {
                    if let ExprKind::Load { base, index, .. } = &e.kind {
                        out.push((*base, index));
                    }
                });
                match &s.kind {
                    StmtKind::Store { base, index, .. } => out.push((*base, index)),
                    StmtKind::If(_, a, b) => {
                        stmts(a, out);
                        stmts(b, out);
                    }
                    StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => {
                        stmts(b, out)
                    }
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        // `visit_exprs` descends into nested blocks itself: collect the stores separately.
        stmts(&f.body, &mut out);
        out.sort_by_key(|(_, e)| format!("{:?}", e.src.0));
        out.dedup_by_key(|(_, e)| *e as *const Expr);
        out
    }

    /// What the analysis proves for each access of `src`'s kernel: (native CPU, device).
    /// The native CPU form, compiled without a work-group size, drops a check outright only
    /// where the device proof is `Always` (`emit_rust`).
    fn proofs(src: &str) -> Vec<(Proof, Proof)> {
        let f = kernel(src);
        let b = Bounds::new(&f);
        let under = guarded_accesses(&f.locals, &f.body, None);
        accesses(&f)
            .into_iter()
            .map(|(base, index)| {
                let ends = under
                    .get(&(index as *const Expr))
                    .map_or(&[][..], Vec::as_slice);
                let device = b.access_under(base, index, ends);
                let native = match device {
                    Proof::Always => Proof::Always,
                    _ => Proof::No,
                };
                (native, device)
            })
            .collect()
    }

    /// The only access's proofs.
    fn only(src: &str) -> (Proof, Proof) {
        let p = proofs(src);
        assert_eq!(p.len(), 1, "one access in {src}: {p:?}");
        p.into_iter().next().unwrap()
    }

    fn always() -> (Proof, Proof) {
        (Proof::Always, Proof::Always)
    }

    fn unproved() -> (Proof, Proof) {
        (Proof::No, Proof::No)
    }

    /// A guard's value for a launch: global range 64 in every dimension, work-groups of 8,
    /// slice lengths `len`, scalar parameters `param`.
    fn holds(p: &Proof, len: u64, param: u64) -> Option<bool> {
        let (Proof::Guard(b) | Proof::When(b)) = p else {
            return None;
        };
        let v = b.eval(&|leaf| match leaf {
            Bound::GlobalRange(_) => Some(64),
            Bound::LocalRange(_) => Some(8),
            Bound::GroupRange(_) => Some(8),
            Bound::Len(_) => Some(len),
            Bound::Param(_) => Some(param),
            _ => None,
        });
        Some(v.expect("every leaf known") == 1)
    }

    #[test]
    fn a_loop_to_a_slice_length_is_in_bounds() {
        assert_eq!(
            only("fn k(x: &mut [u32]) { for i in 0..x.len() { x[i] = 1; } }"),
            always()
        );
        // Through immutable locals, `min` and `step_by`.
        assert_eq!(
            only(
                "fn k(x: &mut [u32], c: usize) {
                    let n = x.len();
                    let b = global_id(0) * c;
                    let e = (b + c).min(n);
                    for i in (b..e).step_by(3) { x[i] = 1; }
                }"
            ),
            always()
        );
    }

    #[test]
    fn a_condition_below_a_length_proves_what_it_guards() {
        let src = "fn k(x: &[u32], y: &mut [u32], c: usize) {
            let n = x.len();
            let e = (global_id(0) * c + c).min(n);
            let i = global_id(0) * c;
            let v = if i < e { x[i] } else { 0 };
            if i < e && v > 0 { y[i] = x[i]; }
            let w = if i < e + 1 { x[i] } else { 0 };
            y[0] = w;
        }";
        let p = proofs(src);
        // x[i] in the select and x[i] in the `if`; y[i] where `len(x) <= len(y)`; x[i] under
        // `i < e + 1` stays checked.
        let always = p.iter().filter(|(_, d)| *d == Proof::Always).count();
        assert_eq!(always, 2, "{p:?}");
        let other = Proof::Guard(Bound::cmp(BoundCmp::Le, Bound::Len(0), Bound::Len(1)));
        assert!(p.iter().any(|(_, d)| *d == other), "{p:?}");
        // A mutable local proves nothing: its value may change after the test.
        let (cpu, _) = only(
            "fn k(x: &mut [u32]) {
                let mut i = global_id(0);
                if i < x.len() { i += 1; x[i] = 1; }
            }",
        );
        assert_eq!(cpu, Proof::No);
        // `<=` is no fact.
        let (cpu, dev) =
            only("fn k(x: &mut [u32]) { let i = global_id(0); if i <= x.len() { x[i] = 1; } }");
        assert_eq!(cpu, Proof::No);
        assert_ne!(dev, Proof::Always);
    }

    #[test]
    fn an_inclusive_loop_to_a_length_is_not() {
        let (cpu, dev) = only("fn k(x: &mut [u32]) { for i in 0..=x.len() { x[i] = 1; } }");
        assert_eq!(cpu, Proof::No);
        // On devices at most a guard, which never holds: i may equal the length.
        assert_ne!(dev, Proof::Always);
        assert_ne!(holds(&dev, 64, 0), Some(true));
    }

    #[test]
    fn the_length_of_another_slice_proves_nothing_on_the_cpu() {
        let (cpu, dev) =
            only("fn k(x: &mut [u32], y: &[u32]) { for i in 0..y.len() { x[i] = 1; } }");
        assert_eq!(cpu, Proof::No);
        // The device forms guard it: len(y) - 1 < len(x).
        assert!(matches!(dev, Proof::Guard(_)), "{dev:?}");
        assert_eq!(holds(&dev, 64, 0), Some(true), "equal lengths");
    }

    #[test]
    fn global_ids_are_guarded_by_the_range() {
        let (cpu, dev) = only("fn k(x: &mut [u32]) { x[global_id(0)] = 1; }");
        assert_eq!(cpu, Proof::No);
        let Proof::Guard(g) = &dev else {
            panic!("{dev:?}")
        };
        assert_eq!(
            *g,
            Bound::cmp(BoundCmp::Le, Bound::GlobalRange(0), Bound::Len(0))
        );
        assert_eq!(holds(&dev, 64, 0), Some(true));
        assert_eq!(holds(&dev, 63, 0), Some(false));
    }

    #[test]
    fn local_ids_index_local_arrays_under_the_group_size() {
        let (cpu, dev) =
            only("fn k(y: &mut [u32]) { let t = local_array::<u32, 64>(); t[local_id(0)] = 1; }");
        // The native CPU form knows no work-group size when it is compiled.
        assert_eq!(cpu, Proof::No);
        let Proof::When(c) = &dev else {
            panic!("{dev:?}")
        };
        assert!(c.is_build_time());
        let at = |size: u64| {
            c.eval(&|leaf| matches!(leaf, Bound::LocalRange(0)).then_some(size)) == Some(1)
        };
        assert!(at(64) && at(1) && !at(65));
    }

    #[test]
    fn literals_and_masks_against_local_arrays() {
        let src = |index: &str| {
            format!(
                "fn k(y: &mut [u32], n: usize) {{
                    let t = local_array::<u32, 64>();
                    for i in 0..1000usize {{ t[{index}] = 1; }}
                }}"
            )
        };
        assert_eq!(only(&src("63")), always());
        assert_eq!(only(&src("64")), unproved());
        assert_eq!(only(&src("i & 63")), always());
        assert_eq!(only(&src("i % 64")), always());
        assert_eq!(only(&src("i % 65")), unproved());
        // `>>` keeps its operand's upper bound (conservative: no shift amount is modelled).
        assert_eq!(only(&src("(i & 63) >> 2")), always());
        assert_eq!(only(&src("(i & 255) >> 2")), unproved());
        assert_eq!(only(&src("(i & 127) / 2")), always());
        assert_eq!(only(&src("(i & 127) / 1")), unproved());
        assert_eq!(only(&src("i.min(63)")), always());
        assert_eq!(only(&src("(i & 31).max(i & 63)")), always());
        assert_eq!(only(&src("if n > 3 { 5 } else { 63 }")), always());
        assert_eq!(only(&src("if n > 3 { 5 } else { 64 }")), unproved());
        // A run-time scalar: guarded on devices (its value < 64), unproved on the CPU.
        let (cpu, dev) = only(&src("n"));
        assert_eq!(cpu, Proof::No);
        assert_eq!(holds(&dev, 0, 63), Some(true));
        assert_eq!(holds(&dev, 0, 64), Some(false));
        // A mask of a run-time value keeps its symbolic form (min(v, 63)): a guard, which
        // holds for every launch.
        let (cpu, dev) = only(&src("global_id(0) & 63"));
        assert_eq!(cpu, Proof::No);
        assert_eq!(holds(&dev, 0, 0), Some(true));
    }

    #[test]
    fn subtraction_is_proved_only_where_it_cannot_wrap() {
        let src = |index: &str| {
            format!(
                "fn k(y: &mut [u32]) {{
                    let t = local_array::<u32, 64>();
                    for j in 0..64usize {{ t[{index}] = 1; }}
                }}"
            )
        };
        assert_eq!(only(&src("63 - j")), always());
        // 62 - 63 wraps to usize::MAX.
        assert_eq!(only(&src("62 - j")), unproved());
        assert_eq!(only(&src("j - 1")), unproved());
    }

    #[test]
    fn wrapping_arithmetic_widens_to_the_whole_type() {
        let src = |index: &str| {
            format!(
                "fn k(y: &mut [u32]) {{
                    let t = local_array::<u32, 64>();
                    for j in 0..64u32 {{ t[{index}] = 1; }}
                }}"
            )
        };
        assert_eq!(only(&src("(j * 1) as usize")), always());
        // 63 * 100_000_000 overflows u32: after the wrap the value may be anything.
        assert_eq!(only(&src("(j * 100_000_000 % 64) as usize")), always());
        // (u32::MAX / 2^26 = 63, u32::MAX / 2^25 = 127.)
        assert_eq!(
            only(&src("(j * 100_000_000 / 67_108_864) as usize")),
            always()
        );
        assert_eq!(
            only(&src("(j * 100_000_000 / 33_554_432) as usize")),
            unproved()
        );
        // In usize the same product does not wrap.
        assert_eq!(
            only(&src("(j as usize * 100_000_000) / 100_000_000")),
            always()
        );
    }

    #[test]
    fn signed_and_mutable_values_have_no_bounds() {
        assert_eq!(
            only(
                "fn k(y: &mut [u32]) {
                    let t = local_array::<u32, 64>();
                    let j = 3i32;
                    t[j as usize] = 1;
                }"
            ),
            unproved()
        );
        assert_eq!(
            only(
                "fn k(y: &mut [u32]) {
                    let t = local_array::<u32, 64>();
                    let mut j = 3usize;
                    j += 100;
                    t[j] = 1;
                }"
            ),
            unproved()
        );
    }

    #[test]
    fn truncation_keeps_a_relation_to_a_length() {
        assert_eq!(
            only(
                "fn k(x: &mut [u32]) {
                    for i in 0..x.len() { x[(i as u32) as usize] = 1; }
                }"
            ),
            always()
        );
    }

    #[test]
    fn facts_for_code_forms() {
        let f = kernel(
            "fn k(x: &mut [u32]) {
                let t = local_array::<u32, 64>();
                for j in 0..64u32 { t[(j * 2 + 1) as usize] = 1; }
                for i in 0..x.len() { x[i] = 2; }
            }",
        );
        let b = Bounds::new(&f);
        let loops: Vec<(&Expr, Option<&Expr>, &Expr)> = f
            .body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::For(h, _) => Some((&h.end, h.step.as_ref(), &h.start)),
                _ => None,
            })
            .collect();
        // 0..64u32 counts below 2^31; 0..len only under a run-time guard.
        assert_eq!(b.loop_fits(loops[0].0, loops[0].1, 31), Proof::Always);
        assert_eq!(b.below(loops[0].2, 31), Proof::Always);
        assert!(matches!(b.loop_fits(loops[1].0, None, 31), Proof::Guard(_)));
        let (base, index) = accesses(&f)[0];
        assert_eq!(base, Base::Local(0));
        // (j * 2 + 1) as usize: a u32 tree below 2^31, computable in `int`.
        assert_eq!(b.narrow_index(index, &|_| false), Proof::Always);
        let ExprKind::Cast(inner) = &index.kind else {
            panic!("a cast")
        };
        assert_eq!(b.no_signed_wrap(inner), Proof::Always);
        let ExprKind::Binary(_, product, _, _) = &inner.kind else {
            panic!("j * 2 + 1")
        };
        assert_eq!(b.no_signed_wrap(product), Proof::Always);
    }

    #[test]
    fn long_chains_of_symbolic_arithmetic_stay_small() {
        // Each subtraction repeats its operands in its bounds: without the size cap, 40 of
        // them would make trees of 2^40 nodes.
        let mut body = String::from("let a0 = n;\n");
        for i in 1..=40 {
            body.push_str(&format!("let a{i} = a{} - 1;\n", i - 1));
        }
        let src = format!("fn k(x: &mut [u32], n: usize) {{ {body} x[a40] = 1; }}");
        let started = std::time::Instant::now();
        let (cpu, dev) = only(&src);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(cpu, Proof::No);
        if let Proof::Guard(b) | Proof::When(b) = &dev {
            assert!(b.size() <= 4 * MAX_BOUND_NODES, "{} nodes", b.size());
        }
    }

    /// The bench's stencil (sycl-rs/benches/kernels.rs): every access keeps a proof on the
    /// device forms (a lost one costs speed with nothing else reporting it).
    #[test]
    fn the_stencil_keeps_its_proofs() {
        let src = "fn stencil(src: &[f32], dst: &mut [f32]) {
            let tile = local_array::<f32, 324>();
            let h = global_range(0) as u32;
            let w = global_range(1) as u32;
            let y = global_id(0) as u32;
            let x = global_id(1) as u32;
            let ly = local_id(0) as u32;
            let lx = local_id(1) as u32;
            let y0 = group_id(0) as u32 * 16;
            let x0 = group_id(1) as u32 * 16;
            for ty in (ly..18).step_by(16) {
                let gy = (y0 + ty).max(1).min(h) - 1;
                for tx in (lx..18).step_by(16) {
                    let gx = (x0 + tx).max(1).min(w) - 1;
                    tile[(ty * 18 + tx) as usize] = src[(gy * w + gx) as usize];
                }
            }
            barrier();
            let c = ((ly + 1) * 18 + lx + 1) as usize;
            let mid = tile[c];
            let mut v = mid;
            if y != 0 && x != 0 && y != h - 1 && x != w - 1 {
                v = mid * 0.5 + (tile[c - 18] + tile[c + 18] + tile[c - 1] + tile[c + 1]) * 0.125;
            }
            dst[(y * w + x) as usize] = v;
        }";
        let f = kernel(src);
        let b = Bounds::new(&f);
        for (base, index) in accesses(&f) {
            let p = b.access(base, index);
            assert_ne!(p, Proof::No, "{:?}", index.kind);
            // Every index is a `u32` tree below 2^31 (under the work-group size or a guard):
            // the 32-bit index form Intel's vectorizer needs.
            let n = b.narrow_index(index, &|_| false);
            assert_ne!(n, Proof::No, "{:?}", index.kind);
        }
    }

    #[test]
    fn no_proofs_proves_nothing() {
        let f = kernel("fn k(x: &mut [u32]) { for i in 0..x.len() { x[i] = 1; } }");
        let b = Bounds::new(&f).without_proofs();
        let (base, index) = accesses(&f)[0];
        assert_eq!(b.access(base, index), Proof::No);
    }
}
