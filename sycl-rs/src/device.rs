//! `sycl::device` and its aspects.

use std::fmt;
use std::sync::Arc;

use sycl_backend::{Aspect, BackendKind, DeviceType};

use crate::selector::DeviceSelector;
use crate::{Platform, Result};

/// A device: a GPU, a CPU or an accelerator, on one platform.
///
/// Devices compare equal when they are the same device of the same platform.
///
/// ```
/// # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
/// let device = sycl::Device::default_device().unwrap();
/// println!("{} on {}", device.name(), device.backend());
/// assert!(device.has(sycl::Aspect::UsmDeviceAllocations) || !device.aspects().is_empty());
/// ```
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<dyn sycl_backend::Device>,
    platform: Platform,
}

impl Device {
    pub(crate) fn from_parts(inner: Arc<dyn sycl_backend::Device>, platform: Platform) -> Self {
        Device { inner, platform }
    }

    /// Every device of every platform, unfiltered.
    pub fn all() -> Vec<Device> {
        Platform::all().iter().flat_map(Platform::devices).collect()
    }

    /// The native CPU device: sycl-rs' own backend, present on every machine. Unlike the
    /// selectors, this ignores `ONEAPI_DEVICE_SELECTOR` (an explicit request), so code and tests
    /// that need this very device do not depend on the caller's environment.
    ///
    /// ```
    /// let cpu = sycl::Device::native_cpu();
    /// assert_eq!(cpu.backend(), sycl::BackendKind::NativeCpu);
    /// ```
    pub fn native_cpu() -> Device {
        Platform::all()
            .iter()
            .find(|p| p.backend() == BackendKind::NativeCpu)
            .and_then(|p| p.devices().into_iter().next())
            .expect("the native CPU backend never fails to load (sycl-backend-native-cpu::load)")
    }

    /// The device the default selector picks: a GPU when one exists, else the native CPU device,
    /// among the devices `ONEAPI_DEVICE_SELECTOR` allows.
    pub fn default_device() -> Result<Device> {
        DeviceSelector::Default.select()
    }

    /// The device `selector` picks.
    pub fn select(selector: &DeviceSelector) -> Result<Device> {
        selector.select()
    }

    /// Its platform.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// Its backend.
    pub fn backend(&self) -> BackendKind {
        self.inner.backend()
    }

    /// Its position among its platform's devices.
    pub fn index_in_platform(&self) -> usize {
        self.inner.index()
    }

    pub(crate) fn info(&self) -> &sycl_backend::DeviceInfo {
        self.inner.info()
    }

    /// `info::device::name`.
    pub fn name(&self) -> &str {
        &self.info().name
    }

    /// `info::device::vendor`.
    pub fn vendor(&self) -> &str {
        &self.info().vendor
    }

    /// `info::device::vendor_id`.
    pub fn vendor_id(&self) -> u32 {
        self.info().vendor_id
    }

    /// `info::device::driver_version`.
    pub fn driver_version(&self) -> &str {
        &self.info().driver_version
    }

    /// `info::device::version`.
    pub fn version(&self) -> &str {
        &self.info().version
    }

    /// `info::device::device_type`.
    pub fn device_type(&self) -> DeviceType {
        self.info().device_type
    }

    /// `info::device::max_compute_units`.
    pub fn max_compute_units(&self) -> u32 {
        self.info().max_compute_units
    }

    /// `info::device::global_mem_size` in bytes.
    pub fn global_mem_size(&self) -> u64 {
        self.info().global_mem_size
    }

    /// `info::device::local_mem_size` in bytes.
    pub fn local_mem_size(&self) -> u64 {
        self.info().local_mem_size
    }

    /// `info::device::max_mem_alloc_size` in bytes.
    pub fn max_mem_alloc_size(&self) -> u64 {
        self.info().max_mem_alloc_size
    }

    /// `info::device::max_work_group_size`.
    pub fn max_work_group_size(&self) -> usize {
        self.info().max_work_group_size
    }

    /// `info::device::max_work_item_sizes<3>`.
    pub fn max_work_item_sizes(&self) -> [usize; 3] {
        self.info().max_work_item_sizes
    }

    /// `info::device::sub_group_sizes`: the sub-group sizes kernels may run with, where the
    /// driver says (native CPU and CUDA: 32; OpenCL: listed by Intel's drivers only); empty
    /// where unknown. Whether `#[sycl::kernel]` kernels may use sub-groups at all is aspect
    /// `ext_sycl_rs_sub_groups`.
    pub fn sub_group_sizes(&self) -> &[usize] {
        &self.info().sub_group_sizes
    }

    /// `ext::intel::info::device::uuid`, where the driver has one.
    pub fn uuid(&self) -> Option<[u8; 16]> {
        self.info().uuid
    }

    /// `info::device::atomic_memory_order_capabilities`: the memory orders of atomics and
    /// fences in `#[sycl::kernel]` kernels on this device (a kernel that uses another fails to
    /// launch with `Errc::FeatureNotSupported`). OpenCL 3.0 devices say (their atomic and fence
    /// capabilities together); CUDA has all from compute capability 7.0.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let cpu = sycl::Device::native_cpu();
    /// assert!(cpu.atomic_memory_order_capabilities().contains(&Ordering::SeqCst));
    /// ```
    pub fn atomic_memory_order_capabilities(&self) -> Vec<std::sync::atomic::Ordering> {
        let bits = self.info().atomic_caps.orders;
        sycl_kernel_ir::MemoryOrder::ALL
            .into_iter()
            .filter(|o| bits & o.bit() != 0)
            .map(Into::into)
            .collect()
    }

    /// `info::device::atomic_memory_scope_capabilities`: the memory scopes of atomics and
    /// fences in `#[sycl::kernel]` kernels on this device.
    ///
    /// ```
    /// use sycl::kernel::MemoryScope;
    /// let cpu = sycl::Device::native_cpu();
    /// assert!(cpu.atomic_memory_scope_capabilities().contains(&MemoryScope::System));
    /// ```
    pub fn atomic_memory_scope_capabilities(&self) -> Vec<crate::kernel::MemoryScope> {
        let bits = self.info().atomic_caps.scopes;
        crate::kernel::MemoryScope::ALL
            .into_iter()
            .filter(|s| bits & s.bit() != 0)
            .collect()
    }

    /// Whether the device has `aspect`.
    pub fn has(&self, aspect: Aspect) -> bool {
        self.inner.has(aspect)
    }

    /// All its aspects.
    pub fn aspects(&self) -> Vec<Aspect> {
        self.info().aspects.clone()
    }

    /// True for GPUs.
    pub fn is_gpu(&self) -> bool {
        self.device_type() == DeviceType::Gpu
    }

    /// True for CPUs.
    pub fn is_cpu(&self) -> bool {
        self.device_type() == DeviceType::Cpu
    }

    /// Whether this device can access memory allocated on `peer` (same platform).
    pub fn can_access_peer(&self, peer: &Device) -> bool {
        self == peer || (self.platform == peer.platform && self.inner.can_access_peer(&peer.inner))
    }

    /// Returns `Errc::FeatureNotSupported` naming `aspect` unless the device has it.
    pub(crate) fn require(&self, aspect: Aspect, what: &str) -> Result<()> {
        if self.has(aspect) {
            Ok(())
        } else {
            Err(crate::Error::unsupported(
                aspect,
                format!("{what} on {} ({})", self.name(), self.backend()),
            ))
        }
    }

    /// 16 bytes naming this device on this node (its UUID, or a stable hash).
    pub(crate) fn identity(&self) -> [u8; 16] {
        self.info().identity(self.index_in_platform())
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Device {}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .field("type", &self.device_type())
            .finish()
    }
}
