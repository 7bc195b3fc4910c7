//! Each worker's queue behind its own lock (the [`QueueSet`] the task-mode
//! and task-graph policies share with their schedulers): what `dmda` keeps
//! per worker, so a pop on its own queue takes that queue's lock alone.
//! What the last holder of a queue left is also kept in atomics
//! ([`Glance`]), for readers that do not take its lock (steals pick their
//! victims and placements read expected ends from it), with whether the
//! worker runs one task at a time (a CPU worker: its own-queue pop forgets
//! what it still runs).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use plb_core::worker_queues::{Glance, QueueSet, WorkerQueue};

use crate::starpu::relaxed_lock;

/// One worker's queue and its last [`Glance`].
#[repr(align(64))]
struct LockedLine<I> {
    line: Mutex<WorkerQueue<I>>,
    len: AtomicUsize,
    starts: AtomicU64,
    /// `f64` bits; NaN: the worker runs nothing.
    busy_until: AtomicU64,
    /// `f64` bits.
    ahead_s: AtomicU64,
    tail_priority: AtomicI32,
    /// The worker runs one task at a time (a CPU worker).
    one_at_a_time: AtomicBool,
}

/// Each worker's queue behind its own lock, and how many tasks they hold
/// together.
pub struct LockedLines<I> {
    lines: Box<[LockedLine<I>]>,
    held: AtomicUsize,
}

impl<I> LockedLines<I> {
    /// Queues for worker ids `0..n`.
    pub fn new(n: usize) -> LockedLines<I> {
        LockedLines {
            lines: (0..n)
                .map(|_| LockedLine {
                    line: Mutex::new(WorkerQueue::default()),
                    len: AtomicUsize::new(0),
                    starts: AtomicU64::new(0),
                    busy_until: AtomicU64::new(f64::NAN.to_bits()),
                    ahead_s: AtomicU64::new(0),
                    tail_priority: AtomicI32::new(i32::MAX),
                    one_at_a_time: AtomicBool::new(false),
                })
                .collect(),
            held: AtomicUsize::new(0),
        }
    }
}

impl<I> LockedLines<I> {
    /// Notes whether `worker` runs one task at a time (a CPU worker), for
    /// [`LockedLines::with_own`].
    pub fn set_one_at_a_time(&self, worker: usize, one: bool) {
        if let Some(l) = self.lines.get(worker) {
            l.one_at_a_time.store(one, Ordering::Release);
        }
    }

    /// [`QueueSet::with`] on `worker`'s own queue, telling `f` whether the
    /// worker runs one task at a time (a worker's pop of its own queue).
    pub fn with_own<R>(
        &self,
        worker: usize,
        f: impl FnOnce(&mut WorkerQueue<I>, bool) -> R,
    ) -> Option<R> {
        let one = self
            .lines
            .get(worker)?
            .one_at_a_time
            .load(Ordering::Acquire);
        self.with(worker, |q| f(q, one))
    }
}

impl<I> QueueSet<I> for LockedLines<I> {
    fn with<R>(&self, worker: usize, f: impl FnOnce(&mut WorkerQueue<I>) -> R) -> Option<R> {
        let l = self.lines.get(worker)?;
        let mut q = relaxed_lock(&l.line);
        let before = q.len();
        let r = f(&mut q);
        let g = q.glance();
        if g.len > before {
            self.held.fetch_add(g.len - before, Ordering::AcqRel);
        } else if before > g.len {
            self.held.fetch_sub(before - g.len, Ordering::AcqRel);
        }
        l.len.store(g.len, Ordering::Release);
        l.starts.store(g.starts, Ordering::Release);
        let busy = g.busy_until.unwrap_or(f64::NAN);
        l.busy_until.store(busy.to_bits(), Ordering::Release);
        l.ahead_s.store(g.ahead_s.to_bits(), Ordering::Release);
        l.tail_priority.store(g.tail_priority, Ordering::Release);
        Some(r)
    }

    fn glance(&self, worker: usize) -> Option<Glance> {
        let l = self.lines.get(worker)?;
        let busy = f64::from_bits(l.busy_until.load(Ordering::Acquire));
        Some(Glance {
            len: l.len.load(Ordering::Acquire),
            starts: l.starts.load(Ordering::Acquire),
            busy_until: (!busy.is_nan()).then_some(busy),
            ahead_s: f64::from_bits(l.ahead_s.load(Ordering::Acquire)),
            tail_priority: l.tail_priority.load(Ordering::Acquire),
        })
    }

    fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    fn len(&self) -> usize {
        self.lines.len()
    }
}
