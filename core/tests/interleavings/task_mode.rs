//! Task mode (every registry balancer's epochs and the fallback queues) as
//! the explorer's [`Side`]: the adapter's push (reserve, prefetch, commit),
//! its pop (first its own queue alone, [`pop_own`], when no epoch is alive
//! and its mailbox holds no report it must deliver, [`must_deliver`];
//! else [`Scheduler::pop_step`], consults run
//! unlocked), its mailbox (post-exec hooks delivered at the worker's next
//! pop). The queues are apart from the scheduler's other state, as the
//! adapter's per-worker locks keep them: the own-queue pop is an atomic
//! action of its own, between any two of the others.

use plb_core::balance::registry::BalancerSpec;
use plb_core::balance::{Tuning, WorkerKind};
use plb_core::sleepers::Sleepers;
use plb_core::taskmode::placement::ModelBook;
use plb_core::taskmode::{
    EpochConsult, Finished, Pop, PopRound, PopStep, Reserved, SchedTask, Scheduler, Taken,
    must_deliver, pop_own,
};
use plb_core::worker_queues::QueueSet;

use super::explorer::{Fake, Plan, Side, Step, own_queue_step};

impl SchedTask for Fake {
    fn codelet(&self) -> usize {
        self.codelet
    }
    fn units(&self) -> f64 {
        self.units
    }
    fn implementation_on(&self, pu: usize) -> Option<u32> {
        self.runs_on(pu).then_some(0)
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
pub enum Protocol {
    Current,
    /// The old adapter loop: after `bound` consults it handed the consult
    /// back and returned no task, without marking the worker idle or
    /// waking it.
    Legacy {
        bound: usize,
    },
    /// A tempting mistake: the own queue first whatever is due, and an
    /// empty one marks the worker idle and ends the pop without the
    /// scheduler's lock.
    CarelessOwnQueue,
}

/// A pop's progress: the scheduler's round, and the consults run (the
/// legacy loop's count).
#[derive(Default)]
pub struct Round {
    round: PopRound,
    consults: usize,
}

/// What a pop does between two of its steps.
pub enum TaskWork {
    /// Run an epoch's consult without the lock.
    Consult(EpochConsult),
    /// The own-queue pop found nothing: the scheduler's steps next.
    Locked,
}

pub struct TaskMode {
    pub sched: Scheduler<Fake>,
    /// Pops served by the own queue alone, and by the scheduler's steps.
    pub own_pops: u64,
    pub locked_pops: u64,
    book: ModelBook,
    mailbox: Vec<Vec<Finished>>,
    reserved: Vec<Reserved<Fake>>,
    protocol: Protocol,
}

impl TaskMode {
    pub fn new(plan: &Plan, balancer: &str, protocol: Protocol) -> TaskMode {
        let mut sched =
            Scheduler::new(BalancerSpec::parse(balancer).unwrap(), Tuning::default(), 8);
        let kinds: Vec<(usize, WorkerKind)> = (0..plan.workers)
            .map(|w| {
                let kind = if w == 0 {
                    WorkerKind::Cuda
                } else {
                    WorkerKind::Cpu
                };
                (w, kind)
            })
            .collect();
        sched.add_workers(&kinds);
        sched.set_reserving(plan.reserving);
        TaskMode {
            sched,
            own_pops: 0,
            locked_pops: 0,
            book: ModelBook::default(),
            mailbox: vec![Vec::new(); plan.workers],
            reserved: Vec::new(),
            protocol,
        }
    }

    /// The old adapter's loop, step by step.
    fn legacy_step(
        &mut self,
        w: usize,
        now: f64,
        sleepers: &Sleepers,
        round: &Round,
        back: Option<EpochConsult>,
        bound: usize,
    ) -> PopStep<Fake> {
        let popped = match back {
            None => self.sched.pop(w, now, &self.book),
            Some(c) => {
                if round.consults >= bound {
                    self.sched.hand_back(c, now, &self.book);
                    return PopStep::Empty(sleepers.wake_list(self.sched.take_notified()));
                }
                self.sched.resume(c, w, now, &self.book)
            }
        };
        match popped {
            Pop::Task(t) => PopStep::Task(t, sleepers.wake_list(self.sched.take_notified())),
            Pop::Consult(c) => PopStep::Consult(c),
            Pop::Nothing { idle } => {
                sleepers.fell_idle(w, idle);
                PopStep::Empty(sleepers.wake_list(self.sched.take_notified()))
            }
        }
    }
}

impl Side for TaskMode {
    type Round = Round;
    type Work = TaskWork;
    type Run = Taken<Fake>;

    fn push(
        &mut self,
        task: Fake,
        now: f64,
        sleepers: &Sleepers,
        pusher: Option<usize>,
    ) -> (Vec<usize>, bool) {
        // Task mode wakes as it does for any pusher.
        let mut wake = self.sched.push(task, now, &self.book, sleepers);
        let reserved = self.sched.take_reserved();
        if pusher.is_some() {
            // A worker's push commits its own reservations (the adapter
            // keeps them per call): the submitter's, held for its commit
            // meanwhile, stay apart.
            wake.extend(self.sched.commit_waking(reserved, &self.book, sleepers));
            return (wake, false);
        }
        self.reserved = reserved;
        (wake, !self.reserved.is_empty())
    }

    fn commit(&mut self, _now: f64, sleepers: &Sleepers) -> Vec<usize> {
        let placed = std::mem::take(&mut self.reserved);
        self.sched.commit_waking(placed, &self.book, sleepers)
    }

    fn remove(&mut self, w: usize, sleepers: &Sleepers) -> Vec<usize> {
        self.sched.remove_workers_waking(&[w], &self.book, sleepers)
    }

    fn pop_step(
        &mut self,
        w: usize,
        now: f64,
        sleepers: &Sleepers,
        round: &mut Round,
        back: Option<TaskWork>,
        first: bool,
    ) -> Step<TaskWork, Taken<Fake>> {
        let careless = self.protocol == Protocol::CarelessOwnQueue;
        let current = self.protocol == Protocol::Current
            && !must_deliver(&self.mailbox[w])
            && self.sched.own_queue_first();
        if first && (careless || current) {
            // The adapter's first try: the worker's queue alone.
            let cpu = self.sched.kind_of(w) == WorkerKind::Cpu;
            let found = self.sched.queues().with(w, |q| pop_own(q, w, cpu, now));
            let (pops, locked) = (&mut self.own_pops, TaskWork::Locked);
            return own_queue_step(found.flatten(), careless, w, sleepers, pops, locked);
        }
        let (first, back) = match back {
            Some(TaskWork::Locked) => (true, None),
            Some(TaskWork::Consult(c)) => (first, Some(c)),
            None => (first, None),
        };
        if first {
            let done = std::mem::take(&mut self.mailbox[w]);
            for job in self.sched.deliver(w, done, &mut self.book) {
                let fitted = job.run(self.book.fit_config());
                self.book.install(fitted);
            }
        }
        if back.is_some() {
            round.consults += 1;
        }
        let step = match self.protocol {
            Protocol::Current | Protocol::CarelessOwnQueue => {
                self.sched
                    .pop_step(w, now, &self.book, sleepers, &mut round.round, back)
            }
            Protocol::Legacy { bound } => self.legacy_step(w, now, sleepers, round, back, bound),
        };
        match step {
            PopStep::Consult(c) => Step::Work(TaskWork::Consult(c), Vec::new()),
            PopStep::Task(t, wake) => {
                self.locked_pops += 1;
                Step::Task(t, wake)
            }
            PopStep::Empty(wake) => Step::Empty(wake),
        }
    }

    fn work(&mut self, work: TaskWork) -> TaskWork {
        match work {
            TaskWork::Consult(mut c) => {
                c.run();
                TaskWork::Consult(c)
            }
            TaskWork::Locked => TaskWork::Locked,
        }
    }

    fn task_of(run: &Taken<Fake>) -> usize {
        run.task.id
    }

    fn units_of(run: &Taken<Fake>) -> f64 {
        run.units
    }

    fn post_exec(
        &mut self,
        w: usize,
        run: Taken<Fake>,
        secs: f64,
        now: f64,
        _sleepers: &Sleepers,
    ) -> Vec<usize> {
        self.sched.task_finished(w, now);
        self.mailbox[w].push(Finished {
            ticket: run.ticket,
            codelet: run.codelet,
            units: run.units,
            seconds: Some(secs),
            end_s: now,
        });
        Vec::new()
    }

    fn held(&self) -> usize {
        self.sched.held()
    }

    fn expected_end_s(&self, w: usize, now: f64) -> f64 {
        self.sched.expected_end_s(w, now)
    }

    fn drain(&mut self) -> usize {
        self.sched.drain().len()
    }
}
