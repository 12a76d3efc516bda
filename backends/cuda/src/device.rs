//! Devices: enumeration, [`DeviceInfo`], aspects, the primary context of each device.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys;
use cudarc::driver::sys::CUdevice_attribute as A;
use sycl_backend::{Aspect, AtomicCaps, BackendKind, DeviceInfo, DeviceType, Result};

use crate::context::PrimaryContext;
use crate::lock;
use crate::result;

/// What the backend needs to know of a device beyond [`DeviceInfo`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caps {
    pub(crate) cc: (i32, i32),
    pub(crate) managed: bool,
    pub(crate) vmm: bool,
    pub(crate) posix_fd: bool,
    pub(crate) ipc_event: bool,
    pub(crate) max_grid: [u32; 3],
}

/// A CUDA device (`cuda::Device`), identified by its ordinal in this process.
pub struct Device {
    pub(crate) ordinal: i32,
    pub(crate) cu: sys::CUdevice,
    index: usize,
    info: DeviceInfo,
    pub(crate) caps: Caps,
    primary: Mutex<Weak<PrimaryContext>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Device")
            .field("ordinal", &self.ordinal)
            .field("name", &self.info.name)
            .finish()
    }
}

fn attr(dev: sys::CUdevice, a: A) -> i32 {
    // An attribute the driver does not know is INVALID_VALUE: report it as absent.
    result::device::attribute(dev, a).unwrap_or(0)
}

impl Device {
    /// Queries device `ordinal` (`index` in the platform).
    pub(crate) fn query(ordinal: i32, index: usize, driver_version: i32) -> Result<Device> {
        let cu = result::device::get(ordinal)?;
        let name = result::device::name(cu)?;
        let uuid = result::device::uuid(cu).ok();
        let total = result::device::total_mem(cu)? as u64;
        let cc = (
            attr(cu, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(cu, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        );
        let unified_addressing = attr(cu, A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0;
        let managed = attr(cu, A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0;
        let vmm = attr(
            cu,
            A::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
        ) != 0
            && [
                "cuMemCreate",
                "cuMemMap",
                "cuMemSetAccess",
                "cuMemAddressReserve",
                "cuMemGetAccess",
            ]
            .iter()
            .all(|s| result::has_symbol(s));
        let posix_fd = attr(
            cu,
            A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
        ) != 0
            && result::has_symbol("cuMemExportToShareableHandle")
            && result::has_symbol("cuMemImportFromShareableHandle");
        let ipc_event = attr(cu, A::CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED) != 0
            && result::has_symbol("cuIpcGetEventHandle")
            && result::has_symbol("cuIpcOpenEventHandle");
        let ipc_mem = cfg!(target_os = "linux")
            && unified_addressing
            && [
                "cuIpcGetMemHandle",
                "cuIpcOpenMemHandle_v2",
                "cuIpcCloseMemHandle",
                "cuMemGetAddressRange_v2",
            ]
            .iter()
            .all(|s| result::has_symbol(s));
        let can_map_host = attr(cu, A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0;
        let pageable = attr(cu, A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) != 0;
        let timing =
            result::has_symbol("cuEventElapsedTime_v2") || result::has_symbol("cuEventElapsedTime");

        let mut aspects = vec![
            Aspect::Gpu,
            Aspect::Fp64,
            Aspect::Atomic64,
            Aspect::UsmDeviceAllocations,
        ];
        if cc >= (5, 3) {
            aspects.push(Aspect::Fp16);
        }
        if timing {
            aspects.push(Aspect::QueueProfiling);
        }
        if can_map_host && unified_addressing {
            aspects.push(Aspect::UsmHostAllocations);
        }
        if managed {
            aspects.push(Aspect::UsmSharedAllocations);
        }
        if pageable {
            aspects.push(Aspect::UsmSystemAllocations);
        }
        if vmm {
            aspects.push(Aspect::ExtOneapiVirtualMem);
        }
        if ipc_mem {
            aspects.push(Aspect::ExtOneapiIpcMemory);
        }
        if vmm && posix_fd {
            aspects.push(Aspect::ExtOneapiIpcPhysicalMemory);
        }
        if ipc_event {
            aspects.push(Aspect::ExtOneapiIpcEvent);
        }
        aspects.push(Aspect::ExtOneapiReusableEvents);
        // PTX and cubin load through the driver alone; CUDA C needs NVRTC.
        aspects.push(Aspect::ExtSyclRsKernelCompilerCuda);
        if result::nvrtc::available() {
            aspects.push(Aspect::OnlineCompiler);
            aspects.push(Aspect::ExtSyclRsKernels);
            aspects.push(Aspect::ExtSyclRsSubGroups);
        }

        let dims = [
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X).max(1) as usize,
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y).max(1) as usize,
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z).max(1) as usize,
        ];
        let max_grid = [
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X).max(1) as u32,
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y).max(1) as u32,
            attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z).max(1) as u32,
        ];
        let info = DeviceInfo {
            name,
            vendor: "NVIDIA Corporation".into(),
            vendor_id: 0x10de,
            driver_version: format!("{}.{}", driver_version / 1000, (driver_version % 1000) / 10),
            version: format!("{}.{}", cc.0, cc.1),
            device_type: DeviceType::Gpu,
            max_compute_units: attr(cu, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).max(0) as u32,
            global_mem_size: total,
            local_mem_size: attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK).max(0)
                as u64,
            max_mem_alloc_size: total,
            max_work_group_size: attr(cu, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK).max(1)
                as usize,
            max_work_item_sizes: dims,
            uuid,
            aspects,
            // NVRTC's default (-prec-div=true, -prec-sqrt=true).
            fp32_correctly_rounded_divide_sqrt: true,
            // Warps.
            sub_group_sizes: vec![32],
            spirv_sub_group_shuffle: false,
            // The PTX memory model's scoped, ordered atomics and fences (`ld.acquire.sys`,
            // `fence.acq_rel.gpu`) start at sm_70.
            atomic_caps: if cc.0 >= 7 {
                AtomicCaps::ALL
            } else {
                AtomicCaps::RELAXED
            },
            opencl_c_work_group_collectives: false,
        };
        Ok(Device {
            ordinal,
            cu,
            index,
            info,
            caps: Caps {
                cc,
                managed,
                vmm,
                posix_fd,
                ipc_event,
                max_grid,
            },
            primary: Mutex::new(Weak::new()),
        })
    }

    /// The device's primary context, retained on first use and shared by every sycl context
    /// on this device; released when the last holder drops it.
    pub(crate) fn primary_context(&self) -> Result<Arc<PrimaryContext>> {
        let mut slot = lock(&self.primary);
        if let Some(p) = slot.upgrade() {
            return Ok(p);
        }
        let p = Arc::new(PrimaryContext::retain(self.cu, self.ordinal)?);
        // Load the embedded fill kernel with the context, so that no fill pays module loading.
        // (It was first moved here when host tasks blocked streams, and loading a module next
        // to a blocked stream deadlocked; host tasks no longer block streams.)
        let _current = p.make_current()?;
        match crate::queue::FillKernel::load() {
            Ok(k) => *lock(&p.fill) = Some(k),
            Err(e) => log::warn!("fill kernel unavailable, fills use 2-D memsets: {e}"),
        }
        *slot = Arc::downgrade(&p);
        Ok(p)
    }

    /// The identity written into IPC handles (the UUID).
    pub(crate) fn identity(&self) -> [u8; 16] {
        self.info.identity(self.index)
    }
}

impl sycl_backend::Device for Device {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn index(&self) -> usize {
        self.index
    }

    #[doc(alias = "cuDeviceCanAccessPeer")]
    fn can_access_peer(&self, peer: &Arc<dyn sycl_backend::Device>) -> bool {
        let Some(peer) = peer.as_any().downcast_ref::<Device>() else {
            return false;
        };
        if peer.cu == self.cu {
            return true;
        }
        match result::device::can_access_peer(peer.cu, self.cu) {
            Ok(v) => v,
            Err(e) => {
                log::debug!("cuDeviceCanAccessPeer: {e}");
                false
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
