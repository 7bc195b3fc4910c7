//! A worker's pop as the StarPU adapter and the interleaving tests run it:
//! a sequence of locked steps ([`Scheduler::pop_step`]) with the balancer
//! consults run between them, without the lock. Every decision of the pop
//! — which task, whether the worker falls idle, whom to wake — is made
//! here, under the caller's lock, following [`crate::sleepers`]' rules; the
//! caller only locks, runs consults and wakes.
//!
//! ```text
//! let mut round = PopRound::default();
//! let mut back = None;
//! loop {
//!     lock;  let step = sched.pop_step(w, now, book, sleepers, &mut round, back.take());  unlock;
//!     match step {
//!         PopStep::Consult(mut c) => { c.run(); back = Some(c); }
//!         PopStep::Task(t, wake) => { wake(wake); return Some(t) }
//!         PopStep::Empty(wake) => { wake(wake); return None }
//!     }
//! }
//! ```

use super::epoch::Ticket;
use super::placement::{ModelBook, RefitJob};
use super::{EpochConsult, Pop, Queued, SchedTask, Scheduler, Taken};
use crate::sleepers::Sleepers;
use crate::worker_queues::QueueSet;

/// Balancer consults one pop runs before it stops; the worker then pops
/// again at once (it names itself in its wake list), so the bound only
/// splits a long run of consults, never leaves work behind.
pub const CONSULTS_PER_POP: usize = 8;

/// What one pop has done so far (consults run).
#[derive(Debug, Default)]
pub struct PopRound {
    consults: usize,
}

/// The outcome of one locked step of a pop.
pub enum PopStep<T> {
    /// The worker's task; wake these workers after unlocking.
    Task(Taken<T>, Vec<usize>),
    /// Run this consult without the lock, then step again with it.
    Consult(EpochConsult),
    /// No task; wake these workers after unlocking. It may name the asking
    /// worker itself: it must pop again rather than sleep.
    Empty(Vec<usize>),
}

/// Plain measurements (no epoch report) a worker buffers before its next
/// pop must deliver them ([`must_deliver`]). The fallback models refit at
/// most every 8 samples once they have 8 (`placement`'s `REFIT_EVERY`);
/// with 32 the task-mode policies' SIMULATED makespans were 4.9 % longer
/// in geometric mean over 18 pairs, with 8 level with delivering every
/// sample (docs/performance.md).
pub const SAMPLES_PER_DELIVERY: usize = 8;

/// Whether a worker's buffered reports must be delivered at its next pop
/// (the pop steps through the scheduler rather than taking its own queue
/// alone): an epoch's report is waited for by the epoch's workers; plain
/// measurements only feed the fallback models, and wait for a batch of
/// [`SAMPLES_PER_DELIVERY`] or the next pop that steps anyway.
pub fn must_deliver(finished: &[Finished]) -> bool {
    finished.len() >= SAMPLES_PER_DELIVERY || finished.iter().any(|f| f.ticket.is_some())
}

/// What a worker's post-execution hook saw of one of its tasks; handed to
/// the scheduler at one of the worker's next pops ([`Scheduler::deliver`];
/// [`must_deliver`] says when that must be the very next one). The
/// worker's expected end is corrected by the hook itself
/// ([`Scheduler::task_finished`], or the worker's queue alone).
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// The epoch's ticket, for a task an epoch handed out.
    pub ticket: Option<Ticket>,
    /// The task's codelet key and size.
    pub codelet: usize,
    /// Its size in work units.
    pub units: f64,
    /// Seconds it ran, when measured.
    pub seconds: Option<f64>,
    /// When it ended (seconds, the scheduler's clock).
    pub end_s: f64,
}

impl<T: SchedTask, Q: QueueSet<Queued<T>>> Scheduler<T, Q> {
    /// Delivers what `worker`'s post-execution hooks saw: the fallback
    /// models (returns the refits that are due, to run without the lock
    /// and install afterwards) and the epochs (which notify their workers
    /// when a block completes).
    pub fn deliver(
        &mut self,
        worker: usize,
        finished: impl IntoIterator<Item = Finished>,
        book: &mut ModelBook,
    ) -> Vec<RefitJob> {
        let mut jobs = Vec::new();
        for f in finished {
            if let Some(s) = f.seconds
                && let Some(job) = book.record(worker, f.codelet, f.units, s)
            {
                jobs.push(job);
            }
            if let Some(ticket) = f.ticket {
                self.task_done(ticket, f.seconds.unwrap_or(0.0), f.end_s, book);
            }
        }
        jobs
    }

    /// One locked step of `worker`'s pop at `now`: `back` is the consult the
    /// previous step gave and the caller ran (`None` on the first step).
    pub fn pop_step(
        &mut self,
        worker: usize,
        now: f64,
        book: &ModelBook,
        sleepers: &Sleepers,
        round: &mut PopRound,
        back: Option<EpochConsult>,
    ) -> PopStep<T> {
        let popped = match back {
            None => self.pop(worker, now, book),
            Some(consult) => {
                round.consults += 1;
                if round.consults >= CONSULTS_PER_POP {
                    // Bounded work per pop: hand the consult back, leave
                    // the worker awake and have it pop again.
                    self.hand_back(consult, now, book);
                    let mut wake = sleepers.wake_list(self.take_notified());
                    if !wake.contains(&worker) {
                        wake.push(worker);
                    }
                    return PopStep::Empty(wake);
                }
                self.resume(consult, worker, now, book)
            }
        };
        match popped {
            Pop::Task(t) => PopStep::Task(t, sleepers.wake_list(self.take_notified())),
            Pop::Consult(c) => PopStep::Consult(c),
            Pop::Nothing { idle } => {
                let last_awake = !self.epochs.is_empty()
                    && self
                        .workers
                        .iter()
                        .all(|&w| w == worker || sleepers.is_idle(w));
                if last_awake && self.complete_stuck_blocks(now, book) {
                    // The last awake worker finds nothing while an epoch
                    // waits on reports that may never come: those blocks
                    // are completed and this worker pops again.
                    let mut wake = sleepers.wake_list(self.take_notified());
                    if !wake.contains(&worker) {
                        wake.push(worker);
                    }
                    return PopStep::Empty(wake);
                }
                sleepers.fell_idle(worker, idle);
                PopStep::Empty(sleepers.wake_list(self.take_notified()))
            }
        }
    }

    /// Workers left; returns the idle workers to wake (the remaining ones
    /// may take what the leavers held).
    pub fn remove_workers_waking(
        &mut self,
        workers: &[usize],
        book: &ModelBook,
        sleepers: &Sleepers,
    ) -> Vec<usize> {
        self.remove_workers(workers, book);
        let mut wake = sleepers.wake_list(self.take_notified());
        wake.retain(|w| !workers.contains(w));
        wake
    }
}
