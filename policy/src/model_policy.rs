//! Task mode of the model-based policies `plb-hac`, `plb-hec`, `hdss` and
//! `acosta`: one generic [`ModelPolicy`], the flavour selecting the name.
//!
//! For now the four flavours share one rule (documented in
//! `docs/balancers.md`, "Task mode"): per (worker, codelet) fitted models
//! of the compute time, each pushed task queued on the capable worker with
//! the earliest predicted finish ([`crate::placement::choose`]), workers
//! taking from their own queue first (FIFO) and, when it is empty,
//! stealing the oldest task they can run from the longest other queue.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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

/// A queued task with what placement computed for it.
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

struct State {
    workers: Vec<WorkerId>,
    /// Per worker index; queues of removed workers stay reachable by
    /// stealing.
    queues: Vec<Queue>,
    /// Tasks no worker of the context could run when pushed.
    unplaced: Queue,
    total: usize,
    rotate: usize,
}

impl State {
    fn take_for(&mut self, worker: WorkerId) -> Option<(Queued, u32)> {
        let own = self
            .queues
            .get_mut(worker.index())
            .and_then(|q| q.take_for(worker));
        let taken = own.or_else(|| {
            // Steal: other queues, longest first, then the unplaced ones.
            let mut order: Vec<usize> = (0..self.queues.len())
                .filter(|&i| i != worker.index() && !self.queues[i].items.is_empty())
                .collect();
            order.sort_by_key(|&i| std::cmp::Reverse(self.queues[i].items.len()));
            order
                .into_iter()
                .find_map(|i| self.queues[i].take_for(worker))
                .or_else(|| self.unplaced.take_for(worker))
        });
        if taken.is_some() {
            self.total = self.total.saturating_sub(1);
        }
        taken
    }
}

/// What the execution hooks need of a popped task.
struct Inflight {
    codelet: usize,
    units: f64,
    est_s: f64,
    start_us: Option<f64>,
}

/// State of one scheduling context under a model-based policy.
pub struct ModelPolicy<K> {
    state: Mutex<State>,
    /// Taken after `state` (push) or alone (post_exec); never the reverse.
    models: Mutex<ModelBook>,
    inflight: Mutex<HashMap<usize, Inflight>>,
    queued: AtomicUsize,
    idle: IdleFlags,
    /// Nanoseconds spent recording samples and refitting.
    fit_ns: AtomicU64,
    _flavour: PhantomData<fn() -> K>,
}

impl<K> ModelPolicy<K> {
    fn is_idle(&self, w: WorkerId) -> bool {
        self.idle.is_idle(w.index())
    }
}

impl<K: Flavour> SchedPolicy for ModelPolicy<K> {
    const NAME: &'static str = K::NAME;

    fn new(_ctx: SchedCtx) -> Self {
        let n = WorkerId::max_workers();
        ModelPolicy {
            state: Mutex::new(State {
                workers: Vec::new(),
                queues: (0..n).map(|_| Queue::default()).collect(),
                unplaced: Queue::default(),
                total: 0,
                rotate: 0,
            }),
            models: Mutex::new(ModelBook::default()),
            inflight: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            idle: IdleFlags::new(n),
            fit_ns: AtomicU64::new(0),
            _flavour: PhantomData,
        }
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let mut st = relaxed_lock(&self.state);
        for &w in workers {
            if !st.workers.contains(&w) {
                st.workers.push(w);
            }
            self.idle.clear(w.index());
        }
    }

    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let mut st = relaxed_lock(&self.state);
        st.workers.retain(|w| !workers.contains(w));
        // The remaining workers look again: they may steal what the
        // removed ones left queued.
        self.idle.clear_all();
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        let codelet = task.codelet_key();
        let units = task.work_units();
        let mut st = relaxed_lock(&self.state);
        task.announce_pushed();
        let capable: Vec<WorkerId> = st
            .workers
            .iter()
            .copied()
            .filter(|&w| task.first_impl_on(w).is_some())
            .collect();
        let (chosen, est_s) = {
            let book = relaxed_lock(&self.models);
            let cands: Vec<Candidate> = capable
                .iter()
                .map(|w| {
                    let q = st.queues.get(w.index());
                    Candidate {
                        backlog_s: q.map_or(0.0, |q| q.backlog_s),
                        queued: q.map_or(0, |q| q.items.len()),
                        predicted_s: book.trained_prediction(w.index(), codelet, units),
                    }
                })
                .collect();
            let chosen = choose(&cands, st.rotate).map(|i| capable[i]);
            let est_s = chosen
                .and_then(|w| book.get(w.index(), codelet))
                .and_then(|m| m.predict(units))
                .unwrap_or(0.0);
            (chosen, est_s)
        };
        st.rotate = st.rotate.wrapping_add(1);
        let item = Queued {
            task,
            codelet,
            units,
            est_s,
        };
        match chosen.and_then(|w| st.queues.get_mut(w.index())) {
            Some(q) => q.push(item),
            None => st.unplaced.push(item),
        }
        st.total += 1;
        self.queued.store(st.total, Ordering::Release);
        // Wake the chosen worker if it is idle, else one idle worker that
        // may steal the task.
        let wake = chosen.filter(|&w| self.is_idle(w)).or_else(|| {
            capable
                .iter()
                .copied()
                .find(|&w| Some(w) != chosen && self.is_idle(w))
        });
        if let Some(w) = wake {
            self.idle.clear(w.index());
        }
        drop(st);
        wake.into_iter().collect()
    }

    fn pop(&self, _ctx: SchedCtx, worker: WorkerId) -> Option<Task> {
        if self.queued.load(Ordering::Acquire) == 0 || self.is_idle(worker) {
            return None;
        }
        let mut st = relaxed_lock(&self.state);
        let taken = st.take_for(worker);
        self.queued.store(st.total, Ordering::Release);
        if taken.is_none() {
            self.idle.set(worker.index());
        }
        drop(st);
        let (item, nimpl) = taken?;
        let Queued {
            mut task,
            codelet,
            units,
            est_s,
        } = item;
        task.set_implementation(nimpl);
        let mut inflight = relaxed_lock(&self.inflight);
        if inflight.len() >= INFLIGHT_CAP {
            inflight.clear();
        }
        inflight.insert(
            task.addr(),
            Inflight {
                codelet,
                units,
                est_s,
                start_us: None,
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
        let Some(start) = e.start_us else { return };
        let seconds = (end - start) / 1e6;
        if seconds.is_finite() && seconds > 0.0 {
            let t0 = std::time::Instant::now();
            relaxed_lock(&self.models).record(worker.index(), e.codelet, e.units, seconds);
            self.fit_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
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
