//! The task-graph policies' lines: each worker's queue of placed tasks
//! ([`WorkerQueue`], `dmda`'s expected start, length and end, ordered by
//! priority as `dmdas`; one lock per worker in the StarPU adapter, reached
//! through [`QueueSet`]) holding [`Placed`] tasks, which carry every
//! worker's predictions from their placement.
//!
//! Pops prefer, among the tasks of the head's priority, the first whose
//! data is already on the worker (`dmdar`'s ready-data-first; the caller
//! says which are). An idle worker steals only a task it would finish
//! before the worker holding it would (its own predicted transfer, scaled
//! as the caller says, and compute against the victim's predicted end of
//! that task).

use crate::worker_queues::{QueueSet, WorkerQueue, steal_latest_end};
pub use crate::worker_queues::{READY_LOOKAHEAD, RUNNING_CAP};

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

/// One worker's line.
pub type Line<T> = WorkerQueue<Placed<T>>;

/// `thief` (idle at `now`) takes, from the line among `victims` with the
/// latest expected end that has one, the first task it would finish
/// earlier than that line's worker: its transfer (the placement's
/// prediction times `transfer_share`) plus compute against the victim's
/// predicted end of the task. Tasks without a prediction for the thief are
/// never stolen. Each line is reached alone. Returns the task with the
/// thief's predicted seconds.
pub fn steal_placed<T>(
    lines: &impl QueueSet<Placed<T>>,
    victims: impl IntoIterator<Item = usize>,
    thief: usize,
    now: f64,
    transfer_share: f64,
) -> Option<(Placed<T>, f64)> {
    let (_, p, _, cost) =
        steal_latest_end(lines, victims, thief, now, |_, q: &Placed<T>, ahead| {
            let cost = q.cost_s.get(thief).copied().flatten()?;
            let transfer = q.transfer_s.get(thief).copied().unwrap_or(0.0);
            (transfer.max(0.0) * transfer_share + cost < ahead.end_s).then_some(cost)
        })?;
    Some((p, cost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker_queues::PlainQueues;

    fn placed(id: u32, prio: i32, costs: &[Option<f64>]) -> Placed<u32> {
        Placed::new(id, prio, costs.to_vec(), vec![0.0; costs.len()])
    }

    #[test]
    fn an_idle_worker_steals_only_what_it_finishes_first() {
        let l = PlainQueues::new(2);
        let push = |p: Placed<u32>| l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
        // Worker 0 holds three tasks of 1 s each; the thief takes 2.5 s for
        // one (including 0.5 s of transfer).
        for id in 0..3 {
            let mut p = placed(id, 0, &[Some(1.0), Some(2.0)]);
            p.transfer_s = vec![0.0, 0.5];
            push(p);
        }
        // Finishing at 2.5 beats only the third task (ends at 3).
        let (s, cost) = steal_placed(&l, [0, 1], 1, 0.0, 1.0).expect("a gain");
        assert_eq!((s.task, cost), (2, 2.0));
        // The remaining two end at 1 and 2: no gain.
        assert!(steal_placed(&l, [0, 1], 1, 0.0, 1.0).is_none());
        // Unknown predictions are never stolen.
        push(placed(9, 0, &[Some(1.0), None]));
        push(placed(10, 0, &[Some(1.0), None]));
        assert!(steal_placed(&l, [0, 1], 1, 0.0, 1.0).is_none());
        assert_eq!(l.held(), 4);
        // Only the victims named are looked at.
        push(placed(11, 0, &[Some(1.0), Some(0.1)]));
        assert!(steal_placed(&l, [1], 1, 0.0, 1.0).is_none());
        assert_eq!(steal_placed(&l, [0], 1, 0.0, 1.0).unwrap().0.task, 11);
    }

    #[test]
    fn the_thiefs_transfer_counts_as_scaled() {
        let l = PlainQueues::new(2);
        // Worker 0 holds two tasks of 1 s; the thief computes one in 0.5 s
        // but its data is predicted at 2 s: at full weight no gain (2.5
        // against ends of 1 and 2), at a quarter (0.5 + 0.5 = 1 < 2) the
        // second is taken.
        for id in 0..2 {
            let mut p = placed(id, 0, &[Some(1.0), Some(0.5)]);
            p.transfer_s = vec![0.0, 2.0];
            l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
        }
        assert!(steal_placed(&l, [0], 1, 0.0, 1.0).is_none());
        let (s, cost) = steal_placed(&l, [0], 1, 0.0, 0.25).expect("a gain");
        assert_eq!((s.task, cost), (1, 0.5));
    }
}
