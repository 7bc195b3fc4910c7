//! Experiment 1 (`scripts/exp-sim-1-speedup.sh`): speedup over greedy and
//! makespan / optimum versus the number of machines and the input size.

use plb_core::balance::sim::optimum_split;
use plb_core::platform::Platform;
use plb_core::workload::{self, sim_pus};

use super::{
    Csv, EXP_BALANCERS, Settings, exp_preamble, exp_run, sized_app, spread, spread_header,
};

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

/// Experiment 1: speedup over greedy and makespan / optimum versus the
/// number of machines and the input size (PLB-HAC Fig. 4, PLB-HeC Figs.
/// 4-5).
pub(super) fn exp1(a: &Settings) -> Result<(), String> {
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
        for app_name in workload::PAPER_APPS {
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
                            name.replace(':', "_"),
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
