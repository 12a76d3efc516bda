//! Queues: one non-blocking CUDA stream each (`CU_STREAM_NON_BLOCKING`), so every queue is
//! in order.
//!
//! Command events: on a profiling queue each command gets its own pair of CUDA events. On
//! other queues a command's event is a [`CommandEvent`] that records nothing until it is
//! needed (waited for, queried, or used as another queue's dependency); then one CUDA event
//! recorded on the stream marks every command submitted so far, and events of commands up to
//! that point share it. Submitting a command thus costs one driver call, as a bare
//! `cuLaunchKernel` does. A marker recorded late completes after later commands too, so a
//! marker is always recorded before the stream is made to wait for another event: a late
//! marker never waits for anything but plain commands of its own stream. The queue remembers
//! up to which command everything is known complete (a completed marker, an idle stream, a
//! queue wait), so events of those commands answer without a driver call, and as
//! dependencies cost nothing; a command queried before any marker covers it asks whether the
//! stream is idle before recording one.
//!
//! Dependencies: events of this backend become `cuStreamWaitEvent` (skipped for events of this
//! very queue, which the stream orders anyway); events of other backends are waited for from
//! the host before the command is enqueued.
//!
//! Fill: 1-, 2- and 4-byte patterns use `cuMemsetD8/D16/D32Async` (2 and 4 only when the
//! destination is aligned to the pattern; otherwise, and for every other pattern length, the
//! embedded PTX kernel [`FILL_PTX`] writes the pattern, at most 256 pattern bytes per launch).
//!
//! Host tasks never make a stream wait on the host. `cuStreamWaitValue32` on a word the host
//! writes would, but the driver may serialise other streams (of any queue) behind such a
//! wait, which NVIDIA documents can deadlock, and which did deadlock test runs on H100 and
//! H200. Instead each queue has a host thread (started on the first host task) that runs its
//! tasks in submission order: a `cuLaunchHostFunc` callback that only sets a flag (callbacks
//! may not call CUDA) tells it when the commands before a task are done; it waits for the
//! task's other dependencies on the host, runs the task and completes the task's
//! [`HostTaskEvent`]. A command submitted to the queue while one of its host tasks is
//! unfinished first waits for it on the submitting thread (a command the task itself submits
//! does not wait for it); a command of any queue that depends on a host task's event waits
//! for it on the host likewise. So a submission right after a host task is synchronous with
//! the task: the price of never blocking the GPU on the host. A panicking task is caught and
//! its event reports `Errc::Event`; later commands still run. If the driver lacks
//! `cuLaunchHostFunc`, host tasks run synchronously on the submitting thread after the
//! queue drained.
//!
//! Zero-sized copies and fills enqueue nothing but still return an event, recorded on the
//! stream (a barrier), so it completes in order with earlier commands.

use std::any::Any;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use cudarc::driver::sys;
use sycl_backend::{
    BackendKind, Errc, Error, EventStatus, HostTask, KernelArg, LaunchRange, ProfilingInfo,
    QueueProperties, Result,
};

use crate::context::PrimaryContext;
use crate::device::Device;
use crate::event::{
    no_profiling, now_ns, Calibration, Event, HostTaskEvent, HostTaskState, OwnedEvent, Profile,
};
use crate::{lock, result};

type DynEvent = Arc<dyn sycl_backend::Event>;

static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(1);

/// The fill kernel: byte `i` of `[dst, dst+size)` gets `pat[i % plen - off]` when
/// `i % plen` lies in `[off, off+len)`; the pattern chunk travels in a 256-byte parameter.
pub(crate) const FILL_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry sycl_rs_fill(
    .param .u64 p_dst,
    .param .u64 p_size,
    .param .u64 p_plen,
    .param .u64 p_off,
    .param .u64 p_len,
    .param .align 8 .b8 p_pat[256]
)
{
    .reg .pred %p<3>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<14>;

    ld.param.u64 %rd1, [p_dst];
    ld.param.u64 %rd2, [p_size];
    ld.param.u64 %rd3, [p_plen];
    ld.param.u64 %rd4, [p_off];
    ld.param.u64 %rd5, [p_len];
    mov.u64 %rd6, p_pat;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd7, %r1, %r2;
    cvt.u64.u32 %rd8, %r3;
    add.u64 %rd7, %rd7, %rd8;
    mul.wide.u32 %rd9, %r4, %r2;
LOOP:
    setp.ge.u64 %p1, %rd7, %rd2;
    @%p1 bra DONE;
    rem.u64 %rd10, %rd7, %rd3;
    sub.u64 %rd11, %rd10, %rd4;
    setp.ge.u64 %p2, %rd11, %rd5;
    @%p2 bra NEXT;
    add.u64 %rd12, %rd6, %rd11;
    ld.param.u8 %rs1, [%rd12];
    add.u64 %rd13, %rd1, %rd7;
    st.u8 [%rd13], %rs1;
NEXT:
    add.u64 %rd7, %rd7, %rd9;
    bra.uni LOOP;
DONE:
    ret;
}
"#;

/// The fill kernel loaded into one context.
pub(crate) struct FillKernel {
    module: sys::CUmodule,
    func: sys::CUfunction,
}

// SAFETY: module and function handles may be used from any thread with their context current.
unsafe impl Send for FillKernel {}

impl FillKernel {
    /// Loads [`FILL_PTX`] into the current context.
    pub(crate) fn load() -> Result<FillKernel> {
        let mut image = FILL_PTX.as_bytes().to_vec();
        image.push(0);
        let module = result::module::load(&image, "the embedded fill kernel")?;
        match result::module::function(module, "sycl_rs_fill") {
            Ok(func) => Ok(FillKernel { module, func }),
            Err(e) => {
                // SAFETY: the module was just loaded and nothing else uses it.
                if let Err(u) = unsafe { result::module::unload(module) } {
                    log::warn!("{u}");
                }
                Err(e)
            }
        }
    }

    /// Unloads the module (its context is current).
    pub(crate) fn unload(self) {
        // SAFETY: called once, when the owning primary context goes away.
        if let Err(e) = unsafe { result::module::unload(self.module) } {
            log::debug!("unloading the fill kernel: {e}");
        }
    }
}

/// A stream, destroyed on drop.
pub(crate) struct Stream {
    ctx: Arc<PrimaryContext>,
    pub(crate) raw: sys::CUstream,
}

// SAFETY: streams may be used from any thread; every use makes the owning context current.
unsafe impl Send for Stream {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        let _current = self
            .ctx
            .make_current()
            .map_err(|e| log::debug!("destroying a CUDA stream: {e}"))
            .ok();
        // SAFETY: the stream is owned here; the driver finishes queued work before freeing it.
        if let Err(e) = unsafe { result::stream::destroy(self.raw) } {
            log::warn!("{e}");
        }
    }
}

struct Job {
    task: HostTask,
    /// Set (by a driver callback, in stream order) once every earlier command completed.
    ready: Arc<result::stream::HostReady>,
    /// Dependencies waited for on the host: other backends' events and host tasks' events.
    host_deps: Vec<DynEvent>,
    state: Arc<HostTaskState>,
}

struct HostWorker {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
    thread_id: std::thread::ThreadId,
}

impl HostWorker {
    fn spawn() -> Result<HostWorker> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("sycl-rs-cuda-host-task".into())
            .spawn(move || {
                for job in rx {
                    // No CUDA call on this thread: the driver's callback thread tells us when
                    // the earlier commands are done.
                    job.ready.wait();
                    let mut failure = None;
                    for dep in &job.host_deps {
                        if let Err(e) = dep.wait() {
                            failure = Some(format!(
                                "the host task did not run: a dependency failed: {e}"
                            ));
                            break;
                        }
                    }
                    if failure.is_none() {
                        job.state.started();
                        let task = job.task;
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).is_err() {
                            failure = Some("the host task panicked".to_string());
                        }
                    }
                    if let Some(why) = &failure {
                        log::error!("cuda: {why}");
                    }
                    job.state.finished(failure);
                }
            })
            .map_err(|e| {
                Error::new(
                    Errc::Runtime,
                    format!("cannot start the host-task thread: {e}"),
                )
            })?;
        Ok(HostWorker {
            tx: Some(tx),
            thread_id: thread.thread().id(),
            thread: Some(thread),
        })
    }
}

#[derive(Default)]
struct State {
    worker: Option<HostWorker>,
    /// Calibration made on demand when a profiling standalone event is signalled on a queue
    /// without `enable_profiling`.
    lazy_calib: Option<Arc<Calibration>>,
    /// The newest host task of this queue, until a submission finds it finished.
    host_tail: Option<Arc<HostTaskState>>,
    /// Commands submitted so far (the sequence number of the newest).
    submitted: u64,
    /// The newest marker recorded for [`CommandEvent`]s and the sequence number it covers.
    marker: Option<(u64, Event)>,
    /// Every command up to this sequence number is known to have completed.
    completed: u64,
}

impl State {
    /// The marker covering command `seq`, recording one after the newest command if needed.
    fn marker_for(
        &mut self,
        seq: u64,
        ctx: &Arc<PrimaryContext>,
        stream: &Stream,
        queue_id: u64,
    ) -> Result<(u64, Event)> {
        if let Some((covers, ev)) = &self.marker {
            if *covers >= seq {
                return Ok((*covers, ev.clone()));
            }
        }
        let _current = ctx.make_current()?;
        let end = OwnedEvent::pooled(ctx)?;
        result::event::record(end.raw, stream.raw)?;
        let ev = Event::command(end, queue_id, None);
        self.marker = Some((self.submitted, ev.clone()));
        Ok((self.submitted, ev))
    }

    /// Records a marker if commands were submitted since the last one: called before the
    /// stream is made to wait, so that no earlier command's event waits too.
    fn seal(&mut self, ctx: &Arc<PrimaryContext>, stream: &Stream, queue_id: u64) -> Result<()> {
        let covered = self.marker.as_ref().map_or(0, |m| m.0);
        if self.submitted > covered {
            self.marker_for(self.submitted, ctx, stream, queue_id)?;
        }
        Ok(())
    }
}

/// The event of a command on a queue without profiling (see the module docs).
pub(crate) struct CommandEvent {
    ctx: Arc<PrimaryContext>,
    stream: Arc<Stream>,
    state: Arc<Mutex<State>>,
    queue_id: u64,
    seq: u64,
    /// The marker covering this command, and the sequence number the marker covers.
    recorded: std::sync::OnceLock<(u64, Event)>,
}

impl CommandEvent {
    /// The CUDA event that completes with this command (recorded now if none covers it).
    pub(crate) fn recorded(&self) -> Result<Event> {
        self.marker().map(|(_, e)| e)
    }

    fn marker(&self) -> Result<(u64, Event)> {
        if let Some(m) = self.recorded.get() {
            return Ok(m.clone());
        }
        let m = lock(&self.state).marker_for(self.seq, &self.ctx, &self.stream, self.queue_id)?;
        Ok(self.recorded.get_or_init(|| m).clone())
    }

    /// Whether the command is known to have completed, without asking the driver.
    pub(crate) fn known_complete(&self) -> bool {
        lock(&self.state).completed >= self.seq
    }

    /// Asks `done` about the marker covering this command; a `true` answer marks every
    /// command the marker covers complete.
    fn through_marker(&self, done: impl FnOnce(&Event) -> Result<bool>) -> Result<bool> {
        let (covers, e) = self.marker()?;
        let reached = done(&e)?;
        if reached {
            let mut st = lock(&self.state);
            st.completed = st.completed.max(covers);
        }
        Ok(reached)
    }

    /// Whether the command has completed. When no marker covers it yet, an idle stream
    /// answers first (it has completed every command submitted so far): a marker recorded
    /// only to be queried at once would rarely have completed yet, which would leave callers
    /// that prune finished commands, such as USM owners, holding them one more round.
    fn query(&self) -> Result<bool> {
        {
            let mut st = lock(&self.state);
            if st.completed >= self.seq {
                return Ok(true);
            }
            let covered = self.recorded.get().is_some()
                || st.marker.as_ref().is_some_and(|m| m.0 >= self.seq);
            if !covered {
                let _current = self.ctx.make_current()?;
                if result::stream::query(self.stream.raw)? {
                    st.completed = st.submitted;
                    return Ok(true);
                }
            }
        }
        self.through_marker(Event::query)
    }
}

impl sycl_backend::Event for CommandEvent {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn status(&self) -> Result<EventStatus> {
        Ok(if self.query()? {
            EventStatus::Complete
        } else {
            EventStatus::Submitted
        })
    }

    fn wait(&self) -> Result<()> {
        if !self.known_complete() {
            self.through_marker(|e| sycl_backend::Event::wait(e).map(|()| true))?;
        }
        Ok(())
    }

    fn wait_timeout(&self, timeout: std::time::Duration) -> Result<bool> {
        Ok(self.known_complete()
            || self.through_marker(|e| sycl_backend::Event::wait_timeout(e, timeout))?)
    }

    fn profiling(&self) -> Result<ProfilingInfo> {
        Err(no_profiling("queue made without enable_profiling"))
    }

    fn ipc_enabled(&self) -> bool {
        false
    }
}

/// The CUDA event behind `event` (recording a command's marker if needed), or `None` for a
/// host task's event, which callers wait for on the host. Events of other backends are
/// `BackendMismatch`.
pub(crate) fn cuda_event(event: &DynEvent) -> Result<Option<Event>> {
    let any = event.as_any();
    if let Some(e) = any.downcast_ref::<Event>() {
        return Ok(Some(e.clone()));
    }
    if let Some(c) = any.downcast_ref::<CommandEvent>() {
        return c.recorded().map(Some);
    }
    if any.is::<HostTaskEvent>() {
        return Ok(None);
    }
    sycl_backend::downcast::<Event>(any, "event", BackendKind::Cuda).map(|e| Some(e.clone()))
}

/// A queue (`cuda::Queue`) on one device: one CUDA stream.
pub struct Queue {
    device: Arc<dyn sycl_backend::Device>,
    pub(crate) dev: Arc<Device>,
    pub(crate) ctx: Arc<PrimaryContext>,
    props: QueueProperties,
    id: u64,
    stream: Arc<Stream>,
    calib: Option<Arc<Calibration>>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Queue")
            .field("device", &self.dev.ordinal)
            .field("id", &self.id)
            .finish()
    }
}

impl Queue {
    pub(crate) fn new(
        device: Arc<dyn sycl_backend::Device>,
        dev: Arc<Device>,
        ctx: Arc<PrimaryContext>,
        props: QueueProperties,
    ) -> Result<Queue> {
        let _current = ctx.make_current()?;
        let raw = result::stream::create_non_blocking()?;
        let stream = Arc::new(Stream {
            ctx: ctx.clone(),
            raw,
        });
        let calib = if props.enable_profiling {
            Some(Arc::new(Calibration::new(&ctx, raw)?))
        } else {
            None
        };
        Ok(Queue {
            device,
            dev,
            ctx,
            props,
            id: NEXT_QUEUE_ID.fetch_add(1, Ordering::Relaxed),
            stream,
            calib,
            state: Arc::new(Mutex::new(State::default())),
        })
    }

    /// Splits `deps` into CUDA events the stream can wait for (other queues' events) and
    /// events to wait for on the host (other backends', host tasks', IPC events imported on
    /// another GPU). Events of this queue's own commands are dropped: the stream orders them.
    fn split_deps(&self, deps: &[DynEvent]) -> Result<(Vec<Event>, Vec<DynEvent>)> {
        let mut on_stream = Vec::with_capacity(deps.len());
        let mut on_host = Vec::new();
        for dep in deps {
            if dep.backend() == BackendKind::Cuda {
                if let Some(c) = dep.as_any().downcast_ref::<CommandEvent>() {
                    // The stream orders this queue's own commands; completed ones need no wait.
                    if c.queue_id == self.id || c.known_complete() {
                        continue;
                    }
                }
                if let Some(e) = cuda_event(dep)? {
                    if self.waits_on_host(&e) {
                        on_host.push(dep.clone());
                    } else if e.inner.queue_id != self.id {
                        on_stream.push(e);
                    }
                    continue;
                }
            }
            on_host.push(dep.clone());
        }
        Ok((on_stream, on_host))
    }

    /// [`Queue::split_deps`], waiting for the host part now.
    fn wait_host_deps(&self, deps: &[DynEvent]) -> Result<Vec<Event>> {
        let (on_stream, on_host) = self.split_deps(deps)?;
        for dep in &on_host {
            dep.wait()?;
        }
        Ok(on_stream)
    }

    /// Whether the stream cannot wait for `e` itself: an IPC event imported on another GPU
    /// (`cuStreamWaitEvent` with one crashed the process with SIGSEGV on 2x H200, while the
    /// same wait on the event's own GPU works), so it is waited for on the host.
    fn waits_on_host(&self, e: &Event) -> bool {
        e.inner.imported.is_some() && e.inner.ev.ctx.ordinal != self.ctx.ordinal
    }

    /// Makes the stream wait for `own` events (other queues' CUDA events), sealing this
    /// queue's earlier commands first.
    fn wait_own(&self, st: &mut State, own: &[Event]) -> Result<()> {
        if own.is_empty() {
            return Ok(());
        }
        if self.calib.is_none() {
            // Profiling queues record an event per command: nothing to seal.
            st.seal(&self.ctx, &self.stream, self.id)?;
        }
        for e in own {
            result::stream::wait_event(self.stream.raw, e.raw())?;
        }
        Ok(())
    }

    /// Locks the state once every host task submitted to this queue has finished: in-order
    /// semantics without making the stream wait on the host. A host task that submits to its
    /// own queue does not wait for itself.
    fn lock_after_host_tasks(&self) -> MutexGuard<'_, State> {
        loop {
            let mut st = lock(&self.state);
            let Some(tail) = st.host_tail.clone() else {
                return st;
            };
            if tail.is_finished() {
                st.host_tail = None;
                return st;
            }
            let on_worker = st
                .worker
                .as_ref()
                .is_some_and(|w| w.thread_id == std::thread::current().id());
            if on_worker {
                return st;
            }
            drop(st);
            // A failed task still orders the queue; its event reports the failure.
            let _ = tail.wait();
        }
    }

    /// Enqueues `op` after `deps` and returns its event. The state lock keeps the start
    /// event, the command and the end event together.
    pub(crate) fn enqueue(
        &self,
        deps: &[DynEvent],
        op: impl FnOnce(sys::CUstream) -> Result<()>,
    ) -> Result<DynEvent> {
        let own = self.wait_host_deps(deps)?;
        let mut st = self.lock_after_host_tasks();
        let _current = self.ctx.make_current()?;
        self.wait_own(&mut st, &own)?;
        self.enqueue_locked(&mut st, op)
    }

    fn enqueue_locked(
        &self,
        st: &mut State,
        op: impl FnOnce(sys::CUstream) -> Result<()>,
    ) -> Result<DynEvent> {
        let s = self.stream.raw;
        if self.calib.is_none() {
            op(s)?;
            st.submitted += 1;
            return Ok(Arc::new(CommandEvent {
                ctx: self.ctx.clone(),
                stream: self.stream.clone(),
                state: self.state.clone(),
                queue_id: self.id,
                seq: st.submitted,
                recorded: std::sync::OnceLock::new(),
            }));
        }
        let profile = match &self.calib {
            Some(calib) => {
                let submit_ns = now_ns();
                let start = OwnedEvent::create(&self.ctx, 0)?;
                result::event::record(start.raw, s)?;
                Some(Profile {
                    start: Some(start),
                    calib: calib.clone(),
                    submit_ns,
                })
            }
            None => None,
        };
        let end = if profile.is_some() {
            OwnedEvent::create(&self.ctx, 0)?
        } else {
            OwnedEvent::pooled(&self.ctx)?
        };
        op(s)?;
        result::event::record(end.raw, s)?;
        Ok(Arc::new(Event::command(end, self.id, profile)))
    }

    unsafe fn fill_impl(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        s: sys::CUstream,
    ) -> Result<()> {
        let plen = pattern.len();
        let value = |w: usize| -> u32 {
            let mut b = [0u8; 4];
            b[..w].copy_from_slice(&pattern[..w]);
            u32::from_le_bytes(b)
        };
        if pattern.iter().all(|&b| b == pattern[0]) {
            // SAFETY: the caller guarantees the range.
            return unsafe { result::mem::set_async(dst, u32::from(pattern[0]), 1, size, s) };
        }
        if (plen == 2 || plen == 4) && dst % plen as u64 == 0 {
            // SAFETY: the caller guarantees the range; `dst` is aligned to the width.
            return unsafe { result::mem::set_async(dst, value(plen), plen, size / plen, s) };
        }
        let fill = {
            let mut slot = lock(&self.ctx.fill);
            if slot.is_none() {
                match FillKernel::load() {
                    Ok(k) => *slot = Some(k),
                    Err(e) => log::warn!("fill kernel unavailable, using 2-D memsets: {e}"),
                }
            }
            slot.as_ref().map(|k| k.func)
        };
        let Some(func) = fill else {
            // One strided 2-D memset per pattern byte.
            for (j, &b) in pattern.iter().enumerate() {
                // SAFETY: row `r` writes byte `dst + j + r*plen`, inside the caller's range.
                unsafe { result::mem::set_2d_async(dst + j as u64, plen, b, 1, size / plen, s)? };
            }
            return Ok(());
        };
        let threads = 256u32;
        let blocks = size.div_ceil(threads as usize).clamp(1, 65535) as u32;
        for (chunk_index, chunk) in pattern.chunks(256).enumerate() {
            #[repr(C, align(8))]
            struct Pat([u8; 256]);
            let mut pat = Pat([0; 256]);
            pat.0[..chunk.len()].copy_from_slice(chunk);
            let mut dst_v = dst;
            let mut size_v = size as u64;
            let mut plen_v = plen as u64;
            let mut off_v = (chunk_index * 256) as u64;
            let mut len_v = chunk.len() as u64;
            let mut params: [*mut c_void; 6] = [
                (&mut dst_v as *mut u64).cast(),
                (&mut size_v as *mut u64).cast(),
                (&mut plen_v as *mut u64).cast(),
                (&mut off_v as *mut u64).cast(),
                (&mut len_v as *mut u64).cast(),
                (&mut pat as *mut Pat).cast(),
            ];
            // SAFETY: six parameter pointers matching the kernel's signature (five u64 and a
            // 256-byte array), alive for the call (the driver copies them); the kernel writes
            // only `[dst, dst+size)`, which the caller guarantees.
            unsafe {
                result::module::launch(
                    func,
                    [blocks, 1, 1],
                    [threads, 1, 1],
                    0,
                    s,
                    params.as_mut_ptr(),
                )?
            };
        }
        Ok(())
    }

    fn calibration_for_signal(&self, st: &mut State) -> Result<Arc<Calibration>> {
        if let Some(c) = &self.calib {
            return Ok(c.clone());
        }
        if let Some(c) = &st.lazy_calib {
            return Ok(c.clone());
        }
        let c = Arc::new(Calibration::new(&self.ctx, self.stream.raw)?);
        st.lazy_calib = Some(c.clone());
        Ok(c)
    }

    fn host_task_sync(&self, task: HostTask, deps: &[DynEvent]) -> Result<DynEvent> {
        for d in deps {
            d.wait()?;
        }
        sycl_backend::Queue::wait(self)?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(task))
            .map_err(|_| Error::new(Errc::Runtime, "the host task panicked"))?;
        self.enqueue(&[], |_| Ok(()))
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let worker = lock(&self.state).worker.take();
        if let Some(mut w) = worker {
            drop(w.tx.take());
            if let Some(t) = w.thread.take() {
                if t.thread().id() == std::thread::current().id() {
                    // Dropped by its own host task: the thread exits on its own after this.
                } else if t.join().is_err() {
                    log::error!("the host-task thread panicked");
                }
            }
        }
    }
}

impl sycl_backend::Queue for Queue {
    fn device(&self) -> &Arc<dyn sycl_backend::Device> {
        &self.device
    }

    fn cuda_stream(&self) -> Option<u64> {
        // Every command of this queue goes to this one stream, in submission order (host
        // tasks wait for it to reach them).
        Some(self.stream.raw as u64)
    }

    fn properties(&self) -> QueueProperties {
        self.props
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    #[doc(alias = "cuMemcpyAsync")]
    unsafe fn memcpy(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        deps: &[DynEvent],
    ) -> Result<DynEvent> {
        if size == 0 {
            return self.barrier(deps);
        }
        // SAFETY: the caller guarantees both ranges until the event completes.
        self.enqueue(deps, |s| unsafe {
            result::mem::copy_async(dst, src, size, s)
        })
    }

    #[doc(alias = "cuMemsetD8Async")]
    unsafe fn fill(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        deps: &[DynEvent],
    ) -> Result<DynEvent> {
        if pattern.is_empty() {
            return Err(Error::invalid("fill pattern is empty"));
        }
        if size % pattern.len() != 0 {
            return Err(Error::invalid(format!(
                "fill size {size} is not a multiple of the pattern size {}",
                pattern.len()
            )));
        }
        if size == 0 {
            return self.barrier(deps);
        }
        // SAFETY: the caller guarantees the range until the event completes.
        self.enqueue(deps, |s| unsafe { self.fill_impl(dst, pattern, size, s) })
    }

    #[doc(alias = "cuMemPrefetchAsync_v2")]
    unsafe fn prefetch(&self, ptr: u64, size: usize, deps: &[DynEvent]) -> Result<DynEvent> {
        let managed = size > 0 && result::mem::is_managed(ptr).unwrap_or(false);
        if !managed {
            // A hint only: nothing to move for device, host or unknown memory.
            return self.barrier(deps);
        }
        let ordinal = self.dev.ordinal;
        self.enqueue(deps, |s| {
            // SAFETY: the caller guarantees a live allocation; a refused prefetch (no
            // concurrent managed access) is only a lost hint.
            if let Err(e) = unsafe { result::mem::prefetch_async(ptr, size, ordinal, s) } {
                log::debug!("prefetch ignored: {e}");
            }
            Ok(())
        })
    }

    fn host_task(&self, task: HostTask, deps: &[DynEvent]) -> Result<DynEvent> {
        if !result::has_symbol("cuLaunchHostFunc") {
            return self.host_task_sync(task, deps);
        }
        // Events of this queue's commands need nothing: the callback below comes after them.
        let (own, host_deps) = self.split_deps(deps)?;
        // No wait for earlier host tasks: the host thread runs them in order.
        let mut st = lock(&self.state);
        let _current = self.ctx.make_current()?;
        self.wait_own(&mut st, &own)?;
        if st.worker.is_none() {
            st.worker = Some(HostWorker::spawn()?);
        }
        let ready = Arc::new(result::stream::HostReady::default());
        result::stream::notify_when_reached(self.stream.raw, &ready)?;
        let state = Arc::new(HostTaskState::default());
        let job = Job {
            task,
            ready,
            host_deps,
            state: state.clone(),
        };
        let sent = st
            .worker
            .as_ref()
            .and_then(|w| w.tx.as_ref())
            .map(|tx| tx.send(job));
        match sent {
            Some(Ok(())) => {
                st.host_tail = Some(state.clone());
                Ok(Arc::new(HostTaskEvent::new(
                    state,
                    self.props.enable_profiling,
                )))
            }
            _ => Err(Error::new(Errc::Runtime, "the host-task thread is gone")),
        }
    }

    unsafe fn launch(
        &self,
        kernel: &Arc<dyn sycl_backend::Kernel>,
        range: LaunchRange,
        args: &[KernelArg<'_>],
        deps: &[DynEvent],
    ) -> Result<DynEvent> {
        // SAFETY: forwarded contract.
        unsafe { crate::kernel::launch(self, kernel, range, args, deps) }
    }

    fn pack_launch(
        &self,
        kernel: &Arc<dyn sycl_backend::Kernel>,
        range: LaunchRange,
        args: &[KernelArg<'_>],
    ) -> Result<Option<Arc<dyn sycl_backend::PackedLaunch>>> {
        crate::kernel::pack_launch(self, kernel, range, args).map(Some)
    }

    unsafe fn launch_packed(
        &self,
        packed: &dyn sycl_backend::PackedLaunch,
        patches: &[(usize, u64)],
        deps: &[DynEvent],
    ) -> Result<DynEvent> {
        // SAFETY: forwarded contract.
        unsafe { crate::kernel::launch_packed(self, packed, patches, deps) }
    }

    #[doc(alias = "cuGraphInstantiate")]
    unsafe fn build_graph(
        &self,
        launches: &[sycl_backend::GraphLaunch<'_>],
    ) -> Result<Arc<dyn sycl_backend::Graph>> {
        // SAFETY: forwarded contract.
        unsafe { crate::kernel::build_graph(self, launches) }
    }

    #[doc(alias = "cuGraphLaunch")]
    unsafe fn launch_graph(
        &self,
        graph: &Arc<dyn sycl_backend::Graph>,
        patch: Option<(u64, u32)>,
        deps: &[DynEvent],
    ) -> Result<DynEvent> {
        // SAFETY: forwarded contract.
        unsafe { crate::kernel::launch_graph(self, graph, patch, deps) }
    }

    fn barrier(&self, deps: &[DynEvent]) -> Result<DynEvent> {
        self.enqueue(deps, |_| Ok(()))
    }

    #[doc(alias = "cuEventRecord")]
    fn enqueue_signal_event(&self, event: &DynEvent) -> Result<()> {
        // Standalone events have no queue (command events carry theirs).
        let e = event
            .as_any()
            .downcast_ref::<Event>()
            .filter(|e| e.inner.queue_id == 0);
        let Some(e) = e else {
            if event.backend() != BackendKind::Cuda {
                return Err(Error::new(
                    Errc::BackendMismatch,
                    "the event does not belong to the cuda backend",
                ));
            }
            return Err(Error::invalid(
                "only standalone events (Event::new) can be signalled, not the event of a \
                 command or host task",
            ));
        };
        // A CUDA event belongs to one device's context and can only be recorded on its
        // streams (the driver answers CUDA_ERROR_INVALID_HANDLE otherwise).
        let event_ordinal = e.inner.ev.ctx.ordinal;
        if event_ordinal != self.ctx.ordinal {
            return Err(Error::invalid(format!(
                "this event lives on CUDA device {event_ordinal} and cannot be signalled from a \
                 queue of device {}: make it in a context of that device (a standalone event of \
                 a multi-device context lives on the context's first device)",
                self.ctx.ordinal
            )));
        }
        let mut st = self.lock_after_host_tasks();
        let _current = self.ctx.make_current()?;
        if e.inner.timing {
            let calib = self.calibration_for_signal(&mut st)?;
            let submit_ns = now_ns();
            result::event::record(e.raw(), self.stream.raw)?;
            *lock(&e.inner.profile) = Some(Profile {
                start: None,
                calib,
                submit_ns,
            });
            return Ok(());
        }
        result::event::record(e.raw(), self.stream.raw)
    }

    #[doc(alias = "cuStreamWaitEvent")]
    fn enqueue_wait_events(&self, events: &[DynEvent]) -> Result<()> {
        let own = self.wait_host_deps(events)?;
        let mut st = self.lock_after_host_tasks();
        let _current = self.ctx.make_current()?;
        self.wait_own(&mut st, &own)
    }

    #[doc(alias = "cuStreamSynchronize")]
    fn wait(&self) -> Result<()> {
        let submitted = {
            let st = self.lock_after_host_tasks();
            st.submitted
        };
        let _current = self.ctx.make_current()?;
        result::stream::synchronize(self.stream.raw)?;
        let mut st = lock(&self.state);
        st.completed = st.completed.max(submitted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded PTX must JIT on a real device (the 2-D memset fallback would hide it).
    #[test]
    fn fill_kernel_jit_compiles() {
        if crate::load().is_err() {
            eprintln!("skipping fill_kernel_jit_compiles: no CUDA driver or device");
            return;
        }
        let dev = result::device::get(0).unwrap();
        let ctx = PrimaryContext::retain(dev, 0).unwrap();
        let _current = ctx.make_current().unwrap();
        let k = FillKernel::load().expect("the embedded fill PTX must load");
        k.unload();
    }
}
