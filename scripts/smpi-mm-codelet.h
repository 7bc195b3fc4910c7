/*
 * smpi-mm-codelet.h - the multiplication codelet that scripts/smpi-mm.c
 * and scripts/smpi-dist-mm.c run under StarPU-SimGrid: C += A·B on three
 * matrix handles, never executed (SimGrid takes each task's duration from
 * the including program's per-worker cost function, `cost_us`).
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

#endif /* SMPI_MM_CODELET_H */
