//! One level of the hierarchical partitioning (the loop of the paper's
//! INPA, or of its IDPA, without the nesting): propose a distribution of
//! `total` units over `n` elements, take the measured times, stop when
//! they agree within `ε`, else improve the models and propose again.
//!
//! The algorithms differ only in what they learn from a measurement and
//! how they split (`../shared/papers/hierarchical-fpm-partitioning.md` §3,
//! §4):
//! * [`Algorithm::Fpm`]: partial speed functions ([`SpeedFunction`]),
//!   a point per measurement (the first from a one-unit probe), split by
//!   the GPA ([`gpa::partition`]);
//! * [`Algorithm::MultipleCpm`]: each element's speed is the constant
//!   `x_i / t_i` of its last measurement, split proportionally, repeated;
//! * [`Algorithm::SingleCpm`]: one such step after the even split;
//! * [`Algorithm::Homogeneous`]: the even split, measured once;
//! * [`Algorithm::PlbHac`]: PLB-HAC's models (least-squares time curves
//!   over its basis, [`crate::fit`]) fitted on every measurement, split by
//!   its equal-finish-time solver; each round is one of its virtual steps
//!   over the whole level.
//!
//! No clock: times come in as arguments. When the rounds run out, or a
//! proposal repeats the last measured one, the best measured distribution
//! (smallest largest time) is kept and the outcome says it did not
//! converge.

use std::fmt;

use super::fpm::SpeedFunction;
use super::gpa;
use crate::fit::{FitConfig, fit_pu};
use crate::model::TimeModel;
use crate::rounding::round_to_units;
use crate::samples::Point;
use crate::solve::{Primary, solve_with_fallback};

/// Most measurements PLB-HAC keeps per element (the oldest go).
pub const MAX_SAMPLES: usize = 64;

/// A partitioning algorithm of the two-level scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Fpm,
    MultipleCpm,
    SingleCpm,
    Homogeneous,
    PlbHac,
}

impl Algorithm {
    /// Every algorithm, ours first.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Fpm,
        Algorithm::PlbHac,
        Algorithm::MultipleCpm,
        Algorithm::SingleCpm,
        Algorithm::Homogeneous,
    ];

    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Fpm => "fpm-hier",
            Algorithm::MultipleCpm => "multiple-cpm",
            Algorithm::SingleCpm => "single-cpm",
            Algorithm::Homogeneous => "homogeneous",
            Algorithm::PlbHac => "plb-hac",
        }
    }

    /// The algorithm called `name` (`fpm` is accepted for `fpm-hier`).
    pub fn parse(name: &str) -> Option<Algorithm> {
        if name == "fpm" {
            return Some(Algorithm::Fpm);
        }
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether it measures a one-unit probe first (the paper's INPA and
    /// IDPA step 1).
    pub fn probes(self) -> bool {
        matches!(self, Algorithm::Fpm | Algorithm::PlbHac)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Convergence settings of one level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelConfig {
    /// `ε`: the measured times agree when `(max − min) / min <= eps`.
    pub eps: f64,
    /// Most measured rounds (the probe not counted), `>= 1`.
    pub max_rounds: usize,
}

impl Default for LevelConfig {
    fn default() -> Self {
        LevelConfig {
            eps: 0.05,
            max_rounds: 20,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run every element on one unit and report the times.
    Probe,
    /// Run this distribution and report the units actually run and times.
    Measure(Vec<u64>),
    /// Finished.
    Done(Outcome),
}

/// The result of a level.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Units per element (the best distribution measured).
    pub units: Vec<u64>,
    /// Their measured times.
    pub times: Vec<f64>,
    /// The largest of those times.
    pub time: f64,
    /// Their relative imbalance ([`gpa::imbalance`]).
    pub imbalance: f64,
    /// Rounds measured (the probe not counted).
    pub rounds: usize,
    /// Whether the times agreed within `ε`.
    pub converged: bool,
}

/// Why a level could not start or go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionError {
    NoElements,
    BadConfig(String),
    /// A measurement of the wrong length, or one that was not asked for.
    Protocol(String),
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::NoElements => f.write_str("no element to partition over"),
            PartitionError::BadConfig(s) | PartitionError::Protocol(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for PartitionError {}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Start,
    Probing,
    Measuring(Vec<u64>),
    Done,
}

/// One level's iterative partitioning (see the module documentation).
#[derive(Debug, Clone)]
pub struct Level {
    algo: Algorithm,
    total: u64,
    cfg: LevelConfig,
    fpms: Vec<SpeedFunction>,
    samples: Vec<Vec<Point>>,
    rounds: usize,
    best: Option<(Vec<u64>, Vec<f64>)>,
    state: State,
}

impl Level {
    /// `algo` over `n` elements and `total` units.
    pub fn new(
        algo: Algorithm,
        n: usize,
        total: u64,
        cfg: LevelConfig,
    ) -> Result<Level, PartitionError> {
        if n == 0 {
            return Err(PartitionError::NoElements);
        }
        if !(cfg.eps.is_finite() && cfg.eps >= 0.0) || cfg.max_rounds == 0 {
            return Err(PartitionError::BadConfig(format!(
                "eps {} must be finite and >= 0, rounds {} >= 1",
                cfg.eps, cfg.max_rounds
            )));
        }
        Ok(Level {
            algo,
            total,
            cfg,
            fpms: vec![SpeedFunction::new(); n],
            samples: vec![Vec::new(); n],
            rounds: 0,
            best: None,
            state: State::Start,
        })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algo
    }

    /// The first thing to measure.
    pub fn start(&mut self) -> Step {
        if self.algo.probes() {
            self.state = State::Probing;
            Step::Probe
        } else {
            self.propose(gpa::even(self.fpms.len(), self.total))
        }
    }

    fn propose(&mut self, units: Vec<u64>) -> Step {
        self.state = State::Measuring(units.clone());
        Step::Measure(units)
    }

    /// The node speed functions learnt so far (FPM).
    pub fn speed_functions(&self) -> &[SpeedFunction] {
        &self.fpms
    }

    fn learn(&mut self, units: &[u64], times: &[f64]) {
        for (i, (&x, &t)) in units.iter().zip(times).enumerate() {
            if x == 0 || !(t > 0.0 && t.is_finite()) {
                continue;
            }
            self.fpms[i].add(x as f64, t);
            let s = &mut self.samples[i];
            if s.len() >= MAX_SAMPLES {
                s.remove(0);
            }
            s.push(Point::new(x as f64, t, 1.0));
        }
    }

    /// PLB-HAC's split: fitted curves, equal-finish-time solver, whole
    /// units; elements whose curve cannot be fitted keep their speed as a
    /// constant.
    fn plb_hac_split(&self) -> Vec<u64> {
        let cfg = FitConfig::default();
        let fits: Vec<Box<dyn TimeModel>> = self
            .samples
            .iter()
            .zip(&self.fpms)
            .map(|(pts, fpm)| match fit_pu(pts, &[], &cfg) {
                Ok(f) => Box::new(f.model) as Box<dyn TimeModel>,
                Err(_) => Box::new(fpm.clone()),
            })
            .collect();
        let refs: Vec<&dyn TimeModel> = fits.iter().map(|m| m.as_ref()).collect();
        match solve_with_fallback(&refs, self.total as f64, Primary::Fast, None) {
            Ok(d) => {
                let zero = vec![0; refs.len()];
                round_to_units(&d.units, self.total, &zero)
                    .unwrap_or_else(|_| gpa::partition(&refs, self.total))
            }
            Err(_) => gpa::partition(&refs, self.total),
        }
    }

    fn finish(&mut self, converged: bool) -> Step {
        Step::Done(self.outcome(converged))
    }

    fn outcome(&mut self, converged: bool) -> Outcome {
        self.state = State::Done;
        let (units, times) = self.best.clone().unwrap_or_default();
        let time = times.iter().copied().fold(0.0, f64::max);
        Outcome {
            imbalance: gpa::imbalance(&units, &times),
            units,
            times,
            time,
            rounds: self.rounds,
            converged,
        }
    }

    /// Ends the level now (the caller cannot realise a new proposal, e.g.
    /// it arranges to the distribution just measured): the best measured
    /// distribution, not converged unless the last measurement was.
    pub fn stop(&mut self) -> Outcome {
        self.outcome(false)
    }

    /// Takes the measurement asked for (`units` actually run, seconds per
    /// element) and says what next.
    pub fn observe(&mut self, units: &[u64], times: &[f64]) -> Result<Step, PartitionError> {
        let n = self.fpms.len();
        if units.len() != n || times.len() != n {
            return Err(PartitionError::Protocol(format!(
                "{} units and {} times for {n} elements",
                units.len(),
                times.len()
            )));
        }
        match std::mem::replace(&mut self.state, State::Done) {
            State::Probing => {
                self.learn(units, times);
                Ok(self.propose(gpa::even(n, self.total)))
            }
            State::Measuring(_) => {
                self.rounds += 1;
                self.learn(units, times);
                let worst = times.iter().copied().fold(0.0, f64::max);
                let better = match &self.best {
                    Some((_, bt)) => worst < bt.iter().copied().fold(0.0, f64::max),
                    None => true,
                };
                if better {
                    self.best = Some((units.to_vec(), times.to_vec()));
                }
                if gpa::imbalance(units, times) <= self.cfg.eps {
                    self.best = Some((units.to_vec(), times.to_vec()));
                    return Ok(self.finish(true));
                }
                let stop = self.rounds >= self.cfg.max_rounds
                    || matches!(self.algo, Algorithm::Homogeneous)
                    || (self.algo == Algorithm::SingleCpm && self.rounds >= 2);
                if stop {
                    return Ok(self.finish(false));
                }
                let next = match self.algo {
                    Algorithm::Fpm => {
                        let refs: Vec<&dyn TimeModel> =
                            self.fpms.iter().map(|f| f as &dyn TimeModel).collect();
                        gpa::partition(&refs, self.total)
                    }
                    Algorithm::MultipleCpm | Algorithm::SingleCpm => {
                        // Each element's constant speed: its last measurement.
                        let speeds: Vec<f64> = self
                            .samples
                            .iter()
                            .map(|s| s.last().map_or(0.0, |p| p.x / p.t))
                            .collect();
                        gpa::proportional(&speeds, self.total)
                    }
                    Algorithm::PlbHac => self.plb_hac_split(),
                    Algorithm::Homogeneous => gpa::even(n, self.total),
                };
                let next = at_least_one_each(next);
                if next == units {
                    // Nothing new to learn: the models reproduce this split.
                    return Ok(self.finish(false));
                }
                Ok(self.propose(next))
            }
            State::Start | State::Done => Err(PartitionError::Protocol(
                "a measurement nobody asked for".into(),
            )),
        }
    }
}

/// Gives every element at least one unit (taken from the largest shares)
/// when there are enough: an element left without work would never be
/// measured again, and a partial model built on a latency-bound probe
/// alone would starve it for good.
fn at_least_one_each(mut x: Vec<u64>) -> Vec<u64> {
    let total: u64 = x.iter().sum();
    if total < x.len() as u64 {
        return x;
    }
    while let Some(i) = x.iter().position(|&v| v == 0) {
        let Some(j) = (0..x.len()).max_by_key(|&j| x[j]) else {
            break;
        };
        if x[j] <= 1 {
            break;
        }
        x[j] -= 1;
        x[i] = 1;
    }
    x
}

/// Runs a level to its end against `measure(step)`, which returns the
/// units actually run and the times; for a probe, `units` is all ones.
pub fn run_level(
    level: &mut Level,
    mut measure: impl FnMut(&[u64]) -> (Vec<u64>, Vec<f64>),
) -> Result<Outcome, PartitionError> {
    let n = level.fpms.len();
    let mut step = level.start();
    loop {
        step = match step {
            Step::Probe => {
                let (u, t) = measure(&vec![1; n]);
                level.observe(&u, &t)?
            }
            Step::Measure(units) => {
                let (u, t) = measure(&units);
                level.observe(&u, &t)?
            }
            Step::Done(o) => return Ok(o),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Elements with a fixed cost and a speed that halves beyond `cliff`.
    fn true_time(rate: f64, cliff: u64, x: u64) -> f64 {
        if x == 0 {
            return 0.0;
        }
        let slow = if x > cliff { 4.0 } else { 1.0 };
        0.001 + slow * x as f64 / rate
    }

    fn run(algo: Algorithm, spec: &[(f64, u64)], total: u64) -> Outcome {
        let mut level = Level::new(algo, spec.len(), total, LevelConfig::default()).unwrap();
        run_level(&mut level, |u| {
            let t = u
                .iter()
                .zip(spec)
                .map(|(&x, &(r, c))| true_time(r, c, x))
                .collect();
            (u.to_vec(), t)
        })
        .unwrap()
    }

    #[test]
    fn fpm_converges_on_linear_speeds() {
        let o = run(
            Algorithm::Fpm,
            &[(100.0, u64::MAX), (300.0, u64::MAX)],
            4000,
        );
        assert!(o.converged && o.imbalance <= 0.05, "{o:?}");
        assert_eq!(o.units.iter().sum::<u64>(), 4000);
        assert!(
            (o.units[1] as f64 / o.units[0] as f64 / 3.0 - 1.0).abs() < 0.06,
            "{o:?}"
        );
    }

    #[test]
    fn fpm_finds_the_balance_past_a_memory_cliff_where_cpm_does_not() {
        // The fast element slows 4x beyond 2500 units: the optimum keeps it at
        // the cliff (2500 / 1500, 15 s); CPM, measuring it below, overshoots.
        let spec = [(100.0, u64::MAX), (400.0, 2500)];
        let fpm = run(Algorithm::Fpm, &spec, 4000);
        // No split balances exactly (the cliff); the optimum is 15 s.
        assert!(fpm.time < 15.1, "{fpm:?}");
        let cpm = run(Algorithm::MultipleCpm, &spec, 4000);
        let single = run(Algorithm::SingleCpm, &spec, 4000);
        let homo = run(Algorithm::Homogeneous, &spec, 4000);
        assert!(fpm.time < cpm.time, "fpm {fpm:?} cpm {cpm:?}");
        assert!(fpm.time < single.time);
        assert!(fpm.time < homo.time);
        assert_eq!(homo.rounds, 1);
        assert_eq!(single.rounds, 2);
    }

    #[test]
    fn plb_hac_balances_smooth_speeds() {
        let o = run(
            Algorithm::PlbHac,
            &[(100.0, u64::MAX), (250.0, u64::MAX), (50.0, u64::MAX)],
            8000,
        );
        assert!(o.imbalance < 0.1, "{o:?}");
        assert_eq!(o.units.iter().sum::<u64>(), 8000);
    }

    #[test]
    fn no_element_is_left_without_work() {
        // Element 1 pays a large fixed cost: its one-unit probe makes it
        // look 1000x slower than it is on large blocks.
        let mut level = Level::new(Algorithm::Fpm, 2, 1000, LevelConfig::default()).unwrap();
        let mut seen_one = false;
        let out = run_level(&mut level, |u| {
            if u[1] == 0 {
                seen_one = true;
            }
            let t = vec![
                u[0] as f64 * 1e-3,
                if u[1] > 0 {
                    1.0 + u[1] as f64 * 1e-3
                } else {
                    0.0
                },
            ];
            (u.to_vec(), t)
        })
        .unwrap();
        assert!(!seen_one, "an element got nothing");
        assert!(out.units[1] >= 1, "{out:?}");
        assert_eq!(at_least_one_each(vec![0, 5, 0]), vec![1, 3, 1]);
        assert_eq!(at_least_one_each(vec![0, 1]), vec![0, 1]);
    }

    #[test]
    fn the_protocol_is_checked() {
        let mut l = Level::new(Algorithm::Fpm, 2, 10, LevelConfig::default()).unwrap();
        assert!(l.observe(&[1, 1], &[1.0, 1.0]).is_err());
        assert_eq!(l.start(), Step::Probe);
        assert!(l.observe(&[1], &[1.0]).is_err());
        assert!(Level::new(Algorithm::Fpm, 0, 10, LevelConfig::default()).is_err());
        let bad = LevelConfig {
            eps: f64::NAN,
            max_rounds: 3,
        };
        assert!(Level::new(Algorithm::Fpm, 2, 10, bad).is_err());
        assert_eq!(Algorithm::parse("fpm"), Some(Algorithm::Fpm));
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(a.name()), Some(a));
        }
    }
}
