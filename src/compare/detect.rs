//! Which StarPU a program links, and the build of our library that goes
//! with it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The StarPU a program runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starpu {
    /// "1.3" or "1.4".
    pub series: String,
    /// Where the dynamic loader finds its `libstarpu` (from `ldd`).
    pub lib: PathBuf,
    /// The build of our project's StarPU 1.4 prefixes it belongs to
    /// (`native`, `simgrid`, `cuda`), when it is one of them.
    pub build: Option<String>,
    /// Linked with SimGrid: its times are SIMULATED.
    pub simgrid: bool,
}

impl Starpu {
    /// How the report names it.
    pub fn label(&self) -> String {
        let how = if self.simgrid {
            "SimGrid build: times SIMULATED".to_string()
        } else {
            "REAL runs".to_string()
        };
        format!("StarPU {} ({}; {how})", self.series, self.lib.display())
    }

    /// Whether our library is preloaded into a program of this StarPU
    /// (1.3) rather than named by `STARPU_SCHED_LIB` (1.4; see
    /// [`crate::launch::load_library`]).
    pub fn preloads(&self) -> bool {
        self.series == "1.3"
    }
}

/// Reads `ldd`'s answer for `program`: its `libstarpu-<series>.so` and
/// whether it links SimGrid.
pub fn starpu_of(program: &Path) -> Result<Starpu, String> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| format!("cannot run ldd on {}: {e}", program.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_ldd(&text).ok_or_else(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        let why = if out.status.success() {
            "it does not link libstarpu".to_string()
        } else {
            format!("ldd says: {}", err.lines().next().unwrap_or("").trim())
        };
        format!("{} is not a StarPU program: {why}", program.display())
    })
}

/// The StarPU of an `ldd` listing, if it has one.
pub fn parse_ldd(text: &str) -> Option<Starpu> {
    let mut found: Option<Starpu> = None;
    let mut simgrid = false;
    for line in text.lines() {
        let line = line.trim();
        let Some((name, rest)) = line.split_once("=>") else {
            continue;
        };
        let name = name.trim();
        if name.starts_with("libsimgrid") {
            simgrid = true;
        }
        let Some(series) = name
            .strip_prefix("libstarpu-")
            .and_then(|s| s.split_once(".so"))
            .map(|(v, _)| v.to_string())
        else {
            continue;
        };
        let path = rest.split_whitespace().next().unwrap_or("");
        let lib = PathBuf::from(if path == "not" { name } else { path });
        // `<cache>/starpu-1.4.10/<build>/lib/libstarpu-1.4.so.N`.
        let build = lib
            .parent()
            .filter(|d| d.file_name().is_some_and(|n| n == "lib"))
            .and_then(Path::parent)
            .filter(|b| {
                b.parent()
                    .and_then(Path::file_name)
                    .is_some_and(|n| n.to_string_lossy().starts_with("starpu-1.4"))
            })
            .and_then(Path::file_name)
            .map(|b| b.to_string_lossy().into_owned());
        found = Some(Starpu {
            series,
            lib,
            build,
            simgrid: false,
        });
    }
    found.map(|s| Starpu { simgrid, ..s })
}

/// Our library built for `starpu`: `explicit` when given; for 1.3 the
/// one `plb run` loads ([`crate::launch::find_library`]); for this
/// project's 1.4 build `B`, `target/starpu14-B/release/`
/// ([`crate::launch::starpu14_library`]).
pub fn library_for(starpu: &Starpu, explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
        } else {
            Err(format!("--library {}: no such file", p.display()))
        };
    }
    let (candidate, how) = match (starpu.series.as_str(), &starpu.build) {
        ("1.3", _) => return crate::launch::find_library(),
        ("1.4", Some(build)) => (
            crate::launch::starpu14_library(build),
            format!(
                "source scripts/lib/starpu14.sh; with_starpu14 {build} cargo build --release -p starpu-plb"
            ),
        ),
        (series, _) => {
            return Err(format!(
                "the program links StarPU {series} at {}, for which this project builds no \
                 library: build ours against it (PKG_CONFIG_PATH at its prefix, \
                 `cargo build --release -p starpu-plb`) and pass it with --library",
                starpu.lib.display()
            ));
        }
    };
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!(
            "no build of our library for {}: {} is missing (build it with `{how}`, or pass --library)",
            starpu.label(),
            candidate.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_listings_name_the_series_the_build_and_simgrid() {
        let debian = "\tlinux-vdso.so.1 (0x00007ffc)\n\
            \tlibstarpu-1.3.so.9 => /lib/x86_64-linux-gnu/libstarpu-1.3.so.9 (0x00007f6c)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f6b)\n";
        let s = parse_ldd(debian).unwrap();
        assert_eq!(s.series, "1.3");
        assert_eq!(s.build, None);
        assert!(!s.simgrid);
        assert!(s.preloads());

        let sim = "\tlibstarpu-1.4.so.9 => /root/.cache/plb/starpu-1.4.10/simgrid/lib/libstarpu-1.4.so.9 (0x1)\n\
            \tlibsimgrid.so.3.32 => /lib/x86_64-linux-gnu/libsimgrid.so.3.32 (0x2)\n";
        let s = parse_ldd(sim).unwrap();
        assert_eq!(
            (s.series.as_str(), s.build.as_deref(), s.simgrid),
            ("1.4", Some("simgrid"), true)
        );
        assert!(!s.preloads());
        assert!(s.label().contains("SIMULATED"));

        let elsewhere = "\tlibstarpu-1.4.so.9 => /usr/local/lib/libstarpu-1.4.so.9 (0x1)\n";
        let s = parse_ldd(elsewhere).unwrap();
        assert_eq!(s.build, None);
        let e = library_for(&s, None).unwrap_err();
        assert!(e.contains("--library"), "{e}");

        assert_eq!(parse_ldd("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n"), None);
        assert_eq!(parse_ldd("\tnot a dynamic executable\n"), None);
    }
}
