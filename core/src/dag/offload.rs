//! HEFT's CPU offload (`PLB_CPU_OFFLOAD`): a task the accelerators speed
//! up little goes to a CPU core although an accelerator would finish it
//! first, when its slack allows.
//!
//! HEFT gives each task the worker that finishes it first. Where the
//! accelerators are the bottleneck, that puts the factorisations of
//! Cholesky and LU (POTRF, GETRF: 0.4 to 3.5 times faster on the sampled
//! GPUs, against 28 to 47 times for GEMM) on the accelerators, whose time
//! they then take from the work those speed up most. The area bound's
//! split does the opposite: the least accelerated work goes to the CPUs
//! first. So a task whose earliest finish is on an accelerator goes to the
//! CPU worker with the lowest score instead when
//!
//! - its speedup (best CPU time over its time on that accelerator) is below
//!   [`SPEEDUP_FRACTION`] of the highest of the codelets' speedups, each
//!   codelet's as its last task was priced (so a workload of one codelet
//!   is never offloaded, and a passing misprediction does not stay: with
//!   the highest speedup ever seen, a GPU model fitted on its first samples
//!   made GEMM look 57 times faster there instead of 28, and a cold run of
//!   Cholesky with 320-wide tiles on sirocco sent 36409 of 37820 tasks to
//!   the CPUs, 1527 ms instead of 494);
//! - that CPU worker's score (its predicted finish, data penalty included,
//!   from now), less the task's accelerator time, is at most
//!   [`SLACK_FRACTION`] of the task's slack ([`super::DagTask::slack_s`]:
//!   the remaining work spread over the machine, less the longest chain of
//!   work from the task to the end of the graph; a task without one, when
//!   no ranks are kept, stays);
//! - that delay is at most [`BACKLOG_FACTOR`] times the accelerator's
//!   backlog (it has queued work to run meanwhile);
//! - the workers include at least [`CPUS_PER_ACCELERATOR`] CPU workers per
//!   accelerator memory node.
//!
//! Measured on the SIMULATED study (docs/results.md, twentieth round).
//! Without the speedup test (every task within its slack) runs were
//! slower (tenth round); without the CPU count, idgraf with its 8 GPUs
//! and 4 CPU workers ran LU 19200 in 2366 ms instead of 1883. Without the
//! backlog test, StarPU-MPI's Cholesky on 4 SIMULATED mirage nodes took
//! 1262 ms instead of 927 (each node sees only its part of the graph, so
//! its ranks are short and its slack long), and graphs of 220 to 385
//! tasks with all the GPUs lost up to 16 %.

use super::{DagTask, DagWorker, distinct_accelerator_nodes};

/// A task is offloaded only if its speedup is below this fraction of the
/// highest of the codelets' speedups.
pub const SPEEDUP_FRACTION: f64 = 0.5;

/// The CPU's score less the task's accelerator time may use at most this
/// fraction of the task's slack.
pub const SLACK_FRACTION: f64 = 0.5;

/// The CPU's score less the task's accelerator time may be at most this
/// many times the accelerator's backlog.
pub const BACKLOG_FACTOR: f64 = 2.0;

/// Offloading needs at least this many CPU workers per accelerator memory
/// node among the batch's workers.
pub const CPUS_PER_ACCELERATOR: usize = 2;

/// The accelerator that finishes a task first, as HEFT sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chosen {
    /// Its predicted time for the task (seconds).
    pub cost_s: f64,
    /// Its backlog: the predicted work queued and running on it (seconds).
    pub backlog_s: f64,
}

/// The offload rule for one batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offload {
    /// Tasks with a speedup below this are candidates.
    below_speedup: f64,
}

impl Offload {
    /// The rule for a batch placed on `workers`, given the highest of the
    /// codelets' speedups; `None` when the workers have too few CPU workers per
    /// accelerator memory node, or no accelerator.
    pub fn for_batch(most_accelerated: f64, workers: &[DagWorker]) -> Option<Offload> {
        let cpus = workers.iter().filter(|w| !w.is_accelerator()).count();
        let nodes = distinct_accelerator_nodes(workers.iter().map(|w| (w.kind, w.node)));
        let enough = nodes > 0 && cpus >= CPUS_PER_ACCELERATOR * nodes;
        (enough && most_accelerated.is_finite() && most_accelerated > 0.0).then_some(Offload {
            below_speedup: most_accelerated * SPEEDUP_FRACTION,
        })
    }

    /// Whether `task`, whose earliest finish is on the accelerator
    /// `chosen`, goes instead to a CPU worker whose score for it is
    /// `cpu_score_s` (seconds from now).
    pub fn takes(
        &self,
        task: &DagTask,
        workers: &[DagWorker],
        chosen: Chosen,
        cpu_score_s: f64,
    ) -> bool {
        let Some(cpu) = task.best_cost(workers, |w| !w.is_accelerator()) else {
            return false;
        };
        let a = chosen.cost_s;
        if !(a > 0.0 && task.slack_s.is_finite()) {
            return false;
        }
        let delay = cpu_score_s - a;
        cpu / a < self.below_speedup
            && delay <= SLACK_FRACTION * task.slack_s
            && delay <= BACKLOG_FACTOR * chosen.backlog_s
    }
}

/// The speedup of a task priced by `cost_s` on workers of kinds
/// `is_accelerator` (best CPU time over best accelerator time), if it has
/// both and it is finite.
pub fn priced_speedup(
    cost_s: &[Option<f64>],
    is_accelerator: impl Fn(usize) -> bool,
) -> Option<f64> {
    let best = |acc: bool| {
        cost_s
            .iter()
            .enumerate()
            .filter(|&(m, _)| is_accelerator(m) == acc)
            .filter_map(|(_, c)| c.filter(|c| c.is_finite() && *c > 0.0))
            .min_by(f64::total_cmp)
    };
    let s = best(false)? / best(true)?;
    s.is_finite().then_some(s)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn needs_two_cpu_workers_per_accelerator_node() {
        let four_cpus_two_gpus = [
            cpu(0.0),
            cpu(0.0),
            cpu(0.0),
            cpu(0.0),
            gpu(1, 0.0),
            gpu(2, 0.0),
        ];
        assert!(Offload::for_batch(30.0, &four_cpus_two_gpus).is_some());
        let three_cpus = &four_cpus_two_gpus[1..];
        assert!(Offload::for_batch(30.0, three_cpus).is_none());
        // Two CUDA workers on one node count as one accelerator.
        let one_node = [cpu(0.0), cpu(0.0), gpu(1, 0.0), gpu(1, 0.0)];
        assert!(Offload::for_batch(30.0, &one_node).is_some());
        // No accelerator, or no speedup seen yet: no rule.
        assert!(Offload::for_batch(30.0, &[cpu(0.0), cpu(0.0)]).is_none());
        assert!(Offload::for_batch(0.0, &one_node).is_none());
    }

    #[test]
    fn a_weakly_accelerated_task_with_slack_is_taken() {
        let w = [cpu(0.0), cpu(0.0), gpu(1, 0.0)];
        let o = Offload::for_batch(30.0, &w).unwrap();
        // A POTRF-like task: 2 s on a CPU, 1 s on the GPU (speedup 2 < 15),
        // whose line holds 3 s of work.
        let gpu_busy = Chosen {
            cost_s: 1.0,
            backlog_s: 3.0,
        };
        let mut t = task(&w, 2.0, 1.0);
        t.slack_s = 4.0;
        // The CPU's score 2 s: 1 s later than the GPU's time, within half
        // the slack (2 s) and twice the GPU's backlog.
        assert!(o.takes(&t, &w, gpu_busy, 2.0));
        // 3 s later: past half the slack.
        assert!(!o.takes(&t, &w, gpu_busy, 4.0));
        // No slack, or none known (no ranks: infinite), keeps it.
        t.slack_s = 0.0;
        assert!(!o.takes(&t, &w, gpu_busy, 2.0));
        t.slack_s = f64::INFINITY;
        assert!(!o.takes(&t, &w, gpu_busy, 2.0));
    }

    #[test]
    fn the_accelerator_must_have_work_for_the_detour() {
        let w = [cpu(0.0), cpu(0.0), gpu(1, 0.0)];
        let o = Offload::for_batch(30.0, &w).unwrap();
        let mut t = task(&w, 2.0, 1.0);
        t.slack_s = 100.0;
        // 1 s later on the CPU: taken with 0.5 s of backlog on the GPU
        // (twice it is the delay), not with 0.4 s nor with an idle GPU.
        let with = |backlog_s| Chosen {
            cost_s: 1.0,
            backlog_s,
        };
        assert!(o.takes(&t, &w, with(0.5), 2.0));
        assert!(!o.takes(&t, &w, with(0.4), 2.0));
        assert!(!o.takes(&t, &w, with(0.0), 2.0));
    }

    #[test]
    fn a_strongly_accelerated_task_stays() {
        let w = [cpu(0.0), cpu(0.0), gpu(1, 0.0)];
        let o = Offload::for_batch(30.0, &w).unwrap();
        let gpu_busy = Chosen {
            cost_s: 1.0,
            backlog_s: 100.0,
        };
        // Speedup 20: above half the highest seen (15).
        let mut t = task(&w, 20.0, 1.0);
        t.slack_s = 100.0;
        assert!(!o.takes(&t, &w, gpu_busy, 20.0));
        // With 50 the highest, 20 is below 25.
        let o = Offload::for_batch(50.0, &w).unwrap();
        assert!(o.takes(&t, &w, gpu_busy, 20.0));
    }

    #[test]
    fn speedup_of_a_priced_task() {
        let acc = |m: usize| m >= 2;
        let s = priced_speedup(&[Some(30.0), Some(20.0), Some(2.0), None], acc);
        assert_eq!(s, Some(10.0));
        assert_eq!(priced_speedup(&[Some(3.0), None, None], acc), None);
        assert_eq!(priced_speedup(&[None, None, Some(1.0)], acc), None);
    }
}
