/*
 * nbody_cuda.cu - CUDA implementation of the N-body codelet (see nbody.c
 * for buffers): one thread per body of the block, the bodies staged
 * through shared memory in tiles. Compiled only when build.rs finds nvcc,
 * and used only with a StarPU built with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)

#define TILE 256

__global__ static void nbody_kernel(int n, int len, int first, const float4 *pos, float4 *acc)
{
	__shared__ float4 tile[TILE];
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	float4 p = pos[min(first + b, n - 1)];
	float ax = 0.0f, ay = 0.0f, az = 0.0f;
	for (int base = 0; base < n; base += TILE) {
		int j = base + threadIdx.x;
		tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		__syncthreads();
		for (int k = 0; k < TILE && base + k < n; k++) {
			float4 q = tile[k];
			float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
			float r2 = dx * dx + dy * dy + dz * dz + 1e-3f;
			float inv = q.w * rsqrtf(r2 * r2 * r2);
			ax += dx * inv;
			ay += dy * inv;
			az += dz * inv;
		}
		__syncthreads();
	}
	if (b < len) {
		float4 a = acc[b];
		acc[b] = make_float4(a.x + ax, a.y + ay, a.z + az, a.w + 1.0f);
	}
}

extern "C" void plb_nbody_cuda(void *buffers[], void *arg)
{
	const struct plb_app_task *task = static_cast<const struct plb_app_task *>(arg);
	int n = (int)(STARPU_VECTOR_GET_NX(buffers[0]) / 4);
	int len = (int)(STARPU_VECTOR_GET_NX(buffers[1]) / 4);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	double t0 = plb_app_start();
	nbody_kernel<<<(len + TILE - 1) / TILE, TILE, 0, stream>>>(
		n, len, (int)task->offset, (const float4 *)STARPU_VECTOR_GET_PTR(buffers[0]),
		(float4 *)STARPU_VECTOR_GET_PTR(buffers[1]));
	plb_app_cuda_finish(stream, arg, t0);
}

#endif
