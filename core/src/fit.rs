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

use std::fmt;

use crate::basis::{Basis, fmt_num, scale_for};
use crate::lsq::SubsetLsq;
use crate::model::TimeModel;
use crate::samples::{Point, SampleStore};

/// PLB-HeC ends its training when every PU's R² exceeds this.
pub const R2_TARGET: f64 = 0.7;

/// Points per spacing (geometric and linear) of the validation grid.
const GRID_HALF: usize = 64;

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
    fn ratio(&self) -> f64 {
        if self.outlier_ratio > 1.0 {
            self.outlier_ratio
        } else {
            f64::INFINITY
        }
    }
    fn parsimony(&self) -> f64 {
        if self.parsimony >= 0.0 {
            self.parsimony
        } else {
            0.0
        }
    }
    fn allowed_mask(&self) -> u8 {
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

/// One term `coef · basis(x / scale)` of a curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Term {
    /// The function.
    pub basis: Basis,
    /// Its coefficient (on the scaled size).
    pub coef: f64,
}

/// How an execution-time model was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitKind {
    /// A subset of the bases chosen by cross-validation.
    Selected,
    /// Fallback: the weighted least-squares line `a + b·x`.
    Affine,
    /// Last resort: `x / best observed throughput`.
    Proportional,
}

/// What a fit did. `r2` is the weighted coefficient of determination of the
/// returned model over the points it used, with the fit's own weights
/// (recency / predicted time², so it measures relative errors); with a
/// single distinct size it is 0 (nothing is explained).
#[derive(Debug, Clone, PartialEq)]
pub struct FitReport {
    /// Selected curve or which fallback.
    pub kind: FitKind,
    /// The bases of the returned model, in [`Basis::ALL`] order.
    pub basis: Vec<Basis>,
    /// Weighted R² (may be negative for a fallback worse than the mean).
    /// PLB-HeC trains until it exceeds [`R2_TARGET`] on every PU.
    pub r2: f64,
    /// Root mean square *relative* error of the selected curve under
    /// leave-one-size-out cross-validation (0.05 = predictions off by 5 %
    /// for sizes it was not fitted on); `None` for the fallbacks.
    pub cv_rmse: Option<f64>,
    /// Points the model was fitted on.
    pub used: usize,
    /// Valid points left out as outliers.
    pub outliers: usize,
    /// Their indices in the input slice (for traces and plots).
    pub outlier_indices: Vec<usize>,
    /// Points skipped as invalid (non-finite, non-positive, zero weight).
    pub invalid: usize,
    /// Valid points left out because a later change of speed superseded them.
    pub superseded: usize,
    /// Index, in the input slice, of the first point of the new regime when
    /// a change of speed was detected.
    pub shift_start: Option<usize>,
    /// Distinct sizes among the points used.
    pub distinct_sizes: usize,
    /// Candidate subsets fitted and scored (numerically independent, with a
    /// finite cross-validation score); 0 for the fallbacks.
    pub candidates: usize,
}

impl FitReport {
    /// Whether this fit meets PLB-HeC's training criterion (R² > 0.7).
    pub fn meets_r2_target(&self) -> bool {
        self.r2 > R2_TARGET
    }
}

// ---------------------------------------------------------------------------
// Execution-time model
// ---------------------------------------------------------------------------

/// A fitted execution-time curve `F(x) = Σ cᵢ·fᵢ(x/S)`, made total on
/// `[0, ∞)` so that it satisfies the [`TimeModel`] contract everywhere:
///
/// * **On the fitted range `[lo, hi]`** (smallest and largest size fitted
///   on): the curve itself. Construction checks that it is finite, `> 0`
///   and non-decreasing there (values and derivative on a 128-point grid,
///   half geometric, half linear) and that its slope at `hi` is `> 0`;
///   [`TimeModel::slope`] is clamped at 0 so that rounding between grid
///   points can never report a negative slope.
/// * **Below `lo`** (`ln x` terms blow up at 0, and nothing was measured
///   there): a straight line from `(0, t₀)` to `(lo, F(lo))`, where
///   `t₀ = clamp(F(lo) − lo·F′(lo), 0, F(lo))`, i.e. the tangent at `lo`
///   when that stays non-negative down to 0 (which recovers the fixed cost
///   of an affine device exactly), otherwise the chord from the origin.
///   `time(0) = t₀ >= 0` is the fixed cost.
/// * **Above `hi`**: the tangent at `hi`, `F(hi) + F′(hi)·(x − hi)`, with
///   `F′(hi) > 0`: increasing, never `eˣ` of a large number, and
///   conservative for a superlinear device (a refit after larger blocks
///   were measured corrects it).
/// * Negative or NaN `x` is treated as 0; `x = +∞` gives `+∞`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecModel {
    terms: Vec<Term>,
    scale: f64,
    lo: f64,
    hi: f64,
    t0: f64,
    t_lo: f64,
    t_hi: f64,
    d_hi: f64,
}

/// The sorted validation grid on `[lo, hi]`.
fn grid(lo: f64, hi: f64) -> Vec<f64> {
    if hi <= lo {
        return vec![lo];
    }
    let n = GRID_HALF;
    let mut g = Vec::with_capacity(2 * n);
    let r = hi / lo;
    for i in 0..n {
        let f = i as f64 / (n - 1) as f64;
        g.push(lo * r.powf(f));
        g.push(lo + (hi - lo) * f);
    }
    g.sort_by(f64::total_cmp);
    g.dedup();
    if let Some(last) = g.last_mut() {
        *last = hi;
    }
    g[0] = lo;
    g
}

/// Contract checks on grid values `v` and derivatives `d` (any positive
/// unit): finite, `v > 0`, non-decreasing, `d >= 0`, last `d > 0`.
fn check_shape(v: &[f64], d: &[f64]) -> Result<(), &'static str> {
    if v.iter().chain(d).any(|a| !a.is_finite()) {
        return Err("not finite on the fitted range");
    }
    if v.first().is_none_or(|&a| a <= 0.0) {
        return Err("not positive at the smallest fitted size");
    }
    let dmax = d.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    if d.iter().any(|&a| a < -1e-12 * dmax) {
        return Err("decreasing somewhere on the fitted range");
    }
    if v.windows(2).any(|w| w[1] < w[0] - 1e-12 * w[0].abs()) {
        return Err("decreasing somewhere on the fitted range");
    }
    if d.last().is_none_or(|&a| a <= 0.0) {
        return Err("not increasing at the largest fitted size");
    }
    Ok(())
}

impl ExecModel {
    /// A model from explicit terms on the scaled size `x / scale`, fitted
    /// on `[lo, hi]` (`0 < lo <= hi`). Fails with
    /// [`FitError::InvalidModel`] when the curve is not finite, positive and
    /// non-decreasing on `[lo, hi]` with a positive slope at `hi`.
    pub fn new(terms: &[Term], scale: f64, lo: f64, hi: f64) -> Result<ExecModel, FitError> {
        if terms.is_empty() {
            return Err(FitError::InvalidModel("no term"));
        }
        if !(scale.is_finite() && scale > 0.0) {
            return Err(FitError::InvalidModel("scale is not a finite number > 0"));
        }
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= hi) {
            return Err(FitError::InvalidModel("range is not 0 < lo <= hi"));
        }
        if terms.iter().any(|t| !t.coef.is_finite()) {
            return Err(FitError::InvalidModel("coefficient not finite"));
        }
        let g = grid(lo, hi);
        let v: Vec<f64> = g.iter().map(|&x| curve(terms, scale, x)).collect();
        let d: Vec<f64> = g.iter().map(|&x| curve_slope(terms, scale, x)).collect();
        check_shape(&v, &d).map_err(FitError::InvalidModel)?;
        Ok(ExecModel::from_checked(terms.to_vec(), scale, lo, hi))
    }

    /// `time = x · seconds_per_unit` (a fallback; `seconds_per_unit > 0`),
    /// nominally fitted on `[lo, hi]`.
    pub fn proportional(seconds_per_unit: f64, lo: f64, hi: f64) -> Result<ExecModel, FitError> {
        if !(seconds_per_unit.is_finite() && seconds_per_unit > 0.0) {
            return Err(FitError::InvalidModel(
                "seconds per unit is not a finite number > 0",
            ));
        }
        let scale = scale_for(hi);
        ExecModel::new(
            &[Term {
                basis: Basis::X,
                coef: seconds_per_unit * scale,
            }],
            scale,
            lo,
            hi,
        )
    }

    fn from_checked(terms: Vec<Term>, scale: f64, lo: f64, hi: f64) -> ExecModel {
        let t_lo = curve(&terms, scale, lo);
        let d_lo = curve_slope(&terms, scale, lo).max(0.0);
        let t0 = (t_lo - lo * d_lo).clamp(0.0, t_lo);
        let t_hi = curve(&terms, scale, hi);
        let d_hi = curve_slope(&terms, scale, hi);
        ExecModel {
            terms,
            scale,
            lo,
            hi,
            t0,
            t_lo,
            t_hi,
            d_hi,
        }
    }

    /// The terms, coefficients on the scaled size `x / scale()`.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// The bases used.
    pub fn basis(&self) -> Vec<Basis> {
        self.terms.iter().map(|t| t.basis).collect()
    }

    /// The scale `S` of the sizes (`s = x / S`).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The range `[lo, hi]` of sizes the curve was fitted on (outside it the
    /// model extrapolates linearly, see the type's documentation).
    pub fn range(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// `time(0)`: the fixed cost the model attributes to any block.
    pub fn fixed_cost(&self) -> f64 {
        self.t0
    }

    /// The curve as a formula in `x` (work units), e.g.
    /// `0.12 + 3.4e-3·x + 0.5·x·ln(x/1024)`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, t) in self.terms.iter().enumerate() {
            let term = t.basis.term(t.coef, self.scale);
            if i == 0 {
                s.push_str(&term);
            } else if let Some(rest) = term.strip_prefix('-') {
                s.push_str(" − ");
                s.push_str(rest);
            } else {
                s.push_str(" + ");
                s.push_str(&term);
            }
        }
        s
    }
}

impl fmt::Display for ExecModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on [{}, {}]",
            self.describe(),
            fmt_num(self.lo),
            fmt_num(self.hi)
        )
    }
}

fn curve(terms: &[Term], scale: f64, x: f64) -> f64 {
    let s = x / scale;
    terms.iter().map(|t| t.coef * t.basis.value(s)).sum()
}

fn curve_slope(terms: &[Term], scale: f64, x: f64) -> f64 {
    let s = x / scale;
    terms.iter().map(|t| t.coef * t.basis.deriv(s)).sum::<f64>() / scale
}

impl TimeModel for ExecModel {
    fn time(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        if x < self.lo {
            self.t0 + (self.t_lo - self.t0) * (x / self.lo)
        } else if x <= self.hi {
            curve(&self.terms, self.scale, x).max(self.t_lo)
        } else {
            self.t_hi + self.d_hi * (x - self.hi)
        }
    }

    fn slope(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        if x < self.lo {
            (self.t_lo - self.t0) / self.lo
        } else if x < self.hi {
            curve_slope(&self.terms, self.scale, x).max(0.0)
        } else {
            self.d_hi
        }
    }
}

// ---------------------------------------------------------------------------
// Transfer model
// ---------------------------------------------------------------------------

/// `G(x) = per_unit·x + fixed`, both `>= 0` (PLB-HAC eq. 2: bandwidth and
/// latency). Negative or NaN `x` is treated as 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferModel {
    /// Seconds per unit (a₁ >= 0).
    pub per_unit: f64,
    /// Seconds per block (a₂ >= 0).
    pub fixed: f64,
}

impl TransferModel {
    /// No transfer cost (a CPU worker).
    pub const ZERO: TransferModel = TransferModel {
        per_unit: 0.0,
        fixed: 0.0,
    };

    /// A model from its coefficients; fails unless both are finite `>= 0`.
    pub fn new(per_unit: f64, fixed: f64) -> Result<TransferModel, FitError> {
        if per_unit.is_finite() && fixed.is_finite() && per_unit >= 0.0 && fixed >= 0.0 {
            Ok(TransferModel { per_unit, fixed })
        } else {
            Err(FitError::InvalidModel(
                "transfer coefficients must be finite and >= 0",
            ))
        }
    }
}

impl fmt::Display for TransferModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.per_unit == 0.0, self.fixed == 0.0) {
            (true, true) => f.write_str("0"),
            (true, false) => f.write_str(&fmt_num(self.fixed)),
            (false, true) => write!(f, "{}·x", fmt_num(self.per_unit)),
            (false, false) => write!(f, "{}·x + {}", fmt_num(self.per_unit), fmt_num(self.fixed)),
        }
    }
}

impl TimeModel for TransferModel {
    fn time(&self, x: f64) -> f64 {
        let x = if x > 0.0 { x } else { 0.0 };
        self.fixed + self.per_unit * x
    }
    fn slope(&self, _x: f64) -> f64 {
        self.per_unit
    }
}

/// What [`fit_transfer`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferReport {
    /// Weighted R² (1 when all times are equal and predicted exactly, 0 with
    /// a single distinct size).
    pub r2: f64,
    /// Points fitted on.
    pub used: usize,
    /// Valid points left out as outliers (more than `outlier_ratio` above
    /// the line).
    pub outliers: usize,
    /// Points skipped as invalid.
    pub invalid: usize,
    /// Points superseded by a change of speed.
    pub superseded: usize,
}

// ---------------------------------------------------------------------------
// Sum
// ---------------------------------------------------------------------------

/// `E_p(x) = F_p(x) + G_p(x)`: what the solvers see of a PU.
#[derive(Debug, Clone, PartialEq)]
pub struct PuModel {
    /// Compute time.
    pub exec: ExecModel,
    /// Transfer time.
    pub transfer: TransferModel,
}

impl TimeModel for PuModel {
    fn time(&self, x: f64) -> f64 {
        self.exec.time(x) + self.transfer.time(x)
    }
    fn slope(&self, x: f64) -> f64 {
        self.exec.slope(x) + self.transfer.slope(x)
    }
}

/// A fitted PU model with both reports.
#[derive(Debug, Clone, PartialEq)]
pub struct PuFit {
    /// The model.
    pub model: PuModel,
    /// How `model.exec` was fitted.
    pub exec: FitReport,
    /// How `model.transfer` was fitted.
    pub transfer: TransferReport,
}

// ---------------------------------------------------------------------------
// Execution-time fitting
// ---------------------------------------------------------------------------

/// Per-distinct-size aggregates of the active points, sorted by size.
struct Groups {
    x: Vec<f64>,
    /// Summed recency weight.
    w: Vec<f64>,
    /// Fit weight: summed recency weight / mean² (relative least squares).
    fw: Vec<f64>,
    /// Weighted mean time.
    y: Vec<f64>,
    /// Indices (into the valid points) of each group's members.
    members: Vec<Vec<usize>>,
}

fn group(pts: &[Point], active: &[bool]) -> Groups {
    let mut idx: Vec<usize> = (0..pts.len()).filter(|&i| active[i]).collect();
    idx.sort_by(|&a, &b| pts[a].x.total_cmp(&pts[b].x));
    let mut g = Groups {
        x: Vec::new(),
        w: Vec::new(),
        fw: Vec::new(),
        y: Vec::new(),
        members: Vec::new(),
    };
    for i in idx {
        let p = pts[i];
        let same = g.x.last().is_some_and(|&x| p.x - x <= 1e-12 * x);
        if same {
            let j = g.x.len() - 1;
            g.w[j] += p.w;
            g.y[j] += p.w * p.t;
            g.members[j].push(i);
        } else {
            g.x.push(p.x);
            g.w.push(p.w);
            g.y.push(p.w * p.t);
            g.members.push(vec![i]);
        }
    }
    for (y, w) in g.y.iter_mut().zip(&g.w) {
        *y /= w;
    }
    g.fw = g.y.iter().zip(&g.w).map(|(y, w)| w / (y * y)).collect();
    g
}

/// The weighted design of all 8 bases on a grouping.
struct Design {
    scale: f64,
    lo: f64,
    hi: f64,
    cols: [Vec<f64>; 8],
    yw: Vec<f64>,
}

fn design(g: &Groups) -> Design {
    let lo = g.x[0];
    let hi = *g.x.last().unwrap_or(&lo);
    let scale = scale_for(hi);
    let cols: [Vec<f64>; 8] = std::array::from_fn(|b| {
        g.x.iter()
            .zip(&g.fw)
            .map(|(&x, &w)| w.sqrt() * Basis::ALL[b].value(x / scale))
            .collect()
    });
    let yw = g.y.iter().zip(&g.fw).map(|(y, w)| w.sqrt() * y).collect();
    Design {
        scale,
        lo,
        hi,
        cols,
        yw,
    }
}

fn terms_of(mask: u8, coef: &[f64]) -> Vec<Term> {
    Basis::ALL
        .iter()
        .filter(|b| mask & (1 << b.index()) != 0)
        .zip(coef)
        .map(|(&basis, &coef)| Term { basis, coef })
        .collect()
}

struct Chosen {
    mask: u8,
    coef: [f64; 8],
    press: f64,
    candidates: usize,
}

impl Design {
    fn lsq(&self) -> SubsetLsq {
        let cols: [&[f64]; 8] = std::array::from_fn(|b| self.cols[b].as_slice());
        SubsetLsq::new(&cols, &self.yw)
    }
}

/// Cross-validated subset selection on a grouping with `m >= 3` sizes.
fn select(g: &Groups, d: &Design, cfg: &FitConfig) -> Option<Chosen> {
    let m = g.x.len();
    let kmax = cfg
        .max_terms
        .clamp(1, 8)
        .min(m.saturating_sub(1))
        .min(m.div_ceil(2));
    if kmax == 0 {
        return None;
    }
    let allowed = cfg.allowed_mask();
    let gx = grid(d.lo, d.hi);
    let gv: [Vec<f64>; 8] = std::array::from_fn(|b| {
        gx.iter()
            .map(|&x| Basis::ALL[b].value(x / d.scale))
            .collect()
    });
    let gd: [Vec<f64>; 8] = std::array::from_fn(|b| {
        gx.iter()
            .map(|&x| Basis::ALL[b].deriv(x / d.scale))
            .collect()
    });
    let mut cands: Vec<(u8, usize, f64, [f64; 8])> = Vec::new();
    d.lsq().enumerate(allowed, kmax, &mut |n| {
        // The constant alone is no model of a block size.
        if n.mask != 1 && n.press.is_finite() {
            cands.push((n.mask, n.k, n.press, n.coef));
        }
    });
    let mut v = vec![0.0; gx.len()];
    let mut dv = vec![0.0; gx.len()];
    let mut valid = |mask: u8, coef: &[f64; 8]| -> bool {
        v.iter_mut().for_each(|a| *a = 0.0);
        dv.iter_mut().for_each(|a| *a = 0.0);
        let mut j = 0;
        for b in 0..8 {
            if mask & (1 << b) != 0 {
                let c = coef[j];
                j += 1;
                for i in 0..v.len() {
                    v[i] += c * gv[b][i];
                    dv[i] += c * gd[b][i];
                }
            }
        }
        check_shape(&v, &dv).is_ok()
    };
    cands.sort_by(|a, b| a.2.total_cmp(&b.2));
    let mut ok: Vec<Option<bool>> = vec![None; cands.len()];
    let best = (0..cands.len()).find(|&i| {
        let r = valid(cands[i].0, &cands[i].3);
        ok[i] = Some(r);
        r
    })?;
    let mean = g.y.iter().zip(&g.fw).map(|(y, w)| y * w).sum::<f64>() / g.fw.iter().sum::<f64>();
    let sst: f64 =
        g.y.iter()
            .zip(&g.fw)
            .map(|(y, w)| w * (y - mean) * (y - mean))
            .sum();
    // Σ fw·ȳ² = Σ W: the scale of the weighted squares, for exact fits.
    let y2 = g.w.iter().sum::<f64>();
    let limit = cands[best].2 * (1.0 + cfg.parsimony()) + 1e-12 * sst + 1e-24 * y2;
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].2 <= limit).collect();
    let cx = |mask: u8| -> u32 {
        Basis::ALL
            .iter()
            .filter(|b| mask & (1 << b.index()) != 0)
            .map(|b| b.complexity())
            .sum()
    };
    order.sort_by(|&a, &b| {
        (cands[a].1, cx(cands[a].0))
            .cmp(&(cands[b].1, cx(cands[b].0)))
            .then(cands[a].2.total_cmp(&cands[b].2))
    });
    let pick = order
        .into_iter()
        .find(|&i| *ok[i].get_or_insert_with(|| valid(cands[i].0, &cands[i].3)))
        .unwrap_or(best);
    Some(Chosen {
        mask: cands[pick].0,
        coef: cands[pick].3,
        press: cands[pick].2,
        candidates: cands.len(),
    })
}

/// A model and how it was obtained, on a grouping.
struct Stage {
    model: ExecModel,
    kind: FitKind,
    press: Option<f64>,
    candidates: usize,
    mask: Option<u8>,
}

fn fallback(g: &Groups, d: &Design) -> Stage {
    if g.x.len() >= 2 {
        let mask = 0b11; // Const | X
        if let Some(n) = d.lsq().solve(mask)
            && let Ok(model) = ExecModel::new(&terms_of(mask, &n.coef[..2]), d.scale, d.lo, d.hi)
        {
            return Stage {
                model,
                kind: FitKind::Affine,
                press: None,
                candidates: 0,
                mask: None,
            };
        }
    }
    // Best per-size throughput; means are > 0 as every time is.
    let spu =
        g.x.iter()
            .zip(&g.y)
            .map(|(x, y)| y / x)
            .fold(f64::INFINITY, f64::min);
    let model = ExecModel::proportional(spu, d.lo, d.hi)
        .or_else(|_| ExecModel::proportional(1.0, 1.0, 1.0))
        .expect("1 s per unit on [1, 1] is a valid model");
    Stage {
        model,
        kind: FitKind::Proportional,
        press: None,
        candidates: 0,
        mask: None,
    }
}

fn stage(g: &Groups, cfg: &FitConfig) -> Stage {
    let d = design(g);
    if g.x.len() >= 3
        && let Some(c) = select(g, &d, cfg)
    {
        let k = c.mask.count_ones() as usize;
        let model = ExecModel::from_checked(terms_of(c.mask, &c.coef[..k]), d.scale, d.lo, d.hi);
        return Stage {
            model,
            kind: FitKind::Selected,
            press: Some(c.press),
            candidates: c.candidates,
            mask: Some(c.mask),
        };
    }
    fallback(g, &d)
}

/// Weighted R² over the active points; `relative` multiplies each weight
/// by `1 / f(x)²`, the weights of the execution-time fit.
fn weighted_r2(pts: &[Point], active: &[bool], relative: bool, f: impl Fn(f64) -> f64) -> f64 {
    let wt = |p: &Point| {
        if relative {
            let v = f(p.x);
            if v > 0.0 { p.w / (v * v) } else { 0.0 }
        } else {
            p.w
        }
    };
    let (mut sw, mut swt) = (0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        sw += wt(p);
        swt += wt(p) * p.t;
    }
    if !(sw > 0.0 && sw.is_finite()) {
        return 0.0;
    }
    let mean = swt / sw;
    let (mut sst, mut sse, mut s2) = (0.0, 0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        let w = wt(p);
        sst += w * (p.t - mean) * (p.t - mean);
        let e = p.t - f(p.x);
        sse += w * e * e;
        s2 += w * p.t * p.t;
    }
    if sst <= 1e-24 * s2 {
        return if sse <= 1e-20 * s2 { 1.0 } else { 0.0 };
    }
    1.0 - sse / sst
}

/// Fits the execution-time curve of one PU to `points` (chronological,
/// newest last). See the module documentation for the procedure.
///
/// Errors only when no point is valid; one point, one distinct size, all
/// candidates rejected and similar cases give the documented fallbacks,
/// reported in [`FitReport::kind`].
pub fn fit_exec(points: &[Point], cfg: &FitConfig) -> Result<(ExecModel, FitReport), FitError> {
    fit_exec_inner(points, cfg, true)
}

fn fit_exec_inner(
    points: &[Point],
    cfg: &FitConfig,
    detect_shift: bool,
) -> Result<(ExecModel, FitReport), FitError> {
    let ok = |p: &Point| {
        p.x.is_finite() && p.x > 0.0 && p.t.is_finite() && p.t > 0.0 && p.w.is_finite() && p.w > 0.0
    };
    let orig: Vec<usize> = (0..points.len()).filter(|&i| ok(&points[i])).collect();
    let invalid = points.len() - orig.len();
    if orig.is_empty() {
        return Err(FitError::NoValidSamples { invalid });
    }
    let pts: Vec<Point> = orig.iter().map(|&i| points[i]).collect();
    let n = pts.len();
    let ratio = cfg.ratio();
    let mut active = vec![true; n];

    // 1. Within-size screen against the median of sizes seen >= 3 times.
    if ratio.is_finite() {
        let g = group(&pts, &active);
        for mem in &g.members {
            if mem.len() < 3 {
                continue;
            }
            let mut ts: Vec<f64> = mem.iter().map(|&i| pts[i].t).collect();
            ts.sort_by(f64::total_cmp);
            let med = if ts.len() % 2 == 1 {
                ts[ts.len() / 2]
            } else {
                0.5 * (ts[ts.len() / 2 - 1] + ts[ts.len() / 2])
            };
            for &i in mem {
                if pts[i].t > ratio * med || pts[i].t * ratio < med {
                    active[i] = false;
                }
            }
        }
    }

    // 2. Selection, then leave-one-out screening of sparse sizes.
    let mut g = group(&pts, &active);
    let mut st = stage(&g, cfg);
    if ratio.is_finite()
        && let Some(mask) = st.mask
    {
        let mut dropped = false;
        for _ in 0..3 {
            if g.x.len() < 4 {
                break;
            }
            let d = design(&g);
            let mut lsq = d.lsq();
            let Some(node) = lsq.solve(mask) else { break };
            let (resid, lev) = (node.resid, node.lev);
            let mut worst: Option<(usize, f64)> = None;
            for j in 0..g.x.len() {
                if g.members[j].len() > 2 || 1.0 - lev[j] < 1e-9 {
                    continue;
                }
                let e = resid[j] / g.fw[j].sqrt();
                let loo = g.y[j] - e / (1.0 - lev[j]);
                if loo <= 0.0 {
                    continue;
                }
                let q = (g.y[j] / loo).ln().abs();
                if q > ratio.ln() && worst.is_none_or(|(_, w)| q > w) {
                    worst = Some((j, q));
                }
            }
            let Some((j, _)) = worst else { break };
            for &i in &g.members[j] {
                active[i] = false;
            }
            dropped = true;
            g = group(&pts, &active);
        }
        if dropped {
            st = stage(&g, cfg);
        }
    }

    // 3. A persistent deviation of the newest points is a change of speed.
    let run = cfg.shift_run;
    if detect_shift && ratio.is_finite() && run > 0 && n >= run.saturating_mul(2) {
        let q: Vec<f64> = pts.iter().map(|p| p.t / st.model.time(p.x)).collect();
        let high = q[n - run..].iter().all(|&v| v > ratio);
        let low = q[n - run..].iter().all(|&v| v * ratio < 1.0);
        if high || low {
            let beyond = |v: f64| if high { v > ratio } else { v * ratio < 1.0 };
            let mut start = n - run;
            while start > 0 && beyond(q[start - 1]) {
                start -= 1;
            }
            if start >= run {
                let first = orig[start];
                let (model, mut rep) = fit_exec_inner(&points[first..], cfg, false)?;
                rep.invalid = invalid;
                rep.outlier_indices.iter_mut().for_each(|i| *i += first);
                rep.superseded = start;
                rep.shift_start = Some(first);
                return Ok((model, rep));
            }
        }
    }

    let used = active.iter().filter(|a| **a).count();
    let m = g.x.len();
    let r2 = if m < 2 {
        0.0
    } else {
        weighted_r2(&pts, &active, true, |x| st.model.time(x))
    };
    let wsum: f64 = g.w.iter().sum();
    let report = FitReport {
        kind: st.kind,
        basis: st.model.basis(),
        r2,
        cv_rmse: st.press.map(|p| (p / wsum).sqrt()),
        used,
        outliers: n - used,
        outlier_indices: (0..n).filter(|&i| !active[i]).map(|i| orig[i]).collect(),
        invalid,
        superseded: 0,
        shift_start: None,
        distinct_sizes: m,
        candidates: st.candidates,
    };
    Ok((st.model, report))
}

// ---------------------------------------------------------------------------
// Transfer fitting
// ---------------------------------------------------------------------------

/// Non-negative weighted least squares for `t = a₁x + a₂` (2 variables:
/// the unconstrained solution if feasible, else the best of the faces).
fn nnls_line(pts: &[Point], active: &[bool]) -> TransferModel {
    let (mut w, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (p, _) in pts.iter().zip(active).filter(|(_, a)| **a) {
        w += p.w;
        sx += p.w * p.x;
        sy += p.w * p.t;
        sxx += p.w * p.x * p.x;
        sxy += p.w * p.x * p.t;
    }
    if w <= 0.0 {
        return TransferModel::ZERO;
    }
    let sse = |m: &TransferModel| -> f64 {
        pts.iter()
            .zip(active)
            .filter(|(_, a)| **a)
            .map(|(p, _)| {
                let e = p.t - m.time(p.x);
                p.w * e * e
            })
            .sum()
    };
    // Centred form for accuracy.
    let xm = sx / w;
    let ym = sy / w;
    let cxx = sxx / w - xm * xm;
    let cxy = sxy / w - xm * ym;
    let mut cands = Vec::with_capacity(3);
    if cxx > 1e-12 * (sxx / w) {
        let a1 = cxy / cxx;
        let a2 = ym - a1 * xm;
        if a1 >= 0.0 && a2 >= 0.0 {
            return TransferModel {
                per_unit: a1,
                fixed: a2,
            };
        }
    }
    // Faces: proportional first, so that a single size is read as per-unit.
    if sxx > 0.0 {
        cands.push(TransferModel {
            per_unit: (sxy / sxx).max(0.0),
            fixed: 0.0,
        });
    }
    cands.push(TransferModel {
        per_unit: 0.0,
        fixed: ym.max(0.0),
    });
    let mut best = cands[0];
    let mut best_e = sse(&best);
    for c in &cands[1..] {
        let e = sse(c);
        if e < best_e * (1.0 - 1e-12) {
            best = *c;
            best_e = e;
        }
    }
    best
}

/// Fits `G(x) = a₁x + a₂` (a₁, a₂ >= 0) to transfer times (chronological,
/// newest last). Zero times are valid; negative or non-finite ones are
/// skipped as invalid. A point more than `outlier_ratio` above the line is
/// left out (high only: a fast transfer is not an error), unless the
/// newest `shift_run` points all are, which is read as a change of speed
/// (fit on the trailing run). With one distinct size the fit is
/// proportional (`a₂ = 0`).
pub fn fit_transfer(
    points: &[Point],
    cfg: &FitConfig,
) -> Result<(TransferModel, TransferReport), FitError> {
    let ok = |p: &Point| {
        p.x.is_finite()
            && p.x > 0.0
            && p.t.is_finite()
            && p.t >= 0.0
            && p.w.is_finite()
            && p.w > 0.0
    };
    let pts: Vec<Point> = points.iter().copied().filter(ok).collect();
    let invalid = points.len() - pts.len();
    if pts.is_empty() {
        return Err(FitError::NoValidSamples { invalid });
    }
    let n = pts.len();
    let ratio = cfg.ratio();
    let mut active = vec![true; n];
    let mut model = nnls_line(&pts, &active);
    let mut superseded = 0;
    if ratio.is_finite() {
        let floor = 1e-12;
        let above = |m: &TransferModel, p: &Point| p.t > ratio * m.time(p.x).max(floor);
        let below = |m: &TransferModel, p: &Point| p.t * ratio < m.time(p.x);
        let run = cfg.shift_run;
        let shift = |m: &TransferModel| -> Option<usize> {
            if run == 0 || n < run.saturating_mul(2) {
                return None;
            }
            let tail = &pts[n - run..];
            let high = if tail.iter().all(|p| above(m, p)) {
                true
            } else if tail.iter().all(|p| below(m, p)) {
                false
            } else {
                return None;
            };
            let beyond = |p: &Point| if high { above(m, p) } else { below(m, p) };
            let mut start = n - run;
            while start > 0 && beyond(&pts[start - 1]) {
                start -= 1;
            }
            (start >= run).then_some(start)
        };
        if let Some(start) = shift(&model) {
            active[..start].iter_mut().for_each(|a| *a = false);
            superseded = start;
            model = nnls_line(&pts, &active);
        } else {
            let mut any = false;
            for (i, p) in pts.iter().enumerate() {
                if above(&model, p) {
                    active[i] = false;
                    any = true;
                }
            }
            if any {
                model = nnls_line(&pts, &active);
            }
        }
    }
    let used = active.iter().filter(|a| **a).count();
    let mut xs: Vec<f64> = pts
        .iter()
        .zip(&active)
        .filter(|(_, a)| **a)
        .map(|(p, _)| p.x)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let r2 = if xs.len() < 2 {
        0.0
    } else {
        weighted_r2(&pts, &active, false, |x| model.time(x))
    };
    Ok((
        model,
        TransferReport {
            r2,
            used,
            outliers: n - used - superseded,
            invalid,
            superseded,
        },
    ))
}

/// Fits both models of a PU from compute and transfer points (each
/// chronological). When the compute fit detects a change of speed, the
/// transfer line is fitted on the same trailing points.
pub fn fit_pu(compute: &[Point], transfer: &[Point], cfg: &FitConfig) -> Result<PuFit, FitError> {
    let (exec, erep) = fit_exec(compute, cfg)?;
    let tpts = match erep.shift_start {
        Some(i) if i <= transfer.len() && transfer.len() == compute.len() => &transfer[i..],
        _ => transfer,
    };
    let (transfer, trep) = match fit_transfer(tpts, cfg) {
        Ok(v) => v,
        Err(FitError::NoValidSamples { invalid }) => (
            TransferModel::ZERO,
            TransferReport {
                r2: 0.0,
                used: 0,
                outliers: 0,
                invalid,
                superseded: 0,
            },
        ),
        Err(e) => return Err(e),
    };
    Ok(PuFit {
        model: PuModel { exec, transfer },
        exec: erep,
        transfer: trep,
    })
}

impl SampleStore {
    /// Fits this PU's models ([`fit_pu`] on the recency-weighted samples)
    /// and, when a change of speed was detected, forgets the samples it
    /// superseded so the next fits start from the new regime.
    pub fn fit(&mut self, cfg: &FitConfig) -> Result<PuFit, FitError> {
        let fit = fit_pu(&self.compute_points(), &self.transfer_points(), cfg)?;
        if let Some(seq) = fit.exec.shift_start.and_then(|i| self.seq_at(i)) {
            self.forget_before(seq);
        }
        Ok(fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::samples::{Sample, StoreConfig};

    fn pts(xs: &[f64], f: impl Fn(f64) -> f64) -> Vec<Point> {
        xs.iter().map(|&x| Point::new(x, f(x), 1.0)).collect()
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    fn sizes(n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n)
            .map(|i| lo * (hi / lo).powf(i as f64 / (n - 1) as f64))
            .collect()
    }

    /// The TimeModel contract on a dense grid from 0 to 3·hi, plus huge x.
    fn check_contract(m: &impl TimeModel, hi: f64) {
        let n = 3000;
        let mut prev = m.time(0.0);
        assert!(prev.is_finite() && prev >= 0.0, "time(0) = {prev}");
        for i in 1..=n {
            let x = 3.0 * hi * i as f64 / n as f64;
            let t = m.time(x);
            let s = m.slope(x);
            assert!(t.is_finite() && t >= 0.0, "time({x}) = {t}");
            assert!(s.is_finite() && s >= 0.0, "slope({x}) = {s}");
            assert!(
                t >= prev - 1e-12 * t.abs(),
                "decreasing at {x}: {prev} -> {t}"
            );
            prev = t;
        }
        for &x in &[1e-300, 1e-9, hi * 1e6, 1e300] {
            let t = m.time(x);
            assert!(t >= 0.0 && !t.is_nan() && m.slope(x) >= 0.0);
        }
        assert_eq!(m.time(-5.0), m.time(0.0));
        assert_eq!(m.time(f64::NAN), m.time(0.0));
    }

    #[test]
    fn exact_affine_recovery() {
        let p = pts(&sizes(8, 1.0, 10.0), |x| 2.0 + 3.0 * x);
        let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
        assert_eq!(r.kind, FitKind::Selected);
        assert_eq!(r.basis, vec![Basis::Const, Basis::X]);
        assert!(r.r2 > 1.0 - 1e-12 && r.meets_r2_target());
        for &x in &[0.0, 0.5, 1.0, 3.3, 10.0, 40.0] {
            assert!(close(m.time(x), 2.0 + 3.0 * x, 1e-9), "{x}: {}", m.time(x));
            assert!(close(m.slope(x), 3.0, 1e-9));
        }
        assert!(close(m.fixed_cost(), 2.0, 1e-9));
        assert_eq!(m.range(), (1.0, 10.0));
        assert_eq!(m.describe(), "2 + 3·x");
        assert_eq!(r.outliers + r.invalid + r.superseded, 0);
        assert_eq!(r.distinct_sizes, 8);
        assert!(r.candidates > 10);
    }

    #[test]
    fn exact_square_and_x_ln_x_recovery() {
        let cfg = FitConfig::default();
        let (m, r) = fit_exec(&pts(&sizes(8, 1.0, 10.0), |x| 0.5 * x * x), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::X2]);
        for &x in &[1.0, 2.5, 7.0, 10.0] {
            assert!(close(m.time(x), 0.5 * x * x, 1e-9));
        }
        assert_eq!(m.describe(), "0.5·x²");
        // x ln x = S·(s ln s) + S ln S·s on scaled sizes: {x, x ln x}.
        let (m, r) = fit_exec(&pts(&sizes(9, 2.0, 20.0), |x| x * x.ln()), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::X, Basis::XLn]);
        for &x in &[2.0, 3.0, 11.0, 20.0] {
            assert!(close(m.time(x), x * x.ln(), 1e-9), "{x}");
        }
        // GPU-like: 10 ms latency + 1 µs per unit, sizes 1 Ki .. 1 Mi.
        let gpu = |x: f64| 0.01 + 1e-6 * x;
        let (m, r) = fit_exec(&pts(&sizes(11, 1024.0, 1048576.0), gpu), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::Const, Basis::X]);
        for &x in &[0.0, 1024.0, 5e5, 4e6] {
            assert!(close(m.time(x), gpu(x), 1e-8));
        }
        // ln x terms: a + b ln x on [1, 100] extrapolates linearly below 1.
        let (m, r) = fit_exec(&pts(&sizes(7, 1.0, 100.0), |x| 1.0 + x.ln()), &cfg).unwrap();
        assert_eq!(r.basis, vec![Basis::Const, Basis::Ln]);
        assert!(close(m.time(50.0), 1.0 + 50f64.ln(), 1e-9));
        assert!(
            m.fixed_cost().abs() < 1e-12,
            "tangent 1 - 1·1 = 0 at lo = 1"
        );
        assert!(close(m.time(0.5), 0.5, 1e-9));
        check_contract(&m, 100.0);
    }

    #[test]
    fn robust_to_noise_and_a_spike() {
        let mut rng = Rng::new(42);
        let truth = |x: f64| 2.0 + 3.0 * x;
        let xs = sizes(12, 1.0, 50.0);
        let mut p = Vec::new();
        for _ in 0..3 {
            for &x in &xs {
                p.push(Point::new(
                    x,
                    truth(x) * (1.0 + 0.05 * (2.0 * rng.unit() - 1.0)),
                    1.0,
                ));
            }
        }
        // A 10x spike at a repeated size and one at a size seen once.
        p[7].t *= 10.0;
        p.push(Point::new(17.0, 10.0 * truth(17.0), 1.0));
        let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
        assert_eq!(r.outliers, 2, "{r:?}");
        assert_eq!(r.outlier_indices, vec![7, p.len() - 1]);
        assert!(r.meets_r2_target() && r.r2 > 0.98, "{r:?}");
        for &x in &[1.0, 10.0, 17.0, 50.0] {
            assert!(
                close(m.time(x), truth(x), 0.05),
                "{x}: {} ({})",
                m.time(x),
                m
            );
        }
        // The same spikes without outlier handling pull the curve away.
        let off = FitConfig {
            outlier_ratio: f64::NAN,
            ..FitConfig::default()
        };
        let (m2, r2) = fit_exec(&p, &off).unwrap();
        assert_eq!(r2.outliers, 0);
        let err = |m: &ExecModel| (m.time(17.0) / truth(17.0) - 1.0).abs();
        // (Relative least squares already damps a high spike; R² does not.)
        assert!(r2.r2 < 0.5 && err(&m2) > 3.0 * err(&m), "{m2} {r2:?}");
    }

    #[test]
    fn noisy_curves_recovered_within_noise() {
        let mut rng = Rng::new(7);
        type Curve = (&'static str, fn(f64) -> f64);
        let curves: [Curve; 3] = [
            ("gpu", |x| 0.02 + 2e-6 * x),
            ("square", |x| 1e-3 + 1e-9 * x * x),
            ("xlnx", |x| 1e-5 * x * (x / 100.0).ln().max(0.0) + 1e-4 * x),
        ];
        for (name, f) in curves {
            let xs = sizes(10, 1000.0, 200_000.0);
            let mut p = Vec::new();
            for _ in 0..4 {
                for &x in &xs {
                    p.push(Point::new(
                        x,
                        f(x) * (1.0 + 0.05 * (2.0 * rng.unit() - 1.0)),
                        1.0,
                    ));
                }
            }
            let (m, r) = fit_exec(&p, &FitConfig::default()).unwrap();
            assert_eq!(r.outliers, 0, "{name}");
            assert!(r.r2 > 0.95, "{name}: {r:?}");
            for &x in &xs {
                assert!(
                    close(m.time(x), f(x), 0.06),
                    "{name} {x}: {} vs {}",
                    m.time(x),
                    f(x)
                );
            }
            check_contract(&m, 200_000.0);
        }
    }

    fn device(rng: &mut Rng, x: f64, speed: f64) -> Sample {
        let t = (0.05 + x / speed) * (1.0 + 0.03 * (2.0 * rng.unit() - 1.0));
        Sample::new(x, t, 1e-3 + x * 1e-7)
    }

    #[test]
    fn decay_follows_a_moderate_slowdown() {
        let mut rng = Rng::new(3);
        let mut store = SampleStore::new(StoreConfig {
            cap: 64,
            half_life: 8.0,
            min_weight: 0.02,
        });
        let xs = [1000.0, 2000.0, 4000.0, 8000.0];
        for i in 0..48 {
            store.push(device(&mut rng, xs[i % 4], 1e4)).unwrap();
        }
        let cfg = FitConfig::default();
        let before = store.fit(&cfg).unwrap();
        assert!(close(before.model.exec.time(6000.0), 0.65, 0.03));
        // The device becomes 2x slower (a competing process): not outliers,
        // the recency weights move the curve over.
        // After 8 new samples (one half-life) the model is half-way there...
        for i in 0..8 {
            store.push(device(&mut rng, xs[i % 4], 5e3)).unwrap();
        }
        let mid = store.fit(&cfg).unwrap().model.exec.time(6000.0);
        assert!(mid > 0.8 && mid < 1.1, "{mid}");
        // ...and after 40 (5 half-lives) it has followed.
        for i in 0..32 {
            store.push(device(&mut rng, xs[i % 4], 5e3)).unwrap();
        }
        let after = store.fit(&cfg).unwrap();
        assert_eq!(after.exec.shift_start, None);
        let t = after.model.exec.time(6000.0);
        assert!(close(t, 1.25, 0.04), "{t} ({})", after.model.exec);
        // Without decay the fit would sit between the two regimes.
        let mut flat = SampleStore::new(StoreConfig {
            cap: 128,
            half_life: f64::INFINITY,
            min_weight: 1.0,
        });
        for (_, s) in store.iter() {
            flat.push(*s).unwrap();
        }
        let mixed = flat.fit(&cfg).unwrap().model.exec.time(6000.0);
        assert!(mixed < 1.1, "{mixed}");
    }

    #[test]
    fn large_slowdown_is_a_shift_not_outliers() {
        let mut rng = Rng::new(5);
        let mut store = SampleStore::default();
        let xs = [1000.0, 2000.0, 4000.0, 8000.0, 16000.0];
        for i in 0..40 {
            store.push(device(&mut rng, xs[i % 5], 1e4)).unwrap();
        }
        let cfg = FitConfig::default();
        // One 10x spike: an outlier, the model does not move.
        let mut spike = device(&mut rng, 4000.0, 1e4);
        spike.compute_s *= 10.0;
        store.push(spike).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!((f.exec.outliers, f.exec.shift_start), (1, None));
        assert!(close(f.model.exec.time(4000.0), 0.45, 0.03));
        // Now the device becomes 10x slower. Two deviating points in a row
        // (the spike and one slow block) may still be spikes...
        store.push(device(&mut rng, 8000.0, 1e3)).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!((f.exec.outliers, f.exec.shift_start), (2, None));
        assert!(close(f.model.exec.time(4000.0), 0.45, 0.03));
        // ...the third makes a run of 3: a change of speed.
        store.push(device(&mut rng, 2000.0, 1e3)).unwrap();
        let n_before = store.len();
        let f = store.fit(&cfg).unwrap();
        assert_eq!(f.exec.superseded, 40, "{:?}", f.exec);
        assert_eq!((f.exec.used, f.exec.outliers), (3, 0));
        assert_eq!(store.len(), 3, "the store forgot the old regime");
        assert_eq!(store.forgotten(), (n_before - 3) as u64);
        // New regime 0.05 + x/1000 s (the spike, 4.5 s at 4000, fits in it).
        store.push(device(&mut rng, 16000.0, 1e3)).unwrap();
        let f = store.fit(&cfg).unwrap();
        assert_eq!(f.exec.shift_start, None);
        for x in [2000.0, 8000.0, 16000.0] {
            assert!(
                close(f.model.exec.time(x), 0.05 + x / 1e3, 0.1),
                "{x}: {}",
                f.model.exec
            );
        }
        // And a device that becomes 10x faster.
        let mut st = SampleStore::default();
        for i in 0..20 {
            st.push(device(&mut rng, xs[i % 5], 1e3)).unwrap();
        }
        for &x in &xs[..3] {
            st.push(device(&mut rng, x, 1e5)).unwrap();
        }
        let f = st.fit(&cfg).unwrap();
        assert_eq!(f.exec.superseded, 20);
        assert!(f.model.exec.time(4000.0) < 0.2);
    }

    #[test]
    fn contract_holds_for_random_fits() {
        let mut rng = Rng::new(2024);
        let cfg = FitConfig::default();
        let cases = std::env::var("PLB_FIT_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(400);
        for case in 0..cases {
            let n = 1 + rng.below(40) as usize;
            let lo = rng.log_range(1.0, 1e4);
            let hi = lo * rng.log_range(1.0, 1e3);
            let kind = rng.below(4);
            let coefs: Vec<f64> = (0..8).map(|_| rng.log_range(1e-3, 10.0)).collect();
            let mut p = Vec::new();
            for _ in 0..n {
                let x = if rng.below(3) == 0 {
                    lo
                } else {
                    rng.log_range(lo, hi).round().max(1.0)
                };
                let s = x / hi;
                let clean = match kind {
                    // A random positive combination of increasing bases.
                    0 => {
                        coefs[0]
                            + coefs[1] * s
                            + coefs[2] * s * s * (rng.below(2) as f64)
                            + coefs[3] * s * s.exp() * (rng.below(2) as f64)
                    }
                    1 => coefs[0] * (1.0 + s.ln() - (lo / hi).ln()),
                    // Pure noise: no structure at all.
                    2 => rng.log_range(1e-3, 1e3),
                    // A decreasing device (impossible, must still be valid).
                    _ => coefs[0] / (1.0 + s),
                };
                let noisy = clean * (1.0 + 0.1 * (2.0 * rng.unit() - 1.0));
                let w = if rng.below(5) == 0 { rng.unit() } else { 1.0 };
                p.push(Point::new(x, noisy, w));
            }
            let (m, r) = fit_exec(&p, &cfg).unwrap();
            assert!(
                r.used + r.outliers + r.superseded + r.invalid == n,
                "case {case}"
            );
            check_contract(&m, hi);
            let (t, _) = fit_transfer(&p, &cfg).unwrap();
            check_contract(
                &PuModel {
                    exec: m,
                    transfer: t,
                },
                hi,
            );
        }
    }

    #[test]
    fn bad_inputs_give_errors_or_fallbacks() {
        let cfg = FitConfig::default();
        assert_eq!(
            fit_exec(&[], &cfg).unwrap_err(),
            FitError::NoValidSamples { invalid: 0 }
        );
        let garbage = [
            Point::new(f64::NAN, 1.0, 1.0),
            Point::new(1.0, f64::NAN, 1.0),
            Point::new(1.0, f64::INFINITY, 1.0),
            Point::new(f64::INFINITY, 1.0, 1.0),
            Point::new(0.0, 1.0, 1.0),
            Point::new(-1.0, 1.0, 1.0),
            Point::new(1.0, 0.0, 1.0),
            Point::new(1.0, -1.0, 1.0),
            Point::new(1.0, 1.0, 0.0),
            Point::new(1.0, 1.0, f64::NAN),
        ];
        assert_eq!(
            fit_exec(&garbage, &cfg).unwrap_err(),
            FitError::NoValidSamples { invalid: 10 }
        );
        assert_eq!(
            fit_exec(&garbage, &cfg).unwrap_err().to_string(),
            "no usable sample (10 invalid)"
        );
        // One sample: proportional, R² 0.
        let mut one = garbage.to_vec();
        one.push(Point::new(4.0, 2.0, 1.0));
        let (m, r) = fit_exec(&one, &cfg).unwrap();
        assert_eq!(
            (r.kind, r.r2, r.used, r.invalid),
            (FitKind::Proportional, 0.0, 1, 10)
        );
        assert_eq!((m.time(4.0), m.time(8.0), m.fixed_cost()), (2.0, 4.0, 0.0));
        check_contract(&m, 4.0);
        // One distinct size, several samples: proportional at the mean.
        let (m, r) = fit_exec(&pts(&[5.0; 6], |_| 1.0), &cfg).unwrap();
        assert_eq!(
            (r.kind, r.distinct_sizes, r.r2),
            (FitKind::Proportional, 1, 0.0)
        );
        assert!(close(m.time(10.0), 2.0, 1e-12));
        // Two sizes: the line through them.
        let (m, r) = fit_exec(&pts(&[1.0, 3.0, 3.0], |x| 1.0 + x), &cfg).unwrap();
        assert_eq!((r.kind, r.distinct_sizes), (FitKind::Affine, 2));
        assert!(close(m.time(0.0), 1.0, 1e-12) && close(m.time(10.0), 11.0, 1e-12));
        // Two sizes, time decreasing: no valid line, proportional at the best throughput.
        let (m, r) = fit_exec(
            &[Point::new(1.0, 2.0, 1.0), Point::new(4.0, 1.0, 1.0)],
            &cfg,
        )
        .unwrap();
        assert_eq!(r.kind, FitKind::Proportional);
        assert!(close(m.time(4.0), 1.0, 1e-12));
        check_contract(&m, 4.0);
        // A PU at almost zero speed is just slow; still a valid model.
        let (m, _) = fit_exec(&pts(&[1.0, 2.0, 4.0], |x| 1e200 * x), &cfg).unwrap();
        check_contract(&m, 4.0);
        // Nonsense configuration: clamped, no panic.
        let weird = FitConfig {
            max_terms: 0,
            bases: vec![],
            parsimony: f64::NAN,
            outlier_ratio: -1.0,
            shift_run: usize::MAX,
        };
        let (m, r) = fit_exec(&pts(&sizes(6, 1.0, 9.0), |x| x * x), &weird).unwrap();
        assert_ne!(r.kind, FitKind::Selected);
        check_contract(&m, 9.0);
        let (_, r) = fit_exec(
            &pts(&sizes(6, 1.0, 9.0), |x| x * x),
            &FitConfig {
                max_terms: 99,
                ..FitConfig::default()
            },
        )
        .unwrap();
        assert_eq!(r.basis, vec![Basis::X2]);
        // A huge shift_run with outlier handling on: no overflow, no shift.
        let huge = FitConfig {
            shift_run: usize::MAX,
            ..FitConfig::default()
        };
        let (_, r) = fit_exec(&pts(&sizes(6, 1.0, 9.0), |x| x), &huge).unwrap();
        assert_eq!(r.shift_start, None);
        fit_transfer(&pts(&sizes(6, 1.0, 9.0), |x| x), &huge).unwrap();
        // Store with nothing: typed error.
        assert!(SampleStore::default().fit(&cfg).is_err());
    }

    #[test]
    fn explicit_models_are_checked() {
        let t = |basis, coef| Term { basis, coef };
        assert!(ExecModel::new(&[], 1.0, 1.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, -1.0)], 1.0, 1.0, 2.0).is_err());
        // Decreasing in the middle: 1 + s - 0.9·s² on [0.1, 1]? slope 1 - 1.8 s < 0 at s > 0.56.
        let e = ExecModel::new(
            &[t(Basis::Const, 1.0), t(Basis::X, 1.0), t(Basis::X2, -0.9)],
            1.0,
            0.1,
            1.0,
        );
        assert_eq!(
            e.unwrap_err(),
            FitError::InvalidModel("decreasing somewhere on the fitted range")
        );
        assert!(
            ExecModel::new(&[t(Basis::Const, 1.0)], 1.0, 1.0, 2.0).is_err(),
            "flat"
        );
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], f64::NAN, 1.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], 1.0, 0.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, 1.0)], 1.0, 3.0, 2.0).is_err());
        assert!(ExecModel::new(&[t(Basis::X, f64::INFINITY)], 1.0, 1.0, 2.0).is_err());
        assert!(ExecModel::proportional(0.0, 1.0, 2.0).is_err());
    }

    #[test]
    fn extrapolation_rules() {
        let t = |basis, coef| Term { basis, coef };
        // 1 + 3 ln s on [1/16, 1]·1024 with S = 1024: F(lo) = 1 + 3 ln(1/16) < 0 -> invalid.
        assert!(
            ExecModel::new(
                &[t(Basis::Const, 1.0), t(Basis::Ln, 3.0)],
                1024.0,
                64.0,
                1024.0
            )
            .is_err()
        );
        // 10 + ln s on [64, 1024]: positive, concave; tangent at lo hits 0 below.
        let m = ExecModel::new(
            &[t(Basis::Const, 10.0), t(Basis::Ln, 1.0)],
            1024.0,
            64.0,
            1024.0,
        )
        .unwrap();
        let f_lo = 10.0 + (1.0f64 / 16.0).ln();
        let d_lo = 1.0 / 64.0;
        assert!(close(m.fixed_cost(), f_lo - 64.0 * d_lo, 1e-12));
        assert!(close(m.time(32.0), m.fixed_cost() + 32.0 * d_lo, 1e-12));
        assert!(close(m.slope(10.0), d_lo, 1e-12));
        // Above hi: tangent with slope 1/1024.
        assert!(close(m.time(2048.0), 10.0 + 1.0, 1e-12));
        assert!(close(m.slope(1e9), 1.0 / 1024.0, 1e-12));
        check_contract(&m, 1024.0);
        // s·e^s beyond its range never overflows.
        let m = ExecModel::new(&[t(Basis::XExp, 1.0)], 1024.0, 1.0, 1024.0).unwrap();
        assert!(m.time(1e12).is_finite());
        assert_eq!(m.time(f64::INFINITY), f64::INFINITY);
        assert!(m.describe().contains("x·exp(x/1024)"), "{}", m.describe());
        assert!(m.to_string().ends_with("on [1, 1024]"));
        let m = ExecModel::new(
            &[t(Basis::Const, 2.0), t(Basis::X, 3.0), t(Basis::X2, -0.5)],
            1.0,
            0.5,
            1.0,
        )
        .unwrap();
        assert_eq!(m.describe(), "2 + 3·x − 0.5·x²");
    }

    #[test]
    fn transfer_line() {
        let cfg = FitConfig::default();
        let (g, r) = fit_transfer(&pts(&[1.0, 2.0, 4.0, 8.0], |x| 0.5 + 0.25 * x), &cfg).unwrap();
        assert!(close(g.per_unit, 0.25, 1e-12) && close(g.fixed, 0.5, 1e-12));
        assert!(r.r2 > 1.0 - 1e-12);
        // A negative intercept is cut to 0: a line through the origin.
        let (g, _) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |x| x - 0.5), &cfg).unwrap();
        assert_eq!(g.fixed, 0.0);
        assert!(g.per_unit > 0.0);
        // Decreasing transfer times: flat at the mean.
        let (g, _) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |x| 5.0 - x), &cfg).unwrap();
        assert_eq!(g.per_unit, 0.0);
        assert!(close(g.fixed, 8.0 / 3.0, 1e-12));
        // A CPU: all zeros.
        let (g, r) = fit_transfer(&pts(&[1.0, 2.0, 4.0], |_| 0.0), &cfg).unwrap();
        assert_eq!((g, r.r2), (TransferModel::ZERO, 1.0));
        // A spike above the line is left out.
        let mut p = pts(&sizes(8, 1.0, 8.0), |x| 1.0 + x);
        p[3].t *= 10.0;
        let (g, r) = fit_transfer(&p, &cfg).unwrap();
        assert_eq!(r.outliers, 1);
        assert!(close(g.per_unit, 1.0, 1e-9) && close(g.fixed, 1.0, 1e-9));
        // One size: proportional; bad points skipped; none -> error.
        let mut q = pts(&[4.0, 4.0], |_| 2.0);
        q.push(Point::new(1.0, -1.0, 1.0));
        let (g, r) = fit_transfer(&q, &cfg).unwrap();
        assert_eq!((g.per_unit, g.fixed, r.invalid, r.r2), (0.5, 0.0, 1, 0.0));
        assert!(fit_transfer(&q[2..], &cfg).is_err());
        assert!(TransferModel::new(-1.0, 0.0).is_err());
        assert_eq!(TransferModel::new(1.0, 2.0).unwrap().to_string(), "1·x + 2");
        assert_eq!(TransferModel::ZERO.to_string(), "0");
        assert_eq!(TransferModel::new(0.5, 0.0).unwrap().to_string(), "0.5·x");
    }

    #[test]
    fn pu_model_sums_both() {
        let mut store = SampleStore::default();
        for &x in &[1.0, 2.0, 4.0, 8.0, 16.0] {
            store
                .push(Sample::new(x, 1.0 + 2.0 * x, 0.5 + 0.1 * x))
                .unwrap();
        }
        store.push(Sample::new(3.0, f64::NAN, 0.0)).unwrap_err();
        let f = store.fit(&FitConfig::default()).unwrap();
        let e = &f.model;
        assert!(close(e.time(10.0), 21.0 + 1.5, 1e-9));
        assert!(close(e.slope(10.0), 2.1, 1e-9));
        assert_eq!(f.exec.used, 5);
        assert_eq!(store.rejections().bad_compute, 1);
        check_contract(e, 16.0);
    }
}
