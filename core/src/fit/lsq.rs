//! Least squares over every subset of (at most 8) candidate columns, with the
//! leverages needed for closed-form leave-one-out (PRESS) residuals.
//!
//! Subsets are enumerated depth first, each one extending its parent by one
//! column, so the work is shared: the new column is orthogonalised against
//! the parent's orthonormal basis by classical Gram–Schmidt with one
//! re-orthogonalisation pass ("twice is enough": orthogonal to working
//! precision, as Householder QR), after which the residual, the leverages
//! `hᵢ = Σ Q[i,j]²` and PRESS follow in O(m) and the coefficients in O(k²).
//! A subset costs O(m·k) instead of the O(m·k²) of a fresh QR, and a column
//! found dependent on its parent's span prunes the whole subtree.
//!
//! The normal equations are avoided on purpose: the candidate columns
//! {1, s, s², s³, eˢ, s·eˢ, …} are nearly collinear on `s ∈ (0, 1]`, and
//! forming `AᵀA` would square condition numbers that are already 10³–10⁶.

/// A column whose component orthogonal to the previous ones is below this
/// fraction of its norm is numerically dependent on them.
const DEP_TOL: f64 = 1e-9;

/// One fitted subset, as passed to the visitor of [`SubsetLsq::enumerate`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a> {
    /// Bit `b` set when column `b` is in the subset.
    pub mask: u8,
    /// Number of columns.
    pub k: usize,
    /// Coefficients, in increasing column order (first `k` entries).
    pub coef: [f64; 8],
    /// Weighted PRESS: Σ (eᵢ / (1 − hᵢ))², `inf` if some hᵢ is ~1.
    pub press: f64,
    /// Residuals `y − A c` (rows as given, i.e. weighted).
    pub resid: &'a [f64],
    /// Leverages.
    pub lev: &'a [f64],
}

/// Workspace for subset least squares on up to 8 columns of length `m`.
#[derive(Debug, Clone)]
pub(crate) struct SubsetLsq {
    m: usize,
    /// Equilibrated columns, column-major, 8·m.
    a: Vec<f64>,
    norms: [f64; 8],
    /// Columns that are usable (finite, non-zero).
    present: u8,
    /// Orthonormal columns by depth, 8·m.
    q: Vec<f64>,
    /// r[d][i]: coefficient of q_i in the column added at depth d.
    r: [[f64; 8]; 8],
    qty: [f64; 8],
    /// Residuals by depth (depth 0 = y), 9·m.
    res: Vec<f64>,
    /// Leverages by depth (depth 0 = 0), 9·m.
    lev: Vec<f64>,
    /// Column index added at each depth.
    idx: [usize; 8],
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl SubsetLsq {
    /// A workspace for `min ‖y − Σ c_b cols[b]‖²` over subsets of `cols`
    /// (rows already multiplied by the square roots of their weights; at
    /// most 8 columns, each as long as `y`). Columns that are not finite or
    /// are all zero are never used.
    pub fn new(cols: &[&[f64]], y: &[f64]) -> SubsetLsq {
        let m = y.len();
        let mut a = vec![0.0; 8 * m];
        let mut norms = [0.0; 8];
        let mut present = 0u8;
        for (b, c) in cols.iter().take(8).enumerate() {
            if c.len() != m {
                continue;
            }
            let n = dot(c, c).sqrt();
            if n.is_finite() && n > 0.0 {
                norms[b] = n;
                present |= 1 << b;
                for (dst, v) in a[b * m..(b + 1) * m].iter_mut().zip(c.iter()) {
                    *dst = v / n;
                }
            }
        }
        let mut res = vec![0.0; 9 * m];
        let ok = y.iter().all(|v| v.is_finite());
        if ok {
            res[..m].copy_from_slice(y);
        } else {
            present = 0;
        }
        SubsetLsq {
            m,
            a,
            norms,
            present,
            q: vec![0.0; 8 * m],
            r: [[0.0; 8]; 8],
            qty: [0.0; 8],
            res,
            lev: vec![0.0; 9 * m],
            idx: [0; 8],
        }
    }

    /// Adds column `b` at depth `d` (0-based) on top of depths `0..d`.
    /// False when it is dependent on them.
    fn push(&mut self, d: usize, b: usize) -> bool {
        let m = self.m;
        let (done, rest) = self.q.split_at_mut(d * m);
        let v = &mut rest[..m];
        v.copy_from_slice(&self.a[b * m..(b + 1) * m]);
        self.r[d] = [0.0; 8];
        for _pass in 0..2 {
            for i in 0..d {
                let qi = &done[i * m..(i + 1) * m];
                let p = dot(qi, v);
                self.r[d][i] += p;
                for (vv, qq) in v.iter_mut().zip(qi) {
                    *vv -= p * qq;
                }
            }
        }
        let nrm = dot(v, v).sqrt();
        if nrm.is_nan() || nrm <= DEP_TOL {
            return false;
        }
        v.iter_mut().for_each(|x| *x /= nrm);
        self.r[d][d] = nrm;
        self.idx[d] = b;
        let (prev, next) = self.res.split_at_mut((d + 1) * m);
        let rd = &prev[d * m..];
        let g = dot(v, rd);
        self.qty[d] = g;
        for ((n, p), qq) in next[..m].iter_mut().zip(rd).zip(v.iter()) {
            *n = p - g * qq;
        }
        let (lprev, lnext) = self.lev.split_at_mut((d + 1) * m);
        for ((n, p), qq) in lnext[..m].iter_mut().zip(&lprev[d * m..]).zip(v.iter()) {
            *n = p + qq * qq;
        }
        true
    }

    /// The node for the columns at depths `0..k`.
    fn node(&self, k: usize, mask: u8) -> Node<'_> {
        let m = self.m;
        let mut c = [0.0; 8];
        for j in (0..k).rev() {
            let mut s = self.qty[j];
            for (d, cd) in c.iter().enumerate().take(k).skip(j + 1) {
                s -= self.r[d][j] * cd;
            }
            c[j] = s / self.r[j][j];
        }
        // Back to the unequilibrated columns, in increasing column order
        // (depth order is increasing column order in both callers).
        for (j, cj) in c.iter_mut().enumerate().take(k) {
            *cj /= self.norms[self.idx[j]];
        }
        let resid = &self.res[k * m..(k + 1) * m];
        let lev = &self.lev[k * m..(k + 1) * m];
        let mut press = 0.0;
        for (r, h) in resid.iter().zip(lev) {
            let den = 1.0 - h;
            if den < 1e-9 {
                press = f64::INFINITY;
                break;
            }
            press += (r / den) * (r / den);
        }
        if c[..k].iter().any(|v| !v.is_finite()) {
            press = f64::NAN;
        }
        Node {
            mask,
            k,
            coef: c,
            press,
            resid,
            lev,
        }
    }

    /// Calls `visit` for every subset of the `allowed` columns with 1 to
    /// `kmax` columns that is numerically independent (in increasing
    /// lexicographic order of column indices; supersets of a dependent
    /// subset are skipped).
    pub fn enumerate(&mut self, allowed: u8, kmax: usize, visit: &mut dyn FnMut(&Node<'_>)) {
        let kmax = kmax.min(8).min(self.m);
        if kmax > 0 {
            self.dfs(0, 0, 0, allowed & self.present, kmax, visit);
        }
    }

    fn dfs(
        &mut self,
        d: usize,
        start: usize,
        mask: u8,
        allowed: u8,
        kmax: usize,
        visit: &mut dyn FnMut(&Node<'_>),
    ) {
        for b in start..8 {
            if allowed & (1 << b) == 0 || !self.push(d, b) {
                continue;
            }
            let mask = mask | (1 << b);
            visit(&self.node(d + 1, mask));
            if d + 1 < kmax {
                self.dfs(d + 1, b + 1, mask, allowed, kmax, visit);
            }
        }
    }

    /// Fits the single subset `mask`; `None` if it is empty, uses a missing
    /// column, has more columns than rows, or is numerically dependent.
    pub fn solve(&mut self, mask: u8) -> Option<Node<'_>> {
        if mask == 0 || mask & !self.present != 0 || mask.count_ones() as usize > self.m {
            return None;
        }
        let mut d = 0;
        for b in 0..8 {
            if mask & (1 << b) != 0 {
                if !self.push(d, b) {
                    return None;
                }
                d += 1;
            }
        }
        Some(self.node(d, mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_fit(x: &[f64], y: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let (sx, sy) = (x.iter().sum::<f64>(), y.iter().sum::<f64>());
        let sxx: f64 = x.iter().map(|v| v * v).sum();
        let sxy: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
        let b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        ((sy - b * sx) / n, b)
    }

    #[test]
    fn recovers_line_and_press_matches_brute_force() {
        let x = [1.0, 2.0, 3.0, 5.0, 8.0];
        let y = [2.9, 5.2, 6.8, 11.1, 17.2];
        let one = [1.0; 5];
        let mut lsq = SubsetLsq::new(&[&one, &x], &y);
        let node = lsq.solve(0b11).unwrap();
        let (a, b) = line_fit(&x, &y);
        assert!((node.coef[0] - a).abs() < 1e-12 && (node.coef[1] - b).abs() < 1e-12);
        let press = node.press;
        let sse: f64 = node.resid.iter().map(|r| r * r).sum();
        let mut brute = 0.0;
        for out in 0..5 {
            let xs: Vec<f64> = (0..5).filter(|&i| i != out).map(|i| x[i]).collect();
            let ys: Vec<f64> = (0..5).filter(|&i| i != out).map(|i| y[i]).collect();
            let (a, b) = line_fit(&xs, &ys);
            let e = y[out] - a - b * x[out];
            brute += e * e;
        }
        assert!((press - brute).abs() < 1e-10 * brute, "{press} {brute}");
        assert!(sse < press);
    }

    #[test]
    fn enumeration_matches_single_solves() {
        // Every subset of 4 columns on 7 rows, enumerated vs solved alone.
        let x: Vec<f64> = (1..=7).map(|i| i as f64 / 7.0).collect();
        let cols: Vec<Vec<f64>> = vec![
            vec![1.0; 7],
            x.clone(),
            x.iter().map(|v| v * v).collect(),
            x.iter().map(|v| v.ln()).collect(),
        ];
        let y: Vec<f64> = x.iter().map(|v| 1.0 + v.exp() + 0.01 * v.sin()).collect();
        let refs: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
        let mut all = SubsetLsq::new(&refs, &y);
        let mut seen = Vec::new();
        all.enumerate(0b1111, 3, &mut |n| {
            seen.push((n.mask, n.k, n.coef, n.press))
        });
        // C(4,1) + C(4,2) + C(4,3) = 14 subsets.
        assert_eq!(seen.len(), 14);
        for (mask, k, coef, press) in seen {
            assert_eq!(mask.count_ones() as usize, k);
            let mut one = SubsetLsq::new(&refs, &y);
            let n = one.solve(mask).unwrap();
            for (a, b) in n.coef.iter().zip(&coef).take(k) {
                assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()));
            }
            assert!((n.press - press).abs() <= 1e-9 * press);
        }
    }

    #[test]
    fn rejects_dependent_and_underdetermined() {
        let x = [1.0, 2.0, 3.0];
        let x2 = [2.0, 4.0, 6.0];
        let y = [1.0, 2.0, 3.0];
        let zero = [0.0; 3];
        let nan = [f64::NAN, 1.0, 2.0];
        let one = [1.0; 3];
        let sq = [1.0, 4.0, 9.0];
        let mut lsq = SubsetLsq::new(&[&x, &x2, &zero, &nan, &one, &sq], &y);
        assert!(lsq.solve(0b11).is_none(), "dependent");
        assert!(lsq.solve(0b100).is_none(), "zero column");
        assert!(lsq.solve(0b1000).is_none(), "NaN column");
        assert!(lsq.solve(0).is_none());
        // Square system: exact fit, leverages 1, PRESS infinite.
        let n = lsq.solve(0b110001).unwrap();
        assert!(n.press.is_infinite());
        assert!(n.lev.iter().all(|h| (h - 1.0).abs() < 1e-12));
        let mut count = 0;
        lsq.enumerate(0xff, 8, &mut |_| count += 1);
        // Usable: x, x2 (dependent on x), one, sq; never x with x2.
        // {x},{x2},{one},{sq},{x,one},{x,sq},{x2,one},{x2,sq},{one,sq},
        // {x,one,sq},{x2,one,sq} = 11.
        assert_eq!(count, 11);
        let mut bad = SubsetLsq::new(&[&x], &[1.0, f64::INFINITY, 0.0]);
        assert!(bad.solve(1).is_none());
    }
}
