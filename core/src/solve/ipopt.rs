//! The papers' method: IPOPT (interior-point line-search filter) on a convex
//! NLP whose KKT conditions are the equal-finish-time system.
//!
//! NLP handed to IPOPT (`y_p = x_p / W` are the shares, `τ` a time scale):
//!
//! ```text
//! minimise   f(y) = (1/τ) Σ_p Φ_p(W·y_p) / W,   Φ_p(x) = ∫₀ˣ E_p(s) ds
//! subject to g(y) = Σ_p y_p = 1,   y_p ≥ 0   (y_p ≤ 1 is implied)
//! ∇f_p   = E_p(W·y_p) / τ                       (exact)
//! ∇²f    = diag( W · E_p'(W·y_p) / τ )          (exact; g is linear)
//! ∇g     = (1, …, 1)
//! ```
//!
//! `Φ_p` is convex because `E_p` is non-decreasing, so the problem is convex
//! and IPOPT's KKT point is the global minimum. Its stationarity condition
//! `E_p(W y_p)/τ + λ − z_p = 0` with `z_p ≥ 0`, `z_p y_p = 0` says: every
//! PU with `y_p > 0` has `E_p(x_p) = −λτ =: T`; every PU with `y_p = 0`
//! has `E_p(0) = T + τ z_p ≥ T`. That is eq. (3) of PLB-HAC plus the
//! exclusion of PUs whose fixed cost exceeds the common finish time. `Φ_p`
//! is evaluated by 8-point Gauss–Legendre quadrature (the value only drives
//! the line search; the gradient and Hessian are exact). `τ` is the harmonic
//! mean of `E_p(W/n)` over the PUs (`T` lies between the smallest and the
//! largest of these), so IPOPT sees gradients of order 1 whatever the time
//! unit. Starting point: the throughput-proportional split
//! `y_p ∝ 1/E_p(W/n)`. The fast solver's answer is not used anywhere, so
//! the two methods are independent.
//!
//! Options: `tol = 1e-12`, adaptive barrier update with the probing
//! (Mehrotra) oracle, `mu_min = 1e-16` (IPOPT's default floor of 1e-11
//! leaves PUs with tiny blocks off by `μ / y_p`), `bound_relax_factor = 0`
//! (relaxed bounds let idle PUs take slightly negative work, which shifts
//! every share by ~1e-7), no NLP scaling (the objective is already scaled
//! by `τ`), `jac_c_constant`, `min_refinement_steps = 0`.
//!
//! [`IpoptSolver::solve_warm`] (production path) starts instead from a
//! previous distribution with its multipliers (`warm_start_init_point`,
//! pushes of 1e-9, monotone barrier from `μ = 1e-11`): about half the
//! iterations when the models changed moderately.
//!
//! Safe Rust: IPOPT itself is reached through the `plb-ipopt` crate, which
//! holds every `unsafe` block (the C API of `ipopt-sys` and the callbacks),
//! turns a failed or panicking evaluation into "evaluation failed" for
//! IPOPT instead of unwinding into C++, and serialises solves with a
//! process-wide mutex (IPOPT with MUMPS is not thread-safe).

use plb_ipopt::{Options, Status};

use super::{BlockSolver, Distribution, SolveError, SolverKind, check_inputs};
use crate::model::TimeModel;

/// IPOPT through `plb-ipopt` (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IpoptSolver {
    /// IPOPT's `tol` (scaled NLP error at which it stops).
    pub tol: f64,
    /// IPOPT's `max_iter`.
    pub max_iter: i32,
    /// IPOPT's `max_cpu_time`, seconds.
    pub max_cpu_time: f64,
    /// IPOPT's `print_level` (0 = silent; 5 = IPOPT's iteration log on
    /// stdout, for debugging).
    pub print_level: i32,
}

impl Default for IpoptSolver {
    fn default() -> Self {
        IpoptSolver {
            tol: 1e-12,
            max_iter: 500,
            max_cpu_time: 10.0,
            print_level: 0,
        }
    }
}

impl BlockSolver for IpoptSolver {
    fn kind(&self) -> SolverKind {
        SolverKind::Ipopt
    }

    fn solve(&self, models: &[&dyn TimeModel], total: f64) -> Result<Distribution, SolveError> {
        self.solve_with_stats(models, total).map(|(d, _)| d)
    }
}

/// Statistics of one IPOPT solve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpoptStats {
    /// IPOPT iterations.
    pub iterations: i32,
    /// IPOPT's return status (0 = solved, 1 = solved to acceptable level).
    pub status: i32,
}

/// 8-point Gauss–Legendre nodes on [-1, 1] (positive half) and weights.
const GL_NODES: [f64; 4] = [
    0.183_434_642_495_649_8,
    0.525_532_409_916_329,
    0.796_666_477_413_626_7,
    0.960_289_856_497_536_3,
];
const GL_WEIGHTS: [f64; 4] = [
    0.362_683_783_378_362,
    0.313_706_645_877_887_3,
    0.222_381_034_453_374_5,
    0.101_228_536_290_376_3,
];

/// The NLP over the shares that IPOPT solves (see the module documentation).
struct SharesNlp<'a> {
    models: &'a [&'a dyn TimeModel],
    w: f64,
    inv_tau: f64,
    n: usize,
    /// Starting point.
    start: Vec<f64>,
    /// Starting multipliers (warm start only).
    warm: Option<WarmPoint>,
}

/// A warm-start point: shares, bound multipliers and equality multiplier.
struct WarmPoint {
    y: Vec<f64>,
    z: Vec<f64>,
    lambda: f64,
}

/// Primal-dual starting point from a previous distribution: `y` its shares
/// (floored at 1e-9 so that IPOPT starts strictly inside), `λ = −T/τ`, and
/// for each PU the multiplier of `y_p ≥ 0`: `(E_p(W y_p) − T)/τ` when
/// positive (an idle PU), else a small value. `T` is the previous finish
/// time, or the largest `E_p(x_p)` among the PUs with work.
fn warm_point(
    models: &[&dyn TimeModel],
    total: f64,
    tau: f64,
    previous: &Distribution,
) -> Option<WarmPoint> {
    let n = models.len();
    if previous.shares.len() != n || !previous.shares.iter().all(|s| s.is_finite() && *s >= 0.0) {
        return None;
    }
    let floor = 1e-9;
    let sum: f64 = previous.shares.iter().map(|s| s.max(floor)).sum();
    if sum.is_nan() || sum <= 0.0 {
        return None;
    }
    let y: Vec<f64> = previous.shares.iter().map(|s| s.max(floor) / sum).collect();
    let mut t = previous.finish_time;
    if !(t.is_finite() && t > 0.0) {
        t = y
            .iter()
            .zip(models)
            .filter(|(yp, _)| **yp > floor)
            .map(|(yp, m)| m.time(total * yp))
            .fold(f64::NAN, f64::max);
    }
    if !(t.is_finite() && t > 0.0) {
        return None;
    }
    let z = y
        .iter()
        .zip(models)
        .map(|(yp, m)| {
            let gap = (m.time(total * yp) - t) / tau;
            if gap.is_finite() && gap > 1e-9 {
                gap
            } else {
                1e-9
            }
        })
        .collect();
    Some(WarmPoint {
        y,
        z,
        lambda: -t / tau,
    })
}

impl SharesNlp<'_> {
    fn time(&self, p: usize, x: f64) -> Result<f64, String> {
        let v = self.models[p].time(x);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("time of PU {p} at {x} units is {v}"))
        }
    }

    fn slope(&self, p: usize, x: f64) -> Result<f64, String> {
        let v = self.models[p].slope(x);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("slope of PU {p} at {x} units is {v}"))
        }
    }

    /// `E_p(W y)`, continued linearly below 0 (in case IPOPT evaluates a
    /// point slightly outside the bounds).
    fn grad(&self, p: usize, y: f64) -> Result<f64, String> {
        if y >= 0.0 {
            self.time(p, self.w * y)
        } else {
            Ok(self.time(p, 0.0)? + self.w * y * self.slope(p, 0.0)?)
        }
    }

    /// `W E_p'(W y)` (constant below 0, matching [`SharesNlp::grad`]).
    fn hess(&self, p: usize, y: f64) -> Result<f64, String> {
        Ok(self.w * self.slope(p, self.w * y.max(0.0))?)
    }

    /// `Φ_p(W y) / W`: Gauss–Legendre quadrature of `E_p` over `[0, x]`;
    /// below 0 the integral of the linear continuation of [`SharesNlp::grad`].
    fn phi_over_w(&self, p: usize, y: f64) -> Result<f64, String> {
        let x = self.w * y;
        if x <= 0.0 {
            return Ok(y * (self.time(p, 0.0)? + 0.5 * x * self.slope(p, 0.0)?));
        }
        let half = 0.5 * x;
        let mut acc = 0.0;
        for (node, weight) in GL_NODES.iter().zip(GL_WEIGHTS) {
            acc += weight
                * (self.time(p, half * (1.0 - node))? + self.time(p, half * (1.0 + node))?);
        }
        Ok(0.5 * y * acc)
    }
}

impl plb_ipopt::Nlp for SharesNlp<'_> {
    fn num_variables(&self) -> usize {
        self.n
    }

    fn num_constraints(&self) -> usize {
        1
    }

    fn bounds(&self, x_l: &mut [f64], x_u: &mut [f64], g_l: &mut [f64], g_u: &mut [f64]) {
        x_l.fill(0.0);
        // No upper bound: y_p ≤ 1 follows from Σ y = 1 and y ≥ 0, and
        // stating it would only add complementarity error (μ / (1 − y))
        // for a PU that takes nearly everything.
        x_u.fill(2e19);
        g_l[0] = 1.0;
        g_u[0] = 1.0;
    }

    fn initial_point(&self, x: &mut [f64]) {
        x.copy_from_slice(&self.start);
    }

    /// Asked only with `warm_start_init_point`, which is set only when
    /// `warm` is present.
    fn initial_bound_multipliers(&self, z_l: &mut [f64], z_u: &mut [f64]) -> Result<(), String> {
        let w = self.warm.as_ref().ok_or("IPOPT asked for multipliers")?;
        z_l.copy_from_slice(&w.z);
        z_u.fill(0.0);
        Ok(())
    }

    fn initial_constraint_multipliers(&self, lambda: &mut [f64]) -> Result<(), String> {
        let w = self.warm.as_ref().ok_or("IPOPT asked for multipliers")?;
        lambda[0] = w.lambda;
        Ok(())
    }

    fn objective(&self, y: &[f64]) -> Result<f64, String> {
        let mut f = 0.0;
        for (p, &yp) in y.iter().enumerate() {
            f += self.phi_over_w(p, yp)?;
        }
        Ok(f * self.inv_tau)
    }

    fn gradient(&self, y: &[f64], g: &mut [f64]) -> Result<(), String> {
        for p in 0..self.n {
            g[p] = self.grad(p, y[p])? * self.inv_tau;
        }
        Ok(())
    }

    fn constraints(&self, y: &[f64], g: &mut [f64]) -> Result<(), String> {
        g[0] = y.iter().sum();
        Ok(())
    }

    fn jacobian_structure(&self) -> Vec<(usize, usize)> {
        (0..self.n).map(|p| (0, p)).collect()
    }

    fn jacobian(&self, _y: &[f64], values: &mut [f64]) -> Result<(), String> {
        values.fill(1.0);
        Ok(())
    }

    /// The diagonal, which is its own lower triangle.
    fn hessian_structure(&self) -> Vec<(usize, usize)> {
        (0..self.n).map(|p| (p, p)).collect()
    }

    fn hessian(
        &self,
        y: &[f64],
        obj_factor: f64,
        _lambda: &[f64],
        h: &mut [f64],
    ) -> Result<(), String> {
        let k = obj_factor * self.inv_tau;
        for p in 0..self.n {
            h[p] = k * self.hess(p, y[p])?;
        }
        Ok(())
    }
}

impl IpoptSolver {
    /// Solves from the throughput-proportional split (independent of any
    /// other solver) and reports IPOPT's iteration count and status.
    pub fn solve_with_stats(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        self.solve_from(models, total, None)
    }

    /// Warm start for the production path: starts IPOPT from `previous`
    /// (typically the distribution of the previous virtual step, computed
    /// with slightly older models), with primal and dual values
    /// (`T` from its finish time, bound multipliers from the fixed costs).
    /// A `previous` over a different number of PUs, or with unusable
    /// values, gives a cold start.
    pub fn solve_warm(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
        previous: &Distribution,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        self.solve_from(models, total, Some(previous))
    }

    fn solve_from(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
        previous: Option<&Distribution>,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        check_inputs(models.len(), total)?;
        let n = models.len();
        if i32::try_from(n).is_err() {
            return Err(SolveError::TooManyPus(n));
        }
        if n == 1 {
            // The feasible set is the single point y = 1.
            let t = models[0].time(total);
            if t.is_nan() {
                return Err(SolveError::NonFinite {
                    pu: 0,
                    x: total,
                    value: t,
                });
            }
            let d = Distribution::from_units(vec![total], total, t, SolverKind::Ipopt);
            return Ok((d, IpoptStats::default()));
        }
        let x_ref = total / n as f64;
        let mut inv_sum = 0.0;
        let mut start = vec![0.0; n];
        for (p, m) in models.iter().enumerate() {
            let t = m.time(x_ref);
            if t.is_nan() {
                return Err(SolveError::NonFinite {
                    pu: p,
                    x: x_ref,
                    value: t,
                });
            }
            if t > 0.0 {
                inv_sum += 1.0 / t;
                start[p] = 1.0 / t;
            }
        }
        // Start from the throughput-proportional split (equal split when
        // the rates are unusable); IPOPT pushes it into the interior.
        if inv_sum > 0.0 && inv_sum.is_finite() {
            for v in &mut start {
                *v /= inv_sum;
            }
        } else {
            start.fill(1.0 / n as f64);
        }
        let tau = if inv_sum > 0.0 && inv_sum.is_finite() {
            n as f64 / inv_sum
        } else {
            1.0
        };
        let warm = previous.and_then(|d| warm_point(models, total, tau, d));
        if let Some(w) = &warm {
            start.copy_from_slice(&w.y);
        }
        let nlp = SharesNlp {
            models,
            w: total,
            inv_tau: 1.0 / tau,
            n,
            start,
            warm,
        };
        let sol = plb_ipopt::solve(&nlp, &self.options(nlp.warm.is_some())).map_err(|e| {
            SolveError::Ipopt {
                status: e.status().code(),
                detail: e.to_string(),
            }
        })?;
        let status = sol.status.code();
        let stats = IpoptStats {
            iterations: sol.iterations,
            status,
        };
        if !sol.status.is_solved() {
            let mut detail = sol.status.name().to_string();
            if let Some(f) = &sol.failure {
                detail.push_str("; ");
                detail.push_str(f);
            }
            return Err(SolveError::Ipopt { status, detail });
        }
        if sol.status == Status::SOLVED_TO_ACCEPTABLE_LEVEL {
            log::debug!("IPOPT solved to acceptable level only ({n} PUs)");
        }
        let (y, lambda) = (sol.x, sol.lambda[0]);
        // IPOPT honours the bounds; clamp against round-off and renormalise
        // so that the shares sum to 1 exactly (to rounding).
        let mut y: Vec<f64> = y.into_iter().map(|v| v.clamp(0.0, 1.0)).collect();
        let sum: f64 = y.iter().sum();
        if !(sum.is_finite() && sum > 0.0) || y.iter().any(|v| v.is_nan()) {
            return Err(SolveError::Ipopt {
                status,
                detail: format!("solution is not usable (sum of shares {sum})"),
            });
        }
        for v in &mut y {
            *v /= sum;
        }
        let units = y.iter().map(|v| v * total).collect();
        let t = -lambda * tau;
        Ok((
            Distribution::from_units(units, total, t, SolverKind::Ipopt),
            stats,
        ))
    }

    /// The IPOPT options of a cold (`warm = false`) or warm solve.
    fn options(&self, warm: bool) -> Options {
        let mut o = Options::new();
        o.int("print_level", self.print_level);
        o.str("sb", "yes");
        o.num("tol", self.tol);
        o.int("max_iter", self.max_iter);
        o.num("max_cpu_time", self.max_cpu_time);
        o.str("jac_c_constant", "yes");
        // Let μ go below IPOPT's 1e-11 floor, so that shares of PUs with
        // tiny blocks are not distorted by complementarity (μ / y_p).
        o.num("mu_min", 1e-16);
        // Keep 0 ≤ y_p exact: relaxed bounds let the PUs that get nothing
        // take slightly negative work, which shifts everybody else's share
        // by ~1e-7.
        o.num("bound_relax_factor", 0.0);
        // The objective is already scaled by τ.
        o.str("nlp_scaling_method", "none");
        // Refine the linear solves only when the residual asks for it (each
        // MUMPS call has a fixed cost of ~0.1 ms).
        o.int("min_refinement_steps", 0);
        if warm {
            // Warm start: keep the given point and multipliers (push them
            // off the bounds by 1e-9 only) and start the barrier parameter
            // near its final value, decreasing monotonically.
            o.str("warm_start_init_point", "yes");
            o.num("warm_start_bound_push", 1e-9);
            o.num("warm_start_bound_frac", 1e-9);
            o.num("warm_start_mult_bound_push", 1e-9);
            o.str("mu_strategy", "monotone");
            o.num("mu_init", 1e-11);
        } else {
            // Adaptive barrier update with the probing (Mehrotra) oracle:
            // the fewest iterations and linear solves from a cold start.
            o.str("mu_strategy", "adaptive");
            o.str("mu_oracle", "probing");
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinearModel;

    #[test]
    fn linear_models_match_the_closed_form() {
        let (a, b, c) = (
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 2.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 5.0,
            },
        );
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        let (d, st) = IpoptSolver::default().solve_with_stats(&ms, 80.0).unwrap();
        assert!(st.iterations > 0);
        for (x, want) in d.units.iter().zip([10.0, 20.0, 50.0]) {
            assert!((x - want).abs() < 1e-7, "{d:?}");
        }
        assert!((d.finish_time - 10.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn excluded_pu_and_multiplier_sign() {
        let (a, b, c) = (
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 6.0,
                rate: 100.0,
            },
        );
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        let d = IpoptSolver::default().solve(&ms, 10.0).unwrap();
        assert!(d.units[2] < 1e-7, "{d:?}");
        assert!((d.finish_time - 5.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn panicking_model_is_reported_not_unwound() {
        let a = LinearModel {
            fixed: 0.0,
            rate: 1.0,
        };
        // A panic inside a callback becomes a failed evaluation.
        struct LateBoom;
        impl TimeModel for LateBoom {
            fn time(&self, x: f64) -> f64 {
                if x == 0.5 { 1.0 } else { panic!("late boom") }
            }
            fn slope(&self, _x: f64) -> f64 {
                1.0
            }
        }
        let c = LateBoom;
        let ms: [&dyn TimeModel; 2] = [&a, &c];
        match IpoptSolver::default().solve(&ms, 1.0) {
            Err(SolveError::Ipopt { detail, .. }) => {
                assert!(detail.contains("panicked"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}
