//! Raw FFI bindings to the StarPU installed on this machine.
//!
//! Generated at build time by bindgen from the headers that pkg-config
//! reports (`starpu-1.4` or `starpu-1.3`), so struct layouts always match
//! the installed library. Exactly one of the cfgs `starpu_1_3` and
//! `starpu_1_4` is set. StarPU's function-like macros are reachable through
//! the `plb_*` C wrappers compiled from `src/wrappers.c`.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(clippy::all, unsafe_op_in_unsafe_fn)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// The StarPU API series these bindings were generated for.
#[cfg(starpu_1_3)]
pub const STARPU_SERIES: &str = "1.3";
/// The StarPU API series these bindings were generated for.
#[cfg(starpu_1_4)]
pub const STARPU_SERIES: &str = "1.4";
