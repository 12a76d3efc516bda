//! MPI collectives that end: every collective of `sycl::ranks` is a non-blocking MPI call
//! polled under [`RanksOptions::timeout`](super::RanksOptions::timeout), watching the node's
//! other ranks through their pidfds once they are known, the way `node_barrier` always did. A
//! rank that never joins, or exits (even with status 0), makes the others fail with
//! `Errc::Runtime` instead of blocking for ever in `MPI_Allgather`.
//!
//! MPI cannot cancel a collective. One that fails here is left pending with its buffers: they
//! live on the heap, owned by no one ([`Parked`]), so a late completion writes only into memory
//! nothing else uses. The communicator is then unusable for collectives (a later one could
//! match the pending one), which [`super::Ranks`] enforces by refusing every later collective.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Equivalence, PartitionMut};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, Rank};
use mpi::traits::Root;

use super::node::NodeWatch;
use crate::{Errc, Error, Result};

/// What a collective waits with: its deadline, the node's ranks to watch (`None` before
/// their pidfds are open, in `Ranks::new`), and where to record a collective left pending.
pub(super) struct Wait<'a> {
    pub(super) what: &'static str,
    pub(super) rank: Rank,
    pub(super) timeout: Duration,
    pub(super) watch: Option<NodeWatch<'a>>,
    /// Set to the reason when a collective is abandoned: the communicator is unusable then.
    pub(super) abandoned: Option<&'a OnceLock<String>>,
}

/// A heap value lent to MPI for `'static` (`StaticScope` requests need `'static` buffers) and
/// taken back once the request completed; never freed while a request may still write it.
struct Parked<T: ?Sized> {
    ptr: *mut T,
}

impl<T: ?Sized> Parked<T> {
    /// Parks `value`; the returned reference is the one MPI may use.
    fn new(value: Box<T>) -> (Parked<T>, &'static mut T) {
        let ptr = Box::into_raw(value);
        // SAFETY: `ptr` came from `Box::into_raw` just above, so it is valid, aligned and
        // unaliased; it is freed only by `reclaim`, whose caller guarantees this reference is
        // no longer used, or never (leaked), so the reference may live for `'static`.
        (Parked { ptr }, unsafe { &mut *ptr })
    }

    /// The value back.
    ///
    /// # Safety
    /// The reference `new` returned is not used any more: the request that held it completed
    /// (and was consumed), and nothing else kept it.
    unsafe fn reclaim(self) -> Box<T> {
        // SAFETY: `ptr` came from `Box::into_raw` in `new` and is reclaimed once (by value);
        // the caller guarantees the reference derived from it is dead.
        unsafe { Box::from_raw(self.ptr) }
    }
}

impl Wait<'_> {
    /// Completes `request` under the deadline and the watch. Polls as MPI's blocking calls spin,
    /// then less eagerly after 10 ms. On failure the request is forgotten (see the module docs).
    pub(super) fn complete<D: ?Sized>(&self, request: Request<'static, D>) -> Result<()> {
        let start = Instant::now();
        let mut request = request;
        let mut spins = 0u32;
        loop {
            match request.test() {
                Ok(_) => return Ok(()),
                Err(pending) => request = pending,
            }
            spins += 1;
            if spins % 1024 != 0 {
                continue;
            }
            let failed = match self.watch.as_ref().map_or(Ok(()), NodeWatch::check_alive) {
                Err(err) => Some(err.context(format_args!("rank {}: {}", self.rank, self.what))),
                Ok(()) if start.elapsed() > self.timeout => Some(Error::new(
                    Errc::Runtime,
                    format!(
                        "rank {}: {} timed out after {:?}: a rank did not take part (it is busy \
                         elsewhere, or exited)",
                        self.rank, self.what, self.timeout
                    ),
                )),
                Ok(()) => None,
            };
            if let Some(err) = failed {
                // MPI cannot cancel a collective: it stays pending, its buffers parked.
                std::mem::forget(request);
                if let Some(abandoned) = self.abandoned {
                    let _ = abandoned.set(err.to_string());
                }
                return Err(err);
            }
            if start.elapsed() > Duration::from_millis(10) {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// `MPI_Ibarrier` over `comm`.
    pub(super) fn barrier(&self, comm: &impl Communicator) -> Result<()> {
        self.complete(comm.immediate_barrier())
    }

    /// `MPI_Iallgather`: every rank's `mine` (all of one length), in rank order.
    pub(super) fn all_gather<T: Equivalence + Copy + Default + 'static>(
        &self,
        comm: &impl Communicator,
        mine: &[T],
    ) -> Result<Vec<T>> {
        let size = comm.size() as usize;
        let (send, send_ref) = Parked::new(Box::<[T]>::from(mine));
        let (recv, recv_ref) =
            Parked::new(vec![T::default(); mine.len() * size].into_boxed_slice());
        let request = comm.immediate_all_gather_into(StaticScope, &*send_ref, recv_ref);
        self.complete(request)?;
        // SAFETY: the request that borrowed both completed and was consumed by `complete`.
        let all = unsafe {
            drop(send.reclaim());
            recv.reclaim()
        };
        Ok(all.into_vec())
    }

    /// `MPI_Ibcast` of `value` from `root` of `comm`.
    pub(super) fn broadcast<T: Equivalence + Copy + 'static>(
        &self,
        comm: &impl Communicator,
        root: Rank,
        value: T,
    ) -> Result<T> {
        let (buf, buf_ref) = Parked::new(Box::new(value));
        let request = comm
            .process_at_rank(root)
            .immediate_broadcast_into(StaticScope, buf_ref);
        self.complete(request)?;
        // SAFETY: the request that borrowed it completed and was consumed by `complete`.
        Ok(*unsafe { buf.reclaim() })
    }

    /// Every rank's bytes (of any length), in rank order: `MPI_Iallgather` of the lengths,
    /// then `MPI_Iallgatherv`.
    pub(super) fn all_gather_bytes(
        &self,
        comm: &impl Communicator,
        mine: &[u8],
    ) -> Result<Vec<Vec<u8>>> {
        let len = i32::try_from(mine.len()).map_err(|_| Error::invalid("message too large"))?;
        let counts = self.all_gather(comm, &[len])?;
        let mut displs = Vec::with_capacity(counts.len());
        let mut total = 0i32;
        for &c in &counts {
            if c < 0 {
                return Err(Error::invalid("a rank reported a negative length"));
            }
            displs.push(total);
            total = total
                .checked_add(c)
                .ok_or_else(|| Error::invalid("the ranks' messages together are too large"))?;
        }
        let (send, send_ref) = Parked::new(Box::<[u8]>::from(mine));
        let (recv, recv_ref) = Parked::new(vec![0u8; total as usize].into_boxed_slice());
        let (partition, partition_ref) = Parked::new(Box::new(PartitionMut::new(
            recv_ref,
            counts.clone(),
            displs.clone(),
        )));
        let request =
            comm.immediate_all_gather_varcount_into(StaticScope, &*send_ref, partition_ref);
        self.complete(request)?;
        // SAFETY: the request that borrowed the three completed and was consumed by
        // `complete`; the partition, which borrowed `recv`, goes before it.
        let all = unsafe {
            drop(partition.reclaim());
            drop(send.reclaim());
            recv.reclaim()
        };
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| all[d as usize..(d + c) as usize].to_vec())
            .collect())
    }
}
