//! Per-worker queues of placed tasks with `dmda`'s expected start, length
//! and end: each worker's line holds the tasks placed on it, ordered by
//! priority (highest first, then placement order, as `dmdas`), the sum of
//! their predicted seconds (expected length), and the predicted end of
//! what it is running (expected start of its queue; pipelined accelerators
//! run several tasks at once). Time is an argument.
//!
//! Pops prefer, among the tasks of the head's priority, the first whose
//! data is already on the worker (`dmdar`'s ready-data-first; the caller
//! says which are). An idle worker steals only a task it would finish
//! before the worker holding it would (its own predicted transfer and
//! compute against the victim's expected start plus the queue ahead).

use std::collections::VecDeque;

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
    /// Predicted seconds on the worker whose line holds it.
    pub est_s: f64,
    seq: u64,
}

impl<T> Placed<T> {
    /// A placed task; `est_s` is set when it is queued.
    pub fn new(task: T, priority: i32, cost_s: Vec<Option<f64>>, transfer_s: Vec<f64>) -> Self {
        Placed {
            task,
            priority,
            cost_s,
            transfer_s,
            est_s: 0.0,
            seq: 0,
        }
    }
}

/// Tasks popped by a worker and not yet reported done, beyond which the
/// oldest is forgotten (tasks whose completion is never reported would
/// otherwise accumulate).
pub const RUNNING_CAP: usize = 64;

/// Queued tasks of equal priority looked at for ready data at each pop.
pub const READY_LOOKAHEAD: usize = 8;

/// One worker's line.
#[derive(Debug)]
struct Line<T> {
    items: VecDeque<Placed<T>>,
    /// Expected length: predicted seconds of the queued tasks.
    queued_s: f64,
    /// Predicted end of the tasks it runs (seconds).
    busy_until: f64,
    /// Tasks it runs: (id, predicted seconds).
    running: VecDeque<(usize, f64)>,
}

impl<T> Default for Line<T> {
    fn default() -> Self {
        Line {
            items: VecDeque::new(),
            queued_s: 0.0,
            busy_until: 0.0,
            running: VecDeque::new(),
        }
    }
}

impl<T> Line<T> {
    /// Expected start of the queue at `now`.
    fn start(&self, now: f64) -> f64 {
        self.busy_until.max(now)
    }

    fn remove(&mut self, i: usize) -> Option<Placed<T>> {
        let p = self.items.remove(i)?;
        self.queued_s = if self.items.is_empty() {
            0.0
        } else {
            (self.queued_s - p.est_s).max(0.0)
        };
        Some(p)
    }
}

/// Every worker's line.
#[derive(Debug)]
pub struct Lines<T> {
    lines: Vec<Line<T>>,
    seq: u64,
    held: usize,
}

impl<T> Lines<T> {
    /// Lines for worker indices `0..n`.
    pub fn new(n: usize) -> Self {
        Lines {
            lines: (0..n).map(|_| Line::default()).collect(),
            seq: 0,
            held: 0,
        }
    }

    /// Tasks queued over every line.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Tasks queued on `worker`.
    pub fn queued(&self, worker: usize) -> usize {
        self.lines.get(worker).map_or(0, |l| l.items.len())
    }

    /// Tasks `worker` runs (popped, completion not reported yet).
    pub fn running(&self, worker: usize) -> usize {
        self.lines.get(worker).map_or(0, |l| l.running.len())
    }

    /// Seconds from `now` until `worker`'s running and queued work is
    /// predicted done (expected end minus now).
    pub fn load_s(&self, worker: usize, now: f64) -> f64 {
        self.lines
            .get(worker)
            .map_or(0.0, |l| l.start(now) - now + l.queued_s)
    }

    /// The queued seconds of `worker`'s line by priority (highest first).
    pub fn queued_by_priority(&self, worker: usize) -> Vec<(i32, f64)> {
        let mut out: Vec<(i32, f64)> = Vec::new();
        for q in self
            .lines
            .get(worker)
            .map(|l| l.items.iter())
            .into_iter()
            .flatten()
        {
            match out.last_mut() {
                Some(last) if last.0 == q.priority => last.1 += q.est_s,
                _ => out.push((q.priority, q.est_s)),
            }
        }
        out
    }

    /// Queues `p` on `worker`, where it is predicted to take `est_s`
    /// seconds, after the tasks of higher or equal priority.
    pub fn push(&mut self, worker: usize, mut p: Placed<T>, est_s: f64) {
        let Some(line) = self.lines.get_mut(worker) else {
            return;
        };
        p.est_s = if est_s.is_finite() {
            est_s.max(0.0)
        } else {
            0.0
        };
        p.seq = self.seq;
        self.seq += 1;
        line.queued_s += p.est_s;
        let at = line
            .items
            .iter()
            .position(|q| q.priority < p.priority)
            .unwrap_or(line.items.len());
        line.items.insert(at, p);
        self.held += 1;
    }

    /// `worker`'s next task: among the first [`READY_LOOKAHEAD`] tasks of
    /// the head's priority, the first for which `ready` holds, else the
    /// head.
    pub fn pop(&mut self, worker: usize, ready: impl Fn(&T) -> bool) -> Option<Placed<T>> {
        let line = self.lines.get_mut(worker)?;
        let head = line.items.front()?.priority;
        let i = line
            .items
            .iter()
            .take(READY_LOOKAHEAD)
            .take_while(|q| q.priority == head)
            .position(|q| ready(&q.task))
            .unwrap_or(0);
        let p = line.remove(i)?;
        self.held -= 1;
        Some(p)
    }

    /// `worker` (idle at `now`) takes from the line with the latest expected
    /// end the first task it can run and would finish earlier than that
    /// line's worker: its transfer plus compute against the victim's
    /// expected start plus the queue up to and including the task. Tasks
    /// without a prediction for the thief are never stolen.
    pub fn steal(&mut self, worker: usize, now: f64) -> Option<Placed<T>> {
        let mut victims: Vec<usize> = (0..self.lines.len())
            .filter(|&v| v != worker && !self.lines[v].items.is_empty())
            .collect();
        victims.sort_by(|&a, &b| self.load_s(b, now).total_cmp(&self.load_s(a, now)));
        for v in victims {
            let line = &self.lines[v];
            let mut ahead = line.start(now);
            let found = line.items.iter().position(|q| {
                ahead += q.est_s;
                let cost = q.cost_s.get(worker).copied().flatten();
                let transfer = q.transfer_s.get(worker).copied().unwrap_or(0.0);
                cost.is_some_and(|c| now + transfer.max(0.0) + c < ahead)
            });
            if let Some(i) = found {
                let p = self.lines[v].remove(i)?;
                self.held -= 1;
                return Some(p);
            }
        }
        None
    }

    /// `worker` started task `id`, predicted to take `est_s` seconds.
    pub fn started(&mut self, worker: usize, id: usize, est_s: f64, now: f64) {
        let Some(line) = self.lines.get_mut(worker) else {
            return;
        };
        let est = if est_s.is_finite() {
            est_s.max(0.0)
        } else {
            0.0
        };
        line.busy_until = line.start(now) + est;
        if line.running.len() >= RUNNING_CAP {
            line.running.pop_front();
        }
        line.running.push_back((id, est));
    }

    /// `worker` finished task `id` at `now`: once it runs nothing its
    /// queue's expected start is now (early or late, the prediction is
    /// replaced by the fact). Unknown ids are ignored.
    pub fn finished(&mut self, worker: usize, id: usize, now: f64) {
        let Some(line) = self.lines.get_mut(worker) else {
            return;
        };
        let Some(i) = line.running.iter().position(|&(x, _)| x == id) else {
            return;
        };
        line.running.remove(i);
        if line.running.is_empty() {
            line.busy_until = now;
        }
    }

    /// Takes every task of `worker`'s line (a worker leaving).
    pub fn take_line(&mut self, worker: usize) -> Vec<Placed<T>> {
        let Some(line) = self.lines.get_mut(worker) else {
            return Vec::new();
        };
        line.queued_s = 0.0;
        line.running.clear();
        let out: Vec<_> = line.items.drain(..).collect();
        self.held -= out.len();
        out
    }

    /// Takes every queued task.
    pub fn drain(&mut self) -> Vec<T> {
        let n = self.lines.len();
        (0..n)
            .flat_map(|w| self.take_line(w))
            .map(|p| p.task)
            .collect::<Vec<_>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(id: u32, prio: i32, costs: &[Option<f64>]) -> Placed<u32> {
        Placed::new(id, prio, costs.to_vec(), vec![0.0; costs.len()])
    }

    fn order_after(l: &mut Lines<u32>) -> Vec<u32> {
        std::iter::from_fn(|| l.pop(0, |_| false).map(|p| p.task)).collect()
    }

    #[test]
    fn priorities_order_each_line_fifo_within_a_priority() {
        let mut l = Lines::new(1);
        let c = [Some(1.0)];
        l.push(0, placed(1, 0, &c), 1.0);
        l.push(0, placed(2, 5, &c), 1.0);
        l.push(0, placed(3, 0, &c), 1.0);
        l.push(0, placed(4, 5, &c), 1.0);
        assert_eq!(l.queued_by_priority(0), vec![(5, 2.0), (0, 2.0)]);
        assert_eq!(order_after(&mut l), vec![2, 4, 1, 3]);
        assert_eq!(l.held(), 0);
    }

    #[test]
    fn ready_data_first_within_the_head_priority() {
        let mut l = Lines::new(1);
        let c = [Some(1.0)];
        for (id, prio) in [(1, 1), (2, 1), (3, 0)] {
            l.push(0, placed(id, prio, &c), 1.0);
        }
        // Task 2's data is there: it goes before 1; task 3 (lower
        // priority) is never preferred over the head's priority.
        assert_eq!(l.pop(0, |&t| t == 2 || t == 3).unwrap().task, 2);
        assert_eq!(l.pop(0, |&t| t == 3).unwrap().task, 1);
    }

    #[test]
    fn expected_end_follows_queue_running_tasks_and_completions() {
        let mut l = Lines::new(2);
        let c = [Some(1.0), Some(1.0)];
        l.push(0, placed(1, 0, &c), 2.0);
        l.push(0, placed(2, 0, &c), 3.0);
        assert_eq!(l.load_s(0, 10.0), 5.0);
        let p = l.pop(0, |_| false).unwrap();
        l.started(0, p.task as usize, p.est_s, 10.0);
        // Running until 12, then 3 s queued.
        assert_eq!(l.load_s(0, 10.0), 5.0);
        assert_eq!(l.load_s(0, 11.0), 4.0);
        // Finished late at 13: the queue starts now.
        l.finished(0, 1, 13.0);
        assert_eq!(l.load_s(0, 13.0), 3.0);
        // An overdue prediction never makes the load negative.
        assert_eq!(l.load_s(0, 20.0), 3.0);
        assert_eq!(l.load_s(1, 20.0), 0.0);
    }

    #[test]
    fn pipelined_workers_keep_their_expected_end_until_idle() {
        let mut l: Lines<u32> = Lines::new(1);
        l.started(0, 1, 2.0, 0.0);
        l.started(0, 2, 2.0, 0.0);
        assert_eq!(l.load_s(0, 0.0), 4.0);
        l.finished(0, 1, 1.0);
        assert_eq!(l.load_s(0, 1.0), 3.0, "still running task 2");
        l.finished(0, 2, 1.5);
        assert_eq!(l.load_s(0, 1.5), 0.0);
        l.finished(0, 99, 2.0);
    }

    #[test]
    fn an_idle_worker_steals_only_what_it_finishes_first() {
        let mut l = Lines::new(2);
        // Worker 0 holds three tasks of 1 s each; the thief takes 2.5 s for
        // one (including 0.5 s of transfer).
        for id in 0..3 {
            let mut p = placed(id, 0, &[Some(1.0), Some(2.0)]);
            p.transfer_s = vec![0.0, 0.5];
            l.push(0, p, 1.0);
        }
        // Finishing at 2.5 beats only the third task (ends at 3).
        let s = l.steal(1, 0.0).expect("a gain");
        assert_eq!(s.task, 2);
        // The remaining two end at 1 and 2: no gain.
        assert!(l.steal(1, 0.0).is_none());
        // Unknown predictions are never stolen.
        l.push(0, placed(9, 0, &[Some(1.0), None]), 1.0);
        l.push(0, placed(10, 0, &[Some(1.0), None]), 1.0);
        assert!(l.steal(1, 0.0).is_none());
        assert_eq!(l.held(), 4);
    }

    #[test]
    fn take_line_and_drain_lose_nothing() {
        let mut l = Lines::new(3);
        for id in 0..9 {
            l.push(id as usize % 3, placed(id, 0, &[Some(1.0); 3]), 1.0);
        }
        let gone = l.take_line(1);
        assert_eq!(gone.len(), 3);
        assert_eq!(l.load_s(1, 0.0), 0.0);
        let mut rest = l.drain();
        rest.extend(gone.into_iter().map(|p| p.task));
        rest.sort();
        assert_eq!(rest, (0..9).collect::<Vec<_>>());
        assert_eq!(l.held(), 0);
    }
}
