//! Per-PU observations: a bounded store with recency weights and input
//! validation, from which the fitters ([`crate::fit`]) read weighted points.
//!
//! * **Validation at the door.** [`SampleStore::push`] refuses a sample whose
//!   size is not a finite number `> 0`, whose compute time is not finite and
//!   `> 0` (a zero or negative duration is a clock or bookkeeping error, not
//!   a fast device), or whose transfer time is not finite and `>= 0` (zero is
//!   legitimate: a CPU worker needs no copy). Refusals are counted per reason
//!   in [`Rejections`]; the sample is not stored.
//! * **Bounded memory.** At most [`StoreConfig::cap`] samples. When full, the
//!   store evicts the *oldest sample of the most populated size class* (sizes
//!   binned by quarter octaves, `floor(4·log2 x)`), not simply the oldest:
//!   in the execution phase a PU receives nearly the same block size again
//!   and again, and plain FIFO would soon forget the training sizes that give
//!   the curve its shape. With one sample per class this is plain FIFO.
//! * **Recency.** Each sample carries a weight `max(0.5^(age/half_life),
//!   min_weight)`, `age` = number of samples pushed after it. Recent samples
//!   dominate where they are (so a model follows a device whose speed
//!   changes, PLB-HAC §5.4), while the floor keeps old samples at other sizes
//!   from vanishing entirely (they still pin the shape of the curve). Age is
//!   counted in samples, not seconds: the core has no clock.
//! * **Outliers** (a 10× spike) are valid numbers and are stored; they are
//!   recognised against the fitted trend and left out of the fit by the
//!   fitter, which also tells a persistent change of speed from a spike and
//!   then asks the store to forget the superseded regime
//!   ([`SampleStore::fit`], [`SampleStore::forget_before`]).

use std::collections::VecDeque;
use std::fmt;

/// One observation of one block on one PU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Block size in application work units (> 0).
    pub units: f64,
    /// Seconds spent computing the block (> 0).
    pub compute_s: f64,
    /// Seconds spent moving the block's data to (and from) the PU (>= 0).
    pub transfer_s: f64,
}

impl Sample {
    /// A sample (not validated; see [`Sample::check`]).
    pub fn new(units: f64, compute_s: f64, transfer_s: f64) -> Sample {
        Sample {
            units,
            compute_s,
            transfer_s,
        }
    }

    /// Why this sample would be refused, if it would.
    pub fn check(&self) -> Result<(), SampleError> {
        if !(self.units.is_finite() && self.units > 0.0 && self.units <= MAX_UNITS) {
            Err(SampleError::BadUnits)
        } else if !(self.compute_s.is_finite() && self.compute_s > 0.0) {
            Err(SampleError::BadCompute)
        } else if !(self.transfer_s.is_finite() && self.transfer_s >= 0.0) {
            Err(SampleError::BadTransfer)
        } else {
            Ok(())
        }
    }
}

/// Largest block size a sample may have: 2^53 units, beyond which whole
/// units are no longer representable in an `f64` (no real block is that
/// large; such a value is a corrupted measurement).
pub const MAX_UNITS: f64 = 9_007_199_254_740_992.0;

/// Why a sample was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleError {
    /// Size not finite, not `> 0`, or above [`MAX_UNITS`].
    BadUnits,
    /// Compute time not finite or not `> 0`.
    BadCompute,
    /// Transfer time not finite or `< 0`.
    BadTransfer,
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SampleError::BadUnits => "block size is not a finite number in (0, 2^53]",
            SampleError::BadCompute => "compute time is not a finite number > 0",
            SampleError::BadTransfer => "transfer time is not a finite number >= 0",
        })
    }
}

impl std::error::Error for SampleError {}

/// Counters of refused samples, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Refused for their size.
    pub bad_units: u64,
    /// Refused for their compute time (zero, negative, NaN, infinite).
    pub bad_compute: u64,
    /// Refused for their transfer time (negative, NaN, infinite).
    pub bad_transfer: u64,
}

impl Rejections {
    /// All refusals.
    pub fn total(&self) -> u64 {
        self.bad_units + self.bad_compute + self.bad_transfer
    }
}

/// Store parameters. Out-of-range values are clamped by
/// [`SampleStore::new`] (documented per field), never a panic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreConfig {
    /// Most samples kept (clamped to `>= 2`). Default 128.
    pub cap: usize,
    /// Age, in samples, at which a sample's weight halves. `inf` disables
    /// the decay; NaN or `<= 0` is taken as `inf`. Default 32.
    pub half_life: f64,
    /// Floor of the recency weight, in `[0, 1]` (NaN taken as 0).
    /// Default 0.05.
    pub min_weight: f64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            cap: 128,
            half_life: 32.0,
            min_weight: 0.05,
        }
    }
}

/// One weighted observation as the fitters take it: size `x`, time `t`,
/// weight `w`. Slices of points are in chronological order (newest last).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Block size in work units.
    pub x: f64,
    /// Seconds.
    pub t: f64,
    /// Weight (recency), `> 0` to count.
    pub w: f64,
}

impl Point {
    /// A point.
    pub fn new(x: f64, t: f64, w: f64) -> Point {
        Point { x, t, w }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    seq: u64,
    sample: Sample,
    /// [`size_class`] of its units, computed once.
    class: i64,
}

/// The bounded, recency-weighted store of one PU's samples.
#[derive(Debug, Clone)]
pub struct SampleStore {
    cfg: StoreConfig,
    entries: VecDeque<Entry>,
    /// Samples held per size class (few classes in practice), kept with
    /// `entries` so that an eviction does not recount them.
    class_counts: Vec<(i64, usize)>,
    next_seq: u64,
    rejected: Rejections,
    evicted: u64,
    forgotten: u64,
}

impl Default for SampleStore {
    fn default() -> Self {
        SampleStore::new(StoreConfig::default())
    }
}

fn size_class(units: f64) -> i64 {
    (4.0 * units.log2()).floor() as i64
}

/// One more sample of `class` in `counts`.
fn count(counts: &mut Vec<(i64, usize)>, class: i64) {
    match counts.iter_mut().find(|k| k.0 == class) {
        Some(k) => k.1 += 1,
        None => counts.push((class, 1)),
    }
}

impl SampleStore {
    /// An empty store; the configuration is clamped as documented on
    /// [`StoreConfig`].
    pub fn new(cfg: StoreConfig) -> SampleStore {
        let half_life = if cfg.half_life > 0.0 {
            cfg.half_life
        } else {
            f64::INFINITY
        };
        let min_weight = if cfg.min_weight.is_nan() {
            0.0
        } else {
            cfg.min_weight.clamp(0.0, 1.0)
        };
        let cfg = StoreConfig {
            cap: cfg.cap.max(2),
            half_life,
            min_weight,
        };
        SampleStore {
            cfg,
            entries: VecDeque::with_capacity(cfg.cap + 1),
            class_counts: Vec::new(),
            next_seq: 0,
            rejected: Rejections::default(),
            evicted: 0,
            forgotten: 0,
        }
    }

    /// The (clamped) configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Records a sample. Returns its sequence number (0, 1, 2, … over the
    /// store's life), or the reason it was refused (and counted).
    pub fn push(&mut self, sample: Sample) -> Result<u64, SampleError> {
        if let Err(e) = sample.check() {
            match e {
                SampleError::BadUnits => self.rejected.bad_units += 1,
                SampleError::BadCompute => self.rejected.bad_compute += 1,
                SampleError::BadTransfer => self.rejected.bad_transfer += 1,
            }
            return Err(e);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let class = size_class(sample.units);
        self.entries.push_back(Entry { seq, sample, class });
        count(&mut self.class_counts, class);
        if self.entries.len() > self.cfg.cap {
            self.evict_one();
        }
        Ok(seq)
    }

    /// One sample of `class` left the store.
    fn uncount(&mut self, class: i64) {
        if let Some(i) = self.class_counts.iter().position(|k| k.0 == class) {
            self.class_counts[i].1 -= 1;
            if self.class_counts[i].1 == 0 {
                self.class_counts.swap_remove(i);
            }
        }
    }

    /// Removes the oldest sample of the most populated size class (ties: the
    /// class whose oldest sample is the oldest).
    fn evict_one(&mut self) {
        let most = self.class_counts.iter().map(|k| k.1).max().unwrap_or(0);
        let tied = |c: i64| self.class_counts.iter().any(|k| k.0 == c && k.1 == most);
        // The oldest entry of a most populated class is the first entry of
        // any of them.
        let victim = self.entries.iter().position(|e| tied(e.class)).unwrap_or(0);
        if let Some(e) = self.entries.remove(victim) {
            self.uncount(e.class);
        }
        self.evicted += 1;
    }

    /// Number of samples held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Refusal counters.
    pub fn rejections(&self) -> Rejections {
        self.rejected
    }

    /// Samples dropped because the store was full.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Samples dropped by [`SampleStore::forget_before`] (change of speed).
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Sequence number the next accepted sample will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Held samples with their sequence numbers, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Sample)> + '_ {
        self.entries.iter().map(|e| (e.seq, &e.sample))
    }

    /// Recency weight of the sample numbered `seq` (1 for the newest).
    pub fn weight_of(&self, seq: u64) -> f64 {
        let newest = self.next_seq.saturating_sub(1);
        let age = newest.saturating_sub(seq) as f64;
        let w = if self.cfg.half_life.is_finite() {
            (-age / self.cfg.half_life * std::f64::consts::LN_2).exp()
        } else {
            1.0
        };
        w.max(self.cfg.min_weight)
    }

    /// `(size, compute time, weight)` of every held sample, oldest first:
    /// the input of [`crate::fit::fit_exec`].
    pub fn compute_points(&self) -> Vec<Point> {
        self.entries
            .iter()
            .map(|e| Point::new(e.sample.units, e.sample.compute_s, self.weight_of(e.seq)))
            .collect()
    }

    /// `(size, transfer time, weight)` of every held sample, oldest first:
    /// the input of [`crate::fit::fit_transfer`].
    pub fn transfer_points(&self) -> Vec<Point> {
        self.entries
            .iter()
            .map(|e| Point::new(e.sample.units, e.sample.transfer_s, self.weight_of(e.seq)))
            .collect()
    }

    /// Sequence number of the `index`-th held sample (as in
    /// [`SampleStore::compute_points`]).
    pub fn seq_at(&self, index: usize) -> Option<u64> {
        self.entries.get(index).map(|e| e.seq)
    }

    /// Drops every sample older than `seq` (after a detected change of
    /// speed). Returns how many were dropped.
    pub fn forget_before(&mut self, seq: u64) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.seq >= seq);
        let n = before - self.entries.len();
        if n > 0 {
            self.recount();
        }
        self.forgotten += n as u64;
        n
    }

    /// Multiplies the compute time of every held sample by `factor` (after
    /// a detected change of speed: the curve keeps its shape and moves to
    /// the new level). Ignored unless `factor` is finite and > 0.
    pub fn scale_compute(&mut self, factor: f64) {
        if !(factor.is_finite() && factor > 0.0) {
            return;
        }
        for e in &mut self.entries {
            e.sample.compute_s *= factor;
        }
    }

    /// Drops every sample (counters are kept).
    pub fn clear(&mut self) {
        self.forgotten += self.entries.len() as u64;
        self.entries.clear();
        self.class_counts.clear();
    }

    /// Counts the held samples per class afresh.
    fn recount(&mut self) {
        self.class_counts.clear();
        for e in &self.entries {
            count(&mut self.class_counts, e.class);
        }
    }

    /// Number of distinct block sizes held.
    pub fn distinct_sizes(&self) -> usize {
        let mut xs: Vec<f64> = self.entries.iter().map(|e| e.sample.units).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs.len()
    }

    /// Highest observed throughput, units per second of compute + transfer,
    /// over the held samples (`None` when empty).
    pub fn best_throughput(&self) -> Option<f64> {
        self.entries
            .iter()
            .map(|e| e.sample.units / (e.sample.compute_s + e.sample.transfer_s))
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_and_counts_bad_samples() {
        let mut s = SampleStore::default();
        let bad = [
            Sample::new(0.0, 1.0, 0.0),
            Sample::new(-1.0, 1.0, 0.0),
            Sample::new(f64::NAN, 1.0, 0.0),
            Sample::new(f64::INFINITY, 1.0, 0.0),
            Sample::new(1.0, 0.0, 0.0),
            Sample::new(1.0, -2.0, 0.0),
            Sample::new(1.0, f64::NAN, 0.0),
            Sample::new(1.0, f64::INFINITY, 0.0),
            Sample::new(1.0, 1.0, -0.1),
            Sample::new(1.0, 1.0, f64::NAN),
        ];
        for b in bad {
            assert!(s.push(b).is_err());
        }
        let r = s.rejections();
        assert_eq!((r.bad_units, r.bad_compute, r.bad_transfer), (4, 4, 2));
        assert_eq!(r.total(), 10);
        assert!(s.is_empty());
        assert_eq!(s.best_throughput(), None);
        assert_eq!(s.push(Sample::new(2.0, 1.0, 0.0)), Ok(0));
        assert_eq!(s.push(Sample::new(2.0, 1.0, 0.5)), Ok(1));
        assert_eq!(s.len(), 2);
        assert_eq!(s.best_throughput(), Some(2.0));
        assert_eq!(
            SampleError::BadCompute.to_string(),
            "compute time is not a finite number > 0"
        );
    }

    #[test]
    fn memory_is_bounded_and_keeps_size_coverage() {
        let mut s = SampleStore::new(StoreConfig {
            cap: 16,
            ..StoreConfig::default()
        });
        // Training sizes, then a long execution phase at one size.
        for &x in &[1.0, 2.0, 4.0, 8.0, 16.0] {
            s.push(Sample::new(x, x, 0.0)).unwrap();
        }
        for _ in 0..10_000 {
            s.push(Sample::new(100.0, 100.0, 0.0)).unwrap();
        }
        assert_eq!(s.len(), 16);
        assert_eq!(s.evicted(), 10_005 - 16);
        assert_eq!(s.distinct_sizes(), 6, "training sizes survive");
        // Plain FIFO when every sample is in its own class.
        let mut f = SampleStore::new(StoreConfig {
            cap: 4,
            ..StoreConfig::default()
        });
        for i in 0..10 {
            f.push(Sample::new(2f64.powi(i), 1.0, 0.0)).unwrap();
        }
        let seqs: Vec<u64> = f.iter().map(|(q, _)| q).collect();
        assert_eq!(seqs, vec![6, 7, 8, 9]);
    }

    #[test]
    fn eviction_follows_the_rule_over_mixed_sizes_and_forgetting() {
        // The rule recomputed from scratch at every eviction (per class: how
        // many, and its oldest's position) against the store's kept counts.
        let reference = |held: &mut Vec<(u64, f64)>| {
            let mut classes: Vec<(i64, usize, usize)> = Vec::new();
            for (i, &(_, units)) in held.iter().enumerate() {
                let c = size_class(units);
                match classes.iter_mut().find(|k| k.0 == c) {
                    Some(k) => k.1 += 1,
                    None => classes.push((c, 1, i)),
                }
            }
            let most = classes.iter().map(|k| k.1).max().unwrap();
            let victim = classes.iter().filter(|k| k.1 == most).map(|k| k.2).min();
            held.remove(victim.unwrap());
        };
        let mut s = SampleStore::new(StoreConfig {
            cap: 12,
            ..StoreConfig::default()
        });
        let mut held: Vec<(u64, f64)> = Vec::new();
        let mut x: u64 = 12345;
        let mut evictions = 0;
        for step in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Five sizes in four classes (48 and 56 share one).
            let units = [1.0, 8.0, 48.0, 56.0, 1000.0][(x >> 33) as usize % 5];
            let seq = s.push(Sample::new(units, 1.0, 0.0)).unwrap();
            held.push((seq, units));
            if held.len() > 12 {
                reference(&mut held);
                evictions += 1;
            }
            if step % 997 == 996 {
                let from = held[held.len() / 2].0;
                s.forget_before(from);
                held.retain(|h| h.0 >= from);
            }
            let kept: Vec<u64> = s.iter().map(|(q, _)| q).collect();
            let want: Vec<u64> = held.iter().map(|h| h.0).collect();
            assert_eq!(kept, want, "step {step}");
        }
        assert!(evictions > 4000);
        s.clear();
        s.push(Sample::new(2.0, 1.0, 0.0)).unwrap();
        assert_eq!(s.class_counts, vec![(size_class(2.0), 1)]);
    }

    #[test]
    fn recency_weights_decay_to_the_floor() {
        let mut s = SampleStore::new(StoreConfig {
            cap: 1000,
            half_life: 10.0,
            min_weight: 0.1,
        });
        for _ in 0..100 {
            s.push(Sample::new(1.0, 1.0, 0.0)).unwrap();
        }
        assert_eq!(s.weight_of(99), 1.0);
        assert!((s.weight_of(89) - 0.5).abs() < 1e-12);
        assert!((s.weight_of(79) - 0.25).abs() < 1e-12);
        assert_eq!(s.weight_of(0), 0.1);
        let p = s.compute_points();
        assert_eq!(p.len(), 100);
        assert_eq!(p[99].w, 1.0);
        assert!(p.windows(2).all(|w| w[0].w <= w[1].w));
        // Disabled decay and clamped configs.
        let n = SampleStore::new(StoreConfig {
            cap: 0,
            half_life: f64::NAN,
            min_weight: 7.0,
        });
        assert_eq!(n.config().cap, 2);
        assert!(n.config().half_life.is_infinite());
        assert_eq!(n.config().min_weight, 1.0);
    }

    #[test]
    fn forget_and_clear() {
        let mut s = SampleStore::default();
        for i in 0..10 {
            s.push(Sample::new(1.0 + i as f64, 1.0, 0.25)).unwrap();
        }
        assert_eq!(s.forget_before(7), 7);
        assert_eq!(s.len(), 3);
        assert_eq!(s.seq_at(0), Some(7));
        assert_eq!(s.transfer_points()[0].t, 0.25);
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.forgotten(), 10);
        assert_eq!(s.next_seq(), 10);
    }
}
