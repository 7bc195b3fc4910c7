//! Block-size selection: the equal-finish-time system of PLB-HAC eq. (3).
//!
//! Given one [`TimeModel`] `E_p` per processing unit (PU) and a total of `W`
//! work units, find block sizes `x_p` with
//!
//! * `x_p ≥ 0` and `Σ x_p = W`;
//! * `E_p(x_p) = T` for every PU that receives work (`x_p > 0`);
//! * `E_p(0) ≥ T` for every PU that receives nothing (its fixed cost alone
//!   would finish after the others).
//!
//! Two independent solvers implement [`BlockSolver`]:
//!
//! * [`IpoptSolver`] — the papers' method: IPOPT's interior-point line-search
//!   filter algorithm on a convex NLP whose KKT conditions are exactly the
//!   system above (see `docs/solvers.md`);
//! * [`FastSolver`] — a one-dimensional monotone root search on the common
//!   finish time `T`, inverting each `E_p` (geometric partitioning).
//!
//! [`solve_with_fallback`] is what the policies call: the chosen primary
//! solver, then the fast solver, then a throughput-proportional split
//! ([`proportional_split`]), logging why each step was skipped. It returns a
//! [`Distribution`] for every input that has one (at least one PU, a finite
//! total `≥ 0`).
//!
//! Units: solvers work on real-valued units (`x_p ∈ [0, W]`); turn them into
//! whole application units with [`crate::rounding`].

use std::fmt;

use crate::model::TimeModel;

pub mod fast;
pub mod ipopt;

pub use fast::FastSolver;
pub use ipopt::IpoptSolver;

/// Which method produced a [`Distribution`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SolverKind {
    /// IPOPT on the convex NLP of `docs/solvers.md`.
    Ipopt,
    /// The monotone root search on the common finish time.
    Fast,
    /// Last resort: shares proportional to each PU's throughput at the equal
    /// split (no equal-finish guarantee).
    Proportional,
    /// Nothing to distribute (`total == 0`): every block is 0.
    Empty,
}

impl fmt::Display for SolverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SolverKind::Ipopt => "ipopt",
            SolverKind::Fast => "fast",
            SolverKind::Proportional => "proportional",
            SolverKind::Empty => "empty",
        })
    }
}

/// A real-valued distribution of `total` units over the PUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Block size `x_p` of each PU, in units: finite, `≥ 0`, summing to the
    /// total (to rounding).
    pub units: Vec<f64>,
    /// `x_p / total`: finite, `≥ 0`, summing to 1 (to rounding). All 0 when
    /// the total is 0.
    pub shares: Vec<f64>,
    /// Predicted common finish time `T` in seconds (the models' unit). For
    /// [`SolverKind::Proportional`] the largest predicted time among the PUs
    /// that receive work (`+∞` if a model could not predict it); 0 for
    /// [`SolverKind::Empty`].
    pub finish_time: f64,
    /// The method that produced it.
    pub solver: SolverKind,
    /// The methods tried before, and why each was not used (empty when the
    /// first choice succeeded).
    pub fallbacks: Vec<(SolverKind, SolveError)>,
}

impl Distribution {
    /// Builds a distribution from block sizes in units (shares derived).
    pub(crate) fn from_units(
        units: Vec<f64>,
        total: f64,
        finish_time: f64,
        solver: SolverKind,
    ) -> Distribution {
        let shares = if total > 0.0 {
            units.iter().map(|x| x / total).collect()
        } else {
            vec![0.0; units.len()]
        };
        Distribution {
            units,
            shares,
            finish_time,
            solver,
            fallbacks: Vec::new(),
        }
    }

    /// All-zero distribution over `n` PUs (total 0).
    pub fn empty(n: usize) -> Distribution {
        Distribution::from_units(vec![0.0; n], 0.0, 0.0, SolverKind::Empty)
    }

    /// Whether the invariants hold: finite non-negative units summing to
    /// `total` within `1e-9` relative.
    pub fn is_sane(&self, total: f64) -> bool {
        let finite = self
            .units
            .iter()
            .chain(&self.shares)
            .all(|v| v.is_finite() && *v >= 0.0);
        let sum: f64 = self.units.iter().sum();
        finite
            && !self.finish_time.is_nan()
            && (sum - total).abs() <= 1e-9 * total.max(f64::MIN_POSITIVE)
    }
}

/// Why a solver produced no distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum SolveError {
    /// No PU at all.
    NoPus,
    /// The total is NaN, infinite or negative.
    InvalidTotal(f64),
    /// The total is 0: nothing to distribute ([`solve_with_fallback`]
    /// answers with [`Distribution::empty`]).
    ZeroTotal,
    /// A model returned NaN or `-∞` (`value`) for a block of `x` units.
    NonFinite { pu: usize, x: f64, value: f64 },
    /// A model predicts less time for the whole total than for nothing.
    NotMonotone {
        pu: usize,
        at_zero: f64,
        at_total: f64,
    },
    /// Every PU's fixed cost `time(0)` is `+∞`: no PU can take work.
    NoUsablePu,
    /// The models reach `+∞` before the PUs together can take the total.
    NoFiniteSolution,
    /// More PUs than IPOPT's 32-bit indices can address.
    TooManyPus(usize),
    /// IPOPT did not solve the NLP.
    Ipopt {
        /// IPOPT's `ApplicationReturnStatus` code.
        status: i32,
        /// Its name, plus the first failed evaluation if any.
        detail: String,
    },
    /// A solver returned a distribution that breaks the invariants.
    Insane(SolverKind),
}

impl fmt::Display for SolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SolveError::NoPus => write!(f, "no processing unit"),
            SolveError::InvalidTotal(w) => write!(f, "invalid total {w} (must be finite and >= 0)"),
            SolveError::ZeroTotal => write!(f, "total is 0: nothing to distribute"),
            SolveError::NonFinite { pu, x, value } => {
                write!(f, "model of PU {pu} returned {value} for {x} units")
            }
            SolveError::NotMonotone {
                pu,
                at_zero,
                at_total,
            } => write!(
                f,
                "model of PU {pu} is decreasing: time(0) = {at_zero} > time(total) = {at_total}"
            ),
            SolveError::NoUsablePu => write!(f, "every PU has an infinite fixed cost"),
            SolveError::NoFiniteSolution => {
                write!(f, "the models cannot share the total in finite time")
            }
            SolveError::TooManyPus(n) => write!(f, "{n} PUs exceed IPOPT's index range"),
            SolveError::Ipopt { status, detail } => {
                write!(f, "IPOPT failed (status {status}): {detail}")
            }
            SolveError::Insane(kind) => {
                write!(f, "the {kind} solver returned an invalid distribution")
            }
        }
    }
}

impl std::error::Error for SolveError {}

/// A block-size solver: distributes `total` units over the PUs described by
/// `models` so that all PUs that receive work finish together.
pub trait BlockSolver {
    /// Which method this is.
    fn kind(&self) -> SolverKind;

    /// Solves the equal-finish-time system. Errors: [`SolveError::NoPus`],
    /// [`SolveError::InvalidTotal`], [`SolveError::ZeroTotal`], unusable
    /// models, or the method's own failure.
    fn solve(&self, models: &[&dyn TimeModel], total: f64) -> Result<Distribution, SolveError>;
}

/// Checks what every solver needs: at least one PU and a finite total
/// `> 0`.
pub fn check_inputs(n: usize, total: f64) -> Result<(), SolveError> {
    if n == 0 {
        return Err(SolveError::NoPus);
    }
    if !total.is_finite() || total < 0.0 {
        return Err(SolveError::InvalidTotal(total));
    }
    if total == 0.0 {
        return Err(SolveError::ZeroTotal);
    }
    Ok(())
}

/// Which solver [`solve_with_fallback`] tries first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Primary {
    /// IPOPT (the papers' method), then the fast solver.
    #[default]
    Ipopt,
    /// The fast solver only (then the proportional split).
    Fast,
}

/// The production entry point: `primary`, then [`FastSolver`], then
/// [`proportional_split`]; each failure is logged (`log::warn!`) and
/// recorded in [`Distribution::fallbacks`].
///
/// With [`Primary::Ipopt`] and a `previous` distribution over the same PUs
/// (the last virtual step's), IPOPT is first warm-started from it
/// ([`IpoptSolver::solve_warm`]); if that fails, cold-started. `previous`
/// is ignored with [`Primary::Fast`] (the fast solver needs no start).
///
/// Errors only where no distribution exists: no PU
/// ([`SolveError::NoPus`]) or a total that is NaN, infinite or negative
/// ([`SolveError::InvalidTotal`]). A total of 0 gives
/// [`Distribution::empty`].
pub fn solve_with_fallback(
    models: &[&dyn TimeModel],
    total: f64,
    primary: Primary,
    previous: Option<&Distribution>,
) -> Result<Distribution, SolveError> {
    match check_inputs(models.len(), total) {
        Ok(()) => {}
        Err(SolveError::ZeroTotal) => return Ok(Distribution::empty(models.len())),
        Err(e) => return Err(e),
    }
    let ipopt = IpoptSolver::default();
    let fast = FastSolver::default();
    let warm = match (primary, previous) {
        (Primary::Ipopt, Some(prev)) if prev.shares.len() == models.len() => Some(prev),
        _ => None,
    };
    let mut fallbacks = Vec::new();
    let mut attempt =
        |kind: SolverKind, outcome: Result<Distribution, SolveError>| -> Option<Distribution> {
            let checked = outcome.and_then(|d| {
                if d.is_sane(total) {
                    Ok(d)
                } else {
                    Err(SolveError::Insane(kind))
                }
            });
            match checked {
                Ok(d) => Some(d),
                Err(e) => {
                    log::warn!("block-size solver {kind} failed ({e}); falling back");
                    fallbacks.push((kind, e));
                    None
                }
            }
        };
    let mut found = None;
    if let Some(prev) = warm {
        found = attempt(
            SolverKind::Ipopt,
            ipopt.solve_warm(models, total, prev).map(|(d, _)| d),
        );
    }
    if found.is_none() && primary == Primary::Ipopt {
        found = attempt(SolverKind::Ipopt, ipopt.solve(models, total));
    }
    if found.is_none() {
        found = attempt(SolverKind::Fast, fast.solve(models, total));
    }
    let mut d = found.unwrap_or_else(|| proportional_split(models, total));
    d.fallbacks = fallbacks;
    Ok(d)
}

/// Last-resort split, proportional to each PU's throughput at the equal
/// split: `rate_p = (W/n) / E_p(W/n)`.
///
/// * `E_p(W/n) = +∞` → rate 0 (the PU gets nothing);
/// * NaN, `≤ 0` or `-∞` (no usable prediction) → the mean of the usable
///   rates, so the PU still gets work and new samples;
/// * no PU with a usable positive rate → equal split.
///
/// Never fails for `n ≥ 1` and a finite total `≥ 0` (other inputs give an
/// empty vector or zeros rather than a panic).
pub fn proportional_split(models: &[&dyn TimeModel], total: f64) -> Distribution {
    let n = models.len();
    if n == 0 || !total.is_finite() || total <= 0.0 {
        return Distribution::empty(n);
    }
    let x_ref = total / n as f64;
    let rates: Vec<Option<f64>> = models
        .iter()
        .map(|m| {
            let t = m.time(x_ref);
            if t == f64::INFINITY {
                Some(0.0)
            } else if t.is_finite() && t > 0.0 {
                let r = x_ref / t;
                r.is_finite().then_some(r)
            } else {
                None
            }
        })
        .collect();
    let usable: Vec<f64> = rates.iter().flatten().copied().collect();
    let mean = if usable.is_empty() {
        0.0
    } else {
        usable.iter().sum::<f64>() / usable.len() as f64
    };
    let mut weights: Vec<f64> = rates.iter().map(|r| r.unwrap_or(mean)).collect();
    // Normalise by the largest rate first so that neither the sum nor
    // `total * w` can overflow or underflow for extreme (but finite) rates.
    let max = weights.iter().copied().fold(0.0, f64::max);
    if max.is_finite() && max > 0.0 {
        weights.iter_mut().for_each(|w| *w /= max);
    }
    let mut sum: f64 = weights.iter().sum();
    if !(sum.is_finite() && sum > 0.0) {
        weights = vec![1.0; n];
        sum = n as f64;
    }
    let units: Vec<f64> = weights.iter().map(|w| total * (w / sum)).collect();
    let finish_time = models
        .iter()
        .zip(&units)
        .filter(|(_, x)| **x > 0.0)
        .map(|(m, x)| {
            let t = m.time(*x);
            if t.is_nan() { f64::INFINITY } else { t }
        })
        .fold(0.0, f64::max);
    Distribution::from_units(units, total, finish_time, SolverKind::Proportional)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinearModel;

    /// A model that returns a fixed (possibly non-finite) value.
    struct Const(f64);
    impl TimeModel for Const {
        fn time(&self, _x: f64) -> f64 {
            self.0
        }
        fn slope(&self, _x: f64) -> f64 {
            0.0
        }
    }

    /// Zero speed: `time(x) = c` at 0, `+∞` beyond.
    struct Stuck(f64);
    impl TimeModel for Stuck {
        fn time(&self, x: f64) -> f64 {
            if x > 0.0 { f64::INFINITY } else { self.0 }
        }
        fn slope(&self, x: f64) -> f64 {
            if x > 0.0 { 0.0 } else { f64::INFINITY }
        }
    }

    fn lin(fixed: f64, rate: f64) -> LinearModel {
        LinearModel { fixed, rate }
    }

    #[test]
    fn no_pu_and_bad_totals_are_typed_errors() {
        let none: [&dyn TimeModel; 0] = [];
        for p in [Primary::Ipopt, Primary::Fast] {
            assert_eq!(
                solve_with_fallback(&none, 10.0, p, None).unwrap_err(),
                SolveError::NoPus
            );
            let one = lin(0.0, 1.0);
            let ms: [&dyn TimeModel; 1] = [&one];
            for w in [f64::NAN, f64::INFINITY, -1.0] {
                assert!(matches!(
                    solve_with_fallback(&ms, w, p, None),
                    Err(SolveError::InvalidTotal(_))
                ));
            }
        }
        assert_eq!(
            FastSolver::default().solve(&none, 1.0),
            Err(SolveError::NoPus)
        );
        assert_eq!(
            IpoptSolver::default().solve(&none, 1.0),
            Err(SolveError::NoPus)
        );
    }

    #[test]
    fn zero_total_gives_the_empty_distribution() {
        let (a, b) = (lin(1.0, 1.0), lin(0.0, 2.0));
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        let d = solve_with_fallback(&ms, 0.0, Primary::Ipopt, None).unwrap();
        assert_eq!(d.solver, SolverKind::Empty);
        assert_eq!(d.units, vec![0.0, 0.0]);
        assert_eq!(d.shares, vec![0.0, 0.0]);
        assert_eq!(
            FastSolver::default().solve(&ms, 0.0),
            Err(SolveError::ZeroTotal)
        );
    }

    #[test]
    fn one_pu_takes_everything() {
        let a = lin(0.5, 4.0);
        let ms: [&dyn TimeModel; 1] = [&a];
        for p in [Primary::Ipopt, Primary::Fast] {
            let d = solve_with_fallback(&ms, 8.0, p, None).unwrap();
            assert_eq!(d.units, vec![8.0]);
            assert_eq!(d.shares, vec![1.0]);
            assert!((d.finish_time - 2.5).abs() < 1e-12);
            assert!(d.fallbacks.is_empty(), "{:?}", d.fallbacks);
        }
    }

    #[test]
    fn nan_model_falls_back_to_proportional() {
        let (a, b) = (lin(0.0, 1.0), Const(f64::NAN));
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        let d = solve_with_fallback(&ms, 10.0, Primary::Ipopt, None).unwrap();
        assert_eq!(d.solver, SolverKind::Proportional);
        assert_eq!(d.fallbacks.len(), 2);
        assert!(matches!(
            d.fallbacks[1].1,
            SolveError::NonFinite { pu: 1, .. }
        ));
        // The unpredictable PU gets the mean rate, so half the work.
        assert!((d.units[1] - 5.0).abs() < 1e-12);
        assert!(d.is_sane(10.0));
    }

    #[test]
    fn infinite_fixed_costs_everywhere_split_equally() {
        let (a, b) = (Const(f64::INFINITY), Const(f64::INFINITY));
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        let d = solve_with_fallback(&ms, 4.0, Primary::Fast, None).unwrap();
        assert_eq!(d.solver, SolverKind::Proportional);
        assert_eq!(d.fallbacks[0].1, SolveError::NoUsablePu);
        assert_eq!(d.units, vec![2.0, 2.0]);
        assert!(d.is_sane(4.0));
    }

    #[test]
    fn zero_speed_pu_gets_nothing() {
        let (a, b, c) = (lin(0.0, 1.0), Stuck(0.0), lin(0.0, 3.0));
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        for p in [Primary::Ipopt, Primary::Fast] {
            let d = solve_with_fallback(&ms, 8.0, p, None).unwrap();
            assert!(d.is_sane(8.0), "{d:?}");
            assert!(d.units[1] < 1e-9, "{d:?}");
            assert!((d.units[0] - 2.0).abs() < 1e-9, "{d:?}");
            assert!((d.units[2] - 6.0).abs() < 1e-9, "{d:?}");
        }
    }

    #[test]
    fn constant_time_pu_takes_the_rest() {
        // PU 1 finishes any block in 1 s (infinite speed past its fixed
        // cost); PU 0 needs 1 s for 2 units: T = 1, PU 0 takes 2.
        let (a, b) = (lin(0.0, 2.0), Const(1.0));
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        for p in [Primary::Ipopt, Primary::Fast] {
            let d = solve_with_fallback(&ms, 10.0, p, None).unwrap();
            assert!(d.is_sane(10.0), "{d:?}");
            assert!((d.finish_time - 1.0).abs() < 1e-6, "{d:?}");
            assert!((d.units[0] - 2.0).abs() < 1e-4, "{d:?}");
        }
    }

    #[test]
    fn decreasing_model_is_rejected_by_the_fast_solver() {
        struct Down;
        impl TimeModel for Down {
            fn time(&self, x: f64) -> f64 {
                10.0 - x
            }
            fn slope(&self, _x: f64) -> f64 {
                -1.0
            }
        }
        let (a, b) = (lin(0.0, 1.0), Down);
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        assert!(matches!(
            FastSolver::default().solve(&ms, 5.0),
            Err(SolveError::NotMonotone { pu: 1, .. })
        ));
        let d = solve_with_fallback(&ms, 5.0, Primary::Ipopt, None).unwrap();
        assert!(d.is_sane(5.0));
    }

    #[test]
    fn proportional_split_neither_overflows_nor_underflows() {
        // Found by core/tests/fuzz.rs: `total * rate` overflowed to inf for
        // near-instant PUs, and underflowed to 0 for tiny totals.
        let instant = Const(2.2e-308);
        let d = proportional_split(&[&instant], 2.9);
        assert!(d.is_sane(2.9), "{d:?}");
        let (slow, fast) = (Const(0.04), Const(1e-229));
        let d = proportional_split(&[&slow, &fast], 4.4e-300);
        assert!(d.is_sane(4.4e-300), "{d:?}");
        assert!(d.units[1] > d.units[0]);
    }

    #[test]
    fn proportional_split_handles_everything() {
        let (a, b, c, d0) = (
            lin(0.0, 1.0),
            lin(0.0, 3.0),
            Const(f64::INFINITY),
            Const(0.0),
        );
        let ms: [&dyn TimeModel; 4] = [&a, &b, &c, &d0];
        let d = proportional_split(&ms, 12.0);
        assert!(d.is_sane(12.0), "{d:?}");
        assert_eq!(d.units[2], 0.0);
        let none: [&dyn TimeModel; 0] = [];
        assert!(proportional_split(&none, 1.0).units.is_empty());
        assert_eq!(proportional_split(&ms, f64::NAN).units, vec![0.0; 4]);
    }
}
