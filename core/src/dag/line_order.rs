//! In which order an accelerator's line runs the placed tasks of one
//! priority (`PLB_LINE_ORDER`). In arrival order, as `dmdas` does; or
//! latest start first: the time a task was queued plus its slack then
//! ([`super::lines::Placed::latest_start_s`]), so a task on a critical
//! chain passes the queued tasks that can wait. Priorities still come
//! first, and tasks without a rank (no slack) keep arrival order behind
//! the ranked ones.
//!
//! The default, [`LineOrder::Auto`], orders by latest start where the
//! context's accelerators span at least [`AUTO_MIN_DEVICES`] memory nodes,
//! and by arrival otherwise. Measured on the SIMULATED study
//! (docs/results.md, twenty-sixth round): with 3 to 8 GPUs the order
//! shortened runs; with one GPU it lengthened them (traced on one run: an
//! update on the critical chain queued behind tasks due to start
//! earlier).

use super::decide::Member;
use crate::balance::WorkerKind;

/// The fewest accelerator memory nodes for which [`LineOrder::Auto`]
/// orders by latest start.
pub const AUTO_MIN_DEVICES: usize = 3;

/// `PLB_LINE_ORDER`'s value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOrder {
    /// [`LineOrder::LatestStart`] with at least [`AUTO_MIN_DEVICES`]
    /// accelerator memory nodes, otherwise [`LineOrder::Arrival`] (the
    /// default).
    Auto,
    /// Arrival order within a priority, on every line.
    Arrival,
    /// Latest start first within a priority, on the accelerators' lines
    /// whatever their number (CPU workers' lines keep arrival order).
    LatestStart,
}

impl LineOrder {
    /// Whether the accelerators' lines order by latest start in a context
    /// of `members` (CPU workers' lines never do).
    pub fn by_latest_start(self, members: &[Member]) -> bool {
        match self {
            LineOrder::Auto => super::prefetch::accelerator_nodes(members) >= AUTO_MIN_DEVICES,
            LineOrder::Arrival => false,
            LineOrder::LatestStart => true,
        }
    }

    /// Whether a line of a worker of `kind` orders by latest start, given
    /// [`LineOrder::by_latest_start`] of its context.
    pub fn applies_to(kind: WorkerKind, context_orders: bool) -> bool {
        context_orders && kind != WorkerKind::Cpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: usize, kind: WorkerKind, node: usize) -> Member {
        Member { id, kind, node }
    }

    #[test]
    fn auto_orders_by_latest_start_from_three_accelerator_nodes() {
        let mut members = vec![member(0, WorkerKind::Cpu, 0), member(1, WorkerKind::Cpu, 0)];
        for gpu in 1..=4 {
            members.push(member(gpu + 1, WorkerKind::Cuda, gpu));
            assert_eq!(
                LineOrder::Auto.by_latest_start(&members),
                gpu >= 3,
                "{gpu} GPUs"
            );
            assert!(!LineOrder::Arrival.by_latest_start(&members));
            assert!(LineOrder::LatestStart.by_latest_start(&members));
        }
        // Two workers on one accelerator node count once.
        let shared = vec![
            member(0, WorkerKind::Cuda, 1),
            member(1, WorkerKind::Cuda, 1),
            member(2, WorkerKind::OpenCl, 2),
        ];
        assert!(!LineOrder::Auto.by_latest_start(&shared));
        assert!(!LineOrder::applies_to(WorkerKind::Cpu, true));
        assert!(LineOrder::applies_to(WorkerKind::Cuda, true));
        assert!(!LineOrder::applies_to(WorkerKind::Cuda, false));
    }
}
