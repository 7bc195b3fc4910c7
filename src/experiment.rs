//! `plb experiment`: the project's main job. It runs StarPU's own example
//! applications under our `greedy` and under StarPU's `eager`, repeatedly
//! and interleaved, and prints their wall-clock times side by side (real
//! runs); then it compares every balancer of `plb-core` (greedy, HDSS,
//! Acosta, PLB-HeC, PLB-HAC) on simulated platforms against the optimum
//! (see `simulated.rs`). Later issues replace the real workloads with our
//! divisible-load applications under every policy.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::launch::PolicySelection;

/// One StarPU example program with its arguments.
struct Workload {
    label: &'static str,
    program: &'static str,
    args: &'static [&'static str],
}

const WORKLOADS: &[Workload] = &[
    Workload {
        label: "sgemm 2048^3, 8x8 blocks",
        program: "sgemm",
        args: &["-x", "2048", "-y", "2048", "-z", "2048", "-nblocks", "8"],
    },
    Workload {
        label: "cholesky 4096, 16x16 tiles",
        program: "cholesky_implicit",
        args: &["-size", "4096", "-nblocks", "16"],
    },
];

/// Options of `plb experiment`.
pub struct Options {
    pub repetitions: usize,
    pub policies: Vec<String>,
    pub out_dir: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            repetitions: 3,
            policies: vec!["greedy".into(), "eager".into()],
            out_dir: PathBuf::from("results"),
        }
    }
}

/// Where Debian installs StarPU's examples (`$STARPU_EXAMPLES_DIR` overrides).
pub fn examples_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("STARPU_EXAMPLES_DIR") {
        return Some(PathBuf::from(dir));
    }
    std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("starpu/examples"))
        .find(|p| p.is_dir())
}

/// Runs one program once under `policy`; returns wall seconds, or why it failed.
fn run_once(
    program: &Path,
    args: &[&str],
    policy: &PolicySelection,
    home: &Path,
) -> Result<f64, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("STARPU_HOME", home)
        .env("STARPU_SILENT", "1")
        .env("PLB_SUMMARY", "1")
        .env_remove("LD_PRELOAD")
        .env_remove("STARPU_SCHED_LIB")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    policy.apply(&mut cmd);
    let start = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let secs = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            stderr.trim()
        ));
    }
    let tag = format!("plb: policy={} ", policy.sched);
    if policy.is_ours() && !stderr.lines().any(|l| l.starts_with(&tag)) {
        return Err(format!(
            "policy {} was not loaded (no summary line)",
            policy.sched
        ));
    }
    Ok(secs)
}

/// Median, minimum and maximum of a non-empty sample.
fn spread(times: &[f64]) -> (f64, f64, f64) {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    let median = if t.len() % 2 == 1 {
        t[t.len() / 2]
    } else {
        (t[t.len() / 2 - 1] + t[t.len() / 2]) / 2.0
    };
    (median, t[0], t[t.len() - 1])
}

/// Runs the comparison and prints the table; returns the CSV path.
pub fn run(opts: &Options) -> Result<PathBuf, String> {
    if opts.repetitions == 0 {
        return Err("--reps must be at least 1".into());
    }
    let dir = examples_dir()
        .ok_or("StarPU's examples were not found: install starpu-examples (scripts/setup.sh) or set STARPU_EXAMPLES_DIR")?;
    let policies = opts
        .policies
        .iter()
        .map(|p| PolicySelection::new(p))
        .collect::<Result<Vec<_>, _>>()?;
    let home = std::env::temp_dir().join(format!("plb-experiment-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {}: {e}", home.display()))?;
    eprintln!(
        "plb experiment: real StarPU runs on this machine (StarPU {}, default workers; no heterogeneity emulated), \
         {} repetition(s) per policy, interleaved",
        starpu_plb::STARPU_SERIES,
        opts.repetitions
    );
    let mut csv = String::from("workload,policy,repetition,seconds\n");
    let mut table = Vec::new();
    for w in WORKLOADS {
        let program = dir.join(w.program);
        let mut times = vec![Vec::new(); policies.len()];
        let live = std::io::stderr().is_terminal();
        if !live {
            eprintln!("  running {} ...", w.label);
        }
        for rep in 0..opts.repetitions {
            for (i, p) in policies.iter().enumerate() {
                if live {
                    eprint!(
                        "\r  {:<28} rep {}/{} {:<10}",
                        w.label,
                        rep + 1,
                        opts.repetitions,
                        p.sched
                    );
                }
                let t = run_once(&program, w.args, p, &home)?;
                let _ = writeln!(csv, "{},{},{},{:.4}", w.program, p.sched, rep, t);
                times[i].push(t);
            }
        }
        if live {
            eprintln!();
        }
        table.push((w.label, times));
    }
    let _ = std::fs::remove_dir_all(&home);

    println!(
        "\n{:<28} {:<10} {:>10} {:>10} {:>10} {:>12}",
        "workload", "policy", "median s", "min s", "max s", "vs first"
    );
    for (label, times) in &table {
        let base = spread(&times[0]).0;
        for (p, t) in policies.iter().zip(times) {
            let (med, min, max) = spread(t);
            println!(
                "{:<28} {:<10} {:>10.3} {:>10.3} {:>10.3} {:>11.2}x",
                label,
                p.sched,
                med,
                min,
                max,
                med / base
            );
        }
    }
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", opts.out_dir.display()))?;
    let path = opts.out_dir.join("experiment-foundation.csv");
    std::fs::write(&path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))?;

    let (table, sim_csv) = crate::simulated::run(opts.repetitions)?;
    println!("\n{table}");
    let sim_path = opts.out_dir.join("experiment-simulated.csv");
    std::fs::write(&sim_path, sim_csv)
        .map_err(|e| format!("cannot write {}: {e}", sim_path.display()))?;
    println!("simulated makespans written to {}", sim_path.display());
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_of_odd_and_even_samples() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }
}
