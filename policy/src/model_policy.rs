//! Task mode of the model-based policies `plb-hac`, `plb-hec`, `hdss` and
//! `acosta`: one generic [`ModelPolicy`], the flavour selecting the name and
//! the `plb-core` balancer of its epochs. The rule is documented in
//! `docs/balancers.md`, "Task mode"; in short:
//!
//! * **Epochs.** Ready tasks of one codelet and (near-)equal size (within
//!   [`SIZE_TOLERANCE`]) are *staged* as they are pushed. A staged batch of
//!   at least [`epoch_min`] tasks becomes an [`Epoch`]: a divisible load of
//!   `W` units, one unit per task, balanced by the flavour's balancer
//!   (PLB-HAC, PLB-HeC, HDSS, Acosta) over the workers able to run the
//!   codelet; each worker runs the groups of tasks the balancer gives it.
//! * **Fallback.** Everything else — tasks of mixed codelets or sizes,
//!   batches too small, tasks without a codelet, what a dissolved epoch
//!   gives back — is queued on the capable worker with the earliest
//!   predicted finish under the per (worker, codelet) fitted models
//!   ([`crate::placement::choose`]); workers take their own queue first
//!   (FIFO) and, when it is empty, steal the oldest task they can run from
//!   the longest other queue.
//!
//! A worker asks, in this order: its current epoch group, the epochs'
//! balancers (oldest epoch first), a new epoch from the staged batch, its
//! own queue, the other queues (stealing), and last the staged batch placed
//! by the fallback rule. Nothing is starved: an epoch that can no longer
//! progress is dissolved into the fallback queues, and fallback stealing
//! is work-conserving.
//!
//! # Locks
//!
//! `state` (queues, staging, epochs) is taken first; `models` may be taken
//! while holding it (placement) or alone (`post_exec`, `pop`), never the
//! reverse; `inflight` is always taken alone. No StarPU function that may
//! call back into the policy is called under any of them (only
//! `starpu_push_task_end`, which StarPU requires under the queue's lock, and
//! plain queries: `starpu_worker_can_execute_task_first_impl`,
//! `starpu_worker_get_type`, `starpu_timing_now`).

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::config::{Tuning, WorkerKind};
use crate::epoch::{Epoch, EpochPu, Ticket, epoch_min};
use crate::idle::IdleFlags;
use crate::placement::{Candidate, ModelBook, choose};
use crate::starpu::{SchedCtx, SchedPolicy, Task, TaskRef, WorkerId, now_us, relaxed_lock};
use crate::stats::ModelFigures;

/// Selects the name of a [`ModelPolicy`].
pub trait Flavour: Send + Sync + 'static {
    /// The `STARPU_SCHED` name.
    const NAME: &'static str;
}

macro_rules! flavour {
    ($ty:ident, $alias:ident, $name:literal) => {
        #[doc = concat!("Flavour marker of `", $name, "`.")]
        pub struct $ty;
        impl Flavour for $ty {
            const NAME: &'static str = $name;
        }
        #[doc = concat!("The `", $name, "` policy (task mode).")]
        pub type $alias = ModelPolicy<$ty>;
    };
}

flavour!(Hac, PlbHac, "plb-hac");
flavour!(Hec, PlbHec, "plb-hec");
flavour!(HdssFlavour, Hdss, "hdss");
flavour!(AcostaFlavour, Acosta, "acosta");

/// Tracked in-flight tasks beyond which the table is reset (entries of
/// StarPU-internal tasks, whose `post_exec` is skipped, would otherwise
/// accumulate).
const INFLIGHT_CAP: usize = 4096;

/// Two tasks of one codelet join the same staged batch when their sizes
/// (work units) differ by at most this fraction of the larger one.
pub const SIZE_TOLERANCE: f64 = 0.1;

/// Epochs alive at once (still handing out tasks, or holding groups not yet
/// taken); a batch that would form one more is placed by the fallback rule.
pub const MAX_EPOCHS: usize = 4;

/// A staged batch smaller than [`epoch_min`] that no task joined for this
/// long (seconds) is placed by the fallback rule at the next pop.
pub const STAGING_QUIET_S: f64 = 1e-3;

/// Process-wide task-mode counters (every context of every model policy),
/// for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskModeCounters {
    /// Epochs formed.
    pub epochs: u64,
    /// Tasks handed to workers by epochs.
    pub epoch_tasks: u64,
    /// Tasks taken from the fallback queues.
    pub fallback_tasks: u64,
    /// Tasks returned by dissolved epochs (then placed by the fallback
    /// rule; drains at deinit included).
    pub dissolved_tasks: u64,
    /// Epoch blocks completed without every task's report.
    pub forced_completions: u64,
}

static EPOCHS: AtomicU64 = AtomicU64::new(0);
static EPOCH_TASKS: AtomicU64 = AtomicU64::new(0);
static FALLBACK_TASKS: AtomicU64 = AtomicU64::new(0);
static DISSOLVED_TASKS: AtomicU64 = AtomicU64::new(0);
static FORCED: AtomicU64 = AtomicU64::new(0);

/// The task-mode counters so far.
pub fn task_mode_counters() -> TaskModeCounters {
    TaskModeCounters {
        epochs: EPOCHS.load(Ordering::Relaxed),
        epoch_tasks: EPOCH_TASKS.load(Ordering::Relaxed),
        fallback_tasks: FALLBACK_TASKS.load(Ordering::Relaxed),
        dissolved_tasks: DISSOLVED_TASKS.load(Ordering::Relaxed),
        forced_completions: FORCED.load(Ordering::Relaxed),
    }
}

/// Whether two task sizes are close enough to share a batch.
fn same_size(a: f64, b: f64) -> bool {
    (a - b).abs() <= SIZE_TOLERANCE * a.abs().max(b.abs())
}

/// A held task with what placement computed for it.
struct Queued {
    task: Task,
    codelet: usize,
    units: f64,
    /// Predicted seconds on the worker whose queue holds it.
    est_s: f64,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Queued>,
    backlog_s: f64,
}

impl Queue {
    fn push(&mut self, q: Queued) {
        self.backlog_s += q.est_s;
        self.items.push_back(q);
    }

    /// Removes the oldest task `worker` can run, with its implementation.
    fn take_for(&mut self, worker: WorkerId) -> Option<(Queued, u32)> {
        let (i, nimpl) = self
            .items
            .iter()
            .enumerate()
            .find_map(|(i, q)| q.task.first_impl_on(worker).map(|n| (i, n)))?;
        let q = self.items.remove(i)?;
        self.backlog_s = if self.items.is_empty() {
            0.0
        } else {
            (self.backlog_s - q.est_s).max(0.0)
        };
        Some((q, nimpl))
    }
}

/// Tasks of one codelet and size waiting to form an epoch.
struct Staging {
    codelet: usize,
    /// Size of the batch's first task (the reference of [`same_size`]).
    units: f64,
    /// Workers able to run the first task when it was pushed.
    capable: Vec<WorkerId>,
    items: Vec<Queued>,
    /// When the last task joined (seconds, StarPU's clock).
    last_push: f64,
}

impl Staging {
    fn matches(&self, codelet: usize, units: f64) -> bool {
        self.codelet == codelet && same_size(self.units, units)
    }

    fn is_big(&self) -> bool {
        self.items.len() >= epoch_min(self.capable.len())
    }
}

/// An epoch with the batch key it was formed from.
struct Running {
    epoch: Epoch<Queued>,
    codelet: usize,
    units: f64,
}

struct State {
    workers: Vec<WorkerId>,
    /// Worker kinds, read from StarPU when an epoch first needs them.
    kinds: HashMap<WorkerId, WorkerKind>,
    /// Per worker index; queues of removed workers stay reachable by
    /// stealing.
    queues: Vec<Queue>,
    /// Tasks no worker of the context could run when placed.
    unplaced: Queue,
    staging: Option<Staging>,
    /// Alive epochs, oldest first.
    epochs: Vec<Running>,
    next_epoch: u64,
    /// Longest task measured (seconds), a floor for the epochs' grace
    /// before lost reports.
    longest_task_s: f64,
    /// Every task held: queues, unplaced, staging and epochs.
    total: usize,
    rotate: usize,
}

impl State {
    fn capable(&self, task: &Task) -> Vec<WorkerId> {
        self.workers
            .iter()
            .copied()
            .filter(|&w| task.first_impl_on(w).is_some())
            .collect()
    }

    /// Queues `item` on the worker of `capable` with the earliest predicted
    /// finish (the fallback rule), or on the unplaced queue when `capable`
    /// is empty; returns the chosen worker.
    fn place(
        &mut self,
        book: &ModelBook,
        mut item: Queued,
        capable: &[WorkerId],
    ) -> Option<WorkerId> {
        let cands: Vec<Candidate> = capable
            .iter()
            .map(|w| {
                let q = self.queues.get(w.index());
                Candidate {
                    backlog_s: q.map_or(0.0, |q| q.backlog_s),
                    queued: q.map_or(0, |q| q.items.len()),
                    // Compute from the fitted model plus the transfer to
                    // the worker's memory node, predicted from StarPU's bus
                    // calibration (not measured: StarPU does not report
                    // per-task transfer times).
                    predicted_s: book
                        .trained_prediction(w.index(), item.codelet, item.units)
                        .map(|c| c + item.task.expected_transfer_s(*w).unwrap_or(0.0)),
                }
            })
            .collect();
        let chosen = choose(&cands, self.rotate).map(|i| capable[i]);
        self.rotate = self.rotate.wrapping_add(1);
        item.est_s = chosen
            .and_then(|w| book.get(w.index(), item.codelet))
            .and_then(|m| m.predict(item.units))
            .unwrap_or(0.0);
        match chosen.and_then(|w| self.queues.get_mut(w.index())) {
            Some(q) => q.push(item),
            None => self.unplaced.push(item),
        }
        chosen
    }

    /// Takes from `worker`'s own queue, else steals: other queues, longest
    /// first, then the unplaced ones.
    fn take_fallback(&mut self, worker: WorkerId) -> Option<(Queued, u32)> {
        let own = self
            .queues
            .get_mut(worker.index())
            .and_then(|q| q.take_for(worker));
        own.or_else(|| {
            let mut order: Vec<usize> = (0..self.queues.len())
                .filter(|&i| i != worker.index() && !self.queues[i].items.is_empty())
                .collect();
            order.sort_by_key(|&i| std::cmp::Reverse(self.queues[i].items.len()));
            order
                .into_iter()
                .find_map(|i| self.queues[i].take_for(worker))
                .or_else(|| self.unplaced.take_for(worker))
        })
    }

    /// Whether an epoch of the staged batch's codelet and size still hands
    /// tasks out.
    fn same_batch_open(&self, s: &Staging) -> bool {
        self.epochs
            .iter()
            .any(|r| r.epoch.is_open() && r.codelet == s.codelet && same_size(r.units, s.units))
    }

    /// Whether `worker` may still get a task from an alive epoch.
    fn epoch_may_give(&self, worker: WorkerId) -> bool {
        self.epochs.iter().any(|r| r.epoch.may_give(worker.index()))
    }

    fn kind_of(&mut self, w: WorkerId) -> WorkerKind {
        if let Some(&k) = self.kinds.get(&w) {
            return k;
        }
        let k = crate::starpu::worker_kinds(&[w.0 as i32])
            .first()
            .copied()
            .unwrap_or(WorkerKind::Other);
        if k != WorkerKind::Other {
            self.kinds.insert(w, k);
        }
        k
    }
}

/// What the execution hooks need of a popped task.
struct Inflight {
    codelet: usize,
    units: f64,
    est_s: f64,
    start_us: Option<f64>,
    /// Set for a task handed out by an epoch.
    ticket: Option<Ticket>,
}

/// A task taken for a worker: the task, its implementation, its epoch
/// ticket.
type Taken = (Queued, u32, Option<Ticket>);

/// State of one scheduling context under a model-based policy.
pub struct ModelPolicy<K> {
    state: Mutex<State>,
    /// Taken after `state` (placement) or alone; never the reverse.
    models: Mutex<ModelBook>,
    /// Always taken alone.
    inflight: Mutex<HashMap<usize, Inflight>>,
    /// Tasks held (`State::total`), readable without the lock.
    queued: AtomicUsize,
    idle: IdleFlags,
    /// The `PLB_*` parameters of the epochs' balancers.
    tuning: Tuning,
    /// Nanoseconds spent recording samples and refitting.
    fit_ns: AtomicU64,
    _flavour: PhantomData<fn() -> K>,
}

fn now_s() -> f64 {
    now_us() / 1e6
}

impl<K: Flavour> ModelPolicy<K> {
    fn is_idle(&self, w: WorkerId) -> bool {
        self.idle.is_idle(w.index())
    }

    /// Places `items` by the fallback rule; clears the idle flags of the
    /// chosen workers (they are polling drivers' workers: they look again).
    fn place_all(&self, st: &mut State, items: Vec<Queued>) {
        if items.is_empty() {
            return;
        }
        let book = relaxed_lock(&self.models);
        for item in items {
            let capable = st.capable(&item.task);
            if let Some(w) = st.place(&book, item, &capable) {
                self.idle.clear(w.index());
            }
        }
    }

    /// Places the staged batch by the fallback rule.
    fn flush_staging(&self, st: &mut State) {
        if let Some(s) = st.staging.take() {
            self.place_all(st, s.items);
        }
    }

    /// Forms an epoch of the staged batch at `now`; returns the workers it
    /// runs on (empty, and the batch placed by the fallback rule, when the
    /// balancer cannot be built).
    fn form_epoch(&self, st: &mut State, now: f64) -> Vec<WorkerId> {
        let Some(s) = st.staging.take() else {
            return Vec::new();
        };
        let workers: Vec<WorkerId> = s
            .capable
            .iter()
            .copied()
            .filter(|w| st.workers.contains(w))
            .collect();
        let pus: Vec<EpochPu> = workers
            .iter()
            .map(|&w| EpochPu {
                worker: w.index(),
                kind: st.kind_of(w),
            })
            .collect();
        let id = st.next_epoch;
        st.next_epoch += 1;
        match Epoch::new(id, K::NAME, &self.tuning, &pus, s.items, now) {
            Ok(mut epoch) => {
                epoch.note_task_seconds(st.longest_task_s);
                log::debug!(
                    "{}: epoch {id} of {} tasks on {} workers",
                    K::NAME,
                    epoch.total(),
                    pus.len()
                );
                EPOCHS.fetch_add(1, Ordering::Relaxed);
                st.epochs.push(Running {
                    epoch,
                    codelet: s.codelet,
                    units: s.units,
                });
                for w in &workers {
                    self.idle.clear(w.index());
                }
                workers
            }
            Err((items, why)) => {
                log::warn!("{}: no epoch ({why}); placing the batch", K::NAME);
                self.place_all(st, items);
                Vec::new()
            }
        }
    }

    /// Dissolves the epochs that can no longer progress (their tasks go to
    /// the fallback queues) and forgets the finished ones.
    fn settle_epochs(&self, st: &mut State) {
        let mut i = 0;
        while i < st.epochs.len() {
            if st.epochs[i].epoch.is_stalled() {
                let e = &mut st.epochs[i].epoch;
                if let Some(f) = e.fault() {
                    log::error!("{}: epoch {}: {f}", K::NAME, e.id());
                }
                log::debug!(
                    "{}: epoch {} stalled; its tasks go to the fallback queues ({e:?})",
                    K::NAME,
                    e.id()
                );
                let items = e.dissolve();
                DISSOLVED_TASKS.fetch_add(items.len() as u64, Ordering::Relaxed);
                self.place_all(st, items);
            }
            if st.epochs[i].epoch.is_finished() {
                let gone = st.epochs.remove(i);
                let stats = gone.epoch.stats();
                log::debug!("{}: epoch {} over: {stats:?}", K::NAME, gone.epoch.id());
                FORCED.fetch_add(stats.forced, Ordering::Relaxed);
            } else {
                i += 1;
            }
        }
    }

    /// Dissolves every epoch running on one of `workers` (all of them for
    /// `None`), placing their tasks by the fallback rule.
    fn dissolve_epochs(&self, st: &mut State, workers: Option<&[WorkerId]>) {
        for i in 0..st.epochs.len() {
            let e = &mut st.epochs[i].epoch;
            let hit = workers.is_none_or(|ws| ws.iter().any(|w| e.has_worker(w.index())));
            if hit {
                let items = e.dissolve();
                DISSOLVED_TASKS.fetch_add(items.len() as u64, Ordering::Relaxed);
                self.place_all(st, items);
            }
        }
        self.settle_epochs(st);
    }

    /// A task an epoch handed to `worker`: checked against the worker (a
    /// task it cannot run after all is reported done and placed by the
    /// fallback rule instead).
    fn checked(
        &self,
        st: &mut State,
        worker: WorkerId,
        (item, ticket): (Queued, Ticket),
        now: f64,
    ) -> Option<Taken> {
        match item.task.first_impl_on(worker) {
            Some(nimpl) => Some((item, nimpl, Some(ticket))),
            None => {
                if let Some(r) = st.epochs.iter_mut().find(|r| r.epoch.id() == ticket.epoch) {
                    r.epoch.task_done(ticket, 0.0, now);
                }
                let capable = st.capable(&item.task);
                let book = relaxed_lock(&self.models);
                if let Some(w) = st.place(&book, item, &capable) {
                    self.idle.clear(w.index());
                }
                None
            }
        }
    }

    /// The epoch steps of a pop: `worker`'s group, then the balancers.
    fn take_from_epochs(&self, st: &mut State, worker: WorkerId, now: f64) -> Option<Taken> {
        // Bounded: each round either returns or moves one task out of the
        // epochs into the fallback queues.
        for _ in 0..1024 {
            let mut got = None;
            for r in st.epochs.iter_mut() {
                got = r.epoch.take_queued(worker.index());
                if got.is_some() {
                    break;
                }
            }
            if got.is_none() {
                for r in st.epochs.iter_mut() {
                    got = r.epoch.ask(worker.index(), now);
                    if got.is_some() {
                        break;
                    }
                }
            }
            let x = got?;
            if let Some(t) = self.checked(st, worker, x, now) {
                return Some(t);
            }
        }
        None
    }

    /// Forms an epoch of the (big) staged batch and returns `worker`'s first
    /// task from the epochs, or, when [`MAX_EPOCHS`] are alive, places the
    /// batch by the fallback rule.
    fn form_or_flush(&self, st: &mut State, worker: WorkerId, now: f64) -> Option<Taken> {
        if st.epochs.len() < MAX_EPOCHS {
            self.form_epoch(st, now);
            self.take_from_epochs(st, worker, now)
        } else {
            self.flush_staging(st);
            None
        }
    }

    /// Everything a pop does under the state lock.
    fn take(&self, st: &mut State, worker: WorkerId, now: f64) -> Option<Taken> {
        // A small batch that stopped growing goes to the fallback queues.
        if st
            .staging
            .as_ref()
            .is_some_and(|s| !s.is_big() && now - s.last_push >= STAGING_QUIET_S)
        {
            self.flush_staging(st);
        }
        if let Some(t) = self.take_from_epochs(st, worker, now) {
            return Some(t);
        }
        self.settle_epochs(st);
        // A big staged batch forms the next epoch, unless an epoch of the
        // same codelet and size still hands tasks out (it will when that
        // one has given everything out).
        let form = st
            .staging
            .as_ref()
            .is_some_and(|s| s.is_big() && !st.same_batch_open(s));
        if form && let Some(t) = self.form_or_flush(st, worker, now) {
            return Some(t);
        }
        if let Some((item, nimpl)) = st.take_fallback(worker) {
            return Some((item, nimpl, None));
        }
        // The worker would idle: the staged batch is placed (or, when big
        // and this worker has nothing to wait for in an epoch, formed)
        // rather than left waiting.
        let runnable = st.staging.as_ref().is_some_and(|s| {
            s.items
                .first()
                .is_some_and(|q| q.task.first_impl_on(worker).is_some())
        });
        if runnable {
            let big = st.staging.as_ref().is_some_and(Staging::is_big);
            if big && st.epoch_may_give(worker) {
                return None;
            }
            if big {
                if let Some(t) = self.form_or_flush(st, worker, now) {
                    return Some(t);
                }
            } else {
                self.flush_staging(st);
            }
            if let Some((item, nimpl)) = st.take_fallback(worker) {
                return Some((item, nimpl, None));
            }
        }
        None
    }
}

impl<K: Flavour> SchedPolicy for ModelPolicy<K> {
    const NAME: &'static str = K::NAME;

    fn new(_ctx: SchedCtx) -> Self {
        let n = WorkerId::max_workers();
        let tuning = Tuning::from_env().unwrap_or_else(|e| {
            // Refused earlier by starpu_initialize; keep the defaults.
            log::error!("{}: {e}; using the default balancer parameters", K::NAME);
            Tuning::default()
        });
        ModelPolicy {
            state: Mutex::new(State {
                workers: Vec::new(),
                kinds: HashMap::new(),
                queues: (0..n).map(|_| Queue::default()).collect(),
                unplaced: Queue::default(),
                staging: None,
                epochs: Vec::new(),
                next_epoch: 0,
                longest_task_s: 0.0,
                total: 0,
                rotate: 0,
            }),
            models: Mutex::new(ModelBook::default()),
            inflight: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            idle: IdleFlags::new(n),
            tuning,
            fit_ns: AtomicU64::new(0),
            _flavour: PhantomData,
        }
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        self.idle
            .admit(&mut relaxed_lock(&self.state).workers, workers);
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) -> Vec<WorkerId> {
        let mut st = relaxed_lock(&self.state);
        st.workers.retain(|w| !workers.contains(w));
        // Epochs on a leaving worker are dissolved into the fallback
        // queues (placed on the remaining workers).
        self.dissolve_epochs(&mut st, Some(workers));
        let remaining = st.workers.clone();
        drop(st);
        // The remaining workers look again: they may steal what the
        // removed ones left queued.
        self.idle.clear_all();
        remaining
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        let codelet = task.codelet_key();
        let units = task.work_units();
        let now = now_s();
        let mut st = relaxed_lock(&self.state);
        task.announce_pushed();
        let capable = st.capable(&task);
        let item = Queued {
            task,
            codelet,
            units,
            est_s: 0.0,
        };
        let mut wake: Vec<WorkerId> = Vec::new();
        let chosen = if codelet != 0 && !capable.is_empty() {
            // Staged. A task of another codelet or size closes the batch:
            // it forms an epoch when big enough, else is placed.
            let joins = st
                .staging
                .as_ref()
                .is_some_and(|s| s.matches(codelet, units));
            if !joins {
                if st
                    .staging
                    .as_ref()
                    .is_some_and(|s| s.is_big() && st.epochs.len() < MAX_EPOCHS)
                {
                    // Wake the epoch's workers that were idle.
                    let idle: Vec<WorkerId> = st
                        .staging
                        .as_ref()
                        .map(|s| {
                            s.capable
                                .iter()
                                .copied()
                                .filter(|&w| self.is_idle(w))
                                .collect()
                        })
                        .unwrap_or_default();
                    let on = self.form_epoch(&mut st, now);
                    wake.extend(idle.into_iter().filter(|w| on.contains(w)));
                } else {
                    self.flush_staging(&mut st);
                }
            }
            let s = st.staging.get_or_insert_with(|| Staging {
                codelet,
                units,
                capable: capable.clone(),
                items: Vec::new(),
                last_push: now,
            });
            s.items.push(item);
            s.last_push = now;
            None
        } else {
            let book = relaxed_lock(&self.models);
            st.place(&book, item, &capable)
        };
        st.total += 1;
        self.queued.store(st.total, Ordering::Release);
        // Wake the chosen worker if it is idle, else one idle worker that
        // may take the task.
        let one = chosen.filter(|&w| self.is_idle(w)).or_else(|| {
            capable
                .iter()
                .copied()
                .find(|&w| Some(w) != chosen && self.is_idle(w))
        });
        wake.extend(one);
        wake.sort();
        wake.dedup();
        for w in &wake {
            self.idle.clear(w.index());
        }
        drop(st);
        wake
    }

    fn pop(&self, _ctx: SchedCtx, worker: WorkerId) -> Option<Task> {
        if self.queued.load(Ordering::Acquire) == 0 || self.is_idle(worker) {
            return None;
        }
        let now = now_s();
        let mut st = relaxed_lock(&self.state);
        let taken = self.take(&mut st, worker, now);
        if taken.is_some() {
            st.total = st.total.saturating_sub(1);
        } else if !st.epoch_may_give(worker) {
            // Nothing now and nothing to wait for: skip the lock until a
            // push (or an epoch's progress) offers something. A worker
            // that may still get a task from an epoch keeps polling.
            self.idle.set(worker.index());
        }
        self.queued.store(st.total, Ordering::Release);
        drop(st);
        let (item, nimpl, ticket) = taken?;
        let Queued {
            mut task,
            codelet,
            units,
            mut est_s,
        } = item;
        if ticket.is_some() {
            EPOCH_TASKS.fetch_add(1, Ordering::Relaxed);
            est_s = relaxed_lock(&self.models)
                .get(worker.index(), codelet)
                .and_then(|m| m.predict(units))
                .unwrap_or(0.0);
        } else {
            FALLBACK_TASKS.fetch_add(1, Ordering::Relaxed);
        }
        task.set_implementation(nimpl);
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

    fn post_exec(&self, _ctx: SchedCtx, task: TaskRef<'_>, worker: WorkerId) -> Vec<WorkerId> {
        let end = now_us();
        let Some(e) = relaxed_lock(&self.inflight).remove(&task.addr()) else {
            return Vec::new();
        };
        let seconds = e
            .start_us
            .map(|start| (end - start) / 1e6)
            .filter(|s| s.is_finite() && *s > 0.0);
        if let Some(seconds) = seconds {
            let t0 = now_us();
            relaxed_lock(&self.models).record(worker.index(), e.codelet, e.units, seconds);
            self.fit_ns
                .fetch_add(((now_us() - t0).max(0.0) * 1e3) as u64, Ordering::Relaxed);
        }
        let Some(ticket) = e.ticket else {
            return Vec::new();
        };
        let seconds = seconds.unwrap_or(0.0);
        let mut st = relaxed_lock(&self.state);
        // Idle workers whose flag the progress below clears are woken.
        let idle_before: Vec<WorkerId> = st
            .workers
            .iter()
            .copied()
            .filter(|&w| self.is_idle(w))
            .collect();
        if seconds > st.longest_task_s {
            st.longest_task_s = seconds;
        }
        let mut progressed = false;
        if let Some(r) = st.epochs.iter_mut().find(|r| r.epoch.id() == ticket.epoch) {
            if r.epoch.task_done(ticket, seconds, end / 1e6) {
                progressed = true;
                // Its waiting workers may ask again.
                for w in r.epoch.workers() {
                    self.idle.clear(w);
                }
            }
        }
        if progressed {
            self.settle_epochs(&mut st);
        }
        self.queued.store(st.total, Ordering::Release);
        let wake = idle_before
            .into_iter()
            .filter(|&w| !self.is_idle(w))
            .collect();
        drop(st);
        wake
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
            solve_s: self.fit_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    fn drain(&self) -> Vec<Task> {
        let mut guard = relaxed_lock(&self.state);
        let st = &mut *guard;
        self.queued.store(0, Ordering::Release);
        st.total = 0;
        let mut out: Vec<Task> = Vec::new();
        for r in st.epochs.drain(..) {
            let mut epoch = r.epoch;
            let items = epoch.dissolve();
            DISSOLVED_TASKS.fetch_add(items.len() as u64, Ordering::Relaxed);
            out.extend(items.into_iter().map(|q| q.task));
        }
        if let Some(s) = st.staging.take() {
            out.extend(s.items.into_iter().map(|q| q.task));
        }
        for q in st
            .queues
            .iter_mut()
            .chain(std::iter::once(&mut st.unplaced))
        {
            q.backlog_s = 0.0;
            out.extend(q.items.drain(..).map(|q| q.task));
        }
        out
    }
}
