//! Blocked loops on the native CPU.
//!
//! Element accesses are relaxed atomics (see the parent module), and LLVM vectorizes no loop
//! with an atomic access: a softmax row's maximum, a sum of `u32`s or a bf16 conversion loop
//! ran one element at a time, 1.5x-6x the time of the same loop over plain slices. A `for`
//! loop whose body qualifies ([`RustEmitter::block_plan`]) therefore runs, where its step is
//! 1, [`BLOCK`] iterations at a time: each slice the body reads is copied (relaxed atomic
//! loads) into a private buffer, the body runs over the buffers in an inner loop that LLVM
//! vectorizes like any loop over arrays, and each buffer the body writes is stored back
//! (relaxed atomic stores). The iterations that remain, and every block whose elements are
//! not all in bounds, run as the plain loop, which fails at the exact access the source
//! would.
//!
//! What keeps the loop's meaning:
//! - Every access the body makes to a slice is at `offset + var` with a loop-invariant offset,
//!   so iteration `k` of a block touches element `k` of each buffer and no other.
//! - A slice the body writes has one offset, and its stores are statements of the body
//!   itself (not in an `if`): every iteration writes its element exactly once, so storing
//!   the whole buffer writes what the loop writes. A read of it after the store in the same
//!   iteration reads the buffer, as the loop would read the element.
//! - The body cannot fail (no integer division, no `clamp`, no call, atomic, loop or jump),
//!   so a block that started ends, and its stores are all the loop's.
//! - A slice the body writes shares no memory with any other slice argument: the launch
//!   refuses a `&mut [T]` that overlaps another (`Errc::Invalid`, spec/kernels.md), and
//!   helpers, whose arguments no launch checks, are never blocked.
//!
//! The accesses of a block then differ from the loop's only in their order across elements,
//! which relaxed atomics on different elements never promise to anyone.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use sycl_kernel_ir::ir::{visit_stmts, walk_expr};

use super::{ty_tokens, Expr, ExprKind, RustEmitter, Stmt, StmtKind};
use crate::ir::{Base, BinOp, MathFn, ParamKind, Ty};

/// Iterations per block: 64 elements are 128 to 512 bytes a buffer, enough for LLVM's vector
/// loop and its remainder.
pub(super) const BLOCK: usize = 256;

/// Buffers a body may use at most (one per slice and offset).
const MAX_BUFFERS: usize = 8;

/// Operations per slice access below which a body stays a plain loop: a block costs each
/// access a store and a load of its buffer, which a body of a load and an add (a `u32` sum:
/// 0.73x a rayon loop's throughput plain, 0.52-0.63x blocked) never wins back, while a
/// softmax pass (a conversion and a maximum per element) runs 1.4x faster blocked.
const MIN_OPS_PER_ACCESS: usize = 2;

/// How a qualifying loop runs a block.
pub(crate) struct BlockPlan {
    /// The loop variable (a local).
    var: usize,
    /// One per slice and offset the body accesses.
    buffers: Vec<Buffer>,
}

/// The block of one slice at one offset.
struct Buffer {
    /// The slice parameter.
    param: usize,
    /// The offset's tokens as a string: equal strings, equal offsets (the offset is
    /// loop-invariant and has no effects).
    key: String,
    /// The offset, or `None` for the variable alone.
    offset: Option<Expr>,
    /// The body reads it (a load, or a compound store).
    read: bool,
    /// The body stores to it.
    written: bool,
    /// The buffer's name.
    name: Ident,
}

/// One slice access of a body, as the plan collects them.
struct Access<'e> {
    param: usize,
    offset: Option<&'e Expr>,
    read: bool,
    written: bool,
}

impl RustEmitter<'_> {
    /// Inside a blocked body: the buffer standing for `param[index]`, if the plan has one.
    fn block_buffer(&self, param: usize, index: &Expr) -> Option<Ident> {
        let plan = self.block.as_ref()?;
        let offset = contiguous(plan.var, index)?;
        let key = self.offset_key(offset);
        plan.buffers
            .iter()
            .find(|b| b.param == param && b.key == key)
            .map(|b| b.name.clone())
    }

    /// Inside a blocked body: the buffer a load of a slice element reads instead.
    pub(super) fn block_load(&self, e: &Expr) -> Option<Ident> {
        self.block.as_ref()?;
        match &e.kind {
            ExprKind::Load {
                base: Base::Param(p),
                index,
                field: None,
                ..
            } => self.block_buffer(*p, index),
            _ => None,
        }
    }

    /// Inside a blocked body: a store of a slice element, into its buffer.
    pub(super) fn block_store(&self, s: &Stmt) -> Option<TokenStream> {
        self.block.as_ref()?;
        let StmtKind::Store {
            base: Base::Param(p),
            op,
            index,
            value,
            field: None,
            ..
        } = &s.kind
        else {
            return None;
        };
        let b = self.block_buffer(*p, index)?;
        let v = self.expr(value);
        let new = match op {
            None => quote!(__v),
            Some(op) => super::binary(*op, self.slice_elem(*p), quote!(#b[__sycl_k]), quote!(__v)),
        };
        Some(quote!({ let __v = #v; let __new = #new; #b[__sycl_k] = __new; }))
    }

    /// A scalar slice parameter's element type (a scalar parameter's type).
    pub(super) fn slice_elem(&self, param: usize) -> Ty {
        match self.f.params[param] {
            ParamKind::Slice { elem, .. } => elem,
            ParamKind::Scalar(t) => t,
            ParamKind::Structs { .. } => unreachable!("struct slices are accessed by field"),
        }
    }

    fn offset_key(&self, offset: Option<&Expr>) -> String {
        offset.map_or_else(|| "0".to_string(), |o| self.expr(o).to_string())
    }

    /// How the loop over `var` with this body runs in blocks, or `None` where it cannot
    /// (see the module's list) or would gain nothing (no slice access).
    pub(super) fn block_plan(&self, var: usize, body: &[Stmt]) -> Option<BlockPlan> {
        if self.ctx == super::Ctx::Helper || self.f.locals[var].ty != Ty::Usize {
            return None;
        }
        let (mut assigned, mut declared) = (BTreeSet::from([var]), BTreeSet::new());
        visit_stmts(body, &mut |s| match &s.kind {
            StmtKind::Let(l, _) => {
                assigned.insert(*l);
                declared.insert(*l);
            }
            StmtKind::AssignLocal(l, _, _) => {
                assigned.insert(*l);
            }
            _ => {}
        });
        if carries_float_sum(self.f, body, &declared) {
            return None;
        }
        let scan = BodyScan {
            f: self.f,
            var,
            assigned: &assigned,
            ops: Cell::new(0),
        };
        let mut accesses = Vec::new();
        if !scan.stmts(body, true, &mut accesses)
            || accesses.is_empty()
            || scan.ops.get() < MIN_OPS_PER_ACCESS * accesses.len()
        {
            return None;
        }
        let mut buffers: Vec<Buffer> = Vec::new();
        for a in accesses {
            let key = self.offset_key(a.offset);
            match buffers
                .iter_mut()
                .find(|b| b.param == a.param && b.key == key)
            {
                Some(b) => {
                    b.read |= a.read;
                    b.written |= a.written;
                }
                None => buffers.push(Buffer {
                    param: a.param,
                    key,
                    offset: a.offset.cloned(),
                    read: a.read,
                    written: a.written,
                    name: format_ident!("__sycl_blk{}", buffers.len()),
                }),
            }
        }
        // A written slice has one buffer: accesses at two offsets could touch one element
        // from two iterations.
        let written_twice = buffers
            .iter()
            .any(|b| b.written && buffers.iter().filter(|o| o.param == b.param).count() > 1);
        if written_twice || buffers.len() > MAX_BUFFERS {
            return None;
        }
        Some(BlockPlan { var, buffers })
    }

    /// The step-1 form of a planned loop, after `__sycl_fs` and `__sycl_fe` (its bounds):
    /// blocks while a whole one remains, then the plain loop over the rest.
    pub(super) fn blocked_loop(
        &self,
        plan: BlockPlan,
        body: &[Stmt],
        plain_body: &TokenStream,
    ) -> TokenStream {
        let n = BLOCK;
        let name = format_ident!("__sycl_v{}", plan.var);
        let plan = Rc::new(plan);
        let inner = RustEmitter {
            block: Some(plan.clone()),
            ..self.clone()
        };
        let blocked_body = inner.block(body);
        let mut setup = Vec::new();
        let mut loads = Vec::new();
        let mut stores = Vec::new();
        for (i, b) in plan.buffers.iter().enumerate() {
            let o = format_ident!("__sycl_bo{}", i);
            let v = match &b.offset {
                Some(e) => self.expr(e),
                None => quote!(0usize),
            };
            let (p, buf) = (self.param(b.param), &b.name);
            let t = ty_tokens(self.slice_elem(b.param));
            // The buffers live across blocks: one array each, filled in place (an array
            // returned per block would be copied).
            setup.push(quote! {
                let #o: usize = #v;
                let mut #buf: [#t; #n] = [<#t as ::core::default::Default>::default(); #n];
            });
            let start = quote!(#o.wrapping_add(__sycl_c));
            loads.push(if b.read {
                quote!(if !#p.load_block::<#n>(#start, &mut #buf) { break; })
            } else {
                quote!(if !#p.block_in_bounds(#start, #n) { break; })
            });
            if b.written {
                stores.push(quote!(#p.store_block::<#n>(#start, &#buf);));
            }
        }
        quote! {
            let mut __sycl_c: usize = __sycl_fs;
            #(#setup)*
            while __sycl_c < __sycl_fe && __sycl_fe - __sycl_c >= #n {
                #(#loads)*
                for __sycl_k in 0..#n {
                    let #name: usize = __sycl_c + __sycl_k;
                    #blocked_body
                }
                #(#stores)*
                __sycl_c += #n;
            }
            for #name in __sycl_c..__sycl_fe { #plain_body }
        }
    }
}

/// Whether the body adds to, subtracts from or multiplies a float that lives across
/// iterations (`s += x[i]`, `s = s * v`): LLVM keeps such a chain in order (float
/// arithmetic does not reassociate), so the loop gains nothing blocked and pays the copies
/// (softmax's sum of exponentials: 1.07x the plain loop's time).
fn carries_float_sum(f: &super::Function, body: &[Stmt], declared: &BTreeSet<usize>) -> bool {
    let carried = |l: usize| f.locals[l].ty.is_float() && !declared.contains(&l);
    let mut found = false;
    visit_stmts(body, &mut |s| {
        found |= match &s.kind {
            StmtKind::AssignLocal(l, Some(BinOp::Add | BinOp::Sub | BinOp::Mul), _) => carried(*l),
            StmtKind::AssignLocal(l, None, e) => carried(*l) && sums_local(e, *l),
            _ => false,
        }
    });
    found
}

/// Whether `e` adds, subtracts or multiplies local `l` itself.
fn sums_local(e: &Expr, l: usize) -> bool {
    let is_l = |e: &Expr| matches!(e.kind, ExprKind::Local(m) if m == l);
    let mut found = false;
    walk_expr(e, &mut |x| {
        found |= matches!(&x.kind,
            ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b, _) if is_l(a) || is_l(b));
    });
    found
}

/// `offset + var`, `var + offset` (`Some(offset)`, the offset loop-invariant) or `var`
/// (`None`); `None` (the outer) for any other index.
fn contiguous(var: usize, index: &Expr) -> Option<Option<&Expr>> {
    let is_var = |e: &Expr| matches!(e.kind, ExprKind::Local(l) if l == var);
    match &index.kind {
        ExprKind::Local(l) if *l == var => Some(None),
        ExprKind::Binary(BinOp::Add, a, b, _) if is_var(a) && !is_var(b) => Some(Some(b)),
        ExprKind::Binary(BinOp::Add, a, b, _) if is_var(b) && !is_var(a) => Some(Some(a)),
        _ => None,
    }
}

/// Whether `op` on operands of type `t` can fail (integer division and remainder).
fn can_fail(op: BinOp, t: Ty) -> bool {
    matches!(op, BinOp::Div | BinOp::Rem) && t.is_int()
}

/// Checks a loop body against the plan's rules, collecting its slice accesses.
struct BodyScan<'a> {
    f: &'a super::Function,
    var: usize,
    assigned: &'a BTreeSet<usize>,
    /// Operations the body computes (outside indices), for [`MIN_OPS_PER_ACCESS`].
    ops: Cell<usize>,
}

impl BodyScan<'_> {
    fn is_scalar_slice(&self, p: usize) -> bool {
        matches!(self.f.params[p], ParamKind::Slice { .. })
    }

    /// Counts one operation; `true`, so that it chains with the checks.
    fn op(&self) -> bool {
        self.ops.set(self.ops.get() + 1);
        true
    }

    fn scalar_local(&self, l: usize) -> bool {
        self.f.locals[l].array.is_none()
    }

    /// Statements the plan allows; stores only where `top` (the body's own statements).
    fn stmts<'e>(&self, body: &'e [Stmt], top: bool, out: &mut Vec<Access<'e>>) -> bool {
        body.iter().all(|s| match &s.kind {
            StmtKind::Let(l, e) => self.scalar_local(*l) && self.expr(e, out),
            StmtKind::AssignLocal(l, op, e) => {
                self.scalar_local(*l)
                    && !op.is_some_and(|op| can_fail(op, self.f.locals[*l].ty))
                    && (op.is_none() || self.op())
                    && self.expr(e, out)
            }
            StmtKind::Store {
                base: Base::Param(p),
                op,
                index,
                value,
                field: None,
                ..
            } => {
                let elem = match self.f.params[*p] {
                    ParamKind::Slice { elem, .. } => elem,
                    _ => return false,
                };
                let Some(offset) = contiguous(self.var, index) else {
                    return false;
                };
                if !top
                    || op.is_some_and(|op| can_fail(op, elem))
                    || (op.is_some() && !self.op())
                    || !offset.map_or(true, |o| self.invariant(o))
                    || !self.expr(value, out)
                {
                    return false;
                }
                out.push(Access {
                    param: *p,
                    offset,
                    read: op.is_some(),
                    written: true,
                });
                true
            }
            StmtKind::If(c, a, b) => {
                self.expr(c, out) && self.stmts(a, false, out) && self.stmts(b, false, out)
            }
            StmtKind::Expr(e) => self.expr(e, out),
            _ => false,
        })
    }

    /// An expression the plan allows (no failure, no effect but slice reads, which it
    /// collects).
    fn expr<'e>(&self, e: &'e Expr, out: &mut Vec<Access<'e>>) -> bool {
        match &e.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Param(_)
            | ExprKind::Query(..)
            | ExprKind::SubGroupQuery(_)
            | ExprKind::ConstParam(_)
            | ExprKind::Len(_) => true,
            ExprKind::Load {
                base: Base::Param(p),
                index,
                field: None,
                ..
            } if self.is_scalar_slice(*p) => match contiguous(self.var, index) {
                Some(offset) if offset.map_or(true, |o| self.invariant(o)) => {
                    out.push(Access {
                        param: *p,
                        offset,
                        read: true,
                        written: false,
                    });
                    true
                }
                _ => false,
            },
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.op() && self.expr(a, out),
            ExprKind::Binary(op, a, b, _) => {
                !can_fail(*op, a.ty) && self.op() && self.expr(a, out) && self.expr(b, out)
            }
            ExprKind::Select(c, a, b) => {
                self.op() && self.expr(c, out) && self.expr(a, out) && self.expr(b, out)
            }
            ExprKind::Math(m, args) => {
                *m != MathFn::Clamp && self.op() && args.iter().all(|a| self.expr(a, out))
            }
            _ => false,
        }
    }

    /// Whether `e` has the same value in every iteration and no effect or failure.
    fn invariant(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Lit(_)
            | ExprKind::Param(_)
            | ExprKind::Query(..)
            | ExprKind::SubGroupQuery(_)
            | ExprKind::ConstParam(_)
            | ExprKind::Len(_) => true,
            ExprKind::Local(l) => !self.assigned.contains(l),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.invariant(a),
            ExprKind::Binary(op, a, b, _) => {
                !can_fail(*op, a.ty) && self.invariant(a) && self.invariant(b)
            }
            _ => false,
        }
    }
}
