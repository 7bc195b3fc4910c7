//! Rounding a real-valued distribution to whole application units (a matrix
//! line, a gene, a point), preserving the exact total and honouring
//! per-PU minimum block sizes (PLB-HAC keeps GPUs from being starved with
//! tiny blocks).
//!
//! Rules of [`round_to_units`], in order:
//!
//! 1. The weights (a [`crate::solve::Distribution`]'s `shares` or `units`)
//!    are scaled to targets `y_p` summing to `total`.
//! 2. A PU's possible block sizes are `{0} ∪ {min_p, min_p + 1, …}`. A PU is
//!    *used* when its target is positive and at least half its minimum
//!    (the nearest of 0 and `min_p`); otherwise it gets 0 and its target is
//!    spread over the used PUs proportionally.
//! 3. If the minimums of the used PUs exceed the total, the least wanted PUs
//!    (smallest `y_p / min_p`) are dropped until they fit. If not even one
//!    fits — every used PU's minimum exceeds the total — the whole total goes
//!    to the most wanted PU (largest `y_p`): the only case where a minimum
//!    is not honoured. If no PU is used at all (every target below half its
//!    minimum, e.g. a total smaller than the number of PUs with minimum 1),
//!    the most wanted PU is used.
//! 4. Used PUs whose rescaled target falls below their minimum get exactly
//!    their minimum; the others share the rest proportionally to their
//!    targets (repeated until stable).
//! 5. Largest remainder (Hamilton): every free PU gets the floor of its
//!    target, and the units left go one by one to the largest fractional
//!    parts (ties to the lower index).
//!
//! The result always sums to `total` exactly. `total = 0` gives all zeros.

use std::fmt;

/// Why [`round_to_units`] could not round.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundingError {
    /// `weights` and `min_block` differ in length.
    LengthMismatch { weights: usize, minimums: usize },
    /// A weight is NaN, infinite or negative.
    InvalidWeight { pu: usize, value: f64 },
    /// A positive total but no PU.
    NoPus,
    /// A positive total but every weight is 0.
    AllZero,
}

impl fmt::Display for RoundingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoundingError::LengthMismatch { weights, minimums } => {
                write!(f, "{weights} weights but {minimums} minimum block sizes")
            }
            RoundingError::InvalidWeight { pu, value } => {
                write!(f, "weight {value} of PU {pu} is not finite and >= 0")
            }
            RoundingError::NoPus => write!(f, "no processing unit to give units to"),
            RoundingError::AllZero => write!(f, "every weight is 0"),
        }
    }
}

impl std::error::Error for RoundingError {}

/// Rounds `weights` (any non-negative scale) to whole units summing to
/// exactly `total`, each used PU getting at least `min_block[p]` (see the
/// module documentation for the rules and the cases where minimums cannot
/// all be honoured). Pass zeros in `min_block` for no minimum.
pub fn round_to_units(
    weights: &[f64],
    total: u64,
    min_block: &[u64],
) -> Result<Vec<u64>, RoundingError> {
    let n = weights.len();
    if min_block.len() != n {
        return Err(RoundingError::LengthMismatch {
            weights: n,
            minimums: min_block.len(),
        });
    }
    if let Some((pu, &value)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !(w.is_finite() && **w >= 0.0))
    {
        return Err(RoundingError::InvalidWeight { pu, value });
    }
    if total == 0 {
        return Ok(vec![0; n]);
    }
    if n == 0 {
        return Err(RoundingError::NoPus);
    }
    let sum: f64 = weights.iter().sum();
    if sum <= 0.0 {
        return Err(RoundingError::AllZero);
    }
    let tot = total as f64;
    // 1. Targets (scale by the largest weight first: no overflow).
    let wmax = weights.iter().copied().fold(0.0, f64::max);
    let scaled_sum: f64 = weights.iter().map(|w| w / wmax).sum();
    let y: Vec<f64> = weights
        .iter()
        .map(|w| tot * (w / wmax) / scaled_sum)
        .collect();

    // 2. Used PUs: nearest of {0, min}.
    let mut used: Vec<bool> = (0..n)
        .map(|p| y[p] > 0.0 && y[p] >= 0.5 * min_block[p] as f64)
        .collect();
    let most_wanted = (0..n).fold(0, |best, p| if y[p] > y[best] { p } else { best });
    if !used.iter().any(|u| *u) {
        used[most_wanted] = true;
    }

    // 3. Drop the least wanted while the minimums do not fit.
    let mut min_sum: u128 = (0..n)
        .filter(|&p| used[p])
        .map(|p| min_block[p] as u128)
        .sum();
    if min_sum > total as u128 {
        let mut order: Vec<usize> = (0..n).filter(|&p| used[p] && min_block[p] > 0).collect();
        // Least wanted first: smallest y/min, ties to the higher index.
        order.sort_by(|&a, &b| {
            let (ka, kb) = (y[a] / min_block[a] as f64, y[b] / min_block[b] as f64);
            ka.total_cmp(&kb).then(b.cmp(&a))
        });
        for p in order {
            if min_sum <= total as u128 || used.iter().filter(|u| **u).count() == 1 {
                break;
            }
            used[p] = false;
            min_sum -= min_block[p] as u128;
        }
        if min_sum > total as u128 {
            // A single PU left whose minimum exceeds the total: give it all.
            let mut out = vec![0; n];
            let only = (0..n).find(|&p| used[p]).unwrap_or(most_wanted);
            out[only] = total;
            return Ok(out);
        }
    }

    // 4. Targets over the used PUs; pin those below their minimum.
    let mut out = vec![0u64; n];
    let mut pinned = vec![false; n];
    let mut target = vec![0.0; n];
    loop {
        let pinned_sum: u64 = (0..n)
            .filter(|&p| used[p] && pinned[p])
            .map(|p| min_block[p])
            .sum();
        let rest = (total - pinned_sum) as f64;
        let free_y: f64 = (0..n)
            .filter(|&p| used[p] && !pinned[p])
            .map(|p| y[p])
            .sum();
        let mut changed = false;
        for p in 0..n {
            if !used[p] || pinned[p] {
                continue;
            }
            target[p] = if free_y > 0.0 {
                rest * y[p] / free_y
            } else {
                0.0
            };
            if target[p] < min_block[p] as f64 {
                pinned[p] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    // 5. Largest remainder over the free PUs (pinned ones get their minimum).
    let mut assigned: u128 = 0;
    let mut free: Vec<usize> = Vec::new();
    for p in 0..n {
        if !used[p] {
            continue;
        }
        out[p] = if pinned[p] {
            min_block[p]
        } else {
            free.push(p);
            (target[p].floor() as u64).max(min_block[p])
        };
        assigned += out[p] as u128;
    }
    if free.is_empty() {
        // Every used PU pinned (round-off): spread what is left over all.
        free = (0..n).filter(|&p| used[p]).collect();
        for &p in &free {
            target[p] = out[p] as f64 + y[p];
        }
    }
    let frac = |p: usize| target[p] - target[p].floor();
    if assigned < total as u128 {
        let mut left = total as u128 - assigned;
        let k = free.len() as u128;
        // Bulk (only when float round-off left many units), then one each.
        let bulk = left / k;
        if bulk > 0 {
            for &p in &free {
                out[p] += bulk as u64;
            }
            left -= bulk * k;
        }
        let mut order = free.clone();
        order.sort_by(|&a, &b| frac(b).total_cmp(&frac(a)).then(a.cmp(&b)));
        for &p in order.iter().take(left as usize) {
            out[p] += 1;
        }
    } else {
        // Float round-off overshoot: take back from the smallest fractional
        // parts among PUs above their minimum.
        let mut excess = assigned - total as u128;
        let mut order = free.clone();
        order.sort_by(|&a, &b| frac(a).total_cmp(&frac(b)).then(b.cmp(&a)));
        while excess > 0 {
            let mut progressed = false;
            for &p in &order {
                if excess == 0 {
                    break;
                }
                if out[p] > min_block[p] {
                    out[p] -= 1;
                    excess -= 1;
                    progressed = true;
                }
            }
            if !progressed {
                break; // cannot happen: the minimums fit in the total
            }
        }
    }
    Ok(out)
}

/// Splits `total` whole units among PUs that run `rates[p]` units per
/// second (any common scale), minimising the largest `units_p / rates_p`
/// (the step's finish time when each PU's time is linear in its units):
/// every PU first gets the floor of its proportional share, then the units
/// left go one by one to the PU that would finish its next unit first
/// (ties to the lower index). A PU of rate 0 gets nothing. Largest
/// remainder ([`round_to_units`]) can instead give a slow PU one more unit
/// that it takes much longer to run than a fast one would.
pub fn round_by_rates(rates: &[f64], total: u64) -> Result<Vec<u64>, RoundingError> {
    if let Some((pu, &value)) = rates
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return Err(RoundingError::InvalidWeight { pu, value });
    }
    if total == 0 {
        return Ok(vec![0; rates.len()]);
    }
    if rates.is_empty() {
        return Err(RoundingError::NoPus);
    }
    let sum: f64 = rates.iter().sum();
    if sum <= 0.0 {
        return Err(RoundingError::AllZero);
    }
    let mut units: Vec<u64> = rates
        .iter()
        .map(|&r| (total as f64 * r / sum).floor() as u64)
        .collect();
    let mut given: u64 = units.iter().sum();
    // Float floors can overshoot by a unit at most in pathological scales.
    while given > total {
        let p = (0..units.len()).max_by_key(|&p| units[p]).unwrap_or(0);
        units[p] -= 1;
        given -= 1;
    }
    while given < total {
        let next = |p: usize| (units[p] + 1) as f64 / rates[p];
        let p = (0..rates.len())
            .filter(|&p| rates[p] > 0.0)
            .min_by(|&a, &b| next(a).total_cmp(&next(b)))
            .unwrap_or(0);
        units[p] += 1;
        given += 1;
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn check(weights: &[f64], total: u64, mins: &[u64]) -> Vec<u64> {
        let out = round_to_units(weights, total, mins).unwrap();
        assert_eq!(
            out.iter().sum::<u64>(),
            total,
            "{weights:?} {total} {mins:?} -> {out:?}"
        );
        out
    }

    #[test]
    fn exact_total_and_nearest_rounding() {
        assert_eq!(check(&[1.0, 1.0, 1.0], 10, &[0, 0, 0]), vec![4, 3, 3]);
        assert_eq!(check(&[0.25, 0.75], 4, &[0, 0]), vec![1, 3]);
        assert_eq!(check(&[0.2, 0.3, 0.5], 7, &[0, 0, 0]), vec![1, 2, 4]);
        assert_eq!(check(&[1.0, 0.0], 5, &[0, 0]), vec![5, 0]);
    }

    #[test]
    fn random_cases_keep_total_and_minimums() {
        let mut rng = Rng::new(42);
        for _ in 0..20_000 {
            let n = 1 + rng.below(20) as usize;
            let total = match rng.below(3) {
                0 => rng.below(10),
                1 => rng.below(1000),
                _ => rng.below(1 << 40),
            };
            let weights: Vec<f64> = (0..n)
                .map(|_| {
                    if rng.below(5) == 0 {
                        0.0
                    } else {
                        rng.log_range(1e-6, 1.0)
                    }
                })
                .collect();
            let mins: Vec<u64> = (0..n)
                .map(|_| {
                    if rng.below(2) == 0 {
                        0
                    } else {
                        rng.below(total / 4 + 2)
                    }
                })
                .collect();
            if weights.iter().all(|w| *w == 0.0) {
                let want = if total > 0 {
                    Err(RoundingError::AllZero)
                } else {
                    Ok(vec![0; n])
                };
                assert_eq!(round_to_units(&weights, total, &mins), want);
                continue;
            }
            let out = check(&weights, total, &mins);
            let got: usize = out.iter().filter(|v| **v > 0).count();
            for p in 0..n {
                // Minimums are honoured, except when a single PU takes a
                // total smaller than its minimum.
                if out[p] > 0 && out[p] < mins[p] {
                    assert!(got == 1 && out[p] == total, "{weights:?} {mins:?} {out:?}");
                }
                if weights[p] == 0.0 {
                    assert_eq!(out[p], 0);
                }
            }
            if mins.iter().all(|m| *m == 0) {
                // Plain Hamilton: within one unit of the target.
                let s: f64 = weights.iter().sum();
                for p in 0..n {
                    let y = total as f64 * weights[p] / s;
                    assert!((out[p] as f64 - y).abs() < 1.0 + 1e-6 * y, "{y} {}", out[p]);
                }
            }
        }
    }

    #[test]
    fn minimum_larger_than_the_share() {
        // Target 30 with minimum 50: raised to 50 (30 ≥ 25), others shrink.
        assert_eq!(check(&[0.3, 0.7], 100, &[50, 0]), vec![50, 50]);
        // Target 20 with minimum 50: below half the minimum → 0.
        assert_eq!(check(&[0.2, 0.8], 100, &[50, 0]), vec![0, 100]);
        // Both above their minimum: untouched.
        assert_eq!(check(&[0.6, 0.4], 100, &[50, 10]), vec![60, 40]);
    }

    #[test]
    fn total_smaller_than_the_sum_of_minimums() {
        // Minimums 40 + 40 + 40 > 100: the least wanted (PU 2) is dropped.
        assert_eq!(
            check(&[0.4, 0.35, 0.25], 100, &[40, 40, 40]),
            vec![53, 47, 0]
        );
        // Every minimum exceeds the total: all to the most wanted.
        assert_eq!(check(&[0.3, 0.7], 10, &[20, 20]), vec![0, 10]);
    }

    #[test]
    fn total_smaller_than_the_number_of_pus() {
        assert_eq!(check(&[1.0; 5], 3, &[0; 5]), vec![1, 1, 1, 0, 0]);
        assert_eq!(check(&[1.0; 5], 3, &[1; 5]), vec![1, 1, 1, 0, 0]);
        // Every target (0.2) is below half the minimum (2): most wanted.
        assert_eq!(
            check(&[1.0, 1.0, 1.1, 1.0, 1.0], 1, &[4; 5]),
            vec![0, 0, 1, 0, 0]
        );
    }

    #[test]
    fn zero_total_and_bad_input() {
        assert_eq!(round_to_units(&[1.0, 2.0], 0, &[5, 5]), Ok(vec![0, 0]));
        assert_eq!(round_to_units(&[], 0, &[]), Ok(vec![]));
        assert_eq!(round_to_units(&[], 3, &[]), Err(RoundingError::NoPus));
        assert_eq!(
            round_to_units(&[0.0, 0.0], 3, &[0, 0]),
            Err(RoundingError::AllZero)
        );
        assert!(matches!(
            round_to_units(&[1.0, f64::NAN], 3, &[0, 0]),
            Err(RoundingError::InvalidWeight { pu: 1, .. })
        ));
        assert!(matches!(
            round_to_units(&[1.0, -1.0], 3, &[0, 0]),
            Err(RoundingError::InvalidWeight { pu: 1, .. })
        ));
        assert_eq!(
            round_to_units(&[1.0], 3, &[0, 0]),
            Err(RoundingError::LengthMismatch {
                weights: 1,
                minimums: 2
            })
        );
    }

    #[test]
    fn huge_totals() {
        let out = check(&[1.0, 2.0, 3.0], u64::MAX, &[0, 0, 0]);
        assert!(out[2] > out[1] && out[1] > out[0]);
        check(&[1e-300, 1e300], 1 << 60, &[7, 0]);
    }

    #[test]
    fn rates_rounding_minimises_the_finish_time() {
        // 3 units/s on three fast PUs, 1 on nine slow ones (mirage's 3 GPUs
        // and 9 CPUs, tasks 1 ms and 10 ms): 64 units.
        let mut rates = vec![1000.0; 3];
        rates.extend([100.0; 9]);
        let units = round_by_rates(&rates, 64).unwrap();
        assert_eq!(units.iter().sum::<u64>(), 64);
        let finish = |u: &[u64]| {
            u.iter()
                .zip(&rates)
                .map(|(&u, &r)| u as f64 / r)
                .fold(0.0, f64::max)
        };
        // Largest remainder gives seven slow PUs a second unit (20 ms).
        let hamilton = round_to_units(&rates, 64, &[0; 12]).unwrap();
        assert!((finish(&hamilton) - 0.020).abs() < 1e-12, "{hamilton:?}");
        assert!(finish(&units) <= 0.019 + 1e-12, "{units:?}");
        // No other split does better: moving any one unit from the PU that
        // finishes last to any other PU ends no earlier.
        let last = (0..12)
            .max_by(|&a, &b| (units[a] as f64 / rates[a]).total_cmp(&(units[b] as f64 / rates[b])))
            .unwrap();
        for q in (0..12).filter(|&q| q != last) {
            let mut moved = units.clone();
            moved[last] -= 1;
            moved[q] += 1;
            assert!(finish(&moved) >= finish(&units) - 1e-12, "{moved:?}");
        }
    }

    #[test]
    fn rates_rounding_edge_cases() {
        assert_eq!(round_by_rates(&[1.0, 0.0, 3.0], 8).unwrap(), vec![2, 0, 6]);
        assert_eq!(round_by_rates(&[1.0, 1.0], 0).unwrap(), vec![0, 0]);
        assert_eq!(round_by_rates(&[], 3), Err(RoundingError::NoPus));
        assert_eq!(round_by_rates(&[0.0, 0.0], 3), Err(RoundingError::AllZero));
        assert!(matches!(
            round_by_rates(&[1.0, f64::NAN], 3),
            Err(RoundingError::InvalidWeight { pu: 1, .. })
        ));
        // Exact total for every size, and never more than one unit away
        // from the proportional share's floor + the rest.
        for total in 0..200 {
            let u = round_by_rates(&[0.3, 7.0, 2.5], total).unwrap();
            assert_eq!(u.iter().sum::<u64>(), total);
        }
    }
}
