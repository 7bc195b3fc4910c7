//! Fits four synthetic processing units and writes their samples and
//! fitted curves for `scripts/plot-models.sh` (which renders
//! `docs/img/models.png`).
//!
//! `cargo run --release -p plb-core --example fit_curves -- <dir>` writes,
//! for each PU `i` in 1..=4: `samples-i.dat` and `outliers-i.dat` (`x t`
//! per line), `curve-i.dat` (the fitted E = F + G from 0 to 1.3× the
//! largest size, beyond the fitted range on purpose) and `title-i.txt`.
//! Without a directory it prints the fits only. All data are synthetic.

use std::fmt::Write as _;
use std::path::PathBuf;

use plb_core::fit::FitConfig;
use plb_core::model::TimeModel;
use plb_core::rng::Rng;
use plb_core::samples::{Sample, SampleStore};

struct Pu {
    name: &'static str,
    /// Compute seconds for x units, before noise.
    compute: fn(f64) -> f64,
    /// Transfer seconds for x units.
    transfer: fn(f64) -> f64,
    noise: f64,
    spike: bool,
}

fn main() {
    let dir = std::env::args().nth(1).map(PathBuf::from);
    let pus = [
        Pu {
            name: "GPU-like: 40 ms latency, 5% noise",
            compute: |x| 0.04 + x / 4.0e6,
            transfer: |x| 2e-3 + x / 2.0e7,
            noise: 0.05,
            spike: false,
        },
        Pu {
            name: "CPU-like: linear, 3% noise",
            compute: |x| x / 1.5e6,
            transfer: |_| 0.0,
            noise: 0.03,
            spike: false,
        },
        Pu {
            name: "superlinear: x ln x, 3% noise",
            compute: |x| x / 8.0e6 + 1.5e-7 * x * (x / 4096.0).ln().max(0.0),
            transfer: |x| x / 4.0e7,
            noise: 0.03,
            spike: false,
        },
        Pu {
            name: "with two 10x spikes, 3% noise",
            compute: |x| 0.02 + x / 2.0e6,
            transfer: |x| 1e-3 + x / 3.0e7,
            noise: 0.03,
            spike: true,
        },
    ];
    let mut rng = Rng::new(11);
    for (i, pu) in pus.iter().enumerate() {
        let mut store = SampleStore::default();
        // Training sizes (doubling from 8 Ki) then blocks around the
        // operating point, as PLB-HeC would produce them.
        let mut sizes: Vec<f64> = (0..6).map(|k| 8192.0 * 2f64.powi(k)).collect();
        for _ in 0..24 {
            sizes.push((rng.range(0.35, 1.0) * 262_144.0).round());
        }
        for (k, &x) in sizes.iter().enumerate() {
            let mut c = (pu.compute)(x) * (1.0 + pu.noise * (2.0 * rng.unit() - 1.0));
            if pu.spike && (k == 3 || k == 17) {
                c *= 10.0;
            }
            let t = (pu.transfer)(x) * (1.0 + pu.noise * (2.0 * rng.unit() - 1.0));
            store
                .push(Sample::new(x, c, t))
                .expect("synthetic samples are valid");
        }
        let points = store.compute_points();
        let transfer = store.transfer_points();
        let fit = store.fit(&FitConfig::default()).expect("fit");
        let m = &fit.model;
        let (_, hi) = m.exec.range();
        let title = format!(
            "{}: F = {}, G = {} (R² {:.3})",
            pu.name,
            m.exec.describe(),
            m.transfer,
            fit.exec.r2
        );
        println!("PU {}: {title}", i + 1);
        println!("      {:?}", fit.exec);
        let Some(dir) = &dir else { continue };
        std::fs::create_dir_all(dir).expect("output directory");
        let (mut s, mut o, mut c) = (String::new(), String::new(), String::new());
        for (k, (p, q)) in points.iter().zip(&transfer).enumerate() {
            let line = format!("{} {}\n", p.x, p.t + q.t);
            if fit.exec.outlier_indices.contains(&k) {
                o.push_str(&line);
            } else {
                s.push_str(&line);
            }
        }
        if o.is_empty() {
            o.push_str("NaN NaN\n");
        }
        for k in 0..=400 {
            let x = 1.3 * hi * k as f64 / 400.0;
            writeln!(c, "{x} {}", m.time(x)).expect("write to a String");
        }
        let n = i + 1;
        let w = |name: String, text: &str| {
            std::fs::write(dir.join(name), text).expect("write output file");
        };
        w(format!("samples-{n}.dat"), &s);
        w(format!("outliers-{n}.dat"), &o);
        w(format!("curve-{n}.dat"), &c);
        w(format!("title-{n}.txt"), &title);
    }
}
