//! The fast exact solver: a monotone root search on the common finish time.
//!
//! Each `E_p` is non-decreasing, so for a finish time `T` PU `p` can take
//! `x_p(T) = sup { x ∈ [0, W] : E_p(x) ≤ T }` (0 when `T < E_p(0)`, `W` when
//! `E_p(W) ≤ T`), and `S(T) = Σ_p x_p(T)` is non-decreasing in `T`. The
//! answer is the smallest `T*` with `S(T*) ≥ W` — the line through the
//! origin of the geometric partitioning algorithm, in time rather than
//! speed. Algorithm (`docs/solvers.md` has the details):
//!
//! 1. bracket `T*` in `[min_p E_p(0), min_p E_p(W)]` (`S` is 0 below the
//!    smallest fixed cost; the PU with the smallest `E_p(W)` alone takes `W`
//!    at that level);
//! 2. first guess from the tangent of every `E_p` at the equal split `W/n`;
//! 3. safeguarded Newton on `S(T) = W` (`S'(T) = Σ 1/E_p'(x_p)` over the
//!    PUs strictly inside `(0, W)`), bisection whenever Newton leaves the
//!    bracket or stalls; every `x_p(T)` by a safeguarded Newton/bisection
//!    on `E_p(x) = T`, warm-started from the previous outer iteration's
//!    tangent and bracketed by the values at the bracket ends;
//! 4. stop when `|S(T) − W| ≤ max(1e-12, 8 n ε)·W` and rescale the `x_p` to
//!    sum to `W`; or, when the bracket shrinks to adjacent floats (a jump of
//!    `S`: a PU whose model is flat at `T*`), interpolate between the two
//!    ends, which splits the jump among the flat PUs.

use super::{BlockSolver, Distribution, SolveError, SolverKind, check_inputs};
use crate::model::TimeModel;

/// The fast exact solver (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FastSolver {
    /// Cap on outer (finish-time) iterations; on reaching it the solver
    /// interpolates between the bracket ends (still a valid distribution).
    pub max_outer: usize,
    /// Absolute tolerance on each `x_p`, relative to the total.
    pub x_tol: f64,
}

impl Default for FastSolver {
    fn default() -> Self {
        FastSolver {
            max_outer: 200,
            x_tol: 1e-14,
        }
    }
}

impl BlockSolver for FastSolver {
    fn kind(&self) -> SolverKind {
        SolverKind::Fast
    }

    fn solve(&self, models: &[&dyn TimeModel], total: f64) -> Result<Distribution, SolveError> {
        self.solve_models(models, total)
    }
}

/// Cap on the inner (per-PU inversion) iterations; bisection alone needs
/// ~50 to reach `x_tol`.
const MAX_INNER: usize = 200;

/// Statistics of one fast solve (for the benchmark and the docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastStats {
    /// Outer iterations (evaluations of `S(T)`).
    pub outer: usize,
    /// Model evaluations (`time` and `slope` calls).
    pub evaluations: usize,
}

impl FastSolver {
    /// Solves for any slice of models (monomorphised: no dynamic dispatch).
    pub fn solve_models<M: TimeModel>(
        &self,
        models: &[M],
        total: f64,
    ) -> Result<Distribution, SolveError> {
        self.solve_with_stats(models, total).map(|(d, _)| d)
    }

    /// [`FastSolver::solve_models`] plus iteration counts.
    pub fn solve_with_stats<M: TimeModel>(
        &self,
        models: &[M],
        total: f64,
    ) -> Result<(Distribution, FastStats), SolveError> {
        check_inputs(models.len(), total)?;
        let mut st = State::new(models, total, self.x_tol * total)?;
        let t = st.run(self.max_outer)?;
        let stats = FastStats {
            outer: st.outer,
            evaluations: st.evals,
        };
        Ok((
            Distribution::from_units(st.x, total, t, SolverKind::Fast),
            stats,
        ))
    }
}

/// Checks one model value: NaN and `-∞` are unusable (`+∞` means "never").
fn checked(value: f64, pu: usize, x: f64) -> Result<f64, SolveError> {
    if value.is_nan() || value == f64::NEG_INFINITY {
        Err(SolveError::NonFinite { pu, x, value })
    } else {
        Ok(value)
    }
}

/// A point strictly inside `(a, b)` for bisection (geometric when the
/// bracket spans orders of magnitude), or `None` when there is none.
fn split(a: f64, b: f64) -> Option<f64> {
    let m = if a > 0.0 && b > 16.0 * a {
        a.sqrt() * b.sqrt()
    } else if a >= 0.0 && b > 1.0 && a < 1e-300 {
        // Bracket from 0 (no fixed cost) to a huge bound: search the scale.
        (1e-300f64).sqrt() * b.sqrt()
    } else {
        a + 0.5 * (b - a)
    };
    (m > a && m < b).then_some(m)
}

struct State<'m, M> {
    models: &'m [M],
    w: f64,
    x_tol: f64,
    n: usize,
    e0: Vec<f64>,
    ew: Vec<f64>,
    /// Current `x_p(T)`.
    x: Vec<f64>,
    /// Slope at the last inner iterate (NaN when the PU is pinned at 0/W).
    slope: Vec<f64>,
    /// Warm-start guesses for the next inversion.
    guess: Vec<f64>,
    /// Bracket ends: `x_p` at `a` (`S(a) < W`) and at `b`. Before `a` is
    /// evaluated `x_a = 0` is the left limit of `S` at the smallest fixed
    /// cost; before `b` is evaluated `x_b = W` is only an upper bound.
    x_a: Vec<f64>,
    x_b: Vec<f64>,
    outer: usize,
    evals: usize,
}

impl<'m, M: TimeModel> State<'m, M> {
    fn new(models: &'m [M], w: f64, x_tol: f64) -> Result<Self, SolveError> {
        let n = models.len();
        let mut e0 = Vec::with_capacity(n);
        let mut ew = Vec::with_capacity(n);
        for (p, m) in models.iter().enumerate() {
            let a = checked(m.time(0.0), p, 0.0)?;
            let b = checked(m.time(w), p, w)?;
            if b < a {
                return Err(SolveError::NotMonotone {
                    pu: p,
                    at_zero: a,
                    at_total: b,
                });
            }
            e0.push(a);
            ew.push(b);
        }
        Ok(State {
            models,
            w,
            x_tol,
            n,
            e0,
            ew,
            x: vec![0.0; n],
            slope: vec![f64::NAN; n],
            guess: vec![0.0; n],
            x_a: vec![0.0; n],
            x_b: vec![w; n],
            outer: 0,
            evals: 2 * n,
        })
    }

    /// Runs the outer search; leaves the distribution in `self.x` and
    /// returns the finish time.
    fn run(&mut self, max_outer: usize) -> Result<f64, SolveError> {
        let w = self.w;
        let mut a = self.e0.iter().copied().fold(f64::INFINITY, f64::min);
        if a == f64::INFINITY {
            return Err(SolveError::NoUsablePu);
        }
        let b_min = self.ew.iter().copied().fold(f64::INFINITY, f64::min);
        // `b_min` finite: that PU alone takes W at that level, S(b) ≥ W.
        let (mut b, mut b_known_feasible) = if b_min.is_finite() {
            (b_min, true)
        } else {
            (f64::MAX, false)
        };
        if self.n == 1 {
            self.x[0] = w;
            return Ok(self.ew[0]);
        }
        let (mut s_a, mut s_b) = (0.0, f64::INFINITY);
        let mut b_evaluated = false;
        let tol_s = w * (1e-12f64).max(8.0 * self.n as f64 * f64::EPSILON);

        let mut t = match self.initial_guess() {
            Some(t) if t > a && t < b => t,
            _ => match split(a, b) {
                Some(t) => t,
                None => b,
            },
        };
        let mut dt_old = f64::INFINITY;
        let mut dt = f64::INFINITY;
        // Illinois false position: which end moved last, and the weights
        // that halve the stale end's residual when the same end moves twice.
        let mut last_moved_a: Option<bool> = None;
        let (mut wa, mut wb) = (1.0f64, 1.0f64);
        while self.outer < max_outer {
            // `t == b` only as the probe of a not-yet-evaluated feasible b.
            if !(t > a && (t < b || (t == b && !b_evaluated))) {
                break; // bracket collapsed
            }
            self.outer += 1;
            let (s, ds) = self.evaluate(t, true)?;
            let r = w - s;
            if r.abs() <= tol_s {
                self.rescale();
                return Ok(t);
            }
            let newton = t + r / ds;
            let slope_ok = ds > 0.0 && ds.is_finite();
            if slope_ok && (newton - t).abs() <= 4.0 * f64::EPSILON * t.abs() && r.abs() <= 1e-9 * w
            {
                // S is so steep that T cannot resolve the residual: take the
                // Newton step in x instead (first order is exact here).
                self.correct_in_x(r, ds);
                self.rescale();
                return Ok(t);
            }
            let moved_a = r > 0.0;
            if moved_a {
                a = t;
                s_a = s;
                self.x_a.copy_from_slice(&self.x);
            } else {
                b = t;
                s_b = s;
                b_evaluated = true;
                b_known_feasible = true;
                self.x_b.copy_from_slice(&self.x);
            }
            match last_moved_a {
                Some(prev) if prev == moved_a => {
                    if moved_a {
                        wb *= 0.5;
                    } else {
                        wa *= 0.5;
                    }
                }
                _ => {
                    wa = 1.0;
                    wb = 1.0;
                }
            }
            last_moved_a = Some(moved_a);
            let t_new = if slope_ok
                && newton > a
                && newton < b
                && newton != t
                && (2.0 * (newton - t)).abs() <= dt_old.abs()
            {
                newton
            } else if !b_evaluated && b_known_feasible {
                b // probe the upper end once: false position needs S(b)
            } else {
                let (fa, fb) = (wa * (s_a - w), wb * (s_b - w));
                let fp = a + (b - a) * (-fa / (fb - fa));
                if b_evaluated && fp > a && fp < b {
                    fp
                } else {
                    match split(a, b) {
                        Some(m) => m,
                        None => break,
                    }
                }
            };
            dt_old = dt;
            dt = t_new - t;
            for p in 0..self.n {
                let sl = self.slope[p];
                self.guess[p] = if sl.is_finite() && sl > 0.0 {
                    self.x[p] + (t_new - t) / sl
                } else {
                    self.x[p]
                };
            }
            t = t_new;
        }
        // Bracket collapsed (a jump of S) or iteration cap: interpolate.
        if !b_evaluated {
            for p in 0..self.n {
                self.guess[p] = self.x_b[p];
            }
            let (s, _) = self.evaluate(b, false)?;
            if !b_known_feasible && s < w - tol_s {
                return Err(SolveError::NoFiniteSolution);
            }
            s_b = s;
            self.x_b.copy_from_slice(&self.x);
        }
        log::debug!(
            "fast solver: interpolating in [{a}, {b}] after {} iterations (S: {s_a} .. {s_b}, W = {w})",
            self.outer
        );
        let theta = if s_b > s_a {
            ((w - s_a) / (s_b - s_a)).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let mut sum = 0.0;
        for p in 0..self.n {
            let lo = self.x_a[p];
            let hi = self.x_b[p].max(lo);
            self.x[p] = lo + theta * (hi - lo);
            sum += self.x[p];
        }
        if sum.is_nan() || sum <= 0.0 {
            return Err(SolveError::NoFiniteSolution);
        }
        let k = w / sum;
        for v in &mut self.x {
            *v = (*v * k).min(w);
        }
        Ok(a + theta * (b - a))
    }

    /// Scales `x` to sum to exactly `W` (to rounding).
    fn rescale(&mut self) {
        let sum: f64 = self.x.iter().sum();
        if sum > 0.0 {
            let k = self.w / sum;
            for v in &mut self.x {
                *v = (*v * k).min(self.w);
            }
        }
    }

    /// Distributes the residual `r = W − S(T)` over the PUs strictly inside
    /// `(0, W)` in proportion to `1 / E_p'(x_p)` (a Newton step in `x`).
    fn correct_in_x(&mut self, r: f64, ds: f64) {
        for p in 0..self.n {
            let sl = self.slope[p];
            if sl.is_finite() && sl > 0.0 {
                self.x[p] = (self.x[p] + r / (sl * ds)).clamp(0.0, self.w);
            }
        }
    }

    /// Tangent of each `E_p` at the equal split, then the common `T` of
    /// these lines (a few active-set sweeps). Also sets the first guesses.
    fn initial_guess(&mut self) -> Option<f64> {
        let n = self.n;
        let x_ref = self.w / n as f64;
        // Reuse `x_a`/`x_b` as scratch? No: keep them; use guess + slope.
        let mut t_ref = vec![f64::NAN; n];
        for (p, m) in self.models.iter().enumerate() {
            if self.e0[p].is_finite() {
                let tv = m.time(x_ref);
                let sv = m.slope(x_ref);
                self.evals += 2;
                if tv.is_finite() && sv.is_finite() && sv > 0.0 {
                    t_ref[p] = tv;
                    self.slope[p] = sv;
                }
            }
        }
        let lin = |p: usize, t: f64, t_ref: &[f64], slope: &[f64]| -> f64 {
            if self.e0[p] >= t || t.is_nan() || t_ref[p].is_nan() {
                0.0
            } else {
                (x_ref + (t - t_ref[p]) / slope[p]).clamp(0.0, self.w)
            }
        };
        // Start with every PU that has a tangent active.
        let mut active: Vec<bool> = t_ref.iter().map(|v| !v.is_nan()).collect();
        let mut t = f64::NAN;
        for _ in 0..8 {
            let (mut num, mut den, mut cnt) = (0.0, 0.0, 0.0);
            for p in 0..n {
                if active[p] {
                    num += t_ref[p] / self.slope[p];
                    den += 1.0 / self.slope[p];
                    cnt += 1.0;
                }
            }
            if den.is_nan() || den <= 0.0 {
                break;
            }
            let t_new = (self.w - cnt * x_ref + num) / den;
            if !t_new.is_finite() {
                break;
            }
            t = t_new;
            let mut changed = false;
            for (p, act) in active.iter_mut().enumerate() {
                let on = lin(p, t, &t_ref, &self.slope) > 0.0;
                changed |= on != *act;
                *act = on;
            }
            if !changed {
                break;
            }
        }
        if t.is_nan() {
            return None;
        }
        for p in 0..n {
            self.guess[p] = lin(p, t, &t_ref, &self.slope);
        }
        Some(t)
    }

    /// Computes every `x_p(t)` into `self.x`; returns `S(t)` and `S'(t)`
    /// (`+∞` or NaN when a PU inside `(0, W)` has a flat or unknown slope).
    fn evaluate(&mut self, t: f64, hints: bool) -> Result<(f64, f64), SolveError> {
        let (mut s, mut ds) = (0.0, 0.0);
        for p in 0..self.n {
            let (xp, sl) = if self.e0[p] > t || t.is_nan() {
                (0.0, f64::NAN)
            } else if self.ew[p] <= t {
                (self.w, f64::NAN)
            } else {
                let (lo, hi) = if hints {
                    (self.x_a[p], self.x_b[p])
                } else {
                    (0.0, self.w)
                };
                let (xp, sl) = self.invert(p, t, lo, hi)?;
                ds += if sl > 0.0 { 1.0 / sl } else { f64::NAN };
                (xp, sl)
            };
            self.x[p] = xp;
            self.slope[p] = sl;
            s += xp;
        }
        Ok((s, ds))
    }

    /// `sup { x : E_p(x) ≤ t }` inside `[lo, hi] ⊂ [0, W]`, knowing
    /// `E_p(0) ≤ t < E_p(W)`. Returns it and the slope at the last iterate.
    fn invert(&mut self, p: usize, t: f64, lo: f64, hi: f64) -> Result<(f64, f64), SolveError> {
        let m = &self.models[p];
        let tol = self.x_tol;
        let mut lo = lo.clamp(0.0, self.w);
        let mut hi = hi.clamp(lo, self.w);
        if hi - lo <= tol {
            return Ok((lo + 0.5 * (hi - lo), f64::NAN));
        }
        let mut x = self.guess[p].clamp(lo, hi);
        let mut dx_old = hi - lo;
        let mut dx = dx_old;
        let mut s = f64::NAN;
        for _ in 0..MAX_INNER {
            let e = checked(m.time(x), p, x)? - t;
            s = m.slope(x);
            self.evals += 2;
            if e == 0.0 {
                return Ok((x, s));
            }
            if e < 0.0 {
                lo = x;
            } else {
                hi = x;
            }
            let mut next = None;
            if s.is_finite() && s > 0.0 {
                let step = e / s;
                if step.abs() <= tol {
                    return Ok(((x - step).clamp(lo.min(x), hi.max(x)), s));
                }
                let cand = x - step;
                if cand > lo && cand < hi && (2.0 * step).abs() <= dx_old.abs() {
                    next = Some(cand);
                    dx_old = dx;
                    dx = step;
                }
            }
            let xn = match next {
                Some(v) => v,
                None => {
                    dx_old = dx;
                    dx = 0.5 * (hi - lo);
                    lo + dx
                }
            };
            if hi - lo <= tol || (xn - x).abs() <= tol {
                return Ok((xn, s));
            }
            x = xn;
        }
        Ok((x, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinearModel;

    fn lin(fixed: f64, rate: f64) -> LinearModel {
        LinearModel { fixed, rate }
    }

    #[test]
    fn linear_models_match_the_closed_form() {
        // No fixed cost: shares proportional to rates.
        let ms = [lin(0.0, 1.0), lin(0.0, 2.0), lin(0.0, 5.0)];
        let d = FastSolver::default().solve_models(&ms, 80.0).unwrap();
        for (x, want) in d.units.iter().zip([10.0, 20.0, 50.0]) {
            assert!((x - want).abs() < 1e-10, "{d:?}");
        }
        assert!((d.finish_time - 10.0).abs() < 1e-10);
    }

    #[test]
    fn high_fixed_cost_excludes_a_pu() {
        // Two PUs at 1 unit/s share 10 units in 5 s; the third's fixed cost
        // is 6 s: it gets nothing.
        let ms = [lin(0.0, 1.0), lin(0.0, 1.0), lin(6.0, 100.0)];
        let d = FastSolver::default().solve_models(&ms, 10.0).unwrap();
        assert_eq!(d.units[2], 0.0);
        assert!((d.units[0] - 5.0).abs() < 1e-10);
        assert!((d.finish_time - 5.0).abs() < 1e-10);
        // With a fixed cost of 4 s it joins: x0 = x1 = T, x2 = 100 (T - 4).
        let ms = [lin(0.0, 1.0), lin(0.0, 1.0), lin(4.0, 100.0)];
        let d = FastSolver::default().solve_models(&ms, 10.0).unwrap();
        let t = (10.0 + 400.0) / 102.0;
        assert!((d.finish_time - t).abs() < 1e-10, "{d:?}");
        assert!((d.units[2] - 100.0 * (t - 4.0)).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn identical_pus_split_equally() {
        let ms = vec![lin(0.3, 7.0); 64];
        let d = FastSolver::default().solve_models(&ms, 1000.0).unwrap();
        for x in &d.units {
            assert!((x - 1000.0 / 64.0).abs() < 1e-9);
        }
    }

    #[test]
    fn plateau_at_the_answer_is_split() {
        // Two PUs with constant time 1 s share what the linear PU leaves.
        struct Flat;
        impl TimeModel for Flat {
            fn time(&self, _x: f64) -> f64 {
                1.0
            }
            fn slope(&self, _x: f64) -> f64 {
                0.0
            }
        }
        let (a, b, c) = (lin(0.0, 2.0), Flat, Flat);
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        let d = FastSolver::default().solve(&ms, 10.0).unwrap();
        assert!((d.units[0] - 2.0).abs() < 1e-9, "{d:?}");
        assert!((d.units[1] - 4.0).abs() < 1e-9, "{d:?}");
        assert!((d.units[2] - 4.0).abs() < 1e-9, "{d:?}");
        assert!((d.finish_time - 1.0).abs() < 1e-12);
    }

    #[test]
    fn overflowing_models_still_solve() {
        // time(x) = c e^x overflows to +inf at x ≈ 709, before W = 1000.
        struct Exp(f64);
        impl TimeModel for Exp {
            fn time(&self, x: f64) -> f64 {
                self.0 * x.exp()
            }
            fn slope(&self, x: f64) -> f64 {
                self.0 * x.exp()
            }
        }
        let (a, b) = (Exp(1.0), Exp(2.0));
        let ms: [&dyn TimeModel; 2] = [&a, &b];
        let d = FastSolver::default().solve(&ms, 1000.0).unwrap();
        // a: e^xa = T, b: 2 e^xb = T → xa - xb = ln 2.
        assert!(d.is_sane(1000.0), "{d:?}");
        // With W = 1e6 no finite T lets them share the total.
        assert_eq!(
            FastSolver::default().solve(&ms, 1e6).unwrap_err(),
            SolveError::NoFiniteSolution
        );
        assert!((d.units[0] - d.units[1] - 2f64.ln()).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn model_infinite_beyond_a_point_has_no_solution() {
        struct Wall;
        impl TimeModel for Wall {
            fn time(&self, x: f64) -> f64 {
                if x < 1.0 { x } else { f64::INFINITY }
            }
            fn slope(&self, _x: f64) -> f64 {
                1.0
            }
        }
        let ms = [Wall, Wall];
        assert_eq!(
            FastSolver::default().solve_models(&ms, 10.0).unwrap_err(),
            SolveError::NoFiniteSolution
        );
    }

    #[test]
    fn stats_are_small_for_smooth_models() {
        let ms: Vec<LinearModel> = (1..=16).map(|i| lin(0.01 * i as f64, i as f64)).collect();
        let (d, st) = FastSolver::default().solve_with_stats(&ms, 1e4).unwrap();
        assert!(d.is_sane(1e4));
        assert!(st.outer <= 4, "{st:?}");
    }
}
