//! The Geometric Partitioning Algorithm (GPA) of Lastovetsky and Reddy, on
//! whole units: distribute `n` units over processing elements so that all
//! finish together, `x_i / s_i(x_i)` equal, `Σ x_i = n`.
//!
//! Geometrically, the solution is where a line through the origin cuts the
//! speed functions; the paper bisects the angle of that line between an
//! upper line (a solution for some `n_u < n`) and a lower one (`n_l > n`).
//! A line through the origin of slope `1/T` is the set of points with
//! `x / s(x) = T`, so bisecting the line is bisecting the common time `T`:
//! that is what [`partition`] does, with `x_i(T)` the most units element
//! `i` finishes within `T`. The integer solution takes the smallest `T`
//! whose units reach `n`, then gives back the excess from the elements
//! whose last unit ends latest.

use crate::model::TimeModel;

/// Bisection steps on `T` (each halves the bracket; 200 exhausts f64).
const STEPS: usize = 200;

/// Most units element `model` completes within `t` seconds, at most `n`
/// (binary search; `time` non-decreasing, as the model contract says).
fn units_within(model: &dyn TimeModel, t: f64, n: u64) -> u64 {
    if model.time(n as f64) <= t {
        return n;
    }
    let (mut lo, mut hi) = (0u64, n); // time(lo) <= t (or lo = 0), time(hi) > t
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if model.time(mid as f64) <= t {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Distributes `n` units over `models` (one per element) so that the
/// predicted finish times are as equal as whole units allow: the largest
/// predicted time is the smallest possible. Elements whose model predicts
/// nothing (infinite time) get nothing unless every element is so, in
/// which case the split is even.
pub fn partition(models: &[&dyn TimeModel], n: u64) -> Vec<u64> {
    let p = models.len();
    if p == 0 {
        return Vec::new();
    }
    if n == 0 {
        return vec![0; p];
    }
    let usable: Vec<bool> = models
        .iter()
        .map(|m| m.time(n as f64).is_finite())
        .collect();
    if !usable.iter().any(|&u| u) {
        return even(p, n);
    }
    // Upper bracket: the fastest element alone takes everything.
    let mut hi = models
        .iter()
        .zip(&usable)
        .filter(|(_, u)| **u)
        .map(|(m, _)| m.time(n as f64))
        .fold(f64::INFINITY, f64::min);
    let mut lo = 0.0f64;
    let total = |t: f64| -> u64 {
        models
            .iter()
            .zip(&usable)
            .filter(|(_, u)| **u)
            .map(|(m, _)| units_within(*m, t, n))
            .sum()
    };
    for _ in 0..STEPS {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if total(mid) >= n {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut x: Vec<u64> = models
        .iter()
        .zip(&usable)
        .map(|(m, &u)| if u { units_within(*m, hi, n) } else { 0 })
        .collect();
    let mut excess = x.iter().sum::<u64>().saturating_sub(n);
    while excess > 0 {
        // The element whose last unit finishes latest gives it back.
        let Some(i) = (0..p).filter(|&i| x[i] > 0).max_by(|&a, &b| {
            models[a]
                .time(x[a] as f64)
                .total_cmp(&models[b].time(x[b] as f64))
        }) else {
            break;
        };
        x[i] -= 1;
        excess -= 1;
    }
    x
}

/// `n` units split as evenly as possible over `p` elements (the first
/// `n mod p` get one more).
pub fn even(p: usize, n: u64) -> Vec<u64> {
    if p == 0 {
        return Vec::new();
    }
    let q = n / p as u64;
    let r = (n % p as u64) as usize;
    (0..p).map(|i| q + u64::from(i < r)).collect()
}

/// `n` units in proportion to `weights` (largest remainders; all weights
/// unusable: even). The constant-performance-model (CPM) split.
pub fn proportional(weights: &[f64], n: u64) -> Vec<u64> {
    let ok = |w: f64| w.is_finite() && w > 0.0;
    let sum: f64 = weights.iter().copied().filter(|&w| ok(w)).sum();
    if sum <= 0.0 {
        return even(weights.len(), n);
    }
    let exact: Vec<f64> = weights
        .iter()
        .map(|&w| if ok(w) { n as f64 * w / sum } else { 0.0 })
        .collect();
    let mut x: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let mut left = n.saturating_sub(x.iter().sum());
    let mut order: Vec<usize> = (0..weights.len()).filter(|&i| ok(weights[i])).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        x[i] += 1;
        left -= 1;
    }
    x
}

/// Relative imbalance of measured times: `max |t_i - t_j| / t_i` over the
/// elements that had work, i.e. `(max - min) / min` (the paper's
/// convergence test); 0 with fewer than two such elements.
pub fn imbalance(units: &[u64], times: &[f64]) -> f64 {
    let busy = units
        .iter()
        .zip(times)
        .filter(|(x, t)| **x > 0 && t.is_finite())
        .map(|(_, &t)| t);
    let (mut lo, mut hi, mut k) = (f64::INFINITY, 0.0f64, 0);
    for t in busy {
        lo = lo.min(t);
        hi = hi.max(t);
        k += 1;
    }
    if k < 2 {
        0.0
    } else if lo <= 0.0 {
        f64::INFINITY
    } else {
        (hi - lo) / lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinearModel;

    fn lin(rate: f64) -> LinearModel {
        LinearModel { fixed: 0.0, rate }
    }

    #[test]
    fn linear_speeds_give_the_proportional_split() {
        let (a, b, c) = (lin(1.0), lin(2.0), lin(5.0));
        let x = partition(&[&a, &b, &c], 800);
        assert_eq!(x, vec![100, 200, 500]);
    }

    #[test]
    fn whole_units_minimise_the_largest_time() {
        let (a, b) = (lin(1.0), lin(1.0));
        let x = partition(&[&a, &b], 7);
        assert_eq!(x.iter().sum::<u64>(), 7);
        assert_eq!(*x.iter().max().unwrap(), 4);
        let (a, b, c) = (lin(3.0), lin(1.0), lin(7.0));
        for n in [1, 2, 10, 99, 1000] {
            let x = partition(&[&a, &b, &c], n);
            assert_eq!(x.iter().sum::<u64>(), n);
            let worst = [x[0] as f64 / 3.0, x[1] as f64, x[2] as f64 / 7.0]
                .into_iter()
                .fold(0.0, f64::max);
            // Moving any unit elsewhere cannot lower the largest time.
            for i in 0..3 {
                for j in 0..3 {
                    if i == j || x[i] == 0 {
                        continue;
                    }
                    let mut y = x.clone();
                    y[i] -= 1;
                    y[j] += 1;
                    let w = [y[0] as f64 / 3.0, y[1] as f64, y[2] as f64 / 7.0]
                        .into_iter()
                        .fold(0.0, f64::max);
                    assert!(w >= worst - 1e-12, "n={n} {x:?} -> {y:?}");
                }
            }
        }
    }

    #[test]
    fn a_memory_cliff_moves_work_elsewhere() {
        use crate::cluster::fpm::SpeedFunction;
        // Element 0 is 4x faster up to 100 units, then 4x slower.
        let mut f = SpeedFunction::new();
        f.add(50.0, 50.0 / 400.0);
        f.add(100.0, 100.0 / 400.0);
        f.add(101.0, 101.0 / 100.0);
        f.add(1000.0, 1000.0 / 100.0);
        let g = lin(100.0);
        let x = partition(&[&f, &g], 200);
        assert_eq!(x, vec![100, 100]);
        // A constant model (CPM) from the first point would give 160 / 40.
        assert_eq!(proportional(&[400.0, 100.0], 200), vec![160, 40]);
    }

    #[test]
    fn helpers_split_evenly_and_measure_imbalance() {
        assert_eq!(even(3, 10), vec![4, 3, 3]);
        assert_eq!(proportional(&[1.0, f64::NAN, 1.0], 5), vec![3, 0, 2]);
        assert_eq!(proportional(&[0.0, 0.0], 5), vec![3, 2]);
        assert!((imbalance(&[1, 1, 0], &[1.0, 1.5, 9.0]) - 0.5).abs() < 1e-12);
        assert_eq!(imbalance(&[1], &[3.0]), 0.0);
    }

    #[test]
    fn elements_without_a_model_get_nothing() {
        use crate::cluster::fpm::SpeedFunction;
        let none = SpeedFunction::new();
        let a = lin(1.0);
        assert_eq!(partition(&[&none, &a], 10), vec![0, 10]);
        assert_eq!(partition(&[&none, &none], 5), vec![3, 2]);
    }
}
