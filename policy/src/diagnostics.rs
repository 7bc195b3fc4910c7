//! Process-wide counters of things that went wrong, readable by tests and
//! tools, and one-call stderr lines.

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

/// Writes `line` and a newline to stderr in one call, so that the lines
/// of processes sharing a terminal or a pipe (MPI ranks) do not interleave
/// (`eprintln!` may write a formatted line in pieces).
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
