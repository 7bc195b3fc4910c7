//! Divisible-load API: an application with `W` independent units of work
//! (matrix columns, genes, points) asks a `plb-core` balancer which StarPU
//! worker processes which range `[offset, offset + len)` next.
//!
//! # Protocol
//!
//! 1. After `starpu_init`, create a [`DivisibleRun`] with the total number
//!    of units, the StarPU workers to use (or
//!    [`DivisibleRun::on_all_workers`]) and a [`BalancerSpec`].
//! 2. An application thread loops on [`DivisibleRun::next_block`]. Each
//!    returned [`DlBlock`] names a StarPU worker id; the application
//!    creates a task for the block, pins it to that worker
//!    (`execute_on_a_specific_worker = 1`, `workerid = w`) and submits it
//!    *from its own thread*. `next_block` returns `Ok(None)` once every
//!    unit has been handed out and every block has been reported done.
//! 3. When a block's task finishes, the application calls
//!    [`DivisibleRun::block_done`] with the block id and the measured
//!    compute and transfer times. This may be called from the task's
//!    StarPU callback: it only records the completion, feeds it to the
//!    balancer and signals a condition variable; it never submits.
//!
//! Submission therefore never happens inside a StarPU callback, and the
//! policy never creates tasks itself.
//!
//! # Exactly once
//!
//! Units come from the balancer's `WorkPool` cursor (each unit is handed
//! out once). This module additionally checks every block the balancer
//! returns (right PU, non-empty, contiguous with the previous one, inside
//! `[0, W)`) and refuses it otherwise; every handed-out block gets a fresh
//! id and stays *in flight* until `block_done` is called for it exactly
//! once. A second `block_done`, or one for an id never issued, is an error
//! that changes nothing. A PU has at most one block in flight.
//!
//! # Time
//!
//! The balancer's clock (`now`, `finished_at`) is seconds since the run was
//! created ([`std::time::Instant`]); `finished_at` is the moment
//! `block_done` is called. `plb-core` never reads a clock.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::config::{MinBlock, Tuning, WorkerKind};
use crate::trace::{Row, Trace};
use plb_core::balance::{
    Acosta, AcostaConfig, AcostaStats, Balancer, Block, Completion, Decision, Greedy, Hdss,
    HdssConfig, HdssStats, PlbHac, PlbHacConfig, PlbHacStats, PlbHec, PlbHecConfig, PlbHecStats,
    default_initial_block,
};

/// The balancer names accepted by [`BalancerSpec::parse`].
pub const BALANCER_NAMES: &[&str] = &["greedy", "plb-hac", "plb-hec", "hdss", "acosta"];

/// Which `plb-core` balancer drives the run, with its configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum BalancerSpec {
    /// Fixed-size blocks to whichever PU asks; `None` = the shared initial
    /// block `default_initial_block(W, n)` (`max(1, ⌊0.1·W / 15n⌋)`).
    Greedy {
        /// Block size in units (`Some(0)` is invalid).
        block: Option<u64>,
    },
    /// PLB-HAC.
    PlbHac(PlbHacConfig),
    /// PLB-HeC.
    PlbHec(PlbHecConfig),
    /// HDSS.
    Hdss(HdssConfig),
    /// Acosta et al.
    Acosta(AcostaConfig),
}

impl BalancerSpec {
    /// Parses a balancer name: `greedy`, `greedy:<block>` (block size in
    /// units), `plb-hac`, `plb-hec`, `hdss`, `acosta`, with the parameters
    /// of the `PLB_*` variables ([`Tuning::from_env`]; an invalid variable
    /// is a [`DivisibleError::Config`]).
    pub fn parse(name: &str) -> Result<BalancerSpec, DivisibleError> {
        let tuning = Tuning::from_env().map_err(|e| DivisibleError::Config(e.to_string()))?;
        BalancerSpec::parse_with(name, &tuning)
    }

    /// [`BalancerSpec::parse`] with explicit parameters.
    pub fn parse_with(name: &str, tuning: &Tuning) -> Result<BalancerSpec, DivisibleError> {
        let unknown = || DivisibleError::UnknownBalancer(name.to_string());
        if let Some(block) = name.strip_prefix("greedy:") {
            return match block.trim().parse::<u64>() {
                Ok(b) if b > 0 => Ok(BalancerSpec::Greedy { block: Some(b) }),
                _ => Err(unknown()),
            };
        }
        match name {
            "greedy" => Ok(BalancerSpec::Greedy {
                block: tuning.initial_block,
            }),
            "plb-hac" => Ok(BalancerSpec::PlbHac(tuning.plb_hac())),
            "plb-hec" => Ok(BalancerSpec::PlbHec(tuning.plb_hec())),
            "hdss" => Ok(BalancerSpec::Hdss(tuning.hdss())),
            "acosta" => Ok(BalancerSpec::Acosta(tuning.acosta())),
            _ => Err(unknown()),
        }
    }

    /// The default balancer given the value of `STARPU_SCHED` (`None` when
    /// unset): that balancer if `sched` is one of [`BALANCER_NAMES`] (or
    /// `greedy:<block>`), greedy otherwise (e.g. `STARPU_SCHED=dmda`).
    pub fn from_sched(sched: Option<&str>) -> BalancerSpec {
        sched
            .and_then(|s| BalancerSpec::parse(s.trim()).ok())
            .unwrap_or(BalancerSpec::Greedy { block: None })
    }

    /// [`BalancerSpec::from_sched`] on the process's `STARPU_SCHED`
    /// (invalid `PLB_*` variables are refused earlier, by
    /// `starpu_initialize`).
    pub fn from_env() -> BalancerSpec {
        BalancerSpec::from_sched(std::env::var("STARPU_SCHED").ok().as_deref())
    }

    /// The balancer's name.
    pub fn name(&self) -> &'static str {
        match self {
            BalancerSpec::Greedy { .. } => "greedy",
            BalancerSpec::PlbHac(_) => "plb-hac",
            BalancerSpec::PlbHec(_) => "plb-hec",
            BalancerSpec::Hdss(_) => "hdss",
            BalancerSpec::Acosta(_) => "acosta",
        }
    }

    /// Resolves per-kind minimum blocks (`PLB_MIN_BLOCK=cpu=..,opencl=..`)
    /// into PLB-HAC's per-PU list, PU `p` being of kind `kinds[p]`; any
    /// other spec, an explicit per-PU list or uniform minimums are kept.
    pub fn with_worker_kinds(mut self, kinds: &[WorkerKind], min: &MinBlock) -> BalancerSpec {
        if let BalancerSpec::PlbHac(c) = &mut self
            && c.min_block_per_pu.is_empty()
            && !min.is_uniform()
        {
            c.min_block_per_pu = kinds.iter().map(|&k| min.of(k)).collect();
        }
        self
    }

    /// The balancer over `n` PUs and `total` units, boxed (for drivers that
    /// need no per-balancer statistics, such as task-mode epochs).
    pub fn into_balancer(
        self,
        n: usize,
        total: u64,
    ) -> Result<Box<dyn Balancer + Send>, DivisibleError> {
        Ok(match self.build(n, total)? {
            Algo::Greedy(b) => Box::new(b),
            Algo::PlbHac(b) => Box::new(b),
            Algo::PlbHec(b) => Box::new(b),
            Algo::Hdss(b) => Box::new(b),
            Algo::Acosta(b) => Box::new(b),
        })
    }

    fn build(self, n: usize, total: u64) -> Result<Algo, DivisibleError> {
        let cfg = |e: &dyn fmt::Display| DivisibleError::Config(e.to_string());
        Ok(match self {
            BalancerSpec::Greedy { block: Some(0) } => {
                return Err(DivisibleError::Config(
                    "greedy: block = 0, expected >= 1".into(),
                ));
            }
            BalancerSpec::Greedy { block } => Algo::Greedy(Greedy::new(
                total,
                block.unwrap_or_else(|| default_initial_block(total, n)),
            )),
            BalancerSpec::PlbHac(c) => Algo::PlbHac(PlbHac::new(n, total, c).map_err(|e| cfg(&e))?),
            BalancerSpec::PlbHec(c) => Algo::PlbHec(PlbHec::new(n, total, c).map_err(|e| cfg(&e))?),
            BalancerSpec::Hdss(c) => Algo::Hdss(Hdss::new(n, total, c).map_err(|e| cfg(&e))?),
            BalancerSpec::Acosta(c) => Algo::Acosta(Acosta::new(n, total, c).map_err(|e| cfg(&e))?),
        })
    }
}

/// The concrete balancer (an enum rather than `Box<dyn Balancer>` so its
/// statistics stay reachable).
enum Algo {
    Greedy(Greedy),
    PlbHac(PlbHac),
    PlbHec(PlbHec),
    Hdss(Hdss),
    Acosta(Acosta),
}

impl Algo {
    fn get(&mut self) -> &mut dyn Balancer {
        match self {
            Algo::Greedy(b) => b,
            Algo::PlbHac(b) => b,
            Algo::PlbHec(b) => b,
            Algo::Hdss(b) => b,
            Algo::Acosta(b) => b,
        }
    }

    fn stats(&self) -> BalancerStats {
        match self {
            Algo::Greedy(_) => BalancerStats::Greedy,
            Algo::PlbHac(b) => BalancerStats::PlbHac(b.stats()),
            Algo::PlbHec(b) => BalancerStats::PlbHec(b.stats()),
            Algo::Hdss(b) => BalancerStats::Hdss(b.stats()),
            Algo::Acosta(b) => BalancerStats::Acosta(b.stats()),
        }
    }
}

/// The balancer's own counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BalancerStats {
    /// Greedy keeps no counters.
    Greedy,
    /// PLB-HAC's counters (refits, steps, gap blocks...).
    PlbHac(PlbHacStats),
    /// PLB-HeC's counters.
    PlbHec(PlbHecStats),
    /// HDSS's counters.
    Hdss(HdssStats),
    /// Acosta's counters.
    Acosta(AcostaStats),
}

impl BalancerStats {
    /// Model updates: PLB-HAC/PLB-HeC refits, HDSS weight fits, Acosta
    /// rebalances, 0 for greedy.
    pub fn refits(&self) -> u64 {
        match self {
            BalancerStats::Greedy => 0,
            BalancerStats::PlbHac(h) => h.refits,
            BalancerStats::PlbHec(h) => h.refits,
            BalancerStats::Hdss(h) => h.fits,
            BalancerStats::Acosta(a) => a.rebalances,
        }
    }
}

/// Why a divisible-load call failed. No error changes the run's state,
/// except [`DivisibleError::BalancerFault`] and
/// [`DivisibleError::Stalled`], which end it.
#[derive(Debug, Clone, PartialEq)]
pub enum DivisibleError {
    /// The balancer name is none of [`BALANCER_NAMES`] (or `greedy:<n>`
    /// with a bad `n`).
    UnknownBalancer(String),
    /// The balancer rejected its configuration.
    Config(String),
    /// No worker to run on (empty list, or StarPU not initialised).
    NoWorkers,
    /// A worker id is negative or listed twice.
    BadWorker(i32),
    /// `block_done` for an id that was never handed out.
    UnknownBlock(u64),
    /// `block_done` for a block already reported done.
    AlreadyDone(u64),
    /// A compute or transfer time that is negative or not finite; the
    /// block stays in flight (call `block_done` again with valid times).
    BadTime {
        /// The block.
        id: u64,
        /// The compute time given.
        compute_s: f64,
        /// The transfer time given.
        transfer_s: f64,
    },
    /// Every PU waits, nothing is in flight and units remain: the balancer
    /// can never make progress.
    Stalled {
        /// Units never handed out.
        remaining: u64,
    },
    /// The balancer returned an invalid block (wrong PU, empty, overlapping
    /// or outside `[0, W)`); it was not handed out.
    BalancerFault(String),
    /// A thread panicked while holding the run's lock.
    Poisoned,
}

impl fmt::Display for DivisibleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DivisibleError::UnknownBalancer(n) => write!(
                f,
                "unknown balancer {n:?} (expected one of {}, or greedy:<block>)",
                BALANCER_NAMES.join(", ")
            ),
            DivisibleError::Config(m) => write!(f, "invalid balancer configuration: {m}"),
            DivisibleError::NoWorkers => {
                write!(f, "no StarPU worker to run on (is StarPU initialised?)")
            }
            DivisibleError::BadWorker(w) => write!(f, "worker id {w} is negative or duplicated"),
            DivisibleError::UnknownBlock(id) => write!(f, "block {id} was never handed out"),
            DivisibleError::AlreadyDone(id) => write!(f, "block {id} was already reported done"),
            DivisibleError::BadTime {
                id,
                compute_s,
                transfer_s,
            } => write!(
                f,
                "block {id}: invalid times compute={compute_s} transfer={transfer_s} \
                 (must be finite and >= 0); the block is still in flight"
            ),
            DivisibleError::Stalled { remaining } => write!(
                f,
                "the balancer stalled: every PU waits, nothing in flight, {remaining} units left"
            ),
            DivisibleError::BalancerFault(m) => write!(f, "balancer fault: {m}"),
            DivisibleError::Poisoned => write!(f, "a thread panicked while holding the run's lock"),
        }
    }
}

impl std::error::Error for DivisibleError {}

/// A block to process: units `[offset, offset + len)` on StarPU worker
/// `worker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlBlock {
    /// Identifies the block in [`DivisibleRun::block_done`] (0, 1, 2...
    /// in hand-out order).
    pub id: u64,
    /// The StarPU worker id to pin the task to.
    pub worker: i32,
    /// The balancer's PU index (position of `worker` in the run's list).
    pub pu: usize,
    /// First unit.
    pub offset: u64,
    /// Number of units (> 0).
    pub len: u64,
}

impl DlBlock {
    /// One past the last unit.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Progress counters of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct DivisibleStats {
    /// The balancer's name.
    pub balancer: &'static str,
    /// Total units `W`.
    pub total: u64,
    /// Blocks handed out.
    pub blocks_issued: u64,
    /// Blocks reported done.
    pub blocks_done: u64,
    /// Units handed out.
    pub units_issued: u64,
    /// Units in blocks reported done.
    pub units_done: u64,
    /// Units done per PU (same order as the worker list).
    pub units_per_pu: Vec<u64>,
    /// Seconds since the run was created.
    pub elapsed_s: f64,
    /// The balancer's own counters.
    pub balancer_stats: BalancerStats,
    /// Compute plus transfer seconds reported per PU.
    pub busy_per_pu: Vec<f64>,
    /// Seconds spent inside the balancer's decisions (model fitting and
    /// solving included), measured around its calls.
    pub balancer_s: f64,
}

/// Answer of [`DivisibleRun::try_next_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Submit this block.
    Block(DlBlock),
    /// Nothing now: call again after a block in flight is reported done.
    Pending,
    /// The run is finished.
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PuState {
    /// Idle; asks the balancer at the next `next_block`.
    Asking,
    /// Has a block in flight.
    Busy,
    /// Answered `Wait`: asks again after the next completion.
    Waiting,
    /// Answered `Done`: never asks again.
    Done,
}

struct State {
    algo: Algo,
    pus: Vec<PuState>,
    /// Blocks in flight with the balancer's predicted seconds.
    in_flight: HashMap<u64, (Block, Option<f64>)>,
    next_id: u64,
    /// Units handed out so far = the next expected block offset.
    cursor: u64,
    blocks_done: u64,
    units_done: u64,
    units_per_pu: Vec<u64>,
    /// Compute plus transfer seconds reported per PU.
    busy_per_pu: Vec<f64>,
    /// Seconds spent inside the balancer (fitting and solving included).
    balancer_s: f64,
    /// PLB-HAC solutions already written to the trace.
    traced_solutions: u64,
    /// Set when the run can never finish; every later `next_block` returns it.
    fault: Option<DivisibleError>,
}

/// One divisible-load run: `W` units over a fixed list of StarPU workers.
/// `Send + Sync`: share it (e.g. in an `Arc`) between the submitting thread
/// and the tasks' callbacks.
pub struct DivisibleRun {
    total: u64,
    workers: Vec<i32>,
    name: &'static str,
    /// The resolved specification (for [`DivisibleRun::continue_with`]).
    spec: BalancerSpec,
    start: Instant,
    state: Mutex<State>,
    changed: Condvar,
    trace: Option<&'static Trace>,
}

impl fmt::Debug for DivisibleRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DivisibleRun")
            .field("total", &self.total)
            .field("workers", &self.workers)
            .field("balancer", &self.name)
            .finish_non_exhaustive()
    }
}

impl DivisibleRun {
    /// A run of `total` units on the StarPU workers `workers` (PU `p` of
    /// the balancer is `workers[p]`). `total` may be 0 (the run is then
    /// finished at once) or smaller than the number of workers.
    pub fn new(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
    ) -> Result<DivisibleRun, DivisibleError> {
        if workers.is_empty() {
            return Err(DivisibleError::NoWorkers);
        }
        for (i, &w) in workers.iter().enumerate() {
            if w < 0 || workers[..i].contains(&w) {
                return Err(DivisibleError::BadWorker(w));
            }
        }
        let n = workers.len();
        // Per-kind minimums (PLB_MIN_BLOCK=cpu=..,opencl=..) need the worker
        // kinds, known only now.
        let tuning = Tuning::from_env().map_err(|e| DivisibleError::Config(e.to_string()))?;
        let spec = if tuning.min_block.is_uniform() {
            spec
        } else {
            spec.with_worker_kinds(&crate::starpu::worker_kinds(workers), &tuning.min_block)
        };
        let algo = spec.clone().build(n, total)?;
        DivisibleRun::with_algo(total, workers, spec, algo)
    }

    fn with_algo(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
        algo: Algo,
    ) -> Result<DivisibleRun, DivisibleError> {
        let n = workers.len();
        let name = spec.name();
        let trace = crate::trace::open_from_env().map_err(DivisibleError::Config)?;
        Ok(DivisibleRun {
            total,
            workers: workers.to_vec(),
            name,
            spec,
            start: Instant::now(),
            state: Mutex::new(State {
                algo,
                pus: vec![PuState::Asking; n],
                in_flight: HashMap::new(),
                next_id: 0,
                cursor: 0,
                blocks_done: 0,
                units_done: 0,
                units_per_pu: vec![0; n],
                busy_per_pu: vec![0.0; n],
                balancer_s: 0.0,
                traced_solutions: 0,
                fault: None,
            }),
            changed: Condvar::new(),
            trace,
        })
    }

    /// A new run of `total` units on the same workers with the same
    /// balancer, continuing from what this one learned (the next pass of an
    /// iterative application such as k-means): PLB-HAC keeps its sample
    /// stores and, once every worker has a model, skips the training
    /// ([`PlbHac::resume`]); the other balancers start afresh (their
    /// algorithms define no carry-over). Call it once this run is finished
    /// (its timings are then all included).
    pub fn continue_with(&self, total: u64) -> Result<DivisibleRun, DivisibleError> {
        let algo = match (&self.lock()?.algo, &self.spec) {
            (Algo::PlbHac(prev), BalancerSpec::PlbHac(cfg)) => Algo::PlbHac(
                PlbHac::resume(prev, total, cfg.clone())
                    .map_err(|e| DivisibleError::Config(e.to_string()))?,
            ),
            _ => self.spec.clone().build(self.workers.len(), total)?,
        };
        DivisibleRun::with_algo(total, &self.workers, self.spec.clone(), algo)
    }

    /// A run on every StarPU worker (`0..starpu_worker_get_count()`);
    /// StarPU must be initialised ([`DivisibleError::NoWorkers`] otherwise).
    pub fn on_all_workers(total: u64, spec: BalancerSpec) -> Result<DivisibleRun, DivisibleError> {
        DivisibleRun::new(total, &crate::starpu::all_worker_ids(), spec)
    }

    /// Total units `W`.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The StarPU worker ids, indexed by PU.
    pub fn workers(&self) -> &[i32] {
        &self.workers
    }

    /// The balancer's name.
    pub fn balancer_name(&self) -> &'static str {
        self.name
    }

    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, DivisibleError> {
        self.state.lock().map_err(|_| DivisibleError::Poisoned)
    }

    /// The next block to submit, blocking while every idle PU waits and
    /// blocks are in flight. `Ok(None)`: the run is finished (every unit
    /// handed out and reported done; every later call returns `Ok(None)`
    /// too). Idle PUs are asked in PU order.
    pub fn next_block(&self) -> Result<Option<DlBlock>, DivisibleError> {
        let mut st = self.lock()?;
        loop {
            match self.poll(&mut st)? {
                Next::Block(b) => return Ok(Some(b)),
                Next::Finished => return Ok(None),
                Next::Pending => {}
            }
            st = self
                .changed
                .wait(st)
                .map_err(|_| DivisibleError::Poisoned)?;
        }
    }

    /// [`DivisibleRun::next_block`] without blocking: [`Next::Pending`]
    /// when no block can be handed out until a block in flight completes
    /// (for event loops that also wait on other things).
    pub fn try_next_block(&self) -> Result<Next, DivisibleError> {
        let mut st = self.lock()?;
        self.poll(&mut st)
    }

    fn poll(&self, st: &mut State) -> Result<Next, DivisibleError> {
        {
            if let Some(e) = &st.fault {
                return Err(e.clone());
            }
            if let Some(b) = self.ask_idle(st)? {
                return Ok(Next::Block(b));
            }
            // A `Wait` can itself change the balancer's state (PLB-HAC: the
            // asker opens a step in which its own share is 0), so with
            // nothing in flight the waiting PUs are asked again, twice,
            // before the run is declared stalled.
            for _ in 0..2 {
                if !st.in_flight.is_empty() || !st.pus.contains(&PuState::Waiting) {
                    break;
                }
                for s in st.pus.iter_mut() {
                    if *s == PuState::Waiting {
                        *s = PuState::Asking;
                    }
                }
                if let Some(b) = self.ask_idle(st)? {
                    return Ok(Next::Block(b));
                }
            }
            if st.in_flight.is_empty() {
                if st.pus.iter().all(|&s| s == PuState::Done) {
                    let left = self.total - st.units_done;
                    if left != 0 {
                        // Every PU is done but units were never handed out.
                        let e = DivisibleError::BalancerFault(format!(
                            "every PU is done with {left} units never handed out"
                        ));
                        st.fault = Some(e.clone());
                        return Err(e);
                    }
                    return Ok(Next::Finished);
                }
                let e = DivisibleError::Stalled {
                    remaining: self.total - st.cursor,
                };
                st.fault = Some(e.clone());
                self.changed.notify_all();
                return Err(e);
            }
            Ok(Next::Pending)
        }
    }

    /// Asks every `Asking` PU in order; returns the first block.
    fn ask_idle(&self, st: &mut State) -> Result<Option<DlBlock>, DivisibleError> {
        let now = self.now();
        for pu in 0..st.pus.len() {
            if st.pus[pu] != PuState::Asking {
                continue;
            }
            let t0 = Instant::now();
            let decision = st.algo.get().next(pu, now);
            st.balancer_s += t0.elapsed().as_secs_f64();
            self.trace_solutions(st);
            match decision {
                Decision::Run(b) => {
                    if b.pu != pu || b.len == 0 || b.offset != st.cursor || b.end() > self.total {
                        let e = DivisibleError::BalancerFault(format!(
                            "PU {pu} was given {b:?}; expected a non-empty block of PU {pu} \
                             starting at unit {} within {}",
                            st.cursor, self.total
                        ));
                        st.fault = Some(e.clone());
                        self.changed.notify_all();
                        return Err(e);
                    }
                    let id = st.next_id;
                    st.next_id += 1;
                    st.cursor = b.end();
                    st.pus[pu] = PuState::Busy;
                    let predicted = st.algo.get().predicted_s(pu);
                    st.in_flight.insert(id, (b, predicted));
                    return Ok(Some(DlBlock {
                        id,
                        worker: self.workers[pu],
                        pu,
                        offset: b.offset,
                        len: b.len,
                    }));
                }
                Decision::Wait => st.pus[pu] = PuState::Waiting,
                Decision::Done => st.pus[pu] = PuState::Done,
            }
        }
        Ok(None)
    }

    /// Block `id` finished; `compute_s` is the time its worker spent in the
    /// codelet, `transfer_s` the time spent moving its data (0 if unknown).
    /// Callable from any thread, including a StarPU task callback. Errors
    /// (unknown id, second call, bad times) change nothing.
    pub fn block_done(
        &self,
        id: u64,
        compute_s: f64,
        transfer_s: f64,
    ) -> Result<(), DivisibleError> {
        let mut st = self.lock()?;
        let Some(&(block, predicted)) = st.in_flight.get(&id) else {
            return Err(if id < st.next_id {
                DivisibleError::AlreadyDone(id)
            } else {
                DivisibleError::UnknownBlock(id)
            });
        };
        let valid = |t: f64| t.is_finite() && t >= 0.0;
        if !valid(compute_s) || !valid(transfer_s) {
            return Err(DivisibleError::BadTime {
                id,
                compute_s,
                transfer_s,
            });
        }
        st.in_flight.remove(&id);
        let finished_at = self.now();
        let t0 = Instant::now();
        st.algo.get().completed(Completion {
            block,
            compute_s,
            transfer_s,
            finished_at,
        });
        st.balancer_s += t0.elapsed().as_secs_f64();
        st.blocks_done += 1;
        st.units_done += block.len;
        st.units_per_pu[block.pu] += block.len;
        st.busy_per_pu[block.pu] += compute_s + transfer_s;
        if let Some(t) = self.trace {
            let end = t.since_open(self.start) + finished_at;
            t.write(&Row {
                kind: "block",
                source: self.name,
                worker: i64::from(self.workers[block.pu]),
                start_s: end - compute_s - transfer_s,
                end_s: end,
                units: block.len as f64,
                predicted_s: predicted,
                detail: &id.to_string(),
            });
        }
        for s in st.pus.iter_mut() {
            if *s == PuState::Waiting {
                *s = PuState::Asking;
            }
        }
        st.pus[block.pu] = PuState::Asking;
        // Notified under the lock: once it is released this call touches
        // the run no more, so a C application may destroy the run as soon as
        // `plb_dl_next` has seen the last completion.
        self.changed.notify_all();
        drop(st);
        Ok(())
    }

    /// Blocks handed out and not yet reported done.
    pub fn in_flight(&self) -> usize {
        self.lock().map(|st| st.in_flight.len()).unwrap_or(0)
    }

    /// Progress and balancer counters.
    pub fn stats(&self) -> Result<DivisibleStats, DivisibleError> {
        let st = self.lock()?;
        Ok(DivisibleStats {
            balancer: self.name,
            total: self.total,
            blocks_issued: st.next_id,
            blocks_done: st.blocks_done,
            units_issued: st.cursor,
            units_done: st.units_done,
            units_per_pu: st.units_per_pu.clone(),
            elapsed_s: self.now(),
            balancer_stats: st.algo.stats(),
            busy_per_pu: st.busy_per_pu.clone(),
            balancer_s: st.balancer_s,
        })
    }

    /// Writes PLB-HAC's new step solutions to the trace: one `solution` row
    /// per PU (time of the solve, `x_p`, predicted step duration, step).
    fn trace_solutions(&self, st: &mut State) {
        let (Some(t), Algo::PlbHac(hac)) = (self.trace, &st.algo) else {
            return;
        };
        let solves = hac.stats().solves;
        let new = solves.saturating_sub(st.traced_solutions) as usize;
        if new == 0 {
            return;
        }
        let kept = hac.solutions().len();
        for sol in hac.solutions().skip(kept.saturating_sub(new)) {
            let at = t.since_open(self.start) + sol.time;
            for (pu, &x) in sol.units.iter().enumerate() {
                t.write(&Row {
                    kind: "solution",
                    source: self.name,
                    worker: i64::from(self.workers[pu]),
                    start_s: at,
                    end_s: at,
                    units: x as f64,
                    predicted_s: Some(sol.predicted_finish - sol.time),
                    detail: &sol.step.to_string(),
                });
            }
        }
        st.traced_solutions = solves;
    }

    /// The `PLB_SUMMARY` lines of the run: totals, then one line per PU.
    pub fn summary_lines(&self) -> Vec<String> {
        let Ok(s) = self.stats() else {
            return Vec::new();
        };
        let mut lines = vec![format!(
            "plb: divisible balancer={} units={} done={} blocks={} elapsed_ms={} refits={} solve_us={}",
            s.balancer,
            s.total,
            s.units_done,
            s.blocks_done,
            (s.elapsed_s * 1e3).round() as u64,
            s.balancer_stats.refits(),
            (s.balancer_s * 1e6).round() as u64,
        )];
        for (pu, &w) in self.workers.iter().enumerate() {
            let pct = if s.elapsed_s > 0.0 {
                (100.0 * s.busy_per_pu[pu] / s.elapsed_s).clamp(0.0, 100.0)
            } else {
                0.0
            };
            lines.push(format!(
                "plb:   worker={w} busy={pct:.1}% idle={:.1}% units={}",
                100.0 - pct,
                s.units_per_pu[pu]
            ));
        }
        lines
    }
}

impl Drop for DivisibleRun {
    fn drop(&mut self) {
        if crate::stats::summary_requested() {
            crate::stats::print_summary(&self.summary_lines());
        }
        if let Some(t) = self.trace {
            t.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a run with no StarPU: blocks "finish" in hand-out order.
    fn drain(run: &DivisibleRun) -> Vec<DlBlock> {
        let mut out = Vec::new();
        let mut pending = std::collections::VecDeque::new();
        loop {
            // Keep every PU busy, then complete the oldest block.
            match run.try_next_block() {
                Ok(Next::Block(b)) => {
                    pending.push_back(b);
                    continue;
                }
                Ok(Next::Pending) => {}
                Ok(Next::Finished) => break,
                Err(e) => panic!("{e}"),
            }
            if let Some(b) = pending.pop_front() {
                run.block_done(b.id, 1e-3 + b.len as f64 * 1e-6 * (b.pu + 1) as f64, 0.0)
                    .unwrap();
                out.push(b);
            }
        }
        assert!(pending.is_empty());
        out
    }

    #[test]
    fn parse_names() {
        for n in BALANCER_NAMES {
            assert_eq!(BalancerSpec::parse(n).unwrap().name(), *n);
        }
        assert_eq!(
            BalancerSpec::parse("greedy:64").unwrap(),
            BalancerSpec::Greedy { block: Some(64) }
        );
        for bad in ["", "Greedy", "eager", "greedy:", "greedy:0", "greedy:x"] {
            assert!(matches!(
                BalancerSpec::parse(bad),
                Err(DivisibleError::UnknownBalancer(_))
            ));
        }
        assert_eq!(BalancerSpec::from_sched(Some("hdss")).name(), "hdss");
        assert_eq!(BalancerSpec::from_sched(Some("dmda")).name(), "greedy");
        assert_eq!(BalancerSpec::from_sched(None).name(), "greedy");
    }

    #[test]
    fn every_balancer_covers_without_starpu() {
        for total in [0u64, 1, 3, 100_000] {
            for n in BALANCER_NAMES {
                let run =
                    DivisibleRun::new(total, &[4, 7, 9], BalancerSpec::parse(n).unwrap()).unwrap();
                let mut blocks = drain(&run);
                blocks.sort_by_key(|b| b.offset);
                let mut next = 0;
                for b in &blocks {
                    assert_eq!(b.offset, next, "{n} W={total}");
                    assert_eq!(b.worker, [4, 7, 9][b.pu]);
                    next = b.end();
                }
                assert_eq!(next, total, "{n} W={total}");
                let s = run.stats().unwrap();
                assert_eq!(s.units_done, total);
                assert_eq!(run.in_flight(), 0);
                assert_eq!(run.next_block(), Ok(None));
            }
        }
    }

    #[test]
    fn continued_plb_hac_run_skips_training_and_covers() {
        let spec = BalancerSpec::PlbHac(PlbHacConfig::default());
        let run = DivisibleRun::new(50_000, &[0, 1], spec).unwrap();
        drain(&run);
        let stats = |r: &DivisibleRun| match r.stats().unwrap().balancer_stats {
            BalancerStats::PlbHac(h) => h,
            other => panic!("{other:?}"),
        };
        assert!(stats(&run).training_blocks > 0);
        let next = run.continue_with(20_000).unwrap();
        let mut blocks = drain(&next);
        assert_eq!(stats(&next).training_blocks, 0);
        blocks.sort_by_key(|b| b.offset);
        assert_eq!(blocks.iter().map(|b| b.len).sum::<u64>(), 20_000);
        assert!(blocks.windows(2).all(|w| w[0].end() == w[1].offset));
        // Greedy has nothing to carry over but continues all the same.
        let g = DivisibleRun::new(100, &[3], BalancerSpec::Greedy { block: Some(7) }).unwrap();
        drain(&g);
        assert_eq!(drain(&g.continue_with(30).unwrap()).len(), 5);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(
            DivisibleRun::new(10, &[], BalancerSpec::Greedy { block: None }).unwrap_err(),
            DivisibleError::NoWorkers
        );
        assert_eq!(
            DivisibleRun::new(10, &[0, 0], BalancerSpec::Greedy { block: None }).unwrap_err(),
            DivisibleError::BadWorker(0)
        );
        assert!(matches!(
            DivisibleRun::new(10, &[0], BalancerSpec::Greedy { block: Some(0) }),
            Err(DivisibleError::Config(_))
        ));
        let run = DivisibleRun::new(10, &[0], BalancerSpec::Greedy { block: Some(4) }).unwrap();
        assert_eq!(
            run.block_done(0, 0.0, 0.0),
            Err(DivisibleError::UnknownBlock(0))
        );
        let b = run.next_block().unwrap().unwrap();
        assert!(matches!(
            run.block_done(b.id, f64::NAN, 0.0),
            Err(DivisibleError::BadTime { .. })
        ));
        assert!(matches!(
            run.block_done(b.id, 1.0, -1.0),
            Err(DivisibleError::BadTime { .. })
        ));
        run.block_done(b.id, 0.1, 0.0).unwrap();
        assert_eq!(
            run.block_done(b.id, 0.1, 0.0),
            Err(DivisibleError::AlreadyDone(b.id))
        );
        assert_eq!(
            run.block_done(99, 0.1, 0.0),
            Err(DivisibleError::UnknownBlock(99))
        );
        let s = run.stats().unwrap();
        assert_eq!((s.blocks_done, s.units_done), (1, 4));
    }
}
