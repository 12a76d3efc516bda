//! Exports and their tickets.
//!
//! Every exported object (a memory record, a physical memory object, an IPC event) has an
//! [`ExportSet`]: its live exports, one per distinct exported thing (kind and offset). A
//! `get` of something already exported returns the same handle and counts one more get, so
//! exporting in a loop holds no more than one export's resources; `put` counts one down, and
//! the last `put` (or the object's release) revokes the export.
//!
//! A handle that names descriptors also names an **export ticket**: a one-page memfd that the
//! exporting process holds for exactly as long as the export is live. It holds the exporter's
//! nonce, the export's own nonce and a state word, *live* until the export is revoked. Only the
//! exporter can change it: it is sealed against resizing and against new writable mappings
//! (`F_SEAL_FUTURE_WRITE`), and the exporter writes the state through the one mapping it made
//! before sealing. An importer takes the ticket from the exporter (after `pidfd_open`, before
//! any other descriptor) and checks both nonces and the state: that proves the process behind
//! the pid is the exporter (not a process that reused its pid) and that this export was not
//! put or freed (a descriptor number reused by a later export holds another nonce; a revoked
//! ticket says so). An importer may keep a ticket it has checked and read it again on later
//! opens of the same export, instead of taking it anew. Handles without descriptors (CUDA
//! memory and events) need no ticket: the driver checks them.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use sycl_backend::ipc::{ExporterId, IpcExport, IpcObjectKind};

use super::handle::{Handle, Header};
use crate::{Context, Errc, Error, Result};

/// The first bytes of a ticket.
const TICKET_MAGIC: [u8; 8] = *b"SYCLRSTK";
/// Bytes of a ticket that importers read: magic, exporter nonce, export nonce, state.
const TICKET_LEN: usize = 32;
/// Offset of the state word.
const STATE_AT: usize = 24;
/// States of a ticket.
const LIVE: u64 = 1;
const REVOKED: u64 = 2;
/// The file's size (one page, so the exporter can map it).
const TICKET_FILE: usize = 4096;
/// Only the exporter's mapping can change a ticket: no resizing, no new writable mappings or
/// `write`s, no new seals.
const TICKET_SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::FUTURE_WRITE)
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

fn ticket_bytes(exporter_nonce: u64, export_nonce: u64, state: u64) -> [u8; TICKET_LEN] {
    let mut b = [0u8; TICKET_LEN];
    b[..8].copy_from_slice(&TICKET_MAGIC);
    b[8..16].copy_from_slice(&exporter_nonce.to_le_bytes());
    b[16..24].copy_from_slice(&export_nonce.to_le_bytes());
    b[STATE_AT..].copy_from_slice(&state.to_le_bytes());
    b
}

fn os(what: &str, e: rustix::io::Errno) -> Error {
    Error::new(Errc::Runtime, format!("{what}: {e}"))
}

/// The exporter's side of a ticket: the descriptor it sends, and its writable mapping of the
/// page. Dropping it revokes the export (the state word turns to revoked, for importers that
/// kept the ticket), then unmaps and closes.
struct Ticket {
    fd: OwnedFd,
    page: *mut u8,
}

// SAFETY: the page is only written through `AtomicU64` stores of the state word, and the
// mapping belongs to the ticket alone (unmapped once, in drop).
unsafe impl Send for Ticket {}
// SAFETY: see `Send`: `&Ticket` offers no access to the page.
unsafe impl Sync for Ticket {}

impl Ticket {
    /// A new live ticket for an export of this process.
    fn create(export_nonce: u64) -> Result<Ticket> {
        let fd = rustix::fs::memfd_create(
            "sycl-rs-export-ticket",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| os("memfd_create (export ticket)", e))?;
        rustix::fs::ftruncate(&fd, TICKET_FILE as u64).map_err(|e| os("sizing a ticket", e))?;
        // SAFETY: a new shared mapping chosen by the kernel (no address given): it replaces
        // nothing; the ticket owns it and unmaps it once, in drop.
        let page = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                TICKET_FILE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|e| os("mapping a ticket", e))?
        .cast::<u8>();
        let ticket = Ticket { fd, page };
        let bytes = ticket_bytes(ExporterId::current().nonce, export_nonce, LIVE);
        // SAFETY: the page is TICKET_FILE >= TICKET_LEN writable bytes, ours alone until the
        // descriptor is sent (after this function returns).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ticket.page, TICKET_LEN) };
        rustix::fs::fcntl_add_seals(&ticket.fd, TICKET_SEALS)
            .map_err(|e| os("sealing a ticket", e))?;
        Ok(ticket)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // SAFETY: the state word is 8-aligned (page + 24) inside our live mapping; importers
        // only read the page, through their own descriptors.
        let state = unsafe { &*self.page.add(STATE_AT).cast::<AtomicU64>() };
        state.store(REVOKED.to_le(), Ordering::Release);
        // SAFETY: our mapping of TICKET_FILE bytes, unmapped once; nothing borrows it.
        if let Err(e) = unsafe { rustix::mm::munmap(self.page.cast(), TICKET_FILE) } {
            log::warn!("sycl-rs: unmapping an export ticket: {e}");
        }
    }
}

/// Checks that `fd` is the live ticket of export `export_nonce` of the process `exporter`.
/// The content is the proof (the nonces are unknown outside the processes that hold the
/// handle); the seals only keep our own tickets from being changed by those who receive them.
pub(crate) fn check_ticket(
    fd: BorrowedFd<'_>,
    exporter: &ExporterId,
    export_nonce: u64,
) -> Result<()> {
    let mut got = [0u8; TICKET_LEN];
    let ok = matches!(rustix::io::pread(fd, &mut got, 0), Ok(TICKET_LEN))
        && got == ticket_bytes(exporter.nonce, export_nonce, LIVE);
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            Errc::Invalid,
            format!(
                "process {} holds no live export of this handle: the export was put or its \
                 object freed, or the exporter exited and its pid now belongs to another process",
                exporter.pid
            ),
        ))
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
    /// Held while the export is live: dropping it revokes the export. `None` for handles
    /// without descriptors.
    _ticket: Option<Ticket>,
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
                    let t = Ticket::create(nonce)?;
                    fds.push(t.fd.as_raw_fd());
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
        let t = Ticket::create(42).unwrap();
        check_ticket(t.fd.as_fd(), &me, 42).unwrap();
        assert_eq!(
            check_ticket(t.fd.as_fd(), &me, 43).unwrap_err().code(),
            Errc::Invalid
        );
        let other = ExporterId {
            nonce: me.nonce ^ 1,
            ..me
        };
        assert_eq!(
            check_ticket(t.fd.as_fd(), &other, 42).unwrap_err().code(),
            Errc::Invalid
        );
        // Not a ticket: an unsealed file, or a socket.
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(check_ticket(f.as_fd(), &me, 42).is_err());
        // Whoever receives a ticket can neither rewrite nor resize it, nor map it writable.
        assert!(rustix::io::pwrite(&t.fd, b"x", 0).is_err());
        assert!(rustix::fs::ftruncate(&t.fd, 0).is_err());
        // SAFETY: a new mapping chosen by the kernel; refused here (sealed).
        let writable = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                TICKET_FILE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &t.fd,
                0,
            )
        };
        assert!(writable.is_err());
        // Revoking turns a kept copy of the ticket to revoked.
        let kept = t.fd.try_clone().unwrap();
        drop(t);
        assert_eq!(
            check_ticket(kept.as_fd(), &me, 42).unwrap_err().code(),
            Errc::Invalid
        );
        assert_ne!(fresh_nonce(), fresh_nonce());
    }
}
