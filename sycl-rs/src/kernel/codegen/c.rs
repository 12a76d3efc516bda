//! CUDA C++ (for NVRTC) and OpenCL C from the validated kernel IR.
//!
//! The functions printed here call a prelude that the runtime puts first
//! (`src/kernel/prelude_*.h`): bounds-checked loads and stores, checked division, atomics,
//! work-item queries and group reductions, one per element type and address space. Every name
//! printed is generated (`p0`, `v3`, `a2`, `sycl_h1`), so no user identifier reaches C.
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
//!
//! Bounds come from the IR's checks: an access `Proved` in bounds is printed unchecked, one
//! proved `When` a condition over the work-group size is checked unless that condition (a
//! constant of the program, folded by the C compiler) holds, and one proved under a run-time
//! `Guard` is checked unless `SYCL_GUARDED`: the runtime evaluates the guards this printer
//! relied on ([`Printed::guards`]) on the host at each launch and builds the program with
//! `SYCL_GUARDED` 1 or 0.
//!
//! Code shapes for Intel's CPU OpenCL compiler (OpenCL C only; CUDA keeps the written forms,
//! which NVRTC reads as well as hand-written code) are [`Shaping`] options, each with the
//! measurement that justifies it.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use sycl_kernel_ir as kir;
use sycl_kernel_ir::ir::{Base, Expr, ExprKind, For, Function, Param, Step, Stmt, StmtKind};
use sycl_kernel_ir::{
    AtomicOp, BinOp, Bound, BoundCmp, BoundFn, Check, Collective, GroupOp, MathFn, MemoryOrder,
    MemoryScope, Query, Scalar as Ty, SubGroupOp, SubGroupQuery, UnOp,
};

use super::{call_spaces, helper_variants, Program, Space};

/// The C dialect.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Dialect {
    /// CUDA C++ for NVRTC.
    Cuda,
    /// OpenCL C 1.2 (and later).
    OpenCl,
}

/// Code shapes a dialect's printer chooses where the IR's facts allow them: vendor tuning,
/// read only here.
#[derive(Clone, Copy, Debug)]
struct Shaping {
    /// Indices that `index_fits_i32` proves computable in `int` are computed so and
    /// sign-extended (as hand-written OpenCL C with `int` indices reads): Intel's CPU
    /// vectorizer sees consecutive accesses only in that form (zero-extended or truncated
    /// 64-bit arithmetic hides them).
    narrow_indices: bool,
    /// Loops count in the forms their facts allow instead of a trip count: a `u32` loop in
    /// `int` where its start and every value are below 2^31 (stencil2d 1.5x -> 1.0x the
    /// hand-written time on AVX-512: the vectorizer loses an unsigned counter); a
    /// per-work-item `usize` loop in `uint`; otherwise `v += step` in the loop's own type
    /// (reduce 1.2x, stencil 1.7x slower with a trip count: the vectorizer keeps a
    /// work-item-strided loop whose counter is the index).
    loop_forms: bool,
    /// A `step_by` loop whose start and step are literals counts with `v += step` (in its
    /// own type, where `For::counts_in_u32`/`counts_in_u64` hold) instead of a trip count:
    /// NVCC unrolled sgemm's `(0..n).step_by(16)` loop of tiles into more registers (72 ->
    /// 64 with `v += 16`; 1.21x -> 1.01x the hand-written time), while the scan bench's loop
    /// from a per-group start lost 1.03x -> 1.23x with this form, so only constants get it.
    constant_step_loops: bool,
    /// `u32` `+ - *` trees proved free of signed overflow are computed in `int`, whose
    /// arithmetic Intel's compiler marks `nsw` (LLVM then moves a sign extension through
    /// `c ± k`: one address with constant displacements).
    int_arithmetic: bool,
    /// A truncation of 64-bit arithmetic to 32 bits is pushed down to its leaves, and a
    /// global id truncated is its 32-bit form: the vectorizer loses the work-items'
    /// consecutiveness through a truncated 64-bit sum.
    narrow_truncations: bool,
}

impl Dialect {
    fn shaping(self) -> Shaping {
        let (intel, nvidia) = (self == Dialect::OpenCl, self == Dialect::Cuda);
        Shaping {
            narrow_indices: intel,
            loop_forms: intel,
            constant_step_loops: nvidia,
            int_arithmetic: intel,
            narrow_truncations: intel,
        }
    }
}

/// A program's functions in C (helper prototypes, helpers callees first, the kernel
/// `sycl_kernel`), to follow the preludes, and the run-time guards its `SYCL_GUARDED` form
/// relies on.
pub(crate) struct Printed {
    /// The functions.
    pub text: String,
    /// The conditions under which `SYCL_GUARDED` 1 is sound, each once.
    pub guards: Vec<Bound>,
    /// The kernel orders memory (`sycl_kernel_ir::orders_memory`): its ordered atomics need
    /// `SYCL_ORDERED_ATOMICS` and, in OpenCL C, a 2.0 or later build.
    pub orders_memory: bool,
}

/// Prints `program` (its kernel named `name`, its helpers `helper_names`) in dialect `d`.
pub(crate) fn program(
    program: &Program,
    name: &str,
    helper_names: &[&str],
    reduce_bytes: usize,
    d: Dialect,
) -> Printed {
    let mut text = String::new();
    let mut helpers = Vec::new();
    let helper_fns: Vec<(&Function, &[usize])> = program
        .helpers
        .iter()
        .map(|(f, calls)| (f, &calls[..]))
        .collect();
    let kernel = (&program.kernel, &program.kernel_calls[..]);
    for (i, spaces) in helper_variants(kernel, &helper_fns) {
        let (f, calls) = &program.helpers[i];
        let mut e = Printer::new(f, d, calls, None);
        e.spaces = spaces;
        let (proto, body) = e.helper(i);
        text.push_str(&proto);
        helpers.push((helper_names.get(i).copied().unwrap_or("?"), body));
    }
    for (name, body) in helpers {
        let _ = writeln!(text, "// helper `{name}`");
        text.push_str(&body);
    }
    let mut e = Printer::new(
        &program.kernel,
        d,
        &program.kernel_calls,
        Some(KernelCtx { reduce_bytes }),
    );
    e.kernel_fn(name);
    text.push_str(&e.out);
    Printed {
        text,
        guards: e.guarded.take().unwrap_or_default(),
        orders_memory: kir::orders_memory(&program.kernel.body),
    }
}

/// The preludes' accessor letter of a space.
fn letter(s: Space) -> &'static str {
    match s {
        Space::Global => "g",
        Space::Local => "l",
        Space::Private => "p",
    }
}

/// OpenCL C's qualifier of a pointer to a space: always written, since an unqualified
/// pointer is private in OpenCL C 1.2 but generic in 2.0 and later (the prelude's accessors
/// take `__private` ones).
fn qualifier(s: Space, d: Dialect) -> &'static str {
    match (d, s) {
        (Dialect::Cuda, _) => "",
        (Dialect::OpenCl, Space::Global) => "__global ",
        (Dialect::OpenCl, Space::Local) => "__local ",
        (Dialect::OpenCl, Space::Private) => "__private ",
    }
}

/// The C name of a helper's variant: `sycl_h{i}` where every slice is global, else a letter
/// per parameter.
fn variant_name(i: usize, spaces: &[Space]) -> String {
    if spaces.iter().all(|s| *s == Space::Global) {
        helper_name(i)
    } else {
        let letters: String = spaces.iter().map(|s| letter(*s)).collect();
        format!("{}_{letters}", helper_name(i))
    }
}

/// A condition a code form or an access relies on: a bound, printed where it is used (so
/// that only the bounds the program uses are declared), or the guarded program's switch.
#[derive(Clone, PartialEq)]
enum Cond {
    Bound(Bound),
    /// `SYCL_GUARDED`: the kernel's run-time guards held for this launch.
    Guarded,
}

/// How an access is printed.
enum Access {
    Checked,
    Unchecked,
    /// Checked unless this C condition (folded by the compiler) holds.
    When(String),
}

fn op_c(op: BinOp) -> &'static str {
    match op {
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

/// The C type of a kernel-language type.
fn cty(d: Dialect, t: Ty) -> &'static str {
    match (d, t) {
        (_, Ty::Bool) => "bool",
        (_, Ty::I32) => "int",
        (Dialect::Cuda, Ty::U32) => "unsigned int",
        (Dialect::OpenCl, Ty::U32) => "uint",
        (Dialect::Cuda, Ty::I64) => "long long",
        (Dialect::OpenCl, Ty::I64) => "long",
        (_, Ty::U64 | Ty::Usize) => "sycl_u64",
        // Halves are floats in registers (rounded after each operation); `elem_cty` in memory.
        (_, Ty::F32 | Ty::F16 | Ty::Bf16) => "float",
        (_, Ty::F64) => "double",
    }
}

/// The C type of `t` in memory (slices, local arrays, parameters): halves are 16-bit patterns.
fn elem_cty(d: Dialect, t: Ty) -> &'static str {
    match (d, t) {
        (Dialect::Cuda, Ty::F16 | Ty::Bf16) => "unsigned short",
        (Dialect::OpenCl, Ty::F16 | Ty::Bf16) => "ushort",
        _ => cty(d, t),
    }
}

/// The suffix of prelude function names.
fn tag(t: Ty) -> &'static str {
    match t {
        Ty::Bool => "bool",
        Ty::I32 => "i32",
        Ty::U32 => "u32",
        Ty::I64 => "i64",
        Ty::U64 | Ty::Usize => "u64",
        Ty::F32 => "f32",
        Ty::F64 => "f64",
        Ty::F16 => "f16",
        Ty::Bf16 => "bf16",
    }
}

fn unsigned_of(t: Ty) -> Ty {
    match t {
        Ty::I32 => Ty::U32,
        Ty::I64 => Ty::U64,
        other => other,
    }
}

/// The C name of helper `i` of the program (by position: a Rust name need not be a C one).
/// A memory order as the CUDA prelude's template argument.
fn order_code(o: MemoryOrder) -> usize {
    MemoryOrder::ALL.iter().position(|x| *x == o).unwrap_or(4)
}

/// A memory scope as the CUDA prelude's template argument (0 cta, 1 gpu, 2 sys).
fn scope_code(s: MemoryScope) -> usize {
    MemoryScope::ALL.iter().position(|x| *x == s).unwrap_or(2)
}

/// OpenCL C 2.0's `memory_order` constant.
fn ocl_order(o: MemoryOrder) -> String {
    format!("memory_order_{}", o.sycl_name())
}

/// OpenCL C 2.0's `memory_scope` constant (the system is every SVM device).
fn ocl_scope(s: MemoryScope) -> &'static str {
    match s {
        MemoryScope::WorkGroup => "memory_scope_work_group",
        MemoryScope::Device => "memory_scope_device",
        MemoryScope::System => "memory_scope_all_svm_devices",
    }
}

/// An element read without a check: a half converted from its bits.
fn unchecked_load(t: Ty, place: &str) -> String {
    if t.is_half() {
        format!("sycl_{}_to_f32({place})", tag(t))
    } else {
        place.to_owned()
    }
}

fn helper_name(i: usize) -> String {
    format!("sycl_h{i}")
}

struct KernelCtx {
    reduce_bytes: usize,
}

struct Printer<'a> {
    f: &'a Function,
    d: Dialect,
    shape: Shaping,
    /// A kernel's context; `None` in helpers.
    kernel: Option<KernelCtx>,
    /// For each call marker `k` of the function, its helper's index in the program.
    calls: &'a [usize],
    /// Where each slice parameter's elements live (kernels: global; a helper's variant).
    spaces: Vec<Space>,
    out: String,
    depth: usize,
    tmp: usize,
    /// The label ending the current region (kernels that synchronise).
    region_end: Option<String>,
    /// Evaluating a value every work-item computes (`uniform_check`): failures go to
    /// `sycl_ufail`.
    uniform: bool,
    /// In a kernel: the run-time guards its forms and accesses relied on (`Check::Guard`).
    guarded: Option<Vec<Bound>>,
    /// In a kernel: the bound constants printed so far (`const sycl_u64 sycl_bN = ..;`,
    /// each after those it names), declared first in the body, and their names.
    bound_decls: Vec<String>,
    bound_names: HashMap<Bound, String>,
    /// Whether a uniform value's failure (`sycl_ufail`) was used.
    ufail_used: Cell<bool>,
    /// `usize`/`u64` loop variables counted in `uint` (OpenCL C, in the `SYCL_GUARDED`
    /// program where their loop's fact is a run-time guard).
    narrowed: HashSet<usize>,
    /// Whether `u32` arithmetic proved free of signed overflow is printed in `int`; off
    /// inside the unsigned copy of such a tree.
    int_arith: bool,
    /// Locals that live across synchronisation (declared once, up front, in kernels with
    /// steps).
    hoisted: HashSet<usize>,
}

impl<'a> Printer<'a> {
    fn new(f: &'a Function, d: Dialect, calls: &'a [usize], kernel: Option<KernelCtx>) -> Self {
        let guarded = kernel.as_ref().map(|_| Vec::new());
        Printer {
            f,
            d,
            shape: d.shaping(),
            kernel,
            calls,
            spaces: vec![Space::Global; f.params.len()],
            out: String::new(),
            depth: 0,
            tmp: 0,
            region_end: None,
            uniform: false,
            guarded,
            bound_decls: Vec::new(),
            bound_names: HashMap::new(),
            ufail_used: Cell::new(false),
            narrowed: HashSet::new(),
            int_arith: true,
            hoisted: HashSet::new(),
        }
    }

    fn is_kernel(&self) -> bool {
        self.kernel.is_some()
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
        match self.kernel {
            Some(_) if self.uniform => {
                self.ufail_used.set(true);
                "&sycl_ufail"
            }
            Some(_) => "&sycl_fail",
            None => "sycl_failp",
        }
    }

    fn failed(&self) -> &'static str {
        match self.kernel {
            Some(_) if self.uniform => {
                self.ufail_used.set(true);
                "sycl_ufail"
            }
            Some(_) => "sycl_fail",
            None => "(*sycl_failp)",
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

    /// How an access with this check is printed.
    fn access(&mut self, check: &Check) -> Access {
        match check {
            Check::Checked => Access::Checked,
            Check::Proved => Access::Unchecked,
            Check::When(b) => Access::When(self.bound_c(b)),
            Check::Guard(b) if self.guarded.is_some() => {
                self.register(b);
                Access::When("SYCL_GUARDED".into())
            }
            // Helpers are checked (their parameters are not the launch's).
            Check::Guard(_) => Access::Checked,
        }
    }

    /// Adds a run-time guard that a form or an access relies on to the kernel's.
    fn register(&mut self, cond: &Bound) {
        if let Some(guards) = &mut self.guarded {
            if !guards.contains(cond) {
                guards.push(cond.clone());
            }
        }
    }

    /// What a fact about a code form (not an access) allows: `None` when it does not hold,
    /// else the condition under which it does (`None` inside: always). A run-time guard is
    /// `SYCL_GUARDED` (`register` it where the form is used); helpers cannot use one.
    fn form_cond(&self, c: &Check, constant_only: bool) -> Option<Option<Cond>> {
        match c {
            Check::Checked => None,
            Check::Proved => Some(None),
            Check::When(b) if !constant_only => Some(Some(Cond::Bound(b.clone()))),
            Check::When(_) => None,
            Check::Guard(_) => self.guarded.as_ref().map(|_| Some(Cond::Guarded)),
        }
    }

    /// `form_cond`, the guard registered for a form that is used where it holds.
    fn form_proof(&mut self, c: &Check, constant_only: bool) -> Option<Option<Cond>> {
        let cond = self.form_cond(c, constant_only);
        if let (Some(_), Check::Guard(b)) = (&cond, c) {
            self.register(b);
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
            // (Validation refuses templates: `__rt::instantiate` replaced it.)
            Bound::Const(_) => unreachable!("a validated function has no const parameter"),
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

    /// An index: in signed 32-bit arithmetic, sign-extended, where its `index_fits_i32` fact
    /// holds and the dialect narrows indices; else as written. (The fact's guard joins the
    /// kernel's in both dialects, so that they share one list.)
    fn index(&mut self, index: &Expr, fits_i32: &Check) -> String {
        let wide = self.expr(index);
        let Some(cond) = self.form_proof(fits_i32, false) else {
            return wide;
        };
        if !self.shape.narrow_indices {
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

    /// `e` (a tree `index_fits_i32` accepted) as an `int` expression.
    fn narrow_c(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Lit(v) if e.ty.is_int() => format!("{v}"),
            ExprKind::Lit(_) => "0".into(),
            ExprKind::Binary(op, a, b, _) => {
                let (x, y) = (self.narrow_c(a), self.narrow_c(b));
                format!("({x} {} {y})", op_c(*op))
            }
            ExprKind::Cast(a) if a.ty == Ty::U32 => self.narrow_c(a),
            ExprKind::Cast(a) => format!("((int)({}))", self.trunc32(a)),
            ExprKind::Local(l) => format!("((int)v{l})"),
            _ => format!("((int)({}))", self.expr(e)),
        }
    }

    /// A pure `usize`/`u64` (or `i64`) value truncated to `uint`, the truncation pushed down
    /// through `+ - * & | ^` (exact in modular arithmetic) to the leaves.
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
                _,
            ) if a.ty.bits() == 64 && b.ty.bits() == 64 => {
                let (x, y) = (self.trunc32(a), self.trunc32(b));
                format!("((uint)({x} {} {y}))", op_c(*op))
            }
            ExprKind::Cast(a) if matches!(a.ty, Ty::U32 | Ty::I32) => {
                format!("((uint)({}))", self.expr(a))
            }
            _ => format!("((uint)({}))", self.expr(e)),
        }
    }

    // ---- functions

    /// A helper's prototype and definition (its function named `sycl_h{i}`).
    fn helper(&mut self, i: usize) -> (String, String) {
        let d = self.d;
        let mut sig = String::new();
        if d == Dialect::Cuda {
            sig.push_str("__device__ ");
        }
        let ret = self.f.ret.unwrap_or(Ty::I32);
        let _ = write!(sig, "{} {}(", cty(d, ret), variant_name(i, &self.spaces));
        for (i, p) in self.f.params.iter().enumerate() {
            match *p {
                Param::Scalar(t) => {
                    let _ = write!(sig, "{} p{i}, ", cty(d, t));
                }
                // A slice: its pointer and length, as the kernel has them (no `restrict`:
                // a caller may pass one slice as two read-only arguments).
                Param::Slice { elem, mutable } => {
                    let c = if mutable { "" } else { "const " };
                    let space = qualifier(self.spaces[i], d);
                    let _ = write!(
                        sig,
                        "{space}{c}{}* p{i}, sycl_u64 p{i}_len, ",
                        elem_cty(d, elem)
                    );
                }
                // (Validation keeps struct slices out of helpers.)
                Param::Structs { .. } => unreachable!("a helper with a struct slice"),
            }
        }
        sig.push_str(match d {
            Dialect::Cuda => "unsigned int* sycl_failp)",
            Dialect::OpenCl => "uint* sycl_failp)",
        });
        self.out.push_str(&sig);
        self.out.push_str("\n{\n");
        self.depth = 1;
        self.private_arrays();
        let f = self.f;
        self.block_plain(&f.body);
        let _ = writeln!(self.out, "    return ({})0;\n}}", cty(d, ret));
        (format!("{sig};\n"), std::mem::take(&mut self.out))
    }

    /// The private arrays, declared at the top of the function (their `let`s fill them), so
    /// that the jumps that end a region never cross a declaration. Elements are stored as
    /// slices hold them (halves as 16-bit patterns).
    fn private_arrays(&mut self) {
        for (l, local) in self.f.locals.iter().enumerate() {
            if let Some(len) = local.array.filter(|a| !a.is_work_group()).map(|a| a.len) {
                let line = format!("{} a{l}[{len}];", elem_cty(self.d, local.ty));
                self.line(&line);
            }
        }
    }

    fn kernel_fn(&mut self, name: &str) {
        let d = self.d;
        let f = self.f;
        let reduce_bytes = self.kernel.as_ref().map_or(0, |k| k.reduce_bytes);
        let ordered = kir::orders_memory(&f.body);
        let mut params = Vec::new();
        let mut prologue = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            match *p {
                Param::Scalar(Ty::Bool) => {
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
                Param::Scalar(t) if t.is_half() => {
                    params.push(format!("{} p{i}_bits", elem_cty(d, t)));
                    prologue.push(format!(
                        "const float p{i} = sycl_{}_to_f32(p{i}_bits);",
                        tag(t)
                    ));
                }
                Param::Scalar(t) => params.push(format!("{} p{i}", cty(d, t))),
                // A struct slice is bytes, each field access cast to its scalar
                // (`field_access`).
                Param::Slice { mutable, .. } | Param::Structs { mutable, .. } => {
                    let elem = match *p {
                        Param::Slice { elem, .. } => elem_cty(d, elem),
                        _ if d == Dialect::Cuda => "unsigned char",
                        _ => "uchar",
                    };
                    let c = if mutable { "" } else { "const " };
                    // A kernel that orders memory may read what other work-items, devices or
                    // processes write meanwhile: no `restrict` (no read-only caches).
                    let restrict = match (d, ordered) {
                        (_, true) => "",
                        (Dialect::Cuda, false) => " __restrict__",
                        (Dialect::OpenCl, false) => " restrict",
                    };
                    params.push(match d {
                        Dialect::Cuda => format!("{c}{elem}*{restrict} p{i}"),
                        Dialect::OpenCl => format!("__global {c}{elem}*{restrict} p{i}"),
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
        if d == Dialect::OpenCl && reduce_bytes > 0 {
            params.push("__local sycl_u64* sycl_scratch".into());
        }
        let head = match d {
            Dialect::Cuda => "extern \"C\" __global__ SYCL_KERNEL_ATTRS void",
            Dialect::OpenCl => "__kernel SYCL_KERNEL_ATTRS void",
        };
        // One kernel per program: its entry needs no Rust name (which may not be a C one).
        // (A Rust identifier cannot close the comment.)
        let _ = writeln!(
            self.out,
            "// kernel `{name}`\n{head} sycl_kernel({})\n{{",
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
        self.private_arrays();
        // Work-group local arrays (static shared memory; OpenCL: kernel-scope __local).
        for (l, local) in f.locals.iter().enumerate() {
            if let Some(len) = local.array.filter(|a| a.is_work_group()).map(|a| a.len) {
                let t = elem_cty(d, local.ty);
                let space = if d == Dialect::Cuda {
                    "__shared__"
                } else {
                    "__local"
                };
                self.line(&format!("{space} {t} a{l}[{len}];"));
            }
        }
        match &f.steps {
            None => {
                // A plain range is launched rounded up to whole work-groups; the extra
                // work-items leave here, so the kernel sees exactly its range.
                self.line("if (SYCL_OUTSIDE_RANGE) return;");
                self.block_plain(&f.body);
                self.line("if (sycl_fail) sycl_report(sycl_status, sycl_fail);");
            }
            Some(steps) => {
                // `sycl_done`: the work-item returned (only `return` sets it, so without one it
                // stays a constant the compiler folds). A failed work-item goes on with its
                // effects suppressed, like one in a flat kernel.
                self.line(match d {
                    Dialect::Cuda => "unsigned int sycl_done = 0;",
                    Dialect::OpenCl => "uint sycl_done = 0;",
                });
                if d == Dialect::Cuda {
                    // The CUDA prelude's collectives alternate between two shared buffers by
                    // this count of calls (the same in every thread), so that each needs one
                    // `__syncthreads`, not two (see SYCL_REDUCE there).
                    self.line("unsigned int sycl_parity = 0;");
                }
                // `sycl_ufail` is declared here if a uniform value can fail (known at the end).
                let ufail_at = self.out.len();
                // Locals that live across synchronisation are declared once, up front, so that
                // the jumps that end a region never cross a declaration.
                let (hoisted, loop_vars) = step_locals(steps);
                self.hoisted = hoisted;
                for (l, local) in f.locals.iter().enumerate() {
                    if local.array.is_none() && self.hoisted.contains(&l) && !loop_vars.contains(&l)
                    {
                        let s = format!("{} v{l};", cty(d, local.ty));
                        self.line(&s);
                    }
                }
                self.steps(steps);
                self.line("if (sycl_fail) sycl_report(sycl_status, sycl_fail);");
                if self.ufail_used.get() {
                    let decl = match d {
                        Dialect::Cuda => "    unsigned int sycl_ufail = 0;\n",
                        Dialect::OpenCl => "    uint sycl_ufail = 0;\n",
                    };
                    self.out.insert_str(ufail_at, decl);
                }
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
                    if e.can_fail() {
                        self.uniform_check();
                    }
                }
                Step::Barrier => self.line(match self.d {
                    Dialect::Cuda => "__syncthreads();",
                    Dialect::OpenCl => "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
                }),
                Step::Group { local, op, args } => self.group(*local, *op, args),
                Step::SubGroup { local, op, args } => self.sub_group(*local, *op, args),
                Step::SyncFor(h, body) => {
                    self.for_loop(h, true, |e| e.steps(body));
                }
            }
        }
    }

    /// `let local = group_<op>(args);`: every work-item of the group calls the prelude's
    /// collective; one that returned offers the identity (to a broadcast, zero) through
    /// `sycl_done`. The OpenCL C forms work in the kernel's local scratch.
    fn group(&mut self, local: usize, op: GroupOp, args: &[Expr]) {
        let Some(value) = args.first() else {
            // (Validated: every collective takes its value.)
            self.line("#error \"a group collective without a value\"");
            return;
        };
        let t = value.ty;
        let x = self.fresh("x");
        self.line("{");
        self.depth += 1;
        // The source's id is uniform: every work-item computes it.
        let id = args.get(1).map(|id_expr| {
            let l = self.fresh("id");
            self.uniform = true;
            let v = self.expr(id_expr);
            self.uniform = false;
            self.line(&format!("sycl_u64 {l} = {v};"));
            if id_expr.can_fail() {
                self.uniform_check();
            }
            l
        });
        let s = format!("{} {x} = 0;", cty(self.d, t));
        self.line(&s);
        self.line("if (!sycl_done) {");
        self.depth += 1;
        let v = self.expr(value);
        self.line(&format!("{x} = {v};"));
        self.depth -= 1;
        self.line("}");
        // The collectives' last argument: the local scratch (OpenCL C, as `elem`), or the
        // kernel's count of collective calls (CUDA, see its prelude).
        let scratch = |elem: &str| match self.d {
            Dialect::Cuda => ", &sycl_parity".to_string(),
            Dialect::OpenCl => format!(", (__local {elem}*)sycl_scratch"),
        };
        let call = match op {
            GroupOp::Collective(c) if c.is_vote() => {
                let sc = match self.d {
                    Dialect::Cuda => String::new(),
                    Dialect::OpenCl => scratch("uint"),
                };
                format!("sycl_group_{}({x}, sycl_done{sc})", c.name())
            }
            GroupOp::Collective(Collective::Reduce(r)) => {
                let sc = scratch(cty(self.d, t));
                format!("sycl_reduce_{}_{}({x}, sycl_done{sc})", r.name(), tag(t))
            }
            GroupOp::Collective(c) => {
                let sc = scratch(cty(self.d, t));
                format!("sycl_group_{}_{}({x}, sycl_done{sc})", c.name(), tag(t))
            }
            GroupOp::Broadcast => {
                let sc = scratch(cty(self.d, t));
                let id = id.unwrap_or_else(|| "0".into());
                format!("sycl_group_broadcast_{}({x}, sycl_done, {id}{sc})", tag(t))
            }
        };
        self.line(&format!("v{local} = {call};"));
        self.depth -= 1;
        self.line("}");
    }

    /// `let local = sub_group_<op>(args);`: every work-item of the sub-group calls the
    /// collective; one that returned offers zero (reductions: their identity, through
    /// `sycl_done`).
    fn sub_group(&mut self, local: usize, op: SubGroupOp, args: &[Expr]) {
        let Some(value) = args.first() else {
            // (Validated: every collective takes its value.)
            self.line("#error \"a sub-group collective without a value\"");
            return;
        };
        let t = value.ty;
        let x = self.fresh("x");
        self.line("{");
        self.depth += 1;
        let s = format!("{} {x} = 0;", cty(self.d, t));
        self.line(&s);
        let lane = args.get(1).map(|lane_expr| {
            let l = self.fresh("lane");
            if op == SubGroupOp::Broadcast {
                // Uniform: every work-item computes it, so all name one lane.
                self.uniform = true;
                let v = self.expr(lane_expr);
                self.uniform = false;
                self.line(&format!("sycl_u64 {l} = {v};"));
                if lane_expr.can_fail() {
                    self.uniform_check();
                }
            } else {
                self.line(&format!("sycl_u64 {l} = 0;"));
            }
            l
        });
        self.line("if (!sycl_done) {");
        self.depth += 1;
        let v = self.expr(value);
        self.line(&format!("{x} = {v};"));
        if let (Some(l), Some(lane_expr)) = (&lane, args.get(1)) {
            if op != SubGroupOp::Broadcast {
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
        let s = match op {
            SubGroupOp::Collective(c) if c.is_vote() => {
                format!("v{local} = sycl_sg_{}({x}, {last});", c.name())
            }
            _ => format!("v{local} = sycl_sg_{}_{}({x}, {last});", op.name(), tag(t)),
        };
        self.line(&s);
        self.depth -= 1;
        self.line("}");
    }

    /// After a value every work-item computes (uniform), into `sycl_ufail`: the failure is the
    /// work-item's own unless it had returned (every work-item computed the same value).
    fn uniform_check(&mut self) {
        self.line("if (!sycl_done && !sycl_fail) sycl_fail = sycl_ufail;");
        self.line("sycl_ufail = 0;");
    }

    /// `{ bounds; for (..) { body } }`: a loop in its own scope (its bounds are locals).
    fn for_loop(&mut self, h: &For, uniform: bool, body: impl FnOnce(&mut Self)) {
        self.line("{");
        self.depth += 1;
        self.open_for(h, uniform);
        self.depth += 1;
        body(self);
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
    }

    /// Prints the bounds of the loop and opens it (one `{` for the caller to close after the
    /// body). A `for` always ends: its bounds are computed once, so it needs no failure
    /// check.
    fn open_for(&mut self, h: &For, uniform: bool) {
        let var = h.var;
        let ty = h.start.ty;
        let t = cty(self.d, ty);
        let ut = cty(self.d, unsigned_of(ty));
        let (s, e) = (self.fresh("s"), self.fresh("e"));
        self.uniform = uniform;
        let (sv, ev) = (self.expr(&h.start), self.expr(&h.end));
        let line = format!("{t} {s} = {sv};");
        self.line(&line);
        let line = format!("{t} {e} = {ev};");
        self.line(&line);
        let step_name = h.step.as_ref().map(|step| {
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
        if uniform && (h.start.can_fail() || h.end.can_fail() || h.step.is_some()) {
            self.uniform_check();
        }
        // The forms the loop's facts allow instead of the trip count (`Shaping::loop_forms`),
        // the first that holds wins; a fact proved by a run-time guard holds in the
        // `SYCL_GUARDED` program only (`#if`), and only the chosen form's guards join the
        // kernel's. Every dialect decides alike and registers the chosen form's guards; a
        // dialect prints the form under `loop_forms`, or where it is `NarrowInt` or opted
        // into (`constant_step_loops`).
        // - `Int`: a `u32` loop counted in `int`, its start and every value, the last step
        //   included, below 2^31. An unproved start keeps the unsigned loop: the select that
        //   would clamp it cost as much as the unsigned counter. `Some(c)`: the start's own
        //   condition, folded by the C compiler.
        // - `NarrowInt`: a `usize` loop whose start differs per work-item counted in `int`,
        //   every value below 2^31 (`For::counts_in_i32`); every dialect prints it. Both
        //   compilers keep a strided `int` loop's counter and address in fewer registers and
        //   instructions: softmax over bf16 rows, ours/hand-written time, on the H100 1.19x-
        //   1.24x with a trip count, 1.28x-1.31x counted in `int` through a `uint` variable,
        //   1.02x-1.04x all `int` (cupy timings of the program's variants); on Intel's CPU
        //   runtime 1.33x counted in `uint` (`Narrow`), 0.65x in `int`.
        // - `Narrow`: a `usize` loop whose start differs per work-item counted in `uint`,
        //   where only `counts_in_u32` holds.
        // - `Step`: `v += step` in the loop's own type.
        enum Form {
            Int(Option<Cond>),
            NarrowInt,
            Narrow,
            Step,
        }
        let unsigned = !h.inclusive && ty.is_unsigned();
        let mut fast: Option<(Form, Vec<Check>, Option<Cond>)> = None;
        if unsigned && ty == Ty::U32 {
            let (lp, sp) = (&h.counts_below_half, &h.start_below_half);
            if let (Some(lc), Some(sc)) = (self.form_cond(lp, true), self.form_cond(sp, false)) {
                fast = Some((Form::Int(sc), vec![lp.clone(), sp.clone()], lc));
            }
        }
        if fast.is_none() && h.narrowable(ty) {
            if let Some(c) = self.form_cond(&h.counts_in_i32, true) {
                fast = Some((Form::NarrowInt, vec![h.counts_in_i32.clone()], c));
            }
        }
        if fast.is_none() && h.narrowable(ty) {
            if let Some(c) = self.form_cond(&h.counts_in_u32, true) {
                fast = Some((Form::Narrow, vec![h.counts_in_u32.clone()], c));
            }
        }
        // Also the fallback of a guarded form where it always holds.
        let step_proof = match (unsigned, ty) {
            (false, _) => Check::Checked,
            (true, Ty::U32) => h.counts_in_u32.clone(),
            (true, _) => h.counts_in_u64.clone(),
        };
        let step_cond = self.form_cond(&step_proof, true);
        if fast.is_none() {
            if let Some(c) = step_cond.clone() {
                fast = Some((Form::Step, vec![step_proof], c));
            }
        }
        if let Some((form, proofs, _)) = &fast {
            for p in proofs {
                if let Check::Guard(b) = p {
                    self.register(b);
                }
            }
            if matches!(form, Form::Narrow | Form::NarrowInt) {
                self.narrowed.insert(var);
            }
        }
        // A dialect without `loop_forms` keeps the forms it opted into.
        let constants = matches!(h.start.kind, ExprKind::Lit(_))
            && matches!(h.step.as_ref().map(|s| &s.kind), Some(ExprKind::Lit(_)));
        let kept = match &fast {
            Some((Form::NarrowInt, ..)) => true,
            Some((Form::Step, ..)) => self.shape.constant_step_loops && constants,
            _ => false,
        };
        if !self.shape.loop_forms && !kept {
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
            self.count_header(var, t, ut, (&s, &e), h.inclusive, step_name.as_deref());
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
                // A start at or past the end starts at the end (its 32-bit truncation might
                // not be).
                let first = self.trunc32(&h.start);
                let by = by(&v, "uint");
                vec![format!(
                    "for (uint {v} = ({s} < {e}) ? {first} : (uint)({e}); {nonzero}{v} < (uint)({e}); {by}) {{"
                )]
            }
            Form::NarrowInt => {
                // As `Narrow`, in `int` (the start below the end is below 2^31 too). The
                // variable is an `int` as well (measured above), sign-extended where read as
                // the `usize` it is (non-negative).
                let first = self.trunc32(&h.start);
                let i = self.fresh("i");
                vec![
                    format!(
                        "for (int {i} = ({s} < {e}) ? (int){first} : (int)({e}); {nonzero}{i} < (int)({e}); {}) {{",
                        by(&i, "int")
                    ),
                    format!("int {v} = {i};"),
                ]
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
                self.count_header(var, t, ut, (&s, &e), h.inclusive, step_name.as_deref());
            }
            self.line("#endif");
        }
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
            StmtKind::Let(l, e) if self.f.locals[*l].is_private_array() => {
                // Every element gets the value, evaluated once.
                let local = &self.f.locals[*l];
                let (t, n) = (local.ty, local.array_len().unwrap_or(0));
                let v = self.expr(e);
                let v = if t.is_half() {
                    format!("sycl_f32_to_{}({v})", tag(t))
                } else {
                    v
                };
                let (vn, k) = (self.fresh("v"), self.fresh("k"));
                let line = format!(
                    "{{ {} {vn} = {v}; for (unsigned int {k} = 0; {k} < {n}u; {k}++) a{l}[{k}] = {vn}; }}",
                    elem_cty(d, t)
                );
                self.line(&line);
            }
            StmtKind::Let(l, e) => {
                let v = self.expr(e);
                let line = if self.hoisted.contains(l) {
                    format!("v{l} = {v};")
                } else {
                    format!("{} v{l} = {v};", cty(d, self.f.locals[*l].ty))
                };
                self.line(&line);
            }
            StmtKind::AssignLocal(l, op, e) => {
                let t = self.f.locals[*l].ty;
                let v = self.expr(e);
                let value = match op {
                    None => v,
                    Some(op) => self.binary(*op, t, &format!("v{l}"), &v),
                };
                let line = format!("v{l} = {value};");
                self.line(&line);
            }
            StmtKind::CopyField {
                param,
                check,
                index_fits_i32,
                index,
                offset,
                array,
                to_slice,
            } => self.copy_field(
                *param,
                check,
                index_fits_i32,
                index,
                *offset,
                *array,
                *to_slice,
            ),
            StmtKind::Store {
                base,
                check,
                index_fits_i32,
                op,
                index,
                value,
                field,
            } => {
                let elem = match field {
                    Some(f) => f.ty,
                    None => self.base_ty(*base),
                };
                let t = cty(d, elem);
                let (mut ptr, mut len, space) = self.base(*base);
                let (vn, mut iname) = (self.fresh("v"), self.fresh("i"));
                self.line("{");
                self.depth += 1;
                // Rust's order: the value, then the place. A half stored as it is converted
                // from `f32` is converted once, by the store.
                let v = match (&value.kind, op) {
                    (ExprKind::Cast(inner), None) if elem.is_half() && inner.ty == Ty::F32 => {
                        self.expr(inner)
                    }
                    _ => self.expr(value),
                };
                let line = format!("{t} {vn} = {v};");
                self.line(&line);
                let i = self.index(index, index_fits_i32);
                let line = format!("sycl_u64 {iname} = {i};");
                self.line(&line);
                // A check proved always to pass is dropped, like the user's `unsafe` one; one
                // proved for this work-group size is folded away.
                let access = match field {
                    Some(field) => {
                        let (fptr, flen, flat, access) =
                            self.field_access(*base, &iname, check, field, true);
                        let fname = self.fresh("f");
                        self.line(&format!("sycl_u64 {fname} = {flat};"));
                        (ptr, len) = (fptr, flen);
                        iname = fname;
                        access
                    }
                    None => self.access(check),
                };
                let current = match &access {
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
                    Access::Unchecked => unchecked_load(elem, &format!("{ptr}[{iname}]")),
                };
                let new = match op {
                    None => vn.clone(),
                    Some(op) => self.binary(*op, elem, &current, &vn),
                };
                let line = match &access {
                    Access::Checked => format!(
                        "sycl_st_{space}_{}({ptr}, {len}, {iname}, {new}, {});",
                        tag(elem),
                        self.failp()
                    ),
                    Access::When(c) => format!(
                        "sycl_stc_{space}_{}({ptr}, {len}, {iname}, {new}, {}, {c});",
                        tag(elem),
                        self.failp()
                    ),
                    // In bounds, but still nothing after a failure (except in a private
                    // array, which nothing else sees).
                    Access::Unchecked => {
                        let new = if elem.is_half() {
                            format!("sycl_f32_to_{}({new})", tag(elem))
                        } else {
                            new
                        };
                        if matches!(base, Base::Local(l) if self.f.locals[*l].is_private_array()) {
                            format!("{ptr}[{iname}] = {new};")
                        } else {
                            format!("if (!{}) {ptr}[{iname}] = {new};", self.failed())
                        }
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
            StmtKind::For(h, body) => {
                self.for_loop(h, false, |e| e.block_plain(body));
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
            // (Validated: group operations appear only as steps.)
            StmtKind::Barrier => self.line("#error \"a barrier outside a step\""),
            StmtKind::Fence(order, scope) => {
                let line = match d {
                    Dialect::Cuda => format!("sycl_fence<{}, {}>();", order_code(*order), scope_code(*scope)),
                    Dialect::OpenCl => format!(
                        "atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE, {}, {});",
                        ocl_order(*order),
                        ocl_scope(*scope)
                    ),
                };
                self.line(&line);
            }
            StmtKind::Fail(f) => {
                let line = format!("sycl_set_fail({}, {}u);", self.failp(), f.code());
                self.line(&line);
            }
        }
    }

    // ---- expressions

    /// What a field access of a struct slice reaches, as an access of a scalar slice: the
    /// struct slice's pointer cast to the field's scalar, the end of no slice, the flat index
    /// (`sycl_field`: the end when out of bounds), and the access (unchecked where both
    /// indices are proved: then the flat index computed directly).
    fn field_access(
        &mut self,
        base: Base,
        i: &str,
        check: &Check,
        field: &kir::Field,
        writes: bool,
    ) -> (String, String, String, Access) {
        let Base::Param(p) = base else {
            unreachable!("fields are of struct slices")
        };
        let Param::Structs { size, .. } = self.f.params[p] else {
            unreachable!("validated: fields are of struct slices")
        };
        let t = field.ty;
        let width = t.size() as u32;
        let (stride, offset) = (size / width, field.offset / width);
        let c = if writes { "" } else { "const " };
        let ptr = match self.d {
            Dialect::Cuda => format!("(({c}{}*)p{p})", elem_cty(self.d, t)),
            Dialect::OpenCl => format!("((__global {c}{}*)p{p})", elem_cty(self.d, t)),
        };
        let ok = |a: &Access| match a {
            Access::Checked => "false".to_string(),
            Access::Unchecked => "true".to_string(),
            Access::When(c) => format!("({c})"),
        };
        let elem_access = self.access(check);
        let (k, kn, item_access) = match &field.item {
            Some(item) => {
                let k = self.expr(&item.index);
                (k, item.len, self.access(&item.check))
            }
            None => ("0".to_string(), 1, Access::Unchecked),
        };
        if matches!(
            (&elem_access, &item_access),
            (Access::Unchecked, Access::Unchecked)
        ) {
            let flat = format!("((sycl_u64)({i}) * {stride}u + {offset}u + (sycl_u64)({k}))");
            return (ptr, "SYCL_FIELD_END".into(), flat, Access::Unchecked);
        }
        let flat = format!(
            "sycl_field({i}, p{p}_len, {}, {k}, {kn}u, {}, {stride}u, {offset}u)",
            ok(&elem_access),
            ok(&item_access)
        );
        (ptr, "SYCL_FIELD_END".into(), flat, Access::Checked)
    }

    /// A whole array field copied from or to a private array ([`StmtKind::CopyField`]): one
    /// bounds check, then one vector access where the dialect has one (OpenCL C `vloadn` /
    /// `vstoren`, which need only the items' alignment; CUDA 4-, 8- or 16-byte loads and
    /// stores where the address is aligned to them, tested at run time), else an item at a
    /// time. A failed check reads zeros and writes nothing, as the scalar accesses do.
    #[allow(clippy::too_many_arguments)]
    fn copy_field(
        &mut self,
        p: usize,
        check: &Check,
        index_fits_i32: &Check,
        index: &Expr,
        offset: u32,
        array: usize,
        to_slice: bool,
    ) {
        let d = self.d;
        let local = &self.f.locals[array];
        let (t, n) = (
            local.ty,
            local.array_len().expect("validated: a private array"),
        );
        let Param::Structs { size, .. } = self.f.params[p] else {
            unreachable!("validated: a struct slice")
        };
        let et = elem_cty(d, t);
        let width = t.size() as u32;
        let (stride, first) = (size / width, offset / width);
        let c = if to_slice { "" } else { "const " };
        let space = match d {
            Dialect::Cuda => "",
            Dialect::OpenCl => "__global ",
        };
        let iname = self.fresh("i");
        let q = self.fresh("q");
        self.line("{");
        self.depth += 1;
        let i = self.index(index, index_fits_i32);
        self.line(&format!("sycl_u64 {iname} = {i};"));
        let ok = match self.access(check) {
            Access::Unchecked => None,
            Access::Checked => Some(format!("{iname} < p{p}_len")),
            Access::When(cond) => Some(format!("({cond}) || {iname} < p{p}_len")),
        };
        if let Some(ok) = &ok {
            self.line(&format!("if ({ok}) {{"));
            self.depth += 1;
        }
        if to_slice {
            // Nothing after a failure reaches memory others see.
            self.line(&format!("if (!{}) {{", self.failed()));
            self.depth += 1;
        }
        self.line(&format!(
            "{space}{c}{et}* {q} = ({space}{c}{et}*)p{p} + {iname} * {stride}u + {first}u;"
        ));
        let (src, dst) = match to_slice {
            true => (format!("a{array}"), q.clone()),
            false => (q.clone(), format!("a{array}")),
        };
        let bytes = n * width;
        let items = format!("for (unsigned int k = 0; k < {n}u; k++) {dst}[k] = {src}[k];");
        match d {
            Dialect::OpenCl if matches!(n, 2 | 3 | 4 | 8 | 16) => {
                self.line(&format!("vstore{n}(vload{n}(0, {src}), 0, {dst});"));
            }
            // The address is aligned to the vector when the slice's base is: the struct's
            // size and the field's offset are multiples of it.
            Dialect::Cuda
                if n >= 2
                    && matches!(bytes, 8 | 16)
                    && size % bytes == 0
                    && offset % bytes == 0 =>
            {
                let vt = if bytes == 16 { "uint4" } else { "uint2" };
                self.line(&format!("if ((((sycl_u64){q}) & {}u) == 0) {{", bytes - 1));
                let line = match to_slice {
                    true => format!("{vt} w; memcpy(&w, {src}, {bytes}); *({vt}*){q} = w;"),
                    false => format!("{vt} w = *(const {vt}*){q}; memcpy({dst}, &w, {bytes});"),
                };
                self.line(&format!("    {line}"));
                self.line(&format!("}} else {{ {items} }}"));
            }
            _ => self.line(&items),
        }
        if to_slice {
            self.depth -= 1;
            self.line("}");
        }
        if ok.is_some() {
            self.depth -= 1;
            let zero = match to_slice {
                true => String::new(),
                false => {
                    format!(" for (unsigned int k = 0; k < {n}u; k++) a{array}[k] = ({et})0;")
                }
            };
            self.line(&format!(
                "}} else {{ sycl_set_fail({}, SYCL_FAIL_BOUNDS);{zero} }}",
                self.failp()
            ));
        }
        self.depth -= 1;
        self.line("}");
    }

    fn base_ty(&self, base: Base) -> Ty {
        match base {
            Base::Param(i) => match self.f.params[i] {
                Param::Slice { elem, .. } => elem,
                Param::Scalar(t) => t,
                Param::Structs { .. } => unreachable!("a struct slice's element is its field's"),
            },
            Base::Local(l) => self.f.locals[l].ty,
        }
    }

    /// Pointer, length and address-space letter of a slice or local array.
    fn base(&self, base: Base) -> (String, String, &'static str) {
        match base {
            Base::Param(i) => (
                format!("p{i}"),
                format!("p{i}_len"),
                letter(self.spaces.get(i).copied().unwrap_or(Space::Global)),
            ),
            Base::Local(l) => (
                format!("a{l}"),
                format!("((sycl_u64){})", self.f.locals[l].array_len().unwrap_or(0)),
                if self.f.locals[l].is_private_array() {
                    "p"
                } else {
                    "l"
                },
            ),
        }
    }

    /// A literal from its bits at type `t`.
    fn lit(&self, bits: u64, t: Ty) -> String {
        let cuda = self.d == Dialect::Cuda;
        match t {
            Ty::Bool => (bits != 0).to_string(),
            Ty::I32 => match bits as u32 {
                v if v <= i32::MAX as u32 => format!("{v}"),
                v => format!("((int){v}u)"),
            },
            Ty::U32 => format!("{}u", bits as u32),
            Ty::I64 if bits <= i64::MAX as u64 => {
                format!("{bits}{}", if cuda { "ll" } else { "l" })
            }
            Ty::I64 if cuda => format!("((long long){bits}ull)"),
            Ty::I64 => format!("((long){bits}ul)"),
            Ty::U64 | Ty::Usize => format!("{bits}{}", if cuda { "ull" } else { "ul" }),
            Ty::F32 => {
                let v = f32::from_bits(bits as u32);
                match (v.is_finite(), cuda) {
                    // Rust's shortest round-trip digits: the same value in C.
                    (true, _) => format!("{v:?}f"),
                    (false, true) => format!("__uint_as_float({}u)", bits as u32),
                    (false, false) => format!("as_float({}u)", bits as u32),
                }
            }
            // A half's value is exact in `f32`.
            Ty::F16 => self.lit(
                half::f16::from_bits(bits as u16).to_f32().to_bits() as u64,
                Ty::F32,
            ),
            Ty::Bf16 => self.lit(
                half::bf16::from_bits(bits as u16).to_f32().to_bits() as u64,
                Ty::F32,
            ),
            Ty::F64 => {
                let v = f64::from_bits(bits);
                match (v.is_finite(), cuda) {
                    (true, _) => format!("{v:?}"),
                    (false, true) => format!("__longlong_as_double((long long){bits}ull)"),
                    (false, false) => format!("as_double({bits}ul)"),
                }
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> String {
        let d = self.d;
        let t = e.ty;
        match &e.kind {
            ExprKind::Lit(bits) => self.lit(*bits, t),
            // (Validation refuses templates: `__rt::instantiate` replaced it.)
            ExprKind::ConstParam(_) => unreachable!("a validated function has no const parameter"),
            // (Validation keeps slice arguments in calls, printed there.)
            ExprKind::SliceArg(_) | ExprKind::ArrayArg(_) => {
                unreachable!("a slice or array argument outside a call")
            }
            ExprKind::Local(l) => self.local_name(*l),
            ExprKind::Param(i) => format!("p{i}"),
            ExprKind::Load {
                base,
                check,
                index_fits_i32,
                index,
                field,
            } => {
                let (mut ptr, mut len, space) = self.base(*base);
                let mut i = self.index(index, index_fits_i32);
                let access = match field {
                    Some(field) => {
                        let (fptr, flen, flat, access) =
                            self.field_access(*base, &i, check, field, false);
                        (ptr, len, i) = (fptr, flen, flat);
                        access
                    }
                    None => self.access(check),
                };
                match access {
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
                    Access::Unchecked => unchecked_load(t, &format!("{ptr}[{i}]")),
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
            ExprKind::Binary(..) if self.shape.int_arithmetic && self.int_arith => {
                self.int_binary(e)
            }
            ExprKind::Binary(op, a, b, _) => {
                let (x, y) = (self.expr(a), self.expr(b));
                self.binary(*op, a.ty, &x, &y)
            }
            ExprKind::Cast(a) => {
                let from = a.ty;
                if self.shape.narrow_truncations
                    && matches!(t, Ty::U32 | Ty::I32)
                    && matches!(from, Ty::U64 | Ty::Usize | Ty::I64)
                    && a.is_pure()
                {
                    let v = self.trunc32(a);
                    return if t == Ty::U32 {
                        v
                    } else {
                        format!("((int){v})")
                    };
                }
                let v = self.expr(a);
                self.cast(&v, from, t)
            }
            ExprKind::Math(m, args) => {
                let vs: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                // The operands' type (the result is `u32` for bit counts).
                let operand = args.first().map_or(t, |a| a.ty);
                if operand.is_half() {
                    // In `f32`, rounded back to the half type.
                    let v = self.math(*m, Ty::F32, &vs);
                    return if t.is_half() {
                        format!("sycl_round_{}({v})", tag(t))
                    } else {
                        v
                    };
                }
                self.math(*m, operand, &vs)
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
                order,
                scope,
            } => {
                let (ptr, len, space) = self.base(*base);
                let i = self.expr(index);
                let mut args = vec![ptr, len, i];
                args.extend(values.iter().map(|v| self.expr(v)));
                args.push(self.failp().to_owned());
                let name = match op {
                    AtomicOp::FetchAdd => "add",
                    AtomicOp::FetchMin => "min",
                    AtomicOp::FetchMax => "max",
                    AtomicOp::CompareExchange => "cas",
                    AtomicOp::Load => "load",
                    AtomicOp::Store => "store",
                    AtomicOp::Exchange => "exchange",
                    AtomicOp::FetchSub => "sub",
                    AtomicOp::FetchAnd => "and",
                    AtomicOp::FetchOr => "or",
                    AtomicOp::FetchXor => "xor",
                };
                let ordered = kir::is_ordered(*order, *scope);
                let plain_cuda = matches!(
                    op,
                    AtomicOp::FetchAdd
                        | AtomicOp::FetchMin
                        | AtomicOp::FetchMax
                        | AtomicOp::CompareExchange
                );
                match self.d {
                    // The prelude's relaxed device-scope forms (`atomicAdd` and kin).
                    Dialect::Cuda if !ordered && plain_cuda => {
                        format!("sycl_atomic_{name}_{space}_{}({})", tag(t), args.join(", "))
                    }
                    Dialect::Cuda => format!(
                        "sycl_oatomic_{name}_{}<{}, {}>({})",
                        tag(t),
                        order_code(*order),
                        scope_code(*scope),
                        args.join(", ")
                    ),
                    // OpenCL C 1.2's atomics (relaxed, device scope).
                    Dialect::OpenCl if !ordered => {
                        format!("sycl_atomic_{name}_{space}_{}({})", tag(t), args.join(", "))
                    }
                    Dialect::OpenCl => format!(
                        "sycl_oatomic_{name}_{space}_{}({}, {}, {})",
                        tag(t),
                        args.join(", "),
                        ocl_order(*order),
                        ocl_scope(*scope)
                    ),
                }
            }
            // (Validated: group operations appear only as steps.)
            ExprKind::Group(..) | ExprKind::SubGroup(..) => {
                "sycl_group_operation_outside_a_step()".into()
            }
            ExprKind::SubGroupQuery(q) => match q {
                SubGroupQuery::LocalId => "sycl_sg_local_id()",
                SubGroupQuery::LocalRange => "sycl_sg_local_range()",
                SubGroupQuery::MaxLocalRange => "sycl_sg_max_local_range()",
                SubGroupQuery::Id => "sycl_sg_id()",
                SubGroupQuery::Range => "sycl_sg_range()",
            }
            .into(),
            ExprKind::Call(k, args) => {
                let mut vs: Vec<String> = args
                    .iter()
                    .map(|a| match a.kind {
                        ExprKind::SliceArg(p) => format!("p{p}, p{p}_len"),
                        ExprKind::ArrayArg(l) => {
                            let (ptr, len, _) = self.base(Base::Local(l));
                            format!("{ptr}, {len}")
                        }
                        _ => self.expr(a),
                    })
                    .collect();
                vs.push(self.failp().to_owned());
                // (Decoded against the caller's helper count, so `k` is in range.)
                let callee = self.calls.get(*k).copied().unwrap_or(usize::MAX);
                let spaces = call_spaces(self.f, &self.spaces, args);
                format!("{}({})", variant_name(callee, &spaces), vs.join(", "))
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c), self.expr(a), self.expr(b));
                format!("(({c}) ? ({a}) : ({b}))")
            }
        }
    }

    /// A binary operation where `Shaping::int_arithmetic` applies: a `u32` `+ - *` tree
    /// whose every node has no signed overflow is computed in `int` (where its facts hold
    /// for every size, or as a condition over the work-group size folded by the compiler,
    /// beside the unsigned form); any other as written.
    fn int_binary(&mut self, e: &Expr) -> String {
        let ExprKind::Binary(op, a, b, _) = &e.kind else {
            return self.expr(e);
        };
        let mut conds = Vec::new();
        let mut holds = u32_arith(e).is_some();
        visit_u32_arith(e, &mut |n| match n {
            Check::Proved => {}
            Check::When(c) => {
                if !conds.contains(c) {
                    conds.push(c.clone())
                }
            }
            // (Never a run-time guard: such a flag would add a second program.)
            Check::Checked | Check::Guard(_) => holds = false,
        });
        // A condition over the work-group size, which only kernels declare; both forms are
        // written, so their leaves must be pure.
        if !holds || (!conds.is_empty() && (!self.is_kernel() || !e.is_pure())) {
            let (x, y) = (self.expr(a), self.expr(b));
            return self.binary(*op, a.ty, &x, &y);
        }
        let narrow = format!("((uint)({}))", self.int_c(e));
        if conds.is_empty() {
            return narrow;
        }
        let c: Vec<String> = conds.iter().map(|c| self.bound_c(c)).collect();
        // The other branch (folded away) without `int` trees, so that the text grows
        // linearly.
        self.int_arith = false;
        let (x, y) = (self.expr(a), self.expr(b));
        let wide = self.binary(*op, a.ty, &x, &y);
        self.int_arith = true;
        format!("(({}) ? {narrow} : {wide})", c.join(" && "))
    }

    /// A `u32` `+ - *` tree `int_binary` accepted, in `int`: its leaves converted (each below
    /// 2^31, so exactly).
    fn int_c(&mut self, e: &Expr) -> String {
        if let Some((op, a, b)) = u32_arith(e) {
            let (x, y) = (self.int_c(a), self.int_c(b));
            return format!("({x} {} {y})", op_c(op));
        }
        match &e.kind {
            ExprKind::Lit(v) if e.ty.is_int() => format!("{v}"),
            ExprKind::Lit(_) => "0".into(),
            _ => format!("((int)({}))", self.expr(e)),
        }
    }

    /// `x op y` with Rust's semantics; `t`: the left operand's type.
    fn binary(&self, op: BinOp, t: Ty, x: &str, y: &str) -> String {
        if t.is_half() {
            // In `f32`; arithmetic rounded back to the half type (comparisons are exact).
            let v = self.binary(op, Ty::F32, x, y);
            return match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                    format!("sycl_round_{}({v})", tag(t))
                }
                _ => v,
            };
        }
        let d = self.d;
        let c = cty(d, t);
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul if t.is_signed() => {
                let u = cty(d, unsigned_of(t));
                format!("(({c})(({u})({x}) {} ({u})({y})))", op_c(op))
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul if t.is_int() => {
                format!("(({c})(({x}) {} ({y})))", op_c(op))
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
                if op == BinOp::Shl && t.is_signed() {
                    let u = cty(d, unsigned_of(t));
                    format!("(({c})(({u})({x}) << {amount}))")
                } else {
                    format!("(({c})(({x}) {} {amount}))", op_c(op))
                }
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => {
                format!("(({c})(({x}) {} ({y})))", op_c(op))
            }
            _ => format!("(({x}) {} ({y}))", op_c(op)),
        }
    }

    fn cast(&self, v: &str, from: Ty, to: Ty) -> String {
        if from == to {
            return format!("({v})");
        }
        // (Validated: halves convert from `f32` only, and to `f32`/`f64`: exact.)
        if to.is_half() {
            return format!("sycl_round_{}({v})", tag(to));
        }
        if from.is_half() {
            return format!("(({})({v}))", cty(self.d, to));
        }
        if from.is_float() && to.is_int() {
            // Saturating, NaN to 0 (a prelude function: the value is used twice).
            return format!("sycl_cvt_{}_{}({v})", tag(from), tag(to));
        }
        format!("(({})({v}))", cty(self.d, to))
    }

    fn math(&self, m: MathFn, t: Ty, a: &[String]) -> String {
        let arg = |i: usize| a.get(i).map_or("0", String::as_str);
        if m == MathFn::Clamp {
            return format!(
                "sycl_clamp_{}({}, {}, {}, {})",
                tag(t),
                arg(0),
                arg(1),
                arg(2),
                self.failp()
            );
        }
        if t.is_int() {
            return match m {
                MathFn::Min => format!("min({}, {})", arg(0), arg(1)),
                MathFn::Max => format!("max({}, {})", arg(0), arg(1)),
                MathFn::Abs => format!("sycl_abs_{}({})", tag(t), arg(0)),
                MathFn::SaturatingAdd | MathFn::SaturatingSub => {
                    let name = if m == MathFn::SaturatingAdd {
                        "add"
                    } else {
                        "sub"
                    };
                    format!("sycl_sat_{name}_{}({}, {})", tag(t), arg(0), arg(1))
                }
                MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => {
                    format!("sycl_{}_{}({})", m.name(), tag(t), arg(0))
                }
                MathFn::RotateLeft | MathFn::RotateRight => {
                    let dir = if m == MathFn::RotateLeft { "l" } else { "r" };
                    format!("sycl_rot{dir}_{}({}, {})", tag(t), arg(0), arg(1))
                }
                MathFn::Pow => format!("sycl_pow_{}({}, {})", tag(t), arg(0), arg(1)),
                // (Validated: integers take only these.)
                _ => "sycl_integer_math_outside_the_language()".into(),
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
            // Rust's `round` and C's both round half away from zero.
            MathFn::Tanh => "tanh",
            MathFn::Exp2 => "exp2",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Trunc => "trunc",
            MathFn::Round => "round",
            MathFn::Copysign => "copysign",
            // `y.atan2(x)`: the receiver is C's first argument.
            MathFn::Atan2 => "atan2",
            MathFn::Hypot => "hypot",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Erf => "erf",
            // Rust's `recip` is `1.0 / x`, rounded like `/`.
            MathFn::Recip => {
                let one = if t == Ty::F32 { "1.0f" } else { "1.0" };
                return format!("({one} / ({}))", arg(0));
            }
            MathFn::Fract => return format!("sycl_fract_{}({})", tag(t), arg(0)),
            MathFn::IsNan => return format!("(isnan({}) != 0)", arg(0)),
            MathFn::IsFinite => return format!("(isfinite({}) != 0)", arg(0)),
            // Rust leaves `powi`'s precision unspecified; OpenCL C has `pown`, CUDA `pow` of
            // the exponent as a float (exact for the integers an `i32` holds).
            MathFn::Powi => {
                return match (self.d, t) {
                    (Dialect::Cuda, Ty::F32) => format!("powf({}, (float)({}))", arg(0), arg(1)),
                    (Dialect::Cuda, _) => format!("pow({}, (double)({}))", arg(0), arg(1)),
                    _ => format!("pown({}, {})", arg(0), arg(1)),
                }
            }
            // (Validated: floats take none of these.)
            _ => return "sycl_float_math_outside_the_language()".into(),
        };
        let suffix = if self.d == Dialect::Cuda && t == Ty::F32 {
            "f"
        } else {
            ""
        };
        format!("{base}{suffix}({})", a.join(", "))
    }
}

/// The operator and operands of `e` when it is `u32` `+`, `-` or `*`.
fn u32_arith(e: &Expr) -> Option<(BinOp, &Expr, &Expr)> {
    match &e.kind {
        ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b, _)
            if e.ty == Ty::U32 =>
        {
            Some((*op, a, b))
        }
        _ => None,
    }
}

/// Calls `f` with the no-signed-wrap fact of every node of the `u32` `+ - *` tree rooted at
/// `e`.
fn visit_u32_arith<'e>(e: &'e Expr, f: &mut dyn FnMut(&'e Check)) {
    if let (Some((_, a, b)), ExprKind::Binary(_, _, _, no_wrap)) = (u32_arith(e), &e.kind) {
        f(no_wrap);
        visit_u32_arith(a, f);
        visit_u32_arith(b, f);
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

/// The locals of a work-group kernel's steps that live across synchronisation (each step's
/// local, and the `let`s at the top of its regions), and of those the variables of its
/// synchronising loops.
fn step_locals(steps: &[Step]) -> (HashSet<usize>, HashSet<usize>) {
    fn visit(steps: &[Step], all: &mut HashSet<usize>, loops: &mut HashSet<usize>) {
        for s in steps {
            match s {
                Step::Region(stmts) => {
                    for st in stmts {
                        if let StmtKind::Let(l, _) = &st.kind {
                            all.insert(*l);
                        }
                    }
                }
                Step::GroupLet(l, _)
                | Step::Group { local: l, .. }
                | Step::SubGroup { local: l, .. } => {
                    all.insert(*l);
                }
                Step::SyncFor(h, body) => {
                    all.insert(h.var);
                    loops.insert(h.var);
                    visit(body, all, loops);
                }
                Step::Barrier => {}
            }
        }
    }
    let (mut all, mut loops) = (HashSet::new(), HashSet::new());
    visit(steps, &mut all, &mut loops);
    (all, loops)
}
