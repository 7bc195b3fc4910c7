//! PLB: load-balancing scheduling policies for StarPU, written in Rust.
//!
//! Built as `libstarpu_plb.so`, the library is selected in unmodified
//! StarPU applications with `STARPU_SCHED=<policy>` (preloaded on StarPU
//! 1.3, `STARPU_SCHED_LIB` on 1.4; see `docs/architecture.md`).
//!
//! * [`catalog`]: the registered policy names (`plb-core`'s registry; no
//!   StarPU needed).
//! * [`starpu`]: the adapter, the only module that touches StarPU.
//! * [`central_queue`]: the `greedy` policy (central FIFO).
//! * [`task_mode`]: every other registry name in task mode (the scheduler
//!   itself is `plb_core::taskmode`).
//! * [`dag_mode`]: the task-graph policies `plb-heft`, `dada`, `dada-cp`
//!   (the placement itself is `plb_core::dag`).
//! * [`divisible`]: the divisible-load API (blocks of `W` units for the
//!   application to submit; C header `include/plb_divisible.h`), on
//!   `plb-core`'s protocol driver.
//! * [`locked_lines`]: each worker's queue behind its own lock (task mode
//!   and the task-graph policies).
//! * [`fifo`], [`stats`]: plain data structures the policies use.
//! * [`trace`], [`graph_record`]: the `PLB_TRACE` and `PLB_GRAPH` files.

// Linked statically into a program with StarPU (PLB_EMBEDDED=1, see
// build.rs), the interposed StarPU entry points are not exported, and what
// only they reach is unused.
#![cfg_attr(plb_embedded, allow(dead_code))]

pub mod catalog;
pub mod central_queue;
pub mod config;
pub mod dag_mode;
pub mod diagnostics;
pub mod divisible;
pub mod emulation_spec;
pub mod fifo;
pub mod gauges;
pub mod graph_record;
pub mod hold_time;
pub mod locked_lines;
pub mod model_file;
pub mod padded;
pub mod starpu;
pub mod stats;
pub mod task_mode;
pub mod trace;

/// StarPU's description of catalog entry `info`: the policy type of the
/// family that decides for it (the only place that names the policy types;
/// the adapter under [`starpu`] knows only the [`starpu::SchedPolicy`]
/// trait).
pub(crate) fn policy_struct(info: &'static catalog::PolicyInfo) -> starpu_sys::starpu_sched_policy {
    match info.decider() {
        catalog::Decider::CentralQueue => {
            starpu::policy_struct::<central_queue::CentralQueuePolicy>(info)
        }
        catalog::Decider::Epochs(_) => starpu::policy_struct::<task_mode::TaskModePolicy>(info),
        catalog::Decider::Graph(_) => starpu::policy_struct::<dag_mode::DagPolicy>(info),
    }
}

/// Starts `env_logger` once (filter from `RUST_LOG`; errors only by default).
pub fn init_logging() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error"))
        .try_init();
}

/// The StarPU API series the library was built against ("1.3" or "1.4"):
/// 1.3 loads policies by `LD_PRELOAD`, 1.4 by `STARPU_SCHED_LIB`.
pub const STARPU_SERIES: &str = starpu_sys::STARPU_SERIES;
