//! Concurrency of the task-side schedulers, explored: every interleaving a
//! seeded random scheduler reaches of a submitting thread, several workers
//! and a context change, over task mode (every registry balancer) and the
//! task-graph policies, with workers that sleep after an empty pop as
//! StarPU's blocking drivers do ([`explorer`] says what is run and
//! checked).

mod explorer;
mod graph;
mod task_mode;

use plb_core::balance::Tuning;
use plb_core::balance::registry::BalancerSpec;
use plb_core::dag::Method;
use plb_core::taskmode::{CONSULTS_PER_POP, TaskModeCounters};

use explorer::{explore, explore_long, explore_released, explore_reporting_all};
use graph::{Graph, OwnLine};
use plb_core::dag::cpu_order::CpuOrder;
use plb_core::dag::graph::Window;
use plb_core::dag::line_order::LineOrder;
use task_mode::{Protocol, TaskMode};

/// Every interleaving reached, on every balancer task mode runs, loses no
/// task and no worker.
#[test]
fn task_mode_loses_no_task_and_no_worker() {
    for balancer in plb_core::balance::registry::names() {
        let make = |plan: &explorer::Plan| TaskMode::new(plan, balancer, Protocol::Current);
        match explore(make, 0..300) {
            Err((seed, e, log)) => panic!("{balancer}, seed {seed}: {e}\nlast actions: {log:#?}"),
            Ok((actions, sides)) => {
                let mut c = TaskModeCounters::default();
                sides.iter().for_each(|s| c.add(&s.sched.counters()));
                let own: u64 = sides.iter().map(|s| s.own_pops).sum();
                let locked: u64 = sides.iter().map(|s| s.locked_pops).sum();
                eprintln!(
                    "{balancer}: {actions} actions, {c:?}, {own} own-queue pops, \
                     {locked} locked pops"
                );
                // Pops take both paths: the own queue alone (between any
                // two actions under the scheduler's lock) and the steps.
                assert!(own > 500 && locked > 1000, "{balancer}: {own}, {locked}");
                // The exploration reaches every path a task takes. A
                // balancer with a training phase (PLB-HeC: 15 tasks per
                // worker) forms epochs only of the scenarios' longer runs:
                // fewer, and none stalls into dissolution there.
                let spec = BalancerSpec::parse(balancer).expect("registered");
                if spec.training_units_per_pu(&Tuning::default()) > 0 {
                    // Its epochs need at least 2 capable workers (a codelet
                    // one worker runs forms none) and 15 tasks each: the
                    // long runs' scenarios reach them too (15 epochs of 472
                    // tasks over both sets when this was written).
                    let (_, long) = explore_long(make, 0..300).unwrap_or_else(|(seed, e, log)| {
                        panic!("{balancer}, long runs, seed {seed}: {e}\nlast actions: {log:#?}")
                    });
                    long.iter().for_each(|s| c.add(&s.sched.counters()));
                    assert!(c.epochs > 10 && c.epoch_tasks > 300, "{balancer}: {c:?}");
                    assert!(c.fallback_tasks + own > 1000, "{balancer}: {c:?}");
                } else {
                    assert!(c.epochs > 50 && c.epoch_tasks > 1000, "{balancer}: {c:?}");
                    assert!(
                        c.fallback_tasks + own > 1000 && c.dissolved_tasks > 0,
                        "{balancer}: {c:?}"
                    );
                }
            }
        }
    }
}

/// The same for the task-graph policies' scheduler (batches placed
/// without the lock by HEFT and DADA).
#[test]
fn task_graph_policies_lose_no_task_and_no_worker() {
    // Lines bounded to 2 tasks on the accelerator and 1 on a CPU worker:
    // tasks are held for room often.
    let small = Some(Window {
        accelerator: 2,
        cpu: 1,
    });
    // (method, window, ranked: batches with ranks, codelets of unlike
    // speedups, so that HEFT's CPU offload acts; the accelerator's line
    // then by latest start when `latest`)
    let methods = [
        (Method::Heft, None, false, false),
        (Method::Heft, small, false, false),
        (Method::Heft, None, true, false),
        (Method::Heft, small, true, true),
        (
            Method::Dada {
                alpha: 0.5,
                eps: 0.05,
                cp: false,
            },
            None,
            false,
            false,
        ),
        (
            Method::Dada {
                alpha: 0.5,
                eps: 0.05,
                cp: true,
            },
            None,
            false,
            false,
        ),
    ];
    for (method, window, ranked, latest) in methods {
        let make = |plan: &explorer::Plan| {
            let g = Graph::new(plan, method, OwnLine::Current, window);
            let g = if ranked { g.ranked() } else { g };
            if latest {
                g.line_order(LineOrder::LatestStart)
            } else {
                g
            }
        };
        match explore(make, 0..300) {
            Err((seed, e, log)) => {
                panic!("{method:?} {window:?}, seed {seed}: {e}\nlast actions: {log:#?}")
            }
            Ok((actions, sides)) => {
                let deferrals: u64 = sides.iter().map(|s| s.sched.deferrals()).sum();
                let held: u64 = sides.iter().map(|s| s.sched.held_for_room()).sum();
                let own: u64 = sides.iter().map(|s| s.own_pops).sum();
                let locked: u64 = sides.iter().map(|s| s.locked_pops).sum();
                let offloaded: usize = sides.iter().map(|s| s.offloaded).sum();
                eprintln!(
                    "{method:?} {window:?} ranked {ranked} latest {latest}: {actions} actions, {deferrals} deferrals, \
                     {held} held for room, {own} own-line pops, {locked} locked pops, \
                     {offloaded} offloaded"
                );
                // The CPU offload acts exactly where tasks have a slack.
                assert_eq!(
                    offloaded > 0,
                    ranked,
                    "{method:?} ranked {ranked}: {offloaded}"
                );
                // With a window, tasks are held for room (and only then).
                assert_eq!(held > 0, window.is_some(), "{method:?} {window:?}: {held}");
                // Tasks held back for a kind's first sample are reached,
                // and pops take both paths (the own line alone, between
                // any two actions under the scheduler's lock; the steps).
                assert!(deferrals > 0, "{method:?}: no task was deferred");
                assert!(own > 1000 && locked > 1000, "{method:?}: {own}, {locked}");
            }
        }
    }
}

/// Workers push the tasks their tasks' ends made ready (a chain, as
/// StarPU's `tasks_overhead`): among CPU workers alone a member pushing
/// wakes nobody and places them at its next pop
/// ([`plb_core::dag::graph::GraphSched::push_from`]); with an accelerator
/// in the context, and from a worker that left it, a push wakes one as the
/// submitter's does. No task or worker is lost, task mode included.
#[test]
fn worker_pushes_lose_no_task_and_no_worker() {
    let small = Some(Window {
        accelerator: 2,
        cpu: 1,
    });
    let dada = Method::Dada {
        alpha: 0.5,
        eps: 0.05,
        cp: false,
    };
    // (method, window, accelerator, order of a context of CPU workers
    // alone: arrival order, priorities ignored, as `PLB_CPU_ORDER`'s)
    let cases = [
        (Method::Heft, None, true, CpuOrder::Priority),
        (Method::Heft, None, false, CpuOrder::Priority),
        (Method::Heft, None, false, CpuOrder::Arrival),
        (Method::Heft, small, false, CpuOrder::Arrival),
        (Method::Heft, small, true, CpuOrder::Priority),
        (dada, None, true, CpuOrder::Priority),
        (dada, None, false, CpuOrder::Priority),
        (dada, None, false, CpuOrder::Arrival),
    ];
    for (method, window, accelerator, order) in cases {
        let make = |plan: &explorer::Plan| {
            Graph::with_accelerator(plan, method, OwnLine::Current, window, accelerator)
                .cpu_order(order)
        };
        match explore_released(make, 0..300) {
            Err((seed, e, log)) => panic!(
                "{method:?} {window:?} accelerator {accelerator} {order:?}, seed {seed}: {e}\nlast actions: {log:#?}"
            ),
            Ok((actions, sides)) => {
                let pushes: u64 = sides.iter().map(|s| s.worker_pushes).sum();
                let unwoken: u64 = sides.iter().map(|s| s.unwoken_pushes).sum();
                eprintln!(
                    "{method:?} {window:?} accelerator {accelerator} {order:?}: {actions} actions, \
                     {pushes} worker pushes, {unwoken} among CPU workers alone"
                );
                assert!(
                    pushes > 1000,
                    "{method:?} {window:?}: {pushes} worker pushes"
                );
                // Among CPU workers alone, and only there, a member's push
                // may wake nobody.
                assert_eq!(unwoken == pushes, !accelerator, "{unwoken} of {pushes}");
            }
        }
    }
    for balancer in ["plb-hac", "dynamic"] {
        let make = |plan: &explorer::Plan| TaskMode::new(plan, balancer, Protocol::Current);
        if let Err((seed, e, log)) = explore_released(make, 0..300) {
            panic!("{balancer}, seed {seed}: {e}\nlast actions: {log:#?}");
        }
    }
}

/// The harness has teeth: the pop protocol the adapter ran before (a pop
/// that stopped after its consult bound returned no task, left its worker
/// unmarked and did not wake it) is caught leaving a worker asleep.
#[test]
fn finds_the_lost_wakeup_of_the_old_consult_bound() {
    let make = |plan: &explorer::Plan| {
        TaskMode::new(
            plan,
            "dynamic",
            Protocol::Legacy {
                bound: CONSULTS_PER_POP,
            },
        )
    };
    // Every report delivered: the failure found is the consult bound's,
    // not one of a lost report.
    let (seed, e, _) = explore_reporting_all(make, 0..400)
        .err()
        .expect("the legacy protocol's lost wake-up was not found");
    assert!(
        e.contains("sleeps without its idle flag"),
        "seed {seed}: {e}"
    );
    eprintln!("legacy protocol, seed {seed}: {e}");
}

/// The same teeth for the per-worker lines: a pop that tried its own line
/// whatever was due, and went to sleep on an empty line without the
/// scheduler's lock, is caught (ready tasks left with every worker
/// asleep).
#[test]
fn finds_a_careless_own_line_pop() {
    let make = |plan: &explorer::Plan| Graph::new(plan, Method::Heft, OwnLine::Careless, None);
    let (seed, e, _) = explore(make, 0..300)
        .err()
        .expect("a pop sleeping on its empty line was not caught");
    eprintln!("careless own-line pop, seed {seed}: {e}");
}

/// And for task mode's own-queue pop: tried whatever is due (epochs
/// alive, reports to deliver), asleep on an empty queue without the
/// scheduler's lock, it is caught.
#[test]
fn finds_a_careless_own_queue_pop() {
    let make = |plan: &explorer::Plan| TaskMode::new(plan, "plb-hac", Protocol::CarelessOwnQueue);
    let (seed, e, _) = explore(make, 0..300)
        .err()
        .expect("a pop sleeping on its empty queue was not caught");
    eprintln!("careless own-queue pop, seed {seed}: {e}");
}
