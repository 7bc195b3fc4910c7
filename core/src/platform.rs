//! Simulated platforms: processing-unit classes read from small text files
//! (`platforms/*.txt`), the papers' machines built in, and seeded synthetic
//! clusters of up to 10,000 PUs and more. A platform says what the hardware
//! is (peak compute, memory bandwidth, links, fixed costs); what an
//! application makes of it is [`crate::workload`]. Everything built from it
//! is simulated, never measured (`docs/simulator.md`).
//!
//! # File format
//!
//! One directive per line, fields separated by white space, `#` starts a
//! comment:
//!
//! * `platform NAME` — the platform's name (optional);
//! * `home MACHINE` — the machine that holds the data (optional; without
//!   it no PU pays the network);
//! * `network GB/S LATENCY_US` — the link between machines, paid (after
//!   the PU's own link) by every PU not on the home machine;
//! * `pu MACHINE NAME KIND COUNT CORES GHZ FLOP/CYCLE MEM_GB/S LINK_GB/S
//!   LINK_US LAUNCH_US` — `COUNT` identical PUs of kind `cpu`, `gpu` or
//!   `phi`; peak FP32 GFLOP/s = `CORES · GHZ · FLOP/CYCLE`; `MEM_GB/S` the
//!   device memory bandwidth; `LINK_*` the host↔device link (`-` for both:
//!   the PU works in host memory); `LAUNCH_US` the fixed cost of any block;
//! * `noise MACHINE NAME AMPLITUDE` — relative uniform noise on those PUs'
//!   compute times (`*` matches any machine or name);
//! * `change MACHINE NAME AT_S FACTOR` — from simulated time `AT_S` on,
//!   those PUs' compute times are multiplied by `FACTOR` (a competing load;
//!   several per PU allowed, the latest started applies);
//! * `power MACHINE NAME IDLE_W BUSY_W` — those PUs' idle and busy watts,
//!   the input of MODELLED energy ([`crate::coexec`]).

use std::fmt;

use crate::balance::sim::SpeedChange;
use crate::coexec::Power;
use crate::rng::Rng;

/// Kind of processing unit (sets the occupancy a block needs and the
/// efficiency tables of [`crate::workload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PuKind {
    /// A multicore CPU, all its cores as one PU.
    Cpu,
    /// A GPU.
    Gpu,
    /// A Xeon Phi coprocessor.
    Phi,
}

impl PuKind {
    /// The name used in platform files.
    pub fn name(self) -> &'static str {
        match self {
            PuKind::Cpu => "cpu",
            PuKind::Gpu => "gpu",
            PuKind::Phi => "phi",
        }
    }

    fn parse(s: &str) -> Option<PuKind> {
        match s {
            "cpu" => Some(PuKind::Cpu),
            "gpu" => Some(PuKind::Gpu),
            "phi" => Some(PuKind::Phi),
            _ => None,
        }
    }

    /// Independent threads in flight per core that fill the device: CPU 2
    /// (hyper-threads), GPU 8 (warps resident per core to hide memory
    /// latency), Xeon Phi 4 (hardware threads per core). Assumptions,
    /// `docs/simulator.md`.
    pub fn threads_per_core(self) -> f64 {
        match self {
            PuKind::Cpu => 2.0,
            PuKind::Gpu => 8.0,
            PuKind::Phi => 4.0,
        }
    }
}

/// A data link: achieved bandwidth and per-message latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Gigabytes (1e9 bytes) per second.
    pub gb_s: f64,
    /// Microseconds per block.
    pub latency_us: f64,
}

impl Link {
    /// Two links one after the other (store and forward): latencies add,
    /// transfer times add.
    pub fn then(self, other: Link) -> Link {
        Link {
            gb_s: 1.0 / (1.0 / self.gb_s + 1.0 / other.gb_s),
            latency_us: self.latency_us + other.latency_us,
        }
    }
}

/// `count` identical PUs.
#[derive(Debug, Clone, PartialEq)]
pub struct PuClass {
    /// Machine the PUs are in.
    pub machine: String,
    /// Device name.
    pub name: String,
    /// Kind of device.
    pub kind: PuKind,
    /// Number of identical PUs.
    pub count: usize,
    /// Cores of one PU (CPU cores, CUDA cores, Phi cores).
    pub cores: f64,
    /// Clock in GHz.
    pub ghz: f64,
    /// FP32 flop per cycle per core.
    pub flop_per_cycle: f64,
    /// Device memory bandwidth, GB/s.
    pub mem_gb_s: f64,
    /// Host↔device link (`None`: the PU works in host memory).
    pub link: Option<Link>,
    /// Fixed cost of any block, µs (task dispatch, kernel launch, offload).
    pub launch_us: f64,
    /// Relative noise amplitude on compute times (`None`: the run's).
    pub noise: Option<f64>,
    /// Changes of speed during the run.
    pub changes: Vec<SpeedChange>,
    /// Idle and busy watts of one PU (`power` line), for MODELLED energy.
    pub power: Option<Power>,
}

impl PuClass {
    /// Peak FP32 GFLOP/s of one PU.
    pub fn peak_gflops(&self) -> f64 {
        self.cores * self.ghz * self.flop_per_cycle
    }
}

/// One PU of a platform, in the order of [`Platform::pus`].
#[derive(Debug, Clone, PartialEq)]
pub struct PuRef {
    /// Index of its class in [`Platform::classes`].
    pub class: usize,
    /// `machine/name#i`.
    pub label: String,
    /// What moving its data costs, network included (`None`: nothing).
    pub path: Option<Link>,
}

/// A set of PU classes on machines.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    /// Name (from the file's `platform` line).
    pub name: String,
    /// Machine holding the data.
    pub home: Option<String>,
    /// Link between machines.
    pub network: Option<Link>,
    /// PU classes, in file order.
    pub classes: Vec<PuClass>,
}

/// Why a platform file was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformError {
    /// 1-based line (0: not tied to a line).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for PlatformError {}

/// Names of the built-in platforms ([`Platform::builtin`]).
pub const BUILTIN: [&str; 2] = ["plb-hac", "plb-hec"];

const PLB_HAC: &str = include_str!("../../platforms/plb-hac.txt");
const PLB_HEC: &str = include_str!("../../platforms/plb-hec.txt");

/// Network of synthetic platforms (the assumption of the paper platforms).
const SYNTHETIC_NETWORK: Link = Link {
    gb_s: 1.1,
    latency_us: 50.0,
};

impl Platform {
    /// Parses a platform file (format in the module documentation).
    pub fn parse(text: &str) -> Result<Platform, PlatformError> {
        let mut p = Platform {
            name: String::from("unnamed"),
            home: None,
            network: None,
            classes: Vec::new(),
        };
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| PlatformError { line, message };
            let body = raw.split('#').next().unwrap_or("");
            let f: Vec<&str> = body.split_whitespace().collect();
            let Some((&directive, args)) = f.split_first() else {
                continue;
            };
            let want = |n: usize| {
                if args.len() == n {
                    Ok(())
                } else {
                    Err(err(format!(
                        "`{directive}` takes {n} fields, found {}",
                        args.len()
                    )))
                }
            };
            let num =
                |name: &str, s: &str, min_exclusive: Option<f64>| -> Result<f64, PlatformError> {
                    let v: f64 = s
                        .parse()
                        .map_err(|_| err(format!("{name}: `{s}` is not a number")))?;
                    let ok = v.is_finite() && min_exclusive.is_none_or(|m| v > m) && v >= 0.0;
                    if ok {
                        Ok(v)
                    } else {
                        Err(err(format!("{name}: {s} out of range")))
                    }
                };
            match directive {
                "platform" => {
                    want(1)?;
                    p.name = args[0].to_string();
                }
                "home" => {
                    want(1)?;
                    p.home = Some(args[0].to_string());
                }
                "network" => {
                    want(2)?;
                    p.network = Some(Link {
                        gb_s: num("network GB/s", args[0], Some(0.0))?,
                        latency_us: num("network latency", args[1], None)?,
                    });
                }
                "pu" => {
                    want(11)?;
                    let kind = PuKind::parse(args[2])
                        .ok_or_else(|| err(format!("kind `{}`: cpu, gpu or phi", args[2])))?;
                    let count = args[3]
                        .parse::<usize>()
                        .ok()
                        .filter(|&c| c > 0)
                        .ok_or_else(|| err(format!("count `{}`: a whole number > 0", args[3])))?;
                    let link = match (args[8], args[9]) {
                        ("-", "-") => None,
                        (b, l) => Some(Link {
                            gb_s: num("link GB/s", b, Some(0.0))?,
                            latency_us: num("link latency", l, None)?,
                        }),
                    };
                    p.classes.push(PuClass {
                        machine: args[0].to_string(),
                        name: args[1].to_string(),
                        kind,
                        count,
                        cores: num("cores", args[4], Some(0.0))?,
                        ghz: num("GHz", args[5], Some(0.0))?,
                        flop_per_cycle: num("flop/cycle", args[6], Some(0.0))?,
                        mem_gb_s: num("memory GB/s", args[7], Some(0.0))?,
                        link,
                        launch_us: num("launch", args[10], None)?,
                        noise: None,
                        changes: Vec::new(),
                        power: None,
                    });
                }
                "noise" | "change" | "power" => {
                    want(if directive == "noise" { 3 } else { 4 })?;
                    let (m, n) = (args[0], args[1]);
                    let targets: Vec<&mut PuClass> = p
                        .classes
                        .iter_mut()
                        .filter(|c| (m == "*" || c.machine == m) && (n == "*" || c.name == n))
                        .collect();
                    if targets.is_empty() {
                        return Err(err(format!("no PU {m}/{n} declared above")));
                    }
                    if directive == "power" {
                        let power = Power {
                            idle_w: num("idle watts", args[2], None)?,
                            busy_w: num("busy watts", args[3], Some(0.0))?,
                        };
                        targets.into_iter().for_each(|c| c.power = Some(power));
                    } else if directive == "noise" {
                        let a = num("noise", args[2], None)?;
                        if a >= 1.0 {
                            return Err(err(format!("noise {a}: must be < 1")));
                        }
                        targets.into_iter().for_each(|c| c.noise = Some(a));
                    } else {
                        let change = SpeedChange {
                            at: num("change time", args[2], None)?,
                            factor: num("change factor", args[3], Some(0.0))?,
                        };
                        targets.into_iter().for_each(|c| c.changes.push(change));
                    }
                }
                other => return Err(err(format!("unknown directive `{other}`"))),
            }
        }
        if p.classes.is_empty() {
            return Err(PlatformError {
                line: 0,
                message: String::from("no `pu` line"),
            });
        }
        if let Some(h) = &p.home {
            if !p.classes.iter().any(|c| &c.machine == h) {
                return Err(PlatformError {
                    line: 0,
                    message: format!("home machine {h} has no PU"),
                });
            }
            if p.network.is_none() && p.classes.iter().any(|c| &c.machine != h) {
                return Err(PlatformError {
                    line: 0,
                    message: String::from("PUs off the home machine need a `network` line"),
                });
            }
        }
        Ok(p)
    }

    /// A built-in platform by name ([`BUILTIN`]): `plb-hac` (PLB-HAC's
    /// Table 1, machines A–E) or `plb-hec` (PLB-HeC's Table I, A–D).
    pub fn builtin(name: &str) -> Option<Platform> {
        let text = match name {
            "plb-hac" => PLB_HAC,
            "plb-hec" => PLB_HEC,
            _ => return None,
        };
        Some(Platform::parse(text).expect("built-in platform files parse (tested)"))
    }

    /// Machine names, in order of first appearance.
    pub fn machines(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.classes {
            if !out.contains(&c.machine.as_str()) {
                out.push(&c.machine);
            }
        }
        out
    }

    /// The platform restricted to the given machines (the papers' scenarios:
    /// A; A, B; A, B, C; ...). The home machine must be among them, if any.
    pub fn select(&self, machines: &[&str]) -> Result<Platform, PlatformError> {
        let err = |message: String| PlatformError { line: 0, message };
        let known = self.machines();
        if let Some(m) = machines.iter().find(|m| !known.contains(m)) {
            return Err(err(format!("no machine {m} in {}", self.name)));
        }
        if let Some(h) = self.home.as_deref().filter(|h| !machines.contains(h)) {
            return Err(err(format!("the selection lacks the home machine {h}")));
        }
        Ok(Platform {
            name: format!("{} [{}]", self.name, machines.join(",")),
            classes: self
                .classes
                .iter()
                .filter(|c| machines.contains(&c.machine.as_str()))
                .cloned()
                .collect(),
            ..self.clone()
        })
    }

    /// Number of PUs.
    pub fn n_pus(&self) -> usize {
        self.classes.iter().map(|c| c.count).sum()
    }

    /// Every PU, class by class: its class, label and data path (own link,
    /// then the network when off the home machine).
    pub fn pus(&self) -> Vec<PuRef> {
        let mut out = Vec::with_capacity(self.n_pus());
        for (k, c) in self.classes.iter().enumerate() {
            let remote = self.home.as_ref().is_some_and(|h| h != &c.machine);
            let path = match (remote.then_some(self.network).flatten(), c.link) {
                (Some(net), Some(l)) => Some(net.then(l)),
                (net, l) => net.or(l),
            };
            for i in 0..c.count {
                out.push(PuRef {
                    class: k,
                    label: format!("{}/{}#{i}", c.machine, c.name),
                    path,
                });
            }
        }
        out
    }

    /// A seeded synthetic cluster of exactly `n` PUs: machines `s0`, `s1`,
    /// … (home `s0`, the paper platforms' network), each with one CPU and
    /// 0–3 accelerators (a GPU with probability 0.85, else a Xeon Phi),
    /// every device drawn from the devices of the built-in platforms with
    /// its clock and memory bandwidth scaled by independent log-uniform
    /// factors in [0.5, 2] (older and newer generations). The last machine
    /// is cut to make `n`.
    pub fn synthetic(n: usize, seed: u64) -> Platform {
        let mut cpus = Vec::new();
        let mut gpus = Vec::new();
        let mut phis = Vec::new();
        for name in BUILTIN {
            for c in Platform::builtin(name).expect("built-in").classes {
                let list = match c.kind {
                    PuKind::Cpu => &mut cpus,
                    PuKind::Gpu => &mut gpus,
                    PuKind::Phi => &mut phis,
                };
                if !list.iter().any(|d: &PuClass| d.name == c.name) {
                    list.push(c);
                }
            }
        }
        let mut rng = Rng::new(seed);
        let mut classes = Vec::with_capacity(n);
        let mut machine = 0;
        while classes.len() < n {
            let accelerators = rng.below(4) as usize;
            for slot in 0..=accelerators {
                if classes.len() == n {
                    break;
                }
                let pool = if slot == 0 {
                    &cpus
                } else if rng.unit() < 0.85 {
                    &gpus
                } else {
                    &phis
                };
                let mut d = pool[rng.below(pool.len() as u64) as usize].clone();
                d.machine = format!("s{machine}");
                d.count = 1;
                d.ghz *= rng.log_range(0.5, 2.0);
                d.mem_gb_s *= rng.log_range(0.5, 2.0);
                classes.push(d);
            }
            machine += 1;
        }
        Platform {
            name: format!("synthetic-{n}-seed{seed}"),
            home: Some(String::from("s0")),
            network: Some(SYNTHETIC_NETWORK),
            classes,
        }
    }
}
