//! Property tests of the wire format and the validator.
//!
//! A seeded generator builds random functions that are valid by the rules of `validate.rs`;
//! they must validate, survive `encode`/`decode` unchanged, and their words, mutated in
//! every way we could think of, must decode to an `Err` or to a function (that then
//! validates or not), never to a panic, a stack overflow or a long loop. Fixed cases pin
//! the nesting limit, each decoding error and each rule the validator enforces.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use sycl_kernel_ir::validate::{Role, MAX_LOCAL_ARRAY, MAX_PRIVATE_ARRAY};
use sycl_kernel_ir::wire::{
    decode, decode_guards, encode, encode_guards, MAGIC, MAX_DEPTH, NONE, VERSION,
};
use sycl_kernel_ir::*;

/// The stack of the threads that decode deep nesting. `decode` takes about 11 KB of stack
/// per nesting level in a debug build (1.6 KB in release), some 2.8 MB at `MAX_DEPTH`:
/// more than the 2 MiB of a test thread, which is why the runtime reads IR on a thread of
/// its own with a large stack (`sycl-rs/src/kernel/codegen/mod.rs`).
const BIG_STACK: usize = 16 << 20;

/// Runs `f` on a thread of [`BIG_STACK`], passing its panic on.
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    let t = std::thread::Builder::new().stack_size(BIG_STACK).spawn(f);
    if let Err(e) = t.expect("a thread").join() {
        std::panic::resume_unwind(e);
    }
}

// ---- a seeded generator of valid functions

/// SplitMix64: the generator is a plain function of its seed, so a failing case is
/// reproduced by the seed alone (proptest only picks seeds).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `0..n`, `n > 0`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }

    /// Mostly random, often a value at an edge of some range (where decoders and
    /// evaluators tend to slip).
    fn edgy(&mut self) -> u64 {
        match self.below(4) {
            0 => self.pick(&[
                0,
                1,
                2,
                u32::MAX as u64,
                u32::MAX as u64 + 1,
                1 << 31,
                u64::MAX - 1,
                u64::MAX,
            ]),
            1 => self.below(300) as u64,
            _ => self.next(),
        }
    }
}

const NUMERIC: [Scalar; 7] = [
    Scalar::I32,
    Scalar::U32,
    Scalar::I64,
    Scalar::U64,
    Scalar::Usize,
    Scalar::F32,
    Scalar::F64,
];
const INTS: [Scalar; 5] = [
    Scalar::I32,
    Scalar::U32,
    Scalar::I64,
    Scalar::U64,
    Scalar::Usize,
];
const ARITH: [BinOp; 5] = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem];
const BITWISE: [BinOp; 3] = [BinOp::BitAnd, BinOp::BitOr, BinOp::BitXor];
const SHIFTS: [BinOp; 2] = [BinOp::Shl, BinOp::Shr];
const COMPARISONS: [BinOp; 6] = [
    BinOp::Eq,
    BinOp::Ne,
    BinOp::Lt,
    BinOp::Le,
    BinOp::Gt,
    BinOp::Ge,
];

/// How deep a statement's expressions nest; statements nest [`STMT_DEPTH`].
const EXPR_DEPTH: usize = 4;
const STMT_DEPTH: usize = 3;

struct Gen {
    rng: Rng,
    params: Vec<Param>,
    locals: Vec<Local>,
    ret: Option<Scalar>,
    helpers: usize,
    /// Group operations (barriers, group reductions and sub-group collectives) may appear:
    /// in the body of a work-group kernel (one with steps) only, never in its steps (which
    /// spell them as `Step::Barrier`, `Step::Reduce` and `Step::SubGroup`), in a helper or
    /// in a kernel without steps.
    group_ops: bool,
    /// Compound nodes left: keeps functions small whatever the dice say.
    fuel: usize,
}

impl Gen {
    fn ty(&mut self) -> Scalar {
        self.rng.pick(&Scalar::ALL)
    }

    /// Locals a `let` may give a value: scalars and private arrays.
    fn let_locals(&self) -> Vec<usize> {
        (0..self.locals.len())
            .filter(|&l| !self.locals[l].is_work_group_array())
            .collect()
    }

    fn scalar_locals(&self, ok: impl Fn(Scalar) -> bool) -> Vec<usize> {
        (0..self.locals.len())
            .filter(|&l| self.locals[l].array.is_none() && ok(self.locals[l].ty))
            .collect()
    }

    /// Slices and work-group local arrays (what atomics update) of element `elem`.
    fn atomic_bases(&self, elem: Scalar, write: bool) -> Vec<Base> {
        let mut b = self.bases(Some(elem), write);
        b.retain(|b| self.struct_size(*b).is_none());
        b.into_iter()
            .filter(|b| match b {
                Base::Local(l) => self.locals[*l].is_work_group_array(),
                Base::Param(_) => true,
            })
            .collect()
    }

    /// Slices and arrays of element `elem` (any if `None`), writable ones only if `write`.
    fn bases(&self, elem: Option<Scalar>, write: bool) -> Vec<Base> {
        let fits = |t: Scalar| elem.is_none() || elem == Some(t);
        let params = self
            .params
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match *p {
                Param::Slice { elem, mutable } if fits(elem) && (mutable || !write) => {
                    Some(Base::Param(i))
                }
                Param::Structs { size, mutable }
                    if (mutable || !write) && elem.map_or(true, |t| field_fits(t, size)) =>
                {
                    Some(Base::Param(i))
                }
                _ => None,
            });
        let locals = self.locals.iter().enumerate().filter_map(|(l, local)| {
            (local.array.is_some() && fits(local.ty)).then_some(Base::Local(l))
        });
        params.chain(locals).collect()
    }

    /// A memory order `op` allows and a scope `base` allows (local arrays: the work-group).
    fn ordering(&mut self, op: AtomicOp, base: Base) -> (MemoryOrder, MemoryScope) {
        let orders: Vec<MemoryOrder> = MemoryOrder::ALL
            .into_iter()
            .filter(|o| op.allows(*o))
            .collect();
        let scope = match base {
            Base::Local(_) => MemoryScope::WorkGroup,
            Base::Param(_) => self.rng.pick(&MemoryScope::ALL),
        };
        (self.rng.pick(&orders), scope)
    }

    /// The element type of `b`: a struct slice's is a field type picked here.
    fn elem(&mut self, b: Base) -> Scalar {
        match b {
            Base::Param(i) => match self.params[i] {
                Param::Slice { elem, .. } => elem,
                Param::Structs { size, .. } => {
                    let fits: Vec<Scalar> = Scalar::ALL
                        .into_iter()
                        .filter(|t| field_fits(*t, size))
                        .collect();
                    self.rng.pick(&fits)
                }
                Param::Scalar(_) => unreachable!("bases() gives slices"),
            },
            Base::Local(l) => self.locals[l].ty,
        }
    }

    fn struct_size(&self, b: Base) -> Option<u32> {
        match b {
            Base::Param(i) => match self.params[i] {
                Param::Structs { size, .. } => Some(size),
                _ => None,
            },
            Base::Local(_) => None,
        }
    }

    /// The field of type `t` an access of `b` reaches (`None` unless a struct slice): an
    /// aligned offset inside the struct, sometimes an array field's item.
    fn field(&mut self, b: Base, t: Scalar, depth: usize) -> Option<Box<Field>> {
        let size = self.struct_size(b)?;
        let width = t.size() as u32;
        let slots = size / width;
        let start = self.rng.below(slots as usize) as u32;
        let item = match self.rng.one_in(2) {
            true => {
                let len = 1 + self.rng.below((slots - start) as usize) as u32;
                Some(FieldItem {
                    len,
                    check: self.check(),
                    index: self.expr(Scalar::Usize, depth),
                })
            }
            false => None,
        };
        Some(Box::new(Field {
            ty: t,
            offset: start * width,
            item,
        }))
    }

    /// A bound; over the work-group size and numbers only unless `run_time` (what `When`
    /// may hold), else also over ranges, unsigned scalar parameters and slice lengths
    /// (what `Guard` may hold).
    fn bound(&mut self, depth: usize, run_time: bool) -> Bound {
        if depth == 0 || self.rng.one_in(3) {
            let mut leaves = vec![
                Bound::Num(self.rng.edgy()),
                Bound::LocalRange(self.rng.below(3) as u8),
            ];
            if run_time {
                leaves.push(Bound::GroupRange(self.rng.below(3) as u8));
                leaves.push(Bound::GlobalRange(self.rng.below(3) as u8));
                for (i, p) in self.params.iter().enumerate() {
                    match *p {
                        Param::Scalar(t) if t.is_unsigned() => leaves.push(Bound::Param(i)),
                        Param::Slice { .. } | Param::Structs { .. } => leaves.push(Bound::Len(i)),
                        Param::Scalar(_) => {}
                    }
                }
            }
            return self.rng.pick(&leaves);
        }
        let d = depth - 1;
        let sub = |g: &mut Self| Box::new(g.bound(d, run_time));
        match self.rng.below(4) {
            0 => {
                let f = self.rng.pick(&BoundFn::ALL);
                Bound::Fn(f, sub(self), sub(self))
            }
            1 => Bound::WrapLo(sub(self), sub(self), sub(self)),
            2 => {
                let op = self.rng.pick(&BoundCmp::ALL);
                Bound::Cmp(op, sub(self), sub(self))
            }
            _ => Bound::Cond(sub(self), sub(self), sub(self)),
        }
    }

    fn check(&mut self) -> Check {
        match self.rng.below(4) {
            0 => Check::Checked,
            1 => Check::Proved,
            2 => Check::When(self.bound(3, false)),
            _ => Check::Guard(self.bound(3, true)),
        }
    }

    fn lit(&mut self, t: Scalar) -> u64 {
        match t {
            Scalar::Bool => self.rng.below(2) as u64,
            Scalar::F32 => (self.rng.next() as f32).to_bits() as u64,
            Scalar::F64 => (self.rng.next() as f64 / 3.0).to_bits(),
            t if t.bits() == 32 => self.rng.edgy() as u32 as u64,
            _ => self.rng.edgy(),
        }
    }

    fn leaf(&mut self, t: Scalar) -> Expr {
        let mut kinds = vec![ExprKind::Lit(self.lit(t))];
        for l in self.scalar_locals(|lt| lt == t) {
            kinds.push(ExprKind::Local(l));
        }
        for (i, p) in self.params.iter().enumerate() {
            if *p == Param::Scalar(t) {
                kinds.push(ExprKind::Param(i));
            }
        }
        if t == Scalar::Usize {
            for b in self.bases(None, false) {
                kinds.push(ExprKind::Len(b));
            }
            let q = self.rng.pick(&Query::ALL);
            kinds.push(ExprKind::Query(q, self.rng.below(3) as u8));
            kinds.push(ExprKind::SubGroupQuery(self.rng.pick(&SubGroupQuery::ALL)));
        }
        let kind = self.rng.pick(&kinds);
        Expr {
            ty: t,
            kind,
            src: (),
        }
    }

    fn exprs(&mut self, ts: &[Scalar], depth: usize) -> Vec<Expr> {
        ts.iter().map(|&t| self.expr(t, depth)).collect()
    }

    /// An expression of type `t`: each arm builds its kind when `t` (and the function's
    /// parameters and locals) allow it, else the dice are cast again.
    fn expr(&mut self, t: Scalar, depth: usize) -> Expr {
        if depth == 0 || self.fuel == 0 || self.rng.one_in(4) {
            return self.leaf(t);
        }
        self.fuel = self.fuel.saturating_sub(1);
        let d = depth - 1;
        let b = Box::new;
        loop {
            let kind = match self.rng.below(14) {
                0 => {
                    let bases = self.bases(Some(t), false);
                    if bases.is_empty() {
                        continue;
                    }
                    let base = self.rng.pick(&bases);
                    ExprKind::Load {
                        base,
                        check: self.check(),
                        index_fits_i32: self.check(),
                        index: b(self.expr(Scalar::Usize, d)),
                        field: self.field(base, t, d),
                    }
                }
                1 => {
                    let mut ops = Vec::new();
                    if t.is_signed() || t.is_float() {
                        ops.push(UnOp::Neg);
                    }
                    if t.is_int() || t == Scalar::Bool {
                        ops.push(UnOp::Not);
                    }
                    if ops.is_empty() {
                        continue;
                    }
                    let op = self.rng.pick(&ops);
                    ExprKind::Unary(op, b(self.expr(t, d)))
                }
                2 | 3 => {
                    let (op, x, y) = if t == Scalar::Bool {
                        match self.rng.below(3) {
                            0 => {
                                let x = self.ty();
                                (self.rng.pick(&COMPARISONS), x, x)
                            }
                            1 => (self.rng.pick(&[BinOp::And, BinOp::Or]), t, t),
                            _ => (self.rng.pick(&BITWISE), t, t),
                        }
                    } else if t.is_int() {
                        match self.rng.below(3) {
                            0 => (self.rng.pick(&ARITH), t, t),
                            1 => (self.rng.pick(&BITWISE), t, t),
                            _ => (self.rng.pick(&SHIFTS), t, self.rng.pick(&INTS)),
                        }
                    } else {
                        (self.rng.pick(&ARITH), t, t)
                    };
                    // The no-signed-wrap fact exists for `u32` `+ - *` only, never a guard.
                    let no_wrap =
                        if t == Scalar::U32 && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
                            match self.rng.below(3) {
                                0 => Check::Checked,
                                1 => Check::Proved,
                                _ => Check::When(self.bound(3, false)),
                            }
                        } else {
                            Check::Checked
                        };
                    ExprKind::Binary(op, b(self.expr(x, d)), b(self.expr(y, d)), no_wrap)
                }
                4 => {
                    // Halves convert from `f32` only, and to `f32`/`f64` only.
                    let from = if t.is_half() {
                        self.rng.pick(&[t, Scalar::F32])
                    } else if t.is_int() {
                        let from = self.rng.pick(&Scalar::ALL);
                        if from.is_half() {
                            continue;
                        }
                        from
                    } else if t.is_float() {
                        let from = self.rng.pick(&NUMERIC);
                        if from.is_half() && t != Scalar::F32 && t != Scalar::F64 {
                            continue;
                        }
                        from
                    } else {
                        t
                    };
                    ExprKind::Cast(b(self.expr(from, d)))
                }
                5 => {
                    let choices: Vec<MathFn> = MathFn::ALL
                        .into_iter()
                        .filter(|&m| {
                            if let Some(r) = m.fixed_result() {
                                t == r
                            } else if t.is_float() {
                                m.for_floats()
                            } else {
                                // No `abs` of an unsigned integer.
                                t.is_int() && m.for_ints() && !(m == MathFn::Abs && t.is_unsigned())
                            }
                        })
                        .collect();
                    if choices.is_empty() {
                        continue;
                    }
                    let m = self.rng.pick(&choices);
                    // Bit counts are `u32`s of any integer, `is_nan` a `bool` of any float.
                    let operand = match m.fixed_result() {
                        Some(Scalar::U32) => self.rng.pick(&[
                            Scalar::I32,
                            Scalar::U32,
                            Scalar::I64,
                            Scalar::U64,
                            Scalar::Usize,
                        ]),
                        Some(_) => self.rng.pick(&[Scalar::F32, Scalar::F64]),
                        None => t,
                    };
                    let mut types = vec![operand];
                    types.extend(vec![m.fixed_arg().unwrap_or(operand); m.extra_args()]);
                    ExprKind::Math(m, self.exprs(&types, d))
                }
                6 if t == Scalar::Usize => {
                    let q = self.rng.pick(&Query::ALL);
                    ExprKind::Query(q, self.rng.below(3) as u8)
                }
                7 => {
                    // (Stores are statements: `stmt` makes them.)
                    let ops: Vec<AtomicOp> = AtomicOp::ALL
                        .into_iter()
                        .filter(|op| op.takes(t) && *op != AtomicOp::Store)
                        .collect();
                    if ops.is_empty() {
                        continue;
                    }
                    let op = self.rng.pick(&ops);
                    let bases = self.atomic_bases(t, op != AtomicOp::Load);
                    if bases.is_empty() {
                        continue;
                    }
                    let base = self.rng.pick(&bases);
                    let (order, scope) = self.ordering(op, base);
                    ExprKind::Atomic {
                        op,
                        base,
                        index: b(self.expr(Scalar::Usize, d)),
                        values: self.exprs(&vec![t; op.values()], d),
                        order,
                        scope,
                    }
                }
                8 if self.group_ops => {
                    let ops: Vec<GroupOp> = GroupOp::all()
                        .into_iter()
                        .filter(|op| group_operands(*op, t).is_some())
                        .collect();
                    if ops.is_empty() {
                        continue;
                    }
                    let op = self.rng.pick(&ops);
                    let ts = group_operands(op, t).expect("filtered");
                    ExprKind::Group(op, self.exprs(&ts, d))
                }
                9 if self.group_ops => {
                    let ops: Vec<SubGroupOp> = SubGroupOp::all()
                        .into_iter()
                        .filter(|op| sub_group_operands(*op, t).is_some())
                        .collect();
                    if ops.is_empty() {
                        continue;
                    }
                    let op = self.rng.pick(&ops);
                    let ts = sub_group_operands(op, t).expect("filtered");
                    ExprKind::SubGroup(op, self.exprs(&ts, d))
                }
                10 if self.helpers > 0 => {
                    // Argument types are checked against the callee when linking, not here.
                    let k = self.rng.below(self.helpers);
                    let ts: Vec<Scalar> = (0..self.rng.below(4)).map(|_| self.ty()).collect();
                    let mut args = self.exprs(&ts, d);
                    // Sometimes an array passed whole (once per call).
                    let arrays: Vec<usize> = (0..self.locals.len())
                        .filter(|&l| self.locals[l].array.is_some())
                        .collect();
                    if !arrays.is_empty() && self.rng.below(2) == 0 {
                        let l = self.rng.pick(&arrays);
                        let at = self.rng.below(args.len() + 1);
                        let ty = self.locals[l].ty;
                        args.insert(
                            at,
                            Expr {
                                ty,
                                kind: ExprKind::ArrayArg(l),
                                src: (),
                            },
                        );
                    }
                    ExprKind::Call(k, args)
                }
                11 => {
                    let c = self.expr(Scalar::Bool, d);
                    let x = self.expr(t, d);
                    ExprKind::Select(b(c), b(x), b(self.expr(t, d)))
                }
                12 if t == Scalar::Usize => {
                    let bases = self.bases(None, false);
                    if bases.is_empty() {
                        continue;
                    }
                    ExprKind::Len(self.rng.pick(&bases))
                }
                13 if t == Scalar::Usize => {
                    ExprKind::SubGroupQuery(self.rng.pick(&SubGroupQuery::ALL))
                }
                _ => continue,
            };
            return Expr {
                ty: t,
                kind,
                src: (),
            };
        }
    }

    /// A compound operator on a target of type `t`, and the type of its value: Rust's
    /// compound assignments are arithmetic, bitwise and shifts (no comparison, `&&`, `||`).
    fn compound(&mut self, t: Scalar) -> (BinOp, Scalar) {
        if t == Scalar::Bool {
            (self.rng.pick(&BITWISE), t)
        } else if t.is_float() {
            (self.rng.pick(&ARITH), t)
        } else {
            match self.rng.below(3) {
                0 => (self.rng.pick(&ARITH), t),
                1 => (self.rng.pick(&BITWISE), t),
                _ => (self.rng.pick(&SHIFTS), self.rng.pick(&INTS)),
            }
        }
    }

    fn for_header(&mut self) -> Option<For> {
        let vars = self.scalar_locals(|t| t.is_int());
        if vars.is_empty() {
            return None;
        }
        let var = self.rng.pick(&vars);
        let t = self.locals[var].ty;
        let start = self.expr(t, EXPR_DEPTH);
        let end = self.expr(t, EXPR_DEPTH);
        let inclusive = self.rng.one_in(2);
        let step = if self.rng.one_in(2) {
            Some(self.expr(Scalar::Usize, EXPR_DEPTH))
        } else {
            None
        };
        Some(For {
            var,
            start,
            end,
            inclusive,
            step,
            counts_below_half: self.check(),
            start_below_half: self.check(),
            counts_in_u32: self.check(),
            counts_in_u64: self.check(),
            counts_in_i32: self.check(),
            start_per_item: self.rng.below(2) == 1,
        })
    }

    fn block(&mut self, depth: usize, in_loop: bool) -> Vec<Stmt> {
        let n = if depth == 0 || self.fuel == 0 {
            self.rng.below(2)
        } else {
            self.rng.below(5)
        };
        (0..n).map(|_| self.stmt(depth, in_loop)).collect()
    }

    fn stmt(&mut self, depth: usize, in_loop: bool) -> Stmt {
        let e = EXPR_DEPTH;
        let nested = depth > 0 && self.fuel > 0;
        loop {
            return match self.rng.below(18) {
                0 => {
                    let ls = self.let_locals();
                    if ls.is_empty() {
                        continue;
                    }
                    let l = self.rng.pick(&ls);
                    Stmt::new(StmtKind::Let(l, self.expr(self.locals[l].ty, e)))
                }
                1 => {
                    let ls = self.scalar_locals(|_| true);
                    if ls.is_empty() {
                        continue;
                    }
                    let l = self.rng.pick(&ls);
                    let t = self.locals[l].ty;
                    let (op, vt) = match self.rng.one_in(2) {
                        true => (None, t),
                        false => {
                            let (op, vt) = self.compound(t);
                            (Some(op), vt)
                        }
                    };
                    Stmt::new(StmtKind::AssignLocal(l, op, self.expr(vt, e)))
                }
                2 => {
                    let bases = self.bases(None, true);
                    if bases.is_empty() {
                        continue;
                    }
                    let base = self.rng.pick(&bases);
                    let elem = self.elem(base);
                    let (op, vt) = match self.rng.one_in(2) {
                        true => (None, elem),
                        false => {
                            let (op, vt) = self.compound(elem);
                            (Some(op), vt)
                        }
                    };
                    Stmt::new(StmtKind::Store {
                        base,
                        check: self.check(),
                        index_fits_i32: self.check(),
                        op,
                        index: self.expr(Scalar::Usize, e),
                        value: self.expr(vt, e),
                        field: self.field(base, elem, e),
                    })
                }
                3 | 4 => {
                    let t = self.ty();
                    Stmt::new(StmtKind::Expr(self.expr(t, e)))
                }
                5 if nested => {
                    self.fuel = self.fuel.saturating_sub(1);
                    let c = self.expr(Scalar::Bool, e);
                    let a = self.block(depth - 1, in_loop);
                    Stmt::new(StmtKind::If(c, a, self.block(depth - 1, in_loop)))
                }
                6 if nested => {
                    self.fuel = self.fuel.saturating_sub(1);
                    let c = self.expr(Scalar::Bool, e);
                    Stmt::new(StmtKind::While(c, self.block(depth - 1, true)))
                }
                7 if nested => {
                    // A `loop` that can end: a (conditional) `break` somewhere in it.
                    self.fuel = self.fuel.saturating_sub(1);
                    let mut body = self.block(depth - 1, true);
                    let brk = match self.rng.one_in(2) {
                        true => StmtKind::Break,
                        false => StmtKind::If(
                            self.expr(Scalar::Bool, 2),
                            vec![Stmt::new(StmtKind::Break)],
                            vec![],
                        ),
                    };
                    let at = self.rng.below(body.len() + 1);
                    body.insert(at, Stmt::new(brk));
                    Stmt::new(StmtKind::Loop(body))
                }
                8 if nested => {
                    let Some(h) = self.for_header() else { continue };
                    self.fuel = self.fuel.saturating_sub(1);
                    Stmt::new(StmtKind::For(Box::new(h), self.block(depth - 1, true)))
                }
                9 if in_loop => Stmt::new(StmtKind::Break),
                10 if in_loop => Stmt::new(StmtKind::Continue),
                11 => match self.ret {
                    None => Stmt::new(StmtKind::Return(None)),
                    Some(t) => Stmt::new(StmtKind::Return(Some(self.expr(t, e)))),
                },
                12 if self.group_ops => Stmt::new(StmtKind::Barrier),
                13 if self.ret.is_none() => {
                    let order = self.rng.pick(&MemoryOrder::ALL[1..]);
                    Stmt::new(StmtKind::Fence(order, self.rng.pick(&MemoryScope::ALL)))
                }
                14 => {
                    let t = self
                        .rng
                        .pick(&[Scalar::I32, Scalar::U32, Scalar::U64, Scalar::F32]);
                    let bases = self.atomic_bases(t, true);
                    if bases.is_empty() {
                        continue;
                    }
                    let base = self.rng.pick(&bases);
                    let (order, scope) = self.ordering(AtomicOp::Store, base);
                    Stmt::new(StmtKind::Expr(Expr {
                        ty: t,
                        kind: ExprKind::Atomic {
                            op: AtomicOp::Store,
                            base,
                            index: Box::new(self.expr(Scalar::Usize, e)),
                            values: vec![self.expr(t, e)],
                            order,
                            scope,
                        },
                        src: (),
                    }))
                }
                15 => {
                    // A private array copied whole from or to a struct slice's element, at
                    // an offset where its items fit.
                    let to_slice = self.rng.one_in(2);
                    let mut copies = Vec::new();
                    for (i, p) in self.params.iter().enumerate() {
                        let Param::Structs { size, mutable } = *p else {
                            continue;
                        };
                        for (l, local) in self.locals.iter().enumerate() {
                            let Some(len) = local.array_len() else {
                                continue;
                            };
                            let width = local.ty.size() as u32;
                            if local.is_private_array()
                                && field_fits(local.ty, size)
                                && len * width <= size
                                && (mutable || !to_slice)
                            {
                                copies.push((i, l, (size - len * width) / width));
                            }
                        }
                    }
                    if copies.is_empty() {
                        continue;
                    }
                    let (param, array, last) = self.rng.pick(&copies);
                    let width = self.locals[array].ty.size() as u32;
                    Stmt::new(StmtKind::CopyField {
                        param,
                        check: self.check(),
                        index_fits_i32: self.check(),
                        index: self.expr(Scalar::Usize, e),
                        offset: self.rng.below(last as usize + 1) as u32 * width,
                        array,
                        to_slice,
                    })
                }
                16 if self.ret.is_none() => Stmt::new(StmtKind::Fail(self.rng.pick(&Failure::ALL))),
                _ => continue,
            };
        }
    }

    fn steps(&mut self, depth: usize) -> Vec<Step> {
        let n = 1 + self.rng.below(4);
        let mut steps = Vec::new();
        while steps.len() < n {
            let step = match self.rng.below(6) {
                0 => Step::Region(self.block(2, false)),
                1 => {
                    let ls = self.scalar_locals(|_| true);
                    if ls.is_empty() {
                        continue;
                    }
                    let l = self.rng.pick(&ls);
                    Step::GroupLet(l, self.expr(self.locals[l].ty, EXPR_DEPTH))
                }
                2 => Step::Barrier,
                3 => {
                    let ls =
                        self.scalar_locals(|t| t.is_numeric() && !t.is_half() || t == Scalar::Bool);
                    if ls.is_empty() {
                        continue;
                    }
                    let local = self.rng.pick(&ls);
                    let t = self.locals[local].ty;
                    let ops: Vec<GroupOp> = GroupOp::all()
                        .into_iter()
                        .filter(|op| group_operands(*op, t).is_some())
                        .collect();
                    let op = self.rng.pick(&ops);
                    let ts = group_operands(op, t).expect("filtered");
                    Step::Group {
                        local,
                        op,
                        args: self.exprs(&ts, EXPR_DEPTH),
                    }
                }
                4 if depth > 0 => {
                    let Some(h) = self.for_header() else { continue };
                    Step::SyncFor(Box::new(h), self.steps(depth - 1))
                }
                5 => {
                    let ls =
                        self.scalar_locals(|t| t.is_numeric() && !t.is_half() || t == Scalar::Bool);
                    if ls.is_empty() {
                        continue;
                    }
                    let local = self.rng.pick(&ls);
                    let t = self.locals[local].ty;
                    let ops: Vec<SubGroupOp> = SubGroupOp::all()
                        .into_iter()
                        .filter(|op| sub_group_operands(*op, t).is_some())
                        .collect();
                    let op = self.rng.pick(&ops);
                    let ts = sub_group_operands(op, t).expect("filtered");
                    Step::SubGroup {
                        local,
                        op,
                        args: self.exprs(&ts, EXPR_DEPTH),
                    }
                }
                _ => continue,
            };
            steps.push(step);
        }
        steps
    }
}

/// A random valid function of `role` that may call `helpers` helpers.
fn function(seed: u64, role: Role, helpers: usize) -> Function {
    let mut rng = Rng(seed);
    let kernel = role == Role::Kernel;
    // A work-group kernel: one with steps, the only kind with local arrays (work-group
    // memory) and group operations in its body.
    let group = kernel && rng.one_in(2);
    let params = (0..rng.below(6))
        .map(|_| match (kernel && rng.one_in(2), rng.one_in(4)) {
            (true, false) => Param::Slice {
                elem: rng.pick(&NUMERIC),
                mutable: rng.one_in(2),
            },
            (true, true) => Param::Structs {
                size: rng.pick(&[2, 4, 8, 12, 24, 40]),
                mutable: rng.one_in(2),
            },
            (false, _) => Param::Scalar(rng.pick(&Scalar::ALL)),
        })
        .collect();
    let locals = (0..rng.below(9))
        .map(|_| match (group && rng.one_in(3), rng.one_in(5)) {
            (true, _) => Local {
                ty: rng.pick(&NUMERIC),
                // `1..=MAX_LOCAL_ARRAY` (and never a length of 0: the wire spells a scalar
                // that way).
                array: Some(Array::work_group(rng.pick(&[
                    1,
                    2,
                    256,
                    4096,
                    MAX_LOCAL_ARRAY,
                ]))),
                info: (),
            },
            (false, true) => Local {
                ty: rng.pick(&NUMERIC),
                array: Some(Array::private(rng.pick(&[1, 3, 64, MAX_PRIVATE_ARRAY]))),
                info: (),
            },
            (false, false) => Local {
                ty: rng.pick(&Scalar::ALL),
                array: None,
                info: (),
            },
        })
        .collect();
    let ret = (!kernel).then(|| rng.pick(&Scalar::ALL));
    let mut g = Gen {
        rng,
        params,
        locals,
        ret,
        helpers,
        group_ops: group,
        fuel: 40,
    };
    let mut body = g.block(STMT_DEPTH, false);
    if let Some(t) = g.ret {
        body.push(Stmt::new(StmtKind::Return(Some(g.expr(t, EXPR_DEPTH)))));
    }
    // Not in the steps: not even in their regions' statements.
    g.group_ops = false;
    let steps = group.then(|| g.steps(2));
    Function {
        params: g.params,
        ret: g.ret,
        locals: g.locals,
        body,
        steps,
    }
}

/// The case a seed picks: a kernel or a helper, and how many helpers it may call.
fn case(seed: u64) -> (Function, Role, usize) {
    let role = if seed % 4 == 3 {
        Role::Helper
    } else {
        Role::Kernel
    };
    let helpers = (seed >> 2) as usize % 4;
    (function(seed, role, helpers), role, helpers)
}

/// A random list of guards over `params` parameters, as `decode_guards` reads them (any
/// parameter index below `params`: types are not its business).
fn guards(seed: u64, params: usize) -> Vec<Bound> {
    let mut g = Gen {
        rng: Rng(seed),
        params: (0..params)
            .map(|i| match i % 2 {
                0 => Param::Scalar(Scalar::U32),
                _ => Param::Slice {
                    elem: Scalar::F32,
                    mutable: false,
                },
            })
            .collect(),
        locals: Vec::new(),
        ret: None,
        helpers: 0,
        group_ops: false,
        fuel: 0,
    };
    (0..g.rng.below(5)).map(|_| g.bound(4, true)).collect()
}

/// Whether a struct of `size` bytes can have a field of type `t` (its size divides it).
fn field_fits(t: Scalar, size: u32) -> bool {
    t.is_element() && t != Scalar::Usize && size % t.size() as u32 == 0
}

// ---- 1. the generator makes valid functions, of every kind of node

#[test]
fn generated_functions_validate() {
    for seed in 0..3000 {
        let (f, role, _) = case(seed);
        if let Err(e) = validate(&f, role) {
            panic!("seed {seed}: generated {role:?} does not validate: {e}\n{f:#?}");
        }
    }
}

/// The generator reaches every variant (by their `Debug` spellings: crude, but it needs no
/// walker to keep in step with the IR), each where it is legal.
#[test]
fn generator_covers_the_ir() {
    let fs: Vec<Function> = (0..3000).map(|s| case(s).0).collect();
    let all: String = fs.iter().map(|f| format!("{f:?}")).collect();
    let wanted = [
        // expressions
        "kind: Lit(",
        "kind: Local(",
        "kind: Param(",
        "kind: Load {",
        "field: Some(Field { ty: F16",
        "item: Some(FieldItem {",
        "Structs { size: 40, mutable: true }",
        "kind: Len(",
        "kind: Unary(Neg",
        "kind: Unary(Not",
        "kind: Binary(",
        "kind: Cast(",
        "kind: Math(",
        "kind: Math(Abs, [Expr { ty: I",
        "kind: Query(",
        "ty: F16",
        "ty: Bf16",
        "kind: Atomic { op: FetchAdd",
        "kind: Atomic { op: CompareExchange",
        "kind: Atomic { op: Load",
        "kind: Atomic { op: Store",
        "kind: Atomic { op: FetchXor",
        "order: Acquire",
        "order: SeqCst",
        "scope: System",
        "kind: Group(Collective(Reduce(",
        "kind: Group(Collective(InclusiveScan(",
        "kind: Group(Collective(Any)",
        "kind: Group(Broadcast",
        "kind: SubGroupQuery(",
        "kind: SubGroup(Broadcast",
        "kind: SubGroup(Collective(Reduce(",
        "kind: SubGroup(Collective(ExclusiveScan(BitXor",
        "kind: Call(",
        "kind: ArrayArg(",
        "kind: Select(",
        // the no-signed-wrap fact (the one check that ends a tuple)
        "}, Proved)",
        "}, When(",
        // statements
        "Let(",
        "AssignLocal(",
        "Store {",
        "CopyField { param",
        "to_slice: true",
        "to_slice: false",
        "If(",
        "While(",
        "Loop(",
        "For(For",
        "Break",
        "Continue",
        "Return(None)",
        "Return(Some(",
        "Barrier",
        "Fence(Release, Device)",
        "Fail(TimedOut)",
        "Fail(Mismatched)",
        // steps
        "Region(",
        "GroupLet(",
        "Group { local",
        "op: Collective(All)",
        "op: Broadcast",
        "SyncFor(",
        "SubGroup { local",
        // checks and bounds
        "When(",
        "Guard(",
        "Num(",
        "LocalRange(",
        "GroupRange(",
        "GlobalRange(",
        "Len(",
        "Fn(",
        "WrapLo(",
        "Cmp(",
        "Cond(",
        "step: Some(",
        "step: None",
        "array: Some(Array { len: 1, space: WorkGroup, len_param: None })",
        "array: Some(Array { len: 65536, space: WorkGroup, len_param: None })",
        "array: Some(Array { len: 1, space: Private, len_param: None })",
        "array: Some(Array { len: 4096, space: Private, len_param: None })",
    ];
    for w in wanted {
        assert!(all.contains(w), "the generator never makes {w}");
    }
    assert_eq!(MAX_LOCAL_ARRAY, 65536);
    assert_eq!(MAX_PRIVATE_ARRAY, 4096);
    // `Barrier` spells a statement and a step: each where it may be.
    let bodies: String = fs.iter().map(|f| format!("{:?}", f.body)).collect();
    let steps: String = fs.iter().map(|f| format!("{:?}", f.steps)).collect();
    assert!(
        bodies.contains("Barrier"),
        "the generator never makes StmtKind::Barrier"
    );
    assert!(
        steps.contains("Barrier"),
        "the generator never makes Step::Barrier"
    );
}

// ---- 2. round trips

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // The cases are seeds: a failing one is all a regression file would need, and the
        // panic message prints it.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(768))]

    #[test]
    fn functions_round_trip(seed in any::<u64>()) {
        let (f, role, helpers) = case(seed);
        prop_assert_eq!(validate(&f, role), Ok(()));
        let words = encode(&f);
        let back = decode(&words, helpers);
        prop_assert_eq!(back.as_ref(), Ok(&f));
        prop_assert_eq!(validate(&back.unwrap(), role), Ok(()));
        // The function's own guards, as the runtime stores them beside it.
        let gs = f.guards();
        prop_assert_eq!(decode_guards(&encode_guards(&gs), f.params.len()), Ok(gs));
    }

    /// `map::map_function` rebuilds every node in place: through a map that changes
    /// nothing, every generated function comes back equal.
    #[test]
    fn the_stage_map_keeps_the_tree(seed in any::<u64>()) {
        let (f, _, _) = case(seed);
        prop_assert_eq!(map::map_function(&f, &mut Same), f);
    }

    #[test]
    fn guard_lists_round_trip(seed in any::<u64>(), params in 1usize..6) {
        let gs = guards(seed, params);
        let words = encode_guards(&gs);
        prop_assert_eq!(words.is_empty(), gs.is_empty());
        prop_assert_eq!(decode_guards(&words, params), Ok(gs));
    }
}

/// A [`map::StageMap`] from the resolved stage to itself that keeps every payload.
struct Same;

impl map::StageMap<Resolved, Resolved> for Same {
    fn ty(&mut self, t: &Scalar) -> Scalar {
        *t
    }
    fn lit(&mut self, l: &u64, _: &Scalar) -> u64 {
        *l
    }
    fn callee(&mut self, c: &usize, _: &[Expr], _: &Scalar) -> usize {
        *c
    }
    fn src(&mut self, _: &()) {}
    fn local_info(&mut self, _: &Local) {}
    fn access(&mut self, _: Base, _: &Expr, c: &Check, fits: &Check) -> (Check, Check) {
        (c.clone(), fits.clone())
    }
    fn field_item(&mut self, item: &FieldItem) -> Check {
        item.check.clone()
    }
    fn binary(&mut self, _: &Expr, fact: &Check) -> Check {
        fact.clone()
    }
    fn for_facts(&mut self, h: &For) -> map::ForFacts<Resolved> {
        map::ForFacts {
            counts_below_half: h.counts_below_half.clone(),
            start_below_half: h.start_below_half.clone(),
            counts_in_u32: h.counts_in_u32.clone(),
            counts_in_u64: h.counts_in_u64.clone(),
            counts_in_i32: h.counts_in_i32.clone(),
            start_per_item: h.start_per_item,
        }
    }
}

// ---- 3. malformed words

/// Words a mutation writes: mostly values that mean something somewhere (tags, `NONE`,
/// counts far beyond the input), some random.
fn word() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8,
            12,
            13,
            15,
            16,
            255,
            256,
            0x7FFF_FFFF,
            0x8000_0000,
            u32::MAX - 1,
            NONE,
            MAGIC,
            VERSION,
        ]),
        0u32..32,
        any::<u32>(),
    ]
}

/// Word patterns that nest when repeated, wherever they land: unary `!` on a `bool`, a
/// cast, a select's condition, `loop` statements (or a bound's `Fn(Add, ..)`), `if`s,
/// a bound's `wrap_lo`, regions of steps.
const BOMBS: [&[u32]; 7] = [
    &[5, 0, 1],
    &[7, 2],
    &[13, 0],
    &[6, 1],
    &[4, 0, 0, 1],
    &[7],
    &[0, 1],
];

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u32),
    Flip(usize, u32),
    Insert(usize, u32),
    Delete(usize),
    Truncate(usize),
    /// At a position, a pattern of [`BOMBS`] repeated this many times.
    Bomb(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), word()).prop_map(|(i, v)| Mutation::Set(i, v)),
        2 => (any::<usize>(), 0u32..32).prop_map(|(i, b)| Mutation::Flip(i, b)),
        2 => (any::<usize>(), word()).prop_map(|(i, v)| Mutation::Insert(i, v)),
        2 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), 0..BOMBS.len(), 1usize..5000)
            .prop_map(|(i, k, n)| Mutation::Bomb(i, k, n)),
    ]
}

fn mutate(words: &mut Vec<u32>, m: &Mutation) {
    let len = words.len();
    match *m {
        Mutation::Set(i, v) if len > 0 => words[i % len] = v,
        Mutation::Flip(i, b) if len > 0 => words[i % len] ^= 1 << b,
        Mutation::Insert(i, v) => words.insert(i % (len + 1), v),
        Mutation::Delete(i) if len > 0 => {
            words.remove(i % len);
        }
        Mutation::Truncate(i) => words.truncate(i % (len + 1)),
        Mutation::Bomb(i, k, n) => {
            let at = i % (len + 1);
            let bomb = BOMBS[k].repeat(n);
            words.splice(at..at, bomb);
        }
        _ => {}
    }
}

/// Decoding (and validating what decodes) ends quickly, without a panic; what decodes is
/// exactly what the words spell (encoding it gives them back).
fn survives(words: &[u32], helpers: usize) -> Result<(), TestCaseError> {
    let start = Instant::now();
    if let Ok(f) = decode(words, helpers) {
        let _ = validate(&f, Role::Kernel);
        let _ = validate(&f, Role::Helper);
        let _ = f.guards();
        prop_assert_eq!(encode(&f), words);
    }
    prop_assert!(
        start.elapsed() < Duration::from_secs(2),
        "decoding took long"
    );
    Ok(())
}

/// Runs a property on [`BIG_STACK`], where nesting bombs may reach `MAX_DEPTH`; a panic
/// inside it fails the case (proptest catches it and shrinks the input).
fn property<S>(cases: u32, strategy: S, test: fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy + Send + 'static,
{
    on_big_stack(move || {
        if let Err(e) = TestRunner::new(config(cases)).run(&strategy, test) {
            panic!("{e}");
        }
    });
}

#[test]
fn mutated_functions_never_panic() {
    let strategy = (
        any::<u64>(),
        0usize..4,
        prop::collection::vec(mutation(), 1..6),
    );
    property(4096, strategy, |(seed, helpers, muts)| {
        let mut words = encode(&case(seed).0);
        for m in &muts {
            mutate(&mut words, m);
        }
        survives(&words, helpers)
    });
}

#[test]
fn mutated_guards_never_panic() {
    let strategy = (
        any::<u64>(),
        0usize..6,
        prop::collection::vec(mutation(), 1..4),
    );
    property(1024, strategy, |(seed, params, muts)| {
        let mut words = encode_guards(&guards(seed, params.max(1)));
        for m in &muts {
            mutate(&mut words, m);
        }
        let start = Instant::now();
        if let Ok(gs) = decode_guards(&words, params) {
            prop_assert_eq!(encode_guards(&gs), words);
        }
        prop_assert!(
            start.elapsed() < Duration::from_secs(2),
            "decoding took long"
        );
        Ok(())
    });
}

#[test]
fn random_words_never_panic() {
    let strategy = (0usize..4, prop::collection::vec(word(), 0..64));
    property(1024, strategy, |(helpers, tail)| {
        // A valid header, so the garbage reaches the parameters, locals and body.
        let mut words = vec![MAGIC, VERSION];
        words.extend(tail);
        survives(&words, helpers)
    });
}

/// The words are self-delimiting: no strict prefix of a function decodes.
#[test]
fn every_truncation_is_an_error() {
    for seed in 0..200 {
        let (f, _, helpers) = case(seed);
        let words = encode(&f);
        for n in 0..words.len() {
            assert!(
                decode(&words[..n], helpers).is_err(),
                "seed {seed}: a prefix of {n} of {} words decodes",
                words.len()
            );
        }
    }
}

// ---- nesting limits

/// A kernel of one statement.
fn kernel(locals: Vec<Local>, body: Vec<Stmt>) -> Function {
    Function {
        params: vec![Param::Scalar(Scalar::U32)],
        ret: None,
        locals,
        body,
        steps: None,
    }
}

fn bool_lit() -> Expr {
    Expr {
        ty: Scalar::Bool,
        kind: ExprKind::Lit(1),
        src: (),
    }
}

/// `!!..!true`, `n` times.
fn nots(n: usize) -> Expr {
    (0..n).fold(bool_lit(), |e, _| Expr {
        ty: Scalar::Bool,
        kind: ExprKind::Unary(UnOp::Not, Box::new(e)),
        src: (),
    })
}

fn nested_nots(n: usize) -> Function {
    kernel(vec![], vec![Stmt::new(StmtKind::Expr(nots(n)))])
}

/// `n` `loop`s inside each other, the innermost one breaking.
fn nested_loops(n: usize) -> Function {
    let inner = (0..n).fold(vec![Stmt::new(StmtKind::Break)], |b, _| {
        vec![Stmt::new(StmtKind::Loop(b))]
    });
    kernel(vec![], inner)
}

/// `n` `if`s inside each other, each with a condition of `!`s and a barrier in its `else`
/// (in the body of a work-group kernel, the one place a barrier statement may be).
fn nested_ifs(n: usize) -> Function {
    let inner = (0..n).fold(vec![Stmt::new(StmtKind::Return(None))], |b, _| {
        vec![Stmt::new(StmtKind::If(
            nots(3),
            b,
            vec![Stmt::new(StmtKind::Barrier)],
        ))]
    });
    Function {
        steps: Some(vec![Step::Barrier]),
        ..kernel(vec![], inner)
    }
}

/// A store whose check is a guard of `n` nested saturating additions.
fn nested_bound(n: usize) -> Function {
    let g = (0..n).fold(Bound::Param(0), |b, _| {
        Bound::Fn(BoundFn::Add, Box::new(b), Box::new(Bound::LocalRange(0)))
    });
    let zero = Expr {
        ty: Scalar::Usize,
        kind: ExprKind::Lit(0),
        src: (),
    };
    let store = StmtKind::Store {
        base: Base::Local(0),
        check: Check::Guard(g),
        index_fits_i32: Check::Proved,
        op: None,
        index: zero,
        value: Expr {
            ty: Scalar::U32,
            kind: ExprKind::Lit(7),
            src: (),
        },
        field: None,
    };
    kernel(
        vec![Local {
            ty: Scalar::U32,
            array: Some(Array::work_group(64)),
            info: (),
        }],
        vec![Stmt::new(store)],
    )
}

/// `n` sync `for`s inside each other, each with a barrier.
fn nested_sync_fors(n: usize) -> Function {
    let header = For {
        var: 0,
        start: Expr {
            ty: Scalar::U32,
            kind: ExprKind::Lit(0),
            src: (),
        },
        end: Expr {
            ty: Scalar::U32,
            kind: ExprKind::Param(0),
            src: (),
        },
        inclusive: false,
        step: None,
        counts_below_half: Check::Proved,
        start_below_half: Check::Checked,
        counts_in_u32: Check::Proved,
        counts_in_u64: Check::Checked,
        counts_in_i32: Check::Checked,
        start_per_item: false,
    };
    let steps = (0..n).fold(vec![Step::Barrier], |s, _| {
        vec![Step::SyncFor(Box::new(header.clone()), s)]
    });
    Function {
        steps: Some(steps),
        ..kernel(
            vec![Local {
                ty: Scalar::U32,
                array: None,
                info: (),
            }],
            vec![],
        )
    }
}

/// Decodes `f` as a kernel calling no helper, and validates it when it decodes.
fn decode_kernel(f: &Function) -> Result<Function, WireError> {
    let g = decode(&encode(f), 0)?;
    validate(&g, Role::Kernel)?;
    Ok(g)
}

fn too_deep(r: Result<Function, WireError>) {
    match r {
        Err(e) => assert_eq!(e.what, "nesting too deep", "{e}"),
        Ok(_) => panic!("decoded beyond MAX_DEPTH"),
    }
}

/// Every kind of nesting decodes and validates up to the limit (which the test thread's
/// stack, 2 MiB unless `RUST_MIN_STACK` says otherwise, must hold in a debug build), and
/// is an error one level past it and far past it.
#[test]
fn nesting_up_to_the_limit_and_past_it() {
    on_big_stack(nesting_up_to_the_limit_and_past_it_on);
}

fn nesting_up_to_the_limit_and_past_it_on() {
    // The body's block is one level, the literal another.
    let f = nested_nots(MAX_DEPTH - 2);
    assert_eq!(decode_kernel(&f), Ok(f));
    too_deep(decode_kernel(&nested_nots(MAX_DEPTH - 1)));
    too_deep(decode_kernel(&nested_nots(10_000)));

    let f = nested_loops(MAX_DEPTH - 1);
    assert_eq!(decode_kernel(&f), Ok(f));
    too_deep(decode_kernel(&nested_loops(MAX_DEPTH)));
    too_deep(decode_kernel(&nested_loops(10_000)));

    // Each `if` is a block; the innermost one's condition nests 4 below the block
    // around it.
    let f = nested_ifs(MAX_DEPTH - 4);
    assert_eq!(decode_kernel(&f), Ok(f));
    too_deep(decode_kernel(&nested_ifs(MAX_DEPTH - 3)));
    too_deep(decode_kernel(&nested_ifs(5_000)));

    // Block, store's index... the guard's bound sits inside the block only.
    let f = nested_bound(MAX_DEPTH - 2);
    assert_eq!(decode_kernel(&f), Ok(f));
    too_deep(decode_kernel(&nested_bound(MAX_DEPTH - 1)));
    too_deep(decode_kernel(&nested_bound(10_000)));

    // The steps list is one level; each sync `for` adds one.
    let f = nested_sync_fors(MAX_DEPTH - 1);
    assert_eq!(decode_kernel(&f), Ok(f));
    too_deep(decode_kernel(&nested_sync_fors(MAX_DEPTH)));
    too_deep(decode_kernel(&nested_sync_fors(10_000)));
}

/// A nesting bomb spelled as raw words (10 000 `!`s with nothing at the bottom), as a
/// hostile or corrupted program would carry it: an error, not a stack overflow.
#[test]
fn a_nesting_bomb_is_an_error() {
    on_big_stack(a_nesting_bomb_is_an_error_on);
}

fn a_nesting_bomb_is_an_error_on() {
    let mut words = vec![MAGIC, VERSION, 0, NONE, 0, 1, 3];
    words.extend([5, 0, 1].repeat(10_000));
    let e = decode(&words, 0).unwrap_err();
    assert_eq!(e.what, "nesting too deep");
    // The same under guards.
    let mut words = vec![1];
    words.extend([6, 0].repeat(10_000));
    let e = decode_guards(&words, 1).unwrap_err();
    assert_eq!(e.what, "nesting too deep");
}

// ---- 4. fixed malformations

/// The words of a small valid kernel with a few parameters.
fn sample() -> Vec<u32> {
    let f = (0..)
        .map(case)
        .find(|(f, role, _)| *role == Role::Kernel && f.params.len() >= 2)
        .unwrap()
        .0;
    encode(&f)
}

#[test]
fn wrong_magic() {
    let mut w = sample();
    w[0] ^= 1;
    let e = decode(&w, 4).unwrap_err();
    assert!(e.what.contains("magic"), "{e}");
    assert_eq!(e.at, 0);
}

#[test]
fn wrong_version() {
    for v in [0, VERSION - 1, VERSION + 1, NONE] {
        let mut w = sample();
        w[1] = v;
        let e = decode(&w, 4).unwrap_err();
        assert!(e.what.contains("version"), "{e}");
        assert_eq!(e.at, 1);
    }
}

#[test]
fn trailing_words() {
    // The error is at the first extra word.
    for extra in [&[0][..], &[1], &[MAGIC], &[0, 0, 0]] {
        let mut w = sample();
        let n = w.len();
        w.extend(extra);
        let e = decode(&w, 4).unwrap_err();
        assert_eq!((e.what.as_str(), e.at), ("trailing words", n), "{e}");
    }
    for extra in [&[0][..], &[NONE], &[1, 0]] {
        let mut w = encode_guards(&[Bound::Num(3)]);
        let n = w.len();
        w.extend(extra);
        let e = decode_guards(&w, 1).unwrap_err();
        assert_eq!((e.what.as_str(), e.at), ("guard list", n), "{e}");
    }
}

#[test]
fn empty_and_truncated() {
    assert_eq!(decode(&[], 0).unwrap_err().what, "truncated");
    assert_eq!(decode(&[MAGIC], 0).unwrap_err().what, "truncated");
    assert_eq!(decode(&[MAGIC, VERSION], 0).unwrap_err().what, "truncated");
    assert_eq!(decode_guards(&[], 0), Ok(vec![]));
    // A list of no guards is spelled as no words, never as a count of 0.
    assert_eq!(decode_guards(&[0], 0).unwrap_err().what, "guard list");
}

#[test]
fn huge_counts() {
    for n in [u32::MAX, u32::MAX - 1, 0x8000_0000, 1 << 20] {
        // Parameters.
        let mut w = sample();
        w[2] = n;
        let e = decode(&w, 4).unwrap_err();
        assert_eq!((e.what.as_str(), e.at), ("count", 2), "{e}");
        // The body's statements, after no parameters and no locals.
        let w = [MAGIC, VERSION, 0, NONE, 0, n, 0];
        let e = decode(&w, 4).unwrap_err();
        assert_eq!((e.what.as_str(), e.at), ("count", 5), "{e}");
        // Guards.
        let e = decode_guards(&[n, 0, 1, 0], 1).unwrap_err();
        assert_eq!((e.what.as_str(), e.at), ("count", 0), "{e}");
    }
}

#[test]
fn out_of_range_indices_and_codes() {
    let cases: [(&[u32], &str); 13] = [
        // a parameter of kind 3
        (&[MAGIC, VERSION, 1, 3, 0, 0], "parameter"),
        // a struct slice whose mutable flag is 2
        (&[MAGIC, VERSION, 1, 2, 8, 2], "flag"),
        // a scalar parameter marked mutable
        (&[MAGIC, VERSION, 1, 0, 0, 1], "parameter"),
        // a type code past the last type
        (&[MAGIC, VERSION, 1, 0, 10, 0], "type"),
        // `let` of local 0 of none
        (&[MAGIC, VERSION, 0, NONE, 0, 1, 0, 0], "local"),
        // a read of parameter 1 of 1
        (
            &[MAGIC, VERSION, 1, 0, 2, 0, NONE, 0, 1, 3, 2, 2, 1, 0],
            "parameter",
        ),
        // a call of helper 0 of none
        (
            &[MAGIC, VERSION, 0, NONE, 0, 1, 3, 12, 2, 0, 0, 0],
            "helper",
        ),
        // a query of dimension 3
        (
            &[MAGIC, VERSION, 0, NONE, 0, 1, 3, 9, 5, 0, 3, 0],
            "dimension",
        ),
        // statement tag 16
        (&[MAGIC, VERSION, 0, NONE, 0, 1, 16, 0], "statement"),
        // failure 2 of 2
        (&[MAGIC, VERSION, 0, NONE, 0, 1, 15, 2, 0], "failure"),
        // a field copy on parameter 0 of none
        (&[MAGIC, VERSION, 0, NONE, 0, 1, 14, 0], "parameter"),
        // a fence of memory order 5
        (
            &[MAGIC, VERSION, 0, NONE, 0, 1, 13, 5, 0, 0],
            "memory order",
        ),
        // a fence of memory scope 3
        (
            &[MAGIC, VERSION, 0, NONE, 0, 1, 13, 1, 3, 0],
            "memory scope",
        ),
    ];
    for (words, what) in cases {
        let e = decode(words, 0).unwrap_err();
        assert_eq!(e.what, what, "{words:?}: {e}");
    }
}

#[test]
fn a_field_item_word_past_its_codes() {
    // `let v0 = x[0].f` (an `f32` at offset 4 of an 8-byte struct): its last words are the
    // field's offset, type and item word.
    let f = Function {
        params: vec![Param::Structs {
            size: 8,
            mutable: false,
        }],
        ret: None,
        locals: vec![Local {
            ty: Scalar::F32,
            array: None,
            info: (),
        }],
        body: vec![Stmt::new(StmtKind::Let(
            0,
            e(
                Scalar::F32,
                ExprKind::Load {
                    base: Base::Param(0),
                    check: Check::Checked,
                    index_fits_i32: Check::Checked,
                    index: Box::new(usize0()),
                    field: Some(Box::new(Field {
                        ty: Scalar::F32,
                        offset: 4,
                        item: None,
                    })),
                },
            ),
        ))],
        steps: None,
    };
    let mut words = encode(&f);
    assert_eq!(decode(&words, 0).as_ref(), Ok(&f));
    assert_eq!(validate(&f, Role::Kernel), Ok(()));
    let at = words.len() - 2; // (the steps flag follows)
    assert_eq!(words[at - 2..=at], [4, 6, 0]);
    words[at] = 2;
    assert_eq!(decode(&words, 0).unwrap_err().what, "field item");
}

// ---- what the validator rejects
//
// The generator only proves that valid functions pass; these prove that `validate` is not
// vacuous, one rule each.

fn e(ty: Scalar, kind: ExprKind) -> Expr {
    Expr { ty, kind, src: () }
}

fn lit(ty: Scalar, v: u64) -> Expr {
    e(ty, ExprKind::Lit(v))
}

fn usize0() -> Expr {
    lit(Scalar::Usize, 0)
}

/// Parameters: `u32`, `i32`, `&[f32]`, `&mut [u32]`; locals: `u32`, `bool`, a local
/// array of 64 `f32`.
fn base_kernel(body: Vec<Stmt>) -> Function {
    Function {
        params: vec![
            Param::Scalar(Scalar::U32),
            Param::Scalar(Scalar::I32),
            Param::Slice {
                elem: Scalar::F32,
                mutable: false,
            },
            Param::Slice {
                elem: Scalar::U32,
                mutable: true,
            },
        ],
        ret: None,
        locals: vec![
            Local {
                ty: Scalar::U32,
                array: None,
                info: (),
            },
            Local {
                ty: Scalar::Bool,
                array: None,
                info: (),
            },
            Local {
                ty: Scalar::F32,
                array: Some(Array::work_group(64)),
                info: (),
            },
        ],
        body,
        steps: None,
    }
}

fn load(base: Base, ty: Scalar, check: Check, index: Expr) -> Expr {
    e(
        ty,
        ExprKind::Load {
            base,
            check,
            index_fits_i32: Check::Checked,
            index: Box::new(index),
            field: None,
        },
    )
}

fn store(base: Base, index: Expr, value: Expr) -> Stmt {
    Stmt::new(StmtKind::Store {
        base,
        check: Check::Checked,
        index_fits_i32: Check::Checked,
        op: None,
        index,
        value,
        field: None,
    })
}

fn u32_add(no_wrap: Check) -> Expr {
    let x = || Box::new(lit(Scalar::U32, 1));
    e(Scalar::U32, ExprKind::Binary(BinOp::Add, x(), x(), no_wrap))
}

/// [`base_kernel`] run as work-groups: group operations may be in its body.
fn group_kernel(body: Vec<Stmt>) -> Function {
    Function {
        steps: Some(vec![Step::Barrier]),
        ..base_kernel(body)
    }
}

/// `group_sum(1u32)`.
fn group_sum() -> Expr {
    e(
        Scalar::U32,
        ExprKind::Group(
            GroupOp::Collective(Collective::Reduce(Reduce::Sum)),
            vec![lit(Scalar::U32, 1)],
        ),
    )
}

/// The operand types of a collective whose result is a `t`, where `t` may be one.
fn collective_operand(c: Collective, t: Scalar) -> Option<Scalar> {
    let ok = if c.is_vote() {
        t == Scalar::Bool
    } else {
        t.is_numeric() && !t.is_half() && (!c.op().is_bitwise() || t.is_int())
    };
    ok.then_some(t)
}

/// The operand types of a work-group operation whose result is a `t`, where it may be one.
fn group_operands(op: GroupOp, t: Scalar) -> Option<Vec<Scalar>> {
    match op {
        GroupOp::Collective(c) => collective_operand(c, t).map(|t| vec![t]),
        GroupOp::Broadcast => (t.is_numeric() && !t.is_half()).then(|| vec![t, Scalar::Usize]),
    }
}

/// The operand types of a sub-group operation whose result is a `t`, where it may be one.
fn sub_group_operands(op: SubGroupOp, t: Scalar) -> Option<Vec<Scalar>> {
    match op {
        SubGroupOp::Collective(c) => collective_operand(c, t).map(|t| vec![t]),
        _ => (t.is_numeric() && !t.is_half()).then(|| vec![t, Scalar::Usize]),
    }
}

/// `sub_group_broadcast(1u32, 0)`.
fn sub_group_broadcast() -> Expr {
    e(
        Scalar::U32,
        ExprKind::SubGroup(SubGroupOp::Broadcast, vec![lit(Scalar::U32, 1), usize0()]),
    )
}

fn compound(l: usize, op: BinOp, value: Expr) -> Stmt {
    Stmt::new(StmtKind::AssignLocal(l, Some(op), value))
}

fn compound_store(base: Base, op: BinOp, value: Expr) -> Stmt {
    Stmt::new(StmtKind::Store {
        base,
        check: Check::Checked,
        index_fits_i32: Check::Checked,
        op: Some(op),
        index: usize0(),
        value,
        field: None,
    })
}

#[test]
fn the_validator_checks_struct_fields() {
    use Scalar::*;
    // `base_kernel` and parameter 4, `&[S]` of a 12-byte struct.
    let kernel = |body: Vec<Stmt>| {
        let mut f = base_kernel(body);
        f.params.push(Param::Structs {
            size: 12,
            mutable: false,
        });
        f
    };
    let field = |ty, offset, item: Option<u32>| {
        Some(Box::new(Field {
            ty,
            offset,
            item: item.map(|len| FieldItem {
                len,
                check: Check::Checked,
                index: usize0(),
            }),
        }))
    };
    let read = |base, ty, field| {
        Stmt::new(StmtKind::Expr(e(
            ty,
            ExprKind::Load {
                base,
                check: Check::Checked,
                index_fits_i32: Check::Checked,
                index: Box::new(usize0()),
                field,
            },
        )))
    };
    let s = Base::Param(4);
    for ok in [
        read(s, F32, field(F32, 8, None)),
        read(s, F16, field(F16, 2, Some(5))),
        read(s, U32, field(U32, 0, Some(3))),
        Stmt::new(StmtKind::Expr(e(Usize, ExprKind::Len(s)))),
    ] {
        assert_eq!(
            validate(&kernel(vec![ok.clone()]), Role::Kernel),
            Ok(()),
            "{ok:?}"
        );
    }
    let cases = [
        (read(s, F32, field(F32, 12, None)), "outside"),
        (read(s, F32, field(F32, 2, None)), "misaligned"),
        (read(s, F64, field(F64, 0, None)), "outside"),
        (read(s, Usize, field(Usize, 0, None)), "outside"),
        (read(s, U32, field(U32, 4, Some(3))), "outside"),
        (read(s, U32, field(U32, 4, Some(0))), "outside"),
        (read(s, F32, field(U32, 0, None)), "another type"),
        (read(s, F32, None), "without a field"),
        (
            read(Base::Param(2), F32, field(F32, 0, None)),
            "not a struct",
        ),
        (
            Stmt::new(StmtKind::Store {
                base: s,
                check: Check::Checked,
                index_fits_i32: Check::Checked,
                op: None,
                index: usize0(),
                value: lit(U32, 1),
                field: field(U32, 0, None),
            }),
            "read-only",
        ),
    ];
    for (stmt, why) in cases {
        let err = validate(&kernel(vec![stmt.clone()]), Role::Kernel).unwrap_err();
        assert!(err.what.contains(why), "{stmt:?}: {err}");
    }
}

#[test]
fn the_validator_checks_field_copies() {
    use Scalar::*;
    // `base_kernel`, parameters 4 `&[S]` (12 bytes) and 5 `&mut [T]` (16 bytes), locals 3 a
    // private `[f32; 3]` and 4 a private `[f16; 2]`.
    let kernel = |body: Vec<Stmt>| {
        let mut f = base_kernel(body);
        f.params.push(Param::Structs {
            size: 12,
            mutable: false,
        });
        f.params.push(Param::Structs {
            size: 16,
            mutable: true,
        });
        f.locals.push(Local {
            ty: F32,
            array: Some(Array::private(3)),
            info: (),
        });
        f.locals.push(Local {
            ty: F16,
            array: Some(Array::private(2)),
            info: (),
        });
        f
    };
    let copy = |param, offset, array, to_slice| {
        Stmt::new(StmtKind::CopyField {
            param,
            check: Check::Checked,
            index_fits_i32: Check::Checked,
            index: usize0(),
            offset,
            array,
            to_slice,
        })
    };
    for ok in [
        copy(4, 0, 3, false),
        copy(5, 4, 3, true),
        copy(5, 12, 4, false),
        copy(4, 2, 4, false),
    ] {
        assert_eq!(
            validate(&kernel(vec![ok.clone()]), Role::Kernel),
            Ok(()),
            "{ok:?}"
        );
    }
    let cases = [
        (copy(4, 0, 3, true), "read-only"),
        (copy(4, 4, 3, false), "outside"),
        (copy(5, 2, 3, false), "misaligned"),
        (copy(2, 0, 3, false), "not a struct slice"),
        (copy(4, 0, 2, false), "not a private array"),
        (copy(4, 0, 0, false), "not a private array"),
    ];
    for (stmt, why) in cases {
        let err = validate(&kernel(vec![stmt.clone()]), Role::Kernel).unwrap_err();
        assert!(err.what.contains(why), "{stmt:?}: {err}");
    }
}

#[test]
fn the_validator_rejects_each_rule() {
    use Scalar::*;
    let guard_le = |b: Bound| Check::Guard(Bound::cmp(BoundCmp::Le, b, Bound::Num(4)));
    let ordered = |op, base, ty, values, order, scope| {
        e(
            ty,
            ExprKind::Atomic {
                op,
                base,
                index: Box::new(usize0()),
                values,
                order,
                scope,
            },
        )
    };
    let atomic = |op, base, ty, values| {
        ordered(
            op,
            base,
            ty,
            values,
            MemoryOrder::Relaxed,
            MemoryScope::Device,
        )
    };
    let for_over = |var| For {
        var,
        start: lit(Bool, 0),
        end: lit(Bool, 1),
        inclusive: false,
        step: None,
        counts_below_half: Check::Checked,
        start_below_half: Check::Checked,
        counts_in_u32: Check::Checked,
        counts_in_u64: Check::Checked,
        counts_in_i32: Check::Checked,
        start_per_item: false,
    };
    let x = StmtKind::Expr;
    let kernels: Vec<(Vec<Stmt>, &str)> = vec![
        (
            vec![Stmt::new(StmtKind::Let(0, lit(Bool, 1)))],
            "a `let` of another type",
        ),
        (
            vec![store(Base::Param(2), usize0(), lit(F32, 0))],
            "a store to a read-only slice",
        ),
        (
            vec![Stmt::new(x(load(
                Base::Param(2),
                U32,
                Check::Checked,
                usize0(),
            )))],
            "an element read at another type",
        ),
        (
            vec![Stmt::new(x(load(
                Base::Param(2),
                F32,
                Check::Checked,
                lit(U32, 0),
            )))],
            "an index that is not a `usize`",
        ),
        (
            vec![Stmt::new(x(load(
                Base::Param(0),
                U32,
                Check::Checked,
                usize0(),
            )))],
            "an element of a scalar parameter",
        ),
        (vec![Stmt::new(StmtKind::Break)], "`break` outside a loop"),
        (
            vec![Stmt::new(StmtKind::If(
                lit(Bool, 1),
                vec![Stmt::new(StmtKind::Continue)],
                vec![],
            ))],
            "`break` outside a loop",
        ),
        (
            vec![Stmt::new(StmtKind::Return(Some(lit(U32, 0))))],
            "a return of another type",
        ),
        (
            vec![Stmt::new(x(u32_add(Check::Guard(Bound::Param(0)))))],
            "a no-signed-wrap fact on another operation, or by guard",
        ),
        (
            vec![Stmt::new(x(e(
                I32,
                ExprKind::Binary(
                    BinOp::Add,
                    Box::new(lit(I32, 1)),
                    Box::new(lit(I32, 1)),
                    Check::Proved,
                ),
            )))],
            "a no-signed-wrap fact on another operation, or by guard",
        ),
        (
            vec![Stmt::new(x(u32_add(Check::When(Bound::Len(2)))))],
            "a build-time proof over run-time values",
        ),
        (
            vec![Stmt::new(x(load(
                Base::Param(2),
                F32,
                guard_le(Bound::Param(1)),
                usize0(),
            )))],
            "a bound over a parameter that is not an unsigned scalar",
        ),
        (
            vec![Stmt::new(x(load(
                Base::Param(2),
                F32,
                guard_le(Bound::Len(0)),
                usize0(),
            )))],
            "a bound over the length of a scalar",
        ),
        (
            vec![Stmt::new(x(atomic(
                AtomicOp::FetchMin,
                Base::Local(2),
                F32,
                vec![lit(F32, 0)],
            )))],
            "an atomic's operands",
        ),
        (
            vec![Stmt::new(x(atomic(
                AtomicOp::FetchAdd,
                Base::Param(2),
                F32,
                vec![lit(F32, 0)],
            )))],
            "an atomic's operands",
        ),
        (
            vec![Stmt::new(x(atomic(
                AtomicOp::CompareExchange,
                Base::Param(3),
                U32,
                vec![lit(U32, 0)],
            )))],
            "an atomic's operands",
        ),
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::Unary(UnOp::Neg, Box::new(lit(U32, 1))),
            )))],
            "a unary operator on the wrong type",
        ),
        (
            vec![Stmt::new(x(e(F32, ExprKind::Cast(Box::new(lit(Bool, 1))))))],
            "a cast Rust does not allow",
        ),
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::Math(MathFn::Sqrt, vec![lit(U32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                F32,
                ExprKind::Math(MathFn::Powf, vec![lit(F32, 4)]),
            )))],
            "math arguments",
        ),
        // Integer functions on floats, and a bit count that is not a `u32`.
        (
            vec![Stmt::new(x(e(
                F32,
                ExprKind::Math(MathFn::SaturatingAdd, vec![lit(F32, 4), lit(F32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                U64,
                ExprKind::Math(MathFn::CountOnes, vec![lit(U64, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::Math(MathFn::CountOnes, vec![lit(F32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::Math(MathFn::Fract, vec![lit(U32, 4)]),
            )))],
            "math arguments",
        ),
        // `powi` takes an `i32` exponent, `is_nan` gives a `bool`.
        (
            vec![Stmt::new(x(e(
                F32,
                ExprKind::Math(MathFn::Powi, vec![lit(F32, 4), lit(F32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                F32,
                ExprKind::Math(MathFn::IsNan, vec![lit(F32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(lit(U32, 1 << 32)))],
            "a literal wider than its type",
        ),
        (
            vec![Stmt::new(x(lit(Bool, 2)))],
            "a literal wider than its type",
        ),
        (
            vec![Stmt::new(x(e(F32, ExprKind::Local(2))))],
            "a local array used as a value",
        ),
        (
            vec![Stmt::new(x(e(U32, ExprKind::Param(1))))],
            "a parameter read at another type",
        ),
        (
            vec![Stmt::new(x(e(U32, ExprKind::Query(Query::GlobalId, 0))))],
            "a query that is not a `usize`",
        ),
        (
            vec![Stmt::new(StmtKind::For(Box::new(for_over(1)), vec![]))],
            "a `for` over mismatched or non-integer bounds",
        ),
        (
            vec![Stmt::new(x(e(
                Bool,
                ExprKind::Binary(
                    BinOp::And,
                    Box::new(lit(Bool, 1)),
                    Box::new(lit(U32, 1)),
                    Check::Checked,
                ),
            )))],
            "operands of the wrong types",
        ),
        (
            vec![Stmt::new(StmtKind::AssignLocal(
                0,
                Some(BinOp::Shl),
                lit(F32, 1),
            ))],
            "operands of the wrong types",
        ),
        // Compound assignments: arithmetic, bitwise and shifts only.
        (
            vec![compound(1, BinOp::Lt, lit(Bool, 1))],
            "a compound assignment Rust does not have",
        ),
        (
            vec![compound(1, BinOp::Eq, lit(Bool, 1))],
            "a compound assignment Rust does not have",
        ),
        (
            vec![compound(1, BinOp::And, lit(Bool, 1))],
            "a compound assignment Rust does not have",
        ),
        (
            vec![compound_store(Base::Param(3), BinOp::Or, lit(U32, 1))],
            "a compound assignment Rust does not have",
        ),
        (
            vec![compound_store(Base::Local(2), BinOp::Ge, lit(F32, 1))],
            "a compound assignment Rust does not have",
        ),
        // No `abs` of an unsigned integer.
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::Math(MathFn::Abs, vec![lit(U32, 4)]),
            )))],
            "math arguments",
        ),
        (
            vec![Stmt::new(x(e(
                Usize,
                ExprKind::Math(MathFn::Abs, vec![usize0()]),
            )))],
            "math arguments",
        ),
        // Group operations need a kernel with steps.
        (
            vec![Stmt::new(StmtKind::Barrier)],
            "a barrier outside a work-group kernel's body",
        ),
        (
            vec![Stmt::new(StmtKind::Loop(vec![
                Stmt::new(StmtKind::Barrier),
                Stmt::new(StmtKind::Break),
            ]))],
            "a barrier outside a work-group kernel's body",
        ),
        (
            vec![Stmt::new(x(group_sum()))],
            "a group collective outside a work-group kernel's body",
        ),
        (
            vec![Stmt::new(x(sub_group_broadcast()))],
            "a sub-group collective outside a work-group kernel's body",
        ),
        (
            vec![Stmt::new(StmtKind::If(lit(U32, 1), vec![], vec![]))],
            "an `if` condition that is not a `bool`",
        ),
    ];
    // Memory orders and scopes: as Rust's atomics, stores are statements, fences order.
    let bad_atomic = |op, base, ty, values, order, scope| {
        (
            vec![Stmt::new(x(ordered(op, base, ty, values, order, scope)))],
            "an atomic's operands",
        )
    };
    let store_in_let = ordered(
        AtomicOp::Store,
        Base::Param(3),
        U32,
        vec![lit(U32, 1)],
        MemoryOrder::Relaxed,
        MemoryScope::Device,
    );
    let mut kernels = kernels;
    kernels.extend([
        bad_atomic(
            AtomicOp::Load,
            Base::Param(3),
            U32,
            vec![],
            MemoryOrder::Release,
            MemoryScope::Device,
        ),
        (
            vec![Stmt::new(StmtKind::Let(0, store_in_let))],
            "an atomic's operands",
        ),
        bad_atomic(
            AtomicOp::Store,
            Base::Param(3),
            U32,
            vec![lit(U32, 1)],
            MemoryOrder::Acquire,
            MemoryScope::Device,
        ),
        bad_atomic(
            AtomicOp::Exchange,
            Base::Local(2),
            F32,
            vec![lit(F32, 1)],
            MemoryOrder::Relaxed,
            MemoryScope::System,
        ),
        bad_atomic(
            AtomicOp::FetchXor,
            Base::Local(2),
            F32,
            vec![lit(F32, 1)],
            MemoryOrder::Relaxed,
            MemoryScope::WorkGroup,
        ),
        (
            vec![Stmt::new(StmtKind::Fence(
                MemoryOrder::Relaxed,
                MemoryScope::Device,
            ))],
            "a fence in a helper, or a relaxed one",
        ),
    ]);
    for (body, what) in kernels {
        let f = base_kernel(body);
        let err = validate(&f, Role::Kernel).expect_err(what);
        assert_eq!(err.what, format!("invalid kernel IR: {what}"), "{f:?}");
    }

    // In a work-group kernel's body, group operations are legal, and checked.
    let ok = group_kernel(vec![
        Stmt::new(StmtKind::Barrier),
        Stmt::new(StmtKind::If(
            lit(Bool, 1),
            vec![Stmt::new(StmtKind::Barrier)],
            vec![],
        )),
        Stmt::new(StmtKind::Let(0, group_sum())),
        Stmt::new(StmtKind::AssignLocal(
            0,
            Some(BinOp::Add),
            sub_group_broadcast(),
        )),
    ]);
    assert_eq!(validate(&ok, Role::Kernel), Ok(()));
    let group_kernels: Vec<(Vec<Stmt>, &str)> = vec![
        (
            vec![Stmt::new(x(e(
                U32,
                ExprKind::SubGroup(SubGroupOp::Broadcast, vec![lit(U32, 1)]),
            )))],
            "sub-group arguments",
        ),
        (
            vec![Stmt::new(x(e(
                Bool,
                ExprKind::Group(
                    GroupOp::Collective(Collective::Reduce(Reduce::Max)),
                    vec![lit(Bool, 1)],
                ),
            )))],
            "a collective's type",
        ),
    ];
    for (body, what) in group_kernels {
        let f = group_kernel(body);
        let err = validate(&f, Role::Kernel).expect_err(what);
        assert_eq!(err.what, format!("invalid kernel IR: {what}"), "{f:?}");
    }

    // Whole-function rules.
    let f = base_kernel(vec![]);
    let helper = Function {
        params: vec![Param::Scalar(U32)],
        ret: Some(U32),
        locals: vec![],
        body: vec![Stmt::new(StmtKind::Return(Some(lit(U32, 0))))],
        steps: None,
    };
    assert_eq!(validate(&helper, Role::Helper), Ok(()));
    let bad: Vec<(Function, Role, &str)> = vec![
        (
            Function {
                ret: Some(U32),
                ..f.clone()
            },
            Role::Kernel,
            "a kernel with a result",
        ),
        (f.clone(), Role::Helper, "a helper without a result"),
        (
            // A written slice (parameter 3) passed twice to one helper.
            Function {
                body: vec![Stmt::new(StmtKind::Expr(e(
                    U32,
                    ExprKind::Call(
                        0,
                        vec![e(U32, ExprKind::SliceArg(3)), e(U32, ExprKind::SliceArg(3))],
                    ),
                )))],
                ..f.clone()
            },
            Role::Kernel,
            "a slice argument of another type, or a written slice passed twice",
        ),
        (
            // A slice argument of another element type (parameter 2 holds f32s).
            Function {
                body: vec![Stmt::new(StmtKind::Expr(e(
                    U32,
                    ExprKind::Call(0, vec![e(U32, ExprKind::SliceArg(2))]),
                )))],
                ..f.clone()
            },
            Role::Kernel,
            "a slice argument of another type, or a written slice passed twice",
        ),
        (
            Function {
                body: vec![Stmt::new(StmtKind::Let(0, e(U32, ExprKind::SliceArg(3))))],
                ..f.clone()
            },
            Role::Kernel,
            "a slice argument outside a call",
        ),
        (
            Function {
                steps: Some(vec![]),
                ..helper.clone()
            },
            Role::Helper,
            "a helper with steps",
        ),
        (
            Function {
                body: vec![
                    Stmt::new(StmtKind::Barrier),
                    Stmt::new(StmtKind::Return(Some(lit(U32, 0)))),
                ],
                ..helper.clone()
            },
            Role::Helper,
            "a barrier outside a work-group kernel's body",
        ),
        (
            Function {
                body: vec![Stmt::new(StmtKind::Return(Some(group_sum())))],
                ..helper.clone()
            },
            Role::Helper,
            "a group collective outside a work-group kernel's body",
        ),
        (
            Function {
                body: vec![Stmt::new(StmtKind::Return(Some(sub_group_broadcast())))],
                ..helper.clone()
            },
            Role::Helper,
            "a sub-group collective outside a work-group kernel's body",
        ),
        // Nor in the steps, not even in a region's statements.
        (
            Function {
                steps: Some(vec![Step::Region(vec![Stmt::new(StmtKind::Barrier)])]),
                ..f.clone()
            },
            Role::Kernel,
            "a barrier outside a work-group kernel's body",
        ),
        (
            Function {
                steps: Some(vec![Step::GroupLet(0, group_sum())]),
                ..f.clone()
            },
            Role::Kernel,
            "a group collective outside a work-group kernel's body",
        ),
        (
            Function {
                steps: Some(vec![Step::Group {
                    local: 0,
                    op: GroupOp::Collective(Collective::Reduce(Reduce::Sum)),
                    args: vec![sub_group_broadcast()],
                }]),
                ..f.clone()
            },
            Role::Kernel,
            "a sub-group collective outside a work-group kernel's body",
        ),
        (
            Function {
                steps: Some(vec![Step::SyncFor(
                    Box::new(For {
                        var: 0,
                        start: lit(U32, 0),
                        end: group_sum(),
                        ..for_over(0)
                    }),
                    vec![Step::Barrier],
                )]),
                ..f.clone()
            },
            Role::Kernel,
            "a group collective outside a work-group kernel's body",
        ),
        (
            Function {
                locals: vec![Local {
                    ty: U32,
                    array: Some(Array::work_group(4)),
                    info: (),
                }],
                ..helper.clone()
            },
            Role::Helper,
            "a local array in a helper",
        ),
        (
            Function {
                body: vec![Stmt::new(StmtKind::Return(None))],
                ..helper.clone()
            },
            Role::Helper,
            "a helper's empty return",
        ),
        (
            Function {
                body: vec![Stmt::new(StmtKind::Fail(Failure::TimedOut))],
                ..helper.clone()
            },
            Role::Helper,
            "a `kernel_fail` in a helper",
        ),
        (
            Function {
                locals: vec![Local {
                    ty: Bool,
                    array: Some(Array::work_group(4)),
                    info: (),
                }],
                ..f.clone()
            },
            Role::Kernel,
            "an array of a non-element type or an impossible length",
        ),
        (
            // A `break` in a region leaves no loop, even inside a sync `for`.
            Function {
                steps: Some(vec![Step::SyncFor(
                    Box::new(For {
                        var: 0,
                        start: lit(U32, 0),
                        end: lit(U32, 4),
                        ..for_over(0)
                    }),
                    vec![Step::Region(vec![Stmt::new(StmtKind::Break)])],
                )]),
                ..f.clone()
            },
            Role::Kernel,
            "`break` outside a loop",
        ),
        (
            Function {
                steps: Some(vec![Step::Group {
                    local: 1,
                    op: GroupOp::Collective(Collective::Reduce(Reduce::Sum)),
                    args: vec![lit(Bool, 1)],
                }]),
                ..f.clone()
            },
            Role::Kernel,
            "a collective's type",
        ),
    ];
    for (f, role, what) in bad {
        let err = validate(&f, role).expect_err(what);
        assert_eq!(err.what, format!("invalid kernel IR: {what}"), "{f:?}");
    }

    // Local arrays: `1..=MAX_LOCAL_ARRAY` elements; private ones `1..=MAX_PRIVATE_ARRAY`.
    let array = |a| Function {
        locals: vec![Local {
            ty: F32,
            array: Some(a),
            info: (),
        }],
        ..f.clone()
    };
    let (local, private) = (Array::work_group, Array::private);
    for a in [
        local(1),
        local(MAX_LOCAL_ARRAY),
        private(1),
        private(MAX_PRIVATE_ARRAY),
    ] {
        assert_eq!(validate(&array(a), Role::Kernel), Ok(()), "{a:?}");
    }
    let impossible = [
        local(0),
        local(MAX_LOCAL_ARRAY + 1),
        local(u32::MAX),
        private(0),
        private(MAX_PRIVATE_ARRAY + 1),
    ];
    for a in impossible {
        let err = validate(&array(a), Role::Kernel).expect_err("an impossible length");
        assert_eq!(
            err.what, "invalid kernel IR: an array of a non-element type or an impossible length",
            "{a:?}"
        );
    }
    // Private arrays may live in helpers, and take no atomics.
    assert_eq!(
        validate(
            &Function {
                locals: vec![Local {
                    ty: U32,
                    array: Some(private(4)),
                    info: (),
                }],
                ..helper.clone()
            },
            Role::Helper
        ),
        Ok(())
    );
}

/// Guard lists are decoded on the caller's thread (the runtime gives them no thread of their
/// own): at the nesting limit, and far past it, they fit a default 2 MiB thread stack.
#[test]
fn guards_at_the_limit_fit_a_default_thread_stack() {
    let t = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
        let deep = |n: usize| {
            (0..n).fold(Bound::Param(0), |b, _| {
                Bound::Fn(BoundFn::Add, Box::new(b), Box::new(Bound::LocalRange(0)))
            })
        };
        let at_limit = vec![deep(MAX_DEPTH - 1)];
        assert_eq!(
            decode_guards(&encode_guards(&at_limit), 1),
            Ok(at_limit.clone())
        );
        // 10 000 nested additions, written as words (a tree that deep would overflow the
        // encoder and the drop of this test, not the decoder).
        let mut past = vec![1];
        past.extend([6, 0].repeat(10_000));
        past.extend([4, 0]);
        past.extend([1, 0].repeat(10_000));
        assert_eq!(
            decode_guards(&past, 1).unwrap_err().what,
            "nesting too deep"
        );
    });
    t.expect("a thread")
        .join()
        .expect("no stack overflow, no panic");
}

/// A const-generic template: `let mut a = [c1; C0]; a[i] = c1 as ..;` encodes and decodes,
/// is refused by the validator until instantiated, and each instance has its values (a
/// private array of `C0` elements, `C1` as an `i32` literal); a value a type cannot hold, a
/// missing value and an impossible length are errors.
#[test]
fn const_templates_instantiate() {
    use Scalar::*;
    let template = Function {
        params: vec![Param::Slice {
            elem: I32,
            mutable: true,
        }],
        ret: None,
        locals: vec![Local {
            ty: I32,
            array: Some(Array {
                len_param: Some(0),
                ..Array::private(1)
            }),
            info: (),
        }],
        body: vec![
            Stmt::new(StmtKind::Let(0, e(I32, ExprKind::ConstParam(1)))),
            Stmt::new(StmtKind::Store {
                base: Base::Param(0),
                check: Check::Checked,
                index_fits_i32: Check::Checked,
                op: None,
                index: e(Usize, ExprKind::ConstParam(0)),
                value: e(
                    I32,
                    ExprKind::Load {
                        base: Base::Local(0),
                        check: Check::Checked,
                        index_fits_i32: Check::Checked,
                        index: Box::new(lit(Usize, 0)),
                        field: None,
                    },
                ),
                field: None,
            }),
        ],
        steps: None,
    };
    let words = encode(&template);
    assert_eq!(decode(&words, 0).as_ref(), Ok(&template));
    let err = validate(&template, Role::Kernel).expect_err("a template");
    assert!(err.what.contains("const-generic template"), "{}", err.what);

    let one = instantiate(&template, &[8, (-3i64) as u64]).expect("an instance");
    assert_eq!(validate(&one, Role::Kernel), Ok(()));
    assert_eq!(one.locals[0].array, Some(Array::private(8)));
    let StmtKind::Let(_, v) = &one.body[0].kind else {
        panic!("a let")
    };
    assert_eq!(v.kind, ExprKind::Lit((-3i32) as u32 as u64));
    let StmtKind::Store { index, .. } = &one.body[1].kind else {
        panic!("a store")
    };
    assert_eq!(index.kind, ExprKind::Lit(8));
    assert_eq!(decode(&encode(&one), 0), Ok(one));

    for (values, what) in [
        (vec![8, 1 << 40], "no value that a `i32` holds"),
        (vec![8], "no value for const parameter 1"),
        (vec![], "no value for const parameter 0"),
        (vec![0, 1], "an array length of 0"),
        (
            vec![MAX_PRIVATE_ARRAY as u64 + 1, 1],
            "an array length of 4097",
        ),
    ] {
        let err = instantiate(&template, &values).expect_err(what);
        assert!(err.what.contains(what), "{values:?}: {}", err.what);
    }
}

/// A call's slice arguments against the callee: the element type, and a written parameter
/// only from a slice the caller may write.
#[test]
fn calls_pass_slices_as_the_callee_takes_them() {
    use sycl_kernel_ir::validate::validate_call;
    use Scalar::*;
    let callee = |mutable| Function {
        params: vec![Param::Slice { elem: F32, mutable }, Param::Scalar(U32)],
        ret: Some(F32),
        locals: vec![],
        body: vec![],
        steps: None,
    };
    let caller = [
        Param::Slice {
            elem: F32,
            mutable: false,
        },
        Param::Slice {
            elem: F32,
            mutable: true,
        },
        Param::Slice {
            elem: U32,
            mutable: true,
        },
    ];
    let args = |s| vec![e(F32, ExprKind::SliceArg(s)), lit(U32, 1)];
    let ok = |s, m| validate_call(&args(s), F32, &caller, &callee(m)).is_ok();
    assert!(ok(0, false), "read-only to &[T]");
    assert!(ok(1, false), "written to &[T]");
    assert!(ok(1, true), "written to &mut [T]");
    assert!(!ok(0, true), "read-only to &mut [T]");
    assert!(!ok(2, false), "u32s to &[f32]");
    // A scalar where the callee takes a slice, and the other way round.
    let swapped = vec![lit(U32, 1), e(F32, ExprKind::SliceArg(0))];
    assert!(validate_call(&swapped, F32, &caller, &callee(false)).is_err());
}

/// An array local passed whole to a helper (`ExprKind::ArrayArg`): round trip, the caller's
/// rules (an array of the element type, once per call, in calls only) and the link's.
#[test]
fn array_arguments() {
    use sycl_kernel_ir::validate::validate_call;
    use Scalar::*;
    let array = |space, ty| Local {
        ty,
        array: Some(Array {
            len: 8,
            space,
            len_param: None,
        }),
        info: (),
    };
    let scalar = Local {
        ty: F32,
        array: None,
        info: (),
    };
    let call = |args: Vec<Expr>| Stmt::new(StmtKind::Expr(e(F32, ExprKind::Call(0, args))));
    let arg = |l, ty| e(ty, ExprKind::ArrayArg(l));
    let locals = vec![
        array(ArraySpace::Private, F32),
        array(ArraySpace::WorkGroup, F32),
        scalar,
        array(ArraySpace::Private, U32),
    ];
    let fill = Stmt::new(StmtKind::Let(0, lit(F32, 0)));
    let f = |body| Function {
        params: vec![],
        ret: None,
        locals: locals.clone(),
        body,
        steps: None,
    };
    let ok = f(vec![fill.clone(), call(vec![arg(0, F32), arg(1, F32)])]);
    assert_eq!(validate(&ok, Role::Kernel), Ok(()), "{ok:?}");
    let words = encode(&ok);
    assert_eq!(decode(&words, 1).expect("decodes"), ok, "round trip");
    let bad = [
        (vec![call(vec![arg(0, F32), arg(0, F32)])], "twice"),
        (vec![call(vec![arg(2, F32)])], "a scalar local"),
        (vec![call(vec![arg(3, F32)])], "another element type"),
        (
            vec![Stmt::new(StmtKind::Expr(arg(0, F32)))],
            "outside a call",
        ),
    ];
    for (body, what) in bad {
        assert!(
            validate(&f(body), Role::Kernel).is_err(),
            "{what} was accepted"
        );
    }
    // The link: an array of the parameter's element type, to `&[T]` or `&mut [T]`.
    let callee = |elem, mutable| Function {
        params: vec![Param::Slice { elem, mutable }],
        ret: Some(F32),
        locals: vec![],
        body: vec![],
        steps: None,
    };
    let args = [arg(0, F32)];
    assert!(validate_call(&args, F32, &[], &callee(F32, false)).is_ok());
    assert!(validate_call(&args, F32, &[], &callee(F32, true)).is_ok());
    assert!(validate_call(&args, F32, &[], &callee(U32, false)).is_err());
    assert!(validate_call(&[lit(F32, 0)], F32, &[], &callee(F32, false)).is_err());
}
