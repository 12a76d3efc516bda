//! Random, truncated and bit-flipped handle bytes given to every `open`: always an `Err`, never
//! a crash. Forged headers carry a correct checksum, so the garbage reaches the backends'
//! payload checks too.

use proptest::prelude::*;
use sycl_backend::ipc::{ExporterId, IpcObjectKind};
use sycl_backend::BackendKind;

use super::handle::Header;
use super::Handle;
use crate::{Context, Device, DeviceSelector};

fn native() -> (Device, Context) {
    let d = DeviceSelector::filter("native_cpu:*")
        .unwrap()
        .select()
        .unwrap();
    let c = Context::default_for(&d).unwrap();
    (d, c)
}

/// Tries every open; panics (failing the property) if any succeeds.
fn open_all_fail(handle: &Handle) {
    let (d, c) = native();
    assert!(
        super::memory::open::<u8>(handle, &c, &d).is_err(),
        "memory open accepted garbage"
    );
    assert!(
        super::physical_memory::open(handle, &c, &d).is_err(),
        "physical memory open accepted garbage"
    );
    assert!(
        super::event::open(handle, &c).is_err(),
        "event open accepted garbage"
    );
}

fn valid_memory_handle() -> (Vec<u8>, crate::Usm<u8>) {
    let (d, _) = native();
    let q = crate::Queue::in_order(&d).unwrap();
    let buf = crate::malloc_device::<u8>(8192, &q).unwrap();
    (super::memory::get(&buf).unwrap().to_vec(), buf)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_decode(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert!(Handle::from_bytes(bytes).is_err());
    }

    #[test]
    fn truncated_and_flipped_handles_fail(cut in 0usize..4096, bit in 0usize..(8 * 4096)) {
        let (good, _keep) = valid_memory_handle();
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
        open_all_fail(&handle);
    }
}

#[test]
fn valid_payload_with_wrong_descriptor_fails() {
    // A genuine payload whose descriptor number points at another open file of this process
    // (stale or reused numbers) must be refused by the file-identity check.
    let (good, _keep) = valid_memory_handle();
    let mut header = Header::decode(&good).unwrap();
    let other = std::fs::File::open("/proc/self/stat").unwrap();
    header.fds = vec![std::os::fd::AsRawFd::as_raw_fd(&other)];
    let forged = header.encode(&good[super::handle::HEADER_LEN..]).unwrap();
    let handle = Handle::from_bytes(forged).unwrap();
    let (d, c) = native();
    let err = super::memory::open::<u8>(&handle, &c, &d).unwrap_err();
    assert_eq!(err.code(), crate::Errc::Invalid, "{err}");
}
