/*
 * smpi-mm-codelet.h - the multiplication that scripts/smpi-mm.c and
 * scripts/smpi-dist-mm.c run under StarPU-SimGrid: its codelet, C += A·B
 * on three matrix handles, never executed (SimGrid takes each task's
 * duration from the including program's per-worker cost function,
 * `cost_us`), and its task graph over StarPU-MPI (smpi_mm_multiply).
 *
 * Before including it, define SMPI_MM_NAME (the codelet's and model's
 * name) and declare
 *   static double cost_us(struct starpu_task *, unsigned workerid, unsigned nimpl);
 *
 * License: LGPL-2.1-or-later.
 */
#ifndef SMPI_MM_CODELET_H
#define SMPI_MM_CODELET_H

#include <starpu.h>
#include <starpu_mpi.h>

static struct starpu_perfmodel model = {
	.type = STARPU_PER_WORKER,
	.worker_cost_function = cost_us,
	.symbol = SMPI_MM_NAME,
};

/* Never called under SimGrid. */
static void gemm(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
}

static struct starpu_codelet cl = {
	.cpu_funcs = { gemm },
	.cuda_funcs = { gemm },
	.cuda_flags = { STARPU_CUDA_ASYNC },
	.nbuffers = 3,
	.modes = { STARPU_R, STARPU_R, STARPU_RW },
	.model = &model,
	.name = SMPI_MM_NAME,
};

/* The multiplication on G x G tiles, h[(m * g + i) * g + j] being tile
 * (i, j) of A (m = 0), B (1) and C (2), every tile registered with its
 * owner on every rank: C(i, j) += A(i, k) B(k, j), owner computes, for
 * every pivot step k; returns its simulated seconds, barrier to barrier. */
static double smpi_mm_multiply(starpu_data_handle_t *h, unsigned g)
{
	starpu_mpi_barrier(MPI_COMM_WORLD);
	const double start = starpu_timing_now();
	for (unsigned k = 0; k < g; k++)
		for (unsigned i = 0; i < g; i++)
			for (unsigned j = 0; j < g; j++)
				starpu_mpi_task_insert(MPI_COMM_WORLD, &cl, STARPU_R, h[(0 * g + i) * g + k],
						       STARPU_R, h[(1 * g + k) * g + j], STARPU_RW,
						       h[(2 * g + i) * g + j], 0);
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	starpu_mpi_barrier(MPI_COMM_WORLD);
	return (starpu_timing_now() - start) * 1e-6;
}

#endif /* SMPI_MM_CODELET_H */
