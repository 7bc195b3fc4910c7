//! The StarPU side of `plb app`: session, data registration, task
//! submission, and the split of the work (divisible-load API under our
//! policies, equal fixed-size tasks under StarPU's).
//!
//! The `plb` executable links the policy library statically and exports its
//! interposed `starpu_initialize` (see `balance_run.rs`), so setting
//! `STARPU_SCHED` to one of our names before `starpu_init` selects our
//! policy in this very process, and `PLB_EMULATE` applies to the codelets.

// Unsafe code is denied in the workspace; allowed here because StarPU
// sessions, data registration and task submission go through the C API (every
// unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use starpu_plb::catalog;
use starpu_plb::divisible::{BalancerSpec, DivisibleRun};
use starpu_sys as sys;

use super::{App, Fault, Options, Summary, Workload};

/// A registered StarPU data handle (unregistered by the framework).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle(sys::starpu_data_handle_t);

/// The handles registered during a run; [`Data::unregister_all`] releases
/// them (blocking, coherent: results come back to main memory).
#[derive(Debug, Default)]
pub struct Data {
    handles: Vec<sys::starpu_data_handle_t>,
}

impl Data {
    /// Registers a column-major matrix of `rows` x `cols` elements of `T`
    /// with leading dimension `ld`, in main memory.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `ld * (cols - 1) + rows` initialised elements that
    /// stay allocated, unmoved and untouched by Rust until the framework
    /// unregisters the handle (after every task ended); StarPU is running.
    pub unsafe fn matrix<T: Copy>(
        &mut self,
        ptr: *mut T,
        ld: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Handle, String> {
        let dims = (u32::try_from(ld), u32::try_from(rows), u32::try_from(cols));
        let (Ok(ld), Ok(rows), Ok(cols)) = dims else {
            return Err(format!(
                "matrix {rows}x{cols} (ld {ld}) too large for StarPU"
            ));
        };
        let mut h: sys::starpu_data_handle_t = std::ptr::null_mut();
        // SAFETY: the caller guarantees the buffer; STARPU_MAIN_RAM is node 0.
        unsafe {
            sys::starpu_matrix_data_register(
                &mut h,
                sys::STARPU_MAIN_RAM as i32,
                ptr as usize,
                ld,
                rows,
                cols,
                std::mem::size_of::<T>(),
            )
        };
        self.handles.push(h);
        Ok(Handle(h))
    }

    /// Registers a vector of `len` elements of `T` in main memory.
    ///
    /// # Safety
    ///
    /// As for [`Data::matrix`], for `len` elements.
    pub unsafe fn vector<T: Copy>(&mut self, ptr: *mut T, len: usize) -> Result<Handle, String> {
        let Ok(n) = u32::try_from(len) else {
            return Err(format!("vector of {len} elements too large for StarPU"));
        };
        let mut h: sys::starpu_data_handle_t = std::ptr::null_mut();
        // SAFETY: the caller guarantees the buffer.
        unsafe {
            sys::starpu_vector_data_register(
                &mut h,
                sys::STARPU_MAIN_RAM as i32,
                ptr as usize,
                n,
                std::mem::size_of::<T>(),
            )
        };
        self.handles.push(h);
        Ok(Handle(h))
    }

    /// Unregisters every handle (waits for their tasks, copies the data back
    /// to main memory).
    pub(crate) fn unregister_all(&mut self) {
        for h in self.handles.drain(..) {
            // SAFETY: registered by this object, unregistered once; called
            // from the application thread, never from a callback.
            unsafe { sys::starpu_data_unregister(h) };
        }
    }
}

/// The task argument: a `struct plb_app_task` (codelets/plb_app.h, same
/// first fields, checked by a test) followed by what only Rust reads.
#[repr(C)]
struct TaskArg {
    compute_s: f64,
    worker: i32,
    offset: u64,
    len: u64,
    params: *const c_void,
    // Rust only, after the C-visible part.
    run: Option<Arc<DivisibleRun>>,
    id: u64,
    log: Arc<Log>,
}

/// One completed task, as its callback saw it.
#[derive(Debug, Clone, Copy)]
struct Done {
    worker: i32,
    offset: u64,
    len: u64,
    compute_s: f64,
    /// Seconds from the run's start to the callback.
    end_s: f64,
}

/// The completed tasks of a run, with the run's time origin.
struct Log {
    start: Instant,
    done: Mutex<Vec<Done>>,
}

/// StarPU callback: records the task and, in a divisible run, reports the
/// block done (never submits).
unsafe extern "C" fn task_done(arg: *mut c_void) {
    // SAFETY: the Box<TaskArg> leaked at submission; StarPU calls the
    // callback once per task, after the kernel wrote its fields.
    let a = unsafe { Box::from_raw(arg.cast::<TaskArg>()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let compute_s = if a.compute_s.is_finite() && a.compute_s >= 0.0 {
            a.compute_s
        } else {
            0.0
        };
        let end_s = a.log.start.elapsed().as_secs_f64();
        if let Ok(mut log) = a.log.done.lock() {
            log.push(Done {
                worker: a.worker,
                offset: a.offset,
                len: a.len,
                compute_s,
                end_s,
            });
        }
        if let Some(run) = &a.run {
            if let Err(e) = run.block_done(a.id, compute_s, 0.0) {
                eprintln!("plb app: block_done: {e}");
            }
        }
    }));
}

/// Creates and submits one task of `cl` on `handles`, pinned to `worker`
/// when given.
fn submit(
    cl: *mut sys::starpu_codelet,
    handles: &[super::Handle],
    arg: TaskArg,
    worker: Option<i32>,
) -> Result<(), String> {
    // SAFETY: `cl` is a codelet global of codelets/ (lives forever).
    let nbuffers = unsafe { (*cl).nbuffers };
    if usize::try_from(nbuffers).ok() != Some(handles.len())
        || handles.len() > sys::STARPU_NMAXBUFS as usize
    {
        return Err(format!(
            "{} handles for a codelet of {nbuffers} buffers (at most {})",
            handles.len(),
            sys::STARPU_NMAXBUFS
        ));
    }
    let pinned = worker.map(u32::try_from).transpose();
    let pinned = pinned.map_err(|_| "negative worker id".to_string())?;
    let arg = Box::into_raw(Box::new(arg)).cast::<c_void>();
    // SAFETY: StarPU is initialised; `cl` outlives every task; `arg` stays
    // valid until the callback frees it; every handle is registered and is
    // unregistered only after starpu_task_wait_for_all.
    let rc = unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl;
        for (i, h) in handles.iter().enumerate() {
            (*task).handles[i] = h.0;
        }
        (*task).cl_arg = arg;
        (*task).callback_func = Some(task_done);
        (*task).callback_arg = arg;
        if let Some(w) = pinned {
            (*task).set_execute_on_a_specific_worker(1);
            (*task).workerid = w;
        }
        sys::starpu_task_submit(task)
    };
    if rc != 0 {
        // Not submitted: StarPU will not call the callback.
        // SAFETY: `arg` came from Box::into_raw above and nobody else has it.
        drop(unsafe { Box::from_raw(arg.cast::<TaskArg>()) });
        return Err(format!("starpu_task_submit failed ({rc})"));
    }
    Ok(())
}

/// StarPU (or StarPU-MPI), initialised for one run; shut down on drop.
pub(crate) struct Session {
    mpi: bool,
}

#[cfg(plb_mpi)]
unsafe extern "C" {
    fn plb_mpi_starpu_init(conf: *mut sys::starpu_conf) -> std::ffi::c_int;
    fn plb_mpi_starpu_shutdown();
}

/// Sets the environment StarPU reads at its start: the policy
/// (`STARPU_SCHED`), `STARPU_SILENT=1` unless set, and
/// `STARPU_OPENCL_ON_CPUS=1` when `opencl` (it only matters where OpenCL
/// workers are asked for). Must run while this process has no other
/// thread: before MPI (Open MPI starts threads) and StarPU start.
pub(crate) fn set_starpu_environment(sched: &str, opencl: bool) {
    // SAFETY: the contract above: no other thread reads or writes the
    // environment while this runs (callers: `Session::start` without MPI,
    // `plb app mm-mpi` before `Mpi::init`).
    unsafe {
        std::env::set_var("STARPU_SCHED", super::policy_base(sched));
        if std::env::var_os("STARPU_SILENT").is_none() {
            std::env::set_var("STARPU_SILENT", "1");
        }
        if opencl {
            std::env::set_var("STARPU_OPENCL_ON_CPUS", "1");
        }
    }
}

impl Session {
    fn start(opts: &Options) -> Result<Session, String> {
        Session::start_with(opts, false)
    }

    /// StarPU-MPI on `MPI_COMM_WORLD` (MPI already initialised by
    /// `super::mpi::Mpi::init`), with the workers `opts` asks for; the
    /// caller set StarPU's environment ([`set_starpu_environment`]) before
    /// MPI started.
    #[cfg(plb_mpi)]
    pub(crate) fn start_mpi(opts: &Options) -> Result<Session, String> {
        Session::start_with(opts, true)
    }

    fn start_with(opts: &Options, mpi: bool) -> Result<Session, String> {
        if !mpi {
            // Without MPI no other thread exists before StarPU starts; with
            // it the caller set the environment before MPI started.
            set_starpu_environment(&opts.sched, opts.opencl);
        }
        let mut conf = MaybeUninit::<sys::starpu_conf>::zeroed();
        // SAFETY: starpu_conf_init fills the struct.
        if unsafe { sys::starpu_conf_init(conf.as_mut_ptr()) } != 0 {
            return Err("starpu_conf_init failed".into());
        }
        // SAFETY: initialised just above.
        let mut conf = unsafe { conf.assume_init() };
        if let Some(n) = opts.ncpu {
            conf.ncpus = n;
        }
        if opts.opencl {
            conf.nopencl = 1;
            conf.ncpus = opts.ncpu.unwrap_or(1);
        }
        let rc = if mpi {
            #[cfg(plb_mpi)]
            // SAFETY: valid conf; StarPU is not initialised in this
            // process; MPI is (the caller's contract).
            let rc = unsafe { plb_mpi_starpu_init(&mut conf) };
            #[cfg(not(plb_mpi))]
            let rc = -1;
            rc
        } else {
            // SAFETY: valid conf; StarPU is not initialised in this process.
            unsafe { sys::starpu_init(&mut conf) }
        };
        if rc != 0 {
            return Err(format!("starpu_init failed ({rc})"));
        }
        Ok(Session { mpi })
    }

    /// `cpu0`, `opencl1`...: one label per worker, by worker id.
    pub(crate) fn workers(&self) -> Vec<String> {
        // SAFETY: StarPU is initialised.
        let n = unsafe { sys::starpu_worker_get_count() } as i32;
        (0..n)
            .map(|id| {
                // SAFETY: id is a valid worker id.
                let kind = match unsafe { sys::starpu_worker_get_type(id) } {
                    sys::STARPU_CPU_WORKER => "cpu",
                    sys::STARPU_CUDA_WORKER => "cuda",
                    sys::STARPU_OPENCL_WORKER => "opencl",
                    _ => "other",
                };
                format!("{kind}{id}")
            })
            .collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.mpi {
            #[cfg(plb_mpi)]
            // SAFETY: initialised by `start_mpi`; every task and request
            // ended and every handle was unregistered before.
            unsafe {
                plb_mpi_starpu_shutdown()
            };
            return;
        }
        // SAFETY: initialised by `start`; every task ended and every handle
        // was unregistered before (see `run`).
        unsafe { sys::starpu_shutdown() };
    }
}

/// Runs one task of `cl` per entry of `tasks` (pinned to its worker, on
/// its handles), all submitted at once, and waits for them. Returns each
/// task's seconds from submission to its end (transfers, emulated costs
/// and waiting for its worker included), in the order of `tasks`. (Used by
/// the MPI application only: unused in a build without MPI.)
#[cfg_attr(not(plb_mpi), allow(dead_code))]
pub(crate) fn run_pinned(
    cl: *mut sys::starpu_codelet,
    tasks: &[(i32, Vec<Handle>)],
) -> Result<Vec<f64>, String> {
    let log = Arc::new(Log {
        start: Instant::now(),
        done: Mutex::new(Vec::new()),
    });
    let mut result = Ok(());
    for (i, (worker, handles)) in tasks.iter().enumerate() {
        let arg = TaskArg {
            compute_s: 0.0,
            worker: -1,
            offset: i as u64,
            len: 0,
            params: std::ptr::null(),
            run: None,
            id: 0,
            log: Arc::clone(&log),
        };
        result = submit(cl, handles, arg, Some(*worker));
        if result.is_err() {
            break;
        }
    }
    // SAFETY: StarPU is initialised; application thread; waits even after
    // an error so that no task outlives its handles.
    let rc = unsafe { sys::starpu_task_wait_for_all() };
    result?;
    if rc != 0 {
        return Err(format!("starpu_task_wait_for_all failed ({rc})"));
    }
    let done = log.done.lock().map_err(|_| "log poisoned".to_string())?;
    let mut seconds = vec![f64::NAN; tasks.len()];
    for d in done.iter() {
        if let Some(s) = seconds.get_mut(d.offset as usize) {
            *s = d.end_s;
        }
    }
    if seconds.iter().any(|s| s.is_nan()) {
        return Err("a pinned task did not report".into());
    }
    Ok(seconds)
}

/// Runs `app` once with `opts` and returns its summary (verification
/// included; a wrong result is a summary with `verification.ok == false`,
/// not an error).
pub fn run(app: &App, opts: &Options) -> Result<Summary, String> {
    let mut work = (app.build)(opts.n, opts.seed)?;
    let ours = catalog::find(super::policy_base(&opts.sched)).is_some();
    // Our balancer's spec: greedy takes --block as its block size.
    let balancer = match (opts.sched.as_str(), opts.block) {
        ("greedy", Some(b)) => format!("greedy:{b}"),
        (s, _) => s.to_string(),
    };
    let session = Session::start(opts)?;
    let workers = session.workers();
    if workers.is_empty() {
        return Err("StarPU started no worker".into());
    }
    work.prepare()?;
    let mut data = Data::default();
    let start = Instant::now();
    let log = Arc::new(Log {
        start,
        done: Mutex::new(Vec::new()),
    });
    let mut passes = 0u64;
    // The previous pass's run: the next pass continues from its models.
    let mut previous: Option<Arc<DivisibleRun>> = None;
    let (result, rc) = loop {
        let result = if ours {
            divisible(
                work.as_mut(),
                &mut data,
                &balancer,
                opts.fault,
                &log,
                &mut previous,
            )
        } else {
            fixed(work.as_mut(), &mut data, opts, &log)
        };
        // SAFETY: StarPU is initialised; application thread. Waits even
        // after an error so no task outlives its data or the session.
        let rc = unsafe { sys::starpu_task_wait_for_all() };
        data.unregister_all();
        passes += 1;
        if result.is_err() || rc != 0 {
            break (result, rc);
        }
        match work.next_pass() {
            Ok(true) => {}
            Ok(false) => break (result, rc),
            Err(e) => break (Err(e), rc),
        }
    };
    let makespan_s = start.elapsed().as_secs_f64();
    work.release();
    drop(session);
    let split = result?;
    if rc != 0 {
        return Err(format!("starpu_task_wait_for_all failed ({rc})"));
    }
    let done = std::mem::take(&mut *log.done.lock().map_err(|_| "log poisoned".to_string())?);
    let (unit, scale) = work.throughput_unit();
    let mut units = vec![0u64; workers.len()];
    let mut busy = vec![0f64; workers.len()];
    let mut finish = vec![0f64; workers.len()];
    for d in &done {
        if let Ok(w) = usize::try_from(d.worker) {
            if w < units.len() {
                units[w] += d.len;
                busy[w] += d.compute_s;
                finish[w] = finish[w].max(d.end_s.min(makespan_s));
            }
        }
    }
    if let Some(path) = &opts.trace {
        write_trace(path, &done)?;
    }
    let kernel_throughput = units
        .iter()
        .zip(&busy)
        .filter(|(_, b)| **b > 0.0)
        .map(|(u, b)| work.work(*u) / b / scale)
        .sum();
    Ok(Summary {
        app: app.name,
        n: opts.n,
        policy: opts.sched.clone(),
        split,
        workers,
        tasks: done.len() as u64,
        total_units: work.units(),
        passes,
        units,
        busy_s: busy,
        finish_s: finish,
        makespan_s,
        throughput: work.work(work.units() * passes) / makespan_s / scale,
        kernel_throughput,
        unit,
        verification: work.verify(),
    })
}

/// One pass of `work`'s units through the divisible-load API under our
/// balancer `sched` (blocks pinned to the workers it chooses), continuing
/// from `previous` (PLB-HAC keeps its models from one pass to the next);
/// waits for every task and unregisters the pass's handles. Returns the
/// blocks that ran: worker, offset, units. StarPU must be running; its
/// scheduling policy does not matter (every task is pinned). (Used by the
/// MPI application only: unused in a build without MPI.)
#[cfg_attr(not(plb_mpi), allow(dead_code))]
pub(crate) fn divisible_pass(
    work: &mut dyn Workload,
    sched: &str,
    previous: &mut Option<Arc<DivisibleRun>>,
) -> Result<Vec<(i32, u64, u64)>, String> {
    let log = Arc::new(Log {
        start: Instant::now(),
        done: Mutex::new(Vec::new()),
    });
    let mut data = Data::default();
    let result = divisible(work, &mut data, sched, None, &log, previous);
    // SAFETY: StarPU is initialised; application thread. Waits even after
    // an error so no task outlives its data.
    let rc = unsafe { sys::starpu_task_wait_for_all() };
    data.unregister_all();
    result?;
    if rc != 0 {
        return Err(format!("starpu_task_wait_for_all failed ({rc})"));
    }
    let done = log.done.lock().map_err(|_| "log poisoned".to_string())?;
    Ok(done.iter().map(|d| (d.worker, d.offset, d.len)).collect())
}

/// Writes every task of the run as CSV (`plb app --trace`): the package
/// sizes over time that the co-execution plots draw.
fn write_trace(path: &std::path::Path, done: &[Done]) -> Result<(), String> {
    use std::fmt::Write as _;
    let mut text = String::from("worker,offset,len,start_s,end_s,compute_s\n");
    let mut sorted = done.to_vec();
    sorted.sort_by(|a, b| a.end_s.total_cmp(&b.end_s));
    for d in &sorted {
        let _ = writeln!(
            text,
            "{},{},{},{:.6},{:.6},{:.6}",
            d.worker,
            d.offset,
            d.len,
            (d.end_s - d.compute_s).max(0.0),
            d.end_s,
            d.compute_s
        );
    }
    std::fs::write(path, text).map_err(|e| format!("--trace {}: {e}", path.display()))
}

fn task_arg(
    work: &dyn Workload,
    log: &Arc<Log>,
    offset: u64,
    len: u64,
    run: Option<(Arc<DivisibleRun>, u64)>,
) -> TaskArg {
    let (run, id) = match run {
        Some((r, id)) => (Some(r), id),
        None => (None, 0),
    };
    TaskArg {
        compute_s: 0.0,
        worker: -1,
        offset,
        len,
        params: work.params(),
        run,
        id,
        log: Arc::clone(log),
    }
}

/// Our policy: blocks from the divisible-load balancer of the same name,
/// each pinned to the worker it chose. A later pass continues from
/// `previous` (PLB-HAC keeps its models and skips its training); the run
/// is left in `previous` for the next pass. Returns the split label.
fn divisible(
    work: &mut dyn Workload,
    data: &mut Data,
    spec: &str,
    fault: Option<Fault>,
    log: &Arc<Log>,
    previous: &mut Option<Arc<DivisibleRun>>,
) -> Result<String, String> {
    let spec = BalancerSpec::parse(spec).map_err(|e| e.to_string())?;
    work.register_shared(data)?;
    let cl = work.codelet();
    let run = match previous.take() {
        Some(prev) => prev.continue_with(work.units()),
        None => DivisibleRun::on_all_workers(work.units(), spec),
    };
    let run = Arc::new(run.map_err(|e| e.to_string())?);
    *previous = Some(Arc::clone(&run));
    while let Some(b) = run.next_block().map_err(|e| e.to_string())? {
        let faulty = b.id == 0 && fault.is_some();
        if faulty && fault == Some(Fault::Drop) {
            // Lost block: reported done, never computed.
            run.block_done(b.id, 1e-6, 0.0).map_err(|e| e.to_string())?;
            continue;
        }
        let handles = work.register_block(data, b.offset, b.len)?;
        let arg = task_arg(work, log, b.offset, b.len, Some((Arc::clone(&run), b.id)));
        submit(cl, &handles, arg, Some(b.worker))?;
        if faulty {
            // Repeated block: a second task on the same handles (StarPU
            // orders the two read-write accesses), not reported.
            submit(
                cl,
                &handles,
                task_arg(work, log, b.offset, b.len, None),
                Some(b.worker),
            )?;
        }
    }
    Ok("divisible".to_string())
}

/// StarPU's policy: equal tasks of `--block` units (default `ceil(W/32)`),
/// all submitted at once, placed by StarPU.
fn fixed(
    work: &mut dyn Workload,
    data: &mut Data,
    opts: &Options,
    log: &Arc<Log>,
) -> Result<String, String> {
    let total = work.units();
    let block = opts.block.unwrap_or(total.div_ceil(32)).max(1);
    work.register_shared(data)?;
    let cl = work.codelet();
    let mut offset = 0;
    while offset < total {
        let len = block.min(total - offset);
        let faulty = offset == 0 && opts.fault.is_some();
        if !(faulty && opts.fault == Some(Fault::Drop)) {
            let handles = work.register_block(data, offset, len)?;
            submit(cl, &handles, task_arg(work, log, offset, len, None), None)?;
            if faulty {
                submit(cl, &handles, task_arg(work, log, offset, len, None), None)?;
            }
        }
        offset += len;
    }
    Ok(format!("fixed:{block}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" {
        fn plb_app_task_layout(what: u32) -> usize;
    }

    #[test]
    fn task_arg_matches_the_c_struct() {
        let rust = [
            std::mem::offset_of!(TaskArg, compute_s),
            std::mem::offset_of!(TaskArg, worker),
            std::mem::offset_of!(TaskArg, offset),
            std::mem::offset_of!(TaskArg, len),
            std::mem::offset_of!(TaskArg, params),
        ];
        for (i, off) in rust.iter().enumerate() {
            // SAFETY: a pure function of codelets/plb_app.c.
            assert_eq!(unsafe { plb_app_task_layout(i as u32) }, *off, "field {i}");
        }
        // SAFETY: as above; index 5 is sizeof(struct plb_app_task).
        let size = unsafe { plb_app_task_layout(5) };
        assert!(size <= std::mem::offset_of!(TaskArg, run));
    }
}
