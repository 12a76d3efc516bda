//! Validation of a decoded function: every type, and where each statement may appear.
//!
//! [`crate::wire::decode`] already checked tags, counts and indices; this checks what back
//! ends rely on when they read a [`Function`]: each expression has the type its operator
//! gives (and only the operators, casts, math and compound assignments Rust has), accesses
//! reach slices or local arrays of their element type, stores and atomics reach writable
//! memory, `break` is inside a loop, group operations (barriers, group reductions,
//! sub-group collectives) are only in the body of a kernel with steps, local arrays only in
//! kernels and of the lengths the language allows, build-time proofs are over the
//! work-group size only, bounds name unsigned scalars and slices. Back ends may then read a
//! validated function without checking it again.

use crate::bound::{Bound, Check};
use crate::ir::*;
use crate::ops::*;
use crate::ty::Scalar;
use crate::wire::WireError;

/// What a function is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A kernel: no result, may synchronise its group.
    Kernel,
    /// A helper: returns a scalar, takes only scalars, never synchronises.
    Helper,
}

/// The longest work-group local array the kernel language allows, in elements.
pub const MAX_LOCAL_ARRAY: u32 = 65536;
/// The longest private array the kernel language allows, in elements (16 KiB of `f32`: a
/// register tile, not a work-item's scratch heap; the native CPU keeps one per work-item of a
/// group).
pub const MAX_PRIVATE_ARRAY: u32 = 4096;

/// Checks a decoded function (see the module's documentation).
pub fn validate(f: &Function, role: Role) -> Result<(), WireError> {
    // Group operations (barriers, group reductions, sub-group collectives) appear in the
    // body of a kernel that runs as work-groups, which back ends emit from its steps; the
    // steps hold them as steps, never inside their expressions.
    let mut v = Validator {
        f,
        role,
        group_ops: role == Role::Kernel && f.steps.is_some(),
    };
    match role {
        Role::Kernel if f.ret.is_some() => return v.bad("a kernel with a result"),
        Role::Helper if f.ret.is_none() => return v.bad("a helper without a result"),
        Role::Helper if f.steps.is_some() => return v.bad("a helper with steps"),
        Role::Helper if f.params.iter().any(|p| matches!(p, Param::Structs { .. })) => {
            return v.bad("a helper with a struct slice")
        }
        _ => {}
    }
    for l in &f.locals {
        if l.array.is_some_and(|a| a.len_param.is_some()) {
            return v.bad("a const-generic template (instantiate it first)");
        }
        match l.array {
            Some(a)
                if !l.ty.is_element()
                    || a.len == 0
                    || a.len
                        > match a.space {
                            ArraySpace::WorkGroup => MAX_LOCAL_ARRAY,
                            ArraySpace::Private => MAX_PRIVATE_ARRAY,
                        } =>
            {
                return v.bad("an array of a non-element type or an impossible length")
            }
            Some(a) if a.is_work_group() && role == Role::Helper => {
                return v.bad("a local array in a helper")
            }
            _ => {}
        }
    }
    v.block(&f.body, false)?;
    if let Some(steps) = &f.steps {
        v.group_ops = false;
        v.steps(steps)?;
    }
    Ok(())
}

struct Validator<'a> {
    f: &'a Function,
    role: Role,
    /// Whether group operations may appear here (see [`validate`]).
    group_ops: bool,
}

type R = Result<(), WireError>;

impl Validator<'_> {
    fn bad<T>(&self, what: &str) -> Result<T, WireError> {
        Err(WireError {
            what: format!("invalid kernel IR: {what}"),
            at: 0,
        })
    }

    fn want(&self, ok: bool, what: &str) -> R {
        if ok {
            Ok(())
        } else {
            self.bad(what)
        }
    }

    /// The element type of a base (not a struct slice), and whether it may be written.
    fn base(&self, b: Base) -> Result<(Scalar, bool), WireError> {
        match b {
            Base::Param(i) => match self.f.params[i] {
                Param::Slice { elem, mutable } => Ok((elem, mutable)),
                Param::Structs { .. } => self.bad("a struct slice accessed without a field"),
                Param::Scalar(_) => self.bad("an element of a scalar parameter"),
            },
            Base::Local(l) => match self.f.locals[l] {
                Local {
                    ty, array: Some(_), ..
                } => Ok((ty, true)),
                _ => self.bad("an element of a scalar local"),
            },
        }
    }

    /// An element access (`field`: the struct field it reaches): the element's type and
    /// whether it may be written. A field lies inside the struct at its type's alignment, so
    /// every access stays inside the element the index reaches.
    fn access(&self, b: Base, field: &Option<Box<Field>>) -> Result<(Scalar, bool), WireError> {
        let structs = match b {
            Base::Param(i) => match self.f.params[i] {
                Param::Structs { size, mutable } => Some((size, mutable)),
                _ => None,
            },
            Base::Local(_) => None,
        };
        let (Some((size, mutable)), Some(field)) = (structs, field) else {
            self.want(
                field.is_none(),
                "a field of an element that is not a struct",
            )?;
            return self.base(b);
        };
        let t = field.ty;
        let len = field.item.as_ref().map_or(1, |i| i.len);
        self.field_fits(size, t, field.offset, len)?;
        if let Some(item) = &field.item {
            self.want(
                item.index.ty == Scalar::Usize,
                "a field index that is not a `usize`",
            )?;
            self.check(&item.check)?;
            self.expr(&item.index)?;
        }
        Ok((t, mutable))
    }

    /// Whether `len` items of `t` at byte `offset` lie inside a struct of `size` bytes, aligned.
    fn field_fits(&self, size: u32, t: Scalar, offset: u32, len: u32) -> R {
        let width = t.size() as u64;
        self.want(
            t.is_element()
                && t != Scalar::Usize
                && size > 0
                && size as u64 % width == 0
                && offset as u64 % width == 0
                && len > 0
                && offset as u64 + width * len as u64 <= size as u64,
            "a field outside its struct or misaligned",
        )
    }

    fn scalar_local(&self, l: usize) -> Result<Scalar, WireError> {
        let local = &self.f.locals[l];
        self.want(local.array.is_none(), "a local array used as a value")?;
        Ok(local.ty)
    }

    fn check(&self, c: &Check) -> R {
        match c {
            Check::Checked | Check::Proved => Ok(()),
            Check::When(b) => {
                self.want(b.is_build_time(), "a build-time proof over run-time values")?;
                self.bound(b)
            }
            Check::Guard(b) => self.bound(b),
        }
    }

    fn bound(&self, b: &Bound) -> R {
        bound_leaves(b, &self.f.params)
    }

    fn block(&self, body: &[Stmt], in_loop: bool) -> R {
        body.iter().try_for_each(|s| self.stmt(s, in_loop))
    }

    /// `target op= value` (or `=` without `op`), for a target of type `t`: Rust's compound
    /// assignments are arithmetic, bitwise and shifts.
    fn assign(&self, t: Scalar, op: Option<BinOp>, value: &Expr) -> R {
        match op {
            None => self.want(value.ty == t, "an assignment of another type"),
            Some(op) if op.is_comparison() || op.is_logical() => {
                self.bad("a compound assignment Rust does not have")
            }
            Some(op) => self.binary_type(op, t, t, value.ty),
        }
    }

    fn for_header(&self, h: &For) -> R {
        let t = self.scalar_local(h.var)?;
        self.want(
            t.is_int() && h.start.ty == t && h.end.ty == t,
            "a `for` over mismatched or non-integer bounds",
        )?;
        self.expr(&h.start)?;
        self.expr(&h.end)?;
        if let Some(s) = &h.step {
            self.want(s.ty == Scalar::Usize, "a `step_by` that is not a `usize`")?;
            self.expr(s)?;
        }
        self.check(&h.counts_below_half)?;
        self.check(&h.start_below_half)?;
        self.check(&h.counts_in_u32)?;
        self.check(&h.counts_in_u64)?;
        self.check(&h.counts_in_i32)
    }

    fn stmt(&self, s: &Stmt, in_loop: bool) -> R {
        match &s.kind {
            StmtKind::Let(l, e) => {
                // A private array's `let` gives every element the value.
                let local = &self.f.locals[*l];
                self.want(!local.is_work_group_array(), "a `let` of a local array")?;
                let t = local.ty;
                self.want(e.ty == t, "a `let` of another type")?;
                self.expr(e)
            }
            StmtKind::AssignLocal(l, op, e) => {
                let t = self.scalar_local(*l)?;
                self.assign(t, *op, e)?;
                self.expr(e)
            }
            StmtKind::Store {
                base,
                check,
                index_fits_i32,
                op,
                index,
                value,
                field,
            } => {
                let (elem, writable) = self.access(*base, field)?;
                self.want(writable, "a store to a read-only slice")?;
                self.want(index.ty == Scalar::Usize, "an index that is not a `usize`")?;
                self.assign(elem, *op, value)?;
                self.check(check)?;
                self.check(index_fits_i32)?;
                self.expr(index)?;
                self.expr(value)
            }
            StmtKind::CopyField {
                param,
                check,
                index_fits_i32,
                index,
                offset,
                array,
                to_slice,
            } => {
                let local = &self.f.locals[*array];
                let (t, len) = match (local.is_private_array(), local.array_len()) {
                    (true, Some(len)) => (local.ty, len),
                    _ => return self.bad("a field copy into a local that is not a private array"),
                };
                let Param::Structs { size, mutable } = self.f.params[*param] else {
                    return self.bad("a field copy on a parameter that is not a struct slice");
                };
                self.field_fits(size, t, *offset, len)?;
                self.want(mutable || !to_slice, "a field copy to a read-only slice")?;
                self.want(index.ty == Scalar::Usize, "an index that is not a `usize`")?;
                self.check(check)?;
                self.check(index_fits_i32)?;
                self.expr(index)
            }
            // An atomic store is a statement: its expression has no value to use.
            StmtKind::Expr(e) => self.expr_in(e, true),
            StmtKind::If(c, a, b) => {
                self.want(
                    c.ty == Scalar::Bool,
                    "an `if` condition that is not a `bool`",
                )?;
                self.expr(c)?;
                self.block(a, in_loop)?;
                self.block(b, in_loop)
            }
            StmtKind::While(c, b) => {
                self.want(
                    c.ty == Scalar::Bool,
                    "a `while` condition that is not a `bool`",
                )?;
                self.expr(c)?;
                self.block(b, true)
            }
            StmtKind::Loop(b) => self.block(b, true),
            StmtKind::For(h, b) => {
                self.for_header(h)?;
                self.block(b, true)
            }
            StmtKind::Break | StmtKind::Continue => self.want(in_loop, "`break` outside a loop"),
            StmtKind::Return(None) => {
                self.want(self.role == Role::Kernel, "a helper's empty return")
            }
            StmtKind::Return(Some(e)) => {
                self.want(Some(e.ty) == self.f.ret, "a return of another type")?;
                self.expr(e)
            }
            StmtKind::Barrier => self.want(
                self.group_ops,
                "a barrier outside a work-group kernel's body",
            ),
            StmtKind::Fence(order, _) => self.want(
                self.role == Role::Kernel && *order != MemoryOrder::Relaxed,
                "a fence in a helper, or a relaxed one",
            ),
            StmtKind::Fail(_) => {
                self.want(self.role == Role::Kernel, "a `kernel_fail` in a helper")
            }
        }
    }

    fn steps(&self, steps: &[Step]) -> R {
        for s in steps {
            match s {
                Step::Region(b) => self.block(b, false)?,
                Step::GroupLet(l, e) => {
                    let t = self.scalar_local(*l)?;
                    self.want(e.ty == t, "a group `let` of another type")?;
                    self.expr(e)?;
                }
                Step::Barrier => {}
                Step::Group { local, op, args } => {
                    let t = self.scalar_local(*local)?;
                    self.group(*op, t, args)?;
                    args.iter().try_for_each(|a| self.expr(a))?;
                }
                Step::SyncFor(h, body) => {
                    self.for_header(h)?;
                    self.steps(body)?;
                }
                Step::SubGroup { local, op, args } => {
                    let t = self.scalar_local(*local)?;
                    self.sub_group(*op, t, args)?;
                    args.iter().try_for_each(|a| self.expr(a))?;
                }
            }
        }
        Ok(())
    }

    /// A work-group collective's operands and result type `t`.
    fn group(&self, op: GroupOp, t: Scalar, args: &[Expr]) -> R {
        match op {
            GroupOp::Collective(c) => {
                self.want(args.len() == 1, "a group collective's operands")?;
                self.collective(c, t, &args[0])
            }
            GroupOp::Broadcast => self.want(
                args.len() == 2
                    && args[0].ty == t
                    && t.is_numeric()
                    && !t.is_half()
                    && args[1].ty == Scalar::Usize,
                "a group broadcast's operands",
            ),
        }
    }

    /// A reduction's, scan's or vote's value and result type `t`: votes take `bool`; the others
    /// numbers other than halves, integers for `& | ^`.
    fn collective(&self, c: Collective, t: Scalar, value: &Expr) -> R {
        let ok = if c.is_vote() {
            t == Scalar::Bool
        } else {
            t.is_numeric() && !t.is_half() && (!c.op().is_bitwise() || t.is_int())
        };
        self.want(ok && value.ty == t, "a collective's type")
    }

    fn sub_group(&self, op: SubGroupOp, t: Scalar, args: &[Expr]) -> R {
        if let SubGroupOp::Collective(c) = op {
            self.want(args.len() == 1, "a sub-group collective's operands")?;
            return self.collective(c, t, &args[0]);
        }
        let lanes = usize::from(op.takes_lane());
        self.want(
            args.len() == 1 + lanes
                && args[0].ty == t
                && t.is_numeric()
                && !t.is_half()
                && args[1..].iter().all(|l| l.ty == Scalar::Usize),
            "sub-group arguments",
        )
    }

    /// The type `op` gives operands of types `a` and `b`, which must be `t`.
    fn binary_type(&self, op: BinOp, t: Scalar, a: Scalar, b: Scalar) -> R {
        let ok = if op.is_comparison() {
            t == Scalar::Bool && a == b
        } else if op.is_logical() {
            t == Scalar::Bool && a == Scalar::Bool && b == Scalar::Bool
        } else if op.is_shift() {
            t == a && a.is_int() && b.is_int()
        } else if op.is_bitwise() {
            t == a && a == b && (a.is_int() || a == Scalar::Bool)
        } else {
            t == a && a == b && a.is_numeric()
        };
        self.want(ok, "operands of the wrong types")
    }

    fn expr(&self, e: &Expr) -> R {
        self.expr_in(e, false)
    }

    /// Checks `e`; `statement`: it is an expression statement (where an atomic store may be).
    fn expr_in(&self, e: &Expr, statement: bool) -> R {
        let t = e.ty;
        match &e.kind {
            ExprKind::Lit(bits) => {
                let fits = match t {
                    Scalar::Bool => *bits <= 1,
                    t if t.bits() == 32 => *bits <= u32::MAX as u64,
                    _ => true,
                };
                self.want(fits, "a literal wider than its type")
            }
            ExprKind::Local(l) => {
                let lt = self.scalar_local(*l)?;
                self.want(lt == t, "a local read at another type")
            }
            ExprKind::Param(i) => self.want(
                self.f.params[*i] == Param::Scalar(t),
                "a parameter read at another type",
            ),
            ExprKind::Load {
                base,
                check,
                index_fits_i32,
                index,
                field,
            } => {
                let (elem, _) = self.access(*base, field)?;
                self.want(elem == t, "an element read at another type")?;
                self.want(index.ty == Scalar::Usize, "an index that is not a `usize`")?;
                self.check(check)?;
                self.check(index_fits_i32)?;
                self.expr(index)
            }
            ExprKind::Len(base) => {
                let structs = matches!(base, Base::Param(i) if matches!(self.f.params[*i], Param::Structs { .. }));
                if !structs {
                    self.base(*base)?;
                }
                self.want(t == Scalar::Usize, "a length that is not a `usize`")
            }
            ExprKind::Unary(op, a) => {
                let ok = a.ty == t
                    && match op {
                        UnOp::Neg => t.is_signed() || t.is_float(),
                        UnOp::Not => t.is_int() || t == Scalar::Bool,
                    };
                self.want(ok, "a unary operator on the wrong type")?;
                self.expr(a)
            }
            ExprKind::Binary(op, a, b, no_wrap) => {
                self.binary_type(*op, t, a.ty, b.ty)?;
                let u32_arith =
                    t == Scalar::U32 && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul);
                self.want(
                    match no_wrap {
                        Check::Checked => true,
                        Check::Guard(_) => false,
                        _ => u32_arith,
                    },
                    "a no-signed-wrap fact on another operation, or by guard",
                )?;
                self.check(no_wrap)?;
                self.expr(a)?;
                self.expr(b)
            }
            // Halves convert as the `half` crate does: from `f32`, to `f32` and `f64`.
            ExprKind::Cast(a) if t.is_half() || a.ty.is_half() => {
                self.want(
                    t == a.ty
                        || (t.is_half() && a.ty == Scalar::F32)
                        || (a.ty.is_half() && matches!(t, Scalar::F32 | Scalar::F64)),
                    "a cast Rust does not allow",
                )?;
                self.expr(a)
            }
            ExprKind::Cast(a) => {
                self.want(
                    (t.is_numeric() && a.ty.is_numeric())
                        || t == a.ty
                        || (t.is_int() && a.ty == Scalar::Bool),
                    "a cast Rust does not allow",
                )?;
                self.expr(a)
            }
            ExprKind::Math(m, args) => {
                let a = args.first().map_or(t, |a| a.ty);
                let extra = m.fixed_arg().unwrap_or(a);
                let ok = args.len() == 1 + m.extra_args()
                    && args.iter().skip(1).all(|x| x.ty == extra)
                    && t == m.fixed_result().unwrap_or(a)
                    && ((a.is_float() && m.for_floats()) || (a.is_int() && m.for_ints()))
                    && !(*m == MathFn::Abs && a.is_unsigned());
                self.want(ok, "math arguments")?;
                args.iter().try_for_each(|a| self.expr(a))
            }
            ExprKind::Query(..) | ExprKind::SubGroupQuery(_) => {
                self.want(t == Scalar::Usize, "a query that is not a `usize`")
            }
            ExprKind::ConstParam(_) => self.bad("a const-generic template (instantiate it first)"),
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
                order,
                scope,
            } => {
                let (elem, writable) = self.base(*base)?;
                self.want(
                    (writable || *op == AtomicOp::Load)
                        && op.takes(elem)
                        && op.allows(*order)
                        && (statement || *op != AtomicOp::Store)
                        && match base {
                            Base::Param(_) => true,
                            Base::Local(l) => {
                                self.f.locals[*l].is_work_group_array()
                                    && *scope == MemoryScope::WorkGroup
                            }
                        }
                        && elem == t
                        && index.ty == Scalar::Usize
                        && values.len() == op.values()
                        && values.iter().all(|v| v.ty == t),
                    "an atomic's operands",
                )?;
                self.expr(index)?;
                values.iter().try_for_each(|v| self.expr(v))
            }
            ExprKind::Group(op, args) => {
                self.want(
                    self.group_ops,
                    "a group collective outside a work-group kernel's body",
                )?;
                self.group(*op, t, args)?;
                args.iter().try_for_each(|a| self.expr(a))
            }
            ExprKind::SubGroup(op, args) => {
                self.want(
                    self.group_ops,
                    "a sub-group collective outside a work-group kernel's body",
                )?;
                self.sub_group(*op, t, args)?;
                args.iter().try_for_each(|a| self.expr(a))
            }
            // (Argument types are checked against the callee where the program is linked.)
            // A slice argument is checked against the caller's parameters here and against
            // the callee's when the program is linked (`validate_call`).
            // An array argument likewise; it may be written (the parser keeps `&mut` to a
            // `let mut` private array), so it is passed once per call.
            ExprKind::Call(_, args) => args.iter().try_for_each(|a| match a.kind {
                ExprKind::SliceArg(p) => self.want(
                    matches!(self.f.params.get(p), Some(Param::Slice { elem, .. }) if *elem == a.ty)
                        && !args.iter().any(|b| {
                            !std::ptr::eq(a, b)
                                && b.kind == ExprKind::SliceArg(p)
                                && matches!(self.f.params[p], Param::Slice { mutable: true, .. })
                        }),
                    "a slice argument of another type, or a written slice passed twice",
                ),
                ExprKind::ArrayArg(l) => self.want(
                    matches!(self.f.locals.get(l), Some(Local { ty, array: Some(_), .. }) if *ty == a.ty)
                        && !args
                            .iter()
                            .any(|b| !std::ptr::eq(a, b) && b.kind == ExprKind::ArrayArg(l)),
                    "an array argument of another type, not an array, or passed twice",
                ),
                _ => self.expr(a),
            }),
            ExprKind::SliceArg(_) => self.bad("a slice argument outside a call"),
            ExprKind::ArrayArg(_) => self.bad("an array argument outside a call"),
            ExprKind::Select(c, a, b) => {
                self.want(
                    c.ty == Scalar::Bool && a.ty == t && b.ty == t,
                    "a select's types",
                )?;
                self.expr(c)?;
                self.expr(a)?;
                self.expr(b)
            }
        }
    }
}

/// Checks a kernel's guard list (`wire::decode_guards`) against its parameters: run-time
/// conditions over unsigned scalar parameters and slice lengths (indices were checked when
/// decoding).
pub fn validate_guards(guards: &[Bound], params: &[Param]) -> Result<(), WireError> {
    guards.iter().try_for_each(|g| bound_leaves(g, params))
}

/// Checks that a bound's parameter leaves name unsigned scalars and its lengths slices.
fn bound_leaves(b: &Bound, params: &[Param]) -> Result<(), WireError> {
    let mut bad = None;
    b.visit(&mut |n| {
        let ok = match *n {
            Bound::Param(i) => matches!(params.get(i), Some(Param::Scalar(t)) if t.is_unsigned()),
            Bound::Len(i) => params.get(i).is_some_and(Param::is_slice),
            Bound::Const(_) => false,
            _ => true,
        };
        if !ok && bad.is_none() {
            bad = Some(match n {
                Bound::Param(_) => "a bound over a parameter that is not an unsigned scalar",
                Bound::Const(_) => "a const-generic template (instantiate it first)",
                _ => "a bound over the length of a scalar",
            });
        }
    });
    match bad {
        None => Ok(()),
        Some(what) => Err(WireError {
            what: format!("invalid kernel IR: {what}"),
            at: 0,
        }),
    }
}

/// Checks that a call passes the callee's parameter types and returns its result type.
pub fn validate_call(
    args: &[Expr],
    ret: Scalar,
    caller: &[Param],
    callee: &Function,
) -> Result<(), WireError> {
    let ok = callee.ret == Some(ret)
        && args.len() == callee.params.len()
        && args.iter().zip(&callee.params).all(|(a, p)| match (&a.kind, *p) {
            // A slice: the same element type, written only where the caller may write it.
            (ExprKind::SliceArg(s), Param::Slice { elem, mutable }) => {
                matches!(caller.get(*s), Some(Param::Slice { elem: e, mutable: m }) if *e == elem && (*m || !mutable))
            }
            // An array: the same element type (checked in the caller) and any mutability.
            (ExprKind::ArrayArg(_), Param::Slice { elem, .. }) => a.ty == elem,
            (ExprKind::SliceArg(_) | ExprKind::ArrayArg(_), _)
            | (_, Param::Slice { .. } | Param::Structs { .. }) => false,
            (_, p) => p == Param::Scalar(a.ty),
        });
    if ok {
        Ok(())
    } else {
        Err(WireError {
            what: "invalid kernel IR: a call that does not match its helper".into(),
            at: 0,
        })
    }
}
