//! The `PLB_*` tuning variables. They live in `plb-core`
//! ([`plb_core::balance::tuning`]): parsing needs no StarPU, and the
//! registry builds every balancer from them. This module re-exports them
//! for the adapter and for users of `starpu_plb::config`.

pub use plb_core::balance::tuning::{
    MinBlock, Tuning, TuningError, VARIABLES, Variable, WorkerKind, parse_duration_s,
};
