//! The `PLB_GRAPH` file: the task graph a run executed, one CSV row per
//! task, written by the adapter as each task ends, read back as the
//! [`BoundGraph`] of each epoch for [`super::bound`].
//!
//! Columns: `task,worker,start_s,end_s,expected_ms,successors,outstanding`.
//!
//! * `task`: the task's address (hex). An address names a task only while
//!   it is alive, so a successor named in row `i` is the first row after
//!   `i` with that address (the successor is alive from then until its own
//!   row: no other task can hold the address in between).
//! * `worker`: the worker that ran it, as kind and StarPU id (`cpu3`,
//!   `cuda0`, `opencl1`).
//! * `start_s`, `end_s`: its execution, seconds on StarPU's clock.
//! * `expected_ms`: `worker=ms` for each worker of the context that can
//!   run it, separated by `;`: StarPU's predicted length from its
//!   performance models (the fastest implementation), which is what
//!   StarPU-SimGrid runs it for.
//! * `successors`: the addresses of the successors StarPU knew when it
//!   ended, separated by `;`.
//! * `pushed_s`: when StarPU pushed it to the policy (it became ready),
//!   seconds; empty when unknown.
//!
//! **Epochs.** Where no recorded edge leads from the rows before a cut to
//! those after it, and every task before it had ended by the time the
//! first task after it was pushed (nothing ran or was ready at that
//! moment: the application had not submitted the rest yet, as StarPU's
//! GEMM example, which waits for all its tasks after each iteration), the
//! rows after the cut form a new epoch. A bound of the run is then the sum
//! of its epochs' bounds: this takes the application's waits as given (an
//! application that merely submitted late would, in another run, be bound
//! only by the whole graph). A row whose push time is unknown allows no
//! cut before it.

use std::collections::HashMap;

use super::bound::{Bound, BoundGraph, BoundTask, lower_bound_of_epochs};
use super::offline::heft_makespan_of_epochs;

/// The header line.
pub const HEADER: &str = "task,worker,start_s,end_s,expected_ms,successors,pushed_s";

/// One row of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow {
    /// The task's address.
    pub task: usize,
    /// The worker that ran it (`cuda0`).
    pub worker: String,
    /// Execution start, seconds.
    pub start_s: f64,
    /// Execution end, seconds.
    pub end_s: f64,
    /// Predicted milliseconds on each worker able to run it.
    pub expected_ms: Vec<(String, f64)>,
    /// The successors' addresses.
    pub successors: Vec<usize>,
    /// When it was pushed to the policy, seconds, if known.
    pub pushed_s: Option<f64>,
}

impl RecordRow {
    /// The row as a CSV line (no newline).
    pub fn csv(&self) -> String {
        let expected: Vec<String> = self
            .expected_ms
            .iter()
            .map(|(w, ms)| format!("{w}={ms:.4}"))
            .collect();
        let successors: Vec<String> = self.successors.iter().map(|a| format!("{a:x}")).collect();
        format!(
            "{:x},{},{:.6},{:.6},{},{},{}",
            self.task,
            self.worker,
            self.start_s,
            self.end_s,
            expected.join(";"),
            successors.join(";"),
            self.pushed_s.map_or(String::new(), |p| format!("{p:.6}"))
        )
    }
}

/// A recorded graph, ready for the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The graph of each epoch, in order: kind `k` of
    /// [`BoundGraph::workers`] is `kinds[k]` in every one.
    pub epochs: Vec<BoundGraph>,
    /// The kinds' names (`cpu`, `cuda`...), in order of first appearance.
    pub kinds: Vec<String>,
    /// From the first start to the last end, milliseconds.
    pub span_ms: f64,
    /// Successors named that never ran (not recorded): dropped, which only
    /// weakens the bound.
    pub unresolved: usize,
}

/// What `plb bound` reports of a recorded run, each summed over its
/// epochs: the lower bound and offline HEFT's makespan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// The lower bound and the classical bounds it contains.
    pub bound: Bound,
    /// Offline HEFT's makespan, milliseconds.
    pub offline_heft_ms: f64,
}

impl Recorded {
    /// The run's [`Figures`], with `grid` thresholds for the bound.
    pub fn figures(&self, grid: usize) -> Result<Figures, String> {
        Ok(Figures {
            bound: lower_bound_of_epochs(&self.epochs, grid)?,
            offline_heft_ms: heft_makespan_of_epochs(&self.epochs)?,
        })
    }
}

/// The kind part of a worker name (`cuda` of `cuda0`).
fn kind_of(worker: &str) -> &str {
    worker.trim_end_matches(|c: char| c.is_ascii_digit())
}

fn address(field: &str, line: usize) -> Result<usize, String> {
    usize::from_str_radix(field.trim(), 16)
        .map_err(|_| format!("line {line}: {field:?} is not a task address (hex)"))
}

fn number(field: &str, what: &str, line: usize) -> Result<f64, String> {
    field
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("line {line}: {what} {field:?} is not a number"))
}

/// Parses one data line (`line` is its 1-based number, for messages).
fn parse_row(text: &str, line: usize) -> Result<RecordRow, String> {
    let fields: Vec<&str> = text.split(',').collect();
    if fields.len() != 7 {
        return Err(format!(
            "line {line}: {} fields, expected 7 ({HEADER})",
            fields.len()
        ));
    }
    let expected_ms = fields[4]
        .split(';')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (w, ms) = pair
                .split_once('=')
                .ok_or_else(|| format!("line {line}: {pair:?} is not worker=ms"))?;
            let ms = number(ms, "duration", line)?;
            if ms < 0.0 || kind_of(w).is_empty() {
                return Err(format!("line {line}: {pair:?} is not worker=ms"));
            }
            Ok((w.to_string(), ms))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if expected_ms.is_empty() {
        return Err(format!(
            "line {line}: the task has no StarPU prediction on any worker (its codelet has no \
             calibrated StarPU performance model: run the program with STARPU_CALIBRATE=1 \
             until it has one)"
        ));
    }
    let successors = fields[5]
        .split(';')
        .filter(|p| !p.is_empty())
        .map(|a| address(a, line))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(RecordRow {
        task: address(fields[0], line)?,
        worker: fields[1].to_string(),
        start_s: number(fields[2], "start", line)?,
        end_s: number(fields[3], "end", line)?,
        expected_ms,
        successors,
        pushed_s: match fields[6].trim() {
            "" => None,
            p => Some(number(p, "push time", line)?),
        },
    })
}

/// Reads a `PLB_GRAPH` file's text: the graph of each epoch, with each
/// task's duration per kind (its fastest worker of the kind) and the
/// workers per kind (those named in any row).
pub fn parse(text: &str) -> Result<Recorded, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == HEADER => {}
        _ => {
            return Err(format!(
                "not a PLB_GRAPH file (the header is not {HEADER:?})"
            ));
        }
    }
    let rows = lines
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_row(l, i + 1))
        .collect::<Result<Vec<_>, String>>()?;
    let mut kinds: Vec<String> = Vec::new();
    let mut workers: Vec<Vec<String>> = Vec::new();
    for row in &rows {
        for (w, _) in &row.expected_ms {
            let k = match kinds.iter().position(|k| k == kind_of(w)) {
                Some(k) => k,
                None => {
                    kinds.push(kind_of(w).to_string());
                    workers.push(Vec::new());
                    kinds.len() - 1
                }
            };
            if !workers[k].contains(w) {
                workers[k].push(w.clone());
            }
        }
    }
    // Successors by the next row with their address, scanning backwards.
    let mut next_with: HashMap<usize, usize> = HashMap::new();
    let mut unresolved = 0;
    let mut tasks: Vec<BoundTask> = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate().rev() {
        let successors: Vec<usize> = row
            .successors
            .iter()
            .filter_map(|a| {
                let s = next_with.get(a).copied();
                unresolved += usize::from(s.is_none());
                s
            })
            .collect();
        next_with.insert(row.task, i);
        let mut ms = vec![None::<f64>; kinds.len()];
        for (w, d) in &row.expected_ms {
            let k = kinds.iter().position(|k| k == kind_of(w)).unwrap_or(0);
            ms[k] = Some(ms[k].map_or(*d, |m: f64| m.min(*d)));
        }
        tasks.push(BoundTask { ms, successors });
    }
    tasks.reverse();
    // Epochs: a cut before row j when no edge leads from the rows before
    // it to the rows from j on, and the rows before it all ended by the
    // earliest push of the rows from j on.
    let mut earliest_push = vec![f64::NEG_INFINITY; rows.len() + 1];
    earliest_push[rows.len()] = f64::INFINITY;
    for (j, row) in rows.iter().enumerate().rev() {
        earliest_push[j] = row
            .pushed_s
            .map_or(f64::NEG_INFINITY, |p| p.min(earliest_push[j + 1]));
    }
    let mut epochs = Vec::new();
    let (mut first, mut ended, mut reach) = (0, f64::NEG_INFINITY, 0);
    for (i, row) in rows.iter().enumerate() {
        ended = ended.max(row.end_s);
        reach = tasks[i].successors.iter().copied().fold(reach, usize::max);
        if i + 1 == rows.len() || (reach <= i && ended <= earliest_push[i + 1]) {
            let end = i + 1;
            let part = tasks[first..end]
                .iter()
                .map(|t| BoundTask {
                    ms: t.ms.clone(),
                    successors: t.successors.iter().map(|&s| s - first).collect(),
                })
                .collect();
            epochs.push(BoundGraph {
                workers: workers.iter().map(Vec::len).collect(),
                tasks: part,
            });
            first = end;
        }
    }
    let start = rows.iter().map(|r| r.start_s).fold(f64::INFINITY, f64::min);
    let end = rows
        .iter()
        .map(|r| r.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(Recorded {
        epochs,
        kinds,
        span_ms: if rows.is_empty() {
            0.0
        } else {
            (end - start) * 1e3
        },
        unresolved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: usize, successors: &[usize], expected: &[(&str, f64)]) -> RecordRow {
        RecordRow {
            task,
            worker: "cpu0".into(),
            start_s: 0.0,
            end_s: 0.001,
            expected_ms: expected.iter().map(|(w, m)| (w.to_string(), *m)).collect(),
            successors: successors.to_vec(),
            pushed_s: None,
        }
    }

    fn file(rows: &[RecordRow]) -> String {
        let mut s = format!("{HEADER}\n");
        for r in rows {
            s.push_str(&r.csv());
            s.push('\n');
        }
        s
    }

    #[test]
    fn a_row_reads_back_as_written() {
        let r = RecordRow {
            task: 0x55d0_c2a0,
            worker: "cuda1".into(),
            start_s: 0.25,
            end_s: 0.5,
            expected_ms: vec![("cpu0".into(), 103.2), ("cuda1".into(), 46.5)],
            successors: vec![0x10, 0xff],
            pushed_s: Some(0.125),
        };
        assert_eq!(
            r.csv(),
            "55d0c2a0,cuda1,0.250000,0.500000,cpu0=103.2000;cuda1=46.5000,10;ff,0.125000"
        );
        assert_eq!(parse_row(&r.csv(), 2).unwrap(), r);
    }

    #[test]
    fn a_reused_address_names_the_next_task_that_holds_it() {
        // Task 0xa runs, then 0xb (successor 0xa: the next 0xa, a new task
        // at the freed address), then that 0xa; 0xc names a successor that
        // never ran.
        let text = file(&[
            row(0xa, &[0xb], &[("cpu0", 2.0), ("cpu1", 1.5), ("cuda0", 0.5)]),
            row(0xb, &[0xa], &[("cpu0", 3.0), ("cpu1", 3.0)]),
            row(0xa, &[], &[("cuda0", 1.0)]),
            row(0xc, &[0xdead], &[("cuda0", 1.0)]),
        ]);
        let r = parse(&text).unwrap();
        assert_eq!(r.kinds, vec!["cpu".to_string(), "cuda".to_string()]);
        assert_eq!(r.epochs.len(), 1);
        let g = &r.epochs[0];
        assert_eq!(g.workers, vec![2, 1]);
        assert_eq!(g.tasks[0].successors, vec![1]);
        assert_eq!(g.tasks[1].successors, vec![2]);
        assert_eq!(g.tasks[0].ms, vec![Some(1.5), Some(0.5)]);
        assert_eq!(g.tasks[1].ms, vec![Some(3.0), None]);
        assert_eq!(r.unresolved, 1);
        assert!((r.span_ms - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_push_after_everything_before_ended_starts_an_epoch() {
        // a -> b (pushed as a ended: an edge, no cut), then c -> d pushed
        // once b had ended; then e, pushed while d ran: no cut before e.
        let mut rows = vec![
            row(0xa, &[0xb], &[("cuda0", 1.0)]),
            row(0xb, &[], &[("cuda0", 1.0)]),
            row(0xc, &[0xd], &[("cuda0", 1.0)]),
            row(0xd, &[], &[("cuda0", 1.0)]),
            row(0xe, &[], &[("cuda0", 1.0)]),
        ];
        let times = [
            (0.0, 1.0, 0.0),
            (1.0, 2.0, 1.0),
            (2.5, 3.0, 2.5),
            (3.0, 4.0, 3.0),
            (4.0, 5.0, 3.5),
        ];
        for (r, (start, end, pushed)) in rows.iter_mut().zip(times) {
            (r.start_s, r.end_s, r.pushed_s) = (start, end, Some(pushed));
        }
        let r = parse(&file(&rows)).unwrap();
        let sizes: Vec<usize> = r.epochs.iter().map(|g| g.tasks.len()).collect();
        assert_eq!(sizes, vec![2, 3]);
        assert_eq!(r.epochs[1].tasks[0].successors, vec![1]);
        // An unknown push time allows no cut.
        rows[2].pushed_s = None;
        assert_eq!(parse(&file(&rows)).unwrap().epochs.len(), 1);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        assert!(parse("kind,source\n").unwrap_err().contains("header"));
        let bad = format!("{HEADER}\nzz,cpu0,0,1,cpu0=1,,1\n");
        assert!(parse(&bad).unwrap_err().contains("line 2"));
        let bad = format!("{HEADER}\na,cpu0,0,1,cpu0,,1\n");
        assert!(parse(&bad).unwrap_err().contains("worker=ms"));
        let bad = format!("{HEADER}\na,cpu0,0,1,,,1\n");
        assert!(parse(&bad).unwrap_err().contains("STARPU_CALIBRATE=1"));
    }
}
