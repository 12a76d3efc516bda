//! `ipc::physical_memory`: share physical memory objects; importers map them into their own
//! reserved ranges.

use sycl_backend::Aspect;

use super::{check_put, default_device_for, prepare_import, Handle, IpcObjectKind};
use crate::virtual_mem::PhysicalMem;
use crate::{Context, Device, Error, Result};

/// `ipc::physical_memory::get`.
///
/// Errors: `Errc::FeatureNotSupported` when the device lacks `ext_oneapi_ipc_physical_memory`;
/// `Errc::Invalid` when the object was made without `enable_ipc`.
pub fn get(memory: &PhysicalMem) -> Result<Handle> {
    memory.device.require(
        Aspect::ExtOneapiIpcPhysicalMemory,
        "ipc::physical_memory::get",
    )?;
    if !memory.ipc_enabled() {
        return Err(Error::invalid(
            "the physical memory was created without the enable_ipc property",
        ));
    }
    let export = memory.context.raw().ipc_get_physical_mem(&memory.inner)?;
    Handle::new_export(
        &memory.context,
        IpcObjectKind::PhysicalMemory,
        memory.device.identity(),
        memory.size() as u64,
        export,
    )
}

/// `ipc::physical_memory::put`: releases what `get` holds; objects already opened stay valid.
pub fn put(handle: Handle) -> Result<()> {
    let context = check_put(&handle, IpcObjectKind::PhysicalMemory)?;
    context.raw().ipc_put_physical_mem(handle.payload())
}

/// `ipc::physical_memory::open`: a [`PhysicalMem`] sharing the exporter's memory, for this
/// process to map with [`PhysicalMem::map`]. Dropping it releases this process's reference.
pub fn open(handle: &Handle, context: &Context, device: &Device) -> Result<PhysicalMem> {
    context.check_device(device)?;
    device.require(
        Aspect::ExtOneapiIpcPhysicalMemory,
        "ipc::physical_memory::open",
    )?;
    let import = prepare_import(handle, IpcObjectKind::PhysicalMemory, context)?;
    let inner = context
        .raw()
        .ipc_open_physical_mem(&device.inner, import)
        .map_err(|e| super::explain_open_failure(handle, e))?;
    Ok(PhysicalMem {
        inner,
        context: context.clone(),
        device: device.clone(),
    })
}

/// `open` on the default context of `device`'s platform.
pub fn open_on(handle: &Handle, device: &Device) -> Result<PhysicalMem> {
    open(handle, &Context::default_for(device)?, device)
}

/// `open` on the handle's own device when it is on this node, else the default device.
pub fn open_default(handle: &Handle) -> Result<PhysicalMem> {
    open_on(handle, &default_device_for(handle)?)
}
