//! The checked function carried to the IR's later stages: [`checked`] writes the bounds
//! analysis' answers into it (for each element access whether it is in bounds (`Check`), and
//! the target-neutral facts back ends shape code by: an index computable in 32-bit signed
//! arithmetic, arithmetic without signed overflow, loops that cannot wrap) and resolves every
//! type and literal; [`resolved`] drops what only the macro needs (spans, paths, names) and
//! numbers helper calls by the caller's helper list. The structure is walked by the IR
//! crate's `map::map_function`; the wire format is its `wire`.

use sycl_kernel_ir as kir;
use sycl_kernel_ir::map::{map_function, ForFacts, StageMap};
use sycl_kernel_ir::Check;

use crate::analyze::path_key;
use crate::bounds::{guarded_accesses, pure, Bounds, Proof};
use crate::ir::*;

/// `f` (a kernel with `steps` when it runs as work-groups, or a helper) with the analysis'
/// answers.
pub fn checked(
    f: &Function,
    steps: Option<&[Step]>,
    bounds: &Bounds<'_>,
    kernel: bool,
) -> kir::Function<Checked> {
    let parsed = kir::Function::<Parsed> {
        params: f.params.iter().map(|p| p.kind).collect(),
        ret: f.ret,
        locals: f.locals.clone(),
        body: f.body.clone(),
        steps: steps.map(<[Step]>::to_vec),
    };
    // (By address in `parsed`, the copy the mapping walks.)
    let under = guarded_accesses(&parsed.locals, &parsed.body, parsed.steps.as_deref());
    let mut m = ToChecked {
        f,
        bounds,
        narrowable: narrowable(f, bounds, kernel),
        under: &under,
    };
    map_function(&parsed, &mut m)
}

/// The IR the runtime reads (`helpers`: the function's callees in call-marker order).
pub fn resolved(f: &kir::Function<Checked>, helpers: &[(syn::Path, CallKey)]) -> kir::Function {
    map_function(f, &mut ToResolved { helpers })
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

/// `x` rounded to the half type `t` (`f16` or `bf16`) as the `half` crate rounds, as an `f32`.
pub fn half_from_f32(t: Ty, x: f32) -> f32 {
    match t {
        Ty::Bf16 => half::bf16::from_f32(x).to_f32(),
        _ => half::f16::from_f32(x).to_f32(),
    }
}

/// The bits of `x` rounded to the half type `t`.
pub fn half_bits(t: Ty, x: f32) -> u16 {
    match t {
        Ty::Bf16 => half::bf16::from_f32(x).to_bits(),
        _ => half::f16::from_f32(x).to_bits(),
    }
}

/// A literal's bits at its final type.
fn lit_bits(l: &Lit, t: Ty) -> u64 {
    match (l, t) {
        (Lit::Zero, _) => 0,
        (Lit::Bool(b), _) => *b as u64,
        (Lit::Int(v), Ty::F32) => (*v as f32).to_bits() as u64,
        (Lit::Int(v), Ty::F64) => (*v as f64).to_bits(),
        (Lit::Int(v), t) if t.is_half() => half_bits(t, *v as f32) as u64,
        // In range for its type (checked by `check_common`): the low bits are its value.
        (Lit::Int(v), _) => *v as u64,
        (Lit::Float(d), Ty::F32) => d.parse::<f32>().expect("checked").to_bits() as u64,
        // As `f16::from_f32(literal)` rounds (decimal to f32, then to the half type).
        (Lit::Float(d), t) if t.is_half() => {
            half_bits(t, d.parse::<f32>().expect("checked")) as u64
        }
        (Lit::Float(d), _) => d.parse::<f64>().expect("checked").to_bits(),
    }
}

struct ToChecked<'a> {
    f: &'a Function,
    bounds: &'a Bounds<'a>,
    /// Loop variables that count as `u32` leaves of narrow indices (`kir::For::narrowable`
    /// loops whose `counts_in_u32` holds: always, or in a kernel by a run-time guard).
    narrowable: Vec<usize>,
    /// The accesses read under conditions `index < end` ([`guarded_accesses`]).
    under: &'a std::collections::HashMap<*const Expr, Vec<&'a Expr>>,
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

impl StageMap<Parsed, Checked> for ToChecked<'_> {
    fn ty(&mut self, t: &TyId) -> Ty {
        self.f.ty(*t)
    }

    fn lit(&mut self, l: &Lit, t: &TyId) -> u64 {
        lit_bits(l, self.f.ty(*t))
    }

    fn callee(&mut self, c: &syn::Path, args: &[Expr], ret: &TyId) -> (syn::Path, CallKey) {
        (c.clone(), crate::analyze::call_key(self.f, args, *ret))
    }

    fn src(&mut self, s: &At) -> At {
        *s
    }

    fn local_info(&mut self, l: &Local) -> LocalInfo {
        l.info.clone()
    }

    /// Whether `base[index]` needs its check (the user's `get_unchecked` never does), and
    /// whether `index` can be computed in signed 32-bit arithmetic.
    fn access(&mut self, base: Base, index: &Expr, checked: &bool, _: &()) -> (AccessCheck, Check) {
        let in_bounds = if *checked {
            let ends = self
                .under
                .get(&(index as *const Expr))
                .map_or(&[][..], Vec::as_slice);
            check(self.bounds.access_under(base, index, ends))
        } else {
            Check::Proved
        };
        let fits = self
            .bounds
            .narrow_index(index, &|l| self.narrowable.contains(&l));
        (
            AccessCheck {
                check: in_bounds,
                unchecked_in_source: !*checked,
            },
            check(fits),
        )
    }

    /// Whether an array field's item index needs its check against the field's length.
    fn field_item(&mut self, item: &kir::FieldItem<Parsed>) -> AccessCheck {
        AccessCheck {
            check: check(self.bounds.item(&item.index, item.len)),
            unchecked_in_source: false,
        }
    }

    /// For `u32` `+ - *` only: whether the operation has no signed overflow either.
    fn binary(&mut self, e: &Expr, _: &()) -> Check {
        if self.bounds.u32_arith(e).is_some() {
            check(self.bounds.no_signed_wrap(e))
        } else {
            Check::Checked
        }
    }

    fn for_facts(&mut self, h: &For) -> ForFacts<Checked> {
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
        let (in_u32, in_u64, in_i32) = if !inclusive && ty.is_unsigned() {
            (
                self.bounds.loop_fits(end, step, 32),
                self.bounds.loop_fits(end, step, 64),
                self.bounds.loop_fits(end, step, 31),
            )
        } else {
            (Proof::No, Proof::No, Proof::No)
        };
        ForFacts {
            counts_below_half: check(below_half),
            start_below_half: check(start_below),
            counts_in_u32: check(in_u32),
            counts_in_u64: check(in_u64),
            counts_in_i32: check(in_i32),
            start_per_item: per_item_loop(self.bounds, ty, start, inclusive),
        }
    }
}

struct ToResolved<'a> {
    helpers: &'a [(syn::Path, CallKey)],
}

impl StageMap<Checked, kir::Resolved> for ToResolved<'_> {
    fn ty(&mut self, t: &Ty) -> Ty {
        *t
    }

    fn lit(&mut self, l: &u64, _: &Ty) -> u64 {
        *l
    }

    fn callee(
        &mut self,
        (c, key): &(syn::Path, CallKey),
        _: &[kir::Expr<Checked>],
        _: &Ty,
    ) -> usize {
        let path = path_key(c);
        self.helpers
            .iter()
            .position(|(h, k)| path_key(h) == path && k == key)
            .expect("helpers are collected")
    }

    fn src(&mut self, _: &At) {}

    fn local_info(&mut self, _: &kir::Local<Checked>) {}

    fn access(
        &mut self,
        _: Base,
        _: &kir::Expr<Checked>,
        a: &AccessCheck,
        fits: &Check,
    ) -> (Check, Check) {
        (a.check.clone(), fits.clone())
    }

    fn field_item(&mut self, item: &kir::FieldItem<Checked>) -> Check {
        item.check.check.clone()
    }

    fn binary(&mut self, _: &kir::Expr<Checked>, fact: &Check) -> Check {
        fact.clone()
    }

    fn for_facts(&mut self, h: &kir::For<Checked>) -> ForFacts<kir::Resolved> {
        ForFacts {
            counts_below_half: h.counts_below_half.clone(),
            start_below_half: h.start_below_half.clone(),
            counts_in_u32: h.counts_in_u32.clone(),
            counts_in_u64: h.counts_in_u64.clone(),
            counts_in_i32: h.counts_in_i32.clone(),
            start_per_item: h.start_per_item,
        }
    }
}
