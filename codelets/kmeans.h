/*
 * kmeans.h - k-means (Lloyd) kernels, StarPU-free.
 *
 * Points: n points of d float coordinates, row-major, contiguous
 * (point p at points[p*d .. p*d + d)). Centroids: k x d floats, row-major.
 *
 * Unit of work: one point. A block of len points computes, for each point,
 * its nearest centroid (squared Euclidean distance accumulated in float in
 * dimension order, ties to the lowest centroid index) and adds the block's
 * partial sums into partial[]: partial[j*(d+1) + i] += sum of coordinate i
 * over the block's points assigned to centroid j (i < d),
 * partial[j*(d+1) + d] += their count, in double (the caller zeroes it; a
 * block computed twice into the same array shows in the counts). The
 * driver adds the blocks' partial sums and calls plb_kmeans_update.
 *
 * Exactness: plb_kmeans_generate puts every coordinate on the grid of
 * multiples of 2^-12 in [-256, 256], so every partial sum of up to 2^24
 * points is exact in double: the sums, hence the new centroids, do not
 * depend on how the points are split into blocks, nor on the order in which
 * a device adds them. Distances use float +, -, * only, with contraction
 * into FMA disabled (-ffp-contract=off, FP_CONTRACT OFF, --fmad=false), so
 * every implementation computes bit-identical distances and assignments.
 *
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_KMEANS_H
#define PLB_KMEANS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLB_KMEANS_MAX_K 64
#define PLB_KMEANS_MAX_D 32
/* Largest n for which the partial sums stay exact. */
#define PLB_KMEANS_MAX_N (1u << 24)
/* Coordinates are multiples of this. */
#define PLB_KMEANS_GRID 0x1.0p-12

/* 0 if d, k, n are supported, -1 otherwise. */
int plb_kmeans_check(uint64_t n, uint32_t d, uint32_t k);

/* What a task's plb_app_task.params points to (kmeans_codelet.c). */
struct plb_kmeans_params {
	uint32_t d;
	uint32_t k;
};

/*
 * Assigns the len points at `points` (already offset to the block's first
 * point) to their nearest centroid: labels[0..len) (written), and adds the
 * block's sums and counts into partial[0..k*(d+1)). Allocation-free.
 */
void plb_kmeans_block(uint32_t d, uint32_t k, const float *points,
		      const float *centroids, uint64_t len, int32_t *labels,
		      double *partial);

/* acc[0..k*(d+1)) += part[0..k*(d+1)). */
void plb_kmeans_add(uint32_t d, uint32_t k, double *acc, const double *part);

/* New centroids from summed partials: centroid j = (float)(sum / count),
 * unchanged when its count is 0. Returns the number of empty clusters. */
uint32_t plb_kmeans_update(uint32_t d, uint32_t k, const double *sums,
			   float *centroids);

/*
 * Deterministic input: k true centres uniform in [-192, 192]^d, each point
 * near a uniformly chosen centre (Gaussian, sigma 24), clamped to
 * [-256, 256] and rounded to the grid; the initial centroids are k distinct
 * points chosen at random. points: n*d floats, init: k*d floats.
 * Returns -1 (nothing written) if unsupported or n < k.
 */
int plb_kmeans_generate(uint64_t seed, uint64_t n, uint32_t d, uint32_t k,
			float *points, float *init);

#ifdef __cplusplus
}
#endif

#endif /* PLB_KMEANS_H */
