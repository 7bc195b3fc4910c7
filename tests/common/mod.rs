//! What the command-line tests share: the `plb` executable without the
//! caller's StarPU and PLB settings, and a run's whole output.

use std::process::{Command, Output};

/// `plb`, with no inherited policy, preload, library or worker count.
pub fn plb() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plb"));
    for var in [
        "STARPU_SCHED",
        "LD_PRELOAD",
        "STARPU_SCHED_LIB",
        "PLB_LIBRARY",
        "PLB_SUMMARY",
        "STARPU_NCPU",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Standard output then standard error.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
