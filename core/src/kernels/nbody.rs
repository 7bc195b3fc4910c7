//! One all-pairs gravitational step: the acceleration of each body.

/// Softening ε² of `plb app nbody` (its codelets use the same constant).
pub const SOFTENING2: f64 = 1e-3;

/// Acceleration of body `i` among `bodies` (`[x, y, z, mass]` each):
/// `Σ_j m_j · d / (|d|² + ε²)^{3/2}`, `d = p_j − p_i` (the `j = i` term
/// is zero).
pub fn acceleration(bodies: &[[f64; 4]], i: usize) -> [f64; 3] {
    let p = bodies[i];
    let mut a = [0.0; 3];
    for q in bodies {
        let d = [q[0] - p[0], q[1] - p[1], q[2] - p[2]];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + SOFTENING2;
        let inv = q[3] / (r2 * r2.sqrt());
        for k in 0..3 {
            a[k] += d[k] * inv;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forces_are_mutual_and_point_at_each_other() {
        let bodies = [[0.0, 0.0, 0.0, 2.0], [1.0, 0.0, 0.0, 3.0]];
        let a0 = acceleration(&bodies, 0);
        let a1 = acceleration(&bodies, 1);
        // m0 a0 = -m1 a1 (Newton's third law), along x.
        assert!((2.0 * a0[0] + 3.0 * a1[0]).abs() < 1e-12);
        assert!(a0[0] > 0.0 && a1[0] < 0.0);
        assert_eq!((a0[1], a0[2]), (0.0, 0.0));
        let want = 3.0 / (1.0 + SOFTENING2).powf(1.5);
        assert!((a0[0] - want).abs() < 1e-12);
    }

    #[test]
    fn total_momentum_change_is_zero() {
        let bodies: Vec<[f64; 4]> = (0..50)
            .map(|i| {
                let f = i as f64;
                [
                    (f * 0.37).sin(),
                    (f * 0.11).cos(),
                    (f * 0.73).sin(),
                    1.0 + (i % 3) as f64,
                ]
            })
            .collect();
        let mut total = [0.0; 3];
        for i in 0..bodies.len() {
            let a = acceleration(&bodies, i);
            for k in 0..3 {
                total[k] += bodies[i][3] * a[k];
            }
        }
        assert!(total.iter().all(|t| t.abs() < 1e-9), "{total:?}");
    }
}
