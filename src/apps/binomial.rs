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

use super::options::Book;
use super::{Data, Handle, Verification, Workload};

unsafe extern "C" {
    static mut plb_bin_cl: sys::starpu_codelet;
    fn plb_bin_init() -> c_int;
    fn plb_bin_fini();
}

const ABS_TOL: f64 = 1e-3;
const REL_TOL: f64 = 1e-3;

pub struct Binomial {
    book: Book,
}

/// Builds the workload of `n` options from `seed`.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    Ok(Box::new(Binomial {
        book: Book::new("binomial", n, 26, seed)?,
    }))
}

impl Workload for Binomial {
    fn units(&self) -> u64 {
        self.book.len() as u64
    }

    super::c_codelet!("binomial", plb_bin_cl, plb_bin_init, plb_bin_fini);

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        self.book.register_block("binomial", data, offset, len)
    }

    fn params(&self) -> *const c_void {
        self.book.params()
    }

    fn work(&self, units: u64) -> f64 {
        units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("koptions/s", 1e3)
    }

    fn verify(&self) -> Verification {
        let lattice = |s, x, t, r, v| price(s, x, t, r, v, STEPS);
        self.book.verify(
            lattice,
            &format!("the {STEPS}-step lattice in double precision"),
            ABS_TOL,
            REL_TOL,
        )
    }
}
