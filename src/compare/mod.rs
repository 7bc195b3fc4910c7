//! `plb compare`: which policy for *my* program? Runs an unmodified StarPU
//! program under our policies and StarPU's, fairly, and says which is
//! fastest and how sure that is.
//!
//! 1. **Which StarPU** the program links (`ldd`): 1.3 (our library
//!    preloaded) or one of this project's 1.4.10 builds (native, SimGrid:
//!    `STARPU_SCHED_LIB`); the matching build of our library, or a clear
//!    refusal ([`detect`]).
//! 2. **A reference run under `eager`** (not counted): the program must
//!    succeed, the timer regex must match its output, and its standard
//!    output is what `--check-output` compares the others with.
//! 3. **Calibration** (not counted): when a model-based StarPU policy is
//!    compared, `--calibration-runs` runs under `dmda` with
//!    `STARPU_CALIBRATE=1` fill the history models of one private
//!    `STARPU_HOME` that every StarPU policy then reads.
//! 4. **One warm-up run per policy** (not counted, reported as its first
//!    run): ours learn their models (each in a private `PLB_MODEL_DIR`,
//!    empty before: the cold start), heteroprio calibrates.
//! 5. **Repetitions interleaved** (`--reps`): repetition `r` runs the
//!    policies in the order rotated by `r`.
//!
//! Every run is checked ([`check`]); a failed one is flagged and never
//! counted in a median. Our policy's summary line must account for every
//! task; a program whose tasks our policy never saw (it schedules its own
//! contexts with StarPU's policies) is reported as such and not ranked.
//! Output: a table and a one-line recommendation on stdout, progress on
//! stderr, `runs.csv`, `summary.csv` and a self-contained `report.html`
//! (inline SVG plots) in `--out`.

mod detect;
mod report;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use regex::Regex;

use crate::cli::{Failure, positive, positive_seconds};
pub use crate::simgrid::run::WorkerStat;
use crate::simgrid::run::{parse, run_with_timeout};
use detect::Starpu;
use starpu_plb::catalog;

/// The file that marks `OUT/runs` as made by `plb compare` (and so safe
/// to clear).
const RUNS_MARKER: &str = ".plb-compare-runs";

/// StarPU's policies compared by default: its usual candidates.
const STARPU_DEFAULT: [&str; 7] = [
    "eager",
    "lws",
    "dmda",
    "dmdar",
    "dmdas",
    "modular-heft-prio",
    "heteroprio",
];

/// `plb compare`.
#[derive(Args)]
#[command(
    after_help = "Example: plb compare --reps 5 --time-regex '^960\\s+([0-9.]+)' \
    -- /usr/lib/x86_64-linux-gnu/starpu/examples/cholesky_implicit -size 960 -nblocks 8"
)]
pub struct Command {
    /// Policies to compare, comma-separated: ours (`plb policies`) and
    /// StarPU's [default: all of ours, and eager, lws, dmda, dmdar, dmdas,
    /// modular-heft-prio, heteroprio]
    #[arg(long, value_name = "A,B,..", value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// Measured runs per policy, interleaved
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = positive::<usize>())]
    reps: usize,
    /// The program's own time: a regular expression whose first group (or
    /// whole match) is a number, searched in stdout then stderr, last
    /// match kept [default: wall time of the whole process, in seconds]
    #[arg(long, value_name = "REGEX")]
    time_regex: Option<String>,
    /// Flag runs whose standard output differs from eager's (lines the
    /// timer regex matches, and StarPU's own `[starpu]` lines, left out)
    #[arg(long)]
    check_output: bool,
    /// Heterogeneity emulation (`PLB_EMULATE`) for every policy alike
    #[arg(long, value_name = "SPEC")]
    emulate: Option<String>,
    /// SimGrid-built programs: the sampled machine to simulate
    /// (`STARPU_HOSTNAME`, with the prefix's sampled models)
    #[arg(long, value_name = "NAME")]
    machine: Option<String>,
    /// Uncounted runs under dmda with STARPU_CALIBRATE=1 before StarPU's
    /// model-based policies are measured
    #[arg(long, value_name = "N", default_value_t = 3)]
    calibration_runs: usize,
    /// Seconds after which a run is killed (and flagged)
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0, value_parser = positive_seconds)]
    timeout: f64,
    /// Our library to load [default: the build that matches the program's StarPU]
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// Where runs.csv, summary.csv, report.html and the runs' files go
    /// [default: plb-compare-<program>]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The program and its arguments, after `--`
    #[arg(last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

/// Why a run is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// eager's first run: output and timer reference.
    Reference,
    /// dmda with STARPU_CALIBRATE=1.
    Calibration,
    /// The policy's first run (ours: empty models).
    WarmUp,
    /// Counted repetition `r` (from 1).
    Measured(usize),
}

impl RunRecord {
    /// `exit N`, or why there is no exit status.
    pub fn status(&self) -> String {
        match &self.exit {
            Ok(c) => format!("exit {c}"),
            Err(e) => e.clone(),
        }
    }
}

impl Phase {
    fn label(self) -> String {
        match self {
            Phase::Reference => "reference".into(),
            Phase::Calibration => "calibration".into(),
            Phase::WarmUp => "warm-up".into(),
            Phase::Measured(r) => format!("rep {r}"),
        }
    }
}

/// One run, checked.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub policy: String,
    pub phase: Phase,
    /// The program's time (regex) or the wall time in seconds.
    pub time: Option<f64>,
    pub wall_s: f64,
    /// Exit status, or why there is none (killed, timed out, not started).
    pub exit: Result<i32, String>,
    pub gb: Option<f64>,
    pub executed: Option<u64>,
    pub workers: Vec<WorkerStat>,
    /// Tasks our policy received (its summary lines), for ours.
    pub ours_tasks: Option<u64>,
    /// Ours saw none of the program's tasks.
    pub not_ours: bool,
    /// Why the run does not count, if it does not.
    pub problem: Option<String>,
    /// The last line of its standard error (without SimGrid's notices).
    pub last_error_line: String,
}

/// Everything a run needs that does not change between runs.
struct Plan {
    program: PathBuf,
    args: Vec<OsString>,
    starpu: Starpu,
    library: PathBuf,
    timer: Option<Regex>,
    check_output: bool,
    emulate: Option<String>,
    /// SimGrid: (machine, private copy of the sampled models).
    simulated: Option<(String, PathBuf)>,
    scratch: PathBuf,
    timeout: Duration,
}

/// Whether a StarPU policy reads history-based performance models.
fn model_based(name: &str) -> bool {
    name.starts_with("dm") || name.contains("heft") || name.contains("heteroprio")
}

impl Command {
    pub fn run(self) -> Result<ExitCode, Failure> {
        let (plan, policies, out) = self.plan()?;
        let starpu_models = policies
            .iter()
            .any(|p| catalog::find(p).is_none() && model_based(p));
        let label = plan.starpu.label();
        eprintln!("compare: {} under {label}", plan.command_line());
        eprintln!("compare: our library {}", plan.library.display());
        let mut records: Vec<RunRecord> = Vec::new();

        // The reference.
        let (reference, stdout) = plan.run("eager", Phase::Reference, None);
        if let Some(problem) = &reference.problem {
            let bad_timer =
                plan.timer.is_some() && reference.time.is_none() && reference.exit == Ok(0);
            let msg = format!(
                "the program under eager (the reference run): {problem} (last line of its stderr: {})",
                reference.last_error_line
            );
            return Err(if bad_timer {
                Failure::setup(msg)
            } else {
                Failure::from(msg)
            });
        }
        let expected_output = plan.check_output.then(|| plan.comparable(&stdout));
        records.push(reference);

        let calibration = if starpu_models {
            self.calibration_runs
        } else {
            0
        };
        let total = calibration + policies.len() * (1 + self.reps);
        let mut done = 0;
        let mut progress = |r: &RunRecord| {
            done += 1;
            let what = match (&r.problem, r.time) {
                (Some(p), _) => format!("FLAGGED: {p}"),
                (None, Some(t)) => format!("{t:.4}"),
                (None, None) => "-".into(),
            };
            eprintln!(
                "compare: [{done}/{total}] {} {}: {what}",
                r.policy,
                r.phase.label()
            );
        };
        for _ in 0..calibration {
            let (r, _) = plan.run("dmda", Phase::Calibration, None);
            progress(&r);
            records.push(r);
        }
        for p in &policies {
            let (r, _) = plan.run(p, Phase::WarmUp, expected_output.as_deref());
            progress(&r);
            records.push(r);
        }
        for rep in 0..self.reps {
            for k in 0..policies.len() {
                let p = &policies[(k + rep) % policies.len()];
                let (r, _) = plan.run(p, Phase::Measured(rep + 1), expected_output.as_deref());
                progress(&r);
                records.push(r);
            }
        }

        let settings = report::Settings {
            command: plan.command_line(),
            starpu: label,
            library: plan.library.display().to_string(),
            timer: plan.timer.as_ref().map_or_else(
                || "wall time of the whole process, s".to_string(),
                |r| format!("the program's own, regex {}", r.as_str()),
            ),
            calibration: if calibration > 0 {
                format!(
                    "{calibration} run(s) under dmda with STARPU_CALIBRATE=1, one private STARPU_HOME for every StarPU policy"
                )
            } else {
                "none (no model-based StarPU policy compared)".into()
            },
            learning: "one uncounted warm-up run per policy; ours start it with no model \
                       (a private PLB_MODEL_DIR each): its time is their cold start"
                .into(),
            reps: self.reps,
            emulate: plan.emulate.clone(),
            simulated: plan.simulated.as_ref().map(|(m, _)| m.clone()),
        };
        let summary = report::summarise(&policies, &records);
        print!("{}", report::table(&settings, &summary));
        report::write(&out, &settings, &records, &summary)
            .map_err(|e| format!("writing the report in {}: {e}", out.display()))?;
        println!(
            "compare: {} runs; runs.csv, summary.csv and report.html in {}",
            records.len(),
            out.display()
        );
        let flagged = records.iter().filter(|r| r.problem.is_some()).count();
        Ok(if flagged == 0 {
            ExitCode::SUCCESS
        } else {
            eprintln!("compare: {flagged} run(s) flagged (see the table and runs.csv)");
            ExitCode::FAILURE
        })
    }

    /// Checks the command line and the program; everything wrong here is
    /// one line and exit status 2.
    fn plan(&self) -> Result<(Plan, Vec<String>, PathBuf), Failure> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(Failure::setup(
                "plb compare needs a program after -- (e.g. plb compare -- ./my_app args)",
            ));
        };
        let program = resolve_program(Path::new(program)).map_err(Failure::setup)?;
        let starpu = detect::starpu_of(&program).map_err(Failure::setup)?;
        let library =
            detect::library_for(&starpu, self.library.as_deref()).map_err(Failure::setup)?;
        let timer = self
            .time_regex
            .as_deref()
            .map(|r| {
                Regex::new(&format!("(?m){r}")).map_err(|e| {
                    let e = e.to_string();
                    let why = e.lines().last().unwrap_or("").trim_start_matches("error: ");
                    Failure::setup(format!("--time-regex '{r}': {why}"))
                })
            })
            .transpose()?;
        if starpu.simgrid && timer.is_none() {
            return Err(Failure::setup(
                "a SimGrid program's wall time is not its simulated time: give --time-regex \
                 matching the time the program prints",
            ));
        }
        let policies = self.policies()?;
        // Checked before anything is written: a refused request leaves
        // nothing behind.
        let machine = match (&self.machine, starpu.simgrid) {
            (Some(_), false) => {
                return Err(Failure::setup(
                    "--machine is for SimGrid-built programs; this one runs on real workers",
                ));
            }
            (None, true) => {
                return Err(Failure::setup(format!(
                    "a SimGrid program needs --machine NAME (sampled machines: {})",
                    crate::simgrid::report::sampled_machines(&samples_of(&starpu)).join(", ")
                )));
            }
            (Some(m), true) => {
                let samples = samples_of(&starpu);
                if !samples
                    .join("bus")
                    .join(format!("{m}.platform.xml"))
                    .is_file()
                {
                    return Err(Failure::setup(format!(
                        "--machine {m}: not sampled in {} (sampled: {})",
                        samples.display(),
                        crate::simgrid::report::sampled_machines(&samples).join(", ")
                    )));
                }
                Some((m.clone(), samples))
            }
            (None, false) => None,
        };
        let stem = program
            .file_name()
            .map_or_else(|| "program".into(), |n| n.to_string_lossy().into_owned());
        let out = self
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("plb-compare-{stem}")));
        // The runs' directory is cleared before use: only when an earlier
        // `plb compare` made it (its marker file), never a user's own.
        let scratch = out.join("runs");
        let marker = scratch.join(RUNS_MARKER);
        if scratch.exists() {
            if !marker.is_file() {
                return Err(Failure::setup(format!(
                    "{} exists and was not made by plb compare: choose another --out",
                    scratch.display()
                )));
            }
            std::fs::remove_dir_all(&scratch)
                .map_err(|e| format!("clearing {}: {e}", scratch.display()))?;
        }
        std::fs::create_dir_all(scratch.join("starpu-home"))
            .and_then(|()| {
                std::fs::write(&marker, "made by plb compare; cleared by its next run\n")
            })
            .map_err(|e| format!("creating {}: {e}", scratch.display()))?;
        let scratch = std::path::absolute(&scratch).unwrap_or(scratch);
        let simulated = match machine {
            Some((m, samples)) => {
                let copy = scratch.join("sampling");
                crate::simgrid::copy_dir(&samples, &copy)
                    .map_err(|e| format!("copying {}: {e}", samples.display()))?;
                Some((m, copy))
            }
            None => None,
        };
        let plan = Plan {
            program,
            args: args.to_vec(),
            starpu,
            library,
            timer,
            check_output: self.check_output,
            emulate: self.emulate.clone(),
            simulated,
            scratch,
            timeout: Duration::from_secs_f64(self.timeout),
        };
        Ok((plan, policies, out))
    }

    /// The policies to compare, checked: ours or names StarPU lists; eager
    /// first (the reference every ratio's runs share).
    fn policies(&self) -> Result<Vec<String>, Failure> {
        let mut names: Vec<String> = match &self.policies {
            Some(list) => list
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            None => STARPU_DEFAULT
                .iter()
                .map(|s| s.to_string())
                .chain(catalog::policies().iter().map(|p| p.name().to_string()))
                .collect(),
        };
        if names.is_empty() {
            return Err(Failure::setup("--policies names no policy"));
        }
        for n in &names {
            if catalog::find(n).is_none() && !catalog::STARPU_POLICY_NAMES.contains(&n.as_str()) {
                return Err(Failure::setup(format!(
                    "unknown policy '{n}': neither ours ({}) nor one StarPU lists ({})",
                    catalog::names(),
                    catalog::STARPU_POLICY_NAMES.join(", ")
                )));
            }
        }
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        Ok(names)
    }
}

/// The sampled models of a SimGrid prefix (`<prefix>/lib/libstarpu...`).
fn samples_of(starpu: &Starpu) -> PathBuf {
    starpu
        .lib
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"))
        .join("share/starpu/perfmodels/sampling")
}

/// `program` as a path to an executable file (looked up in `PATH` when
/// it has no slash).
fn resolve_program(program: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return if executable(program) {
            Ok(std::path::absolute(program).unwrap_or_else(|_| program.to_path_buf()))
        } else {
            Err(format!("{}: no such executable file", program.display()))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| format!("{}: not found in PATH", program.display()))
}

impl Plan {
    fn command_line(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The standard output `--check-output` compares: without the lines
    /// the timer matches nor StarPU's own messages.
    fn comparable(&self, stdout: &str) -> String {
        stdout
            .lines()
            .filter(|l| !l.starts_with("[starpu]"))
            .filter(|l| self.timer.as_ref().is_none_or(|t| !t.is_match(l)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs the program once under `policy`; returns the checked record
    /// and its standard output.
    fn run(&self, policy: &str, phase: Phase, expected: Option<&str>) -> (RunRecord, String) {
        let ours = catalog::find(policy).is_some();
        let mut cmd = Process::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, _) in std::env::vars_os() {
            let n = name.to_string_lossy();
            let ours_var = n.starts_with("PLB_") && n != "PLB_LOG";
            let settings = [
                "STARPU_SCHED",
                "STARPU_SCHED_LIB",
                "STARPU_HOME",
                "STARPU_CALIBRATE",
                "STARPU_BUS_STATS",
                "STARPU_WORKER_STATS",
                "STARPU_HOSTNAME",
                "STARPU_PERF_MODEL_DIR",
            ];
            if ours_var || settings.contains(&n.as_ref()) {
                cmd.env_remove(&name);
            }
        }
        cmd.env("STARPU_SCHED", policy)
            .env("STARPU_HOME", self.scratch.join("starpu-home"))
            .env("STARPU_BUS_STATS", "1")
            .env("STARPU_WORKER_STATS", "1");
        if phase == Phase::Calibration {
            cmd.env("STARPU_CALIBRATE", "1");
        }
        if let Some((machine, samples)) = &self.simulated {
            cmd.env("STARPU_HOSTNAME", machine)
                .env("STARPU_PERF_MODEL_DIR", samples);
        }
        if ours || self.emulate.is_some() {
            crate::launch::load_library(&mut cmd, &self.library, self.starpu.preloads());
        }
        if ours {
            cmd.env("PLB_SUMMARY", "1").env(
                "PLB_MODEL_DIR",
                self.scratch.join(format!("models-{policy}")),
            );
        }
        if let Some(spec) = &self.emulate {
            cmd.env("PLB_EMULATE", spec);
        }
        let start = Instant::now();
        let (status, stdout, stderr) = run_with_timeout(cmd, self.timeout);
        let wall_s = start.elapsed().as_secs_f64();
        let parsed = parse(&stdout, &stderr);
        let time = match &self.timer {
            Some(t) => find_time(t, &stdout).or_else(|| find_time(t, &stderr)),
            None => Some(wall_s),
        };
        let executed = parsed.executed;
        let ours_tasks = parsed.ours.map(|(t, _, _)| t);
        let mut record = RunRecord {
            policy: policy.to_string(),
            phase,
            time,
            wall_s,
            exit: status,
            gb: parsed.gib,
            executed,
            workers: parsed.workers.clone(),
            ours_tasks,
            not_ours: ours && ours_tasks == Some(0) && executed.is_some_and(|e| e > 0),
            problem: None,
            last_error_line: parsed
                .stderr_tail
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string(),
        };
        record.problem = check(
            &record,
            ours,
            &parsed,
            self.emulate.is_some() && !stderr.contains("EMULATION ACTIVE"),
            expected.is_some_and(|e| self.comparable(&stdout) != e),
            self.timer.is_some(),
        );
        if record.problem.is_some() {
            let log = self.scratch.join(format!(
                "{policy}-{}.stderr",
                phase.label().replace(' ', "-")
            ));
            let _ = std::fs::write(&log, &stderr);
        }
        (record, stdout)
    }
}

/// The last match of `timer` in `text`, as a number (its first group, or
/// the whole match).
fn find_time(timer: &Regex, text: &str) -> Option<f64> {
    timer
        .captures_iter(text)
        .filter_map(|c| c.get(1).or_else(|| c.get(0)))
        .filter_map(|m| m.as_str().trim().parse::<f64>().ok())
        .filter(|t| t.is_finite())
        .last()
}

/// Why a run does not count, if it does not.
fn check(
    r: &RunRecord,
    ours: bool,
    parsed: &crate::simgrid::run::Outcome,
    emulation_missing: bool,
    output_differs: bool,
    timed_by_regex: bool,
) -> Option<String> {
    match &r.exit {
        Ok(0) => {}
        Ok(c) => return Some(format!("exit {c}")),
        Err(e) => return Some(e.clone()),
    }
    if let Some(e) = &parsed.plb_error {
        return Some(format!("our library reported an error: {e}"));
    }
    if ours {
        let Some((tasks, popped, left)) = parsed.ours else {
            return Some("no plb summary line: our policy was not loaded".into());
        };
        if left != 0 || popped != tasks {
            return Some(format!(
                "our summary lost tasks: tasks={tasks} popped={popped} left={left}"
            ));
        }
    }
    if emulation_missing {
        return Some("the emulation was not applied (no EMULATION ACTIVE line)".into());
    }
    if r.time.is_none() {
        return Some(if timed_by_regex {
            "the timer regex matched nothing".into()
        } else {
            "no time".into()
        });
    }
    if output_differs {
        return Some("standard output differs from eager's".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_keeps_the_last_match_and_its_first_group() {
        let t = Regex::new("(?m)^time: ([0-9.]+) ms").unwrap();
        assert_eq!(find_time(&t, "time: 3 ms\nx\ntime: 4.5 ms\n"), Some(4.5));
        assert_eq!(find_time(&t, "nothing"), None);
        let whole = Regex::new("[0-9]+").unwrap();
        assert_eq!(find_time(&whole, "a 12 b 7"), Some(7.0));
    }

    #[test]
    fn model_based_policies_are_told_apart() {
        for p in [
            "dmda",
            "dmdas",
            "modular-heft-prio",
            "heteroprio",
            "modular-heteroprio",
        ] {
            assert!(model_based(p), "{p}");
        }
        for p in ["eager", "lws", "ws", "prio", "random"] {
            assert!(!model_based(p), "{p}");
        }
    }
}
