//! Const-generic kernels: the macro encodes a template whose expressions may read a const
//! parameter ([`ExprKind::ConstParam`]) and whose arrays may take one as their length
//! ([`Array::len_param`]); the runtime instantiates it with the launch type's values before it
//! validates or reads the IR. The template's facts and proofs were made without the values,
//! so they hold for every instance.

use crate::bound::{Bound, Check};
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
    let mut sub = Substitution { values, err: None };
    sub.stmts(&mut out.body);
    if let Some(steps) = &mut out.steps {
        sub.steps(steps);
    }
    match sub.err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A template's guard list (`wire::decode_guards`) for the values: each [`Bound::Const`]
/// becomes its number.
pub fn instantiate_guards(guards: &[Bound], values: &[u64]) -> Result<Vec<Bound>, WireError> {
    let mut sub = Substitution { values, err: None };
    let out = guards.iter().map(|g| sub.bound(g)).collect();
    match sub.err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Replaces const parameters with values, remembering the first one it has no value for.
struct Substitution<'a> {
    values: &'a [u64],
    err: Option<WireError>,
}

impl Substitution<'_> {
    fn value(&mut self, p: usize) -> u64 {
        match self.values.get(p) {
            Some(v) => *v,
            None => {
                self.err.get_or_insert_with(|| WireError {
                    what: format!("no value for const parameter {p}"),
                    at: 0,
                });
                0
            }
        }
    }

    fn bound(&mut self, b: &Bound) -> Bound {
        let mut sub = |x: &Bound| Box::new(self.bound(x));
        match b {
            Bound::Const(p) => Bound::Num(self.value(*p)),
            Bound::Fn(f, a, c) => {
                let a = sub(a);
                Bound::op(*f, *a, *sub(c))
            }
            Bound::WrapLo(a, b2, c) => {
                let (a, b2) = (sub(a), sub(b2));
                Bound::WrapLo(a, b2, sub(c))
            }
            Bound::Cmp(op, a, c) => {
                let a = sub(a);
                Bound::Cmp(*op, a, sub(c))
            }
            Bound::Cond(a, b2, c) => {
                let (a, b2) = (sub(a), sub(b2));
                Bound::Cond(a, b2, sub(c))
            }
            leaf => leaf.clone(),
        }
    }

    /// A check with its bound's const parameters replaced; a bound that is then a number
    /// decides it (as the macro decides a literal's): proved when it holds, else checked.
    fn check(&mut self, c: &mut Check) {
        let folded = match c {
            Check::When(b) | Check::Guard(b) => {
                *b = self.bound(b);
                b.eval(&|_| None)
            }
            Check::Checked | Check::Proved => None,
        };
        match folded {
            Some(0) => *c = Check::Checked,
            Some(_) => *c = Check::Proved,
            None => {}
        }
    }

    /// An element access's checks, index and field (a load's or a store's).
    fn access(
        &mut self,
        check: &mut Check,
        index_fits_i32: &mut Check,
        index: &mut Expr,
        field: &mut Option<Box<Field>>,
    ) {
        self.check(check);
        self.check(index_fits_i32);
        self.expr(index);
        if let Some(item) = field.as_mut().and_then(|x| x.item.as_mut()) {
            self.check(&mut item.check);
            self.expr(&mut item.index);
        }
    }

    fn expr(&mut self, e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Load {
                index,
                check,
                index_fits_i32,
                field,
                ..
            } => self.access(check, index_fits_i32, index, field),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => self.expr(a),
            ExprKind::Binary(_, a, b, fact) => {
                self.check(fact);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Math(_, args)
            | ExprKind::Call(_, args)
            | ExprKind::SubGroup(_, args)
            | ExprKind::Group(_, args) => args.iter_mut().for_each(|a| self.expr(a)),
            ExprKind::Atomic { index, values, .. } => {
                self.expr(index);
                values.iter_mut().for_each(|a| self.expr(a));
            }
            ExprKind::Select(c, a, b) => {
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::ConstParam(p) => {
                let p = *p;
                let v = self.value(p);
                match literal(e.ty, v) {
                    Some(bits) => e.kind = ExprKind::Lit(bits),
                    None => {
                        self.err.get_or_insert_with(|| WireError {
                            what: format!(
                                "const parameter {p} has no value that a `{}` holds",
                                e.ty.name()
                            ),
                            at: 0,
                        });
                    }
                }
            }
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Param(_)
            | ExprKind::Len(_)
            | ExprKind::Query(..)
            | ExprKind::SubGroupQuery(_)
            | ExprKind::SliceArg(_)
            | ExprKind::ArrayArg(_) => {}
        }
    }

    fn for_header(&mut self, h: &mut For) {
        self.expr(&mut h.start);
        self.expr(&mut h.end);
        if let Some(s) = &mut h.step {
            self.expr(s);
        }
        for c in [
            &mut h.counts_below_half,
            &mut h.start_below_half,
            &mut h.counts_in_u32,
            &mut h.counts_in_u64,
            &mut h.counts_in_i32,
        ] {
            self.check(c);
        }
    }

    fn stmts(&mut self, body: &mut [Stmt]) {
        for s in body {
            match &mut s.kind {
                StmtKind::Let(_, e)
                | StmtKind::AssignLocal(_, _, e)
                | StmtKind::Expr(e)
                | StmtKind::Return(Some(e)) => self.expr(e),
                StmtKind::Store {
                    index,
                    value,
                    check,
                    index_fits_i32,
                    field,
                    ..
                } => {
                    // (The value first, as back ends compute it; the order is immaterial here.)
                    self.expr(value);
                    self.access(check, index_fits_i32, index, field);
                }
                StmtKind::CopyField {
                    index,
                    check,
                    index_fits_i32,
                    ..
                } => self.access(check, index_fits_i32, index, &mut None),
                StmtKind::If(c, a, b) => {
                    self.expr(c);
                    self.stmts(a);
                    self.stmts(b);
                }
                StmtKind::While(c, b) => {
                    self.expr(c);
                    self.stmts(b);
                }
                StmtKind::Loop(b) => self.stmts(b),
                StmtKind::For(h, b) => {
                    self.for_header(h);
                    self.stmts(b);
                }
                StmtKind::Break
                | StmtKind::Continue
                | StmtKind::Return(None)
                | StmtKind::Barrier
                | StmtKind::Fence(..)
                | StmtKind::Fail(_) => {}
            }
        }
    }

    fn steps(&mut self, steps: &mut [Step]) {
        for s in steps {
            match s {
                Step::Region(stmts) => self.stmts(stmts),
                Step::GroupLet(_, e) => self.expr(e),
                Step::Barrier => {}
                Step::Group { args, .. } | Step::SubGroup { args, .. } => {
                    args.iter_mut().for_each(|a| self.expr(a))
                }
                Step::SyncFor(h, body) => {
                    self.for_header(h);
                    self.steps(body);
                }
            }
        }
    }
}

/// A literal's bits at type `t` for `value` (sign-extended for signed types), if `t` holds it.
fn literal(t: Scalar, v: u64) -> Option<u64> {
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
