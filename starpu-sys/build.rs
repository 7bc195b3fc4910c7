//! Finds StarPU with pkg-config, generates bindings from its installed
//! headers and compiles the C wrappers for its macros.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// pkg-config modules we support, newest first.
const MODULES: [(&str, &str); 2] = [("starpu-1.4", "starpu_1_4"), ("starpu-1.3", "starpu_1_3")];

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=src/wrappers.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    for (_, cfg) in MODULES {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
    }

    let Some((module, cfg)) = MODULES
        .iter()
        .find(|(m, _)| pkg_config(&["--exists", m]).is_some())
    else {
        panic!(
            "\n\nStarPU was not found: pkg-config knows neither starpu-1.4 nor starpu-1.3.\n\
             On Debian/Ubuntu: apt-get install libstarpu-dev pkg-config libclang-dev\n\
             (or run scripts/setup.sh). For a StarPU built from source, add its\n\
             lib/pkgconfig directory to PKG_CONFIG_PATH.\n\n"
        );
    };
    println!("cargo:rustc-cfg={cfg}");
    println!("cargo:version={module}");

    let cflags = pkg_config(&["--cflags-only-I", module]).unwrap_or_default();
    let include_dirs: Vec<PathBuf> = cflags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect();
    let libs = pkg_config(&["--libs", module]).unwrap_or_default();
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    let starpu_include = include_dirs
        .iter()
        .find(|d| d.join("starpu.h").exists())
        .cloned()
        .unwrap_or_else(|| panic!("pkg-config {module} gave no directory holding starpu.h"));
    println!("cargo:include={}", starpu_include.display());

    let mut wrappers = cc::Build::new();
    wrappers.file("src/wrappers.c").warnings(true);
    for dir in &include_dirs {
        wrappers.include(dir);
    }
    wrappers.compile("plb_starpu_wrappers");

    let allow = format!("{}/.*", regex_escape(&starpu_include.display().to_string()));
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_file(&allow)
        .allowlist_file("(.*/)?wrapper\\.h")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false)
        .prepend_enum_name(false)
        // Also #defined as a macro of the same name in starpu_task.h.
        .blocklist_item("STARPU_TASK_INIT")
        .blocklist_item("STARPU_TASK_INVALID")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &include_dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().unwrap_or_else(|e| {
        panic!("bindgen failed on StarPU's headers ({e}); is libclang-dev installed?")
    });
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("writing bindings.rs");

    // Where this StarPU lives, so tests and tools find its examples and
    // programs (Debian's 1.3 under /usr, a 1.4 build under its prefix).
    let variable = |name: &str| pkg_config(&[&format!("--variable={name}"), module]);
    let prefix = variable("prefix").unwrap_or_default();
    let libdir = variable("libdir").unwrap_or_default();
    let simgrid = std::fs::read_to_string(starpu_include.join("starpu_config.h"))
        .map(|h| h.lines().any(|l| l.trim() == "#define STARPU_SIMGRID 1"))
        .unwrap_or(false);
    let install = format!(
        "/// pkg-config's `prefix` of the StarPU these bindings were generated for.\n\
         pub const STARPU_PREFIX: &str = {prefix:?};\n\
         /// pkg-config's `libdir` of that StarPU (its examples are in `<libdir>/starpu/examples`).\n\
         pub const STARPU_LIBDIR: &str = {libdir:?};\n\
         /// Whether that StarPU was built for SimGrid (`--enable-simgrid`).\n\
         pub const STARPU_IS_SIMGRID: bool = {simgrid};\n"
    );
    std::fs::write(out_dir.join("install.rs"), install).expect("writing install.rs");
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = ".+*?()|[]{}^$\\".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}
