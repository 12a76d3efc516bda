//! Structure-aware fuzzing of IPC handle opens on the native CPU device.
//!
//! Once per process, the fixture exports real objects of this very process: device USM (whole
//! and at an interior offset), physical memory and an IPC event, plus a few odd descriptors
//! (unsealed, partly sealed, too small and write-sealed memfds, a fake event page, a regular
//! file, a pipe, a socket, a directory). Each input picks one of the valid handles, edits header
//! fields and payload bytes (the native payloads' fields by name), recomputes the CRC so the
//! bytes pass `Handle::from_bytes`, and opens the result as memory, physical memory and event.
//! Whatever opens is touched at its first and last byte (views and queue copies; values are
//! written back unchanged, so the fixture stays the same from one input to the next).
//!
//! Because the exporter is this process, forged descriptor numbers are taken with `dup` (or,
//! when the exporter identity is edited but the pid is still ours, with `pidfd_getfd` on
//! ourselves): the export ticket, inode/device, size and seal checks see real descriptors.
//!
//! Any `Ok` or `Err` is fine; crashes, hangs, panics, sanitizer reports and descriptors that
//! leak from one input to the next are bugs.
#![no_main]

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sycl::ipc;
use sycl::virtual_mem::VirtualRange;

// ---- Handle header, format version 2 (all little-endian). ----
const HEADER_LEN: usize = 116;
const VERSION_AT: usize = 8;
const BACKEND_AT: usize = 10;
const KIND_AT: usize = 11;
const HLEN_AT: usize = 12;
const PID_AT: usize = 16;
const START_AT: usize = 24;
const XNONCE_AT: usize = 32;
const DEVID_AT: usize = 40;
const OSIZE_AT: usize = 56;
const PLEN_AT: usize = 64;
const FDCOUNT_AT: usize = 68;
const FLAGS_AT: usize = 69;
const FDS_AT: usize = 72;
const ENONCE_AT: usize = 104;
const CRC_AT: usize = 112;
const MAX_PAYLOAD: usize = 4096;
/// `PID_MAX_LIMIT` of 64-bit Linux: the largest pid a handle may name.
const PID_MAX_LIMIT: u32 = 1 << 22;

// ---- native_cpu payloads ----
const TAG_MEM: &[u8; 4] = b"NCM1";
const TAG_PHYS: &[u8; 4] = b"NCP1";
const TAG_EVENT: &[u8; 4] = b"NCE1";

/// The native CPU backend's shared event page (`EventState`, `repr(C)`): (offset, width).
const EVENT_FIELDS: [(usize, usize); 12] = [
    (0, 4),  // magic
    (4, 4),  // pending
    (8, 4),  // waiters
    (12, 4), // phase
    (16, 4), // timestamps
    (20, 4), // signaller_pid
    (24, 8), // signaller_start
    (32, 8), // submit_ns
    (40, 8), // start_ns
    (48, 8), // end_ns
    (56, 4), // signals
    (60, 4), // signal_waiters
];
const EVENT_MAGIC: u32 = 0x5359_4556;

// ---------------------------------------------------------------------------------------------
// The fixture

/// A descriptor of this process the fuzzer may name, with what `fstat` says of it.
#[derive(Debug)]
struct PoolFile {
    fd: RawFd,
    ino: u64,
    dev: u64,
    size: u64,
}

struct Fixture {
    dev: sycl::Device,
    ctx: sycl::Context,
    q: sycl::Queue,
    /// Valid handles of live exports of this process.
    handles: Vec<Vec<u8>>,
    /// Every descriptor the handles name, then the odd ones.
    pool: Vec<PoolFile>,
    /// A correctly sealed memfd whose page the fuzzer writes event state into.
    fake_event: File,
    /// Open descriptors once the fixture was made.
    baseline_fds: usize,
    // Kept alive for the whole run: the exported objects, their neighbours, the odd files.
    _usm: Vec<sycl::Usm<u8>>,
    _phys: sycl::PhysicalMem,
    _event: sycl::Event,
    _handles: Vec<ipc::Handle>,
    _files: Vec<OwnedFd>,
}

fn open_fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn pool_file(fd: RawFd) -> Option<PoolFile> {
    let m = std::fs::metadata(format!("/proc/self/fd/{fd}")).ok()?;
    Some(PoolFile {
        fd,
        ino: m.ino(),
        dev: m.dev(),
        size: m.size(),
    })
}

/// A memfd of `size` bytes with `seals` (`None`: made without `MFD_ALLOW_SEALING`).
fn memfd(name: &str, size: u64, seals: Option<libc::c_int>) -> OwnedFd {
    let cname = std::ffi::CString::new(name).unwrap();
    let flags = libc::MFD_CLOEXEC
        | if seals.is_some() {
            libc::MFD_ALLOW_SEALING
        } else {
            0
        };
    // SAFETY: a valid C string; the result is checked.
    let raw = unsafe { libc::memfd_create(cname.as_ptr(), flags) };
    assert!(
        raw >= 0,
        "memfd_create: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `raw` is a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let file = File::from(fd);
    file.set_len(size).unwrap();
    let fd = OwnedFd::from(file);
    if let Some(seals) = seals {
        // SAFETY: fcntl on a descriptor we own.
        let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) };
        assert!(r == 0, "F_ADD_SEALS: {}", std::io::Error::last_os_error());
    }
    fd
}

/// The seals of the backend's memfds.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

fn header_fds(bytes: &[u8]) -> Vec<RawFd> {
    let n = bytes[FDCOUNT_AT] as usize;
    (0..n.min(8))
        .map(|i| {
            i32::from_le_bytes(
                bytes[FDS_AT + 4 * i..FDS_AT + 4 * i + 4]
                    .try_into()
                    .unwrap(),
            )
        })
        .collect()
}

impl Fixture {
    fn new() -> Fixture {
        // The native CPU device, whatever ONEAPI_DEVICE_SELECTOR says.
        let dev = sycl::Device::all()
            .into_iter()
            .find(|d| d.backend() == sycl::BackendKind::NativeCpu)
            .expect("the native CPU device always exists");
        let q = sycl::Queue::in_order(&dev).expect("queue");
        let ctx = q.context().clone();
        let page = 4096usize;

        // Device USM between two neighbours, so a forged size would reach one of them.
        let before = sycl::malloc_device::<u8>(page, &q).unwrap();
        let buf = sycl::malloc_device::<u8>(3 * page + 100, &q).unwrap();
        let after = sycl::malloc_device::<u8>(2 * page, &q).unwrap();
        for (i, b) in [&before, &buf, &after].into_iter().enumerate() {
            let pattern: Vec<u8> = (0..b.len()).map(|j| (j * 7 + 3 + 50 * i) as u8).collect();
            q.write(b, &pattern).unwrap();
        }
        let mut handles = Vec::new();
        let h_whole = ipc::memory::get(&buf).unwrap();
        // Unaligned for anything wider than a byte.
        let h_inner = ipc::memory::get(&buf.range(page + 13..).unwrap()).unwrap();
        let h_after = ipc::memory::get(&after).unwrap();

        let gran =
            sycl::virtual_mem::get_mem_granularity(&dev, &ctx, sycl::GranularityMode::Recommended)
                .unwrap();
        let phys = sycl::PhysicalMem::new(
            &dev,
            &ctx,
            2 * gran,
            sycl::PhysicalMemProperties { enable_ipc: true },
        )
        .unwrap();
        let h_phys = ipc::physical_memory::get(&phys).unwrap();

        let event = sycl::Event::new(
            &ctx,
            sycl::EventProperties {
                enable_ipc: true,
                enable_profiling: false,
            },
        )
        .unwrap();
        let h_event = ipc::event::get(&event).unwrap();

        let kept = vec![h_whole, h_inner, h_phys, h_event, h_after];
        for h in &kept {
            handles.push(h.to_vec());
        }

        let mut pool = Vec::new();
        for h in &handles {
            for fd in header_fds(h) {
                if !pool.iter().any(|p: &PoolFile| p.fd == fd) {
                    pool.extend(pool_file(fd));
                }
            }
        }

        // Odd descriptors: each passes some of the checks an import makes, not all.
        let mut files = vec![
            memfd("fuzz-unsealed", 4 * page as u64, None),
            memfd(
                "fuzz-shrink-only",
                4 * page as u64,
                Some(libc::F_SEAL_SHRINK),
            ),
            memfd("fuzz-tiny", 100, Some(SEALS)),
            memfd(
                "fuzz-write-sealed",
                4 * page as u64,
                Some(SEALS | libc::F_SEAL_WRITE),
            ),
            memfd(
                "fuzz-future-write",
                4 * page as u64,
                Some(SEALS | libc::F_SEAL_FUTURE_WRITE),
            ),
            memfd("fuzz-sealed-ok", 4 * page as u64, Some(SEALS)),
        ];
        let fake_event_fd = memfd("fuzz-fake-event", page as u64, Some(SEALS));
        let fake_event = File::from(fake_event_fd.try_clone().unwrap());
        files.push(fake_event_fd);
        let regular = tmp_file(4 * page as u64);
        files.push(OwnedFd::from(regular));
        files.push(OwnedFd::from(File::open("/dev/null").unwrap()));
        files.push(OwnedFd::from(File::open("/tmp").unwrap()));
        let (s1, s2) = UnixStream::pair().unwrap();
        files.push(OwnedFd::from(s1));
        files.push(OwnedFd::from(s2));
        let mut p = [0 as libc::c_int; 2];
        // SAFETY: `p` has room for two descriptors; the result is checked.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        for raw in p {
            // SAFETY: just opened by pipe2, owned here.
            files.push(unsafe { OwnedFd::from_raw_fd(raw) });
        }
        for f in &files {
            pool.extend(pool_file(f.as_raw_fd()));
        }

        let mut fixture = Fixture {
            dev,
            ctx,
            q,
            handles,
            pool,
            fake_event,
            baseline_fds: 0,
            _usm: vec![before, buf, after],
            _phys: phys,
            _event: event,
            _handles: kept,
            _files: files,
        };
        fixture.reset_fake_event();
        fixture.baseline_fds = open_fd_count();
        fixture
    }

    /// An event page in the complete state, every input starting from it.
    fn reset_fake_event(&self) {
        let mut page = [0u8; 64];
        page[..4].copy_from_slice(&EVENT_MAGIC.to_le_bytes());
        self.fake_event.write_all_at(&page, 0).unwrap();
    }

    fn pool(&self, i: u8) -> &PoolFile {
        &self.pool[i as usize % self.pool.len()]
    }

    fn handle(&self, i: u8) -> &[u8] {
        &self.handles[i as usize % self.handles.len()]
    }
}

/// An unlinked regular file of `size` bytes.
fn tmp_file(size: u64) -> File {
    let path = std::env::temp_dir().join(format!("sycl-rs-fuzz-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let _ = std::fs::remove_file(&path);
    f.set_len(size).unwrap();
    f
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

// ---------------------------------------------------------------------------------------------
// The mutation

#[derive(Arbitrary, Debug)]
struct Mutation {
    /// Which valid handle to start from.
    base: u8,
    /// Rewrite the payload length to match the bytes after the edits (else it stays as edited).
    fix_payload_len: bool,
    /// Also open memory as `u64` (alignment and length checks for wider elements).
    wide: bool,
    edits: Vec<Edit>,
}

#[derive(Arbitrary, Debug)]
enum Edit {
    Version(u16),
    Backend(BackendChoice),
    Kind(KindChoice),
    HeaderLen(u32),
    Pid(PidChoice),
    StartTime(U64Edit),
    ExporterNonce(U64Edit),
    DeviceIdentity(IdentityEdit),
    ObjectSize(SizeEdit),
    PayloadLen(LenEdit),
    FdCount(u8),
    Flags(u8),
    Fd {
        slot: u8,
        fd: FdChoice,
    },
    ExportNonce(NonceEdit),
    /// Copies a part of another valid handle over this one.
    Transplant {
        from: u8,
        part: Part,
    },
    Payload(PayloadEdit),
    /// Overwrites (or inserts) bytes in the payload.
    Splice {
        at: u16,
        bytes: Vec<u8>,
        insert: bool,
    },
    /// Cuts the handle to `n % (len + 1)` bytes (header included).
    Truncate(u16),
    Extend(Vec<u8>),
    HeaderByte {
        at: u8,
        value: u8,
    },
    /// Points the handle at pool file `n` consistently: its inode and device into the payload,
    /// its descriptor into the backend's slot (the one before the ticket), so the import gets
    /// past the identity check and meets the size, seal and content checks.
    Retarget(u8),
    /// Writes a field of the fake event page (a sealed memfd other than the real event's).
    FakeEvent {
        field: u8,
        value: u64,
    },
}

#[derive(Arbitrary, Debug)]
enum BackendChoice {
    LevelZero,
    Cuda,
    OpenCl,
    NativeCpu,
    Raw(u8),
}

#[derive(Arbitrary, Debug)]
enum KindChoice {
    Memory,
    PhysicalMemory,
    Event,
    Raw(u8),
}

#[derive(Arbitrary, Debug)]
enum PidChoice {
    Own,
    Zero,
    One,
    PidMaxLimit,
    AbovePidMaxLimit,
    Bit31,
    Max,
    Near(i8),
    Raw(u32),
}

#[derive(Arbitrary, Debug)]
enum U64Edit {
    Zero,
    Max,
    FlipBit(u8),
    Add(i16),
    Raw(u64),
}

#[derive(Arbitrary, Debug)]
enum IdentityEdit {
    Zero,
    FlipByte(u8),
    Raw([u8; 16]),
}

#[derive(Arbitrary, Debug)]
enum SizeEdit {
    Delta(i16),
    Double,
    Half,
    Pages(u8),
    /// The size of a pool file.
    PoolSize(u8),
    Zero,
    One,
    OneTiB,
    Huge,
    Max,
    Raw(u64),
}

#[derive(Arbitrary, Debug)]
enum LenEdit {
    Delta(i8),
    MaxPayload,
    AboveMaxPayload,
    Max,
    Raw(u32),
}

#[derive(Arbitrary, Debug)]
enum FdChoice {
    MinusOne,
    /// 0..64: stdio, libFuzzer's files, the fixture's.
    Small(u8),
    /// A descriptor of the pool (the handles' own and the odd ones).
    Pool(u8),
    Raw(i32),
}

#[derive(Arbitrary, Debug)]
enum NonceEdit {
    Zero,
    FlipBit(u8),
    /// The export nonce of another valid handle.
    Of(u8),
    Raw(u64),
}

#[derive(Arbitrary, Debug)]
enum Part {
    /// Descriptor count, flags and numbers.
    Descriptors,
    ExportNonce,
    /// Ticket: the last descriptor and the export nonce.
    Ticket,
    Exporter,
    ObjectSize,
    Kind,
    DeviceIdentity,
    Payload,
}

#[derive(Arbitrary, Debug)]
enum PayloadField {
    Tag,
    Ino,
    Dev,
    Size,
    Offset,
    Fd,
}

#[derive(Arbitrary, Debug)]
enum PayloadEdit {
    Tag(TagChoice),
    /// Inode and device of a pool file (so the identity check passes for another file).
    FileOf(u8),
    Ino(U64Edit),
    Dev(U64Edit),
    Size(SizeEdit),
    Offset(SizeEdit),
    Fd(FdChoice),
    /// Moves to the layout of another kind, keeping the fields both have.
    Relayout(TagChoice),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum TagChoice {
    Memory,
    Physical,
    Event,
    Raw(u32),
}

// ---------------------------------------------------------------------------------------------
// Applying it

fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
/// Writes `v` at `at` when it fits (header fields of a truncated handle are left alone).
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(dst) = b.get_mut(at..at + v.len()) {
        dst.copy_from_slice(v);
    }
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    put(b, at, &v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    put(b, at, &v.to_le_bytes());
}

impl U64Edit {
    fn apply(&self, cur: u64) -> u64 {
        match *self {
            U64Edit::Zero => 0,
            U64Edit::Max => u64::MAX,
            U64Edit::FlipBit(b) => cur ^ (1 << (b % 64)),
            U64Edit::Add(d) => cur.wrapping_add(d as i64 as u64),
            U64Edit::Raw(v) => v,
        }
    }
}

impl SizeEdit {
    fn apply(&self, cur: u64, fx: &Fixture) -> u64 {
        match *self {
            SizeEdit::Delta(d) => cur.wrapping_add(d as i64 as u64),
            SizeEdit::Double => cur.wrapping_mul(2),
            SizeEdit::Half => cur / 2,
            SizeEdit::Pages(n) => n as u64 * 4096,
            SizeEdit::PoolSize(i) => fx.pool(i).size,
            SizeEdit::Zero => 0,
            SizeEdit::One => 1,
            SizeEdit::OneTiB => 1 << 40,
            SizeEdit::Huge => 1 << 63,
            SizeEdit::Max => u64::MAX,
            SizeEdit::Raw(v) => v,
        }
    }
}

impl FdChoice {
    fn resolve(&self, fx: &Fixture) -> i32 {
        match *self {
            FdChoice::MinusOne => -1,
            FdChoice::Small(n) => (n % 64) as i32,
            FdChoice::Pool(i) => fx.pool(i).fd,
            FdChoice::Raw(v) => v,
        }
    }
}

impl TagChoice {
    fn bytes(self) -> [u8; 4] {
        match self {
            TagChoice::Memory => *TAG_MEM,
            TagChoice::Physical => *TAG_PHYS,
            TagChoice::Event => *TAG_EVENT,
            TagChoice::Raw(v) => v.to_le_bytes(),
        }
    }
}

/// (offset in the payload, width) of `field` in the layout the payload's tag names.
fn field_at(payload: &[u8], field: &PayloadField) -> Option<(usize, usize)> {
    let tag = payload.get(..4).unwrap_or(&[]);
    let (size, offset, fd) = if tag == TAG_PHYS {
        (Some(20), None, 28)
    } else if tag == TAG_EVENT {
        (None, None, 20)
    } else {
        (Some(20), Some(28), 36)
    };
    Some(match field {
        PayloadField::Tag => (0, 4),
        PayloadField::Ino => (4, 8),
        PayloadField::Dev => (12, 8),
        PayloadField::Size => (size?, 8),
        PayloadField::Offset => (offset?, 8),
        PayloadField::Fd => (fd, 4),
    })
}

/// Reads a payload field (0 where the payload is too short).
fn payload_get(b: &[u8], field: &PayloadField) -> u64 {
    let p = b.get(HEADER_LEN..).unwrap_or(&[]);
    match field_at(p, field) {
        Some((at, 8)) => get_u64(p, at).unwrap_or(0),
        Some((at, _)) => get_u32(p, at).map_or(0, u64::from),
        None => 0,
    }
}

/// Writes a payload field, growing the payload to hold it.
fn payload_set(b: &mut Vec<u8>, field: &PayloadField, v: u64) {
    if b.len() < HEADER_LEN {
        return;
    }
    let Some((at, width)) = field_at(&b[HEADER_LEN..], field) else {
        return;
    };
    let end = HEADER_LEN + at + width;
    if b.len() < end {
        b.resize(end, 0);
    }
    put(b, HEADER_LEN + at, &v.to_le_bytes()[..width]);
}

fn apply(fx: &Fixture, m: &Mutation) -> Vec<u8> {
    let mut b = fx.handle(m.base).to_vec();
    for edit in m.edits.iter().take(32) {
        apply_edit(fx, &mut b, edit);
        b.truncate(HEADER_LEN + MAX_PAYLOAD + 64);
    }
    if b.len() >= HEADER_LEN {
        if m.fix_payload_len {
            let plen = (b.len() - HEADER_LEN) as u32;
            put_u32(&mut b, PLEN_AT, plen);
        }
        // The checksum every edit must pass: CRC-32 of bytes 0..112 and the payload.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&b[..CRC_AT]);
        crc.update(&b[HEADER_LEN..]);
        put_u32(&mut b, CRC_AT, crc.finalize());
    }
    b
}

fn apply_edit(fx: &Fixture, b: &mut Vec<u8>, edit: &Edit) {
    match edit {
        Edit::Version(v) => put(b, VERSION_AT, &v.to_le_bytes()),
        Edit::Backend(c) => {
            let id = match *c {
                BackendChoice::LevelZero => 1,
                BackendChoice::Cuda => 2,
                BackendChoice::OpenCl => 3,
                BackendChoice::NativeCpu => 4,
                BackendChoice::Raw(v) => v,
            };
            put(b, BACKEND_AT, &[id]);
        }
        Edit::Kind(c) => {
            let id = match *c {
                KindChoice::Memory => 1,
                KindChoice::PhysicalMemory => 2,
                KindChoice::Event => 3,
                KindChoice::Raw(v) => v,
            };
            put(b, KIND_AT, &[id]);
        }
        Edit::HeaderLen(v) => put_u32(b, HLEN_AT, *v),
        Edit::Pid(c) => {
            let own = std::process::id();
            let pid = match *c {
                PidChoice::Own => own,
                PidChoice::Zero => 0,
                PidChoice::One => 1,
                PidChoice::PidMaxLimit => PID_MAX_LIMIT,
                PidChoice::AbovePidMaxLimit => PID_MAX_LIMIT + 1,
                PidChoice::Bit31 => 1 << 31,
                PidChoice::Max => u32::MAX,
                PidChoice::Near(d) => own.wrapping_add(d as i32 as u32),
                PidChoice::Raw(v) => v,
            };
            put_u32(b, PID_AT, pid);
        }
        Edit::StartTime(e) => {
            let cur = get_u64(b, START_AT).unwrap_or(0);
            put_u64(b, START_AT, e.apply(cur));
        }
        Edit::ExporterNonce(e) => {
            let cur = get_u64(b, XNONCE_AT).unwrap_or(0);
            put_u64(b, XNONCE_AT, e.apply(cur));
        }
        Edit::DeviceIdentity(e) => match e {
            IdentityEdit::Zero => put(b, DEVID_AT, &[0; 16]),
            IdentityEdit::FlipByte(i) => {
                if let Some(x) = b.get_mut(DEVID_AT + (*i as usize % 16)) {
                    *x ^= 0xff;
                }
            }
            IdentityEdit::Raw(v) => put(b, DEVID_AT, v),
        },
        Edit::ObjectSize(e) => {
            let cur = get_u64(b, OSIZE_AT).unwrap_or(0);
            put_u64(b, OSIZE_AT, e.apply(cur, fx));
        }
        Edit::PayloadLen(e) => {
            let cur = get_u32(b, PLEN_AT).unwrap_or(0);
            let v = match *e {
                LenEdit::Delta(d) => cur.wrapping_add(d as i32 as u32),
                LenEdit::MaxPayload => MAX_PAYLOAD as u32,
                LenEdit::AboveMaxPayload => MAX_PAYLOAD as u32 + 1,
                LenEdit::Max => u32::MAX,
                LenEdit::Raw(v) => v,
            };
            put_u32(b, PLEN_AT, v);
        }
        Edit::FdCount(n) => put(b, FDCOUNT_AT, &[*n]),
        Edit::Flags(f) => put(b, FLAGS_AT, &[*f]),
        Edit::Fd { slot, fd } => {
            put(
                b,
                FDS_AT + 4 * (*slot as usize % 8),
                &fd.resolve(fx).to_le_bytes(),
            );
        }
        Edit::ExportNonce(e) => {
            let cur = get_u64(b, ENONCE_AT).unwrap_or(0);
            let v = match *e {
                NonceEdit::Zero => 0,
                NonceEdit::FlipBit(i) => cur ^ (1 << (i % 64)),
                NonceEdit::Of(h) => get_u64(fx.handle(h), ENONCE_AT).unwrap_or(0),
                NonceEdit::Raw(v) => v,
            };
            put_u64(b, ENONCE_AT, v);
        }
        Edit::Transplant { from, part } => {
            let o = fx.handle(*from);
            let copy =
                |b: &mut Vec<u8>, range: std::ops::Range<usize>| put(b, range.start, &o[range]);
            match part {
                Part::Descriptors => copy(b, FDCOUNT_AT..ENONCE_AT),
                Part::ExportNonce => copy(b, ENONCE_AT..CRC_AT),
                Part::Ticket => {
                    if b.len() < HEADER_LEN {
                        return;
                    }
                    let (mine, theirs) = (header_fds(b), header_fds(o));
                    if let (Some(slot), Some(&t)) = (mine.len().checked_sub(1), theirs.last()) {
                        put(b, FDS_AT + 4 * slot, &t.to_le_bytes());
                    }
                    copy(b, ENONCE_AT..CRC_AT);
                }
                Part::Exporter => copy(b, PID_AT..DEVID_AT),
                Part::ObjectSize => copy(b, OSIZE_AT..PLEN_AT),
                Part::Kind => copy(b, KIND_AT..KIND_AT + 1),
                Part::DeviceIdentity => copy(b, DEVID_AT..OSIZE_AT),
                Part::Payload => {
                    if b.len() >= HEADER_LEN {
                        b.truncate(HEADER_LEN);
                        b.extend_from_slice(&o[HEADER_LEN..]);
                    }
                }
            }
        }
        Edit::Payload(e) => apply_payload_edit(fx, b, e),
        Edit::Splice { at, bytes, insert } => {
            if b.len() < HEADER_LEN {
                return;
            }
            let plen = b.len() - HEADER_LEN;
            let at = HEADER_LEN + (*at as usize % (plen + 1));
            if *insert {
                b.splice(at..at, bytes.iter().copied());
            } else {
                let end = at + bytes.len();
                if b.len() < end {
                    b.resize(end, 0);
                }
                b[at..end].copy_from_slice(bytes);
            }
        }
        Edit::Truncate(n) => {
            let len = b.len();
            b.truncate(*n as usize % (len + 1));
        }
        Edit::Extend(bytes) => b.extend_from_slice(bytes),
        Edit::Retarget(i) => {
            if b.len() < HEADER_LEN {
                return;
            }
            let f = fx.pool(*i);
            payload_set(b, &PayloadField::Ino, f.ino);
            payload_set(b, &PayloadField::Dev, f.dev);
            payload_set(b, &PayloadField::Fd, f.fd as u32 as u64);
            let slot = header_fds(b).len().saturating_sub(2);
            put(b, FDS_AT + 4 * slot, &f.fd.to_le_bytes());
        }
        Edit::HeaderByte { at, value } => put(b, *at as usize % HEADER_LEN, &[*value]),
        Edit::FakeEvent { field, value } => {
            let (at, width) = EVENT_FIELDS[*field as usize % EVENT_FIELDS.len()];
            let _ = fx
                .fake_event
                .write_all_at(&value.to_le_bytes()[..width], at as u64);
        }
    }
}

fn apply_payload_edit(fx: &Fixture, b: &mut Vec<u8>, e: &PayloadEdit) {
    match e {
        PayloadEdit::Tag(t) => {
            payload_set(b, &PayloadField::Tag, u32::from_le_bytes(t.bytes()) as u64)
        }
        PayloadEdit::FileOf(i) => {
            let f = fx.pool(*i);
            payload_set(b, &PayloadField::Ino, f.ino);
            payload_set(b, &PayloadField::Dev, f.dev);
        }
        PayloadEdit::Ino(e) => {
            let cur = payload_get(b, &PayloadField::Ino);
            payload_set(b, &PayloadField::Ino, e.apply(cur));
        }
        PayloadEdit::Dev(e) => {
            let cur = payload_get(b, &PayloadField::Dev);
            payload_set(b, &PayloadField::Dev, e.apply(cur));
        }
        PayloadEdit::Size(e) => {
            let cur = payload_get(b, &PayloadField::Size);
            payload_set(b, &PayloadField::Size, e.apply(cur, fx));
        }
        PayloadEdit::Offset(e) => {
            let cur = payload_get(b, &PayloadField::Offset);
            payload_set(b, &PayloadField::Offset, e.apply(cur, fx));
        }
        PayloadEdit::Fd(c) => payload_set(b, &PayloadField::Fd, c.resolve(fx) as u32 as u64),
        PayloadEdit::Relayout(t) => {
            if b.len() < HEADER_LEN {
                return;
            }
            let fields = [
                PayloadField::Ino,
                PayloadField::Dev,
                PayloadField::Size,
                PayloadField::Offset,
                PayloadField::Fd,
            ];
            let old: Vec<u64> = fields.iter().map(|f| payload_get(b, f)).collect();
            b.truncate(HEADER_LEN);
            b.extend_from_slice(&t.bytes());
            for (f, v) in fields.iter().zip(old) {
                payload_set(b, f, v);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Opening and touching

/// Reads and writes back the first and the last element, through a view and through queue
/// copies.
fn touch_usm<T: bytemuck::Pod>(q: &sycl::Queue, usm: &sycl::Usm<T>) {
    let n = usm.len();
    if n == 0 {
        return;
    }
    if let Ok(view) = usm.view() {
        assert_eq!(view.len(), n);
        let first = view.get(0);
        view.set(0, first);
        let last = view.get(n - 1);
        view.set(n - 1, last);
    }
    for r in [usm.range(..1), usm.range(n - 1..)].into_iter().flatten() {
        if let Ok(v) = q.to_vec(&r) {
            assert_eq!(v.len(), 1);
            let _ = q.write(&r, &v);
        }
    }
}

/// The same for a mapping's range.
fn touch_range(q: &sycl::Queue, r: &sycl::UsmRange<u8>) {
    let n = r.len();
    if n == 0 {
        return;
    }
    if let Ok(view) = r.view() {
        let first = view.get(0);
        view.set(0, first);
        let last = view.get(n - 1);
        view.set(n - 1, last);
    }
    for sub in [r.sub(..1), r.sub(n - 1..)].into_iter().flatten() {
        if let Ok(v) = q.to_vec(&sub) {
            assert_eq!(v.len(), 1);
            let _ = q.write(&sub, &v);
        }
    }
}

/// With `IPC_OPEN_TRACE` set, says what each open gave (for reviewing a corpus:
/// `IPC_OPEN_TRACE=1 ./ipc_open -runs=0 corpus/ipc_open`).
fn trace(what: &str, r: std::result::Result<String, String>) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("IPC_OPEN_TRACE").is_some()) {
        match r {
            Ok(s) => eprintln!("ipc_open: {what}: OK {s}"),
            Err(e) => eprintln!("ipc_open: {what}: Err {e}"),
        }
    }
}

fn open_all(fx: &Fixture, h: &ipc::Handle, wide: bool) {
    let (q, ctx, dev) = (&fx.q, &fx.ctx, &fx.dev);

    match ipc::memory::open::<u8>(h, ctx, dev) {
        Ok(usm) => {
            trace("memory", Ok(format!("{} bytes", usm.len())));
            assert!(usm.len() as u64 <= h.object_size());
            touch_usm(q, &usm);
            drop(usm);
        }
        Err(e) => trace("memory", Err(e.to_string())),
    }
    if wide {
        match ipc::memory::open::<u64>(h, ctx, dev) {
            Ok(usm) => {
                trace("memory<u64>", Ok(format!("{} elements", usm.len())));
                touch_usm(q, &usm);
            }
            Err(e) => trace("memory<u64>", Err(e.to_string())),
        }
    }

    match ipc::physical_memory::open(h, ctx, dev) {
        Ok(pm) => {
            let size = pm.size();
            trace("physical_memory", Ok(format!("{size} bytes")));
            assert_eq!(size as u64, h.object_size());
            match VirtualRange::reserve(ctx, size, 0) {
                Ok(range) => {
                    match pm.map(&range, 0, size, sycl::AccessMode::ReadWrite, 0) {
                        Ok(mapping) => {
                            let r = mapping.as_range::<u8>().expect("u8 is not zero-sized");
                            touch_range(q, &r);
                            drop(r);
                            drop(mapping);
                        }
                        Err(e) => trace("physical_memory map", Err(e.to_string())),
                    }
                    drop(range);
                }
                Err(e) => trace("physical_memory reserve", Err(e.to_string())),
            }
            drop(pm);
        }
        Err(e) => trace("physical_memory", Err(e.to_string())),
    }

    match ipc::event::open(h, ctx) {
        Ok(ev) => {
            let status = ev.status();
            let waited = ev.wait_timeout(Duration::from_millis(1));
            trace("event", Ok(format!("{status:?} {waited:?}")));
            drop(ev);
        }
        Err(e) => trace("event", Err(e.to_string())),
    }
}

static RUNS: AtomicU64 = AtomicU64::new(0);

fuzz_target!(|m: Mutation| {
    let fx = FIXTURE.get_or_init(Fixture::new);
    fx.reset_fake_event();
    let bytes = apply(fx, &m);
    match ipc::Handle::from_bytes(bytes) {
        Ok(h) => open_all(fx, &h, m.wide),
        Err(e) => trace("decode", Err(e.to_string())),
    }
    // Nothing an input opened may outlive it. (The importer keeps the pidfd and the checked
    // tickets of exporters a ticket proved, bounded: here this process is the only exporter,
    // with a handful of exports.)
    if RUNS.fetch_add(1, Ordering::Relaxed).is_multiple_of(64) {
        let now = open_fd_count();
        assert!(
            now <= fx.baseline_fds + 16,
            "descriptor leak: {now} open, {} after the fixture was made",
            fx.baseline_fds
        );
    }
});
