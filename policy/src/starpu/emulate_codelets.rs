//! Heterogeneity emulation (`PLB_EMULATE`), applied inside codelet execution.
//!
//! When `PLB_EMULATE` is set at `starpu_initialize`, every task that goes
//! through `starpu_task_submit` (or `starpu_task_submit_to_ctx`; both are
//! interposed here, `starpu_task_insert` and friends reach the former
//! through the PLT) gets, in `task->cl`, a private copy of its codelet whose
//! CPU, CUDA and OpenCL implementation pointers are trampolines. A
//! trampoline runs the original implementation, measures it, and busy-waits
//! for the emulated extra time of the worker running it (see
//! [`crate::emulation_spec`]). The slowdown thus happens inside the task's
//! execution, whatever policy is active: StarPU's own `eager` and `dmda`,
//! its performance models and our policies see the slower worker as they
//! would see real hardware. Policies never read the settings.
//!
//! Why `task->cl` is rewritten: StarPU runs `task->cl`'s implementation
//! slots and offers no per-task way to run another function around them
//! (a callback runs after the body, outside the measured execution, and a
//! policy's hooks are not called under StarPU's own policies). The
//! application's codelet is never written (it may be `const`, and workers
//! may be reading it), so the task points to a copy while it is in StarPU,
//! and gets its own codelet back at the end of its body: the trampoline
//! restores `task->cl` once the original implementation and the emulated
//! time are over, before StarPU's termination (output data release,
//! callback, waiters), so the application sees its codelet again in its
//! callback and after waiting. A submission StarPU refuses gets it back at
//! once. Two cases keep the copy after execution: a task with `regenerate`
//! set (StarPU resubmits it internally, without the interposed submit, so
//! the copy keeps emulating it) and a task run by a combined worker of
//! several workers (its other members may still be about to read it).
//!
//! Copies are owned by this module for the life of the process (they are
//! never freed: a task kept with its copy, above, may still point to one
//! after `starpu_shutdown`): one per version of each codelet, made at its
//! first submission and reused for every later task of it (the original is
//! compared with a snapshot at each submission, so a codelet the
//! application changes between submissions gets a new copy), at most
//! [`MAX_REVISIONS`] versions per codelet and [`MAX_CODELETS`] codelets;
//! beyond either the submission is refused with a message. Nothing is
//! allocated per task. The copy shares everything else with the original
//! (name, performance model, access modes); StarPU's own writes into the
//! codelet (`checked`, `per_worker_stats`) go to the copy. Our policies key
//! their models by the application's codelet ([`original_of`]), whichever
//! of the two `task->cl` holds.
//!
//! Without `PLB_EMULATE` nothing is touched: the interposed submit functions
//! forward the call untouched. Under StarPU's SimGrid mode `PLB_EMULATE` is
//! refused: task bodies do not run there, and the busy-wait would spin on a
//! simulated clock.
//!
//! Our own applications' codelets may instead call [`emulate_after`] (C:
//! `double plb_emulate_after(double elapsed_s)`) at their end; a trampoline
//! around such a codelet then adds nothing more.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{CStr, c_int, c_uint, c_ulong, c_void};
use std::mem::{MaybeUninit, offset_of, size_of};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use starpu_sys as sys;

use super::ctx::now_us;
use super::guard::ffi_guard;
use crate::emulation_spec::{Emulation, Workers};

/// The environment variable.
pub const ENV: &str = "PLB_EMULATE";

/// Number of implementation slots per device kind in `struct starpu_codelet`.
const NIMPL: usize = sys::STARPU_MAXIMPLEMENTATIONS as usize;
const CPU: usize = 0;
const CUDA: usize = 1;
const OPENCL: usize = 2;
const KINDS: [&str; 3] = ["CPU", "CUDA", "OpenCL"];

/// `starpu_cpu_func_t`, `starpu_cuda_func_t` and `starpu_opencl_func_t`
/// all have this signature.
type Kernel = unsafe extern "C" fn(*mut *mut c_void, *mut c_void);
type SubmitFn = unsafe extern "C" fn(*mut sys::starpu_task) -> c_int;
type SubmitCtxFn = unsafe extern "C" fn(*mut sys::starpu_task, c_uint) -> c_int;

/// The emulation in force since the last successful `starpu_initialize`.
struct Active {
    spec: Emulation,
    /// `PLB_EMULATE`'s text, as parsed.
    text: String,
    /// StarPU clock (`starpu_timing_now`, µs) when the emulation started.
    t0_us: f64,
}

static ACTIVE: RwLock<Option<Arc<Active>>> = RwLock::new(None);
/// Parsed by [`before_init`], activated by [`after_init`] on success.
static PENDING: Mutex<Option<(Emulation, String)>> = Mutex::new(None);

/// Original implementations of a private codelet copy, indexed by device
/// kind and implementation slot.
type Originals = [[Option<Kernel>; NIMPL]; 3];

/// Versions of one application codelet kept at most (each has its own
/// copy); a codelet changed more often than this is refused.
pub const MAX_REVISIONS: usize = 16;

/// Distinct application codelets (addresses) wrapped at most; a program
/// that keeps submitting tasks of new codelets beyond this is refused
/// rather than grow the copies without bound.
pub const MAX_CODELETS: usize = 4096;

const CODELET_SIZE: usize = size_of::<sys::starpu_codelet>();
/// `per_worker_stats`, which StarPU increments at every execution of a
/// codelet it was given: left out of the comparison with the snapshot.
const STATS_START: usize = offset_of!(sys::starpu_codelet, per_worker_stats);
const STATS_END: usize = STATS_START + size_of::<[c_ulong; sys::STARPU_NMAXWORKERS as usize]>();

/// One version of an application codelet.
struct Revision {
    /// The original's bytes when this version was seen.
    snapshot: Box<[MaybeUninit<u8>]>,
    /// Address of the private copy given to StarPU instead; `None` when
    /// the codelet has no implementation to wrap (it is left alone).
    copy: Option<usize>,
}

/// What a private copy stands for.
struct CopyOf {
    /// The functions its trampolines call.
    originals: Originals,
    /// The application's codelet (address) it was copied from.
    original: usize,
}

#[derive(Default)]
struct Registry {
    /// Application codelet address -> its versions seen so far.
    by_original: HashMap<usize, Vec<Revision>>,
    /// Private copy address -> what it stands for. Entries are never
    /// removed: copies live for the whole process.
    by_copy: HashMap<usize, CopyOf>,
}

/// Set once the first copy exists (lets [`original_of`] skip the lock).
static ANY_COPY: AtomicBool = AtomicBool::new(false);

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);

thread_local! {
    /// Set by [`emulate_after`] so that the trampoline around the same task
    /// does not add the emulated time a second time.
    static SELF_EMULATED: Cell<bool> = const { Cell::new(false) };
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

fn active() -> Option<Arc<Active>> {
    read(&ACTIVE).clone()
}

/// The `PLB_EMULATE` text of the emulation in force, `None` when task
/// timings are real (no emulation, or StarPU started without our
/// interposed `starpu_initialize`).
pub fn emulation_in_force() -> Option<String> {
    active().map(|a| a.text.clone())
}

/// Why `PLB_EMULATE` is refused by a library built for StarPU's SimGrid
/// mode (the run-time check of `version_check` makes sure the loaded
/// StarPU is then a SimGrid build too).
const NOT_UNDER_SIMGRID: &str = "the emulation cannot work under StarPU's SimGrid mode: \
     task bodies do not run there (simulated durations come from the performance models) and \
     its busy-wait would spin on a simulated clock that does not advance; describe the \
     heterogeneity in the SimGrid platform instead";

/// Called by the interposed `starpu_initialize` before StarPU starts:
/// parses `PLB_EMULATE`. An invalid value prints one message naming the
/// variable and returns `Err(-EINVAL)`, which `starpu_initialize` returns
/// without starting StarPU.
pub(crate) fn before_init() -> Result<(), c_int> {
    ffi_guard("starpu_initialize (PLB_EMULATE)", Ok(()), || {
        let parsed = match std::env::var(ENV) {
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                eprintln!("plb: error: invalid {ENV}: not valid UTF-8; StarPU not started");
                return Err(-libc::EINVAL);
            }
            Ok(text) => match Emulation::parse(&text) {
                Ok(e) if e.is_empty() => None,
                Ok(_) if sys::STARPU_IS_SIMGRID => {
                    eprintln!(
                        "plb: error: {ENV}=\"{text}\": {NOT_UNDER_SIMGRID}; StarPU not started"
                    );
                    return Err(-libc::EINVAL);
                }
                Ok(e) => Some((e, text)),
                Err(err) => {
                    eprintln!("plb: error: invalid {ENV}=\"{text}\": {err}; StarPU not started");
                    return Err(-libc::EINVAL);
                }
            },
        };
        *PENDING.lock().unwrap_or_else(|e| e.into_inner()) = parsed;
        Ok(())
    })
}

/// Called by the interposed `starpu_initialize` with StarPU's return
/// value: on success, activates the pending emulation (its clock starts
/// now) and prints the banner. Returns `ret` unchanged.
pub(crate) fn after_init(ret: c_int) -> c_int {
    ffi_guard("starpu_initialize (PLB_EMULATE)", (), || {
        let pending = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
        if ret != 0 {
            return;
        }
        let act = pending.map(|(spec, text)| {
            Arc::new(Active {
                spec,
                text,
                t0_us: now_us(),
            })
        });
        if let Some(a) = &act {
            eprintln!("{}", banner(&a.spec));
        }
        *write(&ACTIVE) = act;
    });
    ret
}

/// "plb: EMULATION ACTIVE (PLB_EMULATE=...): worker 0 (CPU 0): ...; ..."
fn banner(spec: &Emulation) -> String {
    // SAFETY: StarPU is initialised (called after a successful init).
    let count = unsafe { sys::starpu_worker_get_count() };
    let text = std::env::var(ENV).unwrap_or_default();
    let mut parts = Vec::new();
    for id in 0..count {
        if let Some(w) = spec.worker(id) {
            parts.push(format!(
                "worker {id} ({}): {}",
                worker_name(id),
                w.describe()
            ));
        }
    }
    if parts.is_empty() {
        parts.push("no existing worker is affected".into());
    }
    for (w, _) in &spec.entries {
        if let Workers::Range(a, _) = w
            && *a >= count
        {
            parts.push(format!("{w} does not exist (only {count} workers)"));
        }
    }
    format!(
        "plb: EMULATION ACTIVE ({ENV}=\"{text}\"; timings are not real hardware): {}",
        parts.join("; ")
    )
}

fn worker_name(id: c_uint) -> String {
    let id = i32::try_from(id).unwrap_or(-1);
    super::divisible_ffi::worker_names(&[id])
        .pop()
        .unwrap_or_default()
}

/// Microseconds as a duration (0 for negative or NaN).
fn us(d: f64) -> Duration {
    Duration::try_from_secs_f64(d / 1e6).unwrap_or(Duration::ZERO)
}

/// The busy-wait for a task body that started at `start_us` (StarPU
/// clock) and ran for `elapsed` on the calling worker, under the active
/// emulation.
fn extra_for_current_worker(start_us: f64, elapsed: Duration) -> Duration {
    let Some(a) = active() else {
        return Duration::ZERO;
    };
    // SAFETY: plain query; -1 when the caller is not a StarPU worker.
    let id = unsafe { sys::starpu_worker_get_id() };
    let Ok(id) = u32::try_from(id) else {
        return Duration::ZERO;
    };
    a.spec.extra(id, us(start_us - a.t0_us), elapsed)
}

/// Busy-waits `d` on StarPU's clock.
fn spin_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    let until = now_us() + d.as_secs_f64() * 1e6;
    while now_us() < until {
        std::hint::spin_loop();
    }
}

/// For our own applications' codelets: called at the end of a task body
/// that ran for `elapsed_s` seconds, busy-waits for the time the active
/// `PLB_EMULATE` adds on the calling worker, and returns it in seconds
/// (0 when no emulation is active or the caller is not a worker). The
/// trampoline around the same task then adds nothing.
pub fn emulate_after(elapsed_s: f64) -> f64 {
    let elapsed = Duration::try_from_secs_f64(elapsed_s).unwrap_or(Duration::ZERO);
    let start_us = now_us() - elapsed.as_secs_f64() * 1e6;
    let extra = extra_for_current_worker(start_us, elapsed);
    SELF_EMULATED.with(|c| c.set(true));
    spin_for(extra);
    extra.as_secs_f64()
}

/// C entry of [`emulate_after`]: `double plb_emulate_after(double elapsed_s)`.
#[unsafe(no_mangle)]
pub extern "C" fn plb_emulate_after(elapsed_s: f64) -> f64 {
    ffi_guard("plb_emulate_after", 0.0, || emulate_after(elapsed_s))
}

/// The implementation `KIND`/`IDX` a trampoline must run for a task whose
/// `task->cl` is `cl`, and the application's codelet to give the task
/// back: ours when `cl` is one of our copies; otherwise (a member of a
/// combined worker that reads `task->cl` after another member restored
/// it) the function in `cl`'s own slot, unless that is a trampoline.
///
/// # Safety
/// `cl` must point to a live codelet.
unsafe fn implementation<const KIND: usize, const IDX: usize>(
    cl: *mut sys::starpu_codelet,
) -> Option<(Kernel, Option<usize>)> {
    if let Some(c) = read(&REGISTRY)
        .as_ref()
        .and_then(|r| r.by_copy.get(&(cl as usize)))
    {
        return c.originals[KIND][IDX].map(|f| (f, Some(c.original)));
    }
    // SAFETY: per the contract.
    let f = unsafe { slot(cl, KIND, IDX).read() }?;
    (f as usize != TRAMPOLINES[KIND][IDX] as usize).then_some((f, None))
}

/// Gives `task` back the application's codelet `original` if it still
/// holds our copy `copy`, unless StarPU will run it again without a
/// submission (`regenerate`) or other members of a combined worker may
/// still read it.
///
/// # Safety
/// `task` must be the task the calling worker is executing.
unsafe fn give_back(task: *mut sys::starpu_task, copy: usize, original: usize) {
    // SAFETY: a live task; a plain read of its bitfield and of the
    // calling worker's combined-worker size.
    let keep = unsafe {
        sys::starpu_task::regenerate_raw(task) != 0 || sys::starpu_combined_worker_get_size() > 1
    };
    if keep {
        return;
    }
    // SAFETY: `cl` is a pointer-sized, aligned field of the live task;
    // only this worker writes it while the task executes (StarPU and the
    // application read it), so an atomic swap from our copy back to the
    // original codelet, which has the same contents, is safe for readers
    // on any thread.
    let cl = unsafe { AtomicPtr::from_ptr(&raw mut (*task).cl) };
    let _ = cl.compare_exchange(
        copy as *mut sys::starpu_codelet,
        original as *mut sys::starpu_codelet,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// Runs the original implementation `KIND`/`IDX` of the current task's
/// codelet, then the emulated extra time, then gives the task its own
/// codelet back.
unsafe extern "C" fn trampoline<const KIND: usize, const IDX: usize>(
    buffers: *mut *mut c_void,
    cl_arg: *mut c_void,
) {
    ffi_guard("emulation trampoline", (), || {
        // SAFETY: a trampoline only runs as a codelet implementation, on a
        // StarPU worker executing a task; the current task and its codelet
        // are valid while it executes.
        let (task, found) = unsafe {
            let task = sys::starpu_task_get_current();
            if task.is_null() || (*task).cl.is_null() {
                (task, None)
            } else {
                (task, implementation::<KIND, IDX>((*task).cl))
            }
        };
        let Some((original, app_codelet)) = found else {
            eprintln!(
                "plb: error: {ENV} trampoline ({} implementation {IDX}) cannot find the original codelet function; aborting",
                KINDS[KIND]
            );
            std::process::abort();
        };
        SELF_EMULATED.with(|c| c.set(false));
        let start_us = now_us();
        // SAFETY: the application's implementation, called with the
        // arguments StarPU gave us.
        unsafe { original(buffers, cl_arg) };
        let elapsed = us(now_us() - start_us);
        if !SELF_EMULATED.with(|c| c.replace(false)) {
            spin_for(extra_for_current_worker(start_us, elapsed));
        }
        if let Some(app) = app_codelet {
            // SAFETY: `task` is the task this worker executes; `cl` was
            // our copy when the trampoline started.
            unsafe { give_back(task, (*task).cl as usize, app) };
        }
    })
}

const fn row<const KIND: usize>() -> [Kernel; NIMPL] {
    // Written out because a const generic cannot take a loop index.
    let all: [Kernel; 8] = [
        trampoline::<KIND, 0>,
        trampoline::<KIND, 1>,
        trampoline::<KIND, 2>,
        trampoline::<KIND, 3>,
        trampoline::<KIND, 4>,
        trampoline::<KIND, 5>,
        trampoline::<KIND, 6>,
        trampoline::<KIND, 7>,
    ];
    let mut out: [Kernel; NIMPL] = [all[0]; NIMPL];
    let mut i = 0;
    while i < NIMPL {
        out[i] = all[i];
        i += 1;
    }
    out
}

const _: () = assert!(
    NIMPL <= 8,
    "add trampolines for STARPU_MAXIMPLEMENTATIONS > 8"
);
static TRAMPOLINES: [[Kernel; NIMPL]; 3] = [row::<CPU>(), row::<CUDA>(), row::<OPENCL>()];

/// Address of implementation slot `i` of device kind `k` of `cl`.
///
/// # Safety
/// `cl` must point to a live codelet and `i < NIMPL`.
unsafe fn slot(cl: *mut sys::starpu_codelet, k: usize, i: usize) -> *mut Option<Kernel> {
    // SAFETY: per the contract; the three fields are arrays of
    // `Option<unsafe extern "C" fn(*mut *mut c_void, *mut c_void)>`. Raw
    // pointers only: no reference to a struct others may access.
    unsafe {
        match k {
            CPU => &raw mut (*cl).cpu_funcs[i],
            CUDA => &raw mut (*cl).cuda_funcs[i],
            _ => &raw mut (*cl).opencl_funcs[i],
        }
    }
}

fn codelet_name(cl: *const sys::starpu_codelet) -> String {
    // SAFETY: `cl` is live; its name is NULL or a C string.
    let name = unsafe { (*cl).name };
    if name.is_null() {
        format!("{cl:p}")
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// A byte copy of the codelet at `cl`.
///
/// # Safety
/// `cl` must point to a live codelet.
unsafe fn snapshot(cl: *const sys::starpu_codelet) -> Box<[MaybeUninit<u8>]> {
    let mut bytes = vec![MaybeUninit::<u8>::uninit(); CODELET_SIZE].into_boxed_slice();
    // SAFETY: both regions are CODELET_SIZE bytes and distinct; an untyped
    // copy keeps every byte, padding included.
    unsafe {
        std::ptr::copy_nonoverlapping(
            cl as *const MaybeUninit<u8>,
            bytes.as_mut_ptr(),
            CODELET_SIZE,
        )
    };
    bytes
}

/// Whether the codelet at `cl` has the bytes of `snapshot`, apart from
/// `per_worker_stats`.
///
/// # Safety
/// `cl` must point to a live codelet.
unsafe fn unchanged(cl: *const sys::starpu_codelet, snapshot: &[MaybeUninit<u8>]) -> bool {
    let (a, b) = (cl as *const u8, snapshot.as_ptr() as *const u8);
    // SAFETY: both regions are CODELET_SIZE bytes; memcmp compares bytes
    // (padding included, which the byte copy preserved).
    unsafe {
        libc::memcmp(a.cast(), b.cast(), STATS_START) == 0
            && libc::memcmp(
                a.add(STATS_END).cast(),
                b.add(STATS_END).cast(),
                CODELET_SIZE - STATS_END,
            ) == 0
    }
}

/// The known version of `cl` that matches its current bytes, if any.
///
/// # Safety
/// `cl` must point to a live codelet.
unsafe fn known(revisions: &[Revision], cl: *const sys::starpu_codelet) -> Option<&Revision> {
    revisions
        .iter()
        .rev()
        // SAFETY: per the contract.
        .find(|r| unsafe { unchanged(cl, &r.snapshot) })
}

/// The codelet StarPU must get instead of the application's `cl`: the
/// private copy with trampolines of `cl`'s current version (made now if
/// needed), `cl` itself when it is already one of our copies or has
/// nothing to wrap. Nothing is written into `cl`. `Err` is the submit
/// return code.
///
/// # Safety
/// `cl` must point to a live codelet (it is only read).
unsafe fn substitute(cl: *mut sys::starpu_codelet) -> Result<*mut sys::starpu_codelet, c_int> {
    let addr = cl as usize;
    let pick = |r: &Revision| r.copy.map_or(cl, |c| c as *mut sys::starpu_codelet);
    // Fast path: a resubmitted task, or a known version.
    if let Some(reg) = read(&REGISTRY).as_ref() {
        if reg.by_copy.contains_key(&addr) {
            return Ok(cl);
        }
        if let Some(revisions) = reg.by_original.get(&addr) {
            // SAFETY: `cl` is live per the contract.
            if let Some(r) = unsafe { known(revisions, cl) } {
                return Ok(pick(r));
            }
        }
    }
    let mut guard = write(&REGISTRY);
    let Registry {
        by_original,
        by_copy,
    } = guard.get_or_insert_with(Registry::default);
    if by_copy.contains_key(&addr) {
        return Ok(cl);
    }
    if !by_original.contains_key(&addr) && by_original.len() >= MAX_CODELETS {
        eprintln!(
            "plb: error: {ENV}: codelet {} would be the {}th distinct codelet wrapped; refusing \
             the task (the program creates codelets at new addresses without bound?)",
            codelet_name(cl),
            MAX_CODELETS + 1
        );
        return Err(-libc::EINVAL);
    }
    let revisions = by_original.entry(addr).or_default();
    // SAFETY: as above (another thread may have added it meanwhile).
    if let Some(r) = unsafe { known(revisions, cl) } {
        return Ok(pick(r));
    }
    if revisions.len() >= MAX_REVISIONS {
        eprintln!(
            "plb: error: {ENV}: codelet {} changed more than {MAX_REVISIONS} times between \
             submissions; refusing the task (each version needs a private copy)",
            codelet_name(cl)
        );
        return Err(-libc::EINVAL);
    }
    let is_tramp = |k: usize, i: usize, f: Kernel| f as usize == TRAMPOLINES[k][i] as usize;
    let mut originals: Originals = [[None; NIMPL]; 3];
    for (k, row) in originals.iter_mut().enumerate() {
        for (i, orig) in row.iter_mut().enumerate() {
            // SAFETY: reading a slot of a live codelet.
            let f = unsafe { slot(cl, k, i).read() };
            if let Some(f) = f
                && is_tramp(k, i, f)
            {
                eprintln!(
                    "plb: error: {ENV}: codelet {} holds the emulation's trampolines (copied from \
                     a submitted task's task->cl?); its original functions are unknown",
                    codelet_name(cl)
                );
                return Err(-libc::EINVAL);
            }
            *orig = f;
        }
    }
    let any = originals.iter().flatten().any(Option::is_some);
    let copy = if any {
        // Owned by the registry for the process life (see the module
        // documentation for why it is never freed).
        let copy = Box::into_raw(Box::new(MaybeUninit::<sys::starpu_codelet>::uninit()))
            .cast::<sys::starpu_codelet>();
        // SAFETY: `copy` is a fresh, exclusively owned codelet-sized
        // allocation, filled byte for byte from the live `cl`, then its
        // non-empty slots are pointed at the trampolines, all before it is
        // published (StarPU only sees it once it is in a submitted task).
        unsafe {
            std::ptr::copy_nonoverlapping(cl as *const u8, copy as *mut u8, CODELET_SIZE);
            for (k, row) in originals.iter().enumerate() {
                for (i, orig) in row.iter().enumerate() {
                    if orig.is_some() {
                        slot(copy, k, i).write(Some(TRAMPOLINES[k][i]));
                    }
                }
            }
        }
        by_copy.insert(
            copy as usize,
            CopyOf {
                originals,
                original: addr,
            },
        );
        ANY_COPY.store(true, Ordering::Release);
        Some(copy as usize)
    } else {
        eprintln!(
            "plb: warning: {ENV}: codelet {} has no cpu_funcs/cuda_funcs/opencl_funcs pointer \
             (deprecated cpu_func, cpu_funcs_name only, or another device): not emulated",
            codelet_name(cl)
        );
        None
    };
    // SAFETY: `cl` is live.
    let snapshot = unsafe { snapshot(cl) };
    revisions.push(Revision { snapshot, copy });
    Ok(copy.map_or(cl, |c| c as *mut sys::starpu_codelet))
}

/// A task whose codelet [`prepare`] replaced: the application's codelet,
/// and whether StarPU frees the task before its submit function returns
/// (synchronous with `destroy` set; read before the call).
struct Replaced {
    original: *mut sys::starpu_codelet,
    freed_by_submit: bool,
}

/// Gives the task the private copy of its codelet when an emulation is
/// active; returns what [`after_submit`] needs when it was replaced.
fn prepare(task: *mut sys::starpu_task) -> Result<Option<Replaced>, c_int> {
    if task.is_null() || read(&ACTIVE).is_none() {
        return Ok(None);
    }
    // SAFETY: the application passes a valid task to starpu_task_submit.
    let cl = unsafe { (*task).cl };
    if cl.is_null() {
        return Ok(None);
    }
    // SAFETY: a submitted task's codelet is live; it is only read.
    let ours = unsafe { substitute(cl) }?;
    if ours == cl {
        return Ok(None);
    }
    // SAFETY: the task is being submitted by the calling thread and is
    // not in StarPU yet: nobody else reads or writes it now.
    let freed_by_submit = unsafe {
        (*task).cl = ours;
        sys::starpu_task::synchronous_raw(task) != 0 && sys::starpu_task::destroy_raw(task) != 0
    };
    Ok(Some(Replaced {
        original: cl,
        freed_by_submit,
    }))
}

/// After StarPU's submit function returned `ret`: a refused task gets the
/// application's codelet back at once. (StarPU refuses before queueing the
/// task, so it is still the caller's; a synchronous task with `destroy`
/// may be freed by then and is not touched.)
fn after_submit(task: *mut sys::starpu_task, replaced: Option<Replaced>, ret: c_int) {
    if let Some(r) = replaced
        && ret != 0
        && !r.freed_by_submit
    {
        // SAFETY: StarPU refused the task, which stays the caller's: no
        // other thread reads it.
        unsafe { (*task).cl = r.original };
    }
}

/// The application's codelet behind `cl` (a task's `task->cl`): the
/// codelet a private copy was made from, else `cl` itself. The key our
/// policies use for a task's codelet, the same before and after the
/// trampoline gave the task its codelet back.
pub fn original_of(cl: usize) -> usize {
    if !ANY_COPY.load(Ordering::Acquire) {
        return cl;
    }
    read(&REGISTRY)
        .as_ref()
        .and_then(|r| r.by_copy.get(&cl))
        .map_or(cl, |c| c.original)
}

/// Private codelet copies made so far (one per version of each wrapped
/// codelet, whatever the number of tasks).
pub fn copies() -> usize {
    read(&REGISTRY).as_ref().map_or(0, |r| r.by_copy.len())
}

/// C entry of [`copies`]: `size_t plb_emulate_codelet_copies(void)`.
#[unsafe(no_mangle)]
pub extern "C" fn plb_emulate_codelet_copies() -> usize {
    ffi_guard("plb_emulate_codelet_copies", 0, copies)
}

fn next_symbol(symbol: &CStr) -> Option<usize> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name is always valid.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, symbol.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

fn real_submit() -> Option<SubmitFn> {
    static REAL: OnceLock<Option<usize>> = OnceLock::new();
    let addr = (*REAL.get_or_init(|| next_symbol(c"starpu_task_submit")))?;
    // SAFETY: StarPU's starpu_task_submit, of this type.
    Some(unsafe { std::mem::transmute::<usize, SubmitFn>(addr) })
}

fn real_submit_to_ctx() -> Option<SubmitCtxFn> {
    static REAL: OnceLock<Option<usize>> = OnceLock::new();
    let addr = (*REAL.get_or_init(|| next_symbol(c"starpu_task_submit_to_ctx")))?;
    // SAFETY: StarPU's starpu_task_submit_to_ctx, of this type.
    Some(unsafe { std::mem::transmute::<usize, SubmitCtxFn>(addr) })
}

/// Interposed `starpu_task_submit`: wraps the codelet when `PLB_EMULATE`
/// is active, then calls StarPU's.
///
/// # Safety
/// Same contract as StarPU's `starpu_task_submit`.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_task_submit(task: *mut sys::starpu_task) -> c_int {
    ffi_guard("starpu_task_submit", -libc::EINVAL, || {
        let Some(real) = real_submit() else {
            eprintln!(
                "plb: error: StarPU's starpu_task_submit was not found (is libstarpu loaded?)"
            );
            return -libc::ENOSYS;
        };
        let replaced = match prepare(task) {
            Ok(r) => r,
            Err(code) => return code,
        };
        // SAFETY: forwards the caller's task.
        let ret = unsafe { real(task) };
        after_submit(task, replaced, ret);
        ret
    })
}

/// Interposed `starpu_task_submit_to_ctx` (StarPU calls its own
/// `starpu_task_submit` directly from it, not through the PLT).
///
/// # Safety
/// Same contract as StarPU's `starpu_task_submit_to_ctx`.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_task_submit_to_ctx(
    task: *mut sys::starpu_task,
    sched_ctx_id: c_uint,
) -> c_int {
    ffi_guard("starpu_task_submit_to_ctx", -libc::EINVAL, || {
        let Some(real) = real_submit_to_ctx() else {
            eprintln!(
                "plb: error: StarPU's starpu_task_submit_to_ctx was not found (is libstarpu loaded?)"
            );
            return -libc::ENOSYS;
        };
        let replaced = match prepare(task) {
            Ok(r) => r,
            Err(code) => return code,
        };
        // SAFETY: forwards the caller's arguments.
        let ret = unsafe { real(task, sched_ctx_id) };
        after_submit(task, replaced, ret);
        ret
    })
}
