//! Checks of the persistent models of our task-mode policies
//! (`PLB_MODEL_DIR`):
//!
//! * concurrent writers (4 processes, this test binary run again, and 4
//!   threads) add to one another's samples;
//! * bad paths (a named pipe, a directory, an oversized file) are refused
//!   without blocking;
//! * end to end on StarPU's `cholesky_implicit` example (its codelets have
//!   performance-model symbols): the file is written, read back without a
//!   word, and a damaged, foreign, older-format or non-regular file is
//!   reported in one warning line and ignored (skipped with a message when
//!   the library or the example is absent).

mod example;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use plb_core::balance::WorkerKind;
use plb_core::taskmode::persist::{Identity, Saved, Worker};
use starpu_plb::model_file::{self, Unusable};

/// Set in the processes [`concurrent_processes_lose_nothing`] starts:
/// `<models file>,<writer number>`.
const WRITER_ENV: &str = "PLB_TEST_MODEL_WRITER";
const WRITERS: usize = 4;
const ROUNDS: usize = 5;

fn identity() -> Identity {
    Identity {
        host: "plb-model-test".into(),
        starpu: "1.4.10".into(),
        emulation: None,
        workers: vec![
            Worker {
                kind: WorkerKind::Cpu,
                name: "CPU 0".into(),
            },
            Worker {
                kind: WorkerKind::Cuda,
                name: "CUDA 0.0 (test device)".into(),
            },
        ],
    }
}

/// One run of writer `w`: what its round `r` measured, one sample in a
/// model every writer shares and one in its own.
fn measured(w: usize, r: usize) -> Saved {
    let mut new = Saved::new();
    let t = (w * ROUNDS + r + 1) as f64;
    new.insert(("shared".into(), 0), vec![(1.0, t)]);
    new.insert((format!("writer{w}"), 1), vec![(2.0, t)]);
    new
}

/// Writer `w`'s rounds: load (as a run does at start-up), then save.
fn write_rounds(file: &Path, w: usize) {
    for r in 0..ROUNDS {
        model_file::load(file, &identity()).expect("a valid file");
        model_file::save(file, &identity(), &measured(w, r)).expect("saved");
    }
}

/// Every writer's every round is in the file, each writer's in order.
fn check_nothing_lost(file: &Path) {
    let saved = model_file::load(file, &identity()).expect("a valid file");
    let shared = &saved[&("shared".to_string(), 0)];
    let mut times: Vec<f64> = shared.iter().map(|s| s.1).collect();
    times.sort_by(f64::total_cmp);
    let all: Vec<f64> = (1..=WRITERS * ROUNDS).map(|t| t as f64).collect();
    assert_eq!(times, all, "{shared:?}");
    for w in 0..WRITERS {
        let own: Vec<f64> = saved[&(format!("writer{w}"), 1)]
            .iter()
            .map(|s| s.1)
            .collect();
        let expected: Vec<f64> = (0..ROUNDS).map(|r| (w * ROUNDS + r + 1) as f64).collect();
        assert_eq!(own, expected);
    }
    assert_eq!(saved.len(), WRITERS + 1);
}

/// Created once every writer process is started.
fn go_file(file: &Path) -> PathBuf {
    file.with_extension("go")
}

/// The body of the writer processes; does nothing in a normal test run.
#[test]
fn concurrent_writer_process() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let (file, w) = spec.rsplit_once(',').expect("file,writer");
    let file = Path::new(file);
    // Start together with the other writers: once the go file exists
    // (a bounded wait; late, the writers merely overlap less).
    for _ in 0..6000 {
        if go_file(file).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    write_rounds(file, w.parse().expect("writer number"));
}

#[test]
fn concurrent_processes_lose_nothing() {
    let root = scratch("processes");
    let file = root.join("plb-model-test.models");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<Child> = (0..WRITERS)
        .map(|w| {
            Command::new(&exe)
                .args(["--exact", "concurrent_writer_process", "--test-threads=1"])
                .env(WRITER_ENV, format!("{},{w}", file.display()))
                .stdout(Stdio::null())
                .spawn()
                .expect("start a writer")
        })
        .collect();
    std::fs::write(go_file(&file), "").unwrap();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "a writer failed: {:?}", o.status);
    }
    check_nothing_lost(&file);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn concurrent_contexts_lose_nothing() {
    let root = scratch("threads");
    let file = root.join("plb-model-test.models");
    let start = std::sync::Barrier::new(WRITERS);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (file, start) = (&file, &start);
            s.spawn(move || {
                start.wait();
                write_rounds(file, w);
            });
        }
    });
    check_nothing_lost(&file);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_paths_are_refused_without_blocking() {
    let root = scratch("paths");
    let id = identity();
    // A named pipe nobody writes to: a blocking open or read would hang.
    let fifo = root.join("fifo.models");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    match model_file::load(&fifo, &id) {
        Err(Unusable::Refused(m)) => assert!(m.contains("named pipe"), "{m}"),
        r => panic!("{r:?}"),
    }
    assert!(model_file::save(&fifo, &id, &measured(0, 0)).is_err());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A directory: refused, and left alone.
    let d = root.join("dir.models");
    std::fs::create_dir(&d).unwrap();
    assert!(matches!(
        model_file::load(&d, &id),
        Err(Unusable::Refused(_))
    ));
    assert!(model_file::save(&d, &id, &measured(0, 0)).is_err());
    assert!(d.is_dir());
    // Oversized (sparse, so cheap): ignored unread, and replaced.
    let big = root.join("big.models");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(model_file::disk::MAX_BYTES + 1)
        .unwrap();
    match model_file::load(&big, &id) {
        Err(Unusable::Ignored(m)) => assert!(m.contains("cap"), "{m}"),
        r => panic!("{r:?}"),
    }
    model_file::save(&big, &id, &measured(0, 0)).unwrap();
    assert_eq!(model_file::load(&big, &id).unwrap(), measured(0, 0));
    let _ = std::fs::remove_dir_all(&root);
}

fn setup() -> Option<(PathBuf, PathBuf)> {
    example::library_and_example("cholesky_implicit")
}

/// The example under `sched` with 2 CPU workers, models in `dir`, and no
/// `PLB_*` setting of the caller's but `vars`.
fn command(
    (lib, prog): (&Path, &Path),
    sched: &str,
    dir: &Path,
    home: &Path,
    vars: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(prog);
    cmd.args(["-size", "960", "-nblocks", "4"])
        .env("LD_PRELOAD", lib)
        .env("STARPU_SCHED_LIB", lib)
        .env("STARPU_SCHED", sched)
        .env("STARPU_NCPU", "2")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("STARPU_SILENT", "1")
        .env("STARPU_HOME", home)
        .env("STARPU_HOSTNAME", "plb-model-test");
    for (k, _) in std::env::vars() {
        if k.starts_with("PLB_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("PLB_MODEL_DIR", dir);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `cmd`, failing the test (instead of hanging it) should the run not
/// end within `limit_s` seconds: a guard against a blocking read, not a
/// timing check. Standard error goes through a file (a full pipe would
/// stall the run).
fn run_guarded(mut cmd: Command, limit_s: u64, err_file: &Path) -> Output {
    let err = std::fs::File::create(err_file).unwrap();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("spawn the example");
    for _ in 0..limit_s * 10 {
        if let Some(status) = child.try_wait().unwrap() {
            return Output {
                status,
                stdout: Vec::new(),
                stderr: std::fs::read(err_file).unwrap(),
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the run did not end in {limit_s} s (blocked on the models file?)");
}

fn warnings(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("plb: warning: models file"))
        .map(str::to_string)
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "plb-model-file-{name}-{}-{}",
        starpu_sys::STARPU_SERIES,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn samples_in(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("sample ")).count()
}

/// Runs `cmd` to success and returns its models-file warnings.
fn ok_warnings(cmd: Command, root: &Path) -> Vec<String> {
    let o = run_guarded(cmd, 300, &root.join("stderr.txt"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    warnings(&o)
}

/// One warning line, containing `says`.
fn one_warning(w: &[String], says: &str) {
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains(says), "{w:?}");
}

#[test]
fn models_persist_and_bad_files_are_ignored_with_one_warning() {
    let Some((lib, prog)) = setup() else { return };
    let ex = (lib.as_path(), prog.as_path());
    let root = scratch("persist");
    let (dir, home) = (root.join("models"), root.join("home"));
    let file = dir.join("plb-model-test.models");
    let run = |sched: &str, vars: &[(&str, &str)]| {
        ok_warnings(command(ex, sched, &dir, &home, vars), &root)
    };
    // First run: the file appears, with this machine and the samples.
    assert_eq!(run("plb-heft", &[]), Vec::<String>::new());
    let text = std::fs::read_to_string(&file).expect("models file written");
    assert!(
        text.starts_with("plb-models 2\nhost plb-model-test\nstarpu "),
        "{text}"
    );
    assert!(
        text.contains("\ntimings real\nworkers 2\nworker 0 cpu CPU 0\nworker 1 cpu CPU 1\n"),
        "{text}"
    );
    let first = samples_in(&text);
    assert!(first >= 4, "{first} samples:\n{text}");
    assert!(text.contains("chol_model"), "{text}");
    assert!(text.trim_end().ends_with(&format!("end {first}")), "{text}");
    // Second run (another policy) reads it silently and adds its samples.
    assert_eq!(run("dada-cp", &[]), Vec::<String>::new());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(samples_in(&text) > first, "{text}");
    // It added only what it measured: the samples it was seeded with are
    // not written twice (measured seconds have 16 digits, never equal).
    let mut lines: Vec<&str> = text.lines().filter(|l| l.starts_with("sample ")).collect();
    lines.sort_unstable();
    let n = lines.len();
    lines.dedup();
    assert_eq!(lines.len(), n, "a sample saved twice:\n{text}");
    // A torn file: one warning, the run completes, the file is replaced.
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    one_warning(&run("dada", &[]), "corrupt");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\nend "), "{text}");
    // A file from another machine: one warning naming it.
    std::fs::write(&file, text.replace("host plb-model-test", "host elsewhere")).unwrap();
    one_warning(&run("plb-heft", &[]), "host \"elsewhere\"");
    // A file of format 1 (an older PLB): one warning.
    std::fs::write(
        &file,
        "plb-models 1\nhost plb-model-test\nstarpu 1.4.10\nend 0\n",
    )
    .unwrap();
    one_warning(&run("plb-heft", &[]), "plb-models 1");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("plb-models 2\n"), "{text}");
    // An emulated run: its own file, silently; the real one is untouched.
    let w = run("plb-heft", &[("PLB_EMULATE", "0:speed=0.5")]);
    assert_eq!(w, Vec::<String>::new());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(
        names[2..],
        ["plb-model-test.models", "plb-model-test.models.lock"]
    );
    assert!(
        names[0].starts_with("plb-model-test.emulated-"),
        "{names:?}"
    );
    let emulated = std::fs::read_to_string(dir.join(&names[0])).unwrap();
    assert!(
        emulated.contains("\ntimings emulated 0:speed=0.5\n"),
        "{emulated}"
    );
    // Another worker set on the same machine: foreign, one warning.
    one_warning(&run("plb-heft", &[("STARPU_NCPU", "1")]), "1 workers");
    // The balancer policies keep their fallback placement's models too.
    let dir2 = root.join("models-hac");
    let o = ok_warnings(command(ex, "plb-hac", &dir2, &home, &[]), &root);
    assert_eq!(o, Vec::<String>::new());
    let text = std::fs::read_to_string(dir2.join("plb-model-test.models")).expect("written");
    assert!(samples_in(&text) >= 4, "{text}");
    let o = ok_warnings(command(ex, "hdss", &dir2, &home, &[]), &root);
    assert_eq!(o, Vec::<String>::new());
    // Off: nothing written, not even in the default directory.
    let o = ok_warnings(command(ex, "plb-heft", Path::new("off"), &home, &[]), &root);
    assert_eq!(o, Vec::<String>::new());
    assert!(!home.join(".starpu/plb").exists());
    assert!(!Path::new("off").exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused_without_blocking() {
    let Some((lib, prog)) = setup() else { return };
    let ex = (lib.as_path(), prog.as_path());
    let root = scratch("fifo");
    let home = root.join("home");
    // A named pipe nobody writes to: the run must neither block on it
    // nor replace it.
    let fifo_dir = root.join("fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = fifo_dir.join("plb-model-test.models");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let w = ok_warnings(command(ex, "plb-heft", &fifo_dir, &home, &[]), &root);
    one_warning(&w, "named pipe");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A directory in the file's place.
    let dir_dir = root.join("dir");
    std::fs::create_dir_all(dir_dir.join("plb-model-test.models")).unwrap();
    let w = ok_warnings(command(ex, "dada", &dir_dir, &home, &[]), &root);
    one_warning(&w, "directory");
    let _ = std::fs::remove_dir_all(&root);
}
