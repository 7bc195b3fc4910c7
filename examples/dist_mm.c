/*
 * dist_mm.c - a StarPU-MPI application of the distributed divisible-load
 * API (policy/include/plb_distributed.h), using nothing else of PLB:
 * C = A * B (N x N, single precision) over the ranks of MPI_COMM_WORLD.
 *
 * 1. The two-level partitioning gives each rank its rectangle of C's
 *    G x G blocks (G = N / b), benchmarking this program's own kernel on
 *    the rank's CPU workers (one pinned task per worker, a pivot step
 *    C'(rows x cols_j) += A(rows x b) B(b x cols_j)).
 * 2. Each rank generates its own rows of A and columns of B (every entry a
 *    hash of its position: nothing is sent), and computes its rectangle of
 *    C with its node's own balancer (plb_divisible.h, "plb-hac" unless
 *    --node-balancer says otherwise) over the rectangle's columns.
 * 3. Verification, distributed: each rank checks that every column of its
 *    rectangle was computed exactly once, that sampled entries equal the
 *    product computed again in double precision, and every entry at once
 *    with Freivalds' test (C x = A (B x) for two pseudo-random x); rank 0
 *    checks that the rectangles tile the grid, and gathers the verdicts.
 *
 * Usage: mpirun -np Q plb-dist-mm N B [options]
 *   --algorithm NAME      fpm-hier (default), plb-hac, multiple-cpm,
 *                         single-cpm, homogeneous
 *   --node-balancer NAME  balancer of each rank's share (default plb-hac)
 *   --timeout S           floor of the partitioning's deadlines (default 60)
 *   --fail-kernel R       rank R's node kernel fails (fault test)
 *   --stall R             rank R never joins the partitioning (fault test)
 *   --comm starpu-mpi|mpi the partitioning's collectives: StarPU-MPI
 *                         messages (default) or MPI's, polled
 *   --verbose             rank 0 prints every INPA round
 * Output: rank 0 prints one line "plb-dist-mm: ranks=Q n=N b=B ...
 * coverage=exact verified=ok"; exit status 0 when verified.
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <plb_distributed.h>

#define MAX_WORKERS 64

/* Entry (i, j) of matrix m (1: A, 2: B) in [-1, 1). */
static float entry(uint64_t m, uint64_t i, uint64_t j)
{
	uint64_t x = (m * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^
		     (j * 0x94D049BB133111EBull);
	x ^= x >> 31;
	x *= 0xD6E8FEB86775B4D5ull;
	x ^= x >> 29;
	return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A pseudo-random index below count. */
static uint64_t pick(uint64_t m, uint64_t i, uint64_t j, uint64_t count)
{
	const double u = ((double)entry(m, i, j) + 1.0) / 2.0; /* [0, 1) */
	const uint64_t k = (uint64_t)(u * (double)count);
	return k < count ? k : count - 1;
}

/* C (rows x cols, leading dimension ldc) += A (rows x k, lda) * B (k x
 * cols, ldb); column-major. */
static void gemm(const float *a, int lda, const float *b, int ldb, float *c, int ldc,
		 int rows, int k, int cols)
{
	for (int j = 0; j < cols; j++)
		for (int p = 0; p < k; p++) {
			const float bpj = b[p + (size_t)j * ldb];
			const float *ap = a + (size_t)p * lda;
			float *cj = c + (size_t)j * ldc;
			for (int i = 0; i < rows; i++)
				cj[i] += ap[i] * bpj;
		}
}

/* One task's work: a slice of columns, and where its time goes. */
struct slice {
	const float *a, *b;
	float *c;
	int lda, ldb, ldc, rows, k, cols;
	double seconds;
	/* Divisible run and block of this slice (multiplication only). */
	plb_dl_run *run;
	uint64_t block;
	int failed;
};

static void slice_cpu(void *buffers[], void *arg)
{
	(void)buffers;
	struct slice *s = arg;
	const double t0 = starpu_timing_now();
	gemm(s->a, s->lda, s->b, s->ldb, s->c, s->ldc, s->rows, s->k, s->cols);
	s->seconds = (starpu_timing_now() - t0) / 1e6;
}

static struct starpu_codelet slice_cl = {
	.cpu_funcs = { slice_cpu },
	.nbuffers = 0,
	.name = "dist_mm_slice",
};

/* This rank's CPU workers and options. */
struct node {
	int workers[MAX_WORKERS];
	unsigned nworkers;
	int rank, fail_kernel;
	uint64_t b;
};

static int submit_pinned(struct slice *s, int worker, void (*done)(void *))
{
	struct starpu_task *t = starpu_task_create();
	t->cl = &slice_cl;
	t->cl_arg = s;
	t->execute_on_a_specific_worker = 1;
	t->workerid = (unsigned)worker;
	t->callback_func = done;
	t->callback_arg = s;
	return starpu_task_submit(t);
}

/* The node kernel of the partitioning: one pivot step on every worker at
 * once, worker j on rows x cols[j]. */
static int bench(void *arg, uint64_t rows, const uint64_t *cols, unsigned ndevices,
		 double *seconds)
{
	struct node *node = arg;
	if (node->rank == node->fail_kernel)
		return -1;
	uint64_t total = 0;
	for (unsigned j = 0; j < ndevices; j++)
		total += cols[j];
	const int b = (int)node->b;
	float *a = malloc(sizeof(float) * rows * b);
	float *bm = malloc(sizeof(float) * b * (total ? total : 1));
	float *c = calloc(rows * (total ? total : 1), sizeof(float));
	struct slice *s = calloc(ndevices, sizeof *s);
	if (!a || !bm || !c || !s)
		return -2;
	for (uint64_t x = 0; x < rows * b; x++)
		a[x] = 1.0f;
	for (uint64_t x = 0; x < b * total; x++)
		bm[x] = 1.0f;
	uint64_t col = 0;
	int rc = 0;
	for (unsigned j = 0; j < ndevices; j++) {
		seconds[j] = 0.0;
		if (cols[j] == 0)
			continue;
		s[j] = (struct slice){ .a = a, .lda = (int)rows, .b = bm + col * b, .ldb = b,
				       .c = c + col * rows, .ldc = (int)rows, .rows = (int)rows,
				       .k = b, .cols = (int)cols[j] };
		col += cols[j];
		if (submit_pinned(&s[j], node->workers[j], NULL) != 0)
			rc = -3;
	}
	starpu_task_wait_for_all();
	for (unsigned j = 0; j < ndevices; j++)
		if (cols[j])
			seconds[j] = s[j].seconds;
	free(a);
	free(bm);
	free(c);
	free(s);
	return rc;
}

/* A multiplication block finished: report its compute time. */
static void block_done(void *arg)
{
	struct slice *s = arg;
	if (plb_dl_done(s->run, s->block, s->seconds, 0.0) != 0)
		s->failed = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: plb-dist-mm N B [--algorithm NAME] [--node-balancer NAME] "
			"[--timeout S] [--fail-kernel R] [--stall R] [--comm starpu-mpi|mpi] [--verbose]\n");
}

int main(int argc, char **argv)
{
	int provided = 0;
	if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
		return 2;
	int rank = 0, size = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 3) {
		if (rank == 0)
			usage();
		MPI_Finalize();
		return 2;
	}
	const uint64_t n = strtoull(argv[1], NULL, 10), b = strtoull(argv[2], NULL, 10);
	const char *algorithm = "fpm-hier", *balancer = "plb-hac";
	double timeout = 60.0;
	int fail_kernel = -1, stall = -1, verbose = 0, use_mpi = 0;
	for (int i = 3; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--verbose")) {
			verbose = 1;
			continue;
		}
		if (!v) {
			if (rank == 0)
				usage();
			MPI_Finalize();
			return 2;
		}
		if (!strcmp(o, "--algorithm"))
			algorithm = v;
		else if (!strcmp(o, "--node-balancer"))
			balancer = v;
		else if (!strcmp(o, "--timeout"))
			timeout = atof(v);
		else if (!strcmp(o, "--fail-kernel"))
			fail_kernel = atoi(v);
		else if (!strcmp(o, "--stall"))
			stall = atoi(v);
		else if (!strcmp(o, "--comm") && (!strcmp(v, "mpi") || !strcmp(v, "starpu-mpi")))
			use_mpi = !strcmp(v, "mpi");
		else {
			if (rank == 0)
				usage();
			MPI_Finalize();
			return 2;
		}
		i++;
	}
	if (b == 0 || n == 0 || n % b != 0 || n / b > 4096) {
		if (rank == 0)
			fprintf(stderr, "plb-dist-mm: N must be a positive multiple of B (N/B <= 4096)\n");
		MPI_Finalize();
		return 2;
	}
	const uint64_t g = n / b;

	if (starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, NULL) != 0) {
		fprintf(stderr, "plb-dist-mm: rank %d: StarPU-MPI did not start\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	struct node node = { .rank = rank, .fail_kernel = fail_kernel, .b = b };
	node.nworkers = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, node.workers, MAX_WORKERS);
	if (node.nworkers == 0) {
		fprintf(stderr, "plb-dist-mm: rank %d: no CPU worker\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	/* 1. The partitioning: its collectives over StarPU-MPI's messages
	 * (tags from 2^40 up: this program's own data have none), or with
	 * --comm mpi over MPI on a communicator of its own. */
	MPI_Comm control;
	MPI_Comm_dup(MPI_COMM_WORLD, &control);
	struct plb_dist_comm comm;
	struct plb_dist_starpu_mpi state;
	int rc = use_mpi ? plb_dist_comm_mpi(&control, &comm)
			 : plb_dist_comm_starpu_mpi(MPI_COMM_WORLD, (int64_t)1 << 40, &state, &comm);
	if (rc != 0) {
		fprintf(stderr, "plb-dist-mm: rank %d: %s\n", rank,
			rc == -3 ? "MPI does not provide MPI_THREAD_MULTIPLE" : "MPI error");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == stall) {
		fprintf(stderr, "plb-dist-mm: rank %d: --stall: never joining\n", rank);
		for (;;)
			sleep(1);
	}
	struct plb_dist_config cfg = { .algorithm = algorithm, .grid = g, .block = b,
				       .timeout_s = timeout, .ndevices = node.nworkers,
				       .bench = bench, .bench_arg = &node, .verbose = verbose };
	struct plb_dist_rect *rects = calloc((size_t)size, sizeof *rects);
	uint64_t split[MAX_WORKERS];
	const double t0 = starpu_timing_now();
	rc = plb_dist_partition(&cfg, &comm, rects, split);
	const double partition_s = (starpu_timing_now() - t0) / 1e6;
	if (rc == PLB_DIST_ECOMM) {
		fprintf(stderr, "plb-dist-mm: rank %d: %s; ending the job\n", rank,
			plb_dist_last_error());
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	if (rc != PLB_DIST_OK) {
		/* Every rank fails alike: end cleanly, rank 0 says why. */
		if (rank == 0)
			fprintf(stderr, "plb-dist-mm: %s\n",
				plb_dist_last_error());
		starpu_mpi_shutdown();
		MPI_Comm_free(&control);
		MPI_Finalize();
		return 1;
	}

	/* 2. This rank's share: its rows of A, columns of B, rectangle of C. */
	const struct plb_dist_rect me = rects[rank];
	const uint64_t rows = me.rows * b, cols = me.cols * b, r0 = me.row * b, c0 = me.col * b;
	uint64_t split_sum = 0;
	for (unsigned j = 0; j < node.nworkers; j++)
		split_sum += split[j];
	float *a = malloc(sizeof(float) * (rows ? rows : 1) * n);
	float *bm = malloc(sizeof(float) * n * (cols ? cols : 1));
	float *c = calloc((rows ? rows : 1) * (cols ? cols : 1), sizeof(float));
	unsigned *times = calloc(cols ? cols : 1, sizeof *times);
	for (uint64_t p = 0; p < n; p++)
		for (uint64_t i = 0; i < rows; i++)
			a[i + p * rows] = entry(1, r0 + i, p);
	for (uint64_t j = 0; j < cols; j++)
		for (uint64_t p = 0; p < n; p++)
			bm[p + j * n] = entry(2, p, c0 + j);
	const double t1 = starpu_timing_now();
	int ok = split_sum == cols;
	uint64_t blocks = 0;
	if (cols > 0) {
		plb_dl_run *run = plb_dl_create_on(cols, balancer, node.workers, node.nworkers);
		if (!run) {
			fprintf(stderr, "plb-dist-mm: rank %d: %s\n", rank, plb_dl_last_error());
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		struct slice *slices = NULL;
		size_t cap = 0;
		int w, next;
		uint64_t id, off, len;
		/* Slices live until the end (a callback may still read one). */
		struct slice **all = NULL;
		while ((next = plb_dl_next(run, &w, &id, &off, &len)) == PLB_DL_BLOCK) {
			if (blocks == cap) {
				cap = cap ? 2 * cap : 64;
				all = realloc(all, cap * sizeof *all);
			}
			slices = calloc(1, sizeof *slices);
			*slices = (struct slice){ .a = a, .lda = (int)rows, .b = bm + off * n,
						  .ldb = (int)n, .c = c + off * rows, .ldc = (int)rows,
						  .rows = (int)rows, .k = (int)n, .cols = (int)len,
						  .run = run, .block = id };
			all[blocks++] = slices;
			for (uint64_t j = off; j < off + len; j++)
				times[j]++;
			if (submit_pinned(slices, w, block_done) != 0)
				ok = 0;
		}
		if (next < 0) {
			fprintf(stderr, "plb-dist-mm: rank %d: %s\n", rank, plb_dl_last_error());
			ok = 0;
		}
		starpu_task_wait_for_all();
		for (uint64_t k = 0; k < blocks; k++) {
			ok &= !all[k]->failed;
			free(all[k]);
		}
		free(all);
		plb_dl_destroy(run);
	}
	const double multiply_s = (starpu_timing_now() - t1) / 1e6;

	/* 3. This rank's checks: every column once, sampled entries. */
	int covered = 1;
	for (uint64_t j = 0; j < cols; j++)
		covered &= times[j] == 1;
	int right = 1;
	for (int s = 0; s < 64 && rows && cols; s++) {
		/* The first and last entries, then pseudo-random ones. */
		const uint64_t i = s == 0 ? 0 : s == 1 ? rows - 1 : pick(3, (uint64_t)rank, s, rows);
		const uint64_t j = s == 0 ? 0 : s == 1 ? cols - 1 : pick(4, (uint64_t)rank, s, cols);
		double want = 0.0, scale = 0.0;
		for (uint64_t p = 0; p < n; p++) {
			const double t = (double)entry(1, r0 + i, p) * (double)entry(2, p, c0 + j);
			want += t;
			scale += fabs(t);
		}
		if (fabs((double)c[i + j * rows] - want) > 1e-5 * scale + 1e-6)
			right = 0;
	}
	/* Every entry at once (Freivalds): C x = A (B x) for two pseudo-random
	 * vectors x, in double precision, within the float rounding of C. */
	double *y = malloc(sizeof(double) * n), *yabs = malloc(sizeof(double) * n);
	for (int v = 0; v < 2 && rows && cols; v++) {
		for (uint64_t p = 0; p < n; p++) {
			y[p] = yabs[p] = 0.0;
			for (uint64_t j = 0; j < cols; j++) {
				const double x = entry(5 + v, c0 + j, 0), t = bm[p + j * n] * x;
				y[p] += t;
				yabs[p] += fabs(t);
			}
		}
		for (uint64_t i = 0; i < rows; i++) {
			double want = 0.0, scale = 0.0, got = 0.0;
			for (uint64_t p = 0; p < n; p++) {
				want += a[i + p * rows] * y[p];
				scale += fabs(a[i + p * rows]) * yabs[p];
			}
			for (uint64_t j = 0; j < cols; j++)
				got += c[i + j * rows] * (double)entry(5 + v, c0 + j, 0);
			if (fabs(got - want) > 1e-5 * scale + 1e-6)
				right = 0;
		}
	}
	free(y);
	free(yabs);
	/* Rank 0: the rectangles tile the grid. */
	int tiled = 1;
	if (rank == 0) {
		unsigned char *mark = calloc(g * g, 1);
		for (int r = 0; r < size; r++)
			for (uint64_t y = rects[r].row; y < rects[r].row + rects[r].rows; y++)
				for (uint64_t x = rects[r].col; x < rects[r].col + rects[r].cols; x++)
					if (y >= g || x >= g || mark[y * g + x]++)
						tiled = 0;
		for (uint64_t x = 0; x < g * g; x++)
			tiled &= mark[x] == 1;
		free(mark);
	}
	int mine[3] = { covered && ok, right, (int)blocks }, every[3];
	MPI_Allreduce(mine, every, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&mine[2], &every[2], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	double slowest = multiply_s, longest;
	MPI_Reduce(&slowest, &longest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	const int verified = every[0] && every[1] && tiled;
	if (rank == 0) {
		printf("plb-dist-mm: ranks=%d n=%llu b=%llu algorithm=%s node_balancer=%s comm=%s areas=[",
		       size, (unsigned long long)n, (unsigned long long)b, algorithm, balancer,
		       use_mpi ? "mpi" : "starpu-mpi");
		for (int r = 0; r < size; r++)
			printf("%s%llu", r ? "," : "",
			       (unsigned long long)(rects[r].rows * rects[r].cols));
		printf("] blocks=%d partition_s=%.3f multiply_s=%.3f coverage=%s verified=%s\n",
		       every[2], partition_s, longest, every[0] && tiled ? "exact" : "WRONG",
		       verified ? "ok" : "WRONG");
		fflush(stdout);
	}
	free(a);
	free(bm);
	free(c);
	free(times);
	free(rects);
	starpu_mpi_shutdown();
	MPI_Comm_free(&control);
	MPI_Finalize();
	return verified ? 0 : 1;
}
