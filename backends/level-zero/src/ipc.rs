//! Inter-process communication.
//!
//! | kind | export | payload | fds | import | release |
//! |---|---|---|---|---|---|
//! | USM device memory | `zeMemGetAddressRange` → `zeMemGetIpcHandle(base)` | [`MemPayload`]: magic, 64-byte handle, offset, allocation size, device UUID (100 B) | the DMA-BUF fd: `zeMemGetFileDescriptorFromIpcHandleExp` when present, else bytes 0..3 of the handle | the local fd written into bytes 0..3 of a copy of the handle ([`patch_fd`]), `zeMemOpenIpcHandle(flags 0)`, local fd closed; result = base + offset | close: `zeMemCloseIpcHandle(base)`; put: `zeMemPutIpcHandle` when present, else nothing (freeing the allocation releases the handle, as UMF did before spec 1.6) |
//! | physical memory | `zePhysicalMemGetProperties` with `ze_external_memory_export_fd_t` chained (needs an object made with `enable_ipc`) | [`PhysPayload`]: magic, size, device UUID, exporter's fd number (32 B) | that fd, kept open by this context until put | `ze_external_memory_import_fd_t` chained into `zePhysicalMemCreate`, local fd closed | put closes the exported fd; the imported object is released when dropped (`zePhysicalMemDestroy`) |
//! | event | counter-based: `zeEventCounterBasedGetIpcHandle` (or `zexCounterBasedEventGetIpcHandle`); fallback: `zeEventPoolGetIpcHandle` of the event's dedicated pool | [`EventPayload`]: magic, route, 64-byte handle, event index (76 B) | none: the driver moves what it needs itself | `zeEventCounterBasedOpenIpcHandle` / `zex…Open…` / `zeEventPoolOpenIpcHandle` + `zeEventCreate(index)` | dropping the imported event closes it; put: `zeEventPoolPutIpcHandle` for the pool route when present, else nothing |
//!
//! Payloads are little-endian and start with a 4-byte magic; decoding checks the magic, every
//! length and every field range and rejects anything else with `Errc::Invalid`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use level_zero_sys::*;
use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory, PayloadReader};
use sycl_backend::{BackendKind, Errc, Error, Result};

use crate::context::{lock, ContextInner};
use crate::device::Device;
use crate::event::{translate, Event, Origin};
use crate::result::{check, map_result, missing};
use crate::virtual_mem::PhysicalMem;

const MAGIC_MEM: [u8; 4] = *b"ZEM1";
const MAGIC_PHYS: [u8; 4] = *b"ZEP1";
const MAGIC_EVENT: [u8; 4] = *b"ZEE1";

/// Converts 64 opaque bytes to a C `char` array.
pub fn to_c(bytes: &[u8; 64]) -> [std::ffi::c_char; 64] {
    bytes.map(|b| b as std::ffi::c_char)
}

/// Converts a C `char` array to 64 bytes.
pub fn from_c(chars: &[std::ffi::c_char; 64]) -> [u8; 64] {
    chars.map(|c| c as u8)
}

/// The fd the Intel driver keeps in bytes 0..3 of a Linux `ze_ipc_mem_handle_t` (native
/// endianness, as the C `int` it is).
pub fn fd_in_handle(handle: &[u8; 64]) -> i32 {
    i32::from_ne_bytes([handle[0], handle[1], handle[2], handle[3]])
}

/// A copy of `handle` with `fd` in bytes 0..3 (what UMF does on import); bytes 4..63 unchanged.
pub fn patch_fd(handle: &[u8; 64], fd: i32) -> [u8; 64] {
    let mut out = *handle;
    out[..4].copy_from_slice(&fd.to_ne_bytes());
    out
}

fn magic(r: &mut PayloadReader<'_>, want: [u8; 4], what: &str) -> Result<()> {
    if r.take(4)? != want {
        return Err(Error::invalid(format!(
            "payload is not a Level Zero {what} handle"
        )));
    }
    Ok(())
}

fn bytes64(r: &mut PayloadReader<'_>) -> Result<[u8; 64]> {
    Ok(r.take(64)?.try_into().expect("64 bytes"))
}

fn bytes16(r: &mut PayloadReader<'_>) -> Result<[u8; 16]> {
    Ok(r.take(16)?.try_into().expect("16 bytes"))
}

/// The payload of exported USM device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemPayload {
    /// `ze_ipc_mem_handle_t` of the allocation's base, as the exporter got it.
    pub handle: [u8; 64],
    /// The exported pointer minus the allocation base.
    pub offset: u64,
    /// Size of the whole allocation.
    pub size: u64,
    /// UUID of the allocation's device.
    pub device_uuid: [u8; 16],
}

impl MemPayload {
    /// Encoded size.
    pub const LEN: usize = 4 + 64 + 8 + 8 + 16;

    /// Encodes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.extend_from_slice(&MAGIC_MEM);
        v.extend_from_slice(&self.handle);
        v.extend_from_slice(&self.offset.to_le_bytes());
        v.extend_from_slice(&self.size.to_le_bytes());
        v.extend_from_slice(&self.device_uuid);
        v
    }

    /// Decodes, rejecting wrong magic, wrong length, a zero size or an offset outside it.
    pub fn decode(bytes: &[u8]) -> Result<MemPayload> {
        let mut r = PayloadReader::new(bytes, "level_zero memory");
        magic(&mut r, MAGIC_MEM, "memory")?;
        let p = MemPayload {
            handle: bytes64(&mut r)?,
            offset: r.u64()?,
            size: r.u64()?,
            device_uuid: bytes16(&mut r)?,
        };
        r.finish()?;
        if p.size == 0 || p.offset >= p.size {
            return Err(Error::invalid(format!(
                "memory handle has offset {} in an allocation of {} bytes",
                p.offset, p.size
            )));
        }
        Ok(p)
    }
}

/// The payload of an exported physical memory object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysPayload {
    /// Size in bytes.
    pub size: u64,
    /// UUID of its device.
    pub device_uuid: [u8; 16],
    /// The exporter's descriptor number (names the export for `put`).
    pub fd: i32,
}

impl PhysPayload {
    /// Encoded size.
    pub const LEN: usize = 4 + 8 + 16 + 4;

    /// Encodes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.extend_from_slice(&MAGIC_PHYS);
        v.extend_from_slice(&self.size.to_le_bytes());
        v.extend_from_slice(&self.device_uuid);
        v.extend_from_slice(&self.fd.to_le_bytes());
        v
    }

    /// Decodes, rejecting wrong magic, wrong length, a zero size or a negative fd.
    pub fn decode(bytes: &[u8]) -> Result<PhysPayload> {
        let mut r = PayloadReader::new(bytes, "level_zero physical memory");
        magic(&mut r, MAGIC_PHYS, "physical memory")?;
        let p = PhysPayload {
            size: r.u64()?,
            device_uuid: bytes16(&mut r)?,
            fd: r.u32()? as i32,
        };
        r.finish()?;
        if p.size == 0 || p.fd < 0 {
            return Err(Error::invalid(format!(
                "physical memory handle with size {} and fd {}",
                p.size, p.fd
            )));
        }
        if usize::try_from(p.size).is_err() {
            return Err(Error::invalid(
                "physical memory size does not fit this process",
            ));
        }
        Ok(p)
    }
}

/// How an event was exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventRoute {
    /// `zeEventCounterBasedGetIpcHandle`.
    CounterBased = 1,
    /// `zexCounterBasedEventGetIpcHandle`.
    Zex = 2,
    /// `zeEventPoolGetIpcHandle` + event index.
    EventPool = 3,
}

/// The payload of an exported event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventPayload {
    /// The route (which open call to use).
    pub route: EventRoute,
    /// The 64-byte IPC handle (event or pool).
    pub handle: [u8; 64],
    /// Event index in the pool (pool route; 0 otherwise).
    pub index: u32,
}

impl EventPayload {
    /// Encoded size.
    pub const LEN: usize = 4 + 4 + 64 + 4;

    /// Encodes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::LEN);
        v.extend_from_slice(&MAGIC_EVENT);
        v.extend_from_slice(&(self.route as u32).to_le_bytes());
        v.extend_from_slice(&self.handle);
        v.extend_from_slice(&self.index.to_le_bytes());
        v
    }

    /// Decodes, rejecting wrong magic, wrong length or an unknown route.
    pub fn decode(bytes: &[u8]) -> Result<EventPayload> {
        let mut r = PayloadReader::new(bytes, "level_zero event");
        magic(&mut r, MAGIC_EVENT, "event")?;
        let route = match r.u32()? {
            1 => EventRoute::CounterBased,
            2 => EventRoute::Zex,
            3 => EventRoute::EventPool,
            other => {
                return Err(Error::invalid(format!(
                    "event handle names unknown route {other}"
                )))
            }
        };
        let p = EventPayload {
            route,
            handle: bytes64(&mut r)?,
            index: r.u32()?,
        };
        r.finish()?;
        if route != EventRoute::EventPool && p.index != 0 {
            return Err(Error::invalid(
                "counter-based event handle with a pool index",
            ));
        }
        Ok(p)
    }
}

fn one_fd(import: &IpcImport<'_>, what: &str) -> Result<i32> {
    match import.fds.as_slice() {
        [fd] => Ok(fd.as_raw_fd()),
        other => Err(Error::invalid(format!(
            "a Level Zero {what} handle carries 1 descriptor, got {}",
            other.len()
        ))),
    }
}

pub(crate) fn get_mem(ctx: &ContextInner, ptr: u64) -> Result<IpcExport> {
    let l = &ctx.loader;
    let info = crate::usm::pointer_info(ctx, ptr);
    if info.kind != sycl_backend::UsmKind::Device {
        return Err(Error::invalid(format!(
            "{ptr:#x} is not USM device memory of this context"
        )));
    }
    let uuid = info
        .device_index
        .and_then(|i| ctx.devices.get(i))
        .and_then(|d| d.as_any().downcast_ref::<Device>())
        .map(|d| d.identity())
        .unwrap_or([0; 16]);
    let mut h = ze_ipc_mem_handle_t { data: [0; 64] };
    // SAFETY: `info.base` is the base of a live device allocation of this context.
    let ze_r = unsafe { (l.zeMemGetIpcHandle)(ctx.handle, info.base as *const _, &mut h) };
    check(ze_r, "zeMemGetIpcHandle")?;
    let handle = from_c(&h.data);
    let fd = match l.zeMemGetFileDescriptorFromIpcHandleExp {
        Some(f) => {
            let mut fd = 0u64;
            // SAFETY: a handle just returned by zeMemGetIpcHandle, passed by value.
            let ze_r = unsafe { f(ctx.handle, h, &mut fd) };
            check(ze_r, "zeMemGetFileDescriptorFromIpcHandleExp")?;
            i32::try_from(fd).map_err(|_| {
                Error::new(Errc::Runtime, format!("driver returned descriptor {fd}"))
            })?
        }
        None => fd_in_handle(&handle),
    };
    if fd < 0 {
        return Err(Error::new(
            Errc::Runtime,
            format!("the IPC handle holds no descriptor ({fd})"),
        ));
    }
    let payload = MemPayload {
        handle,
        offset: ptr - info.base,
        size: info.size as u64,
        device_uuid: uuid,
    };
    Ok(IpcExport {
        payload: payload.encode(),
        fds: vec![fd],
    })
}

pub(crate) fn put_mem(ctx: &ContextInner, payload: &[u8]) -> Result<()> {
    let p = MemPayload::decode(payload)?;
    match ctx.loader.zeMemPutIpcHandle {
        Some(put) => check(
            // SAFETY: the handle came from zeMemGetIpcHandle in this process (sycl only lets the
            // exporting process put).
            unsafe {
                put(
                    ctx.handle,
                    ze_ipc_mem_handle_t {
                        data: to_c(&p.handle),
                    },
                )
            },
            "zeMemPutIpcHandle",
        ),
        // Spec 1.4 loaders have no put: the handle is released when the memory is freed.
        None => Ok(()),
    }
}

pub(crate) fn open_mem(
    ctx: &ContextInner,
    device: &Arc<dyn sycl_backend::Device>,
    import: IpcImport<'_>,
) -> Result<OpenedMemory> {
    let p = MemPayload::decode(import.payload)?;
    let dev = ctx.our_device(device)?;
    let local_fd = one_fd(&import, "memory")?;
    let h = ze_ipc_mem_handle_t {
        data: to_c(&patch_fd(&p.handle, local_fd)),
    };
    let mut base = std::ptr::null_mut();
    // SAFETY: a handle whose descriptor is valid in this process (owned by `import` until it
    // drops below); out-pointer valid.
    let r = unsafe { (ctx.loader.zeMemOpenIpcHandle)(ctx.handle, dev.handle, h, 0, &mut base) };
    drop(import); // closes the local descriptor; the driver holds its own reference
    check(r, "zeMemOpenIpcHandle")?;
    // What the driver mapped bounds every access, not what the payload claims.
    let (mut range_base, mut mapped) = (std::ptr::null_mut(), 0usize);
    // SAFETY: `base` was just returned by zeMemOpenIpcHandle on this context; out-pointers valid.
    let r = unsafe {
        (ctx.loader.zeMemGetAddressRange)(ctx.handle, base, &mut range_base, &mut mapped)
    };
    let fits = r == ZE_RESULT_SUCCESS
        && range_base == base
        && p.size <= mapped as u64
        && p.offset < mapped as u64;
    if !fits {
        // SAFETY: just opened on this context, not handed out.
        let close = unsafe { (ctx.loader.zeMemCloseIpcHandle)(ctx.handle, base) };
        if close != ZE_RESULT_SUCCESS {
            log::warn!("zeMemCloseIpcHandle after a failed size check: {close:#x}");
        }
        check(r, "zeMemGetAddressRange (of an opened IPC handle)")?;
        return Err(Error::invalid(format!(
            "the IPC memory handle claims an allocation of {} bytes (offset {}); the driver \
             mapped {mapped}",
            p.size, p.offset
        )));
    }
    let ptr = base as u64 + p.offset;
    lock(&ctx.opened_mem).insert(ptr, base as u64);
    Ok(OpenedMemory {
        ptr,
        size: mapped - p.offset as usize,
    })
}

pub(crate) fn close_mem(ctx: &ContextInner, ptr: u64) -> Result<()> {
    let base = lock(&ctx.opened_mem).remove(&ptr).ok_or_else(|| {
        Error::invalid(format!(
            "{ptr:#x} was not returned by ipc::memory::open on this context"
        ))
    })?;
    // SAFETY: `base` came from zeMemOpenIpcHandle on this context and is closed once.
    let ze_r = unsafe { (ctx.loader.zeMemCloseIpcHandle)(ctx.handle, base as *const _) };
    check(ze_r, "zeMemCloseIpcHandle")
}

pub(crate) fn get_physical_mem(
    ctx: &ContextInner,
    mem: &Arc<dyn sycl_backend::PhysicalMem>,
) -> Result<IpcExport> {
    let pm = sycl_backend::downcast::<PhysicalMem>(
        mem.as_any(),
        "physical memory",
        BackendKind::LevelZero,
    )?;
    if pm.imported {
        return Err(Error::invalid(
            "an imported physical memory object cannot be exported again",
        ));
    }
    if !pm.ipc_enabled {
        return Err(Error::invalid(
            "the physical memory object was not made with enable_ipc",
        ));
    }
    let get_props = ctx
        .loader
        .zePhysicalMemGetProperties
        .ok_or_else(|| missing("zePhysicalMemGetProperties", "ipc::physical_memory::get"))?;
    let mut export_fd = ze_external_memory_export_fd_t {
        stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD,
        pNext: std::ptr::null(),
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD,
        fd: -1,
    };
    let mut props = ze_physical_mem_properties_t {
        stype: ZE_STRUCTURE_TYPE_PHYSICAL_MEM_PROPERTIES,
        pNext: (&mut export_fd as *mut ze_external_memory_export_fd_t).cast(),
        id: 0,
        size: 0,
    };
    // SAFETY: the object's creating context (required by the driver), tagged structs that live
    // for the call.
    let r = unsafe { get_props(pm.ctx.handle, pm.handle, &mut props) };
    let fd = (export_fd.fd >= 0).then(|| {
        // SAFETY: the driver created this descriptor for us; we own it from here on.
        unsafe { OwnedFd::from_raw_fd(export_fd.fd) }
    });
    check(r, "zePhysicalMemGetProperties")?; // on failure `fd` (if any) is closed here
    let fd = fd.ok_or_else(|| {
        Error::new(
            Errc::FeatureNotSupported,
            "the driver exported no descriptor for the physical memory",
        )
    })?;
    let raw = fd.as_raw_fd();
    let uuid = pm
        .device
        .as_any()
        .downcast_ref::<Device>()
        .map(|d| d.identity())
        .unwrap_or([0; 16]);
    lock(&ctx.exported_phys).insert(raw, fd);
    let payload = PhysPayload {
        size: pm.size as u64,
        device_uuid: uuid,
        fd: raw,
    };
    Ok(IpcExport {
        payload: payload.encode(),
        fds: vec![raw],
    })
}

pub(crate) fn put_physical_mem(ctx: &ContextInner, payload: &[u8]) -> Result<()> {
    let p = PhysPayload::decode(payload)?;
    match lock(&ctx.exported_phys).remove(&p.fd) {
        Some(fd) => {
            drop(fd);
            Ok(())
        }
        None => Err(Error::invalid(
            "the handle was not exported by this context, or was already put",
        )),
    }
}

pub(crate) fn open_physical_mem(
    ctx: &Arc<ContextInner>,
    device: &Arc<dyn sycl_backend::Device>,
    import: IpcImport<'_>,
) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
    let p = PhysPayload::decode(import.payload)?;
    let dev = ctx.our_device(device)?;
    let local_fd = one_fd(&import, "physical memory")?;
    // A DMA-BUF (and the mock's memfd) reports its size: a payload that claims more than the
    // file holds is refused before the driver sees it. A descriptor that reports no size is
    // left to the driver's own check.
    if let Some(fd) = import.fds.first() {
        let held = rustix::fs::fstat(fd).map(|st| st.st_size).unwrap_or(0);
        if held > 0 && (held as u64) < p.size {
            return Err(Error::invalid(format!(
                "the physical memory handle claims {} bytes; its descriptor holds {held}",
                p.size
            )));
        }
    }
    let import_fd = ze_external_memory_import_fd_t {
        stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD,
        pNext: std::ptr::null(),
        flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD,
        fd: local_fd,
    };
    let mut desc = ze_physical_mem_desc_t {
        stype: ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC,
        pNext: (&import_fd as *const ze_external_memory_import_fd_t).cast(),
        flags: 0,
        size: p.size as usize,
    };
    let mut handle = std::ptr::null_mut();
    // SAFETY: valid context and device; the descriptor is open in this process for the call.
    let r =
        unsafe { (ctx.loader.zePhysicalMemCreate)(ctx.handle, dev.handle, &mut desc, &mut handle) };
    drop(import); // the driver keeps its own reference to the imported memory
    check(r, "zePhysicalMemCreate (import)")?;
    Ok(Arc::new(PhysicalMem {
        ctx: ctx.clone(),
        handle,
        device: device.clone(),
        size: p.size as usize,
        ipc_enabled: true,
        imported: true,
    }))
}

pub(crate) fn get_event(
    ctx: &ContextInner,
    event: &Arc<dyn sycl_backend::Event>,
) -> Result<IpcExport> {
    let ev = sycl_backend::downcast::<Event>(event.as_any(), "event", BackendKind::LevelZero)?;
    let l = &ctx.loader;
    let (route, handle, index) = match ev.origin {
        Origin::CounterBased => {
            let f = l
                .zeEventCounterBasedGetIpcHandle
                .ok_or_else(|| missing("zeEventCounterBasedGetIpcHandle", "ipc::event::get"))?;
            let mut h = ze_ipc_event_counter_based_handle_t { data: [0; 64] };
            // SAFETY: a live counter-based IPC event; out-pointer valid.
            let ze_r = unsafe { f(ev.handle, &mut h) };
            check(ze_r, "zeEventCounterBasedGetIpcHandle")?;
            (EventRoute::CounterBased, from_c(&h.data), 0)
        }
        Origin::Zex => {
            let z = ctx
                .ext
                .zex
                .ok_or_else(|| missing("zexCounterBasedEventGetIpcHandle", "ipc::event::get"))?;
            let mut h = ze_ipc_event_counter_based_handle_t { data: [0; 64] };
            // SAFETY: a live zex counter-based IPC event; out-pointer valid.
            let ze_r = unsafe { (z.get_ipc)(ev.handle, &mut h) };
            check(ze_r, "zexCounterBasedEventGetIpcHandle")?;
            (EventRoute::Zex, from_c(&h.data), 0)
        }
        Origin::IpcPool { pool } => {
            let mut h = ze_ipc_event_pool_handle_t { data: [0; 64] };
            // SAFETY: a live pool made with ZE_EVENT_POOL_FLAG_IPC; out-pointer valid.
            let ze_r = unsafe { (l.zeEventPoolGetIpcHandle)(pool, &mut h) };
            check(ze_r, "zeEventPoolGetIpcHandle")?;
            (EventRoute::EventPool, from_c(&h.data), 0)
        }
        Origin::ImportedCounterBased | Origin::ImportedZex | Origin::ImportedPool { .. } => {
            return Err(Error::invalid("an imported event cannot be exported again"))
        }
        Origin::Pooled { .. } => {
            return Err(Error::invalid("the event was not made with enable_ipc"))
        }
    };
    Ok(IpcExport {
        payload: EventPayload {
            route,
            handle,
            index,
        }
        .encode(),
        fds: Vec::new(),
    })
}

pub(crate) fn put_event(ctx: &ContextInner, payload: &[u8]) -> Result<()> {
    let p = EventPayload::decode(payload)?;
    match (p.route, ctx.loader.zeEventPoolPutIpcHandle) {
        (EventRoute::EventPool, Some(put)) => check(
            // SAFETY: the handle came from zeEventPoolGetIpcHandle in this process.
            unsafe {
                put(
                    ctx.handle,
                    ze_ipc_event_pool_handle_t {
                        data: to_c(&p.handle),
                    },
                )
            },
            "zeEventPoolPutIpcHandle",
        ),
        // Counter-based handles hold nothing to release (as in UR); spec 1.4 has no pool put.
        _ => Ok(()),
    }
}

pub(crate) fn open_event(
    ctx: &Arc<ContextInner>,
    import: IpcImport<'_>,
) -> Result<Arc<dyn sycl_backend::Event>> {
    let p = EventPayload::decode(import.payload)?;
    if !import.fds.is_empty() {
        return Err(Error::invalid(
            "a Level Zero event handle carries no descriptors",
        ));
    }
    let l = &ctx.loader;
    let mut ev = std::ptr::null_mut();
    let origin = match p.route {
        EventRoute::CounterBased => {
            let f = l
                .zeEventCounterBasedOpenIpcHandle
                .ok_or_else(|| missing("zeEventCounterBasedOpenIpcHandle", "ipc::event::open"))?;
            let h = ze_ipc_event_counter_based_handle_t {
                data: to_c(&p.handle),
            };
            // SAFETY: handle passed by value; out-pointer valid.
            let ze_r = unsafe { f(ctx.handle, h, &mut ev) };
            check(ze_r, "zeEventCounterBasedOpenIpcHandle")?;
            Origin::ImportedCounterBased
        }
        EventRoute::Zex => {
            let z = ctx
                .ext
                .zex
                .ok_or_else(|| missing("zexCounterBasedEventOpenIpcHandle", "ipc::event::open"))?;
            let c = translate(l, ZEL_HANDLE_CONTEXT, ctx.handle.cast())?;
            let h = ze_ipc_event_counter_based_handle_t {
                data: to_c(&p.handle),
            };
            // SAFETY: driver-level context handle, handle by value, out-pointer valid.
            let ze_r = unsafe { (z.open_ipc)(c.cast(), h, &mut ev) };
            check(ze_r, "zexCounterBasedEventOpenIpcHandle")?;
            Origin::ImportedZex
        }
        EventRoute::EventPool => {
            let mut pool = std::ptr::null_mut();
            let h = ze_ipc_event_pool_handle_t {
                data: to_c(&p.handle),
            };
            // SAFETY: handle by value; out-pointer valid.
            let ze_r = unsafe { (l.zeEventPoolOpenIpcHandle)(ctx.handle, h, &mut pool) };
            check(ze_r, "zeEventPoolOpenIpcHandle")?;
            let desc = ze_event_desc_t {
                stype: ZE_STRUCTURE_TYPE_EVENT_DESC,
                pNext: std::ptr::null(),
                index: p.index,
                signal: ZE_EVENT_SCOPE_FLAG_HOST,
                wait: ZE_EVENT_SCOPE_FLAG_HOST,
            };
            // SAFETY: the opened pool; the exporter's index.
            let r = unsafe { (l.zeEventCreate)(pool, &desc, &mut ev) };
            if r != ZE_RESULT_SUCCESS {
                // SAFETY: the pool was opened above and has no events.
                let _ = unsafe { (l.zeEventPoolCloseIpcHandle)(pool) };
                return Err(map_result(r, "zeEventCreate (imported pool)"));
            }
            Origin::ImportedPool { pool }
        }
    };
    Ok(Event::imported(ctx, ev, origin, import.exporter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> [u8; 64] {
        std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(5))
    }

    fn assert_invalid<T: std::fmt::Debug>(r: Result<T>) {
        assert_eq!(r.unwrap_err().code(), Errc::Invalid);
    }

    #[test]
    fn memory_payload_round_trips_and_rejects_garbage() {
        let p = MemPayload {
            handle: handle(),
            offset: 256,
            size: 4096,
            device_uuid: [9; 16],
        };
        let bytes = p.encode();
        assert_eq!(bytes.len(), MemPayload::LEN);
        assert_eq!(MemPayload::decode(&bytes).unwrap(), p);
        for n in 0..bytes.len() {
            assert_invalid(MemPayload::decode(&bytes[..n]));
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_invalid(MemPayload::decode(&long));
        let mut bad = bytes.clone();
        bad[0] ^= 0xff;
        assert_invalid(MemPayload::decode(&bad));
        assert_invalid(MemPayload::decode(
            &MemPayload { offset: 4096, ..p }.encode(),
        ));
        assert_invalid(MemPayload::decode(
            &MemPayload {
                size: 0,
                offset: 0,
                ..p
            }
            .encode(),
        ));
        // Another kind's payload is not a memory payload.
        assert_invalid(MemPayload::decode(
            &PhysPayload {
                size: 1,
                device_uuid: [0; 16],
                fd: 3,
            }
            .encode(),
        ));
        assert_invalid(MemPayload::decode(&[0u8; MemPayload::LEN]));
    }

    #[test]
    fn physical_payload_round_trips_and_rejects_garbage() {
        let p = PhysPayload {
            size: 2 << 20,
            device_uuid: [1; 16],
            fd: 17,
        };
        let bytes = p.encode();
        assert_eq!(bytes.len(), PhysPayload::LEN);
        assert_eq!(PhysPayload::decode(&bytes).unwrap(), p);
        for n in 0..bytes.len() {
            assert_invalid(PhysPayload::decode(&bytes[..n]));
        }
        assert_invalid(PhysPayload::decode(&PhysPayload { fd: -1, ..p }.encode()));
        assert_invalid(PhysPayload::decode(&PhysPayload { size: 0, ..p }.encode()));
        assert_invalid(PhysPayload::decode(&[0xaa; PhysPayload::LEN]));
    }

    #[test]
    fn event_payload_round_trips_and_rejects_garbage() {
        for route in [
            EventRoute::CounterBased,
            EventRoute::Zex,
            EventRoute::EventPool,
        ] {
            let p = EventPayload {
                route,
                handle: handle(),
                index: 0,
            };
            let bytes = p.encode();
            assert_eq!(bytes.len(), EventPayload::LEN);
            assert_eq!(EventPayload::decode(&bytes).unwrap(), p);
            for n in 0..bytes.len() {
                assert_invalid(EventPayload::decode(&bytes[..n]));
            }
        }
        let pool = EventPayload {
            route: EventRoute::EventPool,
            handle: handle(),
            index: 7,
        };
        assert_eq!(EventPayload::decode(&pool.encode()).unwrap().index, 7);
        assert_invalid(EventPayload::decode(
            &EventPayload {
                route: EventRoute::CounterBased,
                ..pool
            }
            .encode(),
        ));
        let mut bad_route = pool.encode();
        bad_route[4..8].copy_from_slice(&9u32.to_le_bytes());
        assert_invalid(EventPayload::decode(&bad_route));
        assert_invalid(EventPayload::decode(&[0u8; EventPayload::LEN]));
    }

    #[test]
    fn fd_patching_touches_bytes_0_to_3_only() {
        let h = handle();
        let patched = patch_fd(&h, 42);
        assert_eq!(fd_in_handle(&patched), 42);
        assert_eq!(&patched[4..], &h[4..]);
        assert_eq!(&patched[..4], &42i32.to_ne_bytes());
        assert_eq!(
            fd_in_handle(&patch_fd(&patched, fd_in_handle(&h))),
            fd_in_handle(&h)
        );
        assert_eq!(patch_fd(&patched, fd_in_handle(&h)), h);
        assert_eq!(fd_in_handle(&patch_fd(&h, -1)), -1);
        // The C-char conversion is lossless.
        assert_eq!(from_c(&to_c(&h)), h);
    }
}
