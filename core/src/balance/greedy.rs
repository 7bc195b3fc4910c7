//! The greedy baseline: equal blocks to whichever PU is idle.

use super::plb_hec::default_initial_block;
use super::registry::{Args, BuildContext, Entry, Param};
use super::{Balancer, Completion, Decision, PuId, WorkPool};

/// Equal blocks of `block` units (the last one shorter) to each idle PU.
#[derive(Debug, Clone)]
pub struct Greedy {
    pool: WorkPool,
    block: u64,
    name: &'static str,
}

impl Greedy {
    /// Greedy over `total` units with blocks of `block` units (at least 1).
    pub fn new(total: u64, block: u64) -> Greedy {
        Greedy {
            pool: WorkPool::new(total),
            block: block.max(1),
            name: "greedy",
        }
    }

    /// The same rule under another name (`dynamic`: EngineCL's Dynamic is
    /// equal packages to whichever PU is idle).
    pub(super) fn named(name: &'static str, total: u64, block: u64) -> Greedy {
        Greedy {
            name,
            ..Greedy::new(total, block)
        }
    }
}

impl Balancer for Greedy {
    fn name(&self) -> &'static str {
        self.name
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

/// Blocks of `text` units: `N` (N >= 1) or `W/D` (`total / D`, at least 1).
fn block_of(text: &str, total: u64) -> Option<u64> {
    match text.strip_prefix("W/") {
        Some(d) => d
            .parse::<u64>()
            .ok()
            .filter(|&d| d > 0)
            .map(|d| (total / d).max(1)),
        None => text.parse::<u64>().ok().filter(|&b| b > 0),
    }
}

fn check_block(text: &str) -> bool {
    block_of(text, 1).is_some()
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let block = match args.get("block") {
        Some(v) => block_of(v, ctx.total).ok_or_else(|| format!("block = {v:?}"))?,
        None => ctx
            .tuning
            .initial_block
            .unwrap_or_else(|| default_initial_block(ctx.total, ctx.pus)),
    };
    Ok(Box::new(Greedy::new(ctx.total, block)))
}

pub(super) const ENTRY: Entry = Entry {
    name: "greedy",
    summary: "plb greedy baseline: task mode, a central FIFO giving each ready task to the first \
              idle worker able to run it; divisible mode, equal blocks (greedy:<units> or \
              greedy:W/<d>) to whichever worker is idle",
    params: &[Param {
        key: "block",
        accepted: "units >= 1, or W/<d> with d >= 1",
        check: check_block,
    }],
    build,
    training_units_per_pu: super::registry::no_training,
};
