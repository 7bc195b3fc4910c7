//! The cluster-scale simulator (issue 6 §1): platform files, derived
//! curves, the exact optimum, and the driver at 1,000 PUs. Everything here
//! is SIMULATED (virtual time on true curves), never measured.

use plb_core::balance::sim::{
    SimOptions, SimPu, SimReport, SpeedChange, optimum, optimum_split, simulate, true_time,
};
use plb_core::balance::{Block, Greedy};
use plb_core::platform::{BUILTIN, Platform, PuKind};
use plb_core::workload::{APPS, App, DeviceCurve, sim_pus};

fn app(name: &str) -> App {
    App::parse(name).unwrap()
}

fn hac() -> Platform {
    Platform::builtin("plb-hac").unwrap()
}

fn kinds(p: &Platform) -> (usize, usize, usize) {
    let count = |k: PuKind| {
        p.classes
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.count)
            .sum()
    };
    (count(PuKind::Cpu), count(PuKind::Gpu), count(PuKind::Phi))
}

#[test]
fn builtin_platforms_hold_the_papers_machines() {
    let hac = hac();
    assert_eq!(hac.machines(), ["A", "B", "C", "D", "E"]);
    assert_eq!(hac.n_pus(), 12);
    assert_eq!(kinds(&hac), (5, 5, 2));
    let peak = |name: &str| {
        hac.classes
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .peak_gflops()
    };
    assert!((peak("i7-5930K") - 672.0).abs() < 1e-9);
    assert!((peak("Phi-3120") - 2006.4).abs() < 1e-9);
    assert!((peak("GTX-Titan") - 4499.712).abs() < 1e-6);

    let hec = Platform::builtin("plb-hec").unwrap();
    assert_eq!(hec.machines(), ["A", "B", "C", "D"]);
    // Table I's "2 x" boards (GTX 295, GTX 680) are two PUs each.
    assert_eq!(hec.n_pus(), 10);
    assert_eq!(kinds(&hec), (4, 6, 0));
    for name in BUILTIN {
        let p = Platform::builtin(name).unwrap();
        assert_eq!(p.home.as_deref(), Some("A"));
        // Remote PUs pay the network on top of their own link; home CPUs
        // move nothing.
        for r in p.pus() {
            let c = &p.classes[r.class];
            match (c.machine.as_str(), c.kind) {
                ("A", PuKind::Cpu) => assert!(r.path.is_none(), "{}", r.label),
                ("A", _) => assert_eq!(r.path, c.link, "{}", r.label),
                _ => {
                    let path = r.path.unwrap();
                    let net = p.network.unwrap();
                    assert!(path.gb_s <= net.gb_s, "{}", r.label);
                    assert!(path.latency_us >= net.latency_us, "{}", r.label);
                }
            }
        }
    }
    assert!(Platform::builtin("nope").is_none());
}

#[test]
fn platform_file_errors_name_the_line() {
    let head = "platform t\npu M cpu0 cpu 1 4 2.0 16 20 - - 5\n";
    let cases = [
        ("pu M g gpu 1 8 1.0 2 100 6 10\n", 3, "takes 11 fields"),
        ("pu M g fpga 1 8 1.0 2 100 6 10 20\n", 3, "kind"),
        ("pu M g gpu 0 8 1.0 2 100 6 10 20\n", 3, "count"),
        ("pu M g gpu 1 8 fast 2 100 6 10 20\n", 3, "not a number"),
        ("pu M g gpu 1 8 1.0 2 -5 6 10 20\n", 3, "out of range"),
        ("# fine\nspeed 3\n", 4, "unknown directive"),
        ("noise M nothing 0.1\n", 3, "no PU M/nothing"),
        ("noise * * 1.5\n", 3, "must be < 1"),
        ("change M cpu0 1.0 0\n", 3, "out of range"),
    ];
    for (tail, line, what) in cases {
        let e = Platform::parse(&format!("{head}{tail}")).unwrap_err();
        assert_eq!(e.line, line, "{tail}: {e}");
        assert!(e.to_string().contains(what), "{tail}: {e}");
    }
    assert!(Platform::parse("# nothing\n").is_err());
    let two = "home M\npu M c cpu 1 4 2 16 20 - - 5\npu N c cpu 1 4 2 16 20 - - 5\n";
    assert!(
        Platform::parse(two)
            .unwrap_err()
            .message
            .contains("network")
    );
    assert!(Platform::parse("home X\npu M c cpu 1 4 2 16 20 - - 5\n").is_err());
}

#[test]
fn select_builds_the_papers_scenarios() {
    let p = hac();
    let ab = p.select(&["A", "B"]).unwrap();
    assert_eq!(ab.n_pus(), 5);
    assert_eq!(ab.machines(), ["A", "B"]);
    assert!(p.select(&["B"]).is_err(), "the home machine must stay");
    assert!(p.select(&["A", "Z"]).is_err());
}

#[test]
fn noise_and_speed_changes_come_from_the_file() {
    let text = "pu M cpu cpu 1 4 2.0 16 20 - - 5\n\
                pu M gpu gpu 2 512 1.0 2 100 6 10 20\n\
                noise M gpu 0.05\n\
                change M gpu 10 2.0\n\
                change * * 30 1.0\n";
    let p = Platform::parse(text).unwrap();
    let pus = sim_pus(&p, &app("kmeans"));
    assert_eq!(pus.len(), 3);
    assert_eq!(pus[0].noise, None);
    assert_eq!(pus[1].noise, Some(0.05));
    let factors = |pu: &SimPu| [0.0, 9.9, 10.0, 29.0, 30.0, 99.0].map(|t| pu.speed_factor(t));
    assert_eq!(factors(&pus[0]), [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    assert_eq!(factors(&pus[2]), [1.0, 1.0, 2.0, 2.0, 1.0, 1.0]);

    // In a run: the GPUs' blocks started between 10 s and 30 s take twice
    // their true time.
    let total = 2_000_000_000;
    let mut g = Greedy::new(total, total / 400);
    let r = simulate(
        &mut g,
        &pus,
        total,
        SimOptions {
            noise: 0.0,
            seed: 1,
        },
    )
    .unwrap();
    let mut slowed = 0;
    for run in r.runs.iter().filter(|x| x.block.pu == 1) {
        let len = run.block.len as f64;
        let compute = run.end - run.start - pus[1].transfer.time(len);
        let ratio = compute / pus[1].compute.time(len);
        let expected = if (10.0..30.0).contains(&run.start) {
            2.0
        } else {
            1.0
        };
        // 5 % noise on top.
        assert!(
            (ratio - expected).abs() <= 0.05 * expected + 1e-9,
            "{run:?}: {ratio}"
        );
        slowed += usize::from(expected == 2.0);
    }
    assert!(
        slowed > 0,
        "the run must cross the change ({} s)",
        r.makespan
    );
}

#[test]
fn mm_on_a_gpu_beats_the_cpu_at_large_blocks_only() {
    let p = hac().select(&["A"]).unwrap();
    let pus = sim_pus(&p, &app("mm"));
    let (cpu, gpu) = (&pus[0], &pus[1]);
    let per_unit = |pu: &SimPu, x: f64| true_time(pu, x) / x;
    // 4096 rows: the K5200 (3.07 TFLOP/s) is ~4x the i7-5930K (672).
    let big = 4096.0;
    let ratio = per_unit(cpu, big) / per_unit(gpu, big);
    assert!((3.0..6.0).contains(&ratio), "{ratio}");
    // One row: A is streamed for a single row (a GEMV), memory-bound on
    // both; per row, 20x or more the large-block cost.
    assert!(per_unit(gpu, 1.0) > 20.0 * per_unit(gpu, big));
    assert!(per_unit(cpu, 1.0) > 10.0 * per_unit(cpu, big));
}

#[test]
fn launch_latency_and_fill_make_small_gpu_blocks_inefficient() {
    let p = hac().select(&["A"]).unwrap();
    let app = app("kmeans");
    let pus = sim_pus(&p, &app);
    let (cpu, gpu) = (&pus[0], &pus[1]);
    let gpu_curve = DeviceCurve::new(&p.classes[1], &app);
    // One k-means point is one GPU thread: filling 2304 cores x 8 takes
    // 18,432 points.
    assert!((gpu_curve.fill - 18_432.0).abs() < 1e-9);
    let per_unit = |pu: &SimPu, x: f64| true_time(pu, x) / x;
    assert!(per_unit(gpu, 16.0) > 100.0 * per_unit(gpu, 1e6));
    // Small blocks: the CPU finishes first; large blocks: the GPU does.
    assert!(true_time(cpu, 16.0) < true_time(gpu, 16.0));
    assert!(true_time(gpu, 1e6) < 0.5 * true_time(cpu, 1e6));
    // The ramp: GPU throughput rises monotonically with the block size.
    let sizes = [1.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7];
    for w in sizes.windows(2) {
        assert!(per_unit(gpu, w[1]) < per_unit(gpu, w[0]), "{w:?}");
    }
}

#[test]
fn black_scholes_on_a_discrete_gpu_is_transfer_bound() {
    let p = hac().select(&["A"]).unwrap();
    let app = app("blackscholes");
    let pus = sim_pus(&p, &app);
    let x = 1e8;
    let gpu = &pus[1];
    // 20 bytes an option: 1.7 ns over PCIe 3.0 (12 GB/s), 0.14 ns in the
    // K5200's memory.
    assert!(gpu.transfer.time(x) > 5.0 * gpu.compute.time(x));
    // Compute side memory-bound: the time is the bandwidth term.
    let c = DeviceCurve::new(&p.classes[1], &app);
    assert!(c.memory_s > c.compute_s);
    // So the CPU, which moves nothing, is competitive: within 3x.
    let cpu = &pus[0];
    let r = true_time(gpu, x) / true_time(cpu, x);
    assert!((0.33..3.0).contains(&r), "{r}");
}

#[test]
fn every_derived_curve_honours_the_time_model_contract_and_is_subadditive() {
    let mut platforms: Vec<Platform> = BUILTIN
        .iter()
        .map(|n| Platform::builtin(n).unwrap())
        .collect();
    platforms.push(Platform::synthetic(40, 3));
    let xs: Vec<f64> = (0..=60).map(|i| 10f64.powf(i as f64 / 6.0) - 1.0).collect();
    for p in &platforms {
        for name in APPS {
            for (r, pu) in p.pus().iter().zip(sim_pus(p, &app(name))) {
                let e = |x: f64| true_time(&pu, x);
                let mut prev = e(0.0);
                assert!(prev.is_finite() && prev >= 0.0);
                for &x in &xs[1..] {
                    let t = e(x);
                    assert!(t.is_finite() && t >= prev, "{} {name} at {x}", r.label);
                    prev = t;
                    // slope = derivative (central difference, away from the
                    // roofline kink where both branches are exact).
                    let h = 1e-4 * x.max(1.0);
                    let num =
                        (pu.compute.time(x + h) - pu.compute.time(x - h.min(x))) / (h + h.min(x));
                    let s = pu.compute.slope(x);
                    assert!(s >= 0.0 && s.is_finite());
                    let kink =
                        (pu.compute.slope(x + h) - pu.compute.slope(x - h.min(x))).abs() > 0.01 * s;
                    if !kink {
                        assert!(
                            (num - s).abs() <= 1e-3 * s.max(1e-300),
                            "{} {name} slope at {x}: {num} vs {s}",
                            r.label
                        );
                    }
                }
                for &a in xs.iter().step_by(7) {
                    for &b in xs.iter().step_by(5) {
                        assert!(
                            e(a) + e(b) >= e(a + b) * (1.0 - 1e-12),
                            "{} {name}: E({a}) + E({b})",
                            r.label
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_optimum_equalises_finish_times() {
    for (platform, name) in [
        ("plb-hac", "mm"),
        ("plb-hac", "kmeans"),
        ("plb-hec", "grn"),
        ("plb-hec", "blackscholes"),
    ] {
        let p = Platform::builtin(platform).unwrap();
        let a = app(name);
        let pus = sim_pus(&p, &a);
        let total = a.paper_units();
        let d = optimum_split(&pus, total).unwrap();
        let t = d.finish_time;
        assert!(t > 0.0 && t.is_finite());
        assert!(d.is_sane(total as f64));
        for (pu, &x) in pus.iter().zip(&d.units) {
            if x > 0.0 {
                let e = true_time(pu, x);
                assert!(
                    (e - t).abs() <= 1e-6 * t,
                    "{platform} {name}: E({x}) = {e} vs T = {t}"
                );
            } else {
                assert!(true_time(pu, 0.0) >= t * (1.0 - 1e-9));
            }
        }
        assert_eq!(optimum(&pus, total), t);
    }
    // 1,000 options: the GPUs' fixed costs (launch, fill, PCIe or network
    // latency) exceed the whole optimum, so they get nothing.
    let p = Platform::builtin("plb-hec").unwrap();
    let pus = sim_pus(&p, &app("blackscholes"));
    let d = optimum_split(&pus, 1000).unwrap();
    for (r, (pu, &x)) in p.pus().iter().zip(pus.iter().zip(&d.units)) {
        if p.classes[r.class].kind == PuKind::Gpu {
            assert_eq!(x, 0.0, "{}", r.label);
            assert!(true_time(pu, 0.0) >= d.finish_time);
        }
    }
    assert!(d.units[0] > 0.0);
}

#[test]
fn no_noise_free_run_beats_the_one_block_optimum() {
    let p = hac();
    let a = app("mm");
    let pus = sim_pus(&p, &a);
    let total = a.paper_units();
    let opt = optimum(&pus, total);
    for name in [
        "greedy:W/256",
        "greedy:W/16",
        "hdss",
        "acosta",
        "plb-hec:solver=fast",
        "plb-hac",
    ] {
        let mut b = plb_core::balance::registry::build(name, pus.len(), total).unwrap();
        let r = simulate(
            b.as_mut(),
            &pus,
            total,
            SimOptions {
                noise: 0.0,
                seed: 1,
            },
        )
        .unwrap();
        assert!(
            r.makespan >= opt * (1.0 - 1e-9),
            "{name}: {} < {opt}",
            r.makespan
        );
        // And PLB-HAC lands within 5 % of it on the papers' five machines
        // (simulated; 1.016 with 3 % noise in docs/simulator.md).
        if name == "plb-hac" {
            assert!(r.makespan < 1.05 * opt, "{name}: {}", r.makespan / opt);
        }
    }
}

/// Independent check that the blocks tile `[0, total)` and that the
/// per-PU totals agree with the blocks.
fn assert_exact_coverage(r: &SimReport, n: usize, total: u64) {
    let mut blocks: Vec<Block> = r.runs.iter().map(|x| x.block).collect();
    blocks.sort_by_key(|b| b.offset);
    let mut next = 0;
    let mut per_pu = vec![0u64; n];
    for b in &blocks {
        assert_eq!(b.offset, next);
        assert!(b.len > 0 && b.pu < n);
        per_pu[b.pu] += b.len;
        next = b.end();
    }
    assert_eq!(next, total);
    assert_eq!(per_pu, r.units);
    for run in &r.runs {
        assert!(run.end >= run.start && run.start >= 0.0 && run.end <= r.makespan);
    }
}

#[test]
fn a_1000_pu_run_covers_every_unit_exactly_once() {
    let p = Platform::synthetic(1000, 5);
    let a = app("kmeans");
    let pus = sim_pus(&p, &a);
    let total = 1_000_000_007; // not a multiple of anything
    // Greedy: 100,003 blocks; every PU asks once per block and once more
    // to hear Done: the driver asks no PU without cause.
    let mut g = Greedy::new(total, 10_000);
    let r = simulate(
        &mut g,
        &pus,
        total,
        SimOptions {
            noise: 0.03,
            seed: 2,
        },
    )
    .unwrap();
    assert_eq!(r.runs.len(), 100_001);
    assert_eq!(r.asks, r.runs.len() as u64 + 1000);
    assert_exact_coverage(&r, 1000, total);
    assert!(r.units.iter().all(|&u| u > 0));
    // PLB-HAC on the same platform.
    let mut b = plb_core::balance::registry::build("plb-hac", pus.len(), total).unwrap();
    let r = simulate(
        b.as_mut(),
        &pus,
        total,
        SimOptions {
            noise: 0.03,
            seed: 2,
        },
    )
    .unwrap();
    assert_exact_coverage(&r, 1000, total);
    assert!(
        r.makespan < 1.2 * optimum(&pus, total),
        "{}",
        r.makespan / optimum(&pus, total)
    );
}

#[test]
fn runs_are_deterministic_for_a_seed() {
    assert_eq!(Platform::synthetic(300, 7), Platform::synthetic(300, 7));
    assert_ne!(Platform::synthetic(300, 7), Platform::synthetic(300, 8));
    let p = Platform::synthetic(300, 7);
    let a = app("grn");
    let pus = sim_pus(&p, &a);
    let total = 3_000_000;
    let run = |name: &str, seed: u64| {
        let mut b = plb_core::balance::registry::build(name, pus.len(), total).unwrap();
        simulate(b.as_mut(), &pus, total, SimOptions { noise: 0.05, seed }).unwrap()
    };
    for name in ["greedy:W/3000", "hdss", "plb-hac"] {
        let (r1, r2, r3) = (run(name, 11), run(name, 11), run(name, 12));
        assert_eq!(r1, r2, "{name}");
        assert_ne!(
            r1.makespan, r3.makespan,
            "{name}: the seed drives the noise"
        );
    }
}

#[test]
fn synthetic_platforms_have_exactly_n_pus_of_every_kind() {
    for n in [1, 2, 7, 10_000] {
        let p = Platform::synthetic(n, 1);
        assert_eq!(p.n_pus(), n);
        assert_eq!(p.pus().len(), n);
    }
    let p = Platform::synthetic(10_000, 1);
    let (cpu, gpu, phi) = kinds(&p);
    assert!(cpu > 3000 && gpu > 3000 && phi > 300, "{cpu} {gpu} {phi}");
    // Generations spread: peaks over more than an order of magnitude.
    let peaks: Vec<f64> = p.classes.iter().map(|c| c.peak_gflops()).collect();
    let (lo, hi) = peaks
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(hi / lo > 50.0, "{lo} {hi}");
    let pus = sim_pus(&p, &app("mm"));
    assert!(optimum(&pus, 1_000_000).is_finite());
}

#[test]
fn speed_changes_stack_in_time_order() {
    let mut pu = SimPu::new(plb_core::model::LinearModel {
        fixed: 0.0,
        rate: 1.0,
    });
    pu.speed_changes = vec![
        SpeedChange {
            at: 20.0,
            factor: 1.0,
        },
        SpeedChange {
            at: 5.0,
            factor: 3.0,
        },
    ];
    assert_eq!(pu.speed_factor(0.0), 1.0);
    assert_eq!(pu.speed_factor(5.0), 3.0);
    assert_eq!(pu.speed_factor(19.0), 3.0);
    assert_eq!(pu.speed_factor(25.0), 1.0);
    // Blocks of 5 units (5 s): [0,5) at speed, [5,20) 3x slower, then back.
    let mut g = Greedy::new(20, 5);
    let r = simulate(&mut g, &[pu], 20, SimOptions::default()).unwrap();
    let lens: Vec<f64> = r.runs.iter().map(|x| x.end - x.start).collect();
    assert_eq!(lens, [5.0, 15.0, 5.0, 5.0]);
}

#[test]
fn power_figures_come_from_the_file() {
    let text = "pu M cpu cpu 1 4 2.0 16 20 - - 5\n\
                pu M gpu gpu 2 512 1.0 2 100 6 10 20\n\
                power M gpu 25 225\n";
    let p = Platform::parse(text).unwrap();
    assert_eq!(p.classes[0].power, None);
    let power = p.classes[1].power.unwrap();
    assert_eq!((power.idle_w, power.busy_w), (25.0, 225.0));
    assert!(Platform::parse("pu M c cpu 1 4 2 16 20 - - 5\npower M c 10\n").is_err());
    assert!(Platform::parse("pu M c cpu 1 4 2 16 20 - - 5\npower M c 10 0\n").is_err());
    assert!(Platform::parse("pu M c cpu 1 4 2 16 20 - - 5\npower M x 10 20\n").is_err());
}

#[test]
fn an_irregular_profile_makes_blocks_cost_by_position() {
    use plb_core::cost_profile::CostProfile;
    use std::sync::Arc;
    // One PU at 1 s per effective unit; the second half of the run costs
    // 3x the first.
    let mut pu = SimPu::new(plb_core::model::LinearModel {
        fixed: 0.0,
        rate: 1.0,
    });
    pu.profile = Some(Arc::new(CostProfile::new(&[1.0, 3.0]).unwrap()));
    let mut g = Greedy::new(100, 25);
    let r = simulate(&mut g, &[pu], 100, SimOptions::default()).unwrap();
    let took: Vec<f64> = r.runs.iter().map(|x| x.end - x.start).collect();
    assert_eq!(took.len(), 4);
    for (t, want) in took.iter().zip([12.5, 12.5, 37.5, 37.5]) {
        assert!((t - want).abs() < 1e-9, "{took:?}");
    }
    assert!((r.makespan - 100.0).abs() < 1e-9);
}

/// Irregular work (issue 13 §2): a per-row cost that peaks at 100x its
/// minimum in the middle of the run, on a CPU-like PU and a 4x faster
/// PU with a fixed cost per block. Every balancer covers every unit once
/// (the driver checks) and none diverges: the model-based ones see large
/// residuals (time is not a function of block size) and must still end
/// within a bounded factor of the ideal co-execution time.
#[test]
fn irregular_work_does_not_make_any_balancer_diverge() {
    use plb_core::coexec::ideal;
    use plb_core::cost_profile::CostProfile;
    use std::sync::Arc;
    let rows: Vec<f64> = (0..512)
        .map(|r| {
            let x = (r as f64 - 256.0) / 64.0;
            1.0 + 99.0 * (-x * x).exp()
        })
        .collect();
    let profile = Arc::new(CostProfile::new(&rows).unwrap());
    let total = 200_000u64;
    let mut pus = vec![
        SimPu::new(plb_core::model::LinearModel {
            fixed: 1e-4,
            rate: 2e4,
        }),
        SimPu::new(plb_core::model::LinearModel {
            fixed: 2e-3,
            rate: 8e4,
        }),
    ];
    for pu in &mut pus {
        pu.profile = Some(Arc::clone(&profile));
    }
    let solo: Vec<f64> = pus
        .iter()
        .map(|pu| plb_core::balance::sim::true_time(pu, total as f64))
        .collect();
    let (_, ideal_s) = ideal(&solo).unwrap();
    let mut report = Vec::new();
    for entry in plb_core::balance::registry::REGISTRY {
        let mut b = plb_core::balance::registry::build(entry.name, 2, total).unwrap();
        let r = simulate(
            b.as_mut(),
            &pus,
            total,
            SimOptions {
                noise: 0.03,
                seed: 7,
            },
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}", entry.name));
        assert_eq!(r.units.iter().sum::<u64>(), total, "{}", entry.name);
        report.push((entry.name, ideal_s / r.makespan));
    }
    eprintln!("efficiency on the irregular profile: {report:?}");
    // Seen (seed 7): greedy 0.88, plb-hac 0.92, plb-hec 0.74, hdss 0.81,
    // acosta 0.66, dynamic 0.96, sigmoid 0.84; the one-split balancers
    // lose most (static 0.23, adaptive 0.24: the slow PU's contiguous
    // share holds the expensive rows), and HGuided with k = 2 (0.30) hands
    // the slow PU a large early package right on the peak.
    for (name, eff) in report {
        let floor = match name {
            "plb-hac" | "plb-hec" | "hdss" | "acosta" => 0.6,
            "greedy" | "dynamic" | "sigmoid" => 0.8,
            _ => 0.15,
        };
        assert!(
            eff > floor,
            "{name}: efficiency {eff:.3} on irregular work (floor {floor})"
        );
    }
}
