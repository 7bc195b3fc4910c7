//! `plb experiment dag`: StarPU's own task-graph applications (Debian's
//! `cholesky_implicit` and `lu_implicit_example_float`) in real runs on this
//! machine, under our policies and StarPU's, compared fairly:
//!
//! * every (configuration, application) gets a private `STARPU_HOME`;
//!   StarPU's model-based policies are calibrated first (`--calibration`
//!   runs of `dmda` with `STARPU_CALIBRATE=1`; `dmda`, `dmdas` and `dmdar`
//!   share those per-codelet models), and our task-graph policies
//!   (`plb-heft`, `dada`, `dada-cp`) have one learning run each (their
//!   models persist under that `STARPU_HOME`); neither is measured;
//! * StarPU's LP bound of the run (`PLB_BOUND=1`, from the calibrated
//!   models) is asked once per case;
//! * the measured repetitions are interleaved over the policies; medians
//!   and the min–max spread are reported, with ratios to `eager` and to
//!   StarPU's best policy of the same runs.
//!
//! Configurations: `emulated` (2 CPU workers, worker 0 four times slower by
//! `PLB_EMULATE`; `STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0` so that StarPU's
//! models can tell the two workers apart, as ours do) and `opencl` (one CPU
//! and one PoCL OpenCL worker: Debian's Cholesky and LU have no OpenCL
//! implementation, so every task runs on the CPU and this configuration
//! measures scheduling overhead only; it is said so in the output), and,
//! when asked for, `cpu` (2 CPU workers of this machine, no emulation).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::Instant;

use clap::Args;

use super::{examples_dir, gnuplot, write};
use crate::cli::positive;
use crate::launch::{clear_starpu_settings, find_library};
use crate::simgrid::Variant;
use plb_core::bench::median;
use plb_core::paired::PairedRatio;
use starpu_plb::catalog;

/// The emulation of the `emulated` configuration.
pub const DAG_EMULATION: &str = "0:speed=0.25";

/// Policies compared by default (ours, then StarPU's).
const DEFAULT_POLICIES: &str = "greedy,plb-hac,plb-heft,dada,dada-cp,eager,lws,dmda,dmdas,dmdar,dmdasd,modular-heft,modular-heft-prio,heteroprio";

/// StarPU's policies whose history models the calibration runs fill.
const MODEL_BASED: [&str; 6] = [
    "dmda",
    "dmdas",
    "dmdar",
    "dmdasd",
    "modular-heft",
    "modular-heft-prio",
];

/// Options of `plb experiment dag`.
#[derive(Args)]
pub struct Options {
    /// Repetitions [default: 5, 1 with --quick]
    #[arg(long = "reps", value_name = "N", value_parser = positive::<usize>())]
    pub repetitions: Option<usize>,
    /// Policies, comma-separated (ours and StarPU's), each with settings
    /// if wanted: `NAME[+VAR=VALUE...]` (`plb-heft+PLB_CPU_ORDER=arrival`;
    /// PLB_* and STARPU_* variables), labelled as written
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_POLICIES,
          value_parser = crate::cli::policy_variant)]
    pub policies: Vec<Variant>,
    /// Applications: cholesky, lu, gemm (StarPU's sgemm: nblocks² coarse
    /// independent tasks per iteration, the few-task case)
    #[arg(long, value_delimiter = ',', default_value = "cholesky,lu")]
    pub apps: Vec<String>,
    /// Configurations: emulated, opencl, cpu (2 CPU workers, no emulation)
    /// [default: emulated,opencl; emulated with --quick]
    #[arg(long, value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// Matrix size [default: 3840, 1920 with --quick]
    #[arg(long, value_name = "N", value_parser = positive::<u32>())]
    pub n: Option<u32>,
    /// Tiles per dimension [default: 16, 8 with --quick]
    #[arg(long, value_name = "B", value_parser = positive::<u32>())]
    pub nblocks: Option<u32>,
    /// Calibration runs (STARPU_CALIBRATE=1) before the measured ones
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub calibration: usize,
    /// Output directory (CSV, Markdown, PNG)
    #[arg(long = "out", value_name = "DIR", default_value = "results/dag")]
    pub out_dir: PathBuf,
    /// Reduced sizes, one repetition, the emulated configuration only (CI)
    #[arg(long)]
    pub quick: bool,
}

/// One measured run.
struct Run {
    /// The interleaved round it ran in.
    rep: usize,
    ms: f64,
}

/// Coverage of the paired ratios' interval ([`PairedRatio`]).
const PAIRED_LEVEL: f64 = 0.95;

/// The ratio to `eager` that issue 23's real-run target allows.
const EAGER_LIMIT: f64 = 1.05;

/// The runs' times by round (NaN where a round has none), for pairing.
fn by_round(runs: &[Run], reps: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; reps];
    for r in runs {
        if let Some(slot) = out.get_mut(r.rep) {
            *slot = r.ms;
        }
    }
    out
}

/// A paired ratio as a table cell: `median [low–high]`, `-` when the runs
/// give no interval.
fn paired_cell(p: Option<PairedRatio>) -> String {
    p.map_or("-".into(), |p| {
        format!("{:.2} [{:.2}–{:.2}]", p.median, p.low, p.high)
    })
}

/// A worker configuration.
struct Config {
    name: &'static str,
    label: &'static str,
    env: Vec<(&'static str, &'static str)>,
}

fn config(name: &str) -> Result<Config, String> {
    match name {
        "emulated" => Ok(Config {
            name: "emulated",
            label: "EMULATED (real StarPU runs, 2 CPU workers, PLB_EMULATE=\"0:speed=0.25\": worker 0 4x slower; STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0 for every policy)",
            env: vec![
                ("STARPU_NCPU", "2"),
                ("STARPU_NOPENCL", "0"),
                ("STARPU_NCUDA", "0"),
                ("PLB_EMULATE", DAG_EMULATION),
                ("STARPU_PERF_MODEL_HOMOGENEOUS_CPU", "0"),
            ],
        }),
        "opencl" => Ok(Config {
            name: "opencl",
            label: "REAL (1 CPU + 1 PoCL OpenCL worker; Debian's Cholesky and LU have no OpenCL implementation: every task runs on the CPU, so this measures scheduling overhead only)",
            env: vec![
                ("STARPU_NCPU", "1"),
                ("STARPU_NOPENCL", "1"),
                ("STARPU_OPENCL_ON_CPUS", "1"),
                ("STARPU_NCUDA", "0"),
            ],
        }),
        "cpu" => Ok(Config {
            name: "cpu",
            label: "REAL (2 CPU workers of this machine, no emulation)",
            env: vec![
                ("STARPU_NCPU", "2"),
                ("STARPU_NOPENCL", "0"),
                ("STARPU_NCUDA", "0"),
            ],
        }),
        other => Err(format!(
            "unknown configuration {other:?} (expected emulated, opencl or cpu)"
        )),
    }
}

/// An application: its program, its arguments for size `n` and `nblocks`
/// tiles per dimension, and the column of its timing line holding the
/// milliseconds.
struct App {
    program: &'static str,
    args: Vec<String>,
    ms_column: usize,
}

fn app(name: &str, n: u32, nblocks: u32) -> Result<App, String> {
    let tiled = |program| App {
        program,
        args: vec![
            "-size".into(),
            n.to_string(),
            "-nblocks".into(),
            nblocks.to_string(),
        ],
        ms_column: 1,
    };
    match name {
        "cholesky" => Ok(tiled("cholesky_implicit")),
        "lu" => Ok(tiled("lu_implicit_example_float")),
        // StarPU's sgemm: `nblocks`² independent coarse tasks per iteration
        // (the few-task case); `-iter` is divided by 10 in Debian's
        // quick-check build: 20 gives 2 iterations. Prints "x y z ms GFlops".
        "gemm" => Ok(App {
            program: "sgemm",
            args: vec![
                "-size".into(),
                n.to_string(),
                "-nblocks".into(),
                nblocks.to_string(),
                "-iter".into(),
                "20".into(),
            ],
            ms_column: 3,
        }),
        other => Err(format!(
            "unknown application {other:?} (expected cholesky, lu or gemm)"
        )),
    }
}

/// What one run printed.
struct Output {
    ms: Option<f64>,
    bound_ms: Option<f64>,
    stderr: String,
}

/// A variant's settings, as [`run_once`]'s `extra`.
fn settings(v: &Variant) -> Vec<(&str, String)> {
    v.env.iter().map(|(k, x)| (k.as_str(), x.clone())).collect()
}

/// Runs `prog` once under `policy` in `home` with the configuration's
/// environment and `extra`.
fn run_once(
    (prog, app): (&Path, &App),
    policy: &str,
    home: &Path,
    cfg: &Config,
    extra: &[(&str, String)],
    library: &Path,
) -> Result<Output, String> {
    let mut cmd = Process::new(prog);
    cmd.args(&app.args).stdin(Stdio::null());
    clear_starpu_settings(&mut cmd);
    // One BLAS thread per task, as StarPU expects of its CPU workers:
    // OpenBLAS's own threads would otherwise compete with the workers for
    // the cores (scripts/overhead.sh measured 10x on small Cholesky tiles).
    cmd.env("STARPU_HOME", home)
        .env("STARPU_SILENT", "1")
        .env("STARPU_SCHED", policy)
        .env("OPENBLAS_NUM_THREADS", "1");
    for (k, v) in &cfg.env {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let ours = catalog::find(policy).is_some();
    if ours {
        cmd.env("PLB_SUMMARY", "1");
    }
    // Our library is loaded for our policies, and for StarPU's too when
    // the configuration emulates (PLB_EMULATE lives in it).
    if ours || cfg.env.iter().any(|(k, _)| *k == "PLB_EMULATE") {
        if starpu_plb::STARPU_SERIES == "1.3" {
            cmd.env("LD_PRELOAD", library);
        } else {
            cmd.env("STARPU_SCHED_LIB", library);
        }
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", prog.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{} under {policy} exited with {}: {}",
            prog.display(),
            out.status,
            stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        ));
    }
    if ours && !stderr.contains(&format!("plb: policy={policy} ")) {
        return Err(format!("{policy} was not loaded (no summary line)"));
    }
    if cfg.env.iter().any(|(k, _)| *k == "PLB_EMULATE") && !stderr.contains("EMULATION ACTIVE") {
        return Err(format!("{policy}: the emulation was not applied"));
    }
    // The examples print a "# ..." header then the timing line.
    let ms = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(app.ms_column)?.parse::<f64>().ok())
        .rfind(|ms| ms.is_finite());
    let bound_ms = stderr
        .lines()
        .find_map(|l| l.strip_prefix("plb: bound lp_ms="))
        .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok());
    Ok(Output {
        ms,
        bound_ms,
        stderr,
    })
}

/// Runs the experiment; returns the files written.
pub fn run(opts: &Options) -> Result<Vec<PathBuf>, String> {
    let reps = opts.repetitions.unwrap_or(if opts.quick { 1 } else { 5 });
    let n = opts.n.unwrap_or(if opts.quick { 1920 } else { 3840 });
    let nblocks = opts.nblocks.unwrap_or(if opts.quick { 8 } else { 16 });
    let configs: Vec<Config> = opts
        .configs
        .clone()
        .unwrap_or_else(|| {
            if opts.quick {
                vec!["emulated".into()]
            } else {
                vec!["emulated".into(), "opencl".into()]
            }
        })
        .iter()
        .map(|c| config(c))
        .collect::<Result<_, _>>()?;
    let dir = examples_dir().ok_or(
        "StarPU's examples were not found: install starpu-examples (scripts/setup.sh) or set STARPU_EXAMPLES_DIR",
    )?;
    let library = find_library()?;
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", opts.out_dir.display()))?;
    let started = Instant::now();
    let mut csv = String::from("config,app,n,nblocks,policy,ours,rep,ms\n");
    let mut md = format!(
        "# Task graphs in real runs (`plb experiment dag`)\n\n\
         StarPU {} on this machine; N = {n}, {nblocks}x{nblocks} tiles; {reps} measured repetition(s), interleaved. \
         Fairness: StarPU's model-based policies calibrated first ({} `STARPU_CALIBRATE=1` run(s) of dmda in a private `STARPU_HOME`); \
         our plb-heft, dada and dada-cp after one learning run each (models persisted in that `STARPU_HOME`); \
         our other policies learn within each run. ms: the program's own timing, median [min–max]. \
         vs eager, vs best StarPU: the median's ratio (below 1: faster). \
         paired: the median of the ratios of runs of one round (each round runs every policy once, so the machine's drift \
         between rounds cancels) with its distribution-free {:.0} % interval (order statistics; `-` with fewer than 6 rounds); \
         a ratio is *resolved* above a limit when the whole interval is. bound: StarPU's LP area bound of the run \
         (`PLB_BOUND=1`, from the calibrated models).\n",
        starpu_plb::STARPU_SERIES,
        opts.calibration,
        100.0 * PAIRED_LEVEL
    );
    let mut written = Vec::new();
    let mut plot_rows = String::new();
    for cfg in &configs {
        for app in &opts.apps {
            let spec = self::app(app, n, nblocks)?;
            let prog = dir.join(spec.program);
            let run = (prog.as_path(), &spec);
            let home = opts.out_dir.join(format!("home-{}-{app}", cfg.name));
            let _ = std::fs::remove_dir_all(&home);
            std::fs::create_dir_all(&home)
                .map_err(|e| format!("cannot create {}: {e}", home.display()))?;
            let label = format!("{} {app}", cfg.name);
            if opts
                .policies
                .iter()
                .any(|p| MODEL_BASED.contains(&p.name.as_str()))
            {
                for i in 0..opts.calibration {
                    let o = run_once(
                        run,
                        "dmda",
                        &home,
                        cfg,
                        &[("STARPU_CALIBRATE", "1".into())],
                        &library,
                    )?;
                    eprintln!(
                        "  {label}: calibration {}/{} (dmda, STARPU_CALIBRATE=1) {:.0} ms",
                        i + 1,
                        opts.calibration,
                        o.ms.unwrap_or(f64::NAN)
                    );
                }
            }
            let bound = run_once(
                run,
                "greedy",
                &home,
                cfg,
                &[("PLB_BOUND", "1".into())],
                &library,
            )?
            .bound_ms;
            for p in opts.policies.iter().filter(|p| p.learns()) {
                let o = run_once(run, &p.name, &home, cfg, &settings(p), &library)?;
                eprintln!(
                    "  {label}: learning run of {} {:.0} ms",
                    p.label,
                    o.ms.unwrap_or(f64::NAN)
                );
            }
            let mut runs: Vec<Vec<Run>> = opts.policies.iter().map(|_| Vec::new()).collect();
            // A StarPU policy that fails in this configuration (1.3's
            // heteroprio aborts on a worker kind its buckets do not cover)
            // is reported as failed and not run again; a failure of ours
            // stops the experiment.
            let mut failed: Vec<Option<String>> = opts.policies.iter().map(|_| None).collect();
            for rep in 0..reps {
                for (i, variant) in opts.policies.iter().enumerate() {
                    if failed[i].is_some() {
                        continue;
                    }
                    let p = &variant.label;
                    let outcome =
                        run_once(run, &variant.name, &home, cfg, &settings(variant), &library)
                            .and_then(|o| {
                                o.ms.ok_or_else(|| {
                                    format!(
                                        "{label} under {p}: no timing line; stderr: {}",
                                        o.stderr.trim()
                                    )
                                })
                            });
                    let ms = match outcome {
                        Ok(ms) => ms,
                        Err(e) if catalog::find(&variant.name).is_none() => {
                            eprintln!(
                                "  {label}: StarPU's {p} failed, left out of this table: {e}"
                            );
                            failed[i] = Some(e);
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    eprintln!(
                        "  {label}: rep {}/{reps} {p:<8} {ms:.0} ms ({:.0} s elapsed)",
                        rep + 1,
                        started.elapsed().as_secs_f64()
                    );
                    let ours = catalog::find(&variant.name).is_some();
                    let _ = writeln!(
                        csv,
                        "{},{app},{n},{nblocks},{p},{ours},{rep},{ms:.1}",
                        cfg.name
                    );
                    runs[i].push(Run { rep, ms });
                }
            }
            let medians: Vec<f64> = runs
                .iter()
                .map(|r| {
                    if r.is_empty() {
                        f64::NAN
                    } else {
                        median(&mut r.iter().map(|x| x.ms).collect::<Vec<_>>())
                    }
                })
                .collect();
            let eager_index = opts.policies.iter().position(|p| p.label == "eager");
            let eager = eager_index.map(|i| medians[i]);
            let best_starpu = opts
                .policies
                .iter()
                .zip(&medians)
                .filter(|(p, m)| catalog::find(&p.name).is_none() && m.is_finite())
                .map(|(_, &m)| m)
                .fold(f64::INFINITY, f64::min);
            let eager_rounds = eager_index.map(|i| by_round(&runs[i], reps));
            let best_starpu_rounds = opts
                .policies
                .iter()
                .zip(&medians)
                .position(|(p, &m)| catalog::find(&p.name).is_none() && m == best_starpu)
                .map(|i| by_round(&runs[i], reps));
            let mut resolved_over_eager = Vec::new();
            let _ = write!(
                md,
                "\n## {}: {} {}\n\nLP area bound: {}\n\n\
                 | policy | ms | vs eager | vs best StarPU | paired vs eager | paired vs best StarPU | bound/ms |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
                cfg.label,
                spec.program,
                spec.args.join(" "),
                bound.map_or("none".to_string(), |b| format!("{b:.0} ms"))
            );
            for (((variant, r), &m), why) in
                opts.policies.iter().zip(&runs).zip(&medians).zip(&failed)
            {
                let p = &variant.label;
                if let Some(why) = why {
                    let first = why.lines().next().unwrap_or("").replace('|', "/");
                    let short: String = first.chars().take(160).collect();
                    let _ = writeln!(md, "| {p} | failed: {short} | - | - | - | - | - |");
                    continue;
                }
                let lo = r.iter().map(|x| x.ms).fold(f64::INFINITY, f64::min);
                let hi = r.iter().map(|x| x.ms).fold(0.0, f64::max);
                let ours = if catalog::find(&variant.name).is_some() {
                    " (ours)"
                } else {
                    ""
                };
                let rounds = by_round(r, reps);
                let paired = |reference: &Option<Vec<f64>>| {
                    reference
                        .as_ref()
                        .and_then(|b| PairedRatio::of(&rounds, b, PAIRED_LEVEL))
                };
                let vs_eager = paired(&eager_rounds);
                if !ours.is_empty() && vs_eager.is_some_and(|x| x.resolved_above(EAGER_LIMIT)) {
                    resolved_over_eager.push(p.as_str());
                }
                let _ = writeln!(
                    md,
                    "| {p}{ours} | {m:.0} [{lo:.0}–{hi:.0}] | {} | {} | {} | {} | {} |",
                    eager.map_or("-".into(), |e| format!("{:.2}", m / e)),
                    if best_starpu.is_finite() {
                        format!("{:.2}", m / best_starpu)
                    } else {
                        "-".into()
                    },
                    paired_cell(vs_eager),
                    paired_cell(paired(&best_starpu_rounds)),
                    bound.map_or("-".into(), |b| format!("{:.2}", b / m))
                );
                let _ = writeln!(
                    plot_rows,
                    "\"{} {app} {p}\" {m:.1} {lo:.1} {hi:.1}",
                    cfg.name
                );
            }
            if eager_rounds.is_some() {
                let _ = writeln!(
                    md,
                    "\nOurs resolved above {EAGER_LIMIT:.2}x `eager` (the whole paired interval above): {}.",
                    if resolved_over_eager.is_empty() {
                        "none".to_string()
                    } else {
                        resolved_over_eager.join(", ")
                    }
                );
            }
            // Each policy given with settings against the same policy
            // without them, when both ran.
            for (variant, r) in opts.policies.iter().zip(&runs) {
                if variant.env.is_empty() {
                    continue;
                }
                let Some(base) = opts
                    .policies
                    .iter()
                    .position(|b| b.env.is_empty() && b.name == variant.name)
                else {
                    continue;
                };
                let paired = PairedRatio::of(
                    &by_round(r, reps),
                    &by_round(&runs[base], reps),
                    PAIRED_LEVEL,
                );
                let _ = writeln!(
                    md,
                    "\n{} against {} (paired): {}.",
                    variant.label,
                    variant.name,
                    paired_cell(paired)
                );
            }
        }
    }
    print!("{md}");
    let csv_path = opts.out_dir.join("dag.csv");
    write(&csv_path, &csv)?;
    written.push(csv_path);
    let md_path = opts.out_dir.join("dag.md");
    write(&md_path, &md)?;
    written.push(md_path);
    let dat = opts.out_dir.join("dag.dat");
    write(&dat, &plot_rows)?;
    let png = opts.out_dir.join("dag.png");
    let script = format!(
        "set terminal pngcairo size 1200,{h}\nset output '{png}'\n\
         set title \"Task graphs, real runs (plb experiment dag): median makespan, min..max\" noenhanced\n\
         set xlabel 'ms'\nset style fill solid 0.5\nset yrange [-1:*] reverse\nset ytics noenhanced\nunset key\n\
         plot '{dat}' using ($2/2):0:($2/2):(0.35):ytic(1) with boxxyerrorbars lc rgb '#4477aa', \
         '' using 2:0:3:4 with xerrorbars lc rgb 'black' pt 0\n",
        h = 200 + 18 * plot_rows.lines().filter(|l| !l.is_empty()).count(),
        png = png.display(),
        dat = dat.display(),
    );
    match gnuplot(&script) {
        Ok(()) => written.push(png),
        Err(e) => eprintln!("plb experiment dag: {e}"),
    }
    eprintln!(
        "plb experiment dag: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(written)
}
