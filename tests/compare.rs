//! `plb compare` end to end, in a quick form: bad input refused with one
//! line and exit 2; real comparisons of StarPU's `cholesky_implicit`
//! (1.3; 1.4 native and SimGrid when those builds are present), and of a
//! small StarPU program of our tests (`tests/compare/chain.c`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{plb, text};

const EXAMPLES_13: &str = "/usr/lib/x86_64-linux-gnu/starpu/examples";

fn cache() -> PathBuf {
    std::env::var_os("PLB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/plb"))
}

/// `path` when it exists, else a line saying why the caller skips.
fn present(path: &Path, why: &str) -> bool {
    let ok = path.exists();
    if !ok {
        eprintln!("skipping: {} missing ({why})", path.display());
    }
    ok
}

fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `plb compare ARGS` and checks its files: one summary row per
/// policy, every run in runs.csv, an HTML page with its plots.
fn compare(out: &Path, args: &[&str], policies: usize, runs: usize) -> String {
    let res = plb()
        .arg("compare")
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let t = text(&res);
    assert!(res.status.success(), "{t}");
    assert!(t.contains("recommendation: "), "{t}");
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + policies, "{summary}");
    let rows = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(rows.lines().count(), 1 + runs, "{rows}");
    assert!(
        rows.lines().skip(1).all(|l| l.ends_with(',')),
        "a run was flagged: {rows}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("</html>"), "{html}");
    t
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let hello = Path::new(EXAMPLES_13).join("hello_world");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "needs a program"),
        (vec!["--", "/bin/true"], "not a StarPU program"),
        (vec!["--", "/no/such/program"], "no such executable"),
        (
            vec!["--policies", "eager,bogus", "--", hello.to_str().unwrap()],
            "unknown policy 'bogus'",
        ),
        (
            vec!["--time-regex", "(", "--", hello.to_str().unwrap()],
            "--time-regex",
        ),
        (
            vec!["--machine", "mirage", "--", hello.to_str().unwrap()],
            "SimGrid",
        ),
    ];
    for (args, expect) in cases {
        let out = plb().arg("compare").args(&args).output().unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        let errors: Vec<&str> = t.lines().filter(|l| l.starts_with("plb: error")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: {t}");
        assert!(errors[0].contains(expect), "{args:?}: {t}");
        assert_eq!(t.lines().count(), 1, "one line only: {args:?}: {t}");
    }
    // An --out whose runs/ directory plb compare did not make is refused,
    // never cleared.
    let mine = out_dir("compare-foreign-runs");
    std::fs::create_dir_all(mine.join("runs")).unwrap();
    std::fs::write(mine.join("runs/keep.txt"), "mine").unwrap();
    let out = plb()
        .arg("compare")
        .arg("--out")
        .arg(&mine)
        .arg("--")
        .arg(&hello)
        .output()
        .unwrap();
    let t = text(&out);
    if present(&hello, "starpu-examples") {
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(t.contains("was not made by plb compare"), "{t}");
        assert!(mine.join("runs/keep.txt").is_file());
    }
    if present(&hello, "starpu-examples") {
        let dir = out_dir("compare-bad-timer");
        let out = plb()
            .arg("compare")
            .arg("--out")
            .arg(&dir)
            .args(["--time-regex", "never ([0-9]+)", "--"])
            .arg(&hello)
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(
            t.contains("plb: error: ") && t.contains("timer regex matched nothing"),
            "{t}"
        );
    }
}

/// Our test program: 16 runs (reference, 3 calibrations, 4 warm-ups, 2
/// repetitions of 4 policies), outputs checked against eager's.
#[test]
fn compares_a_small_program_of_ours_with_checked_outputs() {
    let dir = out_dir("compare-chain");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("chain");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "starpu-1.3"])
        .output();
    let Some(flags) = flags.ok().filter(|f| f.status.success()) else {
        eprintln!("skipping: pkg-config has no starpu-1.3 (libstarpu-dev)");
        return;
    };
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    let cc = Command::new("cc")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/compare/chain.c"
        ))
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace())
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", text(&cc));
    let t = compare(
        &dir.join("report"),
        &[
            "--reps",
            "2",
            "--policies",
            "eager,dmda,plb-heft,greedy",
            "--check-output",
            "--time-regex",
            r"time: ([0-9.]+) ms",
            "--",
            exe.to_str().unwrap(),
            "4",
            "8",
        ],
        4,
        16,
    );
    assert!(t.contains("REAL"), "{t}");
}

#[test]
fn compares_cholesky_on_starpu_13() {
    let prog = Path::new(EXAMPLES_13).join("cholesky_implicit");
    if !present(&prog, "starpu-examples") {
        return;
    }
    let t = compare(
        &out_dir("compare-cholesky-13"),
        &[
            "--reps",
            "1",
            "--policies",
            "eager,dada",
            "--time-regex",
            r"^960\s+([0-9.]+)",
            "--",
            prog.to_str().unwrap(),
            "-size",
            "960",
            "-nblocks",
            "4",
        ],
        2,
        // Reference, 2 warm-ups, 2 counted (no model-based StarPU policy).
        5,
    );
    assert!(t.contains("StarPU 1.3"), "{t}");
}

#[test]
fn compares_cholesky_on_starpu_14_native_and_simgrid() {
    let target = PathBuf::from(env!("CARGO_BIN_EXE_plb"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    for (build, extra) in [("native", vec![]), ("simgrid", vec!["--machine", "mirage"])] {
        let prog = cache().join(format!(
            "starpu-1.4.10/{build}/lib/starpu/examples/cholesky_implicit"
        ));
        let lib = target.join(format!("starpu14-{build}/release/libstarpu_plb.so"));
        let how = "bash scripts/setup.sh --all builds it";
        if !present(&prog, how) || !present(&lib, how) {
            continue;
        }
        let mut args = vec![
            "--reps",
            "1",
            "--policies",
            "eager,dmdas,plb-heft",
            "--calibration-runs",
            "1",
            "--time-regex",
            r"^3840\s+([0-9.]+)",
        ];
        args.extend(extra);
        // Tiles of 960: the size mirage's sampled models have.
        args.extend([
            "--",
            prog.to_str().unwrap(),
            "-size",
            "3840",
            "-nblocks",
            "4",
        ]);
        // Reference, 1 calibration, 3 warm-ups, 3 counted.
        let t = compare(&out_dir(&format!("compare-cholesky-{build}")), &args, 3, 8);
        assert!(t.contains("StarPU 1.4"), "{t}");
        if build == "simgrid" {
            assert!(t.contains("SIMULATED"), "{t}");
        }
    }
}

/// A program whose tasks all go to a context it creates with a policy of
/// its own: ours are shown, not ranked.
#[test]
fn a_program_scheduling_its_own_contexts_is_not_ranked() {
    let prog = Path::new(EXAMPLES_13).join("dummy_sched_with_ctx");
    if !present(&prog, "starpu-examples") {
        return;
    }
    let t = compare(
        &out_dir("compare-own-contexts"),
        &[
            "--reps",
            "1",
            "--policies",
            "eager,greedy",
            "--",
            prog.to_str().unwrap(),
        ],
        2,
        5,
    );
    assert!(t.contains("NOT RANKED"), "{t}");
    assert!(
        t.contains("recommendation: eager: the only ranked policy"),
        "{t}"
    );
}
