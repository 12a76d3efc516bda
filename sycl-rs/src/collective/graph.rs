//! Team operations recorded once and replayed as one command: a [`TeamGraph`] (CUDA: one
//! `cuGraphLaunch` of every step's kernel, as NCCL's operations captured in a CUDA graph).
//! See spec/collectives.md, "Graphs".

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{host, Element, ReduceOp, Team, BASE_WORD};
use crate::kernel::{LaunchGraph, RecordedLaunch};
use crate::ranks::NodeBuffer;
use crate::usm::AsUsmRange;
use crate::{Error, Event, Result};

/// A distinct identity per team of this process.
pub(super) fn next_team_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A team's state while it records: the launches so far, and its live counters, restored
/// when the recording ends (recorded steps count from zero: their epochs and halves are
/// relative to the replay's).
pub(super) struct Recording {
    pub(super) launches: Mutex<Vec<RecordedLaunch>>,
    epoch: u32,
    operations: u64,
}

enum Form {
    /// Kernel steps: one graph of every step's launch. `steps` epochs and `pieces` halves
    /// per replay (`pieces` even), in both forms.
    Launches {
        graph: LaunchGraph,
        steps: u32,
        pieces: u64,
    },
    /// Host steps (the native CPU's default): one plan of every step's commands, run again
    /// by each replay as one host task.
    Plan {
        plan: host::SharedPlan,
        steps: u32,
        pieces: u64,
    },
}

/// Operations of one [`Team`], recorded once by [`Team::record`] and replayed by
/// [`Team::replay`] as one command of the team's queue, like a CUDA graph of NCCL calls or
/// `sycl_ext_oneapi_graph`.
///
/// On CUDA a replay is one `cuGraphLaunch` of every step's kernel (plus a 4-byte write of the
/// replay's epoch base): no launch per operation, which is what small operations cost. On
/// other devices it launches the recorded kernels one after another (the same steps), and a
/// team with host steps runs the recorded plan (every step's copies, meetings and
/// reductions) again as one host task. The graph keeps the memory it
/// names alive; each replay admits it as a command does (a host borrow of it waits).
///
/// Every rank records the same operations and replays them at the same points of its
/// sequence of operations, as for the operations themselves: ranks whose graphs differ
/// fail every replay with `Errc::Invalid`, as a mismatched call does.
pub struct TeamGraph {
    team: u64,
    operations: usize,
    form: Form,
}

impl std::fmt::Debug for TeamGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, steps) = match &self.form {
            Form::Launches { steps, .. } => ("launches", steps),
            Form::Plan { steps, .. } => ("host plan", steps),
        };
        f.debug_struct("TeamGraph")
            .field("operations", &self.operations)
            .field("form", &kind)
            .field("steps", steps)
            .finish()
    }
}

impl TeamGraph {
    /// How many operations a replay runs.
    pub fn operations(&self) -> usize {
        self.operations
    }
}

/// The operations of a graph being recorded ([`Team::record`]): the team's operations
/// without dependencies or events (a replay has them). Each is checked as the team's call
/// checks it.
pub struct TeamRecorder<'t, 'r> {
    team: &'t mut Team<'r>,
    operations: usize,
}

impl std::fmt::Debug for TeamRecorder<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamRecorder")
            .field("operations", &self.operations)
            .finish()
    }
}

impl<'r> TeamRecorder<'_, 'r> {
    /// Records one operation: its steps' launches (kernel steps) or commands (host steps).
    fn add(&mut self, steps: impl FnOnce(&mut Team<'r>) -> Result<Option<Event>>) -> Result<()> {
        self.operations += 1;
        if self.team.recording.is_none() {
            // A refused call ended the recording (and met the peers): nothing more joins it.
            return Err(Error::invalid(
                "team: this recording ended at an earlier error; record again",
            ));
        }
        steps(self.team).map(|_| ())
    }

    /// Records [`Team::all_reduce`].
    pub fn all_reduce<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.add(|team| team.all_reduce_commands(send, recv, op, &[]))
    }

    /// Records [`Team::all_reduce_symmetric`].
    pub fn all_reduce_symmetric<T: Element>(
        &mut self,
        send: &NodeBuffer<'_, T>,
        range: std::ops::Range<usize>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.add(|team| team.all_reduce_symmetric_commands(send, range, recv, op, &[]))
    }

    /// Records [`Team::all_gather`].
    pub fn all_gather<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
    ) -> Result<()> {
        self.add(|team| team.all_gather_commands(send, recv, &[]))
    }

    /// Records [`Team::reduce_scatter`].
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &impl AsUsmRange<T>,
        recv: &impl AsUsmRange<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.add(|team| team.reduce_scatter_commands(send, recv, op, &[]))
    }

    /// Records [`Team::broadcast`].
    pub fn broadcast<T: Element>(&mut self, data: &impl AsUsmRange<T>, root: usize) -> Result<()> {
        self.add(|team| team.broadcast_commands(data, root, &[]))
    }

    /// Records [`Team::barrier`].
    pub fn barrier(&mut self) -> Result<()> {
        self.add(|team| team.barrier_commands(&[]))
    }
}

impl<'r> Team<'r> {
    /// Records the operations `build` makes into a [`TeamGraph`], which [`Team::replay`]
    /// then runs as one command (each replay the same operations on the same memory, as
    /// their calls would). Nothing runs while recording. Collective: every rank records the
    /// same operations.
    ///
    /// Errors: those of the operations' calls (a rank that refuses a call still meets its
    /// peers once, so that their next operation or replay fails with `Errc::Invalid` too);
    /// the recording is then dropped.
    ///
    /// ```no_run
    /// # fn main() -> sycl::Result<()> {
    /// use sycl::collective::{ReduceOp, Team, TeamOptions};
    /// let ranks = sycl::ranks::NodeRanks::from_env(Default::default())?;
    /// let q = sycl::Queue::in_order(ranks.device())?;
    /// let mut team = Team::new(&ranks, &q, TeamOptions::default())?;
    /// let x = sycl::malloc_device::<f32>(256, &q)?;
    /// let graph = team.record(|g| {
    ///     for _ in 0..20 {
    ///         g.all_reduce(&x, &x, ReduceOp::Sum)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// for _ in 0..10 {
    ///     team.replay(&graph, &[])?;
    /// }
    /// team.barrier(&[])?.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn record(
        &mut self,
        build: impl FnOnce(&mut TeamRecorder<'_, 'r>) -> Result<()>,
    ) -> Result<TeamGraph> {
        if self.recording.is_some() {
            return Err(Error::invalid("team: already recording a graph"));
        }
        self.recording = Some(Recording {
            launches: Mutex::new(Vec::new()),
            epoch: self.epoch,
            operations: self.operations,
        });
        self.epoch = 0;
        self.operations = 0;
        if self.host {
            // Every operation's commands go into this one plan.
            self.plan = Some(host::Plan::new(self.private.clone(), &self.queue));
        }
        let mut recorder = TeamRecorder {
            team: self,
            operations: 0,
        };
        let built = build(&mut recorder);
        let operations = recorder.operations;
        let (launches, plan, steps, pieces) = match built.and_then(|()| self.finish_recording()) {
            Ok(r) => r,
            Err(e) => {
                self.stop_recording();
                return Err(e);
            }
        };
        let form = match plan {
            Some(plan) => Form::Plan {
                plan: plan.share(),
                steps,
                pieces,
            },
            None => Form::Launches {
                graph: LaunchGraph::build(&self.queue, launches)?,
                steps,
                pieces,
            },
        };
        Ok(TeamGraph {
            team: self.id,
            operations,
            form,
        })
    }

    /// Ends a recording: a barrier step appended where the graph used an odd number of
    /// halves (so that every replay starts on half 0 and a half is reused only after a
    /// meeting), the counters restored. The launches (kernel steps) or the plan (host steps),
    /// the steps and the halves of a replay.
    fn finish_recording(&mut self) -> Result<(Vec<RecordedLaunch>, Option<host::Plan>, u32, u64)> {
        let mut pieces = self.operations;
        if pieces % 2 == 1 {
            self.barrier_commands(&[])?;
            pieces += 1;
        }
        let steps = self.epoch;
        let plan = self.plan.take();
        let rec = self.stop_recording().expect("recording");
        Ok((rec.launches.into_inner(), plan, steps, pieces))
    }

    /// Ends a recording, if one is on: the team's live counters back, a host-step team's
    /// recorded plan dropped.
    pub(super) fn stop_recording(&mut self) -> Option<Recording> {
        let rec = self.recording.take()?;
        self.epoch = rec.epoch;
        self.operations = rec.operations;
        if self.host {
            self.plan = None;
        }
        Some(rec)
    }

    /// Runs `graph` (recorded by this team) once after `deps`: its operations, in order, as
    /// one command. Collective: every rank replays the same graph at the same point.
    ///
    /// Errors: `Errc::Invalid` for a graph another team recorded. From the event, as the
    /// operations' events: `Errc::Invalid` when ranks replay different graphs (or one
    /// replays where another calls an operation), `Errc::Runtime` when a peer does not
    /// arrive within the time-out. A failure is reported by that replay and every later one
    /// (the team stays failed).
    pub fn replay(&mut self, graph: &TeamGraph, deps: &[&Event]) -> Result<Event> {
        if graph.team != self.id {
            return Err(Error::invalid(
                "team: this graph was recorded by another team",
            ));
        }
        // Every replay starts on half 0: after an odd number of halves, a meeting first (a
        // half is written again only after every peer met a later step).
        let mut first = None;
        if self.operations % 2 == 1 {
            first = Some(self.barrier(deps)?);
            self.operations += 1;
        }
        let after: Vec<&Event> = match &first {
            Some(e) => vec![e],
            None => deps.to_vec(),
        };
        match &graph.form {
            Form::Launches {
                graph,
                steps,
                pieces,
            } => {
                let word = self.pads.local().full().sub(BASE_WORD..BASE_WORD + 1)?;
                let event = graph.launch(Some((&word, self.epoch)), &after)?;
                self.epoch = self.epoch.wrapping_add(*steps);
                self.operations += pieces;
                Ok(event)
            }
            Form::Plan {
                plan,
                steps,
                pieces,
            } => {
                let event = plan.submit(self.epoch, &self.queue, &after)?;
                self.epoch = self.epoch.wrapping_add(*steps);
                self.operations += pieces;
                Ok(event)
            }
        }
    }
}
