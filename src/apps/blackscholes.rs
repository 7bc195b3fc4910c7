//! `plb app blackscholes`: closed-form Black-Scholes prices of n European
//! call and put options (single precision).
//!
//! Unit of work: one option (W = n). Each block registers its slice of the
//! five arrays (spot, strike, years: read; call, put: read-write) as vector
//! handles. The codelet *adds* the prices to the outputs, which start at
//! zero: a lost block leaves zeros and a repeated one doubles its prices
//! (every option has a call or a put worth well above the tolerance).
//!
//! Inputs from the seed: spot in [5, 30), strike in [1, 100), years in
//! [0.25, 10); riskless rate 2 %, volatility 30 % (the ranges of the
//! classic GPU benchmark).
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

use super::{Data, Handle, Verification, Workload, input_rng};

unsafe extern "C" {
    static mut plb_bs_cl: sys::starpu_codelet;
    fn plb_bs_init() -> c_int;
    fn plb_bs_fini();
    /// libm's complementary error function.
    fn erfc(x: f64) -> f64;
}

/// `struct plb_bs_params` of codelets/blackscholes.c.
#[repr(C)]
struct Params {
    riskfree: f32,
    volatility: f32,
}

const RISKFREE: f32 = 0.02;
const VOLATILITY: f32 = 0.30;
const ABS_TOL: f64 = 1e-3;
const REL_TOL: f64 = 1e-4;

pub struct BlackScholes {
    n: usize,
    spot: Vec<f32>,
    strike: Vec<f32>,
    years: Vec<f32>,
    call: Vec<f32>,
    put: Vec<f32>,
    params: Box<Params>,
}

/// Builds the workload of `n` options from `seed`.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 28)
        .ok_or_else(|| format!("blackscholes: --n {n} out of range (1..=2^28)"))?;
    let random = |stream, lo, hi| {
        let mut rng = input_rng(seed, stream);
        (0..n)
            .map(|_| rng.uniform_f32(lo, hi))
            .collect::<Vec<f32>>()
    };
    Ok(Box::new(BlackScholes {
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
        self.n as u64
    }

    super::c_codelet!("blackscholes", plb_bs_cl, plb_bs_init, plb_bs_fini);

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (off, len) = (offset as usize, len as usize);
        if off + len > self.n {
            return Err(format!(
                "blackscholes: block {off}+{len} beyond {} options",
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

    fn params(&self) -> *const c_void {
        (&raw const *self.params).cast()
    }

    fn work(&self, units: u64) -> f64 {
        units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("Moptions/s", 1e6)
    }

    fn verify(&self) -> Verification {
        let (r, v) = (f64::from(RISKFREE), f64::from(VOLATILITY));
        let mut bad = 0usize;
        let mut worst = 0.0f64;
        let mut worst_at = 0usize;
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
                let excess = err / (ABS_TOL + REL_TOL * want.abs());
                if excess.is_nan() || excess > 1.0 {
                    bad += 1;
                }
                if excess.is_nan() || err > worst {
                    worst = if excess.is_nan() { f64::INFINITY } else { err };
                    worst_at = i;
                }
            }
        }
        Verification {
            ok: bad == 0,
            detail: format!(
                "{} options x (call, put) vs double precision: {bad} wrong, max abs err {worst:.2e} at {worst_at}, tol {ABS_TOL:.0e} + {REL_TOL:.0e}·|ref|",
                self.n
            ),
        }
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
