//! The mathematics shared by every profile-based policy, as plain Rust with
//! no StarPU, no clock and no threads, so the StarPU adapter, the simulator
//! and the unit tests drive exactly the same code.
//!
//! Pipeline: [`samples`] (bounded, outlier-aware observations per PU) →
//! [`fit`] (execution-time curves F_p over the papers' basis functions and
//! transfer lines G_p) → [`model`] (the contract a fitted E_p = F_p + G_p
//! satisfies) → [`solve`] (equal-finish-time block sizes: IPOPT and a fast
//! exact solver) → [`rounding`] (whole application units).
//! [`baselines`] holds the HDSS and Acosta models. [`platform`] (hardware
//! from data files) and [`workload`] (application cost models) give the
//! simulator ([`balance::sim`]) its true curves. [`bench`] is the one
//! module that reads a clock: it times the fitter and the solvers for
//! `plb bench-solver`.
//!
//! [`sleepers`] is the wake-up discipline of every task-side policy, and
//! [`taskmode`] the scheduler of unmodified applications' tasks.
//!
//! No `unsafe` code: IPOPT is reached through the safe `plb-ipopt` crate.

#![forbid(unsafe_code)]

pub mod balance;
pub mod baselines;
pub mod bench;
pub mod cluster;
pub mod coexec;
pub mod cost_profile;
pub mod dag;
pub mod fit;
/// Double-precision references of the co-execution kernels (and their row costs).
pub mod kernels;
pub mod model;
pub mod paired;
pub mod platform;
pub mod policies;
pub mod rng;
pub mod rounding;
pub mod samples;
pub mod sleepers;
pub mod solve;
pub mod taskmode;
pub mod worker_queues;
pub mod workload;

/// The basis functions live with the fitter; `plb_core::basis` stays a path.
pub use fit::basis;
