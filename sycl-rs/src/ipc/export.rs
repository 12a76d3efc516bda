//! Exports and their tickets.
//!
//! Every exported object (a memory record, a physical memory object, an IPC event) has an
//! [`ExportSet`]: its live exports, one per distinct exported thing (kind and offset). A
//! `get` of something already exported returns the same handle and counts one more get, so
//! exporting in a loop holds no more than one export's resources; `put` counts one down, and
//! the last `put` (or the object's release) revokes the export.
//!
//! A handle that names descriptors also names an **export ticket**: a tiny sealed memfd that
//! the exporting process holds for exactly as long as the export is live, holding the
//! exporter's nonce and the export's own nonce. An importer takes the ticket from the
//! exporter (after `pidfd_open`, before any other descriptor) and checks both nonces: that
//! proves the process behind the pid is the exporter (not a process that reused its pid) and
//! that this export was not put or freed (a descriptor number reused by a later export holds
//! another nonce). Handles without descriptors (CUDA memory and events) need no ticket: the
//! driver checks them.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rustix::fs::{MemfdFlags, SealFlags};
use sycl_backend::ipc::{ExporterId, IpcExport, IpcObjectKind};

use super::handle::{Handle, Header};
use crate::{Context, Errc, Error, Result};

/// The first bytes of a ticket.
const TICKET_MAGIC: [u8; 8] = *b"SYCLRSTK";
/// A ticket's size: magic, exporter nonce, export nonce.
const TICKET_LEN: usize = 24;
/// A ticket can never change: no resizing, no writes, no new seals.
const TICKET_SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::WRITE)
    .union(SealFlags::SEAL);

/// A nonce for a new export: unique in this process (a counter from a random start).
fn fresh_nonce() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let seed = ExporterId::current().nonce | 1;
        let _ = NEXT.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
        let n = NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        if n != 0 {
            return n;
        }
    }
}

fn ticket_bytes(exporter_nonce: u64, export_nonce: u64) -> [u8; TICKET_LEN] {
    let mut b = [0u8; TICKET_LEN];
    b[..8].copy_from_slice(&TICKET_MAGIC);
    b[8..16].copy_from_slice(&exporter_nonce.to_le_bytes());
    b[16..].copy_from_slice(&export_nonce.to_le_bytes());
    b
}

fn os(what: &str, e: rustix::io::Errno) -> Error {
    Error::new(Errc::Runtime, format!("{what}: {e}"))
}

/// A new ticket for an export of this process.
fn create_ticket(export_nonce: u64) -> Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(
        "sycl-rs-export-ticket",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .map_err(|e| os("memfd_create (export ticket)", e))?;
    let bytes = ticket_bytes(ExporterId::current().nonce, export_nonce);
    let written = rustix::io::pwrite(&fd, &bytes, 0).map_err(|e| os("writing a ticket", e))?;
    if written != TICKET_LEN {
        return Err(Error::new(Errc::Runtime, "short write of an export ticket"));
    }
    rustix::fs::fcntl_add_seals(&fd, TICKET_SEALS).map_err(|e| os("sealing a ticket", e))?;
    Ok(fd)
}

/// Checks that `fd` is the ticket of export `export_nonce` of the process `exporter`.
pub(crate) fn check_ticket(
    fd: BorrowedFd<'_>,
    exporter: &ExporterId,
    export_nonce: u64,
) -> Result<()> {
    let gone = || {
        Error::new(
            Errc::Invalid,
            format!(
                "process {} holds no live export of this handle: the export was put or its \
                 object freed, or the exporter exited and its pid now belongs to another process",
                exporter.pid
            ),
        )
    };
    let seals = rustix::fs::fcntl_get_seals(fd).map_err(|_| gone())?;
    let size = rustix::fs::fstat(fd).map_err(|_| gone())?.st_size;
    if !seals.contains(TICKET_SEALS) || size != TICKET_LEN as i64 {
        return Err(gone());
    }
    let mut got = [0u8; TICKET_LEN];
    match rustix::io::pread(fd, &mut got, 0) {
        Ok(TICKET_LEN) if got == ticket_bytes(exporter.nonce, export_nonce) => Ok(()),
        _ => Err(gone()),
    }
}

/// One live export.
struct Export {
    kind: IpcObjectKind,
    /// Offset of the exported address in its object (memory), else 0.
    offset: u64,
    nonce: u64,
    /// The handle bytes every get of this export returns.
    bytes: Vec<u8>,
    header: Header,
    /// Held (open) while the export is live: closing it revokes the export. `None` for handles
    /// without descriptors.
    _ticket: Option<OwnedFd>,
    /// Gets not yet put.
    gets: usize,
}

/// The live exports of one object.
#[derive(Default)]
pub(crate) struct ExportSet {
    exports: Mutex<Vec<Export>>,
}

/// What identifies an export for `put`: kept by the handle `get` returned.
#[derive(Clone)]
pub(crate) struct ExportRef {
    pub(crate) context: Context,
    set: Weak<ExportSet>,
    nonce: u64,
}

/// What a new export of an object says of it.
pub(crate) struct ExportSpec<'a> {
    pub(crate) context: &'a Context,
    pub(crate) kind: IpcObjectKind,
    pub(crate) offset: u64,
    pub(crate) device_identity: [u8; 16],
    pub(crate) object_size: u64,
}

impl ExportSet {
    /// The handle of the export `spec` names: the live one (one more get), or a new one made
    /// with `export` (the backend's `get`).
    pub(crate) fn get(
        self: &Arc<Self>,
        spec: ExportSpec<'_>,
        export: impl FnOnce() -> Result<IpcExport>,
    ) -> Result<Handle> {
        let mut exports = self.exports.lock();
        let found = exports
            .iter_mut()
            .find(|e| e.kind == spec.kind && e.offset == spec.offset);
        let e = match found {
            Some(e) => {
                e.gets += 1;
                e
            }
            None => {
                let IpcExport { payload, mut fds } = export()?;
                let nonce = fresh_nonce();
                let ticket = if fds.is_empty() {
                    None
                } else {
                    let t = create_ticket(nonce)?;
                    fds.push(t.as_raw_fd());
                    Some(t)
                };
                let header = Header {
                    backend: spec.context.backend(),
                    kind: spec.kind,
                    exporter: ExporterId::current(),
                    device_identity: spec.device_identity,
                    object_size: spec.object_size,
                    payload_len: payload.len(),
                    fds,
                    export_nonce: nonce,
                };
                let bytes = header.encode(&payload)?;
                exports.push(Export {
                    kind: spec.kind,
                    offset: spec.offset,
                    nonce,
                    bytes,
                    header,
                    _ticket: ticket,
                    gets: 1,
                });
                exports.last_mut().expect("just pushed")
            }
        };
        Ok(Handle::exported(
            e.bytes.clone(),
            e.header.clone(),
            ExportRef {
                context: spec.context.clone(),
                set: Arc::downgrade(self),
                nonce: e.nonce,
            },
        ))
    }

    /// Revokes every export (the object is being released): closes the tickets, so bytes
    /// already sent can no longer be opened.
    pub(crate) fn revoke_all(&self) {
        self.exports.lock().clear();
    }
}

impl ExportRef {
    /// One `put`: counts a get down; returns the payload for the backend's `put` when this was
    /// the last get of the export (which is then revoked).
    pub(crate) fn put(&self) -> Result<Option<Vec<u8>>> {
        let set = self.set.upgrade().ok_or_else(|| {
            Error::invalid("the exported object was freed, which already revoked its exports")
        })?;
        let mut exports = set.exports.lock();
        let i = exports
            .iter()
            .position(|e| e.nonce == self.nonce)
            .ok_or_else(|| Error::invalid("the export was already revoked"))?;
        exports[i].gets -= 1;
        if exports[i].gets > 0 {
            return Ok(None);
        }
        let e = exports.swap_remove(i);
        Ok(Some(e.bytes[super::handle::HEADER_LEN..].to_vec()))
    }

    /// Runs `f` with the descriptors the handle names, borrowed while the export is live (so
    /// none of them can be closed or reused meanwhile): for sending the handle.
    pub(crate) fn with_fds<R>(&self, f: impl FnOnce(&[BorrowedFd<'_>]) -> Result<R>) -> Result<R> {
        let set = self.set.upgrade().ok_or_else(|| {
            Error::invalid("the exported object was freed: its handle can no longer be sent")
        })?;
        let exports = set.exports.lock();
        let e = exports
            .iter()
            .find(|e| e.nonce == self.nonce)
            .ok_or_else(|| {
                Error::invalid("the export was put: its handle can no longer be sent")
            })?;
        let fds: Vec<BorrowedFd<'_>> = e
            .header
            .fds
            .iter()
            .map(|&n| {
                // SAFETY: the export is live under this lock: its ticket is `e.ticket`, and the
                // backend's descriptors belong to the exported object, which revokes its
                // exports (taking this lock) before it is released, so they stay open for as
                // long as the lock, and so these borrows, last.
                unsafe { BorrowedFd::borrow_raw(n) }
            })
            .collect();
        f(&fds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn tickets_prove_exporter_and_export() {
        let me = ExporterId::current();
        let t = create_ticket(42).unwrap();
        check_ticket(t.as_fd(), &me, 42).unwrap();
        assert_eq!(
            check_ticket(t.as_fd(), &me, 43).unwrap_err().code(),
            Errc::Invalid
        );
        let other = ExporterId {
            nonce: me.nonce ^ 1,
            ..me
        };
        assert_eq!(
            check_ticket(t.as_fd(), &other, 42).unwrap_err().code(),
            Errc::Invalid
        );
        // Not a ticket: an unsealed file, or a socket.
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(check_ticket(f.as_fd(), &me, 42).is_err());
        // Tickets cannot be rewritten by whoever receives them.
        assert!(rustix::io::pwrite(&t, b"x", 0).is_err());
        assert!(rustix::fs::ftruncate(&t, 0).is_err());
        assert_ne!(fresh_nonce(), fresh_nonce());
    }
}
