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
//! ```
//!
//! APP: mm, grn, kmeans, blackscholes. The clock is read here, around the
//! balancer calls ([`Timed`]), never inside `plb-core`.

use std::time::{Duration, Instant};

use plb_core::balance::sim::{
    BALANCERS, SimOptions, SimPu, build_balancer, optimum_split, simulate, true_time,
};
use plb_core::balance::{Balancer, Completion, Decision, PuId};
use plb_core::platform::Platform;
use plb_core::workload::{App, DeviceCurve, sim_pus};

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
    calls: u64,
    log: Vec<Step>,
}

impl<'a> Timed<'a> {
    fn new(inner: &'a mut dyn Balancer) -> Timed<'a> {
        Timed {
            inner,
            worst: Duration::ZERO,
            calls: 0,
            log: Vec::new(),
        }
    }

    fn note(&mut self, t: Instant) {
        self.worst = self.worst.max(t.elapsed());
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    let out = match args.first().map(|s| s.as_str()) {
        Some("platform") => show_platform(rest),
        Some("paper") => paper(rest),
        Some("scaling") => scaling(rest),
        Some("million") => million(rest),
        _ => Err(String::from(
            "usage: simulate platform|paper|scaling|million [args] (see the file's documentation)",
        )),
    };
    if let Err(e) = out {
        eprintln!("simulate: {e}");
        std::process::exit(1);
    }
}
