//! The one table of scheduling policies a StarPU user selects by name
//! (`STARPU_SCHED`, `plb policies`): every balancer of the registry
//! ([`crate::balance::registry`]) and every task-graph policy
//! ([`crate::dag::DAG_POLICIES`]), each with the family that decides for
//! it in task mode. Names never start with `heft` (StarPU 1.3 maps any such
//! name to `dmda`; the registries' tests forbid it).

use std::sync::OnceLock;

use crate::balance::registry::{self, CENTRAL_QUEUE_BALANCER, Entry};
use crate::dag::{self, DagEntry};

/// Who decides for a policy's tasks in task mode.
#[derive(Debug, Clone, Copy)]
pub enum Decider {
    /// One central FIFO, the first capable idle worker takes the oldest
    /// task (the `greedy` balancer's task mode: the papers' greedy
    /// baseline, StarPU's `eager`).
    CentralQueue,
    /// Task mode's scheduler: epochs of like tasks balanced by this
    /// balancer, the rest on fallback queues by earliest finish.
    Epochs(&'static Entry),
    /// The task-graph scheduler, placing batches of ready tasks by HEFT or
    /// DADA.
    Graph(&'static DagEntry),
}

/// One policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Its `STARPU_SCHED` name.
    pub name: &'static str,
    /// One line for `plb policies` and `STARPU_SCHED=help`.
    pub summary: &'static str,
    /// Who decides for its tasks.
    pub decider: Decider,
}

/// Every policy: the registry's balancers in its order, then the
/// task-graph policies.
pub fn all() -> &'static [Policy] {
    static ALL: OnceLock<Vec<Policy>> = OnceLock::new();
    ALL.get_or_init(|| {
        let balancers = registry::REGISTRY.iter().map(|e| Policy {
            name: e.name,
            summary: e.summary,
            decider: if e.name == CENTRAL_QUEUE_BALANCER {
                Decider::CentralQueue
            } else {
                Decider::Epochs(e)
            },
        });
        let graphs = dag::DAG_POLICIES.iter().map(|e| Policy {
            name: e.name,
            summary: e.summary,
            decider: Decider::Graph(e),
        });
        balancers.chain(graphs).collect()
    })
}

/// The policy named exactly `name`.
pub fn find(name: &str) -> Option<&'static Policy> {
    all().iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_name_and_each_family_present() {
        let names: Vec<&str> = all().iter().map(|p| p.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            names.len(),
            registry::REGISTRY.len() + dag::DAG_POLICIES.len()
        );
        assert!(matches!(
            find("greedy").unwrap().decider,
            Decider::CentralQueue
        ));
        assert!(
            matches!(find("plb-hac").unwrap().decider, Decider::Epochs(e) if e.name == "plb-hac")
        );
        assert!(matches!(find("dada").unwrap().decider, Decider::Graph(e) if e.name == "dada"));
        assert!(names.iter().all(|n| !n.starts_with("heft")));
        assert!(find("eager").is_none());
    }
}
