//! Heterogeneity emulation (`PLB_EMULATE`), applied inside codelet execution.
//!
//! When `PLB_EMULATE` is set at `starpu_initialize`, every codelet that goes
//! through `starpu_task_submit` (or `starpu_task_submit_to_ctx`; both are
//! interposed here, `starpu_task_insert` and friends reach the former
//! through the PLT) has its CPU, CUDA and OpenCL implementation pointers
//! replaced, once, by trampolines. A trampoline runs the original
//! implementation, measures it, and busy-waits for the emulated extra time
//! of the worker running it (see [`crate::emulation`]). The slowdown thus
//! happens inside the task's execution, whatever policy is active: StarPU's
//! own `eager` and `dmda`, its performance models and our policies see the
//! slower worker as they would see real hardware. Policies never read the
//! settings.
//!
//! Without `PLB_EMULATE` nothing is touched: the interposed submit functions
//! forward the call untouched.
//!
//! Our own applications' codelets may instead call [`emulate_after`] (C:
//! `double plb_emulate_after(double elapsed_s)`) at their end; a trampoline
//! around such a codelet then adds nothing more.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use starpu_sys as sys;

use super::guard::ffi_guard;
use crate::emulation::{Emulation, Workers};

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
    t0: Instant,
}

static ACTIVE: RwLock<Option<Arc<Active>>> = RwLock::new(None);
/// Parsed by [`before_init`], activated by [`after_init`] on success.
static PENDING: Mutex<Option<Emulation>> = Mutex::new(None);

/// Original implementations of each wrapped codelet (by address), indexed
/// by device kind and implementation slot. Entries are never removed: a
/// codelet's slots keep pointing at trampolines for the whole process.
type Originals = [[Option<Kernel>; NIMPL]; 3];
static WRAPPED: RwLock<Option<HashMap<usize, Originals>>> = RwLock::new(None);
/// Codelets already warned about (nothing to wrap).
static WARNED: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

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
                Ok(e) => Some(e),
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
        let act = pending.map(|spec| {
            Arc::new(Active {
                spec,
                t0: Instant::now(),
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
    let mut buf = [0 as c_char; 64];
    // SAFETY: StarPU writes at most `buf.len()` bytes, NUL-terminated, for
    // an existing worker id.
    unsafe {
        sys::starpu_worker_get_name(id as c_int, buf.as_mut_ptr(), buf.len());
        buf[buf.len() - 1] = 0;
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}

/// The busy-wait for a task body that started at `start` and ran for
/// `elapsed` on the calling worker, under the active emulation.
fn extra_for_current_worker(start: Instant, elapsed: Duration) -> Duration {
    let Some(a) = active() else {
        return Duration::ZERO;
    };
    // SAFETY: plain query; -1 when the caller is not a StarPU worker.
    let id = unsafe { sys::starpu_worker_get_id() };
    let Ok(id) = u32::try_from(id) else {
        return Duration::ZERO;
    };
    a.spec
        .extra(id, start.saturating_duration_since(a.t0), elapsed)
}

fn spin_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    let until = Instant::now() + d;
    while Instant::now() < until {
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
    let start = Instant::now()
        .checked_sub(elapsed)
        .unwrap_or_else(Instant::now);
    let extra = extra_for_current_worker(start, elapsed);
    SELF_EMULATED.with(|c| c.set(true));
    spin_for(extra);
    extra.as_secs_f64()
}

/// C entry of [`emulate_after`]: `double plb_emulate_after(double elapsed_s)`.
#[unsafe(no_mangle)]
pub extern "C" fn plb_emulate_after(elapsed_s: f64) -> f64 {
    ffi_guard("plb_emulate_after", 0.0, || emulate_after(elapsed_s))
}

/// Runs the original implementation `KIND`/`IDX` of the current task's
/// codelet, then the emulated extra time.
unsafe extern "C" fn trampoline<const KIND: usize, const IDX: usize>(
    buffers: *mut *mut c_void,
    cl_arg: *mut c_void,
) {
    // SAFETY: a trampoline only runs as a codelet implementation, on a
    // StarPU worker executing a task.
    let task = unsafe { sys::starpu_task_get_current() };
    let original = ffi_guard("emulation trampoline", None, || {
        if task.is_null() {
            return None;
        }
        // SAFETY: the current task is valid while it executes.
        let cl = unsafe { (*task).cl } as usize;
        read(&WRAPPED).as_ref()?.get(&cl)?[KIND][IDX]
    });
    let Some(original) = original else {
        eprintln!(
            "plb: error: {ENV} trampoline ({} implementation {IDX}) cannot find the original codelet function; aborting",
            KINDS[KIND]
        );
        std::process::abort();
    };
    SELF_EMULATED.with(|c| c.set(false));
    let start = Instant::now();
    // SAFETY: the application's implementation, called with the arguments
    // StarPU gave us.
    unsafe { original(buffers, cl_arg) };
    let elapsed = start.elapsed();
    if !SELF_EMULATED.with(|c| c.replace(false)) {
        ffi_guard("emulation trampoline", (), || {
            spin_for(extra_for_current_worker(start, elapsed));
        });
    }
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
    // pointers only: workers may read these slots concurrently.
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

/// Replaces `cl`'s implementations by trampolines (once; again for slots
/// the application changed since). `Err` is the submit return code.
///
/// # Safety
/// `cl` must be a live codelet owned by the application.
unsafe fn wrap(cl: *mut sys::starpu_codelet) -> Result<(), c_int> {
    let addr = cl as usize;
    let is_tramp = |k: usize, i: usize, f: Kernel| f as usize == TRAMPOLINES[k][i] as usize;
    // Fast path: a known codelet whose slots are all still ours.
    {
        let map = read(&WRAPPED);
        if let Some(orig) = map.as_ref().and_then(|m| m.get(&addr)) {
            let same = (0..3).all(|k| {
                // SAFETY: reading the slots of a live codelet.
                (0..NIMPL).all(|i| match unsafe { slot(cl, k, i).read() } {
                    None => orig[k][i].is_none(),
                    Some(f) => is_tramp(k, i, f),
                })
            });
            if same {
                return Ok(());
            }
        }
    }
    let mut map = write(&WRAPPED);
    let map = map.get_or_insert_with(HashMap::new);
    let known = map.contains_key(&addr);
    let mut orig: Originals = map.get(&addr).copied().unwrap_or([[None; NIMPL]; 3]);
    let mut any = false;
    for k in 0..3 {
        for i in 0..NIMPL {
            // SAFETY: reading a slot of a live codelet.
            match unsafe { slot(cl, k, i).read() } {
                None => orig[k][i] = None,
                Some(f) if is_tramp(k, i, f) => {
                    if !known {
                        eprintln!(
                            "plb: error: {ENV}: codelet {} was copied from an emulated codelet after its first \
                             submission; its original functions are unknown (copy the codelet before submitting it)",
                            codelet_name(cl)
                        );
                        return Err(-libc::EINVAL);
                    }
                    any = true;
                }
                Some(f) => {
                    orig[k][i] = Some(f);
                    // SAFETY: a live, application-owned codelet; before its
                    // first submission through us no task of it is in
                    // StarPU, later only slots the application changed are
                    // written (a pointer-sized store).
                    unsafe { slot(cl, k, i).write(Some(TRAMPOLINES[k][i])) };
                    any = true;
                }
            }
        }
    }
    map.insert(addr, orig);
    if !any {
        let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
        if warned.get_or_insert_with(HashSet::new).insert(addr) {
            eprintln!(
                "plb: warning: {ENV}: codelet {} has no cpu_funcs/cuda_funcs/opencl_funcs pointer \
                 (deprecated cpu_func, cpu_funcs_name only, or another device): not emulated",
                codelet_name(cl)
            );
        }
    }
    Ok(())
}

/// Wraps the codelet of `task` when an emulation is active.
fn prepare(task: *mut sys::starpu_task) -> Result<(), c_int> {
    if task.is_null() || read(&ACTIVE).is_none() {
        return Ok(());
    }
    // SAFETY: the application passes a valid task to starpu_task_submit.
    let cl = unsafe { (*task).cl };
    if cl.is_null() {
        return Ok(());
    }
    // SAFETY: a submitted task's codelet is live and the application's.
    unsafe { wrap(cl) }
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
#[unsafe(no_mangle)]
pub unsafe extern "C" fn starpu_task_submit(task: *mut sys::starpu_task) -> c_int {
    let Some(real) = real_submit() else {
        eprintln!("plb: error: StarPU's starpu_task_submit was not found (is libstarpu loaded?)");
        return -libc::ENOSYS;
    };
    if let Err(code) = ffi_guard("starpu_task_submit", Ok(()), || prepare(task)) {
        return code;
    }
    // SAFETY: forwards the caller's task.
    unsafe { real(task) }
}

/// Interposed `starpu_task_submit_to_ctx` (StarPU calls its own
/// `starpu_task_submit` directly from it, not through the PLT).
///
/// # Safety
/// Same contract as StarPU's `starpu_task_submit_to_ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn starpu_task_submit_to_ctx(
    task: *mut sys::starpu_task,
    sched_ctx_id: c_uint,
) -> c_int {
    let Some(real) = real_submit_to_ctx() else {
        eprintln!(
            "plb: error: StarPU's starpu_task_submit_to_ctx was not found (is libstarpu loaded?)"
        );
        return -libc::ENOSYS;
    };
    if let Err(code) = ffi_guard("starpu_task_submit_to_ctx", Ok(()), || prepare(task)) {
        return code;
    }
    // SAFETY: forwards the caller's arguments.
    unsafe { real(task, sched_ctx_id) }
}
