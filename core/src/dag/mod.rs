//! Task-graph policies: the third paper's online HEFT and DADA(α)(+CP)
//! (`../shared/papers/xkaapi-dada-heft.md`, §3), as plain batch placement
//! over predicted costs, plus the per-worker queues with expected
//! start/length/end bookkeeping ([`lines`]) that the StarPU adapter
//! (`starpu-plb`'s `dag_mode`) drives. No StarPU, no clock, no threads: the
//! adapter gathers each ready task's predicted costs, transfer times and
//! data affinity, calls [`place`] without any lock, and queues the tasks
//! where it says.
//!
//! * [`heft`]: ready tasks sorted by decreasing accelerator speedup, each
//!   on the worker with the earliest predicted finish (transfers included).
//! * [`dada`]: binary search on a makespan guess λ; an affinity phase loads
//!   each worker with the tasks whose written data it holds up to αλ; a
//!   dual approximation (ρ = 2) places the rest; with communication
//!   prediction (`dada-cp`) each cost includes the task's transfer time.
//!
//! * [`decide`]: one batch's placement from what the runtime says of its
//!   tasks ([`decide::GraphTask`]) and our models' predictions;
//! * [`graph`]: the scheduler the adapter locks (ready list, lines,
//!   members) and a worker's pop as locked steps.
//! * [`record`], [`bound`] and [`offline`]: the graph a run executed
//!   (`PLB_GRAPH`), a lower bound on its makespan that keeps the
//!   dependencies, and an offline HEFT schedule of it (an upper bound).
//! * [`prefetch`]: which placed tasks the adapter prefetches at once.
//! * [`line_order`]: the order of an accelerator's line within a priority.
//! * [`cpu_order`]: the order of a context of CPU workers alone.
//!
//! `docs/balancers.md`, "Task graphs", states what is decided where and
//! what one activation costs.

pub mod bound;
pub mod cpu_order;
pub mod dada;
pub mod decide;
pub mod graph;
pub mod heft;
pub mod line_order;
pub mod lines;
pub mod offline;
pub mod offload;
pub mod prefetch;
pub mod rank;
pub mod ready;
pub mod record;

use smallvec::SmallVec;

use crate::balance::WorkerKind;

/// A placement's list indexed by worker or batch member: inline up to 16
/// workers (no allocation per activation on machines of that size), on
/// the heap beyond. Its inline room makes it large to move: lists of
/// words stay within one function (HEFT's backlogs and candidates, the
/// batch's nodes) or in a structure built once and borrowed (DADA's
/// problem); StarPU's facts carry one of flags per task.
pub(crate) type PerWorker<T> = SmallVec<[T; 16]>;

/// A list indexed by a batch's tasks: inline for a batch of one task, on
/// the heap beyond. Most activations place one task (a graph that runs
/// as it is submitted: 6544 of 7938 and 6661 of 8155 batches in two runs
/// of the 11480-task Cholesky of `scripts/overhead.sh` on 2 CPU workers,
/// 1063 and 1225 of two tasks); inline room for more made every move of
/// a batch and of its decisions copy it (measured: 26689 instructions
/// per task of `tasks_overhead` with room for 4, 26133 for 2, 25834 for
/// 1). Rows: `results/overhead/batch-sizes-cholesky-11480-aa19651.txt`,
/// `results/overhead/inline-room-trials.txt`.
pub type PerTask<T> = SmallVec<[T; 1]>;

/// A worker as a batch placement sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DagWorker {
    /// Its kind (CPU workers against accelerators: the paper's two classes).
    pub kind: WorkerKind,
    /// Its memory node (StarPU's numbering).
    pub node: usize,
    /// Seconds from now until the work already queued on it and running is
    /// predicted done (the paper's "processor load time-stamp").
    pub load_s: f64,
    /// The queued part of `load_s` by task priority, as (priority,
    /// seconds): a task of priority p waits only for the running work and
    /// the queued tasks of priority >= p (queues are priority-ordered).
    pub queued_by_priority: Vec<(i32, f64)>,
    /// Whether its line holds a task placed with a predicted transfer to
    /// it: data may be on its way to its node.
    pub inbound: bool,
    /// Tasks its line may still take ([`HELD`]: a task whose best worker
    /// has none is held back); `usize::MAX` when unbounded.
    pub room: usize,
}

impl DagWorker {
    /// A worker with `load_s` seconds of work, all at one priority.
    pub fn new(kind: WorkerKind, node: usize, load_s: f64) -> DagWorker {
        DagWorker {
            kind,
            node,
            load_s,
            queued_by_priority: Vec::new(),
            inbound: false,
            room: usize::MAX,
        }
    }

    /// Whether it counts as an accelerator (everything but a CPU core).
    pub fn is_accelerator(&self) -> bool {
        self.kind != WorkerKind::Cpu
    }
}

/// Where the data a task writes lives: the memory node holding valid copies
/// of most of those bytes, and how many bytes that is (the paper's affinity
/// score).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affinity {
    /// The memory node.
    pub node: usize,
    /// Bytes of written data valid there.
    pub bytes: f64,
}

/// A ready task of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct DagTask {
    /// Predicted compute seconds on each worker (indexed like the workers);
    /// `None` where the worker cannot run the task or has no prediction.
    /// At least one entry is `Some` (the caller places the others itself).
    pub cost_s: Vec<Option<f64>>,
    /// Predicted seconds to bring the task's data to each worker's memory
    /// node (0 where it is already there).
    pub transfer_s: Vec<f64>,
    /// Its data affinity, if it writes registered data.
    pub affinity: Option<Affinity>,
    /// StarPU priority (higher first among equal speedups).
    pub priority: i32,
    /// Seconds the task may wait before the longest chain of work from it
    /// to the end of the graph outlasts the remaining work spread over
    /// every worker ([`decide::decide`]); infinite when unknown. HEFT lets
    /// a task that would wait longer count only the queued work it does
    /// not overtake.
    pub slack_s: f64,
}

impl DagTask {
    /// The cheapest known cost over the workers `keep` selects, if any.
    pub(crate) fn best_cost(
        &self,
        workers: &[DagWorker],
        keep: impl Fn(&DagWorker) -> bool,
    ) -> Option<f64> {
        self.cost_s
            .iter()
            .zip(workers)
            .filter(|(_, w)| keep(w))
            .filter_map(|(c, _)| c.filter(|c| c.is_finite()))
            .min_by(f64::total_cmp)
    }

    /// The paper's speedup S_i = p_i^CPU / p_i^GPU over the best worker of
    /// each class: infinite when no CPU can run it, 0 when no accelerator
    /// can.
    pub fn speedup(&self, workers: &[DagWorker]) -> f64 {
        let cpu = self.best_cost(workers, |w| !w.is_accelerator());
        let acc = self.best_cost(workers, DagWorker::is_accelerator);
        match (cpu, acc) {
            (Some(c), Some(a)) if a > 0.0 => c / a,
            (Some(_), Some(_)) => f64::INFINITY,
            (None, Some(_)) => f64::INFINITY,
            _ => 0.0,
        }
    }
}

/// How a batch is placed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The paper's online HEFT (Algorithm 1).
    Heft,
    /// DADA(α) (Algorithm 2), with communication prediction when `cp`.
    Dada {
        /// Affinity phase length, a fraction of the guess λ, in [0, 1].
        alpha: f64,
        /// Relative precision of the binary search on λ, in (0, 1).
        eps: f64,
        /// Add each task's transfer time to its cost (DADA(α)+CP).
        cp: bool,
    },
}

/// A task held back by [`place`]: the worker it finishes first on has no
/// room left ([`DagWorker::room`]).
pub const HELD: usize = usize::MAX - 1;

/// Places every task of a batch: returns, for each task, the index of its
/// worker, or [`HELD`]. Tasks with no known cost at all are given
/// `usize::MAX` (callers place those themselves and should not pass them).
/// `most_accelerated`: the highest of the codelets' speedups, for HEFT's CPU offload
/// ([`offload`]; `None`: no offload).
pub fn place(
    method: Method,
    tasks: &[DagTask],
    workers: &[DagWorker],
    most_accelerated: Option<f64>,
) -> Placement {
    match method {
        Method::Heft => heft::place(tasks, workers, most_accelerated),
        Method::Dada { alpha, eps, cp } => Placement {
            at: dada::place(tasks, workers, alpha, eps, cp),
            offloaded: 0,
        },
    }
}

/// How many distinct memory nodes the workers that are not CPU workers
/// span, given each worker's kind and memory node (the prefetch horizon
/// and HEFT's CPU offload count accelerators this way).
pub fn distinct_accelerator_nodes(workers: impl IntoIterator<Item = (WorkerKind, usize)>) -> usize {
    let mut nodes: Vec<usize> = workers
        .into_iter()
        .filter(|&(kind, _)| kind != WorkerKind::Cpu)
        .map(|(_, node)| node)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len()
}

/// What [`place`] decided for a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Each task's worker index, [`HELD`], or `usize::MAX` (see [`place`]).
    pub at: PerTask<usize>,
    /// Tasks placed on a CPU worker by HEFT's CPU offload
    /// ([`offload`]) rather than on the accelerator that finishes them
    /// first.
    pub offloaded: usize,
}

/// One DAG policy: its `STARPU_SCHED` name, summary and method (built from
/// the `PLB_DADA_*` tuning).
#[derive(Debug, Clone, Copy)]
pub struct DagEntry {
    /// The name (never starting with `heft`: StarPU 1.3 maps such names to
    /// `dmda`).
    pub name: &'static str,
    /// One line for `plb policies` and `STARPU_SCHED=help`.
    pub summary: &'static str,
    /// The method, given DADA's α and ε.
    pub method: fn(alpha: f64, eps: f64) -> Method,
}

/// Every task-graph policy.
pub const DAG_POLICIES: &[DagEntry] = &[
    DagEntry {
        name: "plb-heft",
        summary: "task graphs: online HEFT (ready tasks by decreasing GPU speedup, each on the earliest finish incl. transfers, plus dmda's data penalty; with an accelerator, placed most urgent first as queues make room: PLB_HEFT_WINDOW)",
        method: |_, _| Method::Heft,
    },
    DagEntry {
        name: "dada",
        summary: "task graphs: DADA(alpha), affinity phase then dual approximation (PLB_DADA_ALPHA, PLB_DADA_EPS)",
        method: |alpha, eps| Method::Dada {
            alpha,
            eps,
            cp: false,
        },
    },
    DagEntry {
        name: "dada-cp",
        summary: "task graphs: DADA(alpha)+CP, DADA with each task's predicted transfer added to its cost",
        method: |alpha, eps| Method::Dada {
            alpha,
            eps,
            cp: true,
        },
    },
];

/// The DAG policy named `name`.
pub fn find(name: &str) -> Option<&'static DagEntry> {
    DAG_POLICIES.iter().find(|e| e.name == name)
}

/// Orders task indices by decreasing speedup, then decreasing priority,
/// then batch order (the order both HEFT and DADA's balance phase use).
fn by_speedup(tasks: &[DagTask], workers: &[DagWorker], of: &mut [usize]) {
    if of.len() < 2 {
        return;
    }
    let s: PerTask<f64> = tasks.iter().map(|t| t.speedup(workers)).collect();
    of.sort_by(|&a, &b| {
        s[b].total_cmp(&s[a])
            .then(tasks[b].priority.cmp(&tasks[a].priority))
            .then(a.cmp(&b))
    });
}

/// `dmda`'s data penalty `β` (StarPU's default, 1): HEFT adds `β` times a
/// task's predicted transfer to a worker's finish when it chooses the
/// worker, and a CPU worker's steal under HEFT counts it too
/// ([`graph::GraphSched::set_data_penalty`]).
pub(crate) const DATA_PENALTY: f64 = 1.0;

/// The part of StarPU's transfer prediction to count when `others`
/// workers besides the candidate have data on its way: StarPU predicts
/// every transfer as if all `accelerators` shared the bus at once, so a
/// transfer expected to run alone or beside few others is scaled down to
/// the transfers expected at once (never up). HEFT's placement and every
/// task-graph policy's steals use it.
pub(crate) fn concurrent_share(others: usize, accelerators: usize) -> f64 {
    if accelerators <= 1 {
        return 1.0;
    }
    ((others + 1) as f64 / accelerators as f64).min(1.0)
}

/// A worker's predicted backlog: running work, and queued seconds by
/// priority.
pub(crate) struct Backlog {
    running_s: f64,
    queued: SmallVec<[(i32, f64); 4]>,
}

impl Backlog {
    pub(crate) fn of(w: &DagWorker) -> Backlog {
        let clean = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
        let queued: SmallVec<[(i32, f64); 4]> = w
            .queued_by_priority
            .iter()
            .map(|&(p, s)| (p, clean(s)))
            .collect();
        let total: f64 = queued.iter().map(|q| q.1).sum();
        Backlog {
            running_s: (clean(w.load_s) - total).max(0.0),
            queued,
        }
    }

    /// Seconds of the whole backlog: running work and every queued task.
    pub(crate) fn total(&self) -> f64 {
        self.running_s + self.queued.iter().map(|q| q.1).sum::<f64>()
    }

    /// Seconds until a task of priority `p` would start (ignoring its data).
    pub(crate) fn ahead_of(&self, p: i32) -> f64 {
        self.running_s
            + self
                .queued
                .iter()
                .filter(|q| q.0 >= p)
                .map(|q| q.1)
                .sum::<f64>()
    }

    pub(crate) fn add(&mut self, p: i32, s: f64) {
        match self.queued.iter_mut().find(|q| q.0 == p) {
            Some(q) => q.1 += s,
            None => self.queued.push((p, s)),
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    pub fn cpu(load_s: f64) -> DagWorker {
        DagWorker::new(WorkerKind::Cpu, 0, load_s)
    }

    pub fn gpu(node: usize, load_s: f64) -> DagWorker {
        DagWorker::new(WorkerKind::Cuda, node, load_s)
    }

    /// A task costing `c` on CPUs and `g` on GPUs, no transfers.
    pub fn task(workers: &[DagWorker], c: f64, g: f64) -> DagTask {
        DagTask {
            cost_s: workers
                .iter()
                .map(|w| Some(if w.is_accelerator() { g } else { c }))
                .collect(),
            transfer_s: vec![0.0; workers.len()],
            affinity: None,
            priority: 0,
            slack_s: f64::INFINITY,
        }
    }

    /// A graph task that every worker can run, data already everywhere.
    pub struct Tile {
        pub id: usize,
        pub codelet: usize,
        pub priority: i32,
    }

    impl Tile {
        /// Task `id` of codelet 1, priority 0 (independent tasks).
        pub fn job(id: usize) -> Tile {
            Tile {
                id,
                codelet: 1,
                priority: 0,
            }
        }
    }

    impl super::decide::GraphTask for Tile {
        fn id(&self) -> usize {
            self.id
        }
        fn codelet(&self) -> usize {
            self.codelet
        }
        fn units(&self) -> f64 {
            1.0
        }
        fn priority(&self) -> i32 {
            self.priority
        }
        fn implementation_on(&self, _worker: usize) -> Option<u32> {
            Some(0)
        }
        fn transfer_to_node_s(&self, _node: usize) -> Option<f64> {
            Some(0.0)
        }
        fn written_bytes_on(&self, _nodes: &[usize], _out: &mut [f64]) {}
        fn input_on_node(&self, _node: usize) -> bool {
            true
        }
    }

    /// Predicted makespan of an assignment (loads plus costs; transfers
    /// overlap with the backlog as in HEFT's finish time).
    pub fn makespan(tasks: &[DagTask], workers: &[DagWorker], at: &[usize]) -> f64 {
        let mut load: Vec<f64> = workers.iter().map(|w| w.load_s).collect();
        for (t, &w) in tasks.iter().zip(at) {
            load[w] = load[w].max(t.transfer_s[w]) + t.cost_s[w].expect("capable");
        }
        load.into_iter().fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn speedup_is_cpu_over_accelerator() {
        let w = [cpu(0.0), gpu(1, 0.0)];
        assert_eq!(task(&w, 10.0, 2.0).speedup(&w), 5.0);
        let mut only_gpu = task(&w, 10.0, 2.0);
        only_gpu.cost_s[0] = None;
        assert_eq!(only_gpu.speedup(&w), f64::INFINITY);
        let mut only_cpu = task(&w, 10.0, 2.0);
        only_cpu.cost_s[1] = None;
        assert_eq!(only_cpu.speedup(&w), 0.0);
    }

    #[test]
    fn timing_spikes_do_not_change_placement() {
        use crate::rng::Rng;
        use crate::taskmode::placement::ModelBook;
        // A CPU (GEMM 80 ms) and a GPU (3 ms), 40 live samples each; in one
        // book one GPU sample in five is a 30x spike (a stalled kernel, a
        // page fault storm), as StarPU users see poison history models.
        let w = [cpu(0.0), gpu(1, 0.0)];
        let mut rng = Rng::new(3);
        let mut clean = ModelBook::default();
        let mut spiky = ModelBook::default();
        for i in 0..40 {
            let jitter = 1.0 + 0.02 * (rng.unit() - 0.5);
            clean.record_now(0, 7, 1e9, 0.08 * jitter);
            spiky.record_now(0, 7, 1e9, 0.08 * jitter);
            clean.record_now(1, 7, 1e9, 0.003 * jitter);
            let spike = if i % 5 == 2 { 30.0 } else { 1.0 };
            spiky.record_now(1, 7, 1e9, 0.003 * jitter * spike);
        }
        let batch = |book: &ModelBook| -> Vec<DagTask> {
            (0..24)
                .map(|_| DagTask {
                    cost_s: (0..2).map(|k| book.trained_prediction(k, 7, 1e9)).collect(),
                    transfer_s: vec![0.0; 2],
                    affinity: None,
                    priority: 0,
                    slack_s: f64::INFINITY,
                })
                .collect()
        };
        let (a, b) = (batch(&clean), batch(&spiky));
        let p = b[0].cost_s[1].unwrap();
        assert!(p < 0.0045, "GPU prediction {p} follows the spikes");
        // 24 GEMMs: all on the GPU (24 x 3 ms < 80 ms) in both cases.
        for m in [
            Method::Heft,
            Method::Dada {
                alpha: 0.5,
                eps: 0.01,
                cp: true,
            },
        ] {
            assert_eq!(place(m, &a, &w, None), place(m, &b, &w, None), "{m:?}");
            assert!(place(m, &b, &w, None).at.iter().all(|&x| x == 1), "{m:?}");
        }
    }

    #[test]
    fn names_never_start_with_heft() {
        for e in DAG_POLICIES {
            assert!(!e.name.starts_with("heft"), "{}", e.name);
            assert!(find(e.name).is_some());
            assert!(crate::balance::registry::find(e.name).is_none());
        }
    }
}
