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
//! - an index out of bounds fails; a failure sets the work-item's failure code, the statement's
//!   stores are suppressed, and the work-item ends at the end of the statement, reporting the
//!   code to the launch's status word (in kernels that synchronise: it stops its own work but
//!   keeps meeting barriers, so the group cannot deadlock);
//! - sub-expressions with effects run in Rust's order: at most one atomic per statement, and a
//!   stored value is computed before its index.

use std::fmt::Write;

use crate::analyze::{fallible, path_key, Analysis, Class, Step};
use crate::ir::*;

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

/// The marker a call of helper `k` is emitted as; the runtime replaces it by the helper's
/// C name once it has named every helper of the program.
pub fn call_marker(k: usize) -> String {
    format!("__sycl_call_{k}__")
}

/// The marker for a helper's own name in its definition.
pub const SELF_MARKER: &str = "__sycl_self__";

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
}

/// The kernel's C function (without prelude or helpers).
pub fn kernel(f: &Function, an: &Analysis, d: Dialect) -> String {
    let mut e = Emitter {
        f,
        d,
        role: Role::Kernel(an),
        helpers: &an.helpers,
        out: String::new(),
        depth: 0,
        tmp: 0,
        region_end: None,
    };
    e.kernel_fn(an);
    e.out
}

/// A helper's C definition; its name is [`SELF_MARKER`]. Also returns its prototype.
pub fn helper(f: &Function, helpers: &[syn::Path], d: Dialect) -> (String, String) {
    let mut e = Emitter {
        f,
        d,
        role: Role::Helper,
        helpers,
        out: String::new(),
        depth: 0,
        tmp: 0,
        region_end: None,
    };
    let ret = f.ret.expect("helpers return a value");
    let mut sig = String::new();
    if d == Dialect::Cuda {
        sig.push_str("__device__ ");
    }
    let _ = write!(sig, "{} {SELF_MARKER}(", cty(d, ret));
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
            Role::Kernel(_) => "&sycl_fail",
            Role::Helper => "sycl_failp",
        }
    }

    fn failed(&self) -> &'static str {
        match self.role {
            Role::Kernel(_) => "sycl_fail",
            Role::Helper => "(*sycl_failp)",
        }
    }

    /// What a work-item does when a statement failed.
    fn exit(&self) -> String {
        match (&self.role, &self.region_end) {
            (Role::Helper, _) => format!(
                "return ({})0;",
                cty(self.d, self.f.ret.expect("helpers return"))
            ),
            (Role::Kernel(_), None) => "{ sycl_report(sycl_status, sycl_fail); return; }".into(),
            (Role::Kernel(_), Some(label)) => format!(
                "{{ sycl_report(sycl_status, sycl_fail); sycl_fail = 0; sycl_done = 1; goto {label}; }}"
            ),
        }
    }

    fn check(&mut self) {
        let s = format!("if ({}) {}", self.failed(), self.exit());
        self.line(&s);
    }

    fn local_name(&self, l: usize) -> String {
        if self.f.locals[l].array.is_some() {
            format!("a{l}")
        } else {
            format!("v{l}")
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
        if d == Dialect::OpenCl && an.reduce_bytes > 0 {
            params.push("__local sycl_u64* sycl_scratch".into());
        }
        let head = match d {
            Dialect::Cuda => "extern \"C\" __global__ void",
            Dialect::OpenCl => "__kernel void",
        };
        let _ = writeln!(
            self.out,
            "{head} sycl_k_{}({})\n{{",
            self.f.name,
            params.join(", ")
        );
        self.depth = 1;
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
        if !an.group {
            // A plain range is launched rounded up to whole work-groups; the extra
            // work-items leave here, so the kernel sees exactly its range.
            self.line("if (SYCL_OUTSIDE_RANGE) return;");
            self.block_plain(&self.f.body.clone());
        } else {
            self.line(match d {
                Dialect::Cuda => "unsigned int sycl_done = 0;",
                Dialect::OpenCl => "uint sycl_done = 0;",
            });
            // Locals that live across synchronisation are declared once, up front, so that
            // the jumps that end a region never cross a declaration.
            let loop_vars = sync_loop_vars(&an.steps);
            for (l, local) in self.f.locals.iter().enumerate() {
                if local.array.is_none() && an.class[l] != Class::Plain && !loop_vars.contains(&l) {
                    let s = format!("{} v{l};", cty(d, self.f.ty(local.ty)));
                    self.line(&s);
                }
            }
            self.steps(&an.steps.clone());
        }
        self.out.push_str("}\n");
    }

    fn steps(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Region(stmts) => {
                    let label = self.fresh("region");
                    self.region_end = Some(label.clone());
                    self.line("if (!sycl_done) {");
                    self.depth += 1;
                    self.block_plain(stmts);
                    self.depth -= 1;
                    self.line("}");
                    let s = format!("{label}: ;");
                    self.line(&s);
                    self.region_end = None;
                }
                Step::GroupLet(l, e) => {
                    let v = self.expr(e);
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
                    if fallible(value) {
                        self.line("if (sycl_fail) { sycl_report(sycl_status, sycl_fail); sycl_fail = 0; sycl_done = 1; }");
                    }
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
                Step::SyncFor {
                    var,
                    start,
                    end,
                    inclusive,
                    body,
                } => {
                    let t = cty(self.d, self.ty(start));
                    let (s_name, e_name) = (self.fresh("s"), self.fresh("e"));
                    self.line("{");
                    self.depth += 1;
                    let (sv, ev) = (self.expr(start), self.expr(end));
                    let s = format!("{t} {s_name} = {sv};");
                    self.line(&s);
                    let s = format!("{t} {e_name} = {ev};");
                    self.line(&s);
                    if fallible(start) || fallible(end) {
                        self.uniform_check();
                    }
                    let head = self.for_head(*var, t, &s_name, &e_name, *inclusive);
                    self.line(&head);
                    self.depth += 1;
                    self.steps(body);
                    self.depth -= 1;
                    self.line("}");
                    self.depth -= 1;
                    self.line("}");
                }
            }
        }
    }

    /// After a value every work-item computes (uniform): a failure ends a live work-item's
    /// part; in one that had already ended, it is not its failure. Every work-item computed
    /// the same value either way.
    fn uniform_check(&mut self) {
        self.line("if (sycl_fail) { if (!sycl_done) sycl_report(sycl_status, sycl_fail); sycl_fail = 0; sycl_done = 1; }");
    }

    fn for_head(&mut self, var: usize, t: &str, s: &str, e: &str, inclusive: bool) -> String {
        if inclusive {
            // `a..=b` stops after b even when b is the type's maximum.
            let more = self.fresh("more");
            format!("for ({t} v{var} = {s}, {more} = ({s} <= {e}); {more}; {more} = (v{var} != {e}), v{var} = {more} ? ({t})(v{var} + 1) : v{var}) {{")
        } else {
            format!("for ({t} v{var} = {s}; v{var} < {e}; v{var}++) {{")
        }
    }

    // ---- statements

    fn block_plain(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

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
                if fallible(e) {
                    self.check();
                }
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
                if fallible(e) || op.is_some_and(|o| matches!(o, BinOp::Div | BinOp::Rem)) {
                    self.check();
                }
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
                let v = self.expr(e);
                let line = format!("{t} {vn} = {v};");
                self.line(&line);
                let i = self.expr(index);
                let line = format!("sycl_u64 {iname} = {i};");
                self.line(&line);
                let current = if *checked {
                    format!(
                        "sycl_ld_{space}_{}({ptr}, {len}, {iname}, {})",
                        tag(elem),
                        self.failp()
                    )
                } else {
                    format!("{ptr}[{iname}]")
                };
                let value = match op {
                    None => vn.clone(),
                    Some(op) => self.binary(*op, elem, self.ty(e), &current, &vn),
                };
                let line = if *checked {
                    format!(
                        "sycl_st_{space}_{}({ptr}, {len}, {iname}, {value}, {});",
                        tag(elem),
                        self.failp()
                    )
                } else {
                    format!("{ptr}[{iname}] = {value};")
                };
                self.line(&line);
                self.depth -= 1;
                self.line("}");
                if *checked
                    || fallible(e)
                    || fallible(index)
                    || op.is_some_and(|o| matches!(o, BinOp::Div | BinOp::Rem))
                {
                    self.check();
                }
            }
            StmtKind::Expr(e) => {
                let v = self.expr(e);
                let line = format!("(void)({v});");
                self.line(&line);
                if fallible(e) {
                    self.check();
                }
            }
            StmtKind::If(c, a, b) => {
                let cond = if fallible(c) {
                    let name = self.fresh("c");
                    let v = self.expr(c);
                    self.line("{");
                    self.depth += 1;
                    let line = format!("bool {name} = {v};");
                    self.line(&line);
                    self.check();
                    name
                } else {
                    self.expr(c)
                };
                let line = format!("if ({cond}) {{");
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
                if fallible(c) {
                    self.depth -= 1;
                    self.line("}");
                }
            }
            StmtKind::While(c, body) => {
                if fallible(c) {
                    self.line("while (1) {");
                    self.depth += 1;
                    let name = self.fresh("c");
                    let v = self.expr(c);
                    let line = format!("bool {name} = {v};");
                    self.line(&line);
                    self.check();
                    let line = format!("if (!{name}) break;");
                    self.line(&line);
                } else {
                    let v = self.expr(c);
                    let line = format!("while ({v}) {{");
                    self.line(&line);
                    self.depth += 1;
                }
                self.block_plain(body);
                self.depth -= 1;
                self.line("}");
            }
            StmtKind::Loop(body) => {
                self.line("while (1) {");
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
                body,
            } => {
                let t = cty(d, self.ty(start));
                let (s_name, e_name) = (self.fresh("s"), self.fresh("e"));
                self.line("{");
                self.depth += 1;
                let (sv, ev) = (self.expr(start), self.expr(end));
                let line = format!("{t} {s_name} = {sv};");
                self.line(&line);
                let line = format!("{t} {e_name} = {ev};");
                self.line(&line);
                if fallible(start) || fallible(end) {
                    self.check();
                }
                let head = self.for_head(*var, t, &s_name, &e_name, *inclusive);
                self.line(&head);
                self.depth += 1;
                self.block_plain(body);
                self.depth -= 1;
                self.line("}");
                self.depth -= 1;
                self.line("}");
            }
            StmtKind::Break => self.line("break;"),
            StmtKind::Continue => self.line("continue;"),
            StmtKind::Return(None) => match &self.region_end {
                None => self.line("return;"),
                Some(label) => {
                    let line = format!("{{ sycl_done = 1; goto {label}; }}");
                    self.line(&line);
                }
            },
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
                let i = self.expr(index);
                if *checked {
                    format!(
                        "sycl_ld_{space}_{}({ptr}, {len}, {i}, {})",
                        tag(t),
                        self.failp()
                    )
                } else {
                    format!("{ptr}[{i}]")
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
            ExprKind::Binary(op, a, b) => {
                let (at, bt) = (self.ty(a), self.ty(b));
                let (x, y) = (self.expr(a), self.expr(b));
                let _ = t;
                self.binary(*op, at, bt, &x, &y)
            }
            ExprKind::Cast(a, to) => {
                let from = self.ty(a);
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
            ExprKind::Reduce(..) => unreachable!("reductions are steps"),
            ExprKind::Call(path, args) => {
                let key = path_key(path);
                let k = self
                    .helpers
                    .iter()
                    .position(|h| path_key(h) == key)
                    .expect("helpers are collected");
                let mut vs: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                vs.push(self.failp().to_owned());
                format!("{}({})", call_marker(k), vs.join(", "))
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c), self.expr(a), self.expr(b));
                format!("(({c}) ? ({a}) : ({b}))")
            }
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
            return match d {
                Dialect::Cuda => {
                    let f = if from == Ty::F32 { "float" } else { "double" };
                    let i = match to {
                        Ty::I32 => "int",
                        Ty::U32 => "uint",
                        Ty::I64 => "ll",
                        _ => "ull",
                    };
                    format!("__{f}2{i}_rz({v})")
                }
                Dialect::OpenCl => {
                    let i = match to {
                        Ty::I32 => "int",
                        Ty::U32 => "uint",
                        Ty::I64 => "long",
                        _ => "ulong",
                    };
                    format!("convert_{i}_sat_rtz({v})")
                }
            };
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
