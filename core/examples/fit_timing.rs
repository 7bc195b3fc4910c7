//! Times one refit of a PU model (execution curve with model selection and
//! outlier screening, plus the transfer line) from a full store.
//!
//! `cargo run --release -p plb-core --example fit_timing`
//!
//! Cases: 64 samples at 64 distinct sizes (the worst case: nothing to
//! aggregate), 64 samples at 8 sizes (a training phase followed by repeated
//! blocks), and a full default store (128 samples, 128 sizes); each with the
//! default search (subsets of at most 4 terms: 161 subsets) and the full
//! search (`max_terms = 8`: all 254 subsets of the 8 bases but the constant
//! alone; with 8 sizes the `⌈m/2⌉` term limit still caps it at 4 terms).
//! Prints the median and the 95th percentile of 500 refits.

use std::time::Instant;

use plb_core::bench::synthetic_store;
use plb_core::fit::{FitConfig, fit_exec, fit_pu};
use plb_core::rng::Rng;

fn main() {
    let mut rng = Rng::new(1);
    println!("one refit, release build, one thread");
    println!(
        "{:<34} {:>9} {:>9} {:>11}",
        "case", "median", "p95", "candidates"
    );
    for &(n, distinct) in &[(64usize, 64usize), (64, 8), (128, 128)] {
        let s = synthetic_store(n, distinct, &mut rng);
        let (cp, tp) = (s.compute_points(), s.transfer_points());
        for &max_terms in &[4usize, 8] {
            let cfg = FitConfig {
                max_terms,
                ..FitConfig::default()
            };
            let mut times = Vec::new();
            let mut cands = 0;
            for _ in 0..500 {
                let t0 = Instant::now();
                let fit = fit_pu(&cp, &tp, &cfg).unwrap();
                times.push(t0.elapsed().as_secs_f64());
                cands = fit.exec.candidates;
                std::hint::black_box(fit);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "{:<40} {:>7.1}µs {:>7.1}µs {:>11}",
                format!("{n} samples, {distinct} sizes, max_terms {max_terms}"),
                times[times.len() / 2] * 1e6,
                times[times.len() * 95 / 100] * 1e6,
                cands
            );
        }
        let (m, r) = fit_exec(&cp, &FitConfig::default()).unwrap();
        println!("  chosen: {m}  (R² {:.4}, {:?})", r.r2, r.basis);
    }
}
