//! Devices and their aspects.

use std::any::Any;
use std::sync::Arc;

use level_zero_sys::*;
use sycl_backend::{Aspect, BackendKind, DeviceInfo, DeviceType, Result};

use crate::platform::{DriverExt, EventIpcRoute};
use crate::result;

/// A Level Zero root device.
pub struct Device {
    pub(crate) loader: Arc<Loader>,
    pub(crate) driver: ze_driver_handle_t,
    pub(crate) handle: ze_device_handle_t,
    index: usize,
    info: DeviceInfo,
    /// Nanoseconds per kernel-timestamp cycle.
    pub(crate) timer_resolution_ns: u64,
    /// Valid bits of kernel timestamps.
    pub(crate) kernel_timestamp_bits: u32,
}

// SAFETY: device handles are immutable identifiers; queries on them are thread-safe in Level
// Zero. `Device` has no interior mutability.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// What decides the aspects, gathered from the driver (a plain struct so it can be tested).
#[derive(Clone, Copy, Debug, Default)]
pub struct AspectInputs {
    /// `ze_device_properties_t.type`.
    pub device_type: ze_device_type_t,
    /// `ze_device_module_properties_t.flags`.
    pub module_flags: ze_device_module_flags_t,
    /// Whether the platform is Linux (DMA-BUF based IPC).
    pub linux: bool,
    /// Whether `zePhysicalMemGetProperties` resolved.
    pub has_phys_mem_get_properties: bool,
    /// The IPC event route.
    pub event_route: Option<EventIpcRoute>,
    /// `ze_device_compute_properties_t.numSubGroupSizes`: how many sub-group sizes kernels
    /// may run with (0: no sub-groups).
    pub sub_group_sizes: u32,
}

/// The aspects of a device with `inputs`:
///
/// * `gpu`/`cpu`/`accelerator` from the device type;
/// * `fp16`, `fp64`, `atomic64` from `ze_device_module_properties_t.flags`;
/// * `queue_profiling`, `usm_device/host/shared_allocations`, `ext_oneapi_virtual_mem`,
///   `ext_oneapi_kernel_compiler_spirv`, `ext_oneapi_reusable_events`: core Level Zero 1.0
///   features every driver has;
/// * `ext_oneapi_ipc_memory`: on Linux with a driver present (`zeMemGetIpcHandle` is core; the
///   1.8 loader has no memory-access-properties query for IPC, so this is assumed, as UR does);
/// * `ext_oneapi_ipc_physical_memory`: Linux and `zePhysicalMemGetProperties` resolved;
/// * `ext_oneapi_ipc_event`: the counter-based IPC entry points (core or `zex`) resolved. The
///   IPC event-pool fallback exists but does not set the aspect;
/// * `ext_sycl_rs_sub_groups`: the driver lists sub-group sizes (the SPIR-V form's
///   sub-group instructions, `Groups` and `SPV_INTEL_subgroups`, are what Intel's drivers
///   take).
pub fn aspects_for(inputs: &AspectInputs) -> Vec<Aspect> {
    let mut a = Vec::new();
    match inputs.device_type {
        ZE_DEVICE_TYPE_GPU => a.push(Aspect::Gpu),
        ZE_DEVICE_TYPE_CPU => a.push(Aspect::Cpu),
        ZE_DEVICE_TYPE_FPGA | ZE_DEVICE_TYPE_MCA | ZE_DEVICE_TYPE_VPU => {
            a.push(Aspect::Accelerator)
        }
        _ => a.push(Aspect::Custom),
    }
    if inputs.module_flags & ZE_DEVICE_MODULE_FLAG_FP16 != 0 {
        a.push(Aspect::Fp16);
    }
    if inputs.module_flags & ZE_DEVICE_MODULE_FLAG_FP64 != 0 {
        a.push(Aspect::Fp64);
    }
    if inputs.module_flags & ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS != 0 {
        a.push(Aspect::Atomic64);
    }
    a.extend([
        Aspect::QueueProfiling,
        Aspect::UsmDeviceAllocations,
        Aspect::UsmHostAllocations,
        Aspect::UsmSharedAllocations,
        Aspect::ExtOneapiVirtualMem,
        Aspect::ExtOneapiKernelCompilerSpirv,
        // #[sycl::kernel] kernels, as SPIR-V built by sycl-rs.
        Aspect::ExtSyclRsKernels,
        Aspect::ExtOneapiReusableEvents,
    ]);
    if inputs.sub_group_sizes > 0 {
        a.push(Aspect::ExtSyclRsSubGroups);
    }
    if inputs.linux {
        a.push(Aspect::ExtOneapiIpcMemory);
        if inputs.has_phys_mem_get_properties {
            a.push(Aspect::ExtOneapiIpcPhysicalMemory);
        }
        if matches!(
            inputs.event_route,
            Some(EventIpcRoute::CounterBased | EventIpcRoute::Zex)
        ) {
            a.push(Aspect::ExtOneapiIpcEvent);
        }
    }
    a
}

impl Device {
    pub(crate) fn new(
        loader: Arc<Loader>,
        driver: ze_driver_handle_t,
        ext: Arc<DriverExt>,
        handle: ze_device_handle_t,
        index: usize,
    ) -> Result<Device> {
        let p = result::device::properties(&loader, handle)?;
        let c = result::device::compute_properties(&loader, handle)?;
        let m = result::device::module_properties(&loader, handle)?;
        let mems = result::device::memory_properties(&loader, handle)?;
        let inputs = AspectInputs {
            device_type: p.type_,
            module_flags: m.flags,
            linux: cfg!(target_os = "linux"),
            has_phys_mem_get_properties: loader.zePhysicalMemGetProperties.is_some(),
            event_route: Some(ext.event_ipc_route(&loader)),
            sub_group_sizes: c.numSubGroupSizes,
        };
        let device_type = match p.type_ {
            ZE_DEVICE_TYPE_GPU => DeviceType::Gpu,
            ZE_DEVICE_TYPE_CPU => DeviceType::Cpu,
            ZE_DEVICE_TYPE_FPGA | ZE_DEVICE_TYPE_MCA | ZE_DEVICE_TYPE_VPU => {
                DeviceType::Accelerator
            }
            _ => DeviceType::Custom,
        };
        let info = DeviceInfo {
            name: result::c_array_to_string(&p.name),
            vendor: if p.vendorId == 0x8086 {
                "Intel(R) Corporation".into()
            } else {
                format!("vendor {:#06x}", p.vendorId)
            },
            vendor_id: p.vendorId,
            driver_version: format!("{}", ext.driver_version),
            version: format!("{}.{}", ext.api_version >> 16, ext.api_version & 0xffff),
            device_type,
            max_compute_units: p
                .numSlices
                .saturating_mul(p.numSubslicesPerSlice)
                .saturating_mul(p.numEUsPerSubslice),
            global_mem_size: mems.iter().map(|m| m.totalSize).sum(),
            local_mem_size: u64::from(c.maxSharedLocalMemory),
            max_mem_alloc_size: p.maxMemAllocSize,
            max_work_group_size: c.maxTotalGroupSize as usize,
            max_work_item_sizes: [
                c.maxGroupSizeX as usize,
                c.maxGroupSizeY as usize,
                c.maxGroupSizeZ as usize,
            ],
            uuid: Some(p.uuid.id),
            // Unknown until kernels run there (SPIR-V builds choose their own precision).
            fp32_correctly_rounded_divide_sqrt: false,
            sub_group_sizes: c.subGroupSizes
                [..(c.numSubGroupSizes as usize).min(c.subGroupSizes.len())]
                .iter()
                .map(|&s| s as usize)
                .collect(),
            spirv_sub_group_shuffle: c.numSubGroupSizes > 0,
            // Level Zero consumes SPIR-V, whose scoped atomics every Intel GPU has.
            atomic_caps: sycl_backend::AtomicCaps::ALL,
            opencl_c_work_group_collectives: false,
            aspects: aspects_for(&inputs),
        };
        Ok(Device {
            loader,
            driver,
            handle,
            index,
            info,
            timer_resolution_ns: p.timerResolution.max(1),
            kernel_timestamp_bits: p.kernelTimestampValidBits,
        })
    }

    /// The identity written into IPC payloads (the device UUID).
    pub(crate) fn identity(&self) -> [u8; 16] {
        self.info.identity(self.index)
    }
}

impl sycl_backend::Device for Device {
    fn backend(&self) -> BackendKind {
        BackendKind::LevelZero
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn index(&self) -> usize {
        self.index
    }
    /// `zeDeviceCanAccessPeer`; false for devices of other backends or on error.
    fn can_access_peer(&self, peer: &Arc<dyn sycl_backend::Device>) -> bool {
        let Some(peer) = peer.as_any().downcast_ref::<Device>() else {
            return false;
        };
        if peer.driver != self.driver {
            return false;
        }
        result::device::can_access_peer(&self.loader, self.handle, peer.handle).unwrap_or_else(
            |e| {
                log::warn!("level_zero: {e}");
                false
            },
        )
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aspects_follow_module_flags_and_entry_points() {
        let base = AspectInputs {
            device_type: ZE_DEVICE_TYPE_GPU,
            linux: true,
            ..Default::default()
        };
        let a = aspects_for(&base);
        assert!(a.contains(&Aspect::Gpu));
        assert!(
            !a.contains(&Aspect::Fp16)
                && !a.contains(&Aspect::Fp64)
                && !a.contains(&Aspect::Atomic64)
        );
        assert!(a.contains(&Aspect::ExtOneapiIpcMemory));
        assert!(!a.contains(&Aspect::ExtOneapiIpcPhysicalMemory));
        assert!(!a.contains(&Aspect::ExtOneapiIpcEvent));
        assert!(!a.contains(&Aspect::ExtSyclRsSubGroups));

        let full = AspectInputs {
            module_flags: ZE_DEVICE_MODULE_FLAG_FP16
                | ZE_DEVICE_MODULE_FLAG_FP64
                | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS,
            has_phys_mem_get_properties: true,
            event_route: Some(EventIpcRoute::Zex),
            sub_group_sizes: 3,
            ..base
        };
        let a = aspects_for(&full);
        for x in [
            Aspect::Fp16,
            Aspect::Fp64,
            Aspect::Atomic64,
            Aspect::ExtOneapiIpcPhysicalMemory,
            Aspect::ExtOneapiIpcEvent,
            Aspect::ExtSyclRsSubGroups,
        ] {
            assert!(a.contains(&x), "{x}");
        }
        // The event-pool fallback does not claim the aspect.
        let pool = AspectInputs {
            event_route: Some(EventIpcRoute::EventPool),
            ..full
        };
        assert!(!aspects_for(&pool).contains(&Aspect::ExtOneapiIpcEvent));
        // Off Linux no IPC at all.
        let other = AspectInputs {
            linux: false,
            ..full
        };
        let a = aspects_for(&other);
        assert!(
            !a.contains(&Aspect::ExtOneapiIpcMemory) && !a.contains(&Aspect::ExtOneapiIpcEvent)
        );
        assert!(aspects_for(&AspectInputs {
            device_type: ZE_DEVICE_TYPE_VPU,
            ..base
        })
        .contains(&Aspect::Accelerator));
    }
}
