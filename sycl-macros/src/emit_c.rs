//! CUDA C++ (for NVRTC) and OpenCL C from the kernel language.
//!
//! The functions emitted here call a prelude that the runtime puts first (`sycl-rs`,
//! `src/kernel/prelude_*.h`): bounds-checked loads and stores, checked division, atomics,
//! work-item queries and group reductions, one per element type and address space. Every name
//! emitted is generated (`p0`, `v3`, `a2`), so no user identifier reaches C.
//!
//! How Rust's rules survive the trip:
//! - signed `+ - *` and negation wrap (done in the unsigned type: C overflow is undefined);
//!   shifts mask their amount by the bit width; division and remainder by zero, and
//!   `MIN / -1`, fail;
//! - float-to-integer `as` saturates and sends NaN to 0 (CUDA `__float2int_rz` and kin,
//!   OpenCL `convert_int_sat_rtz`);
//! - an index out of bounds fails; a failure sets the work-item's failure code, and from then
//!   on the work-item has no effect: failing loads and divisions give 0, stores and atomics are
//!   skipped, `while` and `loop` stop; it still meets barriers (so the group cannot deadlock)
//!   and reports the code to the launch's status word when it ends;
//! - sub-expressions with effects run in Rust's order: at most one atomic per statement, and a
//!   stored value is computed before its index.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use sycl_kernel_ir::{Bound, BoundCmp, BoundFn};

use crate::analyze::{fallible, path_key, Analysis, Class, Step};
use crate::bounds::{pure, Bounds, Proof, Target};
use crate::ir::*;

/// A condition a code form or an access relies on: a bound, printed where it is used (so
/// that only the bounds the program uses are declared), or the guarded program's switch.
#[derive(Clone, PartialEq)]
enum Cond {
    Bound(Bound),
    /// `SYCL_GUARDED`: the kernel's run-time guards held for this launch.
    Guarded,
}

/// How an access is emitted.
enum Access {
    Checked,
    Unchecked,
    /// Checked unless this C condition (folded by the compiler) holds.
    When(String),
}

/// An operator's C spelling.
trait COp {
    fn c(self) -> &'static str;
}

impl COp for BinOp {
    fn c(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Cuda,
    OpenCl,
}

/// The C type of a kernel-language type.
pub fn cty(d: Dialect, t: Ty) -> &'static str {
    match (d, t) {
        (_, Ty::Bool) => "bool",
        (_, Ty::I32) => "int",
        (Dialect::Cuda, Ty::U32) => "unsigned int",
        (Dialect::OpenCl, Ty::U32) => "uint",
        (Dialect::Cuda, Ty::I64) => "long long",
        (Dialect::OpenCl, Ty::I64) => "long",
        (_, Ty::U64 | Ty::Usize) => "sycl_u64",
        (_, Ty::F32) => "float",
        (_, Ty::F64) => "double",
    }
}

/// The suffix of prelude function names.
pub fn tag(t: Ty) -> &'static str {
    match t {
        Ty::Bool => "bool",
        Ty::I32 => "i32",
        Ty::U32 => "u32",
        Ty::I64 => "i64",
        Ty::U64 | Ty::Usize => "u64",
        Ty::F32 => "f32",
        Ty::F64 => "f64",
    }
}

fn unsigned_of(t: Ty) -> Ty {
    match t {
        Ty::I32 => Ty::U32,
        Ty::I64 => Ty::U64,
        other => other,
    }
}

/// The C name a call of helper `k` (of the caller's helper list) is emitted with: the runtime
/// binds it to the helper's function with `#define` around the caller (no user identifier
/// reaches C, so generated names cannot collide).
pub fn call_name(k: usize) -> String {
    format!("sycl_call_{k}")
}

/// The C name of a helper's own function in its definition and prototype, bound by the
/// runtime the same way.
pub const SELF_NAME: &str = "sycl_self";

enum Role<'a> {
    Kernel(&'a Analysis),
    Helper,
}

struct Emitter<'a> {
    f: &'a Function,
    d: Dialect,
    role: Role<'a>,
    helpers: &'a [syn::Path],
    out: String,
    depth: usize,
    tmp: usize,
    /// The label ending the current region (kernels that synchronise).
    region_end: Option<String>,
    /// Evaluating a value every work-item computes (`uniform_check`): failures go to
    /// `sycl_ufail`.
    uniform: bool,
    /// Accesses proved in bounds (their checks are dropped): the kernel's one analysis.
    bounds: &'a Bounds<'a>,
    /// In a kernel: the run-time guards (`Proof::Guard`) its accesses were proved under. The
    /// runtime evaluates them on the host at each launch and builds the program with
    /// `SYCL_GUARDED` 1 (those checks fold away) or 0.
    guarded: Option<Vec<Bound>>,
    /// In a kernel: the bound constants printed so far (`const sycl_u64 sycl_bN = ..;`,
    /// each after those it names), declared first in the body, and their names.
    bound_decls: Vec<String>,
    bound_names: HashMap<Bound, String>,
    /// Whether a uniform value's failure (`sycl_ufail`) was used.
    ufail_used: Cell<bool>,
    /// `usize`/`u64` loop variables proved to fit 32 bits: OpenCL C counts them in `uint`
    /// (only in the `SYCL_GUARDED` program where the proof is a run-time guard); CUDA keeps
    /// them 64-bit but tracks them for the same index proofs (one guard list).
    narrowed: HashSet<usize>,
    /// Whether `u32` arithmetic proved free of signed overflow is emitted in `int`
    /// (OpenCL C); off inside the unsigned copy of such a tree.
    int_arith: bool,
}

/// A kernel's C function (without prelude or helpers), and the conditions its
/// `SYCL_GUARDED` form assumes.
pub struct KernelC {
    pub source: String,
    pub guards: Vec<Bound>,
}

/// The kernel's C function (without prelude or helpers), from the kernel's bounds analysis.
pub fn kernel<'a>(
    f: &'a Function,
    an: &'a Analysis,
    d: Dialect,
    bounds: &'a Bounds<'a>,
) -> KernelC {
    let mut e = Emitter {
        f,
        d,
        role: Role::Kernel(an),
        helpers: &an.helpers,
        out: String::new(),
        depth: 0,
        tmp: 0,
        region_end: None,
        uniform: false,
        bounds,
        guarded: Some(Vec::new()),
        bound_decls: Vec::new(),
        bound_names: HashMap::new(),
        ufail_used: Cell::new(false),
        narrowed: HashSet::new(),
        int_arith: true,
    };
    e.kernel_fn(an);
    KernelC {
        source: e.out,
        guards: e.guarded.take().unwrap_or_default(),
    }
}

/// A helper's C definition; its name is [`SELF_NAME`]. Also returns its prototype.
pub fn helper<'a>(
    f: &'a Function,
    helpers: &'a [syn::Path],
    d: Dialect,
    bounds: &'a Bounds<'a>,
) -> (String, String) {
    let mut e = Emitter {
        f,
        d,
        role: Role::Helper,
        helpers,
        out: String::new(),
        depth: 0,
        tmp: 0,
        region_end: None,
        uniform: false,
        bounds,
        guarded: None,
        bound_decls: Vec::new(),
        bound_names: HashMap::new(),
        ufail_used: Cell::new(false),
        narrowed: HashSet::new(),
        int_arith: true,
    };
    let ret = f.ret.expect("helpers return a value");
    let mut sig = String::new();
    if d == Dialect::Cuda {
        sig.push_str("__device__ ");
    }
    let _ = write!(sig, "{} {SELF_NAME}(", cty(d, ret));
    for (i, p) in f.params.iter().enumerate() {
        let ParamKind::Scalar(t) = p.kind else {
            unreachable!("helpers take scalars")
        };
        let _ = write!(sig, "{} p{i}, ", cty(d, t));
    }
    sig.push_str(match d {
        Dialect::Cuda => "unsigned int* sycl_failp)",
        Dialect::OpenCl => "uint* sycl_failp)",
    });
    e.out.push_str(&sig);
    e.out.push_str("\n{\n");
    e.depth = 1;
    e.block_plain(&f.body);
    let _ = writeln!(e.out, "    return ({})0;\n}}", cty(d, ret));
    (format!("{sig};\n"), e.out)
}

impl Emitter<'_> {
    fn an(&self) -> Option<&Analysis> {
        match self.role {
            Role::Kernel(an) => Some(an),
            Role::Helper => None,
        }
    }

    fn ty(&self, e: &Expr) -> Ty {
        self.f.ty(e.ty)
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self, what: &str) -> String {
        self.tmp += 1;
        format!("sycl_{what}{}", self.tmp)
    }

    /// The failure pointer passed to prelude calls.
    fn failp(&self) -> &'static str {
        match self.role {
            Role::Kernel(_) if self.uniform => {
                self.ufail_used.set(true);
                "&sycl_ufail"
            }
            Role::Kernel(_) => "&sycl_fail",
            Role::Helper => "sycl_failp",
        }
    }

    fn failed(&self) -> &'static str {
        match self.role {
            Role::Kernel(_) if self.uniform => {
                self.ufail_used.set(true);
                "sycl_ufail"
            }
            Role::Kernel(_) => "sycl_fail",
            Role::Helper => "(*sycl_failp)",
        }
    }

    /// How a kernel's work-item ends its part here: reporting a failure first.
    fn return_stmt(&self) -> String {
        match &self.region_end {
            None => "{ if (sycl_fail) sycl_report(sycl_status, sycl_fail); return; }".into(),
            Some(label) => format!("{{ sycl_done = 1; goto {label}; }}"),
        }
    }

    fn local_name(&self, l: usize) -> String {
        if self.f.locals[l].array.is_some() {
            format!("a{l}")
        } else if self.narrowed.contains(&l) {
            // Counted in `uint`: read as the `usize` it is.
            format!("((sycl_u64)v{l})")
        } else {
            format!("v{l}")
        }
    }

    /// Whether an access needs its check: `Proof::No` is checked, `Proof::When` too unless
    /// its condition holds for the work-group size (folded by the compiler), `Proof::Always`
    /// is not; `Proof::Guard` is checked unless `SYCL_GUARDED` in kernels (the runtime tests
    /// the guard on the host), checked in helpers (their parameters are not the launch's).
    fn proof(&mut self, base: Base, index: &Expr, checked: bool) -> Access {
        if !checked {
            return Access::Unchecked;
        }
        match self.bounds.access(base, index, Target::Device) {
            p @ Proof::Guard(_) if self.guarded.is_some() => {
                self.register(&p);
                Access::When("SYCL_GUARDED".into())
            }
            Proof::Guard(_) | Proof::No => Access::Checked,
            Proof::Always => Access::Unchecked,
            Proof::When(b) => Access::When(self.bound_c(&b)),
        }
    }

    /// Adds a run-time guard that a form or an access relies on to the kernel's.
    fn register(&mut self, p: &Proof) {
        if let (Proof::Guard(cond), Some(guards)) = (p, &mut self.guarded) {
            if !guards.contains(cond) {
                guards.push(cond.clone());
            }
        }
    }

    /// What a proof of a code form (not of an access) allows: `None` when it does not hold,
    /// else the condition under which it does (`None` inside: always). A run-time guard is
    /// `SYCL_GUARDED` (`register` it where the form is used); helpers cannot use one.
    fn form_cond(&self, p: &Proof, constant_only: bool) -> Option<Option<Cond>> {
        match p {
            Proof::No => None,
            Proof::Always => Some(None),
            Proof::When(c) if !constant_only => Some(Some(Cond::Bound(c.clone()))),
            Proof::When(_) => None,
            Proof::Guard(_) => self.guarded.as_ref().map(|_| Some(Cond::Guarded)),
        }
    }

    /// `form_cond`, the guard registered for a form that is used where it holds.
    fn form_proof(&mut self, p: Proof, constant_only: bool) -> Option<Option<Cond>> {
        let cond = self.form_cond(&p, constant_only);
        if cond.is_some() {
            self.register(&p);
        }
        cond
    }

    /// A condition in C (its bounds declared, in kernels, where first printed).
    fn cond_c(&mut self, c: &Cond) -> String {
        match c {
            Cond::Guarded => "SYCL_GUARDED".into(),
            Cond::Bound(b) => self.bound_c(b),
        }
    }

    /// A bound in C, through the preludes' `sycl_b*` functions (the same saturating `u64`
    /// arithmetic as `Bound::eval`). In kernels every compound node becomes a named constant
    /// declared at the top of the body, once: the text stays linear in the tree's distinct
    /// nodes, and only printed (so used) bounds are declared.
    fn bound_c(&mut self, b: &Bound) -> String {
        let text = match b {
            Bound::Num(v) => return format!("SYCL_U64C({v})"),
            Bound::LocalRange(d) => return format!("((sycl_u64)SYCL_LOCAL_RANGE(SYCL_AXIS({d})))"),
            Bound::GroupRange(d) => return format!("sycl_group_range(SYCL_AXIS({d}))"),
            Bound::GlobalRange(d) => return format!("sycl_r{d}"),
            Bound::Param(i) => return format!("((sycl_u64)p{i})"),
            Bound::Len(i) => return format!("p{i}_len"),
            _ if self.bound_names.contains_key(b) => return self.bound_names[b].clone(),
            Bound::Fn(f, x, y) => {
                let name = match f {
                    BoundFn::Add => "add",
                    BoundFn::Mul => "mul",
                    BoundFn::Min => "min",
                    BoundFn::Max => "max",
                    BoundFn::Sub => "sub",
                    BoundFn::Div => "div",
                };
                let (x, y) = (self.bound_c(x), self.bound_c(y));
                format!("sycl_b{name}({x}, {y})")
            }
            Bound::WrapLo(h, l, m) => {
                let (h, l, m) = (self.bound_c(h), self.bound_c(l), self.bound_c(m));
                format!("sycl_bwrap_lo({h}, {l}, {m})")
            }
            Bound::Cmp(op, x, y) => {
                let op = match op {
                    BoundCmp::Lt => "<",
                    BoundCmp::Le => "<=",
                    BoundCmp::Ge => ">=",
                    BoundCmp::Gt => ">",
                };
                let (x, y) = (self.bound_c(x), self.bound_c(y));
                format!("(sycl_u64)({x} {op} {y})")
            }
            Bound::Cond(c, x, y) => {
                let (c, x, y) = (self.bound_c(c), self.bound_c(x), self.bound_c(y));
                format!("({c} ? {x} : {y})")
            }
        };
        if self.guarded.is_none() {
            // A helper: no declarations (its conditions are over the work-group size only).
            return format!("({text})");
        }
        let name = format!("sycl_b{}", self.bound_decls.len());
        self.bound_decls
            .push(format!("const sycl_u64 {name} = {text};"));
        self.bound_names.insert(b.clone(), name.clone());
        name
    }

    /// An index: in signed 32-bit arithmetic, sign-extended, where `Bounds::narrow_index`
    /// proves it equal (OpenCL C: Intel's CPU vectorizer sees consecutive accesses in this
    /// form only); else as written. CUDA keeps the written form but makes the same proofs,
    /// so that both dialects share one guard.
    fn index(&mut self, index: &Expr) -> String {
        let wide = self.expr(index);
        let narrowed = self.narrowed.clone();
        let proof = self.bounds.narrow_index(index, &|l| narrowed.contains(&l));
        // (A loop variable that is 64-bit in the program without guards is read exactly by
        // its `(int)` leaf there too: the proof bounds its value below 2^31 in both forms.)
        let Some(cond) = self.form_proof(proof, false) else {
            return wide;
        };
        if self.d != Dialect::OpenCl {
            return wide;
        }
        let narrow = format!("((sycl_u64)({}))", self.narrow_c(index));
        match cond {
            None => narrow,
            Some(c) => {
                let c = self.cond_c(&c);
                format!("(({c}) ? {narrow} : {wide})")
            }
        }
    }

    /// `e` (a tree `Bounds::narrow_tree` accepted) as an `int` expression.
    fn narrow_c(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Lit(Lit::Int(v)) => format!("{v}"),
            ExprKind::Lit(_) => "0".into(),
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.narrow_c(a), self.narrow_c(b));
                format!("({x} {} {y})", op.c())
            }
            ExprKind::Cast(a, _) if self.ty(a) == Ty::U32 => self.narrow_c(a),
            ExprKind::Cast(a, _) => format!("((int)({}))", self.trunc32(a)),
            ExprKind::Local(l) => format!("((int)v{l})"),
            _ => format!("((int)({}))", self.expr(e)),
        }
    }

    /// A pure `usize`/`u64` (or `i64`) value truncated to `uint`, the truncation pushed down
    /// through `+ - * & | ^` (exact in modular arithmetic) to the leaves: Intel's CPU
    /// vectorizer loses work-items' consecutiveness through a truncated 64-bit sum.
    fn trunc32(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Query(Query::GlobalId, d) => format!("sycl_global_id_u32(SYCL_AXIS({d}))"),
            ExprKind::Binary(
                op @ (BinOp::Add
                | BinOp::Sub
                | BinOp::Mul
                | BinOp::BitAnd
                | BinOp::BitOr
                | BinOp::BitXor),
                a,
                b,
            ) if self.ty(a).bits() == 64 && self.ty(b).bits() == 64 => {
                let (x, y) = (self.trunc32(a), self.trunc32(b));
                format!("((uint)({x} {} {y}))", op.c())
            }
            ExprKind::Cast(a, _) if matches!(self.ty(a), Ty::U32 | Ty::I32) => {
                format!("((uint)({}))", self.expr(a))
            }
            _ => format!("((uint)({}))", self.expr(e)),
        }
    }

    fn class(&self, l: usize) -> Class {
        self.an().map_or(Class::Plain, |an| an.class[l])
    }

    // ---- the kernel function

    fn kernel_fn(&mut self, an: &Analysis) {
        let d = self.d;
        let mut params = Vec::new();
        let mut prologue = Vec::new();
        for (i, p) in self.f.params.iter().enumerate() {
            match p.kind {
                ParamKind::Scalar(Ty::Bool) => {
                    params.push(format!(
                        "{} p{i}_byte",
                        if d == Dialect::Cuda {
                            "unsigned char"
                        } else {
                            "uchar"
                        }
                    ));
                    prologue.push(format!("const bool p{i} = p{i}_byte != 0;"));
                }
                ParamKind::Scalar(t) => params.push(format!("{} p{i}", cty(d, t))),
                ParamKind::Slice { elem, mutable } => {
                    let c = if mutable { "" } else { "const " };
                    params.push(match d {
                        Dialect::Cuda => format!("{c}{}* __restrict__ p{i}", cty(d, elem)),
                        Dialect::OpenCl => format!("__global {c}{}* restrict p{i}", cty(d, elem)),
                    });
                    params.push(format!("sycl_u64 p{i}_len"));
                }
            }
        }
        match d {
            Dialect::Cuda => params.push("unsigned int* __restrict__ sycl_status".into()),
            Dialect::OpenCl => params.push("__global uint* restrict sycl_status".into()),
        }
        for r in 0..3 {
            params.push(format!("sycl_u64 sycl_r{r}"));
        }
        if d == Dialect::OpenCl && an.info.reduce_bytes > 0 {
            params.push("__local sycl_u64* sycl_scratch".into());
        }
        let head = match d {
            Dialect::Cuda => "extern \"C\" __global__ SYCL_KERNEL_ATTRS void",
            Dialect::OpenCl => "__kernel SYCL_KERNEL_ATTRS void",
        };
        // One kernel per program: its entry needs no Rust name (which may not be a C one).
        let _ = writeln!(
            self.out,
            "// kernel `{}`\n{head} sycl_kernel({})\n{{",
            self.f.name,
            params.join(", ")
        );
        self.depth = 1;
        // The bound constants printed while emitting the body go here.
        let decls_at = self.out.len();
        for l in &prologue {
            self.line(l);
        }
        self.line(match d {
            Dialect::Cuda => "unsigned int sycl_fail = 0;",
            Dialect::OpenCl => "uint sycl_fail = 0;",
        });
        // Work-group local arrays (static shared memory; OpenCL: kernel-scope __local).
        for (l, local) in self.f.locals.iter().enumerate() {
            if let Some(len) = local.array {
                let t = cty(d, self.f.ty(local.ty));
                let space = if d == Dialect::Cuda {
                    "__shared__"
                } else {
                    "__local"
                };
                self.line(&format!("{space} {t} a{l}[{len}];"));
            }
        }
        if !an.info.group {
            // A plain range is launched rounded up to whole work-groups; the extra
            // work-items leave here, so the kernel sees exactly its range.
            self.line("if (SYCL_OUTSIDE_RANGE) return;");
            let body = self.f.body.clone();
            self.block_plain(&body);
            self.line("if (sycl_fail) sycl_report(sycl_status, sycl_fail);");
        } else {
            // `sycl_done`: the work-item returned (only `return` sets it, so without one it stays
            // a constant the compiler folds). A failed work-item goes on with its effects
            // suppressed, like one in a flat kernel.
            self.line(match d {
                Dialect::Cuda => "unsigned int sycl_done = 0;",
                Dialect::OpenCl => "uint sycl_done = 0;",
            });
            // `sycl_ufail` is declared here if a uniform value can fail (known at the end).
            let ufail_at = self.out.len();
            // Locals that live across synchronisation are declared once, up front, so that
            // the jumps that end a region never cross a declaration.
            let loop_vars = sync_loop_vars(&an.steps);
            for (l, local) in self.f.locals.iter().enumerate() {
                if local.array.is_none() && an.class[l] != Class::Plain && !loop_vars.contains(&l) {
                    let s = format!("{} v{l};", cty(d, self.f.ty(local.ty)));
                    self.line(&s);
                }
            }
            self.steps(&an.steps);
            self.line("if (sycl_fail) sycl_report(sycl_status, sycl_fail);");
            if self.ufail_used.get() {
                let decl = match d {
                    Dialect::Cuda => "    unsigned int sycl_ufail = 0;\n",
                    Dialect::OpenCl => "    uint sycl_ufail = 0;\n",
                };
                self.out.insert_str(ufail_at, decl);
            }
        }
        self.out.push_str("}\n");
        // Only the bound constants the code prints are declared (Intel's CPU OpenCL runtime
        // did not drop unused ones in work-group kernels: matmul 2.1x -> 2.9x with them).
        let decls: String = self
            .bound_decls
            .iter()
            .map(|d| format!("    {d}\n"))
            .collect();
        self.out.insert_str(decls_at, &decls);
    }

    fn steps(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Region(stmts) => {
                    let label = self.fresh("region");
                    self.region_end = Some(label.clone());
                    self.line("if (!sycl_done) {");
                    let body_start = self.out.len();
                    self.depth += 1;
                    self.block_plain(stmts);
                    self.depth -= 1;
                    self.line("}");
                    if self.out[body_start..].contains(&format!("goto {label};")) {
                        let s = format!("{label}: ;");
                        self.line(&s);
                    }
                    self.region_end = None;
                }
                Step::GroupLet(l, e) => {
                    self.uniform = true;
                    let v = self.expr(e);
                    self.uniform = false;
                    let s = format!("v{l} = {v};");
                    self.line(&s);
                    if fallible(e) {
                        self.uniform_check();
                    }
                }
                Step::Barrier => self.line(match self.d {
                    Dialect::Cuda => "__syncthreads();",
                    Dialect::OpenCl => "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
                }),
                Step::Reduce { local, op, value } => {
                    let t = self.ty(value);
                    let x = self.fresh("x");
                    self.line("{");
                    self.depth += 1;
                    let s = format!("{} {x} = 0;", cty(self.d, t));
                    self.line(&s);
                    self.line("if (!sycl_done) {");
                    self.depth += 1;
                    let v = self.expr(value);
                    let s = format!("{x} = {v};");
                    self.line(&s);
                    self.depth -= 1;
                    self.line("}");
                    let scratch = match self.d {
                        Dialect::Cuda => String::new(),
                        Dialect::OpenCl => {
                            format!(", (__local {}*)sycl_scratch", cty(self.d, t))
                        }
                    };
                    let s = format!(
                        "v{local} = sycl_reduce_{}_{}({x}, sycl_done{scratch});",
                        op.name(),
                        tag(t)
                    );
                    self.line(&s);
                    self.depth -= 1;
                    self.line("}");
                }
                Step::SubGroup { local, op, args } => {
                    // Every work-item of the sub-group calls the collective; one that returned
                    // offers zero (reductions: their identity, through `sycl_done`).
                    let t = self.ty(&args[0]);
                    let x = self.fresh("x");
                    self.line("{");
                    self.depth += 1;
                    let s = format!("{} {x} = 0;", cty(self.d, t));
                    self.line(&s);
                    let lane = args.get(1).map(|lane_expr| {
                        let l = self.fresh("lane");
                        if *op == SubGroupOp::Broadcast {
                            // Uniform: every work-item computes it, so all name one lane.
                            self.uniform = true;
                            let v = self.expr(lane_expr);
                            self.uniform = false;
                            self.line(&format!("sycl_u64 {l} = {v};"));
                            if fallible(lane_expr) {
                                self.uniform_check();
                            }
                        } else {
                            self.line(&format!("sycl_u64 {l} = 0;"));
                        }
                        l
                    });
                    self.line("if (!sycl_done) {");
                    self.depth += 1;
                    let v = self.expr(&args[0]);
                    self.line(&format!("{x} = {v};"));
                    if let (Some(l), Some(lane_expr)) = (&lane, args.get(1)) {
                        if *op != SubGroupOp::Broadcast {
                            let v = self.expr(lane_expr);
                            self.line(&format!("{l} = {v};"));
                        }
                    }
                    self.depth -= 1;
                    self.line("}");
                    let last = match &lane {
                        Some(l) => l.clone(),
                        None => "sycl_done".into(),
                    };
                    let s = format!("v{local} = sycl_sg_{}_{}({x}, {last});", op.name(), tag(t));
                    self.line(&s);
                    self.depth -= 1;
                    self.line("}");
                }
                Step::SyncFor {
                    var,
                    start,
                    end,
                    inclusive,
                    step,
                    body,
                } => {
                    self.for_loop(*var, (start, end, *inclusive), step.as_ref(), true, |e| {
                        e.steps(body)
                    });
                }
            }
        }
    }

    /// After a value every work-item computes (uniform), into `sycl_ufail`: the failure is the
    /// work-item's own unless it had returned (every work-item computed the same value).
    fn uniform_check(&mut self) {
        self.line("if (!sycl_done && !sycl_fail) sycl_fail = sycl_ufail;");
        self.line("sycl_ufail = 0;");
    }

    /// `{ bounds; for (..) { body } }`: a loop in its own scope (its bounds are locals).
    fn for_loop(
        &mut self,
        var: usize,
        (start, end, inclusive): (&Expr, &Expr, bool),
        step: Option<&Expr>,
        uniform: bool,
        body: impl FnOnce(&mut Self),
    ) {
        self.line("{");
        self.depth += 1;
        self.open_for(var, start, end, inclusive, step, uniform);
        self.depth += 1;
        body(self);
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
    }

    /// Emits the bounds of `for var in start..end` (`..=`, `.step_by(step)`) and opens the loop
    /// (one `{` for the caller to close after the body). A `for` always ends: its bounds are
    /// computed once, so it needs no failure check.
    fn open_for(
        &mut self,
        var: usize,
        start: &Expr,
        end: &Expr,
        inclusive: bool,
        step: Option<&Expr>,
        uniform: bool,
    ) {
        let ty = self.ty(start);
        let t = cty(self.d, ty);
        let ut = cty(self.d, unsigned_of(ty));
        let (s, e) = (self.fresh("s"), self.fresh("e"));
        self.uniform = uniform;
        let (sv, ev) = (self.expr(start), self.expr(end));
        let line = format!("{t} {s} = {sv};");
        self.line(&line);
        let line = format!("{t} {e} = {ev};");
        self.line(&line);
        let step_name = step.map(|step| {
            let st = self.fresh("step");
            let stv = self.expr(step);
            let line = format!("sycl_u64 {st} = {stv};");
            self.line(&line);
            let line = format!(
                "if ({st} == 0) sycl_set_fail({}, SYCL_FAIL_ARITH);",
                self.failp()
            );
            self.line(&line);
            st
        });
        self.uniform = false;
        // Bounds every work-item computes (a loop that synchronises): see `uniform_check`.
        if uniform && (fallible(start) || fallible(end) || step.is_some()) {
            self.uniform_check();
        }
        // Forms the bounds allow instead of the trip count (OpenCL C), the first that holds
        // wins; a proof by run-time guard holds in the `SYCL_GUARDED` program only (`#if`),
        // and only the chosen form's guards join the kernel's. CUDA makes the same proofs (one
        // guard list) and keeps the trip count.
        // - `Int`: a `u32` loop counted in `int`, its start and every value, the last step
        //   included, below 2^31: Intel's CPU vectorizer reads an `int` counter (as
        //   hand-written OpenCL C has) and loses an unsigned one on AVX-512 (stencil2d 1.5x
        //   -> 1.0x the hand-written time). An unproved start keeps the unsigned loop: the
        //   select that would clamp it cost as much as the unsigned counter. `Some(c)`: the
        //   start's own condition, folded by the C compiler.
        // - `Narrow`: a `usize` loop whose start differs per work-item counted in `uint`.
        // - `Step`: `v += step` in the loop's own type. Intel's vectorizer keeps a
        //   work-item-strided loop whose counter is the index, and loses one computed from a
        //   trip count (reduce 1.2x, stencil 1.7x slower).
        enum Form {
            Int(Option<Cond>),
            Narrow,
            Step,
        }
        let unsigned = !inclusive && matches!(ty, Ty::U32 | Ty::U64 | Ty::Usize);
        let mut fast: Option<(Form, Vec<Proof>, Option<Cond>)> = None;
        if unsigned && ty == Ty::U32 {
            let (lp, sp) = (
                self.bounds.loop_fits(end, step, 31),
                self.bounds.below(start, 31),
            );
            if let (Some(lc), Some(sc)) = (self.form_cond(&lp, true), self.form_cond(&sp, false)) {
                fast = Some((Form::Int(sc), vec![lp, sp], lc));
            }
        }
        if fast.is_none()
            && unsigned
            && ty != Ty::U32
            && pure(start)
            && self.bounds.per_work_item(start)
        {
            let p = self.bounds.loop_fits(end, step, 32);
            if let Some(c) = self.form_cond(&p, true) {
                fast = Some((Form::Narrow, vec![p], c));
            }
        }
        // Also the fallback of a guarded form where it always holds.
        let step_proof = match (unsigned, ty) {
            (false, _) => Proof::No,
            (true, Ty::U32) => self.bounds.loop_fits(end, step, 32),
            (true, _) => self.bounds.loop_fits(end, step, 64),
        };
        let step_cond = self.form_cond(&step_proof, true);
        if fast.is_none() {
            if let Some(c) = step_cond.clone() {
                fast = Some((Form::Step, vec![step_proof], c));
            }
        }
        if let Some((form, proofs, _)) = &fast {
            for p in proofs {
                self.register(p);
            }
            if matches!(form, Form::Narrow) {
                self.narrowed.insert(var);
            }
        }
        if self.d != Dialect::OpenCl {
            fast = None;
        }
        let nonzero = match &step_name {
            Some(st) => format!("{st} != 0 && "),
            None => String::new(),
        };
        let by = |v: &str, t: &str| match &step_name {
            Some(st) => format!("{v} += ({t})({st})"),
            None => format!("{v}++"),
        };
        let v = format!("v{var}");
        let step_header = format!("for ({t} {v} = {s}; {nonzero}{v} < {e}; {}) {{", by(&v, t));
        let Some((form, _, cond)) = fast else {
            self.count_header(var, t, ut, (&s, &e), inclusive, step_name.as_deref());
            return;
        };
        let lines = match form {
            Form::Int(start_cond) => {
                let first = match start_cond {
                    None => format!("(int)({s})"),
                    Some(c) => {
                        let c = self.cond_c(&c);
                        format!("(({c}) ? (int)({s}) : (({s} < {e}) ? (int)({s}) : (int)({e})))")
                    }
                };
                let i = self.fresh("i");
                vec![
                    format!(
                        "for (int {i} = {first}; {nonzero}{i} < (int)({e}); {}) {{",
                        by(&i, "int")
                    ),
                    format!("uint {v} = (uint){i};"),
                ]
            }
            Form::Narrow => {
                vec![self.narrow_header(var, start, (&s, &e), &nonzero, &by(&v, "uint"))]
            }
            Form::Step => vec![step_header.clone()],
        };
        if cond.is_some() {
            self.line("#if SYCL_GUARDED");
        }
        for l in &lines {
            self.line(l);
        }
        if cond.is_some() {
            self.line("#else");
            if step_cond == Some(None) {
                self.line(&step_header);
            } else {
                self.count_header(var, t, ut, (&s, &e), inclusive, step_name.as_deref());
            }
            self.line("#endif");
        }
    }

    /// `for (uint v = ..; v < end; v += step) {`: a `usize` loop counted in 32 bits. A start
    /// at or past the end starts at the end (its 32-bit truncation might not be).
    fn narrow_header(
        &mut self,
        var: usize,
        start: &Expr,
        (s, e): (&str, &str),
        nonzero: &str,
        by: &str,
    ) -> String {
        let first = self.trunc32(start);
        format!(
            "for (uint v{var} = ({s} < {e}) ? {first} : (uint)({e}); {nonzero}v{var} < (uint)({e}); {by}) {{"
        )
    }

    /// The loop header as written: by 1 (`..=` stopping after the type's maximum), or a trip
    /// count and an index for `step_by`.
    fn count_header(
        &mut self,
        var: usize,
        t: &str,
        ut: &str,
        (s, e): (&str, &str),
        inclusive: bool,
        step_name: Option<&str>,
    ) {
        match step_name {
            None if inclusive => {
                // `a..=b` stops after b even when b is the type's maximum.
                let more = self.fresh("more");
                let line = format!("for ({t} v{var} = {s}, {more} = ({s} <= {e}); {more}; {more} = (v{var} != {e}), v{var} = {more} ? ({t})(v{var} + 1) : v{var}) {{");
                self.line(&line);
            }
            None => {
                let line = format!("for ({t} v{var} = {s}; v{var} < {e}; v{var}++) {{");
                self.line(&line);
            }
            Some(st) => {
                // A count, then an index: GPUs unroll a loop whose trip count is known, and the
                // count cannot wrap (Rust's `step_by` stops at the end too; a step of 0 fails).
                let (n, k) = (self.fresh("n"), self.fresh("k"));
                let line = format!("sycl_u64 {n} = 0;");
                self.line(&line);
                let cmp = if inclusive { "<=" } else { "<" };
                let minus = if inclusive { "" } else { " - 1" };
                let line = format!(
                    "if ({st} != 0 && {s} {cmp} {e}) {n} = ((sycl_u64)(({ut})({e}) - ({ut})({s})){minus}) / {st} + 1;"
                );
                self.line(&line);
                let line = format!("for (sycl_u64 {k} = 0; {k} < {n}; {k}++) {{");
                self.line(&line);
                let line =
                    format!("    const {t} v{var} = ({t})(({ut})({s}) + ({ut})({k} * {st}));");
                self.line(&line);
                // What the count guarantees, said to the compiler (for the index checks).
                let line = format!("    SYCL_ASSUME(v{var} >= {s} && v{var} {cmp} {e});");
                self.line(&line);
            }
        }
    }

    // ---- statements

    fn block_plain(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    /// One statement. A failure inside it (an index out of bounds, a division by zero) does not
    /// jump: the failing load or division gives 0, the failure code is set, and every store and
    /// atomic after it is skipped, so the work-item has no effect from then on; `while` and
    /// `loop` stop at their next iteration (a `for` ends by itself), and the failure is
    /// reported when the work-item ends its part. Fewer branches: GPUs and CPU vectorizers keep
    /// straight-line code.
    fn stmt(&mut self, s: &Stmt) {
        let d = self.d;
        match &s.kind {
            StmtKind::Let(l, e) => {
                let v = self.expr(e);
                let line = match self.class(*l) {
                    Class::Plain => {
                        format!("{} v{l} = {v};", cty(d, self.f.ty(self.f.locals[*l].ty)))
                    }
                    _ => format!("v{l} = {v};"),
                };
                self.line(&line);
            }
            StmtKind::LocalArray => {}
            StmtKind::Assign(Place::Local(l), op, e) => {
                let t = self.f.ty(self.f.locals[*l].ty);
                let v = self.expr(e);
                let value = match op {
                    None => v,
                    Some(op) => self.binary(*op, t, self.ty(e), &format!("v{l}"), &v),
                };
                let line = format!("v{l} = {value};");
                self.line(&line);
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
                let elem = self.base_ty(*base);
                let t = cty(d, elem);
                let (ptr, len, space) = self.base(*base);
                let (vn, iname) = (self.fresh("v"), self.fresh("i"));
                self.line("{");
                self.depth += 1;
                // Rust's order: the value, then the place.
                let v = self.expr(e);
                let line = format!("{t} {vn} = {v};");
                self.line(&line);
                let i = self.index(index);
                let line = format!("sycl_u64 {iname} = {i};");
                self.line(&line);
                // A check the bounds analysis proved always passes is dropped, like the
                // user's `unsafe` one; one it proved for this work-group size is folded away.
                let proof = self.proof(*base, index, *checked);
                let current = match &proof {
                    Access::Checked => format!(
                        "sycl_ld_{space}_{}({ptr}, {len}, {iname}, {})",
                        tag(elem),
                        self.failp()
                    ),
                    Access::When(c) => format!(
                        "sycl_ldc_{space}_{}({ptr}, {len}, {iname}, {}, {c})",
                        tag(elem),
                        self.failp()
                    ),
                    Access::Unchecked => format!("{ptr}[{iname}]"),
                };
                let value = match op {
                    None => vn.clone(),
                    Some(op) => self.binary(*op, elem, self.ty(e), &current, &vn),
                };
                let line = match &proof {
                    Access::Checked => format!(
                        "sycl_st_{space}_{}({ptr}, {len}, {iname}, {value}, {});",
                        tag(elem),
                        self.failp()
                    ),
                    Access::When(c) => format!(
                        "sycl_stc_{space}_{}({ptr}, {len}, {iname}, {value}, {}, {c});",
                        tag(elem),
                        self.failp()
                    ),
                    // In bounds, but still nothing after a failure.
                    Access::Unchecked => {
                        format!("if (!{}) {ptr}[{iname}] = {value};", self.failed())
                    }
                };
                self.line(&line);
                self.depth -= 1;
                self.line("}");
            }
            StmtKind::Expr(e) => {
                let v = self.expr(e);
                let line = format!("(void)({v});");
                self.line(&line);
            }
            StmtKind::If(c, a, b) => {
                let cond = self.expr(c);
                let line = format!("if {} {{", parenthesized(&cond));
                self.line(&line);
                self.depth += 1;
                self.block_plain(a);
                self.depth -= 1;
                if b.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.depth += 1;
                    self.block_plain(b);
                    self.depth -= 1;
                    self.line("}");
                }
            }
            StmtKind::While(c, body) => {
                let v = self.expr(c);
                let line = format!("while (!{} && {}) {{", self.failed(), parenthesized(&v));
                self.line(&line);
                self.depth += 1;
                self.block_plain(body);
                self.depth -= 1;
                self.line("}");
            }
            StmtKind::Loop(body) => {
                let line = format!("while (!{}) {{", self.failed());
                self.line(&line);
                self.depth += 1;
                self.block_plain(body);
                self.depth -= 1;
                self.line("}");
            }
            StmtKind::For {
                var,
                start,
                end,
                inclusive,
                step,
                body,
            } => {
                self.for_loop(*var, (start, end, *inclusive), step.as_ref(), false, |e| {
                    e.block_plain(body)
                });
            }
            StmtKind::Break => self.line("break;"),
            StmtKind::Continue => self.line("continue;"),
            StmtKind::Return(None) => {
                let line = self.return_stmt();
                self.line(&line);
            }
            StmtKind::Return(Some(e)) => {
                let v = self.expr(e);
                let line = format!("return {v};");
                self.line(&line);
            }
            StmtKind::Barrier => unreachable!("barriers are steps"),
        }
    }

    // ---- expressions

    fn base_ty(&self, base: Base) -> Ty {
        match base {
            Base::Param(i) => match self.f.params[i].kind {
                ParamKind::Slice { elem, .. } => elem,
                ParamKind::Scalar(t) => t,
            },
            Base::Local(l) => self.f.ty(self.f.locals[l].ty),
        }
    }

    /// Pointer, length and address-space letter of a slice or local array.
    fn base(&self, base: Base) -> (String, String, &'static str) {
        match base {
            Base::Param(i) => (format!("p{i}"), format!("p{i}_len"), "g"),
            Base::Local(l) => (
                format!("a{l}"),
                format!("((sycl_u64){})", self.f.locals[l].array.expect("an array")),
                "l",
            ),
        }
    }

    fn lit(&self, l: &Lit, t: Ty) -> String {
        let d = self.d;
        match l {
            Lit::Zero if t == Ty::Bool => "false".into(),
            Lit::Zero => format!("(({})0)", cty(d, t)),
            Lit::Bool(b) => b.to_string(),
            Lit::Int(v) => match t {
                Ty::I32 if *v <= i32::MAX as u128 => format!("{v}"),
                Ty::I32 => format!("((int){v}u)"),
                Ty::U32 => format!("{v}u"),
                Ty::I64 if *v <= i64::MAX as u128 => match d {
                    Dialect::Cuda => format!("{v}ll"),
                    Dialect::OpenCl => format!("{v}l"),
                },
                Ty::I64 => match d {
                    Dialect::Cuda => format!("((long long){v}ull)"),
                    Dialect::OpenCl => format!("((long){v}ul)"),
                },
                Ty::U64 | Ty::Usize => match d {
                    Dialect::Cuda => format!("{v}ull"),
                    Dialect::OpenCl => format!("{v}ul"),
                },
                Ty::F32 => format!("{:?}f", *v as f32),
                Ty::F64 => format!("{:?}", *v as f64),
                Ty::Bool => unreachable!("checked"),
            },
            Lit::Float(digits) => match t {
                Ty::F32 => format!("{:?}f", digits.parse::<f32>().expect("checked")),
                _ => format!("{:?}", digits.parse::<f64>().expect("checked")),
            },
        }
    }

    fn expr(&mut self, e: &Expr) -> String {
        let d = self.d;
        let t = self.ty(e);
        match &e.kind {
            ExprKind::Lit(l) => self.lit(l, t),
            ExprKind::Local(l) => self.local_name(*l),
            ExprKind::Param(i) => format!("p{i}"),
            ExprKind::Load {
                base,
                index,
                checked,
            } => {
                let (ptr, len, space) = self.base(*base);
                let i = self.index(index);
                let proof = self.proof(*base, index, *checked);
                match proof {
                    Access::Checked => format!(
                        "sycl_ld_{space}_{}({ptr}, {len}, {i}, {})",
                        tag(t),
                        self.failp()
                    ),
                    Access::When(c) => format!(
                        "sycl_ldc_{space}_{}({ptr}, {len}, {i}, {}, {c})",
                        tag(t),
                        self.failp()
                    ),
                    Access::Unchecked => format!("{ptr}[{i}]"),
                }
            }
            ExprKind::Len(base) => self.base(*base).1,
            ExprKind::Unary(UnOp::Neg, a) => {
                let v = self.expr(a);
                if t.is_signed() {
                    format!("(({})(0 - ({})({v})))", cty(d, t), cty(d, unsigned_of(t)))
                } else {
                    format!("(-({v}))")
                }
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let v = self.expr(a);
                if t == Ty::Bool {
                    format!("(!({v}))")
                } else {
                    format!("(({})~({v}))", cty(d, t))
                }
            }
            ExprKind::Binary(..) if d == Dialect::OpenCl && self.int_arith => {
                // `u32` `+ - *` with no signed overflow either: computed in `int`, whose
                // arithmetic Intel's compiler marks `nsw` (see `Bounds::no_signed_wrap`).
                let proof = self.bounds.no_signed_wrap_tree(e);
                let cond = match proof {
                    Proof::Always => Some(None),
                    // A constant over the work-group size, which only kernels declare; both
                    // forms are written, so their leaves must be pure.
                    Proof::When(c) if self.guarded.is_some() && pure(e) => Some(Some(c)),
                    // (Never a run-time guard.)
                    _ => None,
                };
                let Some(cond) = cond else {
                    return self.wide_binary(e);
                };
                let narrow = format!("((uint)({}))", self.int_c(e));
                match cond {
                    None => narrow,
                    Some(c) => {
                        let c = self.bound_c(&c);
                        // The other branch (folded away) without `int` trees, so that the
                        // text grows linearly.
                        self.int_arith = false;
                        let wide = self.wide_binary(e);
                        self.int_arith = true;
                        format!("(({c}) ? {narrow} : {wide})")
                    }
                }
            }
            ExprKind::Binary(..) => self.wide_binary(e),
            ExprKind::Cast(a, to) => {
                let from = self.ty(a);
                if self.d == Dialect::OpenCl
                    && matches!(to, Ty::U32 | Ty::I32)
                    && matches!(from, Ty::U64 | Ty::Usize | Ty::I64)
                    && pure(a)
                {
                    let v = self.trunc32(a);
                    return if *to == Ty::U32 {
                        v
                    } else {
                        format!("((int){v})")
                    };
                }
                let v = self.expr(a);
                self.cast(&v, from, *to)
            }
            ExprKind::Math(m, args) => {
                let vs: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                self.math(*m, t, &vs)
            }
            ExprKind::Query(q, dim) => match q {
                Query::GlobalId => format!("sycl_global_id(SYCL_AXIS({dim}))"),
                Query::LocalId => format!("sycl_local_id(SYCL_AXIS({dim}))"),
                Query::GroupId => format!("sycl_group_id(SYCL_AXIS({dim}))"),
                Query::GlobalRange => format!("sycl_r{dim}"),
                Query::LocalRange => format!("sycl_local_range(SYCL_AXIS({dim}))"),
                Query::GroupRange => format!("sycl_group_range(SYCL_AXIS({dim}))"),
            },
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
            } => {
                let (ptr, len, space) = self.base(*base);
                let i = self.expr(index);
                let vs: Vec<String> = values.iter().map(|v| self.expr(v)).collect();
                let name = match op {
                    AtomicOp::FetchAdd => "add",
                    AtomicOp::FetchMin => "min",
                    AtomicOp::FetchMax => "max",
                    AtomicOp::CompareExchange => "cas",
                };
                format!(
                    "sycl_atomic_{name}_{space}_{}({ptr}, {len}, {i}, {}, {})",
                    tag(t),
                    vs.join(", "),
                    self.failp()
                )
            }
            ExprKind::Reduce(..) | ExprKind::SubGroup(..) => {
                unreachable!("reductions and sub-group collectives are steps")
            }
            ExprKind::SubGroupQuery(q) => match q {
                SubGroupQuery::LocalId => "sycl_sg_local_id()",
                SubGroupQuery::LocalRange => "sycl_sg_local_range()",
                SubGroupQuery::MaxLocalRange => "sycl_sg_max_local_range()",
                SubGroupQuery::Id => "sycl_sg_id()",
                SubGroupQuery::Range => "sycl_sg_range()",
            }
            .into(),
            ExprKind::Call(path, args) => {
                let key = path_key(path);
                let k = self
                    .helpers
                    .iter()
                    .position(|h| path_key(h) == key)
                    .expect("helpers are collected");
                let mut vs: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                vs.push(self.failp().to_owned());
                format!("{}({})", call_name(k), vs.join(", "))
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c), self.expr(a), self.expr(b));
                format!("(({c}) ? ({a}) : ({b}))")
            }
        }
    }

    /// A binary operation as written, at its types.
    fn wide_binary(&mut self, e: &Expr) -> String {
        let ExprKind::Binary(op, a, b) = &e.kind else {
            unreachable!("a binary operation")
        };
        let (at, bt) = (self.ty(a), self.ty(b));
        let (x, y) = (self.expr(a), self.expr(b));
        self.binary(*op, at, bt, &x, &y)
    }

    /// A tree `Bounds::no_signed_wrap_tree` proved, in `int`: its leaves converted (each
    /// below 2^31, so exactly).
    fn int_c(&mut self, e: &Expr) -> String {
        if let Some((a, b)) = self.bounds.u32_arith(e) {
            let ExprKind::Binary(op, ..) = &e.kind else {
                unreachable!("u32_arith is a binary operation")
            };
            let (x, y) = (self.int_c(a), self.int_c(b));
            return format!("({x} {} {y})", op.c());
        }
        match &e.kind {
            ExprKind::Lit(Lit::Int(v)) => format!("{v}"),
            ExprKind::Lit(_) => "0".into(),
            _ => format!("((int)({}))", self.expr(e)),
        }
    }

    /// `x op y` with Rust's semantics; `t`: the left operand's type, `rt`: the right's.
    fn binary(&self, op: BinOp, t: Ty, rt: Ty, x: &str, y: &str) -> String {
        let d = self.d;
        let c = cty(d, t);
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul if t.is_signed() => {
                let u = cty(d, unsigned_of(t));
                format!("(({c})(({u})({x}) {} ({u})({y})))", op.c())
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul if t.is_int() => {
                format!("(({c})(({x}) {} ({y})))", op.c())
            }
            BinOp::Div | BinOp::Rem if t.is_int() => {
                let name = if op == BinOp::Div { "div" } else { "rem" };
                format!("sycl_{name}_{}({x}, {y}, {})", tag(t), self.failp())
            }
            BinOp::Rem => match (d, t) {
                (Dialect::Cuda, Ty::F32) => format!("fmodf({x}, {y})"),
                _ => format!("fmod({x}, {y})"),
            },
            BinOp::Shl | BinOp::Shr => {
                let mask = t.bits() - 1;
                let amount = format!("((unsigned int)(({y}) & {mask}))");
                let _ = rt;
                if op == BinOp::Shl && t.is_signed() {
                    let u = cty(d, unsigned_of(t));
                    format!("(({c})(({u})({x}) << {amount}))")
                } else {
                    format!("(({c})(({x}) {} {amount}))", op.c())
                }
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => {
                format!("(({c})(({x}) {} ({y})))", op.c())
            }
            _ => format!("(({x}) {} ({y}))", op.c()),
        }
    }

    fn cast(&self, v: &str, from: Ty, to: Ty) -> String {
        let d = self.d;
        if from == to {
            return format!("({v})");
        }
        if from.is_float() && to.is_int() {
            // Saturating, NaN to 0 (a prelude function: the value is used twice).
            let _ = d;
            return format!("sycl_cvt_{}_{}({v})", tag(from), tag(to));
        }
        format!("(({})({v}))", cty(d, to))
    }

    fn math(&self, m: MathFn, t: Ty, a: &[String]) -> String {
        let d = self.d;
        if t.is_int() {
            return match m {
                MathFn::Min => format!("min({}, {})", a[0], a[1]),
                MathFn::Max => format!("max({}, {})", a[0], a[1]),
                MathFn::Abs => format!("sycl_abs_{}({})", tag(t), a[0]),
                _ => unreachable!("checked by the parser"),
            };
        }
        let base = match m {
            MathFn::Sqrt => "sqrt",
            MathFn::Exp => "exp",
            MathFn::Ln => "log",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Powf => "pow",
            MathFn::MulAdd => "fma",
            MathFn::Min => "fmin",
            MathFn::Max => "fmax",
            MathFn::Abs => "fabs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
        };
        let suffix = if d == Dialect::Cuda && t == Ty::F32 {
            "f"
        } else {
            ""
        };
        format!("{base}{suffix}({})", a.join(", "))
    }
}

/// `s` in parentheses, once: `if ((a == b))` draws a compiler warning.
fn parenthesized(s: &str) -> String {
    let bytes = s.as_bytes();
    if bytes.first() == Some(&b'(') {
        let mut depth = 0i32;
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                if i + 1 == bytes.len() {
                    return s.to_owned();
                }
                break;
            }
        }
    }
    format!("({s})")
}

fn sync_loop_vars(steps: &[Step]) -> Vec<usize> {
    let mut out = Vec::new();
    for s in steps {
        if let Step::SyncFor { var, body, .. } = s {
            out.push(*var);
            out.extend(sync_loop_vars(body));
        }
    }
    out
}
