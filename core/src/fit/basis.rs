//! The basis functions of the execution-time curves and the scaling of block
//! sizes they are evaluated on.
//!
//! PLB-HAC and PLB-HeC fit `F_p(x) = a_1 f_1(x) + … + a_n f_n(x)` with the
//! `f_i` taken from {x, x², x³, eˣ, ln x, x·eˣ, x·ln x}. We add a constant
//! ([`Basis::Const`]): the fixed cost of any block (kernel launch, PCIe and
//! network latency, waking a thread) that the [`TimeModel`] contract calls
//! `time(0)`; without it an affine device `t = 2 + 3x` could only be fitted
//! with `ln x` contortions.
//!
//! **Scaling.** The functions are evaluated on `s = x / S`, never on the raw
//! size `x` in work units: e^x overflows for x > 709, and block sizes are
//! counted in thousands or millions of units. [`scale_for`] picks `S` as the
//! smallest power of two not below the largest size fitted on, so the fitted
//! data lie in `s ∈ (0, 1]` (at least half of that interval is covered by the
//! largest sample) and `e^s ≤ e`. A power of two keeps descriptions readable
//! (`x/1024`) and does not change when the largest size grows a little.
//! Above the fitted range the model extrapolates linearly (see
//! [`crate::fit::ExecModel`]), so `e^s` is never evaluated above `s = 1`.
//!
//! Scaling is exact for the polynomial terms (`c·sᵖ = c/Sᵖ·xᵖ`); for the
//! logarithms `ln s = ln x − ln S`, so `{1, ln s}` spans the same curves as
//! `{1, ln x}`, and `{s, s ln s}` the same as `{x, x ln x}`. Only the
//! exponentials depend on `S` (the papers' `eˣ` presumes a normalised `x`, as
//! PLB-HAC's block-size selection does with the input normalised to 1).
//!
//! [`TimeModel`]: crate::model::TimeModel

/// One basis function of the execution-time curve, as a function of the
/// scaled size `s = x / S` (`s > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Basis {
    /// `1`: the fixed cost per block (our addition to the papers' set).
    Const,
    /// `s`
    X,
    /// `s²`
    X2,
    /// `s³`
    X3,
    /// `e^s`
    Exp,
    /// `ln s`
    Ln,
    /// `s·e^s`
    XExp,
    /// `s·ln s`
    XLn,
}

impl Basis {
    /// All candidates, the constant first, then the papers' order.
    pub const ALL: [Basis; 8] = [
        Basis::Const,
        Basis::X,
        Basis::X2,
        Basis::X3,
        Basis::Exp,
        Basis::Ln,
        Basis::XExp,
        Basis::XLn,
    ];

    /// The seven functions of the papers (without the constant).
    pub const PAPERS: [Basis; 7] = [
        Basis::X,
        Basis::X2,
        Basis::X3,
        Basis::Exp,
        Basis::Ln,
        Basis::XExp,
        Basis::XLn,
    ];

    /// Index in [`Basis::ALL`] (also the bit in a subset mask).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Value at the scaled size `s` (`s > 0`; `ln` terms are `-inf` at 0).
    pub fn value(self, s: f64) -> f64 {
        match self {
            Basis::Const => 1.0,
            Basis::X => s,
            Basis::X2 => s * s,
            Basis::X3 => s * s * s,
            Basis::Exp => s.exp(),
            Basis::Ln => s.ln(),
            Basis::XExp => s * s.exp(),
            Basis::XLn => s * s.ln(),
        }
    }

    /// Derivative with respect to `s` at `s > 0` (divide by `S` for d/dx).
    pub fn deriv(self, s: f64) -> f64 {
        match self {
            Basis::Const => 0.0,
            Basis::X => 1.0,
            Basis::X2 => 2.0 * s,
            Basis::X3 => 3.0 * s * s,
            Basis::Exp => s.exp(),
            Basis::Ln => 1.0 / s,
            Basis::XExp => (1.0 + s) * s.exp(),
            Basis::XLn => s.ln() + 1.0,
        }
    }

    /// Complexity rank used to break near-ties in model selection (Occam):
    /// 1 < x < ln x < x·ln x < x² < x³ < eˣ < x·eˣ.
    pub fn complexity(self) -> u32 {
        match self {
            Basis::Const => 0,
            Basis::X => 1,
            Basis::Ln => 2,
            Basis::XLn => 3,
            Basis::X2 => 4,
            Basis::X3 => 5,
            Basis::Exp => 6,
            Basis::XExp => 7,
        }
    }

    /// Short name, as reported in fit reports: `1`, `x`, `x^2`, `x^3`,
    /// `exp(x)`, `ln(x)`, `x*exp(x)`, `x*ln(x)` (in the scaled size).
    pub fn name(self) -> &'static str {
        match self {
            Basis::Const => "1",
            Basis::X => "x",
            Basis::X2 => "x^2",
            Basis::X3 => "x^3",
            Basis::Exp => "exp(x)",
            Basis::Ln => "ln(x)",
            Basis::XExp => "x*exp(x)",
            Basis::XLn => "x*ln(x)",
        }
    }

    /// Human-readable term `coef·f(x/scale)` written in the unscaled size `x`
    /// where that is exact (powers of x), keeping `x/S` inside `exp`/`ln`.
    pub fn term(self, coef: f64, scale: f64) -> String {
        let u = format!("(x/{})", fmt_num(scale));
        match self {
            Basis::Const => fmt_num(coef),
            Basis::X => format!("{}·x", fmt_num(coef / scale)),
            Basis::X2 => format!("{}·x²", fmt_num(coef / (scale * scale))),
            Basis::X3 => format!("{}·x³", fmt_num(coef / (scale * scale * scale))),
            Basis::Exp => format!("{}·exp{u}", fmt_num(coef)),
            Basis::Ln => format!("{}·ln{u}", fmt_num(coef)),
            Basis::XExp => format!("{}·x·exp{u}", fmt_num(coef / scale)),
            Basis::XLn => format!("{}·x·ln{u}", fmt_num(coef / scale)),
        }
    }
}

/// The scale `S` for data whose largest size is `hi` (> 0): the smallest
/// power of two `>= hi`, so fitted sizes map into `s ∈ (0, 1]`. Returns 1 for
/// a non-finite or non-positive `hi` (callers validate sizes before).
pub fn scale_for(hi: f64) -> f64 {
    if !(hi.is_finite() && hi > 0.0) {
        return 1.0;
    }
    let e = hi.log2().ceil().clamp(-1074.0, 1023.0) as i32;
    let s = pow2(e);
    // log2 rounding can land one power short; never return a scale below hi.
    if s < hi && e < 1023 { pow2(e + 1) } else { s }
}

/// `2^e` exactly, subnormals included, for `e` in `-1074..=1023`.
fn pow2(e: i32) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074).max(0))
    }
}

/// A number with 4 significant digits, without trailing noise.
pub(crate) fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if v.fract() == 0.0 && a < 1e16 {
        format!("{v:.0}")
    } else if (1e-3..1e5).contains(&a) {
        let digits = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        for b in Basis::ALL {
            for &s in &[0.01, 0.1, 0.5, 0.9, 1.0] {
                let h = 1e-6 * s;
                let fd = (b.value(s + h) - b.value(s - h)) / (2.0 * h);
                let d = b.deriv(s);
                assert!(
                    (fd - d).abs() <= 1e-6 * (1.0 + d.abs()),
                    "{b:?} at {s}: {fd} vs {d}"
                );
            }
        }
    }

    #[test]
    fn indices_follow_all() {
        for (i, b) in Basis::ALL.iter().enumerate() {
            assert_eq!(b.index(), i);
        }
        assert_eq!(Basis::PAPERS.len(), 7);
        assert!(!Basis::PAPERS.contains(&Basis::Const));
    }

    #[test]
    fn scale_is_power_of_two_above_hi() {
        for &hi in &[1.0, 1.5, 2.0, 1000.0, 1024.0, 1025.0, 3e9, 1e-3, 7.0e300] {
            let s = scale_for(hi);
            assert!(s >= hi && s < 2.0 * hi || hi > 8e307, "{hi} -> {s}");
            assert_eq!(s.log2().fract(), 0.0);
        }
        assert_eq!(scale_for(1024.0), 1024.0);
        assert_eq!(scale_for(f64::NAN), 1.0);
        assert_eq!(scale_for(-3.0), 1.0);
        assert_eq!(scale_for(0.0), 1.0);
        let tiny = f64::MIN_POSITIVE / 1e10;
        assert!(scale_for(tiny) >= tiny && scale_for(tiny) < 2.0 * tiny);
        assert_eq!(scale_for(f64::MAX), 2f64.powi(1023));
        assert_eq!(pow2(-1074), f64::from_bits(1));
        assert_eq!(pow2(10), 1024.0);
    }

    #[test]
    fn exp_terms_stay_small_on_scaled_sizes() {
        // Real block sizes, even huge ones, give e^s <= e once scaled.
        for &hi in &[1e3, 1e6, 1e12] {
            let s = hi / scale_for(hi);
            assert!(Basis::XExp.value(s) <= std::f64::consts::E);
        }
    }

    #[test]
    fn terms_are_written_in_x() {
        assert_eq!(Basis::X.term(3000.0, 1000.0), "3·x");
        assert_eq!(Basis::Const.term(2.0, 1000.0), "2");
        assert_eq!(Basis::X2.term(0.5, 1.0), "0.5·x²");
        assert_eq!(Basis::XLn.term(2048.0, 1024.0), "2·x·ln(x/1024)");
        assert_eq!(fmt_num(3.4e-7), "3.400e-7");
        assert_eq!(fmt_num(262144.0), "262144");
        assert_eq!(fmt_num(-2.0), "-2");
        assert_eq!(fmt_num(1.5e6 + 0.5), "1.500e6");
    }
}
