//! Queues: a worker thread per queue runs commands in submission order.
//!
//! Out-of-order queues also run in order (legal: dependencies are always honoured). Each
//! command waits for its dependencies on the worker (foreign events through their own `wait`),
//! so submission never blocks.

use std::any::Any;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sycl_backend::{
    downcast, BackendKind, ClosureKernel, Errc, Error, HostTask, LaunchRange, QueueProperties,
    Result,
};

use crate::device::MAX_WORK_GROUP_SIZE;
use crate::event::{wait_dependency, Event};
use crate::kernel;

/// How long an idle worker spins for the next command before it sleeps.
const WORKER_SPIN: Duration = Duration::from_micros(50);

enum Command {
    Nop,
    /// `enqueue_wait_events`: a `Nop` whose failed wait (a peer died owing the signal) fails
    /// every later command of the queue, which must not run on data that never came.
    WaitEvents,
    Memcpy {
        dst: usize,
        src: usize,
        size: usize,
    },
    Fill {
        dst: usize,
        pattern: Vec<u8>,
        size: usize,
    },
    HostTask(HostTask),
    Closure {
        total: usize,
        kernel: ClosureKernel,
        /// The smallest chunk worth a task of its own (1 for work-groups).
        min_chunk: usize,
    },
    Signal(Arc<Event>),
}

struct Job {
    deps: Vec<Arc<dyn sycl_backend::Event>>,
    cmd: Command,
    event: Arc<Event>,
}

struct Submit {
    tx: Option<Sender<Job>>,
    /// The event of the last command: all earlier ones completed when it did.
    last: Option<Arc<Event>>,
}

/// A queue of the native CPU backend.
///
/// Dropping it closes its channel: the worker still runs what was submitted (so the events
/// complete), then exits. The drop itself never blocks, since a host task may wait on the very
/// thread that drops the queue.
pub struct Queue {
    device: Arc<dyn sycl_backend::Device>,
    props: QueueProperties,
    submit: Mutex<Submit>,
}

impl Queue {
    pub(crate) fn new(
        device: Arc<dyn sycl_backend::Device>,
        props: QueueProperties,
    ) -> Result<Queue> {
        let (tx, rx) = mpsc::channel::<Job>();
        // The worker is detached: it exits once the queue (its sender) is gone.
        std::thread::Builder::new()
            .name("sycl-native-queue".to_owned())
            .spawn(move || worker_main(rx))
            .map_err(|e| {
                Error::new(
                    Errc::Runtime,
                    format!("cannot start a queue worker thread: {e}"),
                )
            })?;
        Ok(Queue {
            device,
            props,
            submit: Mutex::new(Submit {
                tx: Some(tx),
                last: None,
            }),
        })
    }

    fn push(&self, deps: &[Arc<dyn sycl_backend::Event>], cmd: Command) -> Result<Arc<Event>> {
        let event = Event::command(self.props.enable_profiling);
        let job = Job {
            deps: deps.to_vec(),
            cmd,
            event: event.clone(),
        };
        let mut submit = self.submit.lock();
        let tx = submit
            .tx
            .as_ref()
            .ok_or_else(|| Error::new(Errc::Runtime, "the queue is shutting down"))?;
        tx.send(job)
            .map_err(|_| Error::new(Errc::Runtime, "the queue's worker thread is gone"))?;
        submit.last = Some(event.clone());
        Ok(event)
    }

    fn submit(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
        cmd: Command,
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        Ok(self.push(deps, cmd)?)
    }
}

fn next_job(rx: &Receiver<Job>) -> Option<Job> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        std::hint::spin_loop();
        spins += 1;
        if spins % 64 == 0 && start.elapsed() >= WORKER_SPIN {
            return rx.recv().ok();
        }
    }
}

fn worker_main(rx: Receiver<Job>) {
    // Set by a failed `enqueue_wait_events`: the queue's order is broken for good.
    let mut broken: Option<Error> = None;
    while let Some(job) = next_job(&rx) {
        let Job { deps, cmd, event } = job;
        if let Some(e) = &broken {
            drop((deps, cmd));
            event.complete(Err(e.clone()));
            continue;
        }
        let waits = matches!(cmd, Command::WaitEvents);
        // Nothing may unwind out of here: the event must complete, the worker must live on.
        let result = kernel::guarded("waiting for dependencies", || {
            deps.iter().try_for_each(wait_dependency)
        })
        .and_then(|r| r);
        drop(deps);
        if let (true, Err(e)) = (waits, &result) {
            broken = Some(Error::new(
                Errc::Event,
                format!(
                    "an earlier enqueue_wait_events of this queue failed, so its later commands do not run: {}",
                    e.message()
                ),
            ));
        }
        let result = match result {
            Ok(()) => {
                event.begin();
                kernel::guarded("a command", || run(cmd)).and_then(|r| r)
            }
            Err(e) => {
                log::warn!("native_cpu: a command did not run because a dependency failed: {e}");
                // What the command holds (a kernel's argument guards) goes before the event
                // completes, as it does when the command runs.
                drop(cmd);
                Err(e)
            }
        };
        event.complete(result);
    }
}

fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Nop | Command::WaitEvents => Ok(()),
        Command::Memcpy { dst, src, size } => {
            // SAFETY: `Queue::memcpy`'s caller guarantees both ranges stay valid and untouched
            // until the command's event completes, which happens after this returns.
            unsafe { kernel::copy(dst, src, size) };
            Ok(())
        }
        Command::Fill { dst, pattern, size } => {
            // SAFETY: as for memcpy (`Queue::fill`'s contract).
            unsafe { kernel::fill(dst, &pattern, size) };
            Ok(())
        }
        Command::HostTask(task) => kernel::guarded("the host task", task),
        Command::Closure {
            total,
            kernel,
            min_chunk,
        } => kernel::run_closure(&kernel, total, min_chunk),
        Command::Signal(event) => {
            event.fire();
            Ok(())
        }
    }
}

impl sycl_backend::Queue for Queue {
    fn device(&self) -> &Arc<dyn sycl_backend::Device> {
        &self.device
    }

    fn properties(&self) -> QueueProperties {
        self.props
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    unsafe fn memcpy(
        &self,
        dst: u64,
        src: u64,
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        let (dst, src) = (addr(dst)?, addr(src)?);
        self.submit(
            deps,
            if size == 0 {
                Command::Nop
            } else {
                Command::Memcpy { dst, src, size }
            },
        )
    }

    unsafe fn fill(
        &self,
        dst: u64,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        if pattern.is_empty() || size % pattern.len() != 0 {
            return Err(Error::invalid(format!(
                "fill of {size} bytes with a pattern of {} bytes (size must be a multiple of it)",
                pattern.len()
            )));
        }
        let dst = addr(dst)?;
        let cmd = if size == 0 {
            Command::Nop
        } else {
            Command::Fill {
                dst,
                pattern: pattern.to_vec(),
                size,
            }
        };
        self.submit(deps, cmd)
    }

    unsafe fn prefetch(
        &self,
        _ptr: u64,
        _size: usize,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        self.submit(deps, Command::Nop)
    }

    fn host_task(
        &self,
        task: HostTask,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        self.submit(deps, Command::HostTask(task))
    }

    fn parallel_for_closure(
        &self,
        range: LaunchRange,
        kernel: ClosureKernel,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        range.validate(MAX_WORK_GROUP_SIZE)?;
        let total = range.global[..usize::from(range.dims)]
            .iter()
            .try_fold(1usize, |acc, &g| acc.checked_mul(g));
        let total = total.ok_or_else(|| {
            Error::new(Errc::NdRange, format!("range {:?} overflows", range.global))
        })?;
        self.submit(
            deps,
            Command::Closure {
                total,
                kernel,
                min_chunk: kernel::MIN_CHUNK_ITEMS,
            },
        )
    }

    fn parallel_for_work_groups(
        &self,
        groups: usize,
        kernel: ClosureKernel,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        self.submit(
            deps,
            Command::Closure {
                total: groups,
                kernel,
                min_chunk: 1,
            },
        )
    }

    fn barrier(
        &self,
        deps: &[Arc<dyn sycl_backend::Event>],
    ) -> Result<Arc<dyn sycl_backend::Event>> {
        self.submit(deps, Command::Nop)
    }

    fn enqueue_signal_event(&self, event: &Arc<dyn sycl_backend::Event>) -> Result<()> {
        let ours = downcast::<Event>(event.as_any(), "event", BackendKind::NativeCpu)?;
        let event: Arc<Event> = own_arc(event, ours)?;
        {
            // Fast path: when every command submitted so far has completed, the signal is due
            // now. Firing it on this thread saves two thread hand-offs (and, across processes,
            // most of a round trip). The lock keeps other submissions out meanwhile.
            let submit = self.submit.lock();
            let idle = submit.last.as_ref().map_or(true, |last| last.is_complete());
            if idle {
                event.arm(self.props.enable_profiling);
                event.fire();
                return Ok(());
            }
        }
        event.arm(self.props.enable_profiling);
        if let Err(e) = self.push(&[], Command::Signal(event.clone())) {
            // Never reached the queue: take the signal back.
            event.fire();
            return Err(e);
        }
        Ok(())
    }

    fn enqueue_wait_events(&self, events: &[Arc<dyn sycl_backend::Event>]) -> Result<()> {
        self.push(events, Command::WaitEvents).map(|_| ())
    }

    fn is_idle(&self) -> bool {
        // A failed last command may be a broken queue (a failed `enqueue_wait_events`), whose
        // later commands must fail too: not idle then.
        let mut submit = self.submit.lock();
        match &submit.last {
            None => true,
            Some(last) if last.is_complete() && last.stored_error().is_ok() => {
                // Completed without error: nothing later waits for it, orders after it or
                // reports it (`wait` of a completed command is `Ok`), so the next check is
                // one branch (eager collectives check before every call).
                submit.last = None;
                true
            }
            Some(_) => false,
        }
    }

    fn wait(&self) -> Result<()> {
        let last = self.submit.lock().last.clone();
        match last {
            Some(event) => event.wait_complete(None).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// A device address as a host address.
fn addr(ptr: u64) -> Result<usize> {
    usize::try_from(ptr)
        .map_err(|_| Error::invalid(format!("address {ptr:#x} does not fit this host")))
}

/// The `Arc<Event>` behind an `Arc<dyn Event>` known to hold one of ours.
fn own_arc(event: &Arc<dyn sycl_backend::Event>, ours: &Event) -> Result<Arc<Event>> {
    let raw = Arc::into_raw(event.clone());
    if !std::ptr::eq(raw as *const u8, ours as *const Event as *const u8) {
        // SAFETY: `raw` came from `Arc::into_raw` just above.
        drop(unsafe { Arc::from_raw(raw) });
        return Err(Error::new(
            Errc::BackendMismatch,
            "event does not belong to the native_cpu backend",
        ));
    }
    // SAFETY: `raw` came from `Arc::into_raw` of an `Arc<dyn Event>` whose data pointer is the
    // `Event` `ours` points to (checked above; `downcast_ref` proved the concrete type), so the
    // allocation holds an `Event` and the thin pointer reconstructs the same `Arc`.
    Ok(unsafe { Arc::from_raw(raw as *const Event) })
}
