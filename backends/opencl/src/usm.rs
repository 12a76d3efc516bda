//! Unified shared memory, two ways.
//!
//! * **Intel USM** (`cl_intel_unified_shared_memory`, e.g. Intel's CPU and GPU runtimes):
//!   `clHostMemAllocINTEL` / `clDeviceMemAllocINTEL` / `clSharedMemAllocINTEL`,
//!   `clMemBlockingFreeINTEL`, pointer queries through `clGetMemAllocInfoINTEL`.
//! * **USM on SVM** (devices with buffer SVM but no Intel USM, e.g. PoCL): every kind is a
//!   `clSVMAlloc` buffer, fine-grained (`CL_MEM_SVM_FINE_GRAIN_BUFFER`) when every device of
//!   the context has fine-grain buffer SVM, so the host can use it without map/unmap. The
//!   context keeps its own registry (base -> size, kind as requested, device) for pointer
//!   queries and frees.
//!
//! What differs on SVM (for the spec):
//! * all three kinds are the same SVM memory; the kind is only remembered, not enforced;
//! * "device" memory is host-accessible (on fine-grain SVM) even though USM does not promise it;
//! * on coarse-grain-only devices the host cannot touch SVM memory without map/unmap, so
//!   only `usm_device_allocations` is reported there (device memory needs no host access);
//! * `usm_system_allocations` follows fine-grain *system* SVM;
//! * memory is freed with `clSVMFree`, which does not wait for commands (the caller promises
//!   none is pending);
//! * kernels that reach SVM memory through pointers stored in memory (not as arguments) need
//!   fine-grain buffers, which is what we allocate where available.

use std::ffi::c_void;
use std::sync::Arc;

use sycl_backend::{Aspect, Error, PointerInfo, Result, UsmKind};

use crate::context::{ContextShared, ContextUsm, SvmAlloc};
use crate::device::Device;
use crate::result::{check, error};
use crate::sys::*;

fn aspect_of(kind: UsmKind) -> Aspect {
    match kind {
        UsmKind::Host => Aspect::UsmHostAllocations,
        UsmKind::Shared => Aspect::UsmSharedAllocations,
        _ => Aspect::UsmDeviceAllocations,
    }
}

/// `Context::usm_alloc`.
pub(crate) fn alloc(
    ctx: &ContextShared,
    kind: UsmKind,
    device: Option<&Arc<dyn sycl_backend::Device>>,
    size: usize,
    align: usize,
) -> Result<u64> {
    if size == 0 {
        return Err(Error::invalid("a USM allocation of 0 bytes"));
    }
    if align != 0 && !align.is_power_of_two() {
        return Err(Error::invalid(format!(
            "USM alignment {align} is not a power of two"
        )));
    }
    let align = cl_uint::try_from(align)
        .map_err(|_| Error::invalid(format!("USM alignment {align} is too large")))?;
    let device_index =
        match (kind, device) {
            (UsmKind::Unknown, _) => {
                return Err(Error::invalid("cannot allocate USM of kind `unknown`"))
            }
            (UsmKind::Host, _) => None,
            (_, None) => {
                return Err(Error::invalid(format!(
                    "a {kind} USM allocation needs a device"
                )))
            }
            (_, Some(d)) => Some(ctx.device_index(d).ok_or_else(|| {
                Error::invalid("the USM allocation's device is not in the context")
            })?),
        };
    // Every device concerned must have the aspect (host USM: every device of the context).
    let aspect = aspect_of(kind);
    let concerned: Vec<&Arc<dyn sycl_backend::Device>> = match device_index {
        Some(i) => vec![&ctx.devices[i]],
        None => ctx.devices.iter().collect(),
    };
    if concerned.iter().any(|d| !d.info().has(aspect)) {
        return Err(Error::unsupported(aspect, format!("malloc_{kind}")));
    }
    if let (UsmKind::Device, Some(host)) = (kind, &ctx.host_mem) {
        // Fine-grained system SVM: device memory that other processes can open.
        return host.alloc(size, align as usize, kind, device_index);
    }
    let raw_dev = device_index
        .and_then(|i| ctx.devices[i].as_any().downcast_ref::<Device>())
        .map_or(std::ptr::null_mut(), |d| d.id.0);
    match &ctx.usm {
        ContextUsm::Intel(f) => {
            let alloc = |size: usize, align: cl_uint| -> Result<u64> {
                let mut rc = CL_SUCCESS;
                // SAFETY: live context and device of it; no property list; `rc` is an
                // out-param.
                let p = unsafe {
                    match kind {
                        UsmKind::Host => {
                            (f.host_alloc)(ctx.raw.0, std::ptr::null(), size, align, &mut rc)
                        }
                        UsmKind::Device => (f.device_alloc)(
                            ctx.raw.0,
                            raw_dev,
                            std::ptr::null(),
                            size,
                            align,
                            &mut rc,
                        ),
                        _ => (f.shared_alloc)(
                            ctx.raw.0,
                            raw_dev,
                            std::ptr::null(),
                            size,
                            align,
                            &mut rc,
                        ),
                    }
                };
                check(rc, "USM allocation (cl_intel_unified_shared_memory)")?;
                if p.is_null() {
                    return Err(Error::new(
                        sycl_backend::Errc::MemoryAllocation,
                        format!("malloc_{kind} of {size} bytes"),
                    ));
                }
                Ok(p as u64)
            };
            let p = alloc(size, align)?;
            if align == 0 || p % u64::from(align) == 0 {
                return Ok(p);
            }
            // The driver ignored the alignment: over-allocate and align inside.
            // SAFETY: `p` was allocated just now and is not used.
            let rc = free_guard::free(|| unsafe { (f.blocking_free)(ctx.raw.0, p as *mut c_void) });
            check(rc, "clMemBlockingFreeINTEL")?;
            let padded = size
                .checked_add(align as usize)
                .ok_or_else(|| Error::invalid("USM size overflows"))?;
            let raw = alloc(padded, 0)?;
            let user = raw.next_multiple_of(u64::from(align));
            ctx.realigned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(raw, (user, size));
            Ok(user)
        }
        ContextUsm::Svm {
            fine_buffer,
            registry,
        } => {
            let Some(svm_alloc) = ctx.api.clSVMAlloc else {
                return Err(Error::unsupported(aspect, "USM"));
            };
            let flags = CL_MEM_READ_WRITE
                | if *fine_buffer {
                    CL_MEM_SVM_FINE_GRAIN_BUFFER
                } else {
                    0
                };
            let _one_at_a_time = svm_calls();
            // SAFETY: live context; clSVMAlloc validates size and alignment itself.
            let mut raw = unsafe { svm_alloc(ctx.raw.0, flags, size, align) } as u64;
            if raw != 0 && align > 0 && raw % u64::from(align) != 0 {
                // PoCL 5.0 returns memory that ignores the requested alignment.
                if let Some(svm_free) = ctx.api.clSVMFree {
                    // SAFETY: `raw` came from clSVMAlloc just now and is not used.
                    unsafe { svm_free(ctx.raw.0, raw as *mut c_void) };
                }
                raw = 0;
            }
            let mut user = raw;
            if raw == 0 && align > 0 {
                // Implementations may refuse alignments above their largest data type (PoCL
                // 3.1 does for 4096) or ignore them: over-allocate and align inside.
                let padded = size
                    .checked_add(align as usize)
                    .ok_or_else(|| Error::invalid("USM size overflows"))?;
                // SAFETY: as above, default alignment.
                raw = unsafe { svm_alloc(ctx.raw.0, flags, padded, 0) } as u64;
                user = raw.next_multiple_of(u64::from(align));
            }
            if raw == 0 {
                return Err(Error::new(
                    sycl_backend::Errc::MemoryAllocation,
                    format!("clSVMAlloc of {size} bytes (USM {kind}, alignment {align}) failed"),
                ));
            }
            registry.lock().unwrap_or_else(|e| e.into_inner()).insert(
                user,
                SvmAlloc {
                    raw_base: raw,
                    size,
                    kind,
                    device_index,
                },
            );
            Ok(user)
        }
        ContextUsm::None => Err(Error::unsupported(aspect, format!("malloc_{kind}"))),
    }
}

/// Serialises `clSVMAlloc`/`clSVMFree` across the process: NVIDIA's OpenCL returned NULL for
/// 1- to 4097-byte SVM allocations when two contexts (one per GPU) allocated at once (2x H200).
fn svm_calls() -> std::sync::MutexGuard<'static, ()> {
    static SVM_CALLS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SVM_CALLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Context::usm_free`.
///
/// # Safety
/// As the trait method.
pub(crate) unsafe fn free(ctx: &Arc<ContextShared>, ptr: u64) -> Result<()> {
    if let Some(host) = ctx.host_mem.as_ref().filter(|h| h.contains(ptr)) {
        // SAFETY: forwarded contract: `ptr` came from `alloc` and nothing uses it.
        return unsafe { host.free(ptr) };
    }
    match &ctx.usm {
        ContextUsm::Intel(_) if host_task_frees::defer(ctx, ptr) => Ok(()),
        ContextUsm::Intel(f) => {
            let mut raw = ptr;
            {
                let mut realigned = ctx.realigned.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((&base, _)) = realigned.iter().find(|(_, &(user, _))| user == ptr) {
                    realigned.remove(&base);
                    raw = base;
                }
            }
            // SAFETY: `raw` is the driver's pointer of a USM allocation of this context
            // (caller), freed once.
            let rc =
                free_guard::free(|| unsafe { (f.blocking_free)(ctx.raw.0, raw as *mut c_void) });
            check(rc, "clMemBlockingFreeINTEL")
        }
        ContextUsm::Svm { registry, .. } => {
            let Some(a) = registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&ptr)
            else {
                return Err(Error::invalid(format!(
                    "{ptr:#x} is not a USM allocation of this context"
                )));
            };
            let Some(svm_free) = ctx.api.clSVMFree else {
                return Err(error(CL_INVALID_VALUE, "clSVMFree"));
            };
            let _one_at_a_time = svm_calls();
            // SAFETY: `raw_base` was returned by clSVMAlloc on this context and is freed once
            // (just removed from the registry).
            unsafe { svm_free(ctx.raw.0, a.raw_base as *mut c_void) };
            Ok(())
        }
        ContextUsm::None => Err(Error::invalid(format!(
            "{ptr:#x} is not a USM allocation of this context"
        ))),
    }
}

/// `Context::usm_pointer_info`.
pub(crate) fn pointer_info(ctx: &ContextShared, ptr: u64) -> PointerInfo {
    if let Some(info) = ctx
        .host_mem
        .as_ref()
        .map(|h| h.pointer_info(ptr))
        .filter(|i| i.kind != UsmKind::Unknown)
    {
        return info;
    }
    match &ctx.usm {
        ContextUsm::Intel(f) => {
            let q = |param, out: *mut c_void, size| {
                // SAFETY: `out` points to a value of the size the query returns.
                unsafe {
                    (f.get_alloc_info)(
                        ctx.raw.0,
                        ptr as *const c_void,
                        param,
                        size,
                        out,
                        std::ptr::null_mut(),
                    )
                }
            };
            let mut ty: cl_uint = 0;
            if q(
                CL_MEM_ALLOC_TYPE_INTEL,
                (&raw mut ty).cast(),
                std::mem::size_of::<cl_uint>(),
            ) != CL_SUCCESS
            {
                return PointerInfo::unknown();
            }
            let kind = match ty {
                CL_MEM_TYPE_HOST_INTEL => UsmKind::Host,
                CL_MEM_TYPE_DEVICE_INTEL => UsmKind::Device,
                CL_MEM_TYPE_SHARED_INTEL => UsmKind::Shared,
                _ => return PointerInfo::unknown(),
            };
            let mut base: *mut c_void = std::ptr::null_mut();
            let mut size: usize = 0;
            let mut dev: cl_device_id = std::ptr::null_mut();
            let ok = q(
                CL_MEM_ALLOC_BASE_PTR_INTEL,
                (&raw mut base).cast(),
                std::mem::size_of::<*mut c_void>(),
            ) == CL_SUCCESS
                && q(
                    CL_MEM_ALLOC_SIZE_INTEL,
                    (&raw mut size).cast(),
                    std::mem::size_of::<usize>(),
                ) == CL_SUCCESS
                && q(
                    CL_MEM_ALLOC_DEVICE_INTEL,
                    (&raw mut dev).cast(),
                    std::mem::size_of::<cl_device_id>(),
                ) == CL_SUCCESS;
            if !ok {
                return PointerInfo::unknown();
            }
            let (mut base, mut size) = (base as u64, size);
            if let Some(&(user, asked)) = ctx
                .realigned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&base)
            {
                if ptr < user || ptr >= user + asked as u64 {
                    return PointerInfo::unknown();
                }
                (base, size) = (user, asked);
            }
            let device_index = if kind == UsmKind::Host || dev.is_null() {
                None
            } else {
                ctx.index_of_raw(dev)
            };
            PointerInfo {
                kind,
                device_index,
                base,
                size,
            }
        }
        ContextUsm::Svm { registry, .. } => {
            let reg = registry.lock().unwrap_or_else(|e| e.into_inner());
            match reg.range(..=ptr).next_back() {
                Some((&base, a)) if ptr < base + a.size as u64 => PointerInfo {
                    kind: a.kind,
                    device_index: a.device_index,
                    base,
                    size: a.size,
                },
                _ => PointerInfo::unknown(),
            }
        }
        ContextUsm::None => PointerInfo::unknown(),
    }
}

/// Keeps queue releases and USM frees apart. PoCL 5's `clMemBlockingFreeINTEL` walks the
/// context's queues and aborts the process (`pocl_get_last_events: Assertion
/// (temp_cq)->pocl_refcount > 0`) when another thread releases one of them meanwhile (seen on
/// the NVIDIA machines' PoCL 5.0 under the conformance suite). Frees share the lock; a release
/// takes it alone or, if a free is running, leaves the queue to whoever finishes the last free
/// (a blocking free can wait for a host task that itself drops a queue, so waiting here could
/// deadlock).
pub(crate) mod free_guard {
    use std::sync::{Mutex, RwLock};

    use crate::sys::{Api, CL_SUCCESS};
    use crate::{result::error, Handle};

    static FREES: RwLock<()> = RwLock::new(());
    static DEFERRED: Mutex<Vec<(&'static Api, Handle)>> = Mutex::new(Vec::new());

    /// Runs a USM free; releases queues that were deferred meanwhile.
    pub(crate) fn free<T>(f: impl FnOnce() -> T) -> T {
        let guard = FREES.read().unwrap_or_else(|e| e.into_inner());
        let out = f();
        drop(guard);
        drain();
        out
    }

    /// `clReleaseCommandQueue`, now or once no free is running.
    pub(crate) fn release_queue(api: &'static Api, queue: Handle) {
        DEFERRED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((api, queue));
        drain();
    }

    fn drain() {
        let Ok(_alone) = FREES.try_write() else {
            return; // a running free drains when it finishes
        };
        let queues = std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(|e| e.into_inner()));
        for (api, q) in queues {
            // SAFETY: each queue was created by this backend and handed over by its only
            // owner, once.
            let rc = unsafe { (api.clReleaseCommandQueue)(q.0) };
            if rc != CL_SUCCESS {
                log::error!("opencl: {}", error(rc, "clReleaseCommandQueue"));
            }
        }
    }
}

/// Frees made by a host task run after the task. PoCL 5's `clMemBlockingFreeINTEL` waits for
/// the last command of every queue of the context, and a queue with a command after the
/// running host task will not finish before the task does: freeing inside the task would
/// wait for itself (seen on the NVIDIA machines' PoCL 5.0). The memory is freed as soon as the
/// task returns.
pub(crate) mod host_task_frees {
    use std::cell::RefCell;
    use std::sync::Arc;

    use crate::context::ContextShared;

    type Pending = Vec<(Arc<ContextShared>, u64)>;

    thread_local! {
        static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
    }

    /// Runs `task` with frees deferred; then performs them.
    pub(crate) fn run_task<T>(task: impl FnOnce() -> T) -> T {
        PENDING.with(|p| *p.borrow_mut() = Some(Vec::new()));
        task()
    }

    /// Frees what the task freed (call after the task's event completed).
    pub(crate) fn flush() {
        let pending = PENDING.with(|p| p.borrow_mut().take()).unwrap_or_default();
        for (ctx, ptr) in pending {
            // SAFETY: `ptr` was handed to `usm::free` by the task, which owns that call's
            // contract; this completes it once.
            if let Err(e) = unsafe { super::free(&ctx, ptr) } {
                log::error!("opencl: freeing USM after a host task: {e}");
            }
        }
    }

    /// Queues the free of `ptr` if this thread is running a host task.
    pub(crate) fn defer(ctx: &Arc<ContextShared>, ptr: u64) -> bool {
        PENDING.with(|p| match p.borrow_mut().as_mut() {
            Some(list) => {
                list.push((ctx.clone(), ptr));
                true
            }
            None => false,
        })
    }
}
