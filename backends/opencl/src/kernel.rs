//! Kernel bundles (OpenCL C source or SPIR-V) and kernel launches.
//!
//! A [`Kernel`] owns one `cl_kernel`. Setting arguments and enqueueing must not interleave
//! between threads on one `cl_kernel`, so a launch holds the kernel's lock from the first
//! `clSetKernelArg` to `clEnqueueNDRangeKernel`. The lock also guards a cache of the scalar and
//! local-memory arguments last set: a launch that repeats them makes no `clSetKernelArg` call
//! for them (OpenCL captures argument values at enqueue time, so reusing them is sound).
//! Pointer arguments are set at every launch: a USM pointer equal to the last one may name a
//! new allocation at a freed one's address, and Intel's CPU runtime keeps the object it resolved
//! the old pointer to (launching with the stale object crashed inside the driver).

use std::any::Any;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

use sycl_backend::{
    Aspect, BackendKind, Errc, Error, KernelArg, KernelSource, LaunchRange, Result,
};

use crate::context::{ContextShared, ContextUsm};
use crate::device::Device;
use crate::queue::Queue;
use crate::result::{check, error, info_bytes, info_string, InfoFn};
use crate::sys::*;
use crate::Handle;

/// A built program.
pub struct KernelBundle {
    ctx: Arc<ContextShared>,
    program: Handle,
    names: Vec<String>,
}

impl KernelBundle {
    pub(crate) fn build(
        ctx: &Arc<ContextShared>,
        devices: &[Arc<dyn sycl_backend::Device>],
        source: &KernelSource<'_>,
        options: &str,
    ) -> Result<Self> {
        let api = ctx.api;
        let devices: &[Arc<dyn sycl_backend::Device>] = if devices.is_empty() {
            &ctx.devices
        } else {
            devices
        };
        let mut raw_devices = Vec::with_capacity(devices.len());
        for d in devices {
            let dev = sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::OpenCl)?;
            if ctx.index_of_raw(dev.id.0).is_none() {
                return Err(Error::invalid(
                    "a kernel bundle's device is not in the context",
                ));
            }
            raw_devices.push(dev.id.0);
        }
        let need = |aspect: Aspect, what: &str| -> Result<()> {
            match devices.iter().find(|d| !d.info().has(aspect)) {
                Some(_) => Err(Error::unsupported(aspect, what)),
                None => Ok(()),
            }
        };
        let mut rc = CL_SUCCESS;
        let program = match source {
            KernelSource::OpenClC(src) => {
                need(
                    Aspect::ExtOneapiKernelCompilerOpencl,
                    "building OpenCL C kernels",
                )?;
                let ptr = src.as_ptr().cast::<std::ffi::c_char>();
                let len = src.len();
                // SAFETY: one string of `len` bytes (need not be NUL-terminated when a length
                // is given); live context.
                unsafe { (api.clCreateProgramWithSource)(ctx.raw.0, 1, &ptr, &len, &mut rc) }
            }
            KernelSource::SpirV(il) => {
                need(
                    Aspect::ExtOneapiKernelCompilerSpirv,
                    "building SPIR-V kernels",
                )?;
                let Some(create) = api.clCreateProgramWithIL else {
                    return Err(Error::unsupported(
                        Aspect::ExtOneapiKernelCompilerSpirv,
                        "building SPIR-V kernels",
                    ));
                };
                // SAFETY: `il` is valid for its length; the driver copies it.
                unsafe { create(ctx.raw.0, il.as_ptr().cast(), il.len(), &mut rc) }
            }
            other => {
                let aspect = match other {
                    KernelSource::CudaC(_) | KernelSource::Ptx(_) | KernelSource::Cubin(_) => {
                        Aspect::ExtSyclRsKernelCompilerCuda
                    }
                    _ => Aspect::OnlineCompiler,
                };
                return Err(Error::unsupported(
                    aspect,
                    format!("building {} kernels", other.language()),
                ));
            }
        };
        if rc != CL_SUCCESS {
            let e = error(rc, "creating the program");
            return Err(if e.code() == Errc::Invalid {
                Error::with_native(Errc::Build, e.message(), crate::result::native(rc))
            } else {
                e
            });
        }
        let mut bundle = KernelBundle {
            ctx: ctx.clone(),
            program: Handle(program),
            names: Vec::new(),
        };
        let opts = CString::new(options)
            .map_err(|_| Error::invalid("build options contain a NUL byte"))?;
        // SAFETY: live program and devices of its context; synchronous build (no callback).
        let rc = unsafe {
            (api.clBuildProgram)(
                program,
                raw_devices.len() as cl_uint,
                raw_devices.as_ptr(),
                opts.as_ptr(),
                None,
                std::ptr::null_mut(),
            )
        };
        if rc != CL_SUCCESS {
            let mut log = String::new();
            for (d, &raw) in devices.iter().zip(&raw_devices) {
                let f = |param: cl_uint, size: usize, value: *mut c_void, ret: *mut usize| {
                    // SAFETY: live program and device; helper-sized buffer.
                    unsafe { (api.clGetProgramBuildInfo)(program, raw, param, size, value, ret) }
                };
                let f: InfoFn<'_> = &f;
                if let Ok(text) = info_string(f, CL_PROGRAM_BUILD_LOG, "clGetProgramBuildInfo") {
                    if !text.is_empty() {
                        log.push_str(&format!(
                            "\n--- build log for {} ---\n{text}",
                            d.info().name
                        ));
                    }
                }
            }
            let errc = if rc == -3 {
                Errc::FeatureNotSupported
            } else {
                Errc::Build
            };
            return Err(Error::with_native(
                errc,
                format!("building the {} program failed{log}", source.language()),
                crate::result::native(rc),
            ));
        }
        let f = |param: cl_uint, size: usize, value: *mut c_void, ret: *mut usize| {
            // SAFETY: live, built program; helper-sized buffer.
            unsafe { (api.clGetProgramInfo)(program, param, size, value, ret) }
        };
        let f: InfoFn<'_> = &f;
        let names = info_bytes(
            f,
            CL_PROGRAM_KERNEL_NAMES,
            "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)",
        )?;
        let end = names.iter().position(|&b| b == 0).unwrap_or(names.len());
        bundle.names = String::from_utf8_lossy(&names[..end])
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(bundle)
    }

    /// The `cl_program`.
    pub fn raw(&self) -> cl_program {
        self.program.0
    }
}

impl Drop for KernelBundle {
    fn drop(&mut self) {
        // SAFETY: the bundle owns one reference to the program (kernels keep their own).
        let rc = unsafe { (self.ctx.api.clReleaseProgram)(self.program.0) };
        if rc != CL_SUCCESS {
            log::error!("opencl: {}", error(rc, "clReleaseProgram"));
        }
    }
}

impl sycl_backend::KernelBundle for KernelBundle {
    fn kernel_names(&self) -> Vec<String> {
        self.names.clone()
    }
    fn kernel(&self, name: &str) -> Result<Arc<dyn sycl_backend::Kernel>> {
        if !self.names.iter().any(|n| n == name) {
            return Err(Error::invalid(format!(
                "the bundle has no kernel named `{name}` (it has {:?})",
                self.names
            )));
        }
        let api = self.ctx.api;
        let cname =
            CString::new(name).map_err(|_| Error::invalid("kernel name contains a NUL byte"))?;
        let mut rc = CL_SUCCESS;
        // SAFETY: live, built program; NUL-terminated name.
        let raw = unsafe { (api.clCreateKernel)(self.program.0, cname.as_ptr(), &mut rc) };
        if rc == CL_INVALID_KERNEL_NAME {
            return Err(Error::with_native(
                Errc::Invalid,
                format!("no kernel `{name}`"),
                crate::result::native(rc),
            ));
        }
        check(rc, "clCreateKernel")?;
        let mut kernel = Kernel {
            ctx: self.ctx.clone(),
            raw: Handle(raw),
            name: name.to_owned(),
            num_args: 0,
            cache: Mutex::new(Vec::new()),
        };
        let mut num_args: cl_uint = 0;
        // SAFETY: live kernel; cl_uint out-value.
        let rc = unsafe {
            (api.clGetKernelInfo)(
                raw,
                CL_KERNEL_NUM_ARGS,
                std::mem::size_of::<cl_uint>(),
                (&raw mut num_args).cast(),
                std::ptr::null_mut(),
            )
        };
        check(rc, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)")?;
        if let (ContextUsm::Intel(_), Some(exec_info)) = (&self.ctx.usm, api.clSetKernelExecInfo) {
            // Let the kernel reach any USM allocation through pointers stored in memory, as
            // DPC++ does; without these only pointer arguments are guaranteed to work.
            let yes: cl_bool = CL_TRUE;
            for param in [
                CL_KERNEL_EXEC_INFO_INDIRECT_HOST_ACCESS_INTEL,
                CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL,
                CL_KERNEL_EXEC_INFO_INDIRECT_SHARED_ACCESS_INTEL,
            ] {
                // SAFETY: live kernel; the value is a cl_bool.
                let rc = unsafe {
                    exec_info(
                        raw,
                        param,
                        std::mem::size_of::<cl_bool>(),
                        (&raw const yes).cast(),
                    )
                };
                if rc != CL_SUCCESS {
                    log::debug!(
                        "opencl: clSetKernelExecInfo({param:#x}): {}",
                        error(rc, "clSetKernelExecInfo")
                    );
                }
            }
        }
        kernel.num_args = num_args;
        kernel.cache = Mutex::new(vec![ArgCache::Unset; num_args as usize]);
        Ok(Arc::new(kernel))
    }
}

/// The value last given to one argument.
#[derive(Clone, Debug, PartialEq)]
enum ArgCache {
    Unset,
    Scalar(Vec<u8>),
    Local(usize),
}

/// A kernel of a bundle.
pub struct Kernel {
    ctx: Arc<ContextShared>,
    raw: Handle,
    name: String,
    num_args: cl_uint,
    cache: Mutex<Vec<ArgCache>>,
}

impl Kernel {
    /// The `cl_kernel`.
    pub fn raw(&self) -> cl_kernel {
        self.raw.0
    }

    fn set_arg(&self, index: cl_uint, arg: &KernelArg<'_>) -> Result<()> {
        let api = self.ctx.api;
        let k = self.raw.0;
        let rc = match *arg {
            // SAFETY: `bytes` is valid for its length; the driver copies it.
            KernelArg::Scalar(bytes) => unsafe {
                (api.clSetKernelArg)(k, index, bytes.len(), bytes.as_ptr().cast())
            },
            // SAFETY: a NULL value with a size declares local memory of that size.
            KernelArg::Local(n) => unsafe { (api.clSetKernelArg)(k, index, n, std::ptr::null()) },
            KernelArg::Pointer(p) => match &self.ctx.usm {
                // SAFETY: the pointer is only recorded; the caller keeps it valid until the
                // launch completes.
                ContextUsm::Intel(f) => unsafe {
                    (f.set_arg_mem_pointer)(k, index, p as *const c_void)
                },
                ContextUsm::Svm { .. } => match api.clSetKernelArgSVMPointer {
                    // SAFETY: as above.
                    Some(set) => unsafe { set(k, index, p as *const c_void) },
                    None => {
                        return Err(Error::unsupported(
                            Aspect::UsmDeviceAllocations,
                            "USM kernel arguments",
                        ))
                    }
                },
                ContextUsm::None => {
                    return Err(Error::unsupported(
                        Aspect::UsmDeviceAllocations,
                        "USM kernel arguments",
                    ));
                }
            },
        };
        if rc != CL_SUCCESS {
            let e = error(rc, "setting a kernel argument");
            let errc = if e.code() == Errc::Invalid || e.code() == Errc::Runtime {
                Errc::KernelArgument
            } else {
                e.code()
            };
            return Err(Error::with_native(
                errc,
                format!(
                    "setting argument {index} of kernel `{}` to {arg:?} failed",
                    self.name
                ),
                crate::result::native(rc),
            ));
        }
        Ok(())
    }

    /// Sets `args` (skipping those unchanged since the last launch) and enqueues the kernel.
    ///
    /// # Safety
    /// Pointer arguments stay valid until the returned event completes.
    pub(crate) unsafe fn launch(
        &self,
        queue: &Queue,
        range: LaunchRange,
        args: &[KernelArg<'_>],
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        if !Arc::ptr_eq(&self.ctx, &queue.ctx) {
            return Err(Error::invalid(format!(
                "kernel `{}` belongs to another context than the queue",
                self.name
            )));
        }
        if args.len() != self.num_args as usize {
            return Err(Error::new(
                Errc::KernelArgument,
                format!(
                    "kernel `{}` takes {} arguments, {} given",
                    self.name,
                    self.num_args,
                    args.len()
                ),
            ));
        }
        check_launch(
            &range,
            sycl_backend::Queue::device(queue).info(),
            queue.address_bits,
        )?;
        let dims = range.dims as cl_uint;
        let local = range.local;
        let local_ptr = local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr());
        let global = range.global;

        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for (i, arg) in args.iter().enumerate() {
            let same = match (&cache[i], arg) {
                (ArgCache::Scalar(old), KernelArg::Scalar(new)) => old.as_slice() == *new,
                (ArgCache::Local(old), KernelArg::Local(new)) => old == new,
                _ => false,
            };
            if same {
                continue;
            }
            if let Err(e) = self.set_arg(i as cl_uint, arg) {
                cache[i] = ArgCache::Unset;
                return Err(e);
            }
            match (&mut cache[i], arg) {
                (ArgCache::Scalar(old), KernelArg::Scalar(new)) => {
                    old.clear();
                    old.extend_from_slice(new);
                }
                (slot, KernelArg::Scalar(new)) => *slot = ArgCache::Scalar(new.to_vec()),
                (slot, KernelArg::Pointer(_)) => *slot = ArgCache::Unset,
                (slot, KernelArg::Local(n)) => *slot = ArgCache::Local(*n),
            }
        }
        let k = self.raw.0;
        let q = queue.q.raw.0;
        let api = self.ctx.api;
        let res = queue.submit(deps, "clEnqueueNDRangeKernel", |n, list, ev| {
            // SAFETY: live queue and kernel of one context; `global`/`local` hold `dims`
            // entries; argument values were set above under the same lock.
            unsafe {
                (api.clEnqueueNDRangeKernel)(
                    q,
                    k,
                    dims,
                    std::ptr::null(),
                    global.as_ptr(),
                    local_ptr,
                    n,
                    list,
                    ev,
                )
            }
        });
        drop(cache);
        res.map_err(|e| e.context(format!("launching kernel `{}` over {range:?}", self.name)))
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: the kernel owns its one reference.
        let rc = unsafe { (self.ctx.api.clReleaseKernel)(self.raw.0) };
        if rc != CL_SUCCESS {
            log::error!("opencl: {}", error(rc, "clReleaseKernel"));
        }
    }
}

/// The most work-groups one launch may have on an OpenCL device. OpenCL reports no such
/// limit, and PoCL 3.1's pthread device crashes the process (SIGFPE, SIGILL or SIGABRT in its
/// scheduler) given 2^32 or more; no useful launch needs that many, so every OpenCL device
/// gets the same bound.
pub(crate) const MAX_WORK_GROUPS: u64 = u32::MAX as u64;

/// Checks `range` against what an OpenCL device takes, so that the driver is never given a
/// launch it cannot represent: the work-group extents against `CL_DEVICE_MAX_WORK_ITEM_SIZES`
/// and `CL_DEVICE_MAX_WORK_GROUP_SIZE`, every global extent against the device's `size_t`
/// (`CL_DEVICE_ADDRESS_BITS`), and the number of work-groups against [`MAX_WORK_GROUPS`].
/// Without a local range the driver picks the groups, so the work-item count itself must stay
/// within that bound. `Errc::NdRange` on failure.
pub(crate) fn check_launch(
    range: &LaunchRange,
    info: &sycl_backend::DeviceInfo,
    address_bits: u32,
) -> Result<()> {
    range.validate(info.max_work_group_size)?;
    let dims = usize::from(range.dims);
    // (0: a driver that did not say; no narrower bound than the host's.)
    let size_t_max = match address_bits {
        1..=63 => (1u64 << address_bits) - 1,
        _ => u64::MAX,
    };
    for (d, &extent) in range.global.iter().enumerate().take(dims) {
        if extent as u64 > size_t_max {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "global extent {extent} in dimension {d} exceeds the device's \
                     {address_bits}-bit size_t"
                ),
            ));
        }
    }
    let groups = match range.local {
        Some(local) => {
            let limits = info.max_work_item_sizes.iter();
            for (d, (&extent, &most)) in local.iter().zip(limits).enumerate().take(dims) {
                if most > 0 && extent > most {
                    return Err(Error::new(
                        Errc::NdRange,
                        format!(
                            "work-group extent {extent} in dimension {d} exceeds the device \
                             maximum {most}"
                        ),
                    ));
                }
            }
            // `validate` checked that each local extent divides its global one.
            (0..dims).try_fold(1u64, |acc, d| {
                acc.checked_mul((range.global[d] / local[d]) as u64)
            })
        }
        None => (0..dims).try_fold(1u64, |acc, d| acc.checked_mul(range.global[d] as u64)),
    };
    match groups {
        Some(g) if g <= MAX_WORK_GROUPS => Ok(()),
        _ => Err(Error::new(
            Errc::NdRange,
            format!(
                "global range {:?} {} more than {MAX_WORK_GROUPS} work-groups, more than an \
                 OpenCL launch may have{}",
                &range.global[..dims],
                if range.local.is_some() {
                    "makes"
                } else {
                    "may make"
                },
                if range.local.is_some() {
                    ""
                } else {
                    ": give an nd-range with larger groups"
                }
            ),
        )),
    }
}

impl sycl_backend::Kernel for Kernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn num_args(&self) -> Option<u32> {
        Some(self.num_args)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(address_bits: u32) -> (sycl_backend::DeviceInfo, u32) {
        let info = sycl_backend::DeviceInfo {
            name: "test".into(),
            vendor: String::new(),
            vendor_id: 0,
            driver_version: String::new(),
            version: String::new(),
            device_type: sycl_backend::DeviceType::Cpu,
            max_compute_units: 2,
            global_mem_size: 1 << 30,
            local_mem_size: 1 << 15,
            max_mem_alloc_size: 1 << 30,
            max_work_group_size: 4096,
            max_work_item_sizes: [4096, 4096, 4096],
            uuid: None,
            aspects: Vec::new(),
            fp32_correctly_rounded_divide_sqrt: false,
            sub_group_sizes: Vec::new(),
            spirv_sub_group_shuffle: false,
            atomic_caps: sycl_backend::AtomicCaps::RELAXED,
            opencl_c_work_group_collectives: false,
        };
        (info, address_bits)
    }

    fn range(dims: u8, global: [usize; 3], local: Option<[usize; 3]>) -> LaunchRange {
        LaunchRange {
            dims,
            global,
            local,
        }
    }

    /// Issue 29, item 3: the bounds of an OpenCL launch, at and just past each one.
    #[test]
    fn launches_are_checked_against_the_device() {
        let (info, bits) = cpu(64);
        let ok = |r: LaunchRange| check_launch(&r, &info, bits);
        let refused = |r: LaunchRange| {
            let e = check_launch(&r, &info, bits).unwrap_err();
            assert_eq!(e.code(), Errc::NdRange, "{r:?}: {e}");
        };
        let most = MAX_WORK_GROUPS as usize;
        // Work-groups: up to 2^32 - 1 of them, in any shape.
        ok(range(1, [most * 4096, 1, 1], Some([4096, 1, 1]))).unwrap();
        refused(range(1, [(most + 1) * 4096, 1, 1], Some([4096, 1, 1])));
        refused(range(1, [1 << 44, 1, 1], Some([4096, 1, 1])));
        refused(range(2, [1 << 20, 1 << 20, 1], Some([16, 16, 1])));
        ok(range(2, [1 << 20, 1 << 20, 1], Some([64, 64, 1]))).unwrap();
        // Without a local range the driver picks the groups: the work-items must fit instead.
        ok(range(1, [most, 1, 1], None)).unwrap();
        refused(range(1, [most + 1, 1, 1], None));
        // A work-group extent past CL_DEVICE_MAX_WORK_ITEM_SIZES.
        let (mut narrow, _) = cpu(64);
        narrow.max_work_item_sizes = [4096, 16, 16];
        let e = check_launch(&range(2, [64, 64, 1], Some([2, 32, 1])), &narrow, 64).unwrap_err();
        assert_eq!(e.code(), Errc::NdRange, "{e}");
        // A global extent past a 32-bit device's size_t.
        let (info32, _) = cpu(32);
        check_launch(&range(1, [u32::MAX as usize, 1, 1], None), &info32, 32).unwrap();
        let e =
            check_launch(&range(1, [1 << 32, 1, 1], Some([4096, 1, 1])), &info32, 32).unwrap_err();
        assert_eq!(e.code(), Errc::NdRange, "{e}");
    }
}
