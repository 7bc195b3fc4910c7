//! The fitting parameters and the fitting error.

use std::fmt;

use super::basis::Basis;

/// Fitting parameters. Out-of-range values are clamped, never a panic.
#[derive(Debug, Clone, PartialEq)]
pub struct FitConfig {
    /// Most terms in a curve (clamped to 1..=8), further limited to
    /// `min(m − 1, ⌈m/2⌉)` for `m` distinct sizes. Default 4.
    pub max_terms: usize,
    /// Bases the selection may use. Default: all of [`Basis::ALL`]. An empty
    /// list leaves only the fallbacks.
    pub bases: Vec<Basis>,
    /// Relative slack of the cross-validation score within which a curve
    /// with fewer terms is preferred. Default 0.10. NaN or `< 0` = 0.
    pub parsimony: f64,
    /// A time more than this factor above or below its trend is an outlier.
    /// Default 3. A value `<= 1` or NaN disables outlier and shift handling.
    pub outlier_ratio: f64,
    /// Number of newest consecutive points beyond `outlier_ratio`, all on the
    /// same side, that is read as a change of speed. 0 disables. Default 3.
    pub shift_run: usize,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            max_terms: 4,
            bases: Basis::ALL.to_vec(),
            parsimony: 0.10,
            outlier_ratio: 3.0,
            shift_run: 3,
        }
    }
}

impl FitConfig {
    pub(super) fn ratio(&self) -> f64 {
        if self.outlier_ratio > 1.0 {
            self.outlier_ratio
        } else {
            f64::INFINITY
        }
    }
    pub(super) fn parsimony(&self) -> f64 {
        if self.parsimony >= 0.0 {
            self.parsimony
        } else {
            0.0
        }
    }
    pub(super) fn allowed_mask(&self) -> u8 {
        self.bases.iter().fold(0u8, |m, b| m | (1 << b.index()))
    }
}

/// Why no model could be produced.
#[derive(Debug, Clone, PartialEq)]
pub enum FitError {
    /// No point was usable (empty input, or every point invalid).
    NoValidSamples {
        /// Points skipped as invalid.
        invalid: usize,
    },
    /// [`ExecModel::new`] or [`TransferModel::new`] got a curve that
    /// breaks the [`TimeModel`] contract on its range.
    ///
    /// [`ExecModel::new`]: super::ExecModel::new
    /// [`TransferModel::new`]: super::TransferModel::new
    /// [`TimeModel`]: crate::model::TimeModel
    InvalidModel(&'static str),
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FitError::NoValidSamples { invalid } => {
                write!(f, "no usable sample ({invalid} invalid)")
            }
            FitError::InvalidModel(why) => write!(f, "invalid model: {why}"),
        }
    }
}

impl std::error::Error for FitError {}
