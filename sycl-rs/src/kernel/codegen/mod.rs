//! Code generation for `#[sycl::kernel]` programs: every device form is built here, at run
//! time, from the IR the macros encode for every kernel and helper (`sycl-kernel-ir`; a
//! helper is a separate macro invocation, so only the runtime sees a whole program).
//!
//! - [`Program`]: a definition's kernel and helpers, decoded and validated once
//!   (malformed words are `Errc::Build`, never a panic).
//! - [`c`]: CUDA C++ (for NVRTC) and OpenCL C, printed over the preludes.
//! - `spirv`: SPIR-V modules (Level Zero; OpenCL devices with IL support), with the `spirv`
//!   feature (which the `opencl` and `level-zero` features enable).
//!
//! Each back end reads the same validated [`Function`]s and decides its own code shapes from
//! their target-neutral facts; where a shape is tuned for one vendor's compiler, the back end
//! says so beside it, with the measurement.

pub(crate) mod c;
#[cfg(feature = "spirv")]
pub(crate) mod spirv;

/// The kernel's entry point in every built form (the C sources' kernel function too), with
/// every check.
pub(crate) const ENTRY: &str = "sycl_kernel";
/// A SPIR-V module's second entry point, without the checks that the run-time guards cover
/// (`Check::Guard`): the launch picks it when every guard holds (it evaluates them on the
/// host).
#[cfg(feature = "spirv")]
pub(crate) const ENTRY_GUARDED: &str = "sycl_kernel_guarded";

pub(crate) use sycl_kernel_ir::Bound;

/// Writes a built program (`bytes`) into the directory the environment variable `env` names,
/// if set, as `<stem>-<pid>-<n>.<extension>`: `SYCL_RS_SPIRV_DUMP` (SPIR-V modules, which CI
/// validates) and `SYCL_RS_SOURCE_DUMP` (C programs). A failure to write is logged: CI fails
/// on a dump with fewer modules than kernels built.
pub(crate) fn dump(env: &str, stem: &str, extension: &str, bytes: &[u8]) {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some(dir) = std::env::var_os(env) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let file = dir.join(format!(
        "{stem}-{}-{}.{extension}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, bytes)) {
        log::warn!("{env}: writing {}: {e}", file.display());
    }
}

use sycl_kernel_ir::validate::{validate_call, Role};
use sycl_kernel_ir::wire::WireError;
use sycl_kernel_ir::{Expr, ExprKind, Function};

use super::__rt::{Definition, HelperDef};
use crate::{Errc, Error, Result};

/// Where a helper's slice parameter's elements live: a slice (global memory), a work-group
/// local array or a work-item's private array passed whole (`ExprKind::ArrayArg`). OpenCL C
/// 1.2 has no generic pointers and SPIR-V's pointers carry a storage class, so a helper is
/// emitted once per combination its calls pass (CUDA's pointers are generic, but the
/// accessors differ, so it gets the same variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Space {
    Global,
    Local,
    Private,
}

/// The spaces a call passes for its callee's parameters (`caller`: the caller's own
/// parameters' spaces); scalars are `Global`, which nothing reads.
pub(crate) fn call_spaces(f: &Function, caller: &[Space], args: &[Expr]) -> Vec<Space> {
    args.iter()
        .map(|a| match a.kind {
            ExprKind::SliceArg(p) => caller.get(p).copied().unwrap_or(Space::Global),
            ExprKind::ArrayArg(l) if f.locals[l].is_private_array() => Space::Private,
            ExprKind::ArrayArg(_) => Space::Local,
            _ => Space::Global,
        })
        .collect()
}

/// A helper variant: the helper's index and its parameters' spaces.
pub(crate) type Variant = (usize, Vec<Space>);

/// Every helper variant the kernel's calls reach, callees' included, after one per helper
/// with every slice global (so that every helper is emitted, in order). `kernel` and
/// `helpers`: each function with the helper index of each of its call markers.
pub(crate) fn helper_variants(
    kernel: (&Function, &[usize]),
    helpers: &[(&Function, &[usize])],
) -> Vec<Variant> {
    let mut out: Vec<Variant> = helpers
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (i, vec![Space::Global; f.params.len()]))
        .collect();
    let calls_of = |f: &Function, calls: &[usize], spaces: &[Space]| {
        let mut found = Vec::new();
        let mut visit = |e: &Expr| {
            if let ExprKind::Call(k, args) = &e.kind {
                if let Some(&callee) = calls.get(*k) {
                    found.push((callee, call_spaces(f, spaces, args)));
                }
            }
        };
        sycl_kernel_ir::ir::visit_exprs(&f.body, &mut visit);
        if let Some(steps) = &f.steps {
            sycl_kernel_ir::ir::visit_step_exprs(steps, &mut visit);
        }
        found
    };
    let globals = vec![Space::Global; kernel.0.params.len()];
    let mut todo = calls_of(kernel.0, kernel.1, &globals);
    while let Some(v) = todo.pop() {
        if out.contains(&v) {
            continue;
        }
        if let Some((f, calls)) = helpers.get(v.0) {
            todo.extend(calls_of(f, calls, &v.1));
            out.push(v);
        }
    }
    out
}

/// A definition's kernel and its helpers (callees first), decoded and validated, each call
/// checked against its callee.
pub(crate) struct Program {
    /// The kernel.
    pub kernel: Function,
    /// For each helper call marker `k` of the kernel, the index of its helper in `helpers`.
    pub kernel_calls: Vec<usize>,
    /// The helpers and their own call maps.
    pub helpers: Vec<(Function, Vec<usize>)>,
}

impl Program {
    /// Decodes `def` and `helpers` (its resolved helpers, callees first); run it on
    /// [`on_deep_stack`].
    pub fn decode(def: &'static Definition, helpers: &[&'static HelperDef]) -> Result<Program> {
        let position = |h: &'static HelperDef| -> Result<usize> {
            helpers
                .iter()
                .position(|x| std::ptr::eq(*x, h))
                .ok_or_else(|| Error::new(Errc::Build, "a helper is missing from the program"))
        };
        let decoded_helpers = helpers
            .iter()
            .map(|h| {
                let f = decode(h.parts.ir, Role::Helper, h.parts.helpers.len())?;
                let calls = h
                    .parts
                    .helpers
                    .iter()
                    .map(|c| position(c()))
                    .collect::<Result<Vec<_>>>()?;
                Ok((f, calls))
            })
            .collect::<Result<Vec<_>>>()?;
        let p = &def.parts;
        let kernel = decode(p.ir, Role::Kernel, p.helpers.len())?;
        let kernel_calls = p
            .helpers
            .iter()
            .map(|c| position(c()))
            .collect::<Result<Vec<_>>>()?;
        // Every call passes its helper's parameter types and takes its result type.
        check_calls(&kernel, &kernel_calls, &decoded_helpers)?;
        for (f, calls) in &decoded_helpers {
            check_calls(f, calls, &decoded_helpers)?;
        }
        Ok(Program {
            kernel,
            kernel_calls,
            helpers: decoded_helpers,
        })
    }
}

/// The stack of the thread that reads kernel IR: decoding, validating and emitting recurse
/// once per nesting level, and at `wire::MAX_DEPTH` a debug build needs a few MB (more than
/// the 2 MiB a spawned thread has by default). Reserved, not committed, memory.
const IR_STACK: usize = 64 << 20;

/// Runs `f` (which reads kernel IR) on a thread with [`IR_STACK`]: once per program built,
/// beside a driver's build of milliseconds.
pub(crate) fn on_deep_stack<R: Send>(f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sycl-kernel-ir".into())
            .stack_size(IR_STACK)
            .spawn_scoped(s, f)
            .map_err(|e| Error::new(Errc::Runtime, format!("starting the kernel IR reader: {e}")))?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Decodes and validates the words of a kernel or helper that calls `helpers` others.
pub(crate) fn decode(words: &[u32], role: Role, helpers: usize) -> Result<Function> {
    let f = sycl_kernel_ir::wire::decode(words, helpers).map_err(malformed)?;
    sycl_kernel_ir::validate(&f, role).map_err(malformed)?;
    Ok(f)
}

/// Checks each call of `f` (to `calls[k]` of `helpers`) against its callee.
fn check_calls(f: &Function, calls: &[usize], helpers: &[(Function, Vec<usize>)]) -> Result<()> {
    let mut r = Ok(());
    let mut visit = |e: &sycl_kernel_ir::Expr| {
        if let (ExprKind::Call(k, args), Ok(())) = (&e.kind, &r) {
            let callee = &helpers[calls[*k]].0;
            r = validate_call(args, e.ty, &f.params, callee).map_err(malformed);
        }
    };
    sycl_kernel_ir::ir::visit_exprs(&f.body, &mut visit);
    if let Some(steps) = &f.steps {
        sycl_kernel_ir::ir::visit_step_exprs(steps, &mut visit);
    }
    r
}

/// The error of malformed kernel IR: a bug of the macro (or words that are not its).
pub(crate) fn malformed(e: WireError) -> Error {
    Error::new(
        Errc::Build,
        format!(
            "the encoded kernel IR is malformed ({e}): a bug of #[sycl::kernel], please report it"
        ),
    )
}
