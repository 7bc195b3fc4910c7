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
use plb_core::cluster::{HierConfig, inpa};

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

/// StarPU 1.4.10's unpacked source, beside the builds.
pub(super) fn starpu_source() -> PathBuf {
    prefix().join("../../src/starpu-1.4.10+dfsg")
}

fn samples() -> PathBuf {
    starpu_source().join("tools/perfmodels/sampling")
}

/// Compiles `scripts/<src>` with `smpicc` into `out/<name>` against the
/// SMPI StarPU (static).
fn smpicc(out: &Path, src: &str, name: &str) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(src);
    smpicc_sources(out, &[src], name, &[], &[])
}

/// Compiles `sources` with `smpicc` into `out/<name>` against the SMPI
/// StarPU (static), with `extra` arguments before StarPU's flags and
/// `after` after them.
pub(super) fn smpicc_sources(
    out: &Path,
    sources: &[PathBuf],
    name: &str,
    extra: &[String],
    after: &[String],
) -> Result<PathBuf, String> {
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
    let prog = out.join(name);
    let st = Process::new("smpicc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&prog)
        .args(sources)
        .args(extra)
        // (1.4's pkg-config quotes this one for a shell; unused here.)
        .args(
            flags
                .split_whitespace()
                .filter(|f| !f.starts_with("-DSTARPU_OPENCL_DATADIR")),
        )
        .args(after)
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

/// SimGrid's platform of `q` nodes on one cluster network (GB/s, µs) and
/// its host file, in `dir`.
pub(super) fn platform_files(
    dir: &Path,
    name: &str,
    q: usize,
    network: (f64, f64),
) -> Result<(PathBuf, PathBuf), String> {
    let (bw, lat) = network;
    let xml = dir.join(format!("{name}-{q}.xml"));
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
    Ok((xml, hosts))
}

/// What one `starpu_smpirun` printed.
pub(super) struct SmpiOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl SmpiOutput {
    /// The last lines of stderr, without SimGrid's noise.
    pub fn stderr_tail(&self, n: usize) -> String {
        let tail: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.contains("Probable bug") && !l.contains("[xbt_cfg/INFO]"))
            .rev()
            .take(n)
            .collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// `starpu_smpirun` of `prog args` on `q` ranks of `platform`, StarPU on
/// the sampled `mirage` with dmda and its own `home`; `env`: more
/// variables, which override those.
pub(super) fn smpirun_output(
    q: usize,
    (xml, hosts): &(PathBuf, PathBuf),
    home: &Path,
    prog: &Path,
    args: &[String],
    env: &[(&str, String)],
) -> Result<SmpiOutput, String> {
    std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    let o = Process::new(prefix().join("bin/starpu_smpirun"))
        .args(["-np", &q.to_string(), "-platform"])
        .arg(xml)
        .arg("-hostfile")
        .arg(hosts)
        .arg(prog)
        .args(args)
        .env("STARPU_PERF_MODEL_DIR", samples())
        .env("STARPU_HOSTNAME", "mirage")
        .env("STARPU_HOME", home)
        .env("STARPU_SCHED", "dmda")
        .env("STARPU_SILENT", "1")
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .env_remove("LD_PRELOAD")
        .output()
        .map_err(|e| format!("starpu_smpirun: {e}"))?;
    Ok(SmpiOutput {
        success: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).to_string(),
        stderr: String::from_utf8_lossy(&o.stderr).to_string(),
    })
}

/// [`smpirun_output`], then the first stdout line starting with `tag`, or
/// an error with the end of stderr.
fn smpirun(
    q: usize,
    files: &(PathBuf, PathBuf),
    home: &Path,
    prog: &Path,
    args: &[String],
    env: &[(&str, String)],
    tag: &str,
) -> Result<String, String> {
    let o = smpirun_output(q, files, home, prog, args, env)?;
    match o.stdout.lines().find(|l| l.starts_with(tag)) {
        Some(l) => Ok(l.to_string()),
        None => Err(format!(
            "starpu_smpirun -np {q} {} printed no result:\n{}{}",
            prog.display(),
            o.stdout,
            o.stderr_tail(15)
        )),
    }
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
    let prog = smpicc(&dir, "smpi-mm.c", "smpi-mm")?;
    let cluster = Cluster::parse(MIRAGE).map_err(|e| format!("mirage-cluster.txt: {e}"))?;
    let (cpu, launch) = rate(&cluster, DeviceKind::Cpu)?;
    let (gpu, _) = rate(&cluster, DeviceKind::Gpu)?;
    let mut rows = Vec::new();
    for &q in ranks {
        let files = platform_files(&dir, "cluster", q, cluster.network)?;
        eprintln!(
            "cluster: SIMULATED StarPU-MPI under SMPI, {q} mirage nodes, G = {g}, b = {b} (a minute or two)"
        );
        let args = [g, b].map(|v| v.to_string());
        let args = [&args[..], &[cpu, gpu, launch].map(|v| v.to_string())].concat();
        let line = smpirun(
            q,
            &files,
            &dir.join(format!("home-{q}")),
            &prog,
            &args,
            &[],
            "smpi-mm:",
        )?;
        let starpu_s = crate::apps::field(&line, "makespan_s")
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("no makespan_s in `{line}`"))?;
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

/// A platform with more GPUs on some nodes than on others (16 nodes, the
/// first 4 one of each kind).
pub const MIRAGE_MIXED: &str = include_str!("../../platforms/mirage-mixed.txt");

/// The paper's 90-node platform (Table 1).
pub const GRENOBLE: &str = include_str!("../../platforms/grenoble.txt");

/// Our partitioning under SMPI against our simulator: one platform, rank
/// count and algorithm.
#[derive(Debug, Clone)]
pub struct DistRow {
    pub platform: String,
    pub ranks: usize,
    pub grid: u64,
    pub block: u64,
    pub algorithm: Algorithm,
    /// Tiles per rank, from our partitioning under SMPI.
    pub smpi_areas: Vec<u64>,
    /// Simulated seconds of the partitioning and of the multiplication.
    pub smpi_partition_s: f64,
    pub smpi_s: f64,
    /// Tiles the ranks received (counted from the ownership).
    pub smpi_tiles: u64,
    /// Our simulator on the same platform: areas, seconds, tiles.
    pub sim_areas: Vec<u64>,
    pub sim_s: f64,
    pub sim_tiles: u64,
}

/// The link arguments that put our static library (built against the
/// SMPI StarPU by scripts/setup.sh --all: `PLB_EMBEDDED=1 cargo rustc
/// --crate-type staticlib`) into an SMPI program: before StarPU's flags,
/// and after them. StarPU's calls to its policy lookup from its other
/// objects go to ours (`-Wl,--wrap`, policy/src/starpu/interpose.rs), so
/// `STARPU_SCHED` can name our policies; our library needs StarPU and
/// StarPU needs our wrapper, hence the group around both.
pub(super) fn embedded_link_args() -> Result<(Vec<String>, Vec<String>), String> {
    let lib =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/starpu14-smpi/release/libstarpu_plb.a");
    if !lib.is_file() {
        return Err(format!(
            "{} is missing: bash scripts/setup.sh --all builds our library for StarPU-MPI under SMPI",
            lib.display()
        ));
    }
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/include");
    let mut before = vec![
        format!("-I{}", include.display()),
        "-Wl,--wrap=_starpu_select_sched_policy".into(),
        "-Wl,--start-group".into(),
        lib.display().to_string(),
    ];
    // What our static library itself links (rustc --print
    // native-static-libs).
    before.extend(["-lipopt", "-lstdc++", "-lgcc_s", "-lutil", "-ldl"].map(String::from));
    Ok((before, vec!["-Wl,--end-group".into()]))
}

/// `scripts/smpi-dist-mm.c` linked with our static library.
fn build_dist(out: &Path) -> Result<PathBuf, String> {
    let (before, after) = embedded_link_args()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/smpi-dist-mm.c");
    smpicc_sources(out, &[src], "smpi-dist-mm", &before, &after)
}

/// Tiles each rank receives when rank `r` owns `rects[r]` of a `g x g`
/// grid: `A(i, k)` of its rows and `B(k, j)` of its columns owned by
/// another rank, each once; summed over the ranks.
pub fn received_tiles(rects: &[Rect], g: u64) -> u64 {
    let owner = |i: u64, j: u64| {
        rects.iter().position(|r| {
            (r.row..r.row + r.rows).contains(&i) && (r.col..r.col + r.cols).contains(&j)
        })
    };
    let mut total = 0;
    for (me, r) in rects.iter().enumerate() {
        for k in 0..g {
            total += (r.row..r.row + r.rows)
                .filter(|&i| owner(i, k) != Some(me))
                .count() as u64;
            total += (r.col..r.col + r.cols)
                .filter(|&j| owner(k, j) != Some(me))
                .count() as u64;
        }
    }
    total
}

/// Each node's `NCPU:NCUDA:CPU_GFLOPS:GPU_GFLOPS` for the C program, and
/// the most CPU and CUDA workers of any node.
fn node_specs(cluster: &Cluster) -> Result<(String, usize, usize), String> {
    let mut specs = Vec::new();
    let (mut max_cpu, mut max_gpu) = (0, 0);
    for n in &cluster.nodes {
        let kinds: Vec<&plb_core::cluster::platform::DeviceClass> =
            n.devices.iter().map(|&d| &cluster.classes[d]).collect();
        let rate = |k: DeviceKind| -> Result<f64, String> {
            let mut r = kinds.iter().filter(|c| c.kind == k).map(|c| c.gflops);
            let first = r.next().unwrap_or(1.0);
            if r.any(|x| x != first) {
                return Err(format!(
                    "node {}: devices of one kind at different rates",
                    n.label
                ));
            }
            Ok(first)
        };
        let ncpu = kinds.iter().filter(|c| c.kind == DeviceKind::Cpu).count();
        let ngpu = kinds.len() - ncpu;
        max_cpu = max_cpu.max(ncpu);
        max_gpu = max_gpu.max(ngpu);
        specs.push(format!(
            "{ncpu}:{ngpu}:{}:{}",
            rate(DeviceKind::Cpu)?,
            rate(DeviceKind::Gpu)?
        ));
    }
    Ok((specs.join(","), max_cpu, max_gpu))
}

/// Our simulator on `cluster`'s first `q` nodes with `algo`: areas,
/// seconds of the multiplication, tiles received.
fn simulated_partition(
    cluster: &Cluster,
    q: usize,
    g: u64,
    b: u64,
    algo: Algorithm,
) -> Result<(Vec<u64>, f64, u64), String> {
    let mut c = cluster.clone();
    c.nodes.truncate(q);
    let mut sim = SimCluster::new(c, b, 0.0, 1);
    let cfg = HierConfig {
        algo,
        grid: g,
        block: b,
        nodes: LevelConfig::default(),
        devices: LevelConfig::default(),
    };
    let out = inpa(&mut sim, &cfg).map_err(|e| e.to_string())?;
    let rects: Vec<Rect> = out.parts.iter().map(|p| p.rect).collect();
    Ok((
        rects.iter().map(Rect::area).collect(),
        sim.app_time(g, &out.parts),
        received_tiles(&rects, g),
    ))
}

/// One case of [`run_dist`]: a platform's first `ranks` nodes, `grid` x
/// `grid` tiles of `block` x `block`.
#[derive(Debug, Clone, Copy)]
pub struct DistCase {
    pub name: &'static str,
    pub platform: &'static str,
    pub ranks: usize,
    pub grid: u64,
    pub block: u64,
}

/// Our partitioning (the C API, plb-core's protocol) under SMPI on each
/// case with each algorithm, and our simulator on the same nodes.
pub fn run_dist(
    out: &Path,
    cases: &[DistCase],
    algos: &[Algorithm],
) -> Result<Vec<DistRow>, String> {
    let dir = out.join("smpi-dist");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prog = build_dist(&dir)?;
    let mut rows = Vec::new();
    for c in cases {
        let (name, text, q, g, b) = (c.name, c.platform, c.ranks, c.grid, c.block);
        let mut cluster = Cluster::parse(text).map_err(|e| format!("{name}: {e}"))?;
        if cluster.nodes.len() < q {
            return Err(format!("{name} has {} nodes, not {q}", cluster.nodes.len()));
        }
        cluster.nodes.truncate(q);
        let (specs, max_cpu, max_gpu) = node_specs(&cluster)?;
        let launch = rate(&cluster, DeviceKind::Cpu)?.1;
        // Grenoble's nodes have at most 8 cores and 1 GPU, mirage's 12 and
        // 3: every node is a part of one sampled mirage (its bus model).
        let files = platform_files(&dir, name, q, cluster.network)?;
        for &algo in algos {
            eprintln!(
                "cluster: SIMULATED our partitioning ({algo}) under SMPI, {q} nodes of {name}, G = {g}, b = {b}"
            );
            let args = [
                g.to_string(),
                b.to_string(),
                launch.to_string(),
                specs.clone(),
                algo.name().to_string(),
            ];
            let env = [
                ("STARPU_NCPU", max_cpu.to_string()),
                ("STARPU_NCUDA", max_gpu.to_string()),
                ("STARPU_NOPENCL", "0".to_string()),
            ];
            let home = dir.join(format!("home-{name}-{q}-{g}-{algo}"));
            let line = smpirun(q, &files, &home, &prog, &args, &env, "smpi-dist-mm:")?;
            let line = line.as_str();
            let num = |k: &str| -> Result<f64, String> {
                crate::apps::field(line, k)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("no {k} in `{line}`"))
            };
            let smpi_areas: Vec<u64> = crate::apps::field(line, "areas")
                .map(|v| {
                    v.trim_matches(['[', ']'])
                        .split(',')
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            let (sim_areas, sim_s, sim_tiles) = simulated_partition(&cluster, q, g, b, algo)?;
            rows.push(DistRow {
                platform: name.to_string(),
                ranks: q,
                grid: g,
                block: b,
                algorithm: algo,
                smpi_areas,
                smpi_partition_s: num("partition_s")?,
                smpi_s: num("makespan_s")?,
                smpi_tiles: num("net_tiles")? as u64,
                sim_areas,
                sim_s,
                sim_tiles,
            });
        }
    }
    Ok(rows)
}

/// CSV of [`run_dist`]'s rows.
pub fn dist_csv(rows: &[DistRow]) -> String {
    let mut s = String::from(
        "platform,ranks,n,b,algorithm,smpi_areas,smpi_partition_s,smpi_makespan_s,smpi_tiles_received,sim_areas,sim_makespan_s,sim_tiles_received\n",
    );
    let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{:.6},{:.6},{},{},{:.6},{}",
            r.platform,
            r.ranks,
            r.grid * r.block,
            r.block,
            r.algorithm,
            join(&r.smpi_areas),
            r.smpi_partition_s,
            r.smpi_s,
            r.smpi_tiles,
            join(&r.sim_areas),
            r.sim_s,
            r.sim_tiles
        );
    }
    s
}

/// Markdown table of [`run_dist`]'s rows, with each algorithm's makespan
/// against the even split's (`homogeneous`) and single-CPM's of its case.
pub fn dist_md(rows: &[DistRow]) -> String {
    let mut s = String::from(
        "SIMULATED both sides. SMPI: our partitioning, the real code (plb_dist_partition of policy/include/plb_distributed.h, linked statically with StarPU 1.4.10 for SMPI), benchmarking simulated pivot steps on each rank's StarPU workers, then scripts/smpi-dist-mm.c's owner-computes multiplication with StarPU-MPI moving the tiles and dmda inside each node. Ours: the same algorithm in our two-level simulator (core/src/cluster/sim.rs) on the same nodes. Tiles received: counted from the ownership (each remote tile once per rank).\n\n| platform | ranks | N | algorithm | SMPI areas | SMPI partitioning s | SMPI multiplication s | / even split | / single-CPM | tiles received | ours areas | ours s | ours / SMPI |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let base = |a: Algorithm| {
            rows.iter()
                .find(|x| x.platform == r.platform && x.ranks == r.ranks && x.algorithm == a)
                .map_or("-".to_string(), |x| format!("{:.2}", r.smpi_s / x.smpi_s))
        };
        let areas = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.3} | {} | {} | {} | {} | {:.3} | {:.2} |",
            r.platform,
            r.ranks,
            r.grid * r.block,
            r.algorithm,
            areas(&r.smpi_areas),
            r.smpi_partition_s,
            r.smpi_s,
            base(Algorithm::Homogeneous),
            base(Algorithm::SingleCpm),
            r.smpi_tiles,
            areas(&r.sim_areas),
            r.sim_s,
            r.sim_s / r.smpi_s
        );
    }
    s
}
