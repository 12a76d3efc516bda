//! Launching kernels made by `#[sycl::kernel]`: the checks, the native CPU path, the
//! per-context cache of built GPU programs, and the status word through which a GPU
//! work-item reports a failed bounds check.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sycl_backend::{Aspect, EventStatus, LaunchRange, UsmKind};
use sycl_kernel_ir::{MemoryOrder, MemoryScope};

use super::__rt::{
    ArgInner, Args, CpuArg, CpuArgs, CpuEntry, Definition, DefinitionParts, ElemTy,
    GeneratedKernel, HelperDef, ParamSpec, Scalar, ScalarTy,
};
use super::codegen::{c, malformed, on_deep_stack, Bound, Program};
use super::{Kernel, KernelBundle, Range};
#[cfg(feature = "collective")]
use crate::usm::record::merge_uses;
use crate::usm::{MemoryRecord, Use};
use crate::{Context, Device, Errc, Error, Event, Queue, Result, Usm, UsmView};

const PRELUDE_CUDA: &str = include_str!("prelude_cuda.h");
const PRELUDE_OPENCL: &str = include_str!("prelude_opencl.h");
/// The index-bound helpers both dialects share (after either prelude, which defines the
/// function qualifier they use).
const PRELUDE_BOUNDS: &str = include_str!("prelude_bounds.h");

/// Submits a launch of `K` (what `Queue::parallel_for` does with a `#[sycl::kernel]` value).
pub fn submit<K: GeneratedKernel>(
    queue: &Queue,
    range: Range,
    deps: &[&Event],
    args: Args,
) -> Result<Event> {
    submit_definition(queue, range, deps, K::definition(), args)
}

/// Keeps a kernel argument's memory counted as viewed while a CPU kernel may access it, so no
/// view of another element width (mixed-size atomics) can start meanwhile.
pub(crate) struct ViewGuard(Arc<MemoryRecord>);

impl Drop for ViewGuard {
    fn drop(&mut self) {
        self.0.end_view();
    }
}

/// The helpers a definition needs, each once, callees first, whether any uses `f64`, the
/// native CPU form's run-time guard, and its C programs once printed.
struct Resolved {
    helpers: Vec<&'static HelperDef>,
    fp64: bool,
    /// The conditions under which the native CPU form drops the checks it proved under a
    /// run-time guard (`DefinitionParts::guard`); `None`: it has none.
    cpu_guard: Option<Vec<Bound>>,
    /// The CUDA C++ and OpenCL C functions, printed at the first launch that needs them.
    c: [OnceLock<Result<Arc<c::Printed>>>; 2],
    /// The last verdicts of `cpu_guard` and of each C dialect's guards.
    memos: [GuardMemo; 3],
}

/// The last verdict of a set of guards and the leaf values it was reached with: launches
/// that repeat a shape (the same ranges, lengths and scalars the guards read) reuse it
/// instead of evaluating the guards again (a team step's guards took 6 us per launch on the
/// H200 host). Sound because a guard is a pure function of its leaves (`Bound::eval`).
#[derive(Default)]
struct GuardMemo {
    /// The distinct leaves the guards read, in a fixed order.
    leaves: OnceLock<Vec<Bound>>,
    last: parking_lot::Mutex<Option<(Vec<Option<u64>>, bool)>>,
}

impl GuardMemo {
    /// The guards' verdict for these leaf values: the last one if the values repeat.
    fn verdict(
        &self,
        guards: &[Bound],
        leaf: &dyn Fn(&Bound) -> Option<u64>,
        evaluate: impl FnOnce() -> bool,
    ) -> bool {
        let leaves = self.leaves.get_or_init(|| {
            let mut found: Vec<Bound> = Vec::new();
            for g in guards {
                g.visit(&mut |b| {
                    let is_leaf = matches!(
                        b,
                        Bound::LocalRange(_)
                            | Bound::GroupRange(_)
                            | Bound::GlobalRange(_)
                            | Bound::Param(_)
                            | Bound::Len(_)
                            | Bound::Const(_)
                    );
                    if is_leaf && !found.contains(b) {
                        found.push(b.clone());
                    }
                });
            }
            found
        });
        let values: Vec<Option<u64>> = leaves.iter().map(leaf).collect();
        let mut last = self.last.lock();
        match &*last {
            Some((seen, verdict)) if *seen == values => *verdict,
            _ => {
                let verdict = evaluate();
                *last = Some((values, verdict));
                verdict
            }
        }
    }
}

impl Resolved {
    /// The functions of `def`'s program in the C dialect of `form` and the guards their
    /// `SYCL_GUARDED` form relies on, printed once from the validated IR.
    fn c_program(&self, def: &'static Definition, form: KernelIr) -> Result<Arc<c::Printed>> {
        let dialect = match form {
            KernelIr::CudaC => c::Dialect::Cuda,
            _ => c::Dialect::OpenCl,
        };
        self.c[dialect as usize]
            .get_or_init(|| {
                let helpers = &self.helpers;
                on_deep_stack(|| {
                    let program = Program::decode(def, helpers)?;
                    let names: Vec<&str> = helpers.iter().map(|h| h.parts.name).collect();
                    Ok(Arc::new(c::program(
                        &program,
                        def.parts.name,
                        &names,
                        def.parts.info.reduce_bytes,
                        dialect,
                    )))
                })
                .map_err(|e| {
                    Error::new(
                        e.code(),
                        format!("kernel `{}`: {}", def.parts.name, e.message()),
                    )
                })
            })
            .clone()
    }
}

fn resolve(def: &'static Definition) -> Result<&'static Resolved> {
    // One resolution per definition, for the life of the program (definitions are statics).
    static RESOLVED: OnceLock<Mutex<HashMap<usize, &'static Resolved>>> = OnceLock::new();
    let key = def as *const Definition as usize;
    let map = RESOLVED.get_or_init(Default::default);
    if let Some(r) = map.lock().get(&key) {
        return Ok(r);
    }
    let mut order: Vec<&'static HelperDef> = Vec::new();
    let mut on_path: Vec<&'static HelperDef> = Vec::new();
    fn visit(
        h: &'static HelperDef,
        order: &mut Vec<&'static HelperDef>,
        on_path: &mut Vec<&'static HelperDef>,
    ) -> Result<()> {
        if order.iter().any(|o| std::ptr::eq(*o, h)) {
            return Ok(());
        }
        if on_path.iter().any(|o| std::ptr::eq(*o, h)) {
            return Err(Error::new(
                Errc::Build,
                format!(
                    "kernel helper `{}` calls itself (directly or through others): recursion is not in the kernel language",
                    h.parts.name
                ),
            ));
        }
        on_path.push(h);
        for callee in h.parts.helpers {
            visit(callee(), order, on_path)?;
        }
        on_path.pop();
        order.push(h);
        Ok(())
    }
    for h in def.parts.helpers {
        visit(h(), &mut order, &mut on_path)?;
    }
    let fp64 = def.parts.info.fp64 || order.iter().any(|h| h.parts.fp64);
    let cpu_guard = decode_guard(def).map_err(|e| {
        Error::new(
            e.code(),
            format!("kernel `{}`: {}", def.parts.name, e.message()),
        )
    })?;
    let resolved: &'static Resolved = Box::leak(Box::new(Resolved {
        helpers: order,
        fp64,
        cpu_guard,
        c: Default::default(),
        memos: Default::default(),
    }));
    Ok(*map.lock().entry(key).or_insert(resolved))
}

/// `Errc::FeatureNotSupported` naming the memory orders and scopes the kernel's atomics and
/// fences use that the device lacks: never a silently weaker order.
fn check_memory_model(p: &DefinitionParts, device: &Device) -> Result<()> {
    let caps = device.info().atomic_caps;
    let orders: Vec<&str> = MemoryOrder::ALL
        .into_iter()
        .filter(|o| p.info.memory_orders & o.bit() & !caps.orders != 0)
        .map(MemoryOrder::sycl_name)
        .collect();
    let scopes: Vec<&str> = MemoryScope::ALL
        .into_iter()
        .filter(|s| p.info.memory_scopes & s.bit() & !caps.scopes != 0)
        .map(MemoryScope::sycl_name)
        .collect();
    if orders.is_empty() && scopes.is_empty() {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !orders.is_empty() {
        missing.push(format!("memory order {}", orders.join(", ")));
    }
    if !scopes.is_empty() {
        missing.push(format!("memory scope {}", scopes.join(", ")));
    }
    Err(Error::new(
        Errc::FeatureNotSupported,
        format!(
            "kernel `{}` uses atomics or fences of {}, which {} ({}) does not have",
            p.name,
            missing.join(" and "),
            device.name(),
            device.backend()
        ),
    ))
}

fn check_args(p: &DefinitionParts, args: &Args) -> Result<()> {
    let bad = |why: String| {
        Err(Error::new(
            Errc::KernelArgument,
            format!("kernel `{}`: {why}", p.name),
        ))
    };
    if args.0.len() != p.params.len() {
        return bad(format!(
            "{} arguments for {} parameters",
            args.0.len(),
            p.params.len()
        ));
    }
    for (i, (arg, param)) in args.0.iter().zip(p.params).enumerate() {
        let ok = match (&arg.0, param) {
            (ArgInner::Scalar { ty, .. }, ParamSpec::Scalar(want)) => ty == want,
            (
                ArgInner::Slice { elem, mutable, .. },
                ParamSpec::Slice {
                    elem: want,
                    mutable: want_mut,
                },
            ) => *elem == ElemTy::Scalar(*want) && mutable == want_mut,
            (
                ArgInner::Slice { elem, mutable, .. },
                ParamSpec::Structs {
                    size,
                    parts,
                    mutable: want_mut,
                },
            ) => {
                *elem
                    == ElemTy::Struct {
                        size: *size,
                        parts: *parts,
                    }
                    && mutable == want_mut
            }
            _ => false,
        };
        if !ok {
            return bad(format!("argument {i} does not match parameter {param:?}"));
        }
    }
    Ok(())
}

/// Refuses a written slice that overlaps another slice argument: the kernel language gives
/// `&mut [T]` parameters Rust's exclusivity, and the GPU code is compiled assuming it. Bytes
/// with a second name (two mappings of one physical memory object) overlap under either name.
fn check_aliasing(p: &DefinitionParts, args: &Args) -> Result<()> {
    struct Span {
        arg: usize,
        start: u64,
        end: u64,
        /// The same bytes as offsets into their backing object, where they have one.
        backing: Option<(usize, u64, u64)>,
        mutable: bool,
    }
    let spans: Vec<Span> = args
        .0
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match &a.0 {
            ArgInner::Slice {
                record,
                ptr,
                len,
                elem,
                mutable,
            } if *len > 0 => {
                let bytes = (*len * elem.size()) as u64;
                let backing = record.backing.map(|b| {
                    let start = b.offset + (*ptr - record.ptr);
                    (b.object, start, start + bytes)
                });
                Some(Span {
                    arg: i,
                    start: *ptr,
                    end: *ptr + bytes,
                    backing,
                    mutable: *mutable,
                })
            }
            _ => None,
        })
        .collect();
    for (n, a) in spans.iter().enumerate() {
        for b in &spans[n + 1..] {
            let by_address = a.start < b.end && b.start < a.end;
            let by_backing = match (a.backing, b.backing) {
                (Some((oa, sa, ea)), Some((ob, sb, eb))) => oa == ob && sa < eb && sb < ea,
                _ => false,
            };
            if (a.mutable || b.mutable) && (by_address || by_backing) {
                return Err(Error::new(
                    Errc::Invalid,
                    format!(
                        "kernel `{}`: arguments {} and {} overlap{}, and the kernel writes {}: a `&mut [T]` argument must not alias another slice argument",
                        p.name,
                        a.arg,
                        b.arg,
                        if by_address { "" } else { " (two mappings of the same physical memory)" },
                        if a.mutable { a.arg } else { b.arg }
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_range(p: &DefinitionParts, range: &Range, device: &Device) -> Result<()> {
    let launch = range.inner;
    launch.validate(device.max_work_group_size())?;
    if launch.dims < p.info.dims {
        return Err(Error::new(
            Errc::NdRange,
            format!(
                "kernel `{}` indexes {} dimensions; the range has {}",
                p.name, p.info.dims, launch.dims
            ),
        ));
    }
    let required = p.info.required_local;
    if required != [0; 3] && launch.local != Some(required) {
        return Err(Error::new(
            Errc::NdRange,
            format!(
                "kernel `{}` requires work-groups of {required:?} (its `reqd_work_group_size`); the range has {}",
                p.name,
                launch.local.map_or("none".to_string(), |l| format!("{l:?}"))
            ),
        ));
    }
    if launch.local.is_none() && (p.info.group || p.info.nd_queries) {
        return Err(Error::new(
            Errc::NdRange,
            format!(
                "kernel `{}` uses work-groups (local memory, barriers, group reductions or group queries): give the range a work-group size with `Range::with_local`",
                p.name
            ),
        ));
    }
    if let Some(local) = launch.local {
        let items = local.iter().product::<usize>() as u64;
        let need = p.info.local_bytes as u64 + items * p.info.reduce_bytes as u64;
        let have = device.local_mem_size();
        if have > 0 && need > have {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "kernel `{}` needs {need} bytes of work-group local memory with groups of {items}; the device has {have}",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

/// Submits a launch of `def` with `args` as `Queue::parallel_for` does (a generated
/// kernel's definition and arguments, taken apart).
pub(crate) fn submit_definition(
    queue: &Queue,
    range: Range,
    deps: &[&Event],
    def: &'static Definition,
    args: Args,
) -> Result<Event> {
    let resolved = check_definition(queue, &range, def, &args)?;
    let p = &def.parts;
    let uses = uses_of(&args);
    if range.inner.total() == Some(0) {
        // Nothing to run; still an event ordered after `deps`.
        for (record, _) in &uses {
            record.check_queue(queue)?;
        }
        return queue.barrier(deps);
    }
    if queue.device().has(Aspect::ExtSyclRsClosureKernels) {
        return submit_cpu(queue, range, deps, p, resolved, &args, &uses);
    }
    submit_gpu(queue, range, deps, def, resolved, &args, uses)
}

/// Every check of a launch of `def` on `queue` that does not depend on the moment: the
/// device's aspects, the arguments, the range, aliasing.
fn check_definition(
    queue: &Queue,
    range: &Range,
    def: &'static Definition,
    args: &Args,
) -> Result<&'static Resolved> {
    let p = &def.parts;
    let device = queue.device();
    // (The refusal's text is made only when the device lacks the aspect: launches are hot.)
    let require = |aspect: Aspect, what: &str| match device.has(aspect) {
        true => Ok(()),
        false => device.require(aspect, &format!("kernel `{}`{what}", p.name)),
    };
    require(Aspect::ExtSyclRsKernels, " (#[sycl::kernel])")?;
    check_args(p, args)?;
    let resolved = resolve(def)?;
    if resolved.fp64 {
        require(Aspect::Fp64, " (f64)")?;
    }
    if p.info.atomic64 {
        require(Aspect::Atomic64, " (64-bit atomics)")?;
    }
    if p.info.sub_groups {
        require(Aspect::ExtSyclRsSubGroups, " (sub-group operations)")?;
    }
    check_memory_model(p, device)?;
    check_range(p, range, device)?;
    check_aliasing(p, args)?;
    Ok(resolved)
}

/// The memory `args` reach and how: `&mut` slices written, `&` slices read.
fn uses_of(args: &Args) -> Vec<(&Arc<MemoryRecord>, Use)> {
    args.0
        .iter()
        .filter_map(|a| match &a.0 {
            ArgInner::Slice {
                record, mutable, ..
            } => Some((record, if *mutable { Use::Write } else { Use::Read })),
            ArgInner::Scalar { .. } => None,
        })
        .collect()
}

fn submit_cpu(
    queue: &Queue,
    range: Range,
    deps: &[&Event],
    p: &DefinitionParts,
    resolved: &Resolved,
    args: &Args,
    uses: &[(&Arc<MemoryRecord>, Use)],
) -> Result<Event> {
    let launch = range.inner;
    let local = launch.local.unwrap_or([1, 1, 1]);
    let groups = [
        launch.global[0] / local[0],
        launch.global[1] / local[1],
        launch.global[2] / local[2],
    ];
    // The guard is written for the C programs' view, in the GPU's dimension order; the native
    // kernel sees exactly this range and work-group size.
    let reversed = |v| gpu_order(v, launch.dims);
    let geometry = LaunchRange {
        dims: launch.dims,
        global: reversed(launch.global),
        local: Some(reversed(local)),
    };
    let guarded = resolved
        .cpu_guard
        .as_ref()
        .is_some_and(|g| guards_hold(g, Some(&resolved.memos[2]), args, &launch, &geometry));
    for (record, _) in uses {
        record.check_queue(queue)?;
    }
    let mut guards = Vec::new();
    let mut cpu_args = Vec::with_capacity(args.0.len());
    for arg in &args.0 {
        cpu_args.push(match &arg.0 {
            ArgInner::Scalar { bytes, ty } => CpuArg {
                scalar: *bytes,
                ty: ElemTy::Scalar(*ty),
                slice: None,
            },
            ArgInner::Slice {
                record,
                ptr,
                len,
                elem,
                mutable,
            } => {
                if *len > 0 {
                    // Every access of a CPU kernel is an atomic of the element's width.
                    record.begin_view(elem.view_parts())?;
                    guards.push(ViewGuard(record.clone()));
                }
                CpuArg {
                    scalar: [0; 8],
                    ty: *elem,
                    slice: Some((*ptr as usize, *len, *mutable)),
                }
            }
        });
    }
    let cpu = Arc::new(CpuArgs {
        args: cpu_args,
        dims: launch.dims,
        global: launch.global,
        local,
        groups,
        guarded,
        _guards: guards,
    });
    let raw_deps = Event::raw_list(deps);
    let name = p.name;
    queue.submit_using(uses, || match p.cpu {
        CpuEntry::Items(f) => {
            let kernel: sycl_backend::ClosureKernel =
                Arc::new(move |chunk| naming_failures(name, || f(&cpu, chunk)));
            queue.inner.parallel_for_closure(launch, kernel, &raw_deps)
        }
        CpuEntry::Groups(f) => {
            let count = groups[0] * groups[1] * groups[2];
            let kernel: sycl_backend::ClosureKernel =
                Arc::new(move |chunk| naming_failures(name, || f(&cpu, chunk)));
            queue
                .inner
                .parallel_for_work_groups(count, kernel, &raw_deps)
        }
        CpuEntry::Template => Err(sycl_backend::Error::new(
            Errc::Build,
            format!("kernel `{name}`: a const-generic template launched without its values"),
        )),
    })
}

/// Runs `body`; a panic (a failed bounds check or division) goes on with the kernel's name in
/// its message, which becomes the event's `Errc::Kernel` error; a `kernel_fail` goes on as
/// the error its code names (an `Error` payload, which the queue reports as it is).
fn naming_failures(name: &str, body: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        if let Some(sycl_backend::KernelFailCode(code)) = payload.downcast_ref() {
            let error = sycl_backend::kernel_failure(&format!("`{name}`"), *code);
            std::panic::resume_unwind(Box::new(error));
        }
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        std::panic::resume_unwind(Box::new(format!("kernel `{name}` failed: {what}")));
    }
}

/// `v`'s first `dims` entries reversed (SYCL's order to the GPU's), the rest 1.
pub(crate) fn gpu_order(v: [usize; 3], dims: u8) -> [usize; 3] {
    let n = dims as usize;
    let mut out = [1usize; 3];
    out[..n].copy_from_slice(&v[..n]);
    out[..n].reverse();
    out
}

/// Work-group sizes a plain 1-D range may get on a CPU device, largest first.
const CPU_GROUPS_1D: [usize; 3] = [4096, 1024, 256];

/// The work-group size of a plain 1-D range on a CPU device: the largest of
/// `CPU_GROUPS_1D` that still leaves 8 groups per compute unit (for balance). A CPU runtime
/// pays for every work-group it schedules: on Intel's CPU OpenCL runtime a saxpy whose range
/// check became per-group bounds ran 1.1-1.3x the time of the masked form in groups of 256,
/// and the two ran alike in groups of 4096 (spec/kernels.md, "Performance notes"). Three
/// sizes at most, because each is a program build.
fn cpu_group_1d(global: usize, device: &Device) -> usize {
    let units = device.max_compute_units().max(1) as usize;
    CPU_GROUPS_1D
        .into_iter()
        .find(|&l| global.div_ceil(l) >= 8 * units)
        .unwrap_or(CPU_GROUPS_1D[CPU_GROUPS_1D.len() - 1])
}

/// The GPU launch geometry: SYCL's last dimension varies fastest, which is CUDA's x and
/// OpenCL's dimension 0, so the dimensions are reversed. A plain range is rounded up to whole
/// work-groups (the kernel's range check drops the extra work-items).
pub(crate) fn gpu_range(launch: &LaunchRange, device: &Device) -> Result<LaunchRange> {
    let n = launch.dims as usize;
    let reversed = |v| gpu_order(v, launch.dims);
    let mut global = reversed(launch.global);
    let local = match launch.local {
        Some(l) => reversed(l),
        None => {
            let max = device.max_work_group_size().max(1);
            let items = device.max_work_item_sizes();
            let want: [usize; 3] = match n {
                1 if device.is_cpu() => [cpu_group_1d(global[0], device), 1, 1],
                1 => [256, 1, 1],
                2 => [16, 16, 1],
                _ => [8, 8, 4],
            };
            // A range smaller than a group gets the next power of two above it, not its own
            // size: each work-group size is a program build (`Variant`), and a kernel launched
            // over sizes 1..n should build a handful of programs, not n. At most half of such
            // a group's work-items are extra, and they leave before the body.
            let mut out = [1usize; 3];
            for d in 0..n {
                let cap = if items[d] > 0 { items[d] } else { want[d] };
                let fits = global[d]
                    .max(1)
                    .checked_next_power_of_two()
                    .unwrap_or(usize::MAX);
                out[d] = want[d].min(cap).min(fits).max(1);
            }
            while out.iter().product::<usize>() > max {
                let d = (0..3).max_by_key(|&d| out[d]).expect("three dimensions");
                out[d] = out[d].div_ceil(2);
            }
            for d in 0..n {
                global[d] = global[d].checked_next_multiple_of(out[d]).ok_or_else(|| {
                    Error::new(
                        Errc::NdRange,
                        "the range overflows when rounded to work-groups",
                    )
                })?;
            }
            out
        }
    };
    Ok(LaunchRange {
        dims: launch.dims,
        global,
        local: Some(local),
    })
}

fn submit_gpu(
    queue: &Queue,
    range: Range,
    deps: &[&Event],
    def: &'static Definition,
    resolved: &'static Resolved,
    args: &Args,
    uses: Vec<(&Arc<MemoryRecord>, Use)>,
) -> Result<Event> {
    let slot = queue.context().shared.kernels.status_slot(queue)?;
    let prepared = prepare_gpu(queue, range, def, resolved, args, slot.device_ptr(), None)?;
    launch_prepared(
        queue,
        deps,
        def.parts.name,
        &prepared,
        &prepared.args,
        uses,
        slot,
    )
}

/// Launches `prepared`'s kernel with `args` (its arguments, the status word the pointer into
/// `slot`) after `deps`, admitting `uses`, the memory the arguments reach.
fn launch_prepared(
    queue: &Queue,
    deps: &[&Event],
    name: &'static str,
    prepared: &PreparedGpu,
    args: &[RawArg],
    uses: Vec<(&Arc<MemoryRecord>, Use)>,
    slot: StatusSlot,
) -> Result<Event> {
    let raw: Vec<sycl_backend::KernelArg<'_>> = args.iter().map(RawArg::view).collect();
    launch_admitted(queue, deps, name, uses, slot, |all_deps| {
        // The arguments match the kernel's parameters (the source was generated from
        // the same definition that `check_args` checked them against: slices as pointer and
        // length, then the status word and the range); every pointer is the start of a live
        // range of its length whose record frees nothing before this command completed; the
        // generated code accesses a slice only below its length (checked indices, or the
        // caller's `unsafe` where it wrote `get_unchecked`), writes only `&mut` slices, which
        // `check_aliasing` kept apart from the others, and keeps to the launched range.
        // SAFETY: the launch contract of `Queue::launch`, met as the lines above say.
        unsafe {
            queue
                .inner
                .launch(&prepared.kernel.inner, prepared.geometry, &raw, all_deps)
        }
    })
}

/// Submits `launch` (given every dependency: `deps` and the status word's zeroing) admitting
/// `uses` and `slot`'s word, and attaches the status word to its event.
fn launch_admitted(
    queue: &Queue,
    deps: &[&Event],
    name: &'static str,
    uses: Vec<(&Arc<MemoryRecord>, Use)>,
    slot: StatusSlot,
    launch: impl FnOnce(&[Arc<dyn sycl_backend::Event>]) -> Result<Arc<dyn sycl_backend::Event>>,
) -> Result<Event> {
    let mut all_deps = Event::raw_list(deps);
    if let Some(zeroed) = slot.prepare(queue)? {
        all_deps.push(zeroed.inner.clone());
    }
    let slot_record = slot.record().clone();
    let mut uses: Vec<(&Arc<MemoryRecord>, Use)> = uses;
    uses.push((&slot_record, Use::Write));
    let mut event = queue.submit_using(&uses, || launch(&all_deps))?;
    drop(uses);
    slot.launched(event.inner.clone());
    event.kernel_status = Some(Arc::new(KernelStatus { name, slot }));
    Ok(event)
}

/// A backend argument that owns its bytes (scalars are at most 8 bytes).
#[derive(Clone, Copy)]
enum RawArg {
    Scalar([u8; 8], u8),
    Pointer(u64),
    Local(usize),
}

impl RawArg {
    fn view(&self) -> sycl_backend::KernelArg<'_> {
        match self {
            RawArg::Scalar(bytes, len) => sycl_backend::KernelArg::Scalar(&bytes[..*len as usize]),
            RawArg::Pointer(p) => sycl_backend::KernelArg::Pointer(*p),
            RawArg::Local(n) => sycl_backend::KernelArg::Local(*n),
        }
    }
}

/// A GPU launch resolved to the built kernel (the variant its guards allow), the geometry
/// and the backend's arguments (slices as pointer and length, then `status`, the status
/// word's address, and the range).
struct PreparedGpu {
    kernel: Kernel,
    geometry: LaunchRange,
    args: Vec<RawArg>,
    /// Where in `args` each of the definition's parameters starts, and the status word's
    /// pointer (what a kept launch sets anew).
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    params_at: Vec<usize>,
    #[cfg_attr(not(feature = "collective"), allow(dead_code))]
    status_at: usize,
}

/// `varying`: a scalar parameter whose value later launches change ([`KeptLaunch`]): no
/// variant whose run-time guards read it is chosen (they held for this value only).
fn prepare_gpu(
    queue: &Queue,
    range: Range,
    def: &'static Definition,
    resolved: &'static Resolved,
    args: &Args,
    status: u64,
    varying: Option<usize>,
) -> Result<PreparedGpu> {
    let fixed = |guards: &[Bound]| {
        let mut reads = false;
        if let Some(v) = varying {
            for g in guards {
                g.visit(&mut |b| reads |= matches!(b, Bound::Param(i) if *i == v));
            }
        }
        !reads
    };
    let p = &def.parts;
    let device = queue.device();
    let launch = range.inner;
    let geometry = gpu_range(&launch, device)?;
    let form = queue.context().shared.kernels.form_of(def, queue.context());
    // (SPIR-V modules carry both forms, as two entry points: below.)
    let guarded = match form {
        KernelIr::CudaC | KernelIr::OpenClC => {
            let printed = resolved.c_program(def, form)?;
            let memo = &resolved.memos[(form == KernelIr::CudaC) as usize];
            fixed(&printed.guards)
                && guards_hold(&printed.guards, Some(memo), args, &launch, &geometry)
        }
        _ => false,
    };
    let variant = Variant {
        dims: launch.dims,
        local: geometry.local.expect("a GPU launch has work-groups"),
        guarded,
    };
    let built = queue
        .context()
        .shared
        .kernels
        .kernel(queue.context(), def, resolved, variant)?;
    // A SPIR-V module's entry point without the checks its run-time guards cover, where they
    // all hold for this launch (the values the device would compute: ranges, scalar
    // parameters, slice lengths).
    let kernel = match &built.guarded {
        Some((guarded, guards))
            if fixed(guards) && guards_hold(guards, None, args, &launch, &geometry) =>
        {
            guarded
        }
        _ => &built.kernel,
    };
    let mut raw: Vec<RawArg> = Vec::with_capacity(args.0.len() * 2 + 5);
    let mut params_at = Vec::with_capacity(args.0.len());
    for arg in &args.0 {
        params_at.push(raw.len());
        match &arg.0 {
            ArgInner::Scalar { bytes, ty } => raw.push(RawArg::Scalar(*bytes, ty.size() as u8)),
            ArgInner::Slice { ptr, len, .. } => {
                raw.push(RawArg::Pointer(*ptr));
                raw.push(RawArg::Scalar((*len as u64).to_ne_bytes(), 8));
            }
        }
    }
    let status_at = raw.len();
    raw.push(RawArg::Pointer(status));
    for d in 0..3 {
        raw.push(RawArg::Scalar((launch.global[d] as u64).to_ne_bytes(), 8));
    }
    // (The SPIR-V form takes the same parameter, unused, so that both forms take the same
    // arguments.)
    if p.info.reduce_bytes > 0 && (form == KernelIr::OpenClC || form == KernelIr::SpirV) {
        let items: usize = geometry
            .local
            .expect("a GPU launch has groups")
            .iter()
            .product();
        raw.push(RawArg::Local(items * 8));
    }
    Ok(PreparedGpu {
        kernel: kernel.clone(),
        geometry,
        args: raw,
        params_at,
        status_at,
    })
}

// ---- kept launches

/// A GPU launch checked and prepared once, then launched again and again with new values of
/// some scalar parameters ([`KeptLaunch::launch`]): the kernels of a team's repeated eager
/// operation, which skip the checks, the variant choice and the argument packing that a
/// `parallel_for` repeats (most of a small collective's host time on CUDA). It holds the
/// memory its arguments reach weakly: memory whose owner dropped it is freed as usual, and
/// then the launch is gone (`launch` answers `None`), never run on freed memory. The
/// private memory `keep` was given it neither holds nor admits: its owner keeps it.
#[cfg(feature = "collective")]
pub(crate) struct KeptLaunch {
    name: &'static str,
    prepared: PreparedGpu,
    /// The backend's packing of `prepared` (`None`: the backend packs every launch).
    packed: Option<Arc<dyn sycl_backend::PackedLaunch>>,
    /// The queue it launches on, the one it was kept for.
    queue: Queue,
    /// Where its status words come from (the queue's device's pool).
    status: Arc<Mutex<StatusPool>>,
    uses: Vec<(std::sync::Weak<MemoryRecord>, Use)>,
    /// Where in the prepared arguments the varying parameter's 8 bytes lie.
    varying_at: Option<usize>,
}

#[cfg(feature = "collective")]
impl std::fmt::Debug for KeptLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptLaunch")
            .field("kernel", &self.name)
            .finish()
    }
}

/// Checks a launch of `def` over `range` with `args` as `Queue::parallel_for` does and
/// keeps it (`None` where launches are not kept: CPU devices, which run closures, and empty
/// ranges). `varying`: the one scalar parameter later launches may set anew. `private`: the
/// records (`Arc::as_ptr` addresses) its launches neither admit nor track, nor keep alive.
///
/// # Safety
/// The memory of the `private` records stays allocated until every launch of the kept launch
/// completed, and while one may run no host borrow of it exists and its access mode does not
/// change (memory of one owner that waits for its queue before freeing it, and hands out no
/// range of it: a team's own buffers).
#[cfg(feature = "collective")]
pub(crate) unsafe fn keep(
    queue: &Queue,
    range: Range,
    def: &'static Definition,
    args: &Args,
    varying: Option<usize>,
    private: &[usize],
) -> Result<Option<KeptLaunch>> {
    let resolved = check_definition(queue, &range, def, args)?;
    if range.inner.total() == Some(0) || queue.device().has(Aspect::ExtSyclRsClosureKernels) {
        return Ok(None);
    }
    // (Only an 8-byte scalar varies.)
    let varying = varying.filter(|&v| {
        matches!(args.0.get(v).map(|a| &a.0), Some(ArgInner::Scalar { ty, .. }) if ty.size() == 8)
    });
    // (Each record once, with its strongest use: a repeat upgrades and admits each once.)
    let mut uses = merge_uses(&uses_of(args));
    for (record, _) in &uses {
        record.check_queue(queue)?;
    }
    uses.retain(|(r, _)| !private.contains(&(Arc::as_ptr(r) as usize)));
    // (The status word is set per launch.)
    let prepared = prepare_gpu(queue, range, def, resolved, args, 0, varying)?;
    let raw: Vec<sycl_backend::KernelArg<'_>> = prepared.args.iter().map(RawArg::view).collect();
    let packed = queue
        .inner
        .pack_launch(&prepared.kernel.inner, prepared.geometry, &raw)?;
    drop(raw);
    Ok(Some(KeptLaunch {
        name: def.parts.name,
        varying_at: varying.map(|v| prepared.params_at[v]),
        packed,
        status: queue.context().shared.kernels.status_pool(queue),
        queue: queue.clone(),
        prepared,
        uses: uses.iter().map(|(r, u)| (Arc::downgrade(r), *u)).collect(),
    }))
}

#[cfg(feature = "collective")]
impl KeptLaunch {
    /// The varying parameter's value at the first launch (`None`: it has none).
    pub(crate) fn varying(&self) -> Option<u64> {
        match self.prepared.args.get(self.varying_at?)? {
            RawArg::Scalar(bytes, 8) => Some(u64::from_ne_bytes(*bytes)),
            _ => None,
        }
    }

    fn without_varying(&self) -> Error {
        Error::invalid(format!(
            "kernel `{}`: kept without a varying 8-byte parameter",
            self.name
        ))
    }

    /// Whether every record its arguments reach is still alive.
    pub(crate) fn alive(&self) -> bool {
        self.uses.iter().all(|(r, _)| r.strong_count() > 0)
    }

    /// Launches it again on the queue it was kept for after `deps`, its varying parameter set
    /// to `varying` where given (it has one: `varying()`); `None` when memory it reaches was
    /// freed (but the private memory, which `keep`'s caller keeps). The arguments are those
    /// checked when it was kept, but for the varying one, which no run-time guard of the
    /// kernel chosen then reads.
    pub(crate) fn launch(&self, varying: Option<u64>, deps: &[&Event]) -> Option<Result<Event>> {
        let queue = &self.queue;
        let records: Vec<(Arc<MemoryRecord>, Use)> = self
            .uses
            .iter()
            .map(|(r, u)| r.upgrade().map(|r| (r, *u)))
            .collect::<Option<_>>()?;
        Some((|| {
            let slot = StatusPool::take(&self.status, queue)?;
            let uses = records.iter().map(|(r, u)| (r, *u)).collect();
            if let Some(packed) = &self.packed {
                let status = (self.prepared.status_at, slot.device_ptr());
                let varying = match (varying, self.varying_at) {
                    (Some(value), Some(at)) => Some((at, value)),
                    (None, _) => None,
                    (Some(_), None) => return Err(self.without_varying()),
                };
                let patches: &[(usize, u64)] = match varying {
                    Some(v) => &[status, v],
                    None => &[status],
                };
                return launch_admitted(queue, deps, self.name, uses, slot, |all_deps| {
                    // The packed arguments are those `keep` checked as `launch_prepared`'s
                    // SAFETY comment says, and its records are alive (`records`, and the
                    // private ones by `keep`'s contract, which also keeps their host borrows
                    // and access mode out of the way while this runs); the patches
                    // set the status word to this launch's slot (admitted with them) and the
                    // varying scalar, which no run-time guard of the kernel chosen reads.
                    // SAFETY: the launch contract of `Queue::launch_packed`, met so.
                    unsafe { queue.inner.launch_packed(&**packed, patches, all_deps) }
                });
            }
            let mut args = self.prepared.args.clone();
            args[self.prepared.status_at] = RawArg::Pointer(slot.device_ptr());
            if let Some(value) = varying {
                match self.varying_at.and_then(|at| args.get_mut(at)) {
                    Some(RawArg::Scalar(bytes, 8)) => *bytes = value.to_ne_bytes(),
                    _ => return Err(self.without_varying()),
                }
            }
            launch_prepared(queue, deps, self.name, &self.prepared, &args, uses, slot)
        })())
    }
}

// ---- graphs

/// A launch of a `#[sycl::kernel]` definition, checked when recorded and kept for the replays
/// of a [`LaunchGraph`].
#[cfg(feature = "collective")]
pub(crate) struct RecordedLaunch {
    def: &'static Definition,
    range: Range,
    args: Args,
}

/// Records a launch of `def` (a generated kernel's definition, `K::definition()`) over
/// `range` with `args`: checked now as `Queue::parallel_for` checks a launch (the same
/// errors), run by the graph it goes into. The arguments keep their memory alive.
#[cfg(feature = "collective")]
pub(crate) fn record(
    queue: &Queue,
    range: Range,
    def: &'static Definition,
    args: Args,
) -> Result<RecordedLaunch> {
    check_definition(queue, &range, def, &args)?;
    for (record, _) in uses_of(&args) {
        record.check_queue(queue)?;
    }
    Ok(RecordedLaunch { def, range, args })
}

/// The definition of a generated kernel's launch value.
#[cfg(feature = "collective")]
pub(crate) fn definition_of<K: GeneratedKernel>(_: &K) -> &'static Definition {
    K::definition()
}

/// Recorded launches replayed together, in order: as one backend graph where the backend has
/// them (CUDA: one `cuGraphLaunch`), else launched one after another.
#[cfg(feature = "collective")]
pub(crate) struct LaunchGraph {
    queue: Queue,
    launches: Vec<RecordedLaunch>,
    /// The backend's graph and the status word all its launches report through. The word is
    /// zeroed once: a failure is reported by that replay and every later one.
    backend: Option<(Arc<dyn sycl_backend::Graph>, Arc<KernelStatus>)>,
    /// The memory the launches use, each record once at its strongest use (admitted by
    /// every replay of the backend's graph; found once, when built).
    uses: Vec<(Arc<MemoryRecord>, Use)>,
}

#[cfg(feature = "collective")]
impl std::fmt::Debug for LaunchGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchGraph")
            .field("launches", &self.launches.len())
            .field("backend_graph", &self.backend.is_some())
            .finish()
    }
}

#[cfg(feature = "collective")]
impl LaunchGraph {
    /// The graph of `launches` (recorded for `queue`).
    pub(crate) fn build(queue: &Queue, launches: Vec<RecordedLaunch>) -> Result<LaunchGraph> {
        let cpu = queue.device().has(Aspect::ExtSyclRsClosureKernels);
        let empty = launches.iter().any(|l| l.range.inner.total() == Some(0));
        let mut uses: Vec<(Arc<MemoryRecord>, Use)> = Vec::new();
        for l in &launches {
            for (record, how) in uses_of(&l.args) {
                match uses.iter_mut().find(|(r, _)| Arc::ptr_eq(r, record)) {
                    Some(entry) if how == Use::Write => entry.1 = Use::Write,
                    Some(_) => {}
                    None => uses.push((record.clone(), how)),
                }
            }
        }
        let mut graph = LaunchGraph {
            queue: queue.clone(),
            launches,
            backend: None,
            uses,
        };
        if cpu || empty || graph.launches.is_empty() {
            return Ok(graph);
        }
        let slot = queue.context().shared.kernels.status_slot(queue)?;
        if let Some(zeroed) = slot.prepare(queue)? {
            zeroed.wait()?;
        }
        let prepared = graph
            .launches
            .iter()
            .map(|l| {
                let resolved = resolve(l.def)?;
                prepare_gpu(
                    queue,
                    l.range,
                    l.def,
                    resolved,
                    &l.args,
                    slot.device_ptr(),
                    None,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let raw: Vec<Vec<sycl_backend::KernelArg<'_>>> = prepared
            .iter()
            .map(|p| p.args.iter().map(RawArg::view).collect())
            .collect();
        let nodes: Vec<sycl_backend::GraphLaunch<'_>> = prepared
            .iter()
            .zip(&raw)
            .map(|(p, args)| sycl_backend::GraphLaunch {
                kernel: &p.kernel.inner,
                range: p.geometry,
                args,
            })
            .collect();
        // Each launch's arguments match its kernel and reach only its live ranges, as in
        // `submit_gpu` (the same preparation); the recorded arguments keep that memory alive
        // for the graph's life, and every replay admits it (`launch`).
        // SAFETY: the launch contract of `Queue::launch` for every replay, met as above.
        match unsafe { queue.inner.build_graph(&nodes) } {
            Ok(g) => {
                let name = graph.launches[0].def.parts.name;
                graph.backend = Some((g, Arc::new(KernelStatus { name, slot })));
                Ok(graph)
            }
            Err(e) if e.code() == Errc::FeatureNotSupported => Ok(graph),
            Err(e) => Err(e),
        }
    }

    /// One replay after `deps`: first `patch`'s word (a `u64` of device memory that only this
    /// queue touches) set to its value (the low 32 bits; the kernels read those alone), then
    /// every launch in order. Its memory is admitted as one command's.
    pub(crate) fn launch(
        &self,
        patch: Option<(&crate::UsmRange<u64>, u32)>,
        deps: &[&Event],
    ) -> Result<Event> {
        let queue = &self.queue;
        let Some((graph, status)) = &self.backend else {
            let mut last: Option<Event> = None;
            if let Some((word, value)) = patch {
                last = Some(queue.fill(word, value as u64, deps)?);
            }
            // On the native CPU each launch holds views of its memory until it completed, and
            // launches of another element width may not start meanwhile (mixed-size
            // atomics): there the replay waits for each launch before the next.
            let cpu = queue.device().has(Aspect::ExtSyclRsClosureKernels);
            for l in &self.launches {
                if let (true, Some(e)) = (cpu, &last) {
                    e.wait()?;
                }
                let after: Vec<&Event> = match &last {
                    Some(e) => vec![e],
                    None => deps.to_vec(),
                };
                last = Some(submit_definition(
                    queue,
                    l.range,
                    &after,
                    l.def,
                    l.args.clone(),
                )?);
            }
            return match last {
                Some(e) => Ok(e),
                None => queue.barrier(deps),
            };
        };
        let mut uses: Vec<(&Arc<MemoryRecord>, Use)> =
            self.uses.iter().map(|(r, how)| (r, *how)).collect();
        uses.push((status.slot.record(), Use::Write));
        let raw_patch = match patch {
            Some((word, value)) => {
                if word.is_empty() {
                    return Err(Error::invalid("a graph's patch word is an empty range"));
                }
                uses.push((&word.record, Use::Write));
                Some((word.as_ptr(), value))
            }
            None => None,
        };
        let raw_deps = Event::raw_list(deps);
        let mut event = queue.submit_using(&uses, || {
            // The graph's launches were prepared as `submit_gpu` prepares one (see `build`);
            // their memory is admitted here as this command's, and `patch`'s word is this
            // queue's device memory (its record passed `check_queue` in `submit_using`).
            // SAFETY: the contract of `Queue::launch_graph`, met as the lines above say.
            unsafe { queue.inner.launch_graph(graph, raw_patch, &raw_deps) }
        })?;
        status.slot.launched(event.inner.clone());
        event.kernel_status = Some(status.clone());
        Ok(event)
    }
}

/// The definition's native CPU guards (`None`: it has none), decoded and validated against
/// its parameters.
fn decode_guard(def: &'static Definition) -> Result<Option<Vec<Bound>>> {
    if def.parts.guard.is_empty() {
        return Ok(None);
    }
    let params: Vec<sycl_kernel_ir::Param> = def
        .parts
        .params
        .iter()
        .map(|p| match *p {
            ParamSpec::Scalar(t) => sycl_kernel_ir::Param::Scalar(t),
            ParamSpec::Slice { elem, mutable } => sycl_kernel_ir::Param::Slice { elem, mutable },
            ParamSpec::Structs { size, mutable, .. } => {
                sycl_kernel_ir::Param::Structs { size, mutable }
            }
        })
        .collect();
    // (Bounds nest at most `wire::MAX_DEPTH` levels of small frames: no thread of its own.)
    let guards =
        sycl_kernel_ir::wire::decode_guards(def.parts.guard, params.len()).map_err(malformed)?;
    sycl_kernel_ir::validate::validate_guards(&guards, &params).map_err(malformed)?;
    Ok(Some(guards))
}

/// A leaf of a run-time bounds guard for this launch: the device's values.
fn guard_leaf(
    leaf: &Bound,
    launch: &LaunchRange,
    geometry: &LaunchRange,
    args: &Args,
) -> Option<u64> {
    let axis = |d: u8| (launch.dims.checked_sub(1)?.checked_sub(d)).map(usize::from);
    let local = geometry.local?;
    match *leaf {
        Bound::LocalRange(d) => Some(local[axis(d)?] as u64),
        Bound::GroupRange(d) => {
            let a = axis(d)?;
            Some((geometry.global[a] / local[a]) as u64)
        }
        Bound::GlobalRange(d) => Some(*launch.global.get(d as usize)? as u64),
        Bound::Param(i) => match &args.0.get(i)?.0 {
            ArgInner::Scalar { bytes, ty } => match ty {
                ScalarTy::U32 => Some(u32::from_arg(*bytes).into()),
                ScalarTy::U64 | ScalarTy::Usize => Some(u64::from_arg(*bytes)),
                _ => None,
            },
            ArgInner::Slice { .. } => None,
        },
        Bound::Len(i) => match &args.0.get(i)?.0 {
            ArgInner::Slice { len, .. } => Some(*len as u64),
            ArgInner::Scalar { .. } => None,
        },
        _ => None,
    }
}

// ---- the per-context cache

/// Built programs and status words of one context.
/// A program's cache entry: locked while it builds, so a kernel builds once.
type ProgramSlot = Arc<Mutex<Option<Built>>>;

/// A built program's kernel, and for SPIR-V modules with run-time bounds guards the entry
/// point without the checks they cover, with the guards.
#[derive(Clone)]
struct Built {
    kernel: Kernel,
    guarded: Option<(Kernel, Arc<Vec<Bound>>)>,
}

pub(crate) struct KernelCache {
    /// By definition address and variant.
    programs: Mutex<HashMap<(usize, Variant), ProgramSlot>>,
    pools: Mutex<HashMap<usize, Arc<Mutex<StatusPool>>>>,
    /// The form its GPU programs take.
    ir: KernelIr,
    /// Every form the context's devices take (its backend's list).
    forms: Vec<KernelIr>,
}

/// The form of `#[sycl::kernel]` programs on a context: Rust (native CPU), CUDA C++
/// (NVRTC), OpenCL C (the driver's compiler) or SPIR-V (built by sycl-rs). Each backend says
/// which forms its devices take.
pub use sycl_backend::KernelIr;

/// The environment variable that picks the IR of OpenCL contexts: `spirv` or `opencl_c`.
pub const KERNEL_IR_ENV: &str = "SYCL_RS_KERNEL_IR";

impl KernelCache {
    /// The cache of a new context (`raw`, the backend's), whose kernel form is decided here
    /// from the forms the backend says its devices take (`Context::kernel_forms`, preferred
    /// first): `want` where given and taken; else the preferred one, unless
    /// `SYCL_RS_KERNEL_IR` names another the context takes (`spirv` or `opencl_c`: it is
    /// read where OpenCL C is among the forms, as on OpenCL).
    pub(crate) fn new(
        raw: &dyn sycl_backend::Context,
        want: Option<KernelIr>,
    ) -> Result<KernelCache> {
        let mut forms = raw.kernel_forms();
        // (Without the `spirv` feature no SPIR-V is built: such devices take OpenCL C.)
        forms.retain(|f| cfg!(feature = "spirv") || *f != KernelIr::SpirV);
        let Some(&preferred) = forms.first() else {
            return Err(Error::new(
                Errc::FeatureNotSupported,
                format!(
                    "the {} backend builds no #[sycl::kernel] programs",
                    raw.backend()
                ),
            ));
        };
        let ir = match want {
            Some(ir) if forms.contains(&ir) => ir,
            Some(ir) => {
                return Err(Error::new(
                    Errc::FeatureNotSupported,
                    format!(
                        "#[sycl::kernel] programs cannot take the form {ir:?} on this context's devices ({}: {forms:?})",
                        raw.backend()
                    ),
                ))
            }
            None if !forms.contains(&KernelIr::OpenClC) => preferred,
            None => match std::env::var(KERNEL_IR_ENV).ok().as_deref() {
                None | Some("") => preferred,
                Some("opencl_c") => KernelIr::OpenClC,
                Some("spirv") if forms.contains(&KernelIr::SpirV) => KernelIr::SpirV,
                Some("spirv") => {
                    log::info!(
                        "{KERNEL_IR_ENV}=spirv: a device of the context takes no SPIR-V; its kernels use {preferred:?}"
                    );
                    preferred
                }
                Some(other) => {
                    return Err(Error::new(
                        Errc::Invalid,
                        format!("{KERNEL_IR_ENV}={other}: the values are `spirv` and `opencl_c`"),
                    ))
                }
            },
        };
        Ok(KernelCache {
            programs: Default::default(),
            pools: Default::default(),
            ir,
            forms,
        })
    }

    /// The form of its programs.
    pub(crate) fn ir(&self) -> KernelIr {
        self.ir
    }

    /// The form of `def`'s programs on `context`: the context's, except that the SPIR-V form
    /// of sub-group permutations needs `SPV_INTEL_subgroups`: where a device lacks it (on
    /// OpenCL, `cl_intel_spirv_subgroups`) and the context also takes OpenCL C, such kernels
    /// are built from OpenCL C, which reaches sub-groups through `cl_khr_subgroups` too.
    /// (Level Zero devices with sub-groups have it: launches on devices without sub-groups
    /// are refused before.)
    fn form_of(&self, def: &Definition, context: &Context) -> KernelIr {
        let shuffles = || {
            context
                .devices()
                .iter()
                .all(|d| d.info().spirv_sub_group_shuffle)
        };
        match self.ir {
            KernelIr::SpirV
                if def.parts.info.sub_groups
                    && self.forms.contains(&KernelIr::OpenClC)
                    && !shuffles() =>
            {
                KernelIr::OpenClC
            }
            ir => ir,
        }
    }
}

/// What a GPU program is specialised for: the number of dimensions (SYCL's last is the GPU's
/// first), the work-group size in GPU order, which becomes a compile-time constant (group
/// loops unroll, `local_id` is known to be below it, so checked local-array indices often need
/// no check at run time), and whether the definition's run-time guard held for the launch
/// (`SYCL_GUARDED`: the checks it covers go).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    dims: u8,
    local: [usize; 3],
    guarded: bool,
}

/// Writes a C program under `SYCL_RS_SOURCE_DUMP`, if set, as the driver gets it, named by
/// kernel, variant (dimensions, work-group size, `g1` where the launch's guards held) and
/// process: what ran, to read or to build elsewhere (`SYCL_RS_SPIRV_DUMP` is SPIR-V's).
fn dump_source(name: &str, variant: Variant, extension: &str, source: &str) {
    let [x, y, z] = variant.local;
    let stem = format!(
        "{name}-d{}-{x}x{y}x{z}-g{}",
        variant.dims, variant.guarded as u8
    );
    super::codegen::dump("SYCL_RS_SOURCE_DUMP", &stem, extension, source.as_bytes());
}

/// Whether every condition of a kernel's guard holds for this launch (never with
/// `SYCL_RS_KERNEL_GUARDS=0`, which keeps every check the guards would drop, to compare),
/// evaluated as the device would (`Bound::eval`, the preludes' saturating `u64`
/// arithmetic); a value the launch cannot supply makes it false. `memo`: the guards' memo,
/// for guards that live as long as it (those of the leaked `Resolved`).
fn guards_hold(
    guards: &[Bound],
    memo: Option<&GuardMemo>,
    args: &Args,
    launch: &LaunchRange,
    geometry: &LaunchRange,
) -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    if *DISABLED.get_or_init(|| std::env::var_os("SYCL_RS_KERNEL_GUARDS").is_some_and(|v| v == "0"))
    {
        return false;
    }
    if guards.is_empty() {
        return false;
    }
    let leaf = |leaf: &Bound| guard_leaf(leaf, launch, geometry, args);
    let evaluate = || guards.iter().all(|g| g.eval(&leaf) == Some(1));
    match memo {
        Some(memo) => memo.verdict(guards, &leaf, evaluate),
        None => evaluate(),
    }
}

/// The full source of a program: the variant's definitions, the preludes, then the
/// functions `codegen::c` printed (helpers callees first, the kernel).
fn program_source(
    def: &'static Definition,
    resolved: &Resolved,
    variant: Variant,
    form: KernelIr,
) -> Result<String> {
    let p = &def.parts;
    let printed = resolved.c_program(def, form)?;
    let [lx, ly, lz] = variant.local;
    let mut src = format!(
        "#define SYCL_DIMS {}\n#define SYCL_LX {lx}\n#define SYCL_LY {ly}\n#define SYCL_LZ {lz}\n",
        variant.dims
    );
    // The printed program's guards held for the launches this program is for (`Variant`).
    src.push_str(if variant.guarded {
        "#define SYCL_GUARDED 1\n"
    } else {
        "#define SYCL_GUARDED 0\n"
    });
    if resolved.fp64 {
        src.push_str("#define SYCL_FP64 1\n");
    }
    if p.info.atomic64 {
        src.push_str("#define SYCL_ATOMIC64 1\n");
    }
    if p.info.sub_groups {
        src.push_str("#define SYCL_SUB_GROUPS 1\n");
    }
    if printed.orders_memory {
        src.push_str("#define SYCL_ORDERED_ATOMICS 1\n");
    }
    src.push_str(if form == KernelIr::CudaC {
        PRELUDE_CUDA
    } else {
        PRELUDE_OPENCL
    });
    src.push_str(PRELUDE_BOUNDS);
    src.push('\n');
    src.push_str(&printed.text);
    Ok(src)
}

impl KernelCache {
    /// The kernel of `def` for launches like `variant`, built at the first such launch in this
    /// context and kept for its life.
    fn kernel(
        &self,
        context: &Context,
        def: &'static Definition,
        resolved: &'static Resolved,
        variant: Variant,
    ) -> Result<Built> {
        let key = (def as *const Definition as usize, variant);
        let entry = self.programs.lock().entry(key).or_default().clone();
        let mut slot = entry.lock();
        if let Some(k) = &*slot {
            return Ok(k.clone());
        }
        let form = self.form_of(def, context);
        let mut options = context.raw().kernel_build_options(form).to_owned();
        if form == KernelIr::OpenClC {
            let devices = context.devices();
            // Ordered atomics are OpenCL C 2.0's (the launch checked the devices have them);
            // group collectives use its work-group built-ins where every device's compiler
            // has them (elsewhere the prelude works in local scratch).
            let wants_2 = resolved.c_program(def, form)?.orders_memory
                || (def.parts.info.reduce_bytes > 0
                    && devices
                        .iter()
                        .all(|d| d.info().opencl_c_work_group_collectives));
            if wants_2 {
                let v3 = devices.iter().all(|d| d.version().starts_with("OpenCL 3"));
                options.push_str(if v3 {
                    " -cl-std=CL3.0"
                } else {
                    " -cl-std=CL2.0"
                });
            }
        }
        let src;
        #[cfg(feature = "spirv")]
        let mut il = None;
        let source = match form {
            #[cfg(feature = "spirv")]
            KernelIr::SpirV => {
                let target = super::codegen::spirv::Target {
                    dims: variant.dims,
                    local: variant.local,
                };
                il = Some(super::codegen::spirv::module(
                    def,
                    &resolved.helpers,
                    &target,
                )?);
                let bytes = &il.as_ref().expect("just built").bytes;
                sycl_backend::KernelSource::SpirV(bytes)
            }
            #[cfg(not(feature = "spirv"))]
            KernelIr::SpirV => {
                return Err(Error::new(
                    Errc::FeatureNotSupported,
                    "#[sycl::kernel] programs as SPIR-V need sycl-rs's `spirv` feature",
                ))
            }
            KernelIr::CudaC => {
                src = program_source(def, resolved, variant, form)?;
                dump_source(def.parts.name, variant, "cu", &src);
                sycl_backend::KernelSource::CudaC(&src)
            }
            KernelIr::OpenClC => {
                src = program_source(def, resolved, variant, form)?;
                dump_source(def.parts.name, variant, "cl", &src);
                sycl_backend::KernelSource::OpenClC(&src)
            }
            KernelIr::Rust => {
                return Err(Error::new(
                    Errc::Runtime,
                    "the Rust form of a kernel is compiled with the program, never built",
                ))
            }
        };
        let bundle = KernelBundle::build(context, &[], source, &options).map_err(|e| {
            Error::new(
                e.code(),
                format!(
                    "building kernel `{}` (a bug of #[sycl::kernel]: please report it): {e}",
                    def.parts.name
                ),
            )
        })?;
        let kernel = bundle.kernel(super::codegen::ENTRY)?;
        #[cfg(feature = "spirv")]
        let guarded = match il {
            Some(m) if !m.guards.is_empty() => Some((
                bundle.kernel(super::codegen::ENTRY_GUARDED)?,
                Arc::new(m.guards),
            )),
            _ => None,
        };
        #[cfg(not(feature = "spirv"))]
        let guarded = None;
        let built = Built { kernel, guarded };
        *slot = Some(built.clone());
        Ok(built)
    }

    fn status_slot(&self, queue: &Queue) -> Result<StatusSlot> {
        StatusPool::take(&self.status_pool(queue), queue)
    }

    /// The status words of `queue`'s device.
    fn status_pool(&self, queue: &Queue) -> Arc<Mutex<StatusPool>> {
        let key = queue.device().index_in_platform();
        self.pools.lock().entry(key).or_default().clone()
    }
}

// ---- status words

const SLOTS_PER_CHUNK: usize = 1024;

struct Chunk {
    usm: Usm<u32>,
    /// For memory the host can access.
    view: Option<UsmView<u32>>,
}

#[derive(Default)]
struct StatusPool {
    chunks: Vec<Arc<Chunk>>,
    free: Vec<(usize, usize)>,
    /// Slots whose launch may still write them.
    retired: Vec<(usize, usize, Arc<dyn sycl_backend::Event>)>,
}

impl StatusPool {
    fn take(pool: &Arc<Mutex<StatusPool>>, queue: &Queue) -> Result<StatusSlot> {
        let mut p = pool.lock();
        if p.free.is_empty() && !p.retired.is_empty() {
            let retired = std::mem::take(&mut p.retired);
            for (c, i, event) in retired {
                if matches!(event.status(), Ok(EventStatus::Complete) | Err(_)) {
                    p.free.push((c, i));
                } else {
                    p.retired.push((c, i, event));
                }
            }
        }
        if p.free.is_empty() {
            let device = queue.device();
            let kind = if device.has(Aspect::UsmHostAllocations) {
                UsmKind::Host
            } else if device.has(Aspect::UsmSharedAllocations) {
                UsmKind::Shared
            } else {
                UsmKind::Device
            };
            let usm = Usm::<u32>::alloc(kind, SLOTS_PER_CHUNK, device, queue.context())?;
            let view = if usm.is_host_accessible() {
                Some(usm.view()?)
            } else {
                None
            };
            let c = p.chunks.len();
            p.chunks.push(Arc::new(Chunk { usm, view }));
            p.free.extend((0..SLOTS_PER_CHUNK).rev().map(|i| (c, i)));
        }
        let (c, index) = p.free.pop().expect("refilled above");
        Ok(StatusSlot {
            chunk: p.chunks[c].clone(),
            chunk_index: c,
            index,
            pool: pool.clone(),
            event: Mutex::new(None),
            queue: queue.clone(),
        })
    }
}

struct StatusSlot {
    chunk: Arc<Chunk>,
    chunk_index: usize,
    index: usize,
    pool: Arc<Mutex<StatusPool>>,
    /// The last launch that may write it (a graph's slot serves every replay; the queue is
    /// in order, so the last one completing means all did).
    event: Mutex<Option<Arc<dyn sycl_backend::Event>>>,
    queue: Queue,
}

impl StatusSlot {
    fn device_ptr(&self) -> u64 {
        self.chunk.usm.as_ptr() + (self.index * 4) as u64
    }

    fn record(&self) -> &Arc<MemoryRecord> {
        &self.chunk.usm.record
    }

    /// Zeroes the word: directly where the host can, else by a command that the launch then
    /// depends on.
    fn prepare(&self, queue: &Queue) -> Result<Option<Event>> {
        match &self.chunk.view {
            Some(view) => {
                view.set(self.index, 0);
                Ok(None)
            }
            None => {
                let range = self.chunk.usm.range(self.index..self.index + 1)?;
                queue.fill(&range, 0u32, &[]).map(Some)
            }
        }
    }

    fn launched(&self, event: Arc<dyn sycl_backend::Event>) {
        *self.event.lock() = Some(event);
    }

    /// The failure code the kernel left (after it completed).
    fn read(&self) -> Result<u32> {
        match &self.chunk.view {
            Some(view) => Ok(view.get(self.index)),
            None => {
                let range = self.chunk.usm.range(self.index..self.index + 1)?;
                let mut out = [0u32];
                self.queue.read(&range, &mut out)?;
                Ok(out[0])
            }
        }
    }
}

impl Drop for StatusSlot {
    fn drop(&mut self) {
        let mut pool = self.pool.lock();
        match self.event.get_mut().take() {
            Some(event) => pool.retired.push((self.chunk_index, self.index, event)),
            None => pool.free.push((self.chunk_index, self.index)),
        }
    }
}

/// The failure report of one GPU launch, checked when its event is waited for.
pub(crate) struct KernelStatus {
    name: &'static str,
    slot: StatusSlot,
}

impl KernelStatus {
    /// `Errc::Kernel` when a work-item failed (call after the launch completed).
    pub(crate) fn check(&self) -> Result<()> {
        match self.slot.read()? {
            0 => Ok(()),
            code => Err(sycl_backend::kernel_failure(
                &format!("`{}`", self.name),
                code,
            )),
        }
    }
}

impl std::fmt::Debug for KernelStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelStatus")
            .field("kernel", &self.name)
            .finish()
    }
}

/// The variant of launches over `range`, an nd-range (programs depend on the work-group
/// size).
fn variant_of(range: Range, what: &str) -> Result<Variant> {
    let launch = range.inner;
    let Some(local) = launch.local else {
        return Err(Error::new(
            Errc::NdRange,
            format!("{what} needs an nd-range (the program depends on the work-group size)"),
        ));
    };
    let n = launch.dims as usize;
    let mut gpu_local = [1usize; 3];
    gpu_local[..n].copy_from_slice(&local[..n]);
    gpu_local[..n].reverse();
    Ok(Variant {
        dims: launch.dims,
        local: gpu_local,
        guarded: false,
    })
}

/// The full CUDA C++ or OpenCL C program of kernel `K` for launches over `range` (an nd-range:
/// the program is specialised for its work-group size), as the runtime builds it (for tests and
/// for reading what the macro made): the form launches get when the definition's guard holds.
pub fn program_source_of<K: GeneratedKernel>(form: KernelIr, range: Range) -> Result<String> {
    let def = K::definition();
    let resolved = resolve(def)?;
    match form {
        KernelIr::CudaC | KernelIr::OpenClC => {
            let variant = Variant {
                guarded: !resolved.c_program(def, form)?.guards.is_empty(),
                ..variant_of(range, "program_source_of")?
            };
            program_source(def, resolved, variant, form)
        }
        other => Err(Error::new(
            Errc::FeatureNotSupported,
            format!("#[sycl::kernel] makes no C source for the form {other:?}"),
        )),
    }
}

/// The SPIR-V module (bytes) of kernel `K` for launches over `range` (an nd-range), as the
/// runtime builds it for Level Zero and OpenCL devices with IL support (for validation tests
/// and tools; needs no device). With the `spirv` feature.
#[cfg(feature = "spirv")]
pub fn spirv_of<K: GeneratedKernel>(range: Range) -> Result<Vec<u8>> {
    let def = K::definition();
    let resolved = resolve(def)?;
    let variant = variant_of(range, "spirv_of")?;
    let target = super::codegen::spirv::Target {
        dims: variant.dims,
        local: variant.local,
    };
    super::codegen::spirv::module(def, &resolved.helpers, &target).map(|m| m.bytes)
}
