//! `sycl_rs.collective`'s native half: the ranks of a node joined from a launcher's environment
//! (`sycl::ranks::NodeRanks`) and teams over them (`sycl::collective::Team`). The Python half
//! (`sycl_rs/collective.py`) turns tensors into `Memory` through DLPack and names dtypes.

use std::any::Any;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use sycl::collective::{Algorithm, ReduceOp, Team, TeamGraph, TeamOptions, TeamRecorder};
use sycl::half::{bf16, f16};
use sycl::ranks::{DeviceChoice, Launch, NodeBuffer, NodeRanks, RanksOptions};
use sycl::{AsUsmRange, Errc, UsmRange};

use crate::errors::{error, IntoPy};
use crate::memory::Memory;
use crate::runtime::{timeout, Device, Event, Queue};

/// The ranks of this node, joined without MPI (`sycl::ranks::NodeRanks`).
#[pyclass(module = "sycl_rs.collective", name = "NodeRanks", frozen)]
pub struct PyNodeRanks {
    inner: Arc<NodeRanks>,
}

fn ranks_options(timeout_s: Option<f64>, device: Option<&Device>) -> PyResult<RanksOptions> {
    let mut options = RanksOptions::default();
    if let Some(t) = timeout(timeout_s)? {
        options.timeout = t;
    }
    if let Some(d) = device {
        options.device = DeviceChoice::Device(d.inner.clone());
    }
    Ok(options)
}

#[pymethods]
impl PyNodeRanks {
    /// The ranks of this node as the launcher's environment says (torchrun's `LOCAL_RANK`,
    /// `LOCAL_WORLD_SIZE`, ...; Open MPI's `mpirun`; or `SYCL_RS_LOCAL_RANK`,
    /// `SYCL_RS_LOCAL_SIZE`, `SYCL_RS_JOB`). Every rank of the node calls it. `device`: this
    /// rank's device (default: one GPU per local rank, round-robin, else the default device);
    /// `timeout`: seconds any wait on another rank may take.
    #[staticmethod]
    #[pyo3(signature = (*, device=None, timeout=None))]
    fn from_env(py: Python<'_>, device: Option<&Device>, timeout: Option<f64>) -> PyResult<Self> {
        let options = ranks_options(timeout, device)?;
        let inner = py.detach(|| NodeRanks::from_env(options)).py_err()?;
        Ok(PyNodeRanks {
            inner: Arc::new(inner),
        })
    }

    /// The ranks of this node, given explicitly: `local_size` processes each call it with their
    /// `local_rank` and the same `job` key (e.g. one broadcast by mpi4py from rank 0).
    #[staticmethod]
    #[pyo3(signature = (local_rank, local_size, job, *, rank=None, device=None, timeout=None))]
    fn join(
        py: Python<'_>,
        local_rank: usize,
        local_size: usize,
        job: String,
        rank: Option<usize>,
        device: Option<&Device>,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let options = ranks_options(timeout, device)?;
        let mut launch = Launch::new(local_rank, local_size, job);
        if let Some(r) = rank {
            launch.rank = r;
        }
        let inner = py.detach(|| NodeRanks::join(&launch, options)).py_err()?;
        Ok(PyNodeRanks {
            inner: Arc::new(inner),
        })
    }

    /// This rank's index on the node.
    #[getter]
    fn local_rank(&self) -> usize {
        self.inner.local_rank()
    }

    /// Ranks on the node.
    #[getter]
    fn local_size(&self) -> usize {
        self.inner.local_size()
    }

    /// This rank's device.
    #[getter]
    fn device(&self) -> Device {
        self.inner.device().clone().into()
    }

    /// The job rank of local rank `local`.
    fn rank_of_local(&self, local: usize) -> PyResult<usize> {
        self.inner.rank_of_local(local).py_err()
    }

    /// A barrier over the node's ranks (fails, instead of hanging, when a rank exits or the
    /// time-out passes).
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.barrier()).py_err()
    }

    fn __repr__(&self) -> String {
        format!(
            "NodeRanks(local_rank={}, local_size={}, device={:?})",
            self.inner.local_rank(),
            self.inner.local_size(),
            self.inner.device().name()
        )
    }
}

/// Collectives over the ranks of a node (`sycl::collective::Team`): operations on `Memory`
/// of the team's device, each returning an `Event`.
#[pyclass(module = "sycl_rs.collective", name = "Team", frozen)]
pub struct PyTeam {
    /// One operation at a time: a team's operations are ordered by their calls.
    inner: Mutex<Team<'static>>,
    /// The team's ranks (its symmetric buffers are theirs).
    ranks: Arc<NodeRanks>,
    queue: sycl::Queue,
    rank: usize,
    size: usize,
}

fn reduce_op(op: &str) -> PyResult<ReduceOp> {
    match op {
        "sum" => Ok(ReduceOp::Sum),
        "prod" | "product" => Ok(ReduceOp::Prod),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        other => Err(error(
            Errc::Invalid,
            format!("reduction {other:?}: one of \"sum\", \"prod\", \"min\", \"max\""),
        )),
    }
}

/// Calls `$body` with `T` the element type `$dtype` names.
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            "int32" => {
                type $t = i32;
                $body
            }
            "uint32" => {
                type $t = u32;
                $body
            }
            "int64" => {
                type $t = i64;
                $body
            }
            "uint64" => {
                type $t = u64;
                $body
            }
            "float32" => {
                type $t = f32;
                $body
            }
            "float64" => {
                type $t = f64;
                $body
            }
            "float16" => {
                type $t = f16;
                $body
            }
            "bfloat16" => {
                type $t = bf16;
                $body
            }
            other => Err(error(
                Errc::Invalid,
                format!(
                    "element type {other:?}: one of int32, uint32, int64, uint64, float32, \
                     float64, float16, bfloat16"
                ),
            )),
        }
    };
}

/// The whole of `memory` as elements of `T` (`InvalidError` when its size is not a multiple).
fn elements<T: bytemuck::Pod>(memory: &Memory) -> PyResult<UsmRange<T>> {
    let size = std::mem::size_of::<T>();
    if memory.byte_len() % size != 0 {
        return Err(error(
            Errc::Invalid,
            format!(
                "memory of {} bytes is not a whole number of {size}-byte elements",
                memory.byte_len()
            ),
        ));
    }
    memory.range(0, memory.byte_len())?.cast::<T>().py_err()
}

fn events(deps: &[PyRef<'_, Event>]) -> Vec<sycl::Event> {
    deps.iter().map(|e| e.inner.clone()).collect()
}

impl PyTeam {
    fn run(
        &self,
        py: Python<'_>,
        deps: &[PyRef<'_, Event>],
        op: impl FnOnce(&mut Team<'static>, &[&sycl::Event]) -> sycl::Result<sycl::Event> + Send,
    ) -> PyResult<Event> {
        let deps = events(deps);
        py.detach(|| {
            let refs: Vec<&sycl::Event> = deps.iter().collect();
            let mut team = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            op(&mut team, &refs)
        })
        .py_err()
        .map(Event::from)
    }
}

#[pymethods]
impl PyTeam {
    /// The team of `ranks`' node; collective over its ranks. Operations run on a new in-order
    /// queue on `queue`'s device and context (default: the ranks' device). `algorithm`:
    /// "auto", "one_shot" or "two_shot"; `buffer_bytes`: the symmetric buffer's half;
    /// `timeout`: seconds a rank waits for its peers within an operation.
    #[new]
    #[pyo3(signature = (ranks, queue=None, *, algorithm="auto", buffer_bytes=None, timeout=None))]
    fn new(
        py: Python<'_>,
        ranks: &PyNodeRanks,
        queue: Option<&Queue>,
        algorithm: &str,
        buffer_bytes: Option<usize>,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let mut options = TeamOptions {
            algorithm: match algorithm {
                "auto" => Algorithm::Auto,
                "one_shot" => Algorithm::OneShot,
                "two_shot" => Algorithm::TwoShot,
                other => {
                    return Err(error(
                        Errc::Invalid,
                        format!("algorithm {other:?}: \"auto\", \"one_shot\" or \"two_shot\""),
                    ))
                }
            },
            timeout: self::timeout(timeout)?,
            ..TeamOptions::default()
        };
        if let Some(b) = buffer_bytes {
            options.buffer_bytes = b;
        }
        let ranks = ranks.inner.clone();
        let team = py
            .detach(|| {
                let queue = match queue {
                    Some(q) => q.inner.clone(),
                    None => sycl::Queue::in_order(ranks.device())?,
                };
                Team::with_shared_ranks(ranks.clone(), &queue, options)
            })
            .py_err()?;
        Ok(PyTeam {
            ranks,
            queue: team.queue().clone(),
            rank: team.rank(),
            size: team.size(),
            inner: Mutex::new(team),
        })
    }

    /// This rank's index in the team.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the team.
    #[getter]
    fn size(&self) -> usize {
        self.size
    }

    /// The team's queue (its operations' events are of this queue's context).
    #[getter]
    fn queue(&self) -> Queue {
        Queue {
            inner: self.queue.clone(),
        }
    }

    /// `recv` = the reduction of every rank's `send` (elements of `dtype`); in place when
    /// they are the same memory.
    #[pyo3(signature = (send, recv, dtype, op="sum", deps=Vec::new()))]
    fn all_reduce(
        &self,
        py: Python<'_>,
        send: &Memory,
        recv: &Memory,
        dtype: &str,
        op: &str,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        let op = reduce_op(op)?;
        with_element!(dtype, T => {
            let (s, r) = (elements::<T>(send)?, elements::<T>(recv)?);
            self.run(py, &deps, |team, deps| team.all_reduce(&s, &r, op, deps))
        })
    }

    /// `recv` = every rank's `send`, in rank order (`recv` holds `size` times `send`).
    #[pyo3(signature = (send, recv, dtype, deps=Vec::new()))]
    fn all_gather(
        &self,
        py: Python<'_>,
        send: &Memory,
        recv: &Memory,
        dtype: &str,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        with_element!(dtype, T => {
            let (s, r) = (elements::<T>(send)?, elements::<T>(recv)?);
            self.run(py, &deps, |team, deps| team.all_gather(&s, &r, deps))
        })
    }

    /// `recv` = this rank's block of the reduction of every rank's `send` (`send` holds `size`
    /// blocks of `recv`'s length).
    #[pyo3(signature = (send, recv, dtype, op="sum", deps=Vec::new()))]
    fn reduce_scatter(
        &self,
        py: Python<'_>,
        send: &Memory,
        recv: &Memory,
        dtype: &str,
        op: &str,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        let op = reduce_op(op)?;
        with_element!(dtype, T => {
            let (s, r) = (elements::<T>(send)?, elements::<T>(recv)?);
            self.run(py, &deps, |team, deps| team.reduce_scatter(&s, &r, op, deps))
        })
    }

    /// `buf` = rank `root`'s `buf` on every rank.
    #[pyo3(signature = (buf, dtype, root, deps=Vec::new()))]
    fn broadcast(
        &self,
        py: Python<'_>,
        buf: &Memory,
        dtype: &str,
        root: usize,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        with_element!(dtype, T => {
            let b = elements::<T>(buf)?;
            self.run(py, &deps, |team, deps| team.broadcast(&b, root, deps))
        })
    }

    /// A symmetric buffer of `count` elements of `dtype` per rank on the team's device, every
    /// rank's part opened by every other rank (`sycl::ranks::NodeBuffer`). Collective: every
    /// rank passes the same `count` and `dtype`.
    fn symmetric_buffer(
        &self,
        py: Python<'_>,
        count: usize,
        dtype: &str,
    ) -> PyResult<PySymmetricBuffer> {
        with_element!(dtype, T => {
            let buffer = py
                .detach(|| self.ranks.node_buffer_shared::<T>(&self.queue, count))
                .py_err()?;
            let parts = (0..self.size)
                .map(|r| buffer.peer(r)?.usm_range().cast::<u8>())
                .collect::<sycl::Result<Vec<_>>>()
                .py_err()?;
            Ok(PySymmetricBuffer {
                inner: Mutex::new(Some(Box::new(buffer))),
                dtype: dtype.to_owned(),
                count,
                rank: self.rank,
                parts,
                queue: self.queue.clone(),
            })
        })
    }

    /// `recv` = the reduction of elements `start .. start + count` of every rank's part of
    /// `buf` (a symmetric buffer of this team), read where they lie: no copy into the team's
    /// buffer (`Team::all_reduce_symmetric`). `count` defaults to the rest of the part.
    #[pyo3(signature = (buf, recv, op="sum", start=0, count=None, deps=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn all_reduce_symmetric(
        &self,
        py: Python<'_>,
        buf: &PySymmetricBuffer,
        recv: &Memory,
        op: &str,
        start: usize,
        count: Option<usize>,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        let op = reduce_op(op)?;
        let count = count.unwrap_or(buf.count.saturating_sub(start));
        let end = start.checked_add(count).ok_or_else(|| {
            error(
                Errc::Invalid,
                format!("elements {start}..{start}+{count} overflow"),
            )
        })?;
        with_element!(buf.dtype.as_str(), T => {
            let r = elements::<T>(recv)?;
            self.run(py, &deps, |team, deps| {
                // Held through the call (the buffer is not closed under it), and taken here,
                // without the GIL, as every holder takes it (`PySymmetricBuffer::inner`).
                let guard = buf.inner.lock().unwrap_or_else(|p| p.into_inner());
                let send = guard
                    .as_ref()
                    .ok_or_else(|| sycl::Error::invalid("the symmetric buffer was closed"))?
                    .downcast_ref::<NodeBuffer<'static, T>>()
                    .expect("a symmetric buffer holds a NodeBuffer of its dtype");
                team.all_reduce_symmetric(send, start..end, &r, op, deps)
            })
        })
    }

    /// Completes when every rank has reached it (and its `deps` completed).
    #[pyo3(signature = (deps=Vec::new()))]
    fn barrier(&self, py: Python<'_>, deps: Vec<PyRef<'_, Event>>) -> PyResult<Event> {
        self.run(py, &deps, |team, deps| team.barrier(deps))
    }

    /// Records `ops` into a graph that `replay` runs as one command (on CUDA one CUDA graph).
    /// Each op is `(kind, send, recv, dtype, op, root)`: kind "all_reduce", "all_gather",
    /// "reduce_scatter", "broadcast" (`send` the buffer), "all_reduce_symmetric" (`send` a
    /// `SymmetricBuffer`, `root` the first element of the range, which is as long as `recv`)
    /// or "barrier" (the rest `None`). Collective: every rank records the same operations.
    fn record(&self, py: Python<'_>, ops: Vec<RecordedOp<'_>>) -> PyResult<PyGraph> {
        let mut steps: Vec<Step> = Vec::with_capacity(ops.len());
        for (kind, send, recv, dtype, op, root) in ops {
            if kind == "barrier" {
                steps.push(Box::new(|g: &mut TeamRecorder<'_, 'static>| g.barrier()));
                continue;
            }
            if kind == "all_reduce_symmetric" {
                steps.push(symmetric_step(send, recv, op, root)?);
                continue;
            }
            let send: Option<PyRef<'_, Memory>> = match send {
                Some(s) => Some(s.cast_into::<Memory>()?.borrow()),
                None => None,
            };
            let (Some(send), Some(dtype)) = (send, dtype) else {
                return Err(error(
                    Errc::Invalid,
                    format!("{kind}: a recorded operation needs its memory and dtype"),
                ));
            };
            let op = reduce_op(op.as_deref().unwrap_or("sum"))?;
            let root = root.unwrap_or(0);
            with_element!(dtype.as_str(), T => {
                let s = elements::<T>(&send)?;
                let r = match &recv {
                    Some(m) => elements::<T>(m)?,
                    None => s.clone(),
                };
                let step: Step = match kind.as_str() {
                    "all_reduce" => Box::new(move |g| g.all_reduce(&s, &r, op)),
                    "all_gather" => Box::new(move |g| g.all_gather(&s, &r)),
                    "reduce_scatter" => Box::new(move |g| g.reduce_scatter(&s, &r, op)),
                    "broadcast" => Box::new(move |g| g.broadcast(&s, root)),
                    other => {
                        return Err(error(
                            Errc::Invalid,
                            format!(
                                "operation {other:?}: one of all_reduce, all_gather, \
                                 reduce_scatter, broadcast, barrier"
                            ),
                        ))
                    }
                };
                steps.push(step);
                Ok(())
            })?;
        }
        let operations = steps.len();
        py.detach(|| {
            let mut team = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            team.record(|g| steps.into_iter().try_for_each(|step| step(g)))
        })
        .py_err()
        .map(|inner| PyGraph { inner, operations })
    }

    /// Runs `graph` (recorded by this team) once after `deps`, as one command.
    #[pyo3(signature = (graph, deps=Vec::new()))]
    fn replay(
        &self,
        py: Python<'_>,
        graph: &PyGraph,
        deps: Vec<PyRef<'_, Event>>,
    ) -> PyResult<Event> {
        self.run(py, &deps, |team, deps| team.replay(&graph.inner, deps))
    }

    fn __repr__(&self) -> String {
        format!(
            "Team(rank={}, size={}, device={:?})",
            self.rank,
            self.size,
            self.queue.device().name()
        )
    }
}

/// A buffer every rank of a team allocated a part of, opened by every other rank
/// (`sycl::ranks::NodeBuffer`), made by `Team.symmetric_buffer`: operations read the peers'
/// parts where they lie (`Team.all_reduce_symmetric`).
#[pyclass(module = "sycl_rs.collective", name = "SymmetricBuffer", frozen)]
pub struct PySymmetricBuffer {
    /// The `NodeBuffer<'static, T>` of `dtype`'s `T`; `None` once closed. Whoever holds the
    /// lock never waits for the GIL meanwhile (operations take it with the GIL released and
    /// drop it before they take the GIL back), so a thread holding the GIL may wait for it.
    inner: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    dtype: String,
    count: usize,
    rank: usize,
    /// Every rank's part as bytes, by rank (each range keeps its allocation alive).
    parts: Vec<UsmRange<u8>>,
    queue: sycl::Queue,
}

#[pymethods]
impl PySymmetricBuffer {
    /// The element type's name.
    #[getter]
    fn dtype(&self) -> &str {
        &self.dtype
    }

    /// Elements per rank.
    #[getter]
    fn count(&self) -> usize {
        self.count
    }

    /// This rank's index (its part is `part(rank)`).
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// Rank `rank`'s part (this rank's own, or a peer's opened here) as `Memory` of the
    /// team's queue: the same bytes the peers read and write, zero-copy. A peer's part may be
    /// freed by its owner once the buffer is closed (valid still on the native CPU; on CUDA
    /// the driver's rule: spec/soundness.md).
    fn part(&self, rank: usize) -> PyResult<Memory> {
        let range = self.parts.get(rank).ok_or_else(|| {
            error(
                Errc::Invalid,
                format!("rank {rank}: the buffer has {} parts", self.parts.len()),
            )
        })?;
        Ok(Memory::view(range.clone(), self.queue.clone()))
    }

    /// Closes the buffer now: every rank closes its peers' parts, and no part is freed before
    /// every rank closed it (collective, like `MPI_Win_free`). `RuntimeError` when a rank is
    /// gone or the time-out passed first. Views of the parts keep their memory until they go.
    /// A second call does nothing. Without it the buffer closes when garbage collected, each
    /// rank then waiting for the others.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // (Without the GIL: an operation of another thread may hold the buffer a while.)
        let taken = py.detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).take());
        let Some(buffer) = taken else {
            return Ok(());
        };
        with_element!(self.dtype.as_str(), T => {
            let buffer = buffer
                .downcast::<NodeBuffer<'static, T>>()
                .expect("a symmetric buffer holds a NodeBuffer of its dtype");
            py.detach(move || buffer.close()).py_err()
        })
    }

    fn __repr__(&self) -> String {
        let closed = self.inner.lock().map(|g| g.is_none()).unwrap_or(true);
        format!(
            "SymmetricBuffer(count={}, dtype={:?}, rank={}, parts={}{})",
            self.count,
            self.dtype,
            self.rank,
            self.parts.len(),
            if closed { ", closed" } else { "" }
        )
    }
}

/// The recorded step of an `all_reduce_symmetric` of `buf` (a `SymmetricBuffer`) into
/// `recv` from element `start` (as many elements as `recv` holds). The step takes the buffer
/// when the graph is recorded (refused once closed).
fn symmetric_step(
    buf: Option<Bound<'_, PyAny>>,
    recv: Option<PyRef<'_, Memory>>,
    op: Option<String>,
    start: Option<usize>,
) -> PyResult<Step> {
    let (Some(buf), Some(recv)) = (buf, recv) else {
        return Err(error(
            Errc::Invalid,
            "all_reduce_symmetric: a recorded operation needs its buffer and recv",
        ));
    };
    let buf: Py<PySymmetricBuffer> = buf.extract()?;
    let op = reduce_op(op.as_deref().unwrap_or("sum"))?;
    let start = start.unwrap_or(0);
    let dtype = buf.get().dtype.clone();
    with_element!(dtype.as_str(), T => {
        let r = elements::<T>(&recv)?;
        let end = start.checked_add(r.len()).ok_or_else(|| {
            error(Errc::Invalid, "all_reduce_symmetric: the range overflows")
        })?;
        let step: Step = Box::new(move |g| {
            let b = buf.get();
            let guard = b.inner.lock().unwrap_or_else(|p| p.into_inner());
            let inner = guard
                .as_ref()
                .ok_or_else(|| sycl::Error::invalid("the symmetric buffer was closed"))?;
            let send = inner
                .downcast_ref::<NodeBuffer<'static, T>>()
                .expect("a symmetric buffer holds a NodeBuffer of its dtype");
            g.all_reduce_symmetric(send, start..end, &r, op)
        });
        Ok(step)
    })
}

/// One operation to record: `(kind, send, recv, dtype, op, root)` (`send` is `Memory`, or a
/// `SymmetricBuffer` for "all_reduce_symmetric").
type RecordedOp<'py> = (
    String,
    Option<Bound<'py, PyAny>>,
    Option<PyRef<'py, Memory>>,
    Option<String>,
    Option<String>,
    Option<usize>,
);

/// A recorded operation, applied to the recorder.
type Step = Box<dyn FnOnce(&mut TeamRecorder<'_, 'static>) -> sycl::Result<()> + Send>;

/// Operations recorded once by `Team.record` and replayed by `Team.replay`
/// (`sycl::collective::TeamGraph`).
#[pyclass(module = "sycl_rs.collective", name = "Graph", frozen)]
pub struct PyGraph {
    inner: TeamGraph,
    operations: usize,
}

#[pymethods]
impl PyGraph {
    /// How many operations a replay runs.
    #[getter]
    fn operations(&self) -> usize {
        self.operations
    }

    fn __repr__(&self) -> String {
        format!("Graph(operations={})", self.operations)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNodeRanks>()?;
    m.add_class::<PyTeam>()?;
    m.add_class::<PyGraph>()?;
    m.add_class::<PySymmetricBuffer>()?;
    Ok(())
}
