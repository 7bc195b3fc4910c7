//! `plb`: command-line front end of the PLB StarPU scheduling policies.

mod apps;
mod balance;
mod balance_run;
mod experiment;
mod launch;
mod simulated;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use launch::PolicySelection;
use starpu_plb::catalog::policies;

const USAGE: &str = "\
usage:
  plb policies                              list our policies
  plb run --sched <name> [--summary] -- <command> [args...]
                                            run a StarPU program under a policy
                                            (ours, or any of StarPU's own)
  plb experiment [--reps N] [--policies a,b,...] [--out DIR] [--quick]
                 [--app NAME] [--n N] [--starpu-examples]
                                            the main job: every policy on one
                                            application with EMULATED
                                            heterogeneity, and the balancers
                                            on five SIMULATED machines
  plb experiment balance [--reps N] [--quick] [--no-speed-change]
                                            divisible-load balancers vs the
                                            optimum on 2 CPU workers with
                                            EMULATED heterogeneity (real runs)
  plb app <mm|blackscholes|...> [--n N] [--seed S] [--sched NAME] [--block B]
          [--ncpu K] [--opencl]             run one of our StarPU applications
                                            under a policy and verify its result
                                            (plb app help, plb app list)
  plb app bench [--quick]                   applications' throughput per codelet
                                            and per policy
  plb bench-solver [--budget SECONDS] [--cases N] [--pus 2,16,...]
                                            time the model fit and the IPOPT and
                                            fast block-size solvers
  plb help                                  this text";

fn main() -> ExitCode {
    starpu_plb::init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("plb: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(args: &[String]) -> Result<ExitCode, String> {
    match args.first().map(String::as_str) {
        Some("policies") => {
            for p in policies() {
                println!("{:<10} {}", p.name(), p.description());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("run") => run(&args[1..]),
        Some("experiment") => experiment(&args[1..]),
        Some("app") => apps::main(&args[1..]),
        Some("bench-solver") => bench_solver(&args[1..]),
        Some("__balance-run") => {
            balance::child_main(&args[1..])?;
            Ok(ExitCode::SUCCESS)
        }
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
        None => Err(USAGE.to_string()),
    }
}

/// Returns the value following flag `flag` at `args[*i]`, advancing `i`.
fn flag_value<'a>(args: &'a [String], i: &mut usize, flag: &str) -> Result<&'a str, String> {
    *i += 1;
    args.get(*i)
        .map(String::as_str)
        .ok_or_else(|| format!("{flag} needs a value"))
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let mut sched = None;
    let mut summary = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--sched" => sched = Some(flag_value(args, &mut i, "--sched")?.to_string()),
            "--summary" => summary = true,
            "--" => break,
            other => {
                return Err(format!(
                    "unexpected argument '{other}' (the command goes after --)"
                ));
            }
        }
        i += 1;
    }
    let sched = sched.ok_or("plb run needs --sched <name>")?;
    let command = args
        .get(i + 1..)
        .filter(|c| !c.is_empty())
        .ok_or("plb run needs a command after --")?;
    let policy = PolicySelection::new(&sched)?;
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    policy.apply(&mut cmd);
    if summary {
        cmd.env("PLB_SUMMARY", "1");
    }
    let err = cmd.exec();
    Err(format!("cannot run '{}': {err}", command[0]))
}

fn experiment(args: &[String]) -> Result<ExitCode, String> {
    if args.first().map(String::as_str) == Some("balance") {
        balance::run(&args[1..])?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut opts = experiment::Options::default();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--reps" => {
                let v = flag_value(args, &mut i, "--reps")?;
                opts.repetitions = Some(
                    v.parse()
                        .map_err(|_| format!("--reps: '{v}' is not a count"))?,
                );
            }
            "--policies" => {
                let v = flag_value(args, &mut i, "--policies")?;
                opts.policies = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if opts.policies.is_empty() {
                    return Err("--policies needs at least one name".into());
                }
            }
            "--out" => opts.out_dir = PathBuf::from(flag_value(args, &mut i, "--out")?),
            "--quick" => opts.quick = true,
            "--starpu-examples" => opts.starpu_examples = true,
            "--app" => opts.app = flag_value(args, &mut i, "--app")?.to_string(),
            "--n" => {
                let v = flag_value(args, &mut i, "--n")?;
                opts.n = Some(
                    v.parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("--n: '{v}' is not a size"))?,
                );
            }
            other => return Err(format!("unexpected argument '{other}'")),
        }
        i += 1;
    }
    let written = experiment::run(&opts)?;
    println!("\nwritten (CSV raw data, PNG plots):");
    for path in written {
        println!("  {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_solver(args: &[String]) -> Result<ExitCode, String> {
    let mut cfg = plb_core::bench::BenchConfig::default();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        let value = flag_value(args, &mut i, flag)?;
        let bad = || format!("{flag}: '{value}' is not valid");
        match flag {
            "--budget" => {
                cfg.budget_s = value
                    .parse()
                    .ok()
                    .filter(|b: &f64| *b > 0.0)
                    .ok_or_else(bad)?;
            }
            "--cases" => cfg.cases = value.parse().ok().filter(|c| *c > 0).ok_or_else(bad)?,
            "--pus" => {
                cfg.pu_counts = value
                    .split(',')
                    .map(|v| v.parse().ok().filter(|n| *n > 0))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(bad)?;
            }
            _ => return Err(format!("unexpected argument '{flag}'")),
        }
        i += 1;
    }
    print!("{}", plb_core::bench::report(&cfg));
    Ok(ExitCode::SUCCESS)
}
