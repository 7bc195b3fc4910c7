//! Load balancers as event-driven state machines.
//!
//! A balancer never knows whether it runs under StarPU (the divisible-load
//! API), under the simulator, or in a unit test: it receives events with the
//! time as an argument and answers with decisions.
//!
//! * Event "PU `p` is idle at time `now`": [`Balancer::next`], answered with
//!   a [`Decision`]: run a [`Block`] of units, wait for an event, or stop.
//! * Event "a block finished": [`Balancer::completed`] with the measured
//!   compute and transfer times ([`Completion`]).
//!
//! Units are handed out from one [`WorkPool`] cursor, so no unit can be
//! given twice or skipped: every balancer only decides block *sizes* and
//! *who* gets them.

//!
//! [`driver`] runs the protocol (who asks when, blocks in flight, `Wait`
//! and stalls, exact coverage) for every caller: the simulator
//! ([`sim`]), the StarPU divisible-load API and task-mode epochs.
//! [`registry`] maps a name (`plb-hac`, `greedy:64`, ...) to a balancer
//! for all of them; adding a balancer is one file here and one line
//! there (`docs/architecture.md`, "Adding a balancer").

mod acosta;
mod adaptive;
pub mod driver;
mod dynamic;
mod greedy;
mod hdss;
mod hguided;
mod packages;
pub mod plb_hac;
mod plb_hec;
mod pool;
pub mod powers;
pub mod registry;
pub mod scenarios;
mod sigmoid;
pub mod sim;
mod static_split;
pub mod tuning;
pub mod xcheck;

pub use acosta::{Acosta, AcostaConfig, AcostaStats};
pub use adaptive::{Adaptive, AdaptiveConfig};
pub use driver::{Driver, DriverError, Issued, Status};
pub use greedy::Greedy;
pub use hdss::{Hdss, HdssConfig, HdssStats};
pub use hguided::{HGuided, HGuidedConfig};
pub use plb_hac::{PlbHac, PlbHacConfig, PlbHacConfigError, PlbHacStats, StepSolution};
pub use plb_hec::{PlbHec, PlbHecConfig, PlbHecStats, default_initial_block};
pub use pool::WorkPool;
pub use registry::{BalancerSpec, BuildContext, SpecError};
pub use sigmoid::{Sigmoid, normalised_logistic};
pub use static_split::{Static, StaticConfig};
pub use tuning::{Tuning, WorkerKind};

/// Index of a processing unit in the balancer's PU list.
pub type PuId = usize;

/// A contiguous range `[offset, offset + len)` of work units for one PU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The PU that processes it.
    pub pu: PuId,
    /// First unit.
    pub offset: u64,
    /// Number of units (> 0).
    pub len: u64,
}

impl Block {
    /// One past the last unit.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// A balancer's answer to an idle PU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Process this block.
    Run(Block),
    /// Nothing for you now; ask again after the next completion (a
    /// synchronisation point, or work that another PU must finish first).
    /// A `Wait` may itself change the balancer's state (PLB-HAC: the asker
    /// opens a virtual step in which its own share is 0, so the PUs that
    /// waited before now have blocks): every driver therefore asks its
    /// waiting PUs again when no block is in flight, and only when a couple
    /// of such rounds hand nothing out does it report a stall
    /// ([`driver::Driver`], which the simulator, the StarPU divisible-load
    /// run and task-mode epochs share).
    Wait,
    /// No work will ever come for this PU.
    Done,
}

/// What the driver measured for a finished block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion {
    /// The block, as it was handed out.
    pub block: Block,
    /// Time the PU spent computing, in seconds.
    pub compute_s: f64,
    /// Time spent moving the block's data, in seconds.
    pub transfer_s: f64,
    /// When the block finished (same clock as `now` in [`Balancer::next`]).
    pub finished_at: f64,
}

/// Why a balancer could not be built from its configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// No PU at all.
    NoPus {
        /// The balancer's name.
        balancer: &'static str,
    },
    /// A parameter out of its documented range.
    Invalid {
        /// The balancer's name.
        balancer: &'static str,
        /// The configuration field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::NoPus { balancer } => write!(f, "{balancer} needs at least one PU"),
            ConfigError::Invalid {
                balancer,
                field,
                value,
                expected,
            } => write!(f, "{balancer}: {field} = {value}, expected {expected}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// An event-driven load balancer over `n` PUs and `W` units.
pub trait Balancer {
    /// The policy name (as in `STARPU_SCHED`).
    fn name(&self) -> &'static str;

    /// PU `pu` is idle at time `now` (seconds since the run started) and
    /// asks for work.
    fn next(&mut self, pu: PuId, now: f64) -> Decision;

    /// A block handed out by [`Balancer::next`] finished.
    fn completed(&mut self, done: Completion);

    /// Units not yet handed out.
    fn remaining(&self) -> u64;

    /// Seconds the balancer predicted, when it handed it out, for the block
    /// PU `pu` is running (`None`: no prediction, or no block running).
    fn predicted_s(&self, _pu: PuId) -> Option<f64> {
        None
    }

    /// The balancer's own counters (`refits` first: model updates of any
    /// kind, 0 for balancers without models).
    fn stats(&self) -> BalancerStats {
        BalancerStats::default()
    }

    /// The step solutions it keeps (PLB-HAC), oldest first, for traces;
    /// the `solves` counter of [`Balancer::stats`] counts every one made.
    fn solutions(&self) -> Vec<&StepSolution> {
        Vec::new()
    }

    /// A balancer for the next `total` units over the same PUs that starts
    /// from what this one learned (the next pass of an iterative
    /// application); `None`: the algorithm defines no carry-over and the
    /// caller starts afresh.
    fn continue_with(&self, _total: u64) -> Option<Result<Box<dyn Balancer + Send>, String>> {
        None
    }
}

/// A boxed balancer (drivers own `Box<dyn Balancer + Send>`) and a
/// borrowed one (the simulator drives `&mut dyn Balancer`) are balancers.
macro_rules! forward_balancer {
    ($($ty:ty),*) => {$(
        impl<T: Balancer + ?Sized> Balancer for $ty {
            fn name(&self) -> &'static str {
                (**self).name()
            }
            fn next(&mut self, pu: PuId, now: f64) -> Decision {
                (**self).next(pu, now)
            }
            fn completed(&mut self, done: Completion) {
                (**self).completed(done)
            }
            fn remaining(&self) -> u64 {
                (**self).remaining()
            }
            fn predicted_s(&self, pu: PuId) -> Option<f64> {
                (**self).predicted_s(pu)
            }
            fn stats(&self) -> BalancerStats {
                (**self).stats()
            }
            fn solutions(&self) -> Vec<&StepSolution> {
                (**self).solutions()
            }
            fn continue_with(&self, total: u64) -> Option<Result<Box<dyn Balancer + Send>, String>> {
                (**self).continue_with(total)
            }
        }
    )*};
}

forward_balancer!(Box<T>, &mut T);

/// Named counters of a balancer ([`Balancer::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BalancerStats {
    /// `(name, value)` pairs, `refits` first when the balancer has models.
    pub counters: Vec<(&'static str, u64)>,
}

impl BalancerStats {
    /// The counter named `name`, if the balancer keeps it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }

    /// Model updates (PLB-HAC/PLB-HeC refits, HDSS weight fits, Acosta
    /// rebalances); 0 for balancers without models.
    pub fn refits(&self) -> u64 {
        self.get("refits").unwrap_or(0)
    }
}

impl std::fmt::Display for BalancerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (n, v)) in self.counters.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}
