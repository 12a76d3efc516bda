//! Inter-process communication (`sycl_ext_oneapi_inter_process_communication`): share USM
//! device memory, physical memory and events between processes on one node, without copies.
//!
//! One process calls `get` and sends the [`Handle`]'s bytes to the others (any byte channel),
//! which `open` them. Handles are self-describing and checked: garbage, truncated or corrupted
//! bytes, a handle of another kind or backend, or an exporter that has exited are errors, never
//! undefined behaviour.
//!
//! Descriptors: on Linux, memory is shared through file descriptors. An importer takes them from
//! the exporter with `pidfd_getfd`, which needs ptrace permission over the exporter (the same
//! user, and under Yama `ptrace_scope=1`, an ancestor or a process the exporter named with
//! [`allow_fd_access_from`]). The [`transport`] channel sends handles with their descriptors
//! (`SCM_RIGHTS`) and needs no such permission.

pub mod event;
mod export;
mod handle;
pub mod memory;
pub mod physical_memory;
pub mod transport;

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sycl_backend::BackendKind;

pub(crate) use export::{ExportSet, ExportSpec};
pub use handle::Handle;
pub use sycl_backend::ipc::{FdAccess, IpcObjectKind};

use sycl_backend::ipc::{ExporterFds, ExporterId, IpcImport};

use crate::{Context, Device, Errc, Error, Result};

/// Lets another process take this process's descriptors with `pidfd_getfd` (a wrapper of
/// `prctl(PR_SET_PTRACER, ..)`); needed under the Yama LSM (`ptrace_scope` 1) when the importer
/// is not an ancestor. Nothing is relaxed unless you call this.
pub fn allow_fd_access_from(access: FdAccess) -> Result<()> {
    sycl_backend::ipc::allow_fd_access_from(access)
}

/// Checks that `handle` names `kind` of `context`'s backend, and gathers its descriptors:
/// first the export ticket, which proves that the process is the exporter and the export is
/// still live (`ipc::export`), then the backend's.
pub(crate) fn prepare_import<'h>(
    handle: &'h Handle,
    kind: IpcObjectKind,
    context: &Context,
) -> Result<IpcImport<'h>> {
    let header = &handle.header;
    if header.kind != kind {
        return Err(Error::new(
            Errc::Invalid,
            format!(
                "the handle names {}, not {}",
                header.kind.name(),
                kind.name()
            ),
        ));
    }
    if !context.raw().ipc_reads(header.backend, kind) {
        return Err(Error::new(
            Errc::BackendMismatch,
            format!(
                "the handle was exported by the {} backend; this context is {}",
                header.backend,
                context.backend()
            ),
        ));
    }
    let same_process = header.exporter.is_current_process();
    // Whether the exporter still runs is checked here only for descriptors received with the
    // handle (taking them from the exporter fails by itself when it is gone), and otherwise
    // only after a failed open (see `explain_open_failure`). It is one `poll` of a kept pidfd
    // after the first time (`exporter_alive`), not a read of /proc.
    if !same_process && !handle.fds.is_empty() && !exporter_alive(&header.exporter) {
        return Err(dead_exporter(header.exporter.pid));
    }
    let fds: Vec<OwnedFd> = if let Some((ticket, backend_fds)) = handle.fds.split_last() {
        // Received with the handle: the sender's copies, ticket included.
        export::check_ticket(ticket.as_fd(), &header.exporter, header.export_nonce)?;
        backend_fds
            .iter()
            .map(|fd| {
                fd.try_clone().map_err(|e| {
                    Error::new(
                        Errc::Runtime,
                        format!("duplicating a received descriptor: {e}"),
                    )
                })
            })
            .collect::<Result<_>>()?
    } else if let Some((&ticket, backend_fds)) = header.fds.split_last() {
        // Taken from the exporter: the ticket first, so nothing else is taken from a process
        // that is not the exporter, or for an export that was revoked.
        let source = verified_source(
            &header.exporter,
            ticket,
            header.export_nonce,
            header.backend,
        )?;
        backend_fds
            .iter()
            .map(|&fd| source.take(fd, header.backend))
            .collect::<Result<Vec<_>>>()
            .inspect_err(|_| forget_exporter(&header.exporter))?
    } else {
        Vec::new()
    };
    Ok(IpcImport {
        payload: handle.payload(),
        fds,
        exporter: header.exporter,
        same_process,
    })
}

/// An exporter whose identity an export ticket proved: its pidfd (a pidfd names one process
/// for good, so later imports from it skip `pidfd_open`) and the tickets checked through it,
/// by export nonce (a later open of the same export reads the kept ticket again, one `pread`,
/// instead of taking it anew).
struct Verified {
    pidfd: Arc<OwnedFd>,
    tickets: HashMap<u64, Arc<OwnedFd>>,
}

/// At most this many exporters are kept, each with at most this many tickets (each kept
/// ticket is a descriptor of this process).
const VERIFIED_EXPORTERS: usize = 32;
const KEPT_TICKETS: usize = 16;

/// Exporters are kept by pid and nonce: the start time proves nothing (the ticket does), so a
/// handle that names another start time is the same exporter, not another entry.
type ExporterKey = (u32, u64);

fn key_of(exporter: &ExporterId) -> ExporterKey {
    (exporter.pid, exporter.nonce)
}

fn verified_exporters() -> &'static Mutex<HashMap<ExporterKey, Verified>> {
    static VERIFIED: OnceLock<Mutex<HashMap<ExporterKey, Verified>>> = OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

/// The exporter's descriptors, once its ticket `ticket_fd` for export `nonce` proved it and the
/// export live: through a kept ticket and pidfd, or by taking the ticket (this process: `dup`;
/// another: a kept or new pidfd).
fn verified_source(
    exporter: &ExporterId,
    ticket_fd: std::os::fd::RawFd,
    nonce: u64,
    backend: BackendKind,
) -> Result<ExporterFds> {
    if exporter.is_current_process() {
        let source = ExporterFds::SameProcess;
        let ticket = source.take(ticket_fd, backend)?;
        export::check_ticket(ticket.as_fd(), exporter, nonce)?;
        return Ok(source);
    }
    let (pidfd, kept) = {
        let verified = verified_exporters().lock();
        match verified.get(&key_of(exporter)) {
            Some(v) => (Some(v.pidfd.clone()), v.tickets.get(&nonce).cloned()),
            None => (None, None),
        }
    };
    if let (Some(pidfd), Some(ticket)) = (&pidfd, kept) {
        return match export::check_ticket(ticket.as_fd(), exporter, nonce) {
            Ok(()) => Ok(ExporterFds::Remote {
                pid: exporter.pid,
                pidfd: pidfd.clone(),
            }),
            Err(e) => {
                if let Some(v) = verified_exporters().lock().get_mut(&key_of(exporter)) {
                    v.tickets.remove(&nonce);
                }
                Err(e)
            }
        };
    }
    let source = match pidfd {
        Some(pidfd) => ExporterFds::Remote {
            pid: exporter.pid,
            pidfd,
        },
        None => ExporterFds::open(exporter, backend)?,
    };
    let ticket = source
        .take(ticket_fd, backend)
        .inspect_err(|_| forget_exporter(exporter))?;
    export::check_ticket(ticket.as_fd(), exporter, nonce)?;
    if let ExporterFds::Remote { pidfd, .. } = &source {
        let mut verified = verified_exporters().lock();
        let key = key_of(exporter);
        if verified.len() >= VERIFIED_EXPORTERS && !verified.contains_key(&key) {
            verified.clear();
        }
        let v = verified.entry(key).or_insert_with(|| Verified {
            pidfd: pidfd.clone(),
            tickets: HashMap::new(),
        });
        if v.tickets.len() >= KEPT_TICKETS {
            v.tickets.clear();
        }
        v.tickets.insert(nonce, Arc::new(ticket));
    }
    Ok(source)
}

/// Exporters found running, with a pidfd proven to name them: whether one still runs is then
/// one `poll` of the pidfd (readable once the process exited) instead of a read of
/// `/proc/PID/stat` (an open, a stat, several reads and a parse: most of a cached open's time
/// otherwise). Keyed by the whole identity: a handle naming another start time or nonce is
/// another entry, checked against /proc once.
fn live_exporters() -> &'static Mutex<HashMap<ExporterId, Arc<OwnedFd>>> {
    static LIVE: OnceLock<Mutex<HashMap<ExporterId, Arc<OwnedFd>>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// `ExporterId::is_alive`, answered from a kept pidfd after the first time.
///
/// The first time, the pidfd is opened before /proc is read: when /proc then shows the
/// exporter's start time under its pid, the pidfd names the exporter (the exporter made the
/// handle before we opened the pidfd, so it held the pid then too, unless it had already
/// exited, and a pid's later owner cannot have its start time). A pidfd names one process for
/// good, so from then on it answers for that process alone.
pub(crate) fn exporter_alive(exporter: &ExporterId) -> bool {
    if exporter.is_current_process() {
        return true;
    }
    let kept = live_exporters().lock().get(exporter).cloned();
    if let Some(pidfd) = kept {
        match pidfd_exited(&pidfd) {
            Some(false) => return true,
            Some(true) => {
                live_exporters().lock().remove(exporter);
                return false;
            }
            // poll failed: fall back to /proc below.
            None => {}
        }
    }
    let pidfd = rustix::process::Pid::from_raw(exporter.pid as i32).and_then(|pid| {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    });
    if !exporter.is_alive() {
        return false;
    }
    if let Some(pidfd) = pidfd {
        let mut live = live_exporters().lock();
        if live.len() >= VERIFIED_EXPORTERS {
            live.clear();
        }
        live.insert(*exporter, Arc::new(pidfd));
    }
    true
}

/// Whether the process of `pidfd` exited (its pidfd polls readable); `None` if poll failed.
fn pidfd_exited(pidfd: &OwnedFd) -> Option<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(n) => Some(n > 0 && !fds[0].revents().is_empty()),
        Err(_) => None,
    }
}

/// Drops what is kept of an exporter that failed us (exited, or refused a descriptor).
fn forget_exporter(exporter: &ExporterId) {
    verified_exporters().lock().remove(&key_of(exporter));
}

fn dead_exporter(pid: u32) -> Error {
    Error::new(
        Errc::Invalid,
        format!("the exporting process {pid} no longer exists"),
    )
}

/// Turns a backend's failure to open into "the exporter no longer exists" when that is why.
pub(crate) fn explain_open_failure(handle: &Handle, err: Error) -> Error {
    let exporter = &handle.header.exporter;
    if !exporter.is_current_process() && !exporter.is_alive() {
        dead_exporter(exporter.pid)
    } else {
        err
    }
}

/// `put` of a handle that `get` returned in this process, of `kind`: counts one get of its
/// export down; when that was the last, revokes the export and hands its payload to
/// `backend_put`.
pub(crate) fn put(
    handle: Handle,
    kind: IpcObjectKind,
    backend_put: impl FnOnce(&Context, &[u8]) -> Result<()>,
) -> Result<()> {
    if handle.header.kind != kind {
        return Err(Error::invalid(format!(
            "the handle names {}, not {}",
            handle.header.kind.name(),
            kind.name()
        )));
    }
    let origin = handle
        .origin
        .as_ref()
        .ok_or_else(|| Error::invalid("put takes a handle that get returned in this process"))?;
    match origin.put()? {
        Some(payload) => backend_put(&origin.context, &payload),
        None => Ok(()),
    }
}

/// The device a default-context `open` uses: the one whose identity the handle records, if it is
/// on this node and of the handle's backend, else the default device.
pub(crate) fn default_device_for(handle: &Handle) -> Result<Device> {
    let by_identity = Device::all().into_iter().find(|d| {
        d.backend() == handle.header.backend && d.identity() == handle.header.device_identity
    });
    match by_identity {
        Some(d) => Ok(d),
        None => Device::default_device(),
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn identity_of(child: &std::process::Child) -> ExporterId {
        let pid = child.id();
        ExporterId {
            pid,
            start_time: sycl_backend::ipc::process_start_time(pid).expect("the child runs"),
            nonce: 0x5eed ^ u64::from(pid),
        }
    }

    #[test]
    fn exporter_liveness_is_kept_and_follows_the_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep(1) runs");
        let id = identity_of(&child);
        assert!(exporter_alive(&id));
        assert!(
            live_exporters().lock().contains_key(&id),
            "a pidfd is kept after the first check"
        );
        assert!(exporter_alive(&id), "answered from the kept pidfd");
        // Another start time under the same pid is another process: not alive, not kept.
        let impostor = ExporterId {
            start_time: id.start_time + 1,
            ..id
        };
        assert!(!exporter_alive(&impostor));
        assert!(!live_exporters().lock().contains_key(&impostor));
        // Exited (a zombie until reaped, then gone): the kept pidfd says so, and is dropped.
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while exporter_alive(&id) {
            assert!(std::time::Instant::now() < deadline, "the exit is seen");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!live_exporters().lock().contains_key(&id));
        child.wait().unwrap();
        assert!(!exporter_alive(&id));
    }
}
