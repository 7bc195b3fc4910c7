//! What the distributed partitioning ([`super::protocol`]) needs from a
//! communicator: the rank, the size, and two small collectives with a
//! deadline. `plb app mm-mpi` implements [`Comm`] over MPI in Rust; the C
//! API (`policy/include/plb_distributed.h`) over the application's own
//! callbacks (the header's ready-made ones use MPI). No clock here: the
//! implementation measures its waits; [`Deadline`] only says how long
//! they may be.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A collective that failed. After one, the ranks' collectives no longer
/// match: the caller ends the job.
#[derive(Debug, Clone, PartialEq)]
pub enum CommError {
    /// Not complete within the deadline: a rank died or does not answer.
    TimedOut { what: String, seconds: f64 },
    /// The communication library returned an error.
    Failed { what: String, code: i32 },
}

impl fmt::Display for CommError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommError::TimedOut { what, seconds } => write!(
                f,
                "{what}: no answer within {seconds} s (a rank died, hangs or is far slower)"
            ),
            CommError::Failed { what, code } => write!(f, "{what}: MPI error {code}"),
        }
    }
}

/// What a C collective or exchange returned, as a result: 0 is done,
/// `-1` not done within `waited_s` (the request may still be pending),
/// anything else a failure of the communication library. Seconds are shown
/// to a tenth.
pub fn status(what: &str, rc: i32, waited_s: f64) -> Result<(), CommError> {
    match rc {
        0 => Ok(()),
        -1 => Err(CommError::TimedOut {
            what: what.to_string(),
            seconds: (waited_s * 10.0).round() / 10.0,
        }),
        code => Err(CommError::Failed {
            what: what.to_string(),
            code,
        }),
    }
}

/// One rank's view of the ranks taking part (every rank calls the same
/// collectives in the same order).
pub trait Comm {
    /// This rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Ranks taking part.
    fn size(&self) -> usize;
    /// Every rank's `mine` (same length on every rank), in rank order.
    /// `what` names the step in error messages.
    fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError>;
    /// `root`'s `buf` into every rank's `buf` (same length everywhere).
    fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError>;
    /// A step of the work took `seconds` on some rank (every rank notes
    /// the same figure): later waits may last longer ([`Deadline::note`]).
    fn note_step(&self, seconds: f64);
}

/// How many times the longest step measured so far a collective or an
/// exchange may wait ([`Deadline`]).
pub const DEADLINE_SCALE: f64 = 10.0;

/// How long a collective or an exchange may wait: the user's floor, or
/// [`DEADLINE_SCALE`] times the longest step measured so far
/// ([`Deadline::note`]), whichever is longer. It grows with the measured
/// work, never below the floor; before any step is measured it is the
/// floor.
#[derive(Debug)]
pub struct Deadline {
    floor_s: f64,
    /// `f64` bits of the longest step (non-negative doubles order as their
    /// bits do).
    longest: AtomicU64,
}

impl Deadline {
    /// A deadline of `floor_s` seconds until steps are measured.
    pub fn new(floor_s: f64) -> Deadline {
        Deadline {
            floor_s,
            longest: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// The deadline now, seconds.
    pub fn seconds(&self) -> f64 {
        let longest = f64::from_bits(self.longest.load(Ordering::Relaxed));
        self.floor_s.max(DEADLINE_SCALE * longest)
    }

    /// A step took `seconds` (ignored unless finite and positive).
    pub fn note(&self, seconds: f64) {
        if seconds.is_finite() && seconds > 0.0 {
            self.longest.fetch_max(seconds.to_bits(), Ordering::Relaxed);
        }
    }
}

/// `f64`s as bytes (little endian) and back.
pub fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// See [`f64_bytes`].
pub fn bytes_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// `u64`s as bytes (little endian) and back.
pub fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// See [`u64_bytes`].
pub fn bytes_u64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deadline is the floor until a step is measured, then grows to
    /// DEADLINE_SCALE times the longest step, never below the floor; bad
    /// measurements are ignored.
    #[test]
    fn the_deadline_grows_with_the_longest_step_never_below_the_floor() {
        let d = Deadline::new(60.0);
        assert_eq!(d.seconds(), 60.0);
        d.note(2.0);
        assert_eq!(d.seconds(), 60.0);
        d.note(9.0);
        assert_eq!(d.seconds(), 90.0);
        d.note(3.0);
        assert_eq!(d.seconds(), 90.0, "the longest step counts");
        d.note(f64::NAN);
        d.note(-5.0);
        d.note(f64::INFINITY);
        assert_eq!(d.seconds(), 90.0);
    }

    #[test]
    fn numbers_survive_the_byte_round_trip() {
        let f = [1.5, -2.0, f64::INFINITY];
        assert_eq!(bytes_f64(&f64_bytes(&f)), f);
        let u = [0, 7, u64::MAX];
        assert_eq!(bytes_u64(&u64_bytes(&u)), u);
    }
}
