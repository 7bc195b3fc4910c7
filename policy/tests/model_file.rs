//! End-to-end checks of the persistent models of our task-mode policies
//! (`PLB_MODEL_DIR`) on StarPU's `cholesky_implicit` example (its codelets
//! have performance-model symbols): the file is written, read back without
//! a word, and a damaged or foreign file is reported in one warning line,
//! ignored and rewritten. Skipped with a message when the library or the
//! example is absent.

mod example;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn setup() -> Option<(PathBuf, PathBuf)> {
    example::library_and_example("cholesky_implicit")
}

fn run(lib: &Path, prog: &Path, sched: &str, dir: &Path, home: &Path) -> Output {
    run_with(lib, prog, sched, dir, home, &[])
}

fn run_with(
    lib: &Path,
    prog: &Path,
    sched: &str,
    dir: &Path,
    home: &Path,
    vars: &[(&str, &str)],
) -> Output {
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
    cmd.output().expect("spawn the example")
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

#[test]
fn models_persist_and_bad_files_are_ignored_with_one_warning() {
    let Some((lib, prog)) = setup() else { return };
    let root = scratch("persist");
    let (dir, home) = (root.join("models"), root.join("home"));
    let file = dir.join("plb-model-test.models");
    // First run: the file appears, with the codelets' samples.
    let o = run(&lib, &prog, "plb-heft", &dir, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(warnings(&o).is_empty(), "{:?}", warnings(&o));
    let text = std::fs::read_to_string(&file).expect("models file written");
    assert!(
        text.starts_with("plb-models 1\nhost plb-model-test\n"),
        "{text}"
    );
    let samples = text.lines().filter(|l| l.starts_with("sample ")).count();
    assert!(samples >= 4, "{samples} samples:\n{text}");
    assert!(text.contains("chol_model"), "{text}");
    assert!(
        text.trim_end().ends_with(&format!("end {samples}")),
        "{text}"
    );
    // Second run (another policy) reads it silently and keeps it valid.
    let o = run(&lib, &prog, "dada-cp", &dir, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(warnings(&o).is_empty(), "{:?}", warnings(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    // A torn file: one warning, the run completes, the file is rewritten.
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let o = run(&lib, &prog, "dada", &dir, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("corrupt"), "{w:?}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("\nend "));
    // A file from another machine: one warning naming it.
    let foreign = std::fs::read_to_string(&file)
        .unwrap()
        .replace("host plb-model-test", "host elsewhere");
    std::fs::write(&file, foreign).unwrap();
    let o = run(&lib, &prog, "plb-heft", &dir, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("another machine"), "{w:?}");
    // Another worker set on the same machine is not foreign: no warning.
    let o = run_with(
        &lib,
        &prog,
        "plb-heft",
        &dir,
        &home,
        &[("STARPU_NCPU", "1")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(warnings(&o).is_empty(), "{:?}", warnings(&o));
    // No temporary file left behind.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // The balancer policies keep their fallback placement's models too.
    let dir2 = root.join("models-hac");
    let o = run(&lib, &prog, "plb-hac", &dir2, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir2.join("plb-model-test.models")).expect("written");
    let samples = text.lines().filter(|l| l.starts_with("sample ")).count();
    assert!(samples >= 4, "{samples} samples:\n{text}");
    let o = run(&lib, &prog, "hdss", &dir2, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(warnings(&o).is_empty(), "{:?}", warnings(&o));
    // Off: nothing written, not even in the default directory.
    let o = run(&lib, &prog, "plb-heft", Path::new("off"), &home);
    assert!(o.status.success());
    assert!(!home.join(".starpu/plb").exists());
    assert!(!Path::new("off").exists());
    let _ = std::fs::remove_dir_all(&root);
}
