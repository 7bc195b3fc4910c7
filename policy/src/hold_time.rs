//! How long a policy holds its push/pop lock, measured only when
//! `PLB_SUMMARY` asks for it (two reads of StarPU's clock per critical
//! section), reported as `lock_us` in the summary line; and how long it
//! spends fitting and placing ([`WorkTimer`], `solve_us`).

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
/// batch placements), always measured (the work is rare and long).
#[derive(Debug, Default)]
pub struct WorkTimer(AtomicU64);

impl WorkTimer {
    /// Runs `f`, adding the time it took.
    pub fn time<R>(&self, f: impl FnOnce() -> R) -> R {
        let began = now_us();
        let out = f();
        let ns = ((now_us() - began).max(0.0) * 1e3) as u64;
        self.0.fetch_add(ns, Ordering::Relaxed);
        out
    }

    /// Seconds spent so far.
    pub fn seconds(&self) -> f64 {
        self.0.load(Ordering::Relaxed) as f64 / 1e9
    }
}
