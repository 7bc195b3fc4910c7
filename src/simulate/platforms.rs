//! `plb simulate platform` and `plb simulate paper`: a platform's derived
//! curves, and the papers' scenarios against the one-block optimum.

use clap::Args;
use plb_core::balance::sim::{SimOptions, optimum_split, simulate, true_time};
use plb_core::platform::Platform;
use plb_core::workload::{App, DeviceCurve, sim_pus};

use super::{BALANCERS, app, balancer, platform};
use crate::cli::positive;

/// Options of `plb simulate platform`.
#[derive(Args)]
pub struct PlatformArgs {
    /// A built-in platform (plb-hac, plb-hec) or a platform file
    #[arg(default_value = "plb-hac", value_parser = platform)]
    platform: Platform,
    /// The application
    #[arg(default_value = "mm", value_parser = app())]
    app: App,
    /// Units of work [default: the papers' size of the application]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    units: Option<u64>,
}

/// Options of `plb simulate paper`.
#[derive(Args)]
pub struct PaperArgs {
    /// A built-in platform (plb-hac, plb-hec) or a platform file
    #[arg(default_value = "plb-hac", value_parser = platform)]
    platform: Platform,
    /// The application
    #[arg(default_value = "mm", value_parser = app())]
    app: App,
    /// Noise seeds 1..=N per balancer
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = positive::<u64>())]
    seeds: u64,
    /// Relative noise on compute times (0.03: uniform +-3 %)
    #[arg(long, value_name = "A", default_value_t = 0.03)]
    noise: f64,
    /// Units of work [default: the papers' size of the application]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    units: Option<u64>,
    /// The balancers, comma-separated (registry names, e.g. greedy:W/64, plb-hec:solver=fast) [default: all of sim::BALANCERS]
    #[arg(long, value_name = "NAME,..", value_delimiter = ',')]
    balancers: Vec<String>,
}

/// `platform`: the derived curves of every PU and the optimum split.
pub fn show_platform(args: &PlatformArgs) -> Result<(), String> {
    let (p, app) = (&args.platform, &args.app);
    let total = args.units.unwrap_or(app.paper_units());
    let pus = sim_pus(p, app);
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
        let curve = DeviceCurve::new(c, app);
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
pub fn paper(args: &PaperArgs) -> Result<(), String> {
    let (p, app, seeds, noise) = (&args.platform, &args.app, args.seeds, args.noise);
    let total = args.units.unwrap_or(app.paper_units());
    let names: Vec<String> = if args.balancers.is_empty() {
        BALANCERS.iter().map(|b| b.to_string()).collect()
    } else {
        args.balancers.clone()
    };
    println!(
        "SIMULATED {} / {} ({total} units), {:.0} % noise, seeds 1..={seeds}: makespan / one-block optimum (mean/worst)",
        p.name,
        app.name(),
        noise * 100.0
    );
    let machines = p.machines();
    for k in 1..=machines.len() {
        let sel = p.select(&machines[..k]).map_err(|e| e.to_string())?;
        let pus = sim_pus(&sel, app);
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
                let mut b = balancer(name, pus.len(), total)?;
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
