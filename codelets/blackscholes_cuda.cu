/*
 * blackscholes_cuda.cu - CUDA implementation of the Black-Scholes codelet
 * (see blackscholes.c for buffers and parameters). Compiled only when
 * build.rs finds nvcc, and used only with a StarPU built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

struct plb_bs_params {
	float riskfree;
	float volatility;
};

__device__ static float cnd(float d)
{
	const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f;
	const float a4 = -1.821255978f, a5 = 1.330274429f;
	float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
	float c = 0.39894228040143267794f * __expf(-0.5f * d * d) *
		  (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
	return d > 0 ? 1.0f - c : c;
}

__global__ static void bs_kernel(int n, float r, float v, const float *s, const float *x,
				 const float *t, float *call, float *put)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float sqrt_t = sqrtf(t[i]);
	float d1 = (__logf(s[i] / x[i]) + (r + 0.5f * v * v) * t[i]) / (v * sqrt_t);
	float d2 = d1 - v * sqrt_t;
	float c1 = cnd(d1), c2 = cnd(d2);
	float discounted = x[i] * __expf(-r * t[i]);
	call[i] += s[i] * c1 - discounted * c2;
	put[i] += discounted * (1.0f - c2) - s[i] * (1.0f - c1);
}

extern "C" void plb_bs_cuda(void *buffers[], void *arg)
{
	const struct plb_bs_params *p = static_cast<const struct plb_bs_params *>(plb_app_params(arg));
	int n = (int)STARPU_VECTOR_GET_NX(buffers[0]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	int threads = 256;
	bs_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(
		n, p->riskfree, p->volatility, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[2]), (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
		(float *)STARPU_VECTOR_GET_PTR(buffers[4]));
	plb_app_cuda_finish(stream, arg, t0);
}

#endif
