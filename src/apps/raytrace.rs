//! `plb app raytrace`: an n x n ray-traced image of a fixed scene (a
//! ground sphere and five spheres, four of them mirrors, one point light
//! with shadows, up to 8 reflections; single precision). Irregular: a ray
//! into the sky costs one round of sphere tests, a ray between facing
//! mirrors up to 16. Chosen over the paper's Taylor kernel because its
//! irregularity comes from the scene, as in real renderers, and needs no
//! invented per-element term counts.
//!
//! Unit of work: one row (W = n). Each block registers its rows of the
//! image (RGB floats); the codelet adds each pixel's colour (the sky is
//! never black), so a lost row stays 0 and a repeated one doubles.
//!
//! Verification: every pixel against the double-precision tracer
//! (`plb_core::kernels::raytrace`): a pixel differs when a channel is off
//! by more than 0.01; a row passes when at most 2 % of its pixels differ
//! (silhouettes legitimately flip between single and double precision).
//!
//! Codelet: `codelets/raytrace.c` (CPU; OpenCL: one work-item per pixel;
//! CUDA: `raytrace_cuda.cu` with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets are called through FFI (every unsafe block has a `// SAFETY:`
// comment).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use plb_core::kernels::raytrace::trace;
use starpu_sys as sys;

use super::rows::{MAX_ROW_MISMATCH, check_rows};
use super::{Data, Handle, Verification, Workload};

unsafe extern "C" {
    static mut plb_rt_cl: sys::starpu_codelet;
    fn plb_rt_init() -> c_int;
    fn plb_rt_fini();
}

/// `struct plb_rt_params` of codelets/raytrace.c.
#[repr(C)]
struct Params {
    size: u32,
}

/// Largest per-channel difference of a matching pixel.
const TOL: f64 = 0.01;

pub struct RayTrace {
    n: usize,
    image: Vec<f32>,
    params: Box<Params>,
}

/// Builds the workload of an `n` x `n` image (no random input: `seed` is
/// unused).
pub fn build(n: u64, _seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 13)
        .ok_or_else(|| format!("raytrace: --n {n} out of range (1..=8192)"))?;
    Ok(Box::new(RayTrace {
        n,
        image: super::zeroed(3 * n * n),
        params: Box::new(Params { size: n as u32 }),
    }))
}

impl Workload for RayTrace {
    fn units(&self) -> u64 {
        self.n as u64
    }

    super::c_codelet!("raytrace", plb_rt_cl, plb_rt_init, plb_rt_fini);

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (n, off, len) = (self.n, offset as usize, len as usize);
        if off + len > n {
            return Err(format!("raytrace: block {off}+{len} beyond {n} rows"));
        }
        // SAFETY: rows [off, off+len) are inside the image (checked above),
        // which is never resized and not touched until every handle is
        // unregistered; blocks are disjoint.
        Ok(vec![unsafe {
            data.vector(self.image.as_mut_ptr().add(3 * off * n), 3 * len * n)?
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
        let (bad_rows, bad_pixels, worst) = check_rows(n, n, |r, c| {
            let (want, _) = trace(r, c, n, n);
            let got = &self.image[3 * (r * n + c)..3 * (r * n + c) + 3];
            (0..3).any(|k| {
                let err = (f64::from(got[k]) - want[k]).abs();
                err.is_nan() || err > TOL
            })
        });
        Verification {
            ok: bad_rows == 0,
            detail: format!(
                "{n}x{n} pixels vs double precision: {bad_rows} rows with more than {:.0} % of pixels off by > {TOL} ({bad_pixels} pixels in all; worst row {} at {:.2} %)",
                MAX_ROW_MISMATCH * 100.0,
                worst.0,
                worst.1 * 100.0
            ),
        }
    }
}
