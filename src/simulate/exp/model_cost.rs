//! Experiment 5 (`scripts/exp-sim-5-model-cost.sh`): the cost of the model
//! evaluation per step, IPOPT against the fast solver.

use plb_core::balance::sim::{SimOptions, optimum_split, simulate};
use plb_core::platform::Platform;
use plb_core::workload::{App, sim_pus};

use super::{Csv, EXP_NOISE, Settings, exp_preamble, side_path, spread, spread_header};
use crate::simulate::scaling::Timed;

/// Experiment 5: cost of the model evaluation (fits + solve) per step,
/// IPOPT against the fast solver, versus the number of PUs. The costs are
/// wall-clock times MEASURED on the machine running this; the runs they
/// come from are simulated.
pub(super) fn exp5(a: &Settings) -> Result<(), String> {
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
