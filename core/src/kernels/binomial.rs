//! European options on a Cox-Ross-Rubinstein binomial lattice.

/// Time steps of the lattice in `plb app binomial` (its codelets use the
/// same constant).
pub const STEPS: usize = 254;

/// (call, put) of a European option on a CRR lattice of `steps` steps:
/// spot `s`, strike `x`, `years` to expiry, riskless rate `r`, volatility
/// `v`.
pub fn price(s: f64, x: f64, years: f64, r: f64, v: f64, steps: usize) -> (f64, f64) {
    let steps = steps.max(1);
    let dt = years / steps as f64;
    let u = (v * dt.sqrt()).exp();
    let d = 1.0 / u;
    let p_up = ((r * dt).exp() - d) / (u - d);
    let disc = (-r * dt).exp();
    let (pu, pd) = (disc * p_up, disc * (1.0 - p_up));
    let mut call: Vec<f64> = Vec::with_capacity(steps + 1);
    let mut put: Vec<f64> = Vec::with_capacity(steps + 1);
    for j in 0..=steps {
        let st = s * u.powi(2 * j as i32 - steps as i32);
        call.push((st - x).max(0.0));
        put.push((x - st).max(0.0));
    }
    for i in (0..steps).rev() {
        for j in 0..=i {
            call[j] = pu * call[j + 1] + pd * call[j];
            put[j] = pu * put[j + 1] + pd * put[j];
        }
    }
    (call[0], put[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Black-Scholes closed form, with a series for the normal CDF.
    fn black_scholes(s: f64, x: f64, t: f64, r: f64, v: f64) -> (f64, f64) {
        fn cdf(z: f64) -> f64 {
            // Abramowitz-Stegun 7.1.26 on erf (error < 1.5e-7).
            let t = 1.0 / (1.0 + 0.327_591_1 * z.abs() / std::f64::consts::SQRT_2);
            let poly = t
                * (0.254_829_592
                    + t * (-0.284_496_736
                        + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
            let erf = 1.0 - poly * (-z * z / 2.0).exp();
            if z >= 0.0 {
                0.5 * (1.0 + erf)
            } else {
                0.5 * (1.0 - erf)
            }
        }
        let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * t.sqrt());
        let d2 = d1 - v * t.sqrt();
        let call = s * cdf(d1) - x * (-r * t).exp() * cdf(d2);
        (call, call - s + x * (-r * t).exp())
    }

    #[test]
    fn the_lattice_converges_to_black_scholes_and_keeps_parity() {
        for &(s, x, t) in &[(20.0, 25.0, 2.0), (10.0, 8.0, 0.5), (29.0, 30.0, 9.0)] {
            let (r, v) = (0.02, 0.3);
            let (c, p) = price(s, x, t, r, v, STEPS);
            let (bc, bp) = black_scholes(s, x, t, r, v);
            assert!(
                (c - bc).abs() < 0.02 * (1.0 + bc),
                "{s} {x} {t}: {c} vs {bc}"
            );
            assert!(
                (p - bp).abs() < 0.02 * (1.0 + bp),
                "{s} {x} {t}: {p} vs {bp}"
            );
            // Put-call parity holds exactly on the lattice (risk-neutral
            // probabilities).
            let parity = s - x * (-r * t).exp();
            assert!((c - p - parity).abs() < 1e-9, "{}", c - p - parity);
        }
    }
}
