//! The one registry of balancer names, read by the simulator, the
//! divisible-load API, task mode, the `PLB_*` configuration, `plb policies`
//! and `STARPU_SCHED=help`.
//!
//! # Grammar
//!
//! `NAME[:ARG[,ARG]...]`, each `ARG` being `key=value` or, for the
//! balancer's first parameter, the bare value:
//!
//! * `greedy`, `greedy:64` (= `greedy:block=64`), `greedy:W/64` (blocks of
//!   `W/64` units);
//! * `plb-hac`, `plb-hac:solver=ipopt`, `plb-hec:solver=fast`, `hdss`,
//!   `acosta`;
//! * `static` (speeds measured by probe blocks), `static:speeds=1/4`.
//!
//! Parameters not given come from the `PLB_*` variables ([`Tuning`]).
//!
//! # Adding a balancer
//!
//! Write it in its own file under `core/src/balance/` (a type implementing
//! [`Balancer`] and a `pub(super) const ENTRY: Entry`), then add one line
//! to [`REGISTRY`]. It is then available to the simulator, the divisible-load
//! API, task mode (`STARPU_SCHED=<name>`), `plb policies` and the registry
//! test that runs every entry under all three drivers.

use super::tuning::{Tuning, WorkerKind};
use super::{
    Balancer, acosta, adaptive, dynamic, greedy, hdss, hguided, plb_hac, plb_hec, sigmoid,
    static_split,
};

/// What a balancer is built for.
#[derive(Debug, Clone, Copy)]
pub struct BuildContext<'a> {
    /// Number of PUs.
    pub pus: usize,
    /// Units `W`.
    pub total: u64,
    /// The `PLB_*` parameters (defaults of the arguments not given).
    pub tuning: &'a Tuning,
    /// The PUs' kinds, when known (per-kind minimum blocks).
    pub kinds: Option<&'a [WorkerKind]>,
    /// Each PU's predicted seconds for one unit, from trained models, when
    /// every PU has one (task mode: one task of the epoch's codelet and
    /// size); `None` otherwise. Static takes them as its given speeds.
    pub unit_s: Option<&'a [f64]>,
}

/// One parameter of a balancer's name.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Its key (`block`, `solver`...).
    pub key: &'static str,
    /// What it accepts, for messages and docs.
    pub accepted: &'static str,
    /// Whether a value is accepted.
    pub check: fn(&str) -> bool,
}

/// The arguments given after the name, checked against the entry's
/// parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args(Vec<(&'static str, String)>);

impl Args {
    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A boxed balancer, as the registry builds them.
pub type BoxedBalancer = Box<dyn Balancer + Send>;

/// A balancer the registry knows: its name, description, parameters and
/// constructor.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The name (as in `STARPU_SCHED`; never starting with `heft`, which
    /// StarPU 1.3 maps to `dmda`).
    pub name: &'static str,
    /// One line for `plb policies` and `STARPU_SCHED=help`.
    pub summary: &'static str,
    /// Its parameters; the first one may be given without its key.
    pub params: &'static [Param],
    /// Builds it.
    pub build: fn(&Args, &BuildContext<'_>) -> Result<BoxedBalancer, String>,
    /// Units its training hands out at least per PU with these parameters
    /// (0: no training phase). Task mode forms no epoch smaller than that
    /// times its workers: such an epoch would never leave its training.
    pub training_units_per_pu: fn(&Tuning) -> u64,
}

/// [`Entry::training_units_per_pu`] of a balancer without a training
/// phase.
pub fn no_training(_: &Tuning) -> u64 {
    0
}

/// The balancer whose task mode is one central FIFO rather than epochs
/// (`greedy`: the papers' greedy baseline; see [`crate::policies`]).
pub const CENTRAL_QUEUE_BALANCER: &str = greedy::ENTRY.name;

/// Every balancer, one line each.
pub const REGISTRY: &[Entry] = &[
    greedy::ENTRY,
    plb_hac::ENTRY,
    plb_hec::ENTRY,
    hdss::ENTRY,
    acosta::ENTRY,
    static_split::ENTRY,
    dynamic::ENTRY,
    hguided::ENTRY,
    adaptive::ENTRY,
    sigmoid::ENTRY,
];

/// The entry named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The registered names.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|e| e.name)
}

/// Why a name could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    /// No balancer of that name, or arguments it does not accept.
    Unknown(String),
    /// The balancer refused its configuration for this run.
    Config(String),
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::Unknown(m) => write!(f, "{m}"),
            SpecError::Config(m) => write!(f, "invalid balancer configuration: {m}"),
        }
    }
}

impl std::error::Error for SpecError {}

/// A parsed balancer name with its arguments.
#[derive(Debug, Clone)]
pub struct BalancerSpec {
    entry: &'static Entry,
    args: Args,
    text: String,
}

impl PartialEq for BalancerSpec {
    fn eq(&self, other: &Self) -> bool {
        self.entry.name == other.entry.name && self.args == other.args
    }
}

impl BalancerSpec {
    /// Parses `NAME[:ARG[,ARG]...]` (see the module documentation).
    pub fn parse(text: &str) -> Result<BalancerSpec, SpecError> {
        let text = text.trim();
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (text, None),
        };
        let entry = find(name).ok_or_else(|| {
            SpecError::Unknown(format!(
                "unknown balancer {text:?} (expected one of {}; parameters as in greedy:64)",
                names().collect::<Vec<_>>().join(", ")
            ))
        })?;
        let mut args = Vec::new();
        if let Some(rest) = rest {
            for (i, part) in rest.split(',').enumerate() {
                let part = part.trim();
                let (key, value) = match part.split_once('=') {
                    Some((k, v)) => (k.trim(), v.trim()),
                    None if i == 0 && !entry.params.is_empty() => (entry.params[0].key, part),
                    None => ("", part),
                };
                let bad = |why: String| SpecError::Unknown(format!("{text:?}: {why}"));
                let param = entry.params.iter().find(|p| p.key == key).ok_or_else(|| {
                    bad(format!(
                        "{name} has no parameter {key:?} (parameters: {})",
                        entry
                            .params
                            .iter()
                            .map(|p| p.key)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
                if !(param.check)(value) {
                    return Err(bad(format!("{key}={value:?}: expected {}", param.accepted)));
                }
                if args.iter().any(|(k, _)| *k == param.key) {
                    return Err(bad(format!("{key} given twice")));
                }
                args.push((param.key, value.to_string()));
            }
        }
        Ok(BalancerSpec {
            entry,
            args: Args(args),
            text: text.to_string(),
        })
    }

    /// The balancer's name.
    pub fn name(&self) -> &'static str {
        self.entry.name
    }

    /// The text it was parsed from (trimmed).
    pub fn label(&self) -> &str {
        &self.text
    }

    /// The registry entry.
    pub fn entry(&self) -> &'static Entry {
        self.entry
    }

    /// The arguments given.
    pub fn args(&self) -> &Args {
        &self.args
    }

    /// Units its training hands out at least per PU
    /// ([`Entry::training_units_per_pu`]).
    pub fn training_units_per_pu(&self, tuning: &Tuning) -> u64 {
        (self.entry.training_units_per_pu)(tuning)
    }

    /// Builds the balancer for `ctx`.
    pub fn build(&self, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, SpecError> {
        (self.entry.build)(&self.args, ctx)
            .map_err(|e| SpecError::Config(format!("{}: {e}", self.text)))
    }
}

/// Parses `text` and builds it over `pus` PUs and `total` units with the
/// default parameters (the simulator's and the tests' shortcut).
pub fn build(text: &str, pus: usize, total: u64) -> Result<Box<dyn Balancer + Send>, SpecError> {
    BalancerSpec::parse(text)?.build(&BuildContext {
        pus,
        total,
        tuning: &Tuning::default(),
        kinds: None,
        unit_s: None,
    })
}

/// `ipopt` or `fast` (the solver parameters).
pub(super) fn is_solver(v: &str) -> bool {
    matches!(v, "ipopt" | "fast")
}

/// The solver named by `args` (`solver=`), else `tuning`'s, else `default`.
pub(super) fn solver(
    args: &Args,
    tuning: &Tuning,
    default: crate::solve::Primary,
) -> crate::solve::Primary {
    use crate::solve::Primary;
    match args.get("solver") {
        Some("ipopt") => Primary::Ipopt,
        Some("fast") => Primary::Fast,
        _ => tuning.solver.unwrap_or(default),
    }
}

/// Parameters that only take a solver.
pub(super) const SOLVER_PARAM: Param = Param {
    key: "solver",
    accepted: "`ipopt` or `fast`",
    check: is_solver,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_never_start_with_heft() {
        for (i, e) in REGISTRY.iter().enumerate() {
            assert!(!e.name.starts_with("heft"), "{} maps to dmda", e.name);
            assert!(!e.summary.is_empty());
            assert!(REGISTRY[i + 1..].iter().all(|f| f.name != e.name));
        }
    }

    #[test]
    fn the_grammar_accepts_positional_and_keyed_arguments() {
        let s = BalancerSpec::parse("greedy:64").unwrap();
        assert_eq!(s.args().get("block"), Some("64"));
        assert_eq!(s, BalancerSpec::parse("greedy:block=64").unwrap());
        let s = BalancerSpec::parse(" plb-hec:solver=fast ").unwrap();
        assert_eq!((s.name(), s.label()), ("plb-hec", "plb-hec:solver=fast"));
        assert!(BalancerSpec::parse("static:speeds=1/4").is_ok());
        for bad in [
            "",
            "Greedy",
            "eager",
            "greedy:",
            "greedy:0",
            "greedy:x",
            "greedy:W/0",
            "plb-hac:solver=cplex",
            "plb-hac:ipopt=1",
            "hdss:1",
            "greedy:64,block=3",
            "static:speeds=1/x",
        ] {
            assert!(
                matches!(BalancerSpec::parse(bad), Err(SpecError::Unknown(_))),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn every_entry_builds_and_covers_in_the_simulator() {
        use crate::balance::scenarios::lin;
        use crate::balance::sim::{SimOptions, simulate};
        for e in REGISTRY {
            let pus = [lin(0.001, 100.0), lin(0.002, 300.0)];
            let mut b = build(e.name, 2, 5000).unwrap();
            let r = simulate(b.as_mut(), &pus, 5000, SimOptions::default())
                .unwrap_or_else(|err| panic!("{}: {err:?}", e.name));
            assert_eq!(r.units.iter().sum::<u64>(), 5000, "{}", e.name);
            assert_eq!(b.name(), e.name);
        }
    }

    /// Bad inputs for every balancer (issue 13 §5), in the simulator: no
    /// work, a PU 1000x slower than the other, a kernel whose time does not
    /// grow with the size, a PU whose every timing is zero. Every unit is
    /// processed exactly once and nothing divides by zero (a panic or a
    /// non-finite makespan fails the test).
    #[test]
    fn every_entry_survives_bad_inputs_with_exact_coverage() {
        use crate::balance::scenarios::lin;
        use crate::balance::sim::{SimOptions, simulate};
        let cases: Vec<(&str, Vec<crate::balance::sim::SimPu>, u64)> = vec![
            ("no work", vec![lin(0.001, 100.0), lin(0.001, 300.0)], 0),
            (
                "1000x slower PU",
                vec![lin(0.0, 1000.0), lin(0.0, 1.0)],
                3000,
            ),
            (
                "time independent of size",
                vec![lin(0.01, f64::INFINITY), lin(0.02, f64::INFINITY)],
                2000,
            ),
            (
                "a PU timed at zero",
                vec![lin(0.0, 500.0), lin(0.0, f64::INFINITY)],
                2000,
            ),
        ];
        for e in REGISTRY {
            for (what, pus, total) in &cases {
                let mut b = build(e.name, pus.len(), *total).unwrap();
                let r = simulate(b.as_mut(), pus, *total, SimOptions::default())
                    .unwrap_or_else(|err| panic!("{} / {what}: {err:?}", e.name));
                let mut seen = vec![0u8; *total as usize];
                for run in &r.runs {
                    for u in run.block.offset..run.block.end() {
                        seen[u as usize] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|&c| c == 1),
                    "{} / {what}: units not covered exactly once",
                    e.name
                );
                assert!(r.makespan.is_finite(), "{} / {what}", e.name);
            }
        }
    }

    #[test]
    fn greedy_fraction_of_w_and_solver_arguments_reach_the_balancer() {
        use crate::balance::scenarios::lin;
        use crate::balance::sim::{SimOptions, simulate};
        let pus = [lin(0.0, 100.0)];
        let mut g = build("greedy:W/16", 1, 1600).unwrap();
        let r = simulate(g.as_mut(), &pus, 1600, SimOptions::default()).unwrap();
        assert!(r.runs.iter().all(|x| x.block.len == 100));
        let e = build("static:speeds=1/2/3", 2, 10)
            .err()
            .expect("3 speeds, 2 PUs");
        assert!(
            matches!(e, SpecError::Config(ref m) if m.contains("speeds")),
            "{e}"
        );
    }
}
