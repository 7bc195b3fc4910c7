//! The transfer-time line `G(x) = a₁x + a₂` ([`TransferModel`]) and its
//! fit ([`fit_transfer`]): non-negative, high outliers left out, the same
//! change-of-speed rule as the execution-time fit.

use std::fmt;

use super::basis::fmt_num;
use super::config::{FitConfig, FitError};
use super::nnls::nnls_line;
use super::report::weighted_r2;
use crate::model::TimeModel;
use crate::samples::Point;

/// `G(x) = per_unit·x + fixed`, both `>= 0` (PLB-HAC eq. 2: bandwidth and
/// latency). Negative or NaN `x` is treated as 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferModel {
    /// Seconds per unit (a₁ >= 0).
    pub per_unit: f64,
    /// Seconds per block (a₂ >= 0).
    pub fixed: f64,
}

impl TransferModel {
    /// No transfer cost (a CPU worker).
    pub const ZERO: TransferModel = TransferModel {
        per_unit: 0.0,
        fixed: 0.0,
    };

    /// A model from its coefficients; fails unless both are finite `>= 0`.
    pub fn new(per_unit: f64, fixed: f64) -> Result<TransferModel, FitError> {
        if per_unit.is_finite() && fixed.is_finite() && per_unit >= 0.0 && fixed >= 0.0 {
            Ok(TransferModel { per_unit, fixed })
        } else {
            Err(FitError::InvalidModel(
                "transfer coefficients must be finite and >= 0",
            ))
        }
    }
}

impl fmt::Display for TransferModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.per_unit == 0.0, self.fixed == 0.0) {
            (true, true) => f.write_str("0"),
            (true, false) => f.write_str(&fmt_num(self.fixed)),
            (false, true) => write!(f, "{}·x", fmt_num(self.per_unit)),
            (false, false) => write!(f, "{}·x + {}", fmt_num(self.per_unit), fmt_num(self.fixed)),
        }
    }
}

impl TimeModel for TransferModel {
    fn time(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        self.fixed + self.per_unit * x
    }
    fn slope(&self, _x: f64) -> f64 {
        self.per_unit
    }
}

/// What [`fit_transfer`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferReport {
    /// Weighted R² (1 when all times are equal and predicted exactly, 0 with
    /// a single distinct size).
    pub r2: f64,
    /// Points fitted on.
    pub used: usize,
    /// Valid points left out as outliers (more than `outlier_ratio` above
    /// the line).
    pub outliers: usize,
    /// Points skipped as invalid.
    pub invalid: usize,
    /// Points superseded by a change of speed.
    pub superseded: usize,
}

/// Fits `G(x) = a₁x + a₂` (a₁, a₂ >= 0) to transfer times (chronological,
/// newest last). Zero times are valid; negative or non-finite ones are
/// skipped as invalid. A point more than `outlier_ratio` above the line is
/// left out (high only: a fast transfer is not an error), unless the
/// newest `shift_run` points all are, which is read as a change of speed
/// (fit on the trailing run). With one distinct size the fit is
/// proportional (`a₂ = 0`).
pub fn fit_transfer(
    points: &[Point],
    cfg: &FitConfig,
) -> Result<(TransferModel, TransferReport), FitError> {
    let ok = |p: &Point| {
        p.x.is_finite()
            && p.x > 0.0
            && p.t.is_finite()
            && p.t >= 0.0
            && p.w.is_finite()
            && p.w > 0.0
    };
    let pts: Vec<Point> = points.iter().copied().filter(ok).collect();
    let invalid = points.len() - pts.len();
    if pts.is_empty() {
        return Err(FitError::NoValidSamples { invalid });
    }
    let n = pts.len();
    let ratio = cfg.ratio();
    let mut active = vec![true; n];
    let mut model = nnls_line(&pts, &active);
    let mut superseded = 0;
    if ratio.is_finite() {
        let floor = 1e-12;
        let above = |m: &TransferModel, p: &Point| p.t > ratio * m.time(p.x).max(floor);
        let below = |m: &TransferModel, p: &Point| p.t * ratio < m.time(p.x);
        let run = cfg.shift_run;
        let shift = |m: &TransferModel| -> Option<usize> {
            if run == 0 || n < run.saturating_mul(2) {
                return None;
            }
            let tail = &pts[n - run..];
            let high = if tail.iter().all(|p| above(m, p)) {
                true
            } else if tail.iter().all(|p| below(m, p)) {
                false
            } else {
                return None;
            };
            let beyond = |p: &Point| if high { above(m, p) } else { below(m, p) };
            let mut start = n - run;
            while start > 0 && beyond(&pts[start - 1]) {
                start -= 1;
            }
            (start >= run).then_some(start)
        };
        if let Some(start) = shift(&model) {
            active[..start].iter_mut().for_each(|a| *a = false);
            superseded = start;
            model = nnls_line(&pts, &active);
        } else {
            let mut any = false;
            for (i, p) in pts.iter().enumerate() {
                if above(&model, p) {
                    active[i] = false;
                    any = true;
                }
            }
            if any {
                model = nnls_line(&pts, &active);
            }
        }
    }
    let used = active.iter().filter(|a| **a).count();
    let mut xs: Vec<f64> = pts
        .iter()
        .zip(&active)
        .filter(|(_, a)| **a)
        .map(|(p, _)| p.x)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let r2 = if xs.len() < 2 {
        0.0
    } else {
        weighted_r2(&pts, &active, false, |x| model.time(x))
    };
    Ok((
        model,
        TransferReport {
            r2,
            used,
            outliers: n - used - superseded,
            invalid,
            superseded,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::testutil::{close, pts, sizes};

    #[test]
    fn transfer_line() {
        let cfg = FitConfig::default();
        let (g, r) = fit_transfer(&pts(&[1.0, 2.0, 4.0, 8.0], |x| 0.5 + 0.25 * x), &cfg).unwrap();
        assert!(close(g.per_unit, 0.25, 1e-12) && close(g.fixed, 0.5, 1e-12));
        assert!(r.r2 > 1.0 - 1e-12);
        // A negative intercept is cut to 0: a line through the origin.
        let (g, _) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |x| x - 0.5), &cfg).unwrap();
        assert_eq!(g.fixed, 0.0);
        assert!(g.per_unit > 0.0);
        // Decreasing transfer times: flat at the mean.
        let (g, _) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |x| 5.0 - x), &cfg).unwrap();
        assert_eq!(g.per_unit, 0.0);
        assert!(close(g.fixed, 8.0 / 3.0, 1e-12));
        // A CPU: all zeros.
        let (g, r) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |_| 0.0), &cfg).unwrap();
        assert_eq!((g, r.r2), (TransferModel::ZERO, 1.0));
        // A spike above the line is left out.
        let mut p = pts(&sizes(8, 1.0, 8.0), |x| 1.0 + x);
        p[3].t *= 10.0;
        let (g, r) = fit_transfer(&p, &cfg).unwrap();
        assert_eq!(r.outliers, 1);
        assert!(close(g.per_unit, 1.0, 1e-9) && close(g.fixed, 1.0, 1e-9));
        // One size: proportional; bad points skipped; none -> error.
        let mut q = pts(&[4.0, 4.0], |_| 2.0);
        q.push(Point::new(1.0, -1.0, 1.0));
        let (g, r) = fit_transfer(&q, &cfg).unwrap();
        assert_eq!((g.per_unit, g.fixed, r.invalid, r.r2), (0.5, 0.0, 1, 0.0));
        assert!(fit_transfer(&q[2..], &cfg).is_err());
        assert!(TransferModel::new(-1.0, 0.0).is_err());
        assert_eq!(TransferModel::new(1.0, 2.0).unwrap().to_string(), "1·x + 2");
        assert_eq!(TransferModel::ZERO.to_string(), "0");
        assert_eq!(TransferModel::new(0.5, 0.0).unwrap().to_string(), "0.5·x");
    }
}
