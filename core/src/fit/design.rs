//! The relative weighted least-squares problem of a set of points: grouped
//! by distinct size (each size's weighted mean time, weighted by
//! `W / ȳ²`), and the weighted columns of all 8 bases on the scaled sizes.

use super::basis::{Basis, scale_for};
use super::curve::Term;
use super::lsq::SubsetLsq;
use crate::samples::Point;

/// Per-distinct-size aggregates of the active points, sorted by size.
pub(super) struct Groups {
    pub(super) x: Vec<f64>,
    /// Summed recency weight.
    pub(super) w: Vec<f64>,
    /// Fit weight: summed recency weight / mean² (relative least squares).
    pub(super) fw: Vec<f64>,
    /// Weighted mean time.
    pub(super) y: Vec<f64>,
    /// Indices (into the valid points) of each group's members.
    pub(super) members: Vec<Vec<usize>>,
}

pub(super) fn group(pts: &[Point], active: &[bool]) -> Groups {
    let mut idx: Vec<usize> = (0..pts.len()).filter(|&i| active[i]).collect();
    idx.sort_by(|&a, &b| pts[a].x.total_cmp(&pts[b].x));
    let mut g = Groups {
        x: Vec::new(),
        w: Vec::new(),
        fw: Vec::new(),
        y: Vec::new(),
        members: Vec::new(),
    };
    for i in idx {
        let p = pts[i];
        let same = g.x.last().is_some_and(|&x| p.x - x <= 1e-12 * x);
        if same {
            let j = g.x.len() - 1;
            g.w[j] += p.w;
            g.y[j] += p.w * p.t;
            g.members[j].push(i);
        } else {
            g.x.push(p.x);
            g.w.push(p.w);
            g.y.push(p.w * p.t);
            g.members.push(vec![i]);
        }
    }
    for (y, w) in g.y.iter_mut().zip(&g.w) {
        *y /= w;
    }
    g.fw = g.y.iter().zip(&g.w).map(|(y, w)| w / (y * y)).collect();
    g
}

/// The weighted design of all 8 bases on a grouping.
pub(super) struct Design {
    pub(super) scale: f64,
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) cols: [Vec<f64>; 8],
    pub(super) yw: Vec<f64>,
}

pub(super) fn design(g: &Groups) -> Design {
    let lo = g.x[0];
    let hi = *g.x.last().unwrap_or(&lo);
    let scale = scale_for(hi);
    let cols: [Vec<f64>; 8] = std::array::from_fn(|b| {
        g.x.iter()
            .zip(&g.fw)
            .map(|(&x, &w)| w.sqrt() * Basis::ALL[b].value(x / scale))
            .collect()
    });
    let yw = g.y.iter().zip(&g.fw).map(|(y, w)| w.sqrt() * y).collect();
    Design {
        scale,
        lo,
        hi,
        cols,
        yw,
    }
}

pub(super) fn terms_of(mask: u8, coef: &[f64]) -> Vec<Term> {
    Basis::ALL
        .iter()
        .filter(|b| mask & (1 << b.index()) != 0)
        .zip(coef)
        .map(|(&basis, &coef)| Term { basis, coef })
        .collect()
}

impl Design {
    pub(super) fn lsq(&self) -> SubsetLsq {
        let cols: [&[f64]; 8] = std::array::from_fn(|b| self.cols[b].as_slice());
        SubsetLsq::new(&cols, &self.yw)
    }
}
