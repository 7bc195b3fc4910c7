//! The simulated part of `plb experiment`: every balancer of `plb-core` on
//! the PLB-HAC paper's five machines A–E (`platforms/plb-hac.txt`, 1 to 5
//! machines, in the file's order), running matrix multiplication of the
//! papers' size (65,536² single precision), in virtual time, against the
//! exact one-block optimum. Nothing here is measured on hardware, and every
//! output says so.

use std::fmt::Write as _;
use std::path::Path;

use plb_core::balance::sim::{SimOptions, optimum, simulate};
use plb_core::platform::Platform;
use plb_core::workload::{App, sim_pus};

use crate::simulate::balancer;

/// Relative noise on simulated compute times.
const NOISE: f64 = 0.03;

/// The contenders, in the order printed; the first is the speedup baseline.
pub const CONTENDERS: [&str; 7] = [
    "greedy:W/64",
    "greedy:W/256",
    "greedy:W/16",
    "hdss",
    "acosta",
    "plb-hec",
    "plb-hac",
];

/// What [`run`] produced.
pub struct Simulated {
    /// The printed table.
    pub table: String,
    /// One row per run.
    pub csv: String,
    /// Mean ratio to the optimum per machine count (gnuplot data).
    pub dat: String,
}

impl Simulated {
    /// The gnuplot script plotting [`Simulated::dat`] (saved at `dat`) to `png`.
    pub fn gnuplot(&self, dat: &Path, png: &Path) -> String {
        let mut s = format!(
            "set terminal pngcairo size 900,500\nset output '{}'\n\
             set title 'SIMULATED: MM 65536^2 on the PLB-HAC machines A..E (virtual time)' noenhanced\n\
             set xlabel 'machines (A, A+B, ...)'\nset ylabel 'makespan / one-block optimum (mean)'\n\
             set key top right noenhanced\nset xtics 1\nset logscale y\nplot ",
            png.display()
        );
        for (i, name) in CONTENDERS.iter().enumerate() {
            if i > 0 {
                s += ", ";
            }
            let _ = write!(
                s,
                "'{}' using 1:{} with linespoints title '{name}'",
                dat.display(),
                i + 3
            );
        }
        s.push('\n');
        s
    }
}

/// Runs every contender with noise seeds `1..=reps` on machines A, A+B, …,
/// A..E (`quick`: a quarter of the units, one seed).
pub fn run(reps: usize, quick: bool) -> Result<Simulated, String> {
    let platform = Platform::builtin("plb-hac").ok_or("built-in platform plb-hac missing")?;
    let app = App::parse("mm").ok_or("application mm missing")?;
    let total = if quick {
        app.paper_units() / 4
    } else {
        app.paper_units()
    };
    let seeds = if quick { 1 } else { reps.max(1) } as u64;
    let machines = platform.machines();
    let mut table = format!(
        "SIMULATED (virtual time, plb-core balance::sim, {:.0} % noise, seeds 1..={seeds}): MM {} units \
         on the PLB-HAC paper's machines {}; per balancer: makespan / one-block optimum as mean/worst over the seeds, then speedup over greedy W/64 (mean makespans)\n\
         {:<9} {:<10} {:>4} {:>10} ",
        NOISE * 100.0,
        total,
        machines.join(","),
        "",
        "machines",
        "PUs",
        "optimum s"
    );
    for name in CONTENDERS {
        let _ = write!(table, "| {name:<18}");
    }
    table.push('\n');
    let mut csv = String::from(
        "# SIMULATED: virtual time on the PLB-HAC paper's platform, never measured\n\
         form,machines,pus,balancer,seed,makespan_s,optimum_s\n",
    );
    let mut dat = String::from("# machines optimum_s");
    for name in CONTENDERS {
        let _ = write!(dat, " \"{name}\"");
    }
    dat.push('\n');
    for k in 1..=machines.len() {
        let sel = platform.select(&machines[..k]).map_err(|e| e.to_string())?;
        let pus = sim_pus(&sel, &app);
        let best = optimum(&pus, total);
        let label = machines[..k].join("+");
        let mut line = format!(
            "{:<9} {label:<10} {:>4} {best:>10.2} ",
            "SIMULATED",
            pus.len()
        );
        let mut dat_line = format!("{k} {best:.6}");
        let mut base = f64::NAN;
        for (i, name) in CONTENDERS.iter().enumerate() {
            let mut spans = Vec::new();
            for seed in 1..=seeds {
                let mut b = balancer(name, pus.len(), total)?;
                let r = simulate(b.as_mut(), &pus, total, SimOptions { noise: NOISE, seed })
                    .map_err(|e| format!("simulated {name} on {label}: {e:?}"))?;
                let _ = writeln!(
                    csv,
                    "simulated,{label},{},{name},{seed},{:.6},{best:.6}",
                    pus.len(),
                    r.makespan
                );
                spans.push(r.makespan);
            }
            let (mean, _, _, max) = super::stats(&spans);
            if i == 0 {
                base = mean;
            }
            let _ = write!(
                line,
                "| {:>5.3}/{:<5.3} {:>5.2}x ",
                mean / best,
                max / best,
                base / mean
            );
            let _ = write!(dat_line, " {:.6}", mean / best);
        }
        let _ = writeln!(table, "{line}");
        let _ = writeln!(dat, "{dat_line}");
    }
    Ok(Simulated { table, csv, dat })
}
