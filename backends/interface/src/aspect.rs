//! Device aspects: what a device can do, named as in SYCL 2020 and its extensions.

use std::fmt;
use std::str::FromStr;

use crate::{Errc, Error};

macro_rules! aspects {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// A device capability. Printed and parsed by its SYCL name (`usm_device_allocations`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Aspect {
            $( $(#[$doc])* $variant, )*
        }

        impl Aspect {
            /// Every aspect sycl-rs knows, in declaration order.
            pub const ALL: &'static [Aspect] = &[$(Aspect::$variant,)*];

            /// The SYCL name, e.g. `ext_oneapi_ipc_memory`.
            pub fn name(self) -> &'static str {
                match self { $(Aspect::$variant => $name,)* }
            }
        }

        impl FromStr for Aspect {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s {
                    $($name => Ok(Aspect::$variant),)*
                    other => Err(Error::new(Errc::Invalid, format!("unknown aspect `{other}`"))),
                }
            }
        }
    };
}

aspects! {
    /// The device is a CPU.
    Cpu = "cpu",
    /// The device is a GPU.
    Gpu = "gpu",
    /// The device is an accelerator (FPGA and the like).
    Accelerator = "accelerator",
    /// The device is a custom device.
    Custom = "custom",
    /// Kernels may use `half` (16-bit floats).
    Fp16 = "fp16",
    /// Kernels may use `double`.
    Fp64 = "fp64",
    /// 64-bit atomics in kernels.
    Atomic64 = "atomic64",
    /// Kernel bundles can be built from source on this device.
    OnlineCompiler = "online_compiler",
    /// Event profiling timestamps on queues made with `enable_profiling`.
    QueueProfiling = "queue_profiling",
    /// `malloc_device`.
    UsmDeviceAllocations = "usm_device_allocations",
    /// `malloc_host`.
    UsmHostAllocations = "usm_host_allocations",
    /// `malloc_shared`.
    UsmSharedAllocations = "usm_shared_allocations",
    /// The device can access ordinary system allocations.
    UsmSystemAllocations = "usm_system_allocations",
    /// Virtual memory: reserve, physical memory, map (`sycl_ext_oneapi_virtual_mem`).
    ExtOneapiVirtualMem = "ext_oneapi_virtual_mem",
    /// `ipc::memory` get/open of USM device memory.
    ExtOneapiIpcMemory = "ext_oneapi_ipc_memory",
    /// `ipc::physical_memory` get/open of physical memory objects.
    ExtOneapiIpcPhysicalMemory = "ext_oneapi_ipc_physical_memory",
    /// Events made with `enable_ipc`, and `ipc::event` get/open.
    ExtOneapiIpcEvent = "ext_oneapi_ipc_event",
    /// Standalone events (`make_event`), `enqueue_signal_event`, `enqueue_wait_event(s)`.
    ExtOneapiReusableEvents = "ext_oneapi_reusable_events",
    /// Kernel bundles from OpenCL C source.
    ExtOneapiKernelCompilerOpencl = "ext_oneapi_kernel_compiler_opencl",
    /// Kernel bundles from SPIR-V.
    ExtOneapiKernelCompilerSpirv = "ext_oneapi_kernel_compiler_spirv",
    /// Kernel bundles from CUDA C source (NVRTC) or PTX/cubin (sycl-rs extension).
    ExtSyclRsKernelCompilerCuda = "ext_sycl_rs_kernel_compiler_cuda",
    /// `parallel_for` with a Rust closure as the kernel (sycl-rs extension; native CPU).
    ExtSyclRsClosureKernels = "ext_sycl_rs_closure_kernels",
    /// Kernels written in Rust with `#[sycl::kernel]` run here (sycl-rs extension): the native
    /// CPU, and CUDA and OpenCL devices that can compile source.
    ExtSyclRsKernels = "ext_sycl_rs_kernels",
    /// `#[sycl::kernel]` kernels may use sub-group queries and collectives here (sycl-rs
    /// extension): the native CPU, CUDA, and OpenCL devices with `cl_khr_subgroups` or
    /// `cl_intel_subgroups`.
    ExtSyclRsSubGroups = "ext_sycl_rs_sub_groups",
    /// Standalone events count their completed signals, and waits can target a count
    /// (sycl-rs extension): cross-process hand-offs without a side channel.
    ExtSyclRsEventSignalCount = "ext_sycl_rs_event_signal_count",
}

impl fmt::Display for Aspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_aspect_round_trips_through_its_name() {
        for &aspect in Aspect::ALL {
            assert_eq!(aspect.name().parse::<Aspect>().unwrap(), aspect);
        }
        assert_eq!(
            Aspect::ExtOneapiIpcMemory.to_string(),
            "ext_oneapi_ipc_memory"
        );
        let err = "ext_oneapi_ipc_memroy".parse::<Aspect>().unwrap_err();
        assert_eq!(err.code(), Errc::Invalid);
    }
}
