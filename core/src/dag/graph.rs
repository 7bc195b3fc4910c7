//! The task-graph policies' scheduler (`plb-heft`, `dada`, `dada-cp`) over
//! [`GraphTask`], and a worker's pop as the StarPU adapter and the
//! interleaving tests run it: locked steps ([`GraphSched::pop_step`]) with
//! the placement of a batch ([`super::decide`]) between them, without the
//! lock. Whom to wake follows [`crate::sleepers`].
//!
//! * **push**: the task joins the ready list; one idle worker is woken to
//!   place it, unless a worker is placing a batch (it will look again) or,
//!   among CPU workers alone, the pusher is a member ending a task, which
//!   places it at its next pop ([`GraphSched::push_from`]).
//! * **pop**: with no batch due, a worker takes its own line's next task
//!   holding that line alone ([`pop_own`]; each line is the caller's,
//!   behind its own lock in the adapter). Otherwise, or on an empty line,
//!   the locked steps: a worker first takes the ready list as a batch (at most
//!   [`BATCH_MAX`] tasks) if no other worker is placing one, places it
//!   without the lock and installs it on the workers' lines (waking the
//!   idle workers that got tasks), up to [`ACTIVATIONS_PER_POP`] times;
//!   then it takes its line's next task (highest priority first, data
//!   already on its node first) or steals one it would finish first.
//! * **completion**: the worker's expected end is corrected.
//! * **deferred tasks** ([`super::decide`]: a kind that could run them is
//!   still being trained) wait apart; they go back to the ready list when
//!   a worker's first sample of a codelet arrives
//!   ([`GraphSched::model_learned`]), or a few at a time when a worker
//!   finds its line empty.
//! * **window** (`plb-heft`, [`GraphSched::set_window`]; in force when a
//!   member is an accelerator): each line holds at most so many tasks; a
//!   batch is at most the lines' room, taken from the ready list highest
//!   priority first ([`super::ready`]). A
//!   task whose best worker's line is full is held (back to the ready
//!   list, ahead of its priority's others) and no batch is taken until a
//!   full line gives a task (its own worker's pop, reported by
//!   [`GraphSched::took_own`] when it took it alone, or a steal), a task
//!   arrives or completes, or deferred tasks are released. Lines only
//!   shrink while a batch is placed: if one did, the tasks held are looked
//!   at again at once (the room they wait for may be there already, and
//!   no later pop of a full line would tell).

use std::collections::VecDeque;

use super::cpu_order::CpuOrder;
use super::decide::{Batch, Decided, GraphTask, Member, Spare};
use super::line_order::LineOrder;
use super::lines::{Line, Placed, StealCharges, data_coming, queue_placed_by, steal_placed};
use super::rank::RANKS_CAP;
use super::ready::ReadyList;
use super::{DATA_PENALTY, PerTask, concurrent_share};
use crate::balance::WorkerKind;
use crate::sleepers::Sleepers;
use crate::worker_queues::{Glance, QueueSet};

/// Most ready tasks one activation places (the rest wait for the next).
pub const BATCH_MAX: usize = 512;

/// Activations one pop runs back to back while tasks keep arriving.
pub const ACTIVATIONS_PER_POP: usize = 4;

/// An idle accelerator steals a task with slack to spare (ranked, and its
/// worker would start it by its latest start) only if it finishes it
/// sooner than that worker by this much of its own time there: the steal
/// gives up the input already prefetched to the victim and moves it again.
/// A CPU worker steals for any gain, and so does an accelerator when the
/// task is late or unranked (a CPU worker's gain counts the data penalty
/// when placement charges it: [`GraphSched::set_data_penalty`]).
pub const ACCELERATOR_STEAL_MARGIN: f64 = 0.5;

/// One scheduling context under a task-graph policy: everything but the
/// workers' lines, which the caller keeps apart ([`QueueSet`]: the StarPU
/// adapter locks each worker's line on its own) and passes to each call.
/// Tasks are added to a line only by calls on this scheduler (under its
/// lock in the adapter); a worker may take its own line's next task with
/// [`pop_own`] holding its line alone.
pub struct GraphSched<T> {
    ready: ReadyList<T>,
    members: Vec<Member>,
    /// A worker is placing a batch (taken out of `ready`).
    activating: bool,
    /// Tasks no worker of the context can run (offered again when workers
    /// join).
    stranded: Vec<T>,
    /// Tasks deferred until a kind being trained has a prediction.
    waiting: VecDeque<T>,
    /// Tasks deferred so far (a task deferred twice counts twice).
    deferrals: u64,
    /// Tasks held back for room so far (each time counts).
    held_for_room: u64,
    /// Per worker id: the member's kind (`None`: not a member). A CPU
    /// worker runs one task at a time.
    kinds: Vec<Option<WorkerKind>>,
    /// Tasks completed so far.
    completions: u64,
    /// Per worker id: `completions + 1` and the tasks its line had started
    /// when it last released waiting tasks while dry. It does not release
    /// again until a task completes or it starts one (that would only defer
    /// them again: a dry worker of a kind still in training otherwise
    /// spins through the same tasks until its sample arrives).
    released_at: Vec<(u64, u64)>,
    rotate: usize,
    /// Members whose line held a task placed with a transfer to it when
    /// the last batch was taken: the transfers a steal's transfer is
    /// counted beside.
    inbound_seen: usize,
    /// Most tasks a line holds, when placement waits for room
    /// ([`GraphSched::set_window`]).
    window: Option<Window>,
    /// Placement charges the data penalty: CPU thieves are charged it
    /// too ([`GraphSched::set_data_penalty`]).
    data_penalty: bool,
    /// The last placement held tasks back for want of room: no batch is
    /// taken until a full line gives a task, a task arrives or completes,
    /// or deferred tasks are released (see [`GraphSched::unblock`]'s
    /// callers).
    blocked: bool,
    /// A task arrived or completed, or a full line made room, since the
    /// last batch was taken: held tasks of that batch may find room at
    /// once.
    stirred: bool,
    /// Each member's line length when the last batch was taken (lines
    /// only shrink while a batch is placed).
    taken_lens: Vec<(usize, usize)>,
    /// The members' glances as the last batch was taken (kept to reuse
    /// its room).
    glances: Vec<Glance>,
    /// The last placed batch's per-member lists, refilled by the next.
    spare: Spare,
    /// The ids of the tasks completed since the last batch was taken, when
    /// listed ([`GraphSched::list_completed`]; `None`: more than
    /// [`RANKS_CAP`]).
    completed: Option<Vec<usize>>,
    /// Whether completed tasks are listed.
    listing_completed: bool,
    /// The worker kinds (as in [`WorkerKind::ALL`]) found able to run a
    /// task of some batch placed so far: with a window, only their lines'
    /// room sizes a batch ([`GraphSched::take_batch`]).
    capable_kinds: [bool; WorkerKind::ALL.len()],
    /// One member alone is of the kinds found able to run the tasks
    /// placed so far ([`GraphSched::lone_worker`]).
    lone: bool,
    /// How a context of CPU workers alone orders its tasks
    /// ([`GraphSched::set_cpu_order`]).
    cpu_order: CpuOrder,
    /// Whether the lines and the ready list ignore priorities (arrival
    /// order): for a lone worker, and per [`GraphSched::set_cpu_order`].
    arrival: bool,
    /// How the accelerators' lines order a priority's tasks
    /// ([`GraphSched::set_line_order`]).
    line_order: LineOrder,
    /// Whether, with the members as they are, the accelerators' lines
    /// order by latest start ([`LineOrder::by_latest_start`]).
    by_latest_start: bool,
    /// Placed tasks the line order queued ahead of a task of their
    /// priority queued before them, so far.
    line_jumps: u64,
}

/// How many tasks a line may hold before placement waits for room: the
/// ready tasks wait in the ready list, highest priority placed first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// An accelerator's line.
    pub accelerator: usize,
    /// A CPU worker's line.
    pub cpu: usize,
}

impl Window {
    /// The bound of a CPU worker's line (`cpu`) or an accelerator's.
    pub fn cap(&self, cpu: bool) -> usize {
        if cpu { self.cpu } else { self.accelerator }
    }
}

/// What one pop has done so far.
#[derive(Debug, Default)]
pub struct GraphRound {
    activations: usize,
    wake: Vec<usize>,
}

/// The outcome of one locked step of a pop.
pub enum GraphStep<T> {
    /// Wake these workers (the idle ones the last placement gave tasks)
    /// and place this batch without the lock ([`super::decide`]), then
    /// step again with the result.
    Place(Box<Batch<T>>, Vec<usize>),
    /// The worker's task; wake these workers after unlocking.
    Task(T, Vec<usize>),
    /// No task; wake these workers after unlocking (possibly the asking
    /// worker itself: it must pop again rather than sleep).
    Empty(Vec<usize>),
}

impl<T: GraphTask> GraphSched<T> {
    /// A scheduler for worker ids below `max_workers`.
    pub fn new(max_workers: usize) -> GraphSched<T> {
        GraphSched {
            ready: ReadyList::new(),
            members: Vec::new(),
            activating: false,
            stranded: Vec::new(),
            waiting: VecDeque::new(),
            deferrals: 0,
            held_for_room: 0,
            kinds: vec![None; max_workers],
            completions: 0,
            released_at: vec![(0, 0); max_workers],
            rotate: 0,
            inbound_seen: 0,
            window: None,
            data_penalty: false,
            blocked: false,
            stirred: false,
            taken_lens: Vec::new(),
            glances: Vec::new(),
            spare: Spare::default(),
            completed: Some(Vec::new()),
            listing_completed: false,
            capable_kinds: [false; WorkerKind::ALL.len()],
            lone: false,
            cpu_order: CpuOrder::Priority,
            arrival: false,
            line_order: LineOrder::Arrival,
            by_latest_start: false,
            line_jumps: 0,
        }
    }

    /// How the accelerators' lines order the tasks of one priority (the
    /// default here: arrival order).
    pub fn set_line_order(&mut self, order: LineOrder) {
        self.line_order = order;
        self.refresh_lone();
    }

    /// How a context of CPU workers alone orders its tasks (the default
    /// here: by priority; [`CpuOrder::Auto`] by the members' number); a
    /// context with an accelerator keeps priorities.
    pub fn set_cpu_order(&mut self, order: CpuOrder) {
        self.cpu_order = order;
        self.refresh_lone();
    }

    /// Placed tasks the line order ([`GraphSched::set_line_order`]) queued
    /// ahead of a task of their priority queued before them, so far.
    pub fn line_jumps(&self) -> u64 {
        self.line_jumps
    }

    /// Something changed that may give held tasks room.
    fn unblock(&mut self) {
        self.blocked = false;
        self.stirred = true;
    }

    /// Bounds each line (`None`: every ready task is placed at once).
    pub fn set_window(&mut self, window: Option<Window>) {
        self.window = window;
        self.refresh_lone();
    }

    /// Recomputes [`GraphSched::lone_worker`] after the members or the
    /// capable kinds changed; the ready list follows (arrival order for a
    /// lone worker, and per [`GraphSched::set_cpu_order`]), and so does
    /// the lines' order.
    fn refresh_lone(&mut self) {
        self.lone = self.lone_worker();
        self.arrival = self.lone
            || !self
                .cpu_order
                .by_priority(self.has_accelerator(), self.members.len());
        // The line order follows the members too.
        self.by_latest_start = self.line_order.by_latest_start(&self.members);
        self.ready
            .set_by_priority(self.window.is_some() && !self.arrival);
    }

    /// Whether placement charges `dmda`'s data penalty (HEFT does): then a
    /// CPU worker's steal is charged it as well, StarPU's predicted
    /// transfer once more, weighing the transfer as placement does.
    pub fn set_data_penalty(&mut self, on: bool) {
        self.data_penalty = on;
    }

    /// Tasks held here (ready and deferred; not the stranded ones, not
    /// those queued on lines).
    pub fn held(&self) -> usize {
        self.ready.len() + self.waiting.len()
    }

    /// A batch waits to be placed and nobody places one: a pop must take
    /// the scheduler's lock ([`GraphSched::pop_step`]) rather than only
    /// its line ([`pop_own`]).
    pub fn placing_due(&self) -> bool {
        !self.ready.is_empty() && !self.activating && !self.members.is_empty() && !self.blocked
    }

    /// The lines' bound in force (what [`pop_own`]'s callers compare a
    /// line's length with): the window, when a member is an
    /// accelerator. Among CPU workers alone it bounds the backlog HEFT
    /// sees, and runs turned bimodal: with 2 CPU workers, one 4x slower
    /// (EMULATED), the slower one got 0 to 188 of 5984 tasks in 8 runs of
    /// 11 and about 2500 in the other 3, which took twice as long
    /// (docs/results.md, eleventh round).
    pub fn windowed(&self) -> Option<Window> {
        self.window.filter(|_| !self.lone && self.has_accelerator())
    }

    /// Whether a member is an accelerator's worker (not a CPU worker).
    fn has_accelerator(&self) -> bool {
        self.members.iter().any(|m| m.kind != WorkerKind::Cpu)
    }

    /// Tasks held back for room so far (a task held twice counts twice).
    pub fn held_for_room(&self) -> u64 {
        self.held_for_room
    }

    /// Tasks deferred so far (see [`super::decide::decide`]).
    pub fn deferrals(&self) -> u64 {
        self.deferrals
    }

    /// A worker's first sample of a codelet arrived: the deferred tasks go
    /// back to the ready list (ahead of newer ones); returns one idle
    /// worker to wake to place them.
    pub fn model_learned(&mut self, sleepers: &Sleepers) -> Vec<usize> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        self.release_waiting(self.waiting.len());
        self.one_to_place(sleepers)
    }

    /// Moves the `n` oldest deferred tasks to the front of the ready list.
    fn release_waiting(&mut self, n: usize) {
        let n = n.min(self.waiting.len());
        if n > 0 {
            self.unblock();
        }
        for t in self.waiting.drain(..n).rev() {
            self.ready.push_front(t);
        }
    }

    /// The context's workers.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Workers joined: they start awake; stranded tasks are offered again.
    pub fn add_workers(&mut self, joined: &[Member], sleepers: &Sleepers) {
        for m in joined {
            if !self.members.iter().any(|x| x.id == m.id) {
                self.members.push(*m);
            }
            if m.id >= self.kinds.len() {
                self.kinds.resize(m.id + 1, None);
                self.released_at.resize(m.id + 1, (0, 0));
            }
            self.kinds[m.id] = Some(m.kind);
            sleepers.take(m.id);
        }
        let stranded = std::mem::take(&mut self.stranded);
        self.ready.extend(stranded);
        self.refresh_lone();
        self.unblock();
    }

    /// Workers left: their queued tasks go back to the ready list; returns
    /// one idle worker to wake (it places them).
    pub fn remove_workers(
        &mut self,
        workers: &[usize],
        lines: &impl QueueSet<Placed<T>>,
        sleepers: &Sleepers,
    ) -> Vec<usize> {
        self.members.retain(|m| !workers.contains(&m.id));
        self.refresh_lone();
        self.unblock();
        for &w in workers {
            if let Some(k) = self.kinds.get_mut(w) {
                *k = None;
            }
            let back = lines.with(w, |q| q.take_all()).unwrap_or_default();
            self.ready.extend(back.into_iter().map(|(p, _)| p.task));
        }
        // The kinds the deferred tasks waited for may have left.
        self.release_waiting(self.waiting.len());
        if self.ready.is_empty() {
            return Vec::new();
        }
        self.one_to_place(sleepers)
    }

    /// One idle worker to place the ready tasks, unless a worker is
    /// placing a batch (it looks at the ready list again when it is done).
    fn one_to_place(&self, sleepers: &Sleepers) -> Vec<usize> {
        if self.activating {
            return Vec::new();
        }
        sleepers
            .wake_one(self.members.iter().map(|m| m.id), |_| true)
            .into_iter()
            .collect()
    }

    /// A task became ready: returns the idle worker to wake (one, to place
    /// it), unless a worker is placing a batch.
    pub fn push(&mut self, task: T, sleepers: &Sleepers) -> Vec<usize> {
        self.push_from(task, sleepers, None)
    }

    /// [`GraphSched::push`] by `pusher`, the worker pushing, when it pops
    /// before it can sleep (a worker ending a task, whose completion made
    /// this one ready). In a context of CPU workers alone, a member not
    /// marked idle wakes nobody: it places the task itself at its next pop
    /// (on a chain of tasks the next one then starts on the worker that
    /// ended the last, without a hand-off to another worker and back). Any
    /// other pusher wakes one idle worker as `push` does. A worker marked
    /// idle waits for a wake, and its pops return nothing until one comes.
    /// Where the context has accelerators the wake stays: an accelerator's
    /// worker ends its asynchronous tasks while it may be so marked (with
    /// every member's pushes waking nobody, StarPU-SimGrid's Cholesky on
    /// GPUs deadlocked), and with the CPU workers' pushes waking nobody the
    /// SIMULATED held-out shapes were 1.1 % slower in geometric mean
    /// (sirocco with 3 GPUs, Cholesky 4800: 60 → 68 ms).
    pub fn push_from(&mut self, task: T, sleepers: &Sleepers, pusher: Option<usize>) -> Vec<usize> {
        self.ready.push_back(task);
        self.unblock();
        let member = |w: usize| self.kinds.get(w).copied().flatten().is_some();
        let pops_next =
            !self.has_accelerator() && pusher.is_some_and(|w| member(w) && !sleepers.is_idle(w));
        if pops_next {
            return Vec::new();
        }
        self.one_to_place(sleepers)
    }

    /// Takes a batch to place if one is ready and nobody places one.
    fn take_batch(&mut self, now: f64, lines: &impl QueueSet<Placed<T>>) -> Option<Batch<T>> {
        if !self.placing_due() {
            return None;
        }
        // Each line as its last holder left it, read once for the room,
        // the lengths kept and the batch's view.
        let mut glances = std::mem::take(&mut self.glances);
        glances.clear();
        glances.extend(
            self.members
                .iter()
                .map(|m| lines.glance(m.id).unwrap_or_default()),
        );
        let window = self.windowed();
        let mut spare = std::mem::take(&mut self.spare);
        spare.clear();
        if let Some(w) = window {
            spare.room.extend(
                self.members
                    .iter()
                    .zip(&glances)
                    .map(|(m, g)| w.cap(m.kind == WorkerKind::Cpu).saturating_sub(g.len)),
            );
        }
        let mut n = self.ready.len().min(BATCH_MAX);
        if window.is_some() {
            // The room of a kind no task placed so far could run does not
            // count (before any placement, every kind's does): a batch as
            // large as the room of an accelerator that runs none of the
            // application's codelets was priced whole at every activation
            // and almost all of it held (REAL, 1 CPU + 1 OpenCL worker,
            // Debian's Cholesky: 47 ms of placements for 816 tasks).
            // When no member is of such a kind (the workers that ran the
            // tasks so far left), every line's room counts again: the
            // batch must not wait for workers that are gone.
            let capable = |m: &Member| self.capable_kinds[m.kind.index()];
            let any_capable = self.members.iter().any(capable);
            let counts = |m: &Member| !any_capable || capable(m);
            let total: usize = self
                .members
                .iter()
                .zip(&spare.room)
                .filter(|(m, _)| counts(m))
                .fold(0, |a, (_, &r)| a.saturating_add(r));
            if total == 0 {
                self.blocked = true;
                self.glances = glances;
                self.spare = spare;
                return None;
            }
            n = n.min(total);
        }
        self.activating = true;
        self.stirred = false;
        self.taken_lens.clear();
        self.taken_lens.extend(
            self.members
                .iter()
                .zip(&glances)
                .map(|(m, g)| (m.id, g.len)),
        );
        let tasks = self.ready.take(n);
        self.rotate = self.rotate.wrapping_add(1);
        let Spare {
            mut members,
            mut loads,
            mut queued,
            mut by_priority,
            mut inbound,
            room,
            completed,
        } = spare;
        members.extend(self.members.iter().copied());
        for (m, g) in self.members.iter().zip(&glances) {
            loads.push(g.load_s(now));
            queued.push(g.len);
            // The split by priority, and whether data is on its way, are
            // read from the line itself (only when it holds tasks).
            let (p, data_coming) = if g.len > 0 {
                lines
                    .with(m.id, |q| (q.queued_by_priority(), data_coming(q)))
                    .unwrap_or_default()
            } else {
                (Vec::new(), false)
            };
            by_priority.push(p);
            inbound.push(data_coming);
        }
        self.inbound_seen = inbound.iter().filter(|&&b| b).count();
        self.glances = glances;
        Some(Batch {
            tasks,
            loads,
            queued,
            by_priority,
            inbound,
            members,
            rotate: self.rotate,
            outstanding: 0,
            ranks: PerTask::new(),
            room,
            completed: self.completed.replace(completed),
        })
    }

    /// Queues a placed batch; returns the idle workers that got a task.
    fn install(
        &mut self,
        decided: Decided<T>,
        now: f64,
        lines: &impl QueueSet<Placed<T>>,
        sleepers: &Sleepers,
    ) -> Vec<usize> {
        let mut new_kind = false;
        for (seen, &now_capable) in self.capable_kinds.iter_mut().zip(&decided.capable_kinds) {
            new_kind |= now_capable && !*seen;
            *seen |= now_capable;
        }
        if new_kind {
            self.refresh_lone();
        }
        // A line that shrank while the batch was placed may have room for
        // the tasks held.
        let shrank = self
            .taken_lens
            .iter()
            .any(|&(w, len)| lines.glance(w).unwrap_or_default().len < len);
        let mut wake = Vec::new();
        let arrival = self.arrival;
        for d in decided.decisions {
            let w = d.worker;
            // A worker that left during the placement: back to ready.
            if !self.members.iter().any(|m| m.id == w) {
                self.ready.push_back(d.placed.task);
                continue;
            }
            let priority = if arrival { 0 } else { d.placed.priority };
            let mut placed = Some(Placed {
                latest_start_s: now + d.slack_s,
                priority,
                ..d.placed
            });
            let latest_start_first = self
                .kinds
                .get(w)
                .copied()
                .flatten()
                .is_some_and(|kind| LineOrder::applies_to(kind, self.by_latest_start));
            let jumped = lines.with(w, |q| {
                placed
                    .take()
                    .is_some_and(|p| queue_placed_by(q, w, p, d.est_s, latest_start_first))
            });
            self.line_jumps += u64::from(jumped == Some(true));
            if let Some(p) = placed {
                // No line for that id.
                self.ready.push_back(p.task);
                continue;
            }
            if sleepers.take(w) {
                wake.push(w);
            }
        }
        if !decided.held.is_empty() {
            // Held until a line they wait for, full now, makes room
            // (`note_taken`), or a task arrives or completes; unless that
            // happened while they were placed.
            self.blocked = !self.stirred && !shrank;
            self.held_for_room += decided.held.len() as u64;
            for t in decided.held.into_iter().rev() {
                self.ready.push_front(t);
            }
        }
        self.deferrals += decided.deferred.len() as u64;
        self.waiting.extend(decided.deferred);
        if !decided.stranded.is_empty() {
            log::warn!(
                "{} task(s) no worker of the context can run; held until one joins",
                decided.stranded.len()
            );
            self.stranded.extend(decided.stranded);
        }
        self.spare = decided.spare;
        self.activating = false;
        wake
    }

    /// Whether one member alone is of the kinds found able to run the
    /// tasks placed so far. Then its line and the ready list run in
    /// arrival order and no window holds tasks back: it runs every task,
    /// one after the other, and never idles while one is ready, so no
    /// order changes the makespan through the graph; arrival order runs a
    /// task soon after the tasks that wrote its inputs, while they are
    /// still in the caches (measured in docs/balancers.md, "A lone worker
    /// runs in arrival order").
    fn lone_worker(&self) -> bool {
        self.members
            .iter()
            .filter(|m| self.capable_kinds[m.kind.index()])
            .count()
            == 1
    }

    /// `worker`'s next task from its line (data on `node` first), or a
    /// steal; its expected end is updated.
    fn next_for(
        &mut self,
        worker: usize,
        node: usize,
        now: f64,
        lines: &impl QueueSet<Placed<T>>,
    ) -> Option<T> {
        let cpu = self.kind_of(worker) == WorkerKind::Cpu;
        if let Some((t, before)) = lines.with(worker, |q| pop_own(q, cpu, node, now)).flatten() {
            self.note_taken(cpu, before);
            return Some(t);
        }
        let t = self.steal_for(worker, cpu, now, lines);
        if t.is_some() {
            // The victim's line may have been full.
            self.note_taken(cpu, usize::MAX);
        }
        t
    }

    /// A task was taken from a line that held `before` tasks (`cpu`: a
    /// CPU worker's): a full line made room, and tasks held for it are
    /// looked at again.
    fn note_taken(&mut self, cpu: bool, before: usize) {
        if self.windowed().is_some_and(|w| before >= w.cap(cpu)) {
            self.unblock();
        }
    }

    /// `worker` took a task from its own line alone ([`pop_own`]), which
    /// held `before` tasks: returns an idle worker to wake to place the
    /// tasks held for room, if that made room.
    pub fn took_own(&mut self, worker: usize, before: usize, sleepers: &Sleepers) -> Vec<usize> {
        self.note_taken(self.kind_of(worker) == WorkerKind::Cpu, before);
        if self.placing_due() {
            self.one_to_place(sleepers)
        } else {
            Vec::new()
        }
    }

    /// A task `worker` (its line empty) steals, if any.
    fn steal_for(
        &mut self,
        worker: usize,
        cpu: bool,
        now: f64,
        lines: &impl QueueSet<Placed<T>>,
    ) -> Option<T> {
        // A stolen task runs for the thief's predicted time. Its transfer
        // counts as HEFT counts one beside the transfers under way
        // (StarPU's prediction assumes every accelerator transfers at
        // once): those seen when the last batch was taken; the thief's own
        // line is empty.
        let accelerators = self
            .members
            .iter()
            .filter(|m| m.kind != WorkerKind::Cpu)
            .count();
        let share = concurrent_share(self.inbound_seen, accelerators);
        let members = self.members.iter().map(|m| m.id);
        // An accelerator steals a task with slack to spare only for a gain
        // of half its time there (docs/balancers.md, "Steals").
        let margin = if cpu { 0.0 } else { ACCELERATOR_STEAL_MARGIN };
        // A CPU worker is charged the data penalty too, when placement
        // charges one (docs/balancers.md, "Steals").
        let penalty = if cpu && self.data_penalty {
            DATA_PENALTY
        } else {
            0.0
        };
        // A CPU worker gets data out of an accelerator's memory once that
        // accelerator ends what it runs (`StealCharges::waits_for`).
        let charges = StealCharges {
            transfer_share: share,
            margin,
            penalty,
            waits_for: cpu.then_some(self.kinds.as_slice()),
        };
        let (p, est) = steal_placed(lines, members, worker, now, charges)?;
        lines.with(worker, |q| q.starting(Some(p.task.id()), est, now, cpu));
        Some(p.task)
    }

    /// One locked step of `worker`'s pop at `now` (`node`: its memory
    /// node); `back` is the batch the previous step gave and the caller
    /// placed (`None` on the first step); `lines`: the workers' lines,
    /// reached one at a time. A panic while placing must still hand back a
    /// (possibly empty) [`Decided`], or no batch would ever be placed
    /// again.
    #[allow(clippy::too_many_arguments)]
    pub fn pop_step(
        &mut self,
        worker: usize,
        node: usize,
        now: f64,
        sleepers: &Sleepers,
        round: &mut GraphRound,
        back: Option<Decided<T>>,
        lines: &impl QueueSet<Placed<T>>,
    ) -> GraphStep<T> {
        if let Some(decided) = back {
            let woken = self.install(decided, now, lines, sleepers);
            round.wake.extend(woken);
        }
        let spell = self.completions + 1;
        let own = lines.glance(worker).unwrap_or_default();
        let (queued, starts) = (own.len, own.starts);
        if !self.waiting.is_empty()
            && !self.activating
            && queued == 0
            && self
                .released_at
                .get(worker)
                .is_some_and(|&r| r != (spell, starts))
        {
            // Running dry while tasks wait for a kind's first sample: a
            // few are placed again, once per dry spell of this worker.
            // Each goes to a worker with a prediction whose line is empty,
            // or waits again; as long as some worker has a prediction this
            // drains the wait even if the sample never comes (a lost
            // report): that worker, dry, releases them to itself.
            self.release_waiting(self.members.len());
            self.released_at[worker] = (spell, starts);
        }
        if round.activations < ACTIVATIONS_PER_POP
            && let Some(batch) = self.take_batch(now, lines)
        {
            round.activations += 1;
            let mut wake = std::mem::take(&mut round.wake);
            wake.retain(|&x| x != worker);
            return GraphStep::Place(Box::new(batch), wake);
        }
        let task = self.next_for(worker, node, now, lines);
        if task.is_none() {
            sleepers.fell_idle(worker, true);
        }
        let mut wake = std::mem::take(&mut round.wake);
        let mut again = false;
        if self.placing_due() {
            // Tasks still waiting (and not held for room): an idle worker
            // places them; with none idle and no task for this one, this
            // worker pops again rather than sleep (rule 3).
            let others = self.members.iter().map(|m| m.id);
            match sleepers.wake_one(others, |m| m != worker) {
                Some(m) => wake.push(m),
                None if task.is_none() => {
                    sleepers.take(worker);
                    again = true;
                }
                None => {}
            }
        }
        wake.retain(|&x| x != worker);
        wake.sort_unstable();
        wake.dedup();
        if again {
            wake.push(worker);
        }
        match task {
            Some(t) => GraphStep::Task(t, wake),
            None => GraphStep::Empty(wake),
        }
    }

    /// The kind of member `worker` ([`WorkerKind::Other`] if it is none).
    pub fn kind_of(&self, worker: usize) -> WorkerKind {
        self.kinds
            .get(worker)
            .copied()
            .flatten()
            .unwrap_or(WorkerKind::Other)
    }

    /// Lists the tasks completed from now on, each batch taking those
    /// completed since the previous one ([`Batch::completed`]; for the
    /// upward ranks, which forget completed tasks); off by default.
    pub fn list_completed(&mut self, on: bool) {
        self.listing_completed = on;
    }

    /// `worker` finished the task `id` at `now`.
    pub fn finished(
        &mut self,
        worker: usize,
        id: usize,
        now: f64,
        lines: &impl QueueSet<Placed<T>>,
    ) {
        lines.with(worker, |q| q.finished(Some(id), now));
        if self.listing_completed {
            match self.completed.as_mut() {
                Some(done) if done.len() < RANKS_CAP => done.push(id),
                _ => self.completed = None,
            }
        }
        // Expected ends changed: a dry worker may place waiting tasks again,
        // and held tasks may find room.
        self.completions += 1;
        self.unblock();
    }

    /// Takes every task held (at deinit; normally none), the lines' too.
    pub fn drain(&mut self, lines: &impl QueueSet<Placed<T>>) -> Vec<T> {
        let mut out: Vec<T> = self.ready.take(usize::MAX).into_vec();
        out.extend(self.waiting.drain(..));
        for w in 0..self.kinds.len() {
            let all = lines.with(w, |q| q.take_all()).unwrap_or_default();
            out.extend(all.into_iter().map(|(p, _)| p.task));
        }
        out.append(&mut self.stranded);
        out
    }
}

/// `worker`'s next task from its own line alone (data on `node` first),
/// with its expected end updated: the whole pop when the line has a task
/// and no batch is due ([`GraphSched::placing_due`]), taken holding the
/// line's lock only. `cpu`: the worker runs one task at a time. Returns
/// the task and how many the line held before (the caller reports a full
/// line's room: [`GraphSched::took_own`]); `None`: the line is empty, the
/// pop goes on with [`GraphSched::pop_step`].
pub fn pop_own<T: GraphTask>(
    line: &mut Line<T>,
    cpu: bool,
    node: usize,
    now: f64,
) -> Option<(T, usize)> {
    let before = line.len();
    let (p, est) = line.pop(|p| p.task.input_on_node(node))?;
    line.starting(Some(p.task.id()), est, now, cpu);
    Some((p.task, before))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Method;
    use crate::dag::decide::{GraphModels, decide};
    use crate::dag::lines::queue_placed;
    use crate::dag::testutil::Tile;
    use crate::worker_queues::PlainQueues;

    type TileLines = PlainQueues<Placed<Tile>>;

    /// Pushes tiles of codelet 1 with these (id, priority) pairs.
    fn push_prioritised(s: &mut GraphSched<Tile>, sleepers: &Sleepers, tiles: &[(usize, i32)]) {
        for &(id, priority) in tiles {
            s.push(
                Tile {
                    id,
                    codelet: 1,
                    priority,
                },
                sleepers,
            );
        }
    }

    fn queued(lines: &TileLines, w: usize) -> usize {
        lines.with(w, |q| q.len()).unwrap()
    }

    /// Pops for `w` until it gets a task or none, placing every batch with
    /// `models`; returns the task's id.
    fn pop<T: GraphTask>(
        s: &mut GraphSched<T>,
        lines: &PlainQueues<Placed<T>>,
        models: &mut GraphModels,
        sleepers: &Sleepers,
        w: usize,
    ) -> Option<usize> {
        let mut round = GraphRound::default();
        let mut back = None;
        loop {
            match s.pop_step(w, 0, 0.0, sleepers, &mut round, back.take(), lines) {
                GraphStep::Place(batch, _) => {
                    let facts = batch.facts();
                    let costs = models.costs(&batch, &facts);
                    back = Some(decide(Method::Heft, *batch, facts, costs));
                }
                GraphStep::Task(t, _) => return Some(t.id()),
                GraphStep::Empty(_) => return None,
            }
        }
    }

    /// CUDA worker `id` on memory node `id + 1`.
    fn gpu_member(id: usize) -> Member {
        Member {
            id,
            kind: WorkerKind::Cuda,
            node: id + 1,
        }
    }

    /// A scheduler with `window` for CPU worker 0 and CUDA worker 1.
    fn cpu_and_gpu<T: GraphTask>(window: Window) -> (Sleepers, GraphSched<T>) {
        let sleepers = Sleepers::new(2, true);
        let mut s = GraphSched::new(2);
        s.set_window(Some(window));
        let cpu = Member {
            id: 0,
            kind: WorkerKind::Cpu,
            node: 0,
        };
        s.add_workers(&[cpu, gpu_member(1)], &sleepers);
        (sleepers, s)
    }

    /// A task only CPU workers can run (the accelerator's worker has no
    /// implementation for it).
    struct CpuOnly(Tile);

    impl GraphTask for CpuOnly {
        fn id(&self) -> usize {
            self.0.id
        }
        fn codelet(&self) -> usize {
            self.0.codelet
        }
        fn units(&self) -> f64 {
            1.0
        }
        fn priority(&self) -> i32 {
            self.0.priority
        }
        fn implementation_on(&self, worker: usize) -> Option<u32> {
            (worker == 0).then_some(0)
        }
        fn transfer_to_node_s(&self, _node: usize) -> Option<f64> {
            Some(0.0)
        }
        fn written_bytes_on(&self, _nodes: &[usize], _out: &mut [f64]) {}
        fn input_on_node(&self, _node: usize) -> bool {
            true
        }
    }

    /// Sizes of the batches two activations take for worker 0 (a CPU,
    /// beside an accelerator's worker 1 and CPU worker 2), with a window
    /// of 1 task on a CPU's line and 60 on the accelerator's: 10 tasks
    /// ready, then one more after worker 0 took the task placed on its
    /// line.
    fn batch_sizes<T: GraphTask>(task: impl Fn(usize) -> T) -> (usize, usize) {
        let (sleepers, mut s) = cpu_and_gpu::<T>(Window {
            accelerator: 60,
            cpu: 1,
        });
        let cpu2 = Member {
            id: 2,
            kind: WorkerKind::Cpu,
            node: 0,
        };
        s.add_workers(&[cpu2], &sleepers);
        let lines: PlainQueues<Placed<T>> = PlainQueues::new(3);
        let mut models = GraphModels::default();
        // 1 s on a CPU, 10 s on the accelerator (where it can run).
        models.book.record_now(0, 1, 1.0, 1.0);
        models.book.record_now(2, 1, 1.0, 1.0);
        models.book.record_now(1, 1, 1.0, 10.0);
        (1..=10).for_each(|id| drop(s.push(task(id), &sleepers)));
        let mut sizes = Vec::new();
        for id in [11, 12] {
            let mut round = GraphRound::default();
            let mut back = None;
            while let GraphStep::Place(batch, _) =
                s.pop_step(0, 0, 0.0, &sleepers, &mut round, back.take(), &lines)
            {
                sizes.push(batch.tasks.len());
                let facts = batch.facts();
                let costs = models.costs(&batch, &facts);
                back = Some(decide(Method::Heft, *batch, facts, costs));
            }
            s.push(task(id), &sleepers);
        }
        (sizes[0], sizes[1])
    }

    /// [`cpu_and_gpu`] with `window`, its lines, and a model of codelet 1
    /// (1 s) on each of the workers `trained`.
    fn with_models<T: GraphTask>(
        window: Window,
        trained: &[usize],
    ) -> (Sleepers, GraphSched<T>, PlainQueues<Placed<T>>, GraphModels) {
        let (sleepers, s) = cpu_and_gpu::<T>(window);
        let mut models = GraphModels::default();
        for &w in trained {
            models.book.record_now(w, 1, 1.0, 1.0);
        }
        (sleepers, s, PlainQueues::new(2), models)
    }

    /// A CPU worker and an accelerator's, both with a model of codelet 1
    /// (1 s), windows of 60, and their lines.
    fn two_trained_workers() -> (
        Sleepers,
        GraphSched<Tile>,
        PlainQueues<Placed<Tile>>,
        GraphModels,
    ) {
        with_models(
            Window {
                accelerator: 60,
                cpu: 60,
            },
            &[0, 1],
        )
    }

    /// Pushes task `id` and runs worker 0's activations until none is
    /// due, showing each batch to `see` before placing it.
    fn place_pushed(
        (sleepers, s, lines, models): &mut (
            Sleepers,
            GraphSched<Tile>,
            PlainQueues<Placed<Tile>>,
            GraphModels,
        ),
        id: usize,
        mut see: impl FnMut(&Batch<Tile>),
    ) {
        s.push(Tile::job(id), sleepers);
        let mut round = GraphRound::default();
        let mut back = None;
        while let GraphStep::Place(batch, _) =
            s.pop_step(0, 0, 0.0, sleepers, &mut round, back.take(), lines)
        {
            see(&batch);
            let facts = batch.facts();
            let costs = models.costs(&batch, &facts);
            back = Some(decide(Method::Heft, *batch, facts, costs));
        }
    }

    /// A placed batch hands its per-member lists back and the next batch
    /// refills them: activations after the first allocate none of them.
    #[test]
    fn the_next_batch_refills_the_last_ones_lists() {
        let mut setup = two_trained_workers();
        let mut seen = Vec::new();
        for id in 1..=3 {
            place_pushed(&mut setup, id, |batch| {
                assert_eq!(batch.members.len(), 2);
                seen.push((
                    batch.members.as_ptr(),
                    batch.loads.as_ptr(),
                    batch.room.as_ptr(),
                ));
            });
        }
        assert_eq!(seen.len(), 3, "one activation per task pushed");
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    }

    /// A batch brings the ids of the tasks completed since the previous
    /// one when the scheduler lists them, and none otherwise.
    #[test]
    fn a_batch_lists_the_tasks_completed_since_the_last() {
        for listing in [false, true] {
            let mut setup = two_trained_workers();
            setup.1.list_completed(listing);
            let mut lists = Vec::new();
            for id in 1..=3 {
                place_pushed(&mut setup, id, |batch| lists.push(batch.completed.clone()));
                // Tasks 10 + id and 20 + id complete before the next batch.
                let (_, s, lines, _) = &mut setup;
                s.finished(0, 10 + id, 1.0, lines);
                s.finished(1, 20 + id, 1.0, lines);
            }
            let expected = if listing {
                vec![Some(vec![]), Some(vec![11, 21]), Some(vec![12, 22])]
            } else {
                vec![Some(vec![]); 3]
            };
            assert_eq!(lists, expected, "listing {listing}");
        }
        // More than the ranks' bound: too many to list.
        let mut setup = two_trained_workers();
        setup.1.list_completed(true);
        {
            let (_, s, lines, _) = &mut setup;
            (0..=RANKS_CAP).for_each(|id| s.finished(0, id, 1.0, lines));
        }
        let mut lists = Vec::new();
        place_pushed(&mut setup, 1, |batch| lists.push(batch.completed.clone()));
        assert_eq!(lists, vec![None]);
    }

    /// With a window, a batch is sized by the room of the kinds able to
    /// run the tasks placed so far: an accelerator that runs none of them
    /// does not make every activation price its whole room's worth of
    /// tasks (and hold them).
    #[test]
    fn a_kind_that_runs_nothing_does_not_size_batches() {
        // Before any placement every line's room counts (10 of 62); then
        // only the CPU lines' (at most one task each).
        let (first, second) = batch_sizes(|id| CpuOnly(Tile::job(id)));
        assert_eq!(first, 10);
        assert!(second <= 2, "{second}");
        // Tasks both kinds run: the accelerator's room counts throughout.
        let (first, second) = batch_sizes(Tile::job);
        assert_eq!(first, 10);
        assert!(second > 1, "{second}");
    }

    /// [`cpu_and_gpu`] (a window of 60 tasks on the accelerator's line, 1
    /// on the CPU's) for tasks only the CPU runs, with its lines and the
    /// CPU's model of codelet 1 (1 s).
    fn cpu_only_tasks() -> (
        Sleepers,
        GraphSched<CpuOnly>,
        PlainQueues<Placed<CpuOnly>>,
        GraphModels,
    ) {
        with_models(
            Window {
                accelerator: 60,
                cpu: 1,
            },
            &[0],
        )
    }

    /// One CPU worker beside an accelerator that runs none of the tasks:
    /// once a placement found the CPU alone able to run them, no window
    /// holds tasks back and its line runs in arrival order (on one worker
    /// no order changes the makespan, and priority order costs the
    /// caches).
    #[test]
    fn a_lone_worker_runs_its_line_in_arrival_order() {
        let (sleepers, mut s, lines, mut models) = cpu_only_tasks();
        drop(s.push(CpuOnly(Tile::job(0)), &sleepers));
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 0), Some(0));
        for (id, priority) in [(1, 0), (2, 5), (3, 0), (4, 9), (5, 5)] {
            let t = Tile {
                priority,
                ..Tile::job(id)
            };
            drop(s.push(CpuOnly(t), &sleepers));
        }
        let order: Vec<Option<usize>> = (0..5)
            .map(|_| pop(&mut s, &lines, &mut models, &sleepers, 0))
            .collect();
        assert_eq!(order, [1, 2, 3, 4, 5].map(Some));
        assert_eq!(s.held_for_room(), 0);
    }

    /// Two CPU workers alone (no accelerator among the members): by
    /// default each line runs highest priority first; with
    /// [`CpuOrder::Arrival`] (and [`CpuOrder::Auto`], 2 workers) in arrival
    /// order, and so does the ready list under a window. A context with an
    /// accelerator keeps priorities whatever the setting.
    #[test]
    fn cpu_workers_alone_follow_the_cpu_order() {
        let pops = |order: CpuOrder, with_gpu: bool| {
            let sleepers = Sleepers::new(2, true);
            let mut s: GraphSched<Tile> = GraphSched::new(2);
            s.set_window(Some(Window {
                accelerator: 60,
                cpu: 60,
            }));
            s.set_cpu_order(order);
            let cpu = Member {
                id: 0,
                kind: WorkerKind::Cpu,
                node: 0,
            };
            let other = if with_gpu {
                gpu_member(1)
            } else {
                Member { id: 1, ..cpu }
            };
            s.add_workers(&[cpu, other], &sleepers);
            let lines: TileLines = PlainQueues::new(2);
            let mut models = GraphModels::default();
            // Worker 1 is 1000x slower: worker 0 is placed every task.
            models.book.record_now(0, 1, 1.0, 1.0);
            models.book.record_now(1, 1, 1.0, 1000.0);
            push_prioritised(&mut s, &sleepers, &[(1, 0), (2, 5), (3, 0), (4, 9), (5, 5)]);
            (0..5)
                .map(|_| pop(&mut s, &lines, &mut models, &sleepers, 0))
                .collect::<Vec<_>>()
        };
        let by_priority = [4, 2, 5, 1, 3].map(Some);
        assert_eq!(pops(CpuOrder::Priority, false), by_priority);
        assert_eq!(pops(CpuOrder::Arrival, false), [1, 2, 3, 4, 5].map(Some));
        assert_eq!(pops(CpuOrder::Arrival, true), by_priority);
        // Auto: two CPU workers alone keep arrival order.
        assert_eq!(pops(CpuOrder::Auto, false), [1, 2, 3, 4, 5].map(Some));
        assert_eq!(pops(CpuOrder::Auto, true), by_priority);
    }

    /// The kinds that ran the tasks so far all left: every remaining
    /// line's room sizes the batch (no wait for workers that are gone).
    #[test]
    fn batches_do_not_wait_for_kinds_that_left() {
        let (sleepers, mut s, lines, mut models) = cpu_only_tasks();
        (1..=3).for_each(|id| drop(s.push(CpuOnly(Tile::job(id)), &sleepers)));
        // A first batch finds only the CPU able to run them.
        let mut round = GraphRound::default();
        let GraphStep::Place(batch, _) = s.pop_step(0, 0, 0.0, &sleepers, &mut round, None, &lines)
        else {
            panic!("a batch was due")
        };
        let facts = batch.facts();
        let costs = models.costs(&batch, &facts);
        let decided = decide(Method::Heft, *batch, facts, costs);
        s.pop_step(0, 0, 0.0, &sleepers, &mut round, Some(decided), &lines);
        // The CPU worker leaves; what it held returns to the ready list.
        s.remove_workers(&[0], &lines, &sleepers);
        (4..=5).for_each(|id| drop(s.push(CpuOnly(Tile::job(id)), &sleepers)));
        let mut round = GraphRound::default();
        match s.pop_step(1, 2, 0.0, &sleepers, &mut round, None, &lines) {
            GraphStep::Place(batch, _) => assert!(batch.tasks.len() > 1),
            _ => panic!("the accelerator's room was not counted"),
        }
    }

    /// With a window, the ready tasks beyond the lines' room wait, highest
    /// priority first; a task whose best worker's line is full is held
    /// (the CPU idles rather than take what the GPU finishes sooner)
    /// until that line makes room.
    #[test]
    fn tasks_wait_for_room_highest_priority_first() {
        let (sleepers, mut s) = cpu_and_gpu(Window {
            accelerator: 1,
            cpu: 1,
        });
        let cpu = Member {
            id: 0,
            kind: WorkerKind::Cpu,
            node: 0,
        };
        let lines: TileLines = PlainQueues::new(2);
        let mut models = GraphModels::default();
        // Codelet 1: 10 s on the CPU, 1 s on the GPU.
        models.book.record_now(0, 1, 1.0, 10.0);
        models.book.record_now(1, 1, 1.0, 1.0);
        push_prioritised(&mut s, &sleepers, &[(1, 0), (2, 0), (3, 7)]);
        // The GPU places 2 tasks (the room of both lines), the urgent one
        // first: it takes task 3; task 1 would finish first on the GPU
        // too, whose line is full: held.
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 1), Some(3));
        assert_eq!(queued(&lines, 0), 0);
        assert_eq!((s.held(), s.held_for_room()), (2, 1));
        // Taking task 3 from the full line made room.
        assert!(s.placing_due());
        // The CPU places tasks 1 and 2: task 1 on the GPU, task 2 held
        // again; the CPU gets nothing.
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 0), None);
        assert_eq!((queued(&lines, 0), queued(&lines, 1)), (0, 1));
        assert_eq!((s.held(), s.held_for_room()), (1, 2));
        assert!(!s.placing_due(), "held until a line makes room");
        // A completion (expected ends change) looks again.
        s.finished(1, 3, 1.0, &lines);
        assert!(s.placing_due());
        // Without a window every ready task is placed at once.
        let mut s = GraphSched::new(2);
        s.add_workers(&[cpu, gpu_member(1)], &sleepers);
        let lines: TileLines = PlainQueues::new(2);
        for id in 1..=3 {
            s.push(Tile::job(id), &sleepers);
        }
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 1), Some(1));
        assert_eq!(s.held(), 0);
        assert_eq!(queued(&lines, 0) + queued(&lines, 1), 2);
        // So is it among CPU workers alone, window or not.
        let mut s = GraphSched::new(2);
        s.set_window(Some(Window {
            accelerator: 1,
            cpu: 1,
        }));
        let cpu1 = Member { id: 1, ..cpu };
        s.add_workers(&[cpu, cpu1], &sleepers);
        let lines: TileLines = PlainQueues::new(2);
        let mut models = GraphModels::default();
        models.book.record_now(0, 1, 1.0, 1.0);
        models.book.record_now(1, 1, 1.0, 4.0);
        for id in 1..=5 {
            s.push(Tile::job(id), &sleepers);
        }
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 0).is_some());
        assert_eq!((s.held(), s.held_for_room()), (0, 0));
        assert_eq!(queued(&lines, 0) + queued(&lines, 1), 4);
    }

    /// Among CPU workers alone, a member pushing a task (its completion
    /// made it ready) places it at its next pop: nobody is woken; any other
    /// pusher wakes one idle worker to place it.
    #[test]
    fn a_member_pushing_wakes_nobody() {
        let sleepers = Sleepers::new(3, true);
        let mut s: GraphSched<Tile> = GraphSched::new(3);
        let cpu = Member {
            id: 0,
            kind: WorkerKind::Cpu,
            node: 0,
        };
        s.add_workers(&[cpu, Member { id: 1, ..cpu }], &sleepers);
        sleepers.fell_idle(1, true);
        assert!(s.push_from(Tile::job(1), &sleepers, Some(0)).is_empty());
        assert!(sleepers.is_idle(1), "the idle worker was left asleep");
        // Worker 2 is not a member (a worker of another context, or one
        // that left): it may not pop here, so worker 1 is woken.
        assert_eq!(s.push_from(Tile::job(2), &sleepers, Some(2)), vec![1]);
        sleepers.fell_idle(1, true);
        assert_eq!(s.push(Tile::job(3), &sleepers), vec![1]);
        // A member marked idle pops nothing until woken: one is.
        sleepers.fell_idle(0, true);
        assert_eq!(s.push_from(Tile::job(4), &sleepers, Some(0)), vec![0]);
        // With an accelerator in the context, a CPU worker's push wakes one
        // as before.
        s.add_workers(&[gpu_member(2)], &sleepers);
        sleepers.fell_idle(1, true);
        assert_eq!(s.push_from(Tile::job(5), &sleepers, Some(0)), vec![1]);
        assert_eq!(s.held(), 5);
    }

    /// A batch says which lines hold a task placed with a transfer to
    /// their worker (data on its way there), as HEFT's transfer sharing
    /// needs ([`crate::dag::DagWorker::inbound`]).
    #[test]
    fn a_batch_sees_which_lines_wait_for_data() {
        let sleepers = Sleepers::new(3, true);
        let mut s = GraphSched::new(3);
        s.add_workers(&[gpu_member(0), gpu_member(1), gpu_member(2)], &sleepers);
        let lines: TileLines = PlainQueues::new(3);
        // Worker 1 waits for data (0.5 s predicted to it), worker 2 holds a
        // task whose data is there (its transfer 0; another worker's 0.5).
        let placed =
            |transfer_s: Vec<f64>| Placed::new(Tile::job(90), 0, vec![Some(1.0); 3], transfer_s);
        lines.with(1, |q| queue_placed(q, 1, placed(vec![0.5, 0.5, 0.5]), 1.0));
        lines.with(2, |q| queue_placed(q, 2, placed(vec![0.5, 0.5, 0.0]), 1.0));
        s.push(Tile::job(1), &sleepers);
        let mut round = GraphRound::default();
        match s.pop_step(0, 1, 0.0, &sleepers, &mut round, None, &lines) {
            GraphStep::Place(batch, _) => assert_eq!(batch.inbound, vec![false, true, false]),
            _ => panic!("a batch was due"),
        }
    }

    /// The same when the context's workers are not numbered from 0: the
    /// placed tasks' predictions are indexed by worker id.
    #[test]
    fn a_batch_reads_each_line_by_worker_id() {
        let sleepers = Sleepers::new(4, true);
        let mut s = GraphSched::new(4);
        s.add_workers(&[gpu_member(1), gpu_member(3)], &sleepers);
        let lines: TileLines = PlainQueues::new(4);
        let placed =
            |transfer_s: Vec<f64>| Placed::new(Tile::job(90), 0, vec![Some(1.0); 4], transfer_s);
        // Worker 1's task has its data (a transfer only to worker 0);
        // worker 3's waits for 0.5 s of data.
        lines.with(1, |q| {
            queue_placed(q, 1, placed(vec![0.5, 0.0, 0.0, 0.0]), 1.0)
        });
        lines.with(3, |q| {
            queue_placed(q, 3, placed(vec![0.0, 0.0, 0.0, 0.5]), 1.0)
        });
        s.push(Tile::job(1), &sleepers);
        let mut round = GraphRound::default();
        match s.pop_step(1, 2, 0.0, &sleepers, &mut round, None, &lines) {
            GraphStep::Place(batch, _) => assert_eq!(batch.inbound, vec![false, true]),
            _ => panic!("a batch was due"),
        }
    }

    /// An idle worker's steal counts its transfer beside the transfers
    /// under way when the last batch was taken (HEFT's concurrent share).
    #[test]
    fn a_steal_counts_the_transfers_under_way() {
        let setup = || {
            let sleepers = Sleepers::new(4, true);
            let mut s = GraphSched::new(4);
            s.add_workers(
                &[gpu_member(0), gpu_member(1), gpu_member(2), gpu_member(3)],
                &sleepers,
            );
            let lines: TileLines = PlainQueues::new(4);
            // Worker 0 holds two 1 s tasks (ending at 1 and 2); worker 3
            // runs one in 0.5 s once its data is there, 4 s by StarPU's
            // prediction (as if all 4 GPUs transferred at once).
            for id in [90, 91] {
                let p = Placed::new(
                    Tile::job(id),
                    0,
                    vec![Some(1.0), Some(1.0), Some(1.0), Some(0.5)],
                    vec![0.0, 4.0, 4.0, 4.0],
                );
                lines.with(0, |q| queue_placed(q, 0, p, 1.0));
            }
            (s, lines, sleepers)
        };
        let pop = |s: &mut GraphSched<Tile>, lines: &TileLines, sleepers: &Sleepers| {
            let mut round = GraphRound::default();
            let mut back = None;
            loop {
                match s.pop_step(3, 4, 0.0, sleepers, &mut round, back.take(), lines) {
                    GraphStep::Place(..) => back = Some(Decided::nothing()),
                    GraphStep::Task(t, _) => return Some(t.id),
                    GraphStep::Empty(_) => return None,
                }
            }
        };
        // Nothing on its way: the transfer counts a quarter (1 s), and
        // 1.5 s beats the second task's end (2 s).
        let (mut s, lines, sleepers) = setup();
        assert_eq!(pop(&mut s, &lines, &sleepers), Some(91));
        // Workers 1 and 2 wait for data when a batch is taken: the
        // transfer counts three quarters (3 s), and nothing is stolen.
        // (The tasks are unranked: no margin applies.)
        let (mut s, lines, sleepers) = setup();
        for w in [1, 2] {
            let p = Placed::new(Tile::job(80 + w), 0, vec![Some(1.0); 4], vec![0.5; 4]);
            lines.with(w, |q| queue_placed(q, w, p, 1.0));
        }
        s.push(Tile::job(1), &sleepers);
        assert_eq!(pop(&mut s, &lines, &sleepers), None);
    }

    /// A placed task's latest start is the time its placement is queued
    /// plus its slack then.
    #[test]
    fn a_placed_task_keeps_its_latest_start() {
        let sleepers = Sleepers::new(2, true);
        let mut s = GraphSched::new(2);
        s.add_workers(&[gpu_member(0), gpu_member(1)], &sleepers);
        let lines: TileLines = PlainQueues::new(2);
        // Worker 0 queues, at 5 s, a task placed on worker 1 (which worker
        // 0 cannot run, so it is not stolen back) with 2 s of slack.
        let decided = Decided {
            decisions: smallvec::smallvec![super::super::decide::Decision {
                placed: Placed::new(Tile::job(7), 0, vec![None, Some(1.0)], vec![0.0; 2]),
                worker: 1,
                est_s: 1.0,
                slack_s: 2.0,
            }],
            ..Decided::nothing()
        };
        let mut round = GraphRound::default();
        s.pop_step(0, 1, 5.0, &sleepers, &mut round, Some(decided), &lines);
        let queued = lines.with(1, |q| q.take_all()).unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].0.latest_start_s, 7.0);
    }

    /// With 3 accelerator memory nodes (`LineOrder::Auto`) an
    /// accelerator's line runs first the task due to start first, an
    /// unranked one last; with 2, on a CPU worker's line, and with
    /// `LineOrder::Arrival`, arrival order.
    #[test]
    fn accelerator_lines_order_by_latest_start_from_three_devices() {
        let queued_order_and_jumps =
            |gpus: usize, order: LineOrder, target: usize| -> (Vec<usize>, u64) {
                let n = gpus + 1;
                let sleepers = Sleepers::new(n, true);
                let mut s = GraphSched::new(n);
                let mut members: Vec<Member> = (0..gpus).map(gpu_member).collect();
                members.push(Member {
                    id: gpus,
                    kind: WorkerKind::Cpu,
                    node: 0,
                });
                s.add_workers(&members, &sleepers);
                s.set_line_order(order);
                let lines: TileLines = PlainQueues::new(n);
                // Only `target` can run them (worker 0, which queues them at
                // 5 s, does not steal them): task 1 with 9 s of slack, task 2
                // with 3 s, task 3 unranked.
                let mut cost = vec![None; n];
                cost[target] = Some(1.0);
                let decided = Decided {
                    decisions: [(1, 9.0), (2, 3.0), (3, f64::INFINITY)]
                        .into_iter()
                        .map(|(id, slack_s)| super::super::decide::Decision {
                            placed: Placed::new(Tile::job(id), 0, cost.clone(), vec![0.0; n]),
                            worker: target,
                            est_s: 1.0,
                            slack_s,
                        })
                        .collect(),
                    ..Decided::nothing()
                };
                let mut round = GraphRound::default();
                s.pop_step(0, 1, 5.0, &sleepers, &mut round, Some(decided), &lines);
                let queued = lines.with(target, |q| q.take_all()).unwrap();
                (
                    queued.iter().map(|(p, _)| p.task.id()).collect(),
                    s.line_jumps(),
                )
            };
        let jumps = |gpus, order, target| queued_order_and_jumps(gpus, order, target).1;
        let queued_order = |gpus, order, target| queued_order_and_jumps(gpus, order, target).0;
        assert_eq!(queued_order(3, LineOrder::Auto, 1), [2, 1, 3]);
        assert_eq!(jumps(3, LineOrder::Auto, 1), 1, "task 2 passed task 1");
        assert_eq!(jumps(3, LineOrder::Arrival, 1), 0);
        assert_eq!(queued_order(3, LineOrder::LatestStart, 1), [2, 1, 3]);
        assert_eq!(queued_order(2, LineOrder::LatestStart, 1), [2, 1, 3]);
        assert_eq!(queued_order(2, LineOrder::Auto, 1), [1, 2, 3]);
        assert_eq!(queued_order(3, LineOrder::Arrival, 1), [1, 2, 3]);
        // The CPU worker (id 3) keeps arrival order.
        assert_eq!(queued_order(3, LineOrder::Auto, 3), [1, 2, 3]);
    }

    /// An idle accelerator steals a task with slack to spare only for a
    /// gain of half its time there; a CPU worker for any gain once the data
    /// penalty is charged, when placement charges it.
    #[test]
    fn an_accelerator_steals_only_for_a_margin_a_cpu_for_any_gain_after_the_data_penalty() {
        let cpu = Member {
            id: 2,
            kind: WorkerKind::Cpu,
            node: 0,
        };
        let steal = |thief: usize, latest_start_s: f64, cpu_transfer_s: f64, penalty: bool| {
            let sleepers = Sleepers::new(3, true);
            let mut s = GraphSched::new(3);
            s.add_workers(&[gpu_member(0), gpu_member(1), cpu], &sleepers);
            s.set_data_penalty(penalty);
            let lines: TileLines = PlainQueues::new(3);
            // Worker 0 holds two 1 s tasks (ending at 1 and 2); the other
            // GPU runs one in 1.5 s, the CPU in 1.7 s after its transfer
            // (StarPU's prediction, counted at half with 2 GPUs): the
            // second is the only one either finishes sooner.
            for id in [90, 91] {
                let mut p = Placed::new(
                    Tile::job(id),
                    0,
                    vec![Some(1.0), Some(1.5), Some(1.7)],
                    vec![0.0, 0.0, cpu_transfer_s],
                );
                p.latest_start_s = latest_start_s;
                lines.with(0, |q| queue_placed(q, 0, p, 1.0));
            }
            let mut round = GraphRound::default();
            match s.pop_step(thief, 0, 0.0, &sleepers, &mut round, None, &lines) {
                GraphStep::Task(t, _) => Some(t.id),
                GraphStep::Empty(_) => None,
                GraphStep::Place(..) => panic!("no batch was due"),
            }
        };
        // The GPU would gain 0.5 s, less than half its 1.5 s: not taken.
        assert_eq!(steal(1, 100.0, 0.0, true), None);
        // Unless the task is late: its worker would start it at 1 s, past
        // its latest start.
        assert_eq!(steal(1, 0.5, 0.0, true), Some(91));
        // The CPU gains 0.3 s: taken, with no margin.
        assert_eq!(steal(2, 100.0, 0.0, true), Some(91));
        // With 0.3 s of transfer it still gains 0.15 s, but not once the
        // data penalty (the 0.3 s again) is charged, as placement charges
        // it.
        assert_eq!(steal(2, 100.0, 0.3, false), Some(91));
        assert_eq!(steal(2, 100.0, 0.3, true), None);
    }

    /// A GPU (worker 0, whose model of codelet 1 is known: 0.01 s a task)
    /// and two CPUs (workers 1 and 2, untrained), with 60 independent jobs
    /// pushed (0.6 s of GPU work: enough to afford training the CPUs, see
    /// `GraphModels::costs`).
    fn gpu_known_two_cpus_sixty_jobs() -> (GraphSched<Tile>, TileLines, GraphModels, Sleepers) {
        let member = |id, kind| Member { id, kind, node: 0 };
        let members = [
            member(0, WorkerKind::Cuda),
            member(1, WorkerKind::Cpu),
            member(2, WorkerKind::Cpu),
        ];
        let sleepers = Sleepers::new(3, true);
        let mut s = GraphSched::new(3);
        s.add_workers(&members, &sleepers);
        let mut models = GraphModels::default();
        models.book.record_now(0, 1, 1.0, 0.01);
        for i in 0..60 {
            s.push(Tile::job(i), &sleepers);
        }
        (s, PlainQueues::new(3), models, sleepers)
    }

    /// Independent tasks while the CPUs' first sample is out are not all
    /// committed to the GPU (which starved every CPU worker of StarPU's
    /// `parallel_independent_homogeneous_tasks`): they wait, and are spread
    /// over every worker once the CPUs' sample arrives.
    #[test]
    fn tasks_wait_for_a_kind_in_training_instead_of_piling_on_the_trained_one() {
        let (mut s, lines, mut models, sleepers) = gpu_known_two_cpus_sixty_jobs();
        // The GPU places the batch: one task trains the CPUs (on worker
        // 1), the GPU keeps work within one task's length, the rest wait.
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 0).is_some());
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 1).is_some());
        assert_eq!(queued(&lines, 2), 0);
        assert!(s.waiting.len() >= 55, "{} waiting", s.waiting.len());
        // 60 tasks: one trained the CPUs, two went to the GPU.
        assert_eq!(s.deferrals(), 57);
        // Worker 2 (a CPU, its kind not trained yet) runs dry: a few
        // waiting tasks are placed again, on the GPU (its line is empty
        // now) or waiting again; worker 2 gets none.
        while lines.with(0, |q| q.pop(|_| false)).flatten().is_some() {}
        let (before, held) = (s.waiting.len(), s.held() + lines.held());
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 2), None);
        assert!(queued(&lines, 0) >= 1 && queued(&lines, 2) == 0);
        assert!(s.waiting.len() < before);
        assert_eq!(s.held() + lines.held(), held, "nothing lost");
        // The CPUs' sample: everything is placed, over all three workers.
        s.finished(1, 0, 0.01, &lines);
        let (_, first) = models.record(1, WorkerKind::Cpu, 1, 1.0, 0.01);
        assert!(first);
        s.model_learned(&sleepers);
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 2).is_some());
        assert!(s.waiting.is_empty() && s.ready.is_empty());
        for w in 0..3 {
            assert!(queued(&lines, w) >= 15, "worker {w}: {}", queued(&lines, w));
        }
        // Tasks placed again and deferred again count again.
        assert!(s.deferrals() > 57);
    }

    /// A dry worker of a kind in training places the waiting tasks again
    /// once per dry spell, not at every pop (each pop would defer them
    /// again: under SimGrid that spun for minutes of real time per run);
    /// a completion lets it try again.
    #[test]
    fn a_dry_worker_releases_waiting_tasks_once_until_something_changes() {
        let (mut s, lines, mut models, sleepers) = gpu_known_two_cpus_sixty_jobs();
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 0).is_some());
        assert!(pop(&mut s, &lines, &mut models, &sleepers, 1).is_some());
        let deferred = s.deferrals();
        assert!(!s.waiting.is_empty());
        // Worker 2 runs dry: it places the waiting tasks again, once.
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 2), None);
        let once = s.deferrals();
        assert!(once > deferred);
        for _ in 0..5 {
            assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 2), None);
        }
        assert_eq!(s.deferrals(), once, "no new placement without a change");
        // A completion: it tries again.
        s.finished(0, 0, 0.01, &lines);
        assert_eq!(pop(&mut s, &lines, &mut models, &sleepers, 2), None);
        assert!(s.deferrals() > once);
    }
}
