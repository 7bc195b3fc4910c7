//! The balancers' tunable parameters (`PLB_*` environment variables),
//! parsed and validated without touching StarPU: [`Tuning::from_lookup`]
//! takes the variables from any function, so the parsing is unit-tested
//! without touching the process environment. The StarPU adapter validates
//! them once at `starpu_initialize`; the divisible-load API and task mode
//! read them through [`super::registry`] when they build a balancer.
//!
//! Every variable, its default and where it applies are listed in
//! [`VARIABLES`] and in `docs/usage.md`.

use std::fmt;

use super::{AcostaConfig, HdssConfig, PlbHacConfig, PlbHecConfig};
use crate::dag::cpu_order::CpuOrder;
use crate::dag::graph::Window;
use crate::dag::line_order::LineOrder;
use crate::dag::prefetch::PrefetchSetting;
use crate::solve::Primary;

/// Kind of a processing unit (a StarPU worker's type), for per-kind
/// minimum block sizes and for task mode (pipelined accelerators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerKind {
    /// A CPU core.
    Cpu,
    /// An OpenCL device.
    OpenCl,
    /// A CUDA GPU.
    Cuda,
    /// Anything else (or unknown).
    Other,
}

impl WorkerKind {
    /// Every kind, in declaration order.
    pub const ALL: [WorkerKind; 4] = [
        WorkerKind::Cpu,
        WorkerKind::OpenCl,
        WorkerKind::Cuda,
        WorkerKind::Other,
    ];

    /// Its position in [`WorkerKind::ALL`] (for tables indexed by kind).
    pub const fn index(self) -> usize {
        match self {
            WorkerKind::Cpu => 0,
            WorkerKind::OpenCl => 1,
            WorkerKind::Cuda => 2,
            WorkerKind::Other => 3,
        }
    }

    /// The kind's stable lower-case name (`cpu`, `opencl`, `cuda`,
    /// `other`), as files and traces write it; independent of `Debug`.
    pub const fn name(self) -> &'static str {
        match self {
            WorkerKind::Cpu => "cpu",
            WorkerKind::OpenCl => "opencl",
            WorkerKind::Cuda => "cuda",
            WorkerKind::Other => "other",
        }
    }

    /// The kind named `name` (see [`WorkerKind::name`]).
    pub fn from_name(name: &str) -> Option<WorkerKind> {
        WorkerKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Minimum block size (units) per worker kind: `PLB_MIN_BLOCK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinBlock {
    /// CPU workers.
    pub cpu: u64,
    /// OpenCL workers.
    pub opencl: u64,
    /// CUDA workers.
    pub cuda: u64,
    /// Other workers.
    pub other: u64,
}

impl MinBlock {
    /// The same minimum for every kind.
    pub const fn uniform(units: u64) -> MinBlock {
        MinBlock {
            cpu: units,
            opencl: units,
            cuda: units,
            other: units,
        }
    }

    /// The minimum of a worker of kind `kind`.
    pub fn of(&self, kind: WorkerKind) -> u64 {
        match kind {
            WorkerKind::Cpu => self.cpu,
            WorkerKind::OpenCl => self.opencl,
            WorkerKind::Cuda => self.cuda,
            WorkerKind::Other => self.other,
        }
    }

    /// Whether the kinds differ (a per-PU list is then needed).
    pub fn is_uniform(&self) -> bool {
        self.cpu == self.opencl && self.cpu == self.cuda && self.cpu == self.other
    }
}

/// Every tunable parameter of the balancers, with its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// `PLB_INITIAL_BLOCK`: first block in units (PLB-HAC's `x_init`, the
    /// other balancers' initial block, greedy's block); `None` = automatic.
    pub initial_block: Option<u64>,
    /// `PLB_GAP_THRESHOLD`: PLB-HAC gap filling, seconds.
    pub gap_threshold_s: f64,
    /// `PLB_DECREASE_START`: fraction of the data after which PLB-HAC's
    /// steps shrink.
    pub decrease_start: f64,
    /// `PLB_DECREASE_FACTOR`: PLB-HAC's α.
    pub decrease_factor: f64,
    /// `PLB_R2_THRESHOLD`: PLB-HeC ends its training when every fit's R²
    /// exceeds it.
    pub r2_threshold: f64,
    /// `PLB_TRAINING_FRACTION`: most of the data PLB-HeC's training and
    /// HDSS's adaptive phase may use.
    pub training_fraction: f64,
    /// `PLB_REBALANCE_THRESHOLD`: PLB-HeC and Acosta rebalance when finish
    /// times differ by more than this fraction of a block's time.
    pub rebalance_threshold: f64,
    /// `PLB_SOLVER`: primary solver of PLB-HAC and PLB-HeC; `None` = each
    /// balancer's default (fast for PLB-HAC, IPOPT for PLB-HeC).
    pub solver: Option<Primary>,
    /// `PLB_MIN_BLOCK`: minimum block per worker kind (PLB-HAC).
    pub min_block: MinBlock,
    /// `PLB_DADA_ALPHA`: DADA's affinity phase length, a fraction of the
    /// makespan guess.
    pub dada_alpha: f64,
    /// `PLB_DADA_EPS`: relative precision of DADA's binary search.
    pub dada_eps: f64,
    /// `PLB_HEFT_WINDOW`: most tasks `plb-heft` queues on a line (`None`:
    /// every ready task is placed at once).
    pub heft_window: Option<Window>,
    /// `PLB_STARPU_MODELS`: whether the task-graph policies take StarPU's
    /// calibrated prediction where ours have none.
    pub starpu_models: bool,
    /// `PLB_PREFETCH_HORIZON`: prefetch at placement only a task its
    /// worker should reach within a horizon (see [`PrefetchSetting`]).
    pub prefetch_horizon: PrefetchSetting,
    /// `PLB_CPU_OFFLOAD`: whether `plb-heft` sends weakly accelerated
    /// tasks to CPU workers within their slack (see
    /// [`crate::dag::offload`]).
    pub cpu_offload: bool,
    /// `PLB_LINE_ORDER`: how `plb-heft`'s accelerator lines order one
    /// priority's tasks (see [`LineOrder`]).
    pub line_order: LineOrder,
    /// `PLB_CPU_ORDER`: how the task-graph policies order the tasks of a
    /// context of CPU workers alone (see [`CpuOrder`]).
    pub cpu_order: CpuOrder,
}

/// Default of `PLB_DADA_ALPHA` (see `docs/balancers.md`, "Task graphs").
pub const DADA_ALPHA: f64 = 0.5;
/// Default of `PLB_DADA_EPS`.
pub const DADA_EPS: f64 = 0.01;
/// Default of `PLB_HEFT_WINDOW` (see `docs/balancers.md`, "Task graphs").
pub const HEFT_WINDOW: Window = Window {
    accelerator: 60,
    cpu: 4,
};

impl Default for Tuning {
    fn default() -> Self {
        let hac = PlbHacConfig::default();
        let hec = PlbHecConfig::default();
        Tuning {
            initial_block: None,
            gap_threshold_s: hac.gap_threshold_s,
            decrease_start: hac.decrease_start,
            decrease_factor: hac.decrease_factor,
            r2_threshold: hec.r2_target,
            training_fraction: hec.training_fraction,
            rebalance_threshold: hec.threshold,
            solver: None,
            min_block: MinBlock::uniform(hac.min_block),
            dada_alpha: DADA_ALPHA,
            dada_eps: DADA_EPS,
            heft_window: Some(HEFT_WINDOW),
            starpu_models: true,
            prefetch_horizon: PrefetchSetting::Auto,
            line_order: LineOrder::Auto,
            cpu_order: CpuOrder::Auto,
            cpu_offload: true,
        }
    }
}

/// One documented variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// Accepted values.
    pub accepted: &'static str,
    /// Default value.
    pub default: &'static str,
    /// What it controls.
    pub meaning: &'static str,
}

/// The variables [`Tuning`] reads.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "PLB_INITIAL_BLOCK",
        accepted: "an integer >= 1 (units), or `auto`",
        default: "auto",
        meaning: "first block: PLB-HAC x_init, PLB-HeC/HDSS/Acosta initial block, greedy block",
    },
    Variable {
        name: "PLB_GAP_THRESHOLD",
        accepted: "seconds >= 0 (`0.4`, `400ms`), or `off`",
        default: "0.4 (400 ms)",
        meaning: "PLB-HAC: a block finishing this much earlier than predicted earns a gap-filling block",
    },
    Variable {
        name: "PLB_DECREASE_START",
        accepted: "a number in [0, 1]",
        default: "0.7",
        meaning: "PLB-HAC: fraction of the data handed out after which step totals shrink",
    },
    Variable {
        name: "PLB_DECREASE_FACTOR",
        accepted: "a number in [0, 1)",
        default: "0.1",
        meaning: "PLB-HAC: alpha; each step after the start distributes (1 - alpha) times the previous one",
    },
    Variable {
        name: "PLB_R2_THRESHOLD",
        accepted: "a number in [0, 1]",
        default: "0.7",
        meaning: "PLB-HeC: training ends when every fit's R^2 exceeds it",
    },
    Variable {
        name: "PLB_TRAINING_FRACTION",
        accepted: "a number in (0, 1]",
        default: "0.2",
        meaning: "PLB-HeC training and HDSS adaptive phase: most of the data they may use",
    },
    Variable {
        name: "PLB_REBALANCE_THRESHOLD",
        accepted: "a number > 0",
        default: "0.1",
        meaning: "PLB-HeC and Acosta: rebalance when finish times differ by more than this fraction of a block's time",
    },
    Variable {
        name: "PLB_SOLVER",
        accepted: "`ipopt` or `fast`",
        default: "fast for plb-hac, ipopt for plb-hec",
        meaning: "primary solver of the equal-finish-time system (the other is the fallback)",
    },
    Variable {
        name: "PLB_MIN_BLOCK",
        accepted: "an integer >= 1, or `cpu=N,opencl=N,cuda=N` (any subset; unnamed kinds keep 1)",
        default: "1",
        meaning: "PLB-HAC: smallest block a worker of that kind is given",
    },
    Variable {
        name: "PLB_DADA_ALPHA",
        accepted: "a number in [0, 1]",
        default: "0.5",
        meaning: "dada, dada-cp: affinity phase length as a fraction of the makespan guess (0: plain dual approximation)",
    },
    Variable {
        name: "PLB_DADA_EPS",
        accepted: "a number in (0, 0.5]",
        default: "0.01",
        meaning: "dada, dada-cp: relative precision of the binary search on the makespan guess",
    },
    Variable {
        name: "PLB_HEFT_WINDOW",
        accepted: "`ACC:CPU` (integers >= 1), or `off`",
        default: "60:4",
        meaning: "plb-heft, in a context with an accelerator: most tasks queued on an accelerator's line and on a CPU worker's; the other ready tasks wait, highest priority placed first (`off`: all placed at once)",
    },
    Variable {
        name: "PLB_STARPU_MODELS",
        accepted: "`on` or `off`",
        default: "on",
        meaning: "plb-heft, dada, dada-cp, with workers of several kinds: where our models have no prediction of a task on a worker, StarPU's calibrated one is used (`off`: ours alone; a kind without one is trained)",
    },
    Variable {
        name: "PLB_PREFETCH_HORIZON",
        accepted: "milliseconds (a number > 0), `auto` or `off`",
        default: "auto",
        meaning: "plb-heft, dada, dada-cp: prefetch a placed task's input at placement only if the predicted work ahead of it on its worker's line is at most this long; the others are fetched when they start (`off`: every placed task, as dmda; `auto`: 20 ms with 3 or more accelerator memory nodes, otherwise `off`)",
    },
    Variable {
        name: "PLB_CPU_OFFLOAD",
        accepted: "`on` or `off`",
        default: "on",
        meaning: "plb-heft, with at least 2 CPU workers per accelerator memory node: a task whose accelerator speedup is below half the highest among the codelets goes to a CPU worker instead of the accelerator that would finish it first, when that delays it by at most half its slack and twice that accelerator's backlog (`off`: earliest finish only)",
    },
    Variable {
        name: "PLB_LINE_ORDER",
        accepted: "`auto`, `arrival` or `latest-start`",
        default: "auto",
        meaning: "plb-heft: the order of the tasks of one priority on an accelerator's line (`arrival`: as queued, as dmdas; `latest-start`: earliest latest start first, the time a task was queued plus its slack then, a task without a rank after those with one; `auto`: `latest-start` with 3 or more accelerator memory nodes, otherwise `arrival`); CPU workers' lines keep arrival order",
    },
    Variable {
        name: "PLB_CPU_ORDER",
        accepted: "`auto`, `priority` or `arrival`",
        default: "auto",
        meaning: "plb-heft, dada, dada-cp: the order of the tasks in a context of CPU workers alone (`priority`: highest priority first, as dmdas; `arrival`: as submitted, as eager; `auto`: `arrival` with at most 2 CPU workers, otherwise `priority`); a context with an accelerator keeps priorities",
    },
];

/// `PLB_HEFT_WINDOW`'s value: `Some(None)` for `off`.
fn parse_window(v: &str) -> Option<Option<Window>> {
    let v = v.trim();
    if v == "off" {
        return Some(None);
    }
    let (a, c) = v.split_once(':')?;
    let count = |s: &str| s.trim().parse::<usize>().ok().filter(|&n| n >= 1);
    Some(Some(Window {
        accelerator: count(a)?,
        cpu: count(c)?,
    }))
}

/// An invalid variable: its name, the value and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningError {
    /// The variable.
    pub name: &'static str,
    /// The value found.
    pub value: String,
    /// What it accepts.
    pub accepted: &'static str,
}

impl fmt::Display for TuningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} is invalid: expected {}",
            self.name, self.value, self.accepted
        )
    }
}

impl std::error::Error for TuningError {}

fn accepted(name: &str) -> &'static str {
    VARIABLES
        .iter()
        .find(|v| v.name == name)
        .map_or("a valid value", |v| v.accepted)
}

/// `on` or `off` (surrounding blanks ignored) as a switch of `name`.
fn on_off(name: &'static str, value: String) -> Result<bool, TuningError> {
    match value.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(TuningError {
            name,
            value,
            accepted: accepted(name),
        }),
    }
}

/// One of `choices`' words (surrounding blanks ignored) as the value of
/// `name`.
fn one_of<T: Copy>(
    name: &'static str,
    value: String,
    choices: &[(&str, T)],
) -> Result<T, TuningError> {
    match choices.iter().find(|(word, _)| *word == value.trim()) {
        Some(&(_, choice)) => Ok(choice),
        None => Err(TuningError {
            name,
            value,
            accepted: accepted(name),
        }),
    }
}

fn number(name: &'static str, value: &str, ok: impl Fn(f64) -> bool) -> Result<f64, TuningError> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        _ => Err(TuningError {
            name,
            value: value.into(),
            accepted: accepted(name),
        }),
    }
}

/// `20ms`, `1.5s`, `100us`, `0ns`: a non-negative number and a unit, in
/// seconds (`None` when malformed).
pub fn parse_duration_s(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let scale = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0 && (v * scale).is_finite()).then_some(v * scale)
}

fn units(value: &str) -> Option<u64> {
    value.trim().parse::<u64>().ok().filter(|&n| n >= 1)
}

fn parse_min_block(name: &'static str, value: &str) -> Result<MinBlock, TuningError> {
    let bad = || TuningError {
        name,
        value: value.into(),
        accepted: accepted(name),
    };
    if let Some(n) = units(value) {
        return Ok(MinBlock::uniform(n));
    }
    let mut out = MinBlock::uniform(1);
    let mut seen = Vec::new();
    for part in value.split(',') {
        let (kind, n) = part.split_once('=').ok_or_else(bad)?;
        let kind = kind.trim().to_ascii_lowercase();
        let n = units(n).ok_or_else(bad)?;
        if seen.contains(&kind) {
            return Err(bad());
        }
        match kind.as_str() {
            "cpu" => out.cpu = n,
            "opencl" => out.opencl = n,
            "cuda" => out.cuda = n,
            _ => return Err(bad()),
        }
        seen.push(kind);
    }
    Ok(out)
}

impl Tuning {
    /// Reads the variables through `get` (e.g. `std::env::var`); unset or
    /// empty variables keep their defaults. The first invalid variable (in
    /// [`VARIABLES`] order) is the error.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Tuning, TuningError> {
        let mut t = Tuning::default();
        let var = |name: &'static str| get(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = var("PLB_INITIAL_BLOCK") {
            t.initial_block = if v.trim() == "auto" {
                None
            } else {
                Some(units(&v).ok_or_else(|| TuningError {
                    name: "PLB_INITIAL_BLOCK",
                    value: v.clone(),
                    accepted: accepted("PLB_INITIAL_BLOCK"),
                })?)
            };
        }
        if let Some(v) = var("PLB_GAP_THRESHOLD") {
            let name = "PLB_GAP_THRESHOLD";
            t.gap_threshold_s = match v.trim() {
                "off" => f64::INFINITY,
                s if s.ends_with(|c: char| c.is_ascii_alphabetic()) => parse_duration_s(s)
                    .ok_or_else(|| TuningError {
                        name,
                        value: v.clone(),
                        accepted: accepted(name),
                    })?,
                s => number(name, s, |x| x >= 0.0)?,
            };
        }
        if let Some(v) = var("PLB_DECREASE_START") {
            t.decrease_start = number("PLB_DECREASE_START", &v, |x| (0.0..=1.0).contains(&x))?;
        }
        if let Some(v) = var("PLB_DECREASE_FACTOR") {
            t.decrease_factor = number("PLB_DECREASE_FACTOR", &v, |x| (0.0..1.0).contains(&x))?;
        }
        if let Some(v) = var("PLB_R2_THRESHOLD") {
            t.r2_threshold = number("PLB_R2_THRESHOLD", &v, |x| (0.0..=1.0).contains(&x))?;
        }
        if let Some(v) = var("PLB_TRAINING_FRACTION") {
            t.training_fraction = number("PLB_TRAINING_FRACTION", &v, |x| x > 0.0 && x <= 1.0)?;
        }
        if let Some(v) = var("PLB_REBALANCE_THRESHOLD") {
            t.rebalance_threshold = number("PLB_REBALANCE_THRESHOLD", &v, |x| x > 0.0)?;
        }
        if let Some(v) = var("PLB_DADA_ALPHA") {
            t.dada_alpha = number("PLB_DADA_ALPHA", &v, |x| (0.0..=1.0).contains(&x))?;
        }
        if let Some(v) = var("PLB_DADA_EPS") {
            t.dada_eps = number("PLB_DADA_EPS", &v, |x| x > 0.0 && x <= 0.5)?;
        }
        if let Some(v) = var("PLB_HEFT_WINDOW") {
            t.heft_window = parse_window(&v).ok_or_else(|| TuningError {
                name: "PLB_HEFT_WINDOW",
                value: v.clone(),
                accepted: accepted("PLB_HEFT_WINDOW"),
            })?;
        }
        if let Some(v) = var("PLB_STARPU_MODELS") {
            t.starpu_models = on_off("PLB_STARPU_MODELS", v)?;
        }
        if let Some(v) = var("PLB_CPU_OFFLOAD") {
            t.cpu_offload = on_off("PLB_CPU_OFFLOAD", v)?;
        }
        if let Some(v) = var("PLB_LINE_ORDER") {
            t.line_order = one_of(
                "PLB_LINE_ORDER",
                v,
                &[
                    ("auto", LineOrder::Auto),
                    ("arrival", LineOrder::Arrival),
                    ("latest-start", LineOrder::LatestStart),
                ],
            )?;
        }
        if let Some(v) = var("PLB_CPU_ORDER") {
            t.cpu_order = one_of(
                "PLB_CPU_ORDER",
                v,
                &[
                    ("auto", CpuOrder::Auto),
                    ("priority", CpuOrder::Priority),
                    ("arrival", CpuOrder::Arrival),
                ],
            )?;
        }
        if let Some(v) = var("PLB_PREFETCH_HORIZON") {
            t.prefetch_horizon = match v.trim() {
                "auto" => PrefetchSetting::Auto,
                "off" => PrefetchSetting::Off,
                _ => PrefetchSetting::Within(
                    number("PLB_PREFETCH_HORIZON", &v, |x| x > 0.0)? / 1000.0,
                ),
            };
        }
        if let Some(v) = var("PLB_SOLVER") {
            t.solver = Some(match v.trim().to_ascii_lowercase().as_str() {
                "ipopt" => Primary::Ipopt,
                "fast" => Primary::Fast,
                _ => {
                    return Err(TuningError {
                        name: "PLB_SOLVER",
                        value: v,
                        accepted: accepted("PLB_SOLVER"),
                    });
                }
            });
        }
        if let Some(v) = var("PLB_MIN_BLOCK") {
            t.min_block = parse_min_block("PLB_MIN_BLOCK", &v)?;
        }
        Ok(t)
    }

    /// [`Tuning::from_lookup`] on the process environment.
    pub fn from_env() -> Result<Tuning, TuningError> {
        Tuning::from_lookup(|n| std::env::var(n).ok())
    }

    /// PLB-HAC's configuration, with the CPU minimum block for every PU
    /// (per-kind minimums need the PU kinds: [`Tuning::plb_hac_for`]).
    pub fn plb_hac(&self) -> PlbHacConfig {
        let mut c = PlbHacConfig {
            x_init: self.initial_block,
            gap_threshold_s: self.gap_threshold_s,
            decrease_start: self.decrease_start,
            decrease_factor: self.decrease_factor,
            min_block: self.min_block.cpu,
            ..PlbHacConfig::default()
        };
        if let Some(s) = self.solver {
            c.solver = s;
        }
        c
    }

    /// [`Tuning::plb_hac`] for PUs of known kinds: per-kind minimum blocks
    /// (`PLB_MIN_BLOCK=cpu=..,opencl=..`) become PLB-HAC's per-PU list, PU
    /// `p` being of kind `kinds[p]`; uniform minimums stay uniform.
    pub fn plb_hac_for(&self, kinds: Option<&[WorkerKind]>) -> PlbHacConfig {
        let mut c = self.plb_hac();
        if let Some(kinds) = kinds
            && !self.min_block.is_uniform()
        {
            c.min_block_per_pu = kinds.iter().map(|&k| self.min_block.of(k)).collect();
        }
        c
    }

    /// PLB-HeC's configuration.
    pub fn plb_hec(&self) -> PlbHecConfig {
        let mut c = PlbHecConfig {
            initial_block: self.initial_block.unwrap_or(0),
            r2_target: self.r2_threshold,
            training_fraction: self.training_fraction,
            threshold: self.rebalance_threshold,
            ..PlbHecConfig::default()
        };
        if let Some(s) = self.solver {
            c.primary = s;
        }
        c
    }

    /// HDSS's configuration.
    pub fn hdss(&self) -> HdssConfig {
        HdssConfig {
            initial_block: self.initial_block.unwrap_or(0),
            adaptive_fraction: self.training_fraction,
            ..HdssConfig::default()
        }
    }

    /// Acosta's configuration.
    pub fn acosta(&self) -> AcostaConfig {
        AcostaConfig {
            initial_block: self.initial_block.unwrap_or(0),
            threshold: self.rebalance_threshold,
            ..AcostaConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_s_index_is_its_place_in_all() {
        for (i, k) in WorkerKind::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i, "{k:?}");
        }
    }

    fn with(vars: &[(&str, &str)]) -> Result<Tuning, TuningError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Tuning::from_lookup(|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_match_the_balancers_defaults() {
        let t = with(&[]).unwrap();
        assert_eq!(t, Tuning::default());
        assert_eq!(t.plb_hac(), PlbHacConfig::default());
        assert_eq!(t.plb_hec(), PlbHecConfig::default());
        assert_eq!(t.hdss(), HdssConfig::default());
        assert_eq!(t.acosta(), AcostaConfig::default());
    }

    #[test]
    fn every_variable_reaches_its_balancers() {
        let t = with(&[
            ("PLB_INITIAL_BLOCK", "128"),
            ("PLB_GAP_THRESHOLD", "250ms"),
            ("PLB_DECREASE_START", "0.5"),
            ("PLB_DECREASE_FACTOR", "0.2"),
            ("PLB_R2_THRESHOLD", "0.9"),
            ("PLB_TRAINING_FRACTION", "0.3"),
            ("PLB_REBALANCE_THRESHOLD", "0.05"),
            ("PLB_SOLVER", "IPOPT"),
            ("PLB_MIN_BLOCK", "cpu=2, opencl=64"),
        ])
        .unwrap();
        let kinds = [WorkerKind::Cpu, WorkerKind::OpenCl, WorkerKind::Cuda];
        let hac = t.plb_hac_for(Some(&kinds));
        assert_eq!(hac.x_init, Some(128));
        assert_eq!(hac.gap_threshold_s, 0.25);
        assert_eq!((hac.decrease_start, hac.decrease_factor), (0.5, 0.2));
        assert_eq!(hac.solver, Primary::Ipopt);
        assert_eq!(hac.min_block_per_pu, vec![2, 64, 1]);
        let hec = t.plb_hec();
        assert_eq!(hec.initial_block, 128);
        assert_eq!((hec.r2_target, hec.training_fraction), (0.9, 0.3));
        assert_eq!(hec.threshold, 0.05);
        assert_eq!(t.hdss().adaptive_fraction, 0.3);
        assert_eq!(t.acosta().threshold, 0.05);
        assert_eq!(t.acosta().initial_block, 128);
    }

    #[test]
    fn gap_threshold_forms() {
        let g = |v: &str| with(&[("PLB_GAP_THRESHOLD", v)]).map(|t| t.gap_threshold_s);
        assert_eq!(g("0.4"), Ok(0.4));
        assert_eq!(g("1s"), Ok(1.0));
        assert_eq!(g("off"), Ok(f64::INFINITY));
        assert_eq!(g("0"), Ok(0.0));
        for bad in ["-1", "fast", "1h", "NaN", "inf"] {
            assert!(g(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_values_name_the_variable_and_the_accepted_values() {
        let cases = [
            ("PLB_INITIAL_BLOCK", "0"),
            ("PLB_INITIAL_BLOCK", "12.5"),
            ("PLB_DECREASE_START", "1.5"),
            ("PLB_DECREASE_FACTOR", "1"),
            ("PLB_DECREASE_FACTOR", "abc"),
            ("PLB_R2_THRESHOLD", "-0.1"),
            ("PLB_TRAINING_FRACTION", "0"),
            ("PLB_REBALANCE_THRESHOLD", "0"),
            ("PLB_REBALANCE_THRESHOLD", "inf"),
            ("PLB_SOLVER", "cplex"),
            ("PLB_MIN_BLOCK", "0"),
            ("PLB_MIN_BLOCK", "gpu=4"),
            ("PLB_MIN_BLOCK", "cpu=4,cpu=8"),
            ("PLB_MIN_BLOCK", "cpu"),
            ("PLB_DADA_ALPHA", "1.5"),
            ("PLB_DADA_ALPHA", "-0.1"),
            ("PLB_DADA_EPS", "0"),
            ("PLB_DADA_EPS", "0.9"),
            ("PLB_HEFT_WINDOW", "60"),
            ("PLB_HEFT_WINDOW", "0:4"),
            ("PLB_HEFT_WINDOW", "60:x"),
            ("PLB_STARPU_MODELS", "yes"),
            ("PLB_CPU_OFFLOAD", "yes"),
            ("PLB_PREFETCH_HORIZON", "0"),
            ("PLB_PREFETCH_HORIZON", "-5"),
            ("PLB_PREFETCH_HORIZON", "inf"),
            ("PLB_PREFETCH_HORIZON", "never"),
            ("PLB_LINE_ORDER", "fifo"),
            ("PLB_LINE_ORDER", "latest_start"),
            ("PLB_CPU_ORDER", "fifo"),
        ];
        for (name, value) in cases {
            let e = with(&[(name, value)]).unwrap_err();
            assert_eq!(e.name, name, "{name}={value}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{name}=\"{value}\"")), "{msg}");
            assert!(msg.contains(accepted(name)), "{msg}");
        }
    }

    #[test]
    fn empty_values_keep_defaults_and_auto_is_accepted() {
        let t = with(&[("PLB_SOLVER", " "), ("PLB_INITIAL_BLOCK", "auto")]).unwrap();
        assert_eq!(t, Tuning::default());
    }

    #[test]
    fn dada_parameters() {
        let t = with(&[("PLB_DADA_ALPHA", "0"), ("PLB_DADA_EPS", "0.05")]).unwrap();
        assert_eq!((t.dada_alpha, t.dada_eps), (0.0, 0.05));
        let t = with(&[("PLB_DADA_ALPHA", "1")]).unwrap();
        assert_eq!((t.dada_alpha, t.dada_eps), (1.0, DADA_EPS));
        assert_eq!(Tuning::default().dada_alpha, DADA_ALPHA);
    }

    #[test]
    fn heft_window() {
        assert_eq!(Tuning::default().heft_window, Some(HEFT_WINDOW));
        let t = with(&[("PLB_HEFT_WINDOW", "off")]).unwrap();
        assert_eq!(t.heft_window, None);
        let t = with(&[("PLB_HEFT_WINDOW", " 30 : 2 ")]).unwrap();
        assert_eq!(
            t.heft_window,
            Some(Window {
                accelerator: 30,
                cpu: 2
            })
        );
    }

    #[test]
    fn starpu_models() {
        assert!(Tuning::default().starpu_models);
        assert!(
            !with(&[("PLB_STARPU_MODELS", " off ")])
                .unwrap()
                .starpu_models
        );
        assert!(with(&[("PLB_STARPU_MODELS", "on")]).unwrap().starpu_models);
    }

    #[test]
    fn cpu_offload() {
        assert!(Tuning::default().cpu_offload);
        assert!(!with(&[("PLB_CPU_OFFLOAD", " off ")]).unwrap().cpu_offload);
        assert!(with(&[("PLB_CPU_OFFLOAD", "on")]).unwrap().cpu_offload);
        let e = with(&[("PLB_CPU_OFFLOAD", "yes")]).unwrap_err();
        assert_eq!(e.name, "PLB_CPU_OFFLOAD");
    }

    #[test]
    fn prefetch_horizon() {
        assert_eq!(Tuning::default().prefetch_horizon, PrefetchSetting::Auto);
        let t = with(&[("PLB_PREFETCH_HORIZON", " 20 ")]).unwrap();
        assert_eq!(t.prefetch_horizon, PrefetchSetting::Within(0.02));
        let t = with(&[("PLB_PREFETCH_HORIZON", "off")]).unwrap();
        assert_eq!(t.prefetch_horizon, PrefetchSetting::Off);
        let t = with(&[("PLB_PREFETCH_HORIZON", "auto")]).unwrap();
        assert_eq!(t.prefetch_horizon, PrefetchSetting::Auto);
    }

    #[test]
    fn line_order() {
        assert_eq!(Tuning::default().line_order, LineOrder::Auto);
        for (value, order) in [
            (" arrival ", LineOrder::Arrival),
            ("latest-start", LineOrder::LatestStart),
            ("auto", LineOrder::Auto),
        ] {
            assert_eq!(
                with(&[("PLB_LINE_ORDER", value)]).unwrap().line_order,
                order
            );
        }
    }

    #[test]
    fn cpu_order() {
        assert_eq!(Tuning::default().cpu_order, CpuOrder::Auto);
        for (value, order) in [
            ("auto", CpuOrder::Auto),
            (" arrival ", CpuOrder::Arrival),
            ("priority", CpuOrder::Priority),
        ] {
            assert_eq!(with(&[("PLB_CPU_ORDER", value)]).unwrap().cpu_order, order);
        }
    }

    #[test]
    fn every_variable_is_documented_once() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
    }

    #[test]
    fn kind_names_are_fixed_and_round_trip() {
        let names: Vec<_> = WorkerKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["cpu", "opencl", "cuda", "other"]);
        for k in WorkerKind::ALL {
            assert_eq!(WorkerKind::from_name(k.name()), Some(k));
        }
        assert_eq!(WorkerKind::from_name("OpenCl"), None);
    }
}
