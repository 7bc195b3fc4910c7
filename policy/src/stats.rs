//! Per-context counters kept by the adapter and the `PLB_SUMMARY` line.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one scheduling context, updated from StarPU's threads.
#[derive(Debug, Default)]
pub struct ContextStats {
    pushed: AtomicU64,
    popped: AtomicU64,
    executed: AtomicU64,
    workers: Mutex<BTreeSet<u32>>,
}

impl ContextStats {
    /// A task entered the policy through `push_task`.
    pub fn note_pushed(&self) {
        self.pushed.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker took a task from the policy through `pop_task`.
    pub fn note_popped(&self) {
        self.popped.fetch_add(1, Ordering::Relaxed);
    }

    /// A task finished (`post_exec_hook`).
    pub fn note_executed(&self) {
        self.executed.fetch_add(1, Ordering::Relaxed);
    }

    /// Workers joined the context.
    pub fn note_workers(&self, ids: impl IntoIterator<Item = u32>) {
        let mut set = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        set.extend(ids);
    }

    /// Tasks pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed.load(Ordering::Relaxed)
    }

    /// Tasks executed so far.
    pub fn executed(&self) -> u64 {
        self.executed.load(Ordering::Relaxed)
    }

    /// The one-line summary printed at deinit when `PLB_SUMMARY=1`.
    pub fn summary_line(&self, policy: &str, ctx: u32, left_queued: usize) -> String {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner()).len();
        format!(
            "plb: policy={policy} ctx={ctx} tasks={} executed={} workers={workers} popped={} left={left_queued}",
            self.pushed(),
            self.executed(),
            self.popped.load(Ordering::Relaxed),
        )
    }
}

/// Whether `PLB_SUMMARY` asks for the summary line.
pub fn summary_requested() -> bool {
    std::env::var("PLB_SUMMARY").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_reports_counts_and_distinct_workers() {
        let s = ContextStats::default();
        for _ in 0..3 {
            s.note_pushed();
        }
        s.note_popped();
        s.note_popped();
        s.note_executed();
        s.note_workers([0, 1]);
        s.note_workers([1, 2]);
        assert_eq!(
            s.summary_line("greedy", 4, 1),
            "plb: policy=greedy ctx=4 tasks=3 executed=1 workers=3 popped=2 left=1"
        );
    }
}
