//! USM memory objects: allocation, copies, fills, DLPack and `__cuda_array_interface__`.

use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sycl::{BackendKind, Errc, Usm, UsmKind, UsmRange};

use crate::dlpack::{self, DlDataType};
use crate::errors::{error, IntoPy};
use crate::runtime::{Device, Queue};

/// USM memory (`malloc_device`, `malloc_host`, `malloc_shared`, or opened from another
/// process with `ipc.memory.open`), seen as `nbytes` bytes. Commands on it go through the
/// queue it was made with.
///
/// The memory lives until the object, and every DLPack consumer of it (a NumPy array, a torch
/// tensor, ...), are gone; `free()` / `ipc.memory.close()` release it earlier and refuse
/// (`InvalidError`) while consumers still hold it (it is then released with the last).
#[pyclass(module = "sycl_rs", frozen)]
pub struct Memory {
    usm: Mutex<Option<Usm<u8>>>,
    /// The bytes this object exposes, from `start` (an IPC open may expose part of an
    /// allocation: fewer bytes, or a tensor's storage inside a CUDA block).
    start: usize,
    nbytes: usize,
    queue: sycl::Queue,
    opened: bool,
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
            usm: Mutex::new(Some(usm)),
            start,
            nbytes,
            queue,
            opened,
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
        let guard = self.usm.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(usm) => usm.range(self.start + offset..self.start + end).py_err(),
            None => Err(error(Errc::Invalid, "the memory was freed or closed")),
        }
    }

    /// Takes the owner out (free, close).
    pub fn take(&self) -> PyResult<Usm<u8>> {
        self.usm
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| error(Errc::Invalid, "the memory was already freed or closed"))
    }

    pub fn byte_len(&self) -> usize {
        self.nbytes
    }

    pub fn is_opened(&self) -> bool {
        self.opened
    }

    fn kind(&self) -> PyResult<UsmKind> {
        let guard = self.usm.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .map(Usm::kind)
            .ok_or_else(|| error(Errc::Invalid, "the memory was freed or closed"))
    }

    /// DLPack's device of this memory.
    fn dl_device(&self) -> PyResult<(i32, i32)> {
        let device = self.queue.device();
        let kind = self.kind()?;
        let id = device.index_in_platform() as i32;
        Ok(match device.backend() {
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
        // Consumers read at once on any stream: commands of ours on the memory finish first.
        py.detach(|| self.queue.wait()).py_err()?;
        let (device_type, device_id) = self.dl_device()?;
        let keep = self.range(0, self.nbytes)?;
        dlpack::capsule(
            py,
            dlpack::Export {
                keep,
                device_type,
                device_id,
                dtype,
                shape,
            },
            request.max_version.is_some_and(|(major, _)| major >= 1),
        )
    }

    fn cuda_array_interface<'py>(
        &self,
        py: Python<'py>,
        dtype: DlDataType,
        shape: &[i64],
    ) -> PyResult<Bound<'py, PyDict>> {
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
        d.set_item("data", (ptr, false))?;
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

    /// "device", "host" or "shared".
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
            if self.opened { ", opened" } else { "" }
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Memory>()?;
    m.add_class::<ArrayView>()?;
    m.add_function(wrap_pyfunction!(malloc_device, m)?)?;
    m.add_function(wrap_pyfunction!(malloc_host, m)?)?;
    m.add_function(wrap_pyfunction!(malloc_shared, m)?)?;
    Ok(())
}
