//! Randomised fuzz harness for the fitter, the solvers and the rounding
//! (cargo-fuzz needs a nightly toolchain, which this project does not use).
//!
//! Each case draws hostile input from a seeded generator: sample sizes and
//! times that are zero, negative, NaN, infinite, tiny, huge or duplicated;
//! stores of 0 to 300 samples; PUs whose models never finish, cost nothing,
//! answer NaN or are flat (zero speed); totals of 0, fractions, or 1e15
//! units. Whatever happens, nothing may panic, every fitted model must keep
//! the `TimeModel` contract, every distribution must be sane and every
//! rounding must sum exactly to its total.
//!
//! `PLB_FUZZ_CASES` sets the number of cases (default 3000, a few seconds
//! in release; CI uses the default), `PLB_FUZZ_SEED` the first seed. A
//! failure prints the seed that reproduces it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use plb_core::fit::{FitConfig, PuModel};
use plb_core::model::{LinearModel, TimeModel};
use plb_core::rng::Rng;
use plb_core::rounding::round_to_units;
use plb_core::samples::{Sample, SampleStore, StoreConfig};
use plb_core::solve::{Primary, SolveError, proportional_split, solve_with_fallback};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A number from a distribution that favours the nasty values.
fn hostile(rng: &mut Rng, typical_lo: f64, typical_hi: f64) -> f64 {
    match rng.below(20) {
        0 => 0.0,
        1 => -rng.log_range(1e-6, 1e6),
        2 => f64::NAN,
        3 => f64::INFINITY,
        4 => f64::NEG_INFINITY,
        5 => rng.log_range(1e-300, 1e-200),
        6 => rng.log_range(1e200, 1e300),
        7 => f64::MIN_POSITIVE,
        _ => rng.log_range(typical_lo, typical_hi),
    }
}

/// A PU the solvers must cope with, fitted or adversarial.
enum Pu {
    Fitted(PuModel),
    Linear(LinearModel),
    Never,
    Nan,
    Flat(f64),
}

impl TimeModel for Pu {
    fn time(&self, x: f64) -> f64 {
        match self {
            Pu::Fitted(m) => m.time(x),
            Pu::Linear(m) => m.time(x),
            Pu::Never => f64::INFINITY,
            Pu::Nan => f64::NAN,
            Pu::Flat(t) => *t,
        }
    }
    fn slope(&self, x: f64) -> f64 {
        match self {
            Pu::Fitted(m) => m.slope(x),
            Pu::Linear(m) => m.slope(x),
            Pu::Never | Pu::Flat(_) => 0.0,
            Pu::Nan => f64::NAN,
        }
    }
}

/// Checks the `TimeModel` contract on a grid over and beyond the range.
fn check_contract(m: &PuModel, hi: f64) -> Result<(), String> {
    let mut last = m.time(0.0);
    if !(last.is_finite() && last >= 0.0) {
        return Err(format!("time(0) = {last}"));
    }
    for i in 1..=200 {
        let x = hi * 2.0 * i as f64 / 200.0;
        let (t, s) = (m.time(x), m.slope(x));
        if !(t.is_finite() && t >= 0.0 && s.is_finite() && s >= 0.0) {
            return Err(format!("time({x}) = {t}, slope = {s}"));
        }
        if t < last * (1.0 - 1e-12) - 1e-300 {
            return Err(format!("decreasing at {x}: {t} < {last}"));
        }
        last = t;
    }
    Ok(())
}

/// One fuzz case; Err describes a broken invariant.
fn case(seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let n_pus = rng.below(9) as usize; // 0..=8, 0 included on purpose
    let mut pus = Vec::new();
    for _ in 0..n_pus {
        let pu = match rng.below(10) {
            0 => Pu::Never,
            1 => Pu::Nan,
            2 => Pu::Flat(hostile(&mut rng, 1e-3, 10.0)),
            3 => Pu::Linear(LinearModel {
                fixed: rng.range(0.0, 0.1),
                rate: rng.log_range(1e-3, 1e9),
            }),
            _ => {
                let mut store = SampleStore::new(StoreConfig {
                    cap: 2 + rng.below(200) as usize,
                    half_life: hostile(&mut rng, 1.0, 100.0),
                    min_weight: rng.unit(),
                });
                let samples = rng.below(300);
                let one_size = rng.below(5) == 0;
                let size0 = hostile(&mut rng, 1.0, 1e7);
                let speed = rng.log_range(1e-9, 1e-3);
                let mut hi = 0f64;
                for _ in 0..samples {
                    let units = if one_size {
                        size0
                    } else {
                        hostile(&mut rng, 1.0, 1e7)
                    };
                    let clean = speed * units.abs() * rng.range(0.9, 1.1);
                    let compute = if rng.below(10) == 0 {
                        hostile(&mut rng, 1e-6, 1e3)
                    } else {
                        clean
                    };
                    let transfer = if rng.below(10) == 0 {
                        hostile(&mut rng, 1e-6, 1.0)
                    } else {
                        clean * 0.01
                    };
                    if store.push(Sample::new(units, compute, transfer)).is_ok()
                        && units.is_finite()
                    {
                        hi = hi.max(units);
                    }
                }
                match store.fit(&FitConfig::default()) {
                    Ok(fit) => {
                        check_contract(&fit.model, hi.max(1.0)).map_err(|e| {
                            format!("fitted model {} breaks the contract: {e}", fit.model.exec)
                        })?;
                        Pu::Fitted(fit.model)
                    }
                    Err(_) => Pu::Linear(LinearModel {
                        fixed: 0.0,
                        rate: 1.0,
                    }),
                }
            }
        };
        pus.push(pu);
    }
    let models: Vec<&dyn TimeModel> = pus.iter().map(|p| p as &dyn TimeModel).collect();
    let total = match rng.below(6) {
        0 => 0.0,
        1 => rng.range(0.0, 3.0),
        2 => 1e15,
        3 => hostile(&mut rng, 1.0, 1e7),
        _ => rng.log_range(1.0, 1e7).round(),
    };
    let primary = if rng.below(4) == 0 {
        Primary::Ipopt
    } else {
        Primary::Fast
    };
    match solve_with_fallback(&models, total, primary, None) {
        Ok(d) => {
            if d.shares.len() != models.len() {
                return Err(format!(
                    "{} shares for {} PUs",
                    d.shares.len(),
                    models.len()
                ));
            }
            if !d.is_sane(if total > 0.0 { total } else { 0.0 }) {
                return Err(format!("insane distribution for total {total}: {d:?}"));
            }
            let whole = total.floor().clamp(0.0, 1e15) as u64;
            let minimums: Vec<u64> = (0..models.len())
                .map(|_| rng.below(3) * rng.below(1000))
                .collect();
            match round_to_units(&d.shares, whole, &minimums) {
                Ok(blocks) => {
                    let sum: u64 = blocks.iter().sum();
                    if sum != whole {
                        return Err(format!("rounding sums to {sum}, not {whole}"));
                    }
                }
                Err(e) => {
                    // Only an all-zero distribution (total 0) may be refused.
                    if whole > 0 && d.shares.iter().any(|s| *s > 0.0) {
                        return Err(format!("rounding refused a valid distribution: {e}"));
                    }
                }
            }
        }
        Err(SolveError::NoPus) if models.is_empty() => {}
        Err(SolveError::InvalidTotal(_)) if !(total.is_finite() && total >= 0.0) => {}
        Err(e) => return Err(format!("no distribution for total {total}: {e}")),
    }
    let p = proportional_split(&models, total.max(0.0));
    if total.is_finite() && total > 0.0 && !models.is_empty() && !p.is_sane(total) {
        return Err(format!("insane proportional split: {p:?}"));
    }
    Ok(())
}

#[test]
fn fitter_solvers_and_rounding_survive_hostile_input() {
    let cases = env_u64("PLB_FUZZ_CASES", 3000);
    let first = env_u64("PLB_FUZZ_SEED", 1);
    let mut failures = Vec::new();
    for seed in first..first + cases {
        match catch_unwind(AssertUnwindSafe(|| case(seed))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("seed {seed}: {e}")),
            Err(_) => failures.push(format!("seed {seed}: panicked")),
        }
        if failures.len() >= 10 {
            break;
        }
    }
    eprintln!(
        "fuzz: {cases} cases from seed {first}, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
