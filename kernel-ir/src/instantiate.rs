//! Const-generic kernels: the macro encodes a template whose expressions may read a const
//! parameter ([`ExprKind::ConstParam`]) and whose arrays may take one as their length
//! ([`Array::len_param`]); the runtime instantiates it with the launch type's values before it
//! validates or reads the IR. The template's facts and proofs were made without the values,
//! so they hold for every instance.

use crate::ir::*;
use crate::ty::Scalar;
use crate::validate::{MAX_LOCAL_ARRAY, MAX_PRIVATE_ARRAY};
use crate::wire::WireError;

/// `f` with const parameter `i` set to `values[i]` (its bits, sign-extended for signed
/// types): each [`ExprKind::ConstParam`] becomes a literal of its type, each array length its
/// parameter's value. A parameter without a value, a value its type cannot hold, or an array
/// length outside the language's limits is an error.
pub fn instantiate(f: &Function, values: &[u64]) -> Result<Function, WireError> {
    let bad = |what: String| WireError { what, at: 0 };
    let mut out = f.clone();
    for l in &mut out.locals {
        let Some(a) = &mut l.array else { continue };
        let Some(p) = a.len_param.take() else {
            continue;
        };
        let v = *values
            .get(p)
            .ok_or_else(|| bad(format!("no value for const parameter {p}")))?;
        let max = match a.space {
            ArraySpace::WorkGroup => MAX_LOCAL_ARRAY,
            ArraySpace::Private => MAX_PRIVATE_ARRAY,
        };
        if v == 0 || v > max as u64 {
            return Err(bad(format!(
                "an array length of {v} (const parameter {p}): 1 to {max}"
            )));
        }
        a.len = v as u32;
    }
    let mut err = None;
    let mut set = |e: &mut Expr| {
        if let ExprKind::ConstParam(p) = e.kind {
            match literal(e.ty, values.get(p).copied()) {
                Some(bits) => e.kind = ExprKind::Lit(bits),
                None => {
                    err.get_or_insert_with(|| {
                        bad(format!(
                            "const parameter {p} has no value that a `{}` holds",
                            e.ty.name()
                        ))
                    });
                }
            }
        }
    };
    stmts_mut(&mut out.body, &mut set);
    if let Some(steps) = &mut out.steps {
        steps_mut(steps, &mut set);
    }
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A literal's bits at type `t` for `value` (sign-extended for signed types), if `t` holds it.
fn literal(t: Scalar, value: Option<u64>) -> Option<u64> {
    let v = value?;
    match t {
        Scalar::U32 => (v <= u32::MAX as u64).then_some(v),
        Scalar::I32 => {
            let s = v as i64;
            (s >= i32::MIN as i64 && s <= i32::MAX as i64).then_some(v & 0xFFFF_FFFF)
        }
        Scalar::U64 | Scalar::Usize | Scalar::I64 => Some(v),
        _ => None,
    }
}

fn expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    match &mut e.kind {
        ExprKind::Load { index, .. } => expr_mut(index, f),
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => expr_mut(a, f),
        ExprKind::Binary(_, a, b, _) => {
            expr_mut(a, f);
            expr_mut(b, f);
        }
        ExprKind::Math(_, args)
        | ExprKind::Call(_, args)
        | ExprKind::SubGroup(_, args)
        | ExprKind::Group(_, args) => args.iter_mut().for_each(|a| expr_mut(a, f)),
        ExprKind::Atomic { index, values, .. } => {
            expr_mut(index, f);
            values.iter_mut().for_each(|a| expr_mut(a, f));
        }
        ExprKind::Select(c, a, b) => {
            expr_mut(c, f);
            expr_mut(a, f);
            expr_mut(b, f);
        }
        ExprKind::Lit(_)
        | ExprKind::Local(_)
        | ExprKind::Param(_)
        | ExprKind::Len(_)
        | ExprKind::Query(..)
        | ExprKind::SubGroupQuery(_)
        | ExprKind::ConstParam(_) => {}
    }
    f(e);
}

fn for_mut(h: &mut For, f: &mut dyn FnMut(&mut Expr)) {
    expr_mut(&mut h.start, f);
    expr_mut(&mut h.end, f);
    if let Some(s) = &mut h.step {
        expr_mut(s, f);
    }
}

fn stmts_mut(body: &mut [Stmt], f: &mut dyn FnMut(&mut Expr)) {
    for s in body {
        match &mut s.kind {
            StmtKind::Let(_, e)
            | StmtKind::AssignLocal(_, _, e)
            | StmtKind::Expr(e)
            | StmtKind::Return(Some(e)) => expr_mut(e, f),
            StmtKind::Store { index, value, .. } => {
                expr_mut(index, f);
                expr_mut(value, f);
            }
            StmtKind::If(c, a, b) => {
                expr_mut(c, f);
                stmts_mut(a, f);
                stmts_mut(b, f);
            }
            StmtKind::While(c, b) => {
                expr_mut(c, f);
                stmts_mut(b, f);
            }
            StmtKind::Loop(b) => stmts_mut(b, f),
            StmtKind::For(h, b) => {
                for_mut(h, f);
                stmts_mut(b, f);
            }
            StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Return(None)
            | StmtKind::Barrier
            | StmtKind::Fence(..) => {}
        }
    }
}

fn steps_mut(steps: &mut [Step], f: &mut dyn FnMut(&mut Expr)) {
    for s in steps {
        match s {
            Step::Region(stmts) => stmts_mut(stmts, f),
            Step::GroupLet(_, e) => expr_mut(e, f),
            Step::Barrier => {}
            Step::Group { args, .. } | Step::SubGroup { args, .. } => {
                args.iter_mut().for_each(|a| expr_mut(a, f))
            }
            Step::SyncFor(h, body) => {
                for_mut(h, f);
                steps_mut(body, f);
            }
        }
    }
}
