//! PLB-HeC (de Camargo et al., "Profile-based load balancing for
//! heterogeneous clusters", §III): a synchronised *training* phase of
//! rounds whose block sizes grow 1, 2, 4, 8 × the initial block scaled by
//! each PU's relative speed, more rounds until every PU's fit has R² > 0.7
//! or 20 % of the data has been handed out; then fixed block sizes from the
//! equal-finish-time system over the remaining data; a finish-time
//! difference beyond the threshold (10 % of a block's predicted time)
//! triggers a synchronised rebalance: refit every PU, re-solve for what
//! remains.
//!
//! The exact rules (and every interpretation) are in `docs/balancers.md`,
//! section "PLB-HeC".

use super::registry::{self, Args, BuildContext, Entry};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId, WorkPool};
use crate::fit::{FitConfig, PuModel, R2_TARGET};
use crate::model::{LinearModel, TimeModel};
use crate::rounding::round_to_units;
use crate::samples::{Sample, SampleStore, StoreConfig};
use crate::solve::{Distribution, Primary, solve_with_fallback};

/// The automatic initial block shared by the baselines: the papers choose
/// the initial block "so that the initial phase takes about 10 % of the
/// execution time" and use the same one for every algorithm. A 1-2-4-8
/// ramp hands out at most `15 · initial` units per PU, so
/// `initial = max(1, ⌊0.10 · W / (15 · n)⌋)` keeps the first phase at or
/// below about 10 % of the data.
pub fn default_initial_block(total: u64, n_pus: usize) -> u64 {
    let n = n_pus.max(1) as f64;
    ((0.10 * total as f64 / (15.0 * n)).floor() as u64).max(1)
}

/// Parameters of [`PlbHec`]. Validated by [`PlbHec::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlbHecConfig {
    /// The first training block (`initialBlockSize`), in units. 0 (the
    /// default) = [`default_initial_block`].
    pub initial_block: u64,
    /// Training rounds always run; round `k` (from 0) uses multiplier `2^k`.
    /// `>= 1`. Default 4 (the paper's four points, multipliers 1, 2, 4, 8).
    pub training_rounds: u32,
    /// R² every PU's execution-time fit must exceed to end the training.
    /// Finite. Default 0.7 (the paper, [`R2_TARGET`]).
    pub r2_target: f64,
    /// Fraction of the data, in `(0, 1]`, after which training stops even
    /// if some R² is still low. Default 0.2 (the paper).
    pub training_fraction: f64,
    /// Rebalancing threshold, as a fraction of a block's predicted time:
    /// finite, `> 0`. Default 0.10 (the paper's "about 10 % of the execution
    /// time of a single block").
    pub threshold: f64,
    /// The remaining data is processed in this many blocks per PU: the
    /// equal-finish-time system is solved for `⌈R / steps⌉` units. `>= 1`.
    /// Default 4 (our choice; the paper repeats same-size blocks without
    /// saying how many).
    pub exec_steps: u32,
    /// First solver tried. Default IPOPT (the paper's method).
    pub primary: Primary,
    /// Curve fitting.
    pub fit: FitConfig,
    /// Per-PU sample stores.
    pub store: StoreConfig,
}

impl Default for PlbHecConfig {
    fn default() -> Self {
        PlbHecConfig {
            initial_block: 0,
            training_rounds: 4,
            r2_target: R2_TARGET,
            training_fraction: 0.2,
            threshold: 0.10,
            exec_steps: 4,
            primary: Primary::Ipopt,
            fit: FitConfig::default(),
            store: StoreConfig::default(),
        }
    }
}

/// Counters of a [`PlbHec`] run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlbHecStats {
    /// Training rounds completed.
    pub training_rounds: u64,
    /// Units handed out during training.
    pub training_units: u64,
    /// Threshold detections (finish-time differences above the threshold).
    pub detections: u64,
    /// Synchronised rebalances carried out (refit + re-solve).
    pub rebalances: u64,
    /// Fitting passes over all PUs (after training rounds and rebalances).
    pub refits: u64,
    /// PU fits that failed and fell back to a throughput line.
    pub fit_failures: u64,
    /// Equal-finish-time solves.
    pub solves: u64,
    /// Solves where the primary solver failed and a fallback answered.
    pub solver_fallbacks: u64,
    /// Blocks handed out in the execution phase (fillers included).
    pub exec_blocks: u64,
    /// Filler blocks: given to a PU that finished while a synchronisation
    /// waits for the others, sized to end with them.
    pub fillers: u64,
    /// `Wait` answers (synchronisation points).
    pub waits: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Training,
    Executing,
    /// A rebalance is due: only fillers until every block finished.
    Syncing,
}

/// A PU's model: the fitted curve, or a throughput line when fitting
/// failed.
#[derive(Debug, Clone)]
enum Model {
    Fitted(PuModel),
    Line(LinearModel),
}

impl TimeModel for Model {
    fn time(&self, x: f64) -> f64 {
        match self {
            Model::Fitted(m) => m.time(x),
            Model::Line(m) => m.time(x),
        }
    }
    fn slope(&self, x: f64) -> f64 {
        match self {
            Model::Fitted(m) => m.slope(x),
            Model::Line(m) => m.slope(x),
        }
    }
}

/// The PLB-HeC balancer (see the module documentation).
#[derive(Debug)]
pub struct PlbHec {
    cfg: PlbHecConfig,
    initial: u64,
    training_cap: u64,
    pool: WorkPool,
    phase: Phase,
    stores: Vec<SampleStore>,
    in_flight: Vec<bool>,
    /// Training: block size of the current round, and whether each PU got
    /// it.
    round_sizes: Vec<u64>,
    round_given: Vec<bool>,
    /// Throughput (units/s) of each PU's last completed block.
    last_thr: Vec<f64>,
    /// Execution: fixed block sizes and their predicted time.
    sizes: Vec<u64>,
    block_time: f64,
    /// Finish times of each PU's blocks since the last synchronisation.
    finishes: Vec<Vec<f64>>,
    /// Units of one execution step (0 before the first solve).
    step_units: u64,
    /// Start time of each PU's block in flight.
    starts: Vec<f64>,
    /// Synchronisation: predicted end of the last block in flight when the
    /// threshold was crossed.
    sync_deadline: f64,
    r2: Vec<Option<f64>>,
    previous: Option<Distribution>,
    /// Built by [`PlbHec::resume`] from a trained balancer: fitted and
    /// solved at the first request.
    resume_pending: bool,
    stats: PlbHecStats,
}

fn invalid(field: &'static str, value: f64, expected: &'static str) -> ConfigError {
    ConfigError::Invalid {
        balancer: "plb-hec",
        field,
        value,
        expected,
    }
}

impl PlbHec {
    /// PLB-HeC over `n_pus` PUs and `total` units.
    pub fn new(n_pus: usize, total: u64, cfg: PlbHecConfig) -> Result<PlbHec, ConfigError> {
        if n_pus == 0 {
            return Err(ConfigError::NoPus {
                balancer: "plb-hec",
            });
        }
        if cfg.training_rounds == 0 {
            return Err(invalid("training_rounds", 0.0, ">= 1"));
        }
        if !cfg.r2_target.is_finite() {
            return Err(invalid("r2_target", cfg.r2_target, "a finite number"));
        }
        if !(cfg.training_fraction > 0.0 && cfg.training_fraction <= 1.0) {
            return Err(invalid(
                "training_fraction",
                cfg.training_fraction,
                "a number in (0, 1]",
            ));
        }
        if !(cfg.threshold.is_finite() && cfg.threshold > 0.0) {
            return Err(invalid("threshold", cfg.threshold, "a finite number > 0"));
        }
        if cfg.exec_steps == 0 {
            return Err(invalid("exec_steps", 0.0, ">= 1"));
        }
        let initial = if cfg.initial_block == 0 {
            default_initial_block(total, n_pus)
        } else {
            cfg.initial_block
        };
        let training_cap = (total as f64 * cfg.training_fraction).ceil() as u64;
        let stores = (0..n_pus).map(|_| SampleStore::new(cfg.store)).collect();
        Ok(PlbHec {
            cfg,
            initial,
            training_cap,
            pool: WorkPool::new(total),
            phase: Phase::Training,
            stores,
            in_flight: vec![false; n_pus],
            round_sizes: vec![initial; n_pus],
            round_given: vec![false; n_pus],
            last_thr: vec![0.0; n_pus],
            sizes: vec![0; n_pus],
            block_time: 0.0,
            finishes: vec![Vec::new(); n_pus],
            step_units: 0,
            starts: vec![0.0; n_pus],
            sync_deadline: f64::NEG_INFINITY,
            r2: vec![None; n_pus],
            previous: None,
            resume_pending: false,
            stats: PlbHecStats::default(),
        })
    }

    /// PLB-HeC over `total` more units that starts from what `previous`
    /// learned (same PUs, e.g. the next batch of an iterative
    /// application): its sample stores are kept and, when `previous` had
    /// finished training and every store yields a fitted curve, the
    /// training is skipped and the first request gets an execution block
    /// of the solve over those curves. Otherwise this is [`PlbHec::new`]
    /// with the stores kept. Cheap: the fit and the solve run at the first
    /// request (task mode builds balancers under its lock and runs them
    /// outside it).
    pub fn resume(previous: &PlbHec, total: u64, cfg: PlbHecConfig) -> Result<PlbHec, ConfigError> {
        let mut b = PlbHec::new(previous.n(), total, cfg)?;
        b.stores = previous.stores.clone();
        b.last_thr = previous.last_thr.clone();
        b.resume_pending = previous.trained();
        Ok(b)
    }

    /// [`PlbHec::resume`]'s fit and solve, at the first request.
    fn finish_resume(&mut self) {
        let (models, _) = self.fit_all();
        if self.r2.iter().all(Option::is_some) {
            self.start_execution(&models);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> PlbHecStats {
        self.stats
    }

    /// Whether the training phase is over (a resumed balancer: whether
    /// it will skip it).
    pub fn trained(&self) -> bool {
        self.phase != Phase::Training || self.resume_pending
    }

    /// The current execution block sizes (all 0 during training).
    pub fn block_sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Predicted time of one execution block (0 during training).
    pub fn block_time(&self) -> f64 {
        self.block_time
    }

    /// R² of each PU's last execution-time fit (`None` before the first fit
    /// or when it failed).
    pub fn r2(&self) -> &[Option<f64>] {
        &self.r2
    }

    /// The resolved initial block size, in units.
    pub fn initial_block(&self) -> u64 {
        self.initial
    }

    fn n(&self) -> usize {
        self.stores.len()
    }

    /// Fits every PU; returns the models and whether all meet the R² target.
    fn fit_all(&mut self) -> (Vec<Model>, bool) {
        self.stats.refits += 1;
        let mut all_ok = true;
        let mut models = Vec::with_capacity(self.n());
        for p in 0..self.n() {
            match self.stores[p].fit(&self.cfg.fit) {
                Ok(fit) => {
                    all_ok &= fit.exec.r2 > self.cfg.r2_target;
                    self.r2[p] = Some(fit.exec.r2);
                    models.push(Model::Fitted(fit.model));
                }
                Err(_) => {
                    all_ok = false;
                    self.r2[p] = None;
                    self.stats.fit_failures += 1;
                    // No usable sample: the best throughput seen, or a
                    // nominal unit rate (the PU still gets work and samples).
                    let rate = self.stores[p]
                        .best_throughput()
                        .filter(|r| r.is_finite() && *r > 0.0)
                        .unwrap_or(1.0);
                    models.push(Model::Line(LinearModel { fixed: 0.0, rate }));
                }
            }
        }
        (models, all_ok)
    }

    /// Solves the equal-finish-time system for the next `⌈R / steps⌉` units
    /// and starts (or restarts) the execution phase.
    fn start_execution(&mut self, models: &[Model]) {
        self.phase = Phase::Executing;
        for f in &mut self.finishes {
            f.clear();
        }
        let remaining = self.pool.remaining();
        if remaining == 0 {
            return;
        }
        // The first solve splits what remains into `exec_steps` steps; a
        // rebalance keeps (about) the step size, so repeated rebalances do
        // not shrink the blocks geometrically.
        let steps = if self.step_units == 0 {
            self.cfg.exec_steps as u64
        } else {
            remaining.div_ceil(self.step_units)
        };
        let step = remaining.div_ceil(steps.max(1));
        self.step_units = step;
        let refs: Vec<&dyn TimeModel> = models.iter().map(|m| m as &dyn TimeModel).collect();
        self.stats.solves += 1;
        let dist =
            match solve_with_fallback(&refs, step as f64, self.cfg.primary, self.previous.as_ref())
            {
                Ok(d) => d,
                Err(_) => crate::solve::proportional_split(&refs, step as f64),
            };
        if !dist.fallbacks.is_empty() {
            self.stats.solver_fallbacks += 1;
        }
        let n = self.n();
        self.sizes = round_to_units(&dist.units, step, &vec![0; n])
            .or_else(|_| round_to_units(&vec![1.0; n], step, &vec![0; n]))
            .unwrap_or_else(|_| vec![step.div_ceil(n as u64).max(1); n]);
        let predicted = (0..n)
            .filter(|&p| self.sizes[p] > 0)
            .map(|p| models[p].time(self.sizes[p] as f64))
            .fold(0.0, f64::max);
        self.block_time = if dist.finish_time.is_finite() && dist.finish_time > 0.0 {
            dist.finish_time
        } else {
            predicted
        };
        self.previous = Some(dist);
    }

    /// Called when a training round is over (every block of it finished).
    fn end_round(&mut self) {
        self.stats.training_rounds += 1;
        let rounds = self.stats.training_rounds;
        if rounds >= self.cfg.training_rounds as u64 {
            let (models, all_ok) = self.fit_all();
            if all_ok || self.pool.assigned() >= self.training_cap || self.pool.remaining() == 0 {
                self.start_execution(&models);
                return;
            }
        }
        // Next round: initial · 2^k scaled by relative speed.
        let best = self.last_thr.iter().copied().fold(0.0, f64::max);
        let mult = 2f64.powi(rounds.min(60) as i32);
        let mut sizes: Vec<f64> = self
            .last_thr
            .iter()
            .map(|&t| {
                let rel = if best > 0.0 && t > 0.0 { t / best } else { 1.0 };
                (self.initial as f64 * mult * rel).max(1.0)
            })
            .collect();
        if rounds >= self.cfg.training_rounds as u64 {
            // An extra round stays within the training budget.
            let budget = self.training_cap.saturating_sub(self.pool.assigned()) as f64;
            let want: f64 = sizes.iter().sum();
            if want > budget {
                for s in &mut sizes {
                    *s = (*s * budget / want).max(1.0);
                }
            }
        }
        self.round_sizes = sizes.iter().map(|s| s.round() as u64).collect();
        self.round_given.iter_mut().for_each(|g| *g = false);
    }

    /// Records an execution-phase finish and checks the threshold against
    /// the other PUs' blocks of the same index since the last sync.
    fn check_threshold(&mut self, pu: PuId, at: f64) {
        self.finishes[pu].push(at);
        let i = self.finishes[pu].len() - 1;
        let limit = self.cfg.threshold * self.block_time;
        let mine = &self.finishes[pu];
        let exceeded = self.finishes.iter().enumerate().any(|(q, f)| {
            if q == pu {
                return false;
            }
            // Both finished their block `i`: compare. `q` still runs its
            // block `j = f.len()` that this PU already finished at
            // `mine[j]`: `q` will finish it at `at` or later.
            let finished = f.get(i).is_some_and(|&t| (t - at).abs() > limit);
            let overdue = self.in_flight[q] && mine.get(f.len()).is_some_and(|&t| at - t > limit);
            finished || overdue
        });
        if exceeded {
            self.stats.detections += 1;
            // A rebalance needs at least one full step of work left: with
            // less, every PU gets at most one more block anyway, and a
            // synchronisation would only add idle time.
            if self.pool.remaining() >= self.sizes.iter().sum::<u64>() {
                self.phase = Phase::Syncing;
                self.sync_deadline = (0..self.n())
                    .filter(|&q| self.in_flight[q])
                    .map(|q| self.starts[q] + self.block_time)
                    .fold(f64::NEG_INFINITY, f64::max);
            }
        }
    }
}

impl Balancer for PlbHec {
    fn name(&self) -> &'static str {
        "plb-hec"
    }

    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        if std::mem::take(&mut self.resume_pending) {
            self.finish_resume();
        }
        if self.pool.remaining() == 0 || pu >= self.n() {
            return Decision::Done;
        }
        if self.in_flight[pu] {
            self.stats.waits += 1;
            return Decision::Wait;
        }
        let block = match self.phase {
            Phase::Training => {
                if self.round_given[pu] {
                    // Synchronised rounds: wait for the others.
                    self.stats.waits += 1;
                    return Decision::Wait;
                }
                let Some(b) = self.pool.take(pu, self.round_sizes[pu] as f64) else {
                    return Decision::Done;
                };
                self.round_given[pu] = true;
                self.stats.training_units += b.len;
                b
            }
            Phase::Executing => {
                if self.sizes[pu] == 0 {
                    // The solver gives this PU nothing (its fixed cost alone
                    // exceeds the step's time); a rebalance may change that.
                    self.stats.waits += 1;
                    return Decision::Wait;
                }
                let Some(b) = self.pool.take(pu, self.sizes[pu] as f64) else {
                    return Decision::Done;
                };
                self.stats.exec_blocks += 1;
                b
            }
            Phase::Syncing => {
                // PLB-HeC gives a PU that would idle until the
                // synchronisation a new task; we size it to end when the
                // blocks still running are predicted to end.
                let left = self.sync_deadline - now;
                let worth = left > self.cfg.threshold * self.block_time;
                if !worth || self.sizes[pu] == 0 {
                    self.stats.waits += 1;
                    return Decision::Wait;
                }
                // The smaller of the model's size for that time and what
                // the PU's last block's throughput would do in it (the
                // model may be the wrong one: that is why we rebalance).
                let by_model = self.sizes[pu] as f64 * left / self.block_time;
                let by_thr = if self.last_thr[pu] > 0.0 {
                    self.last_thr[pu] * left
                } else {
                    by_model
                };
                let len = by_model.min(by_thr).max(1.0);
                let Some(b) = self.pool.take(pu, len) else {
                    return Decision::Done;
                };
                self.stats.exec_blocks += 1;
                self.stats.fillers += 1;
                b
            }
        };
        self.in_flight[pu] = true;
        self.starts[pu] = now;
        Decision::Run(block)
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        if pu >= self.n() {
            return;
        }
        self.in_flight[pu] = false;
        let took = done.compute_s + done.transfer_s;
        if took > 0.0 && took.is_finite() {
            self.last_thr[pu] = done.block.len as f64 / took;
        }
        // Refused samples are counted by the store.
        let _ = self.stores[pu].push(Sample::new(
            done.block.len as f64,
            done.compute_s,
            done.transfer_s,
        ));
        match self.phase {
            Phase::Training => {
                let empty = self.pool.remaining() == 0;
                let over =
                    (0..self.n()).all(|p| !self.in_flight[p] && (self.round_given[p] || empty));
                if over {
                    self.end_round();
                }
            }
            Phase::Executing => self.check_threshold(pu, done.finished_at),
            Phase::Syncing => {}
        }
        if self.phase == Phase::Syncing && self.in_flight.iter().all(|f| !f) {
            if self.pool.remaining() > 0 {
                self.stats.rebalances += 1;
            }
            let (models, _) = self.fit_all();
            self.start_execution(&models);
        }
    }

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    fn continue_with(&self, total: u64) -> Option<Result<Box<dyn Balancer + Send>, String>> {
        Some(
            PlbHec::resume(self, total, self.cfg.clone())
                .map(|b| Box::new(b) as Box<dyn Balancer + Send>)
                .map_err(|e| e.to_string()),
        )
    }

    fn stats(&self) -> BalancerStats {
        let s = &self.stats;
        BalancerStats {
            counters: vec![
                ("refits", s.refits),
                ("training_rounds", s.training_rounds),
                ("training_units", s.training_units),
                ("detections", s.detections),
                ("rebalances", s.rebalances),
                ("fit_failures", s.fit_failures),
                ("solves", s.solves),
                ("solver_fallbacks", s.solver_fallbacks),
                ("exec_blocks", s.exec_blocks),
                ("fillers", s.fillers),
                ("waits", s.waits),
            ],
        }
    }
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let mut cfg = ctx.tuning.plb_hec();
    cfg.primary = registry::solver(args, ctx.tuning, cfg.primary);
    Ok(Box::new(
        PlbHec::new(ctx.pus, ctx.total, cfg).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "plb-hec",
    summary: "PLB-HeC: 1/2/4/8 training, fitted curves, one equal-finish-time split with \
              rebalancing (task mode: epochs of same-codelet tasks; divisible mode: blocks)",
    params: &[registry::SOLVER_PARAM],
    build,
    training_units_per_pu,
};

/// The training ramp's units per PU: `(2^rounds - 1) · initial`, the
/// initial block at least 1 (the automatic one included).
fn training_units_per_pu(tuning: &crate::balance::Tuning) -> u64 {
    let cfg = tuning.plb_hec();
    let ramp = (1u64 << cfg.training_rounds.min(32)) - 1;
    ramp.saturating_mul(cfg.initial_block.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::sim::{SimOptions, SpeedChange, optimum, simulate};

    use crate::balance::scenarios::lin as pu;
    #[test]
    fn default_initial_block_is_a_tenth_over_the_ramp() {
        assert_eq!(default_initial_block(20_000, 2), 66);
        assert_eq!(default_initial_block(5, 8), 1);
        assert_eq!(default_initial_block(0, 0), 1);
    }

    #[test]
    fn rejects_bad_configs() {
        assert_eq!(
            PlbHec::new(0, 10, PlbHecConfig::default()).unwrap_err(),
            ConfigError::NoPus {
                balancer: "plb-hec"
            }
        );
        let field = |c: PlbHecConfig| match PlbHec::new(2, 10, c).unwrap_err() {
            ConfigError::Invalid {
                balancer: "plb-hec",
                field,
                ..
            } => field,
            e => panic!("{e}"),
        };
        let d = PlbHecConfig::default;
        assert_eq!(
            field(PlbHecConfig {
                training_rounds: 0,
                ..d()
            }),
            "training_rounds"
        );
        assert_eq!(
            field(PlbHecConfig {
                r2_target: f64::NAN,
                ..d()
            }),
            "r2_target"
        );
        assert_eq!(
            field(PlbHecConfig {
                training_fraction: 0.0,
                ..d()
            }),
            "training_fraction"
        );
        assert_eq!(
            field(PlbHecConfig {
                threshold: -0.1,
                ..d()
            }),
            "threshold"
        );
        assert_eq!(
            field(PlbHecConfig {
                exec_steps: 0,
                ..d()
            }),
            "exec_steps"
        );
    }

    /// Simulated: the four training rounds use multipliers 1, 2, 4, 8
    /// scaled by relative speed (a 4× faster PU gets 4× the units), then
    /// the execution blocks split each step in proportion to speed.
    #[test]
    fn simulated_training_ramp_and_fixed_blocks() {
        let pus = [pu(0.0, 100.0), pu(0.0, 400.0)];
        let cfg = PlbHecConfig {
            initial_block: 10,
            primary: Primary::Fast,
            ..Default::default()
        };
        let mut b = PlbHec::new(2, 20_000, cfg).unwrap();
        let r = simulate(&mut b, &pus, 20_000, SimOptions::default()).unwrap();
        let lens: Vec<u64> = r.runs.iter().take(8).map(|x| x.block.len).collect();
        assert_eq!(lens, vec![10, 10, 5, 20, 10, 40, 20, 80]);
        let s = b.stats();
        assert_eq!(s.training_rounds, 4);
        assert_eq!(s.rebalances, 0);
        assert!(b.block_sizes().iter().sum::<u64>() * 4 >= 20_000 - 195);
        let x = b.block_sizes();
        assert!((x[1] as f64 / x[0] as f64 - 4.0).abs() < 0.01, "{x:?}");
        assert!(r.makespan < 1.05 * optimum(&pus, 20_000));
    }

    /// Simulated: a PU slowing down 2× mid-run makes the finish times
    /// diverge beyond the threshold; PLB-HeC synchronises, refits and
    /// re-solves, and finishes well before the same run without rebalancing
    /// (a threshold nothing reaches).
    #[test]
    fn simulated_speed_change_triggers_a_rebalance() {
        let pus = || {
            let mut slow = pu(0.0, 400.0);
            slow.speed_changes = vec![SpeedChange {
                at: 5.0,
                factor: 2.0,
            }];
            [pu(0.0, 100.0), slow]
        };
        let run = |threshold: f64| {
            let cfg = PlbHecConfig {
                initial_block: 10,
                primary: Primary::Fast,
                exec_steps: 8,
                threshold,
                ..Default::default()
            };
            let mut b = PlbHec::new(2, 20_000, cfg).unwrap();
            let r = simulate(&mut b, &pus(), 20_000, SimOptions::default()).unwrap();
            (r.makespan, b.stats())
        };
        let (with, s) = run(0.10);
        let (without, s0) = run(1e9);
        assert!(s.detections >= 1 && s.rebalances >= 1, "{s:?}");
        assert!(s.refits >= 2);
        assert_eq!(s0.rebalances, 0);
        // Measured 63.3 s vs 64.8 s: the refit adapts slowly because the
        // store still holds the pre-change samples (recency-weighted).
        assert!(with < without, "{with} vs {without}");
    }

    /// Simulated: a second pass resumed from a trained one skips the
    /// training rounds: its first blocks are execution blocks split 1:4.
    #[test]
    fn a_resumed_pass_skips_the_training() {
        let pus = [pu(0.0, 100.0), pu(0.0, 400.0)];
        let cfg = PlbHecConfig {
            initial_block: 10,
            primary: Primary::Fast,
            ..Default::default()
        };
        let mut first = PlbHec::new(2, 20_000, cfg.clone()).unwrap();
        simulate(&mut first, &pus, 20_000, SimOptions::default()).unwrap();
        let mut next = PlbHec::resume(&first, 10_000, cfg.clone()).unwrap();
        assert!(next.trained());
        let r = simulate(&mut next, &pus, 10_000, SimOptions::default()).unwrap();
        assert_eq!(next.stats().training_rounds, 0);
        let lens: Vec<u64> = r.runs.iter().take(2).map(|x| x.block.len).collect();
        assert!(
            (lens[1] as f64 / lens[0] as f64 - 4.0).abs() < 0.05,
            "{lens:?}"
        );
        assert!(r.makespan < 1.02 * optimum(&pus, 10_000), "{}", r.makespan);
        // An untrained balancer passes its samples on but trains again.
        let untrained = PlbHec::new(2, 20_000, cfg.clone()).unwrap();
        assert!(!PlbHec::resume(&untrained, 100, cfg).unwrap().trained());
    }
}
