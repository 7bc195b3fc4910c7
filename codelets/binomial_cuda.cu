/*
 * binomial_cuda.cu - CUDA implementation of the binomial codelet (see
 * binomial.c for buffers and parameters): one thread per option, its
 * lattice in local memory. Compiled only when build.rs finds nvcc, and
 * used only with a StarPU built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

#define STEPS 254

struct plb_bin_params {
	float riskfree;
	float volatility;
};

__global__ static void bin_kernel(int n, float r, float v, const float *s, const float *x,
				  const float *t, float *call, float *put)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float c[STEPS + 1], p[STEPS + 1];
	float dt = t[i] / STEPS;
	float u = expf(v * sqrtf(dt)), d = 1.0f / u;
	float p_up = (expf(r * dt) - d) / (u - d), disc = expf(-r * dt);
	float pu = disc * p_up, pd = disc * (1.0f - p_up);
	for (int j = 0; j <= STEPS; j++) {
		float st = s[i] * powf(u, (float)(2 * j - STEPS));
		c[j] = fmaxf(st - x[i], 0.0f);
		p[j] = fmaxf(x[i] - st, 0.0f);
	}
	for (int k = STEPS - 1; k >= 0; k--)
		for (int j = 0; j <= k; j++) {
			c[j] = pu * c[j + 1] + pd * c[j];
			p[j] = pu * p[j + 1] + pd * p[j];
		}
	call[i] += c[0];
	put[i] += p[0];
}

extern "C" void plb_bin_cuda(void *buffers[], void *arg)
{
	const struct plb_bin_params *prm =
		static_cast<const struct plb_bin_params *>(plb_app_params(arg));
	int n = (int)STARPU_VECTOR_GET_NX(buffers[0]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	int threads = 128;
	bin_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(
		n, prm->riskfree, prm->volatility, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[2]), (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
		(float *)STARPU_VECTOR_GET_PTR(buffers[4]));
	plb_app_cuda_finish(stream, arg, t0);
}

#endif
