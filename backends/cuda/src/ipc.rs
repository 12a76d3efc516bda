//! Inter-process communication of USM device memory, physical memory and events.
//!
//! # Memory (`ipc::memory`, legacy CUDA IPC)
//! `get` calls `cuIpcGetMemHandle` on the **base** of the allocation holding the pointer
//! (`cuMemGetAddressRange_v2`). Payload (96 bytes, little endian):
//! `handle[64] | offset u64 | allocation size u64 | device uuid[16]`. No descriptors.
//! `put` has nothing to release in the driver (a CUDA memory handle owns nothing); it only
//! checks the payload.
//!
//! `open` maps the handle with `cuIpcOpenMemHandle_v2(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)` in
//! the primary context of the chosen device (another GPU of the node works through peer
//! access) and returns `base + offset`. The driver refuses handles exported by the calling
//! process itself; for those (`same_process`) the exporter's own allocation is looked up in
//! this process's export table and `base + offset` returned. A process-wide **open cache**
//! keyed by the handle bytes and the device makes a second open of the same handle for the
//! same device reuse the mapping (the driver is called once) and bump a count; `close`
//! releases the mapping (`cuIpcCloseMemHandle` on the base, with its context current) only
//! when the last owner closes. Each device gets its own mapping, at its own address: a
//! mapping made in one device's context faults when a kernel of another device uses it, even
//! with peer access between the two contexts (seen on 2x H200), while the driver maps the
//! same handle again in the second context. In the exporting process every device gets the
//! allocation itself, with peer access enabled from that device to the allocation's.
//!
//! # Physical memory (`ipc::physical_memory`)
//! `get` exports the allocation handle as a POSIX file descriptor
//! (`cuMemExportToShareableHandle`), kept open by the physical memory object until `put` (or
//! until the object is destroyed). Payload (32 bytes): `size u64 | device uuid[16] |
//! export serial u64`; descriptors: `[fd]`. `open` imports the received descriptor
//! (`cuMemImportFromShareableHandle`, descriptor value in the pointer argument) and wraps it as
//! a new physical memory object of the payload's size.
//!
//! # Events (`ipc::event`)
//! Events made with `enable_ipc` are `CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`. `get`
//! is `cuIpcGetEventHandle`; payload (80 bytes): `handle[64] | device uuid[16]`. `put` has
//! nothing to release. `open` is `cuIpcOpenEventHandle` in the context of the device named by
//! the uuid (or the context's first device); in the exporting process it returns the very
//! same event.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory, PayloadReader};
use sycl_backend::{Aspect, BackendKind, Error, RawIpcMem, Result, UsmKind};

use crate::context::{Context, PrimaryContext};
use crate::event::{Event, EventInner, OwnedEvent};
use crate::virtual_mem::PhysicalMem;
use crate::{lock, result};

type Handle = [u8; 64];

/// An open-cache key: the handle and the CUDA device ordinal whose context maps it.
type OpenKey = (Handle, i32);

struct OpenEntry {
    base: u64,
    /// Bytes of the allocation from `base`, as the driver reports them.
    size: usize,
    refs: usize,
    /// The context the driver mapped it in; `None` for our own allocation (same process).
    ctx: Option<Arc<PrimaryContext>>,
}

#[derive(Default)]
struct MemState {
    /// Handles this process exported: handle -> (allocation base, size, device ordinal).
    exported: HashMap<Handle, (u64, usize, i32)>,
    /// Open handles, per device: the driver maps a handle once per device context (at a
    /// different address on each device).
    opened: HashMap<OpenKey, OpenEntry>,
    /// Addresses returned by open -> (key, how many opens returned it).
    by_ptr: HashMap<u64, (OpenKey, usize)>,
    /// Our own allocations freed by their owner while this process still had them open
    /// through IPC (an open in the exporting process is the allocation itself): base -> the
    /// context to free them in, once the last open closes.
    deferred_free: HashMap<u64, Arc<PrimaryContext>>,
}

fn mem_state() -> &'static Mutex<MemState> {
    static S: OnceLock<Mutex<MemState>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn event_registry() -> &'static Mutex<HashMap<Handle, Weak<EventInner>>> {
    static S: OnceLock<Mutex<HashMap<Handle, Weak<EventInner>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn phys_registry() -> &'static Mutex<HashMap<u64, Weak<dyn sycl_backend::PhysicalMem>>> {
    static S: OnceLock<Mutex<HashMap<u64, Weak<dyn sycl_backend::PhysicalMem>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

static NEXT_EXPORT: AtomicU64 = AtomicU64::new(1);

/// Called when the owner frees a USM allocation: its handles may no longer be opened
/// in-process (the driver gives a new allocation at the same address a different handle).
/// Returns `true` when the allocation is still open through IPC in this process: the caller
/// must not free it then; the last close does, in `ctx`.
pub(crate) fn forget_allocation(raw_base: u64, ctx: &Arc<PrimaryContext>) -> bool {
    let mut st = lock(mem_state());
    st.exported.retain(|_, (base, _, _)| *base != raw_base);
    let open_here = st
        .opened
        .values()
        .any(|e| e.ctx.is_none() && e.base == raw_base && e.refs > 0);
    if open_here {
        st.deferred_free.insert(raw_base, ctx.clone());
    }
    open_here
}

/// Called when an exported event is destroyed.
pub(crate) fn forget_event(handle: &Handle) {
    let mut reg = lock(event_registry());
    if reg.get(handle).is_some_and(|w| w.strong_count() == 0) {
        reg.remove(handle);
    }
}

#[derive(Debug)]
struct MemPayload {
    handle: Handle,
    offset: u64,
    size: u64,
    _uuid: [u8; 16],
}

fn parse_mem(payload: &[u8]) -> Result<MemPayload> {
    let mut r = PayloadReader::new(payload, "CUDA IPC memory");
    let handle: Handle = r
        .take(64)?
        .try_into()
        .map_err(|_| Error::invalid("bad handle"))?;
    let offset = r.u64()?;
    let size = r.u64()?;
    let uuid: [u8; 16] = r
        .take(16)?
        .try_into()
        .map_err(|_| Error::invalid("bad uuid"))?;
    r.finish()?;
    if offset >= size.max(1) {
        return Err(Error::invalid(format!(
            "IPC memory offset {offset} lies outside its {size}-byte allocation"
        )));
    }
    Ok(MemPayload {
        handle,
        offset,
        size,
        _uuid: uuid,
    })
}

/// The CUDA IPC handle of the device allocation holding `ptr`, where `ptr` starts in it,
/// its size and its device's identity; recorded as this process's own export.
fn export_mem(ctx: &Context, ptr: u64) -> Result<(RawIpcMem, [u8; 16])> {
    let info = ctx.pointer_info(ptr);
    let index = match (info.kind, info.device_index) {
        (UsmKind::Device, Some(i)) => i,
        (UsmKind::Unknown, _) => {
            return Err(Error::invalid(format!(
                "{ptr:#x} is not a USM allocation of this context"
            )));
        }
        (kind, _) => {
            return Err(Error::invalid(format!(
                "only device USM can be shared between processes, not {kind} USM"
            )));
        }
    };
    let dev = &ctx.cuda_devices[index];
    if !dev.info_has(Aspect::ExtOneapiIpcMemory) {
        return Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::get",
        ));
    }
    let (_, _current) = ctx.with_ctx(index)?;
    let (base, size) = result::mem::address_range(ptr)?;
    let handle = result::ipc::get_mem_handle(base)?;
    lock(mem_state())
        .exported
        .insert(handle, (base, size, dev.ordinal));
    let raw = RawIpcMem {
        handle: handle.to_vec(),
        offset: ptr - base,
        allocation_size: size as u64,
    };
    Ok((raw, dev.identity()))
}

pub(crate) fn get_mem(ctx: &Context, ptr: u64) -> Result<IpcExport> {
    let (raw, identity) = export_mem(ctx, ptr)?;
    let mut payload = Vec::with_capacity(96);
    payload.extend_from_slice(&raw.handle);
    payload.extend_from_slice(&raw.offset.to_le_bytes());
    payload.extend_from_slice(&raw.allocation_size.to_le_bytes());
    payload.extend_from_slice(&identity);
    Ok(IpcExport {
        payload,
        fds: Vec::new(),
    })
}

/// The raw `cudaIpcMemHandle_t` of the allocation holding `ptr` (`Context::ipc_get_raw_mem`).
pub(crate) fn get_raw_mem(ctx: &Context, ptr: u64) -> Result<RawIpcMem> {
    export_mem(ctx, ptr).map(|(raw, _)| raw)
}

pub(crate) fn put_mem(payload: &[u8]) -> Result<()> {
    // Nothing to release: a legacy CUDA IPC handle holds no resource in the exporter.
    parse_mem(payload).map(|_| ())
}

/// Opens `handle` (through the cache) for device `index` of `ctx`; returns `base + offset` and
/// the bytes the driver says the allocation has from there. `size`: the allocation size the
/// payload claims, refused when the driver mapped less.
fn open_cached(
    ctx: &Context,
    index: usize,
    handle: &Handle,
    offset: u64,
    size: Option<u64>,
    same_process: bool,
) -> Result<OpenedMemory> {
    let pctx = ctx.primary(index)?;
    let mut st = lock(mem_state());
    let own = st.exported.get(handle).copied();
    let (key, base, mapped) = if let Some((base, alloc_size, owner)) = own {
        // Our own allocation (the driver refuses to open it here). Another device of this
        // process reaches it through peer access to the allocation's device.
        if size.is_some_and(|s| s != alloc_size as u64) {
            return Err(Error::invalid(
                "the IPC memory handle does not match its allocation's size",
            ));
        }
        if let Some(o) = ctx.cuda_devices.iter().position(|d| d.ordinal == owner) {
            pctx.enable_peer_access_to(&ctx.primaries[o])
                .map_err(|e| unreachable_memory(e, pctx.ordinal, owner))?;
        }
        let key = (*handle, owner);
        let e = st.opened.entry(key).or_insert(OpenEntry {
            base,
            size: alloc_size,
            refs: 0,
            ctx: None,
        });
        e.refs += 1;
        (key, e.base, e.size)
    } else if same_process {
        return Err(Error::invalid(
            "the IPC memory handle names an allocation of this process that was freed (or never exported)",
        ));
    } else {
        let key = (*handle, pctx.ordinal);
        match st.opened.entry(key) {
            Entry::Occupied(mut e) => {
                let e = e.get_mut();
                e.refs += 1;
                (key, e.base, e.size)
            }
            Entry::Vacant(slot) => {
                // A mapping of this context: kernels of this device can use it (on another
                // GPU than the exporter's, with peer access enabled lazily by the driver).
                let _current = pctx.make_current()?;
                let base = result::ipc::open_mem_handle(handle)?;
                // What the driver mapped, not what the payload claims, bounds every access
                // (the one driver call beyond a raw open).
                let mapped = match mapped_size(base) {
                    Ok(n) => n,
                    Err(e) => {
                        // SAFETY: just mapped, not handed out.
                        if let Err(close) = unsafe { result::ipc::close_mem_handle(base) } {
                            log::warn!("closing an IPC mapping after a failed check: {close}");
                        }
                        return Err(e);
                    }
                };
                slot.insert(OpenEntry {
                    base,
                    size: mapped,
                    refs: 1,
                    ctx: Some(pctx.clone()),
                });
                (key, base, mapped)
            }
        }
    };
    let claimed_ok = size.map_or(true, |s| s <= mapped as u64);
    if !claimed_ok || offset >= mapped as u64 {
        // SAFETY: the reference taken above is unused.
        unsafe { release_entry(&mut st, &key)? };
        return Err(Error::invalid(format!(
            "the IPC memory handle claims an allocation of {} bytes at offset {offset}; the \
             driver mapped {mapped} bytes",
            size.map_or("unknown".into(), |s| s.to_string())
        )));
    }
    let ptr = base + offset;
    let slot = st.by_ptr.entry(ptr).or_insert((key, 0));
    if slot.0 != key {
        // SAFETY: the reference taken above is unused.
        unsafe { release_entry(&mut st, &key)? };
        return Err(Error::new(
            sycl_backend::Errc::Runtime,
            format!("the driver mapped two open IPC handles at {ptr:#x}"),
        ));
    }
    slot.1 += 1;
    Ok(OpenedMemory {
        ptr,
        size: mapped - offset as usize,
    })
}

/// The size of the mapping the driver made at `base` (`cuMemGetAddressRange`).
fn mapped_size(base: u64) -> Result<usize> {
    let (b, n) = result::mem::address_range(base)?;
    if b == base {
        Ok(n)
    } else {
        Err(Error::new(
            sycl_backend::Errc::Runtime,
            format!("the driver mapped an IPC handle at {base:#x} inside {b:#x}"),
        ))
    }
}

/// Drops one reference to an open-cache entry; the last one unmaps it.
///
/// # Safety
/// No pending command uses the mapping when the last reference goes.
unsafe fn release_entry(st: &mut MemState, key: &OpenKey) -> Result<()> {
    let Some(entry) = st.opened.get_mut(key) else {
        return Err(Error::invalid("IPC open table is inconsistent"));
    };
    entry.refs -= 1;
    if entry.refs > 0 {
        return Ok(());
    }
    let entry = st.opened.remove(key).expect("present above");
    match entry.ctx {
        Some(pctx) => {
            let _current = pctx.make_current()?;
            // SAFETY: the last owner closed; the caller guarantees no pending use.
            unsafe { result::ipc::close_mem_handle(entry.base)? };
        }
        None => {
            if let Some(pctx) = st.deferred_free.remove(&entry.base) {
                // Our own allocation, freed by its owner while open here: the last close frees.
                let _current = pctx.make_current()?;
                // SAFETY: the owner freed it (and waited for its commands); this was the last
                // open of it in this process, and the caller guarantees no pending use.
                unsafe { result::mem::free(entry.base)? };
            }
        }
    }
    Ok(())
}

fn unreachable_memory(e: Error, device: i32, owner: i32) -> Error {
    Error::new(
        e.code(),
        format!("CUDA device {device} cannot reach memory of device {owner}: {e}"),
    )
}

pub(crate) fn open_mem(
    ctx: &Context,
    device: &Arc<dyn sycl_backend::Device>,
    import: IpcImport<'_>,
) -> Result<OpenedMemory> {
    let p = parse_mem(import.payload)?;
    let index = ctx.device_index(device)?;
    if !ctx.cuda_devices[index].info_has(Aspect::ExtOneapiIpcMemory) {
        return Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "ipc::memory::open",
        ));
    }
    open_cached(
        ctx,
        index,
        &p.handle,
        p.offset,
        Some(p.size),
        import.same_process,
    )
}

/// # Safety
/// No pending command uses the memory.
pub(crate) unsafe fn close_mem(ptr: u64) -> Result<()> {
    let mut st = lock(mem_state());
    let Some((handle, count)) = st.by_ptr.get_mut(&ptr) else {
        return Err(Error::invalid(format!(
            "{ptr:#x} was not returned by ipc::memory::open (or is already closed)"
        )));
    };
    let key = *handle;
    *count -= 1;
    if *count == 0 {
        st.by_ptr.remove(&ptr);
    }
    // SAFETY: the caller guarantees no pending use.
    unsafe { release_entry(&mut st, &key) }
}

/// Opens a raw 64-byte `CUipcMemHandle` produced by any CUDA program (offset 0) through the
/// same open cache as `ipc::memory::open` (`Context::ipc_open_raw_mem`); close the result
/// with `Context::ipc_close_mem`. A handle this process exported through sycl-rs resolves to
/// its own allocation. The size is the allocation's, as the driver reports it.
pub(crate) fn open_raw_mem(
    ctx: &Context,
    device: &Arc<dyn sycl_backend::Device>,
    raw: &[u8; 64],
) -> Result<OpenedMemory> {
    let index = ctx.device_index(device)?;
    if !ctx.cuda_devices[index].info_has(Aspect::ExtOneapiIpcMemory) {
        return Err(Error::unsupported(
            Aspect::ExtOneapiIpcMemory,
            "opening a CUDA IPC memory handle",
        ));
    }
    open_cached(ctx, index, raw, 0, None, false)
}

pub(crate) fn get_physical_mem(
    ctx: &Context,
    mem: &Arc<dyn sycl_backend::PhysicalMem>,
) -> Result<IpcExport> {
    let m =
        sycl_backend::downcast::<PhysicalMem>(mem.as_any(), "physical memory", BackendKind::Cuda)?;
    if !sycl_backend::PhysicalMem::ipc_enabled(m) {
        return Err(Error::invalid(
            "the physical memory was not created with enable_ipc",
        ));
    }
    let identity = ctx
        .cuda_devices
        .iter()
        .find(|d| d.ordinal == m.ordinal)
        .map(|d| d.identity())
        .unwrap_or_default();
    let _current = m.ctx.make_current()?;
    let fd = result::vmm::export_fd(m.handle)?;
    let serial = NEXT_EXPORT.fetch_add(1, Ordering::Relaxed);
    let raw = fd.as_raw_fd();
    lock(&m.exports).insert(serial, fd);
    lock(phys_registry()).insert(serial, Arc::downgrade(mem));
    let mut payload = Vec::with_capacity(32);
    payload.extend_from_slice(&(sycl_backend::PhysicalMem::size(m) as u64).to_le_bytes());
    payload.extend_from_slice(&identity);
    payload.extend_from_slice(&serial.to_le_bytes());
    Ok(IpcExport {
        payload,
        fds: vec![raw],
    })
}

fn parse_phys(payload: &[u8]) -> Result<(u64, [u8; 16], u64)> {
    let mut r = PayloadReader::new(payload, "CUDA IPC physical memory");
    let size = r.u64()?;
    let uuid: [u8; 16] = r
        .take(16)?
        .try_into()
        .map_err(|_| Error::invalid("bad uuid"))?;
    let serial = r.u64()?;
    r.finish()?;
    if size == 0 {
        return Err(Error::invalid("IPC physical memory of 0 bytes"));
    }
    Ok((size, uuid, serial))
}

pub(crate) fn put_physical_mem(payload: &[u8]) -> Result<()> {
    let (_, _, serial) = parse_phys(payload)?;
    let weak = lock(phys_registry()).remove(&serial).ok_or_else(|| {
        Error::invalid("not a physical-memory export of this process, or already put")
    })?;
    if let Some(mem) = weak.upgrade() {
        if let Some(m) = mem.as_any().downcast_ref::<PhysicalMem>() {
            lock(&m.exports).remove(&serial);
        }
    }
    Ok(())
}

pub(crate) fn open_physical_mem(
    ctx: &Context,
    device: &Arc<dyn sycl_backend::Device>,
    import: IpcImport<'_>,
) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
    let (size, _uuid, _) = parse_phys(import.payload)?;
    let index = ctx.device_index(device)?;
    let dev = &ctx.cuda_devices[index];
    if !dev.info_has(Aspect::ExtOneapiIpcPhysicalMemory) {
        return Err(Error::unsupported(
            Aspect::ExtOneapiIpcPhysicalMemory,
            "ipc::physical_memory::open",
        ));
    }
    let [fd] = <[_; 1]>::try_from(import.fds).map_err(|v: Vec<_>| {
        Error::invalid(format!(
            "physical memory handle carries {} descriptors, not 1",
            v.len()
        ))
    })?;
    let (pctx, _current) = ctx.with_ctx(index)?;
    let pctx = pctx.clone();
    let handle = result::vmm::import_fd(fd.as_fd())?;
    drop(fd);
    let size =
        usize::try_from(size).map_err(|_| Error::invalid("physical memory size too large"))?;
    Ok(Arc::new(PhysicalMem::new(
        pctx,
        handle,
        size,
        device.clone(),
        dev.ordinal,
        true,
    )))
}

fn parse_event(payload: &[u8]) -> Result<(Handle, [u8; 16])> {
    let mut r = PayloadReader::new(payload, "CUDA IPC event");
    let handle: Handle = r
        .take(64)?
        .try_into()
        .map_err(|_| Error::invalid("bad handle"))?;
    let uuid: [u8; 16] = r
        .take(16)?
        .try_into()
        .map_err(|_| Error::invalid("bad uuid"))?;
    r.finish()?;
    Ok((handle, uuid))
}

pub(crate) fn get_event(ctx: &Context, event: &Arc<dyn sycl_backend::Event>) -> Result<IpcExport> {
    let Some(e) = crate::queue::cuda_event(event)? else {
        return Err(Error::invalid(
            "a host task's event cannot be shared: it was not created with enable_ipc",
        ));
    };
    if !e.inner.ipc {
        return Err(Error::invalid("the event was not created with enable_ipc"));
    }
    let ordinal = e.inner.ev.ctx.ordinal;
    let identity = ctx
        .cuda_devices
        .iter()
        .find(|d| d.ordinal == ordinal)
        .map(|d| d.identity())
        .unwrap_or_default();
    let _current = e.inner.ev.ctx.make_current()?;
    let handle = result::ipc::get_event_handle(e.raw())?;
    lock(event_registry()).insert(handle, Arc::downgrade(&e.inner));
    *lock(&e.inner.exported_as) = Some(handle);
    let mut payload = Vec::with_capacity(80);
    payload.extend_from_slice(&handle);
    payload.extend_from_slice(&identity);
    Ok(IpcExport {
        payload,
        fds: Vec::new(),
    })
}

pub(crate) fn put_event(payload: &[u8]) -> Result<()> {
    // Nothing to release: an event handle holds no resource in the exporter.
    parse_event(payload).map(|_| ())
}

pub(crate) fn open_event(
    ctx: &Context,
    import: IpcImport<'_>,
) -> Result<Arc<dyn sycl_backend::Event>> {
    let (handle, uuid) = parse_event(import.payload)?;
    if import.same_process {
        let inner = lock(event_registry())
            .get(&handle)
            .and_then(Weak::upgrade)
            .ok_or_else(|| Error::invalid("the exported event no longer exists in this process"))?;
        return Ok(Arc::new(Event { inner }));
    }
    let index = ctx.device_by_identity(&uuid).unwrap_or(0);
    if !ctx.cuda_devices[index].caps.ipc_event {
        return Err(Error::unsupported(
            Aspect::ExtOneapiIpcEvent,
            "ipc::event::open",
        ));
    }
    let (pctx, _current) = ctx.with_ctx(index)?;
    let pctx = pctx.clone();
    let raw = result::ipc::open_event_handle(&handle)?;
    Ok(Arc::new(Event::imported(
        OwnedEvent {
            ctx: pctx,
            raw,
            pooled: false,
        },
        import.exporter,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_garbage() {
        let mut p = vec![7u8; 64];
        p.extend_from_slice(&16u64.to_le_bytes());
        p.extend_from_slice(&4096u64.to_le_bytes());
        p.extend_from_slice(&[9u8; 16]);
        let m = parse_mem(&p).unwrap();
        assert_eq!((m.offset, m.size, m.handle[0]), (16, 4096, 7));
        assert!(parse_mem(&p[..90]).is_err());
        let mut bad = p.clone();
        bad[64..72].copy_from_slice(&5000u64.to_le_bytes());
        assert_eq!(
            parse_mem(&bad).unwrap_err().code(),
            sycl_backend::Errc::Invalid
        );
        let mut extra = p.clone();
        extra.push(0);
        assert!(parse_mem(&extra).is_err());
        assert!(put_mem(&p).is_ok());

        let mut e = vec![1u8; 64];
        e.extend_from_slice(&[2u8; 16]);
        assert_eq!(parse_event(&e).unwrap().1, [2u8; 16]);
        assert!(parse_event(&e[..79]).is_err());

        let mut ph = 1u64.to_le_bytes().to_vec();
        ph.extend_from_slice(&[3u8; 16]);
        ph.extend_from_slice(&99u64.to_le_bytes());
        assert_eq!(parse_phys(&ph).unwrap().2, 99);
        assert!(put_physical_mem(&ph).is_err(), "unknown serial");
    }
}
