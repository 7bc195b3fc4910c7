/*
 * grn.h - gene regulatory network (GRN) inference kernels, StarPU-free.
 *
 * The workload of Borelli et al. (BMC Bioinformatics 14(S18), 2013), used by
 * the PLB-HeC and PLB-HAC papers: for every target gene, an exhaustive search
 * over all predictor subsets of cardinality k that scores each subset with
 * the mean conditional entropy of the target given the predictors (with the
 * usual penalty for unobserved instances) and keeps the best one.
 *
 * Data: n genes, m samples, values quantised to `levels` levels (uint8).
 * Sample s is a transition of a network: `pred[g*m + s]` is gene g in the
 * state before, `targ[g*m + s]` gene g in the state after. Both matrices are
 * genes x samples, row-major, contiguous, stored one after the other in one
 * array of 2*n*m bytes (pred first).
 *
 * Unit of work: one predictor subset. Subsets {i_1 < ... < i_k} of
 * {0..n-1} are numbered in colexicographic order, rank = C(i_1,1) + ... +
 * C(i_k,k), so there are W = C(n,k) units. A block [first, first + len)
 * scores each of its subsets as the predictor set of every target gene
 * (the target's own previous value may be among the predictors: it is a
 * legitimate predictor of its next value) and merges, per target, the best
 * (score, rank) of the block into a result array: lowest score, ties to the
 * lowest rank. Blocks are independent and their results merge with the
 * same rule (plb_grn_merge), which is associative and commutative, so the
 * final result does not depend on the block sizes, their order or the
 * device.
 *
 * Result array: n + 1 struct plb_grn_best; entry t < n is target t's best,
 * entry n counts the subsets evaluated into the array (its `rank` field),
 * so that a block evaluated twice, or never, shows in the count.
 *
 * Score: the mean conditional entropy with alpha = 1,
 *
 *   H(Y|X) = sum_x P(x) H(Y|X=x),  P(x) = (f_x + 1) / (N + m),
 *   H(Y|X=x) = -sum_y (f_xy/f_x) log_c(f_xy/f_x) for observed x,
 *   H(Y|X=x) = 1 (the maximum) for the unobserved x (f_x = 0),
 *
 * N = levels^k instances, c = levels, f counts over the m samples. It is
 * computed in 64-bit fixed point so that every implementation (C, OpenCL,
 * CUDA) gives bit-identical scores: with T[f] = round(f ln f * 2^32)
 * (plb_grn_flogf_table, computed once on the host) and
 * P = round(ln(levels) * 2^32),
 *
 *   score = (N - observed) * P + sum_{observed x} floor((f_x + 1) * D_x / f_x),
 *   D_x = T[f_x] - sum_y T[f_xy],
 *
 * and H(Y|X) = score / (2^32 * (N + m) * ln(levels)) (plb_grn_score_value)
 * up to the rounding of T (relative error below 1e-9 for m <= 4096).
 *
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_GRN_H
#define PLB_GRN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLB_GRN_MAX_K 3
#define PLB_GRN_MIN_LEVELS 2
#define PLB_GRN_MAX_LEVELS 4
#define PLB_GRN_MAX_SAMPLES 4096
/* levels^k * levels for the largest k and levels. */
#define PLB_GRN_MAX_CELLS 256
/* Fixed-point scale of the scores (2^32). */
#define PLB_GRN_SCALE 4294967296.0

/* Best predictor subset of one target. */
struct plb_grn_best {
	int64_t score;  /* INT64_MAX when no subset was scored */
	uint64_t rank;  /* UINT64_MAX when no subset was scored */
};

/* Problem description shared by every block. */
struct plb_grn_problem {
	uint32_t n;      /* genes */
	uint32_t m;      /* samples */
	uint32_t levels; /* 2 .. PLB_GRN_MAX_LEVELS */
	uint32_t k;      /* 1 .. PLB_GRN_MAX_K */
	int64_t penalty; /* round(ln(levels) * 2^32) */
};

/* 0 if n, m, levels, k are supported (k <= n, m <= PLB_GRN_MAX_SAMPLES...),
 * -1 otherwise. */
int plb_grn_check(uint32_t n, uint32_t m, uint32_t levels, uint32_t k);

/* Fills a problem (penalty included). Returns plb_grn_check's value. */
int plb_grn_problem_init(struct plb_grn_problem *p, uint32_t n, uint32_t m,
			 uint32_t levels, uint32_t k);

/* C(n, k) (0 when k > n); UINT64_MAX on overflow. */
uint64_t plb_grn_binom(uint64_t n, uint32_t k);

/* The subset of colex rank `rank` into idx[0..k) (ascending). */
void plb_grn_unrank(uint64_t rank, uint32_t k, uint32_t *idx);

/* T[f] = round(f ln f * 2^32) for f = 0 .. m (m + 1 entries). */
void plb_grn_flogf_table(uint32_t m, int64_t *table);

/* Empty result array: best[0..n) "nothing scored", best[n] = {0, 0}
 * (nothing evaluated). n + 1 entries. */
void plb_grn_best_reset(struct plb_grn_best *best, uint32_t n);

/*
 * Scores the subsets of colex ranks [first, first + len) for every target,
 * merges each target's best of them into best[0..n) (plb_grn_merge's rule)
 * and adds len to best[n].rank. data: 2*n*m bytes (pred then targ); flogf:
 * plb_grn_flogf_table(m); best: n + 1 entries. Allocation-free;
 * first + len <= C(n, k) is the caller's duty.
 */
void plb_grn_block(const struct plb_grn_problem *p, const uint8_t *data,
		   const int64_t *flogf, uint64_t first, uint64_t len,
		   struct plb_grn_best *best);

/* Result arrays of n + 1 entries: acc[t] = the better of acc[t] and part[t]
 * (lower score, then lower rank) for t < n; the counts add up. */
void plb_grn_merge(struct plb_grn_best *acc, const struct plb_grn_best *part,
		   uint32_t n);

/* The mean conditional entropy (in [0, 1]) a fixed-point score stands for. */
double plb_grn_score_value(const struct plb_grn_problem *p, int64_t score);

/*
 * Random network with planted regulators, deterministic in `seed`: gene g
 * has k distinct regulators (never g itself), regulators[g*k .. g*k + k)
 * ascending, and a random transition table levels^k -> levels in which
 * every regulator matters. Each of the m samples is a uniformly random
 * state (pred) and its successor (targ), each successor value replaced by
 * a uniformly random level with probability `noise`. data: 2*n*m bytes.
 * Returns -1 (nothing written) if the sizes are unsupported or n < k + 1.
 */
int plb_grn_generate(uint64_t seed, uint32_t n, uint32_t m, uint32_t levels,
		     uint32_t k, double noise, uint8_t *data,
		     uint32_t *regulators);

#ifdef __cplusplus
}
#endif

#endif /* PLB_GRN_H */
