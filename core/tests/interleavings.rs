//! Task mode's concurrency, explored: a seeded interleaving scheduler runs
//! a submitting thread, several workers and (optionally) a context change
//! over the task-mode scheduler, one atomic action at a time, in the order a
//! seeded random choice picks. Every action is what the StarPU adapter does
//! under its lock or between two holds of it: a push, a locked step of a
//! pop ([`Scheduler::pop_step`], the very code the adapter runs), a
//! balancer consult run without the lock, the wakes applied after
//! unlocking, a task's execution and post-execution hook.
//!
//! Workers behave as StarPU's blocking drivers (its SimGrid mode): a pop
//! that returns no task puts the worker to sleep unless a wake reached it
//! while it was popping (StarPU's `keep_awake`); a wake of a sleeping
//! worker makes it pop; a wake of a worker running a task is ignored.
//!
//! Checked after every action: no worker sleeps without its idle flag set
//! or a wake on its way (nothing else can ever wake it); every worker's
//! expected end is finite and not before now. Checked when nothing can
//! move any more: every task ran exactly once and the scheduler holds
//! none (a task left with every worker asleep is a lost wake-up).

use plb_core::balance::registry::BalancerSpec;
use plb_core::balance::{Tuning, WorkerKind};
use plb_core::rng::Rng;
use plb_core::sleepers::Sleepers;
use plb_core::taskmode::placement::ModelBook;
use plb_core::taskmode::{
    CONSULTS_PER_POP, EpochConsult, Finished, PopRound, PopStep, SchedTask, Scheduler, Taken,
    TaskModeCounters,
};

#[derive(Debug, Clone)]
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

/// How a pop's locked steps are taken: today's protocol, or a copy of the
/// one the adapter ran before (kept to show the harness finds its lost
/// wake-up).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Protocol {
    Current,
    /// The old adapter loop: after `bound` consults it handed the consult
    /// back and returned no task, without marking the worker idle or
    /// waking it.
    Legacy {
        bound: usize,
    },
}

/// What happens after a worker applies its wakes.
enum Then {
    Run(Taken<Fake>),
    /// Sleep, unless a wake reached the worker meanwhile.
    Settle,
}

enum Worker {
    Asleep,
    /// Next: a locked pop step (`back`: the consult it ran).
    Popping {
        round: PopRound,
        back: Option<EpochConsult>,
        first: bool,
        /// Consults run in this pop (the legacy loop's count).
        consults: usize,
    },
    /// Next: run the consult without the lock.
    Consulting {
        round: PopRound,
        consult: EpochConsult,
        consults: usize,
    },
    /// Next: wake these workers (after unlocking), then `then`.
    Waking {
        wake: Vec<usize>,
        then: Then,
    },
    /// Next: `left` more actions of execution, then the post-exec hook.
    Running {
        task: Taken<Fake>,
        left: u32,
    },
    /// Removed from the context and done with its last task.
    Gone,
}

enum Submitter {
    Pushing,
    Committing(Vec<plb_core::taskmode::Reserved<Fake>>),
    Waking(Vec<usize>),
}

struct Sim {
    sched: Scheduler<Fake>,
    book: ModelBook,
    sleepers: Sleepers,
    workers: Vec<Worker>,
    /// Per worker: a wake reached it while it was popping.
    keep_awake: Vec<bool>,
    removed: Vec<bool>,
    /// Per worker: steps one task takes there.
    speed: Vec<u32>,
    mailbox: Vec<Vec<Finished>>,
    tasks: Vec<Fake>,
    next: usize,
    submitter: Submitter,
    /// Remove this worker after this many pushes.
    removal: Option<(usize, usize)>,
    ran: Vec<u32>,
    now: f64,
    protocol: Protocol,
    log: Vec<String>,
}

impl Sim {
    fn new(seed: u64, balancer: &str, protocol: Protocol) -> Sim {
        let mut rng = Rng::new(seed);
        let n = 2 + rng.below(3) as usize; // 2..=4 workers
        let mut sched =
            Scheduler::new(BalancerSpec::parse(balancer).unwrap(), Tuning::default(), 8);
        // Worker 0 is an accelerator (fast, runs most codelets), the others CPUs.
        let kinds: Vec<(usize, WorkerKind)> = (0..n)
            .map(|w| {
                (
                    w,
                    if w == 0 {
                        WorkerKind::Cuda
                    } else {
                        WorkerKind::Cpu
                    },
                )
            })
            .collect();
        sched.add_workers(&kinds);
        sched.set_reserving(rng.below(2) == 0);
        let speed: Vec<u32> = (0..n)
            .map(|w| if w == 0 { 1 } else { 2 + rng.below(4) as u32 })
            .collect();
        let all = (1u64 << n) - 1;
        // Runs of like tasks (epochs), mixed ones, restricted ones.
        let mut tasks = Vec::new();
        let total = 30 + rng.below(80) as usize;
        while tasks.len() < total {
            let run = if rng.below(2) == 0 {
                12 + rng.below(30) as usize
            } else {
                1 + rng.below(6) as usize
            };
            let codelet = rng.below(4) as usize; // 0: no codelet
            let units = [10.0, 10.0, 40.0][rng.below(3) as usize];
            let mask = match rng.below(6) {
                0 => 1,        // accelerator only
                1 => all & !1, // CPUs only
                _ => all,
            };
            for _ in 0..run {
                tasks.push(Fake {
                    id: tasks.len(),
                    codelet,
                    units,
                    mask,
                    priority: rng.below(3) as i32,
                });
            }
        }
        tasks.truncate(total);
        let removal = (n > 2 && rng.below(3) == 0).then(|| {
            (
                1 + rng.below(n as u64 - 1) as usize,
                rng.below(total as u64) as usize,
            )
        });
        Sim {
            sched,
            book: ModelBook::default(),
            sleepers: Sleepers::new(8, true),
            workers: (0..n)
                .map(|_| Worker::Popping {
                    round: PopRound::default(),
                    back: None,
                    first: true,
                    consults: 0,
                })
                .collect(),
            keep_awake: vec![false; n],
            removed: vec![false; n],
            speed,
            mailbox: vec![Vec::new(); n],
            ran: vec![0; tasks.len()],
            tasks,
            next: 0,
            submitter: Submitter::Pushing,
            removal,
            now: 0.0,
            protocol,
            log: Vec::new(),
        }
    }

    fn runnable(&self) -> Vec<usize> {
        // Actor 0: the submitter; actor w + 1: worker w.
        let mut v = Vec::new();
        let submitting =
            !matches!(self.submitter, Submitter::Pushing) || self.next < self.tasks.len();
        if submitting {
            v.push(0);
        }
        for (w, s) in self.workers.iter().enumerate() {
            if !matches!(s, Worker::Asleep | Worker::Gone) {
                v.push(w + 1);
            }
        }
        v
    }

    fn wake(&mut self, w: usize) {
        match self.workers[w] {
            Worker::Asleep if !self.removed[w] => {
                self.workers[w] = Worker::Popping {
                    round: PopRound::default(),
                    back: None,
                    first: true,
                    consults: 0,
                };
            }
            Worker::Popping { .. } | Worker::Consulting { .. } | Worker::Waking { .. } => {
                self.keep_awake[w] = true;
            }
            _ => {}
        }
    }

    fn step_submitter(&mut self) {
        match std::mem::replace(&mut self.submitter, Submitter::Pushing) {
            Submitter::Pushing => {
                let t = self.tasks[self.next].clone();
                self.next += 1;
                self.log.push(format!("push {}", t.id));
                let wake = self.sched.push(t, self.now, &self.book, &self.sleepers);
                let reserved = self.sched.take_reserved();
                self.log
                    .push(format!("  wakes {wake:?}, reserved {}", reserved.len()));
                if let Some((w, after)) = self.removal
                    && after < self.next
                {
                    // The context loses a worker (here, between two pushes).
                    self.removal = None;
                    self.removed[w] = true;
                    self.log.push(format!("remove {w}"));
                    let mut more =
                        self.sched
                            .remove_workers_waking(&[w], &self.book, &self.sleepers);
                    more.extend(wake);
                    self.submitter = if reserved.is_empty() {
                        Submitter::Waking(more)
                    } else {
                        self.pending_wakes_then_commit(more, reserved)
                    };
                    return;
                }
                self.submitter = if reserved.is_empty() {
                    Submitter::Waking(wake)
                } else {
                    self.pending_wakes_then_commit(wake, reserved)
                };
            }
            Submitter::Committing(reserved) => {
                let wake = self
                    .sched
                    .commit_waking(reserved, &self.book, &self.sleepers);
                self.submitter = Submitter::Waking(wake);
            }
            Submitter::Waking(wake) => {
                for w in wake {
                    self.wake(w);
                }
            }
        }
    }

    /// The adapter wakes after the commit, which follows the prefetch
    /// (unlocked): the push's wakes wait with the commit.
    fn pending_wakes_then_commit(
        &mut self,
        wake: Vec<usize>,
        reserved: Vec<plb_core::taskmode::Reserved<Fake>>,
    ) -> Submitter {
        for w in wake {
            self.wake(w);
        }
        Submitter::Committing(reserved)
    }

    fn pop_step(
        &mut self,
        w: usize,
        round: &mut PopRound,
        back: Option<EpochConsult>,
        consults: usize,
    ) -> PopStep<Fake> {
        match self.protocol {
            Protocol::Current => {
                self.sched
                    .pop_step(w, self.now, &self.book, &self.sleepers, round, back)
            }
            Protocol::Legacy { bound } => {
                // The old adapter's loop, step by step.
                let popped = match back {
                    None => self.sched.pop(w, self.now, &self.book),
                    Some(c) => {
                        if consults >= bound {
                            self.sched.hand_back(c, self.now, &self.book);
                            return PopStep::Empty(
                                self.sleepers.wake_list(self.sched.take_notified()),
                            );
                        }
                        self.sched.resume(c, w, self.now, &self.book)
                    }
                };
                match popped {
                    plb_core::taskmode::Pop::Task(t) => {
                        PopStep::Task(t, self.sleepers.wake_list(self.sched.take_notified()))
                    }
                    plb_core::taskmode::Pop::Consult(c) => PopStep::Consult(c),
                    plb_core::taskmode::Pop::Nothing { idle } => {
                        self.sleepers.fell_idle(w, idle);
                        PopStep::Empty(self.sleepers.wake_list(self.sched.take_notified()))
                    }
                }
            }
        }
    }

    fn step_worker(&mut self, w: usize) {
        match std::mem::replace(&mut self.workers[w], Worker::Asleep) {
            Worker::Asleep | Worker::Gone => unreachable!("not runnable"),
            Worker::Popping {
                mut round,
                back,
                first,
                consults,
            } => {
                if first {
                    let done = std::mem::take(&mut self.mailbox[w]);
                    for job in self.sched.deliver(w, done, &mut self.book) {
                        let fitted = job.run(self.book.fit_config());
                        self.book.install(fitted);
                    }
                }
                let step = self.pop_step(w, &mut round, back, consults);
                self.workers[w] = match step {
                    PopStep::Consult(consult) => Worker::Consulting {
                        round,
                        consult,
                        consults,
                    },
                    PopStep::Task(t, wake) => {
                        self.log.push(format!("w{w} pops {}", t.task.id));
                        Worker::Waking {
                            wake,
                            then: Then::Run(t),
                        }
                    }
                    PopStep::Empty(wake) => {
                        self.log.push(format!("w{w} pops nothing (wakes {wake:?})"));
                        Worker::Waking {
                            wake,
                            then: Then::Settle,
                        }
                    }
                };
            }
            Worker::Consulting {
                round,
                mut consult,
                consults,
            } => {
                consult.run();
                self.workers[w] = Worker::Popping {
                    round,
                    back: Some(consult),
                    first: false,
                    consults: consults + 1,
                };
            }
            Worker::Waking { wake, then } => {
                // The worker is still in its pop: these wakes (its own
                // included) keep it awake.
                self.workers[w] = Worker::Waking {
                    wake: Vec::new(),
                    then: Then::Settle,
                };
                for x in wake {
                    self.wake(x);
                }
                let keep = std::mem::take(&mut self.keep_awake[w]);
                self.workers[w] = match then {
                    Then::Run(task) => {
                        let left = self.speed[w];
                        Worker::Running { task, left }
                    }
                    Then::Settle if self.removed[w] => Worker::Gone,
                    Then::Settle if keep => Worker::Popping {
                        round: PopRound::default(),
                        back: None,
                        first: true,
                        consults: 0,
                    },
                    Then::Settle => {
                        self.log.push(format!("w{w} sleeps"));
                        Worker::Asleep
                    }
                };
            }
            Worker::Running { task, left } => {
                if left > 1 {
                    self.workers[w] = Worker::Running {
                        task,
                        left: left - 1,
                    };
                    return;
                }
                // Execution over; the post-exec hook fills the mailbox.
                self.ran[task.task.id] += 1;
                self.mailbox[w].push(Finished {
                    ticket: task.ticket,
                    codelet: task.codelet,
                    units: task.units,
                    seconds: Some(f64::from(self.speed[w]) * 1e-3 * task.units / 10.0),
                    end_s: self.now,
                });
                self.keep_awake[w] = false;
                self.workers[w] = if self.removed[w] {
                    Worker::Gone
                } else {
                    Worker::Popping {
                        round: PopRound::default(),
                        back: None,
                        first: true,
                        consults: 0,
                    }
                };
            }
        }
    }

    fn pending_wake_for(&self, w: usize) -> bool {
        let in_list = |l: &Vec<usize>| l.contains(&w);
        matches!(&self.submitter, Submitter::Waking(l) if in_list(l))
            || self
                .workers
                .iter()
                .any(|s| matches!(s, Worker::Waking { wake, .. } if in_list(wake)))
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (w, s) in self.workers.iter().enumerate() {
            if matches!(s, Worker::Asleep)
                && !self.removed[w]
                && !self.sleepers.is_idle(w)
                && !self.pending_wake_for(w)
            {
                return Err(format!(
                    "worker {w} sleeps without its idle flag and no wake is on its way: nothing can wake it"
                ));
            }
            let end = self.sched.expected_end_s(w, self.now);
            if !end.is_finite() || end < self.now {
                return Err(format!(
                    "worker {w}'s expected end {end} is before now {}",
                    self.now
                ));
            }
        }
        Ok(())
    }

    /// Runs to quiescence; the error says what broke.
    fn run(&mut self, seed: u64) -> Result<usize, String> {
        let mut rng = Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
        for steps in 0..200_000 {
            let actors = self.runnable();
            if actors.is_empty() {
                return self.check_end().map(|()| steps);
            }
            let a = actors[rng.below(actors.len() as u64) as usize];
            self.now += 1e-4 * (1.0 + rng.unit());
            if a == 0 {
                self.step_submitter();
            } else {
                self.step_worker(a - 1);
            }
            self.check_invariants()?;
        }
        Err("no quiescence after 200000 actions (livelock)".into())
    }

    fn check_end(&mut self) -> Result<(), String> {
        let held = self.sched.held();
        let twice: Vec<usize> = (0..self.ran.len()).filter(|&i| self.ran[i] > 1).collect();
        let never: Vec<usize> = (0..self.ran.len()).filter(|&i| self.ran[i] == 0).collect();
        if !twice.is_empty() {
            return Err(format!("tasks run twice: {twice:?}"));
        }
        // Tasks only a removed worker could run are legitimately left.
        let runnable_left: Vec<usize> = never
            .iter()
            .copied()
            .filter(|&i| {
                (0..self.workers.len())
                    .any(|w| !self.removed[w] && self.tasks[i].mask >> w & 1 == 1)
            })
            .collect();
        if !runnable_left.is_empty() {
            return Err(format!(
                "every worker asleep with {held} task(s) held; never ran: {runnable_left:?} (lost wake-up)"
            ));
        }
        let drained = self.sched.drain();
        if drained.len() != never.len() {
            return Err(format!(
                "{} task(s) neither run nor held",
                never.len() - drained.len()
            ));
        }
        Ok(())
    }
}

/// What an exploration reached.
#[derive(Debug, Default)]
struct Reached {
    actions: u64,
    counters: TaskModeCounters,
}

fn explore(
    balancer: &str,
    protocol: Protocol,
    seeds: std::ops::Range<u64>,
) -> Result<Reached, (u64, String, Vec<String>)> {
    let mut reached = Reached::default();
    for seed in seeds {
        let mut sim = Sim::new(seed, balancer, protocol);
        match sim.run(seed) {
            Ok(n) => {
                reached.actions += n as u64;
                reached.counters.add(&sim.sched.counters());
            }
            Err(e) => {
                let tail = sim.log.split_off(sim.log.len().saturating_sub(12));
                return Err((seed, e, tail));
            }
        }
    }
    Ok(reached)
}

/// Every interleaving reached, on every balancer family task mode runs,
/// loses no task and no worker.
#[test]
fn no_task_lost_or_run_twice_and_no_worker_left_asleep() {
    for balancer in plb_core::balance::registry::names() {
        match explore(balancer, Protocol::Current, 0..300) {
            Err((seed, e, log)) => panic!("{balancer}, seed {seed}: {e}\nlast actions: {log:#?}"),
            Ok(r) => {
                eprintln!("{balancer}: {} actions, {:?}", r.actions, r.counters);
                // The exploration reaches every path a task takes.
                let c = r.counters;
                assert!(c.epochs > 50 && c.epoch_tasks > 1000, "{balancer}: {c:?}");
                assert!(
                    c.fallback_tasks > 1000 && c.dissolved_tasks > 0,
                    "{balancer}: {c:?}"
                );
            }
        }
    }
}

/// The harness has teeth: the pop protocol the adapter ran before (a pop
/// that stopped after its consult bound returned no task, left its worker
/// unmarked and did not wake it) is caught leaving a worker asleep.
#[test]
fn finds_the_lost_wakeup_of_the_old_consult_bound() {
    let found = explore(
        "dynamic",
        Protocol::Legacy {
            bound: CONSULTS_PER_POP,
        },
        0..400,
    )
    .err();
    let (seed, e, _) = found.expect("the legacy protocol's lost wake-up was not found");
    assert!(
        e.contains("sleeps without its idle flag") || e.contains("lost wake-up"),
        "seed {seed}: {e}"
    );
}
