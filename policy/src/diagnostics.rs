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

/// Writes `line` and a newline to stderr in one `write(2)` call, so lines
/// of processes sharing the terminal (MPI ranks) never interleave.
pub fn write_stderr_line(line: &str) {
    use std::io::Write;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    let _ = std::io::stderr().lock().write_all(buf.as_bytes());
}
