//! Task mode (every registry balancer's epochs and the fallback queues) as
//! the explorer's [`Side`]: the adapter's push (reserve, prefetch, commit),
//! its pop ([`Scheduler::pop_step`], consults run unlocked), its mailbox
//! (post-exec hooks delivered at the worker's next pop).

use plb_core::balance::registry::BalancerSpec;
use plb_core::balance::{Tuning, WorkerKind};
use plb_core::sleepers::Sleepers;
use plb_core::taskmode::placement::ModelBook;
use plb_core::taskmode::{
    EpochConsult, Finished, Pop, PopRound, PopStep, Reserved, SchedTask, Scheduler, Taken,
};

use super::explorer::{Fake, Plan, Side, Step};

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
}

/// A pop's progress: the scheduler's round, and the consults run (the
/// legacy loop's count).
#[derive(Default)]
pub struct Round {
    round: PopRound,
    consults: usize,
}

pub struct TaskMode {
    pub sched: Scheduler<Fake>,
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
    type Work = EpochConsult;
    type Run = Taken<Fake>;

    fn push(&mut self, task: Fake, now: f64, sleepers: &Sleepers) -> (Vec<usize>, bool) {
        let wake = self.sched.push(task, now, &self.book, sleepers);
        self.reserved = self.sched.take_reserved();
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
        back: Option<EpochConsult>,
        first: bool,
    ) -> Step<EpochConsult, Taken<Fake>> {
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
            Protocol::Current => {
                self.sched
                    .pop_step(w, now, &self.book, sleepers, &mut round.round, back)
            }
            Protocol::Legacy { bound } => self.legacy_step(w, now, sleepers, round, back, bound),
        };
        match step {
            PopStep::Consult(c) => Step::Work(c, Vec::new()),
            PopStep::Task(t, wake) => Step::Task(t, wake),
            PopStep::Empty(wake) => Step::Empty(wake),
        }
    }

    fn work(&mut self, mut consult: EpochConsult) -> EpochConsult {
        consult.run();
        consult
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
