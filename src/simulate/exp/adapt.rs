//! Experiment 4 (`scripts/exp-sim-4-adapt.sh`): adaptability to a device
//! slowing down mid-run.

use plb_core::balance::sim::optimum_split;
use plb_core::platform::Platform;
use plb_core::workload::sim_pus;

use super::{Csv, Settings, exp_preamble, exp_run, side_path, sized_app, spread, spread_header};

/// PLB-HAC's adaptability scenario: machines A and B, one CPU and one GPU
/// each (the Phi of B left out, as in PLB-HAC §5.4).
fn exp4_platform(change: Option<(f64, f64)>) -> Result<Platform, String> {
    let mut text = String::from(
        "platform plb-hac-AB\nhome A\nnetwork 1.1 50\n\
         pu A i7-5930K cpu 1 6 3.5 32 68.3 - - 5\n\
         pu A K5200 gpu 1 2304 0.667 2 192 12 10 20\n\
         pu B i7-5930K cpu 1 6 3.5 32 68.3 - - 5\n\
         pu B GTX-970 gpu 1 1664 1.05 2 224 12 10 20\n",
    );
    if let Some((at, factor)) = change {
        text += &format!("change A K5200 {at} {factor}\n");
    }
    Platform::parse(&text).map_err(|e| e.to_string())
}

/// A time model scaled by a constant (a slowed-down device).
struct Scaled<'a>(&'a dyn plb_core::model::TimeModel, f64);

impl plb_core::model::TimeModel for Scaled<'_> {
    fn time(&self, x: f64) -> f64 {
        self.0.time(x) * self.1
    }
    fn slope(&self, x: f64) -> f64 {
        self.0.slope(x) * self.1
    }
}

/// Experiment 4: adaptability. GPU A's compute becomes `FACTOR` times
/// slower at mid-run (a competing load); block sizes over time per PU
/// (PLB-HAC Fig. 6).
pub(super) fn exp4(a: &Settings) -> Result<(), String> {
    let factor = 2.0;
    let (app, total) = sized_app("mm", if a.quick { 16_384 } else { 65_536 })?;
    let plain = sim_pus(&exp4_platform(None)?, &app);
    let opt = optimum_split(&plain, total).ok_or("no optimum")?;
    // The change: at half the optimum makespan (mid-run for every policy).
    let at = (opt.finish_time * 0.5 * 1000.0).round() / 1000.0;
    let p = exp4_platform(Some((at, factor)))?;
    let pus = sim_pus(&p, &app);
    let refs = p.pus();
    let gpu_a = refs
        .iter()
        .position(|r| r.label.starts_with("A/K5200"))
        .ok_or("no GPU A")?;
    // The optimum split once GPU A is slowed down (from the start).
    let slow_models: Vec<SumModel<'_>> = pus
        .iter()
        .enumerate()
        .map(|(i, pu)| {
            let f = if i == gpu_a { factor } else { 1.0 };
            SumModel(Scaled(pu.compute.as_ref(), f), pu.transfer.as_ref())
        })
        .collect();
    let slow = plb_core::solve::FastSolver::default()
        .solve_models(&slow_models, total as f64)
        .map_err(|e| format!("{e:?}"))?;
    let mut blocks = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut blocks,
        &format!(
            "experiment 4, every block of seed 1; GPU A (A/K5200) {factor}x slower from t = {at} s"
        ),
        a,
    )?;
    blocks.line("balancer,pu,label,start_s,end_s,units")?;
    let summary_path = side_path(a.out.as_deref(), "summary");
    let mut summary = Csv::create(summary_path.as_deref())?;
    exp_preamble(
        &mut summary,
        &format!(
            "experiment 4 summary: MM {total} rows on HAC A,B (CPU+GPU each), GPU A {factor}x slower from t = {at} s; GPU A share of the units of blocks started before / after the change (after: from t = change + 10 % of the optimum)"
        ),
        a,
    )?;
    summary.line(&format!(
        "balancer,reps,change_s,factor,opt_nochange_s,opt_gpuA_share_before_pct,opt_gpuA_share_after_pct,{},{},{},{}",
        spread_header("makespan_s"),
        spread_header("ratio_opt_nochange"),
        spread_header("gpuA_share_before_pct"),
        spread_header("gpuA_share_after_pct")
    ))?;
    for name in ["plb-hac", "hdss", "greedy:W/64"] {
        let (mut m, mut before, mut after) = (Vec::new(), Vec::new(), Vec::new());
        for s in 1..=a.reps {
            let r = exp_run(name, &pus, total, s)?;
            if s == 1 {
                for run in &r.runs {
                    blocks.line(&format!(
                        "{},{},{},{:.6},{:.6},{}",
                        name.replace(':', "_"),
                        run.block.pu,
                        refs[run.block.pu].label,
                        run.start,
                        run.end,
                        run.block.len
                    ))?;
                }
            }
            let share = |keep: &dyn Fn(f64) -> bool| {
                let (mut g, mut all) = (0u64, 0u64);
                for run in r.runs.iter().filter(|b| keep(b.start)) {
                    all += run.block.len;
                    if run.block.pu == gpu_a {
                        g += run.block.len;
                    }
                }
                100.0 * g as f64 / all.max(1) as f64
            };
            m.push(r.makespan);
            before.push(share(&|t| t < at));
            after.push(share(&|t| t >= at + 0.1 * opt.finish_time));
        }
        let ratio: Vec<f64> = m.iter().map(|x| x / opt.finish_time).collect();
        summary.line(&format!(
            "{},{},{at},{factor},{:.6},{:.3},{:.3},{},{},{},{}",
            name.replace(':', "_"),
            a.reps,
            opt.finish_time,
            100.0 * opt.units[gpu_a] / total as f64,
            100.0 * slow.units[gpu_a] / total as f64,
            spread(&m),
            spread(&ratio),
            spread(&before),
            spread(&after)
        ))?;
    }
    Ok(())
}

/// compute + transfer.
struct SumModel<'a>(Scaled<'a>, &'a dyn plb_core::model::TimeModel);

impl plb_core::model::TimeModel for SumModel<'_> {
    fn time(&self, x: f64) -> f64 {
        self.0.time(x) + self.1.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.0.slope(x) + self.1.slope(x)
    }
}
