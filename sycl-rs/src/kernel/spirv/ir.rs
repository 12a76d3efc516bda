//! The checked IR of a kernel or helper, decoded from the words `#[sycl::kernel]` and
//! `#[sycl::kernel_fn]` emit (`sycl-macros/src/encode.rs` writes them; this mirrors it).
//!
//! Decoding validates every index (locals, parameters, helpers) and every tag, so the
//! emitter can index freely: malformed words are an `Errc::Build` error, never a panic.

use crate::kernel::__rt::ScalarTy;
use crate::{Errc, Error, Result};

const MAGIC: u32 = 0x5359_4952;
const VERSION: u32 = 5;
const NONE: u32 = 0xFFFF_FFFF;

/// A kernel or helper parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Param {
    Scalar(ScalarTy),
    Slice { elem: ScalarTy, mutable: bool },
}

/// A local variable, or a work-group local array of `array` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Local {
    pub ty: ScalarTy,
    pub array: Option<u32>,
}

/// What an element access reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    Param(usize),
    Local(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MathFn {
    Sqrt,
    Exp,
    Ln,
    Sin,
    Cos,
    Powf,
    MulAdd,
    Min,
    Max,
    Abs,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Query {
    GlobalId,
    LocalId,
    GroupId,
    GlobalRange,
    LocalRange,
    GroupRange,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    FetchAdd,
    FetchMin,
    FetchMax,
    CompareExchange,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Min,
    Max,
}

/// Sub-group queries (`usize`; sub-groups are one-dimensional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubGroupQuery {
    LocalId,
    LocalRange,
    MaxLocalRange,
    Id,
    Range,
}

/// Sub-group collectives (`spec/kernels.md`); all but the reductions take a lane (delta,
/// mask) after the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubGroupOp {
    Broadcast,
    Shuffle,
    ShiftLeft,
    ShiftRight,
    ShuffleXor,
    Reduce(Reduce),
}

/// An expression and its (resolved) type.
#[derive(Clone, Debug)]
pub(crate) struct Expr {
    pub ty: ScalarTy,
    pub kind: ExprKind,
}

#[derive(Clone, Debug)]
pub(crate) enum ExprKind {
    /// The value's bits at the expression's type.
    Lit(u64),
    Local(usize),
    Param(usize),
    Load {
        base: Base,
        check: Check,
        /// Whether the index can be computed in 32-bit signed arithmetic.
        narrow: Check,
        index: Box<Expr>,
    },
    Len(Base),
    Unary(UnOp, Box<Expr>),
    /// The last field: for `u32` `+ - *`, whether the operation has no signed overflow
    /// either (its operands and result stay below 2^31; never `Guard`); `Checked` for any
    /// other.
    Binary(BinOp, Box<Expr>, Box<Expr>, Check),
    /// To the expression's type.
    Cast(Box<Expr>),
    Math(MathFn, Vec<Expr>),
    Query(Query, u8),
    Atomic {
        op: AtomicOp,
        base: Base,
        index: Box<Expr>,
        values: Vec<Expr>,
    },
    /// A group reduction of its value: only in the body of a work-group kernel, which is
    /// emitted from its steps (`Step::Reduce`).
    Reduce(Box<Expr>),
    SubGroupQuery(SubGroupQuery),
    /// A sub-group collective's arguments: as `Reduce`, emitted from its step
    /// (`Step::SubGroup`).
    SubGroup(Vec<Expr>),
    /// Helper `k` of the caller's helper list.
    Call(usize, Vec<Expr>),
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// Whether an element access is checked (`sycl-macros/src/bounds.rs` decides).
#[derive(Clone, Debug)]
pub(crate) enum Check {
    Checked,
    /// In bounds (the user's `unsafe`, or proved for every work-group size).
    Proved,
    /// In bounds when this holds for the work-group size the module is built for.
    When(Bound),
    /// In bounds when this holds at run time (the same in every work-item of a launch).
    Guard(Bound),
}

/// A `sycl_b*` function of the bounds conditions (saturating `u64` arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoundFn {
    Add,
    Mul,
    Min,
    Max,
    Sub,
    Div,
    /// `wrap_lo(hi, lo, max)`: 0 when `hi >= max` (the value may have wrapped), else `lo`.
    WrapLo,
}

/// A comparison in a bounds condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoundCmp {
    Lt,
    Le,
    Ge,
    Gt,
}

/// A bounds condition or value (`u64`; comparisons are 0 or 1).
#[derive(Clone, Debug)]
pub(crate) enum Bound {
    Num(u64),
    LocalRange(u8),
    GroupRange(u8),
    GlobalRange(u8),
    /// A scalar parameter (unsigned).
    Param(usize),
    /// A slice parameter's length.
    Len(usize),
    Fn(BoundFn, Vec<Bound>),
    Cmp(BoundCmp, Box<Bound>, Box<Bound>),
    Cond(Box<Bound>, Box<Bound>, Box<Bound>),
}

impl Bound {
    /// The value (comparisons 0 or 1) with the `sycl_b*` functions of `prelude_bounds.h`
    /// (saturating `u64` arithmetic); `leaf` gives the ranges, parameters and lengths it
    /// knows. `None` when a leaf is unknown.
    pub(crate) fn eval(&self, leaf: &dyn Fn(&Bound) -> Option<u64>) -> Option<u64> {
        match self {
            Bound::Num(v) => Some(*v),
            Bound::LocalRange(_)
            | Bound::GroupRange(_)
            | Bound::GlobalRange(_)
            | Bound::Param(_)
            | Bound::Len(_) => leaf(self),
            Bound::Fn(BoundFn::WrapLo, a) => {
                let (hi, lo, max) = (a[0].eval(leaf)?, a[1].eval(leaf)?, a[2].eval(leaf)?);
                Some(if hi >= max { 0 } else { lo })
            }
            Bound::Fn(f, a) => {
                let (x, y) = (a[0].eval(leaf)?, a[1].eval(leaf)?);
                Some(match f {
                    BoundFn::Add => x.saturating_add(y),
                    BoundFn::Mul => x.saturating_mul(y),
                    BoundFn::Min => x.min(y),
                    BoundFn::Max => x.max(y),
                    BoundFn::Sub => x.saturating_sub(y),
                    BoundFn::Div => x.checked_div(y).unwrap_or(x),
                    BoundFn::WrapLo => unreachable!("above"),
                })
            }
            Bound::Cmp(op, a, b) => {
                let (x, y) = (a.eval(leaf)?, b.eval(leaf)?);
                Some(match op {
                    BoundCmp::Lt => x < y,
                    BoundCmp::Le => x <= y,
                    BoundCmp::Ge => x >= y,
                    BoundCmp::Gt => x > y,
                } as u64)
            }
            Bound::Cond(c, a, b) => match c.eval(leaf)? {
                0 => b.eval(leaf),
                _ => a.eval(leaf),
            },
        }
    }
}

/// The run-time bounds guards of a kernel's accesses (`Check::Guard`), each once.
pub(crate) fn guards(f: &Function) -> Vec<Bound> {
    let mut out: Vec<Bound> = Vec::new();
    for_each_check(&f.body, &mut |c| {
        if let Check::Guard(b) = c {
            if !out.iter().any(|o| format!("{o:?}") == format!("{b:?}")) {
                out.push(b.clone());
            }
        }
    });
    out
}

/// A `for` loop's header.
#[derive(Clone, Debug)]
pub(crate) struct For {
    pub var: usize,
    pub start: Expr,
    pub end: Expr,
    pub inclusive: bool,
    pub step: Option<Expr>,
    /// Whether it can count with `v += step`, every value below half its type's range (the
    /// latch then compares signed).
    pub simple: Check,
    /// Whether its start is below half the range too (`u32` loops only): the test at the top
    /// may then compare signed.
    pub start_below: Check,
}

#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    Let(usize, Expr),
    AssignLocal(usize, Option<BinOp>, Expr),
    Store {
        base: Base,
        check: Check,
        /// As `ExprKind::Load`'s.
        narrow: Check,
        op: Option<BinOp>,
        index: Expr,
        value: Expr,
    },
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    While(Expr, Vec<Stmt>),
    Loop(Vec<Stmt>),
    For(For, Vec<Stmt>),
    Break,
    Continue,
    Return(Option<Expr>),
    Barrier,
}

/// A work-group kernel cut at its synchronisation points (`sycl-macros/src/analyze.rs`).
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Region(Vec<Stmt>),
    GroupLet(usize, Expr),
    Barrier,
    Reduce {
        local: usize,
        op: Reduce,
        value: Expr,
    },
    SyncFor(Box<For>, Vec<Step>),
    /// `let local = <sub-group collective>(args);`
    SubGroup {
        local: usize,
        op: SubGroupOp,
        args: Vec<Expr>,
    },
}

/// A decoded kernel or helper.
#[derive(Clone, Debug)]
pub(crate) struct Function {
    pub params: Vec<Param>,
    pub ret: Option<ScalarTy>,
    pub locals: Vec<Local>,
    pub body: Vec<Stmt>,
    /// Kernels that run as work-groups: the body as steps.
    pub steps: Option<Vec<Step>>,
}

struct Reader<'a> {
    words: &'a [u32],
    at: usize,
    /// Counts to check indices against, once known.
    params: usize,
    locals: usize,
    helpers: usize,
}

fn bad(what: &str) -> Error {
    Error::new(
        Errc::Build,
        format!("the encoded kernel IR is malformed ({what}): a bug of #[sycl::kernel], please report it"),
    )
}

fn ty(code: u32) -> Result<ScalarTy> {
    Ok(match code {
        0 => ScalarTy::Bool,
        1 => ScalarTy::I32,
        2 => ScalarTy::U32,
        3 => ScalarTy::I64,
        4 => ScalarTy::U64,
        5 => ScalarTy::Usize,
        6 => ScalarTy::F32,
        7 => ScalarTy::F64,
        _ => return Err(bad("type")),
    })
}

fn binop(code: u32) -> Result<BinOp> {
    use BinOp::*;
    const ALL: [BinOp; 18] = [
        Add, Sub, Mul, Div, Rem, BitAnd, BitOr, BitXor, Shl, Shr, Eq, Ne, Lt, Le, Gt, Ge, And, Or,
    ];
    ALL.get(code as usize)
        .copied()
        .ok_or_else(|| bad("operator"))
}

fn reduce(code: u32) -> Result<Reduce> {
    [Reduce::Sum, Reduce::Min, Reduce::Max]
        .get(code as usize)
        .copied()
        .ok_or_else(|| bad("reduction"))
}

/// A sub-group collective's op code and its arguments (the value, a number; then a `usize`
/// lane where the op takes one).
fn sub_group(code: u32, args: &[Expr]) -> Result<SubGroupOp> {
    use SubGroupOp::*;
    let op = match code {
        0 => Broadcast,
        1 => Shuffle,
        2 => ShiftLeft,
        3 => ShiftRight,
        4 => ShuffleXor,
        _ => Reduce(reduce(code.wrapping_sub(5))?),
    };
    let lanes = usize::from(!matches!(op, Reduce(_)));
    let ok = args.len() == 1 + lanes
        && args[0].ty != ScalarTy::Bool
        && args[1..].iter().all(|l| l.ty == ScalarTy::Usize);
    if !ok {
        return Err(bad("sub-group arguments"));
    }
    Ok(op)
}

impl Reader<'_> {
    fn word(&mut self) -> Result<u32> {
        let w = *self.words.get(self.at).ok_or_else(|| bad("truncated"))?;
        self.at += 1;
        Ok(w)
    }

    fn count(&mut self) -> Result<usize> {
        let n = self.word()? as usize;
        // Every item takes at least one word: a larger count is malformed (and would make a
        // huge allocation).
        if n > self.words.len() - self.at {
            return Err(bad("count"));
        }
        Ok(n)
    }

    fn index(&mut self, limit: usize, what: &str) -> Result<usize> {
        let i = self.word()? as usize;
        if i >= limit {
            return Err(bad(what));
        }
        Ok(i)
    }

    fn local(&mut self) -> Result<usize> {
        self.index(self.locals, "local")
    }

    fn flag(&mut self) -> Result<bool> {
        match self.word()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad("flag")),
        }
    }

    fn base(&mut self) -> Result<Base> {
        match self.word()? {
            0 => Ok(Base::Param(self.index(self.params, "parameter")?)),
            1 => Ok(Base::Local(self.local()?)),
            _ => Err(bad("base")),
        }
    }

    fn check(&mut self) -> Result<Check> {
        Ok(match self.word()? {
            0 => Check::Checked,
            1 => Check::Proved,
            2 => Check::When(self.bound(0)?),
            3 => Check::Guard(self.bound(0)?),
            _ => return Err(bad("check")),
        })
    }

    fn dim(&mut self) -> Result<u8> {
        match self.word()? {
            d @ 0..=2 => Ok(d as u8),
            _ => Err(bad("dimension")),
        }
    }

    fn bound(&mut self, depth: usize) -> Result<Bound> {
        if depth > 256 {
            return Err(bad("bound nesting"));
        }
        let sub = |r: &mut Self| r.bound(depth + 1).map(Box::new);
        Ok(match self.word()? {
            0 => {
                let lo = self.word()? as u64;
                Bound::Num(lo | (self.word()? as u64) << 32)
            }
            1 => Bound::LocalRange(self.dim()?),
            2 => Bound::GroupRange(self.dim()?),
            3 => Bound::GlobalRange(self.dim()?),
            4 => Bound::Param(self.index(self.params, "parameter")?),
            5 => Bound::Len(self.index(self.params, "parameter")?),
            6 => {
                use BoundFn::*;
                let f = *[Add, Mul, Min, Max, Sub, Div, WrapLo]
                    .get(self.word()? as usize)
                    .ok_or_else(|| bad("bound function"))?;
                let n = if f == WrapLo { 3 } else { 2 };
                let args = (0..n)
                    .map(|_| self.bound(depth + 1))
                    .collect::<Result<Vec<_>>>()?;
                Bound::Fn(f, args)
            }
            7 => {
                use BoundCmp::*;
                let op = *[Lt, Le, Ge, Gt]
                    .get(self.word()? as usize)
                    .ok_or_else(|| bad("bound comparison"))?;
                let a = sub(self)?;
                Bound::Cmp(op, a, sub(self)?)
            }
            8 => {
                let c = sub(self)?;
                let a = sub(self)?;
                Bound::Cond(c, a, sub(self)?)
            }
            _ => return Err(bad("bound")),
        })
    }

    fn opt_op(&mut self) -> Result<Option<BinOp>> {
        match self.word()? {
            NONE => Ok(None),
            code => binop(code).map(Some),
        }
    }

    fn block(&mut self) -> Result<Vec<Stmt>> {
        let n = self.count()?;
        (0..n).map(|_| self.stmt()).collect()
    }

    fn for_header(&mut self) -> Result<For> {
        let var = self.local()?;
        let start = self.expr()?;
        let end = self.expr()?;
        let inclusive = self.flag()?;
        let step = if self.flag()? {
            Some(self.expr()?)
        } else {
            None
        };
        let simple = self.check()?;
        let start_below = self.check()?;
        Ok(For {
            var,
            start,
            end,
            inclusive,
            step,
            simple,
            start_below,
        })
    }

    fn stmt(&mut self) -> Result<Stmt> {
        Ok(match self.word()? {
            0 => {
                let l = self.local()?;
                Stmt::Let(l, self.expr()?)
            }
            // A local array coming into scope: nothing to do.
            1 => Stmt::Expr(Expr {
                ty: ScalarTy::Bool,
                kind: ExprKind::Lit(0),
            }),
            2 => {
                let l = self.local()?;
                let op = self.opt_op()?;
                Stmt::AssignLocal(l, op, self.expr()?)
            }
            3 => {
                let base = self.base()?;
                let check = self.check()?;
                let narrow = self.check()?;
                let op = self.opt_op()?;
                let index = self.expr()?;
                let value = self.expr()?;
                Stmt::Store {
                    base,
                    check,
                    narrow,
                    op,
                    index,
                    value,
                }
            }
            4 => Stmt::Expr(self.expr()?),
            5 => {
                let c = self.expr()?;
                let a = self.block()?;
                Stmt::If(c, a, self.block()?)
            }
            6 => {
                let c = self.expr()?;
                Stmt::While(c, self.block()?)
            }
            7 => Stmt::Loop(self.block()?),
            8 => {
                let h = self.for_header()?;
                Stmt::For(h, self.block()?)
            }
            9 => Stmt::Break,
            10 => Stmt::Continue,
            11 => Stmt::Return(None),
            12 => Stmt::Return(Some(self.expr()?)),
            13 => Stmt::Barrier,
            _ => return Err(bad("statement")),
        })
    }

    fn steps(&mut self) -> Result<Vec<Step>> {
        let n = self.count()?;
        (0..n)
            .map(|_| {
                Ok(match self.word()? {
                    0 => Step::Region(self.block()?),
                    1 => {
                        let l = self.local()?;
                        Step::GroupLet(l, self.expr()?)
                    }
                    2 => Step::Barrier,
                    3 => {
                        let local = self.local()?;
                        let op = reduce(self.word()?)?;
                        Step::Reduce {
                            local,
                            op,
                            value: self.expr()?,
                        }
                    }
                    4 => {
                        let h = self.for_header()?;
                        Step::SyncFor(Box::new(h), self.steps()?)
                    }
                    5 => {
                        let local = self.local()?;
                        let code = self.word()?;
                        let args = self.exprs()?;
                        let op = sub_group(code, &args)?;
                        Step::SubGroup { local, op, args }
                    }
                    _ => return Err(bad("step")),
                })
            })
            .collect()
    }

    fn exprs(&mut self) -> Result<Vec<Expr>> {
        let n = self.count()?;
        (0..n).map(|_| self.expr()).collect()
    }

    fn expr(&mut self) -> Result<Expr> {
        let tag = self.word()?;
        let t = ty(self.word()?)?;
        let b = |e: Expr| Box::new(e);
        let kind = match tag {
            0 => {
                let lo = self.word()? as u64;
                let hi = self.word()? as u64;
                ExprKind::Lit(lo | hi << 32)
            }
            1 => ExprKind::Local(self.local()?),
            2 => ExprKind::Param(self.index(self.params, "parameter")?),
            3 => {
                let base = self.base()?;
                let check = self.check()?;
                let narrow = self.check()?;
                ExprKind::Load {
                    base,
                    check,
                    narrow,
                    index: b(self.expr()?),
                }
            }
            4 => ExprKind::Len(self.base()?),
            5 => {
                let op = match self.word()? {
                    0 => UnOp::Neg,
                    1 => UnOp::Not,
                    _ => return Err(bad("unary operator")),
                };
                ExprKind::Unary(op, b(self.expr()?))
            }
            6 => {
                let op = binop(self.word()?)?;
                let no_wrap =
                    if t == ScalarTy::U32 && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
                        match self.check()? {
                            // The macro never takes a guard for this (`Bounds::no_signed_wrap`),
                            // and the kernel's guards would not include it.
                            Check::Guard(_) => return Err(bad("a no-signed-wrap proof by guard")),
                            c => c,
                        }
                    } else {
                        Check::Checked
                    };
                let x = self.expr()?;
                ExprKind::Binary(op, b(x), b(self.expr()?), no_wrap)
            }
            7 => ExprKind::Cast(b(self.expr()?)),
            8 => {
                use MathFn::*;
                const ALL: [MathFn; 12] = [
                    Sqrt, Exp, Ln, Sin, Cos, Powf, MulAdd, Min, Max, Abs, Floor, Ceil,
                ];
                let m = *ALL
                    .get(self.word()? as usize)
                    .ok_or_else(|| bad("math function"))?;
                let args = self.exprs()?;
                let want = match m {
                    Powf | Min | Max => 2,
                    MulAdd => 3,
                    _ => 1,
                };
                if args.len() != want {
                    return Err(bad("math arguments"));
                }
                ExprKind::Math(m, args)
            }
            9 => {
                use Query::*;
                const ALL: [Query; 6] = [
                    GlobalId,
                    LocalId,
                    GroupId,
                    GlobalRange,
                    LocalRange,
                    GroupRange,
                ];
                let q = *ALL.get(self.word()? as usize).ok_or_else(|| bad("query"))?;
                let d = self.word()?;
                if d > 2 {
                    return Err(bad("dimension"));
                }
                ExprKind::Query(q, d as u8)
            }
            10 => {
                use AtomicOp::*;
                let op = *[FetchAdd, FetchMin, FetchMax, CompareExchange]
                    .get(self.word()? as usize)
                    .ok_or_else(|| bad("atomic"))?;
                let base = self.base()?;
                let index = b(self.expr()?);
                let values = self.exprs()?;
                if values.len() != if op == CompareExchange { 2 } else { 1 } {
                    return Err(bad("atomic arguments"));
                }
                ExprKind::Atomic {
                    op,
                    base,
                    index,
                    values,
                }
            }
            11 => {
                reduce(self.word()?)?;
                ExprKind::Reduce(b(self.expr()?))
            }
            12 => {
                let k = self.index(self.helpers, "helper")?;
                ExprKind::Call(k, self.exprs()?)
            }
            13 => {
                let c = self.expr()?;
                let x = self.expr()?;
                ExprKind::Select(b(c), b(x), b(self.expr()?))
            }
            14 => {
                use SubGroupQuery::*;
                let q = *[LocalId, LocalRange, MaxLocalRange, Id, Range]
                    .get(self.word()? as usize)
                    .ok_or_else(|| bad("sub-group query"))?;
                ExprKind::SubGroupQuery(q)
            }
            15 => {
                let code = self.word()?;
                let args = self.exprs()?;
                sub_group(code, &args)?;
                ExprKind::SubGroup(args)
            }
            _ => return Err(bad("expression")),
        };
        Ok(Expr { ty: t, kind })
    }
}

/// Decodes a kernel's C guard (`DefinitionParts::guard`: a count, then that many bounds over
/// its `params` parameters); `None` when it has none.
pub(crate) fn decode_guard(words: &[u32], params: usize) -> Result<Option<Vec<Bound>>> {
    if words.is_empty() {
        return Ok(None);
    }
    let mut r = Reader {
        words,
        at: 0,
        params,
        locals: 0,
        helpers: 0,
    };
    let n = r.count()?;
    let guard = (0..n).map(|_| r.bound(0)).collect::<Result<Vec<_>>>()?;
    if r.at != words.len() || guard.is_empty() {
        return Err(bad("guard"));
    }
    Ok(Some(guard))
}

/// Decodes a kernel (`kernel: true`: the group flag and steps follow the body) or a helper
/// that calls `helpers` others.
pub(crate) fn decode(words: &[u32], kernel: bool, helpers: usize) -> Result<Function> {
    let mut r = Reader {
        words,
        at: 0,
        params: 0,
        locals: 0,
        helpers,
    };
    if r.word()? != MAGIC || r.word()? != VERSION {
        return Err(bad("header"));
    }
    let n = r.count()?;
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = r.word()?;
        let t = ty(r.word()?)?;
        let mutable = r.flag()?;
        params.push(match kind {
            0 => Param::Scalar(t),
            1 => Param::Slice { elem: t, mutable },
            _ => return Err(bad("parameter")),
        });
    }
    r.params = params.len();
    let ret = match r.word()? {
        NONE => None,
        code => Some(ty(code)?),
    };
    let n = r.count()?;
    let mut locals = Vec::with_capacity(n);
    for _ in 0..n {
        let t = ty(r.word()?)?;
        let len = r.word()?;
        locals.push(Local {
            ty: t,
            array: (len > 0).then_some(len),
        });
    }
    r.locals = locals.len();
    let body = r.block()?;
    let steps = if kernel && r.flag()? {
        Some(r.steps()?)
    } else {
        None
    };
    if r.at != words.len() {
        return Err(bad("trailing words"));
    }
    let f = Function {
        params,
        ret,
        locals,
        body,
        steps,
    };
    Ok(f)
}

/// Calls `f` with the check of every element access in `body`.
pub(crate) fn for_each_check<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Check)) {
    fn expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Check)) {
        match &e.kind {
            ExprKind::Load {
                check,
                narrow,
                index,
                ..
            } => {
                f(check);
                f(narrow);
                expr(index, f);
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Reduce(a) => expr(a, f),
            // (The no-signed-wrap proof is never a guard.)
            ExprKind::Binary(_, a, b, _) => {
                expr(a, f);
                expr(b, f);
            }
            ExprKind::Math(_, args) | ExprKind::Call(_, args) | ExprKind::SubGroup(args) => {
                args.iter().for_each(|a| expr(a, f))
            }
            ExprKind::Atomic { index, values, .. } => {
                expr(index, f);
                values.iter().for_each(|a| expr(a, f));
            }
            ExprKind::Select(c, a, b) => {
                expr(c, f);
                expr(a, f);
                expr(b, f);
            }
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Param(_)
            | ExprKind::Len(_)
            | ExprKind::Query(..)
            | ExprKind::SubGroupQuery(_) => {}
        }
    }
    for s in body {
        match s {
            Stmt::Let(_, e) | Stmt::AssignLocal(_, _, e) | Stmt::Expr(e) => expr(e, f),
            Stmt::Return(e) => e.iter().for_each(|e| expr(e, f)),
            Stmt::Store {
                check,
                narrow,
                index,
                value,
                ..
            } => {
                f(check);
                f(narrow);
                expr(index, f);
                expr(value, f);
            }
            Stmt::If(c, a, b) => {
                expr(c, f);
                for_each_check(a, f);
                for_each_check(b, f);
            }
            Stmt::While(c, b) => {
                expr(c, f);
                for_each_check(b, f);
            }
            Stmt::Loop(b) => for_each_check(b, f),
            Stmt::For(h, b) => {
                f(&h.simple);
                f(&h.start_below);
                expr(&h.start, f);
                expr(&h.end, f);
                h.step.iter().for_each(|e| expr(e, f));
                for_each_check(b, f);
            }
            Stmt::Break | Stmt::Continue | Stmt::Barrier => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Words of the bound grammar (`sycl-macros/src/encode.rs`, `cbound`).
    const MAX: [u32; 3] = [0, u32::MAX, u32::MAX];
    fn num(v: u64) -> [u32; 3] {
        [0, v as u32, (v >> 32) as u32]
    }

    /// A launch: global range [64, 32], 8 groups along SYCL dimension 0 of local size 8,
    /// parameter 0 a scalar `p`, parameter 1 a slice of `len` elements.
    fn eval_with(g: &Bound, p: u64, len: u64) -> Option<u64> {
        g.eval(&|leaf| match *leaf {
            Bound::GlobalRange(0) => Some(64),
            Bound::GlobalRange(1) => Some(32),
            Bound::LocalRange(0) => Some(8),
            Bound::GroupRange(0) => Some(8),
            Bound::Param(0) => Some(p),
            Bound::Len(1) => Some(len),
            _ => None,
        })
    }

    fn guard(words: &[u32]) -> Vec<Bound> {
        decode_guard(words, 2).expect("decodes").expect("a guard")
    }

    #[test]
    fn no_words_is_no_guard() {
        assert!(decode_guard(&[], 2).unwrap().is_none());
    }

    #[test]
    fn range_against_a_length() {
        // global_range(0) <= len(p1)
        let g = guard(&[1, 7, 1, 3, 0, 5, 1]);
        assert_eq!(g.len(), 1);
        assert_eq!(eval_with(&g[0], 0, 64), Some(1));
        assert_eq!(eval_with(&g[0], 0, 63), Some(0));
    }

    #[test]
    fn rows_of_a_tiled_kernel() {
        // (group_range(0) - 1) * local_range(0) + local_range(0) - 1 < len(p1): 63 < len
        let mut w = vec![1, 7, 0, 6, 0, 6, 1, 6, 4, 2, 0];
        w.extend(num(1));
        w.extend([1, 0, 6, 4, 1, 0]);
        w.extend(num(1));
        w.extend([5, 1]);
        let g = guard(&w);
        assert_eq!(eval_with(&g[0], 0, 64), Some(1));
        assert_eq!(eval_with(&g[0], 0, 63), Some(0));
    }

    #[test]
    fn saturation_selects_and_failed_divisions() {
        // u64::MAX * 2 saturates at the maximum, which no length exceeds.
        let mut w = vec![1, 7, 0, 6, 1];
        w.extend(MAX);
        w.extend(num(2));
        w.extend([5, 1]);
        assert_eq!(eval_with(&guard(&w)[0], 0, u64::MAX), Some(0));
        // (p >= 4 ? p - 4 : MAX) < len(p1)
        let mut w = vec![1, 7, 0, 8, 7, 2, 4, 0];
        w.extend(num(4));
        w.extend([6, 4, 4, 0]);
        w.extend(num(4));
        w.extend(MAX);
        w.extend([5, 1]);
        let g = guard(&w);
        assert_eq!(eval_with(&g[0], 10, 7), Some(1));
        assert_eq!(eval_with(&g[0], 3, 7), Some(0));
        // A division by 0 gives the dividend; wrap_lo gives 0 where hi reached the maximum.
        let mut w = vec![3];
        for cmp in [2, 1] {
            // 7 / 0 >= 7, then 7 / 0 <= 7
            w.extend([7, cmp, 6, 5]);
            w.extend(num(7));
            w.extend(num(0));
            w.extend(num(7));
        }
        w.extend([7, 1, 6, 6]);
        w.extend(num(5));
        w.extend(num(1));
        w.extend(num(5));
        w.extend(num(0));
        let g = guard(&w);
        assert_eq!(g.len(), 3);
        for (i, b) in g.iter().enumerate() {
            assert_eq!(eval_with(b, 0, 0), Some(1), "condition {i}");
        }
    }

    #[test]
    fn a_value_the_launch_lacks_is_no_value() {
        // global_range(2) is not given: the guard has no value (the launch takes it as false).
        let g = guard(&[1, 7, 1, 3, 2, 5, 1]);
        assert_eq!(eval_with(&g[0], 0, 64), None);
    }

    #[test]
    fn malformed_guards_are_errors() {
        for bad in [
            &[1, 7, 1, 3, 0, 5, 2][..], // parameter 2 of 2
            &[1, 7, 1, 3, 0, 5, 1, 9],  // trailing word
            &[0],                       // a count of none
            &[2, 7, 1, 3, 0, 5, 1],     // one bound short
            &[1, 7, 9, 3, 0, 5, 1],     // no such comparison
            &[1, 3, 4],                 // no such dimension
        ] {
            let err = decode_guard(bad, 2).expect_err("malformed");
            assert_eq!(err.code(), Errc::Build, "{bad:?}");
        }
    }
}
