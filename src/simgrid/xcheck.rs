//! `plb simgrid --xcheck`: our simulator (`plb-core`'s `sim::simulate`)
//! against StarPU-SimGrid on one divisible workload.
//!
//! The same workload runs twice: on a SimGrid machine through our
//! divisible-load API (`scripts/simgrid-xcheck.c`, built by
//! `scripts/simgrid.sh` as `target/starpu14-simgrid/plb-xcheck`), and in our
//! simulator on PUs given the same costs: a block of `x` units takes
//! `fixed + x·per_unit` seconds on a worker of its kind (the C program's
//! STARPU_PER_WORKER model, from which SimGrid takes the duration) and, on
//! a GPU, moves `x·bytes` bytes from main memory at the bandwidth and
//! latency StarPU sampled for that machine's bus (`bus/<machine>.bandwidth`,
//! `.latency`; SimGrid simulates the same bus).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use plb_core::balance::registry;
use plb_core::balance::sim::{self, SimOptions, SimPu};
use plb_core::balance::xcheck::{self as workload, BALANCERS, BYTES_PER_UNIT, UNITS};
use plb_core::balance::xcheck::{CPU_FIXED_S, CPU_PER_UNIT_S, GPU_FIXED_S, GPU_PER_UNIT_S};

use super::run::{Machine, Setup, simulated_machine};

/// The machine: attila with 2 CPU workers and 1 CUDA worker.
pub const MACHINE: &str = "attila:ncpu=2:ncuda=1";

/// One side's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub makespan_s: f64,
    /// Units per worker, in StarPU's worker order.
    pub units: Vec<u64>,
}

/// The kinds (`cpu`/`cuda`) and the result of the C program's output.
fn parse_program(stdout: &str) -> Result<(Vec<String>, Side), String> {
    let mut kinds = Vec::new();
    let mut units = Vec::new();
    let mut makespan = None;
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["worker", _, kind, "units", u, "blocks", _] => {
                kinds.push(kind.to_string());
                units.push(u.parse().map_err(|_| format!("bad line: {line}"))?);
            }
            ["makespan_s", t] => makespan = t.parse().ok(),
            _ => {}
        }
    }
    let makespan_s = makespan.ok_or("no makespan_s line")?;
    Ok((kinds, Side { makespan_s, units }))
}

/// Bandwidth (bytes/s) and latency (s) from main memory (node 0) to the
/// first GPU (node 1) in StarPU's sampled bus files.
pub fn bus(samples: &Path, machine: &str) -> Result<(f64, f64), String> {
    let first = |file: &str| -> Result<f64, String> {
        let path = samples.join("bus").join(format!("{machine}.{file}"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.lines()
            .find(|l| !l.starts_with('#') && !l.trim().is_empty())
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("{}: no node 0 -> 1 figure", path.display()))
    };
    // StarPU writes MB/s (10^6 bytes) and microseconds.
    Ok((first("bandwidth")? * 1e6, first("latency")? * 1e-6))
}

/// Our simulator's PUs for `kinds` (StarPU's worker order).
fn pus(kinds: &[String], bandwidth: f64, latency: f64) -> Vec<SimPu> {
    kinds
        .iter()
        .map(|k| workload::pu(k == "cuda", BYTES_PER_UNIT as f64, bandwidth, latency))
        .collect()
}

/// Largest relative difference of the two makespans the check accepts:
/// both sides simulate the same costs, so a larger one means that one of
/// them (or the program) changed behaviour.
pub const TOLERANCE: f64 = 0.25;

/// Runs the cross-check; returns the Markdown report and the largest
/// relative difference of the makespans.
pub fn run(setup: &Setup, program: &Path) -> Result<(String, f64), String> {
    if !program.is_file() {
        return Err(format!(
            "{} is missing: build it with `bash scripts/simgrid.sh --build-only`",
            program.display()
        ));
    }
    let machine = Machine::parse(MACHINE)?;
    let (bandwidth, latency) = bus(&setup.samples, &machine.name)?;
    let mut md = format!(
        "## Cross-check: our simulator against StarPU-SimGrid\n\n\
         Workload: {UNITS} units; a block of x units takes {:.0} µs + x·{:.0} µs on a CPU worker, \
         {:.0} µs + x·{:.0} µs on a CUDA worker, and moves x·{} KiB to a GPU. Machine {MACHINE}; \
         bus RAM→GPU from the samples: {:.0} MB/s, {:.1} µs.\n\n\
         | balancer | SIMULATED (StarPU-SimGrid, machine {MACHINE}) s | SIMULATED (plb simulate) s | difference | units per worker (SimGrid) | units per worker (ours) |\n\
         | --- | ---: | ---: | ---: | --- | --- |\n",
        CPU_FIXED_S * 1e6,
        CPU_PER_UNIT_S * 1e6,
        GPU_FIXED_S * 1e6,
        GPU_PER_UNIT_S * 1e6,
        BYTES_PER_UNIT / 1024,
        bandwidth / 1e6,
        latency * 1e6,
    );
    let mut worst: f64 = 0.0;
    for name in BALANCERS {
        let home = setup
            .scratch
            .join(format!("xcheck-{}", name.replace([':', '/', '='], "_")));
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        let mut cmd = Command::new(program);
        cmd.args([
            UNITS.to_string(),
            name.to_string(),
            CPU_FIXED_S.to_string(),
            CPU_PER_UNIT_S.to_string(),
            GPU_FIXED_S.to_string(),
            GPU_PER_UNIT_S.to_string(),
            BYTES_PER_UNIT.to_string(),
        ])
        .current_dir(&home)
        .stdin(Stdio::null());
        simulated_machine(&mut cmd, setup, &machine, &home);
        cmd.env("STARPU_SCHED", "eager");
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().filter(|l| !l.contains("INFO]")).collect();
            return Err(format!(
                "{name}: {} exited {}:\n{}",
                program.display(),
                out.status,
                tail[tail.len().saturating_sub(8)..].join("\n")
            ));
        }
        let (kinds, simgrid) = parse_program(&stdout).map_err(|e| format!("{name}: {e}"))?;
        let pus = pus(&kinds, bandwidth, latency);
        let mut balancer = registry::build(name, pus.len(), UNITS).map_err(|e| e.to_string())?;
        let ours = sim::simulate(&mut *balancer, &pus, UNITS, SimOptions::default())
            .map_err(|e| format!("{name}: our simulator: {e:?}"))?;
        let diff = (ours.makespan - simgrid.makespan_s) / simgrid.makespan_s;
        worst = worst.max(diff.abs());
        let show = |units: &[u64]| {
            kinds
                .iter()
                .zip(units)
                .map(|(k, u)| format!("{k} {u}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            md,
            "| {name} | {:.4} | {:.4} | {:+.1}% | {} | {} |",
            simgrid.makespan_s,
            ours.makespan,
            100.0 * diff,
            show(&simgrid.units),
            show(&ours.units)
        );
        eprintln!(
            "simgrid: xcheck {name}: StarPU-SimGrid {:.4} s, plb simulate {:.4} s ({:+.1}%)",
            simgrid.makespan_s,
            ours.makespan,
            100.0 * diff
        );
    }
    Ok((md, worst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_output_is_parsed() {
        let (kinds, side) = parse_program(
            "worker 0 cuda units 8752 blocks 57\nworker 1 cpu units 624 blocks 4\nmakespan_s 0.624440\n",
        )
        .unwrap();
        assert_eq!(kinds, ["cuda", "cpu"]);
        assert_eq!(side.units, [8752, 624]);
        assert_eq!(side.makespan_s, 0.62444);
        assert!(parse_program("worker 0 cuda units 1 blocks 1\n").is_err());
    }
}
