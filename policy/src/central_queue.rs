//! The `greedy` policy in task mode: the papers' greedy baseline (and
//! StarPU's `eager`), one central FIFO; each ready task goes to the first
//! idle worker able to run it. (Not to be confused with the `greedy`
//! *balancer*, `plb_core::balance::Greedy`, which the divisible-load API
//! and the simulator run: equal blocks to whichever PU is idle.)

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::fifo::CentralFifo;
use crate::hold_time::HoldTimer;
use crate::starpu::{Popped, SchedCtx, SchedPolicy, Task, WorkerId, drivers_block, relaxed_lock};
use plb_core::sleepers::Sleepers;

/// State of one scheduling context under the `greedy` policy.
pub struct CentralQueuePolicy {
    state: Mutex<State>,
    /// Tasks in the FIFO, readable without the lock (pop fast path).
    queued: AtomicUsize,
    /// Per worker: its last pop found nothing it could run, and no push
    /// since has offered it a task. Lets polling workers skip the lock.
    idle: Sleepers,
    /// Time `state` is held.
    held: HoldTimer,
}

struct State {
    fifo: CentralFifo<Task>,
    workers: Vec<WorkerId>,
}

impl SchedPolicy for CentralQueuePolicy {
    fn new(_ctx: SchedCtx, _info: &'static crate::catalog::PolicyInfo) -> Self {
        CentralQueuePolicy {
            state: Mutex::new(State {
                fifo: CentralFifo::default(),
                workers: Vec::new(),
            }),
            queued: AtomicUsize::new(0),
            idle: Sleepers::new(WorkerId::max_workers(), drivers_block()),
            held: HoldTimer::from_env(),
        }
    }

    fn name(&self) -> &'static str {
        "greedy"
    }

    fn add_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) {
        let mut st = relaxed_lock(&self.state);
        for &w in workers {
            if !st.workers.contains(&w) {
                st.workers.push(w);
            }
        }
        // Joined workers start awake (they pop).
        self.idle.wake_list(workers.iter().map(|w| w.index()));
    }

    /// Nothing to wake: the central FIFO is shared, so a worker leaving
    /// gives the others no task they could not already take.
    fn remove_workers(&self, _ctx: SchedCtx, workers: &[WorkerId]) -> Vec<WorkerId> {
        relaxed_lock(&self.state)
            .workers
            .retain(|w| !workers.contains(w));
        Vec::new()
    }

    fn push(&self, _ctx: SchedCtx, task: Task) -> Vec<WorkerId> {
        let mut st = relaxed_lock(&self.state);
        let t0 = self.held.start();
        task.announce_pushed();
        // Wake the first idle worker that can run the task; the others keep
        // skipping the lock.
        let wake = self
            .idle
            .wake_one(st.workers.iter().map(|w| w.index()), |w| {
                task.first_impl_on(WorkerId(w as u32)).is_some()
            })
            .map(|w| WorkerId(w as u32));
        st.fifo.push(task);
        self.queued.store(st.fifo.len(), Ordering::Release);
        self.held.stop(t0);
        drop(st);
        wake.into_iter().collect()
    }

    fn pop(&self, _ctx: SchedCtx, worker: WorkerId) -> Popped {
        self.take(worker).into()
    }

    fn model_figures(&self) -> crate::stats::ModelFigures {
        crate::stats::ModelFigures {
            lock_held_s: self.held.held_s(),
            own_line_pops: 0,
            ..Default::default()
        }
    }

    fn drain(&self) -> Vec<Task> {
        let mut st = relaxed_lock(&self.state);
        self.queued.store(0, Ordering::Release);
        st.fifo.drain()
    }
}

impl CentralQueuePolicy {
    /// The oldest task `worker` can run, with its implementation set.
    fn take(&self, worker: WorkerId) -> Option<Task> {
        // An idle worker skips the lock until a push clears its flag. With
        // polling drivers an empty queue is answered without the lock (the
        // worker will look again). With blocking drivers (StarPU's SimGrid
        // mode) a worker sleeps after an empty pop and only a wake brings
        // it back, so it takes the lock and marks itself idle, and the next
        // push sees the flag and wakes it.
        if self.idle.is_idle(worker.index())
            || (self.queued.load(Ordering::Acquire) == 0 && !drivers_block())
        {
            return None;
        }
        let mut st = relaxed_lock(&self.state);
        let t0 = self.held.start();
        let taken = st.fifo.take_first(|t| t.first_impl_on(worker));
        self.queued.store(st.fifo.len(), Ordering::Release);
        if taken.is_none() {
            self.idle.fell_idle(worker.index(), true);
        }
        self.held.stop(t0);
        drop(st);
        let (mut task, nimpl) = taken?;
        task.set_implementation(nimpl);
        Some(task)
    }
}
