//! The one driver of the [`Balancer`] protocol, shared by the simulator
//! ([`super::sim`]), the StarPU divisible-load run and task-mode epochs.
//!
//! It keeps every PU's state, the blocks in flight and the coverage of
//! `[0, W)`, checks every block the balancer hands out, and decides when
//! a run is finished or can never finish. It reads no clock (time is an
//! argument) and holds no lock.
//!
//! # Protocol
//!
//! * Every PU starts *asking*. A [`Consult`] asks the balancer for every
//!   asking PU in id order, at one time `now`, after feeding it the
//!   completions recorded since the previous consult.
//! * `Run(block)` makes the PU *busy* with that block in flight; `Wait`
//!   makes it *waiting*; `Done` makes it *done* for good.
//! * [`Driver::report`] records that a block finished: its PU and every
//!   waiting PU ask again at the next consult. Reports are only recorded:
//!   the balancer sees them (its `completed`, where models are refitted) at
//!   the next consult, on the thread that runs it.
//! * A `Wait` may itself change the balancer's state (PLB-HAC: the asker
//!   opens a step in which its own share is 0), so when nothing is in
//!   flight and every PU not done waits, the waiting PUs ask again, twice;
//!   only then is the run [`Status::Stalled`].
//!
//! # Consulting outside a lock
//!
//! A balancer's decisions may fit models and solve (milliseconds). The
//! driver's state is cheap to update, so callers that share it between
//! threads keep it under their lock and run the balancer outside it:
//! [`Driver::checkout`] takes the balancer and the work to do (under the
//! lock), [`Consult::run`] calls the balancer (no lock), [`Driver::checkin`]
//! puts it back and applies the decisions (under the lock). While the
//! balancer is out, reports are still recorded and nothing else is asked.
//! Single-threaded callers use [`Driver::step`], which does all three.

use std::collections::{BTreeSet, HashMap};

use super::{Balancer, BalancerStats, Block, Completion, Decision, PuId};

/// What a PU is doing, for the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PuState {
    /// Idle: the balancer is asked for it at the next consult.
    Asking,
    /// Runs a block.
    Busy,
    /// Was told to wait: asks again after the next completion.
    Waiting,
    /// Was told no work will come.
    Done,
}

/// A block handed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Issued {
    /// Identifies the block in [`Driver::report`] (0, 1, 2... in hand-out
    /// order).
    pub id: u64,
    /// The block.
    pub block: Block,
    /// Seconds the balancer predicted for it, if it did.
    pub predicted_s: Option<f64>,
    /// When it was handed out (the consult's `now`).
    pub at: f64,
}

/// Where a run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Blocks are in flight, PUs are asking, or reports wait for the
    /// balancer: call [`Driver::step`] (or consult) again after the next
    /// report.
    Running,
    /// Every unit was handed out and reported done.
    Finished,
    /// Units remain, nothing is in flight, and every PU not done waits and
    /// has been asked again twice: the balancer can never progress.
    Stalled {
        /// Units never handed out.
        remaining: u64,
    },
    /// Units remain but every PU was told `Done`.
    Abandoned {
        /// Units never handed out.
        remaining: u64,
    },
    /// The balancer handed out an invalid block (see [`DriverError`]).
    Faulted(String),
}

/// Why a driver call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverError {
    /// A report for an id that was never handed out.
    UnknownBlock(u64),
    /// A second report for the same block.
    AlreadyDone(u64),
    /// A negative or non-finite time; nothing was recorded.
    BadTime {
        /// The block.
        id: u64,
        /// The compute time given.
        compute_s: f64,
        /// The transfer time given.
        transfer_s: f64,
    },
    /// The balancer handed out a block for another PU, an empty one, one
    /// that does not start where the previous one ended, or one past `W`.
    /// The run is over ([`Status::Faulted`]).
    Fault(String),
    /// The consult handed back is not the one checked out.
    WrongConsult,
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::UnknownBlock(id) => write!(f, "block {id} was never handed out"),
            DriverError::AlreadyDone(id) => write!(f, "block {id} was already reported done"),
            DriverError::BadTime {
                id,
                compute_s,
                transfer_s,
            } => write!(
                f,
                "block {id}: invalid times compute={compute_s} transfer={transfer_s} \
                 (must be finite and >= 0); the block is still in flight"
            ),
            DriverError::Fault(m) => write!(f, "balancer fault: {m}"),
            DriverError::WrongConsult => write!(f, "a consult was handed back to another run"),
        }
    }
}

impl std::error::Error for DriverError {}

/// Counters of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverStats {
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
    /// Units done per PU.
    pub units_per_pu: Vec<u64>,
    /// Compute plus transfer seconds reported per PU.
    pub busy_per_pu: Vec<f64>,
    /// Calls of [`Balancer::next`] (blocks, `Wait` and `Done` answers).
    pub asks: u64,
}

/// The balancer and the work of one consult, run without the caller's
/// lock ([`Consult::run`]).
pub struct Consult<B = Box<dyn Balancer + Send>> {
    balancer: B,
    serial: u64,
    now: f64,
    reports: Vec<Completion>,
    ask: Vec<PuId>,
    answers: Vec<(PuId, Decision, Option<f64>)>,
    ran: bool,
}

impl<B: Balancer> Consult<B> {
    /// Feeds the recorded completions to the balancer, then asks it for
    /// every PU of the consult, in id order.
    pub fn run(&mut self) {
        if self.ran {
            return;
        }
        self.ran = true;
        for done in self.reports.drain(..) {
            self.balancer.completed(done);
        }
        for &pu in &self.ask {
            let d = self.balancer.next(pu, self.now);
            let predicted = match d {
                Decision::Run(_) => self.balancer.predicted_s(pu),
                _ => None,
            };
            self.answers.push((pu, d, predicted));
        }
    }

    /// The balancer (e.g. to read its step solutions after [`Consult::run`]).
    pub fn balancer(&self) -> &B {
        &self.balancer
    }

    /// The PUs this consult asks.
    pub fn asks(&self) -> &[PuId] {
        &self.ask
    }
}

struct Flight {
    block: Block,
    predicted_s: Option<f64>,
}

/// Runs one balancer over `n` PUs and `W` units (see the module
/// documentation).
pub struct Driver<B = Box<dyn Balancer + Send>> {
    balancer: Option<B>,
    name: &'static str,
    total: u64,
    /// Units handed out so far = the next block's offset.
    cursor: u64,
    pus: Vec<PuState>,
    asking: BTreeSet<PuId>,
    waiting: Vec<PuId>,
    in_flight: HashMap<u64, Flight>,
    /// Completions recorded and not yet fed to the balancer.
    reports: Vec<Completion>,
    next_id: u64,
    /// Re-asks of the waiting PUs with nothing in flight since the last
    /// report.
    idle_rounds: u32,
    serial: u64,
    fault: Option<String>,
    blocks_done: u64,
    units_done: u64,
    units_per_pu: Vec<u64>,
    busy_per_pu: Vec<f64>,
    asks: u64,
}

impl<B> std::fmt::Debug for Driver<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("balancer", &self.name)
            .field("total", &self.total)
            .field("cursor", &self.cursor)
            .field("pus", &self.pus)
            .field("in_flight", &self.in_flight.len())
            .field("reports", &self.reports.len())
            .finish_non_exhaustive()
    }
}

/// Re-asks of the waiting PUs, with nothing in flight, before a stall.
const IDLE_ROUNDS: u32 = 2;

impl<B: Balancer> Driver<B> {
    /// A driver of `balancer` over `n_pus` PUs and the units it has left
    /// (`W` = [`Balancer::remaining`] now).
    pub fn new(balancer: B, n_pus: usize) -> Driver<B> {
        Driver {
            name: balancer.name(),
            total: balancer.remaining(),
            balancer: Some(balancer),
            cursor: 0,
            pus: vec![PuState::Asking; n_pus],
            asking: (0..n_pus).collect(),
            waiting: Vec::new(),
            in_flight: HashMap::new(),
            reports: Vec::new(),
            next_id: 0,
            idle_rounds: 0,
            serial: 0,
            fault: None,
            blocks_done: 0,
            units_done: 0,
            units_per_pu: vec![0; n_pus],
            busy_per_pu: vec![0.0; n_pus],
            asks: 0,
        }
    }

    /// The balancer's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Total units `W`.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of PUs.
    pub fn pu_count(&self) -> usize {
        self.pus.len()
    }

    /// PU `pu`'s state.
    pub fn pu_state(&self, pu: PuId) -> Option<PuState> {
        self.pus.get(pu).copied()
    }

    /// Units not handed out yet.
    pub fn unissued(&self) -> u64 {
        self.total - self.cursor
    }

    /// Blocks handed out and not yet reported done.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The block in flight with id `id`.
    pub fn flight(&self, id: u64) -> Option<Block> {
        self.in_flight.get(&id).map(|f| f.block)
    }

    /// Whether the balancer is checked out ([`Driver::checkout`]).
    pub fn is_consulting(&self) -> bool {
        self.balancer.is_none()
    }

    /// The balancer, unless it is checked out.
    pub fn balancer(&self) -> Option<&B> {
        self.balancer.as_ref()
    }

    /// Takes the balancer back from the driver (the run is over).
    pub fn into_balancer(self) -> Option<B> {
        self.balancer
    }

    /// The balancer's counters (empty while it is checked out).
    pub fn balancer_stats(&self) -> BalancerStats {
        self.balancer().map(|b| b.stats()).unwrap_or_default()
    }

    /// Run counters.
    pub fn stats(&self) -> DriverStats {
        DriverStats {
            total: self.total,
            blocks_issued: self.next_id,
            blocks_done: self.blocks_done,
            units_issued: self.cursor,
            units_done: self.units_done,
            units_per_pu: self.units_per_pu.clone(),
            busy_per_pu: self.busy_per_pu.clone(),
            asks: self.asks,
        }
    }

    /// Records that block `id` finished at `finished_at` after `compute_s`
    /// seconds of compute and `transfer_s` of data movement: its PU and the
    /// waiting PUs ask again at the next consult, where the balancer sees
    /// the completion. Errors change nothing.
    pub fn report(
        &mut self,
        id: u64,
        compute_s: f64,
        transfer_s: f64,
        finished_at: f64,
    ) -> Result<Block, DriverError> {
        if !self.in_flight.contains_key(&id) {
            return Err(if id < self.next_id {
                DriverError::AlreadyDone(id)
            } else {
                DriverError::UnknownBlock(id)
            });
        }
        let valid = |t: f64| t.is_finite() && t >= 0.0;
        if !valid(compute_s) || !valid(transfer_s) {
            return Err(DriverError::BadTime {
                id,
                compute_s,
                transfer_s,
            });
        }
        let Some(flight) = self.in_flight.remove(&id) else {
            return Err(DriverError::UnknownBlock(id));
        };
        let block = flight.block;
        self.reports.push(Completion {
            block,
            compute_s,
            transfer_s,
            finished_at,
        });
        self.blocks_done += 1;
        self.units_done += block.len;
        self.units_per_pu[block.pu] += block.len;
        self.busy_per_pu[block.pu] += compute_s + transfer_s;
        self.idle_rounds = 0;
        for pu in self.waiting.drain(..) {
            self.pus[pu] = PuState::Asking;
            self.asking.insert(pu);
        }
        if self.pus[block.pu] == PuState::Busy {
            self.pus[block.pu] = PuState::Asking;
            self.asking.insert(block.pu);
        }
        Ok(block)
    }

    /// Reports recorded and not yet fed to the balancer.
    pub fn checkout_pending(&self) -> usize {
        self.reports.len()
    }

    /// The predicted seconds of block `id` in flight.
    pub fn predicted_s(&self, id: u64) -> Option<f64> {
        self.in_flight.get(&id).and_then(|f| f.predicted_s)
    }

    /// Takes the balancer out for a consult at `now` when there is
    /// something to do (reports to feed, PUs asking); `None` when there is
    /// nothing, when it is already out, or after a fault.
    pub fn checkout(&mut self, now: f64) -> Option<Consult<B>> {
        if self.fault.is_some() || self.balancer.is_none() {
            return None;
        }
        if self.reports.is_empty() && self.asking.is_empty() {
            return None;
        }
        let balancer = self.balancer.take()?;
        self.serial += 1;
        let ask: Vec<PuId> = std::mem::take(&mut self.asking).into_iter().collect();
        Some(Consult {
            balancer,
            serial: self.serial,
            now,
            reports: std::mem::take(&mut self.reports),
            answers: Vec::with_capacity(ask.len()),
            ask,
            ran: false,
        })
    }

    /// Puts the balancer back and applies its answers: the blocks handed
    /// out, in PU order. A consult not run yet is run first. An invalid
    /// block ends the run ([`DriverError::Fault`]; later calls return it).
    pub fn checkin(&mut self, mut consult: Consult<B>) -> Result<Vec<Issued>, DriverError> {
        if self.balancer.is_some() || consult.serial != self.serial {
            return Err(DriverError::WrongConsult);
        }
        consult.run();
        let Consult {
            balancer,
            now,
            ask,
            answers,
            ..
        } = consult;
        self.balancer = Some(balancer);
        self.asks += ask.len() as u64;
        let mut issued = Vec::new();
        for (pu, decision, predicted_s) in answers {
            match decision {
                Decision::Run(block) => {
                    if let Err(e) = self.check(pu, block) {
                        self.fault = Some(e.clone());
                        return Err(DriverError::Fault(e));
                    }
                    self.cursor = block.end();
                    self.pus[pu] = PuState::Busy;
                    let id = self.next_id;
                    self.next_id += 1;
                    self.in_flight.insert(id, Flight { block, predicted_s });
                    issued.push(Issued {
                        id,
                        block,
                        predicted_s,
                        at: now,
                    });
                }
                Decision::Wait => {
                    self.pus[pu] = PuState::Waiting;
                    self.waiting.push(pu);
                }
                Decision::Done => self.pus[pu] = PuState::Done,
            }
        }
        // Nothing in flight, nothing asking, PUs waiting: their `Wait` may
        // have changed the balancer, so they ask again (twice at most
        // between reports).
        if self.in_flight.is_empty()
            && self.asking.is_empty()
            && self.reports.is_empty()
            && !self.waiting.is_empty()
            && self.cursor < self.total
            && self.idle_rounds < IDLE_ROUNDS
        {
            self.idle_rounds += 1;
            self.waiting.sort_unstable();
            for pu in self.waiting.drain(..) {
                self.pus[pu] = PuState::Asking;
                self.asking.insert(pu);
            }
        }
        Ok(issued)
    }

    fn check(&self, pu: PuId, b: Block) -> Result<(), String> {
        if b.pu != pu || b.len == 0 || b.offset != self.cursor || b.end() > self.total {
            return Err(format!(
                "{}: PU {pu} was given {b:?}; expected a non-empty block of PU {pu} \
                 starting at unit {} within {}",
                self.name, self.cursor, self.total
            ));
        }
        Ok(())
    }

    /// Consults until the balancer has nothing more to say at `now`
    /// (re-asks of waiting PUs included); returns every block handed out.
    pub fn step(&mut self, now: f64) -> Result<Vec<Issued>, DriverError> {
        if let Some(f) = &self.fault {
            return Err(DriverError::Fault(f.clone()));
        }
        let mut out = Vec::new();
        while let Some(c) = self.checkout(now) {
            out.extend(self.checkin(c)?);
        }
        Ok(out)
    }

    /// Where the run stands (see [`Status`]).
    pub fn status(&self) -> Status {
        if let Some(f) = &self.fault {
            return Status::Faulted(f.clone());
        }
        if !self.in_flight.is_empty()
            || !self.reports.is_empty()
            || self.balancer.is_none()
            || (!self.asking.is_empty() && self.cursor < self.total)
        {
            return Status::Running;
        }
        let remaining = self.total - self.cursor;
        if remaining == 0 {
            return Status::Finished;
        }
        if !self.asking.is_empty() {
            return Status::Running;
        }
        if self.waiting.is_empty() {
            Status::Abandoned { remaining }
        } else {
            Status::Stalled { remaining }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{Greedy, WorkPool};

    /// Hands PU 0 everything in blocks of `block`; the other PUs wait,
    /// then are done once the pool is empty.
    struct OnlyFirst {
        pool: WorkPool,
        block: f64,
    }

    impl Balancer for OnlyFirst {
        fn name(&self) -> &'static str {
            "only-first"
        }
        fn next(&mut self, pu: PuId, _now: f64) -> Decision {
            if self.pool.remaining() == 0 {
                return Decision::Done;
            }
            if pu != 0 {
                return Decision::Wait;
            }
            match self.pool.take(pu, self.block) {
                Some(b) => Decision::Run(b),
                None => Decision::Done,
            }
        }
        fn completed(&mut self, _done: Completion) {}
        fn remaining(&self) -> u64 {
            self.pool.remaining()
        }
    }

    #[test]
    fn blocks_are_issued_in_pu_order_and_reports_let_pus_ask_again() {
        let mut d = Driver::new(Box::new(Greedy::new(10, 4)), 2);
        let first = d.step(0.0).unwrap();
        assert_eq!(
            first.iter().map(|i| (i.id, i.block)).collect::<Vec<_>>(),
            vec![
                (
                    0,
                    Block {
                        pu: 0,
                        offset: 0,
                        len: 4
                    }
                ),
                (
                    1,
                    Block {
                        pu: 1,
                        offset: 4,
                        len: 4
                    }
                ),
            ]
        );
        assert_eq!(d.status(), Status::Running);
        assert!(d.step(0.5).unwrap().is_empty(), "nobody asks");
        assert_eq!(
            d.report(1, 1.0, 0.0, 1.0).unwrap(),
            Block {
                pu: 1,
                offset: 4,
                len: 4
            }
        );
        assert_eq!(d.report(1, 1.0, 0.0, 1.0), Err(DriverError::AlreadyDone(1)));
        assert_eq!(
            d.report(7, 1.0, 0.0, 1.0),
            Err(DriverError::UnknownBlock(7))
        );
        assert!(matches!(
            d.report(0, f64::NAN, 0.0, 1.0),
            Err(DriverError::BadTime { id: 0, .. })
        ));
        let second = d.step(1.0).unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(
            second[0].block,
            Block {
                pu: 1,
                offset: 8,
                len: 2
            }
        );
        d.report(0, 1.0, 0.0, 1.5).unwrap();
        d.report(2, 1.0, 0.0, 2.0).unwrap();
        assert_eq!(d.status(), Status::Running, "reports not yet fed");
        assert!(d.step(2.0).unwrap().is_empty());
        assert_eq!(d.status(), Status::Finished);
        let s = d.stats();
        assert_eq!((s.blocks_issued, s.blocks_done, s.units_done), (3, 3, 10));
        assert_eq!(s.units_per_pu, vec![4, 6]);
        // 2 + 1 + 2 asks: every PU asked at 0, PU 1 at 1, both at 2 (Done).
        assert_eq!(s.asks, 5);
    }

    #[test]
    fn a_balancer_that_always_waits_stalls_after_two_rounds() {
        struct Stubborn(u32);
        impl Balancer for Stubborn {
            fn name(&self) -> &'static str {
                "stubborn"
            }
            fn next(&mut self, _pu: PuId, _now: f64) -> Decision {
                self.0 += 1;
                Decision::Wait
            }
            fn completed(&mut self, _done: Completion) {}
            fn remaining(&self) -> u64 {
                5
            }
        }
        let mut d = Driver::new(Box::new(Stubborn(0)), 3);
        assert!(d.step(0.0).unwrap().is_empty());
        assert_eq!(d.status(), Status::Stalled { remaining: 5 });
        // Asked once, then re-asked twice.
        assert_eq!(d.stats().asks, 9);
    }

    #[test]
    fn every_pu_done_with_units_left_is_abandoned() {
        struct Quits;
        impl Balancer for Quits {
            fn name(&self) -> &'static str {
                "quits"
            }
            fn next(&mut self, _pu: PuId, _now: f64) -> Decision {
                Decision::Done
            }
            fn completed(&mut self, _done: Completion) {}
            fn remaining(&self) -> u64 {
                3
            }
        }
        let mut d = Driver::new(Box::new(Quits), 2);
        d.step(0.0).unwrap();
        assert_eq!(d.status(), Status::Abandoned { remaining: 3 });
    }

    #[test]
    fn a_waiting_pu_is_asked_again_after_a_report() {
        let b = OnlyFirst {
            pool: WorkPool::new(6),
            block: 3.0,
        };
        let mut d = Driver::new(Box::new(b), 2);
        let i = d.step(0.0).unwrap();
        assert_eq!(i.len(), 1);
        assert_eq!(d.pu_state(1), Some(PuState::Waiting));
        d.report(i[0].id, 1.0, 0.0, 1.0).unwrap();
        assert_eq!(d.pu_state(1), Some(PuState::Asking));
        let i = d.step(1.0).unwrap();
        assert_eq!(i.len(), 1);
        d.report(i[0].id, 1.0, 0.0, 2.0).unwrap();
        d.step(2.0).unwrap();
        assert_eq!(d.status(), Status::Finished);
    }

    #[test]
    fn an_invalid_block_faults_the_run() {
        struct Overlaps;
        impl Balancer for Overlaps {
            fn name(&self) -> &'static str {
                "overlaps"
            }
            fn next(&mut self, pu: PuId, _now: f64) -> Decision {
                Decision::Run(Block {
                    pu,
                    offset: 0,
                    len: 1,
                })
            }
            fn completed(&mut self, _done: Completion) {}
            fn remaining(&self) -> u64 {
                4
            }
        }
        let mut d = Driver::new(Box::new(Overlaps), 2);
        let e = d.step(0.0).unwrap_err();
        assert!(
            matches!(e, DriverError::Fault(ref m) if m.contains("PU 1")),
            "{e}"
        );
        assert!(matches!(d.status(), Status::Faulted(_)));
        assert!(d.step(1.0).is_err());
    }

    #[test]
    fn reports_during_a_consult_wait_for_the_next_one() {
        let mut d = Driver::new(Box::new(Greedy::new(8, 2)), 2);
        let i = d.step(0.0).unwrap();
        assert!(
            d.checkout(1.0).is_none(),
            "nothing to do: no report, nobody asking"
        );
        d.report(i[0].id, 1.0, 0.0, 1.0).unwrap();
        let mut consult = d.checkout(1.0).expect("PU 0 asks");
        assert!(d.is_consulting());
        assert!(d.checkout(1.0).is_none(), "one consult at a time");
        // PU 1 finishes while the balancer is out: recorded, not asked.
        d.report(i[1].id, 1.0, 0.0, 1.1).unwrap();
        consult.run();
        let got = d.checkin(consult).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].block.pu, 0);
        let got = d.step(1.2).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].block.pu, 1);
    }
}
