//! Relative PU powers learned online, as the co-execution balancers of the
//! fifth paper use them (HGuided, Adaptive, Sigmoid): a PU's power is its
//! measured throughput (units per second of compute plus transfer),
//! averaged over its last few packages to damp bursts. Nothing is given by
//! the user.
//!
//! A completion whose timing is unusable (NaN, infinite, zero or negative)
//! is not a measurement; a PU without any measurement is given the mean
//! power of the measured ones (1 when none is), and [`Powers::fallbacks`]
//! counts how often that happened.

use std::collections::VecDeque;

use super::Completion;

/// Packages a PU's power is averaged over.
pub const POWER_WINDOW: usize = 4;

/// Packages whose sizes are within this factor count as equally sized
/// ([`Powers::variability`]).
pub const COMPARABLE: f64 = 1.25;

/// Online powers of `n` PUs (see the module documentation).
#[derive(Debug, Clone)]
pub struct Powers {
    window: usize,
    /// (package length, throughput) of the last `window` packages.
    recent: Vec<VecDeque<(f64, f64)>>,
    fallbacks: u64,
}

impl Powers {
    /// Powers of `n` PUs averaged over the last `window` packages (at least
    /// 1).
    pub fn new(n: usize, window: usize) -> Powers {
        Powers {
            window: window.max(1),
            recent: vec![VecDeque::new(); n],
            fallbacks: 0,
        }
    }

    /// Records a finished package; returns whether its timing was usable.
    pub fn record(&mut self, done: &Completion) -> bool {
        let secs = done.compute_s + done.transfer_s.max(0.0);
        let usable = done.compute_s.is_finite() && secs.is_finite() && secs > 0.0;
        match self.recent.get_mut(done.block.pu) {
            Some(r) if usable => {
                if r.len() == self.window {
                    r.pop_front();
                }
                let len = done.block.len as f64;
                r.push_back((len, len / secs));
                true
            }
            _ => false,
        }
    }

    /// PU `pu`'s measured power (units per second), `None` before its first
    /// usable measurement.
    pub fn measured(&self, pu: usize) -> Option<f64> {
        let r = self.recent.get(pu)?;
        (!r.is_empty()).then(|| r.iter().map(|(_, t)| t).sum::<f64>() / r.len() as f64)
    }

    /// Every PU's power: measured, else the mean of the measured ones, else
    /// 1 (all equal).
    pub fn all(&mut self) -> Vec<f64> {
        let measured: Vec<f64> = (0..self.recent.len())
            .filter_map(|p| self.measured(p))
            .collect();
        let mean = if measured.is_empty() {
            1.0
        } else {
            measured.iter().sum::<f64>() / measured.len() as f64
        };
        (0..self.recent.len())
            .map(|p| {
                self.measured(p).unwrap_or_else(|| {
                    self.fallbacks += 1;
                    mean
                })
            })
            .collect()
    }

    /// PU `pu`'s share of the total power (all PUs equal before any
    /// measurement).
    pub fn share(&mut self, pu: usize) -> f64 {
        let all = self.all();
        let sum: f64 = all.iter().sum();
        match all.get(pu) {
            Some(&p) if sum > 0.0 => p / sum,
            _ => 1.0 / all.len().max(1) as f64,
        }
    }

    /// The coefficient of variation (standard deviation / mean) of PU
    /// `pu`'s recent throughputs over packages of comparable size (within
    /// a factor [`COMPARABLE`] of its latest package), with at least two of
    /// them. As the paper defines irregularity on equally sized chunks: a
    /// device whose throughput grows with the package size (a GPU filling
    /// up) is not irregular.
    pub fn variability(&self, pu: usize) -> Option<f64> {
        let r = self.recent.get(pu)?;
        let &(last, _) = r.back()?;
        let alike: Vec<f64> = r
            .iter()
            .filter(|(len, _)| *len * COMPARABLE >= last && *len <= last * COMPARABLE)
            .map(|(_, t)| *t)
            .collect();
        if alike.len() < 2 {
            return None;
        }
        let n = alike.len() as f64;
        let mean = alike.iter().sum::<f64>() / n;
        let var = alike.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean > 0.0).then(|| var.sqrt() / mean)
    }

    /// Times a PU without a measurement was given the mean power.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::Block;

    fn done(pu: usize, len: u64, secs: f64) -> Completion {
        Completion {
            block: Block { pu, offset: 0, len },
            compute_s: secs,
            transfer_s: 0.0,
            finished_at: 0.0,
        }
    }

    #[test]
    fn powers_are_windowed_throughputs_with_a_mean_fallback() {
        let mut p = Powers::new(3, 2);
        assert_eq!(p.all(), vec![1.0, 1.0, 1.0]);
        assert!(p.record(&done(0, 100, 1.0)));
        assert!(p.record(&done(0, 300, 1.0)));
        assert!(p.record(&done(0, 500, 1.0)));
        // Window of 2: (300 + 500) / 2.
        assert_eq!(p.measured(0), Some(400.0));
        assert!(p.record(&done(1, 100, 1.0)));
        // PU 2 unmeasured: the mean of 400 and 100.
        assert_eq!(p.all(), vec![400.0, 100.0, 250.0]);
        assert!(p.fallbacks() > 0);
        assert!((p.share(1) - 100.0 / 750.0).abs() < 1e-12);
    }

    #[test]
    fn unusable_timings_are_not_measurements() {
        let mut p = Powers::new(2, 4);
        for secs in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
            assert!(!p.record(&done(1, 10, secs)), "{secs}");
        }
        assert!(!p.record(&done(7, 10, 1.0)), "no such PU");
        assert_eq!(p.measured(1), None);
        assert_eq!(p.share(0), 0.5);
    }

    #[test]
    fn variability_is_the_coefficient_of_variation() {
        let mut p = Powers::new(1, 4);
        p.record(&done(0, 100, 1.0));
        assert_eq!(p.variability(0), None);
        p.record(&done(0, 100, 1.0));
        assert_eq!(p.variability(0), Some(0.0));
        p.record(&done(0, 110, 0.55));
        // 100, 100, 200 units/s: mean 133.3, sample deviation 57.74.
        let cv = p.variability(0).unwrap();
        assert!((cv - 0.433_012_7).abs() < 1e-6, "{cv}");
    }

    #[test]
    fn a_slow_small_probe_is_not_variability() {
        // A probe of 10 units at a tenth of the throughput of the large
        // packages that follow (a GPU not yet full): regular.
        let mut p = Powers::new(1, 4);
        p.record(&done(0, 10, 1.0));
        p.record(&done(0, 1000, 10.0));
        assert_eq!(p.variability(0), None);
        p.record(&done(0, 1200, 12.0));
        assert_eq!(p.variability(0), Some(0.0));
        // A package twice as large is not compared with them.
        p.record(&done(0, 2400, 12.0));
        assert_eq!(p.variability(0), None);
    }
}
