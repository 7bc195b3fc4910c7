//! `plb app grn` / `plb app grn3`: gene regulatory network inference by
//! exhaustive search (Borelli et al., BMC Bioinformatics 14(S18), 2013; the
//! PLB-HeC and PLB-HAC papers' GRN application).
//!
//! Input (from the seed and `n`, `codelets/grn.h`): a random network of `n`
//! genes over 3 levels in which each gene has `k` planted regulators and a
//! random transition table; 64 samples, each a uniformly random state and
//! its successor, 5 % of the successor values replaced by noise.
//!
//! Work: for every target gene, every predictor subset of cardinality `k`
//! (`grn`: k = 2, O(n^3) like the papers; `grn3`: k = 3) is scored by the
//! mean conditional entropy of the target's next value given the
//! predictors (penalty for unobserved instances); the best subset per
//! target is kept. Unit of work: one predictor subset (colex rank), scored
//! against every target, so `W = C(n, k)`. Each block registers its own
//! result array (`n + 1` entries, read-write); the blocks' arrays merge
//! into the result with an associative rule (lowest score, then lowest
//! rank) and count the subsets evaluated.
//!
//! Verification: every subset evaluated exactly once (the counts), and the
//! result compared with a straightforward sequential search
//! ([`super::grn_ref`]): on every target when `C(n, k)·n <= 2e6`, else on
//! 16 evenly spaced targets. The summary also says for how many targets
//! the planted regulators were found (informative: with noise, another
//! subset may legitimately score better on a large instance).
//!
//! Codelet: `codelets/grn_codelet.c` (CPU: `codelets/grn.c`; OpenCL:
//! `codelets/grn.cl`; CUDA: `codelets/grn_cuda.cu` when built with nvcc).

// Unsafe code is denied in the workspace; allowed here because the app's C
// codelets (codelets/*.c) and its OpenCL host code are called through FFI
// (every unsafe block has a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};

use starpu_sys as sys;

use super::{Data, Handle, Verification, Workload};

/// Bindings to `codelets/grn.h` and `codelets/opencl_check.c`.
pub(crate) mod ffi {
    #[cfg(test)]
    use super::c_char;
    use super::c_int;

    /// `struct plb_grn_best`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Best {
        pub score: i64,
        pub rank: u64,
    }

    /// `struct plb_grn_problem`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Problem {
        pub n: u32,
        pub m: u32,
        pub levels: u32,
        pub k: u32,
        pub penalty: i64,
    }

    unsafe extern "C" {
        pub fn plb_grn_problem_init(p: *mut Problem, n: u32, m: u32, levels: u32, k: u32) -> c_int;
        pub fn plb_grn_binom(n: u64, k: u32) -> u64;
        pub fn plb_grn_flogf_table(m: u32, table: *mut i64);
        pub fn plb_grn_best_reset(best: *mut Best, n: u32);
        #[cfg(test)]
        pub fn plb_grn_block(
            p: *const Problem,
            data: *const u8,
            flogf: *const i64,
            first: u64,
            len: u64,
            best: *mut Best,
        );
        pub fn plb_grn_merge(acc: *mut Best, part: *const Best, n: u32);
        pub fn plb_grn_score_value(p: *const Problem, score: i64) -> f64;
        pub fn plb_grn_generate(
            seed: u64,
            n: u32,
            m: u32,
            levels: u32,
            k: u32,
            noise: f64,
            data: *mut u8,
            regulators: *mut u32,
        ) -> c_int;
        #[cfg(test)]
        pub fn plb_grn_opencl_check(
            source: *const c_char,
            seed: u64,
            n: u32,
            m: u32,
            levels: u32,
            k: u32,
            block: u64,
            msg: *mut c_char,
            msglen: usize,
        ) -> c_int;
    }
}

pub use ffi::Best;

/// OpenCL source of the kernel (`codelets/grn.cl`).
pub const OPENCL_SOURCE: &str = concat!(include_str!("../../codelets/grn.cl"), "\0");

/// Default number of samples.
pub const DEFAULT_SAMPLES: u32 = 64;
/// Default number of quantisation levels.
pub const DEFAULT_LEVELS: u32 = 3;
/// Default probability that a generated value is replaced by noise.
pub const DEFAULT_NOISE: f64 = 0.05;

/// A generated instance: data, planted regulators and the kernels' tables.
#[derive(Debug, Clone)]
pub struct Instance {
    pub problem: ffi::Problem,
    /// Predictor matrix then target matrix, genes x samples.
    pub data: Vec<u8>,
    /// Planted regulators, `k` per gene, ascending.
    pub regulators: Vec<u32>,
    /// `f ln f` table of the fixed-point score.
    pub flogf: Vec<i64>,
}

impl Instance {
    /// The instance of `seed` (`n` genes, `m` samples, `levels` levels,
    /// `k` regulators per gene, searched with subsets of `k`).
    pub fn generate(
        seed: u64,
        n: u32,
        m: u32,
        levels: u32,
        k: u32,
        noise: f64,
    ) -> Result<Instance, String> {
        let mut problem = ffi::Problem::default();
        // SAFETY: `problem` is a valid, writable plb_grn_problem.
        let rc = unsafe { ffi::plb_grn_problem_init(&mut problem, n, m, levels, k) };
        if rc != 0 || n <= k {
            return Err(format!(
                "unsupported GRN size: n={n} genes (> k), m={m} samples (1..=4096), \
                 levels={levels} (2..=4), k={k} (1..=3)"
            ));
        }
        let mut data = vec![0u8; 2 * n as usize * m as usize];
        let mut regulators = vec![0u32; n as usize * k as usize];
        // SAFETY: the buffers have the sizes plb_grn_generate writes
        // (2*n*m bytes, n*k regulators); sizes were checked above.
        let rc = unsafe {
            ffi::plb_grn_generate(
                seed,
                n,
                m,
                levels,
                k,
                noise,
                data.as_mut_ptr(),
                regulators.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err("plb_grn_generate refused the sizes".into());
        }
        let mut flogf = vec![0i64; m as usize + 1];
        // SAFETY: m + 1 entries, as plb_grn_flogf_table writes.
        unsafe { ffi::plb_grn_flogf_table(m, flogf.as_mut_ptr()) };
        Ok(Instance {
            problem,
            data,
            regulators,
            flogf,
        })
    }

    /// Number of genes.
    pub fn genes(&self) -> usize {
        self.problem.n as usize
    }

    /// Units of work: `C(n, k)` predictor subsets.
    pub fn units(&self) -> u64 {
        // SAFETY: pure function.
        unsafe { ffi::plb_grn_binom(u64::from(self.problem.n), self.problem.k) }
    }

    /// An empty result array (`codelets/grn.h`): "nothing scored yet" for
    /// every target, then the evaluated count (0); `n + 1` entries.
    pub fn empty_result(&self) -> Vec<Best> {
        let mut best = vec![Best { score: 0, rank: 0 }; self.genes() + 1];
        // SAFETY: n + 1 entries.
        unsafe { ffi::plb_grn_best_reset(best.as_mut_ptr(), self.problem.n) };
        best
    }

    /// The C kernel on subsets `[first, first + len)`, on this thread: a
    /// result array (`n + 1` entries).
    #[cfg(test)]
    pub fn block(&self, first: u64, len: u64) -> Vec<Best> {
        assert!(first.checked_add(len).is_some_and(|e| e <= self.units()));
        let mut best = self.empty_result();
        // SAFETY: the problem, data (2*n*m) and table (m+1) belong to this
        // instance; `best` has n + 1 entries; the range is within C(n, k).
        unsafe {
            ffi::plb_grn_block(
                &self.problem,
                self.data.as_ptr(),
                self.flogf.as_ptr(),
                first,
                len,
                best.as_mut_ptr(),
            )
        };
        best
    }

    /// Merges a block's result array into `acc`.
    pub fn merge(&self, acc: &mut [Best], part: &[Best]) {
        assert!(acc.len() == self.genes() + 1 && part.len() == self.genes() + 1);
        // SAFETY: both have n + 1 entries.
        unsafe { ffi::plb_grn_merge(acc.as_mut_ptr(), part.as_ptr(), self.problem.n) };
    }

    /// Subsets evaluated into a result array.
    pub fn evaluated(&self, result: &[Best]) -> u64 {
        result[self.genes()].rank
    }

    /// The entropy a fixed-point score stands for.
    pub fn score_value(&self, score: i64) -> f64 {
        // SAFETY: pure function of the problem.
        unsafe { ffi::plb_grn_score_value(&self.problem, score) }
    }

    /// The reference's view of the data.
    pub fn reference_data(&self) -> super::grn_ref::Data<'_> {
        super::grn_ref::Data {
            n: self.problem.n as usize,
            m: self.problem.m as usize,
            levels: self.problem.levels as usize,
            data: &self.data,
        }
    }

    /// Planted regulators of gene `g`.
    pub fn planted(&self, g: usize) -> Vec<usize> {
        let k = self.problem.k as usize;
        self.regulators[g * k..(g + 1) * k]
            .iter()
            .map(|&r| r as usize)
            .collect()
    }

    /// Number of targets whose best subset is exactly its planted
    /// regulators.
    pub fn planted_found(&self, result: &[Best]) -> usize {
        let k = self.problem.k as usize;
        (0..self.genes())
            .filter(|&t| {
                result[t].rank < self.units()
                    && super::grn_ref::colex_unrank(result[t].rank, k) == self.planted(t)
            })
            .count()
    }

    /// Compares `result` with the reference on the targets `targets`.
    pub fn verify(&self, result: &[Best], targets: &[usize]) -> super::grn_ref::Comparison {
        let rows: Vec<(usize, u64, f64)> = targets
            .iter()
            .map(|&t| (t, result[t].rank, self.score_value(result[t].score)))
            .collect();
        super::grn_ref::compare(&self.reference_data(), self.problem.k as usize, &rows)
    }
}

/// Outcome of [`opencl_check`].
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClCheck {
    /// Every block agreed bit for bit.
    Equal(String),
    /// No OpenCL platform or device.
    NoDevice(String),
    /// A mismatch or an OpenCL error.
    Failed(String),
}

/// Runs `codelets/grn.cl` on the first OpenCL device, block by block,
/// and compares each block with the C kernel (no StarPU involved).
#[cfg(test)]
pub fn opencl_check(seed: u64, n: u32, m: u32, levels: u32, k: u32, block: u64) -> ClCheck {
    let mut msg = vec![0 as c_char; 4096];
    // SAFETY: the source is NUL-terminated; msg has msg.len() bytes.
    let rc = unsafe {
        ffi::plb_grn_opencl_check(
            OPENCL_SOURCE.as_ptr().cast(),
            seed,
            n,
            m,
            levels,
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

unsafe extern "C" {
    static mut plb_grn_cl: sys::starpu_codelet;
    fn plb_grn_init(opencl_source: *const c_char) -> c_int;
    fn plb_grn_fini();
}

/// Above this many candidate evaluations (`C(n, k)·n`) the verification
/// samples [`SAMPLED_TARGETS`] targets instead of checking all.
const FULL_CHECK_CANDIDATES: f64 = 2e6;
/// Targets checked on large instances.
const SAMPLED_TARGETS: usize = 16;

/// The workload of `plb app grn` (k = 2) and `plb app grn3` (k = 3).
pub struct Grn {
    inst: Instance,
    shared: Option<(Handle, Handle)>,
    /// Each block's offset, length and result array.
    blocks: Vec<(u64, u64, Vec<Best>)>,
}

fn build_k(n: u64, seed: u64, k: u32) -> Result<Box<dyn Workload>, String> {
    let n = u32::try_from(n).map_err(|_| format!("grn: --n {n} too large"))?;
    let inst = Instance::generate(seed, n, DEFAULT_SAMPLES, DEFAULT_LEVELS, k, DEFAULT_NOISE)
        .map_err(|e| format!("grn: {e}"))?;
    if inst.units() > u64::from(u32::MAX) {
        return Err(format!("grn: C({n}, {k}) subsets is too many"));
    }
    Ok(Box::new(Grn {
        inst,
        shared: None,
        blocks: Vec::new(),
    }))
}

/// `plb app grn`: `n` genes, predictor subsets of 2.
pub fn build(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    build_k(n, seed, 2)
}

/// `plb app grn3`: `n` genes, predictor subsets of 3.
pub fn build3(n: u64, seed: u64) -> Result<Box<dyn Workload>, String> {
    build_k(n, seed, 3)
}

impl Workload for Grn {
    fn units(&self) -> u64 {
        self.inst.units()
    }

    fn codelet(&self) -> *mut sys::starpu_codelet {
        &raw mut plb_grn_cl
    }

    fn prepare(&mut self) -> Result<(), String> {
        // SAFETY: StarPU is initialised, no task submitted yet; the source
        // is NUL-terminated.
        let rc = unsafe { plb_grn_init(OPENCL_SOURCE.as_ptr().cast()) };
        if rc != 0 {
            return Err(format!("grn: building the OpenCL kernel failed ({rc})"));
        }
        Ok(())
    }

    fn release(&mut self) {
        // SAFETY: after the last task, before starpu_shutdown, once after a
        // successful `prepare` (the framework's contract).
        unsafe { plb_grn_fini() };
    }

    fn register_shared(&mut self, data: &mut Data) -> Result<(), String> {
        // SAFETY: the data and table vectors are never resized and only read
        // (by Rust too) until the framework unregistered every handle.
        let handles = unsafe {
            (
                data.vector(self.inst.data.as_mut_ptr(), self.inst.data.len())?,
                data.vector(self.inst.flogf.as_mut_ptr(), self.inst.flogf.len())?,
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
        if offset.checked_add(len).is_none_or(|e| e > self.units()) {
            return Err(format!(
                "grn: block {offset}+{len} beyond {} subsets",
                self.units()
            ));
        }
        let (d, t) = self.shared.ok_or("grn: the data is not registered")?;
        self.blocks.push((offset, len, self.inst.empty_result()));
        let out = &mut self.blocks.last_mut().expect("just pushed").2;
        // SAFETY: the array's heap buffer (n + 1 entries) does not move when
        // `blocks` grows and is not touched until every handle is
        // unregistered.
        let out = unsafe { data.vector(out.as_mut_ptr(), out.len())? };
        Ok(vec![d, t, out])
    }

    fn params(&self) -> *const c_void {
        (&raw const self.inst.problem).cast()
    }

    /// Candidates: (subset, target) pairs.
    fn work(&self, units: u64) -> f64 {
        units as f64 * self.inst.genes() as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("Mcand/s", 1e6)
    }

    fn verify(&self) -> Verification {
        let n = self.inst.genes();
        let mut acc = self.inst.empty_result();
        let mut wrong_counts = 0;
        for (_, len, arr) in &self.blocks {
            if self.inst.evaluated(arr) != *len {
                wrong_counts += 1;
            }
            self.inst.merge(&mut acc, arr);
        }
        let evaluated = self.inst.evaluated(&acc);
        if evaluated != self.units() || wrong_counts > 0 {
            return Verification {
                ok: false,
                detail: format!(
                    "{evaluated} subset evaluations for {} subsets, {wrong_counts} blocks evaluated other than once",
                    self.units()
                ),
            };
        }
        let full = self.units() as f64 * n as f64 <= FULL_CHECK_CANDIDATES;
        let targets: Vec<usize> = if full {
            (0..n).collect()
        } else {
            (0..SAMPLED_TARGETS)
                .map(|i| i * n / SAMPLED_TARGETS)
                .collect()
        };
        let cmp = self.inst.verify(&acc, &targets);
        let planted = self.inst.planted_found(&acc);
        let what = if full { "all" } else { "sampled" };
        match cmp.mismatch {
            Some(m) => Verification {
                ok: false,
                detail: format!("vs sequential reference: {m}"),
            },
            None => Verification {
                ok: true,
                detail: format!(
                    "{evaluated} subsets evaluated once; {} targets ({what}) vs sequential reference: \
                     {} same subset, {} equal-score ties, 0 wrong; planted regulators best for {planted}/{n} targets",
                    cmp.targets, cmp.same_subset, cmp.ties
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(inst: &Instance) -> Vec<Best> {
        inst.block(0, inst.units())
    }

    #[test]
    fn planted_regulators_are_found_on_small_instances() {
        for (seed, k) in [(1u64, 2u32), (2, 2), (3, 3)] {
            let inst = Instance::generate(seed, 12, 200, 3, k, DEFAULT_NOISE).unwrap();
            let result = whole(&inst);
            assert_eq!(
                inst.planted_found(&result),
                12,
                "seed {seed} k {k}: {result:?} vs {:?}",
                inst.regulators
            );
            // The reference finds them too.
            let d = inst.reference_data();
            let targets: Vec<usize> = (0..12).collect();
            for (t, b) in super::super::grn_ref::search(&d, k as usize, &targets)
                .iter()
                .enumerate()
            {
                assert_eq!(
                    b.subset,
                    inst.planted(t),
                    "reference, seed {seed} target {t}"
                );
            }
        }
    }

    #[test]
    fn kernel_equals_reference_on_medium_instances() {
        for (seed, n, m, levels, k) in [
            (7u64, 40u32, 80u32, 3u32, 2u32),
            (8, 22, 50, 3, 3),
            (9, 30, 40, 2, 2),
        ] {
            let inst = Instance::generate(seed, n, m, levels, k, 0.3).unwrap();
            let result = whole(&inst);
            let targets: Vec<usize> = (0..n as usize).collect();
            let cmp = inst.verify(&result, &targets);
            assert_eq!(cmp.mismatch, None, "seed {seed}");
            assert_eq!(cmp.targets, n as usize);
            assert_eq!(cmp.same_subset + cmp.ties, n as usize);
        }
    }

    #[test]
    fn blocks_merge_to_the_whole_result() {
        let inst = Instance::generate(11, 25, 60, 3, 3, 0.2).unwrap();
        let reference = whole(&inst);
        for block in [1u64, 7, 100, 999] {
            let mut acc = inst.empty_result();
            // Any order of the blocks gives the same merge: reverse order.
            let starts: Vec<u64> = (0..inst.units()).step_by(block as usize).collect();
            for &first in starts.iter().rev() {
                let len = block.min(inst.units() - first);
                let part = inst.block(first, len);
                inst.merge(&mut acc, &part);
            }
            assert_eq!(acc, reference, "block {block}");
            assert_eq!(inst.evaluated(&acc), inst.units());
        }
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let a = Instance::generate(5, 20, 30, 3, 2, 0.1).unwrap();
        let b = Instance::generate(5, 20, 30, 3, 2, 0.1).unwrap();
        let c = Instance::generate(6, 20, 30, 3, 2, 0.1).unwrap();
        assert_eq!(a.data, b.data);
        assert_eq!(a.regulators, b.regulators);
        assert_ne!(a.data, c.data);
        assert!(a.data.iter().all(|&v| v < 3));
        for g in 0..20 {
            let r = a.planted(g);
            assert!(r.windows(2).all(|w| w[0] < w[1]) && !r.contains(&g));
        }
        assert!(Instance::generate(1, 3, 10, 3, 3, 0.0).is_err());
        assert!(Instance::generate(1, 10, 5000, 3, 2, 0.0).is_err());
        assert!(Instance::generate(1, 10, 10, 5, 2, 0.0).is_err());
    }

    #[test]
    fn opencl_kernel_equals_c_kernel() {
        for (seed, n, m, k, block) in [(21u64, 30u32, 50u32, 2u32, 97u64), (22, 20, 64, 3, 333)] {
            match opencl_check(seed, n, m, 3, k, block) {
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
