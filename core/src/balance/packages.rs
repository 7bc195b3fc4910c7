//! The package hand-out shared by the co-execution balancers whose powers
//! are learned (HGuided, Sigmoid): each PU's first package is a probe (no
//! power is known yet), every later one is sized by the balancer's rule;
//! units come from one [`WorkPool`], so none is given twice or skipped.

use super::plb_hec::default_initial_block;
use super::{Decision, PuId, WorkPool};

/// Probe first, then the balancer's sizes (see the module documentation).
#[derive(Debug, Clone)]
pub struct Packages {
    pool: WorkPool,
    probe: u64,
    probed: Vec<bool>,
    given: u64,
}

impl Packages {
    /// `total` units over `n` PUs; `probe` units for each first package (0:
    /// the shared initial block, [`default_initial_block`]).
    pub fn new(total: u64, n: usize, probe: u64) -> Packages {
        Packages {
            pool: WorkPool::new(total),
            probe: if probe == 0 {
                default_initial_block(total, n)
            } else {
                probe
            },
            probed: vec![false; n],
            given: 0,
        }
    }

    /// Whether PU `pu` still has its probe to run (then the balancer's
    /// rule is not asked).
    pub fn needs_probe(&self, pu: PuId) -> bool {
        !self.probed.get(pu).copied().unwrap_or(true)
    }

    /// Hands PU `pu` its probe, or a package of `rule()` units; `Done` once
    /// the work is out (or for an unknown PU).
    pub fn give(&mut self, pu: PuId, rule: impl FnOnce(&WorkPool) -> u64) -> Decision {
        if pu >= self.probed.len() {
            return Decision::Done;
        }
        let len = if self.probed[pu] {
            rule(&self.pool)
        } else {
            self.probe
        };
        match self.pool.take(pu, len as f64) {
            Some(b) => {
                self.probed[pu] = true;
                self.given += 1;
                Decision::Run(b)
            }
            None => Decision::Done,
        }
    }

    /// Units not handed out.
    pub fn remaining(&self) -> u64 {
        self.pool.remaining()
    }

    /// Packages handed out (probes included).
    pub fn given(&self) -> u64 {
        self.given
    }
}
