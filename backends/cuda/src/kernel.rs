//! Kernel bundles and launches.
//!
//! Sources:
//! * CUDA C++ ([`KernelSource::CudaC`]) is compiled by NVRTC to a **cubin** for each device's
//!   compute capability (`-arch=sm_XY`, unless the options name an architecture), so a PTX
//!   version newer than the driver can never be the problem. Kernels must be declared
//!   `extern "C" __global__` so that their names are not mangled; the bundle looks kernels up
//!   by those plain names. A compile error is `Errc::Build` carrying the NVRTC log.
//! * PTX text is JIT-compiled by the driver (`cuModuleLoadDataEx` with an error-log buffer;
//!   errors are `Errc::Build` with the log). Build options are not passed to the JIT.
//! * cubin/fatbin images are loaded as they are.
//!
//! Launch geometry: work-item dimension 0 is CUDA's `x`, 1 is `y`, 2 is `z`. With a local
//! range the grid is exactly `global / local`. Without one the backend picks, per dimension,
//! the largest block extent up to 256 (1-D), 16x16 (2-D) or 8x8x4 (3-D) that **divides** the
//! global extent (as Unified Runtime's CUDA adapter does), so the grid is exactly
//! `global / block` and a kernel sees exactly the range it was given, as on OpenCL and the
//! native CPU device. A global extent without small divisors (a large prime) gets small
//! blocks: slow but exact; give an nd-range for speed.
//!
//! Arguments: `Scalar` bytes and `Pointer` values become kernel parameters in order. `Local`
//! arguments are not parameters: CUDA has one dynamic shared-memory buffer
//! (`extern __shared__`), whose size is the sum of all `Local` sizes; a kernel with several
//! local arrays indexes into that one buffer itself. Where the driver reports parameter info
//! (`cuFuncGetParamInfo`, CUDA 12.4+), the count and sizes are checked
//! (`Errc::KernelArgument`).

use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use sycl_backend::{
    Aspect, BackendKind, Errc, Error, KernelArg, KernelSource, LaunchRange, Result,
};

use crate::context::{Context, PrimaryContext};
use crate::device::Device;
use crate::queue::Queue;
use crate::result;

/// A module loaded in one device's context.
struct Module {
    ctx: Arc<PrimaryContext>,
    raw: sys::CUmodule,
}

// SAFETY: module handles may be used from any thread with their context current.
unsafe impl Send for Module {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        let _current = self
            .ctx
            .make_current()
            .map_err(|e| log::debug!("unloading a CUDA module: {e}"))
            .ok();
        // SAFETY: every kernel holds the bundle (and so this module) alive, so nothing uses
        // the module after this.
        if let Err(e) = unsafe { result::module::unload(self.raw) } {
            log::warn!("{e}");
        }
    }
}

struct BundleInner {
    /// One module per device: (device ordinal, module).
    modules: Vec<(i32, Module)>,
    names: Vec<String>,
}

/// A built kernel bundle (`cuda::KernelBundle`).
pub struct KernelBundle {
    inner: Arc<BundleInner>,
}

impl std::fmt::Debug for KernelBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::KernelBundle")
            .field("kernels", &self.inner.names)
            .finish()
    }
}

/// A kernel of a bundle (`cuda::Kernel`).
pub struct Kernel {
    _bundle: Arc<BundleInner>,
    name: String,
    /// (device ordinal, function, the most threads a block of it may have there where the
    /// driver says: read once, not at each launch).
    funcs: Vec<(i32, sys::CUfunction, Option<u32>)>,
    /// Parameter sizes, where the driver can tell.
    params: Option<Vec<usize>>,
}

// SAFETY: function handles may be used from any thread with their context current; the
// bundle keeps their modules loaded.
unsafe impl Send for Kernel {}
// SAFETY: as above; the handles are only read.
unsafe impl Sync for Kernel {}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Kernel")
            .field("name", &self.name)
            .finish()
    }
}

/// The `.entry` names of a PTX text.
fn ptx_entries(ptx: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in ptx.lines() {
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if w == ".entry" {
                if let Some(n) = words.next() {
                    let n: String = n
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                        .collect();
                    if !n.is_empty() {
                        names.push(n);
                    }
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Compiles CUDA C++ `source` with NVRTC to a cubin for `device`'s compute capability
/// (`-arch=sm_XY` unless `options` names an architecture). The result can be cached and later
/// loaded with [`KernelSource::Cubin`] without NVRTC. `Errc::Build` with the NVRTC log on a
/// compile error; `Errc::FeatureNotSupported` when NVRTC is not installed.
pub fn compile_cubin(
    source: &str,
    device: &Arc<dyn sycl_backend::Device>,
    options: &str,
) -> Result<Vec<u8>> {
    let dev = sycl_backend::downcast::<Device>(device.as_any(), "device", BackendKind::Cuda)?;
    let opts: Vec<String> = options.split_whitespace().map(str::to_string).collect();
    result::nvrtc::compile_cubin(source, dev.caps.cc, &opts)
}

/// The driver takes binary images without a length, so a truncated or foreign image would
/// make it read past the buffer: accept only an ELF64 cubin whose header tables lie inside
/// the bytes, or a fatbin whose declared size does.
fn check_image(b: &[u8]) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::new(
            Errc::Build,
            format!("not a cubin or fatbin image: {why}"),
        ))
    };
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    };
    let len = b.len() as u64;
    if b.len() >= 64 && b.starts_with(b"\x7fELF") {
        if b[4] != 2 {
            return bad("not a 64-bit ELF file");
        }
        let ph_end = u64_at(32).saturating_add(u16_at(54).saturating_mul(u16_at(56)));
        let sh_end = u64_at(40).saturating_add(u16_at(58).saturating_mul(u16_at(60)));
        if ph_end > len || sh_end > len {
            return bad("its header tables lie past the end of the data (truncated?)");
        }
        return Ok(());
    }
    if b.len() >= 16 && b.starts_with(&0xBA55_ED50u32.to_le_bytes()) {
        let end = u16_at(6).saturating_add(u64_at(8));
        if end > len {
            return bad("the fatbin is truncated");
        }
        return Ok(());
    }
    bad("unknown format (expected ELF or fatbin magic)")
}

pub(crate) fn build(
    ctx: &Context,
    devices: &[Arc<dyn sycl_backend::Device>],
    source: &KernelSource<'_>,
    options: &str,
) -> Result<Arc<dyn sycl_backend::KernelBundle>> {
    if devices.is_empty() {
        return Err(Error::invalid("a kernel bundle needs at least one device"));
    }
    let opts: Vec<String> = options.split_whitespace().map(str::to_string).collect();
    let mut cubins: HashMap<(i32, i32), Vec<u8>> = HashMap::new();
    let mut modules = Vec::new();
    let mut ptx_names = None;
    for d in devices {
        let index = ctx.device_index(d)?;
        let dev: &Arc<Device> = &ctx.cuda_devices[index];
        let image: Vec<u8> = match source {
            KernelSource::CudaC(src) => {
                let cc = dev.caps.cc;
                if let Some(c) = cubins.get(&cc) {
                    c.clone()
                } else {
                    let c = result::nvrtc::compile_cubin(src, cc, &opts)?;
                    cubins.insert(cc, c.clone());
                    c
                }
            }
            KernelSource::Ptx(text) => {
                ptx_names = Some(ptx_entries(text));
                let mut v = text.as_bytes().to_vec();
                if v.contains(&0) {
                    return Err(Error::new(Errc::Build, "PTX text contains a NUL byte"));
                }
                v.push(0);
                v
            }
            KernelSource::Cubin(bytes) => {
                check_image(bytes)?;
                bytes.to_vec()
            }
            KernelSource::OpenClC(_) => {
                return Err(Error::unsupported(
                    Aspect::ExtOneapiKernelCompilerOpencl,
                    "OpenCL C kernel bundles",
                ))
            }
            KernelSource::SpirV(_) => {
                return Err(Error::unsupported(
                    Aspect::ExtOneapiKernelCompilerSpirv,
                    "SPIR-V kernel bundles",
                ))
            }
        };
        let (pctx, _current) = ctx.with_ctx(index)?;
        let pctx = pctx.clone();
        let raw = result::module::load(&image, source.language())?;
        modules.push((dev.ordinal, Module { ctx: pctx, raw }));
    }
    let names = result::module::function_names(modules[0].1.raw)
        .or(ptx_names)
        .unwrap_or_default();
    Ok(Arc::new(KernelBundle {
        inner: Arc::new(BundleInner { modules, names }),
    }))
}

impl sycl_backend::KernelBundle for KernelBundle {
    fn kernel_names(&self) -> Vec<String> {
        self.inner.names.clone()
    }

    #[doc(alias = "cuModuleGetFunction")]
    fn kernel(&self, name: &str) -> Result<Arc<dyn sycl_backend::Kernel>> {
        let mut funcs = Vec::new();
        for (ordinal, m) in &self.inner.modules {
            let _current = m.ctx.make_current()?;
            let f = result::module::function(m.raw, name)?;
            funcs.push((*ordinal, f, result::module::max_threads_per_block(f)));
        }
        let params = result::module::param_sizes(funcs[0].1);
        Ok(Arc::new(Kernel {
            _bundle: self.inner.clone(),
            name: name.to_string(),
            funcs,
            params,
        }))
    }
}

impl sycl_backend::Kernel for Kernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn num_args(&self) -> Option<u32> {
        self.params.as_ref().map(|p| p.len() as u32)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The CUDA block and grid for `range` on `dev`.
pub(crate) fn geometry(range: &LaunchRange, dev: &Device) -> Result<([u32; 3], [u32; 3])> {
    let max_wg = sycl_backend::Device::info(dev).max_work_group_size;
    range.validate(max_wg)?;
    let dims = range.dims as usize;
    let mut global = range.global;
    for g in global.iter_mut().skip(dims) {
        *g = 1;
    }
    if global.contains(&0) {
        return Err(Error::new(
            Errc::NdRange,
            format!("global range {global:?} has an empty dimension"),
        ));
    }
    let limits = sycl_backend::Device::info(dev).max_work_item_sizes;
    let block: [usize; 3] = match range.local {
        Some(l) => l,
        None => {
            let pick: [usize; 3] = match dims {
                1 => [256, 1, 1],
                2 => [16, 16, 1],
                _ => [8, 8, 4],
            };
            let mut block = [1usize; 3];
            for d in 0..3 {
                block[d] =
                    exact_block(global[d], pick[d], limits[d], dev.caps.max_grid[d] as usize)?;
            }
            let items = block.iter().product::<usize>();
            if items > max_wg {
                return Err(Error::new(
                    Errc::NdRange,
                    format!(
                        "global range {global:?} needs work-groups of {block:?} to fit the grid; \
                         that exceeds the device's {max_wg} work-items: give an nd-range"
                    ),
                ));
            }
            block
        }
    };
    let mut grid = [1u32; 3];
    for d in 0..3 {
        if block[d] > limits[d] {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "work-group extent {} in dimension {d} exceeds the device maximum {}",
                    block[d], limits[d]
                ),
            ));
        }
        let g = global[d].div_ceil(block[d]);
        if g > dev.caps.max_grid[d] as usize {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "{g} work-groups in dimension {d} exceed the device maximum {}",
                    dev.caps.max_grid[d]
                ),
            ));
        }
        grid[d] = g as u32;
    }
    Ok((grid, [block[0] as u32, block[1] as u32, block[2] as u32]))
}

/// The block extent for a global extent `global` without a local range: the largest divisor
/// of `global` up to `pick`, or, when that many blocks exceed the grid limit, the smallest
/// divisor that fits the grid (up to the device's `limit` per block).
fn exact_block(global: usize, pick: usize, limit: usize, max_grid: usize) -> Result<usize> {
    let small = (1..=pick.min(global).max(1))
        .rev()
        .find(|b| global % b == 0)
        .unwrap_or(1);
    if global / small <= max_grid.max(1) {
        return Ok(small);
    }
    let need = global.div_ceil(max_grid.max(1));
    (need..=limit.min(global))
        .find(|b| global % b == 0)
        .ok_or_else(|| {
            Error::new(
                Errc::NdRange,
                format!(
                    "global extent {global} has no divisor between {need} and {limit}, so no \
                     exact grid of at most {max_grid} blocks covers it: give an nd-range"
                ),
            )
        })
}

/// [`sycl_backend::Queue::launch`] for CUDA queues.
///
/// # Safety
/// As [`sycl_backend::Queue::launch`].
pub(crate) unsafe fn launch(
    queue: &Queue,
    kernel: &Arc<dyn sycl_backend::Kernel>,
    range: LaunchRange,
    args: &[KernelArg<'_>],
    deps: &[Arc<dyn sycl_backend::Event>],
) -> Result<Arc<dyn sycl_backend::Event>> {
    let mut packed = pack(queue, kernel, range, args)?;
    let mut words = std::mem::take(&mut packed.words);
    // SAFETY: forwarded contract.
    unsafe { launch_words(queue, &packed, &mut words, deps) }
}

/// Launches `packed`'s function with `words` (its words, patched) after `deps`.
///
/// # Safety
/// As [`sycl_backend::Queue::launch`], for the arguments `words` holds.
unsafe fn launch_words(
    queue: &Queue,
    packed: &Packed,
    words: &mut [u64],
    deps: &[Arc<dyn sycl_backend::Event>],
) -> Result<Arc<dyn sycl_backend::Event>> {
    let mut ptrs = value_pointers(words, &packed.values);
    let (func, grid, block, shared) = (packed.func, packed.grid, packed.block, packed.shared);
    queue.enqueue(deps, |s| {
        let params = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        };
        // SAFETY: one pointer per parameter, each to a value of the parameter's size (checked
        // in `pack` where the driver reports sizes); the caller guarantees what the kernel
        // does with pointer arguments.
        unsafe { result::module::launch(func, grid, block, shared, s, params) }
    })
}

/// A launch packed once and launched again ([`sycl_backend::Queue::pack_launch`]).
pub(crate) struct PackedLaunch {
    packed: Packed,
    /// The device it was packed for (its function is that device's).
    ordinal: i32,
    /// Keeps the function's module loaded.
    _kernel: Arc<dyn sycl_backend::Kernel>,
}

// SAFETY: a CUfunction is a driver handle usable from any thread once its context is current
// (`Queue::enqueue` makes it current); `_kernel` keeps its module loaded, and the packed words
// are only read.
unsafe impl Send for PackedLaunch {}
// SAFETY: as for Send: `&PackedLaunch` only reads the handle and the words.
unsafe impl Sync for PackedLaunch {}

impl sycl_backend::PackedLaunch for PackedLaunch {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// [`sycl_backend::Queue::pack_launch`] for CUDA queues.
pub(crate) fn pack_launch(
    queue: &Queue,
    kernel: &Arc<dyn sycl_backend::Kernel>,
    range: LaunchRange,
    args: &[KernelArg<'_>],
) -> Result<Arc<dyn sycl_backend::PackedLaunch>> {
    Ok(Arc::new(PackedLaunch {
        packed: pack(queue, kernel, range, args)?,
        ordinal: queue.dev.ordinal,
        _kernel: kernel.clone(),
    }))
}

/// [`sycl_backend::Queue::launch_packed`] for CUDA queues.
///
/// # Safety
/// As [`sycl_backend::Queue::launch_packed`].
pub(crate) unsafe fn launch_packed(
    queue: &Queue,
    packed: &dyn sycl_backend::PackedLaunch,
    patches: &[(usize, u64)],
    deps: &[Arc<dyn sycl_backend::Event>],
) -> Result<Arc<dyn sycl_backend::Event>> {
    let p = sycl_backend::downcast::<PackedLaunch>(
        packed.as_any(),
        "packed launch",
        BackendKind::Cuda,
    )?;
    if p.ordinal != queue.dev.ordinal {
        return Err(Error::invalid(format!(
            "a launch packed for CUDA device {} cannot run on a queue of device {}",
            p.ordinal, queue.dev.ordinal
        )));
    }
    let mut words = p.packed.words.clone();
    for &(arg, value) in patches {
        match p
            .packed
            .of_arg
            .get(arg)
            .copied()
            .flatten()
            .map(|v| p.packed.values[v])
        {
            Some((at, 8)) => words[at] = value,
            _ => {
                return Err(Error::new(
                    Errc::KernelArgument,
                    format!("argument {arg} of a packed launch is not an 8-byte value"),
                ))
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe { launch_words(queue, &p.packed, &mut words, deps) }
}

/// A launch's function, geometry and parameter values, checked against the kernel.
pub(crate) struct Packed {
    func: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    /// Every value in 8-byte aligned slots (a launch passes dozens: one allocation, not one
    /// each).
    words: Vec<u64>,
    /// Each value's first word and byte length.
    values: Vec<(usize, usize)>,
    /// Each argument's value (`None`: local memory, not a parameter).
    of_arg: Vec<Option<usize>>,
}

impl Packed {
    /// One pointer per parameter into `words`, as `cuLaunchKernel` takes them: valid while
    /// `self` is alive and unchanged (the driver copies the values during the call).
    fn pointers(&mut self) -> Vec<*mut c_void> {
        value_pointers(&mut self.words, &self.values)
    }
}

/// One pointer per value into `words` (a packed launch's words, maybe patched).
fn value_pointers(words: &mut [u64], values: &[(usize, usize)]) -> Vec<*mut c_void> {
    let words = words.as_mut_ptr_range();
    values
        .iter()
        .map(|v| {
            // SAFETY: each value's first word lies inside its launch's words (built by
            // `pack`; patched copies keep the length), checked here in debug builds.
            let p = unsafe { words.start.add(v.0) };
            debug_assert!(p < words.end);
            p.cast()
        })
        .collect()
}

/// Checks and packs a launch of `kernel` on `queue` (its function for the queue's device, the
/// grid and block, the argument count and sizes where the driver reports them).
fn pack(
    queue: &Queue,
    kernel: &Arc<dyn sycl_backend::Kernel>,
    range: LaunchRange,
    args: &[KernelArg<'_>],
) -> Result<Packed> {
    let k = sycl_backend::downcast::<Kernel>(kernel.as_any(), "kernel", BackendKind::Cuda)?;
    let (func, max_threads) = k
        .funcs
        .iter()
        .find(|(o, ..)| *o == queue.dev.ordinal)
        .map(|(_, f, max)| (*f, *max))
        .ok_or_else(|| {
            Error::invalid(format!(
                "kernel `{}` was not built for this queue's device",
                k.name
            ))
        })?;
    let (grid, block) = geometry(&range, &queue.dev)?;
    // A group the function cannot run (too many registers or too much shared memory per
    // thread for its size) is the caller's range, not a kernel failure.
    let threads = block.iter().map(|&b| b as u64).product::<u64>();
    if let Some(max) = max_threads {
        if threads > max as u64 {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "kernel `{}` runs at most {max} work-items per group on this device (its registers and shared memory bound it); the launch asks for {threads}",
                    k.name
                ),
            ));
        }
    }

    let mut words: Vec<u64> = Vec::with_capacity(args.len());
    let mut values: Vec<(usize, usize)> = Vec::with_capacity(args.len());
    let mut of_arg = Vec::with_capacity(args.len());
    let mut shared = 0usize;
    for a in args {
        let value: &[u8] = match a {
            KernelArg::Scalar(b) => b,
            KernelArg::Pointer(p) => &p.to_le_bytes(),
            KernelArg::Local(n) => {
                shared = shared.saturating_add(*n);
                of_arg.push(None);
                continue;
            }
        };
        of_arg.push(Some(values.len()));
        let at = words.len();
        for chunk in value.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            words.push(u64::from_ne_bytes(w));
        }
        if value.is_empty() {
            words.push(0);
        }
        values.push((at, value.len()));
    }
    if let Some(sizes) = &k.params {
        if sizes.len() != values.len() {
            return Err(Error::new(
                Errc::KernelArgument,
                format!(
                    "kernel `{}` takes {} parameters but {} were given (local-memory arguments are not parameters)",
                    k.name,
                    sizes.len(),
                    values.len()
                ),
            ));
        }
        for (i, (v, &s)) in values.iter().map(|v| v.1).zip(sizes).enumerate() {
            if v != s {
                return Err(Error::new(
                    Errc::KernelArgument,
                    format!(
                        "argument {i} of kernel `{}` has {} bytes, the parameter has {s}",
                        k.name, v
                    ),
                ));
            }
        }
    }
    let shared = u32::try_from(shared).map_err(|_| {
        Error::new(
            Errc::KernelArgument,
            format!("{shared} bytes of local memory is too much"),
        )
    })?;
    Ok(Packed {
        func,
        grid,
        block,
        shared,
        words,
        values,
        of_arg,
    })
}

/// An instantiated CUDA graph of kernel launches ([`sycl_backend::Queue::build_graph`]).
pub(crate) struct Graph {
    exec: sys::CUgraphExec,
    ctx: Arc<crate::context::PrimaryContext>,
    launches: usize,
}

// SAFETY: a CUgraphExec is a driver handle usable from any thread once its context is current
// (every use below makes it current); the driver serialises launches of one graph.
unsafe impl Send for Graph {}
// SAFETY: as for Send: `&Graph` only launches it, which the driver allows from many threads.
unsafe impl Sync for Graph {}

impl sycl_backend::Graph for Graph {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn launches(&self) -> usize {
        self.launches
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let Ok(_current) = self.ctx.make_current() {
            // SAFETY: ours, destroyed once; a replay still running is released by the driver
            // when it completes.
            unsafe { result::graph::destroy(self.exec) };
        }
    }
}

/// [`sycl_backend::Queue::build_graph`] for CUDA queues: each launch packed as
/// [`launch`] packs it, the nodes chained in order.
///
/// # Safety
/// As [`sycl_backend::Queue::build_graph`].
pub(crate) unsafe fn build_graph(
    queue: &Queue,
    launches: &[sycl_backend::GraphLaunch<'_>],
) -> Result<Arc<dyn sycl_backend::Graph>> {
    let mut packed = launches
        .iter()
        .map(|l| pack(queue, l.kernel, l.range, l.args))
        .collect::<Result<Vec<_>>>()?;
    let mut pointers: Vec<Vec<*mut c_void>> = packed.iter_mut().map(Packed::pointers).collect();
    let nodes: Vec<result::graph::KernelNode> = packed
        .iter()
        .zip(pointers.iter_mut())
        .map(|(p, ptrs)| result::graph::KernelNode {
            func: p.func,
            grid: p.grid,
            block: p.block,
            shared: p.shared,
            params: if ptrs.is_empty() {
                std::ptr::null_mut()
            } else {
                ptrs.as_mut_ptr()
            },
        })
        .collect();
    let _current = queue.ctx.make_current()?;
    // SAFETY: the context is current; each node's pointers point into its `Packed`, alive
    // here (the driver copies the values while adding the node); what the kernels touch is the
    // caller's contract (# Safety).
    let exec = unsafe { result::graph::build(&nodes)? };
    Ok(Arc::new(Graph {
        exec,
        ctx: queue.ctx.clone(),
        launches: launches.len(),
    }))
}

/// [`sycl_backend::Queue::launch_graph`] for CUDA queues.
///
/// # Safety
/// As [`sycl_backend::Queue::launch_graph`].
pub(crate) unsafe fn launch_graph(
    queue: &Queue,
    graph: &Arc<dyn sycl_backend::Graph>,
    patch: Option<(u64, u32)>,
    deps: &[Arc<dyn sycl_backend::Event>],
) -> Result<Arc<dyn sycl_backend::Event>> {
    let g = sycl_backend::downcast::<Graph>(graph.as_any(), "graph", BackendKind::Cuda)?;
    if !Arc::ptr_eq(&g.ctx, &queue.ctx) {
        return Err(Error::invalid(
            "the graph was built for another device's context than this queue's",
        ));
    }
    if let Some((ptr, _)) = patch {
        if ptr % 4 != 0 {
            return Err(Error::invalid(
                "a graph's patch word must be 4-byte aligned",
            ));
        }
    }
    queue.enqueue(deps, |s| {
        if let Some((ptr, value)) = patch {
            // SAFETY: the caller guarantees the word is this device's memory that nothing
            // else accesses meanwhile; 4-aligned (checked above).
            unsafe { result::mem::set_async(ptr, value, 4, 1, s)? };
        }
        // SAFETY: `g.exec` is live and of this stream's context (checked above); what its
        // kernels touch is the caller's contract.
        unsafe { result::graph::launch(g.exec, s) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_images_are_checked_before_the_driver_sees_them() {
        assert_eq!(check_image(b"").unwrap_err().code(), Errc::Build);
        assert_eq!(
            check_image(b"\x7fELF short").unwrap_err().code(),
            Errc::Build
        );
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        assert!(check_image(&elf).is_ok());
        elf[40] = 60; // section headers at 60 ...
        elf[58] = 64; // ... of 64 bytes ...
        elf[60] = 1; // ... one of them: past the end
        assert!(check_image(&elf).is_err());
        let mut fat = 0xBA55_ED50u32.to_le_bytes().to_vec();
        fat.extend_from_slice(&[1, 0, 16, 0]);
        fat.extend_from_slice(&100u64.to_le_bytes());
        assert!(check_image(&fat).is_err());
        fat.resize(116, 0);
        assert!(check_image(&fat).is_ok());
    }

    #[test]
    fn blocks_divide_the_global_range_exactly() {
        // Without a local range the grid covers exactly the global range: no rounding up.
        for (global, want) in [
            (1_000_000usize, 250usize),
            (1 << 20, 256),
            (1000, 250),
            (97, 97),
            (257, 1),
            (3, 3),
        ] {
            let b = exact_block(global, 256, 1024, i32::MAX as usize).unwrap();
            assert_eq!((global % b, b), (0, want), "{global}");
        }
        // A prime larger than the grid allows is refused, not rounded.
        assert_eq!(
            exact_block(65_537, 16, 1024, 65_535).unwrap_err().code(),
            Errc::NdRange
        );
        // Too many blocks of the preferred size: the smallest divisor that fits the grid.
        assert_eq!(exact_block(200_000, 1, 1024, 65_535).unwrap(), 4);
    }

    #[test]
    fn ptx_entry_names_are_found() {
        let names = ptx_entries(crate::queue::FILL_PTX);
        assert_eq!(names, vec!["sycl_rs_fill".to_string()]);
        let two = ".visible .entry b(\n.param .u64 x)\n{ ret; }\n.entry a()\n{ ret; }";
        assert_eq!(ptx_entries(two), vec!["a".to_string(), "b".to_string()]);
    }
}
