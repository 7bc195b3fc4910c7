//! `plb app nbody`: one all-pairs gravitational step over n bodies, the
//! acceleration of every body (single precision; regular: every body
//! costs n interactions).
//!
//! Unit of work: one body (W = n). The bodies (x, y, z in [-1, 1), mass in
//! [0.5, 1.5)/n) are registered once and read by every block; each block
//! registers its slice of the accelerations (4 floats per body: ax, ay,
//! az and a count the codelet increments, so a lost block leaves 0 and a
//! repeated one 2).
//!
//! Verification: every body's count is exactly 1; the acceleration of a
//! deterministic sample of bodies (every ⌈n/2048⌉-th, the last one, and
//! the first and last body of the array) against double precision
//! (`plb_core::kernels::nbody`): `|a - ref| <= 1e-3·|ref| + 1e-4`.
//!
//! Codelet: `codelets/nbody.c` (CPU; OpenCL: one work-item per body; CUDA:
//! `nbody_cuda.cu` with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets are called through FFI (every unsafe block has a `// SAFETY:`
// comment).
#![allow(unsafe_code)]

use std::ffi::c_int;

use plb_core::kernels::nbody::acceleration;
use starpu_sys as sys;

use super::{Data, Handle, Verification, Workload, input_rng};

unsafe extern "C" {
    static mut plb_nbody_cl: sys::starpu_codelet;
    fn plb_nbody_init() -> c_int;
    fn plb_nbody_fini();
}

const REL_TOL: f64 = 1e-3;
const ABS_TOL: f64 = 1e-4;
/// Bodies checked in double precision (at most about this many).
const SAMPLE: usize = 2048;

pub struct NBody {
    n: usize,
    /// x, y, z, mass per body.
    bodies: Vec<f32>,
    /// ax, ay, az, count per body.
    acc: Vec<f32>,
    bodies_handle: Option<Handle>,
}

/// Builds the workload of `n` bodies from `seed`.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= 1 << 22)
        .ok_or_else(|| format!("nbody: --n {n} out of range (1..=2^22)"))?;
    let mut pos = input_rng(seed, 1);
    let mut mass = input_rng(seed, 2);
    let mut bodies = Vec::with_capacity(4 * n);
    for _ in 0..n {
        for _ in 0..3 {
            bodies.push(pos.uniform_f32(-1.0, 1.0));
        }
        bodies.push(mass.uniform_f32(0.5, 1.5) / n as f32);
    }
    Ok(Box::new(NBody {
        n,
        bodies,
        acc: super::zeroed(4 * n),
        bodies_handle: None,
    }))
}

impl Workload for NBody {
    fn units(&self) -> u64 {
        self.n as u64
    }

    super::c_codelet!("nbody", plb_nbody_cl, plb_nbody_init, plb_nbody_fini);

    fn register_shared(&mut self, data: &mut Data) -> Result<(), String> {
        // SAFETY: `bodies` holds 4n floats, is never resized, and is not
        // touched until the framework unregistered every handle.
        self.bodies_handle = Some(unsafe { data.vector(self.bodies.as_mut_ptr(), 4 * self.n)? });
        Ok(())
    }

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (off, len) = (offset as usize, len as usize);
        if off + len > self.n {
            return Err(format!("nbody: block {off}+{len} beyond {} bodies", self.n));
        }
        let bodies = self
            .bodies_handle
            .ok_or("nbody: the bodies are not registered")?;
        // SAFETY: bodies [off, off+len) are inside `acc` (checked above),
        // which is never resized and not touched until every handle is
        // unregistered; blocks are disjoint.
        let acc = unsafe { data.vector(self.acc.as_mut_ptr().add(4 * off), 4 * len)? };
        Ok(vec![bodies, acc])
    }

    fn work(&self, units: u64) -> f64 {
        // 20 flops per interaction.
        20.0 * units as f64 * self.n as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("GFLOP/s", 1e9)
    }

    fn verify(&self) -> Verification {
        let miscounted = (0..self.n).filter(|&i| self.acc[4 * i + 3] != 1.0).count();
        let bodies: Vec<[f64; 4]> = self
            .bodies
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]].map(f64::from))
            .collect();
        let stride = self.n.div_ceil(SAMPLE);
        let mut sample: Vec<usize> = (0..self.n).step_by(stride).collect();
        sample.push(self.n - 1);
        let mut bad = 0usize;
        let mut worst = (0.0f64, 0usize);
        for &i in &sample {
            let want = acceleration(&bodies, i);
            let got = &self.acc[4 * i..4 * i + 3];
            let norm = want.iter().map(|a| a * a).sum::<f64>().sqrt();
            let err = (0..3)
                .map(|k| (f64::from(got[k]) - want[k]).powi(2))
                .sum::<f64>()
                .sqrt();
            let rel = err / (REL_TOL * norm + ABS_TOL);
            if rel.is_nan() || rel > 1.0 {
                bad += 1;
            }
            if rel.is_nan() || rel > worst.0 {
                worst = (if rel.is_nan() { f64::INFINITY } else { rel }, i);
            }
        }
        Verification {
            ok: miscounted == 0 && bad == 0,
            detail: format!(
                "{} bodies: {miscounted} not computed exactly once; {} sampled accelerations vs double precision: {bad} wrong, worst at {} ({:.2} of tol {REL_TOL:.0e}·|ref| + {ABS_TOL:.0e})",
                self.n,
                sample.len(),
                worst.1,
                worst.0
            ),
        }
    }
}
