//! The Mandelbrot image of `plb app mandelbrot`: region, iteration cap,
//! the escape count of a pixel and the cost of each row.

/// Iteration cap (the codelets use the same constant).
pub const MAX_ITER: u32 = 1024;
/// The region: x in [X0, X0 + SPAN), y in [Y0, Y0 + SPAN).
pub const X0: f64 = -2.0;
pub const Y0: f64 = -1.3;
pub const SPAN: f64 = 2.6;

/// Iterations before the orbit of `c = cx + i·cy` leaves the disc of
/// radius 2 (`MAX_ITER` if it never does).
pub fn escape(cx: f64, cy: f64) -> u32 {
    let (mut x, mut y) = (0.0f64, 0.0f64);
    let mut it = 0;
    while it < MAX_ITER && x * x + y * y <= 4.0 {
        let xt = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = xt;
        it += 1;
    }
    it
}

/// The point of pixel (`row`, `col`) of a `rows × cols` image (pixel
/// centres).
pub fn point(row: usize, col: usize, rows: usize, cols: usize) -> (f64, f64) {
    (
        X0 + (col as f64 + 0.5) * SPAN / cols as f64,
        Y0 + (row as f64 + 0.5) * SPAN / rows as f64,
    )
}

/// The value `plb app mandelbrot` stores for a pixel: iterations + 1 (so
/// that no computed pixel is 0).
pub fn pixel(row: usize, col: usize, rows: usize, cols: usize) -> u32 {
    let (cx, cy) = point(row, col, rows, cols);
    escape(cx, cy) + 1
}

/// The value the codelets store for pixel (`row`, `col`) of a `size ×
/// size` image, computed the way they compute it: single precision, the
/// same operations in the same order (no fused multiply-add). The CPU
/// codelet matches it exactly; OpenCL may fuse and differ near the
/// boundary.
pub fn pixel_f32(row: usize, col: usize, size: usize) -> u32 {
    let step = SPAN as f32 / size as f32;
    let cx = X0 as f32 + (col as f32 + 0.5) * step;
    let cy = Y0 as f32 + (row as f32 + 0.5) * step;
    let (mut x, mut y) = (0.0f32, 0.0f32);
    let mut it = 0;
    while it < MAX_ITER && x * x + y * y <= 4.0 {
        let xt = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = xt;
        it += 1;
    }
    it + 1
}

/// The cost of each row of a `rows × cols` image: its total iterations
/// (one iteration is the kernel's unit of work; rows through the set cost
/// up to `MAX_ITER` per pixel, rows above it a few).
pub fn row_costs(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| (0..cols).map(|c| f64::from(pixel(r, c, rows, cols))).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_points() {
        assert_eq!(escape(0.0, 0.0), MAX_ITER);
        assert_eq!(escape(-1.0, 0.0), MAX_ITER);
        assert_eq!(escape(-0.5, 0.5), MAX_ITER);
        assert_eq!(escape(1.0, 1.0), 2);
        assert!(escape(0.5, 0.5) < 10);
    }

    #[test]
    fn rows_through_the_set_cost_far_more() {
        let costs = row_costs(64, 64);
        let max = costs.iter().copied().fold(0.0, f64::max);
        let min = costs.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(max / min > 20.0, "{max} / {min}");
        // Symmetric about the real axis (the region is).
        assert!((costs[10] - costs[53]).abs() <= 0.02 * costs[10]);
    }
}
