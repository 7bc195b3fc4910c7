//! EngineCL's **HGuided** balancer (`../shared/papers/sigmoid-opencl-lb.txt`):
//! guided self-scheduling weighted by each PU's relative power. An idle PU
//! `i` gets
//!
//! ```text
//! package_i = max(min_i, ⌊R · P_i / (k · Σ P)⌋)
//! ```
//!
//! units, `R` being the units not yet handed out, `P` the PUs' powers and
//! `k` the guide constant (with equal powers, `R / (k · n)`, guided
//! self-scheduling's rule). Packages shrink as the work runs out; `min_i`,
//! the minimum package of the PU's kind, bounds the overhead of the last
//! ones.
//!
//! The paper's HGuided takes the powers from the user; ours learns them
//! ([`super::powers`]): each PU's first package is a small probe
//! ([`super::default_initial_block`]), so a slow PU is never handed a large
//! package on a guess. The paper's *BestHG* is HGuided with `k` and the
//! minimum package tuned per benchmark (`hguided:k=K,min=U`).

use super::packages::Packages;
use super::powers::{POWER_WINDOW, Powers};
use super::registry::{Args, BuildContext, Entry, Param};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId};

/// The guide constant when none is given (EngineCL's default).
pub const DEFAULT_K: f64 = 2.0;

/// Parameters of [`HGuided`].
#[derive(Debug, Clone, PartialEq)]
pub struct HGuidedConfig {
    /// The guide constant `k` (>= 1): larger, smaller packages.
    pub k: f64,
    /// Each PU's minimum package, in units (>= 1; one per PU).
    pub min: Vec<u64>,
    /// Units of each PU's first (probe) package; 0 = automatic.
    pub probe: u64,
}

/// Guided self-scheduling by learned relative power (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct HGuided {
    packages: Packages,
    powers: Powers,
    k: f64,
    min: Vec<u64>,
}

impl HGuided {
    /// HGuided over `n` PUs and `total` units.
    pub fn new(n: usize, total: u64, cfg: HGuidedConfig) -> Result<HGuided, ConfigError> {
        const NAME: &str = "hguided";
        if n == 0 {
            return Err(ConfigError::NoPus { balancer: NAME });
        }
        if !(cfg.k.is_finite() && cfg.k >= 1.0) {
            return Err(ConfigError::Invalid {
                balancer: NAME,
                field: "k",
                value: cfg.k,
                expected: "finite and >= 1",
            });
        }
        if cfg.min.len() != n {
            return Err(ConfigError::Invalid {
                balancer: NAME,
                field: "min (count)",
                value: cfg.min.len() as f64,
                expected: "one minimum package per PU",
            });
        }
        Ok(HGuided {
            packages: Packages::new(total, n, cfg.probe),
            powers: Powers::new(n, POWER_WINDOW),
            k: cfg.k,
            min: cfg.min.iter().map(|&m| m.max(1)).collect(),
        })
    }
}

impl Balancer for HGuided {
    fn name(&self) -> &'static str {
        "hguided"
    }

    fn next(&mut self, pu: PuId, _now: f64) -> Decision {
        let share = if self.packages.needs_probe(pu) {
            0.0
        } else {
            self.powers.share(pu)
        };
        let (k, min) = (self.k, self.min.get(pu).copied().unwrap_or(1));
        self.packages.give(pu, |pool| {
            ((pool.remaining() as f64 * share / k).floor() as u64).max(min)
        })
    }

    fn completed(&mut self, done: Completion) {
        self.powers.record(&done);
    }

    fn remaining(&self) -> u64 {
        self.packages.remaining()
    }

    fn stats(&self) -> BalancerStats {
        BalancerStats {
            counters: vec![
                ("refits", 0),
                ("packages", self.packages.given()),
                ("power_fallbacks", self.powers.fallbacks()),
            ],
        }
    }
}

/// Each PU's minimum package: `min` when given, else `PLB_MIN_BLOCK` of
/// the PU's kind (1 when the kinds are unknown). Shared by the co-execution
/// balancers that take a minimum package.
pub(super) fn min_packages(args: &Args, ctx: &BuildContext<'_>) -> Result<Vec<u64>, String> {
    if let Some(v) = args.get("min") {
        let m = v
            .parse::<u64>()
            .ok()
            .filter(|&m| m >= 1)
            .ok_or_else(|| format!("min = {v:?}"))?;
        return Ok(vec![m; ctx.pus]);
    }
    Ok(match ctx.kinds {
        Some(kinds) if kinds.len() == ctx.pus => {
            kinds.iter().map(|&k| ctx.tuning.min_block.of(k)).collect()
        }
        _ => vec![ctx.tuning.min_block.cpu.max(1); ctx.pus],
    })
}

pub(super) fn check_units(text: &str) -> bool {
    text.parse::<u64>().is_ok_and(|n| n >= 1)
}

fn check_k(text: &str) -> bool {
    text.parse::<f64>().is_ok_and(|k| k.is_finite() && k >= 1.0)
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let k = match args.get("k") {
        Some(v) => v.parse::<f64>().map_err(|_| format!("k = {v:?}"))?,
        None => DEFAULT_K,
    };
    let probe = match args.get("probe") {
        Some(v) => v.parse::<u64>().map_err(|_| format!("probe = {v:?}"))?,
        None => ctx.tuning.initial_block.unwrap_or(0),
    };
    let cfg = HGuidedConfig {
        k,
        min: min_packages(args, ctx)?,
        probe,
    };
    Ok(Box::new(
        HGuided::new(ctx.pus, ctx.total, cfg).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "hguided",
    summary: "EngineCL's HGuided: guided self-scheduling weighted by learned relative power \
              (package = remaining * power share / k, hguided:k=2,min=<units>)",
    params: &[
        Param {
            key: "k",
            accepted: "a number >= 1",
            check: check_k,
        },
        Param {
            key: "min",
            accepted: "units >= 1 (every PU's minimum package)",
            check: check_units,
        },
        Param {
            key: "probe",
            accepted: "units >= 1",
            check: check_units,
        },
    ],
    build,
    training_units_per_pu: super::registry::no_training,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::scenarios::lin;
    use crate::balance::sim::{SimOptions, optimum, simulate};

    fn cfg(n: usize, k: f64, min: u64) -> HGuidedConfig {
        HGuidedConfig {
            k,
            min: vec![min; n],
            probe: 10,
        }
    }

    fn done(b: crate::balance::Block, secs: f64) -> Completion {
        Completion {
            block: b,
            compute_s: secs,
            transfer_s: 0.0,
            finished_at: secs,
        }
    }

    #[test]
    fn packages_follow_the_guided_rule_weighted_by_power() {
        let mut h = HGuided::new(2, 10_000, cfg(2, 2.0, 5)).unwrap();
        // Probes first.
        let Decision::Run(a) = h.next(0, 0.0) else {
            panic!()
        };
        let Decision::Run(b) = h.next(1, 0.0) else {
            panic!()
        };
        assert_eq!((a.len, b.len), (10, 10));
        // PU 0 three times as fast as PU 1.
        h.completed(done(a, 1.0));
        h.completed(done(b, 3.0));
        // R = 9980; PU 0's share 3/4: 9980 * 0.75 / 2 = 3742.
        let Decision::Run(c) = h.next(0, 1.0) else {
            panic!()
        };
        assert_eq!(c.len, 3742);
        // R = 6238; PU 1's share 1/4: 6238 * 0.25 / 2 = 779.
        let Decision::Run(d) = h.next(1, 3.0) else {
            panic!()
        };
        assert_eq!(d.len, 779);
    }

    #[test]
    fn the_minimum_package_bounds_the_tail() {
        let mut h = HGuided::new(1, 100, cfg(1, 2.0, 30)).unwrap();
        let mut lens = Vec::new();
        while let Decision::Run(b) = h.next(0, 0.0) {
            lens.push(b.len);
            h.completed(done(b, 1.0));
        }
        // Probe 10, then max(30, R/2): 45, then 30 and the last 15.
        assert_eq!(lens, [10, 45, 30, 15]);
        assert_eq!(lens.iter().sum::<u64>(), 100);
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(HGuided::new(0, 10, cfg(0, 2.0, 1)).is_err());
        assert!(HGuided::new(2, 10, cfg(2, 0.5, 1)).is_err());
        assert!(HGuided::new(2, 10, cfg(2, f64::NAN, 1)).is_err());
        assert!(HGuided::new(2, 10, cfg(1, 2.0, 1)).is_err());
    }

    #[test]
    fn near_optimal_on_a_linear_heterogeneous_pair() {
        // 1:4 speeds, 1 ms per package: within 5 % of the exact optimum.
        let pus = [lin(1e-3, 1000.0), lin(1e-3, 4000.0)];
        let mut h = HGuided::new(2, 20_000, cfg(2, 2.0, 20)).unwrap();
        let r = simulate(&mut h, &pus, 20_000, SimOptions::default()).unwrap();
        let opt = optimum(&pus, 20_000);
        assert!(r.makespan <= 1.05 * opt, "{} vs {opt}", r.makespan);
    }
}
