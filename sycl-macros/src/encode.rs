//! The checked IR as words, for the runtime's SPIR-V emitter (`sycl-rs/src/kernel/spirv/`).
//!
//! Helpers are separate macro invocations, so no macro sees a whole program; the runtime
//! builds each SPIR-V module from the words of the kernel and of its helpers, as it
//! concatenates their C sources. The words carry what parsing and analysis decided: every
//! expression's resolved type, the work-group structure ([`Step`]s), and for each element
//! access whether the bounds analysis proved it (`Proof::Always`: no check).
//!
//! The format (all `u32`; the decoder in `sycl-rs/src/kernel/spirv/ir.rs` mirrors it, and a
//! change here changes [`VERSION`]):
//! - header: [`MAGIC`], [`VERSION`], parameters (count, then kind 0 scalar / 1 slice, type,
//!   mutable), result type ([`NONE`] for kernels), locals (count, then type and array length,
//!   0 for a scalar), the body (a block), then for kernels the group flag and, when set, the
//!   steps;
//! - a block is a count and its statements; a statement or expression starts with a tag;
//!   every expression's second word is its type; a literal is its value's 64 bits at that
//!   type (two words, low first);
//! - a sub-group collective is an expression (tag 15: its op, then its arguments) in the
//!   body, and a step (tag 5: the local, the op, the arguments) in the steps; sub-group
//!   queries are expressions (tag 14 and the query);
//! - a bounds condition (see [`cbound`]) is a tree of tagged words;
//! - an element access (load, store) carries two proofs in the same form (`check`): that it
//!   is in bounds, then that its index can be computed in 32-bit signed arithmetic
//!   (`Bounds::narrow_index`); a `for` header ends with two more: that the loop can count
//!   with `v += step`, every value below half its type's range (`Bounds::loop_fits`), then
//!   that its start is below that too (`Bounds::below`; only for `u32` loops);
//! - a `u32` `+`, `-` or `*` carries one proof after its operator, before its operands: that
//!   it has no signed overflow either (`Bounds::no_signed_wrap`).

use crate::analyze::{path_key, Analysis, Step};
use crate::bounds::{Bounds, Proof, Target};
use crate::ir::*;

/// "SYIR".
pub const MAGIC: u32 = 0x5359_4952;
pub const VERSION: u32 = 5;
/// No value (a kernel's result type, an assignment without operator).
pub const NONE: u32 = 0xFFFF_FFFF;

struct Encoder<'a> {
    f: &'a Function,
    helpers: &'a [syn::Path],
    bounds: Bounds<'a>,
    out: Vec<u32>,
}

/// The words of a kernel.
pub fn kernel(f: &Function, an: &Analysis) -> Vec<u32> {
    let mut e = Encoder::new(f, &an.helpers);
    e.function();
    e.out.push(an.group as u32);
    if an.group {
        e.steps(&an.steps);
    }
    e.out
}

/// The C forms' run-time guards (`emit_c::KernelC::guards`, over the bound constants of
/// `decls`): their count, then each as a bound. Empty when there are none, or when one is
/// not in the grammar `cbound` reads: then the runtime never takes the `SYCL_GUARDED` form
/// (sound: every check stays).
pub fn guards(conds: &[String], decls: &[String]) -> Vec<u32> {
    if conds.is_empty() {
        return Vec::new();
    }
    let mut out = vec![conds.len() as u32];
    for c in conds {
        match cbound::parse(c, decls) {
            Some(words) => out.extend(words),
            None => return Vec::new(),
        }
    }
    out
}

/// The words of a helper (`helpers`: its callees in call-marker order).
pub fn helper(f: &Function, helpers: &[syn::Path]) -> Vec<u32> {
    let mut e = Encoder::new(f, helpers);
    e.function();
    e.out
}

fn ty_code(t: Ty) -> u32 {
    match t {
        Ty::Bool => 0,
        Ty::I32 => 1,
        Ty::U32 => 2,
        Ty::I64 => 3,
        Ty::U64 => 4,
        Ty::Usize => 5,
        Ty::F32 => 6,
        Ty::F64 => 7,
    }
}

fn binop_code(op: BinOp) -> u32 {
    match op {
        BinOp::Add => 0,
        BinOp::Sub => 1,
        BinOp::Mul => 2,
        BinOp::Div => 3,
        BinOp::Rem => 4,
        BinOp::BitAnd => 5,
        BinOp::BitOr => 6,
        BinOp::BitXor => 7,
        BinOp::Shl => 8,
        BinOp::Shr => 9,
        BinOp::Eq => 10,
        BinOp::Ne => 11,
        BinOp::Lt => 12,
        BinOp::Le => 13,
        BinOp::Gt => 14,
        BinOp::Ge => 15,
        BinOp::And => 16,
        BinOp::Or => 17,
    }
}

fn math_code(m: MathFn) -> u32 {
    match m {
        MathFn::Sqrt => 0,
        MathFn::Exp => 1,
        MathFn::Ln => 2,
        MathFn::Sin => 3,
        MathFn::Cos => 4,
        MathFn::Powf => 5,
        MathFn::MulAdd => 6,
        MathFn::Min => 7,
        MathFn::Max => 8,
        MathFn::Abs => 9,
        MathFn::Floor => 10,
        MathFn::Ceil => 11,
    }
}

fn query_code(q: Query) -> u32 {
    match q {
        Query::GlobalId => 0,
        Query::LocalId => 1,
        Query::GroupId => 2,
        Query::GlobalRange => 3,
        Query::LocalRange => 4,
        Query::GroupRange => 5,
    }
}

fn reduce_code(r: Reduce) -> u32 {
    match r {
        Reduce::Sum => 0,
        Reduce::Min => 1,
        Reduce::Max => 2,
    }
}

fn sub_group_query_code(q: SubGroupQuery) -> u32 {
    match q {
        SubGroupQuery::LocalId => 0,
        SubGroupQuery::LocalRange => 1,
        SubGroupQuery::MaxLocalRange => 2,
        SubGroupQuery::Id => 3,
        SubGroupQuery::Range => 4,
    }
}

fn sub_group_op_code(op: SubGroupOp) -> u32 {
    match op {
        SubGroupOp::Broadcast => 0,
        SubGroupOp::Shuffle => 1,
        SubGroupOp::ShiftLeft => 2,
        SubGroupOp::ShiftRight => 3,
        SubGroupOp::ShuffleXor => 4,
        SubGroupOp::Reduce(r) => 5 + reduce_code(r),
    }
}

fn atomic_code(op: AtomicOp) -> u32 {
    match op {
        AtomicOp::FetchAdd => 0,
        AtomicOp::FetchMin => 1,
        AtomicOp::FetchMax => 2,
        AtomicOp::CompareExchange => 3,
    }
}

/// A literal's bits at its final type.
fn lit_bits(l: &Lit, t: Ty) -> u64 {
    match (l, t) {
        (Lit::Zero, _) => 0,
        (Lit::Bool(b), _) => *b as u64,
        (Lit::Int(v), Ty::F32) => (*v as f32).to_bits() as u64,
        (Lit::Int(v), Ty::F64) => (*v as f64).to_bits(),
        // In range for its type (checked by `check_common`): the low bits are its value.
        (Lit::Int(v), _) => *v as u64,
        (Lit::Float(d), Ty::F32) => d.parse::<f32>().expect("checked").to_bits() as u64,
        (Lit::Float(d), _) => d.parse::<f64>().expect("checked").to_bits(),
    }
}

impl<'a> Encoder<'a> {
    fn new(f: &'a Function, helpers: &'a [syn::Path]) -> Encoder<'a> {
        Encoder {
            f,
            helpers,
            bounds: Bounds::new(f),
            out: Vec::new(),
        }
    }

    fn ty(&mut self, id: TyId) {
        let t = self.f.ty(id);
        self.out.push(ty_code(t));
    }

    fn function(&mut self) {
        let f = self.f;
        self.out.extend([MAGIC, VERSION, f.params.len() as u32]);
        for p in &f.params {
            match p.kind {
                ParamKind::Scalar(t) => self.out.extend([0, ty_code(t), 0]),
                ParamKind::Slice { elem, mutable } => {
                    self.out.extend([1, ty_code(elem), mutable as u32])
                }
            }
        }
        self.out.push(f.ret.map_or(NONE, ty_code));
        self.out.push(f.locals.len() as u32);
        for l in &f.locals {
            self.ty(l.ty);
            self.out.push(l.array.unwrap_or(0) as u32);
        }
        self.block(&f.body);
    }

    fn base(&mut self, base: Base) {
        match base {
            Base::Param(i) => self.out.extend([0, i as u32]),
            Base::Local(l) => self.out.extend([1, l as u32]),
        }
    }

    /// How an access is checked: 0 checked; 1 no check (the user's `get_unchecked`, or proved
    /// in bounds for every work-group size); 2 and a bound condition: in bounds when it holds
    /// for the work-group size the module is built for (`Proof::When`); 3 and a condition: in
    /// bounds when it holds at run time, the same in every work-item (`Proof::Guard`).
    fn check(&mut self, base: Base, index: &Expr, checked: bool) {
        if !checked {
            self.out.push(1);
            return;
        }
        let p = self.bounds.access(base, index, Target::C);
        self.proof(p);
    }

    /// Whether `index` can be computed in 32 bits (see the module's format).
    fn narrow(&mut self, index: &Expr) {
        let p = self.bounds.narrow_index(index, &|_| false);
        self.proof(p);
    }

    /// A proof as words: 0 no, 1 always, 2 and 3 with their condition (as `check`).
    fn proof(&mut self, p: Proof) {
        let (tag, cond) = match p {
            Proof::No => (0, None),
            Proof::Always => (1, None),
            Proof::When(c) => (2, Some(c)),
            Proof::Guard(c) => (3, Some(c)),
        };
        let Some(cond) = cond else {
            self.out.push(tag);
            return;
        };
        let decls = self.bounds.c_decls();
        match cbound::parse(&cond, &decls) {
            Some(words) => {
                self.out.push(tag);
                self.out.extend(words);
            }
            // A form the parser does not know stays checked (sound, slower).
            None => self.out.push(0),
        }
    }

    fn block(&mut self, body: &[Stmt]) {
        self.out.push(body.len() as u32);
        for s in body {
            self.stmt(s);
        }
    }

    fn opt_op(&mut self, op: &Option<BinOp>) {
        self.out.push(op.map_or(NONE, binop_code));
    }

    fn for_header(
        &mut self,
        var: usize,
        (start, end, inclusive): (&Expr, &Expr, bool),
        step: Option<&Expr>,
    ) {
        self.out.push(var as u32);
        self.expr(start);
        self.expr(end);
        self.out.push(inclusive as u32);
        self.out.push(step.is_some() as u32);
        if let Some(s) = step {
            self.expr(s);
        }
        // Whether the loop can count with `v += step`, every value below 2^(bits - 1), so
        // that its latch may compare signed (`spirv/emit.rs`; a condition over the
        // work-group size counts as not proved, as in `emit_c::open_for`). SPIR-V keeps
        // `usize` loops 64-bit, so no loop is narrowed here.
        let ty = self.f.ty(start.ty);
        let mut simple = Proof::No;
        if !inclusive && matches!(ty, Ty::U32 | Ty::U64 | Ty::Usize) {
            let bits = if ty == Ty::U32 { 31 } else { 63 };
            simple = self.bounds.loop_fits(end, step, bits);
            if matches!(simple, Proof::When(_)) {
                simple = Proof::No;
            }
        }
        let fits = !matches!(simple, Proof::No);
        self.proof(simple);
        // Whether the start is below 2^31 as well (a `u32` loop whose values fit): the loop
        // then tests `v < end` signed at the top, as an `int` loop (`spirv/emit.rs`).
        let start_below = if ty == Ty::U32 && fits {
            self.bounds.below(start, 31)
        } else {
            Proof::No
        };
        self.proof(start_below);
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let(l, e) => {
                self.out.extend([0, *l as u32]);
                self.expr(e);
            }
            StmtKind::LocalArray => self.out.push(1),
            StmtKind::Assign(Place::Local(l), op, e) => {
                self.out.extend([2, *l as u32]);
                self.opt_op(op);
                self.expr(e);
            }
            StmtKind::Assign(
                Place::Elem {
                    base,
                    index,
                    checked,
                },
                op,
                e,
            ) => {
                self.out.push(3);
                self.base(*base);
                self.check(*base, index, *checked);
                self.narrow(index);
                self.opt_op(op);
                self.expr(index);
                self.expr(e);
            }
            StmtKind::Expr(e) => {
                self.out.push(4);
                self.expr(e);
            }
            StmtKind::If(c, a, b) => {
                self.out.push(5);
                self.expr(c);
                self.block(a);
                self.block(b);
            }
            StmtKind::While(c, b) => {
                self.out.push(6);
                self.expr(c);
                self.block(b);
            }
            StmtKind::Loop(b) => {
                self.out.push(7);
                self.block(b);
            }
            StmtKind::For {
                var,
                start,
                end,
                inclusive,
                step,
                body,
            } => {
                self.out.push(8);
                self.for_header(*var, (start, end, *inclusive), step.as_ref());
                self.block(body);
            }
            StmtKind::Break => self.out.push(9),
            StmtKind::Continue => self.out.push(10),
            StmtKind::Return(None) => self.out.push(11),
            StmtKind::Return(Some(e)) => {
                self.out.push(12);
                self.expr(e);
            }
            StmtKind::Barrier => self.out.push(13),
        }
    }

    fn steps(&mut self, steps: &[Step]) {
        self.out.push(steps.len() as u32);
        for s in steps {
            match s {
                Step::Region(stmts) => {
                    self.out.push(0);
                    self.block(stmts);
                }
                Step::GroupLet(l, e) => {
                    self.out.extend([1, *l as u32]);
                    self.expr(e);
                }
                Step::Barrier => self.out.push(2),
                Step::SubGroup { local, op, args } => {
                    self.out.extend([5, *local as u32, sub_group_op_code(*op)]);
                    self.exprs(args);
                }
                Step::Reduce { local, op, value } => {
                    self.out.extend([3, *local as u32, reduce_code(*op)]);
                    self.expr(value);
                }
                Step::SyncFor {
                    var,
                    start,
                    end,
                    inclusive,
                    step,
                    body,
                } => {
                    self.out.push(4);
                    self.for_header(*var, (start, end, *inclusive), step.as_ref());
                    self.steps(body);
                }
            }
        }
    }

    fn exprs(&mut self, es: &[Expr]) {
        self.out.push(es.len() as u32);
        for e in es {
            self.expr(e);
        }
    }

    fn expr(&mut self, e: &Expr) {
        let t = self.f.ty(e.ty);
        let head = |tag: u32| [tag, ty_code(t)];
        match &e.kind {
            ExprKind::SubGroupQuery(q) => {
                self.out.extend(head(14));
                self.out.push(sub_group_query_code(*q));
            }
            ExprKind::SubGroup(op, args) => {
                self.out.extend(head(15));
                self.out.push(sub_group_op_code(*op));
                self.exprs(args);
            }
            ExprKind::Lit(l) => {
                let bits = lit_bits(l, t);
                self.out.extend(head(0));
                self.out.extend([bits as u32, (bits >> 32) as u32]);
            }
            ExprKind::Local(l) => self.out.extend([1, ty_code(t), *l as u32]),
            ExprKind::Param(i) => self.out.extend([2, ty_code(t), *i as u32]),
            ExprKind::Load {
                base,
                index,
                checked,
            } => {
                self.out.extend(head(3));
                self.base(*base);
                self.check(*base, index, *checked);
                self.narrow(index);
                self.expr(index);
            }
            ExprKind::Len(base) => {
                self.out.extend(head(4));
                self.base(*base);
            }
            ExprKind::Unary(op, a) => {
                let code = match op {
                    UnOp::Neg => 0,
                    UnOp::Not => 1,
                };
                self.out.extend(head(5));
                self.out.push(code);
                self.expr(a);
            }
            ExprKind::Binary(op, a, b) => {
                self.out.extend(head(6));
                self.out.push(binop_code(*op));
                if self.bounds.u32_arith(e).is_some() {
                    let p = self.bounds.no_signed_wrap(e);
                    self.proof(p);
                }
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Cast(a, _) => {
                self.out.extend(head(7));
                self.expr(a);
            }
            ExprKind::Math(m, args) => {
                self.out.extend(head(8));
                self.out.push(math_code(*m));
                self.exprs(args);
            }
            ExprKind::Query(q, d) => {
                self.out.extend(head(9));
                self.out.extend([query_code(*q), *d as u32]);
            }
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
            } => {
                self.out.extend(head(10));
                self.out.push(atomic_code(*op));
                self.base(*base);
                self.expr(index);
                self.exprs(values);
            }
            ExprKind::Reduce(op, a) => {
                self.out.extend(head(11));
                self.out.push(reduce_code(*op));
                self.expr(a);
            }
            ExprKind::Call(path, args) => {
                let key = path_key(path);
                let k = self
                    .helpers
                    .iter()
                    .position(|h| path_key(h) == key)
                    .expect("helpers are collected");
                self.out.extend(head(12));
                self.out.push(k as u32);
                self.exprs(args);
            }
            ExprKind::Select(c, a, b) => {
                self.out.extend(head(13));
                self.expr(c);
                self.expr(a);
                self.expr(b);
            }
        }
    }
}

/// The bounds conditions of `bounds.rs` (C expressions over the work-group size, ranges,
/// parameters and lengths, written for the C preludes' `sycl_b*` functions) as words that the
/// runtime evaluates (for the work-group size it builds for) or emits as SPIR-V (run-time
/// guards). The grammar is exactly what `bounds.rs` writes; anything else is `None` (the
/// access then stays checked).
///
/// Words: 0 number (two words, low first); 1 local range, 2 group range, 3 global range (a
/// SYCL dimension each); 4 scalar parameter, 5 slice length (a parameter index each); 6 a
/// `sycl_b*` function (0 add, 1 mul, 2 min, 3 max, 4 sub, 5 div: two operands; 6 wrap_lo:
/// three); 7 a comparison (0 `<`, 1 `<=`, 2 `>=`, 3 `>`) and two operands; 8 `c ? a : b`.
mod cbound {
    use std::collections::HashMap;

    struct P<'a> {
        toks: Vec<String>,
        at: usize,
        decls: &'a HashMap<String, String>,
        depth: usize,
    }

    fn tokens(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let cs: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_alphanumeric() || c == '_' {
                let start = i;
                while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                    i += 1;
                }
                out.push(cs[start..i].iter().collect());
            } else if (c == '<' || c == '>') && cs.get(i + 1) == Some(&'=') {
                out.push(format!("{c}="));
                i += 2;
            } else {
                out.push(c.to_string());
                i += 1;
            }
        }
        out
    }

    /// `cond` (with the named bounds of `decls`, `const sycl_u64 name = value;`) as words.
    pub fn parse(cond: &str, decls: &[String]) -> Option<Vec<u32>> {
        let decls: HashMap<String, String> = decls
            .iter()
            .filter_map(|d| {
                let rest = d.strip_prefix("const sycl_u64 ")?.strip_suffix(';')?;
                let (name, value) = rest.split_once(" = ")?;
                Some((name.to_owned(), value.to_owned()))
            })
            .collect();
        let mut p = P {
            toks: tokens(cond),
            at: 0,
            decls: &decls,
            depth: 0,
        };
        let mut out = Vec::new();
        p.expr(&mut out)?;
        (p.at == p.toks.len()).then_some(out)
    }

    fn num(s: &str) -> Option<u64> {
        s.strip_suffix("ul")
            .or_else(|| s.strip_suffix("ull"))
            .unwrap_or(s)
            .parse()
            .ok()
    }

    impl P<'_> {
        fn peek(&self, k: usize) -> Option<&str> {
            self.toks.get(self.at + k).map(String::as_str)
        }

        fn eat(&mut self, t: &str) -> Option<()> {
            (self.peek(0)? == t).then(|| self.at += 1)
        }

        fn next(&mut self) -> Option<String> {
            let t = self.toks.get(self.at)?.clone();
            self.at += 1;
            Some(t)
        }

        /// `SYCL_AXIS(d)`: the SYCL dimension.
        fn axis(&mut self) -> Option<u32> {
            self.eat("SYCL_AXIS")?;
            self.eat("(")?;
            let d = num(&self.next()?)?;
            self.eat(")")?;
            (d < 3).then_some(d as u32)
        }

        fn expr(&mut self, out: &mut Vec<u32>) -> Option<()> {
            let mut lhs = Vec::new();
            self.atom(&mut lhs)?;
            let cmp = match self.peek(0) {
                Some("<") => Some(0),
                Some("<=") => Some(1),
                Some(">=") => Some(2),
                Some(">") => Some(3),
                _ => None,
            };
            let lhs = match cmp {
                Some(op) => {
                    self.at += 1;
                    let mut w = vec![7, op];
                    w.extend(lhs);
                    self.atom(&mut w)?;
                    w
                }
                None => lhs,
            };
            if self.eat("?").is_some() {
                out.push(8);
                out.extend(lhs);
                self.expr(out)?;
                self.eat(":")?;
                self.expr(out)
            } else {
                out.extend(lhs);
                Some(())
            }
        }

        fn atom(&mut self, out: &mut Vec<u32>) -> Option<()> {
            self.depth += 1;
            if self.depth > 200 {
                return None;
            }
            let t = self.next()?;
            let r = match t.as_str() {
                "(" => {
                    if self.peek(0) == Some("(")
                        && self.peek(1) == Some("sycl_u64")
                        && self.peek(2) == Some(")")
                    {
                        // A conversion to u64 of an unsigned value: no change.
                        self.at += 3;
                    }
                    self.expr(out)?;
                    self.eat(")")
                }
                "SYCL_U64C" => {
                    self.eat("(")?;
                    let v = num(&self.next()?)?;
                    self.eat(")")?;
                    out.extend([0, v as u32, (v >> 32) as u32]);
                    Some(())
                }
                "SYCL_LOCAL_RANGE" | "sycl_group_range" => {
                    self.eat("(")?;
                    let d = self.axis()?;
                    self.eat(")")?;
                    out.extend([if t == "SYCL_LOCAL_RANGE" { 1 } else { 2 }, d]);
                    Some(())
                }
                f if f.starts_with("sycl_b") && self.peek(0) == Some("(") => {
                    let (code, arity) = match &f[6..] {
                        "add" => (0, 2),
                        "mul" => (1, 2),
                        "min" => (2, 2),
                        "max" => (3, 2),
                        "sub" => (4, 2),
                        "div" => (5, 2),
                        "wrap_lo" => (6, 3),
                        _ => return None,
                    };
                    self.eat("(")?;
                    out.extend([6, code]);
                    for k in 0..arity {
                        if k > 0 {
                            self.eat(",")?;
                        }
                        self.expr(out)?;
                    }
                    self.eat(")")
                }
                name => {
                    if let Some(value) = self.decls.get(name) {
                        let mut inner = P {
                            toks: tokens(value),
                            at: 0,
                            decls: self.decls,
                            depth: self.depth,
                        };
                        inner.expr(out)?;
                        return (inner.at == inner.toks.len()).then_some(());
                    }
                    if let Some(d) = name.strip_prefix("sycl_r") {
                        let d = num(d)?;
                        (d < 3).then(|| out.extend([3, d as u32]))
                    } else if let Some(p) = name.strip_prefix('p') {
                        match p.strip_suffix("_len") {
                            Some(i) => out.extend([5, num(i)? as u32]),
                            None => out.extend([4, num(p)? as u32]),
                        }
                        Some(())
                    } else {
                        None
                    }
                }
            };
            self.depth -= 1;
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cbound::parse;

    #[test]
    fn bounds_conditions_become_words() {
        // `(sycl_b0 < SYCL_U64C(256))` with a named bound over the local range of dimension 0.
        let decls = vec![
            "const sycl_u64 sycl_b0 = sycl_badd(sycl_bmul(((sycl_u64)SYCL_LOCAL_RANGE(SYCL_AXIS(0))), SYCL_U64C(16)), SYCL_U64C(15));".to_owned(),
        ];
        let words = parse("(sycl_b0 < SYCL_U64C(256))", &decls).expect("parsed");
        assert_eq!(
            words,
            [7, 0, 6, 0, 6, 1, 1, 0, 0, 16, 0, 0, 15, 0, 0, 256, 0]
        );
        // Run-time guards: ranges, lengths, parameters, conditionals.
        let words = parse("(sycl_r1 <= p2_len)", &[]).expect("parsed");
        assert_eq!(words, [7, 1, 3, 1, 5, 2]);
        let words = parse(
            "(((sycl_u64)p0 >= SYCL_U64C(1)) ? sycl_bsub(((sycl_u64)p0), SYCL_U64C(1)) : SYCL_U64C(0))",
            &[],
        )
        .expect("parsed");
        assert_eq!(
            words,
            [8, 7, 2, 4, 0, 0, 1, 0, 6, 4, 4, 0, 0, 1, 0, 0, 0, 0]
        );
        // Anything else is refused (the access then stays checked).
        assert!(parse("(sycl_bfoo(1, 2) < SYCL_U64C(3))", &[]).is_none());
        assert!(parse("(x + 1 < SYCL_U64C(3))", &[]).is_none());
        assert!(parse("(sycl_b7 < SYCL_U64C(3))", &[]).is_none());
    }
}
