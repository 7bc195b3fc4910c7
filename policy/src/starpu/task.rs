//! Owned tokens for the tasks StarPU hands to a policy.

use std::marker::PhantomData;
use std::ptr::NonNull;

use starpu_sys as sys;

use super::ctx::{SchedCtx, WorkerId};

/// A task StarPU pushed to the policy and that the policy has not yet
/// handed back. Not `Clone`: exactly one owner at a time.
///
/// Dropping a `Task` instead of returning it from `pop` (a bug, or a panic
/// unwinding through the policy) does not lose it: `Drop` pushes it onto
/// the local queue of a worker of its context that can run it.
pub struct Task {
    raw: NonNull<sys::starpu_task>,
}

// SAFETY: a starpu_task is owned by StarPU and may be handled from any
// thread; the token guarantees a single user at a time.
unsafe impl Send for Task {}

impl Task {
    /// Wraps a task StarPU just passed to `push_task`.
    ///
    /// # Safety
    /// `raw` must be a live task given to the policy and not yet returned.
    pub(crate) unsafe fn from_raw(raw: NonNull<sys::starpu_task>) -> Task {
        Task { raw }
    }

    /// Hands the task back to StarPU; the policy must not use it again.
    pub(crate) fn into_raw(self) -> *mut sys::starpu_task {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    fn as_ref(&self) -> TaskRef<'_> {
        TaskRef {
            raw: self.raw,
            _life: PhantomData,
        }
    }

    /// The scheduling context the task was submitted to.
    pub fn sched_ctx(&self) -> SchedCtx {
        self.as_ref().sched_ctx()
    }

    /// The task's priority.
    pub fn priority(&self) -> i32 {
        self.as_ref().priority()
    }

    /// StarPU's predicted milliseconds for the task on `worker`, in the
    /// task's own context ([`TaskRef::expected_ms_on`]).
    pub fn expected_ms_on(&self, worker: WorkerId) -> Option<f64> {
        self.as_ref().expected_ms_on(worker, self.sched_ctx())
    }

    /// A short human-readable identification for messages.
    pub fn describe(&self) -> String {
        self.as_ref().describe()
    }

    /// See [`TaskRef::codelet_key`].
    pub fn codelet_key(&self) -> usize {
        self.as_ref().codelet_key()
    }

    /// See [`TaskRef::codelet_name`].
    pub fn codelet_name(&self) -> Option<String> {
        self.as_ref().codelet_name()
    }

    /// See [`TaskRef::work_units`].
    pub fn work_units(&self) -> f64 {
        self.as_ref().work_units()
    }

    /// See [`TaskRef::addr`].
    pub fn addr(&self) -> usize {
        self.as_ref().addr()
    }

    /// The first implementation `worker` can run, or `None` when the worker
    /// cannot execute the task (wrong worker type, `where` mask,
    /// `can_execute` hook).
    pub fn first_impl_on(&self, worker: WorkerId) -> Option<u32> {
        let mut nimpl = 0u32;
        // SAFETY: the token owns a live task; StarPU only reads it.
        let ok = unsafe {
            sys::starpu_worker_can_execute_task_first_impl(worker.0, self.raw.as_ptr(), &mut nimpl)
        };
        (ok != 0).then_some(nimpl)
    }

    /// Seconds StarPU predicts for moving the task's data to `worker`'s
    /// memory node, from its bus calibration (`starpu_task_expected_data_
    /// transfer_time`; 0 when the data is already there). `None` while the
    /// bus is not calibrated or the prediction is unusable. A *prediction*:
    /// StarPU does not report the time its transfers took per task.
    pub fn expected_transfer_s(&self, worker: WorkerId) -> Option<f64> {
        self.expected_transfer_to_node_s(worker.memory_node())
    }

    /// Adds, to each entry of `out` (one per entry of `nodes`), the bytes
    /// of the data the task writes (`W` or `RW` handles) that have a valid
    /// copy on that node (the data affinity of DADA).
    pub fn written_bytes_on(&self, nodes: &[usize], out: &mut [f64]) {
        self.for_each_handle(|h, mode| {
            if mode & sys::STARPU_W == 0 {
                return;
            }
            // SAFETY: a registered handle of a live task; both calls only
            // read StarPU's data state (a hint, no lock, no callback).
            let size = unsafe { sys::starpu_data_get_size(h) } as f64;
            for (o, &node) in out.iter_mut().zip(nodes) {
                // SAFETY: as above; `node` is a worker's memory node.
                if unsafe { sys::starpu_data_is_on_node(h, node as u32) } != 0 {
                    *o += size;
                }
            }
        });
    }

    /// Whether every handle the task reads has a valid copy on `node`
    /// (ready-data-first popping).
    pub fn input_on_node(&self, node: usize) -> bool {
        let mut ready = true;
        self.for_each_handle(|h, mode| {
            if mode & sys::STARPU_R == 0 {
                return;
            }
            // SAFETY: a registered handle of a live task; a plain read of
            // StarPU's data state.
            let here = unsafe { sys::starpu_data_is_on_node(h, node as u32) };
            if here == 0 {
                ready = false;
            }
        });
        ready
    }

    /// Calls `f` with each non-null data handle of the task and its mode.
    fn for_each_handle(
        &self,
        mut f: impl FnMut(sys::starpu_data_handle_t, sys::starpu_data_access_mode),
    ) {
        let task = self.raw.as_ptr();
        // SAFETY: live task; the wrapper returns 0 without a codelet.
        let n = unsafe { sys::plb_task_get_nbuffers(task) };
        for i in 0..n {
            // SAFETY: `i` < the task's number of buffers.
            let (h, mode) = unsafe {
                (
                    sys::plb_task_get_handle(task, i),
                    sys::plb_task_get_mode(task, i),
                )
            };
            if !h.is_null() {
                f(h, mode);
            }
        }
    }

    /// Asks StarPU to start moving the task's input to `worker`'s memory
    /// node now (`starpu_prefetch_task_input_for`), as `dmda` does at
    /// placement. Call it only while the policy still holds the task.
    pub fn prefetch_for(&self, worker: WorkerId) {
        // StarPU 1.4 asserts if a task's input is prefetched twice.
        #[cfg(not(starpu_1_3))]
        // SAFETY: live task held by the policy; a plain read.
        if unsafe { self.raw.as_ref() }.prefetched != 0 {
            return;
        }
        // SAFETY: live task held by the policy; StarPU only queues data
        // requests and never calls back into the policy.
        unsafe { sys::starpu_prefetch_task_input_for(self.raw.as_ptr(), worker.0) };
    }

    /// Seconds StarPU predicts for moving the task's data to memory node
    /// `node` (see [`Task::expected_transfer_s`]).
    pub fn expected_transfer_to_node_s(&self, node: usize) -> Option<f64> {
        // SAFETY: live task; the wrapper returns 0 without a codelet.
        if unsafe { sys::plb_task_get_nbuffers(self.raw.as_ptr()) } == 0 {
            // No data, nothing to move.
            return Some(0.0);
        }
        // SAFETY: the token owns a live task; the call only reads StarPU's
        // data and bus state and never calls back into the policy.
        let us =
            unsafe { sys::starpu_task_expected_data_transfer_time(node as u32, self.raw.as_ptr()) };
        (us.is_finite() && us >= 0.0).then_some(us / 1e6)
    }

    /// Selects the implementation the worker will run.
    pub fn set_implementation(&mut self, nimpl: u32) {
        // SAFETY: the token owns a live task not yet handed to a worker.
        unsafe { sys::starpu_task_set_implementation(self.raw.as_ptr(), nimpl) };
    }

    /// Tells StarPU the task is queued (`starpu_push_task_end`). Call it
    /// while holding the queue's lock, so no worker can take the task first.
    pub fn announce_pushed(&self) {
        // SAFETY: live task inside push_task, as StarPU requires.
        unsafe { sys::starpu_push_task_end(self.raw.as_ptr()) };
    }

    /// Gives up a task that can no longer be scheduled (context torn down
    /// with the task still queued). The task is reported, never freed.
    pub(crate) fn abandon(self) {
        log::error!("{} abandoned at scheduler deinit", self.describe());
        let _ = self.into_raw();
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        rescue(self.raw);
    }
}

/// Last resort for a task token dropped without being handed back: put it
/// on the local queue of the first worker of its context that can run it.
fn rescue(raw: NonNull<sys::starpu_task>) {
    let token = TaskRef {
        raw,
        _life: PhantomData,
    };
    let ctx = token.sched_ctx();
    let capable = ctx.workers().into_iter().find_map(|w| {
        let mut nimpl = 0u32;
        // SAFETY: live task (the token was never handed back).
        let ok = unsafe {
            sys::starpu_worker_can_execute_task_first_impl(w.0, raw.as_ptr(), &mut nimpl)
        };
        (ok != 0).then_some((w, nimpl))
    });
    match capable {
        Some((worker, nimpl)) => {
            log::error!(
                "{} was dropped by the policy; rescued onto worker {}",
                token.describe(),
                worker.0
            );
            // SAFETY: live task handed to StarPU exactly once, here.
            unsafe {
                sys::starpu_task_set_implementation(raw.as_ptr(), nimpl);
                sys::starpu_push_local_task(worker.0 as i32, raw.as_ptr(), 0);
            }
        }
        None => log::error!(
            "{} was dropped by the policy and no worker of context {} can run it",
            token.describe(),
            ctx.0
        ),
    }
}

/// A borrowed view of a task, given to the execution hooks.
#[derive(Clone, Copy)]
pub struct TaskRef<'a> {
    raw: NonNull<sys::starpu_task>,
    _life: PhantomData<&'a sys::starpu_task>,
}

impl TaskRef<'_> {
    /// Wraps a task pointer StarPU passed to a hook.
    ///
    /// # Safety
    /// `raw` must stay valid for the lifetime of the view.
    pub(crate) unsafe fn from_raw<'a>(raw: NonNull<sys::starpu_task>) -> TaskRef<'a> {
        TaskRef {
            raw,
            _life: PhantomData,
        }
    }

    fn task(&self) -> &sys::starpu_task {
        // SAFETY: valid for 'a by construction.
        unsafe { self.raw.as_ref() }
    }

    /// The scheduling context the task was submitted to.
    pub fn sched_ctx(&self) -> SchedCtx {
        SchedCtx(self.task().sched_ctx)
    }

    /// The task's priority.
    pub fn priority(&self) -> i32 {
        self.task().priority
    }

    /// Identifies the task's codelet (the application's codelet address;
    /// 0 for a task without one), the key of the per-codelet models. Under
    /// `PLB_EMULATE` a task holds a private copy of its codelet from
    /// submission to the end of its body: the key is the application's
    /// codelet either way.
    pub fn codelet_key(&self) -> usize {
        super::emulate_codelets::original_of(self.task().cl as usize)
    }

    /// What names the task's codelet across runs: its performance model's
    /// symbol, else the codelet's name; `None` when it has neither (or no
    /// codelet).
    pub fn codelet_name(&self) -> Option<String> {
        let cl = self.task().cl;
        if cl.is_null() {
            return None;
        }
        // SAFETY: a non-null codelet pointer of a live task is valid, and
        // so is its model pointer when non-null.
        let cl = unsafe { &*cl };
        // SAFETY: as above.
        let symbol = unsafe { cl.model.as_ref() }.map_or(std::ptr::null(), |m| m.symbol);
        let name = if symbol.is_null() { cl.name } else { symbol };
        if name.is_null() {
            return None;
        }
        // SAFETY: StarPU names are NUL-terminated C strings.
        let s = unsafe { std::ffi::CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        (!s.is_empty()).then_some(s)
    }

    /// StarPU's predicted milliseconds for the task on `worker` in context
    /// `ctx` (`starpu_task_expected_length` on the worker's performance
    /// archetype), the shortest over the implementations it can run there;
    /// `None` when it can run none or StarPU has no prediction.
    pub fn expected_ms_on(&self, worker: WorkerId, ctx: SchedCtx) -> Option<f64> {
        let raw = self.raw.as_ptr();
        (0..sys::STARPU_MAXIMPLEMENTATIONS)
            .filter_map(|nimpl| {
                // SAFETY: queries on a live task: StarPU reads it and its
                // models under its own locks and calls no policy hook (for
                // a model not calibrated yet it also turns its own
                // calibration on, outside SimGrid); the archetype is
                // StarPU's, for a worker of the context.
                unsafe {
                    if sys::starpu_worker_can_execute_task(worker.0, raw, nimpl) == 0 {
                        return None;
                    }
                    let arch = sys::starpu_worker_get_perf_archtype(worker.0 as i32, ctx.0);
                    if arch.is_null() {
                        return None;
                    }
                    Some(sys::starpu_task_expected_length(raw, arch, nimpl))
                }
            })
            .filter(|us| us.is_finite() && *us > 0.0)
            .map(|us| us / 1e3)
            .reduce(f64::min)
    }

    /// The addresses of its successors that go through a scheduler, in its
    /// context, as StarPU knows them now (see [`GraphBelow::successors`]).
    pub fn scheduled_successors(&self) -> Vec<usize> {
        // SAFETY: a TaskRef is made only for a task in its pre- or
        // post-execution hook, one the policy holds, or a successor of a
        // held one (the callers of `TaskRef::from_raw`): none has
        // completed, so its successors are live too.
        unsafe { scheduled_successors(self.raw) }
    }

    /// The task's address, which identifies it while it is alive.
    pub fn addr(&self) -> usize {
        self.raw.as_ptr() as usize
    }

    /// The task's size in work units: `flops` when the application set it,
    /// otherwise the total size in bytes of its data handles, otherwise 1.
    pub fn work_units(&self) -> f64 {
        let task = self.task();
        if task.flops.is_finite() && task.flops > 0.0 {
            return task.flops;
        }
        // SAFETY: live task; the wrapper returns 0 without a codelet.
        let n = unsafe { sys::plb_task_get_nbuffers(task) };
        let bytes: usize = (0..n)
            .map(|i| {
                // SAFETY: `i` < the task's number of buffers.
                let h = unsafe { sys::plb_task_get_handle(task, i) };
                if h.is_null() {
                    0
                } else {
                    // SAFETY: a registered handle of a live task.
                    unsafe { sys::starpu_data_get_size(h) }
                }
            })
            .fold(0usize, usize::saturating_add);
        if bytes > 0 { bytes as f64 } else { 1.0 }
    }

    /// A short human-readable identification for messages: the task's or
    /// its codelet's name and its address (StarPU's job ids are 0 unless
    /// StarPU was built with FxT or debugging).
    pub fn describe(&self) -> String {
        format!("task {} at {:p}", self.name(), self.raw)
    }

    /// The task's name, else its codelet's, else "unnamed".
    pub fn name(&self) -> String {
        let task = self.task();
        let mut name = task.name;
        if name.is_null() && !task.cl.is_null() {
            // SAFETY: a non-null codelet pointer of a live task is valid.
            name = unsafe { (*task.cl).name };
        }
        if name.is_null() {
            "unnamed".into()
        } else {
            // SAFETY: StarPU names are NUL-terminated C strings.
            unsafe { std::ffi::CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// The task graph below tasks the policy holds, as StarPU knows it (the
/// successors submitted so far, in the same scheduling context). Only
/// those tasks and the successors this view returned can be asked about:
/// none of them can have completed (a task completes after all its
/// predecessors, and the roots are held).
pub struct GraphBelow<'a> {
    known: &'a mut rustc_hash::FxHashSet<usize>,
    _held: PhantomData<&'a [Task]>,
}

impl<'a> GraphBelow<'a> {
    /// The graph below `tasks`, which stay held while the view lives;
    /// `known` is the view's set of the tasks it may ask about, emptied
    /// first and kept by the caller, so that views allocate none once it
    /// has grown.
    pub fn of(tasks: &'a [Task], known: &'a mut rustc_hash::FxHashSet<usize>) -> GraphBelow<'a> {
        if known.capacity() > plb_core::dag::rank::KEPT_SCRATCH {
            *known = rustc_hash::FxHashSet::default();
        }
        known.clear();
        known.extend(tasks.iter().map(Task::addr));
        GraphBelow {
            known,
            _held: PhantomData,
        }
    }

    fn raw(&self, id: usize) -> Option<NonNull<sys::starpu_task>> {
        self.known
            .contains(&id)
            .then(|| NonNull::new(id as *mut sys::starpu_task))
            .flatten()
    }

    /// The successors of task `id` that go through a scheduler (StarPU's
    /// `starpu_task_get_task_scheduled_succs`: no codelet-less or
    /// explicitly placed tasks) in `id`'s scheduling context (so through
    /// this policy, whose `post_exec` sees them complete); empty for an id
    /// this view did not give.
    pub fn successors(&mut self, id: usize) -> Vec<usize> {
        let Some(raw) = self.raw(id) else {
            return Vec::new();
        };
        // SAFETY: `raw` is a held task or a successor of one, not
        // completed (see the type's documentation).
        let ids = unsafe { scheduled_successors(raw) };
        self.known.extend(&ids);
        ids
    }

    /// The codelet key and work units of task `id` ([`TaskRef::codelet_key`],
    /// [`TaskRef::work_units`]); `None` for an id this view did not give.
    pub fn codelet_and_units(&self, id: usize) -> Option<(usize, f64)> {
        let raw = self.raw(id)?;
        // SAFETY: a live task (see the type's documentation), read only
        // while the view, and so the held roots, live.
        let task = unsafe { TaskRef::from_raw(raw) };
        Some((task.codelet_key(), task.work_units()))
    }
}

/// The addresses of `raw`'s successors that go through a scheduler
/// (`starpu_task_get_task_scheduled_succs`) in `raw`'s scheduling context.
///
/// # Safety
/// `raw` and its successors must be live tasks for the call (a task not
/// yet completed: its successors cannot have completed either).
unsafe fn scheduled_successors(raw: NonNull<sys::starpu_task>) -> Vec<usize> {
    // StarPU fills at most the room given and returns how many it filled
    // (not how many there are): a full array is asked again with twice the
    // room. The first ask uses an array on the stack (most tasks have few
    // successors).
    let mut first = [std::ptr::null_mut::<sys::starpu_task>(); 16];
    let mut more: Vec<*mut sys::starpu_task> = Vec::new();
    let mut room = first.len();
    let got = loop {
        let out = if more.is_empty() {
            &mut first[..]
        } else {
            &mut more[..]
        };
        // SAFETY: `raw` is live (the caller's contract); StarPU only reads
        // its successor list under its own lock and never calls back into
        // the policy; `out` has room for `room` pointers.
        let got = unsafe {
            sys::starpu_task_get_task_scheduled_succs(raw.as_ptr(), room as u32, out.as_mut_ptr())
        };
        let got = got.clamp(0, room as i32) as usize;
        if got < room || room >= 1 << 16 {
            break &out[..got];
        }
        room *= 2;
        more = vec![std::ptr::null_mut(); room];
    };
    // SAFETY: `raw` and each non-null successor are live tasks (the
    // caller's contract); only their context field is read.
    let ctx_of = |p: NonNull<sys::starpu_task>| unsafe { TaskRef::from_raw(p) }.sched_ctx();
    let ctx = ctx_of(raw);
    got.iter()
        .filter_map(|&p| NonNull::new(p))
        .filter(|&p| ctx_of(p) == ctx)
        .map(|p| p.as_ptr() as usize)
        .collect()
}
