//! `plb experiment`: the project's main job (issue 6 §4).
//!
//! 1. **EMULATED**: one of our applications (`plb app mm`) on 2 CPU workers
//!    of this machine with emulated heterogeneity
//!    ([`EMULATION`]: worker 0 four times slower, worker 1 paying 20 ms per
//!    task), under every policy of ours (divisible-load API) and StarPU's
//!    `eager`, `dmda` and `dmdas` (equal tasks), repeatedly and
//!    interleaved; mean, spread and speedup over `greedy`.
//! 2. **SIMULATED**: every balancer of `plb-core` on the PLB-HAC paper's
//!    five machines (1 to 5 of them), in virtual time, against the exact
//!    one-block optimum (`simulated.rs`).
//! 3. **SIMULATED task graph**: StarPU's Cholesky on idgraf (12 CPUs + 8
//!    GPUs, StarPU-SimGrid) under our task-graph policies and StarPU's
//!    (`plb simgrid`), when the SimGrid build exists.
//!
//! StarPU's model-based policies (`dmda`...) are calibrated before they
//! are measured (`STARPU_CALIBRATE=1` runs in a private `STARPU_HOME`, per
//! worker models), so the comparison is the one a StarPU user would make.
//!
//! Tables go to stdout, progress to stderr; CSV and PNG plots (gnuplot) go
//! to `--out` (default `results/`). `--starpu-examples` adds the earlier
//! comparison of `greedy` and `eager` on StarPU's own example programs.
//!
//! `plb experiment balance` (`balance.rs`, its child runs in
//! `balance_child.rs`) is the synthetic divisible-load benchmark;
//! `plb experiment dag` (`dag.rs`) runs StarPU's Cholesky and LU in real
//! runs under our task-graph policies and StarPU's, calibrated first.

pub mod balance;
mod balance_child;
pub mod cluster;
mod cluster_sim;
mod cluster_smpi;
mod cluster_smpi_dag;
pub mod coexec;
mod coexec_sim;
pub mod dag;
mod simulated;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::time::Instant;

use clap::{Args, Subcommand};

use crate::cli::{Failure, positive};
use crate::launch::PolicySelection;

/// The heterogeneity emulated on 2 CPU workers by every EMULATED
/// experiment (`plb experiment` and `plb experiment balance`): worker 0
/// four times slower, worker 1 paying 20 ms per task.
pub const EMULATION: &str = "0:speed=0.25; 1:latency=20ms";

/// The policies compared by default (ours, then StarPU's), comma-separated.
const DEFAULT_POLICIES: &str = "greedy,plb-hac,plb-hec,hdss,acosta,eager,dmda,dmdas";

/// `plb experiment [OPTIONS]`, or `plb experiment balance [OPTIONS]`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Command {
    #[command(subcommand)]
    balance: Option<Experiment>,
    #[command(flatten)]
    options: Options,
}

#[derive(Subcommand)]
enum Experiment {
    /// Divisible-load balancers vs the optimum on 2 CPU workers with
    /// EMULATED heterogeneity (real runs of a synthetic kernel)
    Balance(balance::Options),
    /// StarPU's Cholesky and LU in real runs under our policies and
    /// StarPU's, calibrated first (EMULATED heterogeneity, CPU + OpenCL)
    Dag(dag::Options),
    /// One kernel co-executed on every PU (the Sigmoid paper): every
    /// balancer on binomial, nbody, mandelbrot, raytrace; efficiency,
    /// balance, MODELLED energy and EDP; real, EMULATED and SIMULATED
    Coexec(coexec::Options),
    /// Partitioning across nodes (hierarchical FPM, PLB-HAC, the paper's
    /// baselines): REAL mpirun runs of plb app mm-mpi with EMULATED
    /// per-rank heterogeneity, the paper's Fig. 5 and the scaling to 1,000
    /// nodes SIMULATED
    Cluster(cluster::Options),
}

impl Command {
    pub fn run(self) -> Result<ExitCode, Failure> {
        match self.balance {
            Some(Experiment::Balance(opts)) => balance::run(&opts)?,
            Some(Experiment::Coexec(opts)) => {
                let written = coexec::run(&opts)?;
                println!("\nwritten:");
                for path in written {
                    println!("  {}", path.display());
                }
            }
            Some(Experiment::Cluster(opts)) => {
                let written = cluster::run(&opts)?;
                println!("\nwritten:");
                for path in written {
                    println!("  {}", path.display());
                }
            }
            Some(Experiment::Dag(opts)) => {
                let written = dag::run(&opts)?;
                println!("\nwritten:");
                for path in written {
                    println!("  {}", path.display());
                }
            }
            None => {
                let written = run(&self.options)?;
                println!("\nwritten (CSV raw data, PNG plots):");
                for path in written {
                    println!("  {}", path.display());
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Options of `plb experiment`.
#[derive(Args)]
pub struct Options {
    /// Repetitions [default: 3, 1 with --quick]
    #[arg(long = "reps", value_name = "N", value_parser = positive::<usize>())]
    pub repetitions: Option<usize>,
    /// The policies compared, comma-separated
    #[arg(
        long,
        value_name = "NAME,..",
        value_delimiter = ',',
        value_parser = crate::cli::policy_name,
        default_value = DEFAULT_POLICIES
    )]
    pub policies: Vec<String>,
    /// Where the CSV files and plots go
    #[arg(long = "out", value_name = "DIR", default_value = "results")]
    pub out_dir: PathBuf,
    /// Reduced sizes and one repetition (CI)
    #[arg(long)]
    pub quick: bool,
    /// The application of the EMULATED comparison
    #[arg(long, value_name = "NAME", default_value = "mm", value_parser = crate::apps::app_name())]
    pub app: String,
    /// Its size [default: 3072, 768 with --quick]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    pub n: Option<u64>,
    /// Also run StarPU's example programs under greedy and eager
    #[arg(long)]
    pub starpu_examples: bool,
}

impl Options {
    fn reps(&self) -> usize {
        self.repetitions.unwrap_or(if self.quick { 1 } else { 3 })
    }
    fn size(&self) -> u64 {
        self.n.unwrap_or(if self.quick { 768 } else { 3072 })
    }
}

/// Mean, sample standard deviation, minimum and maximum of a non-empty sample.
pub fn stats(x: &[f64]) -> (f64, f64, f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let sd = if x.len() > 1 {
        (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let min = x.iter().copied().fold(f64::INFINITY, f64::min);
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, sd, min, max)
}

/// One `plb app` run as its summary line reports it.
struct AppRun {
    makespan: f64,
    wall: f64,
    units: String,
    verify: String,
}

/// StarPU's policies that predict from its history models: calibrated
/// before they are measured.
pub const STARPU_MODEL_BASED: [&str; 4] = ["dmda", "dmdas", "dmdar", "modular-heft"];

/// Calibration runs (`STARPU_CALIBRATE=1`) given to StarPU's model-based
/// policies before they are measured.
pub const CALIBRATION_RUNS: usize = 2;

/// Runs `plb app <app> --n <n> --sched <sched> --ncpu 2` with [`EMULATION`]
/// in the private `STARPU_HOME` `home` (StarPU's models per worker:
/// `STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0`), with `calibrate` set for a
/// calibration run.
fn app_run(app: &str, n: u64, sched: &str, home: &Path, calibrate: bool) -> Result<AppRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find plb: {e}"))?;
    let mut cmd = Process::new(exe);
    cmd.args(["app", app, "--n", &n.to_string(), "--sched", sched])
        .args(["--ncpu", "2"])
        .env("PLB_EMULATE", EMULATION)
        .env("STARPU_HOME", home)
        .env("STARPU_PERF_MODEL_HOMOGENEOUS_CPU", "0")
        .env("STARPU_CALIBRATE", if calibrate { "1" } else { "0" })
        .env("STARPU_SILENT", "1")
        .env_remove("STARPU_SCHED")
        .env_remove("PLB_TRACE")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    let start = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run plb app: {e}"))?;
    let wall = start.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(crate::apps::TAG))
        .ok_or_else(|| {
            format!(
                "plb app {app} --n {n} --sched {sched}: no summary line ({}): {}",
                out.status,
                stderr.trim()
            )
        })?;
    if !stderr.contains("EMULATION ACTIVE") {
        return Err(format!(
            "plb app {app} --sched {sched}: the emulation was not applied (no EMULATION ACTIVE banner)"
        ));
    }
    let field = |k| crate::apps::field(line, k).unwrap_or("?").to_string();
    let makespan = field("makespan_s")
        .parse::<f64>()
        .map_err(|_| format!("no makespan in: {line}"))?;
    let run = AppRun {
        makespan,
        wall,
        units: field("units"),
        verify: field("verify"),
    };
    if run.verify != "ok" || !out.status.success() {
        return Err(format!("{app} under {sched}: verification failed: {line}"));
    }
    Ok(run)
}

/// Runs gnuplot on `script`; a missing gnuplot is reported, not fatal.
pub fn gnuplot(script: &str) -> Result<(), String> {
    let mut child = match Process::new("gnuplot")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Err(format!("gnuplot not available ({e}); no plot written")),
    };
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| format!("gnuplot: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("gnuplot: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gnuplot failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The EMULATED comparison; returns the files written.
fn emulated(opts: &Options, written: &mut Vec<PathBuf>) -> Result<(), String> {
    let reps = opts.reps();
    let n = opts.size();
    let app = &opts.app;
    eprintln!(
        "plb experiment: EMULATED comparison, plb app {app} --n {n} on 2 CPU workers of this machine \
         with PLB_EMULATE=\"{EMULATION}\" (worker 0 4x slower, worker 1 +20 ms per task; \
         timings are not real heterogeneous hardware), {} policies x {reps} repetition(s), interleaved; \
         StarPU's model-based policies calibrated first ({CALIBRATION_RUNS} STARPU_CALIBRATE=1 runs each, \
         private STARPU_HOME, STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0 so its models tell the workers apart)",
        opts.policies.len()
    );
    let total = opts.policies.len() * reps;
    // A private STARPU_HOME: StarPU's model-based policies are calibrated
    // in it first, as a StarPU user would (STARPU_CALIBRATE=1 runs).
    let home = opts.out_dir.join("experiment-starpu-home");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {}: {e}", home.display()))?;
    for p in opts
        .policies
        .iter()
        .filter(|p| STARPU_MODEL_BASED.contains(&p.as_str()))
    {
        for i in 0..CALIBRATION_RUNS {
            let r = app_run(app, n, p, &home, true)?;
            eprintln!(
                "  calibration {}/{CALIBRATION_RUNS} of {p} (STARPU_CALIBRATE=1, not measured): {:.3} s",
                i + 1,
                r.makespan
            );
        }
    }
    let mut runs: Vec<Vec<AppRun>> = opts.policies.iter().map(|_| Vec::new()).collect();
    let mut csv = String::from(
        "# EMULATED: real StarPU runs on this machine, heterogeneity emulated by PLB_EMULATE\n\
         form,app,n,policy,repetition,makespan_s,wall_s,units_w0,units_w1,verify\n",
    );
    let started = Instant::now();
    let mut k = 0;
    for rep in 0..reps {
        for (i, p) in opts.policies.iter().enumerate() {
            k += 1;
            let r = app_run(app, n, p, &home, false)?;
            eprintln!(
                "  [{k}/{total}] EMULATED {app} n={n} rep {}/{reps} {p:<8} makespan {:.3} s (wall {:.1} s, {:.0} s elapsed)",
                rep + 1,
                r.makespan,
                r.wall,
                started.elapsed().as_secs_f64()
            );
            let (u0, u1) = r.units.split_once(',').unwrap_or((&r.units, ""));
            let _ = writeln!(
                csv,
                "emulated,{app},{n},{p},{rep},{:.6},{:.3},{u0},{u1},{}",
                r.makespan, r.wall, r.verify
            );
            runs[i].push(r);
        }
    }
    let base = opts
        .policies
        .iter()
        .position(|p| p == "greedy")
        .map(|i| stats(&runs[i].iter().map(|r| r.makespan).collect::<Vec<_>>()).0);
    println!(
        "\nEMULATED (real StarPU runs, PLB_EMULATE=\"{EMULATION}\", 2 CPU workers): plb app {app} --n {n}, {reps} repetition(s); \
         StarPU's model-based policies calibrated first ({CALIBRATION_RUNS} STARPU_CALIBRATE=1 runs, STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0)"
    );
    println!(
        "{:<9} {:<8} {:>10} {:>9} {:>9} {:>9} {:>11} {:>12}",
        "", "policy", "mean s", "sd s", "min s", "max s", "vs greedy", "units w0,w1"
    );
    let mut dat = String::from("# policy mean_s sd_s min_s max_s speedup_vs_greedy\n");
    for (p, rs) in opts.policies.iter().zip(&runs) {
        let t: Vec<f64> = rs.iter().map(|r| r.makespan).collect();
        let (mean, sd, min, max) = stats(&t);
        let speedup = base.map_or(f64::NAN, |b| b / mean);
        let units = rs.last().map_or("?", |r| r.units.as_str());
        println!(
            "{:<9} {p:<8} {mean:>10.3} {sd:>9.3} {min:>9.3} {max:>9.3} {speedup:>10.2}x {units:>12}",
            "EMULATED"
        );
        let _ = writeln!(dat, "{p} {mean:.6} {sd:.6} {min:.6} {max:.6} {speedup:.4}");
    }
    if base.is_none() {
        println!("(greedy not among the policies: no speedup column)");
    }
    println!(
        "speedup = greedy's mean makespan / the policy's mean makespan (above 1: faster than greedy)"
    );
    let csv_path = opts.out_dir.join("experiment-emulated.csv");
    write(&csv_path, &csv)?;
    written.push(csv_path);
    let dat_path = opts.out_dir.join("experiment-emulated.dat");
    write(&dat_path, &dat)?;
    let png = opts.out_dir.join("experiment-emulated.png");
    let script = format!(
        "set terminal pngcairo size 900,500\nset output '{png}'\n\
         set title \"EMULATED: plb app {app} --n {n}, 2 CPU workers, PLB_EMULATE='{EMULATION}' ({reps} rep.)\" noenhanced\n\
         set ylabel 'makespan (s), mean and min..max'\nset style fill solid 0.5\nset boxwidth 0.6\n\
         set yrange [0:*]\nset xtics noenhanced\nunset key\n\
         plot '{dat}' using 0:2:xtic(1) with boxes lc rgb '#4477aa', \
         '' using 0:2:4:5 with yerrorbars lc rgb 'black' pt 0, \
         '' using 0:($5):(sprintf('%.2fx', $6)) with labels offset 0,1 notitle\n",
        png = png.display(),
        dat = dat_path.display(),
    );
    match gnuplot(&script) {
        Ok(()) => written.push(png),
        Err(e) => eprintln!("plb experiment: {e}"),
    }
    written.push(dat_path);
    Ok(())
}

/// Runs the main job; returns the files written.
pub fn run(opts: &Options) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", opts.out_dir.display()))?;
    let started = Instant::now();
    let mut written = Vec::new();
    emulated(opts, &mut written)?;

    eprintln!("plb experiment: SIMULATED comparison on the PLB-HAC paper's five machines ...");
    let sim = simulated::run(opts.reps(), opts.quick)?;
    println!("\n{}", sim.table);
    let sim_csv = opts.out_dir.join("experiment-simulated.csv");
    write(&sim_csv, &sim.csv)?;
    written.push(sim_csv);
    let sim_dat = opts.out_dir.join("experiment-simulated.dat");
    write(&sim_dat, &sim.dat)?;
    let png = opts.out_dir.join("experiment-simulated.png");
    match gnuplot(&sim.gnuplot(&sim_dat, &png)) {
        Ok(()) => written.push(png),
        Err(e) => eprintln!("plb experiment: {e}"),
    }
    written.push(sim_dat);

    simgrid_dag(opts, &mut written)?;

    if opts.starpu_examples {
        written.push(examples(opts)?);
    }
    eprintln!(
        "plb experiment: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(written)
}

/// The DAG part: one Cholesky on the SIMULATED idgraf (StarPU-SimGrid)
/// under a few policies, by `plb simgrid` (StarPU's dmda-family policies
/// use the sampled, i.e. calibrated, models; ours have a learning run).
/// Skipped, with a note, when the SimGrid build is missing.
fn simgrid_dag(opts: &Options, written: &mut Vec<PathBuf>) -> Result<(), String> {
    let examples =
        crate::simgrid::run::default_prefix().join("lib/starpu/examples/cholesky_implicit");
    let library = crate::simgrid::run::simgrid_library();
    if !examples.is_file() || !library.is_file() {
        println!(
            "\nSIMULATED task graph (StarPU-SimGrid): skipped, no SimGrid build ({} or {} missing; \
             bash scripts/simgrid.sh --build-only makes them)",
            examples.display(),
            library.display()
        );
        return Ok(());
    }
    let case = if opts.quick {
        "cholesky:9600"
    } else {
        "cholesky:19200"
    };
    let out = opts.out_dir.join("simgrid-dag");
    eprintln!("plb experiment: SIMULATED task graph, {case} on idgraf (StarPU-SimGrid) ...");
    let exe = std::env::current_exe().map_err(|e| format!("cannot find plb: {e}"))?;
    let status = Process::new(exe)
        .args(["simgrid", "--machines", "idgraf", "--cases", case])
        .args([
            "--policies",
            "plb-heft,dada,dada-cp,plb-hac,eager,dmda,dmdas,modular-heft",
        ])
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run plb simgrid: {e}"))?;
    if !status.success() {
        return Err(format!(
            "plb simgrid (the task-graph part) failed: {status}"
        ));
    }
    for f in ["simgrid.md", "simgrid.csv", "simgrid-idgraf.png"] {
        written.push(out.join(f));
    }
    Ok(())
}

/// One StarPU example program with its arguments.
struct Workload {
    label: &'static str,
    program: &'static str,
    args: &'static [&'static str],
}

const WORKLOADS: &[Workload] = &[
    Workload {
        label: "sgemm 2048^3, 8x8 blocks",
        program: "sgemm",
        args: &["-x", "2048", "-y", "2048", "-z", "2048", "-nblocks", "8"],
    },
    Workload {
        label: "cholesky 4096, 16x16 tiles",
        program: "cholesky_implicit",
        args: &["-size", "4096", "-nblocks", "16"],
    },
];

/// Where Debian installs StarPU's examples (`$STARPU_EXAMPLES_DIR` overrides).
pub fn examples_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("STARPU_EXAMPLES_DIR") {
        return Some(PathBuf::from(dir));
    }
    std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("starpu/examples"))
        .find(|p| p.is_dir())
}

/// Runs one program once under `policy`; returns wall seconds, or why it failed.
fn run_once(
    program: &Path,
    args: &[&str],
    policy: &PolicySelection,
    home: &Path,
) -> Result<f64, String> {
    let mut cmd = Process::new(program);
    cmd.args(args)
        .env("STARPU_HOME", home)
        .env("STARPU_SILENT", "1")
        .env("PLB_SUMMARY", "1")
        .env_remove("LD_PRELOAD")
        .env_remove("STARPU_SCHED_LIB")
        .env_remove("PLB_EMULATE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    policy.apply(&mut cmd);
    let start = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let secs = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            stderr.trim()
        ));
    }
    let tag = format!("plb: policy={} ", policy.sched);
    if policy.is_ours() && !stderr.lines().any(|l| l.starts_with(&tag)) {
        return Err(format!(
            "policy {} was not loaded (no summary line)",
            policy.sched
        ));
    }
    Ok(secs)
}

/// `--starpu-examples`: StarPU's example programs under `greedy` and
/// `eager` (real runs, default workers, no emulation); returns the CSV path.
fn examples(opts: &Options) -> Result<PathBuf, String> {
    let reps = opts.reps();
    let dir = examples_dir()
        .ok_or("StarPU's examples were not found: install starpu-examples (scripts/setup.sh) or set STARPU_EXAMPLES_DIR")?;
    let policies = ["greedy", "eager"]
        .iter()
        .map(|p| PolicySelection::new(p))
        .collect::<Result<Vec<_>, _>>()?;
    let home = std::env::temp_dir().join(format!("plb-experiment-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {}: {e}", home.display()))?;
    eprintln!(
        "plb experiment: StarPU example programs, real runs (StarPU {}, default workers, no emulation), \
         {reps} repetition(s) per policy, interleaved",
        starpu_plb::STARPU_SERIES,
    );
    let mut csv = String::from("workload,policy,repetition,seconds\n");
    let mut table = Vec::new();
    for w in WORKLOADS {
        let program = dir.join(w.program);
        let mut times = vec![Vec::new(); policies.len()];
        for rep in 0..reps {
            for (i, p) in policies.iter().enumerate() {
                let t = run_once(&program, w.args, p, &home)?;
                eprintln!(
                    "  real {} rep {}/{reps} {}: {t:.3} s",
                    w.label,
                    rep + 1,
                    p.sched
                );
                let _ = writeln!(csv, "{},{},{},{:.4}", w.program, p.sched, rep, t);
                times[i].push(t);
            }
        }
        table.push((w.label, times));
    }
    let _ = std::fs::remove_dir_all(&home);
    println!(
        "\nREAL (StarPU example programs, default workers, no emulation)\n{:<28} {:<10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "workload", "policy", "mean s", "sd s", "min s", "max s", "vs greedy"
    );
    for (label, times) in &table {
        let base = stats(&times[0]).0;
        for (p, t) in policies.iter().zip(times) {
            let (mean, sd, min, max) = stats(t);
            println!(
                "{label:<28} {:<10} {mean:>10.3} {sd:>10.3} {min:>10.3} {max:>10.3} {:>11.2}x",
                p.sched,
                base / mean
            );
        }
    }
    let path = opts.out_dir.join("experiment-starpu-examples.csv");
    write(&path, &csv)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::stats;

    #[test]
    fn stats_of_samples() {
        let (mean, sd, min, max) = stats(&[1.0, 2.0, 3.0]);
        assert_eq!((mean, min, max), (2.0, 1.0, 3.0));
        assert!((sd - 1.0).abs() < 1e-12);
        assert_eq!(stats(&[4.0]), (4.0, 0.0, 4.0, 4.0));
    }
}
