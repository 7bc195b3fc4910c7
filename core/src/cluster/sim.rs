//! The blocked matrix multiplication of the paper on a simulated
//! [`Cluster`]: kernel times for the partitioning ([`SimCluster`] is a
//! [`Bench`]), the application's time with a partition
//! ([`SimCluster::app_time`]), and an upper bound on its speed
//! ([`SimCluster::bound_gflops`]). SIMULATED; the cost model is in
//! `docs/cluster.md`:
//!
//! * device `j`, slice of `c` columns, panel of `r` rows and `b` columns:
//!   `launch + 2·r·b·c / (gflops · c / (c + half_cols))`, plus for a GPU
//!   the panels over its link (`(r·b + b·c)·8` bytes) and, when its slice
//!   of C does not fit in its memory (no out-of-core), the slice in and
//!   out every step (`2·r·c·8` bytes);
//! * a node whose A', B', C' (`3·r·bn·8` bytes) exceed its memory pages:
//!   its CPU times grow by `1 + 10·excess/need`;
//! * a pivot step costs a node `2·latency + (r·b + b·bn)·8 / bandwidth`
//!   for the panels it receives; the application takes `G` steps, each as
//!   long as the slowest node's communication plus kernel.

use super::cma::Rect;
use super::hierarchy::{Bench, NodePart};
use super::platform::{Cluster, DeviceKind};
use crate::rng::Rng;

/// Bytes per matrix element (double precision, as the paper's dgemm).
pub const ELEMENT_BYTES: f64 = 8.0;
/// Slowdown per unit of memory excess when a node pages.
pub const PAGING: f64 = 10.0;

/// A simulated cluster running the multiplication with block size `b`.
#[derive(Debug, Clone)]
pub struct SimCluster {
    pub cluster: Cluster,
    pub block: u64,
    /// Relative uniform noise on every measured kernel time.
    pub noise: f64,
    rng: Rng,
}

impl SimCluster {
    pub fn new(cluster: Cluster, block: u64, noise: f64, seed: u64) -> SimCluster {
        SimCluster {
            cluster,
            block,
            noise,
            rng: Rng::new(seed),
        }
    }

    /// True seconds of device `dev` of `node` for one pivot step on `rows`
    /// rows and `cols` columns, when the node holds `node_cols` columns.
    pub fn device_time(
        &self,
        node: usize,
        dev: usize,
        rows: u64,
        cols: u64,
        node_cols: u64,
    ) -> f64 {
        if cols == 0 || rows == 0 {
            return 0.0;
        }
        let n = &self.cluster.nodes[node];
        let c = &self.cluster.classes[n.devices[dev]];
        let (r, k, w) = (rows as f64, self.block as f64, cols as f64);
        let rate = c.gflops * 1e9 * w / (w + c.half_cols);
        let mut t = c.launch_us * 1e-6 + 2.0 * r * k * w / rate;
        if let Some((bw, us)) = c.link {
            let panels = (r * k + k * w) * ELEMENT_BYTES;
            t += 2.0 * us * 1e-6 + panels / (bw * 1e9);
            let slice = r * w * ELEMENT_BYTES;
            if let Some(mem) = c.mem_gb {
                if slice + panels > mem * 1e9 {
                    t += 2.0 * slice / (bw * 1e9);
                }
            }
        }
        if c.kind == DeviceKind::Cpu {
            let need = 3.0 * r * node_cols as f64 * ELEMENT_BYTES;
            let mem = n.mem_gb * 1e9;
            if need > mem {
                t *= 1.0 + PAGING * (need - mem) / need;
            }
        }
        t
    }

    /// True seconds of the node's kernel with this slicing (its slowest device).
    pub fn node_time(&self, node: usize, rows: u64, cols: &[u64]) -> f64 {
        let total: u64 = cols.iter().sum();
        (0..cols.len())
            .map(|j| self.device_time(node, j, rows, cols[j], total))
            .fold(0.0, f64::max)
    }

    /// Seconds a pivot step's panels take to reach a node of `rect`.
    pub fn comm_time(&self, rect: &Rect) -> f64 {
        if rect.area() == 0 {
            return 0.0;
        }
        let (bw, us) = self.cluster.network;
        let k = self.block as f64;
        let bytes = (rect.rows as f64 * k * k + k * rect.cols as f64 * k) * ELEMENT_BYTES;
        2.0 * us * 1e-6 + bytes / (bw * 1e9)
    }

    /// Seconds of the whole multiplication (`G` pivot steps) with `parts`.
    pub fn app_time(&self, grid: u64, parts: &[NodePart]) -> f64 {
        let step = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                self.comm_time(&p.rect) + self.node_time(i, p.rect.rows * self.block, &p.cols)
            })
            .fold(0.0, f64::max);
        grid as f64 * step
    }

    /// An upper bound on the multiplication's GFLOP/s: every device at
    /// its full dgemm rate, no communication, no memory limit.
    pub fn bound_gflops(&self) -> f64 {
        self.cluster
            .nodes
            .iter()
            .flat_map(|n| &n.devices)
            .map(|&d| self.cluster.classes[d].gflops)
            .sum()
    }
}

impl Bench for SimCluster {
    fn nodes(&self) -> usize {
        self.cluster.nodes.len()
    }

    fn devices(&self, node: usize) -> usize {
        self.cluster.nodes[node].devices.len()
    }

    fn kernel(&mut self, node: usize, rows: u64, cols: &[u64]) -> Vec<f64> {
        let total: u64 = cols.iter().sum();
        (0..cols.len())
            .map(|j| {
                let t = self.device_time(node, j, rows, cols[j], total);
                if self.noise > 0.0 && t > 0.0 {
                    let u = f64::from(self.rng.uniform_f32(-1.0, 1.0));
                    t * (1.0 + self.noise * u)
                } else {
                    t
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::hierarchy::{HierConfig, inpa};
    use crate::cluster::partition::{Algorithm, LevelConfig};

    fn run(algo: Algorithm, n: u64) -> (f64, f64) {
        // (simulated seconds, seconds at the speed bound)
        let b = 128;
        let mut sim = SimCluster::new(Cluster::grenoble(), b, 0.0, 1);
        let cfg = HierConfig {
            algo,
            grid: n / b,
            block: b,
            nodes: LevelConfig::default(),
            devices: LevelConfig::default(),
        };
        let out = inpa(&mut sim, &cfg).unwrap();
        let cover: u64 = out.parts.iter().map(|p| p.rect.area()).sum();
        assert_eq!(cover, (n / b) * (n / b));
        for (i, p) in out.parts.iter().enumerate() {
            assert_eq!(p.cols.iter().sum::<u64>(), p.rect.cols * b, "node {i}");
        }
        let flop = 2.0 * (n as f64).powi(3);
        (
            sim.app_time(n / b, &out.parts),
            flop / sim.bound_gflops() / 1e9,
        )
    }

    #[test]
    fn fpm_beats_the_baselines_on_grenoble() {
        let n = 128 * 400;
        let (fpm, bound) = run(Algorithm::Fpm, n);
        let (homo, _) = run(Algorithm::Homogeneous, n);
        let (single, _) = run(Algorithm::SingleCpm, n);
        assert!(fpm < 0.5 * homo, "fpm {fpm} homogeneous {homo}");
        assert!(fpm <= single * 1.02, "fpm {fpm} single-cpm {single}");
        assert!(fpm > bound, "fpm {fpm} faster than the bound {bound}");
        assert!(fpm < 1.3 * bound, "fpm {fpm} bound {bound}");
    }

    #[test]
    fn a_gpu_slice_beyond_its_memory_is_much_slower() {
        let sim = SimCluster::new(Cluster::grenoble(), 128, 0.0, 1);
        let c2050 = sim
            .cluster
            .nodes
            .iter()
            .position(|n| n.devices.len() == 7)
            .unwrap();
        let gpu = 6;
        let rows = 20_000;
        // 2.6 GB hold about 16,000 columns of 20,000 doubles.
        let fits = sim.device_time(c2050, gpu, rows, 15_000, 15_000) / 15_000.0;
        let spills = sim.device_time(c2050, gpu, rows, 17_000, 17_000) / 17_000.0;
        assert!(spills > 2.0 * fits, "{fits} {spills}");
    }
}
