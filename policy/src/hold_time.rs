//! How long a policy holds its push/pop lock, reported as `lock_us` in the
//! summary line; how long it spends fitting and placing ([`WorkTimer`],
//! `solve_us`); and counts for the summary ([`SummaryCount`]). All are
//! kept only when `PLB_SUMMARY` asks for them: two reads of StarPU's clock
//! per critical section or placement, and a counter every worker bumps
//! (its cache line passed from worker to worker), per task.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::starpu::now_us;

/// Accumulates the time spent inside one lock's critical sections.
#[derive(Debug)]
pub struct HoldTimer {
    enabled: bool,
    held_ns: AtomicU64,
}

impl HoldTimer {
    /// A timer, on when `PLB_SUMMARY` is set.
    pub fn from_env() -> HoldTimer {
        HoldTimer {
            enabled: crate::stats::summary_requested(),
            held_ns: AtomicU64::new(0),
        }
    }

    /// Call right after taking the lock.
    pub fn start(&self) -> Option<f64> {
        self.enabled.then(now_us)
    }

    /// Call right before releasing it, with what [`HoldTimer::start`]
    /// returned.
    pub fn stop(&self, started_us: Option<f64>) {
        if let Some(t0) = started_us {
            let ns = ((now_us() - t0).max(0.0) * 1e3) as u64;
            self.held_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// Seconds held so far (0 when not measured).
    pub fn held_s(&self) -> f64 {
        self.held_ns.load(Ordering::Relaxed) as f64 / 1e9
    }
}

/// Accumulates the time spent on model work (fits, balancer consults,
/// batch placements: once per task for the task-graph policies).
#[derive(Debug)]
pub struct WorkTimer {
    enabled: bool,
    ns: AtomicU64,
}

impl WorkTimer {
    /// A timer, on when `PLB_SUMMARY` is set.
    pub fn from_env() -> WorkTimer {
        WorkTimer {
            enabled: crate::stats::summary_requested(),
            ns: AtomicU64::new(0),
        }
    }

    /// Runs `f`, adding the time it took when on.
    pub fn time<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.enabled {
            return f();
        }
        let began = now_us();
        let out = f();
        let ns = ((now_us() - began).max(0.0) * 1e3) as u64;
        self.ns.fetch_add(ns, Ordering::Relaxed);
        out
    }

    /// Adds `seconds` measured by the caller, when on.
    pub fn add_seconds(&self, seconds: f64) {
        if self.enabled {
            self.ns
                .fetch_add((seconds.max(0.0) * 1e9) as u64, Ordering::Relaxed);
        }
    }

    /// Seconds spent so far (0 when not measured).
    pub fn seconds(&self) -> f64 {
        self.ns.load(Ordering::Relaxed) as f64 / 1e9
    }
}

/// A count for the summary, kept only when `PLB_SUMMARY` is set.
#[derive(Debug)]
pub struct SummaryCount {
    enabled: bool,
    n: AtomicU64,
}

impl SummaryCount {
    /// A count, on when `PLB_SUMMARY` is set.
    pub fn from_env() -> SummaryCount {
        SummaryCount {
            enabled: crate::stats::summary_requested(),
            n: AtomicU64::new(0),
        }
    }

    /// Adds `n` when on.
    pub fn add(&self, n: u64) {
        if self.enabled {
            self.n.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The count so far (0 when not kept).
    pub fn get(&self) -> u64 {
        self.n.load(Ordering::Relaxed)
    }
}
