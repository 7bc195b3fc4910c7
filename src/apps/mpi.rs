//! The safe layer over `codelets/mpi/plb_mpi.c`: MPI start and stop,
//! control collectives with a deadline, and StarPU-MPI data exchanges.
//! A collective or exchange that does not complete in time is a
//! [`CommError::TimedOut`]: the caller says so on its rank and ends the
//! job ([`Mpi::abort`]), so a dead or silent rank never hangs the others.

// Unsafe code is denied in the workspace; allowed here because MPI and
// StarPU-MPI are reached through the C shim (every unsafe block has a
// `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::c_int;

use plb_core::cluster::comm::{Comm, status};
pub use plb_core::cluster::comm::{CommError, Deadline};
pub use starpu_plb::diagnostics::say;
use starpu_plb::starpu::distributed_ffi::{CallbackComm, plb_dist_comm};

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
    fn plb_mpi_control(out: *mut plb_dist_comm);
    fn plb_mpi_exchange(
        sends: *const RawMsg,
        nsends: c_int,
        recvs: *const RawMsg,
        nrecvs: c_int,
        timeout: f64,
    ) -> c_int;
}

/// This process's place in `MPI_COMM_WORLD`; MPI is finalised on drop.
pub struct Mpi {
    pub rank: usize,
    pub size: usize,
    /// The control collectives (`plb_mpi.c`'s, through the distributed
    /// API's C communicator) and the deadline of every wait.
    control: CallbackComm,
}

/// The rank the MPI launcher gave this process, read from its environment
/// before MPI starts (Open MPI, PMIx, MPICH / Hydra); `None` outside one.
pub fn launcher_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

impl Mpi {
    /// Initialises MPI at thread level MULTIPLE (the main thread still
    /// calls MPI, `MPI_Abort` after a time-out among others, while
    /// StarPU-MPI's progress thread does), or checks that level when MPI is
    /// already initialised; refuses with a clear message otherwise.
    pub fn init(timeout_s: f64) -> Result<Mpi, String> {
        let (mut rank, mut size) = (0, 0);
        // SAFETY: called once per process, from the main thread, before
        // StarPU starts; the out-pointers are valid.
        let rc = unsafe { plb_mpi_init(&mut rank, &mut size) };
        if rc == -3 {
            return Err(
                "MPI does not provide MPI_THREAD_MULTIPLE, which this program needs \
                        beside StarPU-MPI's progress thread (use an MPI \
                        built with thread support, e.g. Open MPI with the ob1 or UCX \
                        transport)"
                    .into(),
            );
        }
        if rc != 0 {
            return Err(format!("MPI initialisation failed ({rc})"));
        }
        let mut raw = plb_dist_comm {
            rank: 0,
            size: 0,
            arg: std::ptr::null_mut(),
            allgather: None,
            bcast: None,
        };
        // SAFETY: MPI is initialised; `raw` is valid for the write.
        unsafe { plb_mpi_control(&mut raw) };
        // SAFETY: plb_mpi.c's collectives keep the header's contract and
        // need no argument; they live as long as the process.
        let control = unsafe { CallbackComm::new(raw, timeout_s) }
            .ok_or("plb_mpi.c gave no control collectives")?;
        Ok(Mpi {
            rank: rank as usize,
            size: size as usize,
            control,
        })
    }

    /// The deadline of every collective and exchange.
    pub fn deadline(&self) -> &Deadline {
        self.control.deadline()
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
        let deadline = self.deadline().seconds();
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
        status(what, rc, deadline)
    }

    /// Ends every rank of the job with `code` (MPI_Abort).
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI is initialised; MPI_Abort does not return.
        unsafe { plb_mpi_abort(code) };
        std::process::exit(code)
    }
}

/// The control collectives ([`Comm::allgather`], [`Comm::bcast`]).
impl Comm for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        self.control.allgather(what, mine)
    }
    fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError> {
        self.control.bcast(what, buf, root)
    }
    fn note_step(&self, seconds: f64) {
        self.control.note_step(seconds);
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        // SAFETY: MPI was initialised by `init`; StarPU-MPI was shut down
        // before (the session is dropped first).
        unsafe { plb_mpi_finalize() };
    }
}
