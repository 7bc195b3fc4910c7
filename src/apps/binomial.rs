//! `plb app binomial`: European call and put prices of n options on a
//! Cox-Ross-Rubinstein binomial lattice of 254 time steps (single
//! precision; regular: every option costs the same).
//!
//! Unit of work: one option (W = n). Inputs, outputs and the add-to-zero
//! rule as `plb app blackscholes` (a lost block leaves zeros, a repeated
//! one doubles its prices; every option has a call or a put worth well
//! above the tolerance).
//!
//! Verification: every option, call and put, against the same lattice in
//! double precision (`plb_core::kernels::binomial`):
//! `|got - ref| <= 1e-3 + 1e-3·|ref|`.
//!
//! Codelet: `codelets/binomial.c` (CPU; OpenCL: one work-item per option;
//! CUDA: `binomial_cuda.cu` with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets are called through FFI (every unsafe block has a `// SAFETY:`
// comment).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use plb_core::kernels::binomial::{STEPS, price};
use starpu_sys as sys;

use super::{Data, Handle, Verification, Workload, input_rng};

unsafe extern "C" {
    static mut plb_bin_cl: sys::starpu_codelet;
    fn plb_bin_init() -> c_int;
    fn plb_bin_fini();
}

/// `struct plb_bin_params` of codelets/binomial.c.
#[repr(C)]
struct Params {
    riskfree: f32,
    volatility: f32,
}

const RISKFREE: f32 = 0.02;
const VOLATILITY: f32 = 0.30;
const ABS_TOL: f64 = 1e-3;
const REL_TOL: f64 = 1e-3;

pub struct Binomial {
    n: usize,
    inputs: [Vec<f32>; 3],
    call: Vec<f32>,
    put: Vec<f32>,
    params: Box<Params>,
}

/// Builds the workload of `n` options from `seed`.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 26)
        .ok_or_else(|| format!("binomial: --n {n} out of range (1..=2^26)"))?;
    let random = |stream, lo, hi| {
        let mut rng = input_rng(seed, stream);
        (0..n)
            .map(|_| rng.uniform_f32(lo, hi))
            .collect::<Vec<f32>>()
    };
    Ok(Box::new(Binomial {
        n,
        inputs: [
            random(1, 5.0, 30.0),
            random(2, 1.0, 100.0),
            random(3, 0.25, 10.0),
        ],
        call: super::zeroed(n),
        put: super::zeroed(n),
        params: Box::new(Params {
            riskfree: RISKFREE,
            volatility: VOLATILITY,
        }),
    }))
}

impl Workload for Binomial {
    fn units(&self) -> u64 {
        self.n as u64
    }

    super::c_codelet!("binomial", plb_bin_cl, plb_bin_init, plb_bin_fini);

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (off, len) = (offset as usize, len as usize);
        if off + len > self.n {
            return Err(format!(
                "binomial: block {off}+{len} beyond {} options",
                self.n
            ));
        }
        let [s, x, t] = &mut self.inputs;
        let mut handles = Vec::with_capacity(5);
        for v in [s, x, t, &mut self.call, &mut self.put] {
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
        ("koptions/s", 1e3)
    }

    fn verify(&self) -> Verification {
        let (r, v) = (f64::from(RISKFREE), f64::from(VOLATILITY));
        let [s, x, t] = &self.inputs;
        let mut bad = 0usize;
        let mut worst = (0.0f64, 0usize);
        for i in 0..self.n {
            let (call, put) = price(
                f64::from(s[i]),
                f64::from(x[i]),
                f64::from(t[i]),
                r,
                v,
                STEPS,
            );
            for (got, want) in [(self.call[i], call), (self.put[i], put)] {
                let err = (f64::from(got) - want).abs();
                if err.is_nan() || err > ABS_TOL + REL_TOL * want.abs() {
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
                "{} options x (call, put) vs the {STEPS}-step lattice in double precision: {bad} wrong, max abs err {:.2e} at {}, tol {ABS_TOL:.0e} + {REL_TOL:.0e}·|ref|",
                self.n, worst.0, worst.1
            ),
        }
    }
}
