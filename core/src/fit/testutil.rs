//! Helpers shared by the fitting tests.

use crate::model::TimeModel;
use crate::samples::Point;

pub(super) fn pts(xs: &[f64], f: impl Fn(f64) -> f64) -> Vec<Point> {
    xs.iter().map(|&x| Point::new(x, f(x), 1.0)).collect()
}

pub(super) fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

pub(super) fn sizes(n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n)
        .map(|i| lo * (hi / lo).powf(i as f64 / (n - 1) as f64))
        .collect()
}

/// The TimeModel contract on a dense grid from 0 to 3·hi, plus huge x.
pub(super) fn check_contract(m: &impl TimeModel, hi: f64) {
    let n = 3000;
    let mut prev = m.time(0.0);
    assert!(prev.is_finite() && prev >= 0.0, "time(0) = {prev}");
    for i in 1..=n {
        let x = 3.0 * hi * i as f64 / n as f64;
        let t = m.time(x);
        let s = m.slope(x);
        assert!(t.is_finite() && t >= 0.0, "time({x}) = {t}");
        assert!(s.is_finite() && s >= 0.0, "slope({x}) = {s}");
        assert!(
            t >= prev - 1e-12 * t.abs(),
            "decreasing at {x}: {prev} -> {t}"
        );
        prev = t;
    }
    for &x in &[1e-300, 1e-9, hi * 1e6, 1e300] {
        let t = m.time(x);
        assert!(t >= 0.0 && !t.is_nan() && m.slope(x) >= 0.0);
    }
    assert_eq!(m.time(-5.0), m.time(0.0));
    assert_eq!(m.time(f64::NAN), m.time(0.0));
}
