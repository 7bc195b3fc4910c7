//! Verification of image kernels (`mandelbrot`, `raytrace`) row by row:
//! single precision legitimately differs from the double-precision
//! reference at a few pixels (orbits near the set's boundary, silhouettes
//! of spheres), a lost or repeated row differs everywhere.

/// At most this fraction of a row's pixels may differ from the reference.
pub const MAX_ROW_MISMATCH: f64 = 0.02;

/// Checks `rows` rows of `cols` pixels; `mismatch(r, c)` says whether
/// pixel (r, c) differs from its reference. Returns (rows failed, pixels
/// differing, the worst row and its mismatching fraction).
pub fn check_rows(
    rows: usize,
    cols: usize,
    mismatch: impl Fn(usize, usize) -> bool,
) -> (usize, usize, (usize, f64)) {
    let mut bad_rows = 0;
    let mut bad_pixels = 0;
    let mut worst = (0, 0.0);
    for r in 0..rows {
        let bad = (0..cols).filter(|&c| mismatch(r, c)).count();
        let frac = bad as f64 / cols as f64;
        bad_pixels += bad;
        if frac > MAX_ROW_MISMATCH {
            bad_rows += 1;
        }
        if frac > worst.1 {
            worst = (r, frac);
        }
    }
    (bad_rows, bad_pixels, worst)
}
