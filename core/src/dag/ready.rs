//! The task-graph scheduler's ready list: the tasks waiting to be placed,
//! taken in arrival order, or highest priority first (arrival order
//! within a priority) when placement waits for room
//! ([`super::graph::Window`]). One queue per priority: a push or a take
//! costs O(log p) for p distinct priorities waiting.

use std::collections::{BTreeMap, VecDeque};

use super::PerTask;
use super::decide::GraphTask;

/// Tasks waiting to be placed.
pub struct ReadyList<T> {
    by_priority: bool,
    /// Tasks per priority (all under 0 in arrival order).
    queues: BTreeMap<i32, VecDeque<T>>,
    /// The last queue emptied, kept for the next priority to arrive (a
    /// task at a time through an empty list would otherwise allocate a
    /// queue per task).
    spare: VecDeque<T>,
    len: usize,
}

impl<T: GraphTask> ReadyList<T> {
    /// An empty list, in arrival order.
    pub fn new() -> ReadyList<T> {
        ReadyList {
            by_priority: false,
            queues: BTreeMap::new(),
            spare: VecDeque::new(),
            len: 0,
        }
    }

    /// Takes the highest priority first from now on (or arrival order
    /// again); the tasks waiting are sorted accordingly.
    pub fn set_by_priority(&mut self, on: bool) {
        if on != self.by_priority {
            let all = self.take(usize::MAX);
            self.by_priority = on;
            all.into_iter().for_each(|t| self.push_back(t));
        }
    }

    fn key(&self, task: &T) -> i32 {
        if self.by_priority { task.priority() } else { 0 }
    }

    /// Tasks waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a task behind those of its priority.
    pub fn push_back(&mut self, task: T) {
        let k = self.key(&task);
        self.queue(k).push_back(task);
        self.len += 1;
    }

    /// The queue of key `k`, made from the spare one when new.
    fn queue(&mut self, k: i32) -> &mut VecDeque<T> {
        let spare = &mut self.spare;
        self.queues
            .entry(k)
            .or_insert_with(|| std::mem::take(spare))
    }

    /// Adds a task ahead of those of its priority (one taken and given
    /// back keeps its turn).
    pub fn push_front(&mut self, task: T) {
        let k = self.key(&task);
        self.queue(k).push_front(task);
        self.len += 1;
    }

    /// Takes up to `n` tasks, highest priority first.
    pub fn take(&mut self, n: usize) -> PerTask<T> {
        let mut out = PerTask::with_capacity(n.min(self.len));
        while out.len() < n {
            let Some(mut entry) = self.queues.last_entry() else {
                break;
            };
            let q = entry.get_mut();
            let k = (n - out.len()).min(q.len());
            out.extend(q.drain(..k));
            if q.is_empty() {
                self.spare = entry.remove();
            }
        }
        self.len -= out.len();
        out
    }
}

impl<T: GraphTask> Default for ReadyList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: GraphTask> Extend<T> for ReadyList<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        iter.into_iter().for_each(|t| self.push_back(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::testutil::Tile;

    fn tile(id: usize, priority: i32) -> Tile {
        Tile {
            id,
            codelet: 1,
            priority,
        }
    }

    fn ids(v: PerTask<Tile>) -> Vec<usize> {
        v.into_iter().map(|t| t.id).collect()
    }

    #[test]
    fn arrival_order_unless_by_priority() {
        let mut r = ReadyList::new();
        for (id, p) in [(0, 1), (1, 5), (2, 1), (3, 5)] {
            r.push_back(tile(id, p));
        }
        assert_eq!(ids(r.take(2)), vec![0, 1]);
        r.push_front(tile(4, 9));
        assert_eq!(r.len(), 3);
        assert_eq!(ids(r.take(usize::MAX)), vec![4, 2, 3]);
        assert!(r.is_empty());

        for (id, p) in [(0, 1), (1, 5), (2, 1), (3, 5)] {
            r.push_back(tile(id, p));
        }
        r.set_by_priority(true);
        assert_eq!(ids(r.take(1)), vec![1]);
        // Given back: ahead of its priority's others, behind higher ones.
        r.push_front(tile(1, 5));
        r.push_back(tile(5, 7));
        assert_eq!(ids(r.take(3)), vec![5, 1, 3]);
        assert_eq!(r.len(), 2);
        assert_eq!(ids(r.take(9)), vec![0, 2]);
        assert_eq!(r.len(), 0);
    }
}
