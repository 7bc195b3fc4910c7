//! Task mode of every registry balancer but `greedy` (`plb-hac`,
//! `plb-hec`, `hdss`, `acosta`, `static`, ...): the StarPU wrapper around
//! `plb-core`'s task-mode scheduler ([`plb_core::taskmode`], where the rule
//! lives and is unit-tested). This module only locks, converts and hands
//! tasks to StarPU.
//!
//! # Locks, and no model work under them
//!
//! `state` (the scheduler: queues, staging, epochs) is what push and pop
//! take; `models` (the fallback placement's models) is taken after it
//! (placement) or alone; `inflight` is always taken alone. Under none of
//! them is a model fitted or a block size solved:
//!
//! * an epoch's balancer decision comes out of the scheduler as a consult,
//!   which `pop` runs after releasing both locks and hands back;
//! * completions are only recorded (`post_exec`); the balancer sees them at
//!   its next consult;
//! * refits of the fallback models are jobs, run by `post_exec` without any
//!   lock and installed under `models` afterwards.
//!
//! No StarPU function that may call back into the policy is called under
//! any lock (only `starpu_push_task_end`, which StarPU requires under the
//! queue's lock, and plain queries).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use plb_core::balance::registry::BalancerSpec;
use plb_core::taskmode::epoch::Ticket;
use plb_core::taskmode::placement::ModelBook;
use plb_core::taskmode::{Pop, SchedTask, Scheduler, Taken, TaskModeCounters};

use crate::catalog::PolicyInfo;
use crate::config::Tuning;
use crate::hold_time::HoldTimer;
use crate::idle::IdleFlags;
use crate::starpu::{SchedCtx, SchedPolicy, Task, TaskRef, WorkerId, now_us, relaxed_lock};
use crate::stats::ModelFigures;

/// Tracked in-flight tasks beyond which the table is reset (entries of
/// StarPU-internal tasks, whose `post_exec` is skipped, would otherwise
/// accumulate).
const INFLIGHT_CAP: usize = 4096;

/// Consults of a balancer one pop may run before giving up for this call.
const CONSULTS_PER_POP: usize = 8;

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
}

static COUNTERS: Mutex<TaskModeCounters> = Mutex::new(TaskModeCounters {
    epochs: 0,
    epoch_tasks: 0,
    fallback_tasks: 0,
    dissolved_tasks: 0,
    forced_completions: 0,
});

/// Process-wide task-mode counters (every context of every task-mode
/// policy that has been deinitialised, plus the live ones' at their last
/// pop), for tests and diagnostics.
pub fn task_mode_counters() -> TaskModeCounters {
    *relaxed_lock(&COUNTERS)
}

/// What the execution hooks need of a popped task.
struct Inflight {
    codelet: usize,
    units: f64,
    est_s: f64,
    start_us: Option<f64>,
    ticket: Option<Ticket>,
}

/// State of one scheduling context under a task-mode policy.
pub struct TaskModePolicy {
    name: &'static str,
    state: Mutex<Scheduler<Task>>,
    /// Taken after `state` (placement) or alone; never the reverse.
    models: Mutex<ModelBook>,
    /// Always taken alone.
    inflight: Mutex<HashMap<usize, Inflight>>,
    /// Tasks held, readable without the lock.
    queued: AtomicUsize,
    idle: IdleFlags,
    /// Counters already added to [`COUNTERS`].
    published: Mutex<TaskModeCounters>,
    /// Nanoseconds spent fitting (refit jobs) and in balancer consults.
    model_ns: AtomicU64,
    /// Time `state` is held.
    held: HoldTimer,
}

fn now_s() -> f64 {
    now_us() / 1e6
}

impl TaskModePolicy {
    /// Clears the idle flags of the workers the scheduler notified (they
    /// look again at their next poll).
    fn notify(&self, st: &mut Scheduler<Task>) {
        for w in st.take_notified() {
            self.idle.clear(w);
        }
    }

    /// Adds the scheduler's new counts to the process-wide ones.
    fn publish(&self, st: &Scheduler<Task>) {
        let now = st.counters();
        let mut done = relaxed_lock(&self.published);
        let delta = TaskModeCounters {
            epochs: now.epochs - done.epochs,
            epoch_tasks: now.epoch_tasks - done.epoch_tasks,
            fallback_tasks: now.fallback_tasks - done.fallback_tasks,
            dissolved_tasks: now.dissolved_tasks - done.dissolved_tasks,
            forced_completions: now.forced_completions - done.forced_completions,
        };
        *done = now;
        drop(done);
        relaxed_lock(&COUNTERS).add(&delta);
    }

    /// Pops under the locks, running the balancer consults it hands out
    /// without them.
    fn take(&self, worker: WorkerId) -> Option<Taken<Task>> {
        let w = worker.index();
        let mut st = relaxed_lock(&self.state);
        let mut t0 = self.held.start();
        let mut book = relaxed_lock(&self.models);
        let mut popped = st.pop(w, now_s(), &book);
        let mut consults = 0;
        let taken = loop {
            match popped {
                Pop::Task(t) => break Some(t),
                Pop::Nothing { idle } => {
                    if idle {
                        // Nothing now and nothing to wait for: skip the
                        // lock until a push (or an epoch's progress)
                        // offers something.
                        self.idle.set(w);
                    }
                    break None;
                }
                Pop::Consult(mut c) => {
                    consults += 1;
                    drop(book);
                    self.held.stop(t0);
                    drop(st);
                    let began = now_us();
                    c.run();
                    let spent = (now_us() - began).max(0.0);
                    self.model_ns
                        .fetch_add((spent * 1e3) as u64, Ordering::Relaxed);
                    st = relaxed_lock(&self.state);
                    t0 = self.held.start();
                    book = relaxed_lock(&self.models);
                    if consults >= CONSULTS_PER_POP {
                        // Bounded work per pop: hand the consult back and
                        // let the next pop continue.
                        st.hand_back(c, now_s(), &book);
                        break None;
                    }
                    popped = st.resume(c, w, now_s(), &book);
                }
            }
        };
        drop(book);
        self.notify(&mut st);
        self.queued.store(st.held(), Ordering::Release);
        if taken.is_some() {
            self.publish(&st);
        }
        self.held.stop(t0);
        drop(st);
        taken
    }
}

impl SchedPolicy for TaskModePolicy {
    fn new(_ctx: SchedCtx, info: &'static PolicyInfo) -> Self {
        let n = WorkerId::max_workers();
        let tuning = Tuning::from_env().unwrap_or_else(|e| {
            // Refused earlier by starpu_initialize; keep the defaults.
            log::error!(
                "{}: {e}; using the default balancer parameters",
                info.name()
            );
            Tuning::default()
        });
        let spec = BalancerSpec::parse(info.name()).unwrap_or_else(|e| {
            // Every catalog entry is a registry name.
            log::error!("{}: {e}; epochs use plb-hac", info.name());
            BalancerSpec::parse("plb-hac").expect("registered")
        });
        TaskModePolicy {
            name: info.name(),
            state: Mutex::new(Scheduler::new(spec, tuning, n)),
            models: Mutex::new(ModelBook::default()),
            inflight: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            idle: IdleFlags::new(n),
            published: Mutex::new(TaskModeCounters::default()),
            model_ns: AtomicU64::new(0),
            held: HoldTimer::from_env(),
        }
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let ids: Vec<i32> = workers.iter().map(|w| w.0 as i32).collect();
        let kinds = crate::starpu::worker_kinds(&ids);
        let added: Vec<_> = workers
            .iter()
            .zip(kinds)
            .map(|(w, k)| (w.index(), k))
            .collect();
        relaxed_lock(&self.state).add_workers(&added);
        for w in workers {
            self.idle.clear(w.index());
        }
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let ids: Vec<usize> = workers.iter().map(|w| w.index()).collect();
        let mut st = relaxed_lock(&self.state);
        let book = relaxed_lock(&self.models);
        st.remove_workers(&ids, &book);
        drop(book);
        self.notify(&mut st);
        self.queued.store(st.held(), Ordering::Release);
        drop(st);
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        let now = now_s();
        let mut st = relaxed_lock(&self.state);
        let t0 = self.held.start();
        let book = relaxed_lock(&self.models);
        task.announce_pushed();
        let is_idle = |w: usize| self.idle.is_idle(w);
        let wake = st.push(task, now, &book, &is_idle);
        drop(book);
        self.notify(&mut st);
        for &w in &wake {
            self.idle.clear(w);
        }
        self.queued.store(st.held(), Ordering::Release);
        self.held.stop(t0);
        drop(st);
        wake.into_iter().map(|w| WorkerId(w as u32)).collect()
    }

    fn pop(&self, _ctx: SchedCtx, worker: WorkerId) -> Option<Task> {
        if self.queued.load(Ordering::Acquire) == 0 || self.idle.is_idle(worker.index()) {
            return None;
        }
        let Taken {
            mut task,
            implementation,
            ticket,
            codelet,
            units,
            est_s,
        } = self.take(worker)?;
        task.set_implementation(implementation);
        let mut inflight = relaxed_lock(&self.inflight);
        if inflight.len() >= INFLIGHT_CAP {
            // Epoch tickets lost here are recovered by the epochs' lost
            // report handling.
            inflight.clear();
        }
        inflight.insert(
            task.addr(),
            Inflight {
                codelet,
                units,
                est_s,
                start_us: None,
                ticket,
            },
        );
        drop(inflight);
        Some(task)
    }

    fn pre_exec(&self, _ctx: SchedCtx, task: TaskRef<'_>, _worker: WorkerId) {
        let now = now_us();
        if let Some(e) = relaxed_lock(&self.inflight).get_mut(&task.addr()) {
            e.start_us = Some(now);
        }
    }

    fn post_exec(&self, _ctx: SchedCtx, task: TaskRef<'_>, worker: WorkerId) {
        let end = now_us();
        let Some(e) = relaxed_lock(&self.inflight).remove(&task.addr()) else {
            return;
        };
        let seconds = e
            .start_us
            .map(|start| (end - start) / 1e6)
            .filter(|s| s.is_finite() && *s > 0.0);
        if let Some(seconds) = seconds {
            // Store the sample under the lock; fit without it.
            let job =
                relaxed_lock(&self.models).record(worker.index(), e.codelet, e.units, seconds);
            if let Some(job) = job {
                let t0 = now_us();
                let cfg = relaxed_lock(&self.models).fit_config().clone();
                let fitted = job.run(&cfg);
                self.model_ns
                    .fetch_add(((now_us() - t0).max(0.0) * 1e3) as u64, Ordering::Relaxed);
                relaxed_lock(&self.models).install(fitted);
            }
        }
        let Some(ticket) = e.ticket else { return };
        let mut st = relaxed_lock(&self.state);
        let t0 = self.held.start();
        let book = relaxed_lock(&self.models);
        st.task_done(ticket, seconds.unwrap_or(0.0), end / 1e6, &book);
        drop(book);
        self.notify(&mut st);
        self.queued.store(st.held(), Ordering::Release);
        self.held.stop(t0);
    }

    fn predicted_s(&self, task: TaskRef<'_>, _worker: WorkerId) -> Option<f64> {
        relaxed_lock(&self.inflight)
            .get(&task.addr())
            .map(|e| e.est_s)
            .filter(|&s| s > 0.0)
    }

    fn model_figures(&self) -> ModelFigures {
        ModelFigures {
            refits: relaxed_lock(&self.models).refits(),
            solve_s: self.model_ns.load(Ordering::Relaxed) as f64 / 1e9,
            lock_held_s: self.held.held_s(),
        }
    }

    fn drain(&self) -> Vec<Task> {
        let mut st = relaxed_lock(&self.state);
        self.queued.store(0, Ordering::Release);
        let out = st.drain();
        self.publish(&st);
        out
    }
}
