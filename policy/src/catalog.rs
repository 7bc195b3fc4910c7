//! The policies this library registers with StarPU: `plb-core`'s one
//! table ([`plb_core::policies`]: every balancer of the registry, the
//! task-graph policies, and which family decides for each), with the C
//! strings StarPU needs. No StarPU needed: shared by the policy library and
//! the `plb` command-line tool.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use plb_core::dag::DagEntry;
pub use plb_core::policies::Decider;
use plb_core::policies::{self, Policy};

/// One registered scheduling policy.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInfo {
    /// The value users give to `STARPU_SCHED` (NUL-terminated for StarPU).
    pub c_name: &'static CStr,
    /// One-line description shown by `STARPU_SCHED=help` and `plb policies`.
    pub c_description: &'static CStr,
    /// The policy.
    pub policy: &'static Policy,
}

impl PolicyInfo {
    /// The policy name as a Rust string.
    pub fn name(&self) -> &'static str {
        self.policy.name
    }

    /// The description as a Rust string.
    pub fn description(&self) -> &'static str {
        self.policy.summary
    }

    /// Who decides for its tasks.
    pub fn decider(&self) -> Decider {
        self.policy.decider
    }

    /// Whether task mode runs the central FIFO ([`crate::central_queue`]) rather
    /// than the task-mode scheduler with a balancer's epochs.
    pub fn is_central_fifo(&self) -> bool {
        matches!(self.policy.decider, Decider::CentralQueue)
    }

    /// The task-graph policy behind it, if it is one.
    pub fn dag(&self) -> Option<&'static DagEntry> {
        match self.policy.decider {
            Decider::Graph(e) => Some(e),
            _ => None,
        }
    }
}

/// Leaks a C copy of a registry string (a few bytes per entry, once).
fn leak_c(s: &str) -> &'static CStr {
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    Box::leak(c.into_boxed_c_str())
}

/// Every policy the library registers, in [`plb_core::policies::all`]'s
/// order.
pub fn policies() -> &'static [PolicyInfo] {
    static POLICIES: OnceLock<Vec<PolicyInfo>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        policies::all()
            .iter()
            .map(|policy| PolicyInfo {
                c_name: leak_c(policy.name),
                c_description: leak_c(policy.summary),
                policy,
            })
            .collect()
    })
}

/// Looks a policy up by its exact `STARPU_SCHED` name.
pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    policies().iter().find(|p| p.name() == name)
}

/// The registered names, comma-separated (for error messages).
pub fn names() -> String {
    policies()
        .iter()
        .map(PolicyInfo::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The policy names of StarPU 1.3.10 and 1.4.10 (`STARPU_SCHED=help`),
/// used with the running StarPU's own list (which the adapter adds) to tell
/// a name of StarPU's from a mistyped one of ours.
pub const STARPU_POLICY_NAMES: &[&str] = &[
    "eager",
    "prio",
    "random",
    "lws",
    "ws",
    "dm",
    "dmda",
    "dmdap",
    "dmdar",
    "dmdas",
    "dmdasd",
    "pheft",
    "peager",
    "heteroprio",
    "graph_test",
    "modular-eager",
    "modular-eager-prefetching",
    "modular-eager-prio",
    "modular-gemm",
    "modular-prio",
    "modular-prio-prefetching",
    "modular-random",
    "modular-random-prio",
    "modular-random-prefetching",
    "modular-random-prio-prefetching",
    "modular-prandom",
    "modular-prandom-prio",
    "modular-ws",
    "modular-dmda",
    "modular-dmdap",
    "modular-dmdar",
    "modular-dmdas",
    "modular-heft",
    "modular-heft-prio",
    "modular-heft2",
    "modular-heteroprio",
    "modular-heteroprio-heft",
    "modular-pheft",
];

/// Levenshtein distance (names are short ASCII words).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Our policy whose name `name` most likely misspells, if it looks like
/// one of ours rather than one of StarPU's (`starpu_names`): a case
/// variant of ours, a `plb`-prefixed name, or a name at most two edits
/// from one of ours and closer to it than to any of StarPU's.
fn lookalike(name: &str, starpu_names: &[&str]) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let nearest = policies()
        .iter()
        .map(|p| (distance(&lower, p.name()), p.name()))
        .min()?;
    let nearest_starpu = starpu_names
        .iter()
        .chain(STARPU_POLICY_NAMES)
        .map(|n| distance(&lower, n))
        .min()
        .unwrap_or(usize::MAX);
    let close = lower.len() >= 3 && nearest.0 <= 2 && nearest.0 < nearest_starpu;
    (lower.starts_with("plb") || close).then_some(nearest.1)
}

/// What a scheduling policy name given to StarPU (`STARPU_SCHED`, a
/// configuration's or a context's policy name) means with this library
/// loaded: `Ok(Some)` one of our policies, `Ok(None)` a name for StarPU to
/// resolve (its own, `help`, or one that does not look like ours), `Err`
/// a name that means one of ours but that neither we nor StarPU can run —
/// our name with arguments (policies take the bare name; their parameters
/// are the `PLB_*` variables) or a name that looks like a misspelling of
/// ours. StarPU would warn and run its default policy for those; the
/// adapter refuses them instead. `starpu_names` are the running StarPU's
/// policy names ([`STARPU_POLICY_NAMES`] is added).
pub fn resolve(name: &str, starpu_names: &[&str]) -> Result<Option<&'static PolicyInfo>, String> {
    if let Some(p) = find(name) {
        return Ok(Some(p));
    }
    let is_starpus = |n: &str| {
        // StarPU maps any name starting with "heft" to dmda.
        n == "help"
            || n.starts_with("heft")
            || starpu_names.contains(&n)
            || STARPU_POLICY_NAMES.contains(&n)
    };
    if name.is_empty() || is_starpus(name) {
        return Ok(None);
    }
    let (base, args) = match name.split_once(':') {
        Some((b, a)) => (b, Some(a)),
        None => (name, None),
    };
    let advice = "StarPU would silently run its default policy instead";
    if let (Some(p), Some(_)) = (find(base), args) {
        let why = match plb_core::balance::registry::BalancerSpec::parse(name) {
            Ok(_) => "these arguments are for the divisible-load API and the simulator".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(format!(
            "policy name \"{name}\": our policies take no arguments here ({why}); {advice}. \
             Give the bare name `{}` and set its parameters with the PLB_* variables \
             (docs/usage.md, \"Balancer names\")",
            p.name()
        ));
    }
    if is_starpus(base) {
        return Ok(None);
    }
    match lookalike(base, starpu_names) {
        Some(near) => Err(format!(
            "policy name \"{name}\" is not a policy of this library (did you mean `{near}`?); \
             {advice}. Ours: {}",
            names()
        )),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plb_core::balance::registry;
    use plb_core::dag;

    #[test]
    fn every_registry_entry_is_a_policy() {
        assert_eq!(
            policies().len(),
            registry::REGISTRY.len() + dag::DAG_POLICIES.len()
        );
        for e in dag::DAG_POLICIES {
            let p = find(e.name).expect("registered");
            assert!(p.dag().is_some() && !p.is_central_fifo());
            assert!(!e.name.starts_with("heft"));
        }
        for e in registry::REGISTRY {
            let p = find(e.name).expect("registered");
            assert_eq!(p.c_name.to_str().unwrap(), e.name);
            assert_eq!(p.description(), e.summary);
        }
    }

    #[test]
    fn find_is_exact() {
        assert_eq!(find("greedy").map(|p| p.name()), Some("greedy"));
        assert!(find("greed").is_none());
        assert!(find("GREEDY").is_none());
        assert!(find("").is_none());
        assert!(find("greedy:64").is_none(), "policies take no parameters");
        assert!(names().contains("greedy"));
        for n in ["plb-hac", "plb-hec", "hdss", "acosta", "static"] {
            assert_eq!(find(n).map(|p| p.name()), Some(n));
        }
    }

    #[test]
    fn names_with_arguments_or_misspelled_are_refused() {
        let none: &[&str] = &[];
        assert_eq!(
            resolve("plb-hac", none).unwrap().map(|p| p.name()),
            Some("plb-hac")
        );
        for n in [
            "eager",
            "dmda",
            "lws",
            "help",
            "heft",
            "heft-tm",
            "",
            "modular-heft",
            "foo",
        ] {
            assert!(resolve(n, none).unwrap().is_none(), "{n}");
        }
        // The running StarPU's own names are StarPU's too.
        assert!(resolve("plb-custom", &["plb-custom"]).unwrap().is_none());
        let e = resolve("plb-heft:bogus=1", none).unwrap_err();
        assert!(
            e.starts_with("policy name \"plb-heft:bogus=1\": our policies take no arguments here")
                && e.contains("bare name `plb-heft`")
                && e.contains("default policy"),
            "{e}"
        );
        let e = resolve("plb-hac:solver=fast", none).unwrap_err();
        assert!(e.contains("for the divisible-load API"), "{e}");
        let e = resolve("plb-hac:solver=nope", none).unwrap_err();
        assert!(e.contains("solver"), "{e}");
        for (typo, near) in [
            ("plb-hax", "plb-hac"),
            ("plb-heft2", "plb-heft"),
            ("PLB-HAC", "plb-hac"),
            ("greedyy", "greedy"),
            ("dada-pc", "dada-cp"),
            ("hdsss", "hdss"),
            ("plb-hax:solver=fast", "plb-hac"),
        ] {
            let e = resolve(typo, none).unwrap_err();
            assert!(
                e.contains(&format!("did you mean `{near}`?")),
                "{typo}: {e}"
            );
        }
        // Closer to one of StarPU's than to ours: left to StarPU.
        for n in ["dmdass", "dma", "eagerr", "dmda:1"] {
            assert!(resolve(n, none).unwrap().is_none(), "{n}");
        }
    }
}
