//! `plb app blackscholes`: closed-form Black-Scholes prices of n European
//! call and put options (single precision).
//!
//! Unit of work: one option (W = n). Each block registers its slice of the
//! five arrays (spot, strike, years: read; call, put: read-write) as vector
//! handles. The codelet *adds* the prices to the outputs, which start at
//! zero: a lost block leaves zeros and a repeated one doubles its prices
//! (every option has a call or a put worth well above the tolerance).
//!
//! Inputs from the seed: see `options.rs` (shared with `binomial`).
//!
//! Verification: every option, call and put, against a double-precision
//! reference whose normal CDF is libm's `erfc` (the codelet uses a
//! polynomial): `|got - ref| <= 1e-3 + 1e-4·|ref|`.
//!
//! Codelet: `codelets/blackscholes.c` (CPU: a loop gcc vectorises; OpenCL:
//! one work-item per option; CUDA: `blackscholes_cuda.cu` with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets (codelets/*.c) and its OpenCL host code are called through FFI
// (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use starpu_sys as sys;

use super::options::Book;
use super::{Data, Handle, Verification, Workload};

unsafe extern "C" {
    static mut plb_bs_cl: sys::starpu_codelet;
    fn plb_bs_init() -> c_int;
    fn plb_bs_fini();
    /// libm's complementary error function.
    fn erfc(x: f64) -> f64;
}

const ABS_TOL: f64 = 1e-3;
const REL_TOL: f64 = 1e-4;

pub struct BlackScholes {
    book: Book,
}

/// Builds the workload of `n` options from `seed`.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    Ok(Box::new(BlackScholes {
        book: Book::new("blackscholes", n, 28, seed)?,
    }))
}

/// Standard normal CDF.
fn normal_cdf(x: f64) -> f64 {
    // SAFETY: erfc is a pure libm function.
    0.5 * unsafe { erfc(-x / std::f64::consts::SQRT_2) }
}

/// (call, put) in double precision.
pub fn reference(spot: f64, strike: f64, years: f64, r: f64, v: f64) -> (f64, f64) {
    let sqrt_t = years.sqrt();
    let d1 = ((spot / strike).ln() + (r + 0.5 * v * v) * years) / (v * sqrt_t);
    let d2 = d1 - v * sqrt_t;
    let discounted = strike * (-r * years).exp();
    let call = spot * normal_cdf(d1) - discounted * normal_cdf(d2);
    let put = discounted * normal_cdf(-d2) - spot * normal_cdf(-d1);
    (call, put)
}

impl Workload for BlackScholes {
    fn units(&self) -> u64 {
        self.book.len() as u64
    }

    super::c_codelet!("blackscholes", plb_bs_cl, plb_bs_init, plb_bs_fini);

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        self.book.register_block("blackscholes", data, offset, len)
    }

    fn params(&self) -> *const c_void {
        self.book.params()
    }

    fn work(&self, units: u64) -> f64 {
        units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("Moptions/s", 1e6)
    }

    fn verify(&self) -> Verification {
        self.book
            .verify(reference, "double precision", ABS_TOL, REL_TOL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_satisfies_put_call_parity() {
        let (s, k, t, r, v) = (20.0, 25.0, 2.0, 0.02, 0.3);
        let (call, put) = reference(s, k, t, r, v);
        assert!((call - put - (s - k * (-r * t).exp())).abs() < 1e-12);
        // Known value (at the money, r = 0, T = 1, v = 0.2): 0.0796557 S.
        let (atm, _) = reference(100.0, 100.0, 1.0, 0.0, 0.2);
        assert!((atm - 7.965_567).abs() < 1e-5, "{atm}");
    }
}
