//! What the queue-based policies (`task_mode`, `dag_mode`) read without
//! their push/pop lock, and their timers.

use std::sync::atomic::AtomicUsize;

use crate::hold_time::{HoldTimer, SummaryCount, WorkTimer};
use crate::padded::CachePadded;
use plb_core::sleepers::Sleepers;

/// Lock-free state of one scheduling context's policy.
#[derive(Debug)]
pub struct Gauges {
    /// Tasks held, readable without the lock (the empty pop's fast path);
    /// written at every release of the lock, so apart from `members`,
    /// which every pop reads.
    pub queued: CachePadded<AtomicUsize>,
    /// Workers the policy believes are in the context (compared with
    /// StarPU's count at each pop: StarPU 1.4 never calls a policy's
    /// `remove_workers`, see `SchedCtx::membership`).
    pub members: AtomicUsize,
    /// Per worker: its last pop found nothing (it skips the lock until
    /// notified; with blocking drivers it sleeps until woken): the wake-up
    /// discipline of `plb_core::sleepers`.
    pub idle: Sleepers,
    /// Time spent fitting, consulting balancers and placing batches.
    pub work: WorkTimer,
    /// Time the push/pop lock is held.
    pub held: HoldTimer,
    /// Pops served by the worker's own queue alone (for the summary).
    pub own_line_pops: SummaryCount,
}

impl Gauges {
    /// Gauges for worker ids `0..max_workers`.
    pub fn new(max_workers: usize) -> Gauges {
        Gauges {
            queued: CachePadded(AtomicUsize::new(0)),
            members: AtomicUsize::new(0),
            idle: Sleepers::new(max_workers, crate::starpu::drivers_block()),
            work: WorkTimer::from_env(),
            held: HoldTimer::from_env(),
            own_line_pops: SummaryCount::from_env(),
        }
    }
}
