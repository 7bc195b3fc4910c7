//! The `PLB_*` tuning variables. They live in `plb-core`
//! ([`plb_core::balance::tuning`]): parsing needs no StarPU, and the
//! registry builds every balancer from them. This module re-exports them
//! for the adapter and for users of `starpu_plb::config`.

pub use plb_core::balance::tuning::{
    MinBlock, Tuning, TuningError, VARIABLES, Variable, WorkerKind, parse_duration_s,
};

use plb_core::balance::registry::BalancerSpec;
use plb_core::solve::Primary;

/// Whether IPOPT can run in this process. Under StarPU's SimGrid mode it
/// cannot: Debian's IPOPT solves with MUMPS, which calls MPI, and
/// SimGrid's library exports the MPI symbols of its SMPI; outside an SMPI
/// process the first `MPI_Bcast` fails (`MPI_ERR_OTHER`) and aborts the
/// program.
pub const IPOPT_USABLE: bool = !starpu_sys::STARPU_IS_SIMGRID;

/// Why IPOPT is refused under SimGrid.
const NO_IPOPT_UNDER_SIMGRID: &str = "IPOPT cannot run under StarPU's SimGrid mode \
     (its MUMPS calls MPI, which SimGrid's SMPI intercepts: MPI_Bcast fails and the process aborts); \
     use the fast solver (PLB_SOLVER=fast, the default there)";

/// [`Tuning::from_env`] for the StarPU this library runs in: under SimGrid
/// the fast solver is the default and an explicit `PLB_SOLVER=ipopt` is
/// refused (see [`IPOPT_USABLE`]).
pub fn tuning_from_env() -> Result<Tuning, String> {
    let mut tuning = Tuning::from_env().map_err(|e| e.to_string())?;
    if !IPOPT_USABLE {
        match tuning.solver {
            Some(Primary::Ipopt) => {
                return Err(format!("PLB_SOLVER=ipopt: {NO_IPOPT_UNDER_SIMGRID}"));
            }
            Some(Primary::Fast) => {}
            None => tuning.solver = Some(Primary::Fast),
        }
    }
    Ok(tuning)
}

/// [`tuning_from_env`] for a policy being created: an invalid variable
/// (refused earlier by `starpu_initialize` on 1.3; with 1.4's
/// `STARPU_SCHED_LIB` this is the first place that sees it) is reported and
/// the defaults are used.
pub fn tuning_or_default(policy: &str) -> Tuning {
    tuning_from_env().unwrap_or_else(|e| {
        eprintln!("plb: error: {policy}: {e}; using the default balancer parameters");
        let mut t = Tuning::default();
        if !IPOPT_USABLE {
            t.solver = Some(Primary::Fast);
        }
        t
    })
}

/// Refuses a balancer spec this StarPU cannot run (`solver=ipopt` under
/// SimGrid).
pub fn check_spec(spec: &BalancerSpec) -> Result<(), String> {
    if !IPOPT_USABLE && spec.args().get("solver") == Some("ipopt") {
        return Err(format!("{}: {NO_IPOPT_UNDER_SIMGRID}", spec.label()));
    }
    Ok(())
}
