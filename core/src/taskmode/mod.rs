//! Task mode: how our policies schedule the tasks of an unmodified StarPU
//! application, as a StarPU-free scheduler over a small task trait
//! ([`SchedTask`]), tested in virtual time like the balancers. The StarPU
//! adapter (`starpu-plb`'s `task_mode` module) only locks, converts and
//! hands tasks to StarPU. The rule is documented in `docs/balancers.md`,
//! "Task mode"; in short:
//!
//! * **Epochs** ([`epoch`]). Ready tasks of one codelet and (near-)equal
//!   size (within [`SIZE_TOLERANCE`]) are *staged* as they are pushed. A
//!   staged batch of at least [`epoch_min`] tasks (and at least the units
//!   the balancer's training hands out, `Entry::training_units_per_pu`: PLB-HeC's
//!   ramp) becomes an epoch: a
//!   divisible load of `W` units, one unit per task, balanced by the
//!   policy's balancer (any registry name) over the workers able to run the
//!   codelet.
//! * **Fallback** ([`placement`]). Everything else — tasks of mixed
//!   codelets or sizes, batches too small, tasks without a codelet, what a
//!   dissolved epoch gives back — is queued on the capable worker with the
//!   earliest predicted finish under the per (worker, codelet) fitted
//!   models; workers take their own queue first (by priority, FIFO within
//!   one) and, when it is empty, steal the first task they can run and
//!   would finish first from the longest other queue.
//!
//! A worker asks, in this order: its current epoch group, the epochs'
//! balancers (oldest epoch first), a new epoch from the staged batch, its
//! own queue, the other queues (stealing), and last the staged batch placed
//! by the fallback rule. Nothing is starved: an epoch that can no longer
//! progress is dissolved into the fallback queues, and fallback stealing
//! is work-conserving.
//!
//! # No model work in the scheduler's calls
//!
//! Every method here is cheap: the balancers' decisions (which may fit and
//! solve) come out as [`Pop::Consult`], run by the caller without its lock
//! and handed back with [`Scheduler::resume`]; completions are only
//! recorded ([`Scheduler::task_done`]) and reach the balancer at its next
//! consult; refits of the fallback models are jobs
//! ([`placement::ModelBook::record`]).

pub mod epoch;
pub mod persist;
pub mod placement;
mod protocol;

pub use protocol::{
    CONSULTS_PER_POP, Finished, PopRound, PopStep, SAMPLES_PER_DELIVERY, must_deliver,
};

use std::collections::VecDeque;

use crate::balance::driver::Consult;
use crate::balance::registry::BalancerSpec;
use crate::balance::{Tuning, WorkerKind};
use crate::sleepers::Sleepers;
use crate::worker_queues::{PlainQueues, QueueSet, VictimOrder, WorkerQueue, steal};
use epoch::{Ask, EPOCH_MIN_WORKERS, Epoch, EpochPu, Ticket, epoch_min};
use placement::{Candidate, ModelBook, choose};

/// A task as task mode sees it.
pub trait SchedTask {
    /// Identifies the task's codelet (0: none; such tasks are never
    /// staged).
    fn codelet(&self) -> usize;
    /// Its size in work units (any positive scale; flops, bytes...).
    fn units(&self) -> f64;
    /// The implementation worker `pu` would run, `None` if it cannot run
    /// the task.
    fn implementation_on(&self, pu: usize) -> Option<u32>;
    /// Predicted seconds to bring the task's data to `pu`'s memory (`None`:
    /// unknown, counted as 0).
    fn transfer_s(&self, pu: usize) -> Option<f64>;
    /// Its priority (higher first in the fallback queues; 0 by default).
    fn priority(&self) -> i32 {
        0
    }
}

/// An epoch whose balancer's consults took more than this share of the
/// time its tasks ran does not pay for itself (a consult runs on a
/// worker's time): later tasks of its codelet and size are placed by the
/// fallback rule ([`COSTLY_EPOCHS`]).
pub const MAX_BALANCING_SHARE: f64 = 0.01;

/// Epochs of one codelet and size in a row over [`MAX_BALANCING_SHARE`]
/// that stop its batches: one is not enough (a consult's measured time
/// includes any preemption of its thread, and a first epoch pays one-off
/// costs).
pub const COSTLY_EPOCHS: u32 = 2;

/// An epoch whose consults have already cost this many times
/// [`MAX_BALANCING_SHARE`] of its whole projected work (its tasks at the
/// mean time measured so far) is dissolved at once and stops its codelet's
/// batches without waiting for [`COSTLY_EPOCHS`].
pub const RUNAWAY_FACTOR: f64 = 10.0;

/// Two tasks of one codelet join the same staged batch when their sizes
/// (work units) differ by at most this fraction of the larger one.
pub const SIZE_TOLERANCE: f64 = 0.1;

/// Epochs alive at once (still handing out tasks, or holding groups not yet
/// taken); a batch that would form one more is placed by the fallback rule.
pub const MAX_EPOCHS: usize = 4;

/// A staged batch smaller than its epoch length that no task joined for this
/// long (seconds) is placed by the fallback rule at the next pop.
pub const STAGING_QUIET_S: f64 = 1e-3;

/// Finished epochs kept for a later batch to continue from (one per
/// codelet and task size, the oldest forgotten first).
pub const CARRIED_EPOCHS: usize = 8;

/// Task-mode counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskModeCounters {
    /// Epochs formed.
    pub epochs: u64,
    /// Tasks handed to workers by epochs.
    pub epoch_tasks: u64,
    /// Tasks taken from the fallback queues.
    pub fallback_tasks: u64,
    /// Tasks returned by dissolved epochs (then placed by the fallback
    /// rule; drains included).
    pub dissolved_tasks: u64,
    /// Epoch blocks completed without every task's report.
    pub forced_completions: u64,
    /// Epoch tasks taken from another worker's group at an epoch's end
    /// (`Epoch::steal_tail`) or from the tail of those the balancer has
    /// not given out (`Epoch::steal_pending`); counted in `epoch_tasks`
    /// too.
    pub tail_steals: u64,
    /// Epochs whose balancer continued from an earlier epoch's of the
    /// same codelet, task size and workers (no second training).
    pub carried_epochs: u64,
    /// Tasks a worker waiting at an epoch's synchronisation point took
    /// straight from the staged batch (rather than idle).
    pub staged_tasks: u64,
    /// Tasks placed by the fallback rule rather than staged because the
    /// last [`COSTLY_EPOCHS`] epochs of their codelet and size each cost
    /// more than [`MAX_BALANCING_SHARE`] of their work in consults.
    pub unbalanced_tasks: u64,
}

impl TaskModeCounters {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &TaskModeCounters) {
        self.epochs += other.epochs;
        self.epoch_tasks += other.epoch_tasks;
        self.fallback_tasks += other.fallback_tasks;
        self.dissolved_tasks += other.dissolved_tasks;
        self.forced_completions += other.forced_completions;
        self.tail_steals += other.tail_steals;
        self.carried_epochs += other.carried_epochs;
        self.staged_tasks += other.staged_tasks;
        self.unbalanced_tasks += other.unbalanced_tasks;
    }
}

/// Whether two task sizes are close enough to share a batch.
fn same_size(a: f64, b: f64) -> bool {
    (a - b).abs() <= SIZE_TOLERANCE * a.abs().max(b.abs())
}

/// A held task with what placement computed for it (the item of the
/// workers' queues, [`QueueSet`]).
pub struct Queued<T> {
    task: T,
    codelet: usize,
    units: f64,
    /// The task's priority (queues are ordered by it, FIFO within one).
    priority: i32,
    /// Predicted seconds on the worker whose queue holds it.
    est_s: f64,
}

impl<T> Queued<T> {
    /// The queued task given to a worker as a fallback task (no epoch
    /// ticket), to run with `implementation`.
    fn into_taken(self, implementation: u32) -> Taken<T> {
        Taken {
            task: self.task,
            implementation,
            ticket: None,
            codelet: self.codelet,
            units: self.units,
            est_s: self.est_s,
        }
    }
}

/// Takes the oldest task of `items` that `worker` can run, with its
/// implementation.
fn take_runnable<T: SchedTask>(
    items: &mut VecDeque<Queued<T>>,
    worker: usize,
) -> Option<(Queued<T>, u32)> {
    let (i, nimpl) = items
        .iter()
        .enumerate()
        .find_map(|(i, q)| q.task.implementation_on(worker).map(|n| (i, n)))?;
    Some((items.remove(i)?, nimpl))
}

/// A worker's pop from its own queue alone, the caller holding only that
/// queue (when [`Scheduler::own_queue_first`] says so): the first task the
/// worker can run, with the queue's bookkeeping of a start (a CPU worker,
/// `cpu`, runs one task at a time: what it still runs lost its report).
/// `None`: nothing it can run there; the pop steps through the scheduler.
pub fn pop_own<T: SchedTask>(
    q: &mut WorkerQueue<Queued<T>>,
    worker: usize,
    cpu: bool,
    now: f64,
) -> Option<Taken<T>> {
    let (item, est_s, nimpl) = q.take_first(|i| i.task.implementation_on(worker))?;
    q.starting(None, est_s, now, cpu);
    Some(item.into_taken(nimpl))
}

/// Tasks of one codelet and size waiting to form an epoch.
struct Staging<T> {
    codelet: usize,
    /// Size of the batch's first task (the reference of [`same_size`]).
    units: f64,
    /// Workers able to run the first task when it was pushed.
    capable: Vec<usize>,
    items: Vec<Queued<T>>,
    /// When the last task joined (seconds).
    last_push: f64,
    /// Tasks it needs to form an epoch: [`epoch_min`] of its capable
    /// workers, or more when the balancer's training needs more.
    epoch_len: usize,
}

impl<T> Staging<T> {
    fn matches(&self, codelet: usize, units: f64) -> bool {
        self.codelet == codelet && same_size(self.units, units)
    }

    fn is_big(&self) -> bool {
        self.items.len() >= self.epoch_len
    }
}

/// An epoch with the batch key it was formed from.
struct Running<T> {
    epoch: Epoch<Queued<T>>,
    codelet: usize,
    units: f64,
}

/// How the last epochs of one codelet and size paid for their consults.
struct BalancingRecord {
    codelet: usize,
    units: f64,
    /// Epochs in a row, the last one included, whose consults cost more
    /// than [`MAX_BALANCING_SHARE`] of their work.
    costly_in_a_row: u32,
}

/// A task given to a worker.
pub struct Taken<T> {
    /// The task.
    pub task: T,
    /// The implementation to run.
    pub implementation: u32,
    /// Set for a task handed out by an epoch (report it with
    /// [`Scheduler::task_done`]).
    pub ticket: Option<Ticket>,
    /// Its codelet key.
    pub codelet: usize,
    /// Its size.
    pub units: f64,
    /// Predicted seconds on the worker (0 when unknown).
    pub est_s: f64,
}

/// A task [`Scheduler::push`] placed on a worker but did not queue yet (see
/// [`Scheduler::set_reserving`]): its predicted time already counts in the
/// worker's backlog; the caller prefetches its input to the worker's memory
/// without its lock, then queues it with [`Scheduler::commit`].
pub struct Reserved<T> {
    worker: usize,
    item: Queued<T>,
}

impl<T> Reserved<T> {
    /// The worker whose queue it goes to.
    pub fn worker(&self) -> usize {
        self.worker
    }
    /// The task (still held by the caller: nobody can pop it).
    pub fn task(&self) -> &T {
        &self.item.task
    }
}

/// A consult of an epoch's balancer, to run without the caller's lock
/// ([`EpochConsult::run`]) and hand back with [`Scheduler::resume`].
pub struct EpochConsult {
    epoch: u64,
    consult: Consult,
    took_s: f64,
}

impl EpochConsult {
    /// Runs the balancer (fits and solves included).
    pub fn run(&mut self) {
        self.consult.run();
    }

    /// The caller measured [`EpochConsult::run`] at `seconds` (on the
    /// runtime's clock); charged to its epoch when handed back.
    pub fn took(&mut self, seconds: f64) {
        self.took_s = seconds;
    }
}

/// What a worker's [`Scheduler::pop`] gives.
pub enum Pop<T> {
    /// A task to run.
    Task(Taken<T>),
    /// Run this consult without the lock, then call [`Scheduler::resume`].
    Consult(EpochConsult),
    /// Nothing now. `idle`: nothing to wait for either (no epoch may give
    /// this worker a task without a new push), so the worker may skip the
    /// scheduler until it is notified.
    Nothing {
        /// Whether the worker may sleep until notified.
        idle: bool,
    },
}

/// Task mode over one scheduling context (see the module documentation).
/// The workers' fallback queues are a [`QueueSet`] the scheduler reaches
/// one worker at a time (the StarPU adapter shares them, each behind its
/// worker's lock, and a worker pops its own with [`pop_own`]); tests and
/// simulations use [`PlainQueues`].
pub struct Scheduler<T, Q = PlainQueues<Queued<T>>> {
    spec: BalancerSpec,
    tuning: Tuning,
    /// Units the balancer's training hands out per worker
    /// ([`BalancerSpec::training_units_per_pu`]).
    training_per_pu: u64,
    workers: Vec<usize>,
    /// Workers found able to run a task pushed so far (by worker id).
    capable_seen: Vec<bool>,
    /// [`Scheduler::lone_worker`], kept as workers and `capable_seen`
    /// change (read at every push).
    lone: bool,
    kinds: Vec<WorkerKind>,
    /// Per worker index; queues of removed workers stay reachable by
    /// stealing. Tasks join them only through this scheduler's calls.
    queues: Q,
    /// Tasks no worker of the context could run when placed.
    unplaced: VecDeque<Queued<T>>,
    staging: Option<Staging<T>>,
    /// Alive epochs, oldest first.
    epochs: Vec<Running<T>>,
    /// Finished epochs whose balancers a later epoch of the same batch
    /// shape can continue from, newest last (at most [`CARRIED_EPOCHS`]).
    carried: VecDeque<Running<T>>,
    /// What the last epochs of each codelet and size cost in consults.
    balancing: VecDeque<BalancingRecord>,
    next_epoch: u64,
    /// Longest task measured (seconds), a floor for the epochs' grace
    /// before lost reports.
    longest_task_s: f64,
    /// Placements [`Scheduler::take_reserved`] handed to the caller, not
    /// committed yet.
    out_for_commit: usize,
    rotate: usize,
    counters: TaskModeCounters,
    /// Workers that may find work after the last call (see
    /// [`Scheduler::take_notified`]).
    notify: Vec<usize>,
    /// Whether pushes hold their placements back ([`Reserved`]).
    reserving: bool,
    /// Set while a push runs with `reserving`: placements go to `reserved`.
    in_push: bool,
    /// Placements of the last push not yet taken by the caller.
    reserved: Vec<Reserved<T>>,
    /// The time of the current call (placement reads the workers'
    /// expected ends against it).
    now: f64,
}

impl<T: SchedTask> Scheduler<T> {
    /// A scheduler whose epochs use the balancer `spec`, with `tuning`,
    /// for worker indices below `max_workers`, with queues of its own.
    pub fn new(spec: BalancerSpec, tuning: Tuning, max_workers: usize) -> Scheduler<T> {
        Scheduler::with_queues(spec, tuning, PlainQueues::new(max_workers))
    }
}

impl<T: SchedTask, Q: QueueSet<Queued<T>>> Scheduler<T, Q> {
    /// A scheduler over the workers' queues `queues` (worker indices below
    /// `queues.len()`), empty.
    pub fn with_queues(spec: BalancerSpec, tuning: Tuning, queues: Q) -> Scheduler<T, Q> {
        let max_workers = queues.len();
        Scheduler {
            training_per_pu: spec.training_units_per_pu(&tuning),
            spec,
            tuning,
            workers: Vec::new(),
            capable_seen: Vec::new(),
            lone: false,
            kinds: vec![WorkerKind::Other; max_workers],
            queues,
            unplaced: VecDeque::new(),
            staging: None,
            epochs: Vec::new(),
            carried: VecDeque::new(),
            balancing: VecDeque::new(),
            next_epoch: 0,
            longest_task_s: 0.0,
            out_for_commit: 0,
            rotate: 0,
            counters: TaskModeCounters::default(),
            notify: Vec::new(),
            reserving: false,
            in_push: false,
            reserved: Vec::new(),
            now: 0.0,
        }
    }

    /// Makes [`Scheduler::push`] hold back the placements it makes (the
    /// pushed task's, a staged batch's it flushes) instead of queueing
    /// them: the caller takes them ([`Scheduler::take_reserved`]),
    /// prefetches each task's input to its worker's memory without its
    /// lock — the task cannot be popped meanwhile — and queues them with
    /// [`Scheduler::commit`] (as `dmda`: book the prediction, prefetch,
    /// then queue). Placements outside a push are queued at once.
    pub fn set_reserving(&mut self, on: bool) {
        self.reserving = on;
    }

    /// The placements the last push held back (empty unless reserving).
    pub fn take_reserved(&mut self) -> Vec<Reserved<T>> {
        self.out_for_commit += self.reserved.len();
        std::mem::take(&mut self.reserved)
    }

    /// Queues placements taken with [`Scheduler::take_reserved`]; their
    /// workers are notified. A placement whose worker left the context
    /// meanwhile is placed again on the remaining ones.
    pub fn commit(&mut self, placements: Vec<Reserved<T>>, book: &ModelBook) {
        self.out_for_commit = self.out_for_commit.saturating_sub(placements.len());
        for r in placements {
            if r.worker >= self.queues.len() {
                self.unplaced.push_back(r.item);
                continue;
            }
            self.queues.unreserve(r.worker, r.item.est_s);
            if self.workers.contains(&r.worker) {
                let (prio, est) = (r.item.priority, r.item.est_s);
                if let Err(item) = self.queues.push_to(r.worker, r.item, prio, est) {
                    self.unplaced.push_back(item);
                }
                self.notify.push(r.worker);
            } else {
                let capable = self.capable(&r.item.task);
                let was = self.in_push;
                self.in_push = false;
                if let Some(w) = self.place(book, r.item, &capable) {
                    self.notify.push(w);
                }
                self.in_push = was;
            }
        }
    }

    /// [`Scheduler::commit`], returning the idle workers to wake.
    pub fn commit_waking(
        &mut self,
        placements: Vec<Reserved<T>>,
        book: &ModelBook,
        sleepers: &Sleepers,
    ) -> Vec<usize> {
        self.commit(placements, book);
        sleepers.wake_list(self.take_notified())
    }

    /// Queues what a previous push held back and the caller did not take
    /// (a caller that does not prefetch loses nothing).
    fn commit_leftovers(&mut self, book: &ModelBook) {
        if !self.reserved.is_empty() {
            let left = std::mem::take(&mut self.reserved);
            self.out_for_commit += left.len();
            self.commit(left, book);
        }
    }

    /// The epochs' balancer.
    pub fn spec(&self) -> &BalancerSpec {
        &self.spec
    }

    /// When `worker` is expected to be done with what it runs, what is
    /// queued for it and what a push reserved on it (seconds, from `now`
    /// on: never before `now`).
    pub fn expected_end_s(&self, worker: usize, now: f64) -> f64 {
        now + self.queues.load_s(worker, now)
    }

    /// Tasks held (queued, staged, in epochs, or placed and not committed
    /// yet).
    pub fn held(&self) -> usize {
        self.held_apart() + self.queues.held()
    }

    /// Tasks held but not in the workers' queues (staged, in epochs,
    /// unplaced, placed and not committed yet).
    pub fn held_apart(&self) -> usize {
        self.unplaced.len()
            + self.staging.as_ref().map_or(0, |s| s.items.len())
            + self.epochs.iter().map(|r| r.epoch.held()).sum::<usize>()
            + self.reserved.len()
            + self.out_for_commit
    }

    /// Whether a pop may take from the worker's own queue alone
    /// ([`pop_own`]) instead of stepping through the scheduler: no epoch
    /// is alive (epochs go before the queues) and no staged batch is big
    /// enough to form one. A worker with unread reports must step too.
    pub fn own_queue_first(&self) -> bool {
        self.epochs.is_empty() && !self.staging.as_ref().is_some_and(Staging::is_big)
    }

    /// The workers' queues (shared with the caller).
    pub fn queues(&self) -> &Q {
        &self.queues
    }

    /// A worker's kind (`Other` for an unknown id).
    pub fn kind_of(&self, worker: usize) -> WorkerKind {
        self.kinds.get(worker).copied().unwrap_or(WorkerKind::Other)
    }

    /// The counters so far.
    pub fn counters(&self) -> TaskModeCounters {
        self.counters
    }

    /// The context's workers.
    pub fn workers(&self) -> &[usize] {
        &self.workers
    }

    /// Workers that may find work since the last call (placement chose
    /// them, an epoch gave them a block or progressed): a caller whose
    /// workers skip the scheduler while idle clears their flag and wakes
    /// them. Drains the list.
    pub fn take_notified(&mut self) -> Vec<usize> {
        let mut v = std::mem::take(&mut self.notify);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Workers joined (index, kind).
    pub fn add_workers(&mut self, workers: &[(usize, WorkerKind)]) {
        for &(w, kind) in workers {
            if w >= self.kinds.len() {
                self.kinds.resize(w + 1, WorkerKind::Other);
            }
            self.kinds[w] = kind;
            if !self.workers.contains(&w) {
                self.workers.push(w);
            }
        }
        self.lone = self.lone_worker();
    }

    /// Workers left: their epochs are dissolved into the fallback queues
    /// (placed on the remaining workers); every remaining worker is
    /// notified (it may steal what the removed ones left queued).
    pub fn remove_workers(&mut self, workers: &[usize], book: &ModelBook) {
        self.commit_leftovers(book);
        log::debug!(
            "{}: workers {workers:?} removed ({} held)",
            self.spec.label(),
            self.held()
        );
        self.workers.retain(|w| !workers.contains(w));
        self.lone = self.lone_worker();
        self.dissolve_epochs(Some(workers), book);
        self.notify.extend(self.workers.iter().copied());
    }

    /// Whether one worker of the context alone was found able to run the
    /// tasks pushed so far. Its queue then runs in arrival order: it runs
    /// them all, one after the other, and never idles while one is ready,
    /// so no order changes the makespan through the graph; arrival order
    /// runs a task soon after the tasks that wrote its inputs, while they
    /// are still in the caches (see `dag::graph`'s lone worker).
    fn lone_worker(&self) -> bool {
        self.workers
            .iter()
            .filter(|&&w| self.capable_seen.get(w) == Some(&true))
            .count()
            == 1
    }

    fn capable(&self, task: &T) -> Vec<usize> {
        self.workers
            .iter()
            .copied()
            .filter(|&w| task.implementation_on(w).is_some())
            .collect()
    }

    /// Queues `item` on the worker of `capable` with the earliest predicted
    /// finish (the fallback rule), or on the unplaced queue when `capable`
    /// is empty; returns the chosen worker.
    fn place(&mut self, book: &ModelBook, mut item: Queued<T>, capable: &[usize]) -> Option<usize> {
        let cands: Vec<Candidate> = capable
            .iter()
            .map(|&w| {
                Candidate {
                    // As dmda's expected start: what the worker runs, then
                    // what is reserved and queued ahead of this task.
                    backlog_s: self.queues.ahead_of_s(w, item.priority, self.now),
                    queued: self.queues.queued(w),
                    // Compute from the fitted model plus the predicted
                    // transfer to the worker's memory.
                    predicted_s: book
                        .trained_prediction(w, item.codelet, item.units)
                        .map(|c| c + item.task.transfer_s(w).unwrap_or(0.0)),
                }
            })
            .collect();
        let chosen = choose(&cands, self.rotate).map(|i| capable[i]);
        self.rotate = self.rotate.wrapping_add(1);
        item.est_s = chosen
            .and_then(|w| book.get(w, item.codelet))
            .and_then(|m| m.predict(item.units))
            .unwrap_or(0.0);
        match chosen.filter(|&w| w < self.queues.len()) {
            Some(worker) if self.in_push => {
                self.queues.reserve(worker, item.est_s);
                self.reserved.push(Reserved { worker, item });
            }
            Some(worker) => {
                let (prio, est) = (item.priority, item.est_s);
                if let Err(item) = self.queues.push_to(worker, item, prio, est) {
                    self.unplaced.push_back(item);
                }
            }
            None => self.unplaced.push_back(item),
        }
        chosen
    }

    /// Places `items` by the fallback rule; the chosen workers are
    /// notified.
    fn place_all(&mut self, items: Vec<Queued<T>>, book: &ModelBook) {
        for item in items {
            let capable = self.capable(&item.task);
            if let Some(w) = self.place(book, item, &capable) {
                self.notify.push(w);
            }
        }
    }

    /// Places the staged batch by the fallback rule.
    fn flush_staging(&mut self, book: &ModelBook) {
        if let Some(s) = self.staging.take() {
            self.place_all(s.items, book);
        }
    }

    /// Takes from `worker`'s own queue, else steals (the longest queues
    /// first, then the unplaced tasks). From a queue of a worker still in
    /// the context it steals only a task it would finish before that
    /// worker would get through its queue up to it (its trained model plus
    /// the transfer, against the queued predictions up to and including
    /// the task; with either prediction unknown the task may be taken), so
    /// an idle slow worker does not take what a busy fast one will finish
    /// sooner; from a removed worker's queue it takes anything.
    fn take_fallback(&mut self, worker: usize, book: &ModelBook) -> Option<(Queued<T>, u32)> {
        let runnable = |q: &Queued<T>| q.task.implementation_on(worker);
        if let Some((item, _, nimpl)) = self.queues.take_first(worker, runnable) {
            return Some((item, nimpl));
        }
        let workers = &self.workers;
        let order = VictimOrder::LongestQueue;
        // Only workers ever added can hold queued tasks (tasks join queues
        // only through this scheduler's calls, for its workers): the ids
        // `kinds` covers, not every queue (StarPU's maximum, 80 or more).
        let victims = 0..self.kinds.len().min(self.queues.len());
        let stolen = steal(
            &self.queues,
            victims,
            worker,
            self.now,
            order,
            |victim, q: &Queued<T>, ahead| {
                let nimpl = q.task.implementation_on(worker)?;
                if !workers.contains(&victim) || q.est_s <= 0.0 {
                    return Some(nimpl);
                }
                let thief_s = book
                    .trained_prediction(worker, q.codelet, q.units)
                    .map(|c| c + q.task.transfer_s(worker).unwrap_or(0.0));
                match thief_s {
                    Some(t) if t >= ahead.queued_s => None,
                    _ => Some(nimpl),
                }
            },
        );
        match stolen {
            Some((_, item, _, nimpl)) => Some((item, nimpl)),
            None => take_runnable(&mut self.unplaced, worker),
        }
    }

    /// Whether an epoch of the staged batch's codelet and size still hands
    /// tasks out.
    fn same_batch_open(&self, s: &Staging<T>) -> bool {
        self.epochs
            .iter()
            .any(|r| r.epoch.is_open() && r.codelet == s.codelet && same_size(r.units, s.units))
    }

    /// Whether the last [`COSTLY_EPOCHS`] finished epochs of `codelet` and
    /// `units` each spent more than [`MAX_BALANCING_SHARE`] of their
    /// tasks' time in consults.
    fn balancing_too_costly(&self, codelet: usize, units: f64) -> bool {
        self.balancing
            .iter()
            .find(|r| r.codelet == codelet && same_size(r.units, units))
            .is_some_and(|r| r.costly_in_a_row >= COSTLY_EPOCHS)
    }

    /// Records how many epochs of `codelet` and `units` in a row cost more
    /// than [`MAX_BALANCING_SHARE`], `in_a_row` of the count before (the
    /// last [`CARRIED_EPOCHS`] codelets and sizes are remembered).
    fn note_balancing(&mut self, codelet: usize, units: f64, in_a_row: impl FnOnce(u32) -> u32) {
        let at = self
            .balancing
            .iter()
            .position(|r| r.codelet == codelet && same_size(r.units, units));
        let before = at.map_or(0, |i| self.balancing[i].costly_in_a_row);
        if let Some(i) = at {
            self.balancing.remove(i);
        }
        if self.balancing.len() >= CARRIED_EPOCHS {
            self.balancing.pop_front();
        }
        self.balancing.push_back(BalancingRecord {
            codelet,
            units,
            costly_in_a_row: in_a_row(before),
        });
    }

    /// Whether `worker` may still get a task from an alive epoch.
    pub fn epoch_may_give(&self, worker: usize) -> bool {
        self.epochs.iter().any(|r| r.epoch.may_give(worker))
    }

    /// Forms an epoch of the staged batch at `now`; returns the workers it
    /// runs on (empty, and the batch placed by the fallback rule, when the
    /// balancer cannot be built).
    fn form_epoch(&mut self, now: f64, book: &ModelBook) -> Vec<usize> {
        let Some(s) = self.staging.take() else {
            return Vec::new();
        };
        if self.balancing_too_costly(s.codelet, s.units) {
            self.counters.unbalanced_tasks += s.items.len() as u64;
            self.place_all(s.items, book);
            return Vec::new();
        }
        let workers: Vec<usize> = s
            .capable
            .iter()
            .copied()
            .filter(|w| self.workers.contains(w))
            .collect();
        let pus: Vec<EpochPu> = workers
            .iter()
            .map(|&w| EpochPu {
                worker: w,
                kind: self.kinds.get(w).copied().unwrap_or(WorkerKind::Other),
            })
            .collect();
        let id = self.next_epoch;
        self.next_epoch += 1;
        // The next batch of the same codelet, size and workers continues
        // from what the last such epoch's balancer learned (no second
        // training), when its balancer defines a carry-over.
        let total = s.items.len() as u64;
        let same = |r: &Running<T>| {
            r.codelet == s.codelet
                && same_size(r.units, s.units)
                && r.epoch.workers().eq(workers.iter().copied())
        };
        let carried = self
            .epochs
            .iter()
            .rev()
            .chain(self.carried.iter().rev())
            .filter(|r| same(r))
            .find_map(|r| r.epoch.continue_with(total));
        let built = match carried {
            Some(b) => {
                self.counters.carried_epochs += 1;
                Epoch::with_balancer(id, b, &pus, s.items, now)
            }
            None => {
                // Each worker's trained prediction of one task, when all
                // have one (Static's given speeds).
                let task_s: Option<Vec<f64>> = workers
                    .iter()
                    .map(|&w| book.trained_prediction(w, s.codelet, s.units))
                    .collect();
                let task_s = task_s.as_deref();
                Epoch::new(id, &self.spec, &self.tuning, &pus, task_s, s.items, now)
            }
        };
        match built {
            Ok(mut epoch) => {
                epoch.note_task_seconds(self.longest_task_s);
                log::debug!(
                    "{}: epoch {id} of {} tasks on {} workers",
                    self.spec.label(),
                    epoch.total(),
                    pus.len()
                );
                self.counters.epochs += 1;
                self.epochs.push(Running {
                    epoch,
                    codelet: s.codelet,
                    units: s.units,
                });
                self.notify.extend(workers.iter().copied());
                workers
            }
            Err((items, why)) => {
                log::warn!("{}: no epoch ({why}); placing the batch", self.spec.label());
                self.place_all(items, book);
                Vec::new()
            }
        }
    }

    /// Dissolves the epochs that can no longer progress (their tasks go to
    /// the fallback queues) and forgets the finished ones.
    fn settle_epochs(&mut self, book: &ModelBook) {
        let mut i = 0;
        while i < self.epochs.len() {
            if self.epochs[i].epoch.is_stalled() {
                let e = &mut self.epochs[i].epoch;
                if let Some(f) = e.fault() {
                    log::error!("{}: epoch {}: {f}", self.spec.label(), e.id());
                }
                log::debug!(
                    "{}: epoch {} stalled; its tasks go to the fallback queues ({e:?})",
                    self.spec.label(),
                    e.id()
                );
                let items = e.dissolve();
                self.counters.dissolved_tasks += items.len() as u64;
                self.place_all(items, book);
            }
            if self.epochs[i].epoch.is_finished() {
                let gone = self.epochs.remove(i);
                let stats = gone.epoch.stats();
                log::debug!(
                    "{}: epoch {} over: {stats:?}, balancing share {:?}",
                    self.spec.label(),
                    gone.epoch.id(),
                    gone.epoch.balancing_share()
                );
                self.counters.forced_completions += stats.forced;
                self.counters.tail_steals += stats.stolen;
                if stats.dissolved == 0 {
                    let costly = gone
                        .epoch
                        .balancing_share()
                        .is_some_and(|share| share > MAX_BALANCING_SHARE);
                    self.note_balancing(gone.codelet, gone.units, |before| {
                        if costly { before + 1 } else { 0 }
                    });
                    self.carried
                        .retain(|r| r.codelet != gone.codelet || !same_size(r.units, gone.units));
                    if self.carried.len() >= CARRIED_EPOCHS {
                        self.carried.pop_front();
                    }
                    self.carried.push_back(gone);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Dissolves every epoch running on one of `workers` (all of them for
    /// `None`), placing their tasks by the fallback rule.
    fn dissolve_epochs(&mut self, workers: Option<&[usize]>, book: &ModelBook) {
        for i in 0..self.epochs.len() {
            let e = &mut self.epochs[i].epoch;
            let hit = workers.is_none_or(|ws| ws.iter().any(|&w| e.has_worker(w)));
            if hit {
                let items = e.dissolve();
                self.counters.dissolved_tasks += items.len() as u64;
                self.place_all(items, book);
            }
        }
        self.settle_epochs(book);
    }

    /// A task an epoch handed to `worker`: checked against the worker (a
    /// task it cannot run after all is reported done and placed by the
    /// fallback rule instead).
    fn checked(
        &mut self,
        worker: usize,
        (item, ticket): (Queued<T>, Ticket),
        now: f64,
        book: &ModelBook,
    ) -> Option<Taken<T>> {
        match item.task.implementation_on(worker) {
            Some(nimpl) => {
                self.counters.epoch_tasks += 1;
                // The epoch's estimate: this worker's model.
                let est_s = book
                    .get(worker, item.codelet)
                    .and_then(|m| m.predict(item.units))
                    .unwrap_or(0.0);
                Some(Taken {
                    task: item.task,
                    implementation: nimpl,
                    ticket: Some(ticket),
                    codelet: item.codelet,
                    units: item.units,
                    est_s,
                })
            }
            None => {
                if let Some(r) = self
                    .epochs
                    .iter_mut()
                    .find(|r| r.epoch.id() == ticket.epoch)
                {
                    r.epoch.task_done(ticket, 0.0, now);
                }
                let capable = self.capable(&item.task);
                if let Some(w) = self.place(book, item, &capable) {
                    self.notify.push(w);
                }
                None
            }
        }
    }

    /// The epoch steps of a pop: `worker`'s group, then the balancers.
    fn take_from_epochs(&mut self, worker: usize, now: f64, book: &ModelBook) -> Option<Pop<T>> {
        // Bounded: each round either returns or moves one task out of the
        // epochs into the fallback queues.
        for _ in 0..1024 {
            let mut got = None;
            for r in self.epochs.iter_mut() {
                got = r.epoch.take_queued(worker);
                if got.is_some() {
                    break;
                }
            }
            if got.is_none() {
                for r in self.epochs.iter_mut() {
                    match r.epoch.ask(worker, now) {
                        Ask::Task(t, ticket) => {
                            got = Some((t, ticket));
                            break;
                        }
                        Ask::Consult(consult) => {
                            return Some(Pop::Consult(EpochConsult {
                                epoch: r.epoch.id(),
                                consult,
                                took_s: 0.0,
                            }));
                        }
                        Ask::Nothing => {}
                    }
                }
            }
            let x = got?;
            if let Some(t) = self.checked(worker, x, now, book) {
                return Some(Pop::Task(t));
            }
        }
        None
    }

    /// The end game of the epochs: a task another worker's group holds and
    /// `worker` would finish first ([`Epoch::steal_tail`]).
    fn steal_from_epochs(&mut self, worker: usize, now: f64, book: &ModelBook) -> Option<Pop<T>> {
        // Bounded: each round returns or moves a task out of the epochs.
        for _ in 0..64 {
            let x = self
                .epochs
                .iter_mut()
                .find_map(|r| r.epoch.steal_tail(worker))
                .or_else(|| {
                    self.epochs.iter_mut().find_map(|r| {
                        let (codelet, units) = (r.codelet, r.units);
                        r.epoch
                            .steal_pending(worker, |w| book.trained_prediction(w, codelet, units))
                    })
                })?;
            if let Some(t) = self.checked(worker, x, now, book) {
                return Some(Pop::Task(t));
            }
        }
        None
    }

    /// Forms an epoch of the (big) staged batch and returns `worker`'s first
    /// step from the epochs, or, when [`MAX_EPOCHS`] are alive, places the
    /// batch by the fallback rule.
    fn form_or_flush(&mut self, worker: usize, now: f64, book: &ModelBook) -> Option<Pop<T>> {
        if self.epochs.len() < MAX_EPOCHS {
            self.form_epoch(now, book);
            self.take_from_epochs(worker, now, book)
        } else {
            self.flush_staging(book);
            None
        }
    }

    /// Takes from the staged batch the task `worker` runs first: the
    /// oldest of the highest priority it can run.
    fn take_staged(&mut self, worker: usize) -> Option<Pop<T>> {
        let s = self.staging.as_mut()?;
        let (i, nimpl, _) = s
            .items
            .iter()
            .enumerate()
            .filter_map(|(i, q)| Some((i, q.task.implementation_on(worker)?, q.priority)))
            .max_by_key(|&(i, _, priority)| (priority, std::cmp::Reverse(i)))?;
        let item = s.items.remove(i);
        if s.items.is_empty() {
            self.staging = None;
        }
        self.counters.staged_tasks += 1;
        Some(Pop::Task(item.into_taken(nimpl)))
    }

    fn fallback(&mut self, worker: usize, book: &ModelBook) -> Option<Pop<T>> {
        let (item, nimpl) = self.take_fallback(worker, book)?;
        self.counters.fallback_tasks += 1;
        Some(Pop::Task(item.into_taken(nimpl)))
    }

    /// The steps of a pop (see the module documentation).
    fn take(&mut self, worker: usize, now: f64, book: &ModelBook) -> Option<Pop<T>> {
        // A small batch that stopped growing goes to the fallback queues.
        if self
            .staging
            .as_ref()
            .is_some_and(|s| !s.is_big() && now - s.last_push >= STAGING_QUIET_S)
        {
            self.flush_staging(book);
        }
        if let Some(t) = self.take_from_epochs(worker, now, book) {
            return Some(t);
        }
        self.settle_epochs(book);
        // A big staged batch forms the next epoch, unless an epoch of the
        // same codelet and size still hands tasks out (it will when that
        // one has given everything out).
        let form = self
            .staging
            .as_ref()
            .is_some_and(|s| s.is_big() && !self.same_batch_open(s));
        if form && let Some(t) = self.form_or_flush(worker, now, book) {
            return Some(t);
        }
        if let Some(t) = self.fallback(worker, book) {
            return Some(t);
        }
        if let Some(t) = self.steal_from_epochs(worker, now, book) {
            return Some(t);
        }
        // The worker would idle: the staged batch is placed (or, when big
        // and this worker has nothing to wait for in an epoch, formed)
        // rather than left waiting.
        let runnable = self.staging.as_ref().is_some_and(|s| {
            s.items
                .first()
                .is_some_and(|q| q.task.implementation_on(worker).is_some())
        });
        if runnable {
            let big = self.staging.as_ref().is_some_and(Staging::is_big);
            if big && self.epoch_may_give(worker) {
                // It waits at an epoch's synchronisation point: rather
                // than idle, it runs one staged task; the rest stays
                // staged for the next epoch.
                return self.take_staged(worker);
            }
            if big {
                if let Some(t) = self.form_or_flush(worker, now, book) {
                    return Some(t);
                }
            } else {
                self.flush_staging(book);
            }
            return self.fallback(worker, book);
        }
        None
    }

    /// Worker `worker` asks for a task at `now`.
    pub fn pop(&mut self, worker: usize, now: f64, book: &ModelBook) -> Pop<T> {
        self.now = now;
        self.commit_leftovers(book);
        match self.take(worker, now, book) {
            Some(Pop::Task(t)) => {
                let cpu = self.kinds.get(worker) == Some(&WorkerKind::Cpu);
                self.queues
                    .with(worker, |q| q.starting(None, t.est_s, now, cpu));
                Pop::Task(t)
            }
            Some(other) => other,
            None => Pop::Nothing {
                idle: !self.epoch_may_give(worker),
            },
        }
    }

    /// Hands back a consult [`Scheduler::pop`] gave `worker`, after
    /// [`EpochConsult::run`]; the PUs that got blocks are notified, and
    /// `worker` asks again.
    pub fn resume(
        &mut self,
        consult: EpochConsult,
        worker: usize,
        now: f64,
        book: &ModelBook,
    ) -> Pop<T> {
        self.hand_back(consult, now, book);
        self.pop(worker, now, book)
    }

    /// Hands back a consult without asking again (a caller that bounds
    /// its work per pop); the PUs that got blocks are notified.
    ///
    /// Every worker of the epoch is notified, not only those that got a
    /// block: a worker that asked while the consult was out found nothing
    /// and may sleep, though the balancer would now answer it.
    pub fn hand_back(&mut self, consult: EpochConsult, now: f64, book: &ModelBook) {
        self.now = now;
        if let Some(r) = self
            .epochs
            .iter_mut()
            .find(|r| r.epoch.id() == consult.epoch)
        {
            r.epoch.charge_balancing(consult.took_s);
            r.epoch.checkin(consult.consult, now);
            self.notify.extend(r.epoch.workers());
            if r.epoch.balancing_runs_away() {
                // Its consults already cost more than the limit allows
                // for its whole work many times over: its tasks go to
                // the fallback rule, and so will its codelet's next ones.
                log::debug!(
                    "{}: epoch {} dissolved: consults cost {:?} of its work",
                    self.spec.label(),
                    r.epoch.id(),
                    r.epoch.balancing_share()
                );
                let (codelet, units) = (r.codelet, r.units);
                let items = r.epoch.dissolve();
                self.counters.dissolved_tasks += items.len() as u64;
                self.counters.unbalanced_tasks += items.len() as u64;
                self.place_all(items, book);
                self.note_balancing(codelet, units, |_| COSTLY_EPOCHS);
            }
        }
        self.settle_epochs(book);
    }

    /// Completes the epochs' blocks that wait only on reports that may
    /// never come (`Epoch::complete_stuck`); their workers are notified.
    /// Returns whether one was.
    fn complete_stuck_blocks(&mut self, now: f64, book: &ModelBook) -> bool {
        let mut any = false;
        for r in &mut self.epochs {
            if r.epoch.complete_stuck(now) {
                any = true;
                self.notify.extend(r.epoch.workers());
            }
        }
        if any {
            self.settle_epochs(book);
        }
        any
    }

    /// One of `worker`'s tasks (any task it popped) finished at `now`: its
    /// expected end no longer counts it.
    pub fn task_finished(&self, worker: usize, now: f64) {
        self.queues.finished(worker, None, now);
    }

    /// [`Scheduler::pop`] that runs consults at once (single-threaded
    /// callers and tests).
    pub fn pop_now(&mut self, worker: usize, now: f64, book: &ModelBook) -> Option<Taken<T>> {
        self.pop_now_timed(worker, now, book, 0.0)
    }

    /// [`Scheduler::pop_now`] where each consult counts as taking
    /// `consult_s` seconds ([`EpochConsult::took`]), as the adapter
    /// measures them.
    pub fn pop_now_timed(
        &mut self,
        worker: usize,
        now: f64,
        book: &ModelBook,
        consult_s: f64,
    ) -> Option<Taken<T>> {
        let mut p = self.pop(worker, now, book);
        // Bounded: each consult hands out blocks or changes PU states.
        for _ in 0..16 {
            match p {
                Pop::Task(t) => return Some(t),
                Pop::Nothing { .. } => return None,
                Pop::Consult(mut c) => {
                    c.run();
                    c.took(consult_s);
                    p = self.resume(c, worker, now, book);
                }
            }
        }
        None
    }

    /// A task became ready at `now`. Returns the idle workers to wake,
    /// their flags cleared in `sleepers` (the chosen worker if idle, else
    /// one idle worker able to run it; the idle workers of an epoch formed;
    /// every worker notified meanwhile).
    pub fn push(&mut self, task: T, now: f64, book: &ModelBook, sleepers: &Sleepers) -> Vec<usize> {
        self.now = now;
        self.commit_leftovers(book);
        self.in_push = self.reserving;
        let is_idle = |w: usize| sleepers.is_idle(w);
        let mut wake = self.push_placing(task, now, book, &is_idle);
        self.in_push = false;
        wake.extend(self.take_notified());
        sleepers.wake_list(wake)
    }

    fn push_placing(
        &mut self,
        task: T,
        now: f64,
        book: &ModelBook,
        is_idle: &dyn Fn(usize) -> bool,
    ) -> Vec<usize> {
        let codelet = task.codelet();
        let units = task.units();
        let priority = task.priority();
        let mut item = Queued {
            task,
            codelet,
            units,
            priority,
            est_s: 0.0,
        };
        // A task of the staged batch's codelet and size joins it (the batch
        // knows which workers can run the codelet): the common case of a
        // stream of like tasks costs no capability query.
        if codelet != 0
            && let Some(s) = self.staging.as_mut()
            && s.matches(codelet, units)
        {
            s.items.push(item);
            s.last_push = now;
            return s
                .capable
                .iter()
                .copied()
                .find(|&w| is_idle(w))
                .into_iter()
                .collect();
        }
        let capable = self.capable(&item.task);
        let mut newly_seen = false;
        for &w in &capable {
            if w >= self.capable_seen.len() {
                self.capable_seen.resize(w + 1, false);
            }
            newly_seen |= !std::mem::replace(&mut self.capable_seen[w], true);
        }
        if newly_seen {
            self.lone = self.lone_worker();
        }
        if self.lone {
            item.priority = 0;
        }
        let mut wake: Vec<usize> = Vec::new();
        let costly = codelet != 0 && self.balancing_too_costly(codelet, units);
        if costly {
            self.counters.unbalanced_tasks += 1;
        }
        // One capable worker has nothing to balance with: its tasks go to
        // its queue by the fallback rule, never staged for an epoch.
        let chosen = if codelet != 0 && capable.len() >= EPOCH_MIN_WORKERS && !costly {
            // Staged. The task closes the current batch: it forms an epoch
            // when big enough, else is placed.
            if self
                .staging
                .as_ref()
                .is_some_and(|s| s.is_big() && self.epochs.len() < MAX_EPOCHS)
            {
                // Wake the epoch's workers that were idle.
                let idle: Vec<usize> = self
                    .staging
                    .as_ref()
                    .map(|s| s.capable.iter().copied().filter(|&w| is_idle(w)).collect())
                    .unwrap_or_default();
                let on = self.form_epoch(now, book);
                wake.extend(idle.into_iter().filter(|w| on.contains(w)));
            } else {
                self.flush_staging(book);
            }
            let training = self.training_per_pu.saturating_mul(capable.len() as u64);
            let epoch_len =
                epoch_min(capable.len()).max(usize::try_from(training).unwrap_or(usize::MAX));
            self.staging = Some(Staging {
                codelet,
                units,
                capable: capable.clone(),
                items: vec![item],
                last_push: now,
                epoch_len,
            });
            None
        } else {
            self.place(book, item, &capable)
        };
        // Wake the chosen worker if it is idle, else one idle worker that
        // may take the task.
        let one = chosen.filter(|&w| is_idle(w)).or_else(|| {
            capable
                .iter()
                .copied()
                .find(|&w| Some(w) != chosen && is_idle(w))
        });
        wake.extend(one);
        wake.sort_unstable();
        wake.dedup();
        wake
    }

    /// The task of `ticket` ran for `seconds` and finished at `now`
    /// (recorded only; its epoch's balancer sees it at its next consult).
    /// When this completes a block, the epoch's workers are notified.
    pub fn task_done(&mut self, ticket: Ticket, seconds: f64, now: f64, book: &ModelBook) {
        if seconds > self.longest_task_s {
            self.longest_task_s = seconds;
        }
        let mut progressed = false;
        if let Some(r) = self
            .epochs
            .iter_mut()
            .find(|r| r.epoch.id() == ticket.epoch)
            && r.epoch.task_done(ticket, seconds, now)
        {
            progressed = true;
            self.notify.extend(r.epoch.workers());
        }
        if progressed {
            self.settle_epochs(book);
        }
    }

    /// Takes every task held (at deinit; normally none).
    pub fn drain(&mut self) -> Vec<T> {
        let leftovers = std::mem::take(&mut self.reserved);
        let mut out: Vec<T> = leftovers.into_iter().map(|r| r.item.task).collect();
        for r in self.epochs.drain(..) {
            let mut epoch = r.epoch;
            let items = epoch.dissolve();
            self.counters.dissolved_tasks += items.len() as u64;
            out.extend(items.into_iter().map(|q| q.task));
        }
        if let Some(s) = self.staging.take() {
            out.extend(s.items.into_iter().map(|q| q.task));
        }
        out.extend(self.queues.drain().into_iter().map(|q| q.task));
        out.extend(self.unplaced.drain(..).map(|q| q.task));
        out
    }
}

#[cfg(test)]
mod tests;
