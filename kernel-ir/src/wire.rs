//! The words `#[sycl::kernel]` embeds in the program, and their decoding.
//!
//! Helpers are separate macro invocations, so no macro sees a whole program: the runtime
//! decodes the words of a kernel and of each of its helpers, validates them
//! ([`validate`](fn@crate::validate)) and builds one module from them.
//!
//! The format (all `u32`; a change changes [`VERSION`]):
//! - header: [`MAGIC`], [`VERSION`]; parameters (count, then kind 0 scalar / 1 slice, type,
//!   mutable / 2 struct slice, size in bytes, mutable); result type ([`NONE`] for kernels); locals (count, then type, array
//!   length, 0 for a scalar, array space, 0 work-group local, 1 private, and the const
//!   parameter that is the length, [`NONE`] if none); the body (a block); a steps flag and, when set, the steps;
//! - a block is a count and its statements; a statement, step, expression or bound starts
//!   with a tag; an expression's second word is its type; a literal is its value's 64 bits
//!   at that type (two words, low first), as is a bound's number;
//! - an element access ends with its [`Field`]: [`NONE`], or the offset, the type, then 0, or 1 and
//!   the item's length, check and index;
//! - a whole-field copy ([`StmtKind::CopyField`]) is its parameter, check, fact and index, then
//!   the field's offset, the private array and 1 to the slice / 0 from it;
//! - `kernel_fail` ([`StmtKind::Fail`]) is tag 15 and the failure's code;
//! - a [`Check`] is 0 checked, 1 proved, 2 and a bound (`When`), 3 and a bound (`Guard`);
//! - enumerations are their index in the `ALL` list of their type.
//!
//! Decoding checks what can be checked without types (tags, counts, indices, nesting);
//! [`validate`](fn@crate::validate) checks the rest. Malformed words are a [`WireError`], never a panic.

use crate::bound::{Bound, BoundCmp, BoundFn, Check};
use crate::ir::*;
use crate::ops::*;
use crate::ty::Scalar;

/// "SYIR".
pub const MAGIC: u32 = 0x5359_4952;
/// The format's version.
pub const VERSION: u32 = 19;
/// The most const generic parameters a kernel may have.
pub const MAX_CONST_PARAMS: usize = 16;
/// No value (a kernel's result type, an assignment without operator).
pub const NONE: u32 = 0xFFFF_FFFF;
/// How deep statements, expressions and bounds may nest: beyond any kernel a person writes
/// (the macro refuses deeper expressions and drops deeper proofs). Readers recurse: at this
/// depth decoding, validating and emitting need a few MB of stack in a debug build (some
/// 11 KB a level to decode), so the runtime reads the IR on a thread of its own with a
/// large stack.
pub const MAX_DEPTH: usize = 256;

/// Malformed words: what was wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// What was malformed.
    pub what: String,
    /// The word where it was found.
    pub at: usize,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (word {})", self.what, self.at)
    }
}

impl std::error::Error for WireError {}

fn code<T: PartialEq>(all: &[T], x: &T) -> u32 {
    all.iter().position(|a| a == x).expect("in its ALL list") as u32
}

// ---- encoding

/// The words of a kernel or helper.
pub fn encode(f: &Function) -> Vec<u32> {
    let mut w = Writer { out: Vec::new() };
    w.function(f);
    w.out
}

/// The words of a list of guards (a count, then each bound); empty for none.
pub fn encode_guards(guards: &[Bound]) -> Vec<u32> {
    if guards.is_empty() {
        return Vec::new();
    }
    let mut w = Writer {
        out: vec![guards.len() as u32],
    };
    guards.iter().for_each(|g| w.bound(g));
    w.out
}

struct Writer {
    out: Vec<u32>,
}

impl Writer {
    fn ty(&mut self, t: Scalar) {
        self.out.push(code(&Scalar::ALL, &t));
    }

    fn u64(&mut self, v: u64) {
        self.out.extend([v as u32, (v >> 32) as u32]);
    }

    fn function(&mut self, f: &Function) {
        self.out.extend([MAGIC, VERSION, f.params.len() as u32]);
        for p in &f.params {
            match *p {
                Param::Scalar(t) => {
                    self.out.push(0);
                    self.ty(t);
                    self.out.push(0);
                }
                Param::Slice { elem, mutable } => {
                    self.out.push(1);
                    self.ty(elem);
                    self.out.push(mutable as u32);
                }
                Param::Structs { size, mutable } => {
                    self.out.extend([2, size, mutable as u32]);
                }
            }
        }
        match f.ret {
            Some(t) => self.ty(t),
            None => self.out.push(NONE),
        }
        self.out.push(f.locals.len() as u32);
        for l in &f.locals {
            self.ty(l.ty);
            self.out.push(l.array_len().unwrap_or(0));
            self.out.push(match l.array.map(|a| a.space) {
                None | Some(ArraySpace::WorkGroup) => 0,
                Some(ArraySpace::Private) => 1,
            });
            self.out
                .push(l.array.and_then(|a| a.len_param).map_or(NONE, |p| p as u32));
        }
        self.block(&f.body);
        match &f.steps {
            Some(s) => {
                self.out.push(1);
                self.steps(s);
            }
            None => self.out.push(0),
        }
    }

    fn base(&mut self, b: Base) {
        match b {
            Base::Param(i) => self.out.extend([0, i as u32]),
            Base::Local(l) => self.out.extend([1, l as u32]),
        }
    }

    fn field(&mut self, f: &Option<Box<Field>>) {
        let Some(f) = f else {
            self.out.push(NONE);
            return;
        };
        self.out.push(f.offset);
        self.ty(f.ty);
        match &f.item {
            None => self.out.push(0),
            Some(item) => {
                self.out.extend([1, item.len]);
                self.check(&item.check);
                self.expr(&item.index);
            }
        }
    }

    fn check(&mut self, c: &Check) {
        match c {
            Check::Checked => self.out.push(0),
            Check::Proved => self.out.push(1),
            Check::When(b) => {
                self.out.push(2);
                self.bound(b);
            }
            Check::Guard(b) => {
                self.out.push(3);
                self.bound(b);
            }
        }
    }

    fn bound(&mut self, b: &Bound) {
        match b {
            Bound::Num(v) => {
                self.out.push(0);
                self.u64(*v);
            }
            Bound::LocalRange(d) => self.out.extend([1, *d as u32]),
            Bound::GroupRange(d) => self.out.extend([2, *d as u32]),
            Bound::GlobalRange(d) => self.out.extend([3, *d as u32]),
            Bound::Param(i) => self.out.extend([4, *i as u32]),
            Bound::Len(i) => self.out.extend([5, *i as u32]),
            Bound::Const(i) => self.out.extend([10, *i as u32]),
            Bound::Fn(f, a, c) => {
                self.out.extend([6, code(&BoundFn::ALL, f)]);
                self.bound(a);
                self.bound(c);
            }
            Bound::WrapLo(a, b, c) => {
                self.out.push(7);
                self.bound(a);
                self.bound(b);
                self.bound(c);
            }
            Bound::Cmp(op, a, c) => {
                self.out.extend([8, code(&BoundCmp::ALL, op)]);
                self.bound(a);
                self.bound(c);
            }
            Bound::Cond(a, b, c) => {
                self.out.push(9);
                self.bound(a);
                self.bound(b);
                self.bound(c);
            }
        }
    }

    fn opt_op(&mut self, op: &Option<BinOp>) {
        self.out.push(op.map_or(NONE, |op| code(&BinOp::ALL, &op)));
    }

    fn block(&mut self, body: &[Stmt]) {
        self.out.push(body.len() as u32);
        body.iter().for_each(|s| self.stmt(s));
    }

    fn for_header(&mut self, h: &For) {
        self.out.push(h.var as u32);
        self.expr(&h.start);
        self.expr(&h.end);
        self.out.push(h.inclusive as u32);
        self.out.push(h.step.is_some() as u32);
        if let Some(s) = &h.step {
            self.expr(s);
        }
        self.check(&h.counts_below_half);
        self.check(&h.start_below_half);
        self.check(&h.counts_in_u32);
        self.check(&h.counts_in_u64);
        self.check(&h.counts_in_i32);
        self.out.push(h.start_per_item as u32);
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let(l, e) => {
                self.out.extend([0, *l as u32]);
                self.expr(e);
            }
            StmtKind::AssignLocal(l, op, e) => {
                self.out.extend([1, *l as u32]);
                self.opt_op(op);
                self.expr(e);
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
                self.out.push(2);
                self.base(*base);
                self.check(check);
                self.check(index_fits_i32);
                self.opt_op(op);
                self.expr(index);
                self.expr(value);
                self.field(field);
            }
            StmtKind::Expr(e) => {
                self.out.push(3);
                self.expr(e);
            }
            StmtKind::If(c, a, b) => {
                self.out.push(4);
                self.expr(c);
                self.block(a);
                self.block(b);
            }
            StmtKind::While(c, b) => {
                self.out.push(5);
                self.expr(c);
                self.block(b);
            }
            StmtKind::Loop(b) => {
                self.out.push(6);
                self.block(b);
            }
            StmtKind::For(h, b) => {
                self.out.push(7);
                self.for_header(h);
                self.block(b);
            }
            StmtKind::Break => self.out.push(8),
            StmtKind::Continue => self.out.push(9),
            StmtKind::Return(None) => self.out.push(10),
            StmtKind::Return(Some(e)) => {
                self.out.push(11);
                self.expr(e);
            }
            StmtKind::Barrier => self.out.push(12),
            StmtKind::Fence(order, scope) => {
                self.out.push(13);
                self.out.push(code(&MemoryOrder::ALL, order));
                self.out.push(code(&MemoryScope::ALL, scope));
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
                self.out.extend([14, *param as u32]);
                self.check(check);
                self.check(index_fits_i32);
                self.expr(index);
                self.out.extend([*offset, *array as u32, *to_slice as u32]);
            }
            StmtKind::Fail(f) => self.out.extend([15, code(&Failure::ALL, f)]),
        }
    }

    fn steps(&mut self, steps: &[Step]) {
        self.out.push(steps.len() as u32);
        for s in steps {
            match s {
                Step::Region(b) => {
                    self.out.push(0);
                    self.block(b);
                }
                Step::GroupLet(l, e) => {
                    self.out.extend([1, *l as u32]);
                    self.expr(e);
                }
                Step::Barrier => self.out.push(2),
                Step::Group { local, op, args } => {
                    self.out
                        .extend([3, *local as u32, code(&GroupOp::all(), op)]);
                    self.exprs(args);
                }
                Step::SyncFor(h, body) => {
                    self.out.push(4);
                    self.for_header(h);
                    self.steps(body);
                }
                Step::SubGroup { local, op, args } => {
                    self.out
                        .extend([5, *local as u32, code(&SubGroupOp::all(), op)]);
                    self.exprs(args);
                }
            }
        }
    }

    fn exprs(&mut self, es: &[Expr]) {
        self.out.push(es.len() as u32);
        es.iter().for_each(|e| self.expr(e));
    }

    fn expr(&mut self, e: &Expr) {
        let head = |w: &mut Self, tag: u32| {
            w.out.push(tag);
            w.ty(e.ty);
        };
        match &e.kind {
            ExprKind::Lit(v) => {
                head(self, 0);
                self.u64(*v);
            }
            ExprKind::Local(l) => {
                head(self, 1);
                self.out.push(*l as u32);
            }
            ExprKind::Param(i) => {
                head(self, 2);
                self.out.push(*i as u32);
            }
            ExprKind::Load {
                base,
                check,
                index_fits_i32,
                index,
                field,
            } => {
                head(self, 3);
                self.base(*base);
                self.check(check);
                self.check(index_fits_i32);
                self.expr(index);
                self.field(field);
            }
            ExprKind::Len(b) => {
                head(self, 4);
                self.base(*b);
            }
            ExprKind::Unary(op, a) => {
                head(self, 5);
                self.out.push(match op {
                    UnOp::Neg => 0,
                    UnOp::Not => 1,
                });
                self.expr(a);
            }
            ExprKind::Binary(op, a, b, no_wrap) => {
                head(self, 6);
                self.out.push(code(&BinOp::ALL, op));
                self.check(no_wrap);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Cast(a) => {
                head(self, 7);
                self.expr(a);
            }
            ExprKind::Math(m, args) => {
                head(self, 8);
                self.out.push(code(&MathFn::ALL, m));
                self.exprs(args);
            }
            ExprKind::Query(q, d) => {
                head(self, 9);
                self.out.extend([code(&Query::ALL, q), *d as u32]);
            }
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
                order,
                scope,
            } => {
                head(self, 10);
                self.out.push(code(&AtomicOp::ALL, op));
                self.out.push(code(&MemoryOrder::ALL, order));
                self.out.push(code(&MemoryScope::ALL, scope));
                self.base(*base);
                self.expr(index);
                self.exprs(values);
            }
            ExprKind::Group(op, args) => {
                head(self, 11);
                self.out.push(code(&GroupOp::all(), op));
                self.exprs(args);
            }
            ExprKind::Call(k, args) => {
                head(self, 12);
                self.out.push(*k as u32);
                self.exprs(args);
            }
            ExprKind::Select(c, a, b) => {
                head(self, 13);
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
            ExprKind::SubGroupQuery(q) => {
                head(self, 14);
                self.out.push(code(&SubGroupQuery::ALL, q));
            }
            ExprKind::ConstParam(i) => {
                head(self, 16);
                self.out.push(*i as u32);
            }
            ExprKind::SliceArg(p) => {
                head(self, 17);
                self.out.push(*p as u32);
            }
            ExprKind::ArrayArg(l) => {
                head(self, 18);
                self.out.push(*l as u32);
            }
            ExprKind::SubGroup(op, args) => {
                head(self, 15);
                self.out.push(code(&SubGroupOp::all(), op));
                self.exprs(args);
            }
        }
    }
}

// ---- decoding

/// Decodes the words of a kernel or helper that calls `helpers` others. The result is not
/// validated yet: see [`validate`](fn@crate::validate).
pub fn decode(words: &[u32], helpers: usize) -> Result<Function, WireError> {
    let mut r = Reader {
        words,
        at: 0,
        params: 0,
        locals: 0,
        helpers,
        depth: 0,
    };
    if r.word()? != MAGIC {
        return Err(r.bad("not kernel IR (magic)"));
    }
    if r.word()? != VERSION {
        return Err(r.bad("another version of the kernel IR"));
    }
    let n = r.count()?;
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = r.word()?;
        params.push(match kind {
            0 | 1 => {
                let t = r.ty()?;
                match (kind, r.flag()?) {
                    (0, false) => Param::Scalar(t),
                    (1, mutable) => Param::Slice { elem: t, mutable },
                    _ => return Err(r.bad("parameter")),
                }
            }
            2 => {
                let size = r.word()?;
                Param::Structs {
                    size,
                    mutable: r.flag()?,
                }
            }
            _ => return Err(r.bad("parameter")),
        });
    }
    r.params = params.len();
    let ret = match r.word()? {
        NONE => None,
        c => Some(r.ty_of(c)?),
    };
    let n = r.count()?;
    let mut locals = Vec::with_capacity(n);
    for _ in 0..n {
        let ty = r.ty()?;
        let len = r.word()?;
        let mut array = match (len, r.word()?) {
            (0, 0) => None,
            (0, _) => return Err(r.bad("a scalar local with an array space")),
            (len, 0) => Some(Array::work_group(len)),
            (len, 1) => Some(Array::private(len)),
            _ => return Err(r.bad("an unknown array space")),
        };
        match (r.word()?, &mut array) {
            (NONE, _) => {}
            (p, Some(a)) if (p as usize) < MAX_CONST_PARAMS && a.len == 1 => {
                a.len_param = Some(p as usize)
            }
            _ => return Err(r.bad("an array length's const parameter")),
        }
        locals.push(Local {
            ty,
            array,
            info: (),
        });
    }
    r.locals = locals.len();
    let body = r.block()?;
    let steps = if r.flag()? { Some(r.steps()?) } else { None };
    if r.at != words.len() {
        return Err(WireError {
            what: "trailing words".into(),
            at: r.at,
        });
    }
    Ok(Function {
        params,
        ret,
        locals,
        body,
        steps,
    })
}

/// Decodes a list of guards over a function with `params` parameters ([`encode_guards`]).
pub fn decode_guards(words: &[u32], params: usize) -> Result<Vec<Bound>, WireError> {
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader {
        words,
        at: 0,
        params,
        locals: 0,
        helpers: 0,
        depth: 0,
    };
    let n = r.count()?;
    let guards = (0..n).map(|_| r.bound()).collect::<Result<Vec<_>, _>>()?;
    if r.at != words.len() || guards.is_empty() {
        return Err(WireError {
            what: "guard list".into(),
            at: r.at,
        });
    }
    Ok(guards)
}

struct Reader<'a> {
    words: &'a [u32],
    at: usize,
    /// Counts to check indices against, once known.
    params: usize,
    locals: usize,
    helpers: usize,
    depth: usize,
}

impl Reader<'_> {
    fn bad(&self, what: &str) -> WireError {
        WireError {
            what: what.to_owned(),
            at: self.at.saturating_sub(1),
        }
    }

    fn word(&mut self) -> Result<u32, WireError> {
        let w = *self.words.get(self.at).ok_or_else(|| WireError {
            what: "truncated".into(),
            at: self.at,
        })?;
        self.at += 1;
        Ok(w)
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        let lo = self.word()? as u64;
        Ok(lo | (self.word()? as u64) << 32)
    }

    fn of<T: Copy>(&mut self, all: &[T], what: &str) -> Result<T, WireError> {
        let c = self.word()?;
        all.get(c as usize).copied().ok_or_else(|| self.bad(what))
    }

    fn ty_of(&self, c: u32) -> Result<Scalar, WireError> {
        Scalar::ALL
            .get(c as usize)
            .copied()
            .ok_or_else(|| self.bad("type"))
    }

    fn ty(&mut self) -> Result<Scalar, WireError> {
        let c = self.word()?;
        self.ty_of(c)
    }

    /// A count of items that take at least one word each: a larger one is malformed (and
    /// would make a huge allocation).
    fn count(&mut self) -> Result<usize, WireError> {
        let n = self.word()? as usize;
        if n > self.words.len() - self.at {
            return Err(self.bad("count"));
        }
        Ok(n)
    }

    fn index(&mut self, limit: usize, what: &str) -> Result<usize, WireError> {
        let i = self.word()? as usize;
        if i >= limit {
            return Err(self.bad(what));
        }
        Ok(i)
    }

    fn local(&mut self) -> Result<usize, WireError> {
        self.index(self.locals, "local")
    }

    fn param(&mut self) -> Result<usize, WireError> {
        self.index(self.params, "parameter")
    }

    fn flag(&mut self) -> Result<bool, WireError> {
        match self.word()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.bad("flag")),
        }
    }

    fn dim(&mut self) -> Result<u8, WireError> {
        match self.word()? {
            d @ 0..=2 => Ok(d as u8),
            _ => Err(self.bad("dimension")),
        }
    }

    fn enter(&mut self) -> Result<(), WireError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.bad("nesting too deep"));
        }
        Ok(())
    }

    fn base(&mut self) -> Result<Base, WireError> {
        match self.word()? {
            0 => Ok(Base::Param(self.param()?)),
            1 => Ok(Base::Local(self.local()?)),
            _ => Err(self.bad("base")),
        }
    }

    fn field(&mut self) -> Result<Option<Box<Field>>, WireError> {
        let offset = self.word()?;
        if offset == NONE {
            return Ok(None);
        }
        let ty = self.ty()?;
        let item = match self.word()? {
            0 => None,
            1 => {
                let len = self.word()?;
                let check = self.check()?;
                Some(FieldItem {
                    len,
                    check,
                    index: self.expr()?,
                })
            }
            _ => return Err(self.bad("field item")),
        };
        Ok(Some(Box::new(Field { ty, offset, item })))
    }

    fn check(&mut self) -> Result<Check, WireError> {
        Ok(match self.word()? {
            0 => Check::Checked,
            1 => Check::Proved,
            2 => Check::When(self.bound()?),
            3 => Check::Guard(self.bound()?),
            _ => return Err(self.bad("check")),
        })
    }

    fn bound(&mut self) -> Result<Bound, WireError> {
        self.enter()?;
        let sub = |r: &mut Self| r.bound().map(Box::new);
        let b = match self.word()? {
            0 => Bound::Num(self.u64()?),
            1 => Bound::LocalRange(self.dim()?),
            2 => Bound::GroupRange(self.dim()?),
            3 => Bound::GlobalRange(self.dim()?),
            4 => Bound::Param(self.param()?),
            5 => Bound::Len(self.param()?),
            10 => Bound::Const(self.index(MAX_CONST_PARAMS, "const parameter")?),
            6 => {
                let f = self.of(&BoundFn::ALL, "bound function")?;
                let a = sub(self)?;
                Bound::Fn(f, a, sub(self)?)
            }
            7 => {
                let a = sub(self)?;
                let b = sub(self)?;
                Bound::WrapLo(a, b, sub(self)?)
            }
            8 => {
                let op = self.of(&BoundCmp::ALL, "bound comparison")?;
                let a = sub(self)?;
                Bound::Cmp(op, a, sub(self)?)
            }
            9 => {
                let c = sub(self)?;
                let a = sub(self)?;
                Bound::Cond(c, a, sub(self)?)
            }
            _ => return Err(self.bad("bound")),
        };
        self.depth -= 1;
        Ok(b)
    }

    fn opt_op(&mut self) -> Result<Option<BinOp>, WireError> {
        match self.word()? {
            NONE => Ok(None),
            c => BinOp::ALL
                .get(c as usize)
                .copied()
                .map(Some)
                .ok_or_else(|| self.bad("operator")),
        }
    }

    fn block(&mut self) -> Result<Vec<Stmt>, WireError> {
        self.enter()?;
        let n = self.count()?;
        let b = (0..n).map(|_| self.stmt()).collect::<Result<_, _>>()?;
        self.depth -= 1;
        Ok(b)
    }

    fn for_header(&mut self) -> Result<For, WireError> {
        let var = self.local()?;
        let start = self.expr()?;
        let end = self.expr()?;
        let inclusive = self.flag()?;
        let step = if self.flag()? {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(For {
            var,
            start,
            end,
            inclusive,
            step,
            counts_below_half: self.check()?,
            start_below_half: self.check()?,
            counts_in_u32: self.check()?,
            counts_in_u64: self.check()?,
            counts_in_i32: self.check()?,
            start_per_item: self.flag()?,
        })
    }

    fn stmt(&mut self) -> Result<Stmt, WireError> {
        Ok(Stmt::new(match self.word()? {
            0 => {
                let l = self.local()?;
                StmtKind::Let(l, self.expr()?)
            }
            1 => {
                let l = self.local()?;
                let op = self.opt_op()?;
                StmtKind::AssignLocal(l, op, self.expr()?)
            }
            2 => {
                let base = self.base()?;
                let check = self.check()?;
                let index_fits_i32 = self.check()?;
                let op = self.opt_op()?;
                let index = self.expr()?;
                let value = self.expr()?;
                StmtKind::Store {
                    base,
                    check,
                    index_fits_i32,
                    op,
                    index,
                    value,
                    field: self.field()?,
                }
            }
            3 => StmtKind::Expr(self.expr()?),
            4 => {
                let c = self.expr()?;
                let a = self.block()?;
                StmtKind::If(c, a, self.block()?)
            }
            5 => {
                let c = self.expr()?;
                StmtKind::While(c, self.block()?)
            }
            6 => StmtKind::Loop(self.block()?),
            7 => {
                let h = self.for_header()?;
                StmtKind::For(Box::new(h), self.block()?)
            }
            8 => StmtKind::Break,
            9 => StmtKind::Continue,
            10 => StmtKind::Return(None),
            11 => StmtKind::Return(Some(self.expr()?)),
            12 => StmtKind::Barrier,
            13 => {
                let order = self.of(&MemoryOrder::ALL, "memory order")?;
                StmtKind::Fence(order, self.of(&MemoryScope::ALL, "memory scope")?)
            }
            14 => {
                let param = self.param()?;
                let check = self.check()?;
                let index_fits_i32 = self.check()?;
                let index = self.expr()?;
                StmtKind::CopyField {
                    param,
                    check,
                    index_fits_i32,
                    index,
                    offset: self.word()?,
                    array: self.local()?,
                    to_slice: self.flag()?,
                }
            }
            15 => StmtKind::Fail(self.of(&Failure::ALL, "failure")?),
            _ => return Err(self.bad("statement")),
        }))
    }

    fn steps(&mut self) -> Result<Vec<Step>, WireError> {
        self.enter()?;
        let n = self.count()?;
        let steps = (0..n)
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
                        let op = self.of(&GroupOp::all(), "group operation")?;
                        Step::Group {
                            local,
                            op,
                            args: self.exprs()?,
                        }
                    }
                    4 => {
                        let h = self.for_header()?;
                        Step::SyncFor(Box::new(h), self.steps()?)
                    }
                    5 => {
                        let local = self.local()?;
                        let op = self.of(&SubGroupOp::all(), "sub-group operation")?;
                        Step::SubGroup {
                            local,
                            op,
                            args: self.exprs()?,
                        }
                    }
                    _ => return Err(self.bad("step")),
                })
            })
            .collect::<Result<_, _>>()?;
        self.depth -= 1;
        Ok(steps)
    }

    fn exprs(&mut self) -> Result<Vec<Expr>, WireError> {
        let n = self.count()?;
        (0..n).map(|_| self.expr()).collect()
    }

    fn expr(&mut self) -> Result<Expr, WireError> {
        self.enter()?;
        let tag = self.word()?;
        let ty = self.ty()?;
        let b = Box::new;
        let kind = match tag {
            0 => ExprKind::Lit(self.u64()?),
            1 => ExprKind::Local(self.local()?),
            2 => ExprKind::Param(self.param()?),
            3 => {
                let base = self.base()?;
                let check = self.check()?;
                let index_fits_i32 = self.check()?;
                let index = b(self.expr()?);
                ExprKind::Load {
                    base,
                    check,
                    index_fits_i32,
                    index,
                    field: self.field()?,
                }
            }
            4 => ExprKind::Len(self.base()?),
            5 => {
                let op = self.of(&[UnOp::Neg, UnOp::Not], "unary operator")?;
                ExprKind::Unary(op, b(self.expr()?))
            }
            6 => {
                let op = self.of(&BinOp::ALL, "operator")?;
                let no_wrap = self.check()?;
                let x = self.expr()?;
                ExprKind::Binary(op, b(x), b(self.expr()?), no_wrap)
            }
            7 => ExprKind::Cast(b(self.expr()?)),
            8 => {
                let m = self.of(&MathFn::ALL, "math function")?;
                ExprKind::Math(m, self.exprs()?)
            }
            9 => {
                let q = self.of(&Query::ALL, "query")?;
                ExprKind::Query(q, self.dim()?)
            }
            10 => {
                let op = self.of(&AtomicOp::ALL, "atomic")?;
                let order = self.of(&MemoryOrder::ALL, "memory order")?;
                let scope = self.of(&MemoryScope::ALL, "memory scope")?;
                let base = self.base()?;
                let index = b(self.expr()?);
                ExprKind::Atomic {
                    op,
                    base,
                    index,
                    values: self.exprs()?,
                    order,
                    scope,
                }
            }
            11 => {
                let op = self.of(&GroupOp::all(), "group operation")?;
                ExprKind::Group(op, self.exprs()?)
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
            14 => ExprKind::SubGroupQuery(self.of(&SubGroupQuery::ALL, "sub-group query")?),
            15 => {
                let op = self.of(&SubGroupOp::all(), "sub-group operation")?;
                ExprKind::SubGroup(op, self.exprs()?)
            }
            16 => ExprKind::ConstParam(self.index(MAX_CONST_PARAMS, "const parameter")?),
            17 => ExprKind::SliceArg(self.param()?),
            18 => ExprKind::ArrayArg(self.local()?),
            _ => return Err(self.bad("expression")),
        };
        self.depth -= 1;
        Ok(Expr { ty, kind, src: () })
    }
}
