//! What a fit reports: how the model was obtained and how well it explains
//! the points (the weighted R² PLB-HeC's training criterion reads).

use super::basis::Basis;
use crate::samples::Point;

/// PLB-HeC ends its training when every PU's R² exceeds this.
pub const R2_TARGET: f64 = 0.7;

/// How an execution-time model was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitKind {
    /// A subset of the bases chosen by cross-validation.
    Selected,
    /// Fallback: the weighted least-squares line `a + b·x`.
    Affine,
    /// Last resort: `x / best observed throughput`.
    Proportional,
}

/// What a fit did. `r2` is the weighted coefficient of determination of the
/// returned model over the points it used, with the fit's own weights
/// (recency / predicted time², so it measures relative errors); with a
/// single distinct size it is 0 (nothing is explained).
#[derive(Debug, Clone, PartialEq)]
pub struct FitReport {
    /// Selected curve or which fallback.
    pub kind: FitKind,
    /// The bases of the returned model, in [`Basis::ALL`] order.
    pub basis: Vec<Basis>,
    /// Weighted R² (may be negative for a fallback worse than the mean).
    /// PLB-HeC trains until it exceeds [`R2_TARGET`] on every PU.
    pub r2: f64,
    /// Root mean square *relative* error of the selected curve under
    /// leave-one-size-out cross-validation (0.05 = predictions off by 5 %
    /// for sizes it was not fitted on); `None` for the fallbacks.
    pub cv_rmse: Option<f64>,
    /// Points the model was fitted on.
    pub used: usize,
    /// Valid points left out as outliers.
    pub outliers: usize,
    /// Their indices in the input slice (for traces and plots).
    pub outlier_indices: Vec<usize>,
    /// Points skipped as invalid (non-finite, non-positive, zero weight).
    pub invalid: usize,
    /// Valid points left out because a later change of speed superseded them.
    pub superseded: usize,
    /// Index, in the input slice, of the first point of the new regime when
    /// a change of speed was detected.
    pub shift_start: Option<usize>,
    /// Distinct sizes among the points used.
    pub distinct_sizes: usize,
    /// Candidate subsets fitted and scored (numerically independent, with a
    /// finite cross-validation score); 0 for the fallbacks.
    pub candidates: usize,
}

impl FitReport {
    /// Whether this fit meets PLB-HeC's training criterion (R² > 0.7).
    pub fn meets_r2_target(&self) -> bool {
        self.r2 > R2_TARGET
    }
}

/// Weighted R² over the active points; `relative` multiplies each weight
/// by `1 / f(x)²`, the weights of the execution-time fit.
pub(super) fn weighted_r2(
    pts: &[Point],
    active: &[bool],
    relative: bool,
    f: impl Fn(f64) -> f64,
) -> f64 {
    let wt = |p: &Point| {
        if relative {
            let v = f(p.x);
            if v > 0.0 { p.w / (v * v) } else { 0.0 }
        } else {
            p.w
        }
    };
    let (mut sw, mut swt) = (0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        sw += wt(p);
        swt += wt(p) * p.t;
    }
    if !(sw > 0.0 && sw.is_finite()) {
        return 0.0;
    }
    let mean = swt / sw;
    let (mut sst, mut sse, mut s2) = (0.0, 0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        let w = wt(p);
        sst += w * (p.t - mean) * (p.t - mean);
        let e = p.t - f(p.x);
        sse += w * e * e;
        s2 += w * p.t * p.t;
    }
    if sst <= 1e-24 * s2 {
        return if sse <= 1e-20 * s2 { 1.0 } else { 0.0 };
    }
    1.0 - sse / sst
}
