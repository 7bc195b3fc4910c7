//! The distributed divisible-load API of `plb app mm-mpi`: the two-level
//! partitioning of `plb_core::cluster::protocol` over the ranks of
//! `MPI_COMM_WORLD` ([`Mpi`] is its communicator), one rank per node.
//! A failed collective ends the job here ([`fatal`]): a rank that died
//! or never answers gives a message instead of a hang.

use plb_core::cluster::HierConfig;
pub use plb_core::cluster::protocol::{NodeKernel, Partition};
use plb_core::cluster::protocol::{PartitionFailure, partition as run_protocol};

use super::mpi::{CommError, Mpi, say};

/// Ends the job after a failed collective, saying so on this rank.
pub fn fatal(mpi: &Mpi, what: CommError) -> ! {
    let hint = match what {
        CommError::TimedOut { .. } => " (--timeout raises the floor of the deadline)",
        CommError::Failed { .. } => "",
    };
    say(&format!(
        "plb: rank {}: {what}{hint}; ending the job",
        mpi.rank
    ));
    mpi.abort(3)
}

/// The two-level partitioning over every rank (call it on every rank with
/// the same `cfg`). `verbose`: the head prints every INPA round (areas,
/// node times) to stderr. A failure every rank agrees on is an `Err`; a
/// failed collective ends the job.
pub fn partition(
    mpi: &Mpi,
    cfg: &HierConfig,
    kernel: &dyn NodeKernel,
    verbose: bool,
) -> Result<Partition, String> {
    match run_protocol(mpi, cfg, kernel, &say, verbose) {
        Ok(p) => Ok(p),
        Err(PartitionFailure::Failed(e)) => Err(e),
        Err(PartitionFailure::Comm(e)) => fatal(mpi, e),
    }
}
