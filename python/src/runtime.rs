//! Platforms, devices, contexts, queues and events.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sycl::{Aspect, DeviceSelector, EventProperties, EventStatus, QueueProperties};

use crate::errors::IntoPy;

/// A SYCL platform: one backend's driver (`sycl::Platform`).
#[pyclass(module = "sycl_rs", frozen)]
pub struct Platform {
    pub inner: sycl::Platform,
}

#[pymethods]
impl Platform {
    /// The backend: "native_cpu", "cuda", "opencl" or "level_zero".
    #[getter]
    fn backend(&self) -> String {
        self.inner.backend().to_string()
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn vendor(&self) -> &str {
        self.inner.vendor()
    }

    #[getter]
    fn version(&self) -> &str {
        self.inner.version()
    }

    /// Its devices.
    fn devices(&self) -> Vec<Device> {
        self.inner.devices().into_iter().map(Device::from).collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.Platform {} ({})>",
            self.inner.name(),
            self.inner.backend()
        )
    }
}

/// A device (`sycl::Device`). Equal devices compare equal and hash alike.
#[pyclass(module = "sycl_rs", frozen, eq, hash)]
#[derive(Clone)]
pub struct Device {
    pub inner: sycl::Device,
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl std::hash::Hash for Device {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.backend().to_string().hash(state);
        self.inner.platform().name().hash(state);
        self.inner.index_in_platform().hash(state);
    }
}

impl From<sycl::Device> for Device {
    fn from(inner: sycl::Device) -> Device {
        Device { inner }
    }
}

impl From<sycl::Context> for Context {
    fn from(inner: sycl::Context) -> Context {
        Context { inner }
    }
}

fn parse_aspect(name: &str) -> PyResult<Aspect> {
    name.parse::<Aspect>().py_err()
}

#[pymethods]
impl Device {
    /// The device `selector` picks, in `ONEAPI_DEVICE_SELECTOR` syntax (e.g. "cuda:0",
    /// "opencl:cpu", "!native_cpu:*"); without one, the default device (which honours the
    /// `ONEAPI_DEVICE_SELECTOR` environment variable).
    #[new]
    #[pyo3(signature = (selector=None))]
    fn new(py: Python<'_>, selector: Option<&str>) -> PyResult<Device> {
        let selector = selector.map(str::to_owned);
        py.detach(|| match selector {
            Some(s) => DeviceSelector::filter(&s)?.select(),
            None => sycl::Device::default_device(),
        })
        .py_err()
        .map(Device::from)
    }

    /// The native CPU device, whatever `ONEAPI_DEVICE_SELECTOR` says.
    #[staticmethod]
    fn native_cpu() -> Device {
        sycl::Device::native_cpu().into()
    }

    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn vendor(&self) -> &str {
        self.inner.vendor()
    }

    #[getter]
    fn backend(&self) -> String {
        self.inner.backend().to_string()
    }

    #[getter]
    fn platform(&self) -> Platform {
        Platform {
            inner: self.inner.platform().clone(),
        }
    }

    /// "cpu", "gpu", "accelerator" or "custom".
    #[getter]
    fn device_type(&self) -> String {
        format!("{:?}", self.inner.device_type()).to_lowercase()
    }

    /// The index among its platform's devices (the CUDA ordinal on CUDA).
    #[getter]
    fn index(&self) -> usize {
        self.inner.index_in_platform()
    }

    /// The filter string that selects exactly this device, e.g. "cuda:0" (`ONEAPI_DEVICE_SELECTOR`
    /// numbers a backend's devices across its platforms).
    #[getter]
    fn filter_string(&self) -> String {
        let backend = self.inner.backend();
        let index = sycl::Device::all()
            .iter()
            .filter(|d| d.backend() == backend)
            .position(|d| *d == self.inner)
            .unwrap_or(0);
        format!("{backend}:{index}")
    }

    #[getter]
    fn driver_version(&self) -> &str {
        self.inner.driver_version()
    }

    #[getter]
    fn max_compute_units(&self) -> u32 {
        self.inner.max_compute_units()
    }

    #[getter]
    fn global_mem_size(&self) -> u64 {
        self.inner.global_mem_size()
    }

    #[getter]
    fn local_mem_size(&self) -> u64 {
        self.inner.local_mem_size()
    }

    #[getter]
    fn max_mem_alloc_size(&self) -> u64 {
        self.inner.max_mem_alloc_size()
    }

    #[getter]
    fn max_work_group_size(&self) -> usize {
        self.inner.max_work_group_size()
    }

    /// `info::device::sub_group_sizes`: the sub-group sizes kernels may run with (empty where
    /// the driver does not list them).
    #[getter]
    fn sub_group_sizes(&self) -> Vec<usize> {
        self.inner.sub_group_sizes().to_vec()
    }

    /// The device's UUID (16 bytes) where the driver gives one.
    #[getter]
    fn uuid<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.uuid().map(|u| PyBytes::new(py, &u))
    }

    /// Whether the device has the aspect named (SYCL names, e.g. "ext_oneapi_ipc_memory").
    /// An unknown name is an `InvalidError`.
    fn has_aspect(&self, name: &str) -> PyResult<bool> {
        Ok(self.inner.has(parse_aspect(name)?))
    }

    /// The SYCL names of every aspect the device has.
    #[getter]
    fn aspects(&self) -> Vec<String> {
        self.inner
            .aspects()
            .into_iter()
            .map(|a| a.to_string())
            .collect()
    }

    #[getter]
    fn is_gpu(&self) -> bool {
        self.inner.is_gpu()
    }

    #[getter]
    fn is_cpu(&self) -> bool {
        self.inner.is_cpu()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.Device {} [{}:{}]>",
            self.inner.name(),
            self.inner.backend(),
            self.inner.index_in_platform()
        )
    }
}

/// Every platform of every backend that loaded.
#[pyfunction]
fn platforms(py: Python<'_>) -> Vec<Platform> {
    py.detach(sycl::Platform::all)
        .into_iter()
        .map(|inner| Platform { inner })
        .collect()
}

/// Every device; with `selector` (`ONEAPI_DEVICE_SELECTOR` syntax), those it allows, best
/// first.
#[pyfunction]
#[pyo3(signature = (selector=None))]
fn devices(py: Python<'_>, selector: Option<&str>) -> PyResult<Vec<Device>> {
    let all = py.detach(sycl::Device::all);
    let chosen = match selector {
        Some(s) => sycl::DeviceFilter::parse(s).py_err()?.apply(&all),
        None => all,
    };
    Ok(chosen.into_iter().map(Device::from).collect())
}

/// A context: devices of one platform that share memory (`sycl::Context`).
#[pyclass(module = "sycl_rs", frozen)]
#[derive(Clone)]
pub struct Context {
    pub inner: sycl::Context,
}

#[pymethods]
impl Context {
    /// A context of `devices` (one device, or a list of devices of one platform).
    #[new]
    fn new(py: Python<'_>, devices: &Bound<'_, PyAny>) -> PyResult<Context> {
        let list: Vec<sycl::Device> = match devices.extract::<PyRef<'_, Device>>() {
            Ok(d) => vec![d.inner.clone()],
            Err(_) => devices
                .extract::<Vec<PyRef<'_, Device>>>()?
                .iter()
                .map(|d| d.inner.clone())
                .collect(),
        };
        py.detach(|| sycl::Context::new(&list))
            .py_err()
            .map(|inner| Context { inner })
    }

    /// The context sycl-rs uses for `device` by default (the one queues without a context get).
    #[staticmethod]
    fn default_for(py: Python<'_>, device: &Device) -> PyResult<Context> {
        let d = device.inner.clone();
        py.detach(|| sycl::Context::default_for(&d))
            .py_err()
            .map(|inner| Context { inner })
    }

    #[getter]
    fn devices(&self) -> Vec<Device> {
        self.inner
            .devices()
            .iter()
            .cloned()
            .map(Device::from)
            .collect()
    }

    #[getter]
    fn backend(&self) -> String {
        self.inner.backend().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.Context {} device(s) on {}>",
            self.inner.devices().len(),
            self.inner.backend()
        )
    }
}

/// A queue of commands on one device (`sycl::Queue`).
#[pyclass(module = "sycl_rs", frozen)]
#[derive(Clone)]
pub struct Queue {
    pub inner: sycl::Queue,
}

#[pymethods]
impl Queue {
    /// A queue on `device` (a `Device`, a selector string, or None for the default device), in
    /// `context` (default: the device's default context).
    #[new]
    #[pyo3(signature = (device=None, *, context=None, in_order=false, enable_profiling=false))]
    fn new(
        py: Python<'_>,
        device: Option<&Bound<'_, PyAny>>,
        context: Option<&Context>,
        in_order: bool,
        enable_profiling: bool,
    ) -> PyResult<Queue> {
        let device = match device {
            None => Device::new(py, None)?,
            Some(d) => match d.extract::<Device>() {
                Ok(d) => d,
                Err(_) => Device::new(py, Some(d.extract::<&str>()?))?,
            },
        };
        let props = QueueProperties {
            in_order,
            enable_profiling,
        };
        let context = context.map(|c| c.inner.clone());
        py.detach(|| {
            let context = match context {
                Some(c) => c,
                None => sycl::Context::default_for(&device.inner)?,
            };
            sycl::Queue::with_context(&context, &device.inner, props)
        })
        .py_err()
        .map(|inner| Queue { inner })
    }

    #[getter]
    fn device(&self) -> Device {
        self.inner.device().clone().into()
    }

    #[getter]
    fn context(&self) -> Context {
        self.inner.context().clone().into()
    }

    #[getter]
    fn is_in_order(&self) -> bool {
        self.inner.properties().in_order
    }

    /// The CUDA stream (`CUstream` as an int) a CUDA queue's commands run in, in order;
    /// `None` on other backends. `torch.cuda.ExternalStream(q.cuda_stream)` orders torch's
    /// work with this queue's; DLPack producers take it as `__dlpack__(stream=..)`.
    #[getter]
    fn cuda_stream(&self) -> Option<u64> {
        self.inner.cuda_stream()
    }

    #[getter]
    fn has_profiling(&self) -> bool {
        self.inner.properties().enable_profiling
    }

    /// Blocks until every command submitted so far completed.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.wait()).py_err()
    }

    /// An event that completes when `events` and every earlier command did.
    #[pyo3(signature = (events=Vec::new()))]
    fn barrier(&self, py: Python<'_>, events: Vec<PyRef<'_, Event>>) -> PyResult<Event> {
        let list: Vec<sycl::Event> = events.iter().map(|e| e.inner.clone()).collect();
        py.detach(|| {
            let refs: Vec<&sycl::Event> = list.iter().collect();
            self.inner.barrier(&refs)
        })
        .py_err()
        .map(Event::from)
    }

    /// `enqueue_signal_event`: `event` (made with `Event(...)`, or opened from another
    /// process) is signalled when the queue reaches this point.
    fn signal_event(&self, py: Python<'_>, event: &Event) -> PyResult<()> {
        py.detach(|| self.inner.enqueue_signal_event(&event.inner))
            .py_err()
    }

    /// `enqueue_wait_event`: later commands wait for `event`.
    fn wait_event(&self, py: Python<'_>, event: &Event) -> PyResult<()> {
        py.detach(|| self.inner.enqueue_wait_event(&event.inner))
            .py_err()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sycl_rs.Queue on {} [{}:{}]>",
            self.inner.device().name(),
            self.inner.device().backend(),
            self.inner.device().index_in_platform()
        )
    }
}

/// An event: a command's, or a standalone one made with `Event(...)` (`sycl::Event`).
#[pyclass(module = "sycl_rs", frozen)]
#[derive(Clone)]
pub struct Event {
    pub inner: sycl::Event,
}

impl From<sycl::Event> for Event {
    fn from(inner: sycl::Event) -> Event {
        Event { inner }
    }
}

/// Seconds from Python as a duration (`InvalidError` for negative or non-finite ones).
pub(crate) fn timeout(seconds: Option<f64>) -> PyResult<Option<Duration>> {
    seconds
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                crate::errors::error(
                    sycl::Errc::Invalid,
                    format!("timeout {s} is not a duration in seconds"),
                )
            })
        })
        .transpose()
}

#[pymethods]
impl Event {
    /// A standalone event for `queue`'s context (or `context`), to be signalled by a queue
    /// (`Queue.signal_event`); `enable_ipc` lets `ipc.event.get` export it.
    #[new]
    #[pyo3(signature = (queue=None, *, context=None, enable_ipc=false, enable_profiling=false))]
    fn new(
        py: Python<'_>,
        queue: Option<&Queue>,
        context: Option<&Context>,
        enable_ipc: bool,
        enable_profiling: bool,
    ) -> PyResult<Event> {
        let props = EventProperties {
            enable_ipc,
            enable_profiling,
        };
        let context = match (queue, context) {
            (_, Some(c)) => c.inner.clone(),
            (Some(q), None) => q.inner.context().clone(),
            (None, None) => {
                let d = Device::new(py, None)?;
                py.detach(|| sycl::Context::default_for(&d.inner))
                    .py_err()?
            }
        };
        py.detach(|| sycl::Event::new(&context, props))
            .py_err()
            .map(Event::from)
    }

    /// Waits for the event; with `timeout` (seconds) returns False when it passed first.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        match self::timeout(timeout)? {
            None => py.detach(|| self.inner.wait()).py_err().map(|()| true),
            Some(t) => py.detach(|| self.inner.wait_timeout(t)).py_err(),
        }
    }

    /// "submitted", "running" or "complete".
    #[getter]
    fn status(&self) -> PyResult<&'static str> {
        Ok(match self.inner.status().py_err()? {
            EventStatus::Submitted => "submitted",
            EventStatus::Running => "running",
            EventStatus::Complete => "complete",
        })
    }

    /// (submit, start, end) in nanoseconds, for events of profiling queues.
    #[getter]
    fn profiling_info(&self) -> PyResult<(u64, u64, u64)> {
        let p = self.inner.profiling_info().py_err()?;
        Ok((p.submit_ns, p.start_ns, p.end_ns))
    }

    #[getter]
    fn ipc_enabled(&self) -> bool {
        self.inner.ipc_enabled()
    }

    /// How many times the event was signalled (`ext_signal_count`).
    #[getter]
    fn signal_count(&self) -> PyResult<u64> {
        self.inner.ext_signal_count().py_err()
    }

    /// Waits until the event was signalled `target` times; False when `timeout` (seconds)
    /// passed first.
    #[pyo3(signature = (target, timeout=None))]
    fn wait_signal_count(
        &self,
        py: Python<'_>,
        target: u64,
        timeout: Option<f64>,
    ) -> PyResult<bool> {
        let t = self::timeout(timeout)?;
        py.detach(|| self.inner.ext_wait_signal_count(target, t))
            .py_err()
    }

    fn __repr__(&self) -> String {
        format!("<sycl_rs.Event ipc={}>", self.inner.ipc_enabled())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Platform>()?;
    m.add_class::<Device>()?;
    m.add_class::<Context>()?;
    m.add_class::<Queue>()?;
    m.add_class::<Event>()?;
    m.add_function(wrap_pyfunction!(platforms, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    Ok(())
}
