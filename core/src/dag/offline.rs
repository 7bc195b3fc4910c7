//! An offline schedule of a recorded task graph ([`super::bound`]'s
//! instance: each task's duration per kind, every worker of a kind as fast
//! as its fastest, no data transfers), to set beside the lower bound: the
//! optimum of that instance lies between the two.
//!
//! HEFT with the whole graph known in advance (Topcuoglu et al.): tasks by
//! decreasing upward rank (the longest chain of mean durations from the
//! task to the end, the mean over the workers able to run it), each on the
//! worker that finishes it first, after the end of its predecessors and of
//! that worker's last task (no insertion into earlier gaps).

use super::bound::{BoundGraph, topological_order};

/// The makespan of offline HEFT on `graph` (milliseconds), or why the graph
/// cannot be scheduled (a cycle, a successor out of range, a task no
/// worker can run).
pub fn heft_makespan(graph: &BoundGraph) -> Result<f64, String> {
    let n = graph.tasks.len();
    let order = topological_order(graph)?;
    let mean = |j: usize| {
        let (sum, count) = graph.tasks[j]
            .ms
            .iter()
            .zip(&graph.workers)
            .filter_map(|(d, &w)| d.filter(|_| w > 0).map(|d| (d * w as f64, w)))
            .fold((0.0, 0usize), |(s, c), (d, w)| (s + d, c + w));
        if count == 0 {
            None
        } else {
            Some(sum / count as f64)
        }
    };
    let mut rank = vec![0.0f64; n];
    for &j in order.iter().rev() {
        let own = mean(j).ok_or_else(|| format!("task {j}: no worker can run it"))?;
        let below = graph.tasks[j]
            .successors
            .iter()
            .map(|&s| rank[s])
            .fold(0.0, f64::max);
        rank[j] = own + below;
    }
    // Decreasing rank is a topological order: a task's rank exceeds each
    // successor's by its own positive mean (ties, from zero durations, are
    // broken by the topological position).
    let mut position = vec![0usize; n];
    for (p, &j) in order.iter().enumerate() {
        position[j] = p;
    }
    let mut by_rank: Vec<usize> = (0..n).collect();
    by_rank.sort_by(|&a, &b| {
        rank[b]
            .total_cmp(&rank[a])
            .then(position[a].cmp(&position[b]))
    });
    let mut free: Vec<Vec<f64>> = graph.workers.iter().map(|&w| vec![0.0; w]).collect();
    let mut ready_at = vec![0.0f64; n];
    let mut makespan = 0.0f64;
    for &j in &by_rank {
        let mut best: Option<(f64, usize, usize)> = None;
        for (k, d) in graph.tasks[j].ms.iter().enumerate() {
            let Some(d) = d else { continue };
            for (w, &f) in free[k].iter().enumerate() {
                let end = f.max(ready_at[j]) + d;
                if best.is_none_or(|(e, _, _)| end < e) {
                    best = Some((end, k, w));
                }
            }
        }
        let (end, k, w) = best.ok_or_else(|| format!("task {j}: no worker can run it"))?;
        free[k][w] = end;
        makespan = makespan.max(end);
        for &s in &graph.tasks[j].successors {
            ready_at[s] = ready_at[s].max(end);
        }
    }
    Ok(makespan)
}

/// Offline HEFT's makespans of epochs run one after the other, added up.
pub fn heft_makespan_of_epochs(epochs: &[BoundGraph]) -> Result<f64, String> {
    epochs.iter().map(heft_makespan).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::bound::{BoundTask, lower_bound};
    use crate::rng::Rng;

    fn task(ms: &[Option<f64>], successors: &[usize]) -> BoundTask {
        BoundTask {
            ms: ms.to_vec(),
            successors: successors.to_vec(),
        }
    }

    #[test]
    fn the_critical_chain_goes_first_and_each_task_to_its_earliest_finish() {
        // A chain a -> b (GPU 1 ms, CPU 10) and an independent c (GPU 3, CPU
        // 4), one worker each. Ranks: a 5.5 + 5.5 = 11, b 5.5, c 3.5: a on
        // the GPU [0, 1], b on the GPU [1, 2], c on the CPU [0, 4].
        let g = BoundGraph {
            workers: vec![1, 1],
            tasks: vec![
                task(&[Some(10.0), Some(1.0)], &[1]),
                task(&[Some(10.0), Some(1.0)], &[]),
                task(&[Some(4.0), Some(3.0)], &[]),
            ],
        };
        assert_eq!(heft_makespan(&g).unwrap(), 4.0);
    }

    #[test]
    fn epochs_run_one_after_the_other() {
        let one = BoundGraph {
            workers: vec![2],
            tasks: vec![task(&[Some(3.0)], &[]), task(&[Some(2.0)], &[])],
        };
        assert_eq!(heft_makespan_of_epochs(&[one.clone(), one]).unwrap(), 6.0);
    }

    #[test]
    fn a_cycle_is_refused() {
        let g = BoundGraph {
            workers: vec![1],
            tasks: vec![task(&[Some(1.0)], &[1]), task(&[Some(1.0)], &[0])],
        };
        assert!(heft_makespan(&g).unwrap_err().contains("cycle"));
    }

    #[test]
    fn the_schedule_is_never_shorter_than_the_bound() {
        let mut rng = Rng::new(5);
        for case in 0..200 {
            let n = 2 + rng.below(30) as usize;
            let kinds = 1 + case % 2;
            let workers: Vec<usize> = (0..kinds).map(|_| 1 + rng.below(3) as usize).collect();
            let tasks = (0..n)
                .map(|j| BoundTask {
                    ms: (0..kinds)
                        .map(|k| (k == 0 || rng.unit() < 0.7).then(|| rng.log_range(0.1, 20.0)))
                        .collect(),
                    successors: (j + 1..n).filter(|_| rng.unit() < 0.2).collect(),
                })
                .collect();
            let g = BoundGraph { workers, tasks };
            let b = lower_bound(&g, 8).unwrap();
            let m = heft_makespan(&g).unwrap();
            assert!(
                b.ms <= m * (1.0 + 1e-9),
                "case {case}: bound {b:?}, HEFT {m}"
            );
        }
    }
}
