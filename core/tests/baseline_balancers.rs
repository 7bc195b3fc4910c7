//! Simulated runs (virtual time, `balance::sim`; nothing here is measured
//! on hardware) of the PLB-HeC, HDSS and Acosta balancers: edge cases that
//! must neither stall nor panic, and the makespan against the one-block
//! optimum on the scenarios. `simulate` itself checks that every
//! unit is handed out exactly once.

use plb_core::balance::sim::{SimOptions, SimPu, SimReport, optimum, simulate};
use plb_core::balance::{
    Acosta, AcostaConfig, Balancer, Greedy, Hdss, HdssConfig, PlbHec, PlbHecConfig,
};
use plb_core::model::{LinearModel, TimeModel};

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

fn lin(fixed: f64, rate: f64) -> SimPu {
    SimPu::new(LinearModel { fixed, rate })
}

/// A PU with a per-block latency modelled as transfer time.
fn with_latency(rate: f64, latency: f64) -> SimPu {
    let mut p = lin(0.0, rate);
    p.transfer = Box::new(LinearModel {
        fixed: latency,
        rate: f64::INFINITY,
    });
    p
}

/// Compute time `x / rate + c · ln(1 + x / k)`: a throughput that climbs
/// with the block size (a GPU warming up), concave, so one block per PU is
/// still optimal and [`optimum`] a lower bound.
struct Ramp {
    rate: f64,
    c: f64,
    k: f64,
}

impl TimeModel for Ramp {
    fn time(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        x / self.rate + self.c * (1.0 + x / self.k).ln()
    }
    fn slope(&self, x: f64) -> f64 {
        1.0 / self.rate + self.c / (self.k + x.max(0.0))
    }
}

/// Issue 4 §7: PU0 at 1000 units/s, PU1 4× faster with 20 ms latency per
/// block; 20 000 units = 20 s on PU0 alone.
fn two_pus() -> (Vec<SimPu>, u64) {
    (vec![lin(0.0, 1000.0), with_latency(4000.0, 0.02)], 20_000)
}

/// Five heterogeneous PUs: two CPU-like lines, two GPU-like PUs with launch
/// latency and transfer, one whose throughput ramps up with the block size. About 10 s in all.
fn five_pus() -> (Vec<SimPu>, u64) {
    let mut gpu = lin(0.01, 5000.0);
    gpu.transfer = Box::new(LinearModel {
        fixed: 0.005,
        rate: 50_000.0,
    });
    (
        vec![
            lin(0.0, 500.0),
            lin(0.0, 800.0),
            gpu,
            with_latency(3000.0, 0.03),
            SimPu::new(Ramp {
                rate: 2500.0,
                c: 0.05,
                k: 100.0,
            }),
        ],
        100_000,
    )
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
