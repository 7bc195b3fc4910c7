//! [`solve`]: creates the IPOPT problem, sets the options, runs IPOPT with
//! the callbacks of `callbacks.rs` and copies the solution out.

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_void};
use std::fmt;
use std::sync::{Mutex, PoisonError};

use ipopt_sys as sys;

use crate::callbacks;
use crate::{Nlp, OptionValue, Options, Status};

/// IPOPT and MUMPS keep global state: one solve at a time per process.
static IPOPT_LOCK: Mutex<()> = Mutex::new(());

/// Why [`solve`] could not run IPOPT at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The sizes or the derivative structure of the [`Nlp`] are invalid (an
    /// index out of range, an upper-triangle Hessian entry, more than
    /// `i32::MAX` variables, constraints or entries).
    InvalidProblem(String),
    /// `cnlp_create_problem` failed with this code.
    CreateProblem(u32),
    /// IPOPT rejected this option (unknown name, wrong type, out of range,
    /// or a NUL byte).
    InvalidOption(String),
}

impl Error {
    /// The IPOPT status that stands for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::InvalidProblem(_) => Status::INVALID_PROBLEM_DEFINITION,
            Error::CreateProblem(_) => Status::INTERNAL_ERROR,
            Error::InvalidOption(_) => Status::INVALID_OPTION,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidProblem(why) => write!(f, "invalid problem: {why}"),
            Error::CreateProblem(code) => write!(f, "cnlp_create_problem failed ({code})"),
            Error::InvalidOption(name) => write!(f, "IPOPT rejected option {name}"),
        }
    }
}

impl std::error::Error for Error {}

/// The end of a solve, whatever its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// IPOPT's return status; the values below are its final iterate only
    /// when [`Status::is_solved`].
    pub status: Status,
    /// Final point (`n` values; zeros if IPOPT stopped before iterating,
    /// NaN if it never asked for the problem's sizes).
    pub x: Vec<f64>,
    /// Multipliers of the lower variable bounds (`n`, same conventions).
    pub z_lower: Vec<f64>,
    /// Multipliers of the upper variable bounds (`n`).
    pub z_upper: Vec<f64>,
    /// Constraint multipliers (`m`), IPOPT's sign convention: the
    /// Lagrangian is `f(x) + λᵀg(x) − z_Lᵀx + z_Uᵀx`.
    pub lambda: Vec<f64>,
    /// Final objective value (0 if IPOPT reported none).
    pub objective: f64,
    /// Iterations performed (IPOPT's count at its last iteration).
    pub iterations: i32,
    /// The first failed evaluation (an [`Nlp`] method's `Err` or panic).
    pub failure: Option<String>,
}

/// What the callbacks see through IPOPT's user-data pointer: the problem,
/// its checked sizes and structure, and what the solve records.
pub(crate) struct Context<'a> {
    pub(crate) nlp: &'a dyn Nlp,
    pub(crate) n: usize,
    pub(crate) m: usize,
    pub(crate) jac_rows: Vec<sys::CNLP_Index>,
    pub(crate) jac_cols: Vec<sys::CNLP_Index>,
    pub(crate) hess_rows: Vec<sys::CNLP_Index>,
    pub(crate) hess_cols: Vec<sys::CNLP_Index>,
    pub(crate) failure: RefCell<Option<String>>,
    pub(crate) iterations: Cell<i32>,
    /// Set once IPOPT asked for the sizes: from then on the problem's
    /// solution vectors hold `n` and `m` values.
    pub(crate) sized: Cell<bool>,
}

fn index(v: usize, what: &str) -> Result<sys::CNLP_Index, Error> {
    sys::CNLP_Index::try_from(v).map_err(|_| {
        Error::InvalidProblem(format!("{what} = {v} is more than IPOPT's indices hold"))
    })
}

/// Checks a sparsity structure against `rows × cols` and splits it.
fn structure(
    entries: Vec<(usize, usize)>,
    rows: usize,
    cols: usize,
    lower: bool,
    what: &str,
) -> Result<(Vec<sys::CNLP_Index>, Vec<sys::CNLP_Index>), Error> {
    index(entries.len(), what)?;
    let mut r = Vec::with_capacity(entries.len());
    let mut c = Vec::with_capacity(entries.len());
    for (i, j) in entries {
        if i >= rows || j >= cols || (lower && j > i) {
            return Err(Error::InvalidProblem(format!(
                "{what} entry ({i}, {j}) is outside the {}",
                if lower { "lower triangle" } else { "matrix" }
            )));
        }
        // Both fit: bounded by n or m, which were checked.
        r.push(i as sys::CNLP_Index);
        c.push(j as sys::CNLP_Index);
    }
    Ok((r, c))
}

impl<'a> Context<'a> {
    fn new(nlp: &'a dyn Nlp) -> Result<Context<'a>, Error> {
        let (n, m) = (nlp.num_variables(), nlp.num_constraints());
        index(n, "n")?;
        index(m, "m")?;
        let (jac_rows, jac_cols) = structure(nlp.jacobian_structure(), m, n, false, "Jacobian")?;
        let (hess_rows, hess_cols) = structure(nlp.hessian_structure(), n, n, true, "Hessian")?;
        Ok(Context {
            nlp,
            n,
            m,
            jac_rows,
            jac_cols,
            hess_rows,
            hess_cols,
            failure: RefCell::new(None),
            iterations: Cell::new(0),
            sized: Cell::new(false),
        })
    }

    /// Keeps the first failure message.
    pub(crate) fn fail(&self, msg: String) {
        let mut f = self.failure.borrow_mut();
        if f.is_none() {
            *f = Some(msg);
        }
    }

    /// IPOPT's `n` as a length, if it is the problem's.
    pub(crate) fn check_n(&self, n: sys::CNLP_Index) -> Result<usize, String> {
        match usize::try_from(n) {
            Ok(v) if v == self.n => Ok(v),
            _ => Err(format!("IPOPT passed n = {n}, expected {}", self.n)),
        }
    }

    /// IPOPT's `m` as a length, if it is the problem's.
    pub(crate) fn check_m(&self, m: sys::CNLP_Index) -> Result<usize, String> {
        match usize::try_from(m) {
            Ok(v) if v == self.m => Ok(v),
            _ => Err(format!("IPOPT passed m = {m}, expected {}", self.m)),
        }
    }
}

/// Solves `nlp` with `options` (see the crate documentation). Waits for any
/// other solve in the process to finish first.
pub fn solve(nlp: &dyn Nlp, options: &Options) -> Result<Solution, Error> {
    let cx = Context::new(nlp)?;
    let _lock = IPOPT_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    let problem = Problem::create()?;
    for (name, value) in options.iter() {
        problem.set(name, value)?;
    }
    Ok(problem.solve(&cx))
}

/// Owns a `CNLP_ProblemPtr`; frees it on drop.
struct Problem(sys::CNLP_ProblemPtr);

impl Problem {
    fn create() -> Result<Problem, Error> {
        let mut prob: sys::CNLP_ProblemPtr = std::ptr::null_mut();
        // SAFETY: `prob` is a valid out-pointer; every callback is an
        // `unsafe extern "C" fn` with exactly the signature the bindings
        // declare (checked by the compiler); index style 0 is C indexing, as
        // the structures use.
        let created = unsafe {
            sys::cnlp_create_problem(
                &mut prob,
                0,
                Some(callbacks::sizes),
                Some(callbacks::init),
                Some(callbacks::bounds),
                Some(callbacks::eval_f),
                Some(callbacks::eval_g),
                Some(callbacks::eval_grad_f),
                Some(callbacks::eval_jac_g),
                Some(callbacks::eval_h),
                None,
            )
        };
        // Owned (and freed on every path) as soon as it exists.
        let problem = (!prob.is_null()).then(|| Problem(prob));
        let problem = match problem {
            Some(p) if created == sys::CNLP_CreateProblemStatus_CNLP_SUCCESS => p,
            _ => return Err(Error::CreateProblem(created)),
        };
        // SAFETY: live problem; the callback has the declared signature.
        unsafe { sys::cnlp_set_intermediate_callback(problem.0, Some(callbacks::intermediate)) };
        Ok(problem)
    }

    fn set(&self, name: &str, value: &OptionValue) -> Result<(), Error> {
        let rejected = || Error::InvalidOption(name.to_string());
        let key = CString::new(name).map_err(|_| rejected())?;
        let ok = match value {
            OptionValue::Str(v) => {
                let v = CString::new(v.as_str()).map_err(|_| rejected())?;
                // SAFETY: live problem; both strings are NUL-terminated and
                // outlive the call (IPOPT copies them).
                unsafe { sys::cnlp_add_str_option(self.0, key.as_ptr(), v.as_ptr()) }
            }
            // SAFETY: live problem; NUL-terminated name that outlives the call.
            OptionValue::Num(v) => unsafe { sys::cnlp_add_num_option(self.0, key.as_ptr(), *v) },
            // SAFETY: as above.
            OptionValue::Int(v) => unsafe { sys::cnlp_add_int_option(self.0, key.as_ptr(), *v) },
        };
        if ok != 0 { Ok(()) } else { Err(rejected()) }
    }

    /// Runs IPOPT on `cx` and copies the solution out of the problem.
    fn solve(&self, cx: &Context<'_>) -> Solution {
        // SAFETY: live problem; the user-data pointer is `cx`, which
        // outlives the call; the callbacks only take shared references to
        // it (it records through Cell/RefCell), on this thread, during the
        // call, and never keep it.
        let res = unsafe { sys::cnlp_solve(self.0, cx as *const Context<'_> as *mut c_void) };
        let (n, m) = (cx.n, cx.m);
        let sized = cx.sized.get();
        let copy = |ptr: *const f64, len: usize| -> Vec<f64> {
            if !sized {
                return vec![f64::NAN; len];
            }
            // SAFETY: once the sizes callback has answered (n, m), the
            // problem's solution vectors were resized to them and `res.data`
            // points into them (`x`, `mult_x_L`, `mult_x_U`: n values,
            // `mult_g`: m; zeros until IPOPT's finalize_solution fills them).
            // They live until cnlp_free_problem, when `self` drops, after
            // these copies.
            unsafe { callbacks::slice(ptr, len, "solution") }
                .map_or_else(|_| vec![f64::NAN; len], <[f64]>::to_vec)
        };
        Solution {
            status: Status::from_code(res.status),
            x: copy(res.data.x, n),
            z_lower: copy(res.data.mult_x_L, n),
            z_upper: copy(res.data.mult_x_U, n),
            lambda: copy(res.data.mult_g, m),
            objective: res.obj_val,
            iterations: cx.iterations.get(),
            failure: cx.failure.borrow().clone(),
        }
    }
}

impl Drop for Problem {
    fn drop(&mut self) {
        // SAFETY: the pointer is the non-null problem cnlp_create_problem
        // returned (only `Problem::create` builds a `Problem`), freed exactly
        // once, here.
        unsafe { sys::cnlp_free_problem(self.0) }
    }
}

#[cfg(test)]
mod tests;
