/*
 * nbody.c - codelet of `plb app nbody`: one all-pairs gravitational step,
 * the acceleration of a block of bodies from every body (regular: every
 * body costs n interactions).
 *
 * Buffers (StarPU vector interface, float):
 *   0: every body, 4 floats each (x, y, z, mass), read (replicated: the
 *      same handle for every block)
 *   1: the block's accelerations, 4 floats per body (ax, ay, az, count),
 *      read-write
 * The block's first body is cl_arg->offset. Accelerations are *added*
 * and the fourth float counts the computations (1 when right; a lost
 * block leaves 0, a repeated one 2).
 *
 * a_i = sum_j m_j d / (|d|^2 + eps^2)^(3/2), d = p_j - p_i, eps^2 = 1e-3.
 * CPU: a loop over j gcc vectorises. OpenCL: one work-item per body. CUDA:
 * nbody_cuda.cu, only when built with nvcc. Reference:
 * plb_core::kernels::nbody (double precision).
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"

#define PLB_NBODY_SOFTENING2 1e-3f

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_NBODY_CUDA 1
void plb_nbody_cuda(void *buffers[], void *arg);
#endif

static void nbody_cpu(void *buffers[], void *arg)
{
	const struct plb_app_task *task = arg;
	const float *pos = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]) / 4;
	float *acc = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	size_t len = STARPU_VECTOR_GET_NX(buffers[1]) / 4;
	double t0 = plb_app_start();
	for (size_t b = 0; b < len; b++) {
		const float *p = pos + 4 * (task->offset + b);
		float ax = 0, ay = 0, az = 0;
		for (size_t j = 0; j < n; j++) {
			float dx = pos[4 * j] - p[0], dy = pos[4 * j + 1] - p[1], dz = pos[4 * j + 2] - p[2];
			float r2 = dx * dx + dy * dy + dz * dz + PLB_NBODY_SOFTENING2;
			float inv = pos[4 * j + 3] / (r2 * sqrtf(r2));
			ax += dx * inv;
			ay += dy * inv;
			az += dz * inv;
		}
		acc[4 * b] += ax;
		acc[4 * b + 1] += ay;
		acc[4 * b + 2] += az;
		acc[4 * b + 3] += 1.0f;
	}
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static const char *nbody_opencl_source =
	"__kernel void plb_nbody(int n, int len, int first,\n"
	"    __global const float4 *pos, int off_p, __global float4 *acc, int off_a)\n"
	"{\n"
	"    int b = get_global_id(0);\n"
	"    if (b >= len) return;\n"
	"    pos += off_p;\n"
	"    float4 p = pos[first + b];\n"
	"    float3 a = (float3)(0.0f);\n"
	"    for (int j = 0; j < n; j++) {\n"
	"        float4 q = pos[j];\n"
	"        float3 d = q.xyz - p.xyz;\n"
	"        float r2 = dot(d, d) + 1e-3f;\n"
	"        a += d * (q.w / (r2 * sqrt(r2)));\n"
	"    }\n"
	"    acc[off_a + b] += (float4)(a, 1.0f);\n"
	"}\n";

static struct starpu_opencl_program nbody_program;
static int nbody_program_loaded;

static void nbody_opencl(void *buffers[], void *arg)
{
	const struct plb_app_task *task = arg;
	cl_int n = (cl_int)(STARPU_VECTOR_GET_NX(buffers[0]) / 4);
	cl_int len = (cl_int)(STARPU_VECTOR_GET_NX(buffers[1]) / 4);
	cl_int first = (cl_int)task->offset;
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_kernel kernel = plb_app_opencl_kernel(&nbody_program, "plb_nbody", &queue);
	int a = 0;
	cl_int err = clSetKernelArg(kernel, a++, sizeof(n), &n);
	err |= clSetKernelArg(kernel, a++, sizeof(len), &len);
	err |= clSetKernelArg(kernel, a++, sizeof(first), &first);
	err |= plb_app_opencl_vectors(kernel, &a, buffers, 2, 4 * sizeof(float));
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t local = 64;
	size_t global = ((size_t)len + local - 1) / local * local;
	plb_app_opencl_run(queue, kernel, 1, &global, &local, arg, t0);
}
#endif

static struct starpu_perfmodel nbody_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_nbody",
};

struct starpu_codelet plb_nbody_cl = {
	.cpu_funcs = { nbody_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { nbody_opencl },
#endif
#ifdef PLB_NBODY_CUDA
	.cuda_funcs = { plb_nbody_cuda },
#endif
	.nbuffers = 2,
	.modes = { STARPU_R, STARPU_RW },
	.model = &nbody_model,
	.name = "plb_nbody",
};

PLB_APP_OPENCL_INIT_FINI(plb_nbody_init, plb_nbody_fini, nbody_program, nbody_opencl_source)
