//! EngineCL's **Static** balancer (`../shared/papers/sigmoid-opencl-lb.txt`):
//! one block per PU, sized in proportion to each PU's relative speed.
//!
//! * Speeds given ([`StaticConfig::speeds`]): every PU's block is fixed at
//!   the start; PU `p` gets `W · s_p / Σ s` units (largest remainders), and
//!   is `Done` after it. Given by name (`static:speeds=1/4`), or, in task
//!   mode, by the trained models of the epoch's codelet (the inverse of
//!   each worker's predicted seconds per task, [`BuildContext::unit_s`]):
//!   the paper's Static, whose speeds are known before the run.
//! * Speeds not given: the speeds are *measured* first. Every PU runs one
//!   probe block of [`StaticConfig::probe`] units; when every probe has
//!   finished (the others wait), the rest is split once in proportion to
//!   the measured throughputs (units per second of compute plus
//!   transfer), one block per PU.
//! * The next pass over the same PUs ([`Balancer::continue_with`]) keeps
//!   the speeds, given or measured: no second probe.
//!
//! No adaptation after the split: Static is the reference that is optimal
//! for regular kernels on known hardware and poor otherwise, as the paper
//! measures.

use super::plb_hec::default_initial_block;
use super::registry::{Args, BuildContext, Entry, Param};
use super::{Balancer, BalancerStats, Completion, ConfigError, Decision, PuId, WorkPool};
use crate::rounding::round_to_units;

/// Parameters of [`Static`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StaticConfig {
    /// Relative speed of each PU (any positive scale; one per PU). `None`:
    /// measured by probe blocks.
    pub speeds: Option<Vec<f64>>,
    /// Units of each probe block when the speeds are measured; 0 = the
    /// baselines' automatic initial block
    /// ([`super::default_initial_block`]).
    pub probe: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Probe {
    /// Not given one yet.
    Pending,
    /// Runs its probe.
    Running,
    /// Measured: units per second.
    Measured(f64),
    /// None was left to give it.
    Skipped,
}

/// One block per PU, by relative speed (see the module documentation).
#[derive(Debug, Clone)]
pub struct Static {
    pool: WorkPool,
    n: usize,
    probe_units: u64,
    probes: Vec<Probe>,
    /// Each PU's block of the split, once decided.
    shares: Option<Vec<u64>>,
    given: Vec<bool>,
    /// The speeds of the split, given or measured, once known.
    speeds: Option<Vec<f64>>,
    /// Seconds per unit by which the split was sized (measured speeds).
    spu: Vec<Option<f64>>,
    running: Vec<Option<f64>>,
    probe_blocks: u64,
}

impl Static {
    /// Static over `n_pus` PUs and `total` units.
    pub fn new(n_pus: usize, total: u64, cfg: StaticConfig) -> Result<Static, ConfigError> {
        const NAME: &str = "static";
        if n_pus == 0 {
            return Err(ConfigError::NoPus { balancer: NAME });
        }
        let mut s = Static {
            pool: WorkPool::new(total),
            n: n_pus,
            probe_units: if cfg.probe == 0 {
                default_initial_block(total, n_pus)
            } else {
                cfg.probe
            },
            probes: vec![Probe::Pending; n_pus],
            shares: None,
            given: vec![false; n_pus],
            speeds: None,
            spu: vec![None; n_pus],
            running: vec![None; n_pus],
            probe_blocks: 0,
        };
        if let Some(speeds) = cfg.speeds {
            if speeds.len() != n_pus {
                return Err(ConfigError::Invalid {
                    balancer: NAME,
                    field: "speeds (count)",
                    value: speeds.len() as f64,
                    expected: "one speed per PU",
                });
            }
            if let Some(&bad) = speeds.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                return Err(ConfigError::Invalid {
                    balancer: NAME,
                    field: "speeds",
                    value: bad,
                    expected: "finite and >= 0, at least one > 0",
                });
            }
            if speeds.iter().all(|&v| v == 0.0) {
                return Err(ConfigError::Invalid {
                    balancer: NAME,
                    field: "speeds",
                    value: 0.0,
                    expected: "at least one > 0",
                });
            }
            s.split(&speeds);
        }
        Ok(s)
    }

    /// Each PU's block of the split, once decided.
    pub fn shares(&self) -> Option<&[u64]> {
        self.shares.as_deref()
    }

    /// Splits what remains in proportion to `speeds`.
    fn split(&mut self, speeds: &[f64]) {
        let zeros = vec![0; self.n];
        // Weights validated above or measured (finite, >= 0, one > 0).
        let shares = round_to_units(speeds, self.pool.remaining(), &zeros)
            .unwrap_or_else(|_| vec![0; self.n]);
        self.shares = Some(shares);
        self.speeds = Some(speeds.to_vec());
    }

    fn all_probed(&self) -> bool {
        self.probes
            .iter()
            .all(|p| matches!(p, Probe::Measured(_) | Probe::Skipped))
    }
}

impl Balancer for Static {
    fn name(&self) -> &'static str {
        "static"
    }

    fn next(&mut self, pu: PuId, _now: f64) -> Decision {
        if pu >= self.n || self.pool.remaining() == 0 {
            return Decision::Done;
        }
        if let Some(shares) = &self.shares {
            if self.given[pu] || shares[pu] == 0 {
                return Decision::Done;
            }
            self.given[pu] = true;
            let len = shares[pu];
            self.running[pu] = self.spu[pu].map(|s| s * len as f64);
            return match self.pool.take(pu, len as f64) {
                Some(b) => Decision::Run(b),
                None => Decision::Done,
            };
        }
        if self.probes[pu] == Probe::Pending {
            return match self.pool.take(pu, self.probe_units as f64) {
                Some(b) => {
                    self.probes[pu] = Probe::Running;
                    self.probe_blocks += 1;
                    Decision::Run(b)
                }
                None => {
                    self.probes[pu] = Probe::Skipped;
                    Decision::Done
                }
            };
        }
        Decision::Wait
    }

    fn completed(&mut self, done: Completion) {
        let pu = done.block.pu;
        if pu >= self.n {
            return;
        }
        self.running[pu] = None;
        if self.probes[pu] != Probe::Running || self.shares.is_some() {
            return;
        }
        let secs = (done.compute_s + done.transfer_s).max(1e-12);
        self.probes[pu] = Probe::Measured(done.block.len as f64 / secs);
        if self.all_probed() {
            for p in 0..self.n {
                if self.probes[p] == Probe::Skipped {
                    // Never ran: it gets nothing from the split.
                    self.given[p] = true;
                }
            }
            let speeds: Vec<f64> = self
                .probes
                .iter()
                .map(|p| match p {
                    Probe::Measured(r) if r.is_finite() => *r,
                    Probe::Measured(_) => f64::MAX / (self.n as f64 * 4.0),
                    _ => 0.0,
                })
                .collect();
            self.spu = speeds.iter().map(|&r| (r > 0.0).then(|| 1.0 / r)).collect();
            self.split(&speeds);
        }
    }

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    fn predicted_s(&self, pu: PuId) -> Option<f64> {
        self.running.get(pu).copied().flatten()
    }

    fn stats(&self) -> BalancerStats {
        BalancerStats {
            counters: vec![("refits", 0), ("probe_blocks", self.probe_blocks)],
        }
    }

    /// The next pass splits by the same speeds; `None` (probe again) while
    /// they are not known or a PU was never measured (speed 0 from a
    /// skipped probe).
    fn continue_with(&self, total: u64) -> Option<Result<Box<dyn Balancer + Send>, String>> {
        let speeds = self.speeds.as_ref()?;
        if speeds.iter().any(|&v| v <= 0.0) {
            return None;
        }
        let cfg = StaticConfig {
            speeds: Some(speeds.clone()),
            probe: self.probe_units,
        };
        Some(
            Static::new(self.n, total, cfg)
                .map(|b| Box::new(b) as Box<dyn Balancer + Send>)
                .map_err(|e| e.to_string()),
        )
    }
}

/// `1/4/2`: one positive-or-zero speed per PU.
fn speeds_of(text: &str) -> Option<Vec<f64>> {
    text.split('/')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
        })
        .collect()
}

fn check_speeds(text: &str) -> bool {
    speeds_of(text).is_some_and(|v| v.iter().any(|&s| s > 0.0))
}

fn check_probe(text: &str) -> bool {
    text.parse::<u64>().is_ok_and(|n| n > 0)
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    // Speeds by name, else from the trained models (seconds per unit).
    let modelled = ctx
        .unit_s
        .filter(|t| t.len() == ctx.pus && t.iter().all(|s| s.is_finite() && *s > 0.0))
        .map(|t| t.iter().map(|s| 1.0 / s).collect());
    let cfg = StaticConfig {
        speeds: args.get("speeds").and_then(speeds_of).or(modelled),
        probe: args
            .get("probe")
            .and_then(|p| p.parse().ok())
            .or(ctx.tuning.initial_block)
            .unwrap_or(0),
    };
    Ok(Box::new(
        Static::new(ctx.pus, ctx.total, cfg).map_err(|e| e.to_string())?,
    ))
}

pub(super) const ENTRY: Entry = Entry {
    name: "static",
    summary: "EngineCL Static: one block per worker sized by relative speed, given \
              (static:speeds=1/4; task mode: the trained models' speeds) or measured by \
              one probe block each",
    params: &[
        Param {
            key: "speeds",
            accepted: "relative speeds, one per PU, separated by '/' (e.g. 1/4)",
            check: check_speeds,
        },
        Param {
            key: "probe",
            accepted: "units >= 1",
            check: check_probe,
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
    fn given_speeds_give_one_proportional_block_per_pu() {
        let cfg = StaticConfig {
            speeds: Some(vec![1.0, 3.0]),
            probe: 0,
        };
        let mut b = Static::new(2, 1000, cfg).unwrap();
        assert_eq!(b.shares(), Some(&[250, 750][..]));
        let pus = [lin(0.0, 100.0), lin(0.0, 300.0)];
        let r = simulate(&mut b, &pus, 1000, SimOptions::default()).unwrap();
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.units, vec![250, 750]);
        assert!((r.makespan - optimum(&pus, 1000)).abs() < 1e-9);
    }

    #[test]
    fn measured_speeds_probe_then_split_once() {
        let pus = [lin(0.0, 100.0), lin(0.0, 400.0), lin(0.0, 200.0)];
        let mut b = Static::new(3, 7000, StaticConfig::default()).unwrap();
        let r = simulate(&mut b, &pus, 7000, SimOptions::default()).unwrap();
        // One probe and one block per PU.
        assert_eq!(r.runs.len(), 6);
        assert_eq!(b.stats().get("probe_blocks"), Some(3));
        // After the probes, each PU's block takes the same time.
        let ends: Vec<f64> = r.runs[3..].iter().map(|x| x.end).collect();
        assert!(ends.iter().all(|e| (e - ends[0]).abs() < 0.02), "{ends:?}");
        assert!(r.units[1] > 3 * r.units[0], "{:?}", r.units);
    }

    #[test]
    fn the_next_pass_keeps_the_measured_speeds() {
        let pus = [lin(0.0, 100.0), lin(0.0, 400.0)];
        let mut b = Static::new(2, 5000, StaticConfig::default()).unwrap();
        simulate(&mut b, &pus, 5000, SimOptions::default()).unwrap();
        assert_eq!(b.stats().get("probe_blocks"), Some(2));
        let mut next = b.continue_with(1000).expect("speeds known").unwrap();
        let r = simulate(&mut next, &pus, 1000, SimOptions::default()).unwrap();
        // One block per PU, no probe: 1/5 and 4/5.
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.units, vec![200, 800]);
        assert_eq!(next.stats().get("probe_blocks"), Some(0));
        // Nothing measured yet: probe again.
        let fresh = Static::new(2, 10, StaticConfig::default()).unwrap();
        assert!(fresh.continue_with(10).is_none());
    }

    #[test]
    fn trained_models_give_the_speeds() {
        let tuning = crate::balance::tuning::Tuning::default();
        let ctx = |unit_s| BuildContext {
            pus: 2,
            total: 100,
            tuning: &tuning,
            kinds: None,
            unit_s,
        };
        // 4 s and 1 s a unit: speeds 1/4 and 1, so 20 and 80 units.
        let with = ENTRY.build;
        let mut b = with(&Args::default(), &ctx(Some(&[4.0, 1.0]))).unwrap();
        let pus = [lin(0.0, 0.25), lin(0.0, 1.0)];
        let r = simulate(&mut b, &pus, 100, SimOptions::default()).unwrap();
        assert_eq!(r.units, vec![20, 80]);
        assert_eq!(b.stats().get("probe_blocks"), Some(0));
        // A missing or unusable prediction: the probe.
        for unit_s in [None, Some(&[4.0, 0.0][..]), Some(&[f64::NAN, 1.0][..])] {
            let mut b = with(&Args::default(), &ctx(unit_s)).unwrap();
            simulate(&mut b, &pus, 100, SimOptions::default()).unwrap();
            assert_eq!(b.stats().get("probe_blocks"), Some(2), "{unit_s:?}");
        }
    }

    #[test]
    fn fewer_units_than_probes_still_cover() {
        for total in [0u64, 1, 2, 5] {
            let pus = [lin(0.0, 1.0), lin(0.0, 2.0), lin(0.0, 3.0)];
            let mut b = Static::new(3, total, StaticConfig::default()).unwrap();
            let r = simulate(&mut b, &pus, total, SimOptions::default()).unwrap();
            assert_eq!(r.units.iter().sum::<u64>(), total);
        }
    }

    #[test]
    fn bad_speeds_are_refused() {
        for speeds in [
            vec![1.0],
            vec![1.0, f64::NAN],
            vec![0.0, 0.0],
            vec![-1.0, 1.0],
        ] {
            let cfg = StaticConfig {
                speeds: Some(speeds.clone()),
                probe: 0,
            };
            assert!(Static::new(2, 10, cfg).is_err(), "{speeds:?}");
        }
        assert!(Static::new(0, 10, StaticConfig::default()).is_err());
    }
}
