//! How the preloaded library installs itself in StarPU 1.3 (see
//! `src/starpu/interpose.rs`): a policy named by `STARPU_SCHED` is used
//! without StarPU warning about an unknown name, the environment is never
//! rewritten, a second `starpu_init` in the same process gets the same
//! policy, and a context created with `STARPU_SCHED_CTX_POLICY_NAME` set to
//! one of our names gets ours. Runs `tests/c/reinit.c` under
//! `LD_PRELOAD=libstarpu_plb.so` (skipped with a message when the release
//! library, `cc` or StarPU's pkg-config file is missing).

mod cprog;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Tasks per session and context in `reinit.c`.
const NTASKS: u64 = 20;

fn setup() -> Option<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe().ok()?;
    let lib = exe.parent()?.parent()?.join("libstarpu_plb.so");
    if !lib.is_file() {
        eprintln!(
            "skipped: {} not found (cargo build --release)",
            lib.display()
        );
        return None;
    }
    let prog = cprog::build("reinit")?;
    Some((lib, prog))
}

fn run(lib: &Path, prog: &Path, sched: &str) -> Output {
    let home = std::env::temp_dir().join(format!(
        "plb-loading-test-home-{sched}-{}",
        starpu_sys::STARPU_SERIES
    ));
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(prog);
    // Each series' own way: 1.3 interposes starpu_initialize (LD_PRELOAD),
    // 1.4 dlopen()s STARPU_SCHED_LIB.
    let loader = if starpu_sys::STARPU_SERIES == "1.3" {
        "LD_PRELOAD"
    } else {
        "STARPU_SCHED_LIB"
    };
    cmd.env(loader, lib)
        .env("STARPU_SCHED", sched)
        .env("STARPU_NCPU", "2")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("STARPU_HOME", &home)
        .env("PLB_SUMMARY", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("PLB_") && k != "PLB_SUMMARY" {
            cmd.env_remove(k);
        }
    }
    cmd.output().expect("spawn the test program")
}

/// The integer `key=` of a summary line.
fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

#[test]
fn our_policies_are_selected_cleanly_at_every_init_and_by_context_name() {
    let Some((lib, prog)) = setup() else { return };
    for sched in ["greedy", "plb-hac"] {
        let out = run(&lib, &prog, sched);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sched}: {:?}: {err}", out.status);
        assert!(
            !err.contains("was not found") && !err.contains("Warning"),
            "{sched}: StarPU warned: {err}"
        );
        let summaries: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("plb: policy="))
            .collect();
        // Global context of each session, then the named context.
        assert_eq!(summaries.len(), 3, "{sched}: {err}");
        for s in &summaries {
            assert!(s.starts_with(&format!("plb: policy={sched} ")), "{s}");
            assert!(field(s, "executed") >= NTASKS, "{s}");
        }
        // Session 1's named context is deleted before its global one.
        let ctxs: Vec<u64> = summaries.iter().map(|s| field(s, "ctx")).collect();
        assert!(
            ctxs[0] == 0 && ctxs[1] != 0 && ctxs[2] == 0,
            "{sched}: contexts {ctxs:?}: {err}"
        );
    }
}

#[test]
fn starpu_policies_pass_through() {
    let Some((lib, prog)) = setup() else { return };
    let out = run(&lib, &prog, "eager");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("plb: policy="), "{err}");
    assert!(!err.contains("Warning"), "{err}");
    assert_eq!(err.matches("session").count(), 2, "{err}");
}
