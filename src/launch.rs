//! Running a program under one of our policies: where the library is and
//! which environment selects it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use starpu_plb::catalog;

/// File name of the policy library.
pub const LIBRARY_FILE: &str = "libstarpu_plb.so";

/// Finds `libstarpu_plb.so`: `$PLB_LIBRARY` when set, else next to the `plb`
/// executable (cargo puts both in `target/<profile>/`), else in `../lib`.
pub fn find_library() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("PLB_LIBRARY") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "PLB_LIBRARY={} does not name a file",
                path.display()
            ))
        };
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the plb executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(LIBRARY_FILE),
        dir.join("../lib").join(LIBRARY_FILE),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "{LIBRARY_FILE} not found (looked in {} and {}); build it with `cargo build --release` \
             or point PLB_LIBRARY at it",
            candidates[0].display(),
            candidates[1].display()
        )
    })
}

/// How a StarPU program is made to use one of our policies.
#[derive(Debug, Clone)]
pub struct PolicySelection {
    /// The `STARPU_SCHED` value.
    pub sched: String,
    /// The library to load, when the policy is ours (None for StarPU's own).
    pub library: Option<PathBuf>,
}

impl PolicySelection {
    /// Selects `sched`: ours (needs the library) or any other name, which is
    /// passed to StarPU untouched (e.g. `eager`, `dmda`).
    pub fn new(sched: &str) -> Result<Self, String> {
        check_policy_name(sched)?;
        let library = if catalog::find(sched).is_some() {
            Some(find_library()?)
        } else {
            None
        };
        Ok(PolicySelection {
            sched: sched.to_string(),
            library,
        })
    }

    /// Whether the policy is one of ours.
    pub fn is_ours(&self) -> bool {
        self.library.is_some()
    }

    /// Sets the environment of `cmd`: `STARPU_SCHED`, and for our policies
    /// the library ([`load_library`], for the StarPU this `plb` was built
    /// against). Every other variable, STARPU_* included, is inherited.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("STARPU_SCHED", &self.sched);
        if let Some(lib) = &self.library {
            load_library(cmd, lib, starpu_plb::STARPU_SERIES == "1.3");
        }
    }
}

/// Makes `cmd` load our library `lib`: StarPU 1.3 (`preload`) has no
/// policy plug-in, so the library is preloaded (before any `LD_PRELOAD`
/// already set) and interposes StarPU's policy lookup; 1.4 loads
/// `STARPU_SCHED_LIB`.
pub fn load_library(cmd: &mut Command, lib: &Path, preload: bool) {
    if preload {
        let mut value = OsString::from(lib.as_os_str());
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            value.push(":");
            value.push(old);
        }
        cmd.env("LD_PRELOAD", value);
    } else {
        cmd.env("STARPU_SCHED_LIB", lib);
    }
}

/// The cargo target directory this `plb` runs from (`target/` for
/// `target/release/plb`): the StarPU 1.4 builds of our library are in its
/// `starpu14-<build>/release/`.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new("target").to_path_buf())
}

/// Our library built against this project's StarPU 1.4 build `build`
/// (`native`, `simgrid`, `cuda`; `scripts/starpu14.sh`).
pub fn starpu14_library(build: &str) -> PathBuf {
    target_dir()
        .join(format!("starpu14-{build}/release"))
        .join(LIBRARY_FILE)
}

/// Removes from `cmd`'s environment every inherited `STARPU_*` and `PLB_*`
/// variable and `LD_PRELOAD`, so that only what the caller sets applies.
pub fn clear_starpu_settings(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("STARPU_") || n.starts_with("PLB_") || n == "LD_PRELOAD" {
            cmd.env_remove(&name);
        }
    }
}

/// Checks that StarPU (with this library loaded) knows policy `name`.
pub fn check_policy_name(name: &str) -> Result<(), String> {
    let known = starpu_plb::starpu::known_policies();
    if known.iter().any(|(n, _)| n == name) {
        return Ok(());
    }
    let theirs: Vec<&str> = known
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| catalog::find(n).is_none())
        .collect();
    Err(format!(
        "unknown policy '{name}'. Ours: {}. StarPU's: {}",
        catalog::names(),
        theirs.join(", ")
    ))
}
