//! Compatibility suite: every StarPU example program listed in
//! `tests/compat-cases.tsv`, run unmodified under StarPU's own `eager` and
//! under each of our policies (`STARPU_SCHED=<ours> PLB_SUMMARY=1`), in two
//! worker configurations, against the StarPU this test was built for
//! (`starpu_sys::STARPU_SERIES`): Debian's 1.3.10, whose examples are in
//! `/usr/lib/x86_64-linux-gnu/starpu/examples` and which loads our library
//! by `LD_PRELOAD`, or the 1.4.10 build of `scripts/starpu14.sh`
//! (`<prefix>/lib/starpu/examples`, loaded by `STARPU_SCHED_LIB`, the 1.4
//! way; build with `PKG_CONFIG_PATH` at that prefix, see
//! `docs/starpu14.md`). The data file has a pair of columns per series.
//! The worker configurations:
//!
//! * `cpu`: StarPU's CPU workers only (the default environment on a machine
//!   without GPUs; CUDA and OpenCL are switched off explicitly so that a GPU
//!   elsewhere does not change the cases);
//! * `opencl`: `STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1 STARPU_NOPENCL=1`, one
//!   CPU worker plus one PoCL OpenCL worker with its own memory node, so that
//!   tasks only some workers can run and data transfers are exercised.
//!
//! A case passes under one of our policies when its exit status equals
//! eager's (which must be 0: a case failing under eager belongs in the data
//! file as "skip") and its stderr holds a summary line of that policy whose
//! counts are consistent (see [`check_ours`]). A case that fails is run
//! twice more under the same policy: passing both makes it FLAKY (counted
//! apart, the suite still passes), failing either keeps it a FAIL. Every
//! FAIL and FLAKY case's lines (with the first failed run's reason, stderr
//! tail and a command reproducing it) are printed again at the end.
//!
//! The test needs the release library: run
//! `cargo build --release && cargo test --release --test compat`.
//! Positional arguments (`cargo test --release --test compat -- sched_ctx`)
//! keep only the programs whose name contains one of them. The environment
//! variable `PLB_COMPAT_EXAMPLES` overrides the examples directory, and
//! `PLB_COMPAT_KEEP=1` keeps the temporary directory (every run's stdout and
//! stderr) for inspection.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use starpu_plb::catalog::policies;
use starpu_sys as sys;

/// Where StarPU installs its example programs (Debian's starpu-examples for
/// 1.3, `make install` of a source build for 1.4).
fn default_examples() -> PathBuf {
    Path::new(sys::STARPU_LIBDIR).join("starpu/examples")
}
/// The data file listing the cases.
const CASES_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat-cases.tsv");
/// Number of fields of a data line.
const FIELDS: usize = 9;
/// The StarPU series of the data file's column pairs, in column order.
const SERIES: [&str; 2] = ["1.3", "1.4"];

/// Index of the column pair of the StarPU this test was built for.
fn series_index() -> usize {
    SERIES
        .iter()
        .position(|s| *s == sys::STARPU_SERIES)
        .unwrap_or(0)
}
/// Every run is killed after this long.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs of a failed (program, policy) pair: passing all of them makes it
/// FLAKY instead of FAIL.
const RERUNS: usize = 2;
/// Cases run concurrently (the reference machine has 2 cores).
const THREADS: usize = 2;
/// Lines of a failing run's stderr that are printed.
const TAIL_LINES: usize = 20;

// ---------------------------------------------------------------------------
// Configurations

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Config {
    Cpu,
    Opencl,
}

impl Config {
    const ALL: [Config; 2] = [Config::Cpu, Config::Opencl];

    fn name(self) -> &'static str {
        match self {
            Config::Cpu => "cpu",
            Config::Opencl => "opencl",
        }
    }

    /// The data file's column for this configuration under the StarPU this
    /// test was built for: "cpu" and "opencl" for 1.3, "cpu-1.4" and
    /// "opencl-1.4" for 1.4.
    fn column(self) -> String {
        match series_index() {
            0 => self.name().to_string(),
            i => format!("{}-{}", self.name(), SERIES[i]),
        }
    }

    /// Index of that column among the data file's run/skip columns.
    fn column_index(self) -> usize {
        series_index() * Config::ALL.len() + self as usize
    }

    /// The environment that selects the configuration's workers.
    fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Config::Cpu => &[("STARPU_NCUDA", "0"), ("STARPU_NOPENCL", "0")],
            Config::Opencl => &[
                ("STARPU_NCUDA", "0"),
                ("STARPU_OPENCL_ON_CPUS", "1"),
                ("STARPU_NCPU", "1"),
                ("STARPU_NOPENCL", "1"),
            ],
        }
    }
}

// ---------------------------------------------------------------------------
// The data file

/// A run/skip column's value for one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Run,
    Skip,
    /// The program does not exist in that StarPU series ("-").
    Absent,
}

#[derive(Debug)]
struct Case {
    program: String,
    /// Indexed by [`Config::column_index`].
    runs: [Plan; 4],
    min_tasks: u64,
    args: Vec<String>,
    env: Vec<(String, String)>,
    note: String,
}

impl Case {
    fn plan_in(&self, config: Config) -> Plan {
        self.runs[config.column_index()]
    }
}

/// The part of a note that explains a skip in `config`: its "; "-separated
/// parts that start with "<column>:" (or "<series>:" for 1.4), or the whole
/// note when none does.
fn reason_for(note: &str, config: Config) -> String {
    let column = format!("{}:", config.column());
    let series = format!("{}:", sys::STARPU_SERIES);
    let parts: Vec<&str> = note
        .split("; ")
        .filter(|p| p.starts_with(&column) || (series_index() > 0 && p.starts_with(&series)))
        .collect();
    if parts.is_empty() {
        note.to_string()
    } else {
        parts.join("; ")
    }
}

fn dash_is_empty(field: &str) -> &str {
    if field == "-" { "" } else { field }
}

fn parse_cases(text: &str) -> Result<Vec<Case>, String> {
    let mut cases: Vec<Case> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{CASES_FILE}:{}", index + 1);
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != FIELDS {
            return Err(format!(
                "{at}: expected {FIELDS} tab-separated fields, found {}",
                fields.len()
            ));
        }
        let program = fields[0].to_string();
        let plan = |value: &str, column: &str| match value {
            "run" => Ok(Plan::Run),
            "skip" => Ok(Plan::Skip),
            "-" => Ok(Plan::Absent),
            other => Err(format!(
                "{at}: column {column} must be run, skip or -, not {other:?}"
            )),
        };
        let runs = [
            plan(fields[1], "cpu")?,
            plan(fields[2], "opencl")?,
            plan(fields[3], "cpu-1.4")?,
            plan(fields[4], "opencl-1.4")?,
        ];
        let min_tasks = fields[5]
            .parse()
            .map_err(|_| format!("{at}: min_tasks {:?} is not a number", fields[5]))?;
        let args = dash_is_empty(fields[6])
            .split(' ')
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect();
        let env = dash_is_empty(fields[7])
            .split(' ')
            .filter(|kv| !kv.is_empty())
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(format!("{at}: env entry {kv:?} is not KEY=VALUE")),
            })
            .collect::<Result<_, _>>()?;
        let note = dash_is_empty(fields[8]).to_string();
        if program.is_empty() || program.starts_with('/') || program.contains("..") {
            return Err(format!("{at}: bad program path {program:?}"));
        }
        if note.is_empty() && (runs.contains(&Plan::Skip) || min_tasks == 0) {
            return Err(format!(
                "{at}: {program}: a skip or a min_tasks of 0 needs a note saying why"
            ));
        }
        if cases.iter().any(|c| c.program == program) {
            return Err(format!("{at}: {program} is listed twice"));
        }
        cases.push(Case {
            program,
            runs,
            min_tasks,
            args,
            env,
            note,
        });
    }
    Ok(cases)
}

// ---------------------------------------------------------------------------
// Running a program

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Exit(i32),
    Signal(i32),
    Timeout,
    SpawnError(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Exit(code) => write!(f, "{code}"),
            Outcome::Signal(sig) => write!(f, "sig{sig}"),
            Outcome::Timeout => f.write_str("timeout"),
            Outcome::SpawnError(_) => f.write_str("nospawn"),
        }
    }
}

/// Programs started so far (examples and starpu_machine_display).
static RUNS: AtomicUsize = AtomicUsize::new(0);

struct Run {
    outcome: Outcome,
    stdout: String,
    stderr: String,
    secs: f64,
}

/// Inherited variables that would change what the runs do: every StarPU
/// setting (policy, library, worker counts, STARPU_HOME...), the preload,
/// our own knobs, and the OpenCL ICD loader's.
fn inherited_to_remove(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("STARPU_")
        || name.starts_with("PLB_")
        || name.starts_with("OCL_ICD_")
        || name == "LD_PRELOAD"
}

/// Runs `program` with a clean environment plus `env`, in `dir` (which also
/// receives `<tag>.stdout` and `<tag>.stderr`), killing it after `TIMEOUT`.
fn run(program: &Path, args: &[String], env: &[(String, String)], dir: &Path, tag: &str) -> Run {
    RUNS.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    let out_path = dir.join(format!("{tag}.stdout"));
    let err_path = dir.join(format!("{tag}.stderr"));
    let spawned = File::create(&out_path).and_then(|out| {
        let err = File::create(&err_path)?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (name, _) in std::env::vars_os() {
            if inherited_to_remove(&name) {
                cmd.env_remove(name);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd.spawn()
    });
    let outcome = match spawned {
        Err(e) => Outcome::SpawnError(format!("cannot run {}: {e}", program.display())),
        Ok(mut child) => loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    break match (status.code(), status.signal()) {
                        (Some(code), _) => Outcome::Exit(code),
                        (None, Some(sig)) => Outcome::Signal(sig),
                        (None, None) => Outcome::SpawnError(format!("odd exit status {status:?}")),
                    };
                }
                Ok(None) if start.elapsed() >= TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Outcome::Timeout;
                }
                // Poll quickly at first (most runs last ~0.1 s), then back off.
                Ok(None) => std::thread::sleep(
                    (start.elapsed() / 20)
                        .clamp(Duration::from_millis(1), Duration::from_millis(20)),
                ),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Outcome::SpawnError(format!("waiting for {}: {e}", program.display()));
                }
            }
        },
    };
    let secs = start.elapsed().as_secs_f64();
    let read = |path: &Path| {
        let mut bytes = Vec::new();
        let _ = File::open(path).and_then(|mut f| f.read_to_end(&mut bytes));
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let mut stderr = read(&err_path);
    if let Outcome::SpawnError(msg) = &outcome {
        stderr.push_str(msg);
    }
    Run {
        outcome,
        stdout: read(&out_path),
        stderr,
        secs,
    }
}

/// The last `TAIL_LINES` lines of `text`, indented, each cut to 300 chars.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(TAIL_LINES);
    let mut out = String::new();
    if skip > 0 {
        out.push_str(&format!("      [... {skip} earlier lines]\n"));
    }
    for line in &lines[skip..] {
        let cut: String = line.chars().take(300).collect();
        let more = if cut.len() < line.len() { " [...]" } else { "" };
        out.push_str(&format!("      | {cut}{more}\n"));
    }
    if lines.is_empty() {
        out.push_str("      (stderr is empty)\n");
    }
    out
}

// ---------------------------------------------------------------------------
// Our summary lines

/// One `plb: policy=... ctx=... tasks=... executed=... workers=... popped=...
/// left=...` line, printed at StarPU shutdown per context when PLB_SUMMARY=1.
#[derive(Debug)]
struct Summary {
    policy: String,
    ctx: u64,
    tasks: u64,
    popped: u64,
    left: u64,
}

/// Every summary line of `stderr`. They are searched anywhere in a line,
/// not only at its start: an example may leave its own output unterminated
/// (tag_example4 prints "AB..." without a newline before shutting down).
fn summaries(stderr: &str) -> Result<Vec<Summary>, String> {
    const MARK: &str = "plb: policy=";
    let mut found = Vec::new();
    for (at, _) in stderr.match_indices(MARK) {
        let line = stderr[at + "plb: ".len()..].lines().next().unwrap_or("");
        let fields: BTreeMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let number = |key: &str| -> Result<u64, String> {
            fields
                .get(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("summary line without a numeric {key}=: plb: {line}"))
        };
        found.push(Summary {
            policy: fields.get("policy").unwrap_or(&"").to_string(),
            ctx: number("ctx")?,
            tasks: number("tasks")?,
            popped: number("popped")?,
            left: number("left")?,
        });
        // executed= (post_exec_hook calls) is parsed but not compared with
        // tasks=: StarPU skips the hook for its internal tasks (reduction
        // init/redux), which did go through push_task, and calls it for
        // tasks pinned with execute_on_a_specific_worker, which did not.
        number("executed")?;
    }
    Ok(found)
}

/// Checks one run under our policy `policy`; returns the tasks it received
/// or why the case fails.
fn check_ours(case: &Case, policy: &str, eager: &Outcome, ours: &Run) -> Result<u64, String> {
    if ours.outcome != *eager {
        return Err(format!(
            "exit status {} under {policy}, {eager} under eager",
            ours.outcome
        ));
    }
    if ours.stderr.contains("plb: error") {
        return Err("the library reported an error (\"plb: error\" in stderr)".into());
    }
    let all = summaries(&ours.stderr)?;
    let mine: Vec<&Summary> = all.iter().filter(|s| s.policy == policy).collect();
    if mine.is_empty() {
        return Err(format!(
            "no \"plb: policy={policy}\" summary line: our policy did not schedule this program \
             (StarPU silently falls back to lws for a policy name it does not know)"
        ));
    }
    for s in &mine {
        // Every task pushed to the policy must have been popped by a worker
        // or still be queued (left) when the context was torn down; and none
        // may be left.
        if s.left != 0 || s.popped + s.left != s.tasks {
            return Err(format!(
                "inconsistent counts for context {}: tasks={} popped={} left={} (need left=0 and popped=tasks)",
                s.ctx, s.tasks, s.popped, s.left
            ));
        }
    }
    let tasks: u64 = mine.iter().map(|s| s.tasks).sum();
    if tasks < case.min_tasks {
        return Err(format!(
            "our policy received {tasks} task(s), at least {} expected (min_tasks in {CASES_FILE})",
            case.min_tasks
        ));
    }
    Ok(tasks)
}

// ---------------------------------------------------------------------------
// Environment discovery

/// Example programs installed in `dir` and its immediate subdirectories
/// (socl/, starpurm/, stencil/): executable ELF files, by relative path.
fn installed_programs(dir: &Path) -> Vec<String> {
    fn is_program(path: &Path) -> bool {
        let executable =
            fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        let mut magic = [0u8; 4];
        executable
            && File::open(path)
                .and_then(|mut f| f.read_exact(&mut magic))
                .is_ok()
            && magic == *b"\x7fELF"
    }
    let entries = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(d)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut found = Vec::new();
    for path in entries(dir) {
        if path.is_dir() {
            found.extend(
                entries(&path)
                    .into_iter()
                    .filter(|p| is_program(p))
                    .filter_map(|p| {
                        Some(format!(
                            "{}/{}",
                            path.file_name()?.to_str()?,
                            p.file_name()?.to_str()?
                        ))
                    }),
            );
        } else if is_program(&path) {
            found.extend(path.file_name().and_then(|n| n.to_str()).map(String::from));
        }
    }
    found
}

/// Counts of workers StarPU creates in a configuration.
struct Workers {
    cpu: u32,
    opencl: u32,
}

/// Asks StarPU which workers it creates with `env`.
///
/// Runs `starpu_machine_display` (package starpu-tools, found on PATH)
/// rather than asking OpenCL (clinfo would list PoCL's device even if
/// StarPU ignored it): it initialises StarPU exactly as the examples will
/// (same environment, same STARPU_HOME) and prints the workers StarPU
/// actually created, in ~0.2 s. As a side effect it performs the bus
/// calibration of the fresh STARPU_HOME once, before parallel runs share it.
fn detect_workers(env: &[(String, String)], dir: &Path) -> Result<Workers, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let tool = [Path::new(sys::STARPU_PREFIX).join("bin")]
        .into_iter()
        .chain(std::env::split_paths(&path))
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("starpu_machine_display"))
        .find(|p| p.is_file())
        .ok_or("starpu_machine_display (package starpu-tools) not found: cannot tell which workers StarPU creates")?;
    let r = run(&tool, &[], env, dir, "machine_display");
    if r.outcome != Outcome::Exit(0) {
        return Err(format!(
            "starpu_machine_display exited {}:\n{}",
            r.outcome,
            tail(&r.stderr)
        ));
    }
    // Lines "2 STARPU_CPU_WORKER workers:", "1 STARPU_OPENCL_WORKER worker:"
    // or "No STARPU_OPENCL_WORKER worker" (1.3); "2 CPU workers:" or "No
    // OpenCL worker" (1.4).
    let count = |kind: &str| -> Option<u32> {
        let short = kind
            .trim_start_matches("STARPU_")
            .trim_end_matches("_WORKER");
        let short = if short == "OPENCL" { "OpenCL" } else { short };
        let line = r.stdout.lines().find(|l| {
            let mut words = l.split_whitespace().skip(1);
            let word = words.next().unwrap_or("");
            (word == kind || word == short) && words.next().is_some_and(|w| w.starts_with("worker"))
        })?;
        let first = line.split_whitespace().next()?;
        if first == "No" {
            Some(0)
        } else {
            first.parse().ok()
        }
    };
    match (count("STARPU_CPU_WORKER"), count("STARPU_OPENCL_WORKER")) {
        (Some(cpu), Some(opencl)) => Ok(Workers { cpu, opencl }),
        _ => Err(format!(
            "could not read the worker counts from starpu_machine_display:\n{}",
            tail(&r.stdout)
        )),
    }
}

/// A directory of OpenCL ICD files for the SOCL examples: the system's
/// ICDs plus one naming StarPU's libsocl (found next to the examples:
/// <libdir>/starpu/examples -> <libdir>/libsocl-*.so*).
fn make_socl_icd(examples: &Path, root: &Path) -> Result<PathBuf, String> {
    let libdir = examples
        .parent()
        .and_then(Path::parent)
        .ok_or("no library directory above the examples")?;
    let mut socl: Vec<PathBuf> = fs::read_dir(libdir)
        .map_err(|e| format!("{}: {e}", libdir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libsocl-") && n.contains(".so"))
        })
        .collect();
    socl.sort();
    let socl = socl
        .first()
        .ok_or_else(|| format!("StarPU's libsocl-*.so not found in {}", libdir.display()))?;
    let dir = root.join("socl-icd");
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    fs::create_dir_all(&dir).map_err(io)?;
    if let Ok(vendors) = fs::read_dir("/etc/OpenCL/vendors") {
        for icd in vendors.filter_map(|e| e.ok().map(|e| e.path())) {
            if icd.extension() == Some(OsStr::new("icd")) {
                if let Some(name) = icd.file_name() {
                    fs::copy(&icd, dir.join(name)).map_err(io)?;
                }
            }
        }
    }
    let mut f = File::create(dir.join("socl.icd")).map_err(io)?;
    writeln!(f, "{}", socl.display()).map_err(io)?;
    Ok(dir)
}

/// The variable that makes StarPU load our library: `LD_PRELOAD` on 1.3
/// (our `starpu_initialize` interposes StarPU's), `STARPU_SCHED_LIB` on 1.4.
fn loader_variable() -> &'static str {
    if series_index() == 0 {
        "LD_PRELOAD"
    } else {
        "STARPU_SCHED_LIB"
    }
}

/// Our library, next to the test binary's directory: target/<profile>/deps/
/// holds the test, target/<profile>/ the library.
fn library() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the test executable: {e}"))?;
    let lib = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("libstarpu_plb.so"))
        .ok_or("odd test executable path")?;
    if !lib.is_file() {
        return Err(format!(
            "{} not found: run `cargo build --release` first (the suite preloads the built library; \
             `cargo test` alone does not put it there), then `cargo test --release --test compat`",
            lib.display()
        ));
    }
    Ok(lib.canonicalize().unwrap_or(lib))
}

/// Warns when a policy source is newer than the library (a forgotten build).
fn warn_if_stale(lib: &Path) {
    fn newest(dir: &Path) -> Option<(SystemTime, PathBuf)> {
        fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                if p.is_dir() {
                    newest(&p)
                } else {
                    Some((fs::metadata(&p).ok()?.modified().ok()?, p))
                }
            })
            .max()
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/src");
    let built = fs::metadata(lib).and_then(|m| m.modified()).ok();
    if let (Some((changed, file)), Some(built)) = (newest(&src), built) {
        if changed > built {
            println!(
                "compat: warning: {} is newer than {}: run `cargo build --release` to test the current code",
                file.display(),
                lib.display()
            );
        }
    }
}

/// The temporary directory of the suite, removed when dropped.
struct TempRoot {
    path: PathBuf,
    keep: bool,
}

impl TempRoot {
    fn new() -> Result<TempRoot, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!("plb-compat-{}-{nanos}", std::process::id()));
        fs::create_dir(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let keep = std::env::var_os("PLB_COMPAT_KEEP").is_some_and(|v| !v.is_empty() && v != "0");
        Ok(TempRoot { path, keep })
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        if self.keep {
            println!("compat: kept {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------
// Verdicts and report

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    /// Failed, then passed every rerun.
    Flaky,
    Skip,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    passed: usize,
    failed: usize,
    flaky: usize,
    skipped: usize,
}

impl Counts {
    fn add(&mut self, v: Verdict, n: usize) {
        match v {
            Verdict::Pass => self.passed += n,
            Verdict::Fail => self.failed += n,
            Verdict::Flaky => self.flaky += n,
            Verdict::Skip => self.skipped += n,
        }
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} flaky, {} skipped",
            self.passed, self.failed, self.flaky, self.skipped
        )
    }
}

/// One report line: config, program, policy, eager's and our exit status,
/// tasks our policy received, seconds of our run, verdict (and why).
#[allow(clippy::too_many_arguments)]
fn line(
    out: &mut String,
    config: &str,
    program: &str,
    policy: &str,
    eager: &str,
    ours: &str,
    tasks: &str,
    secs: Option<f64>,
    verdict: Verdict,
    why: &str,
) {
    let secs = secs.map_or_else(|| "-".to_string(), |s| format!("{s:.2}s"));
    let verdict = match verdict {
        Verdict::Pass => "PASS",
        Verdict::Fail => "FAIL",
        Verdict::Flaky => "FLAKY",
        Verdict::Skip => "SKIP",
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!("  {why}")
    };
    out.push_str(&format!(
        "{config:<10} {program:<26} {policy:<8} eager={eager:<7} ours={ours:<7} tasks={tasks:<6} {secs:>7} {verdict}{why}\n"
    ));
}

/// Everything one (configuration, case) job needs.
struct Job<'a> {
    config: Config,
    case: &'a Case,
    program: PathBuf,
    /// Environment of every run: configuration, STARPU_HOME, case.
    env: Vec<(String, String)>,
    dir: PathBuf,
}

/// Runs a case under eager, then under each of our policies.
fn run_job(job: &Job<'_>, lib: &Path) -> (String, Vec<Verdict>) {
    let column = job.config.column();
    let (config, name) = (column.as_str(), job.case.program.as_str());
    let mut out = String::new();
    let mut verdicts = Vec::new();
    if let Err(e) = fs::create_dir_all(&job.dir) {
        for p in policies() {
            line(
                &mut out,
                config,
                name,
                p.name(),
                "-",
                "-",
                "-",
                None,
                Verdict::Fail,
                &format!("{}: {e}", job.dir.display()),
            );
            verdicts.push(Verdict::Fail);
        }
        return (out, verdicts);
    }
    let mut env = job.env.clone();
    env.push(("STARPU_SCHED".into(), "eager".into()));
    let mut eager = run(&job.program, &job.case.args, &env, &job.dir, "eager");
    // StarPU's own eager, the reference, can fail now and then by itself
    // (seen: `sched_ctx_remove` ending with SIGSEGV under 1.4 in one run of
    // several); like a failing case of ours, it is run twice more before
    // the case is failed on its account.
    for _ in 0..2 {
        if eager.outcome == Outcome::Exit(0) {
            break;
        }
        eager = run(&job.program, &job.case.args, &env, &job.dir, "eager");
    }
    let eager_problem = if eager.outcome != Outcome::Exit(0) {
        Some(format!(
            "eager itself ends with {} (not exit 0) in the {config} configuration: mark {name} \"skip\" for {config} in {CASES_FILE} \
             (with the reason) or fix its arguments",
            eager.outcome
        ))
    } else if eager.stderr.contains("plb: policy=") {
        Some("a plb summary line appeared under eager, which runs without the preload".to_string())
    } else {
        None
    };
    for p in policies() {
        let policy = p.name();
        if let Some(problem) = &eager_problem {
            line(
                &mut out,
                config,
                name,
                policy,
                &eager.outcome.to_string(),
                "-",
                "-",
                None,
                Verdict::Fail,
                problem,
            );
            out.push_str("    stderr tail (eager):\n");
            out.push_str(&tail(&eager.stderr));
            verdicts.push(Verdict::Fail);
            continue;
        }
        let mut env = job.env.clone();
        env.extend([
            (loader_variable().to_string(), lib.display().to_string()),
            ("STARPU_SCHED".to_string(), policy.to_string()),
            ("PLB_SUMMARY".to_string(), "1".to_string()),
        ]);
        let ours = run(&job.program, &job.case.args, &env, &job.dir, policy);
        let rc = (eager.outcome.to_string(), ours.outcome.to_string());
        let checked = check_ours(job.case, policy, &eager.outcome, &ours);
        // A failure is run again (RERUNS times): passing every rerun makes
        // it FLAKY, reported with the failed run's details and counted
        // apart; failing any rerun keeps it a FAIL.
        let flaky = checked.is_err()
            && (0..RERUNS).all(|_| {
                let again = run(&job.program, &job.case.args, &env, &job.dir, policy);
                check_ours(job.case, policy, &eager.outcome, &again).is_ok()
            });
        match checked {
            Ok(tasks) => {
                line(
                    &mut out,
                    config,
                    name,
                    policy,
                    &rc.0,
                    &rc.1,
                    &tasks.to_string(),
                    Some(ours.secs),
                    Verdict::Pass,
                    "",
                );
                verdicts.push(Verdict::Pass);
            }
            Err(why) => {
                let (verdict, why) = if flaky {
                    (
                        Verdict::Flaky,
                        format!("{why} (then passed {RERUNS} reruns)"),
                    )
                } else {
                    (Verdict::Fail, why)
                };
                let tasks: u64 = summaries(&ours.stderr)
                    .unwrap_or_default()
                    .iter()
                    .filter(|s| s.policy == policy)
                    .map(|s| s.tasks)
                    .sum();
                line(
                    &mut out,
                    config,
                    name,
                    policy,
                    &rc.0,
                    &rc.1,
                    &tasks.to_string(),
                    Some(ours.secs),
                    verdict,
                    &why,
                );
                let env: Vec<String> = job
                    .env
                    .iter()
                    .filter(|(k, _)| k != "STARPU_HOME" && k != "STARPU_SILENT")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                out.push_str(&format!(
                    "    reproduce: env {} STARPU_HOME=$(mktemp -d) STARPU_SILENT=1 {}={} STARPU_SCHED={policy} PLB_SUMMARY=1 {}{}\n",
                    env.join(" "),
                    loader_variable(),
                    lib.display(),
                    job.program.display(),
                    job.case.args.iter().map(|a| format!(" {a}")).collect::<String>(),
                ));
                out.push_str(&format!("    stderr tail ({policy}):\n"));
                out.push_str(&tail(&ours.stderr));
                verdicts.push(verdict);
            }
        }
    }
    (out, verdicts)
}

fn main() -> ExitCode {
    let started = Instant::now();
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected =
        |program: &str| filters.is_empty() || filters.iter().any(|f| program.contains(f.as_str()));

    let cases = match fs::read_to_string(CASES_FILE)
        .map_err(|e| format!("{CASES_FILE}: {e}"))
        .and_then(|t| parse_cases(&t))
    {
        Ok(cases) => cases,
        Err(e) => {
            println!("compat: error: {e}");
            println!("compat: 0 passed, 1 failed, 0 flaky, 0 skipped");
            return ExitCode::FAILURE;
        }
    };
    let cases: Vec<&Case> = cases.iter().filter(|c| selected(&c.program)).collect();

    let examples =
        std::env::var_os("PLB_COMPAT_EXAMPLES").map_or_else(default_examples, PathBuf::from);
    if !examples.is_dir() {
        println!(
            "compat: skipped: StarPU's examples directory {} is absent (install starpu-examples)",
            examples.display()
        );
        println!(
            "compat: 0 passed, 0 failed, 0 flaky, {} skipped",
            cases.len() * Config::ALL.len() * policies().len()
        );
        return ExitCode::SUCCESS;
    }
    let lib = match library() {
        Ok(lib) => lib,
        Err(e) => {
            println!("compat: error: {e}");
            println!("compat: 0 passed, 1 failed, 0 flaky, 0 skipped");
            return ExitCode::FAILURE;
        }
    };
    warn_if_stale(&lib);
    let root = match TempRoot::new() {
        Ok(root) => root,
        Err(e) => {
            println!("compat: error: {e}");
            println!("compat: 0 passed, 1 failed, 0 flaky, 0 skipped");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "compat: StarPU {} ({}), library {} loaded by {}",
        sys::STARPU_SERIES,
        sys::STARPU_PREFIX,
        lib.display(),
        loader_variable()
    );
    println!("compat: examples {}", examples.display());
    println!(
        "compat: policies {}",
        policies()
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    let mut report = String::new();
    let npol = policies().len();

    // Programs installed but not listed: the data file must say how to run them.
    let installed = installed_programs(&examples);
    let mut unlisted = 0;
    for program in installed.iter().filter(|p| selected(p)) {
        if !cases.iter().any(|c| &c.program == program) {
            let why = format!("installed but not listed in {CASES_FILE}: add a line for it");
            line(
                &mut report,
                "-",
                program,
                "-",
                "-",
                "-",
                "-",
                None,
                Verdict::Fail,
                &why,
            );
            unlisted += 1;
        }
    }

    let socl_icd = make_socl_icd(&examples, &root.path);
    let mut jobs: Vec<Job<'_>> = Vec::new();
    for config in Config::ALL {
        let column = config.column();
        let cname = column.as_str();
        let home = root.path.join(cname).join("starpu-home");
        if let Err(e) = fs::create_dir_all(&home) {
            println!("compat: error: {}: {e}", home.display());
            return ExitCode::FAILURE;
        }
        let mut base: Vec<(String, String)> = config
            .env()
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect();
        base.push(("STARPU_HOME".into(), home.display().to_string()));
        base.push(("STARPU_SILENT".into(), "1".into()));
        let tally = counts.entry(column.clone()).or_default();
        match (config, detect_workers(&base, &root.path.join(cname))) {
            (Config::Opencl, Ok(w)) if w.opencl == 0 => {
                println!(
                    "compat: config {cname}: skipped: StarPU creates no OpenCL worker with {}",
                    config
                        .env()
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                tally.add(Verdict::Skip, cases.len() * npol);
                continue;
            }
            (Config::Opencl, Err(e)) => {
                println!("compat: config {cname}: skipped: {e}");
                tally.add(Verdict::Skip, cases.len() * npol);
                continue;
            }
            (_, Ok(w)) => println!(
                "compat: config {cname}: {} CPU worker(s), {} OpenCL worker(s)",
                w.cpu, w.opencl
            ),
            // The cpu configuration runs anyway: the cases will tell.
            (Config::Cpu, Err(e)) => println!("compat: config {cname}: warning: {e}"),
        }
        for case in &cases {
            let program = examples.join(&case.program);
            let why = if case.plan_in(config) == Plan::Absent {
                Some(format!(
                    "not in StarPU {}'s examples (column {} is \"-\")",
                    sys::STARPU_SERIES,
                    config.column()
                ))
            } else if case.plan_in(config) == Plan::Skip {
                Some(reason_for(&case.note, config))
            } else if !installed.contains(&case.program) {
                Some(format!("{} is not installed", program.display()))
            } else {
                None
            };
            let mut env = base.clone();
            let mut why = why;
            for (k, v) in &case.env {
                let v = if v.contains("{socl_icd}") {
                    match &socl_icd {
                        Ok(dir) => v.replace("{socl_icd}", &dir.display().to_string()),
                        Err(e) => {
                            why.get_or_insert_with(|| e.clone());
                            continue;
                        }
                    }
                } else {
                    v.clone()
                };
                env.push((k.clone(), v));
            }
            if let Some(why) = why {
                for p in policies() {
                    line(
                        &mut report,
                        cname,
                        &case.program,
                        p.name(),
                        "-",
                        "-",
                        "-",
                        None,
                        Verdict::Skip,
                        &why,
                    );
                }
                tally.add(Verdict::Skip, npol);
                continue;
            }
            let dir = root.path.join(cname).join(case.program.replace('/', "_"));
            jobs.push(Job {
                config,
                case,
                program,
                env,
                dir,
            });
        }
    }
    print!("{report}");

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(Config, Vec<Verdict>)>> = Mutex::new(Vec::new());
    // Failing jobs' reports, printed again at the end: CI keeps only a log's tail.
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (text, verdicts) = run_job(job, &lib);
                    let mut stdout = std::io::stdout().lock();
                    let _ = stdout.write_all(text.as_bytes());
                    let _ = stdout.flush();
                    drop(stdout);
                    if verdicts
                        .iter()
                        .any(|v| matches!(v, Verdict::Fail | Verdict::Flaky))
                    {
                        failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(text);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((job.config, verdicts));
                }
            });
        }
    });
    for (config, verdicts) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let tally = counts.entry(config.column()).or_default();
        verdicts.into_iter().for_each(|v| tally.add(v, 1));
    }

    drop(root);
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failures.is_empty() {
        println!("compat: the failing and flaky cases again (all their lines):");
        failures.iter().for_each(|text| print!("{text}"));
    }
    let mut total = Counts {
        failed: unlisted,
        ..Counts::default()
    };
    if unlisted > 0 {
        println!("compat: {unlisted} installed program(s) not listed in {CASES_FILE}");
    }
    for (config, c) in &counts {
        println!("compat: config {config}: {c}");
        total.passed += c.passed;
        total.failed += c.failed;
        total.flaky += c.flaky;
        total.skipped += c.skipped;
    }
    println!(
        "compat: {} runs in {:.1} s with {THREADS} threads",
        RUNS.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    println!("compat: {total}");
    if total.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
