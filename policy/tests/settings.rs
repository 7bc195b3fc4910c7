//! End-to-end checks of the `PLB_*` tuning variables, `PLB_SUMMARY` and
//! `PLB_TRACE` on a real StarPU program (StarPU's `tasks_overhead` example
//! under the preloaded `libstarpu_plb.so`; skipped with a message when the
//! library or the examples are absent).

mod example;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NTASKS: u64 = 60;

fn setup() -> Option<(PathBuf, PathBuf)> {
    example::library_and_example("tasks_overhead")
}

fn run(lib: &Path, prog: &Path, sched: &str, vars: &[(&str, &str)]) -> Output {
    let home = std::env::temp_dir().join(format!(
        "plb-settings-test-home-{}",
        starpu_sys::STARPU_SERIES
    ));
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(prog);
    cmd.args(["-i", &NTASKS.to_string()])
        .env("LD_PRELOAD", lib)
        // 1.4 registers our policies through STARPU_SCHED_LIB.
        .env("STARPU_SCHED_LIB", lib)
        .env("STARPU_SCHED", sched)
        .env("STARPU_NCPU", "2")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("STARPU_HOME", &home);
    for (k, _) in std::env::vars() {
        if k.starts_with("PLB_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn the example")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn invalid_values_fail_starpu_initialize_with_one_message() {
    let Some((lib, prog)) = setup() else { return };
    let cases = [
        ("PLB_INITIAL_BLOCK", "0", "an integer >= 1"),
        ("PLB_GAP_THRESHOLD", "-3", "seconds >= 0"),
        ("PLB_DECREASE_START", "1.5", "[0, 1]"),
        ("PLB_DECREASE_FACTOR", "x", "[0, 1)"),
        ("PLB_R2_THRESHOLD", "2", "[0, 1]"),
        ("PLB_TRAINING_FRACTION", "0", "(0, 1]"),
        ("PLB_REBALANCE_THRESHOLD", "-1", "> 0"),
        ("PLB_SOLVER", "cplex", "`ipopt` or `fast`"),
        ("PLB_MIN_BLOCK", "gpu=4", "cpu=N"),
        ("PLB_STARPU_MODELS", "yes", "`on` or `off`"),
        ("PLB_PREFETCH_HORIZON", "never", "`auto` or `off`"),
        ("PLB_CPU_OFFLOAD", "yes", "`on` or `off`"),
        ("PLB_TRACE", "/nonexistent-dir/t.csv", "writable file path"),
    ];
    for sched in ["plb-hac", "eager"] {
        for (name, value, accepted) in cases {
            let out = run(&lib, &prog, sched, &[(name, value)]);
            let err = stderr(&out);
            assert!(!out.status.success(), "{sched} {name}={value}: ran: {err}");
            let ours: Vec<&str> = err.lines().filter(|l| l.contains("plb: error")).collect();
            assert_eq!(ours.len(), 1, "{sched} {name}={value}: {err}");
            assert!(
                ours[0].contains(&format!("{name}=\"{value}\"")) && ours[0].contains(accepted),
                "{sched} {name}={value}: {}",
                ours[0]
            );
        }
    }
}

#[test]
fn valid_values_run() {
    let Some((lib, prog)) = setup() else { return };
    let vars = [
        ("PLB_INITIAL_BLOCK", "16"),
        ("PLB_GAP_THRESHOLD", "250ms"),
        ("PLB_DECREASE_FACTOR", "0.2"),
        ("PLB_SOLVER", "ipopt"),
        ("PLB_MIN_BLOCK", "cpu=2,opencl=64"),
    ];
    let out = run(&lib, &prog, "plb-hac", &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    for horizon in ["20", "auto", "off"] {
        let out = run(
            &lib,
            &prog,
            "plb-heft",
            &[("PLB_PREFETCH_HORIZON", horizon)],
        );
        assert!(out.status.success(), "{horizon}: {}", stderr(&out));
    }
    for offload in ["on", "off"] {
        let out = run(&lib, &prog, "plb-heft", &[("PLB_CPU_OFFLOAD", offload)]);
        assert!(out.status.success(), "{offload}: {}", stderr(&out));
    }
}

/// The integer `key=` of a summary line.
fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

#[test]
fn summary_and_trace_describe_every_task() {
    let Some((lib, prog)) = setup() else { return };
    for sched in ["greedy", "plb-hac"] {
        let path = std::env::temp_dir().join(format!(
            "plb-settings-trace-{sched}-{}.csv",
            std::process::id()
        ));
        let out = run(
            &lib,
            &prog,
            sched,
            &[("PLB_SUMMARY", "1"), ("PLB_TRACE", path.to_str().unwrap())],
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{sched}: {err}");
        let head = err
            .lines()
            .find(|l| l.starts_with(&format!("plb: policy={sched} ")))
            .unwrap_or_else(|| panic!("{sched}: no summary: {err}"));
        let executed = field(head, "executed");
        assert!(executed >= NTASKS, "{head}");
        let _ = field(head, "refits");
        let _ = field(head, "solve_us");
        let workers: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("plb:   worker="))
            .collect();
        assert_eq!(workers.len(), 2, "{sched}: {err}");
        let tasks: u64 = workers.iter().map(|l| field(l, "tasks")).sum();
        assert_eq!(tasks, executed, "{sched}: {err}");
        for w in &workers {
            assert!(w.contains("busy=") && w.contains("% idle="), "{w}");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("kind,source,worker,start_s,end_s,units,predicted_s,detail")
        );
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len() as u64, executed, "{sched}: one row per task");
        for r in &rows {
            assert_eq!(r.len(), 8, "{r:?}");
            assert_eq!((r[0], r[1]), ("task", sched));
            let (s, e): (f64, f64) = (r[3].parse().unwrap(), r[4].parse().unwrap());
            assert!(0.0 <= s && s <= e, "{r:?}");
            assert!(r[5].parse::<f64>().unwrap() > 0.0, "{r:?}");
        }
    }
}

/// `PLB_BOUND=1` prints StarPU's LP bound once per run (the global
/// context's teardown), and nothing without it.
#[test]
fn bound_is_printed_once_when_asked() {
    let Some((lib, prog)) = setup() else { return };
    let bound_lines = |o: &Output| {
        stderr(o)
            .lines()
            .filter(|l| l.starts_with("plb: bound "))
            .count()
    };
    let asked = run(&lib, &prog, "greedy", &[("PLB_BOUND", "1")]);
    assert!(asked.status.success(), "{}", stderr(&asked));
    assert_eq!(bound_lines(&asked), 1, "{}", stderr(&asked));
    let quiet = run(&lib, &prog, "greedy", &[]);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(bound_lines(&quiet), 0, "{}", stderr(&quiet));
}
