//! Co-execution metrics, as the Sigmoid paper and its peers (EngineCL,
//! SYCL co-execution runtimes) report them, computed the same way for real
//! runs and simulated ones.
//!
//! For a run on PUs `i` with solo times `S_i` (the whole work on PU `i`
//! alone) and fastest solo time `S_f = min S_i`:
//!
//! ```text
//! balance              = first finish / last finish   (over the PUs that got work; 1 = ideal)
//! speedup              = S_f / makespan
//! max achievable       = Σ_i S_f / S_i
//! efficiency           = speedup / max achievable  = (1 / Σ_i 1/S_i) / makespan
//! energy  (MODELLED)   = Σ_i busy_w_i · busy_i + idle_w_i · (makespan − busy_i)
//! baseline energy      = busy_w_f · S_f + Σ_{i≠f} idle_w_i · S_f   (fastest PU alone, the others idle)
//! normalised energy    = energy / baseline energy
//! normalised EDP       = (energy · makespan) / (baseline energy · S_f)
//! ```
//!
//! `1 / Σ 1/S_i` is the makespan of a perfect, overhead-free co-execution
//! of a kernel whose throughput does not depend on block size, so
//! efficiency 1 means nothing was lost to imbalance or overhead.

/// Idle and busy power of one PU, watts (a platform file's `power` line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Power {
    pub idle_w: f64,
    pub busy_w: f64,
}

/// What one co-executed run did, per PU (same order as the solo times).
#[derive(Debug, Clone, PartialEq)]
pub struct RunShape {
    pub makespan_s: f64,
    /// When each PU finished its last block (0: it got no work).
    pub finish_s: Vec<f64>,
    /// Seconds each PU spent on blocks.
    pub busy_s: Vec<f64>,
}

/// The metrics of one run (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metrics {
    pub makespan_s: f64,
    pub balance: f64,
    /// PUs that got no work.
    pub unused: usize,
    pub speedup: f64,
    pub max_speedup: f64,
    pub efficiency: f64,
    /// Joules (MODELLED unless the caller measured it).
    pub energy_j: Option<f64>,
    /// Energy over the fastest-PU-alone baseline's.
    pub energy_norm: Option<f64>,
    /// Energy-delay product over the baseline's.
    pub edp_norm: Option<f64>,
}

/// Why metrics cannot be computed.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsError(pub String);

impl std::fmt::Display for MetricsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn positive(what: &str, v: f64) -> Result<f64, MetricsError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(MetricsError(format!(
            "{what} = {v}: must be finite and > 0"
        )))
    }
}

/// The fastest solo time and the ideal co-execution time `1 / Σ 1/S_i`.
pub fn ideal(solo_s: &[f64]) -> Result<(f64, f64), MetricsError> {
    if solo_s.is_empty() {
        return Err(MetricsError("no solo time".into()));
    }
    let mut fastest = f64::INFINITY;
    let mut rate = 0.0;
    for (i, s) in solo_s.iter().enumerate() {
        let s = positive(&format!("solo time of PU {i}"), *s)?;
        fastest = fastest.min(s);
        rate += 1.0 / s;
    }
    Ok((fastest, 1.0 / rate))
}

/// Metrics of `run` against the solo times `solo_s`, with energy when
/// `power` (one per PU) is given.
pub fn metrics(
    run: &RunShape,
    solo_s: &[f64],
    power: Option<&[Power]>,
) -> Result<Metrics, MetricsError> {
    let n = solo_s.len();
    if run.finish_s.len() != n || run.busy_s.len() != n {
        return Err(MetricsError(format!(
            "{n} solo times but {} finish and {} busy times",
            run.finish_s.len(),
            run.busy_s.len()
        )));
    }
    let makespan = positive("makespan", run.makespan_s)?;
    let (fastest, ideal_s) = ideal(solo_s)?;
    let used: Vec<f64> = run
        .finish_s
        .iter()
        .copied()
        .filter(|f| f.is_finite() && *f > 0.0)
        .collect();
    let first = used.iter().copied().fold(f64::INFINITY, f64::min);
    let last = used.iter().copied().fold(0.0, f64::max);
    let balance = if used.is_empty() { 0.0 } else { first / last };
    let speedup = fastest / makespan;
    let max_speedup = fastest / ideal_s;
    let mut m = Metrics {
        makespan_s: makespan,
        balance,
        unused: n - used.len(),
        speedup,
        max_speedup,
        efficiency: speedup / max_speedup,
        energy_j: None,
        energy_norm: None,
        edp_norm: None,
    };
    if let Some(power) = power {
        if power.len() != n {
            return Err(MetricsError(format!(
                "{n} PUs but {} power figures",
                power.len()
            )));
        }
        let f = solo_s
            .iter()
            .position(|s| *s == fastest)
            .expect("the minimum is an element");
        let energy: f64 = power
            .iter()
            .zip(&run.busy_s)
            .map(|(p, b)| {
                let busy = b.clamp(0.0, makespan);
                p.busy_w * busy + p.idle_w * (makespan - busy)
            })
            .sum();
        let baseline: f64 = power
            .iter()
            .enumerate()
            .map(|(i, p)| if i == f { p.busy_w } else { p.idle_w } * fastest)
            .sum();
        let baseline = positive("baseline energy", baseline)?;
        m.energy_j = Some(energy);
        m.energy_norm = Some(energy / baseline);
        m.edp_norm = Some(energy * makespan / (baseline * fastest));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(makespan: f64, finish: &[f64], busy: &[f64]) -> RunShape {
        RunShape {
            makespan_s: makespan,
            finish_s: finish.to_vec(),
            busy_s: busy.to_vec(),
        }
    }

    #[test]
    fn a_perfect_co_execution_has_efficiency_and_balance_one() {
        // Solo 4 s and 1 s: ideal together 0.8 s, max speedup 1.25.
        let run = shape(0.8, &[0.8, 0.8], &[0.8, 0.8]);
        let m = metrics(&run, &[4.0, 1.0], None).unwrap();
        assert!((m.max_speedup - 1.25).abs() < 1e-12);
        assert!((m.speedup - 1.25).abs() < 1e-12);
        assert!((m.efficiency - 1.0).abs() < 1e-12);
        assert!((m.balance - 1.0).abs() < 1e-12);
        assert_eq!(m.unused, 0);
    }

    #[test]
    fn the_fastest_alone_is_speedup_one_and_leaves_a_pu_unused() {
        let run = shape(1.0, &[0.0, 1.0], &[0.0, 1.0]);
        let m = metrics(&run, &[4.0, 1.0], None).unwrap();
        assert!((m.speedup - 1.0).abs() < 1e-12);
        assert!((m.efficiency - 0.8).abs() < 1e-12);
        assert_eq!((m.balance, m.unused), (1.0, 1));
    }

    #[test]
    fn energy_and_edp_are_normalised_to_the_fastest_alone() {
        let power = [
            Power {
                idle_w: 10.0,
                busy_w: 50.0,
            },
            Power {
                idle_w: 20.0,
                busy_w: 200.0,
            },
        ];
        // Baseline: PU 1 alone 1 s (200 J) + PU 0 idle 1 s (10 J) = 210 J.
        let alone = shape(1.0, &[0.0, 1.0], &[0.0, 1.0]);
        let m = metrics(&alone, &[4.0, 1.0], Some(&power)).unwrap();
        assert!((m.energy_j.unwrap() - 210.0).abs() < 1e-9);
        assert!((m.energy_norm.unwrap() - 1.0).abs() < 1e-12);
        assert!((m.edp_norm.unwrap() - 1.0).abs() < 1e-12);
        // Both busy 0.8 s: 0.8·50 + 0.8·200 = 200 J, EDP 160 vs 210.
        let both = shape(0.8, &[0.8, 0.8], &[0.8, 0.8]);
        let m = metrics(&both, &[4.0, 1.0], Some(&power)).unwrap();
        assert!((m.energy_j.unwrap() - 200.0).abs() < 1e-9);
        assert!((m.edp_norm.unwrap() - 160.0 / 210.0).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_are_errors_not_nan() {
        let run = shape(1.0, &[1.0], &[1.0]);
        assert!(metrics(&run, &[0.0], None).is_err());
        assert!(metrics(&run, &[f64::NAN], None).is_err());
        assert!(metrics(&run, &[1.0, 2.0], None).is_err());
        assert!(metrics(&shape(0.0, &[0.0], &[0.0]), &[1.0], None).is_err());
        assert!(metrics(&run, &[1.0], Some(&[])).is_err());
        let nobody = shape(1.0, &[0.0], &[0.0]);
        let m = metrics(&nobody, &[1.0], None).unwrap();
        assert_eq!((m.balance, m.unused), (0.0, 1));
    }
}
