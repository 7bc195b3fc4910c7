//! Straightforward single-threaded reference of the GRN search
//! (`codelets/grn.h`), written independently of the kernels: floating-point
//! entropies computed with `ln` directly from the counts, subsets
//! enumerated by nested recursion, its own colex unranking. The
//! application compares its result with this one.

/// Expression data: `n` genes, `m` samples, values in `0..levels`;
/// `data` holds the predictor matrix then the target matrix, each
/// genes x samples, row-major (the kernels' layout).
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    pub n: usize,
    pub m: usize,
    pub levels: usize,
    pub data: &'a [u8],
}

impl Data<'_> {
    fn pred(&self, g: usize) -> &[u8] {
        &self.data[g * self.m..(g + 1) * self.m]
    }
    fn targ(&self, g: usize) -> &[u8] {
        let off = self.n * self.m;
        &self.data[off + g * self.m..off + (g + 1) * self.m]
    }
}

/// Mean conditional entropy of `target` (next state) given `subset`
/// (current states), normalised to `[0, 1]` (logarithm base `levels`),
/// with the penalty for unobserved instances: `P(x) = (f_x + 1) / (N + m)`,
/// entropy 1 for an unobserved `x`.
pub fn mean_conditional_entropy(d: &Data, subset: &[usize], target: usize) -> f64 {
    entropy_with(d, subset, target, &mut Vec::new())
}

/// [`mean_conditional_entropy`] with a reusable count table.
fn entropy_with(d: &Data, subset: &[usize], target: usize, counts: &mut Vec<usize>) -> f64 {
    let instances = d.levels.pow(subset.len() as u32);
    // counts[x * levels + y]: samples with instance x and next value y.
    counts.clear();
    counts.resize(instances * d.levels, 0);
    let y = d.targ(target);
    for s in 0..d.m {
        // Instance of sample s: the j-th predictor has weight levels^j.
        let mut x = 0;
        for &g in subset.iter().rev() {
            x = x * d.levels + d.pred(g)[s] as usize;
        }
        counts[x * d.levels + y[s] as usize] += 1;
    }
    let denom = (instances + d.m) as f64;
    let ln_levels = (d.levels as f64).ln();
    let mut h = 0.0;
    for row in counts.chunks_exact(d.levels) {
        let fx: usize = row.iter().sum();
        if fx == 0 {
            h += 1.0 / denom;
            continue;
        }
        let mut hx = 0.0;
        for &c in row {
            if c > 0 {
                let p = c as f64 / fx as f64;
                hx -= p * p.ln();
            }
        }
        h += (fx as f64 + 1.0) / denom * (hx / ln_levels);
    }
    h
}

/// Best subset of one target: the lowest entropy, and among (numerically)
/// equal ones the first in enumeration order.
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    pub subset: Vec<usize>,
    pub score: f64,
}

fn visit(n: usize, k: usize, start: usize, cur: &mut Vec<usize>, f: &mut dyn FnMut(&[usize])) {
    if cur.len() == k {
        f(cur);
        return;
    }
    for g in start..n {
        cur.push(g);
        visit(n, k, g + 1, cur, f);
        cur.pop();
    }
}

/// Calls `f` on every `k`-subset of `0..n` (ascending indices).
pub fn for_each_subset(n: usize, k: usize, f: &mut dyn FnMut(&[usize])) {
    visit(n, k, 0, &mut Vec::with_capacity(k), f);
}

/// Exhaustive search for each target of `targets`.
pub fn search(d: &Data, k: usize, targets: &[usize]) -> Vec<Best> {
    targets
        .iter()
        .map(|&t| {
            let mut best = Best {
                subset: Vec::new(),
                score: f64::INFINITY,
            };
            let mut counts = Vec::new();
            for_each_subset(d.n, k, &mut |s| {
                let h = entropy_with(d, s, t, &mut counts);
                if h < best.score {
                    best = Best {
                        subset: s.to_vec(),
                        score: h,
                    };
                }
            });
            best
        })
        .collect()
}

/// `C(n, k)`.
pub fn binom(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    (1..=k).fold(1u64, |acc, i| acc * (n - k + i) / i)
}

/// The subset of colex rank `rank` (`rank = sum_j C(i_j, j+1)`), ascending.
pub fn colex_unrank(mut rank: u64, k: usize) -> Vec<usize> {
    let mut out = vec![0; k];
    for j in (1..=k).rev() {
        let mut c = (j - 1) as u64;
        while binom(c + 1, j as u64) <= rank {
            c += 1;
        }
        out[j - 1] = c as usize;
        rank -= binom(c, j as u64);
    }
    out
}

/// Relative tolerance between the kernels' fixed-point scores and the
/// reference's floating-point ones (the fixed-point rounding is below
/// 1e-9 relative for `m <= 4096`).
pub const SCORE_TOL: f64 = 1e-8;

/// Outcome of comparing a search result with the reference.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Comparison {
    /// Targets compared.
    pub targets: usize,
    /// Targets whose subset is the reference's.
    pub same_subset: usize,
    /// Targets whose subset differs but scores the reference's optimum
    /// within the tolerance (ties).
    pub ties: usize,
    /// Description of the first mismatch, if any.
    pub mismatch: Option<String>,
}

/// Checks, for each `(target, rank, score)` of a search result, that the
/// subset of colex rank `rank` is optimal for the target according to the
/// reference, and that `score` (the result's entropy) equals the
/// reference's entropy of that subset, both within [`SCORE_TOL`].
pub fn compare(d: &Data, k: usize, result: &[(usize, u64, f64)]) -> Comparison {
    let mut cmp = Comparison::default();
    let targets: Vec<usize> = result.iter().map(|r| r.0).collect();
    let reference = search(d, k, &targets);
    for (&(t, rank, score), best) in result.iter().zip(&reference) {
        cmp.targets += 1;
        if rank >= binom(d.n as u64, k as u64) {
            cmp.mismatch
                .get_or_insert(format!("target {t}: no subset (rank {rank})"));
            continue;
        }
        let subset = colex_unrank(rank, k);
        let theirs = mean_conditional_entropy(d, &subset, t);
        let tol = SCORE_TOL * best.score.abs().max(1e-3);
        let problem = if (theirs - score).abs() > tol {
            Some(format!(
                "target {t}: subset {subset:?} reported score {score:.12}, reference {theirs:.12}"
            ))
        } else if theirs > best.score + tol {
            Some(format!(
                "target {t}: subset {subset:?} scores {theirs:.12}, reference best {:?} scores {:.12}",
                best.subset, best.score
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            cmp.mismatch.get_or_insert(p);
        } else if subset == best.subset {
            cmp.same_subset += 1;
        } else {
            cmp.ties += 1;
        }
    }
    cmp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colex_order_matches_enumeration() {
        // Colex order: by largest element, then the next largest, ...
        for k in 1..=3 {
            let mut all = Vec::new();
            for_each_subset(9, k, &mut |s| all.push(s.to_vec()));
            all.sort_by(|a, b| a.iter().rev().cmp(b.iter().rev()));
            assert_eq!(all.len() as u64, binom(9, k as u64));
            for (rank, s) in all.iter().enumerate() {
                assert_eq!(&colex_unrank(rank as u64, k), s, "k={k} rank={rank}");
            }
        }
    }

    #[test]
    fn entropy_limits() {
        // 2 genes, 8 samples, binary. Gene 1's next value copies gene 0:
        // entropy of gene 1 given {0} is only the penalty-free part (0),
        // given {1} (independent) it is high.
        let pred0 = [0u8, 1, 0, 1, 0, 1, 0, 1];
        let pred1 = [0u8, 0, 1, 1, 0, 0, 1, 1];
        let targ0 = [1u8, 0, 1, 0, 0, 1, 1, 0];
        let targ1 = pred0;
        let data: Vec<u8> = [pred0, pred1, targ0, targ1].concat();
        let d = Data {
            n: 2,
            m: 8,
            levels: 2,
            data: &data,
        };
        assert_eq!(mean_conditional_entropy(&d, &[0], 1), 0.0);
        // Given gene 1: each instance has 4 samples, 2 of each value: H=1.
        assert!((mean_conditional_entropy(&d, &[1], 1) - 1.0).abs() < 1e-12);
        // Both instances of {0,1} x 4 values: all 4 instances seen twice,
        // determined: 0.
        assert_eq!(mean_conditional_entropy(&d, &[0, 1], 1), 0.0);
        // An unobserved instance costs 1/(N+m): data with gene 0 always 0.
        let data2: Vec<u8> = [[0u8; 8], pred1, targ0, pred1].concat();
        let d2 = Data { data: &data2, ..d };
        let h = mean_conditional_entropy(&d2, &[0], 1);
        // x=0: f=8, y = pred1 (4/4): H=1, weight 9/10; x=1 unseen: 1/10.
        assert!((h - 1.0).abs() < 1e-12, "{h}");
        let best = search(&d, 1, &[1]);
        assert_eq!(best[0].subset, vec![0]);
    }
}
