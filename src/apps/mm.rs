//! `plb app mm`: C += A·B for n x n single-precision matrices, column-major.
//!
//! Unit of work: one column of B and C (W = n). A is registered once and
//! read by every block (replicated on each memory node by StarPU); each
//! block registers its columns of B (read) and of C (read-write) as their
//! own matrix handles. C starts at zero, so C = A·B when every column is
//! computed exactly once: a lost block leaves zeros and a repeated one
//! doubles its columns.
//!
//! Inputs: A and B uniform in [0, 1) from the seed (positive entries, so
//! no entry of A·B is near zero and any missing or doubled contribution is
//! a large relative error).
//!
//! Verification: for every column one sampled row, plus 1024 random
//! entries, recomputed in double precision; the relative error must stay
//! below 1e-3.
//!
//! Codelet: `codelets/mm.c` (CPU: OpenBLAS `cblas_sgemm`; OpenCL: our tiled
//! kernel; CUDA: cuBLAS when built with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets (codelets/*.c) and its OpenCL host code are called through FFI
// (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::c_int;

use starpu_sys as sys;

use super::{Data, Handle, Verification, Workload, input_rng};

unsafe extern "C" {
    static mut plb_mm_cl: sys::starpu_codelet;
    fn plb_mm_init() -> c_int;
    fn plb_mm_fini();
    fn plb_mm_blas_gflops(m: c_int, ncols: c_int, k: c_int, block: c_int, min_seconds: f64) -> f64;
}

/// Relative error tolerated per entry.
const TOLERANCE: f64 = 1e-3;
/// Random entries checked on top of one per column.
const EXTRA_SAMPLES: usize = 1024;

pub struct Mm {
    n: usize,
    seed: u64,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    a_handle: Option<Handle>,
}

/// Builds the workload of size `n` (A, B, C are n x n).
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 15)
        .ok_or_else(|| format!("mm: --n {n} out of range (1..=32768)"))?;
    let random = |stream| {
        let mut rng = input_rng(seed, stream);
        (0..n * n)
            .map(|_| rng.uniform_f32(0.0, 1.0))
            .collect::<Vec<f32>>()
    };
    Ok(Box::new(Mm {
        n,
        seed,
        a: random(1),
        b: random(2),
        c: super::zeroed(n * n),
        a_handle: None,
    }))
}

/// GFLOP/s of OpenBLAS on one thread, called directly, for
/// `C[:, j..j+block) += A·B[:, j..j+block)` on successive blocks of an
/// `n x n x n` problem (the blocks the application's tasks get), over at
/// least `min_seconds`.
pub fn blas_reference_gflops(n: usize, block: usize, min_seconds: f64) -> Option<f64> {
    let (Ok(n), Ok(block)) = (c_int::try_from(n), c_int::try_from(block)) else {
        return None;
    };
    // SAFETY: allocates and frees its own buffers; no StarPU involved.
    let g = unsafe { plb_mm_blas_gflops(n, n, n, block, min_seconds) };
    (g > 0.0).then_some(g)
}

impl Mm {
    /// `(A·B)[i][j]` in double precision, and the sum of the absolute
    /// products (the scale of the rounding error).
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let n = self.n;
        let col = &self.b[j * n..(j + 1) * n];
        let mut sum = 0.0;
        let mut abs = 0.0;
        for (k, &bkj) in col.iter().enumerate() {
            let p = f64::from(self.a[i + k * n]) * f64::from(bkj);
            sum += p;
            abs += p.abs();
        }
        (sum, abs)
    }
}

impl Workload for Mm {
    fn units(&self) -> u64 {
        self.n as u64
    }

    fn codelet(&self) -> *mut sys::starpu_codelet {
        // Only the address of the C global is taken (no access).
        &raw mut plb_mm_cl
    }

    fn prepare(&mut self) -> Result<(), String> {
        // SAFETY: StarPU is initialised, no task submitted yet.
        let rc = unsafe { plb_mm_init() };
        if rc != 0 {
            return Err(format!("mm: loading the OpenCL kernel failed ({rc})"));
        }
        Ok(())
    }

    fn release(&mut self) {
        // SAFETY: after the last task, before starpu_shutdown, once after a
        // successful `prepare` (the framework's contract).
        unsafe { plb_mm_fini() };
    }

    fn register_shared(&mut self, data: &mut Data) -> Result<(), String> {
        let n = self.n;
        // SAFETY: `a` holds n*n elements, is never resized, and is not
        // touched until the framework unregistered every handle.
        self.a_handle = Some(unsafe { data.matrix(self.a.as_mut_ptr(), n, n, n)? });
        Ok(())
    }

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (n, off, len) = (self.n, offset as usize, len as usize);
        if off + len > n {
            return Err(format!("mm: block {off}+{len} beyond {n} columns"));
        }
        let a = self.a_handle.ok_or("mm: A is not registered")?;
        // SAFETY: columns [off, off+len) of B and C are inside the buffers
        // (checked above), which are never resized and not touched until
        // every handle is unregistered; blocks are disjoint.
        let (b, c) = unsafe {
            (
                data.matrix(self.b.as_mut_ptr().add(off * n), n, n, len)?,
                data.matrix(self.c.as_mut_ptr().add(off * n), n, n, len)?,
            )
        };
        Ok(vec![a, b, c])
    }

    fn work(&self, units: u64) -> f64 {
        2.0 * (self.n as f64) * (self.n as f64) * units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("GFLOP/s", 1e9)
    }

    fn verify(&self) -> Verification {
        let n = self.n;
        let mut rng = input_rng(self.seed, 3);
        let mut samples: Vec<(usize, usize)> =
            (0..n).map(|j| (rng.below(n as u64) as usize, j)).collect();
        samples.extend(
            (0..EXTRA_SAMPLES)
                .map(|_| (rng.below(n as u64) as usize, rng.below(n as u64) as usize)),
        );
        let mut worst = 0.0f64;
        let mut worst_at = (0, 0);
        let mut bad = 0usize;
        for &(i, j) in &samples {
            let (reference, scale) = self.reference(i, j);
            let got = f64::from(self.c[i + j * n]);
            let err = (got - reference).abs() / scale.max(f64::MIN_POSITIVE);
            // NaN counts as wrong.
            if err.is_nan() || err > TOLERANCE {
                bad += 1;
            }
            if err.is_nan() || err > worst {
                worst = if err.is_nan() { f64::INFINITY } else { err };
                worst_at = (i, j);
            }
        }
        Verification {
            ok: bad == 0,
            detail: format!(
                "{} entries (every column) vs double precision: {bad} wrong, max rel err {worst:.2e} at ({},{}), tol {TOLERANCE:.0e}",
                samples.len(),
                worst_at.0,
                worst_at.1
            ),
        }
    }
}
