//! Task mode of the model-based policies (`plb-hac`, `plb-hec`, `hdss`,
//! `acosta`) against the real, installed StarPU: epochs of independent
//! tasks balanced by the flavour's balancer, the fallback rule for
//! dependent tasks of mixed codelets, and every task run exactly once.
//!
//! StarPU runs two CPU workers; the codelet spins three times longer on
//! worker 1 (the tasks each worker ran are printed; who ran more is a
//! timing outcome, not asserted). Tests serialise on `common::lock_starpu` (one StarPU per process)
//! and arm a watchdog that aborts on a deadlock.

// Unsafe code is denied in the workspace; allowed here because the test
// drives the real StarPU through its C API (sessions, codelets, tasks) as an
// application would (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use plb_core::taskmode::TaskModeCounters;
use starpu_plb::task_mode::task_mode_counters;
use starpu_sys as sys;

mod common;
use common::{Session, Setup};

const WATCHDOG_LIMIT: Duration = Duration::from_secs(120);

/// Tasks of the independent batches.
const TASKS: usize = 2_000;
/// Spin time of one task on the fast worker (worker 1 spins 3×).
const TASK_US: u64 = 150;
/// Chains of dependent tasks alternating two codelets.
const CHAINS: usize = 100;
const CHAIN_LEN: usize = 10;

/// StarPU with `policy` on two CPU workers.
fn start(policy: &'static str) -> Session {
    let setup = Setup {
        ncpus: 2,
        nopencl: 0,
        opencl_on_cpus: false,
        policy,
    };
    Session::start("plb-task-mode", policy, WATCHDOG_LIMIT, setup)
}

fn current_worker() -> c_int {
    // SAFETY: plain query, valid on any thread.
    unsafe { sys::starpu_worker_get_id() }
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

type Kernel = unsafe extern "C" fn(*mut *mut c_void, *mut c_void);

/// A CPU-only codelet without buffers; boxed so its address is stable.
fn codelet(name: &'static CStr, cpu: Kernel) -> Box<sys::starpu_codelet> {
    let mut cl = Box::new(sys::starpu_codelet::default());
    cl.cpu_funcs[0] = Some(cpu);
    cl.nbuffers = 0;
    cl.name = name.as_ptr();
    cl
}

/// Creates a task of `cl` carrying `arg` and `flops` (its size).
///
/// # Safety
/// StarPU must be initialised and `cl` must outlive the task.
unsafe fn new_task(cl: *mut sys::starpu_codelet, arg: usize, flops: f64) -> *mut sys::starpu_task {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl;
        (*task).cl_arg = arg as *mut c_void;
        (*task).flops = flops;
        task
    }
}

// ---------------------------------------------------------------------------
// Independent tasks of one codelet: epochs.
// ---------------------------------------------------------------------------

static SEEN: OnceLock<Vec<AtomicU32>> = OnceLock::new();
static BAD: AtomicU64 = AtomicU64::new(0);
static PER_WORKER: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn seen() -> &'static [AtomicU32] {
    SEEN.get_or_init(|| (0..TASKS).map(|_| AtomicU32::new(0)).collect())
}

unsafe extern "C" fn spin_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    let id = arg as usize;
    match seen().get(id) {
        Some(s) => {
            s.fetch_add(1, Ordering::Relaxed);
        }
        None => {
            BAD.fetch_add(1, Ordering::Relaxed);
        }
    }
    let w = current_worker();
    match usize::try_from(w).ok().and_then(|w| PER_WORKER.get(w)) {
        Some(c) => {
            c.fetch_add(1, Ordering::Relaxed);
        }
        None => {
            BAD.fetch_add(1, Ordering::Relaxed);
        }
    }
    // Time proportional to the size; worker 1 is 3x slower.
    // SAFETY: the task running this kernel is live.
    let flops = unsafe { (*sys::starpu_task_get_current()).flops };
    let factor = if w == 1 { 3.0 } else { 1.0 };
    spin(Duration::from_secs_f64(flops * 1e-6 * factor));
}

fn reset_batch() {
    seen().iter().for_each(|s| s.store(0, Ordering::Relaxed));
    BAD.store(0, Ordering::Relaxed);
    PER_WORKER
        .iter()
        .for_each(|c| c.store(0, Ordering::Relaxed));
}

fn delta(a: TaskModeCounters, b: TaskModeCounters) -> TaskModeCounters {
    TaskModeCounters {
        epochs: b.epochs - a.epochs,
        epoch_tasks: b.epoch_tasks - a.epoch_tasks,
        fallback_tasks: b.fallback_tasks - a.fallback_tasks,
        dissolved_tasks: b.dissolved_tasks - a.dissolved_tasks,
        forced_completions: b.forced_completions - a.forced_completions,
        tail_steals: b.tail_steals - a.tail_steals,
        carried_epochs: b.carried_epochs - a.carried_epochs,
        staged_tasks: b.staged_tasks - a.staged_tasks,
        unbalanced_tasks: b.unbalanced_tasks - a.unbalanced_tasks,
    }
}

/// Submits the batch (all at once while StarPU is paused when `paused`),
/// waits, and checks every task ran exactly once. Returns the tasks run by
/// worker 0 and worker 1 and the task-mode counters of the run.
fn run_batch(
    session: &Session,
    cl: *mut sys::starpu_codelet,
    paused: bool,
) -> (u64, u64, TaskModeCounters) {
    reset_batch();
    let before = task_mode_counters();
    if paused {
        // SAFETY: StarPU is running; paired with starpu_resume below.
        unsafe { sys::starpu_pause() };
        // Let the workers reach the pause flag (see stress.rs).
        thread::sleep(Duration::from_millis(50));
    }
    for i in 0..TASKS {
        // SAFETY: StarPU is running; the codelet outlives the session.
        let rc = unsafe { sys::starpu_task_submit(new_task(cl, i, TASK_US as f64)) };
        assert_eq!(rc, 0, "starpu_task_submit failed");
    }
    if paused {
        // SAFETY: pairs the starpu_pause above.
        unsafe { sys::starpu_resume() };
    }
    session.wait_for_all();
    let counters = delta(before, task_mode_counters());
    assert_eq!(
        BAD.load(Ordering::Relaxed),
        0,
        "a task ran with a bad id or worker"
    );
    let wrong: Vec<(usize, u32)> = seen()
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.load(Ordering::Relaxed)))
        .filter(|&(_, n)| n != 1)
        .take(10)
        .collect();
    assert!(
        wrong.is_empty(),
        "tasks not run exactly once (id, runs): {wrong:?}"
    );
    (
        PER_WORKER[0].load(Ordering::Relaxed),
        PER_WORKER[1].load(Ordering::Relaxed),
        counters,
    )
}

// ---------------------------------------------------------------------------
// Dependent tasks of two alternating codelets: the fallback rule.
// ---------------------------------------------------------------------------

static CHAIN_PROGRESS: OnceLock<Vec<AtomicU32>> = OnceLock::new();
static OUT_OF_ORDER: AtomicU64 = AtomicU64::new(0);

fn chain_progress() -> &'static [AtomicU32] {
    CHAIN_PROGRESS.get_or_init(|| (0..CHAINS).map(|_| AtomicU32::new(0)).collect())
}

unsafe extern "C" fn chain_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    let id = arg as usize;
    let (chain, index) = (id / CHAIN_LEN, (id % CHAIN_LEN) as u32);
    let ok = chain_progress().get(chain).is_some_and(|p| {
        p.compare_exchange(index, index + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    });
    if !ok {
        OUT_OF_ORDER.fetch_add(1, Ordering::Relaxed);
    }
}

fn run_chains(session: &Session, a: *mut sys::starpu_codelet, b: *mut sys::starpu_codelet) {
    chain_progress()
        .iter()
        .for_each(|p| p.store(0, Ordering::Relaxed));
    OUT_OF_ORDER.store(0, Ordering::Relaxed);
    let mut tasks: Vec<*mut sys::starpu_task> = Vec::with_capacity(CHAIN_LEN);
    for chain in 0..CHAINS {
        tasks.clear();
        for index in 0..CHAIN_LEN {
            let cl = if index % 2 == 0 { a } else { b };
            // SAFETY: StarPU is running; the codelets outlive the session.
            tasks.push(unsafe { new_task(cl, chain * CHAIN_LEN + index, 1.0) });
        }
        for index in 1..CHAIN_LEN {
            let mut pred = tasks[index - 1];
            // SAFETY: both tasks are valid and not yet submitted.
            unsafe { sys::starpu_task_declare_deps_array(tasks[index], 1, &mut pred) };
        }
        // Successors first, so a predecessor is alive when its successor is
        // submitted.
        for &task in tasks.iter().rev() {
            // SAFETY: a created, not yet submitted task.
            assert_eq!(unsafe { sys::starpu_task_submit(task) }, 0);
        }
    }
    session.wait_for_all();
    assert_eq!(
        OUT_OF_ORDER.load(Ordering::Relaxed),
        0,
        "a chained task ran before its predecessor (or with a bad id)"
    );
    let incomplete = chain_progress()
        .iter()
        .filter(|p| p.load(Ordering::Relaxed) != CHAIN_LEN as u32)
        .count();
    assert_eq!(incomplete, 0, "{incomplete} chains did not complete");
}

/// One policy: a paused batch (one big epoch), a streamed batch (epochs
/// formed while tasks keep arriving), and dependent chains (fallback).
fn scenario(policy: &'static str) {
    let mut cl = codelet(c"plb_task_mode_spin", spin_kernel);
    let mut cl_a = codelet(c"plb_task_mode_chain_a", chain_kernel);
    let mut cl_b = codelet(c"plb_task_mode_chain_b", chain_kernel);
    let session = start(policy);
    let t0 = Instant::now();
    let (fast, slow, paused) = run_batch(&session, &mut *cl, true);
    let t_paused = t0.elapsed();
    eprintln!(
        "{policy}: paused batch of {TASKS} in {t_paused:?}: worker 0 (fast) ran {fast}, worker 1 \
         (3x slower) {slow}; {paused:?}"
    );
    assert!(paused.epochs >= 1, "{policy}: no epoch formed: {paused:?}");
    // Most of the batch runs in epochs, unless the epoch's consults cost
    // more than the balancing rule allows (`unbalanced_tasks`: measured
    // in wall time, so this machine's load decides; seen with `plb-hec`
    // on a loaded 2-core machine, 1564 of 2000 dissolved): then its tasks
    // go to the fallback rule by design. No other way out of the epoch.
    assert!(
        paused.epoch_tasks + paused.unbalanced_tasks >= TASKS as u64 / 2,
        "{policy}: most of the batch should run in epochs or be dissolved by the cost rule: {paused:?}"
    );
    let t1 = Instant::now();
    let (f2, s2, streamed) = run_batch(&session, &mut *cl, false);
    eprintln!(
        "{policy}: streamed batch in {:?}: worker 0 ran {f2}, worker 1 {s2}; {streamed:?}",
        t1.elapsed()
    );
    let t2 = Instant::now();
    run_chains(&session, &mut *cl_a, &mut *cl_b);
    eprintln!(
        "{policy}: {CHAINS} chains of {CHAIN_LEN} in {:?}",
        t2.elapsed()
    );
    session.finish();
}

/// Which worker runs more of an epoch is a timing outcome (worker 1 spins
/// 3x longer, but on a loaded machine either thread may be descheduled):
/// the share is printed, not asserted; `scenario` asserts what the policy
/// guarantees (every task once, epochs formed).
#[test]
fn plb_hac_runs_every_task_once() {
    scenario("plb-hac");
}

#[test]
fn plb_hec_runs_every_task_once() {
    scenario("plb-hec");
}

#[test]
fn hdss_runs_every_task_once() {
    scenario("hdss");
}

#[test]
fn acosta_runs_every_task_once() {
    scenario("acosta");
}
