//! USM: one memfd per allocation, mapped `MAP_SHARED`, so any allocation can be exported.
//!
//! The registry maps the base of every live allocation (and of every IPC mapping opened in
//! this context) to what it is, so pointer queries work for interior pointers.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;

use parking_lot::Mutex;
use rustix::mm::ProtFlags;
use sycl_backend::{Error, PointerInfo, Result, UsmKind};

use crate::sys::{self, FileId, Mapping};

/// Alignment of allocations made with `align == 0`.
const DEFAULT_ALIGN: usize = 64;

/// A live USM allocation.
pub(crate) struct UsmAlloc {
    /// The whole reserved region (the file mapping sits inside it); unmapped on drop.
    _region: Mapping,
    /// The memfd; exported as is, closed on free.
    pub fd: OwnedFd,
    pub id: FileId,
    pub size: usize,
    pub kind: UsmKind,
    pub device_index: Option<usize>,
}

/// A mapping made by `ipc_open_mem`, shared by every open of the same file in the context
/// (as the CUDA driver shares one mapping between opens of a handle): a reopen maps nothing.
pub(crate) struct OpenedMem {
    _map: Mapping,
    pub size: usize,
    pub device_index: usize,
    /// The file mapped.
    pub id: FileId,
    /// The addresses `ipc_open_mem` returned and that are not closed yet (base + the
    /// exporter's offset), one per open; unmapped when the last is closed.
    pub users: Vec<u64>,
}

pub(crate) enum MemEntry {
    Usm(UsmAlloc),
    Opened(OpenedMem),
}

impl MemEntry {
    fn size(&self) -> usize {
        match self {
            MemEntry::Usm(a) => a.size,
            MemEntry::Opened(o) => o.size,
        }
    }
}

/// The live allocations and IPC mappings of a context, by base address.
#[derive(Default)]
pub(crate) struct Registry {
    entries: BTreeMap<u64, MemEntry>,
    /// The base of the IPC mapping of each file opened (the newest, if several).
    opened_files: HashMap<FileId, u64>,
}

impl Registry {
    /// The entry whose `[base, base+size)` contains `ptr`.
    pub(crate) fn find(&self, ptr: u64) -> Option<(u64, &MemEntry)> {
        let (&base, entry) = self.entries.range(..=ptr).next_back()?;
        (ptr - base < entry.size() as u64).then_some((base, entry))
    }

    pub(crate) fn info(&self, ptr: u64) -> PointerInfo {
        match self.find(ptr) {
            Some((base, MemEntry::Usm(a))) => PointerInfo {
                kind: a.kind,
                device_index: a.device_index,
                base,
                size: a.size,
            },
            Some((base, MemEntry::Opened(o))) => PointerInfo {
                kind: UsmKind::Device,
                device_index: Some(o.device_index),
                base,
                size: o.size,
            },
            None => PointerInfo::unknown(),
        }
    }

    pub(crate) fn insert(&mut self, base: u64, entry: MemEntry) {
        self.entries.insert(base, entry);
    }

    /// Removes the USM allocation that starts at `ptr`.
    pub(crate) fn remove_usm(&mut self, ptr: u64) -> Result<UsmAlloc> {
        match self.entries.remove(&ptr) {
            Some(MemEntry::Usm(a)) => Ok(a),
            Some(opened @ MemEntry::Opened(_)) => {
                self.entries.insert(ptr, opened);
                Err(Error::invalid(format!(
                    "usm::free of {ptr:#x}, which was opened with ipc::memory::open (close it instead)"
                )))
            }
            None => Err(Error::invalid(format!(
                "usm::free of {ptr:#x}, which is not the start of a live allocation"
            ))),
        }
    }

    /// Registers a new IPC mapping (its first user included).
    pub(crate) fn insert_opened(&mut self, base: u64, opened: OpenedMem) {
        self.opened_files.insert(opened.id, base);
        self.entries.insert(base, MemEntry::Opened(opened));
    }

    /// Another open of file `id` (`size` bytes, offset `offset`, on device `device_index`)
    /// through the mapping already made of it, if there is one of that size and device:
    /// the address to return.
    pub(crate) fn reuse_opened(
        &mut self,
        id: FileId,
        size: usize,
        device_index: usize,
        offset: u64,
    ) -> Option<u64> {
        let base = *self.opened_files.get(&id)?;
        match self.entries.get_mut(&base) {
            Some(MemEntry::Opened(o))
                if o.id == id && o.size == size && o.device_index == device_index =>
            {
                let user = base + offset;
                o.users.push(user);
                Some(user)
            }
            _ => None,
        }
    }

    /// Closes the open that `ipc_open_mem` returned as `ptr`: the mapping to unmap when that
    /// was its last open.
    pub(crate) fn remove_opened(&mut self, ptr: u64) -> Result<Option<OpenedMem>> {
        let refuse = || {
            Error::invalid(format!(
                "ipc::memory::close of {ptr:#x}, which is not an open IPC mapping of this context"
            ))
        };
        let (base, last) = match self.find(ptr) {
            Some((base, MemEntry::Opened(o))) if o.users.contains(&ptr) => {
                (base, o.users.len() == 1)
            }
            _ => return Err(refuse()),
        };
        if !last {
            if let Some(MemEntry::Opened(o)) = self.entries.get_mut(&base) {
                let i = o.users.iter().position(|&u| u == ptr).ok_or_else(refuse)?;
                o.users.swap_remove(i);
            }
            return Ok(None);
        }
        match self.entries.remove(&base) {
            Some(MemEntry::Opened(o)) => {
                if self.opened_files.get(&o.id) == Some(&base) {
                    self.opened_files.remove(&o.id);
                }
                Ok(Some(o))
            }
            Some(other) => {
                self.entries.insert(base, other);
                Err(refuse())
            }
            None => Err(refuse()),
        }
    }
}

/// USM and opened IPC memory made of sealed memfds mapped `MAP_SHARED`: the native CPU
/// backend's memory, and the device memory of any backend whose devices use host pointers as
/// they are (OpenCL devices with fine-grained system SVM). Every allocation can be exported
/// (`export`), and memory exported by any backend that uses this type opens here (`open`)
/// with the same checks: the descriptor must be the sealed memfd the payload names, and no
/// more is mapped than the file holds.
#[derive(Default)]
pub struct HostMemory {
    pub(crate) registry: Mutex<Registry>,
}

impl HostMemory {
    /// No allocations yet. Raises the soft descriptor limit once per process (every
    /// allocation holds a descriptor).
    pub fn new() -> HostMemory {
        sys::raise_fd_limit();
        HostMemory::default()
    }

    /// A new allocation of `size > 0` bytes aligned to `align` (a power of two; 0 for 64),
    /// of `kind` on the device at `device_index` of the caller's context (`None` for host
    /// USM): its address.
    pub fn alloc(
        &self,
        size: usize,
        align: usize,
        kind: UsmKind,
        device_index: Option<usize>,
    ) -> Result<u64> {
        let (base, alloc) = allocate(size, align, kind, device_index)?;
        self.registry.lock().insert(base, MemEntry::Usm(alloc));
        Ok(base)
    }

    /// Frees the allocation that starts at `ptr`. `Errc::Invalid` for anything else (opened
    /// memory included: it is closed, not freed).
    ///
    /// # Safety
    /// No pending command and no live reference uses the allocation.
    pub unsafe fn free(&self, ptr: u64) -> Result<()> {
        let alloc = self.registry.lock().remove_usm(ptr)?;
        // Unmapped and closed (which ends its exports) outside the lock.
        drop(alloc);
        Ok(())
    }

    /// What this memory knows of `ptr`: `UsmKind::Unknown` when it is none of its
    /// allocations or opened mappings.
    pub fn pointer_info(&self, ptr: u64) -> PointerInfo {
        self.registry.lock().info(ptr)
    }

    /// Whether `ptr` lies in one of its allocations or opened mappings.
    pub fn contains(&self, ptr: u64) -> bool {
        self.registry.lock().find(ptr).is_some()
    }
}

/// Makes a memfd-backed allocation of `size` bytes aligned to `align` (0 = default).
pub(crate) fn allocate(
    size: usize,
    align: usize,
    kind: UsmKind,
    device_index: Option<usize>,
) -> Result<(u64, UsmAlloc)> {
    if size == 0 {
        return Err(Error::invalid("USM allocation of 0 bytes"));
    }
    let align = if align == 0 { DEFAULT_ALIGN } else { align };
    if !align.is_power_of_two() {
        return Err(Error::invalid(format!(
            "alignment {align} is not a power of two"
        )));
    }
    let page = sys::page_size();
    let len = sys::round_up(size, page)
        .ok_or_else(|| Error::invalid(format!("allocation of {size} bytes")))?;
    let fd = sys::memfd("sycl-rs-usm", len)?;
    let (id, _) = sys::file_id(&fd)?;
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    let (region, base) = if align <= page {
        let map = Mapping::shared(&fd, len, 0, rw)?;
        let base = map.addr();
        (map, base)
    } else {
        let total = len.checked_add(align).ok_or_else(|| {
            Error::invalid(format!("allocation of {size} bytes aligned to {align}"))
        })?;
        let region = Mapping::reserve(0, total)?;
        let base = sys::round_up(region.addr(), align)
            .ok_or_else(|| Error::invalid(format!("cannot align an allocation to {align}")))?;
        // SAFETY: [base, base+len) lies inside `region`, which we just reserved and nothing
        // else uses.
        unsafe { sys::map_fixed_shared(base, len, &fd, 0, rw)? };
        (region, base)
    };
    let alloc = UsmAlloc {
        _region: region,
        fd,
        id,
        size,
        kind,
        device_index,
    };
    Ok((base as u64, alloc))
}

/// Maps `len` bytes of an imported allocation's memfd.
pub(crate) fn map_import(
    fd: &OwnedFd,
    id: FileId,
    len: usize,
    size: usize,
    device_index: usize,
    offset: u64,
) -> Result<(u64, OpenedMem)> {
    let map = Mapping::shared(fd, len, 0, ProtFlags::READ | ProtFlags::WRITE)?;
    let base = map.addr() as u64;
    Ok((
        base,
        OpenedMem {
            _map: map,
            size,
            device_index,
            id,
            users: vec![base + offset],
        },
    ))
}
