//! Block-size solver benchmark (what `plb bench-solver` prints):
//! `cargo run --release -p plb-core --example bench_solver [budget_s] [cases]`.

use plb_core::bench::{BenchConfig, report};

fn main() {
    let mut cfg = BenchConfig::default();
    let mut args = std::env::args().skip(1);
    if let Some(b) = args.next().and_then(|v| v.parse().ok()) {
        cfg.budget_s = b;
    }
    if let Some(c) = args.next().and_then(|v| v.parse().ok()) {
        cfg.cases = c;
    }
    print!("{}", report(&cfg));
}
