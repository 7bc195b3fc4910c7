//! PLB-HAC (de Camargo et al., §3 and Algorithm 1) as an event-driven
//! [`Balancer`].
//!
//! # Phases
//!
//! 1. **Training.** Every PU gets a block of `x_init` units. The first PU to
//!    finish it gets `2·x_init`; every other PU `p`, when it finishes its
//!    first block, gets `2·x_init·R_p`, `R_p = d_fastest / d_p` (`d` = the
//!    measured duration, compute + transfer, of the first block). Each PU's
//!    model is refitted after each of its blocks (two sizes: the papers'
//!    "initially fitted using two points").
//! 2. **Synchronisation** (Fig. 3: the only one of the run). A PU that has
//!    finished both training blocks waits ([`Decision::Wait`]) until every PU
//!    it must wait for has too; then the first PU to ask opens virtual step 1.
//!    *Stragglers* are not waited for: the set of PUs to wait for is frozen
//!    when the first PU finishes its training, and excludes the PUs still in
//!    their *first* block at that moment (they are ≥ 3× slower than the
//!    fastest PU, and a PU of near-zero speed would otherwise stall every
//!    other PU for its whole first block). A straggler finishes its training
//!    on its own and joins at the next virtual step it can take.
//! 3. **Asynchronous execution in virtual steps.** A solution `X` (one block
//!    size per PU) belongs to a virtual step. A PU that asks for work and has
//!    not yet taken its block of the current step takes `X[p]` (the most
//!    recent solution, whatever step it was in before). A PU that already
//!    took a (non-empty) block of the current step is the first to enter the
//!    next one: it opens step `k + 1` by solving eq. (3) with every PU's
//!    latest model ([`solve_with_fallback`]), then takes its own block. No
//!    other synchronisation. A PU whose `X[p]` is 0 (too slow to be worth a
//!    block, or a straggler without a model yet) waits and never opens a
//!    step itself, so zero-share PUs cannot spin the step counter.
//! 4. **Gap filling.** When a regular (step) block finishes more than
//!    `gap_threshold_s` before the time its PU's model predicted when the
//!    block was handed out, the PU's next request gets an extra block sized,
//!    with the refitted model, to fill the gap (`E_p(x) ≤ gap`). Gap blocks
//!    do not count as the PU's step block and do not trigger gap filling
//!    themselves.
//!
//! # How much data a virtual step distributes (our choice; the paper leaves
//! it open)
//!
//! The paper normalises the input to 1 but hands out many steps (Fig. 3),
//! so a step distributes only part of the data. Here a step distributes a
//! fixed fraction of the total, `step_fraction·W` (default 0.1: about seven
//! steps before the decrease starts), because:
//! * a step is a model evaluation plus one block per PU, so a run pays each
//!   PU's fixed per-block cost (latency, launch) ~10–15 times: 1–1.5% of
//!   the run for a latency of 0.1% of the makespan (20 ms on a 20 s run);
//! * the granularity of adaptation is a tenth of the data: a change of speed
//!   is followed within a few steps (tested: within three);
//! * it is independent of the PUs' speeds, so the number of solves is
//!   predictable.
//!
//! Two limits shape it:
//! * **Ramp-up**: a step distributes at most `max_step_growth` (4) times the
//!   previous step's total (the first step: the total of the second training
//!   round), so the first models — fitted on two small sizes — are never
//!   extrapolated more than a few times beyond the sizes they have seen;
//! * **Tail merge**: when what would remain after the step is less than half
//!   a step, the step takes everything that remains.
//!
//! Each step is solved *offset-aware*: a PU still running a block enters the
//! solve as `busy_p + E_p(x)`, `busy_p` its block's predicted remaining time
//! under its latest model; a PU whose running block is already overdue by a
//! factor `ρ = elapsed / predicted > 1` enters as `ρ·E_p(x)` (it is at
//! least that much slower than its model says, and its own refit only comes
//! when the block ends). The PUs therefore finish the new step together
//! even though they start it at different times (asynchronous execution),
//! and each step corrects the previous step's timing errors. This keeps the
//! paper's "no synchronisation" while making the end of the run sharp.
//!
//! # Block-size decrease (our interpretation)
//!
//! Once `decrease_start·W` (0.7) units have been handed out, each new step
//! distributes `(1 − decrease_factor)` times the previous step's total
//! (`decrease_factor` = the paper's α = 0.1, so `k = 1 − α = 0.9` in
//! Algorithm 1's `X ← X·k`), compounded step after step: the "gradual
//! decrease" of the text. Applying `k = α = 0.1` literally would cut the
//! blocks tenfold at once (not gradual, and ten times the per-block costs
//! for the last 30% of the data). The decreasing step never goes below
//! `min_step_fraction·W` (and the sum of the PUs' minimum blocks).
//!
//! # Models and solver
//!
//! One [`SampleStore`] per PU (default half-life 4 samples: PLB-HAC gets
//! one sample per PU per step, so the 32-sample default of the store would
//! take dozens of steps to follow a change of speed; the floor weight keeps
//! the training sizes pinning the curve's shape). The PU's model is refitted
//! on every completion; a failed fit keeps the previous model. The solver is
//! [`Primary::Fast`] by default (the exact fast solver, microseconds; equal
//! to IPOPT's answer to 1e-6 in the property tests); [`Primary::Ipopt`]
//! (the paper's method, warm-started from the previous step) works too.
//! Real-valued block sizes are rounded with [`round_to_units`] honouring a
//! minimum block per PU.
//!
//! Results of this module's tests are simulated ([`super::sim`]), never
//! measured.

use std::collections::VecDeque;
use std::fmt;

use super::registry::{self, Args, BuildContext, Entry};
use super::{Balancer, BalancerStats, Block, Completion, Decision, PuId, WorkPool};
use crate::fit::{FitConfig, PuModel};
use crate::model::TimeModel;
use crate::rounding::round_to_units;
use crate::samples::{Sample, SampleStore, StoreConfig};
use crate::solve::{Distribution, Primary, SolverKind, solve_with_fallback};

/// Parameters of [`PlbHac`]. Checked by [`PlbHac::new`]
/// ([`PlbHacConfigError`]), never a panic.
#[derive(Debug, Clone, PartialEq)]
pub struct PlbHacConfig {
    /// Size of the first training block, in units. `None` (default):
    /// `max(1, W / (64·n))`, so the training handles about 3/64 of the data
    /// at most (first block 1/64, second ≤ 2/64), each PU's first block is
    /// ~1.6% of its equal share (small against the run, large enough against
    /// fixed costs to show the slope). Raised to the PU's minimum block.
    /// `Some(0)` is invalid.
    pub x_init: Option<u64>,
    /// Minimum block size of every PU, in units (the paper's "minimum block
    /// size that does not underutilize the GPUs"). Default 1.
    pub min_block: u64,
    /// Per-PU minimum block sizes; overrides `min_block` when not empty (its
    /// length must then equal the number of PUs). Default empty.
    pub min_block_per_pu: Vec<u64>,
    /// Units one virtual step distributes before the decrease, as a fraction
    /// of the total, in `(0, 1]`. Default 0.1.
    pub step_fraction: f64,
    /// Most a step's total may grow over the previous one (ramp-up), `>= 1`
    /// (`inf` = no ramp). Default 4.
    pub max_step_growth: f64,
    /// Smallest step total during the decrease, as a fraction of the total,
    /// in `[0, 1]`. Default 0.01.
    pub min_step_fraction: f64,
    /// A regular block that finishes this many seconds before its predicted
    /// finish earns a gap-filling block. `>= 0`, `inf` disables gap filling.
    /// Default 0.4 (the paper's 400 ms).
    pub gap_threshold_s: f64,
    /// Fraction of the data handed out after which step totals decrease, in
    /// `[0, 1]`. Default 0.7.
    pub decrease_start: f64,
    /// The paper's α: each step after `decrease_start` distributes
    /// `(1 − α)` times the previous one. In `[0, 1)`; 0 disables the
    /// decrease. Default 0.1.
    pub decrease_factor: f64,
    /// Change detection: when a step or gap block's compute time differs
    /// from its PU's model by more than this factor (measured / predicted
    /// above `1 + d` or below `1 / (1 + d)`), the PU's stored compute times
    /// are rescaled by that ratio before the new sample is added, so the
    /// model follows a change of speed (a competing load, §5.4) at once
    /// instead of over several recency half-lives. `> 0`; `inf` disables.
    /// Default 0.25.
    pub drift_threshold: f64,
    /// Primary solver of eq. (3). Default [`Primary::Fast`].
    pub solver: Primary,
    /// Sample stores of the PUs. Default: cap 128, half-life 4 samples,
    /// floor weight 0.05.
    pub store: StoreConfig,
    /// Model fitting. Default [`FitConfig::default`].
    pub fit: FitConfig,
    /// Solutions kept in [`PlbHac::solutions`] (the oldest are dropped),
    /// `>= 1`. Default 1024.
    pub history_cap: usize,
}

impl Default for PlbHacConfig {
    fn default() -> Self {
        PlbHacConfig {
            x_init: None,
            min_block: 1,
            min_block_per_pu: Vec::new(),
            step_fraction: 0.1,
            max_step_growth: 4.0,
            min_step_fraction: 0.01,
            gap_threshold_s: 0.4,
            decrease_start: 0.7,
            decrease_factor: 0.1,
            drift_threshold: 0.25,
            solver: Primary::Fast,
            store: StoreConfig {
                cap: 128,
                half_life: 4.0,
                min_weight: 0.05,
            },
            fit: FitConfig::default(),
            history_cap: 1024,
        }
    }
}

/// Why a [`PlbHacConfig`] (or the PU count) was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum PlbHacConfigError {
    /// No PU.
    NoPus,
    /// `x_init` is `Some(0)`.
    ZeroXInit,
    /// `min_block_per_pu` is neither empty nor one entry per PU.
    MinBlockLength {
        /// Entries given.
        given: usize,
        /// PUs.
        pus: usize,
    },
    /// A floating-point parameter is out of its range (named, with the
    /// value).
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// `history_cap` is 0.
    ZeroHistory,
}

impl fmt::Display for PlbHacConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlbHacConfigError::NoPus => write!(f, "PLB-HAC needs at least one PU"),
            PlbHacConfigError::ZeroXInit => write!(f, "x_init must be at least 1 unit"),
            PlbHacConfigError::MinBlockLength { given, pus } => write!(
                f,
                "min_block_per_pu has {given} entries for {pus} PUs (give none or one per PU)"
            ),
            PlbHacConfigError::OutOfRange { field, value } => {
                write!(f, "{field} = {value} is out of range")
            }
            PlbHacConfigError::ZeroHistory => write!(f, "history_cap must be at least 1"),
        }
    }
}

impl std::error::Error for PlbHacConfigError {}

impl PlbHacConfig {
    /// Checks every field (`n` = number of PUs).
    pub fn validate(&self, n: usize) -> Result<(), PlbHacConfigError> {
        let range = |field: &'static str, value: f64, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(PlbHacConfigError::OutOfRange { field, value })
            }
        };
        if n == 0 {
            return Err(PlbHacConfigError::NoPus);
        }
        if self.x_init == Some(0) {
            return Err(PlbHacConfigError::ZeroXInit);
        }
        if !self.min_block_per_pu.is_empty() && self.min_block_per_pu.len() != n {
            return Err(PlbHacConfigError::MinBlockLength {
                given: self.min_block_per_pu.len(),
                pus: n,
            });
        }
        let v = self.step_fraction;
        range("step_fraction", v, v > 0.0 && v <= 1.0)?;
        let v = self.max_step_growth;
        range("max_step_growth", v, v >= 1.0)?;
        let v = self.min_step_fraction;
        range("min_step_fraction", v, (0.0..=1.0).contains(&v))?;
        let v = self.gap_threshold_s;
        range("gap_threshold_s", v, v >= 0.0)?;
        let v = self.decrease_start;
        range("decrease_start", v, (0.0..=1.0).contains(&v))?;
        let v = self.decrease_factor;
        range("decrease_factor", v, (0.0..1.0).contains(&v))?;
        let v = self.drift_threshold;
        range("drift_threshold", v, v > 0.0)?;
        if self.history_cap == 0 {
            return Err(PlbHacConfigError::ZeroHistory);
        }
        Ok(())
    }
}

/// One solution of eq. (3): the block sizes of one virtual step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSolution {
    /// Virtual step it opened (1, 2, …).
    pub step: u64,
    /// When it was computed (the balancer's clock).
    pub time: f64,
    /// The PU that entered the step first and solved.
    pub solver_pu: PuId,
    /// Units the step distributes (sum of `units`).
    pub total: u64,
    /// Rounded block size of each PU (0: no block in this step).
    pub units: Vec<u64>,
    /// `units[p] / total`.
    pub shares: Vec<f64>,
    /// Predicted time at which the PUs finish this step's blocks.
    pub predicted_finish: f64,
    /// The method that solved it.
    pub solver: SolverKind,
}

/// Counters for observability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlbHacStats {
    /// Training blocks handed out.
    pub training_blocks: u64,
    /// Regular (step) blocks handed out.
    pub step_blocks: u64,
    /// Gap-filling blocks handed out.
    pub gap_blocks: u64,
    /// Units handed out in gap-filling blocks.
    pub gap_units: u64,
    /// Successful model refits.
    pub refits: u64,
    /// Refits that failed (the previous model was kept).
    pub fit_failures: u64,
    /// Samples the stores refused.
    pub rejected_samples: u64,
    /// Solves of eq. (3) (= virtual steps opened).
    pub solves: u64,
    /// Solves in which the primary solver failed and a fallback answered.
    pub solver_fallbacks: u64,
    /// PUs not waited for at the synchronisation (still in their first
    /// training block).
    pub stragglers: u64,
    /// Detected changes of speed (models rescaled; see
    /// [`PlbHacConfig::drift_threshold`]).
    pub drift_rescales: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Train {
    /// Never asked.
    Fresh,
    /// First training block running.
    First,
    /// First block done in `d` seconds; asks for the second.
    AfterFirst(f64),
    /// Second training block running.
    Second,
    /// Both training blocks done.
    Ready,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Training,
    Step,
    Gap,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    start: f64,
    len: u64,
    kind: Kind,
    /// Finish predicted when it was handed out (step blocks only).
    predicted_end: Option<f64>,
}

/// The PLB-HAC balancer (see the module documentation).
#[derive(Debug, Clone)]
pub struct PlbHac {
    cfg: PlbHacConfig,
    n: usize,
    pool: WorkPool,
    x_init: u64,
    min_block: Vec<u64>,
    stores: Vec<SampleStore>,
    models: Vec<Option<PuModel>>,
    train: Vec<Train>,
    /// Duration of the first finished training block.
    fastest_first: Option<f64>,
    /// PUs waited for at the synchronisation (frozen when the first PU
    /// becomes ready).
    wait_set: Option<Vec<bool>>,
    released: bool,
    /// Built by [`PlbHac::resume`]: its stores are fitted at the first
    /// request.
    resume_pending: bool,
    running: Vec<Option<Running>>,
    /// Current virtual step (0 = none opened yet).
    step: u64,
    /// Block sizes of the current step.
    x: Vec<u64>,
    /// Distribution of the current step (IPOPT warm start).
    last_dist: Option<Distribution>,
    /// Last step whose block each PU took (or skipped with a 0 share).
    pu_step: Vec<u64>,
    /// Whether the PU's block in `pu_step` was non-empty.
    pu_had_block: Vec<bool>,
    /// Total of the previous step (or of the second training round).
    last_step_total: u64,
    training_round2_total: u64,
    gap_pending: Vec<Option<f64>>,
    history: VecDeque<StepSolution>,
    stats: PlbHacStats,
}

impl PlbHac {
    /// PLB-HAC over `n_pus` PUs and `total` units.
    pub fn new(n_pus: usize, total: u64, cfg: PlbHacConfig) -> Result<PlbHac, PlbHacConfigError> {
        cfg.validate(n_pus)?;
        let min_block: Vec<u64> = if cfg.min_block_per_pu.is_empty() {
            vec![cfg.min_block; n_pus]
        } else {
            cfg.min_block_per_pu.clone()
        };
        let x_init = cfg
            .x_init
            .unwrap_or_else(|| (total / (64 * n_pus as u64)).max(1));
        Ok(PlbHac {
            n: n_pus,
            pool: WorkPool::new(total),
            x_init,
            stores: vec![SampleStore::new(cfg.store); n_pus],
            models: vec![None; n_pus],
            train: vec![Train::Fresh; n_pus],
            fastest_first: None,
            wait_set: None,
            released: false,
            running: vec![None; n_pus],
            step: 0,
            x: vec![0; n_pus],
            last_dist: None,
            pu_step: vec![0; n_pus],
            pu_had_block: vec![false; n_pus],
            last_step_total: 0,
            training_round2_total: 0,
            gap_pending: vec![None; n_pus],
            history: VecDeque::new(),
            stats: PlbHacStats::default(),
            min_block,
            resume_pending: false,
            cfg,
        })
    }

    /// PLB-HAC over `total` new units that continues from `previous`'s
    /// learned state (same PUs, e.g. the next iteration of an iterative
    /// application): its sample stores are kept and, when every PU's store
    /// yields a model, the training is skipped and the first request opens
    /// virtual step 1 at once (without the ramp-up limit). Otherwise this is
    /// [`PlbHac::new`] with the stores kept. Cheap: the stores are fitted
    /// at the first request (task mode builds balancers under its lock and
    /// runs them outside it).
    pub fn resume(
        previous: &PlbHac,
        total: u64,
        cfg: PlbHacConfig,
    ) -> Result<PlbHac, PlbHacConfigError> {
        let mut b = PlbHac::new(previous.n, total, cfg)?;
        b.stores = previous.stores.clone();
        b.resume_pending = true;
        Ok(b)
    }

    /// [`PlbHac::resume`]'s fits, at the first request.
    fn finish_resume(&mut self) {
        let fit_cfg = self.cfg.fit.clone();
        let models: Vec<Option<PuModel>> = self
            .stores
            .iter_mut()
            .map(|s| s.fit(&fit_cfg).ok().map(|f| f.model))
            .collect();
        if models.iter().all(Option::is_some) {
            self.models = models;
            self.train = vec![Train::Ready; self.n];
            self.wait_set = Some(vec![false; self.n]);
            self.released = true;
            self.training_round2_total = self.pool.total();
            self.stats.refits = self.n as u64;
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PlbHacConfig {
        &self.cfg
    }

    /// The first training block size actually used.
    pub fn x_init(&self) -> u64 {
        self.x_init
    }

    /// The solutions of the virtual steps, oldest first (at most
    /// `history_cap`).
    pub fn solutions(&self) -> impl ExactSizeIterator<Item = &StepSolution> + '_ {
        self.history.iter()
    }

    /// Counters.
    pub fn stats(&self) -> PlbHacStats {
        self.stats
    }

    /// Current virtual step (0 while training).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Latest model of each PU (`None` before its first sample).
    pub fn models(&self) -> &[Option<PuModel>] {
        &self.models
    }

    fn hand_out(&mut self, pu: PuId, len: u64, kind: Kind, now: f64) -> Option<Block> {
        let len = len.max(1);
        let block = self.pool.take(pu, len as f64)?;
        let predicted_end = match (kind, &self.models[pu]) {
            (Kind::Step, Some(m)) => Some(now + m.time(block.len as f64)),
            _ => None,
        };
        self.running[pu] = Some(Running {
            start: now,
            len: block.len,
            kind,
            predicted_end,
        });
        match kind {
            Kind::Training => self.stats.training_blocks += 1,
            Kind::Step => self.stats.step_blocks += 1,
            Kind::Gap => {
                self.stats.gap_blocks += 1;
                self.stats.gap_units += block.len;
            }
        }
        Some(block)
    }

    fn run(&mut self, pu: PuId, len: u64, kind: Kind, now: f64) -> Decision {
        match self.hand_out(pu, len, kind, now) {
            Some(b) => Decision::Run(b),
            None => Decision::Done,
        }
    }

    fn training_next(&mut self, pu: PuId, now: f64) -> Option<Decision> {
        match self.train[pu] {
            Train::Fresh => {
                self.train[pu] = Train::First;
                Some(self.run(pu, self.x_init.max(self.min_block[pu]), Kind::Training, now))
            }
            Train::AfterFirst(d) => {
                let fastest = self.fastest_first.unwrap_or(d);
                let r = if d > 0.0 {
                    (fastest / d).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                let len = ((2.0 * self.x_init as f64 * r).round() as u64).max(self.min_block[pu]);
                self.train[pu] = Train::Second;
                self.training_round2_total += len;
                Some(self.run(pu, len, Kind::Training, now))
            }
            Train::Ready => None,
            // Asked while running: a driver error; answer without state
            // change.
            Train::First | Train::Second => Some(Decision::Wait),
        }
    }

    /// Whether the synchronisation after training is over.
    fn barrier_open(&mut self) -> bool {
        if self.released {
            return true;
        }
        let Some(wait) = &self.wait_set else {
            return false;
        };
        let open = (0..self.n).all(|p| !wait[p] || self.train[p] == Train::Ready);
        if open {
            self.released = true;
        }
        open
    }

    fn step_total(&self) -> u64 {
        let w = self.pool.total() as f64;
        let rem = self.pool.remaining();
        let prev = if self.step == 0 {
            self.training_round2_total
        } else {
            self.last_step_total
        } as f64;
        let decreasing = self.pool.assigned() as f64 >= self.cfg.decrease_start * w;
        let mut base = self.cfg.step_fraction * w;
        if decreasing && self.step > 0 {
            base = base.min(prev * (1.0 - self.cfg.decrease_factor));
        }
        if prev > 0.0 {
            base = base.min(prev * self.cfg.max_step_growth);
        }
        let floor_units: u64 = (0..self.n)
            .filter(|&p| self.models[p].is_some())
            .map(|p| self.min_block[p])
            .sum();
        base = base
            .max(self.cfg.min_step_fraction * w)
            .max(floor_units as f64)
            .max(1.0);
        // Tail merge: never leave less than half a step (before the
        // decrease) or less than the floor (during it) for a last step.
        let rem_f = rem as f64;
        let leftover_min = if decreasing {
            (self.cfg.min_step_fraction * w).max(floor_units as f64)
        } else {
            0.5 * base
        };
        if rem_f - base < leftover_min {
            rem
        } else {
            (base.round() as u64).clamp(1, rem)
        }
    }

    /// Opens a new virtual step: solves eq. (3) for the PUs with a model,
    /// offset by their running blocks' predicted remaining time.
    fn open_step(&mut self, opener: PuId, now: f64) {
        let total = self.step_total();
        let included: Vec<PuId> = (0..self.n).filter(|&p| self.models[p].is_some()).collect();
        let mut units = vec![0u64; self.n];
        let mut solver = SolverKind::Empty;
        let mut finish = now;
        if included.is_empty() {
            units[opener] = total;
        } else {
            let shifted: Vec<Shifted<'_>> = included
                .iter()
                .map(|&p| {
                    let m = self.models[p].as_ref().expect("included PUs have a model");
                    let (busy, scale) = match (&self.running[p], p == opener) {
                        (Some(r), false) => {
                            let predicted = m.time(r.len as f64);
                            let elapsed = now - r.start;
                            if elapsed > predicted && predicted > 0.0 {
                                // Overdue: at least elapsed/predicted slower
                                // than its model says; nothing known about
                                // its remaining time.
                                (0.0, elapsed / predicted)
                            } else {
                                (predicted - elapsed, 1.0)
                            }
                        }
                        _ => (0.0, 1.0),
                    };
                    Shifted {
                        inner: m,
                        busy,
                        scale,
                    }
                })
                .collect();
            let dyns: Vec<&dyn TimeModel> = shifted.iter().map(|s| s as &dyn TimeModel).collect();
            let prev = self
                .last_dist
                .as_ref()
                .filter(|d| d.units.len() == included.len());
            match solve_with_fallback(&dyns, total as f64, self.cfg.solver, prev) {
                Ok(d) => {
                    if !d.fallbacks.is_empty() {
                        self.stats.solver_fallbacks += 1;
                    }
                    let mins: Vec<u64> = included.iter().map(|&p| self.min_block[p]).collect();
                    match round_to_units(&d.units, total, &mins) {
                        Ok(r) => {
                            for (i, &p) in included.iter().enumerate() {
                                units[p] = r[i];
                            }
                        }
                        Err(_) => units[opener] = total,
                    }
                    solver = d.solver;
                    finish = now + d.finish_time;
                    self.last_dist = Some(d);
                }
                Err(_) => units[opener] = total,
            }
        }
        self.stats.solves += 1;
        self.step += 1;
        self.x = units;
        self.last_step_total = total;
        let shares = self
            .x
            .iter()
            .map(|&u| {
                if total > 0 {
                    u as f64 / total as f64
                } else {
                    0.0
                }
            })
            .collect();
        if self.history.len() >= self.cfg.history_cap {
            self.history.pop_front();
        }
        self.history.push_back(StepSolution {
            step: self.step,
            time: now,
            solver_pu: opener,
            total,
            units: self.x.clone(),
            shares,
            predicted_finish: finish,
            solver,
        });
    }

    /// Takes PU `pu`'s block of the current step.
    fn take_step_block(&mut self, pu: PuId, now: f64) -> Decision {
        self.pu_step[pu] = self.step;
        let len = self.x[pu];
        self.pu_had_block[pu] = len > 0;
        if len == 0 {
            return Decision::Wait;
        }
        self.run(pu, len, Kind::Step, now)
    }

    fn gap_block(&mut self, pu: PuId, gap: f64, now: f64) -> Option<Decision> {
        let m = self.models[pu].as_ref()?;
        let rem = self.pool.remaining() as f64;
        let min = self.min_block[pu].max(1) as f64;
        if m.time(min) > gap {
            return None;
        }
        // Largest x in [min, rem] with E(x) <= gap (E is non-decreasing).
        let (mut lo, mut hi) = (min, rem.max(min));
        if m.time(hi) <= gap {
            lo = hi;
        } else {
            for _ in 0..64 {
                let mid = 0.5 * (lo + hi);
                if m.time(mid) <= gap {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
        }
        let len = lo.floor().max(min) as u64;
        Some(self.run(pu, len, Kind::Gap, now))
    }
}

/// `busy + scale·E(x)`: a PU that starts its next block after its running
/// one (`busy`), or whose running block is overdue (`scale > 1`).
struct Shifted<'a> {
    inner: &'a PuModel,
    busy: f64,
    scale: f64,
}

impl TimeModel for Shifted<'_> {
    fn time(&self, x: f64) -> f64 {
        self.busy + self.scale * self.inner.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.scale * self.inner.slope(x)
    }
}

impl Balancer for PlbHac {
    fn name(&self) -> &'static str {
        "plb-hac"
    }

    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        if std::mem::take(&mut self.resume_pending) {
            self.finish_resume();
        }
        if pu >= self.n {
            return Decision::Done;
        }
        if self.pool.remaining() == 0 {
            return Decision::Done;
        }
        if self.running[pu].is_some() {
            // Asked while running a block: a driver error; nothing changes.
            return Decision::Wait;
        }
        if let Some(d) = self.training_next(pu, now) {
            return d;
        }
        // Training done for this PU.
        if !self.barrier_open() {
            return Decision::Wait;
        }
        if let Some(gap) = self.gap_pending[pu].take() {
            if let Some(d) = self.gap_block(pu, gap, now) {
                return d;
            }
        }
        if self.step == 0 {
            self.open_step(pu, now);
            return self.take_step_block(pu, now);
        }
        if self.pu_step[pu] < self.step {
            return self.take_step_block(pu, now);
        }
        if self.pu_had_block[pu] {
            self.open_step(pu, now);
            return self.take_step_block(pu, now);
        }
        Decision::Wait
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        if pu >= self.n {
            return;
        }
        let run = self.running[pu].take();
        let duration = done.compute_s + done.transfer_s;
        let sample = Sample::new(done.block.len as f64, done.compute_s, done.transfer_s);
        if let (Some(r), Some(m)) = (&run, &self.models[pu])
            && matches!(r.kind, Kind::Step | Kind::Gap)
        {
            // Only inside the sampled size range: beyond it a mismatch is
            // the curve's extrapolation error, not a change of speed.
            let x = done.block.len as f64;
            let (lo, hi) = m.exec.range();
            let predicted = m.exec.time(x);
            let ratio = done.compute_s / predicted;
            let d = self.cfg.drift_threshold;
            if (lo..=hi).contains(&x)
                && predicted > 0.0
                && ratio.is_finite()
                && (ratio > 1.0 + d || ratio * (1.0 + d) < 1.0)
            {
                self.stores[pu].scale_compute(ratio);
                self.stats.drift_rescales += 1;
            }
        }
        if self.stores[pu].push(sample).is_err() {
            self.stats.rejected_samples += 1;
        } else {
            match self.stores[pu].fit(&self.cfg.fit) {
                Ok(f) => {
                    self.models[pu] = Some(f.model);
                    self.stats.refits += 1;
                }
                Err(_) => self.stats.fit_failures += 1,
            }
        }
        match self.train[pu] {
            Train::First => {
                if self.fastest_first.is_none() {
                    self.fastest_first = Some(duration);
                }
                self.train[pu] = Train::AfterFirst(duration);
            }
            Train::Second => {
                self.train[pu] = Train::Ready;
                if self.wait_set.is_none() {
                    let wait: Vec<bool> = self
                        .train
                        .iter()
                        .map(|t| matches!(t, Train::AfterFirst(_) | Train::Second | Train::Ready))
                        .collect();
                    self.stats.stragglers = wait.iter().filter(|w| !**w).count() as u64;
                    self.wait_set = Some(wait);
                }
            }
            _ => {}
        }
        if let Some(Running {
            kind: Kind::Step,
            predicted_end: Some(end),
            ..
        }) = run
        {
            let gap = end - done.finished_at;
            if gap > self.cfg.gap_threshold_s && gap.is_finite() {
                self.gap_pending[pu] = Some(gap);
            }
        }
    }

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    fn stats(&self) -> BalancerStats {
        let s = &self.stats;
        BalancerStats {
            counters: vec![
                ("refits", s.refits),
                ("training_blocks", s.training_blocks),
                ("step_blocks", s.step_blocks),
                ("gap_blocks", s.gap_blocks),
                ("gap_units", s.gap_units),
                ("fit_failures", s.fit_failures),
                ("rejected_samples", s.rejected_samples),
                ("solves", s.solves),
                ("solver_fallbacks", s.solver_fallbacks),
                ("stragglers", s.stragglers),
                ("drift_rescales", s.drift_rescales),
            ],
        }
    }

    fn solutions(&self) -> Vec<&StepSolution> {
        PlbHac::solutions(self).collect()
    }

    fn continue_with(&self, total: u64) -> Option<Result<Box<dyn Balancer + Send>, String>> {
        Some(
            PlbHac::resume(self, total, self.cfg.clone())
                .map(|b| Box::new(b) as Box<dyn Balancer + Send>)
                .map_err(|e| e.to_string()),
        )
    }

    fn predicted_s(&self, pu: PuId) -> Option<f64> {
        let r = self.running.get(pu)?.as_ref()?;
        r.predicted_end.map(|end| end - r.start)
    }
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let mut cfg = ctx.tuning.plb_hac_for(ctx.kinds);
    cfg.solver = registry::solver(args, ctx.tuning, cfg.solver);
    Ok(Box::new(
        PlbHac::new(ctx.pus, ctx.total, cfg).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "plb-hac",
    summary: "PLB-HAC: fitted per-worker performance curves, equal-finish-time virtual steps \
              (task mode: epochs of same-codelet tasks; divisible mode: blocks of units)",
    params: &[registry::SOLVER_PARAM],
    build,
    training_units_per_pu: super::registry::no_training,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_names_the_field() {
        let ok = PlbHacConfig::default();
        assert!(ok.validate(3).is_ok());
        assert_eq!(ok.validate(0), Err(PlbHacConfigError::NoPus));
        let bad = |f: fn(&mut PlbHacConfig)| {
            let mut c = PlbHacConfig::default();
            f(&mut c);
            PlbHac::new(2, 100, c).unwrap_err()
        };
        assert_eq!(bad(|c| c.x_init = Some(0)), PlbHacConfigError::ZeroXInit);
        assert_eq!(
            bad(|c| c.min_block_per_pu = vec![1, 2, 3]),
            PlbHacConfigError::MinBlockLength { given: 3, pus: 2 }
        );
        assert_eq!(bad(|c| c.history_cap = 0), PlbHacConfigError::ZeroHistory);
        for (f, name) in [
            (
                (|c: &mut PlbHacConfig| c.step_fraction = 0.0) as fn(&mut PlbHacConfig),
                "step_fraction",
            ),
            (|c| c.step_fraction = f64::NAN, "step_fraction"),
            (|c| c.max_step_growth = 0.5, "max_step_growth"),
            (|c| c.min_step_fraction = 1.5, "min_step_fraction"),
            (|c| c.gap_threshold_s = -1.0, "gap_threshold_s"),
            (|c| c.gap_threshold_s = f64::NAN, "gap_threshold_s"),
            (|c| c.decrease_start = 1.1, "decrease_start"),
            (|c| c.decrease_factor = 1.0, "decrease_factor"),
            (|c| c.decrease_factor = -0.1, "decrease_factor"),
        ] {
            match bad(f) {
                PlbHacConfigError::OutOfRange { field, .. } => assert_eq!(field, name),
                e => panic!("{name}: {e}"),
            }
        }
        // Infinite values where they mean "disabled" are fine.
        let c = PlbHacConfig {
            gap_threshold_s: f64::INFINITY,
            max_step_growth: f64::INFINITY,
            ..PlbHacConfig::default()
        };
        assert!(c.validate(1).is_ok());
        assert!(
            PlbHacConfigError::OutOfRange {
                field: "step_fraction",
                value: 2.0
            }
            .to_string()
            .contains("step_fraction")
        );
    }

    #[test]
    fn default_x_init_and_minimums() {
        let b = PlbHac::new(4, 25_600, PlbHacConfig::default()).unwrap();
        assert_eq!(b.x_init(), 100);
        let b = PlbHac::new(4, 3, PlbHacConfig::default()).unwrap();
        assert_eq!(b.x_init(), 1);
        assert_eq!(b.name(), "plb-hac");
        assert_eq!(b.remaining(), 3);
    }
}
