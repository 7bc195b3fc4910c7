//! A minimal virtual-time driver for balancers: simulated PUs with true
//! performance curves. Used by the balancers' tests, and the seed of the
//! cluster-scale simulator. Results are simulated, never measured.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::{Balancer, Block, Completion, Decision, PuId};
use crate::model::TimeModel;
use crate::rng::Rng;
use crate::solve::FastSolver;

/// A simulated processing unit.
pub struct SimPu {
    /// True compute time of a block of `x` units.
    pub compute: Box<dyn TimeModel>,
    /// True transfer time of a block of `x` units.
    pub transfer: Box<dyn TimeModel>,
    /// From this time on, compute times are multiplied by `factor`
    /// (a competing load starting on the device).
    pub speed_change: Option<SpeedChange>,
}

/// A change of a PU's speed during the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedChange {
    /// Simulated time at which it happens.
    pub at: f64,
    /// Multiplier of compute times for blocks starting from then on.
    pub factor: f64,
}

impl SimPu {
    /// A PU whose compute time is `compute` and which moves no data.
    pub fn new(compute: impl TimeModel + 'static) -> SimPu {
        SimPu {
            compute: Box::new(compute),
            transfer: Box::new(crate::model::LinearModel {
                fixed: 0.0,
                rate: f64::INFINITY,
            }),
            speed_change: None,
        }
    }

    fn compute_time(&self, len: f64, start: f64) -> f64 {
        let factor = match self.speed_change {
            Some(c) if start >= c.at => c.factor,
            _ => 1.0,
        };
        self.compute.time(len) * factor
    }
}

/// Options of a simulated run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Relative amplitude of uniform multiplicative noise on compute times
    /// (0 = deterministic).
    pub noise: f64,
    /// Seed of the noise.
    pub seed: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            noise: 0.0,
            seed: 1,
        }
    }
}

/// One executed block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockRun {
    /// The block.
    pub block: Block,
    /// When its PU started it.
    pub start: f64,
    /// When it finished.
    pub end: f64,
}

/// Outcome of a simulated run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    /// Finish time of the last block.
    pub makespan: f64,
    /// Seconds each PU spent processing blocks.
    pub busy_s: Vec<f64>,
    /// Units each PU processed.
    pub units: Vec<u64>,
    /// Every block, in the order they were handed out.
    pub runs: Vec<BlockRun>,
}

impl SimReport {
    /// Idle fraction of each PU over the makespan.
    pub fn idle_fraction(&self) -> Vec<f64> {
        self.busy_s
            .iter()
            .map(|b| {
                if self.makespan > 0.0 {
                    1.0 - b / self.makespan
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// Why a simulated run could not complete.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// Every PU waits, none runs, and units remain: the balancer deadlocked.
    Stalled {
        /// Simulated time of the stall.
        at: f64,
        /// Units never handed out.
        remaining: u64,
    },
    /// Units were handed out twice or never: the blocks do not tile
    /// `[0, total)`.
    Coverage(String),
    /// A block handed to PU `asked` names another PU.
    WrongPu {
        /// The PU that asked.
        asked: PuId,
        /// The block it was given.
        block: Block,
    },
    /// A true model gave a non-finite or negative time.
    BadTime {
        /// The PU.
        pu: PuId,
        /// The block size.
        len: u64,
    },
}

#[derive(PartialEq)]
struct Running {
    end: f64,
    pu: PuId,
    run: usize,
}

impl Eq for Running {}

impl Ord for Running {
    // Min-heap on (end, pu): earliest completion first, ties by PU id, so
    // runs are deterministic.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .end
            .total_cmp(&self.end)
            .then_with(|| other.pu.cmp(&self.pu))
    }
}

impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Runs `balancer` over `total` units on `pus` until every PU is done.
pub fn simulate(
    balancer: &mut dyn Balancer,
    pus: &[SimPu],
    total: u64,
    opts: SimOptions,
) -> Result<SimReport, SimError> {
    let n = pus.len();
    let mut rng = Rng::new(opts.seed);
    let mut report = SimReport {
        makespan: 0.0,
        busy_s: vec![0.0; n],
        units: vec![0; n],
        runs: Vec::new(),
    };
    let mut heap = BinaryHeap::new();
    let mut state = vec![PuState::Asking; n];
    let mut now = 0.0;
    loop {
        // Every PU that is asking (idle or waiting) asks, in id order, at `now`.
        #[allow(clippy::needless_range_loop)] // `pu` indexes state, pus and the report alike
        for pu in 0..n {
            if state[pu] != PuState::Asking {
                continue;
            }
            match balancer.next(pu, now) {
                Decision::Run(block) => {
                    if block.pu != pu {
                        return Err(SimError::WrongPu { asked: pu, block });
                    }
                    let len = block.len as f64;
                    let p = &pus[pu];
                    let noise = 1.0 + opts.noise * (2.0 * rng.unit() - 1.0);
                    let compute = p.compute_time(len, now) * noise;
                    let transfer = p.transfer.time(len);
                    let took = compute + transfer;
                    if !(took.is_finite() && took >= 0.0) {
                        return Err(SimError::BadTime { pu, len: block.len });
                    }
                    report.runs.push(BlockRun {
                        block,
                        start: now,
                        end: now + took,
                    });
                    report.busy_s[pu] += took;
                    report.units[pu] += block.len;
                    heap.push(Running {
                        end: now + took,
                        pu,
                        run: report.runs.len() - 1,
                    });
                    state[pu] = PuState::Running((compute, transfer));
                }
                Decision::Wait => state[pu] = PuState::Waiting,
                Decision::Done => state[pu] = PuState::Done,
            }
        }
        let Some(next) = heap.pop() else {
            if state.contains(&PuState::Waiting) && balancer.remaining() > 0 {
                return Err(SimError::Stalled {
                    at: now,
                    remaining: balancer.remaining(),
                });
            }
            break;
        };
        now = next.end;
        report.makespan = report.makespan.max(now);
        let PuState::Running((compute_s, transfer_s)) = state[next.pu] else {
            unreachable!("a completion for a PU that was not running");
        };
        balancer.completed(Completion {
            block: report.runs[next.run].block,
            compute_s,
            transfer_s,
            finished_at: now,
        });
        for s in state.iter_mut() {
            if *s == PuState::Waiting {
                *s = PuState::Asking;
            }
        }
        state[next.pu] = PuState::Asking;
    }
    check_coverage(&report.runs, total)?;
    Ok(report)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum PuState {
    Asking,
    Running((f64, f64)),
    Waiting,
    Done,
}

/// Checks that the blocks tile `[0, total)` exactly.
fn check_coverage(runs: &[BlockRun], total: u64) -> Result<(), SimError> {
    let mut blocks: Vec<Block> = runs.iter().map(|r| r.block).collect();
    blocks.sort_by_key(|b| b.offset);
    let mut next = 0;
    for b in &blocks {
        if b.offset != next || b.len == 0 {
            return Err(SimError::Coverage(format!(
                "block {b:?} does not start at unit {next}"
            )));
        }
        next = b.end();
    }
    if next != total {
        return Err(SimError::Coverage(format!(
            "units {next}..{total} never handed out"
        )));
    }
    Ok(())
}

/// The best makespan with one block per PU (the papers' optimum, found
/// exactly by the fast solver on the true curves instead of by brute force).
pub fn optimum(pus: &[SimPu], total: u64) -> f64 {
    let models: Vec<TrueModel<'_>> = pus.iter().map(TrueModel).collect();
    FastSolver::default()
        .solve_models(&models, total as f64)
        .map(|d| d.finish_time)
        .unwrap_or(f64::INFINITY)
}

/// A PU's true E(x) = compute + transfer (no speed change).
struct TrueModel<'a>(&'a SimPu);

impl TimeModel for TrueModel<'_> {
    fn time(&self, x: f64) -> f64 {
        self.0.compute.time(x) + self.0.transfer.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.0.compute.slope(x) + self.0.transfer.slope(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::Greedy;

    use crate::balance::scenarios::lin as pu;
    #[test]
    fn greedy_on_two_equal_pus_splits_evenly() {
        let pus = [pu(0.0, 100.0), pu(0.0, 100.0)];
        let mut g = Greedy::new(1000, 100);
        let r = simulate(&mut g, &pus, 1000, SimOptions::default()).unwrap();
        assert_eq!(r.units, vec![500, 500]);
        assert!((r.makespan - 5.0).abs() < 1e-9);
        assert!((optimum(&pus, 1000) - 5.0).abs() < 1e-6);
    }

    #[test]
    fn greedy_with_few_units_and_many_pus_covers_everything_once() {
        let pus: Vec<SimPu> = (0..8).map(|i| pu(0.01, 10.0 + i as f64)).collect();
        let mut g = Greedy::new(3, 1);
        let r = simulate(&mut g, &pus, 3, SimOptions::default()).unwrap();
        assert_eq!(r.units.iter().sum::<u64>(), 3);
        assert_eq!(r.runs.len(), 3);
    }

    #[test]
    fn a_balancer_that_waits_forever_is_reported_as_stalled() {
        struct Stubborn;
        impl Balancer for Stubborn {
            fn name(&self) -> &'static str {
                "stubborn"
            }
            fn next(&mut self, _pu: PuId, _now: f64) -> Decision {
                Decision::Wait
            }
            fn completed(&mut self, _done: Completion) {}
            fn remaining(&self) -> u64 {
                5
            }
        }
        let err = simulate(&mut Stubborn, &[pu(0.0, 1.0)], 5, SimOptions::default()).unwrap_err();
        assert_eq!(
            err,
            SimError::Stalled {
                at: 0.0,
                remaining: 5
            }
        );
    }

    #[test]
    fn speed_change_slows_later_blocks() {
        let mut slow = pu(0.0, 10.0);
        slow.speed_change = Some(SpeedChange {
            at: 1.0,
            factor: 2.0,
        });
        let mut g = Greedy::new(30, 10);
        let r = simulate(&mut g, &[slow], 30, SimOptions::default()).unwrap();
        // 1 s, then 2 s, then 2 s.
        assert!((r.makespan - 5.0).abs() < 1e-9, "{}", r.makespan);
    }
}
