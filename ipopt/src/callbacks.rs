//! The `extern "C"` functions IPOPT calls during `cnlp_solve`. Each one
//! recovers the solve's [`Context`] from the user-data pointer, checks
//! IPOPT's sizes against the problem's, turns the raw arrays into slices of
//! those lengths and calls the [`crate::Nlp`] method under `catch_unwind`:
//! an `Err` or a panic answers 0 ("evaluation failed"), so nothing unwinds
//! into IPOPT.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use ipopt_sys as sys;

use crate::solve::Context;

type Bool = sys::CNLP_Bool;
type Index = sys::CNLP_Index;
type Number = sys::CNLP_Number;
type UserData = sys::CNLP_UserDataPtr;

/// `len` values at `ptr` as a slice (empty for `len == 0`, whatever `ptr`);
/// an error for a null `ptr` with `len > 0`.
///
/// # Safety
/// A non-null `ptr` must point to `len` initialised values, valid for reads
/// and not written through any other pointer during `'a`.
pub(crate) unsafe fn slice<'a, T>(
    ptr: *const T,
    len: usize,
    what: &str,
) -> Result<&'a [T], String> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(format!("IPOPT passed no {what}"));
    }
    // SAFETY: non-null and valid for `len` reads (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// As [`slice()`], mutable.
///
/// # Safety
/// A non-null `ptr` must point to `len` values, valid for reads and writes
/// and not accessed through any other pointer during `'a`.
unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Result<&'a mut [T], String> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(format!("IPOPT passed no {what}"));
    }
    // SAFETY: non-null, valid and exclusive for `len` values (the caller's
    // contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Writes `value` through an out-pointer, or fails on a null one.
///
/// # Safety
/// A non-null `ptr` must be valid for a write.
unsafe fn put<T>(ptr: *mut T, value: T, what: &str) -> Result<(), String> {
    if ptr.is_null() {
        return Err(format!("IPOPT passed no {what}"));
    }
    // SAFETY: non-null and valid for a write (the caller's contract).
    unsafe { ptr.write(value) };
    Ok(())
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "no message"
    }
}

/// Runs `body` on the solve's context, converting an error or a panic into
/// 0 and keeping its message.
///
/// # Safety
/// `user_data` must be null or the `*const Context` that `Problem::solve`
/// passed to `cnlp_solve`, alive for the duration of the call.
unsafe fn guarded(
    user_data: UserData,
    what: &str,
    body: impl FnOnce(&Context<'_>) -> Result<(), String>,
) -> Bool {
    if user_data.is_null() {
        return 0;
    }
    // SAFETY: guaranteed by the caller (see above); only shared access.
    let cx = unsafe { &*(user_data as *const Context<'_>) };
    match catch_unwind(AssertUnwindSafe(|| body(cx))) {
        Ok(Ok(())) => 1,
        Ok(Err(msg)) => {
            cx.fail(msg);
            0
        }
        Err(payload) => {
            cx.fail(format!(
                "{what} panicked: {}",
                panic_message(payload.as_ref())
            ));
            0
        }
    }
}

// In every callback below, `user_data` is what `Problem::solve` passed to
// `cnlp_solve` (IPOPT hands it back unchanged), which is `guarded`'s
// contract, and each array IPOPT passes is valid for the length its
// documentation gives, which the callbacks check against the problem's
// sizes before making slices; arrays passed in one call never overlap.

pub(crate) unsafe extern "C" fn sizes(
    n: *mut Index,
    m: *mut Index,
    nnz_jac_g: *mut Index,
    nnz_h_lag: *mut Index,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; four out-pointers to IPOPT's locals. The
    // counts fit in `Index` (checked by `Context::new`).
    unsafe {
        guarded(user_data, "sizes", |cx| {
            put(n, cx.n as Index, "n")?;
            put(m, cx.m as Index, "m")?;
            put(nnz_jac_g, cx.jac_rows.len() as Index, "nnz_jac_g")?;
            put(nnz_h_lag, cx.hess_rows.len() as Index, "nnz_h_lag")?;
            cx.sized.set(true);
            Ok(())
        })
    }
}

pub(crate) unsafe extern "C" fn init(
    n: Index,
    init_x: Bool,
    x: *mut Number,
    init_z: Bool,
    z_l: *mut Number,
    z_u: *mut Number,
    m: Index,
    init_lambda: Bool,
    lambda: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; for each flag set, arrays to fill: `x`,
    // `z_l`, `z_u` of `n` values, `lambda` of `m`.
    unsafe {
        guarded(user_data, "starting point", |cx| {
            let (n, m) = (cx.check_n(n)?, cx.check_m(m)?);
            if init_x != 0 {
                cx.nlp.initial_point(slice_mut(x, n, "x")?);
            }
            if init_z != 0 {
                cx.nlp.initial_bound_multipliers(
                    slice_mut(z_l, n, "z_L")?,
                    slice_mut(z_u, n, "z_U")?,
                )?;
            }
            if init_lambda != 0 {
                cx.nlp
                    .initial_constraint_multipliers(slice_mut(lambda, m, "lambda")?)?;
            }
            Ok(())
        })
    }
}

pub(crate) unsafe extern "C" fn bounds(
    n: Index,
    x_l: *mut Number,
    x_u: *mut Number,
    m: Index,
    g_l: *mut Number,
    g_u: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; arrays of `n` (variables) and `m`
    // (constraints) values to fill.
    unsafe {
        guarded(user_data, "bounds", |cx| {
            let (n, m) = (cx.check_n(n)?, cx.check_m(m)?);
            cx.nlp.bounds(
                slice_mut(x_l, n, "x_L")?,
                slice_mut(x_u, n, "x_U")?,
                slice_mut(g_l, m, "g_L")?,
                slice_mut(g_u, m, "g_U")?,
            );
            Ok(())
        })
    }
}

pub(crate) unsafe extern "C" fn eval_f(
    n: Index,
    x: *const Number,
    _new_x: Bool,
    obj_value: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; `n` variable values and one out-value.
    unsafe {
        guarded(user_data, "objective", |cx| {
            let n = cx.check_n(n)?;
            let f = cx.nlp.objective(slice(x, n, "x")?)?;
            put(obj_value, f, "obj_value")
        })
    }
}

pub(crate) unsafe extern "C" fn eval_grad_f(
    n: Index,
    x: *const Number,
    _new_x: Bool,
    grad_f: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; `n` variable values and an `n`-value
    // gradient.
    unsafe {
        guarded(user_data, "gradient", |cx| {
            let n = cx.check_n(n)?;
            cx.nlp
                .gradient(slice(x, n, "x")?, slice_mut(grad_f, n, "grad_f")?)
        })
    }
}

pub(crate) unsafe extern "C" fn eval_g(
    n: Index,
    x: *const Number,
    _new_x: Bool,
    m: Index,
    g: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; `n` variable values and `m` out-values.
    unsafe {
        guarded(user_data, "constraints", |cx| {
            let (n, m) = (cx.check_n(n)?, cx.check_m(m)?);
            cx.nlp.constraints(slice(x, n, "x")?, slice_mut(g, m, "g")?)
        })
    }
}

pub(crate) unsafe extern "C" fn eval_jac_g(
    n: Index,
    x: *const Number,
    _new_x: Bool,
    m: Index,
    nele_jac: Index,
    i_row: *mut Index,
    j_col: *mut Index,
    values: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above; either the two index arrays (structure
    // query, `values` null) or `n` variable values and the value array,
    // each of `nele_jac` entries.
    unsafe {
        guarded(user_data, "Jacobian", |cx| {
            let n = cx.check_n(n)?;
            cx.check_m(m)?;
            let nnz = cx.jac_rows.len();
            if usize::try_from(nele_jac) != Ok(nnz) {
                return Err(format!(
                    "IPOPT passed nele_jac = {nele_jac}, expected {nnz}"
                ));
            }
            if values.is_null() {
                slice_mut(i_row, nnz, "iRow")?.copy_from_slice(&cx.jac_rows);
                slice_mut(j_col, nnz, "jCol")?.copy_from_slice(&cx.jac_cols);
                Ok(())
            } else {
                cx.nlp
                    .jacobian(slice(x, n, "x")?, slice_mut(values, nnz, "values")?)
            }
        })
    }
}

pub(crate) unsafe extern "C" fn eval_h(
    n: Index,
    x: *const Number,
    _new_x: Bool,
    obj_factor: Number,
    m: Index,
    lambda: *const Number,
    _new_lambda: Bool,
    nele_hess: Index,
    i_row: *mut Index,
    j_col: *mut Index,
    values: *mut Number,
    user_data: UserData,
) -> Bool {
    // SAFETY: as for the Jacobian, plus `m` constraint multipliers with the
    // values query.
    unsafe {
        guarded(user_data, "Hessian", |cx| {
            let (n, m) = (cx.check_n(n)?, cx.check_m(m)?);
            let nnz = cx.hess_rows.len();
            if usize::try_from(nele_hess) != Ok(nnz) {
                return Err(format!(
                    "IPOPT passed nele_hess = {nele_hess}, expected {nnz}"
                ));
            }
            if values.is_null() {
                slice_mut(i_row, nnz, "iRow")?.copy_from_slice(&cx.hess_rows);
                slice_mut(j_col, nnz, "jCol")?.copy_from_slice(&cx.hess_cols);
                Ok(())
            } else {
                cx.nlp.hessian(
                    slice(x, n, "x")?,
                    obj_factor,
                    slice(lambda, m, "lambda")?,
                    slice_mut(values, nnz, "values")?,
                )
            }
        })
    }
}

pub(crate) unsafe extern "C" fn intermediate(
    _alg_mod: sys::CNLP_AlgorithmMode,
    iter_count: Index,
    _obj_value: Number,
    _inf_pr: Number,
    _inf_du: Number,
    _mu: Number,
    _d_norm: Number,
    _regularization_size: Number,
    _alpha_du: Number,
    _alpha_pr: Number,
    _ls_trials: Index,
    user_data: UserData,
) -> Bool {
    // SAFETY: user data as above.
    unsafe {
        guarded(user_data, "intermediate callback", |cx| {
            cx.iterations.set(iter_count);
            Ok(())
        })
    }
}
