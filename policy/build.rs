//! Link flags for the policy library, and the StarPU series as a cfg.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // StarPU 1.4 dlopen()s and dlclose()s the STARPU_SCHED_LIB library on
    // every lookup; our policy structs and threads must outlive that.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    // starpu-sys (`links = "starpu"`) reports the pkg-config module it was
    // generated from; `starpu_1_3` guards the interposition of StarPU 1.3
    // internals (see src/starpu/interpose.rs).
    println!("cargo:rustc-check-cfg=cfg(starpu_1_3)");
    // PLB_EMBEDDED=1: the library is linked statically into a program
    // together with a static StarPU (StarPU-MPI under SimGrid's SMPI,
    // scripts/smpi-dist.sh): StarPU's own symbols that the shared library
    // interposes (starpu_initialize, starpu_task_submit, ...) keep their
    // Rust names instead, so they do not clash with StarPU's.
    println!("cargo:rustc-check-cfg=cfg(plb_embedded)");
    println!("cargo:rerun-if-env-changed=PLB_EMBEDDED");
    if std::env::var("PLB_EMBEDDED").is_ok_and(|v| v == "1") {
        println!("cargo:rustc-cfg=plb_embedded");
    }
    println!("cargo:rerun-if-env-changed=DEP_STARPU_VERSION");
    if std::env::var("DEP_STARPU_VERSION").is_ok_and(|v| v == "starpu-1.3") {
        println!("cargo:rustc-cfg=starpu_1_3");
    }
}
