//! In which order a context of CPU workers alone (no accelerator among its
//! members) runs its ready tasks (`PLB_CPU_ORDER`): highest priority first,
//! as `dmdas` does, or in arrival order, as `eager` does.
//!
//! Arrival order runs a task soon after the tasks that wrote its inputs,
//! while they are still in the caches of the workers' shared memory; the
//! priorities' order runs the tasks of the critical path first, which
//! shortens a run only when workers would otherwise idle waiting for them.

/// `PLB_CPU_ORDER`'s value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuOrder {
    /// Highest priority first (the tasks of one priority in arrival
    /// order), on the lines and in the ready list.
    Priority,
    /// Arrival order, ignoring priorities, on the lines and in the ready
    /// list.
    Arrival,
}

impl CpuOrder {
    /// Whether a context whose members include an accelerator
    /// (`has_accelerator`) keeps priorities under this setting: every
    /// context with an accelerator does.
    pub fn by_priority(self, has_accelerator: bool) -> bool {
        has_accelerator || self == CpuOrder::Priority
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_context_of_cpu_workers_alone_follows_the_setting() {
        assert!(CpuOrder::Priority.by_priority(false));
        assert!(!CpuOrder::Arrival.by_priority(false));
        assert!(CpuOrder::Arrival.by_priority(true));
        assert!(CpuOrder::Priority.by_priority(true));
    }
}
