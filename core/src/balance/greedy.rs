//! The greedy baseline: equal blocks to whichever PU is idle.

use super::{Balancer, Completion, Decision, PuId, WorkPool};

/// Equal blocks of `block` units (the last one shorter) to each idle PU.
#[derive(Debug, Clone)]
pub struct Greedy {
    pool: WorkPool,
    block: u64,
}

impl Greedy {
    /// Greedy over `total` units with blocks of `block` units (at least 1).
    pub fn new(total: u64, block: u64) -> Greedy {
        Greedy {
            pool: WorkPool::new(total),
            block: block.max(1),
        }
    }
}

impl Balancer for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn next(&mut self, pu: PuId, _now: f64) -> Decision {
        match self.pool.take(pu, self.block as f64) {
            Some(b) => Decision::Run(b),
            None => Decision::Done,
        }
    }

    fn completed(&mut self, _done: Completion) {}

    fn remaining(&self) -> u64 {
        self.pool.remaining()
    }
}
