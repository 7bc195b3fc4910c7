/*
 * kmeans.c - k-means kernels (see kmeans.h). StarPU-free.
 *
 * License: LGPL-2.1-or-later.
 */
#include "kmeans.h"

/* Distances must not be contracted into FMAs (bit-identical results on
 * every device, kmeans.h): GCC and Clang each honour one of these. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <string.h>

int plb_kmeans_check(uint64_t n, uint32_t d, uint32_t k)
{
	if (d < 1 || d > PLB_KMEANS_MAX_D || k < 1 || k > PLB_KMEANS_MAX_K)
		return -1;
	if (n < k || n > PLB_KMEANS_MAX_N)
		return -1;
	return 0;
}

void plb_kmeans_block(uint32_t d, uint32_t k, const float *points,
		      const float *centroids, uint64_t len, int32_t *labels,
		      double *partial)
{
	/* Centroids transposed (ct[i*k + j]) so that the distance loop runs
	 * over the centroids with unit stride and vectorises; each dist[j]
	 * still accumulates in dimension order. */
	float ct[PLB_KMEANS_MAX_D * PLB_KMEANS_MAX_K];
	float dist[PLB_KMEANS_MAX_K];
	for (uint32_t j = 0; j < k; j++)
		for (uint32_t i = 0; i < d; i++)
			ct[i * k + j] = centroids[j * d + i];

	for (uint64_t p = 0; p < len; p++) {
		const float *x = points + p * d;
		for (uint32_t j = 0; j < k; j++)
			dist[j] = 0.0f;
		for (uint32_t i = 0; i < d; i++) {
			const float xi = x[i];
			const float *c = ct + i * k;
			for (uint32_t j = 0; j < k; j++) {
				const float t = xi - c[j];
				dist[j] += t * t;
			}
		}
		uint32_t best = 0;
		for (uint32_t j = 1; j < k; j++)
			if (dist[j] < dist[best])
				best = j;
		labels[p] = (int32_t)best;
		double *ps = partial + (size_t)best * (d + 1);
		for (uint32_t i = 0; i < d; i++)
			ps[i] += (double)x[i];
		ps[d] += 1.0;
	}
}

void plb_kmeans_add(uint32_t d, uint32_t k, double *acc, const double *part)
{
	for (size_t i = 0; i < (size_t)k * (d + 1); i++)
		acc[i] += part[i];
}

uint32_t plb_kmeans_update(uint32_t d, uint32_t k, const double *sums,
			   float *centroids)
{
	uint32_t empty = 0;
	for (uint32_t j = 0; j < k; j++) {
		const double *s = sums + (size_t)j * (d + 1);
		if (s[d] == 0.0) {
			empty++;
			continue;
		}
		for (uint32_t i = 0; i < d; i++)
			centroids[j * d + i] = (float)(s[i] / s[d]);
	}
	return empty;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *state)
{
	return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

static uint64_t uniform(uint64_t *state, uint64_t bound)
{
	/* 128-bit multiply-shift: unbiased enough, no division. */
	return (uint64_t)(((unsigned __int128)splitmix64(state) * bound) >> 64);
}

static float on_grid(double v)
{
	if (v < -256.0)
		v = -256.0;
	if (v > 256.0)
		v = 256.0;
	return (float)(nearbyint(v / PLB_KMEANS_GRID) * PLB_KMEANS_GRID);
}

int plb_kmeans_generate(uint64_t seed, uint64_t n, uint32_t d, uint32_t k,
			float *points, float *init)
{
	if (plb_kmeans_check(n, d, k) != 0)
		return -1;
	uint64_t st = seed ^ 0xBB67AE8584CAA73Bull;
	double centre[PLB_KMEANS_MAX_K * PLB_KMEANS_MAX_D];
	for (uint32_t i = 0; i < k * d; i++)
		centre[i] = -192.0 + 384.0 * uniform01(&st);
	for (uint64_t p = 0; p < n; p++) {
		const double *c = centre + uniform(&st, k) * d;
		for (uint32_t i = 0; i < d; i++) {
			/* Box-Muller, one normal deviate per pair of uniforms. */
			double u1 = 1.0 - uniform01(&st), u2 = uniform01(&st);
			double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
			points[p * d + i] = on_grid(c[i] + 24.0 * z);
		}
	}
	/* k distinct points: a partial Fisher-Yates over indices would need
	 * n words; rejection of repeats is enough for k <= 64. */
	uint64_t chosen[PLB_KMEANS_MAX_K];
	for (uint32_t j = 0; j < k; j++) {
		for (;;) {
			uint64_t c = uniform(&st, n);
			int dup = 0;
			for (uint32_t i = 0; i < j; i++)
				dup |= chosen[i] == c;
			if (!dup) {
				chosen[j] = c;
				break;
			}
		}
		memcpy(init + (size_t)j * d, points + chosen[j] * d, d * sizeof(float));
	}
	return 0;
}
