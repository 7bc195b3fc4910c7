//! Where task mode's persistent models live and how the file is read and
//! written (the format is [`plb_core::taskmode::persist`]).
//!
//! * Directory: `$PLB_MODEL_DIR`, else `$STARPU_HOME/.starpu/plb` (StarPU's
//!   own calibration directory's parent; `STARPU_HOME` defaults to `$HOME`).
//!   `PLB_MODEL_DIR=off` turns persistence off.
//! * File: `<host>.models`, the host being `STARPU_HOSTNAME` where set (as
//!   StarPU names its own calibration files), else the machine's name.
//! * A file from another host, StarPU version or worker set, or a damaged
//!   one, is ignored with one warning line; a missing one silently.
//! * Writes go to a temporary file in the same directory, renamed over the
//!   old one: a run killed mid-write leaves the previous file intact.

use std::path::{Path, PathBuf};

use plb_core::taskmode::persist::{self, Identity, Saved};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity {
            host: "h".into(),
            starpu: "1.3.10".into(),
            workers: "cpu,cpu".into(),
        }
    }

    #[test]
    fn save_then_load_and_damage_is_ignored() {
        let dir = std::env::temp_dir().join(format!("plb-model-file-{}", std::process::id()));
        let p = path(&dir, "h");
        let mut s = Saved::new();
        s.insert(("k".into(), 1), vec![(2.0, 0.5)]);
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
