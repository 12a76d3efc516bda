//! Deferred release: memory whose last reference went while commands still use it is released
//! by a runtime thread (one per backend) once those commands end (like `cudaFreeAsync`, or the deferred
//! release of DPC++'s `sycl::free` on memory a kernel still holds).
//!
//! The thread that drops the last reference must not wait there: on the native CPU backend it
//! can be the queue's worker, dropping a kernel's arguments before that kernel's event
//! completes, and a CUDA host-function callback may not wait for the stream it runs on. So the
//! release goes to a thread of the runtime's (one per backend), which waits on no command for
//! long: it looks at every deferred release in turn, so one command that never ends (a wait on
//! a peer's IPC event) delays only the memory that command uses.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sycl_backend::BackendKind;

use super::record::{unfinished, Releasable};

/// A release waiting for commands.
struct Deferred {
    pending: Vec<Arc<dyn sycl_backend::Event>>,
    memory: Releasable,
}

/// How long the release thread waits on one command before it looks at the others again.
const SLICE: Duration = Duration::from_millis(2);

/// Releases `memory` once every command of `pending` has ended (completed or failed).
pub(super) fn release_after(pending: Vec<Arc<dyn sycl_backend::Event>>, memory: Releasable) {
    // One thread per backend: a driver's free may block (`cuMemFree` synchronizes the device,
    // so it waits for whatever the device is busy with), and that must not hold up the
    // releases of another backend.
    static THREADS: Mutex<Vec<(BackendKind, Sender<Deferred>)>> = Mutex::new(Vec::new());
    let backend = memory.backend();
    let deferred = Deferred { pending, memory };
    let refused = {
        let mut threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let at = match threads.iter().position(|(b, _)| *b == backend) {
            Some(at) => Some(at),
            None => {
                let (tx, rx) = mpsc::channel();
                match std::thread::Builder::new()
                    .name(format!("sycl-rs-release-{backend}"))
                    .spawn(move || release_thread(rx))
                {
                    Ok(_) => {
                        threads.push((backend, tx));
                        Some(threads.len() - 1)
                    }
                    Err(e) => {
                        log::error!("sycl-rs: cannot start a memory release thread: {e}");
                        None
                    }
                }
            }
        };
        match at {
            Some(at) => threads[at].1.send(deferred).err().map(|e| e.0),
            None => Some(deferred),
        }
    };
    if let Some(deferred) = refused {
        // No release thread: leak the memory rather than free it under a running command
        // or block a thread that command may wait for.
        log::error!(
            "sycl-rs: memory at {:#x} is leaked: no release thread to free it after its \
             commands",
            deferred.memory.ptr()
        );
        std::mem::forget(deferred.memory);
    }
}

fn release_thread(rx: Receiver<Deferred>) {
    let mut waiting: Vec<Deferred> = Vec::new();
    loop {
        // Idle: sleep until a release arrives. Busy: take what arrived meanwhile.
        if waiting.is_empty() {
            match rx.recv() {
                Ok(d) => waiting.push(d),
                Err(_) => return,
            }
        }
        while let Ok(d) = rx.try_recv() {
            waiting.push(d);
        }
        let mut i = 0;
        while i < waiting.len() {
            waiting[i].pending.retain(unfinished);
            if waiting[i].pending.is_empty() {
                let done = waiting.swap_remove(i);
                let ptr = done.memory.ptr();
                if let Err(err) = done.memory.release() {
                    log::warn!("sycl-rs: releasing memory at {ptr:#x} failed: {err}");
                }
            } else {
                i += 1;
            }
        }
        // Wait a slice on one unfinished command, then look at all of them again.
        // (An event that cannot be waited on is looked at again after a plain sleep.)
        if let Some(first) = waiting.first() {
            if first.pending[0].wait_timeout(SLICE).is_err() {
                std::thread::sleep(SLICE);
            }
        }
    }
}
