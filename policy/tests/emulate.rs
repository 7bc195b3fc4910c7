//! End-to-end checks of `PLB_EMULATE` on a real StarPU program.
//!
//! Runs StarPU's own `tasks_overhead` example (of the StarPU this test was
//! built for) under the preloaded
//! `libstarpu_plb.so` (built by `cargo build --release`; the tests skip with
//! a message when it or the examples are absent) with StarPU's `eager` and
//! our `greedy`, and `tests/c/readonly_codelet.c` and
//! `tests/c/emulate_copies.c` (built at test time).
//! Only lower bounds on wall time are asserted: busy-waiting
//! guarantees them, whatever the machine's load.

mod cprog;
mod example;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const NTASKS: u32 = 40;
const LATENCY_MS: u64 = 20;

/// The preloadable library and the example program, or why not.
fn setup() -> Option<(PathBuf, PathBuf)> {
    example::library_and_example("tasks_overhead")
}

fn run(lib: &Path, prog: &Path, sched: &str, emulate: Option<&str>) -> (Output, Duration) {
    let home = std::env::temp_dir().join(format!(
        "plb-emulate-test-home-{}",
        starpu_sys::STARPU_SERIES
    ));
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(prog);
    cmd.args(["-i", &NTASKS.to_string()])
        .env("LD_PRELOAD", lib)
        .env("STARPU_SCHED", sched)
        // 1.4 registers our policies through STARPU_SCHED_LIB; the preload
        // still interposes starpu_task_submit for the emulation.
        .env("STARPU_SCHED_LIB", lib)
        .env("STARPU_NCPU", "2")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("STARPU_HOME", &home)
        .env_remove("PLB_EMULATE");
    if let Some(e) = emulate {
        cmd.env("PLB_EMULATE", e);
    }
    let start = Instant::now();
    let out = cmd.output().expect("spawn the example");
    (out, start.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn latency_slows_every_task_under_eager_and_greedy() {
    let Some((lib, prog)) = setup() else { return };
    let spec = format!("*:latency={LATENCY_MS}ms");
    for sched in ["eager", "greedy"] {
        let (out, wall) = run(&lib, &prog, sched, Some(&spec));
        let err = stderr(&out);
        assert!(out.status.success(), "{sched}: failed: {err}");
        assert!(
            err.contains("plb: EMULATION ACTIVE"),
            "{sched}: no banner: {err}"
        );
        assert!(
            err.contains(&format!("worker 0 (CPU 0): +{LATENCY_MS} ms per task"))
                && err.contains(&format!("worker 1 (CPU 1): +{LATENCY_MS} ms per task")),
            "{sched}: banner does not describe both workers: {err}"
        );
        // Each task busy-waits LATENCY on one of two workers.
        let floor = Duration::from_millis(LATENCY_MS * u64::from(NTASKS) / 2);
        assert!(
            wall >= floor,
            "{sched}: {NTASKS} tasks of +{LATENCY_MS} ms on 2 workers took {wall:?} < {floor:?}"
        );
        eprintln!(
            "{sched}: {NTASKS} tasks, +{LATENCY_MS} ms each, 2 workers: {wall:?} (floor {floor:?})"
        );
    }
}

#[test]
fn one_slow_worker_is_named_and_others_are_untouched() {
    let Some((lib, prog)) = setup() else { return };
    let (out, _) = run(
        &lib,
        &prog,
        "eager",
        Some("1:speed=0.5,latency=1ms,after=10s,speed=0.25;7:latency=1ms"),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "failed: {err}");
    assert!(
        err.contains(
            "worker 1 (CPU 1): 2x slower, +1 ms per task; after 10 s: 4x slower, +1 ms per task"
        ),
        "{err}"
    );
    assert!(
        !err.contains("worker 0 (CPU 0)"),
        "worker 0 should not be listed: {err}"
    );
    assert!(
        err.contains("worker 7 does not exist (only 2 workers)"),
        "{err}"
    );
}

#[test]
fn invalid_value_stops_before_starpu_starts() {
    let Some((lib, prog)) = setup() else { return };
    for sched in ["eager", "greedy"] {
        let (out, _) = run(&lib, &prog, sched, Some("1:speed=4"));
        let err = stderr(&out);
        assert!(!out.status.success(), "{sched}: should fail: {err}");
        assert!(
            err.contains("plb: error: invalid PLB_EMULATE=\"1:speed=4\"")
                && err.contains("StarPU not started"),
            "{sched}: {err}"
        );
        assert!(!err.contains("EMULATION ACTIVE"), "{sched}: {err}");
    }
}

#[test]
fn unset_or_blank_changes_nothing() {
    let Some((lib, prog)) = setup() else { return };
    for emulate in [None, Some("")] {
        let (out, _) = run(&lib, &prog, "eager", emulate);
        let err = stderr(&out);
        assert!(out.status.success(), "{emulate:?}: {err}");
        assert!(!err.contains("EMULATION"), "{emulate:?}: {err}");
    }
}

/// Tasks per batch in `readonly_codelet.c` (three batches).
const C_NTASKS: u64 = 20;

#[test]
fn read_only_and_changed_codelets_are_wrapped_without_writing_them() {
    let Some((lib, _)) = setup() else { return };
    let Some(prog) = cprog::build("readonly_codelet") else {
        return;
    };
    let spec = format!("*:latency={LATENCY_MS}ms");
    for sched in ["eager", "greedy", "plb-hac"] {
        let (out, wall) = run(&lib, &prog, sched, Some(&spec));
        let err = stderr(&out);
        // Before private copies, writing the trampolines into the
        // read-only codelet killed the program with SIGSEGV.
        assert!(out.status.success(), "{sched}: {:?}: {err}", out.status);
        assert!(
            err.contains(&format!("calls ro={C_NTASKS} a={C_NTASKS} b={C_NTASKS}")),
            "{sched}: {err}"
        );
        // Every task of the three batches went through a trampoline.
        let floor = Duration::from_millis(LATENCY_MS * 3 * C_NTASKS / 2);
        assert!(
            wall >= floor,
            "{sched}: {} tasks of +{LATENCY_MS} ms on 2 workers took {wall:?} < {floor:?}",
            3 * C_NTASKS
        );
    }
}

#[test]
fn copies_are_one_per_codelet_version_and_tasks_get_their_codelet_back() {
    let Some((lib, _)) = setup() else { return };
    let Some(prog) = cprog::build("emulate_copies") else {
        return;
    };
    for sched in ["eager", "greedy", "plb-hac"] {
        let (out, _) = run(&lib, &prog, sched, Some("*:latency=10us"));
        let err = stderr(&out);
        assert!(out.status.success(), "{sched}: {:?}: {err}", out.status);
        // 1000 tasks of three codelets, one of them in two versions: four
        // copies; every task held its own codelet in its callback and
        // after waiting.
        assert!(
            err.contains(
                "emulate_copies: tasks=1000 copies=4 calls a=200 b=200 c1=400 c2=200 \
                 wrong_in_callback=0 wrong_after_wait=0"
            ),
            "{sched}: {err}"
        );
    }
}
