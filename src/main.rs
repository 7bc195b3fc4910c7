//! `plb`: command-line front end of the PLB StarPU scheduling policies.
//!
//! The command line is parsed by clap (derive API); each subcommand's
//! options live next to its code. Exit statuses: see [`cli`].

mod apps;
mod bound;
mod cli;
mod compare;
mod experiment;
mod launch;
mod simgrid;
mod simulate;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use clap::{Args, Parser, Subcommand};

use cli::{Failure, positive, positive_seconds, usage_error};
use launch::PolicySelection;
use starpu_plb::catalog::policies;

/// Command-line front end of the PLB StarPU scheduling policies: run StarPU
/// programs under them, run our applications, the experiments and the
/// simulator.
#[derive(Parser)]
#[command(name = "plb", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

/// `plb`'s subcommands.
#[derive(Subcommand)]
enum Commands {
    /// List our policies
    Policies,
    /// Run a StarPU program under a policy (ours, or any of StarPU's own)
    Run(RunArgs),
    /// Which policy for my program? Runs it under ours and StarPU's
    /// (calibrated, interleaved repetitions) and recommends one
    Compare(compare::Command),
    /// The main job: every policy on one application with EMULATED
    /// heterogeneity, and the balancers on five SIMULATED machines
    Experiment(experiment::Command),
    /// Run one of our StarPU applications under a policy and verify its
    /// result; list or benchmark them
    App(apps::Command),
    /// Time the model fit and the IPOPT and fast block-size solvers
    BenchSolver(BenchSolverArgs),
    /// The cluster-scale simulator: the balancers on SIMULATED platforms,
    /// in virtual time
    Simulate(simulate::Command),
    /// StarPU's applications (Cholesky, LU, GEMM) on SIMULATED GPU machines
    /// (StarPU-SimGrid), under our policies and StarPU's
    Simgrid(simgrid::Command),
    /// A lower bound on the makespan of task graphs recorded with PLB_GRAPH
    /// (dependencies kept, transfers not counted)
    Bound(bound::Command),
    /// One run of `plb experiment balance` (a child process)
    #[command(name = "__balance-run", hide = true)]
    BalanceRun(experiment::balance::ChildArgs),
}

/// `plb run`.
#[derive(Args)]
#[command(after_help = "Example: plb run --sched greedy --summary -- ./my_starpu_app args...")]
struct RunArgs {
    /// The policy (required): ours (plb policies) or StarPU's (eager, dmda...)
    #[arg(long, value_name = "NAME", value_parser = cli::policy_name)]
    sched: Option<String>,
    /// Print our policy's summary line at the end (PLB_SUMMARY=1)
    #[arg(long)]
    summary: bool,
    /// The program and its arguments, after `--`, passed verbatim
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// `plb bench-solver`.
#[derive(Args)]
struct BenchSolverArgs {
    /// Seconds of timing per measurement [default: 1]
    #[arg(long, value_name = "SECONDS", value_parser = positive_seconds)]
    budget: Option<f64>,
    /// Random problems per PU count [default: 5]
    #[arg(long, value_name = "N", value_parser = positive::<usize>())]
    cases: Option<usize>,
    /// PU counts, comma-separated [default: 2,4,16,64,256,1024,4096]
    #[arg(long, value_name = "N,..", value_delimiter = ',', value_parser = positive::<usize>())]
    pus: Option<Vec<usize>>,
}

fn main() -> ExitCode {
    starpu_plb::init_logging();
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("plb: error: {}", e.message);
            ExitCode::from(e.status)
        }
    }
}

fn dispatch(command: Commands) -> Result<ExitCode, Failure> {
    match command {
        Commands::Policies => {
            for p in policies() {
                println!("{:<10} {}", p.name(), p.description());
            }
            Ok(ExitCode::SUCCESS)
        }
        Commands::Run(args) => run(args),
        Commands::Compare(cmd) => cmd.run(),
        Commands::Experiment(cmd) => cmd.run(),
        Commands::App(cmd) => cmd.run(),
        Commands::BenchSolver(args) => {
            let mut cfg = plb_core::bench::BenchConfig::default();
            cfg.budget_s = args.budget.unwrap_or(cfg.budget_s);
            cfg.cases = args.cases.unwrap_or(cfg.cases);
            cfg.pu_counts = args.pus.unwrap_or(cfg.pu_counts);
            print!("{}", plb_core::bench::report(&cfg));
            Ok(ExitCode::SUCCESS)
        }
        Commands::Simulate(cmd) => cmd.run(),
        Commands::Simgrid(cmd) => cmd.run(),
        Commands::Bound(cmd) => cmd.run(),
        Commands::BalanceRun(args) => {
            args.run()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `plb run`: replaces this process with the command, under the policy.
fn run(args: RunArgs) -> Result<ExitCode, Failure> {
    let Some(sched) = args.sched else {
        usage_error("run", "plb run needs --sched <name>").exit();
    };
    let Some((program, program_args)) = args.command.split_first() else {
        usage_error("run", "plb run needs a command after --").exit();
    };
    let policy = PolicySelection::new(&sched).map_err(Failure::setup)?;
    let mut cmd = Command::new(program);
    cmd.args(program_args);
    policy.apply(&mut cmd);
    if args.summary {
        cmd.env("PLB_SUMMARY", "1");
    }
    let err = cmd.exec();
    Err(format!("cannot run '{}': {err}", program.to_string_lossy()).into())
}
