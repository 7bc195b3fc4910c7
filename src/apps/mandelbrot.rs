//! `plb app mandelbrot`: an n x n image of the Mandelbrot set (x in
//! [-2, 0.6), y in [-1.3, 1.3), at most 1024 iterations; single
//! precision). Irregular: a row through the set costs up to 1024
//! iterations per pixel, a row above it a few, and no block size tells
//! which.
//!
//! Unit of work: one row (W = n). Each block registers its rows of the
//! image (uint32 per pixel); the codelet adds iterations + 1, so a lost row
//! stays 0 and a repeated one doubles.
//!
//! Verification: every pixel against an independent Rust escape count in
//! single precision, operation for operation as the codelets
//! (`plb_core::kernels::mandelbrot::pixel_f32`; a double-precision count
//! differs from any single-precision one at 2-4 % of the pixels of rows
//! near the boundary, chaotic orbits). The CPU codelet matches exactly;
//! OpenCL may fuse multiply-adds, so a row passes when at most 2 % of its
//! pixels differ (a lost or repeated row differs everywhere).
//!
//! Codelet: `codelets/mandelbrot.c` (CPU; OpenCL: one work-item per pixel;
//! CUDA: `mandelbrot_cuda.cu` with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets are called through FFI (every unsafe block has a `// SAFETY:`
// comment).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use plb_core::kernels::mandelbrot::{MAX_ITER, pixel_f32};
use starpu_sys as sys;

use super::rows::{MAX_ROW_MISMATCH, check_rows};
use super::{Data, Handle, Verification, Workload};

unsafe extern "C" {
    static mut plb_mandel_cl: sys::starpu_codelet;
    fn plb_mandel_init() -> c_int;
    fn plb_mandel_fini();
}

/// `struct plb_mandel_params` of codelets/mandelbrot.c.
#[repr(C)]
struct Params {
    size: u32,
}

pub struct Mandelbrot {
    n: usize,
    image: Vec<u32>,
    params: Box<Params>,
}

/// Builds the workload of an `n` x `n` image (no random input: `seed` is
/// unused).
pub fn build(n: u64, _seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 14)
        .ok_or_else(|| format!("mandelbrot: --n {n} out of range (1..=16384)"))?;
    Ok(Box::new(Mandelbrot {
        n,
        image: super::zeroed(n * n),
        params: Box::new(Params { size: n as u32 }),
    }))
}

impl Workload for Mandelbrot {
    fn units(&self) -> u64 {
        self.n as u64
    }

    super::c_codelet!(
        "mandelbrot",
        plb_mandel_cl,
        plb_mandel_init,
        plb_mandel_fini
    );

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (n, off, len) = (self.n, offset as usize, len as usize);
        if off + len > n {
            return Err(format!("mandelbrot: block {off}+{len} beyond {n} rows"));
        }
        // SAFETY: rows [off, off+len) are inside the image (checked above),
        // which is never resized and not touched until every handle is
        // unregistered; blocks are disjoint.
        Ok(vec![unsafe {
            data.vector(self.image.as_mut_ptr().add(off * n), len * n)?
        }])
    }

    fn params(&self) -> *const c_void {
        (&raw const *self.params).cast()
    }

    fn work(&self, units: u64) -> f64 {
        // Pixels.
        units as f64 * self.n as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("Mpixels/s", 1e6)
    }

    fn verify(&self) -> Verification {
        let n = self.n;
        let (bad_rows, bad_pixels, worst) =
            check_rows(n, n, |r, c| self.image[r * n + c] != pixel_f32(r, c, n));
        Verification {
            ok: bad_rows == 0,
            detail: format!(
                "{n}x{n} pixels (max {MAX_ITER} iterations) vs the single-precision reference: {bad_rows} rows with more than {:.0} % of pixels differing ({bad_pixels} pixels in all; worst row {} at {:.2} %)",
                MAX_ROW_MISMATCH * 100.0,
                worst.0,
                worst.1 * 100.0
            ),
        }
    }
}
