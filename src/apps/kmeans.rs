//! `plb app kmeans`: Lloyd's k-means on `n` points in `d = 4` dimensions,
//! `k = 8` clusters, at most 20 iterations.
//!
//! Input (from the seed, `codelets/kmeans.h`): points around `k` random
//! centres, coordinates on the 2^-12 grid so that every partial sum is
//! exact in double; the initial centroids are `k` distinct points.
//!
//! Work: each iteration is one pass of the framework over `W = n` units
//! (one unit = one point): a block assigns its points to their nearest
//! centroid and adds its partial sums (per cluster: coordinate sums and
//! count) into its own array. Between passes ([`Workload::next_pass`]) the
//! application adds the blocks' partial sums, stops when the assignment
//! equals the previous one (converged) or after the iteration limit, and
//! otherwise computes the new centroids. Throughput counts point-iterations.
//!
//! Verification: a sequential Lloyd ([`super::kmeans_ref`]) from the same
//! initial centroids must give identical labels, bit-identical centroids
//! and the same number of iterations; every pass must count each point
//! exactly once.
//!
//! Codelet: `codelets/kmeans_codelet.c` (CPU: `codelets/kmeans.c`;
//! OpenCL: `codelets/kmeans.cl`; CUDA: `codelets/kmeans_cuda.cu` when built
//! with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets (codelets/*.c) and its OpenCL host code are called through FFI
// (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};

use starpu_sys as sys;

use super::kmeans_ref;
#[cfg(test)]
use super::kmeans_ref::Lloyd;
use super::{Data, Handle, Verification, Workload};

/// Bindings to `codelets/kmeans.h` and `codelets/opencl_check.c`.
pub(crate) mod ffi {
    #[cfg(test)]
    use super::c_char;
    use super::c_int;

    unsafe extern "C" {
        pub fn plb_kmeans_check(n: u64, d: u32, k: u32) -> c_int;
        #[cfg(test)]
        pub fn plb_kmeans_block(
            d: u32,
            k: u32,
            points: *const f32,
            centroids: *const f32,
            len: u64,
            labels: *mut i32,
            partial: *mut f64,
        );
        pub fn plb_kmeans_add(d: u32, k: u32, acc: *mut f64, part: *const f64);
        pub fn plb_kmeans_update(d: u32, k: u32, sums: *const f64, centroids: *mut f32) -> u32;
        pub fn plb_kmeans_generate(
            seed: u64,
            n: u64,
            d: u32,
            k: u32,
            points: *mut f32,
            init: *mut f32,
        ) -> c_int;
        #[cfg(test)]
        pub fn plb_kmeans_opencl_check(
            source: *const c_char,
            seed: u64,
            n: u64,
            d: u32,
            k: u32,
            block: u64,
            msg: *mut c_char,
            msglen: usize,
        ) -> c_int;
    }
}

/// OpenCL source of the kernels (`codelets/kmeans.cl`).
pub const OPENCL_SOURCE: &str = concat!(include_str!("../../codelets/kmeans.cl"), "\0");

/// Default dimension.
pub const DEFAULT_DIM: u32 = 4;
/// Default number of clusters.
pub const DEFAULT_CLUSTERS: u32 = 8;
/// Default iteration limit.
pub const DEFAULT_MAX_ITER: usize = 20;

/// A generated instance.
#[derive(Debug, Clone)]
pub struct Instance {
    pub n: u64,
    pub d: u32,
    pub k: u32,
    /// `n x d`, row-major, on the 2^-12 grid.
    pub points: Vec<f32>,
    /// Initial centroids, `k x d`.
    pub init: Vec<f32>,
}

impl Instance {
    /// The instance of `seed`.
    pub fn generate(seed: u64, n: u64, d: u32, k: u32) -> Result<Instance, String> {
        // SAFETY: pure function.
        if unsafe { ffi::plb_kmeans_check(n, d, k) } != 0 {
            return Err(format!(
                "unsupported k-means size: n={n} points (k..=2^24), d={d} (1..=32), k={k} (1..=64)"
            ));
        }
        let len = usize::try_from(n * u64::from(d)).map_err(|e| e.to_string())?;
        let mut points = vec![0f32; len];
        let mut init = vec![0f32; (k * d) as usize];
        // SAFETY: n*d and k*d floats, the sizes plb_kmeans_generate writes.
        let rc = unsafe {
            ffi::plb_kmeans_generate(seed, n, d, k, points.as_mut_ptr(), init.as_mut_ptr())
        };
        if rc != 0 {
            return Err("plb_kmeans_generate refused the sizes".into());
        }
        Ok(Instance {
            n,
            d,
            k,
            points,
            init,
        })
    }

    /// Size of a block's partial sums: `k * (d + 1)`.
    pub fn partial_len(&self) -> usize {
        (self.k * (self.d + 1)) as usize
    }

    /// The C kernel on points `[first, first + len)`: labels and partial
    /// sums.
    #[cfg(test)]
    pub fn block(&self, centroids: &[f32], first: u64, len: u64) -> (Vec<i32>, Vec<f64>) {
        assert!(first.checked_add(len).is_some_and(|e| e <= self.n));
        assert_eq!(centroids.len(), (self.k * self.d) as usize);
        let mut labels = vec![0i32; len as usize];
        let mut partial = vec![0f64; self.partial_len()];
        let off = (first * u64::from(self.d)) as usize;
        // SAFETY: the points from `first` hold len*d floats (checked
        // range), centroids k*d, labels len, partial k*(d+1).
        unsafe {
            ffi::plb_kmeans_block(
                self.d,
                self.k,
                self.points[off..].as_ptr(),
                centroids.as_ptr(),
                len,
                labels.as_mut_ptr(),
                partial.as_mut_ptr(),
            )
        };
        (labels, partial)
    }

    /// `acc += part` (both `k * (d + 1)`).
    pub fn add(&self, acc: &mut [f64], part: &[f64]) {
        assert!(acc.len() == self.partial_len() && part.len() == self.partial_len());
        // SAFETY: both have k*(d+1) entries.
        unsafe { ffi::plb_kmeans_add(self.d, self.k, acc.as_mut_ptr(), part.as_ptr()) };
    }

    /// New centroids from the summed partials; returns the empty clusters.
    pub fn update(&self, sums: &[f64], centroids: &mut [f32]) -> u32 {
        assert!(sums.len() == self.partial_len());
        assert_eq!(centroids.len(), (self.k * self.d) as usize);
        // SAFETY: sizes checked just above.
        unsafe { ffi::plb_kmeans_update(self.d, self.k, sums.as_ptr(), centroids.as_mut_ptr()) }
    }

    /// Lloyd with the C kernels on this thread, the points of each
    /// iteration split by `split(iteration)` into consecutive blocks of
    /// the given lengths (summing to `n`), the same protocol as the
    /// reference (`kmeans_ref::lloyd`).
    #[cfg(test)]
    pub fn lloyd_blocked(
        &self,
        max_iter: usize,
        split: &mut dyn FnMut(usize) -> Vec<u64>,
    ) -> Lloyd {
        let mut centroids = self.init.clone();
        let mut labels: Vec<i32> = Vec::new();
        let mut iterations = 0;
        let mut converged = false;
        while iterations < max_iter {
            let mut next = Vec::with_capacity(self.n as usize);
            let mut sums = vec![0f64; self.partial_len()];
            let mut first = 0;
            for len in split(iterations) {
                let (l, p) = self.block(&centroids, first, len);
                next.extend_from_slice(&l);
                self.add(&mut sums, &p);
                first += len;
            }
            assert_eq!(first, self.n);
            iterations += 1;
            if next == labels {
                converged = true;
                break;
            }
            labels = next;
            self.update(&sums, &mut centroids);
        }
        Lloyd {
            labels,
            centroids,
            iterations,
            converged,
        }
    }
}

/// `struct plb_kmeans_params`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Params {
    d: u32,
    k: u32,
}

unsafe extern "C" {
    static mut plb_kmeans_cl: sys::starpu_codelet;
    fn plb_kmeans_init(opencl_source: *const c_char) -> c_int;
    fn plb_kmeans_fini();
}

/// The workload of `plb app kmeans`.
pub struct Kmeans {
    inst: Instance,
    params: Params,
    max_iter: usize,
    /// Centroids of the current pass.
    centroids: Vec<f32>,
    /// Labels of the current pass (written by the blocks, -1 before).
    labels: Vec<i32>,
    /// Labels of the previous pass (empty before the first).
    previous: Vec<i32>,
    /// This pass's blocks: offset, length, partial sums.
    blocks: Vec<(u64, u64, Vec<f64>)>,
    shared: Option<(Handle, Handle)>,
    iterations: usize,
    converged: bool,
    /// The first inconsistency seen between passes.
    fault: Option<String>,
}

/// `plb app kmeans`: `n` points.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    let inst = Instance::generate(seed, n, DEFAULT_DIM, DEFAULT_CLUSTERS)
        .map_err(|e| format!("kmeans: {e}"))?;
    let n = inst.n as usize;
    Ok(Box::new(Kmeans {
        params: Params {
            d: inst.d,
            k: inst.k,
        },
        centroids: inst.init.clone(),
        inst,
        max_iter: DEFAULT_MAX_ITER,
        labels: vec![-1; n],
        previous: Vec::new(),
        blocks: Vec::new(),
        shared: None,
        iterations: 0,
        converged: false,
        fault: None,
    }))
}

impl Workload for Kmeans {
    fn units(&self) -> u64 {
        self.inst.n
    }

    fn codelet(&self) -> *mut sys::starpu_codelet {
        &raw mut plb_kmeans_cl
    }

    fn prepare(&mut self) -> Result<(), String> {
        // SAFETY: StarPU is initialised, no task submitted yet; the source
        // is NUL-terminated.
        let rc = unsafe { plb_kmeans_init(OPENCL_SOURCE.as_ptr().cast()) };
        if rc != 0 {
            return Err(format!("kmeans: building the OpenCL kernels failed ({rc})"));
        }
        Ok(())
    }

    fn release(&mut self) {
        // SAFETY: after the last task, before starpu_shutdown, once after a
        // successful `prepare` (the framework's contract).
        unsafe { plb_kmeans_fini() };
    }

    fn register_shared(&mut self, data: &mut Data) -> Result<(), String> {
        // SAFETY: the points and centroids are not resized nor written until
        // the framework unregistered every handle of this pass (the
        // centroids change only in `next_pass`, after that).
        let handles = unsafe {
            (
                data.vector(self.inst.points.as_mut_ptr(), self.inst.points.len())?,
                data.vector(self.centroids.as_mut_ptr(), self.centroids.len())?,
            )
        };
        self.shared = Some(handles);
        Ok(())
    }

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        if offset.checked_add(len).is_none_or(|e| e > self.inst.n) {
            return Err(format!(
                "kmeans: block {offset}+{len} beyond {} points",
                self.inst.n
            ));
        }
        let (points, centroids) = self.shared.ok_or("kmeans: the points are not registered")?;
        self.blocks
            .push((offset, len, vec![0.0; self.inst.partial_len()]));
        let partial = &mut self.blocks.last_mut().expect("just pushed").2;
        // SAFETY: labels [offset, offset + len) lie inside `labels` (checked
        // above), blocks of a pass are disjoint; the partial array's heap
        // buffer does not move when `blocks` grows. Neither is touched
        // until the framework unregistered every handle of the pass.
        let (labels, partial) = unsafe {
            (
                data.vector(self.labels.as_mut_ptr().add(offset as usize), len as usize)?,
                data.vector(partial.as_mut_ptr(), partial.len())?,
            )
        };
        Ok(vec![points, centroids, labels, partial])
    }

    fn params(&self) -> *const c_void {
        (&raw const self.params).cast()
    }

    fn next_pass(&mut self) -> Result<bool, String> {
        self.shared = None;
        let mut sums = vec![0.0; self.inst.partial_len()];
        for (_, _, partial) in self.blocks.drain(..) {
            self.inst.add(&mut sums, &partial);
        }
        self.iterations += 1;
        let d = self.inst.d as usize;
        let counted: f64 = sums.iter().skip(d).step_by(d + 1).sum();
        if counted != self.inst.n as f64 || self.labels.contains(&-1) {
            self.fault.get_or_insert(format!(
                "iteration {}: {counted} points counted for {}, {} unassigned",
                self.iterations,
                self.inst.n,
                self.labels.iter().filter(|&&l| l == -1).count()
            ));
            return Ok(false);
        }
        if self.labels == self.previous {
            self.converged = true;
            return Ok(false);
        }
        self.inst.update(&sums, &mut self.centroids);
        if self.iterations >= self.max_iter {
            return Ok(false);
        }
        let n = self.labels.len();
        self.previous = std::mem::replace(&mut self.labels, vec![-1; n]);
        Ok(true)
    }

    fn work(&self, units: u64) -> f64 {
        units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("Mpoints/s", 1e6)
    }

    fn verify(&self) -> Verification {
        if let Some(f) = &self.fault {
            return Verification {
                ok: false,
                detail: f.clone(),
            };
        }
        let d = self.inst.d as usize;
        let r = kmeans_ref::lloyd(&self.inst.points, d, &self.inst.init, self.max_iter);
        let differ = self
            .labels
            .iter()
            .zip(&r.labels)
            .filter(|(a, b)| a != b)
            .count();
        let same_centroids = self.centroids == r.centroids;
        let ok = differ == 0
            && r.labels.len() == self.labels.len()
            && same_centroids
            && r.iterations == self.iterations
            && r.converged == self.converged;
        Verification {
            ok,
            detail: format!(
                "{} iterations ({}), sequential reference {} ({}): {differ} of {} labels differ, centroids {}",
                self.iterations,
                if self.converged { "converged" } else { "limit" },
                r.iterations,
                if r.converged { "converged" } else { "limit" },
                self.labels.len(),
                if same_centroids {
                    "identical"
                } else {
                    "DIFFER"
                }
            ),
        }
    }
}

/// Outcome of [`opencl_check`].
#[cfg(test)]
pub use super::grn::ClCheck;

/// Runs `codelets/kmeans.cl` on the first OpenCL device, block by block,
/// and compares labels and partial sums with the C kernel (no StarPU).
#[cfg(test)]
pub fn opencl_check(seed: u64, n: u64, d: u32, k: u32, block: u64) -> ClCheck {
    let mut msg = vec![0 as c_char; 4096];
    // SAFETY: the source is NUL-terminated; msg has msg.len() bytes.
    let rc = unsafe {
        ffi::plb_kmeans_opencl_check(
            OPENCL_SOURCE.as_ptr().cast(),
            seed,
            n,
            d,
            k,
            block,
            msg.as_mut_ptr(),
            msg.len(),
        )
    };
    // SAFETY: the C side NUL-terminates msg (vsnprintf) or leaves zeros.
    let text = unsafe { std::ffi::CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    match rc {
        0 => ClCheck::Equal(text),
        2 => ClCheck::NoDevice(text),
        _ => ClCheck::Failed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::super::kmeans_ref;
    use super::*;

    #[test]
    fn generated_points_are_on_the_grid_and_deterministic() {
        let a = Instance::generate(3, 1000, 5, 6).unwrap();
        let b = Instance::generate(3, 1000, 5, 6).unwrap();
        assert_eq!(a.points, b.points);
        assert_eq!(a.init, b.init);
        assert_ne!(a.points, Instance::generate(4, 1000, 5, 6).unwrap().points);
        for &x in &a.points {
            assert!((-256.0..=256.0).contains(&x));
            assert_eq!((f64::from(x) * 4096.0).fract(), 0.0, "{x}");
        }
        // The initial centroids are k distinct points of the set.
        let rows: Vec<&[f32]> = a.points.chunks_exact(5).collect();
        for (j, c) in a.init.chunks_exact(5).enumerate() {
            assert!(rows.contains(&c));
            assert!(!a.init.chunks_exact(5).take(j).any(|o| o == c));
        }
        assert!(Instance::generate(1, 5, 2, 8).is_err());
        assert!(Instance::generate(1, 100, 33, 8).is_err());
        assert!(Instance::generate(1, 100, 2, 65).is_err());
    }

    #[test]
    fn blocked_kernels_equal_the_sequential_reference() {
        for (seed, n, d, k) in [
            (1u64, 5000u64, 2u32, 5u32),
            (2, 20000, 4, 8),
            (3, 3000, 16, 13),
        ] {
            let inst = Instance::generate(seed, n, d, k).unwrap();
            let reference = kmeans_ref::lloyd(&inst.points, d as usize, &inst.init, 50);
            // Different, uneven splits at every iteration.
            let mut state = seed;
            let mut split = |it: usize| {
                let mut out = Vec::new();
                let mut left = n;
                while left > 0 {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let len = ((state >> 33) % (n / 3 + 1) + 1 + it as u64).min(left);
                    out.push(len);
                    left -= len;
                }
                out
            };
            let ours = inst.lloyd_blocked(50, &mut split);
            assert!(reference.iterations > 2, "seed {seed}: too easy");
            assert_eq!(ours.labels, reference.labels, "seed {seed}");
            assert_eq!(ours.centroids, reference.centroids, "seed {seed}");
            assert_eq!(ours.iterations, reference.iterations);
            assert_eq!(ours.converged, reference.converged);
        }
    }

    #[test]
    fn opencl_kernels_equal_c_kernels() {
        for (seed, n, d, k, block) in [
            (31u64, 20000u64, 4u32, 8u32, 3001u64),
            (32, 5000, 13, 17, 999),
        ] {
            match opencl_check(seed, n, d, k, block) {
                ClCheck::Equal(_) => {}
                ClCheck::NoDevice(why) => {
                    eprintln!("skipped: {why}");
                    return;
                }
                ClCheck::Failed(why) => panic!("{why}"),
            }
        }
    }
}
