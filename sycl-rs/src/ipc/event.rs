//! `ipc::event`: share events. An opened event shares state with the exporter's: either side
//! can signal it (`Queue::enqueue_signal_event`) or wait on it.

use sycl_backend::Aspect;

use super::{default_device_for, prepare_import, ExportSpec, Handle, IpcObjectKind};
use crate::{Context, Device, Error, Event, Result};

/// `ipc::event::get`. Getting the same event again returns the same handle and counts one
/// more get.
///
/// Errors: `Errc::FeatureNotSupported` when a device of the event's context lacks
/// `ext_oneapi_ipc_event`; `Errc::Invalid` for an event made without `enable_ipc`, or one
/// opened through IPC.
pub fn get(event: &Event) -> Result<Handle> {
    for d in event.context.devices() {
        d.require(Aspect::ExtOneapiIpcEvent, "ipc::event::get")?;
    }
    let exports =
        match (&event.exports, event.ipc_enabled()) {
            (Some(exports), true) => exports,
            (None, true) => return Err(Error::invalid(
                "an event opened through IPC cannot be exported again; share the original handle",
            )),
            _ => {
                return Err(Error::invalid(
                    "the event was created without the enable_ipc property",
                ))
            }
        };
    let identity = event
        .context
        .devices()
        .first()
        .map(Device::identity)
        .unwrap_or_default();
    exports.get(
        ExportSpec {
            context: &event.context,
            kind: IpcObjectKind::Event,
            offset: 0,
            device_identity: identity,
            object_size: 0,
        },
        || event.context.raw().ipc_get_event(&event.inner),
    )
}

/// `ipc::event::put`: counts one `get` down; the last revokes the export.
pub fn put(handle: Handle) -> Result<()> {
    super::put(handle, IpcObjectKind::Event, |ctx, payload| {
        ctx.raw().ipc_put_event(payload)
    })
}

/// `ipc::event::open`: an [`Event`] sharing the exporter's event; released on drop.
pub fn open(handle: &Handle, context: &Context) -> Result<Event> {
    for d in context.devices() {
        d.require(Aspect::ExtOneapiIpcEvent, "ipc::event::open")?;
    }
    let import = prepare_import(handle, IpcObjectKind::Event, context)?;
    if handle.object_size() != 0 {
        return Err(Error::invalid(format!(
            "an event handle names no memory, but this one claims {} bytes",
            handle.object_size()
        )));
    }
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
