/*
 * grn_codelet.c - codelet of `plb app grn` / `plb app grn3` (src/apps/grn.rs):
 * the GRN exhaustive search on a block of predictor subsets (grn.h).
 *
 * Buffers (StarPU vector interface):
 *   0: the expression data, 2*n*m uint8 (predictors then targets), read
 *   1: the f ln f table, m + 1 int64, read
 *   2: the block's result array, n + 1 struct plb_grn_best, read-write
 *      (the block's best subsets are merged into it, its count grows by
 *      the block's length)
 * cl_arg: struct plb_app_task, params = struct plb_grn_problem.
 *
 * CPU: plb_grn_block. OpenCL: grn.cl (source passed to plb_grn_init), one
 * work-item per target. CUDA: grn_cuda.cu, only when built with nvcc
 * (PLB_HAVE_CUDA) against a StarPU with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <starpu.h>

#include "grn.h"
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_GRN_CUDA 1
/* grn_cuda.cu */
int plb_grn_cuda_block(const struct plb_grn_problem *p, const uint8_t *data,
		       const int64_t *flogf, uint64_t first, uint64_t len,
		       struct plb_grn_best *best, cudaStream_t stream);
#endif

static void grn_cpu(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_grn_problem *p = (const struct plb_grn_problem *)plb_app_params(arg);
	const uint8_t *data = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const int64_t *flogf = (const int64_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	struct plb_grn_best *best = (struct plb_grn_best *)STARPU_VECTOR_GET_PTR(buffers[2]);
	double t0 = plb_app_start();
	plb_grn_block(p, data, flogf, task->offset, task->len, best);
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static struct starpu_opencl_program grn_program;
static int grn_program_loaded;

static void grn_opencl(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_grn_problem *p = (const struct plb_grn_problem *)plb_app_params(arg);
	cl_mem mem[3];
	for (int i = 0; i < 3; i++) {
		/* Whole, unpartitioned vectors: no offset on the device. */
		STARPU_ASSERT(STARPU_VECTOR_GET_OFFSET(buffers[i]) == 0);
		mem[i] = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[i]);
	}
	cl_uint n = p->n, m = p->m, levels = p->levels, k = p->k;
	cl_long penalty = p->penalty;
	cl_ulong first = task->offset, len = task->len;
	int devid = starpu_worker_get_devid(starpu_worker_get_id());
	cl_kernel kernel;
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_int err = starpu_opencl_load_kernel(&kernel, &queue, &grn_program, "plb_grn_block", devid);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	int a = 0;
	for (int i = 0; i < 3; i++)
		err |= clSetKernelArg(kernel, a++, sizeof(cl_mem), &mem[i]);
	err |= clSetKernelArg(kernel, a++, sizeof(n), &n);
	err |= clSetKernelArg(kernel, a++, sizeof(m), &m);
	err |= clSetKernelArg(kernel, a++, sizeof(levels), &levels);
	err |= clSetKernelArg(kernel, a++, sizeof(k), &k);
	err |= clSetKernelArg(kernel, a++, sizeof(penalty), &penalty);
	err |= clSetKernelArg(kernel, a++, sizeof(first), &first);
	err |= clSetKernelArg(kernel, a++, sizeof(len), &len);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t global = n;
	plb_app_opencl_run(queue, kernel, 1, &global, NULL, arg, t0);
}
#endif

#ifdef PLB_GRN_CUDA
static void grn_cuda(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_grn_problem *p = (const struct plb_grn_problem *)plb_app_params(arg);
	const uint8_t *data = (const uint8_t *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const int64_t *flogf = (const int64_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	struct plb_grn_best *best = (struct plb_grn_best *)STARPU_VECTOR_GET_PTR(buffers[2]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	int err = plb_grn_cuda_block(p, data, flogf, task->offset, task->len, best, stream);
	if (err != 0)
		STARPU_CUDA_REPORT_ERROR((cudaError_t)err);
	cudaStreamSynchronize(stream);
	plb_app_finish(arg, t0);
}
#endif

/* History-based model keyed by the problem and the block length (the
 * buffers' sizes do not depend on the block length). */
static uint32_t grn_footprint(struct starpu_task *t)
{
	const struct plb_app_task *task = (const struct plb_app_task *)t->cl_arg;
	const struct plb_grn_problem *p = (const struct plb_grn_problem *)task->params;
	uint32_t h = starpu_hash_crc32c_be_n(&task->len, sizeof(task->len), 0);
	h = starpu_hash_crc32c_be(p->n, h);
	h = starpu_hash_crc32c_be(p->m, h);
	h = starpu_hash_crc32c_be(p->levels, h);
	return starpu_hash_crc32c_be(p->k, h);
}

static struct starpu_perfmodel grn_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_grn",
	.footprint = grn_footprint,
};

struct starpu_codelet plb_grn_cl = {
	.cpu_funcs = { grn_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { grn_opencl },
#endif
#ifdef PLB_GRN_CUDA
	.cuda_funcs = { grn_cuda },
#endif
	.nbuffers = 3,
	.modes = { STARPU_R, STARPU_R, STARPU_RW },
	.model = &grn_model,
	.name = "plb_grn",
};

/* After starpu_init, before the first task: builds the OpenCL program
 * (integer code: the default build options) for every OpenCL worker. */
int plb_grn_init(const char *opencl_source)
{
#ifdef STARPU_USE_OPENCL
	grn_program_loaded = 0;
	if (starpu_opencl_worker_get_count() == 0)
		return 0;
	int rc = starpu_opencl_load_opencl_from_string(opencl_source, &grn_program, "");
	if (rc == 0)
		grn_program_loaded = 1;
	return rc;
#else
	(void)opencl_source;
	return 0;
#endif
}

/* After the last task. */
void plb_grn_fini(void)
{
#ifdef STARPU_USE_OPENCL
	if (grn_program_loaded)
		starpu_opencl_unload_opencl(&grn_program);
	grn_program_loaded = 0;
#endif
}
