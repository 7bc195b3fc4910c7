/*
 * grn_cuda.cu - CUDA version of plb_grn_block (grn.h), the same algorithm
 * as grn.cl: one thread per target gene scans the block's predictor
 * subsets in colex order and merges its target's best (score, rank) into
 * best[t]; thread 0 adds len to the count in best[n]. Integer arithmetic
 * only, so results are bit-identical to the C version.
 *
 * Compiled only when nvcc exists (build.rs); called by grn_codelet.c when
 * StarPU has CUDA. Not compiled on the development machine (no nvcc).
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <cuda_runtime.h>

#include "grn.h"

__device__ static uint64_t grn_binom(uint64_t n, uint32_t k)
{
	if (k > n)
		return 0;
	uint64_t r = 1;
	for (uint32_t i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

__global__ static void plb_grn_cuda_kernel(const uint8_t *data, const int64_t *flogf,
					   struct plb_grn_best *best, uint32_t n, uint32_t m,
					   uint32_t levels, uint32_t k, int64_t penalty,
					   uint64_t first, uint64_t len)
{
	uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= n)
		return;
	const uint8_t *pred = data;
	const uint8_t *y = data + (uint64_t)n * m + (uint64_t)t * m;
	uint32_t ninst = 1;
	for (uint32_t j = 0; j < k; j++)
		ninst *= levels;
	uint32_t ncells = ninst * levels;
	uint32_t idx[PLB_GRN_MAX_K];
	uint32_t hist[PLB_GRN_MAX_CELLS];

	uint64_t rank = first;
	for (uint32_t j = k; j >= 1; j--) {
		uint64_t c = j - 1;
		while (grn_binom(c + 1, j) <= rank)
			c++;
		idx[j - 1] = (uint32_t)c;
		rank -= grn_binom(c, j);
	}

	int64_t best_score = best[t].score;
	uint64_t best_rank = best[t].rank;
	for (uint64_t r = first; r < first + len; r++) {
		for (uint32_t c = 0; c < ncells; c++)
			hist[c] = 0;
		for (uint32_t s = 0; s < m; s++) {
			uint32_t x = 0;
			for (uint32_t j = k; j-- > 0;)
				x = x * levels + pred[(uint64_t)idx[j] * m + s];
			hist[x * levels + y[s]]++;
		}
		int64_t score = 0;
		for (uint32_t x = 0; x < ninst; x++) {
			uint32_t fx = 0;
			for (uint32_t v = 0; v < levels; v++)
				fx += hist[x * levels + v];
			if (fx == 0) {
				score += penalty;
				continue;
			}
			int64_t d = flogf[fx];
			for (uint32_t v = 0; v < levels; v++)
				d -= flogf[hist[x * levels + v]];
			score += ((int64_t)(fx + 1) * d) / (int64_t)fx;
		}
		if (score < best_score || (score == best_score && r < best_rank)) {
			best_score = score;
			best_rank = r;
		}
		uint32_t j = 0;
		while (j + 1 < k && idx[j] + 1 == idx[j + 1])
			j++;
		idx[j]++;
		for (uint32_t i = 0; i < j; i++)
			idx[i] = i;
	}
	best[t].score = best_score;
	best[t].rank = best_rank;
	if (t == 0)
		best[n].rank += len;
}

/* Launches the kernel on `stream` (device pointers; p in host memory).
 * Returns the launch's cudaError_t (0 on success); does not synchronise. */
extern "C" int plb_grn_cuda_block(const struct plb_grn_problem *p, const uint8_t *data,
				  const int64_t *flogf, uint64_t first, uint64_t len,
				  struct plb_grn_best *best, cudaStream_t stream)
{
	const unsigned threads = 64;
	unsigned blocks = (p->n + threads - 1) / threads;
	plb_grn_cuda_kernel<<<blocks, threads, 0, stream>>>(data, flogf, best, p->n, p->m,
							     p->levels, p->k, p->penalty, first, len);
	return (int)cudaGetLastError();
}
