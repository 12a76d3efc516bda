//! `ipc::event`: share events. An opened event shares state with the exporter's: either side
//! can signal it (`Queue::enqueue_signal_event`) or wait on it.

use sycl_backend::Aspect;

use super::{check_put, default_device_for, prepare_import, Handle, IpcObjectKind};
use crate::{Context, Device, Error, Event, Result};

/// `ipc::event::get`.
///
/// Errors: `Errc::FeatureNotSupported` when a device of the event's context lacks
/// `ext_oneapi_ipc_event`; `Errc::Invalid` for an event made without `enable_ipc`.
pub fn get(event: &Event) -> Result<Handle> {
    for d in event.context.devices() {
        d.require(Aspect::ExtOneapiIpcEvent, "ipc::event::get")?;
    }
    if !event.ipc_enabled() {
        return Err(Error::invalid(
            "the event was created without the enable_ipc property",
        ));
    }
    let export = event.context.raw().ipc_get_event(&event.inner)?;
    let identity = event
        .context
        .devices()
        .first()
        .map(Device::identity)
        .unwrap_or_default();
    Handle::new_export(&event.context, IpcObjectKind::Event, identity, 0, export)
}

/// `ipc::event::put`.
pub fn put(handle: Handle) -> Result<()> {
    let context = check_put(&handle, IpcObjectKind::Event)?;
    context.raw().ipc_put_event(handle.payload())
}

/// `ipc::event::open`: an [`Event`] sharing the exporter's event; released on drop.
pub fn open(handle: &Handle, context: &Context) -> Result<Event> {
    for d in context.devices() {
        d.require(Aspect::ExtOneapiIpcEvent, "ipc::event::open")?;
    }
    let import = prepare_import(handle, IpcObjectKind::Event, context)?;
    let inner = context
        .raw()
        .ipc_open_event(import)
        .map_err(|e| super::explain_open_failure(handle, e))?;
    Ok(Event::from_raw(inner, context.clone()))
}

/// `open` in the default context of the handle's device (or the default device).
pub fn open_default(handle: &Handle) -> Result<Event> {
    open(handle, &Context::default_for(&default_device_for(handle)?)?)
}
