//! Where the tests that run StarPU's example programs under the preloaded
//! library find both.

use std::path::{Path, PathBuf};

/// `libstarpu_plb.so` next to the test binary's profile directory and
/// StarPU's example `program` (of the StarPU this test was built for:
/// Debian's 1.3 in `/usr/lib/<triplet>/starpu/examples`, a 1.4 build's
/// under its prefix), or `None` with a message saying which is missing.
pub fn library_and_example(program: &str) -> Option<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/libstarpu_plb.so
    let lib = exe.parent()?.parent()?.join("libstarpu_plb.so");
    let prog = Path::new(starpu_sys::STARPU_LIBDIR)
        .join("starpu/examples")
        .join(program);
    if !lib.is_file() {
        eprintln!(
            "skipped: {} not found (run `cargo build --release` first)",
            lib.display()
        );
        return None;
    }
    if !prog.is_file() {
        eprintln!("skipped: {} not found (starpu-examples)", prog.display());
        return None;
    }
    Some((lib, prog))
}
