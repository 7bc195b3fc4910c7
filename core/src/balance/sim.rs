//! The simulator: simulated PUs with true performance curves and a
//! binary-heap event queue (one completion per event, `O(log n)` per block
//! plus the balancer's own cost) around the shared protocol driver
//! ([`super::driver`]: coverage and stall checks). Used by the balancers' tests, `plb experiment` and the
//! cluster-scale simulator (`crate::platform`, `crate::workload`,
//! `docs/simulator.md`). Results are simulated, never measured.
//!
//! Semantics of a run: at time 0 every PU asks for work, in id order. A PU
//! that gets a block runs it for `compute + transfer` seconds; when the
//! earliest running block ends, the balancer is told
//! ([`Balancer::completed`]), then that PU and every PU that answered
//! [`Wait`](super::Decision::Wait) since the previous completion ask again, in id order,
//! at that time. A PU answered [`Done`](super::Decision::Done) is never asked again.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::driver::{Driver, Issued, Status};
use super::{Balancer, Block, PuId};
use crate::cost_profile::CostProfile;
use crate::model::TimeModel;
use crate::rng::Rng;
use crate::solve::{Distribution, FastSolver};

/// A simulated processing unit.
pub struct SimPu {
    /// True compute time of a block of `x` units.
    pub compute: Box<dyn TimeModel>,
    /// True transfer time of a block of `x` units.
    pub transfer: Box<dyn TimeModel>,
    /// Changes of speed during the run (a competing load starting or ending
    /// on the device): a block starting at `t` has its compute time
    /// multiplied by the `factor` of the latest change with `at <= t` (1
    /// before the first). Any order.
    pub speed_changes: Vec<SpeedChange>,
    /// Relative amplitude of this PU's noise; `None`: the run's
    /// [`SimOptions::noise`].
    pub noise: Option<f64>,
    /// Irregular work: a block costs its effective units under this
    /// profile instead of its length (`None`: every unit costs the same).
    pub profile: Option<Arc<CostProfile>>,
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
            speed_changes: Vec::new(),
            noise: None,
            profile: None,
        }
    }

    /// Multiplier of compute times for a block starting at `start`.
    pub fn speed_factor(&self, start: f64) -> f64 {
        self.speed_changes
            .iter()
            .filter(|c| c.at <= start)
            .max_by(|a, b| a.at.total_cmp(&b.at))
            .map_or(1.0, |c| c.factor)
    }

    /// Compute seconds of `block` (of a run of `total` units) started at
    /// `start`.
    fn compute_time(&self, block: &Block, total: u64, start: f64) -> f64 {
        let units = match &self.profile {
            Some(p) => p.effective_units(total, block.offset, block.len),
            None => block.len as f64,
        };
        self.compute.time(units) * self.speed_factor(start)
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
    /// Calls of [`Balancer::next`] (blocks handed out, `Wait` and `Done`
    /// answers together): the protocol's cost in decisions.
    pub asks: u64,
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
    /// The balancer handed out an invalid block (wrong PU, empty,
    /// overlapping, past `W`) or told every PU `Done` with units left.
    Fault(String),
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

/// Runs `balancer` over `total` units on `pus` until every PU is done,
/// through the shared protocol driver ([`Driver`]).
///
/// Cost: one heap operation (`O(log n)`) per block, plus one
/// [`Balancer::next`] call per PU that asks (the completed PU, and every PU
/// that waited): a balancer that makes many PUs wait pays for re-asking
/// them, a balancer that never waits costs `O(log n)` per block here.
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
        asks: 0,
    };
    let mut driver = Driver::new(balancer, n);
    if driver.total() != total {
        return Err(SimError::Fault(format!(
            "the balancer has {} units, the run {total}",
            driver.total()
        )));
    }
    let mut heap = BinaryHeap::with_capacity(n);
    // Driver id, compute and transfer seconds of each PU's running block.
    let mut running = vec![(0u64, 0.0, 0.0); n];
    let mut now = 0.0;
    loop {
        let issued = driver
            .step(now)
            .map_err(|e| SimError::Fault(e.to_string()))?;
        for Issued { id, block, .. } in issued {
            let pu = block.pu;
            let len = block.len as f64;
            let p = &pus[pu];
            let amplitude = p.noise.unwrap_or(opts.noise);
            let noise = 1.0 + amplitude * (2.0 * rng.unit() - 1.0);
            let compute = p.compute_time(&block, total, now) * noise;
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
            running[pu] = (id, compute, transfer);
        }
        let Some(next) = heap.pop() else {
            report.asks = driver.stats().asks;
            return match driver.status() {
                Status::Finished => Ok(report),
                Status::Stalled { remaining } => Err(SimError::Stalled { at: now, remaining }),
                Status::Abandoned { remaining } => Err(SimError::Fault(format!(
                    "every PU is done with {remaining} units never handed out"
                ))),
                Status::Faulted(m) => Err(SimError::Fault(m)),
                Status::Running => Err(SimError::Fault(format!(
                    "nothing runs but the run is not over: {driver:?}"
                ))),
            };
        };
        now = next.end;
        report.makespan = report.makespan.max(now);
        let (id, compute_s, transfer_s) = running[next.pu];
        driver
            .report(id, compute_s, transfer_s, now)
            .map_err(|e| SimError::Fault(e.to_string()))?;
        debug_assert_eq!(report.runs[next.run].block.pu, next.pu);
    }
}

/// The best makespan with one block per PU (the papers' optimum, found
/// exactly by the fast solver on the true curves instead of by brute force);
/// `+∞` when no split exists.
pub fn optimum(pus: &[SimPu], total: u64) -> f64 {
    optimum_split(pus, total).map_or(f64::INFINITY, |d| d.finish_time)
}

/// The one-block-per-PU split behind [`optimum`]: real-valued block sizes
/// `x_p` summing to `total` with `E_p(x_p) = T` for every PU that gets work
/// and `E_p(0) >= T` for the others, `E_p` = true compute + transfer at full
/// speed (speed changes and noise ignored). When every `E_p` is
/// subadditive (`E(a) + E(b) >= E(a + b)`: fixed costs, throughput
/// non-decreasing with the block size, as the curves of
/// [`crate::workload`]), no schedule of a noise-free run without speed
/// changes beats `T`, whatever its number of blocks.
pub fn optimum_split(pus: &[SimPu], total: u64) -> Option<Distribution> {
    let models: Vec<TrueModel<'_>> = pus.iter().map(TrueModel).collect();
    FastSolver::default()
        .solve_models(&models, total as f64)
        .ok()
}

/// PU `pu`'s true time for one block of `x` units at full speed, no noise
/// (what [`optimum_split`] equalises).
pub fn true_time(pu: &SimPu, x: f64) -> f64 {
    TrueModel(pu).time(x)
}

/// The contenders of the simulated comparisons, as registry names
/// ([`super::registry`]): greedy with blocks of `W/256`, `W/64`, `W/16`
/// units, then the model-based balancers.
pub const BALANCERS: [&str; 7] = [
    "greedy:W/256",
    "greedy:W/64",
    "greedy:W/16",
    "hdss",
    "acosta",
    "plb-hec",
    "plb-hac",
];

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
    use crate::balance::{Completion, Decision, Greedy};

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
        slow.speed_changes = vec![SpeedChange {
            at: 1.0,
            factor: 2.0,
        }];
        let mut g = Greedy::new(30, 10);
        let r = simulate(&mut g, &[slow], 30, SimOptions::default()).unwrap();
        // 1 s, then 2 s, then 2 s.
        assert!((r.makespan - 5.0).abs() < 1e-9, "{}", r.makespan);
    }
}
