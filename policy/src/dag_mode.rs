//! Task mode of the task-graph policies (`plb-heft`, `dada`, `dada-cp`):
//! the StarPU wrapper around [`plb_core::dag::graph`] (the scheduler and a
//! worker's pop as locked steps) and [`plb_core::dag::decide`] (one batch's
//! placement), where the rules live and are tested, the pop's
//! interleavings included. This module only locks, asks StarPU, prefetches
//! and wakes.
//!
//! # What happens where
//!
//! * **push**: the task joins the ready list (one short lock); an idle
//!   worker is woken to place it.
//! * **pop**: when no batch waits to be placed, first the worker's own
//!   line alone ([`pop_own`], under that line's lock only: the common
//!   pop, as `dmda`'s per-worker queues). Otherwise, or on an empty line,
//!   the scheduler's locked steps ([`GraphSched::pop_step`]). A
//!   step may hand out a batch: *without* the lock the worker asks StarPU
//!   which workers can run each task and where its data is (transfer
//!   times from StarPU's sampled bus model, bytes written per memory node),
//!   takes our models' predictions (the models lock only), for `plb-heft`
//!   ranks each task by the longest chain of work below it (the graph
//!   StarPU knows, in the context, walked only where no rank is kept:
//!   [`plb_core::dag::rank`]), runs HEFT or DADA, prefetches each task's
//!   input to its worker's memory node, and
//!   hands the placement to the next step, which queues it on the workers'
//!   lines. The last step gives the worker its line's next task (highest
//!   priority first, ready data first) or one it steals.
//! * **post_exec**: the worker's expected end is corrected and the measured
//!   time recorded in the models (a refit, when due, runs with no lock); a
//!   worker's first sample of a codelet releases the tasks deferred until
//!   a kind had a prediction (`GraphSched::model_learned`).
//!
//! # Models
//!
//! Predictions come from our fitted per (worker, codelet) models
//! ([`GraphModels`], outliers screened). A worker with no samples of a
//! codelet uses a trained worker of the same kind's prediction; when no
//! worker of a kind able to run the task has one, the task goes to an
//! untrained worker of that kind, so each kind is trained on the first
//! tasks.
//!
//! # Locks
//!
//! `state` (the scheduler: ready list, deferred tasks, members) is what
//! push and the pop's steps take; each worker's line has its own lock
//! (`lines`), taken alone by its worker's first try and, under `state`,
//! one line at a time by the steps (queueing a placed batch, stealing, a
//! worker leaving); expected ends and lengths are read from what the
//! line's last holder left in atomics (`Glance`), without its lock. Tasks
//! join a line only under `state`, and a worker marks itself idle only
//! under `state`, so a pop on its own line cannot lose a wake-up (checked
//! by the interleaving tests, `core/tests/interleavings/`). `models` is
//! taken alone: by a placement (seeding a codelet's saved samples, installing
//! their fits, predictions) and by `post_exec` (recording a sample,
//! installing a refit); the models file is read at the first placement,
//! before the models lock is taken to install it. `ranks` is taken by
//! the placing worker alone (one places at a time), with the models lock
//! inside it to price the tasks found; the successor lists are read from
//! StarPU under it (a read of the task's list under StarPU's own lock,
//! with no call back into the policy). The tasks completed since the
//! previous batch, whose ranks are dropped, come with the batch (the
//! scheduler lists them under `state`, which `post_exec` takes anyway).
//! No placement, fit, file
//! I/O or StarPU call that may call back runs under any of these locks
//! (the rank walk is not a placement: it finds and prices tasks):
//! under `state` and a line's only plain queries (whether a task's input
//! is on a node, at pop). Whom to wake is decided by the
//! scheduler under `state` (`plb_core::sleepers`); the adapter wakes them
//! after releasing it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use plb_core::balance::WorkerKind;
use plb_core::dag::decide::{Batch, Decided, GraphModels, GraphTask, Member, decide};
use plb_core::dag::graph::{GraphRound, GraphSched, GraphStep, pop_own};
use plb_core::dag::line_order::LineOrder;
use plb_core::dag::lines::Placed;
use plb_core::dag::prefetch::{PrefetchHorizon, PrefetchSetting};
use plb_core::dag::rank::{RANKS_CAP, UpwardRanks};
use plb_core::dag::{Method, PerTask};
use plb_core::fit::FitConfig;
use plb_core::taskmode::placement::RefitJob;
use plb_core::worker_queues::QueueSet;

use crate::catalog::PolicyInfo;
use crate::gauges::Gauges;
use crate::locked_lines::LockedLines;
use crate::model_file::Persisted;
use crate::padded::CachePadded;
use crate::starpu::{
    GraphBelow, Popped, SchedCtx, SchedPolicy, Task, TaskRef, WorkerId, drivers_block, now_us,
    prefetch_useful, relaxed_lock,
};
use crate::stats::ModelFigures;

pub use plb_core::dag::graph::BATCH_MAX;

impl GraphTask for Task {
    fn id(&self) -> usize {
        self.addr()
    }
    fn codelet(&self) -> usize {
        self.codelet_key()
    }
    fn units(&self) -> f64 {
        self.work_units()
    }
    fn priority(&self) -> i32 {
        Task::priority(self)
    }
    fn implementation_on(&self, worker: usize) -> Option<u32> {
        self.first_impl_on(WorkerId(worker as u32))
    }
    fn transfer_to_node_s(&self, node: usize) -> Option<f64> {
        self.expected_transfer_to_node_s(node)
    }
    fn written_bytes_on(&self, nodes: &[usize], out: &mut [f64]) {
        Task::written_bytes_on(self, nodes, out)
    }
    fn input_on_node(&self, node: usize) -> bool {
        Task::input_on_node(self, node)
    }
    fn runtime_prediction_s(&self, worker: usize) -> Option<f64> {
        self.expected_ms_on(WorkerId(worker as u32))
            .map(|ms| ms / 1e3)
    }
}

/// The upward ranks found so far, and the set of tasks a walk's view of
/// StarPU's graph may ask about ([`GraphBelow::of`]), kept between walks.
#[derive(Default)]
struct RankWalk {
    ranks: UpwardRanks,
    known: rustc_hash::FxHashSet<usize>,
}

/// Our models and the models file they were seeded from.
#[derive(Default)]
struct Models {
    graph: GraphModels,
    persisted: Persisted,
}

/// State of one scheduling context under a task-graph policy.
pub struct DagPolicy {
    name: &'static str,
    method: Method,
    state: Mutex<GraphSched<Task>>,
    lines: LockedLines<Placed<Task>>,
    /// [`GraphSched::placing_due`] as of the last release of `state`: a
    /// pop tries its own line alone only when it is false.
    due: CachePadded<AtomicBool>,
    /// Placed tasks the prefetch horizon kept from being prefetched at
    /// placement (for the summary).
    prefetches_held: AtomicU64,
    /// Tasks HEFT's CPU offload placed on a CPU worker (for the summary).
    cpu_offloads: AtomicU64,
    models: Mutex<Models>,
    /// Whether the models file was read (`Models::persisted` is open): set
    /// once, so that placements check it without the models lock.
    models_open: AtomicBool,
    /// The upward ranks found so far and the walks' scratch (taken by the
    /// placing worker only).
    ranks: Mutex<RankWalk>,
    /// Whether placements need the tasks' upward ranks (HEFT's slack).
    ranked: bool,
    /// Whether StarPU's predictions stand in where ours have none
    /// (`PLB_STARPU_MODELS`).
    starpu_models: bool,
    /// Prefetch at placement only within a horizon of work ahead
    /// (`PLB_PREFETCH_HORIZON`).
    prefetch_horizon: PrefetchSetting,
    /// The lines' bound in force ([`GraphSched::windowed`]) as of the
    /// last change of members, an accelerator's and a CPU worker's
    /// (`usize::MAX`: none): an own-line pop from a full line reports the
    /// room it made.
    caps: [AtomicUsize; 2],
    /// Tasks held by the scheduler (ready and deferred; the lines count
    /// theirs in `lines`), members, idle flags, timers (batch placements
    /// and refits).
    g: Gauges,
}

/// A key for a saved codelet's name, apart from live codelet keys (the
/// addresses of `starpu_codelet`s, which never have the top bit set).
fn saved_codelet_key(name: &str) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    (h.finish() as usize) | (1 << (usize::BITS - 1))
}

fn now_s() -> f64 {
    now_us() / 1e6
}

impl DagPolicy {
    /// Places a batch (no lock held but the models' for the predictions)
    /// and prefetches each task's input.
    fn place(&self, mut batch: Batch<Task>) -> Decided<Task> {
        batch.outstanding = crate::starpu::tasks_outstanding();
        // The models file is read once, at the first placement (StarPU's
        // workers are up and named: the file's identity names them), with
        // no lock held.
        if !self.models_open.load(Ordering::Acquire)
            && !relaxed_lock(&self.models).persisted.is_open()
        {
            let mut file = Persisted::default();
            file.open();
            let mut models = relaxed_lock(&self.models);
            if !models.persisted.is_open() {
                models.persisted = file;
                // How much slower each kind is than another, from every
                // saved sample at once (the training rule reads it before
                // the codelets' own models are seeded, at their first task).
                let Models { graph, persisted } = &mut *models;
                for (name, w, samples) in persisted.saved_samples() {
                    let Some(m) = batch.members.iter().find(|m| m.id == w) else {
                        continue;
                    };
                    let key = saved_codelet_key(name);
                    for &(units, secs) in samples {
                        graph.record_kind(m.kind, key, units, secs);
                    }
                }
            }
            self.models_open.store(true, Ordering::Release);
        }
        // A codelet's first tasks: its saved samples (read from the file
        // when the workers joined) seed our models, fitted without the
        // models lock and installed before the predictions. StarPU's own
        // predictions are asked for the members ours have none for, after
        // the seeding (a seeded model is a prediction of ours): under the
        // same hold of the lock when nothing was seeded (the common case).
        let wants = |graph: &GraphModels, batch: &Batch<Task>| {
            if self.starpu_models {
                graph.wants_runtime_predictions(batch)
            } else {
                PerTask::new()
            }
        };
        let (seeds, mut asked) = {
            let mut models = relaxed_lock(&self.models);
            let Models { graph, persisted } = &mut *models;
            let mut jobs: Vec<(RefitJob, FitConfig)> = Vec::new();
            for t in &batch.tasks {
                let codelet = t.codelet_key();
                if persisted.seen(codelet) {
                    continue;
                }
                let workers: Vec<usize> = batch.members.iter().map(|m| m.id).collect();
                for (w, samples) in persisted.first_sight(codelet, t.codelet_name(), &workers) {
                    if let Some(job) = graph.book.seed_job(w, codelet, &samples) {
                        jobs.push((job, graph.book.fit_config().clone()));
                    }
                }
            }
            let asked = if jobs.is_empty() {
                wants(graph, &batch)
            } else {
                PerTask::new()
            };
            (jobs, asked)
        };
        if !seeds.is_empty() {
            let fitted: Vec<_> = seeds.into_iter().map(|(j, cfg)| j.run(&cfg)).collect();
            let mut models = relaxed_lock(&self.models);
            for f in fitted {
                models.graph.book.install(f);
            }
            asked = wants(&models.graph, &batch);
        }
        // StarPU's view of each task: capability, transfers, affinity, and
        // its own predictions where asked.
        let facts = batch.facts_with(&asked);
        if self.ranked {
            batch.ranks = self.upward_ranks(&batch);
        }
        let costs = relaxed_lock(&self.models).graph.costs(&batch, &facts);
        let n_members = batch.members.len();
        // Which placed tasks are prefetched: built before `decide` takes
        // the batch (the workers' backlogs as it was taken).
        let mut horizon = prefetch_useful().then(|| {
            PrefetchHorizon::new(
                self.prefetch_horizon.horizon_s(&batch.members),
                batch
                    .members
                    .iter()
                    .map(|m| m.id)
                    .zip(batch.loads.iter().copied()),
            )
        });
        let decided = decide(self.method, batch, facts, costs);
        if decided.offloaded > 0 {
            self.cpu_offloads
                .fetch_add(decided.offloaded as u64, Ordering::Relaxed);
        }
        if let Some(horizon) = horizon.as_mut() {
            let mut held = 0;
            for d in &decided.decisions {
                if horizon.admit(d.worker, d.est_s) {
                    d.placed.task.prefetch_for(WorkerId(d.worker as u32));
                } else {
                    held += 1;
                }
            }
            if held > 0 {
                self.prefetches_held.fetch_add(held, Ordering::Relaxed);
            }
        }
        log::trace!(
            "{}: placed {} task(s) on {} workers",
            self.name,
            decided.decisions.len(),
            n_members
        );
        decided
    }

    /// Each batch task's upward rank: the ranks of the tasks completed
    /// since the previous batch are dropped (the batch lists them), the
    /// graph below the batch is walked where no rank is kept yet
    /// (StarPU's successor lists, under the ranks' lock, which only the
    /// one placing worker takes), priced with our models' cheapest
    /// prediction (the models lock), and ranked.
    fn upward_ranks(&self, batch: &Batch<Task>) -> PerTask<f64> {
        let mut walk = relaxed_lock(&self.ranks);
        let RankWalk { ranks, known } = &mut *walk;
        match &batch.completed {
            Some(done) => ranks.forget(done),
            // Too many to list: every rank is dropped.
            None => *ranks = UpwardRanks::default(),
        }
        // Most batches' tasks were ranked by an earlier walk: no walk then.
        let ranked: Option<PerTask<f64>> =
            batch.tasks.iter().map(|t| ranks.rank(t.addr())).collect();
        if let Some(ranked) = ranked {
            return ranked;
        }
        let mut graph = GraphBelow::of(&batch.tasks, known);
        let roots: PerTask<usize> = batch.tasks.iter().map(Task::addr).collect();
        let keys: PerTask<Option<(usize, f64)>> = ranks
            .unranked(&roots, RANKS_CAP, |id| graph.successors(id))
            .iter()
            .map(|u| graph.codelet_and_units(u.id))
            .collect();
        let costs: PerTask<f64> = {
            let models = relaxed_lock(&self.models);
            keys.iter()
                .map(|k| {
                    k.and_then(|(c, u)| models.graph.best_prediction(&batch.members, c, u))
                        .unwrap_or(0.0)
                })
                .collect()
        };
        ranks.settle(&costs);
        roots
            .iter()
            .map(|&id| ranks.rank(id).unwrap_or(0.0))
            .collect()
    }

    /// What pops read without `state` (the caller holds it): the tasks it
    /// holds, and whether a batch is due.
    fn publish(&self, st: &GraphSched<Task>) {
        self.g.queued.store(st.held(), Ordering::Release);
        self.due.store(st.placing_due(), Ordering::Release);
    }

    /// The lines' bound in force, for pops to read without `state` (the
    /// caller holds it); it changes only with the members.
    fn publish_caps(&self, st: &GraphSched<Task>) {
        let w = st.windowed();
        for (cap, cpu) in self.caps.iter().zip([false, true]) {
            cap.store(w.map_or(usize::MAX, |w| w.cap(cpu)), Ordering::Release);
        }
    }

    /// Brings the members in line with the context's (see
    /// [`SchedCtx::membership`]).
    fn sync_members(&self, ctx: SchedCtx) -> Vec<WorkerId> {
        let known: Vec<WorkerId> = relaxed_lock(&self.state)
            .members()
            .iter()
            .map(|m| WorkerId(m.id as u32))
            .collect();
        let change = ctx.membership(&known);
        if !change.joined.is_empty() {
            self.add_workers(ctx, &change.joined);
        }
        self.g.members.store(change.count, Ordering::Release);
        if change.gone.is_empty() {
            Vec::new()
        } else {
            self.remove_workers(ctx, &change.gone)
        }
    }
}

impl Drop for DagPolicy {
    fn drop(&mut self) {
        let m = match self.models.get_mut() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        m.persisted.save(&m.graph.book);
    }
}

/// Sets the popped task's implementation for `worker` and hands it on.
fn hand_over(mut task: Task, worker: WorkerId, wake: Vec<WorkerId>) -> Popped {
    if let Some(nimpl) = task.first_impl_on(worker) {
        task.set_implementation(nimpl);
    }
    Popped {
        task: Some(task),
        wake,
    }
}

fn ids(workers: Vec<usize>) -> Vec<WorkerId> {
    workers.into_iter().map(|w| WorkerId(w as u32)).collect()
}

impl SchedPolicy for DagPolicy {
    const PREFETCHES_AT_PLACEMENT: bool = true;

    fn new(_ctx: SchedCtx, info: &'static PolicyInfo) -> Self {
        let tuning = crate::config::tuning_or_default(info.name());
        let method = info.dag().map_or(Method::Heft, |e| {
            (e.method)(tuning.dada_alpha, tuning.dada_eps)
        });
        let n = WorkerId::max_workers();
        let mut sched = GraphSched::new(n);
        sched.set_window(tuning.heft_window.filter(|_| method == Method::Heft));
        sched.set_data_penalty(method == Method::Heft);
        // Only `plb-heft` ranks its tasks: the others' have no slack.
        sched.set_line_order(if method == Method::Heft {
            tuning.line_order
        } else {
            LineOrder::Arrival
        });
        sched.set_cpu_order(tuning.cpu_order);
        // The ranks forget completed tasks: each batch brings those
        // completed since the previous one.
        sched.list_completed(method == Method::Heft);
        DagPolicy {
            name: info.name(),
            method,
            state: Mutex::new(sched),
            lines: LockedLines::new(n),
            due: CachePadded(AtomicBool::new(false)),
            prefetches_held: AtomicU64::new(0),
            cpu_offloads: AtomicU64::new(0),
            models: Mutex::new({
                let mut models = Models::default();
                models.graph.set_cpu_offload(tuning.cpu_offload);
                models
            }),
            models_open: AtomicBool::new(false),
            ranks: Mutex::new(RankWalk::default()),
            ranked: method == Method::Heft,
            starpu_models: tuning.starpu_models,
            prefetch_horizon: tuning.prefetch_horizon,
            caps: [AtomicUsize::new(usize::MAX), AtomicUsize::new(usize::MAX)],
            g: Gauges::new(n),
        }
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let joined: Vec<Member> = crate::starpu::kinds_of(workers)
            .into_iter()
            .map(|(id, kind)| Member {
                id: id.index(),
                kind,
                node: id.memory_node(),
            })
            .collect();
        for m in &joined {
            self.lines
                .set_one_at_a_time(m.id, m.kind == WorkerKind::Cpu);
        }
        let mut st = relaxed_lock(&self.state);
        st.add_workers(&joined, &self.g.idle);
        self.g.members.store(st.members().len(), Ordering::Release);
        self.publish(&st);
        self.publish_caps(&st);
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) -> Vec<WorkerId> {
        let gone: Vec<usize> = workers.iter().map(|w| w.index()).collect();
        let mut st = relaxed_lock(&self.state);
        let wake = st.remove_workers(&gone, &self.lines, &self.g.idle);
        self.g.members.store(st.members().len(), Ordering::Release);
        self.publish(&st);
        self.publish_caps(&st);
        drop(st);
        ids(wake)
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        // A worker ending a task pops next (among CPU workers alone it then
        // places what it pushed: `GraphSched::push_from`).
        let pusher = WorkerId::current_between_tasks().map(WorkerId::index);
        let mut st = relaxed_lock(&self.state);
        let t0 = self.g.held.start();
        task.announce_pushed();
        let wake = st.push_from(task, &self.g.idle, pusher);
        self.publish(&st);
        self.g.held.stop(t0);
        drop(st);
        ids(wake)
    }

    fn pop(&self, ctx: SchedCtx, worker: WorkerId) -> Popped {
        let w = worker.index();
        let mut wake = Vec::new();
        if ctx.worker_count() != self.g.members.load(Ordering::Acquire) {
            wake = self.sync_members(ctx);
        }
        if self.g.idle.is_idle(w)
            || (self.g.queued.load(Ordering::Acquire) == 0
                && self.lines.held() == 0
                && !drivers_block())
        {
            return Popped { task: None, wake };
        }
        let node = worker.memory_node();
        if !self.due.load(Ordering::Acquire) {
            // The common pop: the worker's own line alone.
            let now = now_s();
            let t0 = self.g.held.start();
            let own = self
                .lines
                .with_own(w, |q, cpu| {
                    pop_own(q, cpu, node, now).map(|(t, n)| (t, n, cpu))
                })
                .flatten();
            self.g.held.stop(t0);
            if let Some((task, before, cpu)) = own {
                self.g.own_line_pops.add(1);
                if before >= self.caps[usize::from(cpu)].load(Ordering::Acquire) {
                    // A full line made room: tasks held for it are placed
                    // again (under `state`, after the line's lock).
                    let mut st = relaxed_lock(&self.state);
                    wake.extend(ids(st.took_own(w, before, &self.g.idle)));
                    self.publish(&st);
                }
                return hand_over(task, worker, wake);
            }
        }
        let mut round = GraphRound::default();
        let mut back: Option<Decided<Task>> = None;
        let (task, woken) = loop {
            let mut st = relaxed_lock(&self.state);
            let t0 = self.g.held.start();
            let (idle, lines) = (&self.g.idle, &self.lines);
            let step = st.pop_step(w, node, now_s(), idle, &mut round, back.take(), lines);
            self.publish(&st);
            self.g.held.stop(t0);
            drop(st);
            match step {
                GraphStep::Place(batch, woken) => {
                    // Those the last placement gave tasks start at once.
                    crate::starpu::wake_now(ids(woken));
                    // A panic while placing must not leave the batch
                    // unfinished (no batch would ever be placed again): its
                    // tasks, dropped by the unwinding, are rescued onto
                    // capable workers (`Task`'s `Drop`), and an empty
                    // placement ends the activation.
                    let placed = self
                        .g
                        .work
                        .time(|| catch_unwind(AssertUnwindSafe(|| self.place(*batch))));
                    back = Some(placed.unwrap_or_else(|_| {
                        log::error!(
                            "{}: placing a batch panicked; its tasks went to capable workers directly",
                            self.name
                        );
                        Decided::nothing()
                    }));
                }
                GraphStep::Task(t, woken) => break (Some(t), woken),
                GraphStep::Empty(woken) => break (None, woken),
            }
        };
        wake.extend(ids(woken));
        match task {
            Some(task) => hand_over(task, worker, wake),
            None => Popped { task: None, wake },
        }
    }

    fn post_exec(
        &self,
        _ctx: SchedCtx,
        task: TaskRef<'_>,
        worker: WorkerId,
        ran_s: Option<f64>,
    ) -> Vec<WorkerId> {
        let now = now_s();
        let w = worker.index();
        let kind = {
            let mut st = relaxed_lock(&self.state);
            st.finished(w, task.addr(), now, &self.lines);
            self.publish(&st);
            st.kind_of(w)
        };
        let Some(secs) = ran_s.filter(|s| s.is_finite() && *s > 0.0) else {
            return Vec::new();
        };
        let (codelet, units) = (task.codelet_key(), task.work_units());
        if codelet == 0 {
            return Vec::new();
        }
        let (due, first) = {
            let mut models = relaxed_lock(&self.models);
            let (job, first) = models.graph.record(w, kind, codelet, units, secs);
            (
                job.map(|j| (j, models.graph.book.fit_config().clone())),
                first,
            )
        };
        if let Some((job, cfg)) = due {
            let fitted = self.g.work.time(|| job.run(&cfg));
            relaxed_lock(&self.models).graph.book.install(fitted);
        }
        if !first {
            return Vec::new();
        }
        // A new prediction: tasks deferred for it are placed again.
        let mut st = relaxed_lock(&self.state);
        let wake = st.model_learned(&self.g.idle);
        self.publish(&st);
        drop(st);
        ids(wake)
    }

    fn predicted_s(&self, task: TaskRef<'_>, worker: WorkerId) -> Option<f64> {
        let members = relaxed_lock(&self.state).members().to_vec();
        let m = members.iter().position(|m| m.id == worker.index())?;
        relaxed_lock(&self.models)
            .graph
            .predict(&members, m, task.codelet_key(), task.work_units())
    }

    fn model_figures(&self) -> ModelFigures {
        ModelFigures {
            refits: relaxed_lock(&self.models).graph.book.refits(),
            solve_s: self.g.work.seconds(),
            lock_held_s: self.g.held.held_s(),
            own_line_pops: self.g.own_line_pops.get(),
            prefetches_held: self.prefetches_held.load(Ordering::Relaxed),
            cpu_offloads: self.cpu_offloads.load(Ordering::Relaxed),
            line_jumps: relaxed_lock(&self.state).line_jumps(),
        }
    }

    fn drain(&self) -> Vec<Task> {
        let mut st = relaxed_lock(&self.state);
        let out = st.drain(&self.lines);
        self.publish(&st);
        out
    }
}
