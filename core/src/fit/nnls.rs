//! Non-negative least squares for the transfer line `t = a₁x + a₂`.

use super::transfer::TransferModel;
use crate::model::TimeModel;
use crate::samples::Point;

/// Non-negative weighted least squares for `t = a₁x + a₂` (2 variables:
/// the unconstrained solution if feasible, else the best of the faces).
pub(super) fn nnls_line(pts: &[Point], active: &[bool]) -> TransferModel {
    let (mut w, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        w += p.w;
        sx += p.w * p.x;
        sy += p.w * p.t;
        sxx += p.w * p.x * p.x;
        sxy += p.w * p.x * p.t;
    }
    if w <= 0.0 {
        return TransferModel::ZERO;
    }
    let sse = |m: &TransferModel| -> f64 {
        pts.iter()
            .zip(active)
            .filter(|(_, a)| **a)
            .map(|(p, _)| {
                let e = p.t - m.time(p.x);
                p.w * e * e
            })
            .sum()
    };
    // Centred form for accuracy.
    let xm = sx / w;
    let ym = sy / w;
    let cxx = sxx / w - xm * xm;
    let cxy = sxy / w - xm * ym;
    let mut cands = Vec::with_capacity(3);
    if cxx > 1e-12 * (sxx / w) {
        let a1 = cxy / cxx;
        let a2 = ym - a1 * xm;
        if a1 >= 0.0 && a2 >= 0.0 {
            return TransferModel {
                per_unit: a1,
                fixed: a2,
            };
        }
    }
    // Faces: proportional first, so that a single size is read as per-unit.
    if sxx > 0.0 {
        cands.push(TransferModel {
            per_unit: (sxy / sxx).max(0.0),
            fixed: 0.0,
        });
    }
    cands.push(TransferModel {
        per_unit: 0.0,
        fixed: ym.max(0.0),
    });
    let mut best = cands[0];
    let mut best_e = sse(&best);
    for c in &cands[1..] {
        let e = sse(c);
        if e < best_e * (1.0 - 1e-12) {
            best = *c;
            best_e = e;
        }
    }
    best
}
