//! The SIMULATED part of `plb experiment coexec`: every balancer of ours on
//! the four co-execution kernels, on single nodes of the PLB-HAC paper's
//! platform (machine A: CPU + Quadro K5200; B: CPU + GTX 970 + Xeon Phi;
//! D: CPU + GTX Titan), in virtual time with 3 % noise, the irregular
//! kernels carrying their per-row cost profile. Solo times are each PU's
//! true time for the whole kernel; energy is MODELLED from the platform
//! file's `power` lines. Also the BestHG sweep (HGuided over `k` and the
//! minimum package, best per kernel and node).

use std::fmt::Write as _;
use std::path::PathBuf;

use plb_core::balance::sim::{SimOptions, SimPu, SimReport, simulate, true_time};
use plb_core::coexec::{Power, RunShape, metrics};
use plb_core::platform::Platform;
use plb_core::workload::{App, sim_pus};

use super::coexec::{Options, Row, package_plot};
use super::write;

/// The single-node scenarios (machines of `platforms/plb-hac.txt`).
const NODES: [&str; 3] = ["A", "B", "D"];
/// Relative noise on every block's compute time.
const NOISE: f64 = 0.03;
/// The BestHG grid: `k`, and the minimum package as a fraction of `W`.
const SWEEP_K: [f64; 6] = [1.0, 1.5, 2.0, 3.0, 4.0, 8.0];
const SWEEP_MIN: [u64; 5] = [16_384, 4_096, 1_024, 256, 64];

/// What the simulated part adds to the report.
pub struct SimOutput {
    pub rows: Vec<Row>,
    pub labels: Vec<(String, String)>,
}

/// Machine `m` of `p` alone, holding its own data.
fn node(p: &Platform, m: &str) -> Result<Platform, String> {
    let classes: Vec<_> = p
        .classes
        .iter()
        .filter(|c| c.machine == m)
        .cloned()
        .collect();
    if classes.is_empty() {
        return Err(format!("no machine {m} in platform {}", p.name));
    }
    Ok(Platform {
        name: format!("{}-{m}", p.name),
        home: Some(m.to_string()),
        network: None,
        classes,
    })
}

fn powers(p: &Platform) -> Result<Vec<Power>, String> {
    p.pus()
        .iter()
        .map(|r| {
            let c = &p.classes[r.class];
            c.power.ok_or_else(|| {
                format!(
                    "{}/{}: no `power` line in the platform file",
                    c.machine, c.name
                )
            })
        })
        .collect()
}

/// One simulated run of balancer `spec`.
fn run_one(spec: &str, pus: &[SimPu], total: u64, seed: u64) -> Result<SimReport, String> {
    let mut b =
        plb_core::balance::registry::build(spec, pus.len(), total).map_err(|e| e.to_string())?;
    let r = simulate(b.as_mut(), pus, total, SimOptions { noise: NOISE, seed })
        .map_err(|e| format!("{spec}: {e:?}"))?;
    if seed == 1 && !spec.contains(':') {
        eprintln!("coexec:     {spec}: {}", b.stats());
    }
    Ok(r)
}

fn shape(r: &SimReport, n: usize) -> RunShape {
    let mut finish = vec![0.0; n];
    for run in &r.runs {
        finish[run.block.pu] = f64::max(finish[run.block.pu], run.end);
    }
    RunShape {
        makespan_s: r.makespan,
        finish_s: finish,
        busy_s: r.busy_s.clone(),
    }
}

fn trace_csv(r: &SimReport) -> String {
    let mut runs = r.runs.clone();
    runs.sort_by(|a, b| a.end.total_cmp(&b.end));
    let mut t = String::from("worker,offset,len,start_s,end_s,compute_s\n");
    for x in runs {
        let _ = writeln!(
            t,
            "{},{},{},{:.6},{:.6},{:.6}",
            x.block.pu,
            x.block.offset,
            x.block.len,
            x.start,
            x.end,
            x.end - x.start
        );
    }
    t
}

/// Runs the simulated part; its rows, labels, and files (traces, plots,
/// the sweep's table).
pub fn run(opts: &Options, written: &mut Vec<PathBuf>) -> Result<SimOutput, String> {
    let platform = Platform::builtin("plb-hac").ok_or("no built-in plb-hac platform")?;
    let seeds: u64 = if opts.quick { 1 } else { 3 };
    let traces = opts.out_dir.join("traces");
    std::fs::create_dir_all(&traces).map_err(|e| format!("{}: {e}", traces.display()))?;
    let balancers: Vec<&String> = opts
        .balancers
        .iter()
        .filter(|b| plb_core::balance::registry::BalancerSpec::parse(b).is_ok())
        .collect();
    let mut rows = Vec::new();
    let mut labels = Vec::new();
    let mut sweep_md = String::from(
        "# BestHG sweep (SIMULATED)\n\nHGuided over k and the minimum package (units), median efficiency over the seeds; the best per kernel and node is `besthg` in coexec.md.\n\n| node | kernel | best k | best min | efficiency | default hguided |\n|---|---|---|---|---|---|\n",
    );
    for m in NODES {
        let p = node(&platform, m)?;
        let power = powers(&p)?;
        let names: Vec<String> = p
            .pus()
            .iter()
            .map(|r| p.classes[r.class].name.clone())
            .collect();
        let config = format!("sim-{m}");
        labels.push((
            config.clone(),
            format!(
                "SIMULATED node {m} of the PLB-HAC platform ({}), {}% noise, {seeds} seed(s)",
                names.join(" + "),
                NOISE * 100.0
            ),
        ));
        eprintln!("coexec: SIMULATED node {m}: {}", names.join(" + "));
        for kernel in &opts.kernels {
            let Some(app) = App::parse(kernel) else {
                eprintln!("coexec:   {kernel}: no simulator model, skipped");
                continue;
            };
            let total = app.paper_units();
            let pus = sim_pus(&p, &app);
            let solo: Vec<f64> = pus.iter().map(|pu| true_time(pu, total as f64)).collect();
            let eval = |spec: &str, rows: &mut Vec<Row>, label: &str| -> Result<Vec<f64>, String> {
                let mut effs = Vec::new();
                for seed in 1..=seeds {
                    let r = run_one(spec, &pus, total, seed)?;
                    if seed == 1 && m == "A" && label != "sweep" {
                        let f = traces.join(format!(
                            "sim-A-{kernel}-{}.csv",
                            label.replace([':', ','], "_")
                        ));
                        write(&f, &trace_csv(&r))?;
                    }
                    let met = metrics(&shape(&r, pus.len()), &solo, Some(&power))
                        .map_err(|e| e.to_string())?;
                    effs.push(met.efficiency);
                    if label != "sweep" {
                        rows.push(Row {
                            source: "simulated",
                            config: config.clone(),
                            kernel: kernel.clone(),
                            balancer: label.to_string(),
                            rep: seed as usize - 1,
                            packages: r.runs.len() as u64,
                            m: met,
                        });
                    }
                }
                Ok(effs)
            };
            for b in &balancers {
                eval(b, &mut rows, b)?;
            }
            // BestHG: the grid, then the winner's runs as `besthg`.
            let mut best: Option<(f64, String, f64, u64)> = None;
            for k in SWEEP_K {
                for frac in SWEEP_MIN {
                    let min = (total / frac).max(1);
                    let spec = format!("hguided:k={k},min={min}");
                    let mut effs = eval(&spec, &mut Vec::new(), "sweep")?;
                    let e = plb_core::bench::median(&mut effs);
                    if best.as_ref().is_none_or(|b| e > b.0) {
                        best = Some((e, spec, k, min));
                    }
                }
            }
            if let Some((e, spec, k, min)) = best {
                eval(&spec, &mut rows, "besthg")?;
                let mut default: Vec<f64> = rows
                    .iter()
                    .filter(|r| {
                        r.config == config && &r.kernel == kernel && r.balancer == "hguided"
                    })
                    .map(|r| r.m.efficiency)
                    .collect();
                let d = if default.is_empty() {
                    "–".to_string()
                } else {
                    format!("{:.3}", plb_core::bench::median(&mut default))
                };
                let _ = writeln!(sweep_md, "| {m} | {kernel} | {k} | {min} | {e:.3} | {d} |");
            }
            eprintln!(
                "coexec:   {kernel}: {} balancers simulated",
                balancers.len() + 1
            );
        }
    }
    let sweep_path = opts.out_dir.join("besthg-sweep.md");
    write(&sweep_path, &sweep_md)?;
    written.push(sweep_path);
    let mut with_best: Vec<String> = balancers.iter().map(|b| b.to_string()).collect();
    with_best.push("besthg".into());
    for kernel in ["binomial", "mandelbrot"] {
        let png = opts.out_dir.join(format!("sim-A-{kernel}-packages.png"));
        let title = format!("package sizes, {kernel}, node A (SIMULATED)");
        match package_plot(
            &traces,
            &format!("sim-A-{kernel}"),
            &with_best,
            &title,
            &png,
        ) {
            Ok(()) => written.push(png),
            Err(e) => eprintln!("coexec: {e}"),
        }
    }
    Ok(SimOutput { rows, labels })
}
