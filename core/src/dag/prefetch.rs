//! Which placed tasks have their input prefetched at placement
//! (`PLB_PREFETCH_HORIZON`). Without a horizon, every one (as `dmda` does
//! at push). With one, only a task its worker should reach within it:
//! the predicted work ahead of it on its line, the worker's backlog when
//! the batch was taken plus the batch's earlier placements there, is at
//! most the horizon. The others are not prefetched: StarPU fetches their
//! input when a worker takes them. Measured on the
//! SIMULATED study (docs/results.md, eighteenth round): with 3 to 8 GPUs
//! sharing the link to main memory a 20 ms horizon shortened runs, with
//! one GPU it lengthened them; hence no horizon by default.

use std::collections::HashMap;

/// The prefetch decisions of one placed batch.
pub struct PrefetchHorizon {
    /// Seconds; `None`: every task is prefetched.
    horizon_s: Option<f64>,
    /// Predicted work ahead on each worker's line (by worker id; empty
    /// without a horizon).
    ahead_s: HashMap<usize, f64>,
}

impl PrefetchHorizon {
    /// `backlogs`: each worker's id and predicted backlog (seconds) when
    /// the batch was taken.
    pub fn new(horizon_s: Option<f64>, backlogs: impl IntoIterator<Item = (usize, f64)>) -> Self {
        // Without a horizon nothing is counted.
        let ahead_s = match horizon_s {
            Some(_) => backlogs.into_iter().collect(),
            None => HashMap::new(),
        };
        PrefetchHorizon { horizon_s, ahead_s }
    }

    /// Whether the next task placed on `worker`, predicted to take `est_s`
    /// there, is prefetched now; counts it in the work ahead of the next
    /// one placed there. Call in placement order.
    pub fn admit(&mut self, worker: usize, est_s: f64) -> bool {
        let Some(horizon_s) = self.horizon_s else {
            return true;
        };
        let ahead = self.ahead_s.entry(worker).or_insert(0.0);
        let now = *ahead <= horizon_s;
        if est_s.is_finite() && est_s > 0.0 {
            *ahead += est_s;
        }
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tasks_within_the_horizon_are_prefetched() {
        // Worker 0 idle, worker 1 with 30 ms of backlog; 20 ms horizon.
        let mut h = PrefetchHorizon::new(Some(0.02), [(0, 0.0), (1, 0.03)]);
        assert!(h.admit(0, 0.012), "nothing ahead");
        assert!(h.admit(0, 0.012), "12 ms ahead");
        assert!(!h.admit(0, 0.012), "24 ms ahead");
        assert!(!h.admit(1, 0.001), "30 ms of backlog ahead");
        // A worker the batch did not list starts from nothing ahead.
        assert!(h.admit(7, 0.5));
        assert!(!h.admit(7, 0.5));
        // Exactly at the horizon is within it.
        let mut h = PrefetchHorizon::new(Some(0.02), [(0, 0.02)]);
        assert!(h.admit(0, 0.01));
    }

    #[test]
    fn without_a_horizon_every_task_is_prefetched() {
        let mut h = PrefetchHorizon::new(None, [(0, 10.0)]);
        assert!((0..100).all(|_| h.admit(0, 1.0)));
    }
}
