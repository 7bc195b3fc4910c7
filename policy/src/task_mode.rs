//! Task mode of every registry balancer but `greedy` (`plb-hac`,
//! `plb-hec`, `hdss`, `acosta`, `static`, ...): the StarPU wrapper around
//! `plb-core`'s task-mode scheduler ([`plb_core::taskmode`], where the rule
//! lives and is unit-tested). This module only locks, converts and hands
//! tasks to StarPU.
//!
//! # Locks, and no model work under them
//!
//! `state` (the scheduler — staging, epochs — and the fallback placement's
//! models) is what push and the pop's steps take. Each worker's fallback
//! queue has its own lock (`lines`, [`LockedLines`]): taken alone by the
//! worker's first try at a pop ([`pop_own`], when no epoch is alive, no
//! staged batch is big enough to form one and the worker has no report it
//! must deliver: [`Scheduler::own_queue_first`], [`must_deliver`]) and by
//! its `post_exec` (the expected end corrected); under `state`, one queue
//! at a time, by the steps. Tasks join a queue only under `state`, and a
//! worker marks itself idle only under `state`, so a pop on its own queue
//! cannot lose a wake-up (checked by the interleaving tests,
//! `core/tests/interleavings/`). Each worker's mailbox (its tasks in
//! flight, what its post-execution hooks measured) is taken alone, by that
//! worker's hooks and by its pops. Under none of these is a model fitted
//! or a block size solved:
//!
//! * a pop is a sequence of locked steps ([`Scheduler::pop_step`]); an
//!   epoch's balancer decision comes out as a consult, which `pop` runs
//!   after releasing the lock and hands to its next step;
//! * `post_exec` corrects the worker's expected end (its queue's lock) and
//!   fills its mailbox; a later pop delivers it under `state`
//!   ([`Scheduler::deliver`]): an epoch's report or a batch of
//!   `SAMPLES_PER_DELIVERY` measurements at the worker's very next pop,
//!   other measurements at its next pop that steps through `state`. The
//!   balancer sees the completions at its next consult;
//! * refits of the fallback models are jobs, run by that pop after it has
//!   released `state`, and installed under `state` afterwards.
//!
//! Whom to wake is decided by the scheduler under `state`, following
//! `plb_core::sleepers`; the adapter wakes them after releasing it. Under
//! `state` and a queue's lock the adapter calls StarPU only through the
//! task's capability and data queries
//! (`starpu_worker_can_execute_task_first_impl`, the transfer prediction
//! from StarPU's sampled bus model, the task's priority and codelet) and
//! `starpu_push_task_end`; nothing that can call back into the policy.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use plb_core::balance::registry::BalancerSpec;
use plb_core::fit::FitConfig;
use plb_core::taskmode::placement::{ModelBook, RefitJob};
use plb_core::taskmode::{
    EpochConsult, Finished, PopRound, PopStep, Queued, SchedTask, Scheduler, Taken,
    TaskModeCounters, must_deliver, pop_own,
};
use plb_core::worker_queues::QueueSet;

use crate::catalog::PolicyInfo;
use crate::gauges::Gauges;
use crate::locked_lines::LockedLines;
use crate::model_file::Persisted;
use crate::starpu::{
    Popped, SchedCtx, SchedPolicy, Task, TaskRef, WorkerId, drivers_block, now_us, prefetch_useful,
    relaxed_lock,
};
use crate::stats::ModelFigures;

/// In-flight tasks tracked per worker; beyond, the oldest entry is dropped
/// (entries of StarPU-internal tasks, whose `post_exec` is skipped, would
/// otherwise accumulate; a pipelined accelerator holds a few at most).
const INFLIGHT_PER_WORKER: usize = 64;

/// Measurements a worker buffers before its next pop delivers them
/// (beyond, those without an epoch ticket are dropped).
const SAMPLES_PER_WORKER: usize = 256;

impl SchedTask for Task {
    fn codelet(&self) -> usize {
        self.codelet_key()
    }
    fn units(&self) -> f64 {
        self.work_units()
    }
    fn implementation_on(&self, pu: usize) -> Option<u32> {
        self.first_impl_on(WorkerId(pu as u32))
    }
    fn transfer_s(&self, pu: usize) -> Option<f64> {
        // Predicted from StarPU's bus calibration (StarPU does not report
        // per-task transfer times).
        self.expected_transfer_s(WorkerId(pu as u32))
    }
    fn priority(&self) -> i32 {
        Task::priority(self)
    }
}

/// Process-wide task-mode counters (atomics: updated from the pop path
/// without another lock).
static COUNTERS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];

fn counters_array(c: &TaskModeCounters) -> [u64; 9] {
    [
        c.epochs,
        c.epoch_tasks,
        c.fallback_tasks,
        c.dissolved_tasks,
        c.forced_completions,
        c.tail_steals,
        c.carried_epochs,
        c.staged_tasks,
        c.unbalanced_tasks,
    ]
}

/// The `PLB_SUMMARY` line of a context's task-mode counters.
fn counters_line(c: &TaskModeCounters) -> String {
    format!(
        "plb:   task-mode epochs={} carried_epochs={} epoch_tasks={} fallback_tasks={} \
         dissolved_tasks={} tail_steals={} forced_completions={} staged_tasks={} unbalanced_tasks={}",
        c.epochs,
        c.carried_epochs,
        c.epoch_tasks,
        c.fallback_tasks,
        c.dissolved_tasks,
        c.tail_steals,
        c.forced_completions,
        c.staged_tasks,
        c.unbalanced_tasks
    )
}

/// Process-wide task-mode counters (every context of every task-mode
/// policy, live ones included), for tests and diagnostics.
pub fn task_mode_counters() -> TaskModeCounters {
    let v: Vec<u64> = COUNTERS.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    TaskModeCounters {
        epochs: v[0],
        epoch_tasks: v[1],
        fallback_tasks: v[2],
        dissolved_tasks: v[3],
        forced_completions: v[4],
        tail_steals: v[5],
        carried_epochs: v[6],
        staged_tasks: v[7],
        unbalanced_tasks: v[8],
    }
}

/// A worker's tasks in flight, and what its `post_exec` measured that the
/// scheduler has not seen yet (delivered at one of the worker's next pops:
/// a worker always pops after `post_exec`, and a mailbox that
/// [`must_deliver`] makes that pop take the lock).
#[derive(Default)]
struct Mailbox {
    inflight: Vec<Inflight>,
    finished: Vec<Finished>,
}

/// What a worker's mailbox holds, on a cache line of its own (each worker
/// writes its own; the polling fast path reads it on every pop):
/// [`MAILBOX_EMPTY`], [`MAILBOX_SAMPLES`] or [`MAILBOX_DUE`].
#[derive(Default)]
#[repr(align(64))]
struct MailboxFlag(AtomicU8);

/// Nothing to deliver.
const MAILBOX_EMPTY: u8 = 0;
/// Measurements only, delivered at the worker's next pop that steps
/// through the scheduler.
const MAILBOX_SAMPLES: u8 = 1;
/// To be delivered at the worker's next pop ([`must_deliver`]).
const MAILBOX_DUE: u8 = 2;

/// The workers' fallback queues, shared by the scheduler and the pops that
/// take their own queue alone.
type Lines = Arc<LockedLines<Queued<Task>>>;

/// The scheduler, the fallback models (with the models file they were
/// seeded from and refits of seeded models still to run), and the counters
/// already added to the process-wide ones.
struct State {
    sched: Scheduler<Task, Lines>,
    book: ModelBook,
    persisted: Persisted,
    seeded: Vec<(RefitJob, FitConfig)>,
    published: TaskModeCounters,
}

/// What the execution hooks need of a popped task.
struct Inflight {
    /// The task's address (identifies it between pop and `post_exec`).
    addr: usize,
    codelet: usize,
    units: f64,
    est_s: f64,
    ticket: Option<plb_core::taskmode::epoch::Ticket>,
}

/// State of one scheduling context under a task-mode policy.
pub struct TaskModePolicy {
    name: &'static str,
    state: Mutex<State>,
    /// The workers' fallback queues (also in `state`'s scheduler).
    lines: Lines,
    /// [`Scheduler::own_queue_first`] as of the last release of `state`.
    own_first: AtomicBool,
    /// Per worker (the one that popped the task runs it): its tasks in
    /// flight and its measured samples not yet recorded. Each is taken
    /// alone, by that worker's threads and by pops that flush it.
    mailboxes: Vec<Mutex<Mailbox>>,
    /// Per worker: what its mailbox holds.
    pending: Vec<MailboxFlag>,
    /// The models file has been read ([`TaskModePolicy::open_models_file`]).
    models_open: AtomicBool,
    /// Tasks held, members (resynchronised at pop:
    /// [`TaskModePolicy::sync_members`]), idle flags, timers (refit jobs and
    /// balancer consults; the time `state` is held).
    g: Gauges,
}

fn now_s() -> f64 {
    now_us() / 1e6
}

impl TaskModePolicy {
    /// Brings the scheduler's workers in line with the context's (see
    /// `members`): workers that left are removed (their epochs dissolve onto
    /// the others), workers that joined unannounced are added. Returns the
    /// workers to wake. StarPU is asked outside our lock.
    fn sync_members(&self, ctx: SchedCtx) -> Vec<WorkerId> {
        let known: Vec<WorkerId> = relaxed_lock(&self.state)
            .sched
            .workers()
            .iter()
            .map(|&w| WorkerId(w as u32))
            .collect();
        let change = ctx.membership(&known);
        if !change.joined.is_empty() {
            self.add_workers(ctx, &change.joined);
        }
        if change.gone.is_empty() {
            // Counts differ only transiently (a change in progress): note
            // the context's count so the next pops do not ask again.
            self.g.members.store(change.count, Ordering::Release);
            Vec::new()
        } else {
            log::debug!(
                "{}: workers {:?} left context {} unannounced",
                self.name,
                change.gone,
                ctx.id()
            );
            self.remove_workers(ctx, &change.gone)
        }
    }

    /// What pops read without `state` (the caller holds it): the tasks held
    /// apart from the queues, and whether a pop may try its own queue
    /// alone.
    fn publish_gauges(&self, st: &State) {
        self.g
            .queued
            .store(st.sched.held_apart(), Ordering::Release);
        self.own_first
            .store(st.sched.own_queue_first(), Ordering::Release);
    }

    /// Adds the scheduler's new counts to the process-wide ones.
    fn publish(st: &mut State) {
        let now = counters_array(&st.sched.counters());
        let done = counters_array(&st.published);
        for i in 0..now.len() {
            if now[i] != done[i] {
                COUNTERS[i].fetch_add(now[i] - done[i], Ordering::Relaxed);
            }
        }
        st.published = st.sched.counters();
    }

    /// Delivers `worker`'s mailbox (under the state lock the caller
    /// holds); returns the refits that are due, with the fitting
    /// configuration, to run after the lock is released.
    fn deliver(&self, st: &mut State, worker: usize) -> Vec<(RefitJob, FitConfig)> {
        let (Some(mb), Some(flag)) = (
            self.mailboxes.get(worker),
            self.pending.get(worker).map(|p| &p.0),
        ) else {
            return Vec::new();
        };
        if flag.swap(MAILBOX_EMPTY, Ordering::AcqRel) == MAILBOX_EMPTY {
            return Vec::new();
        }
        let finished = std::mem::take(&mut relaxed_lock(mb).finished);
        let State { sched, book, .. } = st;
        let jobs = sched.deliver(worker, finished, book);
        let cfg = book.fit_config();
        jobs.into_iter().map(|j| (j, cfg.clone())).collect()
    }

    /// Reads the models file (no lock held) and installs it, once: at the
    /// first push, when StarPU's workers are up and named (the file's
    /// identity names them).
    fn open_models_file(&self) {
        let mut file = Persisted::default();
        file.open();
        let mut st = relaxed_lock(&self.state);
        if !st.persisted.is_open() {
            st.persisted = file;
        }
        self.models_open.store(true, Ordering::Release);
    }

    /// Runs refit jobs (no lock held) and installs their results.
    fn refit(&self, jobs: Vec<(RefitJob, FitConfig)>) {
        if jobs.is_empty() {
            return;
        }
        let fitted: Vec<_> = self
            .g
            .work
            .time(|| jobs.into_iter().map(|(job, cfg)| job.run(&cfg)).collect());
        let mut st = relaxed_lock(&self.state);
        for f in fitted {
            st.book.install(f);
        }
    }

    /// Pops: the scheduler's locked steps, with the balancer consults they
    /// hand out run between them without the lock. Returns the task and
    /// the workers to wake (decided by the scheduler).
    fn take(&self, worker: WorkerId) -> (Option<Taken<Task>>, Vec<WorkerId>) {
        let w = worker.index();
        let mut round = PopRound::default();
        let mut back: Option<EpochConsult> = None;
        let mut jobs = Vec::new();
        let (taken, wake) = loop {
            let mut st = relaxed_lock(&self.state);
            let t0 = self.g.held.start();
            if back.is_none() {
                jobs = self.deliver(&mut st, w);
                jobs.append(&mut st.seeded);
            }
            let step = {
                let State { sched, book, .. } = &mut *st;
                sched.pop_step(w, now_s(), book, &self.g.idle, &mut round, back.take())
            };
            self.publish_gauges(&st);
            let done = match step {
                PopStep::Consult(c) => {
                    back = Some(c);
                    None
                }
                PopStep::Task(t, wake) => {
                    Self::publish(&mut st);
                    Some((Some(t), wake))
                }
                PopStep::Empty(wake) => Some((None, wake)),
            };
            self.g.held.stop(t0);
            drop(st);
            if let Some(done) = done {
                break done;
            }
            if let Some(c) = back.as_mut() {
                // Timed always (one consult per block, not per task): the
                // scheduler weighs an epoch's consults against its work.
                let began = now_s();
                c.run();
                let took = (now_s() - began).max(0.0);
                c.took(took);
                self.g.work.add_seconds(took);
            }
        };
        self.refit(jobs);
        let wake = wake.into_iter().map(|w| WorkerId(w as u32)).collect();
        (taken, wake)
    }

    /// Sets the popped task's implementation and records it in flight on
    /// `w` (for its `post_exec`).
    fn hand_over(&self, w: usize, taken: Taken<Task>) -> Task {
        let Taken {
            mut task,
            implementation,
            ticket,
            codelet,
            units,
            est_s,
        } = taken;
        task.set_implementation(implementation);
        if let Some(mb) = self.mailboxes.get(w) {
            let mut mb = relaxed_lock(mb);
            if mb.inflight.len() >= INFLIGHT_PER_WORKER {
                // An epoch ticket lost here is recovered by the epochs' lost
                // report handling.
                mb.inflight.remove(0);
            }
            mb.inflight.push(Inflight {
                addr: task.addr(),
                codelet,
                units,
                est_s,
                ticket,
            });
        }
        task
    }
}

impl Drop for TaskModePolicy {
    fn drop(&mut self) {
        let st = match self.state.get_mut() {
            Ok(st) => st,
            Err(poisoned) => poisoned.into_inner(),
        };
        st.persisted.save(&st.book);
    }
}

impl SchedPolicy for TaskModePolicy {
    fn new(_ctx: SchedCtx, info: &'static PolicyInfo) -> Self {
        let n = WorkerId::max_workers();
        let tuning = crate::config::tuning_or_default(info.name());
        let spec = BalancerSpec::parse(info.name()).unwrap_or_else(|e| {
            // Every catalog entry is a registry name.
            log::error!("{}: {e}; epochs use plb-hac", info.name());
            BalancerSpec::parse("plb-hac").expect("registered")
        });
        let lines: Lines = Arc::new(LockedLines::new(n));
        TaskModePolicy {
            name: info.name(),
            state: Mutex::new(State {
                sched: Scheduler::with_queues(spec, tuning, Arc::clone(&lines)),
                book: ModelBook::default(),
                persisted: Persisted::default(),
                seeded: Vec::new(),
                published: TaskModeCounters::default(),
            }),
            lines,
            own_first: AtomicBool::new(false),
            mailboxes: (0..n).map(|_| Mutex::new(Mailbox::default())).collect(),
            pending: (0..n).map(|_| MailboxFlag::default()).collect(),
            models_open: AtomicBool::new(false),
            g: Gauges::new(n),
        }
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let added: Vec<_> = crate::starpu::kinds_of(workers)
            .into_iter()
            .map(|(w, k)| (w.index(), k))
            .collect();
        for &(w, k) in &added {
            let cpu = k == plb_core::balance::WorkerKind::Cpu;
            self.lines.set_one_at_a_time(w, cpu);
        }
        let mut st = relaxed_lock(&self.state);
        st.sched.add_workers(&added);
        st.sched.set_reserving(prefetch_useful());
        self.publish_gauges(&st);
        self.g
            .members
            .store(st.sched.workers().len(), Ordering::Release);
        // Joined workers start awake (their flags cleared; they pop).
        self.g.idle.wake_list(workers.iter().map(|w| w.index()));
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) -> Vec<WorkerId> {
        let ids: Vec<usize> = workers.iter().map(|w| w.index()).collect();
        let mut st = relaxed_lock(&self.state);
        let State { sched, book, .. } = &mut *st;
        let wake = sched.remove_workers_waking(&ids, book, &self.g.idle);
        self.g
            .members
            .store(st.sched.workers().len(), Ordering::Release);
        self.publish_gauges(&st);
        drop(st);
        wake.into_iter().map(|w| WorkerId(w as u32)).collect()
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        if !self.models_open.load(Ordering::Acquire) {
            self.open_models_file();
        }
        let now = now_s();
        let mut st = relaxed_lock(&self.state);
        let mut t0 = self.g.held.start();
        task.announce_pushed();
        let codelet = task.codelet_key();
        if !st.persisted.seen(codelet) {
            // A codelet's first task: its saved samples seed the fallback
            // models now; the fits run at the next pop, off this lock.
            let workers = st.sched.workers().to_vec();
            let found = st
                .persisted
                .first_sight(codelet, task.codelet_name(), &workers);
            for (w, samples) in found {
                if let Some(job) = st.book.seed_job(w, codelet, &samples) {
                    let cfg = st.book.fit_config().clone();
                    st.seeded.push((job, cfg));
                }
            }
        }
        let State { sched, book, .. } = &mut *st;
        let mut wake = sched.push(task, now, book, &self.g.idle);
        let placed = st.sched.take_reserved();
        if !placed.is_empty() {
            // As dmda: the placements are booked; their input is prefetched
            // to the chosen workers' memory without our lock (the tasks are
            // in no queue, so nobody can pop them meanwhile), then queued.
            self.g.held.stop(t0);
            drop(st);
            for r in &placed {
                r.task().prefetch_for(WorkerId(r.worker() as u32));
            }
            st = relaxed_lock(&self.state);
            t0 = self.g.held.start();
            let State { sched, book, .. } = &mut *st;
            wake.extend(sched.commit_waking(placed, book, &self.g.idle));
        }
        self.publish_gauges(&st);
        self.g.held.stop(t0);
        drop(st);
        wake.into_iter().map(|w| WorkerId(w as u32)).collect()
    }

    fn pop(&self, ctx: SchedCtx, worker: WorkerId) -> Popped {
        let w = worker.index();
        let mut resynced = Vec::new();
        if ctx.worker_count() != self.g.members.load(Ordering::Acquire) {
            resynced = self.sync_members(ctx);
        }
        let due = self
            .pending
            .get(w)
            .is_some_and(|p| p.0.load(Ordering::Acquire) == MAILBOX_DUE);
        // An idle worker skips the locks until it is notified; with polling
        // drivers an empty policy is answered without them; a worker
        // finding nothing marks itself idle under `state` (see
        // `central_queue`: blocking drivers need the flag to be woken).
        let empty = self.g.queued.load(Ordering::Acquire) == 0
            && self.lines.held() == 0
            && !drivers_block();
        if !due && (empty || self.g.idle.is_idle(w)) {
            return Popped {
                task: None,
                wake: resynced,
            };
        }
        if !due && self.own_first.load(Ordering::Acquire) {
            // The common fallback pop: the worker's own queue alone.
            let now = now_s();
            let t0 = self.g.held.start();
            let own = self
                .lines
                .with_own(w, |q, cpu| pop_own(q, w, cpu, now))
                .flatten();
            self.g.held.stop(t0);
            if let Some(t) = own {
                self.g.own_line_pops.add(1);
                // Counted here: the scheduler's counters see only its steps.
                COUNTERS[2].fetch_add(1, Ordering::Relaxed);
                return Popped {
                    task: Some(self.hand_over(w, t)),
                    wake: resynced,
                };
            }
        }
        let (taken, wake) = self.take(worker);
        let mut wake = wake;
        wake.extend(resynced);
        Popped {
            task: taken.map(|t| self.hand_over(w, t)),
            wake,
        }
    }

    fn post_exec(
        &self,
        _ctx: SchedCtx,
        task: TaskRef<'_>,
        worker: WorkerId,
        ran_s: Option<f64>,
    ) -> Vec<WorkerId> {
        let end_s = now_us() / 1e6;
        let w = worker.index();
        let Some(mb) = self.mailboxes.get(w) else {
            return Vec::new();
        };
        let addr = task.addr();
        let mut mbox = relaxed_lock(mb);
        let Some(i) = mbox.inflight.iter().position(|e| e.addr == addr) else {
            return Vec::new();
        };
        let e = mbox.inflight.remove(i);
        // Epoch reports are always kept; plain measurements up to a cap.
        if e.ticket.is_some() || mbox.finished.len() < SAMPLES_PER_WORKER {
            mbox.finished.push(Finished {
                ticket: e.ticket,
                codelet: e.codelet,
                units: e.units,
                seconds: ran_s.filter(|s| s.is_finite() && *s > 0.0),
                end_s,
            });
            // An epoch's report (it may complete a block other workers
            // wait for) makes this worker's next pop take `state` even when
            // it would otherwise skip it, and wake them; measurements wait
            // for a batch.
            let held = if must_deliver(&mbox.finished) {
                MAILBOX_DUE
            } else {
                MAILBOX_SAMPLES
            };
            self.pending[w].0.store(held, Ordering::Release);
        }
        drop(mbox);
        // The worker's expected end no longer counts the task (its queue's
        // lock alone).
        self.lines.finished(w, None, end_s);
        // Nothing is available to another worker before this worker's next
        // pop delivers the mailbox.
        Vec::new()
    }

    fn predicted_s(&self, task: TaskRef<'_>, worker: WorkerId) -> Option<f64> {
        let addr = task.addr();
        relaxed_lock(self.mailboxes.get(worker.index())?)
            .inflight
            .iter()
            .find(|e| e.addr == addr)
            .map(|e| e.est_s)
            .filter(|&s| s > 0.0)
    }

    fn model_figures(&self) -> ModelFigures {
        ModelFigures {
            refits: relaxed_lock(&self.state).book.refits(),
            solve_s: self.g.work.seconds(),
            lock_held_s: self.g.held.held_s(),
            own_line_pops: self.g.own_line_pops.get(),
            prefetches_held: 0,
            cpu_offloads: 0,
            line_jumps: 0,
        }
    }

    fn summary_detail(&self) -> Vec<String> {
        vec![counters_line(&relaxed_lock(&self.state).sched.counters())]
    }

    fn drain(&self) -> Vec<Task> {
        let mut st = relaxed_lock(&self.state);
        self.g.queued.store(0, Ordering::Release);
        let out = st.sched.drain();
        Self::publish(&mut st);
        out
    }
}
