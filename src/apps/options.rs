//! What the option-pricing applications (`blackscholes`, `binomial`)
//! share: `n` European options from a seed, the call and put outputs the
//! codelets *add* to (they start at zero, so a lost block leaves zeros and
//! a repeated one doubles its prices), the codelet parameters, each block's
//! five vector handles, and the check against a double-precision pricer.
//!
//! Inputs from the seed: spot in [5, 30), strike in [1, 100), years in
//! [0.25, 10); riskless rate 2 %, volatility 30 % (the ranges of the
//! classic GPU benchmark).

// Unsafe code is denied in the workspace; allowed here for the data
// registration of the blocks (every unsafe block has a `// SAFETY:`
// comment).
#![allow(unsafe_code)]

use std::ffi::c_void;

use super::{Data, Handle, Verification, input_rng};

/// `struct plb_bs_params` of codelets/blackscholes.c and `struct
/// plb_bin_params` of codelets/binomial.c (the same two fields).
#[repr(C)]
struct Params {
    riskfree: f32,
    volatility: f32,
}

/// Riskless rate.
pub const RISKFREE: f32 = 0.02;
/// Volatility.
pub const VOLATILITY: f32 = 0.30;

/// The options of one run and their prices.
pub struct Book {
    n: usize,
    spot: Vec<f32>,
    strike: Vec<f32>,
    years: Vec<f32>,
    call: Vec<f32>,
    put: Vec<f32>,
    params: Box<Params>,
}

impl Book {
    /// `n` options (at most `2^max_log2`) from `seed`; `app` names the
    /// application in errors.
    pub fn new(app: &str, n: u64, max_log2: u32, seed: u64) -> Result<Book, String> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n > 0 && n <= 1 << max_log2)
            .ok_or_else(|| format!("{app}: --n {n} out of range (1..=2^{max_log2})"))?;
        let random = |stream, lo, hi| {
            let mut rng = input_rng(seed, stream);
            (0..n)
                .map(|_| rng.uniform_f32(lo, hi))
                .collect::<Vec<f32>>()
        };
        Ok(Book {
            n,
            spot: random(1, 5.0, 30.0),
            strike: random(2, 1.0, 100.0),
            years: random(3, 0.25, 10.0),
            call: super::zeroed(n),
            put: super::zeroed(n),
            params: Box::new(Params {
                riskfree: RISKFREE,
                volatility: VOLATILITY,
            }),
        })
    }

    /// Options.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Registers options `[offset, offset + len)` of the five arrays
    /// (spot, strike, years: read; call, put: read-write), in the codelets'
    /// buffer order.
    pub fn register_block(
        &mut self,
        app: &str,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (off, len) = (offset as usize, len as usize);
        if off + len > self.n {
            return Err(format!(
                "{app}: block {off}+{len} beyond {} options",
                self.n
            ));
        }
        let mut handles = Vec::with_capacity(5);
        for v in [
            &mut self.spot,
            &mut self.strike,
            &mut self.years,
            &mut self.call,
            &mut self.put,
        ] {
            // SAFETY: [off, off+len) is inside every array (checked above);
            // the arrays are never resized and not touched until every
            // handle is unregistered; blocks are disjoint.
            handles.push(unsafe { data.vector(v.as_mut_ptr().add(off), len)? });
        }
        Ok(handles)
    }

    /// What the codelet finds in `plb_app_task.params`.
    pub fn params(&self) -> *const c_void {
        (&raw const *self.params).cast()
    }

    /// Every option, call and put, against `reference(spot, strike, years,
    /// r, v) -> (call, put)` (named `against` in the report): an error
    /// above `abs_tol + rel_tol·|ref|`, or NaN, is wrong.
    pub fn verify(
        &self,
        reference: impl Fn(f64, f64, f64, f64, f64) -> (f64, f64),
        against: &str,
        abs_tol: f64,
        rel_tol: f64,
    ) -> Verification {
        let (r, v) = (f64::from(RISKFREE), f64::from(VOLATILITY));
        let mut bad = 0usize;
        let mut worst = (0.0f64, 0usize);
        for i in 0..self.n {
            let (call, put) = reference(
                f64::from(self.spot[i]),
                f64::from(self.strike[i]),
                f64::from(self.years[i]),
                r,
                v,
            );
            for (got, want) in [(self.call[i], call), (self.put[i], put)] {
                let err = (f64::from(got) - want).abs();
                if err.is_nan() || err > abs_tol + rel_tol * want.abs() {
                    bad += 1;
                }
                if err.is_nan() || err > worst.0 {
                    worst = (if err.is_nan() { f64::INFINITY } else { err }, i);
                }
            }
        }
        Verification {
            ok: bad == 0,
            detail: format!(
                "{} options x (call, put) vs {against}: {bad} wrong, max abs err {:.2e} at {}, tol {abs_tol:.0e} + {rel_tol:.0e}·|ref|",
                self.n, worst.0, worst.1
            ),
        }
    }
}
