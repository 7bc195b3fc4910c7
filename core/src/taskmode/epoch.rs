//! Task-mode epochs: a batch of ready tasks of one codelet, of (near-)equal
//! size, balanced as a divisible load whose unit is one task by the
//! policy's balancer (any registry name, with the `PLB_*` parameters),
//! through the shared protocol driver ([`crate::balance::driver`]). Used by
//! [`super::Scheduler`]; the rule is documented in `docs/balancers.md`,
//! "Task mode".
//!
//! Plain Rust, no clock: the time (`now`, seconds on any monotonic clock)
//! is an argument and the task type `T` is generic, so everything here is
//! unit-tested with fake tasks and fake workers.
//!
//! # Life of an epoch
//!
//! * The `W` tasks are units `0..W` of the balancer, in arrival order; the
//!   PUs are the workers able to run the codelet.
//! * A worker asks ([`Epoch::ask`]): while its *group* (the tasks of the
//!   block it was last given) is not empty it gets the group's next task.
//!   Otherwise, when the driver has something to do (completions to feed,
//!   PUs asking), the ask returns a [`Consult`]: the caller runs it —
//!   outside its lock, since the balancer may fit and solve — and hands it
//!   back ([`Epoch::checkin`]); every `Run(block)` moves tasks
//!   `[offset, offset + len)` into that PU's group. `Wait` and `Done` give
//!   nothing (the worker then runs other work).
//! * Each executed task is reported with its measured seconds
//!   ([`Epoch::task_done`], identified by the [`Ticket`] handed out with
//!   it). When the whole group is done, the block is reported to the
//!   driver (compute time = the sum of the group's task times); the
//!   balancer sees it at the next consult, and every PU that was told to
//!   `Wait` asks again. The driver's rules for `Wait` with nothing running
//!   apply (waiting PUs are asked again twice before a stall).
//! * Tasks are never lost: [`Epoch::dissolve`] returns every task not yet
//!   handed to a worker (not yet given out by the balancer, or still queued
//!   in a group). The policy dissolves an epoch when it *stalls*
//!   ([`Epoch::is_stalled`]: the driver reports a stall — tasks remain,
//!   every PU waits or is done, none runs a block), when
//!   the balancer misbehaves (an invalid block), when one of its workers
//!   leaves the context, and at deinit.
//!
//! # Lost completions
//!
//! StarPU skips the post-execution hook of its internal tasks, so a task's
//! report may never come. A CPU worker runs one task at a time and finishes
//! it (hook included) before asking for the next, so a CPU worker asking
//! with an empty group and unreported tasks has lost those reports: the
//! group is completed at once, the missing tasks counted at the group's mean
//! measured time (or the time since the block was handed out when none was
//! measured). Accelerator workers may ask while earlier tasks still run
//! (pipelining): their group is completed that way only after they have
//! asked with an empty group for [`LOST_GRACE_MIN_S`] seconds and
//! [`LOST_GRACE_FACTOR`] times the longest task measured in the epoch.
//! Reports arriving after a group was completed are ignored.

use std::collections::VecDeque;

use crate::balance::driver::{Consult, Driver, PuState, Status};
use crate::balance::registry::{BalancerSpec, BuildContext};
use crate::balance::{Balancer, Greedy, Tuning, WorkerKind};

/// Smallest batch of tasks that forms an epoch, whatever the number of
/// workers (see [`epoch_min`]).
pub const EPOCH_MIN_TASKS: usize = 8;

/// Workers able to run a batch's codelet that an epoch needs: one worker
/// has nothing to balance its tasks with (its tasks go to its queue by the
/// fallback rule).
pub const EPOCH_MIN_WORKERS: usize = 2;

/// Tasks per capable worker a batch needs to form an epoch (see
/// [`epoch_min`]).
pub const EPOCH_MIN_PER_WORKER: usize = 4;

/// Seconds an accelerator worker must have asked with an empty group and
/// unreported tasks before the group is completed without those reports
/// (see the module documentation), at least.
pub const LOST_GRACE_MIN_S: f64 = 1.0;

/// ... and this many times the longest task measured in the epoch.
pub const LOST_GRACE_FACTOR: f64 = 10.0;

/// Tasks a batch needs to form an epoch over `capable` workers:
/// `max(EPOCH_MIN_TASKS, EPOCH_MIN_PER_WORKER × capable)` (8 for up to two
/// workers, 4 per worker beyond).
pub fn epoch_min(capable: usize) -> usize {
    EPOCH_MIN_TASKS.max(EPOCH_MIN_PER_WORKER.saturating_mul(capable))
}

/// One PU of an epoch: a worker able to run the batch's codelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPu {
    /// The worker's index (StarPU worker id).
    pub worker: usize,
    /// Its kind: CPU workers run one task at a time (see "Lost
    /// completions" in the module documentation).
    pub kind: WorkerKind,
}

/// Identifies a task handed out by an epoch, for [`Epoch::task_done`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The epoch's id.
    pub epoch: u64,
    pu: usize,
    /// The driver's id of the block the task belongs to.
    block: u64,
}

/// Counters of one epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EpochStats {
    /// Blocks the balancer handed out.
    pub blocks: u64,
    /// Tasks handed to workers.
    pub handed: u64,
    /// Completions reported to the balancer.
    pub completions: u64,
    /// Completions made without every task's report (lost reports).
    pub forced: u64,
    /// Tasks returned by [`Epoch::dissolve`].
    pub dissolved: u64,
    /// Tasks taken from another worker's group ([`Epoch::steal_tail`]).
    pub stolen: u64,
}

/// The block of a stolen task's ticket (no block of the driver's).
const STOLEN_BLOCK: u64 = u64::MAX - 1;

#[derive(Debug)]
struct Pu<T> {
    worker: usize,
    /// May ask for a task while earlier ones still run (not a CPU).
    pipelined: bool,
    /// Tasks of the current block not yet handed to the worker.
    group: VecDeque<T>,
    /// The driver's id of the block in flight.
    block: Option<u64>,
    handed_at: f64,
    /// Tasks of the block handed to the worker and not yet reported.
    outstanding: usize,
    reported: usize,
    compute_s: f64,
    /// First time the worker asked with an empty group and unreported
    /// tasks (pipelined workers).
    stuck_since: Option<f64>,
    /// Tasks the block in flight was given, and how many of them other
    /// workers took ([`Epoch::steal_tail`]).
    block_len: usize,
    stolen: usize,
    /// Tasks of this epoch it ran (reported), and their seconds.
    ran: usize,
    ran_s: f64,
}

/// What an [`Epoch::ask`] gives.
pub enum Ask<T> {
    /// A task for the worker, with its ticket.
    Task(T, Ticket),
    /// Run this consult (outside the caller's lock), then hand it back with
    /// [`Epoch::checkin`].
    Consult(Consult),
    /// Nothing for this worker now.
    Nothing,
}

/// A batch of tasks balanced by a `plb-core` balancer (see the module
/// documentation).
pub struct Epoch<T> {
    id: u64,
    name: &'static str,
    driver: Driver,
    start: f64,
    /// Tasks not yet given out by the balancer (units `W - pending.len()..`).
    pending: VecDeque<T>,
    pus: Vec<Pu<T>>,
    longest_task_s: f64,
    dissolved: bool,
    stats: EpochStats,
    /// Seconds its balancer's consults took ([`Epoch::charge_balancing`]).
    balancing_s: f64,
}

impl<T> std::fmt::Debug for Epoch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch")
            .field("id", &self.id)
            .field("balancer", &self.name)
            .field("pending", &self.pending.len())
            .field(
                "pus",
                &self
                    .pus
                    .iter()
                    .map(|p| (p.worker, p.group.len(), p.outstanding))
                    .collect::<Vec<_>>(),
            )
            .field("driver", &self.driver)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<T> Epoch<T> {
    /// An epoch `id` of `tasks` over `pus`, balanced by the registry
    /// balancer `spec` (`PLB_*` parameters from `tuning`; `task_s`: each
    /// PU's predicted seconds per task when every PU has one,
    /// [`BuildContext::unit_s`]), started at `now`. On error (no PU, no
    /// task, a balancer refusing its configuration) the tasks come back
    /// with the reason.
    pub fn new(
        id: u64,
        spec: &BalancerSpec,
        tuning: &Tuning,
        pus: &[EpochPu],
        task_s: Option<&[f64]>,
        tasks: Vec<T>,
        now: f64,
    ) -> Result<Epoch<T>, (Vec<T>, String)> {
        if pus.is_empty() || tasks.is_empty() {
            // Refused with its reason by `with_balancer`.
            return Epoch::with_balancer(id, Box::new(Greedy::new(0, 1)), pus, tasks, now);
        }
        let kinds: Vec<WorkerKind> = pus.iter().map(|p| p.kind).collect();
        let built = spec.build(&BuildContext {
            pus: kinds.len(),
            total: tasks.len() as u64,
            tuning,
            kinds: Some(&kinds),
            unit_s: task_s,
        });
        match built {
            Ok(b) => Epoch::with_balancer(id, b, pus, tasks, now),
            Err(e) => Err((tasks, e.to_string())),
        }
    }

    /// [`Epoch::new`] with a balancer built by the caller, which must be
    /// over `pus.len()` PUs and `tasks.len()` units.
    pub fn with_balancer(
        id: u64,
        balancer: Box<dyn Balancer + Send>,
        pus: &[EpochPu],
        tasks: Vec<T>,
        now: f64,
    ) -> Result<Epoch<T>, (Vec<T>, String)> {
        if pus.is_empty() {
            return Err((tasks, "an epoch needs at least one worker".into()));
        }
        if tasks.is_empty() || balancer.remaining() != tasks.len() as u64 {
            let why = format!(
                "an epoch needs at least one task, and a balancer over as many units \
                 ({} tasks, {} units)",
                tasks.len(),
                balancer.remaining()
            );
            return Err((tasks, why));
        }
        Ok(Epoch {
            id,
            name: balancer.name(),
            driver: Driver::new(balancer, pus.len()),
            start: now,
            pending: tasks.into(),
            pus: pus
                .iter()
                .map(|p| Pu {
                    worker: p.worker,
                    pipelined: p.kind != WorkerKind::Cpu,
                    group: VecDeque::new(),
                    block: None,
                    handed_at: now,
                    outstanding: 0,
                    reported: 0,
                    compute_s: 0.0,
                    stuck_since: None,
                    block_len: 0,
                    stolen: 0,
                    ran: 0,
                    ran_s: 0.0,
                })
                .collect(),
            longest_task_s: 0.0,
            dissolved: false,
            stats: EpochStats::default(),
            balancing_s: 0.0,
        })
    }

    /// The epoch's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The balancer's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Tasks in the epoch (`W`).
    pub fn total(&self) -> u64 {
        self.driver.total()
    }

    /// Counters.
    pub fn stats(&self) -> EpochStats {
        self.stats
    }

    /// The balancer's error, if it handed out an invalid block.
    pub fn fault(&self) -> Option<String> {
        match self.driver.status() {
            Status::Faulted(m) => Some(m),
            _ => None,
        }
    }

    /// Whether `worker` is a PU of the epoch.
    pub fn has_worker(&self, worker: usize) -> bool {
        self.pu_of(worker).is_some()
    }

    /// A balancer for `total` more units that starts from what this
    /// epoch's balancer learned ([`Balancer::continue_with`]); `None` when
    /// the balancer defines no carry-over, fails to build one, or is out
    /// with a consult.
    pub fn continue_with(&self, total: u64) -> Option<Box<dyn Balancer + Send>> {
        match self.driver.balancer()?.continue_with(total)? {
            Ok(b) => Some(b),
            Err(e) => {
                log::debug!("epoch {} ({}): no carry-over: {e}", self.id, self.name);
                None
            }
        }
    }

    /// The PUs' workers.
    pub fn workers(&self) -> impl Iterator<Item = usize> + '_ {
        self.pus.iter().map(|p| p.worker)
    }

    /// Tasks the balancer has not given out yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Tasks the epoch holds: not given out yet, or queued in a group.
    pub fn held(&self) -> usize {
        self.pending.len() + self.pus.iter().map(|p| p.group.len()).sum::<usize>()
    }

    /// Raises the longest task time known (seconds) used by the grace of
    /// lost completions, e.g. with what earlier epochs measured.
    pub fn note_task_seconds(&mut self, seconds: f64) {
        if seconds.is_finite() && seconds > self.longest_task_s {
            self.longest_task_s = seconds;
        }
    }

    /// Whether the epoch still hands tasks out: not dissolved, and the
    /// balancer has tasks left to give.
    pub fn is_open(&self) -> bool {
        !self.dissolved && !self.pending.is_empty()
    }

    /// Whether `worker` may still get a task from this epoch without a new
    /// task being pushed: it is a PU that was not told `Done`, and tasks
    /// remain (pending, or in its group).
    pub fn may_give(&self, worker: usize) -> bool {
        if self.dissolved {
            return false;
        }
        self.pu_of(worker).is_some_and(|p| {
            !self.pus[p].group.is_empty()
                || (self.driver.pu_state(p) != Some(PuState::Done) && !self.pending.is_empty())
        })
    }

    /// Whether nothing is left to hand out: dissolved, or every task has
    /// been handed to a worker (reports still to come are then ignored).
    pub fn is_finished(&self) -> bool {
        self.dissolved || (self.pending.is_empty() && self.pus.iter().all(|p| p.group.is_empty()))
    }

    /// Whether the epoch can never progress: the driver reports a stall
    /// (tasks to give out, every PU waits or is done, none runs a block,
    /// the waiting PUs asked again twice) or a balancer fault.
    pub fn is_stalled(&self) -> bool {
        !self.dissolved
            && matches!(
                self.driver.status(),
                Status::Stalled { .. } | Status::Abandoned { .. } | Status::Faulted(_)
            )
    }

    fn pu_of(&self, worker: usize) -> Option<usize> {
        self.pus.iter().position(|p| p.worker == worker)
    }

    fn since_start(&self, now: f64) -> f64 {
        (now - self.start).max(0.0)
    }

    /// The next task of `worker`'s group, if any (never asks the balancer).
    pub fn take_queued(&mut self, worker: usize) -> Option<(T, Ticket)> {
        if self.dissolved {
            return None;
        }
        let p = self.pu_of(worker)?;
        let pu = &mut self.pus[p];
        let task = pu.group.pop_front()?;
        pu.outstanding += 1;
        pu.stuck_since = None;
        self.stats.handed += 1;
        Some((
            task,
            Ticket {
                epoch: self.id,
                pu: p,
                block: pu.block.unwrap_or(u64::MAX),
            },
        ))
    }

    /// `worker` asks for a task at `now`: the next task of its group, else
    /// a consult of the balancer when the driver has something to do
    /// (completions to feed, PUs asking), else nothing (its block still
    /// runs, the balancer said `Wait` or `Done`, the balancer is out with
    /// another worker's consult, or `worker` is no PU).
    pub fn ask(&mut self, worker: usize, now: f64) -> Ask<T> {
        if let Some((t, ticket)) = self.take_queued(worker) {
            return Ask::Task(t, ticket);
        }
        if self.dissolved {
            return Ask::Nothing;
        }
        if let Some(p) = self.pu_of(worker)
            && self.pus[p].block.is_some()
        {
            self.check_lost(p, now);
        }
        match self.driver.checkout(self.since_start(now)) {
            Some(c) => Ask::Consult(c),
            None => Ask::Nothing,
        }
    }

    /// One of its consults took `seconds` of a worker's time.
    pub fn charge_balancing(&mut self, seconds: f64) {
        if seconds.is_finite() && seconds > 0.0 {
            self.balancing_s += seconds;
        }
    }

    /// Its tasks reported so far, and the seconds they ran.
    fn reported(&self) -> (usize, f64) {
        self.pus
            .iter()
            .fold((0, 0.0), |(n, s), p| (n + p.ran, s + p.ran_s))
    }

    /// Seconds its consults took per second its reported tasks ran
    /// (`None` before any task ran for a measurable time).
    pub fn balancing_share(&self) -> Option<f64> {
        let (_, work_s) = self.reported();
        (work_s > 0.0).then(|| self.balancing_s / work_s)
    }

    /// Whether its consults have already cost more than
    /// [`super::RUNAWAY_FACTOR`] × [`super::MAX_BALANCING_SHARE`] of its
    /// whole projected work: all its tasks at the mean time its reported
    /// ones took (false before a report).
    pub fn balancing_runs_away(&self) -> bool {
        let (ran, ran_s) = self.reported();
        if ran == 0 || ran_s <= 0.0 || self.dissolved {
            return false;
        }
        let projected_s = self.total() as f64 * ran_s / ran as f64;
        self.balancing_s > super::RUNAWAY_FACTOR * super::MAX_BALANCING_SHARE * projected_s
    }

    /// For a worker the balancer has nothing for now (it waits for the
    /// others, or has given out every task): `thief` (a worker of the
    /// epoch with an empty group) takes the last task of another worker's
    /// group when, at the mean times measured in this epoch, it would
    /// finish it before that worker even reaches it (the group's length
    /// times the owner's mean). Each owner keeps at least one task of its
    /// block (queued, or handed to it and not yet reported: the one it
    /// runs), so its block still completes, reported at the rate of the
    /// tasks it ran; the stolen task's report only counts toward the
    /// thief's mean. Without it, fast workers idle while slow ones finish
    /// their blocks: at each of PLB-HeC's synchronous rebalancing points,
    /// and at every epoch's end.
    pub fn steal_tail(&mut self, thief: usize) -> Option<(T, Ticket)> {
        if self.dissolved {
            return None;
        }
        let t = self.pu_of(thief)?;
        let own = &self.pus[t];
        if !own.group.is_empty() || own.ran == 0 {
            return None;
        }
        let thief_s = own.ran_s / own.ran as f64;
        let (v, _) = self
            .pus
            .iter()
            .enumerate()
            .filter(|(v, pu)| {
                *v != t
                    && !pu.group.is_empty()
                    && pu.group.len() + pu.outstanding >= 2
                    && pu.ran > 0
            })
            .map(|(v, pu)| (v, pu.group.len() as f64 * pu.ran_s / pu.ran as f64))
            .filter(|&(_, reach_s)| thief_s < reach_s)
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let task = self.pus[v].group.pop_back()?;
        self.pus[v].stolen += 1;
        Some(self.stolen_by(task, t))
    }

    /// `task`, taken by PU `thief` outside any block: counted, with the
    /// ticket of a stolen task (its report counts toward the thief's mean
    /// only).
    fn stolen_by(&mut self, task: T, thief: usize) -> (T, Ticket) {
        self.stats.handed += 1;
        self.stats.stolen += 1;
        (
            task,
            Ticket {
                epoch: self.id,
                pu: thief,
                block: STOLEN_BLOCK,
            },
        )
    }

    /// For a worker the balancer has nothing for now, when
    /// [`Epoch::steal_tail`] found nothing: `thief` (a worker of the epoch
    /// with an empty group) takes the last task the balancer has not given
    /// out yet, when it would finish it before the other workers would
    /// even start it (their groups and the pending tasks ahead of it, at
    /// their rates). A worker's seconds per task are this epoch's measured
    /// mean when it ran some, else `task_s` (the caller's prediction);
    /// with one unknown, nothing is taken. The balancer later hands that
    /// unit out in a block, whose owner reports the block at the rate of
    /// the tasks it ran (as for a task [`Epoch::steal_tail`] took).
    /// Without it a worker the balancer leaves out idles while tasks wait:
    /// Acosta's iterations of one or two tasks round a 4x slower worker's
    /// share to nothing.
    pub fn steal_pending(
        &mut self,
        thief: usize,
        task_s: impl Fn(usize) -> Option<f64>,
    ) -> Option<(T, Ticket)> {
        if self.dissolved || self.pending.is_empty() {
            return None;
        }
        let t = self.pu_of(thief)?;
        if !self.pus[t].group.is_empty() {
            return None;
        }
        let mean = |p: &Pu<T>| {
            if p.ran > 0 && p.ran_s > 0.0 {
                Some(p.ran_s / p.ran as f64)
            } else {
                task_s(p.worker).filter(|s| *s > 0.0)
            }
        };
        let thief_s = mean(&self.pus[t])?;
        let mut rate = 0.0;
        let mut ahead = self.pending.len() - 1;
        for (v, p) in self.pus.iter().enumerate() {
            if v != t {
                rate += 1.0 / mean(p)?;
                ahead += p.group.len();
            }
        }
        if rate <= 0.0 || thief_s >= ahead as f64 / rate {
            return None;
        }
        let task = self.pending.pop_back()?;
        Some(self.stolen_by(task, t))
    }

    /// Hands a consult back: the blocks it gave out move into their PUs'
    /// groups (a fault is left for [`Epoch::is_stalled`]). Returns the
    /// workers that got a block.
    pub fn checkin(&mut self, consult: Consult, now: f64) -> Vec<usize> {
        let issued = match self.driver.checkin(consult) {
            Ok(i) => i,
            Err(e) => {
                log::debug!("epoch {} ({}): {e}", self.id, self.name);
                return Vec::new();
            }
        };
        let mut got = Vec::with_capacity(issued.len());
        for i in issued {
            log::trace!(
                "epoch {} ({}): PU {} gets {:?} at {:.6} s",
                self.id,
                self.name,
                i.block.pu,
                i.block,
                i.at
            );
            self.stats.blocks += 1;
            let len = i.block.len as usize;
            let pu = &mut self.pus[i.block.pu];
            if self.dissolved {
                // Dissolved during the consult: the tasks went back already.
                continue;
            }
            let taken = len.min(self.pending.len());
            pu.group.extend(self.pending.drain(..taken));
            pu.block_len = len;
            // Units whose tasks were taken from the pending tail before
            // ([`Epoch::steal_pending`]) count as stolen from this block.
            pu.stolen = len - taken;
            pu.block = Some(i.id);
            pu.handed_at = now;
            pu.outstanding = 0;
            pu.reported = 0;
            pu.compute_s = 0.0;
            pu.stuck_since = None;
            got.push(pu.worker);
        }
        got
    }

    /// [`Epoch::ask`] that runs a consult at once (single-threaded callers
    /// and tests).
    pub fn ask_now(&mut self, worker: usize, now: f64) -> Option<(T, Ticket)> {
        // Bounded: each consult hands out a block or changes PU states.
        for _ in 0..8 {
            match self.ask(worker, now) {
                Ask::Task(t, ticket) => return Some((t, ticket)),
                Ask::Nothing => return None,
                Ask::Consult(mut c) => {
                    c.run();
                    self.checkin(c, now);
                }
            }
        }
        None
    }

    /// A busy PU asked with an empty group: completes its block if the
    /// missing reports are lost (see the module documentation).
    fn check_lost(&mut self, p: usize, now: f64) {
        let grace = LOST_GRACE_MIN_S.max(LOST_GRACE_FACTOR * self.longest_task_s);
        let pu = &mut self.pus[p];
        if !pu.group.is_empty() || pu.outstanding == 0 {
            return;
        }
        if pu.pipelined {
            let since = *pu.stuck_since.get_or_insert(now);
            if now - since < grace {
                return;
            }
        }
        self.force_complete(p, now);
    }

    /// Completes now, as lost, the blocks of the pipelined PUs that asked
    /// with an empty group and still wait for reports (before their grace
    /// ends); returns whether one was. For a caller that knows no other
    /// worker will ask: with blocking drivers every worker may be asleep,
    /// and a grace measured on the clock would then never end.
    pub fn complete_stuck(&mut self, now: f64) -> bool {
        if self.dissolved {
            return false;
        }
        let mut any = false;
        for p in 0..self.pus.len() {
            let pu = &self.pus[p];
            if pu.block.is_some()
                && pu.group.is_empty()
                && pu.outstanding > 0
                && pu.stuck_since.is_some()
            {
                self.force_complete(p, now);
                any = true;
            }
        }
        any
    }

    /// Completes PU `p`'s block without its missing reports (counted at
    /// the mean of those it got, or the time since the block was handed
    /// out).
    fn force_complete(&mut self, p: usize, now: f64) {
        let pu = &mut self.pus[p];
        let missing = pu.outstanding as f64;
        pu.compute_s += if pu.reported > 0 {
            pu.compute_s / pu.reported as f64 * missing
        } else {
            (now - pu.handed_at).max(0.0)
        };
        pu.outstanding = 0;
        self.stats.forced += 1;
        self.complete(p, now);
    }

    /// Reports that the task of `ticket` ran for `seconds` (finished at
    /// `now`). Returns whether a block was completed (reported to the
    /// driver: the PUs may ask again). Stale or foreign tickets change
    /// nothing.
    pub fn task_done(&mut self, ticket: Ticket, seconds: f64, now: f64) -> bool {
        if self.dissolved || ticket.epoch != self.id {
            return false;
        }
        let seconds = if seconds.is_finite() && seconds >= 0.0 {
            seconds
        } else {
            0.0
        };
        self.note_task_seconds(seconds);
        let Some(pu) = self.pus.get_mut(ticket.pu) else {
            return false;
        };
        pu.ran += 1;
        pu.ran_s += seconds;
        if pu.block != Some(ticket.block) || pu.outstanding == 0 {
            return false;
        }
        pu.outstanding -= 1;
        pu.reported += 1;
        pu.compute_s += seconds;
        if pu.outstanding == 0 && pu.group.is_empty() {
            self.complete(ticket.pu, now);
            return true;
        }
        false
    }

    /// Reports PU `p`'s block to the driver.
    fn complete(&mut self, p: usize, now: f64) {
        let finished_at = self.since_start(now);
        let pu = &mut self.pus[p];
        pu.stuck_since = None;
        let Some(id) = pu.block.take() else { return };
        // Tasks taken by others: the block's time at the rate of those it
        // ran (the balancer sees the block it gave).
        let ran = pu.block_len.saturating_sub(pu.stolen).max(1);
        let compute_s = pu.compute_s * pu.block_len.max(1) as f64 / ran as f64;
        log::trace!(
            "epoch {} PU {p} completes at {finished_at:.6} ({compute_s:.6} s)",
            self.id,
        );
        if self.driver.report(id, compute_s, 0.0, finished_at).is_ok() {
            self.stats.completions += 1;
        }
    }

    /// Ends the epoch: returns every task not yet handed to a worker (not
    /// given out by the balancer, or still queued in a group), in unit
    /// order of the pending ones after the groups. Later calls return
    /// nothing; reports of tasks already handed out are ignored.
    pub fn dissolve(&mut self) -> Vec<T> {
        if self.dissolved {
            return Vec::new();
        }
        self.dissolved = true;
        let mut out: Vec<T> = Vec::with_capacity(self.held());
        for pu in &mut self.pus {
            out.extend(pu.group.drain(..));
            pu.block = None;
        }
        out.extend(self.pending.drain(..));
        self.stats.dissolved += out.len() as u64;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{Completion, Decision};

    const NAMES: [&str; 5] = ["plb-hac", "plb-hec", "hdss", "acosta", "static"];

    fn cpus(n: usize) -> Vec<EpochPu> {
        (0..n)
            .map(|w| EpochPu {
                worker: w,
                kind: WorkerKind::Cpu,
            })
            .collect()
    }

    fn spec(name: &str) -> BalancerSpec {
        BalancerSpec::parse(name).expect("registered")
    }

    fn epoch(name: &'static str, workers: usize, w: usize) -> Epoch<usize> {
        Epoch::new(
            7,
            &spec(name),
            &Tuning::default(),
            &cpus(workers),
            None,
            (0..w).collect(),
            0.0,
        )
        .expect("valid epoch")
    }

    /// Virtual-time driver: each worker runs its tasks one at a time, a
    /// task taking `secs[worker]`; a worker with nothing asks again at the
    /// next event. Returns the tasks each worker ran and the tasks left
    /// (dissolved after a stall).
    fn run(ep: &mut Epoch<usize>, secs: &[f64]) -> (Vec<Vec<usize>>, Vec<usize>) {
        let (ran, left, _) = run_with(ep, secs, false);
        (ran, left)
    }

    /// [`run`], with workers that find nothing trying [`Epoch::steal_tail`]
    /// when `steal`; also returns when the last task ended.
    fn run_with(
        ep: &mut Epoch<usize>,
        secs: &[f64],
        steal: bool,
    ) -> (Vec<Vec<usize>>, Vec<usize>, f64) {
        let n = secs.len();
        let mut ran = vec![Vec::new(); n];
        // (finish time, task, ticket) of the task each worker runs.
        let mut running: Vec<Option<(f64, usize, Ticket)>> = vec![None; n];
        let mut now = 0.0;
        let mut left = Vec::new();
        for _ in 0..1_000_000 {
            for w in 0..n {
                if running[w].is_none() {
                    let got = ep
                        .ask_now(w, now)
                        .or_else(|| if steal { ep.steal_tail(w) } else { None });
                    if let Some((t, ticket)) = got {
                        running[w] = Some((now + secs[w], t, ticket));
                    }
                }
            }
            let next = (0..n)
                .filter_map(|w| running[w].map(|(end, _, _)| (end, w)))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((end, w)) = next else {
                if ep.is_stalled() {
                    left = ep.dissolve();
                    break;
                }
                if ep.is_finished() {
                    break;
                }
                // Waiting PUs were told to ask again.
                continue;
            };
            now = end;
            let (_, t, ticket) = running[w].take().expect("running");
            ran[w].push(t);
            ep.task_done(ticket, secs[w], now);
        }
        (ran, left, now)
    }

    fn assert_exactly_once(ran: &[Vec<usize>], left: &[usize], w: usize) {
        let mut seen = vec![0u32; w];
        for &t in ran.iter().flatten().chain(left) {
            seen[t] += 1;
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "tasks not handed out exactly once: {:?}",
            seen.iter()
                .enumerate()
                .filter(|(_, c)| **c != 1)
                .take(10)
                .collect::<Vec<_>>()
        );
    }

    /// Static with equal given speeds hands two workers equal halves; the
    /// one 4 times faster takes the slow one's tail once it has run its
    /// own, so the epoch ends near the balanced 32 s instead of 80 s, every
    /// task once; the slow worker keeps the head of its half and takes
    /// nothing.
    #[test]
    fn a_faster_worker_takes_the_tail_of_a_slower_ones_block() {
        let mut ep = epoch("static:speeds=1/1", 2, 40);
        let (ran, left, end) = run_with(&mut ep, &[1.0, 4.0], false);
        assert_exactly_once(&ran, &left, 40);
        assert_eq!((ran[0].len(), end), (20, 80.0), "{ran:?}");

        let mut ep = epoch("static:speeds=1/1", 2, 40);
        assert!(ep.steal_tail(0).is_none(), "nothing measured yet");
        let (ran, left, end) = run_with(&mut ep, &[1.0, 4.0], true);
        assert_exactly_once(&ran, &left, 40);
        assert!(left.is_empty());
        assert!(end <= 36.0, "ended at {end} s: {ran:?}");
        assert!(ran[1].len() >= 5, "{ran:?}");
        assert!(ran[1].iter().all(|&t| (20..40).contains(&t)), "{ran:?}");
        assert_eq!(ep.stats().stolen as usize, ran[0].len() - 20);
    }

    /// The owner keeps the task it runs: its one queued task is taken by
    /// a faster idle worker (a CPU runs one task at a time, so a block of
    /// two has one running and one queued).
    #[test]
    fn a_queued_task_behind_a_running_one_can_be_taken() {
        // Blocks of 3 each; worker 0 takes 4 s per task. At 4 s it starts
        // its second task with its third queued: worker 1 (1 s per task,
        // idle since 3 s) takes it and the epoch ends at 8 s, not 12 s.
        let mut ep = epoch("static:speeds=1/1", 2, 6);
        let (ran, left, end) = run_with(&mut ep, &[4.0, 1.0], true);
        assert_exactly_once(&ran, &left, 6);
        assert_eq!(end, 8.0, "{ran:?}");
        assert_eq!(ran[0], vec![0, 1]);
        assert_eq!(ran[1], vec![3, 4, 5, 2]);
    }

    #[test]
    fn every_task_is_handed_out_exactly_once() {
        for name in NAMES {
            for workers in 1..=4 {
                for w in [1usize, 3, 1000] {
                    // Speeds: increasing, decreasing, the last worker 50x
                    // slower (zero shares).
                    let speeds: [Vec<f64>; 3] = [
                        (0..workers).map(|i| 0.01 * (1 + i) as f64).collect(),
                        (0..workers).map(|i| 0.01 * (workers - i) as f64).collect(),
                        (0..workers)
                            .map(|i| if i + 1 == workers { 0.5 } else { 0.01 })
                            .collect(),
                    ];
                    for secs in speeds {
                        let mut ep = epoch(name, workers, w);
                        let (ran, left) = run(&mut ep, &secs);
                        assert_exactly_once(&ran, &left, w);
                        assert!(
                            left.is_empty(),
                            "{name}, {workers} workers {secs:?}, W={w}: stalled with {} tasks",
                            left.len()
                        );
                        assert!(ep.is_finished(), "{name} {workers} {w}: {ep:?}");
                        assert_eq!(ep.stats().handed, w as u64);
                    }
                }
            }
        }
    }

    #[test]
    fn a_faster_worker_gets_more_tasks_under_plb_hac() {
        let mut ep = epoch("plb-hac", 2, 2000);
        // Worker 1 is 3x slower.
        let (ran, left) = run(&mut ep, &[0.001, 0.003]);
        assert_exactly_once(&ran, &left, 2000);
        let (fast, slow) = (ran[0].len(), ran[1].len());
        assert!(
            fast as f64 > 2.0 * slow as f64,
            "fast worker ran {fast}, slow one {slow}"
        );
    }

    #[test]
    fn a_cpu_worker_asking_again_completes_a_block_whose_reports_were_lost() {
        let mut ep = epoch("acosta", 2, 100);
        // Worker 0 takes its probe block; its reports never come.
        let mut handed = Vec::new();
        let (t, _) = ep.ask_now(0, 0.0).expect("a probe block for worker 0");
        handed.push(t);
        while let Some((t, _)) = ep.take_queued(0) {
            handed.push(t);
        }
        // Worker 1 runs its probe block, then waits at Acosta's barrier.
        while let Some((t, ticket)) = ep.ask_now(1, 0.1) {
            handed.push(t);
            ep.task_done(ticket, 0.01, 0.1);
        }
        assert!(!ep.is_stalled(), "worker 0 still runs its block");
        assert_eq!(ep.stats().forced, 0);
        // Worker 0 (a CPU) asks again: its block's reports were lost.
        if let Some((t, ticket)) = ep.ask_now(0, 0.2) {
            handed.push(t);
            ep.task_done(ticket, 0.01, 0.2);
        }
        assert_eq!(ep.stats().forced, 1);
        let (ran, left) = run(&mut ep, &[0.01, 0.01]);
        assert!(left.is_empty());
        let mut all = ran;
        all.push(handed);
        assert_exactly_once(&all, &[], 100);
    }

    #[test]
    fn dissolve_returns_every_task_not_handed_out() {
        let mut ep = epoch("hdss", 2, 50);
        let (a, ta) = ep.ask_now(0, 0.0).expect("task");
        let (b, _) = ep.ask_now(1, 0.0).expect("task");
        assert!(!ep.is_stalled(), "both PUs run a block");
        let mut handed = vec![a, b];
        if let Some((t, _)) = ep.take_queued(0) {
            handed.push(t);
        }
        let left = ep.dissolve();
        assert_eq!(handed.len() + left.len(), 50);
        assert_eq!(ep.held(), 0);
        assert!(ep.is_finished() && !ep.is_open());
        assert!(ep.dissolve().is_empty(), "dissolve gives the tasks once");
        assert!(
            ep.ask_now(0, 1.0).is_none(),
            "a dissolved epoch gives nothing"
        );
        assert!(
            !ep.task_done(ta, 0.01, 1.0),
            "reports after dissolve are ignored"
        );
        assert_exactly_once(&[handed], &left, 50);
        assert_eq!(ep.stats().dissolved, left.len() as u64);
    }

    /// PU 1 waits first; PU 0's `Wait` then opens a "step" in which only
    /// PU 1 has work (PLB-HAC when the opener's share is 0).
    struct OpensOnWait {
        pool: crate::balance::WorkPool,
        open: bool,
    }

    impl Balancer for OpensOnWait {
        fn name(&self) -> &'static str {
            "opens-on-wait"
        }
        fn next(&mut self, pu: usize, _now: f64) -> Decision {
            match (pu, self.open) {
                (0, false) => {
                    self.open = true;
                    Decision::Wait
                }
                (1, true) => match self.pool.take(1, 1e9) {
                    Some(b) => Decision::Run(b),
                    None => Decision::Done,
                },
                _ if self.pool.remaining() == 0 => Decision::Done,
                _ => Decision::Wait,
            }
        }
        fn completed(&mut self, _done: Completion) {}
        fn remaining(&self) -> u64 {
            self.pool.remaining()
        }
    }

    /// Never gives anything.
    struct AlwaysWaits(u64);

    impl Balancer for AlwaysWaits {
        fn name(&self) -> &'static str {
            "always-waits"
        }
        fn next(&mut self, _pu: usize, _now: f64) -> Decision {
            Decision::Wait
        }
        fn completed(&mut self, _done: Completion) {}
        fn remaining(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_wait_that_changes_the_balancer_lets_the_waiting_pus_ask_again() {
        let b = OpensOnWait {
            pool: crate::balance::WorkPool::new(20),
            open: false,
        };
        let mut ep: Epoch<usize> =
            Epoch::with_balancer(0, Box::new(b), &cpus(2), (0..20).collect(), 0.0).expect("epoch");
        assert!(
            ep.ask_now(0, 0.0).is_none(),
            "PU 0 waits, opening PU 1's step"
        );
        assert!(!ep.is_stalled(), "PU 1 has its block");
        let (ran, left) = run(&mut ep, &[0.01, 0.01]);
        assert!(left.is_empty());
        assert_eq!(ran[1].len(), 20);
        assert_exactly_once(&ran, &left, 20);
    }

    #[test]
    fn a_balancer_that_always_waits_stalls_after_two_rounds() {
        let mut ep: Epoch<usize> = Epoch::with_balancer(
            0,
            Box::new(AlwaysWaits(30)),
            &cpus(3),
            (0..30).collect(),
            0.0,
        )
        .expect("epoch");
        assert!(ep.ask_now(0, 0.0).is_none());
        assert!(ep.is_stalled());
        assert_eq!(
            ep.driver.stats().asks,
            9,
            "every PU asked, then asked again twice"
        );
        assert_eq!(ep.dissolve().len(), 30);
        assert!(!ep.is_stalled());
        let wrong = Epoch::with_balancer(0, Box::new(AlwaysWaits(5)), &cpus(1), vec![1], 0.0);
        assert!(wrong.is_err(), "units and tasks must match");
    }

    #[test]
    fn pipelined_workers_get_a_grace_before_lost_reports() {
        let pus = [EpochPu {
            worker: 3,
            kind: WorkerKind::OpenCl,
        }];
        let mut ep: Epoch<usize> = Epoch::new(
            1,
            &spec("plb-hac"),
            &Tuning::default(),
            &pus,
            None,
            (0..64).collect(),
            0.0,
        )
        .expect("epoch");
        let (_, t1) = ep.ask_now(3, 0.0).expect("first block");
        while ep.take_queued(3).is_some() {}
        // Unreported: asking again within the grace gives nothing.
        assert!(ep.ask_now(3, 0.1).is_none());
        assert!(ep.ask_now(3, 0.5).is_none());
        assert_eq!(ep.stats().forced, 0);
        // After the grace the block completes and a new one comes.
        assert!(ep.ask_now(3, 0.1 + LOST_GRACE_MIN_S + 0.01).is_some());
        assert_eq!(ep.stats().forced, 1);
        // The late report of the first block is ignored.
        assert!(!ep.task_done(t1, 0.01, 2.0));
    }

    #[test]
    fn reports_complete_a_block_only_when_the_whole_group_is_done() {
        let mut ep = epoch("plb-hac", 1, 640);
        // x_init = 640 / 64 = 10 tasks in the first block.
        let mut tickets = Vec::new();
        while let Some((_, t)) = ep.take_queued(0).or_else(|| {
            if tickets.is_empty() {
                ep.ask_now(0, 0.0)
            } else {
                None
            }
        }) {
            tickets.push(t);
        }
        assert_eq!(tickets.len(), 10);
        for (i, t) in tickets.iter().enumerate() {
            let completed = ep.task_done(*t, 0.01, 0.01 * (i + 1) as f64);
            assert_eq!(completed, i == tickets.len() - 1);
        }
        // A second report of the same task is stale.
        assert!(!ep.task_done(tickets[0], 0.01, 1.0));
        assert_eq!(ep.stats().completions, 1);
    }

    #[test]
    fn bad_configurations_give_the_tasks_back() {
        let (tasks, why) = Epoch::new(
            0,
            &spec("plb-hac"),
            &Tuning::default(),
            &[],
            None,
            vec![1, 2, 3],
            0.0,
        )
        .expect_err("no PU");
        assert_eq!(tasks, vec![1, 2, 3]);
        assert!(why.contains("worker"));
        let bad = BalancerSpec::parse("static:speeds=1/2/3").unwrap();
        let (tasks, why) = Epoch::new(0, &bad, &Tuning::default(), &cpus(2), None, vec![4], 0.0)
            .expect_err("3 speeds for 2 workers");
        assert_eq!(tasks, vec![4]);
        assert!(why.contains("speeds"), "{why}");
        assert_eq!(epoch_min(1), 8);
        assert_eq!(epoch_min(2), 8);
        assert_eq!(epoch_min(5), 20);
    }
}
