/*
 * blackscholes.c - codelet of `plb app blackscholes`: closed-form prices of
 * a block of European options.
 *
 * Buffers (StarPU vector interface, float, one element per option):
 *   0: spot price S, read        1: strike X, read      2: years T, read
 *   3: call price, read-write    4: put price, read-write
 * Parameters (cl_arg->params): struct plb_bs_params (riskless rate,
 * volatility). Prices are *added* to the outputs (which start at zero), so
 * a block computed twice is a wrong result, not a silent repeat.
 *
 * CND: the Abramowitz-Stegun polynomial (26.2.17, |error| < 7.5e-8).
 * CPU: a loop gcc vectorises (expf/logf through glibc's libmvec; an AVX2
 * clone chosen at run time by CPU feature: about 200 Moptions/s per core
 * against 72 for the SSE2 one). OpenCL: one work-item per option. CUDA:
 * blackscholes_cuda.cu, only when built with nvcc.
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stddef.h>
#include <starpu.h>
#include "plb_app.h"

struct plb_bs_params {
	float riskfree;
	float volatility;
};

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_BS_CUDA 1
void plb_bs_cuda(void *buffers[], void *arg);
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* glibc's libmvec has vector versions of these; declaring them lets gcc
 * vectorise the loop below without -ffast-math. "avx2", not "arch=haswell":
 * the latter is a CPU model test that fails on AMD processors. flatten:
 * cnd() must be inlined into each clone for the loop to vectorise. */
float expf(float) __attribute__((simd("notinbranch")));
float logf(float) __attribute__((simd("notinbranch")));
#define PLB_BS_CLONES __attribute__((target_clones("avx2", "default"), flatten))
#else
#define PLB_BS_CLONES
#endif

static inline float cnd(float d)
{
	const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f;
	const float a4 = -1.821255978f, a5 = 1.330274429f;
	const float rsqrt2pi = 0.39894228040143267794f;
	float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
	float c = rsqrt2pi * expf(-0.5f * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
	return d > 0 ? 1.0f - c : c;
}

PLB_BS_CLONES
static void bs_block(const float *restrict s, const float *restrict x, const float *restrict t,
		     float *restrict call, float *restrict put, size_t n, float r, float v)
{
	for (size_t i = 0; i < n; i++) {
		float sqrt_t = sqrtf(t[i]);
		float d1 = (logf(s[i] / x[i]) + (r + 0.5f * v * v) * t[i]) / (v * sqrt_t);
		float d2 = d1 - v * sqrt_t;
		float c1 = cnd(d1), c2 = cnd(d2);
		float discounted = x[i] * expf(-r * t[i]);
		call[i] += s[i] * c1 - discounted * c2;
		put[i] += discounted * (1.0f - c2) - s[i] * (1.0f - c1);
	}
}

static void bs_cpu(void *buffers[], void *arg)
{
	const struct plb_bs_params *p = plb_app_params(arg);
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	double t0 = plb_app_start();
	bs_block((const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
		 (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
		 (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
		 (float *)STARPU_VECTOR_GET_PTR(buffers[3]), (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
		 n, p->riskfree, p->volatility);
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static const char *bs_opencl_source =
	"float cnd(float d)\n"
	"{\n"
	"    const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f;\n"
	"    const float a4 = -1.821255978f, a5 = 1.330274429f;\n"
	"    float k = 1.0f / (1.0f + 0.2316419f * fabs(d));\n"
	"    float c = 0.39894228040143267794f * exp(-0.5f * d * d)\n"
	"              * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));\n"
	"    return d > 0 ? 1.0f - c : c;\n"
	"}\n"
	"__kernel void plb_blackscholes(int n, float r, float v,\n"
	"    __global const float *s, int off_s, __global const float *x, int off_x,\n"
	"    __global const float *t, int off_t, __global float *call, int off_c,\n"
	"    __global float *put, int off_p)\n"
	"{\n"
	"    int i = get_global_id(0);\n"
	"    if (i >= n) return;\n"
	"    float si = s[off_s + i], xi = x[off_x + i], ti = t[off_t + i];\n"
	"    float sqrt_t = sqrt(ti);\n"
	"    float d1 = (log(si / xi) + (r + 0.5f * v * v) * ti) / (v * sqrt_t);\n"
	"    float d2 = d1 - v * sqrt_t;\n"
	"    float c1 = cnd(d1), c2 = cnd(d2);\n"
	"    float discounted = xi * exp(-r * ti);\n"
	"    call[off_c + i] += si * c1 - discounted * c2;\n"
	"    put[off_p + i] += discounted * (1.0f - c2) - si * (1.0f - c1);\n"
	"}\n";

static struct starpu_opencl_program bs_program;
static int bs_program_loaded;

static void bs_opencl(void *buffers[], void *arg)
{
	const struct plb_bs_params *p = plb_app_params(arg);
	plb_app_opencl_options(&bs_program, "plb_blackscholes", buffers, arg, p->riskfree,
			       p->volatility);
}
#endif

static struct starpu_perfmodel bs_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_blackscholes",
};

struct starpu_codelet plb_bs_cl = {
	.cpu_funcs = { bs_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { bs_opencl },
#endif
#ifdef PLB_BS_CUDA
	.cuda_funcs = { plb_bs_cuda },
#endif
	.nbuffers = 5,
	.modes = { STARPU_R, STARPU_R, STARPU_R, STARPU_RW, STARPU_RW },
	.model = &bs_model,
	.name = "plb_blackscholes",
};

PLB_APP_OPENCL_INIT_FINI(plb_bs_init, plb_bs_fini, bs_program, bs_opencl_source)
