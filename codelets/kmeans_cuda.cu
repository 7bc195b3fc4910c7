/*
 * kmeans_cuda.cu - CUDA version of plb_kmeans_block (kmeans.h), the same
 * algorithm as kmeans.cl. Distances use __fsub_rn / __fmul_rn / __fadd_rn,
 * which nvcc never contracts into FMAs, so labels are bit-identical to the
 * C version; the partial sums are exact (grid inputs), so the reduction
 * order does not matter.
 *
 * Compiled only when nvcc exists (build.rs); called by kmeans_codelet.c
 * when StarPU has CUDA. Not compiled on the development machine (no nvcc).
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <cuda_runtime.h>

#include "kmeans.h"

#define PLB_KMEANS_CUDA_REDUCE 64

__global__ static void plb_kmeans_cuda_assign(const float *points, uint64_t len, uint32_t d,
					      uint32_t k, const float *centroids, int32_t *labels)
{
	uint64_t p = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (p >= len)
		return;
	const float *x = points + p * d;
	float best_dist = 0.0f;
	int32_t best = 0;
	for (uint32_t j = 0; j < k; j++) {
		const float *c = centroids + (uint64_t)j * d;
		float dist = 0.0f;
		for (uint32_t i = 0; i < d; i++) {
			float t = __fsub_rn(x[i], c[i]);
			dist = __fadd_rn(dist, __fmul_rn(t, t));
		}
		if (j == 0 || dist < best_dist) {
			best_dist = dist;
			best = (int32_t)j;
		}
	}
	labels[p] = best;
}

/* One block of PLB_KMEANS_CUDA_REDUCE threads per (centroid, coordinate or
 * count) pair. */
__global__ static void plb_kmeans_cuda_partial(const float *points, uint64_t len, uint32_t d,
					       const int32_t *labels, double *partial)
{
	__shared__ double scratch[PLB_KMEANS_CUDA_REDUCE];
	uint32_t g = blockIdx.x;
	uint32_t j = g / (d + 1), i = g % (d + 1);
	uint32_t l = threadIdx.x;
	double acc = 0.0;
	for (uint64_t p = l; p < len; p += PLB_KMEANS_CUDA_REDUCE)
		if (labels[p] == (int32_t)j)
			acc += i < d ? (double)points[p * d + i] : 1.0;
	scratch[l] = acc;
	__syncthreads();
	for (uint32_t h = PLB_KMEANS_CUDA_REDUCE / 2; h > 0; h /= 2) {
		if (l < h)
			scratch[l] += scratch[l + h];
		__syncthreads();
	}
	if (l == 0)
		partial[(uint64_t)j * (d + 1) + i] += scratch[0];
}

/* Launches both kernels on `stream` (device pointers; points already at the
 * block's first point). Returns the launches' cudaError_t (0 on success);
 * does not synchronise. */
extern "C" int plb_kmeans_cuda_block(uint32_t d, uint32_t k, const float *points,
				     const float *centroids, uint64_t len, int32_t *labels,
				     double *partial, cudaStream_t stream)
{
	const unsigned threads = 256;
	unsigned blocks = (unsigned)((len + threads - 1) / threads);
	plb_kmeans_cuda_assign<<<blocks, threads, 0, stream>>>(points, len, d, k, centroids,
								labels);
	plb_kmeans_cuda_partial<<<k * (d + 1), PLB_KMEANS_CUDA_REDUCE, 0, stream>>>(
		points, len, d, labels, partial);
	return (int)cudaGetLastError();
}
