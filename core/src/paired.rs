//! Paired ratios of interleaved measurements: how a policy's runs compare
//! with a reference's run by run, and whether a difference is resolved by
//! the runs at all.
//!
//! In an interleaved experiment repetition `r` of every policy runs in the
//! same round, so the machine's drift between rounds cancels in the ratio
//! of two policies' round-`r` times. The ratio's median gets a
//! distribution-free confidence interval from the order statistics: with
//! `n` ratios sorted, `[r_(k), r_(n+1-k)]` (1-based) covers the median
//! ratio with probability `1 − 2·P(Binomial(n, ½) < k)`, whatever the
//! ratios' distribution, provided the rounds are independent. `k` is the
//! largest for which that coverage is at least the level asked for; with
//! fewer than 6 pairs no interval reaches 95 %.

/// The median of the ratios `a_r / b_r` and its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedRatio {
    /// Pairs counted (both times finite and positive).
    pub pairs: usize,
    /// Median of the ratios.
    pub median: f64,
    /// Lower end of the interval (the `k`-th smallest ratio).
    pub low: f64,
    /// Upper end of the interval (the `k`-th largest ratio).
    pub high: f64,
    /// The interval's exact coverage (at least the level asked for).
    pub coverage: f64,
}

impl PairedRatio {
    /// The paired ratios of `a` over `b`, paired by index (the shorter
    /// slice decides how many), with an interval of at least `level`
    /// coverage (0 < level < 1). Pairs with a time that is not finite and
    /// positive are skipped. `None` when no interval reaches `level` with
    /// the pairs there are (fewer than 6 for 95 %).
    pub fn of(a: &[f64], b: &[f64], level: f64) -> Option<PairedRatio> {
        let mut ratios: Vec<f64> = a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.is_finite() && y.is_finite() && **x > 0.0 && **y > 0.0)
            .map(|(x, y)| x / y)
            .collect();
        let n = ratios.len();
        let (k, coverage) = order_statistic_rank(n, level)?;
        let median = crate::bench::median(&mut ratios); // sorts them too
        Some(PairedRatio {
            pairs: n,
            median,
            low: ratios[k - 1],
            high: ratios[n - k],
            coverage,
        })
    }

    /// Whether every ratio the interval admits is above `limit`: the runs
    /// resolve that the median ratio exceeds it.
    pub fn resolved_above(&self, limit: f64) -> bool {
        self.low > limit
    }
}

/// The largest `k ≥ 1` whose interval `[x_(k), x_(n+1−k)]` covers the
/// median with probability at least `level`, and that probability.
fn order_statistic_rank(n: usize, level: f64) -> Option<(usize, f64)> {
    if n == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    // P(Binomial(n, 1/2) <= j), accumulated from j = 0.
    let mut term = 0.5f64.powi(n as i32);
    let mut below = 0.0; // P(X < k) for the k being tried
    let mut best = None;
    for k in 1..=n.div_ceil(2) {
        below += term; // now P(X <= k - 1) = P(X < k)
        let coverage = 1.0 - 2.0 * below;
        if coverage < level {
            break;
        }
        best = Some((k, coverage));
        // term for j = k: C(n, k) / 2^n from C(n, k - 1).
        term *= (n - (k - 1)) as f64 / k as f64;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_match_the_binomial_tables() {
        // n = 11: k = 2 covers 1 - 2·12/2048; k = 3 only 1 - 2·67/2048.
        let (k, c) = order_statistic_rank(11, 0.95).unwrap();
        assert_eq!(k, 2);
        assert!((c - (1.0 - 24.0 / 2048.0)).abs() < 1e-12, "{c}");
        // n = 6: only the extremes, 1 - 2/64.
        let (k, c) = order_statistic_rank(6, 0.95).unwrap();
        assert_eq!(k, 1);
        assert!((c - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        // n = 20: k = 6 (coverage 0.9586), k = 7 falls to 0.8847.
        let (k, c) = order_statistic_rank(20, 0.95).unwrap();
        assert_eq!(k, 6);
        assert!((c - 0.958_610_5).abs() < 1e-6, "{c}");
        // Too few runs for 95 %.
        assert_eq!(order_statistic_rank(5, 0.95), None);
        assert_eq!(order_statistic_rank(0, 0.95), None);
        assert_eq!(order_statistic_rank(11, 1.0), None);
    }

    #[test]
    fn ratios_pair_by_round_so_drift_cancels() {
        // The machine slows down round by round; b is always 10 % faster.
        let b: Vec<f64> = (0..11).map(|r| 100.0 + 20.0 * r as f64).collect();
        let a: Vec<f64> = b.iter().map(|x| x * 1.1).collect();
        let p = PairedRatio::of(&a, &b, 0.95).unwrap();
        assert_eq!(p.pairs, 11);
        for x in [p.median, p.low, p.high] {
            assert!((x - 1.1).abs() < 1e-12, "{p:?}");
        }
        assert!(p.resolved_above(1.05));
        // Unpaired, the two spreads overlap widely: 100..300 and 110..330.
    }

    #[test]
    fn the_interval_takes_the_kth_ratios_and_skips_bad_pairs() {
        let b = [1.0; 13];
        let mut a: Vec<f64> = (1..=11).map(|i| i as f64).collect();
        a.reverse();
        a.push(f64::NAN);
        a.push(0.0);
        let p = PairedRatio::of(&a, &b, 0.95).unwrap();
        assert_eq!(p.pairs, 11);
        assert_eq!((p.median, p.low, p.high), (6.0, 2.0, 10.0));
        assert!(!p.resolved_above(2.0));
        assert!(p.resolved_above(1.9));
        // An even count takes the mean of the middle two.
        let p = PairedRatio::of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1.0; 6], 0.95).unwrap();
        assert_eq!((p.median, p.low, p.high), (3.5, 1.0, 6.0));
        // Fewer than 6 pairs: no 95 % interval; the shorter slice decides.
        assert_eq!(PairedRatio::of(&[1.0; 11], &[1.0; 5], 0.95), None);
    }
}
