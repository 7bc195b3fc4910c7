//! How the preloaded library installs itself in StarPU 1.3 (see
//! `src/starpu/interpose.rs`): a policy named by `STARPU_SCHED` is used
//! without StarPU warning about an unknown name, the environment is never
//! rewritten, a second `starpu_init` in the same process gets the same
//! policy, and a context created with `STARPU_SCHED_CTX_POLICY_NAME` set to
//! one of our names gets ours. Runs `tests/c/reinit.c` under
//! `LD_PRELOAD=libstarpu_plb.so` (skipped with a message when the release
//! library, `cc` or StarPU's pkg-config file is missing).
//!
//! Also what the library refuses instead of letting StarPU run its default
//! policy: one of our names with arguments or misspelled (in `STARPU_SCHED`
//! or as a context's policy name), and a libstarpu other than the one it
//! was built for (the other builds of this workspace, when present); and
//! the summary of a context of ours that a program bypasses with contexts
//! of its own (`tests/c/own_context.c`).

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
    run_env(lib, prog, sched, &[])
}

/// [`run`] with more environment variables.
fn run_env(lib: &Path, prog: &Path, sched: &str, env: &[(&str, &str)]) -> Output {
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
    cmd.envs(env.iter().copied());
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

#[test]
fn our_names_with_arguments_or_misspelled_are_refused() {
    let Some((lib, prog)) = setup() else { return };
    // StarPU alone would warn "scheduling policy ... was not found" and run
    // its default policy: the library stops the program instead.
    for (sched, near) in [
        ("plb-heft:bogus=1", "no arguments"),
        ("plb-hac:solver=fast", "no arguments"),
        ("plb-hax", "did you mean `plb-hac`?"),
        ("Greedy", "did you mean `greedy`?"),
    ] {
        let out = run(&lib, &prog, sched);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sched}: {:?}: {err}", out.status);
        let line = err
            .lines()
            .find(|l| l.starts_with("plb: error: "))
            .unwrap_or_else(|| panic!("{sched}: no error line: {err}"));
        assert!(
            line.contains(&format!("policy name \"{sched}\"")) && line.contains(near),
            "{sched}: {line}"
        );
        assert!(!err.contains("was not found"), "{sched}: {err}");
        assert!(
            !err.contains("session 0 done"),
            "{sched}: ran anyway: {err}"
        );
        assert!(!err.contains("plb: policy="), "{sched}: {err}");
    }
    // A context's policy name, while STARPU_SCHED is fine.
    let Some(own) = cprog::build("own_context") else {
        return;
    };
    let out = run_env(&lib, &own, "greedy", &[("PLB_TEST_CTX_POLICY", "dada-pc")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{:?}: {err}", out.status);
    assert!(
        err.contains("plb: error: policy name \"dada-pc\" is not a policy of this library (did you mean `dada-cp`?)")
            && err.contains("aborting"),
        "{err}"
    );
    assert!(!err.contains("tasks ran"), "{err}");
}

#[test]
fn a_context_of_ours_that_gets_no_task_says_so() {
    let Some((lib, _)) = setup() else { return };
    let Some(prog) = cprog::build("own_context") else {
        return;
    };
    for sched in ["greedy", "plb-hac"] {
        let out = run_env(&lib, &prog, sched, &[("PLB_TEST_CTX_POLICY", "eager")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sched}: {:?}: {err}", out.status);
        assert!(
            err.contains(&format!(
                "own_context: {NTASKS} tasks ran in context 1 (eager)"
            )),
            "{sched}: {err}"
        );
        // One summary: our global context (the eager one is StarPU's).
        let summaries: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("plb: policy="))
            .collect();
        assert_eq!(summaries.len(), 1, "{sched}: {err}");
        assert!(
            summaries[0].starts_with(&format!("plb: policy={sched} ctx=0 tasks=0 executed=0 ")),
            "{}",
            summaries[0]
        );
        assert!(
            err.contains(&format!(
                "plb: policy {sched} in context 0 scheduled no task (the program submitted none to it"
            )),
            "{sched}: {err}"
        );
    }
}

/// The StarPU 1.4.10 prefix `t` of `scripts/lib/starpu14.sh`.
fn starpu14_prefix(t: &str) -> PathBuf {
    let cache = std::env::var_os("PLB_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/plb")))
        .unwrap_or_default();
    cache.join("starpu-1.4.10").join(t)
}

/// The library of another build of this workspace (`target/<dir>`).
fn other_build(dir: &str) -> Option<PathBuf> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(dir)
        .join("libstarpu_plb.so");
    if lib.is_file() {
        Some(lib)
    } else {
        eprintln!("skipped a case: {} not built", lib.display());
        None
    }
}

/// A library of another build, the variables that load it, what it was
/// built for, and how its error line ends.
type Case = (
    PathBuf,
    Vec<(&'static str, String)>,
    &'static str,
    &'static str,
);

#[test]
fn a_library_built_for_another_starpu_is_refused() {
    let Some((_, prog)) = setup() else { return };
    if starpu_sys::STARPU_IS_SIMGRID {
        eprintln!("skipped: the SimGrid build runs no StarPU program here");
        return;
    }
    // (library, how it is loaded, what it was built for, the end of the
    // line: refused at starpu_initialize, or an abort from 1.4's
    // STARPU_SCHED_LIB lookup, which cannot fail).
    let mut cases: Vec<Case> = Vec::new();
    if starpu_sys::STARPU_SERIES == "1.3" {
        // A 1.4 library preloaded into a 1.3 program (its libstarpu-1.4
        // found through LD_LIBRARY_PATH).
        if let Some(lib) = other_build("starpu14-native/release") {
            let libdir = starpu14_prefix("native").join("lib");
            cases.push((
                lib.clone(),
                vec![
                    ("LD_PRELOAD", lib.display().to_string()),
                    ("LD_LIBRARY_PATH", libdir.display().to_string()),
                ],
                "built for StarPU 1.4 (",
                "StarPU not started",
            ));
        }
    } else {
        // The 1.3 library (Debian's libstarpu-1.3 is a system library) into
        // a 1.4 program, by either of 1.4's ways.
        if let Some(lib) = other_build("release") {
            for (var, end) in [
                ("STARPU_SCHED_LIB", "aborting"),
                ("LD_PRELOAD", "StarPU not started"),
            ] {
                cases.push((
                    lib.clone(),
                    vec![(var, lib.display().to_string())],
                    "built for StarPU 1.3 (",
                    end,
                ));
            }
        }
        // The SimGrid build of the same series into a native program.
        if let Some(lib) = other_build("starpu14-simgrid/release") {
            cases.push((
                lib.clone(),
                vec![("LD_PRELOAD", lib.display().to_string())],
                "built for StarPU 1.4 SimGrid (",
                "StarPU not started",
            ));
        }
    }
    let (major, minor) = (
        starpu_sys::STARPU_MAJOR_VERSION,
        starpu_sys::STARPU_MINOR_VERSION,
    );
    for (lib, env, built, end) in cases {
        let mut cmd = Command::new(&prog);
        cmd.env_remove("LD_PRELOAD")
            .env_remove("STARPU_SCHED_LIB")
            .env("STARPU_SCHED", "greedy")
            .env("STARPU_NCPU", "1")
            .env("STARPU_NCUDA", "0")
            .env("STARPU_NOPENCL", "0")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let out = cmd.output().expect("spawn the test program");
        let err = String::from_utf8_lossy(&out.stderr);
        let what = format!("{} by {}", lib.display(), env[0].0);
        assert!(!out.status.success(), "{what}: {:?}: {err}", out.status);
        let line = err
            .lines()
            .find(|l| l.starts_with("plb: error: libstarpu_plb.so was built for"))
            .unwrap_or_else(|| panic!("{what}: no version line: {err}"));
        assert!(
            line.contains(built)
                && line.contains(&format!("but this program runs StarPU {major}.{minor}."))
                && line.ends_with(end),
            "{what}: {line}"
        );
        assert!(!err.contains("session 0 done"), "{what}: ran anyway: {err}");
        eprintln!("{what}: {line}");
    }
}
