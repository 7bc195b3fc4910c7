//! Task mode in virtual time: fake tasks on fake workers, exact expected
//! decisions where the rule fixes them.

use super::*;
use crate::balance::registry::{self, BalancerSpec};

#[derive(Debug, Clone, PartialEq)]
struct Fake {
    id: usize,
    codelet: usize,
    units: f64,
    /// Bit `w` set: worker `w` can run it.
    mask: u64,
    priority: i32,
}

impl SchedTask for Fake {
    fn codelet(&self) -> usize {
        self.codelet
    }
    fn units(&self) -> f64 {
        self.units
    }
    fn implementation_on(&self, pu: usize) -> Option<u32> {
        (self.mask >> pu & 1 == 1).then_some(0)
    }
    fn transfer_s(&self, _pu: usize) -> Option<f64> {
        None
    }
    fn priority(&self) -> i32 {
        self.priority
    }
}

fn task(id: usize, codelet: usize) -> Fake {
    Fake {
        id,
        codelet,
        units: 10.0,
        mask: u64::MAX,
        priority: 0,
    }
}

fn sched(name: &str, workers: usize) -> Scheduler<Fake> {
    let mut s = Scheduler::new(BalancerSpec::parse(name).unwrap(), Tuning::default(), 8);
    let w: Vec<(usize, WorkerKind)> = (0..workers).map(|w| (w, WorkerKind::Cpu)).collect();
    s.add_workers(&w);
    s
}

/// No worker is ever marked idle (polling drivers, nobody fell idle).
fn never_idle() -> Sleepers {
    Sleepers::new(8, false)
}

/// Runs everything pushed so far: worker `w` takes `secs[w]` seconds per
/// task, one at a time; an idle worker asks at every event. Returns the
/// task ids each worker ran, in order.
fn run(s: &mut Scheduler<Fake>, book: &mut ModelBook, secs: &[f64]) -> Vec<Vec<usize>> {
    run_from(s, book, secs, 0.0).0
}

/// [`run`] from virtual time `start`; also returns when the last task ended.
fn run_from(
    s: &mut Scheduler<Fake>,
    book: &mut ModelBook,
    secs: &[f64],
    start: f64,
) -> (Vec<Vec<usize>>, f64) {
    run_with(s, book, secs, start, 0.0, Vec::new())
}

/// [`run_from`] with every consult measured at `consult_s` and the tasks
/// of `arrivals` pushed at their times (in time order).
fn run_with(
    s: &mut Scheduler<Fake>,
    book: &mut ModelBook,
    secs: &[f64],
    start: f64,
    consult_s: f64,
    mut arrivals: Vec<(f64, Vec<Fake>)>,
) -> (Vec<Vec<usize>>, f64) {
    let n = secs.len();
    let mut ran = vec![Vec::new(); n];
    let mut running: Vec<Option<(f64, Taken<Fake>)>> = (0..n).map(|_| None).collect();
    let mut now = start;
    arrivals.reverse();
    for _ in 0..1_000_000 {
        while arrivals.last().is_some_and(|(at, _)| *at <= now) {
            let (_, tasks) = arrivals.pop().expect("an arrival");
            for t in tasks {
                s.push(t, now, book, &never_idle());
            }
        }
        for w in 0..n {
            if running[w].is_none()
                && let Some(t) = s.pop_now_timed(w, now, book, consult_s)
            {
                running[w] = Some((now + secs[w], t));
            }
        }
        let next = (0..n)
            .filter_map(|w| running[w].as_ref().map(|(end, _)| (*end, w)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let next_arrival = arrivals.last().map(|(at, _)| *at);
        let Some((end, w)) = next.filter(|&(end, _)| next_arrival.is_none_or(|at| end <= at))
        else {
            if let Some(at) = next_arrival {
                now = now.max(at);
                continue;
            }
            if s.held() == 0 {
                return (ran, now);
            }
            // Staged tasks flush after a quiet time.
            now += 2.0 * STAGING_QUIET_S;
            continue;
        };
        now = end;
        let (_, t) = running[w].take().expect("running");
        ran[w].push(t.task.id);
        book.record_now(w, t.codelet, t.units, secs[w]);
        if let Some(ticket) = t.ticket {
            s.task_done(ticket, secs[w], now, book);
        }
    }
    panic!("no progress");
}

/// Runs batches one after the other, each `(codelet, tasks, consult_s)`:
/// that many tasks of that codelet (ids numbered on from the batch
/// before), every consult measured at `consult_s`. Returns the task ids
/// each worker ran.
fn run_batches(
    s: &mut Scheduler<Fake>,
    book: &mut ModelBook,
    secs: &[f64],
    batches: &[(usize, usize, f64)],
) -> Vec<Vec<usize>> {
    let mut ran = vec![Vec::new(); secs.len()];
    let (mut now, mut next_id) = (0.0, 0);
    for &(codelet, n, consult_s) in batches {
        let batch: Vec<Fake> = (next_id..next_id + n).map(|i| task(i, codelet)).collect();
        next_id += n;
        let (r, end) = run_with(s, book, secs, now, consult_s, vec![(now, batch)]);
        ran.iter_mut().zip(r).for_each(|(all, r)| all.extend(r));
        now = end;
    }
    ran
}

fn assert_exactly_once(ran: &[Vec<usize>], n: usize) {
    let mut seen = vec![0; n];
    for &id in ran.iter().flatten() {
        seen[id] += 1;
    }
    assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
}

#[test]
fn fallback_queues_are_ordered_by_priority_fifo_within_one() {
    // Worker 1 runs a task of its own: the context has more than one
    // worker able to run its tasks.
    for (workers, order) in [(2, vec![3, 1, 4, 0, 2]), (1, vec![0, 1, 2, 3, 4])] {
        let mut s = sched("plb-hac", workers);
        let mut book = ModelBook::default();
        if workers == 2 {
            let other = Fake {
                mask: 0b10,
                ..task(99, 0)
            };
            s.push(other, 0.0, &book, &never_idle());
        }
        // Tasks without a codelet always take the fallback rule.
        for (id, priority) in [(0, 0), (1, 5), (2, 0), (3, 9), (4, 5)] {
            let t = Fake {
                priority,
                mask: 0b01,
                ..task(id, 0)
            };
            s.push(t, 0.0, &book, &never_idle());
        }
        if workers == 2 {
            let t = s.pop_now(1, 0.0, &book).expect("worker 1's task");
            assert_eq!(t.task.id, 99);
        }
        // A lone worker runs its queue in arrival order (the order changes
        // no makespan there, and arrival order keeps the inputs hot).
        assert_eq!(
            drain_on(&mut s, &mut book, 0, 0.01),
            order,
            "{workers} worker(s)"
        );
    }
}

#[test]
fn tasks_without_a_codelet_go_round_robin_to_untrained_workers() {
    let mut s = sched("plb-hac", 2);
    let book = ModelBook::default();
    s.push(task(0, 0), 0.0, &book, &never_idle());
    s.push(task(1, 0), 0.0, &book, &never_idle());
    // Untrained workers are fed first, shortest queue, ties by rotation.
    let a = s.pop_now(0, 0.0, &book).expect("worker 0's task");
    let b = s.pop_now(1, 0.0, &book).expect("worker 1's task");
    assert_eq!((a.task.id, b.task.id), (0, 1));
    assert!(
        a.ticket.is_none() && b.ticket.is_none(),
        "fallback, no epoch"
    );
    assert_eq!(s.counters().fallback_tasks, 2);
    assert!(s.pop_now(0, 0.0, &book).is_none());
}

#[test]
fn a_batch_forms_an_epoch_split_by_the_balancer() {
    // Static with given speeds: exactly 1/4 and 3/4 of the 16 tasks (the
    // speeds true, so neither worker takes the other's tail).
    let mut s = sched("static:speeds=1/3", 2);
    let mut book = ModelBook::default();
    for i in 0..16 {
        s.push(task(i, 7), 0.0, &book, &never_idle());
    }
    // Not yet an epoch: the batch is staged.
    assert_eq!(s.counters().epochs, 0);
    let ran = run(&mut s, &mut book, &[3.0, 1.0]);
    assert_eq!(s.counters().epochs, 1);
    assert_eq!(ran[0], (0..4).collect::<Vec<_>>());
    assert_eq!(ran[1], (4..16).collect::<Vec<_>>());
    assert_eq!(s.counters().epoch_tasks, 16);
}

#[test]
fn a_codelet_one_worker_can_run_forms_no_epoch() {
    // Two workers, the codelet on worker 1 alone (REAL: Debian's Cholesky
    // with a CPU and an OpenCL worker): nothing to balance, so no epoch;
    // every task goes to worker 1's queue, in arrival order (the context's
    // lone capable worker). The same batch both can run forms one.
    for (mask, epochs) in [(0b10, 0), (0b11, 1)] {
        let mut s = sched("plb-hec", 2);
        let mut book = ModelBook::default();
        for i in 0..32 {
            let mut t = task(i, 7);
            t.mask = mask;
            t.priority = (i % 3) as i32;
            s.push(t, 0.0, &book, &never_idle());
        }
        let ran = run(&mut s, &mut book, &[1.0, 1.0]);
        assert_exactly_once(&ran, 32);
        assert_eq!(s.counters().epochs, epochs, "mask {mask:b}");
        if epochs == 0 {
            assert!(ran[0].is_empty());
            assert_eq!(ran[1], (0..32).collect::<Vec<_>>());
            assert_eq!(s.counters().fallback_tasks, 32);
        }
    }
}

#[test]
fn static_takes_its_speeds_from_trained_models_without_a_probe() {
    // The book knows codelet 7 on both workers (3 s and 1 s a task): the
    // epoch is split 1/4 and 3/4 as with the speeds given by name.
    let mut s = sched("static", 2);
    let mut book = ModelBook::default();
    for _ in 0..crate::taskmode::placement::TRAIN_SAMPLES {
        book.record_now(0, 7, 10.0, 3.0);
        book.record_now(1, 7, 10.0, 1.0);
    }
    for i in 0..16 {
        s.push(task(i, 7), 0.0, &book, &never_idle());
    }
    let ran = run(&mut s, &mut book, &[3.0, 1.0]);
    assert_eq!(ran[0], (0..4).collect::<Vec<_>>());
    assert_eq!(ran[1], (4..16).collect::<Vec<_>>());
    // Untrained for another codelet: a probe task each first (two blocks
    // for the slower worker).
    let mut s = sched("static", 2);
    for i in 0..16 {
        s.push(task(i, 8), 0.0, &book, &never_idle());
    }
    let ran = run(&mut s, &mut book, &[3.0, 1.0]);
    assert_exactly_once(&ran, 16);
    assert_eq!(ran[0][0], 0, "worker 0's probe: {ran:?}");
    assert_eq!(ran[1][0], 1, "worker 1's probe: {ran:?}");
}

#[test]
fn every_registered_balancer_runs_every_task_exactly_once() {
    for e in registry::REGISTRY {
        for secs in [[0.01, 0.03], [0.05, 0.01]] {
            let mut s = sched(e.name, 2);
            let mut book = ModelBook::default();
            // Two batches of different codelets, a stray task, and tasks
            // only worker 1 can run.
            let mut n = 0;
            for c in [3, 4] {
                for _ in 0..40 {
                    s.push(task(n, c), 0.0, &book, &never_idle());
                    n += 1;
                }
            }
            s.push(task(n, 0), 0.0, &book, &never_idle());
            n += 1;
            for _ in 0..3 {
                let mut t = task(n, 9);
                t.mask = 0b10;
                s.push(t, 0.0, &book, &never_idle());
                n += 1;
            }
            let ran = run(&mut s, &mut book, &secs);
            assert_exactly_once(&ran, n);
            assert!(
                ran[0].iter().all(|&id| id < n - 3),
                "{}: worker 0 ran a task it cannot run",
                e.name
            );
            assert!(s.counters().epochs >= 2, "{}: {:?}", e.name, s.counters());
        }
    }
}

#[test]
fn a_faster_worker_gets_more_of_an_epoch_under_plb_hac() {
    let mut s = sched("plb-hac", 2);
    let mut book = ModelBook::default();
    for i in 0..2000 {
        s.push(task(i, 5), 0.0, &book, &never_idle());
    }
    let ran = run(&mut s, &mut book, &[0.001, 0.003]);
    assert_exactly_once(&ran, 2000);
    assert!(
        ran[0].len() > 2 * ran[1].len(),
        "fast {} slow {}",
        ran[0].len(),
        ran[1].len()
    );
}

#[test]
fn the_balancer_runs_outside_the_callers_critical_section() {
    let mut s = sched("plb-hac", 2);
    let book = ModelBook::default();
    for i in 0..64 {
        s.push(task(i, 5), 0.0, &book, &never_idle());
    }
    // Worker 0's pop forms the epoch and hands out a consult to run.
    let Pop::Consult(mut c) = s.pop(0, 0.0, &book) else {
        panic!("expected a consult")
    };
    // Meanwhile worker 1 asks: the balancer is out, nothing to take yet,
    // but it must not sleep (the epoch may still give it work).
    assert!(matches!(s.pop(1, 0.0, &book), Pop::Nothing { idle: false }));
    c.run();
    let Pop::Task(t) = s.resume(c, 0, 0.0, &book) else {
        panic!("worker 0 gets its first task after the consult")
    };
    assert!(t.ticket.is_some());
    // Both workers got a block (PLB-HAC's training): worker 1 is notified.
    assert_eq!(s.take_notified(), vec![0, 1]);
    assert!(matches!(s.pop(1, 0.0, &book), Pop::Task(_)));
}

#[test]
fn removing_a_worker_dissolves_its_epochs_onto_the_others() {
    let mut s = sched("hdss", 3);
    let mut book = ModelBook::default();
    for i in 0..60 {
        s.push(task(i, 2), 0.0, &book, &never_idle());
    }
    let first = s.pop_now(0, 0.0, &book).expect("a task");
    s.remove_workers(&[2], &book);
    assert!(s.counters().dissolved_tasks > 0);
    let mut ran = run(&mut s, &mut book, &[0.01, 0.02]);
    ran[0].push(first.task.id);
    assert_exactly_once(&ran, 60);
}

#[test]
fn push_wakes_one_idle_capable_worker() {
    let mut s = sched("acosta", 3);
    let book = ModelBook::default();
    let sleepers = Sleepers::new(8, false);
    sleepers.fell_idle(1, true);
    sleepers.fell_idle(2, true);
    // No codelet: placed round-robin (worker 0 first), which is busy, so
    // one idle capable worker is woken instead (and no longer idle).
    assert_eq!(s.push(task(0, 0), 0.0, &book, &sleepers), vec![1]);
    assert!(!sleepers.is_idle(1) && sleepers.is_idle(2));
    let mut only_2 = task(1, 0);
    only_2.mask = 0b100;
    assert_eq!(s.push(only_2, 0.0, &book, &sleepers), vec![2]);
    assert!(!sleepers.is_idle(2));
}

#[test]
fn tasks_nobody_can_run_are_kept_and_drained() {
    let mut s = sched("plb-hec", 2);
    let book = ModelBook::default();
    let mut t = task(0, 0);
    t.mask = 0b1000;
    s.push(t.clone(), 0.0, &book, &never_idle());
    for i in 1..20 {
        s.push(task(i, 4), 0.0, &book, &never_idle());
    }
    assert!(s.pop_now(0, 0.0, &book).is_some());
    let left = s.drain();
    assert_eq!(left.len(), 19);
    assert!(left.contains(&t));
    assert_eq!(s.held(), 0);
}

/// Pops on `worker` alone until the scheduler holds nothing (each task
/// taking `secs`); returns the ids it ran. Panics if it stops getting tasks.
fn drain_on(s: &mut Scheduler<Fake>, book: &mut ModelBook, worker: usize, secs: f64) -> Vec<usize> {
    let mut ran = Vec::new();
    let mut now = 1.0;
    for _ in 0..100_000 {
        if s.held() == 0 {
            return ran;
        }
        match s.pop_now(worker, now, book) {
            Some(t) => {
                now += secs;
                ran.push(t.task.id);
                book.record_now(worker, t.codelet, t.units, secs);
                if let Some(ticket) = t.ticket {
                    s.task_done(ticket, secs, now, book);
                }
            }
            None => now += 2.0 * STAGING_QUIET_S,
        }
    }
    panic!(
        "worker {worker} stopped getting tasks with {} held (ran {ran:?})",
        s.held()
    );
}

/// StarPU 1.4's sched_ctx_remove: a context's tasks are queued, then one of
/// its two workers is removed; the other must run everything left.
#[test]
fn the_remaining_worker_runs_what_a_removed_one_left() {
    for name in registry::names().filter(|n| *n != "greedy") {
        for popped_before in [None, Some(0), Some(1)] {
            let mut s = sched(name, 2);
            let mut book = ModelBook::default();
            for i in 0..32 {
                s.push(task(i, 5), 0.0, &book, &never_idle());
            }
            let mut ran = Vec::new();
            if let Some(w) = popped_before {
                ran.extend(s.pop_now(w, 0.0, &book).map(|t| t.task.id));
            }
            s.remove_workers(&[0], &book);
            ran.extend(drain_on(&mut s, &mut book, 1, 0.01));
            ran.sort_unstable();
            assert_eq!(
                ran,
                (0..32).collect::<Vec<_>>(),
                "{name}, popped before: {popped_before:?}"
            );
        }
    }
}

/// An idle slow worker does not steal what a busy fast one will finish
/// sooner (trained models on both sides; before, it took the oldest task).
#[test]
fn an_idle_worker_steals_only_what_it_would_finish_first() {
    let mut book = ModelBook::default();
    for _ in 0..4 {
        book.record_now(0, 3, 10.0, 0.001);
        book.record_now(1, 3, 10.0, 0.030);
    }
    let mut s = sched("plb-hac", 2);
    for i in 0..3 {
        s.push(task(i, 3), 0.0, &book, &never_idle());
    }
    // The small batch is placed on the fast worker (finishes 1, 2, 3 ms
    // against 30 ms); the slow one, idle, finds nothing worth taking.
    assert!(s.pop_now(1, 1.0, &book).is_none());
    let mut fast = Vec::new();
    while let Some(t) = s.pop_now(0, 1.0, &book) {
        fast.push(t.task.id);
    }
    assert_eq!(fast, [0, 1, 2]);
}

/// Reserving pushes (the adapter prefetches between placement and
/// queueing): the placed task is invisible to pops until committed, its
/// prediction already counts in the worker's backlog, and what the caller
/// never takes is queued by the next call.
#[test]
fn reserved_placements_book_the_backlog_and_queue_on_commit() {
    let mut book = ModelBook::default();
    for _ in 0..4 {
        book.record_now(0, 0, 10.0, 1.0);
        book.record_now(1, 0, 10.0, 1.5);
    }
    let mut s = sched("plb-hac", 2);
    s.set_reserving(true);
    // No codelet: placed at push by the fallback rule.
    s.push(task(0, 0), 0.0, &book, &never_idle());
    let first = s.take_reserved();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].worker(), first[0].task().id), (0, 0));
    assert_eq!(s.held(), 1, "a reserved task is still held");
    // Worker 0's booked 1 s makes worker 1 (1.5 s) finish the next one first.
    s.push(task(1, 0), 0.0, &book, &never_idle());
    let second = s.take_reserved();
    assert_eq!(second[0].worker(), 1);
    // Not poppable before its commit.
    assert!(s.pop_now(1, 0.0, &book).is_none());
    s.commit(second, &book);
    assert_eq!(s.take_notified(), vec![1]);
    assert_eq!(s.pop_now(1, 0.0, &book).map(|t| t.task.id), Some(1));
    s.commit(first, &book);
    // A push whose reservation the caller leaves is queued by the next pop.
    s.push(task(2, 0), 0.0, &book, &never_idle());
    let mut ran: Vec<usize> = std::iter::from_fn(|| s.pop_now(0, 0.0, &book))
        .map(|t| t.task.id)
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, vec![0, 2]);
    assert_eq!(s.held(), 0);
}

/// Without reserving, pushes queue at once (the adapter's default when
/// StarPU has one memory node or prefetching is off).
#[test]
fn pushes_queue_at_once_unless_reserving() {
    let book = ModelBook::default();
    let mut s = sched("plb-hac", 1);
    s.push(task(0, 0), 0.0, &book, &never_idle());
    assert!(s.take_reserved().is_empty());
    assert_eq!(s.pop_now(0, 0.0, &book).map(|t| t.task.id), Some(0));
}

/// A high-priority task waits only for the queued work of its priority or
/// higher (as `dmdas`' per-priority expected length).
#[test]
fn placement_counts_only_the_backlog_ahead_of_the_tasks_priority() {
    let mut book = ModelBook::default();
    for _ in 0..4 {
        book.record_now(0, 0, 10.0, 1.0);
        book.record_now(1, 0, 10.0, 3.0);
    }
    let mut s = sched("plb-hac", 2);
    // Four low-priority tasks only worker 0 can run: 4 s queued there,
    // worker 1 empty.
    for i in 0..4 {
        let low = Fake {
            mask: 0b01,
            ..task(i, 0)
        };
        s.push(low, 0.0, &book, &never_idle());
    }
    // The urgent task finishes at 1 s on worker 0 (ahead of the queue)
    // against 3 s on worker 1; counting the whole backlog would say 5 s.
    let urgent = Fake {
        priority: 5,
        ..task(9, 0)
    };
    s.push(urgent, 0.0, &book, &never_idle());
    assert!(s.pop_now(1, 0.0, &book).is_none(), "nothing for worker 1");
    let first = s.pop_now(0, 0.0, &book).expect("a task");
    assert_eq!(first.task.id, 9);
}

/// A batch too small for PLB-HeC's training (1+2+4+8 tasks per worker: 30
/// on two) forms no epoch: its tasks go by the fallback rule, every one
/// exactly once. 30 tasks do form one.
#[test]
fn no_epoch_smaller_than_the_balancers_training() {
    for (n, epochs) in [(16, 0), (30, 1)] {
        let mut s = sched("plb-hec", 2);
        let mut book = ModelBook::default();
        for i in 0..n {
            s.push(task(i, 7), 0.0, &book, &never_idle());
        }
        let ran = run(&mut s, &mut book, &[1.0, 4.0]);
        assert_exactly_once(&ran, n);
        assert_eq!(s.counters().epochs, epochs, "{n} tasks");
    }
}

/// The next batch of the same codelet on the same workers continues from
/// the last epoch's balancer: no second training, so it ends sooner than
/// the first batch of the same size did.
#[test]
fn a_second_batch_continues_from_the_first_epochs_balancer() {
    for name in ["plb-hec", "acosta", "plb-hac"] {
        let mut s = sched(name, 2);
        let mut book = ModelBook::default();
        let secs = [0.001, 0.004];
        let batch = |s: &mut Scheduler<Fake>, book: &ModelBook, from: usize, now: f64| {
            for i in from..from + 600 {
                s.push(task(i, 5), now, book, &never_idle());
            }
        };
        batch(&mut s, &book, 0, 0.0);
        let (ran1, end1) = run_from(&mut s, &mut book, &secs, 0.0);
        assert_eq!(s.counters().carried_epochs, 0, "{name}");
        batch(&mut s, &book, 600, end1);
        let (ran2, end2) = run_from(&mut s, &mut book, &secs, end1);
        let c = s.counters();
        assert_eq!((c.epochs, c.carried_epochs), (2, 1), "{name}: {c:?}");
        let ran: Vec<Vec<usize>> = (0..2)
            .map(|w| ran1[w].iter().chain(&ran2[w]).copied().collect())
            .collect();
        assert_exactly_once(&ran, 1200);
        // The first batch pays the training (PLB-HeC) or the probe
        // (Acosta); the second is balanced from its first block: it ends
        // at the optimum, 600 tasks at 1000 + 250 tasks/s.
        let second = end2 - end1;
        let optimum = 600.0 / 1250.0;
        assert!(
            second <= end1 + 1e-9 && second <= optimum + 0.004 + 1e-9,
            "{name}: second batch {second:.4} s, first {end1:.4} s"
        );
        // Another codelet trains afresh.
        for i in 1200..1800 {
            s.push(task(i, 6), end2, &book, &never_idle());
        }
        run_from(&mut s, &mut book, &secs, end2);
        assert_eq!(s.counters().carried_epochs, 1, "{name}");
    }
}

/// After [`COSTLY_EPOCHS`] epochs in a row whose consults took more than
/// [`MAX_BALANCING_SHARE`] of their tasks' time, the next batch of that
/// codelet and size is placed by the fallback rule (every task still
/// once), while a batch of another codelet still forms an epoch. With
/// cheap consults every batch forms an epoch; one costly epoch between
/// cheap ones stops nothing.
#[test]
fn epochs_whose_consults_cost_too_much_are_not_repeated() {
    let secs = [0.001, 0.004];
    // Per consult: nothing, or 10 % of the fast worker's task time
    // (PLB-HAC consults about once per block of a few tasks); per batch
    // of codelet 5, then a batch of codelet 6. Expected: epochs, tasks
    // placed by the fallback rule for the cost.
    let cheap = 0.0;
    let costly = 0.0001;
    for (consults, epochs, unbalanced) in [
        (vec![cheap, cheap, cheap], 4, 0),
        (vec![costly, costly, costly], 3, 100),
        (vec![costly, cheap, costly], 4, 0),
    ] {
        let mut s = sched("plb-hac", 2);
        let mut book = ModelBook::default();
        let mut batches: Vec<(usize, usize, f64)> = consults.iter().map(|&c| (5, 100, c)).collect();
        batches.push((6, 100, cheap));
        let ran = run_batches(&mut s, &mut book, &secs, &batches);
        let c = s.counters();
        assert_eq!(
            (c.epochs, c.unbalanced_tasks),
            (epochs, unbalanced),
            "consults {consults:?}: {c:?}"
        );
        assert_exactly_once(&ran, 400);
    }
}

/// A worker that waits at an epoch's synchronisation point (Acosta waits
/// for every probe) and can take nothing from the epoch (the only other
/// worker runs its probe and has no model yet, so its pace is unknown)
/// runs a task staged for the next epoch of the same codelet rather than
/// idle; the rest stays staged.
#[test]
fn a_worker_waiting_on_an_epoch_runs_a_staged_task() {
    let mut s = sched("acosta", 2);
    let mut book = ModelBook::default();
    for i in 0..16 {
        s.push(task(i, 5), 0.0, &book, &never_idle());
    }
    let a = s.pop_now(0, 0.0, &book).expect("worker 0's probe");
    let b = s.pop_now(1, 0.0, &book).expect("worker 1's probe");
    assert!(a.ticket.is_some() && b.ticket.is_some());
    // The next batch arrives while the probes run: staged (an epoch of
    // its codelet still hands tasks out).
    for i in 16..32 {
        s.push(task(i, 5), 0.001, &book, &never_idle());
    }
    assert_eq!(s.counters().epochs, 1);
    // Worker 0 ends its probe; Acosta waits for worker 1's.
    book.record_now(0, a.codelet, a.units, 0.002);
    s.task_done(a.ticket.expect("a ticket"), 0.002, 0.002, &book);
    let t = s.pop_now(0, 0.002, &book).expect("a staged task");
    assert!(t.ticket.is_none() && t.task.id >= 16, "{}", t.task.id);
    let c = s.counters();
    assert_eq!((c.staged_tasks, c.epochs), (1, 1), "{c:?}");
}

/// A worker a balancer leaves out takes the last task the epoch has not
/// given out when it finishes it before the others would start it:
/// StarPU's `sgemm` few-task case (2 batches of 16 tasks, one worker
/// 4.5x slower), where Acosta's iterations of one or two tasks round the
/// slow worker's share to nothing. The best split gives it 6 of the 32;
/// every task still runs once.
#[test]
fn a_worker_left_out_takes_the_epochs_last_task() {
    let mut s = sched("acosta", 2);
    let mut book = ModelBook::default();
    let secs = [0.036, 0.008];
    let ran = run_batches(&mut s, &mut book, &secs, &[(5, 16, 0.0), (5, 16, 0.0)]);
    assert_exactly_once(&ran, 32);
    assert!(ran[0].len() >= 4, "slow worker ran {:?}", ran[0]);
    assert!(s.counters().tail_steals > 0, "{:?}", s.counters());
}

/// An epoch whose consults cost more than [`RUNAWAY_FACTOR`] times the
/// limit of its whole projected work is dissolved at once (its tasks go to
/// the fallback rule) and stops its codelet's next batches; every task
/// still runs once.
#[test]
fn an_epoch_whose_consults_run_away_is_dissolved() {
    let secs = [0.001, 0.004];
    let mut s = sched("plb-hac", 2);
    let mut book = ModelBook::default();
    // Each consult takes as long as ten of the fast worker's tasks.
    let ran = run_batches(&mut s, &mut book, &secs, &[(5, 100, 0.01), (5, 100, 0.01)]);
    assert_exactly_once(&ran, 200);
    let c = s.counters();
    assert_eq!(c.epochs, 1, "{c:?}");
    assert!(c.dissolved_tasks > 0, "{c:?}");
    assert_eq!(c.unbalanced_tasks, c.dissolved_tasks + 100, "{c:?}");
}
