//! HDSS, the Heterogeneous Dynamic Self-Scheduler (Belviranli, Bhuyan,
//! Gupta, ACM TACO 9(4), 2013), as the PLB-HeC and PLB-HAC papers describe
//! and use it as a baseline: an *adaptive phase* of growing blocks whose
//! throughputs are fitted with logarithmic curves ([`HdssCurve`]) to one
//! weight per PU, then a *completion phase* that self-schedules the rest in
//! weighted, decreasing blocks. The weights are never updated afterwards.
//!
//! The exact rules (and every interpretation) are in `docs/balancers.md`,
//! section "HDSS".

use super::plb_hec::default_initial_block;
use super::registry::{Args, BuildContext, Entry};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId, WorkPool};
use crate::baselines::HdssCurve;

/// Parameters of [`Hdss`]. Validated by [`Hdss::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct HdssConfig {
    /// Size, in units, of every PU's first adaptive block. 0 (the default)
    /// = automatic: [`default_initial_block`], sized so that a
    /// 1-2-4-8 ramp on every PU hands out about 10 % of the data (the
    /// papers size the initial block so the first phase takes about 10 % of
    /// the run, and use the same initial block for every algorithm).
    pub initial_block: u64,
    /// Factor between a PU's consecutive adaptive blocks: finite, `> 1`.
    /// Default 2 (the block doubles, as in PLB-HeC's training).
    pub growth: f64,
    /// Adaptive blocks (distinct sizes) each PU completes before the
    /// weights are fitted: `>= 1`. Default 4 (our choice: the same four
    /// points as PLB-HeC's training, enough for a two-parameter fit).
    pub adaptive_blocks: u32,
    /// Most of the data, as a fraction in `(0, 1]`, that the adaptive phase
    /// may hand out. Default 0.2 (our choice, PLB-HeC's training cap).
    pub adaptive_fraction: f64,
    /// Completion-phase divisor `k`: PU `p` gets `w_p · R / k` units, `R`
    /// the units left. Finite, `>= 1`. Default 2 (our choice: factoring's
    /// "half of what is left per round", which gives the decreasing blocks).
    pub divisor: f64,
    /// Smallest completion block, in units. 0 (the default) = the initial
    /// block.
    pub min_block: u64,
}

impl Default for HdssConfig {
    fn default() -> Self {
        HdssConfig {
            initial_block: 0,
            growth: 2.0,
            adaptive_blocks: 4,
            adaptive_fraction: 0.2,
            divisor: 2.0,
            min_block: 0,
        }
    }
}

/// Counters of an [`Hdss`] run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HdssStats {
    /// Blocks handed out in the adaptive phase.
    pub adaptive_blocks: u64,
    /// Units handed out in the adaptive phase.
    pub adaptive_units: u64,
    /// Blocks handed out in the completion phase.
    pub completion_blocks: u64,
    /// Weight computations (1 once the adaptive phase ended; HDSS never
    /// refits).
    pub fits: u64,
    /// PUs whose curve could not be fitted (no usable sample) and got
    /// weight 0.
    pub unfitted: u64,
    /// `Wait` answers (a PU idle at the end of the adaptive phase).
    pub waits: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Adaptive,
    Completion,
}

/// The HDSS balancer (see the module documentation).
#[derive(Debug, Clone)]
pub struct Hdss {
    pool: WorkPool,
    initial: u64,
    growth: f64,
    adaptive_blocks: u32,
    cap: u64,
    divisor: f64,
    min_block: u64,
    phase: Phase,
    /// Adaptive blocks handed out / completed, per PU.
    given: Vec<u32>,
    done: Vec<u32>,
    in_flight: Vec<bool>,
    /// `(units, seconds)` of each adaptive block, per PU.
    points: Vec<Vec<(f64, f64)>>,
    curves: Vec<Option<HdssCurve>>,
    weights: Vec<f64>,
    stats: HdssStats,
}

fn invalid(field: &'static str, value: f64, expected: &'static str) -> ConfigError {
    ConfigError::Invalid {
        balancer: "hdss",
        field,
        value,
        expected,
    }
}

impl Hdss {
    /// HDSS over `n_pus` PUs and `total` units.
    pub fn new(n_pus: usize, total: u64, cfg: HdssConfig) -> Result<Hdss, ConfigError> {
        if n_pus == 0 {
            return Err(ConfigError::NoPus { balancer: "hdss" });
        }
        if !(cfg.growth.is_finite() && cfg.growth > 1.0) {
            return Err(invalid("growth", cfg.growth, "a finite number > 1"));
        }
        if cfg.adaptive_blocks == 0 {
            return Err(invalid("adaptive_blocks", 0.0, ">= 1"));
        }
        if !(cfg.adaptive_fraction > 0.0 && cfg.adaptive_fraction <= 1.0) {
            return Err(invalid(
                "adaptive_fraction",
                cfg.adaptive_fraction,
                "a number in (0, 1]",
            ));
        }
        if !(cfg.divisor.is_finite() && cfg.divisor >= 1.0) {
            return Err(invalid("divisor", cfg.divisor, "a finite number >= 1"));
        }
        let initial = if cfg.initial_block == 0 {
            default_initial_block(total, n_pus)
        } else {
            cfg.initial_block
        };
        let min_block = if cfg.min_block == 0 {
            initial
        } else {
            cfg.min_block
        };
        let cap = ((total as f64 * cfg.adaptive_fraction).ceil() as u64).clamp(1, total.max(1));
        Ok(Hdss {
            pool: WorkPool::new(total),
            initial,
            growth: cfg.growth,
            adaptive_blocks: cfg.adaptive_blocks,
            cap,
            divisor: cfg.divisor,
            min_block,
            phase: Phase::Adaptive,
            given: vec![0; n_pus],
            done: vec![0; n_pus],
            in_flight: vec![false; n_pus],
            points: vec![Vec::new(); n_pus],
            curves: vec![None; n_pus],
            weights: Vec::new(),
            stats: HdssStats::default(),
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> HdssStats {
        self.stats
    }

    /// The normalised weights (empty during the adaptive phase).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The fitted throughput curves (`None` during the adaptive phase, or
    /// for a PU without a usable sample).
    pub fn curves(&self) -> &[Option<HdssCurve>] {
        &self.curves
    }

    /// Whether the completion phase has begun.
    pub fn in_completion(&self) -> bool {
        self.phase == Phase::Completion
    }

    /// The resolved initial block size, in units.
    pub fn initial_block(&self) -> u64 {
        self.initial
    }

    fn adaptive_size(&self, pu: PuId) -> f64 {
        // Growing while the PU is in its first `adaptive_blocks` blocks, then
        // kept at the largest size (extra samples while slower PUs finish).
        let k = self.given[pu].min(self.adaptive_blocks - 1);
        self.initial as f64 * self.growth.powi(k as i32)
    }

    /// Ends the adaptive phase when every PU completed its adaptive blocks,
    /// or when the adaptive budget is spent and every PU that got a block
    /// has at least one measurement.
    fn maybe_end_adaptive(&mut self) {
        if self.phase != Phase::Adaptive {
            return;
        }
        let n = self.given.len();
        let all_done = self.done.iter().all(|&d| d >= self.adaptive_blocks);
        let budget_spent = self.stats.adaptive_units >= self.cap || self.pool.remaining() == 0;
        let measured = (0..n).all(|p| self.done[p] >= 1 || self.given[p] == 0);
        if !(all_done || (budget_spent && measured)) {
            return;
        }
        let mut raw = Vec::with_capacity(n);
        for p in 0..n {
            let curve = HdssCurve::fit(&self.points[p]).ok();
            if curve.is_none() {
                self.stats.unfitted += 1;
            }
            raw.push(curve.map_or(0.0, |c| c.weight()));
            self.curves[p] = curve;
        }
        let sum: f64 = raw.iter().sum();
        self.weights = if sum > 0.0 && sum.is_finite() {
            raw.iter().map(|w| w / sum).collect()
        } else {
            vec![1.0 / n as f64; n]
        };
        self.stats.fits += 1;
        self.phase = Phase::Completion;
    }
}

impl Balancer for Hdss {
    fn name(&self) -> &'static str {
        "hdss"
    }

    fn next(&mut self, pu: PuId, _now: f64) -> Decision {
        if self.pool.remaining() == 0 || pu >= self.given.len() {
            return Decision::Done;
        }
        if self.in_flight[pu] {
            // Asked twice without a completion: nothing more for now.
            self.stats.waits += 1;
            return Decision::Wait;
        }
        self.maybe_end_adaptive();
        let block = match self.phase {
            Phase::Adaptive => {
                let left = self.cap.saturating_sub(self.stats.adaptive_units);
                if left == 0 {
                    self.stats.waits += 1;
                    return Decision::Wait;
                }
                let len = self.adaptive_size(pu).min(left as f64);
                let Some(b) = self.pool.take(pu, len) else {
                    return Decision::Done;
                };
                self.given[pu] += 1;
                self.stats.adaptive_blocks += 1;
                self.stats.adaptive_units += b.len;
                b
            }
            Phase::Completion => {
                let r = self.pool.remaining() as f64;
                let len = (self.weights[pu] * r / self.divisor)
                    .ceil()
                    .max(self.min_block as f64);
                let Some(b) = self.pool.take(pu, len) else {
                    return Decision::Done;
                };
                self.stats.completion_blocks += 1;
                b
            }
        };
        self.in_flight[pu] = true;
        Decision::Run(block)
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        if pu >= self.given.len() {
            return;
        }
        self.in_flight[pu] = false;
        if self.phase == Phase::Adaptive {
            self.done[pu] += 1;
            self.points[pu].push((done.block.len as f64, done.compute_s + done.transfer_s));
            self.maybe_end_adaptive();
        }
    }

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    fn stats(&self) -> BalancerStats {
        let s = &self.stats;
        BalancerStats {
            counters: vec![
                ("refits", s.fits),
                ("fits", s.fits),
                ("adaptive_blocks", s.adaptive_blocks),
                ("adaptive_units", s.adaptive_units),
                ("completion_blocks", s.completion_blocks),
                ("unfitted", s.unfitted),
                ("waits", s.waits),
            ],
        }
    }
}

fn build(_args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    Ok(Box::new(
        Hdss::new(ctx.pus, ctx.total, ctx.tuning.hdss()).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "hdss",
    summary: "HDSS: adaptive phase fitting log curves, then decreasing weighted blocks \
              (task mode: epochs of same-codelet tasks; divisible mode: blocks)",
    params: &[],
    build,
    training_units_per_pu: super::registry::no_training,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::sim::{SimOptions, simulate};

    use crate::balance::scenarios::lin as pu;
    #[test]
    fn rejects_bad_configs() {
        assert_eq!(
            Hdss::new(0, 10, HdssConfig::default()).unwrap_err(),
            ConfigError::NoPus { balancer: "hdss" }
        );
        let bad = |c: HdssConfig| Hdss::new(2, 10, c).unwrap_err();
        assert!(matches!(
            bad(HdssConfig {
                growth: 1.0,
                ..Default::default()
            }),
            ConfigError::Invalid {
                balancer: "hdss",
                field: "growth",
                ..
            }
        ));
        assert!(matches!(
            bad(HdssConfig {
                adaptive_blocks: 0,
                ..Default::default()
            }),
            ConfigError::Invalid {
                balancer: "hdss",
                field: "adaptive_blocks",
                ..
            }
        ));
        assert!(matches!(
            bad(HdssConfig {
                adaptive_fraction: f64::NAN,
                ..Default::default()
            }),
            ConfigError::Invalid {
                balancer: "hdss",
                field: "adaptive_fraction",
                ..
            }
        ));
        let e = bad(HdssConfig {
            divisor: 0.5,
            ..Default::default()
        });
        assert_eq!(
            e.to_string(),
            "hdss: divisor = 0.5, expected a finite number >= 1"
        );
    }

    /// Simulated: two linear PUs, the second 3× faster. The adaptive phase
    /// ramps 10, 20, 40, 80 units; the weights are the throughputs; the
    /// completion blocks decrease.
    #[test]
    fn simulated_weights_follow_throughput_and_blocks_decrease() {
        let pus = [pu(0.0, 100.0), pu(0.0, 300.0)];
        let cfg = HdssConfig {
            initial_block: 10,
            ..Default::default()
        };
        let mut h = Hdss::new(2, 10_000, cfg).unwrap();
        let r = simulate(&mut h, &pus, 10_000, SimOptions::default()).unwrap();
        let w = h.weights();
        assert!(
            (w[0] - 0.25).abs() < 1e-9 && (w[1] - 0.75).abs() < 1e-9,
            "{w:?}"
        );
        let s = h.stats();
        assert_eq!(s.fits, 1);
        assert!(s.adaptive_blocks >= 8);
        let first: Vec<u64> = r.runs.iter().take(8).map(|x| x.block.len).collect();
        assert_eq!(&first[..2], &[10, 10]);
        let completion: Vec<u64> = r
            .runs
            .iter()
            .filter(|x| x.block.pu == 1)
            .skip(h.given[1] as usize)
            .map(|x| x.block.len)
            .collect();
        assert!(
            completion.windows(2).all(|p| p[1] <= p[0]),
            "{completion:?}"
        );
        assert!(r.makespan < 1.1 * crate::balance::sim::optimum(&pus, 10_000));
    }
}
