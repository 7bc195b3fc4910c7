//! The `extern "C"` functions StarPU calls, generic over the policy type.
//!
//! Each callback finds the context's [`Instance`] through StarPU's per
//! context policy data, calls the safe policy, and never lets a panic
//! escape (see [`ffi_guard`]).

use std::ffi::{c_uint, c_void};
use std::ptr::{self, NonNull};

use starpu_sys as sys;

use super::SchedPolicy;
use super::ctx::{SchedCtx, WorkerId, now_us, wake_now};
use super::guard::ffi_guard;
use super::task::{Task, TaskRef};
use crate::stats::{ContextStats, StartTimes, summary_requested};
use crate::trace::{Row, Trace};

/// What the adapter keeps per scheduling context.
pub(crate) struct Instance<P> {
    policy: P,
    stats: ContextStats,
    /// Start of each executing task (pre_exec to post_exec).
    starts: StartTimes,
    /// `PLB_SUMMARY` or `PLB_TRACE` asks for task sizes.
    observe: bool,
    trace: Option<&'static Trace>,
    /// The `PLB_GRAPH` file, if one is written.
    graph: Option<&'static Trace>,
    /// When each task was pushed (kept only for `PLB_GRAPH`).
    pushed: StartTimes,
}

/// The instance of context `ctx`, if `init_sched` succeeded.
///
/// # Safety
/// The context must be one whose policy is `P` (true for every callback
/// StarPU routes to `P`'s policy struct).
unsafe fn instance<'a, P>(ctx: c_uint) -> Option<&'a Instance<P>> {
    // SAFETY: the pointer was set by init_sched::<P> from a Box and stays
    // valid until deinit_sched::<P>, after which StarPU calls nothing else.
    unsafe { (sys::starpu_sched_ctx_get_policy_data(ctx) as *const Instance<P>).as_ref() }
}

/// The catalog entry of the policy StarPU runs in context `ctx` (one
/// policy struct per entry, so its name says which).
fn policy_info(ctx: c_uint) -> Option<&'static crate::catalog::PolicyInfo> {
    // SAFETY: plain query on a context StarPU is initialising; the struct
    // it returns is one of ours (static for the process life).
    let policy = unsafe { sys::starpu_sched_ctx_get_sched_policy(ctx).as_ref() }?;
    if policy.policy_name.is_null() {
        return None;
    }
    // SAFETY: our structs' names are NUL-terminated static strings.
    let name = unsafe { std::ffi::CStr::from_ptr(policy.policy_name) };
    crate::catalog::find(name.to_str().ok()?)
}

pub(crate) unsafe extern "C" fn init_sched<P: SchedPolicy>(ctx: c_uint) {
    ffi_guard("init_sched", (), || {
        crate::init_logging();
        // Already checked by the interposed starpu_initialize when the
        // library is preloaded; with StarPU 1.4's STARPU_SCHED_LIB alone
        // this is the first look, and init_sched cannot fail: stop rather
        // than run with altered settings.
        if super::interpose::check_settings().is_err() {
            eprintln!("plb: error: invalid PLB_* setting (above); aborting");
            std::process::abort();
        }
        let Some(info) = policy_info(ctx) else {
            eprintln!("plb: error: context {ctx} runs a policy this library does not know");
            std::process::abort();
        };
        let trace = crate::trace::current();
        let instance = Box::new(Instance {
            policy: P::new(SchedCtx(ctx), info),
            stats: ContextStats::new(WorkerId::max_workers(), now_us(), summary_requested()),
            // One shard per worker: a task's start and end are noted by
            // the worker running it.
            starts: StartTimes::sharded(WorkerId::max_workers()),
            observe: trace.is_some() || summary_requested(),
            trace,
            graph: crate::graph_record::current(),
            pushed: StartTimes::default(),
        });
        if !info.is_central_fifo() {
            // Priority-ordered queues: let the application use any integer
            // (as dmdas does); otherwise StarPU's default range is [0, 1]
            // and applications such as Cholesky collapse theirs to it.
            // SAFETY: plain setters on the context being initialised.
            unsafe {
                if sys::starpu_sched_ctx_min_priority_is_set(ctx) == 0 {
                    sys::starpu_sched_ctx_set_min_priority(ctx, i32::MIN);
                }
                if sys::starpu_sched_ctx_max_priority_is_set(ctx) == 0 {
                    sys::starpu_sched_ctx_set_max_priority(ctx, i32::MAX);
                }
            }
        }
        log::info!("policy {} initialised for context {ctx}", info.name());
        super::bound::start(ctx);
        // SAFETY: hands StarPU an owned pointer, reclaimed in deinit_sched.
        unsafe {
            sys::starpu_sched_ctx_set_policy_data(ctx, Box::into_raw(instance) as *mut c_void)
        };
    })
}

pub(crate) unsafe extern "C" fn deinit_sched<P: SchedPolicy>(ctx: c_uint) {
    ffi_guard("deinit_sched", (), || {
        // SAFETY: reclaims the Box created in init_sched; StarPU calls no
        // other method of this context after deinit.
        let raw = unsafe { sys::starpu_sched_ctx_get_policy_data(ctx) } as *mut Instance<P>;
        if raw.is_null() {
            return;
        }
        // SAFETY: see above; the pointer is cleared before the Box drops.
        let instance = unsafe {
            sys::starpu_sched_ctx_set_policy_data(ctx, ptr::null_mut());
            Box::from_raw(raw)
        };
        let left = instance.policy.drain();
        if !left.is_empty() {
            eprintln!(
                "plb: error: policy {} deinitialised context {ctx} with {} task(s) still queued; they will not run",
                instance.policy.name(),
                left.len()
            );
        }
        if summary_requested() {
            let figures = instance.policy.model_figures();
            let mut lines = instance.stats.summary_lines(
                instance.policy.name(),
                ctx,
                left.len(),
                figures,
                now_us(),
            );
            lines.extend(instance.policy.summary_detail());
            crate::stats::print_summary(&lines);
        }
        for file in [instance.trace, instance.graph].into_iter().flatten() {
            file.flush();
        }
        crate::diagnostics::note_abandoned(left.len());
        left.into_iter().for_each(Task::abandon);
        super::bound::teardown(ctx);
    })
}

pub(crate) unsafe extern "C" fn push_task<P: SchedPolicy>(task: *mut sys::starpu_task) -> i32 {
    // A panic after the token exists drops it, which rescues the task.
    let pushed = ffi_guard("push_task", Ok(Vec::new()), || {
        let Some(raw) = NonNull::new(task) else {
            return Err(-libc::EINVAL);
        };
        // SAFETY: StarPU passes a live task it hands to the policy.
        let token = unsafe { Task::from_raw(raw) };
        let ctx = token.sched_ctx();
        // SAFETY: the task's context routes to this policy.
        match unsafe { instance::<P>(ctx.0) } {
            Some(inst) => {
                inst.stats.note_pushed();
                if inst.graph.is_some() {
                    inst.pushed.start(0, token.addr(), now_us());
                }
                Ok(inst.policy.push(ctx, token))
            }
            None => {
                log::error!("push_task on context {} without policy state", ctx.0);
                drop(token); // Drop rescues it onto a capable worker.
                Ok(Vec::new())
            }
        }
    });
    match pushed {
        Ok(to_wake) => {
            wake_all("push_task (wake)", to_wake);
            0
        }
        Err(code) => code,
    }
}

pub(crate) unsafe extern "C" fn pop_task<P: SchedPolicy>(ctx: c_uint) -> *mut sys::starpu_task {
    let (task, to_wake) = ffi_guard("pop_task", (ptr::null_mut(), Vec::new()), || {
        let Some(worker) = WorkerId::current() else {
            return (ptr::null_mut(), Vec::new());
        };
        // SAFETY: StarPU routes this context to this policy.
        let Some(inst) = (unsafe { instance::<P>(ctx) }) else {
            return (ptr::null_mut(), Vec::new());
        };
        let popped = inst.policy.pop(SchedCtx(ctx), worker);
        let task = match popped.task {
            Some(task) => {
                inst.stats.note_popped();
                task.into_raw()
            }
            None => ptr::null_mut(),
        };
        (task, popped.wake)
    });
    wake_all("pop_task (wake)", to_wake);
    task
}

pub(crate) unsafe extern "C" fn pre_exec_hook<P: SchedPolicy>(
    task: *mut sys::starpu_task,
    ctx: c_uint,
) {
    ffi_guard("pre_exec_hook", (), || {
        let (Some(raw), Some(worker)) = (NonNull::new(task), WorkerId::current()) else {
            return;
        };
        // SAFETY: StarPU routes this context to this policy.
        if let Some(inst) = unsafe { instance::<P>(ctx) } {
            inst.starts
                .start(worker.index(), raw.as_ptr() as usize, now_us());
            // SAFETY: a live task for the hook's duration.
            let task = unsafe { TaskRef::from_raw(raw) };
            inst.policy.pre_exec(SchedCtx(ctx), task, worker);
        }
    })
}

pub(crate) unsafe extern "C" fn post_exec_hook<P: SchedPolicy>(
    task: *mut sys::starpu_task,
    ctx: c_uint,
) {
    let to_wake = ffi_guard("post_exec_hook", Vec::new(), || {
        // SAFETY: StarPU routes this context to this policy.
        let Some(inst) = (unsafe { instance::<P>(ctx) }) else {
            return Vec::new();
        };
        inst.stats.note_executed();
        let end = now_us();
        let Some(raw) = NonNull::new(task) else {
            return Vec::new();
        };
        let Some(worker) = WorkerId::current() else {
            return Vec::new();
        };
        let start = inst.starts.finish(worker.index(), raw.as_ptr() as usize);
        // SAFETY: the task is live for the hook's duration.
        let task = unsafe { TaskRef::from_raw(raw) };
        let busy_s = start.map_or(0.0, |s| ((end - s) / 1e6).max(0.0));
        let units = if inst.observe { task.work_units() } else { 0.0 };
        inst.stats.note_run(worker.index(), busy_s, units);
        if let (Some(t), Some(s)) = (inst.trace, start) {
            let predicted_s = inst.policy.predicted_s(task, worker);
            t.write(&Row {
                kind: "task",
                source: inst.policy.name(),
                worker: i64::from(worker.0),
                start_s: s / 1e6,
                end_s: end / 1e6,
                units,
                predicted_s,
                detail: &task.name(),
            });
        }
        if let (Some(file), Some(s)) = (inst.graph, start) {
            let members = SchedCtx(ctx).workers();
            let pushed = inst.pushed.finish(0, raw.as_ptr() as usize);
            crate::graph_record::record(
                file,
                task,
                SchedCtx(ctx),
                worker,
                &members,
                pushed.map(|p| p / 1e6),
                (s / 1e6, end / 1e6),
            );
        }
        let ran_s = start.map(|_| busy_s);
        inst.policy.post_exec(SchedCtx(ctx), task, worker, ran_s)
    });
    wake_all("post_exec_hook (wake)", to_wake);
}

/// Wakes `workers` (a policy's wake list), outside the policy's locks.
fn wake_all(what: &str, workers: Vec<WorkerId>) {
    if workers.is_empty() {
        return;
    }
    ffi_guard(what, (), || wake_now(workers));
}

/// Converts StarPU's worker array argument.
///
/// # Safety
/// `ids` must point to `n` ints (or be null with `n == 0`).
unsafe fn worker_slice(ids: *mut i32, n: c_uint) -> Vec<WorkerId> {
    if ids.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(ids, n as usize) }
        .iter()
        .filter_map(|&w| u32::try_from(w).ok().map(WorkerId))
        .collect()
}

pub(crate) unsafe extern "C" fn add_workers<P: SchedPolicy>(ctx: c_uint, ids: *mut i32, n: c_uint) {
    ffi_guard("add_workers", (), || {
        // SAFETY: StarPU passes an array of `n` worker ids.
        let workers = unsafe { worker_slice(ids, n) };
        for w in &workers {
            // SAFETY: declares that workers share this context's central
            // queue, as StarPU's own central-queue policies do.
            unsafe { sys::starpu_sched_ctx_worker_shares_tasks_lists(w.0 as i32, ctx as i32) };
        }
        // SAFETY: StarPU routes this context to this policy.
        if let Some(inst) = unsafe { instance::<P>(ctx) } {
            inst.stats.note_workers(workers.iter().map(|w| w.0));
            inst.policy.add_workers(SchedCtx(ctx), &workers);
        }
    })
}

pub(crate) unsafe extern "C" fn remove_workers<P: SchedPolicy>(
    ctx: c_uint,
    ids: *mut i32,
    n: c_uint,
) {
    let to_wake = ffi_guard("remove_workers", Vec::new(), || {
        // SAFETY: StarPU passes an array of `n` worker ids.
        let workers = unsafe { worker_slice(ids, n) };
        // SAFETY: StarPU routes this context to this policy.
        let Some(inst) = (unsafe { instance::<P>(ctx) }) else {
            return Vec::new();
        };
        let mut wake = inst.policy.remove_workers(SchedCtx(ctx), &workers);
        // Workers that left need not look at this context again.
        wake.retain(|w| !workers.contains(w));
        wake
    });
    wake_all("remove_workers (wake)", to_wake);
}
