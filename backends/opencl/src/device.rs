//! OpenCL devices: [`DeviceInfo`] and aspects gathered once at enumeration.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use sycl_backend::{Aspect, AtomicCaps, BackendKind, DeviceInfo, DeviceType, Result};

use crate::result::{info_bytes, info_string, info_value, InfoFn};
use crate::sys::*;
use crate::Handle;

/// How the device provides USM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UsmSupport {
    /// `cl_intel_unified_shared_memory`.
    Intel,
    /// USM emulated on SVM buffers (`clSVMAlloc`); see `usm.rs`.
    Svm {
        /// Fine-grain buffer SVM: host can touch the memory without map/unmap.
        fine_buffer: bool,
        /// Fine-grain system SVM: kernels can use any host pointer.
        fine_system: bool,
    },
    /// No USM at all.
    None,
}

/// What this backend needs to know of a device beyond [`DeviceInfo`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceCaps {
    pub usm: UsmSupport,
    /// Out-of-order queues are supported.
    pub out_of_order: bool,
    /// `CL_DEVICE_ADDRESS_BITS`: the width of the device's `size_t`, which bounds every
    /// extent of a launch.
    pub address_bits: u32,
    /// Fine-grained system SVM that its USM calls accept: kernels, copies and fills take any
    /// pointer of the process, so device USM is made of sealed memfd mappings that other
    /// processes can open (`ext_oneapi_ipc_memory`).
    pub host_memory_ipc: bool,
    /// The driver aborts the process when a user event with dependents fails (PoCL 3.1; see
    /// `Event::host_failure` and `Queue::gate`).
    pub failed_user_event_aborts: bool,
}

/// An OpenCL device.
pub struct Device {
    pub(crate) id: Handle,
    pub(crate) platform: Handle,
    index: usize,
    info: DeviceInfo,
    pub(crate) caps: DeviceCaps,
}

impl Device {
    /// Queries everything about `id` once.
    pub(crate) fn new(
        api: &'static Api,
        platform: cl_platform_id,
        id: cl_device_id,
        index: usize,
        platform_has_usm: bool,
    ) -> Result<Self> {
        let f = |param: cl_uint, size: usize, value: *mut c_void, size_ret: *mut usize| {
            // SAFETY: `id` is a device id of a live platform; the buffer arguments come from
            // the `result` helpers, which size them as the query asks.
            unsafe { (api.clGetDeviceInfo)(id, param, size, value, size_ret) }
        };
        let f: InfoFn<'_> = &f;
        let string = |p, what| info_string(f, p, what);
        let uint = |p, what| {
            // SAFETY: used only for queries whose value is a cl_uint.
            unsafe { info_value::<cl_uint>(f, p, what) }
        };
        let ulong = |p, what| {
            // SAFETY: used only for queries whose value is a cl_ulong or cl_bitfield.
            unsafe { info_value::<cl_ulong>(f, p, what) }
        };

        let name = string(CL_DEVICE_NAME, "clGetDeviceInfo(CL_DEVICE_NAME)")?;
        let vendor = string(CL_DEVICE_VENDOR, "clGetDeviceInfo(CL_DEVICE_VENDOR)")?;
        let driver_version = string(CL_DRIVER_VERSION, "clGetDeviceInfo(CL_DRIVER_VERSION)")?;
        let version = string(CL_DEVICE_VERSION, "clGetDeviceInfo(CL_DEVICE_VERSION)")?;
        let extensions = string(
            CL_DEVICE_EXTENSIONS,
            "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)",
        )?;
        let has_ext = |e: &str| extensions.split_ascii_whitespace().any(|x| x == e);
        let vendor_id = uint(CL_DEVICE_VENDOR_ID, "clGetDeviceInfo(CL_DEVICE_VENDOR_ID)")?;
        let ty = ulong(CL_DEVICE_TYPE, "clGetDeviceInfo(CL_DEVICE_TYPE)")?;
        let device_type = if ty & CL_DEVICE_TYPE_GPU != 0 {
            DeviceType::Gpu
        } else if ty & CL_DEVICE_TYPE_CPU != 0 {
            DeviceType::Cpu
        } else if ty & CL_DEVICE_TYPE_ACCELERATOR != 0 {
            DeviceType::Accelerator
        } else {
            DeviceType::Custom
        };
        let max_compute_units = uint(
            CL_DEVICE_MAX_COMPUTE_UNITS,
            "clGetDeviceInfo(MAX_COMPUTE_UNITS)",
        )?;
        let address_bits = uint(CL_DEVICE_ADDRESS_BITS, "clGetDeviceInfo(ADDRESS_BITS)")?;
        let global_mem_size = ulong(
            CL_DEVICE_GLOBAL_MEM_SIZE,
            "clGetDeviceInfo(GLOBAL_MEM_SIZE)",
        )?;
        let local_mem_size = ulong(CL_DEVICE_LOCAL_MEM_SIZE, "clGetDeviceInfo(LOCAL_MEM_SIZE)")?;
        let max_mem_alloc_size = ulong(
            CL_DEVICE_MAX_MEM_ALLOC_SIZE,
            "clGetDeviceInfo(MAX_MEM_ALLOC_SIZE)",
        )?;
        // SAFETY: CL_DEVICE_MAX_WORK_GROUP_SIZE is a size_t.
        let max_work_group_size = unsafe {
            info_value::<usize>(
                f,
                CL_DEVICE_MAX_WORK_GROUP_SIZE,
                "clGetDeviceInfo(MAX_WORK_GROUP_SIZE)",
            )?
        };
        let dims = uint(
            CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS,
            "clGetDeviceInfo(MAX_WORK_ITEM_DIMENSIONS)",
        )?;
        let sizes_bytes = info_bytes(
            f,
            CL_DEVICE_MAX_WORK_ITEM_SIZES,
            "clGetDeviceInfo(MAX_WORK_ITEM_SIZES)",
        )?;
        let mut max_work_item_sizes = [1usize; 3];
        for (d, chunk) in sizes_bytes
            .chunks_exact(std::mem::size_of::<usize>())
            .take(dims.min(3) as usize)
            .enumerate()
        {
            let mut b = [0u8; std::mem::size_of::<usize>()];
            b.copy_from_slice(chunk);
            max_work_item_sizes[d] = usize::from_ne_bytes(b);
        }
        let uuid = if has_ext("cl_khr_device_uuid") {
            // SAFETY: CL_DEVICE_UUID_KHR is cl_uchar[16].
            unsafe {
                info_value::<[u8; 16]>(f, CL_DEVICE_UUID_KHR, "clGetDeviceInfo(CL_DEVICE_UUID_KHR)")
            }
            .ok()
        } else {
            None
        };

        // Optional queries: failure means "not supported".
        let double_fp = ulong(CL_DEVICE_DOUBLE_FP_CONFIG, "").unwrap_or(0);
        let single_fp = ulong(CL_DEVICE_SINGLE_FP_CONFIG, "").unwrap_or(0);
        // SAFETY: CL_DEVICE_COMPILER_AVAILABLE is a cl_bool.
        let compiler =
            unsafe { info_value::<cl_bool>(f, CL_DEVICE_COMPILER_AVAILABLE, "") }.unwrap_or(0) != 0;
        let il_version = string(CL_DEVICE_IL_VERSION, "").unwrap_or_default();
        let queue_props = ulong(CL_DEVICE_QUEUE_ON_HOST_PROPERTIES, "").unwrap_or(0);
        let svm_caps = ulong(CL_DEVICE_SVM_CAPABILITIES, "").unwrap_or(0);
        let atomic_caps = atomic_caps(&version, |p| ulong(p, "").ok());
        // OpenCL C 2.0's work-group collectives: core in 2.x, optional in 3.0.
        let opencl_c_work_group_collectives = if version.starts_with("OpenCL 2") {
            true
        } else if version.starts_with("OpenCL 3") {
            // SAFETY: CL_DEVICE_WORK_GROUP_COLLECTIVE_FUNCTIONS_SUPPORT is a cl_bool.
            unsafe {
                info_value::<cl_bool>(f, CL_DEVICE_WORK_GROUP_COLLECTIVE_FUNCTIONS_SUPPORT, "")
            }
            .unwrap_or(0)
                != 0
        } else {
            false
        };

        let svm_usable = api.clSVMAlloc.is_some()
            && api.clSVMFree.is_some()
            && api.clEnqueueSVMMemcpy.is_some()
            && api.clEnqueueSVMMemFill.is_some()
            && api.clSetKernelArgSVMPointer.is_some();
        let (usm, usm_host, usm_device, usm_shared, usm_system) =
            if platform_has_usm && has_ext("cl_intel_unified_shared_memory") {
                let cap = |p| ulong(p, "").unwrap_or(0) != 0;
                (
                    UsmSupport::Intel,
                    cap(CL_DEVICE_HOST_MEM_CAPABILITIES_INTEL),
                    cap(CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL),
                    cap(CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL),
                    cap(CL_DEVICE_SHARED_SYSTEM_MEM_CAPABILITIES_INTEL),
                )
            } else if svm_usable && svm_caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER != 0 {
                let fine_buffer = svm_caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0;
                let fine_system = svm_caps & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM != 0;
                (
                    UsmSupport::Svm {
                        fine_buffer,
                        fine_system,
                    },
                    fine_buffer,
                    true,
                    fine_buffer,
                    fine_system,
                )
            } else {
                (UsmSupport::None, false, false, false, false)
            };

        // Only `cl_intel_required_subgroup_size` lists the sizes; other drivers choose one per
        // kernel without saying which ones they may choose.
        let sub_group_sizes = if has_ext("cl_intel_required_subgroup_size") {
            info_bytes(
                f,
                CL_DEVICE_SUB_GROUP_SIZES_INTEL,
                "clGetDeviceInfo(SUB_GROUP_SIZES_INTEL)",
            )
            .map(|bytes| {
                bytes
                    .chunks_exact(std::mem::size_of::<usize>())
                    .map(|c| usize::from_ne_bytes(c.try_into().expect("a size_t")))
                    .collect()
            })
            .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut aspects = vec![match device_type {
            DeviceType::Cpu => Aspect::Cpu,
            DeviceType::Gpu => Aspect::Gpu,
            DeviceType::Accelerator => Aspect::Accelerator,
            DeviceType::Custom => Aspect::Custom,
        }];
        let mut add = |cond: bool, a: Aspect| {
            if cond {
                aspects.push(a);
            }
        };
        add(has_ext("cl_khr_fp16"), Aspect::Fp16);
        add(has_ext("cl_khr_fp64") || double_fp != 0, Aspect::Fp64);
        add(has_ext("cl_khr_int64_base_atomics"), Aspect::Atomic64);
        add(
            queue_props & CL_QUEUE_PROFILING_ENABLE != 0,
            Aspect::QueueProfiling,
        );
        add(compiler, Aspect::OnlineCompiler);
        add(compiler, Aspect::ExtOneapiKernelCompilerOpencl);
        add(compiler, Aspect::ExtSyclRsKernels);
        // The OpenCL C 1.2 that #[sycl::kernel] emits reaches sub-groups through these
        // extensions (OpenCL 3.0's optional `__opencl_c_subgroups` needs OpenCL C 3.0).
        let sub_groups = has_ext("cl_khr_subgroups") || has_ext("cl_intel_subgroups");
        // PoCL 5.0 (the GPU machines' Ubuntu package) lists cl_khr_subgroups, but the first
        // sub-group kernel of the conformance suite made its kernel library fail to load
        // (`undefined symbol: __pocl_work_group_alloca`), and PoCL aborted the process: a
        // crash no caller could handle. PoCL 3.1 (Debian 12) does not list the extension.
        let pocl = version.contains("PoCL");
        add(compiler && sub_groups && !pocl, Aspect::ExtSyclRsSubGroups);
        add(
            !il_version.is_empty() && api.clCreateProgramWithIL.is_some(),
            Aspect::ExtOneapiKernelCompilerSpirv,
        );
        add(usm_device, Aspect::UsmDeviceAllocations);
        add(usm_host, Aspect::UsmHostAllocations);
        add(usm_shared, Aspect::UsmSharedAllocations);
        add(usm_system, Aspect::UsmSystemAllocations);
        add(true, Aspect::ExtOneapiReusableEvents);
        // Fine-grained system SVM (Intel's CPU runtime; not PoCL 3.1 or NVIDIA): memory from
        // any mapping of the process works in kernels, copies and fills, so device USM can be
        // memfd mappings shared with other processes. Through Intel USM the runtime must also
        // accept system pointers in its USM calls (shared system capabilities).
        let host_memory_ipc = svm_caps & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM != 0
            && usm_device
            && match usm {
                UsmSupport::Intel => usm_system,
                UsmSupport::Svm { fine_system, .. } => fine_system,
                UsmSupport::None => false,
            };
        add(host_memory_ipc, Aspect::ExtOneapiIpcMemory);
        // IPC events need no driver support: a futex word in shared memory, waited on through
        // a user event and signalled from a completion callback (OpenCL 1.1, always loaded).
        add(true, Aspect::ExtOneapiIpcEvent);

        Ok(Device {
            id: Handle(id),
            platform: Handle(platform),
            index,
            info: DeviceInfo {
                name,
                vendor,
                vendor_id,
                driver_version,
                version,
                device_type,
                max_compute_units,
                global_mem_size,
                local_mem_size,
                max_mem_alloc_size,
                max_work_group_size,
                max_work_item_sizes,
                uuid,
                aspects,
                fp32_correctly_rounded_divide_sqrt: single_fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
                    != 0,
                sub_group_sizes,
                spirv_sub_group_shuffle: has_ext("cl_intel_spirv_subgroups"),
                atomic_caps,
                opencl_c_work_group_collectives,
            },
            caps: DeviceCaps {
                usm,
                out_of_order: queue_props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0,
                address_bits,
                host_memory_ipc,
                failed_user_event_aborts: pocl,
            },
        })
    }

    /// The `cl_device_id`.
    pub fn raw(&self) -> cl_device_id {
        self.id.0
    }
}

impl sycl_backend::Device for Device {
    fn backend(&self) -> BackendKind {
        BackendKind::OpenCl
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn index(&self) -> usize {
        self.index
    }
    fn can_access_peer(&self, peer: &Arc<dyn sycl_backend::Device>) -> bool {
        // Devices of one OpenCL platform share a context's memory; report peer access only
        // for the device itself, which is all we can promise without a query.
        peer.as_any()
            .downcast_ref::<Device>()
            .is_some_and(|p| p.id.0 == self.id.0)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The memory orders and scopes of a device's atomics and fences: OpenCL 3.0 says (the
/// intersection of its atomic and fence capabilities: `#[sycl::kernel]` uses both); OpenCL 2.x
/// requires all; OpenCL 1.x has relaxed atomics of work-group and device scope.
fn atomic_caps(version: &str, query: impl Fn(cl_uint) -> Option<cl_ulong>) -> AtomicCaps {
    let major = version
        .strip_prefix("OpenCL ")
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(1);
    match major {
        0 | 1 => AtomicCaps::RELAXED,
        2 => AtomicCaps::ALL,
        _ => {
            let (Some(memory), Some(fence)) = (
                query(CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES),
                query(CL_DEVICE_ATOMIC_FENCE_CAPABILITIES),
            ) else {
                return AtomicCaps::RELAXED;
            };
            let both = memory & fence;
            let has = |bit: cl_ulong| both & bit != 0;
            let mut orders = 1;
            if has(CL_DEVICE_ATOMIC_ORDER_ACQ_REL) {
                orders |= 2 | 4 | 8;
            }
            if has(CL_DEVICE_ATOMIC_ORDER_SEQ_CST) {
                orders |= 16;
            }
            let mut scopes = 0;
            if has(CL_DEVICE_ATOMIC_SCOPE_WORK_GROUP) {
                scopes |= 1;
            }
            if has(CL_DEVICE_ATOMIC_SCOPE_DEVICE) {
                scopes |= 2;
            }
            if has(CL_DEVICE_ATOMIC_SCOPE_ALL_DEVICES) {
                scopes |= 4;
            }
            // Relaxed device-scope atomics are OpenCL 1.2's, which every device keeps.
            AtomicCaps {
                orders,
                scopes: scopes | AtomicCaps::RELAXED.scopes,
            }
        }
    }
}
