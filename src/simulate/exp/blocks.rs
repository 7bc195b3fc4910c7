//! Experiment 2 (`scripts/exp-sim-2-blocks.sh`): the block-size
//! distribution among the PUs at the end of the training.

use plb_core::balance::sim::{SimError, SimOptions, SimPu, optimum_split, simulate};
use plb_core::balance::{Balancer, Completion, Decision, PuId};
use plb_core::platform::Platform;
use plb_core::workload::sim_pus;

use super::{Csv, EXP_NOISE, Settings, exp_preamble, sized_app, spread, spread_header};

/// A balancer looked at after every call (to read its state at a given
/// moment of the run, e.g. the end of the training).
struct Probe<B, F> {
    inner: B,
    look: F,
}

impl<B: Balancer, F: FnMut(&B)> Balancer for Probe<B, F> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, pu: PuId, now: f64) -> Decision {
        let d = self.inner.next(pu, now);
        (self.look)(&self.inner);
        d
    }
    fn completed(&mut self, done: Completion) {
        self.inner.completed(done);
        (self.look)(&self.inner);
    }
    fn remaining(&self) -> u64 {
        self.inner.remaining()
    }
}

/// `v` normalised to percent of its sum.
fn percent(v: &[f64]) -> Vec<f64> {
    let s: f64 = v.iter().sum();
    v.iter()
        .map(|x| if s > 0.0 { 100.0 * x / s } else { 0.0 })
        .collect()
}

/// Per-PU block-size distribution at the end of the training (percent of
/// one step's data), for one run of `policy`.
fn training_split(policy: &str, pus: &[SimPu], total: u64, seed: u64) -> Result<Vec<f64>, String> {
    use plb_core::balance::{
        Acosta, AcostaConfig, Hdss, HdssConfig, PlbHac, PlbHacConfig, PlbHec, PlbHecConfig,
    };
    let n = pus.len();
    let opts = SimOptions {
        noise: EXP_NOISE,
        seed,
    };
    let err = |e: SimError| format!("{policy}: {e:?}");
    let split: Vec<f64> = match policy {
        "plb-hac" => {
            // The first solution of eq. (3) giving every PU a block: the
            // end of PLB-HAC's training (earlier steps leave out the PUs
            // still in their training blocks, which would inflate the
            // others' shares).
            let mut b =
                PlbHac::new(n, total, PlbHacConfig::default()).map_err(|e| format!("{e:?}"))?;
            simulate(&mut b, pus, total, opts).map_err(err)?;
            let first = b
                .solutions()
                .find(|s| s.units.iter().all(|&u| u > 0))
                .or_else(|| {
                    b.solutions()
                        .max_by_key(|s| s.units.iter().filter(|&&u| u > 0).count())
                })
                .ok_or("plb-hac: no step solved")?;
            first.units.iter().map(|&u| u as f64).collect()
        }
        "plb-hec" => {
            // The block sizes of the first execution step.
            let mut first: Option<Vec<u64>> = None;
            let mut probe = Probe {
                inner: PlbHec::new(n, total, PlbHecConfig::default()).map_err(|e| e.to_string())?,
                look: |b: &PlbHec| {
                    if first.is_none() && b.trained() && b.block_sizes().iter().any(|&x| x > 0) {
                        first = Some(b.block_sizes().to_vec());
                    }
                },
            };
            simulate(&mut probe, pus, total, opts).map_err(err)?;
            drop(probe);
            first
                .ok_or("plb-hec: never trained")?
                .iter()
                .map(|&u| u as f64)
                .collect()
        }
        "hdss" => {
            // The weights at the end of HDSS's adaptive phase.
            let mut w: Option<Vec<f64>> = None;
            let mut probe = Probe {
                inner: Hdss::new(n, total, HdssConfig::default()).map_err(|e| e.to_string())?,
                look: |b: &Hdss| {
                    if w.is_none() && !b.weights().is_empty() {
                        w = Some(b.weights().to_vec());
                    }
                },
            };
            simulate(&mut probe, pus, total, opts).map_err(err)?;
            drop(probe);
            w.ok_or("hdss: no weights")?
        }
        "acosta" => {
            // Acosta's per-PU loads when it stopped adjusting (end of run).
            let mut b =
                Acosta::new(n, total, AcostaConfig::default()).map_err(|e| e.to_string())?;
            simulate(&mut b, pus, total, opts).map_err(err)?;
            b.loads().iter().map(|&u| u as f64).collect()
        }
        other => return Err(format!("no training split for {other}")),
    };
    Ok(percent(&split))
}

/// Experiment 2: block-size distribution among the PUs at the end of the
/// training, against the optimum (PLB-HAC Fig. 5b, PLB-HeC Fig. 6).
pub(super) fn exp2(a: &Settings) -> Result<(), String> {
    let mut csv = Csv::create(a.out.as_deref())?;
    exp_preamble(
        &mut csv,
        "experiment 2, per-PU block size at the end of the training, percent of one step",
        a,
    )?;
    csv.line(&format!(
        "platform,app,size,pu,label,kind,policy,reps,{}",
        spread_header("share_pct")
    ))?;
    let cases: Vec<(&str, &str, u64)> = if a.quick {
        vec![("plb-hac", "mm", 4096), ("plb-hec", "mm", 4096)]
    } else {
        vec![
            ("plb-hac", "mm", 65_536),
            ("plb-hac", "grn", 140_000),
            ("plb-hac", "kmeans", 500_000_000),
            ("plb-hec", "mm", 65_536),
            ("plb-hec", "mm", 16_384),
            ("plb-hec", "grn", 140_000),
            ("plb-hec", "blackscholes", 10_000_000_000),
        ]
    };
    for (platform, app_name, size) in cases {
        let p = Platform::builtin(platform).ok_or("builtin")?;
        let (app, total) = sized_app(app_name, size)?;
        let pus = sim_pus(&p, &app);
        let refs = p.pus();
        let opt = optimum_split(&pus, total).ok_or("no optimum")?;
        let mut rows: Vec<(&str, Vec<Vec<f64>>)> = vec![("optimum", vec![percent(&opt.units)])];
        for policy in ["hdss", "acosta", "plb-hec", "plb-hac"] {
            let runs = (1..=a.reps)
                .map(|s| training_split(policy, &pus, total, s))
                .collect::<Result<Vec<_>, _>>()?;
            rows.push((policy, runs));
        }
        for (policy, runs) in &rows {
            for (i, r) in refs.iter().enumerate() {
                let v: Vec<f64> = runs.iter().map(|run| run[i]).collect();
                csv.line(&format!(
                    "{platform},{app_name},{size},{i},{},{},{policy},{},{}",
                    r.label,
                    p.classes[r.class].kind.name(),
                    runs.len(),
                    spread(&v)
                ))?;
            }
        }
    }
    Ok(())
}
