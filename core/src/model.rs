//! The contract between fitted performance models and the solvers.

/// Time, in seconds, that one processing unit (PU) needs for a block of `x`
/// work units. Everything a solver knows about a PU.
///
/// Contract (fitted models guarantee it; solvers rely on it):
/// * defined for every `x >= 0`, finite and `>= 0`;
/// * continuous and non-decreasing; `time(0)` is the PU's fixed cost of
///   receiving any block at all (latency, launch), and is `>= 0`;
/// * `slope(x)` is the derivative of `time` (right derivative at 0), finite
///   and `>= 0`.
pub trait TimeModel {
    /// Predicted seconds for a block of `x` units.
    fn time(&self, x: f64) -> f64;
    /// d time / d x at `x`.
    fn slope(&self, x: f64) -> f64;
}

impl<T: TimeModel + ?Sized> TimeModel for &T {
    fn time(&self, x: f64) -> f64 {
        (**self).time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        (**self).slope(x)
    }
}

/// `time(x) = fixed + x / rate`: the simplest model, used as the last-resort
/// fallback (throughput-proportional split) and in tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearModel {
    /// Seconds spent whatever the block size.
    pub fixed: f64,
    /// Units processed per second (> 0).
    pub rate: f64,
}

impl TimeModel for LinearModel {
    fn time(&self, x: f64) -> f64 {
        self.fixed + x / self.rate
    }
    fn slope(&self, _x: f64) -> f64 {
        1.0 / self.rate
    }
}
