//! PLB-HAC on the virtual-time simulator (`plb_core::balance::sim`).
//! Every figure here is **simulated**, never measured: true performance
//! curves are given to the simulator, the balancer only sees the block
//! times. `simulate` itself checks that the blocks tile `[0, W)` exactly
//! once and reports stalls.
//!
//! Print the figures with
//! `cargo test --release -p plb-core --test plb_hac -- --nocapture`.

use plb_core::balance::sim::{SimOptions, SimPu, SimReport, SpeedChange, optimum, simulate};
use plb_core::balance::{Balancer, Greedy, PlbHac, PlbHacConfig};
use plb_core::model::{LinearModel, TimeModel};
use plb_core::solve::{Primary, SolverKind};

/// `fixed + a·x + b·x^p`: CPU-like (b = 0) or GPU-like (latency plus a
/// superlinear term) true curve.
#[derive(Debug, Clone, Copy)]
struct Curve {
    fixed: f64,
    a: f64,
    b: f64,
    p: f64,
}

impl TimeModel for Curve {
    fn time(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        self.fixed + self.a * x + self.b * x.powf(self.p)
    }
    fn slope(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        self.a + self.b * self.p * x.powf(self.p - 1.0)
    }
}

fn linear(fixed: f64, rate: f64) -> SimPu {
    SimPu::new(LinearModel { fixed, rate })
}

fn run(b: &mut dyn Balancer, pus: &[SimPu], total: u64, noise: f64, seed: u64) -> SimReport {
    simulate(b, pus, total, SimOptions { noise, seed })
        .unwrap_or_else(|e| panic!("{}: {e:?}", b.name()))
}

fn plb(n: usize, total: u64) -> PlbHac {
    PlbHac::new(n, total, PlbHacConfig::default()).unwrap()
}

/// Scenario A (issue 4 §7): PU0 `x / r`, PU1 4× faster with 20 ms per
/// block; 20 s of work on PU0 alone.
fn scenario_a() -> (Vec<SimPu>, u64) {
    let total = 200_000u64;
    let r = total as f64 / 20.0;
    (vec![linear(0.0, r), linear(0.020, 4.0 * r)], total)
}

#[test]
fn simulated_scenario_a_near_optimum_and_better_than_greedy() {
    let (pus, total) = scenario_a();
    let opt = optimum(&pus, total);
    for solver in [Primary::Fast, Primary::Ipopt] {
        let mut b = PlbHac::new(
            2,
            total,
            PlbHacConfig {
                solver,
                ..PlbHacConfig::default()
            },
        )
        .unwrap();
        let r = run(&mut b, &pus, total, 0.0, 1);
        let ratio = r.makespan / opt;
        println!(
            "scenario A ({solver:?}): makespan {:.4} s, optimum {opt:.4} s, ratio {ratio:.4}, steps {}, stats {:?}",
            r.makespan,
            b.step(),
            b.stats()
        );
        assert!(ratio <= 1.10, "{solver:?}: ratio {ratio}");
        let used = b.solutions().map(|s| s.solver).collect::<Vec<_>>();
        let want = match solver {
            Primary::Fast => SolverKind::Fast,
            Primary::Ipopt => SolverKind::Ipopt,
        };
        assert!(used.iter().all(|k| *k == want), "{used:?}");
        for div in [256, 64, 16] {
            let mut g = Greedy::new(total, total / div);
            let gr = run(&mut g, &pus, total, 0.0, 1);
            println!(
                "  greedy W/{div}: makespan {:.4} s, ratio {:.4}",
                gr.makespan,
                gr.makespan / opt
            );
            assert!(r.makespan < gr.makespan, "greedy W/{div} beats PLB-HAC");
        }
    }
}

/// Five heterogeneous PUs: two CPU-like lines, three GPU-like curves with
/// latency and a non-linear term, throughputs over 1–30×. `p > 1`: the
/// term is superlinear in time (+20% at a block of W/4; several small
/// blocks beat one large one, so the one-block "optimum" can be beaten);
/// `p < 1`: a concave fill-up term (throughput grows with the block and
/// saturates, as on a GPU: +50% time at W/64, +12.5% at W/4 for p = 0.5;
/// large blocks are best, so each extra step costs a little).
fn five_pus(total: u64, p: f64) -> Vec<SimPu> {
    let w = total as f64;
    // PU0 alone: 1000 s (optimum ≈ 20 s).
    let r = w / 1000.0;
    let gpu = |speed: f64, latency: f64| {
        let x_ref = w / 4.0;
        let nominal = 1.0 / (speed * r);
        let curve = if p > 1.0 {
            Curve {
                fixed: latency,
                a: nominal,
                b: 0.2 * nominal * x_ref / x_ref.powf(p),
                p,
            }
        } else {
            // Fill-up: +50% at W/64, +12.5% at W/4 (p = 0.5), saturating
            // towards the nominal speed.
            let x_fill = x_ref / 16.0;
            Curve {
                fixed: latency,
                a: nominal,
                b: 0.5 * nominal * x_fill / x_fill.powf(p),
                p,
            }
        };
        SimPu::new(curve)
    };
    vec![
        linear(0.0, r),
        linear(0.0, 2.5 * r),
        gpu(8.0, 0.010),
        gpu(15.0, 0.020),
        gpu(30.0, 0.040),
    ]
}

#[test]
fn simulated_five_heterogeneous_pus_with_noise() {
    let total = 1_000_000u64;
    // Superlinear GPU curves: within 1.15 of the one-block optimum.
    five_pus_case(total, 1.3, 0.1, 1.15);
    // Fill-up (concave) GPU curves: each step's blocks are smaller than the
    // one-block optimum's, so the GPUs run below their best throughput; a
    // known cost of stepping (see docs/balancers.md). Coarser steps help.
    five_pus_case(total, 0.5, 0.1, 1.30);
    five_pus_case(total, 0.5, 0.25, 1.20);
}

fn five_pus_case(total: u64, p: f64, step_fraction: f64, bound: f64) {
    let pus = five_pus(total, p);
    let opt = optimum(&pus, total);
    let mut worst: f64 = 0.0;
    for seed in 1..=3 {
        let mut b = PlbHac::new(
            5,
            total,
            PlbHacConfig {
                step_fraction,
                ..PlbHacConfig::default()
            },
        )
        .unwrap();
        let r = run(&mut b, &pus, total, 0.03, seed);
        let ratio = r.makespan / opt;
        worst = worst.max(ratio);
        println!(
            "5 PUs (p = {p}, step {step_fraction}), 3% noise, seed {seed}: makespan {:.3} s, optimum {opt:.3} s, ratio {ratio:.4}, idle {:?}, stats {:?}",
            r.makespan,
            r.idle_fraction()
                .iter()
                .map(|f| format!("{f:.3}"))
                .collect::<Vec<_>>(),
            b.stats()
        );
        assert!(ratio <= bound, "p {p} seed {seed}: ratio {ratio}");
    }
    for div in [256, 64, 16] {
        let mut g = Greedy::new(total, total / div);
        let gr = run(&mut g, &pus, total, 0.03, 1);
        println!(
            "  greedy W/{div}: makespan {:.3} s, ratio {:.4}",
            gr.makespan,
            gr.makespan / opt
        );
    }
    println!("5 PUs (p = {p}): worst ratio {worst:.4}");
}

#[test]
fn simulated_scenario_b_share_follows_a_speed_change() {
    // PU1 is 2× faster than PU0 until t = 5 s, then as fast (its compute
    // times double). ~10 s run.
    let total = 300_000u64;
    let r = total as f64 / 30.0;
    let change = 5.0;
    let mut pu1 = linear(0.0, 2.0 * r);
    pu1.speed_changes = vec![SpeedChange {
        at: change,
        factor: 2.0,
    }];
    let pus = vec![linear(0.0, r), pu1];
    let mut b = plb(2, total);
    let rep = run(&mut b, &pus, total, 0.0, 1);
    let sols: Vec<_> = b.solutions().cloned().collect();
    for s in &sols {
        println!(
            "step {:2} t {:7.3} total {:6} shares {:.3?}",
            s.step, s.time, s.total, s.shares
        );
    }
    println!("makespan {:.3} s, stats {:?}", rep.makespan, b.stats());
    let before: Vec<_> = sols.iter().filter(|s| s.time < change).collect();
    let after: Vec<_> = sols.iter().filter(|s| s.time >= change).collect();
    assert!(before.len() >= 2 && after.len() >= 3, "too few steps");
    let pre = before[before.len() - 1].shares[1];
    assert!((pre - 2.0 / 3.0).abs() < 0.05, "pre-change share {pre}");
    // Within three virtual steps after the change PU1's share has dropped
    // clearly (the new equilibrium is 1/2).
    let dropped = after[..3].iter().position(|s| s.shares[1] < pre - 0.06);
    assert!(dropped.is_some(), "share did not follow: {after:?}");
    // And it stays near the new equilibrium for the rest of the run (the
    // shares of one step also absorb the PUs' start offsets, so average).
    let rest = &after[2..];
    let mean = rest.iter().map(|s| s.shares[1]).sum::<f64>() / rest.len() as f64;
    assert!(
        (mean - 0.5).abs() < 0.06,
        "mean share after the change {mean}"
    );
}

#[test]
fn simulated_edge_cases_never_stall_or_panic() {
    let pus3 = || vec![linear(0.01, 100.0), linear(0.0, 1000.0), linear(0.1, 5.0)];
    // W smaller than the number of PUs, W = 1, W = 0.
    for total in [0u64, 1, 2, 3, 5, 17] {
        let mut b = plb(3, total);
        let r = run(&mut b, &pus3(), total, 0.0, 1);
        assert_eq!(r.units.iter().sum::<u64>(), total);
    }
    // One PU.
    let one = vec![linear(0.0, 1000.0)];
    for total in [1u64, 10, 12_345] {
        let mut b = plb(1, total);
        let r = run(&mut b, &one, total, 0.05, 3);
        assert_eq!(r.units, vec![total]);
        assert!(r.makespan <= total as f64 / 1000.0 * 1.06 + 1e-9);
    }
    // PUs of near-zero speed (10⁶× slower): not waited for at the
    // synchronisation, so the others carry the run.
    let total = 100_000u64;
    let pus = vec![
        linear(0.0, 10_000.0),
        linear(0.0, 0.01),
        linear(0.0, 20_000.0),
        linear(5.0, 1e-3),
    ];
    let mut b = plb(4, total);
    let r = run(&mut b, &pus, total, 0.0, 1);
    println!(
        "near-zero PUs: makespan {:.1} s, units {:?}, stats {:?}",
        r.makespan,
        r.units,
        b.stats()
    );
    assert_eq!(b.stats().stragglers, 2);
    // The slow PUs only ever hold their first training block (x_init).
    assert_eq!(r.units[1], b.x_init());
    assert_eq!(r.units[3], b.x_init());
    // Many PUs, tiny total, noise, a large minimum block.
    let many: Vec<SimPu> = (0..12).map(|i| linear(0.001, 10.0 + i as f64)).collect();
    for total in [7u64, 100, 1000] {
        let mut b = PlbHac::new(
            12,
            total,
            PlbHacConfig {
                min_block: 5,
                ..PlbHacConfig::default()
            },
        )
        .unwrap();
        run(&mut b, &many, total, 0.1, 9);
    }
}

#[test]
fn simulated_gap_filling_after_a_speed_up() {
    // PU0's compute time halves at t = 4 s (a competing load ends): its
    // blocks finish well before their predicted time and earn gap blocks.
    let total = 200_000u64;
    let r = total as f64 / 20.0;
    let mut pu0 = linear(0.0, r);
    pu0.speed_changes = vec![SpeedChange {
        at: 4.0,
        factor: 0.5,
    }];
    let pus = vec![pu0, linear(0.0, r)];
    let mut b = PlbHac::new(
        2,
        total,
        PlbHacConfig {
            gap_threshold_s: 0.1,
            ..PlbHacConfig::default()
        },
    )
    .unwrap();
    let rep = run(&mut b, &pus, total, 0.0, 1);
    let s = b.stats();
    println!("gap filling: makespan {:.3} s, {s:?}", rep.makespan);
    assert!(s.gap_blocks >= 1 && s.gap_units > 0, "{s:?}");
    // Disabled: none.
    let mut b = PlbHac::new(
        2,
        total,
        PlbHacConfig {
            gap_threshold_s: f64::INFINITY,
            ..PlbHacConfig::default()
        },
    )
    .unwrap();
    run(&mut b, &pus, total, 0.0, 1);
    assert_eq!(b.stats().gap_blocks, 0);
}

#[test]
fn simulated_run_shape_training_steps_decrease_and_history() {
    let (pus, total) = scenario_a();
    let mut b = PlbHac::new(
        2,
        total,
        PlbHacConfig {
            history_cap: 4,
            ..PlbHacConfig::default()
        },
    )
    .unwrap();
    let r = run(&mut b, &pus, total, 0.0, 1);
    let s = b.stats();
    // Two training blocks per PU, first of x_init; the first finisher (the
    // fast PU1) gets 2·x_init.
    assert_eq!(s.training_blocks, 4);
    let x0 = b.x_init();
    assert_eq!(r.runs[0].block.len, x0);
    assert_eq!(r.runs[1].block.len, x0);
    assert_eq!(r.runs[2].block.pu, 1);
    assert_eq!(r.runs[2].block.len, 2 * x0);
    assert!(r.runs[3].block.len < 2 * x0);
    // One refit per completion, one solve per step; bounded history.
    assert_eq!(s.refits, r.runs.len() as u64);
    assert_eq!(s.solves, b.step());
    assert_eq!(b.solutions().len(), 4);
    let last = b.solutions().last().unwrap();
    assert_eq!(last.step, b.step());
    // The PUs finish close together: within 2% of the makespan.
    let end = |p: usize| {
        r.runs
            .iter()
            .filter(|x| x.block.pu == p)
            .map(|x| x.end)
            .fold(0.0, f64::max)
    };
    assert!((end(0) - end(1)).abs() < 0.02 * r.makespan);
    // Step totals shrink once 70% of the data is handed out.
    let mut b = plb(2, total);
    run(&mut b, &pus, total, 0.0, 1);
    let totals: Vec<u64> = b.solutions().map(|s| s.total).collect();
    println!("step totals: {totals:?}");
    let peak = totals.iter().position(|&t| t == total / 10).unwrap();
    let tail = &totals[peak..];
    assert!(tail.windows(2).any(|w| w[1] < w[0]));
}

#[test]
fn resumed_run_skips_training_and_starts_from_the_learned_shares() {
    // An iterative application: the same two PUs process 5 passes of W
    // units; passes 2..5 continue from the previous pass's models.
    let (pus, total) = scenario_a();
    let mut first = plb(2, total);
    let r1 = run(&mut first, &pus, total, 0.0, 1);
    assert!(first.stats().training_blocks >= 4);
    let mut prev = first;
    for pass in 2..=5 {
        let mut b = PlbHac::resume(&prev, total, PlbHacConfig::default()).unwrap();
        let r = run(&mut b, &pus, total, 0.0, pass);
        assert_eq!(r.units.iter().sum::<u64>(), total, "pass {pass}");
        assert_eq!(b.stats().training_blocks, 0, "pass {pass}: no training");
        let first_step = b.solutions().next().expect("a step was solved");
        assert_eq!(first_step.step, 1);
        // PU1 is 4x faster: the very first step already gives it ~80 %.
        assert!(
            (first_step.shares[1] - 0.8).abs() < 0.03,
            "pass {pass}: {:?}",
            first_step.shares
        );
        assert!(
            r.makespan <= r1.makespan * 1.01,
            "pass {pass}: {} vs first pass {}",
            r.makespan,
            r1.makespan
        );
        println!(
            "pass {pass}: makespan {:.3} s (first pass {:.3} s)",
            r.makespan, r1.makespan
        );
        prev = b;
    }
}
