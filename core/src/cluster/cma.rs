//! The Communication Minimising Algorithm (CMA): arranges the nodes' areas
//! as rectangles tiling the `G × G` grid of `b × b` blocks, column by
//! column, so that the sum of half-perimeters `H = Σ (m_i + n_i)` (the
//! volume a node of a blocked matrix multiplication receives per pivot
//! step, in blocks) is smallest (Beaumont, Boudet, Rastello, Robert, IEEE
//! TPDS 12(10), 2001: the column-based restriction).
//!
//! On the unit square, a column of `k` nodes of total area `A` has width
//! `A` and contributes `k·A + 1` to `H`. With the areas sorted, an optimal
//! column-based arrangement puts consecutive nodes in each column, so a
//! dynamic programme over the sorted areas finds it in `O(q²)`. The real
//! arrangement is then made of whole blocks: column widths and the heights
//! inside each column are rounded (largest remainders) so that widths sum
//! to `G` and the heights of each column sum to `G`; a node's area `m·n`
//! may then differ slightly from the `w` it was asked for, and the
//! partitioning algorithms use the areas actually arranged.

use std::fmt;

/// A node's rectangle of blocks: rows `[row, row + rows)`, columns
/// `[col, col + cols)` of the `G × G` block grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub row: u64,
    pub col: u64,
    /// `m_i`, in blocks.
    pub rows: u64,
    /// `n_i`, in blocks.
    pub cols: u64,
}

impl Rect {
    /// `m_i · n_i`, in blocks.
    pub fn area(&self) -> u64 {
        self.rows * self.cols
    }
    /// `m_i + n_i`.
    pub fn half_perimeter(&self) -> u64 {
        self.rows + self.cols
    }
    /// Whether block `(r, c)` is in the rectangle.
    pub fn contains(&self, r: u64, c: u64) -> bool {
        r >= self.row && r < self.row + self.rows && c >= self.col && c < self.col + self.cols
    }
}

/// Why no arrangement exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmaError {
    /// Fewer blocks than nodes, or a grid too narrow for the columns the
    /// nodes need.
    GridTooSmall { nodes: usize, grid: u64 },
    /// The areas do not sum to `G²`.
    AreaMismatch { sum: u64, grid: u64 },
}

impl fmt::Display for CmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmaError::GridTooSmall { nodes, grid } => write!(
                f,
                "a {grid} x {grid} block grid is too small for {nodes} nodes (raise N or lower b)"
            ),
            CmaError::AreaMismatch { sum, grid } => {
                write!(f, "areas sum to {sum}, not {grid}^2 = {}", grid * grid)
            }
        }
    }
}

impl std::error::Error for CmaError {}

/// Sum of half-perimeters of an arrangement.
pub fn half_perimeters(rects: &[Rect]) -> u64 {
    rects.iter().map(Rect::half_perimeter).sum()
}

/// Largest-remainder rounding of `exact` (non-negative) to whole numbers
/// summing to `total`, each at least `min` (when `min · len <= total`).
fn round_sum(exact: &[f64], total: u64, min: u64) -> Vec<u64> {
    let n = exact.len();
    let mut x: Vec<u64> = exact.iter().map(|e| (e.floor() as u64).max(min)).collect();
    let mut sum: u64 = x.iter().sum();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    let mut i = 0;
    while sum < total && n > 0 {
        x[order[i % n]] += 1;
        sum += 1;
        i += 1;
    }
    while sum > total {
        // Take from the element most above its exact value.
        let Some(j) = (0..n)
            .filter(|&j| x[j] > min)
            .max_by(|&a, &b| (x[a] as f64 - exact[a]).total_cmp(&(x[b] as f64 - exact[b])))
        else {
            break;
        };
        x[j] -= 1;
        sum -= 1;
    }
    x
}

/// The column-based arrangement of `areas` (blocks, summing to `G²`) on
/// the `grid × grid` block grid minimising `Σ (m_i + n_i)`; rectangles in
/// the order of `areas`.
pub fn arrange(areas: &[u64], grid: u64) -> Result<Vec<Rect>, CmaError> {
    let q = areas.len();
    let sum: u64 = areas.iter().sum();
    if sum != grid * grid {
        return Err(CmaError::AreaMismatch { sum, grid });
    }
    if q == 0 {
        return Ok(Vec::new());
    }
    // Sorted by decreasing area (ties by index: deterministic); nodes
    // given nothing keep an empty rectangle.
    let mut order: Vec<usize> = (0..q).filter(|&i| areas[i] > 0).collect();
    order.sort_by(|&a, &b| areas[b].cmp(&areas[a]).then(a.cmp(&b)));
    let total = sum as f64;
    let a: Vec<f64> = order.iter().map(|&i| areas[i] as f64 / total).collect();
    let all = q;
    let q = order.len();
    let mut prefix = vec![0.0; q + 1];
    for i in 0..q {
        prefix[i + 1] = prefix[i] + a[i];
    }
    // best[j]: least H of the first j areas; cut[j]: where its last column starts.
    let g = grid as usize;
    let mut best = vec![f64::INFINITY; q + 1];
    let mut cut = vec![0usize; q + 1];
    best[0] = 0.0;
    for j in 1..=q {
        let lo = j.saturating_sub(g); // at most G nodes in a column
        for i in lo..j {
            let k = (j - i) as f64;
            let cost = best[i] + k * (prefix[j] - prefix[i]) + 1.0;
            if cost < best[j] {
                best[j] = cost;
                cut[j] = i;
            }
        }
    }
    let mut columns = Vec::new();
    let mut j = q;
    while j > 0 {
        columns.push((cut[j], j));
        j = cut[j];
    }
    columns.reverse();
    if columns.len() > g {
        return Err(CmaError::GridTooSmall { nodes: q, grid });
    }
    let col_area: Vec<f64> = columns
        .iter()
        .map(|&(i, j)| (prefix[j] - prefix[i]) * total)
        .collect();
    let widths = round_sum(
        &col_area.iter().map(|c| c / grid as f64).collect::<Vec<_>>(),
        grid,
        1,
    );
    let mut rects = vec![
        Rect {
            row: 0,
            col: 0,
            rows: 0,
            cols: 0
        };
        all
    ];
    let mut col0 = 0;
    for (c, &(i, j)) in columns.iter().enumerate() {
        let width = widths[c];
        // At most G members (the programme's bound on a column).
        let members = &order[i..j];
        let heights = round_sum(
            &members
                .iter()
                .map(|&m| areas[m] as f64 / width as f64)
                .collect::<Vec<_>>(),
            grid,
            1,
        );
        let mut row0 = 0;
        for (&m, &h) in members.iter().zip(&heights) {
            rects[m] = Rect {
                row: row0,
                col: col0,
                rows: h,
                cols: width,
            };
            row0 += h;
        }
        col0 += width;
    }
    Ok(rects)
}

/// The naive one-dimensional arrangement: every node a full-height strip
/// of `round(w_i / G)` columns (at least one), for comparison with
/// [`arrange`].
pub fn strips(areas: &[u64], grid: u64) -> Result<Vec<Rect>, CmaError> {
    let q = areas.len();
    if q as u64 > grid {
        return Err(CmaError::GridTooSmall { nodes: q, grid });
    }
    let exact: Vec<f64> = areas.iter().map(|&w| w as f64 / grid as f64).collect();
    let widths = round_sum(&exact, grid, 1);
    let mut col = 0;
    Ok(widths
        .iter()
        .map(|&w| {
            let r = Rect {
                row: 0,
                col,
                rows: grid,
                cols: w,
            };
            col += w;
            r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_tiling(rects: &[Rect], grid: u64) {
        let mut seen = vec![0u8; (grid * grid) as usize];
        for r in rects {
            assert!(r.rows >= 1 && r.cols >= 1, "{r:?}");
            for i in r.row..r.row + r.rows {
                for j in r.col..r.col + r.cols {
                    seen[(i * grid + j) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "not a tiling: {rects:?}");
    }

    #[test]
    fn equal_areas_on_a_square_grid_make_a_square_arrangement() {
        let rects = arrange(&[16; 4], 8).unwrap();
        check_tiling(&rects, 8);
        assert!(rects.iter().all(|r| r.rows == 4 && r.cols == 4));
        assert_eq!(half_perimeters(&rects), 32);
    }

    #[test]
    fn one_large_node_gets_its_own_column() {
        // 3/4 of the grid and three small nodes.
        let rects = arrange(&[48, 6, 5, 5], 8).unwrap();
        check_tiling(&rects, 8);
        assert_eq!(rects[0].rows, 8);
        assert_eq!(rects[0].cols, 6);
        assert!(rects[1..].iter().all(|r| r.cols == 2));
    }

    #[test]
    fn cma_beats_strips_and_never_loses() {
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..200 {
            let q = 2 + rng.below(20) as usize;
            let grid = 32u64;
            let mut w: Vec<u64> = (0..q).map(|_| 1 + rng.below(100)).collect();
            let s: u64 = w.iter().sum();
            let mut scaled: Vec<u64> = w.iter().map(|&x| (x * grid * grid / s).max(1)).collect();
            let diff = grid * grid - scaled.iter().sum::<u64>().min(grid * grid);
            scaled[0] += diff;
            let over = scaled.iter().sum::<u64>().saturating_sub(grid * grid);
            scaled[0] -= over;
            w = scaled;
            let c = arrange(&w, grid).unwrap();
            check_tiling(&c, grid);
            // Whole blocks: the areas arranged differ from the ones asked
            // by less than a row or column per node, in total.
            let dev: u64 = c.iter().zip(&w).map(|(r, &wi)| r.area().abs_diff(wi)).sum();
            assert!(
                dev <= half_perimeters(&c),
                "deviation {dev} for {w:?}: {c:?}"
            );
            let s = strips(&w, grid).unwrap();
            check_tiling(&s, grid);
            assert!(half_perimeters(&c) <= half_perimeters(&s));
        }
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert_eq!(
            arrange(&[1, 1], 2),
            Err(CmaError::AreaMismatch { sum: 2, grid: 2 })
        );
        assert_eq!(
            arrange(&[1; 5], 2),
            Err(CmaError::AreaMismatch { sum: 5, grid: 2 })
        );
        // Nodes given nothing get an empty rectangle.
        let r = arrange(&[0, 4, 0], 2).unwrap();
        assert_eq!(r[0].area() + r[2].area(), 0);
        assert_eq!(
            r[1],
            Rect {
                row: 0,
                col: 0,
                rows: 2,
                cols: 2
            }
        );
        assert!(strips(&[3, 3, 3], 2).is_err());
    }
}
