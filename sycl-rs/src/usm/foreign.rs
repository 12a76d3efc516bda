//! Foreign memory: memory another library allocated and owns (a NumPy array, a PyTorch or
//! CuPy tensor, a buffer of a C library), wrapped as a [`Usm`] so that sycl-rs queues can copy
//! to it, fill it and pass it to kernels without a copy.
//!
//! The wrapper is a [`MemoryRecord`](super::record) like any other: commands on it are tracked,
//! ranges, views and DLPack exports keep it alive, and it is released after the last of them
//! and after every command that used it. Releasing it frees nothing: it drops the *owner*, the
//! object the caller handed over to keep the memory allocated (for DLPack, the managed
//! tensor whose deleter returns the memory to its producer). Foreign memory has no host
//! borrows (`as_slice`): its producer may write it at any time, so it is read and written
//! through views and queue commands only, as memory shared with other processes is.
#![allow(unsafe_code)]

use std::any::Any;

use bytemuck::Pod;
use sycl_backend::{AccessMode, Aspect, UsmKind};

use super::record::{MemoryRecord, RecordSpec, Release};
use super::Usm;
use crate::{Context, Device, Errc, Error, Result};

/// What a foreign allocation is, as its producer describes it (DLPack's device type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignKind {
    /// Ordinary host memory (`malloc`, `mmap`, a NumPy array): DLPack's `kDLCPU`. Needs a
    /// device with `usm_system_allocations`; no driver can confirm it, so it rests on the
    /// caller's word (see [`Usm::from_foreign`]). Its pointer type is `UsmKind::Unknown`, as
    /// SYCL's `get_pointer_type` says of system memory.
    System,
    /// Memory a device driver allocated, of this USM kind (DLPack's `kDLCUDA` = device,
    /// `kDLCUDAHost` = host, `kDLCUDAManaged` = shared): the backend's driver is asked about
    /// the pointer, and its kind, device and allocation bounds must match. When its data is
    /// ready is [`ForeignMemory::ready`]'s to say.
    Driver(UsmKind),
}

/// When the producer's pending work on foreign driver memory is done ([`ForeignMemory::ready`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignReady {
    /// On the device's default queue (CUDA's legacy default stream, where a DLPack producer
    /// asked for `stream=1` makes its data ready): wrapping waits for that queue on the host,
    /// after which commands of any queue may use the memory.
    DefaultQueue,
    /// Before the later commands of the queue that will use the memory: the producer ordered
    /// its work so already (a DLPack producer asked for that queue's
    /// [`Queue::cuda_stream`](crate::Queue::cuda_stream)). Nothing waits; commands of other
    /// queues are not ordered after the producer's work.
    Ordered,
}

/// Describes foreign memory for [`Usm::from_foreign`].
#[derive(Clone, Copy, Debug)]
pub struct ForeignMemory {
    /// Address of the first byte.
    pub ptr: u64,
    /// Size in bytes (a multiple of the element size).
    pub bytes: usize,
    /// What it is.
    pub kind: ForeignKind,
    /// `ReadWrite`, or `Read` for memory its producer lends read-only: commands that would
    /// write it are then refused (`Errc::Invalid`). `None` is refused.
    pub access: AccessMode,
    /// For driver memory, when the producer's work on it is done (host memory: unused).
    pub ready: ForeignReady,
}

impl<T: Pod> Usm<T> {
    /// Wraps memory that something else allocated (see [`ForeignMemory`]) for commands of
    /// queues on `device` in `context`, without a copy. `owner` keeps the memory allocated: it
    /// is dropped when the last reference to the returned memory (ranges, views, kernel
    /// arguments, DLPack exports) is gone and every command that used the memory completed,
    /// never earlier. Dropping or [`Usm::free`]ing the result releases nothing else.
    ///
    /// Checked here: `device` is in `context`; the pointer is not null (for a non-empty
    /// range), aligned for `T`, and the range neither overflows nor leaves a whole number of
    /// elements out; `access` is not `None`; system memory needs a device with
    /// `usm_system_allocations`; driver memory is what the backend's driver says of the
    /// pointer (kind, device, allocation bounds), where the backend can ask
    /// ([`sycl_backend::Context::foreign_pointer_info`]: CUDA's `cuPointerGetAttribute`);
    /// memory this context allocated itself is refused (use its own owner).
    ///
    /// Errors: `Errc::Invalid` for what the checks above refuse; `Errc::FeatureNotSupported`
    /// for system memory on a device without `usm_system_allocations`, or driver memory on a
    /// backend that cannot query foreign pointers.
    ///
    /// # Safety
    /// The caller guarantees, for as long as `owner` is alive:
    /// 1. the bytes `ptr..ptr + bytes` are allocated, of the kind `kind` says (host memory of
    ///    this process for `System`), and stay allocated: neither freed nor reused for
    ///    something else before `owner` is dropped;
    /// 2. with `access == ReadWrite`, writing them is allowed (they are not read-only memory
    ///    of their producer, nor mapped read-only);
    /// 3. no Rust reference (`&T`, `&[T]`, `&mut [T]`) covers them: other code may access them
    ///    only through raw pointers, atomics, device commands or other languages, and races
    ///    of such accesses with sycl-rs commands on the memory are the program's to order
    ///    (sycl-rs tracks only its own commands, as with memory shared between processes);
    /// 4. `owner` does nothing to the memory when dropped but let its producer free it.
    ///
    /// ```compile_fail,E0133
    /// fn go(
    ///     d: &sycl::Device,
    ///     c: &sycl::Context,
    ///     m: sycl::ForeignMemory,
    /// ) -> sycl::Result<sycl::Usm<u8>> {
    ///     sycl::Usm::<u8>::from_foreign(m, d, c, Box::new(()))
    /// }
    /// ```
    pub unsafe fn from_foreign(
        memory: ForeignMemory,
        device: &Device,
        context: &Context,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<Usm<T>> {
        context.check_device(device)?;
        let ForeignMemory {
            ptr,
            bytes,
            kind,
            access,
            ready,
        } = memory;
        let size = super::element_size::<T>()?;
        if bytes % size != 0 {
            return Err(Error::invalid(format!(
                "{bytes} bytes are not a whole number of {size}-byte elements"
            )));
        }
        if access == AccessMode::None {
            return Err(Error::invalid(
                "foreign memory is read_write or read, not none",
            ));
        }
        if bytes > 0 {
            if ptr == 0 {
                return Err(Error::invalid("foreign memory at address 0"));
            }
            if ptr.checked_add(bytes as u64).is_none() || bytes > isize::MAX as usize {
                return Err(Error::invalid(format!(
                    "{bytes} bytes at {ptr:#x} overflow the address space"
                )));
            }
            if ptr % std::mem::align_of::<T>() as u64 != 0 {
                return Err(Error::invalid(format!(
                    "{ptr:#x} is not aligned for {}-byte-aligned elements",
                    std::mem::align_of::<T>()
                )));
            }
            if context.raw().usm_pointer_info(ptr).kind != UsmKind::Unknown {
                return Err(Error::invalid(format!(
                    "{ptr:#x} is USM of this context: use the memory's own owner, not a \
                     foreign wrapper"
                )));
            }
        }
        let (usm_kind, record_device) = match kind {
            ForeignKind::System => {
                device.require(Aspect::UsmSystemAllocations, "foreign host memory")?;
                (UsmKind::Unknown, Some(device.clone()))
            }
            ForeignKind::Driver(UsmKind::Unknown) => {
                return Err(Error::invalid(
                    "foreign driver memory of kind unknown (describe host memory as System)",
                ))
            }
            ForeignKind::Driver(want) => {
                let kind = if bytes > 0 {
                    check_with_driver(ptr, bytes, want, device, context)?
                } else {
                    want
                };
                if ready == ForeignReady::DefaultQueue {
                    context.raw().wait_foreign_default_queue(&device.inner)?;
                }
                (kind, (kind != UsmKind::Host).then(|| device.clone()))
            }
        };
        let record = MemoryRecord::new(RecordSpec {
            context: context.clone(),
            ptr,
            size: bytes,
            kind: usm_kind,
            device: record_device,
            release: Release::Foreign,
            shared: false,
            mode: access,
            anchor: Some(owner),
            backing: None,
        });
        Usm::from_record(record, bytes / size)
    }
}

/// Checks what the backend's driver says of `ptr` against what the caller claims, and returns
/// the memory's kind: the claimed one, or shared where device memory was claimed of managed
/// memory (some producers call all of it device memory; it is device-reachable either way).
fn check_with_driver(
    ptr: u64,
    bytes: usize,
    want: UsmKind,
    device: &Device,
    context: &Context,
) -> Result<UsmKind> {
    let info = context.raw().foreign_pointer_info(ptr)?;
    let managed_as_device = want == UsmKind::Device && info.kind == UsmKind::Shared;
    if info.kind != want && !managed_as_device {
        return Err(Error::invalid(format!(
            "{ptr:#x} is {} memory to the {} driver, not {want} memory",
            info.kind,
            context.backend()
        )));
    }
    if want != UsmKind::Host {
        let here = context.devices().iter().position(|d| d == device);
        if info.device_index.is_none() || info.device_index != here {
            let there = info
                .device_index
                .and_then(|i| context.devices().get(i))
                .map_or_else(|| "no device".to_owned(), |d| d.name().to_owned());
            return Err(Error::new(
                Errc::Invalid,
                format!(
                    "{ptr:#x} lives on {there}, not on {} (the device it was claimed for)",
                    device.name()
                ),
            ));
        }
    }
    let end = info.base.saturating_add(info.size as u64);
    if ptr < info.base || ptr + bytes as u64 > end {
        return Err(Error::invalid(format!(
            "{bytes} bytes at {ptr:#x} leave the driver's allocation {:#x}+{}",
            info.base, info.size
        )));
    }
    Ok(info.kind)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::Queue;

    fn native() -> (Device, Context, Queue) {
        let d = Device::all()
            .into_iter()
            .find(|d| d.backend() == sycl_backend::BackendKind::NativeCpu)
            .expect("the native CPU device always exists");
        let c = Context::default_for(&d).unwrap();
        let q = Queue::with_context(&c, &d, Default::default()).unwrap();
        (d, c, q)
    }

    /// A heap buffer lent to sycl-rs: counts its drops, frees nothing itself (the test keeps
    /// the buffer alive longer than the wrapper).
    struct Lent(Arc<AtomicUsize>);
    impl Drop for Lent {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn system(ptr: *mut u32, len: usize, access: AccessMode) -> ForeignMemory {
        ForeignMemory {
            ptr: ptr as usize as u64,
            bytes: len * 4,
            kind: ForeignKind::System,
            access,
            ready: ForeignReady::DefaultQueue,
        }
    }

    #[test]
    fn queue_commands_reach_foreign_host_memory_and_the_owner_goes_last() {
        let (d, c, q) = native();
        let buf: Box<[u32]> = vec![0u32; 256].into_boxed_slice();
        let ptr = Box::into_raw(buf) as *mut u32;
        let drops = Arc::new(AtomicUsize::new(0));
        // SAFETY: 256 u32 of a live heap buffer, freed below only after the wrapper (and its
        // owner) is gone; no Rust reference covers it meanwhile; the owner frees nothing.
        let usm = unsafe {
            Usm::<u32>::from_foreign(
                system(ptr, 256, AccessMode::ReadWrite),
                &d,
                &c,
                Box::new(Lent(drops.clone())),
            )
        }
        .unwrap();
        assert_eq!(usm.as_ptr(), ptr as usize as u64);
        assert_eq!(usm.kind(), UsmKind::Unknown);
        assert!(usm.is_host_accessible());
        q.fill(&usm, 7u32, &[]).unwrap().wait().unwrap();
        let range = usm.range(10..20).unwrap();
        q.write(&range, &[9u32; 10]).unwrap();
        let mut back = vec![0u32; 256];
        q.read(&usm.full(), &mut back).unwrap();
        assert!(back[..10].iter().all(|&v| v == 7));
        assert!(back[10..20].iter().all(|&v| v == 9));
        // Host borrows are refused: the producer may write the memory at any time.
        assert_eq!(usm.as_slice().unwrap_err().code(), Errc::Invalid);
        // A range keeps the wrapper, and so the owner, alive.
        drop(usm);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        q.fill(&range, 1u32, &[]).unwrap().wait().unwrap();
        drop(range);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // SAFETY: made by Box::into_raw above with 256 elements; nothing uses it any more.
        let buf = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, 256)) };
        assert!(buf[10..20].iter().all(|&v| v == 1) && buf[0] == 7);
    }

    #[test]
    fn read_only_foreign_memory_refuses_writes() {
        let (d, c, q) = native();
        let data = Box::into_raw(vec![5u32; 16].into_boxed_slice()) as *mut u32;
        // SAFETY: a live buffer freed below after the wrapper; read-only use.
        let usm = unsafe {
            Usm::<u32>::from_foreign(system(data, 16, AccessMode::Read), &d, &c, Box::new(()))
        }
        .unwrap();
        assert!(usm.is_read_only());
        assert_eq!(q.to_vec(&usm).unwrap(), vec![5u32; 16]);
        assert_eq!(
            q.fill(&usm, 0u32, &[]).err().map(|e| e.code()),
            Some(Errc::Invalid)
        );
        assert_eq!(
            q.write(&usm.full(), &[0u32; 16]).err().map(|e| e.code()),
            Some(Errc::Invalid)
        );
        drop(usm);
        // SAFETY: made by Box::into_raw above with 16 elements; the wrapper is gone.
        let back = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(data, 16)) };
        assert!(back.iter().all(|&v| v == 5), "nothing was written");
    }

    #[test]
    fn bad_descriptions_are_invalid() {
        let (d, c, q) = native();
        let mut buf = vec![0u32; 8];
        let p = buf.as_mut_ptr();
        let bad = [
            ForeignMemory {
                ptr: 0,
                ..system(p, 8, AccessMode::ReadWrite)
            },
            ForeignMemory {
                bytes: 6,
                ..system(p, 8, AccessMode::ReadWrite)
            },
            ForeignMemory {
                ptr: p as usize as u64 + 2,
                ..system(p, 1, AccessMode::ReadWrite)
            },
            ForeignMemory {
                ptr: u64::MAX - 3,
                bytes: 8,
                ..system(p, 8, AccessMode::ReadWrite)
            },
            system(p, 8, AccessMode::None),
            ForeignMemory {
                kind: ForeignKind::Driver(UsmKind::Unknown),
                ..system(p, 8, AccessMode::ReadWrite)
            },
        ];
        for m in bad {
            // SAFETY: every description is refused before anything touches the memory.
            let err = unsafe { Usm::<u32>::from_foreign(m, &d, &c, Box::new(())) }.unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{m:?}: {err}");
        }
        // Driver memory on the native CPU backend: it has no driver to ask.
        let m = ForeignMemory {
            kind: ForeignKind::Driver(UsmKind::Device),
            ..system(p, 8, AccessMode::ReadWrite)
        };
        // SAFETY: refused before use.
        let err = unsafe { Usm::<u32>::from_foreign(m, &d, &c, Box::new(())) }.unwrap_err();
        assert_eq!(err.code(), Errc::FeatureNotSupported, "{err}");
        // Memory sycl-rs allocated itself.
        let own = crate::malloc_device::<u32>(8, &q).unwrap();
        let m = ForeignMemory {
            ptr: own.as_ptr(),
            ..system(p, 8, AccessMode::ReadWrite)
        };
        // SAFETY: refused before use.
        let err = unsafe { Usm::<u32>::from_foreign(m, &d, &c, Box::new(())) }.unwrap_err();
        assert_eq!(err.code(), Errc::Invalid, "{err}");
        drop(buf);
    }

    #[test]
    fn queues_without_system_allocations_are_refused() {
        let (d, c, _q) = native();
        let Some(other) = Device::all()
            .into_iter()
            .find(|x| !x.has(Aspect::UsmSystemAllocations))
        else {
            eprintln!("skipping: every device here has usm_system_allocations");
            return;
        };
        let mut buf = vec![7u32; 64];
        // SAFETY: `buf` outlives the wrapper (dropped after it); no Rust reference is used
        // while the wrapper lives; the refused commands touch nothing.
        let usm = unsafe {
            Usm::<u32>::from_foreign(
                system(buf.as_mut_ptr(), 64, AccessMode::ReadWrite),
                &d,
                &c,
                Box::new(()),
            )
        }
        .unwrap();
        let q = Queue::new(&other).unwrap();
        let err = q.fill(&usm, 0u32, &[]).map(|_| ()).unwrap_err();
        assert_eq!(err.code(), Errc::Invalid, "{err}");
        assert!(err.message().contains("usm_system_allocations"), "{err}");
        drop(usm);
        assert!(buf.iter().all(|&v| v == 7));
    }

    #[test]
    fn foreign_memory_is_not_exported_through_ipc() {
        let (d, c, _q) = native();
        let mut buf = vec![0u32; 1024];
        // SAFETY: `buf` outlives the wrapper (dropped at the end of the test, after it); no
        // Rust reference is used while the wrapper lives.
        let usm = unsafe {
            Usm::<u32>::from_foreign(
                system(buf.as_mut_ptr(), 1024, AccessMode::ReadWrite),
                &d,
                &c,
                Box::new(()),
            )
        }
        .unwrap();
        let err = crate::ipc::memory::get(&usm).unwrap_err();
        assert_eq!(err.code(), Errc::Invalid, "{err}");
        drop(usm);
        drop(buf);
    }
}
