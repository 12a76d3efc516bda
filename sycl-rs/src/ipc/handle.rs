//! The wire format of IPC handles: a fixed, checksummed header followed by the backend payload.
//! `spec/ipc-handle-format.md` documents it byte by byte.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use sycl_backend::ipc::{ExporterId, IpcObjectKind, MAX_FDS, MAX_PAYLOAD};
use sycl_backend::BackendKind;

use super::export::ExportRef;
use crate::{Errc, Error, Result};

/// "SYCLRSIP".
pub(crate) const MAGIC: [u8; 8] = *b"SYCLRSIP";
/// The only version this build reads and writes.
pub(crate) const VERSION: u16 = 2;
/// Bytes before the payload.
pub(crate) const HEADER_LEN: usize = 116;
const CHECKSUM_AT: usize = 112;
/// Flag bit: the last descriptor is the export ticket (set exactly when there are descriptors).
const FLAG_TICKET: u8 = 1;

/// The decoded, validated header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) backend: BackendKind,
    pub(crate) kind: IpcObjectKind,
    pub(crate) exporter: ExporterId,
    pub(crate) device_identity: [u8; 16],
    pub(crate) object_size: u64,
    pub(crate) payload_len: usize,
    /// The backend's descriptors, then the export ticket (when there are any).
    pub(crate) fds: Vec<RawFd>,
    /// Names this export among the exporter's (`ipc::export`); never 0.
    pub(crate) export_nonce: u64,
}

fn invalid(why: impl std::fmt::Display) -> Error {
    Error::new(Errc::Invalid, format!("not a valid IPC handle: {why}"))
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn checksum(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[..CHECKSUM_AT]);
    h.update(&bytes[HEADER_LEN..]);
    h.finalize()
}

impl Header {
    /// Decodes and checks `bytes` (a whole handle). Never panics: every mistake is
    /// `Errc::Invalid` with a message saying which check failed.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Header> {
        if bytes.len() < HEADER_LEN {
            return Err(invalid(format!(
                "{} bytes is shorter than the {HEADER_LEN}-byte header",
                bytes.len()
            )));
        }
        if bytes[0..8] != MAGIC {
            return Err(invalid(
                "bad magic (these bytes were not made by sycl-rs ipc get)",
            ));
        }
        let version = le_u16(bytes, 8);
        if version != VERSION {
            return Err(invalid(format!(
                "unknown format version {version} (this build reads version {VERSION})"
            )));
        }
        let payload_len = le_u32(bytes, 64) as usize;
        if payload_len > MAX_PAYLOAD || bytes.len() != HEADER_LEN + payload_len {
            return Err(invalid(format!(
                "wrong length: {} bytes, but the header announces {HEADER_LEN} + {payload_len}",
                bytes.len()
            )));
        }
        let stored = le_u32(bytes, CHECKSUM_AT);
        if stored != checksum(bytes) {
            return Err(invalid(
                "bad checksum (the bytes were corrupted or truncated in transit)",
            ));
        }
        let backend = BackendKind::from_wire_id(bytes[10])
            .ok_or_else(|| invalid(format!("unknown backend id {}", bytes[10])))?;
        let kind = IpcObjectKind::from_wire_id(bytes[11])
            .ok_or_else(|| invalid(format!("unknown object kind {}", bytes[11])))?;
        if le_u32(bytes, 12) != HEADER_LEN as u32 {
            return Err(invalid("header length field does not match this version"));
        }
        let pid = le_u32(bytes, 16);
        if pid == 0 || pid > sycl_backend::ipc::PID_MAX_LIMIT {
            return Err(invalid(format!("exporter pid {pid} cannot exist")));
        }
        let fd_count = bytes[68] as usize;
        if fd_count > MAX_FDS {
            return Err(invalid(format!(
                "{fd_count} descriptors (at most {MAX_FDS})"
            )));
        }
        let flags = bytes[69];
        let want_flags = if fd_count > 0 { FLAG_TICKET } else { 0 };
        if flags != want_flags {
            return Err(invalid(format!(
                "flags {flags:#x} for {fd_count} descriptors (a handle with descriptors names its \
                 export ticket last, one without has none)"
            )));
        }
        let export_nonce = le_u64(bytes, 104);
        if export_nonce == 0 {
            return Err(invalid("export nonce 0"));
        }
        let fds: Vec<RawFd> = (0..fd_count)
            .map(|i| le_u32(bytes, 72 + 4 * i) as i32)
            .collect();
        if fds.iter().any(|&fd| fd < 0) {
            return Err(invalid("negative descriptor number"));
        }
        Ok(Header {
            backend,
            kind,
            exporter: ExporterId {
                pid,
                start_time: le_u64(bytes, 24),
                nonce: le_u64(bytes, 32),
            },
            device_identity: bytes[40..56].try_into().expect("16 bytes"),
            object_size: le_u64(bytes, 56),
            payload_len,
            fds,
            export_nonce,
        })
    }

    /// Encodes a header for `payload` and returns the whole handle.
    pub(crate) fn encode(&self, payload: &[u8]) -> Result<Vec<u8>> {
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "backend payload of {} bytes exceeds {MAX_PAYLOAD}",
                    payload.len()
                ),
            ));
        }
        if self.fds.len() > MAX_FDS {
            return Err(Error::new(
                Errc::Runtime,
                format!(
                    "backend exported {} descriptors (at most {MAX_FDS})",
                    self.fds.len()
                ),
            ));
        }
        let mut b = vec![0u8; HEADER_LEN + payload.len()];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10] = self.backend.wire_id();
        b[11] = self.kind.wire_id();
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.exporter.pid.to_le_bytes());
        b[24..32].copy_from_slice(&self.exporter.start_time.to_le_bytes());
        b[32..40].copy_from_slice(&self.exporter.nonce.to_le_bytes());
        b[40..56].copy_from_slice(&self.device_identity);
        b[56..64].copy_from_slice(&self.object_size.to_le_bytes());
        b[64..68].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b[68] = self.fds.len() as u8;
        b[69] = if self.fds.is_empty() { 0 } else { FLAG_TICKET };
        for (i, fd) in self.fds.iter().enumerate() {
            b[72 + 4 * i..76 + 4 * i].copy_from_slice(&fd.to_le_bytes());
        }
        b[104..112].copy_from_slice(&self.export_nonce.to_le_bytes());
        b[HEADER_LEN..].copy_from_slice(payload);
        let sum = checksum(&b);
        b[CHECKSUM_AT..HEADER_LEN].copy_from_slice(&sum.to_le_bytes());
        Ok(b)
    }
}

/// An IPC handle (`ipc::handle`): owned bytes that name memory, physical memory or an event of
/// this process, to be sent to another process on this node and opened there.
///
/// Bytes received from elsewhere become a handle again with [`Handle::from_bytes`], which
/// checks them (magic, version, length, checksum). A handle received through
/// [`crate::ipc::transport::Channel`] also carries the exporter's file descriptors, so opening
/// it needs no ptrace permission.
pub struct Handle {
    bytes: Vec<u8>,
    pub(crate) header: Header,
    /// Set on the exporter's side: the export `get` made or counted, for `put` and sending.
    pub(crate) origin: Option<ExportRef>,
    /// Descriptors received with the handle (SCM_RIGHTS), the ticket last.
    pub(crate) fds: Vec<OwnedFd>,
}

impl Handle {
    pub(crate) fn exported(bytes: Vec<u8>, header: Header, origin: ExportRef) -> Handle {
        Handle {
            bytes,
            header,
            origin: Some(origin),
            fds: Vec::new(),
        }
    }

    /// Checks received bytes and makes a handle of them. Errors are `Errc::Invalid` saying
    /// which check failed.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<Handle> {
        let bytes = bytes.into();
        let header = Header::decode(&bytes)?;
        Ok(Handle {
            bytes,
            header,
            origin: None,
            fds: Vec::new(),
        })
    }

    pub(crate) fn with_fds(mut self, fds: Vec<OwnedFd>) -> Result<Handle> {
        if fds.len() != self.header.fds.len() {
            return Err(invalid(format!(
                "{} descriptors arrived with a handle that names {}",
                fds.len(),
                self.header.fds.len()
            )));
        }
        self.fds = fds;
        Ok(self)
    }

    /// The bytes (`data_view()`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A copy of the bytes (`data()`).
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    /// Which backend exported it.
    pub fn backend(&self) -> BackendKind {
        self.header.backend
    }

    /// Memory, physical memory or event.
    pub fn kind(&self) -> IpcObjectKind {
        self.header.kind
    }

    /// Process id of the exporter.
    pub fn exporter_pid(&self) -> u32 {
        self.header.exporter.pid
    }

    /// Bytes of memory the handle names (from the exported address to the end of its
    /// allocation; the physical memory's size; 0 for events).
    pub fn object_size(&self) -> u64 {
        self.header.object_size
    }

    /// Whether descriptors came with the handle (so no `pidfd_getfd` is needed).
    pub fn carries_descriptors(&self) -> bool {
        !self.fds.is_empty()
    }

    /// How many descriptors travel with this handle (0 for handles that need none, such as
    /// CUDA's).
    pub fn descriptor_count(&self) -> usize {
        self.header.fds.len()
    }

    /// Duplicates the descriptors that travel with this handle, in order, for a transport
    /// other than [`crate::ipc::transport::Channel`] (e.g. Python's `multiprocessing`, which
    /// passes descriptors itself). The receiver rebuilds the handle with
    /// [`Handle::from_bytes_with_descriptors`].
    ///
    /// Errors: as [`crate::ipc::transport::Channel::send_handle`] (`Errc::Invalid` for an export
    /// that was put, or for a handle made from bytes alone).
    pub fn duplicate_descriptors(&self) -> Result<Vec<OwnedFd>> {
        self.with_fds_for_sending(|fds| {
            fds.iter()
                .map(|fd| {
                    fd.try_clone_to_owned()
                        .map_err(|e| Error::new(Errc::Runtime, format!("dup: {e}")))
                })
                .collect()
        })
    }

    /// Checks received bytes, as [`Handle::from_bytes`], and attaches the descriptors that
    /// arrived with them (in the order [`Handle::duplicate_descriptors`] gave). Nothing about
    /// the descriptors is believed: opening checks them as it checks those a channel delivers.
    ///
    /// Errors: `Errc::Invalid` for bad bytes or a descriptor count the handle does not name.
    pub fn from_bytes_with_descriptors(
        bytes: impl Into<Vec<u8>>,
        fds: Vec<OwnedFd>,
    ) -> Result<Handle> {
        Handle::from_bytes(bytes)?.with_fds(fds)
    }

    pub(crate) fn payload(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..]
    }

    /// Runs `f` with the descriptors to send with this handle: the ones it carries, or, for
    /// the handle `get` returned, the export's own (while the export is live).
    pub(crate) fn with_fds_for_sending<R>(
        &self,
        f: impl FnOnce(&[BorrowedFd<'_>]) -> Result<R>,
    ) -> Result<R> {
        if !self.fds.is_empty() {
            let fds: Vec<BorrowedFd<'_>> = self.fds.iter().map(AsFd::as_fd).collect();
            return f(&fds);
        }
        if self.header.fds.is_empty() {
            return f(&[]);
        }
        match &self.origin {
            Some(origin) => origin.with_fds(f),
            None => Err(Error::new(
                Errc::Invalid,
                "this handle was made from bytes, without its descriptors: send the handle that \
                 ipc get returned, or one received through a channel",
            )),
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("backend", &self.header.backend)
            .field("kind", &self.header.kind)
            .field("exporter_pid", &self.header.exporter.pid)
            .field("object_size", &self.header.object_size)
            .field("len", &self.bytes.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        Header {
            backend: BackendKind::NativeCpu,
            kind: IpcObjectKind::Memory,
            exporter: ExporterId::current(),
            device_identity: [7; 16],
            object_size: 4096,
            payload_len: 5,
            fds: vec![3, 9],
            export_nonce: 77,
        }
        .encode(b"hello")
        .unwrap()
    }

    #[test]
    fn round_trips() {
        let b = sample();
        let h = Header::decode(&b).unwrap();
        assert_eq!(h.fds, vec![3, 9]);
        assert_eq!(h.object_size, 4096);
        assert_eq!(&b[HEADER_LEN..], b"hello");
    }

    #[test]
    fn each_check_names_itself() {
        let b = sample();
        let msg = |b: &[u8]| Header::decode(b).unwrap_err().message().to_string();
        assert!(msg(&b[..50]).contains("shorter"));
        let mut m = b.clone();
        m[0] ^= 1;
        assert!(msg(&m).contains("magic"));
        let mut v = b.clone();
        v[8] = 9;
        assert!(msg(&v).contains("version"));
        assert!(msg(&b[..b.len() - 1]).contains("wrong length"));
        let mut c = b.clone();
        *c.last_mut().unwrap() ^= 0x40;
        assert!(msg(&c).contains("checksum"));
    }

    #[test]
    fn impossible_fields_are_refused_not_panicked_on() {
        // A forger recomputes the checksum; the decoder still refuses what cannot be.
        let forge = |edit: &dyn Fn(&mut Header)| {
            let mut h = Header::decode(&sample()).unwrap();
            edit(&mut h);
            Header::decode(&h.encode(b"hello").unwrap())
        };
        for pid in [
            0u32,
            1 << 31,
            u32::MAX,
            sycl_backend::ipc::PID_MAX_LIMIT + 1,
        ] {
            let err = forge(&|h| h.exporter.pid = pid).unwrap_err();
            assert!(err.message().contains("cannot exist"), "{pid}: {err}");
        }
        assert!(forge(&|h| h.export_nonce = 0).is_err());
        // Descriptors without the ticket flag, or the flag without descriptors.
        let mut b = sample();
        b[69] = 0;
        let sum = checksum(&b);
        b[CHECKSUM_AT..HEADER_LEN].copy_from_slice(&sum.to_le_bytes());
        assert!(Header::decode(&b).unwrap_err().message().contains("flags"));
        assert!(forge(&|h| h.fds.clear()).is_ok());
    }
}
