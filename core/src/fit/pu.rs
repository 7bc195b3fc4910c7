//! The model of a PU, `E_p = F_p + G_p` ([`PuModel`]), fitted from its
//! compute and transfer points ([`fit_pu`], [`SampleStore::fit`]).

use super::config::{FitConfig, FitError};
use super::curve::ExecModel;
use super::exec::fit_exec;
use super::report::FitReport;
use super::transfer::{TransferModel, TransferReport, fit_transfer};
use crate::model::TimeModel;
use crate::samples::{Point, SampleStore};

/// `E_p(x) = F_p(x) + G_p(x)`: what the solvers see of a PU.
#[derive(Debug, Clone, PartialEq)]
pub struct PuModel {
    /// Compute time.
    pub exec: ExecModel,
    /// Transfer time.
    pub transfer: TransferModel,
}

impl TimeModel for PuModel {
    fn time(&self, x: f64) -> f64 {
        self.exec.time(x) + self.transfer.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.exec.slope(x) + self.transfer.slope(x)
    }
}

/// A fitted PU model with both reports.
#[derive(Debug, Clone, PartialEq)]
pub struct PuFit {
    /// The model.
    pub model: PuModel,
    /// How `model.exec` was fitted.
    pub exec: FitReport,
    /// How `model.transfer` was fitted.
    pub transfer: TransferReport,
}

/// Fits both models of a PU from compute and transfer points (each
/// chronological). When the compute fit detects a change of speed, the
/// transfer line is fitted on the same trailing points.
pub fn fit_pu(compute: &[Point], transfer: &[Point], cfg: &FitConfig) -> Result<PuFit, FitError> {
    let (exec, erep) = fit_exec(compute, cfg)?;
    let tpts = match erep.shift_start {
        Some(i) if i <= transfer.len() && transfer.len() == compute.len() => &transfer[i..],
        _ => transfer,
    };
    let (transfer, trep) = match fit_transfer(tpts, cfg) {
        Ok(v) => v,
        Err(FitError::NoValidSamples { invalid }) => (
            TransferModel::ZERO,
            TransferReport {
                r2: 0.0,
                used: 0,
                outliers: 0,
                invalid,
                superseded: 0,
            },
        ),
        Err(e) => return Err(e),
    };
    Ok(PuFit {
        model: PuModel { exec, transfer },
        exec: erep,
        transfer: trep,
    })
}

impl SampleStore {
    /// Fits this PU's models ([`fit_pu`] on the recency-weighted samples)
    /// and, when a change of speed was detected, forgets the samples it
    /// superseded so the next fits start from the new regime.
    pub fn fit(&mut self, cfg: &FitConfig) -> Result<PuFit, FitError> {
        let fit = fit_pu(&self.compute_points(), &self.transfer_points(), cfg)?;
        if let Some(seq) = fit.exec.shift_start.and_then(|i| self.seq_at(i)) {
            self.forget_before(seq);
        }
        Ok(fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::testutil::{check_contract, close};
    use crate::rng::Rng;
    use crate::samples::{Sample, StoreConfig};

    fn device(rng: &mut Rng, x: f64, speed: f64) -> Sample {
        let t = (0.05 + x / speed) * (1.0 + 0.03 * (2.0 * rng.unit() - 1.0));
        Sample::new(x, t, 1e-3 + x * 1e-7)
    }

    #[test]
    fn decay_follows_a_moderate_slowdown() {
        let mut rng = Rng::new(3);
        let mut store = SampleStore::new(StoreConfig {
            cap: 64,
            half_life: 8.0,
            min_weight: 0.02,
        });
        let xs = [1000.0, 2000.0, 4000.0, 8000.0];
        for i in 0..48 {
            store.push(device(&mut rng, xs[i % 4], 1e4)).unwrap();
        }
        let cfg = FitConfig::default();
        let before = store.fit(&cfg).unwrap();
        assert!(close(before.model.exec.time(6000.0), 0.65, 0.03));
        // The device becomes 2x slower (a competing process): not outliers,
        // the recency weights move the curve over.
        // After 8 new samples (one half-life) the model is half-way there...
        for i in 0..8 {
            store.push(device(&mut rng, xs[i % 4], 5e3)).unwrap();
        }
        let mid = store.fit(&cfg).unwrap().model.exec.time(6000.0);
        assert!(mid > 0.8 && mid < 1.1, "{mid}");
        // ...and after 40 (5 half-lives) it has followed.
        for i in 0..32 {
            store.push(device(&mut rng, xs[i % 4], 5e3)).unwrap();
        }
        let after = store.fit(&cfg).unwrap();
        assert_eq!(after.exec.shift_start, None);
        let t = after.model.exec.time(6000.0);
        assert!(close(t, 1.25, 0.04), "{t} ({})", after.model.exec);
        // Without decay the fit would sit between the two regimes.
        let mut flat = SampleStore::new(StoreConfig {
            cap: 128,
            half_life: f64::INFINITY,
            min_weight: 1.0,
        });
        for (_, s) in store.iter() {
            flat.push(*s).unwrap();
        }
        let mixed = flat.fit(&cfg).unwrap().model.exec.time(6000.0);
        assert!(mixed < 1.1, "{mixed}");
    }

    #[test]
    fn large_slowdown_is_a_shift_not_outliers() {
        let mut rng = Rng::new(5);
        let mut store = SampleStore::default();
        let xs = [1000.0, 2000.0, 4000.0, 8000.0, 16000.0];
        for i in 0..40 {
            store.push(device(&mut rng, xs[i % 5], 1e4)).unwrap();
        }
        let cfg = FitConfig::default();
        // One 10x spike: an outlier, the model does not move.
        let mut spike = device(&mut rng, 4000.0, 1e4);
        spike.compute_s *= 10.0;
        store.push(spike).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!((f.exec.outliers, f.exec.shift_start), (1, None));
        assert!(close(f.model.exec.time(4000.0), 0.45, 0.03));
        // Now the device becomes 10x slower. Two deviating points in a row
        // (the spike and one slow block) may still be spikes...
        store.push(device(&mut rng, 8000.0, 1e3)).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!((f.exec.outliers, f.exec.shift_start), (2, None));
        assert!(close(f.model.exec.time(4000.0), 0.45, 0.03));
        // ...the third makes a run of 3: a change of speed.
        store.push(device(&mut rng, 2000.0, 1e3)).unwrap();
        let n_before = store.len();
        let f = store.fit(&cfg).unwrap();
        assert_eq!(f.exec.superseded, 40, "{:?}", f.exec);
        assert_eq!((f.exec.used, f.exec.outliers), (3, 0));
        assert_eq!(store.len(), 3, "the store forgot the old regime");
        assert_eq!(store.forgotten(), (n_before - 3) as u64);
        // New regime 0.05 + x/1000 s (the spike, 4.5 s at 4000, fits in it).
        store.push(device(&mut rng, 16000.0, 1e3)).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!(f.exec.shift_start, None);
        for x in [2000.0, 8000.0, 16000.0] {
            assert!(
                close(f.model.exec.time(x), 0.05 + x / 1e3, 0.1),
                "{x}: {}",
                f.model.exec
            );
        }
        // And a device that becomes 10x faster.
        let mut st = SampleStore::default();
        for i in 0..20 {
            st.push(device(&mut rng, xs[i % 5], 1e3)).unwrap();
        }
        for &x in &xs[..3] {
            st.push(device(&mut rng, x, 1e5)).unwrap();
        }
        let f = st.fit(&cfg).unwrap();
        assert_eq!(f.exec.superseded, 20);
        assert!(f.model.exec.time(4000.0) < 0.2);
    }

    #[test]
    fn contract_holds_for_random_fits() {
        let mut rng = Rng::new(2024);
        let cfg = FitConfig::default();
        let cases = std::env::var("PLB_FIT_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(400);
        for case in 0..cases {
            let n = 1 + rng.below(40) as usize;
            let lo = rng.log_range(1.0, 1e4);
            let hi = lo * rng.log_range(1.0, 1e3);
            let kind = rng.below(4);
            let coefs: Vec<f64> = (0..8).map(|_| rng.log_range(1e-3, 10.0)).collect();
            let mut p = Vec::new();
            for _ in 0..n {
                let x = if rng.below(3) == 0 {
                    lo
                } else {
                    rng.log_range(lo, hi).round().max(1.0)
                };
                let s = x / hi;
                let clean = match kind {
                    // A random positive combination of increasing bases.
                    0 => {
                        coefs[0]
                            + coefs[1] * s
                            + coefs[2] * s * s * (rng.below(2) as f64)
                            + coefs[3] * s * s.exp() * (rng.below(2) as f64)
                    }
                    1 => coefs[0] * (1.0 + s.ln() - (lo / hi).ln()),
                    // Pure noise: no structure at all.
                    2 => rng.log_range(1e-3, 1e3),
                    // A decreasing device (impossible, must still be valid).
                    _ => coefs[0] / (1.0 + s),
                };
                let noisy = clean * (1.0 + 0.1 * (2.0 * rng.unit() - 1.0));
                let w = if rng.below(5) == 0 { rng.unit() } else { 1.0 };
                p.push(Point::new(x, noisy, w));
            }
            let (m, r) = fit_exec(&p, &cfg).unwrap();
            assert!(
                r.used + r.outliers + r.superseded + r.invalid == n,
                "case {case}"
            );
            check_contract(&m, hi);
            let (t, _) = fit_transfer(&p, &cfg).unwrap();
            check_contract(
                &PuModel {
                    exec: m,
                    transfer: t,
                },
                hi,
            );
        }
    }

    #[test]
    fn pu_model_sums_both() {
        let mut store = SampleStore::default();
        for &x in &[1.0, 2.0, 4.0, 8.0, 16.0] {
            store
                .push(Sample::new(x, 1.0 + 2.0 * x, 0.5 + 0.1 * x))
                .unwrap();
        }
        store.push(Sample::new(3.0, f64::NAN, 0.0)).unwrap_err();
        let f = store.fit(&FitConfig::default()).unwrap();
        let e = &f.model;
        assert!(close(e.time(10.0), 21.0 + 1.5, 1e-9));
        assert!(close(e.slope(10.0), 2.1, 1e-9));
        assert_eq!(f.exec.used, 5);
        assert_eq!(store.rejections().bad_compute, 1);
        check_contract(e, 16.0);
    }
}
