/*
 * kmeans_codelet.c - codelet of `plb app kmeans` (src/apps/kmeans.rs): one
 * Lloyd assignment step with partial sums on a block of points (kmeans.h).
 *
 * Buffers (StarPU vector interface):
 *   0: every point, n*d float, read (the block starts at point task->offset)
 *   1: the centroids, k*d float, read
 *   2: the block's labels, len int32, write
 *   3: the block's partial sums, k*(d+1) double, read-write (added to; the
 *      application registers it zeroed)
 * cl_arg: struct plb_app_task, params = struct plb_kmeans_params.
 *
 * CPU: plb_kmeans_block. OpenCL: kmeans.cl (source passed to
 * plb_kmeans_init; built without -cl-mad-enable). CUDA: kmeans_cuda.cu,
 * only when built with nvcc (PLB_HAVE_CUDA) against a StarPU with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <starpu.h>

#include "kmeans.h"
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_KMEANS_CUDA 1
/* kmeans_cuda.cu */
int plb_kmeans_cuda_block(uint32_t d, uint32_t k, const float *points, const float *centroids,
			  uint64_t len, int32_t *labels, double *partial, cudaStream_t stream);
#endif

static void kmeans_cpu(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_kmeans_params *p = (const struct plb_kmeans_params *)plb_app_params(arg);
	const float *points = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *centroids = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	int32_t *labels = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[2]);
	double *partial = (double *)STARPU_VECTOR_GET_PTR(buffers[3]);
	double t0 = plb_app_start();
	plb_kmeans_block(p->d, p->k, points + task->offset * p->d, centroids, task->len, labels,
			 partial);
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static struct starpu_opencl_program kmeans_program;
static int kmeans_program_loaded;

static void kmeans_opencl(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_kmeans_params *p = (const struct plb_kmeans_params *)plb_app_params(arg);
	cl_mem mem[4];
	for (int i = 0; i < 4; i++) {
		/* Whole, unpartitioned vectors: no offset on the device. */
		STARPU_ASSERT(STARPU_VECTOR_GET_OFFSET(buffers[i]) == 0);
		mem[i] = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[i]);
	}
	cl_uint d = p->d, k = p->k;
	cl_ulong first = task->offset, len = task->len;
	int devid = starpu_worker_get_devid(starpu_worker_get_id());
	cl_kernel assign, partial;
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_int err = starpu_opencl_load_kernel(&assign, &queue, &kmeans_program, "plb_kmeans_assign",
					       devid);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	err = starpu_opencl_load_kernel(&partial, &queue, &kmeans_program, "plb_kmeans_partial",
					devid);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	/* Work-group size of the reduction: a power of two, at most 64. */
	size_t max_wg = 1, local = 64;
	cl_device_id device;
	starpu_opencl_get_device(devid, &device);
	clGetKernelWorkGroupInfo(partial, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(max_wg),
				 &max_wg, NULL);
	while (local > max_wg && local > 1)
		local /= 2;

	err = clSetKernelArg(assign, 0, sizeof(cl_mem), &mem[0]);
	err |= clSetKernelArg(assign, 1, sizeof(first), &first);
	err |= clSetKernelArg(assign, 2, sizeof(len), &len);
	err |= clSetKernelArg(assign, 3, sizeof(d), &d);
	err |= clSetKernelArg(assign, 4, sizeof(k), &k);
	err |= clSetKernelArg(assign, 5, sizeof(cl_mem), &mem[1]);
	err |= clSetKernelArg(assign, 6, sizeof(cl_mem), &mem[2]);
	err |= clSetKernelArg(partial, 0, sizeof(cl_mem), &mem[0]);
	err |= clSetKernelArg(partial, 1, sizeof(first), &first);
	err |= clSetKernelArg(partial, 2, sizeof(len), &len);
	err |= clSetKernelArg(partial, 3, sizeof(d), &d);
	err |= clSetKernelArg(partial, 4, sizeof(k), &k);
	err |= clSetKernelArg(partial, 5, sizeof(cl_mem), &mem[2]);
	err |= clSetKernelArg(partial, 6, sizeof(cl_mem), &mem[3]);
	err |= clSetKernelArg(partial, 7, local * sizeof(cl_double), NULL);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t g1 = len, g2 = (size_t)k * (d + 1) * local;
	err = clEnqueueNDRangeKernel(queue, assign, 1, NULL, &g1, NULL, 0, NULL, NULL);
	if (err == CL_SUCCESS)
		err = clEnqueueNDRangeKernel(queue, partial, 1, NULL, &g2, &local, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	clFinish(queue);
	starpu_opencl_release_kernel(assign);
	starpu_opencl_release_kernel(partial);
	plb_app_finish(arg, t0);
}
#endif

#ifdef PLB_KMEANS_CUDA
static void kmeans_cuda(void *buffers[], void *arg)
{
	const struct plb_app_task *task = (const struct plb_app_task *)arg;
	const struct plb_kmeans_params *p = (const struct plb_kmeans_params *)plb_app_params(arg);
	const float *points = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *centroids = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	int32_t *labels = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[2]);
	double *partial = (double *)STARPU_VECTOR_GET_PTR(buffers[3]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	int err = plb_kmeans_cuda_block(p->d, p->k, points + task->offset * p->d, centroids,
					task->len, labels, partial, stream);
	if (err != 0)
		STARPU_CUDA_REPORT_ERROR((cudaError_t)err);
	cudaStreamSynchronize(stream);
	plb_app_finish(arg, t0);
}
#endif

static struct starpu_perfmodel kmeans_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_kmeans",
};

struct starpu_codelet plb_kmeans_cl = {
	.cpu_funcs = { kmeans_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { kmeans_opencl },
#endif
#ifdef PLB_KMEANS_CUDA
	.cuda_funcs = { kmeans_cuda },
#endif
	.nbuffers = 4,
	.modes = { STARPU_R, STARPU_R, STARPU_W, STARPU_RW },
	.model = &kmeans_model,
	.name = "plb_kmeans",
};

/* After starpu_init, before the first task: builds the OpenCL program for
 * every OpenCL worker, without -cl-mad-enable (kmeans.h: no contraction). */
int plb_kmeans_init(const char *opencl_source)
{
#ifdef STARPU_USE_OPENCL
	kmeans_program_loaded = 0;
	if (starpu_opencl_worker_get_count() == 0)
		return 0;
	int rc = starpu_opencl_load_opencl_from_string(opencl_source, &kmeans_program, "");
	if (rc == 0)
		kmeans_program_loaded = 1;
	return rc;
#else
	(void)opencl_source;
	return 0;
#endif
}

/* After the last task. */
void plb_kmeans_fini(void)
{
#ifdef STARPU_USE_OPENCL
	if (kmeans_program_loaded)
		starpu_opencl_unload_opencl(&kmeans_program);
	kmeans_program_loaded = 0;
#endif
}
