//! `plb experiment cluster`: partitioning across nodes (issue 14).
//!
//! 1. **REAL runs, EMULATED heterogeneity**: `plb app mm-mpi` under
//!    `mpirun` on this machine, 2 to 4 ranks with per-rank speed factors,
//!    latencies and one rank with a PoCL OpenCL worker, every partitioning
//!    algorithm, repetitions interleaved: makespan, INPA rounds and
//!    convergence, the final shares against the ideal ones, and the
//!    communication volume of the CMA arrangement against 1-D strips.
//! 2. **SIMULATED Fig. 5**: the paper's 90 Grenoble nodes
//!    (`platforms/grenoble.txt`), speed of the multiplication against N
//!    for every algorithm ([`super::cluster_sim`]).
//! 3. **SIMULATED scale**: the FPM partitioning on 10 to 1,000 nodes of 8
//!    devices, its cost in host time.
//!
//! Tables to stdout, progress to stderr, CSV, Markdown and PNG to `--out`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use clap::Args;
use plb_core::bench::median;
use plb_core::cluster::Algorithm;

use super::cluster_sim::{self, SimRow};
use super::{gnuplot, write};
use crate::cli::positive;

/// Options of `plb experiment cluster`.
#[derive(Args, Debug, Clone)]
pub struct Options {
    /// Small sizes, 2 ranks, 1 repetition, 3 values of N, scale up to
    /// 1,000 nodes (CI)
    #[arg(long)]
    pub quick: bool,
    /// Repetitions of every real run [default: 3, 1 with --quick]
    #[arg(long = "reps", value_name = "N", value_parser = positive::<usize>())]
    pub repetitions: Option<usize>,
    /// Skips the real MPI runs
    #[arg(long)]
    pub no_real: bool,
    /// Skips the SIMULATED Fig. 5 and scaling
    #[arg(long)]
    pub no_simulated: bool,
    /// Adds the cross-check of our simulator against StarPU-MPI under
    /// SimGrid's SMPI on 4 and 16 simulated nodes, and our partitioning
    /// itself under SMPI on mirage, mixed mirage and Grenoble nodes (with
    /// --quick: 4 mixed nodes, FPM and the even split); needs `bash
    /// scripts/setup.sh --all` first
    #[arg(long)]
    pub smpi: bool,
    /// Adds task graphs across nodes under SMPI: StarPU-MPI's distributed
    /// Cholesky with every StarPU policy and ours (warm and cold) on 4 and
    /// 16 simulated mirage nodes (with --quick: 4 nodes, a 10x10-tile
    /// matrix, dmdas and plb-heft); needs `bash scripts/setup.sh --all`
    #[arg(long)]
    pub smpi_dag: bool,
    /// Output directory
    #[arg(long, default_value = "results/cluster")]
    pub out: PathBuf,
}

/// One configuration of the real runs.
struct RealConfig {
    name: &'static str,
    ranks: usize,
    label: &'static str,
    args: &'static [&'static str],
}

const REAL: &[RealConfig] = &[
    RealConfig {
        name: "np2",
        ranks: 2,
        label: "2 ranks, rank 1 EMULATED at half speed",
        args: &["--rank-emulate", "1=0:speed=0.5"],
    },
    RealConfig {
        name: "np3",
        ranks: 3,
        label: "3 ranks, rank 1 EMULATED at 1/4 speed, rank 2 +5 ms per kernel call",
        args: &[
            "--rank-emulate",
            "1=0:speed=0.25",
            "--rank-emulate",
            "2=0:latency=5ms",
        ],
    },
    RealConfig {
        name: "np4",
        ranks: 4,
        label: "4 ranks, rank 1 EMULATED at 1/4 speed, rank 2 +2 ms per call, rank 3 with a PoCL OpenCL worker (REAL)",
        args: &[
            "--rank-emulate",
            "1=0:speed=0.25",
            "--rank-emulate",
            "2=0:latency=2ms",
            "--opencl-ranks",
            "3",
        ],
    },
];

/// One real run's summary fields.
#[derive(Debug, Clone)]
struct RealRow {
    config: &'static str,
    algo: Algorithm,
    rep: usize,
    line: String,
}

impl RealRow {
    fn get(&self, key: &str) -> Option<&str> {
        crate::apps::field(&self.line, key)
    }
    fn num(&self, key: &str) -> f64 {
        self.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }
    fn makespan(&self) -> f64 {
        ["partition_s", "generate_s", "multiply_s"]
            .iter()
            .map(|k| self.num(k))
            .sum()
    }
}

fn mpirun_exists() -> bool {
    Process::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The real runs, repetitions interleaved (rep outside, algorithms inside).
fn real(opts: &Options) -> Result<Vec<RealRow>, String> {
    let plb = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let reps = opts.repetitions.unwrap_or(if opts.quick { 1 } else { 3 });
    let (n, b, configs, algos): (&str, &str, &[RealConfig], Vec<Algorithm>) = if opts.quick {
        (
            "512",
            "64",
            &REAL[..1],
            vec![Algorithm::Fpm, Algorithm::PlbHac, Algorithm::Homogeneous],
        )
    } else {
        ("3072", "128", REAL, Algorithm::ALL.to_vec())
    };
    let mut rows = Vec::new();
    for cfg in configs {
        for rep in 0..reps {
            for &algo in &algos {
                eprintln!(
                    "cluster: REAL mpirun -np {} plb app mm-mpi --n {n} --b {b} --algo {algo} ({}; repetition {}/{reps})",
                    cfg.ranks,
                    cfg.label,
                    rep + 1
                );
                let out = Process::new("mpirun")
                    .args(["--oversubscribe", "--bind-to", "none", "-np"])
                    .arg(cfg.ranks.to_string())
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                    .env("STARPU_SILENT", "1")
                    // PoCL on one thread: the OpenCL worker is one device,
                    // not every core of the machine.
                    .env("POCL_MAX_PTHREAD_COUNT", "1")
                    .env("POCL_CPU_MAX_CU_NUM", "1")
                    .env_remove("PLB_EMULATE")
                    .arg(&plb)
                    .args(["app", "mm-mpi", "--n", n, "--b", b, "--algo", algo.name()])
                    .args(cfg.args)
                    .output()
                    .map_err(|e| format!("mpirun: {e}"))?;
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                let line = text
                    .lines()
                    .find(|l| l.starts_with(crate::apps::MM_MPI_TAG))
                    .map(str::to_string);
                match (out.status.success(), line) {
                    (true, Some(line)) => rows.push(RealRow {
                        config: cfg.name,
                        algo,
                        rep,
                        line,
                    }),
                    _ => {
                        return Err(format!(
                            "mm-mpi {} {algo} failed:\n{text}{}",
                            cfg.name,
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
            }
        }
    }
    Ok(rows)
}

fn real_csv(rows: &[RealRow]) -> String {
    let keys = [
        "ranks",
        "n",
        "b",
        "rounds",
        "device_rounds",
        "converged",
        "imbalance",
        "partition_s",
        "generate_s",
        "multiply_s",
        "check_s",
        "gflops",
        "shares",
        "ideal_from",
        "ideal",
        "max_share_error",
        "h_cma",
        "h_strips",
        "traffic_blocks",
        "traffic_blocks_strips",
        "coverage",
        "verified",
    ];
    let mut s = format!("label,config,algo,rep,makespan_s,{}\n", keys.join(","));
    for r in rows {
        let _ = write!(
            s,
            "REAL-EMULATED,{},{},{},{:.4}",
            r.config,
            r.algo,
            r.rep,
            r.makespan()
        );
        for k in keys {
            let _ = write!(s, ",\"{}\"", r.get(k).unwrap_or(""));
        }
        s.push('\n');
    }
    s
}

fn real_md(rows: &[RealRow]) -> String {
    let mut s = String::from(
        "REAL runs on this machine (2 vCPUs, all ranks on it), heterogeneity EMULATED per rank (PLB_EMULATE), one rank with a REAL PoCL OpenCL worker in np4. Medians over the repetitions (min-max in brackets). Makespan = partitioning + generation of A and B (each rank its own rectangles) + multiplication. `share err`: largest |share - ideal| over nodes (ideal from the emulated speed factors, or from the speeds measured in the final round when a rank has an OpenCL worker). Traffic: b x b blocks moved between ranks over all pivot steps, CMA against 1-D strips of the same areas.\n\n| config | algorithm | makespan s | multiply s | INPA rounds | converged | share err | traffic CMA / strips |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut configs: Vec<&str> = rows.iter().map(|r| r.config).collect();
    configs.dedup();
    for c in configs {
        for a in Algorithm::ALL {
            let set: Vec<&RealRow> = rows
                .iter()
                .filter(|r| r.config == c && r.algo == a)
                .collect();
            if set.is_empty() {
                continue;
            }
            // Median, minimum, maximum.
            let col = |f: &dyn Fn(&RealRow) -> f64| -> (f64, f64, f64) {
                let mut v: Vec<f64> = set.iter().map(|r| f(r)).collect();
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (median(&mut v), lo, hi)
            };
            let (ms_med, ms_lo, ms_hi) = col(&|r| r.makespan());
            let (mu, _, _) = col(&|r| r.num("multiply_s"));
            let (rd, _, _) = col(&|r| r.num("rounds"));
            let (err, _, _) = col(&|r| r.num("max_share_error"));
            let conv = set
                .iter()
                .filter(|r| r.get("converged") == Some("true"))
                .count();
            let first = set[0];
            let _ = writeln!(
                s,
                "| {c} | {a} | {ms_med:.3} ({ms_lo:.3}-{ms_hi:.3}) | {mu:.3} | {rd:.0} | {conv}/{} | {err:.3} | {} / {} |",
                set.len(),
                first.get("traffic_blocks").unwrap_or("-"),
                first.get("traffic_blocks_strips").unwrap_or("-"),
            );
        }
    }
    s
}

fn figure5_plot(rows: &[SimRow], png: &Path) -> Result<(), String> {
    let mut data = String::new();
    for a in Algorithm::ALL {
        let _ = writeln!(data, "# {a}");
        for r in rows.iter().filter(|r| r.algo == a) {
            let _ = writeln!(data, "{} {:.1}", r.n as f64 / 1e3, r.gflops);
        }
        data.push_str("\n\n");
    }
    let _ = writeln!(data, "# bound");
    for r in rows.iter().filter(|r| r.algo == Algorithm::Fpm) {
        let _ = writeln!(data, "{} {:.1}", r.n as f64 / 1e3, r.bound_gflops);
    }
    let dat = png.with_extension("dat");
    write(&dat, &data)?;
    let mut plots: Vec<String> = Algorithm::ALL
        .iter()
        .enumerate()
        .map(|(i, a)| format!("'{}' index {i} with linespoints title '{a}'", dat.display()))
        .collect();
    plots.push(format!(
        "'{}' index {} with lines dashtype 2 lc rgb 'gray40' title 'bound (all devices at full rate)'",
        dat.display(),
        Algorithm::ALL.len()
    ));
    gnuplot(&format!(
        "set terminal pngcairo size 900,560\nset output '{}'\nset title 'SIMULATED: matrix multiplication on the 90 Grenoble nodes (paper Fig. 5)'\nset xlabel 'N (thousands)'\nset ylabel 'GFLOP/s'\nset yrange [0:5500]\nset key at graph 0.98, graph 0.68 right\nset grid\nplot {}\n",
        png.display(),
        plots.join(", ")
    ))
}

/// Prints a section's table and appends it to the report under `title`.
fn section(report: &mut String, title: &str, md: &str) {
    println!("{md}");
    let _ = write!(report, "## {title}\n\n{md}\n");
}

/// Writes `text` to `out/name` and records the file among those written.
fn keep(written: &mut Vec<PathBuf>, out: &Path, name: &str, text: &str) -> Result<(), String> {
    let path = out.join(name);
    write(&path, text)?;
    written.push(path);
    Ok(())
}

/// Runs the experiment; returns the files written.
pub fn run(opts: &Options) -> Result<Vec<PathBuf>, String> {
    let out = &opts.out;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut written = Vec::new();
    let mut report = String::from("# plb experiment cluster\n\n");
    if opts.no_real {
        report.push_str("Real runs skipped (--no-real).\n\n");
    } else if !mpirun_exists() {
        return Err(
            "mpirun not found: install Open MPI (bash scripts/setup.sh) or pass --no-real".into(),
        );
    } else {
        let rows = real(opts)?;
        keep(&mut written, out, "cluster-real.csv", &real_csv(&rows))?;
        let md = real_md(&rows);
        section(&mut report, "REAL mpirun runs, EMULATED heterogeneity", &md);
        for c in REAL {
            let _ = writeln!(report, "- {}: {}", c.name, c.label);
        }
        report.push('\n');
    }
    if opts.smpi {
        let rows = super::cluster_smpi::run(out, &[4, 16], 16, 960)?;
        let md = super::cluster_smpi::md(&rows);
        section(
            &mut report,
            "SIMULATED: our simulator against StarPU-MPI under SMPI",
            &md,
        );
        // As the single-node cross-check (plb simgrid --xcheck): a model
        // more than 25 % away from StarPU-SimGrid's is a failure.
        if let Some(r) = rows
            .iter()
            .find(|r| !(0.8..=1.25).contains(&(r.ours_s / r.starpu_s)))
        {
            let path = out.join("cluster.md");
            write(&path, &report)?;
            return Err(format!(
                "cross-check failed: {} ranks, ours {:.3} s against StarPU-MPI/SMPI {:.3} s (more than 25 % apart)",
                r.ranks, r.ours_s, r.starpu_s
            ));
        }
        // Our partitioning itself under SMPI (the C API over StarPU-MPI).
        use super::cluster_smpi::{DistCase, GRENOBLE, MIRAGE, MIRAGE_MIXED};
        let case = |name, platform, ranks, grid, block| DistCase {
            name,
            platform,
            ranks,
            grid,
            block,
        };
        let (cases, algos) = if opts.quick {
            (
                vec![case("mirage-mixed", MIRAGE_MIXED, 4, 16, 960)],
                vec![Algorithm::Fpm, Algorithm::Homogeneous],
            )
        } else {
            (
                vec![
                    case("mirage", MIRAGE, 4, 16, 960),
                    case("mirage", MIRAGE, 16, 16, 960),
                    case("mirage-mixed", MIRAGE_MIXED, 4, 16, 960),
                    case("mirage-mixed", MIRAGE_MIXED, 16, 16, 960),
                    case("grenoble", GRENOBLE, 90, 16, 640),
                ],
                vec![
                    Algorithm::Fpm,
                    Algorithm::PlbHac,
                    Algorithm::SingleCpm,
                    Algorithm::Homogeneous,
                ],
            )
        };
        let rows = super::cluster_smpi::run_dist(out, &cases, &algos)?;
        keep(
            &mut written,
            out,
            "cluster-smpi-dist.csv",
            &super::cluster_smpi::dist_csv(&rows),
        )?;
        let md = super::cluster_smpi::dist_md(&rows);
        section(&mut report, "SIMULATED: our partitioning under SMPI", &md);
        if let Some(r) = rows
            .iter()
            .find(|r| r.smpi_areas.iter().sum::<u64>() != 16 * 16)
        {
            return Err(format!(
                "our partitioning under SMPI: {} ranks of {} ({}): areas {:?} do not cover the 16 x 16 tiles",
                r.ranks, r.platform, r.algorithm, r.smpi_areas
            ));
        }
    }
    if opts.smpi_dag {
        use super::cluster_smpi_dag::{self as dag, DagCase};
        let case = |ranks, size, nblocks| DagCase {
            ranks,
            size,
            nblocks,
        };
        let starpu: Vec<&str> = crate::simgrid::STARPU_POLICIES.to_vec();
        let (cases, starpu, ours) = if opts.quick {
            (vec![case(4, 9600, 10)], vec!["dmdas"], vec!["plb-heft"])
        } else {
            (
                vec![case(4, 19200, 20), case(16, 28800, 30)],
                starpu,
                dag::OURS.to_vec(),
            )
        };
        let rows = dag::run(out, &cases, &starpu, &ours)?;
        keep(&mut written, out, "cluster-smpi-dag.csv", &dag::csv(&rows))?;
        let md = dag::md(&rows);
        section(
            &mut report,
            "SIMULATED: task graphs across nodes under SMPI",
            &md,
        );
    }
    if opts.no_simulated {
        let path = out.join("cluster.md");
        write(&path, &report)?;
        written.push(path);
        return Ok(written);
    }
    let sizes: Vec<u64> = if opts.quick {
        vec![20_480, 81_920, 153_600]
    } else {
        (1..=15).map(|i| i * 10_240).collect()
    };
    let fig5 = cluster_sim::figure5(&sizes)?;
    keep(
        &mut written,
        out,
        "cluster-sim-fig5.csv",
        &cluster_sim::figure5_csv(&fig5),
    )?;
    let md = cluster_sim::figure5_md(&fig5);
    section(&mut report, "SIMULATED: the paper's Fig. 5", &md);
    let cost = cluster_sim::partition_cost_md(&fig5);
    println!("{cost}");
    report.push_str(&cost);
    report.push('\n');
    let png = out.join("cluster-sim-fig5.png");
    match figure5_plot(&fig5, &png) {
        Ok(()) => written.push(png),
        Err(e) => eprintln!("cluster: {e}"),
    }
    let scale = cluster_sim::scaling(&[10, 90, 300, 1000])?;
    let md = cluster_sim::scaling_md(&scale);
    println!("{md}");
    report.push_str("## SIMULATED: partitioning cost against cluster size\n\n");
    report.push_str(&md);
    let path = out.join("cluster.md");
    write(&path, &report)?;
    written.push(path);
    Ok(written)
}
