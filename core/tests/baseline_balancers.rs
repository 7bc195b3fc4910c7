//! Simulated runs (virtual time, `balance::sim`; nothing here is measured
//! on hardware) of the PLB-HeC, HDSS and Acosta balancers: edge cases that
//! must neither stall nor panic, and the makespan against the one-block
//! optimum on the scenarios. `simulate` itself checks that every
//! unit is handed out exactly once.

use plb_core::balance::scenarios::{five_pus, lin, two_pus, with_latency};
use plb_core::balance::sim::{SimOptions, SimPu, SimReport, optimum, simulate};
use plb_core::balance::{
    Acosta, AcostaConfig, Balancer, Greedy, Hdss, HdssConfig, PlbHec, PlbHecConfig,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    PlbHec,
    Hdss,
    Acosta,
}

const KINDS: [Kind; 3] = [Kind::PlbHec, Kind::Hdss, Kind::Acosta];

fn make(kind: Kind, n: usize, total: u64) -> Box<dyn Balancer> {
    match kind {
        Kind::PlbHec => Box::new(PlbHec::new(n, total, PlbHecConfig::default()).unwrap()),
        Kind::Hdss => Box::new(Hdss::new(n, total, HdssConfig::default()).unwrap()),
        Kind::Acosta => Box::new(Acosta::new(n, total, AcostaConfig::default()).unwrap()),
    }
}

fn run(kind: Kind, pus: &[SimPu], total: u64, noise: f64, seed: u64) -> SimReport {
    let mut b = make(kind, pus.len(), total);
    let r = simulate(b.as_mut(), pus, total, SimOptions { noise, seed })
        .unwrap_or_else(|e| panic!("{kind:?}: {e:?}"));
    assert_eq!(r.units.iter().sum::<u64>(), total, "{kind:?}");
    assert_eq!(b.remaining(), 0, "{kind:?}");
    r
}

#[test]
fn simulated_edge_cases_neither_stall_nor_panic() {
    for kind in KINDS {
        // Fewer units than PUs, and a single unit.
        let many: Vec<SimPu> = (0..5).map(|i| lin(0.01, 10.0 + i as f64)).collect();
        for total in [0, 1, 3, 4, 5, 6] {
            run(kind, &many, total, 0.0, 1);
        }
        // One PU, deterministic and noisy.
        for total in [1, 2, 17, 10_000] {
            run(kind, &[lin(0.001, 100.0)], total, 0.0, 1);
            run(kind, &[lin(0.001, 100.0)], total, 0.05, 7);
        }
        // A PU 10 000× slower than the others.
        let slow = [lin(0.0, 1000.0), lin(0.0, 0.1), with_latency(4000.0, 0.02)];
        let r = run(kind, &slow, 20_000, 0.0, 1);
        assert!(r.makespan.is_finite());
        run(kind, &slow, 20_000, 0.03, 3);
    }
}

fn ratio(kind: Kind, pus: &[SimPu], total: u64, noise: f64, seed: u64) -> f64 {
    run(kind, pus, total, noise, seed).makespan / optimum(pus, total)
}

#[test]
fn simulated_two_pu_scenario_against_the_optimum() {
    let (pus, total) = two_pus();
    let opt = optimum(&pus, total);
    let mut greedy = Greedy::new(total, total / 256);
    let g = simulate(&mut greedy, &pus, total, SimOptions::default()).unwrap();
    let rh = ratio(Kind::PlbHec, &pus, total, 0.0, 1);
    let rd = ratio(Kind::Hdss, &pus, total, 0.0, 1);
    let ra = ratio(Kind::Acosta, &pus, total, 0.0, 1);
    println!(
        "simulated 2-PU scenario: optimum {opt:.3} s; makespan / optimum: \
         plb-hec {rh:.3}, hdss {rd:.3}, acosta {ra:.3}, greedy(W/256) {:.3}",
        g.makespan / opt
    );
    // Measured 1.046 / 1.068 / 1.127. PLB-HeC: the four synchronised
    // training rounds (~7 % of the data, the first one with equal blocks)
    // plus three extra 20 ms latencies of its four execution blocks.
    // HDSS: the equal-size adaptive blocks and a weight read from
    // throughputs measured on blocks <= 528 units (PU1's throughput still
    // climbs beyond). Acosta: the first sliced iteration uses the powers
    // measured on the small probe (PU1 at less than half its throughput),
    // so PU1 idles most of that iteration before the loads converge.
    assert!(rh < 1.08, "plb-hec {rh}");
    assert!(rd < 1.10, "hdss {rd}");
    assert!(ra < 1.20, "acosta {ra}");
    assert!(rh * opt < g.makespan, "plb-hec must beat greedy");
}

#[test]
fn simulated_five_pu_scenario_with_noise_against_the_optimum() {
    let (pus, total) = five_pus();
    let opt = optimum(&pus, total);
    for kind in KINDS {
        let rs: Vec<f64> = (1..=3)
            .map(|seed| ratio(kind, &pus, total, 0.03, seed))
            .collect();
        let worst = rs.iter().copied().fold(0.0, f64::max);
        println!(
            "simulated 5-PU scenario, 3% noise: optimum {opt:.3} s; {kind:?} \
             makespan / optimum per seed {rs:.3?}"
        );
        // Measured worst of three seeds: 1.095 / 1.078 / 1.158. Besides the
        // training / probe phases, every algorithm pays the per-block fixed
        // costs (launch latency, the ramping PU's log term) several times
        // where the optimum pays them once; PLB-HeC additionally
        // synchronises when its fit, extrapolated ~10x beyond the training
        // sizes, mispredicts the first execution blocks; Acosta
        // synchronises every iteration, and each iteration's loads lag one
        // measurement behind.
        let bound = match kind {
            Kind::PlbHec => 1.12,
            Kind::Hdss => 1.12,
            Kind::Acosta => 1.20,
        };
        assert!(worst < bound, "{kind:?}: {rs:?}");
    }
}
