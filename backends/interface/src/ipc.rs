//! What backends hand over when they export an object, what they receive to import one,
//! and the process-level helpers shared by every backend (fd transfer, exporter identity).
//!
//! The self-describing handle format (magic, version, checksum, ...) lives in `sycl`; backends
//! only see their own payload.

use std::os::fd::{AsFd, OwnedFd, RawFd};

use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags};

use crate::{BackendKind, Errc, Error, Result};

/// The kind of object an IPC handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpcObjectKind {
    /// USM device memory (`ipc::memory`).
    Memory,
    /// A physical memory object (`ipc::physical_memory`).
    PhysicalMemory,
    /// An event (`ipc::event`).
    Event,
}

impl IpcObjectKind {
    /// The number written into handles.
    pub fn wire_id(self) -> u8 {
        match self {
            IpcObjectKind::Memory => 1,
            IpcObjectKind::PhysicalMemory => 2,
            IpcObjectKind::Event => 3,
        }
    }

    /// The inverse of [`IpcObjectKind::wire_id`].
    pub fn from_wire_id(id: u8) -> Option<Self> {
        [
            IpcObjectKind::Memory,
            IpcObjectKind::PhysicalMemory,
            IpcObjectKind::Event,
        ]
        .into_iter()
        .find(|k| k.wire_id() == id)
    }

    /// The API name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            IpcObjectKind::Memory => "memory",
            IpcObjectKind::PhysicalMemory => "physical memory",
            IpcObjectKind::Event => "event",
        }
    }
}

/// What a backend returns from an export (`get`): opaque payload bytes, and the numbers of file
/// descriptors (in the exporting process) that an importer needs. The backend keeps those
/// descriptors open until the matching `put`, or until the exported object is destroyed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpcExport {
    /// Backend-defined bytes, at most [`MAX_PAYLOAD`].
    pub payload: Vec<u8>,
    /// Descriptors the importer must obtain, in the order the payload expects them.
    pub fds: Vec<RawFd>,
}

/// Memory that [`crate::Context::ipc_open_mem`] mapped into this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenedMemory {
    /// The address of the exported element in this process (base of the mapping + offset).
    pub ptr: u64,
    /// Bytes from `ptr` to the end of the mapping, as the backend verified them against the
    /// driver or the kernel (never taken from the payload alone): the most any access through
    /// `ptr` may cover.
    pub size: usize,
}

/// The largest pid Linux hands out (`PID_MAX_LIMIT` on 64-bit kernels, the ceiling of
/// `/proc/sys/kernel/pid_max`).
pub const PID_MAX_LIMIT: u32 = 1 << 22;

/// `pid` as a [`Pid`], or `Errc::Invalid` when no Linux process can have that number (0, or
/// above [`PID_MAX_LIMIT`]). Numbers from handles and callers go through this before any
/// system call: a pid of 2^31 or more would otherwise turn negative, and `-1` means "any
/// process" to `prctl(PR_SET_PTRACER)`.
pub fn checked_pid(pid: u32) -> Result<Pid> {
    if pid == 0 || pid > PID_MAX_LIMIT {
        return Err(Error::invalid(format!(
            "pid {pid} cannot exist (Linux pids are 1 to {PID_MAX_LIMIT})"
        )));
    }
    // In range, so positive as an i32.
    Pid::from_raw(pid as i32).ok_or_else(|| Error::invalid(format!("pid {pid} cannot exist")))
}

/// Largest payload a backend may produce.
pub const MAX_PAYLOAD: usize = 4096;
/// Most descriptors one handle may carry.
pub const MAX_FDS: usize = 8;

/// The identity of the process that first asked for one (its forked children make their own).
static CURRENT: std::sync::OnceLock<ExporterId> = std::sync::OnceLock::new();

/// Who exported a handle: enough to find the process and to notice if its pid was reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExporterId {
    /// Process id.
    pub pid: u32,
    /// Start time of that process (clock ticks since boot, `/proc/PID/stat` field 22).
    pub start_time: u64,
    /// A random number drawn once per process: tells "same process" apart even across pid
    /// namespaces, where two processes may share a pid.
    pub nonce: u64,
}

impl ExporterId {
    /// The identity of the calling process.
    pub fn current() -> ExporterId {
        // A forked child must not inherit its parent's identity: compare pids every time.
        let pid = std::process::id();
        let me = *CURRENT.get_or_init(|| ExporterId::fresh(pid));
        if me.pid == pid {
            me
        } else {
            ExporterId::fresh(pid)
        }
    }

    fn fresh(pid: u32) -> ExporterId {
        let start_time = process_start_time(pid).unwrap_or(0);
        let mut nonce = [0u8; 8];
        // A failure to read randomness only weakens same-process detection across pid
        // namespaces; pid plus start time still identify the process.
        if let Ok(file) = std::fs::File::open("/dev/urandom") {
            use std::io::Read;
            let _ = (&file).read_exact(&mut nonce);
        }
        let nonce = u64::from_le_bytes(nonce) ^ u64::from(pid).rotate_left(32) ^ start_time;
        ExporterId {
            pid,
            start_time,
            nonce,
        }
    }

    /// Whether this identity is the calling process.
    pub fn is_current_process(&self) -> bool {
        // Another nonce is another process: answered without `ExporterId::current`'s getpid
        // (a system call on every IPC open otherwise).
        if let Some(me) = CURRENT.get() {
            if me.nonce != self.nonce {
                return false;
            }
        }
        let me = ExporterId::current();
        me.pid == self.pid && me.nonce == self.nonce && me.start_time == self.start_time
    }

    /// Whether the exporting process still runs (same pid and same start time).
    pub fn is_alive(&self) -> bool {
        if self.is_current_process() {
            return true;
        }
        match process_start_time(self.pid) {
            Some(t) => self.start_time == 0 || t == self.start_time,
            None => false,
        }
    }
}

/// Start time of `pid` in clock ticks since boot, from `/proc/PID/stat`; `None` if there is no
/// such process (or it is a zombie that already exited).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?; // field 3
    if state == "Z" || state == "X" {
        return None;
    }
    // Field 22 is the 20th after the state.
    fields.nth(18)?.parse().ok()
}

/// Where an importer takes an exporter's descriptors from: this very process (`dup`), or the
/// exporting process through a pidfd (`pidfd_getfd`, which needs ptrace permission over it:
/// see [`allow_fd_access_from`]).
///
/// A pidfd names one process for good, even after its pid is reused: once one descriptor
/// taken through it has proven the process is the exporter (the `sycl` layer's export ticket),
/// every later descriptor comes from that same process.
pub enum ExporterFds {
    /// The exporter is this process.
    SameProcess,
    /// Another process, by pidfd.
    Remote {
        /// Its pid, for messages.
        pid: u32,
        /// `pidfd_open` of it (shared: an importer may keep the pidfd of an exporter it has
        /// verified).
        pidfd: std::sync::Arc<OwnedFd>,
    },
}

impl ExporterFds {
    /// Opens the exporter: `Errc::Invalid` when its pid cannot exist or no process has it.
    pub fn open(exporter: &ExporterId, backend: BackendKind) -> Result<ExporterFds> {
        if exporter.is_current_process() {
            return Ok(ExporterFds::SameProcess);
        }
        // No /proc reads here (they cost more than the rest of an open): a dead exporter fails
        // pidfd_open or pidfd_getfd with ESRCH, and a pid reused by another process is caught
        // by the first descriptor the caller checks (the export ticket).
        let pid = checked_pid(exporter.pid)?;
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).map_err(|e| {
            Error::os(
                Errc::Invalid,
                format!("the exporting process {} no longer exists", exporter.pid),
                e,
                backend,
            )
        })?;
        Ok(ExporterFds::Remote {
            pid: exporter.pid,
            pidfd: std::sync::Arc::new(pidfd),
        })
    }

    /// A copy of the exporter's descriptor `fd`. Errors are `Errc::Invalid` when the exporter
    /// is gone or the descriptor is not open there, and `Errc::Runtime` when permission is
    /// denied, with a message naming the fix.
    pub fn take(&self, fd: RawFd, backend: BackendKind) -> Result<OwnedFd> {
        if fd < 0 {
            return Err(Error::invalid(format!(
                "handle names descriptor {fd}, which cannot exist"
            )));
        }
        let (pid, pidfd) = match self {
            ExporterFds::SameProcess => {
                // The number is one of this process's descriptors that an export named; if it
                // was closed since, the dup fails with EBADF, and if it was reused, the copy is
                // of another file, which the caller's checks (ticket, file identity) refuse.
                // SAFETY: only the number is borrowed, for one dup, which leaves its owner as is.
                let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                return rustix::io::fcntl_dupfd_cloexec(borrowed, 0).map_err(|e| {
                    Error::os(
                        Errc::Invalid,
                        format!(
                            "descriptor {fd} of this process is not open (export put or freed?)"
                        ),
                        e,
                        backend,
                    )
                });
            }
            ExporterFds::Remote { pid, pidfd } => (*pid, pidfd),
        };
        rustix::process::pidfd_getfd(pidfd.as_fd(), fd, PidfdGetfdFlags::empty()).map_err(|e| {
            match e {
                rustix::io::Errno::PERM | rustix::io::Errno::ACCESS => Error::os(
                    Errc::Runtime,
                    format!(
                        "no permission to take descriptor {fd} from process {pid} (pidfd_getfd \
                         needs ptrace rights: call sycl::ipc::allow_fd_access_from in the \
                         exporter, or send the handle through sycl::ipc::transport)"
                    ),
                    e,
                    backend,
                ),
                rustix::io::Errno::BADF => Error::os(
                    Errc::Invalid,
                    format!(
                        "descriptor {fd} is not open in process {pid} (export put or object \
                         freed?)"
                    ),
                    e,
                    backend,
                ),
                rustix::io::Errno::SRCH => Error::os(
                    Errc::Invalid,
                    format!("the exporting process {pid} no longer exists"),
                    e,
                    backend,
                ),
                other => Error::os(Errc::Runtime, "pidfd_getfd", other, backend),
            }
        })
    }
}

/// One descriptor of an exporter: [`ExporterFds::open`] then [`ExporterFds::take`] (for tools
/// and tests that take a single descriptor; an import that takes several opens the exporter
/// once).
pub fn acquire_remote_fd(
    exporter: &ExporterId,
    fd: RawFd,
    backend: BackendKind,
) -> Result<OwnedFd> {
    ExporterFds::open(exporter, backend)?.take(fd, backend)
}

/// Which processes may take descriptors from this one with `pidfd_getfd` under the Yama LSM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdAccess {
    /// Only the process with this pid (and its ancestors, as Yama always allows).
    Process(u32),
    /// Any process of the same user.
    AnyProcess,
    /// Back to the default (ancestors only under Yama mode 1).
    Default,
}

/// Wraps `prctl(PR_SET_PTRACER, ..)`: lets the named process use `pidfd_getfd` on this one.
/// Without Yama (no `/proc/sys/kernel/yama`) this changes nothing and succeeds.
pub fn allow_fd_access_from(access: FdAccess) -> Result<()> {
    use rustix::process::PTracer;
    let tracer = match access {
        FdAccess::Process(pid) => PTracer::ProcessID(checked_pid(pid)?),
        FdAccess::AnyProcess => PTracer::Any,
        FdAccess::Default => PTracer::None,
    };
    match rustix::process::set_ptracer(tracer) {
        Ok(()) => Ok(()),
        // EINVAL: the kernel has no Yama, so there is nothing to relax.
        Err(rustix::io::Errno::INVAL) => Ok(()),
        Err(e) => Err(Error::os(
            Errc::Runtime,
            "prctl(PR_SET_PTRACER)",
            e,
            BackendKind::NativeCpu,
        )),
    }
}

/// What a backend receives to import an object.
#[derive(Debug)]
pub struct IpcImport<'a> {
    /// The payload its own export produced, already length- and checksum-checked by `sycl`.
    pub payload: &'a [u8],
    /// The descriptors named by the export, now owned by this process (same order).
    pub fds: Vec<OwnedFd>,
    /// Who exported it.
    pub exporter: ExporterId,
    /// True when the exporter is this very process.
    pub same_process: bool,
}

/// A little-endian reader over payload bytes that never panics: every read is bounds-checked
/// and a short payload becomes `Errc::Invalid`.
pub struct PayloadReader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> PayloadReader<'a> {
    /// Reads `bytes`, naming `what` in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        PayloadReader { bytes, what }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(Error::invalid(format!(
                "{} payload is truncated",
                self.what
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    /// The next `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// The next `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// Fails unless every byte was read.
    pub fn finish(self) -> Result<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{} payload has {} trailing bytes",
                self.what,
                self.bytes.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_process_is_alive_and_itself() {
        let me = ExporterId::current();
        assert!(me.is_current_process());
        assert!(me.is_alive());
        assert!(me.start_time > 0);
        let other = ExporterId {
            nonce: me.nonce ^ 1,
            ..me
        };
        assert!(!other.is_current_process());
    }

    #[test]
    fn dead_pid_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = process_start_time(pid);
        child.wait().unwrap();
        let id = ExporterId {
            pid,
            start_time: start.unwrap_or(1),
            nonce: 7,
        };
        assert!(!id.is_alive());
        let err = ExporterFds::open(&id, BackendKind::NativeCpu)
            .and_then(|x| x.take(3, BackendKind::NativeCpu))
            .map(drop)
            .unwrap_err();
        assert_eq!(err.code(), Errc::Invalid);
    }

    #[test]
    fn impossible_pids_are_refused_before_any_system_call() {
        for pid in [0, PID_MAX_LIMIT + 1, 1 << 31, u32::MAX] {
            assert_eq!(checked_pid(pid).unwrap_err().code(), Errc::Invalid, "{pid}");
            // u32::MAX would be -1 as an i32: PR_SET_PTRACER_ANY. It must be refused.
            let err = allow_fd_access_from(FdAccess::Process(pid)).unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{pid}");
            let id = ExporterId {
                pid,
                start_time: 1,
                nonce: 2,
            };
            let err = ExporterFds::open(&id, BackendKind::NativeCpu)
                .map(drop)
                .unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{pid}");
        }
        assert!(checked_pid(1).is_ok());
        assert!(checked_pid(PID_MAX_LIMIT).is_ok());
    }

    #[test]
    fn payload_reader_rejects_short_input() {
        let mut r = PayloadReader::new(&[1, 2, 3], "test");
        assert_eq!(r.take(2).unwrap(), &[1, 2]);
        assert_eq!(r.u32().unwrap_err().code(), Errc::Invalid);
    }
}
