//! Stress tests of every registered policy (`starpu_plb::catalog::policies()`)
//! against the real, installed StarPU.
//!
//! Every test runs its scenario once per policy, at full size (the whole
//! suite takes under 10 s on 2 cores): it initialises StarPU with the
//! policy's struct (`conf.sched_policy`, no `STARPU_SCHED`), drives it,
//! shuts StarPU down and checks what the codelets recorded. StarPU can only
//! be initialised once at a time per process, so the tests serialise on
//! `common::lock_starpu`; they also arm a watchdog that aborts the process
//! (rather than hanging the test run) when a scenario deadlocks, e.g.
//! because a task was never given to a worker.
//!
//! Codelets are `extern "C"` functions called on StarPU's worker threads:
//! they never panic, they record what they saw in atomics, and the test
//! thread asserts on those afterwards.

// Unsafe code is denied in the workspace; allowed here because the test
// drives the real StarPU through its C API (sessions, codelets, tasks) as an
// application would (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::io::Write;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use starpu_plb::catalog;
use starpu_plb::diagnostics::abandoned_tasks;
use starpu_plb::starpu::policy_by_name;
use starpu_sys as sys;

mod common;
use common::{Session, Setup, Watchdog, lock_starpu};

/// How long one scenario may take before the watchdog declares a deadlock.
const WATCHDOG_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// Harness: watchdog, StarPU session, codelets, submission.
// ---------------------------------------------------------------------------

/// The names of every registered policy, in catalog order.
fn policies() -> impl Iterator<Item = &'static str> {
    catalog::policies().iter().map(|p| p.name())
}

/// StarPU's CPU workers only, scheduled by `policy`.
fn cpus_only(policy: &'static str) -> Setup {
    Setup {
        ncpus: -1,
        nopencl: 0,
        opencl_on_cpus: false,
        policy,
    }
}

/// Starts scenario `scenario` under `setup.policy` (the session's name is
/// `<scenario>/<policy>`).
fn start(scenario: &str, setup: Setup) -> Session {
    let name: &'static str = Box::leak(format!("{scenario}/{}", setup.policy).into_boxed_str());
    Session::start("plb-stress", name, WATCHDOG_LIMIT, setup)
}

type Kernel = unsafe extern "C" fn(*mut *mut c_void, *mut c_void);

/// A codelet without data buffers; `cpu`/`opencl` are its implementations.
/// Boxed so its address is stable; it must outlive every task using it
/// (declare it before the [`Session`] so it drops after shutdown).
fn codelet(
    name: &'static CStr,
    cpu: Option<Kernel>,
    opencl: Option<Kernel>,
) -> Box<sys::starpu_codelet> {
    // All-zero is STARPU_CODELET_INIT (what starpu_codelet_init does).
    let mut cl = Box::new(sys::starpu_codelet::default());
    // `where_` stays 0: StarPU derives it from the implementations given.
    cl.cpu_funcs[0] = cpu;
    cl.opencl_funcs[0] = opencl;
    cl.nbuffers = 0;
    cl.name = name.as_ptr();
    cl
}

/// A codelet pointer that may be shared with submitting threads.
#[derive(Clone, Copy)]
struct ClPtr(*mut sys::starpu_codelet);

// SAFETY: StarPU codelets are shared by all submitting threads and workers;
// the tests keep the codelet alive until StarPU is shut down.
unsafe impl Send for ClPtr {}
// SAFETY: as above.
unsafe impl Sync for ClPtr {}

impl ClPtr {
    fn of(cl: &mut sys::starpu_codelet) -> ClPtr {
        ClPtr(cl)
    }

    fn get(self) -> *mut sys::starpu_codelet {
        self.0
    }
}

/// Creates a task of `cl` whose `cl_arg` carries the integer `arg`
/// (StarPU never dereferences or frees it: `cl_arg_size` is 0).
///
/// # Safety
/// StarPU must be initialised and `cl` must outlive the task.
unsafe fn new_task(cl: ClPtr, arg: usize, priority: c_int) -> *mut sys::starpu_task {
    // SAFETY: guaranteed by the caller; starpu_task_create never returns
    // NULL (it aborts on allocation failure).
    unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl.get();
        (*task).cl_arg = arg as *mut c_void;
        (*task).priority = priority;
        task
    }
}

/// Submits a detached, self-destroying task of `cl`; returns StarPU's code.
///
/// # Safety
/// As for [`new_task`].
unsafe fn submit(cl: ClPtr, arg: usize, priority: c_int) -> c_int {
    // SAFETY: guaranteed by the caller.
    unsafe { sys::starpu_task_submit(new_task(cl, arg, priority)) }
}

/// The type of the worker running the current thread, or -1 when the
/// current thread is no StarPU worker.
fn current_worker_type() -> i64 {
    // SAFETY: plain queries, valid on any thread.
    unsafe {
        let id = sys::starpu_worker_get_id();
        if id < 0 {
            -1
        } else {
            i64::from(sys::starpu_worker_get_type(id))
        }
    }
}

/// The id of the worker running the current thread (-1 if none).
fn current_worker() -> c_int {
    // SAFETY: plain query, valid on any thread.
    unsafe { sys::starpu_worker_get_id() }
}

/// Busy-waits (a task that takes a little while, without sleeping).
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Per-worker execution counts, for the tests' reports.
struct PerWorker([AtomicU64; 64]);

impl PerWorker {
    const fn new() -> PerWorker {
        PerWorker([const { AtomicU64::new(0) }; 64])
    }

    fn note_current(&self) {
        if let Some(c) = usize::try_from(current_worker())
            .ok()
            .and_then(|w| self.0.get(w))
        {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reset(&self) {
        self.0.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }

    fn snapshot(&self) -> Vec<(usize, u64)> {
        self.0
            .iter()
            .enumerate()
            .map(|(w, c)| (w, c.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}

fn worker_count() -> u32 {
    // SAFETY: StarPU is initialised by the caller's session.
    unsafe { sys::starpu_worker_get_count() }
}

fn count_by_type(t: sys::starpu_worker_archtype) -> c_int {
    // SAFETY: StarPU is initialised by the caller's session.
    unsafe { sys::starpu_worker_get_count_by_type(t) }
}

/// Runs one test of this binary alone in a child process with the extra
/// environment `env`; asserts it passed and returns its stderr (where the
/// policy prints its messages and the tests their reports).
fn run_child(test: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()
        .expect("running the test binary");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child run of {test} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stderr
}

/// The fields of the `plb: policy=<policy> ctx=<ctx> ...` summary line.
fn summary_of(stderr: &str, policy: &str, ctx: u32) -> Vec<(String, u64)> {
    let prefix = format!("plb: policy={policy} ctx={ctx} ");
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no summary line for {policy} context {ctx} in:\n{stderr}"));
    line[prefix.len()..]
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("bad summary field {kv:?}"));
            (
                k.to_string(),
                v.parse()
                    .unwrap_or_else(|_| panic!("bad summary value {kv:?}")),
            )
        })
        .collect()
}

fn field(summary: &[(String, u64)], name: &str) -> u64 {
    summary
        .iter()
        .find(|(k, _)| k == name)
        .map(|&(_, v)| v)
        .unwrap_or_else(|| panic!("summary has no {name}: {summary:?}"))
}

// ---------------------------------------------------------------------------
// 1. Many threads submitting at once.
// ---------------------------------------------------------------------------

const SUBMITTERS: usize = 8;
const TASKS_PER_SUBMITTER: usize = 5_000;

/// One slot per task id: how many times it ran.
static CONC_SEEN: OnceLock<Vec<AtomicU32>> = OnceLock::new();
static CONC_RAN: AtomicU64 = AtomicU64::new(0);
static CONC_TWICE: AtomicU64 = AtomicU64::new(0);
static CONC_BAD: AtomicU64 = AtomicU64::new(0);
static CONC_WORKERS: PerWorker = PerWorker::new();

unsafe extern "C" fn conc_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    let id = arg as usize;
    match CONC_SEEN.get().and_then(|seen| seen.get(id)) {
        Some(slot) => {
            if slot.fetch_add(1, Ordering::Relaxed) != 0 {
                CONC_TWICE.fetch_add(1, Ordering::Relaxed);
            }
        }
        None => {
            CONC_BAD.fetch_add(1, Ordering::Relaxed);
        }
    }
    if current_worker() < 0 {
        CONC_BAD.fetch_add(1, Ordering::Relaxed);
    }
    CONC_WORKERS.note_current();
    CONC_RAN.fetch_add(1, Ordering::Relaxed);
}

/// On CPU workers; then on as many CPU workers as the StarPU build allows,
/// up to 10 (oversubscribed on a small machine: workers are descheduled
/// while they hold or wait for a lock), and on a CPU + PoCL OpenCL mix (the
/// OpenCL worker cannot run these tasks: it must idle without holding
/// any). One test: the scenarios share the codelet's counters.
#[test]
fn many_threads_submitting_at_once_run_every_task_exactly_once() {
    let many = (sys::STARPU_MAXCPUS as i32).min(10);
    for policy in policies() {
        concurrent("concurrent", cpus_only(policy), TASKS_PER_SUBMITTER);
        let oversubscribed = Setup {
            ncpus: many,
            ..cpus_only(policy)
        };
        concurrent("concurrent-many", oversubscribed, TASKS_PER_SUBMITTER / 2);
        let mix = Setup {
            ncpus: 3,
            nopencl: 1,
            opencl_on_cpus: true,
            policy,
        };
        concurrent("concurrent-mix", mix, TASKS_PER_SUBMITTER / 2);
    }
}

fn concurrent(scenario: &str, setup: Setup, per_submitter: usize) {
    let policy = setup.policy;
    let total = SUBMITTERS * per_submitter;
    let seen = CONC_SEEN.get_or_init(|| {
        (0..SUBMITTERS * TASKS_PER_SUBMITTER)
            .map(|_| AtomicU32::new(0))
            .collect()
    });
    seen.iter().for_each(|s| s.store(0, Ordering::Relaxed));
    CONC_RAN.store(0, Ordering::Relaxed);
    CONC_TWICE.store(0, Ordering::Relaxed);
    CONC_BAD.store(0, Ordering::Relaxed);
    CONC_WORKERS.reset();

    let mut cl = codelet(c"plb_stress_concurrent", Some(conc_kernel), None);
    let session = start(scenario, setup);
    let workers = worker_count();
    let cl = ClPtr::of(&mut cl);
    let t0 = Instant::now();
    let failed_submits: usize = thread::scope(|s| {
        let handles: Vec<_> = (0..SUBMITTERS)
            .map(|t| {
                s.spawn(move || {
                    (0..per_submitter)
                        .filter(|i| {
                            // SAFETY: StarPU is running; the codelet outlives the session.
                            unsafe { submit(cl, t * per_submitter + i, 0) != 0 }
                        })
                        .count()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("submitter thread"))
            .sum()
    });
    session.wait_for_all();
    let elapsed = t0.elapsed();
    session.finish();

    eprintln!(
        "concurrent/{policy}: {total} tasks from {SUBMITTERS} threads on {workers} workers in {elapsed:?}; per worker {:?}",
        CONC_WORKERS.snapshot()
    );
    assert_eq!(failed_submits, 0, "{policy}: starpu_task_submit failed");
    assert_eq!(
        CONC_BAD.load(Ordering::Relaxed),
        0,
        "{policy}: a task ran with an unknown id or outside a worker"
    );
    assert_eq!(
        CONC_TWICE.load(Ordering::Relaxed),
        0,
        "{policy}: some tasks ran more than once"
    );
    assert_eq!(
        CONC_RAN.load(Ordering::Relaxed),
        total as u64,
        "{policy}: not every task ran"
    );
    let missing: Vec<usize> = (0..total)
        .filter(|&i| seen[i].load(Ordering::Relaxed) != 1)
        .take(10)
        .collect();
    assert!(
        missing.is_empty(),
        "{policy}: tasks that did not run exactly once: {missing:?}..."
    );
}

// ---------------------------------------------------------------------------
// 2. 100,000 tasks in dependency chains.
// ---------------------------------------------------------------------------

const CHAINS: usize = 1_000;
const CHAIN_LEN: usize = 100;

/// Per chain: how many of its tasks have run (task `i` expects `i`).
static CHAIN_PROGRESS: OnceLock<Vec<AtomicU32>> = OnceLock::new();
static CHAIN_RAN: AtomicU64 = AtomicU64::new(0);
static CHAIN_OUT_OF_ORDER: AtomicU64 = AtomicU64::new(0);
static CHAIN_BAD: AtomicU64 = AtomicU64::new(0);
static CHAIN_WORKERS: PerWorker = PerWorker::new();

unsafe extern "C" fn chain_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    let id = arg as usize;
    let (chain, index) = (id / CHAIN_LEN, (id % CHAIN_LEN) as u32);
    match CHAIN_PROGRESS.get().and_then(|p| p.get(chain)) {
        Some(progress) => {
            // Its predecessor (index - 1) must have completed, and nothing
            // after it may have run yet.
            if progress
                .compare_exchange(index, index + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                CHAIN_OUT_OF_ORDER.fetch_add(1, Ordering::Relaxed);
            }
        }
        None => {
            CHAIN_BAD.fetch_add(1, Ordering::Relaxed);
        }
    }
    CHAIN_WORKERS.note_current();
    CHAIN_RAN.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn a_hundred_thousand_chained_tasks_complete_in_order() {
    for policy in policies() {
        chained(policy, CHAINS);
    }
}

/// `chains` chains of [`CHAIN_LEN`] tasks (a hundred thousand for greedy).
fn chained(policy: &'static str, chains: usize) {
    let total = chains * CHAIN_LEN;
    let progress = CHAIN_PROGRESS.get_or_init(|| (0..CHAINS).map(|_| AtomicU32::new(0)).collect());
    progress.iter().for_each(|p| p.store(0, Ordering::Relaxed));
    CHAIN_RAN.store(0, Ordering::Relaxed);
    CHAIN_OUT_OF_ORDER.store(0, Ordering::Relaxed);
    CHAIN_BAD.store(0, Ordering::Relaxed);
    CHAIN_WORKERS.reset();

    let mut cl = codelet(c"plb_stress_chain", Some(chain_kernel), None);
    let session = start("chains", cpus_only(policy));
    let cl = ClPtr::of(&mut cl);
    let t0 = Instant::now();
    let mut failed_submits = 0usize;
    let mut tasks: Vec<*mut sys::starpu_task> = Vec::with_capacity(CHAIN_LEN);
    for chain in 0..chains {
        tasks.clear();
        for index in 0..CHAIN_LEN {
            // SAFETY: StarPU is running; the codelet outlives the session.
            tasks.push(unsafe { new_task(cl, chain * CHAIN_LEN + index, 0) });
        }
        for index in 1..CHAIN_LEN {
            let mut pred = tasks[index - 1];
            // SAFETY: both tasks are valid and neither is submitted yet, so
            // the predecessor cannot have been destroyed.
            unsafe { sys::starpu_task_declare_deps_array(tasks[index], 1, &mut pred) };
        }
        // Successors first: when a task is submitted its predecessor is
        // still unsubmitted, hence alive (detached tasks free themselves
        // once done).
        for &task in tasks.iter().rev() {
            // SAFETY: a created, not yet submitted task.
            if unsafe { sys::starpu_task_submit(task) } != 0 {
                failed_submits += 1;
            }
        }
    }
    let submitted = t0.elapsed();
    session.wait_for_all();
    let elapsed = t0.elapsed();
    session.finish();

    eprintln!(
        "chains/{policy}: {total} tasks ({chains} chains of {CHAIN_LEN}) submitted in {submitted:?}, all done in {elapsed:?}; \
         per worker {:?}",
        CHAIN_WORKERS.snapshot()
    );
    assert_eq!(failed_submits, 0, "{policy}: starpu_task_submit failed");
    assert_eq!(
        CHAIN_BAD.load(Ordering::Relaxed),
        0,
        "{policy}: a task ran with an unknown id"
    );
    assert_eq!(
        CHAIN_OUT_OF_ORDER.load(Ordering::Relaxed),
        0,
        "{policy}: a task ran before its predecessor"
    );
    assert_eq!(
        CHAIN_RAN.load(Ordering::Relaxed),
        total as u64,
        "{policy}: tasks were lost"
    );
    let incomplete: Vec<usize> = (0..chains)
        .filter(|&c| progress[c].load(Ordering::Relaxed) != CHAIN_LEN as u32)
        .take(10)
        .collect();
    assert!(
        incomplete.is_empty(),
        "{policy}: incomplete chains: {incomplete:?}..."
    );
}

// ---------------------------------------------------------------------------
// 3. Tasks only one worker type can run.
// ---------------------------------------------------------------------------

const TYPED_TASKS: usize = 1_000;

static CPU_ONLY_ON_CPU: AtomicU64 = AtomicU64::new(0);
static CPU_ONLY_ELSEWHERE: AtomicU64 = AtomicU64::new(0);
static OCL_ONLY_ON_OCL: AtomicU64 = AtomicU64::new(0);
static OCL_ONLY_ELSEWHERE: AtomicU64 = AtomicU64::new(0);
static DUAL_ON_CPU: AtomicU64 = AtomicU64::new(0);
static DUAL_ON_OCL: AtomicU64 = AtomicU64::new(0);
static DUAL_MISMATCH: AtomicU64 = AtomicU64::new(0);

const TYPED_COUNTERS: [&AtomicU64; 7] = [
    &CPU_ONLY_ON_CPU,
    &CPU_ONLY_ELSEWHERE,
    &OCL_ONLY_ON_OCL,
    &OCL_ONLY_ELSEWHERE,
    &DUAL_ON_CPU,
    &DUAL_ON_OCL,
    &DUAL_MISMATCH,
];

fn record_type(expected: sys::starpu_worker_archtype, ok: &AtomicU64, wrong: &AtomicU64) {
    let counter = if current_worker_type() == i64::from(expected) {
        ok
    } else {
        wrong
    };
    counter.fetch_add(1, Ordering::Relaxed);
    spin(Duration::from_micros(20));
}

unsafe extern "C" fn cpu_only_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    record_type(
        sys::STARPU_CPU_WORKER,
        &CPU_ONLY_ON_CPU,
        &CPU_ONLY_ELSEWHERE,
    );
}

unsafe extern "C" fn ocl_only_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    record_type(
        sys::STARPU_OPENCL_WORKER,
        &OCL_ONLY_ON_OCL,
        &OCL_ONLY_ELSEWHERE,
    );
}

unsafe extern "C" fn dual_cpu_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    record_type(sys::STARPU_CPU_WORKER, &DUAL_ON_CPU, &DUAL_MISMATCH);
}

unsafe extern "C" fn dual_ocl_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    record_type(sys::STARPU_OPENCL_WORKER, &DUAL_ON_OCL, &DUAL_MISMATCH);
}

/// Set in the child process that runs the worker-type scenario.
const TYPES_CHILD_VAR: &str = "PLB_STRESS_WORKER_TYPES_CHILD";

#[test]
fn a_task_only_one_worker_type_can_run_never_goes_to_another() {
    // StarPU 1.3 enumerates OpenCL devices once per process, at the first
    // starpu_init (reading STARPU_OPENCL_ON_CPUS then), and keeps that list
    // across restarts. So the scenario runs in a fresh child process,
    // where it is the first initialisation.
    if std::env::var_os(TYPES_CHILD_VAR).is_none() {
        let _lock = lock_starpu();
        let _watchdog = Watchdog::arm("worker_types (parent)", WATCHDOG_LIMIT);
        let stderr = run_child(
            "a_task_only_one_worker_type_can_run_never_goes_to_another",
            &[(TYPES_CHILD_VAR, "1"), ("PLB_SUMMARY", "1")],
        );
        eprint!("{stderr}");
        if stderr.contains("SKIPPED") {
            // Visible even when the harness captures the test's output.
            let _ = writeln!(
                std::io::stderr(),
                "a_task_only_one_worker_type_can_run_never_goes_to_another: SKIPPED, no OpenCL worker"
            );
            return;
        }
        // A task popped by a worker of the wrong type is not run by StarPU
        // 1.3: the driver refuses it and pushes it to the policy again. So
        // the codelets' counts alone cannot see such a mistake; the
        // policy's counters can: every task must have been pushed and
        // popped exactly once.
        for policy in policies() {
            let s = summary_of(&stderr, policy, 0);
            let total = 3 * TYPED_TASKS as u64;
            assert_eq!(
                (
                    field(&s, "tasks"),
                    field(&s, "popped"),
                    field(&s, "executed")
                ),
                (total, total, total),
                "{policy}: tasks were pushed or popped more than once (handed to a worker that cannot run them?): {s:?}"
            );
            assert_eq!(
                (field(&s, "left"), field(&s, "workers")),
                (0, 2),
                "{policy}: {s:?}"
            );
        }
        return;
    }
    // In the child: every policy in turn (same worker configuration, so
    // StarPU's OpenCL enumeration of the first initialisation stays right).
    for policy in policies() {
        if !worker_types(policy) {
            return;
        }
    }
}

/// The worker-type scenario under `policy`; false when skipped (no OpenCL
/// device).
fn worker_types(policy: &'static str) -> bool {
    TYPED_COUNTERS
        .iter()
        .for_each(|c| c.store(0, Ordering::Relaxed));
    let mut cpu_only = codelet(c"plb_stress_cpu_only", Some(cpu_only_kernel), None);
    let mut ocl_only = codelet(c"plb_stress_opencl_only", None, Some(ocl_only_kernel));
    let mut dual = codelet(
        c"plb_stress_dual",
        Some(dual_cpu_kernel),
        Some(dual_ocl_kernel),
    );
    let session = start(
        "worker_types",
        Setup {
            ncpus: 1,
            nopencl: 1,
            opencl_on_cpus: true,
            policy,
        },
    );
    let ncpu = count_by_type(sys::STARPU_CPU_WORKER);
    let nocl = count_by_type(sys::STARPU_OPENCL_WORKER);
    if nocl == 0 {
        eprintln!(
            "SKIPPED a_task_only_one_worker_type_can_run_never_goes_to_another: StarPU found no OpenCL device \
             (is pocl-opencl-icd installed?)"
        );
        session.finish();
        return false;
    }
    assert_eq!(
        (ncpu, nocl),
        (1, 1),
        "expected exactly 1 CPU and 1 OpenCL worker"
    );

    let (cpu_only, ocl_only, dual) = (
        ClPtr::of(&mut cpu_only),
        ClPtr::of(&mut ocl_only),
        ClPtr::of(&mut dual),
    );
    let t0 = Instant::now();
    let mut failed_submits = 0;
    // The first half goes in while the workers are paused, so they start
    // on a long mixed queue in which each must skip what it cannot run;
    // the second half is submitted while they run.
    // SAFETY: StarPU is running; paired with starpu_resume below.
    unsafe { sys::starpu_pause() };
    for i in 0..TYPED_TASKS {
        if i == TYPED_TASKS / 2 {
            // SAFETY: pairs the starpu_pause above.
            unsafe { sys::starpu_resume() };
        }
        for cl in [cpu_only, ocl_only, dual] {
            // SAFETY: StarPU is running; the codelets outlive the session.
            if unsafe { submit(cl, i, 0) } != 0 {
                failed_submits += 1;
            }
        }
    }
    session.wait_for_all();
    let elapsed = t0.elapsed();
    session.finish();

    let [
        cpu_ok,
        cpu_wrong,
        ocl_ok,
        ocl_wrong,
        dual_cpu,
        dual_ocl,
        dual_mismatch,
    ] = TYPED_COUNTERS.map(|c| c.load(Ordering::Relaxed));
    eprintln!(
        "worker_types/{policy}: {} tasks in {elapsed:?}; cpu-only {cpu_ok} on CPU / {cpu_wrong} elsewhere, \
         opencl-only {ocl_ok} on OpenCL / {ocl_wrong} elsewhere, dual {dual_cpu} on CPU + {dual_ocl} on OpenCL \
         ({dual_mismatch} with the wrong implementation)",
        3 * TYPED_TASKS
    );
    let n = TYPED_TASKS as u64;
    assert_eq!(failed_submits, 0, "{policy}: starpu_task_submit failed");
    assert_eq!(
        cpu_wrong, 0,
        "{policy}: a CPU-only task ran on a non-CPU worker"
    );
    assert_eq!(
        ocl_wrong, 0,
        "{policy}: an OpenCL-only task ran on a non-OpenCL worker"
    );
    assert_eq!(
        dual_mismatch, 0,
        "{policy}: an implementation ran on the wrong worker type"
    );
    assert_eq!(cpu_ok, n, "{policy}: CPU-only tasks were lost");
    assert_eq!(ocl_ok, n, "{policy}: OpenCL-only tasks were lost");
    assert_eq!(dual_cpu + dual_ocl, n, "{policy}: dual tasks were lost");
    if dual_cpu == 0 || dual_ocl == 0 {
        eprintln!(
            "worker_types/{policy}: note: only one worker type ran the dual-implementation tasks"
        );
    }
    true
}

// ---------------------------------------------------------------------------
// 4. Deinitialising a context with a task still queued.
// ---------------------------------------------------------------------------

static ORPHAN_RAN: AtomicU64 = AtomicU64::new(0);
static AFTER_RAN: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn orphan_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    ORPHAN_RAN.fetch_add(1, Ordering::Relaxed);
}

unsafe extern "C" fn after_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    AFTER_RAN.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn deinit_with_a_task_still_queued_is_reported_not_a_crash() {
    for policy in policies() {
        deinit_queued(policy);
    }
}

fn deinit_queued(policy: &'static str) {
    ORPHAN_RAN.store(0, Ordering::Relaxed);
    AFTER_RAN.store(0, Ordering::Relaxed);
    let mut orphan_cl = codelet(c"plb_stress_orphan", Some(orphan_kernel), None);
    let mut after_cl = codelet(c"plb_stress_after", Some(after_kernel), None);
    let mut session = start("deinit_queued", cpus_only(policy));
    let name = policy;
    let policy = policy_by_name(name).expect("the policy is registered");

    // A context run by our policy, with no worker: nothing can ever pop
    // from it.
    // SAFETY: variadic call as documented in starpu_sched_ctx.h: a
    // (key, value) list terminated by 0; the key is an int, the value of
    // STARPU_SCHED_CTX_POLICY_STRUCT a `struct starpu_sched_policy *` that
    // lives for the whole process.
    let ctx = unsafe {
        sys::starpu_sched_ctx_create(
            std::ptr::null_mut(),
            0,
            c"plb-stress-empty".as_ptr(),
            sys::STARPU_SCHED_CTX_POLICY_STRUCT as c_int,
            policy,
            0 as c_int,
        )
    };
    // SAFETY: plain query of a constant of the StarPU build.
    let max_ctxs = unsafe { sys::plb_nmax_sched_ctxs() };
    assert!(ctx < max_ctxs, "starpu_sched_ctx_create failed");
    assert_ne!(ctx, 0, "the new context must not be the global one");

    // SAFETY: StarPU is running; the codelet outlives the task.
    let task = unsafe { new_task(ClPtr::of(&mut orphan_cl), 0, 0) };
    // SAFETY: `task` is a valid task we own (never submitted). We keep it
    // (destroy = 0) so that we can free it ourselves afterwards.
    unsafe {
        (*task).sched_ctx = ctx;
        (*task).set_destroy(0);
    }
    // SAFETY: reading a field of the process-lifetime policy struct.
    let push = unsafe { (*policy).push_task }.expect("the policy has push_task");
    let before = abandoned_tasks();
    // SAFETY: this is the call StarPU makes for a ready task of `ctx`,
    // whose policy is this struct: the task is valid and belongs to `ctx`.
    let rc = unsafe { push(task) };
    assert_eq!(rc, 0, "{name}: push_task refused the task");
    assert_eq!(
        abandoned_tasks(),
        before,
        "{name}: nothing is abandoned before deinit"
    );

    // SAFETY: `ctx` was created above and has no submitted task, so
    // StarPU deletes it at once, calling the policy's deinit_sched.
    unsafe { sys::starpu_sched_ctx_delete(ctx) };
    assert_eq!(
        abandoned_tasks(),
        before + 1,
        "{name}: the queued task was not reported at deinit"
    );
    assert_eq!(
        ORPHAN_RAN.load(Ordering::Relaxed),
        0,
        "{name}: the queued task ran although no worker could pop it"
    );

    // The policy gave the task up without freeing it: it is still ours.
    // SAFETY: valid task with destroy = 0, never submitted, no longer
    // referenced by the (deleted) context.
    unsafe { sys::starpu_task_destroy(task) };

    // StarPU (and the global context's policy instance) still work.
    let after_cl = ClPtr::of(&mut after_cl);
    for i in 0..100 {
        // SAFETY: StarPU is running; the codelet outlives the session.
        let rc = unsafe { submit(after_cl, i, 0) };
        assert_eq!(rc, 0, "{name}: starpu_task_submit failed");
    }
    session.wait_for_all();
    assert_eq!(
        AFTER_RAN.load(Ordering::Relaxed),
        100,
        "{name}: tasks submitted after the deletion were lost"
    );
    let left = session.shutdown();
    assert_eq!(
        left, 0,
        "{name}: the global context had tasks left at shutdown"
    );
    assert_eq!(abandoned_tasks(), before + 1, "{name}");
}

// ---------------------------------------------------------------------------
// 5. Priorities.
// ---------------------------------------------------------------------------

const PRIO_PER_LEVEL: usize = 500;

/// The priorities used, and how many tasks of each ran (by index).
static PRIO_RAN: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static PRIO_BAD: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn prio_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    match PRIO_RAN.get(arg as usize) {
        Some(c) => c.fetch_add(1, Ordering::Relaxed),
        None => PRIO_BAD.fetch_add(1, Ordering::Relaxed),
    };
}

#[test]
fn tasks_of_every_priority_run() {
    for policy in policies() {
        priorities(policy, PRIO_PER_LEVEL);
    }
}

/// `per_level` tasks of each priority level (an even number).
fn priorities(policy: &'static str, per_level: usize) {
    PRIO_RAN.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    PRIO_BAD.store(0, Ordering::Relaxed);
    let mut cl = codelet(c"plb_stress_priority", Some(prio_kernel), None);
    let session = start("priorities", cpus_only(policy));
    // SAFETY: plain queries; StarPU is running.
    let (min, max) = unsafe {
        (
            sys::starpu_sched_get_min_priority(),
            sys::starpu_sched_get_max_priority(),
        )
    };
    let mut levels = vec![
        min,
        max,
        0,
        -1,
        1,
        -5,
        5,
        -100,
        100,
        c_int::MIN + 1,
        c_int::MAX,
    ];
    levels.sort_unstable();
    levels.dedup();
    assert!(levels.len() <= PRIO_RAN.len());
    let cl = ClPtr::of(&mut cl);
    let t0 = Instant::now();
    // Two submitters interleaving every level.
    let failed_submits: usize = thread::scope(|s| {
        let levels = &levels;
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(move || {
                    let mut failed = 0;
                    for _ in 0..per_level / 2 {
                        for (slot, &prio) in levels.iter().enumerate() {
                            // SAFETY: StarPU is running; the codelet outlives the session.
                            if unsafe { submit(cl, slot, prio) } != 0 {
                                failed += 1;
                            }
                        }
                    }
                    failed
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("submitter thread"))
            .sum()
    });
    session.wait_for_all();
    let elapsed = t0.elapsed();
    session.finish();

    let ran: Vec<(c_int, u64)> = levels
        .iter()
        .enumerate()
        .map(|(slot, &p)| (p, PRIO_RAN[slot].load(Ordering::Relaxed)))
        .collect();
    eprintln!(
        "priorities/{policy}: sched min/max {min}/{max}; {} tasks in {elapsed:?}; ran per priority {ran:?}",
        levels.len() * per_level
    );
    assert_eq!(failed_submits, 0, "{policy}: starpu_task_submit failed");
    assert_eq!(PRIO_BAD.load(Ordering::Relaxed), 0, "{policy}");
    for (prio, n) in ran {
        assert_eq!(
            n, per_level as u64,
            "{policy}: tasks of priority {prio} were lost"
        );
    }
}

// ---------------------------------------------------------------------------
// 6. Pause and resume.
// ---------------------------------------------------------------------------

const PAUSED_TASKS: u64 = 2_000;
static PAUSE_RAN: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn pause_kernel(_buffers: *mut *mut c_void, _arg: *mut c_void) {
    PAUSE_RAN.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn nothing_runs_while_paused_and_everything_after_resume() {
    for policy in policies() {
        paused(policy);
    }
}

fn paused(policy: &'static str) {
    PAUSE_RAN.store(0, Ordering::Relaxed);
    let mut cl = codelet(c"plb_stress_pause", Some(pause_kernel), None);
    let session = start("pause", cpus_only(policy));
    let workers = u64::from(worker_count());
    let cl = ClPtr::of(&mut cl);
    // SAFETY: StarPU is running; paired with starpu_resume below.
    unsafe { sys::starpu_pause() };
    // starpu_pause() only raises a flag that each worker reads at the top
    // of its scheduling loop. Give them time to reach it before submitting;
    // still, a worker preempted just past the check (a loaded machine) may
    // legitimately pop one task before it stops, hence at most one per
    // worker below.
    thread::sleep(Duration::from_millis(100));
    for i in 0..PAUSED_TASKS as usize {
        // SAFETY: StarPU is running; the codelet outlives the session.
        let rc = unsafe { submit(cl, i, 0) };
        assert_eq!(rc, 0, "{policy}: starpu_task_submit failed");
    }
    thread::sleep(Duration::from_millis(100));
    let ran_early = PAUSE_RAN.load(Ordering::Relaxed);
    thread::sleep(Duration::from_millis(100));
    let ran_while_paused = PAUSE_RAN.load(Ordering::Relaxed);
    // SAFETY: plain query.
    let pending = unsafe { sys::starpu_task_nsubmitted() };
    // SAFETY: pairs the starpu_pause above.
    unsafe { sys::starpu_resume() };
    let t0 = Instant::now();
    session.wait_for_all();
    let elapsed = t0.elapsed();
    session.finish();

    eprintln!(
        "pause/{policy}: {ran_while_paused} ran while paused ({pending} pending); all done {elapsed:?} after resume"
    );
    assert!(
        ran_while_paused <= workers && ran_early == ran_while_paused,
        "{policy}: tasks kept running while StarPU was paused ({ran_early}, then {ran_while_paused})"
    );
    assert_eq!(
        pending as u64,
        PAUSED_TASKS - ran_while_paused,
        "{policy}: StarPU did not count the paused tasks as submitted"
    );
    assert_eq!(
        PAUSE_RAN.load(Ordering::Relaxed),
        PAUSED_TASKS,
        "{policy}: tasks were lost across pause/resume"
    );
}

// ---------------------------------------------------------------------------
// 7. The PLB_SUMMARY counters, read from child runs of the tests above.
// ---------------------------------------------------------------------------

#[test]
fn plb_summary_counts_every_task_of_a_run() {
    // Holding the lock keeps this process's StarPU idle while the child's
    // runs, so the two do not compete for the 2 cores.
    let _lock = lock_starpu();
    let _watchdog = Watchdog::arm("plb_summary", WATCHDOG_LIMIT);

    // Each child run goes through every policy; each session prints its
    // own summary lines.
    let stderr = run_child(
        "many_threads_submitting_at_once_run_every_task_exactly_once",
        &[("PLB_SUMMARY", "1")],
    );
    for policy in policies() {
        let s = summary_of(&stderr, policy, 0);
        let total = (SUBMITTERS * TASKS_PER_SUBMITTER) as u64;
        assert_eq!(field(&s, "tasks"), total, "{policy}: pushed counter: {s:?}");
        assert_eq!(
            field(&s, "popped"),
            total,
            "{policy}: popped counter: {s:?}"
        );
        assert_eq!(
            field(&s, "executed"),
            total,
            "{policy}: executed counter: {s:?}"
        );
        assert_eq!(field(&s, "left"), 0, "{policy}: {s:?}");
        assert!(field(&s, "workers") >= 1, "{policy}: {s:?}");
    }

    let stderr = run_child(
        "deinit_with_a_task_still_queued_is_reported_not_a_crash",
        &[("PLB_SUMMARY", "1")],
    );
    for policy in policies() {
        assert!(
            stderr.contains(&format!(
                "plb: error: policy {policy} deinitialised context 1 with 1 task(s) still queued; they will not run"
            )),
            "{policy}: deinit with a queued task printed no error:\n{stderr}"
        );
        let s = summary_of(&stderr, policy, 1);
        assert_eq!(
            (
                field(&s, "tasks"),
                field(&s, "popped"),
                field(&s, "executed"),
                field(&s, "left"),
                field(&s, "workers")
            ),
            (1, 0, 0, 1, 0),
            "{policy}: summary of the worker-less context: {s:?}"
        );
        let s = summary_of(&stderr, policy, 0);
        assert_eq!(
            (field(&s, "tasks"), field(&s, "executed"), field(&s, "left")),
            (100, 100, 0),
            "{policy}: {s:?}"
        );
    }
}
