//! A lower bound on the makespan of a task graph on workers of a few kinds,
//! which keeps the graph's dependencies (StarPU's LP area bound drops
//! them) and stays cheap on tens of thousands of tasks.
//!
//! Every task has a duration on each kind that can run it (the fastest
//! worker of that kind) and successors; data transfers are not counted,
//! so the bound holds whatever they cost. A makespan `T` is refused
//! (no schedule can be that short) when one of these relaxations has no
//! solution:
//!
//! 1. **Kinds a task can use.** A task whose head (longest chain of work
//!    before it) plus its duration on kind `k` plus its tail (longest
//!    chain after it) exceeds `T` cannot run on `k`. Heads and tails are
//!    taken over the kinds still allowed, and the rule is applied again
//!    until nothing changes (a CPU core too slow for a task near the
//!    critical path is ruled out for it, which lengthens the chains
//!    through it).
//! 2. **Windows.** For head and tail thresholds `a` and `b`, the tasks
//!    whose head is at least `a` and tail at least `b` all run within
//!    `[a, T - b]`: their work, split fractionally between the kinds each
//!    may use, must fit in `T - a - b` on every kind's workers (the area
//!    bound of that window; `a = b = 0` is the whole graph's area bound).
//!
//! The bound is the largest `T` found refused, by bisection (to a relative
//! 1e-4, rounded down). With two kinds the window's split is exact (a
//! fractional knapsack); with more, only the pooled work and each kind's
//! forced work are checked (weaker, still a bound).

use std::collections::VecDeque;

/// A task of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundTask {
    /// Duration on each kind (milliseconds, the kind's fastest worker);
    /// `None` where no worker of the kind can run it.
    pub ms: Vec<Option<f64>>,
    /// Indices of its successors.
    pub successors: Vec<usize>,
}

/// A task graph and the workers it ran on.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundGraph {
    /// Workers of each kind (the index of [`BoundTask::ms`]).
    pub workers: Vec<usize>,
    /// The tasks.
    pub tasks: Vec<BoundTask>,
}

/// The bound and the two classical bounds it contains.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bound {
    /// The lower bound, milliseconds.
    pub ms: f64,
    /// The area bound (no dependencies), milliseconds.
    pub area_ms: f64,
    /// The critical path on the fastest kinds (unlimited workers).
    pub path_ms: f64,
}

/// Default number of head (and tail) thresholds tried: 32 x 32 windows.
pub const DEFAULT_GRID: usize = 32;

/// Relative precision of the bisection.
const PRECISION: f64 = 1e-4;

/// The lower bound of `graph` with `grid` head and tail thresholds each
/// (see the module's documentation). An error for a graph with a cycle, a
/// successor index out of range, a task no kind can run, a negative or
/// non-finite duration, or a kind without workers that some task needs.
pub fn lower_bound(graph: &BoundGraph, grid: usize) -> Result<Bound, String> {
    let order = check(graph)?;
    if graph.tasks.is_empty() {
        return Ok(Bound::default());
    }
    let problem = Problem::new(graph, order, grid.max(1));
    let (heads, tails) = problem.chains(&problem.runnable);
    let path_ms = (0..graph.tasks.len())
        .map(|j| heads[j] + problem.shortest(j, problem.runnable[j]) + tails[j])
        .fold(0.0, f64::max);
    let area_ms = bisect(0.0, problem.serial_ms, |t| {
        problem.fits(&problem.by_ratio, &problem.runnable, t)
    });
    let ms = bisect(path_ms.max(area_ms), problem.serial_ms, |t| {
        problem.feasible(t)
    });
    Ok(Bound {
        ms,
        area_ms,
        path_ms,
    })
}

/// The bound of a run made of `epochs` one after the other (each starts
/// only once the previous one has completed): the sum of their bounds
/// (and of their area bounds and critical paths).
pub fn lower_bound_of_epochs(epochs: &[BoundGraph], grid: usize) -> Result<Bound, String> {
    epochs.iter().try_fold(Bound::default(), |sum, g| {
        let b = lower_bound(g, grid)?;
        Ok(Bound {
            ms: sum.ms + b.ms,
            area_ms: sum.area_ms + b.area_ms,
            path_ms: sum.path_ms + b.path_ms,
        })
    })
}

/// The largest `t` in `[lo, hi]` found infeasible (`lo` when none is): a
/// makespan `feasible` refuses is a lower bound. `feasible` is monotone
/// and true at `hi`.
fn bisect(mut lo: f64, mut hi: f64, feasible: impl Fn(f64) -> bool) -> f64 {
    if hi <= lo {
        return lo;
    }
    while hi - lo > PRECISION * hi {
        let mid = 0.5 * (lo + hi);
        if feasible(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    lo
}

/// Validates the graph; returns a topological order.
fn check(graph: &BoundGraph) -> Result<Vec<usize>, String> {
    let kinds = graph.workers.len();
    if kinds > 32 {
        return Err(format!("{kinds} worker kinds: at most 32 are supported"));
    }
    for (j, t) in graph.tasks.iter().enumerate() {
        if t.ms.len() != kinds {
            return Err(format!(
                "task {j} has durations for {} kinds, the graph has {kinds}",
                t.ms.len()
            ));
        }
        let mut runnable = false;
        for (k, d) in t.ms.iter().enumerate() {
            if let Some(d) = d {
                if !d.is_finite() || *d < 0.0 {
                    return Err(format!("task {j}: duration {d} on kind {k}"));
                }
                if graph.workers[k] > 0 {
                    runnable = true;
                }
            }
        }
        if !runnable {
            return Err(format!("task {j}: no worker can run it"));
        }
    }
    topological_order(graph)
}

/// A topological order of `graph`'s tasks (Kahn's), or an error for a
/// successor out of range or a cycle.
pub(crate) fn topological_order(graph: &BoundGraph) -> Result<Vec<usize>, String> {
    let n = graph.tasks.len();
    let mut preds = vec![0usize; n];
    for (j, t) in graph.tasks.iter().enumerate() {
        for &s in &t.successors {
            if s >= n {
                return Err(format!("task {j}: successor {s} out of range"));
            }
            preds[s] += 1;
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&j| preds[j] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(j) = queue.pop_front() {
        order.push(j);
        for &s in &graph.tasks[j].successors {
            preds[s] -= 1;
            if preds[s] == 0 {
                queue.push_back(s);
            }
        }
    }
    if order.len() < n {
        return Err(format!(
            "the graph has a cycle ({} tasks on or after it)",
            n - order.len()
        ));
    }
    Ok(order)
}

/// The graph prepared for the feasibility tests.
struct Problem<'a> {
    graph: &'a BoundGraph,
    order: Vec<usize>,
    grid: usize,
    /// Tasks by decreasing duration on kind 1 over kind 0 (two kinds: the
    /// knapsack's order), else by index.
    by_ratio: Vec<usize>,
    /// Each task's kinds with a duration and workers, as a bit mask.
    runnable: Vec<u32>,
    /// Every task on its fastest kind, one after the other: a makespan
    /// some schedule reaches (so every relaxation accepts it).
    serial_ms: f64,
}

impl<'a> Problem<'a> {
    fn new(graph: &'a BoundGraph, order: Vec<usize>, grid: usize) -> Problem<'a> {
        let mut by_ratio: Vec<usize> = (0..graph.tasks.len()).collect();
        if graph.workers.len() == 2 {
            let ratio = |j: usize| match graph.tasks[j].ms[..] {
                [Some(d0), Some(d1)] if d0 > 0.0 => d1 / d0,
                [Some(_), Some(_)] => f64::INFINITY,
                _ => 0.0,
            };
            by_ratio.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
        }
        let mut problem = Problem {
            graph,
            order,
            grid,
            by_ratio,
            runnable: Vec::new(),
            serial_ms: 0.0,
        };
        problem.runnable = problem.runnable_kinds();
        problem.serial_ms = (0..graph.tasks.len())
            .map(|j| problem.shortest(j, problem.runnable[j]))
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        problem
    }

    /// Each task's kinds with a duration and workers, as a bit mask.
    fn runnable_kinds(&self) -> Vec<u32> {
        self.graph
            .tasks
            .iter()
            .map(|t| {
                t.ms.iter()
                    .enumerate()
                    .filter(|&(k, d)| d.is_some() && self.graph.workers[k] > 0)
                    .fold(0u32, |m, (k, _)| m | (1 << k))
            })
            .collect()
    }

    /// Task `j`'s shortest duration over the kinds in `mask`.
    fn shortest(&self, j: usize, mask: u32) -> f64 {
        self.graph.tasks[j]
            .ms
            .iter()
            .enumerate()
            .filter(|&(k, _)| mask & (1 << k) != 0)
            .filter_map(|(_, d)| *d)
            .fold(f64::INFINITY, f64::min)
    }

    /// Heads and tails: the longest chain of shortest durations (over the
    /// allowed kinds) before each task's start and after its end.
    fn chains(&self, allowed: &[u32]) -> (Vec<f64>, Vec<f64>) {
        let n = self.graph.tasks.len();
        let d: Vec<f64> = (0..n).map(|j| self.shortest(j, allowed[j])).collect();
        let mut heads = vec![0.0f64; n];
        for &j in &self.order {
            let end = heads[j] + d[j];
            for &s in &self.graph.tasks[j].successors {
                heads[s] = heads[s].max(end);
            }
        }
        let mut tails = vec![0.0f64; n];
        for &j in self.order.iter().rev() {
            tails[j] = self.graph.tasks[j]
                .successors
                .iter()
                .map(|&s| d[s] + tails[s])
                .fold(0.0, f64::max);
        }
        (heads, tails)
    }

    /// Whether no relaxation refuses makespan `t`.
    fn feasible(&self, t: f64) -> bool {
        let slack = t * 1e-12;
        let mut allowed = self.runnable.clone();
        let (heads, tails) = loop {
            let (heads, tails) = self.chains(&allowed);
            let mut changed = false;
            for (j, mask) in allowed.iter_mut().enumerate() {
                for (k, d) in self.graph.tasks[j].ms.iter().enumerate() {
                    if *mask & (1 << k) != 0
                        && d.is_some_and(|d| heads[j] + d + tails[j] > t + slack)
                    {
                        *mask &= !(1 << k);
                        changed = true;
                    }
                }
                if *mask == 0 {
                    return false;
                }
            }
            if !changed {
                break (heads, tails);
            }
        };
        let a_cuts = thresholds(&heads, self.grid);
        let b_cuts = thresholds(&tails, self.grid);
        let mut members = Vec::with_capacity(heads.len());
        for &a in &a_cuts {
            for &b in &b_cuts {
                members.clear();
                members.extend(
                    self.by_ratio
                        .iter()
                        .copied()
                        .filter(|&j| heads[j] >= a && tails[j] >= b),
                );
                if !members.is_empty() && !self.fits(&members, &allowed, t - a - b) {
                    return false;
                }
            }
        }
        true
    }

    /// Whether the work of `members` (in `by_ratio` order), split
    /// fractionally between the kinds each may use, fits in `length` on
    /// every kind's workers.
    fn fits(&self, members: &[usize], allowed: &[u32], length: f64) -> bool {
        if length <= 0.0 {
            return false;
        }
        let workers = &self.graph.workers;
        let kinds = workers.len();
        let capacity: Vec<f64> = workers.iter().map(|&w| w as f64 * length).collect();
        let slack = length * 1e-12;
        let mut forced = vec![0.0f64; kinds];
        let mut flexible: Vec<usize> = Vec::new();
        let mut pooled = 0.0;
        for &j in members {
            let mask = allowed[j];
            if mask.count_ones() == 1 {
                let k = mask.trailing_zeros() as usize;
                forced[k] += self.graph.tasks[j].ms[k].unwrap_or(0.0);
            } else {
                flexible.push(j);
            }
            pooled += self.shortest(j, mask);
        }
        if (0..kinds).any(|k| forced[k] > capacity[k] + slack) {
            return false;
        }
        if kinds != 2 {
            return pooled <= capacity.iter().sum::<f64>() + slack;
        }
        // Two kinds: move to kind 0 the tasks that save the most kind-1
        // time per kind-0 time (the order of `by_ratio`), as far as kind
        // 0's room allows, then check kind 1.
        let mut room0 = capacity[0] - forced[0];
        let mut load1 = forced[1];
        for &j in &flexible {
            // A task allowed on both kinds has both durations.
            let [Some(d0), Some(d1)] = self.graph.tasks[j].ms[..] else {
                continue;
            };
            if room0 >= d0 {
                room0 -= d0;
            } else {
                let share = if d0 > 0.0 { room0 / d0 } else { 1.0 };
                room0 = 0.0;
                load1 += (1.0 - share) * d1;
            }
        }
        load1 <= capacity[1] + slack
    }
}

/// Up to `grid` thresholds among `values`: their smallest value and
/// evenly spaced quantiles of the distinct values.
fn thresholds(values: &[f64], grid: usize) -> Vec<f64> {
    let mut distinct: Vec<f64> = values.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() <= grid {
        return distinct;
    }
    (0..grid)
        .map(|i| distinct[i * (distinct.len() - 1) / (grid - 1).max(1)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn task(ms: &[Option<f64>], successors: &[usize]) -> BoundTask {
        BoundTask {
            ms: ms.to_vec(),
            successors: successors.to_vec(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-3 * b.max(1.0)
    }

    #[test]
    fn a_chain_is_bound_by_its_fastest_durations() {
        let g = BoundGraph {
            workers: vec![4, 1],
            tasks: vec![
                task(&[Some(10.0), Some(2.0)], &[1]),
                task(&[Some(3.0), Some(5.0)], &[2]),
                task(&[Some(4.0), None], &[]),
            ],
        };
        let b = lower_bound(&g, DEFAULT_GRID).unwrap();
        assert!(close(b.path_ms, 9.0), "{b:?}");
        assert!(close(b.ms, 9.0), "{b:?}");
    }

    #[test]
    fn independent_tasks_are_bound_by_the_fractional_area() {
        // 4 tasks of 4 ms on the CPU, 1 ms on the GPU, one worker each:
        // x ms of CPU work leaves 4 - x/4 on the GPU, x = 4 - x/4 at 3.2.
        let g = BoundGraph {
            workers: vec![1, 1],
            tasks: vec![task(&[Some(4.0), Some(1.0)], &[]); 4],
        };
        let b = lower_bound(&g, DEFAULT_GRID).unwrap();
        assert!(close(b.area_ms, 3.2), "{b:?}");
        // No task fits on the CPU within 3.2 ms or even 4: the GPU runs
        // them all.
        assert!(close(b.ms, 4.0), "{b:?}");
    }

    #[test]
    fn a_slow_kind_ruled_out_near_the_critical_path_beats_both_classic_bounds() {
        // A chain of two tasks and two independent ones, 1 ms on the GPU,
        // 10 on the CPU: area 40/11, path 2; the CPU helps only from 10 ms.
        let g = BoundGraph {
            workers: vec![1, 1],
            tasks: vec![
                task(&[Some(10.0), Some(1.0)], &[1]),
                task(&[Some(10.0), Some(1.0)], &[]),
                task(&[Some(10.0), Some(1.0)], &[]),
                task(&[Some(10.0), Some(1.0)], &[]),
            ],
        };
        let b = lower_bound(&g, DEFAULT_GRID).unwrap();
        assert!(close(b.area_ms, 40.0 / 11.0), "{b:?}");
        assert!(close(b.path_ms, 2.0), "{b:?}");
        assert!(close(b.ms, 4.0), "{b:?}");
    }

    #[test]
    fn a_window_counts_the_work_that_must_follow_a_head() {
        // Root (5 ms, one kind) then 6 tasks of 2 ms on 2 workers: the
        // window after the root holds 12 ms of work for 2 workers.
        let mut tasks = vec![task(&[Some(5.0)], &[1, 2, 3, 4, 5, 6])];
        tasks.extend((0..6).map(|_| task(&[Some(2.0)], &[])));
        let g = BoundGraph {
            workers: vec![2],
            tasks,
        };
        let b = lower_bound(&g, DEFAULT_GRID).unwrap();
        assert!(close(b.area_ms, 8.5), "{b:?}");
        assert!(close(b.path_ms, 7.0), "{b:?}");
        assert!(close(b.ms, 11.0), "{b:?}");
    }

    #[test]
    fn epochs_add_up() {
        let one = BoundGraph {
            workers: vec![2],
            tasks: vec![task(&[Some(3.0)], &[1]), task(&[Some(2.0)], &[])],
        };
        let b = lower_bound_of_epochs(&[one.clone(), one], 8).unwrap();
        assert!(close(b.ms, 10.0), "{b:?}");
        assert!(close(b.path_ms, 10.0), "{b:?}");
        assert!(close(b.area_ms, 5.0), "{b:?}");
    }

    #[test]
    fn bad_graphs_are_refused_with_the_reason() {
        let cycle = BoundGraph {
            workers: vec![1],
            tasks: vec![task(&[Some(1.0)], &[1]), task(&[Some(1.0)], &[0])],
        };
        assert!(lower_bound(&cycle, 8).unwrap_err().contains("cycle"));
        let nobody = BoundGraph {
            workers: vec![1, 0],
            tasks: vec![task(&[None, Some(1.0)], &[])],
        };
        assert!(lower_bound(&nobody, 8).unwrap_err().contains("no worker"));
        let dangling = BoundGraph {
            workers: vec![1],
            tasks: vec![task(&[Some(1.0)], &[3])],
        };
        assert!(
            lower_bound(&dangling, 8)
                .unwrap_err()
                .contains("out of range")
        );
    }

    /// A list schedule: tasks in a random topological order, each on the
    /// worker that finishes it first (non-preemptive), as a real schedule.
    fn list_schedule(g: &BoundGraph, rng: &mut Rng) -> f64 {
        let n = g.tasks.len();
        let mut preds = vec![0usize; n];
        for t in &g.tasks {
            for &s in &t.successors {
                preds[s] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&j| preds[j] == 0).collect();
        let mut free: Vec<Vec<f64>> = g.workers.iter().map(|&w| vec![0.0; w]).collect();
        let mut release = vec![0.0f64; n];
        let mut makespan = 0.0f64;
        while !ready.is_empty() {
            let j = ready.swap_remove(rng.below(ready.len() as u64) as usize);
            let mut best = (f64::INFINITY, 0, 0);
            for (k, d) in g.tasks[j].ms.iter().enumerate() {
                let Some(d) = d else { continue };
                for (w, &f) in free[k].iter().enumerate() {
                    let end = f.max(release[j]) + d;
                    if end < best.0 {
                        best = (end, k, w);
                    }
                }
            }
            let (end, k, w) = best;
            free[k][w] = end;
            makespan = makespan.max(end);
            for &s in &g.tasks[j].successors {
                release[s] = release[s].max(end);
                preds[s] -= 1;
                if preds[s] == 0 {
                    ready.push(s);
                }
            }
        }
        makespan
    }

    fn random_graph(rng: &mut Rng, kinds: usize) -> BoundGraph {
        let n = 2 + rng.below(40) as usize;
        let workers: Vec<usize> = (0..kinds).map(|_| 1 + rng.below(4) as usize).collect();
        let tasks = (0..n)
            .map(|j| {
                let mut ms: Vec<Option<f64>> = (0..kinds)
                    .map(|_| (rng.unit() < 0.8).then(|| rng.log_range(0.1, 50.0)))
                    .collect();
                if ms.iter().all(Option::is_none) {
                    ms[0] = Some(rng.range(0.1, 10.0));
                }
                // Successors only later in index order: acyclic.
                let successors = (j + 1..n).filter(|_| rng.unit() < 0.15).collect();
                BoundTask { ms, successors }
            })
            .collect();
        BoundGraph { workers, tasks }
    }

    #[test]
    fn no_schedule_is_shorter_than_the_bound_and_it_holds_both_classic_bounds() {
        let mut rng = Rng::new(23);
        let mut above_classic = 0;
        for case in 0..300 {
            let g = random_graph(&mut rng, 1 + case % 3);
            let b = lower_bound(&g, 8).unwrap();
            assert!(b.ms >= b.area_ms.max(b.path_ms) * (1.0 - 1e-9), "{b:?}");
            for _ in 0..20 {
                let m = list_schedule(&g, &mut rng);
                assert!(
                    b.ms <= m * (1.0 + 1e-9),
                    "case {case}: bound {b:?} > schedule {m}"
                );
            }
            if b.ms > b.area_ms.max(b.path_ms) * 1.01 {
                above_classic += 1;
            }
        }
        // The relaxations add something on random graphs too.
        assert!(above_classic > 30, "{above_classic}");
    }
}
