//! The models of the two baselines the papers compare with (PLB-HeC §II,
//! PLB-HAC §2), as pure functions.
//!
//! **HDSS** (Belviranli, Bhuyan, Gupta, ACM TACO 9(4), 2013). In its
//! adaptive phase each PU processes blocks of growing sizes; its throughput
//! (units per second) against the block size is fitted with a logarithmic
//! curve `thr(x) = a·ln x + b` by least squares ([`HdssCurve::fit`]), which
//! models a GPU whose throughput climbs with the block size and then
//! flattens. The PU's single weight ([`HdssCurve::weight`]) is the fitted
//! throughput where the PU is fastest on the range it was measured on,
//! `max(thr(x_min), thr(x_max))` (the curve is monotone, so that is its
//! maximum on the range: the flattened end for a GPU, the roughly constant
//! level of a CPU). The completion phase then splits the remaining work in
//! proportion to the normalised weights ([`hdss_weights`]). Our papers
//! summarise HDSS without the TACO paper's exact rule for the point of the
//! curve the weight is read at; evaluating at the measured maximum is our
//! reading, chosen because it never extrapolates the logarithm.
//!
//! **Acosta** (Acosta et al., dynamic load balancing for GPU systems). Each
//! PU p records the time `T_p` its last load `L_p` took. When the spread
//! `max T − min T` exceeds a user threshold, the relative power
//! `RP_p = L_p / T_p` and their sum `SRP = Σ RP_p` give the next loads
//! `L_p' = total · RP_p / SRP` ([`acosta_step`]).

use std::fmt;

/// Why a baseline model could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineError {
    /// No input at all.
    Empty,
    /// Slices of different lengths.
    LengthMismatch,
    /// A load, time or total that is not a finite number `>= 0`.
    NonFinite {
        /// Position of the offending entry (`usize::MAX` for the total).
        index: usize,
    },
    /// A PU processed a load `> 0` in zero time (infinite power).
    ZeroTime {
        /// Position of the PU.
        index: usize,
    },
    /// Every PU has zero power (or weight): no split is possible.
    NoPower,
    /// No usable point (size and time finite and `> 0`) in an HDSS curve.
    NoValidSamples {
        /// Points skipped.
        invalid: usize,
    },
}

impl fmt::Display for BaselineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaselineError::Empty => f.write_str("no input"),
            BaselineError::LengthMismatch => f.write_str("slices of different lengths"),
            BaselineError::NonFinite { index } => {
                write!(f, "entry {index} is not a finite number >= 0")
            }
            BaselineError::ZeroTime { index } => {
                write!(f, "PU {index} processed a load in zero time")
            }
            BaselineError::NoPower => f.write_str("every PU has zero power"),
            BaselineError::NoValidSamples { invalid } => {
                write!(f, "no usable point ({invalid} invalid)")
            }
        }
    }
}

impl std::error::Error for BaselineError {}

// ---------------------------------------------------------------------------
// HDSS
// ---------------------------------------------------------------------------

/// One PU's HDSS throughput curve `thr(x) = a·ln x + b` (units per second,
/// `x` in units).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HdssCurve {
    /// Slope against `ln x`.
    pub a: f64,
    /// Intercept (throughput at `x = 1`).
    pub b: f64,
    /// Coefficient of determination of the fit (0 with one distinct size).
    pub r2: f64,
    /// Smallest block size measured.
    pub lo: f64,
    /// Largest block size measured.
    pub hi: f64,
    /// Points used.
    pub used: usize,
    /// Points skipped (size or time not finite and `> 0`).
    pub invalid: usize,
    best_observed: f64,
}

impl HdssCurve {
    /// Least-squares fit of `thr = units / seconds` against `ln units` over
    /// `(units, seconds)` points. Invalid points are skipped and counted.
    /// With a single distinct size the curve is flat (`a = 0`, `b` = mean
    /// throughput, `r2 = 0`).
    pub fn fit(points: &[(f64, f64)]) -> Result<HdssCurve, BaselineError> {
        let ok = |&(x, t): &(f64, f64)| x.is_finite() && x > 0.0 && t.is_finite() && t > 0.0;
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| ok(p))
            .map(|&(x, t)| (x.ln(), x / t))
            .collect();
        let invalid = points.len() - pts.len();
        if pts.is_empty() {
            return Err(if points.is_empty() {
                BaselineError::Empty
            } else {
                BaselineError::NoValidSamples { invalid }
            });
        }
        let n = pts.len() as f64;
        let lm = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let ym = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 - lm) * (p.0 - lm)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - lm) * (p.1 - ym)).sum();
        let syy: f64 = pts.iter().map(|p| (p.1 - ym) * (p.1 - ym)).sum();
        let spread = sxx > 1e-18 * n * (1.0 + lm * lm);
        let a = if spread { sxy / sxx } else { 0.0 };
        let b = ym - a * lm;
        let r2 = if !spread {
            0.0
        } else if syy > 0.0 {
            let sse: f64 = pts
                .iter()
                .map(|p| {
                    let e = p.1 - (a * p.0 + b);
                    e * e
                })
                .sum();
            1.0 - sse / syy
        } else {
            1.0
        };
        let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min).exp();
        let hi = pts
            .iter()
            .map(|p| p.0)
            .fold(f64::NEG_INFINITY, f64::max)
            .exp();
        // Best per-size mean throughput, the fallback weight.
        let mut by_size = pts.clone();
        by_size.sort_by(|p, q| p.0.total_cmp(&q.0));
        let mut best_observed: f64 = 0.0;
        let mut i = 0;
        while i < by_size.len() {
            let mut j = i;
            let mut s = 0.0;
            while j < by_size.len() && by_size[j].0 == by_size[i].0 {
                s += by_size[j].1;
                j += 1;
            }
            best_observed = best_observed.max(s / (j - i) as f64);
            i = j;
        }
        Ok(HdssCurve {
            a,
            b,
            r2,
            lo,
            hi,
            used: pts.len(),
            invalid,
            best_observed,
        })
    }

    /// Fitted throughput at block size `x` (units per second; `x` is
    /// clamped to the measured range, where the logarithm is trusted).
    pub fn throughput(&self, x: f64) -> f64 {
        let x = if x.is_nan() {
            self.lo
        } else {
            x.clamp(self.lo, self.hi)
        };
        self.a * x.ln() + self.b
    }

    /// The PU's HDSS weight: the fitted throughput at the better end of the
    /// measured range, `max(thr(lo), thr(hi))`. If the fit gives no positive
    /// value there (a pathological fit), the best per-size mean throughput
    /// observed. Always finite and `>= 0`.
    pub fn weight(&self) -> f64 {
        let w = self.throughput(self.lo).max(self.throughput(self.hi));
        if w.is_finite() && w > 0.0 {
            w
        } else {
            self.best_observed.max(0.0)
        }
    }
}

/// The HDSS weights of several PUs, normalised to sum to 1 (each PU's share
/// of the work in the completion phase). Fails if `curves` is empty or all
/// weights are 0.
pub fn hdss_weights(curves: &[HdssCurve]) -> Result<Vec<f64>, BaselineError> {
    normalise(&curves.iter().map(HdssCurve::weight).collect::<Vec<_>>())
}

fn normalise(w: &[f64]) -> Result<Vec<f64>, BaselineError> {
    if w.is_empty() {
        return Err(BaselineError::Empty);
    }
    if let Some(index) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(BaselineError::NonFinite { index });
    }
    let s: f64 = w.iter().sum();
    if !(s > 0.0 && s.is_finite()) {
        return Err(BaselineError::NoPower);
    }
    Ok(w.iter().map(|v| v / s).collect())
}

// ---------------------------------------------------------------------------
// Acosta
// ---------------------------------------------------------------------------

/// Relative power `RP = load / time` of one PU. A zero load gives 0 (the
/// PU took part in nothing, whatever its time); a positive load in zero
/// time is an error, as are negative or non-finite inputs.
pub fn relative_power(load: f64, time: f64) -> Result<f64, BaselineError> {
    if !(load.is_finite() && load >= 0.0) {
        return Err(BaselineError::NonFinite { index: 0 });
    }
    if !(time.is_finite() && time >= 0.0) {
        return Err(BaselineError::NonFinite { index: 0 });
    }
    if load == 0.0 {
        return Ok(0.0);
    }
    if time == 0.0 {
        return Err(BaselineError::ZeroTime { index: 0 });
    }
    Ok(load / time)
}

/// One Acosta rebalancing decision.
#[derive(Debug, Clone, PartialEq)]
pub struct AcostaStep {
    /// Whether the spread of times exceeded the threshold.
    pub rebalance: bool,
    /// `RP_p = L_p / T_p` per PU.
    pub rp: Vec<f64>,
    /// `SRP = Σ RP_p`.
    pub srp: f64,
    /// Next loads: `total · RP_p / SRP` when rebalancing, else the previous
    /// loads unchanged.
    pub loads: Vec<f64>,
}

/// Acosta's step: given each PU's last load and time, rebalance `total`
/// units in proportion to the relative powers if `max T − min T >
/// threshold_s`. A PU with load 0 has RP 0 and keeps getting 0 (Acosta's
/// scheme cannot measure a PU it gives nothing to; a caller that wants to
/// probe it must give it a load itself).
pub fn acosta_step(
    loads: &[f64],
    times: &[f64],
    total: f64,
    threshold_s: f64,
) -> Result<AcostaStep, BaselineError> {
    if loads.is_empty() {
        return Err(BaselineError::Empty);
    }
    if loads.len() != times.len() {
        return Err(BaselineError::LengthMismatch);
    }
    if !(total.is_finite() && total >= 0.0) {
        return Err(BaselineError::NonFinite { index: usize::MAX });
    }
    let mut rp = Vec::with_capacity(loads.len());
    for (index, (&l, &t)) in loads.iter().zip(times).enumerate() {
        rp.push(relative_power(l, t).map_err(|e| match e {
            BaselineError::ZeroTime { .. } => BaselineError::ZeroTime { index },
            _ => BaselineError::NonFinite { index },
        })?);
    }
    let srp: f64 = rp.iter().sum();
    if !(srp > 0.0 && srp.is_finite()) {
        return Err(BaselineError::NoPower);
    }
    let tmax = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tmin = times.iter().copied().fold(f64::INFINITY, f64::min);
    let rebalance = tmax - tmin > threshold_s || threshold_s.is_nan();
    let loads = if rebalance {
        rp.iter().map(|r| total * r / srp).collect()
    } else {
        loads.to_vec()
    };
    Ok(AcostaStep {
        rebalance,
        rp,
        srp,
        loads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::E;

    fn pts(curve: &[(f64, f64)]) -> Vec<(f64, f64)> {
        // (units, throughput) -> (units, seconds)
        curve.iter().map(|&(x, thr)| (x, x / thr)).collect()
    }

    #[test]
    fn hdss_log_fit_hand_computed() {
        // ln x = 0, 1, 2 with throughputs 10, 12, 14: a = 2, b = 10, exact.
        let c = HdssCurve::fit(&pts(&[(1.0, 10.0), (E, 12.0), (E * E, 14.0)])).unwrap();
        assert!((c.a - 2.0).abs() < 1e-12 && (c.b - 10.0).abs() < 1e-12);
        assert!((c.r2 - 1.0).abs() < 1e-12);
        assert!((c.weight() - 14.0).abs() < 1e-12);
        assert!((c.throughput(1e9) - 14.0).abs() < 1e-12, "clamped to range");
        // Throughputs 9, 13, 14 at ln x = 0, 1, 2: means (1, 12), a = 5/2,
        // b = 12 - 2.5 = 9.5, SSE = 0.25+1+0.25 = 1.5, SST = 14 -> R² = 1 - 1.5/14.
        let c = HdssCurve::fit(&pts(&[(1.0, 9.0), (E, 13.0), (E * E, 14.0)])).unwrap();
        assert!((c.a - 2.5).abs() < 1e-12 && (c.b - 9.5).abs() < 1e-12);
        assert!((c.r2 - (1.0 - 1.5 / 14.0)).abs() < 1e-12);
        assert!((c.weight() - 14.5).abs() < 1e-12);
    }

    #[test]
    fn hdss_weights_normalised() {
        let gpu = HdssCurve::fit(&pts(&[(1.0, 10.0), (E, 12.0), (E * E, 14.0)])).unwrap();
        let cpu = HdssCurve::fit(&pts(&[(1.0, 7.0), (2.0, 7.0), (4.0, 7.0)])).unwrap();
        assert_eq!(cpu.a, 0.0);
        assert_eq!(cpu.r2, 1.0);
        let w = hdss_weights(&[gpu, cpu]).unwrap();
        assert!((w[0] - 2.0 / 3.0).abs() < 1e-12 && (w[1] - 1.0 / 3.0).abs() < 1e-12);
        // A decreasing curve (cache effects): weight at the small end.
        let dec = HdssCurve::fit(&pts(&[(1.0, 8.0), (E, 6.0)])).unwrap();
        assert!((dec.weight() - 8.0).abs() < 1e-12);
    }

    #[test]
    fn hdss_bad_inputs() {
        assert_eq!(HdssCurve::fit(&[]), Err(BaselineError::Empty));
        assert_eq!(
            HdssCurve::fit(&[
                (0.0, 1.0),
                (1.0, 0.0),
                (f64::NAN, 1.0),
                (1.0, f64::INFINITY)
            ]),
            Err(BaselineError::NoValidSamples { invalid: 4 })
        );
        // One point, or one size: flat at the mean throughput.
        let one = HdssCurve::fit(&[(4.0, 2.0), (-1.0, 1.0)]).unwrap();
        assert_eq!((one.a, one.b, one.r2, one.invalid), (0.0, 2.0, 0.0, 1));
        assert_eq!(one.weight(), 2.0);
        let same = HdssCurve::fit(&[(4.0, 2.0), (4.0, 1.0)]).unwrap();
        assert_eq!((same.a, same.b), (0.0, 3.0));
        // A pathological fit falls back to the best observed throughput.
        let mut bad = same;
        bad.b = -5.0;
        assert_eq!(bad.weight(), 3.0);
        assert_eq!(hdss_weights(&[]), Err(BaselineError::Empty));
        let mut zero = same;
        zero.b = 0.0;
        zero.best_observed = 0.0;
        assert_eq!(hdss_weights(&[zero]), Err(BaselineError::NoPower));
        assert_eq!(zero.throughput(f64::NAN), 0.0);
    }

    #[test]
    fn acosta_hand_computed() {
        // RP = 100/1, 100/4 = 100, 25; SRP = 125; loads 200·100/125, 200·25/125.
        let s = acosta_step(&[100.0, 100.0], &[1.0, 4.0], 200.0, 0.5).unwrap();
        assert!(s.rebalance);
        assert_eq!(s.rp, vec![100.0, 25.0]);
        assert_eq!(s.srp, 125.0);
        assert_eq!(s.loads, vec![160.0, 40.0]);
        // Spread 3 s below a 5 s threshold: keep the loads.
        let k = acosta_step(&[100.0, 100.0], &[1.0, 4.0], 200.0, 5.0).unwrap();
        assert!(!k.rebalance);
        assert_eq!(k.loads, vec![100.0, 100.0]);
        // Three PUs, one idle (load 0 -> RP 0 -> load 0).
        let t = acosta_step(&[30.0, 10.0, 0.0], &[2.0, 1.0, 0.0], 50.0, 0.1).unwrap();
        assert_eq!(t.rp, vec![15.0, 10.0, 0.0]);
        assert_eq!(t.loads, vec![30.0, 20.0, 0.0]);
        assert_eq!(relative_power(10.0, 4.0), Ok(2.5));
    }

    #[test]
    fn acosta_bad_inputs() {
        assert_eq!(acosta_step(&[], &[], 1.0, 0.0), Err(BaselineError::Empty));
        assert_eq!(
            acosta_step(&[1.0], &[1.0, 2.0], 1.0, 0.0),
            Err(BaselineError::LengthMismatch)
        );
        assert_eq!(
            acosta_step(&[1.0, 1.0], &[1.0, 0.0], 1.0, 0.0),
            Err(BaselineError::ZeroTime { index: 1 })
        );
        assert_eq!(
            acosta_step(&[1.0, f64::NAN], &[1.0, 1.0], 1.0, 0.0),
            Err(BaselineError::NonFinite { index: 1 })
        );
        assert_eq!(
            acosta_step(&[1.0, 1.0], &[1.0, -1.0], 1.0, 0.0),
            Err(BaselineError::NonFinite { index: 1 })
        );
        assert_eq!(
            acosta_step(&[1.0], &[1.0], f64::INFINITY, 0.0),
            Err(BaselineError::NonFinite { index: usize::MAX })
        );
        // Zero-speed PUs everywhere (nothing done): no split possible.
        assert_eq!(
            acosta_step(&[0.0, 0.0], &[3.0, 1.0], 1.0, 0.0),
            Err(BaselineError::NoPower)
        );
        // A zero-speed PU among others gets nothing.
        let s = acosta_step(&[0.0, 5.0], &[9.0, 1.0], 10.0, 0.0).unwrap();
        assert_eq!(s.loads, vec![0.0, 10.0]);
        assert_eq!(
            relative_power(1.0, f64::INFINITY),
            Err(BaselineError::NonFinite { index: 0 })
        );
        assert_eq!(
            BaselineError::ZeroTime { index: 2 }.to_string(),
            "PU 2 processed a load in zero time"
        );
    }
}
