//! Divisible-load API: an application with `W` independent units of work
//! (matrix columns, genes, points) asks a `plb-core` balancer which StarPU
//! worker processes which range `[offset, offset + len)` next.
//!
//! # Protocol
//!
//! 1. After `starpu_init`, create a [`DivisibleRun`] with the total number
//!    of units, the StarPU workers to use (or
//!    [`DivisibleRun::on_all_workers`]) and a [`BalancerSpec`] (a name of
//!    `plb-core`'s registry: `plb-hac`, `greedy:64`, `static:speeds=1/4`...).
//! 2. An application thread loops on [`DivisibleRun::next_block`]. Each
//!    returned [`DlBlock`] names a StarPU worker id; the application
//!    creates a task for the block, pins it to that worker
//!    (`execute_on_a_specific_worker = 1`, `workerid = w`) and submits it
//!    *from its own thread*. `next_block` returns `Ok(None)` once every
//!    unit has been handed out and every block has been reported done.
//! 3. When a block's task finishes, the application calls
//!    [`DivisibleRun::block_done`] with the block id and the measured
//!    compute and transfer times. This may be called from the task's
//!    StarPU callback: it only checks and records the report and signals a
//!    condition variable. The balancer sees the completion (its model
//!    refits included) in the next `next_block`, on the application thread.
//!
//! Submission therefore never happens inside a StarPU callback, no model
//! work runs in one, and the policy never creates tasks itself.
//!
//! # Exactly once
//!
//! The protocol — PU states, `Wait`, stalls, the check of every block
//! (right PU, non-empty, contiguous with the previous one, inside
//! `[0, W)`) — is `plb-core`'s driver ([`plb_core::balance::driver`]), the
//! same that runs the simulator and task-mode epochs. Every handed-out
//! block has a fresh id and stays *in flight* until `block_done` is called
//! for it exactly once; a second `block_done`, or one for an id never
//! issued, is an error that changes nothing. A PU has at most one block in
//! flight.
//!
//! # Time
//!
//! The balancer's clock (`now`, `finished_at`) is seconds since the run was
//! created on StarPU's clock (`starpu_timing_now`, simulated time under
//! SimGrid); `finished_at` is the moment `block_done` is called.
//! `plb-core` never reads a clock.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::config::{Tuning, WorkerKind};
use crate::trace::{Row, Trace};
pub use plb_core::balance::BalancerStats;
use plb_core::balance::driver::{Driver, DriverError, Issued, Status};
pub use plb_core::balance::registry::BalancerSpec;
use plb_core::balance::registry::{self, BuildContext, SpecError};
use plb_core::balance::{Balancer, Block};

/// The balancer names a run accepts (the registry's, in its order; each
/// may take parameters, e.g. `greedy:<block>`).
pub fn balancer_names() -> Vec<&'static str> {
    registry::names().collect()
}

/// The balancer of a run created without a name, given the value of
/// `STARPU_SCHED` (`None` when unset): that balancer if `sched` is a
/// registry name (parameters included), greedy otherwise (e.g.
/// `STARPU_SCHED=dmda`).
pub fn spec_from_sched(sched: Option<&str>) -> BalancerSpec {
    sched
        .and_then(|s| BalancerSpec::parse(s.trim()).ok())
        .unwrap_or_else(|| BalancerSpec::parse("greedy").expect("greedy is registered"))
}

/// [`spec_from_sched`] on the process's `STARPU_SCHED`.
pub fn spec_from_env() -> BalancerSpec {
    spec_from_sched(std::env::var("STARPU_SCHED").ok().as_deref())
}

/// Why a divisible-load call failed. No error changes the run's state,
/// except [`DivisibleError::BalancerFault`] and
/// [`DivisibleError::Stalled`], which end it.
#[derive(Debug, Clone, PartialEq)]
pub enum DivisibleError {
    /// The balancer name is not in the registry, or its parameters are
    /// invalid.
    UnknownBalancer(String),
    /// The balancer rejected its configuration (or a `PLB_*` variable is
    /// invalid).
    Config(String),
    /// No worker to run on (empty list, or StarPU not initialised).
    NoWorkers,
    /// A worker id is negative or listed twice.
    BadWorker(i32),
    /// `block_done` for an id that was never handed out.
    UnknownBlock(u64),
    /// `block_done` for a block already reported done.
    AlreadyDone(u64),
    /// A compute or transfer time that is negative or not finite; the
    /// block stays in flight (call `block_done` again with valid times).
    BadTime {
        /// The block.
        id: u64,
        /// The compute time given.
        compute_s: f64,
        /// The transfer time given.
        transfer_s: f64,
    },
    /// Every PU waits, nothing is in flight and units remain: the balancer
    /// can never make progress.
    Stalled {
        /// Units never handed out.
        remaining: u64,
    },
    /// The balancer returned an invalid block (wrong PU, empty, overlapping
    /// or outside `[0, W)`; it was not handed out), or told every PU it was
    /// done with units left.
    BalancerFault(String),
    /// A thread panicked while holding the run's lock.
    Poisoned,
}

impl From<SpecError> for DivisibleError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Unknown(m) => DivisibleError::UnknownBalancer(m),
            SpecError::Config(m) => DivisibleError::Config(m),
        }
    }
}

impl fmt::Display for DivisibleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DivisibleError::UnknownBalancer(m) => write!(f, "{m}"),
            DivisibleError::Config(m) => write!(f, "invalid balancer configuration: {m}"),
            DivisibleError::NoWorkers => {
                write!(f, "no StarPU worker to run on (is StarPU initialised?)")
            }
            DivisibleError::BadWorker(w) => write!(f, "worker id {w} is negative or duplicated"),
            DivisibleError::UnknownBlock(id) => write!(f, "block {id} was never handed out"),
            DivisibleError::AlreadyDone(id) => write!(f, "block {id} was already reported done"),
            DivisibleError::BadTime {
                id,
                compute_s,
                transfer_s,
            } => write!(
                f,
                "block {id}: invalid times compute={compute_s} transfer={transfer_s} \
                 (must be finite and >= 0); the block is still in flight"
            ),
            DivisibleError::Stalled { remaining } => write!(
                f,
                "the balancer stalled: every PU waits, nothing in flight, {remaining} units left"
            ),
            DivisibleError::BalancerFault(m) => write!(f, "balancer fault: {m}"),
            DivisibleError::Poisoned => write!(f, "a thread panicked while holding the run's lock"),
        }
    }
}

impl std::error::Error for DivisibleError {}

/// A block to process: units `[offset, offset + len)` on StarPU worker
/// `worker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlBlock {
    /// Identifies the block in [`DivisibleRun::block_done`] (0, 1, 2...
    /// in hand-out order).
    pub id: u64,
    /// The StarPU worker id to pin the task to.
    pub worker: i32,
    /// The balancer's PU index (position of `worker` in the run's list).
    pub pu: usize,
    /// First unit.
    pub offset: u64,
    /// Number of units (> 0).
    pub len: u64,
}

impl DlBlock {
    /// One past the last unit.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Progress counters of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct DivisibleStats {
    /// The balancer's name.
    pub balancer: &'static str,
    /// Total units `W`.
    pub total: u64,
    /// Blocks handed out.
    pub blocks_issued: u64,
    /// Blocks reported done.
    pub blocks_done: u64,
    /// Units handed out.
    pub units_issued: u64,
    /// Units in blocks reported done.
    pub units_done: u64,
    /// Units done per PU (same order as the worker list).
    pub units_per_pu: Vec<u64>,
    /// Seconds since the run was created.
    pub elapsed_s: f64,
    /// The balancer's own counters.
    pub balancer_stats: BalancerStats,
    /// Compute plus transfer seconds reported per PU.
    pub busy_per_pu: Vec<f64>,
    /// Seconds spent inside the balancer's decisions (model fitting and
    /// solving included), measured around its calls.
    pub balancer_s: f64,
}

/// Answer of [`DivisibleRun::try_next_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Submit this block.
    Block(DlBlock),
    /// Nothing now: call again after a block in flight is reported done.
    Pending,
    /// The run is finished.
    Finished,
}

/// The run's state. `block_done` (any thread, StarPU callbacks included)
/// holds it only to record a report; the balancer runs without it.
struct State {
    driver: Driver,
    /// Blocks the driver issued, not yet handed to the application.
    ready: VecDeque<Issued>,
    /// Blocks handed to the application (ids `0..handed`).
    handed: u64,
    /// Blocks handed to the application and not reported done.
    in_flight: usize,
    /// Seconds spent inside the balancer (fitting and solving included).
    balancer_s: f64,
    /// Step solutions already written to the trace.
    traced_solutions: u64,
    /// Set when the run can never finish; every later `next_block` returns it.
    fault: Option<DivisibleError>,
}

/// One divisible-load run: `W` units over a fixed list of StarPU workers.
/// `Send + Sync`: share it (e.g. in an `Arc`) between the submitting thread
/// and the tasks' callbacks.
pub struct DivisibleRun {
    total: u64,
    workers: Vec<i32>,
    name: &'static str,
    /// The resolved specification (for [`DivisibleRun::continue_with`]).
    spec: BalancerSpec,
    tuning: Tuning,
    kinds: Vec<WorkerKind>,
    /// The clock, microseconds (StarPU's unless a test gives its own).
    clock: fn() -> f64,
    start_us: f64,
    state: Mutex<State>,
    /// Signalled (under `state`) by every report.
    changed: Condvar,
    trace: Option<&'static Trace>,
}

impl fmt::Debug for DivisibleRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DivisibleRun")
            .field("total", &self.total)
            .field("workers", &self.workers)
            .field("balancer", &self.name)
            .finish_non_exhaustive()
    }
}

impl DivisibleRun {
    /// A run of `total` units on the StarPU workers `workers` (PU `p` of
    /// the balancer is `workers[p]`). `total` may be 0 (the run is then
    /// finished at once) or smaller than the number of workers.
    pub fn new(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
    ) -> Result<DivisibleRun, DivisibleError> {
        DivisibleRun::with_clock(total, workers, spec, crate::starpu::now_us)
    }

    /// [`DivisibleRun::new`] on another clock (microseconds; tests).
    pub fn with_clock(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
        clock: fn() -> f64,
    ) -> Result<DivisibleRun, DivisibleError> {
        if workers.is_empty() {
            return Err(DivisibleError::NoWorkers);
        }
        for (i, &w) in workers.iter().enumerate() {
            if w < 0 || workers[..i].contains(&w) {
                return Err(DivisibleError::BadWorker(w));
            }
        }
        let tuning = crate::config::tuning_from_env().map_err(DivisibleError::Config)?;
        crate::config::check_spec(&spec).map_err(DivisibleError::Config)?;
        // Per-kind minimums (PLB_MIN_BLOCK=cpu=..,opencl=..) need the kinds.
        let kinds = crate::starpu::worker_kinds(workers);
        let balancer = spec.build(&BuildContext {
            pus: workers.len(),
            total,
            tuning: &tuning,
            kinds: Some(&kinds),
            unit_s: None,
        })?;
        DivisibleRun::with_balancer(total, workers, spec, tuning, kinds, clock, balancer)
    }

    fn with_balancer(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
        tuning: Tuning,
        kinds: Vec<WorkerKind>,
        clock: fn() -> f64,
        balancer: Box<dyn Balancer + Send>,
    ) -> Result<DivisibleRun, DivisibleError> {
        let trace = crate::trace::open_from_env().map_err(DivisibleError::Config)?;
        Ok(DivisibleRun {
            total,
            workers: workers.to_vec(),
            name: spec.name(),
            spec,
            tuning,
            kinds,
            clock,
            start_us: clock(),
            state: Mutex::new(State {
                driver: Driver::new(balancer, workers.len()),
                ready: VecDeque::new(),
                handed: 0,
                in_flight: 0,
                balancer_s: 0.0,
                traced_solutions: 0,
                fault: None,
            }),
            changed: Condvar::new(),
            trace,
        })
    }

    /// A new run of `total` units on the same workers with the same
    /// balancer, continuing from what this one learned (the next pass of an
    /// iterative application such as k-means): PLB-HAC keeps its sample
    /// stores and, once every worker has a model, skips the training
    /// ([`plb_core::balance::PlbHac::resume`]); PLB-HeC, Acosta and Static
    /// also carry over what they learned (Static: its speeds, no second
    /// probe); the other balancers start afresh (their algorithms define
    /// no carry-over). Call it once this
    /// run is finished (its timings are then all included).
    pub fn continue_with(&self, total: u64) -> Result<DivisibleRun, DivisibleError> {
        let carried = {
            let mut st = self.lock()?;
            // Feeds the last reports to the balancer (outside the lock).
            st = self.consult(st, self.now())?;
            st.driver.balancer().and_then(|b| b.continue_with(total))
        };
        let balancer = match carried {
            Some(b) => b.map_err(DivisibleError::Config)?,
            None => self.spec.build(&BuildContext {
                pus: self.workers.len(),
                total,
                tuning: &self.tuning,
                kinds: Some(&self.kinds),
                unit_s: None,
            })?,
        };
        DivisibleRun::with_balancer(
            total,
            &self.workers,
            self.spec.clone(),
            self.tuning.clone(),
            self.kinds.clone(),
            self.clock,
            balancer,
        )
    }

    /// A run on every StarPU worker (`0..starpu_worker_get_count()`);
    /// StarPU must be initialised ([`DivisibleError::NoWorkers`] otherwise).
    pub fn on_all_workers(total: u64, spec: BalancerSpec) -> Result<DivisibleRun, DivisibleError> {
        DivisibleRun::new(total, &crate::starpu::all_worker_ids(), spec)
    }

    /// Total units `W`.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The StarPU worker ids, indexed by PU.
    pub fn workers(&self) -> &[i32] {
        &self.workers
    }

    /// The balancer's name.
    pub fn balancer_name(&self) -> &'static str {
        self.name
    }

    /// Seconds since the run was created.
    fn now(&self) -> f64 {
        ((self.clock)() - self.start_us).max(0.0) / 1e6
    }

    /// The run's lock, taken as StarPU requires of code that may run on a
    /// worker (`block_done` is a task callback): relaxed while it waits.
    fn lock(&self) -> Result<MutexGuard<'_, State>, DivisibleError> {
        if self.state.is_poisoned() {
            return Err(DivisibleError::Poisoned);
        }
        Ok(crate::starpu::relaxed_lock(&self.state))
    }

    /// The next block to submit, blocking while every idle PU waits and
    /// blocks are in flight. `Ok(None)`: the run is finished (every unit
    /// handed out and reported done; every later call returns `Ok(None)`
    /// too). Idle PUs are asked in PU order.
    pub fn next_block(&self) -> Result<Option<DlBlock>, DivisibleError> {
        let mut st = self.lock()?;
        loop {
            let (next, guard) = self.poll(st)?;
            st = guard;
            match next {
                Next::Block(b) => return Ok(Some(b)),
                Next::Finished => return Ok(None),
                Next::Pending => {}
            }
            // Only a report can change anything now: wait for one (the
            // consult ran, so the driver holds no report unless one came).
            while st.driver.checkout_pending() == 0 && st.ready.is_empty() && st.fault.is_none() {
                st = self
                    .changed
                    .wait(st)
                    .map_err(|_| DivisibleError::Poisoned)?;
            }
        }
    }

    /// [`DivisibleRun::next_block`] without blocking: [`Next::Pending`]
    /// when no block can be handed out until a block in flight completes
    /// (for event loops that also wait on other things).
    pub fn try_next_block(&self) -> Result<Next, DivisibleError> {
        let st = self.lock()?;
        self.poll(st).map(|(n, _)| n)
    }

    /// Runs the balancer on what the driver has for it (reports to feed,
    /// PUs asking), without holding the lock, until it has nothing more to
    /// say; the blocks it hands out join the ready queue.
    fn consult<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        now: f64,
    ) -> Result<MutexGuard<'a, State>, DivisibleError> {
        while let Some(mut c) = st.driver.checkout(now) {
            drop(st);
            let t0 = (self.clock)();
            c.run();
            let spent = ((self.clock)() - t0).max(0.0) / 1e6;
            st = self.lock()?;
            st.balancer_s += spent;
            match st.driver.checkin(c) {
                Ok(issued) => {
                    st.ready.extend(issued);
                    // Another application thread may wait for these.
                    self.changed.notify_all();
                }
                Err(e) => {
                    let e = DivisibleError::BalancerFault(match e {
                        DriverError::Fault(m) => m,
                        other => other.to_string(),
                    });
                    return Err(self.fail(&mut st, e));
                }
            }
            self.trace_solutions(&mut st);
        }
        Ok(st)
    }

    fn poll<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
    ) -> Result<(Next, MutexGuard<'a, State>), DivisibleError> {
        if let Some(e) = &st.fault {
            return Err(e.clone());
        }
        if st.ready.is_empty() {
            st = self.consult(st, self.now())?;
        }
        if let Some(i) = st.ready.pop_front() {
            st.handed = st.handed.max(i.id + 1);
            st.in_flight += 1;
            let b = DlBlock {
                id: i.id,
                worker: self.workers[i.block.pu],
                pu: i.block.pu,
                offset: i.block.offset,
                len: i.block.len,
            };
            return Ok((Next::Block(b), st));
        }
        let next = match st.driver.status() {
            Status::Finished => Next::Finished,
            Status::Running => Next::Pending,
            Status::Stalled { remaining } => {
                return Err(self.fail(&mut st, DivisibleError::Stalled { remaining }));
            }
            Status::Abandoned { remaining } => {
                let e = DivisibleError::BalancerFault(format!(
                    "every PU is done with {remaining} units never handed out"
                ));
                return Err(self.fail(&mut st, e));
            }
            Status::Faulted(m) => {
                return Err(self.fail(&mut st, DivisibleError::BalancerFault(m)));
            }
        };
        Ok((next, st))
    }

    /// Ends the run with `e` (every later call returns it).
    fn fail(&self, st: &mut State, e: DivisibleError) -> DivisibleError {
        st.fault = Some(e.clone());
        e
    }

    /// Block `id` finished; `compute_s` is the time its worker spent in the
    /// codelet, `transfer_s` the time spent moving its data (0 if unknown).
    /// Callable from any thread, including a StarPU task callback: it only
    /// checks and records the report (the driver's `report`). Errors
    /// (unknown id, second call, bad times) change nothing.
    pub fn block_done(
        &self,
        id: u64,
        compute_s: f64,
        transfer_s: f64,
    ) -> Result<(), DivisibleError> {
        let finished_at = self.now();
        let mut st = self.lock()?;
        if id >= st.handed {
            // Issued by the driver but not handed out yet: unknown to the
            // application.
            return Err(DivisibleError::UnknownBlock(id));
        }
        let predicted = st.driver.predicted_s(id);
        let block = st
            .driver
            .report(id, compute_s, transfer_s, finished_at)
            .map_err(|e| match e {
                DriverError::UnknownBlock(id) => DivisibleError::UnknownBlock(id),
                DriverError::AlreadyDone(id) => DivisibleError::AlreadyDone(id),
                DriverError::BadTime {
                    id,
                    compute_s,
                    transfer_s,
                } => DivisibleError::BadTime {
                    id,
                    compute_s,
                    transfer_s,
                },
                other => DivisibleError::BalancerFault(other.to_string()),
            })?;
        st.in_flight -= 1;
        self.trace_block(id, compute_s + transfer_s, finished_at, block, predicted);
        // Notified under the lock: once it is released this call touches
        // the run no more, so a C application may destroy the run as soon as
        // `plb_dl_next` has seen the last completion.
        self.changed.notify_all();
        drop(st);
        Ok(())
    }

    /// Blocks handed out and not yet reported done.
    pub fn in_flight(&self) -> usize {
        self.lock().map(|st| st.in_flight).unwrap_or(0)
    }

    /// Progress and balancer counters.
    pub fn stats(&self) -> Result<DivisibleStats, DivisibleError> {
        let st = self.lock()?;
        let d = st.driver.stats();
        let ready_units: u64 = st.ready.iter().map(|i| i.block.len).sum();
        Ok(DivisibleStats {
            balancer: self.name,
            total: self.total,
            blocks_issued: d.blocks_issued - st.ready.len() as u64,
            blocks_done: d.blocks_done,
            units_issued: d.units_issued - ready_units,
            units_done: d.units_done,
            units_per_pu: d.units_per_pu,
            elapsed_s: self.now(),
            balancer_stats: st.driver.balancer_stats(),
            busy_per_pu: d.busy_per_pu,
            balancer_s: st.balancer_s,
        })
    }

    /// Writes a finished block to the trace.
    fn trace_block(
        &self,
        id: u64,
        took_s: f64,
        finished_at: f64,
        block: Block,
        predicted: Option<f64>,
    ) {
        let Some(t) = self.trace else { return };
        // The trace's clock is StarPU's, as the run's.
        let end = self.start_us / 1e6 + finished_at;
        t.write(&Row {
            kind: "block",
            source: self.name,
            worker: i64::from(self.workers[block.pu]),
            start_s: end - took_s,
            end_s: end,
            units: block.len as f64,
            predicted_s: predicted,
            detail: &id.to_string(),
        });
    }

    /// Writes the balancer's new step solutions (PLB-HAC) to the trace: one
    /// `solution` row per PU (time of the solve, `x_p`, predicted step
    /// duration, step).
    fn trace_solutions(&self, st: &mut State) {
        let Some(t) = self.trace else { return };
        let Some(b) = st.driver.balancer() else {
            return;
        };
        let solves = b.stats().get("solves").unwrap_or(0);
        let new = solves.saturating_sub(st.traced_solutions) as usize;
        if new == 0 {
            return;
        }
        let kept = b.solutions();
        let offset = self.start_us / 1e6;
        for sol in kept.iter().skip(kept.len().saturating_sub(new)) {
            let at = offset + sol.time;
            for (pu, &x) in sol.units.iter().enumerate() {
                t.write(&Row {
                    kind: "solution",
                    source: self.name,
                    worker: i64::from(self.workers[pu]),
                    start_s: at,
                    end_s: at,
                    units: x as f64,
                    predicted_s: Some(sol.predicted_finish - sol.time),
                    detail: &sol.step.to_string(),
                });
            }
        }
        st.traced_solutions = solves;
    }

    /// The `PLB_SUMMARY` lines of the run: totals, then one line per PU.
    pub fn summary_lines(&self) -> Vec<String> {
        let Ok(s) = self.stats() else {
            return Vec::new();
        };
        let mut lines = vec![format!(
            "plb: divisible balancer={} units={} done={} blocks={} elapsed_ms={} refits={} solve_us={}",
            s.balancer,
            s.total,
            s.units_done,
            s.blocks_done,
            (s.elapsed_s * 1e3).round() as u64,
            s.balancer_stats.refits(),
            (s.balancer_s * 1e6).round() as u64,
        )];
        for (pu, &w) in self.workers.iter().enumerate() {
            let pct = if s.elapsed_s > 0.0 {
                (100.0 * s.busy_per_pu[pu] / s.elapsed_s).clamp(0.0, 100.0)
            } else {
                0.0
            };
            lines.push(format!(
                "plb:   worker={w} busy={pct:.1}% idle={:.1}% units={}",
                100.0 - pct,
                s.units_per_pu[pu]
            ));
        }
        lines
    }
}

impl Drop for DivisibleRun {
    fn drop(&mut self) {
        if crate::stats::summary_requested() {
            crate::stats::print_summary(&self.summary_lines());
        }
        if let Some(t) = self.trace {
            t.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a run with no StarPU: blocks "finish" in hand-out order.
    fn drain(run: &DivisibleRun) -> Vec<DlBlock> {
        let mut out = Vec::new();
        let mut pending = std::collections::VecDeque::new();
        loop {
            // Keep every PU busy, then complete the oldest block.
            match run.try_next_block() {
                Ok(Next::Block(b)) => {
                    pending.push_back(b);
                    continue;
                }
                Ok(Next::Pending) => {}
                Ok(Next::Finished) => break,
                Err(e) => panic!("{e}"),
            }
            if let Some(b) = pending.pop_front() {
                run.block_done(b.id, 1e-3 + b.len as f64 * 1e-6 * (b.pu + 1) as f64, 0.0)
                    .unwrap();
                out.push(b);
            }
        }
        assert!(pending.is_empty());
        out
    }

    /// A fake microsecond clock for runs without StarPU.
    fn fake_clock() -> f64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static T: AtomicU64 = AtomicU64::new(0);
        T.fetch_add(10, Ordering::Relaxed) as f64
    }

    fn new_run(
        total: u64,
        workers: &[i32],
        spec: BalancerSpec,
    ) -> Result<DivisibleRun, DivisibleError> {
        DivisibleRun::with_clock(total, workers, spec, fake_clock)
    }

    fn spec(name: &str) -> BalancerSpec {
        BalancerSpec::parse(name).unwrap()
    }

    #[test]
    fn parse_names() {
        for n in balancer_names() {
            assert_eq!(BalancerSpec::parse(n).unwrap().name(), n);
        }
        assert_eq!(
            BalancerSpec::parse("greedy:64").unwrap(),
            BalancerSpec::parse("greedy:block=64").unwrap()
        );
        for bad in ["", "Greedy", "eager", "greedy:", "greedy:0", "greedy:x"] {
            assert!(matches!(
                BalancerSpec::parse(bad).map_err(DivisibleError::from),
                Err(DivisibleError::UnknownBalancer(_))
            ));
        }
        assert_eq!(spec_from_sched(Some("hdss")).name(), "hdss");
        assert_eq!(spec_from_sched(Some("dmda")).name(), "greedy");
        assert_eq!(spec_from_sched(None).name(), "greedy");
    }

    #[test]
    fn every_balancer_covers_without_starpu() {
        for total in [0u64, 1, 3, 100_000] {
            for n in balancer_names() {
                let run = new_run(total, &[4, 7, 9], spec(n)).unwrap();
                let mut blocks = drain(&run);
                blocks.sort_by_key(|b| b.offset);
                let mut next = 0;
                for b in &blocks {
                    assert_eq!(b.offset, next, "{n} W={total}");
                    assert_eq!(b.worker, [4, 7, 9][b.pu]);
                    next = b.end();
                }
                assert_eq!(next, total, "{n} W={total}");
                let s = run.stats().unwrap();
                assert_eq!(s.units_done, total);
                assert_eq!(run.in_flight(), 0);
                assert_eq!(run.next_block(), Ok(None));
            }
        }
    }

    #[test]
    fn continued_plb_hac_run_skips_training_and_covers() {
        let run = new_run(50_000, &[0, 1], spec("plb-hac")).unwrap();
        drain(&run);
        let training = |r: &DivisibleRun| {
            r.stats()
                .unwrap()
                .balancer_stats
                .get("training_blocks")
                .expect("PLB-HAC counts its training blocks")
        };
        assert!(training(&run) > 0);
        let next = run.continue_with(20_000).unwrap();
        let mut blocks = drain(&next);
        assert_eq!(training(&next), 0);
        blocks.sort_by_key(|b| b.offset);
        assert_eq!(blocks.iter().map(|b| b.len).sum::<u64>(), 20_000);
        assert!(blocks.windows(2).all(|w| w[0].end() == w[1].offset));
        // Greedy has nothing to carry over but continues all the same.
        let g = new_run(100, &[3], spec("greedy:7")).unwrap();
        drain(&g);
        assert_eq!(drain(&g.continue_with(30).unwrap()).len(), 5);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(
            new_run(10, &[], spec("greedy")).unwrap_err(),
            DivisibleError::NoWorkers
        );
        assert_eq!(
            new_run(10, &[0, 0], spec("greedy")).unwrap_err(),
            DivisibleError::BadWorker(0)
        );
        assert!(matches!(
            new_run(10, &[0, 1], spec("static:speeds=1/2/3")),
            Err(DivisibleError::Config(_))
        ));
        let run = new_run(10, &[0], spec("greedy:4")).unwrap();
        assert_eq!(
            run.block_done(0, 0.0, 0.0),
            Err(DivisibleError::UnknownBlock(0))
        );
        let b = run.next_block().unwrap().unwrap();
        assert!(matches!(
            run.block_done(b.id, f64::NAN, 0.0),
            Err(DivisibleError::BadTime { .. })
        ));
        assert!(matches!(
            run.block_done(b.id, 1.0, -1.0),
            Err(DivisibleError::BadTime { .. })
        ));
        run.block_done(b.id, 0.1, 0.0).unwrap();
        assert_eq!(
            run.block_done(b.id, 0.1, 0.0),
            Err(DivisibleError::AlreadyDone(b.id))
        );
        assert_eq!(
            run.block_done(99, 0.1, 0.0),
            Err(DivisibleError::UnknownBlock(99))
        );
        let s = run.stats().unwrap();
        assert_eq!((s.blocks_done, s.units_done), (1, 4));
    }
}
