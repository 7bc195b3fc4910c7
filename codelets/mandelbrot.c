/*
 * mandelbrot.c - codelet of `plb app mandelbrot`: escape counts of a block
 * of rows of a size x size image of the region x in [-2, 0.6), y in
 * [-1.3, 1.3), at most 1024 iterations (irregular: a row through the set
 * costs up to 1024 iterations per pixel, a row above it a few).
 *
 * Buffer 0 (StarPU vector interface, uint32, size values per row): the
 * block's rows, read-write; its first row is cl_arg->offset. Each pixel
 * gets *added* its iterations + 1, so a lost row stays 0 and a repeated
 * one doubles. Parameters: struct plb_mandel_params (the image size).
 *
 * CPU: scalar loop. OpenCL: one work-item per pixel. CUDA:
 * mandelbrot_cuda.cu, only when built with nvcc. Reference:
 * plb_core::kernels::mandelbrot (double precision).
 *
 * License: LGPL-2.1-or-later.
 */
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>
#include "plb_app.h"

#define PLB_MANDEL_MAX_ITER 1024

struct plb_mandel_params {
	uint32_t size;
};

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_MANDEL_CUDA 1
void plb_mandel_cuda(void *buffers[], void *arg);
#endif

static void mandel_cpu(void *buffers[], void *arg)
{
	const struct plb_app_task *task = arg;
	const struct plb_mandel_params *prm = plb_app_params(arg);
	uint32_t *out = (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[0]);
	size_t size = prm->size;
	size_t rows = STARPU_VECTOR_GET_NX(buffers[0]) / size;
	float step = 2.6f / (float)size;
	double t0 = plb_app_start();
	for (size_t r = 0; r < rows; r++) {
		float cy = -1.3f + ((float)(task->offset + r) + 0.5f) * step;
		for (size_t c = 0; c < size; c++) {
			float cx = -2.0f + ((float)c + 0.5f) * step;
			float x = 0.0f, y = 0.0f;
			uint32_t it = 0;
			while (it < PLB_MANDEL_MAX_ITER && x * x + y * y <= 4.0f) {
				float xt = x * x - y * y + cx;
				y = 2.0f * x * y + cy;
				x = xt;
				it++;
			}
			out[r * size + c] += it + 1;
		}
	}
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
static const char *mandel_opencl_source =
	"#pragma OPENCL FP_CONTRACT OFF\n"
	"__kernel void plb_mandelbrot(int size, int first, int rows,\n"
	"    __global uint *out, int off)\n"
	"{\n"
	"    int c = get_global_id(0), r = get_global_id(1);\n"
	"    if (c >= size || r >= rows) return;\n"
	"    float step = 2.6f / (float)size;\n"
	"    float cx = -2.0f + ((float)c + 0.5f) * step;\n"
	"    float cy = -1.3f + ((float)(first + r) + 0.5f) * step;\n"
	"    float x = 0.0f, y = 0.0f;\n"
	"    uint it = 0;\n"
	"    while (it < 1024 && x * x + y * y <= 4.0f) {\n"
	"        float xt = x * x - y * y + cx;\n"
	"        y = 2.0f * x * y + cy;\n"
	"        x = xt;\n"
	"        it++;\n"
	"    }\n"
	"    out[off + r * size + c] += it + 1;\n"
	"}\n";

static struct starpu_opencl_program mandel_program;
static int mandel_program_loaded;

static void mandel_opencl(void *buffers[], void *arg)
{
	const struct plb_mandel_params *prm = plb_app_params(arg);
	plb_app_opencl_rows(&mandel_program, "plb_mandelbrot", buffers, arg, (cl_int)prm->size,
			    sizeof(uint32_t), 1);
}
#endif

static struct starpu_perfmodel mandel_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_mandelbrot",
};

struct starpu_codelet plb_mandel_cl = {
	.cpu_funcs = { mandel_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { mandel_opencl },
#endif
#ifdef PLB_MANDEL_CUDA
	.cuda_funcs = { plb_mandel_cuda },
#endif
	.nbuffers = 1,
	.modes = { STARPU_RW },
	.model = &mandel_model,
	.name = "plb_mandelbrot",
};

PLB_APP_OPENCL_INIT_FINI(plb_mandel_init, plb_mandel_fini, mandel_program, mandel_opencl_source)
