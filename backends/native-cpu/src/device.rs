//! The CPU device: its description, read once from `/proc`.

use std::any::Any;

use sycl_backend::{Aspect, BackendKind, DeviceInfo, DeviceType};

/// Largest work-group of closure kernels.
pub(crate) const MAX_WORK_GROUP_SIZE: usize = 8192;

/// The host CPU as a SYCL device.
pub struct Device {
    info: DeviceInfo,
    index: usize,
}

/// The value of `key` in the first `key : value` line of `/proc/cpuinfo`-like text.
fn proc_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key)
            .then(|| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    })
}

impl Device {
    pub(crate) fn new(index: usize) -> Device {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let name = proc_field(&cpuinfo, "model name").unwrap_or_else(|| "CPU".to_owned());
        let vendor = proc_field(&cpuinfo, "vendor_id").unwrap_or_else(|| "unknown".to_owned());
        let vendor_id = match vendor.as_str() {
            "GenuineIntel" => 0x8086,
            "AuthenticAMD" => 0x1022,
            _ => 0,
        };
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let global_mem_size = proc_field(&meminfo, "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| {
                log::warn!("native_cpu: no MemTotal in /proc/meminfo; reporting 1 GiB of memory");
                1 << 30
            });
        let max_compute_units = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .try_into()
            .unwrap_or(u32::MAX);
        let info = DeviceInfo {
            name,
            vendor,
            vendor_id,
            driver_version: env!("CARGO_PKG_VERSION").to_owned(),
            version: format!("sycl-rs native CPU {}", env!("CARGO_PKG_VERSION")),
            device_type: DeviceType::Cpu,
            max_compute_units,
            global_mem_size,
            local_mem_size: 64 * 1024,
            max_mem_alloc_size: global_mem_size,
            max_work_group_size: MAX_WORK_GROUP_SIZE,
            max_work_item_sizes: [MAX_WORK_GROUP_SIZE; 3],
            uuid: None,
            fp32_correctly_rounded_divide_sqrt: true,
            // `#[sycl::kernel]` cuts work-groups into sub-groups of 32 (sycl::kernel::__rt).
            sub_group_sizes: vec![32],
            spirv_sub_group_shuffle: false,
            atomic_caps: sycl_backend::AtomicCaps::ALL,
            opencl_c_work_group_collectives: false,
            aspects: vec![
                Aspect::Cpu,
                Aspect::Fp64,
                Aspect::Atomic64,
                Aspect::QueueProfiling,
                Aspect::UsmDeviceAllocations,
                Aspect::UsmHostAllocations,
                Aspect::UsmSharedAllocations,
                Aspect::UsmSystemAllocations,
                Aspect::ExtOneapiVirtualMem,
                Aspect::ExtOneapiIpcMemory,
                Aspect::ExtOneapiIpcPhysicalMemory,
                Aspect::ExtOneapiIpcEvent,
                Aspect::ExtOneapiReusableEvents,
                Aspect::ExtSyclRsClosureKernels,
                Aspect::ExtSyclRsKernels,
                Aspect::ExtSyclRsSubGroups,
                Aspect::ExtSyclRsEventSignalCount,
            ],
        };
        Device { info, index }
    }
}

impl sycl_backend::Device for Device {
    fn backend(&self) -> BackendKind {
        BackendKind::NativeCpu
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn index(&self) -> usize {
        self.index
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::proc_field;

    #[test]
    fn proc_fields_are_parsed() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Some CPU @ 2GHz\n";
        assert_eq!(
            proc_field(text, "model name").as_deref(),
            Some("Some CPU @ 2GHz")
        );
        assert_eq!(
            proc_field(text, "vendor_id").as_deref(),
            Some("GenuineIntel")
        );
        assert_eq!(proc_field(text, "flags"), None);
        assert_eq!(
            proc_field("MemTotal:       16318412 kB\n", "MemTotal").as_deref(),
            Some("16318412 kB")
        );
    }
}
