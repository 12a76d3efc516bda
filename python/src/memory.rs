//! USM memory objects: allocation, copies, fills, DLPack both ways (`__dlpack__`,
//! `from_dlpack`) and `__cuda_array_interface__`.

use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sycl::virtual_mem::Mapping;
use sycl::{
    AccessMode, BackendKind, Errc, ForeignKind, ForeignMemory, ForeignReady, Usm, UsmKind, UsmRange,
};

use crate::dlpack::{self, DlDataType};
use crate::errors::{error, IntoPy};
use crate::runtime::{Device, Queue};

/// USM memory (`malloc_device`, `malloc_host`, `malloc_shared`, opened from another process
/// with `ipc.memory.open`, another library's tensor wrapped with `from_dlpack`, or physical
/// memory mapped with `PhysicalMemory.map`), seen as `nbytes` bytes. Commands on it go through
/// the queue it was made with.
///
/// The memory lives until the object, and every DLPack consumer of it (a NumPy array, a torch
/// tensor, ...), are gone; `free()` / `ipc.memory.close()` release it earlier and refuse
/// (`InvalidError`) while consumers still hold it (it is then released with the last).
/// Memory from `from_dlpack` keeps its producer's tensor alive the same way and is never
/// freed by sycl-rs.
#[pyclass(module = "sycl_rs", frozen)]
pub struct Memory {
    owner: Mutex<Option<Owner>>,
    /// The bytes this object exposes, from `start` (an IPC open may expose part of an
    /// allocation: fewer bytes, or a tensor's storage inside a CUDA block).
    start: usize,
    nbytes: usize,
    queue: sycl::Queue,
    opened: bool,
    /// Wrapped with `from_dlpack`: its producer owns it.
    foreign: bool,
}

/// What a `Memory` owns: USM (allocated, opened or foreign), a virtual-memory mapping, or a
/// view of memory something else owns (a symmetric buffer's part).
enum Owner {
    Usm(Usm<u8>),
    /// Shared only for the time of a `set_access_mode` (which runs without the owner's lock).
    Mapping(Arc<Mapping>),
    /// Bytes of an allocation its owner releases (the range keeps the allocation alive).
    View(UsmRange<u8>),
}

impl Owner {
    fn range(&self, bytes: std::ops::Range<usize>) -> sycl::Result<UsmRange<u8>> {
        match self {
            Owner::Usm(u) => u.range(bytes),
            Owner::Mapping(m) => m.as_range::<u8>()?.sub(bytes),
            Owner::View(v) => v.sub(bytes),
        }
    }

    fn kind(&self) -> UsmKind {
        match self {
            Owner::Usm(u) => u.kind(),
            // Mappings are device memory (host-accessible on CPU devices).
            Owner::Mapping(_) => UsmKind::Device,
            Owner::View(v) => v.kind(),
        }
    }

    fn is_read_only(&self) -> bool {
        match self {
            Owner::Usm(u) => u.is_read_only(),
            Owner::Mapping(m) => m.as_range::<u8>().is_ok_and(|r| r.is_read_only()),
            Owner::View(v) => v.is_read_only(),
        }
    }
}

impl Memory {
    pub fn new(usm: Usm<u8>, nbytes: usize, queue: sycl::Queue, opened: bool) -> Memory {
        Memory::window(usm, 0, nbytes, queue, opened)
    }

    /// Bytes `start..start + nbytes` of `usm` (checked by the caller).
    pub fn window(
        usm: Usm<u8>,
        start: usize,
        nbytes: usize,
        queue: sycl::Queue,
        opened: bool,
    ) -> Memory {
        Memory {
            owner: Mutex::new(Some(Owner::Usm(usm))),
            start,
            nbytes,
            queue,
            opened,
            foreign: false,
        }
    }

    /// A view of `range`, for commands of `queue`: its owner releases it, never this object
    /// (`free` is refused).
    pub fn view(range: UsmRange<u8>, queue: sycl::Queue) -> Memory {
        Memory {
            nbytes: range.byte_len(),
            owner: Mutex::new(Some(Owner::View(range))),
            start: 0,
            queue,
            opened: false,
            foreign: false,
        }
    }

    /// All of a mapping, for commands of `queue`.
    pub fn of_mapping(mapping: Mapping, queue: sycl::Queue) -> Memory {
        Memory {
            nbytes: mapping.size(),
            owner: Mutex::new(Some(Owner::Mapping(Arc::new(mapping)))),
            start: 0,
            queue,
            opened: false,
            foreign: false,
        }
    }

    /// A range of the bytes `offset..offset + len` (checked), keeping the memory alive.
    pub fn range(&self, offset: usize, len: usize) -> PyResult<UsmRange<u8>> {
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.nbytes)
            .ok_or_else(|| {
                error(
                    Errc::Invalid,
                    format!(
                        "bytes {offset}..{offset}+{len} are outside memory of {} bytes",
                        self.nbytes
                    ),
                )
            })?;
        self.with_owner(|o| o.range(self.start + offset..self.start + end))?
            .py_err()
    }

    /// Takes the USM owner out (free, close); a mapping stays (it is unmapped with `unmap`).
    pub fn take(&self) -> PyResult<Usm<u8>> {
        let mut guard = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.take() {
            Some(Owner::Usm(u)) => Ok(u),
            Some(view @ Owner::View(_)) => {
                *guard = Some(view);
                Err(error(
                    Errc::Invalid,
                    "a part of a symmetric buffer is released with the buffer (its close()), \
                     not freed or closed",
                ))
            }
            Some(mapping) => {
                *guard = Some(mapping);
                Err(error(
                    Errc::Invalid,
                    "a mapping is released with unmap(), not freed or closed",
                ))
            }
            None => Err(error(
                Errc::Invalid,
                "the memory was already freed, closed or unmapped",
            )),
        }
    }

    /// `f` of the mapping this memory is, or `InvalidError`.
    fn with_mapping<R>(&self, f: impl FnOnce(&Arc<Mapping>) -> R) -> PyResult<R> {
        match self.with_owner(|o| match o {
            Owner::Mapping(m) => Some(f(m)),
            Owner::Usm(_) | Owner::View(_) => None,
        })? {
            Some(r) => Ok(r),
            None => Err(error(
                Errc::Invalid,
                "this memory is not a mapping of physical memory (PhysicalMemory.map)",
            )),
        }
    }

    pub fn byte_len(&self) -> usize {
        self.nbytes
    }

    pub fn is_opened(&self) -> bool {
        self.opened
    }

    /// `f` of the owner, or `InvalidError` once freed, closed or unmapped.
    fn with_owner<R>(&self, f: impl FnOnce(&Owner) -> R) -> PyResult<R> {
        let guard = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .map(f)
            .ok_or_else(|| error(Errc::Invalid, "the memory was freed, closed or unmapped"))
    }

    fn read_only(&self) -> PyResult<bool> {
        self.with_owner(Owner::is_read_only)
    }

    fn kind(&self) -> PyResult<UsmKind> {
        self.with_owner(Owner::kind)
    }

    fn is_mapping(&self) -> bool {
        matches!(
            self.with_owner(|o| matches!(o, Owner::Mapping(_))),
            Ok(true)
        )
    }

    /// DLPack's device of this memory.
    fn dl_device(&self) -> PyResult<(i32, i32)> {
        let device = self.queue.device();
        let kind = self.kind()?;
        let id = device.index_in_platform() as i32;
        Ok(match device.backend() {
            // Host memory of another library (from_dlpack of a NumPy array).
            _ if kind == UsmKind::Unknown => (dlpack::KDL_CPU, 0),
            BackendKind::Cuda => match kind {
                UsmKind::Host => (dlpack::KDL_CUDA_HOST, 0),
                UsmKind::Shared => (dlpack::KDL_CUDA_MANAGED, id),
                _ => (dlpack::KDL_CUDA, id),
            },
            BackendKind::NativeCpu => (dlpack::KDL_CPU, 0),
            _ if kind != UsmKind::Device => (dlpack::KDL_CPU, 0),
            _ => (dlpack::KDL_ONEAPI, global_device_index(device)),
        })
    }

    /// `__dlpack__` of `shape` elements of `dtype` from the first byte.
    fn export(
        &self,
        dtype: DlDataType,
        shape: Vec<i64>,
        request: DlpackRequest<'_, '_>,
        py: Python<'_>,
    ) -> PyResult<Py<PyAny>> {
        request.check(self.dl_device()?)?;
        let versioned = request.max_version.is_some_and(|(major, _)| major >= 1);
        let read_only = self.read_only()?;
        if read_only && !versioned {
            return Err(PyBufferError::new_err(
                "the memory is read-only, which only DLPack 1.0 capsules can say: pass \
                 max_version=(1, 0) (NumPy >= 2.1, torch >= 2.5 do)",
            ));
        }
        // Consumers read at once on any stream: commands of ours on the memory finish first.
        py.detach(|| self.queue.wait()).py_err()?;
        let (device_type, device_id) = self.dl_device()?;
        let keep = self.range(0, self.nbytes)?;
        let pin = self.pin_mode(&keep)?;
        dlpack::capsule(
            py,
            dlpack::Export {
                keep,
                pin,
                read_only,
                device_type,
                device_id,
                dtype,
                shape,
            },
            versioned,
        )
    }

    /// For a mapping, a view that keeps its access mode read-write while a DLPack consumer
    /// holds it (`set_access_mode` is refused while views live): the consumer reads and
    /// writes the memory directly, and a protection change under it would fault.
    fn pin_mode(&self, keep: &UsmRange<u8>) -> PyResult<Option<sycl::UsmView<u8>>> {
        if !self.is_mapping() {
            return Ok(None);
        }
        if !keep.is_host_accessible() {
            return Err(PyBufferError::new_err(
                "DLPack export of a mapping the host cannot reach is not supported (nothing \
                 would keep set_access_mode from changing it under the consumer)",
            ));
        }
        keep.view().map(Some).map_err(|e| {
            PyBufferError::new_err(format!(
                "the mapping cannot be exported (a consumer reads and writes it directly): {e}"
            ))
        })
    }

    fn cuda_array_interface<'py>(
        &self,
        py: Python<'py>,
        dtype: DlDataType,
        shape: &[i64],
    ) -> PyResult<Bound<'py, PyDict>> {
        if self.is_mapping() {
            return Err(PyAttributeError::new_err(
                "__cuda_array_interface__ does not exist for mappings (set_access_mode could \
                 change them under the consumer)",
            ));
        }
        if self.queue.backend() != BackendKind::Cuda {
            return Err(PyAttributeError::new_err(
                "__cuda_array_interface__ exists only for CUDA memory",
            ));
        }
        py.detach(|| self.queue.wait()).py_err()?;
        let ptr = self.range(0, self.nbytes)?.as_ptr();
        let d = PyDict::new(py);
        d.set_item("shape", pyo3::types::PyTuple::new(py, shape)?)?;
        d.set_item("typestr", dlpack::typestr(dtype))?;
        d.set_item("data", (ptr, self.read_only()?))?;
        d.set_item("strides", py.None())?;
        // Our commands on it completed above: no stream to synchronise with.
        d.set_item("stream", py.None())?;
        d.set_item("version", 3)?;
        Ok(d)
    }
}

/// The index of `device` among every device (DLPack's kDLOneAPI device id).
fn global_device_index(device: &sycl::Device) -> i32 {
    sycl::Device::all()
        .iter()
        .position(|d| d == device)
        .map_or(0, |i| i as i32)
}

/// The bytes of any object with the buffer protocol (C-contiguous), as a byte buffer.
fn byte_buffer(obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    if let Ok(b) = PyBuffer::<u8>::get(obj) {
        return Ok(b);
    }
    let view = obj
        .py()
        .import("builtins")?
        .getattr("memoryview")?
        .call1((obj,))?
        .call_method1("cast", ("B",))
        .map_err(|e| {
            PyBufferError::new_err(format!(
                "needs a C-contiguous object with the buffer protocol: {e}"
            ))
        })?;
    PyBuffer::<u8>::get(&view)
}

fn shape_of(nbytes: usize, item: usize, shape: Option<Vec<i64>>) -> PyResult<Vec<i64>> {
    match shape {
        None => {
            if nbytes % item != 0 {
                return Err(error(
                    Errc::Invalid,
                    format!("{nbytes} bytes are not a whole number of {item}-byte elements"),
                ));
            }
            Ok(vec![(nbytes / item) as i64])
        }
        Some(shape) => {
            let count = shape.iter().try_fold(1usize, |acc, &d| {
                usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
            });
            match count.and_then(|c| c.checked_mul(item)) {
                Some(bytes) if bytes <= nbytes => Ok(shape),
                _ => Err(error(
                    Errc::Invalid,
                    format!("shape {shape:?} of {item}-byte elements does not fit {nbytes} bytes"),
                )),
            }
        }
    }
}

/// The keyword arguments of `__dlpack__`.
struct DlpackRequest<'a, 'py> {
    stream: Option<&'a Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
}

impl DlpackRequest<'_, '_> {
    /// Refuses what we cannot give: another device, a copy, a stream that is not an int.
    fn check(&self, here: (i32, i32)) -> PyResult<()> {
        if let Some(s) = self.stream {
            if !s.is_none() && s.extract::<i64>().is_err() {
                return Err(PyTypeError::new_err("stream must be an integer or None"));
            }
        }
        if let Some(d) = self.dl_device {
            if d != here {
                return Err(PyBufferError::new_err(format!(
                    "the memory is on DLPack device {here:?}, not {d:?} (no copies are made)"
                )));
            }
        }
        if self.copy == Some(true) {
            return Err(PyBufferError::new_err(
                "sycl_rs exports memory without copies (copy=True is not supported)",
            ));
        }
        Ok(())
    }
}

#[pymethods]
impl Memory {
    /// Bytes this object exposes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    fn __len__(&self) -> usize {
        self.nbytes
    }

    /// The device address of the first byte.
    #[getter]
    fn ptr(&self) -> PyResult<u64> {
        Ok(self.range(0, 0)?.as_ptr())
    }

    /// "device", "host" or "shared"; "unknown" for host memory of another library
    /// (`from_dlpack` of a NumPy array), as SYCL's `get_pointer_type` says.
    #[getter(kind)]
    fn kind_name(&self) -> PyResult<&'static str> {
        Ok(match self.kind()? {
            UsmKind::Device => "device",
            UsmKind::Host => "host",
            UsmKind::Shared => "shared",
            UsmKind::Unknown => "unknown",
        })
    }

    #[getter]
    fn device(&self) -> Device {
        self.queue.device().clone().into()
    }

    #[getter]
    fn queue(&self) -> Queue {
        Queue {
            inner: self.queue.clone(),
        }
    }

    /// Whether it was opened from another process's handle.
    #[getter]
    fn opened(&self) -> bool {
        self.opened
    }

    /// Whether it wraps another library's tensor (`from_dlpack`).
    #[getter]
    fn foreign(&self) -> bool {
        self.foreign
    }

    /// Whether it is a mapping of physical memory (`PhysicalMemory.map`).
    #[getter]
    fn mapped(&self) -> bool {
        self.is_mapping()
    }

    /// A mapping's access mode (`get_access_mode`): "read_write", "read" or "none".
    /// `InvalidError` for other memory.
    #[getter]
    fn access_mode(&self) -> PyResult<&'static str> {
        let mode = self.with_mapping(|m| m.access_mode())?.py_err()?;
        Ok(crate::virtual_mem::mode_name(mode))
    }

    /// `set_access_mode` of a mapping: "read_write", "read" or "none". Waits for the commands
    /// that use it; afterwards commands the mode forbids raise `InvalidError` (instead of
    /// faulting). Refused (`InvalidError`) while DLPack consumers of the mapping are alive
    /// (they access it directly), and for other memory.
    fn set_access_mode(&self, py: Python<'_>, mode: &str) -> PyResult<()> {
        let mode = crate::virtual_mem::mode(mode)?;
        // Out of the owner's lock before the GIL goes: another thread may take the lock
        // while holding the GIL.
        let mapping = self.with_mapping(Arc::clone)?;
        py.detach(|| mapping.set_access_mode(mode)).py_err()
    }

    /// Unmaps a mapping now (`unmap`); refused (`InvalidError`) while DLPack consumers or
    /// other references to it are alive (it is then unmapped with the last of them), and for
    /// other memory.
    fn unmap(&self, py: Python<'_>) -> PyResult<()> {
        let mut guard = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.take() {
            Some(Owner::Mapping(m)) => match Arc::try_unwrap(m) {
                Ok(m) => {
                    drop(guard);
                    py.detach(|| m.unmap()).py_err()
                }
                Err(m) => {
                    *guard = Some(Owner::Mapping(m));
                    Err(error(
                        Errc::Invalid,
                        "another thread is changing the mapping's access mode",
                    ))
                }
            },
            other => {
                let freed = other.is_none();
                *guard = other;
                Err(error(
                    Errc::Invalid,
                    if freed {
                        "the memory was already freed, closed or unmapped"
                    } else {
                        "unmap() releases mappings of physical memory; free() or \
                         ipc.memory.close() release other memory"
                    },
                ))
            }
        }
    }

    /// Whether commands may only read it (a tensor its producer lent read-only): copies into
    /// it and fills raise `InvalidError`.
    #[getter(read_only)]
    fn read_only_py(&self) -> PyResult<bool> {
        self.read_only()
    }

    /// Copies `src` in at byte `offset`: another `Memory` (a device copy) or any C-contiguous
    /// object with the buffer protocol (bytes, bytearray, NumPy arrays...). Waits.
    #[pyo3(signature = (src, offset=0))]
    fn copy_from(&self, py: Python<'_>, src: &Bound<'_, PyAny>, offset: usize) -> PyResult<()> {
        if let Ok(other) = src.cast::<Memory>() {
            let other = other.get();
            let from = other.range(0, other.nbytes)?;
            let to = self.range(offset, other.nbytes)?;
            return py
                .detach(|| self.queue.copy(&from, &to, &[])?.wait())
                .py_err();
        }
        let buffer = byte_buffer(src)?;
        // A copy first: a Rust slice must not cover memory that anything else may write while
        // the device reads it (the source could itself be USM exported through DLPack).
        let bytes = buffer.to_vec(py)?;
        let to = self.range(offset, bytes.len())?;
        py.detach(|| self.queue.write(&to, &bytes)).py_err()
    }

    /// Copies `nbytes` bytes from byte `offset` out: into `dst` (a writable buffer of exactly
    /// that size) or, without `dst`, into new `bytes`. Waits.
    #[pyo3(signature = (dst=None, offset=0, nbytes=None))]
    fn copy_to<'py>(
        &self,
        py: Python<'py>,
        dst: Option<&Bound<'py, PyAny>>,
        offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let target = dst.map(byte_buffer).transpose()?;
        let len = match (&target, nbytes) {
            (Some(b), _) => b.len_bytes(),
            (None, Some(n)) => n,
            (None, None) => self.nbytes.saturating_sub(offset),
        };
        let from = self.range(offset, len)?;
        let mut bytes = vec![0u8; len];
        py.detach(|| self.queue.read(&from, &mut bytes)).py_err()?;
        match target {
            Some(b) => {
                if b.readonly() {
                    return Err(PyBufferError::new_err("dst is read-only"));
                }
                b.copy_from_slice(py, &bytes)?;
                Ok(None)
            }
            None => Ok(Some(PyBytes::new(py, &bytes))),
        }
    }

    /// Fills bytes `offset..offset + nbytes` (default: to the end) with `value`: an int (one
    /// byte, `memset`) or a bytes pattern of 1, 2, 4 or 8 bytes repeated (`fill`). Waits.
    #[pyo3(signature = (value, offset=0, nbytes=None))]
    fn fill(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        offset: usize,
        nbytes: Option<usize>,
    ) -> PyResult<()> {
        let len = nbytes.unwrap_or(self.nbytes.saturating_sub(offset));
        let range = self.range(offset, len)?;
        if let Ok(byte) = value.extract::<u8>() {
            return py
                .detach(|| self.queue.memset(&range, byte, &[])?.wait())
                .py_err();
        }
        let pattern: Vec<u8> = value
            .extract()
            .map_err(|_| PyTypeError::new_err("fill takes an int in 0..=255 or a bytes pattern"))?;
        fn typed<T: bytemuck::Pod>(
            q: &sycl::Queue,
            r: &UsmRange<u8>,
            p: &[u8],
        ) -> sycl::Result<()> {
            let r = r.cast::<T>()?;
            q.fill(&r, bytemuck::pod_read_unaligned::<T>(p), &[])?
                .wait()
        }
        if len % pattern.len().max(1) != 0 {
            return Err(error(
                Errc::Invalid,
                format!(
                    "{len} bytes are not a whole number of {}-byte patterns",
                    pattern.len()
                ),
            ));
        }
        py.detach(|| match pattern.len() {
            1 => typed::<u8>(&self.queue, &range, &pattern),
            2 => typed::<u16>(&self.queue, &range, &pattern),
            4 => typed::<u32>(&self.queue, &range, &pattern),
            8 => typed::<u64>(&self.queue, &range, &pattern),
            n => Err(sycl::Error::new(
                Errc::Invalid,
                format!("a fill pattern has 1, 2, 4 or 8 bytes, not {n}"),
            )),
        })
        .py_err()
    }

    /// Frees the memory now (allocated memory; opened memory is closed with
    /// `ipc.memory.close`). Refused (`InvalidError`) while DLPack consumers hold it; it is then
    /// freed when the last one lets go.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        if self.foreign {
            return Err(error(
                Errc::Invalid,
                "memory from from_dlpack belongs to its producer and is not freed here: drop \
                 the object (and what was made from it) to let the producer's tensor go",
            ));
        }
        if self.opened {
            return Err(error(
                Errc::Invalid,
                "opened memory is closed with ipc.memory.close, not freed",
            ));
        }
        let usm = self.take()?;
        py.detach(|| usm.free()).py_err()
    }

    /// DLPack export as a 1-D uint8 tensor of `nbytes` (see `as_array` for other types).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let (dtype, _) = dlpack::dtype("uint8").expect("uint8");
        let request = DlpackRequest {
            stream,
            max_version,
            dl_device,
            copy,
        };
        self.export(dtype, vec![self.nbytes as i64], request, py)
    }

    /// (device type, device id) in DLPack's terms: (2, ordinal) CUDA device memory, (3, 0)
    /// CUDA host memory, (13, ordinal) CUDA managed memory, (1, 0) memory the host reaches
    /// directly (native CPU, OpenCL/Level Zero host and shared USM), (14, index) other
    /// device memory (kDLOneAPI).
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        self.dl_device()
    }

    /// CUDA Array Interface v3 (uint8, 1-D); an AttributeError on other backends.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (dtype, _) = dlpack::dtype("uint8").expect("uint8");
        self.cuda_array_interface(py, dtype, &[self.nbytes as i64])
    }

    /// A typed view for DLPack consumers: `numpy.from_dlpack(mem.as_array("float32", (4, 8)))`.
    /// `shape` defaults to all of the memory as 1-D.
    #[pyo3(signature = (dtype="uint8", shape=None))]
    fn as_array(slf: Bound<'_, Self>, dtype: &str, shape: Option<Vec<i64>>) -> PyResult<ArrayView> {
        let (dl, item) = dlpack::dtype(dtype)
            .ok_or_else(|| PyTypeError::new_err(format!("unsupported dtype `{dtype}`")))?;
        let shape = shape_of(slf.get().nbytes, item, shape)?;
        Ok(ArrayView {
            memory: slf.unbind(),
            dtype: dl,
            dtype_name: dtype.to_owned(),
            shape,
        })
    }

    fn __repr__(&self) -> String {
        let kind = self.kind_name().unwrap_or("freed");
        format!(
            "<sycl_rs.Memory {} bytes of {kind} USM on {}{}>",
            self.nbytes,
            self.queue.device().name(),
            if self.opened {
                ", opened"
            } else if self.foreign {
                ", foreign"
            } else {
                ""
            }
        )
    }
}

/// A typed, shaped view of a `Memory` for DLPack and `__cuda_array_interface__` consumers.
#[pyclass(module = "sycl_rs", frozen)]
pub struct ArrayView {
    memory: Py<Memory>,
    dtype: DlDataType,
    dtype_name: String,
    shape: Vec<i64>,
}

#[pymethods]
impl ArrayView {
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.shape.clone()
    }

    #[getter]
    fn dtype(&self) -> &str {
        &self.dtype_name
    }

    #[getter]
    fn memory(&self, py: Python<'_>) -> Py<Memory> {
        self.memory.clone_ref(py)
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = DlpackRequest {
            stream,
            max_version,
            dl_device,
            copy,
        };
        self.memory
            .get()
            .export(self.dtype, self.shape.clone(), request, py)
    }

    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        self.memory.get().dl_device()
    }

    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.memory
            .get()
            .cuda_array_interface(py, self.dtype, &self.shape)
    }
}

fn alloc(py: Python<'_>, kind: UsmKind, nbytes: usize, queue: &Queue) -> PyResult<Memory> {
    let q = queue.inner.clone();
    let usm = py
        .detach(|| Usm::<u8>::alloc(kind, nbytes, q.device(), q.context()))
        .py_err()?;
    Ok(Memory::new(usm, nbytes, q, false))
}

/// `nbytes` of device USM on `queue`'s device.
#[pyfunction]
fn malloc_device(py: Python<'_>, nbytes: usize, queue: &Queue) -> PyResult<Memory> {
    alloc(py, UsmKind::Device, nbytes, queue)
}

/// `nbytes` of host USM (pinned host memory the device reaches).
#[pyfunction]
fn malloc_host(py: Python<'_>, nbytes: usize, queue: &Queue) -> PyResult<Memory> {
    alloc(py, UsmKind::Host, nbytes, queue)
}

/// `nbytes` of shared USM (migrates between host and device).
#[pyfunction]
fn malloc_shared(py: Python<'_>, nbytes: usize, queue: &Queue) -> PyResult<Memory> {
    alloc(py, UsmKind::Shared, nbytes, queue)
}

/// What sycl-rs makes of a DLPack device type: the memory's kind, or why not.
fn foreign_kind(device_type: i32) -> PyResult<ForeignKind> {
    Ok(match device_type {
        dlpack::KDL_CPU => ForeignKind::System,
        dlpack::KDL_CUDA => ForeignKind::Driver(UsmKind::Device),
        dlpack::KDL_CUDA_HOST => ForeignKind::Driver(UsmKind::Host),
        dlpack::KDL_CUDA_MANAGED => ForeignKind::Driver(UsmKind::Shared),
        other => {
            return Err(error(
                Errc::BackendMismatch,
                format!(
                    "DLPack device type {other}: from_dlpack wraps CPU memory (1) and CUDA \
                     memory (2 device, 3 host, 13 managed)"
                ),
            ))
        }
    })
}

/// The CUDA device of DLPack's ordinal `id`.
fn cuda_device(id: i32) -> PyResult<sycl::Device> {
    sycl::Device::all()
        .into_iter()
        .find(|d| d.backend() == BackendKind::Cuda && d.index_in_platform() as i64 == id as i64)
        .ok_or_else(|| {
            error(
                Errc::BackendMismatch,
                format!("the tensor is on CUDA device {id}, and sycl-rs has no such CUDA device"),
            )
        })
}

/// The queue commands on a tensor of DLPack device `(device_type, id)` go through: `queue`,
/// checked, or a new one on the default context of the tensor's device (native CPU for host
/// memory).
fn queue_for(
    py: Python<'_>,
    (device_type, id): (i32, i32),
    queue: Option<&Queue>,
) -> PyResult<sycl::Queue> {
    let cuda = device_type != dlpack::KDL_CPU;
    if let Some(q) = queue {
        let q = &q.inner;
        if cuda && q.backend() != BackendKind::Cuda {
            return Err(error(
                Errc::BackendMismatch,
                format!(
                    "a CUDA tensor needs a CUDA queue, not a {} one",
                    q.backend()
                ),
            ));
        }
        if cuda
            && device_type != dlpack::KDL_CUDA_HOST
            && q.device().index_in_platform() as i64 != id as i64
        {
            return Err(error(
                Errc::Invalid,
                format!(
                    "the tensor is on CUDA device {id}, the queue on CUDA device {}",
                    q.device().index_in_platform()
                ),
            ));
        }
        return Ok(q.clone());
    }
    let device = if cuda {
        cuda_device(id)?
    } else {
        sycl::Device::native_cpu()
    };
    py.detach(|| {
        let context = sycl::Context::default_for(&device)?;
        sycl::Queue::with_context(&context, &device, Default::default())
    })
    .py_err()
}

/// `from_dlpack(obj, queue=None, *, sync="host")`: the memory of `obj` (anything with
/// `__dlpack__` and `__dlpack_device__`: a NumPy array, a torch or CuPy tensor) as a
/// `Memory`, without a copy (`ptr` is the tensor's first byte), for commands of `queue`
/// (default: a queue on the tensor's device: native CPU for host memory, the CUDA device of
/// the tensor's ordinal).
///
/// The producer's tensor stays alive as long as the `Memory` and everything made from it
/// (ranges, DLPack exports) live, and its deleter is called once, after the last of them and
/// after the commands that used the memory. The tensor must be compact row-major; tensors
/// lent read-only (DLPack 1.0's flag) give `read_only` memory that commands may not write.
///
/// CUDA device tensors and the producer's work on them: with `sync="host"` (the default)
/// the tensor is asked for the legacy default stream (`stream=1`), which the host waits for
/// here, after which commands of any queue may use it; with `sync="queue"` it is asked for
/// `queue`'s own stream (`Queue.cuda_stream`), so the producer orders its pending work on it
/// before `queue`'s later commands (torch: an event on its current stream that the queue's
/// stream waits for) and nothing waits on the host: cheaper, but only `queue`'s commands
/// are ordered after that work; with `sync="none"` (DLPack's `stream=-1`) nothing is ordered:
/// the caller orders the producer's work before its commands (torch: an event recorded on
/// its stream that the queue's stream waits for). Either way, the producer (and NumPy or
/// torch code holding the tensor) may still write the memory at any time: ordering that
/// with sycl-rs commands is the program's business, as between CUDA streams.
///
/// Errors: `BufferError` for a tensor that cannot be wrapped (strided, vector or sub-byte
/// dtype, overflowing shape, null data); `BackendMismatchError` for memory of other DLPack
/// devices, or a queue of another backend; `InvalidError` when the CUDA driver does not
/// confirm the pointer's kind, device and bounds, or for a queue of another device;
/// `FeatureNotSupportedError` for host memory with a queue whose device lacks
/// `usm_system_allocations`; `TypeError` for objects without the DLPack methods;
/// `ValueError` for a `sync` other than "host", "queue" and "none".
#[pyfunction]
#[pyo3(signature = (obj, queue=None, *, sync="host"))]
fn from_dlpack(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    queue: Option<&Queue>,
    sync: &str,
) -> PyResult<Memory> {
    #[derive(PartialEq)]
    enum Sync {
        Host,
        Queue,
        Caller,
    }
    let sync = match sync {
        "host" => Sync::Host,
        "queue" => Sync::Queue,
        "none" => Sync::Caller,
        other => {
            return Err(PyValueError::new_err(format!(
                "sync={other:?}: \"host\", \"queue\" or \"none\""
            )))
        }
    };
    let device: (i32, i32) = obj
        .call_method0("__dlpack_device__")
        .and_then(|d| d.extract())
        .map_err(|e| {
            PyTypeError::new_err(format!(
                "from_dlpack needs an object with __dlpack__ and __dlpack_device__: {e}"
            ))
        })?;
    let kind = foreign_kind(device.0)?;
    let q = queue_for(py, device, queue)?;
    // Device memory: the legacy default stream, which from_foreign waits for, or the queue's
    // own, which the producer orders its work before. Host memory, pinned included (torch's
    // pinned tensors are CPU tensors and refuse a stream): none.
    // With sync="none", DLPack's -1: the producer synchronizes nothing (the caller orders).
    let device_memory = matches!(device.0, dlpack::KDL_CUDA | dlpack::KDL_CUDA_MANAGED);
    let queue_stream = q.cuda_stream().filter(|_| device_memory);
    let stream = match (&sync, queue_stream) {
        (_, None) => device_memory.then_some(1i64),
        (Sync::Host, Some(_)) => Some(1),
        (Sync::Queue, Some(s)) => Some(s as i64),
        (Sync::Caller, Some(_)) => Some(-1),
    };
    let ordered = queue_stream.is_some() && sync != Sync::Host;
    let kwargs = PyDict::new(py);
    kwargs.set_item("stream", stream)?;
    kwargs.set_item("max_version", (1u32, 0u32))?;
    let capsule = match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        // A producer older than DLPack 1.0 takes no max_version: the legacy capsule.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item("max_version")?;
            obj.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    let taken = dlpack::take(&capsule, device)?;
    drop(capsule);
    let nbytes = taken.nbytes;
    let memory = ForeignMemory {
        ptr: taken.ptr,
        bytes: nbytes,
        kind,
        ready: match ordered {
            true => ForeignReady::Ordered,
            false => ForeignReady::DefaultQueue,
        },
        access: if taken.read_only {
            AccessMode::Read
        } else {
            AccessMode::ReadWrite
        },
    };
    let owner = Box::new(taken.owner);
    let (dev, ctx) = (q.device().clone(), q.context().clone());
    let usm = py
        .detach(|| {
            // The contract of `Usm::from_foreign`, point by point:
            // 1. the bytes are the DLPack tensor's, `nbytes` from its checked compact shape at
            //    data + byte_offset, on the device type it names (host memory of this process
            //    for kDLCPU; CUDA memory the driver confirms for the others); DLPack keeps
            //    them allocated until the managed tensor's deleter runs, which `owner` does
            //    only when dropped.
            // 2. `access` is read-only when the producer flagged the tensor read-only; a
            //    legacy capsule cannot say so, and DLPack then lends the tensor writable.
            // 3. this package never makes Rust references over memory (no host borrows; the
            //    crate refuses them for foreign memory too); the producer's own accesses are
            //    raw (NumPy, C, CUDA streams), their races with our commands the program's
            //    to order, as documented above.
            // 4. dropping `owner` only calls the tensor's deleter (TensorOwner).
            // SAFETY: points 1-4 above are the four promises `from_foreign` asks for.
            unsafe { Usm::<u8>::from_foreign(memory, &dev, &ctx, owner) }
        })
        .py_err()?;
    let mut m = Memory::new(usm, nbytes, q, false);
    m.foreign = true;
    Ok(m)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Memory>()?;
    m.add_class::<ArrayView>()?;
    m.add_function(wrap_pyfunction!(malloc_device, m)?)?;
    m.add_function(wrap_pyfunction!(malloc_host, m)?)?;
    m.add_function(wrap_pyfunction!(malloc_shared, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    Ok(())
}
