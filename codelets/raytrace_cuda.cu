/*
 * raytrace_cuda.cu - CUDA implementation of the ray-tracing codelet (see
 * raytrace.c for the buffer and parameters, raytrace_scene.h for the
 * scene and the tracer it shares with the CPU codelet): one thread per
 * pixel. Compiled only when build.rs finds nvcc, and used only with a
 * StarPU built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"
#include "raytrace_scene.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

struct plb_rt_params {
	uint32_t size;
};

__global__ static void rt_kernel(int size, int first, int rows, float *out)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (col >= size || r >= rows)
		return;
	plb_rt_pixel((size_t)(first + r), (size_t)col, (size_t)size,
		     out + 3 * ((size_t)r * size + col));
}

extern "C" void plb_rt_cuda(void *buffers[], void *arg)
{
	const struct plb_app_task *task = static_cast<const struct plb_app_task *>(arg);
	const struct plb_rt_params *prm = static_cast<const struct plb_rt_params *>(plb_app_params(arg));
	int size = (int)prm->size;
	int rows = (int)(STARPU_VECTOR_GET_NX(buffers[0]) / (3 * prm->size));
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	dim3 grid((size + 127) / 128, rows);
	rt_kernel<<<grid, 128, 0, stream>>>(size, (int)task->offset, rows,
					     (float *)STARPU_VECTOR_GET_PTR(buffers[0]));
	plb_app_cuda_finish(stream, arg, t0);
}

#endif
