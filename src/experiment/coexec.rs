//! `plb experiment coexec`: one data-parallel kernel co-executed on every
//! PU, as in the Sigmoid paper (issue 13): every balancer of ours (and
//! StarPU's `eager` and calibrated `dmda` on equal tasks) on the four
//! kernels (`binomial`, `nbody` regular; `mandelbrot`, `raytrace`
//! irregular), with the paper's metrics (`plb_core::coexec`).
//!
//! * **Real runs** (`plb app` child processes, interleaved repetitions):
//!   `pocl` is 1 CPU worker + 1 PoCL OpenCL worker, one core each (REAL
//!   devices of this machine, real transfers); `emu4`, `emu10` and
//!   `latency` are 2 CPU workers made heterogeneous by `PLB_EMULATE`
//!   (EMULATED: 1:4, 1:10, and a fast PU paying 20 ms per package). The
//!   solo times behind the maximum achievable speedup are measured the same
//!   way: the whole kernel in one block on that PU alone (its emulation
//!   moved to worker 0).
//! * **Simulated runs** (`coexec_sim.rs`): the same balancers and kernels
//!   on single nodes of the PLB-HAC paper's platform (SIMULATED; the
//!   irregular kernels carry their per-row cost profile).
//!
//! Energy: RAPL and NVML are looked for (and reported); the energy in the
//! tables is MODELLED from the idle and busy watts of a platform file
//! (`platforms/coexec-local.txt` for the real runs), always labelled so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};

use clap::Args;
use plb_core::bench::median;
use plb_core::coexec::{Metrics, Power, RunShape, metrics};
use plb_core::platform::{Platform, PuKind};

use super::{CALIBRATION_RUNS, STARPU_MODEL_BASED, gnuplot, write};
use crate::apps::{TAG, field};
use crate::cli::positive;
use crate::launch::clear_starpu_settings;

/// Ours (the five of the fifth paper first), then StarPU's.
const DEFAULT_BALANCERS: &str =
    "static,dynamic,hguided,adaptive,sigmoid,plb-hac,plb-hec,hdss,acosta,greedy,eager,dmda";

/// The power figures of this machine's PUs (MODELLED energy).
pub const LOCAL_POWER: &str = include_str!("../../platforms/coexec-local.txt");

/// Options of `plb experiment coexec`.
#[derive(Args)]
pub struct Options {
    /// Kernels (plb app names)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "binomial,nbody,mandelbrot,raytrace"
    )]
    pub kernels: Vec<String>,
    /// Balancers: ours (with arguments, e.g. hguided:k=3,min=64) and
    /// StarPU's (equal tasks of W/32 units)
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_BALANCERS,
          value_parser = crate::apps::app_policy)]
    pub balancers: Vec<String>,
    /// Real configurations: pocl, emu4, emu10, latency [default: all four;
    /// pocl,emu4 with --quick]
    #[arg(long, value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// Repetitions of every real run [default: 3, 1 with --quick]
    #[arg(long = "reps", value_name = "N", value_parser = positive::<usize>())]
    pub repetitions: Option<usize>,
    /// Problem size of every kernel [default: per kernel]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    pub n: Option<u64>,
    /// Platform file with `power` lines for the real PUs (classes of kind
    /// cpu: a CPU core, gpu: the emulated accelerator)
    #[arg(long, value_name = "FILE")]
    pub power: Option<PathBuf>,
    /// The BestHG sweep in the real runs too (HGuided over k and the
    /// minimum package, one run per point, the best measured as besthg);
    /// the simulated part always sweeps
    #[arg(long)]
    pub sweep: bool,
    /// Skip the real runs
    #[arg(long)]
    pub no_real: bool,
    /// Skip the simulated runs
    #[arg(long)]
    pub no_simulated: bool,
    /// Output directory (CSV, Markdown, PNG)
    #[arg(long = "out", value_name = "DIR", default_value = "results/coexec")]
    pub out_dir: PathBuf,
    /// Reduced sizes, one repetition, two configurations (CI)
    #[arg(long)]
    pub quick: bool,
}

impl Options {
    fn reps(&self) -> usize {
        self.repetitions.unwrap_or(if self.quick { 1 } else { 3 })
    }
}

/// A real configuration: what the two PUs are and how each runs alone.
struct Config {
    name: &'static str,
    label: &'static str,
    /// `plb app` arguments of the co-executed run.
    args: &'static [&'static str],
    /// `PLB_EMULATE` of the co-executed run.
    emulate: Option<&'static str>,
    /// The PUs: worker-label prefix, `plb app` arguments and emulation of
    /// its solo run, power class kind.
    pus: [(
        &'static str,
        &'static [&'static str],
        Option<&'static str>,
        PuKind,
    ); 2],
}

const CONFIGS: &[Config] = &[
    Config {
        name: "pocl",
        label: "REAL: 1 CPU worker + 1 PoCL OpenCL worker (one core each)",
        args: &["--ncpu", "1", "--opencl"],
        emulate: None,
        pus: [
            ("cpu", &["--ncpu", "1"], None, PuKind::Cpu),
            ("opencl", &["--ncpu", "0", "--opencl"], None, PuKind::Cpu),
        ],
    },
    Config {
        name: "emu4",
        label: "EMULATED 1:4 (2 CPU workers, worker 0 four times slower)",
        args: &["--ncpu", "2"],
        emulate: Some("0:speed=0.25"),
        pus: [
            ("cpu0", &["--ncpu", "1"], Some("0:speed=0.25"), PuKind::Cpu),
            ("cpu1", &["--ncpu", "1"], None, PuKind::Gpu),
        ],
    },
    Config {
        name: "emu10",
        label: "EMULATED 1:10 (2 CPU workers, worker 0 ten times slower)",
        args: &["--ncpu", "2"],
        emulate: Some("0:speed=0.1"),
        pus: [
            ("cpu0", &["--ncpu", "1"], Some("0:speed=0.1"), PuKind::Cpu),
            ("cpu1", &["--ncpu", "1"], None, PuKind::Gpu),
        ],
    },
    Config {
        name: "latency",
        label: "EMULATED latency-bound accelerator (worker 0 four times slower, worker 1 pays 20 ms per package)",
        args: &["--ncpu", "2"],
        emulate: Some("0:speed=0.25; 1:latency=20ms"),
        pus: [
            ("cpu0", &["--ncpu", "1"], Some("0:speed=0.25"), PuKind::Cpu),
            (
                "cpu1",
                &["--ncpu", "1"],
                Some("0:latency=20ms"),
                PuKind::Gpu,
            ),
        ],
    },
];

/// The real BestHG grid (one run per point): `k`, and the minimum package
/// as a fraction of `W`.
const REAL_SWEEP_K: [f64; 3] = [1.0, 2.0, 4.0];
const REAL_SWEEP_MIN: [u64; 3] = [256, 64, 16];

/// Kernel sizes: (name, full, quick). About 0.5-1 s on one core at full
/// size (the fast PU alone).
const SIZES: &[(&str, u64, u64)] = &[
    ("binomial", 32_768, 4_096),
    ("nbody", 12_288, 2_048),
    ("mandelbrot", 1_088, 256),
    ("raytrace", 1_440, 256),
];

fn size(opts: &Options, kernel: &str) -> u64 {
    opts.n.unwrap_or_else(|| {
        let s = SIZES.iter().find(|s| s.0 == kernel);
        match (s, opts.quick) {
            (Some(s), false) => s.1,
            (Some(s), true) => s.2,
            (None, _) => crate::apps::find(kernel).map_or(1024, |a| a.test_n),
        }
    })
}

/// Repetitions of every solo run (at least).
const SOLO_REPS: usize = 3;

/// A thread spinning on the machine's other core while a PU runs alone.
///
/// This VM's two vCPUs slow each other down when both run (a kernel alone
/// on one core took 0.41-0.66 s, bimodal, and 0.58-0.66 s with the other
/// core busy): a co-executed run always has both busy, so a solo time
/// taken beside an idle core would overstate the PU's speed in
/// co-execution and the maximum achievable speedup with it. Stops (and is
/// joined) on drop.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start() -> Busy {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut x = 1.0f64;
            while !flag.load(Ordering::Relaxed) {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x * 0.999_999_9 + 1e-7);
                }
            }
        });
        Busy {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One `plb app` run's summary.
struct AppRun {
    makespan_s: f64,
    workers: Vec<String>,
    finish_s: Vec<f64>,
    busy_s: Vec<f64>,
    tasks: u64,
}

fn list<T: std::str::FromStr>(line: &str, key: &str) -> Result<Vec<T>, String> {
    field(line, key)
        .ok_or_else(|| format!("no {key} in: {line}"))?
        .split(',')
        .map(|v| v.parse().map_err(|_| format!("bad {key} in: {line}")))
        .collect()
}

/// Runs `plb app` once; `home` is the run's private `STARPU_HOME`.
#[allow(clippy::too_many_arguments)]
fn app_run(
    kernel: &str,
    n: u64,
    sched: &str,
    args: &[&str],
    emulate: Option<&str>,
    home: &Path,
    calibrate: bool,
    trace: Option<&Path>,
) -> Result<AppRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find plb: {e}"))?;
    let mut cmd = Process::new(exe);
    clear_starpu_settings(&mut cmd);
    cmd.args(["app", kernel, "--n", &n.to_string(), "--sched", sched])
        .args(args)
        .env("STARPU_HOME", home)
        .env("STARPU_PERF_MODEL_HOMOGENEOUS_CPU", "0")
        .env("STARPU_CALIBRATE", if calibrate { "1" } else { "0" })
        .env("STARPU_SILENT", "1")
        .env("POCL_MAX_PTHREAD_COUNT", "1")
        .env("POCL_CPU_MAX_CU_NUM", "1")
        .stdin(Stdio::null());
    if let Some(e) = emulate {
        cmd.env("PLB_EMULATE", e);
    }
    if let Some(t) = trace {
        cmd.arg("--trace").arg(t);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run plb app: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!(
        "plb app {kernel} --n {n} --sched {sched} {}",
        args.join(" ")
    );
    let line = stdout.lines().find(|l| l.starts_with(TAG)).ok_or_else(|| {
        format!(
            "{what}: no summary line ({}): {}",
            out.status,
            stderr.trim()
        )
    })?;
    if field(line, "verify") != Some("ok") || !out.status.success() {
        return Err(format!("{what}: verification failed: {line}"));
    }
    if emulate.is_some() && !stderr.contains("EMULATION ACTIVE") {
        return Err(format!("{what}: the emulation was not applied"));
    }
    Ok(AppRun {
        makespan_s: field(line, "makespan_s")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no makespan in: {line}"))?,
        workers: list(line, "workers")?,
        finish_s: list(line, "finish_s")?,
        busy_s: list(line, "busy_s")?,
        tasks: field(line, "tasks")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

/// Reorders a run's per-worker figures into the configuration's PU order
/// (worker labels are matched by prefix: `cpu`, `opencl`, `cpu0`...).
fn shape(run: &AppRun, cfg: &Config) -> Result<RunShape, String> {
    let mut finish = Vec::new();
    let mut busy = Vec::new();
    for (prefix, ..) in &cfg.pus {
        let w = run
            .workers
            .iter()
            .position(|w| w.starts_with(prefix))
            .ok_or_else(|| format!("{}: no worker {prefix}* in {:?}", cfg.name, run.workers))?;
        finish.push(run.finish_s[w]);
        busy.push(run.busy_s[w]);
    }
    Ok(RunShape {
        makespan_s: run.makespan_s,
        finish_s: finish,
        busy_s: busy,
    })
}

/// One row of the results (real or simulated).
pub struct Row {
    pub source: &'static str,
    pub config: String,
    pub kernel: String,
    pub balancer: String,
    pub rep: usize,
    pub packages: u64,
    pub m: Metrics,
}

pub const CSV_HEADER: &str = "source,config,kernel,balancer,rep,packages,makespan_s,balance,unused_pus,speedup,max_speedup,efficiency,energy_j,energy_norm,edp_norm,energy_label";

impl Row {
    pub fn csv(&self) -> String {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
        format!(
            "{},{},{},{},{},{},{:.6},{:.4},{},{:.4},{:.4},{:.4},{},{},{},MODELLED",
            self.source,
            self.config,
            self.kernel,
            self.balancer,
            self.rep,
            self.packages,
            self.m.makespan_s,
            self.m.balance,
            self.m.unused,
            self.m.speedup,
            self.m.max_speedup,
            self.m.efficiency,
            opt(self.m.energy_j),
            opt(self.m.energy_norm),
            opt(self.m.edp_norm),
        )
    }
}

/// What the machine offers for measured energy.
pub fn energy_sources() -> String {
    let rapl = std::fs::read_dir("/sys/class/powercap")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("intel-rapl"))
                .filter(|e| std::fs::read_to_string(e.path().join("energy_uj")).is_ok())
                .count()
        })
        .unwrap_or(0);
    let nvml = [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib64/libnvidia-ml.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    format!(
        "RAPL: {}; NVML: {}; energy below is MODELLED from the platform file's idle/busy watts",
        if rapl > 0 {
            format!("{rapl} readable zone(s) (whole-package energy, not per device: not used)")
        } else {
            "absent (no readable /sys/class/powercap/intel-rapl*)".into()
        },
        if nvml {
            "libnvidia-ml present (no CUDA worker here: not used)"
        } else {
            "absent (no libnvidia-ml.so.1)"
        }
    )
}

/// The watts of the real PUs of `cfg` (by kind, from the power file).
fn local_power(platform: &Platform, cfg: &Config) -> Result<Vec<Power>, String> {
    cfg.pus
        .iter()
        .map(|(.., kind)| {
            platform
                .classes
                .iter()
                .find(|c| c.kind == *kind)
                .and_then(|c| c.power)
                .ok_or_else(|| {
                    format!(
                        "the power file has no `power` line for a {} class",
                        kind.name()
                    )
                })
        })
        .collect()
}

/// The real runs; returns the rows and the files written.
fn real(opts: &Options, written: &mut Vec<PathBuf>) -> Result<Vec<Row>, String> {
    let power_text = match &opts.power {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => LOCAL_POWER.to_string(),
    };
    let platform = Platform::parse(&power_text).map_err(|e| format!("power file: {e}"))?;
    let names: Vec<String> = match &opts.configs {
        Some(c) => c.clone(),
        None if opts.quick => vec!["pocl".into(), "emu4".into()],
        None => CONFIGS.iter().map(|c| c.name.to_string()).collect(),
    };
    let configs: Vec<&Config> = names
        .iter()
        .map(|n| {
            CONFIGS.iter().find(|c| c.name == n).ok_or_else(|| {
                let all: Vec<&str> = CONFIGS.iter().map(|c| c.name).collect();
                format!("unknown configuration {n} (one of {})", all.join(", "))
            })
        })
        .collect::<Result<_, _>>()?;
    let traces = opts.out_dir.join("traces");
    std::fs::create_dir_all(&traces).map_err(|e| format!("{}: {e}", traces.display()))?;
    let home = tempdir("plb-coexec")?;
    let mut rows = Vec::new();
    let reps = opts.reps();
    let mut sweep = String::from(
        "# BestHG sweep, real runs\n\nHGuided over k and the minimum package (W/16, W/64, W/256), one run each; the best is measured as `besthg`.\n\n| config | kernel | best | efficiency (sweep run) |\n|---|---|---|---|\n",
    );
    for cfg in configs {
        let power = local_power(&platform, cfg)?;
        eprintln!("coexec: {} ({})", cfg.name, cfg.label);
        for kernel in &opts.kernels {
            let n = size(opts, kernel);
            // Solo times: the whole kernel in one block on each PU alone,
            // median of the repetitions, the other core kept busy (see
            // `Busy`).
            let mut solo = Vec::new();
            let busy = Busy::start();
            for (prefix, args, emulate, _) in &cfg.pus {
                let mut times = Vec::new();
                for _ in 0..reps.max(SOLO_REPS) {
                    let r = app_run(
                        kernel,
                        n,
                        "greedy:1000000000",
                        args,
                        *emulate,
                        &home,
                        false,
                        None,
                    )?;
                    times.push(r.makespan_s);
                }
                let t = median(&mut times);
                eprintln!(
                    "coexec:   {kernel} n={n}: {prefix} alone {t:.3} s (the other core busy; runs {})",
                    times
                        .iter()
                        .map(|t| format!("{t:.3}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                solo.push(t);
            }
            drop(busy);
            for b in opts
                .balancers
                .iter()
                .filter(|b| STARPU_MODEL_BASED.contains(&b.as_str()))
            {
                for _ in 0..CALIBRATION_RUNS {
                    app_run(kernel, n, b, cfg.args, cfg.emulate, &home, true, None)?;
                }
            }
            // BestHG (real runs, --sweep): HGuided over the grid once each,
            // the best then measured like every balancer, as `besthg`.
            let mut measured: Vec<(String, String)> = opts
                .balancers
                .iter()
                .map(|b| (b.clone(), b.clone()))
                .collect();
            if opts.sweep {
                let mut best: Option<(f64, String)> = None;
                for k in REAL_SWEEP_K {
                    for frac in REAL_SWEEP_MIN {
                        let spec = format!("hguided:k={k},min={}", (n / frac).max(1));
                        let r =
                            app_run(kernel, n, &spec, cfg.args, cfg.emulate, &home, false, None)?;
                        let e = metrics(&shape(&r, cfg)?, &solo, None)
                            .map_err(|e| e.to_string())?
                            .efficiency;
                        eprintln!("coexec:   {kernel} sweep {spec}: efficiency {e:.3}");
                        if best.as_ref().is_none_or(|b| e > b.0) {
                            best = Some((e, spec));
                        }
                    }
                }
                if let Some((e, spec)) = best {
                    let _ = writeln!(sweep, "| {} | {kernel} | `{spec}` | {e:.3} |", cfg.name);
                    measured.push(("besthg".into(), spec));
                }
            }
            for rep in 0..reps {
                for (label, b) in &measured {
                    let trace = (rep == 0).then(|| {
                        traces.join(format!(
                            "{}-{kernel}-{}.csv",
                            cfg.name,
                            label.replace([':', ','], "_")
                        ))
                    });
                    let r = app_run(
                        kernel,
                        n,
                        b,
                        cfg.args,
                        cfg.emulate,
                        &home,
                        false,
                        trace.as_deref(),
                    )?;
                    let m = metrics(&shape(&r, cfg)?, &solo, Some(&power))
                        .map_err(|e| e.to_string())?;
                    eprintln!(
                        "coexec:   {kernel} {label:<10} rep {rep}: {:.3} s, efficiency {:.3}, balance {:.3}",
                        m.makespan_s, m.efficiency, m.balance
                    );
                    rows.push(Row {
                        source: "real",
                        config: cfg.name.to_string(),
                        kernel: kernel.clone(),
                        balancer: label.clone(),
                        rep,
                        packages: r.tasks,
                        m,
                    });
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&home);
    written.push(traces);
    if opts.sweep {
        let path = opts.out_dir.join("besthg-sweep-real.md");
        write(&path, &sweep)?;
        written.push(path);
    }
    Ok(rows)
}

/// A fresh private directory under the system's temporary directory.
fn tempdir(prefix: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Median of `f` over the rows of (source, config, kernel, balancer).
fn med(
    rows: &[Row],
    key: (&str, &str, &str, &str),
    f: impl Fn(&Metrics) -> Option<f64>,
) -> Option<f64> {
    let mut v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            (
                r.source,
                r.config.as_str(),
                r.kernel.as_str(),
                r.balancer.as_str(),
            ) == key
        })
        .filter_map(|r| f(&r.m))
        .collect();
    (!v.is_empty()).then(|| median(&mut v))
}

fn distinct<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> &'a str) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for r in rows {
        let x = f(r);
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Markdown tables: per (source, config), efficiency per kernel and
/// balancer, with the geometric means over regular and irregular kernels,
/// then balance and normalised EDP.
pub fn markdown(rows: &[Row], labels: &[(String, String)]) -> String {
    let mut md = String::new();
    for source in distinct(rows, |r| r.source) {
        let of_source: Vec<&Row> = rows.iter().filter(|r| r.source == source).collect();
        let mut configs: Vec<&str> = Vec::new();
        for r in &of_source {
            if !configs.contains(&r.config.as_str()) {
                configs.push(&r.config);
            }
        }
        for config in configs {
            let label = labels
                .iter()
                .find(|(c, _)| c == config)
                .map_or(config, |(_, l)| l.as_str());
            let sel: Vec<&Row> = of_source
                .iter()
                .copied()
                .filter(|r| r.config == config)
                .collect();
            let kernels = distinct_refs(&sel, |r| &r.kernel);
            let balancers = distinct_refs(&sel, |r| &r.balancer);
            for (title, f, fmt_geo) in [
                (
                    "co-execution efficiency",
                    (|m: &Metrics| Some(m.efficiency)) as fn(&Metrics) -> Option<f64>,
                    true,
                ),
                (
                    "balance (first finish / last finish)",
                    |m: &Metrics| Some(m.balance),
                    false,
                ),
                (
                    "EDP normalised to the fastest PU alone (MODELLED energy)",
                    |m: &Metrics| m.edp_norm,
                    true,
                ),
            ] {
                let _ = writeln!(
                    md,
                    "\n### {source} · {config}: {title}\n\n{label}; medians.\n"
                );
                let _ = write!(md, "| balancer |");
                for k in &kernels {
                    let _ = write!(md, " {k} |");
                }
                if fmt_geo {
                    let _ = write!(md, " geo-mean regular | geo-mean irregular |");
                }
                let _ = writeln!(md);
                let _ = writeln!(
                    md,
                    "|---|{}{}",
                    "---|".repeat(kernels.len()),
                    if fmt_geo { "---|---|" } else { "" }
                );
                for b in &balancers {
                    let _ = write!(md, "| {b} |");
                    let mut regular = Vec::new();
                    let mut irregular = Vec::new();
                    for k in &kernels {
                        let v = med(rows, (source, config, k, b), f);
                        match v {
                            Some(v) => {
                                let _ = write!(md, " {v:.3} |");
                                if IRREGULAR.contains(k) {
                                    irregular.push(v);
                                } else {
                                    regular.push(v);
                                }
                            }
                            None => {
                                let _ = write!(md, " – |");
                            }
                        }
                    }
                    if fmt_geo {
                        for g in [&regular, &irregular] {
                            match geo_mean(g) {
                                Some(v) => {
                                    let _ = write!(md, " {v:.3} |");
                                }
                                None => {
                                    let _ = write!(md, " – |");
                                }
                            }
                        }
                    }
                    let _ = writeln!(md);
                }
            }
        }
    }
    md
}

/// The irregular kernels (cost per unit unknown in advance).
pub const IRREGULAR: [&str; 2] = ["mandelbrot", "raytrace"];

fn distinct_refs<'a>(rows: &[&'a Row], f: impl Fn(&'a Row) -> &'a String) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for r in rows {
        let x = f(r).as_str();
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

fn geo_mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty() && v.iter().all(|x| *x > 0.0))
        .then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// Efficiency and EDP bar charts (one per source and configuration).
fn plots(rows: &[Row], out: &Path, written: &mut Vec<PathBuf>) {
    for source in distinct(rows, |r| r.source) {
        let sel: Vec<&Row> = rows.iter().filter(|r| r.source == source).collect();
        let configs = distinct_refs(&sel, |r| &r.config);
        for config in configs {
            let of: Vec<&Row> = sel.iter().copied().filter(|r| r.config == config).collect();
            let kernels = distinct_refs(&of, |r| &r.kernel);
            let balancers = distinct_refs(&of, |r| &r.balancer);
            for (what, f, ylabel) in [
                (
                    "efficiency",
                    (|m: &Metrics| Some(m.efficiency)) as fn(&Metrics) -> Option<f64>,
                    "co-execution efficiency",
                ),
                (
                    "edp",
                    |m: &Metrics| m.edp_norm,
                    "EDP / fastest PU alone (MODELLED)",
                ),
            ] {
                let dat = out.join(format!("{source}-{config}-{what}.dat"));
                let mut text = format!("balancer {}\n", kernels.join(" "));
                for b in &balancers {
                    let _ = write!(text, "{b}");
                    for k in &kernels {
                        let v = med(rows, (source, config, k, b), f).unwrap_or(f64::NAN);
                        let _ = write!(text, " {v:.4}");
                    }
                    text.push('\n');
                }
                if write(&dat, &text).is_err() {
                    continue;
                }
                let png = out.join(format!("{source}-{config}-{what}.png"));
                let cols: Vec<String> = (0..kernels.len())
                    .map(|i| {
                        format!(
                            "'{}' using {}:xtic(1) title columnhead",
                            dat.display(),
                            i + 2
                        )
                    })
                    .collect();
                let tag = if source == "real" { "" } else { " (SIMULATED)" };
                let script = format!(
                    "set terminal pngcairo size 1100,450\nset output '{}'\nset style data histograms\n\
                     set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n\
                     set key outside right\nset xtics rotate by -30\nset ylabel '{ylabel}'\nset yrange [0:*]\n\
                     set title '{what} per kernel and balancer: {source} {config}{tag}'\nplot {}\n",
                    png.display(),
                    cols.join(", ")
                );
                match gnuplot(&script) {
                    Ok(()) => written.push(png),
                    Err(e) => eprintln!("coexec: {e}"),
                }
                let _ = std::fs::remove_file(&dat);
            }
        }
    }
}

/// Package size over time, one line per balancer, from the traces of
/// one configuration and kernel (`traces/<config>-<kernel>-<balancer>.csv`).
pub fn package_plot(
    traces: &Path,
    prefix: &str,
    balancers: &[String],
    title: &str,
    png: &Path,
) -> Result<(), String> {
    let mut plots = Vec::new();
    for b in balancers {
        let f = traces.join(format!("{prefix}-{}.csv", b.replace([':', ','], "_")));
        if f.exists() {
            plots.push(format!(
                "'{}' using ($5):($3) every ::1 with points pt 7 ps 0.6 title '{b}'",
                f.display()
            ));
        }
    }
    if plots.is_empty() {
        return Err(format!("no trace {prefix}-* in {}", traces.display()));
    }
    let script = format!(
        "set terminal pngcairo size 1000,500\nset output '{}'\nset datafile separator ','\n\
         set logscale y\nset key outside right\nset xlabel 'package end (s)'\nset ylabel 'package size (units)'\n\
         set title '{title}'\nplot {}\n",
        png.display(),
        plots.join(", ")
    );
    gnuplot(&script)
}

/// Runs the experiment; returns the files written.
pub fn run(opts: &Options) -> Result<Vec<PathBuf>, String> {
    let out = &opts.out_dir;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut written = Vec::new();
    let mut rows = Vec::new();
    let mut labels: Vec<(String, String)> = CONFIGS
        .iter()
        .map(|c| (c.name.to_string(), c.label.to_string()))
        .collect();
    let energy = energy_sources();
    eprintln!("coexec: {energy}");
    if !opts.no_real {
        rows.extend(real(opts, &mut written)?);
        let traces = out.join("traces");
        for cfg in ["emu4", "pocl"] {
            for kernel in ["binomial", "mandelbrot"] {
                let png = out.join(format!("real-{cfg}-{kernel}-packages.png"));
                let title = format!("package sizes, {kernel}, {cfg} (real runs)");
                if package_plot(
                    &traces,
                    &format!("{cfg}-{kernel}"),
                    &opts.balancers,
                    &title,
                    &png,
                )
                .is_ok()
                {
                    written.push(png);
                }
            }
        }
    }
    if !opts.no_simulated {
        let sim = super::coexec_sim::run(opts, &mut written)?;
        rows.extend(sim.rows);
        labels.extend(sim.labels);
    }
    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    for r in &rows {
        csv.push_str(&r.csv());
        csv.push('\n');
    }
    let csv_path = out.join("coexec.csv");
    write(&csv_path, &csv)?;
    written.push(csv_path);
    let md = format!(
        "# Co-execution: efficiency, balance, EDP\n\n{energy}.\n\nGenerated by `plb experiment coexec{}`; raw rows in coexec.csv.\n{}",
        if opts.quick { " --quick" } else { "" },
        markdown(&rows, &labels)
    );
    let md_path = out.join("coexec.md");
    write(&md_path, &md)?;
    println!("{md}");
    written.push(md_path);
    plots(&rows, out, &mut written);
    Ok(written)
}
