//! The cross-check of our cluster simulator against StarPU-MPI under
//! SimGrid's SMPI (`plb experiment cluster --smpi`): the same blocked
//! multiplication, on the same nodes (`platforms/mirage-cluster.txt`, like
//! StarPU's sampled machine `mirage`), once as a real StarPU-MPI program
//! (`scripts/smpi-mm.c`, owner-computes tiles, StarPU-MPI moving the data,
//! StarPU-SimGrid simulating kernels from the same rates and transfers
//! from its own bus and network models) and once in our simulator (the
//! IDPA's column slices, our transfer and network model). Both SIMULATED.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use plb_core::cluster::cma::Rect;
use plb_core::cluster::hierarchy::idpa;
use plb_core::cluster::platform::{Cluster, DeviceKind};
use plb_core::cluster::sim::SimCluster;
use plb_core::cluster::{Algorithm, LevelConfig, NodePart};

use super::write;

/// The platform both sides simulate.
pub const MIRAGE: &str = include_str!("../../platforms/mirage-cluster.txt");

/// One comparison.
#[derive(Debug, Clone)]
pub struct XRow {
    pub ranks: usize,
    pub grid: u64,
    pub block: u64,
    /// StarPU-MPI under SMPI, simulated seconds.
    pub starpu_s: f64,
    /// Our simulator, simulated seconds, and its compute and
    /// communication parts (G x the slowest node's).
    pub ours_s: f64,
    pub ours_compute_s: f64,
    pub ours_comm_s: f64,
}

/// The StarPU 1.4 prefix built with SimGrid and StarPU-MPI over SMPI.
fn prefix() -> PathBuf {
    let cache = std::env::var_os("PLB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/plb")
        });
    cache.join("starpu-1.4.10/smpi")
}

fn samples() -> PathBuf {
    prefix().join("../../src/starpu-1.4.10+dfsg/tools/perfmodels/sampling")
}

fn build(out: &Path) -> Result<PathBuf, String> {
    let p = prefix();
    if !p.join(".plb-built").is_file() {
        return Err(format!(
            "no StarPU-MPI-on-SMPI build in {}: run `bash scripts/starpu14.sh smpi` first (about 4 minutes)",
            p.display()
        ));
    }
    let flags = Process::new("pkg-config")
        .args(["--static", "--cflags", "--libs", "starpumpi-1.4"])
        .env("PKG_CONFIG_PATH", p.join("lib/pkgconfig"))
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    let flags = String::from_utf8_lossy(&flags.stdout).to_string();
    let prog = out.join("smpi-mm");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/smpi-mm.c");
    let st = Process::new("smpicc")
        .args(["-O2", "-o"])
        .arg(&prog)
        .arg(&src)
        .args(flags.split_whitespace())
        .arg("-lm")
        .output()
        .map_err(|e| format!("smpicc (libsimgrid-dev): {e}"))?;
    if !st.status.success() {
        return Err(format!(
            "smpicc failed:\n{}",
            String::from_utf8_lossy(&st.stderr)
        ));
    }
    Ok(prog)
}

/// `q = s²` equal rectangles, column by column (as the C program and the
/// CMA arrange equal areas).
fn grid_rects(q: usize, g: u64) -> Vec<Rect> {
    let s = (q as f64).sqrt().round() as u64;
    let side = g / s;
    (0..q as u64)
        .map(|r| Rect {
            row: (r % s) * side,
            col: (r / s) * side,
            rows: side,
            cols: side,
        })
        .collect()
}

fn ours(cluster: &Cluster, q: usize, g: u64, b: u64) -> Result<(f64, f64, f64), String> {
    let mut c = cluster.clone();
    c.nodes.truncate(q);
    let mut sim = SimCluster::new(c, b, 0.0, 1);
    let mut parts = Vec::new();
    for (i, r) in grid_rects(q, g).into_iter().enumerate() {
        let (o, _) = idpa(
            &mut sim,
            i,
            r.rows * b,
            r.cols * b,
            Algorithm::Fpm,
            LevelConfig::default(),
        )
        .map_err(|e| e.to_string())?;
        parts.push(NodePart {
            rect: r,
            cols: o.units,
            time: o.time,
        });
    }
    let compute = parts
        .iter()
        .enumerate()
        .map(|(i, p)| sim.node_time(i, p.rect.rows * b, &p.cols))
        .fold(0.0, f64::max);
    let comm = parts
        .iter()
        .map(|p| sim.comm_time(&p.rect))
        .fold(0.0, f64::max);
    Ok((sim.app_time(g, &parts), g as f64 * compute, g as f64 * comm))
}

fn rate(cluster: &Cluster, kind: DeviceKind) -> Result<(f64, f64), String> {
    cluster
        .classes
        .iter()
        .find(|c| c.kind == kind)
        .map(|c| (c.gflops, c.launch_us))
        .ok_or_else(|| "mirage-cluster.txt lacks a device kind".to_string())
}

/// Runs the comparison for each number of ranks (perfect squares).
pub fn run(out: &Path, ranks: &[usize], g: u64, b: u64) -> Result<Vec<XRow>, String> {
    let dir = out.join("smpi");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prog = build(&dir)?;
    let cluster = Cluster::parse(MIRAGE).map_err(|e| format!("mirage-cluster.txt: {e}"))?;
    let (cpu, launch) = rate(&cluster, DeviceKind::Cpu)?;
    let (gpu, _) = rate(&cluster, DeviceKind::Gpu)?;
    let (bw, lat) = cluster.network;
    let mut rows = Vec::new();
    for &q in ranks {
        let xml = dir.join(format!("cluster-{q}.xml"));
        write(
            &xml,
            &format!(
                "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM 'https://simgrid.org/simgrid.dtd'>\n<platform version=\"4.1\">\n<zone id=\"AS0\" routing=\"Full\">\n  <cluster id=\"c\" prefix=\"node\" suffix=\"\" radical=\"1-{q}\" speed=\"1Gf\" bw=\"{bw}GBps\" lat=\"{lat}us\" bb_bw=\"1000GBps\" bb_lat=\"1us\"/>\n</zone>\n</platform>\n"
            ),
        )?;
        let hosts = dir.join(format!("hosts-{q}"));
        write(
            &hosts,
            &(1..=q).map(|i| format!("node{i}\n")).collect::<String>(),
        )?;
        let home = dir.join(format!("home-{q}"));
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        eprintln!(
            "cluster: SIMULATED StarPU-MPI under SMPI, {q} mirage nodes, G = {g}, b = {b} (a minute or two)"
        );
        let o = Process::new(prefix().join("bin/starpu_smpirun"))
            .args(["-np", &q.to_string(), "-platform"])
            .arg(&xml)
            .arg("-hostfile")
            .arg(&hosts)
            .arg(&prog)
            .args([
                g.to_string(),
                b.to_string(),
                cpu.to_string(),
                gpu.to_string(),
                launch.to_string(),
            ])
            .env("STARPU_PERF_MODEL_DIR", samples())
            .env("STARPU_HOSTNAME", "mirage")
            .env("STARPU_HOME", &home)
            .env("STARPU_SCHED", "dmda")
            .env("STARPU_SILENT", "1")
            .env_remove("LD_PRELOAD")
            .output()
            .map_err(|e| format!("starpu_smpirun: {e}"))?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let starpu_s = text
            .lines()
            .find(|l| l.starts_with("smpi-mm:"))
            .and_then(|l| crate::apps::field(l, "makespan_s"))
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| {
                format!(
                    "starpu_smpirun -np {q} printed no result:\n{text}{}",
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .rev()
                        .take(15)
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            })?;
        let (ours_s, ours_compute_s, ours_comm_s) = ours(&cluster, q, g, b)?;
        rows.push(XRow {
            ranks: q,
            grid: g,
            block: b,
            starpu_s,
            ours_s,
            ours_compute_s,
            ours_comm_s,
        });
    }
    Ok(rows)
}

/// Markdown table of the comparison.
pub fn md(rows: &[XRow]) -> String {
    let mut s = String::from(
        "SIMULATED both sides: StarPU-MPI under SimGrid's SMPI (scripts/smpi-mm.c, StarPU 1.4.10 built with `bash scripts/starpu14.sh smpi`, dmda inside each node) against our simulator, on nodes like StarPU's sampled `mirage` (platforms/mirage-cluster.txt: 9 CPU + 3 M2070 workers each), equal square sub-matrices.\n\n| ranks | N | b | StarPU-MPI/SMPI s | ours s | ours / StarPU | ours: compute s | ours: communication s |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} | {:.3} | {:.2} | {:.3} | {:.3} |",
            r.ranks,
            r.grid * r.block,
            r.block,
            r.starpu_s,
            r.ours_s,
            r.ours_s / r.starpu_s,
            r.ours_compute_s,
            r.ours_comm_s
        );
    }
    s
}
