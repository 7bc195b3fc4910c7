//! The SIMULATED half of `plb experiment cluster`: the paper's Fig. 5 on
//! its 90-node Grenoble platform (every partitioning algorithm, speed of
//! the multiplication against N) and the cost of the partitioning as the
//! cluster grows to 1,000 nodes of 8 devices.

use std::fmt::Write as _;
use std::time::Instant;

use plb_core::cluster::cma;
use plb_core::cluster::platform::Cluster;
use plb_core::cluster::sim::SimCluster;
use plb_core::cluster::{Algorithm, HierConfig, LevelConfig, inpa};

/// Block size of the simulated runs (the paper's b = 128).
pub const BLOCK: u64 = 128;
/// Relative noise on every simulated kernel measurement.
pub const NOISE: f64 = 0.01;

/// One simulated run.
#[derive(Debug, Clone)]
pub struct SimRow {
    pub algo: Algorithm,
    pub n: u64,
    /// GFLOP/s of the multiplication (2N³ / simulated time).
    pub gflops: f64,
    /// Upper bound: every device at its full rate, no communication.
    pub bound_gflops: f64,
    pub rounds: usize,
    pub device_rounds: usize,
    pub converged: bool,
    pub imbalance: f64,
    /// Simulated seconds of benchmark runs during the partitioning.
    pub bench_s: f64,
    /// Σ (m_i + n_i) of the CMA arrangement and of 1-D strips.
    pub h_cma: u64,
    pub h_strips: Option<u64>,
}

fn level() -> LevelConfig {
    LevelConfig {
        eps: 0.05,
        max_rounds: 20,
    }
}

/// One algorithm at size `n` on `cluster`.
pub fn run_one(cluster: &Cluster, algo: Algorithm, n: u64, seed: u64) -> Result<SimRow, String> {
    let grid = n / BLOCK;
    let mut sim = SimCluster::new(cluster.clone(), BLOCK, NOISE, seed);
    let cfg = HierConfig {
        algo,
        grid,
        block: BLOCK,
        nodes: level(),
        devices: level(),
    };
    let out = inpa(&mut sim, &cfg).map_err(|e| format!("{algo} at N={n}: {e}"))?;
    let t = sim.app_time(grid, &out.parts);
    let flop = 2.0 * (n as f64).powi(3);
    let rects: Vec<cma::Rect> = out.parts.iter().map(|p| p.rect).collect();
    let areas: Vec<u64> = rects.iter().map(cma::Rect::area).collect();
    Ok(SimRow {
        algo,
        n,
        gflops: flop / t / 1e9,
        bound_gflops: sim.bound_gflops(),
        rounds: out.node_rounds,
        device_rounds: out.device_rounds,
        converged: out.converged,
        imbalance: out.imbalance,
        bench_s: out.bench_s,
        h_cma: cma::half_perimeters(&rects),
        h_strips: cma::strips(&areas, grid)
            .ok()
            .map(|s| cma::half_perimeters(&s)),
    })
}

/// Fig. 5: every algorithm at every N (progress on stderr).
pub fn figure5(sizes: &[u64]) -> Result<Vec<SimRow>, String> {
    let cluster = Cluster::grenoble();
    let mut rows = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        eprintln!(
            "cluster: SIMULATED Grenoble (90 nodes), N = {n} ({}/{})",
            i + 1,
            sizes.len()
        );
        for algo in Algorithm::ALL {
            rows.push(run_one(&cluster, algo, n, 1 + i as u64)?);
        }
    }
    Ok(rows)
}

/// The partitioning's cost at one cluster size.
#[derive(Debug, Clone)]
pub struct ScaleRow {
    pub nodes: usize,
    pub devices: usize,
    pub grid: u64,
    pub rounds: usize,
    pub device_rounds: usize,
    /// Host seconds the FPM partitioning's computation took (the
    /// simulator's kernel evaluations included).
    pub host_s: f64,
    pub gflops: f64,
}

/// FPM partitioning on synthetic clusters of `sizes` nodes × 8 devices
/// (grid `40·√nodes` blocks a side: about 1,600 blocks per node).
pub fn scaling(sizes: &[usize]) -> Result<Vec<ScaleRow>, String> {
    let base = Cluster::grenoble();
    let mut rows = Vec::new();
    for &q in sizes {
        let cluster = base.synthetic(q, 8, 7);
        let grid = (40.0 * (q as f64).sqrt()).round() as u64;
        let mut sim = SimCluster::new(cluster, BLOCK, NOISE, 3);
        let cfg = HierConfig {
            algo: Algorithm::Fpm,
            grid,
            block: BLOCK,
            nodes: level(),
            devices: level(),
        };
        let t = Instant::now();
        let out = inpa(&mut sim, &cfg).map_err(|e| format!("{q} nodes: {e}"))?;
        let host_s = t.elapsed().as_secs_f64();
        let n = grid * BLOCK;
        let app = sim.app_time(grid, &out.parts);
        eprintln!(
            "cluster: SIMULATED {q} nodes x 8 devices: FPM partitioning in {host_s:.2} s of host time, {} rounds",
            out.node_rounds
        );
        rows.push(ScaleRow {
            nodes: q,
            devices: q * 8,
            grid,
            rounds: out.node_rounds,
            device_rounds: out.device_rounds,
            host_s,
            gflops: 2.0 * (n as f64).powi(3) / app / 1e9,
        });
    }
    Ok(rows)
}

/// CSV of the Fig. 5 rows.
pub fn figure5_csv(rows: &[SimRow]) -> String {
    let mut s = String::from(
        "label,algo,n,gflops,bound_gflops,rounds,device_rounds,converged,imbalance,bench_s,h_cma,h_strips\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "SIMULATED,{},{},{:.1},{:.1},{},{},{},{:.4},{:.3},{},{}",
            r.algo,
            r.n,
            r.gflops,
            r.bound_gflops,
            r.rounds,
            r.device_rounds,
            r.converged,
            r.imbalance,
            r.bench_s,
            r.h_cma,
            r.h_strips.map_or(String::new(), |h| h.to_string())
        );
    }
    s
}

/// `intro`, then the header of a table with a column N, one per algorithm
/// and `extra` columns.
fn algorithm_table(intro: &str, extra: &[&str]) -> String {
    let mut s = format!("{intro}\n\n| N |");
    for a in Algorithm::ALL {
        let _ = write!(s, " {a} |");
    }
    for e in extra {
        let _ = write!(s, " {e} |");
    }
    s.push_str("\n|---|");
    for _ in 0..Algorithm::ALL.len() + extra.len() {
        s.push_str("---|");
    }
    s.push('\n');
    s
}

/// Markdown table: GFLOP/s per algorithm (columns) and N (rows).
pub fn figure5_md(rows: &[SimRow]) -> String {
    let mut s = algorithm_table(
        "SIMULATED (platforms/grenoble.txt, b = 128, 1 % measurement noise): GFLOP/s of the multiplication with each algorithm's final partition; rounds of the INPA in brackets (* = converged within 5 %); `bound`: every device at its full dgemm rate, no communication, no memory limit (an upper bound; the percentage is FPM's share of it).",
        &["bound (FPM %)", "H CMA / strips (FPM)"],
    );
    let mut ns: Vec<u64> = rows.iter().map(|r| r.n).collect();
    ns.dedup();
    for n in ns {
        let _ = write!(s, "| {n} |");
        let mut bound = (0.0, 0.0);
        let mut h = String::new();
        for a in Algorithm::ALL {
            if let Some(r) = rows.iter().find(|r| r.n == n && r.algo == a) {
                let _ = write!(
                    s,
                    " {:.0} ({}{}) |",
                    r.gflops,
                    r.rounds,
                    if r.converged { "*" } else { "" }
                );
                if a == Algorithm::Fpm {
                    bound = (r.bound_gflops, 100.0 * r.gflops / r.bound_gflops);
                    h = format!(
                        "{} / {}",
                        r.h_cma,
                        r.h_strips.map_or("-".into(), |x| x.to_string())
                    );
                }
            } else {
                s.push_str(" - |");
            }
        }
        let _ = writeln!(s, " {:.0} ({:.0} %) | {h} |", bound.0, bound.1);
    }
    s
}

/// Markdown table: simulated seconds of benchmark runs the partitioning
/// took, per algorithm and N (what the rounds cost before the
/// multiplication starts).
pub fn partition_cost_md(rows: &[SimRow]) -> String {
    let mut s = algorithm_table(
        "SIMULATED seconds of kernel benchmarks during the partitioning (per INPA round the slowest node's IDPA), and the multiplication's own simulated seconds (FPM's split) for scale.",
        &["multiplication (fpm-hier)"],
    );
    let mut ns: Vec<u64> = rows.iter().map(|r| r.n).collect();
    ns.dedup();
    for n in ns {
        let _ = write!(s, "| {n} |");
        let mut app = f64::NAN;
        for a in Algorithm::ALL {
            match rows.iter().find(|r| r.n == n && r.algo == a) {
                Some(r) => {
                    let _ = write!(s, " {:.1} |", r.bench_s);
                    if a == Algorithm::Fpm {
                        app = 2.0 * (n as f64).powi(3) / (r.gflops * 1e9);
                    }
                }
                None => s.push_str(" - |"),
            }
        }
        let _ = writeln!(s, " {app:.0} |");
    }
    s
}

/// Markdown table of the scaling rows.
pub fn scaling_md(rows: &[ScaleRow]) -> String {
    let mut s = String::from(
        "SIMULATED synthetic clusters (Grenoble's device classes, 8 devices a node, about one node in eight with a GPU): cost of the FPM partitioning in host time (the simulator's kernel evaluations included).\n\n| nodes | devices | N/b | INPA rounds | IDPA rounds (all nodes) | host s | host ms per INPA round | GFLOP/s |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.1} | {:.0} |",
            r.nodes,
            r.devices,
            r.grid,
            r.rounds,
            r.device_rounds,
            r.host_s,
            1e3 * r.host_s / r.rounds.max(1) as f64,
            r.gflops
        );
    }
    s
}
