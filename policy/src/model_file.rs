//! Where task mode's persistent models live and how the file is read and
//! written (the format is [`plb_core::taskmode::persist`], the disk work
//! [`disk`]).
//!
//! * Directory: `$PLB_MODEL_DIR`, else `$STARPU_HOME/.starpu/plb` (StarPU's
//!   own calibration directory's parent; `STARPU_HOME` defaults to `$HOME`).
//!   `PLB_MODEL_DIR=off` turns persistence off.
//! * File: `<host>.models`, the host being `STARPU_HOSTNAME` where set (as
//!   StarPU names its own calibration files), else the machine's name;
//!   under `PLB_EMULATE`, `<host>.emulated-<hash of its text>.models`, so
//!   emulated timings never seed a real run (nor another emulation's).
//! * A file is used only when its identity (host, StarPU version,
//!   emulation, every worker's kind and StarPU name) is this run's. A
//!   foreign, damaged or oversized file is ignored with one warning line
//!   and replaced when the run saves; a path that is not a regular file
//!   (a named pipe, a directory...) or is unreadable is neither read nor
//!   replaced: one warning, and persistence is off for the run.
//! * Saving merges: under an exclusive lock on `<file>.lock` (`flock`,
//!   bounded wait), the current file is read again, this run's new samples
//!   are appended to its models (the newest 32 kept), and the result is
//!   written to a temporary file (pid and counter) renamed over the old
//!   one. Concurrent processes and contexts add to one another's samples.
//!
//! [`Persisted`] is what a policy keeps: it seeds a `ModelBook` at each
//! codelet's first task and writes the book's new samples back when the
//! context ends.

pub mod disk;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use plb_core::taskmode::persist::{self, Identity, Saved, Worker};
use plb_core::taskmode::placement::ModelBook;

use crate::starpu::file_lock::FileLock;

/// The variable that names the directory (or `off`).
pub const DIR_ENV: &str = "PLB_MODEL_DIR";

/// Longest wait for another writer's lock before a save gives up.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The models directory, `None` when persistence is off.
pub fn dir() -> Option<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    if let Some(d) = var(DIR_ENV) {
        return (d != "off").then(|| PathBuf::from(d));
    }
    let home = var("STARPU_HOME").or_else(|| var("HOME"))?;
    Some(PathBuf::from(home).join(".starpu").join("plb"))
}

/// This machine's host name for model files.
pub fn host() -> String {
    std::env::var("STARPU_HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
        .replace(['/', '\n', '\r'], "_")
}

/// The file of real timings for `host` in `dir`.
pub fn path(dir: &Path, host: &str) -> PathBuf {
    dir.join(format!("{host}.models"))
}

/// The file for `id` in `dir`: [`path`], or for an emulated run
/// `<host>.emulated-<16 hex digits>.models`, the digits a hash (FNV-1a) of
/// the `PLB_EMULATE` text.
pub fn path_for(dir: &Path, id: &Identity) -> PathBuf {
    let host = id.host.replace(['/', '\n', '\r'], "_");
    match &id.emulation {
        None => path(dir, &host),
        Some(spec) => {
            let hash = spec.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            dir.join(format!("{host}.emulated-{hash:016x}.models"))
        }
    }
}

/// The lock file of `path`: `<file>.lock` next to it.
fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// This run's identity: host, StarPU version, emulation in force and every
/// StarPU worker (needs StarPU initialised, else no worker is listed).
pub fn identity() -> Identity {
    let ids = crate::starpu::all_worker_ids();
    let kinds = crate::starpu::worker_kinds(&ids);
    let names = crate::starpu::worker_names(&ids);
    Identity {
        host: host(),
        starpu: crate::starpu::starpu_version(),
        emulation: crate::starpu::emulation_in_force(),
        workers: kinds
            .into_iter()
            .zip(names)
            .map(|(kind, name)| Worker { kind, name })
            .collect(),
    }
}

/// Why a file's samples are not used.
#[derive(Debug)]
pub enum Unusable {
    /// Foreign, damaged or oversized: the run saves over it.
    Ignored(String),
    /// Not a regular file, or unreadable: neither read nor written.
    Refused(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Ignored(m) => write!(f, "ignored: {m}"),
            Unusable::Refused(m) => write!(f, "refused: {m}; models are not saved this run"),
        }
    }
}

/// What [`read_current`] found.
enum Current {
    /// Usable samples (none for a missing file).
    Saved(Saved),
    /// Foreign, damaged or oversized: saved over.
    Replaceable(String),
}

/// Reads and checks the file at `path` (never blocking, see [`disk::read`]).
fn read_current(path: &Path, id: &Identity) -> Result<Current, Unusable> {
    let bytes = match disk::read(path) {
        Ok(None) => return Ok(Current::Saved(Saved::new())),
        Ok(Some(b)) => b,
        Err(e @ disk::ReadError::TooLarge(_)) => return Ok(Current::Replaceable(e.to_string())),
        Err(e @ (disk::ReadError::NotRegular(_) | disk::ReadError::Io(_))) => {
            return Err(Unusable::Refused(e.to_string()));
        }
    };
    match persist::parse(&String::from_utf8_lossy(&bytes), id) {
        Ok(saved) => Ok(Current::Saved(saved)),
        Err(e) => Ok(Current::Replaceable(e.to_string())),
    }
}

/// The samples of the file at `path` for a run of identity `id`; a missing
/// file holds none.
pub fn load(path: &Path, id: &Identity) -> Result<Saved, Unusable> {
    match read_current(path, id)? {
        Current::Saved(saved) => Ok(saved),
        Current::Replaceable(why) => Err(Unusable::Ignored(why)),
    }
}

/// Adds `new` (samples measured since the file was loaded, per model) to
/// the file at `path`: under the lock, the current file is read again and
/// merged with `new` ([`persist::merge`]: the newest 32 per model), then
/// replaced ([`disk::replace`]); a foreign, damaged or oversized file is
/// replaced by `new` alone. Nothing is written when `new` is empty, when
/// the path is not a regular file or unreadable, or when another writer
/// holds the lock for longer than [`LOCK_WAIT`].
pub fn save(path: &Path, id: &Identity, new: &Saved) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    if new.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let Some(_lock) = FileLock::acquire(&lock_path(path), LOCK_WAIT)? else {
        return Err(Error::new(
            ErrorKind::WouldBlock,
            format!(
                "{} held by another writer for {}s",
                lock_path(path).display(),
                LOCK_WAIT.as_secs()
            ),
        ));
    };
    let mut saved = match read_current(path, id) {
        Ok(Current::Saved(saved)) => saved,
        Ok(Current::Replaceable(_)) => Saved::new(),
        Err(e) => return Err(Error::other(e.to_string())),
    };
    persist::merge(&mut saved, new);
    disk::replace(path, persist::render(id, &saved).as_bytes())
}

/// Warnings already printed by this process (path and text): each once.
static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Prints `plb: warning: models file <path> <what>` once per process.
fn warn(path: &Path, what: &dyn std::fmt::Display) {
    let line = format!("plb: warning: models file {} {what}", path.display());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.get_or_insert_with(HashSet::new).insert(line.clone()) {
        eprintln!("{line}");
    }
}

/// Codelet names remembered for saving (beyond, codelets are not saved).
const NAMES_CAP: usize = 1024;

/// One scheduling context's view of the models file: what it held and the
/// names of the codelets seen, to seed a [`ModelBook`] at a codelet's first
/// task and to add the book's new samples to the file at the end.
#[derive(Debug, Default)]
pub struct Persisted {
    /// The file and this run's identity, once looked at (`Some(None)`:
    /// persistence off).
    file: Option<Option<(PathBuf, Identity)>>,
    /// What the file held.
    saved: Saved,
    /// Codelet keys already seen, with their names.
    names: HashMap<usize, Option<String>>,
}

impl Persisted {
    /// Reads the file the first time it is called (file I/O: never under
    /// a push/pop lock). Needs StarPU's workers (they are part of the
    /// file's identity).
    pub fn open(&mut self) {
        if self.file.is_some() {
            return;
        }
        let Some(dir) = dir() else {
            self.file = Some(None);
            return;
        };
        let id = identity();
        let path = path_for(&dir, &id);
        match load(&path, &id) {
            Ok(saved) => self.saved = saved,
            Err(e @ Unusable::Ignored(_)) => warn(&path, &e),
            Err(e @ Unusable::Refused(_)) => {
                warn(&path, &e);
                self.file = Some(None);
                return;
            }
        }
        self.file = Some(Some((path, id)));
    }

    /// Every saved sample list: codelet name, worker id, (units, seconds).
    pub fn saved_samples(&self) -> impl Iterator<Item = (&str, usize, &[(f64, f64)])> {
        self.saved
            .iter()
            .map(|((name, w), samples)| (name.as_str(), *w, samples.as_slice()))
    }

    /// Whether [`Persisted::open`] ran.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Whether `codelet` was seen already (a map lookup).
    pub fn seen(&self, codelet: usize) -> bool {
        codelet == 0 || self.names.contains_key(&codelet) || self.names.len() >= NAMES_CAP
    }

    /// A codelet seen for the first time, with its name: the saved samples
    /// of each of `workers` (StarPU worker ids), to seed the book with.
    pub fn first_sight(
        &mut self,
        codelet: usize,
        name: Option<String>,
        workers: &[usize],
    ) -> Vec<(usize, Vec<(f64, f64)>)> {
        if self.seen(codelet) {
            return Vec::new();
        }
        let found = name
            .as_ref()
            .map(|n| {
                workers
                    .iter()
                    .filter_map(|&w| Some((w, self.saved.get(&(n.clone(), w))?.clone())))
                    .collect()
            })
            .unwrap_or_default();
        self.names.insert(codelet, name);
        found
    }

    /// Adds the samples `book` measured in this run (not those it was
    /// seeded with) of the named codelets to the file ([`save`]).
    pub fn save(&mut self, book: &ModelBook) {
        let Some(Some((path, id))) = &self.file else {
            return;
        };
        let mut new = Saved::new();
        for (w, codelet) in book.keys() {
            if let Some(Some(name)) = self.names.get(&codelet) {
                let fresh = book.fresh_samples_of(w, codelet);
                if !fresh.is_empty() {
                    new.insert((name.clone(), w), fresh);
                }
            }
        }
        if let Err(e) = save(path, id, &new) {
            warn(path, &format_args!("not written: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plb_core::balance::WorkerKind;

    fn id() -> Identity {
        Identity {
            host: "h".into(),
            starpu: "1.3.10".into(),
            emulation: None,
            workers: vec![
                Worker {
                    kind: WorkerKind::Cpu,
                    name: "CPU 0".into(),
                },
                Worker {
                    kind: WorkerKind::Cpu,
                    name: "CPU 1".into(),
                },
            ],
        }
    }

    fn one(codelet: &str, worker: usize, samples: &[(f64, f64)]) -> Saved {
        let mut s = Saved::new();
        s.insert((codelet.into(), worker), samples.to_vec());
        s
    }

    #[test]
    fn saves_merge_and_damage_is_replaced() {
        let dir = std::env::temp_dir().join(format!("plb-model-file-{}", std::process::id()));
        let p = path(&dir, "h");
        save(&p, &id(), &one("k", 1, &[(2.0, 0.5)])).unwrap();
        assert_eq!(load(&p, &id()).unwrap(), one("k", 1, &[(2.0, 0.5)]));
        // A second writer adds to the first one's samples.
        save(&p, &id(), &one("k", 1, &[(4.0, 1.0)])).unwrap();
        save(&p, &id(), &one("j", 0, &[(1.0, 1.0)])).unwrap();
        let back = load(&p, &id()).unwrap();
        assert_eq!(back[&("k".to_string(), 1)], [(2.0, 0.5), (4.0, 1.0)]);
        assert_eq!(back[&("j".to_string(), 0)], [(1.0, 1.0)]);
        // Nothing new: the file is not touched.
        save(&p, &id(), &Saved::new()).unwrap();
        assert_eq!(load(&p, &id()).unwrap(), back);
        // Only the file and its lock are left (no temporary file).
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["h.models", "h.models.lock"]);
        // Foreign and torn files are ignored, and replaced at the next save.
        let other = Identity {
            host: "x".into(),
            ..id()
        };
        assert!(matches!(load(&p, &other), Err(Unusable::Ignored(_))));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, &text[..text.len() / 2]).unwrap();
        match load(&p, &id()) {
            Err(Unusable::Ignored(m)) => assert!(m.contains("corrupt"), "{m}"),
            r => panic!("{r:?}"),
        }
        save(&p, &id(), &one("k", 0, &[(3.0, 3.0)])).unwrap();
        assert_eq!(load(&p, &id()).unwrap(), one("k", 0, &[(3.0, 3.0)]));
        assert!(load(&dir.join("missing.models"), &id()).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn emulated_runs_have_their_own_file() {
        let dir = Path::new("/m");
        assert_eq!(path_for(dir, &id()), Path::new("/m/h.models"));
        let emulated = |s: &str| Identity {
            emulation: Some(s.into()),
            ..id()
        };
        let a = path_for(dir, &emulated("0:speed=0.25"));
        let b = path_for(dir, &emulated("0:speed=0.5"));
        assert_ne!(a, b);
        assert_eq!(a, path_for(dir, &emulated("0:speed=0.25")));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("h.emulated-") && name.ends_with(".models") && name.len() == 34,
            "{name}"
        );
    }
}
