//! Link flags for the policy library.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // StarPU 1.4 dlopen()s and dlclose()s the STARPU_SCHED_LIB library on
    // every lookup; our policy structs and threads must outlive that.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
