/*
 * binomial.c - codelet of `plb app binomial`: European call and put prices
 * of a block of options on a Cox-Ross-Rubinstein binomial lattice of
 * PLB_BIN_STEPS time steps (regular: every option costs the same).
 *
 * Buffers (StarPU vector interface, float, one element per option):
 *   0: spot S, read     1: strike X, read     2: years T, read
 *   3: call, read-write 4: put, read-write
 * Parameters (cl_arg->params): struct plb_bin_params (riskless rate,
 * volatility). Prices are *added* to the outputs (which start at zero), so
 * a block computed twice is a wrong result, not a silent repeat.
 *
 * CPU: the lattice of one option in two stack arrays (the inner loop over
 * nodes vectorises). OpenCL: one work-item per option, its lattice in
 * private memory. CUDA: binomial_cuda.cu, only when built with nvcc.
 * Reference: plb_core::kernels::binomial (double precision).
 *
 * License: LGPL-2.1-or-later.
 */
#include <math.h>
#include <stddef.h>
#include <starpu.h>
#include "plb_app.h"

#define PLB_BIN_STEPS 254

struct plb_bin_params {
	float riskfree;
	float volatility;
};

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_BIN_CUDA 1
void plb_bin_cuda(void *buffers[], void *arg);
#endif

static void bin_option(float s, float x, float t, float r, float v, float *call, float *put)
{
	float c[PLB_BIN_STEPS + 1], p[PLB_BIN_STEPS + 1];
	float dt = t / PLB_BIN_STEPS;
	float u = expf(v * sqrtf(dt));
	float d = 1.0f / u;
	float p_up = (expf(r * dt) - d) / (u - d);
	float disc = expf(-r * dt);
	float pu = disc * p_up, pd = disc * (1.0f - p_up);
	for (int j = 0; j <= PLB_BIN_STEPS; j++) {
		float st = s * powf(u, (float)(2 * j - PLB_BIN_STEPS));
		c[j] = fmaxf(st - x, 0.0f);
		p[j] = fmaxf(x - st, 0.0f);
	}
	for (int i = PLB_BIN_STEPS - 1; i >= 0; i--)
		for (int j = 0; j <= i; j++) {
			c[j] = pu * c[j + 1] + pd * c[j];
			p[j] = pu * p[j + 1] + pd * p[j];
		}
	*call += c[0];
	*put += p[0];
}

static void bin_cpu(void *buffers[], void *arg)
{
	const struct plb_bin_params *prm = plb_app_params(arg);
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	const float *s = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	const float *t = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	float *call = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	float *put = (float *)STARPU_VECTOR_GET_PTR(buffers[4]);
	double t0 = plb_app_start();
	for (size_t i = 0; i < n; i++)
		bin_option(s[i], x[i], t[i], prm->riskfree, prm->volatility, &call[i], &put[i]);
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static const char *bin_opencl_source =
	"#define STEPS 254\n"
	"__kernel void plb_binomial(int n, float r, float v,\n"
	"    __global const float *s, int off_s, __global const float *x, int off_x,\n"
	"    __global const float *t, int off_t, __global float *call, int off_c,\n"
	"    __global float *put, int off_p)\n"
	"{\n"
	"    int i = get_global_id(0);\n"
	"    if (i >= n) return;\n"
	"    float c[STEPS + 1], p[STEPS + 1];\n"
	"    float si = s[off_s + i], xi = x[off_x + i], dt = t[off_t + i] / STEPS;\n"
	"    float u = exp(v * sqrt(dt)), d = 1.0f / u;\n"
	"    float p_up = (exp(r * dt) - d) / (u - d), disc = exp(-r * dt);\n"
	"    float pu = disc * p_up, pd = disc * (1.0f - p_up);\n"
	"    for (int j = 0; j <= STEPS; j++) {\n"
	"        float st = si * pown(u, 2 * j - STEPS);\n"
	"        c[j] = fmax(st - xi, 0.0f);\n"
	"        p[j] = fmax(xi - st, 0.0f);\n"
	"    }\n"
	"    for (int k = STEPS - 1; k >= 0; k--)\n"
	"        for (int j = 0; j <= k; j++) {\n"
	"            c[j] = pu * c[j + 1] + pd * c[j];\n"
	"            p[j] = pu * p[j + 1] + pd * p[j];\n"
	"        }\n"
	"    call[off_c + i] += c[0];\n"
	"    put[off_p + i] += p[0];\n"
	"}\n";

static struct starpu_opencl_program bin_program;
static int bin_program_loaded;

static void bin_opencl(void *buffers[], void *arg)
{
	const struct plb_bin_params *prm = plb_app_params(arg);
	plb_app_opencl_options(&bin_program, "plb_binomial", buffers, arg, prm->riskfree,
			       prm->volatility);
}
#endif

static struct starpu_perfmodel bin_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_binomial",
};

struct starpu_codelet plb_bin_cl = {
	.cpu_funcs = { bin_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { bin_opencl },
#endif
#ifdef PLB_BIN_CUDA
	.cuda_funcs = { plb_bin_cuda },
#endif
	.nbuffers = 5,
	.modes = { STARPU_R, STARPU_R, STARPU_R, STARPU_RW, STARPU_RW },
	.model = &bin_model,
	.name = "plb_binomial",
};

PLB_APP_OPENCL_INIT_FINI(plb_bin_init, plb_bin_fini, bin_program, bin_opencl_source)
