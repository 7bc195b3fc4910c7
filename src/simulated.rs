//! The simulated part of `plb experiment`: every balancer of `plb-core` on
//! the shared simulated platforms (`balance::scenarios`), in virtual time,
//! against the exact one-block optimum. Nothing here is measured on
//! hardware, and every output says so.

use std::fmt::Write as _;

use plb_core::balance::scenarios::{five_pus, two_pus};
use plb_core::balance::sim::{SimOptions, SimPu, build_balancer as build, optimum, simulate};

/// Builds a simulated platform: its PUs and the units to process.
type Platform = fn() -> (Vec<SimPu>, u64);

/// Relative noise on simulated compute times.
const NOISE: f64 = 0.03;

/// The contenders, in the order printed.
const CONTENDERS: [&str; 7] = [
    "greedy W/256",
    "greedy W/64",
    "greedy W/16",
    "hdss",
    "acosta",
    "plb-hec",
    "plb-hac",
];

/// Runs every contender `reps` times (noise seeds 1..=reps) on both
/// platforms; returns the printed table and the CSV.
pub fn run(reps: usize) -> Result<(String, String), String> {
    let platforms: [(&str, Platform); 2] = [
        ("2 PUs (PU1 4x faster, 20 ms/block)", two_pus),
        ("5 heterogeneous PUs", five_pus),
    ];
    let mut table = format!(
        "SIMULATED (virtual time, plb-core balance::sim, {:.0} % noise, {reps} seed(s)): makespan / one-block optimum\n\
         {:<36} {:<12} {:>10} {:>10} {:>10}\n",
        NOISE * 100.0,
        "platform",
        "balancer",
        "mean",
        "min",
        "max"
    );
    let mut csv = String::from("platform,balancer,seed,makespan_s,optimum_s\n");
    for (label, make) in platforms {
        let (pus, total) = make();
        let best = optimum(&pus, total);
        for name in CONTENDERS {
            let mut ratios = Vec::new();
            for seed in 1..=reps.max(1) as u64 {
                let mut b = build(name, pus.len(), total)?;
                let r = simulate(b.as_mut(), &pus, total, SimOptions { noise: NOISE, seed })
                    .map_err(|e| format!("simulated {name} on {label}: {e:?}"))?;
                let _ = writeln!(csv, "{label},{name},{seed},{:.6},{best:.6}", r.makespan);
                ratios.push(r.makespan / best);
            }
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            let (min, max) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
                (lo.min(*r), hi.max(*r))
            });
            let _ = writeln!(
                table,
                "{label:<36} {name:<12} {mean:>9.3}x {min:>9.3}x {max:>9.3}x"
            );
        }
    }
    Ok((table, csv))
}
