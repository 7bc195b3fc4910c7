//! `PLB_GRAPH=<file.csv>`: the task graph a run executes, one row per task
//! as it ends ([`plb_core::dag::record`] says the columns), for `plb
//! bound`'s lower bound on the makespan. Written by every policy of ours
//! in task mode; rows are streamed and capped as `PLB_TRACE`'s.

use plb_core::dag::record::{HEADER, RecordRow};

use crate::starpu::{SchedCtx, TaskRef, WorkerId, worker_label};
use crate::trace::{NamedFile, Trace};

/// The environment variable.
pub const ENV: &str = "PLB_GRAPH";

static FILE: NamedFile = NamedFile::new(ENV, HEADER);

/// Opens the file `PLB_GRAPH` names (see [`NamedFile::open_from_env`]).
pub fn open_from_env() -> Result<Option<&'static Trace>, String> {
    FILE.open_from_env()
}

/// The open file, if `PLB_GRAPH` named one.
pub fn current() -> Option<&'static Trace> {
    FILE.current()
}

/// Writes `task`'s row: pushed at `pushed_s`, it ran on `worker` from
/// `start_s` to `end_s`; StarPU's prediction on each of `members` (the
/// context's workers) and its successors are asked now (its
/// post-execution hook: StarPU has not yet released its successors).
pub fn record(
    file: &Trace,
    task: TaskRef<'_>,
    ctx: SchedCtx,
    worker: WorkerId,
    members: &[WorkerId],
    pushed_s: Option<f64>,
    (start_s, end_s): (f64, f64),
) {
    let expected_ms = members
        .iter()
        .filter_map(|&w| Some((worker_label(w), task.expected_ms_on(w, ctx)?)))
        .collect();
    let row = RecordRow {
        task: task.addr(),
        worker: worker_label(worker),
        start_s,
        end_s,
        expected_ms,
        successors: task.scheduled_successors(),
        pushed_s,
    };
    file.write_line(&row.csv());
}
