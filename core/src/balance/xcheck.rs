//! The workload of the cross-check of our simulator against StarPU-SimGrid
//! (`plb simgrid --xcheck`, docs/simgrid.md and docs/simgrid-xcheck.md):
//! affine per-kind block costs and, for a GPU, a host-to-device link. The
//! SimGrid side (`scripts/simgrid-xcheck.c`) is given the same numbers on
//! its command line.

use super::sim::SimPu;
use crate::model::LinearModel;

/// Units of work.
pub const UNITS: u64 = 10_000;
/// A CPU worker's block of `x` units: `CPU_FIXED_S + x·CPU_PER_UNIT_S`.
pub const CPU_FIXED_S: f64 = 100e-6;
pub const CPU_PER_UNIT_S: f64 = 1e-3;
/// A CUDA worker's block of `x` units: `GPU_FIXED_S + x·GPU_PER_UNIT_S`,
/// plus moving `x·BYTES_PER_UNIT` bytes to the GPU.
pub const GPU_FIXED_S: f64 = 30e-6;
pub const GPU_PER_UNIT_S: f64 = 50e-6;
pub const BYTES_PER_UNIT: u64 = 32 * 1024;
/// The balancers compared (PLB-HeC with the fast solver: IPOPT cannot run
/// under SimGrid).
pub const BALANCERS: [&str; 7] = [
    "greedy:W/64",
    "greedy:W/256",
    "plb-hac",
    "plb-hec:solver=fast",
    "hdss",
    "acosta",
    "static",
];

/// A worker's PU: a CUDA worker (`gpu`) moves `bytes_per_unit` bytes per
/// unit over a link of `bandwidth` bytes/s and `latency` s; a CPU worker
/// works in host memory.
pub fn pu(gpu: bool, bytes_per_unit: f64, bandwidth: f64, latency: f64) -> SimPu {
    if gpu {
        let mut pu = SimPu::new(LinearModel {
            fixed: GPU_FIXED_S,
            rate: 1.0 / GPU_PER_UNIT_S,
        });
        pu.transfer = Box::new(LinearModel {
            fixed: latency,
            rate: bandwidth / bytes_per_unit,
        });
        pu
    } else {
        SimPu::new(LinearModel {
            fixed: CPU_FIXED_S,
            rate: 1.0 / CPU_PER_UNIT_S,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::sim;

    #[test]
    fn gpu_pus_pay_the_link_and_cpu_pus_do_not() {
        let x = 100.0;
        let gpu = sim::true_time(&pu(true, BYTES_PER_UNIT as f64, 6e9, 10e-6), x);
        let expected = GPU_FIXED_S + x * GPU_PER_UNIT_S + 10e-6 + x * BYTES_PER_UNIT as f64 / 6e9;
        assert!((gpu - expected).abs() < 1e-12, "{gpu} vs {expected}");
        let cpu = sim::true_time(&pu(false, BYTES_PER_UNIT as f64, 6e9, 10e-6), x);
        assert!((cpu - (CPU_FIXED_S + x * CPU_PER_UNIT_S)).abs() < 1e-12);
    }
}
