//! `PLB_BOUND=1`: StarPU's LP lower bound on the makespan of whatever the
//! application runs under one of our policies. Recording starts when the
//! global context (0) is initialised, before any task is submitted; the
//! bound is computed and printed by the interposed `starpu_shutdown`, before
//! StarPU's own clears the records and unloads the performance models (so
//! the library must be preloaded, `LD_PRELOAD`, as on 1.3; with 1.4's
//! `STARPU_SCHED_LIB` alone the global context's teardown says so):
//!
//! ```text
//! plb: bound lp_ms=178.0 (StarPU's starpu_bound: area bound, no dependencies, from StarPU's performance models)
//! ```
//!
//! The bound is StarPU's (`starpu_bound_*`, solved with GLPK): it needs
//! StarPU's own performance models of the codelets (calibrated, e.g. by
//! runs with `STARPU_CALIBRATE=1`); without them StarPU says so and the
//! line reports no bound.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use starpu_sys as sys;

use super::guard::ffi_guard;
use super::interpose::next_symbol;

/// Whether recording was started in this process (and not yet reported).
static RECORDING: AtomicBool = AtomicBool::new(false);

/// Whether `PLB_BOUND` asks for the bound.
pub fn requested() -> bool {
    std::env::var("PLB_BOUND").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// At the global context's init: starts StarPU's bound recording.
pub fn start(ctx: u32) {
    if ctx != 0 || !requested() || RECORDING.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: a plain StarPU call with flags (no dependencies, no
    // priorities); StarPU is initialising and no task was submitted yet.
    unsafe { sys::starpu_bound_start(0, 0) };
}

/// Stops recording, computes the bound and prints it (once).
fn report() {
    if !RECORDING.swap(false, Ordering::AcqRel) {
        return;
    }
    let (mut lp, mut integer) = (f64::NAN, f64::NAN);
    // SAFETY: stops the recording started in `start`, then solves the LP
    // into two locals; StarPU is still fully up (called before its
    // shutdown), and both calls only read its records and models.
    unsafe {
        sys::starpu_bound_stop();
        sys::starpu_bound_compute(&mut lp, &mut integer, 0);
    }
    eprintln!("{}", line(lp));
}

/// At the global context's deinit: a recording never reported means
/// `starpu_shutdown` was not interposed (the library was not preloaded).
pub fn teardown(ctx: u32) {
    if ctx == 0 && RECORDING.swap(false, Ordering::AcqRel) {
        eprintln!(
            "plb: bound none (PLB_BOUND needs the library preloaded, LD_PRELOAD=libstarpu_plb.so, to compute the bound before StarPU shuts down)"
        );
    }
}

type ShutdownFn = unsafe extern "C" fn();

fn real_shutdown() -> Option<ShutdownFn> {
    static REAL: OnceLock<Option<usize>> = OnceLock::new();
    let addr = (*REAL.get_or_init(|| next_symbol(c"starpu_shutdown").map(|p| p as usize)))?;
    // SAFETY: the symbol is StarPU's starpu_shutdown, of this type.
    Some(unsafe { std::mem::transmute::<usize, ShutdownFn>(addr) })
}

/// Interposes StarPU's `starpu_shutdown` when the library is preloaded:
/// reports the bound (`PLB_BOUND`) while StarPU is still up, then shuts
/// StarPU down.
///
/// # Safety
/// As StarPU's `starpu_shutdown`.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_shutdown() {
    ffi_guard("starpu_shutdown", (), report);
    match real_shutdown() {
        // SAFETY: StarPU's own starpu_shutdown, called as the application did.
        Some(real) => unsafe { real() },
        None => {
            eprintln!("plb: error: StarPU's starpu_shutdown not found; StarPU is not shut down")
        }
    }
}

/// The printed line for a bound of `lp_ms` (NaN or non-positive: none).
fn line(lp_ms: f64) -> String {
    if lp_ms.is_finite() && lp_ms > 0.0 {
        format!(
            "plb: bound lp_ms={lp_ms:.1} (StarPU's starpu_bound: area bound, no dependencies, from StarPU's performance models)"
        )
    } else {
        "plb: bound none (StarPU's starpu_bound found no solution: codelets without calibrated StarPU performance models?)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_the_bound_or_why_not() {
        assert!(line(178.04).starts_with("plb: bound lp_ms=178.0 "));
        assert!(line(f64::NAN).starts_with("plb: bound none"));
        assert!(line(0.0).starts_with("plb: bound none"));
    }
}
