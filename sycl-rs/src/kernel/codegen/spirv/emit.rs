//! SPIR-V (Kernel capability, Physical64 addressing, the OpenCL memory model and `OpenCL.std`)
//! from the decoded IR, with the semantics of the OpenCL C the macro writes
//! (`super::super::c` and `prelude_opencl.h`): wrapping integer arithmetic, Rust's
//! `as`, checked indices and divisions that record a failure code and suppress the
//! work-item's later effects, the same status word and the same kernel parameters.
//!
//! Every local is a `Function` variable (the driver promotes them to registers), control flow
//! is structured (selection and loop merges), and a `return` inside a work-group kernel's
//! region leaves the region through the enclosing loops' merges (the C form's `goto`).

use std::cell::RefCell;
use std::collections::HashMap;

use rspirv::dr::{Builder, InsertPoint, Instruction, Operand};
use rspirv::spirv::{
    self, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel, FPRoundingMode,
    FunctionControl, FunctionParameterAttribute, GroupOperation, LoopControl, MemoryAccess, Op,
    OpenclStd100Op, SelectionControl, StorageClass, Word,
};

use crate::kernel::codegen::{call_spaces, helper_variants, Space, Variant};
use crate::{Errc, Error, Result};
use sycl_kernel_ir::bound::{Bound, Check};
use sycl_kernel_ir::ir::*;
use sycl_kernel_ir::ops::*;
use sycl_kernel_ir::Scalar as ScalarTy;

const FAIL_BOUNDS: u64 = 1;
const FAIL_ARITH: u64 = 2;
const FAIL_CLAMP: u64 = 3;
const SCOPE_CROSS_DEVICE: u64 = 0;
const SCOPE_DEVICE: u64 = 1;
const SCOPE_WORKGROUP: u64 = 2;
const SCOPE_SUBGROUP: u64 = 3;
/// A SPIR-V scope.
fn spirv_scope(s: MemoryScope) -> u64 {
    match s {
        MemoryScope::WorkGroup => SCOPE_WORKGROUP,
        MemoryScope::Device => SCOPE_DEVICE,
        MemoryScope::System => SCOPE_CROSS_DEVICE,
    }
}

/// A memory order's SPIR-V memory-semantics bits (without the storage classes).
fn order_semantics(o: MemoryOrder) -> u64 {
    match o {
        MemoryOrder::Relaxed => 0,
        MemoryOrder::Acquire => 0x2,
        MemoryOrder::Release => 0x4,
        MemoryOrder::AcqRel => 0x8,
        MemoryOrder::SeqCst => 0x10,
    }
}

/// AcquireRelease | WorkgroupMemory | CrossWorkgroupMemory: OpenCL C's
/// `barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)`.
const BARRIER_SEMANTICS: u64 = 0x8 | 0x100 | 0x200;

use crate::kernel::codegen::{ENTRY, ENTRY_GUARDED};

/// What one module is built from and for.
pub(crate) struct Program<'a> {
    pub kernel: &'a Function,
    /// The function index (into `helpers`) of each of the kernel's call targets.
    pub kernel_calls: Vec<usize>,
    /// Helpers, callees first, each with the indices of its own call targets.
    pub helpers: Vec<(&'a Function, Vec<usize>)>,
    /// Launch dimensions (SYCL's last is the device's first).
    pub dims: u8,
    /// Work-group size in device order.
    pub local: [u32; 3],
    /// The kernel takes a work-group scratch pointer (the OpenCL C form's reductions): kept
    /// as a parameter so that both forms take the same arguments.
    pub scratch_param: bool,
    /// Also the entry point `ENTRY_GUARDED`.
    pub guarded_entry: bool,
}

fn build_err(e: rspirv::dr::Error) -> Error {
    Error::new(
        Errc::Build,
        format!("building SPIR-V: {e} (a bug of #[sycl::kernel]: please report it)"),
    )
}

fn bad(what: &str) -> Error {
    Error::new(
        Errc::Build,
        format!("building SPIR-V: {what} (a bug of #[sycl::kernel]: please report it)"),
    )
}

fn is_signed(t: ScalarTy) -> bool {
    matches!(t, ScalarTy::I32 | ScalarTy::I64)
}

/// A float in registers: halves are `f32`s there (rounded after each operation).
fn is_float(t: ScalarTy) -> bool {
    matches!(
        t,
        ScalarTy::F32 | ScalarTy::F64 | ScalarTy::F16 | ScalarTy::Bf16
    )
}

fn is_int(t: ScalarTy) -> bool {
    !is_float(t) && t != ScalarTy::Bool
}

fn bits(t: ScalarTy) -> u32 {
    match t {
        ScalarTy::Bool => 1,
        ScalarTy::I32 | ScalarTy::U32 | ScalarTy::F32 | ScalarTy::F16 | ScalarTy::Bf16 => 32,
        _ => 64,
    }
}

/// Module-wide state: types, constants, built-in variables.
struct Module {
    b: Builder,
    ext: Word,
    consts: HashMap<(Word, u64), Word>,
    builtins: HashMap<u32, Word>,
    caps: Vec<Capability>,
    /// `SPV_KHR_no_integer_wrap_decoration` declared.
    no_wrap_ext: bool,
    /// The run-time guards the guarded entry point relied on, each once.
    guards_used: RefCell<Vec<Bound>>,
}

impl Module {
    fn cap(&mut self, c: Capability) {
        if !self.caps.contains(&c) {
            self.caps.push(c);
            self.b.capability(c);
        }
    }

    fn ty(&mut self, t: ScalarTy) -> Word {
        match t {
            ScalarTy::Bool => self.b.type_bool(),
            ScalarTy::I32 | ScalarTy::U32 => self.b.type_int(32, 0),
            ScalarTy::I64 | ScalarTy::U64 | ScalarTy::Usize => self.b.type_int(64, 0),
            ScalarTy::F32 => self.b.type_float(32, None),
            ScalarTy::F64 => {
                self.cap(Capability::Float64);
                self.b.type_float(64, None)
            }
            // In registers; `mem_ty` in memory.
            ScalarTy::F16 | ScalarTy::Bf16 => self.b.type_float(32, None),
        }
    }

    /// The type of `t` in memory (slices, local arrays, kernel parameters): halves are 16-bit
    /// patterns.
    fn mem_ty(&mut self, t: ScalarTy) -> Word {
        if t.is_half() {
            self.cap(Capability::Int16);
            self.b.type_int(16, 0)
        } else {
            self.ty(t)
        }
    }

    /// A pointer to an IEEE half in `class` (`Float16Buffer`: what OpenCL.std's `vload_half`
    /// and `vstore_half_r` take; never dereferenced).
    fn half_ptr(&mut self, class: StorageClass) -> Word {
        self.cap(Capability::Float16Buffer);
        let h = self.b.type_float(16, None);
        self.ptr(class, h)
    }

    /// `OpSubgroupShuffleINTEL`'s capability and extension, once.
    fn shuffle_intel(&mut self) {
        if !self.caps.contains(&Capability::SubgroupShuffleINTEL) {
            self.b.extension("SPV_INTEL_subgroups");
        }
        self.cap(Capability::SubgroupShuffleINTEL);
    }

    /// Marks the integer operation `id` as one whose signed result cannot overflow (LLVM's
    /// `nsw`, which Intel's SPIR-V reader keeps): its vectorizer needs it to see a 32-bit
    /// index that is sign-extended as consecutive between work-items, as with OpenCL C's
    /// `int`. Declares the extension once (a SPIR-V 1.0 module; core from 1.4).
    fn no_signed_wrap(&mut self, id: Word) {
        if !self.no_wrap_ext {
            self.b.extension("SPV_KHR_no_integer_wrap_decoration");
            self.no_wrap_ext = true;
        }
        self.b.decorate(id, Decoration::NoSignedWrap, []);
    }

    fn u8_ty(&mut self) -> Word {
        self.cap(Capability::Int8);
        self.b.type_int(8, 0)
    }

    fn ptr(&mut self, class: StorageClass, pointee: Word) -> Word {
        self.b.type_pointer(None, class, pointee)
    }

    fn konst_raw(&mut self, ty: Word, width: u32, v: u64) -> Word {
        if let Some(id) = self.consts.get(&(ty, v)) {
            return *id;
        }
        let id = if width == 64 {
            self.b.constant_bit64(ty, v)
        } else {
            self.b.constant_bit32(ty, v as u32)
        };
        self.consts.insert((ty, v), id);
        id
    }

    /// A constant of type `t` with these bits.
    fn konst(&mut self, t: ScalarTy, v: u64) -> Word {
        let ty = self.ty(t);
        if t == ScalarTy::Bool {
            if let Some(id) = self.consts.get(&(ty, v)) {
                return *id;
            }
            let id = if v != 0 {
                self.b.constant_true(ty)
            } else {
                self.b.constant_false(ty)
            };
            self.consts.insert((ty, v), id);
            return id;
        }
        self.konst_raw(ty, bits(t), v)
    }

    fn u32c(&mut self, v: u64) -> Word {
        self.konst(ScalarTy::U32, v)
    }

    fn u64c(&mut self, v: u64) -> Word {
        self.konst(ScalarTy::U64, v)
    }

    /// The `Input` variable of a built-in `v3ulong`.
    fn builtin(&mut self, which: BuiltIn) -> Word {
        let u64t = self.ty(ScalarTy::U64);
        let v3 = self.b.type_vector(u64t, 3);
        self.builtin_of(which, v3)
    }

    /// The `Input` variable of a built-in of type `ty` (the sub-group ones are `uint`).
    fn builtin_of(&mut self, which: BuiltIn, ty: Word) -> Word {
        if let Some(id) = self.builtins.get(&(which as u32)) {
            return *id;
        }
        let p = self.ptr(StorageClass::Input, ty);
        let var = self.b.id();
        // At module scope (`variable` would put it in the function being emitted).
        self.b.insert_types_global_values(
            InsertPoint::End,
            Instruction::new(
                Op::Variable,
                Some(p),
                Some(var),
                vec![Operand::StorageClass(StorageClass::Input)],
            ),
        );
        self.b
            .decorate(var, Decoration::BuiltIn, [Operand::BuiltIn(which)]);
        self.b.decorate(var, Decoration::Constant, []);
        self.builtins.insert(which as u32, var);
        var
    }
}

/// How a parameter arrives in the function.
#[derive(Clone, Copy)]
enum ParamVal {
    Scalar(Word),
    Slice { ptr: Word, len: Word },
}

/// An element index: as `u64` (for the bounds check), and as the 32-bit value it was widened
/// from, where it was (`x as usize` of a `u32`): the index local arrays take.
#[derive(Clone, Copy)]
struct Index {
    wide: Word,
    narrow: Option<Word>,
}

#[derive(Clone, Copy)]
struct LoopCtx {
    merge: Word,
    cont: Word,
}

enum Role {
    Kernel { status: Word, ranges: [Word; 3] },
    Helper,
}

/// One function being emitted.
struct Fx<'a> {
    m: &'a mut Module,
    f: &'a Function,
    /// The helper index of each call marker of the function.
    calls: &'a [usize],
    /// The function id of every helper variant.
    variant_ids: &'a HashMap<Variant, Word>,
    /// Where each slice parameter's elements live (kernels: global; a helper's variant).
    spaces: Vec<Space>,
    role: Role,
    params: Vec<ParamVal>,
    /// A pointer per local: a `Function` variable, or a `Workgroup` array.
    locals: Vec<Word>,
    /// The function's variables, placed at the top of its first block at the end.
    vars: Vec<Instruction>,
    /// A 16-bit `Function` variable for conversions of halves, made at first use.
    half_var: Option<Word>,
    fail: Word,
    ufail: Word,
    done: Word,
    /// Evaluating a value every work-item computes (see `uniform_check`).
    uniform: bool,
    loops: Vec<LoopCtx>,
    /// Inside a work-group kernel's region (a `return` sets `done` and leaves it).
    in_region: bool,
    dims: u8,
    local: [u32; 3],
    /// Emitting the entry point that runs when every run-time guard holds (`Check::Guard`
    /// accesses need no check there).
    assume_guards: bool,
    /// Loops (user and synchronising ones) around the code being emitted.
    loop_depth: usize,
    /// The variables of the function's 64-bit `for` loops and the `let`s made of them.
    wide_loop_vars: Vec<usize>,
    /// The kernel's work-group scratch (`u64` elements, one per work-item), where it has one.
    scratch: Option<Word>,
}

/// A built module.
#[derive(Debug)]
pub(crate) struct Emitted {
    /// Its words.
    pub words: Vec<u32>,
    /// The run-time guards under which `ENTRY_GUARDED` may run (those its dropped checks and
    /// its shapes relied on; empty: it has no such entry, or it is `ENTRY`'s twin).
    pub guards: Vec<Bound>,
}

/// Builds the module.
pub(crate) fn build(p: &Program<'_>) -> Result<Emitted> {
    let mut b = Builder::new();
    b.set_version(1, 0);
    let mut m = Module {
        ext: 0,
        b,
        consts: HashMap::new(),
        builtins: HashMap::new(),
        caps: Vec::new(),
        no_wrap_ext: false,
        guards_used: RefCell::new(Vec::new()),
    };
    m.cap(Capability::Addresses);
    m.cap(Capability::Kernel);
    m.cap(Capability::Int64);
    m.ext = m.b.ext_inst_import("OpenCL.std");
    m.b.memory_model(
        spirv::AddressingModel::Physical64,
        spirv::MemoryModel::OpenCL,
    );
    // Every helper variant (its slices' storage classes) gets an id first: calls name them
    // before or after their definitions.
    let helper_fns: Vec<(&Function, &[usize])> = p
        .helpers
        .iter()
        .map(|(f, calls)| (*f, &calls[..]))
        .collect();
    let variants = helper_variants((p.kernel, &p.kernel_calls), &helper_fns);
    let variant_ids: HashMap<Variant, Word> =
        variants.iter().map(|v| (v.clone(), m.b.id())).collect();
    for v in &variants {
        let (h, calls) = &p.helpers[v.0];
        helper(&mut m, h, calls, &variant_ids, v, p)?;
    }
    let mut entries = vec![(kernel(&mut m, p, &variant_ids, false)?, ENTRY)];
    if p.guarded_entry {
        entries.push((kernel(&mut m, p, &variant_ids, true)?, ENTRY_GUARDED));
    }
    let mut interface: Vec<Word> = m.builtins.values().copied().collect();
    interface.sort_unstable();
    for (id, name) in entries {
        m.b.entry_point(ExecutionModel::Kernel, id, name, &interface);
        m.b.execution_mode(id, ExecutionMode::LocalSize, p.local);
        // Rust does not contract `a * b + c` (OpenCL C's `FP_CONTRACT OFF`).
        m.b.execution_mode(id, ExecutionMode::ContractionOff, []);
    }
    use rspirv::binary::Assemble;
    Ok(Emitted {
        guards: m.guards_used.take(),
        words: m.b.module().assemble(),
    })
}

fn new_fx<'a>(
    m: &'a mut Module,
    f: &'a Function,
    calls: &'a [usize],
    variant_ids: &'a HashMap<Variant, Word>,
    p: &Program<'_>,
) -> Fx<'a> {
    Fx {
        m,
        f,
        calls,
        variant_ids,
        spaces: vec![Space::Global; f.params.len()],
        role: Role::Helper,
        params: Vec::new(),
        locals: Vec::new(),
        vars: Vec::new(),
        half_var: None,
        fail: 0,
        ufail: 0,
        done: 0,
        uniform: false,
        loops: Vec::new(),
        in_region: false,
        dims: p.dims,
        local: p.local,
        assume_guards: false,
        loop_depth: 0,
        wide_loop_vars: wide_loop_vars(f),
        scratch: None,
    }
}

/// The variables of `f`'s 64-bit `for` loops, and the locals whose `let` reads one as a leaf
/// of a narrow index tree (the IR's `index_fits_i32` sees through such a `let`): the indices
/// built from them stay 64-bit here (see `Fx::reads_wide_loop_var`).
fn wide_loop_vars(f: &Function) -> Vec<usize> {
    let mut vars = Vec::new();
    visit_stmts(&f.body, &mut |s| {
        if let StmtKind::For(h, _) = &s.kind {
            if f.locals.get(h.var).is_some_and(|l| l.ty.bits() == 64) {
                vars.push(h.var);
            }
        }
    });
    // (A `let` comes before its uses, so one pass in order sees every chain.)
    visit_stmts(&f.body, &mut |s| {
        if let StmtKind::Let(l, e) = &s.kind {
            if reads_any(e, &vars) {
                vars.push(*l);
            }
        }
    });
    vars
}

/// Whether narrow index tree `e` has one of `vars` as a leaf.
fn reads_any(e: &Expr, vars: &[usize]) -> bool {
    match &e.kind {
        ExprKind::Local(l) => vars.contains(l),
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b, _) => {
            reads_any(a, vars) || reads_any(b, vars)
        }
        ExprKind::Cast(a) if a.ty == ScalarTy::U32 => reads_any(a, vars),
        _ => false,
    }
}

/// The storage class of a space's pointers.
fn storage_class(s: Space) -> StorageClass {
    match s {
        Space::Global => StorageClass::CrossWorkgroup,
        Space::Local => StorageClass::Workgroup,
        Space::Private => StorageClass::Function,
    }
}

fn helper<'a>(
    m: &'a mut Module,
    f: &'a Function,
    calls: &'a [usize],
    variant_ids: &'a HashMap<Variant, Word>,
    variant: &Variant,
    p: &Program<'_>,
) -> Result<Word> {
    let ret = f.ret.ok_or_else(|| bad("a helper without a result type"))?;
    let mut fx = new_fx(m, f, calls, variant_ids, p);
    fx.spaces = variant.1.clone();
    let id = *variant_ids
        .get(variant)
        .ok_or_else(|| bad("a helper variant without an id"))?;
    let ret_ty = fx.m.ty(ret);
    let u32t = fx.m.ty(ScalarTy::U32);
    let failp_ty = fx.m.ptr(StorageClass::Function, u32t);
    let u64t = fx.m.ty(ScalarTy::U64);
    let mut param_tys = Vec::new();
    for (i, param) in f.params.iter().enumerate() {
        match param {
            Param::Scalar(t) => param_tys.push(fx.m.ty(*t)),
            // A slice: its pointer (of the variant's class) and length.
            Param::Slice { elem, .. } => {
                let e = fx.m.mem_ty(*elem);
                param_tys.push(fx.m.ptr(storage_class(fx.spaces[i]), e));
                param_tys.push(u64t);
            }
            Param::Structs { .. } => return Err(bad("a helper with a struct slice")),
        }
    }
    let n_raw = param_tys.len();
    param_tys.push(failp_ty);
    let fty = fx.m.b.type_function(ret_ty, param_tys.clone());
    fx.m.b
        .begin_function(ret_ty, Some(id), FunctionControl::NONE, fty)
        .map_err(build_err)?;
    let mut raw = Vec::new();
    for ty in &param_tys[..n_raw] {
        raw.push(fx.m.b.function_parameter(*ty).map_err(build_err)?);
    }
    let mut at = 0;
    for param in &f.params {
        match param {
            Param::Scalar(_) => {
                fx.params.push(ParamVal::Scalar(raw[at]));
                at += 1;
            }
            Param::Slice { .. } | Param::Structs { .. } => {
                fx.params.push(ParamVal::Slice {
                    ptr: raw[at],
                    len: raw[at + 1],
                });
                at += 2;
            }
        }
    }
    let failp = fx.m.b.function_parameter(failp_ty).map_err(build_err)?;
    fx.fail = failp;
    fx.ufail = failp;
    fx.m.b.begin_block(None).map_err(build_err)?;
    fx.declare_locals()?;
    fx.block(&f.body)?;
    let zero = fx.m.konst(ret, 0);
    fx.m.b.ret_value(zero).map_err(build_err)?;
    fx.finish()?;
    Ok(id)
}

/// The kernel's entry function; `guarded`: without the checks the run-time guards cover.
fn kernel<'a>(
    m: &'a mut Module,
    p: &'a Program<'_>,
    variant_ids: &'a HashMap<Variant, Word>,
    guarded: bool,
) -> Result<Word> {
    let f = p.kernel;
    let mut fx = new_fx(m, f, &p.kernel_calls, variant_ids, p);
    fx.assume_guards = guarded;
    let void = fx.m.b.type_void();
    let u64t = fx.m.ty(ScalarTy::U64);
    let u32t = fx.m.ty(ScalarTy::U32);
    let mut param_tys = Vec::new();
    for param in &f.params {
        match *param {
            Param::Scalar(ScalarTy::Bool) => param_tys.push(fx.m.u8_ty()),
            Param::Scalar(t) => param_tys.push(fx.m.mem_ty(t)),
            Param::Slice { elem, .. } => {
                let e = fx.m.mem_ty(elem);
                param_tys.push(fx.m.ptr(StorageClass::CrossWorkgroup, e));
                param_tys.push(u64t);
            }
            // Bytes, each field access cast to its scalar (`field_ptr`).
            Param::Structs { .. } => {
                let e = fx.m.u8_ty();
                param_tys.push(fx.m.ptr(StorageClass::CrossWorkgroup, e));
                param_tys.push(u64t);
            }
        }
    }
    let status_ty = fx.m.ptr(StorageClass::CrossWorkgroup, u32t);
    param_tys.push(status_ty);
    param_tys.extend([u64t; 3]);
    if p.scratch_param {
        let scratch = fx.m.ptr(StorageClass::Workgroup, u64t);
        param_tys.push(scratch);
    }
    let fty = fx.m.b.type_function(void, param_tys.clone());
    let id =
        fx.m.b
            .begin_function(void, None, FunctionControl::NONE, fty)
            .map_err(build_err)?;
    let mut raw = Vec::new();
    for ty in &param_tys {
        raw.push(fx.m.b.function_parameter(*ty).map_err(build_err)?);
    }
    fx.m.b.begin_block(None).map_err(build_err)?;
    let ordered = sycl_kernel_ir::orders_memory(&f.body);
    let mut at = 0;
    for param in &f.params {
        match *param {
            Param::Scalar(ScalarTy::Bool) => {
                let byte_ty = fx.m.u8_ty();
                let zero = fx.m.konst_raw(byte_ty, 8, 0);
                let v = fx.op(Op::INotEqual, ScalarTy::Bool, &[raw[at], zero])?;
                fx.params.push(ParamVal::Scalar(v));
                at += 1;
            }
            Param::Scalar(t) if t.is_half() => {
                let v = fx.half_from_bits(t, raw[at])?;
                fx.params.push(ParamVal::Scalar(v));
                at += 1;
            }
            Param::Scalar(_) => {
                fx.params.push(ParamVal::Scalar(raw[at]));
                at += 1;
            }
            // A kernel that orders memory may read what other work-items, devices or
            // processes write meanwhile: no aliasing or read-only promises.
            Param::Slice { .. } | Param::Structs { .. } if ordered => {
                fx.params.push(ParamVal::Slice {
                    ptr: raw[at],
                    len: raw[at + 1],
                });
                at += 2;
            }
            Param::Slice { mutable, .. } | Param::Structs { mutable, .. } => {
                // The launch refuses a written slice that overlaps another slice (OpenCL C's
                // `restrict`).
                fx.m.b.decorate(
                    raw[at],
                    Decoration::FuncParamAttr,
                    [Operand::FunctionParameterAttribute(
                        FunctionParameterAttribute::NoAlias,
                    )],
                );
                if !mutable {
                    fx.m.b.decorate(
                        raw[at],
                        Decoration::FuncParamAttr,
                        [Operand::FunctionParameterAttribute(
                            FunctionParameterAttribute::NoWrite,
                        )],
                    );
                }
                fx.params.push(ParamVal::Slice {
                    ptr: raw[at],
                    len: raw[at + 1],
                });
                at += 2;
            }
        }
    }
    fx.role = Role::Kernel {
        status: raw[at],
        ranges: [raw[at + 1], raw[at + 2], raw[at + 3]],
    };
    if p.scratch_param {
        fx.scratch = raw.get(at + 4).copied();
    }
    fx.declare_locals()?;
    // Stores, not OpVariable initializers: SPIRV-LLVM-Translator before 2025 (the reader of
    // Intel's OpenCL runtimes and GPU compilers of that time) made a Function variable with
    // an initializer one module global, shared by every work-item.
    let zero32 = fx.m.u32c(0);
    fx.fail = fx.var(u32t);
    fx.ufail = fx.var(u32t);
    let bool_ty = fx.m.ty(ScalarTy::Bool);
    let no = fx.m.konst(ScalarTy::Bool, 0);
    fx.done = fx.var(bool_ty);
    fx.store(fx.fail, zero32)?;
    fx.store(fx.ufail, zero32)?;
    fx.store(fx.done, no)?;
    // A plain range is launched rounded up to whole work-groups; the extra work-items of a
    // flat kernel leave first, so the kernel sees exactly its range.
    let mut outside = None;
    if f.steps.is_none() {
        for d in 0..fx.dims {
            let g = fx.query(Query::GlobalId, d)?;
            let r = fx.range(d)?;
            let o = fx.op(Op::UGreaterThanEqual, ScalarTy::Bool, &[g, r])?;
            outside = Some(match outside {
                None => o,
                Some(prev) => fx.op(Op::LogicalOr, ScalarTy::Bool, &[prev, o])?,
            });
        }
    }
    match &f.steps {
        None => {
            if let Some(outside) = outside {
                fx.if_then(outside, |fx| {
                    fx.m.b.ret().map_err(build_err)?;
                    fx.dead_block()
                })?;
            }
            fx.block(&f.body)?;
        }
        Some(steps) => fx.steps(steps)?,
    }
    fx.report()?;
    fx.m.b.ret().map_err(build_err)?;
    fx.finish()?;
    Ok(id)
}

impl Fx<'_> {
    // ---- plumbing

    fn ins(&mut self, op: Op, ty: Option<Word>, operands: Vec<Operand>) -> Result<Word> {
        let id = self.m.b.id();
        let inst = Instruction::new(op, ty, ty.map(|_| id), operands);
        self.m
            .b
            .insert_into_block(InsertPoint::End, inst)
            .map_err(build_err)?;
        Ok(id)
    }

    /// `op` over id operands, with a result of type `t`.
    fn op(&mut self, op: Op, t: ScalarTy, args: &[Word]) -> Result<Word> {
        let ty = self.m.ty(t);
        self.ins(
            op,
            Some(ty),
            args.iter().map(|a| Operand::IdRef(*a)).collect(),
        )
    }

    /// A Function variable of type `ty`, declared at the top of the function by `finish`.
    fn var(&mut self, ty: Word) -> Word {
        let p = self.m.ptr(StorageClass::Function, ty);
        let id = self.m.b.id();
        let ops = vec![Operand::StorageClass(StorageClass::Function)];
        self.vars
            .push(Instruction::new(Op::Variable, Some(p), Some(id), ops));
        id
    }

    fn load(&mut self, t: ScalarTy, ptr: Word) -> Result<Word> {
        let ty = self.m.ty(t);
        self.m.b.load(ty, None, ptr, None, []).map_err(build_err)
    }

    fn store(&mut self, ptr: Word, v: Word) -> Result<()> {
        self.m.b.store(ptr, v, None, []).map_err(build_err)
    }

    fn label(&mut self) -> Word {
        self.m.b.id()
    }

    fn begin(&mut self, label: Word) -> Result<()> {
        self.m.b.begin_block(Some(label)).map_err(build_err)?;
        Ok(())
    }

    fn branch(&mut self, to: Word) -> Result<()> {
        self.m.b.branch(to).map_err(build_err)
    }

    /// A block for code after a jump (reached by nothing).
    fn dead_block(&mut self) -> Result<()> {
        let l = self.label();
        self.begin(l)
    }

    /// Jumps to `to`; what follows goes into an unreachable block.
    fn jump(&mut self, to: Word) -> Result<()> {
        self.branch(to)?;
        self.dead_block()
    }

    fn current_label(&self) -> Result<Word> {
        let m = self.m.b.module_ref();
        let f = self
            .m
            .b
            .selected_function()
            .ok_or_else(|| bad("no function"))?;
        let b = self.m.b.selected_block().ok_or_else(|| bad("no block"))?;
        m.functions[f].blocks[b]
            .label_id()
            .ok_or_else(|| bad("a block without a label"))
    }

    fn declare_locals(&mut self) -> Result<()> {
        for (i, l) in self.f.locals.iter().enumerate() {
            let ty = match l.array {
                Some(_) => self.m.mem_ty(l.ty),
                None => self.m.ty(l.ty),
            };
            let id = match l.array {
                None => self.var(ty),
                // A private array: a `Function` variable of the array type.
                Some(a) if !a.is_work_group() => {
                    let len = self.m.u32c(a.len as u64);
                    let arr = self.m.b.type_array(ty, len);
                    self.var(arr)
                }
                Some(a) => {
                    let len = self.m.u32c(a.len as u64);
                    let arr = self.m.b.type_array(ty, len);
                    let p = self.m.ptr(StorageClass::Workgroup, arr);
                    // Module scope (the function is not selected for it): kernel-scope
                    // `__local` memory.
                    let var = Instruction::new(
                        Op::Variable,
                        Some(p),
                        Some(self.m.b.id()),
                        vec![Operand::StorageClass(StorageClass::Workgroup)],
                    );
                    let id = var.result_id.expect("an id");
                    self.m.b.insert_types_global_values(InsertPoint::End, var);
                    let _ = i;
                    id
                }
            };
            self.locals.push(id);
        }
        Ok(())
    }

    /// Puts the variables at the top of the function's first block and ends it.
    fn finish(&mut self) -> Result<()> {
        let fi = self
            .m
            .b
            .selected_function()
            .ok_or_else(|| bad("no function"))?;
        let vars = std::mem::take(&mut self.vars);
        let block = &mut self.m.b.module_mut().functions[fi].blocks[0];
        block.instructions.splice(0..0, vars);
        self.m.b.end_function().map_err(build_err)
    }

    fn if_then(&mut self, cond: Word, then: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let (t, merge) = (self.label(), self.label());
        self.open_selection(cond, t, merge, merge)?;
        self.begin(t)?;
        then(self)?;
        self.branch(merge)?;
        self.begin(merge)
    }

    /// Opens a selection construct: `cond` branches to `yes` or `no`; both meet at `merge`.
    fn open_selection(&mut self, cond: Word, yes: Word, no: Word, merge: Word) -> Result<()> {
        self.m
            .b
            .selection_merge(merge, SelectionControl::NONE)
            .map_err(build_err)?;
        self.branch_if(cond, yes, no)
    }

    /// `cond ? then() : otherwise` where `then` runs only when `cond` holds.
    fn cond_value(
        &mut self,
        cond: Word,
        t: ScalarTy,
        then: impl FnOnce(&mut Self) -> Result<Word>,
        otherwise: Word,
    ) -> Result<Word> {
        self.if_value(cond, t, then, |_| Ok(otherwise))
    }

    /// One side of a selection: its value and the block it ends in (for the phi).
    fn arm(
        &mut self,
        label: Word,
        merge: Word,
        value: impl FnOnce(&mut Self) -> Result<Word>,
    ) -> Result<(Word, Word)> {
        self.begin(label)?;
        let v = value(self)?;
        let end = self.current_label()?;
        self.branch(merge)?;
        Ok((v, end))
    }

    /// `cond ? a() : b()`, each evaluated only on its side.
    fn if_value(
        &mut self,
        cond: Word,
        t: ScalarTy,
        a: impl FnOnce(&mut Self) -> Result<Word>,
        b: impl FnOnce(&mut Self) -> Result<Word>,
    ) -> Result<Word> {
        let (al, bl, merge) = (self.label(), self.label(), self.label());
        self.open_selection(cond, al, bl, merge)?;
        let va = self.arm(al, merge, a)?;
        let vb = self.arm(bl, merge, b)?;
        self.begin(merge)?;
        let ty = self.m.ty(t);
        self.m.b.phi(ty, None, [va, vb]).map_err(build_err)
    }

    // ---- failures

    fn failp(&self) -> Word {
        if self.uniform {
            self.ufail
        } else {
            self.fail
        }
    }

    /// Records `code` unless `ok` or a failure is recorded already; returns the failure
    /// before it.
    fn set_fail_unless(&mut self, ok: Word, code: u64) -> Result<Word> {
        let fp = self.failp();
        let f = self.load(ScalarTy::U32, fp)?;
        let zero = self.m.u32c(0);
        let failed = self.op(Op::INotEqual, ScalarTy::Bool, &[f, zero])?;
        let keep = self.op(Op::LogicalOr, ScalarTy::Bool, &[ok, failed])?;
        let c = self.m.u32c(code);
        let nf = self.op(Op::Select, ScalarTy::U32, &[keep, f, c])?;
        self.store(fp, nf)?;
        Ok(f)
    }

    /// Whether the work-item has failed.
    fn failed(&mut self) -> Result<Word> {
        let fp = self.failp();
        let f = self.load(ScalarTy::U32, fp)?;
        let zero = self.m.u32c(0);
        self.op(Op::INotEqual, ScalarTy::Bool, &[f, zero])
    }

    /// After a value every work-item computes (uniform), into `ufail`: the failure is the
    /// work-item's own unless it had returned.
    fn uniform_check(&mut self) -> Result<()> {
        let f = self.load(ScalarTy::U32, self.fail)?;
        let u = self.load(ScalarTy::U32, self.ufail)?;
        let d = self.load(ScalarTy::Bool, self.done)?;
        let zero = self.m.u32c(0);
        let clean = self.op(Op::IEqual, ScalarTy::Bool, &[f, zero])?;
        let live = self.op(Op::LogicalNot, ScalarTy::Bool, &[d])?;
        let take = self.op(Op::LogicalAnd, ScalarTy::Bool, &[live, clean])?;
        let nf = self.op(Op::Select, ScalarTy::U32, &[take, u, f])?;
        self.store(self.fail, nf)?;
        self.store(self.ufail, zero)
    }

    /// Writes the work-item's failure code, if any, to the status word (the first wins).
    fn report(&mut self) -> Result<()> {
        let Role::Kernel { status, .. } = self.role else {
            return Err(bad("report outside a kernel"));
        };
        let f = self.load(ScalarTy::U32, self.fail)?;
        let zero = self.m.u32c(0);
        let failed = self.op(Op::INotEqual, ScalarTy::Bool, &[f, zero])?;
        self.if_then(failed, |fx| {
            let scope = fx.m.u32c(SCOPE_DEVICE);
            let relaxed = fx.m.u32c(0);
            fx.op(
                Op::AtomicCompareExchange,
                ScalarTy::U32,
                &[status, scope, relaxed, relaxed, f, zero],
            )?;
            Ok(())
        })
    }

    // ---- statements

    fn block(&mut self, body: &[Stmt]) -> Result<()> {
        for s in body {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn local_ty(&self, l: usize) -> ScalarTy {
        self.f.locals[l].ty
    }

    fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match &s.kind {
            StmtKind::Let(l, e) if self.f.locals[*l].is_private_array() => {
                // Every element gets the value: one store of the array built from it.
                let local = &self.f.locals[*l];
                let (t, n) = (local.ty, local.array_len().unwrap_or(0));
                let v = self.expr(e)?;
                let elem = if t.is_half() {
                    self.half_to_bits(t, v)?
                } else {
                    v
                };
                let mem = self.m.mem_ty(t);
                let len = self.m.u32c(n as u64);
                let arr = self.m.b.type_array(mem, len);
                let whole = self
                    .m
                    .b
                    .composite_construct(arr, None, vec![elem; n as usize])
                    .map_err(build_err)?;
                self.store(self.locals[*l], whole)
            }
            StmtKind::Let(l, e) => {
                let v = self.expr(e)?;
                self.store(self.locals[*l], v)
            }
            StmtKind::AssignLocal(l, op, e) => {
                let v = self.expr(e)?;
                let v = match op {
                    None => v,
                    Some(op) => {
                        let t = self.local_ty(*l);
                        let cur = self.load(t, self.locals[*l])?;
                        self.binary(*op, t, e.ty, cur, v)?
                    }
                };
                self.store(self.locals[*l], v)
            }
            StmtKind::CopyField {
                param,
                check,
                index,
                offset,
                array,
                to_slice,
                ..
            } => self.copy_field(*param, check, index, *offset, *array, *to_slice),
            StmtKind::Store {
                base,
                check,
                op,
                index,
                value,
                field: Some(field),
                ..
            } => {
                // Rust's order: the value, then the place.
                let v = self.expr(value)?;
                let (flat, ok) = self.field_index(*base, index, check, field)?;
                let v = match op {
                    None => v,
                    Some(op) => {
                        let cur = self.field_load(*base, field.ty, flat, ok)?;
                        self.binary(*op, field.ty, value.ty, cur, v)?
                    }
                };
                self.field_store(*base, field.ty, flat, ok, v)
            }
            StmtKind::Store {
                base,
                check,
                index_fits_i32: narrow,
                op,
                index,
                value,
                field: None,
            } => {
                // Rust's order: the value, then the place.
                let v = self.expr(value)?;
                let i = self.index(*base, index, narrow)?;
                let elem = self.base_ty(*base)?;
                let proved = self.proved(check)?;
                let v = match op {
                    None => v,
                    Some(op) => {
                        let cur = self.load_elem(*base, proved, i)?;
                        self.binary(*op, elem, value.ty, cur, v)?
                    }
                };
                self.store_elem(*base, proved, i, v)
            }
            StmtKind::Expr(e) => self.expr(e).map(drop),
            StmtKind::If(c, a, b) => {
                let c = self.expr(c)?;
                let (tl, el, merge) = (self.label(), self.label(), self.label());
                let else_target = if b.is_empty() { merge } else { el };
                self.open_selection(c, tl, else_target, merge)?;
                self.begin(tl)?;
                self.block(a)?;
                self.branch(merge)?;
                if !b.is_empty() {
                    self.begin(el)?;
                    self.block(b)?;
                    self.branch(merge)?;
                }
                self.begin(merge)
            }
            StmtKind::While(c, body) => self.while_loop(Some(c), body),
            StmtKind::Loop(body) => self.while_loop(None, body),
            StmtKind::For(h, body) => {
                self.for_loop(h, false, |fx| fx.block(body))?;
                self.after_loop()
            }
            StmtKind::Break => {
                let l = *self
                    .loops
                    .last()
                    .ok_or_else(|| bad("break outside a loop"))?;
                self.jump(l.merge)
            }
            StmtKind::Continue => {
                let l = *self
                    .loops
                    .last()
                    .ok_or_else(|| bad("continue outside a loop"))?;
                self.jump(l.cont)
            }
            StmtKind::Return(None) => {
                if self.in_region {
                    let yes = self.m.konst(ScalarTy::Bool, 1);
                    self.store(self.done, yes)?;
                    let l = *self.loops.last().ok_or_else(|| bad("region"))?;
                    self.jump(l.merge)
                } else {
                    self.report()?;
                    self.m.b.ret().map_err(build_err)?;
                    self.dead_block()
                }
            }
            StmtKind::Return(Some(e)) => {
                let v = self.expr(e)?;
                self.m.b.ret_value(v).map_err(build_err)?;
                self.dead_block()
            }
            StmtKind::Barrier => self.barrier(),
            StmtKind::Fence(order, scope) => {
                let scope = self.m.u32c(spirv_scope(*scope));
                let sem = self.m.u32c(order_semantics(*order) | 0x100 | 0x200);
                self.ins(
                    Op::MemoryBarrier,
                    None,
                    vec![Operand::IdRef(scope), Operand::IdRef(sem)],
                )?;
                Ok(())
            }
            StmtKind::Fail(f) => {
                let never = self.m.konst(ScalarTy::Bool, 0);
                self.set_fail_unless(never, f.code() as u64).map(drop)
            }
        }
    }

    /// In a region, a loop left by `return` leaves the enclosing one too.
    fn after_loop(&mut self) -> Result<()> {
        if !self.in_region {
            return Ok(());
        }
        let outer = *self.loops.last().ok_or_else(|| bad("region"))?;
        let d = self.load(ScalarTy::Bool, self.done)?;
        let next = self.label();
        self.open_selection(d, outer.merge, next, next)?;
        self.begin(next)
    }

    /// A structured loop: `check` decides (branching to `body` or `merge`), `body` runs with
    /// the loop as the target of `break`/`continue`, `step` runs before the next check.
    fn emit_loop(
        &mut self,
        check: impl FnOnce(&mut Self, Word, Word) -> Result<()>,
        body: impl FnOnce(&mut Self) -> Result<()>,
        step: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.loop_depth += 1;
        self.do_while(
            |fx, merge| {
                let body_l = fx.label();
                check(fx, body_l, merge)?;
                fx.begin(body_l)?;
                body(fx)
            },
            |fx| step(fx).map(|()| None),
        )?;
        self.loop_depth -= 1;
        Ok(())
    }

    /// `do { body } while (latch())`: a loop construct (`body` gets its merge label) whose
    /// continue block runs `latch`, then goes back to the header, or when `latch` gives a
    /// condition, to the header or out to the merge. (Not counted in `loop_depth`: callers
    /// that are loops count themselves.)
    fn do_while(
        &mut self,
        body: impl FnOnce(&mut Self, Word) -> Result<()>,
        latch: impl FnOnce(&mut Self) -> Result<Option<Word>>,
    ) -> Result<()> {
        let (header, first, cont, merge) = (self.label(), self.label(), self.label(), self.label());
        self.branch(header)?;
        self.begin(header)?;
        self.m
            .b
            .loop_merge(merge, cont, LoopControl::NONE, [])
            .map_err(build_err)?;
        self.branch(first)?;
        self.begin(first)?;
        self.loops.push(LoopCtx { merge, cont });
        body(self, merge)?;
        self.loops.pop();
        self.branch(cont)?;
        self.begin(cont)?;
        match latch(self)? {
            Some(again) => self.branch_if(again, header, merge)?,
            None => self.branch(header)?,
        }
        self.begin(merge)
    }

    fn branch_if(&mut self, c: Word, yes: Word, no: Word) -> Result<()> {
        self.m
            .b
            .branch_conditional(c, yes, no, [])
            .map_err(build_err)
    }

    /// `while (!failed && c) body` (`loop`: no `c`).
    fn while_loop(&mut self, c: Option<&Expr>, body: &[Stmt]) -> Result<()> {
        self.emit_loop(
            |fx, body_l, merge| {
                let failed = fx.failed()?;
                let test = fx.label();
                fx.branch_if(failed, merge, test)?;
                fx.begin(test)?;
                match c {
                    Some(c) => {
                        let c = fx.expr(c)?;
                        fx.branch_if(c, body_l, merge)
                    }
                    None => fx.branch(body_l),
                }
            },
            |fx| fx.block(body),
            |_| Ok(()),
        )?;
        self.after_loop()
    }

    /// `for var in start..end` (`..=`, `.step_by(step)`); `uniform`: its bounds are computed
    /// by every work-item of the group (a loop that synchronises).
    fn for_loop(
        &mut self,
        h: &For,
        uniform: bool,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let t = h.start.ty;
        let var = self.locals[h.var];
        self.uniform = uniform;
        let s = self.expr(&h.start)?;
        let e = self.expr(&h.end)?;
        let step = match &h.step {
            Some(st) => {
                let st = self.expr(st)?;
                let zero = self.m.u64c(0);
                let ok = self.op(Op::INotEqual, ScalarTy::Bool, &[st, zero])?;
                self.set_fail_unless(ok, FAIL_ARITH)?;
                Some((st, ok))
            }
            None => None,
        };
        self.uniform = false;
        if uniform && (!Self::pure(&h.start) || !Self::pure(&h.end) || h.step.is_some()) {
            self.uniform_check()?;
        }
        let (lt, le) = if is_signed(t) {
            (Op::SLessThan, Op::SLessThanEqual)
        } else {
            (Op::ULessThan, Op::ULessThanEqual)
        };
        let one = self.m.konst(t, 1);
        // Counting with `v += step` where the macro proved every value, the last step
        // included, below 2^(bits - 1) (`Bounds::loop_fits`): Intel's CPU vectorizer keeps a
        // work-item-strided loop whose counter is the index, and loses one computed from a
        // trip count. A 64-bit loop becomes a do-while behind one test, whose latch compares
        // the value before the step, signed (`v < end - step`, as clang emits a rotated `int`
        // loop): reduce 1.10x -> 1.02x the hand-written time with the test at the top, 0.96x
        // so. A 32-bit loop keeps the test at the top: stencil2d's two-step tile loops ran
        // 1.06x so and 1.10x rotated. Unlike OpenCL C, a `usize` loop stays 64-bit here:
        // counted in 32 bits it ran 1.45x through Intel's SPIR-V reader.
        if !h.inclusive && self.proved(&h.counts_below_half)? {
            let (st, step_ok) = match step {
                Some((st, ok)) => (st, Some(ok)),
                None => (self.m.u64c(1), None),
            };
            let st = if bits(t) == 32 {
                self.op(Op::UConvert, t, &[st])?
            } else {
                st
            };
            let guard_step = |fx: &mut Self, c: Word| -> Result<Word> {
                match step_ok {
                    Some(ok) => fx.op(Op::LogicalAnd, ScalarTy::Bool, &[ok, c]),
                    None => Ok(c),
                }
            };
            if bits(t) == 32 {
                // With the start proved below 2^31 too, the test at the top compares signed
                // and the step is `nsw`, as clang emits an `int` loop: Intel's vectorizer then
                // keeps stencil2d's tile stores contiguous (scatters with an unsigned test,
                // and with a signed one behind an unsigned entry test).
                let signed = self.proved(&h.start_below_half)?;
                let test = if signed { Op::SLessThan } else { lt };
                self.store(var, s)?;
                return self.emit_loop(
                    |fx, body_l, merge| {
                        let v = fx.load(t, var)?;
                        let c = fx.op(test, ScalarTy::Bool, &[v, e])?;
                        let c = guard_step(fx, c)?;
                        fx.branch_if(c, body_l, merge)
                    },
                    body,
                    |fx| {
                        let v = fx.load(t, var)?;
                        let v1 = fx.op(Op::IAdd, t, &[v, st])?;
                        if signed {
                            fx.m.no_signed_wrap(v1);
                        }
                        fx.store(var, v1)
                    },
                );
            }
            let enter = self.op(lt, ScalarTy::Bool, &[s, e])?;
            let enter = guard_step(self, enter)?;
            // Below 2^63, so the signed difference cannot overflow.
            let last = self.op(Op::ISub, t, &[e, st])?;
            self.store(var, s)?;
            return self.if_then(enter, |fx| {
                fx.loop_depth += 1;
                fx.do_while(
                    |fx, _| body(fx),
                    |fx| {
                        let v = fx.load(t, var)?;
                        let more = fx.op(Op::SLessThan, ScalarTy::Bool, &[v, last])?;
                        let v1 = fx.op(Op::IAdd, t, &[v, st])?;
                        fx.store(var, v1)?;
                        Ok(Some(more))
                    },
                )?;
                fx.loop_depth -= 1;
                Ok(())
            });
        }
        match step {
            None if !h.inclusive => {
                self.store(var, s)?;
                self.emit_loop(
                    |fx, body_l, merge| {
                        let v = fx.load(t, var)?;
                        let c = fx.op(lt, ScalarTy::Bool, &[v, e])?;
                        fx.branch_if(c, body_l, merge)
                    },
                    body,
                    |fx| {
                        let v = fx.load(t, var)?;
                        let v1 = fx.op(Op::IAdd, t, &[v, one])?;
                        fx.store(var, v1)
                    },
                )
            }
            None => {
                // `a..=b` stops after b even when b is the type's maximum.
                let bool_ty = self.m.ty(ScalarTy::Bool);
                let more = self.var(bool_ty);
                let m0 = self.op(le, ScalarTy::Bool, &[s, e])?;
                self.store(more, m0)?;
                self.store(var, s)?;
                self.emit_loop(
                    |fx, body_l, merge| {
                        let c = fx.load(ScalarTy::Bool, more)?;
                        fx.branch_if(c, body_l, merge)
                    },
                    body,
                    |fx| {
                        let v = fx.load(t, var)?;
                        let again = fx.op(Op::INotEqual, ScalarTy::Bool, &[v, e])?;
                        fx.store(more, again)?;
                        let v1 = fx.op(Op::IAdd, t, &[v, one])?;
                        let next = fx.op(Op::Select, t, &[again, v1, v])?;
                        fx.store(var, next)
                    },
                )
            }
            Some((st, step_ok)) => {
                // A count, then an index: the count cannot wrap (Rust's `step_by` stops at the
                // end too; a step of 0 failed above and runs nothing). The count is computed
                // behind a branch, as the OpenCL C path writes it: with the step's zero test
                // as selects (`go ? (e - s - 1) / (ok ? st : 1) + 1 : 0`), Intel's CPU runtime
                // 2026.2 vectorized a counting loop after a checked load into code that
                // skipped its vector part with a wrong start for the remainder (garbage
                // results; spec/kernels.md, "Known problems").
                let cmp = self.op(if h.inclusive { le } else { lt }, ScalarTy::Bool, &[s, e])?;
                let go = self.op(Op::LogicalAnd, ScalarTy::Bool, &[step_ok, cmp])?;
                let one64 = self.m.u64c(1);
                let zero = self.m.u64c(0);
                let u64t = self.m.ty(ScalarTy::U64);
                let count = self.var(u64t);
                self.store(count, zero)?;
                self.if_then(go, |fx| {
                    let diff = fx.op(Op::ISub, t, &[e, s])?;
                    let diff = if bits(t) == 32 {
                        fx.op(Op::UConvert, ScalarTy::U64, &[diff])?
                    } else {
                        diff
                    };
                    let diff = if h.inclusive {
                        diff
                    } else {
                        fx.op(Op::ISub, ScalarTy::U64, &[diff, one64])?
                    };
                    // `go` holds, so the step is not 0.
                    let q = fx.op(Op::UDiv, ScalarTy::U64, &[diff, st])?;
                    let q1 = fx.op(Op::IAdd, ScalarTy::U64, &[q, one64])?;
                    fx.store(count, q1)
                })?;
                let n = self.load(ScalarTy::U64, count)?;
                let k = self.var(u64t);
                self.store(k, zero)?;
                self.emit_loop(
                    |fx, body_l, merge| {
                        let kv = fx.load(ScalarTy::U64, k)?;
                        let c = fx.op(Op::ULessThan, ScalarTy::Bool, &[kv, n])?;
                        fx.branch_if(c, body_l, merge)
                    },
                    |fx| {
                        let kv = fx.load(ScalarTy::U64, k)?;
                        let off = fx.op(Op::IMul, ScalarTy::U64, &[kv, st])?;
                        let off = if bits(t) == 32 {
                            fx.op(Op::UConvert, t, &[off])?
                        } else {
                            off
                        };
                        let v = fx.op(Op::IAdd, t, &[s, off])?;
                        fx.store(var, v)?;
                        body(fx)
                    },
                    |fx| {
                        let kv = fx.load(ScalarTy::U64, k)?;
                        let k1 = fx.op(Op::IAdd, ScalarTy::U64, &[kv, one64])?;
                        fx.store(k, k1)
                    },
                )
            }
        }
    }

    fn barrier(&mut self) -> Result<()> {
        let wg = self.m.u32c(SCOPE_WORKGROUP);
        let sem = self.m.u32c(BARRIER_SEMANTICS);
        self.ins(
            Op::ControlBarrier,
            None,
            vec![Operand::IdRef(wg), Operand::IdRef(wg), Operand::IdRef(sem)],
        )?;
        Ok(())
    }

    // ---- work-group kernels

    fn has_return(body: &[Stmt]) -> bool {
        body.iter().any(|s| match &s.kind {
            StmtKind::Return(_) => true,
            StmtKind::If(_, a, b) => Self::has_return(a) || Self::has_return(b),
            StmtKind::While(_, b) | StmtKind::Loop(b) | StmtKind::For(_, b) => Self::has_return(b),
            _ => false,
        })
    }

    fn steps(&mut self, steps: &[Step]) -> Result<()> {
        for step in steps {
            match step {
                Step::Region(stmts) => {
                    let d = self.load(ScalarTy::Bool, self.done)?;
                    let live = self.op(Op::LogicalNot, ScalarTy::Bool, &[d])?;
                    self.if_then(live, |fx| {
                        if !Self::has_return(stmts) {
                            return fx.block(stmts);
                        }
                        // A loop run once, so that `return` can leave the region by its
                        // merge (`do { .. } while (false)`).
                        fx.do_while(
                            |fx, _| {
                                fx.in_region = true;
                                fx.block(stmts)?;
                                fx.in_region = false;
                                Ok(())
                            },
                            |fx| Ok(Some(fx.m.konst(ScalarTy::Bool, 0))),
                        )
                    })?;
                }
                Step::GroupLet(l, e) => {
                    self.uniform = true;
                    let v = self.expr(e)?;
                    self.uniform = false;
                    self.store(self.locals[*l], v)?;
                    // (A value that cannot fail leaves `ufail` as it was: 0.)
                    if !Self::pure(e) {
                        self.uniform_check()?;
                    }
                }
                Step::Barrier => self.barrier()?,
                Step::Group { local, op, args } => self.group(*local, *op, args)?,
                Step::SyncFor(h, body) => self.for_loop(h, true, |fx| fx.steps(body))?,
                Step::SubGroup { local, op, args } => self.sub_group(*local, *op, args)?,
            }
        }
        Ok(())
    }

    /// `let local = group_<op>(args)` with the OpenCL C prelude's semantics: every work-item of
    /// the group takes part; one that returned offers the identity (votes: `false` to `any`,
    /// `true` to `all`; a broadcast: zero). Sums, minima, maxima and votes are the core
    /// `OpGroup*` instructions; products, `& | ^` and broadcasts go through the kernel's
    /// scratch.
    fn group(&mut self, local: usize, op: GroupOp, args: &[Expr]) -> Result<()> {
        let t = args[0].ty;
        if self.f.locals[local].ty != t || self.f.locals[local].array.is_some() {
            return Err(bad("a group result's local"));
        }
        // A broadcast's id is uniform: every work-item computes it.
        let id = match (op, args.get(1)) {
            (GroupOp::Broadcast, Some(e)) => Some(self.uniform_operand(e)?),
            _ => None,
        };
        let c = match op {
            GroupOp::Collective(c) => Some(c),
            GroupOp::Broadcast => None,
        };
        let offered = self.offered(c, t);
        let live = self.live()?;
        let x = self.cond_value(live, t, |fx| fx.expr(&args[0]), offered)?;
        self.m.cap(Capability::Groups);
        let wg = self.m.u32c(SCOPE_WORKGROUP);
        let r = match (op, id) {
            (GroupOp::Collective(c), _) => match self.core_collective(c, t, wg, x)? {
                Some(r) => r,
                None => self.scratch_collective(c, t, x)?,
            },
            (GroupOp::Broadcast, Some(id)) => self.scratch_broadcast(t, x, id)?,
            (GroupOp::Broadcast, None) => return Err(bad("a broadcast without an id")),
        };
        self.store(self.locals[local], r)
    }

    /// A collective's operand every work-item computes (a broadcast's id or lane), its
    /// failure checked as a uniform value's.
    fn uniform_operand(&mut self, e: &Expr) -> Result<Word> {
        self.uniform = true;
        let v = self.expr(e)?;
        self.uniform = false;
        if !Self::pure(e) {
            self.uniform_check()?;
        }
        Ok(v)
    }

    /// Whether the work-item has not returned.
    fn live(&mut self) -> Result<Word> {
        let d = self.load(ScalarTy::Bool, self.done)?;
        self.op(Op::LogicalNot, ScalarTy::Bool, &[d])
    }

    /// What a work-item that returned offers to collective `c` over `t`: the identity (votes:
    /// `false` to `any`, `true` to `all`); to a broadcast or permutation (`None`), zero.
    fn offered(&mut self, c: Option<Collective>, t: ScalarTy) -> Word {
        match c {
            Some(c) if c.is_vote() => self
                .m
                .konst(ScalarTy::Bool, u64::from(c == Collective::All)),
            Some(c) => self.identity(c.op(), t),
            None => self.m.konst(t, 0),
        }
    }

    /// The collective as one core `OpGroup*` instruction at `scope`, where there is one (sums,
    /// minima, maxima, votes).
    fn core_collective(
        &mut self,
        c: Collective,
        t: ScalarTy,
        scope: Word,
        x: Word,
    ) -> Result<Option<Word>> {
        let ty = self.m.ty(t);
        let (gop, operation) = match c {
            Collective::Any | Collective::All => {
                let vote = if c == Collective::Any {
                    Op::GroupAny
                } else {
                    Op::GroupAll
                };
                let r = self.ins(
                    vote,
                    Some(ty),
                    vec![Operand::IdRef(scope), Operand::IdRef(x)],
                )?;
                return Ok(Some(r));
            }
            Collective::Reduce(r) => (Self::group_op(r, t), GroupOperation::Reduce),
            Collective::InclusiveScan(r) => (Self::group_op(r, t), GroupOperation::InclusiveScan),
            Collective::ExclusiveScan(r) => (Self::group_op(r, t), GroupOperation::ExclusiveScan),
        };
        let Some(gop) = gop else { return Ok(None) };
        let r = self.ins(
            gop,
            Some(ty),
            vec![
                Operand::IdRef(scope),
                Operand::GroupOperation(operation),
                Operand::IdRef(x),
            ],
        )?;
        Ok(Some(r))
    }

    /// `a op b` for a reduction's operator (integers wrap).
    fn combine(&mut self, op: Reduce, t: ScalarTy, a: Word, b: Word) -> Result<Word> {
        let float = is_float(t);
        let o = match op {
            Reduce::Sum if float => Op::FAdd,
            Reduce::Sum => Op::IAdd,
            Reduce::Product if float => Op::FMul,
            Reduce::Product => Op::IMul,
            Reduce::BitAnd => Op::BitwiseAnd,
            Reduce::BitOr => Op::BitwiseOr,
            Reduce::BitXor => Op::BitwiseXor,
            Reduce::Min => return self.math(MathFn::Min, t, &[a, b]),
            Reduce::Max => return self.math(MathFn::Max, t, &[a, b]),
        };
        self.op(o, t, &[a, b])
    }

    /// The work-item's linear id in its group (`u32`; SYCL's last dimension fastest, the
    /// device's first).
    fn linear_local_id(&mut self) -> Result<Word> {
        let v = self.builtin_vector(BuiltIn::LocalInvocationId)?;
        let u64t = self.m.ty(ScalarTy::U64);
        let mut ids = [0; 3];
        for (a, id) in ids.iter_mut().enumerate() {
            *id = self
                .m
                .b
                .composite_extract(u64t, None, v, [a as u32])
                .map_err(build_err)?;
        }
        let ly = self.m.u64c(self.local[1] as u64);
        let lx = self.m.u64c(self.local[0] as u64);
        let zy = self.op(Op::IMul, ScalarTy::U64, &[ids[2], ly])?;
        let yz = self.op(Op::IAdd, ScalarTy::U64, &[ids[1], zy])?;
        let s = self.op(Op::IMul, ScalarTy::U64, &[yz, lx])?;
        let lin = self.op(Op::IAdd, ScalarTy::U64, &[ids[0], s])?;
        self.op(Op::UConvert, ScalarTy::U32, &[lin])
    }

    /// A pointer to element `i` (`u32`) of the scratch, as `t`.
    fn scratch_at(&mut self, t: ScalarTy, i: Word) -> Result<Word> {
        let base = self
            .scratch
            .ok_or_else(|| bad("a group collective without scratch"))?;
        let ty = self.m.ty(t);
        let pt = self.m.ptr(StorageClass::Workgroup, ty);
        let typed = self.ins(Op::Bitcast, Some(pt), vec![Operand::IdRef(base)])?;
        self.m
            .b
            .in_bounds_ptr_access_chain(pt, None, typed, i, [])
            .map_err(build_err)
    }

    /// A reduction or scan through the scratch: log2(n) passes of two barriers, each work-item
    /// combining the value `stride` before its own (as the OpenCL C prelude's `sycl_scan_*`),
    /// unrolled over the launch's group size.
    fn scratch_collective(&mut self, c: Collective, t: ScalarTy, x: Word) -> Result<Word> {
        let n: u32 = self.local.iter().product();
        let u32t = ScalarTy::U32;
        let b = ScalarTy::Bool;
        let tid = self.linear_local_id()?;
        let mine = self.scratch_at(t, tid)?;
        self.store(mine, x)?;
        self.barrier()?;
        let mut stride = 1u32;
        while stride < n {
            let a = self.load(t, mine)?;
            let k = self.m.u32c(stride as u64);
            let ok = self.op(Op::UGreaterThanEqual, b, &[tid, k])?;
            let back = self.op(Op::ISub, u32t, &[tid, k])?;
            let j = self.op(Op::Select, u32t, &[ok, back, tid])?;
            let pj = self.scratch_at(t, j)?;
            let before = self.load(t, pj)?;
            let both = self.combine(c.op(), t, before, a)?;
            let v = self.op(Op::Select, t, &[ok, both, a])?;
            self.barrier()?;
            self.store(mine, v)?;
            self.barrier()?;
            stride <<= 1;
        }
        let r = match c {
            Collective::InclusiveScan(_) => self.load(t, mine)?,
            Collective::ExclusiveScan(r) => {
                let zero = self.m.u32c(0);
                let one = self.m.u32c(1);
                let ok = self.op(Op::UGreaterThan, b, &[tid, zero])?;
                let back = self.op(Op::ISub, u32t, &[tid, one])?;
                let j = self.op(Op::Select, u32t, &[ok, back, tid])?;
                let pj = self.scratch_at(t, j)?;
                let before = self.load(t, pj)?;
                let ident = self.identity(r, t);
                self.op(Op::Select, t, &[ok, before, ident])?
            }
            _ => {
                let last = self.m.u32c(n as u64 - 1);
                let p = self.scratch_at(t, last)?;
                self.load(t, p)?
            }
        };
        self.barrier()?;
        Ok(r)
    }

    /// `group_broadcast(x, id)` through the scratch: work-item `id % n` writes, all read.
    fn scratch_broadcast(&mut self, t: ScalarTy, x: Word, id: Word) -> Result<Word> {
        let n = self.local.iter().product::<u32>() as u64;
        let tid = self.linear_local_id()?;
        let nc = self.m.u64c(n);
        let m = self.op(Op::UMod, ScalarTy::U64, &[id, nc])?;
        let src = self.op(Op::UConvert, ScalarTy::U32, &[m])?;
        let is_src = self.op(Op::IEqual, ScalarTy::Bool, &[tid, src])?;
        let zero = self.m.u32c(0);
        let slot = self.scratch_at(t, zero)?;
        self.if_then(is_src, |fx| fx.store(slot, x))?;
        self.barrier()?;
        let r = self.load(t, slot)?;
        self.barrier()?;
        Ok(r)
    }

    /// A sub-group built-in (`uint`).
    fn sub_group_builtin(&mut self, which: BuiltIn) -> Result<Word> {
        let u32t = self.m.ty(ScalarTy::U32);
        let var = self.m.builtin_of(which, u32t);
        self.load(ScalarTy::U32, var)
    }

    /// `let local = op(args)` with the OpenCL C prelude's semantics (`sycl_sg_*`): every
    /// work-item of the sub-group takes part; one that returned offers 0 (reductions: their
    /// identity) and lane 0. Lanes out of range: shuffles and broadcasts take the lane modulo
    /// the sub-group's size; shifts and xor give the caller's own value.
    fn sub_group(&mut self, local: usize, op: SubGroupOp, args: &[Expr]) -> Result<()> {
        let t = args[0].ty;
        if self.f.locals[local].ty != t || self.f.locals[local].array.is_some() {
            return Err(bad("a sub-group result's local"));
        }
        let usize_t = ScalarTy::Usize;
        // A broadcast's lane is uniform: every work-item computes it (as a `GroupLet`).
        let uniform_lane = match (op, args.get(1)) {
            (SubGroupOp::Broadcast, Some(lane)) => Some(self.uniform_operand(lane)?),
            _ => None,
        };
        let c = match op {
            SubGroupOp::Collective(c) => Some(c),
            _ => None,
        };
        let offered = self.offered(c, t);
        let live = self.live()?;
        let x = self.cond_value(live, t, |fx| fx.expr(&args[0]), offered)?;
        let lane = match (uniform_lane, args.get(1)) {
            (Some(v), _) => Some(v),
            (None, Some(lane)) => {
                let zero = self.m.konst(usize_t, 0);
                Some(self.cond_value(live, usize_t, |fx| fx.expr(lane), zero)?)
            }
            (None, None) => None,
        };
        self.m.cap(Capability::Groups);
        let sg = self.m.u32c(SCOPE_SUBGROUP);
        let ty = self.m.ty(t);
        let r = match (op, lane) {
            (SubGroupOp::Collective(c), _) => match self.core_collective(c, t, sg, x)? {
                Some(r) => r,
                None => self.shuffle_collective(c, t, x)?,
            },
            (_, None) => return Err(bad("a sub-group permutation without a lane")),
            (_, Some(lane)) => {
                let size = self.sub_group_builtin(BuiltIn::SubgroupSize)?;
                let size64 = self.op(Op::UConvert, usize_t, &[size])?;
                let id = self.sub_group_builtin(BuiltIn::SubgroupLocalInvocationId)?;
                let id64 = self.op(Op::UConvert, usize_t, &[id])?;
                let b = ScalarTy::Bool;
                let u32 = ScalarTy::U32;
                let src = match op {
                    SubGroupOp::Broadcast | SubGroupOp::Shuffle => {
                        let m = self.op(Op::UMod, usize_t, &[lane, size64])?;
                        self.op(Op::UConvert, u32, &[m])?
                    }
                    SubGroupOp::ShiftLeft => {
                        // id + delta when delta < size - id.
                        let room = self.op(Op::ISub, u32, &[size, id])?;
                        let room = self.op(Op::UConvert, usize_t, &[room])?;
                        let ok = self.op(Op::ULessThan, b, &[lane, room])?;
                        let l32 = self.op(Op::UConvert, u32, &[lane])?;
                        let to = self.op(Op::IAdd, u32, &[id, l32])?;
                        self.op(Op::Select, u32, &[ok, to, id])?
                    }
                    SubGroupOp::ShiftRight => {
                        let ok = self.op(Op::ULessThanEqual, b, &[lane, id64])?;
                        let l32 = self.op(Op::UConvert, u32, &[lane])?;
                        let to = self.op(Op::ISub, u32, &[id, l32])?;
                        self.op(Op::Select, u32, &[ok, to, id])?
                    }
                    SubGroupOp::ShuffleXor => {
                        let s = self.op(Op::BitwiseXor, usize_t, &[id64, lane])?;
                        let ok = self.op(Op::ULessThan, b, &[s, size64])?;
                        let s32 = self.op(Op::UConvert, u32, &[s])?;
                        self.op(Op::Select, u32, &[ok, s32, id])?
                    }
                    SubGroupOp::Collective(_) => return Err(bad("unreachable")),
                };
                if op == SubGroupOp::Broadcast {
                    self.ins(
                        Op::GroupBroadcast,
                        Some(ty),
                        [sg, x, src].into_iter().map(Operand::IdRef).collect(),
                    )?
                } else {
                    // SPV_INTEL_subgroups (cl_intel_spirv_subgroups; Intel's Level Zero
                    // drivers): any lane's value in one instruction.
                    self.m.shuffle_intel();
                    self.ins(
                        Op::SubgroupShuffleINTEL,
                        Some(ty),
                        vec![Operand::IdRef(x), Operand::IdRef(src)],
                    )?
                }
            }
        };
        self.store(self.locals[local], r)
    }

    /// A sub-group reduction or scan by shuffles (`SPV_INTEL_subgroups`): log2 steps, each
    /// lane combining the value `off` lanes before its own, for `off` up to 64 (sub-groups of
    /// up to 128 lanes; Intel's largest are 64); the reduction is the last lane's.
    fn shuffle_collective(&mut self, c: Collective, t: ScalarTy, x: Word) -> Result<Word> {
        self.m.shuffle_intel();
        let u32t = ScalarTy::U32;
        let b = ScalarTy::Bool;
        let ty = self.m.ty(t);
        let id = self.sub_group_builtin(BuiltIn::SubgroupLocalInvocationId)?;
        let shuffle = |fx: &mut Self, v: Word, lane: Word| {
            fx.ins(
                Op::SubgroupShuffleINTEL,
                Some(ty),
                vec![Operand::IdRef(v), Operand::IdRef(lane)],
            )
        };
        let mut acc = x;
        let mut off = 1u64;
        while off <= 64 {
            let k = self.m.u32c(off);
            let ok = self.op(Op::UGreaterThanEqual, b, &[id, k])?;
            let back = self.op(Op::ISub, u32t, &[id, k])?;
            let j = self.op(Op::Select, u32t, &[ok, back, id])?;
            let before = shuffle(self, acc, j)?;
            let both = self.combine(c.op(), t, before, acc)?;
            acc = self.op(Op::Select, t, &[ok, both, acc])?;
            off <<= 1;
        }
        match c {
            Collective::InclusiveScan(_) => Ok(acc),
            Collective::ExclusiveScan(r) => {
                let zero = self.m.u32c(0);
                let one = self.m.u32c(1);
                let ok = self.op(Op::UGreaterThan, b, &[id, zero])?;
                let back = self.op(Op::ISub, u32t, &[id, one])?;
                let j = self.op(Op::Select, u32t, &[ok, back, id])?;
                let before = shuffle(self, acc, j)?;
                let ident = self.identity(r, t);
                self.op(Op::Select, t, &[ok, before, ident])
            }
            _ => {
                let size = self.sub_group_builtin(BuiltIn::SubgroupSize)?;
                let one = self.m.u32c(1);
                let last = self.op(Op::ISub, u32t, &[size, one])?;
                shuffle(self, acc, last)
            }
        }
    }

    /// The core `OpGroup*` instruction of a reduction over `t` (sums, minima and maxima).
    fn group_op(op: Reduce, t: ScalarTy) -> Option<Op> {
        Some(match (op, t) {
            (Reduce::Sum, t) if is_float(t) => Op::GroupFAdd,
            (Reduce::Sum, _) => Op::GroupIAdd,
            (Reduce::Min, t) if is_float(t) => Op::GroupFMin,
            (Reduce::Min, t) if is_signed(t) => Op::GroupSMin,
            (Reduce::Min, _) => Op::GroupUMin,
            (Reduce::Max, t) if is_float(t) => Op::GroupFMax,
            (Reduce::Max, t) if is_signed(t) => Op::GroupSMax,
            (Reduce::Max, _) => Op::GroupUMax,
            _ => return None,
        })
    }

    /// A reduction's identity over `t`.
    fn identity(&mut self, op: Reduce, t: ScalarTy) -> Word {
        let bits = op.identity_bits(t);
        self.m.konst(t, bits)
    }

    // ---- bounds proofs

    /// Whether an access needs no check here.
    fn proved(&self, check: &Check) -> Result<bool> {
        Ok(match check {
            Check::Checked => false,
            Check::Proved => true,
            Check::When(b) => self.eval(b)?.is_some_and(|v| v != 0),
            Check::Guard(b) => {
                if self.assume_guards {
                    let mut used = self.m.guards_used.borrow_mut();
                    if !used.contains(b) {
                        used.push(b.clone());
                    }
                }
                self.assume_guards
            }
        })
    }

    /// Whether narrow index tree `e` reads a 64-bit loop variable as a 32-bit leaf (the IR
    /// allows it for loops that count in 32 bits): this back end keeps those loops, and
    /// their indices, 64-bit (a `usize` loop counted in 32 bits ran 1.45x the hand-written
    /// time through Intel's SPIR-V reader).
    fn reads_wide_loop_var(&self, e: &Expr) -> bool {
        reads_any(e, &self.wide_loop_vars)
    }

    /// A bounds condition's value for the work-group size the module is built for; `None`
    /// when it depends on run-time values.
    fn eval(&self, b: &Bound) -> Result<Option<u64>> {
        Ok(b.eval(&|leaf| match leaf {
            Bound::LocalRange(d) => self.axis(*d).ok().map(|a| self.local[a as usize] as u64),
            _ => None,
        }))
    }

    // ---- memory

    /// A struct field access's flat index (item `k` of the field, in units of its scalar,
    /// from the slice's start: `i * stride + offset + k`) and the condition that both indices
    /// are in bounds (`None`: proved).
    fn field_index(
        &mut self,
        base: Base,
        index: &Expr,
        check: &Check,
        field: &sycl_kernel_ir::Field,
    ) -> Result<(Word, Option<Word>)> {
        let Base::Param(p) = base else {
            return Err(bad("a field of a local array"));
        };
        let Param::Structs { size, .. } = self.f.params[p] else {
            return Err(bad("a field of a scalar slice"));
        };
        let width = field.ty.size() as u64;
        let i = self.expr(index)?;
        let mut ok = None;
        if !self.proved(check)? {
            let n = self.len(base)?;
            ok = Some(self.op(Op::ULessThan, ScalarTy::Bool, &[i, n])?);
        }
        let stride = self.m.konst(ScalarTy::U64, size as u64 / width);
        let offset = self.m.konst(ScalarTy::U64, field.offset as u64 / width);
        let at = self.op(Op::IMul, ScalarTy::U64, &[i, stride])?;
        let mut flat = self.op(Op::IAdd, ScalarTy::U64, &[at, offset])?;
        if let Some(item) = &field.item {
            let k = self.expr(&item.index)?;
            if !self.proved(&item.check)? {
                let kn = self.m.konst(ScalarTy::U64, item.len as u64);
                let k_ok = self.op(Op::ULessThan, ScalarTy::Bool, &[k, kn])?;
                ok = Some(match ok {
                    Some(i_ok) => self.op(Op::LogicalAnd, ScalarTy::Bool, &[i_ok, k_ok])?,
                    None => k_ok,
                });
            }
            flat = self.op(Op::IAdd, ScalarTy::U64, &[flat, k])?;
        }
        Ok((flat, ok))
    }

    /// A pointer to the field scalar at `flat` (`field_index`) of struct slice `base`.
    fn field_ptr(&mut self, base: Base, t: ScalarTy, flat: Word) -> Result<Word> {
        let Base::Param(p) = base else {
            return Err(bad("a field of a local array"));
        };
        let ParamVal::Slice { ptr, .. } = self.params[p] else {
            return Err(bad("not a slice"));
        };
        let ty = self.m.mem_ty(t);
        let pt = self.m.ptr(StorageClass::CrossWorkgroup, ty);
        let typed = self.m.b.bitcast(pt, None, ptr).map_err(build_err)?;
        self.m
            .b
            .in_bounds_ptr_access_chain(pt, None, typed, flat, [])
            .map_err(build_err)
    }

    fn raw_field_load(&mut self, base: Base, t: ScalarTy, flat: Word) -> Result<Word> {
        let p = self.field_ptr(base, t, flat)?;
        self.read_scalar(t, p, StorageClass::CrossWorkgroup, t.size() as u32)
    }

    /// A struct field's scalar: checked unless `ok` is `None` (proved); a failed check
    /// records the failure and gives 0.
    fn field_load(
        &mut self,
        base: Base,
        t: ScalarTy,
        flat: Word,
        ok: Option<Word>,
    ) -> Result<Word> {
        let Some(ok) = ok else {
            return self.raw_field_load(base, t, flat);
        };
        self.set_fail_unless(ok, FAIL_BOUNDS)?;
        let zero = self.m.konst(t, 0);
        self.cond_value(ok, t, |fx| fx.raw_field_load(base, t, flat), zero)
    }

    /// Writes a struct field's scalar: nothing after a failure; checked unless `ok` is
    /// `None` (proved).
    fn field_store(
        &mut self,
        base: Base,
        t: ScalarTy,
        flat: Word,
        ok: Option<Word>,
        v: Word,
    ) -> Result<()> {
        let go = self.store_goes(ok)?;
        self.if_then(go, |fx| {
            let p = fx.field_ptr(base, t, flat)?;
            fx.write_scalar(t, p, StorageClass::CrossWorkgroup, t.size() as u32, v)
        })
    }

    /// Whether a store to a struct slice goes ahead: nothing after a failure; with a check
    /// (`ok`, `None` where proved), a failed one is recorded and stores nothing.
    fn store_goes(&mut self, ok: Option<Word>) -> Result<Word> {
        match ok {
            None => {
                let failed = self.failed()?;
                self.op(Op::LogicalNot, ScalarTy::Bool, &[failed])
            }
            Some(ok) => {
                let before = self.set_fail_unless(ok, FAIL_BOUNDS)?;
                let zero = self.m.u32c(0);
                let clean = self.op(Op::IEqual, ScalarTy::Bool, &[before, zero])?;
                self.op(Op::LogicalAnd, ScalarTy::Bool, &[ok, clean])
            }
        }
    }

    /// A whole array field copied from or to a private array ([`StmtKind::CopyField`]): one
    /// bounds check, then one vector load and store of 2, 4, 8 or 16 items (aligned to an
    /// item: the field is), else an item at a time. A failed check reads zeros and writes
    /// nothing, as the scalar accesses do. Halves move as their 16-bit patterns.
    fn copy_field(
        &mut self,
        p: usize,
        check: &Check,
        index: &Expr,
        offset: u32,
        array: usize,
        to_slice: bool,
    ) -> Result<()> {
        let local = &self.f.locals[array];
        let (t, n) = (
            local.ty,
            local
                .array_len()
                .ok_or_else(|| bad("a field copy into a scalar"))?,
        );
        let field = sycl_kernel_ir::Field {
            ty: t,
            offset,
            item: None,
        };
        let (flat, ok) = self.field_index(Base::Param(p), index, check, &field)?;
        if to_slice {
            let go = self.store_goes(ok)?;
            return self.if_then(go, |fx| fx.copy_items(p, t, n, flat, array, true));
        }
        let Some(ok) = ok else {
            return self.copy_items(p, t, n, flat, array, false);
        };
        self.set_fail_unless(ok, FAIL_BOUNDS)?;
        let (yes, no, merge) = (self.label(), self.label(), self.label());
        self.open_selection(ok, yes, no, merge)?;
        self.begin(yes)?;
        self.copy_items(p, t, n, flat, array, false)?;
        self.branch(merge)?;
        self.begin(no)?;
        let zero = match t.is_half() {
            true => {
                let ty = self.m.mem_ty(t);
                self.m.konst_raw(ty, 32, 0)
            }
            false => self.m.konst(t, 0),
        };
        for k in 0..n {
            let q = self.private_item(array, t, k)?;
            self.m.b.store(q, zero, None, []).map_err(build_err)?;
        }
        self.branch(merge)?;
        self.begin(merge)
    }

    /// Item `k` of private array `array` of `t`s: a `Function` pointer to its memory type.
    fn private_item(&mut self, array: usize, t: ScalarTy, k: u32) -> Result<Word> {
        let ty = self.m.mem_ty(t);
        let pt = self.m.ptr(StorageClass::Function, ty);
        let k = self.m.u32c(k as u64);
        self.m
            .b
            .in_bounds_access_chain(pt, None, self.locals[array], [k])
            .map_err(build_err)
    }

    /// The copy itself, in bounds: `n` items between struct slice `p` at `flat` and the
    /// private array.
    fn copy_items(
        &mut self,
        p: usize,
        t: ScalarTy,
        n: u32,
        flat: Word,
        array: usize,
        to_slice: bool,
    ) -> Result<()> {
        let ty = self.m.mem_ty(t);
        let align = [Operand::LiteralBit32(t.size() as u32)];
        if matches!(n, 2 | 4 | 8 | 16) {
            let field = self.field_ptr(Base::Param(p), t, flat)?;
            let item0 = self.private_item(array, t, 0)?;
            let (src, src_class, dst, dst_class) = match to_slice {
                true => (
                    item0,
                    StorageClass::Function,
                    field,
                    StorageClass::CrossWorkgroup,
                ),
                false => (
                    field,
                    StorageClass::CrossWorkgroup,
                    item0,
                    StorageClass::Function,
                ),
            };
            if n > 4 {
                self.m.cap(Capability::Vector16);
            }
            let vt = self.m.b.type_vector(ty, n);
            let (sp, dp) = (self.m.ptr(src_class, vt), self.m.ptr(dst_class, vt));
            let src = self.ins(Op::Bitcast, Some(sp), vec![Operand::IdRef(src)])?;
            let dst = self.ins(Op::Bitcast, Some(dp), vec![Operand::IdRef(dst)])?;
            let v = self
                .m
                .b
                .load(vt, None, src, Some(MemoryAccess::ALIGNED), align.clone())
                .map_err(build_err)?;
            return self
                .m
                .b
                .store(dst, v, Some(MemoryAccess::ALIGNED), align)
                .map_err(build_err);
        }
        for k in 0..n {
            let kk = self.m.u64c(k as u64);
            let at = self.op(Op::IAdd, ScalarTy::U64, &[flat, kk])?;
            let field = self.field_ptr(Base::Param(p), t, at)?;
            let item = self.private_item(array, t, k)?;
            let (s, d) = match to_slice {
                true => (item, field),
                false => (field, item),
            };
            let v = self
                .m
                .b
                .load(ty, None, s, Some(MemoryAccess::ALIGNED), align.clone())
                .map_err(build_err)?;
            self.m
                .b
                .store(d, v, Some(MemoryAccess::ALIGNED), align.clone())
                .map_err(build_err)?;
        }
        Ok(())
    }

    fn base_ty(&self, base: Base) -> Result<ScalarTy> {
        match base {
            Base::Param(i) => match self.f.params[i] {
                Param::Slice { elem, .. } => Ok(elem),
                Param::Structs { .. } => Err(bad("a struct slice's element without a field")),
                Param::Scalar(_) => Err(bad("indexing a scalar parameter")),
            },
            Base::Local(l) => match self.f.locals[l].array {
                Some(_) => Ok(self.f.locals[l].ty),
                None => Err(bad("indexing a scalar local")),
            },
        }
    }

    /// The length of a slice or array, as `u64`.
    fn len(&mut self, base: Base) -> Result<Word> {
        match base {
            Base::Param(i) => match self.params[i] {
                ParamVal::Slice { len, .. } => Ok(len),
                ParamVal::Scalar(_) => Err(bad("the length of a scalar")),
            },
            Base::Local(l) => {
                let n = self.f.locals[l]
                    .array_len()
                    .ok_or_else(|| bad("not an array"))?;
                Ok(self.m.u64c(n as u64))
            }
        }
    }

    /// An element index of `base`; `narrow`: whether it can be computed in 32-bit signed
    /// arithmetic and sign-extended (`sycl-macros` `Bounds::narrow_index`), the form in which
    /// Intel's CPU vectorizer sees consecutive accesses (as with hand-written `int` indices).
    fn index(&mut self, base: Base, e: &Expr, narrow: &Check) -> Result<Index> {
        if !self.reads_wide_loop_var(e) && self.proved(narrow)? {
            let n = self.narrow32(e)?;
            let wide = self.op(Op::SConvert, ScalarTy::U64, &[n])?;
            return Ok(Index {
                wide,
                narrow: Some(n),
            });
        }
        if let (Base::Local(_), ExprKind::Cast(inner)) = (base, &e.kind) {
            if inner.ty == ScalarTy::U32 {
                let narrow = self.expr(inner)?;
                let wide = self.cast(narrow, ScalarTy::U32, e.ty)?;
                return Ok(Index {
                    wide,
                    narrow: Some(narrow),
                });
            }
        }
        Ok(Index {
            wide: self.expr(e)?,
            narrow: None,
        })
    }

    /// An index tree `narrow_index` accepted, in 32 bits: every value is below 2^31, so the
    /// 32-bit operations compute the same numbers.
    fn narrow32(&mut self, e: &Expr) -> Result<Word> {
        match &e.kind {
            ExprKind::Lit(bits) => Ok(self.m.u32c(*bits & 0xFFFF_FFFF)),
            ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b, _) => {
                let (x, y) = (self.narrow32(a)?, self.narrow32(b)?);
                let o = match op {
                    BinOp::Add => Op::IAdd,
                    BinOp::Sub => Op::ISub,
                    _ => Op::IMul,
                };
                let r = self.op(o, ScalarTy::U32, &[x, y])?;
                // Every value of the tree is below 2^31: no signed overflow.
                self.m.no_signed_wrap(r);
                Ok(r)
            }
            ExprKind::Cast(a) if bits(a.ty) == 32 => self.narrow32(a),
            ExprKind::Cast(a) => self.trunc32(a),
            _ => {
                let v = self.expr(e)?;
                if bits(e.ty) == 32 {
                    Ok(v)
                } else {
                    self.op(Op::UConvert, ScalarTy::U32, &[v])
                }
            }
        }
    }

    /// A pure 64-bit integer truncated to 32 bits, the truncation pushed down through
    /// `+ - * & | ^` to the leaves (exact in modular arithmetic): Intel's CPU vectorizer loses
    /// the work-items' consecutiveness through a truncated 64-bit sum. A global id is its
    /// 32-bit parts, `group_id * local_range + local_id` (no global offset is ever passed).
    fn trunc32(&mut self, e: &Expr) -> Result<Word> {
        match &e.kind {
            ExprKind::Query(Query::GlobalId, d) => {
                let g = self.query(Query::GroupId, *d)?;
                let g = self.op(Op::UConvert, ScalarTy::U32, &[g])?;
                let a = self.axis(*d)?;
                let l = self.m.u32c(self.local[a as usize] as u64);
                let gl = self.op(Op::IMul, ScalarTy::U32, &[g, l])?;
                let lid = self.query(Query::LocalId, *d)?;
                let lid = self.op(Op::UConvert, ScalarTy::U32, &[lid])?;
                self.op(Op::IAdd, ScalarTy::U32, &[gl, lid])
            }
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
            ) if bits(a.ty) == 64 && bits(b.ty) == 64 => {
                let (x, y) = (self.trunc32(a)?, self.trunc32(b)?);
                let o = match op {
                    BinOp::Add => Op::IAdd,
                    BinOp::Sub => Op::ISub,
                    BinOp::Mul => Op::IMul,
                    BinOp::BitAnd => Op::BitwiseAnd,
                    BinOp::BitOr => Op::BitwiseOr,
                    _ => Op::BitwiseXor,
                };
                self.op(o, ScalarTy::U32, &[x, y])
            }
            ExprKind::Cast(a) if bits(a.ty) == 32 && is_int(a.ty) => self.expr(a),
            _ => {
                let v = self.expr(e)?;
                self.op(Op::UConvert, ScalarTy::U32, &[v])
            }
        }
    }

    /// A pointer to element `i`; its storage class; the element's alignment.
    fn elem_ptr(&mut self, base: Base, i: Index) -> Result<(Word, StorageClass, u32)> {
        let t = self.base_ty(base)?;
        let ty = self.m.mem_ty(t);
        let align = t.size() as u32;
        match base {
            Base::Param(p) => {
                let ParamVal::Slice { ptr, .. } = self.params[p] else {
                    return Err(bad("not a slice"));
                };
                let class = storage_class(self.spaces.get(p).copied().unwrap_or(Space::Global));
                let pt = self.m.ptr(class, ty);
                let id = self
                    .m
                    .b
                    .in_bounds_ptr_access_chain(pt, None, ptr, i.wide, [])
                    .map_err(build_err)?;
                Ok((id, class, align))
            }
            Base::Local(l) => {
                let class = if self.f.locals[l].is_private_array() {
                    StorageClass::Function
                } else {
                    StorageClass::Workgroup
                };
                let pt = self.m.ptr(class, ty);
                let arr = self.locals[l];
                // A 32-bit index (exact: the access runs only in bounds, proved or behind its
                // check, and a local array has at most 65536 elements) where the index is a
                // widened `u32`, or outside loops: on Intel's CPU runtime stencil2d ran 1.87x
                // -> 1.27x the hand-written time with it; inside loops a narrowed 64-bit index
                // made matmul 1.00x -> 1.79x (the loop's induction variable is 64-bit there).
                let i = match i.narrow {
                    Some(narrow) => narrow,
                    None if self.loop_depth == 0 => {
                        self.op(Op::UConvert, ScalarTy::U32, &[i.wide])?
                    }
                    None => i.wide,
                };
                let id = self
                    .m
                    .b
                    .in_bounds_access_chain(pt, None, arr, [i])
                    .map_err(build_err)?;
                Ok((id, class, align))
            }
        }
    }

    fn raw_load(&mut self, base: Base, i: Index) -> Result<Word> {
        let t = self.base_ty(base)?;
        let (p, class, align) = self.elem_ptr(base, i)?;
        self.read_scalar(t, p, class, align)
    }

    /// The `t` at `p` (halves as their `f32` values).
    fn read_scalar(
        &mut self,
        t: ScalarTy,
        p: Word,
        class: StorageClass,
        align: u32,
    ) -> Result<Word> {
        if t == ScalarTy::F16 {
            return self.vload_half(p, class);
        }
        let ty = self.m.mem_ty(t);
        let v = self
            .m
            .b
            .load(
                ty,
                None,
                p,
                Some(MemoryAccess::ALIGNED),
                [Operand::LiteralBit32(align)],
            )
            .map_err(build_err)?;
        if t.is_half() {
            self.half_from_bits(t, v)
        } else {
            Ok(v)
        }
    }

    /// Writes `v` (a half as its `f32` value) as the `t` at `p`.
    fn write_scalar(
        &mut self,
        t: ScalarTy,
        p: Word,
        class: StorageClass,
        align: u32,
        v: Word,
    ) -> Result<()> {
        let v = match t {
            ScalarTy::F16 => return self.vstore_half(v, p, class),
            ScalarTy::Bf16 => self.half_to_bits(t, v)?,
            _ => v,
        };
        self.m
            .b
            .store(
                p,
                v,
                Some(MemoryAccess::ALIGNED),
                [Operand::LiteralBit32(align)],
            )
            .map_err(build_err)
    }

    /// OpenCL.std `vload_half(0, p)`: the IEEE half at `p` (a 16-bit pattern's pointer), as
    /// an `f32`.
    fn vload_half(&mut self, p: Word, class: StorageClass) -> Result<Word> {
        let hp = self.m.half_ptr(class);
        let q = self.ins(Op::Bitcast, Some(hp), vec![Operand::IdRef(p)])?;
        let (f32t, zero, ext) = (self.m.ty(ScalarTy::F32), self.m.u64c(0), self.m.ext);
        self.m
            .b
            .ext_inst(
                f32t,
                None,
                ext,
                OpenclStd100Op::vload_half as u32,
                [Operand::IdRef(zero), Operand::IdRef(q)],
            )
            .map_err(build_err)
    }

    /// OpenCL.std `vstore_half_r(v, 0, p, RTE)`: `v` rounded to the nearest half (ties to
    /// even) into the 16-bit pattern at `p`.
    fn vstore_half(&mut self, v: Word, p: Word, class: StorageClass) -> Result<()> {
        let hp = self.m.half_ptr(class);
        let q = self.ins(Op::Bitcast, Some(hp), vec![Operand::IdRef(p)])?;
        let (void, zero, ext) = (self.m.b.type_void(), self.m.u64c(0), self.m.ext);
        self.m
            .b
            .ext_inst(
                void,
                None,
                ext,
                OpenclStd100Op::vstore_half_r as u32,
                [
                    Operand::IdRef(v),
                    Operand::IdRef(zero),
                    Operand::IdRef(q),
                    Operand::FPRoundingMode(FPRoundingMode::RTE),
                ],
            )
            .map_err(build_err)?;
        Ok(())
    }

    /// The function's 16-bit scratch variable (conversions of halves in registers).
    fn half_scratch(&mut self) -> Word {
        if let Some(v) = self.half_var {
            return v;
        }
        let u16t = self.m.mem_ty(ScalarTy::F16);
        let v = self.var(u16t);
        self.half_var = Some(v);
        v
    }

    /// The `f32` value of a half's 16-bit pattern `bits`.
    fn half_from_bits(&mut self, t: ScalarTy, bits16: Word) -> Result<Word> {
        if t == ScalarTy::F16 {
            let s = self.half_scratch();
            self.store(s, bits16)?;
            return self.vload_half(s, StorageClass::Function);
        }
        // bfloat16: the high half of an f32.
        let wide = self.op(Op::UConvert, ScalarTy::U32, &[bits16])?;
        let sixteen = self.m.u32c(16);
        let high = self.op(Op::ShiftLeftLogical, ScalarTy::U32, &[wide, sixteen])?;
        self.op(Op::Bitcast, ScalarTy::F32, &[high])
    }

    /// The 16-bit pattern of `v` (an `f32`) rounded to the half type `t` (nearest, ties to
    /// even; bfloat16 NaNs stay quiet NaNs, as the `half` crate's).
    fn half_to_bits(&mut self, t: ScalarTy, v: Word) -> Result<Word> {
        let u16t = self.m.mem_ty(t);
        if t == ScalarTy::F16 {
            let s = self.half_scratch();
            self.vstore_half(v, s, StorageClass::Function)?;
            return self.m.b.load(u16t, None, s, None, []).map_err(build_err);
        }
        let u = self.op(Op::Bitcast, ScalarTy::U32, &[v])?;
        let sixteen = self.m.u32c(16);
        let high = self.op(Op::ShiftRightLogical, ScalarTy::U32, &[u, sixteen])?;
        let one = self.m.u32c(1);
        let lsb = self.op(Op::BitwiseAnd, ScalarTy::U32, &[high, one])?;
        let half_ulp = self.m.u32c(0x7fff);
        let bias = self.op(Op::IAdd, ScalarTy::U32, &[lsb, half_ulp])?;
        let sum = self.op(Op::IAdd, ScalarTy::U32, &[u, bias])?;
        let rounded = self.op(Op::ShiftRightLogical, ScalarTy::U32, &[sum, sixteen])?;
        let quiet = self.m.u32c(0x40);
        let nan_bits = self.op(Op::BitwiseOr, ScalarTy::U32, &[high, quiet])?;
        let nan = self.op(Op::IsNan, ScalarTy::Bool, &[v])?;
        let r = self.op(Op::Select, ScalarTy::U32, &[nan, nan_bits, rounded])?;
        self.ins(Op::UConvert, Some(u16t), vec![Operand::IdRef(r)])
    }

    /// `v` (an `f32`) rounded to the half type `t`, as an `f32`.
    fn round_half(&mut self, t: ScalarTy, v: Word) -> Result<Word> {
        if t == ScalarTy::F16 {
            // Through the scratch variable once: store rounded, load back.
            let s = self.half_scratch();
            self.vstore_half(v, s, StorageClass::Function)?;
            return self.vload_half(s, StorageClass::Function);
        }
        let b = self.half_to_bits(t, v)?;
        self.half_from_bits(t, b)
    }

    /// `base[i]`: checked unless proved; a failed check records the failure and gives 0.
    fn load_elem(&mut self, base: Base, proved: bool, i: Index) -> Result<Word> {
        if proved {
            return self.raw_load(base, i);
        }
        let t = self.base_ty(base)?;
        let n = self.len(base)?;
        let ok = self.op(Op::ULessThan, ScalarTy::Bool, &[i.wide, n])?;
        self.set_fail_unless(ok, FAIL_BOUNDS)?;
        let zero = self.m.konst(t, 0);
        self.cond_value(ok, t, |fx| fx.raw_load(base, i), zero)
    }

    /// `base[i] = v`: nothing after a failure; checked unless proved.
    fn store_elem(&mut self, base: Base, proved: bool, i: Index, v: Word) -> Result<()> {
        // After a failure, stores others could see are skipped; a private array is the
        // work-item's own, so its in-bounds stores go on (no branch in register-tile loops).
        let private = matches!(base, Base::Local(l) if self.f.locals[l].is_private_array());
        let go = if proved && private {
            self.m.konst(ScalarTy::Bool, 1)
        } else if proved {
            let failed = self.failed()?;
            self.op(Op::LogicalNot, ScalarTy::Bool, &[failed])?
        } else if private {
            let n = self.len(base)?;
            let ok = self.op(Op::ULessThan, ScalarTy::Bool, &[i.wide, n])?;
            self.set_fail_unless(ok, FAIL_BOUNDS)?;
            ok
        } else {
            let n = self.len(base)?;
            let ok = self.op(Op::ULessThan, ScalarTy::Bool, &[i.wide, n])?;
            let before = self.set_fail_unless(ok, FAIL_BOUNDS)?;
            let zero = self.m.u32c(0);
            let clean = self.op(Op::IEqual, ScalarTy::Bool, &[before, zero])?;
            self.op(Op::LogicalAnd, ScalarTy::Bool, &[ok, clean])?
        };
        let t = self.base_ty(base)?;
        self.if_then(go, |fx| {
            let (p, class, align) = fx.elem_ptr(base, i)?;
            fx.write_scalar(t, p, class, align, v)
        })
    }

    fn atomic(
        &mut self,
        op: AtomicOp,
        (order, scope): (MemoryOrder, MemoryScope),
        t: ScalarTy,
        base: Base,
        i: Index,
        vs: &[Word],
    ) -> Result<Word> {
        if bits(t) == 64 {
            self.m.cap(Capability::Int64Atomics);
        }
        let n = self.len(base)?;
        let ok = self.op(Op::ULessThan, ScalarTy::Bool, &[i.wide, n])?;
        let before = self.set_fail_unless(ok, FAIL_BOUNDS)?;
        let zero32 = self.m.u32c(0);
        let clean = self.op(Op::IEqual, ScalarTy::Bool, &[before, zero32])?;
        let go = self.op(Op::LogicalAnd, ScalarTy::Bool, &[ok, clean])?;
        let zero = self.m.konst(t, 0);
        self.cond_value(
            go,
            t,
            |fx| {
                let (p, class, _) = fx.elem_ptr(base, i)?;
                let local = class == StorageClass::Workgroup;
                // Relaxed device-scope atomics on local memory keep the work-group scope
                // (the memory is the group's).
                let scope = fx.m.u32c(if local {
                    SCOPE_WORKGROUP
                } else {
                    spirv_scope(scope)
                });
                let storage = if local { 0x100 } else { 0x200 };
                let sem_bits = match order_semantics(order) {
                    0 => 0,
                    o => o | storage,
                };
                let sem = fx.m.u32c(sem_bits);
                // A compare-exchange that fails only reads: its order less the release.
                let fail_sem = fx.m.u32c(match order {
                    MemoryOrder::Release => 0,
                    MemoryOrder::AcqRel => order_semantics(MemoryOrder::Acquire) | storage,
                    _ => sem_bits,
                });
                let int_op = |op: AtomicOp| match (op, is_signed(t)) {
                    (AtomicOp::FetchAdd, _) => Op::AtomicIAdd,
                    (AtomicOp::FetchSub, _) => Op::AtomicISub,
                    (AtomicOp::FetchAnd, _) => Op::AtomicAnd,
                    (AtomicOp::FetchOr, _) => Op::AtomicOr,
                    (AtomicOp::FetchXor, _) => Op::AtomicXor,
                    (AtomicOp::FetchMin, true) => Op::AtomicSMin,
                    (AtomicOp::FetchMin, false) => Op::AtomicUMin,
                    (AtomicOp::FetchMax, true) => Op::AtomicSMax,
                    (_, _) => Op::AtomicUMax,
                };
                match op {
                    AtomicOp::FetchAdd if t == ScalarTy::F32 => {
                        fx.atomic_fadd(p, class, scope, (sem, fail_sem), vs[0])
                    }
                    AtomicOp::Load => fx.op(Op::AtomicLoad, t, &[p, scope, sem]),
                    AtomicOp::Store => {
                        fx.ins(
                            Op::AtomicStore,
                            None,
                            [p, scope, sem, vs[0]]
                                .into_iter()
                                .map(Operand::IdRef)
                                .collect(),
                        )?;
                        Ok(vs[0])
                    }
                    AtomicOp::Exchange => fx.op(Op::AtomicExchange, t, &[p, scope, sem, vs[0]]),
                    AtomicOp::CompareExchange => fx.op(
                        Op::AtomicCompareExchange,
                        t,
                        &[p, scope, sem, fail_sem, vs[1], vs[0]],
                    ),
                    _ => fx.op(int_op(op), t, &[p, scope, sem, vs[0]]),
                }
            },
            zero,
        )
    }

    /// `f32` fetch-add as a compare-exchange loop on the bits (as the OpenCL C prelude).
    fn atomic_fadd(
        &mut self,
        p: Word,
        class: StorageClass,
        scope: Word,
        (sem, fail_sem): (Word, Word),
        v: Word,
    ) -> Result<Word> {
        let u32t = self.m.ty(ScalarTy::U32);
        let qt = self.m.ptr(class, u32t);
        let q = self.ins(Op::Bitcast, Some(qt), vec![Operand::IdRef(p)])?;
        let relaxed = self.m.u32c(0);
        let first = self.op(Op::AtomicLoad, ScalarTy::U32, &[q, scope, relaxed])?;
        let pre = self.current_label()?;
        let (header, body_l, cont, merge) =
            (self.label(), self.label(), self.label(), self.label());
        self.branch(header)?;
        self.begin(header)?;
        let old = self.m.b.id();
        let seen = self.m.b.id();
        self.ins(
            Op::Phi,
            Some(u32t),
            vec![
                Operand::IdRef(first),
                Operand::IdRef(pre),
                Operand::IdRef(seen),
                Operand::IdRef(cont),
            ],
        )
        .map(drop)?;
        // (`ins` allocated a fresh id for the phi: rename it to `old`.)
        self.rename_last(old)?;
        self.m
            .b
            .loop_merge(merge, cont, LoopControl::NONE, [])
            .map_err(build_err)?;
        self.branch(body_l)?;
        self.begin(body_l)?;
        let oldf = self.op(Op::Bitcast, ScalarTy::F32, &[old])?;
        let sum = self.op(Op::FAdd, ScalarTy::F32, &[oldf, v])?;
        let sumi = self.op(Op::Bitcast, ScalarTy::U32, &[sum])?;
        self.ins(
            Op::AtomicCompareExchange,
            Some(u32t),
            [q, scope, sem, fail_sem, sumi, old]
                .into_iter()
                .map(Operand::IdRef)
                .collect(),
        )?;
        self.rename_last(seen)?;
        let same = self.op(Op::IEqual, ScalarTy::Bool, &[seen, old])?;
        self.m
            .b
            .branch_conditional(same, merge, cont, [])
            .map_err(build_err)?;
        self.begin(cont)?;
        self.branch(header)?;
        self.begin(merge)?;
        self.op(Op::Bitcast, ScalarTy::F32, &[old])
    }

    /// Gives the last instruction of the current block the result id `id`.
    fn rename_last(&mut self, id: Word) -> Result<()> {
        let f = self
            .m
            .b
            .selected_function()
            .ok_or_else(|| bad("no function"))?;
        let b = self.m.b.selected_block().ok_or_else(|| bad("no block"))?;
        let inst = self.m.b.module_mut().functions[f].blocks[b]
            .instructions
            .last_mut()
            .ok_or_else(|| bad("no instruction"))?;
        inst.result_id = Some(id);
        Ok(())
    }

    // ---- expressions

    /// Whether evaluating `e` has no effect and cannot fail (so it may be evaluated early,
    /// or not at all: `&&`, `||` and `if` values branch only around the others).
    fn pure(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Param(_)
            | ExprKind::Len(_)
            | ExprKind::Query(..)
            | ExprKind::SubGroupQuery(_)
            | ExprKind::ConstParam(_)
            | ExprKind::SliceArg(_)
            | ExprKind::ArrayArg(_) => true,
            ExprKind::Load { .. }
            | ExprKind::Atomic { .. }
            | ExprKind::Group(..)
            | ExprKind::SubGroup(..)
            | ExprKind::Call(..) => false,
            ExprKind::Binary(BinOp::Div | BinOp::Rem, a, b, _) if is_int(a.ty) => {
                let _ = b;
                false
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => Self::pure(a),
            ExprKind::Binary(_, a, b, _) => Self::pure(a) && Self::pure(b),
            ExprKind::Math(m, args) => !m.can_fail() && args.iter().all(Self::pure),
            ExprKind::Select(c, a, b) => Self::pure(c) && Self::pure(a) && Self::pure(b),
        }
    }

    fn range(&mut self, d: u8) -> Result<Word> {
        match self.role {
            Role::Kernel { ranges, .. } => Ok(ranges[d as usize]),
            Role::Helper => Err(bad("a range query in a helper")),
        }
    }

    /// The device axis of SYCL dimension `d`.
    fn axis(&self, d: u8) -> Result<u32> {
        if d >= self.dims {
            return Err(bad("a dimension beyond the launch's"));
        }
        Ok((self.dims - 1 - d) as u32)
    }

    /// The value of a 3-component `size_t` built-in (ids and sizes, device order).
    fn builtin_vector(&mut self, which: BuiltIn) -> Result<Word> {
        let var = self.m.builtin(which);
        let u64t = self.m.ty(ScalarTy::U64);
        let v3 = self.m.b.type_vector(u64t, 3);
        self.m
            .b
            .load(
                v3,
                None,
                var,
                Some(MemoryAccess::ALIGNED),
                [Operand::LiteralBit32(32)],
            )
            .map_err(build_err)
    }

    fn query(&mut self, q: Query, d: u8) -> Result<Word> {
        let builtin = match q {
            Query::GlobalRange => return self.range(d),
            Query::LocalRange => {
                let a = self.axis(d)?;
                return Ok(self.m.u64c(self.local[a as usize] as u64));
            }
            Query::GlobalId => BuiltIn::GlobalInvocationId,
            Query::LocalId => BuiltIn::LocalInvocationId,
            Query::GroupId => BuiltIn::WorkgroupId,
            Query::GroupRange => BuiltIn::NumWorkgroups,
        };
        let a = self.axis(d)?;
        let v = self.builtin_vector(builtin)?;
        let u64t = self.m.ty(ScalarTy::U64);
        self.m
            .b
            .composite_extract(u64t, None, v, [a])
            .map_err(build_err)
    }

    fn expr(&mut self, e: &Expr) -> Result<Word> {
        let t = e.ty;
        match &e.kind {
            // (Validation refuses templates: `__rt::instantiate` replaced it.)
            ExprKind::ConstParam(_) => Err(bad("an uninstantiated const parameter")),
            ExprKind::SliceArg(_) => Err(bad("a slice argument outside a call")),
            ExprKind::ArrayArg(_) => Err(bad("an array argument outside a call")),
            // A half's value is exact in `f32`.
            ExprKind::Lit(bits) if t == ScalarTy::F16 => Ok(self.m.konst(
                t,
                half::f16::from_bits(*bits as u16).to_f32().to_bits() as u64,
            )),
            ExprKind::Lit(bits) if t == ScalarTy::Bf16 => Ok(self.m.konst(
                t,
                half::bf16::from_bits(*bits as u16).to_f32().to_bits() as u64,
            )),
            ExprKind::Lit(bits) => Ok(self.m.konst(t, *bits)),
            ExprKind::Local(l) => self.load(t, self.locals[*l]),
            ExprKind::Param(i) => match self.params[*i] {
                ParamVal::Scalar(v) => Ok(v),
                ParamVal::Slice { .. } => Err(bad("a slice as a value")),
            },
            ExprKind::Load {
                base,
                check,
                field: Some(field),
                index,
                ..
            } => {
                let (flat, ok) = self.field_index(*base, index, check, field)?;
                self.field_load(*base, field.ty, flat, ok)
            }
            ExprKind::Load {
                base,
                check,
                index_fits_i32: narrow,
                index,
                field: None,
            } => {
                let i = self.index(*base, index, narrow)?;
                let proved = self.proved(check)?;
                self.load_elem(*base, proved, i)
            }
            ExprKind::Len(base) => self.len(*base),
            ExprKind::Unary(UnOp::Neg, a) => {
                let v = self.expr(a)?;
                // Integer negation wraps (SPIR-V integers have no overflow).
                self.op(
                    if is_float(t) {
                        Op::FNegate
                    } else {
                        Op::SNegate
                    },
                    t,
                    &[v],
                )
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let v = self.expr(a)?;
                self.op(
                    if t == ScalarTy::Bool {
                        Op::LogicalNot
                    } else {
                        Op::Not
                    },
                    t,
                    &[v],
                )
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b, _) => {
                let x = self.expr(a)?;
                let logical = if *op == BinOp::And {
                    Op::LogicalAnd
                } else {
                    Op::LogicalOr
                };
                if Self::pure(b) {
                    let y = self.expr(b)?;
                    return self.op(logical, ScalarTy::Bool, &[x, y]);
                }
                // Short-circuit: `b` runs only when it decides.
                if *op == BinOp::And {
                    let no = self.m.konst(ScalarTy::Bool, 0);
                    self.cond_value(x, ScalarTy::Bool, |fx| fx.expr(b), no)
                } else {
                    let yes = self.m.konst(ScalarTy::Bool, 1);
                    let not_x = self.op(Op::LogicalNot, ScalarTy::Bool, &[x])?;
                    self.cond_value(not_x, ScalarTy::Bool, |fx| fx.expr(b), yes)
                }
            }
            ExprKind::Binary(op, a, b, no_wrap) => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let r = self.binary(*op, a.ty, b.ty, x, y)?;
                // `u32` arithmetic that the macro proved free of signed overflow too;
                // decorated, Intel's reader gives LLVM `nsw`, which lets it move a sign
                // extension out of `c ± k` (one address with constant displacements for
                // stencil2d's five tile reads, as from `int`). Never by run-time guard (the
                // decoder refuses one).
                if self.proved(no_wrap)? {
                    self.m.no_signed_wrap(r);
                }
                Ok(r)
            }
            // A truncation to 32 bits of pure integer arithmetic: pushed to the leaves.
            ExprKind::Cast(a)
                if is_int(t)
                    && bits(t) == 32
                    && is_int(a.ty)
                    && bits(a.ty) == 64
                    && Self::pure(a)
                    && matches!(
                        a.kind,
                        ExprKind::Binary(..) | ExprKind::Query(Query::GlobalId, _)
                    ) =>
            {
                self.trunc32(a)
            }
            ExprKind::Cast(a) => {
                let v = self.expr(a)?;
                self.cast(v, a.ty, t)
            }
            ExprKind::Math(m, args) => {
                let vs = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>>>()?;
                // The operands' type (the result is `u32` for bit counts).
                let operand = args.first().map_or(t, |a| a.ty);
                if operand.is_half() {
                    // In `f32`, rounded back to the half type.
                    let v = self.math(*m, ScalarTy::F32, &vs)?;
                    return if t.is_half() {
                        self.round_half(t, v)
                    } else {
                        Ok(v)
                    };
                }
                self.math(*m, operand, &vs)
            }
            ExprKind::Query(q, d) => self.query(*q, *d),
            ExprKind::Atomic {
                op,
                base,
                index,
                values,
                order,
                scope,
            } => {
                let i = self.index(*base, index, &Check::Checked)?;
                let vs = values
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>>>()?;
                self.atomic(*op, (*order, *scope), t, *base, i, &vs)
            }
            ExprKind::Group(..) => Err(bad("a group collective outside a step")),
            ExprKind::SubGroup(..) => Err(bad("a sub-group operation outside a step")),
            ExprKind::SubGroupQuery(q) => {
                let v = self.sub_group_builtin(match q {
                    SubGroupQuery::LocalId => BuiltIn::SubgroupLocalInvocationId,
                    SubGroupQuery::LocalRange => BuiltIn::SubgroupSize,
                    SubGroupQuery::MaxLocalRange => BuiltIn::SubgroupMaxSize,
                    SubGroupQuery::Id => BuiltIn::SubgroupId,
                    SubGroupQuery::Range => BuiltIn::NumSubgroups,
                })?;
                self.op(Op::UConvert, ScalarTy::Usize, &[v])
            }
            ExprKind::Call(k, args) => {
                let spaces = call_spaces(self.f, &self.spaces, args);
                let mut vs = Vec::new();
                for (a, space) in args.iter().zip(&spaces) {
                    match a.kind {
                        ExprKind::SliceArg(p) => match self.params.get(p) {
                            Some(ParamVal::Slice { ptr, len }) => vs.extend([*ptr, *len]),
                            _ => return Err(bad("a slice argument that is no slice")),
                        },
                        // A pointer to its first element, of the array's storage class.
                        ExprKind::ArrayArg(l) => {
                            let ty = self.m.mem_ty(self.f.locals[l].ty);
                            let pt = self.m.ptr(storage_class(*space), ty);
                            let zero = self.m.u32c(0);
                            let arr = self.locals[l];
                            let first = self
                                .m
                                .b
                                .in_bounds_access_chain(pt, None, arr, [zero])
                                .map_err(build_err)?;
                            let n = self.len(Base::Local(l))?;
                            vs.extend([first, n]);
                        }
                        _ => vs.push(self.expr(a)?),
                    }
                }
                vs.push(self.failp());
                let helper = *self.calls.get(*k).ok_or_else(|| bad("helper index"))?;
                let variant = (helper, spaces);
                let callee = *self
                    .variant_ids
                    .get(&variant)
                    .ok_or_else(|| bad("a call's helper variant"))?;
                let ty = self.m.ty(t);
                self.m
                    .b
                    .function_call(ty, None, callee, vs)
                    .map_err(build_err)
            }
            ExprKind::Select(c, a, b) => {
                let cv = self.expr(c)?;
                if Self::pure(a) && Self::pure(b) {
                    let x = self.expr(a)?;
                    let y = self.expr(b)?;
                    return self.op(Op::Select, t, &[cv, x, y]);
                }
                self.if_value(cv, t, |fx| fx.expr(a), |fx| fx.expr(b))
            }
        }
    }

    /// `x op y` with Rust's semantics; `t`: the left operand's type, `rt`: the right's.
    fn binary(&mut self, op: BinOp, t: ScalarTy, rt: ScalarTy, x: Word, y: Word) -> Result<Word> {
        if t.is_half() {
            // In `f32`; arithmetic rounded back to the half type (comparisons are exact).
            let v = self.binary(op, ScalarTy::F32, rt, x, y)?;
            return match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                    self.round_half(t, v)
                }
                _ => Ok(v),
            };
        }
        let float = is_float(t);
        let signed = is_signed(t);
        let b = ScalarTy::Bool;
        match op {
            BinOp::Add => self.op(if float { Op::FAdd } else { Op::IAdd }, t, &[x, y]),
            BinOp::Sub => self.op(if float { Op::FSub } else { Op::ISub }, t, &[x, y]),
            BinOp::Mul => self.op(if float { Op::FMul } else { Op::IMul }, t, &[x, y]),
            BinOp::Div if float => self.op(Op::FDiv, t, &[x, y]),
            BinOp::Rem if float => self.op(Op::FRem, t, &[x, y]),
            BinOp::Div | BinOp::Rem => {
                // By zero, or MIN / -1, fails (and gives 0).
                let zero = self.m.konst(t, 0);
                let mut bad_args = self.op(Op::IEqual, b, &[y, zero])?;
                if signed {
                    let min = self.m.konst(t, 1u64 << (bits(t) - 1));
                    let minus1 = self.m.konst(t, u64::MAX >> (64 - bits(t)));
                    let a_min = self.op(Op::IEqual, b, &[x, min])?;
                    let b_m1 = self.op(Op::IEqual, b, &[y, minus1])?;
                    let ovf = self.op(Op::LogicalAnd, b, &[a_min, b_m1])?;
                    bad_args = self.op(Op::LogicalOr, b, &[bad_args, ovf])?;
                }
                let ok = self.op(Op::LogicalNot, b, &[bad_args])?;
                self.set_fail_unless(ok, FAIL_ARITH)?;
                let one = self.m.konst(t, 1);
                let safe = self.op(Op::Select, t, &[bad_args, one, y])?;
                let o = match (op, signed) {
                    (BinOp::Div, true) => Op::SDiv,
                    (BinOp::Div, false) => Op::UDiv,
                    (_, true) => Op::SRem,
                    (_, false) => Op::UMod,
                };
                let r = self.op(o, t, &[x, safe])?;
                self.op(Op::Select, t, &[bad_args, zero, r])
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor if t == ScalarTy::Bool => {
                let o = match op {
                    BinOp::BitAnd => Op::LogicalAnd,
                    BinOp::BitOr => Op::LogicalOr,
                    _ => Op::LogicalNotEqual,
                };
                self.op(o, t, &[x, y])
            }
            BinOp::BitAnd => self.op(Op::BitwiseAnd, t, &[x, y]),
            BinOp::BitOr => self.op(Op::BitwiseOr, t, &[x, y]),
            BinOp::BitXor => self.op(Op::BitwiseXor, t, &[x, y]),
            BinOp::Shl | BinOp::Shr => {
                // The amount is masked by the bit width, in the left operand's width.
                let mask = self.m.konst(rt, (bits(t) - 1) as u64);
                let amount = self.op(Op::BitwiseAnd, rt, &[y, mask])?;
                let amount = match (bits(rt), bits(t)) {
                    (a, b) if a == b => amount,
                    _ => self.op(Op::UConvert, t, &[amount])?,
                };
                let o = match (op, signed) {
                    (BinOp::Shl, _) => Op::ShiftLeftLogical,
                    (_, true) => Op::ShiftRightArithmetic,
                    (_, false) => Op::ShiftRightLogical,
                };
                self.op(o, t, &[x, amount])
            }
            BinOp::And => self.op(Op::LogicalAnd, b, &[x, y]),
            BinOp::Or => self.op(Op::LogicalOr, b, &[x, y]),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if t == ScalarTy::Bool {
                    if matches!(op, BinOp::Eq | BinOp::Ne) {
                        let o = if op == BinOp::Eq {
                            Op::LogicalEqual
                        } else {
                            Op::LogicalNotEqual
                        };
                        return self.op(o, b, &[x, y]);
                    }
                    // false < true: compare as integers.
                    let xi = self.cast(x, b, ScalarTy::U32)?;
                    let yi = self.cast(y, b, ScalarTy::U32)?;
                    return self.binary(op, ScalarTy::U32, ScalarTy::U32, xi, yi);
                }
                let o = match (op, float, signed) {
                    (BinOp::Eq, true, _) => Op::FOrdEqual,
                    // `!=` holds for NaN.
                    (BinOp::Ne, true, _) => Op::FUnordNotEqual,
                    (BinOp::Lt, true, _) => Op::FOrdLessThan,
                    (BinOp::Le, true, _) => Op::FOrdLessThanEqual,
                    (BinOp::Gt, true, _) => Op::FOrdGreaterThan,
                    (BinOp::Ge, true, _) => Op::FOrdGreaterThanEqual,
                    (BinOp::Eq, false, _) => Op::IEqual,
                    (BinOp::Ne, false, _) => Op::INotEqual,
                    (BinOp::Lt, false, true) => Op::SLessThan,
                    (BinOp::Le, false, true) => Op::SLessThanEqual,
                    (BinOp::Gt, false, true) => Op::SGreaterThan,
                    (BinOp::Ge, false, true) => Op::SGreaterThanEqual,
                    (BinOp::Lt, false, false) => Op::ULessThan,
                    (BinOp::Le, false, false) => Op::ULessThanEqual,
                    (BinOp::Gt, false, false) => Op::UGreaterThan,
                    (BinOp::Ge, false, false) => Op::UGreaterThanEqual,
                    _ => return Err(bad("not a comparison")),
                };
                self.op(o, b, &[x, y])
            }
        }
    }

    /// Rust's `as`.
    fn cast(&mut self, v: Word, from: ScalarTy, to: ScalarTy) -> Result<Word> {
        if from == to {
            return Ok(v);
        }
        // (Validated: halves convert from `f32` only, and to `f32`/`f64`: exact.)
        if to.is_half() {
            return self.round_half(to, v);
        }
        if from.is_half() {
            return self.cast(v, ScalarTy::F32, to);
        }
        if from == ScalarTy::Bool {
            let one = self
                .m
                .konst(to, if is_float(to) { 1.0f64.to_bits() } else { 1 });
            let one = if to == ScalarTy::F32 {
                self.m.konst(to, 1.0f32.to_bits() as u64)
            } else {
                one
            };
            let zero = self.m.konst(to, 0);
            return self.op(Op::Select, to, &[v, one, zero]);
        }
        match (is_float(from), is_float(to)) {
            (false, false) => {
                if bits(from) == bits(to) {
                    // One SPIR-V type for both signednesses.
                    Ok(v)
                } else if bits(from) < bits(to) && is_signed(from) {
                    self.op(Op::SConvert, to, &[v])
                } else {
                    self.op(Op::UConvert, to, &[v])
                }
            }
            (false, true) => self.op(
                if is_signed(from) {
                    Op::ConvertSToF
                } else {
                    Op::ConvertUToF
                },
                to,
                &[v],
            ),
            (true, true) => self.op(Op::FConvert, to, &[v]),
            (true, false) => {
                // Toward zero, saturating; NaN to 0 (some drivers give MIN for NaN).
                let c = self.op(
                    if is_signed(to) {
                        Op::ConvertFToS
                    } else {
                        Op::ConvertFToU
                    },
                    to,
                    &[v],
                )?;
                self.m.b.decorate(c, Decoration::SaturatedConversion, []);
                let nan = self.op(Op::IsNan, ScalarTy::Bool, &[v])?;
                let zero = self.m.konst(to, 0);
                self.op(Op::Select, to, &[nan, zero, c])
            }
        }
    }

    fn math(&mut self, m: MathFn, t: ScalarTy, a: &[Word]) -> Result<Word> {
        if m == MathFn::Clamp {
            // Rust's clamp: fails unless `lo <= hi` (false where either is NaN); a NaN `x`
            // compares false both ways and stays.
            let (x, lo, hi) = (a[0], a[1], a[2]);
            let b = ScalarTy::Bool;
            let (le, lt, gt) = if is_float(t) {
                (Op::FOrdLessThanEqual, Op::FOrdLessThan, Op::FOrdGreaterThan)
            } else if is_signed(t) {
                (Op::SLessThanEqual, Op::SLessThan, Op::SGreaterThan)
            } else {
                (Op::ULessThanEqual, Op::ULessThan, Op::UGreaterThan)
            };
            let ok = self.op(le, b, &[lo, hi])?;
            self.set_fail_unless(ok, FAIL_CLAMP)?;
            let below = self.op(lt, b, &[x, lo])?;
            let above = self.op(gt, b, &[x, hi])?;
            let capped = self.op(Op::Select, t, &[above, hi, x])?;
            return self.op(Op::Select, t, &[below, lo, capped]);
        }
        let ty = self.m.ty(t);
        let ext = self.m.ext;
        let call = |fx: &mut Self, op: OpenclStd100Op, args: &[Word]| -> Result<Word> {
            fx.m.b
                .ext_inst(
                    ty,
                    None,
                    ext,
                    op as u32,
                    args.iter().map(|w| Operand::IdRef(*w)),
                )
                .map_err(build_err)
        };
        if !is_float(t) {
            return match m {
                // A compare and a select, not OpenCL.std's s_min/u_max: Intel's CPU runtime
                // reads an extended instruction as a call it cannot see through (no
                // `readnone`), and in a tiled stencil's clamped loop that made the local
                // stores scatters (1.5x slower; spec/kernels.md).
                MathFn::Min | MathFn::Max => {
                    let less = if is_signed(t) {
                        Op::SLessThan
                    } else {
                        Op::ULessThan
                    };
                    let (x, y) = (a[0], a[1]);
                    let x_less = self.op(less, ScalarTy::Bool, &[x, y])?;
                    let (yes, no) = if m == MathFn::Min { (x, y) } else { (y, x) };
                    self.op(Op::Select, t, &[x_less, yes, no])
                }
                MathFn::Abs if is_signed(t) => {
                    // Wraps: MIN stays MIN.
                    let zero = self.m.konst(t, 0);
                    let neg = self.op(Op::SLessThan, ScalarTy::Bool, &[a[0], zero])?;
                    let minus = self.op(Op::SNegate, t, &[a[0]])?;
                    self.op(Op::Select, t, &[neg, minus, a[0]])
                }
                MathFn::Abs => Ok(a[0]),
                MathFn::SaturatingAdd if is_signed(t) => call(self, OpenclStd100Op::s_add_sat, a),
                MathFn::SaturatingAdd => call(self, OpenclStd100Op::u_add_sat, a),
                MathFn::SaturatingSub if is_signed(t) => call(self, OpenclStd100Op::s_sub_sat, a),
                MathFn::SaturatingSub => call(self, OpenclStd100Op::u_sub_sat, a),
                MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => {
                    let op = match m {
                        MathFn::CountOnes => OpenclStd100Op::popcount,
                        MathFn::LeadingZeros => OpenclStd100Op::clz,
                        _ => OpenclStd100Op::ctz,
                    };
                    // In the operand's type; Rust's result is a `u32`.
                    let n = call(self, op, a)?;
                    if bits(t) == 64 {
                        self.op(Op::UConvert, ScalarTy::U32, &[n])
                    } else {
                        Ok(n)
                    }
                }
                MathFn::RotateLeft | MathFn::RotateRight => {
                    // OpenCL.std's rotate is left, by the amount modulo the width, in the
                    // operand's type; right is left by the negated amount.
                    let mut n = a[1];
                    if bits(t) == 64 {
                        n = self.op(Op::UConvert, ScalarTy::U64, &[n])?;
                    }
                    if m == MathFn::RotateRight {
                        let zero = self.m.konst(t, 0);
                        n = self.op(Op::ISub, t, &[zero, n])?;
                    }
                    call(self, OpenclStd100Op::rotate, &[a[0], n])
                }
                // Square and multiply over the 32 bits of the `u32` exponent, as selects
                // (wrapping, as `OpIMul` does).
                MathFn::Pow => {
                    let b_ = ScalarTy::Bool;
                    let u32t = ScalarTy::U32;
                    let zero = self.m.u32c(0);
                    let mut r = self.m.konst(t, 1);
                    let mut base = a[0];
                    for k in 0..32u64 {
                        let bit = self.m.u32c(1 << k);
                        let set = self.op(Op::BitwiseAnd, u32t, &[a[1], bit])?;
                        let on = self.op(Op::INotEqual, b_, &[set, zero])?;
                        let times = self.op(Op::IMul, t, &[r, base])?;
                        r = self.op(Op::Select, t, &[on, times, r])?;
                        if k < 31 {
                            base = self.op(Op::IMul, t, &[base, base])?;
                        }
                    }
                    Ok(r)
                }
                _ => Err(bad("a float function on an integer")),
            };
        }
        match m {
            // Rust's `recip` is `1.0 / x`, correctly rounded like `/`.
            MathFn::Recip => {
                let one = if bits(t) == 64 {
                    self.m.konst(t, 1f64.to_bits())
                } else {
                    self.m.konst(t, u64::from(1f32.to_bits()))
                };
                return self.op(Op::FDiv, t, &[one, a[0]]);
            }
            MathFn::IsNan => return self.op(Op::IsNan, ScalarTy::Bool, &[a[0]]),
            MathFn::IsFinite => return self.op(Op::IsFinite, ScalarTy::Bool, &[a[0]]),
            // OpenCL.std's pown takes the `i32` exponent as it is.
            MathFn::Powi => return call(self, OpenclStd100Op::pown, a),
            // Rust's `fract` is `x - x.trunc()`.
            MathFn::Fract => {
                let whole = call(self, OpenclStd100Op::trunc, a)?;
                return self.op(Op::FSub, t, &[a[0], whole]);
            }
            _ => {}
        }
        let op = match m {
            MathFn::Sqrt => OpenclStd100Op::sqrt,
            MathFn::Exp => OpenclStd100Op::exp,
            MathFn::Ln => OpenclStd100Op::log,
            MathFn::Sin => OpenclStd100Op::sin,
            MathFn::Cos => OpenclStd100Op::cos,
            MathFn::Powf => OpenclStd100Op::pow,
            MathFn::MulAdd => OpenclStd100Op::fma,
            MathFn::Min => OpenclStd100Op::fmin,
            MathFn::Max => OpenclStd100Op::fmax,
            MathFn::Abs => OpenclStd100Op::fabs,
            MathFn::Floor => OpenclStd100Op::floor,
            MathFn::Ceil => OpenclStd100Op::ceil,
            MathFn::Tanh => OpenclStd100Op::tanh,
            MathFn::Rsqrt => OpenclStd100Op::rsqrt,
            MathFn::Erf => OpenclStd100Op::erf,
            MathFn::Exp2 => OpenclStd100Op::exp2,
            MathFn::Log2 => OpenclStd100Op::log2,
            MathFn::Log10 => OpenclStd100Op::log10,
            MathFn::Trunc => OpenclStd100Op::trunc,
            MathFn::Round => OpenclStd100Op::round,
            MathFn::Copysign => OpenclStd100Op::copysign,
            MathFn::Atan2 => OpenclStd100Op::atan2,
            MathFn::Hypot => OpenclStd100Op::hypot,
            _ => return Err(bad("an integer function on a float")),
        };
        call(self, op, a)
    }
}
