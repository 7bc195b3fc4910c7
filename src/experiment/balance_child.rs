//! The child side of `plb experiment balance` (hidden command
//! `plb __balance-run`): one real StarPU run of the synthetic divisible
//! workload, printed as one [`RunResult`] line.
//!
//! The process initialises StarPU itself. The `plb` executable links the
//! policy library statically and exports its interposed `starpu_initialize`
//! / `starpu_task_submit` (so it is *not* preloaded again: a second copy
//! would wrap the codelet twice); `PLB_EMULATE` in the environment is
//! therefore applied exactly as in any application run under the library.
//! The kernel applies the emulation itself with `emulate_after`, so its
//! measured time includes the emulated slowdown and latency.
//!
//! Every `unsafe` block of the benchmark is in this module.

// Unsafe code is denied in the workspace; allowed here because the benchmark
// child drives StarPU and the divisible-load C API directly (every unsafe
// block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use starpu_plb::divisible::{BalancerSpec, DivisibleRun};
use starpu_sys as sys;

use super::balance::{BlockTime, RunResult, burn};

/// What one child run does.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// A divisible run under this balancer spec (`greedy:<n>`, `hdss`...).
    Balancer(String),
    /// One block per worker: `round(r·W)` units on worker 1, the rest on
    /// worker 0 (both submitted at once).
    Split(f64),
    /// Calibration: on each worker, one block of `s` then one of `3s`
    /// units (the result's block list gives the per-worker fit).
    Calibrate(u64),
}

/// The per-task argument (`cl_arg` and `callback_arg`), owned by the task
/// and freed by its callback.
struct BlockArg {
    run: Option<Arc<DivisibleRun>>,
    id: u64,
    worker: i32,
    len: u64,
    /// Written by the kernel, read by the callback (same worker thread,
    /// after the kernel returned).
    compute_s: f64,
    log: Arc<Mutex<Vec<BlockTime>>>,
}

/// CPU implementation: burns `len` units, then the emulated extra time.
unsafe extern "C" fn kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    // SAFETY: StarPU passes the task's cl_arg, a live `BlockArg` that only
    // this task uses until its callback frees it.
    let a = unsafe { &mut *arg.cast::<BlockArg>() };
    let len = a.len;
    // Panic-free in practice; caught anyway so nothing unwinds into C.
    let r = catch_unwind(|| {
        let t0 = Instant::now();
        burn(len);
        let real = t0.elapsed().as_secs_f64();
        real + starpu_plb::starpu::emulate_after(real)
    });
    a.compute_s = r.unwrap_or(f64::NAN);
}

/// StarPU callback: records the block and reports it done (never submits).
unsafe extern "C" fn done(arg: *mut c_void) {
    // SAFETY: the `Box<BlockArg>` leaked at submission; the callback runs
    // once per task, after the kernel.
    let a = unsafe { Box::from_raw(arg.cast::<BlockArg>()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Ok(mut log) = a.log.lock() {
            log.push(BlockTime {
                worker: a.worker,
                units: a.len,
                seconds: a.compute_s,
            });
        }
        if let Some(run) = &a.run {
            let t = if a.compute_s.is_finite() {
                a.compute_s
            } else {
                0.0
            };
            if let Err(e) = run.block_done(a.id, t, 0.0) {
                eprintln!("plb __balance-run: block_done: {e}");
            }
        }
    }));
}

/// StarPU initialised for the run; shut down on drop.
struct Session {
    home: std::path::PathBuf,
}

impl Session {
    fn start() -> Result<Session, String> {
        let home = std::env::temp_dir().join(format!("plb-balance-{}", std::process::id()));
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        // SAFETY: single-threaded here, before StarPU starts any thread.
        unsafe {
            std::env::set_var("STARPU_HOME", &home);
            std::env::set_var("STARPU_SILENT", "1");
        }
        let mut conf = MaybeUninit::<sys::starpu_conf>::zeroed();
        // SAFETY: starpu_conf_init fills the struct.
        if unsafe { sys::starpu_conf_init(conf.as_mut_ptr()) } != 0 {
            return Err("starpu_conf_init failed".into());
        }
        // SAFETY: initialised just above.
        let mut conf = unsafe { conf.assume_init() };
        conf.ncpus = 2;
        conf.ncuda = 0;
        conf.nopencl = 0;
        // SAFETY: valid conf; StarPU is not initialised in this process.
        let rc = unsafe { sys::starpu_init(&mut conf) };
        if rc != 0 {
            return Err(format!("starpu_init failed ({rc})"));
        }
        let session = Session { home };
        // SAFETY: StarPU is initialised.
        let n = unsafe { sys::starpu_worker_get_count() };
        if n < 2 {
            return Err(format!("StarPU started {n} worker(s), 2 are needed"));
        }
        Ok(session)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: initialised by `start` and shut down once, after every
        // task completed (wait_for_all in `run`).
        unsafe { sys::starpu_shutdown() };
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

fn submit(cl: &mut sys::starpu_codelet, arg: BlockArg) -> Result<(), String> {
    let worker = u32::try_from(arg.worker).map_err(|_| "negative worker id".to_string())?;
    let arg = Box::into_raw(Box::new(arg)).cast::<c_void>();
    // SAFETY: StarPU is initialised; the codelet outlives every task (it
    // lives until after starpu_task_wait_for_all); `arg` stays valid until
    // the callback frees it.
    let rc = unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl;
        (*task).cl_arg = arg;
        (*task).callback_func = Some(done);
        (*task).callback_arg = arg;
        (*task).set_execute_on_a_specific_worker(1);
        (*task).workerid = worker;
        sys::starpu_task_submit(task)
    };
    if rc != 0 {
        // The task was not submitted: StarPU will not call the callback.
        // SAFETY: `arg` came from Box::into_raw above and nobody else has it.
        drop(unsafe { Box::from_raw(arg.cast::<BlockArg>()) });
        return Err(format!("starpu_task_submit failed ({rc})"));
    }
    Ok(())
}

/// Runs `mode` over `units` units on workers 0 and 1 and returns the result.
pub fn run(units: u64, mode: &Mode) -> Result<RunResult, String> {
    let _session = Session::start()?;
    let mut cl = Box::new(sys::starpu_codelet::default());
    cl.cpu_funcs[0] = Some(kernel);
    cl.nbuffers = 0;
    cl.name = c"plb_balance_burn".as_ptr();
    let log = Arc::new(Mutex::new(Vec::new()));
    let block = |run: Option<Arc<DivisibleRun>>, id, worker, len| BlockArg {
        run,
        id,
        worker,
        len,
        compute_s: 0.0,
        log: Arc::clone(&log),
    };
    let start = Instant::now();
    let result = (|| -> Result<(), String> {
        match mode {
            Mode::Balancer(spec) => {
                let spec = BalancerSpec::parse(spec).map_err(|e| e.to_string())?;
                let run =
                    Arc::new(DivisibleRun::new(units, &[0, 1], spec).map_err(|e| e.to_string())?);
                while let Some(b) = run.next_block().map_err(|e| e.to_string())? {
                    submit(
                        &mut cl,
                        block(Some(Arc::clone(&run)), b.id, b.worker, b.len),
                    )?;
                }
            }
            Mode::Split(r) => {
                let on1 = ((r * units as f64).round() as u64).min(units);
                for (w, len) in [(0, units - on1), (1, on1)] {
                    if len > 0 {
                        submit(&mut cl, block(None, 0, w, len))?;
                    }
                }
            }
            Mode::Calibrate(s) => {
                for w in [0, 1] {
                    submit(&mut cl, block(None, 0, w, *s))?;
                    submit(&mut cl, block(None, 0, w, 3 * s))?;
                }
            }
        }
        Ok(())
    })();
    // SAFETY: StarPU is initialised; application thread. Waits even after
    // an error so no task outlives the codelet or the session.
    let rc = unsafe { sys::starpu_task_wait_for_all() };
    let makespan_s = start.elapsed().as_secs_f64();
    result?;
    if rc != 0 {
        return Err(format!("starpu_task_wait_for_all failed ({rc})"));
    }
    let blocks = std::mem::take(&mut *log.lock().map_err(|_| "log poisoned".to_string())?);
    Ok(RunResult { makespan_s, blocks })
}
