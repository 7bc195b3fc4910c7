//! Task graphs across nodes under SimGrid's SMPI (`plb experiment cluster
//! --smpi-dag`, issue 24 §4): StarPU-MPI's own distributed Cholesky
//! (`mpi/examples/matrix_decomposition/mpi_cholesky` of StarPU 1.4.10,
//! unmodified, 2-D block-cyclic, owner computes) compiled with `smpicc`
//! and linked with our static library and the static SMPI StarPU, on `q`
//! simulated nodes like StarPU's sampled `mirage` (9 CPU + 3 CUDA
//! workers each), the same policy on every rank. SIMULATED.
//!
//! `STARPU_SCHED` finds our policies through the link: the program is
//! linked with `-Wl,--wrap=_starpu_select_sched_policy`, so StarPU's
//! policy lookup reaches our `__wrap__starpu_select_sched_policy`
//! (policy/src/starpu/interpose.rs) first.
//!
//! Every StarPU policy runs with the sampled (calibrated) models,
//! heteroprio after calibration runs until its makespan repeats; ours
//! after one learning run in a models folder of their own (`warm`) and
//! with no models file (`cold`). SimGrid is deterministic: one measured
//! run each. Every run must print its time and execute the
//! factorisation's task count (StarPU's worker statistics, summed over
//! the ranks); for ours, every rank's summary names the policy and the
//! ranks' counts add up to the same number. SimGrid runs no kernel, so
//! the factor is not checked numerically here (the REAL runs of
//! `scripts/exp-mpi-dag.sh` check it).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use starpu_plb::catalog;

use super::cluster_smpi::{
    SmpiOutput, embedded_link_args, platform_files, smpicc_sources, smpirun_output, starpu_source,
};
use crate::simgrid::{HETEROPRIO_CALIBRATION_MAX, STARPU_POLICIES, calibrated, run::worker_stats};

/// Our task-graph policies.
pub const OURS: [&str; 3] = ["plb-heft", "dada", "dada-cp"];

/// One platform size and matrix.
#[derive(Debug, Clone, Copy)]
pub struct DagCase {
    pub ranks: usize,
    pub size: u64,
    pub nblocks: u64,
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct DagRow {
    pub ranks: usize,
    pub size: u64,
    pub nblocks: u64,
    /// The policy's name, with ` (cold)` for our runs without models.
    pub label: String,
    pub ours: bool,
    /// Rank 0's `Computation time (in ms)`, simulated.
    pub ms: f64,
    /// Tasks executed, summed over the ranks, and the factorisation's.
    pub tasks: u64,
    pub expected: u64,
    /// GB moved on the nodes' buses (`Total transfers` of
    /// `STARPU_BUS_STATS`, summed over the ranks).
    pub gb: f64,
}

/// Tasks of a tiled Cholesky of `nb` x `nb` blocks.
pub fn expected_tasks(nb: u64) -> u64 {
    let (m1, m2) = (nb.saturating_sub(1), nb.saturating_sub(2));
    nb + nb * m1 + nb * m1 * m2 / 6
}

/// StarPU's `mpi_cholesky` linked with our static library.
fn build(dir: &Path) -> Result<PathBuf, String> {
    let src = starpu_source();
    let example = src.join("mpi/examples/matrix_decomposition");
    let sources: Vec<PathBuf> = [
        "mpi_cholesky.c",
        "mpi_cholesky_models.c",
        "mpi_cholesky_kernels.c",
        "mpi_cholesky_codelets.c",
        "mpi_decomposition_params.c",
        "mpi_decomposition_matrix.c",
    ]
    .iter()
    .map(|f| example.join(f))
    .chain(std::iter::once(src.join("examples/common/blas.c")))
    .collect();
    if let Some(missing) = sources.iter().find(|s| !s.is_file()) {
        return Err(format!(
            "{} is missing: bash scripts/setup.sh --all unpacks StarPU 1.4.10's source",
            missing.display()
        ));
    }
    let (mut before, mut after) = embedded_link_args()?;
    before.push(format!("-I{}", src.join("examples").display()));
    before.push(format!("-I{}", src.join("mpi/examples").display()));
    // The example's CPU kernels call BLAS (never run under SimGrid).
    after.push("-lblas".into());
    smpicc_sources(dir, &sources, "mpi_cholesky-plb", &before, &after)
}

/// What one run printed, checked. `policy`: the name in `STARPU_SCHED`.
fn parse(
    o: &SmpiOutput,
    case: DagCase,
    policy: &str,
    ours: bool,
) -> Result<(f64, u64, f64), String> {
    let text = format!("{}\n{}", o.stdout, o.stderr);
    let fail = |why: String| Err(format!("{why}\n{}", o.stderr_tail(12)));
    if !o.success {
        return fail("starpu_smpirun failed".into());
    }
    if let Some(e) = text.lines().find(|l| l.contains("plb: error")) {
        return fail(format!("our library reported an error: {e}"));
    }
    let Some(ms) = text
        .lines()
        .find_map(|l| l.strip_prefix("Computation time (in ms):"))
        .and_then(|v| v.trim().parse::<f64>().ok())
    else {
        return fail("no `Computation time` printed".into());
    };
    let expected = expected_tasks(case.nblocks);
    let tasks: u64 = worker_stats(&text).iter().map(|w| w.tasks).sum();
    if tasks != expected {
        return fail(format!(
            "{tasks} tasks executed over the ranks, the factorisation has {expected}"
        ));
    }
    if ours {
        let summaries: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("plb: policy="))
            .filter(|l| l.split_whitespace().next() == Some(policy))
            .filter_map(|l| crate::apps::field(l, "executed").and_then(|v| v.parse().ok()))
            .collect();
        let executed: u64 = summaries.iter().sum();
        if summaries.len() != case.ranks || executed != expected {
            return fail(format!(
                "{} of {} ranks printed {policy}'s summary, counting {executed} of {expected} tasks",
                summaries.len(),
                case.ranks
            ));
        }
    }
    let gb = text
        .lines()
        .filter_map(|l| l.strip_prefix("Total transfers:"))
        .filter_map(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .sum();
    Ok((ms, tasks, gb))
}

/// Runs every case: StarPU's policies, then ours warm and cold.
pub fn run(
    out: &Path,
    cases: &[DagCase],
    starpu: &[&str],
    ours: &[&str],
) -> Result<Vec<DagRow>, String> {
    if let Some(bad) = starpu.iter().find(|p| !STARPU_POLICIES.contains(p)) {
        return Err(format!(
            "{bad} is not one of StarPU's policies compared here"
        ));
    }
    if let Some(bad) = ours.iter().find(|p| catalog::find(p).is_none()) {
        return Err(format!("{bad} is not one of our policies"));
    }
    let dir = out.join("smpi-dag");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prog = build(&dir)?;
    let cluster = plb_core::cluster::platform::Cluster::parse(super::cluster_smpi::MIRAGE)
        .map_err(|e| format!("mirage-cluster.txt: {e}"))?;
    let mut rows = Vec::new();
    for &case in cases {
        let files = platform_files(&dir, "dag", case.ranks, cluster.network)?;
        let tag = format!("{}r-{}-{}", case.ranks, case.size, case.nblocks);
        let home = dir.join(format!("home-{tag}"));
        let args = [
            "-size".to_string(),
            case.size.to_string(),
            "-nblocks".into(),
            case.nblocks.to_string(),
        ];
        let label_case = format!(
            "{} mirage nodes, Cholesky {} in {}x{} tiles",
            case.ranks, case.size, case.nblocks, case.nblocks
        );
        let one = |policy: &str, ours: bool, models: Option<&Path>, extra: &[(&str, String)]| {
            let mut env: Vec<(&str, String)> = vec![
                ("STARPU_SCHED", policy.to_string()),
                ("STARPU_WORKER_STATS", "1".into()),
                ("STARPU_BUS_STATS", "1".into()),
                ("PLB_SUMMARY", "1".into()),
            ];
            env.push((
                "PLB_MODEL_DIR",
                models.map_or("off".into(), |m| m.display().to_string()),
            ));
            env.extend(extra.iter().cloned());
            let o = smpirun_output(case.ranks, &files, &home, &prog, &args, &env)?;
            parse(&o, case, policy, ours).map_err(|e| format!("{label_case}, {policy}: {e}"))
        };
        eprintln!("cluster: SIMULATED task graphs under SMPI: {label_case}");
        let mut push = |label: String, ours: bool, (ms, tasks, gb): (f64, u64, f64)| {
            eprintln!("cluster:   {label}: {ms:.1} ms, {gb:.2} GB moved");
            rows.push(DagRow {
                ranks: case.ranks,
                size: case.size,
                nblocks: case.nblocks,
                label,
                ours,
                ms,
                tasks,
                expected: expected_tasks(case.nblocks),
                gb,
            });
        };
        for &p in starpu {
            let mut extra = Vec::new();
            if p == "heteroprio" {
                let hp = dir.join(format!("heteroprio-{tag}"));
                std::fs::create_dir_all(&hp).map_err(|e| format!("{}: {e}", hp.display()))?;
                extra.push(("STARPU_HETEROPRIO_DATA_DIR", hp.display().to_string()));
                let mut makespans = Vec::new();
                while makespans.len() < HETEROPRIO_CALIBRATION_MAX && !calibrated(&makespans) {
                    makespans.push(one(p, false, None, &extra)?.0);
                }
            }
            let r = one(p, false, None, &extra)?;
            push(p.to_string(), false, r);
        }
        for &p in ours {
            let models = dir.join(format!("models-{tag}-{p}"));
            let _ = std::fs::remove_dir_all(&models);
            std::fs::create_dir_all(&models).map_err(|e| format!("{}: {e}", models.display()))?;
            one(p, true, Some(&models), &[])?;
            let warm = one(p, true, Some(&models), &[])?;
            push(p.to_string(), true, warm);
            let cold = one(p, true, None, &[])?;
            push(format!("{p} (cold)"), true, cold);
        }
    }
    Ok(rows)
}

/// Every row as CSV.
pub fn csv(rows: &[DagRow]) -> String {
    let mut s = String::from("ranks,size,nblocks,policy,ours,ms,tasks,expected_tasks,gb_moved\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.2},{},{},{:.4}",
            r.ranks, r.size, r.nblocks, r.label, r.ours as u8, r.ms, r.tasks, r.expected, r.gb
        );
    }
    s
}

/// One table per case, fastest first: time, ratio to `dmdas` and to
/// StarPU's best, GB moved.
pub fn md(rows: &[DagRow]) -> String {
    let mut s = String::from(
        "SIMULATED: StarPU-MPI's distributed Cholesky (StarPU 1.4.10's `mpi_cholesky`, unmodified, linked with our static library) under SimGrid's SMPI on nodes like StarPU's sampled `mirage` (9 CPU + 3 CUDA workers each, 4 GB/s network), the same policy on every rank; every run executed every task once (counted over the ranks). Ours: after one learning run, and cold (no models file).\n",
    );
    let mut cases: Vec<(usize, u64, u64)> =
        rows.iter().map(|r| (r.ranks, r.size, r.nblocks)).collect();
    cases.dedup();
    for (q, n, nb) in cases {
        let of: Vec<&DagRow> = rows
            .iter()
            .filter(|r| (r.ranks, r.size, r.nblocks) == (q, n, nb))
            .collect();
        let dmdas = of.iter().find(|r| r.label == "dmdas").map(|r| r.ms);
        let best = of
            .iter()
            .filter(|r| !r.ours)
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .map(|r| (r.label.clone(), r.ms));
        let _ = writeln!(
            s,
            "\n{q} nodes, N = {n}, {nb}x{nb} tiles ({} tasks){}\n\n| policy | ms | / dmdas | / StarPU's best | GB moved |\n| --- | ---: | ---: | ---: | ---: |",
            expected_tasks(nb),
            best.as_ref()
                .map(|(l, ms)| format!("; StarPU's best: {l}, {ms:.1} ms"))
                .unwrap_or_default()
        );
        let mut sorted = of.clone();
        sorted.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        let ratio = |x: f64, by: Option<f64>| by.map_or("-".into(), |b| format!("{:.3}", x / b));
        for r in sorted {
            let _ = writeln!(
                s,
                "| {} | {:.1} | {} | {} | {:.2} |",
                r.label,
                r.ms,
                ratio(r.ms, dmdas),
                ratio(r.ms, best.as_ref().map(|b| b.1)),
                r.gb
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_task_counts() {
        // potrf + trsm + syrk/gemm updates: 1 block, 2, and the 10x10 run
        // of the quick case (220).
        assert_eq!(expected_tasks(0), 0);
        assert_eq!(expected_tasks(1), 1);
        assert_eq!(expected_tasks(2), 4);
        assert_eq!(expected_tasks(10), 220);
        assert_eq!(expected_tasks(20), 1540);
    }

    /// What a 2-rank run of a 2x2-tile matrix (4 tasks) prints: worker
    /// statistics, bus totals and our summaries, `counts` tasks per rank.
    fn output(counts: &[u64], summaries: usize) -> SmpiOutput {
        let mut stderr = String::new();
        for (rank, n) in counts.iter().enumerate() {
            stderr += &format!(
                "Worker stats:\nCUDA 0.0 (Tesla M2070 4.7 GiB)  \n\t{n} task(s)\nCPU 0\n\t0 task(s)\nTotal transfers: 0.5{rank} GB\n"
            );
        }
        for n in counts.iter().take(summaries) {
            stderr += &format!("plb: policy=plb-heft ctx=0 tasks={n} executed={n} workers=11\n");
        }
        SmpiOutput {
            success: true,
            stdout: "Computation time (in ms): 12.50\n".into(),
            stderr,
        }
    }

    const TWO: DagCase = DagCase {
        ranks: 2,
        size: 1920,
        nblocks: 2,
    };

    #[test]
    fn a_run_that_executes_every_task_once_passes() {
        let (ms, tasks, gb) = parse(&output(&[1, 3], 2), TWO, "plb-heft", true).unwrap();
        assert_eq!((ms, tasks), (12.5, 4));
        assert!((gb - 1.01).abs() < 1e-9, "{gb}");
    }

    #[test]
    fn a_lost_or_repeated_task_fails() {
        let lost = parse(&output(&[1, 2], 2), TWO, "dmdas", false).unwrap_err();
        assert!(lost.contains("3 tasks executed"), "{lost}");
        let repeated = parse(&output(&[2, 3], 2), TWO, "dmdas", false).unwrap_err();
        assert!(repeated.contains("5 tasks executed"), "{repeated}");
    }

    #[test]
    fn ours_must_have_scheduled_every_rank() {
        let e = parse(&output(&[1, 3], 1), TWO, "plb-heft", true).unwrap_err();
        assert!(e.contains("1 of 2 ranks"), "{e}");
        // Another policy's summaries do not count.
        let e = parse(&output(&[1, 3], 2), TWO, "dada", true).unwrap_err();
        assert!(e.contains("0 of 2 ranks"), "{e}");
    }

    #[test]
    fn a_failed_or_silent_run_fails() {
        let mut o = output(&[1, 3], 2);
        o.success = false;
        assert!(parse(&o, TWO, "plb-heft", true).is_err());
        let mut o = output(&[1, 3], 2);
        o.stdout.clear();
        let e = parse(&o, TWO, "plb-heft", true).unwrap_err();
        assert!(e.contains("Computation time"), "{e}");
    }

    fn row(label: &str, ours: bool, ms: f64) -> DagRow {
        DagRow {
            ranks: 4,
            size: 9600,
            nblocks: 10,
            label: label.into(),
            ours,
            ms,
            tasks: 220,
            expected: 220,
            gb: 1.0,
        }
    }

    #[test]
    fn table_ratios_use_dmdas_and_starpus_best_only() {
        let md = md(&[
            row("dmdas", false, 200.0),
            row("eager", false, 100.0),
            row("plb-heft", true, 50.0),
        ]);
        assert!(md.contains("StarPU's best: eager, 100.0 ms"), "{md}");
        assert!(
            md.contains("| plb-heft | 50.0 | 0.250 | 0.500 | 1.00 |"),
            "{md}"
        );
    }
}
