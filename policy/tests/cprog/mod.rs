//! Builds the small C test programs of `tests/c/` against the installed
//! StarPU (with `cc` and `pkg-config`, as the build does), once per test
//! process, into Cargo's per-target temporary directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// pkg-config modules, newest first (as in the build scripts).
const MODULES: [&str; 2] = ["starpu-1.4", "starpu-1.3"];

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The executable built from `tests/c/<name>.c`, or `None` (with a message)
/// when `cc` or StarPU's pkg-config file is missing. A program that does
/// not compile fails the test.
pub fn build(name: &str) -> Option<PathBuf> {
    static BUILT: Mutex<Option<HashMap<String, Option<PathBuf>>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(done) = built.get(name) {
        return done.clone();
    }
    let result = compile(name);
    built.insert(name.to_string(), result.clone());
    result
}

fn compile(name: &str) -> Option<PathBuf> {
    let Some(module) = MODULES
        .iter()
        .find(|m| pkg_config(&["--exists", m]).is_some())
    else {
        eprintln!("skipped: pkg-config knows no StarPU module");
        return None;
    };
    let flags = pkg_config(&["--cflags", "--libs", module]).unwrap_or_default();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("plb-test-{name}"));
    let out = match Command::new("cc")
        .args(["-std=gnu11", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        // pkg-config escapes for a shell (StarPU 1.4's
        // -DSTARPU_OPENCL_DATADIR=\"...\"); no shell here, so unescape.
        .args(flags.split_whitespace().map(|a| a.replace("\\\"", "\"")))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: cannot run cc: {e}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}
