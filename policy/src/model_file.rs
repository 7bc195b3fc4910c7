//! Where task mode's persistent models live and how the file is read and
//! written (the format is [`plb_core::taskmode::persist`]).
//!
//! * Directory: `$PLB_MODEL_DIR`, else `$STARPU_HOME/.starpu/plb` (StarPU's
//!   own calibration directory's parent; `STARPU_HOME` defaults to `$HOME`).
//!   `PLB_MODEL_DIR=off` turns persistence off.
//! * File: `<host>.models`, the host being `STARPU_HOSTNAME` where set (as
//!   StarPU names its own calibration files), else the machine's name.
//! * A file from another host or StarPU version, or a damaged one, is
//!   ignored with one warning line; a missing one silently. A saved model
//!   is used only by a worker of the same id and kind.
//! * Writes go to a temporary file in the same directory, renamed over the
//!   old one: a run killed mid-write leaves the previous file intact.
//!
//! [`Persisted`] is what a policy keeps: it seeds a `ModelBook` at each
//! codelet's first task and writes the book back when the context ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use plb_core::taskmode::persist::{self, Identity, Saved, SavedModel};
use plb_core::taskmode::placement::ModelBook;

/// The variable that names the directory (or `off`).
pub const DIR_ENV: &str = "PLB_MODEL_DIR";

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

/// The file for `host` in `dir`.
pub fn path(dir: &Path, host: &str) -> PathBuf {
    dir.join(format!("{host}.models"))
}

/// Reads the file: its samples, or nothing (with one warning line when it
/// exists but cannot be used).
pub fn load(path: &Path, id: &Identity) -> Saved {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Saved::new(),
        Err(e) => {
            eprintln!(
                "plb: warning: models file {} unreadable ({e}); ignored",
                path.display()
            );
            return Saved::new();
        }
    };
    match persist::parse(&text, id) {
        Ok(saved) => saved,
        Err(e) => {
            eprintln!("plb: warning: models file {} ignored: {e}", path.display());
            Saved::new()
        }
    }
}

/// Writes the file atomically (temporary file renamed over it).
pub fn save(path: &Path, id: &Identity, saved: &Saved) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("models"),
        std::process::id()
    ));
    let text = persist::render(id, saved);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Codelet names remembered for saving (beyond, codelets are not saved).
const NAMES_CAP: usize = 1024;

/// One scheduling context's view of the models file: what it held and the
/// names of the codelets seen, to seed a [`ModelBook`] at a codelet's first
/// task and to write the book back at the end.
#[derive(Debug, Default)]
pub struct Persisted {
    /// The file and this machine's identity, once looked at (`Some(None)`:
    /// persistence off).
    file: Option<Option<(PathBuf, Identity)>>,
    /// What the file held (models of codelets not run this time are saved
    /// back unchanged).
    saved: Saved,
    /// Codelet keys already seen, with their names.
    names: HashMap<usize, Option<String>>,
    /// Each worker's kind (by worker id): a saved model is used only by a
    /// worker of the kind it was measured on.
    kinds: Vec<String>,
}

impl Persisted {
    /// Reads the file the first time it is called (file I/O: never under
    /// a push/pop lock). Needs StarPU's workers (a saved model is used only by
    /// a worker of the kind it was measured on).
    pub fn open(&mut self) {
        if self.file.is_some() {
            return;
        }
        let Some(dir) = dir() else {
            self.file = Some(None);
            return;
        };
        let ids = crate::starpu::all_worker_ids();
        self.kinds = crate::starpu::worker_kinds(&ids)
            .iter()
            .map(|k| format!("{k:?}").to_ascii_lowercase())
            .collect();
        let id = Identity {
            host: host(),
            starpu: crate::starpu::starpu_version(),
        };
        let path = path(&dir, &id.host);
        self.saved = load(&path, &id);
        self.file = Some(Some((path, id)));
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
    /// of each of `workers`, to seed the book with.
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
                    .filter_map(|&w| {
                        let m = self.saved.get(&(n.clone(), w))?;
                        (self.kinds.get(w) == Some(&m.kind)).then(|| (w, m.samples.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.names.insert(codelet, name);
        found
    }

    /// Writes the file back with `book`'s samples of the named codelets.
    pub fn save(&mut self, book: &ModelBook) {
        let Some(Some((path, id))) = &self.file else {
            return;
        };
        let mut saved = std::mem::take(&mut self.saved);
        for (w, codelet) in book.keys() {
            if let (Some(Some(name)), Some(kind)) = (self.names.get(&codelet), self.kinds.get(w)) {
                let model = SavedModel {
                    kind: kind.clone(),
                    samples: book.samples_of(w, codelet),
                };
                saved.insert((name.clone(), w), model);
            }
        }
        if let Err(e) = save(path, id, &saved) {
            eprintln!(
                "plb: warning: models file {} not written: {e}",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity {
            host: "h".into(),
            starpu: "1.3.10".into(),
        }
    }

    #[test]
    fn save_then_load_and_damage_is_ignored() {
        let dir = std::env::temp_dir().join(format!("plb-model-file-{}", std::process::id()));
        let p = path(&dir, "h");
        let mut s = Saved::new();
        s.insert(
            ("k".into(), 1),
            SavedModel {
                kind: "cpu".into(),
                samples: vec![(2.0, 0.5)],
            },
        );
        save(&p, &id(), &s).unwrap();
        assert_eq!(load(&p, &id()), s);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Foreign and torn files load as nothing.
        let other = Identity {
            host: "x".into(),
            ..id()
        };
        assert!(load(&p, &other).is_empty());
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, &text[..text.len() / 2]).unwrap();
        assert!(load(&p, &id()).is_empty());
        assert!(load(&dir.join("missing.models"), &id()).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
