//! DADA(α) (§3.2, Algorithm 2): a binary search on the makespan guess λ,
//! each guess tried in two phases.
//!
//! 1. **Affinity.** Tasks with an affinity (the memory node holding most of
//!    the bytes they write) are taken by decreasing bytes; each goes to the
//!    least-loaded worker on its node able to run it within λ, if the work
//!    this batch gave that worker so far is still below αλ (so a worker may
//!    overreach αλ by one task, as in the paper). The paper's activation
//!    starts from idle processors; an online batch meets workers with
//!    backlogs, so αλ bounds what the batch adds, not the backlog (compared
//!    with the backlog, affinity almost never applied: busy workers are
//!    the ones holding data). α = 0 skips the phase.
//! 2. **Dual approximation** (ρ = 2) of the rest, the paper's two classes
//!    being CPU workers and accelerators (every non-CPU worker): a task
//!    that fits within λ only on one class goes there; one that fits on
//!    neither rejects the guess; the others, by decreasing speedup, fill the
//!    accelerators' area up to overreaching (their count)·λ, and the rest
//!    go to the CPUs. Within a class tasks are list-scheduled, longest
//!    first, each on the worker of that class finishing it first.
//!
//! The guess is kept when every worker's load (its existing load
//! time-stamp included: the running work and the queued tasks at or above
//! the priority of the batch's most urgent task, queues being
//! priority-ordered) stays within (2 + α)λ; the search stops when the
//! bracket is within a relative `eps`. With `cp` (DADA(α)+CP) each cost is
//! the compute time plus the task's predicted transfer to that worker.
//!
//! One try costs O(n log n + n·w) for n tasks and w workers; the search
//! makes at most log2(1/eps) + 2 tries after the first (about 8 at the
//! default ε = 0.01, see `docs/balancers.md` for measured times).

use super::{Backlog, DagTask, DagWorker, PerTask, PerWorker, by_speedup};

/// Upper bound on the binary search's steps (reached only with a tiny
/// `eps`).
const MAX_STEPS: usize = 60;

/// Places the batch (see the module documentation); `usize::MAX` for a
/// task no worker has a cost for.
pub fn place(
    tasks: &[DagTask],
    workers: &[DagWorker],
    alpha: f64,
    eps: f64,
    cp: bool,
) -> PerTask<usize> {
    let alpha = if alpha.is_finite() {
        alpha.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let eps = if eps.is_finite() && eps > 0.0 {
        eps.min(0.5)
    } else {
        0.01
    };
    let p = Problem::new(tasks, workers, cp);
    let Some(upper) = p.upper() else {
        return smallvec::smallvec![usize::MAX; tasks.len()];
    };
    let mut best = p.attempt(upper, alpha).unwrap_or_else(|| p.fallback());
    let (mut lo, mut hi) = (p.lower().min(upper), upper);
    for _ in 0..MAX_STEPS {
        if hi - lo <= eps * hi {
            break;
        }
        let lambda = 0.5 * (lo + hi);
        match p.attempt(lambda, alpha) {
            Some(s) => {
                best = s;
                hi = lambda;
            }
            None => lo = lambda,
        }
    }
    best
}

/// A batch prepared for the tries: costs (transfers added under CP), the
/// workers' loads, and the two fixed orders.
struct Problem<'a> {
    workers: &'a [DagWorker],
    /// `cost[i][w]`; `None`: worker `w` cannot run task `i`.
    cost: PerTask<PerWorker<Option<f64>>>,
    base: PerWorker<f64>,
    /// Tasks with a known cost, by decreasing speedup.
    by_speedup: PerTask<usize>,
    /// Tasks with an affinity, by decreasing bytes, with their node.
    by_affinity: PerTask<(usize, usize)>,
    /// Each task's cheapest cost on a CPU (`[0]`) and on an accelerator
    /// (`[1]`), the same for every guess.
    cheapest: [PerTask<Option<f64>>; 2],
}

impl<'a> Problem<'a> {
    fn new(tasks: &[DagTask], workers: &'a [DagWorker], cp: bool) -> Problem<'a> {
        let cost: PerTask<PerWorker<Option<f64>>> = tasks
            .iter()
            .map(|t| {
                (0..workers.len())
                    .map(|w| {
                        let c = t
                            .cost_s
                            .get(w)
                            .copied()
                            .flatten()
                            .filter(|c| c.is_finite() && *c >= 0.0)?;
                        let x = t
                            .transfer_s
                            .get(w)
                            .copied()
                            .filter(|x| x.is_finite() && *x > 0.0)
                            .unwrap_or(0.0);
                        Some(if cp { c + x } else { c })
                    })
                    .collect()
            })
            .collect();
        let known = |i: usize| cost[i].iter().any(Option::is_some);
        let mut order: PerTask<usize> = (0..tasks.len()).filter(|&i| known(i)).collect();
        by_speedup(tasks, workers, &mut order);
        let mut by_affinity: PerTask<(usize, usize)> = order
            .iter()
            .filter_map(|&i| {
                let a = tasks[i].affinity?;
                (a.bytes > 0.0).then_some((i, a.node))
            })
            .collect();
        by_affinity.sort_by(|a, b| {
            let (x, y) = (tasks[a.0].affinity, tasks[b.0].affinity);
            let bytes = |v: Option<super::Affinity>| v.map_or(0.0, |a| a.bytes);
            bytes(y).total_cmp(&bytes(x))
        });
        let cheapest_in = |accelerator: bool| -> PerTask<Option<f64>> {
            cost.iter()
                .map(|c| {
                    c.iter()
                        .zip(workers)
                        .filter(|(_, w)| w.is_accelerator() == accelerator)
                        .filter_map(|(c, _)| *c)
                        .min_by(f64::total_cmp)
                })
                .collect()
        };
        let cheapest = [cheapest_in(false), cheapest_in(true)];
        Problem {
            workers,
            cheapest,
            base: {
                // Queues are priority-ordered: the batch waits for the
                // running work and what is queued at or above its most
                // urgent task's priority.
                let urgent = tasks.iter().map(|t| t.priority).max().unwrap_or(0);
                workers
                    .iter()
                    .map(|w| Backlog::of(w).ahead_of(urgent))
                    .collect()
            },
            cost,
            by_speedup: order,
            by_affinity,
        }
    }

    /// A guess every try accepts: the largest load plus every task's
    /// largest cost. `None` without a placeable task.
    fn upper(&self) -> Option<f64> {
        if self.by_speedup.is_empty() {
            return None;
        }
        let work: f64 = self
            .by_speedup
            .iter()
            .map(|&i| self.cost[i].iter().flatten().copied().fold(0.0, f64::max))
            .sum();
        let load = self.base.iter().copied().fold(0.0, f64::max);
        Some((load + work).max(f64::MIN_POSITIVE))
    }

    /// A makespan no schedule beats: the longest task at its cheapest, and
    /// the total (cheapest) work plus the loads spread over every worker.
    fn lower(&self) -> f64 {
        let cheapest = |i: usize| {
            self.cost[i]
                .iter()
                .flatten()
                .copied()
                .fold(f64::INFINITY, f64::min)
        };
        let longest = self
            .by_speedup
            .iter()
            .map(|&i| cheapest(i))
            .fold(0.0, f64::max);
        let area: f64 = self.by_speedup.iter().map(|&i| cheapest(i)).sum::<f64>()
            + self.base.iter().sum::<f64>();
        longest.max(area / self.workers.len().max(1) as f64)
    }

    /// Task `i`'s cheapest cost on a worker of a class, if within `limit`
    /// (the cheapest is within it exactly when some worker's cost is).
    fn best_in(&self, i: usize, accelerator: bool, limit: f64) -> Option<f64> {
        self.cheapest[usize::from(accelerator)][i].filter(|&c| c <= limit)
    }

    /// One try of guess `lambda`: the schedule, or `None` when rejected.
    fn attempt(&self, lambda: f64, alpha: f64) -> Option<PerTask<usize>> {
        let n = self.cost.len();
        let mut load = self.base.clone();
        let mut at: PerTask<usize> = smallvec::smallvec![usize::MAX; n];
        if alpha > 0.0 {
            for &(i, node) in &self.by_affinity {
                let target = (0..self.workers.len())
                    .filter(|&w| self.workers[w].node == node)
                    .filter_map(|w| self.cost[i][w].filter(|&c| c <= lambda).map(|c| (w, c)))
                    .min_by(|a, b| load[a.0].total_cmp(&load[b.0]).then(a.0.cmp(&b.0)));
                if let Some((w, c)) = target
                    && load[w] - self.base[w] < alpha * lambda
                {
                    at[i] = w;
                    load[w] += c;
                }
            }
        }
        let mut acc = PerTask::new();
        let mut cpu = PerTask::new();
        let mut area: f64 = (0..self.workers.len())
            .filter(|&w| self.workers[w].is_accelerator())
            .map(|w| load[w])
            .sum();
        let mut flexible: PerTask<(usize, f64)> = PerTask::new();
        for &i in &self.by_speedup {
            if at[i] != usize::MAX {
                continue;
            }
            match (
                self.best_in(i, false, lambda),
                self.best_in(i, true, lambda),
            ) {
                (None, None) => return None,
                (Some(_), None) => cpu.push(i),
                (None, Some(g)) => {
                    area += g;
                    acc.push(i);
                }
                (Some(_), Some(g)) => flexible.push((i, g)),
            }
        }
        let n_acc = self.workers.iter().filter(|w| w.is_accelerator()).count();
        let budget = n_acc as f64 * lambda;
        for (i, g) in flexible {
            if area < budget {
                area += g;
                acc.push(i);
            } else {
                cpu.push(i);
            }
        }
        for (accelerator, list) in [(true, acc), (false, cpu)] {
            self.list_schedule(accelerator, list, lambda, &mut load, &mut at);
        }
        let worst = load.iter().copied().fold(0.0, f64::max);
        (worst <= (2.0 + alpha) * lambda).then_some(at)
    }

    /// Longest task first, each on the worker of the class that finishes it
    /// first (cost within `lambda` preferred; any capable one otherwise).
    fn list_schedule(
        &self,
        accelerator: bool,
        mut list: PerTask<usize>,
        lambda: f64,
        load: &mut [f64],
        at: &mut [usize],
    ) {
        let key = |i: usize| self.best_in(i, accelerator, f64::INFINITY).unwrap_or(0.0);
        list.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
        for i in list {
            let pick = |limit: f64| {
                (0..self.workers.len())
                    .filter(|&w| self.workers[w].is_accelerator() == accelerator)
                    .filter_map(|w| {
                        self.cost[i][w]
                            .filter(|&c| c <= limit)
                            .map(|c| (w, load[w] + c))
                    })
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            };
            if let Some((w, end)) = pick(lambda).or_else(|| pick(f64::INFINITY)) {
                at[i] = w;
                load[w] = end;
            }
        }
    }

    /// Earliest finish for everything (never needed in practice: the upper
    /// guess is always accepted).
    fn fallback(&self) -> PerTask<usize> {
        let mut load = self.base.clone();
        let mut at: PerTask<usize> = smallvec::smallvec![usize::MAX; self.cost.len()];
        for &i in &self.by_speedup {
            if let Some((w, end)) = (0..self.workers.len())
                .filter_map(|w| self.cost[i][w].map(|c| (w, load[w] + c)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
            {
                at[i] = w;
                load[w] = end;
            }
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Affinity, heft};
    use super::*;
    use crate::rng::Rng;

    fn brute_force_optimum(tasks: &[DagTask], workers: &[DagWorker]) -> f64 {
        let (n, m) = (tasks.len(), workers.len());
        let mut best = f64::INFINITY;
        let mut at = vec![0usize; n];
        loop {
            if at
                .iter()
                .enumerate()
                .all(|(i, &w)| tasks[i].cost_s[w].is_some())
            {
                best = best.min(makespan(tasks, workers, &at));
            }
            let mut k = 0;
            while k < n {
                at[k] += 1;
                if at[k] < m {
                    break;
                }
                at[k] = 0;
                k += 1;
            }
            if k == n {
                return best;
            }
        }
    }

    #[test]
    fn dual_approximation_stays_near_the_optimum_on_small_instances() {
        // Homogeneous classes, no loads, α = 0: the dual approximation's
        // guarantee is about 2 (list scheduling adds a fraction of a task).
        let mut rng = Rng::new(7);
        let mut worst: f64 = 0.0;
        for case in 0..300 {
            let w = [cpu(0.0), cpu(0.0), gpu(1, 0.0)];
            let n = 2 + case % 5;
            let tasks: Vec<_> = (0..n)
                .map(|_| {
                    let c = 0.1 + rng.unit() * 10.0;
                    let s = 0.2 + rng.unit() * 20.0;
                    task(&w, c, c / s)
                })
                .collect();
            let opt = brute_force_optimum(&tasks, &w);
            let got = makespan(&tasks, &w, &place(&tasks, &w, 0.0, 0.01, false));
            worst = worst.max(got / opt);
        }
        assert!(worst <= 2.0 * 1.01 + 1e-9, "worst ratio to optimum {worst}");
    }

    #[test]
    fn every_task_is_placed_on_a_capable_worker() {
        let mut rng = Rng::new(11);
        for _ in 0..200 {
            let w = [cpu(rng.unit()), cpu(0.0), gpu(1, 2.0), gpu(2, 0.0)];
            let tasks: Vec<_> = (0..20)
                .map(|k| {
                    let mut t = task(&w, 1.0 + rng.unit(), 0.1 + rng.unit());
                    if k % 3 == 0 {
                        t.cost_s[0] = None;
                        t.cost_s[1] = None;
                    }
                    if k % 5 == 0 {
                        t.cost_s[2] = None;
                    }
                    t.affinity = Some(Affinity {
                        node: k % 3,
                        bytes: 1.0 + k as f64,
                    });
                    t
                })
                .collect();
            for (alpha, cp) in [(0.0, false), (0.5, false), (1.0, true)] {
                let at = place(&tasks, &w, alpha, 0.01, cp);
                for (t, &x) in tasks.iter().zip(&at) {
                    assert!(t.cost_s[x].is_some(), "task placed on incapable worker {x}");
                }
            }
        }
    }

    /// Two equal GPUs, each holding the data half the tasks write.
    fn two_gpu_batch() -> (Vec<DagWorker>, Vec<DagTask>) {
        let w = vec![gpu(1, 0.0), gpu(2, 0.0)];
        let tasks = (0..16)
            .map(|k| {
                let mut t = task(&w, 10.0, 1.0);
                let home = if k < 12 { 1 } else { 2 };
                t.affinity = Some(Affinity {
                    node: home,
                    bytes: 1e6,
                });
                t.transfer_s = w
                    .iter()
                    .map(|x| if x.node == home { 0.0 } else { 0.3 })
                    .collect();
                t
            })
            .collect();
        (w, tasks)
    }

    fn misplaced(tasks: &[DagTask], workers: &[DagWorker], at: &[usize]) -> usize {
        tasks
            .iter()
            .zip(at)
            .filter(|(t, x)| t.affinity.map(|a| a.node) != Some(workers[**x].node))
            .count()
    }

    #[test]
    fn affinity_keeps_tasks_with_their_data_and_alpha_bounds_it() {
        let (w, tasks) = two_gpu_batch();
        let moved = |alpha| misplaced(&tasks, &w, &place(&tasks, &w, alpha, 0.01, false));
        // 12 tasks' data on GPU 1, 4 on GPU 2: the balanced schedule (8 and
        // 8) moves 4; plain dual approximation ignores where data is.
        let (plain, affine) = (moved(0.0), moved(1.0));
        assert!(plain >= 4, "alpha 0 moved {plain}");
        assert!(
            affine <= 4 && affine < plain,
            "alpha 1 moved {affine}, alpha 0 {plain}"
        );
        // The makespan stays balanced within DADA's bound.
        let at = place(&tasks, &w, 1.0, 0.01, false);
        assert!(makespan(&tasks, &w, &at) <= 3.0 * 8.0, "{at:?}");
        // HEFT balances without regard to data in the same situation.
        let h = heft::place(&tasks, &w, None).at;
        assert!(makespan(&tasks, &w, &h) <= 9.0);
    }

    #[test]
    fn communication_prediction_weighs_transfers() {
        // Transfers as long as the task: CP keeps every task on its data's
        // node whenever that does not lengthen the schedule.
        let w = vec![gpu(1, 0.0), gpu(2, 0.0)];
        let tasks: Vec<_> = (0..8)
            .map(|k| {
                let mut t = task(&w, 10.0, 1.0);
                let home = 1 + k % 2;
                t.transfer_s = w
                    .iter()
                    .map(|x| if x.node == home { 0.0 } else { 1.0 })
                    .collect();
                t.affinity = Some(Affinity {
                    node: home,
                    bytes: 1.0,
                });
                t
            })
            .collect();
        let at = place(&tasks, &w, 0.0, 0.01, true);
        assert_eq!(misplaced(&tasks, &w, &at), 0, "{at:?}");
    }

    #[test]
    fn existing_loads_shift_work_away() {
        let w = [gpu(1, 100.0), gpu(2, 0.0)];
        let tasks: Vec<_> = (0..4).map(|_| task(&w, 10.0, 1.0)).collect();
        assert_eq!(place(&tasks, &w, 0.0, 0.01, false).as_slice(), [1; 4]);
    }

    #[test]
    fn degenerate_inputs() {
        let w = [cpu(0.0)];
        assert!(place(&[], &w, 0.5, 0.01, false).is_empty());
        let mut none = task(&w, 1.0, 1.0);
        none.cost_s = vec![None];
        assert_eq!(
            place(&[none], &w, 0.5, 0.01, false).as_slice(),
            [usize::MAX]
        );
        // Zero costs, NaN parameters.
        let t = task(&w, 0.0, 0.0);
        assert_eq!(
            place(&[t.clone(), t], &w, f64::NAN, f64::NAN, true).as_slice(),
            [0, 0]
        );
    }
}
