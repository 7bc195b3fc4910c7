//! Task-mode placement: per (worker, codelet) performance models and the
//! earliest-predicted-finish rule of the fallback queues (see
//! `docs/balancers.md`, "Task mode"). Plain data, no clock: sizes and
//! measured seconds come in as arguments.
//!
//! Refits are *jobs*: [`ModelBook::record`] only stores the sample and,
//! when a refit is due, returns a [`RefitJob`] (a copy of that one store);
//! the caller runs it wherever it likes — the StarPU adapter outside every
//! lock — and hands the result to [`ModelBook::install`].

use rustc_hash::FxHashMap as HashMap;

use crate::fit::{FitConfig, PuModel};
use crate::model::TimeModel;
use crate::samples::{Sample, SampleStore, StoreConfig};

/// Samples a (worker, codelet) pair needs before its prediction is used;
/// until then the worker is "untrained" for that codelet and is fed tasks
/// so that it gets trained.
pub const TRAIN_SAMPLES: u64 = 2;

/// An untrained worker is preferred for placement while its queue holds
/// fewer than this many tasks (it gets trained without being flooded by a
/// burst of submissions).
pub const TRAIN_QUEUE: usize = 2;

/// Samples kept per (worker, codelet): bounds memory and the cost of a
/// refit.
pub const STORE_CAP: usize = 32;

/// Refit after every sample while fewer than this many were recorded, then
/// after every [`REFIT_EVERY`]-th new sample until [`REFIT_SETTLED`], then
/// after every [`REFIT_SETTLED`]-th (a model that has seen that many
/// samples changes slowly; the store keeps the latest [`STORE_CAP`]).
const REFIT_EAGER: u64 = 8;
/// See [`REFIT_EAGER`].
const REFIT_EVERY: u64 = 8;
/// See [`REFIT_EAGER`].
const REFIT_SETTLED: u64 = 64;

/// The model of one worker for one codelet.
#[derive(Debug)]
pub struct CodeletModel {
    store: SampleStore,
    fitted: Option<PuModel>,
    /// Smallest seconds per unit observed (the fallback while no fit
    /// succeeds: time proportional to the size at the best throughput).
    best_spu: Option<f64>,
    samples: u64,
    /// Samples that came from [`ModelBook::seed_job`] (the store's first
    /// sequence numbers); the others were measured in this run.
    seeded: u64,
    refits: u64,
    /// Sample count of the fit installed last (older results are dropped).
    fitted_at: u64,
}

impl Default for CodeletModel {
    fn default() -> Self {
        CodeletModel {
            store: SampleStore::new(StoreConfig {
                cap: STORE_CAP,
                ..StoreConfig::default()
            }),
            fitted: None,
            best_spu: None,
            samples: 0,
            seeded: 0,
            refits: 0,
            fitted_at: 0,
        }
    }
}

/// A refit to run: a copy of one model's samples (at most [`STORE_CAP`]).
#[derive(Debug, Clone)]
pub struct RefitJob {
    key: (usize, usize),
    store: SampleStore,
    samples: u64,
}

impl RefitJob {
    /// Fits the samples (bounded cost: at most [`STORE_CAP`] samples).
    pub fn run(mut self, cfg: &FitConfig) -> FittedModel {
        FittedModel {
            key: self.key,
            samples: self.samples,
            model: self.store.fit(cfg).ok().map(|f| f.model),
        }
    }
}

/// The result of a [`RefitJob`], for [`ModelBook::install`].
#[derive(Debug)]
pub struct FittedModel {
    key: (usize, usize),
    samples: u64,
    /// `None`: the fit failed (the previous curve is kept).
    model: Option<PuModel>,
}

impl CodeletModel {
    /// Records one execution of `units` work units that took `compute_s`
    /// seconds; returns a refit job when one is due (see [`REFIT_EAGER`]).
    /// Invalid samples are ignored.
    fn record(&mut self, key: (usize, usize), units: f64, compute_s: f64) -> Option<RefitJob> {
        if self.store.push(Sample::new(units, compute_s, 0.0)).is_err() {
            return None;
        }
        self.samples += 1;
        let spu = compute_s / units;
        self.best_spu = Some(self.best_spu.map_or(spu, |b| b.min(spu)));
        let due = self.samples < REFIT_EAGER
            || (self.samples < REFIT_SETTLED && self.samples % REFIT_EVERY == 0)
            || self.samples % REFIT_SETTLED == 0;
        due.then(|| RefitJob {
            key,
            store: self.store.clone(),
            samples: self.samples,
        })
    }

    fn install(&mut self, fitted: FittedModel) {
        if fitted.samples <= self.fitted_at {
            return;
        }
        self.fitted_at = fitted.samples;
        self.refits += 1;
        // A failed fit keeps the previous curve (or the fallback).
        if let Some(m) = fitted.model {
            self.fitted = Some(m);
        }
    }

    /// Valid samples recorded so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Fits installed so far.
    pub fn refits(&self) -> u64 {
        self.refits
    }

    /// Whether the prediction is used for placement.
    pub fn trained(&self) -> bool {
        self.samples >= TRAIN_SAMPLES
    }

    /// Predicted seconds for `units` work units: the fitted curve, else
    /// `units` at the best observed throughput; `None` with no sample.
    pub fn predict(&self, units: f64) -> Option<f64> {
        let t = match (&self.fitted, self.best_spu) {
            (Some(m), _) => m.time(units),
            (None, Some(spu)) => spu * units,
            (None, None) => return None,
        };
        t.is_finite().then_some(t.max(0.0))
    }
}

/// Every (worker index, codelet key) model of one scheduling context.
#[derive(Debug, Default)]
pub struct ModelBook {
    models: HashMap<(usize, usize), CodeletModel>,
    fit: FitConfig,
}

impl ModelBook {
    /// Stores one measurement in the model of (`worker`, `codelet`);
    /// returns the refit to run when one is due (only that store).
    pub fn record(
        &mut self,
        worker: usize,
        codelet: usize,
        units: f64,
        compute_s: f64,
    ) -> Option<RefitJob> {
        self.models.entry((worker, codelet)).or_default().record(
            (worker, codelet),
            units,
            compute_s,
        )
    }

    /// Installs a refit's result (a result older than one already
    /// installed for the same model is dropped).
    pub fn install(&mut self, fitted: FittedModel) {
        if let Some(m) = self.models.get_mut(&fitted.key) {
            m.install(fitted);
        }
    }

    /// [`ModelBook::record`], running the refit at once (single-threaded
    /// callers and tests).
    pub fn record_now(&mut self, worker: usize, codelet: usize, units: f64, compute_s: f64) {
        if let Some(job) = self.record(worker, codelet, units, compute_s) {
            let fitted = job.run(&self.fit);
            self.install(fitted);
        }
    }

    /// The fitting configuration refit jobs use.
    pub fn fit_config(&self) -> &FitConfig {
        &self.fit
    }

    /// The prediction used for placement: `None` while the worker is
    /// untrained for this codelet.
    pub fn trained_prediction(&self, worker: usize, codelet: usize, units: f64) -> Option<f64> {
        self.models
            .get(&(worker, codelet))
            .filter(|m| m.trained())
            .and_then(|m| m.predict(units))
    }

    /// A prediction from as little as one sample (the best observed
    /// throughput until a fit is installed); `None` with no sample.
    pub fn prediction(&self, worker: usize, codelet: usize, units: f64) -> Option<f64> {
        self.models.get(&(worker, codelet))?.predict(units)
    }

    /// Whether (`worker`, `codelet`) has a sample.
    pub fn has_samples(&self, worker: usize, codelet: usize) -> bool {
        self.models
            .get(&(worker, codelet))
            .is_some_and(|m| m.samples > 0)
    }

    /// The samples of (`worker`, `codelet`) as (units, seconds), oldest
    /// first (to persist them).
    pub fn samples_of(&self, worker: usize, codelet: usize) -> Vec<(f64, f64)> {
        self.models
            .get(&(worker, codelet))
            .map(|m| {
                m.store
                    .iter()
                    .map(|(_, s)| (s.units, s.compute_s))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The samples of (`worker`, `codelet`) measured in this run, i.e. not
    /// given by [`ModelBook::seed_job`], still held (oldest first).
    pub fn fresh_samples_of(&self, worker: usize, codelet: usize) -> Vec<(f64, f64)> {
        self.models
            .get(&(worker, codelet))
            .map(|m| {
                m.store
                    .iter()
                    .filter(|&(seq, _)| seq >= m.seeded)
                    .map(|(_, s)| (s.units, s.compute_s))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The (worker, codelet) pairs with samples.
    pub fn keys(&self) -> Vec<(usize, usize)> {
        self.models
            .iter()
            .filter(|(_, m)| m.samples > 0)
            .map(|(&k, _)| k)
            .collect()
    }

    /// Seeds the model of (`worker`, `codelet`) with saved samples and fits
    /// them once (the same outlier screening as live samples). A model that
    /// already has samples is left alone; invalid samples are ignored.
    pub fn seed(&mut self, worker: usize, codelet: usize, samples: &[(f64, f64)]) {
        if let Some(job) = self.seed_job(worker, codelet, samples) {
            let fitted = job.run(&self.fit);
            self.install(fitted);
        }
    }

    /// [`ModelBook::seed`] without the fit: records the samples (the model
    /// predicts from its best observed throughput at once) and returns the
    /// fit to run, wherever the caller likes, then [`ModelBook::install`].
    pub fn seed_job(
        &mut self,
        worker: usize,
        codelet: usize,
        samples: &[(f64, f64)],
    ) -> Option<RefitJob> {
        let key = (worker, codelet);
        let m = self.models.entry(key).or_default();
        if m.samples > 0 {
            return None;
        }
        for &(units, secs) in samples {
            let _ = m.record(key, units, secs);
        }
        m.seeded = m.samples;
        (m.samples > 0).then(|| RefitJob {
            key,
            store: m.store.clone(),
            samples: m.samples,
        })
    }

    /// Fits performed so far over every model.
    pub fn refits(&self) -> u64 {
        self.models.values().map(CodeletModel::refits).sum()
    }

    /// The model of (`worker`, `codelet`), if any sample was offered.
    pub fn get(&self, worker: usize, codelet: usize) -> Option<&CodeletModel> {
        self.models.get(&(worker, codelet))
    }
}

/// One worker able to run the task being placed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Predicted seconds of work already queued on the worker.
    pub backlog_s: f64,
    /// Tasks in the worker's queue.
    pub queued: usize,
    /// Predicted seconds for this task on this worker; `None` while the
    /// worker is untrained for the task's codelet.
    pub predicted_s: Option<f64>,
}

impl Candidate {
    fn finish(&self) -> Option<f64> {
        self.predicted_s
            .map(|p| self.backlog_s + p)
            .filter(|f| f.is_finite())
    }
}

/// Chooses among `cands` (the workers able to run the task; never empty
/// when the task can run at all) and returns the chosen index:
///
/// 1. an untrained worker whose queue holds fewer than [`TRAIN_QUEUE`]
///    tasks, the one with the shortest queue (ties: `rotate` picks among
///    them, so the first samples go round-robin);
/// 2. otherwise the trained worker with the earliest predicted finish
///    (`backlog_s + predicted_s`; ties: shorter queue, then lower index);
/// 3. otherwise (all untrained and each already fed) the shortest queue
///    (ties by `rotate`).
///
/// `None` only for an empty slice.
pub fn choose(cands: &[Candidate], rotate: usize) -> Option<usize> {
    if cands.is_empty() {
        return None;
    }
    let shortest = |pred: &dyn Fn(&Candidate) -> bool| -> Option<usize> {
        let min = cands.iter().filter(|c| pred(c)).map(|c| c.queued).min()?;
        let ties: Vec<usize> = (0..cands.len())
            .filter(|&i| pred(&cands[i]) && cands[i].queued == min)
            .collect();
        Some(ties[rotate % ties.len()])
    };
    if let Some(i) = shortest(&|c| c.predicted_s.is_none() && c.queued < TRAIN_QUEUE) {
        return Some(i);
    }
    let best = (0..cands.len())
        .filter_map(|i| cands[i].finish().map(|f| (i, f)))
        .min_by(|a, b| {
            a.1.total_cmp(&b.1)
                .then(cands[a.0].queued.cmp(&cands[b.0].queued))
                .then(a.0.cmp(&b.0))
        });
    if let Some((i, _)) = best {
        return Some(i);
    }
    shortest(&|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trained(backlog_s: f64, queued: usize, p: f64) -> Candidate {
        Candidate {
            backlog_s,
            queued,
            predicted_s: Some(p),
        }
    }

    fn untrained(queued: usize) -> Candidate {
        Candidate {
            backlog_s: 0.0,
            queued,
            predicted_s: None,
        }
    }

    #[test]
    fn empty_has_no_choice() {
        assert_eq!(choose(&[], 0), None);
    }

    #[test]
    fn earliest_predicted_finish_wins() {
        // Fast worker with a backlog vs slow idle worker.
        let c = [trained(1.0, 4, 0.5), trained(0.0, 0, 2.0)];
        assert_eq!(choose(&c, 0), Some(0));
        let c = [trained(3.0, 4, 0.5), trained(0.0, 0, 2.0)];
        assert_eq!(choose(&c, 0), Some(1));
    }

    #[test]
    fn ties_prefer_the_shorter_queue_then_the_lower_index() {
        let c = [trained(1.0, 3, 1.0), trained(1.5, 1, 0.5)];
        assert_eq!(choose(&c, 0), Some(1));
        let c = [trained(1.0, 1, 1.0), trained(1.0, 1, 1.0)];
        assert_eq!(choose(&c, 7), Some(0));
    }

    #[test]
    fn untrained_workers_are_fed_first_round_robin() {
        let c = [trained(0.0, 0, 0.1), untrained(0), untrained(0)];
        assert_eq!(choose(&c, 0), Some(1));
        assert_eq!(choose(&c, 1), Some(2));
        // The one with the shorter queue first.
        let c = [untrained(1), untrained(0)];
        assert_eq!(choose(&c, 0), Some(1));
    }

    #[test]
    fn a_fed_untrained_worker_is_not_flooded() {
        let c = [trained(5.0, 50, 0.1), untrained(TRAIN_QUEUE)];
        assert_eq!(choose(&c, 0), Some(0));
    }

    #[test]
    fn all_untrained_and_fed_spreads_by_queue_length() {
        let c = [untrained(5), untrained(3), untrained(3)];
        assert_eq!(choose(&c, 0), Some(1));
        assert_eq!(choose(&c, 1), Some(2));
    }

    #[test]
    fn a_single_capable_worker_is_always_chosen() {
        // A task only one worker type can run is never left unplaced.
        for c in [untrained(1000), trained(1e9, 1000, 1e9)] {
            assert_eq!(choose(&[c], 3), Some(0));
        }
        // Non-finite predictions fall back to queue lengths.
        let c = [trained(0.0, 2, f64::INFINITY), trained(f64::NAN, 1, 1.0)];
        assert_eq!(choose(&c, 0), Some(1));
    }

    #[test]
    fn models_train_and_predict_per_worker_and_codelet() {
        let mut book = ModelBook::default();
        assert_eq!(book.trained_prediction(0, 1, 10.0), None);
        book.record_now(0, 1, 10.0, 1.0);
        // One sample: not yet trained.
        assert_eq!(book.trained_prediction(0, 1, 10.0), None);
        book.record_now(0, 1, 20.0, 2.0);
        let p = book.trained_prediction(0, 1, 40.0).expect("trained");
        assert!((p - 4.0).abs() < 0.2, "{p}");
        // Other worker, other codelet: separate models.
        assert_eq!(book.trained_prediction(1, 1, 10.0), None);
        assert_eq!(book.trained_prediction(0, 2, 10.0), None);
        // Invalid samples are ignored.
        book.record_now(1, 1, 0.0, 1.0);
        book.record_now(1, 1, 1.0, f64::NAN);
        assert!(book.get(1, 1).is_none_or(|m| m.samples() == 0));
    }

    #[test]
    fn refits_are_bounded() {
        let mut book = ModelBook::default();
        for i in 0..200u64 {
            let x = 1.0 + (i % 7) as f64;
            book.record_now(0, 1, x, 0.01 * x + 0.001);
        }
        let m = book.get(0, 1).unwrap();
        assert_eq!(m.samples(), 200);
        // 7 eager fits, then one per 8 samples.
        assert!(m.refits() <= 7 + 200 / 8, "{}", m.refits());
        let p = m.predict(4.0).unwrap();
        assert!((p - 0.041).abs() < 0.005, "{p}");
    }

    #[test]
    fn seeded_models_predict_at_once_and_screen_spikes() {
        let mut book = ModelBook::default();
        // Saved samples of a 2 ms kernel with two 20x spikes.
        let mut saved: Vec<(f64, f64)> = (0..20).map(|_| (1e9, 0.002)).collect();
        saved[5].1 = 0.04;
        saved[13].1 = 0.04;
        book.seed(0, 7, &saved);
        let p = book
            .trained_prediction(0, 7, 1e9)
            .expect("trained from the file");
        assert!(
            (p - 0.002).abs() < 0.0005,
            "prediction {p} follows the spikes"
        );
        assert_eq!(book.samples_of(0, 7).len(), 20);
        assert_eq!(book.keys(), vec![(0, 7)]);
        // A model with live samples is not overwritten.
        book.seed(0, 7, &[(1e9, 5.0)]);
        assert_eq!(book.samples_of(0, 7).len(), 20);
    }

    #[test]
    fn seeded_models_screen_hundredfold_outliers() {
        // t(u) = 1 ms + 2 ns/kunit at four sizes, 1 % noise, as a full file
        // model (32 samples) with six 100x spikes and two 100x dips.
        let truth = |u: f64| 1e-3 + 2e-12 * u;
        let sizes = [2.5e8, 5e8, 1e9, 2e9];
        let saved: Vec<(f64, f64)> = (0..32)
            .map(|i| {
                let u = sizes[i % 4];
                let noise = 1.0 + 0.01 * ((i % 3) as f64 - 1.0);
                let t = truth(u) * noise;
                match i {
                    2 | 7 | 13 | 18 | 24 | 29 => (u, t * 100.0),
                    5 | 21 => (u, t / 100.0),
                    _ => (u, t),
                }
            })
            .collect();
        let mut book = ModelBook::default();
        book.seed(0, 7, &saved);
        for u in sizes.into_iter().chain([7e8, 1.5e9]) {
            let p = book.trained_prediction(0, 7, u).expect("trained");
            assert!(
                (p / truth(u) - 1.0).abs() < 0.1,
                "size {u}: predicted {p}, true {}",
                truth(u)
            );
        }
        // One size only (tiles of one graph), the spikes among the newest.
        let mut one: Vec<(f64, f64)> = (0..32).map(|_| (1e9, 0.002)).collect();
        for i in [0, 9, 10, 20, 27, 30] {
            one[i].1 *= 100.0;
        }
        let mut book = ModelBook::default();
        book.seed(1, 7, &one);
        let p = book.trained_prediction(1, 7, 1e9).expect("trained");
        assert!((p - 0.002).abs() < 0.0002, "prediction {p}");
    }

    #[test]
    fn fresh_samples_are_those_measured_after_the_seed() {
        let mut book = ModelBook::default();
        book.seed(0, 7, &[(1.0, 1.0), (1.0, 1.1), (f64::NAN, 1.0)]);
        assert!(book.fresh_samples_of(0, 7).is_empty());
        book.record_now(0, 7, 1.0, 1.2);
        book.record_now(0, 7, 1.0, 1.3);
        assert_eq!(book.fresh_samples_of(0, 7), [(1.0, 1.2), (1.0, 1.3)]);
        // Past the store's cap the seeded ones go first; fresh ones stay.
        for i in 0..STORE_CAP {
            book.record_now(0, 7, 1.0, 2.0 + i as f64 / 1000.0);
        }
        let fresh = book.fresh_samples_of(0, 7);
        assert_eq!(fresh, book.samples_of(0, 7));
        assert_eq!(fresh.len(), STORE_CAP);
        // A model never seeded: every sample is fresh.
        book.record_now(3, 7, 1.0, 1.0);
        assert_eq!(book.fresh_samples_of(3, 7), [(1.0, 1.0)]);
        assert!(book.fresh_samples_of(9, 9).is_empty());
    }

    #[test]
    fn a_stale_refit_result_is_dropped() {
        let mut book = ModelBook::default();
        book.record_now(0, 1, 1.0, 1.0);
        let old = book.record(0, 1, 2.0, 2.0).expect("eager refit");
        let new = book.record(0, 1, 4.0, 4.0).expect("eager refit");
        let cfg = FitConfig::default();
        let (old, new) = (old.run(&cfg), new.run(&cfg));
        book.install(new);
        let refits = book.refits();
        book.install(old);
        assert_eq!(
            book.refits(),
            refits,
            "an older fit must not replace a newer one"
        );
    }
}
