//! IPC of USM device memory, physical memory and events.
//!
//! Every exported object is a memfd, sealed against resizing from its creation on. The
//! payload names the file's inode and device number (so an importer can prove the descriptor
//! it received is the exported file, not a stale or reused number) plus sizes and offsets; the
//! descriptor itself travels beside the payload. `get` exports the object's own descriptor: it
//! stays open exactly as long as the object, so an export costs no descriptor of its own, and
//! revoking an export before that (`put`) is the `sycl` layer's export ticket. Importers refuse
//! descriptors that are not sealed memfds, and map no more than the file holds. Everything an
//! importer needs is in the payload and the descriptors, so imports work across processes and
//! outlive the exporter.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use sycl_backend::ipc::{IpcExport, IpcImport, OpenedMemory, PayloadReader};
use sycl_backend::{downcast, BackendKind, Error, Result, UsmKind};

use crate::context::Context;
use crate::event::Event;
use crate::sys::{self, FileId};
use crate::usm::{self, HostMemory, MemEntry};
use crate::virtual_mem::PhysicalMem;

const TAG_MEM: u32 = u32::from_le_bytes(*b"NCM1");
const TAG_PHYS: u32 = u32::from_le_bytes(*b"NCP1");
const TAG_EVENT: u32 = u32::from_le_bytes(*b"NCE1");

const STALE: &str = "descriptor does not match the handle (stale or reused)";

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn read_header(r: &mut PayloadReader<'_>, tag: u32, what: &str) -> Result<FileId> {
    if r.u32()? != tag {
        return Err(Error::invalid(format!(
            "{what}: the payload is not a native_cpu {what} handle"
        )));
    }
    Ok(FileId {
        ino: r.u64()?,
        dev: r.u64()?,
    })
}

/// The one descriptor of an import.
fn single_fd(import: IpcImport<'_>, what: &str) -> Result<OwnedFd> {
    let n = import.fds.len();
    let mut fds = import.fds.into_iter();
    match (fds.next(), n) {
        (Some(fd), 1) => Ok(fd),
        _ => Err(Error::invalid(format!(
            "{what}: expected 1 descriptor, got {n}"
        ))),
    }
}

/// A memory payload: tag, inode, device, allocation size, offset of the pointer, exported
/// descriptor number.
fn mem_payload(id: FileId, size: u64, offset: u64, fd: i32) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    put_u32(&mut p, TAG_MEM);
    put_u64(&mut p, id.ino);
    put_u64(&mut p, id.dev);
    put_u64(&mut p, size);
    put_u64(&mut p, offset);
    put_u32(&mut p, fd as u32);
    p
}

fn parse_mem(payload: &[u8]) -> Result<(FileId, u64, u64, i32)> {
    let mut r = PayloadReader::new(payload, "ipc::memory");
    let id = read_header(&mut r, TAG_MEM, "ipc::memory")?;
    let size = r.u64()?;
    let offset = r.u64()?;
    let fd = r.u32()? as i32;
    r.finish()?;
    if size == 0 || offset >= size {
        return Err(Error::invalid(format!(
            "ipc::memory: offset {offset} outside an allocation of {size} bytes"
        )));
    }
    Ok((id, size, offset, fd))
}

fn phys_payload(id: FileId, size: u64, fd: i32) -> Vec<u8> {
    let mut p = Vec::with_capacity(32);
    put_u32(&mut p, TAG_PHYS);
    put_u64(&mut p, id.ino);
    put_u64(&mut p, id.dev);
    put_u64(&mut p, size);
    put_u32(&mut p, fd as u32);
    p
}

fn parse_phys(payload: &[u8]) -> Result<(FileId, u64, i32)> {
    let mut r = PayloadReader::new(payload, "ipc::physical_memory");
    let id = read_header(&mut r, TAG_PHYS, "ipc::physical_memory")?;
    let size = r.u64()?;
    let fd = r.u32()? as i32;
    r.finish()?;
    Ok((id, size, fd))
}

fn event_payload(id: FileId, fd: i32) -> Vec<u8> {
    let mut p = Vec::with_capacity(24);
    put_u32(&mut p, TAG_EVENT);
    put_u64(&mut p, id.ino);
    put_u64(&mut p, id.dev);
    put_u32(&mut p, fd as u32);
    p
}

fn parse_event(payload: &[u8]) -> Result<(FileId, i32)> {
    let mut r = PayloadReader::new(payload, "ipc::event");
    let id = read_header(&mut r, TAG_EVENT, "ipc::event")?;
    let fd = r.u32()? as i32;
    r.finish()?;
    Ok((id, fd))
}

impl HostMemory {
    /// Exports the device allocation that contains `ptr` (interior pointers allowed).
    pub fn export(&self, ptr: u64) -> Result<IpcExport> {
        let mem = self.registry.lock();
        let (base, alloc) =
            match mem.find(ptr) {
                Some((base, MemEntry::Usm(a))) => (base, a),
                Some((_, MemEntry::Opened(_))) => return Err(Error::invalid(
                    "ipc::memory::get: memory opened from another export cannot be exported again",
                )),
                None => {
                    return Err(Error::invalid(format!(
                        "ipc::memory::get: {ptr:#x} is not inside a USM allocation of this context"
                    )))
                }
            };
        if alloc.kind != UsmKind::Device {
            return Err(Error::invalid(format!(
                "ipc::memory exports USM device memory; {ptr:#x} is {} USM",
                alloc.kind
            )));
        }
        let fd = alloc.fd.as_raw_fd();
        let payload = mem_payload(alloc.id, alloc.size as u64, ptr - base, fd);
        Ok(IpcExport {
            payload,
            fds: vec![fd],
        })
    }

    /// Ends an export. Nothing to release: the export is the allocation's own descriptor;
    /// the payload is only checked.
    pub fn put(&self, payload: &[u8]) -> Result<()> {
        parse_mem(payload).map(|_| ())
    }

    /// Opens exported memory for the device at `device_index` of the caller's context: the
    /// address of the exported element here and the bytes mapped from it (from the file, not
    /// the payload). Opens of the same file share one mapping.
    pub fn open(&self, device_index: usize, import: IpcImport<'_>) -> Result<OpenedMemory> {
        let (id, size, offset, _) = parse_mem(import.payload)?;
        let fd = single_fd(import, "ipc::memory::open")?;
        let size = usize::try_from(size)
            .map_err(|_| Error::invalid("ipc::memory: allocation too large"))?;
        let (actual, file_size) = sys::file_id(&fd)?;
        if actual != id || file_size < size as u64 {
            return Err(Error::invalid(format!("ipc::memory::open: {STALE}")));
        }
        // Sealed, so the file keeps at least `file_size` bytes for as long as it is mapped.
        sys::check_sealed(&fd, "ipc::memory::open")?;
        let len = sys::round_up(size, sys::page_size())
            .filter(|&len| len as u64 <= file_size)
            .ok_or_else(|| Error::invalid(format!("ipc::memory::open: {STALE}")))?;
        // The descriptor is the very file of a mapping made here before (the kernel's inode
        // and device say so, checked above, as were its seals and size): share that mapping.
        if let Some(ptr) = self
            .registry
            .lock()
            .reuse_opened(id, size, device_index, offset)
        {
            return Ok(OpenedMemory {
                ptr,
                size: size - offset as usize,
            });
        }
        let (base, opened) = usm::map_import(&fd, id, len, size, device_index, offset)?;
        let ptr = base + offset;
        self.registry.lock().insert_opened(base, opened);
        // `fd` closes here; the mapping keeps the file alive. `offset < size` (parse_mem).
        Ok(OpenedMemory {
            ptr,
            size: size - offset as usize,
        })
    }

    /// Closes an address that [`HostMemory::open`] returned; the last close of a mapping
    /// unmaps it.
    ///
    /// # Safety
    /// No pending command and no live reference uses the memory.
    pub unsafe fn close(&self, ptr: u64) -> Result<()> {
        // The last open of a mapping unmaps it (outside the lock).
        let last = self.registry.lock().remove_opened(ptr)?;
        drop(last);
        Ok(())
    }
}

/// Exports an event made with `enable_ipc` in this process ([`Event::standalone`]): the
/// payload names its page's memfd.
pub fn export_event(event: &Event) -> Result<IpcExport> {
    let (id, fd) = event.export_info()?;
    Ok(IpcExport {
        payload: event_payload(id, fd),
        fds: vec![fd],
    })
}

/// Ends an event export. Nothing to release: the export is the event page's own descriptor.
pub fn put_event(payload: &[u8]) -> Result<()> {
    parse_event(payload).map(|_| ())
}

/// Opens an exported event: an [`Event`] over the exporter's page, after checking that the
/// descriptor is the sealed memfd the payload names and holds an event page.
pub fn open_event(import: IpcImport<'_>) -> Result<Arc<Event>> {
    let (id, _) = parse_event(import.payload)?;
    let exporter = import.exporter;
    let fd = single_fd(import, "ipc::event::open")?;
    let (actual, _) = sys::file_id(&fd)?;
    if actual != id {
        return Err(Error::invalid(format!("ipc::event::open: {STALE}")));
    }
    Event::open_shared(fd, id, exporter)
}

impl Context {
    pub(crate) fn ipc_get_physical_mem_impl(
        &self,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
    ) -> Result<IpcExport> {
        let phys = downcast::<PhysicalMem>(mem.as_any(), "physical_mem", BackendKind::NativeCpu)?;
        if !sycl_backend::PhysicalMem::ipc_enabled(phys) {
            return Err(Error::invalid(
                "ipc::physical_memory::get: the physical_mem was not made with the enable_ipc property",
            ));
        }
        let fd = phys.fd.as_raw_fd();
        let payload = phys_payload(phys.id, sycl_backend::PhysicalMem::size(phys) as u64, fd);
        Ok(IpcExport {
            payload,
            fds: vec![fd],
        })
    }

    /// Nothing to release: the export is the object's own descriptor.
    pub(crate) fn ipc_put_physical_mem_impl(&self, payload: &[u8]) -> Result<()> {
        parse_phys(payload).map(|_| ())
    }

    pub(crate) fn ipc_open_physical_mem_impl(
        &self,
        device: &Arc<dyn sycl_backend::Device>,
        import: IpcImport<'_>,
    ) -> Result<Arc<dyn sycl_backend::PhysicalMem>> {
        self.device_position(device)?;
        let (id, size, _) = parse_phys(import.payload)?;
        let fd = single_fd(import, "ipc::physical_memory::open")?;
        let (actual, file_size) = sys::file_id(&fd)?;
        if actual != id || file_size < size {
            return Err(Error::invalid(format!(
                "ipc::physical_memory::open: {STALE}"
            )));
        }
        sys::check_sealed(&fd, "ipc::physical_memory::open")?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s > 0 && s % sys::page_size() == 0)
            .ok_or_else(|| Error::invalid("ipc::physical_memory: bad size in the payload"))?;
        Ok(Arc::new(PhysicalMem::imported(
            device.clone(),
            fd,
            id,
            size,
        )))
    }

    pub(crate) fn ipc_get_event_impl(
        &self,
        event: &Arc<dyn sycl_backend::Event>,
    ) -> Result<IpcExport> {
        export_event(downcast::<Event>(
            event.as_any(),
            "event",
            BackendKind::NativeCpu,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_garbage() {
        let id = FileId { ino: 42, dev: 7 };
        assert_eq!(
            parse_mem(&mem_payload(id, 4096, 10, 5)).unwrap(),
            (id, 4096, 10, 5)
        );
        assert_eq!(
            parse_phys(&phys_payload(id, 8192, 6)).unwrap(),
            (id, 8192, 6)
        );
        assert_eq!(parse_event(&event_payload(id, 7)).unwrap(), (id, 7));
        // Wrong kind, truncated, trailing bytes, offset outside.
        assert!(parse_mem(&event_payload(id, 7)).is_err());
        let p = mem_payload(id, 4096, 10, 5);
        for n in 0..p.len() {
            assert_eq!(
                parse_mem(&p[..n]).unwrap_err().code(),
                sycl_backend::Errc::Invalid
            );
        }
        let mut long = p.clone();
        long.push(0);
        assert!(parse_mem(&long).is_err());
        assert!(parse_mem(&mem_payload(id, 4096, 4096, 5)).is_err());
    }
}
