//! The cluster-scale simulator's front end (issue 6 §1, `docs/simulator.md`).
//! Every line it prints is SIMULATED: virtual time on true curves derived
//! from published peaks, never a measurement on the devices named. The
//! only real measurements are the wall-clock times of the simulation and
//! of the policies' decisions on the machine running this program.
//!
//! ```text
//! cargo run --release -p plb-core --example simulate -- platform [plb-hac|plb-hec|FILE] [APP] [UNITS]
//! cargo run --release -p plb-core --example simulate -- paper [plb-hac|plb-hec|FILE] [APP] [SEEDS] [NOISE] [UNITS] [BALANCER,..]
//! cargo run --release -p plb-core --example simulate -- scaling [PUS,..] [APP] [BUDGET_S] [BALANCER,..]
//! cargo run --release -p plb-core --example simulate -- million [PUS] [BLOCKS]
//! cargo run --release -p plb-core --example simulate -- exp1|exp2|exp3|exp4|exp5 [--quick] [--reps N] [--out FILE]
//! ```
//!
//! `exp1` … `exp5` are the simulated forms of issue 6 §2's experiments
//! (scripts `scripts/exp-sim-*.sh`, results `docs/results.md`):
//! CSV on `--out` (stdout by default), first lines `#` comments saying
//! SIMULATED. `--quick`: reduced sizes (CI); `--reps`: seeds 1..=N.
//!
//! APP: mm, grn, kmeans, blackscholes. The clock is read here, around the
//! balancer calls ([`Timed`]), never inside `plb-core`.

use std::time::{Duration, Instant};

use plb_core::balance::sim::{
    BALANCERS, SimError, SimOptions, SimPu, SimReport, optimum_split, simulate, true_time,
};
use plb_core::balance::{Balancer, Completion, Decision, PuId};

/// A balancer from the registry, by name.
fn build_balancer(name: &str, n: usize, total: u64) -> Result<Box<dyn Balancer>, String> {
    plb_core::balance::registry::build(name, n, total)
        .map(|b| b as Box<dyn Balancer>)
        .map_err(|e| e.to_string())
}
use plb_core::platform::Platform;
use plb_core::workload::{self, App, DeviceCurve, sim_pus};

/// A decision as logged for replay (runs of `Wait` merged).
#[derive(Clone, Copy)]
enum Step {
    Waits(u64),
    Run(Decision),
}

/// A balancer whose every call is timed with the wall clock, and whose
/// decisions are logged for [`Replay`].
struct Timed<'a> {
    inner: &'a mut dyn Balancer,
    worst: Duration,
    total: Duration,
    calls: u64,
    log: Vec<Step>,
}

impl<'a> Timed<'a> {
    fn new(inner: &'a mut dyn Balancer) -> Timed<'a> {
        Timed {
            inner,
            worst: Duration::ZERO,
            total: Duration::ZERO,
            calls: 0,
            log: Vec::new(),
        }
    }

    fn note(&mut self, t: Instant) {
        let d = t.elapsed();
        self.worst = self.worst.max(d);
        self.total += d;
        self.calls += 1;
    }
}

impl Balancer for Timed<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        let t = Instant::now();
        let d = self.inner.next(pu, now);
        self.note(t);
        match (d, self.log.last_mut()) {
            (Decision::Wait, Some(Step::Waits(k))) => *k += 1,
            (Decision::Wait, _) => self.log.push(Step::Waits(1)),
            (d, _) => self.log.push(Step::Run(d)),
        }
        d
    }
    fn completed(&mut self, done: Completion) {
        let t = Instant::now();
        self.inner.completed(done);
        self.note(t);
    }
    fn remaining(&self) -> u64 {
        self.inner.remaining()
    }
}

/// Replays a logged run's decisions at almost no cost: the same run with
/// the policy taken out, i.e. the driver's own time.
struct Replay {
    log: Vec<Step>,
    at: usize,
}

impl Balancer for Replay {
    fn name(&self) -> &'static str {
        "replay"
    }
    fn next(&mut self, _pu: PuId, _now: f64) -> Decision {
        match &mut self.log[self.at] {
            Step::Waits(k) => {
                *k -= 1;
                if *k == 0 {
                    self.at += 1;
                }
                Decision::Wait
            }
            Step::Run(d) => {
                self.at += 1;
                *d
            }
        }
    }
    fn completed(&mut self, _done: Completion) {}
    fn remaining(&self) -> u64 {
        0
    }
}

fn platform_arg(arg: Option<&String>) -> Result<Platform, String> {
    let name = arg.map_or("plb-hac", |s| s.as_str());
    match Platform::builtin(name) {
        Some(p) => Ok(p),
        None => {
            let text = std::fs::read_to_string(name).map_err(|e| format!("{name}: {e}"))?;
            Platform::parse(&text).map_err(|e| format!("{name}: {e}"))
        }
    }
}

fn app_arg(arg: Option<&String>, default: &str) -> Result<App, String> {
    let name = arg.map_or(default, |s| s.as_str());
    App::parse(name).ok_or_else(|| format!("unknown application {name}"))
}

/// `platform`: the derived curves of every PU and the optimum split.
fn show_platform(args: &[String]) -> Result<(), String> {
    let p = platform_arg(args.first())?;
    let app = app_arg(args.get(1), "mm")?;
    let total: u64 = args
        .get(2)
        .map_or(Ok(app.paper_units()), |s| s.parse())
        .map_err(|_| "units")?;
    let pus = sim_pus(&p, &app);
    println!(
        "SIMULATED platform {} ({} PUs), application {} (true curves derived from published peaks, docs/simulator.md)",
        p.name,
        pus.len(),
        app.name()
    );
    println!(
        "SIMULATED {:<18} {:>9} {:>8} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "PU", "GFLOP/s", "GB/s", "fill", "s/unit@1", "s/unit@W/n", "transfer@W/n", "E(0) s"
    );
    let per = (total / pus.len() as u64).max(1) as f64;
    for (r, pu) in p.pus().iter().zip(&pus) {
        let c = &p.classes[r.class];
        let curve = DeviceCurve::new(c, &app);
        println!(
            "SIMULATED {:<18} {:>9.1} {:>8.1} {:>10.1} {:>12.3e} {:>12.3e} {:>12.3e} {:>12.3e}",
            r.label,
            c.peak_gflops(),
            c.mem_gb_s,
            curve.fill,
            pu.compute.time(1.0),
            pu.compute.time(per) / per,
            pu.transfer.time(per),
            true_time(pu, 0.0),
        );
    }
    let d = optimum_split(&pus, total).ok_or("no optimum")?;
    println!(
        "SIMULATED one-block optimum of {total} units: T = {:.4} s",
        d.finish_time
    );
    for (r, x) in p.pus().iter().zip(&d.units) {
        println!(
            "SIMULATED   {:<18} {:>12.1} units ({:>5.1} %)",
            r.label,
            x,
            100.0 * x / total as f64
        );
    }
    Ok(())
}

/// Seconds, readable at any scale.
fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// `paper`: the papers' scenarios (A; A,B; ...) x every balancer vs the
/// optimum.
fn paper(args: &[String]) -> Result<(), String> {
    let p = platform_arg(args.first())?;
    let app = app_arg(args.get(1), "mm")?;
    let seeds: u64 = args
        .get(2)
        .map_or(Ok(3), |s| s.parse())
        .map_err(|_| "seeds")?;
    let noise: f64 = args
        .get(3)
        .map_or(Ok(0.03), |s| s.parse())
        .map_err(|_| "noise")?;
    let total: u64 = args
        .get(4)
        .map_or(Ok(app.paper_units()), |s| s.parse())
        .map_err(|_| "units")?;
    let names: Vec<String> = args.get(5).map_or_else(
        || BALANCERS.map(String::from).to_vec(),
        |s| s.split(',').map(String::from).collect(),
    );
    println!(
        "SIMULATED {} / {} ({total} units), {:.0} % noise, seeds 1..={seeds}: makespan / one-block optimum (mean/worst)",
        p.name,
        app.name(),
        noise * 100.0
    );
    let machines = p.machines();
    for k in 1..=machines.len() {
        let sel = p.select(&machines[..k]).map_err(|e| e.to_string())?;
        let pus = sim_pus(&sel, &app);
        let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
        let mut line = format!(
            "SIMULATED {:<10} {:>2} PUs opt {:>10} |",
            machines[..k].join(","),
            pus.len(),
            secs(opt)
        );
        for name in &names {
            let mut ratios = Vec::new();
            for seed in 1..=seeds {
                let mut b = build_balancer(name, pus.len(), total)?;
                let r = simulate(b.as_mut(), &pus, total, SimOptions { noise, seed })
                    .map_err(|e| format!("{name}: {e:?}"))?;
                ratios.push(r.makespan / opt);
            }
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            let worst = ratios.iter().copied().fold(0.0, f64::max);
            line += &format!(
                " {} {mean:.3}/{worst:.3} |",
                name.trim_start_matches("greedy ")
            );
        }
        println!("{line}");
    }
    Ok(())
}

/// What [`measure`] saw.
struct Measured {
    /// Wall seconds of the whole simulated run, balancer untimed.
    wall: f64,
    /// Wall seconds of the same run replayed without the policy.
    driver: f64,
    /// Longest single balancer call, seconds (timed run).
    worst: f64,
    /// Balancer calls (`next` + `completed`).
    calls: u64,
    /// Blocks handed out.
    blocks: usize,
    /// `next` calls.
    asks: u64,
    /// Simulated makespan / one-block optimum.
    ratio: f64,
}

/// Runs of `name` on the same platform: untimed (wall time of the
/// simulation); every balancer call timed, decisions logged (longest
/// call); the log replayed (the driver's share: the run without the
/// policy). Policy time = wall − driver. The untimed run and the replay
/// are repeated while under a second (at most 5 times) and the fastest
/// kept: the machine is shared.
fn measure(name: &str, pus: &[SimPu], total: u64, opt: f64) -> Result<Measured, String> {
    let run = |b: &mut dyn Balancer| {
        let start = Instant::now();
        let r = simulate(b, pus, total, SimOptions::default()).map_err(|e| format!("{e:?}"))?;
        Ok::<_, String>((r, start.elapsed().as_secs_f64()))
    };
    let best_of = |make: &mut dyn FnMut() -> Result<Box<dyn Balancer>, String>| {
        let (mut spent, mut best, mut report) = (0.0, f64::INFINITY, None);
        for _ in 0..5 {
            let (r, s) = run(make()?.as_mut())?;
            best = f64::min(best, s);
            spent += s;
            report = Some(r);
            if spent > 1.0 {
                break;
            }
        }
        Ok::<_, String>((report.expect("one run"), best))
    };
    let (r, wall) = best_of(&mut || build_balancer(name, pus.len(), total))?;
    let mut b = build_balancer(name, pus.len(), total)?;
    let mut t = Timed::new(b.as_mut());
    run(&mut t)?;
    let (worst, calls) = (t.worst.as_secs_f64(), t.calls);
    let log = t.log;
    let (again, driver) = best_of(&mut || {
        Ok(Box::new(Replay {
            log: log.clone(),
            at: 0,
        }))
    })?;
    if again.runs != r.runs {
        return Err(format!("{name}: the replay diverged"));
    }
    Ok(Measured {
        wall,
        driver,
        worst,
        calls,
        blocks: r.runs.len(),
        asks: r.asks,
        ratio: r.makespan / opt,
    })
}

/// `scaling`: wall time of the simulation and of the policies' decisions
/// against the number of PUs. A balancer whose run exceeds the budget is
/// not run at larger sizes (reported, not hidden).
fn scaling(args: &[String]) -> Result<(), String> {
    let sizes: Vec<usize> = args
        .first()
        .map_or("10,100,1000,10000", |s| s.as_str())
        .split(',')
        .map(|s| s.parse().map_err(|_| format!("bad size {s}")))
        .collect::<Result<_, _>>()?;
    let app = app_arg(args.get(1), "kmeans")?;
    let budget: f64 = args
        .get(2)
        .map_or(Ok(30.0), |s| s.parse())
        .map_err(|_| "budget")?;
    let names: Vec<String> = args.get(3).map_or_else(
        || {
            [
                "greedy W/100n",
                "hdss",
                "acosta",
                "plb-hec",
                "plb-hec/fast",
                "plb-hac",
            ]
            .map(String::from)
            .to_vec()
        },
        |s| s.split(',').map(String::from).collect(),
    );
    println!(
        "SIMULATED scaling, synthetic platforms (seed 1), application {}, 10^6 units per PU, no noise; wall times measured on this machine (policy = wall - driver, driver = the run replayed without the policy)",
        app.name()
    );
    println!(
        "{:<10} {:>6} {:>13} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "SIMULATED",
        "PUs",
        "balancer",
        "blocks",
        "asks",
        "wall s",
        "policy s",
        "driver s",
        "us/call",
        "worst ms",
        "/opt"
    );
    let mut over: Vec<(String, usize, f64)> = Vec::new();
    for &n in &sizes {
        let p = Platform::synthetic(n, 1);
        let pus = sim_pus(&p, &app);
        // 10^6 units per PU whatever n (a k-means share of ~1 s on a CPU,
        // above every GPU's fill).
        let total = 1_000_000 * n as u64;
        let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
        for name in &names {
            if let Some((_, at, s)) = over.iter().find(|(b, _, _)| b == name) {
                println!(
                    "SIMULATED  {n:>6} {name:>13}  not run: {s:.1} s at {at} PUs exceeded the {budget} s budget"
                );
                continue;
            }
            let real = match name.as_str() {
                "greedy W/100n" => format!("greedy:{}", (total / (100 * n as u64)).max(1)),
                other => other.to_string(),
            };
            let m = measure(&real, &pus, total, opt)?;
            println!(
                "SIMULATED  {n:>6} {name:>13} {:>8} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.2} {:>9.3} {:>7.3}",
                m.blocks,
                m.asks,
                m.wall,
                m.wall - m.driver,
                m.driver,
                1e6 * (m.wall - m.driver) / m.calls.max(1) as f64,
                1e3 * m.worst,
                m.ratio
            );
            if m.wall > budget {
                over.push((name.clone(), n, m.wall));
            }
        }
    }
    Ok(())
}

/// `million`: greedy with 10^6 blocks on 1,000 PUs, untimed balancer (the
/// simulator's own speed), then timed.
fn million(args: &[String]) -> Result<(), String> {
    let n: usize = args
        .first()
        .map_or(Ok(1000), |s| s.parse())
        .map_err(|_| "PUs")?;
    let blocks: u64 = args
        .get(1)
        .map_or(Ok(1_000_000), |s| s.parse())
        .map_err(|_| "blocks")?;
    let app = App::parse("kmeans").expect("known");
    let p = Platform::synthetic(n, 1);
    let pus = sim_pus(&p, &app);
    let block = 1000u64;
    let total = blocks * block;
    let mut g = build_balancer(&format!("greedy:{block}"), n, total)?;
    let start = Instant::now();
    let r = simulate(
        g.as_mut(),
        &pus,
        total,
        SimOptions {
            noise: 0.03,
            seed: 1,
        },
    )
    .map_err(|e| format!("{e:?}"))?;
    let wall = start.elapsed().as_secs_f64();
    let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
    println!(
        "SIMULATED greedy, {n} synthetic PUs, {} blocks of {block} units (k-means, 3 % noise): wall {wall:.3} s ({:.0} ns/block), simulated makespan {:.3} s = {:.3} x one-block optimum",
        r.runs.len(),
        1e9 * wall / r.runs.len() as f64,
        r.makespan,
        r.makespan / opt
    );
    let m = measure(&format!("greedy:{block}"), &pus, total, opt)?;
    println!(
        "SIMULATED same run without noise: wall {:.3} s, of which driver {:.3} s (replayed without the policy) and policy {:.3} s over {} calls",
        m.wall,
        m.driver,
        m.wall - m.driver,
        m.calls
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Issue 6 §2 experiments 1-5, simulated form (scripts/exp-sim-*.sh).

/// Noise of every experiment run (uniform ±3 % on compute times).
const EXP_NOISE: f64 = 0.03;

/// The contenders of experiments 1 and 3; greedy (blocks of W/64) is the
/// baseline of the speedups.
const EXP_BALANCERS: [&str; 5] = ["greedy:W/64", "hdss", "acosta", "plb-hec", "plb-hac"];

/// Options of an `expN` subcommand.
struct ExpArgs {
    quick: bool,
    reps: u64,
    out: Option<String>,
}

fn exp_args(args: &[String], default_reps: u64) -> Result<ExpArgs, String> {
    let mut a = ExpArgs {
        quick: false,
        reps: 0,
        out: None,
    };
    let mut it = args.iter();
    while let Some(x) = it.next() {
        match x.as_str() {
            "--quick" => a.quick = true,
            "--reps" => {
                a.reps = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--reps N (N >= 1)")?
            }
            "--out" => a.out = Some(it.next().ok_or("--out FILE")?.clone()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if a.reps == 0 {
        a.reps = if a.quick { 1 } else { default_reps };
    }
    Ok(a)
}

/// A CSV being written: to a file, or stdout.
struct Csv(Box<dyn std::io::Write>);

impl Csv {
    fn create(path: Option<&str>) -> Result<Csv, String> {
        Ok(Csv(match path {
            Some(p) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(p).map_err(|e| format!("{p}: {e}"))?,
            )),
            None => Box::new(std::io::stdout()),
        }))
    }
    fn line(&mut self, text: &str) -> Result<(), String> {
        writeln!(self.0, "{text}").map_err(|e| e.to_string())
    }
}

use std::io::Write as _;

/// `FILE.csv` → `FILE-<what>.csv` (a second table of the same experiment).
fn side_path(out: Option<&str>, what: &str) -> Option<String> {
    out.map(|p| match p.strip_suffix(".csv") {
        Some(stem) => format!("{stem}-{what}.csv"),
        None => format!("{p}-{what}"),
    })
}

/// Mean, population standard deviation, min and max over repetitions.
#[derive(Clone, Copy)]
struct Spread {
    mean: f64,
    sd: f64,
    min: f64,
    max: f64,
}

fn spread(v: &[f64]) -> Spread {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Spread {
        mean,
        sd: var.sqrt(),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.6},{:.6},{:.6},{:.6}",
            self.mean, self.sd, self.min, self.max
        )
    }
}

/// CSV header of a [`Spread`] column group.
fn spread_header(name: &str) -> String {
    format!("{name}_mean,{name}_sd,{name}_min,{name}_max")
}

/// The first lines of every experiment CSV.
fn exp_preamble(csv: &mut Csv, what: &str, a: &ExpArgs) -> Result<(), String> {
    csv.line(&format!("# SIMULATED ({what}): virtual time on true curves derived from published peaks (docs/simulator.md), never measured on the devices named"))?;
    csv.line(&format!(
        "# repetitions: seeds 1..={}, noise +-{:.0} % uniform on compute times{}; spread columns: mean, population sd, min, max over the repetitions",
        a.reps,
        EXP_NOISE * 100.0,
        if a.quick { ", --quick (reduced sizes)" } else { "" }
    ))
}

/// An application of the papers at input size `size` (matrix order, genes,
/// points, options): the application and its number of units.
fn sized_app(name: &str, size: u64) -> Result<(App, u64), String> {
    Ok(
        match App::parse(name).ok_or(format!("unknown application {name}"))? {
            App::MatMul { .. } => (App::MatMul { n: size }, size),
            App::Grn { ops_per_pair, .. } => (
                App::Grn {
                    genes: size,
                    ops_per_pair,
                },
                size,
            ),
            other => (other, size),
        },
    )
}

/// Input sizes of experiment 1: the papers' ranges (PLB-HeC: MM 4,096² to
/// 65,536², GRN 60,000 to 140,000 genes, Black-Scholes 10,000 to 500,000
/// options; PLB-HAC: k-means up to 500,000 points) plus larger k-means
/// and Black-Scholes inputs, where the run is not dominated by fixed costs.
fn exp1_sizes(app: &str, quick: bool) -> Vec<u64> {
    match (app, quick) {
        ("mm", false) => vec![4096, 16384, 32768, 65536],
        ("mm", true) => vec![4096],
        ("grn", false) => vec![60_000, 100_000, 140_000],
        ("grn", true) => vec![20_000],
        ("kmeans", false) => vec![500_000, 50_000_000, 500_000_000],
        ("kmeans", true) => vec![5_000_000],
        (_, false) => vec![10_000, 500_000, 100_000_000, 10_000_000_000],
        (_, true) => vec![10_000_000],
    }
}

/// One simulated run of a balancer built by name.
fn exp_run(name: &str, pus: &[SimPu], total: u64, seed: u64) -> Result<SimReport, String> {
    let mut b = build_balancer(name, pus.len(), total)?;
    simulate(
        b.as_mut(),
        pus,
        total,
        SimOptions {
            noise: EXP_NOISE,
            seed,
        },
    )
    .map_err(|e| format!("{name}: {e:?}"))
}

/// Experiment 1: speedup over greedy and makespan / optimum versus the
/// number of machines and the input size (PLB-HAC Fig. 4, PLB-HeC Figs.
/// 4-5).
fn exp1(a: &ExpArgs) -> Result<(), String> {
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 1, speedup over greedy W/64 and ratio to the one-block optimum",
        a,
    )?;
    csv.line(&format!(
        "platform,app,size,machines,n_machines,pus,balancer,reps,opt_s,{},{},{}",
        spread_header("makespan_s"),
        spread_header("ratio_opt"),
        spread_header("speedup_greedy")
    ))?;
    for platform in ["plb-hac", "plb-hec"] {
        let p = Platform::builtin(platform).ok_or("builtin")?;
        let machines = p.machines();
        for app_name in workload::APPS {
            for size in exp1_sizes(app_name, a.quick) {
                let (app, total) = sized_app(app_name, size)?;
                for k in 1..=machines.len() {
                    let sel = p.select(&machines[..k]).map_err(|e| e.to_string())?;
                    let pus = sim_pus(&sel, &app);
                    let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
                    let seeds: Vec<u64> = (1..=a.reps).collect();
                    let greedy: Vec<f64> = seeds
                        .iter()
                        .map(|&s| exp_run(EXP_BALANCERS[0], &pus, total, s).map(|r| r.makespan))
                        .collect::<Result<_, _>>()?;
                    for name in EXP_BALANCERS {
                        let mut m = Vec::new();
                        for &s in &seeds {
                            m.push(exp_run(name, &pus, total, s)?.makespan);
                        }
                        let ratio: Vec<f64> = m.iter().map(|x| x / opt).collect();
                        let speedup: Vec<f64> = greedy.iter().zip(&m).map(|(g, x)| g / x).collect();
                        csv.line(&format!(
                            "{platform},{app_name},{size},{},{k},{},{},{},{opt:.6},{},{},{}",
                            machines[..k].join("-"),
                            pus.len(),
                            name.replace(' ', "_"),
                            a.reps,
                            spread(&m),
                            spread(&ratio),
                            spread(&speedup)
                        ))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A balancer looked at after every call (to read its state at a given
/// moment of the run, e.g. the end of the training).
struct Probe<B, F> {
    inner: B,
    look: F,
}

impl<B: Balancer, F: FnMut(&B)> Balancer for Probe<B, F> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        let d = self.inner.next(pu, now);
        (self.look)(&self.inner);
        d
    }
    fn completed(&mut self, done: Completion) {
        self.inner.completed(done);
        (self.look)(&self.inner);
    }
    fn remaining(&self) -> u64 {
        self.inner.remaining()
    }
}

/// `v` normalised to percent of its sum.
fn percent(v: &[f64]) -> Vec<f64> {
    let s: f64 = v.iter().sum();
    v.iter()
        .map(|x| if s > 0.0 { 100.0 * x / s } else { 0.0 })
        .collect()
}

/// Per-PU block-size distribution at the end of the training (percent of
/// one step's data), for one run of `policy`.
fn training_split(policy: &str, pus: &[SimPu], total: u64, seed: u64) -> Result<Vec<f64>, String> {
    use plb_core::balance::{
        Acosta, AcostaConfig, Hdss, HdssConfig, PlbHac, PlbHacConfig, PlbHec, PlbHecConfig,
    };
    let n = pus.len();
    let opts = SimOptions {
        noise: EXP_NOISE,
        seed,
    };
    let err = |e: SimError| format!("{policy}: {e:?}");
    let split: Vec<f64> = match policy {
        "plb-hac" => {
            // The first solution of eq. (3) giving every PU a block: the
            // end of PLB-HAC's training (earlier steps leave out the PUs
            // still in their training blocks, which would inflate the
            // others' shares).
            let mut b =
                PlbHac::new(n, total, PlbHacConfig::default()).map_err(|e| format!("{e:?}"))?;
            simulate(&mut b, pus, total, opts).map_err(err)?;
            let first = b
                .solutions()
                .find(|s| s.units.iter().all(|&u| u > 0))
                .or_else(|| {
                    b.solutions()
                        .max_by_key(|s| s.units.iter().filter(|&&u| u > 0).count())
                })
                .ok_or("plb-hac: no step solved")?;
            first.units.iter().map(|&u| u as f64).collect()
        }
        "plb-hec" => {
            // The block sizes of the first execution step.
            let mut first: Option<Vec<u64>> = None;
            let mut probe = Probe {
                inner: PlbHec::new(n, total, PlbHecConfig::default()).map_err(|e| e.to_string())?,
                look: |b: &PlbHec| {
                    if first.is_none() && b.trained() && b.block_sizes().iter().any(|&x| x > 0) {
                        first = Some(b.block_sizes().to_vec());
                    }
                },
            };
            simulate(&mut probe, pus, total, opts).map_err(err)?;
            drop(probe);
            first
                .ok_or("plb-hec: never trained")?
                .iter()
                .map(|&u| u as f64)
                .collect()
        }
        "hdss" => {
            // The weights at the end of HDSS's adaptive phase.
            let mut w: Option<Vec<f64>> = None;
            let mut probe = Probe {
                inner: Hdss::new(n, total, HdssConfig::default()).map_err(|e| e.to_string())?,
                look: |b: &Hdss| {
                    if w.is_none() && !b.weights().is_empty() {
                        w = Some(b.weights().to_vec());
                    }
                },
            };
            simulate(&mut probe, pus, total, opts).map_err(err)?;
            drop(probe);
            w.ok_or("hdss: no weights")?
        }
        "acosta" => {
            // Acosta's per-PU loads when it stopped adjusting (end of run).
            let mut b =
                Acosta::new(n, total, AcostaConfig::default()).map_err(|e| e.to_string())?;
            simulate(&mut b, pus, total, opts).map_err(err)?;
            b.loads().iter().map(|&u| u as f64).collect()
        }
        other => return Err(format!("no training split for {other}")),
    };
    Ok(percent(&split))
}

/// Experiment 2: block-size distribution among the PUs at the end of the
/// training, against the optimum (PLB-HAC Fig. 5b, PLB-HeC Fig. 6).
fn exp2(a: &ExpArgs) -> Result<(), String> {
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 2, per-PU block size at the end of the training, percent of one step",
        a,
    )?;
    csv.line(&format!(
        "platform,app,size,pu,label,kind,policy,reps,{}",
        spread_header("share_pct")
    ))?;
    let cases: Vec<(&str, &str, u64)> = if a.quick {
        vec![("plb-hac", "mm", 4096), ("plb-hec", "mm", 4096)]
    } else {
        vec![
            ("plb-hac", "mm", 65_536),
            ("plb-hac", "grn", 140_000),
            ("plb-hac", "kmeans", 500_000_000),
            ("plb-hec", "mm", 65_536),
            ("plb-hec", "mm", 16_384),
            ("plb-hec", "grn", 140_000),
            ("plb-hec", "blackscholes", 10_000_000_000),
        ]
    };
    for (platform, app_name, size) in cases {
        let p = Platform::builtin(platform).ok_or("builtin")?;
        let (app, total) = sized_app(app_name, size)?;
        let pus = sim_pus(&p, &app);
        let refs = p.pus();
        let opt = optimum_split(&pus, total).ok_or("no optimum")?;
        let mut rows: Vec<(&str, Vec<Vec<f64>>)> = vec![("optimum", vec![percent(&opt.units)])];
        for policy in ["hdss", "acosta", "plb-hec", "plb-hac"] {
            let runs = (1..=a.reps)
                .map(|s| training_split(policy, &pus, total, s))
                .collect::<Result<Vec<_>, _>>()?;
            rows.push((policy, runs));
        }
        for (policy, runs) in &rows {
            for (i, r) in refs.iter().enumerate() {
                let v: Vec<f64> = runs.iter().map(|run| run[i]).collect();
                csv.line(&format!(
                    "{platform},{app_name},{size},{i},{},{},{policy},{},{}",
                    r.label,
                    p.classes[r.class].kind.name(),
                    runs.len(),
                    spread(&v)
                ))?;
            }
        }
    }
    Ok(())
}

/// Experiment 3: idle time per PU class (PLB-HAC Fig. 5a, PLB-HeC Fig. 7).
fn exp3(a: &ExpArgs) -> Result<(), String> {
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 3, idle time per PU class, percent of the makespan, mean over the PUs of the class",
        a,
    )?;
    csv.line(&format!(
        "platform,app,size,balancer,kind,pus,reps,{}",
        spread_header("idle_pct")
    ))?;
    let cases: Vec<(&str, &str, u64)> = if a.quick {
        vec![("plb-hac", "mm", 4096)]
    } else {
        vec![
            ("plb-hac", "mm", 4096),
            ("plb-hac", "mm", 65_536),
            ("plb-hac", "grn", 140_000),
            ("plb-hac", "kmeans", 500_000_000),
            ("plb-hec", "mm", 65_536),
            ("plb-hec", "grn", 140_000),
            ("plb-hec", "blackscholes", 10_000_000_000),
        ]
    };
    for (platform, app_name, size) in cases {
        let p = Platform::builtin(platform).ok_or("builtin")?;
        let (app, total) = sized_app(app_name, size)?;
        let pus = sim_pus(&p, &app);
        let kinds: Vec<&str> = p
            .pus()
            .iter()
            .map(|r| p.classes[r.class].kind.name())
            .collect();
        let mut classes: Vec<&str> = kinds.clone();
        classes.dedup();
        classes.sort();
        classes.dedup();
        for name in EXP_BALANCERS {
            let mut per_class: Vec<Vec<f64>> = vec![Vec::new(); classes.len()];
            for s in 1..=a.reps {
                let idle = exp_run(name, &pus, total, s)?.idle_fraction();
                for (c, class) in classes.iter().enumerate() {
                    let v: Vec<f64> = idle
                        .iter()
                        .zip(&kinds)
                        .filter(|(_, k)| *k == class)
                        .map(|(x, _)| 100.0 * x)
                        .collect();
                    per_class[c].push(v.iter().sum::<f64>() / v.len() as f64);
                }
            }
            for (c, class) in classes.iter().enumerate() {
                csv.line(&format!(
                    "{platform},{app_name},{size},{},{class},{},{},{}",
                    name.replace(' ', "_"),
                    kinds.iter().filter(|k| *k == class).count(),
                    a.reps,
                    spread(&per_class[c])
                ))?;
            }
        }
    }
    Ok(())
}

/// PLB-HAC's adaptability scenario: machines A and B, one CPU and one GPU
/// each (the Phi of B left out, as in PLB-HAC §5.4).
fn exp4_platform(change: Option<(f64, f64)>) -> Result<Platform, String> {
    let mut text = String::from(
        "platform plb-hac-AB\nhome A\nnetwork 1.1 50\n\
         pu A i7-5930K cpu 1 6 3.5 32 68.3 - - 5\n\
         pu A K5200 gpu 1 2304 0.667 2 192 12 10 20\n\
         pu B i7-5930K cpu 1 6 3.5 32 68.3 - - 5\n\
         pu B GTX-970 gpu 1 1664 1.05 2 224 12 10 20\n",
    );
    if let Some((at, factor)) = change {
        text += &format!("change A K5200 {at} {factor}\n");
    }
    Platform::parse(&text).map_err(|e| e.to_string())
}

/// A time model scaled by a constant (a slowed-down device).
struct Scaled<'a>(&'a dyn plb_core::model::TimeModel, f64);

impl plb_core::model::TimeModel for Scaled<'_> {
    fn time(&self, x: f64) -> f64 {
        self.0.time(x) * self.1
    }
    fn slope(&self, x: f64) -> f64 {
        self.0.slope(x) * self.1
    }
}

/// Experiment 4: adaptability. GPU A's compute becomes `FACTOR` times
/// slower at mid-run (a competing load); block sizes over time per PU
/// (PLB-HAC Fig. 6).
fn exp4(a: &ExpArgs) -> Result<(), String> {
    let factor = 2.0;
    let (app, total) = sized_app("mm", if a.quick { 16_384 } else { 65_536 })?;
    let plain = sim_pus(&exp4_platform(None)?, &app);
    let opt = optimum_split(&plain, total).ok_or("no optimum")?;
    // The change: at half the optimum makespan (mid-run for every policy).
    let at = (opt.finish_time * 0.5 * 1000.0).round() / 1000.0;
    let p = exp4_platform(Some((at, factor)))?;
    let pus = sim_pus(&p, &app);
    let refs = p.pus();
    let gpu_a = refs
        .iter()
        .position(|r| r.label.starts_with("A/K5200"))
        .ok_or("no GPU A")?;
    // The optimum split once GPU A is slowed down (from the start).
    let slow_models: Vec<SumModel<'_>> = pus
        .iter()
        .enumerate()
        .map(|(i, pu)| {
            let f = if i == gpu_a { factor } else { 1.0 };
            SumModel(Scaled(pu.compute.as_ref(), f), pu.transfer.as_ref())
        })
        .collect();
    let slow = plb_core::solve::FastSolver::default()
        .solve_models(&slow_models, total as f64)
        .map_err(|e| format!("{e:?}"))?;
    let mut blocks = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut blocks,
        &format!(
            "experiment 4, every block of seed 1; GPU A (A/K5200) {factor}x slower from t = {at} s"
        ),
        a,
    )?;
    blocks.line("balancer,pu,label,start_s,end_s,units")?;
    let summary_path = side_path(a.out.as_deref(), "summary");
    let mut summary = Csv::create(summary_path.as_deref())?;
    exp_preamble(
        &mut summary,
        &format!(
            "experiment 4 summary: MM {total} rows on HAC A,B (CPU+GPU each), GPU A {factor}x slower from t = {at} s; GPU A share of the units of blocks started before / after the change (after: from t = change + 10 % of the optimum)"
        ),
        a,
    )?;
    summary.line(&format!(
        "balancer,reps,change_s,factor,opt_nochange_s,opt_gpuA_share_before_pct,opt_gpuA_share_after_pct,{},{},{},{}",
        spread_header("makespan_s"),
        spread_header("ratio_opt_nochange"),
        spread_header("gpuA_share_before_pct"),
        spread_header("gpuA_share_after_pct")
    ))?;
    for name in ["plb-hac", "hdss", "greedy:W/64"] {
        let (mut m, mut before, mut after) = (Vec::new(), Vec::new(), Vec::new());
        for s in 1..=a.reps {
            let r = exp_run(name, &pus, total, s)?;
            if s == 1 {
                for run in &r.runs {
                    blocks.line(&format!(
                        "{},{},{},{:.6},{:.6},{}",
                        name.replace(' ', "_"),
                        run.block.pu,
                        refs[run.block.pu].label,
                        run.start,
                        run.end,
                        run.block.len
                    ))?;
                }
            }
            let share = |keep: &dyn Fn(f64) -> bool| {
                let (mut g, mut all) = (0u64, 0u64);
                for run in r.runs.iter().filter(|b| keep(b.start)) {
                    all += run.block.len;
                    if run.block.pu == gpu_a {
                        g += run.block.len;
                    }
                }
                100.0 * g as f64 / all.max(1) as f64
            };
            m.push(r.makespan);
            before.push(share(&|t| t < at));
            after.push(share(&|t| t >= at + 0.1 * opt.finish_time));
        }
        let ratio: Vec<f64> = m.iter().map(|x| x / opt.finish_time).collect();
        summary.line(&format!(
            "{},{},{at},{factor},{:.6},{:.3},{:.3},{},{},{},{}",
            name.replace(' ', "_"),
            a.reps,
            opt.finish_time,
            100.0 * opt.units[gpu_a] / total as f64,
            100.0 * slow.units[gpu_a] / total as f64,
            spread(&m),
            spread(&ratio),
            spread(&before),
            spread(&after)
        ))?;
    }
    Ok(())
}

/// compute + transfer.
struct SumModel<'a>(Scaled<'a>, &'a dyn plb_core::model::TimeModel);

impl plb_core::model::TimeModel for SumModel<'_> {
    fn time(&self, x: f64) -> f64 {
        self.0.time(x) + self.1.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.0.slope(x) + self.1.slope(x)
    }
}

/// Experiment 5: cost of the model evaluation (fits + solve) per step,
/// IPOPT against the fast solver, versus the number of PUs. The costs are
/// wall-clock times MEASURED on the machine running this; the runs they
/// come from are simulated.
fn exp5(a: &ExpArgs) -> Result<(), String> {
    use plb_core::balance::{PlbHac, PlbHacConfig, PlbHec, PlbHecConfig};
    use plb_core::solve::Primary;
    let sizes: Vec<usize> = if a.quick {
        vec![2, 4, 8]
    } else {
        vec![2, 4, 8, 16, 32, 64, 128, 256]
    };
    let app = App::parse("kmeans").expect("known");
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 5: the runs are simulated (synthetic platforms, seed 1, k-means, 10^6 points per PU); the times are MEASURED wall clock of the policy's calls on the machine that ran this, see the script's header line for its load",
        a,
    )?;
    csv.line(&format!(
        "pus,balancer,solver,reps,steps,{},{},{}",
        spread_header("policy_ms_per_step"),
        spread_header("worst_call_ms"),
        spread_header("ratio_opt")
    ))?;
    for &n in &sizes {
        let p = Platform::synthetic(n, 1);
        let pus = sim_pus(&p, &app);
        let total = 1_000_000 * n as u64;
        let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
        for (policy, solver) in [
            ("plb-hac", Primary::Fast),
            ("plb-hac", Primary::Ipopt),
            ("plb-hec", Primary::Fast),
            ("plb-hec", Primary::Ipopt),
        ] {
            let (mut per_step, mut worst, mut ratio, mut steps) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for s in 1..=a.reps {
                let opts = SimOptions {
                    noise: EXP_NOISE,
                    seed: s,
                };
                let (report, t, solves) = if policy == "plb-hac" {
                    let cfg = PlbHacConfig {
                        solver,
                        ..PlbHacConfig::default()
                    };
                    let mut b = PlbHac::new(n, total, cfg).map_err(|e| format!("{e:?}"))?;
                    let mut t = Timed::new(&mut b);
                    let r = simulate(&mut t, &pus, total, opts).map_err(|e| format!("{e:?}"))?;
                    let (total_t, worst_t) = (t.total, t.worst);
                    (r, (total_t, worst_t), b.stats().solves)
                } else {
                    let cfg = PlbHecConfig {
                        primary: solver,
                        ..PlbHecConfig::default()
                    };
                    let mut b = PlbHec::new(n, total, cfg).map_err(|e| e.to_string())?;
                    let mut t = Timed::new(&mut b);
                    let r = simulate(&mut t, &pus, total, opts).map_err(|e| format!("{e:?}"))?;
                    let (total_t, worst_t) = (t.total, t.worst);
                    (r, (total_t, worst_t), b.stats().solves)
                };
                per_step.push(1e3 * t.0.as_secs_f64() / solves.max(1) as f64);
                worst.push(1e3 * t.1.as_secs_f64());
                ratio.push(report.makespan / opt);
                steps.push(solves as f64);
            }
            csv.line(&format!(
                "{n},{policy},{},{},{:.1},{},{},{}",
                if solver == Primary::Fast {
                    "fast"
                } else {
                    "ipopt"
                },
                a.reps,
                spread(&steps).mean,
                spread(&per_step),
                spread(&worst),
                spread(&ratio)
            ))?;
        }
    }
    // The solve alone (core/src/bench.rs: random mixture models, median).
    let solve_path = side_path(a.out.as_deref(), "solve");
    let mut solve = Csv::create(solve_path.as_deref())?;
    solve.line("# MEASURED wall clock of one equal-finish-time solve alone (core/src/bench.rs, random 7-term curve models, median over repeated solves), on the machine that ran this")?;
    solve.line("pus,cases,ipopt_ms,ipopt_warm_ms,fast_ms,ipopt_over_fast,ipopt_failures")?;
    let cfg = plb_core::bench::BenchConfig {
        pu_counts: sizes.clone(),
        cases: if a.quick { 1 } else { 3 },
        budget_s: if a.quick { 0.02 } else { 0.2 },
        ..plb_core::bench::BenchConfig::default()
    };
    for r in plb_core::bench::bench_solvers(&cfg) {
        solve.line(&format!(
            "{},{},{:.6},{:.6},{:.6},{:.2},{}",
            r.pus,
            r.cases,
            1e3 * r.ipopt_s,
            1e3 * r.ipopt_warm_s,
            1e3 * r.fast_s,
            r.ratio,
            r.ipopt_failures
        ))?;
    }
    Ok(())
}

/// `exp1` … `exp5`.
fn experiment(which: &str, args: &[String]) -> Result<(), String> {
    let a = exp_args(args, if which == "exp5" { 3 } else { 10 })?;
    match which {
        "exp1" => exp1(&a),
        "exp2" => exp2(&a),
        "exp3" => exp3(&a),
        "exp4" => exp4(&a),
        _ => exp5(&a),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    let out = match args.first().map(|s| s.as_str()) {
        Some("platform") => show_platform(rest),
        Some("paper") => paper(rest),
        Some("scaling") => scaling(rest),
        Some("million") => million(rest),
        Some(e @ ("exp1" | "exp2" | "exp3" | "exp4" | "exp5")) => experiment(e, rest),
        _ => Err(String::from(
            "usage: simulate platform|paper|scaling|million|exp1..exp5 [args] (see the file's documentation)",
        )),
    };
    if let Err(e) = out {
        eprintln!("simulate: {e}");
        std::process::exit(1);
    }
}
