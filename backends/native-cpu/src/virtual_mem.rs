//! Virtual memory: `PROT_NONE` reservations, memfd-backed physical memory mapped into them
//! with `MAP_FIXED | MAP_SHARED`.

use std::any::Any;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use sycl_backend::{AccessMode, BackendKind, Error, Result};

use crate::sys::{self, FileId, Mapping};

/// A physical memory object: a memfd of `size` bytes.
pub struct PhysicalMem {
    pub(crate) fd: OwnedFd,
    pub(crate) id: FileId,
    size: usize,
    device: Arc<dyn sycl_backend::Device>,
    ipc_enabled: bool,
}

impl PhysicalMem {
    pub(crate) fn create(
        device: Arc<dyn sycl_backend::Device>,
        size: usize,
        ipc_enabled: bool,
    ) -> Result<PhysicalMem> {
        let page = sys::page_size();
        if size == 0 || size % page != 0 {
            return Err(Error::invalid(format!(
                "physical_mem of {size} bytes: the size must be a non-zero multiple of the granularity {page}"
            )));
        }
        let fd = sys::memfd("sycl-rs-physical-mem", size)?;
        let (id, _) = sys::file_id(&fd)?;
        Ok(PhysicalMem {
            fd,
            id,
            size,
            device,
            ipc_enabled,
        })
    }

    /// Wraps an imported memfd, already checked to be the exported one.
    pub(crate) fn imported(
        device: Arc<dyn sycl_backend::Device>,
        fd: OwnedFd,
        id: FileId,
        size: usize,
    ) -> PhysicalMem {
        PhysicalMem {
            fd,
            id,
            size,
            device,
            ipc_enabled: true,
        }
    }
}

impl sycl_backend::PhysicalMem for PhysicalMem {
    fn size(&self) -> usize {
        self.size
    }

    fn device(&self) -> &Arc<dyn sycl_backend::Device> {
        &self.device
    }

    fn ipc_enabled(&self) -> bool {
        self.ipc_enabled
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One mapped piece of a reservation.
struct Mapped {
    len: usize,
    mode: AccessMode,
    /// Keeps the physical memory alive while mapped.
    mem: Arc<dyn sycl_backend::PhysicalMem>,
    /// Offset into `mem`.
    offset: usize,
    /// Which `map_physical` call made it (pieces split by `set_access_mode` share it).
    id: u64,
}

struct Reservation {
    region: Mapping,
    /// Mapped pieces by start address.
    maps: BTreeMap<usize, Mapped>,
}

/// The reservations of a context, by start address.
#[derive(Default)]
pub(crate) struct VirtualSpace {
    reservations: BTreeMap<usize, Reservation>,
    next_id: u64,
}

fn check_page_multiple(what: &str, value: usize) -> Result<()> {
    let page = sys::page_size();
    if value % page != 0 {
        return Err(Error::invalid(format!(
            "{what} {value:#x} is not a multiple of the granularity {page}"
        )));
    }
    Ok(())
}

fn to_usize(ptr: u64) -> Result<usize> {
    usize::try_from(ptr)
        .map_err(|_| Error::invalid(format!("address {ptr:#x} does not fit this host")))
}

impl VirtualSpace {
    pub(crate) fn reserve(&mut self, start: u64, size: usize) -> Result<u64> {
        if size == 0 {
            return Err(Error::invalid("reserving 0 bytes of address space"));
        }
        check_page_multiple("reservation size", size)?;
        let start = to_usize(start)?;
        check_page_multiple("reservation start", start)?;
        let region = Mapping::reserve(start, size)?;
        let base = region.addr();
        self.reservations.insert(
            base,
            Reservation {
                region,
                maps: BTreeMap::new(),
            },
        );
        Ok(base as u64)
    }

    pub(crate) fn free(&mut self, ptr: u64, size: usize) -> Result<()> {
        let ptr = to_usize(ptr)?;
        match self.reservations.get(&ptr) {
            Some(r) if r.region.len() == size => {
                if !r.maps.is_empty() {
                    return Err(Error::invalid(format!(
                        "free_virtual_mem of {ptr:#x}: {} range(s) are still mapped (unmap them first)",
                        r.maps.len()
                    )));
                }
            }
            Some(r) => {
                return Err(Error::invalid(format!(
                "free_virtual_mem of {ptr:#x} with size {size}, but it was reserved with size {}",
                r.region.len()
            )))
            }
            None => {
                return Err(Error::invalid(format!(
                    "free_virtual_mem of {ptr:#x}, which is not a reservation"
                )))
            }
        }
        self.reservations.remove(&ptr);
        Ok(())
    }

    /// The reservation that holds all of `[ptr, ptr+size)`.
    fn reservation_mut(&mut self, ptr: usize, size: usize) -> Result<&mut Reservation> {
        let end = ptr
            .checked_add(size)
            .ok_or_else(|| Error::invalid("address range overflows"))?;
        match self.reservations.range_mut(..=ptr).next_back() {
            Some((&base, r)) if end <= base + r.region.len() => Ok(r),
            _ => Err(Error::invalid(format!(
                "range [{ptr:#x}, {end:#x}) does not lie inside a virtual memory reservation of this context"
            ))),
        }
    }

    pub(crate) fn map(
        &mut self,
        ptr: u64,
        size: usize,
        mem: &Arc<dyn sycl_backend::PhysicalMem>,
        offset: usize,
        mode: AccessMode,
    ) -> Result<()> {
        let phys = sycl_backend::downcast::<PhysicalMem>(
            mem.as_any(),
            "physical_mem",
            BackendKind::NativeCpu,
        )?;
        let ptr = to_usize(ptr)?;
        if size == 0 {
            return Err(Error::invalid("mapping 0 bytes"));
        }
        check_page_multiple("mapping address", ptr)?;
        check_page_multiple("mapping size", size)?;
        check_page_multiple("physical memory offset", offset)?;
        if offset.checked_add(size).map_or(true, |e| e > phys.size) {
            return Err(Error::invalid(format!(
                "mapping {size} bytes at offset {offset} of a physical_mem of {} bytes",
                phys.size
            )));
        }
        self.next_id += 1;
        let id = self.next_id;
        let r = self.reservation_mut(ptr, size)?;
        let end = ptr + size;
        let before_overlaps = r
            .maps
            .range(..ptr)
            .next_back()
            .is_some_and(|(&s, m)| s + m.len > ptr);
        let after_overlaps = r.maps.range(ptr..end).next().is_some();
        if before_overlaps || after_overlaps {
            return Err(Error::invalid(format!(
                "range [{ptr:#x}, {end:#x}) overlaps an existing mapping"
            )));
        }
        // SAFETY: the range lies inside a reservation of this context and overlaps no mapping,
        // so it is PROT_NONE address space no Rust reference points into.
        unsafe { sys::map_fixed_shared(ptr, size, &phys.fd, offset as u64, sys::prot_of(mode))? };
        r.maps.insert(
            ptr,
            Mapped {
                len: size,
                mode,
                mem: mem.clone(),
                offset,
                id,
            },
        );
        Ok(())
    }

    /// Unmaps every mapping inside `[ptr, ptr+size)`; each must lie wholly inside it.
    ///
    /// # Safety
    /// No pending command uses the range.
    pub(crate) unsafe fn unmap(&mut self, ptr: u64, size: usize) -> Result<()> {
        let ptr = to_usize(ptr)?;
        let r = self.reservation_mut(ptr, size)?;
        let end = ptr + size;
        let straddles_start = r
            .maps
            .range(..ptr)
            .next_back()
            .is_some_and(|(&s, m)| s + m.len > ptr);
        let inside: Vec<usize> = r.maps.range(ptr..end).map(|(&s, _)| s).collect();
        let straddles_end = inside.last().is_some_and(|&s| s + r.maps[&s].len > end);
        if straddles_start || straddles_end {
            return Err(Error::invalid(format!(
                "unmap of [{ptr:#x}, {end:#x}) cuts through a mapping (unmap whole mappings)"
            )));
        }
        let ids: std::collections::BTreeSet<u64> = inside.iter().map(|s| r.maps[s].id).collect();
        if r.maps
            .iter()
            .any(|(&s, m)| (s < ptr || s >= end) && ids.contains(&m.id))
        {
            return Err(Error::invalid(format!(
                "unmap of [{ptr:#x}, {end:#x}) covers only part of a mapping (unmap whole mappings)"
            )));
        }
        if inside.is_empty() {
            return Err(Error::invalid(format!(
                "unmap of [{ptr:#x}, {end:#x}), which holds no mapping"
            )));
        }
        // SAFETY: the range lies inside our reservation; the caller guarantees nothing uses it.
        unsafe { sys::map_fixed_none(ptr, size)? };
        for s in inside {
            r.maps.remove(&s);
        }
        Ok(())
    }

    /// Splits the mapping that strictly contains `at` into two.
    fn split(r: &mut Reservation, at: usize) {
        let found = r
            .maps
            .range(..at)
            .next_back()
            .filter(|(&s, m)| s + m.len > at)
            .map(|(&s, _)| s);
        if let Some(m) = found.and_then(|s| r.maps.get_mut(&s).map(|m| (s, m))) {
            let (s, m) = m;
            let head = at - s;
            let tail = Mapped {
                len: m.len - head,
                mode: m.mode,
                mem: m.mem.clone(),
                offset: m.offset + head,
                id: m.id,
            };
            m.len = head;
            r.maps.insert(at, tail);
        }
    }

    /// Checks that `[ptr, end)` is fully mapped; returns the modes of the pieces.
    fn covered(r: &Reservation, ptr: usize, end: usize) -> Result<Vec<AccessMode>> {
        let mut cursor = ptr;
        let mut modes = Vec::new();
        let first = r
            .maps
            .range(..=ptr)
            .next_back()
            .filter(|(&s, m)| s + m.len > ptr)
            .map(|(&s, _)| s);
        for (&s, m) in r.maps.range(first.unwrap_or(ptr)..end) {
            if s > cursor {
                break;
            }
            cursor = cursor.max(s + m.len);
            modes.push(m.mode);
        }
        if cursor < end {
            return Err(Error::invalid(format!(
                "range [{ptr:#x}, {end:#x}) is not fully mapped"
            )));
        }
        Ok(modes)
    }

    pub(crate) fn set_access(&mut self, ptr: u64, size: usize, mode: AccessMode) -> Result<()> {
        let ptr = to_usize(ptr)?;
        check_page_multiple("address", ptr)?;
        check_page_multiple("size", size)?;
        let r = self.reservation_mut(ptr, size)?;
        let end = ptr + size;
        Self::covered(r, ptr, end)?;
        // SAFETY: the range is mapped by this context (checked above); changing its protection
        // affects only memory the caller manages through this API.
        unsafe { rustix::mm::mprotect(ptr as *mut std::ffi::c_void, size, sys::mprotect_of(mode)) }
            .map_err(|e| sys::os_err(sycl_backend::Errc::Runtime, "mprotect", e))?;
        Self::split(r, ptr);
        Self::split(r, end);
        for (_, m) in r.maps.range_mut(ptr..end) {
            m.mode = mode;
        }
        Ok(())
    }

    pub(crate) fn get_access(&mut self, ptr: u64, size: usize) -> Result<AccessMode> {
        let ptr = to_usize(ptr)?;
        let r = self.reservation_mut(ptr, size.max(1))?;
        let modes = Self::covered(r, ptr, ptr + size.max(1))?;
        match modes.split_first() {
            Some((&first, rest)) if rest.iter().all(|&m| m == first) => Ok(first),
            _ => Err(Error::invalid("the range has more than one access mode")),
        }
    }
}
