//! Irregular work: a per-unit cost profile, so that a block's cost depends on
//! *which* units it holds, not only on how many (Mandelbrot's rows through
//! the set cost far more than the rows above it).
//!
//! A profile is a list of relative row costs (any positive scale); the `W`
//! units of a run are spread evenly over the rows and the profile is
//! normalised to a mean of 1 per unit, so the whole run weighs exactly `W`
//! effective units and a regular kernel is the profile `[1]`. A block
//! `[offset, offset + len)` weighs the integral of the piecewise-constant
//! row costs over its span: `O(1)` per block from a prefix sum.

/// Relative cost of the units of a run (normalised to a mean of 1).
#[derive(Debug, Clone, PartialEq)]
pub struct CostProfile {
    /// `prefix[r]`: the normalised cost of rows `0..r` (in units of "one
    /// average row"), `prefix[rows] = rows`.
    prefix: Vec<f64>,
}

impl CostProfile {
    /// The profile of `row_costs` (relative, finite, ≥ 0, not all zero).
    pub fn new(row_costs: &[f64]) -> Result<CostProfile, String> {
        if row_costs.is_empty() {
            return Err("a cost profile needs at least one row".into());
        }
        if let Some(bad) = row_costs.iter().find(|c| !(c.is_finite() && **c >= 0.0)) {
            return Err(format!("row cost {bad}: must be finite and >= 0"));
        }
        let sum: f64 = row_costs.iter().sum();
        if sum <= 0.0 {
            return Err("every row costs zero".into());
        }
        let scale = row_costs.len() as f64 / sum;
        let mut prefix = Vec::with_capacity(row_costs.len() + 1);
        let mut acc = 0.0;
        prefix.push(0.0);
        for c in row_costs {
            acc += c * scale;
            prefix.push(acc);
        }
        Ok(CostProfile { prefix })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.prefix.len() - 1
    }

    /// Cumulative normalised cost at fraction `f ∈ [0, 1]` of the run.
    fn cumulative(&self, f: f64) -> f64 {
        let rows = self.rows();
        let pos = f.clamp(0.0, 1.0) * rows as f64;
        let r = (pos.floor() as usize).min(rows - 1);
        let within = pos - r as f64;
        self.prefix[r] + within * (self.prefix[r + 1] - self.prefix[r])
    }

    /// Effective units of the block `[offset, offset + len)` of a run of
    /// `total` units: `len` times the block's mean relative cost.
    pub fn effective_units(&self, total: u64, offset: u64, len: u64) -> f64 {
        if total == 0 || len == 0 {
            return 0.0;
        }
        let w = total as f64;
        let a = offset as f64 / w;
        let b = (offset + len) as f64 / w;
        let rows = self.rows() as f64;
        w * (self.cumulative(b) - self.cumulative(a)) / rows
    }

    /// Coefficient of variation of the row costs (0 for a regular kernel).
    pub fn variation(&self) -> f64 {
        let rows = self.rows() as f64;
        let var = self
            .prefix
            .windows(2)
            .map(|p| (p[1] - p[0] - 1.0).powi(2))
            .sum::<f64>()
            / rows;
        var.sqrt()
    }

    /// Largest row cost over the smallest non-zero one.
    pub fn max_over_min(&self) -> f64 {
        let costs = self.prefix.windows(2).map(|p| p[1] - p[0]);
        let max = costs.clone().fold(0.0, f64::max);
        let min = costs.filter(|c| *c > 0.0).fold(f64::INFINITY, f64::min);
        max / min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_profile_is_regular() {
        let p = CostProfile::new(&[3.0; 10]).unwrap();
        assert!((p.effective_units(1000, 17, 100) - 100.0).abs() < 1e-9);
        assert!(p.variation() < 1e-12);
    }

    #[test]
    fn blocks_weigh_their_rows_and_the_whole_run_weighs_w() {
        // Row 1 costs 3x row 0.
        let p = CostProfile::new(&[1.0, 3.0]).unwrap();
        let w = 1000;
        assert!((p.effective_units(w, 0, w) - 1000.0).abs() < 1e-9);
        assert!((p.effective_units(w, 0, 500) - 250.0).abs() < 1e-9);
        assert!((p.effective_units(w, 500, 500) - 750.0).abs() < 1e-9);
        // Any split of the run sums to W.
        let parts = [(0, 123), (123, 400), (523, 477)];
        let sum: f64 = parts.iter().map(|&(o, l)| p.effective_units(w, o, l)).sum();
        assert!((sum - 1000.0).abs() < 1e-9);
        assert!((p.max_over_min() - 3.0).abs() < 1e-12);
        assert!((p.variation() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn bad_profiles_are_refused() {
        assert!(CostProfile::new(&[]).is_err());
        assert!(CostProfile::new(&[0.0, 0.0]).is_err());
        assert!(CostProfile::new(&[1.0, f64::NAN]).is_err());
        assert!(CostProfile::new(&[1.0, -1.0]).is_err());
        assert_eq!(
            CostProfile::new(&[1.0]).unwrap().effective_units(0, 0, 0),
            0.0
        );
    }
}
