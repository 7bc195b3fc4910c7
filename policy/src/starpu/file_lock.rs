//! An exclusive advisory lock on a file (`flock(2)`), taken with
//! non-blocking attempts for a bounded time: the one libc call of the
//! models file (`crate::model_file`), kept here with the crate's other
//! unsafe code. The lock is released when the [`FileLock`] is dropped
//! (its descriptor closed) or the process dies.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// A held lock.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Locks `path` (created empty if missing), trying without blocking
    /// until `wait` has passed. `Ok(None)`: still held by another process
    /// (or context) after `wait`. A `path` that is not a regular file is
    /// refused (`InvalidInput`) without blocking.
    pub fn acquire(path: &Path, wait: Duration) -> io::Result<Option<FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "lock file is not a regular file",
            ));
        }
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            // SAFETY: flock on a descriptor `file` owns and keeps open for
            // the call; LOCK_NB makes it return at once.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r == 0 {
                return Ok(Some(FileLock { _file: file }));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => {}
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_a_bounded_time_then_gets_the_lock() {
        let dir = std::env::temp_dir().join(format!("plb-file-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.lock");
        let held = FileLock::acquire(&path, Duration::ZERO).unwrap().unwrap();
        // Another open file description of the same file (another context
        // of the process) does not get it.
        assert!(
            FileLock::acquire(&path, Duration::from_millis(20))
                .unwrap()
                .is_none()
        );
        drop(held);
        assert!(FileLock::acquire(&path, Duration::ZERO).unwrap().is_some());
        // Not a regular file: refused at once.
        assert!(FileLock::acquire(&dir, Duration::ZERO).is_err());
        let fifo = dir.join("fifo.lock");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert_eq!(
                FileLock::acquire(&fifo, Duration::ZERO).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
