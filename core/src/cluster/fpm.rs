//! Partial functional performance models (FPM): a processing element's
//! speed as a function of problem size, known at the sizes measured so far
//! and interpolated between them (Lastovetsky and Reddy; the "partial
//! estimates" of `../shared/papers/hierarchical-fpm-partitioning.md`).

use crate::model::TimeModel;

/// Most points one speed function keeps (the oldest at the nearest size is
/// replaced first; beyond the cap the point closest to a new one goes).
pub const MAX_POINTS: usize = 64;

/// A partial speed function `s(x)`, units per second at `x` units:
/// piecewise linear through the measured points, constant beyond the first
/// and last. `time(x) = x / s(x)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeedFunction {
    /// `(x, s)` sorted by `x`, `x > 0`, `s > 0`, distinct `x`.
    points: Vec<(f64, f64)>,
}

impl SpeedFunction {
    /// An empty model (no prediction until a point is added).
    pub fn new() -> SpeedFunction {
        SpeedFunction::default()
    }

    /// Adds the measurement "`x` units took `seconds`". A new measurement
    /// at a size already known replaces the old one (the latest speed
    /// counts). Ignores `x == 0` and non-positive or non-finite times.
    pub fn add(&mut self, x: f64, seconds: f64) {
        if !(x > 0.0 && x.is_finite() && seconds > 0.0 && seconds.is_finite()) {
            return;
        }
        let s = x / seconds;
        match self.points.binary_search_by(|p| p.0.total_cmp(&x)) {
            Ok(i) => self.points[i].1 = s,
            Err(i) => {
                if self.points.len() >= MAX_POINTS {
                    // Drop the neighbour nearest to the new size.
                    let j = if i == 0 {
                        0
                    } else if i == self.points.len()
                        || x - self.points[i - 1].0 < self.points[i].0 - x
                    {
                        i - 1
                    } else {
                        i
                    };
                    self.points.remove(j);
                    let i = self.points.partition_point(|p| p.0 < x);
                    self.points.insert(i, (x, s));
                } else {
                    self.points.insert(i, (x, s));
                }
            }
        }
    }

    /// The measured points `(x, speed)`, by size.
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// Whether no point is known.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Speed at `x` (units per second); `None` without points.
    pub fn speed(&self, x: f64) -> Option<f64> {
        let p = &self.points;
        let (first, last) = (p.first()?, p.last()?);
        if x <= first.0 {
            return Some(first.1);
        }
        if x >= last.0 {
            return Some(last.1);
        }
        let i = p.partition_point(|q| q.0 <= x);
        let (a, b) = (p[i - 1], p[i]);
        Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
    }
}

impl TimeModel for SpeedFunction {
    fn time(&self, x: f64) -> f64 {
        match self.speed(x) {
            Some(s) if x > 0.0 => x / s,
            Some(_) => 0.0,
            None => f64::INFINITY,
        }
    }

    fn slope(&self, x: f64) -> f64 {
        let h = (x.abs() * 1e-6).max(1e-6);
        ((self.time(x + h) - self.time(x)) / h).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_points_and_is_flat_beyond() {
        let mut f = SpeedFunction::new();
        assert_eq!(f.time(5.0), f64::INFINITY);
        f.add(10.0, 1.0); // 10/s
        f.add(30.0, 1.0); // 30/s
        assert_eq!(f.speed(20.0), Some(20.0));
        assert_eq!(f.speed(1.0), Some(10.0));
        assert_eq!(f.speed(100.0), Some(30.0));
        assert!((f.time(20.0) - 1.0).abs() < 1e-12);
        assert_eq!(f.time(0.0), 0.0);
    }

    #[test]
    fn a_new_measurement_at_a_known_size_replaces_the_old() {
        let mut f = SpeedFunction::new();
        f.add(10.0, 1.0);
        f.add(10.0, 2.0);
        assert_eq!(f.points(), &[(10.0, 5.0)]);
        f.add(0.0, 1.0);
        f.add(3.0, f64::NAN);
        assert_eq!(f.points().len(), 1);
    }

    #[test]
    fn the_number_of_points_is_capped() {
        let mut f = SpeedFunction::new();
        for i in 1..=(3 * MAX_POINTS) {
            f.add(i as f64, 1.0);
        }
        assert_eq!(f.points().len(), MAX_POINTS);
        assert!(f.points().windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            f.points().last().map(|p| p.0),
            Some((3 * MAX_POINTS) as f64)
        );
    }
}
