//! The wake-up discipline every task-side policy follows (central queue,
//! task mode's epochs and queues, the task-graph lines).
//!
//! StarPU's blocking drivers (its SimGrid mode, `--enable-blocking-drivers`)
//! put a worker to sleep after a pop that returned no task; only a wake
//! brings it back. Polling drivers (Debian's 1.3) call pop again at once,
//! and there a worker marked idle skips the policy's lock. The rules:
//!
//! 1. A worker whose pop finds nothing marks itself idle ([`Sleepers::fell_idle`])
//!    *under the same lock* as the decision that found nothing.
//! 2. Whatever makes a task available to a worker (a push, a placement, an
//!    epoch handing out a block or progressing, a worker leaving) names it
//!    to [`Sleepers::wake_list`] under that lock; the workers that were idle
//!    are cleared and returned, and the caller wakes them *after* releasing
//!    every lock.
//! 3. A pop that stops early with work possibly left for its worker (a
//!    bounded number of balancer consults) does not mark it idle and names
//!    the worker itself in its wake list: StarPU then keeps it awake (a wake
//!    of a worker that is scheduling sets its `keep_awake`) and it pops
//!    again.
//!
//! Between rule 1 and the driver actually sleeping, StarPU's own
//! `keep_awake` handshake covers a wake that arrives while the worker is
//! still in its pop. The flags are atomics so that polling workers can read
//! their own without the lock; they are only written under the policy's
//! lock.

use std::sync::atomic::{AtomicBool, Ordering};

/// A flag on a cache line of its own (each worker reads its own flag on
/// every polling pop).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Flag(AtomicBool);

/// One idle flag per worker id below the capacity given at construction;
/// ids beyond it are never idle.
#[derive(Debug)]
pub struct Sleepers {
    flags: Box<[Flag]>,
    blocking: bool,
}

impl Sleepers {
    /// Flags for worker ids `0..capacity`, all clear; `blocking`: the
    /// drivers sleep after an empty pop (rule 1 then applies to every empty
    /// pop, not only to those with nothing to wait for).
    pub fn new(capacity: usize, blocking: bool) -> Sleepers {
        Sleepers {
            flags: (0..capacity).map(|_| Flag::default()).collect(),
            blocking,
        }
    }

    /// Whether worker `w` is marked idle.
    pub fn is_idle(&self, w: usize) -> bool {
        self.flags
            .get(w)
            .is_some_and(|f| f.0.load(Ordering::Acquire))
    }

    /// Worker `w`'s pop found nothing (rule 1). `settled`: nothing it waits
    /// for can give it a task without a notification (no epoch may still
    /// hand it a block); with polling drivers only a settled worker is
    /// marked, with blocking drivers every one is (it sleeps either way).
    pub fn fell_idle(&self, w: usize, settled: bool) {
        if (settled || self.blocking)
            && let Some(f) = self.flags.get(w)
        {
            f.0.store(true, Ordering::Release);
        }
    }

    /// Rule 2: clears the flags of `workers` and returns, sorted and
    /// without repeats, those that were idle (to wake after every lock is
    /// released).
    pub fn wake_list(&self, workers: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut wake: Vec<usize> = workers.into_iter().filter(|&w| self.take(w)).collect();
        wake.sort_unstable();
        wake.dedup();
        wake
    }

    /// Clears worker `w`'s flag; returns whether it was set. Writes only a
    /// set flag, so clearing a clear one does not bounce its cache line.
    pub fn take(&self, w: usize) -> bool {
        self.flags
            .get(w)
            .is_some_and(|f| f.0.load(Ordering::Acquire) && f.0.swap(false, Ordering::AcqRel))
    }

    /// The first of `workers` that is idle and accepted by `can`, cleared
    /// (one worker to take a task that any of them could run).
    pub fn wake_one(
        &self,
        workers: impl IntoIterator<Item = usize>,
        can: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        workers
            .into_iter()
            .find(|&w| self.is_idle(w) && can(w) && self.take(w))
    }
}

#[cfg(test)]
mod tests {
    use super::Sleepers;

    #[test]
    fn polling_marks_only_settled_workers_blocking_marks_all() {
        let polling = Sleepers::new(4, false);
        polling.fell_idle(1, false);
        polling.fell_idle(2, true);
        assert!(!polling.is_idle(1) && polling.is_idle(2));
        let blocking = Sleepers::new(4, true);
        blocking.fell_idle(1, false);
        assert!(blocking.is_idle(1));
    }

    #[test]
    fn wake_list_returns_only_idle_workers_once_and_clears_them() {
        let s = Sleepers::new(4, true);
        s.fell_idle(3, true);
        s.fell_idle(1, true);
        s.fell_idle(9, true); // beyond capacity: ignored
        assert_eq!(s.wake_list([3, 0, 1, 3, 9]), vec![1, 3]);
        assert!(!s.is_idle(1) && !s.is_idle(3) && !s.is_idle(9));
        assert!(s.wake_list([1, 3]).is_empty());
    }

    #[test]
    fn wake_one_picks_the_first_idle_capable_worker() {
        let s = Sleepers::new(4, true);
        s.fell_idle(0, true);
        s.fell_idle(2, true);
        assert_eq!(s.wake_one([0, 1, 2], |w| w != 0), Some(2));
        assert!(s.is_idle(0) && !s.is_idle(2));
        assert_eq!(s.wake_one([1, 2], |_| true), None);
    }
}
