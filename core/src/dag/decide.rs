//! Placing one batch of ready tasks (the task-graph policies' activation),
//! run without the scheduler's lock: what each task needs of the runtime
//! ([`GraphTask`]: which workers can run it, the transfer to each memory
//! node, where its written data lives), the predictions of our models
//! ([`GraphModels`], under the models' own lock), then HEFT or DADA
//! ([`super::place`]) and the training rule for kinds without a model.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::lines::Placed;
use super::offload::priced_speedup;
use super::{Affinity, DagTask, DagWorker, HELD, Method, PerTask, PerWorker, place};
use crate::balance::WorkerKind;
use crate::taskmode::placement::{Candidate, ModelBook, RefitJob, choose};

/// A task as the task-graph policies see it.
pub trait GraphTask {
    /// Identifies the task between its pop and its completion.
    fn id(&self) -> usize;
    /// Its codelet key (0: none).
    fn codelet(&self) -> usize;
    /// Its size in work units.
    fn units(&self) -> f64;
    /// Its priority (higher first).
    fn priority(&self) -> i32;
    /// The implementation worker `worker` would run, `None` if it cannot.
    fn implementation_on(&self, worker: usize) -> Option<u32>;
    /// Predicted seconds to bring its data to memory node `node`.
    fn transfer_to_node_s(&self, node: usize) -> Option<f64>;
    /// Adds, to each entry of `out` (one per entry of `nodes`, zeroed by
    /// the caller), the bytes of its written data already valid on that
    /// node.
    fn written_bytes_on(&self, nodes: &[usize], out: &mut [f64]);
    /// Whether all its input is already on memory node `node`.
    fn input_on_node(&self, node: usize) -> bool;
    /// The runtime's own calibrated prediction of its seconds on `worker`
    /// (StarPU's performance model), `None` when it has none; read only
    /// where our models have no prediction ([`GraphModels::costs`]).
    fn runtime_prediction_s(&self, _worker: usize) -> Option<f64> {
        None
    }
}

/// A worker of the context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member {
    /// Its worker id.
    pub id: usize,
    /// Its kind.
    pub kind: WorkerKind,
    /// Its memory node.
    pub node: usize,
}

/// A batch taken out of the ready list, with the workers' state it was
/// taken with.
pub struct Batch<T> {
    /// The tasks.
    pub tasks: PerTask<T>,
    /// The context's workers.
    pub members: Vec<Member>,
    /// Each member's expected end (seconds from now).
    pub loads: Vec<f64>,
    /// Each member's queued task count.
    pub queued: Vec<usize>,
    /// Each member's queued seconds per priority.
    pub by_priority: Vec<Vec<(i32, f64)>>,
    /// Whether each member's line holds a task placed with a predicted
    /// transfer to it ([`super::DagWorker::inbound`]).
    pub inbound: Vec<bool>,
    /// Rotation for ties among untrained workers.
    pub rotate: usize,
    /// Tasks submitted and not done, as the runtime counts them (those
    /// not ready yet included; at least the batch's): how much work is
    /// still to come, for the training rule ([`GraphModels::costs`]).
    pub outstanding: usize,
    /// Each task's upward rank ([`super::rank`]), when the caller walked
    /// the graph (empty otherwise: every slack is infinite).
    pub ranks: PerTask<f64>,
    /// Tasks each member's line may still take (empty: unbounded).
    pub room: Vec<usize>,
    /// The ids of the tasks completed since the previous batch was taken,
    /// when the scheduler lists them ([`super::graph::GraphSched::list_completed`];
    /// `None`: more than [`super::rank::RANKS_CAP`], too many to list).
    pub completed: Option<Vec<usize>>,
}

/// The runtime's view of one task: whether each member can run it, the
/// predicted transfer to each member, and its data affinity.
pub struct Facts {
    capable: PerWorker<bool>,
    transfer: Vec<f64>,
    affinity: Option<Affinity>,
    /// The runtime's predictions per member, when asked for
    /// ([`GraphModels::wants_runtime_predictions`]; empty otherwise).
    runtime: Vec<Option<f64>>,
}

/// One placement decided off the lock.
pub struct Decision<T> {
    /// The task with its per-worker predictions (indexed by worker id).
    pub placed: Placed<T>,
    /// The worker id whose line it goes to.
    pub worker: usize,
    /// Predicted seconds there.
    pub est_s: f64,
    /// Its slack when placed ([`super::DagTask::slack_s`]; infinite when
    /// it has none).
    pub slack_s: f64,
}

/// A placed batch: its decisions, the tasks no member can run, and the
/// tasks held back until a kind's first sample arrives.
pub struct Decided<T> {
    /// The placements.
    pub decisions: PerTask<Decision<T>>,
    /// Tasks no member of the batch can run.
    pub stranded: Vec<T>,
    /// Tasks a kind being trained could run, not placed because every
    /// worker with a prediction has tasks queued and would make them wait
    /// longer than they run (see [`decide`]).
    pub deferred: Vec<T>,
    /// Tasks whose best worker's line has no room (in batch order): they
    /// wait for room ([`super::graph`]).
    pub held: Vec<T>,
    /// Decisions HEFT's CPU offload sent to a CPU worker
    /// ([`super::offload`]).
    pub offloaded: usize,
    /// The worker kinds (as in [`WorkerKind::ALL`]) with a member able to
    /// run some task of the batch.
    pub capable_kinds: [bool; WorkerKind::ALL.len()],
    /// The batch's per-member lists, for the next batch to refill.
    pub spare: Spare,
}

/// A placed batch's per-member lists, handed back for the next batch to
/// refill (cleared first): a batch then allocates none of them once they
/// have grown to the context's size.
#[derive(Debug, Default)]
pub struct Spare {
    /// [`Batch::members`].
    pub members: Vec<Member>,
    /// [`Batch::loads`].
    pub loads: Vec<f64>,
    /// [`Batch::queued`].
    pub queued: Vec<usize>,
    /// [`Batch::by_priority`] (its entries' lists moved out).
    pub by_priority: Vec<Vec<(i32, f64)>>,
    /// [`Batch::inbound`].
    pub inbound: Vec<bool>,
    /// [`Batch::room`].
    pub room: Vec<usize>,
    /// [`Batch::completed`]'s list (empty when it had none).
    pub completed: Vec<usize>,
}

impl Spare {
    /// Empties every list (their capacity kept).
    pub fn clear(&mut self) {
        self.members.clear();
        self.loads.clear();
        self.queued.clear();
        self.by_priority.clear();
        self.inbound.clear();
        self.room.clear();
        self.completed.clear();
    }
}

impl<T> Decided<T> {
    /// Nothing placed (a placement that failed hands this back).
    pub fn nothing() -> Decided<T> {
        Decided {
            decisions: PerTask::new(),
            stranded: Vec::new(),
            deferred: Vec::new(),
            held: Vec::new(),
            offloaded: 0,
            capable_kinds: [false; WorkerKind::ALL.len()],
            spare: Spare::default(),
        }
    }
}

impl<T: GraphTask> Batch<T> {
    /// Asks the runtime about every task (no lock needed: the tasks are the
    /// batch's alone).
    pub fn facts(&self) -> PerTask<Facts> {
        self.facts_with(&[])
    }

    /// [`Batch::facts`], with the runtime's own predictions for the tasks
    /// and members `asked` marks (indexed like the batch, then like its
    /// members; missing: not asked).
    pub fn facts_with(&self, asked: &[Vec<bool>]) -> PerTask<Facts> {
        let nodes: PerWorker<usize> = self.members.iter().map(|m| m.node).collect();
        let mut distinct = nodes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut per_node: PerWorker<f64> = smallvec::smallvec![0.0; distinct.len()];
        let mut written: PerWorker<f64> = smallvec::smallvec![0.0; distinct.len()];
        self.tasks
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let capable: PerWorker<bool> = self
                    .members
                    .iter()
                    .map(|m| t.implementation_on(m.id).is_some())
                    .collect();
                let runtime = match asked.get(k) {
                    Some(want) if want.iter().any(|&w| w) => self
                        .members
                        .iter()
                        .zip(&capable)
                        .zip(want)
                        .map(|((m, &c), &w)| {
                            (c && w).then(|| t.runtime_prediction_s(m.id)).flatten()
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                for (p, &n) in per_node.iter_mut().zip(&distinct) {
                    *p = t.transfer_to_node_s(n).unwrap_or(0.0);
                }
                let transfer = nodes
                    .iter()
                    .map(|n| per_node[distinct.binary_search(n).unwrap_or(0)])
                    .collect();
                written.fill(0.0);
                t.written_bytes_on(&distinct, &mut written);
                let affinity = written
                    .iter()
                    .zip(&distinct)
                    .filter(|(b, _)| **b > 0.0)
                    .max_by(|a, b| a.0.total_cmp(b.0))
                    .map(|(&bytes, &node)| Affinity { node, bytes });
                Facts {
                    capable,
                    transfer,
                    affinity,
                    runtime,
                }
            })
            .collect()
    }
}

/// Our models for the task-graph policies, and the (kind, codelet) pairs a
/// training task was sent for.
#[derive(Debug, Default)]
pub struct GraphModels {
    /// The fitted models per (worker, codelet).
    pub book: ModelBook,
    training: HashSet<(WorkerKind, usize)>,
    /// (kind, codelet) pairs the runtime had no prediction for when asked:
    /// not asked again (at most [`KIND_SPEED_CAP`]).
    runtime_read: HashSet<(WorkerKind, usize)>,
    /// The lowest priority of any task placed so far: a task above it is
    /// urgent, and a kind is not trained on it when another kind knows or
    /// is learning its codelet (see [`GraphModels::costs`]).
    lowest_priority: Option<i32>,
    /// Mean measured seconds per unit of each (kind, codelet): how much
    /// slower one kind is than another on the codelets both ran.
    kind_speed: HashMap<(WorkerKind, usize), (f64, u32)>,
    /// Sum and count of the tasks' areas: each task's time if every
    /// member with a prediction shared it (1 / sum of 1 / cost).
    area: (f64, u64),
    /// Each codelet's speedup (best CPU over best accelerator prediction)
    /// when a task of it was last priced (at most [`KIND_SPEED_CAP`]
    /// codelets): the latest, so that a passing misprediction (a GPU
    /// model fitted on its first samples) does not stay.
    speedups: HashMap<usize, f64>,
    /// Whether HEFT's CPU offload is off (`PLB_CPU_OFFLOAD=off`).
    cpu_offload_off: bool,
}

/// A kind this many times slower than another on every codelet both ran
/// is not trained on further codelets: on a CPU core against an H200
/// (GEMM, SYRK, TRSM 400 to 4000 times slower, measured) one such task
/// would hold the critical path for seconds; on the sampled machines
/// (attila, idgraf: TRSM 7 times slower) the CPUs are trained and take the
/// factorisations they run faster (idgraf's POTRF).
pub const HOPELESS_RATIO: f64 = 50.0;

/// Tasks no kind has a prediction for, while one kind's sample is out, go
/// to that kind's workers up to this many queued each; the others wait.
const LEARNING_QUEUE: usize = 2;

/// At most this many (kind, codelet) speeds are kept.
const KIND_SPEED_CAP: usize = 1024;

/// What the models say of a batch: each task's predicted seconds per
/// member, the member that trains a kind with no model yet, and whether a
/// kind that could run it has no prediction and its training sample is
/// still out.
pub struct Costs {
    cost: PerTask<Vec<Option<f64>>>,
    train: PerTask<Option<usize>>,
    awaiting: PerTask<bool>,
    /// For a task with no prediction anywhere: the kind whose training
    /// sample of its codelet is out, which the fallback rule keeps it to.
    learning: PerTask<Option<WorkerKind>>,
    /// The mean area of the tasks priced so far ([`GraphModels::area`]).
    pub mean_area_s: f64,
    /// The highest of the codelets' latest speedups, for HEFT's CPU
    /// offload ([`super::offload`]); `None` when it is off or nothing is
    /// known.
    pub most_accelerated: Option<f64>,
}

impl GraphModels {
    /// Turns HEFT's CPU offload ([`super::offload`]) on (the default) or
    /// off.
    pub fn set_cpu_offload(&mut self, on: bool) {
        self.cpu_offload_off = !on;
    }

    /// Records a measured run of `codelet` on `worker` (of `kind`); returns the refit
    /// when one is due, and whether this was the worker's first sample of
    /// the codelet (a prediction that did not exist now does: tasks held
    /// back for it can be placed).
    pub fn record(
        &mut self,
        worker: usize,
        kind: WorkerKind,
        codelet: usize,
        units: f64,
        secs: f64,
    ) -> (Option<RefitJob>, bool) {
        let first = !self.book.has_samples(worker, codelet);
        self.record_kind(kind, codelet, units, secs);
        (self.book.record(worker, codelet, units, secs), first)
    }

    /// Records a run's speed for its worker's kind (what
    /// [`GraphModels::slowdown`] compares): from [`GraphModels::record`],
    /// and for the samples of a models file when it is read (`codelet`
    /// then any key that names the codelet the same way for every kind).
    pub fn record_kind(&mut self, kind: WorkerKind, codelet: usize, units: f64, secs: f64) {
        if !(units > 0.0 && secs.is_finite() && secs >= 0.0) {
            return;
        }
        let full = self.kind_speed.len() >= KIND_SPEED_CAP;
        if full && !self.kind_speed.contains_key(&(kind, codelet)) {
            return;
        }
        let e = self.kind_speed.entry((kind, codelet)).or_insert((0.0, 0));
        e.0 += secs / units;
        e.1 += 1;
    }

    /// How many times slower `kind` is than the fastest other kind, on the
    /// codelet where it does best among those both measured; `None` when
    /// no codelet was measured on `kind` and another kind.
    pub fn slowdown(&self, kind: WorkerKind) -> Option<f64> {
        slowdown_in(&self.kind_speed, kind)
    }

    /// The mean area of the tasks priced so far (0 before any).
    pub fn mean_area_s(&self) -> f64 {
        if self.area.1 == 0 {
            0.0
        } else {
            self.area.0 / self.area.1 as f64
        }
    }

    /// The cheapest prediction of `units` of `codelet` over `members`.
    pub fn best_prediction(&self, members: &[Member], codelet: usize, units: f64) -> Option<f64> {
        (0..members.len())
            .filter_map(|m| self.predict(members, m, codelet, units))
            .min_by(f64::total_cmp)
    }

    /// Our prediction of `units` of `codelet` on member `m`: its own model,
    /// else a worker of the same kind's (one sample is enough: tiles of a
    /// task graph mostly share one size).
    pub fn predict(&self, members: &[Member], m: usize, codelet: usize, units: f64) -> Option<f64> {
        let own = members[m].id;
        self.book.prediction(own, codelet, units).or_else(|| {
            members
                .iter()
                .filter(|p| p.kind == members[m].kind && p.id != own)
                .find_map(|p| self.book.prediction(p.id, codelet, units))
        })
    }

    /// For each task of `batch`, the members to read the runtime's own
    /// prediction from: those with no prediction of ours for the task,
    /// unless the runtime was already found without one for their kind and
    /// the task's codelet; none when the batch's members are of one kind.
    pub fn wants_runtime_predictions<T: GraphTask>(&self, batch: &Batch<T>) -> PerTask<Vec<bool>> {
        let members = &batch.members;
        if members.iter().all(|m| m.kind == members[0].kind) {
            return smallvec::smallvec![Vec::new(); batch.tasks.len()];
        }
        batch
            .tasks
            .iter()
            .map(|t| {
                let c = t.codelet();
                (0..members.len())
                    .map(|m| {
                        !self.runtime_read.contains(&(members[m].kind, c))
                            && self.predict(members, m, c, t.units()).is_none()
                    })
                    .collect()
            })
            .collect()
    }

    /// The predictions for `batch` (cheap: no fit): ours, else the
    /// runtime's calibrated one where it was read (`facts`, see
    /// [`GraphModels::wants_runtime_predictions`]). Where neither exists,
    /// the first task of a kind with no prediction trains it, on that
    /// kind's least-loaded worker; later ones go where predictions exist
    /// until its sample arrives. Which kind and which task train, so that
    /// learning costs the critical path little (a CPU can be a hundred
    /// times slower than a GPU on a tile):
    /// - a codelet nobody knows trains an accelerator first (CUDA, OpenCL);
    /// - once a kind knows a codelet or its sample is out, another kind is
    ///   trained on it only if it is at most [`HOPELESS_RATIO`] times
    ///   slower on some codelet both ran; while that is not known yet,
    ///   only on a task of the lowest priority seen so far, never on an
    ///   urgent one (a panel factorisation, say), and only when the work
    ///   ahead would keep the known kinds busy that many times its length.
    ///   A task not used for training goes where predictions exist, or
    ///   waits with the kind being trained.
    pub fn costs<T: GraphTask>(&mut self, batch: &Batch<T>, facts: &[Facts]) -> Costs {
        let members = &batch.members;
        let n = batch.tasks.len();
        let mut train: PerTask<Option<usize>> = smallvec::smallvec![None; n];
        let mut awaiting: PerTask<bool> = smallvec::smallvec![false; n];
        let mut learning: PerTask<Option<WorkerKind>> = smallvec::smallvec![None; n];
        let lowest = batch
            .tasks
            .iter()
            .map(GraphTask::priority)
            .chain(self.lowest_priority)
            .min();
        self.lowest_priority = lowest;
        // Each kind's slowdown, at most once per batch and only when a kind
        // of unknown speed asks for it (it scans every kind's speeds).
        let slowdowns: [std::cell::OnceCell<Option<f64>>; WorkerKind::ALL.len()] =
            Default::default();
        let kind_speed = &self.kind_speed;
        let slowdown = |kind: WorkerKind| {
            *slowdowns[kind.index()].get_or_init(|| slowdown_in(kind_speed, kind))
        };
        // Our predictions (`None` where a member cannot run the task).
        let ours: PerTask<Vec<Option<f64>>> = batch
            .tasks
            .iter()
            .zip(facts)
            .map(|(t, f)| {
                (0..members.len())
                    .map(|m| {
                        f.capable[m].then_some(())?;
                        self.predict(members, m, t.codelet(), t.units())
                    })
                    .collect()
            })
            .collect();
        // A kind the runtime was asked about for a task (its capable
        // members have no prediction of ours) and had no prediction for is
        // not asked about again for that codelet.
        for ((t, f), ours) in batch.tasks.iter().zip(facts).zip(&ours) {
            if f.runtime.is_empty() {
                continue;
            }
            for kind in WorkerKind::ALL {
                let mut asked = (0..members.len())
                    .filter(|&m| members[m].kind == kind && f.capable[m])
                    .filter(|&m| ours[m].is_none())
                    .peekable();
                let unanswered = asked.peek().is_some()
                    && asked.all(|m| f.runtime.get(m).copied().flatten().is_none());
                if unanswered && self.runtime_read.len() < KIND_SPEED_CAP {
                    self.runtime_read.insert((kind, t.codelet()));
                }
            }
        }
        // A member without a prediction of ours takes the runtime's, where
        // it was read.
        let mut cost = ours;
        for (c, f) in cost.iter_mut().zip(facts) {
            for (m, c) in c.iter_mut().enumerate() {
                *c = c.or_else(|| f.runtime.get(m).copied().flatten());
            }
        }
        for (t, c) in batch.tasks.iter().zip(&cost) {
            let rate: f64 = c
                .iter()
                .flatten()
                .filter(|&&x| x > 0.0)
                .map(|x| 1.0 / x)
                .sum();
            if rate > 0.0 && rate.is_finite() {
                self.area.0 += 1.0 / rate;
                self.area.1 += 1;
            }
            if let Some(s) = priced_speedup(c, |m| members[m].kind != WorkerKind::Cpu) {
                let known = self.speedups.contains_key(&t.codelet());
                if known || self.speedups.len() < KIND_SPEED_CAP {
                    self.speedups.insert(t.codelet(), s);
                }
            }
        }
        let busy_s = known_busy_s(&cost, &batch.loads, batch.outstanding);
        for (k, (t, f)) in batch.tasks.iter().zip(facts).enumerate() {
            let codelet = t.codelet();
            let cost = &cost[k];
            let capable = |m: &usize| f.capable[*m];
            // The kind whose sample of this codelet is out, if any.
            let sample_out = (0..members.len())
                .filter(capable)
                .filter(|&m| cost[m].is_none())
                .map(|m| members[m].kind)
                .filter(|&kind| self.training.contains(&(kind, codelet)))
                .min_by_key(|&kind| kind == WorkerKind::Cpu);
            let known = cost.iter().any(Option::is_some) || sample_out.is_some();
            let urgent = lowest.is_some_and(|low| t.priority() > low);
            // A kind of unknown speed may be HOPELESS_RATIO times slower
            // than the known one: its first task would then hold the end of
            // the run unless the known workers stay busy that long with the
            // work ahead (the batch and the tasks still to come).
            let affordable = cost
                .iter()
                .flatten()
                .copied()
                .min_by(f64::total_cmp)
                .is_some_and(|c| HOPELESS_RATIO * c <= busy_s);
            let untrained = (0..members.len())
                .filter(capable)
                .filter(|&m| {
                    cost[m].is_none() && !self.training.contains(&(members[m].kind, codelet))
                })
                .map(|m| members[m].kind)
                .min_by_key(|&kind| kind == WorkerKind::Cpu)
                .filter(|&kind| {
                    !known
                        || match slowdown(kind) {
                            Some(r) => r <= HOPELESS_RATIO,
                            None => !urgent && affordable,
                        }
                });
            if cost.iter().all(Option::is_none) && untrained.is_none() {
                learning[k] = sample_out;
            }
            if let Some(kind) = untrained {
                self.training.insert((kind, codelet));
                train[k] = (0..members.len())
                    .filter(|&m| members[m].kind == kind && f.capable[m])
                    .min_by(|&a, &b| {
                        batch.loads[a]
                            .total_cmp(&batch.loads[b])
                            .then(batch.queued[a].cmp(&batch.queued[b]))
                    });
            }
            // A capable kind with no prediction whose training task is
            // out (not this one).
            awaiting[k] = (0..members.len()).any(|m| {
                let kind = members[m].kind;
                f.capable[m]
                    && cost[m].is_none()
                    && train[k].is_none_or(|t| members[t].kind != kind)
                    && self.training.contains(&(kind, codelet))
            });
        }
        Costs {
            cost,
            train,
            awaiting,
            learning,
            mean_area_s: self.mean_area_s(),
            most_accelerated: if self.cpu_offload_off {
                None
            } else {
                self.speedups.values().copied().max_by(f64::total_cmp)
            },
        }
    }
}

/// [`GraphModels::slowdown`] over the kinds' mean speeds per codelet.
fn slowdown_in(
    kind_speed: &HashMap<(WorkerKind, usize), (f64, u32)>,
    kind: WorkerKind,
) -> Option<f64> {
    let mean = |k: WorkerKind, c: usize| {
        kind_speed
            .get(&(k, c))
            .filter(|e| e.1 > 0)
            .map(|e| e.0 / f64::from(e.1))
    };
    kind_speed
        .keys()
        .filter(|(k, _)| *k == kind)
        .filter_map(|&(_, c)| {
            let own = mean(kind, c)?;
            let best_other = kind_speed
                .keys()
                .filter(|(k, c2)| *k != kind && *c2 == c)
                .filter_map(|&(k, _)| mean(k, c))
                .min_by(f64::total_cmp)?;
            (best_other > 0.0).then(|| own / best_other)
        })
        .min_by(f64::total_cmp)
}

/// How long the members with a prediction for some task of the batch
/// would stay busy if they ran all the work ahead: their expected ends,
/// each task's smallest prediction, and the `outstanding` tasks not in the
/// batch (submitted, not ready yet) at the batch's mean prediction, spread
/// over them (seconds from now; 0 when no member has a prediction).
fn known_busy_s(cost: &[Vec<Option<f64>>], loads: &[f64], outstanding: usize) -> f64 {
    let known = |m: &usize| cost.iter().any(|c| c.get(*m).is_some_and(Option::is_some));
    let known_n = (0..loads.len()).filter(known).count();
    if known_n == 0 {
        return 0.0;
    }
    let backlog: f64 = (0..loads.len())
        .filter(known)
        .map(|m| loads[m].max(0.0))
        .sum();
    let best = || {
        cost.iter()
            .filter_map(|c| c.iter().flatten().copied().min_by(f64::total_cmp))
    };
    let work: f64 = best().sum();
    let to_come = outstanding.saturating_sub(cost.len()) as f64 * work / best().count() as f64;
    (backlog + work + to_come) / known_n as f64
}

/// Places `batch` by `method` (no lock, no model access): tasks being
/// trained and tasks with no prediction anywhere by the fallback rule
/// (earliest predicted finish, round robin among unknowns), the others by
/// HEFT or DADA. A task that a kind still being trained could run (its
/// first sample not in) goes to the earliest finish among the workers with
/// a prediction only if that worker has nothing queued or would start it
/// there within its own length; otherwise it is deferred, to be placed when the sample arrives or a
/// worker runs dry (placing it now would commit it to the trained kind
/// alone: on independent tasks that starved every CPU worker while the
/// GPUs' lines filled). With the batch's ranks, each task's slack
/// ([`DagTask::slack_s`]) is the outstanding tasks times the mean area
/// ([`GraphModels::mean_area_s`]) less its rank. Predictions in the
/// decisions are indexed by worker id.
pub fn decide<T: GraphTask>(
    method: Method,
    batch: Batch<T>,
    facts: PerTask<Facts>,
    costs: Costs,
) -> Decided<T> {
    let Batch {
        tasks,
        members,
        mut loads,
        mut queued,
        mut by_priority,
        inbound,
        rotate,
        outstanding,
        ranks,
        room,
        completed,
    } = batch;
    let mut capable_kinds = [false; WorkerKind::ALL.len()];
    for f in &facts {
        for (m, c) in members.iter().zip(&f.capable) {
            capable_kinds[m.kind.index()] |= *c;
        }
    }
    // What is left to run, spread over every member: the outstanding
    // tasks at the mean area. A task's slack is that less its rank.
    let area_s = outstanding as f64 * costs.mean_area_s;
    let mut decisions: PerTask<(Placed<T>, usize, f64, f64)> = PerTask::new();
    let mut stranded = Vec::new();
    let mut deferred = Vec::new();
    let mut graph_tasks: PerTask<DagTask> = PerTask::new();
    let mut graph_meta: PerTask<T> = PerTask::new();
    for (k, ((task, f), cost)) in tasks.into_iter().zip(facts).zip(costs.cost).enumerate() {
        if !f.capable.iter().any(|&c| c) {
            stranded.push(task);
            continue;
        }
        let trainee = costs.train[k];
        let unknown = cost.iter().all(Option::is_none);
        if trainee.is_some() || unknown {
            // Kept to the kind learning its codelet, when one is, and only
            // a few queued per worker of it: the rest wait for the first
            // sample (of any kind) and are then placed by the predictions.
            let learning = costs.learning[k].filter(|_| trainee.is_none());
            if let Some(kind) = learning {
                let full = (0..members.len())
                    .filter(|&m| f.capable[m] && members[m].kind == kind)
                    .all(|m| queued[m] >= LEARNING_QUEUE);
                if full {
                    deferred.push(task);
                    continue;
                }
            }
            // Training, or no prediction anywhere yet (every kind is being
            // trained): the fallback queues' rule.
            let m = trainee.unwrap_or_else(|| {
                let idx: PerWorker<usize> = (0..members.len())
                    .filter(|&m| f.capable[m])
                    .filter(|&m| learning.is_none_or(|kind| members[m].kind == kind))
                    .collect();
                let cands: PerWorker<Candidate> = idx
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
            decisions.push((
                Placed::new(task, prio, cost, f.transfer),
                m,
                est,
                f64::INFINITY,
            ));
            continue;
        }
        if costs.awaiting[k] {
            let best = (0..members.len())
                .filter_map(|m| cost[m].map(|c| (m, c)))
                .min_by(|a, b| (loads[a.0] + a.1).total_cmp(&(loads[b.0] + b.1)));
            match best {
                // Its best worker has nothing queued (it may be asking
                // now: work is never held back from an idle worker), or
                // would start it within its length.
                Some((m, c)) if queued[m] == 0 || loads[m] <= c => {
                    loads[m] += c;
                    queued[m] += 1;
                    let prio = task.priority();
                    decisions.push((
                        Placed::new(task, prio, cost, f.transfer),
                        m,
                        c,
                        f64::INFINITY,
                    ));
                }
                _ => deferred.push(task),
            }
            continue;
        }
        graph_tasks.push(DagTask {
            cost_s: cost,
            transfer_s: f.transfer,
            affinity: f.affinity,
            priority: task.priority(),
            slack_s: match ranks.get(k) {
                Some(&r) => area_s - r,
                None => f64::INFINITY,
            },
        });
        graph_meta.push(task);
    }
    let workers: PerWorker<DagWorker> = members
        .iter()
        .zip(&loads)
        .zip(by_priority.iter_mut())
        .zip(&inbound)
        .enumerate()
        .map(
            |(i, (((m, &load_s), queued_by_priority), &inbound))| DagWorker {
                kind: m.kind,
                node: m.node,
                load_s,
                queued_by_priority: std::mem::take(queued_by_priority),
                inbound,
                room: room.get(i).copied().unwrap_or(usize::MAX),
            },
        )
        .collect();
    let placement = place(method, &graph_tasks, &workers, costs.most_accelerated);
    let mut held = Vec::new();
    for ((task, info), m) in graph_meta.into_iter().zip(graph_tasks).zip(placement.at) {
        if m == HELD {
            held.push(task);
            continue;
        }
        // Every task passed has a capable member with a prediction.
        let m = if m < members.len() {
            m
        } else {
            (0..members.len())
                .find(|&x| info.cost_s[x].is_some())
                .unwrap_or(0)
        };
        let est = info.cost_s[m].unwrap_or(0.0);
        log::trace!(
            "task {} prio {} -> worker {} (est {est:.4}); costs {:?}; transfers {:?}",
            task.id(),
            info.priority,
            members[m].id,
            info.cost_s,
            info.transfer_s
        );
        decisions.push((
            Placed::new(task, info.priority, info.cost_s, info.transfer_s),
            m,
            est,
            info.slack_s,
        ));
    }
    // Decisions refer to the batch's members; the lines index workers by
    // id (the steal rule reads the thief's entries).
    let width = members.iter().map(|m| m.id + 1).max().unwrap_or(0);
    // Members numbered 0, 1, … in order: the predictions are indexed by
    // id already.
    let by_id = members.iter().enumerate().all(|(i, m)| m.id == i);
    let decisions = decisions
        .into_iter()
        .map(|(mut placed, m, est_s, slack_s)| {
            if !(by_id && placed.cost_s.len() == width && placed.transfer_s.len() == width) {
                let mut cost = vec![None; width];
                let mut transfer = vec![0.0; width];
                for (i, member) in members.iter().enumerate() {
                    cost[member.id] = placed.cost_s.get(i).copied().flatten();
                    transfer[member.id] = placed.transfer_s.get(i).copied().unwrap_or(0.0);
                }
                placed.cost_s = cost;
                placed.transfer_s = transfer;
            }
            Decision {
                placed,
                worker: members[m].id,
                est_s,
                slack_s,
            }
        })
        .collect();
    Decided {
        decisions,
        stranded,
        deferred,
        held,
        offloaded: placement.offloaded,
        capable_kinds,
        spare: Spare {
            members,
            loads,
            queued,
            by_priority,
            inbound,
            room,
            completed: completed.unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::testutil::Tile;

    /// Worker 0 a CPU, worker 1 a GPU.
    fn batch(tiles: &[(usize, i32)]) -> Batch<Tile> {
        let member = |id, kind| Member { id, kind, node: 0 };
        Batch {
            tasks: tiles
                .iter()
                .map(|&(codelet, priority)| Tile {
                    id: 0,
                    codelet,
                    priority,
                })
                .collect(),
            members: vec![member(0, WorkerKind::Cpu), member(1, WorkerKind::Cuda)],
            loads: vec![0.0; 2],
            queued: vec![0; 2],
            by_priority: vec![Vec::new(); 2],
            inbound: vec![false; 2],
            rotate: 0,
            outstanding: 0,
            ranks: PerTask::new(),
            room: Vec::new(),
            completed: Some(Vec::new()),
        }
    }

    /// Which kind each task of `tiles` trains (`None`: none).
    fn trains(models: &mut GraphModels, tiles: &[(usize, i32)]) -> Vec<Option<WorkerKind>> {
        trains_in(models, &batch(tiles))
    }

    /// Which kind each task of batch `b` trains, the runtime's predictions
    /// read where the models ask for them.
    fn trains_in<T: GraphTask>(models: &mut GraphModels, b: &Batch<T>) -> Vec<Option<WorkerKind>> {
        let asked = models.wants_runtime_predictions(b);
        let facts = b.facts_with(&asked);
        let costs = models.costs(b, &facts);
        costs
            .train
            .iter()
            .map(|t| t.map(|m| b.members[m].kind))
            .collect()
    }

    #[test]
    fn a_task_whose_chain_outlasts_the_remaining_work_overtakes_the_queue() {
        // Codelet 1: 5 s on the CPU, 1 s on the GPU, whose line holds 10 s
        // of priority-0 work; the batch's one task has priority 1.
        let mut m = GraphModels::default();
        m.book.record_now(0, 1, 1.0, 5.0);
        m.book.record_now(1, 1, 1.0, 1.0);
        let mut worker_of = |ranks: Vec<f64>, outstanding: usize| {
            let b = Batch {
                loads: vec![0.0, 10.0],
                by_priority: vec![Vec::new(), vec![(0, 10.0)]],
                outstanding,
                ranks: ranks.into(),
                ..batch(&[(1, 1)])
            };
            let facts = b.facts();
            let costs = m.costs(&b, &facts);
            let d = decide(Method::Heft, b, facts, costs);
            d.decisions[0].worker
        };
        // No ranks: the whole backlog counts, the CPU finishes first.
        assert_eq!(worker_of(Vec::new(), 1), 0);
        // A chain of 100 s below it, against 1 outstanding task of area
        // 1/(1/5 + 1/1) s: critical, it overtakes the GPU's queue.
        assert_eq!(worker_of(vec![100.0], 1), 1);
        // With 1000 tasks still to run (833 s of area) the same chain
        // leaves slack: the CPU again.
        assert_eq!(worker_of(vec![100.0], 1000), 0);
    }

    #[test]
    fn the_offload_sees_each_codelets_latest_speedup() {
        // Codelet 1 (GEMM-like): 30 s on the CPU, 1 s on the GPU; codelet 2
        // (POTRF-like): 2 s and 1 s.
        let mut m = GraphModels::default();
        m.book.record_now(0, 1, 1.0, 30.0);
        m.book.record_now(1, 1, 1.0, 1.0);
        m.book.record_now(0, 2, 1.0, 2.0);
        m.book.record_now(1, 2, 1.0, 1.0);
        let most = |m: &mut GraphModels, tiles: &[(usize, i32)]| {
            let b = batch(tiles);
            let facts = b.facts();
            m.costs(&b, &facts).most_accelerated
        };
        assert_eq!(most(&mut m, &[]), None, "nothing priced yet");
        assert_eq!(most(&mut m, &[(2, 0)]), Some(2.0));
        assert_eq!(most(&mut m, &[(1, 0), (2, 0)]), Some(30.0));
        // Codelet 1's GPU model changes (5 s there now): its latest
        // speedup, 6, replaces 30.
        for _ in 0..50 {
            m.book.record_now(1, 1, 1.0, 5.0);
        }
        let gpu = m.book.prediction(1, 1, 1.0).unwrap();
        assert!((gpu - 5.0).abs() < 0.5, "GPU prediction {gpu}");
        let now = most(&mut m, &[(1, 0)]).unwrap();
        assert!((now - 30.0 / gpu).abs() < 1e-9, "{now}");
        // Off: none.
        m.set_cpu_offload(false);
        assert_eq!(most(&mut m, &[(1, 0)]), None);
    }

    #[test]
    fn slowdown_is_the_kinds_best_ratio_over_codelets_both_ran() {
        let mut m = GraphModels::default();
        assert_eq!(m.slowdown(WorkerKind::Cpu), None);
        m.record(0, WorkerKind::Cpu, 1, 2.0, 2.0);
        assert_eq!(
            m.slowdown(WorkerKind::Cpu),
            None,
            "no other kind ran codelet 1"
        );
        m.record(1, WorkerKind::Cuda, 1, 2.0, 0.02);
        m.record(0, WorkerKind::Cpu, 2, 1.0, 0.5);
        m.record(1, WorkerKind::Cuda, 2, 1.0, 0.1);
        // Codelet 1: 100 times slower; codelet 2: 5 times.
        assert!((m.slowdown(WorkerKind::Cpu).unwrap() - 5.0).abs() < 1e-9);
        assert!((m.slowdown(WorkerKind::Cuda).unwrap() - 0.01).abs() < 1e-9);
        // Nonsense samples are ignored.
        m.record(0, WorkerKind::Cpu, 3, 0.0, 1.0);
        m.record(1, WorkerKind::Cuda, 3, 1.0, f64::NAN);
        assert!((m.slowdown(WorkerKind::Cpu).unwrap() - 5.0).abs() < 1e-9);
    }

    #[test]
    fn a_codelet_nobody_knows_trains_the_accelerator_first() {
        let mut m = GraphModels::default();
        assert_eq!(trains(&mut m, &[(1, 5)]), vec![Some(WorkerKind::Cuda)]);
    }

    #[test]
    fn a_kind_of_unknown_speed_trains_on_a_non_urgent_task_when_the_known_kind_stays_busy() {
        let mut m = GraphModels::default();
        // Codelet 1 is known on the GPU (0.01 s a task); the CPU's speed
        // is not known: it may be HOPELESS_RATIO times slower (0.5 s).
        m.book.record_now(1, 1, 1.0, 0.01);
        // The GPU would be done with the batch in 0.03 s: a CPU task
        // could end the run late, so none trains it.
        let tiles = [(1, 9), (1, 0), (1, 0)];
        assert_eq!(trains(&mut m, &tiles), vec![None, None, None]);
        // With 1 s of work queued on the GPU: an urgent task (priority 9
        // above the lowest seen, 0) does not train the CPU; the least
        // urgent one does, once.
        let b = Batch {
            loads: vec![0.0, 1.0],
            ..batch(&tiles)
        };
        let once = vec![None, Some(WorkerKind::Cpu), None];
        assert_eq!(trains_in(&mut m, &b), once);
        // The same with an idle GPU but 97 more tasks submitted, not ready
        // yet (0.97 s more at the batch's mean prediction).
        let mut m = GraphModels::default();
        m.book.record_now(1, 1, 1.0, 0.01);
        let b = Batch {
            outstanding: 100,
            ..batch(&tiles)
        };
        assert_eq!(trains_in(&mut m, &b), once);
    }

    /// A tile with the runtime's predictions per worker id.
    struct Predicted(Tile, Vec<Option<f64>>);

    impl GraphTask for Predicted {
        fn id(&self) -> usize {
            self.0.id()
        }
        fn codelet(&self) -> usize {
            self.0.codelet()
        }
        fn units(&self) -> f64 {
            self.0.units()
        }
        fn priority(&self) -> i32 {
            self.0.priority()
        }
        fn implementation_on(&self, worker: usize) -> Option<u32> {
            self.0.implementation_on(worker)
        }
        fn transfer_to_node_s(&self, node: usize) -> Option<f64> {
            self.0.transfer_to_node_s(node)
        }
        fn written_bytes_on(&self, nodes: &[usize], out: &mut [f64]) {
            self.0.written_bytes_on(nodes, out)
        }
        fn input_on_node(&self, node: usize) -> bool {
            self.0.input_on_node(node)
        }
        fn runtime_prediction_s(&self, worker: usize) -> Option<f64> {
            self.1.get(worker).copied().flatten()
        }
    }

    /// `batch(tiles)` whose tasks carry the runtime's predictions `runtime`
    /// (CPU, GPU).
    fn predicted(tiles: &[(usize, i32)], runtime: [Option<f64>; 2]) -> Batch<Predicted> {
        let b = batch(tiles);
        Batch {
            tasks: b
                .tasks
                .into_iter()
                .map(|t| Predicted(t, runtime.to_vec()))
                .collect(),
            members: b.members,
            loads: b.loads,
            queued: b.queued,
            by_priority: b.by_priority,
            inbound: b.inbound,
            rotate: b.rotate,
            outstanding: b.outstanding,
            ranks: b.ranks,
            room: b.room,
            completed: b.completed,
        }
    }

    #[test]
    fn a_worker_without_a_prediction_of_ours_takes_the_runtimes() {
        // Codelet 1 known on the GPU only (0.05 s), the CPU's speed
        // unknown, the GPU idle: without the runtime's predictions nothing
        // trains on an urgent task (priority 9), and the CPU has no cost.
        let known_on_gpu = || {
            let mut m = GraphModels::default();
            m.book.record_now(1, 1, 1.0, 0.05);
            m.lowest_priority = Some(0);
            m
        };
        let urgent = [(1, 9)];
        assert_eq!(trains(&mut known_on_gpu(), &urgent), vec![None]);
        // The CPU alone, which we have no prediction for, is asked about.
        let faster = predicted(&urgent, [Some(0.02), Some(0.01)]);
        assert_eq!(
            known_on_gpu().wants_runtime_predictions(&faster).to_vec(),
            vec![vec![true, false]]
        );
        // Where the runtime predicts the CPU, that is its cost (ours stays
        // the GPU's: 0.05, not the runtime's 0.01); nothing trains, and
        // HEFT sends the task to the earlier finish: the CPU at 0.02 s,
        // the GPU when the CPU is predicted at 0.5 s.
        let worker_for = |cpu_s: f64| {
            let mut m = known_on_gpu();
            let b = predicted(&urgent, [Some(cpu_s), Some(0.01)]);
            let facts = b.facts_with(&[vec![true, true]]);
            let costs = m.costs(&b, &facts);
            assert_eq!(costs.cost.to_vec(), vec![vec![Some(cpu_s), Some(0.05)]]);
            assert_eq!(costs.train.to_vec(), vec![None]);
            decide(Method::Heft, b, facts, costs).decisions[0].worker
        };
        assert_eq!(worker_for(0.02), 0);
        assert_eq!(worker_for(0.5), 1);
        // No runtime prediction either: nothing trains on the urgent
        // task, and the codelet's predictions are not asked for again.
        let mut m = known_on_gpu();
        let none = predicted(&urgent, [None, None]);
        assert_eq!(trains_in(&mut m, &none), vec![None]);
        assert_eq!(
            m.wants_runtime_predictions(&none).to_vec(),
            vec![vec![false, false]]
        );
        // Once the CPU has a prediction of ours, it is not asked about.
        let mut m = known_on_gpu();
        m.book.record_now(0, 1, 1.0, 0.3);
        assert_eq!(
            m.wants_runtime_predictions(&faster).to_vec(),
            vec![vec![false, false]]
        );
        // A batch of one kind's workers asks for none.
        let one_kind = Batch {
            members: vec![Member {
                id: 1,
                kind: WorkerKind::Cuda,
                node: 0,
            }],
            ..predicted(&urgent, [Some(0.02), Some(0.05)])
        };
        assert_eq!(
            known_on_gpu().wants_runtime_predictions(&one_kind).to_vec(),
            vec![Vec::<bool>::new()]
        );
    }

    #[test]
    fn a_hopeless_kind_is_not_trained_on_further_codelets_and_a_useful_one_is() {
        let mut hopeless = GraphModels::default();
        hopeless.record(0, WorkerKind::Cpu, 1, 1.0, 1.0);
        hopeless.record(1, WorkerKind::Cuda, 1, 1.0, 0.001);
        hopeless.book.record_now(1, 2, 1.0, 0.01);
        assert_eq!(trains(&mut hopeless, &[(2, 0), (2, 9)]), vec![None, None]);
        let mut useful = GraphModels::default();
        useful.record(0, WorkerKind::Cpu, 1, 1.0, 0.07);
        useful.record(1, WorkerKind::Cuda, 1, 1.0, 0.01);
        useful.book.record_now(1, 2, 1.0, 0.01);
        // Urgent or not: a CPU 7 times slower is trained (the first task).
        assert_eq!(
            trains(&mut useful, &[(2, 9), (2, 0)]),
            vec![Some(WorkerKind::Cpu), None]
        );
        // A codelet only the CPU can run trains it, hopeless or not.
        let b = Batch {
            members: vec![Member {
                id: 0,
                kind: WorkerKind::Cpu,
                node: 0,
            }],
            loads: vec![0.0],
            queued: vec![0],
            by_priority: vec![Vec::new()],
            inbound: vec![false],
            ..batch(&[(3, 9)])
        };
        let facts = b.facts();
        assert_eq!(hopeless.costs(&b, &facts).train.to_vec(), vec![Some(0)]);
    }
}
