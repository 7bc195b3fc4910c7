//! `plb simulate`: the cluster-scale simulator's front end (issue 6 §1,
//! `docs/simulator.md`), on top of `plb_core::balance::sim`.
//!
//! Every line it prints is SIMULATED: virtual time on true curves derived
//! from published peaks, never a measurement on the devices named. The
//! only real measurements are the wall-clock times of the simulation and
//! of the policies' decisions on the machine running it (`scaling.rs`).
//!
//! * `platform`, `paper` (`platforms.rs`): a platform's derived curves, and
//!   the papers' scenarios (A; A,B; ...) × every balancer vs the optimum.
//! * `scaling`, `million` (`scaling.rs`): wall time versus the number of PUs.
//! * `exp1` … `exp5` (`exp/`): the simulated forms of issue 6 §2's
//!   experiments (scripts `scripts/exp-sim-*.sh`).

mod exp;
mod platforms;
mod scaling;

use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use plb_core::balance::Balancer;
use plb_core::balance::sim;
use plb_core::platform::Platform;
use plb_core::workload::{self, App};

use crate::cli::Failure;

/// `plb simulate <MODE>`.
#[derive(Args)]
#[command(after_help = "Every output line is SIMULATED (virtual time); see docs/simulator.md.")]
pub struct Command {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// The derived curves of every PU of a platform and the one-block
    /// optimum split
    Platform(platforms::PlatformArgs),
    /// The papers' scenarios (machines A; A,B; ...) x every balancer:
    /// makespan / one-block optimum
    Paper(platforms::PaperArgs),
    /// Wall time of the simulation and of the policies' decisions versus
    /// the number of PUs (synthetic platforms)
    Scaling(scaling::ScalingArgs),
    /// Greedy with 10^6 blocks on 1,000 PUs: the simulator's own speed
    Million(scaling::MillionArgs),
    /// Experiment 1: speedup over greedy and makespan / optimum versus
    /// machines and input size (CSV)
    Exp1(exp::Options),
    /// Experiment 2: per-PU block sizes at the end of the training (CSV)
    Exp2(exp::Options),
    /// Experiment 3: idle time per PU class (CSV)
    Exp3(exp::Options),
    /// Experiment 4: adaptability, a GPU twice slower from mid-run (CSV)
    Exp4(exp::Options),
    /// Experiment 5: cost of the model evaluation per step, IPOPT vs the
    /// fast solver (CSV; the costs are MEASURED wall clock)
    Exp5(exp::Options),
}

impl Command {
    pub fn run(self) -> Result<ExitCode, Failure> {
        match self.mode {
            Mode::Platform(args) => platforms::show_platform(&args)?,
            Mode::Paper(args) => platforms::paper(&args)?,
            Mode::Scaling(args) => scaling::scaling(&args)?,
            Mode::Million(args) => scaling::million(&args)?,
            Mode::Exp1(opts) => exp::run(1, opts)?,
            Mode::Exp2(opts) => exp::run(2, opts)?,
            Mode::Exp3(opts) => exp::run(3, opts)?,
            Mode::Exp4(opts) => exp::run(4, opts)?,
            Mode::Exp5(opts) => exp::run(5, opts)?,
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The balancers compared when none are named (`paper`).
pub const BALANCERS: &[&str] = &sim::BALANCERS;

/// Builds the balancer called `name` (a registry name: `greedy:W/<d>`,
/// `greedy:<units>`, `hdss`, `acosta`, `plb-hec`, `plb-hec:solver=fast`,
/// `plb-hac`, `plb-hac:solver=ipopt`, `static`, ...) for `n` PUs and `total`
/// units, with the default parameters.
pub fn balancer(name: &str, n: usize, total: u64) -> Result<Box<dyn Balancer>, String> {
    plb_core::balance::registry::build(name, n, total)
        .map(|b| b as Box<dyn Balancer>)
        .map_err(|e| e.to_string())
}

/// Value parser of a platform: built-in (`plb-hac`, `plb-hec`) or a file.
fn platform(name: &str) -> Result<Platform, String> {
    match Platform::builtin(name) {
        Some(p) => Ok(p),
        None => {
            let text = std::fs::read_to_string(name).map_err(|e| format!("{name}: {e}"))?;
            Platform::parse(&text).map_err(|e| format!("{name}: {e}"))
        }
    }
}

/// Value parser of an application of the simulator (`workload::APPS`).
fn app() -> impl TypedValueParser<Value = App> {
    PossibleValuesParser::new(workload::APPS)
        .try_map(|name| App::parse(&name).ok_or(format!("unknown application {name}")))
}
