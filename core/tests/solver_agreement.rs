//! Property tests of the block-size solvers on thousands of random monotone
//! models (mixtures of the papers' basis functions, see
//! `plb_core::bench::random_case`): IPOPT and the fast solver agree within
//! 1e-6 in every share, the shares sum to 1, nothing is NaN or negative,
//! PUs whose fixed cost exceeds every possible finish time get nothing, and
//! the fast solver's answer satisfies the equal-finish conditions.
//!
//! Deterministic: case `i` of a test uses `Rng::new(SEED + i)`. Each test
//! prints its worst case; re-run one case with
//! `PLB_CASE=<i> cargo test --release -p plb-core --test solver_agreement -- --nocapture`.

use plb_core::bench::{MixtureModel, perturbed, random_case};
use plb_core::model::TimeModel;
use plb_core::rng::Rng;
use plb_core::solve::{
    BlockSolver, Distribution, FastSolver, IpoptSolver, Primary, SolverKind, solve_with_fallback,
};

/// Random problem `i`: 2 to 64 PUs (or up to `max_n`), a total among
/// 1, 1000, 10⁶ and log-uniform in [10, 10⁹].
fn case(seed: u64, max_n: u64) -> (Vec<MixtureModel>, f64) {
    let mut rng = Rng::new(seed);
    let n = 2 + if rng.below(4) == 0 {
        rng.below(max_n - 1)
    } else {
        rng.below(15)
    } as usize;
    let total = match rng.below(4) {
        0 => 1.0,
        1 => 1000.0,
        2 => 1e6,
        _ => rng.log_range(10.0, 1e9),
    };
    (random_case(&mut rng, n, total), total)
}

fn dyns(models: &[MixtureModel]) -> Vec<&dyn TimeModel> {
    models.iter().map(|m| m as &dyn TimeModel).collect()
}

/// The invariants every distribution must satisfy.
fn check_invariants(d: &Distribution, total: f64, what: &str) {
    let sum: f64 = d.shares.iter().sum();
    assert!((sum - 1.0).abs() <= 1e-12, "{what}: shares sum to {sum}");
    let usum: f64 = d.units.iter().sum();
    assert!(
        (usum - total).abs() <= 1e-12 * total,
        "{what}: units sum to {usum}, total {total}"
    );
    for (p, (s, x)) in d.shares.iter().zip(&d.units).enumerate() {
        assert!(
            s.is_finite() && *s >= 0.0 && x.is_finite() && *x >= 0.0,
            "{what}: PU {p} share {s} units {x}"
        );
    }
    assert!(
        d.finish_time.is_finite() && d.finish_time >= 0.0,
        "{what}: finish time {}",
        d.finish_time
    );
}

/// The cases to run: all, or the one named by `PLB_CASE`.
fn cases(count: u64) -> Vec<u64> {
    match std::env::var("PLB_CASE").ok().and_then(|v| v.parse().ok()) {
        Some(i) => vec![i],
        None => (0..count).collect(),
    }
}

const AGREEMENT_SEED: u64 = 0x5eed_0000;
const AGREEMENT_CASES: u64 = 3000;

#[test]
fn ipopt_and_fast_agree_on_random_models() {
    let (fast, ipopt) = (FastSolver::default(), IpoptSolver::default());
    let (mut worst, mut worst_case) = (0.0f64, 0);
    let (mut worst_t, mut worst_t_case) = (0.0f64, 0);
    let (mut excluded, mut zero_share_pus, mut pus) = (0usize, 0usize, 0usize);
    let mut ipopt_iterations = 0i64;
    let list = cases(AGREEMENT_CASES);
    for &i in &list {
        let (models, total) = case(AGREEMENT_SEED + i, 64);
        let ms = dyns(&models);
        let df = fast
            .solve(&ms, total)
            .unwrap_or_else(|e| panic!("case {i}: fast solver failed: {e}"));
        let (di, st) = ipopt
            .solve_with_stats(&ms, total)
            .unwrap_or_else(|e| panic!("case {i}: IPOPT failed: {e}"));
        ipopt_iterations += st.iterations as i64;
        check_invariants(&df, total, &format!("case {i} fast"));
        check_invariants(&di, total, &format!("case {i} ipopt"));
        assert_eq!(
            (df.solver, di.solver),
            (SolverKind::Fast, SolverKind::Ipopt)
        );
        let t_bound = models
            .iter()
            .map(|m| m.time(total))
            .fold(f64::INFINITY, f64::min);
        for (p, (a, b)) in di.shares.iter().zip(&df.shares).enumerate() {
            let diff = (a - b).abs();
            if diff > worst {
                (worst, worst_case) = (diff, i);
            }
            assert!(
                diff <= 1e-6,
                "case {i}: PU {p} IPOPT share {a} vs fast {b} (n = {}, total {total})",
                models.len()
            );
            // A fixed cost above min_q E_q(W) can never be reached.
            if models[p].fixed > t_bound {
                excluded += 1;
                assert_eq!(*b, 0.0, "case {i}: excluded PU {p} got {b}");
            }
            zero_share_pus += usize::from(*b == 0.0);
        }
        pus += models.len();
        // The finish times agree too (relative), when well defined: at
        // least two PUs strictly inside (0, W).
        let inside = df.shares.iter().filter(|s| **s > 1e-9 && **s < 1.0).count();
        if inside >= 2 {
            let dt = (di.finish_time - df.finish_time).abs() / df.finish_time;
            if dt > worst_t {
                (worst_t, worst_t_case) = (dt, i);
            }
            assert!(
                dt <= 1e-6,
                "case {i}: T {} vs {}",
                di.finish_time,
                df.finish_time
            );
        }
    }
    println!(
        "{} cases, {pus} PUs ({zero_share_pus} with no work, {excluded} certainly excluded); \
         mean IPOPT iterations {:.1}",
        list.len(),
        ipopt_iterations as f64 / list.len() as f64
    );
    println!("worst IPOPT-vs-fast share disagreement: {worst:.3e} (case {worst_case})");
    println!("worst relative finish-time disagreement: {worst_t:.3e} (case {worst_t_case})");
    assert!(
        zero_share_pus > 0 && excluded > 0,
        "the generator must exercise PUs that get nothing"
    );
}

const KKT_SEED: u64 = 0x00dd_ba11;
const KKT_CASES: u64 = 20_000;

#[test]
fn fast_solver_satisfies_the_equal_finish_conditions() {
    let fast = FastSolver::default();
    let (mut worst_active, mut worst_case) = (0.0f64, 0);
    let mut outer_max = 0;
    let list = cases(KKT_CASES);
    for &i in &list {
        // Larger systems here: up to 512 PUs.
        let (models, total) = case(KKT_SEED + i, 512);
        let (d, st) = fast
            .solve_with_stats(&models, total)
            .unwrap_or_else(|e| panic!("case {i}: fast solver failed: {e}"));
        outer_max = outer_max.max(st.outer);
        check_invariants(&d, total, &format!("case {i}"));
        let t = d.finish_time;
        for (p, (m, x)) in models.iter().zip(&d.units).enumerate() {
            if *x > 0.0 {
                // E_p(x_p) = T, to the precision of x_p (1e-12 of W).
                let e = m.time(*x);
                let slack = m.slope(*x) * 1e-12 * total;
                let err = ((e - t).abs() - slack).max(0.0) / t;
                if err > worst_active {
                    (worst_active, worst_case) = (err, i);
                }
                assert!(err <= 1e-9, "case {i}: PU {p} x = {x}: E = {e}, T = {t}");
            } else {
                // A PU left out must not be able to start before T.
                assert!(
                    m.time(0.0) >= t * (1.0 - 1e-12),
                    "case {i}: idle PU {p} has E(0) = {} < T = {t}",
                    m.time(0.0)
                );
            }
        }
    }
    println!(
        "{} cases; worst relative |E_p(x_p) - T| beyond x-precision: {worst_active:.3e} \
         (case {worst_case}); most outer iterations: {outer_max}",
        list.len()
    );
}

#[test]
fn fallback_chain_prefers_ipopt_and_agrees_with_fast() {
    for i in cases(200) {
        let (models, total) = case(0xfa11 + i, 64);
        let ms = dyns(&models);
        let a = solve_with_fallback(&ms, total, Primary::Ipopt, None).unwrap();
        let b = solve_with_fallback(&ms, total, Primary::Fast, None).unwrap();
        assert_eq!((a.solver, b.solver), (SolverKind::Ipopt, SolverKind::Fast));
        assert!(a.fallbacks.is_empty() && b.fallbacks.is_empty());
        for (x, y) in a.shares.iter().zip(&b.shares) {
            assert!((x - y).abs() <= 1e-6, "case {i}");
        }
    }
}

#[test]
fn warm_started_ipopt_agrees_after_a_model_change() {
    // The production path: the previous step's IPOPT answer (older models,
    // coefficients off by up to ±40%) warm-starts IPOPT on the new models.
    let ipopt = IpoptSolver::default();
    let fast = FastSolver::default();
    let mut worst = 0.0f64;
    for i in cases(300) {
        let (models, total) = case(0x3a11 + i, 64);
        let old = perturbed(&mut Rng::new(i), &models, 0.4);
        let previous = ipopt.solve(&dyns(&old), total).unwrap();
        let ms = dyns(&models);
        let (dw, _) = ipopt
            .solve_warm(&ms, total, &previous)
            .unwrap_or_else(|e| panic!("case {i}: warm IPOPT failed: {e}"));
        let df = fast.solve(&ms, total).unwrap();
        check_invariants(&dw, total, &format!("case {i} warm"));
        for (a, b) in dw.shares.iter().zip(&df.shares) {
            worst = worst.max((a - b).abs());
        }
        assert!(worst <= 1e-6, "case {i}: {worst}");
        let via_chain = solve_with_fallback(&ms, total, Primary::Ipopt, Some(&previous)).unwrap();
        assert_eq!(via_chain.solver, SolverKind::Ipopt);
        assert!(
            via_chain.fallbacks.is_empty(),
            "case {i}: {:?}",
            via_chain.fallbacks
        );
    }
    println!("warm start: worst share disagreement {worst:.3e}");
}

#[test]
fn large_systems_agree() {
    // A few big systems (IPOPT is slow there, so only a handful).
    let (fast, ipopt) = (FastSolver::default(), IpoptSolver::default());
    let mut worst = 0.0f64;
    for (k, n) in [256usize, 1024, 4096].into_iter().enumerate() {
        let mut rng = Rng::new(77 + k as u64);
        let total = 1e6;
        let models = random_case(&mut rng, n, total);
        let ms = dyns(&models);
        let df = fast.solve(&ms, total).unwrap();
        let di = ipopt.solve(&ms, total).unwrap();
        check_invariants(&df, total, "fast");
        check_invariants(&di, total, "ipopt");
        for (a, b) in di.shares.iter().zip(&df.shares) {
            worst = worst.max((a - b).abs());
        }
    }
    println!("large systems: worst share disagreement {worst:.3e}");
    assert!(worst <= 1e-6);
}
