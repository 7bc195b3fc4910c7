//! The interleaving explorer: a seeded random scheduler of atomic actions
//! over a task-side scheduler ([`Side`]), with workers that behave as
//! StarPU's blocking drivers (its SimGrid mode).
//!
//! Actors: the submitting thread (pushes, the commit after an unlocked
//! prefetch, a worker leaving the context, the wakes it owes) and every
//! worker (a locked pop step, the unlocked work between two steps, the
//! wakes after unlocking, a task's execution, its post-execution hook and
//! the pushes of the tasks its end made ready, as StarPU's driver releases
//! a task's successors before the worker pops again).
//! Each action is what the StarPU adapter does under its lock or between
//! two holds of it; a seeded random choice picks the next actor.
//!
//! StarPU's semantics: a pop that returns no task puts the worker to sleep
//! unless a wake reached it while it was in its pop (`keep_awake`); a wake
//! of a sleeping worker makes it pop; a wake of a worker running a task is
//! ignored (it pops after the task anyway).
//!
//! Checked after every action: no worker sleeps without its idle flag set
//! or a wake on its way (nothing else can ever wake it); every worker's
//! expected end is finite and not before now. Checked when no actor can
//! move: every task ran exactly once, unless no remaining worker can run
//! it, and the scheduler holds none of the others (a task left with every
//! worker asleep is a lost wake-up).

use plb_core::rng::Rng;
use plb_core::sleepers::Sleepers;

/// A task of the plan.
#[derive(Debug, Clone)]
pub struct Fake {
    /// Index in the plan.
    pub id: usize,
    pub codelet: usize,
    pub units: f64,
    /// Bit `w` set: worker `w` can run it.
    pub mask: u64,
    pub priority: i32,
}

impl Fake {
    /// Whether worker `w` can run it.
    pub fn runs_on(&self, w: usize) -> bool {
        self.mask >> w & 1 == 1
    }
}

/// A scenario: workers (0 an accelerator, the others CPUs), the tasks the
/// submitter pushes, a worker that may leave.
pub struct Plan {
    pub workers: usize,
    /// Per worker: actions one task of 10 units takes there.
    pub speed: Vec<u32>,
    pub tasks: Vec<Fake>,
    /// (worker, after this many pushes).
    pub removal: Option<(usize, usize)>,
    /// Pushes hold placements back for a commit (task mode's prefetch).
    pub reserving: bool,
    /// Per task: its post-execution hook never comes (StarPU skips it for
    /// its internal tasks).
    pub silent: Vec<bool>,
    /// Per task: pushed not by the submitter but by the worker that ends
    /// this earlier task ([`Plan::random_released`]).
    pub after: Vec<Option<usize>>,
}

impl Plan {
    /// A random scenario: runs of like tasks (epochs, batches), mixed ones,
    /// ones only the accelerator or only the CPUs can run.
    pub fn random(seed: u64) -> Plan {
        Plan::random_runs(seed, false)
    }

    /// [`Plan::random`] with runs of like tasks 30 to 89 long: epochs of
    /// balancers with a training phase (PLB-HeC: 15 tasks per worker) over
    /// several workers.
    pub fn random_long(seed: u64) -> Plan {
        Plan::random_runs(seed, true)
    }

    fn random_runs(seed: u64, long: bool) -> Plan {
        let mut rng = Rng::new(seed);
        let workers = 2 + rng.below(3) as usize;
        let speed = (0..workers)
            .map(|w| if w == 0 { 1 } else { 2 + rng.below(4) as u32 })
            .collect();
        let all = (1u64 << workers) - 1;
        let total = 30 + rng.below(80) as usize;
        let mut tasks = Vec::new();
        while tasks.len() < total {
            let run = if long {
                30 + rng.below(60) as usize
            } else if rng.below(2) == 0 {
                12 + rng.below(30) as usize
            } else {
                1 + rng.below(6) as usize
            };
            let codelet = rng.below(4) as usize; // 0: no codelet
            let units = [10.0, 10.0, 40.0][rng.below(3) as usize];
            let mask = match rng.below(6) {
                0 => 1,
                1 => all & !1,
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
        let removal = (workers > 2 && rng.below(3) == 0).then(|| {
            (
                1 + rng.below(workers as u64 - 1) as usize,
                rng.below(total as u64) as usize,
            )
        });
        let reserving = rng.below(2) == 0;
        // Drawn apart, so that the scenarios above stay those of earlier
        // versions of this harness: about one task in ten is silent.
        let mut quiet = Rng::new(seed ^ 0x5113_4700);
        let silent = tasks.iter().map(|_| quiet.below(10) == 0).collect();
        let after = vec![None; tasks.len()];
        Plan {
            workers,
            speed,
            tasks,
            removal,
            reserving,
            silent,
            after,
        }
    }

    /// [`Plan::random`] where about one task in three is made ready by the
    /// end of the task before it (a chain, as StarPU's `tasks_overhead`
    /// builds with tags) and pushed by the worker that ran that one; only
    /// after a task every worker can run (so it does run).
    pub fn random_released(seed: u64) -> Plan {
        let mut plan = Plan::random(seed);
        let all = (1u64 << plan.workers) - 1;
        let mut rng = Rng::new(seed ^ 0x0e1e_a5ed);
        for i in 1..plan.tasks.len() {
            if rng.below(3) == 0 && plan.tasks[i - 1].mask == all {
                plan.after[i] = Some(i - 1);
            }
        }
        plan
    }
}

/// The outcome of one locked pop step.
pub enum Step<W, R> {
    /// Wake these, do this without the lock, then step again with it.
    Work(W, Vec<usize>),
    /// A task; wake these after unlocking.
    Task(R, Vec<usize>),
    /// No task; wake these after unlocking (the worker itself included
    /// means: pop again).
    Empty(Vec<usize>),
}

/// The step a pop's first try on its own queue alone ends with: the task
/// it found (counted in `own_pops`), else, for a careless pop, the worker
/// asleep without the scheduler's lock, else `locked` (the scheduler's
/// steps next).
pub fn own_queue_step<W, R>(
    found: Option<R>,
    careless: bool,
    w: usize,
    sleepers: &Sleepers,
    own_pops: &mut u64,
    locked: W,
) -> Step<W, R> {
    match found {
        Some(t) => {
            *own_pops += 1;
            Step::Task(t, Vec::new())
        }
        None if careless => {
            sleepers.fell_idle(w, true);
            Step::Empty(Vec::new())
        }
        None => Step::Work(locked, Vec::new()),
    }
}

/// A task-side scheduler as the adapter drives it (each method is one
/// atomic action: under the lock, or without it for [`Side::work`]).
pub trait Side {
    /// What a pop carries between its steps.
    type Round: Default;
    /// What a locked step hands to the unlocked action and back.
    type Work;
    /// A popped task as its worker holds it.
    type Run;
    /// Pushes `task` (`pusher`: the worker pushing, one that pops before
    /// it can sleep; `None`: the submitter); returns the wakes and whether
    /// a commit must follow.
    fn push(
        &mut self,
        task: Fake,
        now: f64,
        sleepers: &Sleepers,
        pusher: Option<usize>,
    ) -> (Vec<usize>, bool);
    /// Commits what the last push held back; returns the wakes.
    fn commit(&mut self, now: f64, sleepers: &Sleepers) -> Vec<usize>;
    /// Worker `w` leaves; returns the wakes.
    fn remove(&mut self, w: usize, sleepers: &Sleepers) -> Vec<usize>;
    /// One locked step of `w`'s pop (`first`: the pop's first step).
    #[allow(clippy::too_many_arguments)]
    fn pop_step(
        &mut self,
        w: usize,
        now: f64,
        sleepers: &Sleepers,
        round: &mut Self::Round,
        back: Option<Self::Work>,
        first: bool,
    ) -> Step<Self::Work, Self::Run>;
    /// The unlocked action between two steps.
    fn work(&mut self, work: Self::Work) -> Self::Work;
    /// The plan index of a popped task.
    fn task_of(run: &Self::Run) -> usize;
    /// Its size.
    fn units_of(run: &Self::Run) -> f64;
    /// The post-execution hook of a task `w` ran for `secs`; returns the
    /// workers to wake after it (the hook's lock released).
    fn post_exec(
        &mut self,
        w: usize,
        run: Self::Run,
        secs: f64,
        now: f64,
        sleepers: &Sleepers,
    ) -> Vec<usize>;
    /// Tasks held.
    fn held(&self) -> usize;
    /// When `w` is expected to be done with its work.
    fn expected_end_s(&self, w: usize, now: f64) -> f64;
    /// Takes every task still held; returns how many.
    fn drain(&mut self) -> usize;
}

enum Then<S: Side> {
    Run(S::Run),
    /// Pop (after a post-exec hook's wakes).
    Pop,
    /// Do the unlocked work, then step again.
    Work(S::Round, S::Work),
    /// Sleep, unless a wake reached the worker meanwhile.
    Settle,
}

enum Worker<S: Side> {
    Asleep,
    Popping {
        round: S::Round,
        back: Option<S::Work>,
        first: bool,
    },
    Working {
        round: S::Round,
        work: S::Work,
    },
    Waking {
        wake: Vec<usize>,
        then: Then<S>,
    },
    Running {
        run: S::Run,
        left: u32,
    },
    Gone,
}

impl<S: Side> Worker<S> {
    fn popping() -> Self {
        Worker::Popping {
            round: S::Round::default(),
            back: None,
            first: true,
        }
    }
}

enum Submitter {
    Pushing,
    Committing,
    Waking(Vec<usize>),
}

/// One exploration run.
pub struct Sim<S: Side> {
    pub side: S,
    plan: Plan,
    sleepers: Sleepers,
    workers: Vec<Worker<S>>,
    keep_awake: Vec<bool>,
    removed: Vec<bool>,
    /// The tasks the submitter pushes, in order, and how many it pushed.
    submitted: Vec<usize>,
    next: usize,
    submitter: Submitter,
    removal: Option<(usize, usize)>,
    ran: Vec<u32>,
    now: f64,
    pub log: Vec<String>,
}

impl<S: Side> Sim<S> {
    pub fn new(plan: Plan, side: S) -> Sim<S> {
        let n = plan.workers;
        Sim {
            side,
            sleepers: Sleepers::new(8, true),
            workers: (0..n).map(|_| Worker::popping()).collect(),
            keep_awake: vec![false; n],
            removed: vec![false; n],
            submitted: (0..plan.tasks.len())
                .filter(|&i| plan.after[i].is_none())
                .collect(),
            next: 0,
            submitter: Submitter::Pushing,
            removal: plan.removal,
            ran: vec![0; plan.tasks.len()],
            now: 0.0,
            log: Vec::new(),
            plan,
        }
    }

    fn runnable(&self) -> Vec<usize> {
        let mut v = Vec::new();
        if !matches!(self.submitter, Submitter::Pushing) || self.next < self.submitted.len() {
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
            Worker::Asleep if !self.removed[w] => self.workers[w] = Worker::popping(),
            Worker::Popping { .. } | Worker::Working { .. } | Worker::Waking { .. } => {
                self.keep_awake[w] = true;
            }
            _ => {}
        }
    }

    fn step_submitter(&mut self) {
        match std::mem::replace(&mut self.submitter, Submitter::Pushing) {
            Submitter::Pushing => {
                let t = self.plan.tasks[self.submitted[self.next]].clone();
                self.next += 1;
                self.log.push(format!("push {}", t.id));
                let (mut wake, commit) = self.side.push(t, self.now, &self.sleepers, None);
                if !wake.is_empty() {
                    self.log.push(format!("  push wakes {wake:?}"));
                }
                if let Some((w, after)) = self.removal
                    && after < self.next
                {
                    self.removal = None;
                    self.removed[w] = true;
                    self.log.push(format!("remove {w}"));
                    wake.extend(self.side.remove(w, &self.sleepers));
                }
                self.submitter = if commit {
                    // The push's wakes go out before the commit (the
                    // adapter wakes after the prefetch, unlocked).
                    for w in wake {
                        self.wake(w);
                    }
                    Submitter::Committing
                } else {
                    Submitter::Waking(wake)
                };
            }
            Submitter::Committing => {
                let wake = self.side.commit(self.now, &self.sleepers);
                self.submitter = Submitter::Waking(wake);
            }
            Submitter::Waking(wake) => {
                for w in wake {
                    self.wake(w);
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
            } => {
                let step = self
                    .side
                    .pop_step(w, self.now, &self.sleepers, &mut round, back, first);
                self.workers[w] = match step {
                    Step::Work(work, wake) if wake.is_empty() => Worker::Working { round, work },
                    Step::Work(work, wake) => Worker::Waking {
                        wake,
                        then: Then::Work(round, work),
                    },
                    Step::Task(run, wake) => {
                        self.log
                            .push(format!("w{w} pops {} (wakes {wake:?})", S::task_of(&run)));
                        Worker::Waking {
                            wake,
                            then: Then::Run(run),
                        }
                    }
                    Step::Empty(wake) => {
                        self.log.push(format!("w{w} pops nothing (wakes {wake:?})"));
                        Worker::Waking {
                            wake,
                            then: Then::Settle,
                        }
                    }
                };
            }
            Worker::Working { round, work } => {
                self.log.push(format!("w{w} works"));
                let back = self.side.work(work);
                self.workers[w] = Worker::Popping {
                    round,
                    back: Some(back),
                    first: false,
                };
            }
            Worker::Waking { wake, then } => {
                // Still in its pop: these wakes (its own included) keep it
                // awake.
                self.workers[w] = Worker::Waking {
                    wake: Vec::new(),
                    then: Then::Settle,
                };
                for x in wake {
                    self.wake(x);
                }
                let keep = std::mem::take(&mut self.keep_awake[w]);
                self.workers[w] = match then {
                    Then::Work(round, work) => {
                        // Still popping: a wake that reached it stays for
                        // the end of the pop.
                        self.keep_awake[w] |= keep;
                        Worker::Working { round, work }
                    }
                    Then::Run(run) => {
                        let left = self.plan.speed[w] * (S::units_of(&run) / 10.0).ceil() as u32;
                        Worker::Running { run, left }
                    }
                    Then::Pop if self.removed[w] => Worker::Gone,
                    Then::Pop => Worker::popping(),
                    Then::Settle if self.removed[w] => Worker::Gone,
                    Then::Settle if keep => Worker::popping(),
                    Then::Settle => {
                        self.log.push(format!("w{w} sleeps"));
                        Worker::Asleep
                    }
                };
            }
            Worker::Running { run, left } => {
                if left > 1 {
                    self.workers[w] = Worker::Running {
                        run,
                        left: left - 1,
                    };
                    return;
                }
                let done = S::task_of(&run);
                self.ran[done] += 1;
                let secs = f64::from(self.plan.speed[w]) * 1e-3 * S::units_of(&run) / 10.0;
                let mut wake = if self.plan.silent[done] {
                    Vec::new()
                } else {
                    self.side.post_exec(w, run, secs, self.now, &self.sleepers)
                };
                // The tasks its end made ready, pushed by this worker (a
                // commit, if one is due, at once).
                for i in (0..self.plan.tasks.len()).filter(|&i| self.plan.after[i] == Some(done)) {
                    let t = self.plan.tasks[i].clone();
                    let (w2, commit) = self.side.push(t, self.now, &self.sleepers, Some(w));
                    self.log.push(format!("w{w} pushes {i} (wakes {w2:?})"));
                    wake.extend(w2);
                    if commit {
                        wake.extend(self.side.commit(self.now, &self.sleepers));
                    }
                }
                self.keep_awake[w] = false;
                self.workers[w] = if self.removed[w] && wake.is_empty() {
                    Worker::Gone
                } else if wake.is_empty() {
                    Worker::popping()
                } else {
                    Worker::Waking {
                        wake,
                        then: Then::Pop,
                    }
                };
            }
        }
    }

    fn pending_wake_for(&self, w: usize) -> bool {
        matches!(&self.submitter, Submitter::Waking(l) if l.contains(&w))
            || self
                .workers
                .iter()
                .any(|s| matches!(s, Worker::Waking { wake, .. } if wake.contains(&w)))
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
            let end = self.side.expected_end_s(w, self.now);
            if !end.is_finite() || end < self.now {
                return Err(format!(
                    "worker {w}'s expected end {end} is before now {}",
                    self.now
                ));
            }
        }
        Ok(())
    }

    /// Runs to quiescence; returns the number of actions, or what broke.
    pub fn run(&mut self, seed: u64) -> Result<usize, String> {
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
        let twice: Vec<usize> = (0..self.ran.len()).filter(|&i| self.ran[i] > 1).collect();
        if !twice.is_empty() {
            return Err(format!("tasks run twice: {twice:?}"));
        }
        let never: Vec<usize> = (0..self.ran.len()).filter(|&i| self.ran[i] == 0).collect();
        // Tasks only a removed worker could run are legitimately left.
        let runnable_left: Vec<usize> = never
            .iter()
            .copied()
            .filter(|&i| {
                (0..self.workers.len()).any(|w| !self.removed[w] && self.plan.tasks[i].runs_on(w))
            })
            .collect();
        if !runnable_left.is_empty() {
            return Err(format!(
                "every worker asleep with {} task(s) held; never ran: {runnable_left:?} (lost wake-up)",
                self.side.held()
            ));
        }
        let drained = self.side.drain();
        if drained != never.len() {
            return Err(format!(
                "{} task(s) neither run nor held",
                never.len() - drained
            ));
        }
        Ok(())
    }
}

/// The first failure of an exploration: seed, what broke, the last
/// actions.
pub type Failure = (u64, String, Vec<String>);

/// Runs `seeds`, a random plan each, on the side `make` builds; returns
/// the actions taken and the sides at quiescence, or the first failure.
pub fn explore<S: Side>(
    make: impl Fn(&Plan) -> S,
    seeds: std::ops::Range<u64>,
) -> Result<(u64, Vec<S>), Failure> {
    explore_with(make, seeds, true, Plan::random)
}

/// [`explore`] with every post-exec report delivered (no silent task).
pub fn explore_reporting_all<S: Side>(
    make: impl Fn(&Plan) -> S,
    seeds: std::ops::Range<u64>,
) -> Result<(u64, Vec<S>), Failure> {
    explore_with(make, seeds, false, Plan::random)
}

/// [`explore`] on [`Plan::random_long`] plans.
pub fn explore_long<S: Side>(
    make: impl Fn(&Plan) -> S,
    seeds: std::ops::Range<u64>,
) -> Result<(u64, Vec<S>), Failure> {
    explore_with(make, seeds, true, Plan::random_long)
}

/// [`explore`] on [`Plan::random_released`] plans: workers push the tasks
/// their tasks' ends made ready.
pub fn explore_released<S: Side>(
    make: impl Fn(&Plan) -> S,
    seeds: std::ops::Range<u64>,
) -> Result<(u64, Vec<S>), Failure> {
    explore_with(make, seeds, true, Plan::random_released)
}

fn explore_with<S: Side>(
    make: impl Fn(&Plan) -> S,
    seeds: std::ops::Range<u64>,
    lose_reports: bool,
    plan_of: fn(u64) -> Plan,
) -> Result<(u64, Vec<S>), Failure> {
    let mut actions = 0;
    let mut sides = Vec::new();
    for seed in seeds {
        let mut plan = plan_of(seed);
        if !lose_reports {
            plan.silent.iter_mut().for_each(|s| *s = false);
        }
        let side = make(&plan);
        let mut sim = Sim::new(plan, side);
        match sim.run(seed) {
            Ok(n) => {
                actions += n as u64;
                sides.push(sim.side);
            }
            Err(e) => {
                let tail = sim.log.split_off(sim.log.len().saturating_sub(30));
                return Err((seed, e, tail));
            }
        }
    }
    Ok((actions, sides))
}
