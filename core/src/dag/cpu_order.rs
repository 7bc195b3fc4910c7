//! In which order a context of CPU workers alone (no accelerator among its
//! members) runs its ready tasks (`PLB_CPU_ORDER`): highest priority first,
//! as `dmdas` does, or in arrival order, as `eager` does.
//!
//! Arrival order runs a task soon after the tasks that wrote its inputs
//! (likely while those are still in the workers' caches); the
//! priorities' order runs the tasks of the critical path first, which
//! shortens a run only when workers would otherwise idle waiting for them.
//!
//! The default, [`CpuOrder::Auto`], keeps arrival order with at most
//! [`AUTO_MAX_CPU_WORKERS`] CPU workers and priorities from one more.
//! Measured (docs/results.md, twenty-ninth round): REAL, 2 CPU workers
//! (one 4x slower, EMULATED), StarPU's Cholesky and LU with tiles of 240,
//! arrival order ran `plb-heft` 0.94x and 0.95x as long (paired, 21
//! rounds; on Cholesky, traced, its tasks shorter); SIMULATED (no caches), it cost
//! 0.997–1.027x on 2 CPU workers, 1.004–1.058x on 3 and up to 1.30x on 24.

/// `PLB_CPU_ORDER`'s value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuOrder {
    /// [`CpuOrder::Arrival`] with at most [`AUTO_MAX_CPU_WORKERS`] CPU
    /// workers, otherwise [`CpuOrder::Priority`] (the default).
    Auto,
    /// Highest priority first (the tasks of one priority in arrival
    /// order), on the lines and in the ready list.
    Priority,
    /// Arrival order, ignoring priorities, on the lines and in the ready
    /// list.
    Arrival,
}

/// The most CPU workers for which [`CpuOrder::Auto`] keeps arrival order.
pub const AUTO_MAX_CPU_WORKERS: usize = 2;

impl CpuOrder {
    /// Whether a context of `workers` members, an accelerator's among them
    /// or not (`has_accelerator`), keeps priorities under this setting:
    /// every context with an accelerator does.
    pub fn by_priority(self, has_accelerator: bool, workers: usize) -> bool {
        has_accelerator
            || match self {
                CpuOrder::Auto => workers > AUTO_MAX_CPU_WORKERS,
                CpuOrder::Priority => true,
                CpuOrder::Arrival => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_context_of_cpu_workers_alone_follows_the_setting() {
        for workers in 1..=8 {
            assert!(CpuOrder::Priority.by_priority(false, workers));
            assert!(!CpuOrder::Arrival.by_priority(false, workers));
            assert_eq!(
                CpuOrder::Auto.by_priority(false, workers),
                workers > AUTO_MAX_CPU_WORKERS,
                "{workers} CPU workers"
            );
            for order in [CpuOrder::Auto, CpuOrder::Priority, CpuOrder::Arrival] {
                assert!(order.by_priority(true, workers), "{order:?}, {workers}");
            }
        }
    }
}
