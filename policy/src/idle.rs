//! Per-worker "idle" flags shared by the central-queue policies: a worker
//! whose last pop found nothing it could run marks itself idle and skips the
//! policy's lock on later polls until a push offers it a task (the drivers
//! of Debian's StarPU poll `pop_task` continuously). Plain atomics, no
//! StarPU.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::starpu::WorkerId;

/// One flag per worker id below the capacity given at construction; ids
/// beyond it are never idle.
#[derive(Debug)]
pub struct IdleFlags(Box<[AtomicBool]>);

impl IdleFlags {
    /// Flags for worker ids `0..capacity`, all clear.
    pub fn new(capacity: usize) -> IdleFlags {
        IdleFlags((0..capacity).map(|_| AtomicBool::new(false)).collect())
    }

    /// Whether worker `w` is marked idle.
    pub fn is_idle(&self, w: usize) -> bool {
        self.0.get(w).is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Marks worker `w` idle (its pop found nothing it can run).
    pub fn set(&self, w: usize) {
        if let Some(f) = self.0.get(w) {
            f.store(true, Ordering::Release);
        }
    }

    /// Clears worker `w`'s flag (a task was offered to it, or it joined).
    /// Writes only a set flag, so clearing an already clear one does not
    /// bounce the cache line between workers (flags are set and cleared
    /// under the policy's lock, so the check cannot miss a concurrent set).
    pub fn clear(&self, w: usize) {
        if let Some(f) = self.0.get(w)
            && f.load(Ordering::Acquire)
        {
            f.store(false, Ordering::Release);
        }
    }

    /// Workers `added` joined a context whose worker list is `list`: each is
    /// appended once and starts not idle.
    pub fn admit(&self, list: &mut Vec<WorkerId>, added: &[WorkerId]) {
        for &w in added {
            if !list.contains(&w) {
                list.push(w);
            }
            self.clear(w.index());
        }
    }

    /// Clears every flag (e.g. workers left and their queues can be stolen).
    pub fn clear_all(&self) {
        self.0
            .iter()
            .for_each(|f| f.store(false, Ordering::Release));
    }
}

#[cfg(test)]
mod tests {
    use super::IdleFlags;

    #[test]
    fn set_clear_and_out_of_range_ids() {
        let f = IdleFlags::new(4);
        assert!(!f.is_idle(2));
        f.set(2);
        f.set(9); // beyond capacity: ignored
        assert!(f.is_idle(2) && !f.is_idle(9));
        f.clear(2);
        assert!(!f.is_idle(2));
        f.set(0);
        f.set(3);
        f.clear_all();
        assert!(!f.is_idle(0) && !f.is_idle(3));
    }
}
