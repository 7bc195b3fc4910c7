use std::cell::Cell;

use super::*;

/// Silent IPOPT.
fn quiet() -> Options {
    let mut o = Options::new();
    o.int("print_level", 0).str("sb", "yes");
    o
}

/// Hock–Schittkowski problem 71, IPOPT's own example: two constraints, a
/// dense Jacobian and a dense Hessian triangle.
#[derive(Default)]
struct Hs071 {
    /// Starting point and multipliers for a warm start.
    warm: Option<Solution>,
    /// Make `objective` fail / `gradient` panic.
    fail_objective: bool,
    panic_gradient: bool,
    /// Objective evaluations.
    evals: Cell<usize>,
}

impl Nlp for Hs071 {
    fn num_variables(&self) -> usize {
        4
    }
    fn num_constraints(&self) -> usize {
        2
    }
    fn bounds(&self, xl: &mut [f64], xu: &mut [f64], gl: &mut [f64], gu: &mut [f64]) {
        xl.fill(1.0);
        xu.fill(5.0);
        gl.copy_from_slice(&[25.0, 40.0]);
        gu.copy_from_slice(&[2e19, 40.0]);
    }
    fn initial_point(&self, x: &mut [f64]) {
        match &self.warm {
            Some(s) => x.copy_from_slice(&s.x),
            None => x.copy_from_slice(&[1.0, 5.0, 5.0, 1.0]),
        }
    }
    fn initial_bound_multipliers(&self, zl: &mut [f64], zu: &mut [f64]) -> Result<(), String> {
        let s = self.warm.as_ref().ok_or("cold")?;
        zl.copy_from_slice(&s.z_lower);
        zu.copy_from_slice(&s.z_upper);
        Ok(())
    }
    fn initial_constraint_multipliers(&self, lambda: &mut [f64]) -> Result<(), String> {
        lambda.copy_from_slice(&self.warm.as_ref().ok_or("cold")?.lambda);
        Ok(())
    }
    fn objective(&self, x: &[f64]) -> Result<f64, String> {
        self.evals.set(self.evals.get() + 1);
        if self.fail_objective {
            return Err("objective refused".to_string());
        }
        Ok(x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2])
    }
    fn gradient(&self, x: &[f64], g: &mut [f64]) -> Result<(), String> {
        assert!(!self.panic_gradient, "boom");
        g[0] = x[3] * (2.0 * x[0] + x[1] + x[2]);
        g[1] = x[0] * x[3];
        g[2] = x[0] * x[3] + 1.0;
        g[3] = x[0] * (x[0] + x[1] + x[2]);
        Ok(())
    }
    fn constraints(&self, x: &[f64], g: &mut [f64]) -> Result<(), String> {
        g[0] = x.iter().product();
        g[1] = x.iter().map(|v| v * v).sum();
        Ok(())
    }
    fn jacobian_structure(&self) -> Vec<(usize, usize)> {
        (0..2).flat_map(|i| (0..4).map(move |j| (i, j))).collect()
    }
    fn jacobian(&self, x: &[f64], v: &mut [f64]) -> Result<(), String> {
        let p: f64 = x.iter().product();
        for j in 0..4 {
            v[j] = p / x[j];
            v[4 + j] = 2.0 * x[j];
        }
        Ok(())
    }
    fn hessian_structure(&self) -> Vec<(usize, usize)> {
        (0..4).flat_map(|i| (0..=i).map(move |j| (i, j))).collect()
    }
    fn hessian(&self, x: &[f64], s: f64, l: &[f64], v: &mut [f64]) -> Result<(), String> {
        // Order: (0,0) (1,0) (1,1) (2,0) (2,1) (2,2) (3,0) (3,1) (3,2) (3,3).
        v[0] = s * 2.0 * x[3] + 2.0 * l[1];
        v[1] = s * x[3] + l[0] * x[2] * x[3];
        v[2] = 2.0 * l[1];
        v[3] = s * x[3] + l[0] * x[1] * x[3];
        v[4] = l[0] * x[0] * x[3];
        v[5] = 2.0 * l[1];
        v[6] = s * (2.0 * x[0] + x[1] + x[2]) + l[0] * x[1] * x[2];
        v[7] = s * x[0] + l[0] * x[0] * x[2];
        v[8] = s * x[0] + l[0] * x[0] * x[1];
        v[9] = 2.0 * l[1];
        Ok(())
    }
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

#[test]
fn hs071_matches_the_known_solution() {
    let s = solve(&Hs071::default(), &quiet()).unwrap();
    assert_eq!(s.status, Status::SOLVE_SUCCEEDED);
    assert!(
        close(&s.x, &[1.0, 4.742_999_63, 3.821_149_98, 1.379_408_29], 1e-6),
        "{s:?}"
    );
    assert!((s.objective - 17.014_017_3).abs() < 1e-6, "{s:?}");
    // IPOPT's published multipliers for this problem.
    assert!(
        close(&s.lambda, &[-0.552_293_66, 0.161_468_57], 1e-6),
        "{s:?}"
    );
    assert!(
        (s.z_lower[0] - 1.087_871).abs() < 1e-5 && s.z_lower[1..].iter().all(|z| z.abs() < 1e-6)
    );
    assert!(s.z_upper.iter().all(|z| z.abs() < 1e-6));
    assert!(s.iterations > 0 && s.failure.is_none());
}

/// `min Σ (x_i − c_i)²` on `[0, 1]³`: no constraint at all (`m = 0`).
struct Box3;

impl Nlp for Box3 {
    fn num_variables(&self) -> usize {
        3
    }
    fn num_constraints(&self) -> usize {
        0
    }
    fn bounds(&self, xl: &mut [f64], xu: &mut [f64], gl: &mut [f64], gu: &mut [f64]) {
        assert!(gl.is_empty() && gu.is_empty());
        xl.fill(0.0);
        xu.fill(1.0);
    }
    fn initial_point(&self, x: &mut [f64]) {
        x.fill(0.5);
    }
    fn objective(&self, x: &[f64]) -> Result<f64, String> {
        Ok(x.iter().zip(C).map(|(a, c)| (a - c) * (a - c)).sum())
    }
    fn gradient(&self, x: &[f64], g: &mut [f64]) -> Result<(), String> {
        for ((gi, a), c) in g.iter_mut().zip(x).zip(C) {
            *gi = 2.0 * (a - c);
        }
        Ok(())
    }
    fn constraints(&self, _x: &[f64], g: &mut [f64]) -> Result<(), String> {
        assert!(g.is_empty());
        Ok(())
    }
    fn jacobian_structure(&self) -> Vec<(usize, usize)> {
        Vec::new()
    }
    fn jacobian(&self, _x: &[f64], _v: &mut [f64]) -> Result<(), String> {
        Ok(())
    }
    fn hessian_structure(&self) -> Vec<(usize, usize)> {
        vec![(0, 0), (1, 1), (2, 2)]
    }
    fn hessian(&self, _x: &[f64], s: f64, l: &[f64], v: &mut [f64]) -> Result<(), String> {
        assert!(l.is_empty());
        v.fill(2.0 * s);
        Ok(())
    }
}

const C: [f64; 3] = [-1.0, 0.25, 2.0];

#[test]
fn bounds_only_problem() {
    let s = solve(&Box3, &quiet()).unwrap();
    assert!(s.status.is_solved(), "{s:?}");
    assert!(close(&s.x, &[0.0, 0.25, 1.0], 1e-7), "{s:?}");
    assert!(s.lambda.is_empty());
    // Active bounds carry the gradient: z_L = 2·(0 − (−1)), z_U = 2·(2 − 1).
    assert!(
        (s.z_lower[0] - 2.0).abs() < 1e-6 && (s.z_upper[2] - 2.0).abs() < 1e-6,
        "{s:?}"
    );
    assert!((s.objective - (1.0 + 1.0)).abs() < 1e-7);
}

#[test]
fn warm_start_from_the_solution_takes_fewer_iterations() {
    let cold = solve(&Hs071::default(), &quiet()).unwrap();
    let mut o = quiet();
    o.str("warm_start_init_point", "yes")
        .num("warm_start_bound_push", 1e-9)
        .num("warm_start_mult_bound_push", 1e-9)
        .num("mu_init", 1e-9);
    let warm = Hs071 {
        warm: Some(cold.clone()),
        ..Hs071::default()
    };
    let s = solve(&warm, &o).unwrap();
    assert!(s.status.is_solved(), "{s:?}");
    assert!(close(&s.x, &cold.x, 1e-6));
    assert!(
        s.iterations < cold.iterations,
        "{} vs {}",
        s.iterations,
        cold.iterations
    );
    // Asked for multipliers it does not have: a failed start, reported.
    let s = solve(&Hs071::default(), &o).unwrap();
    assert!(!s.status.is_solved());
    assert_eq!(s.failure.as_deref(), Some("cold"));
}

#[test]
fn failures_and_panics_are_reported_not_unwound() {
    let nlp = Hs071 {
        fail_objective: true,
        ..Hs071::default()
    };
    let s = solve(&nlp, &quiet()).unwrap();
    assert!(!s.status.is_solved() && nlp.evals.get() > 0, "{s:?}");
    assert_eq!(s.failure.as_deref(), Some("objective refused"));
    let s = solve(
        &Hs071 {
            panic_gradient: true,
            ..Hs071::default()
        },
        &quiet(),
    )
    .unwrap();
    assert!(!s.status.is_solved());
    assert_eq!(s.failure.as_deref(), Some("gradient panicked: boom"));
    // The next solve is unaffected.
    assert!(
        solve(&Hs071::default(), &quiet())
            .unwrap()
            .status
            .is_solved()
    );
}

#[test]
fn bad_options_and_structures_are_errors() {
    let mut o = quiet();
    o.num("no_such_option", 1.0);
    let e = solve(&Hs071::default(), &o).unwrap_err();
    assert_eq!(e, Error::InvalidOption("no_such_option".into()));
    assert_eq!(e.to_string(), "IPOPT rejected option no_such_option");
    assert_eq!(e.status(), Status::INVALID_OPTION);
    let mut o = quiet();
    o.str("mu_strategy", "no\0pe");
    assert_eq!(
        solve(&Hs071::default(), &o).unwrap_err(),
        Error::InvalidOption("mu_strategy".into())
    );
    // An entry outside the Jacobian, one above the Hessian's diagonal.
    struct Bad(bool);
    impl Nlp for Bad {
        fn num_variables(&self) -> usize {
            3
        }
        fn num_constraints(&self) -> usize {
            0
        }
        fn bounds(&self, _: &mut [f64], _: &mut [f64], _: &mut [f64], _: &mut [f64]) {}
        fn initial_point(&self, _: &mut [f64]) {}
        fn objective(&self, _: &[f64]) -> Result<f64, String> {
            Ok(0.0)
        }
        fn gradient(&self, _: &[f64], _: &mut [f64]) -> Result<(), String> {
            Ok(())
        }
        fn constraints(&self, _: &[f64], _: &mut [f64]) -> Result<(), String> {
            Ok(())
        }
        fn jacobian_structure(&self) -> Vec<(usize, usize)> {
            if self.0 { vec![(0, 0)] } else { vec![] }
        }
        fn jacobian(&self, _: &[f64], _: &mut [f64]) -> Result<(), String> {
            Ok(())
        }
        fn hessian_structure(&self) -> Vec<(usize, usize)> {
            if self.0 { vec![] } else { vec![(0, 1)] }
        }
        fn hessian(&self, _: &[f64], _: f64, _: &[f64], _: &mut [f64]) -> Result<(), String> {
            Ok(())
        }
    }
    for jac in [true, false] {
        let e = solve(&Bad(jac), &quiet()).unwrap_err();
        assert!(matches!(e, Error::InvalidProblem(_)), "{e:?}");
        assert_eq!(e.status(), Status::INVALID_PROBLEM_DEFINITION);
    }
}

#[test]
fn concurrent_solves_are_serialised() {
    let xs: Vec<Solution> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| solve(&Hs071::default(), &quiet()).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for s in &xs {
        assert_eq!(s.status, Status::SOLVE_SUCCEEDED);
        assert_eq!(s.x, xs[0].x, "the same solve gives the same bits");
    }
}
