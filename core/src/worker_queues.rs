//! Per-worker task queues with `dmda`'s bookkeeping: the one container that
//! task mode's fallback queues ([`crate::taskmode`]) and the task-graph
//! policies' lines ([`crate::dag::lines`]) hold their tasks in.
//!
//! Each worker's queue is ordered by priority (highest first, then arrival,
//! as `dmdas`; or, within a priority, by a latest start the pusher gives:
//! [`WorkerQueue::push_due`]) and keeps, as `dmda` does, its expected start (the predicted
//! end of the tasks the worker runs, several at once for a pipelined
//! accelerator, reset to *now* when it runs nothing), its expected length
//! (the queued tasks' predictions, also per priority, plus placements
//! reserved but not yet queued) and so its expected end. The pop (the
//! head's priority, a preferred task among the first
//! [`READY_LOOKAHEAD`]) and the steal (victims by latest expected end, the
//! first task the caller's rule accepts against the victim's predicted end
//! of it) are written here once; what a caller predicts for a thief stays
//! the caller's. Time is an argument; nothing here locks.

use std::collections::VecDeque;

/// Tasks popped by a worker and not yet reported done, beyond which the
/// oldest is forgotten (tasks whose completion is never reported would
/// otherwise accumulate).
pub const RUNNING_CAP: usize = 64;

/// Queued tasks of the head's priority looked at by [`WorkerQueue::pop`].
pub const READY_LOOKAHEAD: usize = 8;

#[derive(Debug)]
struct Entry<I> {
    item: I,
    priority: i32,
    /// Predicted seconds on the worker whose queue holds it.
    est_s: f64,
    /// Marked by its pusher ([`WorkerQueue::push_marked`]).
    marked: bool,
    /// The latest start its pusher gave ([`WorkerQueue::push_due`];
    /// infinite otherwise): earlier first within a priority.
    due_s: f64,
}

/// One worker's queue and its `dmda` bookkeeping. The schedulers reach
/// them one worker at a time through a [`QueueSet`] (the StarPU adapters:
/// one lock per worker).
#[derive(Debug)]
pub struct WorkerQueue<I> {
    items: VecDeque<Entry<I>>,
    /// Expected length: predicted seconds of the queued tasks.
    queued_s: f64,
    /// The same per priority, highest first, with how many tasks each:
    /// kept at every push and removal, so that reading it does not walk
    /// the queue.
    by_priority: Vec<(i32, f64, usize)>,
    /// Queued tasks their pusher marked.
    marked: usize,
    /// Predicted seconds of placements reserved for the worker, not yet
    /// queued (task mode's reserve–prefetch–commit).
    reserved_s: f64,
    /// Predicted end of the tasks the worker runs.
    busy_until: f64,
    /// The tasks it runs: (id when the caller gives one, predicted
    /// seconds).
    running: VecDeque<(Option<usize>, f64)>,
    /// Tasks it has started (popped or stolen) so far.
    starts: u64,
}

impl<I> Default for WorkerQueue<I> {
    fn default() -> Self {
        WorkerQueue {
            items: VecDeque::new(),
            queued_s: 0.0,
            by_priority: Vec::new(),
            marked: 0,
            reserved_s: 0.0,
            busy_until: 0.0,
            running: VecDeque::new(),
            starts: 0,
        }
    }
}

/// In which order [`steal`] looks at the victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimOrder {
    /// Latest expected end first (`dmda`-style; the task-graph policies).
    LatestEnd,
    /// Most queued tasks first (task mode's fallback queues).
    LongestQueue,
}

/// How long a victim would take to get a task done, seconds from now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ahead {
    /// Its queued predictions up to and including the task.
    pub queued_s: f64,
    /// Its predicted end of the task: its running work and reservations,
    /// then `queued_s`.
    pub end_s: f64,
}

/// What the rest of a context reads of a worker's queue without reaching
/// it ([`QueueSet::glance`]): its state as the last call that reached it
/// left it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Glance {
    /// Tasks queued.
    pub len: usize,
    /// Tasks started so far ([`WorkerQueue::starts`]).
    pub starts: u64,
    /// Predicted end of what the worker runs (`None`: it runs nothing).
    pub busy_until: Option<f64>,
    /// Reserved and queued predictions, seconds.
    pub ahead_s: f64,
    /// Priority of the last queued task (`i32::MAX` when none): a task of
    /// this priority or lower would wait for every queued one.
    pub tail_priority: i32,
}

impl Glance {
    /// [`WorkerQueue::load_s`] as of this glance.
    pub fn load_s(&self, now: f64) -> f64 {
        self.busy_until.map_or(now, |b| b.max(now)) - now + self.ahead_s
    }
}

/// A finite, non-negative prediction (anything else counts as 0).
fn clean(s: f64) -> f64 {
    if s.is_finite() { s.max(0.0) } else { 0.0 }
}

impl<I> WorkerQueue<I> {
    /// Expected start of the queue at `now`.
    fn start(&self, now: f64) -> f64 {
        if self.running.is_empty() {
            now
        } else {
            self.busy_until.max(now)
        }
    }

    fn remove(&mut self, i: usize) -> Option<(I, f64)> {
        let e = self.items.remove(i)?;
        // Exactly 0 when empty: no drift of the sum.
        self.queued_s = if self.items.is_empty() {
            0.0
        } else {
            (self.queued_s - e.est_s).max(0.0)
        };
        let b = self.bucket(e.priority);
        if let Some(bucket) = self.by_priority.get_mut(b).filter(|x| x.0 == e.priority) {
            bucket.2 -= 1;
            if bucket.2 == 0 {
                // Likewise exactly 0 once the priority has no task left.
                self.by_priority.remove(b);
            } else {
                bucket.1 = (bucket.1 - e.est_s).max(0.0);
            }
        }
        self.marked -= usize::from(e.marked);
        Some((e.item, e.est_s))
    }

    /// Where `priority`'s entry is, or would go, in `by_priority`.
    fn bucket(&self, priority: i32) -> usize {
        self.by_priority.partition_point(|b| b.0 > priority)
    }

    /// Tasks queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no task is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether some queued task satisfies `f`.
    pub fn any(&self, f: impl Fn(&I) -> bool) -> bool {
        self.items.iter().any(|e| f(&e.item))
    }

    /// Whether some queued task was marked by its pusher
    /// ([`WorkerQueue::push_marked`]); O(1).
    pub fn holds_marked(&self) -> bool {
        self.marked > 0
    }

    /// Tasks started so far (popped or stolen by this worker).
    pub fn starts(&self) -> u64 {
        self.starts
    }

    /// Its state for readers that do not reach it ([`Glance`]).
    pub fn glance(&self) -> Glance {
        Glance {
            len: self.items.len(),
            starts: self.starts,
            busy_until: (!self.running.is_empty()).then_some(self.busy_until),
            ahead_s: self.reserved_s + self.queued_s,
            tail_priority: self.items.back().map_or(i32::MAX, |e| e.priority),
        }
    }

    /// Seconds from `now` until the running, reserved and queued work is
    /// predicted done (expected end minus now).
    pub fn load_s(&self, now: f64) -> f64 {
        self.start(now) - now + self.reserved_s + self.queued_s
    }

    /// Seconds from `now` a task of `priority` queued here would wait: the
    /// running work, the reservations and the queued tasks of higher or
    /// equal priority (`dmdas`' expected length per priority; O(1) unless
    /// the task would jump ahead of some).
    pub fn ahead_of_s(&self, priority: i32, now: f64) -> f64 {
        let queued = match self.items.back() {
            Some(last) if last.priority < priority => self
                .items
                .iter()
                .take_while(|e| e.priority >= priority)
                .map(|e| e.est_s)
                .sum(),
            _ => self.queued_s,
        };
        self.start(now) - now + self.reserved_s + queued
    }

    /// Queued seconds by priority (highest first); O(priorities queued).
    pub fn queued_by_priority(&self) -> Vec<(i32, f64)> {
        self.by_priority.iter().map(|&(p, s, _)| (p, s)).collect()
    }

    /// Queues `item` of `priority`, predicted to take `est_s` seconds here,
    /// after the tasks of higher or equal priority.
    pub fn push(&mut self, item: I, priority: i32, est_s: f64) {
        self.push_marked(item, priority, est_s, false);
    }

    /// [`WorkerQueue::push`], the task marked or not (what the mark means
    /// is the caller's; [`WorkerQueue::holds_marked`] counts them).
    pub fn push_marked(&mut self, item: I, priority: i32, est_s: f64, marked: bool) {
        self.push_due(item, priority, f64::INFINITY, est_s, marked);
    }

    /// [`WorkerQueue::push_marked`], the task ahead of the tasks of its
    /// priority due to start later than `due_s` (seconds, the caller's
    /// clock; infinite: after every one of its priority). Tasks due at the
    /// same time stay in arrival order. Returns whether it went ahead of a
    /// task of its priority queued before it.
    pub fn push_due(
        &mut self,
        item: I,
        priority: i32,
        due_s: f64,
        est_s: f64,
        marked: bool,
    ) -> bool {
        let est_s = clean(est_s);
        self.queued_s += est_s;
        let b = self.bucket(priority);
        match self.by_priority.get_mut(b) {
            Some(bucket) if bucket.0 == priority => {
                bucket.1 += est_s;
                bucket.2 += 1;
            }
            _ => self.by_priority.insert(b, (priority, est_s, 1)),
        }
        self.marked += usize::from(marked);
        // After every task of higher priority, and of equal priority due
        // no later (the queue is ordered by priority, then due time: a
        // binary search).
        let due_s = if due_s.is_nan() { f64::INFINITY } else { due_s };
        let at = self.items.partition_point(|e| {
            e.priority > priority || (e.priority == priority && e.due_s <= due_s)
        });
        // Undated, it goes after every task of its priority.
        let ahead = due_s.is_finite() && self.items.get(at).is_some_and(|e| e.priority == priority);
        self.items.insert(
            at,
            Entry {
                item,
                priority,
                est_s,
                marked,
                due_s,
            },
        );
        ahead
    }

    /// Counts `est_s` seconds placed here and not queued yet.
    pub fn reserve(&mut self, est_s: f64) {
        self.reserved_s += clean(est_s);
    }

    /// A reservation of [`WorkerQueue::reserve`] ended.
    pub fn unreserve(&mut self, est_s: f64) {
        self.reserved_s = (self.reserved_s - clean(est_s)).max(0.0);
    }

    /// The next task: among the first [`READY_LOOKAHEAD`] tasks of the
    /// head's priority, the first `prefer` accepts, else the head. Returns
    /// it with its prediction.
    pub fn pop(&mut self, prefer: impl Fn(&I) -> bool) -> Option<(I, f64)> {
        let head = self.items.front()?.priority;
        let i = self
            .items
            .iter()
            .take(READY_LOOKAHEAD)
            .take_while(|e| e.priority == head)
            .position(|e| prefer(&e.item))
            .unwrap_or(0);
        self.remove(i)
    }

    /// The first task for which `pick` gives a value, with its prediction
    /// and that value.
    pub fn take_first<R>(&mut self, mut pick: impl FnMut(&I) -> Option<R>) -> Option<(I, f64, R)> {
        let (i, r) = self
            .items
            .iter()
            .enumerate()
            .find_map(|(i, e)| pick(&e.item).map(|r| (i, r)))?;
        let (item, est) = self.remove(i)?;
        Some((item, est, r))
    }

    /// A thief takes from this queue (at `now`) the first task for which
    /// `gains(task, ahead)` gives a value ([`Ahead`]: how long this worker
    /// would take to get it done). Returns the task, its prediction here
    /// and the value.
    pub fn steal_one<R>(
        &mut self,
        now: f64,
        mut gains: impl FnMut(&I, Ahead) -> Option<R>,
    ) -> Option<(I, f64, R)> {
        let before = self.start(now) - now + self.reserved_s;
        let mut queued_s = 0.0;
        let (i, r) = self.items.iter().enumerate().find_map(|(i, e)| {
            queued_s += e.est_s;
            let ahead = Ahead {
                queued_s,
                end_s: before + queued_s,
            };
            gains(&e.item, ahead).map(|r| (i, r))
        })?;
        let (item, est) = self.remove(i)?;
        Some((item, est, r))
    }

    /// The worker started a task (`id`, when the caller tracks ids)
    /// predicted to take `est_s` seconds at `now`.
    pub fn started(&mut self, id: Option<usize>, est_s: f64, now: f64) {
        let est_s = clean(est_s);
        self.busy_until = self.start(now) + est_s;
        if self.running.len() >= RUNNING_CAP {
            self.running.pop_front();
        }
        self.running.push_back((id, est_s));
        self.starts += 1;
    }

    /// The worker starts a task ([`WorkerQueue::started`]); a worker that
    /// runs one task at a time (`one_at_a_time`: a CPU worker) first
    /// forgets what it still runs ([`WorkerQueue::forget_running`]).
    pub fn starting(&mut self, id: Option<usize>, est_s: f64, now: f64, one_at_a_time: bool) {
        if one_at_a_time {
            self.forget_running(now);
        }
        self.started(id, est_s, now);
    }

    /// The worker finished a task at `now`: the one of `id`, or without an
    /// id its oldest. Once it runs nothing its expected start is now
    /// (early or late, the prediction is replaced by the fact). A task it
    /// is not known to run is ignored.
    pub fn finished(&mut self, id: Option<usize>, now: f64) {
        let i = match id {
            Some(id) => self.running.iter().position(|&(x, _)| x == Some(id)),
            None => (!self.running.is_empty()).then_some(0),
        };
        let Some(i) = i else { return };
        self.running.remove(i);
        if self.running.is_empty() {
            self.busy_until = now;
        }
    }

    /// The worker is about to start a task while tasks it started are not
    /// reported done: for a worker that runs one task at a time (a CPU
    /// worker), those reports were lost (StarPU skips the post-execution
    /// hook of its internal tasks), so they are forgotten and its queue
    /// starts at `now`. Without this its expected start would run ahead of
    /// the clock by every lost task's prediction.
    pub fn forget_running(&mut self, now: f64) {
        if !self.running.is_empty() {
            self.running.clear();
            self.busy_until = now;
        }
    }

    /// Tasks it runs (started, completion not reported yet).
    #[cfg(test)]
    fn running(&self) -> usize {
        self.running.len()
    }

    /// Takes every queued task and forgets what it runs and what was
    /// reserved for it (a worker leaving).
    pub fn take_all(&mut self) -> Vec<(I, f64)> {
        self.queued_s = 0.0;
        self.by_priority.clear();
        self.marked = 0;
        self.reserved_s = 0.0;
        self.running.clear();
        self.items.drain(..).map(|e| (e.item, e.est_s)).collect()
    }
}

/// Per-worker queues reached one worker at a time (the StarPU adapters
/// keep each behind the worker's own lock). `with` runs `f` on `worker`'s
/// queue (`None`: no queue for that id); `glance` reads what the last
/// `with` left without reaching the queue; `held` counts the tasks queued
/// over every worker. The provided methods are the per-worker operations
/// the schedulers use, each reaching one queue at a time.
pub trait QueueSet<I> {
    /// Runs `f` on `worker`'s queue alone.
    fn with<R>(&self, worker: usize, f: impl FnOnce(&mut WorkerQueue<I>) -> R) -> Option<R>;
    /// `worker`'s queue as the last [`QueueSet::with`] on it left it.
    fn glance(&self, worker: usize) -> Option<Glance>;
    /// Tasks queued over every worker.
    fn held(&self) -> usize;
    /// Worker ids covered (`0..len`).
    fn len(&self) -> usize;

    /// Whether no worker id is covered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tasks queued on `worker` (as of its glance).
    fn queued(&self, worker: usize) -> usize {
        self.glance(worker).map_or(0, |g| g.len)
    }

    /// Seconds from `now` until `worker`'s running, reserved and queued
    /// work is predicted done (as of its glance).
    fn load_s(&self, worker: usize, now: f64) -> f64 {
        self.glance(worker).map_or(0.0, |g| g.load_s(now))
    }

    /// See [`WorkerQueue::ahead_of_s`]; from the queue's glance unless the
    /// task would jump ahead of queued tasks of lower priority.
    fn ahead_of_s(&self, worker: usize, priority: i32, now: f64) -> f64 {
        match self.glance(worker) {
            None => 0.0,
            Some(g) if g.tail_priority >= priority => g.load_s(now),
            Some(_) => self
                .with(worker, |q| q.ahead_of_s(priority, now))
                .unwrap_or(0.0),
        }
    }

    /// Queues `item` of `priority` on `worker` ([`WorkerQueue::push`]).
    /// Returns it when `worker` has no queue.
    fn push_to(&self, worker: usize, item: I, priority: i32, est_s: f64) -> Result<(), I> {
        if worker >= self.len() {
            return Err(item);
        }
        let mut item = Some(item);
        self.with(worker, |q| {
            if let Some(i) = item.take() {
                q.push(i, priority, est_s);
            }
        });
        item.map_or(Ok(()), Err)
    }

    /// See [`WorkerQueue::reserve`].
    fn reserve(&self, worker: usize, est_s: f64) {
        self.with(worker, |q| q.reserve(est_s));
    }

    /// See [`WorkerQueue::unreserve`].
    fn unreserve(&self, worker: usize, est_s: f64) {
        self.with(worker, |q| q.unreserve(est_s));
    }

    /// See [`WorkerQueue::take_first`].
    fn take_first<R>(
        &self,
        worker: usize,
        pick: impl FnMut(&I) -> Option<R>,
    ) -> Option<(I, f64, R)> {
        self.with(worker, |q| q.take_first(pick)).flatten()
    }

    /// See [`WorkerQueue::finished`].
    fn finished(&self, worker: usize, id: Option<usize>, now: f64) {
        self.with(worker, |q| q.finished(id, now));
    }

    /// Takes every task of `worker`'s queue and forgets what it runs and
    /// what was reserved for it (a worker leaving).
    fn take_queue(&self, worker: usize) -> Vec<(I, f64)> {
        self.with(worker, |q| q.take_all()).unwrap_or_default()
    }

    /// Takes every queued task.
    fn drain(&self) -> Vec<I> {
        (0..self.len())
            .flat_map(|w| self.take_queue(w))
            .map(|(item, _)| item)
            .collect()
    }
}

impl<I, Q: QueueSet<I>> QueueSet<I> for std::sync::Arc<Q> {
    fn with<R>(&self, worker: usize, f: impl FnOnce(&mut WorkerQueue<I>) -> R) -> Option<R> {
        (**self).with(worker, f)
    }
    fn glance(&self, worker: usize) -> Option<Glance> {
        (**self).glance(worker)
    }
    fn held(&self) -> usize {
        (**self).held()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

/// Queues of one owner that reaches them one at a time without locks
/// (tests, simulations): the single-threaded [`QueueSet`].
#[derive(Debug)]
pub struct PlainQueues<I> {
    queues: Vec<std::cell::RefCell<WorkerQueue<I>>>,
    held: std::cell::Cell<usize>,
}

impl<I> PlainQueues<I> {
    /// Queues for worker ids `0..n`.
    pub fn new(n: usize) -> Self {
        PlainQueues {
            queues: (0..n).map(|_| Default::default()).collect(),
            held: std::cell::Cell::new(0),
        }
    }
}

impl<I> QueueSet<I> for PlainQueues<I> {
    fn with<R>(&self, worker: usize, f: impl FnOnce(&mut WorkerQueue<I>) -> R) -> Option<R> {
        let mut q = self.queues.get(worker)?.borrow_mut();
        let before = q.len();
        let r = f(&mut q);
        self.held.set(self.held.get() + q.len() - before);
        Some(r)
    }
    fn glance(&self, worker: usize) -> Option<Glance> {
        Some(self.queues.get(worker)?.borrow().glance())
    }
    fn held(&self) -> usize {
        self.held.get()
    }
    fn len(&self) -> usize {
        self.queues.len()
    }
}

/// `thief` (idle at `now`) steals from the queues of `victims` (ids; the
/// thief's own is skipped) in `order` (as their glances give it), each
/// queue reached alone ([`WorkerQueue::steal_one`]) only when its glance
/// shows tasks: from each, the first task for which `gains(victim, task,
/// ahead)` gives a value ([`Ahead`]: how long the victim would take to get
/// it done). Returns the victim, the task, its prediction there and the
/// value.
pub fn steal<I, R>(
    queues: &impl QueueSet<I>,
    victims: impl IntoIterator<Item = usize>,
    thief: usize,
    now: f64,
    order: VictimOrder,
    mut gains: impl FnMut(usize, &I, Ahead) -> Option<R>,
) -> Option<(usize, I, f64, R)> {
    let mut found: Vec<(usize, Glance)> = victims
        .into_iter()
        .filter(|&v| v != thief)
        .filter_map(|v| {
            let g = queues.glance(v)?;
            (g.len > 0).then_some((v, g))
        })
        .collect();
    match order {
        VictimOrder::LatestEnd => found.sort_by(|a, b| b.1.load_s(now).total_cmp(&a.1.load_s(now))),
        VictimOrder::LongestQueue => found.sort_by_key(|&(_, g)| std::cmp::Reverse(g.len)),
    }
    found.into_iter().find_map(|(v, _)| {
        queues
            .with(v, |q| q.steal_one(now, |item, ahead| gains(v, item, ahead)))
            .flatten()
            .map(|(item, est, r)| (v, item, est, r))
    })
}

/// [`steal`] latest expected end first (the task-graph policies).
pub fn steal_latest_end<I, R>(
    queues: &impl QueueSet<I>,
    victims: impl IntoIterator<Item = usize>,
    thief: usize,
    now: f64,
    gains: impl FnMut(usize, &I, Ahead) -> Option<R>,
) -> Option<(usize, I, f64, R)> {
    steal(queues, victims, thief, now, VictimOrder::LatestEnd, gains)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_after(q: &PlainQueues<u32>) -> Vec<u32> {
        std::iter::from_fn(|| pop(q, 0, |_| false).map(|(t, _)| t)).collect()
    }

    fn pop(q: &PlainQueues<u32>, w: usize, prefer: impl Fn(&u32) -> bool) -> Option<(u32, f64)> {
        q.with(w, |x| x.pop(prefer)).flatten()
    }

    fn running(q: &PlainQueues<u32>, w: usize) -> usize {
        q.with(w, |x| x.running()).unwrap_or(0)
    }

    #[test]
    fn priorities_order_each_queue_fifo_within_a_priority() {
        let q = PlainQueues::new(1);
        for (id, prio) in [(1, 0), (2, 5), (3, 0), (4, 5)] {
            q.push_to(0, id, prio, 1.0).unwrap();
        }
        assert_eq!(
            q.with(0, |x| x.queued_by_priority()).unwrap(),
            vec![(5, 2.0), (0, 2.0)]
        );
        // A task of priority 5 waits for the two of 5; one of 0 for all.
        assert_eq!(q.ahead_of_s(0, 5, 0.0), 2.0);
        assert_eq!(q.ahead_of_s(0, 9, 0.0), 0.0);
        assert_eq!(q.ahead_of_s(0, 0, 0.0), 4.0);
        assert_eq!(order_after(&q), vec![2, 4, 1, 3]);
        assert_eq!(q.held(), 0);
        assert_eq!(q.push_to(3, 9, 0, 1.0), Err(9), "no queue for worker 3");
    }

    #[test]
    fn due_times_order_a_priority_and_never_cross_priorities() {
        let q = PlainQueues::new(1);
        // (id, priority, latest start): infinite is a plain push.
        for (id, prio, due) in [
            (1, 0, f64::INFINITY),
            (2, 0, 5.0),
            (3, 0, 2.0),
            (4, 0, 5.0),
            (5, 9, 8.0),
            (6, 0, f64::NAN),
            (7, 9, 1.0),
        ] {
            let ahead = q
                .with(0, |x| x.push_due(id, prio, due, 1.0, false))
                .unwrap();
            // A dated task passes the undated 1 (2, 3, 4), 3 passes 2, 7
            // passes 5; the first of a priority and the undated pass none.
            assert_eq!(ahead, [2, 3, 4, 7].contains(&id), "task {id}");
        }
        // Priority 9 first, earliest due first; within 0 the earliest due,
        // ties (2 and 4) and the undated (1, 6: NaN counts as undated) in
        // arrival order.
        assert_eq!(
            q.with(0, |x| x.queued_by_priority()).unwrap(),
            vec![(9, 2.0), (0, 5.0)]
        );
        assert_eq!(order_after(&q), vec![7, 5, 3, 2, 4, 1, 6]);
    }

    #[test]
    fn kept_sums_per_priority_and_marks_match_the_queue() {
        // The queue walked afresh: seconds per priority (highest first) and
        // marked tasks.
        let fresh = |q: &WorkerQueue<u32>| {
            let mut out: Vec<(i32, f64)> = Vec::new();
            for e in &q.items {
                match out.last_mut() {
                    Some(last) if last.0 == e.priority => last.1 += e.est_s,
                    _ => out.push((e.priority, e.est_s)),
                }
            }
            (out, q.items.iter().any(|e| e.marked))
        };
        let mut q = WorkerQueue::default();
        let mut x: u64 = 7;
        let mut next = 0u32;
        for step in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as u32;
            match r % 7 {
                0..=2 => {
                    // Seconds that are exact in binary (sums compare equal).
                    let est = f64::from(r % 8) * 0.25;
                    q.push_marked(next, (r % 5) as i32 - 2, est, r % 3 == 0);
                    next += 1;
                }
                3 => drop(q.pop(|&t| t % 2 == 0)),
                4 => drop(q.take_first(|&t| (t % 5 == 0).then_some(()))),
                5 => drop(q.steal_one(0.0, |&t, _| (t % 3 == 0).then_some(()))),
                _ => drop(q.pop(|_| false)),
            }
            if step % 1000 == 999 {
                drop(q.take_all());
            }
            let (want, marked) = fresh(&q);
            assert_eq!(q.queued_by_priority(), want, "step {step}");
            assert_eq!(q.holds_marked(), marked, "step {step}");
        }
        assert!(next > 5000);
    }

    #[test]
    fn the_preferred_task_goes_first_within_the_head_priority() {
        let q = PlainQueues::new(1);
        for (id, prio) in [(1, 1), (2, 1), (3, 0)] {
            q.push_to(0, id, prio, 1.0).unwrap();
        }
        // Task 2 is preferred: before 1; task 3 (lower priority) never
        // goes before the head's priority.
        assert_eq!(pop(&q, 0, |&t| t == 2 || t == 3).unwrap().0, 2);
        assert_eq!(pop(&q, 0, |&t| t == 3).unwrap().0, 1);
    }

    #[test]
    fn expected_end_follows_queue_reservations_running_tasks_and_completions() {
        let q = PlainQueues::new(2);
        q.push_to(0, 1, 0, 2.0).unwrap();
        q.push_to(0, 2, 0, 3.0).unwrap();
        assert_eq!(q.load_s(0, 10.0), 5.0);
        let (t, est) = pop(&q, 0, |_| false).unwrap();
        q.with(0, |x| x.started(Some(t as usize), est, 10.0));
        // Running until 12, then 3 s queued.
        assert_eq!(q.load_s(0, 10.0), 5.0);
        assert_eq!(q.load_s(0, 11.0), 4.0);
        // A reservation counts until it ends.
        q.reserve(0, 1.0);
        assert_eq!(q.load_s(0, 11.0), 5.0);
        q.unreserve(0, 1.0);
        // Finished late at 13: the queue starts now.
        q.finished(0, Some(1), 13.0);
        assert_eq!(q.load_s(0, 13.0), 3.0);
        // An overdue prediction never makes the load negative.
        assert_eq!(q.load_s(0, 20.0), 3.0);
        assert_eq!(q.load_s(1, 20.0), 0.0);
    }

    #[test]
    fn pipelined_workers_keep_their_expected_end_until_idle() {
        let q: PlainQueues<u32> = PlainQueues::new(1);
        q.with(0, |x| x.started(Some(1), 2.0, 0.0));
        q.with(0, |x| x.started(Some(2), 2.0, 0.0));
        assert_eq!(q.load_s(0, 0.0), 4.0);
        q.finished(0, Some(1), 1.0);
        assert_eq!(q.load_s(0, 1.0), 3.0, "still running task 2");
        q.finished(0, Some(2), 1.5);
        assert_eq!(q.load_s(0, 1.5), 0.0);
        q.finished(0, Some(99), 2.0);
        // Without ids: the oldest.
        q.with(0, |x| x.started(None, 2.0, 3.0));
        q.with(0, |x| x.started(None, 2.0, 3.0));
        q.finished(0, None, 4.0);
        assert_eq!(running(&q, 0), 1);
        assert_eq!(q.load_s(0, 4.0), 3.0);
        // Lost reports forgotten: the queue starts now.
        q.with(0, |x| x.forget_running(4.5));
        assert_eq!((running(&q, 0), q.load_s(0, 4.5)), (0, 0.0));
    }

    #[test]
    fn a_thief_takes_the_first_task_its_rule_accepts_latest_victim_first() {
        let q = PlainQueues::new(3);
        // Worker 0: three tasks of 1 s; worker 1: one of 5 s.
        for id in 0..3 {
            q.push_to(0, id, 0, 1.0).unwrap();
        }
        q.push_to(1, 10, 0, 5.0).unwrap();
        // A thief finishing anything in 2.5 s: worker 1 ends last (5 s) and
        // its task ends at 5.
        let rule = |_: usize, _: &u32, a: Ahead| (2.5 < a.end_s).then_some(());
        let latest = VictimOrder::LatestEnd;
        let (v, t, est, ()) = steal(&q, 0..3, 2, 0.0, latest, rule).unwrap();
        assert_eq!((v, t, est), (1, 10, 5.0));
        // Then worker 0: only its third task (ends at 3) is a gain.
        let (v, t, _, ()) = steal(&q, 0..3, 2, 0.0, latest, rule).unwrap();
        assert_eq!((v, t), (0, 2));
        assert!(steal(&q, 0..3, 2, 0.0, latest, rule).is_none());
        assert_eq!(q.held(), 2);
        // By queue length: worker 0 (two tasks) before worker 1 (one of 9 s,
        // running a task until 4: ahead counts it in end_s, not queued_s).
        q.push_to(1, 11, 0, 9.0).unwrap();
        q.with(1, |x| x.started(Some(7), 4.0, 0.0));
        q.push_to(0, 12, 0, 1.0).unwrap();
        let any = |_: usize, _: &u32, a: Ahead| Some(a);
        let (v, t, _, a) = steal(&q, 0..3, 2, 0.0, VictimOrder::LongestQueue, any).unwrap();
        assert_eq!((v, t, a.queued_s, a.end_s), (0, 0, 1.0, 1.0));
        let (v, t, _, a) = steal(&q, 0..3, 2, 0.0, VictimOrder::LatestEnd, any).unwrap();
        assert_eq!((v, t, a.queued_s, a.end_s), (1, 11, 9.0, 13.0));
    }

    #[test]
    fn take_queue_and_drain_lose_nothing() {
        let q = PlainQueues::new(3);
        for id in 0..9u32 {
            q.push_to(id as usize % 3, id, 0, 1.0).unwrap();
        }
        q.reserve(1, 4.0);
        let gone = q.take_queue(1);
        assert_eq!(gone.len(), 3);
        assert_eq!(q.load_s(1, 0.0), 0.0);
        let mut rest = q.drain();
        rest.extend(gone.into_iter().map(|(t, _)| t));
        rest.sort();
        assert_eq!(rest, (0..9).collect::<Vec<_>>());
        assert_eq!(q.held(), 0);
    }
}
