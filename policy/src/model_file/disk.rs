//! The models file on disk: read without ever blocking (regular files up
//! to a size cap only) and replaced atomically and durably (unique
//! temporary file, fsync, rename, fsync of the directory).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest models file read (a full one, 4,096 models of 32 samples, is
/// about 8 MiB).
pub const MAX_BYTES: u64 = 64 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// Not a regular file (what it is instead): never read, never replaced.
    NotRegular(&'static str),
    /// Larger than [`MAX_BYTES`] (its size).
    TooLarge(u64),
    /// Any other error of the system.
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotRegular(what) => write!(f, "not a regular file ({what})"),
            ReadError::TooLarge(n) => write!(f, "{n} bytes, over the {MAX_BYTES}-byte cap"),
            ReadError::Io(e) => write!(f, "unreadable ({e})"),
        }
    }
}

/// What a non-regular file is.
fn what(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a plain file"
    }
}

/// The bytes of `path`; `Ok(None)` when it does not exist. Opened with
/// `O_NONBLOCK` (a named pipe cannot stall the open) and read only when the
/// opened handle is a regular file of at most [`MAX_BYTES`] (read with
/// that bound, should it grow meanwhile).
pub fn read(path: &Path) -> Result<Option<Vec<u8>>, ReadError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ReadError::Io(e)),
    };
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(what(meta.file_type())));
    }
    if meta.len() > MAX_BYTES {
        return Err(ReadError::TooLarge(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(ReadError::TooLarge(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Temporary files created by this process so far (with the pid, a name
/// no other writer uses).
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

/// A new temporary file next to `path`, created exclusively.
fn temporary(path: &Path) -> io::Result<(PathBuf, File)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("models");
    loop {
        let n = TEMPORARIES.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.tmp.{}.{n}", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            // Left by a dead process of the same pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces `path` with `bytes`: written to a temporary file of its
/// directory, synced, renamed over `path`, then the directory synced (best
/// effort: some file systems cannot sync a directory). A crash leaves the
/// old file or the new one, never a mix.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (tmp, mut file) = temporary(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    if let Ok(dir) = File::open(path.parent().unwrap_or(Path::new("."))) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("plb-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m");
        assert!(matches!(read(&p), Ok(None)));
        replace(&p, b"one").unwrap();
        replace(&p, b"two").unwrap();
        assert_eq!(read(&p).unwrap().unwrap(), b"two");
        assert!(matches!(
            read(&dir),
            Err(ReadError::NotRegular("a directory"))
        ));
        // A named pipe with no writer: refused at once, not read (a
        // blocking open or read would hang this test).
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(
                read(&fifo),
                Err(ReadError::NotRegular("a named pipe"))
            ));
            std::fs::remove_file(&fifo).unwrap();
        }
        // Larger than the cap: refused from its size, not read.
        let big = dir.join("big");
        File::create(&big).unwrap().set_len(MAX_BYTES + 1).unwrap();
        assert!(matches!(read(&big), Err(ReadError::TooLarge(_))));
        // No temporary file is left behind.
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["big", "m"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
