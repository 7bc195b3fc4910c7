//! The divisible-load API against the real, installed StarPU.
//!
//! Each test initialises StarPU (our `greedy` policy, private
//! `STARPU_HOME`), runs the application loop of the API — the test thread
//! asks for blocks and submits one task per block pinned to the chosen
//! worker; the task's callback reports the block done — and checks with a
//! coverage bitmap that every unit was processed exactly once, on the worker
//! the balancer chose. Tests serialise on `common::lock_starpu` (one StarPU per
//! process) and arm a watchdog that aborts on a deadlock.

// Unsafe code is denied in the workspace; allowed here because the test
// drives the real StarPU and the divisible-load C API as a C application
// would (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use starpu_plb::divisible::{BalancerSpec, DivisibleError, DivisibleRun, balancer_names};
use starpu_plb::starpu::divisible_ffi::{
    PLB_DL_BLOCK, PLB_DL_EDONE, PLB_DL_EINVAL, PLB_DL_ETIME, PLB_DL_EUNKNOWN, PLB_DL_FINISHED,
    PlbDlRun, plb_dl_create, plb_dl_create_on, plb_dl_destroy, plb_dl_done, plb_dl_get_stats,
    plb_dl_last_error, plb_dl_next, plb_dl_stats,
};
use starpu_sys as sys;

mod common;
use common::{Session, Setup, lock_starpu};

const WATCHDOG_LIMIT: Duration = Duration::from_secs(180);

/// StarPU with `ncpus` CPU workers under our greedy policy.
fn start(name: &'static str, ncpus: c_int) -> Session {
    let setup = Setup {
        ncpus,
        nopencl: 0,
        opencl_on_cpus: false,
        policy: "greedy",
    };
    Session::start("plb-dl", name, WATCHDOG_LIMIT, setup)
}

fn worker_count() -> usize {
    // SAFETY: StarPU is initialised by the caller's session.
    unsafe { sys::starpu_worker_get_count() as usize }
}

// ---------------------------------------------------------------------------
// Coverage bitmap, codelet and callback.
// ---------------------------------------------------------------------------

/// One byte per unit: how many times a codelet processed it.
static BITMAP: OnceLock<Vec<AtomicU8>> = OnceLock::new();
/// Units processed a second time.
static DOUBLE: AtomicU64 = AtomicU64::new(0);
/// Units outside the bitmap, or blocks run on another worker than chosen.
static BAD: AtomicU64 = AtomicU64::new(0);
/// `block_done` calls that returned an error.
static DONE_ERRORS: AtomicU64 = AtomicU64::new(0);

const BIG_W: u64 = 1_000_000;

fn reset_bitmap(total: u64) -> &'static [AtomicU8] {
    let map = BITMAP.get_or_init(|| (0..BIG_W).map(|_| AtomicU8::new(0)).collect());
    assert!(total <= BIG_W);
    map.iter().for_each(|b| b.store(0, Ordering::Relaxed));
    DOUBLE.store(0, Ordering::Relaxed);
    BAD.store(0, Ordering::Relaxed);
    DONE_ERRORS.store(0, Ordering::Relaxed);
    map
}

/// Units of `[0, total)` not processed exactly once (first few).
fn uncovered(total: u64) -> Vec<u64> {
    let map = BITMAP.get().expect("bitmap");
    (0..total)
        .filter(|&u| map[u as usize].load(Ordering::Relaxed) != 1)
        .take(10)
        .collect()
}

/// Where a block's completion is reported.
enum Target {
    Rust(Arc<DivisibleRun>),
    C(*const PlbDlRun),
}

/// The per-task argument (`cl_arg` and `callback_arg`), owned by the task:
/// freed by the callback.
struct BlockArg {
    target: Target,
    id: u64,
    worker: i32,
    offset: u64,
    len: u64,
    /// Written by the codelet, read by the callback (same worker thread,
    /// after the codelet returned).
    compute_s: f64,
}

unsafe extern "C" fn mark_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    // SAFETY: StarPU passes the task's cl_arg, a live `BlockArg` that only
    // this task uses until its callback frees it.
    let a = unsafe { &mut *arg.cast::<BlockArg>() };
    // SAFETY: plain clock/worker queries, valid on a worker thread.
    let (t0, me) = unsafe { (sys::starpu_timing_now(), sys::starpu_worker_get_id()) };
    if me != a.worker {
        BAD.fetch_add(1, Ordering::Relaxed);
    }
    match BITMAP.get() {
        Some(map) if a.offset + a.len <= map.len() as u64 => {
            for u in a.offset..a.offset + a.len {
                if map[u as usize].fetch_add(1, Ordering::Relaxed) != 0 {
                    DOUBLE.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        _ => {
            BAD.fetch_add(1, Ordering::Relaxed);
        }
    }
    // SAFETY: as above.
    let t1 = unsafe { sys::starpu_timing_now() };
    a.compute_s = ((t1 - t0) / 1e6).max(0.0);
}

unsafe extern "C" fn done_callback(arg: *mut c_void) {
    // SAFETY: the `Box<BlockArg>` leaked at submission; the callback runs
    // once per task, after the codelet.
    let a = unsafe { Box::from_raw(arg.cast::<BlockArg>()) };
    let ok = match &a.target {
        Target::Rust(run) => run.block_done(a.id, a.compute_s, 0.0).is_ok(),
        // SAFETY: the handle outlives every task (destroyed after
        // starpu_task_wait_for_all).
        Target::C(run) => unsafe { plb_dl_done(*run, a.id, a.compute_s, 0.0) == 0 },
    };
    if !ok {
        DONE_ERRORS.fetch_add(1, Ordering::Relaxed);
    }
}

fn codelet() -> Box<sys::starpu_codelet> {
    let mut cl = Box::new(sys::starpu_codelet::default());
    cl.cpu_funcs[0] = Some(mark_kernel);
    cl.nbuffers = 0;
    cl.name = c"plb_dl_mark".as_ptr();
    cl
}

/// Submits one task for a block, pinned to `arg.worker`, from this
/// (application) thread.
fn submit(cl: &mut sys::starpu_codelet, arg: BlockArg) {
    let worker = u32::try_from(arg.worker).expect("worker ids are >= 0");
    let arg = Box::into_raw(Box::new(arg)).cast::<c_void>();
    // SAFETY: StarPU is initialised; the codelet outlives the session;
    // `arg` stays valid until the callback frees it.
    unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl;
        (*task).cl_arg = arg;
        (*task).callback_func = Some(done_callback);
        (*task).callback_arg = arg;
        (*task).set_execute_on_a_specific_worker(1);
        (*task).workerid = worker;
        assert_eq!(sys::starpu_task_submit(task), 0, "starpu_task_submit");
    }
}

/// The application loop through the Rust API; returns the blocks issued.
fn drive_rust(run: &Arc<DivisibleRun>, cl: &mut sys::starpu_codelet) -> u64 {
    let mut blocks = 0;
    while let Some(b) = run.next_block().expect("next_block") {
        assert!(b.len > 0 && b.end() <= run.total());
        assert_eq!(run.workers()[b.pu], b.worker);
        submit(
            cl,
            BlockArg {
                target: Target::Rust(Arc::clone(run)),
                id: b.id,
                worker: b.worker,
                offset: b.offset,
                len: b.len,
                compute_s: 0.0,
            },
        );
        blocks += 1;
    }
    blocks
}

fn check_covered(what: &str, total: u64) {
    assert_eq!(
        DOUBLE.load(Ordering::Relaxed),
        0,
        "{what}: units processed twice"
    );
    assert_eq!(
        BAD.load(Ordering::Relaxed),
        0,
        "{what}: wrong worker or range"
    );
    assert_eq!(
        DONE_ERRORS.load(Ordering::Relaxed),
        0,
        "{what}: block_done failed"
    );
    let missing = uncovered(total);
    assert!(
        missing.is_empty(),
        "{what}: units not processed exactly once: {missing:?}"
    );
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

#[test]
fn every_balancer_processes_a_million_units_exactly_once() {
    let mut cl = codelet();
    let session = start("million", -1);
    let workers = worker_count();
    for name in balancer_names() {
        reset_bitmap(BIG_W);
        let t0 = Instant::now();
        let run = Arc::new(
            DivisibleRun::on_all_workers(BIG_W, BalancerSpec::parse(name).unwrap()).unwrap(),
        );
        assert_eq!(run.workers().len(), workers);
        let blocks = drive_rust(&run, &mut cl);
        session.wait_for_all();
        check_covered(name, BIG_W);
        let s = run.stats().unwrap();
        eprintln!(
            "{name}: W={BIG_W} on {workers} workers: {blocks} blocks in {:?}; units per PU {:?}; {:?}",
            t0.elapsed(),
            s.units_per_pu,
            s.balancer_stats.to_string()
        );
        assert_eq!((s.blocks_issued, s.blocks_done), (blocks, blocks));
        assert_eq!((s.units_issued, s.units_done), (BIG_W, BIG_W));
        assert_eq!(run.in_flight(), 0);
        assert_eq!(run.next_block(), Ok(None), "finished stays finished");
        // The timings reached the balancer: the model-based ones refitted.
        let h = &s.balancer_stats;
        match name {
            "plb-hac" => assert!(h.refits() > 0, "PLB-HAC never refitted: {h}"),
            "plb-hec" => assert!(h.refits() > 0, "PLB-HeC never refitted: {h}"),
            "hdss" => assert!(h.get("fits") > Some(0), "HDSS never fitted: {h}"),
            "acosta" => assert!(h.get("iterations") > Some(1), "Acosta: {h}"),
            "static" => assert_eq!(h.get("probe_blocks"), Some(workers as u64), "Static: {h}"),
            _ => {}
        }
    }
    drop(session);
}

#[test]
fn fewer_units_than_workers_are_processed_exactly_once() {
    let mut cl = codelet();
    let session = start("tiny", 2);
    let workers = worker_count();
    eprintln!("tiny: {workers} workers");
    for total in [1u64, 0, (workers as u64).saturating_sub(1).max(1)] {
        for name in balancer_names() {
            reset_bitmap(total);
            let run = Arc::new(
                DivisibleRun::on_all_workers(total, BalancerSpec::parse(name).unwrap()).unwrap(),
            );
            let blocks = drive_rust(&run, &mut cl);
            session.wait_for_all();
            check_covered(name, total);
            let s = run.stats().unwrap();
            assert_eq!(s.units_done, total, "{name} W={total}");
            assert!(blocks <= total, "{name} W={total}: {blocks} blocks");
        }
    }
    drop(session);
}

#[test]
fn bad_input_is_a_typed_error() {
    // Before starpu_init: no worker.
    {
        let _lock = lock_starpu();
        assert_eq!(
            DivisibleRun::on_all_workers(10, BalancerSpec::parse("greedy").unwrap()).unwrap_err(),
            DivisibleError::NoWorkers
        );
    }
    assert!(matches!(
        BalancerSpec::parse("dmda").map_err(DivisibleError::from),
        Err(DivisibleError::UnknownBalancer(_))
    ));
    let mut cl = codelet();
    let session = start("bad-input", 2);
    reset_bitmap(100);
    let run = Arc::new(
        DivisibleRun::on_all_workers(100, BalancerSpec::parse("greedy:10").unwrap()).unwrap(),
    );
    assert_eq!(
        run.block_done(0, 0.1, 0.0),
        Err(DivisibleError::UnknownBlock(0))
    );
    let blocks = drive_rust(&run, &mut cl);
    session.wait_for_all();
    check_covered("bad-input", 100);
    assert_eq!(blocks, 10);
    // Every block was reported by its callback: a second report is refused
    // and counts nothing.
    for id in 0..blocks {
        assert_eq!(
            run.block_done(id, 0.1, 0.0),
            Err(DivisibleError::AlreadyDone(id))
        );
    }
    assert_eq!(
        run.block_done(blocks, 0.1, 0.0),
        Err(DivisibleError::UnknownBlock(blocks))
    );
    let s = run.stats().unwrap();
    assert_eq!((s.blocks_done, s.units_done), (10, 100));
    drop(session);
}

fn last_error() -> String {
    // SAFETY: plb_dl_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(plb_dl_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_c_api_runs_plb_hac_exactly_once() {
    let mut cl = codelet();
    let session = start("c-api", -1);
    // SAFETY: (whole block) C entry points called as a C application
    // would, with valid strings and pointers; StarPU is initialised.
    unsafe {
        assert!(plb_dl_create(10, c"no-such".as_ptr()).is_null());
        assert!(last_error().contains("no-such"), "{}", last_error());
        assert!(plb_dl_create_on(10, c"greedy".as_ptr(), std::ptr::null(), 0).is_null());
        assert!(
            last_error().contains("no StarPU worker"),
            "{}",
            last_error()
        );
        let dup = [0, 0];
        assert!(plb_dl_create_on(10, c"greedy".as_ptr(), dup.as_ptr(), 2).is_null());
        let null = std::ptr::null_mut();
        assert_eq!(
            plb_dl_next(std::ptr::null(), std::ptr::null_mut(), null, null, null),
            PLB_DL_EINVAL
        );

        let total = 300_000;
        reset_bitmap(total);
        // NULL balancer = STARPU_SCHED (unset in the session) = greedy;
        // check it, then the real run on plb-hac.
        let g = plb_dl_create(total, std::ptr::null());
        assert!(!g.is_null());
        let mut st = plb_dl_stats::default();
        assert_eq!(plb_dl_get_stats(g, &mut st), 0);
        assert_eq!(st.total_units, total);
        plb_dl_destroy(g);

        let run = plb_dl_create(total, c"plb-hac".as_ptr());
        assert!(!run.is_null(), "{}", last_error());
        assert_eq!(plb_dl_done(run, 0, 0.1, 0.0), PLB_DL_EUNKNOWN);
        let (mut w, mut id, mut off, mut len) = (-1, 0u64, 0u64, 0u64);
        let mut blocks = 0u64;
        let rc = loop {
            let rc = plb_dl_next(run, &mut w, &mut id, &mut off, &mut len);
            if rc != PLB_DL_BLOCK {
                break rc;
            }
            submit(
                &mut cl,
                BlockArg {
                    target: Target::C(run),
                    id,
                    worker: w,
                    offset: off,
                    len,
                    compute_s: 0.0,
                },
            );
            blocks += 1;
        };
        assert_eq!(rc, PLB_DL_FINISHED, "{}", last_error());
        session.wait_for_all();
        check_covered("c-api", total);
        assert_eq!(plb_dl_get_stats(run, &mut st), 0);
        eprintln!("c-api plb-hac: {st:?}");
        assert_eq!((st.blocks_issued, st.blocks_done), (blocks, blocks));
        assert_eq!((st.units_issued, st.units_done), (total, total));
        assert!(st.refits > 0, "the timings never reached PLB-HAC: {st:?}");
        assert_eq!(plb_dl_done(run, 0, 0.1, 0.0), PLB_DL_EDONE);
        assert_eq!(plb_dl_done(run, blocks, 0.1, 0.0), PLB_DL_EUNKNOWN);
        assert_eq!(plb_dl_get_stats(run, &mut st), 0);
        assert_eq!(st.blocks_done, blocks, "a refused done counted nothing");
        plb_dl_destroy(run);

        // Bad times leave the block in flight; a valid report then works.
        let one = [0];
        let r = plb_dl_create_on(5, c"greedy:5".as_ptr(), one.as_ptr(), 1);
        assert_eq!(
            plb_dl_next(r, &mut w, &mut id, &mut off, &mut len),
            PLB_DL_BLOCK
        );
        assert_eq!((w, off, len), (0, 0, 5));
        assert_eq!(plb_dl_done(r, id, f64::NAN, 0.0), PLB_DL_ETIME);
        assert_eq!(plb_dl_done(r, id, 1e-3, 0.0), 0);
        assert_eq!(
            plb_dl_next(r, &mut w, &mut id, &mut off, &mut len),
            PLB_DL_FINISHED
        );
        plb_dl_destroy(r);
        assert!(plb_dl_create(5, c"greedy:0".as_ptr()).is_null());
    }
    drop(session);
}
