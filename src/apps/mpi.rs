//! The safe layer over `codelets/mpi/plb_mpi.c`: MPI start and stop,
//! control collectives with a deadline, and StarPU-MPI data exchanges.
//! A collective or exchange that does not complete in time is a
//! [`CommError::TimedOut`]: the caller says so on its rank and ends the
//! job ([`Mpi::abort`]), so a dead or silent rank never hangs the others.

// Unsafe code is denied in the workspace; allowed here because MPI and
// StarPU-MPI are reached through the C shim (every unsafe block has a
// `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use plb_core::cluster::comm::Comm;
pub use plb_core::cluster::comm::{CommError, Deadline};

#[repr(C)]
struct RawMsg {
    buf: *mut f32,
    count: i64,
    peer: c_int,
    tag: i64,
}

unsafe extern "C" {
    fn plb_mpi_init(rank: *mut c_int, size: *mut c_int) -> c_int;
    fn plb_mpi_finalize();
    fn plb_mpi_abort(code: c_int);
    fn plb_mpi_allgather(send: *const c_void, len: c_int, recv: *mut c_void, timeout: f64)
    -> c_int;
    fn plb_mpi_bcast(buf: *mut c_void, len: c_int, root: c_int, timeout: f64) -> c_int;
    fn plb_mpi_exchange(
        sends: *const RawMsg,
        nsends: c_int,
        recvs: *const RawMsg,
        nrecvs: c_int,
        timeout: f64,
    ) -> c_int;
}

/// The C shim's status for a collective or exchange not complete by its
/// deadline (its request may still be pending).
const TIMED_OUT: c_int = -1;

/// This process's place in `MPI_COMM_WORLD`; MPI is finalised on drop.
pub struct Mpi {
    pub rank: usize,
    pub size: usize,
    /// Deadline of every collective and exchange.
    pub deadline: Deadline,
}

/// The rank the MPI launcher gave this process, read from its environment
/// before MPI starts (Open MPI, PMIx, MPICH / Hydra); `None` outside one.
pub fn launcher_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

impl Mpi {
    /// Initialises MPI at thread level MULTIPLE (our control collectives
    /// run on the main thread while StarPU-MPI's progress thread calls MPI
    /// too), or checks that level when MPI is already initialised; refuses
    /// with a clear message otherwise.
    pub fn init(timeout_s: f64) -> Result<Mpi, String> {
        let (mut rank, mut size) = (0, 0);
        // SAFETY: called once per process, from the main thread, before
        // StarPU starts; the out-pointers are valid.
        let rc = unsafe { plb_mpi_init(&mut rank, &mut size) };
        if rc == -3 {
            return Err(
                "MPI does not provide MPI_THREAD_MULTIPLE, which our control \
                        collectives need beside StarPU-MPI's progress thread (use an MPI \
                        built with thread support, e.g. Open MPI with the ob1 or UCX \
                        transport)"
                    .into(),
            );
        }
        if rc != 0 {
            return Err(format!("MPI initialisation failed ({rc})"));
        }
        Ok(Mpi {
            rank: rank as usize,
            size: size as usize,
            deadline: Deadline::new(timeout_s),
        })
    }

    fn check(&self, what: &str, rc: c_int, waited_s: f64) -> Result<(), CommError> {
        match rc {
            0 => Ok(()),
            TIMED_OUT => Err(CommError::TimedOut {
                what: what.to_string(),
                // Shown to a tenth of a second.
                seconds: (waited_s * 10.0).round() / 10.0,
            }),
            code => Err(CommError::Failed {
                what: what.to_string(),
                code,
            }),
        }
    }

    /// Every rank's `mine` (same length on every rank), rank by rank.
    pub fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        let len = mine.len();
        let mut all = vec![0u8; len * self.size];
        let Ok(n) = c_int::try_from(len) else {
            return Err(CommError::Failed {
                what: what.into(),
                code: -8,
            });
        };
        let send = mine.to_vec();
        let deadline = self.deadline.seconds();
        // SAFETY: `send` has `len` bytes and `all` `len · size`. When the
        // call completes, MPI is done with both; when it times out, the
        // request may still be pending and both are leaked just below, so
        // MPI can never write into or read from freed memory.
        let rc = unsafe {
            plb_mpi_allgather(send.as_ptr().cast(), n, all.as_mut_ptr().cast(), deadline)
        };
        if let Err(e) = self.check(what, rc, deadline) {
            if rc == TIMED_OUT {
                std::mem::forget(send);
                std::mem::forget(all);
            }
            return Err(e);
        }
        Ok(all.chunks(len.max(1)).map(<[u8]>::to_vec).collect())
    }

    /// `buf` of `root` into every rank's `buf` (same length everywhere).
    pub fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError> {
        let Ok(n) = c_int::try_from(buf.len()) else {
            return Err(CommError::Failed {
                what: what.into(),
                code: -8,
            });
        };
        let mut tmp = buf.to_vec();
        let deadline = self.deadline.seconds();
        // SAFETY: `tmp` has `n` bytes. When the call completes, MPI is done
        // with it; when it times out, the request may still be pending and
        // `tmp` is leaked just below, never freed under MPI.
        let rc = unsafe { plb_mpi_bcast(tmp.as_mut_ptr().cast(), n, root as c_int, deadline) };
        if rc == TIMED_OUT {
            std::mem::forget(tmp);
        } else if rc == 0 {
            buf.copy_from_slice(&tmp);
        }
        self.check(what, rc, deadline)
    }

    /// Sends and receives float buffers with StarPU-MPI (StarPU-MPI must be
    /// running): every receive and send posted, then waited for.
    pub fn exchange(
        &self,
        what: &str,
        sends: &[(&[f32], usize, i64)],
        recvs: &mut [(&mut [f32], usize, i64)],
    ) -> Result<(), CommError> {
        let raw = |ptr: *mut f32, len: usize, peer: usize, tag: i64| RawMsg {
            buf: ptr,
            count: len as i64,
            peer: peer as c_int,
            tag,
        };
        // StarPU-MPI only reads a send buffer; the pointer is mutable
        // because the C registration takes one.
        let s: Vec<RawMsg> = sends
            .iter()
            .map(|(d, p, t)| raw(d.as_ptr().cast_mut(), d.len(), *p, *t))
            .collect();
        let r: Vec<RawMsg> = recvs
            .iter_mut()
            .map(|(d, p, t)| raw(d.as_mut_ptr(), d.len(), *p, *t))
            .collect();
        let deadline = self.deadline.seconds();
        // SAFETY: every buffer is borrowed for the whole call (sends shared,
        // receives exclusive); the C side registers, transfers and
        // unregisters them before returning 0. On an error its requests
        // may still be pending on the caller's buffers: every caller ends
        // the job ([`super::distributed::fatal`]) while they are still
        // borrowed, so they are never freed under StarPU-MPI.
        let rc = unsafe {
            plb_mpi_exchange(
                s.as_ptr(),
                s.len() as c_int,
                r.as_ptr(),
                r.len() as c_int,
                deadline,
            )
        };
        self.check(what, rc, deadline)
    }

    /// Ends every rank of the job with `code` (MPI_Abort).
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI is initialised; MPI_Abort does not return.
        unsafe { plb_mpi_abort(code) };
        std::process::exit(code)
    }
}

impl Comm for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        Mpi::allgather(self, what, mine)
    }
    fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError> {
        Mpi::bcast(self, what, buf, root)
    }
    fn note_step(&self, seconds: f64) {
        self.deadline.note(seconds);
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        // SAFETY: MPI was initialised by `init`; StarPU-MPI was shut down
        // before (the session is dropped first).
        unsafe { plb_mpi_finalize() };
    }
}

/// Writes `line` and a newline to stderr in one call, so that the lines
/// of ranks sharing a terminal or a pipe do not interleave (`eprintln!`
/// may write a formatted line in pieces).
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
