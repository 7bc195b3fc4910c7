//! `plb app bench`: per application, the single-worker throughput of each
//! codelet (CPU, OpenCL on PoCL), the 2-worker throughput under each
//! policy, and for `mm` the OpenBLAS one-core reference at the same block
//! shape.
//!
//! Every run is a child process (`plb app <name> ...`) with its own StarPU;
//! the child's summary line is parsed. PoCL is limited to one thread
//! (`POCL_MAX_PTHREAD_COUNT=1`, `POCL_CPU_MAX_CU_NUM=1`, unless already set)
//! so that an OpenCL worker occupies one core, like a CPU worker.

use std::process::{Command, ExitCode};

use super::{APPS, App, field, find, mm};

/// Policies of the 2-worker comparison (ours, then StarPU's).
const DEFAULT_POLICIES: &str = "greedy,plb-hac,plb-hec,hdss,acosta,eager,lws,dmda";

/// A worker configuration: label and `plb app` flags.
const SINGLE: &[(&str, &[&str])] = &[
    ("cpu", &["--ncpu", "1"]),
    ("opencl", &["--opencl", "--ncpu", "0"]),
];
const PAIRS: &[(&str, &[&str])] = &[
    ("2 cpu", &["--ncpu", "2"]),
    ("cpu+opencl", &["--opencl", "--ncpu", "1"]),
];

struct Run {
    throughput: f64,
    kernel: f64,
    makespan: f64,
    verify: String,
    split: String,
    units: String,
}

fn child(app: &App, n: u64, sched: &str, flags: &[&str]) -> Result<Run, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["app", app.name, "--n", &n.to_string(), "--sched", sched])
        .args(flags)
        .env_remove("STARPU_SCHED");
    for var in ["POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM"] {
        if std::env::var_os(var).is_none() {
            cmd.env(var, "1");
        }
    }
    let out = cmd.output().map_err(|e| format!("cannot run plb: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(super::TAG))
        .ok_or_else(|| {
            format!(
                "{} {sched} {}: no summary line ({}): {}",
                app.name,
                flags.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
    let num = |k| {
        field(line, k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    Ok(Run {
        throughput: num("throughput"),
        kernel: num("kernel_throughput"),
        makespan: num("makespan_s"),
        verify: field(line, "verify").unwrap_or("?").to_string(),
        split: field(line, "split").unwrap_or("?").to_string(),
        units: field(line, "units").unwrap_or("?").to_string(),
    })
}

fn report(label: &str, unit: &str, r: &Result<Run, String>) {
    match r {
        Ok(r) => println!(
            "  {label:<24} {:>10.3} {unit:<11} kernel {:>10.3}  makespan {:>8.4} s  {:<12} units {:<14} verify={}",
            r.throughput, r.kernel, r.makespan, r.split, r.units, r.verify
        ),
        Err(e) => println!("  {label:<24} error: {e}"),
    }
}

/// The MM CPU codelet against OpenBLAS called directly at the same block
/// shape (`n x ceil(n/32) x n`, walking through the same columns): `reps`
/// interleaved pairs (single-CPU-worker run, reference), best of each, as
/// other processes share this machine.
fn mm_reference(app: &App, n: u64, reps: usize, failures: &mut usize) {
    let block = n.div_ceil(32) as usize;
    let (mut best_run, mut best_kernel, mut best_ref) = (0.0f64, 0.0f64, 0.0f64);
    for _ in 0..reps {
        match child(app, n, "eager", SINGLE[0].1) {
            Ok(r) if r.verify == "ok" => {
                best_run = best_run.max(r.throughput);
                best_kernel = best_kernel.max(r.kernel);
            }
            _ => *failures += 1,
        }
        match mm::blas_reference_gflops(n as usize, block, 0.5) {
            Some(g) => best_ref = best_ref.max(g),
            None => *failures += 1,
        }
    }
    println!(
        "  OpenBLAS 1 core, direct cblas_sgemm on the same {n}x{block}x{n} blocks: {best_ref:.3} GFLOP/s (best of {reps})"
    );
    println!(
        "  CPU codelet, 1 worker (best of {reps}): {best_run:.3} GFLOP/s whole run, {best_kernel:.3} kernel time"
    );
    if best_ref > 0.0 {
        println!(
            "  CPU codelet / OpenBLAS: {:.2} (whole run), {:.2} (kernel time); target >= 0.80",
            best_run / best_ref,
            best_kernel / best_ref
        );
    }
}

/// Options of `plb app bench`.
#[derive(clap::Args)]
pub struct Options {
    /// The applications' test sizes, one run per figure (CI)
    #[arg(long)]
    quick: bool,
    /// The applications, comma-separated [default: all]
    #[arg(long, value_name = "NAME,..", value_delimiter = ',', value_parser = super::app_name())]
    apps: Vec<String>,
    /// The policies of the 2-worker comparison, comma-separated
    #[arg(
        long,
        value_name = "NAME,..",
        value_delimiter = ',',
        value_parser = crate::cli::policy_name,
        default_value = DEFAULT_POLICIES
    )]
    policies: Vec<String>,
}

/// `plb app bench`: exit status 1 when a run failed or did not verify.
pub fn run(opts: &Options) -> Result<ExitCode, String> {
    let quick = opts.quick;
    let policies = &opts.policies;
    let apps: Vec<&App> = if opts.apps.is_empty() {
        APPS.iter().collect()
    } else {
        opts.apps.iter().filter_map(|name| find(name)).collect()
    };
    let mut failures = 0;
    println!(
        "plb app bench: real runs on this machine (no emulation unless PLB_EMULATE is set: {})",
        std::env::var("PLB_EMULATE").unwrap_or_else(|_| "unset".into())
    );
    for app in apps {
        let n = if quick { app.test_n } else { app.bench_n };
        let unit = {
            // The unit is the same for every run; read it from a test-size
            // build (grn and kmeans have a minimum size).
            let w = (app.build)(app.test_n, 1)?;
            w.throughput_unit().0
        };
        println!("\n{} (n = {n}): {}", app.name, app.about);
        println!(" single worker, StarPU eager, equal tasks of ceil(W/32) units:");
        for (label, flags) in SINGLE {
            let r = child(app, n, "eager", flags);
            report(&format!("{label} codelet"), unit, &r);
            failures += usize::from(r.as_ref().map_or(true, |r| r.verify != "ok"));
        }
        if app.name == "mm" {
            mm_reference(app, n, if quick { 1 } else { 3 }, &mut failures);
        }
        for (config, flags) in PAIRS {
            println!(" 2 workers ({config}):");
            for p in policies {
                if p.starts_with("dm") {
                    // StarPU's model-based policies: one unreported run
                    // first, so their history models are calibrated for
                    // this size and configuration.
                    let _ = child(app, n, p, flags);
                }
                let r = child(app, n, p, flags);
                report(p, unit, &r);
                failures += usize::from(r.as_ref().map_or(true, |r| r.verify != "ok"));
            }
        }
    }
    if failures > 0 {
        println!("\n{failures} run(s) failed or did not verify");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
