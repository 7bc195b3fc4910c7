//! The StarPU adapter: the only part of the library that talks to StarPU.
//!
//! It turns StarPU's scheduling callbacks into calls on a [`SchedPolicy`]
//! (safe Rust), builds the C `struct starpu_sched_policy` for each registered
//! policy, and installs the library into StarPU (interposed
//! `starpu_initialize` on 1.3, `STARPU_SCHED_LIB` entry points on 1.4).
//! Every `unsafe` block of the policy crate lives under this module,
//! including the one libc call that is not about StarPU (`flock` for the
//! models file, [`file_lock`]).

// The adapter is the policy crate's one door to C: StarPU's callbacks, its
// API, the interposed symbols (`no_mangle`) and the divisible-load C API
// all need unsafe code (and so does flock), which the workspace denies everywhere else. This
// allowance covers this module and its submodules only; every unsafe block
// still needs a `// SAFETY:` comment (clippy's undocumented_unsafe_blocks).
#![allow(unsafe_code)]

mod bound;
mod callbacks;
mod ctx;
pub mod distributed_ffi;
pub mod divisible_ffi;
mod emulate_codelets;
pub mod file_lock;
mod guard;
mod interpose;
mod registry;
mod task;
mod version_check;

pub use ctx::{
    Membership, SchedCtx, WorkerId, drivers_block, now_us, prefetch_useful, relaxed_lock,
    starpu_version, tasks_outstanding, wake_now,
};
pub use divisible_ffi::{all_worker_ids, kinds_of, worker_kinds, worker_label, worker_names};
pub use emulate_codelets::{ENV as EMULATE_ENV, emulate_after, emulation_in_force};
pub use interpose::known_policies;
pub(crate) use registry::policy_struct;
pub use registry::{policy_by_name, registered_policies};
pub use task::{GraphBelow, Task, TaskRef};

/// What a pop gives: a task (or none) and the workers to wake.
#[derive(Default)]
pub struct Popped {
    /// The task for the asking worker.
    pub task: Option<Task>,
    /// Workers to wake (outside the policy's locks).
    pub wake: Vec<WorkerId>,
}

impl From<Option<Task>> for Popped {
    fn from(task: Option<Task>) -> Popped {
        Popped {
            task,
            wake: Vec::new(),
        }
    }
}

/// A scheduling policy, one instance per StarPU scheduling context.
///
/// StarPU calls these methods concurrently from the submitting threads and
/// from every worker, so implementations synchronise themselves (use
/// [`relaxed_lock`] for locks that workers may wait on). A [`Task`] is an
/// owned token: a task the policy holds must eventually be returned from
/// [`SchedPolicy::pop`] (or from [`SchedPolicy::drain`] at deinit); a token
/// dropped by mistake is rescued onto a capable worker's local queue rather
/// than lost.
pub trait SchedPolicy: Send + Sync + 'static {
    /// Creates the policy state of a new scheduling context, for the
    /// catalog entry `info` StarPU selected.
    fn new(ctx: SchedCtx, info: &'static crate::catalog::PolicyInfo) -> Self
    where
        Self: Sized;

    /// Whether the policy prefetches each task's input when it places it
    /// (StarPU 1.4's core then does not prefetch it again).
    const PREFETCHES_AT_PLACEMENT: bool = false;

    /// The `STARPU_SCHED` name (listed in [`crate::catalog`]).
    fn name(&self) -> &'static str;

    /// Workers joined the context.
    fn add_workers(&self, _ctx: SchedCtx, _workers: &[WorkerId]) {}

    /// Workers left the context. Returns the remaining workers to wake
    /// because the change may have given them work (e.g. tasks queued for
    /// the workers that left); the adapter wakes them after the policy has
    /// released every lock, as for [`SchedPolicy::push`].
    fn remove_workers(&self, _ctx: SchedCtx, _workers: &[WorkerId]) -> Vec<WorkerId> {
        Vec::new()
    }

    /// A task became ready. The policy queues it (calling
    /// [`Task::announce_pushed`] while the task cannot yet be taken) and
    /// returns the idle workers to wake, chosen while it held its lock; the
    /// adapter wakes them after the policy has released every lock.
    fn push(&self, ctx: SchedCtx, task: Task) -> Vec<WorkerId>;

    /// Worker `worker` asks for a task. Called often (drivers poll), so the
    /// empty case must be cheap. Besides the task, the answer names the
    /// workers to wake because this pop made work available to them (an
    /// epoch gave them a block); woken by the adapter after every lock is
    /// released, as for [`SchedPolicy::push`].
    fn pop(&self, ctx: SchedCtx, worker: WorkerId) -> Popped;

    /// A task is about to start on `worker`.
    fn pre_exec(&self, _ctx: SchedCtx, _task: TaskRef<'_>, _worker: WorkerId) {}

    /// A task has finished on `worker` (not called for StarPU-internal
    /// tasks); `ran_s` is how long it ran (pre- to post-execution hook, on
    /// StarPU's clock), when known. Returns the workers to wake because the
    /// completion made work available to them (e.g. an epoch progressed);
    /// with blocking drivers a sleeping worker only looks again when woken.
    /// Woken by the adapter after every lock is released, as for
    /// [`SchedPolicy::push`].
    fn post_exec(
        &self,
        _ctx: SchedCtx,
        _task: TaskRef<'_>,
        _worker: WorkerId,
        _ran_s: Option<f64>,
    ) -> Vec<WorkerId> {
        Vec::new()
    }

    /// Takes every task still queued (called at deinit; normally none).
    fn drain(&self) -> Vec<Task>;

    /// The seconds the policy predicted for `task` on `worker`, if any
    /// (asked just before [`SchedPolicy::post_exec`], for `PLB_TRACE`).
    fn predicted_s(&self, _task: TaskRef<'_>, _worker: WorkerId) -> Option<f64> {
        None
    }

    /// Model refits and fit/solve time so far, for `PLB_SUMMARY`.
    fn model_figures(&self) -> crate::stats::ModelFigures {
        crate::stats::ModelFigures::default()
    }

    /// Lines the policy adds to its `PLB_SUMMARY` after the worker lines
    /// (none by default).
    fn summary_detail(&self) -> Vec<String> {
        Vec::new()
    }
}
