//! The task-graph policies' lines: each worker's queue of placed tasks
//! ([`WorkerQueues`], `dmda`'s expected start, length and end, ordered by
//! priority as `dmdas`) holding [`Placed`] tasks, which carry every
//! worker's predictions from their placement.
//!
//! Pops prefer, among the tasks of the head's priority, the first whose
//! data is already on the worker (`dmdar`'s ready-data-first; the caller
//! says which are). An idle worker steals only a task it would finish
//! before the worker holding it would (its own predicted transfer and
//! compute against the victim's predicted end of that task).

pub use crate::worker_queues::{READY_LOOKAHEAD, RUNNING_CAP};
use crate::worker_queues::{VictimOrder, WorkerQueues};

/// A task placed on a worker, with what the placement predicted.
#[derive(Debug)]
pub struct Placed<T> {
    /// The task.
    pub task: T,
    /// Its priority (higher first).
    pub priority: i32,
    /// Predicted compute seconds on each worker (`None`: cannot run it or
    /// no prediction), as computed at placement.
    pub cost_s: Vec<Option<f64>>,
    /// Predicted transfer seconds to each worker, as computed at placement.
    pub transfer_s: Vec<f64>,
}

impl<T> Placed<T> {
    /// A placed task.
    pub fn new(task: T, priority: i32, cost_s: Vec<Option<f64>>, transfer_s: Vec<f64>) -> Self {
        Placed {
            task,
            priority,
            cost_s,
            transfer_s,
        }
    }
}

/// Every worker's line.
pub type Lines<T> = WorkerQueues<Placed<T>>;

impl<T> WorkerQueues<Placed<T>> {
    /// Queues `p` on `worker`, where it is predicted to take `est_s`
    /// seconds; returns it when `worker` has no line.
    pub fn push_placed(
        &mut self,
        worker: usize,
        p: Placed<T>,
        est_s: f64,
    ) -> Result<(), Placed<T>> {
        let priority = p.priority;
        self.push(worker, p, priority, est_s)
    }

    /// `worker` (idle at `now`) takes from the line with the latest expected
    /// end the first task it would finish earlier than that line's worker:
    /// its transfer plus compute against the victim's predicted end of the
    /// task. Tasks without a prediction for the thief are never stolen.
    /// Returns the task with the thief's predicted seconds.
    pub fn steal_placed(&mut self, worker: usize, now: f64) -> Option<(Placed<T>, f64)> {
        let order = VictimOrder::LatestEnd;
        let (_, p, _, cost) = self.steal(worker, now, order, |_, q: &Placed<T>, ahead| {
            let cost = q.cost_s.get(worker).copied().flatten()?;
            let transfer = q.transfer_s.get(worker).copied().unwrap_or(0.0);
            (transfer.max(0.0) + cost < ahead.end_s).then_some(cost)
        })?;
        Some((p, cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(id: u32, prio: i32, costs: &[Option<f64>]) -> Placed<u32> {
        Placed::new(id, prio, costs.to_vec(), vec![0.0; costs.len()])
    }

    #[test]
    fn an_idle_worker_steals_only_what_it_finishes_first() {
        let mut l = Lines::new(2);
        // Worker 0 holds three tasks of 1 s each; the thief takes 2.5 s for
        // one (including 0.5 s of transfer).
        for id in 0..3 {
            let mut p = placed(id, 0, &[Some(1.0), Some(2.0)]);
            p.transfer_s = vec![0.0, 0.5];
            l.push_placed(0, p, 1.0).unwrap();
        }
        // Finishing at 2.5 beats only the third task (ends at 3).
        let (s, cost) = l.steal_placed(1, 0.0).expect("a gain");
        assert_eq!((s.task, cost), (2, 2.0));
        // The remaining two end at 1 and 2: no gain.
        assert!(l.steal_placed(1, 0.0).is_none());
        // Unknown predictions are never stolen.
        l.push_placed(0, placed(9, 0, &[Some(1.0), None]), 1.0)
            .unwrap();
        l.push_placed(0, placed(10, 0, &[Some(1.0), None]), 1.0)
            .unwrap();
        assert!(l.steal_placed(1, 0.0).is_none());
        assert_eq!(l.held(), 4);
    }
}
