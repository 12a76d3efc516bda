//! Kernel bundles from SPIR-V (`zeModuleCreate` with `ZE_MODULE_FORMAT_IL_SPIRV`, one module
//! per device) and kernels (one `ze_kernel_handle_t` per device), plus the pure functions that
//! turn SYCL launches into Level Zero arguments and group counts.

use std::any::Any;
use std::sync::{Arc, Mutex};

use level_zero_sys::*;
use sycl_backend::{Errc, Error, KernelArg, LaunchRange, Result};

use crate::context::ContextInner;
use crate::result::{self, check};

/// One argument as `zeKernelSetArgumentValue` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgValue {
    /// `argSize`.
    pub size: usize,
    /// The bytes behind `pArgValue`; `None` passes a null pointer (local memory).
    pub bytes: Option<Vec<u8>>,
}

/// Turns SYCL kernel arguments into Level Zero ones: scalars by their bytes, USM pointers as
/// 8 bytes, local memory as (size, null). Empty scalars and zero-byte local memory are
/// `Errc::KernelArgument`.
pub fn build_args(args: &[KernelArg<'_>]) -> Result<Vec<ArgValue>> {
    args.iter()
        .enumerate()
        .map(|(i, a)| match *a {
            KernelArg::Scalar([]) => Err(Error::new(
                Errc::KernelArgument,
                format!("argument {i} is an empty scalar"),
            )),
            KernelArg::Scalar(b) => Ok(ArgValue {
                size: b.len(),
                bytes: Some(b.to_vec()),
            }),
            KernelArg::Pointer(p) => Ok(ArgValue {
                size: 8,
                bytes: Some(p.to_ne_bytes().to_vec()),
            }),
            KernelArg::Local(0) => Err(Error::new(
                Errc::KernelArgument,
                format!("argument {i} asks for 0 bytes of local memory"),
            )),
            KernelArg::Local(n) => Ok(ArgValue {
                size: n,
                bytes: None,
            }),
        })
        .collect()
}

/// Checks the number of arguments against what the kernel declares (when known):
/// `Errc::KernelArgument` on a mismatch.
pub fn check_arg_count(name: &str, expected: Option<u32>, given: usize) -> Result<()> {
    match expected {
        Some(n) if n as usize != given => Err(Error::new(
            Errc::KernelArgument,
            format!("kernel `{name}` takes {n} arguments, {given} given"),
        )),
        _ => Ok(()),
    }
}

/// Group size and group count of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// `zeKernelSetGroupSize` arguments.
    pub group_size: [u32; 3],
    /// `zeCommandListAppendLaunchKernel` group counts.
    pub group_count: ze_group_count_t,
}

fn to_u32(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| {
        Error::new(
            Errc::NdRange,
            format!("{what} {v} does not fit Level Zero's 32 bits"),
        )
    })
}

/// The global range as `u32`s (unused dimensions 1), for `zeKernelSuggestGroupSize`.
pub fn global_u32(range: &LaunchRange) -> Result<[u32; 3]> {
    if !(1..=3).contains(&range.dims) {
        return Err(Error::new(
            Errc::NdRange,
            format!("{} dimensions (1 to 3 allowed)", range.dims),
        ));
    }
    let mut g = [1u32; 3];
    for (out, &extent) in g
        .iter_mut()
        .zip(&range.global)
        .take(usize::from(range.dims))
    {
        if extent == 0 {
            return Err(Error::new(
                Errc::NdRange,
                format!("global range {:?} has a zero extent", range.global),
            ));
        }
        *out = to_u32(extent, "global range extent")?;
    }
    Ok(g)
}

/// Plans a launch: with a local range, checks it (`LaunchRange::validate`) and divides; without
/// one, uses `suggested` (what `zeKernelSuggestGroupSize` answered). Errors are `Errc::NdRange`.
pub fn launch_plan(
    range: &LaunchRange,
    max_work_group_size: usize,
    suggested: Option<[u32; 3]>,
) -> Result<LaunchPlan> {
    let global = global_u32(range)?;
    range.validate(max_work_group_size)?;
    let mut local = match range.local {
        Some(l) => [
            to_u32(l[0], "local range")?,
            to_u32(l[1], "local range")?,
            to_u32(l[2], "local range")?,
        ],
        None => suggested.ok_or_else(|| {
            Error::new(Errc::NdRange, "no local range and no suggested group size")
        })?,
    };
    if range.local.is_none() {
        for unused in local.iter_mut().skip(usize::from(range.dims)) {
            *unused = 1;
        }
    }
    let mut counts = [0u32; 3];
    for d in 0..3 {
        if local[d] == 0 || global[d] % local[d] != 0 {
            return Err(Error::new(
                Errc::NdRange,
                format!("global range {global:?} is not a multiple of group size {local:?}"),
            ));
        }
        counts[d] = global[d] / local[d];
    }
    Ok(LaunchPlan {
        group_size: local,
        group_count: ze_group_count_t {
            groupCountX: counts[0],
            groupCountY: counts[1],
            groupCountZ: counts[2],
        },
    })
}

struct BundleInner {
    ctx: Arc<ContextInner>,
    modules: Vec<(ze_device_handle_t, ze_module_handle_t)>,
    names: Vec<String>,
}

// SAFETY: modules are immutable after creation; `zeKernelCreate` on one module is thread-safe.
unsafe impl Send for BundleInner {}
// SAFETY: as above.
unsafe impl Sync for BundleInner {}

impl Drop for BundleInner {
    fn drop(&mut self) {
        for (_, m) in self.modules.drain(..) {
            if let Err(e) = check(
                // SAFETY: kernels hold an Arc to the bundle, so none is left; destroyed once.
                unsafe { (self.ctx.loader.zeModuleDestroy)(m) },
                "zeModuleDestroy",
            ) {
                log::warn!("level_zero: {e}");
            }
        }
    }
}

/// A kernel bundle: one module per device.
pub struct KernelBundle {
    inner: Arc<BundleInner>,
}

impl KernelBundle {
    pub(crate) fn build(
        ctx: &Arc<ContextInner>,
        devices: &[Arc<dyn sycl_backend::Device>],
        spirv: &[u8],
        options: &str,
    ) -> Result<Arc<KernelBundle>> {
        if spirv.len() < 20 || spirv.len() % 4 != 0 || spirv[..4] != 0x0723_0203u32.to_le_bytes() {
            return Err(Error::new(
                Errc::Build,
                "the SPIR-V module is not a little-endian SPIR-V binary",
            ));
        }
        let mut inner = BundleInner {
            ctx: ctx.clone(),
            modules: Vec::new(),
            names: Vec::new(),
        };
        for d in devices {
            let dev = ctx.our_device(d)?;
            let m =
                result::module::create_spirv(&ctx.loader, ctx.handle, dev.handle, spirv, options)?;
            inner.modules.push((dev.handle, m));
        }
        if let Some(&(_, m)) = inner.modules.first() {
            inner.names = result::module::kernel_names(&ctx.loader, m)?;
        }
        Ok(Arc::new(KernelBundle {
            inner: Arc::new(inner),
        }))
    }
}

impl sycl_backend::KernelBundle for KernelBundle {
    fn kernel_names(&self) -> Vec<String> {
        self.inner.names.clone()
    }
    fn kernel(&self, name: &str) -> Result<Arc<dyn sycl_backend::Kernel>> {
        if !self.inner.names.iter().any(|n| n == name) {
            return Err(Error::invalid(format!("the bundle has no kernel `{name}`")));
        }
        let mut handles = Vec::new();
        for &(dev, m) in &self.inner.modules {
            let k = result::module::create_kernel(&self.inner.ctx.loader, m, name)?;
            handles.push((dev, Mutex::new(KernelHandle(k))));
        }
        let mut num_args = None;
        if let Some((_, h)) = handles.first() {
            let h = h.lock().unwrap_or_else(|p| p.into_inner()).0;
            match result::module::kernel_properties(&self.inner.ctx.loader, h) {
                Ok(p) => num_args = Some(p.numKernelArgs),
                Err(e) => log::warn!("level_zero: kernel `{name}`: {e}"),
            }
        }
        Ok(Arc::new(Kernel {
            bundle: self.inner.clone(),
            name: name.to_owned(),
            num_args,
            handles,
        }))
    }
}

/// A kernel handle, used only under its mutex.
pub(crate) struct KernelHandle(pub ze_kernel_handle_t);

/// A kernel: one handle per device of its bundle.
pub struct Kernel {
    bundle: Arc<BundleInner>,
    pub(crate) name: String,
    pub(crate) num_args: Option<u32>,
    handles: Vec<(ze_device_handle_t, Mutex<KernelHandle>)>,
}

// SAFETY: each kernel handle (whose argument state is not thread-safe) is used only under its
// mutex; the rest is immutable.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Kernel {
    pub(crate) fn handle_for(&self, device: ze_device_handle_t) -> Result<&Mutex<KernelHandle>> {
        self.handles
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, h)| h)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "kernel `{}` was not built for the queue's device",
                    self.name
                ))
            })
    }
}

impl sycl_backend::Kernel for Kernel {
    fn name(&self) -> &str {
        &self.name
    }
    /// `numKernelArgs` of `zeKernelGetProperties`.
    fn num_args(&self) -> Option<u32> {
        self.num_args
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        for (_, h) in self.handles.drain(..) {
            let h = h.into_inner().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = check(
                // SAFETY: appended launches keep their own copy of the kernel state; destroyed once.
                unsafe { (self.bundle.ctx.loader.zeKernelDestroy)(h.0) },
                "zeKernelDestroy",
            ) {
                log::warn!("level_zero: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(dims: u8, global: [usize; 3], local: Option<[usize; 3]>) -> LaunchRange {
        LaunchRange {
            dims,
            global,
            local,
        }
    }

    #[test]
    fn group_counts_from_global_and_local() {
        let p = launch_plan(&r(2, [64, 32, 1], Some([16, 8, 1])), 1024, None).unwrap();
        assert_eq!(p.group_size, [16, 8, 1]);
        assert_eq!(
            p.group_count,
            ze_group_count_t {
                groupCountX: 4,
                groupCountY: 4,
                groupCountZ: 1
            }
        );
        let p = launch_plan(&r(3, [8, 8, 8], Some([2, 4, 8])), 1024, None).unwrap();
        assert_eq!(
            (
                p.group_count.groupCountX,
                p.group_count.groupCountY,
                p.group_count.groupCountZ
            ),
            (4, 2, 1)
        );
    }

    #[test]
    fn suggested_group_size_is_used_without_local() {
        let p = launch_plan(&r(1, [1000, 1, 1], None), 1024, Some([8, 1, 1])).unwrap();
        assert_eq!(p.group_size, [8, 1, 1]);
        assert_eq!(p.group_count.groupCountX, 125);
        // Unused dimensions get group size 1 even if the driver said otherwise.
        let p = launch_plan(&r(1, [16, 1, 1], None), 1024, Some([16, 4, 2])).unwrap();
        assert_eq!(p.group_size, [16, 1, 1]);
        // A suggestion that does not divide is refused, not rounded.
        assert_eq!(
            launch_plan(&r(1, [10, 1, 1], None), 1024, Some([4, 1, 1]))
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        assert_eq!(
            launch_plan(&r(1, [10, 1, 1], None), 1024, None)
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
    }

    #[test]
    fn launch_validation_errors() {
        // Not divisible.
        assert_eq!(
            launch_plan(&r(1, [10, 1, 1], Some([4, 1, 1])), 1024, None)
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        // Too large a group.
        assert_eq!(
            launch_plan(&r(1, [2048, 1, 1], Some([2048, 1, 1])), 1024, None)
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        // Zero local extent.
        assert_eq!(
            launch_plan(&r(1, [8, 1, 1], Some([0, 1, 1])), 1024, None)
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        // Bad dimensions and zero global extents.
        assert_eq!(
            launch_plan(&r(4, [8, 1, 1], None), 1024, Some([1, 1, 1]))
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        assert_eq!(
            launch_plan(&r(1, [0, 1, 1], None), 1024, Some([1, 1, 1]))
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
        // Larger than 32 bits.
        assert_eq!(
            global_u32(&r(1, [1usize << 33, 1, 1], None))
                .unwrap_err()
                .code(),
            Errc::NdRange
        );
    }

    #[test]
    fn arguments_are_built_as_level_zero_wants_them() {
        let scalar = 7u32.to_ne_bytes();
        let args = build_args(&[
            KernelArg::Scalar(&scalar),
            KernelArg::Pointer(0xdead_beef_0000),
            KernelArg::Local(256),
        ])
        .unwrap();
        assert_eq!(
            args[0],
            ArgValue {
                size: 4,
                bytes: Some(scalar.to_vec())
            }
        );
        assert_eq!(
            args[1],
            ArgValue {
                size: 8,
                bytes: Some(0xdead_beef_0000u64.to_ne_bytes().to_vec())
            }
        );
        assert_eq!(
            args[2],
            ArgValue {
                size: 256,
                bytes: None
            }
        );
        assert_eq!(
            build_args(&[KernelArg::Local(0)]).unwrap_err().code(),
            Errc::KernelArgument
        );
        assert_eq!(
            build_args(&[KernelArg::Scalar(&[])]).unwrap_err().code(),
            Errc::KernelArgument
        );
        assert!(build_args(&[]).unwrap().is_empty());
        assert!(check_arg_count("k", Some(2), 2).is_ok());
        assert!(check_arg_count("k", None, 5).is_ok());
        assert_eq!(
            check_arg_count("k", Some(2), 3).unwrap_err().code(),
            Errc::KernelArgument
        );
    }
}
