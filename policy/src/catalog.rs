//! The policies this library registers: names and one-line descriptions.
//!
//! Plain data with no StarPU dependency, shared by the policy library and
//! the `plb` command-line tool. Names must not start with `heft`: StarPU 1.3
//! silently maps any such name to `dmda`.

use std::ffi::CStr;

/// One registered scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyInfo {
    /// The value users give to `STARPU_SCHED` (NUL-terminated for StarPU).
    pub c_name: &'static CStr,
    /// One-line description shown by `STARPU_SCHED=help` and `plb policies`.
    pub c_description: &'static CStr,
}

impl PolicyInfo {
    /// The policy name as a Rust string.
    pub fn name(&self) -> &'static str {
        self.c_name.to_str().unwrap_or("?")
    }

    /// The description as a Rust string.
    pub fn description(&self) -> &'static str {
        self.c_description.to_str().unwrap_or("?")
    }
}

/// Every policy the library registers, in the order they are listed.
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        c_name: c"greedy",
        c_description: c"plb greedy baseline: central FIFO, each ready task to the first idle worker able to run it",
    },
    PolicyInfo {
        c_name: c"plb-hac",
        c_description: c"plb-hac (task mode: per-worker/codelet fitted models, earliest predicted finish, idle workers steal; divisible mode: PLB-HAC balancer)",
    },
    PolicyInfo {
        c_name: c"plb-hec",
        c_description: c"plb-hec (task mode: per-worker/codelet fitted models, earliest predicted finish, idle workers steal; divisible mode: PLB-HeC balancer)",
    },
    PolicyInfo {
        c_name: c"hdss",
        c_description: c"hdss (task mode: per-worker/codelet fitted models, earliest predicted finish, idle workers steal; divisible mode: HDSS balancer)",
    },
    PolicyInfo {
        c_name: c"acosta",
        c_description: c"acosta (task mode: per-worker/codelet fitted models, earliest predicted finish, idle workers steal; divisible mode: Acosta balancer)",
    },
];

/// Looks a policy up by its exact `STARPU_SCHED` name.
pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    POLICIES.iter().find(|p| p.name() == name)
}

/// The registered names, comma-separated (for error messages).
pub fn names() -> String {
    POLICIES
        .iter()
        .map(PolicyInfo::name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_never_start_with_heft() {
        for (i, p) in POLICIES.iter().enumerate() {
            assert!(
                !p.name().starts_with("heft"),
                "{} would be mapped to dmda",
                p.name()
            );
            assert!(!p.name().is_empty() && !p.description().is_empty());
            assert!(POLICIES[i + 1..].iter().all(|q| q.name() != p.name()));
        }
    }

    #[test]
    fn find_is_exact() {
        assert_eq!(find("greedy").map(|p| p.name()), Some("greedy"));
        assert!(find("greed").is_none());
        assert!(find("GREEDY").is_none());
        assert!(find("").is_none());
        assert!(names().contains("greedy"));
        for n in ["plb-hac", "plb-hec", "hdss", "acosta"] {
            assert_eq!(find(n).map(|p| p.name()), Some(n));
        }
    }
}
