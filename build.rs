//! Root build script: finds StarPU with pkg-config and compiles the
//! applications' codelets into the `plb` executable.
//!
//! * every `codelets/*.c` → one static library (StarPU's cflags, `-O3`,
//!   `-fno-math-errno -fno-trapping-math`, which let gcc vectorise loops
//!   calling `expf`/`logf` through libmvec), linked with OpenBLAS, OpenCL
//!   and libm;
//! * every `codelets/*.cu`, only when `nvcc` is found (`$NVCC`, else
//!   `PATH`): compiled with nvcc, linked with cudart and cuBLAS, and the C
//!   files get `-DPLB_HAVE_CUDA` so their CUDA implementation slots are
//!   filled (`$PLB_NVCC_FLAGS`, e.g. `-gencode ...`, goes to nvcc).
//!   Without nvcc the CUDA parts are simply left out.
//!
//! Adding an application's kernels is adding files to `codelets/`.

use std::path::{Path, PathBuf};
use std::process::Command;

const MODULES: [&str; 2] = ["starpu-1.4", "starpu-1.3"];

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The files of `dir` ending in `.ext`, sorted.
fn sources(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == ext));
    files.sort();
    files
}

/// `$NVCC` when set, else `nvcc` from `PATH`.
fn find_nvcc() -> Option<PathBuf> {
    if let Some(nvcc) = std::env::var_os("NVCC").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(nvcc));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("nvcc"))
        .find(|p| p.is_file())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=codelets");
    println!("cargo:rerun-if-changed=policy/include");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=PLB_NVCC_FLAGS");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rustc-check-cfg=cfg(plb_cuda)");
    println!("cargo:rustc-check-cfg=cfg(plb_mpi)");

    let Some(module) = MODULES
        .iter()
        .find(|m| pkg_config(&["--exists", m]).is_some())
    else {
        panic!(
            "StarPU was not found by pkg-config (looked for starpu-1.4 and starpu-1.3). \
             On Debian install it with `apt-get install libstarpu-dev pkg-config`, \
             or run scripts/setup.sh."
        );
    };
    let cflags = pkg_config(&["--cflags", module]).unwrap_or_default();
    let includes: Vec<&str> = cflags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .collect();

    let dir = Path::new("codelets");
    let c_files = sources(dir, "c");
    let cu_files = sources(dir, "cu");
    let nvcc = find_nvcc();
    let cuda_root = nvcc
        .as_deref()
        .and_then(|n| n.parent()?.parent().map(Path::to_path_buf));

    let mut c = cc::Build::new();
    c.files(&c_files)
        .include(dir)
        .includes(&includes)
        .flag("-std=gnu11")
        .flag("-O3")
        .flag("-fno-math-errno")
        .flag("-fno-trapping-math")
        .warnings(true);
    if let Some(root) = &cuda_root {
        c.define("PLB_HAVE_CUDA", None)
            .include(root.join("include"));
    }
    c.compile("plb_codelets");

    if let Some(root) = &cuda_root {
        if !cu_files.is_empty() {
            // cc finds nvcc itself (`$NVCC`, else `PATH`, as `find_nvcc`)
            // and then passes host flags through `-Xcompiler`; no debug
            // info, since with it cc asks nvcc for unoptimised device code
            // (`-G`).
            let mut cuda = cc::Build::new();
            cuda.cuda(true)
                .debug(false)
                .files(&cu_files)
                .include(dir)
                .includes(&includes)
                .define("PLB_HAVE_CUDA", None)
                .flag("-O3");
            // `-gencode arch=compute_90,code=sm_90` and the like: machine
            // code for the GPU the program will run on (scripts/gpu-kit.sh).
            for flag in std::env::var("PLB_NVCC_FLAGS")
                .unwrap_or_default()
                .split_whitespace()
            {
                cuda.flag(flag);
            }
            cuda.compile("plb_codelets_cuda");
        }
        for lib in ["lib64", "lib"] {
            println!(
                "cargo:rustc-link-search=native={}",
                root.join(lib).display()
            );
        }
        println!("cargo:rustc-link-lib=dylib=cublas");
        println!("cargo:rustc-link-lib=dylib=cudart");
        println!("cargo:rustc-cfg=plb_cuda");
    }
    mpi(module, &includes);
    for lib in ["openblas", "OpenCL", "m"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
}

/// StarPU-MPI of the same StarPU (`starpumpi-1.x`) and an MPI library
/// (`ompi-c` or `mpi-c`): compiles `codelets/mpi/*.c`, links both, and
/// sets `cfg(plb_mpi)` (`plb app mm-mpi`). Without them `plb` builds
/// anyway and `mm-mpi` says what is missing.
fn mpi(module: &str, starpu_includes: &[&str]) {
    println!("cargo:rerun-if-env-changed=PLB_NO_MPI");
    if std::env::var_os("PLB_NO_MPI").is_some() {
        return;
    }
    let mpi_module = module.replace("starpu-", "starpumpi-");
    let Some(ompi) = ["ompi-c", "mpi-c"]
        .iter()
        .find(|m| pkg_config(&["--exists", m]).is_some())
    else {
        return;
    };
    if pkg_config(&["--exists", &mpi_module]).is_none() {
        return;
    }
    let cflags = format!(
        "{} {}",
        pkg_config(&["--cflags", ompi]).unwrap_or_default(),
        pkg_config(&["--cflags", &mpi_module]).unwrap_or_default()
    );
    let mut includes: Vec<&str> = starpu_includes.to_vec();
    includes.extend(
        cflags
            .split_whitespace()
            .filter_map(|f| f.strip_prefix("-I")),
    );
    let dir = Path::new("codelets/mpi");
    cc::Build::new()
        .files(sources(dir, "c"))
        .include("codelets")
        .include("policy/include")
        .includes(&includes)
        .flag("-std=gnu11")
        .flag("-O2")
        .warnings(true)
        .compile("plb_mpi");
    let libs = format!(
        "{} {}",
        pkg_config(&["--libs", &mpi_module]).unwrap_or_default(),
        pkg_config(&["--libs", ompi]).unwrap_or_default()
    );
    for f in libs.split_whitespace() {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    println!("cargo:rustc-cfg=plb_mpi");
}
