//! `plb simulate exp1` … `exp5`: the simulated forms of issue 6 §2's
//! experiments (scripts `scripts/exp-sim-*.sh`, results `docs/results.md`),
//! one file each. CSV on `--out` (stdout by default), first lines `#`
//! comments saying SIMULATED.

mod adapt;
mod blocks;
mod idle;
mod model_cost;
mod speedup;

use std::io::Write as _;

use plb_core::balance::sim::{SimOptions, SimPu, SimReport, simulate};
use plb_core::workload::App;

use super::balancer;
use crate::cli::positive;

/// Noise of every experiment run (uniform ±3 % on compute times).
const EXP_NOISE: f64 = 0.03;

/// The contenders of experiments 1 and 3; greedy (blocks of W/64) is the
/// baseline of the speedups.
const EXP_BALANCERS: [&str; 5] = ["greedy:W/64", "hdss", "acosta", "plb-hec", "plb-hac"];

/// Options of `plb simulate exp1` … `exp5`.
#[derive(clap::Args)]
pub struct Options {
    /// Reduced sizes and one repetition (CI)
    #[arg(long)]
    quick: bool,
    /// Repetitions: noise seeds 1..=N [default: 10, exp5: 3; 1 with --quick]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    reps: Option<u64>,
    /// The CSV file [default: stdout]; a second table goes to FILE-<what>.csv
    #[arg(long, value_name = "FILE")]
    out: Option<String>,
}

/// What an experiment runs with: [`Options`] with the repetitions resolved.
struct Settings {
    quick: bool,
    reps: u64,
    out: Option<String>,
}

impl Options {
    fn resolve(self, default_reps: u64) -> Settings {
        let reps = self
            .reps
            .unwrap_or(if self.quick { 1 } else { default_reps });
        Settings {
            quick: self.quick,
            reps,
            out: self.out,
        }
    }
}

/// Experiment `n` (1 to 5).
pub fn run(n: u8, opts: Options) -> Result<(), String> {
    let a = opts.resolve(if n == 5 { 3 } else { 10 });
    match n {
        1 => speedup::exp1(&a),
        2 => blocks::exp2(&a),
        3 => idle::exp3(&a),
        4 => adapt::exp4(&a),
        5 => model_cost::exp5(&a),
        _ => Err(format!("no experiment {n}")),
    }
}

/// A CSV being written: to a file, or stdout.
struct Csv(Box<dyn std::io::Write>);

impl Csv {
    fn create(path: Option<&str>) -> Result<Csv, String> {
        Ok(Csv(match path {
            Some(p) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(p).map_err(|e| format!("{p}: {e}"))?,
            )),
            None => Box::new(std::io::stdout()),
        }))
    }
    fn line(&mut self, text: &str) -> Result<(), String> {
        writeln!(self.0, "{text}").map_err(|e| e.to_string())
    }
}

/// `FILE.csv` → `FILE-<what>.csv` (a second table of the same experiment).
fn side_path(out: Option<&str>, what: &str) -> Option<String> {
    out.map(|p| match p.strip_suffix(".csv") {
        Some(stem) => format!("{stem}-{what}.csv"),
        None => format!("{p}-{what}"),
    })
}

/// Mean, population standard deviation, min and max over repetitions.
#[derive(Clone, Copy)]
struct Spread {
    mean: f64,
    sd: f64,
    min: f64,
    max: f64,
}

fn spread(v: &[f64]) -> Spread {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Spread {
        mean,
        sd: var.sqrt(),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.6},{:.6},{:.6},{:.6}",
            self.mean, self.sd, self.min, self.max
        )
    }
}

/// CSV header of a [`Spread`] column group.
fn spread_header(name: &str) -> String {
    format!("{name}_mean,{name}_sd,{name}_min,{name}_max")
}

/// The first lines of every experiment CSV.
fn exp_preamble(csv: &mut Csv, what: &str, a: &Settings) -> Result<(), String> {
    csv.line(&format!("# SIMULATED ({what}): virtual time on true curves derived from published peaks (docs/simulator.md), never measured on the devices named"))?;
    csv.line(&format!(
        "# repetitions: seeds 1..={}, noise +-{:.0} % uniform on compute times{}; spread columns: mean, population sd, min, max over the repetitions",
        a.reps,
        EXP_NOISE * 100.0,
        if a.quick { ", --quick (reduced sizes)" } else { "" }
    ))
}

/// An application of the papers at input size `size` (matrix order, genes,
/// points, options): the application and its number of units.
fn sized_app(name: &str, size: u64) -> Result<(App, u64), String> {
    Ok(
        match App::parse(name).ok_or(format!("unknown application {name}"))? {
            App::MatMul { .. } => (App::MatMul { n: size }, size),
            App::Grn { ops_per_pair, .. } => (
                App::Grn {
                    genes: size,
                    ops_per_pair,
                },
                size,
            ),
            other => (other, size),
        },
    )
}

/// One simulated run of a balancer built by name.
fn exp_run(name: &str, pus: &[SimPu], total: u64, seed: u64) -> Result<SimReport, String> {
    let mut b = balancer(name, pus.len(), total)?;
    simulate(
        b.as_mut(),
        pus,
        total,
        SimOptions {
            noise: EXP_NOISE,
            seed,
        },
    )
    .map_err(|e| format!("{name}: {e:?}"))
}
