//! Fitting the execution-time curve of one PU ([`fit_exec`]): point
//! validation, the outlier screens, the change-of-speed detection and the
//! report (the procedure of the [module documentation](super)).

use super::config::{FitConfig, FitError};
use super::curve::ExecModel;
use super::design::{design, group};
use super::report::{FitReport, weighted_r2};
use super::select::stage;
use crate::model::TimeModel;
use crate::samples::Point;

/// Fits the execution-time curve of one PU to `points` (chronological,
/// newest last). See the [module documentation](super) for the procedure.
///
/// Errors only when no point is valid; one point, one distinct size, all
/// candidates rejected and similar cases give the documented fallbacks,
/// reported in [`FitReport::kind`].
pub fn fit_exec(points: &[Point], cfg: &FitConfig) -> Result<(ExecModel, FitReport), FitError> {
    fit_exec_inner(points, cfg, true)
}

fn fit_exec_inner(
    points: &[Point],
    cfg: &FitConfig,
    detect_shift: bool,
) -> Result<(ExecModel, FitReport), FitError> {
    let ok = |p: &Point| {
        p.x.is_finite() && p.x > 0.0 && p.t.is_finite() && p.t > 0.0 && p.w.is_finite() && p.w > 0.0
    };
    let orig: Vec<usize> = (0..points.len()).filter(|&i| ok(&points[i])).collect();
    let invalid = points.len() - orig.len();
    if orig.is_empty() {
        return Err(FitError::NoValidSamples { invalid });
    }
    let pts: Vec<Point> = orig.iter().map(|&i| points[i]).collect();
    let n = pts.len();
    let ratio = cfg.ratio();
    let mut active = vec![true; n];

    // 1. Within-size screen against the median of sizes seen >= 3 times.
    if ratio.is_finite() {
        let g = group(&pts, &active);
        for mem in &g.members {
            if mem.len() < 3 {
                continue;
            }
            let mut ts: Vec<f64> = mem.iter().map(|&i| pts[i].t).collect();
            ts.sort_by(f64::total_cmp);
            let med = if ts.len() % 2 == 1 {
                ts[ts.len() / 2]
            } else {
                0.5 * (ts[ts.len() / 2 - 1] + ts[ts.len() / 2])
            };
            for &i in mem {
                if pts[i].t > ratio * med || pts[i].t * ratio < med {
                    active[i] = false;
                }
            }
        }
    }

    // 2. Selection, then leave-one-out screening of sparse sizes.
    let mut g = group(&pts, &active);
    let mut st = stage(&g, cfg);
    if ratio.is_finite()
        && let Some(mask) = st.mask
    {
        let mut dropped = false;
        for _ in 0..3 {
            if g.x.len() < 4 {
                break;
            }
            let d = design(&g);
            let mut lsq = d.lsq();
            let Some(node) = lsq.solve(mask) else { break };
            let (resid, lev) = (node.resid, node.lev);
            let mut worst: Option<(usize, f64)> = None;
            for j in 0..g.x.len() {
                if g.members[j].len() > 2 || 1.0 - lev[j] < 1e-9 {
                    continue;
                }
                let e = resid[j] / g.fw[j].sqrt();
                let loo = g.y[j] - e / (1.0 - lev[j]);
                if loo <= 0.0 {
                    continue;
                }
                let q = (g.y[j] / loo).ln().abs();
                if q > ratio.ln() && worst.is_none_or(|(_, w)| q > w) {
                    worst = Some((j, q));
                }
            }
            let Some((j, _)) = worst else { break };
            for &i in &g.members[j] {
                active[i] = false;
            }
            dropped = true;
            g = group(&pts, &active);
        }
        if dropped {
            st = stage(&g, cfg);
        }
    }

    // 3. A persistent deviation of the newest points is a change of speed.
    let run = cfg.shift_run;
    if detect_shift && ratio.is_finite() && run > 0 && n >= run.saturating_mul(2) {
        let q: Vec<f64> = pts.iter().map(|p| p.t / st.model.time(p.x)).collect();
        let high = q[n - run..].iter().all(|&v| v > ratio);
        let low = q[n - run..].iter().all(|&v| v * ratio < 1.0);
        if high || low {
            let beyond = |v: f64| if high { v > ratio } else { v * ratio < 1.0 };
            let mut start = n - run;
            while start > 0 && beyond(q[start - 1]) {
                start -= 1;
            }
            if start >= run {
                let first = orig[start];
                let (model, mut rep) = fit_exec_inner(&points[first..], cfg, false)?;
                rep.invalid = invalid;
                rep.outlier_indices.iter_mut().for_each(|i| *i += first);
                rep.superseded = start;
                rep.shift_start = Some(first);
                return Ok((model, rep));
            }
        }
    }

    let used = active.iter().filter(|a| **a).count();
    let m = g.x.len();
    let r2 = if m < 2 {
        0.0
    } else {
        weighted_r2(&pts, &active, true, |x| st.model.time(x))
    };
    let wsum: f64 = g.w.iter().sum();
    let report = FitReport {
        kind: st.kind,
        basis: st.model.basis(),
        r2,
        cv_rmse: st.press.map(|p| (p / wsum).sqrt()),
        used,
        outliers: n - used,
        outlier_indices: (0..n).filter(|&i| !active[i]).map(|i| orig[i]).collect(),
        invalid,
        superseded: 0,
        shift_start: None,
        distinct_sizes: m,
        candidates: st.candidates,
    };
    Ok((st.model, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::basis::Basis;
    use crate::fit::testutil::{check_contract, close, pts, sizes};
    use crate::fit::{FitKind, fit_transfer};
    use crate::rng::Rng;
    use crate::samples::SampleStore;

    #[test]
    fn exact_affine_recovery() {
        let p = pts(&sizes(8, 1.0, 10.0), |x| 2.0 + 3.0 * x);
        let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
        assert_eq!(r.kind, FitKind::Selected);
        assert_eq!(r.basis, vec![Basis::Const, Basis::X]);
        assert!(r.r2 > 1.0 - 1e-12 && r.meets_r2_target());
        for &x in &[0.0, 0.5, 1.0, 3.3, 10.0, 40.0] {
            assert!(close(m.time(x), 2.0 + 3.0 * x, 1e-9), "{x}: {}", m.time(x));
            assert!(close(m.slope(x), 3.0, 1e-9));
        }
        assert!(close(m.fixed_cost(), 2.0, 1e-9));
        assert_eq!(m.range(), (1.0, 10.0));
        assert_eq!(m.describe(), "2 + 3·x");
        assert_eq!(r.outliers + r.invalid + r.superseded, 0);
        assert_eq!(r.distinct_sizes, 8);
        assert!(r.candidates > 10);
    }

    #[test]
    fn exact_square_and_x_ln_x_recovery() {
        let cfg = FitConfig::default();
        let (m, r) = fit_exec(&pts(&sizes(8, 1.0, 10.0), |x| 0.5 * x * x), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::X2]);
        for &x in &[1.0, 2.5, 7.0, 10.0] {
            assert!(close(m.time(x), 0.5 * x * x, 1e-9));
        }
        assert_eq!(m.describe(), "0.5·x²");
        // x ln x = S·(s ln s) + S ln S·s on scaled sizes: {x, x ln x}.
        let (m, r) = fit_exec(&pts(&sizes(9, 2.0, 20.0), |x| x * x.ln()), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::X, Basis::XLn]);
        for &x in &[2.0, 3.0, 11.0, 20.0] {
            assert!(close(m.time(x), x * x.ln(), 1e-9), "{x}");
        }
        // GPU-like: 10 ms latency + 1 µs per unit, sizes 1 Ki .. 1 Mi.
        let gpu = |x: f64| 0.01 + 1e-6 * x;
        let (m, r) = fit_exec(&pts(&sizes(11, 1024.0, 1048576.0), gpu), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::Const, Basis::X]);
        for &x in &[0.0, 1024.0, 5e5, 4e6] {
            assert!(close(m.time(x), gpu(x), 1e-8));
        }
        // ln x terms: a + b ln x on [1, 100] extrapolates linearly below 1.
        let (m, r) = fit_exec(&pts(&sizes(7, 1.0, 100.0), |x| 1.0 + x.ln()), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::Const, Basis::Ln]);
        assert!(close(m.time(50.0), 1.0 + 50f64.ln(), 1e-9));
        assert!(
            m.fixed_cost().abs() < 1e-12,
            "tangent 1 - 1·1 = 0 at lo = 1"
        );
        assert!(close(m.time(0.5), 0.5, 1e-9));
        check_contract(&m, 100.0);
    }

    #[test]
    fn robust_to_noise_and_a_spike() {
        let mut rng = Rng::new(42);
        let truth = |x: f64| 2.0 + 3.0 * x;
        let xs = sizes(12, 1.0, 50.0);
        let mut p = Vec::new();
        for _ in 0..3 {
            for &x in &xs {
                p.push(Point::new(
                    x,
                    truth(x) * (1.0 + 0.05 * (2.0 * rng.unit() - 1.0)),
                    1.0,
                ));
            }
        }
        // A 10x spike at a repeated size and one at a size seen once.
        p[7].t *= 10.0;
        p.push(Point::new(17.0, 10.0 * truth(17.0), 1.0));
        let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
        assert_eq!(r.outliers, 2, "{r:?}");
        assert_eq!(r.outlier_indices, vec![7, p.len() - 1]);
        assert!(r.meets_r2_target() && r.r2 > 0.98, "{r:?}");
        for &x in &[1.0, 10.0, 17.0, 50.0] {
            assert!(
                close(m.time(x), truth(x), 0.05),
                "{x}: {} ({})",
                m.time(x),
                m
            );
        }
        // The same spikes without outlier handling pull the curve away.
        let off = FitConfig {
            outlier_ratio: f64::NAN,
            ..FitConfig::default()
        };
        let (m2, r2) = fit_exec(&p, &off).unwrap();
        assert_eq!(r2.outliers, 0);
        let err = |m: &ExecModel| (m.time(17.0) / truth(17.0) - 1.0).abs();
        // (Relative least squares already damps a high spike; R² does not.)
        assert!(r2.r2 < 0.5 && err(&m2) > 3.0 * err(&m), "{m2} {r2:?}");
    }

    #[test]
    fn noisy_curves_recovered_within_noise() {
        let mut rng = Rng::new(7);
        type Curve = (&'static str, fn(f64) -> f64);
        let curves: [Curve; 3] = [
            ("gpu", |x| 0.02 + 2e-6 * x),
            ("square", |x| 1e-3 + 1e-9 * x * x),
            ("xlnx", |x| 1e-5 * x * (x / 100.0).ln().max(0.0) + 1e-4 * x),
        ];
        for (name, f) in curves {
            let xs = sizes(10, 1000.0, 200_000.0);
            let mut p = Vec::new();
            for _ in 0..4 {
                for &x in &xs {
                    p.push(Point::new(
                        x,
                        f(x) * (1.0 + 0.05 * (2.0 * rng.unit() - 1.0)),
                        1.0,
                    ));
                }
            }
            let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
            assert_eq!(r.outliers, 0, "{name}");
            assert!(r.r2 > 0.95, "{name}: {r:?}");
            for &x in &xs {
                assert!(
                    close(m.time(x), f(x), 0.06),
                    "{name} {x}: {} vs {}",
                    m.time(x),
                    f(x)
                );
            }
            check_contract(&m, 200_000.0);
        }
    }

    #[test]
    fn bad_inputs_give_errors_or_fallbacks() {
        let cfg = FitConfig::default();
        assert_eq!(
            fit_exec(&[], &cfg).unwrap_err(),
            FitError::NoValidSamples { invalid: 0 }
        );
        let garbage = [
            Point::new(f64::NAN, 1.0, 1.0),
            Point::new(1.0, f64::NAN, 1.0),
            Point::new(1.0, f64::INFINITY, 1.0),
            Point::new(f64::INFINITY, 1.0, 1.0),
            Point::new(0.0, 1.0, 1.0),
            Point::new(-1.0, 1.0, 1.0),
            Point::new(1.0, 0.0, 1.0),
            Point::new(1.0, -1.0, 1.0),
            Point::new(1.0, 1.0, 0.0),
            Point::new(1.0, 1.0, f64::NAN),
        ];
        assert_eq!(
            fit_exec(&garbage, &cfg).unwrap_err(),
            FitError::NoValidSamples { invalid: 10 }
        );
        assert_eq!(
            fit_exec(&garbage, &cfg).unwrap_err().to_string(),
            "no usable sample (10 invalid)"
        );
        // One sample: proportional, R² 0.
        let mut one = garbage.to_vec();
        one.push(Point::new(4.0, 2.0, 1.0));
        let (m, r) = fit_exec(&one, &cfg).unwrap();
        assert_eq!(
            (r.kind, r.r2, r.used, r.invalid),
            (FitKind::Proportional, 0.0, 1, 10)
        );
        assert_eq!((m.time(4.0), m.time(8.0), m.fixed_cost()), (2.0, 4.0, 0.0));
        check_contract(&m, 4.0);
        // One distinct size, several samples: proportional at the mean.
        let (m, r) = fit_exec(&pts(&[5.0; 6], |_| 1.0), &cfg).unwrap();
        assert_eq!(
            (r.kind, r.distinct_sizes, r.r2),
            (FitKind::Proportional, 1, 0.0)
        );
        assert!(close(m.time(10.0), 2.0, 1e-12));
        // Two sizes: the line through them.
        let (m, r) = fit_exec(&pts(&[1.0, 3.0, 3.0], |x| 1.0 + x), &cfg).unwrap();
        assert_eq!((r.kind, r.distinct_sizes), (FitKind::Affine, 2));
        assert!(close(m.time(0.0), 1.0, 1e-12) && close(m.time(10.0), 11.0, 1e-12));
        // Two sizes, time decreasing: no valid line, proportional at the best throughput.
        let (m, r) = fit_exec(
            &[Point::new(1.0, 2.0, 1.0), Point::new(4.0, 1.0, 1.0)],
            &cfg,
        )
        .unwrap();
        assert_eq!(r.kind, FitKind::Proportional);
        assert!(close(m.time(4.0), 1.0, 1e-12));
        check_contract(&m, 4.0);
        // A PU at almost zero speed is just slow; still a valid model.
        let (m, _) = fit_exec(&pts(&[1.0, 2.0, 4.0], |x| 1e200 * x), &cfg).unwrap();
        check_contract(&m, 4.0);
        // Nonsense configuration: clamped, no panic.
        let weird = FitConfig {
            max_terms: 0,
            bases: vec![],
            parsimony: f64::NAN,
            outlier_ratio: -1.0,
            shift_run: usize::MAX,
        };
        let (m, r) = fit_exec(&pts(&sizes(6, 1.0, 9.0), |x| x * x), &weird).unwrap();
        assert_ne!(r.kind, FitKind::Selected);
        check_contract(&m, 9.0);
        let (_, r) = fit_exec(
            &pts(&sizes(6, 1.0, 9.0), |x| x * x),
            &FitConfig {
                max_terms: 99,
                ..FitConfig::default()
            },
        )
        .unwrap();
        assert_eq!(r.basis, vec![Basis::X2]);
        // A huge shift_run with outlier handling on: no overflow, no shift.
        let huge = FitConfig {
            shift_run: usize::MAX,
            ..FitConfig::default()
        };
        let (_, r) = fit_exec(&pts(&sizes(6, 1.0, 9.0), |x| x), &huge).unwrap();
        assert_eq!(r.shift_start, None);
        fit_transfer(&pts(&sizes(6, 1.0, 9.0), |x| x), &huge).unwrap();
        // Store with nothing: typed error.
        assert!(SampleStore::default().fit(&cfg).is_err());
    }
}
