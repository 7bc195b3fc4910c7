//! Fitting the per-PU performance models: the execution-time curve
//! `F_p(x)` ([`ExecModel`], [`fit_exec`]), the transfer line
//! `G_p(x) = a₁x + a₂` ([`TransferModel`], [`fit_transfer`]) and their sum
//! `E_p = F_p + G_p` ([`PuModel`], [`fit_pu`], [`SampleStore::fit`]).
//! `docs/models.md` explains the choices; in short:
//!
//! 1. Points (size, seconds, recency weight) are validated (non-finite,
//!    non-positive sizes or times, non-positive weights are skipped and
//!    counted as `invalid`) and grouped by distinct size. The fit is a
//!    **relative** weighted least squares: each size's weighted mean time
//!    `ȳ` gets the weight `W / ȳ²` (`W` = its summed recency weight), i.e.
//!    relative errors are minimised. Timing noise is multiplicative, and
//!    sizes spanning 100× would otherwise leave the small blocks unfitted.
//! 2. **Model selection.** Every subset of the allowed bases
//!    ([`crate::basis::Basis`], the papers' seven plus a constant) with at
//!    most `min(max_terms, m − 1, ⌈m/2⌉)` terms (`m` = distinct sizes, so
//!    at least two sizes per term) is fitted on the scaled sizes and scored
//!    by **leave-one-size-out cross-validation** (PRESS, in closed form from
//!    the leverages). Candidates that are not positive and non-decreasing on
//!    the fitted range (checked on a 128-point grid), or whose slope at the
//!    largest size is not `> 0`, are rejected. Among the survivors whose
//!    score is within `parsimony` (10 %) of the best, the one with the
//!    fewest terms wins, then the simplest terms
//!    ([`crate::basis::Basis::complexity`]), then the best score.
//! 3. **Outliers.** Within a size seen at least 3 times, a time more than
//!    `outlier_ratio` (3×) away from that size's median is an outlier; a
//!    size seen once or twice whose mean is 3× away from the chosen curve
//!    refitted *without it* (leave-one-out, so a spike cannot mask itself)
//!    is an outlier (up to 3 such sizes per fit). Outliers get weight 0, are
//!    counted, and the selection is redone.
//! 4. **Change of speed.** If the newest `shift_run` (3) points all lie more
//!    than 3× above (or all below) the trend, they are not outliers but a
//!    new regime: the fit is redone on the trailing run alone, the older
//!    points are reported as `superseded`, and [`SampleStore::fit`] makes
//!    the store forget them.
//! 5. **Fallbacks**, when no candidate survives or too few sizes were seen:
//!    the straight line `a + b·x` through the per-size means (2 or more
//!    sizes) if it is positive and increasing, else time proportional to
//!    `x` at the best observed per-size throughput (1 size, or a line that
//!    would decrease).
//!
//! Files: [`basis`] (the candidate functions and the scaling of sizes),
//! `lsq` (least squares over every subset of them, with the leverages for
//! PRESS), `design` (points grouped by size, relative weights), `select`
//! (cross-validated subset selection and the fallbacks), `curve` (the
//! fitted curve [`ExecModel`]), `contract` (its shape check on the fitted
//! range and its monotone extrapolation outside), `exec` ([`fit_exec`]:
//! screens, change of speed, report), `report`, `nnls` and `transfer` (the
//! line `G_p`), `config`, `pu` (the sum `E_p` and [`fit_pu`]).
//!
//! [`SampleStore::fit`]: crate::samples::SampleStore::fit

pub mod basis;
mod config;
mod contract;
mod curve;
mod design;
mod exec;
mod lsq;
mod nnls;
mod pu;
mod report;
mod select;
#[cfg(test)]
mod testutil;
mod transfer;

pub use config::{FitConfig, FitError};
pub use curve::{ExecModel, Term};
pub use exec::fit_exec;
pub use pu::{PuFit, PuModel, fit_pu};
pub use report::{FitKind, FitReport, R2_TARGET};
pub use transfer::{TransferModel, TransferReport, fit_transfer};
