//! Application cost models: what one work unit of the papers' applications
//! costs (floating-point work, memory traffic, data moved, parallelism),
//! and the true per-PU curves they give on a [`Platform`] — the input of
//! [`simulate`](crate::balance::sim::simulate) and of the exact optimum
//! ([`optimum_split`](crate::balance::sim::optimum_split)). Every number
//! is a derivation from published peaks plus stated assumptions
//! (`docs/simulator.md`), never a measurement.
//!
//! # The curve of a PU
//!
//! With `F` the PU's peak FP32 flop/s times the compute efficiency of the
//! application on that kind of device, `B` its memory bandwidth times the
//! memory efficiency, a block of `x` units costs (roofline, plus fixed
//! costs):
//!
//! ```text
//! compute(x)  = launch + max( flops·w(x) / F , (bytes_block + bytes·w(x)) / B )
//! transfer(x) = [data path] latency + x · link_bytes / bandwidth
//! w(x)        = x / (1 − exp(−x / x_fill)),   x_fill = cores · threads_per_core / parallelism
//! ```
//!
//! `w(x)` is the occupancy ramp: a block too small to give every hardware
//! thread of the device work still costs about one full pass (`w(0) =
//! x_fill`), and `w(x) → x` once the block fills the device several times
//! over — the size-dependent efficiency of the papers' Fig. 2 (GPU curves
//! flat for small blocks, then linear). `bytes_block` is traffic paid once
//! per block whatever its size (matrix multiplication streams `A` once per
//! block), which makes small blocks memory-bound. All three terms are
//! non-decreasing with `time(x)/x` non-increasing, so every curve is
//! subadditive and the one-block-per-PU optimum is a true lower bound of a
//! noise-free run without speed changes.

use std::sync::Arc;

use crate::balance::sim::SimPu;
use crate::cost_profile::CostProfile;
use crate::model::{LinearModel, TimeModel};
use crate::platform::{Link, Platform, PuClass, PuKind};

/// An application of the papers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum App {
    /// `C = B · A` for `n × n` FP32 matrices, `A` copied to every PU before
    /// the run, `B` and `C` split by rows; a unit is one row.
    MatMul {
        /// Matrix order.
        n: u64,
    },
    /// Gene regulatory network inference by exhaustive search of predictor
    /// pairs; a unit is one target gene (`genes²/2` pairs evaluated).
    Grn {
        /// Number of genes.
        genes: u64,
        /// Operations to evaluate one predictor pair (criterion function).
        ops_per_pair: f64,
    },
    /// Lloyd's k-means; a unit is one point through every iteration.
    KMeans {
        /// Clusters.
        k: u32,
        /// Dimensions.
        dims: u32,
        /// Iterations.
        iterations: u32,
    },
    /// Closed-form Black-Scholes pricing; a unit is one option (call and
    /// put).
    BlackScholes,
    /// Binomial-lattice (CRR) pricing with `steps` time steps; a unit is
    /// one option. Regular.
    Binomial {
        /// Time steps of the lattice.
        steps: u32,
    },
    /// One all-pairs N-body step; a unit is one body (its acceleration
    /// from every body). Regular.
    NBody {
        /// Bodies.
        bodies: u64,
    },
    /// A `size × size` Mandelbrot image (`plb app mandelbrot`'s region and
    /// iteration cap); a unit is one row. Irregular: its cost profile is
    /// the iterations per row ([`App::profile`]).
    Mandelbrot {
        /// Rows (= columns).
        size: u64,
    },
    /// A `size × size` ray-traced image (`plb app raytrace`'s scene); a
    /// unit is one row. Irregular: its profile is the ray-sphere tests per
    /// row.
    RayTrace {
        /// Rows (= columns).
        size: u64,
    },
}

/// Rows and columns at which the irregular kernels' cost profiles are
/// sampled (a 256 x 256 rendering: milliseconds).
pub const PROFILE_SAMPLE: usize = 256;

/// The applications of the first papers (PLB-HAC, PLB-HeC): the
/// simulated experiments 1-5 run these.
pub const PAPER_APPS: [&str; 4] = ["mm", "grn", "kmeans", "blackscholes"];

/// The co-execution kernels of the Sigmoid paper (`plb experiment coexec`).
pub const COEXEC_APPS: [&str; 4] = ["binomial", "nbody", "mandelbrot", "raytrace"];

/// Names accepted by [`App::parse`].
pub const APPS: [&str; 8] = [
    "mm",
    "grn",
    "kmeans",
    "blackscholes",
    "binomial",
    "nbody",
    "mandelbrot",
    "raytrace",
];

/// What one work unit costs on any device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitCost {
    /// FP32 operations per unit.
    pub flops: f64,
    /// Device-memory bytes per unit.
    pub mem_bytes: f64,
    /// Device-memory bytes per block, whatever its size.
    pub block_bytes: f64,
    /// Bytes moved to and from the PU per unit.
    pub link_bytes: f64,
    /// Independent threads of work in one unit.
    pub parallelism: f64,
}

impl App {
    /// The application with our default parameters, by name ([`APPS`]).
    pub fn parse(name: &str) -> Option<App> {
        Some(match name {
            "mm" => App::MatMul { n: 65_536 },
            "grn" => App::Grn {
                genes: 140_000,
                ops_per_pair: 1.0,
            },
            "kmeans" => App::KMeans {
                k: 32,
                dims: 16,
                iterations: 100,
            },
            "blackscholes" => App::BlackScholes,
            "binomial" => App::Binomial { steps: 254 },
            "nbody" => App::NBody { bodies: 1 << 20 },
            "mandelbrot" => App::Mandelbrot { size: 16_384 },
            "raytrace" => App::RayTrace { size: 8_192 },
            _ => return None,
        })
    }

    /// Short name.
    pub fn name(&self) -> &'static str {
        match self {
            App::MatMul { .. } => "mm",
            App::Grn { .. } => "grn",
            App::KMeans { .. } => "kmeans",
            App::BlackScholes => "blackscholes",
            App::Binomial { .. } => "binomial",
            App::NBody { .. } => "nbody",
            App::Mandelbrot { .. } => "mandelbrot",
            App::RayTrace { .. } => "raytrace",
        }
    }

    /// Units of the papers' largest input: 65,536 rows (MM), 140,000 genes
    /// (GRN), 500,000 points (k-means, PLB-HAC §5.2), 500,000 options
    /// (Black-Scholes, PLB-HeC §V).
    pub fn paper_units(&self) -> u64 {
        match *self {
            App::MatMul { n } => n,
            App::Grn { genes, .. } => genes,
            App::KMeans { .. } | App::BlackScholes => 500_000,
            App::Binomial { .. } => 4 << 20,
            App::NBody { bodies } => bodies,
            App::Mandelbrot { size } | App::RayTrace { size } => size,
        }
    }

    /// Cost of one unit (FP32 throughout; derivation in
    /// `docs/simulator.md`).
    pub fn cost(&self) -> UnitCost {
        match *self {
            App::MatMul { n } => {
                let n = n as f64;
                UnitCost {
                    flops: 2.0 * n * n,
                    mem_bytes: 8.0 * n,
                    block_bytes: 4.0 * n * n,
                    link_bytes: 8.0 * n,
                    parallelism: n,
                }
            }
            App::Grn {
                genes,
                ops_per_pair,
            } => {
                let pairs = 0.5 * genes as f64 * genes as f64;
                UnitCost {
                    flops: pairs * ops_per_pair,
                    mem_bytes: 0.0,
                    block_bytes: 0.0,
                    link_bytes: 16.0,
                    parallelism: pairs,
                }
            }
            App::KMeans {
                k,
                dims,
                iterations,
            } => {
                let (k, d, it) = (k as f64, dims as f64, iterations as f64);
                UnitCost {
                    flops: it * (3.0 * k * d + d),
                    mem_bytes: it * 4.0 * (d + 1.0),
                    block_bytes: 0.0,
                    link_bytes: 4.0 * (d + 1.0),
                    parallelism: 1.0,
                }
            }
            App::BlackScholes => UnitCost {
                flops: 150.0,
                mem_bytes: 20.0,
                block_bytes: 0.0,
                link_bytes: 20.0,
                parallelism: 1.0,
            },
            // steps·(steps+1)/2 node updates of 3 flops each.
            App::Binomial { steps } => {
                let s = f64::from(steps);
                UnitCost {
                    flops: 1.5 * s * (s + 1.0),
                    mem_bytes: 16.0,
                    block_bytes: 0.0,
                    link_bytes: 16.0,
                    parallelism: 1.0,
                }
            }
            // 20 flops per interaction; the positions (16 B per body) are
            // streamed once per block.
            App::NBody { bodies } => {
                let b = bodies as f64;
                UnitCost {
                    flops: 20.0 * b,
                    mem_bytes: 32.0,
                    block_bytes: 16.0 * b,
                    link_bytes: 16.0,
                    parallelism: 1.0,
                }
            }
            // 10 flops per iteration, the mean iterations per pixel of the
            // sampled rendering; 4 bytes out per pixel.
            App::Mandelbrot { size } => {
                let cols = size as f64;
                let per_pixel = mean_per_pixel(&crate::kernels::mandelbrot::row_costs(
                    PROFILE_SAMPLE,
                    PROFILE_SAMPLE,
                ));
                UnitCost {
                    flops: 10.0 * per_pixel * cols,
                    mem_bytes: 4.0 * cols,
                    block_bytes: 0.0,
                    link_bytes: 4.0 * cols,
                    parallelism: cols,
                }
            }
            // 30 flops per ray-sphere test; 12 bytes (RGB) out per pixel.
            App::RayTrace { size } => {
                let cols = size as f64;
                let per_pixel = mean_per_pixel(&crate::kernels::raytrace::row_costs(
                    PROFILE_SAMPLE,
                    PROFILE_SAMPLE,
                ));
                UnitCost {
                    flops: 30.0 * per_pixel * cols,
                    mem_bytes: 12.0 * cols,
                    block_bytes: 0.0,
                    link_bytes: 12.0 * cols,
                    parallelism: cols,
                }
            }
        }
    }

    /// The per-row cost profile of an irregular kernel (`None`: regular).
    pub fn profile(&self) -> Option<CostProfile> {
        let rows = match self {
            App::Mandelbrot { .. } => {
                crate::kernels::mandelbrot::row_costs(PROFILE_SAMPLE, PROFILE_SAMPLE)
            }
            App::RayTrace { .. } => {
                crate::kernels::raytrace::row_costs(PROFILE_SAMPLE, PROFILE_SAMPLE)
            }
            _ => return None,
        };
        CostProfile::new(&rows).ok()
    }

    /// Fraction of peak FP32 flop/s the application reaches on `kind`
    /// (assumptions, `docs/simulator.md`).
    pub fn compute_efficiency(&self, kind: PuKind) -> f64 {
        use PuKind::*;
        match (self, kind) {
            (App::MatMul { .. }, Cpu) => 0.85,
            (App::MatMul { .. }, Gpu) => 0.70,
            (App::MatMul { .. }, Phi) => 0.65,
            (App::Grn { .. }, Cpu) => 0.40,
            (App::Grn { .. }, Gpu) => 0.25,
            (App::Grn { .. }, Phi) => 0.20,
            (App::KMeans { .. }, Cpu) => 0.50,
            (App::KMeans { .. }, Gpu) => 0.50,
            (App::KMeans { .. }, Phi) => 0.35,
            (App::BlackScholes, Cpu) => 0.30,
            (App::BlackScholes, Gpu) => 0.40,
            (App::BlackScholes, Phi) => 0.25,
            (App::Binomial { .. }, Cpu) => 0.40,
            (App::Binomial { .. }, Gpu) => 0.50,
            (App::Binomial { .. }, Phi) => 0.30,
            (App::NBody { .. }, Cpu) => 0.50,
            (App::NBody { .. }, Gpu) => 0.60,
            (App::NBody { .. }, Phi) => 0.40,
            // Divergent loops: SIMD lanes and warps wait for the slowest
            // pixel.
            (App::Mandelbrot { .. }, Cpu) => 0.30,
            (App::Mandelbrot { .. }, Gpu) => 0.35,
            (App::Mandelbrot { .. }, Phi) => 0.20,
            (App::RayTrace { .. }, Cpu) => 0.25,
            (App::RayTrace { .. }, Gpu) => 0.20,
            (App::RayTrace { .. }, Phi) => 0.15,
        }
    }
}

/// Fraction of peak memory bandwidth a streaming kernel reaches on `kind`
/// (STREAM-like; assumptions, `docs/simulator.md`).
pub fn memory_efficiency(kind: PuKind) -> f64 {
    match kind {
        PuKind::Cpu => 0.80,
        PuKind::Gpu => 0.75,
        PuKind::Phi => 0.60,
    }
}

/// The true compute curve of one PU for one application (formula in the
/// module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceCurve {
    /// Fixed seconds per block.
    pub launch_s: f64,
    /// Compute seconds per (effective) unit.
    pub compute_s: f64,
    /// Memory seconds per (effective) unit.
    pub memory_s: f64,
    /// Memory seconds per block.
    pub block_memory_s: f64,
    /// Units that fill the device once (0: no ramp).
    pub fill: f64,
}

impl DeviceCurve {
    /// The curve of a PU of `class` running `app`.
    pub fn new(class: &PuClass, app: &App) -> DeviceCurve {
        let c = app.cost();
        let flops = class.peak_gflops() * 1e9 * app.compute_efficiency(class.kind);
        let bw = class.mem_gb_s * 1e9 * memory_efficiency(class.kind);
        DeviceCurve {
            launch_s: class.launch_us * 1e-6,
            compute_s: c.flops / flops,
            memory_s: c.mem_bytes / bw,
            block_memory_s: c.block_bytes / bw,
            fill: class.cores * class.kind.threads_per_core() / c.parallelism,
        }
    }

    /// Effective units `w(x)` (occupancy ramp).
    pub fn effective_units(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        if self.fill <= 0.0 {
            return x;
        }
        let u = x / self.fill;
        if u < 1e-6 {
            self.fill * (1.0 + 0.5 * u + u * u / 12.0)
        } else {
            x / -(-u).exp_m1()
        }
    }

    fn effective_slope(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        if self.fill <= 0.0 {
            return 1.0;
        }
        let u = x / self.fill;
        if u < 1e-4 {
            0.5 + u / 6.0
        } else if u > 700.0 {
            1.0
        } else {
            let q = -(-u).exp_m1();
            (q - u * (-u).exp()) / (q * q)
        }
    }

    fn memory_bound(&self, w: f64) -> bool {
        self.block_memory_s + self.memory_s * w > self.compute_s * w
    }
}

impl TimeModel for DeviceCurve {
    fn time(&self, x: f64) -> f64 {
        let w = self.effective_units(x);
        self.launch_s + (self.compute_s * w).max(self.block_memory_s + self.memory_s * w)
    }

    fn slope(&self, x: f64) -> f64 {
        let w = self.effective_units(x);
        let per_unit = if self.memory_bound(w) {
            self.memory_s
        } else {
            self.compute_s
        };
        per_unit * self.effective_slope(x)
    }
}

/// The true transfer line of a PU whose data takes `path` (`None`: nothing
/// moves).
pub fn transfer_line(path: Option<Link>, app: &App) -> LinearModel {
    match path {
        Some(l) => LinearModel {
            fixed: l.latency_us * 1e-6,
            rate: l.gb_s * 1e9 / app.cost().link_bytes,
        },
        None => LinearModel {
            fixed: 0.0,
            rate: f64::INFINITY,
        },
    }
}

/// One simulated PU per PU of `platform`, in [`Platform::pus`] order, with
/// its true compute curve, transfer line, noise and speed changes.
pub fn sim_pus(platform: &Platform, app: &App) -> Vec<SimPu> {
    let profile = app.profile().map(Arc::new);
    platform
        .pus()
        .into_iter()
        .map(|r| {
            let class = &platform.classes[r.class];
            let mut pu = SimPu::new(DeviceCurve::new(class, app));
            pu.transfer = Box::new(transfer_line(r.path, app));
            pu.noise = class.noise;
            pu.speed_changes = class.changes.clone();
            pu.profile = profile.clone();
            pu
        })
        .collect()
}

/// Mean of a sampled rendering's per-row totals, per pixel.
fn mean_per_pixel(row_costs: &[f64]) -> f64 {
    let total: f64 = row_costs.iter().sum();
    (total / (PROFILE_SAMPLE * PROFILE_SAMPLE) as f64).max(1.0)
}
