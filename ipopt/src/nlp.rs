//! The problem a caller hands to [`crate::solve()`].

/// A smooth nonlinear program: minimise `f(x)` over `x ∈ ℝⁿ` subject to
/// `g_L ≤ g(x) ≤ g_U` (`m` constraints) and `x_L ≤ x ≤ x_U`.
///
/// IPOPT calls these methods during [`crate::solve()`], on the calling
/// thread. Every slice has the declared length (`n` for `x`, gradients and
/// bound multipliers, `m` for constraints and their multipliers, the
/// structure's length for derivative values). An evaluation that returns
/// `Err` (or panics) tells IPOPT the point cannot be evaluated; IPOPT may
/// then shorten its step or stop, and the first message is reported in
/// [`crate::Solution::failure`]. A bound of magnitude `≥ 1e19` is infinite
/// (IPOPT's default `nlp_lower_bound_inf` / `nlp_upper_bound_inf`).
pub trait Nlp {
    /// Number of variables `n` (at most `i32::MAX`).
    fn num_variables(&self) -> usize;

    /// Number of constraints `m` (at most `i32::MAX`).
    fn num_constraints(&self) -> usize;

    /// Fills the variable bounds (`n` each) and constraint bounds (`m`
    /// each).
    fn bounds(
        &self,
        x_lower: &mut [f64],
        x_upper: &mut [f64],
        g_lower: &mut [f64],
        g_upper: &mut [f64],
    );

    /// Fills the starting point.
    fn initial_point(&self, x: &mut [f64]);

    /// Fills the starting multipliers of the lower and upper variable
    /// bounds. IPOPT asks only with the option `warm_start_init_point =
    /// yes`; the default refuses.
    fn initial_bound_multipliers(
        &self,
        z_lower: &mut [f64],
        z_upper: &mut [f64],
    ) -> Result<(), String> {
        let _ = (z_lower, z_upper);
        Err("no starting bound multipliers".to_string())
    }

    /// Fills the starting constraint multipliers (as for
    /// [`Nlp::initial_bound_multipliers`]).
    fn initial_constraint_multipliers(&self, lambda: &mut [f64]) -> Result<(), String> {
        let _ = lambda;
        Err("no starting constraint multipliers".to_string())
    }

    /// `f(x)`.
    fn objective(&self, x: &[f64]) -> Result<f64, String>;

    /// `∇f(x)` into `grad`.
    fn gradient(&self, x: &[f64], grad: &mut [f64]) -> Result<(), String>;

    /// `g(x)` into `g`.
    fn constraints(&self, x: &[f64], g: &mut [f64]) -> Result<(), String>;

    /// The positions `(constraint, variable)` of the Jacobian entries that
    /// may be non-zero; [`Nlp::jacobian`] fills the values in this order.
    /// Asked once per solve.
    fn jacobian_structure(&self) -> Vec<(usize, usize)>;

    /// The Jacobian of `g` at `x`, one value per structure entry.
    fn jacobian(&self, x: &[f64], values: &mut [f64]) -> Result<(), String>;

    /// The positions `(row, column)`, `row >= column`, of the entries of the
    /// lower triangle of the Lagrangian's Hessian that may be non-zero;
    /// [`Nlp::hessian`] fills the values in this order. Asked once per
    /// solve.
    fn hessian_structure(&self) -> Vec<(usize, usize)>;

    /// The Hessian of `obj_factor·f(x) + Σ lambda_j·g_j(x)`, one value per
    /// structure entry.
    fn hessian(
        &self,
        x: &[f64],
        obj_factor: f64,
        lambda: &[f64],
        values: &mut [f64],
    ) -> Result<(), String>;
}
