//! The task-graph policies (`plb-heft`, `dada`, `dada-cp`) as the
//! explorer's [`Side`]: the adapter's push, its pop (first its own line
//! alone, [`pop_own`], when no batch is due; else the scheduler's steps,
//! [`GraphSched::pop_step`], each batch placed unlocked with our models'
//! predictions), its post-exec hook (the worker's expected end corrected,
//! the sample recorded). The lines are apart from the scheduler, as the
//! adapter's per-worker locks keep them: the own-line pop is an atomic
//! action of its own, between any two of the others.

use plb_core::balance::WorkerKind;
use plb_core::dag::Method;
use plb_core::dag::cpu_order::CpuOrder;
use plb_core::dag::decide::{Batch, Decided, GraphModels, GraphTask, Member, decide};
use plb_core::dag::graph::{GraphRound, GraphSched, GraphStep, Window, pop_own};
use plb_core::dag::line_order::LineOrder;
use plb_core::dag::lines::Placed;
use plb_core::sleepers::Sleepers;
use plb_core::worker_queues::{PlainQueues, QueueSet};

use super::explorer::{Fake, Plan, Side, Step, own_queue_step};

impl GraphTask for Fake {
    fn id(&self) -> usize {
        self.id
    }
    fn codelet(&self) -> usize {
        self.codelet
    }
    fn units(&self) -> f64 {
        self.units
    }
    fn priority(&self) -> i32 {
        self.priority
    }
    fn implementation_on(&self, worker: usize) -> Option<u32> {
        self.runs_on(worker).then_some(0)
    }
    fn transfer_to_node_s(&self, node: usize) -> Option<f64> {
        // The accelerator (node 1) is a transfer away.
        Some(if node == 0 { 0.0 } else { 1e-4 })
    }
    fn written_bytes_on(&self, nodes: &[usize], out: &mut [f64]) {
        for (o, &n) in out.iter_mut().zip(nodes) {
            if n == self.id % 2 {
                *o += 1.0;
            }
        }
    }
    fn input_on_node(&self, node: usize) -> bool {
        node == 0
    }
}

/// A batch on its way out of the lock, and back placed.
pub enum Placing {
    Batch(Box<Batch<Fake>>),
    Placed(Box<Decided<Fake>>),
    /// The own-line pop found nothing: the scheduler's steps next.
    Locked,
}

/// How a pop's first try on the worker's own line behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnLine {
    /// The adapter's: only when no batch is due; an empty line goes on to
    /// the scheduler's steps.
    Current,
    /// A tempting mistake: always first, and an empty line marks the
    /// worker idle and ends the pop without the scheduler's lock.
    Careless,
}

pub struct Graph {
    pub sched: GraphSched<Fake>,
    lines: PlainQueues<Placed<Fake>>,
    own_line: OwnLine,
    /// Pops served by the own line alone, and by the scheduler's steps.
    pub own_pops: u64,
    pub locked_pops: u64,
    models: GraphModels,
    method: Method,
    nodes: Vec<usize>,
    /// Batches carry ranks ([`Graph::ranked`]).
    ranked: bool,
    /// Tasks pushed and not reported done.
    outstanding: usize,
    /// Tasks HEFT's CPU offload sent to a CPU worker.
    pub offloaded: usize,
    /// Tasks a worker pushed (its task's end made them ready).
    pub worker_pushes: u64,
    /// Of those, the ones pushed among CPU workers alone (where a member's
    /// push wakes nobody).
    pub unwoken_pushes: u64,
}

impl Graph {
    /// `window`: the lines' bound ([`GraphSched::set_window`]); HEFT's
    /// CPU steals are charged the data penalty, as the adapter sets it.
    pub fn new(plan: &Plan, method: Method, own_line: OwnLine, window: Option<Window>) -> Graph {
        Graph::with_accelerator(plan, method, own_line, window, true)
    }

    /// [`Graph::new`], worker 0 a CPU worker like the others when
    /// `accelerator` is false (a context where a member's push wakes
    /// nobody: [`GraphSched::push_from`]).
    pub fn with_accelerator(
        plan: &Plan,
        method: Method,
        own_line: OwnLine,
        window: Option<Window>,
        accelerator: bool,
    ) -> Graph {
        let nodes: Vec<usize> = (0..plan.workers).map(|w| usize::from(w == 0)).collect();
        let members: Vec<Member> = (0..plan.workers)
            .map(|w| Member {
                id: w,
                kind: if w == 0 && accelerator {
                    WorkerKind::Cuda
                } else {
                    WorkerKind::Cpu
                },
                node: nodes[w],
            })
            .collect();
        let mut sched = GraphSched::new(8);
        sched.set_window(window);
        sched.set_data_penalty(method == Method::Heft);
        sched.add_workers(&members, &Sleepers::new(8, true));
        Graph {
            sched,
            lines: PlainQueues::new(8),
            own_line,
            own_pops: 0,
            locked_pops: 0,
            models: GraphModels::default(),
            method,
            nodes,
            ranked: false,
            outstanding: 0,
            offloaded: 0,
            worker_pushes: 0,
            unwoken_pushes: 0,
        }
    }

    /// Batches carry ranks (each task's 0: no chain below it) and the
    /// outstanding count, as the adapter's graph walk gives them, so that
    /// tasks have a slack; and the accelerator's samples of even codelets
    /// are recorded 3 times shorter, so that codelets differ in speedup:
    /// HEFT's CPU offload ([`plb_core::dag::offload`]) then acts.
    pub fn ranked(mut self) -> Graph {
        self.ranked = true;
        self
    }

    /// The accelerator's line ordered as `order` says
    /// ([`GraphSched::set_line_order`]; with ranks, by latest start).
    pub fn line_order(mut self, order: LineOrder) -> Graph {
        self.sched.set_line_order(order);
        self
    }

    /// A context of CPU workers alone ordered as `order` says
    /// ([`GraphSched::set_cpu_order`]; arrival order ignores priorities).
    pub fn cpu_order(mut self, order: CpuOrder) -> Graph {
        self.sched.set_cpu_order(order);
        self
    }
}

impl Side for Graph {
    type Round = GraphRound;
    type Work = Placing;
    type Run = Fake;

    fn push(
        &mut self,
        task: Fake,
        _now: f64,
        sleepers: &Sleepers,
        pusher: Option<usize>,
    ) -> (Vec<usize>, bool) {
        self.outstanding += 1;
        self.worker_pushes += u64::from(pusher.is_some());
        let cpus_alone = self
            .sched
            .members()
            .iter()
            .all(|m| m.kind == WorkerKind::Cpu);
        self.unwoken_pushes += u64::from(cpus_alone && pusher.is_some());
        (self.sched.push_from(task, sleepers, pusher), false)
    }

    fn commit(&mut self, _now: f64, _sleepers: &Sleepers) -> Vec<usize> {
        Vec::new()
    }

    fn remove(&mut self, w: usize, sleepers: &Sleepers) -> Vec<usize> {
        self.sched.remove_workers(&[w], &self.lines, sleepers)
    }

    fn pop_step(
        &mut self,
        w: usize,
        now: f64,
        sleepers: &Sleepers,
        round: &mut GraphRound,
        back: Option<Self::Work>,
        first: bool,
    ) -> Step<Self::Work, Fake> {
        let careless = self.own_line == OwnLine::Careless;
        if first && (careless || !self.sched.placing_due()) {
            // The adapter's first try: the worker's line alone.
            let cpu = self.sched.kind_of(w) == WorkerKind::Cpu;
            let node = self.nodes[w];
            let found = self.lines.with(w, |q| pop_own(q, cpu, node, now)).flatten();
            // A full line's room is reported under the scheduler's lock
            // (in the adapter, a second step of the same pop; its wake
            // covers the workers that went to sleep in between).
            let wake = match &found {
                Some((_, before)) => self.sched.took_own(w, *before, sleepers),
                None => Vec::new(),
            };
            let (pops, locked) = (&mut self.own_pops, Placing::Locked);
            let step = own_queue_step(found.map(|f| f.0), careless, w, sleepers, pops, locked);
            return match step {
                Step::Task(t, _) => Step::Task(t, wake),
                other => other,
            };
        }
        let back = back.and_then(|b| match b {
            Placing::Placed(d) => Some(*d),
            Placing::Locked => None,
            Placing::Batch(_) => unreachable!("placed before stepping again"),
        });
        let (node, lines) = (self.nodes[w], &self.lines);
        match self
            .sched
            .pop_step(w, node, now, sleepers, round, back, lines)
        {
            GraphStep::Place(batch, wake) => Step::Work(Placing::Batch(batch), wake),
            GraphStep::Task(t, wake) => {
                self.locked_pops += 1;
                Step::Task(t, wake)
            }
            GraphStep::Empty(wake) => Step::Empty(wake),
        }
    }

    fn work(&mut self, work: Self::Work) -> Self::Work {
        let mut batch = match work {
            Placing::Batch(batch) => batch,
            Placing::Locked => return Placing::Locked,
            Placing::Placed(_) => unreachable!("a batch to place"),
        };
        if self.ranked {
            batch.ranks = smallvec::smallvec![0.0; batch.tasks.len()];
            batch.outstanding = self.outstanding.max(batch.tasks.len());
        }
        let facts = batch.facts();
        let costs = self.models.costs(&batch, &facts);
        let decided = decide(self.method, *batch, facts, costs);
        self.offloaded += decided.offloaded;
        Placing::Placed(Box::new(decided))
    }

    fn task_of(run: &Fake) -> usize {
        run.id
    }

    fn units_of(run: &Fake) -> f64 {
        run.units
    }

    fn post_exec(
        &mut self,
        w: usize,
        run: Fake,
        secs: f64,
        now: f64,
        sleepers: &Sleepers,
    ) -> Vec<usize> {
        self.sched.finished(w, run.id, now, &self.lines);
        self.outstanding = self.outstanding.saturating_sub(1);
        if run.codelet == 0 {
            return Vec::new();
        }
        let kind = self.sched.kind_of(w);
        let strong = self.ranked && kind != WorkerKind::Cpu && run.codelet % 2 == 0;
        let secs = if strong { secs / 3.0 } else { secs };
        let (job, first) = self.models.record(w, kind, run.codelet, run.units, secs);
        if let Some(job) = job {
            let fitted = job.run(self.models.book.fit_config());
            self.models.book.install(fitted);
        }
        if first {
            self.sched.model_learned(sleepers)
        } else {
            Vec::new()
        }
    }

    fn held(&self) -> usize {
        self.sched.held() + self.lines.held()
    }

    fn expected_end_s(&self, w: usize, now: f64) -> f64 {
        now + self
            .lines
            .with(w, |q| q.load_s(now))
            .unwrap_or(0.0)
            .max(0.0)
    }

    fn drain(&mut self) -> usize {
        self.sched.drain(&self.lines).len()
    }
}
