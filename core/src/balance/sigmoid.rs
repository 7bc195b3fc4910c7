//! The fifth paper's **Sigmoid** balancer
//! (`../shared/papers/sigmoid-opencl-lb.txt`): package sizes proportional to
//! each PU's power that stay large while much work remains and decrease
//! along a logistic curve as the work runs out, with no user parameter.
//! The paper gives the idea, not every formula; this is the function we
//! implement (also in `docs/balancers.md`, "Sigmoid"):
//!
//! ```text
//! r        = R / W                      remaining fraction (R: units not handed out)
//! L(x)     = 1 / (1 + e^(−x))           the logistic function
//! g_a(r)   = (L(a·(r − ½)) − L(−a/2)) / (L(a/2) − L(−a/2))    ∈ [0, 1], g(0)=0, g(1)=1
//! s_i      = P_i / Σ P                  PU i's share of the measured power
//! package_i = max(min_i, min(s_i · (W / M) · g_a(r),  s_i · R))
//! ```
//!
//! * `M` = [`PLATEAU_ROUNDS`]: at the start a round of packages (one per PU)
//!   covers `W / M`.
//! * **Slope `a`**, from the measured powers: the kernel is taken as
//!   regular (`a` = [`SLOPE_REGULAR`]: a long plateau of large packages,
//!   then a fast decrease) until some PU's throughput over its last
//!   packages varies by more than [`IRREGULAR_CV`] (coefficient of
//!   variation); from then on it is irregular (`a` = [`SLOPE_IRREGULAR`]:
//!   a nearly linear decrease from the start, more, smaller packages to
//!   adapt). The switch is one-way, as in the paper.
//! * **Minimum package** `min_i = max(kind minimum, ⌈P_i · ε · W / Σ P⌉)`:
//!   the last package of any PU lasts about `ε` ([`MAX_IMBALANCE`]) of the
//!   ideal makespan `W / Σ P`, which bounds the imbalance at the end while
//!   keeping the number of packages small.
//! * `s_i · R` caps a package at the PU's proportional share of what is
//!   left, so the PUs finish together.
//! * Powers are learned ([`super::powers`]; averaged over the last
//!   [`super::powers::POWER_WINDOW`] packages); until a PU has one, it
//!   runs a small probe package ([`super::default_initial_block`]) — the
//!   paper starts from vendor GFLOPS figures, which we do not have.

use super::hguided::min_packages;
use super::packages::Packages;
use super::powers::{POWER_WINDOW, Powers};
use super::registry::{Args, BuildContext, Entry};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId};

/// Rounds of packages the plateau's size is set for (`M`).
pub const PLATEAU_ROUNDS: f64 = 4.0;
/// Rounds of packages the plateau is set for once the kernel proved
/// irregular (`M` then): smaller packages, so that one package on rows
/// costlier than the ones measured cannot outlast the others' work.
pub const PLATEAU_ROUNDS_IRREGULAR: f64 = 8.0;
/// Logistic slope while the kernel looks regular.
pub const SLOPE_REGULAR: f64 = 10.0;
/// Logistic slope once the kernel proved irregular.
pub const SLOPE_IRREGULAR: f64 = 4.0;
/// Coefficient of variation of a PU's recent throughputs above which the
/// kernel is irregular.
pub const IRREGULAR_CV: f64 = 0.10;
/// The last package's share of the ideal makespan (`ε`).
pub const MAX_IMBALANCE: f64 = 0.01;

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `g_a(r)`: the logistic curve of slope `a` normalised to [0, 1] on
/// `r` ∈ [0, 1] (see the module documentation).
pub fn normalised_logistic(a: f64, r: f64) -> f64 {
    let r = r.clamp(0.0, 1.0);
    let lo = logistic(-a / 2.0);
    let hi = logistic(a / 2.0);
    ((logistic(a * (r - 0.5)) - lo) / (hi - lo)).clamp(0.0, 1.0)
}

/// Sigmoid over learned powers (see the module documentation).
#[derive(Debug, Clone)]
pub struct Sigmoid {
    packages: Packages,
    total: u64,
    powers: Powers,
    kind_min: Vec<u64>,
    irregular: bool,
}

impl Sigmoid {
    /// Sigmoid over `n` PUs and `total` units; `kind_min[i]` is PU `i`'s
    /// minimum package by its kind (>= 1), `probe` the first package (0:
    /// automatic).
    pub fn new(
        n: usize,
        total: u64,
        kind_min: Vec<u64>,
        probe: u64,
    ) -> Result<Sigmoid, ConfigError> {
        const NAME: &str = "sigmoid";
        if n == 0 {
            return Err(ConfigError::NoPus { balancer: NAME });
        }
        if kind_min.len() != n {
            return Err(ConfigError::Invalid {
                balancer: NAME,
                field: "min (count)",
                value: kind_min.len() as f64,
                expected: "one minimum package per PU",
            });
        }
        Ok(Sigmoid {
            packages: Packages::new(total, n, probe),
            total,
            powers: Powers::new(n, POWER_WINDOW),
            kind_min: kind_min.iter().map(|&m| m.max(1)).collect(),
            irregular: false,
        })
    }

    /// Whether the kernel was found irregular.
    pub fn irregular(&self) -> bool {
        self.irregular
    }

    /// The logistic slope in use.
    pub fn slope(&self) -> f64 {
        if self.irregular {
            SLOPE_IRREGULAR
        } else {
            SLOPE_REGULAR
        }
    }

    /// The package of PU `pu` (after its probe) with `rest` units left.
    fn package(&mut self, pu: PuId, rest: u64) -> u64 {
        let total = self.total as f64;
        let rest = rest as f64;
        let powers = self.powers.all();
        let sum: f64 = powers.iter().sum();
        let share = if sum > 0.0 {
            powers[pu] / sum
        } else {
            1.0 / powers.len() as f64
        };
        let rounds = if self.irregular {
            PLATEAU_ROUNDS_IRREGULAR
        } else {
            PLATEAU_ROUNDS
        };
        let curve = share * (total / rounds) * normalised_logistic(self.slope(), rest / total);
        let by_time = if sum > 0.0 {
            (powers[pu] * MAX_IMBALANCE * total / sum).ceil() as u64
        } else {
            1
        };
        let min = self.kind_min[pu].max(by_time);
        (curve.min(share * rest).floor() as u64).max(min)
    }
}

impl Balancer for Sigmoid {
    fn name(&self) -> &'static str {
        "sigmoid"
    }

    fn next(&mut self, pu: PuId, _now: f64) -> Decision {
        let len = if self.packages.needs_probe(pu) || pu >= self.kind_min.len() {
            0
        } else {
            self.package(pu, self.packages.remaining())
        };
        self.packages.give(pu, |_| len)
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        if self.powers.record(&done)
            && !self.irregular
            && self
                .powers
                .variability(pu)
                .is_some_and(|cv| cv > IRREGULAR_CV)
        {
            self.irregular = true;
        }
    }

    fn remaining(&self) -> u64 {
        self.packages.remaining()
    }

    fn stats(&self) -> BalancerStats {
        BalancerStats {
            counters: vec![
                ("refits", 0),
                ("packages", self.packages.given()),
                ("irregular", self.irregular as u64),
                ("power_fallbacks", self.powers.fallbacks()),
            ],
        }
    }
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let probe = ctx.tuning.initial_block.unwrap_or(0);
    Ok(Box::new(
        Sigmoid::new(ctx.pus, ctx.total, min_packages(args, ctx)?, probe)
            .map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "sigmoid",
    summary: "the fifth paper's Sigmoid: packages by learned relative power, shrinking along a \
              logistic curve as work runs out; slope and minimum package derived from the \
              measurements (no parameter)",
    params: &[],
    build,
    training_units_per_pu: super::registry::no_training,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::scenarios::lin;
    use crate::balance::sim::{SimOptions, optimum, simulate};

    #[test]
    fn the_normalised_logistic_runs_from_zero_to_one() {
        for a in [SLOPE_IRREGULAR, SLOPE_REGULAR] {
            assert!(normalised_logistic(a, 0.0).abs() < 1e-12);
            assert!((normalised_logistic(a, 1.0) - 1.0).abs() < 1e-12);
            assert!((normalised_logistic(a, 0.5) - 0.5).abs() < 1e-12);
            let mut last = -1.0;
            for i in 0..=100 {
                let g = normalised_logistic(a, i as f64 / 100.0);
                assert!(g >= last);
                last = g;
            }
        }
        // The regular slope keeps large packages longer.
        assert!(
            normalised_logistic(SLOPE_REGULAR, 0.8) > normalised_logistic(SLOPE_IRREGULAR, 0.8)
        );
    }

    #[test]
    fn packages_plateau_then_shrink_to_the_minimum() {
        let pus = [lin(1e-4, 1000.0), lin(1e-4, 3000.0)];
        let mut s = Sigmoid::new(2, 100_000, vec![1, 1], 0).unwrap();
        let r = simulate(&mut s, &pus, 100_000, SimOptions::default()).unwrap();
        assert!(!s.irregular(), "linear costs are regular");
        let fast: Vec<u64> = r
            .runs
            .iter()
            .filter(|x| x.block.pu == 1)
            .map(|x| x.block.len)
            .collect();
        // After the probe and the package given while the slow PU's power
        // was still unknown: non-increasing (within the rounding of powers
        // measured with a per-package overhead), from large to small.
        assert!(
            fast[2..]
                .windows(2)
                .all(|w| w[1] as f64 <= 1.01 * w[0] as f64),
            "{fast:?}"
        );
        assert!(fast[1] > 10 * fast[fast.len() - 1], "{fast:?}");
        let opt = optimum(&pus, 100_000);
        assert!(r.makespan <= 1.03 * opt, "{} vs {opt}", r.makespan);
    }

    #[test]
    fn varying_throughput_switches_to_the_irregular_slope() {
        let mut s = Sigmoid::new(1, 10_000, vec![1], 10).unwrap();
        let mut secs = [1.0, 1.0, 2.0, 0.5, 1.5].into_iter();
        while let Decision::Run(b) = s.next(0, 0.0) {
            let t = secs.next().unwrap_or(1.0) * b.len as f64 / 100.0;
            s.completed(Completion {
                block: b,
                compute_s: t,
                transfer_s: 0.0,
                finished_at: 0.0,
            });
        }
        assert!(s.irregular());
        assert_eq!(s.slope(), SLOPE_IRREGULAR);
        assert_eq!(s.remaining(), 0);
    }
}
