//! The native CPU form of a kernel, as Rust.
//!
//! A kernel without work-group features becomes a flat loop over work-items (a closure per
//! item, which LLVM inlines into the runtime's loop). A kernel with local arrays, barriers or
//! group reductions runs a work-group at a time on one thread: its body is cut at the
//! synchronisation points ([`Step`]) and each region runs for every work-item of the group
//! before the next begins, which is exactly what a barrier promises. Locals that live across a
//! cut are fields of a per-item state; uniform values (loop bounds, reduction results) are
//! computed once per group.
//!
//! Element accesses go through the runtime's slice types (`sycl::kernel::__rt`): relaxed
//! atomic loads and stores, so a kernel whose work-items race on an element is still defined
//! behaviour on the CPU, as it is on a GPU. Integer `+ - *` and negation wrap, shifts mask,
//! division by zero and out-of-bounds indices panic, which the runtime turns into the launch's
//! `Errc::Kernel`.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

use sycl_kernel_ir as kir;
use sycl_kernel_ir::Check;

use crate::analyze::{Analysis, Class};
use crate::ir::{
    AccessCheck, AtomicOp, Base, BinOp, Checked, Collective, GroupOp, MathFn, MemoryScope, Param,
    ParamKind, Query, Reduce, SubGroupOp, SubGroupQuery, Ty, UnOp,
};

mod block;
use block::BlockPlan;

// The emitter reads the function with the bounds analysis' answers (`encode::checked`).
type Function = kir::Function<Checked>;
type Expr = kir::Expr<Checked>;
type ExprKind = kir::ExprKind<Checked>;
type Stmt = kir::Stmt<Checked>;
type StmtKind = kir::StmtKind<Checked>;
type Step = kir::Step<Checked>;

/// Where code is emitted: it decides how locals are named and what `return` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A work-item of a flat kernel (the body of its per-item closure).
    Flat,
    /// A work-item in a region of a group kernel (per-item closure; its state is copied into
    /// the local `__sv` for the region, so that LLVM keeps it in registers).
    Region,
    /// Group-level code of a group kernel.
    Group,
    /// The whole body of a group kernel launched with groups of one work-item, as straight
    /// code: barriers are nothing, a collective's result is its one item's (see
    /// `single_item_collective`).
    Single,
    Helper,
}

#[derive(Clone)]
pub struct RustEmitter<'a> {
    /// The function, each access's check and the facts written in by the analysis.
    f: &'a Function,
    /// Its parameters' names.
    params: &'a [Param],
    class: Vec<Class>,
    ctx: Ctx,
    /// Inside the blocked copy of a loop's body: the buffers its slice accesses read and
    /// write instead (see [`BlockPlan`]).
    block: Option<std::rc::Rc<BlockPlan>>,
}

fn rt() -> TokenStream {
    quote!(::sycl::kernel::__rt)
}

pub fn ty_tokens(t: Ty) -> TokenStream {
    let i = format_ident!("{}", t.name());
    if t.is_half() {
        // The `half` crate's type, through sycl's re-export: the one user code names.
        quote!(::sycl::half::#i)
    } else {
        quote!(#i)
    }
}

pub fn param_ident(p: &Param) -> proc_macro2::Ident {
    format_ident!("__sycl_p_{}", p.name)
}

impl<'a> RustEmitter<'a> {
    fn new(f: &'a Function, params: &'a [Param], an: Option<&Analysis>, ctx: Ctx) -> Self {
        RustEmitter {
            f,
            params,
            class: an.map_or_else(|| vec![Class::Plain; f.locals.len()], |a| a.class.clone()),
            ctx,
            block: None,
        }
    }

    fn ty(&self, e: &Expr) -> Ty {
        e.ty
    }

    /// Whether an access the source checks is proved in bounds for every launch (then
    /// emitted unchecked; a proof for a work-group size or under a run-time guard is the
    /// device forms' alone, except as `guarded`).
    fn proved(&self, a: &AccessCheck) -> bool {
        !a.unchecked_in_source && a.check == Check::Proved
    }

    /// Whether a checked access is in bounds when the kernel's run-time guard holds: the
    /// definition's `guard` (the IR's access guards, `sycl_kernel_ir::Function::access_guards`),
    /// which the runtime evaluates on the host at each launch and passes as the kernel
    /// function's `__G` (every access this proves is under one of those conditions). Helpers
    /// cannot use it.
    fn guarded(&self, a: &AccessCheck) -> bool {
        !a.unchecked_in_source && self.ctx != Ctx::Helper && matches!(a.check, Check::Guard(_))
    }

    /// A field access's element index, item index (0 for a scalar field), and which form
    /// its checks allow.
    fn field_parts(
        &self,
        index: &Expr,
        check: &AccessCheck,
        field: &kir::Field<Checked>,
    ) -> (TokenStream, TokenStream, FieldForm) {
        let i = self.expr(index);
        let (k, item_check) = match &field.item {
            Some(item) => (self.expr(&item.index), Some(&item.check)),
            None => (quote!(0usize), None),
        };
        let mut checks = std::iter::once(check).chain(item_check);
        let form = if checks.clone().all(|c| self.proved(c)) {
            FieldForm::Proved
        } else if checks.all(|c| self.proved(c) || self.guarded(c)) {
            FieldForm::Guarded
        } else {
            FieldForm::Checked
        };
        (i, k, form)
    }

    fn local(&self, l: usize) -> TokenStream {
        let name = format_ident!("__sycl_v{}", l);
        if self.f.locals[l].is_work_group_array() {
            return quote!(#name);
        }
        match (self.class[l], self.ctx) {
            (Class::Item, Ctx::Region) => quote!(__sv.#name),
            _ => quote!(#name),
        }
    }

    fn param(&self, i: usize) -> TokenStream {
        let id = param_ident(&self.params[i]);
        quote!(#id)
    }

    /// A literal from its bits at type `t`.
    fn lit(&self, bits: u64, t: Ty) -> TokenStream {
        let lit = match t {
            Ty::Bool if bits != 0 => return quote!(true),
            Ty::Bool => return quote!(false),
            Ty::I32 if bits as u32 <= i32::MAX as u32 => Literal::i32_suffixed(bits as i32),
            Ty::I32 => {
                let u = Literal::u32_suffixed(bits as u32);
                return quote!((#u as i32));
            }
            Ty::U32 => Literal::u32_suffixed(bits as u32),
            Ty::I64 if bits <= i64::MAX as u64 => Literal::i64_suffixed(bits as i64),
            Ty::I64 => {
                let u = Literal::u64_suffixed(bits);
                return quote!((#u as i64));
            }
            Ty::U64 => Literal::u64_suffixed(bits),
            Ty::Usize => Literal::usize_suffixed(bits as usize),
            // (Source literals are finite: `check_common`.)
            Ty::F32 => Literal::f32_suffixed(f32::from_bits(bits as u32)),
            Ty::F64 => Literal::f64_suffixed(f64::from_bits(bits)),
            Ty::F16 | Ty::Bf16 => {
                let (t, b) = (ty_tokens(t), Literal::u16_suffixed(bits as u16));
                return quote!(#t::from_bits(#b));
            }
        };
        quote!(#lit)
    }

    pub fn expr(&self, e: &Expr) -> TokenStream {
        if let Some(b) = self.block_load(e) {
            return quote!(#b[__sycl_k]);
        }
        let rt = rt();
        let t = self.ty(e);
        match &e.kind {
            ExprKind::Lit(l) => {
                // The user's span: a type error (a literal passed to a helper that takes
                // another type) points at the literal.
                let tokens = self.lit(*l, t);
                tokens
                    .into_iter()
                    .map(|mut tt| {
                        tt.set_span(e.src.0);
                        tt
                    })
                    .collect()
            }
            ExprKind::Local(l) => self.local(*l),
            ExprKind::Param(i) => self.param(*i),
            ExprKind::Load {
                base,
                index,
                check,
                field: Some(field),
                ..
            } => {
                let Base::Param(p) = base else {
                    unreachable!("fields are of struct slices")
                };
                let (i, k, form) = self.field_parts(index, check, field);
                let p = self.param(*p);
                let generics = field_generics(field);
                // Emitted only where the bounds analysis proved both indices in bounds (with
                // `__G`: under the kernel's run-time guard, which held for this launch).
                // SAFETY: as the line above says, `__i < len` and `__k < ITEMS`.
                let unchecked = quote!(unsafe { #p.load_unchecked::<#generics>(__i, __k) });
                let checked = quote!(#p.load::<#generics>(__i, __k));
                let access = match form {
                    FieldForm::Proved => unchecked,
                    FieldForm::Guarded => quote!(if __G { #unchecked } else { #checked }),
                    FieldForm::Checked => checked,
                };
                quote!({ let __i: usize = #i; let __k: usize = #k; #access })
            }
            ExprKind::Load {
                base, index, check, ..
            } => {
                let i = self.expr(index);
                let checked = !check.unchecked_in_source;
                if self.guarded(check) {
                    return match base {
                        Base::Param(p) => {
                            let p = self.param(*p);
                            // SAFETY: with `__G`, the kernel's run-time guard held for this
                            // launch, under which bounds.rs proved the index below the length.
                            quote!({ let __i: usize = #i; if __G { unsafe { #p.load_unchecked(__i) } } else { #p.load(__i) } })
                        }
                        Base::Local(l) => {
                            let a = self.local(*l);
                            // SAFETY: as above, below the local array's length.
                            quote!({ let __i: usize = #i; if __G { unsafe { *#a.get_unchecked(__i) } } else { #a[__i] } })
                        }
                    };
                }
                if self.proved(check) {
                    return match base {
                        Base::Param(p) => {
                            let p = self.param(*p);
                            // SAFETY: sycl-macros' bounds analysis (bounds.rs) proved the
                            // index below the slice's length.
                            quote!(unsafe { #p.load_unchecked(#i) })
                        }
                        Base::Local(l) => {
                            let a = self.local(*l);
                            // SAFETY: the bounds analysis proved the index below the local
                            // array's length, which is its vector's.
                            quote!(unsafe { *#a.get_unchecked(#i) })
                        }
                    };
                }
                match (base, checked) {
                    (Base::Param(p), true) => {
                        let p = self.param(*p);
                        quote!(#p.load(#i))
                    }
                    (Base::Param(p), false) => {
                        let p = self.param(*p);
                        // SAFETY: emitted only for `get_unchecked` inside the kernel author's
                        // `unsafe` block (parse refuses it elsewhere): their `i < len` holds.
                        quote_spanned!(e.src.0=> unsafe { #p.load_unchecked(#i) })
                    }
                    (Base::Local(l), true) => {
                        let a = self.local(*l);
                        quote!(#a[#i])
                    }
                    (Base::Local(l), false) => {
                        let a = self.local(*l);
                        // SAFETY: as above, the author's `unsafe` block vouches for the index.
                        quote_spanned!(e.src.0=> unsafe { *#a.get_unchecked(#i) })
                    }
                }
            }
            ExprKind::Len(Base::Param(p)) => {
                let p = self.param(*p);
                quote!(#p.len())
            }
            ExprKind::Len(Base::Local(l)) => {
                let n = array_len(self.f.locals[*l].array.expect("an array"));
                quote!((#n as usize))
            }
            ExprKind::ConstParam(i) => {
                let c = const_ident(*i);
                quote!(#c)
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let v = self.expr(a);
                if t.is_int() {
                    quote!((#v).wrapping_neg())
                } else {
                    quote!((-(#v)))
                }
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let v = self.expr(a);
                quote!((!(#v)))
            }
            ExprKind::Binary(op, a, b, _) => {
                let (x, y) = (self.expr(a), self.expr(b));
                binary(*op, self.ty(a), x, y)
            }
            // Halves convert only through `f32` (and to `f64` exactly): the `half` crate's
            // `from_f32`, `to_f32`, `to_f64`.
            ExprKind::Cast(a) if t.is_half() && self.ty(a) == t => self.expr(a),
            ExprKind::Cast(a) if t.is_half() => {
                let (v, to) = (self.expr(a), ty_tokens(t));
                quote!(#to::from_f32(#v))
            }
            ExprKind::Cast(a) if self.ty(a).is_half() => {
                let v = self.expr(a);
                if t == Ty::F64 {
                    quote!((#v).to_f64())
                } else {
                    quote!((#v).to_f32())
                }
            }
            ExprKind::Cast(a) => {
                let v = self.expr(a);
                let to = ty_tokens(t);
                quote!(((#v) as #to))
            }
            // Math on halves: in `f32`, rounded back (the `half` crate has no math).
            ExprKind::Math(m, args) if self.ty(&args[0]).is_half() => {
                let half = ty_tokens(self.ty(&args[0]));
                let vs: Vec<TokenStream> = args
                    .iter()
                    .map(|a| {
                        let v = self.expr(a);
                        if self.ty(a).is_half() {
                            quote!((#v).to_f32())
                        } else {
                            v
                        }
                    })
                    .collect();
                let recv = &vs[0];
                let rest = &vs[1..];
                let name = format_ident!("{}", m.name());
                if matches!(m, MathFn::Rsqrt | MathFn::Erf) {
                    return quote!(#half::from_f32(::sycl::kernel::__rt::KernelMath::#name(#recv)));
                }
                if m.fixed_result().is_some() {
                    quote!((#recv).#name(#(#rest),*))
                } else {
                    quote!(#half::from_f32((#recv).#name(#(#rest),*)))
                }
            }
            ExprKind::Math(m, args) => {
                let vs: Vec<TokenStream> = args.iter().map(|a| self.expr(a)).collect();
                let recv = &vs[0];
                let rest = &vs[1..];
                if matches!(m, MathFn::Rsqrt | MathFn::Erf) {
                    let name = format_ident!("{}", m.name());
                    return quote!(::sycl::kernel::__rt::KernelMath::#name(#recv));
                }
                let name = if t.is_int() && *m == MathFn::Abs {
                    format_ident!("wrapping_abs")
                } else if *m == MathFn::Pow {
                    format_ident!("wrapping_pow")
                } else {
                    format_ident!("{}", m.name())
                };
                quote!((#recv).#name(#(#rest),*))
            }
            ExprKind::Query(q, d) => {
                let d = Literal::usize_unsuffixed(*d as usize);
                let v = match q {
                    Query::GlobalId => quote!(__gid),
                    Query::LocalId => quote!(__lid),
                    Query::GroupId => quote!(__grp),
                    Query::GlobalRange => quote!(__gr),
                    Query::LocalRange => quote!(__lr),
                    Query::GroupRange => quote!(__ngr),
                };
                quote!(#v[#d])
            }
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
                order,
                scope,
            } => {
                let i = self.expr(index);
                let vs: Vec<TokenStream> = values.iter().map(|v| self.expr(v)).collect();
                // `op` of `atomic_rmw` / `local_rmw`.
                let rmw = |op: AtomicOp| -> u8 {
                    match op {
                        AtomicOp::FetchSub => 0,
                        AtomicOp::FetchAnd => 1,
                        AtomicOp::FetchOr => 2,
                        AtomicOp::FetchXor => 3,
                        AtomicOp::FetchMin => 4,
                        _ => 5,
                    }
                };
                match base {
                    Base::Param(p) => {
                        let p = self.param(*p);
                        let o = format_ident!("{}", order.rust_name());
                        let o = quote!(::core::sync::atomic::Ordering::#o);
                        match op {
                            // A system-scope load is how a kernel waits for another
                            // process: on the CPU it gives way now and then (`rt`).
                            AtomicOp::Load if *scope == MemoryScope::System => {
                                quote!(#p.atomic_load_system(#i, #o))
                            }
                            AtomicOp::Load => quote!(#p.atomic_load(#i, #o)),
                            AtomicOp::Store => quote!(#p.atomic_store(#i, #(#vs),*, #o)),
                            AtomicOp::Exchange => quote!(#p.atomic_exchange(#i, #(#vs),*, #o)),
                            AtomicOp::FetchAdd => quote!(#p.atomic_fetch_add(#i, #(#vs),*, #o)),
                            AtomicOp::CompareExchange => {
                                quote!(#p.atomic_compare_exchange(#i, #(#vs),*, #o))
                            }
                            _ => {
                                let k = rmw(*op);
                                quote!(#p.atomic_rmw(#i, #k, #(#vs),*, #o))
                            }
                        }
                    }
                    Base::Local(l) => {
                        // A work-group runs on one thread on the CPU: plain read-modify-write.
                        let a = self.local(*l);
                        match op {
                            AtomicOp::Load => quote!(#a[#i]),
                            AtomicOp::Store => quote!(#rt::local_store(&mut #a[#i], #(#vs),*)),
                            AtomicOp::Exchange => {
                                quote!(#rt::local_exchange(&mut #a[#i], #(#vs),*))
                            }
                            AtomicOp::FetchAdd => {
                                quote!(#rt::local_fetch_add(&mut #a[#i], #(#vs),*))
                            }
                            AtomicOp::CompareExchange => {
                                quote!(#rt::local_compare_exchange(&mut #a[#i], #(#vs),*))
                            }
                            _ => {
                                let k = rmw(*op);
                                quote!(#rt::local_rmw(&mut #a[#i], #k, #(#vs),*))
                            }
                        }
                    }
                }
            }
            ExprKind::Group(op, args) if self.ctx == Ctx::Single => {
                let c = match op {
                    GroupOp::Collective(c) => Some(*c),
                    GroupOp::Broadcast => None,
                };
                self.single_item_collective(c, args)
            }
            ExprKind::SubGroup(op, args) if self.ctx == Ctx::Single => {
                let c = match op {
                    SubGroupOp::Collective(c) => Some(*c),
                    _ => None,
                };
                self.single_item_collective(c, args)
            }
            ExprKind::Group(..) | ExprKind::SubGroup(..) => {
                unreachable!("group and sub-group collectives are steps")
            }
            ExprKind::SubGroupQuery(q) => match q {
                SubGroupQuery::LocalId => quote!(#rt::sub_group_local_id(__lid, __lr)),
                SubGroupQuery::LocalRange => quote!(#rt::sub_group_local_range(__lid, __lr)),
                SubGroupQuery::MaxLocalRange => quote!(#rt::SUB_GROUP_SIZE),
                SubGroupQuery::Id => quote!(#rt::sub_group_id(__lid, __lr)),
                SubGroupQuery::Range => quote!(#rt::sub_group_range(__lr)),
            },
            // A slice passes whole: by `&mut` where the caller writes it (a helper taking
            // `&[T]` gets it reborrowed as shared).
            ExprKind::Call((path, _), args) => {
                let vs: Vec<TokenStream> = args
                    .iter()
                    .map(|a| match a.kind {
                        // A kernel's slices are values; a helper's are references already
                        // (reborrowed).
                        ExprKind::SliceArg(p) => {
                            let s = self.param(p);
                            let mutable = matches!(
                                self.params[p].kind,
                                ParamKind::Slice { mutable: true, .. }
                            );
                            match (self.ctx == Ctx::Helper, mutable) {
                                (false, true) => quote!(&mut #s),
                                (false, false) => quote!(&#s),
                                (true, true) => quote!(&mut *#s),
                                (true, false) => quote!(&*#s),
                            }
                        }
                        // An array as a slice (`[T]` is a `SliceRef`/`SliceMutRef`): by
                        // `&mut` where the caller may write it.
                        ExprKind::ArrayArg(l) => {
                            let v = self.local(l);
                            let local = &self.f.locals[l];
                            if local.is_work_group_array() || local.info.user_mut {
                                quote_spanned!(a.src.0=> &mut #v[..])
                            } else {
                                quote_spanned!(a.src.0=> &#v[..])
                            }
                        }
                        _ => self.expr(a),
                    })
                    .collect();
                quote!(#path(#(#vs),*))
            }
            ExprKind::SliceArg(_) | ExprKind::ArrayArg(_) => {
                unreachable!("the parser makes slice and array arguments in calls only")
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c), self.expr(a), self.expr(b));
                quote!((if #c { #a } else { #b }))
            }
        }
    }

    /// `(a)..(b)`, `(a)..=(b)`, or either `.step_by(s)`.
    fn range(&self, start: &Expr, end: &Expr, inclusive: bool, step: Option<&Expr>) -> TokenStream {
        let (s, e) = (self.expr(start), self.expr(end));
        let range = if inclusive {
            quote!((#s)..=(#e))
        } else {
            quote!((#s)..(#e))
        };
        match step {
            Some(st) => {
                let st = self.expr(st);
                quote!((#range).step_by(#st))
            }
            None => range,
        }
    }

    fn block(&self, body: &[Stmt]) -> TokenStream {
        let stmts = body.iter().map(|s| self.stmt(s));
        quote!(#(#stmts)*)
    }

    /// A collective over one work-item (`c`; `None`: a broadcast or a sub-group permutation,
    /// whose every lane or id names the item itself): its operands are computed as in a
    /// group (they may fail), then a reduction or inclusive scan combines the identity with
    /// the value (as the group form folds), an exclusive scan gives the identity, the others
    /// give the value.
    fn single_item_collective(&self, c: Option<Collective>, args: &[Expr]) -> TokenStream {
        let t = args[0].ty;
        let tt = ty_tokens(t);
        let v = self.expr(&args[0]);
        let rest: Vec<TokenStream> = args[1..].iter().map(|a| self.expr(a)).collect();
        let result = match c {
            Some(Collective::ExclusiveScan(r)) => reduction(r, t).0,
            Some(c @ (Collective::Reduce(_) | Collective::InclusiveScan(_))) => {
                let (ident, combine) = reduction(c.op(), t);
                quote!({
                    let __acc: #tt = #ident;
                    #combine
                })
            }
            _ => quote!(__x),
        };
        quote!({
            let __x: #tt = #v;
            #(let _ = #rest;)*
            #result
        })
    }

    fn stmt(&self, s: &Stmt) -> TokenStream {
        if let Some(store) = self.block_store(s) {
            return store;
        }
        let rt = rt();
        match &s.kind {
            StmtKind::Let(l, e) => {
                let mut v = self.expr(e);
                let local = &self.f.locals[*l];
                let mut t = ty_tokens(local.ty);
                // A private array: every element gets the value (evaluated once).
                if let Some(arr) = local.array {
                    let len = array_len(arr);
                    v = quote!([#v; #len]);
                    t = quote!([#t; #len]);
                }
                match (self.class[*l], self.ctx) {
                    (Class::Item, Ctx::Region) => {
                        let place = self.local(*l);
                        quote!(#place = #v;)
                    }
                    _ => {
                        let name = format_ident!("__sycl_v{}", l);
                        if local.info.mutable {
                            quote!(let mut #name: #t = #v;)
                        } else {
                            quote!(let #name: #t = #v;)
                        }
                    }
                }
            }
            StmtKind::AssignLocal(l, op, e) => {
                let place = self.local(*l);
                let v = self.expr(e);
                match op {
                    None => quote!(#place = #v;),
                    Some(op) => {
                        let t = self.f.locals[*l].ty;
                        let value = binary(*op, t, place.clone(), v);
                        quote!(#place = #value;)
                    }
                }
            }
            StmtKind::CopyField {
                param,
                check,
                index,
                offset,
                array,
                to_slice,
                ..
            } => {
                let local = &self.f.locals[*array];
                let len = local.array_len().expect("a private array");
                let field = kir::Field {
                    ty: local.ty,
                    offset: *offset,
                    item: None,
                };
                let (i, _, form) = self.field_parts(index, check, &field);
                let generics = {
                    let t = ty_tokens(local.ty);
                    let offset = Literal::usize_unsuffixed(*offset as usize);
                    let items = Literal::usize_unsuffixed(len as usize);
                    quote!(#t, #offset, #items)
                };
                let p = self.param(*param);
                let a = self.local(*array);
                let (unchecked, checked) = match to_slice {
                    false => (
                        // SAFETY: emitted only where the bounds analysis proved `__i < len`
                        // (with `__G`: under the run-time guard that held).
                        quote!(unsafe { #p.load_items_unchecked::<#generics>(__i) }),
                        quote!(#p.load_items::<#generics>(__i)),
                    ),
                    true => (
                        // SAFETY: as for the load.
                        quote!(unsafe { #p.store_items_unchecked::<#generics>(__i, #a) }),
                        quote!(#p.store_items::<#generics>(__i, #a)),
                    ),
                };
                let access = match form {
                    FieldForm::Proved => unchecked,
                    FieldForm::Guarded => quote!(if __G { #unchecked } else { #checked }),
                    FieldForm::Checked => checked,
                };
                match to_slice {
                    false => quote!({ let __i: usize = #i; #a = #access; }),
                    true => quote!({ let __i: usize = #i; #access; }),
                }
            }
            StmtKind::Store {
                base,
                check,
                op,
                index,
                value: e,
                field: Some(field),
                ..
            } => {
                let Base::Param(p) = base else {
                    unreachable!("fields are of struct slices")
                };
                let v = self.expr(e);
                let (i, k, form) = self.field_parts(index, check, field);
                let p = self.param(*p);
                let generics = field_generics(field);
                // Emitted only where the bounds analysis proved both indices in bounds (with
                // `__G`: under the run-time guard that held).
                // SAFETY: as the line above says, `__i < len` and `__k < ITEMS`.
                let load = quote!(unsafe { #p.load_unchecked::<#generics>(__i, __k) });
                // SAFETY: as for the load.
                let store = quote!(unsafe { #p.store_unchecked::<#generics>(__i, __k, __new) });
                let (cload, cstore) = (
                    quote!(#p.load::<#generics>(__i, __k)),
                    quote!(#p.store::<#generics>(__i, __k, __new)),
                );
                let (load, store) = match form {
                    FieldForm::Proved => (load, store),
                    FieldForm::Guarded => (
                        quote!(if __G { #load } else { #cload }),
                        quote!(if __G { #store } else { #cstore }),
                    ),
                    FieldForm::Checked => (cload, cstore),
                };
                let new = match op {
                    None => quote!(__v),
                    Some(op) => binary(*op, field.ty, load, quote!(__v)),
                };
                quote!({ let __v = #v; let __i: usize = #i; let __k: usize = #k; let __new = #new; #store; })
            }
            StmtKind::Store {
                base,
                check,
                op,
                index,
                value: e,
                ..
            } => {
                let checked = &!check.unchecked_in_source;
                let v = self.expr(e);
                let i = self.expr(index);
                let elem = match base {
                    Base::Param(p) => self.slice_elem(*p),
                    Base::Local(l) => self.f.locals[*l].ty,
                };
                let proved = self.proved(check);
                let guarded = self.guarded(check);
                match base {
                    Base::Param(p) => {
                        let p = self.param(*p);
                        let (load, store) = if guarded {
                            (
                                // SAFETY: with `__G`, the run-time guard held, under which
                                // bounds.rs proved `__i < len`.
                                quote!(if __G { unsafe { #p.load_unchecked(__i) } } else { #p.load(__i) }),
                                // SAFETY: as for the load.
                                quote!(if __G { unsafe { #p.store_unchecked(__i, __new) } } else { #p.store(__i, __new) }),
                            )
                        } else if proved {
                            (
                                // SAFETY: the bounds analysis (bounds.rs) proved `__i < len`.
                                quote!(unsafe { #p.load_unchecked(__i) }),
                                // SAFETY: as for the load: `__i < len` is proved.
                                quote!(unsafe { #p.store_unchecked(__i, __new) }),
                            )
                        } else if *checked {
                            (quote!(#p.load(__i)), quote!(#p.store(__i, __new)))
                        } else {
                            // An unchecked access exists only inside the author's `unsafe`
                            // block, whose guarantee is `__i < len`.
                            (
                                // SAFETY: `__i < len`, the author's guarantee (above).
                                quote_spanned!(s.src.0=> unsafe { #p.load_unchecked(__i) }),
                                // SAFETY: as for the load.
                                quote_spanned!(s.src.0=> unsafe { #p.store_unchecked(__i, __new) }),
                            )
                        };
                        let new = match op {
                            None => quote!(__v),
                            Some(op) => binary(*op, elem, load, quote!(__v)),
                        };
                        quote!({ let __v = #v; let __i: usize = #i; let __new = #new; #store; })
                    }
                    Base::Local(l) => {
                        let a = self.local(*l);
                        let place = if guarded {
                            // SAFETY: with `__G`, the run-time guard held, under which the
                            // bounds analysis proved `__i` below the array's length.
                            quote!(*(if __G { unsafe { #a.get_unchecked_mut(__i) } } else { &mut #a[__i] }))
                        } else if proved {
                            // SAFETY: the bounds analysis proved `__i` below the array's length.
                            quote!(*unsafe { #a.get_unchecked_mut(__i) })
                        } else if *checked {
                            quote!(#a[__i])
                        } else {
                            // SAFETY: as above, the author's `unsafe` block vouches for `__i`.
                            quote_spanned!(s.src.0=> *unsafe { #a.get_unchecked_mut(__i) })
                        };
                        let new = match op {
                            None => quote!(__v),
                            Some(op) => binary(*op, elem, place.clone(), quote!(__v)),
                        };
                        quote!({ let __v = #v; let __i: usize = #i; let __new = #new; #place = __new; })
                    }
                }
            }
            StmtKind::Expr(e) => {
                let v = self.expr(e);
                quote!(let _ = #v;)
            }
            StmtKind::If(c, a, b) => {
                let c = self.expr(c);
                let (a, b) = (self.block(a), self.block(b));
                quote!(if #c { #a } else { #b })
            }
            StmtKind::While(c, body) => {
                let c = self.expr(c);
                let body = self.block(body);
                quote!(while #c { #body })
            }
            StmtKind::Loop(body) => {
                let body = self.block(body);
                quote!(loop { #body })
            }
            StmtKind::For(h, body_stmts) => {
                let (var, start, end, inclusive, step) =
                    (&h.var, &h.start, &h.end, &h.inclusive, &h.step);
                let name = format_ident!("__sycl_v{}", var);
                let body = self.block(body_stmts);
                // A loop whose body runs a block of iterations at a time over buffers (see
                // `BlockPlan`) takes that form where its step is 1; the rest as below.
                let blocked = match inclusive {
                    true => None,
                    false => self
                        .block_plan(*var, body_stmts)
                        .map(|plan| self.blocked_loop(plan, body_stmts, &body)),
                };
                let range = if *inclusive {
                    quote!((__sycl_fs)..=(__sycl_fe))
                } else {
                    quote!((__sycl_fs)..(__sycl_fe))
                };
                let step_one = blocked.unwrap_or_else(|| quote!(for #name in #range { #body }));
                let (s, e) = (self.expr(start), self.expr(end));
                match step {
                    None => quote!({
                        let __sycl_fs = #s;
                        let __sycl_fe = #e;
                        #step_one
                    }),
                    Some(st) => {
                        // Two copies of the loop: a step of 1 (a GPU-shaped loop run with
                        // groups of one work-item, as CPUs prefer) gets a plain range, which
                        // LLVM compiles far better than `step_by`. Bounds, then step, as Rust
                        // evaluates them; `step_by(0)` still fails.
                        let st = self.expr(st);
                        quote!({
                            let __sycl_fs = #s;
                            let __sycl_fe = #e;
                            let __sycl_fst: usize = #st;
                            if __sycl_fst == 1 {
                                #step_one
                            } else {
                                for #name in (#range).step_by(__sycl_fst) { #body }
                            }
                        })
                    }
                }
            }
            StmtKind::Break => quote!(break;),
            StmtKind::Continue => quote!(continue;),
            StmtKind::Return(None) => match self.ctx {
                Ctx::Region => quote!({
                    __sv.done = true;
                    return;
                }),
                _ => quote!(return;),
            },
            StmtKind::Return(Some(e)) => {
                let v = self.expr(e);
                quote!(return #v;)
            }
            StmtKind::Barrier if self.ctx == Ctx::Single => quote!(),
            StmtKind::Barrier => {
                let _ = rt;
                unreachable!("barriers are steps")
            }
            // Scopes need nothing more on a CPU (see `rt::KernelAtomic`).
            StmtKind::Fence(order, _) => {
                let o = format_ident!("{}", order.rust_name());
                quote!(::core::sync::atomic::fence(::core::sync::atomic::Ordering::#o);)
            }
            StmtKind::Fail(f) => {
                let code = f.code();
                quote!(#rt::kernel_fail(#code);)
            }
        }
    }
}

/// `x op y` with the kernel language's semantics; `t` is the left operand's type.
fn binary(op: BinOp, t: Ty, x: TokenStream, y: TokenStream) -> TokenStream {
    let rt = rt();
    match op {
        BinOp::Add if t.is_int() => quote!((#x).wrapping_add(#y)),
        BinOp::Sub if t.is_int() => quote!((#x).wrapping_sub(#y)),
        BinOp::Mul if t.is_int() => quote!((#x).wrapping_mul(#y)),
        BinOp::Div if t.is_int() => quote!(#rt::div(#x, #y)),
        BinOp::Rem if t.is_int() => quote!(#rt::rem(#x, #y)),
        BinOp::Shl => quote!((#x).wrapping_shl((#y) as u32)),
        BinOp::Shr => quote!((#x).wrapping_shr((#y) as u32)),
        BinOp::Add => quote!(((#x) + (#y))),
        BinOp::Sub => quote!(((#x) - (#y))),
        BinOp::Mul => quote!(((#x) * (#y))),
        BinOp::Div => quote!(((#x) / (#y))),
        BinOp::Rem => quote!(((#x) % (#y))),
        BinOp::BitAnd => quote!(((#x) & (#y))),
        BinOp::BitOr => quote!(((#x) | (#y))),
        BinOp::BitXor => quote!(((#x) ^ (#y))),
        BinOp::Eq => quote!(((#x) == (#y))),
        BinOp::Ne => quote!(((#x) != (#y))),
        BinOp::Lt => quote!(((#x) < (#y))),
        BinOp::Le => quote!(((#x) <= (#y))),
        BinOp::Gt => quote!(((#x) > (#y))),
        BinOp::Ge => quote!(((#x) >= (#y))),
        BinOp::And => quote!(((#x) && (#y))),
        BinOp::Or => quote!(((#x) || (#y))),
    }
}

/// Which form a struct field access takes.
enum FieldForm {
    /// Both indices proved in bounds: unchecked.
    Proved,
    /// In bounds under the run-time guard (`__G`).
    Guarded,
    Checked,
}

/// `KernelStructs::load`'s generic arguments for a field: its type, byte offset and items.
fn field_generics(field: &kir::Field<Checked>) -> TokenStream {
    let t = ty_tokens(field.ty);
    let offset = Literal::usize_unsuffixed(field.offset as usize);
    let items = Literal::usize_unsuffixed(field.item.as_ref().map_or(1, |i| i.len as usize));
    quote!(#t, #offset, #items)
}

/// The prologue that binds a kernel's parameters from the runtime's argument list.
fn bind_params(params: &[Param]) -> TokenStream {
    let binds = params.iter().enumerate().map(|(i, p)| {
        let name = param_ident(p);
        let i = Literal::usize_unsuffixed(i);
        match p.kind {
            ParamKind::Scalar(t) => {
                let t = ty_tokens(t);
                quote!(let #name: #t = __args.scalar::<#t>(#i);)
            }
            ParamKind::Slice { elem, mutable } => {
                let t = ty_tokens(elem);
                if mutable {
                    // `mut`: a helper call takes it as `&mut`.
                    quote!(let mut #name = __args.slice_mut::<#t>(#i);)
                } else {
                    quote!(let #name = __args.slice::<#t>(#i);)
                }
            }
            ParamKind::Structs { size, mutable } => {
                let size = Literal::usize_unsuffixed(size as usize);
                if mutable {
                    quote!(let #name = __args.structs_mut::<#size>(#i);)
                } else {
                    quote!(let #name = __args.structs::<#size>(#i);)
                }
            }
        }
    });
    quote!(#(#binds)*)
}

/// The Rust name of const generic parameter `i` in the native CPU functions.
fn const_ident(i: usize) -> proc_macro2::Ident {
    format_ident!("__SYCL_C{}", i)
}

/// An array's length: a literal, or its const parameter.
fn array_len(a: sycl_kernel_ir::Array) -> TokenStream {
    match a.len_param {
        Some(p) => {
            let c = const_ident(p);
            quote!(#c)
        }
        None => {
            let n = Literal::usize_unsuffixed(a.len as usize);
            quote!(#n)
        }
    }
}

/// `consts`' generic parameters (`const __SYCL_C0: usize, ..`), and their arguments.
fn const_generics(consts: &[Ty]) -> (Vec<TokenStream>, Vec<proc_macro2::Ident>) {
    consts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (c, t) = (const_ident(i), ty_tokens(*t));
            (quote!(const #c: #t), c)
        })
        .unzip()
}

/// The native CPU entry of a kernel: `fn(&CpuArgs, Range<usize>)` over work-items (flat) or
/// work-groups (group kernels); `consts`: its const generic parameters' types (the functions
/// take them as const generics, named `__SYCL_C0`, ..).
pub fn kernel_cpu(
    f: &Function,
    param_names: &[Param],
    an: &Analysis,
    fn_name: &proc_macro2::Ident,
    consts: &[Ty],
) -> TokenStream {
    let params = bind_params(param_names);
    let rt = rt();
    let (cparams, cargs) = const_generics(consts);
    if !an.info.group {
        let e = RustEmitter::new(f, param_names, Some(an), Ctx::Flat);
        let body = e.block(&f.body);
        let lid = an.queries.local_id.then(|| {
            quote!(let __lid: [usize; 3] = [__gid[0] % __lr[0], __gid[1] % __lr[1], __gid[2] % __lr[2]];)
        });
        let grp = an.queries.group_id.then(|| {
            quote!(let __grp: [usize; 3] = [__gid[0] / __lr[0], __gid[1] / __lr[1], __gid[2] / __lr[2]];)
        });
        let inner = format_ident!("{}_with", fn_name);
        return quote! {
            #[allow(unused, unused_mut, unused_variables, unreachable_code, clippy::all)]
            fn #fn_name<#(#cparams),*>(__args: &#rt::CpuArgs, __chunk: ::core::ops::Range<usize>) {
                if __args.guarded() {
                    #inner::<true, #(#cargs),*>(__args, __chunk)
                } else {
                    #inner::<false, #(#cargs),*>(__args, __chunk)
                }
            }
            /// `__G`: the kernel's run-time guard held for this launch.
            #[allow(unused, unused_mut, unused_variables, unreachable_code, clippy::all)]
            fn #inner<const __G: bool, #(#cparams),*>(__args: &#rt::CpuArgs, __chunk: ::core::ops::Range<usize>) {
                #params
                let __gr: [usize; 3] = __args.global_range();
                let __lr: [usize; 3] = __args.local_range();
                let __ngr: [usize; 3] = __args.group_range();
                __args.for_each_item(__chunk, |__gid: [usize; 3]| {
                    #lid
                    #grp
                    #body
                });
            }
        };
    }
    // Group kernels: state, local arrays, steps.
    let fields = f
        .locals
        .iter()
        .enumerate()
        .filter(|(l, local)| !local.is_work_group_array() && an.class[*l] == Class::Item)
        .map(|(l, local)| {
            let name = format_ident!("__sycl_v{}", l);
            let t = ty_tokens(local.ty);
            match local.array {
                // A private array (`Default` is derived only up to 32 elements).
                Some(arr) => {
                    let len = array_len(arr);
                    (
                        quote!(#name: [#t; #len],),
                        quote!(#name: [<#t as ::core::default::Default>::default(); #len],),
                    )
                }
                None => (
                    quote!(#name: #t,),
                    quote!(#name: <#t as ::core::default::Default>::default(),),
                ),
            }
        });
    let (fields, defaults): (Vec<_>, Vec<_>) = fields.unzip();
    let arrays = f.locals.iter().enumerate().filter_map(|(l, local)| {
        local.array.filter(|a| a.is_work_group()).map(|arr| {
            let name = format_ident!("__sycl_v{}", l);
            let t = ty_tokens(local.ty);
            let len = array_len(arr);
            quote!(let mut #name: ::std::vec::Vec<#t> = ::std::vec![<#t as ::core::default::Default>::default(); #len];)
        })
    });
    let all_steps = f.steps.as_deref().unwrap_or_default();
    let steps = steps(f, param_names, an, all_steps);
    let buffers = exchange_buffers(all_steps).into_iter().map(|(l, t)| {
        let name = format_ident!("__sycl_sg{}", l);
        let t = ty_tokens(t);
        quote!(let mut #name: ::std::vec::Vec<#t> = ::std::vec![<#t as ::core::default::Default>::default(); __args.group_items()];)
    });
    let inner = format_ident!("{}_with", fn_name);
    // Groups of one work-item where the kernel synchronises inside a loop: the body as
    // straight code, since the steps' per-item passes at each iteration cost more than its
    // work (the bench's scan: 20x rayon's time -> 1.0x). Elsewhere the steps are as fast or
    // faster (reduce 1.29x -> 1.95x, softmax 1.50x -> 1.58x rayon's time when run straight).
    // Only where groups of one may run: not in a kernel that requires larger ones
    // (`reqd_work_group_size`; the collectives' step kernels, whose straight code took 20 s
    // of the crate's 87 s release build and never ran).
    let sync_loop = all_steps.iter().any(|s| matches!(s, Step::SyncFor(..)));
    let groups_of_one = an.info.required_local.iter().all(|&s| s <= 1);
    let single = if sync_loop && groups_of_one {
        let body = RustEmitter::new(f, param_names, Some(an), Ctx::Single).block(&f.body);
        quote! {
            if __args.group_items() == 1 {
                for __g in __groups {
                    let __grp: [usize; 3] = __args.group_coords(__g);
                    let __lid: [usize; 3] = [0, 0, 0];
                    let __gid: [usize; 3] = __grp;
                    (|| {
                        #body
                    })();
                }
                return;
            }
        }
    } else {
        quote!()
    };
    quote! {
        #[allow(unused, unused_mut, unused_variables, unreachable_code, non_snake_case, clippy::all)]
        fn #fn_name<#(#cparams),*>(__args: &#rt::CpuArgs, __groups: ::core::ops::Range<usize>) {
            if __args.guarded() {
                #inner::<true, #(#cargs),*>(__args, __groups)
            } else {
                #inner::<false, #(#cargs),*>(__args, __groups)
            }
        }
        /// `__G`: the kernel's run-time guard held for this launch.
        #[allow(unused, unused_mut, unused_variables, unreachable_code, non_snake_case, clippy::all)]
        fn #inner<const __G: bool, #(#cparams),*>(__args: &#rt::CpuArgs, __groups: ::core::ops::Range<usize>) {
            #params
            let __gr: [usize; 3] = __args.global_range();
            let __lr: [usize; 3] = __args.local_range();
            let __ngr: [usize; 3] = __args.group_range();
            // Generic over the kernel's const parameters, which an inner item cannot use.
            struct __SyclState<#(#cparams),*> { done: bool, #(#fields)* }
            impl<#(#cparams),*> ::core::clone::Clone for __SyclState<#(#cargs),*> {
                fn clone(&self) -> Self {
                    *self
                }
            }
            impl<#(#cparams),*> ::core::marker::Copy for __SyclState<#(#cargs),*> {}
            impl<#(#cparams),*> ::core::default::Default for __SyclState<#(#cargs),*> {
                fn default() -> Self {
                    __SyclState { done: false, #(#defaults)* }
                }
            }
            let mut __states: ::std::vec::Vec<__SyclState<#(#cargs),*>> =
                ::std::vec![__SyclState::<#(#cargs),*>::default(); __args.group_items()];
            #(#arrays)*
            #single
            #(#buffers)*
            '__sycl_groups: for __g in __groups {
                let __grp: [usize; 3] = __args.group_coords(__g);
                for __s in __states.iter_mut() {
                    *__s = __SyclState::<#(#cargs),*>::default();
                }
                #steps
            }
        }
    }
}

fn steps(f: &Function, params: &[Param], an: &Analysis, steps_: &[Step]) -> TokenStream {
    let rt = rt();
    let region = RustEmitter::new(f, params, Some(an), Ctx::Region);
    let group = RustEmitter::new(f, params, Some(an), Ctx::Group);
    let all_done = quote! {
        if __states.iter().all(|__s| __s.done) {
            continue '__sycl_groups;
        }
    };
    let mut out = TokenStream::new();
    for step in steps_ {
        let ts = match step {
            Step::Region(stmts) => {
                let body = region.block(stmts);
                quote! {
                    // The region works on a copy of the item's state, written back when it
                    // ends (`return` leaves the inner closure): a local that LLVM keeps in
                    // registers, where stores through `__st` would stay in the loop (the
                    // relaxed atomic loads of slices keep LLVM from promoting them).
                    __args.for_each_group_item(&__grp, &mut __states, |__st: &mut _, __lid: [usize; 3], __gid: [usize; 3]| {
                        if __st.done {
                            return;
                        }
                        let mut __sv = *__st;
                        (|| {
                            #body
                        })();
                        *__st = __sv;
                    });
                }
            }
            Step::GroupLet(l, e) => {
                let name = format_ident!("__sycl_v{}", l);
                let t = ty_tokens(f.locals[*l].ty);
                let v = group.expr(e);
                quote! {
                    #all_done
                    let #name: #t = #v;
                }
            }
            Step::Barrier => quote!(),
            Step::Group {
                local,
                op: GroupOp::Collective(c),
                args,
            } if c.is_uniform() => {
                let name = format_ident!("__sycl_v{}", local);
                let t = args[0].ty;
                let tt = ty_tokens(t);
                let v = region.expr(&args[0]);
                let (ident, combine) = reduction(c.op(), t);
                let compute = quote! {
                    {
                        let mut __acc: #tt = #ident;
                        __args.for_each_group_item(&__grp, &mut __states, |__st: &mut _, __lid: [usize; 3], __gid: [usize; 3]| {
                            if __st.done {
                                return;
                            }
                            let __sv = *__st;
                            let __x: #tt = #v;
                            __acc = #combine;
                        });
                        __acc
                    }
                };
                if an.class[*local] == Class::Item {
                    quote! {
                        let __r: #tt = #compute;
                        for __s in __states.iter_mut() {
                            __s.#name = __r;
                        }
                    }
                } else {
                    quote!(let #name: #tt = #compute;)
                }
            }
            Step::Group { local, op, args } => {
                // Scans and broadcasts: every work-item's value first, in linear order (one
                // that returned offers the identity; to a broadcast, zero), then each item's
                // result.
                let name = format_ident!("__sycl_v{}", local);
                let buf = format_ident!("__sycl_sg{}", local);
                let t = args[0].ty;
                let tt = ty_tokens(t);
                let v = region.expr(&args[0]);
                let (offered, combine) = match op {
                    GroupOp::Collective(
                        c @ (Collective::InclusiveScan(r) | Collective::ExclusiveScan(r)),
                    ) => {
                        let (ident, combine) = reduction(*r, t);
                        let inclusive = matches!(c, Collective::InclusiveScan(_));
                        (
                            ident.clone(),
                            quote!(#rt::scan_in_place(&mut #buf, #ident, #inclusive, |__acc: #tt, __x: #tt| #combine);),
                        )
                    }
                    _ => (
                        quote!(<#tt as ::core::default::Default>::default()),
                        quote!(),
                    ),
                };
                let values = gather(&buf, &offered, &v);
                let gather = quote! {
                    #values
                    #combine
                };
                if let GroupOp::Broadcast = op {
                    let id = group.expr(&args[1]);
                    let pick = quote!(#buf[(#id) % #buf.len()]);
                    if an.class[*local] == Class::Item {
                        quote! {
                            {
                                #gather
                                let __r: #tt = #pick;
                                for __s in __states.iter_mut() {
                                    __s.#name = __r;
                                }
                            }
                        }
                    } else {
                        quote! {
                            let #name: #tt = {
                                #gather
                                #pick
                            };
                        }
                    }
                } else {
                    quote! {
                        {
                            #gather
                            let mut __next: usize = 0;
                            __args.for_each_group_item(&__grp, &mut __states, |__st: &mut _, __lid: [usize; 3], __gid: [usize; 3]| {
                                let __item = __next;
                                __next += 1;
                                if !__st.done {
                                    __st.#name = #buf[__item];
                                }
                            });
                        }
                    }
                }
            }
            Step::SubGroup { local, op, args } => {
                let name = format_ident!("__sycl_v{}", local);
                let buf = format_ident!("__sycl_sg{}", local);
                let t = args[0].ty;
                let tt = ty_tokens(t);
                let v = region.expr(&args[0]);
                // What a work-item that returned offers: the identity to reductions, zero to
                // the permutations (spec/kernels.md). Reductions combine each sub-group once,
                // between the passes.
                let (offered, combine, result) = match op {
                    SubGroupOp::Collective(c) => {
                        let (ident, combine) = reduction(c.op(), t);
                        let inclusive = matches!(c, Collective::InclusiveScan(_));
                        let pass = if c.is_uniform() {
                            quote!(#rt::reduce_sub_groups(&mut #buf, |__acc: #tt, __x: #tt| #combine);)
                        } else {
                            quote!(#rt::scan_sub_groups(&mut #buf, #ident, #inclusive, |__acc: #tt, __x: #tt| #combine);)
                        };
                        (ident, pass, quote!(#buf[__item]))
                    }
                    _ => {
                        let lane = region.expr(&args[1]);
                        let call = format_ident!("sub_group_{}", op.name().as_str());
                        (
                            quote!(<#tt as ::core::default::Default>::default()),
                            quote!(),
                            quote!(#rt::#call(&#buf, __item, #lane)),
                        )
                    }
                };
                let values = gather(&buf, &offered, &v);
                quote! {
                    {
                        // Every work-item's value first (a sub-group exchanges them), then each
                        // item's result.
                        #values
                        #combine
                        let mut __next: usize = 0;
                        __args.for_each_group_item(&__grp, &mut __states, |__st: &mut _, __lid: [usize; 3], __gid: [usize; 3]| {
                            let __item = __next;
                            __next += 1;
                            if __st.done {
                                return;
                            }
                            let __sv = *__st;
                            let __r: #tt = #result;
                            __st.#name = __r;
                        });
                    }
                }
            }
            Step::SyncFor(h, body) => {
                let name = format_ident!("__sycl_v{}", h.var);
                let range = group.range(&h.start, &h.end, h.inclusive, h.step.as_ref());
                let inner = steps(f, params, an, body);
                quote! {
                    #all_done
                    for #name in #range {
                        #inner
                    }
                }
            }
        };
        out.extend(ts);
    }
    out
}

/// Every work-item's value of a group step into `buf` in linear order (`offered` for one that
/// returned): the first pass of scans, broadcasts and sub-group collectives.
fn gather(buf: &proc_macro2::Ident, offered: &TokenStream, v: &TokenStream) -> TokenStream {
    quote! {
        let mut __item: usize = 0;
        __args.for_each_group_item(&__grp, &mut __states, |__st: &mut _, __lid: [usize; 3], __gid: [usize; 3]| {
            #buf[__item] = if __st.done {
                #offered
            } else {
                let __sv = *__st;
                #v
            };
            __item += 1;
        });
    }
}

/// A reduction's identity and its combination of `__acc` and `__x` (integer sums and
/// products wrap; over `bool`, the votes' `|` and `&`).
fn reduction(op: Reduce, t: Ty) -> (TokenStream, TokenStream) {
    let tt = ty_tokens(t);
    if t == Ty::Bool {
        return match op {
            Reduce::BitAnd => (quote!(true), quote!(__acc & __x)),
            _ => (quote!(false), quote!(__acc | __x)),
        };
    }
    match (op, t.is_float()) {
        (Reduce::Sum, true) => (quote!(0 as #tt), quote!(__acc + __x)),
        (Reduce::Sum, false) => (quote!(0 as #tt), quote!(__acc.wrapping_add(__x))),
        (Reduce::Product, true) => (quote!(1 as #tt), quote!(__acc * __x)),
        (Reduce::Product, false) => (quote!(1 as #tt), quote!(__acc.wrapping_mul(__x))),
        (Reduce::Min, true) => (quote!(#tt::INFINITY), quote!(__acc.min(__x))),
        (Reduce::Min, false) => (quote!(#tt::MAX), quote!(__acc.min(__x))),
        (Reduce::Max, true) => (quote!(#tt::NEG_INFINITY), quote!(__acc.max(__x))),
        (Reduce::Max, false) => (quote!(#tt::MIN), quote!(__acc.max(__x))),
        (Reduce::BitAnd, _) => (quote!(!(0 as #tt)), quote!(__acc & __x)),
        (Reduce::BitOr, _) => (quote!(0 as #tt), quote!(__acc | __x)),
        (Reduce::BitXor, _) => (quote!(0 as #tt), quote!(__acc ^ __x)),
    }
}

/// The exchange buffers of `steps` (nested ones included): the result local and element type
/// of each sub-group collective, group scan and broadcast, declared once per launch.
fn exchange_buffers(steps: &[Step]) -> Vec<(usize, Ty)> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::SubGroup { local, args, .. } => out.push((*local, args[0].ty)),
            Step::Group { local, op, args }
                if !matches!(
                    op,
                    GroupOp::Collective(Collective::Reduce(_) | Collective::Any | Collective::All)
                ) =>
            {
                out.push((*local, args[0].ty))
            }
            Step::SyncFor(_, body) => out.extend(exchange_buffers(body)),
            _ => {}
        }
    }
    out
}

/// A helper's Rust function (the same semantics as in kernels; failures panic).
pub fn helper_fn(f: &Function, param_names: &[Param], item: &syn::ItemFn) -> TokenStream {
    let e = RustEmitter::new(f, param_names, None, Ctx::Helper);
    let body = e.block(&f.body);
    let attrs = &item.attrs;
    let vis = &item.vis;
    let name = &item.sig.ident;
    // A slice parameter is generic: a kernel passes its `KernelSlice`/`KernelSliceMut`, host
    // code a `[T]` or `Vec<T>` (`sycl::kernel::SliceRef`/`SliceMutRef`).
    let rt = rt();
    let mut generics = Vec::new();
    let params: Vec<TokenStream> = param_names
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let user = format_ident!("{}", p.name, span = Span::call_site());
            match p.kind {
                ParamKind::Scalar(t) => {
                    let t = ty_tokens(t);
                    quote!(#user: #t)
                }
                ParamKind::Slice { elem, mutable } => {
                    let g = format_ident!("__SyclS{}", i);
                    let t = ty_tokens(elem);
                    if mutable {
                        generics.push(quote!(#g: #rt::SliceMutRef<#t> + ?Sized));
                        quote!(#user: &mut #g)
                    } else {
                        generics.push(quote!(#g: #rt::SliceRef<#t> + ?Sized));
                        quote!(#user: &#g)
                    }
                }
                ParamKind::Structs { .. } => unreachable!("helpers take no struct slices"),
            }
        })
        .collect();
    let binds = param_names.iter().map(|p| {
        let user = format_ident!("{}", p.name);
        let inner = param_ident(p);
        quote!(let #inner = #user;)
    });
    let ret = ty_tokens(f.ret.expect("helpers return"));
    quote! {
        #(#attrs)*
        #[allow(unused, unused_mut, unused_variables, unreachable_code, clippy::all)]
        #vis fn #name<#(#generics),*>(#(#params),*) -> #ret {
            #[allow(unused_imports)]
            use #rt::{SliceMutRef as _, SliceRef as _};
            #(#binds)*
            #body
            #[allow(unreachable_code)]
            {
                ::core::unreachable!("a kernel helper's body ends in `return`")
            }
        }
    }
}
