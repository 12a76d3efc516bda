//! Moving USM bytes between ranks through MPI: straight from the memory where MPI can reach
//! it, else staged through pinned host memory with the copies overlapped with the transfer.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use bytemuck::Pod;
use mpi::datatype::{AsDatatype, Buffer, BufferMut, Collection, Equivalence, Pointer, PointerMut};
use mpi::request::{LocalScope, Request, Scope};
use mpi::traits::*;
use mpi::Count;
use sycl_backend::BackendKind;

use super::{chunks, Ranks};
use crate::usm::{MemoryRecord, Use};
use crate::{AsUsmRange, Errc, Error, Event, EventStatus, Queue, Result, Usm, UsmRange};

/// Our tag on our duplicate of the caller's communicator.
const TAG_EXCHANGE: i32 = 0x5359;
/// Bytes per MPI message of a staged transfer: copies of one chunk overlap the transfer of
/// the one before.
const STAGE_CHUNK: usize = 4 << 20;
/// How long cancelled requests get to complete after a time-out, before the job is aborted.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Bytes MPI reads: a raw range of USM (no Rust reference is ever made to it: other agents
/// may write it at the same time, as they may while a device reads it).
struct RawBytes {
    ptr: *const c_void,
    len: usize,
}

/// Bytes MPI writes.
struct RawBytesMut {
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: `pointer` is the start of `len` live bytes (the ranges are kept alive, and admitted
// by their records, for as long as any request over them exists: `Ranks::exchange`).
unsafe impl Pointer for RawBytes {
    fn pointer(&self) -> *const c_void {
        self.ptr
    }
}
// SAFETY: as for `RawBytes`; MPI writes there only while the range is admitted for writing.
unsafe impl PointerMut for RawBytesMut {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr
    }
}
// SAFETY: `count` is the number of bytes at `pointer` (chunks are checked to fit a Count).
unsafe impl Collection for RawBytes {
    fn count(&self) -> Count {
        // Chunks are at most STAGE_CHUNK bytes or checked to fit (see `chunks`).
        self.len as Count
    }
}
// SAFETY: as for `RawBytes`.
unsafe impl Collection for RawBytesMut {
    fn count(&self) -> Count {
        self.len as Count
    }
}
// SAFETY: the datatype is MPI_UINT8_T, and `count` counts bytes.
unsafe impl AsDatatype for RawBytes {
    type Out = <u8 as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        u8::equivalent_datatype()
    }
}
// SAFETY: as for `RawBytes`.
unsafe impl AsDatatype for RawBytesMut {
    type Out = <u8 as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        u8::equivalent_datatype()
    }
}
// SAFETY: pointer, count and datatype describe the same bytes.
unsafe impl Buffer for RawBytes {}
// SAFETY: as for `RawBytes`.
unsafe impl BufferMut for RawBytesMut {}

/// Whether the MPI library in this process moves CUDA device memory itself: Open MPI's
/// `MPIX_Query_cuda_support()`, looked up at run time (other MPIs lack the symbol: no).
/// `SYCL_RS_MPI_CUDA_AWARE=0` forces staging (benchmarks compare both paths).
pub(super) fn mpi_is_cuda_aware() -> bool {
    if std::env::var("SYCL_RS_MPI_CUDA_AWARE").as_deref() == Ok("0") {
        return false;
    }
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"MPIX_Query_cuda_support".as_ptr()) };
    if symbol.is_null() {
        return false;
    }
    // SAFETY: Open MPI declares `int MPIX_Query_cuda_support(void)` (mpi-ext.h), and the
    // symbol of that name in the process is that function.
    let query: extern "C" fn() -> libc::c_int = unsafe { std::mem::transmute(symbol) };
    query() == 1
}

impl Ranks {
    /// Sends `send` to communicator rank `peer` and receives `recv` from it (the peer calls
    /// `exchange` with the roles mirrored), after `deps`; returns when both are done and `recv`
    /// holds the peer's bytes. Works for any rank, on this node or another; the bytes go
    /// through MPI (use [`Ranks::node_buffer`] for zero-copy within a node).
    ///
    /// Memory MPI can reach (host-accessible USM; CUDA device memory when the MPI library is
    /// CUDA-aware) is handed to MPI directly; other memory is staged through pinned host
    /// memory in 4 MiB chunks, each chunk's copy overlapping the transfer of the others. Like
    /// a device command, the transfer excludes host borrows of both ranges while it runs.
    ///
    /// Errors: `Errc::Invalid` for a peer outside the communicator, this rank itself, or
    /// memory of another context than `queue`'s; `Errc::Runtime` when the peer does not
    /// answer within [`super::RanksOptions::timeout`] (the requests are cancelled; if MPI cannot
    /// cancel them the job is aborted, since MPI would keep writing into memory the program
    /// may free).
    pub fn exchange<T: Pod>(
        &self,
        queue: &Queue,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        peer: usize,
        deps: &[&Event],
    ) -> Result<()> {
        if peer >= self.size() || peer == self.rank() {
            return Err(Error::invalid(format!(
                "exchange with rank {peer}: not another rank of {}",
                self.size()
            )));
        }
        let (send, recv) = (
            send.usm_range().cast::<u8>()?,
            recv.usm_range().cast::<u8>()?,
        );
        for r in [&send, &recv] {
            r.record.check_queue(queue)?;
        }
        let send_direct = self.mpi_reaches(&send);
        let recv_direct = self.mpi_reaches(&recv);
        let stage_send = if send_direct {
            None
        } else {
            Some(self.staging(queue, &self.stage_send, send.len())?)
        };
        let stage_recv = if recv_direct {
            None
        } else {
            Some(self.staging(queue, &self.stage_recv, recv.len())?)
        };
        // Staged: the device-to-host copies start now, chunk by chunk.
        let chunk = STAGE_CHUNK;
        let send_chunks = chunks(
            send.len(),
            if send_direct {
                i32::MAX as usize
            } else {
                chunk
            },
        );
        let recv_chunks = chunks(
            recv.len(),
            if recv_direct {
                i32::MAX as usize
            } else {
                chunk
            },
        );
        let mut copies_out = Vec::new();
        if let Some(stage) = &stage_send {
            for &(off, len) in &send_chunks {
                copies_out.push(queue.copy(
                    &send.sub(off..off + len)?,
                    &stage.sub(off..off + len)?,
                    deps,
                )?);
            }
        } else {
            Event::wait_all(&deps.iter().map(|e| (*e).clone()).collect::<Vec<_>>())?;
        }
        let send_base = stage_send.as_ref().map_or(send.as_ptr(), |s| s.as_ptr());
        let recv_base = stage_recv.as_ref().map_or(recv.as_ptr(), |s| s.as_ptr());
        let send_bufs: Vec<RawBytes> = send_chunks
            .iter()
            .map(|&(off, len)| RawBytes {
                ptr: (send_base as usize + off) as *const c_void,
                len,
            })
            .collect();
        let mut recv_bufs: Vec<RawBytesMut> = recv_chunks
            .iter()
            .map(|&(off, len)| RawBytesMut {
                ptr: (recv_base as usize + off) as *mut c_void,
                len,
            })
            .collect();

        let mut uses = vec![(&send.record, Use::Read), (&recv.record, Use::Write)];
        if let Some(s) = &stage_send {
            uses.push((&s.record, Use::Read));
        }
        if let Some(s) = &stage_recv {
            uses.push((&s.record, Use::Write));
        }
        let mut copies_in: Vec<Event> = Vec::new();
        MemoryRecord::during_transfer(&uses, || {
            mpi::request::scope(|scope| {
                self.run_exchange(scope, peer, &send_bufs, &mut recv_bufs, &copies_out, |k| {
                    // A received chunk goes on to the device while the next arrives.
                    if let Some(stage) = &stage_recv {
                        let (off, len) = recv_chunks[k];
                        copies_in.push(queue.copy(
                            &stage.sub(off..off + len)?,
                            &recv.sub(off..off + len)?,
                            &[],
                        )?);
                    }
                    Ok(())
                })
            })?;
            Event::wait_all(&copies_in)
        })
    }

    /// Whether MPI can read and write `range` in place.
    fn mpi_reaches(&self, range: &UsmRange<u8>) -> bool {
        range.is_host_accessible()
            || (self.cuda_aware_mpi && range.record.context.backend() == BackendKind::Cuda)
    }

    /// Pinned host memory of at least `len` bytes for `queue`'s context, kept between calls.
    fn staging(
        &self,
        queue: &Queue,
        slot: &parking_lot::Mutex<Option<Usm<u8>>>,
        len: usize,
    ) -> Result<UsmRange<u8>> {
        let mut slot = slot.lock();
        if let Some(stage) = slot.as_ref() {
            if stage.len() >= len && stage.context() == queue.context() {
                return stage.range(0..len);
            }
        }
        let stage = crate::malloc_host::<u8>(len.max(1), queue)?;
        let range = stage.range(0..len)?;
        *slot = Some(stage);
        Ok(range)
    }

    /// Posts every receive, sends each chunk as soon as its staging copy is done, and hands
    /// each received chunk to `received` in order; all under the deadline.
    fn run_exchange<'a>(
        &self,
        scope: &LocalScope<'a>,
        peer: usize,
        send_bufs: &'a [RawBytes],
        recv_bufs: &'a mut [RawBytesMut],
        copies_out: &[Event],
        mut received: impl FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let process = self.world.process_at_rank(peer as i32);
        let mut recvs: Vec<Option<Request<'a, RawBytesMut, &LocalScope<'a>>>> = recv_bufs
            .iter_mut()
            .map(|b| Some(process.immediate_receive_into_with_tag(scope, b, TAG_EXCHANGE)))
            .collect();
        let mut sends: Vec<Option<Request<'a, RawBytes, &LocalScope<'a>>>> =
            (0..send_bufs.len()).map(|_| None).collect();
        let (mut next_send, mut next_recv, mut sent) = (0, 0, 0);
        let start = Instant::now();
        let mut spins = 0u32;
        let mut failure: Option<Error> = None;
        while failure.is_none() && (sent < send_bufs.len() || next_recv < recvs.len()) {
            // Sends go in chunk order (MPI keeps the order of messages with one tag).
            while next_send < send_bufs.len() {
                let ready = match copies_out.get(next_send) {
                    None => true,
                    Some(copy) => match copy.status() {
                        Ok(EventStatus::Complete) => {
                            if let Err(err) = copy.wait() {
                                failure = Some(err);
                                break;
                            }
                            true
                        }
                        Ok(_) => false,
                        Err(err) => {
                            failure = Some(err);
                            break;
                        }
                    },
                };
                if !ready {
                    break;
                }
                sends[next_send] = Some(process.immediate_send_with_tag(
                    scope,
                    &send_bufs[next_send],
                    TAG_EXCHANGE,
                ));
                next_send += 1;
            }
            for slot in sends.iter_mut().take(next_send) {
                if let Some(request) = slot.take() {
                    match request.test() {
                        Ok(_) => sent += 1,
                        Err(pending) => *slot = Some(pending),
                    }
                }
            }
            while next_recv < recvs.len() {
                let request = recvs[next_recv].take().expect("posted");
                match request.test() {
                    Ok(_) => {
                        next_recv += 1;
                        if let Err(err) = received(next_recv - 1) {
                            failure = Some(err);
                            break;
                        }
                    }
                    Err(pending) => {
                        recvs[next_recv] = Some(pending);
                        break;
                    }
                }
            }
            spins += 1;
            if spins % 1024 == 0 {
                if let Err(err) = self.check_node_alive() {
                    failure = Some(err);
                } else if start.elapsed() > self.options().timeout {
                    failure = Some(Error::new(
                        Errc::Runtime,
                        format!(
                            "rank {}: exchange with rank {peer} timed out after {:?}",
                            self.rank(),
                            self.options().timeout
                        ),
                    ));
                }
            }
        }
        match failure {
            None => Ok(()),
            Some(err) => {
                self.cancel_or_abort(sends.into_iter(), &err);
                self.cancel_or_abort(recvs.into_iter(), &err);
                Err(err)
            }
        }
    }

    /// Cancels `requests` and waits for them; a request MPI will not let go of within the grace
    /// period would write into memory the program may free, so the job is aborted then.
    fn cancel_or_abort<'a, B: ?Sized + 'a, S: Scope<'a>>(
        &self,
        requests: impl Iterator<Item = Option<Request<'a, B, S>>>,
        why: &Error,
    ) {
        let start = Instant::now();
        for request in requests.flatten() {
            request.cancel();
            let mut request = request;
            loop {
                match request.test() {
                    Ok(_) => break,
                    Err(pending) => request = pending,
                }
                if start.elapsed() > CANCEL_GRACE {
                    eprintln!(
                        "sycl-rs: rank {}: {why}; MPI cannot cancel a transfer: aborting the job",
                        self.rank()
                    );
                    self.world.abort(1);
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}
