/*
 * mandelbrot_cuda.cu - CUDA implementation of the Mandelbrot codelet (see
 * mandelbrot.c for the buffer and parameters): one thread per pixel, no
 * fused multiply-add (so that it matches the single-precision reference).
 * Compiled only when build.rs finds nvcc, and used only with a StarPU
 * built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

struct plb_mandel_params {
	uint32_t size;
};

__global__ static void mandel_kernel(int size, int first, int rows, uint32_t *out)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (c >= size || r >= rows)
		return;
	float step = __fdiv_rn(2.6f, (float)size);
	float cx = __fadd_rn(-2.0f, __fmul_rn((float)c + 0.5f, step));
	float cy = __fadd_rn(-1.3f, __fmul_rn((float)(first + r) + 0.5f, step));
	float x = 0.0f, y = 0.0f;
	uint32_t it = 0;
	while (it < 1024 && __fadd_rn(__fmul_rn(x, x), __fmul_rn(y, y)) <= 4.0f) {
		float xt = __fadd_rn(__fsub_rn(__fmul_rn(x, x), __fmul_rn(y, y)), cx);
		y = __fadd_rn(__fmul_rn(__fmul_rn(2.0f, x), y), cy);
		x = xt;
		it++;
	}
	out[(size_t)r * size + c] += it + 1;
}

extern "C" void plb_mandel_cuda(void *buffers[], void *arg)
{
	const struct plb_app_task *task = static_cast<const struct plb_app_task *>(arg);
	const struct plb_mandel_params *prm =
		static_cast<const struct plb_mandel_params *>(plb_app_params(arg));
	int size = (int)prm->size;
	int rows = (int)(STARPU_VECTOR_GET_NX(buffers[0]) / prm->size);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	dim3 grid((size + 127) / 128, rows);
	mandel_kernel<<<grid, 128, 0, stream>>>(size, (int)task->offset, rows,
						(uint32_t *)STARPU_VECTOR_GET_PTR(buffers[0]));
	plb_app_cuda_finish(stream, arg, t0);
}

#endif
