//! Straightforward sequential k-means (Lloyd) reference, written
//! independently of the kernels (`codelets/kmeans.h`) but with the same
//! arithmetic: squared distances accumulated in `f32` in dimension order,
//! ties to the lowest centroid, sums in `f64`, centroid `(sum / count) as
//! f32`, an empty cluster keeps its centroid. The application compares its
//! assignments with these.

/// Result of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Lloyd {
    /// Cluster of each point after the last assignment step.
    pub labels: Vec<i32>,
    /// Centroids after the last update.
    pub centroids: Vec<f32>,
    /// Assignment steps performed.
    pub iterations: usize,
    /// Whether the last assignment equalled the previous one.
    pub converged: bool,
}

/// Nearest centroid of `x` (`d` coordinates) among the `k` rows of
/// `centroids`.
pub fn nearest(x: &[f32], centroids: &[f32], d: usize) -> i32 {
    let mut best = 0;
    let mut best_dist = f32::INFINITY;
    for (j, c) in centroids.chunks_exact(d).enumerate() {
        let mut dist = 0.0f32;
        for i in 0..d {
            let t = x[i] - c[i];
            dist += t * t;
        }
        if j == 0 || dist < best_dist {
            best = j as i32;
            best_dist = dist;
        }
    }
    best
}

/// New centroids from the assignment (empty clusters keep theirs).
pub fn update(points: &[f32], d: usize, labels: &[i32], centroids: &mut [f32]) {
    let k = centroids.len() / d;
    let mut sums = vec![0.0f64; k * d];
    let mut counts = vec![0u64; k];
    for (x, &l) in points.chunks_exact(d).zip(labels) {
        let l = l as usize;
        counts[l] += 1;
        for i in 0..d {
            sums[l * d + i] += f64::from(x[i]);
        }
    }
    for j in 0..k {
        if counts[j] > 0 {
            for i in 0..d {
                centroids[j * d + i] = (sums[j * d + i] / counts[j] as f64) as f32;
            }
        }
    }
}

/// Lloyd's algorithm from `init`: at most `max_iter` assignment steps;
/// stops after an assignment equal to the previous one (`converged`).
/// Each step but a converged one is followed by a centroid update.
pub fn lloyd(points: &[f32], d: usize, init: &[f32], max_iter: usize) -> Lloyd {
    let mut centroids = init.to_vec();
    let mut labels: Vec<i32> = Vec::new();
    let mut iterations = 0;
    let mut converged = false;
    while iterations < max_iter {
        let next: Vec<i32> = points
            .chunks_exact(d)
            .map(|x| nearest(x, &centroids, d))
            .collect();
        iterations += 1;
        if next == labels {
            converged = true;
            break;
        }
        labels = next;
        update(points, d, &labels, &mut centroids);
    }
    Lloyd {
        labels,
        centroids,
        iterations,
        converged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_obvious_clusters() {
        let points = [0.0f32, 0.0, 1.0, 0.0, 10.0, 10.0, 11.0, 10.0];
        let r = lloyd(&points, 2, &[0.0, 0.0, 1.0, 0.0], 10);
        assert_eq!(r.labels, vec![0, 0, 1, 1]);
        assert_eq!(r.centroids, vec![0.5, 0.0, 10.5, 10.0]);
        assert!(r.converged);
        // Steps: (0,1,1,1) -> update -> (0,0,1,1) -> update -> same: 3.
        assert_eq!(r.iterations, 3);
    }

    #[test]
    fn ties_go_to_the_lowest_centroid_and_empty_clusters_stay() {
        // The point is equidistant from both centroids.
        assert_eq!(nearest(&[1.0, 0.0], &[0.0, 0.0, 2.0, 0.0], 2), 0);
        let mut c = vec![0.0f32, 0.0, 100.0, 100.0];
        update(&[1.0, 1.0, 3.0, 3.0], 2, &[0, 0], &mut c);
        assert_eq!(c, vec![2.0, 2.0, 100.0, 100.0]);
    }

    #[test]
    fn stops_at_the_iteration_limit() {
        let points = [0.0f32, 1.0, 2.0, 3.0, 10.0];
        let r = lloyd(&points, 1, &[0.0, 1.0], 1);
        assert_eq!(r.iterations, 1);
        assert!(!r.converged);
        assert_eq!(r.labels, vec![0, 1, 1, 1, 1]);
    }
}
