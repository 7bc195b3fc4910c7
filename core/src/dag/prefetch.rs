//! Which placed tasks have their input prefetched at placement
//! (`PLB_PREFETCH_HORIZON`). Without a horizon, every one (as `dmda` does
//! at push). With one, only a task its worker should reach within it:
//! the predicted work ahead of it on its line, the worker's backlog when
//! the batch was taken plus the batch's earlier placements there, is at
//! most the horizon. The others are not prefetched: StarPU fetches their
//! input when a worker takes them.
//!
//! The default, [`PrefetchSetting::Auto`], sets a horizon of
//! [`AUTO_HORIZON_S`] when at least [`AUTO_MIN_DEVICES`] accelerator
//! memory nodes take part, and none otherwise. Measured on the SIMULATED
//! study (docs/results.md, eighteenth and nineteenth rounds): where 3 to 8
//! GPUs share the platform's one link to main memory a 20 ms horizon
//! shortened runs; with one GPU it lengthened them.

use rustc_hash::FxHashMap as HashMap;

use super::decide::Member;

/// The horizon [`PrefetchSetting::Auto`] sets (seconds).
pub const AUTO_HORIZON_S: f64 = 0.020;

/// The fewest accelerator memory nodes for which
/// [`PrefetchSetting::Auto`] sets a horizon.
pub const AUTO_MIN_DEVICES: usize = 3;

/// `PLB_PREFETCH_HORIZON`'s value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PrefetchSetting {
    /// [`AUTO_HORIZON_S`] with at least [`AUTO_MIN_DEVICES`] accelerator
    /// memory nodes, otherwise none (the default).
    Auto,
    /// No horizon: every placed task is prefetched.
    Off,
    /// This many seconds, whatever the machine.
    Within(f64),
}

impl PrefetchSetting {
    /// The horizon (seconds) for a batch placed on `members` (`None`: no
    /// horizon); only [`PrefetchSetting::Auto`] counts their accelerator
    /// memory nodes.
    pub fn horizon_s(self, members: &[Member]) -> Option<f64> {
        match self {
            PrefetchSetting::Auto => {
                (accelerator_nodes(members) >= AUTO_MIN_DEVICES).then_some(AUTO_HORIZON_S)
            }
            PrefetchSetting::Off => None,
            PrefetchSetting::Within(s) => Some(s),
        }
    }
}

/// How many memory nodes the members that are not CPU workers span
/// ([`super::distinct_accelerator_nodes`]).
pub fn accelerator_nodes(members: &[Member]) -> usize {
    super::distinct_accelerator_nodes(members.iter().map(|m| (m.kind, m.node)))
}

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
            None => HashMap::default(),
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
    use crate::balance::WorkerKind;

    fn member(id: usize, kind: WorkerKind, node: usize) -> Member {
        Member { id, kind, node }
    }

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
    fn auto_sets_a_horizon_from_three_devices_on() {
        // A CPU core, then GPUs on nodes 1, 2, ...: `gpus(n)` has n of them.
        let gpus = |n: usize| -> Vec<Member> {
            std::iter::once(member(0, WorkerKind::Cpu, 0))
                .chain((1..=n).map(|i| member(i, WorkerKind::Cuda, i)))
                .collect()
        };
        let auto = PrefetchSetting::Auto;
        assert_eq!(auto.horizon_s(&[]), None);
        assert_eq!(auto.horizon_s(&gpus(0)), None);
        assert_eq!(auto.horizon_s(&gpus(1)), None);
        assert_eq!(auto.horizon_s(&gpus(2)), None);
        assert_eq!(auto.horizon_s(&gpus(3)), Some(AUTO_HORIZON_S));
        assert_eq!(auto.horizon_s(&gpus(8)), Some(AUTO_HORIZON_S));
        assert_eq!(PrefetchSetting::Off.horizon_s(&gpus(8)), None);
        assert_eq!(
            PrefetchSetting::Within(0.005).horizon_s(&gpus(1)),
            Some(0.005)
        );
    }

    #[test]
    fn accelerator_nodes_are_counted_once_each() {
        let m = member;
        // Four CPU cores on node 0, two CUDA workers sharing node 1 (two
        // streams of one GPU), one on node 2, an OpenCL device on node 3.
        let members = [
            m(0, WorkerKind::Cpu, 0),
            m(1, WorkerKind::Cpu, 0),
            m(2, WorkerKind::Cpu, 0),
            m(3, WorkerKind::Cpu, 0),
            m(4, WorkerKind::Cuda, 1),
            m(5, WorkerKind::Cuda, 1),
            m(6, WorkerKind::Cuda, 2),
            m(7, WorkerKind::OpenCl, 3),
        ];
        assert_eq!(accelerator_nodes(&members), 3);
        assert_eq!(accelerator_nodes(&members[..4]), 0);
        assert_eq!(accelerator_nodes(&members[..6]), 1);
    }

    #[test]
    fn without_a_horizon_every_task_is_prefetched() {
        let mut h = PrefetchHorizon::new(None, [(0, 10.0)]);
        assert!((0..100).all(|_| h.admit(0, 1.0)));
    }
}
