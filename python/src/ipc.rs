//! `sycl_rs.ipc`: handles, memory / physical memory / event export and open, and the rank
//! channel.

use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sycl::ipc::transport::{Channel as RawChannel, Listener as RawListener, PeerPolicy};
use sycl::ipc::Handle as RawHandle;
use sycl::Errc;

use crate::errors::{error, IntoPy};
use crate::memory::Memory;
use crate::runtime::{Context, Device, Event, Queue};
use crate::virtual_mem::PhysicalMemory;

/// An IPC handle: bytes naming memory, physical memory or an event of its exporter
/// (`sycl::ipc::Handle`). `bytes(handle)` / `to_bytes()` are what another process opens.
///
/// Handles of backends that share memory through descriptors (native CPU, Level Zero,
/// OpenCL) carry them when they come from `get`, a `Channel`, or `multiprocessing` (whose
/// pickler passes the descriptors; see `sycl_rs.ipc`). From bytes alone, opening takes the
/// descriptors from the exporter with `pidfd_getfd`, which needs ptrace permission over it.
/// Plain `pickle` refuses such handles rather than dropping their descriptors silently.
#[pyclass(module = "sycl_rs.ipc", frozen, weakref)]
pub struct Handle {
    inner: Mutex<Option<RawHandle>>,
}

impl Handle {
    fn new(h: RawHandle) -> Handle {
        Handle {
            inner: Mutex::new(Some(h)),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&RawHandle) -> PyResult<R>) -> PyResult<R> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(h) => f(h),
            None => Err(error(Errc::Invalid, "the handle was put")),
        }
    }

    fn take(&self) -> PyResult<RawHandle> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| error(Errc::Invalid, "the handle was already put"))
    }
}

/// A `Handle`, or the bytes of one.
fn handle_arg(obj: &Bound<'_, PyAny>) -> PyResult<Py<Handle>> {
    if let Ok(h) = obj.cast::<Handle>() {
        return Ok(h.clone().unbind());
    }
    let bytes: Vec<u8> = obj
        .extract()
        .map_err(|_| PyTypeError::new_err("expected a sycl_rs.ipc.Handle or its bytes"))?;
    let h = RawHandle::from_bytes(bytes).py_err()?;
    Py::new(obj.py(), Handle::new(h))
}

#[pymethods]
impl Handle {
    /// Checks `data` (magic, version, length, checksum) and makes a handle of it.
    #[staticmethod]
    fn from_bytes(data: Vec<u8>) -> PyResult<Handle> {
        RawHandle::from_bytes(data).py_err().map(Handle::new)
    }

    /// The handle's bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.with(|h| Ok(PyBytes::new(py, h.as_bytes())))
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.to_bytes(py)
    }

    /// "memory", "physical_memory" or "event".
    #[getter]
    fn kind(&self) -> PyResult<String> {
        self.with(|h| Ok(h.kind().name().replace(' ', "_")))
    }

    #[getter]
    fn backend(&self) -> PyResult<String> {
        self.with(|h| Ok(h.backend().to_string()))
    }

    #[getter]
    fn exporter_pid(&self) -> PyResult<u32> {
        self.with(|h| Ok(h.exporter_pid()))
    }

    /// Bytes of the object it names (0 for events).
    #[getter]
    fn object_size(&self) -> PyResult<u64> {
        self.with(|h| Ok(h.object_size()))
    }

    /// How many descriptors travel with the handle (0: the bytes are all there is).
    #[getter]
    fn descriptor_count(&self) -> PyResult<usize> {
        self.with(|h| Ok(h.descriptor_count()))
    }

    /// Whether descriptors are attached (received with it), so opening needs no ptrace.
    #[getter]
    fn carries_descriptors(&self) -> PyResult<bool> {
        self.with(|h| Ok(h.carries_descriptors()))
    }

    /// New descriptors (ints, the caller closes them) duplicating the ones that travel with
    /// the handle, in order. For transports that pass descriptors (`multiprocessing`).
    fn _duplicate_descriptors(&self) -> PyResult<Vec<i32>> {
        self.with(|h| {
            Ok(h.duplicate_descriptors()
                .py_err()?
                .into_iter()
                .map(crate::fds::release)
                .collect())
        })
    }

    /// Rebuilds a handle from its bytes and the descriptors that came with them (duplicated:
    /// the caller still closes `fds`). Nothing about them is believed: opening checks them.
    #[staticmethod]
    fn _from_bytes_and_descriptors(data: Vec<u8>, fds: Vec<i32>) -> PyResult<Handle> {
        let owned = fds
            .into_iter()
            .map(crate::fds::duplicate)
            .collect::<PyResult<Vec<_>>>()?;
        RawHandle::from_bytes_with_descriptors(data, owned)
            .py_err()
            .map(Handle::new)
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(Py<PyAny>, (Py<PyBytes>,))> {
        let py = slf.py();
        let h = slf.get();
        if h.with(|h| Ok(h.descriptor_count()))? > 0 {
            return Err(PyTypeError::new_err(
                "this handle travels with descriptors, which pickle cannot carry: send it \
                 with sycl_rs.ipc.Channel.send_handle, through multiprocessing (its pickler \
                 passes them), or send handle.to_bytes() explicitly for a peer allowed to take \
                 them with pidfd_getfd",
            ));
        }
        let bytes = h.to_bytes(py)?.unbind();
        let from_bytes = py.get_type::<Handle>().getattr("from_bytes")?.unbind();
        Ok((from_bytes, (bytes,)))
    }

    fn __repr__(&self) -> String {
        match self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(h) => format!(
                "<sycl_rs.ipc.Handle {} of {} bytes from pid {} ({})>",
                h.kind().name(),
                h.object_size(),
                h.exporter_pid(),
                h.backend()
            ),
            None => "<sycl_rs.ipc.Handle (put)>".to_owned(),
        }
    }
}

/// Where an open lands: a queue, or a device (and context), or the default device.
pub(crate) fn open_target(
    py: Python<'_>,
    device: Option<&Bound<'_, PyAny>>,
    context: Option<&Context>,
    queue: Option<&Queue>,
) -> PyResult<sycl::Queue> {
    if let Some(q) = queue {
        return Ok(q.inner.clone());
    }
    let device = match device {
        None => None,
        Some(d) => Some(match d.extract::<Device>() {
            Ok(d) => d.inner,
            Err(_) => {
                let s: String = d.extract()?;
                py.detach(|| sycl::DeviceSelector::filter(&s)?.select())
                    .py_err()?
            }
        }),
    };
    let context = context.map(|c| c.inner.clone());
    py.detach(|| {
        let device = match (device, &context) {
            (Some(d), _) => d,
            (None, Some(c)) => c.devices()[0].clone(),
            (None, None) => sycl::Device::default_device()?,
        };
        let context = match context {
            Some(c) => c,
            None => sycl::Context::default_for(&device)?,
        };
        sycl::Queue::with_context(&context, &device, Default::default())
    })
    .py_err()
}

/// `ipc.memory.get(memory)`: a handle for another process to open `memory` with.
#[pyfunction]
fn memory_get(py: Python<'_>, memory: &Memory) -> PyResult<Handle> {
    let range = memory.range(0, memory.byte_len())?;
    py.detach(|| sycl::ipc::memory::get(&range))
        .py_err()
        .map(Handle::new)
}

/// `ipc.memory.put(handle)`: counts one `get` down; the last revokes the export.
#[pyfunction]
fn memory_put(py: Python<'_>, handle: &Handle) -> PyResult<()> {
    let h = handle.take()?;
    py.detach(|| sycl::ipc::memory::put(h)).py_err()
}

/// `ipc.memory.open(handle, device=None, nbytes=None, *, context=None, queue=None)`: the
/// exporter's memory in this process, without a copy. `handle` is a `Handle` or its bytes;
/// `nbytes` (default: all the handle names) may not exceed it.
#[pyfunction]
#[pyo3(signature = (handle, device=None, nbytes=None, *, context=None, queue=None))]
fn memory_open(
    py: Python<'_>,
    handle: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    nbytes: Option<usize>,
    context: Option<&Context>,
    queue: Option<&Queue>,
) -> PyResult<Memory> {
    let handle = handle_arg(handle)?;
    let q = open_target(py, device, context, queue)?;
    let usm = handle.get().with(|h| {
        py.detach(|| sycl::ipc::memory::open::<u8>(h, q.context(), q.device()))
            .py_err()
    })?;
    let size = usm.len();
    let nbytes = match nbytes {
        None => size,
        Some(n) if n <= size => n,
        Some(n) => {
            return Err(error(
                Errc::Invalid,
                format!("nbytes {n} exceeds the {size} bytes the handle names"),
            ))
        }
    };
    Ok(Memory::new(usm, nbytes, q, true))
}

/// `ipc.memory.close(memory)`: closes memory opened with `open` (refused while DLPack
/// consumers hold it; it closes with the last).
#[pyfunction]
fn memory_close(py: Python<'_>, memory: &Memory) -> PyResult<()> {
    if !memory.is_opened() {
        return Err(error(
            Errc::Invalid,
            "ipc.memory.close takes memory opened with ipc.memory.open (free allocations)",
        ));
    }
    let usm = memory.take()?;
    py.detach(|| sycl::ipc::memory::close(usm)).py_err()
}

/// `ipc.memory.get_cuda_raw(memory)`: (handle, offset, allocation_size) where `handle` is the
/// raw 64-byte `cudaIpcMemHandle_t` of the CUDA allocation holding `memory` (CuPy's
/// `ipcOpenMemHandle` or `cudaIpcOpenMemHandle` open it) and `offset` is where `memory` starts
/// in it. `BackendMismatchError` for memory of other backends.
#[pyfunction]
fn memory_get_cuda_raw<'py>(
    py: Python<'py>,
    memory: &Memory,
) -> PyResult<(Bound<'py, PyBytes>, u64, u64)> {
    let range = memory.range(0, memory.byte_len())?;
    let raw = py
        .detach(|| sycl::ipc::memory::get_cuda_raw(&range))
        .py_err()?;
    Ok((
        PyBytes::new(py, &raw.handle),
        raw.offset,
        raw.allocation_size,
    ))
}

/// `ipc.memory.open_cuda_raw(handle, nbytes, device=None, offset=0, *, context=None,
/// queue=None)`: memory another CUDA program shared as a raw 64-byte `cudaIpcMemHandle_t`
/// (CuPy's `ipcGetMemHandle`, `cudaIpcGetMemHandle`; PyTorch's through `open_torch`):
/// `nbytes` from byte `offset` of that allocation, checked against the size the driver
/// reports. Close it with `ipc.memory.close`.
///
/// The 64 bytes say nothing about who keeps the allocation alive: the exporting program must
/// keep it allocated until this memory is closed and its commands are done (otherwise the
/// GPU faults, or reads whatever was allocated there next).
#[pyfunction]
#[pyo3(signature = (handle, nbytes, device=None, offset=0, *, context=None, queue=None))]
fn memory_open_cuda_raw(
    py: Python<'_>,
    handle: Vec<u8>,
    nbytes: usize,
    device: Option<&Bound<'_, PyAny>>,
    offset: usize,
    context: Option<&Context>,
    queue: Option<&Queue>,
) -> PyResult<Memory> {
    let raw: [u8; 64] = handle.as_slice().try_into().map_err(|_| {
        error(
            Errc::Invalid,
            format!("a raw CUDA IPC handle has 64 bytes, not {}", handle.len()),
        )
    })?;
    let size = offset
        .checked_add(nbytes)
        .ok_or_else(|| error(Errc::Invalid, "offset + nbytes overflows"))?;
    let q = open_target(py, device, context, queue)?;
    let usm = py
        .detach(|| {
            // SAFETY: the contract documented above (the exporter keeps the allocation alive
            // while it is open here) is the Python caller's, as for `cudaIpcOpenMemHandle`
            // itself; the size is checked against the driver's.
            unsafe { sycl::ipc::memory::open_cuda_raw::<u8>(&raw, size, q.context(), q.device()) }
        })
        .py_err()?;
    Ok(Memory::window(usm, offset, nbytes, q, true))
}

/// `ipc.event.get(event)`: a handle of an event made with `enable_ipc=True`.
#[pyfunction]
fn event_get(py: Python<'_>, event: &Event) -> PyResult<Handle> {
    py.detach(|| sycl::ipc::event::get(&event.inner))
        .py_err()
        .map(Handle::new)
}

/// `ipc.event.put(handle)`.
#[pyfunction]
fn event_put(py: Python<'_>, handle: &Handle) -> PyResult<()> {
    let h = handle.take()?;
    py.detach(|| sycl::ipc::event::put(h)).py_err()
}

/// `ipc.event.open(handle, context=None)`: the exporter's event here; signal it with
/// `Queue.signal_event`, wait on it with `Event.wait` / `wait_signal_count`.
#[pyfunction]
#[pyo3(signature = (handle, context=None, *, queue=None, device=None))]
fn event_open(
    py: Python<'_>,
    handle: &Bound<'_, PyAny>,
    context: Option<&Context>,
    queue: Option<&Queue>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Event> {
    let handle = handle_arg(handle)?;
    let context = match (context, queue) {
        (Some(c), _) => c.inner.clone(),
        _ => open_target(py, device, None, queue)?.context().clone(),
    };
    handle.get().with(|h| {
        py.detach(|| sycl::ipc::event::open(h, &context))
            .py_err()
            .map(Event::from)
    })
}

/// `ipc.physical_memory.get(physical_memory)`.
#[pyfunction]
fn physical_memory_get(py: Python<'_>, memory: &PhysicalMemory) -> PyResult<Handle> {
    py.detach(|| sycl::ipc::physical_memory::get(&memory.inner))
        .py_err()
        .map(Handle::new)
}

/// `ipc.physical_memory.put(handle)`.
#[pyfunction]
fn physical_memory_put(py: Python<'_>, handle: &Handle) -> PyResult<()> {
    let h = handle.take()?;
    py.detach(|| sycl::ipc::physical_memory::put(h)).py_err()
}

/// `ipc.physical_memory.open(handle, device=None, *, context=None, queue=None)`.
#[pyfunction]
#[pyo3(signature = (handle, device=None, *, context=None, queue=None))]
fn physical_memory_open(
    py: Python<'_>,
    handle: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    context: Option<&Context>,
    queue: Option<&Queue>,
) -> PyResult<PhysicalMemory> {
    let handle = handle_arg(handle)?;
    let q = open_target(py, device, context, queue)?;
    handle.get().with(|h| {
        py.detach(|| sycl::ipc::physical_memory::open(h, q.context(), q.device()))
            .py_err()
            .map(PhysicalMemory::from)
    })
}

fn policy(uids: Option<Vec<u32>>) -> PeerPolicy {
    match uids {
        Some(u) => PeerPolicy::users(u),
        None => PeerPolicy::same_user(),
    }
}

/// A rank listener: other processes `Channel.connect(listener.name)`. Only processes of the
/// same user (or of `allowed_uids`) are accepted.
#[pyclass(module = "sycl_rs.ipc", frozen)]
pub struct Listener {
    inner: RawListener,
}

#[pymethods]
impl Listener {
    /// Binds `name` (an abstract socket name), or a fresh unique one without a name.
    #[new]
    #[pyo3(signature = (name=None, *, allowed_uids=None))]
    fn new(name: Option<&str>, allowed_uids: Option<Vec<u32>>) -> PyResult<Listener> {
        let p = policy(allowed_uids);
        match name {
            Some(n) => RawListener::bind_with(n, p),
            None => RawListener::bind_unique_with(p),
        }
        .py_err()
        .map(|inner| Listener { inner })
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The next connection; with `timeout` (seconds), a `SyclError` when none came in time.
    #[pyo3(signature = (timeout=None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Channel> {
        let t = crate::runtime::timeout(timeout)?;
        py.detach(|| self.inner.accept(t))
            .py_err()
            .map(|inner| Channel { inner })
    }
}

/// A channel between two processes that carries messages and handles with their descriptors
/// (`SCM_RIGHTS`), so importers need no ptrace permission.
#[pyclass(module = "sycl_rs.ipc", frozen)]
pub struct Channel {
    inner: RawChannel,
}

#[pymethods]
impl Channel {
    /// Connects to a `Listener` by name (refused if the listener's user is not allowed).
    #[staticmethod]
    #[pyo3(signature = (name, *, allowed_uids=None))]
    fn connect(py: Python<'_>, name: &str, allowed_uids: Option<Vec<u32>>) -> PyResult<Channel> {
        let p = policy(allowed_uids);
        let name = name.to_owned();
        py.detach(|| RawChannel::connect_with(&name, p))
            .py_err()
            .map(|inner| Channel { inner })
    }

    /// Two connected ends (for a child made by fork).
    #[staticmethod]
    fn pair() -> PyResult<(Channel, Channel)> {
        let (a, b) = RawChannel::pair().py_err()?;
        Ok((Channel { inner: a }, Channel { inner: b }))
    }

    /// Receives time out after `timeout` seconds (None: wait forever).
    #[pyo3(signature = (timeout=None))]
    fn set_recv_timeout(&self, timeout: Option<f64>) -> PyResult<()> {
        self.inner
            .set_recv_timeout(crate::runtime::timeout(timeout)?)
            .py_err()
    }

    fn send(&self, py: Python<'_>, message: Vec<u8>) -> PyResult<()> {
        py.detach(|| self.inner.send(&message)).py_err()
    }

    fn recv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let m = py.detach(|| self.inner.recv()).py_err()?;
        Ok(PyBytes::new(py, &m))
    }

    /// Sends a handle with its descriptors.
    fn send_handle(&self, py: Python<'_>, handle: &Handle) -> PyResult<()> {
        handle.with(|h| py.detach(|| self.inner.send_handle(h)).py_err())
    }

    /// Receives a handle with its descriptors.
    fn recv_handle(&self, py: Python<'_>) -> PyResult<Handle> {
        py.detach(|| self.inner.recv_handle())
            .py_err()
            .map(Handle::new)
    }

    /// The peer's pid, uid and gid (`SO_PEERCRED`).
    fn peer_credentials(&self) -> PyResult<(u32, u32, u32)> {
        let c = self.inner.peer_credentials().py_err()?;
        Ok((c.pid, c.uid, c.gid))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Handle>()?;
    m.add_class::<Listener>()?;
    m.add_class::<Channel>()?;
    m.add_function(wrap_pyfunction!(memory_get, m)?)?;
    m.add_function(wrap_pyfunction!(memory_put, m)?)?;
    m.add_function(wrap_pyfunction!(memory_open, m)?)?;
    m.add_function(wrap_pyfunction!(memory_close, m)?)?;
    m.add_function(wrap_pyfunction!(memory_get_cuda_raw, m)?)?;
    m.add_function(wrap_pyfunction!(memory_open_cuda_raw, m)?)?;
    m.add_function(wrap_pyfunction!(event_get, m)?)?;
    m.add_function(wrap_pyfunction!(event_put, m)?)?;
    m.add_function(wrap_pyfunction!(event_open, m)?)?;
    m.add_function(wrap_pyfunction!(physical_memory_get, m)?)?;
    m.add_function(wrap_pyfunction!(physical_memory_put, m)?)?;
    m.add_function(wrap_pyfunction!(physical_memory_open, m)?)?;
    Ok(())
}
