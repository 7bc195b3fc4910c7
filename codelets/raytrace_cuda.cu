/*
 * raytrace_cuda.cu - CUDA implementation of the ray-tracing codelet (see
 * raytrace.c for the scene, the buffer and parameters): one thread per
 * pixel. Compiled only when build.rs finds nvcc, and used only with a
 * StarPU built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

struct plb_rt_params {
	uint32_t size;
};

#define N 6
__constant__ float scene[N][8] = {
	{ 0.0f, -1002.0f, -6.0f, 1000.0f, 0.6f, 0.6f, 0.6f, 0.3f },
	{ -1.0f, -0.6f, -4.0f, 0.9f, 0.9f, 0.3f, 0.3f, 0.8f },
	{ 0.9f, -1.0f, -3.5f, 0.6f, 0.3f, 0.9f, 0.3f, 0.9f },
	{ -0.2f, 0.8f, -5.5f, 0.7f, 0.3f, 0.3f, 0.9f, 0.6f },
	{ 1.6f, 0.3f, -6.0f, 0.8f, 0.9f, 0.9f, 0.2f, 0.0f },
	{ -1.8f, 1.2f, -7.0f, 0.5f, 0.8f, 0.8f, 0.8f, 0.9f },
};

__device__ static float hit(int i, const float *o, const float *d)
{
	float oc[3] = { o[0] - scene[i][0], o[1] - scene[i][1], o[2] - scene[i][2] };
	float b = oc[0] * d[0] + oc[1] * d[1] + oc[2] * d[2];
	float len = sqrtf(oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2]);
	float c = (len - scene[i][3]) * (len + scene[i][3]);
	float disc = b * b - c;
	if (disc < 0.0f)
		return -1.0f;
	float sq = sqrtf(disc);
	float q = b > 0.0f ? -b - sq : -b + sq;
	if (q == 0.0f)
		return -1.0f;
	float t0 = c / q, t1 = q;
	float near = fminf(t0, t1), far = fmaxf(t0, t1);
	float t = near > 1e-4f ? near : far;
	return t > 1e-4f ? t : -1.0f;
}

__global__ static void rt_kernel(int size, int first, int rows, float *out)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (col >= size || r >= rows)
		return;
	float px = -1.0f + ((float)col + 0.5f) * 2.0f / (float)size;
	float py = 1.0f - ((float)(first + r) + 0.5f) * 2.0f / (float)size;
	float l = sqrtf(px * px + py * py + 2.25f);
	float d[3] = { px / l, py / l, -1.5f / l }, o[3] = { 0.0f, 0.0f, 0.0f };
	float acc[3] = { 0.0f, 0.0f, 0.0f }, weight = 1.0f;
	for (int depth = 0; depth < 8; depth++) {
		int best = -1;
		float tbest = 0.0f;
		for (int i = 0; i < N; i++) {
			float t = hit(i, o, d);
			if (t > 0.0f && (best < 0 || t < tbest)) {
				best = i;
				tbest = t;
			}
		}
		if (best < 0) {
			acc[0] += weight * (0.5f + 0.3f * d[1]);
			acc[1] += weight * 0.7f;
			acc[2] += weight * 0.9f;
			break;
		}
		float h[3] = { o[0] + tbest * d[0], o[1] + tbest * d[1], o[2] + tbest * d[2] };
		float n[3] = { h[0] - scene[best][0], h[1] - scene[best][1], h[2] - scene[best][2] };
		float nl = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
		for (int k = 0; k < 3; k++) {
			n[k] /= nl;
			h[k] += 1e-3f * n[k];
		}
		float tl[3] = { -4.0f - h[0], 6.0f - h[1], -h[2] };
		float dist = sqrtf(tl[0] * tl[0] + tl[1] * tl[1] + tl[2] * tl[2]);
		float ld[3] = { tl[0] / dist, tl[1] / dist, tl[2] / dist };
		float lambert = n[0] * ld[0] + n[1] * ld[1] + n[2] * ld[2];
		float shade = 0.1f;
		if (lambert > 0.0f) {
			int shadowed = 0;
			for (int i = 0; i < N; i++) {
				float t = hit(i, h, ld);
				if (t > 0.0f && t < dist)
					shadowed = 1;
			}
			if (!shadowed)
				shade += 0.9f * lambert;
		}
		float refl = scene[best][7];
		float w = weight * (1.0f - refl) * shade;
		for (int k = 0; k < 3; k++)
			acc[k] += w * scene[best][4 + k];
		if (refl <= 0.0f)
			break;
		weight *= refl;
		float dn = -2.0f * (d[0] * n[0] + d[1] * n[1] + d[2] * n[2]);
		for (int k = 0; k < 3; k++) {
			d[k] += dn * n[k];
			o[k] = h[k];
		}
	}
	float *p = out + 3 * ((size_t)r * size + col);
	p[0] += acc[0], p[1] += acc[1], p[2] += acc[2];
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
	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		STARPU_CUDA_REPORT_ERROR(err);
	cudaStreamSynchronize(stream);
	plb_app_finish(arg, t0);
}

#endif
