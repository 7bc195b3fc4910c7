//! The papers' method: IPOPT (interior-point line-search filter) on a convex
//! NLP whose KKT conditions are the equal-finish-time system.
//!
//! NLP handed to IPOPT (`y_p = x_p / W` are the shares, `τ` a time scale):
//!
//! ```text
//! minimise   f(y) = (1/τ) Σ_p Φ_p(W·y_p) / W,   Φ_p(x) = ∫₀ˣ E_p(s) ds
//! subject to g(y) = Σ_p y_p = 1,   y_p ≥ 0   (y_p ≤ 1 is implied)
//! ∇f_p   = E_p(W·y_p) / τ                       (exact)
//! ∇²f    = diag( W · E_p'(W·y_p) / τ )          (exact; g is linear)
//! ∇g     = (1, …, 1)
//! ```
//!
//! `Φ_p` is convex because `E_p` is non-decreasing, so the problem is convex
//! and IPOPT's KKT point is the global minimum. Its stationarity condition
//! `E_p(W y_p)/τ + λ − z_p = 0` with `z_p ≥ 0`, `z_p y_p = 0` says: every
//! PU with `y_p > 0` has `E_p(x_p) = −λτ =: T`; every PU with `y_p = 0`
//! has `E_p(0) = T + τ z_p ≥ T`. That is eq. (3) of PLB-HAC plus the
//! exclusion of PUs whose fixed cost exceeds the common finish time. `Φ_p`
//! is evaluated by 8-point Gauss–Legendre quadrature (the value only drives
//! the line search; the gradient and Hessian are exact). `τ` is the harmonic
//! mean of `E_p(W/n)` over the PUs (`T` lies between the smallest and the
//! largest of these), so IPOPT sees gradients of order 1 whatever the time
//! unit. Starting point: the throughput-proportional split
//! `y_p ∝ 1/E_p(W/n)`. The fast solver's answer is not used anywhere, so
//! the two methods are independent.
//!
//! Options: `tol = 1e-12`, adaptive barrier update with the probing
//! (Mehrotra) oracle, `mu_min = 1e-16` (IPOPT's default floor of 1e-11
//! leaves PUs with tiny blocks off by `μ / y_p`), `bound_relax_factor = 0`
//! (relaxed bounds let idle PUs take slightly negative work, which shifts
//! every share by ~1e-7), no NLP scaling (the objective is already scaled
//! by `τ`), `jac_c_constant`, `min_refinement_steps = 0`.
//!
//! [`IpoptSolver::solve_warm`] (production path) starts instead from a
//! previous distribution with its multipliers (`warm_start_init_point`,
//! pushes of 1e-9, monotone barrier from `μ = 1e-11`): about half the
//! iterations when the models changed moderately.
//!
//! This is the only module of the crate with `unsafe` code: the callbacks
//! IPOPT calls through `ipopt-sys`'s C API. Every callback catches panics
//! and returns "evaluation failed" to IPOPT instead of unwinding into C++.
//! IPOPT (with MUMPS) is not thread-safe, so solves are serialised by a
//! process-wide mutex.

// IPOPT is a C library reached through ipopt-sys: the FFI calls and the
// callbacks it invokes need unsafe. Temporary: IPOPT is moving to its own
// crate, which will carry this allowance instead.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use ipopt_sys as sys;

use super::{BlockSolver, Distribution, SolveError, SolverKind, check_inputs};
use crate::model::TimeModel;

/// IPOPT through `ipopt-sys` (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IpoptSolver {
    /// IPOPT's `tol` (scaled NLP error at which it stops).
    pub tol: f64,
    /// IPOPT's `max_iter`.
    pub max_iter: i32,
    /// IPOPT's `max_cpu_time`, seconds.
    pub max_cpu_time: f64,
    /// IPOPT's `print_level` (0 = silent; 5 = IPOPT's iteration log on
    /// stdout, for debugging).
    pub print_level: i32,
}

impl Default for IpoptSolver {
    fn default() -> Self {
        IpoptSolver {
            tol: 1e-12,
            max_iter: 500,
            max_cpu_time: 10.0,
            print_level: 0,
        }
    }
}

impl BlockSolver for IpoptSolver {
    fn kind(&self) -> SolverKind {
        SolverKind::Ipopt
    }

    fn solve(&self, models: &[&dyn TimeModel], total: f64) -> Result<Distribution, SolveError> {
        self.solve_with_stats(models, total).map(|(d, _)| d)
    }
}

/// Statistics of one IPOPT solve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpoptStats {
    /// IPOPT iterations.
    pub iterations: i32,
    /// IPOPT's return status (0 = solved, 1 = solved to acceptable level).
    pub status: i32,
}

/// IPOPT and MUMPS keep global state: one solve at a time per process.
static IPOPT_LOCK: Mutex<()> = Mutex::new(());

/// 8-point Gauss–Legendre nodes on [-1, 1] (positive half) and weights.
const GL_NODES: [f64; 4] = [
    0.183_434_642_495_649_8,
    0.525_532_409_916_329,
    0.796_666_477_413_626_7,
    0.960_289_856_497_536_3,
];
const GL_WEIGHTS: [f64; 4] = [
    0.362_683_783_378_362,
    0.313_706_645_877_887_3,
    0.222_381_034_453_374_5,
    0.101_228_536_290_376_3,
];

/// What the callbacks see (through IPOPT's user-data pointer).
struct Nlp<'a> {
    models: &'a [&'a dyn TimeModel],
    w: f64,
    inv_tau: f64,
    n: usize,
    /// The first failed evaluation, reported if IPOPT gives up.
    failure: RefCell<Option<String>>,
    iterations: Cell<i32>,
    /// Starting point.
    start: Vec<f64>,
    /// Starting multipliers (warm start only).
    warm: Option<WarmPoint>,
}

/// A warm-start point: shares, bound multipliers and equality multiplier.
struct WarmPoint {
    y: Vec<f64>,
    z: Vec<f64>,
    lambda: f64,
}

/// Primal-dual starting point from a previous distribution: `y` its shares
/// (floored at 1e-9 so that IPOPT starts strictly inside), `λ = −T/τ`, and
/// for each PU the multiplier of `y_p ≥ 0`: `(E_p(W y_p) − T)/τ` when
/// positive (an idle PU), else a small value. `T` is the previous finish
/// time, or the largest `E_p(x_p)` among the PUs with work.
fn warm_point(
    models: &[&dyn TimeModel],
    total: f64,
    tau: f64,
    previous: &Distribution,
) -> Option<WarmPoint> {
    let n = models.len();
    if previous.shares.len() != n || !previous.shares.iter().all(|s| s.is_finite() && *s >= 0.0) {
        return None;
    }
    let floor = 1e-9;
    let sum: f64 = previous.shares.iter().map(|s| s.max(floor)).sum();
    if sum.is_nan() || sum <= 0.0 {
        return None;
    }
    let y: Vec<f64> = previous.shares.iter().map(|s| s.max(floor) / sum).collect();
    let mut t = previous.finish_time;
    if !(t.is_finite() && t > 0.0) {
        t = y
            .iter()
            .zip(models)
            .filter(|(yp, _)| **yp > floor)
            .map(|(yp, m)| m.time(total * yp))
            .fold(f64::NAN, f64::max);
    }
    if !(t.is_finite() && t > 0.0) {
        return None;
    }
    let z = y
        .iter()
        .zip(models)
        .map(|(yp, m)| {
            let gap = (m.time(total * yp) - t) / tau;
            if gap.is_finite() && gap > 1e-9 {
                gap
            } else {
                1e-9
            }
        })
        .collect();
    Some(WarmPoint {
        y,
        z,
        lambda: -t / tau,
    })
}

impl Nlp<'_> {
    fn fail(&self, msg: String) {
        let mut f = self.failure.borrow_mut();
        if f.is_none() {
            *f = Some(msg);
        }
    }

    fn time(&self, p: usize, x: f64) -> Result<f64, String> {
        let v = self.models[p].time(x);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("time of PU {p} at {x} units is {v}"))
        }
    }

    fn slope(&self, p: usize, x: f64) -> Result<f64, String> {
        let v = self.models[p].slope(x);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("slope of PU {p} at {x} units is {v}"))
        }
    }

    /// `E_p(W y)`, continued linearly below 0 (in case IPOPT evaluates a
    /// point slightly outside the bounds).
    fn grad(&self, p: usize, y: f64) -> Result<f64, String> {
        if y >= 0.0 {
            self.time(p, self.w * y)
        } else {
            Ok(self.time(p, 0.0)? + self.w * y * self.slope(p, 0.0)?)
        }
    }

    /// `W E_p'(W y)` (constant below 0, matching [`Nlp::grad`]).
    fn hess(&self, p: usize, y: f64) -> Result<f64, String> {
        Ok(self.w * self.slope(p, self.w * y.max(0.0))?)
    }

    /// `Φ_p(W y) / W`: Gauss–Legendre quadrature of `E_p` over `[0, x]`;
    /// below 0 the integral of the linear continuation of [`Nlp::grad`].
    fn phi_over_w(&self, p: usize, y: f64) -> Result<f64, String> {
        let x = self.w * y;
        if x <= 0.0 {
            return Ok(y * (self.time(p, 0.0)? + 0.5 * x * self.slope(p, 0.0)?));
        }
        let half = 0.5 * x;
        let mut acc = 0.0;
        for (node, weight) in GL_NODES.iter().zip(GL_WEIGHTS) {
            acc += weight
                * (self.time(p, half * (1.0 - node))? + self.time(p, half * (1.0 + node))?);
        }
        Ok(0.5 * y * acc)
    }
}

impl IpoptSolver {
    /// Solves from the throughput-proportional split (independent of any
    /// other solver) and reports IPOPT's iteration count and status.
    pub fn solve_with_stats(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        self.solve_from(models, total, None)
    }

    /// Warm start for the production path: starts IPOPT from `previous`
    /// (typically the distribution of the previous virtual step, computed
    /// with slightly older models), with primal and dual values
    /// (`T` from its finish time, bound multipliers from the fixed costs).
    /// A `previous` over a different number of PUs, or with unusable
    /// values, gives a cold start.
    pub fn solve_warm(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
        previous: &Distribution,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        self.solve_from(models, total, Some(previous))
    }

    fn solve_from(
        &self,
        models: &[&dyn TimeModel],
        total: f64,
        previous: Option<&Distribution>,
    ) -> Result<(Distribution, IpoptStats), SolveError> {
        check_inputs(models.len(), total)?;
        let n = models.len();
        if i32::try_from(n).is_err() {
            return Err(SolveError::TooManyPus(n));
        }
        if n == 1 {
            // The feasible set is the single point y = 1.
            let t = models[0].time(total);
            if t.is_nan() {
                return Err(SolveError::NonFinite {
                    pu: 0,
                    x: total,
                    value: t,
                });
            }
            let d = Distribution::from_units(vec![total], total, t, SolverKind::Ipopt);
            return Ok((d, IpoptStats::default()));
        }
        let x_ref = total / n as f64;
        let mut inv_sum = 0.0;
        let mut start = vec![0.0; n];
        for (p, m) in models.iter().enumerate() {
            let t = m.time(x_ref);
            if t.is_nan() {
                return Err(SolveError::NonFinite {
                    pu: p,
                    x: x_ref,
                    value: t,
                });
            }
            if t > 0.0 {
                inv_sum += 1.0 / t;
                start[p] = 1.0 / t;
            }
        }
        // Start from the throughput-proportional split (equal split when
        // the rates are unusable); IPOPT pushes it into the interior.
        if inv_sum > 0.0 && inv_sum.is_finite() {
            for v in &mut start {
                *v /= inv_sum;
            }
        } else {
            start.fill(1.0 / n as f64);
        }
        let tau = if inv_sum > 0.0 && inv_sum.is_finite() {
            n as f64 / inv_sum
        } else {
            1.0
        };
        let warm = previous.and_then(|d| warm_point(models, total, tau, d));
        if let Some(w) = &warm {
            start.copy_from_slice(&w.y);
        }
        let nlp = Nlp {
            models,
            w: total,
            inv_tau: 1.0 / tau,
            n,
            failure: RefCell::new(None),
            iterations: Cell::new(0),
            start,
            warm,
        };
        let (status, y, lambda) = self.run(&nlp)?;
        let stats = IpoptStats {
            iterations: nlp.iterations.get(),
            status,
        };
        let ok = status == sys::CNLP_ApplicationReturnStatus_CNLP_SOLVE_SUCCEEDED
            || status == sys::CNLP_ApplicationReturnStatus_CNLP_SOLVED_TO_ACCEPTABLE_LEVEL;
        if !ok {
            let mut detail = status_name(status).to_string();
            if let Some(f) = nlp.failure.borrow().as_ref() {
                detail.push_str("; ");
                detail.push_str(f);
            }
            return Err(SolveError::Ipopt { status, detail });
        }
        if status == sys::CNLP_ApplicationReturnStatus_CNLP_SOLVED_TO_ACCEPTABLE_LEVEL {
            log::debug!("IPOPT solved to acceptable level only ({n} PUs)");
        }
        // IPOPT honours the bounds; clamp against round-off and renormalise
        // so that the shares sum to 1 exactly (to rounding).
        let mut y: Vec<f64> = y.into_iter().map(|v| v.clamp(0.0, 1.0)).collect();
        let sum: f64 = y.iter().sum();
        if !(sum.is_finite() && sum > 0.0) || y.iter().any(|v| v.is_nan()) {
            return Err(SolveError::Ipopt {
                status,
                detail: format!("solution is not usable (sum of shares {sum})"),
            });
        }
        for v in &mut y {
            *v /= sum;
        }
        let units = y.iter().map(|v| v * total).collect();
        let t = -lambda * tau;
        Ok((
            Distribution::from_units(units, total, t, SolverKind::Ipopt),
            stats,
        ))
    }

    /// Creates the IPOPT problem, solves it and copies out the shares and
    /// the constraint multiplier. Holds [`IPOPT_LOCK`] throughout.
    fn run(&self, nlp: &Nlp<'_>) -> Result<(i32, Vec<f64>, f64), SolveError> {
        let _lock = IPOPT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut prob: sys::CNLP_ProblemPtr = std::ptr::null_mut();
        // SAFETY: `prob` is a valid out-pointer; every callback is an
        // `extern "C"` function with exactly the signature the C API
        // declares (checked by the compiler against the bindings).
        let created = unsafe {
            sys::cnlp_create_problem(
                &mut prob,
                0,
                Some(cb_sizes),
                Some(cb_init),
                Some(cb_bounds),
                Some(cb_eval_f),
                Some(cb_eval_g),
                Some(cb_eval_grad_f),
                Some(cb_eval_jac_g),
                Some(cb_eval_h),
                None,
            )
        };
        if created != sys::CNLP_CreateProblemStatus_CNLP_SUCCESS || prob.is_null() {
            return Err(SolveError::Ipopt {
                status: sys::CNLP_ApplicationReturnStatus_CNLP_INTERNAL_ERROR,
                detail: format!("cnlp_create_problem failed ({created})"),
            });
        }
        let problem = Problem(prob);
        problem.option_int("print_level", self.print_level)?;
        problem.option_str("sb", "yes")?;
        problem.option_num("tol", self.tol)?;
        problem.option_int("max_iter", self.max_iter)?;
        problem.option_num("max_cpu_time", self.max_cpu_time)?;
        problem.option_str("jac_c_constant", "yes")?;
        // Let μ go below IPOPT's 1e-11 floor, so that shares of PUs with
        // tiny blocks are not distorted by complementarity (μ / y_p).
        problem.option_num("mu_min", 1e-16)?;
        // Keep 0 ≤ y_p exact: relaxed bounds let the PUs that get nothing
        // take slightly negative work, which shifts everybody else's share
        // by ~1e-7.
        problem.option_num("bound_relax_factor", 0.0)?;
        // The objective is already scaled by τ.
        problem.option_str("nlp_scaling_method", "none")?;
        // Refine the linear solves only when the residual asks for it (each
        // MUMPS call has a fixed cost of ~0.1 ms).
        problem.option_int("min_refinement_steps", 0)?;
        if nlp.warm.is_some() {
            // Warm start: keep the given point and multipliers (push them
            // off the bounds by 1e-9 only) and start the barrier parameter
            // near its final value, decreasing monotonically.
            problem.option_str("warm_start_init_point", "yes")?;
            problem.option_num("warm_start_bound_push", 1e-9)?;
            problem.option_num("warm_start_bound_frac", 1e-9)?;
            problem.option_num("warm_start_mult_bound_push", 1e-9)?;
            problem.option_str("mu_strategy", "monotone")?;
            problem.option_num("mu_init", 1e-11)?;
        } else {
            // Adaptive barrier update with the probing (Mehrotra) oracle:
            // the fewest iterations and linear solves from a cold start.
            problem.option_str("mu_strategy", "adaptive")?;
            problem.option_str("mu_oracle", "probing")?;
        }
        // SAFETY: `problem.0` is a live problem; the user-data pointer is
        // `nlp`, which outlives the call and is only read (interior
        // mutability through Cell/RefCell on this thread) by the callbacks
        // during it; the callbacks never store it.
        unsafe {
            sys::cnlp_set_intermediate_callback(problem.0, Some(cb_intermediate));
        }
        // SAFETY: as above.
        let res = unsafe { sys::cnlp_solve(problem.0, nlp as *const Nlp<'_> as *mut c_void) };
        let n = nlp.n;
        // SAFETY: `res.data.x` points to the problem's solution vector of `n`
        // values (allocated in get_nlp_info, filled by finalize_solution, or
        // zeros when the solve stopped earlier) and `res.data.mult_g` to its
        // `m = 1` multipliers; both live until `cnlp_free_problem`, which
        // runs when `problem` drops after these copies.
        let (y, lambda) = unsafe {
            if res.data.x.is_null() || res.data.mult_g.is_null() {
                (vec![f64::NAN; n], f64::NAN)
            } else {
                (
                    std::slice::from_raw_parts(res.data.x, n).to_vec(),
                    *res.data.mult_g,
                )
            }
        };
        Ok((res.status, y, lambda))
    }
}

/// Owns a `CNLP_ProblemPtr`; frees it on drop.
struct Problem(sys::CNLP_ProblemPtr);

impl Problem {
    fn option_str(&self, key: &str, value: &str) -> Result<(), SolveError> {
        let (k, v) = (cstring(key), cstring(value));
        // SAFETY: live problem; both strings are NUL-terminated and outlive
        // the call (IPOPT copies them).
        let ok = unsafe { sys::cnlp_add_str_option(self.0, k.as_ptr(), v.as_ptr()) };
        option_result(ok, key)
    }

    fn option_num(&self, key: &str, value: f64) -> Result<(), SolveError> {
        let k = cstring(key);
        // SAFETY: live problem; NUL-terminated key that outlives the call.
        let ok = unsafe { sys::cnlp_add_num_option(self.0, k.as_ptr(), value) };
        option_result(ok, key)
    }

    fn option_int(&self, key: &str, value: i32) -> Result<(), SolveError> {
        let k = cstring(key);
        // SAFETY: live problem; NUL-terminated key that outlives the call.
        let ok = unsafe { sys::cnlp_add_int_option(self.0, k.as_ptr(), value) };
        option_result(ok, key)
    }
}

impl Drop for Problem {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful cnlp_create_problem and
        // is freed exactly once, here.
        unsafe { sys::cnlp_free_problem(self.0) }
    }
}

fn cstring(s: &str) -> CString {
    // Option names are our own literals, without NUL bytes.
    CString::new(s).unwrap_or_default()
}

fn option_result(ok: sys::CNLP_Bool, key: &str) -> Result<(), SolveError> {
    if ok != 0 {
        Ok(())
    } else {
        Err(SolveError::Ipopt {
            status: sys::CNLP_ApplicationReturnStatus_CNLP_INVALID_OPTION,
            detail: format!("IPOPT rejected option {key}"),
        })
    }
}

fn status_name(status: i32) -> &'static str {
    match status {
        0 => "solve succeeded",
        1 => "solved to acceptable level",
        2 => "infeasible problem detected",
        3 => "search direction becomes too small",
        4 => "diverging iterates",
        5 => "user requested stop",
        6 => "feasible point found",
        -1 => "maximum iterations exceeded",
        -2 => "restoration failed",
        -3 => "error in step computation",
        -4 => "maximum CPU time exceeded",
        -10 => "not enough degrees of freedom",
        -11 => "invalid problem definition",
        -12 => "invalid option",
        -13 => "invalid number detected",
        -100 => "unrecoverable exception",
        -101 => "non-IPOPT exception thrown",
        -102 => "insufficient memory",
        _ => "internal error",
    }
}

// ---------------------------------------------------------------------------
// Callbacks. Each one recovers `&Nlp` from the user-data pointer, runs its
// body under `catch_unwind` and answers 0 ("evaluation failed") on an error
// or a panic, so nothing unwinds into IPOPT.

/// Runs `body` with the problem data, converting errors and panics to 0.
///
/// # Safety
/// `user_data` must be the `*const Nlp` passed to `cnlp_solve` by
/// [`IpoptSolver::run`], alive for the duration of the call.
unsafe fn guarded(
    user_data: sys::CNLP_UserDataPtr,
    body: impl FnOnce(&Nlp<'_>) -> Result<(), String>,
) -> sys::CNLP_Bool {
    if user_data.is_null() {
        return 0;
    }
    // SAFETY: guaranteed by the caller (see above); only shared access.
    let nlp = unsafe { &*(user_data as *const Nlp<'_>) };
    match catch_unwind(AssertUnwindSafe(|| body(nlp))) {
        Ok(Ok(())) => 1,
        Ok(Err(msg)) => {
            nlp.fail(msg);
            0
        }
        Err(_) => {
            nlp.fail("a model panicked".to_string());
            0
        }
    }
}

/// Converts IPOPT's `(n, pointer)` into a length, rejecting nonsense.
fn len(n: sys::CNLP_Index, nlp: &Nlp<'_>) -> Result<usize, String> {
    match usize::try_from(n) {
        Ok(v) if v == nlp.n => Ok(v),
        _ => Err(format!("IPOPT passed n = {n}, expected {}", nlp.n)),
    }
}

unsafe extern "C" fn cb_sizes(
    n: *mut sys::CNLP_Index,
    m: *mut sys::CNLP_Index,
    nnz_jac_g: *mut sys::CNLP_Index,
    nnz_h_lag: *mut sys::CNLP_Index,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes our user data and four valid out-pointers.
    unsafe {
        guarded(user_data, |nlp| {
            let k = nlp.n as sys::CNLP_Index; // checked to fit in run()
            *n = k;
            *m = 1;
            *nnz_jac_g = k;
            *nnz_h_lag = k;
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_init(
    n: sys::CNLP_Index,
    init_x: sys::CNLP_Bool,
    x: *mut sys::CNLP_Number,
    init_z: sys::CNLP_Bool,
    z_l: *mut sys::CNLP_Number,
    z_u: *mut sys::CNLP_Number,
    m: sys::CNLP_Index,
    init_lambda: sys::CNLP_Bool,
    lambda: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes our user data and, for each flag that is set,
    // arrays to fill: `x`, `z_l`, `z_u` of `n` values, `lambda` of `m = 1`.
    // It asks for multipliers only with warm_start_init_point, which we set
    // only when `nlp.warm` is present.
    unsafe {
        guarded(user_data, |nlp| {
            let n = len(n, nlp)?;
            if init_x != 0 {
                let x = std::slice::from_raw_parts_mut(x, n);
                x.copy_from_slice(&nlp.start);
            }
            if init_z != 0 || init_lambda != 0 {
                let w = nlp.warm.as_ref().ok_or("IPOPT asked for multipliers")?;
                if init_z != 0 {
                    std::slice::from_raw_parts_mut(z_l, n).copy_from_slice(&w.z);
                    std::slice::from_raw_parts_mut(z_u, n).fill(0.0);
                }
                if init_lambda != 0 {
                    if m != 1 {
                        return Err(format!("IPOPT passed m = {m}"));
                    }
                    *lambda = w.lambda;
                }
            }
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_bounds(
    n: sys::CNLP_Index,
    x_l: *mut sys::CNLP_Number,
    x_u: *mut sys::CNLP_Number,
    m: sys::CNLP_Index,
    g_l: *mut sys::CNLP_Number,
    g_u: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes arrays of `n` (variables) and `m = 1`
    // (constraints) values to fill.
    unsafe {
        guarded(user_data, |nlp| {
            let n = len(n, nlp)?;
            if m != 1 {
                return Err(format!("IPOPT passed m = {m}"));
            }
            std::slice::from_raw_parts_mut(x_l, n).fill(0.0);
            // No upper bound: y_p ≤ 1 follows from Σ y = 1 and y ≥ 0, and
            // stating it would only add complementarity error (μ / (1 − y))
            // for a PU that takes nearly everything.
            std::slice::from_raw_parts_mut(x_u, n).fill(2e19);
            *g_l = 1.0;
            *g_u = 1.0;
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_eval_f(
    n: sys::CNLP_Index,
    x: *const sys::CNLP_Number,
    _new_x: sys::CNLP_Bool,
    obj_value: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes `n` variable values and one out-value.
    unsafe {
        guarded(user_data, |nlp| {
            let y = std::slice::from_raw_parts(x, len(n, nlp)?);
            let mut f = 0.0;
            for (p, &yp) in y.iter().enumerate() {
                f += nlp.phi_over_w(p, yp)?;
            }
            *obj_value = f * nlp.inv_tau;
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_eval_grad_f(
    n: sys::CNLP_Index,
    x: *const sys::CNLP_Number,
    _new_x: sys::CNLP_Bool,
    grad_f: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes `n` variable values and an `n`-value gradient.
    unsafe {
        guarded(user_data, |nlp| {
            let n = len(n, nlp)?;
            let y = std::slice::from_raw_parts(x, n);
            let g = std::slice::from_raw_parts_mut(grad_f, n);
            for p in 0..n {
                g[p] = nlp.grad(p, y[p])? * nlp.inv_tau;
            }
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_eval_g(
    n: sys::CNLP_Index,
    x: *const sys::CNLP_Number,
    _new_x: sys::CNLP_Bool,
    _m: sys::CNLP_Index,
    g: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes `n` variable values and `m = 1` out-values.
    unsafe {
        guarded(user_data, |nlp| {
            let y = std::slice::from_raw_parts(x, len(n, nlp)?);
            *g = y.iter().sum();
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_eval_jac_g(
    n: sys::CNLP_Index,
    _x: *const sys::CNLP_Number,
    _new_x: sys::CNLP_Bool,
    _m: sys::CNLP_Index,
    nele_jac: sys::CNLP_Index,
    i_row: *mut sys::CNLP_Index,
    j_col: *mut sys::CNLP_Index,
    values: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes either the two index arrays (structure query) or
    // the value array (values query), each of `nele_jac = n` entries.
    unsafe {
        guarded(user_data, |nlp| {
            let n = len(n, nlp)?;
            if nele_jac as usize != n {
                return Err(format!("IPOPT passed nele_jac = {nele_jac}"));
            }
            if values.is_null() {
                let rows = std::slice::from_raw_parts_mut(i_row, n);
                let cols = std::slice::from_raw_parts_mut(j_col, n);
                for (p, (r, c)) in rows.iter_mut().zip(cols).enumerate() {
                    *r = 0;
                    *c = p as sys::CNLP_Index;
                }
            } else {
                std::slice::from_raw_parts_mut(values, n).fill(1.0);
            }
            Ok(())
        })
    }
}

unsafe extern "C" fn cb_eval_h(
    n: sys::CNLP_Index,
    x: *const sys::CNLP_Number,
    _new_x: sys::CNLP_Bool,
    obj_factor: sys::CNLP_Number,
    _m: sys::CNLP_Index,
    _lambda: *const sys::CNLP_Number,
    _new_lambda: sys::CNLP_Bool,
    nele_hess: sys::CNLP_Index,
    i_row: *mut sys::CNLP_Index,
    j_col: *mut sys::CNLP_Index,
    values: *mut sys::CNLP_Number,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: as for the Jacobian: structure (index arrays) or values
    // (value array plus `n` variable values), `nele_hess = n` entries (the
    // diagonal, which is its own lower triangle).
    unsafe {
        guarded(user_data, |nlp| {
            let n = len(n, nlp)?;
            if nele_hess as usize != n {
                return Err(format!("IPOPT passed nele_hess = {nele_hess}"));
            }
            if values.is_null() {
                let rows = std::slice::from_raw_parts_mut(i_row, n);
                let cols = std::slice::from_raw_parts_mut(j_col, n);
                for (p, (r, c)) in rows.iter_mut().zip(cols).enumerate() {
                    *r = p as sys::CNLP_Index;
                    *c = p as sys::CNLP_Index;
                }
            } else {
                let y = std::slice::from_raw_parts(x, n);
                let h = std::slice::from_raw_parts_mut(values, n);
                let k = obj_factor * nlp.inv_tau;
                for p in 0..n {
                    h[p] = k * nlp.hess(p, y[p])?;
                }
            }
            Ok(())
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cb_intermediate(
    _alg_mod: sys::CNLP_AlgorithmMode,
    iter_count: sys::CNLP_Index,
    _obj_value: sys::CNLP_Number,
    _inf_pr: sys::CNLP_Number,
    _inf_du: sys::CNLP_Number,
    _mu: sys::CNLP_Number,
    _d_norm: sys::CNLP_Number,
    _regularization_size: sys::CNLP_Number,
    _alpha_du: sys::CNLP_Number,
    _alpha_pr: sys::CNLP_Number,
    _ls_trials: sys::CNLP_Index,
    user_data: sys::CNLP_UserDataPtr,
) -> sys::CNLP_Bool {
    // SAFETY: IPOPT passes our user data.
    unsafe {
        guarded(user_data, |nlp| {
            nlp.iterations.set(iter_count);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinearModel;

    #[test]
    fn linear_models_match_the_closed_form() {
        let (a, b, c) = (
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 2.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 5.0,
            },
        );
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        let (d, st) = IpoptSolver::default().solve_with_stats(&ms, 80.0).unwrap();
        assert!(st.iterations > 0);
        for (x, want) in d.units.iter().zip([10.0, 20.0, 50.0]) {
            assert!((x - want).abs() < 1e-7, "{d:?}");
        }
        assert!((d.finish_time - 10.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn excluded_pu_and_multiplier_sign() {
        let (a, b, c) = (
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 0.0,
                rate: 1.0,
            },
            LinearModel {
                fixed: 6.0,
                rate: 100.0,
            },
        );
        let ms: [&dyn TimeModel; 3] = [&a, &b, &c];
        let d = IpoptSolver::default().solve(&ms, 10.0).unwrap();
        assert!(d.units[2] < 1e-7, "{d:?}");
        assert!((d.finish_time - 5.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn panicking_model_is_reported_not_unwound() {
        let a = LinearModel {
            fixed: 0.0,
            rate: 1.0,
        };
        // A panic inside a callback becomes a failed evaluation.
        struct LateBoom;
        impl TimeModel for LateBoom {
            fn time(&self, x: f64) -> f64 {
                if x == 0.5 { 1.0 } else { panic!("late boom") }
            }
            fn slope(&self, _x: f64) -> f64 {
                1.0
            }
        }
        let c = LateBoom;
        let ms: [&dyn TimeModel; 2] = [&a, &c];
        match IpoptSolver::default().solve(&ms, 1.0) {
            Err(SolveError::Ipopt { detail, .. }) => {
                assert!(detail.contains("panicked"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}
