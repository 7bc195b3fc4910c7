//! The paper's online HEFT (§3.1, Algorithm 1): at each activation the
//! ready tasks are sorted by decreasing accelerator speedup (the paper's
//! rule: it favours the sum of execution times), and each
//! goes to the worker with the earliest predicted finish: the worker's
//! backlog, plus the predicted transfer of its data to the worker's node
//! (added, not overlapped with the backlog), plus its predicted time there.
//! The transfer is StarPU's prediction, which assumes every accelerator
//! transfers at once; it is scaled to the transfers expected at once: the
//! candidate's and those of the workers with data on its way (a line
//! holding a task placed with a transfer, or a placement of this batch),
//! over the accelerators ([`concurrent_share`]). Without it, StarPU's GEMM
//! example on SIMULATED idgraf ran on 4 of its 8 GPUs.
//! The worker chosen is the one with the lowest finish plus StarPU's
//! unscaled transfer prediction: `dmda`'s data penalty (`β` × transfer,
//! StarPU's default β = 1), which charges a transfer for the bus time it
//! takes from the others. On the SIMULATED study it took the bytes moved
//! on Cholesky and LU from 1.020x to 0.943x `dmdas`'s, makespans level
//! (docs/results.md, ninth round). Idle workers steal with the transfer
//! scaled by the same share, counting the workers that had data on its
//! way when the last batch was taken (`graph.rs`); that keeps the GEMM on
//! all the GPUs despite the penalty.
//!
//! The backlog counted is the whole of it, the running work and every
//! queued task whatever its priority (`dmda`'s expected end), although the
//! queue itself is priority-ordered, unless the task is critical: when
//! waiting for the whole backlog would use up its slack ([`DagTask::slack_s`]:
//! the remaining work spread over the machine, less the longest chain of
//! work from the task to the end of the graph), it may count only the work
//! of its priority or higher, which it does not overtake, on a worker
//! where that gains it at least its own time there over the best finish
//! waiting for whole backlogs: overtaking delays the work overtaken by
//! that time (docs/results.md, twelfth round). Counting that for every
//! task sent urgent tasks with little acceleration (Cholesky's
//! POTRF) to a GPU whose running task was short, and with 1 or 2 GPUs,
//! the bottleneck, Cholesky was 1.1–1.3x slower than StarPU's best; never
//! counting it left LU on 4 GPUs waiting on its chain of factorisations
//! (SIMULATED sirocco: 1.120x StarPU's best, 1.007x with the slack;
//! docs/results.md, tenth round). Cost: O(n log n + n·w·p) for n tasks, w
//! workers and p distinct priorities queued.
//!
//! With a window ([`DagWorker::room`], `PLB_HEFT_WINDOW`), a task whose
//! best worker has no room left is held ([`HELD`]: it waits for that
//! worker rather than go to a worse one), unless it overtakes that
//! worker's queued work (past its slack, it waits for none of it).
//! Without that exception, LU on SIMULATED sirocco took 1214 ms instead of
//! 1153 (docs/results.md, eleventh round).

use super::offload::{Chosen, Offload};
use super::{
    Backlog, DATA_PENALTY, DagTask, DagWorker, HELD, PerTask, PerWorker, Placement, by_speedup,
    concurrent_share,
};

/// Places the batch (see the module documentation); [`HELD`] for a task
/// held for room, `usize::MAX` for a task no worker has a cost for.
/// `most_accelerated`: the highest of the codelets' speedups, for the CPU offload
/// ([`super::offload`]; `None`: none).
pub fn place(tasks: &[DagTask], workers: &[DagWorker], most_accelerated: Option<f64>) -> Placement {
    let offload = most_accelerated.and_then(|s| Offload::for_batch(s, workers));
    let mut lines: PerWorker<Backlog> = workers.iter().map(Backlog::of).collect();
    let mut order: PerTask<usize> = (0..tasks.len()).collect();
    by_speedup(tasks, workers, &mut order);
    let accelerators = workers.iter().filter(|w| w.is_accelerator()).count();
    let mut inbound: PerWorker<bool> = workers.iter().map(|w| w.inbound).collect();
    let mut coming = inbound.iter().filter(|&&b| b).count();
    let mut room: PerWorker<usize> = workers.iter().map(|w| w.room).collect();
    let mut out: PerTask<usize> = smallvec::smallvec![usize::MAX; tasks.len()];
    let mut offloaded = 0;
    // Per task: (worker, score waiting for the whole backlog, score
    // overtaking when past the slack, compute time there).
    let mut cands: PerWorker<(usize, f64, Option<f64>, f64)> = PerWorker::new();
    for i in order {
        let t = &tasks[i];
        cands.clear();
        cands.extend((0..workers.len()).filter_map(|w| {
            let c = t.cost_s.get(w).copied().flatten()?;
            let raw = t.transfer_s.get(w).copied().unwrap_or(0.0);
            let others = coming - usize::from(inbound[w]);
            let ready = raw * concurrent_share(others, accelerators);
            let penalty = raw * DATA_PENALTY;
            // A task that would wait past its slack may count only the
            // queued work it does not overtake (its priority or higher).
            let whole = lines[w].total();
            let plain = whole + ready + c + penalty;
            let over = (whole + ready > t.slack_s)
                .then(|| lines[w].ahead_of(t.priority))
                .filter(|&a| a < whole)
                .map(|a| a + ready + c + penalty);
            plain.is_finite().then_some((w, plain, over, c))
        }));
        // It overtakes only where that gains it at least the time it
        // takes from the work it overtakes (its own time there).
        let best_plain = cands.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        let best = cands
            .iter()
            .map(|&(w, plain, over, c)| match over {
                Some(o) if best_plain - o >= c => (w, o, true),
                _ => (w, plain, false),
            })
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        // A weakly accelerated task whose slack allows goes to the CPU
        // worker with the lowest score instead (see `super::offload`).
        let earliest = best.map(|b| b.0);
        let best = match (best, offload) {
            (Some((w, _, false)), Some(offload)) if workers[w].is_accelerator() => {
                let chosen = Chosen {
                    cost_s: t.cost_s[w].unwrap_or(0.0),
                    backlog_s: lines[w].total(),
                };
                cands
                    .iter()
                    .filter(|c| !workers[c.0].is_accelerator())
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
                    .filter(|c| offload.takes(t, workers, chosen, c.1))
                    .map(|&(cw, plain, _, _)| (cw, plain, false))
                    .or(best)
            }
            _ => best,
        };
        if let Some((w, _, overtakes)) = best {
            // Held when it would wait behind its worker's full line; a task
            // that overtakes the line's work is placed (it waits for none
            // of it).
            if room[w] == 0 && !overtakes {
                out[i] = HELD;
                continue;
            }
            room[w] = room[w].saturating_sub(1);
            out[i] = w;
            if earliest != Some(w) {
                offloaded += 1;
            }
            let c = t.cost_s[w].unwrap_or(0.0);
            lines[w].add(t.priority, c);
            if !inbound[w] && t.transfer_s.get(w).is_some_and(|&x| x > 0.0) {
                inbound[w] = true;
                coming += 1;
            }
        }
    }
    Placement { at: out, offloaded }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn the_fastest_finish_wins_and_loads_accumulate() {
        let w = [cpu(0.0), gpu(1, 0.0)];
        // GPU 5x faster: the first four go to the GPU (finish 1, 2, 3, 4)
        // and the fifth to the CPU (5 on both: the lower index).
        let tasks: Vec<_> = (0..5).map(|_| task(&w, 5.0, 1.0)).collect();
        let at = place(&tasks, &w, None).at;
        assert_eq!(at.iter().filter(|&&x| x == 1).count(), 4, "{at:?}");
        assert_eq!(at.iter().filter(|&&x| x == 0).count(), 1, "{at:?}");
    }

    #[test]
    fn a_weakly_accelerated_task_goes_to_a_cpu_within_its_slack() {
        // Two CPUs and a GPU with 0.5 s of work queued; a POTRF-like task,
        // 2 s on a CPU and 1 s on the GPU: the GPU finishes it first.
        let w = [cpu(0.0), cpu(0.0), gpu(1, 0.5)];
        let mut t = task(&w, 2.0, 1.0);
        t.slack_s = 4.0;
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![2]);
        // With GEMM-like work seen (speedup 30), a CPU takes it: 1 s later
        // than the GPU's time, within half its slack and twice the GPU's
        // backlog.
        assert_eq!(place(&[t.clone()], &w, Some(30.0)).at.to_vec(), vec![0]);
        // The second CPU takes the next one, the first being busy.
        let two = place(&[t.clone(), t.clone()], &w, Some(30.0));
        assert_eq!((two.at.to_vec(), two.offloaded), (vec![0, 1], 2));
        // A task with too little slack stays on the GPU.
        t.slack_s = 1.0;
        let kept = place(&[t], &w, Some(30.0));
        assert_eq!((kept.at.to_vec(), kept.offloaded), (vec![2], 0));
        // So does a strongly accelerated one (speedup 20 > 15).
        let mut gemm = task(&w, 20.0, 1.0);
        gemm.slack_s = 100.0;
        assert_eq!(place(&[gemm], &w, Some(30.0)).at.to_vec(), vec![2]);
        // And one whose GPU has no work queued to run meanwhile.
        let idle = [cpu(0.0), cpu(0.0), gpu(1, 0.0)];
        let mut t = task(&idle, 2.0, 1.0);
        t.slack_s = 4.0;
        assert_eq!(place(&[t], &idle, Some(30.0)).at.to_vec(), vec![2]);
    }

    #[test]
    fn high_speedup_tasks_are_placed_first_and_get_the_gpu() {
        let w = [cpu(0.0), gpu(1, 0.0)];
        // A GEMM-like task (speedup 20) and a POTRF-like one (speedup 2),
        // the latter submitted first: HEFT places the GEMM first on the
        // GPU; the POTRF then finishes earlier on the CPU (2 < 1 + 1).
        let tasks = vec![task(&w, 2.0, 1.0), task(&w, 20.0, 1.0)];
        assert_eq!(place(&tasks, &w, None).at.to_vec(), vec![0, 1]);
    }

    #[test]
    fn transfers_and_existing_loads_count() {
        let w = [gpu(1, 0.0), gpu(2, 0.0)];
        let mut t = task(&w, 10.0, 1.0);
        // Data lives on node 2: going to node 1 costs 3 s of transfer.
        t.transfer_s = vec![3.0, 0.0];
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![1]);
        // Unless node 2's worker is busy for longer than the transfer.
        let w = [gpu(1, 0.0), gpu(2, 5.0)];
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![0]);
    }

    #[test]
    fn a_task_past_its_slack_counts_only_the_work_it_does_not_overtake() {
        // The GPU holds 10 s of priority-0 work; an urgent task (priority
        // 1) takes 5 s on the CPU, 1 s on the GPU.
        let mut w = [cpu(0.0), gpu(1, 10.0)];
        w[1].queued_by_priority = vec![(0, 10.0)];
        let mut t = task(&w, 5.0, 1.0);
        t.priority = 1;
        // With slack to spare it waits for the whole backlog: the CPU
        // (5 s) beats the GPU (11 s).
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![0]);
        t.slack_s = 10.0;
        assert_eq!(
            place(&[t.clone()], &w, None).at.to_vec(),
            vec![0],
            "waiting 10 s is within the slack"
        );
        // Past its slack it overtakes the queued work: 1 s on the GPU.
        t.slack_s = 2.0;
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![1]);
        // Work of its own priority is not overtaken.
        w[1].queued_by_priority = vec![(1, 10.0)];
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![0]);
    }

    #[test]
    fn a_task_overtakes_only_where_it_gains_its_own_time() {
        // The GPU holds 10 s of priority-0 work; an urgent task past its
        // slack takes 5 s on the CPU.
        let mut w = [cpu(0.0), gpu(1, 10.0)];
        w[1].queued_by_priority = vec![(0, 10.0)];
        let mut t = task(&w, 5.0, 1.0);
        t.priority = 1;
        t.slack_s = 0.0;
        // 1 s on the GPU: overtaking gains 4 s over the CPU's 5, more
        // than the 1 s it delays the GPU's work.
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![1]);
        // 4 s on the GPU: it would gain 1 s and delay that work by 4; it
        // waits for the whole backlog there (14 s) and the CPU wins.
        t.cost_s[1] = Some(4.0);
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![0]);
        // Gaining exactly its own time is enough: 2.5 s on the GPU.
        t.cost_s[1] = Some(2.5);
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![1]);
    }

    #[test]
    fn transfers_count_as_shared_only_with_the_transfers_under_way() {
        // 8 GPUs; GPU 0 holds the task's data and 12.5 s of work; the task
        // takes 1 s, and StarPU predicts 8 s to bring its data to any
        // other GPU (as if all 8 transferred at once). Elsewhere the score
        // is the finish plus that 8 s (the data penalty).
        let mut w: Vec<_> = (0..8).map(|g| gpu(g + 1, 0.0)).collect();
        w[0].load_s = 12.5;
        let mut t = task(&w, 10.0, 1.0);
        t.transfer_s = vec![8.0; 8];
        t.transfer_s[0] = 0.0;
        // Nothing on its way anywhere: that transfer runs alone (1 s), so
        // an idle GPU scores 1 + 1 + 8 = 10, before GPU 0 (13.5).
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![1]);
        // Data on its way to the 7 others: the bus is shared as StarPU
        // predicts (8 s; 17 in all), and GPU 0 wins.
        for g in &mut w[1..] {
            g.inbound = true;
        }
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![0]);
        // Within a batch, each placement with a transfer counts for the
        // next: 8 such tasks, 1 s each on an idle GPU at first; the share
        // grows with each transfer placed (2/8, 3/8 ... of 8 s).
        for g in &mut w[1..] {
            g.inbound = false;
        }
        let at = place(&vec![t; 8], &w, None).at;
        assert_eq!(at[0], 1, "{at:?}");
        assert!(
            at.contains(&0),
            "GPU 0 takes one once transfers pile up: {at:?}"
        );
        assert_eq!(concurrent_share(0, 1), 1.0);
        assert_eq!(concurrent_share(3, 8), 0.5);
        assert_eq!(concurrent_share(9, 8), 1.0);
    }

    #[test]
    fn a_transfer_is_charged_again_for_the_bus_it_takes() {
        // Two GPUs; GPU 0 holds the task's data and 1.5 s of work; GPU 1
        // is idle, 2 s of transfer away by StarPU's prediction (1 s with
        // nothing else on its way). GPU 1 would finish first (2 s against
        // 2.5), but with the 2 s penalty it scores 4: the task stays.
        let w = [gpu(1, 1.5), gpu(2, 0.0)];
        let mut t = task(&w, 10.0, 1.0);
        t.transfer_s = vec![0.0, 2.0];
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![0]);
        // With 3.5 s of work on GPU 0 (finish 4.5) GPU 1 wins.
        let w = [gpu(1, 3.5), gpu(2, 0.0)];
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![1]);
    }

    #[test]
    fn the_finish_counts_the_whole_backlog_whatever_the_priority() {
        // GPU: 10 s queued at priority 0, nothing running; CPU idle but 4x
        // slower. Even a priority-5 task (1 s on the GPU), which would jump
        // the GPU's queue, goes to the CPU: the GPU's time is what the
        // queued work needs.
        let mut g = gpu(1, 10.0);
        g.queued_by_priority = vec![(0, 10.0)];
        let w = [cpu(0.0), g];
        let mut t = task(&w, 4.0, 1.0);
        t.priority = 5;
        assert_eq!(place(&[t.clone()], &w, None).at.to_vec(), vec![0]);
        // With 2 s queued it goes to the GPU (3 < 4), whatever its priority.
        let mut g = gpu(1, 2.0);
        g.queued_by_priority = vec![(9, 2.0)];
        let w = [cpu(0.0), g];
        t.priority = 0;
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![1]);
    }

    #[test]
    fn a_task_whose_best_worker_has_no_room_is_held() {
        // GPU 5x faster (5 s on the CPU, 1 s on the GPU), room for one
        // task on its line: the first task takes it; the next two would
        // finish first there too (2 and 3 s against 5): held, not sent to
        // the CPU.
        let mut w = [cpu(0.0), gpu(1, 0.0)];
        w[1].room = 1;
        let tasks: Vec<_> = (0..3).map(|_| task(&w, 5.0, 1.0)).collect();
        assert_eq!(place(&tasks, &w, None).at.to_vec(), vec![1, HELD, HELD]);
        // A task the CPU finishes first goes there, room or not on the GPU.
        w[1].room = 0;
        w[1].load_s = 4.5;
        assert_eq!(place(&tasks[..1], &w, None).at.to_vec(), vec![0]);
        // Without room on the CPU either, it is held too.
        w[0].room = 0;
        assert_eq!(place(&tasks[..1], &w, None).at.to_vec(), vec![HELD]);
        // Unless it is past its slack and overtakes the GPU's queued work
        // (priority 0): then it waits for none of it and is placed.
        w[1].queued_by_priority = vec![(0, 4.5)];
        let mut urgent = tasks[0].clone();
        urgent.priority = 1;
        urgent.slack_s = 1.0;
        assert_eq!(place(&[urgent], &w, None).at.to_vec(), vec![1]);
    }

    #[test]
    fn incapable_workers_are_never_chosen() {
        let w = [cpu(0.0), gpu(1, 100.0)];
        let mut t = task(&w, 1.0, 1.0);
        t.cost_s[0] = None;
        assert_eq!(place(&[t], &w, None).at.to_vec(), vec![1]);
        let mut none = task(&w, 1.0, 1.0);
        none.cost_s = vec![None, None];
        assert_eq!(place(&[none], &w, None).at.to_vec(), vec![usize::MAX]);
    }
}
