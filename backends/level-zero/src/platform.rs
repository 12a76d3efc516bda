//! Platforms: one per Level Zero driver.

use std::any::Any;
use std::ffi::CStr;
use std::sync::Arc;

use level_zero_sys::*;
use sycl_backend::{BackendKind, Error, PlatformInfo, Result};

use crate::context::{Context, ContextInner};
use crate::device::Device;
use crate::result;

/// How standalone IPC events are made on this driver (see `event.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventIpcRoute {
    /// Core counter-based events (`zeEventCounterBasedCreate`, spec 1.15).
    CounterBased,
    /// The compute-runtime `zexCounterBasedEvent*` extension functions.
    Zex,
    /// Neither: a dedicated IPC event pool per exported event (`ZE_EVENT_POOL_FLAG_IPC`).
    EventPool,
}

/// The compute-runtime extension functions resolved with `zeDriverGetExtensionFunctionAddress`.
#[derive(Clone, Copy)]
pub struct ZexFns {
    /// `zexCounterBasedEventCreate2`.
    pub create: PFN_zexCounterBasedEventCreate2,
    /// `zexCounterBasedEventGetIpcHandle`.
    pub get_ipc: PFN_zexCounterBasedEventGetIpcHandle,
    /// `zexCounterBasedEventOpenIpcHandle`.
    pub open_ipc: PFN_zexCounterBasedEventOpenIpcHandle,
    /// `zexCounterBasedEventCloseIpcHandle`.
    pub close_ipc: PFN_zexCounterBasedEventCloseIpcHandle,
}

/// What a driver offers beyond the 1.4 core, found once at enumeration.
pub struct DriverExt {
    /// `zeDriverGetApiVersion`.
    pub api_version: ze_api_version_t,
    /// `driverVersion` of `ze_driver_properties_t`.
    pub driver_version: u32,
    /// The `zex` counter-based event functions, when the driver has all four.
    pub zex: Option<ZexFns>,
}

impl DriverExt {
    /// Whether immediate command lists may be created with `ZE_COMMAND_QUEUE_FLAG_IN_ORDER`
    /// (spec 1.7).
    pub fn has_in_order_lists(&self) -> bool {
        self.api_version >= ZE_MAKE_VERSION(1, 7)
    }

    /// The route for IPC events given the loader's optional entry points.
    pub fn event_ipc_route(&self, l: &Loader) -> EventIpcRoute {
        if l.zeEventCounterBasedCreate.is_some()
            && l.zeEventCounterBasedGetIpcHandle.is_some()
            && l.zeEventCounterBasedOpenIpcHandle.is_some()
            && l.zeEventCounterBasedCloseIpcHandle.is_some()
            && self.api_version >= ZE_MAKE_VERSION(1, 15)
        {
            EventIpcRoute::CounterBased
        } else if self.zex.is_some() && self.has_in_order_lists() {
            EventIpcRoute::Zex
        } else {
            EventIpcRoute::EventPool
        }
    }
}

/// A Level Zero driver as a SYCL platform.
pub struct Platform {
    pub(crate) loader: Arc<Loader>,
    pub(crate) driver: ze_driver_handle_t,
    pub(crate) ext: Arc<DriverExt>,
    info: PlatformInfo,
    devices: Vec<Arc<dyn sycl_backend::Device>>,
}

// SAFETY: a driver handle is an immutable identifier; Level Zero driver and device queries are
// thread-safe (spec "Multithreading and Concurrency": all calls except those on one command list
// or kernel may be made from several threads).
unsafe impl Send for Platform {}
// SAFETY: as above; `Platform` has no interior mutability.
unsafe impl Sync for Platform {}

fn resolve_zex(l: &Loader, d: ze_driver_handle_t) -> Option<ZexFns> {
    let get = |name: &CStr| result::driver::extension_function(l, d, name);
    let create = get(c"zexCounterBasedEventCreate2")?;
    let get_ipc = get(c"zexCounterBasedEventGetIpcHandle")?;
    let open_ipc = get(c"zexCounterBasedEventOpenIpcHandle")?;
    let close_ipc = get(c"zexCounterBasedEventCloseIpcHandle")?;
    // SAFETY: the driver returned these addresses for these names; the signatures are those of
    // compute-runtime's `ze_intel_gpu.h` (level-zero-ipc.md §4.4.2). Function pointers and
    // `*mut c_void` have the same size on every platform Level Zero supports.
    unsafe {
        Some(ZexFns {
            create: std::mem::transmute::<*mut std::ffi::c_void, PFN_zexCounterBasedEventCreate2>(
                create,
            ),
            get_ipc: std::mem::transmute::<
                *mut std::ffi::c_void,
                PFN_zexCounterBasedEventGetIpcHandle,
            >(get_ipc),
            open_ipc: std::mem::transmute::<
                *mut std::ffi::c_void,
                PFN_zexCounterBasedEventOpenIpcHandle,
            >(open_ipc),
            close_ipc: std::mem::transmute::<
                *mut std::ffi::c_void,
                PFN_zexCounterBasedEventCloseIpcHandle,
            >(close_ipc),
        })
    }
}

impl Platform {
    pub(crate) fn new(loader: Arc<Loader>, driver: ze_driver_handle_t) -> Result<Platform> {
        let props = result::driver::properties(&loader, driver)?;
        let api_version = result::driver::api_version(&loader, driver)?;
        let zex = resolve_zex(&loader, driver);
        let ext = Arc::new(DriverExt {
            api_version,
            driver_version: props.driverVersion,
            zex,
        });
        let version = format!(
            "Level Zero {}.{} (driver {:#x})",
            api_version >> 16,
            api_version & 0xffff,
            props.driverVersion
        );
        let mut devices: Vec<Arc<dyn sycl_backend::Device>> = Vec::new();
        for h in result::device::get(&loader, driver)? {
            let index = devices.len();
            match Device::new(loader.clone(), driver, ext.clone(), h, index) {
                Ok(d) => devices.push(Arc::new(d)),
                Err(e) => log::warn!("level_zero: a device was left out: {e}"),
            }
        }
        Ok(Platform {
            loader,
            driver,
            ext,
            info: PlatformInfo {
                name: "Intel(R) Level-Zero".into(),
                vendor: "Intel(R) Corporation".into(),
                version,
            },
            devices,
        })
    }
}

impl sycl_backend::Platform for Platform {
    fn backend(&self) -> BackendKind {
        BackendKind::LevelZero
    }
    fn info(&self) -> &PlatformInfo {
        &self.info
    }
    fn devices(&self) -> Vec<Arc<dyn sycl_backend::Device>> {
        self.devices.clone()
    }
    fn create_context(
        &self,
        devices: &[Arc<dyn sycl_backend::Device>],
    ) -> Result<Arc<dyn sycl_backend::Context>> {
        if devices.is_empty() {
            return Err(Error::invalid("a context needs at least one device"));
        }
        let mut ze_devices = Vec::with_capacity(devices.len());
        for d in devices {
            let dev =
                sycl_backend::downcast::<Device>(d.as_any(), "device", BackendKind::LevelZero)?;
            if dev.driver != self.driver {
                return Err(Error::invalid(
                    "device belongs to another Level Zero platform",
                ));
            }
            ze_devices.push(dev.handle);
        }
        let inner = ContextInner::create(
            self.loader.clone(),
            self.driver,
            self.ext.clone(),
            devices.to_vec(),
            ze_devices,
        )?;
        Ok(Arc::new(Context {
            inner: Arc::new(inner),
        }))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
