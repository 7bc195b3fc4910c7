//! Raw FFI bindings to the StarPU installed on this machine.
//!
//! Generated at build time by bindgen from the headers that pkg-config
//! reports (`starpu-1.4` or `starpu-1.3`), so struct layouts always match
//! the installed library. Exactly one of the cfgs `starpu_1_3` and
//! `starpu_1_4` is set. StarPU's function-like macros are reachable through
//! the `plb_*` C wrappers compiled from `src/wrappers.c`.
// Raw bindings are nothing but FFI declarations, helpers over them and the
// tests of their layouts: unsafe code is this crate's purpose.
#![allow(unsafe_code)]
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]

/// bindgen's output, re-exported whole. Its generated unsafe blocks (bitfield
/// accessors) carry no `// SAFETY:` comments, hence the allowance here
/// only; the hand-written code below is still checked.
#[allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn
)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
pub use bindings::*;

include!(concat!(env!("OUT_DIR"), "/install.rs"));

/// The StarPU API series these bindings were generated for.
#[cfg(starpu_1_3)]
pub const STARPU_SERIES: &str = "1.3";
/// The StarPU API series these bindings were generated for.
#[cfg(starpu_1_4)]
pub const STARPU_SERIES: &str = "1.4";

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// bindgen's layouts must equal the C compiler's for every struct the
    /// policy library reads or writes (they differ between StarPU 1.3 and
    /// 1.4, so a stale or mismatched binding would corrupt memory).
    #[test]
    fn struct_layouts_match_the_c_compiler() {
        let rust = [
            size_of::<starpu_sched_policy>(),
            offset_of!(starpu_sched_policy, policy_name),
            offset_of!(starpu_sched_policy, worker_type),
            size_of::<starpu_conf>(),
            offset_of!(starpu_conf, sched_policy),
            offset_of!(starpu_conf, sched_policy_name),
            size_of::<starpu_task>(),
            offset_of!(starpu_task, sched_ctx),
            size_of::<starpu_codelet>(),
        ];
        for (what, expected) in rust.iter().enumerate() {
            // SAFETY: pure function returning a constant.
            let c = unsafe { plb_c_layout(what as u32) };
            assert_eq!(
                c, *expected,
                "layout item {what} differs between C and Rust"
            );
        }
    }

    #[test]
    fn build_limits_are_sane() {
        // SAFETY: pure functions returning constants of the StarPU build.
        let (workers, ctxs) = unsafe { (plb_nmaxworkers(), plb_nmax_sched_ctxs()) };
        assert!(
            workers >= 1 && ctxs >= 1,
            "workers {workers}, contexts {ctxs}"
        );
    }
}
