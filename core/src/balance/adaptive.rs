//! EngineCL's **Adaptive** balancer (`../shared/papers/sigmoid-opencl-lb.txt`):
//! probe packages on every PU, then the ideal proportional distribution of
//! the rest from the measured powers.
//!
//! * **Probes.** Every PU first runs a probe package (`probe` units,
//!   default [`super::default_initial_block`]). A PU that finishes its probe
//!   while another PU's power is still unknown gets a further probe, grown
//!   by `growth` (default 2), so fast PUs do not idle while a slow one
//!   probes.
//! * **Split.** Once every PU has a measured power, or is still in its
//!   first probe after [`PATIENCE`] times the longest finished first probe
//!   (such a PU gets no share: it finishes its probe and is done; guessing
//!   its power from a probe not finished could only overestimate it), the
//!   remaining `R` units are split so that every PU
//!   finishes together: PU `i`, busy for `b_i` more seconds with its
//!   current package, gets `P_i · (T − b_i)` units, where `T` solves
//!   `Σ max(0, P_i · (T − b_i)) = R` (water-filling). Each PU gets its share
//!   as one package and is then done.
//!
//! No adaptation after the split: a kernel whose cost per unit changes
//! along the data (irregular) is distributed on the probes' measurements,
//! which is the weakness the paper shows.

use super::plb_hec::default_initial_block;
use super::powers::{POWER_WINDOW, Powers};
use super::registry::{Args, BuildContext, Entry, Param};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId, WorkPool};
use crate::rounding::round_to_units;

/// Growth of successive probe packages when none is given.
pub const DEFAULT_GROWTH: f64 = 2.0;

/// A PU still in its first probe after this many times the longest finished
/// first probe is left out of the split (see the module documentation): a
/// PU that much slower than the fastest adds at most 1/17 of the power,
/// while waiting for it would hold the split back.
pub const PATIENCE: f64 = 16.0;

/// Parameters of [`Adaptive`].
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveConfig {
    /// Units of the first probe package; 0 = automatic.
    pub probe: u64,
    /// Growth of successive probes (>= 1).
    pub growth: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            probe: 0,
            growth: DEFAULT_GROWTH,
        }
    }
}

/// What a PU is running.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    len: u64,
    start: f64,
}

/// Probes, then one proportional package each (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct Adaptive {
    pool: WorkPool,
    powers: Powers,
    growth: f64,
    /// Each PU's next probe size.
    next_probe: Vec<f64>,
    running: Vec<Option<InFlight>>,
    /// Each PU's first probe: when it started, whether it finished.
    first_probe: Vec<Option<(f64, bool)>>,
    /// Longest finished first probe, seconds.
    longest_probe_s: f64,
    shares: Option<Vec<u64>>,
    given: Vec<bool>,
    probes: u64,
    left_out: u64,
    estimated: u64,
}

impl Adaptive {
    /// Adaptive over `n` PUs and `total` units.
    pub fn new(n: usize, total: u64, cfg: AdaptiveConfig) -> Result<Adaptive, ConfigError> {
        const NAME: &str = "adaptive";
        if n == 0 {
            return Err(ConfigError::NoPus { balancer: NAME });
        }
        if !(cfg.growth.is_finite() && cfg.growth >= 1.0) {
            return Err(ConfigError::Invalid {
                balancer: NAME,
                field: "growth",
                value: cfg.growth,
                expected: "finite and >= 1",
            });
        }
        let probe = if cfg.probe == 0 {
            default_initial_block(total, n)
        } else {
            cfg.probe
        };
        Ok(Adaptive {
            pool: WorkPool::new(total),
            powers: Powers::new(n, POWER_WINDOW),
            growth: cfg.growth,
            next_probe: vec![probe as f64; n],
            running: vec![None; n],
            first_probe: vec![None; n],
            longest_probe_s: 0.0,
            shares: None,
            given: vec![false; n],
            probes: 0,
            left_out: 0,
            estimated: 0,
        })
    }

    /// The split, once decided (each PU's package of the rest).
    pub fn shares(&self) -> Option<&[u64]> {
        self.shares.as_deref()
    }

    /// Every PU's power at `now` when all are known (0 for a PU left out:
    /// see the module documentation).
    fn powers_at(&mut self, now: f64) -> Option<Vec<f64>> {
        let n = self.running.len();
        let mut out = Vec::with_capacity(n);
        let (mut left_out, mut estimated) = (0, 0);
        for pu in 0..n {
            if let Some(p) = self.powers.measured(pu) {
                out.push(p);
                continue;
            }
            match self.first_probe[pu] {
                // Still in its first probe: wait, or leave it out.
                Some((start, false)) => {
                    let ran = now - start;
                    if self.longest_probe_s <= 0.0 || ran < PATIENCE * self.longest_probe_s {
                        return None;
                    }
                    out.push(0.0);
                    left_out += 1;
                }
                // Never probed (it has not asked yet), or its timings were
                // unusable: the mean of the others.
                _ => {
                    out.push(f64::NAN);
                    estimated += 1;
                }
            }
        }
        let known: Vec<f64> = out
            .iter()
            .copied()
            .filter(|p| p.is_finite() && *p > 0.0)
            .collect();
        if known.is_empty() {
            return None;
        }
        let mean = known.iter().sum::<f64>() / known.len() as f64;
        for p in out.iter_mut().filter(|p| !p.is_finite()) {
            *p = mean;
        }
        self.left_out += left_out;
        self.estimated += estimated;
        Some(out)
    }

    /// Splits the rest so that every PU finishes together (water-filling
    /// over the PUs' busy times).
    fn split(&mut self, powers: &[f64], now: f64) {
        let busy: Vec<f64> = (0..powers.len())
            .map(|pu| match self.running[pu] {
                Some(r) if powers[pu] > 0.0 => {
                    (r.len as f64 / powers[pu] - (now - r.start)).max(0.0)
                }
                _ => 0.0,
            })
            .collect();
        let rest = self.pool.remaining() as f64;
        let mut active: Vec<usize> = (0..powers.len()).filter(|&p| powers[p] > 0.0).collect();
        let mut t = 0.0;
        // Each round drops at least one PU or stops: at most n rounds.
        for _ in 0..=powers.len() {
            let psum: f64 = active.iter().map(|&p| powers[p]).sum();
            if psum <= 0.0 {
                break;
            }
            t = (rest + active.iter().map(|&p| powers[p] * busy[p]).sum::<f64>()) / psum;
            let before = active.len();
            active.retain(|&p| busy[p] < t);
            if active.len() == before {
                break;
            }
        }
        let weights: Vec<f64> = (0..powers.len())
            .map(|p| {
                if active.contains(&p) {
                    powers[p] * (t - busy[p]).max(0.0)
                } else {
                    0.0
                }
            })
            .collect();
        let zeros = vec![0; powers.len()];
        let shares = round_to_units(&weights, self.pool.remaining(), &zeros).unwrap_or_else(|_| {
            // Degenerate weights: equal shares.
            round_to_units(&vec![1.0; powers.len()], self.pool.remaining(), &zeros)
                .unwrap_or_else(|_| vec![0; powers.len()])
        });
        self.shares = Some(shares);
    }
}

impl Balancer for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        if pu >= self.running.len() || self.pool.remaining() == 0 {
            return Decision::Done;
        }
        if self.shares.is_none()
            && self.first_probe[pu].is_some()
            && let Some(powers) = self.powers_at(now)
        {
            self.split(&powers, now);
        }
        let len = match &self.shares {
            Some(shares) => {
                if self.given[pu] || shares[pu] == 0 {
                    return Decision::Done;
                }
                self.given[pu] = true;
                shares[pu]
            }
            None => {
                let len = self.next_probe[pu].round().max(1.0) as u64;
                self.next_probe[pu] *= self.growth;
                self.probes += 1;
                len
            }
        };
        match self.pool.take(pu, len as f64) {
            Some(b) => {
                self.running[pu] = Some(InFlight {
                    len: b.len,
                    start: now,
                });
                if self.first_probe[pu].is_none() {
                    self.first_probe[pu] = Some((now, false));
                }
                Decision::Run(b)
            }
            None => Decision::Done,
        }
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        self.powers.record(&done);
        if let Some(Some((start, finished))) = self.first_probe.get_mut(pu)
            && !*finished
        {
            *finished = true;
            self.longest_probe_s = self.longest_probe_s.max(done.finished_at - *start);
        }
        if let Some(r) = self.running.get_mut(pu) {
            *r = None;
        }
    }

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    fn stats(&self) -> BalancerStats {
        BalancerStats {
            counters: vec![
                ("refits", 0),
                ("probes", self.probes),
                ("left_out", self.left_out),
                ("mean_powers", self.estimated),
            ],
        }
    }
}

fn check_growth(text: &str) -> bool {
    text.parse::<f64>().is_ok_and(|g| g.is_finite() && g >= 1.0)
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let cfg = AdaptiveConfig {
        probe: match args.get("probe") {
            Some(v) => v.parse().map_err(|_| format!("probe = {v:?}"))?,
            None => ctx.tuning.initial_block.unwrap_or(0),
        },
        growth: match args.get("growth") {
            Some(v) => v.parse().map_err(|_| format!("growth = {v:?}"))?,
            None => DEFAULT_GROWTH,
        },
    };
    Ok(Box::new(
        Adaptive::new(ctx.pus, ctx.total, cfg).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "adaptive",
    summary: "EngineCL's Adaptive: growing probe packages on every worker, then the rest split \
              once so all finish together (adaptive:probe=<units>,growth=2)",
    params: &[
        Param {
            key: "probe",
            accepted: "units >= 1",
            check: super::hguided::check_units,
        },
        Param {
            key: "growth",
            accepted: "a number >= 1",
            check: check_growth,
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

    #[test]
    fn probes_then_one_package_each_finishing_together() {
        let pus = [lin(0.0, 100.0), lin(0.0, 400.0)];
        let cfg = AdaptiveConfig {
            probe: 10,
            growth: 2.0,
        };
        let mut b = Adaptive::new(2, 5000, cfg).unwrap();
        let r = simulate(&mut b, &pus, 5000, SimOptions::default()).unwrap();
        // Linear costs, exact powers: the split is the optimum's.
        let opt = optimum(&pus, 5000);
        assert!(r.makespan <= 1.01 * opt, "{} vs {opt}", r.makespan);
        assert!(b.shares().is_some(), "split");
        // Probes: one on the slow PU; the fast one probed while waiting.
        assert!(r.runs.len() <= 6, "{} packages", r.runs.len());
    }

    #[test]
    fn a_pu_stuck_in_its_probe_is_left_out_of_the_split() {
        // PU 1 is 1000x slower: the split does not wait for its probe.
        let pus = [lin(0.0, 1000.0), lin(0.0, 1.0)];
        let cfg = AdaptiveConfig {
            probe: 10,
            growth: 2.0,
        };
        let mut b = Adaptive::new(2, 10_000, cfg).unwrap();
        let r = simulate(&mut b, &pus, 10_000, SimOptions::default()).unwrap();
        assert_eq!(r.units.iter().sum::<u64>(), 10_000);
        // The slow PU's probe alone takes 10 s; the fast PU does the rest.
        assert!(r.makespan <= 11.0, "{}", r.makespan);
        assert!(b.stats().counters.contains(&("left_out", 1)));
        assert_eq!(b.shares().map(|s| s[1]), Some(0));
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(Adaptive::new(0, 10, AdaptiveConfig::default()).is_err());
        let bad = AdaptiveConfig {
            probe: 1,
            growth: 0.5,
        };
        assert!(Adaptive::new(2, 10, bad).is_err());
    }
}
