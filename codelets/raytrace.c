/*
 * raytrace.c - codelet of `plb app raytrace`: a block of rows of a
 * size x size ray-traced image (irregular: a ray into the sky costs one
 * round of sphere tests, a ray between facing mirrors up to 16 rounds).
 *
 * The scene (the same numbers as plb_core::kernels::raytrace, the double
 * precision reference): a ground sphere and five spheres, four of them
 * mirrors, one point light with shadow rays, reflections followed up to 8
 * bounces (a loop, no recursion, so that OpenCL and CUDA run it too).
 *
 * Buffer 0 (StarPU vector interface, float, 3 per pixel: RGB): the
 * block's rows, read-write; its first row is cl_arg->offset. Colours are
 * *added* (the sky is never black, so a lost row stays 0 and a repeated
 * one doubles). Parameters: struct plb_rt_params (the image size).
 *
 * CPU: scalar loop. OpenCL: one work-item per pixel. CUDA:
 * raytrace_cuda.cu, only when built with nvcc.
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"
#include "raytrace_scene.h"

struct plb_rt_params {
	uint32_t size;
};

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_RT_CUDA 1
void plb_rt_cuda(void *buffers[], void *arg);
#endif

static void rt_cpu(void *buffers[], void *arg)
{
	const struct plb_app_task *task = arg;
	const struct plb_rt_params *prm = plb_app_params(arg);
	float *out = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	size_t size = prm->size;
	size_t rows = STARPU_VECTOR_GET_NX(buffers[0]) / (3 * size);
	double t0 = plb_app_start();
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < size; c++)
			plb_rt_pixel(task->offset + r, c, size, out + 3 * (r * size + c));
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static const char *rt_opencl_source =
	"#pragma OPENCL FP_CONTRACT OFF\n"
	"#define N 6\n"
	"__constant float scene[N][8] = {\n"
	"    { 0.0f, -1002.0f, -6.0f, 1000.0f, 0.6f, 0.6f, 0.6f, 0.3f },\n"
	"    { -1.0f, -0.6f, -4.0f, 0.9f, 0.9f, 0.3f, 0.3f, 0.8f },\n"
	"    { 0.9f, -1.0f, -3.5f, 0.6f, 0.3f, 0.9f, 0.3f, 0.9f },\n"
	"    { -0.2f, 0.8f, -5.5f, 0.7f, 0.3f, 0.3f, 0.9f, 0.6f },\n"
	"    { 1.6f, 0.3f, -6.0f, 0.8f, 0.9f, 0.9f, 0.2f, 0.0f },\n"
	"    { -1.8f, 1.2f, -7.0f, 0.5f, 0.8f, 0.8f, 0.8f, 0.9f } };\n"
	"float hit(int i, float3 o, float3 d)\n"
	"{\n"
	"    float3 oc = o - (float3)(scene[i][0], scene[i][1], scene[i][2]);\n"
	"    float b = dot(oc, d), len = length(oc);\n"
	"    float c = (len - scene[i][3]) * (len + scene[i][3]);\n"
	"    float disc = b * b - c;\n"
	"    if (disc < 0.0f) return -1.0f;\n"
	"    float sq = sqrt(disc);\n"
	"    float q = b > 0.0f ? -b - sq : -b + sq;\n"
	"    if (q == 0.0f) return -1.0f;\n"
	"    float t0 = c / q, t1 = q;\n"
	"    float near = fmin(t0, t1), far = fmax(t0, t1);\n"
	"    float t = near > 1e-4f ? near : far;\n"
	"    return t > 1e-4f ? t : -1.0f;\n"
	"}\n"
	"__kernel void plb_raytrace(int size, int first, int rows, __global float *out, int off)\n"
	"{\n"
	"    int col = get_global_id(0), r = get_global_id(1);\n"
	"    if (col >= size || r >= rows) return;\n"
	"    float px = -1.0f + ((float)col + 0.5f) * 2.0f / (float)size;\n"
	"    float py = 1.0f - ((float)(first + r) + 0.5f) * 2.0f / (float)size;\n"
	"    float3 d = normalize((float3)(px, py, -1.5f)), o = (float3)(0.0f);\n"
	"    float3 acc = (float3)(0.0f);\n"
	"    float weight = 1.0f;\n"
	"    for (int depth = 0; depth < 8; depth++) {\n"
	"        int best = -1; float tbest = 0.0f;\n"
	"        for (int i = 0; i < N; i++) {\n"
	"            float t = hit(i, o, d);\n"
	"            if (t > 0.0f && (best < 0 || t < tbest)) { best = i; tbest = t; }\n"
	"        }\n"
	"        if (best < 0) { acc += weight * (float3)(0.5f + 0.3f * d.y, 0.7f, 0.9f); break; }\n"
	"        float3 h = o + tbest * d;\n"
	"        float3 n = normalize(h - (float3)(scene[best][0], scene[best][1], scene[best][2]));\n"
	"        h += 1e-3f * n;\n"
	"        float3 tl = (float3)(-4.0f, 6.0f, 0.0f) - h;\n"
	"        float dist = length(tl);\n"
	"        float3 ld = tl / dist;\n"
	"        float lambert = dot(n, ld), shade = 0.1f;\n"
	"        if (lambert > 0.0f) {\n"
	"            int shadowed = 0;\n"
	"            for (int i = 0; i < N; i++) { float t = hit(i, h, ld); if (t > 0.0f && t < dist) shadowed = 1; }\n"
	"            if (!shadowed) shade += 0.9f * lambert;\n"
	"        }\n"
	"        float refl = scene[best][7];\n"
	"        acc += weight * (1.0f - refl) * shade * (float3)(scene[best][4], scene[best][5], scene[best][6]);\n"
	"        if (refl <= 0.0f) break;\n"
	"        weight *= refl;\n"
	"        d = d - 2.0f * dot(d, n) * n;\n"
	"        o = h;\n"
	"    }\n"
	"    int p = off + 3 * (r * size + col);\n"
	"    out[p] += acc.x; out[p + 1] += acc.y; out[p + 2] += acc.z;\n"
	"}\n";

static struct starpu_opencl_program rt_program;
static int rt_program_loaded;

static void rt_opencl(void *buffers[], void *arg)
{
	const struct plb_rt_params *prm = plb_app_params(arg);
	plb_app_opencl_rows(&rt_program, "plb_raytrace", buffers, arg, (cl_int)prm->size,
			    sizeof(float), 3);
}
#endif

static struct starpu_perfmodel rt_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_raytrace",
};

struct starpu_codelet plb_rt_cl = {
	.cpu_funcs = { rt_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { rt_opencl },
#endif
#ifdef PLB_RT_CUDA
	.cuda_funcs = { plb_rt_cuda },
#endif
	.nbuffers = 1,
	.modes = { STARPU_RW },
	.model = &rt_model,
	.name = "plb_raytrace",
};

PLB_APP_OPENCL_INIT_FINI(plb_rt_init, plb_rt_fini, rt_program, rt_opencl_source)
