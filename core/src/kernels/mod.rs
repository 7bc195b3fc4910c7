//! Double-precision references of the co-execution kernels of `plb app`
//! (`binomial`, `nbody`, `mandelbrot`, `raytrace`): what the applications
//! verify their single-precision codelets against, and, for the irregular
//! two, the per-row cost profiles the simulator uses
//! ([`crate::workload::App::profile`]). Plain Rust, deterministic.

pub mod binomial;
pub mod mandelbrot;
pub mod nbody;
pub mod raytrace;
