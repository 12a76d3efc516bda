//! Handles from the wire, attacked: random, truncated and bit-flipped bytes, and genuine
//! exports (memory, physical memory, events) whose header fields are forged one at a time with
//! a recomputed checksum, so that the forgery reaches every check behind the decoder. Opening
//! must never crash, and must never hand out more, or other, memory than was exported.

use proptest::prelude::*;
use sycl_backend::ipc::{ExporterId, IpcObjectKind};
use sycl_backend::BackendKind;

use super::handle::{Header, HEADER_LEN};
use super::Handle;
use crate::virtual_mem::PhysicalMem;
use crate::{Context, Device, Event, EventProperties, PhysicalMemProperties, Queue, Usm};

fn native() -> (Device, Context) {
    let d = Device::native_cpu();
    let c = Context::default_for(&d).unwrap();
    (d, c)
}

const MEM_LEN: usize = 3 * 4096 + 100;
const OFFSET: usize = 4096 + 8;

fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// Genuine exports of this process, kept alive by the fixture.
struct Exports {
    _mem: Usm<u8>,
    _neighbour: Usm<u8>,
    _phys: PhysicalMem,
    _event: Event,
    handles: Vec<(Handle, IpcObjectKind, u64)>,
}

fn exports() -> Exports {
    let (d, c) = native();
    let q = Queue::in_order(&d).unwrap();
    let mem = crate::malloc_device::<u8>(MEM_LEN, &q).unwrap();
    q.write(&mem, &(0..MEM_LEN).map(pattern).collect::<Vec<_>>())
        .unwrap();
    let neighbour = crate::malloc_device::<u8>(MEM_LEN, &q).unwrap();
    q.fill(&neighbour, 0xEE, &[]).unwrap().wait().unwrap();
    let whole = super::memory::get(&mem).unwrap();
    let interior = super::memory::get(&mem.range(OFFSET..).unwrap()).unwrap();
    let g = crate::virtual_mem::get_mem_granularity(&d, &c, Default::default()).unwrap();
    let phys = PhysicalMem::new(&d, &c, g, PhysicalMemProperties { enable_ipc: true }).unwrap();
    let ph = super::physical_memory::get(&phys).unwrap();
    let event = Event::new(
        &c,
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .unwrap();
    let ev = super::event::get(&event).unwrap();
    Exports {
        handles: vec![
            (whole, IpcObjectKind::Memory, 0),
            (interior, IpcObjectKind::Memory, OFFSET as u64),
            (ph, IpcObjectKind::PhysicalMemory, 0),
            (ev, IpcObjectKind::Event, 0),
        ],
        _mem: mem,
        _neighbour: neighbour,
        _phys: phys,
        _event: event,
    }
}

/// Opens `handle` every way. Memory that opens must be exactly the exported bytes: no longer
/// than the export, holding the exporter's data at both ends; it is read and written at its
/// first and last byte (through a view: it is shared memory).
fn open_and_touch(handle: &Handle, real_len: Option<usize>, offset: u64) -> usize {
    let (d, c) = native();
    let mut opened = 0;
    if let Ok(m) = super::memory::open::<u8>(handle, &c, &d) {
        opened += 1;
        let real = real_len.expect("only a memory handle may open as memory");
        assert!(
            m.len() <= real,
            "opened {} bytes of a {real}-byte export",
            m.len()
        );
        if !m.is_empty() {
            let v = m.view().unwrap();
            let last = m.len() - 1;
            assert_eq!(v.get(0), pattern(offset as usize));
            assert_eq!(v.get(last), pattern(offset as usize + last));
            v.set(last, v.get(last));
        }
    }
    if let Ok(p) = super::physical_memory::open(handle, &c, &d) {
        opened += 1;
        let range = crate::virtual_mem::VirtualRange::reserve(&c, p.size(), 0).unwrap();
        let map = p
            .map(&range, 0, p.size(), crate::AccessMode::ReadWrite, 0)
            .unwrap();
        let v = map.as_range::<u8>().unwrap().view().unwrap();
        let last = v.len() - 1;
        v.set(last, v.get(0));
    }
    if let Ok(e) = super::event::open(handle, &c) {
        opened += 1;
        e.status().unwrap();
    }
    opened
}

/// One header field of a genuine export, forged.
#[derive(Clone, Debug)]
enum Forge {
    Pid(u32),
    StartTime(u64),
    ExporterNonce(u64),
    DeviceIdentity([u8; 16]),
    ObjectSize(u64),
    Fd(usize, i32),
    DropFds,
    ExportNonce(u64),
    Kind(u8),
}

fn forge_strategy() -> impl Strategy<Value = Forge> {
    prop_oneof![
        prop_oneof![
            Just(1u32),
            Just(u32::MAX),
            Just(1 << 31),
            Just(std::process::id() + 1),
            any::<u32>()
        ]
        .prop_map(Forge::Pid),
        any::<u64>().prop_map(Forge::StartTime),
        any::<u64>().prop_map(Forge::ExporterNonce),
        any::<[u8; 16]>().prop_map(Forge::DeviceIdentity),
        prop_oneof![
            Just(u64::MAX),
            Just(1u64 << 40),
            1u64..(4 * MEM_LEN as u64),
            any::<u64>()
        ]
        .prop_map(Forge::ObjectSize),
        (0usize..2, -1i32..64).prop_map(|(i, fd)| Forge::Fd(i, fd)),
        Just(Forge::DropFds),
        any::<u64>().prop_map(Forge::ExportNonce),
        (1u8..=3).prop_map(Forge::Kind),
    ]
}

/// Re-encodes `handle` with `forge` applied (a correct checksum), or `None` when the forged
/// header cannot be encoded.
fn forged(handle: &Handle, forge: &Forge) -> Option<Handle> {
    let mut h: Header = handle.header.clone();
    match *forge {
        Forge::Pid(p) => h.exporter.pid = p,
        Forge::StartTime(t) => h.exporter.start_time = t,
        Forge::ExporterNonce(n) => h.exporter.nonce = n,
        Forge::DeviceIdentity(id) => h.device_identity = id,
        Forge::ObjectSize(s) => h.object_size = s,
        Forge::Fd(i, fd) => {
            let n = h.fds.len();
            if n == 0 {
                return None;
            }
            h.fds[i % n] = fd;
        }
        Forge::DropFds => h.fds.clear(),
        Forge::ExportNonce(n) => h.export_nonce = n,
        Forge::Kind(k) => h.kind = IpcObjectKind::from_wire_id(k)?,
    }
    let bytes = h.encode(handle.payload()).ok()?;
    Handle::from_bytes(bytes).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_decode(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert!(Handle::from_bytes(bytes).is_err());
    }

    #[test]
    fn truncated_and_flipped_handles_fail(which in 0usize..4, cut in 0usize..4096, bit in 0usize..(8 * 4096)) {
        let ex = exports();
        let good = ex.handles[which].0.to_vec();
        let cut = cut % good.len();
        prop_assert!(Handle::from_bytes(good[..cut].to_vec()).is_err());
        let mut flipped = good.clone();
        let bit = bit % (8 * good.len());
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(Handle::from_bytes(flipped).is_err());
        let mut longer = good;
        longer.push(0);
        prop_assert!(Handle::from_bytes(longer).is_err());
    }

    #[test]
    fn forged_headers_over_genuine_exports(which in 0usize..4, forge in forge_strategy()) {
        let ex = exports();
        let (handle, kind, offset) = &ex.handles[which];
        let real_len = (*kind == IpcObjectKind::Memory).then(|| MEM_LEN - *offset as usize);
        // The genuine handle opens exactly once (as its own kind) ...
        prop_assert_eq!(open_and_touch(handle, real_len, *offset), 1);
        let Some(bad) = forged(handle, &forge) else { return Ok(()) };
        // ... a forged one at most once, and only where the forgery is harmless.
        let opened = open_and_touch(&bad, real_len, *offset);
        let harmless = match &forge {
            Forge::DeviceIdentity(_) => true,
            // A kind-less event handle of another kind, or the same kind again.
            Forge::Kind(k) => IpcObjectKind::from_wire_id(*k) == Some(*kind),
            Forge::ObjectSize(s) => *kind == IpcObjectKind::Memory
                && *s <= handle.object_size()
                || *s == handle.object_size(),
            Forge::Fd(i, fd) => handle.header.fds.get(i % handle.header.fds.len().max(1)) == Some(fd),
            // The start time only speeds up "the exporter has exited" answers: the export
            // ticket, taken from the process the pid names, is what proves the exporter.
            Forge::StartTime(_) => true,
            Forge::ExporterNonce(n) => *n == handle.header.exporter.nonce,
            Forge::ExportNonce(n) => *n == handle.header.export_nonce,
            Forge::Pid(p) => *p == handle.header.exporter.pid,
            Forge::DropFds => handle.header.fds.is_empty(),
        };
        prop_assert!(opened <= usize::from(harmless), "{forge:?} opened {opened} times");
    }

    #[test]
    fn forged_headers_with_garbage_payloads_fail(
        kind in 1u8..=3,
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        fds in proptest::collection::vec(0i32..64, 0..3),
        object_size in any::<u64>(),
        this_process in any::<bool>(),
    ) {
        let exporter = if this_process {
            ExporterId::current()
        } else {
            ExporterId { pid: 999_999, start_time: 1, nonce: 2 }
        };
        let header = Header {
            backend: BackendKind::NativeCpu,
            kind: IpcObjectKind::from_wire_id(kind).unwrap(),
            exporter,
            device_identity: [0; 16],
            object_size,
            payload_len: payload.len(),
            fds,
            export_nonce: 1,
        };
        let bytes = header.encode(&payload).unwrap();
        let handle = Handle::from_bytes(bytes).unwrap();
        prop_assert_eq!(open_and_touch(&handle, None, 0), 0);
    }
}

#[test]
fn genuine_payload_with_another_files_descriptor_fails() {
    // A genuine payload whose descriptor number points at another open file of this process
    // (stale or reused numbers) must be refused, by the ticket or by the file-identity check.
    let ex = exports();
    let good = ex.handles[0].0.to_vec();
    let mut header = Header::decode(&good).unwrap();
    let other = std::fs::File::open("/proc/self/stat").unwrap();
    header.fds[0] = std::os::fd::AsRawFd::as_raw_fd(&other);
    let forged = header.encode(&good[HEADER_LEN..]).unwrap();
    let handle = Handle::from_bytes(forged).unwrap();
    let (d, c) = native();
    let err = super::memory::open::<u8>(&handle, &c, &d).unwrap_err();
    assert_eq!(err.code(), crate::Errc::Invalid, "{err}");
}
