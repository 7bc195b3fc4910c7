//! The fitted execution-time curve `F(x) = Σ cᵢ·fᵢ(x/S)` ([`ExecModel`]):
//! its terms, construction (checked against the shape contract of
//! [`super::contract`]), accessors and formula.

use std::fmt;

use super::basis::{Basis, fmt_num, scale_for};
use super::config::FitError;
use super::contract::{check_shape, grid};

/// One term `coef · basis(x / scale)` of a curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Term {
    /// The function.
    pub basis: Basis,
    /// Its coefficient (on the scaled size).
    pub coef: f64,
}

/// A fitted execution-time curve `F(x) = Σ cᵢ·fᵢ(x/S)`, made total on
/// `[0, ∞)` so that it satisfies the [`TimeModel`] contract everywhere:
///
/// * **On the fitted range `[lo, hi]`** (smallest and largest size fitted
///   on): the curve itself. Construction checks that it is finite, `> 0`
///   and non-decreasing there (values and derivative on a 128-point grid,
///   half geometric, half linear) and that its slope at `hi` is `> 0`;
///   [`TimeModel::slope`] is clamped at 0 so that rounding between grid
///   points can never report a negative slope.
/// * **Below `lo`** (`ln x` terms blow up at 0, and nothing was measured
///   there): a straight line from `(0, t₀)` to `(lo, F(lo))`, where
///   `t₀ = clamp(F(lo) − lo·F′(lo), 0, F(lo))`, i.e. the tangent at `lo`
///   when that stays non-negative down to 0 (which recovers the fixed cost
///   of an affine device exactly), otherwise the chord from the origin.
///   `time(0) = t₀ >= 0` is the fixed cost.
/// * **Above `hi`**: the tangent at `hi`, `F(hi) + F′(hi)·(x − hi)`, with
///   `F′(hi) > 0`: increasing, never `eˣ` of a large number, and
///   conservative for a superlinear device (a refit after larger blocks
///   were measured corrects it).
/// * Negative or NaN `x` is treated as 0; `x = +∞` gives `+∞`.
///
/// [`TimeModel`]: crate::model::TimeModel
/// [`TimeModel::slope`]: crate::model::TimeModel::slope
#[derive(Debug, Clone, PartialEq)]
pub struct ExecModel {
    pub(super) terms: Vec<Term>,
    pub(super) scale: f64,
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) t0: f64,
    pub(super) t_lo: f64,
    pub(super) t_hi: f64,
    pub(super) d_hi: f64,
}

impl ExecModel {
    /// A model from explicit terms on the scaled size `x / scale`, fitted
    /// on `[lo, hi]` (`0 < lo <= hi`). Fails with
    /// [`FitError::InvalidModel`] when the curve is not finite, positive and
    /// non-decreasing on `[lo, hi]` with a positive slope at `hi`.
    pub fn new(terms: &[Term], scale: f64, lo: f64, hi: f64) -> Result<ExecModel, FitError> {
        if terms.is_empty() {
            return Err(FitError::InvalidModel("no term"));
        }
        if !(scale.is_finite() && scale > 0.0) {
            return Err(FitError::InvalidModel("scale is not a finite number > 0"));
        }
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= hi) {
            return Err(FitError::InvalidModel("range is not 0 < lo <= hi"));
        }
        if terms.iter().any(|t| !t.coef.is_finite()) {
            return Err(FitError::InvalidModel("coefficient not finite"));
        }
        let g = grid(lo, hi);
        let v: Vec<f64> = g.iter().map(|&x| curve(terms, scale, x)).collect();
        let d: Vec<f64> = g.iter().map(|&x| curve_slope(terms, scale, x)).collect();
        check_shape(&v, &d).map_err(FitError::InvalidModel)?;
        Ok(ExecModel::from_checked(terms.to_vec(), scale, lo, hi))
    }

    /// `time = x · seconds_per_unit` (a fallback; `seconds_per_unit > 0`),
    /// nominally fitted on `[lo, hi]`.
    pub fn proportional(seconds_per_unit: f64, lo: f64, hi: f64) -> Result<ExecModel, FitError> {
        if !(seconds_per_unit.is_finite() && seconds_per_unit > 0.0) {
            return Err(FitError::InvalidModel(
                "seconds per unit is not a finite number > 0",
            ));
        }
        let scale = scale_for(hi);
        ExecModel::new(
            &[Term {
                basis: Basis::X,
                coef: seconds_per_unit * scale,
            }],
            scale,
            lo,
            hi,
        )
    }

    /// The terms, coefficients on the scaled size `x / scale()`.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// The bases used.
    pub fn basis(&self) -> Vec<Basis> {
        self.terms.iter().map(|t| t.basis).collect()
    }

    /// The scale `S` of the sizes (`s = x / S`).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The range `[lo, hi]` of sizes the curve was fitted on (outside it the
    /// model extrapolates linearly, see the type's documentation).
    pub fn range(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// `time(0)`: the fixed cost the model attributes to any block.
    pub fn fixed_cost(&self) -> f64 {
        self.t0
    }

    /// The curve as a formula in `x` (work units), e.g.
    /// `0.12 + 3.4e-3·x + 0.5·x·ln(x/1024)`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, t) in self.terms.iter().enumerate() {
            let term = t.basis.term(t.coef, self.scale);
            if i == 0 {
                s.push_str(&term);
            } else if let Some(rest) = term.strip_prefix('-') {
                s.push_str(" − ");
                s.push_str(rest);
            } else {
                s.push_str(" + ");
                s.push_str(&term);
            }
        }
        s
    }
}

impl fmt::Display for ExecModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on [{}, {}]",
            self.describe(),
            fmt_num(self.lo),
            fmt_num(self.hi)
        )
    }
}

pub(super) fn curve(terms: &[Term], scale: f64, x: f64) -> f64 {
    let s = x / scale;
    terms.iter().map(|t| t.coef * t.basis.value(s)).sum()
}

pub(super) fn curve_slope(terms: &[Term], scale: f64, x: f64) -> f64 {
    let s = x / scale;
    terms.iter().map(|t| t.coef * t.basis.deriv(s)).sum::<f64>() / scale
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_models_are_checked() {
        let t = |basis, coef| Term { basis, coef };
        assert!(ExecModel::new(&[], 1.0, 1.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, -1.0)], 1.0, 1.0, 2.0).is_err());
        // Decreasing in the middle: 1 + s - 0.9·s² on [0.1, 1]? slope 1 - 1.8 s < 0 at s > 0.56.
        let e = ExecModel::new(
            &[t(Basis::Const, 1.0), t(Basis::X, 1.0), t(Basis::X2, -0.9)],
            1.0,
            0.1,
            1.0,
        );
        assert_eq!(
            e.unwrap_err(),
            FitError::InvalidModel("decreasing somewhere on the fitted range")
        );
        assert!(
            ExecModel::new(&[t(Basis::Const, 1.0)], 1.0, 1.0, 2.0).is_err(),
            "flat"
        );
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], f64::NAN, 1.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], 1.0, 0.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], 1.0, 3.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, f64::INFINITY)], 1.0, 1.0, 2.0).is_err());
        assert!(ExecModel::proportional(0.0, 1.0, 2.0).is_err());
    }
}
