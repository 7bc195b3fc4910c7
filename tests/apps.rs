//! End-to-end tests of `plb app`: every application at a small size under
//! each of our policies and StarPU's `eager` and `dmda`, on 2 CPU workers
//! and on PoCL's OpenCL device; and the negative case: a lost or repeated
//! block (hidden `--inject-fault`) must make the run fail its verification.
//!
//! Runs are serialised (one StarPU at a time on this small machine).

use std::process::{Command, Output};
use std::sync::Mutex;

/// (application, test size). Add new applications here.
const APPS: &[(&str, u64)] = &[
    ("mm", 192),
    ("blackscholes", 100_000),
    ("grn", 60),
    ("grn3", 30),
    ("kmeans", 20_000),
    ("binomial", 1_000),
    ("nbody", 1_024),
    ("mandelbrot", 128),
    ("raytrace", 96),
];

const OURS: &[&str] = &[
    "greedy", "plb-hac", "plb-hec", "hdss", "acosta", "static", "dynamic", "hguided", "adaptive",
    "sigmoid",
];
const STARPUS: &[&str] = &["eager", "dmda"];

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Run {
    code: Option<i32>,
    line: String,
    text: String,
}

impl Run {
    fn field(&self, key: &str) -> &str {
        let pat = format!(" {key}=");
        self.line
            .find(&pat)
            .and_then(|i| self.line[i + pat.len()..].split_whitespace().next())
            .unwrap_or("")
    }

    /// Units per worker, in worker order.
    fn units(&self) -> Vec<u64> {
        self.field("units")
            .split(',')
            .map(|u| u.parse().unwrap_or(0))
            .collect()
    }
}

/// `plb app <app> --n <n> --sched <sched> <extra>` with `env`.
fn plb_app(app: &str, n: u64, sched: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A fresh StarPU home per run (performance models, no calibration
    // carried over), removed afterwards.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_id = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let home = std::env::temp_dir().join(format!("plb-apps-test-{}-{run_id}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plb"));
    cmd.args(["app", app, "--n", &n.to_string(), "--sched", sched])
        .args(extra)
        .env("STARPU_HOME", &home)
        .env("STARPU_SILENT", "1")
        .env("POCL_MAX_PTHREAD_COUNT", "1")
        .env("POCL_CPU_MAX_CU_NUM", "1");
    for var in [
        "STARPU_SCHED",
        "PLB_EMULATE",
        "LD_PRELOAD",
        "STARPU_NCPU",
        "STARPU_NCPUS",
        "STARPU_NOPENCL",
        "STARPU_OPENCL_ON_CPUS",
        "STARPU_NCUDA",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out: Output = cmd.output().expect("running plb");
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("plb-app:"))
        .unwrap_or("")
        .to_string();
    Run {
        code: out.status.code(),
        line,
        text,
    }
}

fn assert_verified(run: &Run, app: &str, n: u64, sched: &str) {
    assert_eq!(run.code, Some(0), "{app} under {sched}: {}", run.text);
    assert_eq!(run.field("verify"), "ok", "{}", run.text);
    assert_eq!(run.field("app"), app);
    assert_eq!(run.field("policy"), sched);
    // W is n for mm and blackscholes, C(n, k) for grn; multi-pass
    // applications (kmeans) process every unit once per pass.
    let total: u64 = run.field("total_units").parse().unwrap_or(0);
    let passes: u64 = run.field("passes").parse().unwrap_or(0);
    assert!(total >= n && passes >= 1, "{}", run.line);
    assert_eq!(
        run.units().iter().sum::<u64>(),
        total * passes,
        "every unit processed once per pass: {}",
        run.line
    );
}

#[test]
fn every_app_verifies_under_every_policy() {
    for &(app, n) in APPS {
        for &sched in OURS.iter().chain(STARPUS) {
            let run = plb_app(app, n, sched, &["--ncpu", "2"], &[]);
            assert_verified(&run, app, n, sched);
            let split = if OURS.contains(&sched) {
                "divisible"
            } else {
                "fixed"
            };
            assert!(run.field("split").starts_with(split), "{}", run.line);
            assert_eq!(run.field("workers"), "cpu0,cpu1", "{}", run.line);
        }
    }
}

/// 1 CPU + 1 OpenCL worker on PoCL, configured through StarPU's variables
/// (as CI does), under a balancer that gives both workers blocks; and the
/// OpenCL worker alone, so that its codelet computes every unit.
#[test]
fn opencl_on_pocl() {
    let mixed = [
        ("STARPU_NCPU", "1"),
        ("STARPU_NOPENCL", "1"),
        ("STARPU_OPENCL_ON_CPUS", "1"),
    ];
    for &(app, n) in APPS {
        let run = plb_app(app, n, "plb-hac", &[], &mixed);
        assert_verified(&run, app, n, "plb-hac");
        let workers: Vec<&str> = run.field("workers").split(',').collect();
        let units = run.units();
        let cl = workers
            .iter()
            .position(|w| w.starts_with("opencl"))
            .unwrap_or_else(|| {
                panic!(
                    "no OpenCL worker (is pocl-opencl-icd installed?): {}",
                    run.text
                )
            });
        assert!(
            units[cl] > 0,
            "the OpenCL worker got no block: {}",
            run.line
        );

        let run = plb_app(app, n, "eager", &["--opencl", "--ncpu", "0"], &[]);
        assert_verified(&run, app, n, "eager");
        assert_eq!(run.field("workers"), "opencl0", "{}", run.line);
    }
}

#[test]
fn verification_catches_a_lost_or_repeated_block() {
    for &(app, n) in APPS {
        for sched in ["greedy", "eager"] {
            for fault in ["drop", "repeat"] {
                let run = plb_app(
                    app,
                    n,
                    sched,
                    &["--ncpu", "2", "--inject-fault", fault],
                    &[],
                );
                assert_eq!(
                    run.code,
                    Some(1),
                    "{app} {sched} {fault} must fail: {}",
                    run.text
                );
                assert_eq!(run.field("verify"), "FAILED", "{}", run.text);
            }
        }
    }
}

/// A balancer with arguments on the command line, and the task trace: one
/// row per task, covering the W units exactly once, with per-worker busy
/// and finish times in the summary line.
#[test]
fn balancer_arguments_and_the_task_trace() {
    let dir = std::env::temp_dir().join(format!("plb-apps-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.csv");
    let n = 128;
    let run = plb_app(
        "mandelbrot",
        n,
        "hguided:k=3,min=4,probe=4",
        &["--ncpu", "2", "--trace", trace.to_str().unwrap()],
        &[],
    );
    assert_verified(&run, "mandelbrot", n, "hguided:k=3,min=4,probe=4");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("worker,offset,len,start_s,end_s,compute_s")
    );
    let mut covered = vec![0u32; n as usize];
    let mut tasks = 0;
    for l in lines {
        let f: Vec<f64> = l.split(',').map(|v| v.parse().unwrap()).collect();
        let (off, len) = (f[1] as usize, f[2] as usize);
        assert!(
            len >= 4 || off + len == n as usize,
            "min=4, probe=4 not honoured: {l}"
        );
        assert!(f[3] <= f[4], "{l}");
        covered[off..off + len].iter_mut().for_each(|c| *c += 1);
        tasks += 1;
    }
    assert!(covered.iter().all(|&c| c == 1), "{covered:?}");
    assert_eq!(run.field("tasks"), tasks.to_string());
    let finish: Vec<f64> = run
        .field("finish_s")
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let makespan: f64 = run.field("makespan_s").parse().unwrap();
    assert_eq!(finish.len(), 2);
    assert!(
        finish.iter().all(|f| *f > 0.0 && *f <= makespan),
        "{}",
        run.line
    );
    let _ = std::fs::remove_dir_all(&dir);

    let out = Command::new(env!("CARGO_BIN_EXE_plb"))
        .args(["app", "mm", "--sched", "hguided:k=0"])
        .env_remove("STARPU_SCHED")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["app", "no-such-app"][..],
        &["app", "mm", "--sched", "no-such-policy"],
        &["app", "mm", "--n", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_plb"))
            .args(args)
            .env_remove("STARPU_SCHED")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
