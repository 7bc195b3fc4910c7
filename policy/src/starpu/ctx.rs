//! Scheduling contexts, worker identifiers and StarPU-aware locking.

use std::sync::{Mutex, MutexGuard};

use starpu_sys as sys;

/// A StarPU worker identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub u32);

impl WorkerId {
    /// The worker running the current thread, if it is a StarPU worker.
    pub fn current() -> Option<WorkerId> {
        // SAFETY: plain query of a thread-local key, valid on any thread.
        let id = unsafe { sys::starpu_worker_get_id() };
        u32::try_from(id).ok().map(WorkerId)
    }

    /// The worker running the current thread when it is between tasks:
    /// a StarPU worker in its driver loop (ending a task: releasing its
    /// successors), not inside a codelet or a callback, so that it pops
    /// again before it can sleep.
    pub fn current_between_tasks() -> Option<WorkerId> {
        let worker = WorkerId::current()?;
        // SAFETY: plain query of the calling thread's current task (NULL
        // outside a codelet or a callback), valid on any thread.
        let running = unsafe { !sys::starpu_task_get_current().is_null() };
        (!running).then_some(worker)
    }

    /// The highest number of workers this StarPU build supports.
    pub fn max_workers() -> usize {
        // SAFETY: returns a compile-time constant of the StarPU build.
        unsafe { sys::plb_nmaxworkers() as usize }
    }

    /// The worker's memory node.
    pub fn memory_node(self) -> usize {
        // SAFETY: plain query; StarPU answers for any worker id it knows.
        unsafe { sys::starpu_worker_get_memory_node(self.0) as usize }
    }

    /// Index form, for per-worker tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The running StarPU's version (`1.4.10`).
pub fn starpu_version() -> String {
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: writes three ints through valid pointers; callable anytime.
    unsafe { sys::starpu_get_version(&mut major, &mut minor, &mut release) };
    format!("{major}.{minor}.{release}")
}

/// See [`SchedCtx::membership`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// Known workers no longer in the context.
    pub gone: Vec<WorkerId>,
    /// Workers in the context not known.
    pub joined: Vec<WorkerId>,
    /// Workers in the context now.
    pub count: usize,
}

/// A StarPU scheduling context identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedCtx(pub(crate) u32);

impl SchedCtx {
    /// The numeric context id.
    pub fn id(self) -> u32 {
        self.0
    }

    /// How many workers the context has now, read from StarPU (cheap: no
    /// lock, no allocation).
    pub fn worker_count(self) -> usize {
        // SAFETY: a plain read of the context's worker collection; StarPU
        // returns 0 for an id it does not know.
        unsafe { sys::starpu_sched_ctx_get_nworkers(self.0) as usize }
    }

    /// How the context's workers differ from `known`: those gone, those
    /// joined, and how many it has now (StarPU 1.4 never calls a policy's
    /// `remove_workers` when workers leave a context —
    /// `starpu_sched_ctx_remove_workers` has the call commented out in its
    /// `sched_ctx.c` — so policies compare at pop and resynchronise).
    pub fn membership(self, known: &[WorkerId]) -> Membership {
        let now = self.workers();
        Membership {
            gone: known.iter().copied().filter(|k| !now.contains(k)).collect(),
            joined: now.iter().copied().filter(|n| !known.contains(n)).collect(),
            count: now.len(),
        }
    }

    /// The workers currently in the context, read from StarPU.
    pub fn workers(self) -> Vec<WorkerId> {
        let mut buf = vec![0i32; WorkerId::max_workers()];
        // SAFETY: `buf` has room for `buf.len()` ints, which bounds the write.
        let n = unsafe { sys::plb_sched_ctx_workers(self.0, buf.as_mut_ptr(), buf.len() as u32) };
        buf.truncate(n as usize);
        buf.into_iter()
            .filter_map(|w| u32::try_from(w).ok().map(WorkerId))
            .collect()
    }
}

/// Locks `mutex` the way StarPU requires from code that may run on a
/// worker: the worker is put in the relax state while it may block, so
/// that other threads can still wake it or take its scheduling lock.
/// A poisoned mutex is recovered (its data stays consistent by design of
/// the policies: every critical section leaves the state valid).
pub fn relaxed_lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    if let Ok(guard) = mutex.try_lock() {
        return guard;
    }
    // SAFETY: relax_on/relax_off are paired below and are no-ops on
    // threads that are not StarPU workers.
    unsafe { sys::starpu_worker_relax_on() };
    let guard = if drivers_block() {
        // Blocking drivers, StarPU's SimGrid mode among them: every worker
        // may be an actor of one OS thread, so blocking on the mutex would
        // block its holder too. Retry, letting StarPU (SimGrid) run the
        // others between tries.
        let mut wait_us = 0.001f32;
        loop {
            match mutex.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    // SAFETY: a plain (simulated, under SimGrid) sleep.
                    unsafe { sys::starpu_usleep(wait_us) };
                    wait_us = (wait_us * 2.0).min(10.0);
                }
            }
        }
    } else {
        mutex.lock().unwrap_or_else(|e| e.into_inner())
    };
    // SAFETY: pairs the relax_on above.
    unsafe { sys::starpu_worker_relax_off() };
    guard
}

/// StarPU's clock, in microseconds (`starpu_timing_now`).
pub fn now_us() -> f64 {
    // SAFETY: reads a monotonic clock; valid on any thread after init.
    unsafe { sys::starpu_timing_now() }
}

/// Tasks submitted to StarPU and not completed yet, in every context
/// (`starpu_task_nsubmitted`: those not ready yet included).
pub fn tasks_outstanding() -> usize {
    // SAFETY: reads one of StarPU's counters; valid after init.
    let n = unsafe { sys::starpu_task_nsubmitted() };
    usize::try_from(n).unwrap_or(0)
}

/// Wakes `worker` if it sleeps; call with no policy lock held.
fn wake_worker(worker: WorkerId) {
    // SAFETY: the id came from the context's own worker list.
    unsafe { sys::starpu_wake_worker_relax_light(worker.0 as i32) };
}

/// Wakes `workers` now (a policy in the middle of a pop, holding none of its
/// locks: StarPU may run the woken worker's pop at once).
pub fn wake_now(workers: Vec<WorkerId>) {
    workers.into_iter().for_each(wake_worker);
}

/// Whether prefetching a placed task's input is worth doing: StarPU's
/// prefetching is on (`STARPU_PREFETCH`, default on) and there is more than
/// one memory node (with one, every copy is already in place).
pub fn prefetch_useful() -> bool {
    // SAFETY: plain queries of StarPU's configuration after init.
    unsafe { sys::starpu_get_prefetch_flag() != 0 && sys::starpu_memory_nodes_get_count() > 1 }
}

/// Whether StarPU's drivers put a worker to sleep after an empty pop (only a
/// wake-up brings it back: SimGrid builds, `--enable-blocking-drivers`),
/// rather than polling (Debian's 1.3). Policies then mark every worker
/// whose pop found nothing idle, so that the next push wakes it.
pub fn drivers_block() -> bool {
    static BLOCK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: returns a compile-time constant of the StarPU build.
    *BLOCK.get_or_init(|| unsafe { sys::plb_blocking_drivers() } != 0)
}
