//! PLB: load-balancing scheduling policies for StarPU, written in Rust.
//!
//! Built as `libstarpu_plb.so`, the library is selected in unmodified
//! StarPU applications with `STARPU_SCHED=<policy>` (preloaded on StarPU
//! 1.3, `STARPU_SCHED_LIB` on 1.4; see `docs/architecture.md`).
//!
//! * [`catalog`]: the registered policy names (no StarPU needed).
//! * [`starpu`]: the adapter, the only module that touches StarPU.
//! * [`greedy`]: the greedy baseline policy.
//! * [`fifo`], [`stats`]: plain data structures the policies use.

pub mod catalog;
pub mod diagnostics;
pub mod fifo;
pub mod greedy;
pub mod starpu;
pub mod stats;

/// Starts `env_logger` once (filter from `RUST_LOG`; errors only by default).
pub fn init_logging() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error"))
        .try_init();
}
