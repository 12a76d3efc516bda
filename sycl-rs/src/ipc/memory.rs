//! `ipc::memory`: share USM device memory.
//!
//! ```
//! # std::env::remove_var("ONEAPI_DEVICE_SELECTOR"); // doctests must not depend on the caller's environment
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
// `open_cuda_raw` is an `unsafe fn`: its contract is one the runtime cannot check.
#![allow(unsafe_code)]

use bytemuck::Pod;
use sycl_backend::ipc::OpenedMemory;
use sycl_backend::{AccessMode, Aspect, UsmKind};

use super::{default_device_for, prepare_import, ExportSpec, Handle, IpcObjectKind};
use crate::usm::{AsUsmRange, MemoryRecord, RecordSpec, Release};
use crate::{Context, Device, Errc, Error, Result, Usm};

/// `ipc::memory::get`: a handle to the USM device memory starting at `memory`'s first element
/// (interior pointers allowed; the importer sees from there to the end of the allocation).
///
/// From the first `get` on, the memory counts as shared with other processes for good: they
/// may write it at any time, so the host reaches it only through views and queue copies, never
/// through a `&[T]` ([`Usm::as_slice`] refuses). Getting the same memory again returns the
/// same handle and counts one more get: exporting in a loop holds one export's resources.
///
/// Errors: `Errc::FeatureNotSupported` when the device lacks `ext_oneapi_ipc_memory`;
/// `Errc::Invalid` for host or shared USM, empty allocations, memory itself opened through IPC,
/// virtual-memory mappings (share those with [`crate::ipc::physical_memory`]), and memory the
/// host currently borrows (`as_slice`).
pub fn get<T: Pod>(memory: &impl AsUsmRange<T>) -> Result<Handle> {
    let range = memory.usm_range();
    let record = &range.record;
    let device = share(record, "ipc::memory::get")?;
    let ptr = range.as_ptr();
    let offset = ptr - record.ptr;
    record.exports.get_or_init(Default::default).get(
        ExportSpec {
            context: &record.context,
            kind: IpcObjectKind::Memory,
            offset,
            device_identity: device.identity(),
            object_size: record.size as u64 - offset,
        },
        || record.context.raw().ipc_get_mem(ptr),
    )
}

/// Checks that `record` is memory `ipc::memory` may export (device USM that sycl-rs
/// allocated, on a device with `ext_oneapi_ipc_memory`) and makes it shared (no host borrows
/// from then on); returns its device. `what` names the call for the aspect error.
fn share<'r>(record: &'r MemoryRecord, what: &str) -> Result<&'r Device> {
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
        (_, Release::Foreign) => {
            return Err(Error::invalid(
                "foreign memory (another library's, wrapped with Usm::from_foreign) cannot be \
                 exported: its owner, not sycl-rs, decides how long it lives",
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
    device.require(Aspect::ExtOneapiIpcMemory, what)?;
    record.mark_shared()?;
    Ok(device)
}

/// `ipc::memory::put`: counts one `get` of the handle's export down; the last `put` revokes it
/// (bytes already sent can no longer be opened where the handle names descriptors: native CPU,
/// Level Zero; CUDA memory handles stay openable until the memory is freed, the driver's rule).
/// Optional: freeing the memory revokes too. Memory already opened elsewhere stays valid.
/// Dropping a `Handle` does not put it, so that bytes already sent stay openable.
///
/// Errors: `Errc::Invalid` for a handle not returned by `get` in this process, or whose memory
/// was freed.
pub fn put(handle: Handle) -> Result<()> {
    super::put(handle, IpcObjectKind::Memory, |ctx, payload| {
        ctx.raw().ipc_put_mem(payload)
    })
}

/// `ipc::memory::open`: maps the memory `handle` names into this process on `device` of
/// `context`; the returned owner closes it on drop (or with [`close`]). Opening the same handle
/// N times gives N owners. Opening in the exporting process works.
///
/// The owner is shared with other processes from the start: views and queue copies reach it,
/// host borrows do not (see [`get`]). Its length is the handle's object size over
/// `size_of::<T>()`, after the backend verified that many bytes are really mapped there.
///
/// Errors: `Errc::FeatureNotSupported` when `device` lacks `ext_oneapi_ipc_memory`;
/// `Errc::Invalid` for a handle of another kind, an exporter that exited, a revoked export,
/// a handle claiming more memory than the exporter's allocation holds, or an address not
/// aligned for `T`, or a zero-sized `T`; `Errc::BackendMismatch` for a handle of another
/// backend.
pub fn open<T: Pod>(handle: &Handle, context: &Context, device: &Device) -> Result<Usm<T>> {
    crate::usm::element_size::<T>()?;
    context.check_device(device)?;
    device.require(Aspect::ExtOneapiIpcMemory, "ipc::memory::open")?;
    let import = prepare_import(handle, IpcObjectKind::Memory, context)?;
    let opened = context
        .raw()
        .ipc_open_mem(&device.inner, import)
        .map_err(|e| super::explain_open_failure(handle, e))?;
    let claimed = usize::try_from(handle.object_size()).unwrap_or(usize::MAX);
    owner_of_opened(context, device, opened, claimed, "the handle")
}

/// The owner of opened IPC memory: device USM that closes on drop, shared with other
/// processes, of `claimed` bytes. Refuses (and closes) memory smaller than the claim or not
/// aligned for `T`.
fn owner_of_opened<T: Pod>(
    context: &Context,
    device: &Device,
    opened: OpenedMemory,
    claimed: usize,
    who: &str,
) -> Result<Usm<T>> {
    // The record owns the mapping from here on: every refusal below closes it on drop.
    let record = MemoryRecord::new(RecordSpec {
        context: context.clone(),
        ptr: opened.ptr,
        size: claimed.min(opened.size),
        kind: UsmKind::Device,
        device: Some(device.clone()),
        release: Release::IpcClose,
        shared: true,
        mode: AccessMode::ReadWrite,
        anchor: None,
        backing: None,
    });
    if claimed > opened.size {
        return Err(Error::invalid(format!(
            "{who} claims {claimed} bytes, but only {} are mapped from the exported address \
             (a forged or corrupted size)",
            opened.size
        )));
    }
    let align = std::mem::align_of::<T>();
    if opened.ptr % align as u64 != 0 {
        return Err(Error::invalid(format!(
            "the exported address {:#x} is not aligned for a {align}-byte-aligned element type \
             (exported at an interior offset?): open it as bytes or an element type it suits",
            opened.ptr
        )));
    }
    let len = claimed / crate::usm::element_size::<T>()?;
    Usm::from_record(record, len)
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
/// Errors: `Errc::Invalid` for memory that did not come from `open`, and while ranges, views or
/// kernel arguments of it are alive (it is then closed when the last of them goes).
pub fn close<T: Pod>(memory: Usm<T>) -> Result<()> {
    if memory.record.release != Release::IpcClose {
        return Err(Error::invalid(
            "ipc::memory::close takes memory returned by ipc::memory::open",
        ));
    }
    MemoryRecord::release_explicitly(memory.record, "ipc::memory::close")
}

/// A CUDA allocation as other CUDA programs share it: the raw 64-byte `cudaIpcMemHandle_t`
/// of the allocation (what `cudaIpcGetMemHandle` / CuPy's `ipcGetMemHandle` give) and where
/// the memory starts in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaRawHandle {
    /// The allocation's handle, for `cudaIpcOpenMemHandle` in another process.
    pub handle: [u8; 64],
    /// Bytes from the start of the allocation to the memory's first byte.
    pub offset: u64,
    /// Bytes of the whole allocation, as the driver reports them.
    pub allocation_size: u64,
}

/// `get` for programs outside sycl-rs: the raw CUDA IPC handle of CUDA device memory, for a
/// process that opens it with `cudaIpcOpenMemHandle` (CuPy, PyTorch, plain CUDA). The memory
/// is shared with other processes from then on, as after [`get`] (no host borrows).
///
/// A raw handle carries no export of ours: nothing revokes it, and it stays openable until
/// the memory is freed (the driver's rule for legacy CUDA IPC handles).
///
/// Errors: `Errc::BackendMismatch` for memory of another backend; otherwise as [`get`].
pub fn get_cuda_raw<T: Pod>(memory: &impl AsUsmRange<T>) -> Result<CudaRawHandle> {
    let range = memory.usm_range();
    let backend = range.record.context.backend();
    if backend != sycl_backend::BackendKind::Cuda {
        return Err(Error::new(
            Errc::BackendMismatch,
            format!("a raw CUDA IPC handle needs CUDA memory, not {backend} memory"),
        ));
    }
    // The checks of `get`, and the memory shared from now on; no export of ours is made (a
    // raw handle holds nothing of one), only the driver's handle.
    share(&range.record, "ipc::memory::get_cuda_raw")?;
    let raw = range.record.context.raw().ipc_get_raw_mem(range.as_ptr())?;
    Ok(CudaRawHandle {
        handle: raw.handle.as_slice().try_into().map_err(|_| {
            Error::new(
                Errc::Runtime,
                format!(
                    "the CUDA backend gave a raw handle of {} bytes, not 64",
                    raw.handle.len()
                ),
            )
        })?,
        offset: raw.offset,
        allocation_size: raw.allocation_size,
    })
}

/// Opens a raw 64-byte `CUipcMemHandle` made by any CUDA program (`cudaIpcGetMemHandle` /
/// `cuIpcGetMemHandle`) for an allocation of at least `size_bytes`, on a CUDA `device` of
/// `context`: ranks written against the CUDA runtime (or PyTorch, CuPy) can share with sycl-rs
/// ranks. The owner closes on drop; opens of a handle already open in this process share one
/// driver mapping. `size_bytes` is checked against the size the driver reports for the
/// allocation.
///
/// Errors: `Errc::BackendMismatch` for a device of another backend; `Errc::FeatureNotSupported`
/// without `ext_oneapi_ipc_memory` (or without the CUDA backend compiled in); `Errc::Invalid`
/// when `size_bytes` exceeds the allocation; the driver's error (e.g. `Invalid` for a stale
/// handle) otherwise.
///
/// # Safety
/// Nothing in the 64 bytes says who made them or keeps the allocation alive, so the caller
/// guarantees that the exporting program keeps the allocation allocated, and does not hand the
/// same device memory to anything else, until the returned owner and every command that uses
/// it are gone (a GPU access to freed memory faults the context, or reads another
/// allocation's data).
///
/// ```compile_fail,E0133
/// fn go(raw: &[u8; 64], c: &sycl::Context, d: &sycl::Device) -> sycl::Result<sycl::Usm<f32>> {
///     sycl::ipc::memory::open_cuda_raw::<f32>(raw, 4096, c, d)
/// }
/// ```
pub unsafe fn open_cuda_raw<T: Pod>(
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
    let opened = context.raw().ipc_open_raw_mem(&device.inner, raw)?;
    owner_of_opened(context, device, opened, size_bytes, "size_bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_cuda_handles_need_a_cuda_device() {
        // Picked from every device, not through ONEAPI_DEVICE_SELECTOR: the test must not
        // depend on the caller's environment.
        let d = Device::all()
            .into_iter()
            .find(|d| d.backend() == sycl_backend::BackendKind::NativeCpu)
            .expect("the native CPU device always exists");
        let c = Context::default_for(&d).unwrap();
        // SAFETY: refused before the handle is looked at (not a CUDA device).
        let err = unsafe { open_cuda_raw::<u8>(&[0; 64], 64, &c, &d) }.unwrap_err();
        assert_eq!(err.code(), Errc::BackendMismatch);
    }
}
