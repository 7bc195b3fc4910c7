//! Experiment 3 (`scripts/exp-sim-3-idle.sh`): idle time per PU class.

use plb_core::platform::Platform;
use plb_core::workload::sim_pus;

use super::{
    Csv, EXP_BALANCERS, Settings, exp_preamble, exp_run, sized_app, spread, spread_header,
};

/// Experiment 3: idle time per PU class (PLB-HAC Fig. 5a, PLB-HeC Fig. 7).
pub(super) fn exp3(a: &Settings) -> Result<(), String> {
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 3, idle time per PU class, percent of the makespan, mean over the PUs of the class",
        a,
    )?;
    csv.line(&format!(
        "platform,app,size,balancer,kind,pus,reps,{}",
        spread_header("idle_pct")
    ))?;
    let cases: Vec<(&str, &str, u64)> = if a.quick {
        vec![("plb-hac", "mm", 4096)]
    } else {
        vec![
            ("plb-hac", "mm", 4096),
            ("plb-hac", "mm", 65_536),
            ("plb-hac", "grn", 140_000),
            ("plb-hac", "kmeans", 500_000_000),
            ("plb-hec", "mm", 65_536),
            ("plb-hec", "grn", 140_000),
            ("plb-hec", "blackscholes", 10_000_000_000),
        ]
    };
    for (platform, app_name, size) in cases {
        let p = Platform::builtin(platform).ok_or("builtin")?;
        let (app, total) = sized_app(app_name, size)?;
        let pus = sim_pus(&p, &app);
        let kinds: Vec<&str> = p
            .pus()
            .iter()
            .map(|r| p.classes[r.class].kind.name())
            .collect();
        let mut classes: Vec<&str> = kinds.clone();
        classes.dedup();
        classes.sort();
        classes.dedup();
        for name in EXP_BALANCERS {
            let mut per_class: Vec<Vec<f64>> = vec![Vec::new(); classes.len()];
            for s in 1..=a.reps {
                let idle = exp_run(name, &pus, total, s)?.idle_fraction();
                for (c, class) in classes.iter().enumerate() {
                    let v: Vec<f64> = idle
                        .iter()
                        .zip(&kinds)
                        .filter(|(_, k)| *k == class)
                        .map(|(x, _)| 100.0 * x)
                        .collect();
                    per_class[c].push(v.iter().sum::<f64>() / v.len() as f64);
                }
            }
            for (c, class) in classes.iter().enumerate() {
                csv.line(&format!(
                    "{platform},{app_name},{size},{},{class},{},{},{}",
                    name.replace(':', "_"),
                    kinds.iter().filter(|k| *k == class).count(),
                    a.reps,
                    spread(&per_class[c])
                ))?;
            }
        }
    }
    Ok(())
}
