/*
 * grn.cl - OpenCL version of plb_grn_block (grn.h): one work-item per
 * target gene scans the block's predictor subsets [first, first + len) in
 * colex order and merges its target's best (score, rank) into best[t];
 * work-item 0 also adds len to the count in best[n]. Integer
 * arithmetic only (the fixed-point score of grn.h), so the results are
 * bit-identical to the C version on any device.
 *
 * License: LGPL-2.1-or-later.
 */

#define PLB_GRN_MAX_K 3
#define PLB_GRN_MAX_CELLS 256

typedef struct {
	long score;
	ulong rank;
} plb_grn_best;

static ulong grn_binom(ulong n, uint k)
{
	if (k > n)
		return 0;
	ulong r = 1;
	for (uint i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

__kernel void plb_grn_block(__global const uchar *data,
			    __global const long *flogf,
			    __global plb_grn_best *best,
			    uint n, uint m, uint levels, uint k, long penalty,
			    ulong first, ulong len)
{
	uint t = get_global_id(0);
	if (t >= n)
		return;
	__global const uchar *pred = data;
	__global const uchar *y = data + (ulong)n * m + (ulong)t * m;

	uint ninst = 1;
	for (uint j = 0; j < k; j++)
		ninst *= levels;
	uint ncells = ninst * levels;

	uint idx[PLB_GRN_MAX_K];
	uint hist[PLB_GRN_MAX_CELLS];

	/* Colex unranking of `first`. */
	ulong rank = first;
	for (uint j = k; j >= 1; j--) {
		ulong c = j - 1;
		while (grn_binom(c + 1, j) <= rank)
			c++;
		idx[j - 1] = (uint)c;
		rank -= grn_binom(c, j);
	}

	long best_score = best[t].score;
	ulong best_rank = best[t].rank;
	for (ulong r = first; r < first + len; r++) {
		for (uint c = 0; c < ncells; c++)
			hist[c] = 0;
		for (uint s = 0; s < m; s++) {
			uint x = 0;
			for (uint j = k; j-- > 0;)
				x = x * levels + pred[(ulong)idx[j] * m + s];
			hist[x * levels + y[s]]++;
		}
		long score = 0;
		for (uint x = 0; x < ninst; x++) {
			uint fx = 0;
			for (uint v = 0; v < levels; v++)
				fx += hist[x * levels + v];
			if (fx == 0) {
				score += penalty;
				continue;
			}
			long d = flogf[fx];
			for (uint v = 0; v < levels; v++)
				d -= flogf[hist[x * levels + v]];
			score += ((long)(fx + 1) * d) / (long)fx;
		}
		if (score < best_score || (score == best_score && r < best_rank)) {
			best_score = score;
			best_rank = r;
		}
		/* Colex successor. */
		uint j = 0;
		while (j + 1 < k && idx[j] + 1 == idx[j + 1])
			j++;
		idx[j]++;
		for (uint i = 0; i < j; i++)
			idx[i] = i;
	}
	best[t].score = best_score;
	best[t].rank = best_rank;
	if (t == 0)
		best[n].rank += len;
}
