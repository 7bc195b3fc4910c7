//! The policies this library registers with StarPU: `greedy` (the central
//! FIFO baseline of task mode), every other balancer of `plb-core`'s
//! registry ([`plb_core::balance::registry`]) and the task-graph policies
//! ([`plb_core::dag::DAG_POLICIES`]: `plb-heft`, `dada`, `dada-cp`), with
//! their one-line summaries. No StarPU needed: shared by the policy library and the `plb`
//! command-line tool. Names never start with `heft` (StarPU 1.3 maps any
//! such name to `dmda`; the registry's tests forbid it).

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use plb_core::balance::registry::{self, Entry};
use plb_core::dag::{self, DagEntry};

/// What a policy runs.
#[derive(Debug, Clone, Copy)]
pub enum PolicyKind {
    /// A registry balancer: the central FIFO for `greedy`, task mode's
    /// epochs and fallback queues for the others.
    Balancer(&'static Entry),
    /// A task-graph policy ([`crate::dag_mode`]).
    Dag(&'static DagEntry),
}

impl PolicyKind {
    /// The `STARPU_SCHED` name and the one-line summary.
    fn name_and_summary(self) -> (&'static str, &'static str) {
        match self {
            PolicyKind::Balancer(e) => (e.name, e.summary),
            PolicyKind::Dag(e) => (e.name, e.summary),
        }
    }
}

/// One registered scheduling policy.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInfo {
    /// The value users give to `STARPU_SCHED` (NUL-terminated for StarPU).
    pub c_name: &'static CStr,
    /// One-line description shown by `STARPU_SCHED=help` and `plb policies`.
    pub c_description: &'static CStr,
    /// What it runs.
    pub kind: PolicyKind,
}

impl PolicyInfo {
    /// The policy name as a Rust string.
    pub fn name(&self) -> &'static str {
        self.kind.name_and_summary().0
    }

    /// The description as a Rust string.
    pub fn description(&self) -> &'static str {
        self.kind.name_and_summary().1
    }

    /// Whether task mode runs the central FIFO ([`crate::central_queue`]) rather
    /// than the task-mode scheduler with this balancer's epochs.
    pub fn is_central_fifo(&self) -> bool {
        self.name() == "greedy"
    }

    /// The task-graph policy behind it, if it is one.
    pub fn dag(&self) -> Option<&'static DagEntry> {
        match self.kind {
            PolicyKind::Dag(e) => Some(e),
            PolicyKind::Balancer(_) => None,
        }
    }
}

/// Leaks a C copy of a registry string (a few bytes per entry, once).
fn leak_c(s: &str) -> &'static CStr {
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    Box::leak(c.into_boxed_c_str())
}

/// Every policy the library registers: the registry's balancers in its
/// order, then the task-graph policies.
pub fn policies() -> &'static [PolicyInfo] {
    static POLICIES: OnceLock<Vec<PolicyInfo>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let balancers = registry::REGISTRY.iter().map(PolicyKind::Balancer);
        let graphs = dag::DAG_POLICIES.iter().map(PolicyKind::Dag);
        balancers
            .chain(graphs)
            .map(|kind| {
                let (name, summary) = kind.name_and_summary();
                PolicyInfo {
                    c_name: leak_c(name),
                    c_description: leak_c(summary),
                    kind,
                }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
