//! The C face of the divisible-load API (`policy/include/plb_divisible.h`):
//! thin `extern "C"` wrappers over [`crate::divisible::DivisibleRun`].
//!
//! A `plb_dl_run *` is a `Box<DivisibleRun>` turned into a raw pointer by
//! [`plb_dl_create`] and freed by [`plb_dl_destroy`]. Errors are negative
//! return codes (`PLB_DL_E*`) plus a per-thread message read with
//! [`plb_dl_last_error`]. Every entry point goes through `ffi_guard`, so a
//! panic becomes `PLB_DL_EFAULT` instead of unwinding into C.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_uint};

use super::guard::{ffi_guard, guard_status, last_error_ptr, set_last_error};
use crate::config::WorkerKind;
use crate::divisible::{BalancerSpec, DivisibleError, DivisibleRun, Next, spec_from_env};
use starpu_sys as sys;

/// A block was returned (`plb_dl_next`, `plb_dl_try_next`).
pub const PLB_DL_BLOCK: c_int = 1;
/// The run is finished.
pub const PLB_DL_FINISHED: c_int = 0;
/// `plb_dl_try_next` only: nothing now, call again after a completion.
pub const PLB_DL_PENDING: c_int = 2;
/// A NULL pointer or an invalid argument.
pub const PLB_DL_EINVAL: c_int = -1;
/// Unknown balancer name, or the balancer rejected its configuration.
pub const PLB_DL_EBALANCER: c_int = -2;
/// No worker (empty list, bad or duplicated id, StarPU not initialised).
pub const PLB_DL_ENOWORKERS: c_int = -3;
/// `plb_dl_done` for a block id never handed out.
pub const PLB_DL_EUNKNOWN: c_int = -4;
/// `plb_dl_done` for a block already reported done.
pub const PLB_DL_EDONE: c_int = -5;
/// Negative or non-finite time; the block is still in flight.
pub const PLB_DL_ETIME: c_int = -6;
/// The balancer stalled (every PU waits with nothing in flight).
pub const PLB_DL_ESTALLED: c_int = -7;
/// Internal fault (invalid block from the balancer, panic, poisoned lock).
pub const PLB_DL_EFAULT: c_int = -8;

/// Progress counters (`struct plb_dl_stats` in the header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct plb_dl_stats {
    /// Total units.
    pub total_units: u64,
    /// Blocks handed out.
    pub blocks_issued: u64,
    /// Blocks reported done.
    pub blocks_done: u64,
    /// Units handed out.
    pub units_issued: u64,
    /// Units in blocks reported done.
    pub units_done: u64,
    /// Model refits of the balancer (PLB-HAC, PLB-HeC; HDSS: weight fits;
    /// Acosta: rebalances; greedy: 0).
    pub refits: u64,
    /// Seconds since the run was created.
    pub elapsed_s: f64,
}

/// The opaque C handle: a boxed [`DivisibleRun`].
pub struct PlbDlRun(DivisibleRun);

/// The StarPU worker ids `0..starpu_worker_get_count()`; empty when StarPU
/// is not initialised.
pub fn all_worker_ids() -> Vec<i32> {
    // SAFETY: plain queries; starpu_is_initialized may be called at any
    // time, and starpu_worker_get_count is only called once it returned 1.
    let n = unsafe {
        if sys::starpu_is_initialized() == 0 {
            return Vec::new();
        }
        sys::starpu_worker_get_count()
    };
    (0..n).filter_map(|w| i32::try_from(w).ok()).collect()
}

/// `workers` with their kinds (see [`worker_kinds`]).
pub fn kinds_of(workers: &[super::WorkerId]) -> Vec<(super::WorkerId, WorkerKind)> {
    let ids: Vec<i32> = workers.iter().map(|w| w.0 as i32).collect();
    workers.iter().copied().zip(worker_kinds(&ids)).collect()
}

/// `worker`'s label in files: its kind's name and StarPU id (`cuda0`).
pub fn worker_label(worker: super::WorkerId) -> String {
    let kind = worker_kinds(&[worker.0 as i32])[0];
    format!("{}{}", kind.name(), worker.0)
}

/// The kind of each StarPU worker of `ids` ([`WorkerKind::Other`] for an
/// id StarPU does not know, or when StarPU is not initialised).
pub fn worker_kinds(ids: &[i32]) -> Vec<WorkerKind> {
    // SAFETY: plain queries, made only while StarPU is initialised and for
    // ids below its worker count.
    unsafe {
        if sys::starpu_is_initialized() == 0 {
            return vec![WorkerKind::Other; ids.len()];
        }
        let n = sys::starpu_worker_get_count();
        ids.iter()
            .map(|&id| {
                if id < 0 || id as u32 >= n {
                    return WorkerKind::Other;
                }
                match sys::starpu_worker_get_type(id) {
                    sys::STARPU_CPU_WORKER => WorkerKind::Cpu,
                    sys::STARPU_OPENCL_WORKER => WorkerKind::OpenCl,
                    sys::STARPU_CUDA_WORKER => WorkerKind::Cuda,
                    _ => WorkerKind::Other,
                }
            })
            .collect()
    }
}

/// StarPU's name of each worker of `ids` (`starpu_worker_get_name`:
/// `CPU 0`, `CUDA 0.0 (<device> <memory> <PCI id>)`...); empty for an id
/// StarPU does not know, or when StarPU is not initialised.
pub fn worker_names(ids: &[i32]) -> Vec<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: plain queries, made only while StarPU is initialised and for
    // ids below its worker count; starpu_worker_get_name writes at most
    // `buf.len()` bytes into `buf`, and the last byte is set to NUL before
    // the buffer is read as a C string.
    unsafe {
        if sys::starpu_is_initialized() == 0 {
            return vec![String::new(); ids.len()];
        }
        let n = sys::starpu_worker_get_count();
        ids.iter()
            .map(|&id| {
                if id < 0 || id as u32 >= n {
                    return String::new();
                }
                buf[0] = 0;
                sys::starpu_worker_get_name(id, buf.as_mut_ptr(), buf.len());
                buf[buf.len() - 1] = 0;
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            })
            .collect()
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    set_last_error(&LAST_ERROR, msg);
}

fn code_of(e: &DivisibleError) -> c_int {
    match e {
        DivisibleError::UnknownBalancer(_) | DivisibleError::Config(_) => PLB_DL_EBALANCER,
        DivisibleError::NoWorkers | DivisibleError::BadWorker(_) => PLB_DL_ENOWORKERS,
        DivisibleError::UnknownBlock(_) => PLB_DL_EUNKNOWN,
        DivisibleError::AlreadyDone(_) => PLB_DL_EDONE,
        DivisibleError::BadTime { .. } => PLB_DL_ETIME,
        DivisibleError::Stalled { .. } => PLB_DL_ESTALLED,
        DivisibleError::BalancerFault(_) | DivisibleError::Poisoned => PLB_DL_EFAULT,
    }
}

fn fail(e: DivisibleError) -> c_int {
    set_error(&e.to_string());
    code_of(&e)
}

/// `ffi_guard` for the entry points returning a status code: a panic
/// becomes `PLB_DL_EFAULT` with a message.
fn guarded(what: &str, f: impl FnOnce() -> c_int) -> c_int {
    guard_status(what, PLB_DL_EFAULT, &LAST_ERROR, f)
}

/// Reads the optional balancer name: NULL = from `STARPU_SCHED`.
///
/// # Safety
/// `balancer` is NULL or a NUL-terminated string.
unsafe fn spec_of(balancer: *const c_char) -> Result<BalancerSpec, DivisibleError> {
    if balancer.is_null() {
        return Ok(spec_from_env());
    }
    // SAFETY: guaranteed by the caller.
    let name = unsafe { CStr::from_ptr(balancer) };
    match name.to_str() {
        Ok(n) => BalancerSpec::parse(n).map_err(DivisibleError::from),
        Err(_) => Err(DivisibleError::UnknownBalancer(
            name.to_string_lossy().into_owned(),
        )),
    }
}

fn into_handle(r: Result<DivisibleRun, DivisibleError>) -> *mut PlbDlRun {
    match r {
        Ok(run) => Box::into_raw(Box::new(PlbDlRun(run))),
        Err(e) => {
            fail(e);
            std::ptr::null_mut()
        }
    }
}

/// Creates a run of `total_units` units on every StarPU worker. `balancer`:
/// `"greedy"`, `"greedy:<block>"`, `"plb-hac"`, `"plb-hec"`, `"hdss"`,
/// `"acosta"`, or NULL (the one named by `STARPU_SCHED`, else greedy).
/// NULL on error (see `plb_dl_last_error`).
///
/// # Safety
/// `balancer` is NULL or a NUL-terminated string. StarPU is initialised.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_create(total_units: u64, balancer: *const c_char) -> *mut PlbDlRun {
    ffi_guard("plb_dl_create", std::ptr::null_mut(), || {
        // SAFETY: forwarded from our caller's contract.
        let spec = unsafe { spec_of(balancer) };
        into_handle(spec.and_then(|s| DivisibleRun::on_all_workers(total_units, s)))
    })
}

/// A new run of `total_units` units on the same workers with the same
/// balancer as `previous`, continuing from what it learned (PLB-HAC skips
/// its training; see `DivisibleRun::continue_with`). `previous` stays
/// valid and must still be destroyed. NULL on error (plb_dl_last_error).
///
/// # Safety
/// `previous` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_create_next(
    previous: *const PlbDlRun,
    total_units: u64,
) -> *mut PlbDlRun {
    ffi_guard("plb_dl_create_next", std::ptr::null_mut(), || {
        // SAFETY: NULL or live (caller's contract).
        let Some(prev) = (unsafe { previous.as_ref() }) else {
            set_error("plb_dl_create_next: previous is NULL");
            return std::ptr::null_mut();
        };
        match prev.0.continue_with(total_units) {
            Ok(run) => Box::into_raw(Box::new(PlbDlRun(run))),
            Err(e) => {
                fail(e);
                std::ptr::null_mut()
            }
        }
    })
}

/// As [`plb_dl_create`] on the `nworkers` StarPU worker ids `workerids`
/// (PU `p` of the balancer is `workerids[p]`).
///
/// # Safety
/// `balancer` is NULL or a NUL-terminated string; `workerids` points to
/// `nworkers` ints (may be NULL when `nworkers` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_create_on(
    total_units: u64,
    balancer: *const c_char,
    workerids: *const c_int,
    nworkers: c_uint,
) -> *mut PlbDlRun {
    ffi_guard("plb_dl_create_on", std::ptr::null_mut(), || {
        let workers: &[c_int] = if workerids.is_null() || nworkers == 0 {
            &[]
        } else {
            // SAFETY: the caller guarantees `nworkers` readable ints.
            unsafe { std::slice::from_raw_parts(workerids, nworkers as usize) }
        };
        // SAFETY: forwarded from our caller's contract.
        let spec = unsafe { spec_of(balancer) };
        into_handle(spec.and_then(|s| DivisibleRun::new(total_units, workers, s)))
    })
}

/// Stores `v` through `p` when `p` is not NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: guaranteed by the caller.
        unsafe { p.write(v) };
    }
}

/// Writes a block to the optional out-parameters.
///
/// # Safety
/// Each pointer is NULL or valid for a write of its type.
unsafe fn write_block(
    b: crate::divisible::DlBlock,
    workerid: *mut c_int,
    block_id: *mut u64,
    offset: *mut u64,
    len: *mut u64,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        put(workerid, b.worker);
        put(block_id, b.id);
        put(offset, b.offset);
        put(len, b.len);
    }
}

/// Next block, blocking while blocks are in flight and none can be handed
/// out. Returns `PLB_DL_BLOCK` (1) with the out-parameters set,
/// `PLB_DL_FINISHED` (0), or a negative `PLB_DL_E*` code. Out-parameters
/// may be NULL.
///
/// # Safety
/// `run` is NULL or a live handle from `plb_dl_create*`; each out-pointer
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_next(
    run: *const PlbDlRun,
    workerid: *mut c_int,
    block_id: *mut u64,
    offset: *mut u64,
    len: *mut u64,
) -> c_int {
    // SAFETY: forwarded caller's contract.
    unsafe {
        hand_out("plb_dl_next", run, workerid, block_id, offset, len, |r| {
            r.next_block()
                .map(|b| b.map_or(Next::Finished, Next::Block))
        })
    }
}

/// As [`plb_dl_next`] without blocking: `PLB_DL_PENDING` (2) when no block
/// can be handed out until a block in flight is reported done.
///
/// # Safety
/// As [`plb_dl_next`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_try_next(
    run: *const PlbDlRun,
    workerid: *mut c_int,
    block_id: *mut u64,
    offset: *mut u64,
    len: *mut u64,
) -> c_int {
    // SAFETY: forwarded caller's contract.
    unsafe {
        hand_out(
            "plb_dl_try_next",
            run,
            workerid,
            block_id,
            offset,
            len,
            |r| r.try_next_block(),
        )
    }
}

/// The body shared by [`plb_dl_next`] and [`plb_dl_try_next`]: checks the
/// handle, asks `ask` for the next block and writes it out.
///
/// # Safety
/// `run` is NULL or a live handle; each out-pointer is NULL or writable.
unsafe fn hand_out(
    what: &'static str,
    run: *const PlbDlRun,
    workerid: *mut c_int,
    block_id: *mut u64,
    offset: *mut u64,
    len: *mut u64,
    ask: impl FnOnce(&DivisibleRun) -> Result<Next, DivisibleError>,
) -> c_int {
    guarded(what, || {
        // SAFETY: `run` is NULL or live (caller's contract).
        let Some(run) = (unsafe { run.as_ref() }) else {
            set_error(&format!("{what}: run is NULL"));
            return PLB_DL_EINVAL;
        };
        match ask(&run.0) {
            Ok(Next::Block(b)) => {
                // SAFETY: out-pointers are NULL or writable (caller's contract).
                unsafe { write_block(b, workerid, block_id, offset, len) };
                PLB_DL_BLOCK
            }
            Ok(Next::Pending) => PLB_DL_PENDING,
            Ok(Next::Finished) => PLB_DL_FINISHED,
            Err(e) => fail(e),
        }
    })
}

/// Block `block_id` finished after `compute_s` seconds of computation and
/// `transfer_s` seconds of data transfer. 0 on success, else a negative
/// code (nothing is recorded). Callable from a StarPU task callback.
///
/// # Safety
/// `run` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_done(
    run: *const PlbDlRun,
    block_id: u64,
    compute_s: f64,
    transfer_s: f64,
) -> c_int {
    guarded("plb_dl_done", || {
        // SAFETY: `run` is NULL or live (caller's contract).
        let Some(run) = (unsafe { run.as_ref() }) else {
            set_error("plb_dl_done: run is NULL");
            return PLB_DL_EINVAL;
        };
        match run.0.block_done(block_id, compute_s, transfer_s) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Fills `*out` with the run's counters. 0 or a negative code.
///
/// # Safety
/// `run` is NULL or a live handle; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_get_stats(run: *const PlbDlRun, out: *mut plb_dl_stats) -> c_int {
    guarded("plb_dl_get_stats", || {
        // SAFETY: `run` is NULL or live (caller's contract).
        let Some(run) = (unsafe { run.as_ref() }) else {
            set_error("plb_dl_get_stats: run is NULL");
            return PLB_DL_EINVAL;
        };
        if out.is_null() {
            set_error("plb_dl_get_stats: out is NULL");
            return PLB_DL_EINVAL;
        }
        match run.0.stats() {
            Ok(s) => {
                let refits = s.balancer_stats.refits();
                let c = plb_dl_stats {
                    total_units: s.total,
                    blocks_issued: s.blocks_issued,
                    blocks_done: s.blocks_done,
                    units_issued: s.units_issued,
                    units_done: s.units_done,
                    refits,
                    elapsed_s: s.elapsed_s,
                };
                // SAFETY: `out` is non-NULL and writable (caller's contract).
                unsafe { out.write(c) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Frees the run. Must not be called while a block is in flight (its
/// callback would use freed memory): in that case the run is leaked and an
/// error is logged instead. NULL is a no-op.
///
/// # Safety
/// `run` is NULL or a live handle, not used afterwards by the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dl_destroy(run: *mut PlbDlRun) {
    ffi_guard("plb_dl_destroy", (), || {
        if run.is_null() {
            return;
        }
        // SAFETY: non-NULL and live (caller's contract).
        let in_flight = unsafe { (*run).0.in_flight() };
        if in_flight > 0 {
            log::error!(
                "plb_dl_destroy: {in_flight} block(s) still in flight; leaking the run \
                 instead of freeing memory their callbacks may still use"
            );
            set_error("plb_dl_destroy: blocks still in flight; run leaked");
            return;
        }
        // SAFETY: created by Box::into_raw in into_handle; the caller gives
        // up the pointer.
        drop(unsafe { Box::from_raw(run) });
    })
}

/// The message of the last failed `plb_dl_*` call on this thread (empty
/// string if none). Valid until the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn plb_dl_last_error() -> *const c_char {
    last_error_ptr(&LAST_ERROR)
}
