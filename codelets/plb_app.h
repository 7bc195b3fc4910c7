/*
 * plb_app.h - what every application codelet of `plb app` shares with the
 * Rust framework (src/apps/mod.rs).
 *
 * Each task's cl_arg points to a struct plb_app_task (the Rust `TaskArg`,
 * same layout). A codelet implementation:
 *
 *     static void my_cpu(void *buffers[], void *arg)
 *     {
 *         double t0 = plb_app_start();
 *         ... the work on buffers[] ...
 *         plb_app_finish(arg, t0);   // kernel time + emulation, worker id
 *     }
 *
 * For OpenCL and CUDA, call plb_app_finish after clFinish / the stream
 * synchronisation so the measured time covers the kernel.
 *
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_APP_H
#define PLB_APP_H

#include <stdint.h>
#include <starpu.h>

struct plb_app_task {
	/* Out: seconds spent in the kernel, emulated extra time included. */
	double compute_s;
	/* Out: the StarPU worker that ran the task. */
	int32_t worker;
	/* In: the block's first unit and number of units. */
	uint64_t offset;
	uint64_t len;
	/* In: the application's parameters (read-only), may be NULL. */
	const void *params;
};

/* Heterogeneity emulation (PLB_EMULATE): busy-waits the extra time of the
 * calling worker for a body that took elapsed_s, returns the added
 * seconds (0 when no emulation is active). Exported by the policy crate. */
#ifdef __cplusplus
extern "C"
#endif
double plb_emulate_after(double elapsed_s);

/* Start of the measured part of a codelet (microseconds). */
static inline double plb_app_start(void)
{
	return starpu_timing_now();
}

/* End of the measured part: applies the emulation and records the time and
 * the worker in the task's argument. */
static inline void plb_app_finish(void *cl_arg, double t0_us)
{
	struct plb_app_task *task = (struct plb_app_task *)cl_arg;
	double elapsed = (starpu_timing_now() - t0_us) / 1e6;
	if (elapsed < 0)
		elapsed = 0;
	task->compute_s = elapsed + plb_emulate_after(elapsed);
	task->worker = starpu_worker_get_id();
}

static inline const void *plb_app_params(void *cl_arg)
{
	return ((const struct plb_app_task *)cl_arg)->params;
}

#if defined(STARPU_USE_OPENCL) && !defined(__CUDACC__)
/* Loads (compiles) an OpenCL program for every OpenCL worker; nothing to do
 * when there is none. Returns 0 or a negative error code. */
static inline int plb_app_opencl_load(struct starpu_opencl_program *program, const char *source,
				      int *loaded)
{
	*loaded = 0;
	if (starpu_opencl_worker_get_count() == 0)
		return 0;
	int rc = starpu_opencl_load_opencl_from_string(source, program, "-cl-mad-enable");
	if (rc == 0)
		*loaded = 1;
	return rc;
}

static inline void plb_app_opencl_unload(struct starpu_opencl_program *program, int *loaded)
{
	if (*loaded)
		starpu_opencl_unload_opencl(program);
	*loaded = 0;
}

/* Loads kernel `name` of `program` for the calling OpenCL worker (its
 * queue in *queue); reports and aborts on error, as StarPU's examples do. */
static inline cl_kernel plb_app_opencl_kernel(struct starpu_opencl_program *program,
					      const char *name, cl_command_queue *queue)
{
	cl_kernel kernel;
	int devid = starpu_worker_get_devid(starpu_worker_get_id());
	cl_int err = starpu_opencl_load_kernel(&kernel, queue, program, name, devid);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	return kernel;
}

/* Sets the kernel's arguments *arg, *arg + 1, ... to (cl_mem, offset in
 * elements of elem bytes) of each of the n vector buffers, advancing *arg;
 * returns the OR of the errors. */
static inline cl_int plb_app_opencl_vectors(cl_kernel kernel, int *arg, void *buffers[], int n,
					    size_t elem)
{
	cl_int err = CL_SUCCESS;
	for (int i = 0; i < n; i++) {
		cl_mem mem = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[i]);
		cl_int off = (cl_int)(STARPU_VECTOR_GET_OFFSET(buffers[i]) / elem);
		err |= clSetKernelArg(kernel, (*arg)++, sizeof(mem), &mem);
		err |= clSetKernelArg(kernel, (*arg)++, sizeof(off), &off);
	}
	return err;
}

/* Runs kernel over dims dimensions of global work items (local may be NULL),
 * waits for it, releases it and reports the task's time since t0_us
 * (plb_app_finish): the end every OpenCL codelet shares. */
static inline void plb_app_opencl_run(cl_command_queue queue, cl_kernel kernel, cl_uint dims,
				      const size_t *global, const size_t *local, void *cl_arg,
				      double t0_us)
{
	cl_int err = clEnqueueNDRangeKernel(queue, kernel, dims, NULL, global, local, 0, NULL, NULL);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	clFinish(queue);
	starpu_opencl_release_kernel(kernel);
	plb_app_finish(cl_arg, t0_us);
}

/* One task of a 1-D option-pricing kernel (binomial, Black-Scholes):
 * arguments (n, r, v, S, X, T, call, put), the five vectors as (cl_mem,
 * offset); work-groups of 64 options. */
static inline void plb_app_opencl_options(struct starpu_opencl_program *program, const char *name,
					  void *buffers[], void *cl_arg, cl_float r, cl_float v)
{
	cl_int n = (cl_int)STARPU_VECTOR_GET_NX(buffers[0]);
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_kernel kernel = plb_app_opencl_kernel(program, name, &queue);
	int a = 0;
	cl_int err = clSetKernelArg(kernel, a++, sizeof(n), &n);
	err |= clSetKernelArg(kernel, a++, sizeof(r), &r);
	err |= clSetKernelArg(kernel, a++, sizeof(v), &v);
	err |= plb_app_opencl_vectors(kernel, &a, buffers, 5, sizeof(float));
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t local = 64;
	size_t global = ((size_t)n + local - 1) / local * local;
	plb_app_opencl_run(queue, kernel, 1, &global, &local, cl_arg, t0);
}

/* One task of a row kernel (Mandelbrot, ray tracing): arguments (size,
 * first row, rows, image) with the block's rows of a size x size image in
 * the one vector buffer (elem bytes a pixel's value, values_per_pixel of
 * them); work-groups of 64 pixels of one row. */
static inline void plb_app_opencl_rows(struct starpu_opencl_program *program, const char *name,
				       void *buffers[], void *cl_arg, cl_int size, size_t elem,
				       size_t values_per_pixel)
{
	const struct plb_app_task *task = cl_arg;
	cl_int rows = (cl_int)(STARPU_VECTOR_GET_NX(buffers[0]) / (values_per_pixel * (size_t)size));
	cl_int first = (cl_int)task->offset;
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_kernel kernel = plb_app_opencl_kernel(program, name, &queue);
	int a = 0;
	cl_int err = clSetKernelArg(kernel, a++, sizeof(size), &size);
	err |= clSetKernelArg(kernel, a++, sizeof(first), &first);
	err |= clSetKernelArg(kernel, a++, sizeof(rows), &rows);
	err |= plb_app_opencl_vectors(kernel, &a, buffers, 1, elem);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t local[2] = { 64, 1 };
	size_t global[2] = { ((size_t)size + 63) / 64 * 64, (size_t)rows };
	plb_app_opencl_run(queue, kernel, 2, global, local, cl_arg, t0);
}
#endif

/* The plb_*_init / plb_*_fini pair of a codelet whose OpenCL program is
 * `prog` (with its `prog##_loaded` flag) built from `source`: loaded for
 * every OpenCL worker after starpu_init, unloaded before the shutdown;
 * nothing to do without OpenCL. */
#if defined(STARPU_USE_OPENCL) && !defined(__CUDACC__)
#define PLB_APP_OPENCL_INIT_FINI(init, fini, prog, source)                  \
	int init(void)                                                      \
	{                                                                   \
		return plb_app_opencl_load(&prog, source, &prog##_loaded);  \
	}                                                                   \
	void fini(void)                                                     \
	{                                                                   \
		plb_app_opencl_unload(&prog, &prog##_loaded);               \
	}
#else
#define PLB_APP_OPENCL_INIT_FINI(init, fini, prog, source) \
	int init(void)                                     \
	{                                                  \
		return 0;                                  \
	}                                                  \
	void fini(void)                                    \
	{                                                  \
	}
#endif

#if defined(__CUDACC__) && defined(STARPU_USE_CUDA)
/* After a kernel launch on the worker's stream: reports a launch error,
 * waits for the stream and reports the task's time since t0_us
 * (plb_app_finish): the end every CUDA codelet shares. */
static inline void plb_app_cuda_finish(cudaStream_t stream, void *cl_arg, double t0_us)
{
	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		STARPU_CUDA_REPORT_ERROR(err);
	cudaStreamSynchronize(stream);
	plb_app_finish(cl_arg, t0_us);
}
#endif

#endif /* PLB_APP_H */
