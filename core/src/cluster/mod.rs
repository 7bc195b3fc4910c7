//! Partitioning across nodes: the two-level (nodes, then the devices of a
//! node) scheme of Clarke, Ilic, Lastovetsky and Sousa
//! (`../shared/papers/hierarchical-fpm-partitioning.md`), with PLB-HAC's
//! models as an alternative and the paper's baselines.
//!
//! * [`fpm`]: partial speed functions;
//! * [`gpa`]: the Geometric Partitioning Algorithm (and the CPM and even
//!   splits);
//! * [`cma`]: the Communication Minimising Algorithm (column-based 2-D
//!   arrangement of the nodes' areas);
//! * [`partition`]: one level's iterative loop, per algorithm;
//! * [`hierarchy`]: the INPA with the IDPA nested, against a [`Bench`];
//! * [`protocol`]: the same over the ranks of a [`comm::Comm`] (MPI), one
//!   rank per node;
//! * [`platform`] and [`sim`]: the simulated two-level cluster (nodes of
//!   devices, a network) and the matrix multiplication on it.
//!
//! Everything here is plain Rust without a clock: the MPI application and
//! the simulator drive the same code.

pub mod cma;
pub mod comm;
pub mod fpm;
pub mod gpa;
pub mod hierarchy;
pub mod partition;
pub mod platform;
pub mod protocol;
pub mod sim;

pub use hierarchy::{Bench, HierConfig, HierError, HierOutcome, NodePart, Round, inpa, inpa_with};
pub use partition::{Algorithm, Level, LevelConfig, Outcome, Step};
