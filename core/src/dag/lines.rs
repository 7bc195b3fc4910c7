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

use crate::balance::WorkerKind;
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
    /// The latest time it may start within its slack (infinite when it
    /// has no rank): the time its placement was queued plus its slack
    /// then.
    pub latest_start_s: f64,
}

impl<T> Placed<T> {
    /// A placed task.
    pub fn new(task: T, priority: i32, cost_s: Vec<Option<f64>>, transfer_s: Vec<f64>) -> Self {
        Placed {
            task,
            priority,
            cost_s,
            transfer_s,
            latest_start_s: f64::INFINITY,
        }
    }
}

/// One worker's line.
pub type Line<T> = WorkerQueue<Placed<T>>;

/// Queues `placed` on `worker`'s line, marked when a transfer to `worker`
/// was predicted for it (data on its way there: [`data_coming`]), after
/// the tasks of its priority queued before it.
pub fn queue_placed<T>(line: &mut Line<T>, worker: usize, placed: Placed<T>, est_s: f64) {
    queue_placed_by(line, worker, placed, est_s, false);
}

/// [`queue_placed`], ahead of the tasks of its priority due to start later
/// ([`Placed::latest_start_s`]) when `latest_start_first`
/// ([`super::line_order`]); returns whether it went ahead of one queued
/// before it.
pub fn queue_placed_by<T>(
    line: &mut Line<T>,
    worker: usize,
    placed: Placed<T>,
    est_s: f64,
    latest_start_first: bool,
) -> bool {
    let coming = placed.transfer_s.get(worker).is_some_and(|&t| t > 0.0);
    let priority = placed.priority;
    let due_s = if latest_start_first {
        placed.latest_start_s
    } else {
        f64::INFINITY
    };
    line.push_due(placed, priority, due_s, est_s, coming)
}

/// Whether a task queued on `line` by [`queue_placed`] waits for data.
pub fn data_coming<T>(line: &Line<T>) -> bool {
    line.holds_marked()
}

/// What a thief is charged besides its own compute time ([`steal_placed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StealCharges<'a> {
    /// The part of the placement's predicted transfer to the thief that
    /// counts ([`super::concurrent_share`]).
    pub transfer_share: f64,
    /// The gain asked of a task with slack to spare, in times its compute
    /// on the thief.
    pub margin: f64,
    /// The data penalty: the predicted transfer counted once more, times
    /// this.
    pub penalty: f64,
    /// For a CPU thief, the members' kinds by worker id (`None`: another
    /// thief): a task with data to move to it waits for an accelerator
    /// victim's running work before the transfer. StarPU has a copy out of an accelerator's memory
    /// into main memory issued by that accelerator's worker (the copy's
    /// handling node is the device's), between its tasks: a CPU worker
    /// that steals from an accelerator gets the task's data once the
    /// accelerator ends what it runs. SIMULATED LU on sirocco with 3 GPUs:
    /// a CPU worker stole the update feeding the next panel factorisation
    /// from a GPU starting a 21 ms factorisation, got its data 21 ms later
    /// and ran it in 11 ms where the GPU took 0.3 (docs/results.md,
    /// twenty-fifth round).
    pub waits_for: Option<&'a [Option<WorkerKind>]>,
}

/// `thief` (idle at `now`) takes, from the line among `victims` with the
/// latest expected end that has one, the first task it would finish
/// earlier than that line's worker: its transfer (the placement's
/// prediction times `transfer_share`, plus `penalty` times it: the data
/// penalty; after the victim's running work when the thief `waits_for`
/// it and there is data to move) plus compute against the
/// victim's predicted end of the task, by at least `margin` times its
/// compute on the thief when the task has slack to spare (the victim
/// would start it by its latest start, [`Placed::latest_start_s`], which
/// is finite: the task was ranked). Tasks without a prediction for the
/// thief are never stolen. Each line is reached alone. Returns the task
/// with the thief's predicted seconds.
pub fn steal_placed<T>(
    lines: &impl QueueSet<Placed<T>>,
    victims: impl IntoIterator<Item = usize>,
    thief: usize,
    now: f64,
    charges: StealCharges,
) -> Option<(Placed<T>, f64)> {
    let (_, p, _, cost) =
        steal_latest_end(lines, victims, thief, now, |v, q: &Placed<T>, ahead| {
            let cost = q.cost_s.get(thief).copied().flatten()?;
            let transfer = q.transfer_s.get(thief).copied().unwrap_or(0.0).max(0.0);
            let there = q.cost_s.get(v).copied().flatten().unwrap_or(0.0);
            // A task with slack to spare (ranked, not late) is stolen only
            // for the margin; an unranked one (no slack known) for any gain.
            let spare =
                now + ahead.end_s - there <= q.latest_start_s && q.latest_start_s.is_finite();
            let margin = if spare { charges.margin * cost } else { 0.0 };
            // The victim's work before its queue: what it runs.
            let waits = charges
                .waits_for
                .and_then(|kinds| kinds.get(v).copied().flatten())
                .is_some_and(|k| k != WorkerKind::Cpu);
            let behind = if waits && transfer > 0.0 {
                (ahead.end_s - ahead.queued_s).max(0.0)
            } else {
                0.0
            };
            let charged = transfer * (charges.transfer_share + charges.penalty);
            (behind + charged + cost + margin < ahead.end_s).then_some(cost)
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

    /// Transfers at `transfer_share`, with `penalty` times them once
    /// more, no margin, no wait for the victim.
    fn charged(transfer_share: f64, penalty: f64) -> StealCharges<'static> {
        StealCharges {
            transfer_share,
            margin: 0.0,
            penalty,
            waits_for: None,
        }
    }

    /// The task worker 1 steals from `victims` at `now` with `margin`
    /// (transfers at full weight, no data penalty).
    fn first_stolen(
        l: &PlainQueues<Placed<u32>>,
        victims: &[usize],
        now: f64,
        margin: f64,
    ) -> Option<u32> {
        let charges = StealCharges {
            margin,
            ..charged(1.0, 0.0)
        };
        steal_placed(l, victims.iter().copied(), 1, now, charges).map(|(p, _)| p.task)
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
        let (s, cost) = steal_placed(&l, [0, 1], 1, 0.0, charged(1.0, 0.0)).expect("a gain");
        assert_eq!((s.task, cost), (2, 2.0));
        // The remaining two end at 1 and 2: no gain.
        assert!(steal_placed(&l, [0, 1], 1, 0.0, charged(1.0, 0.0)).is_none());
        // Unknown predictions are never stolen.
        push(placed(9, 0, &[Some(1.0), None]));
        push(placed(10, 0, &[Some(1.0), None]));
        assert!(steal_placed(&l, [0, 1], 1, 0.0, charged(1.0, 0.0)).is_none());
        assert_eq!(l.held(), 4);
        // Only the victims named are looked at.
        push(placed(11, 0, &[Some(1.0), Some(0.1)]));
        assert_eq!(first_stolen(&l, &[1], 0.0, 0.0), None);
        assert_eq!(first_stolen(&l, &[0], 0.0, 0.0), Some(11));
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
        assert_eq!(first_stolen(&l, &[0], 0.0, 0.0), None);
        // With the data penalty the transfer counts once more: 0.5 + 2.0 +
        // 0.5 = 3 s is no gain; the task stays.
        assert!(steal_placed(&l, [0], 1, 0.0, charged(0.25, 1.0)).is_none());
        let (s, cost) = steal_placed(&l, [0], 1, 0.0, charged(0.25, 0.0)).expect("a gain");
        assert_eq!((s.task, cost), (1, 0.5));
    }

    #[test]
    fn a_thief_waiting_for_the_victim_gets_data_once_its_running_work_ends() {
        let l = PlainQueues::new(2);
        // Worker 0, the victim, is an accelerator; worker 1, the thief, a
        // CPU worker.
        let waits = StealCharges {
            waits_for: Some(&[Some(WorkerKind::Cuda), Some(WorkerKind::Cpu)]),
            ..charged(1.0, 0.0)
        };
        // Worker 0 runs a 10 s task and holds a 1 s one behind it (ending
        // at 11 s); the thief runs that one in 3 s with 1 s of data to
        // move: 4 s against 11 s. Waiting for the running work first, 14
        // s: it stays.
        l.with(0, |q| q.starting(Some(7), 10.0, 0.0, false))
            .unwrap();
        let mut p = placed(1, 0, &[Some(1.0), Some(3.0)]);
        p.transfer_s = vec![0.0, 1.0];
        l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
        assert!(steal_placed(&l, [0], 1, 0.0, waits).is_none());
        assert_eq!(
            steal_placed(&l, [0], 1, 0.0, charged(1.0, 0.0)).map(|(p, _)| p.task),
            Some(1)
        );
        // With its data already at the thief (nothing to move) it does not
        // wait: 3 s against 11 s.
        let mut p = placed(2, 0, &[Some(1.0), Some(3.0)]);
        p.transfer_s = vec![0.0, 0.0];
        l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
        assert_eq!(
            steal_placed(&l, [0], 1, 0.0, waits).map(|(p, _)| p.task),
            Some(2)
        );
        // Once the victim's running task ended (at 10 s, as predicted), it
        // waits for none: 4 s against five queued tasks of 1 s, the fifth
        // ending at 5 s, is taken.
        l.with(0, |q| q.finished(Some(7), 10.0)).unwrap();
        for id in 3..8 {
            let mut p = placed(id, 0, &[Some(1.0), Some(3.0)]);
            p.transfer_s = vec![0.0, 1.0];
            l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
        }
        assert_eq!(
            steal_placed(&l, [0], 1, 10.0, waits).map(|(p, _)| p.task),
            Some(7)
        );
    }

    #[test]
    fn a_margin_asks_a_gain_of_the_tasks_own_time_when_it_has_slack_to_spare() {
        let l = PlainQueues::new(2);
        // Worker 0 holds two tasks of 1 s (ending at 1 and 2); the thief
        // runs one in 0.8 s: it gains 1.2 s on the second.
        let fill = |latest_start_s: f64| {
            for id in 0..2 {
                let mut p = placed(id, 0, &[Some(1.0), Some(0.8)]);
                p.latest_start_s = latest_start_s;
                l.with(0, |q| q.push(p, 0, 1.0)).unwrap();
            }
        };
        fill(100.0);
        // A margin of 1 asks 0.8 s + 0.8 s < 2 s: taken; of 2, 2.4 s: not.
        assert_eq!(first_stolen(&l, &[0], 0.0, 2.0), None);
        assert_eq!(first_stolen(&l, &[0], 0.0, 1.0), Some(1));
        l.with(0, |q| q.take_all()).unwrap();
        // Late: the victim would start the second at 1 s, after its latest
        // start (0.5 s): any gain counts, whatever the margin.
        fill(0.5);
        assert_eq!(first_stolen(&l, &[0], 0.0, 2.0), Some(1));
        l.with(0, |q| q.take_all()).unwrap();
        // Its latest start is absolute: at 10 s the same line starts it at
        // 11 s, still late for a latest start of 10.5 s, not for 11.5 s.
        fill(10.5);
        assert_eq!(first_stolen(&l, &[0], 10.0, 2.0), Some(1));
        l.with(0, |q| q.take_all()).unwrap();
        fill(11.5);
        assert_eq!(first_stolen(&l, &[0], 10.0, 2.0), None);
        l.with(0, |q| q.take_all()).unwrap();
        // Unranked (no slack known): any gain counts, the first task's too
        // (0.8 s against 1 s).
        fill(f64::INFINITY);
        assert_eq!(first_stolen(&l, &[0], 10.0, 2.0), Some(0));
    }
}
