//! The curve of one grouping: the subset of bases with the best
//! leave-one-size-out cross-validation score (within the parsimony slack,
//! the fewest and simplest terms) among those with a valid shape, else the
//! fallbacks (the line `a + b·x`, then time proportional to `x`).

use super::basis::Basis;
use super::config::FitConfig;
use super::contract::{check_shape, grid};
use super::curve::ExecModel;
use super::design::{Design, Groups, design, terms_of};
use super::report::FitKind;

struct Chosen {
    mask: u8,
    coef: [f64; 8],
    press: f64,
    candidates: usize,
}

/// Cross-validated subset selection on a grouping with `m >= 3` sizes.
fn select(g: &Groups, d: &Design, cfg: &FitConfig) -> Option<Chosen> {
    let m = g.x.len();
    let kmax = cfg
        .max_terms
        .clamp(1, 8)
        .min(m.saturating_sub(1))
        .min(m.div_ceil(2));
    if kmax == 0 {
        return None;
    }
    let allowed = cfg.allowed_mask();
    let gx = grid(d.lo, d.hi);
    let gv: [Vec<f64>; 8] = std::array::from_fn(|b| {
        gx.iter()
            .map(|&x| Basis::ALL[b].value(x / d.scale))
            .collect()
    });
    let gd: [Vec<f64>; 8] = std::array::from_fn(|b| {
        gx.iter()
            .map(|&x| Basis::ALL[b].deriv(x / d.scale))
            .collect()
    });
    let mut cands: Vec<(u8, usize, f64, [f64; 8])> = Vec::new();
    d.lsq().enumerate(allowed, kmax, &mut |n| {
        // The constant alone is no model of a block size.
        if n.mask != 1 && n.press.is_finite() {
            cands.push((n.mask, n.k, n.press, n.coef));
        }
    });
    let mut v = vec![0.0; gx.len()];
    let mut dv = vec![0.0; gx.len()];
    let mut valid = |mask: u8, coef: &[f64; 8]| -> bool {
        v.iter_mut().for_each(|a| *a = 0.0);
        dv.iter_mut().for_each(|a| *a = 0.0);
        let mut j = 0;
        for b in 0..8 {
            if mask & (1 << b) != 0 {
                let c = coef[j];
                j += 1;
                for i in 0..v.len() {
                    v[i] += c * gv[b][i];
                    dv[i] += c * gd[b][i];
                }
            }
        }
        check_shape(&v, &dv).is_ok()
    };
    cands.sort_by(|a, b| a.2.total_cmp(&b.2));
    let mut ok: Vec<Option<bool>> = vec![None; cands.len()];
    let best = (0..cands.len()).find(|&i| {
        let r = valid(cands[i].0, &cands[i].3);
        ok[i] = Some(r);
        r
    })?;
    let mean = g.y.iter().zip(&g.fw).map(|(y, w)| y * w).sum::<f64>() / g.fw.iter().sum::<f64>();
    let sst: f64 =
        g.y.iter()
            .zip(&g.fw)
            .map(|(y, w)| w * (y - mean) * (y - mean))
            .sum();
    // Σ fw·ȳ² = Σ W: the scale of the weighted squares, for exact fits.
    let y2 = g.w.iter().sum::<f64>();
    let limit = cands[best].2 * (1.0 + cfg.parsimony()) + 1e-12 * sst + 1e-24 * y2;
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].2 <= limit).collect();
    let cx = |mask: u8| -> u32 {
        Basis::ALL
            .iter()
            .filter(|b| mask & (1 << b.index()) != 0)
            .map(|b| b.complexity())
            .sum()
    };
    order.sort_by(|&a, &b| {
        (cands[a].1, cx(cands[a].0))
            .cmp(&(cands[b].1, cx(cands[b].0)))
            .then(cands[a].2.total_cmp(&cands[b].2))
    });
    let pick = order
        .into_iter()
        .find(|&i| *ok[i].get_or_insert_with(|| valid(cands[i].0, &cands[i].3)))
        .unwrap_or(best);
    Some(Chosen {
        mask: cands[pick].0,
        coef: cands[pick].3,
        press: cands[pick].2,
        candidates: cands.len(),
    })
}

/// A model and how it was obtained, on a grouping.
pub(super) struct Stage {
    pub(super) model: ExecModel,
    pub(super) kind: FitKind,
    pub(super) press: Option<f64>,
    pub(super) candidates: usize,
    pub(super) mask: Option<u8>,
}

fn fallback(g: &Groups, d: &Design) -> Stage {
    if g.x.len() >= 2 {
        let mask = 0b11; // Const | X
        if let Some(n) = d.lsq().solve(mask)
            && let Ok(model) = ExecModel::new(&terms_of(mask, &n.coef[..2]), d.scale, d.lo, d.hi)
        {
            return Stage {
                model,
                kind: FitKind::Affine,
                press: None,
                candidates: 0,
                mask: None,
            };
        }
    }
    // Best per-size throughput; means are > 0 as every time is.
    let spu =
        g.x.iter()
            .zip(&g.y)
            .map(|(x, y)| y / x)
            .fold(f64::INFINITY, f64::min);
    let model = ExecModel::proportional(spu, d.lo, d.hi)
        .or_else(|_| ExecModel::proportional(1.0, 1.0, 1.0))
        .expect("1 s per unit on [1, 1] is a valid model");
    Stage {
        model,
        kind: FitKind::Proportional,
        press: None,
        candidates: 0,
        mask: None,
    }
}

pub(super) fn stage(g: &Groups, cfg: &FitConfig) -> Stage {
    let d = design(g);
    if g.x.len() >= 3
        && let Some(c) = select(g, &d, cfg)
    {
        let k = c.mask.count_ones() as usize;
        let model = ExecModel::from_checked(terms_of(c.mask, &c.coef[..k]), d.scale, d.lo, d.hi);
        return Stage {
            model,
            kind: FitKind::Selected,
            press: Some(c.press),
            candidates: c.candidates,
            mask: Some(c.mask),
        };
    }
    fallback(g, &d)
}
