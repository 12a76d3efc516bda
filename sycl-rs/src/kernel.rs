//! Ranges, work-items, kernel bundles and kernel arguments.

use std::sync::Arc;

use bytemuck::Pod;
use sycl_backend::{Aspect, KernelSource, LaunchRange};

use crate::usm::{AsUsmRange, MemoryRecord};
use crate::{Context, Device, Errc, Error, Result};

/// A 1-, 2- or 3-D range of work-items, optionally with a work-group size (an nd-range).
///
/// ```
/// let r = sycl::Range::d2(64, 32).with_local([8, 8, 1]);
/// assert_eq!(r.total()?, 64 * 32);
/// // A range whose work-item count overflows is an error, not a wrapped number.
/// let huge = sycl::Range::d3(1 << 32, 1 << 32, 2);
/// assert_eq!(huge.total().unwrap_err().code(), sycl::Errc::NdRange);
/// # Ok::<(), sycl::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub(crate) inner: LaunchRange,
}

impl Range {
    /// `range<1>(n)`.
    pub fn d1(n: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 1,
                global: [n, 1, 1],
                local: None,
            },
        }
    }

    /// `range<2>(r0, r1)`.
    pub fn d2(r0: usize, r1: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 2,
                global: [r0, r1, 1],
                local: None,
            },
        }
    }

    /// `range<3>(r0, r1, r2)`.
    pub fn d3(r0: usize, r1: usize, r2: usize) -> Range {
        Range {
            inner: LaunchRange {
                dims: 3,
                global: [r0, r1, r2],
                local: None,
            },
        }
    }

    /// Makes it an nd-range with work-groups of `local` (unused dimensions 1).
    pub fn with_local(mut self, local: [usize; 3]) -> Range {
        self.inner.local = Some(local);
        self
    }

    /// Number of work-items; `Errc::NdRange` when it does not fit in `usize`.
    pub fn total(&self) -> Result<usize> {
        self.inner.total().ok_or_else(|| {
            Error::new(
                Errc::NdRange,
                format!(
                    "range {:?} has more work-items than fit in usize",
                    self.inner.global
                ),
            )
        })
    }

    /// Dimensions (1 to 3).
    pub fn dims(&self) -> u8 {
        self.inner.dims
    }

    /// Global extent per dimension.
    pub fn global(&self) -> [usize; 3] {
        self.inner.global
    }

    /// Work-group extent per dimension, for an nd-range.
    pub fn local(&self) -> Option<[usize; 3]> {
        self.inner.local
    }
}

/// One work-item of a closure kernel (`item` / `nd_item`). The last dimension varies fastest,
/// as in SYCL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    id: [usize; 3],
    range: [usize; 3],
    local: Option<[usize; 3]>,
    linear: usize,
    dims: u8,
}

impl Item {
    #[inline]
    pub(crate) fn from_linear(linear: usize, range: &LaunchRange) -> Item {
        let g = range.global;
        let id = match range.dims {
            1 => [linear, 0, 0],
            2 => [linear / g[1], linear % g[1], 0],
            _ => [
                linear / (g[1] * g[2]),
                (linear / g[2]) % g[1],
                linear % g[2],
            ],
        };
        Item {
            id,
            range: g,
            local: range.local,
            linear,
            dims: range.dims,
        }
    }

    /// Global id in dimension `d`.
    #[inline]
    pub fn get(&self, d: usize) -> usize {
        self.id[d]
    }

    /// Global id (unused dimensions 0).
    #[inline]
    pub fn id(&self) -> [usize; 3] {
        self.id
    }

    /// Global range.
    #[inline]
    pub fn range(&self) -> [usize; 3] {
        self.range
    }

    /// Linear id over the whole range.
    #[inline]
    pub fn linear_id(&self) -> usize {
        self.linear
    }

    /// Dimensions.
    #[inline]
    pub fn dims(&self) -> u8 {
        self.dims
    }

    /// Id inside the work-group (nd-range); equals the global id for a plain range.
    #[inline]
    pub fn local_id(&self, d: usize) -> usize {
        match self.local {
            Some(l) => self.id[d] % l[d],
            None => self.id[d],
        }
    }

    /// Work-group id (nd-range); 0 for a plain range.
    #[inline]
    pub fn group(&self, d: usize) -> usize {
        match self.local {
            Some(l) => self.id[d] / l[d],
            None => 0,
        }
    }
}

/// Kernel source for [`KernelBundle::build`]: OpenCL C, SPIR-V, CUDA C++, PTX or cubin.
pub type Source<'a> = KernelSource<'a>;

/// A built kernel bundle (`kernel_bundle<bundle_state::executable>`).
#[derive(Clone)]
pub struct KernelBundle {
    inner: Arc<dyn sycl_backend::KernelBundle>,
    context: Context,
}

impl KernelBundle {
    /// Builds `source` for `devices` of `context` with compiler `options`.
    ///
    /// Errors: `Errc::FeatureNotSupported` when a device cannot build that kind of source
    /// (aspects `ext_oneapi_kernel_compiler_opencl`, `..._spirv`, `ext_sycl_rs_kernel_compiler_cuda`);
    /// `Errc::Build` with the compiler log when the source does not build.
    pub fn build(
        context: &Context,
        devices: &[Device],
        source: Source<'_>,
        options: &str,
    ) -> Result<KernelBundle> {
        let devices = if devices.is_empty() {
            context.devices()
        } else {
            devices
        };
        let aspect = match source {
            KernelSource::OpenClC(_) => Aspect::ExtOneapiKernelCompilerOpencl,
            KernelSource::SpirV(_) => Aspect::ExtOneapiKernelCompilerSpirv,
            KernelSource::CudaC(_) | KernelSource::Ptx(_) | KernelSource::Cubin(_) => {
                Aspect::ExtSyclRsKernelCompilerCuda
            }
        };
        for d in devices {
            context.check_device(d)?;
            d.require(aspect, &format!("building {} kernels", source.language()))?;
        }
        let raw: Vec<_> = devices.iter().map(|d| d.inner.clone()).collect();
        let inner = context.raw().build_kernel_bundle(&raw, &source, options)?;
        Ok(KernelBundle {
            inner,
            context: context.clone(),
        })
    }

    /// Names of its kernels.
    pub fn kernel_names(&self) -> Vec<String> {
        self.inner.kernel_names()
    }

    /// One kernel; `Errc::Invalid` when there is none of that name.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        Ok(Kernel {
            inner: self.inner.kernel(name)?,
            context: self.context.clone(),
        })
    }
}

/// A kernel of a bundle.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<dyn sycl_backend::Kernel>,
    pub(crate) context: Context,
}

impl Kernel {
    /// Its name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Its argument count, where the backend can tell.
    pub fn num_args(&self) -> Option<u32> {
        self.inner.num_args()
    }
}

/// One argument of a kernel launch: made with [`KernelArg::usm`], [`KernelArg::scalar`] or
/// [`KernelArg::local`].
#[derive(Clone)]
pub struct KernelArg(pub(crate) ArgInner);

#[derive(Clone)]
pub(crate) enum ArgInner {
    /// A USM pointer to the start of a range; the record keeps the memory alive.
    Usm {
        ptr: u64,
        record: Arc<MemoryRecord>,
    },
    Scalar(Vec<u8>),
    Local(usize),
}

impl KernelArg {
    /// A USM pointer argument (keeps the memory alive while the kernel runs).
    pub fn usm<T: Pod>(memory: &impl AsUsmRange<T>) -> KernelArg {
        let range = memory.usm_range();
        KernelArg(ArgInner::Usm {
            ptr: range.as_ptr(),
            record: range.record.clone(),
        })
    }

    /// A scalar argument (its bytes, as the kernel declares it).
    pub fn scalar<T: Pod>(value: &T) -> KernelArg {
        KernelArg(ArgInner::Scalar(bytemuck::bytes_of(value).to_vec()))
    }

    /// `count` elements of work-group local memory.
    pub fn local<T>(count: usize) -> Result<KernelArg> {
        count
            .checked_mul(std::mem::size_of::<T>())
            .map(|n| KernelArg(ArgInner::Local(n)))
            .ok_or_else(|| Error::new(Errc::KernelArgument, "local memory size overflows"))
    }
}

impl std::fmt::Debug for KernelArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            ArgInner::Usm { ptr, .. } => write!(f, "Usm({ptr:#x})"),
            ArgInner::Scalar(b) => write!(f, "Scalar({} bytes)", b.len()),
            ArgInner::Local(n) => write!(f, "Local({n} bytes)"),
        }
    }
}

impl std::fmt::Debug for KernelBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBundle")
            .field("kernels", &self.kernel_names())
            .finish()
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name())
            .finish()
    }
}
