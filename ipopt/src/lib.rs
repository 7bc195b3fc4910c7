//! A safe interface to IPOPT, the interior-point solver of smooth
//! nonlinear programs, over the C API of `ipopt-sys` (its `cnlp_*`
//! functions). Nothing here knows about StarPU or PLB.
//!
//! Implement [`Nlp`] for a problem
//!
//! ```text
//! minimise f(x), x ∈ ℝⁿ,   subject to   g_L ≤ g(x) ≤ g_U,   x_L ≤ x ≤ x_U
//! ```
//!
//! (values, gradient, sparse constraint Jacobian, sparse lower triangle of
//! the Lagrangian's Hessian), choose IPOPT [`Options`] and call [`solve()`].
//!
//! This crate holds all of PLB's `unsafe` IPOPT code: the raw calls in
//! `solve.rs` and the `extern "C"` callbacks in `callbacks.rs`, each block
//! with a `// SAFETY:` comment (enforced by
//! `clippy::undocumented_unsafe_blocks`). The guarantees it gives:
//!
//! * every slice handed to an [`Nlp`] method has the length the problem
//!   declared (IPOPT's sizes are checked against it first);
//! * an [`Nlp`] method that returns `Err` or panics makes the callback
//!   answer "evaluation failed" to IPOPT; nothing unwinds into C++, and the
//!   first message is kept in [`Solution::failure`];
//! * IPOPT (with MUMPS) keeps global state and is not thread-safe, so
//!   [`solve()`] holds a process-wide lock for the whole solve: concurrent
//!   callers wait. An [`Nlp`] method must therefore not call [`solve()`].
//! * the IPOPT problem is freed on every path.

#![deny(clippy::undocumented_unsafe_blocks)]

mod callbacks;
mod nlp;
mod options;
mod solve;
mod status;

pub use nlp::Nlp;
pub use options::{OptionValue, Options};
pub use solve::{Error, Solution, solve};
pub use status::Status;
