//! Task mode of the task-graph policies (`plb-heft`, `dada`, `dada-cp`):
//! the StarPU wrapper around [`plb_core::dag`], where the placement rules
//! and the per-worker lines live and are unit-tested.
//!
//! # What happens where
//!
//! * **push**: the task joins the ready batch (one short lock); an idle
//!   worker is woken to activate it.
//! * **pop**: a worker first activates the ready batch if no other worker
//!   is doing so: it takes the batch (at most [`BATCH_MAX`] tasks) and the
//!   workers' expected ends under the lock, then, *without* it, asks StarPU
//!   which workers can run each task, where its data is (transfer times
//!   from StarPU's bus model, bytes written per memory node) and our models
//!   for its predicted times, runs HEFT or DADA, and prefetches each task's
//!   input to its worker's memory node; it then queues the tasks on their
//!   workers' lines under the lock. It then takes its own line's next task
//!   (highest priority first, ready data first), or steals one it would
//!   finish first.
//! * **post_exec**: the worker's expected end is corrected and the measured
//!   time recorded in the models (a refit, when due, runs with no lock).
//!
//! # Models
//!
//! Predictions come from our fitted per (worker, codelet) models
//! ([`ModelBook`], outliers screened). A worker with no samples of a
//! codelet uses a trained worker of the same kind's prediction; when no
//! worker of a kind able to run the task has one, the task goes to an
//! untrained worker of that kind (at most `placement::TRAIN_QUEUE` such tasks
//! queued), so each kind is trained on the first tasks.
//!
//! # Locks
//!
//! `state` (ready batch, lines, members) is what push and pop take;
//! `models` is taken alone: by an activation (seeding a codelet's saved
//! samples, installing their fits, predictions), by `post_exec` (recording
//! a sample, installing a refit) and by `add_workers` (installing the
//! models file, read before the lock). No placement, fit, file I/O or
//! StarPU call that may call back runs under either lock: under `state`
//! only plain queries (ready data at pop, a task's implementation). Whom
//! to wake follows `plb_core::sleepers`: an activation wakes the idle
//! workers it queued tasks for, a push one idle worker to activate the
//! batch, all after the lock is released.

use std::collections::{HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use plb_core::balance::WorkerKind;
use plb_core::dag::lines::{Lines, Placed};
use plb_core::dag::{Affinity, DagTask, DagWorker, Method, place};
use plb_core::fit::FitConfig;
use plb_core::taskmode::placement::{Candidate, ModelBook, RefitJob, choose};

use crate::catalog::PolicyInfo;
use crate::gauges::Gauges;
use crate::model_file::Persisted;
use crate::starpu::{
    Popped, SchedCtx, SchedPolicy, Task, TaskRef, WorkerId, drivers_block, now_us, prefetch_useful,
    relaxed_lock,
};
use crate::stats::ModelFigures;

/// Most ready tasks one activation places (the rest wait for the next).
pub const BATCH_MAX: usize = 512;

/// Activations one pop runs back to back while tasks keep arriving.
const ACTIVATIONS_PER_POP: usize = 4;

/// A worker of the context.
#[derive(Debug, Clone, Copy)]
struct Member {
    id: WorkerId,
    kind: WorkerKind,
    node: usize,
}

struct State {
    ready: VecDeque<Task>,
    lines: Lines<Task>,
    members: Vec<Member>,
    /// A worker is placing a batch (taken out of `ready`).
    activating: bool,
    /// Tasks no worker of the context can run (offered again when workers
    /// join).
    stranded: Vec<Task>,
    rotate: usize,
}

impl State {
    fn held(&self) -> usize {
        self.ready.len() + self.lines.held()
    }
}

/// A batch being placed, with what it was taken with.
struct Batch {
    tasks: Vec<Task>,
    members: Vec<Member>,
    loads: Vec<f64>,
    queued: Vec<usize>,
    by_priority: Vec<Vec<(i32, f64)>>,
    rotate: usize,
}

/// Our models, the (kind, codelet) pairs a training task was sent for, and
/// the models file.
#[derive(Default)]
struct Models {
    book: ModelBook,
    training: HashSet<(WorkerKind, usize)>,
    persisted: Persisted,
}

/// StarPU's view of a task: the implementation each member would run
/// (`None`: cannot run it), the predicted transfer to each member, and its
/// data affinity.
type Facts = (Vec<Option<u32>>, Vec<f64>, Option<Affinity>);

/// A placement decided off the lock.
struct Decision {
    placed: Placed<Task>,
    /// Index into the batch's members.
    member: usize,
    est_s: f64,
}

/// State of one scheduling context under a task-graph policy.
pub struct DagPolicy {
    name: &'static str,
    method: Method,
    state: Mutex<State>,
    models: Mutex<Models>,
    /// Tasks held (ready and queued), members, idle flags, timers (batch
    /// placements and refits).
    g: Gauges,
}

fn now_s() -> f64 {
    now_us() / 1e6
}

impl DagPolicy {
    /// Our prediction of `units` of `codelet` on member `m`: its own model,
    /// else a worker of the same kind's (one sample is enough: tiles of a
    /// task graph mostly share one size).
    fn predict(
        book: &ModelBook,
        members: &[Member],
        m: usize,
        codelet: usize,
        units: f64,
    ) -> Option<f64> {
        let own = members[m].id.index();
        book.prediction(own, codelet, units).or_else(|| {
            members
                .iter()
                .filter(|p| p.kind == members[m].kind && p.id.index() != own)
                .find_map(|p| book.prediction(p.id.index(), codelet, units))
        })
    }

    /// Places a batch (no lock held) and prefetches each task's input.
    fn decide(&self, batch: Batch) -> (Vec<Decision>, Vec<Task>) {
        let Batch {
            tasks,
            members,
            mut loads,
            mut queued,
            by_priority,
            rotate,
        } = batch;
        let nodes: Vec<usize> = members.iter().map(|m| m.node).collect();
        let mut distinct = nodes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        // StarPU's view of each task: capability, transfers, affinity.
        let facts: Vec<Facts> = tasks
            .iter()
            .map(|t| {
                let capable = members.iter().map(|m| t.first_impl_on(m.id)).collect();
                let per_node: Vec<f64> = distinct
                    .iter()
                    .map(|&n| t.expected_transfer_to_node_s(n).unwrap_or(0.0))
                    .collect();
                let transfer = nodes
                    .iter()
                    .map(|n| per_node[distinct.binary_search(n).unwrap_or(0)])
                    .collect();
                let written = t.written_bytes_on(&distinct);
                let affinity = written
                    .iter()
                    .zip(&distinct)
                    .filter(|(b, _)| **b > 0.0)
                    .max_by(|a, b| a.0.total_cmp(b.0))
                    .map(|(&bytes, &node)| Affinity { node, bytes });
                (capable, transfer, affinity)
            })
            .collect();
        // Our predictions, and which tasks train a kind that has none (the
        // models lock only).
        let mut train: Vec<Option<usize>> = vec![None; tasks.len()];
        // A codelet's first tasks: its saved samples (read from the file
        // when the workers joined) seed our models, fitted without the
        // models lock and installed before the predictions below.
        let workers: Vec<usize> = members.iter().map(|m| m.id.index()).collect();
        let seeds: Vec<(RefitJob, FitConfig)> = {
            let mut models = relaxed_lock(&self.models);
            let Models {
                book, persisted, ..
            } = &mut *models;
            let mut jobs = Vec::new();
            for t in &tasks {
                let codelet = t.codelet_key();
                if persisted.seen(codelet) {
                    continue;
                }
                for (w, samples) in persisted.first_sight(codelet, t.codelet_name(), &workers) {
                    if let Some(job) = book.seed_job(w, codelet, &samples) {
                        jobs.push((job, book.fit_config().clone()));
                    }
                }
            }
            jobs
        };
        if !seeds.is_empty() {
            let fitted: Vec<_> = seeds.into_iter().map(|(j, cfg)| j.run(&cfg)).collect();
            let mut models = relaxed_lock(&self.models);
            for f in fitted {
                models.book.install(f);
            }
        }
        let costs: Vec<Vec<Option<f64>>> = {
            let mut models = relaxed_lock(&self.models);
            let Models { book, training, .. } = &mut *models;
            tasks
                .iter()
                .zip(&facts)
                .enumerate()
                .map(|(k, (t, (capable, _, _)))| {
                    let (codelet, units) = (t.codelet_key(), t.work_units());
                    let cost: Vec<Option<f64>> = (0..members.len())
                        .map(|m| {
                            capable[m]?;
                            Self::predict(book, &members, m, codelet, units)
                        })
                        .collect();
                    // The first task of a kind with no prediction trains
                    // it, on that kind's least-loaded worker; later ones
                    // go where predictions exist until its sample arrives.
                    let untrained = (0..members.len())
                        .find(|&m| {
                            capable[m].is_some()
                                && cost[m].is_none()
                                && !training.contains(&(members[m].kind, codelet))
                        })
                        .map(|m| members[m].kind);
                    if let Some(kind) = untrained {
                        training.insert((kind, codelet));
                        train[k] = (0..members.len())
                            .filter(|&m| members[m].kind == kind && capable[m].is_some())
                            .min_by(|&a, &b| {
                                loads[a]
                                    .total_cmp(&loads[b])
                                    .then(queued[a].cmp(&queued[b]))
                            });
                    }
                    cost
                })
                .collect()
        };
        let mut decisions = Vec::with_capacity(tasks.len());
        let mut stranded = Vec::new();
        let mut graph_tasks = Vec::new();
        let mut graph_meta = Vec::new();
        for (k, (task, ((capable, transfer, affinity), cost))) in tasks
            .into_iter()
            .zip(facts.into_iter().zip(costs))
            .enumerate()
        {
            if capable.iter().all(Option::is_none) {
                stranded.push(task);
                continue;
            }
            let trainee = train[k];
            let unknown = cost.iter().all(Option::is_none);
            if trainee.is_some() || unknown {
                // Training, or no prediction anywhere yet (every kind is
                // being trained): the fallback queues' rule.
                let m = trainee.unwrap_or_else(|| {
                    let idx: Vec<usize> = (0..members.len())
                        .filter(|&m| capable[m].is_some())
                        .collect();
                    let cands: Vec<Candidate> = idx
                        .iter()
                        .map(|&m| Candidate {
                            backlog_s: loads[m],
                            queued: queued[m],
                            predicted_s: cost[m],
                        })
                        .collect();
                    idx[choose(&cands, rotate + k).unwrap_or(0)]
                });
                let est = cost[m].unwrap_or(0.0);
                loads[m] += est;
                queued[m] += 1;
                let prio = task.priority();
                decisions.push(Decision {
                    placed: Placed::new(task, prio, cost, transfer),
                    member: m,
                    est_s: est,
                });
                continue;
            }
            graph_tasks.push(DagTask {
                cost_s: cost,
                transfer_s: transfer,
                affinity,
                priority: task.priority(),
            });
            graph_meta.push(task);
        }
        let workers: Vec<DagWorker> = members
            .iter()
            .zip(loads)
            .zip(by_priority)
            .map(|((m, load_s), queued_by_priority)| DagWorker {
                kind: m.kind,
                node: m.node,
                load_s,
                queued_by_priority,
            })
            .collect();
        let at = place(self.method, &graph_tasks, &workers);
        for ((task, info), m) in graph_meta.into_iter().zip(graph_tasks).zip(at) {
            // Every task passed has a capable member with a prediction.
            let m = if m < members.len() {
                m
            } else {
                (0..members.len())
                    .find(|&x| info.cost_s[x].is_some())
                    .unwrap_or(0)
            };
            let est = info.cost_s[m].unwrap_or(0.0);
            if log::log_enabled!(log::Level::Trace) {
                log::trace!(
                    "{}: {} prio {} -> worker {} (est {:.4}); loads {:?}; costs {:?}; transfers {:?}",
                    self.name,
                    task.describe(),
                    info.priority,
                    members[m].id.0,
                    est,
                    workers
                        .iter()
                        .map(|w| (w.load_s * 1e3).round() / 1e3)
                        .collect::<Vec<_>>(),
                    info.cost_s,
                    info.transfer_s
                );
            }
            decisions.push(Decision {
                placed: Placed::new(task, info.priority, info.cost_s, info.transfer_s),
                member: m,
                est_s: est,
            });
        }
        if prefetch_useful() {
            for d in &decisions {
                d.placed.task.prefetch_for(members[d.member].id);
            }
        }
        // Decisions refer to the batch's members; the lines index workers
        // by id (the steal rule reads the thief's entries).
        let width = members.iter().map(|m| m.id.index() + 1).max().unwrap_or(0);
        let decisions = decisions
            .into_iter()
            .map(|mut d| {
                let mut cost = vec![None; width];
                let mut transfer = vec![0.0; width];
                for (i, m) in members.iter().enumerate() {
                    cost[m.id.index()] = d.placed.cost_s.get(i).copied().flatten();
                    transfer[m.id.index()] = d.placed.transfer_s.get(i).copied().unwrap_or(0.0);
                }
                d.placed.cost_s = cost;
                d.placed.transfer_s = transfer;
                d.member = members[d.member].id.index();
                d
            })
            .collect();
        (decisions, stranded)
    }

    /// Takes a batch to place if one is ready and nobody places one.
    fn take_batch(&self, st: &mut State, now: f64) -> Option<Batch> {
        if st.activating || st.ready.is_empty() || st.members.is_empty() {
            return None;
        }
        st.activating = true;
        let n = st.ready.len().min(BATCH_MAX);
        let tasks: Vec<Task> = st.ready.drain(..n).collect();
        st.rotate = st.rotate.wrapping_add(1);
        Some(Batch {
            tasks,
            loads: st
                .members
                .iter()
                .map(|m| st.lines.load_s(m.id.index(), now))
                .collect(),
            queued: st
                .members
                .iter()
                .map(|m| st.lines.queued(m.id.index()))
                .collect(),
            by_priority: st
                .members
                .iter()
                .map(|m| st.lines.queued_by_priority(m.id.index()))
                .collect(),
            members: st.members.clone(),
            rotate: st.rotate,
        })
    }

    /// Queues decided tasks (under the lock) and returns the idle workers
    /// that got one.
    fn install(
        &self,
        st: &mut State,
        decisions: Vec<Decision>,
        stranded: Vec<Task>,
    ) -> Vec<WorkerId> {
        let mut wake = Vec::new();
        for d in decisions {
            let w = d.member;
            st.lines.push(w, d.placed, d.est_s);
            if self.g.idle.take(w) {
                wake.push(WorkerId(w as u32));
            }
        }
        if !stranded.is_empty() {
            log::warn!(
                "{}: {} task(s) no worker of the context can run; held until one joins",
                self.name,
                stranded.len()
            );
            st.stranded.extend(stranded);
        }
        st.activating = false;
        wake.sort_unstable();
        wake.dedup();
        wake
    }

    /// `worker`'s next task from its line, or a steal; its expected end is
    /// updated.
    fn next_for(&self, st: &mut State, worker: WorkerId, now: f64) -> Option<Task> {
        let w = worker.index();
        let node = worker.memory_node();
        let p = st
            .lines
            .pop(w, |t| t.input_on_node(node))
            .or_else(|| st.lines.steal(w, now))?;
        // A stolen task runs for the thief's predicted time.
        let est = p.cost_s.get(w).copied().flatten().unwrap_or(p.est_s);
        st.lines.started(w, p.task.addr(), est, now);
        Some(p.task)
    }

    /// Brings the members in line with the context's (see
    /// [`SchedCtx::membership`]).
    fn sync_members(&self, ctx: SchedCtx) -> Vec<WorkerId> {
        let known: Vec<WorkerId> = relaxed_lock(&self.state)
            .members
            .iter()
            .map(|m| m.id)
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
        m.persisted.save(&m.book);
    }
}

impl SchedPolicy for DagPolicy {
    fn new(_ctx: SchedCtx, info: &'static PolicyInfo) -> Self {
        let tuning = crate::config::tuning_or_default(info.name());
        let method = info.dag().map_or(Method::Heft, |e| {
            (e.method)(tuning.dada_alpha, tuning.dada_eps)
        });
        let n = WorkerId::max_workers();
        DagPolicy {
            name: info.name(),
            method,
            state: Mutex::new(State {
                ready: VecDeque::new(),
                lines: Lines::new(n),
                members: Vec::new(),
                activating: false,
                stranded: Vec::new(),
                rotate: 0,
            }),
            models: Mutex::new(Models::default()),
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
                id,
                kind,
                node: id.memory_node(),
            })
            .collect();
        // The models file is read once, at the context's set-up, without any
        // lock held (never under a push, pop or post_exec).
        let file = (!relaxed_lock(&self.models).persisted.is_open()).then(|| {
            let mut file = Persisted::default();
            file.open();
            file
        });
        if let Some(file) = file {
            let mut models = relaxed_lock(&self.models);
            if !models.persisted.is_open() {
                models.persisted = file;
            }
        }
        let mut st = relaxed_lock(&self.state);
        for m in joined {
            if !st.members.iter().any(|x| x.id == m.id) {
                st.members.push(m);
            }
            // Joined workers start awake (they pop).
            self.g.idle.take(m.id.index());
        }
        let stranded = std::mem::take(&mut st.stranded);
        st.ready.extend(stranded);
        self.g.members.store(st.members.len(), Ordering::Release);
        self.g.queued.store(st.held(), Ordering::Release);
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) -> Vec<WorkerId> {
        let mut st = relaxed_lock(&self.state);
        st.members.retain(|m| !workers.contains(&m.id));
        for w in workers {
            // Their queued tasks are placed again by the next activation.
            let back: Vec<Task> = st
                .lines
                .take_line(w.index())
                .into_iter()
                .map(|p| p.task)
                .collect();
            st.ready.extend(back);
        }
        self.g.members.store(st.members.len(), Ordering::Release);
        self.g.queued.store(st.held(), Ordering::Release);
        // One idle worker places what the leavers held.
        self.g
            .idle
            .wake_one(st.members.iter().map(|m| m.id.index()), |_| true)
            .map(|w| WorkerId(w as u32))
            .into_iter()
            .collect()
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        let mut st = relaxed_lock(&self.state);
        let t0 = self.g.held.start();
        task.announce_pushed();
        st.ready.push_back(task);
        self.g.queued.store(st.held(), Ordering::Release);
        // One idle worker activates the batch (unless one is at it).
        let wake: Option<WorkerId> = if st.activating {
            None
        } else {
            self.g
                .idle
                .wake_one(st.members.iter().map(|m| m.id.index()), |_| true)
                .map(|w| WorkerId(w as u32))
        };
        self.g.held.stop(t0);
        drop(st);
        wake.into_iter().collect()
    }

    fn pop(&self, ctx: SchedCtx, worker: WorkerId) -> Popped {
        let w = worker.index();
        let mut wake = Vec::new();
        if ctx.worker_count() != self.g.members.load(Ordering::Acquire) {
            wake = self.sync_members(ctx);
        }
        if self.g.idle.is_idle(w)
            || (self.g.queued.load(Ordering::Acquire) == 0 && !drivers_block())
        {
            return Popped { task: None, wake };
        }
        let mut st = relaxed_lock(&self.state);
        let mut t0 = self.g.held.start();
        for _ in 0..ACTIVATIONS_PER_POP {
            let Some(batch) = self.take_batch(&mut st, now_s()) else {
                break;
            };
            self.g.held.stop(t0);
            drop(st);
            // A panic while placing must not leave `activating` set (no
            // batch would ever be placed again): the batch's tasks, dropped
            // by the unwinding, are rescued onto capable workers (`Task`'s
            // `Drop`), and the activation ends normally below.
            let placed = self
                .g
                .work
                .time(|| catch_unwind(AssertUnwindSafe(|| self.decide(batch))));
            let (decisions, stranded) = placed.unwrap_or_else(|_| {
                log::error!(
                    "{}: placing a batch panicked; its tasks went to capable workers directly",
                    self.name
                );
                (Vec::new(), Vec::new())
            });
            st = relaxed_lock(&self.state);
            t0 = self.g.held.start();
            wake.extend(self.install(&mut st, decisions, stranded));
        }
        let task = self.next_for(&mut st, worker, now_s());
        if task.is_none() {
            self.g.idle.fell_idle(w, true);
        }
        if !st.ready.is_empty() && !st.activating {
            // Tasks still waiting: an idle worker places them.
            let others = st.members.iter().map(|m| m.id.index());
            if let Some(m) = self.g.idle.wake_one(others, |m| m != w) {
                wake.push(WorkerId(m as u32));
            }
        }
        self.g.queued.store(st.held(), Ordering::Release);
        self.g.held.stop(t0);
        drop(st);
        wake.retain(|&x| x != worker);
        let Some(mut task) = task else {
            return Popped { task: None, wake };
        };
        if let Some(nimpl) = task.first_impl_on(worker) {
            task.set_implementation(nimpl);
        }
        Popped {
            task: Some(task),
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
        let now = now_s();
        let w = worker.index();
        relaxed_lock(&self.state)
            .lines
            .finished(w, task.addr(), now);
        let Some(secs) = ran_s.filter(|s| s.is_finite() && *s > 0.0) else {
            return Vec::new();
        };
        let (codelet, units) = (task.codelet_key(), task.work_units());
        if codelet == 0 {
            return Vec::new();
        }
        let due = {
            let mut models = relaxed_lock(&self.models);
            let job = models.book.record(w, codelet, units, secs);
            job.map(|j| (j, models.book.fit_config().clone()))
        };
        if let Some((job, cfg)) = due {
            let fitted = self.g.work.time(|| job.run(&cfg));
            relaxed_lock(&self.models).book.install(fitted);
        }
        Vec::new()
    }

    fn predicted_s(&self, task: TaskRef<'_>, worker: WorkerId) -> Option<f64> {
        let st = relaxed_lock(&self.state);
        let members = st.members.clone();
        drop(st);
        let m = members.iter().position(|m| m.id == worker)?;
        let models = relaxed_lock(&self.models);
        Self::predict(
            &models.book,
            &members,
            m,
            task.codelet_key(),
            task.work_units(),
        )
    }

    fn model_figures(&self) -> ModelFigures {
        ModelFigures {
            refits: relaxed_lock(&self.models).book.refits(),
            solve_s: self.g.work.seconds(),
            lock_held_s: self.g.held.held_s(),
        }
    }

    fn drain(&self) -> Vec<Task> {
        let mut st = relaxed_lock(&self.state);
        self.g.queued.store(0, Ordering::Release);
        let mut out: Vec<Task> = st.ready.drain(..).collect();
        out.extend(st.lines.drain());
        out.append(&mut st.stranded);
        out
    }
}
