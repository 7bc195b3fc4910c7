//! The loaded libstarpu must be the StarPU this library was built for.
//!
//! `starpu-sys` generates its bindings from one StarPU's headers: the
//! layouts of `struct starpu_conf`, `starpu_task`, `starpu_codelet` and
//! `starpu_sched_policy`, `STARPU_NMAXWORKERS` and the blocking-drivers
//! setting are compile-time constants of this library. Loaded into a
//! program that runs another StarPU (a library built for 1.4 preloaded into
//! a 1.3 program, one built against a StarPU configured with another
//! `--enable-maxcpus`, or against the SimGrid build), it would misread
//! StarPU's structs without any sign. So the first entry point StarPU
//! reaches — the interposed `starpu_initialize` (preloaded, 1.3 and 1.4),
//! `starpu_get_sched_lib_policy` / `starpu_get_sched_lib_policies` (1.4's
//! `STARPU_SCHED_LIB`) — calls [`check`] before it reads or builds any
//! StarPU struct, and refuses on a mismatch with one line naming both
//! StarPU builds.
//!
//! What is compared, at run time, with the values of the headers:
//!
//! * the series: `starpu_get_version` of the loaded library against
//!   `STARPU_MAJOR_VERSION.STARPU_MINOR_VERSION` (the release may differ:
//!   StarPU keeps its structs within a series);
//! * the size of `struct starpu_conf`, measured by letting the loaded
//!   library's `starpu_conf_init` fill a larger buffer of sentinel bytes
//!   (it clears exactly its own struct first): the struct holds arrays of
//!   `STARPU_NMAXWORKERS` entries, so a library configured with another
//!   worker limit (`--enable-maxcpus`, `--enable-maxcudadev`, ...) has
//!   another size;
//! * SimGrid: whether the loaded library defines
//!   `_starpu_simgrid_actor_create`, which only SimGrid builds export.
//!   StarPU's blocking drivers (`plb_blocking_drivers`) are on in every
//!   SimGrid build; a native build configured with
//!   `--enable-blocking-drivers` is not detectable at run time.

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use starpu_sys as sys;

/// The StarPU series of the headers (`1.3`, `1.4`).
const BUILT_SERIES: (u32, u32) = (sys::STARPU_MAJOR_VERSION, sys::STARPU_MINOR_VERSION);

/// A symbol that only SimGrid builds of libstarpu export (declared in
/// `starpu_thread.h` under `STARPU_SIMGRID`).
const SIMGRID_ONLY: &CStr = c"_starpu_simgrid_actor_create";

/// What the loaded libstarpu says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// `starpu_get_version`.
    pub version: (c_int, c_int, c_int),
    /// Bytes `starpu_conf_init` writes (`None` when it wrote nothing
    /// recognisable).
    pub conf_size: Option<usize>,
    /// Whether it is a SimGrid build.
    pub simgrid: bool,
    /// Its file, when `dladdr` knows.
    pub path: Option<String>,
}

/// What the headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Built {
    pub series: (u32, u32),
    pub conf_size: usize,
    pub nmaxworkers: u32,
    pub simgrid: bool,
    pub prefix: &'static str,
}

impl Built {
    fn this() -> Built {
        Built {
            series: BUILT_SERIES,
            conf_size: std::mem::size_of::<sys::starpu_conf>(),
            nmaxworkers: sys::STARPU_NMAXWORKERS,
            simgrid: sys::STARPU_IS_SIMGRID,
            prefix: sys::STARPU_PREFIX,
        }
    }

    fn describe(&self) -> String {
        format!(
            "StarPU {}.{}{} (headers of {}, STARPU_NMAXWORKERS={}, struct starpu_conf of {} bytes)",
            self.series.0,
            self.series.1,
            if self.simgrid { " SimGrid" } else { "" },
            if self.prefix.is_empty() {
                "an unknown prefix"
            } else {
                self.prefix
            },
            self.nmaxworkers,
            self.conf_size
        )
    }
}

impl Loaded {
    fn describe(&self) -> String {
        let (a, b, c) = self.version;
        let mut s = format!(
            "StarPU {a}.{b}.{c}{}",
            if self.simgrid { " SimGrid" } else { "" }
        );
        if let Some(p) = &self.path {
            s.push_str(&format!(" ({p})"));
        }
        s
    }
}

/// What to use instead, for the series the program runs.
fn hint(loaded: &Loaded) -> String {
    match (loaded.version.0, loaded.version.1, loaded.simgrid) {
        (1, 3, false) => "use the library built against it (`cargo build --release`: \
                          target/release/libstarpu_plb.so)"
            .into(),
        (1, 4, false) => "use the library built against it (`source scripts/lib/starpu14.sh; \
                          with_starpu14 native cargo build --release`: \
                          target/starpu14-native/release/libstarpu_plb.so; docs/starpu14.md)"
            .into(),
        (1, 4, true) => "use the library built against it (`source scripts/lib/starpu14.sh; \
                         with_starpu14 simgrid cargo build --release -p starpu-plb`: \
                         target/starpu14-simgrid/release/libstarpu_plb.so; docs/simgrid.md)"
            .into(),
        _ => "rebuild the library against it (PKG_CONFIG_PATH at its lib/pkgconfig)".into(),
    }
}

/// Compares the loaded library with the headers; `Err` is the one-line
/// message (without the `plb: error: ` prefix).
pub(crate) fn compare(built: &Built, loaded: &Loaded) -> Result<(), String> {
    let series_ok = i64::from(loaded.version.0) == i64::from(built.series.0)
        && i64::from(loaded.version.1) == i64::from(built.series.1);
    let why = if !series_ok {
        "another series: its structs have other layouts"
    } else if loaded.simgrid != built.simgrid {
        "a SimGrid and a native build: their structs and drivers differ"
    } else if loaded.conf_size != Some(built.conf_size) {
        "the same series configured differently (its struct starpu_conf has another size: \
         another STARPU_NMAXWORKERS, from --enable-maxcpus, --enable-maxcudadev, ...)"
    } else {
        return Ok(());
    };
    let measured = match loaded.conf_size {
        Some(n) if series_ok && n != built.conf_size => {
            format!(", whose struct starpu_conf has {n} bytes")
        }
        _ => String::new(),
    };
    Err(format!(
        "libstarpu_plb.so was built for {} but this program runs {}{measured} ({why}); {}",
        built.describe(),
        loaded.describe(),
        hint(loaded)
    ))
}

/// Bytes the loaded `starpu_conf_init` writes: it clears its whole struct
/// before setting fields, so the last byte that differs from the sentinel
/// after the call, over two sentinels, ends the struct.
fn measured_conf_size() -> Option<usize> {
    /// Far above any struct starpu_conf (a few kB with 64 workers).
    const WORDS: usize = 1 << 15;
    let mut extent = 0usize;
    for fill in [0xa5a5_a5a5_a5a5_a5a5u64, 0x5a5a_5a5a_5a5a_5a5a] {
        let mut buf = vec![fill; WORDS];
        // SAFETY: `buf` is 256 KiB, 8-byte aligned, far larger than any
        // struct starpu_conf of any StarPU build, so whatever layout the
        // loaded library has, its writes stay inside the buffer.
        let rc = unsafe { sys::starpu_conf_init(buf.as_mut_ptr() as *mut sys::starpu_conf) };
        if rc != 0 {
            return None;
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let sentinel = fill.to_ne_bytes()[0];
        if let Some(last) = bytes.iter().rposition(|&b| b != sentinel) {
            extent = extent.max(last + 1);
        }
    }
    (extent > 0).then_some(extent)
}

/// The file holding `addr`, if the dynamic loader knows it.
fn object_path(addr: *const c_void) -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address and fills `info`.
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: filled by a successful dladdr.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the loader.
    let path = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(path.to_string_lossy().into_owned())
}

/// Asks the loaded libstarpu (the one this library's StarPU calls reach,
/// which is the program's: the program's own libstarpu comes first in the
/// global lookup scope, whether this library is preloaded or opened by
/// `STARPU_SCHED_LIB`).
fn loaded() -> Loaded {
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: writes three ints through valid pointers; callable before
    // starpu_init.
    unsafe { sys::starpu_get_version(&mut major, &mut minor, &mut release) };
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let simgrid = !unsafe { libc::dlsym(libc::RTLD_DEFAULT, SIMGRID_ONLY.as_ptr()) }.is_null();
    Loaded {
        version: (major, minor, release),
        conf_size: measured_conf_size(),
        simgrid,
        path: object_path(sys::starpu_get_version as *const c_void),
    }
}

/// Whether the loaded libstarpu matches the headers; the message on a
/// mismatch. Computed once per process.
pub(crate) fn check() -> Result<(), &'static str> {
    // Linked into the program with a static StarPU: the one StarPU there is
    // the one whose headers this build read.
    if cfg!(plb_embedded) {
        return Ok(());
    }
    static RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    RESULT
        .get_or_init(|| compare(&Built::this(), &loaded()))
        .as_ref()
        .map(|_| ())
        .map_err(String::as_str)
}

/// [`check`] for `starpu_initialize`: prints the message and returns
/// `-EINVAL` (StarPU not started) on a mismatch.
pub(crate) fn refuse_at_initialize() -> Result<(), c_int> {
    check().map_err(|msg| {
        eprintln!("plb: error: {msg}; StarPU not started");
        -libc::EINVAL
    })
}

/// [`check`] for entry points that cannot fail (StarPU 1.4's
/// `STARPU_SCHED_LIB` lookups, policy initialisation): prints the message
/// and aborts the process before any struct is read.
pub(crate) fn abort_on_mismatch() {
    if let Err(msg) = check() {
        eprintln!("plb: error: {msg}; aborting");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> Built {
        Built {
            series: (1, 4),
            conf_size: 2144,
            nmaxworkers: 80,
            simgrid: false,
            prefix: "/p/1.4",
        }
    }

    fn loaded(v: (c_int, c_int, c_int), conf: usize, simgrid: bool) -> Loaded {
        Loaded {
            version: v,
            conf_size: Some(conf),
            simgrid,
            path: Some("/lib/libstarpu.so".into()),
        }
    }

    #[test]
    fn the_same_build_passes_and_the_release_may_differ() {
        assert_eq!(compare(&built(), &loaded((1, 4, 10), 2144, false)), Ok(()));
        assert_eq!(compare(&built(), &loaded((1, 4, 7), 2144, false)), Ok(()));
    }

    #[test]
    fn another_series_is_named_with_both_versions() {
        let e = compare(&built(), &loaded((1, 3, 10), 512, false)).unwrap_err();
        assert!(
            e.starts_with("libstarpu_plb.so was built for StarPU 1.4 (headers of /p/1.4")
                && e.contains("but this program runs StarPU 1.3.10 (/lib/libstarpu.so)")
                && e.contains("another series")
                && e.contains("target/release/libstarpu_plb.so"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn another_worker_limit_or_simgrid_is_refused() {
        let e = compare(&built(), &loaded((1, 4, 10), 2688, false)).unwrap_err();
        assert!(
            e.contains("whose struct starpu_conf has 2688 bytes")
                && e.contains("STARPU_NMAXWORKERS"),
            "{e}"
        );
        let e = compare(&built(), &loaded((1, 4, 10), 2144, true)).unwrap_err();
        assert!(
            e.contains("runs StarPU 1.4.10 SimGrid") && e.contains("starpu14-simgrid"),
            "{e}"
        );
    }

    #[test]
    fn the_linked_libstarpu_matches_the_headers() {
        // Unit tests link the libstarpu whose headers they were built with.
        assert_eq!(check(), Ok(()));
        assert_eq!(
            measured_conf_size(),
            Some(std::mem::size_of::<sys::starpu_conf>())
        );
    }
}
