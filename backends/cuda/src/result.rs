//! The result layer: one function per driver call, grouped by object, each returning
//! `Result<_, sycl_backend::Error>` (the shape of cudarc's own `driver/result.rs`).
//!
//! Every function first checks that the driver library exports the symbol it is about to call
//! ([`need!`]): cudarc's dynamic-loading bindings panic on a missing symbol, and a symbol missing
//! from an old driver must become an error here (and a false aspect upstream), never a crash.
//! Handles are passed as the raw `sys` types; the owning wrappers live in the modules above.
//!
//! The one CUresult -> [`Errc`] translation is [`error`].

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;
use sycl_backend::{BackendKind, Errc, Error, NativeError, Result};

/// Fails the enclosing function with `Errc::FeatureNotSupported` unless the driver exports
/// `$name`. The answer is cached per call site.
macro_rules! need {
    ($name:literal) => {{
        static PRESENT: ::std::sync::OnceLock<bool> = ::std::sync::OnceLock::new();
        if !*PRESENT.get_or_init(|| $crate::result::has_symbol($name)) {
            return Err($crate::result::missing_symbol($name));
        }
    }};
}

/// Whether `libcuda` can be loaded at all (cached). Nothing in cudarc's driver bindings may be
/// called when this is false: cudarc would panic.
pub(crate) fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen candidate library names; loading libcuda
    // runs no user-visible initialisation besides the library's own constructors.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Whether the loaded driver exports `name` (false when the driver is absent).
pub(crate) fn has_symbol(name: &str) -> bool {
    if !driver_present() {
        return false;
    }
    // SAFETY: the library is present (checked above), so `culib` does not panic; looking a
    // symbol up does not call it, and the type is only used to form the lookup.
    unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(name.as_bytes())
            .is_ok()
    }
}

/// The error for a driver entry point this driver does not have.
pub(crate) fn missing_symbol(name: &str) -> Error {
    Error::new(
        Errc::FeatureNotSupported,
        format!("the installed CUDA driver does not export `{name}` (driver too old?)"),
    )
}

/// The driver's name for `code`, e.g. `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn error_name(code: sys::CUresult) -> String {
    static HAS: OnceLock<bool> = OnceLock::new();
    if *HAS.get_or_init(|| has_symbol("cuGetErrorName")) {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `name` is a valid out-pointer; the driver stores a pointer to a static string.
        let r = unsafe { sys::cuGetErrorName(code, &mut name) };
        if r == sys::CUresult::CUDA_SUCCESS && !name.is_null() {
            // SAFETY: the driver returned a NUL-terminated static string.
            return unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
        }
    }
    format!("{code:?}")
}

/// The [`Errc`] a driver code stands for.
pub(crate) fn errc_of(code: sys::CUresult) -> Errc {
    use sys::CUresult::*;
    match code {
        CUDA_ERROR_OUT_OF_MEMORY => Errc::MemoryAllocation,
        CUDA_ERROR_INVALID_VALUE
        | CUDA_ERROR_INVALID_HANDLE
        | CUDA_ERROR_INVALID_DEVICE
        | CUDA_ERROR_INVALID_CONTEXT
        | CUDA_ERROR_CONTEXT_IS_DESTROYED
        | CUDA_ERROR_NOT_FOUND
        | CUDA_ERROR_ILLEGAL_STATE
        | CUDA_ERROR_ALREADY_MAPPED
        | CUDA_ERROR_ALREADY_ACQUIRED
        | CUDA_ERROR_MAP_FAILED
        | CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        | CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
        | CUDA_ERROR_PEER_ACCESS_NOT_ENABLED => Errc::Invalid,
        CUDA_ERROR_NOT_SUPPORTED
        | CUDA_ERROR_NOT_PERMITTED
        | CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        | CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
        | CUDA_ERROR_TOO_MANY_PEERS => Errc::FeatureNotSupported,
        CUDA_ERROR_INVALID_PTX
        | CUDA_ERROR_INVALID_IMAGE
        | CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | CUDA_ERROR_JIT_COMPILATION_DISABLED
        | CUDA_ERROR_INVALID_SOURCE
        | CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
        | CUDA_ERROR_SHARED_OBJECT_INIT_FAILED => Errc::Build,
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | CUDA_ERROR_LAUNCH_TIMEOUT
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE => Errc::Kernel,
        CUDA_ERROR_NO_DEVICE
        | CUDA_ERROR_NOT_INITIALIZED
        | CUDA_ERROR_DEINITIALIZED
        | CUDA_ERROR_STUB_LIBRARY
        | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | CUDA_ERROR_SYSTEM_NOT_READY => Errc::Platform,
        _ => Errc::Runtime,
    }
}

/// The error for a failed driver call `what`, keeping the code and its name.
pub(crate) fn error(code: sys::CUresult, what: &str) -> Error {
    let name = error_name(code);
    Error::with_native(
        errc_of(code),
        format!("{what} failed with {name}"),
        NativeError {
            backend: BackendKind::Cuda,
            code: i64::from(code as u32),
            name: Some(name),
        },
    )
}

/// `Ok(())` for `CUDA_SUCCESS`, else [`error`].
pub(crate) fn check(code: sys::CUresult, what: &str) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(error(code, what))
    }
}

/// The answer of a query call: `Ok(true)` done, `Ok(false)` not ready yet.
fn check_ready(code: sys::CUresult, what: &str) -> Result<bool> {
    match code {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        code => check(code, what).map(|()| true),
    }
}

/// `cuInit`, `cuDriverGetVersion`.
pub(crate) mod init {
    use super::*;

    /// `cuInit(0)`.
    pub(crate) fn init() -> Result<()> {
        need!("cuInit");
        // SAFETY: cuInit takes a flags word (must be 0) and may be called repeatedly.
        check(unsafe { sys::cuInit(0) }, "cuInit")
    }

    /// `cuDriverGetVersion`, e.g. 13000.
    pub(crate) fn driver_version() -> Result<i32> {
        need!("cuDriverGetVersion");
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer.
        let r = unsafe { sys::cuDriverGetVersion(&mut v) };
        check(r, "cuDriverGetVersion")?;
        Ok(v)
    }
}

/// `cuDevice*`.
pub(crate) mod device {
    use super::*;

    /// `cuDeviceGetCount`.
    pub(crate) fn count() -> Result<i32> {
        need!("cuDeviceGetCount");
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer.
        check(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
        Ok(n)
    }

    /// `cuDeviceGet`.
    pub(crate) fn get(ordinal: i32) -> Result<sys::CUdevice> {
        need!("cuDeviceGet");
        let mut d = 0;
        // SAFETY: `d` is a valid out-pointer; a bad ordinal is reported as an error.
        check(unsafe { sys::cuDeviceGet(&mut d, ordinal) }, "cuDeviceGet")?;
        Ok(d)
    }

    /// `cuDeviceGetName`.
    pub(crate) fn name(dev: sys::CUdevice) -> Result<String> {
        need!("cuDeviceGetName");
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates within it.
        let r = unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev) };
        check(r, "cuDeviceGetName")?;
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `cuDeviceGetUuid_v2`.
    pub(crate) fn uuid(dev: sys::CUdevice) -> Result<[u8; 16]> {
        need!("cuDeviceGetUuid_v2");
        let mut u = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: `u` is a valid out-pointer to a 16-byte struct.
        let r = unsafe { sys::cuDeviceGetUuid_v2(&mut u, dev) };
        check(r, "cuDeviceGetUuid_v2")?;
        Ok(u.bytes.map(|b| b as u8))
    }

    /// `cuDeviceTotalMem_v2`.
    pub(crate) fn total_mem(dev: sys::CUdevice) -> Result<usize> {
        need!("cuDeviceTotalMem_v2");
        let mut n = 0usize;
        // SAFETY: `n` is a valid out-pointer.
        let r = unsafe { sys::cuDeviceTotalMem_v2(&mut n, dev) };
        check(r, "cuDeviceTotalMem_v2")?;
        Ok(n)
    }

    /// `cuDeviceGetAttribute`.
    pub(crate) fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
        need!("cuDeviceGetAttribute");
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer; an attribute unknown to the driver is an error.
        let r = unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) };
        check(r, "cuDeviceGetAttribute")?;
        Ok(v)
    }

    /// `cuDeviceCanAccessPeer`.
    pub(crate) fn can_access_peer(dev: sys::CUdevice, peer: sys::CUdevice) -> Result<bool> {
        need!("cuDeviceCanAccessPeer");
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer.
        let r = unsafe { sys::cuDeviceCanAccessPeer(&mut v, dev, peer) };
        check(r, "cuDeviceCanAccessPeer")?;
        Ok(v != 0)
    }
}

/// Primary contexts and the current context.
pub(crate) mod ctx {
    use super::*;

    /// `cuDevicePrimaryCtxRetain`.
    pub(crate) fn primary_retain(dev: sys::CUdevice) -> Result<sys::CUcontext> {
        need!("cuDevicePrimaryCtxRetain");
        let mut c = std::ptr::null_mut();
        // SAFETY: `c` is a valid out-pointer.
        let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut c, dev) };
        check(r, "cuDevicePrimaryCtxRetain")?;
        Ok(c)
    }

    /// `cuDevicePrimaryCtxRelease_v2`.
    pub(crate) fn primary_release(dev: sys::CUdevice) -> Result<()> {
        need!("cuDevicePrimaryCtxRelease_v2");
        // SAFETY: releases one retain made by `primary_retain`; the caller pairs them.
        let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
        check(r, "cuDevicePrimaryCtxRelease_v2")
    }

    /// `cuCtxEnablePeerAccess(peer)` from the current context; already enabled is success.
    pub(crate) fn enable_peer_access(peer: sys::CUcontext) -> Result<()> {
        need!("cuCtxEnablePeerAccess");
        // SAFETY: `peer` is a retained primary context; a context is current.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer, 0) };
        if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check(r, "cuCtxEnablePeerAccess")
    }

    /// `cuCtxGetCurrent`: the calling thread's current context, null when none is.
    pub(crate) fn get_current() -> Result<sys::CUcontext> {
        need!("cuCtxGetCurrent");
        let mut c = std::ptr::null_mut();
        // SAFETY: `c` is a valid out-pointer.
        check(unsafe { sys::cuCtxGetCurrent(&mut c) }, "cuCtxGetCurrent")?;
        Ok(c)
    }

    /// `cuCtxSetCurrent`.
    pub(crate) fn set_current(c: sys::CUcontext) -> Result<()> {
        need!("cuCtxSetCurrent");
        // SAFETY: `c` is a retained primary context (or null, which unbinds).
        check(unsafe { sys::cuCtxSetCurrent(c) }, "cuCtxSetCurrent")
    }
}

/// Streams.
pub(crate) mod stream {
    use super::*;

    /// `cuStreamCreate(CU_STREAM_NON_BLOCKING)`.
    pub(crate) fn create_non_blocking() -> Result<sys::CUstream> {
        need!("cuStreamCreate");
        let mut s = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: `s` is a valid out-pointer; a context is current (callers use `with_ctx`).
        let r = unsafe { sys::cuStreamCreate(&mut s, flags) };
        check(r, "cuStreamCreate")?;
        Ok(s)
    }

    /// `cuStreamDestroy_v2`.
    ///
    /// # Safety
    /// `s` is a live stream not used afterwards.
    pub(crate) unsafe fn destroy(s: sys::CUstream) -> Result<()> {
        need!("cuStreamDestroy_v2");
        // SAFETY: the caller guarantees `s` is live and unused afterwards.
        check(unsafe { sys::cuStreamDestroy_v2(s) }, "cuStreamDestroy_v2")
    }

    /// `cuStreamSynchronize`.
    pub(crate) fn synchronize(s: sys::CUstream) -> Result<()> {
        need!("cuStreamSynchronize");
        // SAFETY: callers pass a live stream owned by a queue.
        let r = unsafe { sys::cuStreamSynchronize(s) };
        check(r, "cuStreamSynchronize")
    }

    /// `cuStreamSynchronize(CU_STREAM_LEGACY)`: waits for the legacy default stream of the
    /// current context, which every other library's default-stream work goes to (and which
    /// is ordered after the work of blocking streams).
    pub(crate) fn synchronize_legacy() -> Result<()> {
        need!("cuStreamSynchronize");
        // CU_STREAM_LEGACY (cuda.h: `((CUstream)0x1)`) is a handle the driver defines, not a
        // pointer that is dereferenced here.
        let legacy = 1usize as sys::CUstream;
        // SAFETY: CU_STREAM_LEGACY is valid in any context (a context is current: callers use
        // `with_ctx`).
        let r = unsafe { sys::cuStreamSynchronize(legacy) };
        check(r, "cuStreamSynchronize(CU_STREAM_LEGACY)")
    }

    /// `cuStreamQuery`: whether every command submitted to `s` has completed.
    pub(crate) fn query(s: sys::CUstream) -> Result<bool> {
        need!("cuStreamQuery");
        // SAFETY: callers pass a live stream owned by a queue.
        check_ready(unsafe { sys::cuStreamQuery(s) }, "cuStreamQuery")
    }

    /// `cuStreamWaitEvent(s, e, 0)`.
    pub(crate) fn wait_event(s: sys::CUstream, e: sys::CUevent) -> Result<()> {
        need!("cuStreamWaitEvent");
        // SAFETY: callers pass a live stream and a live event.
        let r = unsafe { sys::cuStreamWaitEvent(s, e, 0) };
        check(r, "cuStreamWaitEvent")
    }

    /// `cuLaunchHostFunc(s, notify_ready, ready)`: `ready` is set when the stream reaches this
    /// point. The callback makes no CUDA call (the driver forbids it) and takes no lock that
    /// driver calls could hold.
    pub(crate) fn notify_when_reached(s: sys::CUstream, ready: &Arc<HostReady>) -> Result<()> {
        need!("cuLaunchHostFunc");
        let user = Arc::into_raw(ready.clone()) as *mut std::ffi::c_void;
        // SAFETY: `notify_ready` matches CUhostFn; `user` is a leaked Arc<HostReady> that the
        // callback takes back exactly once (or we take it back below if the launch failed).
        let r = unsafe { sys::cuLaunchHostFunc(s, Some(notify_ready), user) };
        if r != sys::CUresult::CUDA_SUCCESS {
            // SAFETY: the callback will not run, so the reference is still ours.
            drop(unsafe { Arc::from_raw(user as *const HostReady) });
        }
        check(r, "cuLaunchHostFunc")
    }

    /// Set by the driver's callback thread when a stream reached a host task.
    #[derive(Default)]
    pub(crate) struct HostReady {
        done: std::sync::Mutex<bool>,
        cv: std::sync::Condvar,
    }

    impl HostReady {
        /// Blocks until the stream reached the host task's point (no CUDA call).
        pub(crate) fn wait(&self) {
            let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
            while !*done {
                done = self.cv.wait(done).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    unsafe extern "C" fn notify_ready(user: *mut std::ffi::c_void) {
        // SAFETY: `user` is the Arc<HostReady> leaked by `notify_when_reached`, passed once.
        let ready = unsafe { Arc::from_raw(user as *const HostReady) };
        *ready.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        ready.cv.notify_all();
    }
}

/// Events.
pub(crate) mod event {
    use super::*;

    /// `CU_EVENT_DISABLE_TIMING`.
    pub(crate) const DISABLE_TIMING: u32 = 2;
    /// `CU_EVENT_INTERPROCESS`.
    pub(crate) const INTERPROCESS: u32 = 4;

    /// `cuEventCreate`.
    pub(crate) fn create(flags: u32) -> Result<sys::CUevent> {
        need!("cuEventCreate");
        let mut e = std::ptr::null_mut();
        // SAFETY: `e` is a valid out-pointer; a context is current.
        let r = unsafe { sys::cuEventCreate(&mut e, flags) };
        check(r, "cuEventCreate")?;
        Ok(e)
    }

    /// `cuEventRecord`.
    pub(crate) fn record(e: sys::CUevent, s: sys::CUstream) -> Result<()> {
        need!("cuEventRecord");
        // SAFETY: callers pass a live event and a live stream.
        check(unsafe { sys::cuEventRecord(e, s) }, "cuEventRecord")
    }

    /// `cuEventQuery`: `Ok(true)` when complete, `Ok(false)` when not ready.
    pub(crate) fn query(e: sys::CUevent) -> Result<bool> {
        need!("cuEventQuery");
        // SAFETY: callers pass a live event.
        check_ready(unsafe { sys::cuEventQuery(e) }, "cuEventQuery")
    }

    /// `cuEventSynchronize`.
    pub(crate) fn synchronize(e: sys::CUevent) -> Result<()> {
        need!("cuEventSynchronize");
        // SAFETY: callers pass a live event.
        check(unsafe { sys::cuEventSynchronize(e) }, "cuEventSynchronize")
    }

    /// `cuEventDestroy_v2`.
    ///
    /// # Safety
    /// `e` is live and not used afterwards.
    pub(crate) unsafe fn destroy(e: sys::CUevent) -> Result<()> {
        need!("cuEventDestroy_v2");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuEventDestroy_v2(e) }, "cuEventDestroy_v2")
    }

    /// Milliseconds between two completed timing events: `cuEventElapsedTime_v2` (12.8+), else
    /// the older `cuEventElapsedTime` looked up by name (absent from 13.x headers).
    pub(crate) fn elapsed_ms(start: sys::CUevent, end: sys::CUevent) -> Result<f32> {
        static V2: OnceLock<bool> = OnceLock::new();
        let mut ms = 0f32;
        if *V2.get_or_init(|| has_symbol("cuEventElapsedTime_v2")) {
            // SAFETY: `ms` is a valid out-pointer; callers pass live events.
            let r = unsafe { sys::cuEventElapsedTime_v2(&mut ms, start, end) };
            check(r, "cuEventElapsedTime_v2")?;
            return Ok(ms);
        }
        need!("cuEventElapsedTime");
        type F = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;
        // SAFETY: the symbol exists (checked) and has this C signature in every CUDA version.
        let f = unsafe { sys::culib().get::<F>(b"cuEventElapsedTime") }
            .map_err(|_| missing_symbol("cuEventElapsedTime"))?;
        // SAFETY: as above; `ms` is a valid out-pointer.
        check(unsafe { f(&mut ms, start, end) }, "cuEventElapsedTime")?;
        Ok(ms)
    }
}

/// Memory: USM allocations, copies, fills, address ranges.
pub(crate) mod mem {
    use super::*;

    /// `cuMemAlloc_v2`.
    pub(crate) fn alloc(size: usize) -> Result<u64> {
        need!("cuMemAlloc_v2");
        let mut p = 0;
        // SAFETY: `p` is a valid out-pointer; a context is current.
        check(unsafe { sys::cuMemAlloc_v2(&mut p, size) }, "cuMemAlloc_v2")?;
        Ok(p)
    }

    /// `cuMemFree_v2`.
    ///
    /// # Safety
    /// `p` came from `alloc`/`alloc_managed` and is not used afterwards.
    pub(crate) unsafe fn free(p: u64) -> Result<()> {
        need!("cuMemFree_v2");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuMemFree_v2(p) }, "cuMemFree_v2")
    }

    /// `cuMemHostAlloc(PORTABLE | DEVICEMAP)`.
    pub(crate) fn host_alloc(size: usize) -> Result<u64> {
        need!("cuMemHostAlloc");
        let mut p = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; flags 1|2 = PORTABLE|DEVICEMAP.
        let r = unsafe { sys::cuMemHostAlloc(&mut p, size, 1 | 2) };
        check(r, "cuMemHostAlloc")?;
        Ok(p as u64)
    }

    /// `cuMemFreeHost`.
    ///
    /// # Safety
    /// `p` came from `host_alloc` and is not used afterwards.
    pub(crate) unsafe fn free_host(p: u64) -> Result<()> {
        need!("cuMemFreeHost");
        // SAFETY: guaranteed by the caller.
        let r = unsafe { sys::cuMemFreeHost(p as *mut c_void) };
        check(r, "cuMemFreeHost")
    }

    /// `cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)`.
    pub(crate) fn alloc_managed(size: usize) -> Result<u64> {
        need!("cuMemAllocManaged");
        let mut p = 0;
        let flags = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
        // SAFETY: `p` is a valid out-pointer; a context is current.
        let r = unsafe { sys::cuMemAllocManaged(&mut p, size, flags) };
        check(r, "cuMemAllocManaged")?;
        Ok(p)
    }

    /// `cuMemcpyAsync` (unified addressing: any direction).
    ///
    /// # Safety
    /// Both ranges are valid for `size` bytes until the stream passes this copy.
    pub(crate) unsafe fn copy_async(
        dst: u64,
        src: u64,
        size: usize,
        s: sys::CUstream,
    ) -> Result<()> {
        need!("cuMemcpyAsync");
        // SAFETY: guaranteed by the caller.
        let r = unsafe { sys::cuMemcpyAsync(dst, src, size, s) };
        check(r, "cuMemcpyAsync")
    }

    /// `cuMemsetD8Async` / `D16` / `D32` by `width` (1, 2 or 4); `count` elements.
    ///
    /// # Safety
    /// `[dst, dst + count*width)` is valid device-reachable memory until the stream passes.
    pub(crate) unsafe fn set_async(
        dst: u64,
        value: u32,
        width: usize,
        count: usize,
        s: sys::CUstream,
    ) -> Result<()> {
        match width {
            1 => {
                need!("cuMemsetD8Async");
                // SAFETY: guaranteed by the caller.
                let r = unsafe { sys::cuMemsetD8Async(dst, value as u8, count, s) };
                check(r, "cuMemsetD8Async")
            }
            2 => {
                need!("cuMemsetD16Async");
                // SAFETY: guaranteed by the caller; `dst` is 2-aligned (checked by the caller).
                let r = unsafe { sys::cuMemsetD16Async(dst, value as u16, count, s) };
                check(r, "cuMemsetD16Async")
            }
            _ => {
                need!("cuMemsetD32Async");
                // SAFETY: guaranteed by the caller; `dst` is 4-aligned (checked by the caller).
                let r = unsafe { sys::cuMemsetD32Async(dst, value, count, s) };
                check(r, "cuMemsetD32Async")
            }
        }
    }

    /// `cuMemsetD2D8Async`: `height` rows of `width` bytes set to `value`, `pitch` apart.
    ///
    /// # Safety
    /// Every byte written is valid device-reachable memory until the stream passes.
    pub(crate) unsafe fn set_2d_async(
        dst: u64,
        pitch: usize,
        value: u8,
        width: usize,
        height: usize,
        s: sys::CUstream,
    ) -> Result<()> {
        need!("cuMemsetD2D8Async");
        // SAFETY: guaranteed by the caller.
        let r = unsafe { sys::cuMemsetD2D8Async(dst, pitch, value, width, height, s) };
        check(r, "cuMemsetD2D8Async")
    }

    /// `cuMemPrefetchAsync_v2` to device `ordinal`.
    ///
    /// # Safety
    /// The range is a live managed allocation until the stream passes.
    pub(crate) unsafe fn prefetch_async(
        p: u64,
        size: usize,
        ordinal: i32,
        s: sys::CUstream,
    ) -> Result<()> {
        need!("cuMemPrefetchAsync_v2");
        let loc = location(ordinal);
        // SAFETY: guaranteed by the caller.
        let r = unsafe { sys::cuMemPrefetchAsync_v2(p, size, loc, 0, s) };
        check(r, "cuMemPrefetchAsync_v2")
    }

    /// `cuMemGetAddressRange_v2`: (base, size) of the allocation holding `p`.
    pub(crate) fn address_range(p: u64) -> Result<(u64, usize)> {
        need!("cuMemGetAddressRange_v2");
        let (mut base, mut size) = (0u64, 0usize);
        // SAFETY: valid out-pointers; an unknown address is an error, not UB.
        let r = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, p) };
        check(r, "cuMemGetAddressRange_v2")?;
        Ok((base, size))
    }

    /// Whether `p` is managed memory (`CU_POINTER_ATTRIBUTE_IS_MANAGED`).
    pub(crate) fn is_managed(p: u64) -> Result<bool> {
        need!("cuPointerGetAttribute");
        let mut v: u32 = 0;
        // SAFETY: IS_MANAGED writes an unsigned int into `v`.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut v as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
                p,
            )
        };
        check(r, "cuPointerGetAttribute")?;
        Ok(v != 0)
    }

    /// What the driver says of `p`, memory some other library may have allocated:
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (a `CUmemorytype`), `_DEVICE_ORDINAL`,
    /// `_IS_MANAGED`, and the range holding `p` (`_RANGE_START_ADDR`, `_RANGE_SIZE`). An
    /// address the driver does not know is `CUDA_ERROR_INVALID_VALUE`.
    #[doc(alias = "cuPointerGetAttribute")]
    pub(crate) fn attributes(p: u64) -> Result<PointerAttributes> {
        need!("cuPointerGetAttribute");
        let (mut memory_type, mut ordinal, mut managed) = (0u32, -1i32, 0u32);
        let (mut start, mut size) = (0u64, 0usize);
        for (out, attribute) in [
            (
                (&mut memory_type as *mut u32).cast::<std::ffi::c_void>(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ),
            (
                (&mut ordinal as *mut i32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ),
            (
                (&mut managed as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ),
            (
                (&mut start as *mut u64).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            ),
            (
                (&mut size as *mut usize).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            ),
        ] {
            // MEMORY_TYPE writes a CUmemorytype (a 32-bit enum), DEVICE_ORDINAL an int,
            // IS_MANAGED an unsigned int, RANGE_START_ADDR a CUdeviceptr (u64) and RANGE_SIZE a
            // size_t.
            // SAFETY: each `out` is a live local of the type its attribute writes (above); an
            // address the driver does not know is an error code, not undefined behaviour.
            let r = unsafe { sys::cuPointerGetAttribute(out, attribute, p) };
            check(r, "cuPointerGetAttribute")?;
        }
        Ok(PointerAttributes {
            memory_type,
            ordinal,
            managed: managed != 0,
            start,
            size,
        })
    }

    /// The answer of [`attributes`].
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct PointerAttributes {
        /// `CUmemorytype`: 1 host, 2 device, 4 unified.
        pub(crate) memory_type: u32,
        /// The device of the memory (of the context that allocated it, for host memory).
        pub(crate) ordinal: i32,
        pub(crate) managed: bool,
        /// The allocation holding the pointer.
        pub(crate) start: u64,
        pub(crate) size: usize,
    }

    /// A `CUmemLocation` naming device `ordinal`.
    pub(crate) fn location(ordinal: i32) -> sys::CUmemLocation {
        sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: ordinal,
        }
    }
}

/// Legacy IPC of memory and events.
pub(crate) mod ipc {
    use super::*;

    /// `cuIpcGetMemHandle` on the base of an allocation.
    pub(crate) fn get_mem_handle(base: u64) -> Result<[u8; 64]> {
        need!("cuIpcGetMemHandle");
        let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
        // SAFETY: `h` is a valid out-pointer.
        let r = unsafe { sys::cuIpcGetMemHandle(&mut h, base) };
        check(r, "cuIpcGetMemHandle")?;
        Ok(h.reserved.map(|b| b as u8))
    }

    /// `cuIpcOpenMemHandle_v2(LAZY_ENABLE_PEER_ACCESS)`; returns the base of the mapping.
    pub(crate) fn open_mem_handle(handle: &[u8; 64]) -> Result<u64> {
        need!("cuIpcOpenMemHandle_v2");
        let h = sys::CUipcMemHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let mut p = 0;
        // SAFETY: `p` is a valid out-pointer; the handle is plain data the driver validates.
        let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut p, h, 1) };
        check(r, "cuIpcOpenMemHandle_v2")?;
        Ok(p)
    }

    /// `cuIpcCloseMemHandle`.
    ///
    /// # Safety
    /// `base` came from `open_mem_handle` and nothing uses the mapping afterwards.
    pub(crate) unsafe fn close_mem_handle(base: u64) -> Result<()> {
        need!("cuIpcCloseMemHandle");
        // SAFETY: guaranteed by the caller.
        let r = unsafe { sys::cuIpcCloseMemHandle(base) };
        check(r, "cuIpcCloseMemHandle")
    }

    /// `cuIpcGetEventHandle`.
    pub(crate) fn get_event_handle(e: sys::CUevent) -> Result<[u8; 64]> {
        need!("cuIpcGetEventHandle");
        let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: `h` is a valid out-pointer; `e` is live.
        let r = unsafe { sys::cuIpcGetEventHandle(&mut h, e) };
        check(r, "cuIpcGetEventHandle")?;
        Ok(h.reserved.map(|b| b as u8))
    }

    /// `cuIpcOpenEventHandle`.
    pub(crate) fn open_event_handle(handle: &[u8; 64]) -> Result<sys::CUevent> {
        need!("cuIpcOpenEventHandle");
        let h = sys::CUipcEventHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let mut e = std::ptr::null_mut();
        // SAFETY: `e` is a valid out-pointer; the handle is plain data the driver validates.
        let r = unsafe { sys::cuIpcOpenEventHandle(&mut e, h) };
        check(r, "cuIpcOpenEventHandle")?;
        Ok(e)
    }
}

/// Virtual memory management (`cuMem*` VMM calls).
pub(crate) mod vmm {
    use super::*;

    /// The allocation properties of a pinned physical allocation on `ordinal`.
    pub(crate) fn prop(ordinal: i32, posix_fd: bool) -> sys::CUmemAllocationProp {
        // SAFETY: the struct is plain C data for which all-zero bytes are valid (enums with a
        // 0 variant, a null pointer, zero flags).
        let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        p.location = mem::location(ordinal);
        p.requestedHandleTypes = if posix_fd {
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        } else {
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE
        };
        p
    }

    /// `cuMemGetAllocationGranularity`.
    pub(crate) fn granularity(prop: &sys::CUmemAllocationProp, recommended: bool) -> Result<usize> {
        need!("cuMemGetAllocationGranularity");
        let mut g = 0;
        let opt = if recommended {
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
        } else {
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM
        };
        // SAFETY: valid pointers to a filled property struct and an out-value.
        let r = unsafe { sys::cuMemGetAllocationGranularity(&mut g, prop, opt) };
        check(r, "cuMemGetAllocationGranularity")?;
        Ok(g)
    }

    /// `cuMemAddressReserve`.
    pub(crate) fn address_reserve(size: usize, hint: u64) -> Result<u64> {
        need!("cuMemAddressReserve");
        let mut p = 0;
        // SAFETY: `p` is a valid out-pointer; the driver validates size and hint.
        let r = unsafe { sys::cuMemAddressReserve(&mut p, size, 0, hint, 0) };
        check(r, "cuMemAddressReserve")?;
        Ok(p)
    }

    /// `cuMemAddressFree`.
    pub(crate) fn address_free(p: u64, size: usize) -> Result<()> {
        need!("cuMemAddressFree");
        // SAFETY: the driver checks that the range is a reservation; no memory is accessed.
        let r = unsafe { sys::cuMemAddressFree(p, size) };
        check(r, "cuMemAddressFree")
    }

    /// `cuMemCreate`.
    pub(crate) fn create(size: usize, prop: &sys::CUmemAllocationProp) -> Result<u64> {
        need!("cuMemCreate");
        let mut h = 0;
        // SAFETY: valid pointers; the driver validates the properties.
        let r = unsafe { sys::cuMemCreate(&mut h, size, prop, 0) };
        check(r, "cuMemCreate")?;
        Ok(h)
    }

    /// `cuMemRelease`.
    ///
    /// # Safety
    /// `h` is a live handle owned by the caller, not used afterwards.
    pub(crate) unsafe fn release(h: u64) -> Result<()> {
        need!("cuMemRelease");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuMemRelease(h) }, "cuMemRelease")
    }

    /// `cuMemMap`.
    pub(crate) fn map(p: u64, size: usize, offset: usize, h: u64) -> Result<()> {
        need!("cuMemMap");
        // SAFETY: the driver checks that the range lies in a reservation and is unmapped.
        check(unsafe { sys::cuMemMap(p, size, offset, h, 0) }, "cuMemMap")
    }

    /// `cuMemUnmap`.
    ///
    /// # Safety
    /// Nothing uses the range any more.
    pub(crate) unsafe fn unmap(p: u64, size: usize) -> Result<()> {
        need!("cuMemUnmap");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuMemUnmap(p, size) }, "cuMemUnmap")
    }

    /// `cuMemSetAccess` for one device with protection `flags` (0, 1 or 3).
    pub(crate) fn set_access(p: u64, size: usize, ordinal: i32, flags: u32) -> Result<()> {
        need!("cuMemSetAccess");
        let flags = match flags {
            0 => sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE,
            1 => sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ,
            _ => sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let desc = sys::CUmemAccessDesc {
            location: mem::location(ordinal),
            flags,
        };
        // SAFETY: one valid descriptor; the driver checks that the range is mapped.
        let r = unsafe { sys::cuMemSetAccess(p, size, &desc, 1) };
        check(r, "cuMemSetAccess")
    }

    /// `cuMemGetAccess` for one device: the protection flags (0, 1 or 3).
    pub(crate) fn get_access(p: u64, ordinal: i32) -> Result<u64> {
        need!("cuMemGetAccess");
        let mut flags = 0u64;
        let loc = mem::location(ordinal);
        // SAFETY: valid pointers; the driver checks the address.
        let r = unsafe { sys::cuMemGetAccess(&mut flags, &loc, p) };
        check(r, "cuMemGetAccess")?;
        Ok(flags)
    }

    /// `cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR)`: a new descriptor owned by the
    /// caller.
    pub(crate) fn export_fd(h: u64) -> Result<std::os::fd::OwnedFd> {
        need!("cuMemExportToShareableHandle");
        let mut fd: i32 = -1;
        let ty = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        // SAFETY: for POSIX fds the out-value is an int; `fd` is a valid out-pointer.
        let r =
            unsafe { sys::cuMemExportToShareableHandle((&mut fd as *mut i32).cast(), h, ty, 0) };
        check(r, "cuMemExportToShareableHandle")?;
        if fd < 0 {
            return Err(Error::new(
                Errc::Runtime,
                "cuMemExportToShareableHandle returned no descriptor",
            ));
        }
        use std::os::fd::FromRawFd;
        // SAFETY: the driver created this descriptor for us; nobody else owns it.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// `cuMemImportFromShareableHandle(POSIX_FILE_DESCRIPTOR)`: the descriptor's value goes in
    /// the pointer argument (as NVIDIA's samples do). The caller keeps ownership of `fd`.
    pub(crate) fn import_fd(fd: std::os::fd::BorrowedFd<'_>) -> Result<u64> {
        need!("cuMemImportFromShareableHandle");
        use std::os::fd::AsRawFd;
        let mut h = 0;
        let ty = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        let raw = fd.as_raw_fd() as usize as *mut c_void;
        // SAFETY: the fd is open for the duration of the call (borrowed); the driver reads the
        // pointer argument as the integer descriptor and duplicates what it needs.
        let r = unsafe { sys::cuMemImportFromShareableHandle(&mut h, raw, ty) };
        check(r, "cuMemImportFromShareableHandle")?;
        Ok(h)
    }
}

/// Modules, functions and launches.
pub(crate) mod module {
    use super::*;

    /// `cuModuleLoadDataEx` with an error-log buffer; a failure becomes `Errc::Build` with the
    /// JIT log in the message. `image` is a NUL-terminated PTX text or a cubin/fatbin image.
    pub(crate) fn load(image: &[u8], what: &str) -> Result<sys::CUmodule> {
        need!("cuModuleLoadDataEx");
        let mut log = vec![0u8; 16384];
        let mut opts = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
        let mut m = std::ptr::null_mut();
        // SAFETY: the option arrays have 2 entries; the log buffer outlives the call and its
        // size is passed by value in the pointer slot, as the JIT API specifies; `image` is a
        // complete image (PTX callers append the NUL).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut m,
                image.as_ptr().cast(),
                2,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if r == sys::CUresult::CUDA_SUCCESS {
            return Ok(m);
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]).into_owned();
        let base = error(r, &format!("loading {what}"));
        let errc = if base.code() == Errc::Invalid {
            Errc::Build
        } else {
            base.code()
        };
        Err(Error::with_native(
            errc,
            if text.trim().is_empty() {
                base.message().to_string()
            } else {
                format!("{}:\n{text}", base.message())
            },
            base.native().cloned().expect("error() sets a native code"),
        ))
    }

    /// `cuModuleUnload`.
    ///
    /// # Safety
    /// `m` is live and none of its functions is used afterwards.
    pub(crate) unsafe fn unload(m: sys::CUmodule) -> Result<()> {
        need!("cuModuleUnload");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuModuleUnload(m) }, "cuModuleUnload")
    }

    /// `cuModuleGetFunction`.
    pub(crate) fn function(m: sys::CUmodule, name: &str) -> Result<sys::CUfunction> {
        need!("cuModuleGetFunction");
        let cname = CString::new(name)
            .map_err(|_| Error::invalid(format!("kernel name {name:?} contains NUL")))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: valid out-pointer and NUL-terminated name; `m` is live.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, m, cname.as_ptr()) };
        if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::invalid(format!(
                "no kernel named `{name}` in the bundle (CUDA C kernels must be declared extern \"C\")"
            )));
        }
        check(r, "cuModuleGetFunction")?;
        Ok(f)
    }

    /// The names of the module's kernels (`cuModuleEnumerateFunctions` + `cuFuncGetName`,
    /// CUDA 12.4+); `None` when the driver lacks them.
    pub(crate) fn function_names(m: sys::CUmodule) -> Option<Vec<String>> {
        if !(has_symbol("cuModuleGetFunctionCount")
            && has_symbol("cuModuleEnumerateFunctions")
            && has_symbol("cuFuncGetName"))
        {
            return None;
        }
        let mut n = 0u32;
        // SAFETY: valid out-pointer; `m` is live.
        if unsafe { sys::cuModuleGetFunctionCount(&mut n, m) } != sys::CUresult::CUDA_SUCCESS {
            return None;
        }
        let mut fs = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: the array holds `n` entries.
        if unsafe { sys::cuModuleEnumerateFunctions(fs.as_mut_ptr(), n, m) }
            != sys::CUresult::CUDA_SUCCESS
        {
            return None;
        }
        let mut names = Vec::with_capacity(fs.len());
        for f in fs {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: `f` is a function of the live module; `p` is a valid out-pointer.
            if unsafe { sys::cuFuncGetName(&mut p, f) } != sys::CUresult::CUDA_SUCCESS
                || p.is_null()
            {
                return None;
            }
            // SAFETY: the driver returns a NUL-terminated string owned by the module.
            names.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        }
        names.sort();
        Some(names)
    }

    /// The byte sizes of a function's parameters via `cuFuncGetParamInfo` (12.4+); `None`
    /// when the driver cannot tell.
    pub(crate) fn param_sizes(f: sys::CUfunction) -> Option<Vec<usize>> {
        if !has_symbol("cuFuncGetParamInfo") {
            return None;
        }
        let mut sizes = Vec::new();
        for i in 0..4096usize {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: valid out-pointers; an index past the last parameter is an error.
            match unsafe { sys::cuFuncGetParamInfo(f, i, &mut off, &mut size) } {
                sys::CUresult::CUDA_SUCCESS => sizes.push(size),
                sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
                _ => return None,
            }
        }
        None
    }

    /// The most threads a block of function `f` may have on its device (its registers and
    /// static shared memory bound it below the device's limit); `None` when the driver
    /// cannot tell.
    pub(crate) fn max_threads_per_block(f: sys::CUfunction) -> Option<u32> {
        if !has_symbol("cuFuncGetAttribute") {
            return None;
        }
        let mut v: std::ffi::c_int = 0;
        // SAFETY: a valid out-pointer and a function of a loaded module.
        let r = unsafe {
            sys::cuFuncGetAttribute(
                &mut v,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                f,
            )
        };
        (r == sys::CUresult::CUDA_SUCCESS && v > 0).then_some(v as u32)
    }

    /// `cuLaunchKernel`.
    ///
    /// # Safety
    /// `params` points to one pointer per kernel parameter, each to a value of that
    /// parameter's size; memory the kernel touches stays valid until the stream passes.
    pub(crate) unsafe fn launch(
        f: sys::CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        s: sys::CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        need!("cuLaunchKernel");
        // SAFETY: guaranteed by the caller.
        let r = unsafe {
            sys::cuLaunchKernel(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                s,
                params,
                std::ptr::null_mut(),
            )
        };
        check(r, "cuLaunchKernel")
    }
}

/// NVRTC, loaded on demand; its absence only disables CUDA C sources.
pub(crate) mod graph {
    use super::*;

    /// One kernel node: a function, its geometry and its parameter pointers.
    pub(crate) struct KernelNode {
        pub(crate) func: sys::CUfunction,
        pub(crate) grid: [u32; 3],
        pub(crate) block: [u32; 3],
        pub(crate) shared: u32,
        pub(crate) params: *mut *mut c_void,
    }

    /// A graph of `nodes` in a chain (each after the one before), instantiated
    /// (`cuGraphCreate`, `cuGraphAddKernelNode_v2`, `cuGraphInstantiateWithFlags`); the
    /// template is destroyed once instantiated.
    ///
    /// # Safety
    /// The context is current; each node's `params` is as [`module::launch`]'s (the driver
    /// copies the values while adding the node), and the memory its kernel touches stays
    /// valid for every launch of the graph.
    pub(crate) unsafe fn build(nodes: &[KernelNode]) -> Result<sys::CUgraphExec> {
        need!("cuGraphCreate");
        need!("cuGraphAddKernelNode_v2");
        need!("cuGraphInstantiateWithFlags");
        need!("cuGraphDestroy");
        let mut g = std::ptr::null_mut();
        // SAFETY: an out-pointer and no flags.
        check(unsafe { sys::cuGraphCreate(&mut g, 0) }, "cuGraphCreate")?;
        let built = (|| {
            let mut last: Option<sys::CUgraphNode> = None;
            for n in nodes {
                let p = sys::CUDA_KERNEL_NODE_PARAMS_v2 {
                    func: n.func,
                    gridDimX: n.grid[0],
                    gridDimY: n.grid[1],
                    gridDimZ: n.grid[2],
                    blockDimX: n.block[0],
                    blockDimY: n.block[1],
                    blockDimZ: n.block[2],
                    sharedMemBytes: n.shared,
                    kernelParams: n.params,
                    extra: std::ptr::null_mut(),
                    kern: std::ptr::null_mut(),
                    ctx: std::ptr::null_mut(),
                };
                let mut node = std::ptr::null_mut();
                let (deps, count) = match &last {
                    Some(l) => (l as *const sys::CUgraphNode, 1),
                    None => (std::ptr::null(), 0),
                };
                // SAFETY: `g` is a live graph, `deps` points to `count` of its nodes, and the
                // parameters are the caller's (# Safety).
                let r = unsafe { sys::cuGraphAddKernelNode_v2(&mut node, g, deps, count, &p) };
                check(r, "cuGraphAddKernelNode")?;
                last = Some(node);
            }
            let mut exec = std::ptr::null_mut();
            // SAFETY: `g` is a complete graph; an out-pointer and no flags.
            let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, g, 0) };
            check(r, "cuGraphInstantiateWithFlags").map(|()| exec)
        })();
        // SAFETY: `g` is ours, and nothing refers to it any more (an instantiated graph is
        // independent of its template).
        unsafe { sys::cuGraphDestroy(g) };
        built
    }

    /// `cuGraphLaunch`.
    ///
    /// # Safety
    /// `exec` is a live graph of the stream's context; what its kernels touch is valid until
    /// the stream passes.
    pub(crate) unsafe fn launch(exec: sys::CUgraphExec, s: sys::CUstream) -> Result<()> {
        need!("cuGraphLaunch");
        // SAFETY: guaranteed by the caller.
        check(unsafe { sys::cuGraphLaunch(exec, s) }, "cuGraphLaunch")
    }

    /// `cuGraphExecDestroy`.
    ///
    /// # Safety
    /// `exec` is live and not destroyed before (a replay still running is released by the
    /// driver when it completes).
    pub(crate) unsafe fn destroy(exec: sys::CUgraphExec) {
        if has_symbol("cuGraphExecDestroy") {
            // SAFETY: guaranteed by the caller.
            unsafe { sys::cuGraphExecDestroy(exec) };
        }
    }
}

pub(crate) mod nvrtc {
    use super::*;
    use cudarc::nvrtc::sys as nv;

    /// Whether NVRTC can be loaded. When it is not on the loader path, it is looked for in
    /// `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64` and `/usr/local/cuda/lib64` and preloaded there,
    /// so that cudarc's own `dlopen` by soname finds it.
    pub(crate) fn available() -> bool {
        static PRESENT: OnceLock<bool> = OnceLock::new();
        *PRESENT.get_or_init(|| {
            // SAFETY: only tries to dlopen candidate library names.
            if unsafe { nv::is_culib_present() } {
                return true;
            }
            let mut dirs: Vec<std::path::PathBuf> = Vec::new();
            for var in ["CUDA_HOME", "CUDA_PATH"] {
                if let Some(v) = std::env::var_os(var) {
                    dirs.push(std::path::PathBuf::from(v).join("lib64"));
                }
            }
            dirs.push("/usr/local/cuda/lib64".into());
            for dir in dirs {
                for name in ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] {
                    let path = dir.join(name);
                    if !path.exists() {
                        continue;
                    }
                    // SAFETY: loading NVRTC runs only its own initialisers.
                    if let Ok(lib) = unsafe { libloading::Library::new(&path) } {
                        // Keep it loaded for the life of the process: cudarc resolves the
                        // same soname to this copy.
                        std::mem::forget(lib);
                        // SAFETY: as above.
                        if unsafe { nv::is_culib_present() } {
                            return true;
                        }
                    }
                }
            }
            false
        })
    }

    fn nv_check(r: nv::nvrtcResult, what: &str) -> Result<()> {
        if r == nv::nvrtcResult::NVRTC_SUCCESS {
            return Ok(());
        }
        let errc = match r {
            nv::nvrtcResult::NVRTC_ERROR_OUT_OF_MEMORY => Errc::MemoryAllocation,
            nv::nvrtcResult::NVRTC_ERROR_INVALID_OPTION
            | nv::nvrtcResult::NVRTC_ERROR_COMPILATION => Errc::Build,
            nv::nvrtcResult::NVRTC_ERROR_INVALID_INPUT => Errc::Invalid,
            _ => Errc::Runtime,
        };
        Err(Error::with_native(
            errc,
            format!("{what} failed with {r:?}"),
            NativeError {
                backend: BackendKind::Cuda,
                code: i64::from(r as u32),
                name: Some(format!("{r:?}")),
            },
        ))
    }

    struct Program(nv::nvrtcProgram);

    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
            let r = unsafe { nv::nvrtcDestroyProgram(&mut self.0) };
            if r != nv::nvrtcResult::NVRTC_SUCCESS {
                log::warn!("nvrtcDestroyProgram failed: {r:?}");
            }
        }
    }

    /// Compiles CUDA C++ `source` to a cubin for `sm_{arch}` with extra `options`. A compile
    /// error is `Errc::Build` with the NVRTC log in the message.
    pub(crate) fn compile_cubin(
        source: &str,
        arch: (i32, i32),
        options: &[String],
    ) -> Result<Vec<u8>> {
        if !available() {
            return Err(Error::new(
                Errc::FeatureNotSupported,
                "NVRTC (libnvrtc) is not installed: CUDA C sources cannot be compiled (PTX and cubin still load)",
            ));
        }
        let src =
            CString::new(source).map_err(|_| Error::invalid("CUDA source contains a NUL byte"))?;
        let mut prog = Program(std::ptr::null_mut());
        // SAFETY: valid out-pointer and NUL-terminated strings; no headers are passed.
        let r = unsafe {
            nv::nvrtcCreateProgram(
                &mut prog.0,
                src.as_ptr(),
                c"sycl_rs_kernel.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        nv_check(r, "nvrtcCreateProgram")?;
        let mut opts: Vec<CString> = Vec::new();
        if !options
            .iter()
            .any(|o| o.starts_with("-arch") || o.starts_with("--gpu-architecture"))
        {
            opts.push(CString::new(format!("-arch=sm_{}{}", arch.0, arch.1)).expect("no NUL"));
        }
        for o in options {
            opts.push(
                CString::new(o.as_str())
                    .map_err(|_| Error::invalid("build option contains a NUL byte"))?,
            );
        }
        let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: `ptrs` holds `len` NUL-terminated strings that outlive the call.
        let r = unsafe { nv::nvrtcCompileProgram(prog.0, ptrs.len() as i32, ptrs.as_ptr()) };
        if r != nv::nvrtcResult::NVRTC_SUCCESS {
            let log = program_log(&prog).unwrap_or_default();
            let base = nv_check(r, "nvrtcCompileProgram").expect_err("not success");
            return Err(Error::with_native(
                Errc::Build,
                format!("{}; NVRTC log:\n{log}", base.message()),
                base.native().cloned().expect("nv_check sets a native code"),
            ));
        }
        let mut size = 0usize;
        // SAFETY: valid out-pointer; the program compiled.
        let r = unsafe { nv::nvrtcGetCUBINSize(prog.0, &mut size) };
        nv_check(r, "nvrtcGetCUBINSize")?;
        let mut cubin = vec![0u8; size];
        // SAFETY: the buffer holds `size` bytes.
        let r = unsafe { nv::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) };
        nv_check(r, "nvrtcGetCUBIN")?;
        if cubin.is_empty() {
            return Err(Error::new(
                Errc::Build,
                "NVRTC produced no cubin (was a virtual architecture requested?)",
            ));
        }
        Ok(cubin)
    }

    fn program_log(prog: &Program) -> Result<String> {
        let mut size = 0usize;
        // SAFETY: valid out-pointer.
        let r = unsafe { nv::nvrtcGetProgramLogSize(prog.0, &mut size) };
        nv_check(r, "nvrtcGetProgramLogSize")?;
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: the buffer holds at least `size` bytes.
        let r = unsafe { nv::nvrtcGetProgramLog(prog.0, buf.as_mut_ptr().cast()) };
        nv_check(r, "nvrtcGetProgramLog")?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_sycl_errc() {
        use sys::CUresult::*;
        assert_eq!(errc_of(CUDA_ERROR_OUT_OF_MEMORY), Errc::MemoryAllocation);
        assert_eq!(errc_of(CUDA_ERROR_INVALID_VALUE), Errc::Invalid);
        assert_eq!(errc_of(CUDA_ERROR_INVALID_HANDLE), Errc::Invalid);
        assert_eq!(errc_of(CUDA_ERROR_NOT_SUPPORTED), Errc::FeatureNotSupported);
        assert_eq!(errc_of(CUDA_ERROR_INVALID_PTX), Errc::Build);
        assert_eq!(errc_of(CUDA_ERROR_NO_BINARY_FOR_GPU), Errc::Build);
        assert_eq!(errc_of(CUDA_ERROR_ILLEGAL_ADDRESS), Errc::Kernel);
        assert_eq!(errc_of(CUDA_ERROR_NO_DEVICE), Errc::Platform);
        assert_eq!(errc_of(CUDA_ERROR_UNKNOWN), Errc::Runtime);
    }

    #[test]
    fn errors_keep_the_native_code() {
        // Without a driver the name falls back to the enum's spelling; with one, the driver's
        // own name is used, which is the same text.
        let e = error(
            sys::CUresult::CUDA_ERROR_INVALID_CONTEXT,
            "cuIpcOpenMemHandle_v2",
        );
        assert_eq!(e.code(), Errc::Invalid);
        let n = e.native().unwrap();
        assert_eq!(n.backend, BackendKind::Cuda);
        assert_eq!(n.code, 201);
        assert_eq!(n.name.as_deref(), Some("CUDA_ERROR_INVALID_CONTEXT"));
        assert!(e.message().contains("cuIpcOpenMemHandle_v2"));
    }

    #[test]
    fn missing_symbols_are_errors_not_panics() {
        assert!(!has_symbol("cuThisFunctionDoesNotExist"));
        let e = missing_symbol("cuThisFunctionDoesNotExist");
        assert_eq!(e.code(), Errc::FeatureNotSupported);
    }
}
