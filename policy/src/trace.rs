//! `PLB_TRACE=<file.csv>`: one CSV row per executed task (task mode) or
//! block (divisible-load API), and one row per PU of every model solution,
//! which the experiment scripts plot.
//!
//! Columns: `kind,source,worker,start_s,end_s,units,predicted_s,detail`.
//!
//! | kind       | source       | worker   | start_s / end_s          | units | predicted_s           | detail      |
//! |------------|--------------|----------|--------------------------|-------|-----------------------|-------------|
//! | `task`     | policy name  | StarPU id| execution interval       | task size | policy's prediction | codelet name |
//! | `block`    | balancer     | StarPU id| interval (end − compute) | block length | balancer's prediction | block id |
//! | `solution` | balancer     | StarPU id| solve time (both)        | x_p   | predicted step time   | virtual step |
//!
//! Times are seconds on StarPU's clock (`starpu_timing_now`), which starts
//! at StarPU's initialisation (so they restart if the process initialises
//! StarPU again); an empty field is unknown. Rows are streamed through a buffer (memory stays bounded) and
//! the file is flushed at every context deinit and run end. At most
//! [`MAX_ROWS`] rows are written; later ones are counted and reported.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

use crate::starpu::{now_us, relaxed_lock};

/// The environment variable.
pub const ENV: &str = "PLB_TRACE";

/// Rows written at most (a 10-million-row file is about 600 MB).
pub const MAX_ROWS: u64 = 10_000_000;

const HEADER: &str = "kind,source,worker,start_s,end_s,units,predicted_s,detail";

/// One trace row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<'a> {
    /// `task`, `block` or `solution`.
    pub kind: &'a str,
    /// Policy or balancer name.
    pub source: &'a str,
    /// StarPU worker id.
    pub worker: i64,
    /// Start, seconds since the trace opened.
    pub start_s: f64,
    /// End, seconds since the trace opened.
    pub end_s: f64,
    /// Units (task size, block length or share).
    pub units: f64,
    /// Predicted duration, seconds.
    pub predicted_s: Option<f64>,
    /// Free text without commas or quotes (codelet name, block id, step).
    pub detail: &'a str,
}

impl Row<'_> {
    fn csv(&self) -> String {
        let detail: String = self
            .detail
            .chars()
            .map(|c| {
                if matches!(c, ',' | '"' | '\n' | '\r') {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let predicted = self
            .predicted_s
            .filter(|p| p.is_finite())
            .map_or(String::new(), |p| format!("{p:.6}"));
        format!(
            "{},{},{},{:.6},{:.6},{},{},{}",
            self.kind,
            self.source,
            self.worker,
            self.start_s,
            self.end_s,
            self.units,
            predicted,
            detail
        )
    }
}

/// A CSV file of rows streamed from any thread (`PLB_TRACE`'s, and
/// `PLB_GRAPH`'s: [`crate::graph_record`]).
pub struct Trace {
    /// The variable that named it (for messages).
    env: &'static str,
    out: Mutex<Sink>,
}

struct Sink {
    writer: BufWriter<File>,
    rows: u64,
    dropped: u64,
    failed: bool,
}

impl Trace {
    /// Creates (truncates) `path` and writes the trace's header.
    pub fn create(path: &str) -> std::io::Result<Trace> {
        Trace::create_with(ENV, path, HEADER)
    }

    /// Creates (truncates) `path`, named by variable `env`, and writes
    /// `header`.
    pub fn create_with(env: &'static str, path: &str, header: &str) -> std::io::Result<Trace> {
        let mut writer = BufWriter::new(File::create(path)?);
        writeln!(writer, "{header}")?;
        Ok(Trace {
            env,
            out: Mutex::new(Sink {
                writer,
                rows: 0,
                dropped: 0,
                failed: false,
            }),
        })
    }

    /// The trace time now: seconds on StarPU's clock.
    pub fn now(&self) -> f64 {
        now_us() / 1e6
    }

    /// Appends one row (dropped beyond [`MAX_ROWS`] or after a write error,
    /// which is reported once).
    pub fn write(&self, row: &Row<'_>) {
        self.write_line(&row.csv());
    }

    /// Appends one line formatted by the caller (no newline), as
    /// [`Trace::write`].
    pub fn write_line(&self, line: &str) {
        // Formatted before the lock; the lock is taken as StarPU requires
        // of code on a worker (relaxed: workers can still be woken).
        let mut s = relaxed_lock(&self.out);
        if s.failed {
            return;
        }
        if s.rows >= MAX_ROWS {
            s.dropped += 1;
            return;
        }
        if let Err(e) = writeln!(s.writer, "{line}") {
            eprintln!(
                "plb: error: writing the {} file failed: {e}; it stops",
                self.env
            );
            s.failed = true;
            return;
        }
        s.rows += 1;
    }

    /// Flushes buffered rows to the file (reporting rows dropped so far).
    pub fn flush(&self) {
        let mut s = relaxed_lock(&self.out);
        if s.dropped > 0 {
            eprintln!(
                "plb: warning: {}: {} rows beyond the {MAX_ROWS}-row limit were not written",
                self.env, s.dropped
            );
            s.dropped = 0;
        }
        if !s.failed
            && let Err(e) = s.writer.flush()
        {
            eprintln!(
                "plb: error: writing the {} file failed: {e}; it stops",
                self.env
            );
            s.failed = true;
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        relaxed_lock(&self.out).rows
    }
}

/// A CSV file named by an environment variable, opened once per process
/// and path.
pub struct NamedFile {
    env: &'static str,
    header: &'static str,
    open: Mutex<Option<(&'static Trace, String)>>,
}

impl NamedFile {
    /// The file `env` names, with `header`.
    pub const fn new(env: &'static str, header: &'static str) -> NamedFile {
        NamedFile {
            env,
            header,
            open: Mutex::new(None),
        }
    }

    /// Opens the file the variable names (a later call with the same value
    /// reuses it). `Ok(None)` when the variable is unset or empty; an error
    /// message when the file cannot be created.
    pub fn open_from_env(&self) -> Result<Option<&'static Trace>, String> {
        let env = self.env;
        let Some(path) = std::env::var(env).ok().filter(|p| !p.trim().is_empty()) else {
            return Ok(None);
        };
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, p)) = open.as_ref() {
            if *p == path {
                return Ok(Some(*t));
            }
            t.flush();
        }
        let file = Trace::create_with(env, &path, self.header).map_err(|e| {
            format!("{env}={path:?} cannot be created: {e} (expected a writable file path)")
        })?;
        // Leaked on purpose: rows may be written until the process exits,
        // from any thread; the file is flushed at every deinit and run end.
        let file: &'static Trace = Box::leak(Box::new(file));
        *open = Some((file, path));
        Ok(Some(file))
    }

    /// The open file, if the variable named one and it could be created.
    pub fn current(&self) -> Option<&'static Trace> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(t, _)| *t)
    }
}

static TRACE_FILE: NamedFile = NamedFile::new(ENV, HEADER);

/// Opens the file named by `PLB_TRACE` (once per process and path; a later
/// call with the same value reuses it). `Ok(None)` when the variable is
/// unset or empty; an error message when the file cannot be created.
pub fn open_from_env() -> Result<Option<&'static Trace>, String> {
    TRACE_FILE.open_from_env()
}

/// The open trace, if `PLB_TRACE` named one and it could be created.
pub fn current() -> Option<&'static Trace> {
    TRACE_FILE.current()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_csv_with_empty_unknowns_and_clean_detail() {
        let r = Row {
            kind: "task",
            source: "plb-hac",
            worker: 1,
            start_s: 0.5,
            end_s: 0.75,
            units: 4096.0,
            predicted_s: None,
            detail: "my,codelet\"x",
        };
        assert_eq!(
            r.csv(),
            "task,plb-hac,1,0.500000,0.750000,4096,,my_codelet_x"
        );
        let r = Row {
            predicted_s: Some(0.25),
            ..r
        };
        assert!(r.csv().contains(",4096,0.250000,"));
    }

    #[test]
    fn file_has_header_and_rows_after_flush() {
        let path = std::env::temp_dir().join(format!("plb-trace-test-{}.csv", std::process::id()));
        let t = Trace::create(path.to_str().unwrap()).unwrap();
        for i in 0..3 {
            t.write(&Row {
                kind: "block",
                source: "greedy",
                worker: i,
                start_s: 0.0,
                end_s: 1.0,
                units: 10.0,
                predicted_s: None,
                detail: "",
            });
        }
        t.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(lines.len(), 4);
        assert_eq!(t.rows(), 3);
        assert_eq!(lines[3], "block,greedy,2,0.000000,1.000000,10,,");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn unwritable_path_is_an_error() {
        assert!(Trace::create("/nonexistent-dir/x/trace.csv").is_err());
    }
}
