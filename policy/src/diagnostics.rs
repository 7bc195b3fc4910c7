//! Process-wide counters of things that went wrong, readable by tests and
//! tools.

use std::sync::atomic::{AtomicU64, Ordering};

static ABANDONED: AtomicU64 = AtomicU64::new(0);

/// Records tasks found still queued when a context was deinitialised.
pub fn note_abandoned(n: usize) {
    ABANDONED.fetch_add(n as u64, Ordering::Relaxed);
}

/// Tasks found still queued at deinit since the process started.
pub fn abandoned_tasks() -> u64 {
    ABANDONED.load(Ordering::Relaxed)
}
