//! `plb simulate scaling` and `plb simulate million`: the wall time of the
//! simulation and of the policies' decisions, read around the balancer
//! calls ([`Timed`]; never inside `plb-core`), and replayed without the
//! policy ([`Replay`]) to separate the driver's share.

use std::time::{Duration, Instant};

use clap::Args;
use plb_core::balance::sim::{SimOptions, SimPu, optimum_split, simulate};
use plb_core::balance::{Balancer, Completion, Decision, PuId};
use plb_core::platform::Platform;
use plb_core::workload::{App, sim_pus};

use super::{app, balancer};
use crate::cli::{positive, positive_seconds};

/// The balancers of `scaling` by default, comma-separated; `greedy:W/100n`
/// is greedy with blocks of `W / (100 n)` units on `n` PUs.
const SCALING_BALANCERS: &str = "greedy:W/100n,hdss,acosta,plb-hec,plb-hec:solver=fast,plb-hac";

/// Options of `plb simulate scaling`.
#[derive(Args)]
pub struct ScalingArgs {
    /// The application
    #[arg(default_value = "kmeans", value_parser = app())]
    app: App,
    /// Numbers of PUs (synthetic platforms), comma-separated
    #[arg(long, value_name = "N,..", value_delimiter = ',', default_value = "10,100,1000,10000", value_parser = positive::<usize>())]
    pus: Vec<usize>,
    /// A balancer whose run takes longer is not run at larger sizes
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = positive_seconds)]
    budget: f64,
    /// The balancers, comma-separated (registry names, or greedy:W/100n)
    #[arg(long, value_name = "NAME,..", value_delimiter = ',', default_value = SCALING_BALANCERS)]
    balancers: Vec<String>,
}

/// Options of `plb simulate million`.
#[derive(Args)]
pub struct MillionArgs {
    /// Synthetic PUs
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = positive::<usize>())]
    pus: usize,
    /// Blocks of 1,000 units
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = positive::<u64>())]
    blocks: u64,
}

/// A decision as logged for replay (runs of `Wait` merged).
#[derive(Clone, Copy)]
enum Step {
    Waits(u64),
    Run(Decision),
}

/// A balancer whose every call is timed with the wall clock, and whose
/// decisions are logged for [`Replay`].
pub struct Timed<'a> {
    inner: &'a mut dyn Balancer,
    pub worst: Duration,
    pub total: Duration,
    calls: u64,
    log: Vec<Step>,
}

impl<'a> Timed<'a> {
    pub fn new(inner: &'a mut dyn Balancer) -> Timed<'a> {
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
        Ok::<_, String>((report.ok_or("no run")?, best))
    };
    let (r, wall) = best_of(&mut || balancer(name, pus.len(), total))?;
    let mut b = balancer(name, pus.len(), total)?;
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
pub fn scaling(args: &ScalingArgs) -> Result<(), String> {
    let (app, sizes, budget, names) = (&args.app, &args.pus, args.budget, &args.balancers);
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
    for &n in sizes {
        let p = Platform::synthetic(n, 1);
        let pus = sim_pus(&p, app);
        // 10^6 units per PU whatever n (a k-means share of ~1 s on a CPU,
        // above every GPU's fill).
        let total = 1_000_000 * n as u64;
        let opt = optimum_split(&pus, total).ok_or("no optimum")?.finish_time;
        for name in names {
            if let Some((_, at, s)) = over.iter().find(|(b, _, _)| b == name) {
                println!(
                    "SIMULATED  {n:>6} {name:>13}  not run: {s:.1} s at {at} PUs exceeded the {budget} s budget"
                );
                continue;
            }
            let real = match name.as_str() {
                "greedy:W/100n" => format!("greedy:{}", (total / (100 * n as u64)).max(1)),
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
pub fn million(args: &MillionArgs) -> Result<(), String> {
    let (n, blocks) = (args.pus, args.blocks);
    let app = App::parse("kmeans").ok_or("application kmeans missing")?;
    let p = Platform::synthetic(n, 1);
    let pus = sim_pus(&p, &app);
    let block = 1000u64;
    let total = blocks * block;
    let mut g = balancer(&format!("greedy:{block}"), n, total)?;
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
