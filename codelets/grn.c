/*
 * grn.c - GRN inference kernels (see grn.h): the block search, the merge,
 * the fixed-point tables and the random network generator. StarPU-free.
 *
 * License: LGPL-2.1-or-later.
 */
#include "grn.h"

#include <math.h>
#include <string.h>

int plb_grn_check(uint32_t n, uint32_t m, uint32_t levels, uint32_t k)
{
	if (k < 1 || k > PLB_GRN_MAX_K || k > n)
		return -1;
	if (levels < PLB_GRN_MIN_LEVELS || levels > PLB_GRN_MAX_LEVELS)
		return -1;
	if (m < 1 || m > PLB_GRN_MAX_SAMPLES)
		return -1;
	if (plb_grn_binom(n, k) == UINT64_MAX)
		return -1;
	return 0;
}

int plb_grn_problem_init(struct plb_grn_problem *p, uint32_t n, uint32_t m,
			 uint32_t levels, uint32_t k)
{
	int rc = plb_grn_check(n, m, levels, k);
	p->n = n;
	p->m = m;
	p->levels = levels;
	p->k = k;
	p->penalty = levels >= 2 ? llround(log((double)levels) * PLB_GRN_SCALE) : 0;
	return rc;
}

uint64_t plb_grn_binom(uint64_t n, uint32_t k)
{
	if (k > n)
		return 0;
	uint64_t r = 1;
	for (uint32_t i = 1; i <= k; i++) {
		/* r * (n - k + i) / i is exact at every step (C(n-k+i, i)). */
		uint64_t f = n - k + i;
		if (r > UINT64_MAX / f)
			return UINT64_MAX;
		r = r * f / i;
	}
	return r;
}

void plb_grn_unrank(uint64_t rank, uint32_t k, uint32_t *idx)
{
	for (uint32_t j = k; j >= 1; j--) {
		/* Largest c with C(c, j) <= rank; c >= j - 1. */
		uint64_t c = j - 1;
		while (plb_grn_binom(c + 1, j) <= rank)
			c++;
		idx[j - 1] = (uint32_t)c;
		rank -= plb_grn_binom(c, j);
	}
}

void plb_grn_flogf_table(uint32_t m, int64_t *table)
{
	for (uint32_t f = 0; f <= m; f++)
		table[f] = f < 2 ? 0 : llround((double)f * log((double)f) * PLB_GRN_SCALE);
}

void plb_grn_best_reset(struct plb_grn_best *best, uint32_t n)
{
	for (uint32_t t = 0; t < n; t++) {
		best[t].score = INT64_MAX;
		best[t].rank = UINT64_MAX;
	}
	best[n].score = 0;
	best[n].rank = 0;
}

/* Next subset in colex order (idx ascending). */
static void colex_next(uint32_t *idx, uint32_t k)
{
	uint32_t j = 0;
	while (j + 1 < k && idx[j] + 1 == idx[j + 1])
		j++;
	idx[j]++;
	for (uint32_t i = 0; i < j; i++)
		idx[i] = i;
}

/* Fixed-point score from the counts hist[x * levels + y]. */
static int64_t score_counts(const uint32_t *hist, uint32_t ninst, uint32_t levels,
			    const int64_t *flogf, int64_t penalty)
{
	int64_t score = 0;
	for (uint32_t x = 0; x < ninst; x++) {
		const uint32_t *h = hist + x * levels;
		uint32_t fx = 0;
		for (uint32_t y = 0; y < levels; y++)
			fx += h[y];
		if (fx == 0) {
			score += penalty;
			continue;
		}
		int64_t d = flogf[fx];
		for (uint32_t y = 0; y < levels; y++)
			d -= flogf[h[y]];
		score += ((int64_t)(fx + 1) * d) / (int64_t)fx;
	}
	return score;
}

void plb_grn_block(const struct plb_grn_problem *p, const uint8_t *data,
		   const int64_t *flogf, uint64_t first, uint64_t len,
		   struct plb_grn_best *best)
{
	const uint32_t n = p->n, m = p->m, levels = p->levels, k = p->k;
	const uint8_t *pred = data;
	const uint8_t *targ = data + (uint64_t)n * m;
	uint32_t ninst = 1;
	for (uint32_t j = 0; j < k; j++)
		ninst *= levels;
	const uint32_t ncells = ninst * levels;

	/* Cell of each sample before adding the target's level:
	 * (sum_j pred[idx_j][s] * levels^j) * levels. */
	uint16_t base[PLB_GRN_MAX_SAMPLES];
	uint32_t hist[PLB_GRN_MAX_CELLS];
	uint32_t idx[PLB_GRN_MAX_K];

	best[n].rank += len;
	if (len == 0)
		return;
	plb_grn_unrank(first, k, idx);
	for (uint64_t r = first; r < first + len; r++) {
		const uint8_t *row = pred + (uint64_t)idx[k - 1] * m;
		for (uint32_t s = 0; s < m; s++)
			base[s] = row[s];
		for (uint32_t j = k - 1; j-- > 0;) {
			row = pred + (uint64_t)idx[j] * m;
			for (uint32_t s = 0; s < m; s++)
				base[s] = (uint16_t)(base[s] * levels + row[s]);
		}
		for (uint32_t s = 0; s < m; s++)
			base[s] = (uint16_t)(base[s] * levels);

		for (uint32_t t = 0; t < n; t++) {
			const uint8_t *y = targ + (uint64_t)t * m;
			memset(hist, 0, ncells * sizeof(hist[0]));
			for (uint32_t s = 0; s < m; s++)
				hist[base[s] + y[s]]++;
			int64_t sc = score_counts(hist, ninst, levels, flogf, p->penalty);
			/* The merge rule; within the block ranks increase. */
			if (sc < best[t].score || (sc == best[t].score && r < best[t].rank)) {
				best[t].score = sc;
				best[t].rank = r;
			}
		}
		if (r + 1 < first + len)
			colex_next(idx, k);
	}
}

void plb_grn_merge(struct plb_grn_best *acc, const struct plb_grn_best *part,
		   uint32_t n)
{
	for (uint32_t t = 0; t < n; t++) {
		if (part[t].score < acc[t].score ||
		    (part[t].score == acc[t].score && part[t].rank < acc[t].rank))
			acc[t] = part[t];
	}
	acc[n].rank += part[n].rank;
}

double plb_grn_score_value(const struct plb_grn_problem *p, int64_t score)
{
	double ninst = pow((double)p->levels, (double)p->k);
	return (double)score / (PLB_GRN_SCALE * (ninst + (double)p->m) * log((double)p->levels));
}

/* splitmix64: small, seedable, the same everywhere. */
static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound <= 2^32 (multiply-shift, no division). */
static uint32_t uniform(uint64_t *state, uint32_t bound)
{
	return (uint32_t)(((splitmix64(state) >> 32) * (uint64_t)bound) >> 32);
}

/* Uniform in [0, 1). */
static double uniform01(uint64_t *state)
{
	return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

/* 1 if every one of the k inputs of the table changes its output for some
 * pair of instances differing only in that input. */
static int table_uses_all_inputs(const uint8_t *table, uint32_t k, uint32_t levels)
{
	uint32_t ninst = 1;
	for (uint32_t j = 0; j < k; j++)
		ninst *= levels;
	uint32_t weight = 1;
	for (uint32_t j = 0; j < k; j++, weight *= levels) {
		int matters = 0;
		for (uint32_t x = 0; x < ninst && !matters; x++) {
			uint32_t digit = (x / weight) % levels;
			for (uint32_t v = 0; v < levels; v++) {
				uint32_t x2 = x + (v - digit) * weight;
				if (table[x2] != table[x]) {
					matters = 1;
					break;
				}
			}
		}
		if (!matters)
			return 0;
	}
	return 1;
}

int plb_grn_generate(uint64_t seed, uint32_t n, uint32_t m, uint32_t levels,
		     uint32_t k, double noise, uint8_t *data,
		     uint32_t *regulators)
{
	if (plb_grn_check(n, m, levels, k) != 0 || n < k + 1)
		return -1;
	uint64_t st = seed ^ 0x6A09E667F3BCC909ull;
	uint8_t *pred = data;
	uint8_t *targ = data + (uint64_t)n * m;
	uint32_t ninst = 1;
	for (uint32_t j = 0; j < k; j++)
		ninst *= levels;

	for (uint64_t i = 0; i < (uint64_t)n * m; i++)
		pred[i] = (uint8_t)uniform(&st, levels);

	uint8_t table[PLB_GRN_MAX_CELLS];
	for (uint32_t g = 0; g < n; g++) {
		uint32_t *reg = regulators + (uint64_t)g * k;
		/* k distinct regulators other than g, ascending. */
		for (uint32_t j = 0; j < k; j++) {
			for (;;) {
				uint32_t c = uniform(&st, n);
				int dup = c == g;
				for (uint32_t i = 0; i < j; i++)
					dup |= reg[i] == c;
				if (!dup) {
					reg[j] = c;
					break;
				}
			}
		}
		for (uint32_t a = 1; a < k; a++)
			for (uint32_t b = a; b > 0 && reg[b - 1] > reg[b]; b--) {
				uint32_t tmp = reg[b];
				reg[b] = reg[b - 1];
				reg[b - 1] = tmp;
			}
		do {
			for (uint32_t x = 0; x < ninst; x++)
				table[x] = (uint8_t)uniform(&st, levels);
		} while (!table_uses_all_inputs(table, k, levels));

		/* Instance index: regulator j has weight levels^j (as in the
		 * search, where the j-th smallest predictor has weight levels^j). */
		uint8_t *out = targ + (uint64_t)g * m;
		for (uint32_t s = 0; s < m; s++) {
			uint32_t x = 0;
			for (uint32_t j = k; j-- > 0;)
				x = x * levels + pred[(uint64_t)reg[j] * m + s];
			out[s] = table[x];
		}
		if (noise > 0.0)
			for (uint32_t s = 0; s < m; s++)
				if (uniform01(&st) < noise)
					out[s] = (uint8_t)uniform(&st, levels);
	}
	return 0;
}
