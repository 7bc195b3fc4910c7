/*
 * smpi-mm.c - the StarPU-MPI side of the cross-check of our cluster
 * simulator (docs/cluster.md, "StarPU-MPI under SimGrid"): the 2-D blocked
 * matrix multiplication C += A·B of `plb app mm-mpi` on G x G tiles of
 * b x b doubles, written the StarPU-MPI way (every tile registered on
 * every rank with its owner, owner-computes tasks, StarPU-MPI moving the
 * tiles), run by starpu_smpirun on a SIMULATED cluster.
 *
 * Arrangement: q = s^2 ranks in an s x s grid of equal rectangles, column
 * by column (what the CMA gives for equal areas). Kernel costs: a
 * per-worker cost function, 2 b^3 flop at CPU_GFLOPS (a CPU worker) or
 * GPU_GFLOPS (a CUDA worker) plus LAUNCH_US; the same numbers our
 * simulator reads from platforms/mirage-cluster.txt. Transfers (PCIe from
 * the sampled machine's bus models, the network from the SimGrid platform)
 * are StarPU-SimGrid's own.
 *
 * Usage: smpi-mm G B CPU_GFLOPS GPU_GFLOPS LAUNCH_US
 * Prints (rank 0): smpi-mm: ranks=Q G=G b=B makespan_s=T gflops=F
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>
#include <starpu_mpi.h>

static double cpu_gflops, gpu_gflops, launch_us;
static unsigned tile;

static double cost_us(struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	(void)task;
	(void)nimpl;
	double flop = 2.0 * (double)tile * tile * tile;
	double rate = starpu_worker_get_type((int)workerid) == STARPU_CUDA_WORKER ? gpu_gflops
										   : cpu_gflops;
	return launch_us + flop / (rate * 1e3);
}

#define SMPI_MM_NAME "plb_smpi_mm_gemm"
#include "smpi-mm-codelet.h"

int main(int argc, char *argv[])
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s G B CPU_GFLOPS GPU_GFLOPS LAUNCH_US\n", argv[0]);
		return 2;
	}
	unsigned g = (unsigned)atoi(argv[1]);
	tile = (unsigned)atoi(argv[2]);
	cpu_gflops = atof(argv[3]);
	gpu_gflops = atof(argv[4]);
	launch_us = atof(argv[5]);
	int rank, size;
	if (starpu_mpi_init_conf(&argc, &argv, 1, MPI_COMM_WORLD, NULL) != 0)
		return 1;
	starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
	starpu_mpi_comm_size(MPI_COMM_WORLD, &size);
	unsigned s = (unsigned)lround(sqrt((double)size));
	if (s * s != (unsigned)size || g % s != 0) {
		if (rank == 0)
			fprintf(stderr, "smpi-mm: %d ranks must be a square dividing G = %u\n", size, g);
		starpu_mpi_shutdown();
		return 2;
	}
	unsigned side = g / s;
	starpu_data_handle_t *h = calloc(3 * (size_t)g * g, sizeof(*h));
	int64_t tag = 0;
	for (unsigned m = 0; m < 3; m++)
		for (unsigned i = 0; i < g; i++)
			for (unsigned j = 0; j < g; j++) {
				/* The owner of tile (i, j): rectangles column by column. */
				int owner = (int)((j / side) * s + i / side);
				starpu_data_handle_t *hh = &h[(m * g + i) * g + j];
				if (owner == rank) {
					void *ptr = NULL;
					starpu_malloc_flags(&ptr, (size_t)tile * tile * sizeof(double),
							    STARPU_MALLOC_PINNED | STARPU_MALLOC_SIMULATION_FOLDED);
					starpu_matrix_data_register(hh, STARPU_MAIN_RAM, (uintptr_t)ptr, tile, tile,
								    tile, sizeof(double));
				} else {
					starpu_matrix_data_register(hh, -1, (uintptr_t)NULL, tile, tile, tile,
								    sizeof(double));
				}
				starpu_mpi_data_register(*hh, tag++, owner);
			}
	const double t = smpi_mm_multiply(h, g);
	if (rank == 0) {
		double n = (double)g * tile;
		printf("smpi-mm: ranks=%d G=%u b=%u makespan_s=%.6f gflops=%.1f\n", size, g, tile, t,
		       2.0 * n * n * n / t / 1e9);
	}
	for (size_t x = 0; x < 3 * (size_t)g * g; x++)
		starpu_data_unregister(h[x]);
	free(h);
	starpu_mpi_shutdown();
	return 0;
}
