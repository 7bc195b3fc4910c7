//! Root build script: checks that StarPU is installed (the codelets in
//! `codelets/` will be compiled here with `cc` once the applications land).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let found = ["starpu-1.4", "starpu-1.3"].iter().any(|module| {
        Command::new("pkg-config")
            .args(["--exists", module])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    });
    if !found {
        panic!(
            "StarPU was not found by pkg-config (looked for starpu-1.4 and starpu-1.3). \
             On Debian install it with `apt-get install libstarpu-dev pkg-config`, \
             or run scripts/setup.sh."
        );
    }
}
