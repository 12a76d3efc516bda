//! Plain data passed between `sycl` and the backends.

use std::fmt;
use std::str::FromStr;

use crate::{Aspect, Errc, Error};

/// The backends sycl-rs knows. Their ids are the `ONEAPI_DEVICE_SELECTOR` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// Intel GPUs through Level Zero (`level_zero`).
    LevelZero,
    /// NVIDIA GPUs through the CUDA driver API (`cuda`).
    Cuda,
    /// Any OpenCL device (`opencl`).
    OpenCl,
    /// sycl-rs' own CPU backend (`native_cpu`).
    NativeCpu,
}

impl BackendKind {
    /// Every backend, in the order platforms are listed.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::LevelZero,
        BackendKind::Cuda,
        BackendKind::OpenCl,
        BackendKind::NativeCpu,
    ];

    /// The id used by `ONEAPI_DEVICE_SELECTOR` and `SYCL_RS_REQUIRE_BACKENDS`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::LevelZero => "level_zero",
            BackendKind::Cuda => "cuda",
            BackendKind::OpenCl => "opencl",
            BackendKind::NativeCpu => "native_cpu",
        }
    }

    /// The number written into IPC handles.
    pub fn wire_id(self) -> u8 {
        match self {
            BackendKind::LevelZero => 1,
            BackendKind::Cuda => 2,
            BackendKind::OpenCl => 3,
            BackendKind::NativeCpu => 4,
        }
    }

    /// The inverse of [`BackendKind::wire_id`].
    pub fn from_wire_id(id: u8) -> Option<Self> {
        BackendKind::ALL.into_iter().find(|b| b.wire_id() == id)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        BackendKind::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| {
                Error::new(
                    Errc::Invalid,
                    format!("unknown backend `{s}` (known: level_zero, cuda, opencl, native_cpu)"),
                )
            })
    }
}

/// `info::device_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// A CPU.
    Cpu,
    /// A GPU.
    Gpu,
    /// An accelerator.
    Accelerator,
    /// Anything else.
    Custom,
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Gpu => "gpu",
            DeviceType::Accelerator => "accelerator",
            DeviceType::Custom => "custom",
        })
    }
}

/// What a platform says of itself.
#[derive(Clone, Debug)]
pub struct PlatformInfo {
    /// e.g. `NVIDIA CUDA`.
    pub name: String,
    /// e.g. `NVIDIA Corporation`.
    pub vendor: String,
    /// The platform or driver version string.
    pub version: String,
}

/// What a device says of itself; backends fill it once when they enumerate.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Vendor name.
    pub vendor: String,
    /// PCI vendor id where known (0x10de NVIDIA, 0x8086 Intel), else 0.
    pub vendor_id: u32,
    /// Driver version string.
    pub driver_version: String,
    /// Backend/API version the device supports (e.g. `OpenCL 3.0`, `9.0` compute capability).
    pub version: String,
    /// CPU, GPU, ...
    pub device_type: DeviceType,
    /// Compute units (SMs, EUs, cores).
    pub max_compute_units: u32,
    /// Global memory in bytes.
    pub global_mem_size: u64,
    /// Local (shared) memory per work-group in bytes.
    pub local_mem_size: u64,
    /// Largest single allocation in bytes.
    pub max_mem_alloc_size: u64,
    /// Largest work-group.
    pub max_work_group_size: usize,
    /// Largest work-group extent per dimension.
    pub max_work_item_sizes: [usize; 3],
    /// 16-byte UUID where the driver has one.
    pub uuid: Option<[u8; 16]>,
    /// The aspects the device has.
    pub aspects: Vec<Aspect>,
    /// Single-precision division and square root can be correctly rounded (IEEE), as Rust's
    /// are. OpenCL rounds them so only in programs built with
    /// `-cl-fp32-correctly-rounded-divide-sqrt`, which devices with this allow.
    pub fp32_correctly_rounded_divide_sqrt: bool,
    /// `info::device::sub_group_sizes`: the sub-group sizes kernels may run with, where the
    /// driver says (empty where it does not, or where there are no sub-groups).
    pub sub_group_sizes: Vec<usize>,
    /// The device takes SPIR-V sub-group shuffles (`SPV_INTEL_subgroups`, which the SPIR-V
    /// form of `#[sycl::kernel]` sub-group permutations uses): OpenCL's
    /// `cl_intel_spirv_subgroups`, Level Zero drivers with sub-groups.
    pub spirv_sub_group_shuffle: bool,
    /// The memory orders and scopes its atomics and fences have.
    pub atomic_caps: AtomicCaps,
    /// Its OpenCL C compiler has OpenCL C 2.0's work-group collectives (`work_group_reduce_add`
    /// and kin) under `-cl-std=CL2.0`/`CL3.0`: OpenCL 2.x devices, and 3.0 devices that say
    /// `CL_DEVICE_WORK_GROUP_COLLECTIVE_FUNCTIONS_SUPPORT`. False elsewhere.
    pub opencl_c_work_group_collectives: bool,
}

/// The memory orders and scopes a device's atomics and fences have (SYCL's
/// `info::device::atomic_memory_order_capabilities` and `atomic_memory_scope_capabilities`,
/// taken for fences as well), as bit sets in the kernel IR's order (`MemoryOrder::bit`,
/// `MemoryScope::bit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicCaps {
    /// Bits: relaxed 1, acquire 2, release 4, acq_rel 8, seq_cst 16.
    pub orders: u8,
    /// Bits: work_group 1, device 2, system 4.
    pub scopes: u8,
}

impl AtomicCaps {
    /// Relaxed atomics of work-group and device scope (OpenCL 1.2's).
    pub const RELAXED: AtomicCaps = AtomicCaps {
        orders: 1,
        scopes: 1 | 2,
    };
    /// Every order and scope.
    pub const ALL: AtomicCaps = AtomicCaps {
        orders: 0b1_1111,
        scopes: 0b111,
    };
}

impl DeviceInfo {
    /// Whether the device has `aspect`.
    pub fn has(&self, aspect: Aspect) -> bool {
        self.aspects.contains(&aspect)
    }

    /// 16 bytes that name this device on this node: its UUID, or else a hash of its name,
    /// vendor and `index` (its position in its platform). Written into IPC handles.
    pub fn identity(&self, index: usize) -> [u8; 16] {
        if let Some(uuid) = self.uuid {
            return uuid;
        }
        // FNV-1a over the describing strings, widened to 16 bytes: stable across processes.
        let mut out = [0u8; 16];
        for (half, seed) in [
            (0usize, 0xcbf2_9ce4_8422_2325u64),
            (8, 0x8422_2325_cbf2_9ce4),
        ] {
            let mut h = seed;
            for b in self
                .name
                .bytes()
                .chain(self.vendor.bytes())
                .chain(index.to_le_bytes())
            {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            out[half..half + 8].copy_from_slice(&h.to_le_bytes());
        }
        out
    }
}

/// Queue properties (`property::queue::in_order`, `enable_profiling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueProperties {
    /// Commands run in submission order.
    pub in_order: bool,
    /// Events record profiling timestamps.
    pub enable_profiling: bool,
}

/// Properties of a standalone event (`make_event`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventProperties {
    /// The event can be exported with `ipc::event::get`.
    pub enable_ipc: bool,
    /// The event records timestamps when signalled.
    pub enable_profiling: bool,
}

/// Properties of a physical memory object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhysicalMemProperties {
    /// The object can be exported with `ipc::physical_memory::get`.
    pub enable_ipc: bool,
}

/// `usm::alloc`: the kind of a USM allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsmKind {
    /// Device memory (`malloc_device`).
    Device,
    /// Pinned host memory the device can reach (`malloc_host`).
    Host,
    /// Memory that migrates between host and device (`malloc_shared`).
    Shared,
    /// Not a USM pointer of this context.
    Unknown,
}

impl fmt::Display for UsmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UsmKind::Device => "device",
            UsmKind::Host => "host",
            UsmKind::Shared => "shared",
            UsmKind::Unknown => "unknown",
        })
    }
}

/// What a backend knows of a pointer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// USM kind, `Unknown` if the pointer is not in an allocation of this context.
    pub kind: UsmKind,
    /// Index into the context's devices of the allocation's device (none for host USM).
    pub device_index: Option<usize>,
    /// Start of the allocation that contains the pointer.
    pub base: u64,
    /// Size of that allocation in bytes.
    pub size: usize,
}

impl PointerInfo {
    /// The answer for a pointer the context does not know.
    pub fn unknown() -> Self {
        PointerInfo {
            kind: UsmKind::Unknown,
            device_index: None,
            base: 0,
            size: 0,
        }
    }
}

/// `info::event_command_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStatus {
    /// Submitted, not started.
    Submitted,
    /// Running.
    Running,
    /// Finished.
    Complete,
}

/// Profiling timestamps in nanoseconds on one clock per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfilingInfo {
    /// When the command was submitted.
    pub submit_ns: u64,
    /// When it started running.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
}

/// `ext::oneapi::experimental::granularity_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GranularityMode {
    /// The smallest size the device accepts.
    Minimum,
    /// The size the device performs best with.
    #[default]
    Recommended,
}

/// `ext::oneapi::experimental::address_access_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessMode {
    /// Not accessible.
    None,
    /// Read only.
    Read,
    /// Read and write.
    ReadWrite,
}

/// A 1-, 2- or 3-dimensional launch: a global range and, for an nd-range, a local range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchRange {
    /// 1, 2 or 3.
    pub dims: u8,
    /// Global size per dimension; unused dimensions are 1.
    pub global: [usize; 3],
    /// Work-group size per dimension (nd-range), or `None` to let the backend choose.
    pub local: Option<[usize; 3]>,
}

impl LaunchRange {
    /// Number of work-items, or `None` when the product of the extents overflows `usize`.
    pub fn total(&self) -> Option<usize> {
        self.global
            .iter()
            .try_fold(1usize, |acc, &g| acc.checked_mul(g))
    }

    /// Checks dimensions, the work-item count and divisibility; `Errc::NdRange` on failure.
    pub fn validate(&self, max_work_group_size: usize) -> Result<(), Error> {
        if !(1..=3).contains(&self.dims) {
            return Err(Error::new(
                Errc::NdRange,
                format!("{} dimensions (1 to 3 allowed)", self.dims),
            ));
        }
        if self.total().is_none() {
            return Err(Error::new(
                Errc::NdRange,
                format!(
                    "global range {:?} has more work-items than fit in usize",
                    self.global
                ),
            ));
        }
        if let Some(local) = self.local {
            for d in 0..3 {
                if local[d] == 0 || self.global[d] % local[d] != 0 {
                    return Err(Error::new(
                        Errc::NdRange,
                        format!(
                            "global range {:?} is not a multiple of local range {:?}",
                            self.global, local
                        ),
                    ));
                }
            }
            // Each extent divides its global extent, so the product cannot overflow once the
            // global one did not; checked all the same.
            let group = local
                .iter()
                .try_fold(1usize, |acc, &l| acc.checked_mul(l))
                .unwrap_or(usize::MAX);
            if group > max_work_group_size {
                return Err(Error::new(
                    Errc::NdRange,
                    format!("work-group of {group} items exceeds the device maximum {max_work_group_size}"),
                ));
            }
        }
        Ok(())
    }
}

/// The form of a `#[sycl::kernel]` program: what a backend's devices build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelIr {
    /// Rust, compiled with the program (native CPU).
    Rust,
    /// CUDA C++ for NVRTC.
    CudaC,
    /// OpenCL C, built by the driver's compiler.
    OpenClC,
    /// A SPIR-V module built by sycl-rs.
    SpirV,
}

/// An allocation's IPC handle in its vendor's own form, for programs outside sycl-rs (CUDA:
/// what `cudaIpcGetMemHandle` gives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawIpcMem {
    /// The vendor's handle bytes (CUDA: the 64-byte `cudaIpcMemHandle_t`).
    pub handle: Vec<u8>,
    /// Bytes from the allocation's start to the exported address.
    pub offset: u64,
    /// The allocation's size, as the driver reports it.
    pub allocation_size: u64,
}

/// Source of a kernel bundle.
#[derive(Clone, Copy, Debug)]
pub enum KernelSource<'a> {
    /// OpenCL C source text.
    OpenClC(&'a str),
    /// A SPIR-V module.
    SpirV(&'a [u8]),
    /// CUDA C++ source, compiled with NVRTC.
    CudaC(&'a str),
    /// PTX assembly text.
    Ptx(&'a str),
    /// A cubin or fatbin image.
    Cubin(&'a [u8]),
}

impl KernelSource<'_> {
    /// A short name of the language, for messages.
    pub fn language(&self) -> &'static str {
        match self {
            KernelSource::OpenClC(_) => "OpenCL C",
            KernelSource::SpirV(_) => "SPIR-V",
            KernelSource::CudaC(_) => "CUDA C++",
            KernelSource::Ptx(_) => "PTX",
            KernelSource::Cubin(_) => "cubin",
        }
    }
}

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// A value passed by copy (its bytes, in the kernel's layout).
    Scalar(&'a [u8]),
    /// A USM pointer.
    Pointer(u64),
    /// Local (work-group shared) memory of this many bytes.
    Local(usize),
}

/// One kernel launch of a graph ([`Queue::build_graph`](crate::Queue::build_graph)).
#[derive(Clone)]
pub struct GraphLaunch<'a> {
    /// The kernel (of a bundle built for the queue's device).
    pub kernel: &'a std::sync::Arc<dyn crate::Kernel>,
    /// Its range, as [`Queue::launch`](crate::Queue::launch) takes it.
    pub range: LaunchRange,
    /// Its arguments.
    pub args: &'a [KernelArg<'a>],
}

/// A native kernel: called with contiguous chunks of the linear work-item range.
pub type ClosureKernel = std::sync::Arc<dyn Fn(std::ops::Range<usize>) + Send + Sync>;

/// A host task.
pub type HostTask = Box<dyn FnOnce() + Send>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_that_overflow_are_errors_not_wraps_or_panics() {
        let huge = LaunchRange {
            dims: 3,
            global: [1 << 32, 1 << 32, 2],
            local: None,
        };
        assert_eq!(huge.total(), None);
        assert_eq!(huge.validate(1024).unwrap_err().code(), Errc::NdRange);
        // A work-group whose product overflows (possible over an empty global dimension).
        let group = LaunchRange {
            dims: 3,
            global: [0, 0, 0],
            local: Some([usize::MAX, usize::MAX, 2]),
        };
        assert_eq!(group.total(), Some(0));
        assert_eq!(group.validate(1024).unwrap_err().code(), Errc::NdRange);
        let fine = LaunchRange {
            dims: 2,
            global: [64, 32, 1],
            local: Some([8, 8, 1]),
        };
        assert_eq!(fine.total(), Some(2048));
        assert!(fine.validate(1024).is_ok());
    }
}
