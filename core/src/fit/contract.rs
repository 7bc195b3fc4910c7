//! How an [`ExecModel`] meets the [`TimeModel`] contract everywhere: the
//! curve is checked on its fitted range `[lo, hi]` (finite, positive,
//! non-decreasing, increasing at `hi`, on a validation grid) and continued
//! monotonically outside it (a line from the fixed cost below `lo`, the
//! tangent above `hi`; see [`ExecModel`]).

use super::curve::{ExecModel, Term, curve, curve_slope};
use crate::model::TimeModel;

/// Points per spacing (geometric and linear) of the validation grid.
const GRID_HALF: usize = 64;

/// The sorted validation grid on `[lo, hi]`.
pub(super) fn grid(lo: f64, hi: f64) -> Vec<f64> {
    if hi <= lo {
        return vec![lo];
    }
    let n = GRID_HALF;
    let mut g = Vec::with_capacity(2 * n);
    let r = hi / lo;
    for i in 0..n {
        let f = i as f64 / (n - 1) as f64;
        g.push(lo * r.powf(f));
        g.push(lo + (hi - lo) * f);
    }
    g.sort_by(f64::total_cmp);
    g.dedup();
    if let Some(last) = g.last_mut() {
        *last = hi;
    }
    g[0] = lo;
    g
}

/// Contract checks on grid values `v` and derivatives `d` (any positive
/// unit): finite, `v > 0`, non-decreasing, `d >= 0`, last `d > 0`.
pub(super) fn check_shape(v: &[f64], d: &[f64]) -> Result<(), &'static str> {
    if v.iter().chain(d).any(|a| !a.is_finite()) {
        return Err("not finite on the fitted range");
    }
    if v.first().is_none_or(|&a| a <= 0.0) {
        return Err("not positive at the smallest fitted size");
    }
    let dmax = d.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    if d.iter().any(|&a| a < -1e-12 * dmax) {
        return Err("decreasing somewhere on the fitted range");
    }
    if v.windows(2).any(|w| w[1] < w[0] - 1e-12 * w[0].abs()) {
        return Err("decreasing somewhere on the fitted range");
    }
    if d.last().is_none_or(|&a| a <= 0.0) {
        return Err("not increasing at the largest fitted size");
    }
    Ok(())
}

impl ExecModel {
    /// A model from terms that passed [`check_shape`] on `[lo, hi]`, with
    /// the extrapolation anchors `t₀` (the fixed cost), `F(lo)`, `F(hi)` and
    /// `F′(hi)`.
    pub(super) fn from_checked(terms: Vec<Term>, scale: f64, lo: f64, hi: f64) -> ExecModel {
        let t_lo = curve(&terms, scale, lo);
        let d_lo = curve_slope(&terms, scale, lo).max(0.0);
        let t0 = (t_lo - lo * d_lo).clamp(0.0, t_lo);
        let t_hi = curve(&terms, scale, hi);
        let d_hi = curve_slope(&terms, scale, hi);
        ExecModel {
            terms,
            scale,
            lo,
            hi,
            t0,
            t_lo,
            t_hi,
            d_hi,
        }
    }
}

impl TimeModel for ExecModel {
    fn time(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        if x < self.lo {
            self.t0 + (self.t_lo - self.t0) * (x / self.lo)
        } else if x <= self.hi {
            curve(&self.terms, self.scale, x).max(self.t_lo)
        } else {
            self.t_hi + self.d_hi * (x - self.hi)
        }
    }

    fn slope(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        if x < self.lo {
            (self.t_lo - self.t0) / self.lo
        } else if x < self.hi {
            curve_slope(&self.terms, self.scale, x).max(0.0)
        } else {
            self.d_hi
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::basis::Basis;
    use crate::fit::testutil::{check_contract, close};

    #[test]
    fn extrapolation_rules() {
        let t = |basis, coef| Term { basis, coef };
        // 1 + 3 ln s on [1/16, 1]·1024 with S = 1024: F(lo) = 1 + 3 ln(1/16) < 0 -> invalid.
        assert!(
            ExecModel::new(
                &[t(Basis::Const, 1.0), t(Basis::Ln, 3.0)],
                1024.0,
                64.0,
                1024.0
            )
            .is_err()
        );
        // 10 + ln s on [64, 1024]: positive, concave; tangent at lo hits 0 below.
        let m = ExecModel::new(
            &[t(Basis::Const, 10.0), t(Basis::Ln, 1.0)],
            1024.0,
            64.0,
            1024.0,
        )
        .unwrap();
        let f_lo = 10.0 + (1.0f64 / 16.0).ln();
        let d_lo = 1.0 / 64.0;
        assert!(close(m.fixed_cost(), f_lo - 64.0 * d_lo, 1e-12));
        assert!(close(m.time(32.0), m.fixed_cost() + 32.0 * d_lo, 1e-12));
        assert!(close(m.slope(10.0), d_lo, 1e-12));
        // Above hi: tangent with slope 1/1024.
        assert!(close(m.time(2048.0), 10.0 + 1.0, 1e-12));
        assert!(close(m.slope(1e9), 1.0 / 1024.0, 1e-12));
        check_contract(&m, 1024.0);
        // s·e^s beyond its range never overflows.
        let m = ExecModel::new(&[t(Basis::XExp, 1.0)], 1024.0, 1.0, 1024.0).unwrap();
        assert!(m.time(1e12).is_finite());
        assert_eq!(m.time(f64::INFINITY), f64::INFINITY);
        assert!(m.describe().contains("x·exp(x/1024)"), "{}", m.describe());
        assert!(m.to_string().ends_with("on [1, 1024]"));
        let m = ExecModel::new(
            &[t(Basis::Const, 2.0), t(Basis::X, 3.0), t(Basis::X2, -0.5)],
            1.0,
            0.5,
            1.0,
        )
        .unwrap();
        assert_eq!(m.describe(), "2 + 3·x − 0.5·x²");
    }
}
