//! One SIMULATED run: a StarPU example program of the SimGrid build, on one
//! sampled machine, under one policy; and what its output says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A sampled machine, possibly restricted (`attila:ncpu=4:ncuda=1`), or
/// with its bus scaled (`sirocco:bus=10`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The name of the samples (`bus/<name>.platform.xml`).
    pub name: String,
    /// `STARPU_NCPU`, when restricted.
    pub ncpu: Option<u32>,
    /// `STARPU_NCUDA`, when restricted.
    pub ncuda: Option<u32>,
    /// The bus bandwidths' scale, as written (a number > 0;
    /// [`super::bus_scale`]), when scaled.
    pub bus: Option<String>,
}

impl Machine {
    /// Parses `NAME[:ncpu=N][:ncuda=M][:bus=F]` (`:`, since machines are
    /// comma-separated on the command line).
    pub fn parse(text: &str) -> Result<Machine, String> {
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or("");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(format!(
                "'{text}': a machine is NAME[:ncpu=N][:ncuda=M][:bus=F]"
            ));
        }
        let mut machine = Machine {
            name: name.to_string(),
            ncpu: None,
            ncuda: None,
            bus: None,
        };
        for opt in parts {
            let (key, value) = opt
                .split_once('=')
                .ok_or_else(|| format!("'{text}': '{opt}' is not KEY=VALUE"))?;
            if key == "bus" {
                super::bus_scale::parse_factor(value).map_err(|e| format!("'{text}': {e}"))?;
                machine.bus = Some(value.to_string());
                continue;
            }
            let n: u32 = value
                .parse()
                .map_err(|_| format!("'{text}': {key}={value} is not a whole number"))?;
            match key {
                "ncpu" => machine.ncpu = Some(n),
                "ncuda" => machine.ncuda = Some(n),
                _ => {
                    return Err(format!(
                        "'{text}': unknown setting {key} (ncpu, ncuda, bus)"
                    ));
                }
            }
        }
        Ok(machine)
    }

    /// The label of tables and files, in the command line's grammar:
    /// `attila`, `attila:ncpu=4:ncuda=1`.
    pub fn label(&self) -> String {
        let mut label = self.name.clone();
        if let Some(n) = self.ncpu {
            label.push_str(&format!(":ncpu={n}"));
        }
        if let Some(n) = self.ncuda {
            label.push_str(&format!(":ncuda={n}"));
        }
        if let Some(f) = &self.bus {
            label.push_str(&format!(":bus={f}"));
        }
        label
    }

    /// `STARPU_HOSTNAME`: the samples' name, or that of the copy with the
    /// bus scaled ([`super::bus_scale::host_name`]).
    pub fn host(&self) -> String {
        match &self.bus {
            Some(f) => super::bus_scale::host_name(&self.name, f),
            None => self.name.clone(),
        }
    }
}

/// The StarPU applications we run, with their sampled kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    /// `cholesky_implicit`: tiled Cholesky (kernels `chol_model_*`).
    Cholesky,
    /// `lu_implicit_example_float`: tiled LU without pivoting
    /// (`starpu_slu_lu_model_*`).
    Lu,
    /// `sgemm`: one blocked GEMM repeated (`starpu_sgemm_gemm`).
    Gemm,
}

/// Tile sizes the samples hold for every kernel of every machine.
pub const SAMPLED_TILES: [u32; 3] = [320, 640, 960];
/// Iterations of the GEMM (the program prints the time of one).
pub const GEMM_ITERATIONS: u32 = 10;

/// One application at one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub app: App,
    /// Matrix order.
    pub n: u32,
    /// Tile order (`n / tile` blocks per dimension).
    pub tile: u32,
}

impl Case {
    /// Parses `cholesky:19200`, `lu:9600/640`, `gemm:3840`.
    pub fn parse(text: &str) -> Result<Case, String> {
        let err = || format!("'{text}': a case is APP:N[/TILE] with APP cholesky, lu or gemm");
        let (app, size) = text.split_once(':').ok_or_else(err)?;
        let app = match app {
            "cholesky" => App::Cholesky,
            "lu" => App::Lu,
            "gemm" => App::Gemm,
            _ => return Err(err()),
        };
        let (n, tile) = size.split_once('/').unwrap_or((size, "960"));
        let n: u32 = n.parse().map_err(|_| err())?;
        let tile: u32 = tile.parse().map_err(|_| err())?;
        if !SAMPLED_TILES.contains(&tile) {
            return Err(format!(
                "'{text}': the samples hold kernels of tiles {SAMPLED_TILES:?} only, not {tile}"
            ));
        }
        if n == 0 || n % tile != 0 {
            return Err(format!(
                "'{text}': N={n} is not a positive multiple of the tile {tile}"
            ));
        }
        let case = Case { app, n, tile };
        if app == App::Gemm && case.blocks() < 2 {
            return Err(format!(
                "'{text}': GEMM needs at least 2 blocks per dimension"
            ));
        }
        Ok(case)
    }

    /// Blocks per dimension.
    pub fn blocks(&self) -> u32 {
        self.n / self.tile
    }

    pub fn app_name(&self) -> &'static str {
        match self.app {
            App::Cholesky => "cholesky",
            App::Lu => "lu",
            App::Gemm => "gemm",
        }
    }

    /// `cholesky:19200/960`: the size and the tile, as given on the
    /// command line.
    pub fn label(&self) -> String {
        format!("{}:{}/{}", self.app_name(), self.n, self.tile)
    }

    /// `cholesky-19200-tile960`: the label as a file name, in every run's
    /// folder, so that two cases differing only in their tile never share
    /// a run's folder, its learned models or its calibration.
    pub fn slug(&self) -> String {
        format!("{}-{}-tile{}", self.app_name(), self.n, self.tile)
    }

    /// The installed program, relative to `<prefix>/lib/starpu/examples`.
    pub fn program(&self) -> &'static str {
        match self.app {
            App::Cholesky => "cholesky_implicit",
            App::Lu => "lu_implicit_example_float",
            App::Gemm => "sgemm",
        }
    }

    pub fn args(&self) -> Vec<String> {
        let (n, b) = (self.n.to_string(), self.blocks().to_string());
        match self.app {
            App::Cholesky | App::Lu => vec!["-size".into(), n, "-nblocks".into(), b],
            App::Gemm => vec![
                "-xyz".into(),
                n,
                "-nblocks".into(),
                b,
                "-iter".into(),
                GEMM_ITERATIONS.to_string(),
            ],
        }
    }

    /// Tasks the application submits, where the count follows from the
    /// algorithm (checked against what the workers executed).
    pub fn expected_tasks(&self) -> Option<u64> {
        let k = u64::from(self.blocks());
        match self.app {
            // potrf k, trsm and syrk k(k-1)/2 each, gemm k(k-1)(k-2)/6.
            App::Cholesky => Some(k + k * (k - 1) + k * (k - 1) * (k.saturating_sub(2)) / 6),
            // getrf k, trsm k(k-1), gemm (k-1)k(2k-1)/6.
            App::Lu => Some(k + k * (k - 1) + (k - 1) * k * (2 * k - 1) / 6),
            App::Gemm => None,
        }
    }
}

/// Where the SimGrid build, its samples and our library are.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `<prefix>/lib/starpu/examples`.
    pub examples: PathBuf,
    /// A copy of the sampling directory (`bus/`, `codelets/`), private to
    /// this invocation, so that nothing StarPU writes reaches the samples.
    pub samples: PathBuf,
    /// Our library built against the SimGrid prefix.
    pub library: PathBuf,
    /// Per-run scratch directories (STARPU_HOME, outputs) go below.
    pub scratch: PathBuf,
    pub timeout: Duration,
}

/// What one run printed, parsed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit status, or why there is none.
    pub status: Result<i32, String>,
    /// Simulated makespan, ms: as the program prints it for the
    /// factorisations; for the GEMM, all iterations (from its GFlop/s).
    pub ms: Option<f64>,
    pub gflops: Option<f64>,
    /// StarPU's LP area bound, ms (`Tms`, printed with `-bound`).
    pub bound_ms: Option<f64>,
    /// `Total transfers` of STARPU_BUS_STATS, GiB.
    pub gib: Option<f64>,
    /// The same statistics' per-bus lines, summed: GiB moved between main
    /// memory (`NUMA`, `RAM`) and a device, and between two devices.
    pub host_gib: Option<f64>,
    pub peer_gib: Option<f64>,
    /// Tasks executed, summed over STARPU_WORKER_STATS's workers.
    pub executed: Option<u64>,
    /// Tasks per worker kind ("CPU", "CUDA"), from the same statistics.
    pub by_kind: BTreeMap<String, u64>,
    /// The same statistics per worker.
    pub workers: Vec<WorkerStat>,
    /// Our summary lines: (tasks, popped, left), summed over contexts.
    pub ours: Option<(u64, u64, u64)>,
    /// A "plb: error" line of our library.
    pub plb_error: Option<String>,
    /// Real seconds the simulation took.
    pub wall_s: f64,
    /// The tail of stderr, for failures.
    pub stderr_tail: String,
}

/// StarPU-SimGrid's line saying a kernel has no sampled model on the
/// machine (the case's tile or GEMM size was never sampled there), if
/// `stderr` holds one.
pub fn unsampled_kernel(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|l| {
            l.contains("is not calibrated at all for") || l.contains("does not have a perfmodel")
        })
        .map(str::trim)
}

/// What to run on a machine: a case under a policy.
pub struct Request<'a> {
    pub case: &'a Case,
    pub policy: &'a str,
    /// The policy comes from our library (loaded by `STARPU_SCHED_LIB`).
    pub ours: bool,
    /// Also ask the program for StarPU's LP area bound (`-bound`).
    pub bound: bool,
    /// Extra environment.
    pub env: &'a [(String, String)],
    /// Name of the run's scratch directory.
    pub tag: &'a str,
}

/// Runs `req` on `machine`.
pub fn run(setup: &Setup, machine: &Machine, req: &Request<'_>) -> Outcome {
    let (case, policy, ours) = (req.case, req.policy, req.ours);
    let dir = setup.scratch.join(req.tag);
    let home = dir.join("starpu-home");
    if let Err(e) = std::fs::create_dir_all(&home) {
        return Outcome {
            status: Err(format!("{}: {e}", home.display())),
            ..Outcome::default()
        };
    }
    let mut cmd = Command::new(setup.examples.join(case.program()));
    cmd.args(case.args())
        .args(req.bound.then_some("-bound"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    simulated_machine(&mut cmd, setup, machine, &home);
    cmd.env("STARPU_SCHED", policy)
        .env("STARPU_BUS_STATS", "1")
        .env("STARPU_WORKER_STATS", "1");
    if ours {
        cmd.env("STARPU_SCHED_LIB", &setup.library)
            .env("PLB_SUMMARY", "1");
    }
    cmd.envs(req.env.iter().map(|(k, v)| (k, v)));
    let start = Instant::now();
    let (status, stdout, stderr) = run_with_timeout(cmd, setup.timeout);
    // The whole of it stays in the run's folder (the outcome keeps a tail).
    let _ = std::fs::write(dir.join("stderr.txt"), &stderr);
    let mut outcome = parse(&stdout, &stderr);
    if case.app == App::Gemm {
        // sgemm prints one iteration's mean time, rounded to the
        // millisecond, and the GFlop/s of all of them: the makespan of the
        // whole run (what the bound covers) follows from the latter.
        let flops = 2.0 * f64::from(case.n).powi(3) * f64::from(GEMM_ITERATIONS);
        outcome.ms = outcome
            .gflops
            .filter(|g| *g > 0.0)
            .map(|g| flops / (g * 1e6));
    }
    outcome.status = status;
    outcome.wall_s = start.elapsed().as_secs_f64();
    outcome
}

impl Default for Outcome {
    fn default() -> Outcome {
        Outcome {
            status: Err("not run".into()),
            ms: None,
            gflops: None,
            bound_ms: None,
            gib: None,
            host_gib: None,
            peer_gib: None,
            executed: None,
            by_kind: BTreeMap::new(),
            workers: Vec::new(),
            ours: None,
            plb_error: None,
            wall_s: 0.0,
            stderr_tail: String::new(),
        }
    }
}

/// Makes `cmd` run on the SimGrid machine `machine`: no inherited StarPU
/// or PLB setting (nor preload), `home` as `STARPU_HOME`, the samples, the
/// machine's restrictions.
pub fn simulated_machine(cmd: &mut Command, setup: &Setup, machine: &Machine, home: &Path) {
    crate::launch::clear_starpu_settings(cmd);
    cmd.env("STARPU_HOME", home)
        .env("STARPU_HOSTNAME", machine.host())
        .env("STARPU_PERF_MODEL_DIR", &setup.samples)
        // The samples list each GPU as a CUDA and an OpenCL device: CUDA
        // workers only, as on the machines sampled.
        .env("STARPU_NOPENCL", "0");
    if let Some(n) = machine.ncpu {
        cmd.env("STARPU_NCPU", n.to_string());
    }
    if let Some(n) = machine.ncuda {
        cmd.env("STARPU_NCUDA", n.to_string());
    }
}

/// Runs `cmd`, killing it after `limit`; returns its status and output.
pub fn run_with_timeout(
    mut cmd: Command,
    limit: Duration,
) -> (Result<i32, String>, String, String) {
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return (
                Err(format!("cannot start: {e}")),
                String::new(),
                String::new(),
            );
        }
    };
    // Read both pipes on threads so a chatty program cannot block on a full pipe.
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as _));
    let err = read(child.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                break s.code().ok_or_else(|| format!("killed by a signal ({s})"));
            }
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("timed out after {} s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("wait: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    (status, stdout, stderr)
}

/// Parses a run's output: the program's result line (`# size ms GFlop/s`
/// header, then values; the GEMM's header is `# x y z ms GFlop/s`), the
/// bus statistics, the worker statistics and our summary lines.
pub fn parse(stdout: &str, stderr: &str) -> Outcome {
    let mut o = Outcome::default();
    for text in [stdout, stderr] {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let header: Vec<&str> = line.trim_start_matches('#').split_whitespace().collect();
            if line.starts_with('#') && header.contains(&"ms") && header.contains(&"GFlop/s") {
                if let Some(values) = lines.get(i + 1) {
                    let values: Vec<&str> = values.split_whitespace().collect();
                    let field = |name: &str| {
                        let at = header.iter().position(|h| *h == name)?;
                        values.get(at)?.parse::<f64>().ok()
                    };
                    o.ms = field("ms");
                    o.gflops = field("GFlop/s");
                    o.bound_ms = field("Tms");
                }
            }
        }
    }
    let workers: Vec<WorkerStat> = worker_stats(stderr)
        .into_iter()
        .chain(worker_stats(stdout))
        .collect();
    let mut executed = None;
    for w in workers.iter().filter(|w| w.counted) {
        *o.by_kind.entry(w.kind.clone()).or_default() += w.tasks;
        *executed.get_or_insert(0) += w.tasks;
    }
    for line in stderr.lines().chain(stdout.lines()) {
        if let Some(rest) = line.strip_prefix("Total transfers:") {
            o.gib = rest.split_whitespace().next().and_then(|v| v.parse().ok());
        }
        if let Some((host, gib)) = bus_line(line) {
            let sum = if host {
                &mut o.host_gib
            } else {
                &mut o.peer_gib
            };
            *sum.get_or_insert(0.0) += gib;
        }
        if let Some(at) = line.find("plb: policy=") {
            let fields: BTreeMap<&str, u64> = line[at + 5..]
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
                .collect();
            let (t, p, l) = o.ours.unwrap_or((0, 0, 0));
            let get = |k: &str| fields.get(k).copied().unwrap_or(0);
            o.ours = Some((t + get("tasks"), p + get("popped"), l + get("left")));
        }
        if line.contains("plb: error") && o.plb_error.is_none() {
            o.plb_error = Some(line.trim().to_string());
        }
    }
    o.executed = executed;
    o.workers = workers;
    let tail: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("[xbt_cfg/INFO]") && !l.contains("[surf_parse/INFO]"))
        .collect();
    o.stderr_tail = tail[tail.len().saturating_sub(12)..].join("\n");
    o
}

/// One bus line of StarPU's bus statistics (`\tNUMA 0 -> CUDA 1\t0.0618
/// GB\t...`): whether an end is main memory (`NUMA`, or `RAM` before
/// StarPU 1.4), and the GiB moved (StarPU's "GB" are 2^30 bytes).
fn bus_line(line: &str) -> Option<(bool, f64)> {
    let mut fields = line.trim().split('\t');
    let (from, to) = fields.next()?.split_once(" -> ")?;
    let gib = fields
        .next()?
        .strip_suffix(" GB")?
        .trim()
        .parse::<f64>()
        .ok()?;
    let host = |end: &str| end.starts_with("NUMA") || end.starts_with("RAM");
    Some((host(from) || host(to), gib))
}

/// One worker's entry in StarPU's worker statistics
/// (`STARPU_WORKER_STATS=1`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStat {
    /// Its name line ("CUDA 0.0 (Fermi ...)", "CPU 3").
    pub name: String,
    /// Its kind, the name's first word.
    pub kind: String,
    pub tasks: u64,
    /// Whether a `<n> task(s)` line was read for it.
    pub counted: bool,
    /// `executing: X ms`, printed when StarPU profiles (STARPU_PROFILING=1,
    /// or any SimGrid run).
    pub executing_ms: Option<f64>,
    /// `waiting: X ms` (StarPU 1.4): no task running, held waiting for
    /// a data transfer.
    pub waiting_ms: Option<f64>,
    /// `sleeping: X ms`: no task to run.
    pub sleeping_ms: Option<f64>,
}

/// Where one kind of worker's time went: (executing, waiting for data,
/// sleeping), ms, summed over its workers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimeSplit {
    pub executing_ms: f64,
    pub waiting_ms: f64,
    pub sleeping_ms: f64,
}

/// StarPU's worker statistics in `text`: a worker's name line, then
/// `\t<n> task(s)` and, when profiling, its time split (1.3: `total: ...
/// executing: X ms sleeping: Y ms ...`; 1.4: `time split: total ... =
/// executing: X ms + callback: ... + waiting: W ms + sleeping: Y ms ...`,
/// then an `all time:` line, which is not read).
pub fn worker_stats(text: &str) -> Vec<WorkerStat> {
    let mut out: Vec<WorkerStat> = Vec::new();
    let mut current = false;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            let kind = line.split_whitespace().next().unwrap_or("");
            current = ["CPU", "CUDA", "OpenCL", "HIP", "MIC", "MPI"].contains(&kind);
            if current {
                out.push(WorkerStat {
                    name: line.trim().to_string(),
                    kind: kind.to_string(),
                    tasks: 0,
                    counted: false,
                    executing_ms: None,
                    waiting_ms: None,
                    sleeping_ms: None,
                });
            }
            continue;
        }
        let Some(w) = out.last_mut().filter(|_| current) else {
            continue;
        };
        let t = line.trim();
        if let Some(n) = t.strip_suffix(" task(s)").and_then(|n| n.parse().ok()) {
            w.tasks = n;
            w.counted = true;
        }
        if t.starts_with("all time:") || w.executing_ms.is_some() {
            continue;
        }
        let ms = |label: &str| {
            t.split(label)
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        };
        if let Some(executing) = ms("executing:") {
            w.executing_ms = Some(executing);
            w.waiting_ms = ms("waiting:");
            w.sleeping_ms = ms("sleeping:");
        }
    }
    out
}

impl Outcome {
    /// The time split of the counted workers of `kind` ("CPU", "CUDA"),
    /// when every one of them printed one; a part a worker did not print
    /// (waiting, on StarPU 1.3) counts 0.
    pub fn time_split(&self, kind: &str) -> Option<TimeSplit> {
        let mut sum: Option<TimeSplit> = None;
        for w in self.workers.iter().filter(|w| w.counted && w.kind == kind) {
            let t = sum.get_or_insert_with(TimeSplit::default);
            t.executing_ms += w.executing_ms?;
            t.waiting_ms += w.waiting_ms.unwrap_or(0.0);
            t.sleeping_ms += w.sleeping_ms.unwrap_or(0.0);
        }
        sum
    }
}

/// Why a run is wrong, if it is: it must exit 0, print its result, execute
/// the same number of tasks as under eager (`reference`) and as the
/// algorithm submits, and for our policies account for every task.
pub fn verdict(case: &Case, o: &Outcome, ours: bool, reference: Option<u64>) -> Result<(), String> {
    match &o.status {
        Ok(0) => {}
        Ok(code) => return Err(format!("exit status {code}")),
        Err(e) => return Err(e.clone()),
    }
    if let Some(e) = &o.plb_error {
        return Err(format!("our library reported an error: {e}"));
    }
    if o.ms.is_none() || o.gflops.is_none() {
        return Err("no result line (ms, GFlop/s) in the output".into());
    }
    let executed = o
        .executed
        .ok_or("no worker statistics (STARPU_WORKER_STATS) in the output")?;
    if let Some(expected) = case.expected_tasks() {
        if executed != expected {
            return Err(format!(
                "{executed} tasks executed, the algorithm submits {expected}"
            ));
        }
    }
    if let Some(r) = reference {
        if executed != r {
            return Err(format!("{executed} tasks executed, {r} under eager"));
        }
    }
    if ours {
        let (tasks, popped, left) = o
            .ours
            .ok_or("no plb summary line: our policy did not run")?;
        if tasks != executed || popped != tasks || left != 0 {
            return Err(format!(
                "our summary says tasks={tasks} popped={popped} left={left}, workers executed {executed}"
            ));
        }
    }
    Ok(())
}

/// `target/starpu14-simgrid`, where `scripts/simgrid.sh` builds against
/// the SimGrid prefix, found from this executable (`target/release/plb`).
fn simgrid_target() -> PathBuf {
    crate::launch::target_dir().join("starpu14-simgrid")
}

/// StarPU's SimGrid build: `$PLB_CACHE/starpu-1.4.10/simgrid`, `PLB_CACHE`
/// defaulting to `~/.cache/plb` (where `scripts/starpu14.sh` builds it).
pub fn default_prefix() -> PathBuf {
    std::env::var_os("PLB_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/plb")))
        .unwrap_or_else(|| PathBuf::from(".cache/plb"))
        .join("starpu-1.4.10/simgrid")
}

/// Our library built against the SimGrid prefix: `$PLB_SIMGRID_LIB` when
/// set, else next to `plb`'s target directory.
pub fn simgrid_library() -> PathBuf {
    std::env::var_os("PLB_SIMGRID_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(default_library)
}

/// Our library built against the SimGrid prefix.
pub fn default_library() -> PathBuf {
    crate::launch::starpu14_library("simgrid")
}

/// The cross-check's program (`scripts/simgrid-xcheck.c`).
pub fn default_xcheck_program() -> PathBuf {
    simgrid_target().join("plb-xcheck")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_statistics_are_read_per_worker() {
        let text = "#---------------------\nWorker stats:\nCPU 0                           \n\
            \t14 task(s)\n\ttotal: 1280.74 ms executing: 420.29 ms sleeping: 859.73 ms overhead 0.73 ms\n\
            \t0.205329 GFlop/s\n\nCPU 1                           \n\t6 task(s)\n";
        let w = worker_stats(text);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].name.as_str(), w[0].tasks), ("CPU 0", 14));
        assert_eq!(w[0].executing_ms, Some(420.29));
        assert_eq!((w[1].tasks, w[1].executing_ms), (6, None));
    }

    #[test]
    fn starpu_14_time_split_is_read_and_summed_per_kind() {
        // StarPU 1.4's format (src/profiling/profiling_helpers.c): the
        // time split, then an `all time:` line that must not be read.
        let text = "CUDA 0.0 (Tesla M2075 5.2 GiB 04:00.0)\n\t40 task(s)\n\
            \ttime split: total 1000.00 ms = executing: 700.00 ms + callback: 0.00 ms + \
            waiting: 120.50 ms + sleeping: 100.00 ms + scheduling: 0.00 ms + overhead 79.50 ms\n\
            \tall time: executing: 9700.00 ms callback: 0.00 ms waiting: 9120.00 ms \
            sleeping: 9100.00 ms scheduling: 0.00 ms\n\
            CUDA 1.0 (Tesla M2075 5.2 GiB 05:00.0)\n\t30 task(s)\n\
            \ttime split: total 1000.00 ms = executing: 600.00 ms + callback: 0.00 ms + \
            waiting: 80.00 ms + sleeping: 250.00 ms + scheduling: 0.00 ms + overhead 70.00 ms\n\
            CPU 0\n\t5 task(s)\n\
            \ttime split: total 1000.00 ms = executing: 900.00 ms + callback: 0.00 ms + \
            waiting: 0.00 ms + sleeping: 50.00 ms + scheduling: 0.00 ms + overhead 50.00 ms\n";
        let o = parse(text, "");
        let w = &o.workers[0];
        assert_eq!(
            (w.executing_ms, w.waiting_ms, w.sleeping_ms),
            (Some(700.0), Some(120.5), Some(100.0))
        );
        assert_eq!(
            o.time_split("CUDA"),
            Some(TimeSplit {
                executing_ms: 1300.0,
                waiting_ms: 200.5,
                sleeping_ms: 350.0
            })
        );
        assert_eq!(o.time_split("CPU").map(|t| t.executing_ms), Some(900.0));
        assert_eq!(o.time_split("OpenCL"), None);
        // A worker without a split (not profiled) leaves its kind's unknown.
        let o = parse("CPU 0\n\t5 task(s)\n", "");
        assert_eq!(o.time_split("CPU"), None);
    }

    #[test]
    fn cases_and_machines_parse_and_refuse() {
        let c = Case::parse("cholesky:19200").unwrap();
        assert_eq!((c.n, c.tile, c.blocks()), (19200, 960, 20));
        assert_eq!(Case::parse("lu:9600/640").unwrap().blocks(), 15);
        assert!(
            Case::parse("cholesky:1000")
                .unwrap_err()
                .contains("multiple")
        );
        assert!(
            Case::parse("cholesky:1000/100")
                .unwrap_err()
                .contains("tiles")
        );
        assert!(Case::parse("qr:960").is_err());
        assert!(Case::parse("gemm:960").unwrap_err().contains("2 blocks"));
        let m = Machine::parse("attila:ncpu=4:ncuda=1").unwrap();
        assert_eq!((m.ncpu, m.ncuda), (Some(4), Some(1)));
        assert_eq!(m.label(), "attila:ncpu=4:ncuda=1");
        assert!(Machine::parse("attila:ngpu=1").is_err());
        assert!(Machine::parse("attila:ncpu=4,ncuda=1").is_err());
        assert!(Machine::parse("attila:").is_err());
        assert!(Machine::parse("../x").is_err());
        // A scaled bus is a host of its own, labelled as written.
        let m = Machine::parse("sirocco:ncuda=2:bus=0.5").unwrap();
        assert_eq!(m.label(), "sirocco:ncuda=2:bus=0.5");
        assert_eq!(m.host(), "sirocco-bus0p5");
        assert_eq!(Machine::parse("sirocco").unwrap().host(), "sirocco");
        assert!(Machine::parse("sirocco:bus=0").is_err());
        assert!(Machine::parse("sirocco:bus=fast").is_err());
        // The tile is in every label: two tiles of one size never share a
        // run's name or folders.
        assert_eq!(c.label(), "cholesky:19200/960");
        assert_ne!(
            Case::parse("cholesky:9600/320").unwrap().slug(),
            Case::parse("cholesky:9600").unwrap().slug()
        );
        assert_eq!(c.slug(), "cholesky-19200-tile960");
    }

    #[test]
    fn a_kernel_without_samples_is_recognised() {
        let stderr = "[starpu] something\n[starpu][__starpu_history_based_job_expected_perf] Warning: model starpu_sgemm_gemm is not calibrated at all for cpu0_impl0 (Comb8) size 62668800 footprint 49e64657. Assuming it can not work there\nCodelet starpu_sgemm_gemm does not have a perfmodel, or is not calibrated enough\n";
        assert!(
            unsampled_kernel(stderr)
                .unwrap()
                .contains("starpu_sgemm_gemm is not calibrated at all")
        );
        assert_eq!(unsampled_kernel("Segmentation fault\n"), None);
    }

    #[test]
    fn task_counts_follow_the_algorithms() {
        // 816 tasks for 16x16 tiles: StarPU's own count for cholesky_implicit.
        assert_eq!(
            Case::parse("cholesky:15360").unwrap().expected_tasks(),
            Some(816)
        );
        // LU on 2x2 tiles: getrf 2, trsm 2, gemm 1.
        assert_eq!(Case::parse("lu:1920").unwrap().expected_tasks(), Some(5));
    }

    #[test]
    fn output_is_parsed() {
        let stdout = "# size\tms\tGFlop/s\tTms\tTGFlop/s\n9600\t619\t476.2\t178\t1653.0\n";
        let stderr = "Data transfer stats:\n\tNUMA 0 -> CUDA 0\t0.4000 GB\t259.9 MB/s\t(transfers : 13 - avg 3.5 MB)\n\
                      \tCUDA 1 -> NUMA 0\t0.0866 GB\t120.0 MB/s\t(transfers : 6 - avg 3.5 MB)\n\
                      \tCUDA 0 -> CUDA 1\t0.2000 GB\t80.0 MB/s\t(transfers : 4 - avg 3.5 MB)\n\
                      Total transfers: 0.6866 GB\nWorker stats:\nCUDA 0.0 (Fermi C2050 2.7 GiB)  \n\t78 task(s)\n\
                      \ttime split: total\nCPU 0                           \n\t142 task(s)\n\
                      plb: policy=greedy ctx=0 tasks=220 executed=220 workers=12 popped=220 left=0\n";
        let o = parse(stdout, stderr);
        assert_eq!(
            (o.ms, o.gflops, o.gib),
            (Some(619.0), Some(476.2), Some(0.6866))
        );
        assert_eq!(o.bound_ms, Some(178.0));
        // Main memory to and from a GPU, and GPU to GPU.
        assert!(
            (o.host_gib.unwrap() - 0.4866).abs() < 1e-9,
            "{:?}",
            o.host_gib
        );
        assert_eq!(o.peer_gib, Some(0.2));
        assert_eq!(o.executed, Some(220));
        assert_eq!(o.by_kind.get("CUDA"), Some(&78));
        assert_eq!(o.ours, Some((220, 220, 0)));
        let gemm = parse("# x\ty\tz\tms\tGFlop/s\n3840\t3840\t3840\t69\t1646.5\n", "");
        assert_eq!((gemm.ms, gemm.gflops), (Some(69.0), Some(1646.5)));
        let case = Case::parse("cholesky:9600").unwrap();
        let mut ok = o.clone();
        ok.status = Ok(0);
        assert!(verdict(&case, &ok, true, Some(220)).is_ok());
        assert!(
            verdict(&case, &ok, true, Some(221))
                .unwrap_err()
                .contains("eager")
        );
        let mut lost = ok.clone();
        lost.ours = Some((220, 219, 1));
        assert!(
            verdict(&case, &lost, true, None)
                .unwrap_err()
                .contains("left=1")
        );
        let mut failed = ok;
        failed.status = Ok(134);
        assert!(verdict(&case, &failed, false, None).is_err());
    }
}
