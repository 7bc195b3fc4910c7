//! Two-level simulated clusters: nodes made of devices, a network between
//! nodes. Read from small text files (`platforms/grenoble.txt` is the
//! paper's Table 1) or generated (`synthetic`). Everything built from it
//! is SIMULATED, never measured (`docs/cluster.md` gives the derivation).
//!
//! # File format
//!
//! One directive per line, fields separated by white space, `#` starts a
//! comment:
//!
//! * `cluster NAME`;
//! * `network GB/S LATENCY_US` — what a node's incoming pivot panels cost;
//! * `device NAME KIND GFLOPS HALF_COLS MEM_GB LINK_GB/S LINK_US LAUNCH_US`
//!   — a device class: `cpu` or `gpu`; `GFLOPS` its achieved dgemm rate
//!   on large slices; `HALF_COLS` the slice width (columns) at which it
//!   reaches half of it; `MEM_GB` device memory (`-`: it works in the
//!   node's memory); `LINK_*` its host link (`-` for a CPU); `LAUNCH_US`
//!   the fixed cost of one kernel call;
//! * `nodes COUNT NAME MEM_GB DEVICE*K [DEVICE*K ...]` — `COUNT` identical
//!   nodes with `K` devices of each class listed and `MEM_GB` of memory.

use std::fmt;

/// Kind of device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
}

/// A device class.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceClass {
    pub name: String,
    pub kind: DeviceKind,
    /// Achieved dgemm GFLOP/s on wide slices.
    pub gflops: f64,
    /// Slice width (columns) at half of `gflops`.
    pub half_cols: f64,
    /// Device memory in GB (`None`: the node's memory).
    pub mem_gb: Option<f64>,
    /// Host link: GB/s and µs per transfer (`None`: host memory).
    pub link: Option<(f64, f64)>,
    /// Fixed cost of a kernel call, µs.
    pub launch_us: f64,
}

/// One node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// `group#i`.
    pub label: String,
    /// Memory in GB.
    pub mem_gb: f64,
    /// Index into [`Cluster::classes`] of each device.
    pub devices: Vec<usize>,
}

/// A simulated two-level cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub name: String,
    /// Network: GB/s and µs per message.
    pub network: (f64, f64),
    pub classes: Vec<DeviceClass>,
    pub nodes: Vec<Node>,
}

/// Why a cluster file was refused: line and reason.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterError {
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ClusterError {}

/// The paper's Table 1 (90 nodes of Grenoble), built in.
pub const GRENOBLE: &str = include_str!("../../../platforms/grenoble.txt");

impl Cluster {
    /// Parses the file format of the module documentation.
    pub fn parse(text: &str) -> Result<Cluster, ClusterError> {
        let mut c = Cluster {
            name: "unnamed".into(),
            network: (1.0, 5.0),
            classes: Vec::new(),
            nodes: Vec::new(),
        };
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |reason: String| ClusterError { line, reason };
            let f: Vec<&str> = raw
                .split('#')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let Some((&d, args)) = f.split_first() else {
                continue;
            };
            let num = |what: &str, s: &str| -> Result<f64, ClusterError> {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| err(format!("{what}: `{s}` is not a number >= 0")))
            };
            let opt = |what: &str, s: &str| -> Result<Option<f64>, ClusterError> {
                if s == "-" {
                    Ok(None)
                } else {
                    num(what, s).map(Some)
                }
            };
            let want = |n: usize| -> Result<(), ClusterError> {
                if args.len() == n {
                    Ok(())
                } else {
                    Err(err(format!("`{d}` takes {n} fields, found {}", args.len())))
                }
            };
            match d {
                "cluster" => {
                    want(1)?;
                    c.name = args[0].to_string();
                }
                "network" => {
                    want(2)?;
                    c.network = (num("network GB/s", args[0])?, num("latency", args[1])?);
                    if c.network.0 <= 0.0 {
                        return Err(err("network GB/s must be > 0".into()));
                    }
                }
                "device" => {
                    want(8)?;
                    let kind = match args[1] {
                        "cpu" => DeviceKind::Cpu,
                        "gpu" => DeviceKind::Gpu,
                        k => return Err(err(format!("kind `{k}`: cpu or gpu"))),
                    };
                    let gflops = num("GFLOPS", args[2])?;
                    if gflops <= 0.0 {
                        return Err(err("GFLOPS must be > 0".into()));
                    }
                    let link = match (opt("link GB/s", args[5])?, opt("link us", args[6])?) {
                        (Some(bw), Some(us)) if bw > 0.0 => Some((bw, us)),
                        (None, None) => None,
                        _ => return Err(err("link: both fields, GB/s > 0, or both `-`".into())),
                    };
                    if c.classes.iter().any(|k| k.name == args[0]) {
                        return Err(err(format!("device `{}` declared twice", args[0])));
                    }
                    c.classes.push(DeviceClass {
                        name: args[0].to_string(),
                        kind,
                        gflops,
                        half_cols: num("half columns", args[3])?,
                        mem_gb: opt("memory GB", args[4])?,
                        link,
                        launch_us: num("launch", args[7])?,
                    });
                }
                "nodes" => {
                    if args.len() < 4 {
                        return Err(err("`nodes COUNT NAME MEM_GB DEVICE*K...`".into()));
                    }
                    let count: usize = args[0]
                        .parse()
                        .map_err(|_| err(format!("count `{}`", args[0])))?;
                    let mem_gb = num("memory GB", args[2])?;
                    let mut devices = Vec::new();
                    for spec in &args[3..] {
                        let (name, k) = spec.split_once('*').unwrap_or((spec, "1"));
                        let k: usize = k
                            .parse()
                            .map_err(|_| err(format!("`{spec}`: DEVICE*COUNT")))?;
                        let class = c
                            .classes
                            .iter()
                            .position(|x| x.name == name)
                            .ok_or_else(|| err(format!("no device `{name}` declared above")))?;
                        devices.extend(std::iter::repeat_n(class, k));
                    }
                    if devices.is_empty() {
                        return Err(err(format!("nodes `{}` have no device", args[1])));
                    }
                    let first = c
                        .nodes
                        .iter()
                        .filter(|n| n.label.starts_with(&format!("{}#", args[1])))
                        .count();
                    for j in 0..count {
                        c.nodes.push(Node {
                            label: format!("{}#{}", args[1], first + j),
                            mem_gb,
                            devices: devices.clone(),
                        });
                    }
                }
                other => return Err(err(format!("unknown directive `{other}`"))),
            }
        }
        if c.nodes.is_empty() {
            return Err(ClusterError {
                line: 0,
                reason: "no `nodes` line".into(),
            });
        }
        Ok(c)
    }

    /// The paper's 90-node Grenoble platform.
    pub fn grenoble() -> Cluster {
        Cluster::parse(GRENOBLE).expect("platforms/grenoble.txt parses (tested)")
    }

    /// `nodes` nodes of `devices` devices each, drawn (seeded) from this
    /// cluster's classes: one GPU in about one node in eight, CPU cores
    /// otherwise, node memory of 8 or 24 GB. For the scaling runs.
    pub fn synthetic(&self, nodes: usize, devices: usize, seed: u64) -> Cluster {
        let mut rng = crate::rng::Rng::new(seed);
        let cpus: Vec<usize> = (0..self.classes.len())
            .filter(|&i| self.classes[i].kind == DeviceKind::Cpu)
            .collect();
        let gpus: Vec<usize> = (0..self.classes.len())
            .filter(|&i| self.classes[i].kind == DeviceKind::Gpu)
            .collect();
        let pick = |rng: &mut crate::rng::Rng, v: &[usize]| v[rng.below(v.len() as u64) as usize];
        let nodes = (0..nodes)
            .map(|i| {
                let gpu = !gpus.is_empty() && rng.below(8) == 0;
                let cpu = pick(&mut rng, &cpus);
                let mut d = vec![cpu; devices];
                if gpu {
                    d[0] = pick(&mut rng, &gpus);
                }
                Node {
                    label: format!("synthetic#{i}"),
                    mem_gb: if rng.below(3) == 0 { 8.0 } else { 24.0 },
                    devices: d,
                }
            })
            .collect();
        Cluster {
            name: format!("synthetic-{}x{devices}", self.nodes.len()),
            network: self.network,
            classes: self.classes.clone(),
            nodes,
        }
    }

    /// Devices in all.
    pub fn devices(&self) -> usize {
        self.nodes.iter().map(|n| n.devices.len()).sum()
    }

    /// Devices of each kind.
    pub fn count(&self, kind: DeviceKind) -> usize {
        self.nodes
            .iter()
            .flat_map(|n| &n.devices)
            .filter(|&&d| self.classes[d].kind == kind)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grenoble_is_table_1() {
        let g = Cluster::grenoble();
        assert_eq!(g.nodes.len(), 90);
        assert_eq!(g.count(DeviceKind::Gpu), 12);
        assert_eq!(g.count(DeviceKind::Cpu), 432);
        let by = |p: &str| g.nodes.iter().filter(|n| n.label.starts_with(p)).count();
        assert_eq!((by("adonis"), by("edel"), by("genepi")), (12, 50, 28));
    }

    #[test]
    fn bad_files_say_where() {
        let e = Cluster::parse("device x cpu 1 1 - - - 1\nnodes 2 a 8 y*2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("no device `y`"), "{e}");
        assert!(Cluster::parse("device x tpu 1 1 - - - 1\n").is_err());
        assert!(Cluster::parse("network 0 1\nnodes 1 a 8 x\n").is_err());
        assert!(Cluster::parse("# nothing\n").is_err());
    }

    #[test]
    fn synthetic_clusters_have_the_size_asked() {
        let s = Cluster::grenoble().synthetic(1000, 8, 3);
        assert_eq!(s.nodes.len(), 1000);
        assert_eq!(s.devices(), 8000);
        assert!(s.count(DeviceKind::Gpu) > 50);
    }
}
