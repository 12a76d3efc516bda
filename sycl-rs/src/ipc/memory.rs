//! `ipc::memory`: share USM device memory.
//!
//! ```
//! use sycl::{ipc, Device, Queue};
//! let q = Queue::in_order(&Device::default_device().unwrap()).unwrap();
//! # if !q.device().has(sycl::Aspect::ExtOneapiIpcMemory) { return; }
//! let buf = sycl::malloc_device::<u64>(512, &q).unwrap();
//! let handle = ipc::memory::get(&buf).unwrap();
//! let bytes = handle.to_vec(); // send these to another process ...
//! // ... which opens them (here: the same process, which works too).
//! let opened = ipc::memory::open::<u64>(&ipc::Handle::from_bytes(bytes).unwrap(), q.context(), q.device()).unwrap();
//! assert_eq!(opened.len(), 512);
//! ipc::memory::close(opened).unwrap();
//! ipc::memory::put(handle).unwrap();
//! ```

use bytemuck::Pod;
use sycl_backend::{Aspect, UsmKind};

use super::{check_put, default_device_for, prepare_import, Handle, IpcObjectKind};
use crate::usm::{AsUsmRange, MemoryRecord, Release};
use crate::{Context, Device, Errc, Error, Result, Usm};

/// `ipc::memory::get`: a handle to the USM device memory starting at `memory`'s first element
/// (interior pointers allowed; the importer sees from there to the end of the allocation).
///
/// Errors: `Errc::FeatureNotSupported` when the device lacks `ext_oneapi_ipc_memory`;
/// `Errc::Invalid` for host or shared USM, empty allocations, memory itself opened through IPC,
/// and virtual-memory mappings (share those with [`crate::ipc::physical_memory`]).
pub fn get<T: Pod>(memory: &impl AsUsmRange<T>) -> Result<Handle> {
    let range = memory.usm_range();
    let record = &range.record;
    match (record.kind, record.release) {
        (UsmKind::Device, Release::Free) => {}
        (UsmKind::Device, Release::IpcClose) => {
            return Err(Error::invalid(
                "memory opened through IPC cannot be exported again; share the original handle",
            ))
        }
        (UsmKind::Device, Release::Unmap) => {
            return Err(Error::invalid(
                "a virtual-memory mapping is shared with ipc::physical_memory, not ipc::memory",
            ))
        }
        (UsmKind::Device, Release::Nothing) => {
            return Err(Error::invalid("an empty allocation cannot be exported"))
        }
        (kind, _) => {
            return Err(Error::invalid(format!(
                "ipc::memory exports USM device memory; this is {kind} USM"
            )))
        }
    }
    let device = record
        .device
        .as_ref()
        .ok_or_else(|| Error::new(Errc::Runtime, "device USM without a device"))?;
    device.require(Aspect::ExtOneapiIpcMemory, "ipc::memory::get")?;
    let ptr = range.as_ptr();
    let object_size = record.size as u64 - (ptr - record.ptr);
    let export = record.context.raw().ipc_get_mem(ptr)?;
    Handle::new_export(
        &record.context,
        IpcObjectKind::Memory,
        device.identity(),
        object_size,
        export,
    )
}

/// `ipc::memory::put`: releases what `get` holds for this handle. Optional: freeing the memory
/// releases it too. Memory already opened elsewhere stays valid. Dropping a `Handle` does not
/// put it, so that bytes already sent stay openable until the memory is freed.
///
/// Errors: `Errc::Invalid` for a handle not returned by `get` in this process.
pub fn put(handle: Handle) -> Result<()> {
    let context = check_put(&handle, IpcObjectKind::Memory)?;
    context.raw().ipc_put_mem(handle.payload())
}

/// `ipc::memory::open`: maps the memory `handle` names into this process on `device` of
/// `context`; the returned owner closes it on drop (or with [`close`]). Opening the same handle
/// N times gives N owners. Opening in the exporting process works.
///
/// Errors: `Errc::FeatureNotSupported` when `device` lacks `ext_oneapi_ipc_memory`;
/// `Errc::Invalid` for a handle of another kind or an exporter that exited;
/// `Errc::BackendMismatch` for a handle of another backend.
pub fn open<T: Pod>(handle: &Handle, context: &Context, device: &Device) -> Result<Usm<T>> {
    context.check_device(device)?;
    device.require(Aspect::ExtOneapiIpcMemory, "ipc::memory::open")?;
    let import = prepare_import(handle, IpcObjectKind::Memory, context)?;
    let size = usize::try_from(handle.object_size())
        .map_err(|_| Error::invalid("object size overflows"))?;
    let ptr = context
        .raw()
        .ipc_open_mem(&device.inner, import)
        .map_err(|e| super::explain_open_failure(handle, e))?;
    Ok(opened(context, device, ptr, size))
}

/// The owner of `size` bytes of opened IPC memory at `ptr`: device USM that closes on drop.
fn opened<T: Pod>(context: &Context, device: &Device, ptr: u64, size: usize) -> Usm<T> {
    let record = MemoryRecord::new(
        context.clone(),
        ptr,
        size,
        UsmKind::Device,
        Some(device.clone()),
        Release::IpcClose,
        None,
    );
    Usm::from_record(record, size / std::mem::size_of::<T>().max(1))
}

/// `open` on the default context of `device`'s platform.
pub fn open_on<T: Pod>(handle: &Handle, device: &Device) -> Result<Usm<T>> {
    open(handle, &Context::default_for(device)?, device)
}

/// `open` on the device the handle was exported from when it is on this node (else the
/// default device), in its default context.
pub fn open_default<T: Pod>(handle: &Handle) -> Result<Usm<T>> {
    open_on(handle, &default_device_for(handle)?)
}

/// `ipc::memory::close`: unmaps memory that [`open`] returned (after its pending commands).
///
/// Errors: `Errc::Invalid` for memory that did not come from `open`.
pub fn close<T: Pod>(memory: Usm<T>) -> Result<()> {
    if memory.record.release != Release::IpcClose {
        return Err(Error::invalid(
            "ipc::memory::close takes memory returned by ipc::memory::open",
        ));
    }
    memory.record.release_now()
}

/// Opens a raw 64-byte `CUipcMemHandle` made by any CUDA program (`cudaIpcGetMemHandle` /
/// `cuIpcGetMemHandle`) for an allocation of `size_bytes`, on a CUDA `device` of `context`:
/// ranks written against the CUDA runtime can share with sycl-rs ranks. The owner closes on
/// drop; opens of a handle already open in this process share one driver mapping.
///
/// Errors: `Errc::BackendMismatch` for a device of another backend; `Errc::FeatureNotSupported`
/// without `ext_oneapi_ipc_memory` (or without the CUDA backend compiled in); the driver's
/// error (e.g. `Invalid` for a stale handle) otherwise. The size cannot be checked against
/// the allocation: the handle does not carry it.
pub fn open_cuda_raw<T: Pod>(
    raw: &[u8; 64],
    size_bytes: usize,
    context: &Context,
    device: &Device,
) -> Result<Usm<T>> {
    context.check_device(device)?;
    if device.backend() != sycl_backend::BackendKind::Cuda {
        return Err(Error::new(
            Errc::BackendMismatch,
            format!(
                "a raw CUDA IPC handle needs a CUDA device, not {}",
                device.backend()
            ),
        ));
    }
    device.require(Aspect::ExtOneapiIpcMemory, "ipc::memory::open_cuda_raw")?;
    #[cfg(feature = "cuda")]
    {
        let ptr =
            sycl_backend_cuda::open_raw_ipc_mem_handle(context.raw().as_ref(), &device.inner, raw)?;
        Ok(opened(context, device, ptr, size_bytes))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (raw, size_bytes);
        Err(Error::unsupported_by_backend(
            sycl_backend::BackendKind::Cuda,
            "raw CUDA IPC handles (feature `cuda` is off)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_cuda_handles_need_a_cuda_device() {
        let d = crate::DeviceSelector::filter("native_cpu:*")
            .unwrap()
            .select()
            .unwrap();
        let c = Context::default_for(&d).unwrap();
        let err = open_cuda_raw::<u8>(&[0; 64], 64, &c, &d).unwrap_err();
        assert_eq!(err.code(), Errc::BackendMismatch);
    }
}
