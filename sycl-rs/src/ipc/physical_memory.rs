//! `ipc::physical_memory`: share physical memory objects; importers map them into their own
//! reserved ranges.

use sycl_backend::Aspect;

use super::{default_device_for, prepare_import, ExportSpec, Handle, IpcObjectKind};
use crate::virtual_mem::PhysicalMem;
use crate::{Context, Device, Error, Result};

/// `ipc::physical_memory::get`. Getting the same object again returns the same handle and
/// counts one more get.
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
    memory.exports.get(
        ExportSpec {
            context: &memory.context,
            kind: IpcObjectKind::PhysicalMemory,
            offset: 0,
            device_identity: memory.device.identity(),
            object_size: memory.size() as u64,
        },
        || memory.context.raw().ipc_get_physical_mem(&memory.inner),
    )
}

/// `ipc::physical_memory::put`: counts one `get` down; the last revokes the export (objects
/// already opened stay valid). Dropping the last clone of the `PhysicalMem` revokes too.
pub fn put(handle: Handle) -> Result<()> {
    super::put(handle, IpcObjectKind::PhysicalMemory, |ctx, payload| {
        ctx.raw().ipc_put_physical_mem(payload)
    })
}

/// `ipc::physical_memory::open`: a [`PhysicalMem`] sharing the exporter's memory, for this
/// process to map with [`PhysicalMem::map`]. Dropping it releases this process's reference.
/// Its mappings are shared with other processes (views and queue copies only).
///
/// Errors: as [`crate::ipc::memory::open`]; `Errc::Invalid` when the handle's size does not
/// match the object the backend opened.
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
    if inner.size() as u64 != handle.object_size() {
        return Err(Error::invalid(format!(
            "the handle claims {} bytes, but the physical memory opened has {}",
            handle.object_size(),
            inner.size()
        )));
    }
    Ok(PhysicalMem::from_parts(inner, context, device))
}

/// `open` on the default context of `device`'s platform.
pub fn open_on(handle: &Handle, device: &Device) -> Result<PhysicalMem> {
    open(handle, &Context::default_for(device)?, device)
}

/// `open` on the handle's own device when it is on this node, else the default device.
pub fn open_default(handle: &Handle) -> Result<PhysicalMem> {
    open_on(handle, &default_device_for(handle)?)
}
