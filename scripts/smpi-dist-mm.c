/*
 * smpi-dist-mm.c - our distributed partitioning, the real code, under
 * SimGrid's SMPI (docs/cluster.md, "Our partitioning under SMPI"): the
 * blocked multiplication C += A·B on G x G tiles of b x b doubles of
 * scripts/smpi-mm.c (every tile registered on every rank with its owner,
 * owner-computes tasks, StarPU-MPI moving the tiles), with each rank's
 * rectangle of tiles given by plb_dist_partition (policy/include/
 * plb_distributed.h, linked statically with StarPU: scripts/smpi-dist.sh)
 * instead of equal squares. SIMULATED: StarPU-SimGrid runs no kernel.
 *
 * The partitioning's node kernel is one pivot step of the rank's
 * rectangle, C'_j += A_(b)·B_(b)j, a task per worker pinned to it, with
 * A's panel, B's slice and C's slice registered (folded: no memory), so
 * that a GPU's PCIe transfers of the panels count (C's slice is on the
 * device before the step, as in the multiplication, where it stays); a
 * device's time runs from the tasks' submission to its task's end, in
 * simulated time. Kernel cost: a
 * per-worker cost function, 2·rows·b·cols flop at the rank's CPU or GPU
 * rate plus LAUNCH_US (the tiles: 2·b³).
 *
 * Usage: smpi-dist-mm G B LAUNCH_US NODES ALGORITHM
 *   NODES: per rank NCPU:NCUDA:CPU_GFLOPS:GPU_GFLOPS, comma-separated (one
 *   entry: every rank); ALGORITHM: fpm-hier, plb-hac, multiple-cpm,
 *   single-cpm or homogeneous.
 * PLB_DIST_VERBOSE set: rank 0 prints every INPA round to stderr.
 * Prints (rank 0): smpi-dist-mm: ranks=Q G=G b=B algorithm=A areas=[...]
 *   partition_s=T makespan_s=T net_tiles=K (tiles each rank received,
 *   summed).
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <plb_distributed.h>
#include <stdint.h>

#define MAX_WORKERS 64

static double cpu_gflops, gpu_gflops, launch_us;
static unsigned tile;
/* This rank's workers (in_node: by StarPU worker id). */
static int workers[MAX_WORKERS];
static char in_node[STARPU_NMAXWORKERS];

/* A partitioning benchmark task: its flop and its end. */
struct slice {
	double flop, end_us;
};

/* A worker outside the rank's node costs 10^6 s a task: dmda never
 * chooses it (StarPU cannot remove workers from its initial context). */
static double cost_us(struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	(void)nimpl;
	if (!in_node[workerid])
		return 1e12;
	const struct slice *s = task->cl_arg;
	const double flop = s ? s->flop : 2.0 * (double)tile * tile * tile;
	const double rate =
		starpu_worker_get_type((int)workerid) == STARPU_CUDA_WORKER ? gpu_gflops : cpu_gflops;
	return launch_us + flop / (rate * 1e3);
}

#define SMPI_MM_NAME "plb_smpi_dist_mm"
#include "smpi-mm-codelet.h"

static void slice_done(void *arg)
{
	((struct slice *)arg)->end_us = starpu_timing_now();
}

/* A rows x cols matrix of doubles in folded memory (no real memory). */
static starpu_data_handle_t folded(uint64_t rows, uint64_t cols)
{
	void *ptr = NULL;
	starpu_malloc_flags(&ptr, (size_t)(rows * cols * sizeof(double)),
			    STARPU_MALLOC_PINNED | STARPU_MALLOC_SIMULATION_FOLDED);
	starpu_data_handle_t h;
	starpu_matrix_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)ptr, (uint32_t)rows,
				    (uint32_t)rows, (uint32_t)cols, sizeof(double));
	return h;
}


/*
 * The partitioning's collectives over StarPU-MPI's point-to-point
 * messages: under StarPU-SimGrid the program's thread is an actor of
 * StarPU's that may not call MPI itself (plb_distributed.h's MPI
 * collectives cannot run here). Each collective's messages carry tags of
 * their own; a wait has no deadline here (SimGrid ends a simulation in
 * which every actor waits).
 */
static int64_t next_tag = (int64_t)1 << 40;

static starpu_data_handle_t bytes_handle(void *ptr, int len)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)ptr, (uint32_t)len, 1);
	return h;
}

static int sp_allgather(void *arg, const void *send, int len, void *recv, double timeout_s)
{
	(void)arg;
	(void)timeout_s;
	int rank, size, rc = 0;
	starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
	starpu_mpi_comm_size(MPI_COMM_WORLD, &size);
	const int64_t base = next_tag;
	next_tag += size;
	memcpy((char *)recv + (size_t)rank * len, send, (size_t)len);
	starpu_data_handle_t mine = bytes_handle((void *)send, len);
	starpu_data_handle_t *from = calloc((size_t)size, sizeof *from);
	starpu_mpi_req *reqs = calloc(2 * (size_t)size, sizeof *reqs);
	int n = 0;
	for (int r = 0; r < size; r++) {
		if (r == rank)
			continue;
		from[r] = bytes_handle((char *)recv + (size_t)r * len, len);
		rc |= starpu_mpi_irecv(from[r], &reqs[n++], r, base + r, MPI_COMM_WORLD);
		rc |= starpu_mpi_isend(mine, &reqs[n++], r, base + rank, MPI_COMM_WORLD);
	}
	for (int x = 0; x < n; x++)
		rc |= starpu_mpi_wait(&reqs[x], MPI_STATUS_IGNORE);
	for (int r = 0; r < size; r++)
		if (r != rank)
			starpu_data_unregister(from[r]);
	starpu_data_unregister(mine);
	free(from);
	free(reqs);
	return rc ? -5 : 0;
}

static int sp_bcast(void *arg, void *buf, int len, int root, double timeout_s)
{
	(void)arg;
	(void)timeout_s;
	int rank, size, rc = 0;
	starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
	starpu_mpi_comm_size(MPI_COMM_WORLD, &size);
	const int64_t tag = next_tag++;
	starpu_data_handle_t h = bytes_handle(buf, len);
	if (rank == root) {
		starpu_mpi_req *reqs = calloc((size_t)size, sizeof *reqs);
		int n = 0;
		for (int r = 0; r < size; r++)
			if (r != root)
				rc |= starpu_mpi_isend(h, &reqs[n++], r, tag, MPI_COMM_WORLD);
		for (int x = 0; x < n; x++)
			rc |= starpu_mpi_wait(&reqs[x], MPI_STATUS_IGNORE);
		free(reqs);
	} else {
		rc |= starpu_mpi_recv(h, root, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	starpu_data_unregister(h);
	return rc ? -5 : 0;
}

/* The node kernel of the partitioning (see the header comment). */
/* Unregisters a handle of folded() and frees its memory. */
static void unfold(starpu_data_handle_t h)
{
	void *ptr = (void *)starpu_matrix_get_local_ptr(h);
	const size_t bytes = (size_t)starpu_matrix_get_nx(h) * starpu_matrix_get_ny(h) * sizeof(double);
	starpu_data_unregister(h);
	starpu_free_flags(ptr, bytes, STARPU_MALLOC_PINNED | STARPU_MALLOC_SIMULATION_FOLDED);
}

static int bench(void *arg, uint64_t rows, const uint64_t *cols, unsigned ndevices,
		 double *seconds)
{
	(void)arg;
	struct slice s[MAX_WORKERS];
	starpu_data_handle_t bh[MAX_WORKERS], ch[MAX_WORKERS];
	/* Every handle registered first (StarPU-SimGrid charges pinned
	 * allocations), then every task submitted at once: the times count
	 * from there. A's panel is one handle, read by every device. */
	starpu_data_handle_t a = folded(rows, tile);
	for (unsigned j = 0; j < ndevices; j++)
		if (cols[j]) {
			bh[j] = folded(tile, cols[j]);
			ch[j] = folded(rows, cols[j]);
			/* C' stays on its device through the pivot steps of the
			 * multiplication: it is there before the step is timed;
			 * A's panel and B's slice, new every step, are not. */
			starpu_data_fetch_on_node(ch[j], starpu_worker_get_memory_node(workers[j]), 0);
		}
	const double t0 = starpu_timing_now();
	for (unsigned j = 0; j < ndevices; j++) {
		seconds[j] = 0.0;
		if (cols[j] == 0)
			continue;
		s[j].flop = 2.0 * (double)rows * tile * (double)cols[j];
		struct starpu_task *t = starpu_task_create();
		t->cl = &cl;
		t->cl_arg = &s[j];
		t->handles[0] = a;
		t->handles[1] = bh[j];
		t->handles[2] = ch[j];
		t->execute_on_a_specific_worker = 1;
		t->workerid = (unsigned)workers[j];
		t->callback_func = slice_done;
		t->callback_arg = &s[j];
		if (starpu_task_submit(t) != 0)
			return -1;
	}
	starpu_task_wait_for_all();
	for (unsigned j = 0; j < ndevices; j++)
		if (cols[j]) {
			seconds[j] = (s[j].end_us - t0) * 1e-6;
			unfold(bh[j]);
			unfold(ch[j]);
		}
	unfold(a);
	return 0;
}

int main(int argc, char *argv[])
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s G B LAUNCH_US NODES ALGORITHM\n", argv[0]);
		return 2;
	}
	const unsigned g = (unsigned)atoi(argv[1]);
	tile = (unsigned)atoi(argv[2]);
	launch_us = atof(argv[3]);
	const char *algorithm = argv[5];
	/* StarPU-MPI first: under StarPU-SimGrid the program runs in an actor
	 * of StarPU's, where MPI is usable once StarPU-MPI started it. Every
	 * rank starts the largest node's workers (STARPU_NCPU, STARPU_NCUDA);
	 * its own node is NCPU CPU and NCUDA CUDA workers of them (the others
	 * cost too much to be used: cost_us). */
	int rank, size;
	if (starpu_mpi_init_conf(&argc, &argv, 1, MPI_COMM_WORLD, NULL) != 0)
		return 1;
	starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
	starpu_mpi_comm_size(MPI_COMM_WORLD, &size);

	/* This rank's node: entry `rank` of NODES (or its only entry). */
	char *spec = strdup(argv[4]), *save = NULL, *entry = strtok_r(spec, ",", &save);
	for (int r = 0; r < rank && entry; r++) {
		char *next = strtok_r(NULL, ",", &save);
		if (!next)
			break; /* one entry: every rank */
		entry = next;
	}
	unsigned ncpu = 0, ncuda = 0;
	if (!entry || sscanf(entry, "%u:%u:%lf:%lf", &ncpu, &ncuda, &cpu_gflops, &gpu_gflops) != 4) {
		fprintf(stderr, "smpi-dist-mm: rank %d: bad NODES entry\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	free(spec);
	int cpus[MAX_WORKERS], cudas[MAX_WORKERS];
	const unsigned have_cpu = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpus, MAX_WORKERS);
	const unsigned have_cuda = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, cudas, MAX_WORKERS);
	if (ncpu > have_cpu || ncuda > have_cuda || ncpu + ncuda == 0) {
		fprintf(stderr, "smpi-dist-mm: rank %d: node of %u CPU and %u CUDA workers, StarPU has %u and %u\n",
			rank, ncpu, ncuda, have_cpu, have_cuda);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	unsigned ndevices = 0;
	for (unsigned c = 0; c < ncpu; c++)
		workers[ndevices++] = cpus[c];
	for (unsigned c = 0; c < ncuda; c++)
		workers[ndevices++] = cudas[c];
	for (unsigned d = 0; d < ndevices; d++)
		in_node[workers[d]] = 1;

	/* Our partitioning, its collectives over StarPU-MPI's messages. */
	struct plb_dist_comm comm = { .rank = rank, .size = size, .allgather = sp_allgather,
				      .bcast = sp_bcast };
	int rc;
	struct plb_dist_config cfg = { .algorithm = algorithm, .grid = g, .block = tile,
				       .ndevices = ndevices, .bench = bench,
				       .verbose = getenv("PLB_DIST_VERBOSE") != NULL };
	struct plb_dist_rect *rects = calloc((size_t)size, sizeof *rects);
	uint64_t split[MAX_WORKERS];
	const double p0 = starpu_timing_now();
	rc = plb_dist_partition(&cfg, &comm, rects, split);
	const double partition_s = (starpu_timing_now() - p0) * 1e-6;
	if (rc != 0) {
		fprintf(stderr, "smpi-dist-mm: rank %d: %s\n", rank, plb_dist_last_error());
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	/* The owners of the tiles: rank r's rectangle. */
	int *owner = malloc(sizeof(int) * g * g);
	for (int r = 0; r < size; r++)
		for (uint64_t i = rects[r].row; i < rects[r].row + rects[r].rows; i++)
			for (uint64_t j = rects[r].col; j < rects[r].col + rects[r].cols; j++)
				owner[i * g + j] = r;
	starpu_data_handle_t *h = calloc(3 * (size_t)g * g, sizeof(*h));
	int64_t tag = 0;
	for (unsigned m = 0; m < 3; m++)
		for (unsigned i = 0; i < g; i++)
			for (unsigned j = 0; j < g; j++) {
				const int o = owner[i * g + j];
				starpu_data_handle_t *hh = &h[(m * g + i) * g + j];
				if (o == rank) {
					*hh = folded(tile, tile);
				} else {
					starpu_matrix_data_register(hh, -1, (uintptr_t)NULL, tile, tile,
								    tile, sizeof(double));
				}
				starpu_mpi_data_register(*hh, tag++, o);
			}
	/* The tiles this rank receives: A(i, k) of its rows and B(k, j) of
	 * its columns that others own, each once (StarPU-MPI's cache). */
	const struct plb_dist_rect me = rects[rank];
	long long received = 0;
	for (uint64_t k = 0; k < g; k++) {
		for (uint64_t i = me.row; i < me.row + me.rows; i++)
			received += owner[i * g + k] != rank;
		for (uint64_t j = me.col; j < me.col + me.cols; j++)
			received += owner[k * g + j] != rank;
	}
	const double makespan_s = smpi_mm_multiply(h, g);
	long long total = 0, *all = calloc((size_t)size, sizeof *all);
	sp_allgather(NULL, &received, sizeof received, all, 0.0);
	for (int r = 0; r < size; r++)
		total += all[r];
	free(all);
	if (rank == 0) {
		printf("smpi-dist-mm: ranks=%d G=%u b=%u algorithm=%s areas=[", size, g, tile, algorithm);
		for (int r = 0; r < size; r++)
			printf("%s%llu", r ? "," : "",
			       (unsigned long long)(rects[r].rows * rects[r].cols));
		printf("] partition_s=%.6f makespan_s=%.6f net_tiles=%lld\n", partition_s, makespan_s,
		       total);
		fflush(stdout);
	}
	for (size_t x = 0; x < 3 * (size_t)g * g; x++) {
		if (starpu_mpi_data_get_rank(h[x]) == rank)
			unfold(h[x]);
		else
			starpu_data_unregister(h[x]);
	}
	free(h);
	free(owner);
	free(rects);
	starpu_mpi_shutdown();
	return 0;
}
