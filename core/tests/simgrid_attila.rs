//! The StarPU-SimGrid cross-check's workload (docs/simgrid-xcheck.md) in
//! our simulator through the platform file `platforms/simgrid-attila.txt`
//! and the `grn` application's cost model, as `plb simulate` reads it.
//!
//! Checks that the file's derived curves are the cross-check's affine
//! per-block costs (the PUs `plb simgrid --xcheck` builds directly,
//! `plb_core::balance::xcheck::pu`), that both give the same runs, and prints the
//! SIMULATED makespans and splits (`cargo test -p plb-core --release --test
//! simgrid_attila -- --nocapture`).

use plb_core::balance::registry;
use plb_core::balance::sim::{self, SimOptions, SimPu, SimReport};
use plb_core::balance::xcheck::{self, BALANCERS, UNITS};
use plb_core::platform::Platform;
use plb_core::workload::{App, sim_pus};

const BYTES_PER_UNIT: f64 = xcheck::BYTES_PER_UNIT as f64;
/// attila's sampled RAM -> GPU0 bus (bus/attila.bandwidth, .latency).
const BUS_BYTES_S: f64 = 6008.942513e6;
const BUS_LATENCY_S: f64 = 9.500836e-6;

fn file_pus() -> Vec<SimPu> {
    let text = include_str!("../../platforms/simgrid-attila.txt");
    let p = Platform::parse(text).expect("platforms/simgrid-attila.txt parses");
    sim_pus(&p, &App::parse("grn").unwrap())
}

/// The cross-check's PUs built directly (as src/simgrid/xcheck.rs does):
/// one CUDA worker then two CPU workers, StarPU's order on attila.
fn direct_pus(bytes_per_unit: f64) -> Vec<SimPu> {
    let pu = |gpu| xcheck::pu(gpu, bytes_per_unit, BUS_BYTES_S, BUS_LATENCY_S);
    vec![pu(true), pu(false), pu(false)]
}

fn run(name: &str, pus: &[SimPu]) -> SimReport {
    let mut b = registry::build(name, pus.len(), UNITS).unwrap();
    sim::simulate(&mut *b, pus, UNITS, SimOptions::default()).unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs())
}

#[test]
fn the_platform_file_gives_the_cross_checks_affine_costs() {
    let file = file_pus();
    let direct = direct_pus(BYTES_PER_UNIT);
    assert_eq!(file.len(), 3);
    for x in [1.0, 2.0, 39.0, 156.0, 1000.0, 10_000.0] {
        for (i, (f, d)) in file.iter().zip(&direct).enumerate() {
            let (cf, cd) = (f.compute.time(x), d.compute.time(x));
            let (tf, td) = (f.transfer.time(x), d.transfer.time(x));
            assert!(close(cf, cd, 1e-9), "PU {i}, x {x}: compute {cf} vs {cd}");
            assert!(close(tf, td, 1e-9), "PU {i}, x {x}: transfer {tf} vs {td}");
        }
    }
}

#[test]
fn the_platform_file_and_the_direct_pus_make_the_same_runs() {
    let file = file_pus();
    let direct = direct_pus(BYTES_PER_UNIT);
    println!(
        "SIMULATED (plb simulate, platforms/simgrid-attila.txt, grn, {UNITS} units, no noise)"
    );
    for name in BALANCERS {
        let a = run(name, &file);
        let b = run(name, &direct);
        println!(
            "SIMULATED {name:<20} makespan {:.6} s  units {:?}  blocks {}",
            a.makespan,
            a.units,
            a.runs.len()
        );
        // The derived curves equal the direct ones up to rounding (1e-9
        // relative): a model-fitting balancer may round a split one unit
        // differently (plb-hac: 473/472 against 472/473).
        assert!(
            close(a.makespan, b.makespan, 1e-4),
            "{name}: {} vs {}",
            a.makespan,
            b.makespan
        );
        for (ua, ub) in a.units.iter().zip(&b.units) {
            assert!(
                ua.abs_diff(*ub) <= 2,
                "{name}: {:?} vs {:?}",
                a.units,
                b.units
            );
        }
    }
}

/// The transfer-heavy variant (10x the bytes per unit: the GPU's transfer
/// exceeds its compute) and the single-worker runs of the decomposition in
/// docs/simgrid-xcheck.md, for comparison with the SimGrid program's runs.
#[test]
fn variants_for_the_cross_check() {
    let heavy = direct_pus(10.0 * BYTES_PER_UNIT);
    for name in ["greedy:W/64", "plb-hac"] {
        let r = run(name, &heavy);
        println!(
            "SIMULATED (plb simulate, x10 bytes) {name:<12} makespan {:.6} s  units {:?}",
            r.makespan, r.units
        );
    }
    for (label, pu, bytes) in [
        ("cuda only", 0usize, BYTES_PER_UNIT),
        ("cuda only, 1 byte/unit", 0, 1.0),
        ("cpu only", 1, BYTES_PER_UNIT),
    ] {
        let one = vec![direct_pus(bytes).swap_remove(pu)];
        for name in ["greedy:W/64", "greedy:W/256"] {
            let r = run(name, &one);
            println!(
                "SIMULATED (plb simulate, {label}) {name:<12} makespan {:.6} s  blocks {}",
                r.makespan,
                r.runs.len()
            );
        }
    }
}
