//! Virtual memory (`sycl_ext_oneapi_virtual_mem`): physical memory objects, reserved address
//! ranges, mappings (which are `Memory` objects) and their access modes.

use pyo3::prelude::*;
use sycl::virtual_mem::VirtualRange as RawRange;
use sycl::{AccessMode, Errc, GranularityMode, PhysicalMemProperties};

use crate::errors::{error, IntoPy};
use crate::memory::Memory;
use crate::runtime::{Context, Device, Queue};

/// The SYCL name of an access mode.
pub fn mode_name(mode: AccessMode) -> &'static str {
    match mode {
        AccessMode::ReadWrite => "read_write",
        AccessMode::Read => "read",
        AccessMode::None => "none",
    }
}

/// An access mode from its SYCL name ("read_write", "read", "none").
pub fn mode(name: &str) -> PyResult<AccessMode> {
    match name {
        "read_write" => Ok(AccessMode::ReadWrite),
        "read" => Ok(AccessMode::Read),
        "none" => Ok(AccessMode::None),
        other => Err(error(
            Errc::Invalid,
            format!("access mode `{other}`: expected \"read_write\", \"read\" or \"none\""),
        )),
    }
}

/// A context given as a `Context` or as a `Queue` (its context).
fn context_of(obj: &Bound<'_, PyAny>) -> PyResult<sycl::Context> {
    if let Ok(c) = obj.cast::<Context>() {
        return Ok(c.get().inner.clone());
    }
    if let Ok(q) = obj.cast::<Queue>() {
        return Ok(q.get().inner.context().clone());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "expected a sycl_rs.Context or a sycl_rs.Queue",
    ))
}

/// Physical memory (`physical_mem`): `nbytes` (a multiple of the granularity) on a queue's
/// device; `enable_ipc` lets `ipc.physical_memory.get` export it. Map it into a
/// `VirtualRange` with `map` to use it.
#[pyclass(module = "sycl_rs", frozen)]
pub struct PhysicalMemory {
    pub inner: sycl::PhysicalMem,
}

impl From<sycl::PhysicalMem> for PhysicalMemory {
    fn from(inner: sycl::PhysicalMem) -> Self {
        PhysicalMemory { inner }
    }
}

#[pymethods]
impl PhysicalMemory {
    #[new]
    #[pyo3(signature = (queue, nbytes, *, enable_ipc=false))]
    fn new(py: Python<'_>, queue: &Queue, nbytes: usize, enable_ipc: bool) -> PyResult<Self> {
        let q = queue.inner.clone();
        py.detach(|| {
            sycl::PhysicalMem::new(
                q.device(),
                q.context(),
                nbytes,
                PhysicalMemProperties { enable_ipc },
            )
        })
        .py_err()
        .map(PhysicalMemory::from)
    }

    /// The minimum allocation granularity of `queue`'s device (sizes and offsets are
    /// multiples of it).
    #[staticmethod]
    fn granularity(queue: &Queue) -> PyResult<usize> {
        sycl::virtual_mem::get_mem_granularity(
            queue.inner.device(),
            queue.inner.context(),
            GranularityMode::Minimum,
        )
        .py_err()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.size()
    }

    #[getter]
    fn ipc_enabled(&self) -> bool {
        self.inner.ipc_enabled()
    }

    #[getter]
    fn device(&self) -> Device {
        self.inner.device().clone().into()
    }

    #[getter]
    fn context(&self) -> Context {
        self.inner.context().clone().into()
    }

    /// `map`: maps `nbytes` of this memory from byte `offset` at byte `range_offset` of
    /// `range`, with access `mode` ("read_write", "read" or "none"). Returns the mapping as a
    /// `Memory` (`mapped` is true) for commands of `queue` (default: a queue on this memory's
    /// device in the range's context): `copy_from`, `copy_to`, `fill`, DLPack where the host
    /// reaches it. `nbytes` defaults to what fits both. Unmapped by `Memory.unmap()` or when
    /// the `Memory` and everything made from it are gone.
    ///
    /// Errors: `InvalidError` for sizes or offsets that leave either object or are not
    /// multiples of the granularity, and for a range of another platform.
    #[pyo3(signature = (range, nbytes=None, *, range_offset=0, offset=0, mode="read_write", queue=None))]
    #[allow(clippy::too_many_arguments)]
    fn map(
        &self,
        py: Python<'_>,
        range: &VirtualRange,
        nbytes: Option<usize>,
        range_offset: usize,
        offset: usize,
        mode: &str,
        queue: Option<&Queue>,
    ) -> PyResult<Memory> {
        let mode = self::mode(mode)?;
        let nbytes = match nbytes {
            Some(n) => n,
            None => self
                .inner
                .size()
                .saturating_sub(offset)
                .min(range.inner.size().saturating_sub(range_offset)),
        };
        let q = match queue {
            Some(q) => q.inner.clone(),
            None => {
                let (ctx, dev) = (range.context.clone(), self.inner.device().clone());
                py.detach(|| sycl::Queue::with_context(&ctx, &dev, Default::default()))
                    .py_err()?
            }
        };
        let mapping = py
            .detach(|| {
                self.inner
                    .map(&range.inner, range_offset, nbytes, mode, offset)
            })
            .py_err()?;
        Ok(Memory::of_mapping(mapping, q))
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.PhysicalMemory {} bytes on {}{}>",
            self.inner.size(),
            self.inner.device().name(),
            if self.inner.ipc_enabled() {
                ", ipc"
            } else {
                ""
            }
        )
    }
}

/// A reserved range of virtual addresses (`reserve_virtual_mem`) in `context` (a `Context`,
/// or a `Queue`'s): `nbytes`, a multiple of the granularity, at `start` if possible (0: any).
/// Physical memory is mapped into it with `PhysicalMemory.map`; it is freed
/// (`free_virtual_mem`) when the object and every mapping in it are gone.
#[pyclass(module = "sycl_rs", frozen)]
pub struct VirtualRange {
    inner: RawRange,
    context: sycl::Context,
}

#[pymethods]
impl VirtualRange {
    #[new]
    #[pyo3(signature = (context, nbytes, *, start=0))]
    fn new(
        py: Python<'_>,
        context: &Bound<'_, PyAny>,
        nbytes: usize,
        start: u64,
    ) -> PyResult<VirtualRange> {
        let context = context_of(context)?;
        let inner = py
            .detach(|| RawRange::reserve(&context, nbytes, start))
            .py_err()?;
        Ok(VirtualRange { inner, context })
    }

    /// First address.
    #[getter]
    fn ptr(&self) -> u64 {
        self.inner.as_ptr()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.size()
    }

    #[getter]
    fn context(&self) -> Context {
        self.context.clone().into()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.VirtualRange {:#x}+{} bytes>",
            self.inner.as_ptr(),
            self.inner.size()
        )
    }
}

/// `get_mem_granularity(device, context, mode="minimum")`: the granularity of sizes and
/// offsets of physical memory and ranges on `device` in `context` (default: the device's
/// default context); `mode="recommended"` gives the size that performs best.
#[pyfunction]
#[pyo3(signature = (device, context=None, mode="minimum"))]
fn get_mem_granularity(device: &Device, context: Option<&Context>, mode: &str) -> PyResult<usize> {
    let mode = match mode {
        "minimum" => GranularityMode::Minimum,
        "recommended" => GranularityMode::Recommended,
        other => {
            return Err(error(
                Errc::Invalid,
                format!("granularity mode `{other}`: expected \"minimum\" or \"recommended\""),
            ))
        }
    };
    let context = match context {
        Some(c) => c.inner.clone(),
        None => sycl::Context::default_for(&device.inner).py_err()?,
    };
    sycl::virtual_mem::get_mem_granularity(&device.inner, &context, mode).py_err()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PhysicalMemory>()?;
    m.add_class::<VirtualRange>()?;
    m.add_function(wrap_pyfunction!(get_mem_granularity, m)?)?;
    Ok(())
}
