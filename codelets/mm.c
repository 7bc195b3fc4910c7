/*
 * mm.c - codelet of `plb app mm`: C += A·B on a block of columns.
 *
 * Buffers (StarPU matrix interface, column-major, nx = rows, ny = columns):
 *   0: A, m x k, read (replicated: the same handle for every block)
 *   1: the block's columns of B, k x len, read
 *   2: the block's columns of C, m x len, read-write (C += A·B)
 *
 * CPU: OpenBLAS cblas_sgemm, one thread per worker.
 * OpenCL: our tiled kernel (64 x 8 tiles of C per work-group, tiles of B in
 * local memory).
 * CUDA: cuBLAS, only when built with nvcc (PLB_HAVE_CUDA) against a StarPU
 * with CUDA.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <starpu.h>
#include "plb_app.h"

#if defined(PLB_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define PLB_MM_CUDA 1
#include <cublas_v2.h>
#include <starpu_cublas_v2.h>
#endif

/* CBLAS, declared here so that whichever cblas.h the system selects
 * (netlib or OpenBLAS) does not matter; OpenBLAS is what is linked. */
enum { PLB_CBLAS_COL_MAJOR = 102, PLB_CBLAS_NO_TRANS = 111 };
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
		 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void openblas_set_num_threads(int num_threads);

static void mm_cpu(void *buffers[], void *arg)
{
	const float *a = (const float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const float *b = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	float *c = (float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	int m = (int)STARPU_MATRIX_GET_NX(buffers[0]);
	int k = (int)STARPU_MATRIX_GET_NY(buffers[0]);
	int n = (int)STARPU_MATRIX_GET_NY(buffers[1]);
	double t0 = plb_app_start();
	cblas_sgemm(PLB_CBLAS_COL_MAJOR, PLB_CBLAS_NO_TRANS, PLB_CBLAS_NO_TRANS, m, n, k, 1.0f, a,
		    (int)STARPU_MATRIX_GET_LD(buffers[0]), b, (int)STARPU_MATRIX_GET_LD(buffers[1]),
		    1.0f, c, (int)STARPU_MATRIX_GET_LD(buffers[2]));
	plb_app_finish(arg, t0);
}

#ifdef STARPU_USE_OPENCL
/* Work-group: MM_TM rows x MM_WN columns of C; each work-item computes one
 * row of that tile (MM_WN accumulators, so each element of A it loads is
 * used MM_WN times). The MM_TK x MM_WN tile of B is staged in local memory
 * and read by every work-item. Consecutive work-items read consecutive
 * rows of A (coalesced on a GPU, vectorised by PoCL on a CPU). Measured on
 * PoCL (1 thread): 1.5 GFLOP/s for 16 x 16 one-entry-per-item tiles, 7 to
 * 12 GFLOP/s for this shape. */
#define MM_TM 64
#define MM_WN 8
static const char *mm_opencl_source =
	"#define TM 64\n"
	"#define WN 8\n"
	"#define TK 16\n"
	"/* C[m x n] += A[m x k] * B[k x n], column-major. */\n"
	"__kernel __attribute__((reqd_work_group_size(TM, 1, 1)))\n"
	"void plb_sgemm(int m, int n, int k,\n"
	"               __global const float *a, int off_a, int lda,\n"
	"               __global const float *b, int off_b, int ldb,\n"
	"               __global float *c, int off_c, int ldc)\n"
	"{\n"
	"    const int r = get_local_id(0);\n"
	"    const int row = get_group_id(0) * TM + r;\n"
	"    const int col0 = get_group_id(1) * WN;\n"
	"    const int arow = row < m ? row : m - 1;\n"
	"    __local float tb[TK][WN];\n"
	"    float acc[WN];\n"
	"    for (int w = 0; w < WN; w++)\n"
	"        acc[w] = 0.0f;\n"
	"    a += off_a; b += off_b; c += off_c;\n"
	"    for (int t = 0; t < k; t += TK) {\n"
	"        for (int i = r; i < WN * TK; i += TM) {\n"
	"            int w = i / TK, kk = i % TK;\n"
	"            tb[kk][w] = (col0 + w < n && t + kk < k)\n"
	"                ? b[t + kk + (size_t)(col0 + w) * ldb] : 0.0f;\n"
	"        }\n"
	"        barrier(CLK_LOCAL_MEM_FENCE);\n"
	"        const int kmax = min(TK, k - t);\n"
	"        for (int kk = 0; kk < kmax; kk++) {\n"
	"            float av = a[arow + (size_t)(t + kk) * lda];\n"
	"            for (int w = 0; w < WN; w++)\n"
	"                acc[w] = mad(av, tb[kk][w], acc[w]);\n"
	"        }\n"
	"        barrier(CLK_LOCAL_MEM_FENCE);\n"
	"    }\n"
	"    if (row < m)\n"
	"        for (int w = 0; w < WN; w++)\n"
	"            if (col0 + w < n)\n"
	"                c[row + (size_t)(col0 + w) * ldc] += acc[w];\n"
	"}\n";

static struct starpu_opencl_program mm_program;
static int mm_program_loaded;

static void mm_opencl(void *buffers[], void *arg)
{
	cl_int m = (cl_int)STARPU_MATRIX_GET_NX(buffers[0]);
	cl_int k = (cl_int)STARPU_MATRIX_GET_NY(buffers[0]);
	cl_int n = (cl_int)STARPU_MATRIX_GET_NY(buffers[1]);
	cl_mem mem[3];
	cl_int off[3], ld[3];
	for (int i = 0; i < 3; i++) {
		mem[i] = (cl_mem)STARPU_MATRIX_GET_DEV_HANDLE(buffers[i]);
		off[i] = (cl_int)(STARPU_MATRIX_GET_OFFSET(buffers[i]) / sizeof(float));
		ld[i] = (cl_int)STARPU_MATRIX_GET_LD(buffers[i]);
	}
	int devid = starpu_worker_get_devid(starpu_worker_get_id());
	cl_kernel kernel;
	cl_command_queue queue;
	double t0 = plb_app_start();
	cl_int err = starpu_opencl_load_kernel(&kernel, &queue, &mm_program, "plb_sgemm", devid);
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	int arg_i = 0;
	err = clSetKernelArg(kernel, arg_i++, sizeof(m), &m);
	err |= clSetKernelArg(kernel, arg_i++, sizeof(n), &n);
	err |= clSetKernelArg(kernel, arg_i++, sizeof(k), &k);
	for (int i = 0; i < 3; i++) {
		err |= clSetKernelArg(kernel, arg_i++, sizeof(cl_mem), &mem[i]);
		err |= clSetKernelArg(kernel, arg_i++, sizeof(cl_int), &off[i]);
		err |= clSetKernelArg(kernel, arg_i++, sizeof(cl_int), &ld[i]);
	}
	if (err != CL_SUCCESS)
		STARPU_OPENCL_REPORT_ERROR(err);
	size_t local[2] = { MM_TM, 1 };
	size_t global[2] = { (size_t)(m + MM_TM - 1) / MM_TM * MM_TM, (size_t)(n + MM_WN - 1) / MM_WN };
	plb_app_opencl_run(queue, kernel, 2, global, local, arg, t0);
}
#endif

#ifdef PLB_MM_CUDA
static void mm_cuda(void *buffers[], void *arg)
{
	const float *a = (const float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const float *b = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	float *c = (float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	int m = (int)STARPU_MATRIX_GET_NX(buffers[0]);
	int k = (int)STARPU_MATRIX_GET_NY(buffers[0]);
	int n = (int)STARPU_MATRIX_GET_NY(buffers[1]);
	const float one = 1.0f;
	double t0 = plb_app_start();
	cublasStatus_t st = cublasSgemm(starpu_cublas_get_local_handle(), CUBLAS_OP_N, CUBLAS_OP_N,
					m, n, k, &one, a, (int)STARPU_MATRIX_GET_LD(buffers[0]), b,
					(int)STARPU_MATRIX_GET_LD(buffers[1]), &one, c,
					(int)STARPU_MATRIX_GET_LD(buffers[2]));
	if (st != CUBLAS_STATUS_SUCCESS)
		STARPU_CUBLAS_REPORT_ERROR(st);
	cudaStreamSynchronize(starpu_cuda_get_local_stream());
	plb_app_finish(arg, t0);
}
#endif

static struct starpu_perfmodel mm_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_mm",
};

struct starpu_codelet plb_mm_cl = {
	.cpu_funcs = { mm_cpu },
#ifdef STARPU_USE_OPENCL
	.opencl_funcs = { mm_opencl },
#endif
#ifdef PLB_MM_CUDA
	.cuda_funcs = { mm_cuda },
#endif
	.nbuffers = 3,
	.modes = { STARPU_R, STARPU_R, STARPU_RW },
	.model = &mm_model,
	.name = "plb_mm",
};

/* After starpu_init, before the first task: single-threaded BLAS (one
 * StarPU worker per core), OpenCL program, cuBLAS handles. */
int plb_mm_init(void)
{
	openblas_set_num_threads(1);
#ifdef PLB_MM_CUDA
	starpu_cublas_init();
#endif
#ifdef STARPU_USE_OPENCL
	return plb_app_opencl_load(&mm_program, mm_opencl_source, &mm_program_loaded);
#else
	return 0;
#endif
}

/* After the last task. */
void plb_mm_fini(void)
{
#ifdef STARPU_USE_OPENCL
	plb_app_opencl_unload(&mm_program, &mm_program_loaded);
#endif
#ifdef PLB_MM_CUDA
	starpu_cublas_shutdown();
#endif
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The reference for the CPU codelet: OpenBLAS on one thread, called
 * directly (no StarPU, no task), on the same blocks as the application:
 * C[:, j..j+block) += A·B[:, j..j+block) for successive blocks of an
 * m x ncols problem (A m x k), cycling, for at least min_seconds after one
 * untimed pass over every block (which also maps every page). Returns
 * GFLOP/s, or -1 on bad arguments or allocation failure. */
double plb_mm_blas_gflops(int m, int ncols, int k, int block, double min_seconds)
{
	if (m <= 0 || ncols <= 0 || k <= 0 || block <= 0 || block > ncols)
		return -1;
	float *a = malloc(sizeof(float) * (size_t)m * k);
	float *b = malloc(sizeof(float) * (size_t)k * ncols);
	float *c = malloc(sizeof(float) * (size_t)m * ncols);
	if (!a || !b || !c) {
		free(a);
		free(b);
		free(c);
		return -1;
	}
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)(i % 17) * 0.01f;
	for (size_t i = 0; i < (size_t)k * ncols; i++)
		b[i] = (float)(i % 13) * 0.01f;
	for (size_t i = 0; i < (size_t)m * ncols; i++)
		c[i] = 0.0f;
	openblas_set_num_threads(1);
	int nblocks = ncols / block;
	for (int j = 0; j < nblocks; j++)
		cblas_sgemm(PLB_CBLAS_COL_MAJOR, PLB_CBLAS_NO_TRANS, PLB_CBLAS_NO_TRANS, m, block, k,
			    1.0f, a, m, b + (size_t)j * block * k, k, 1.0f, c + (size_t)j * block * m, m);
	double t0 = now_s(), elapsed = 0;
	long calls = 0;
	do {
		int j = (int)(calls % nblocks);
		cblas_sgemm(PLB_CBLAS_COL_MAJOR, PLB_CBLAS_NO_TRANS, PLB_CBLAS_NO_TRANS, m, block, k,
			    1.0f, a, m, b + (size_t)j * block * k, k, 1.0f, c + (size_t)j * block * m, m);
		calls++;
		elapsed = now_s() - t0;
	} while (elapsed < min_seconds);
	free(a);
	free(b);
	free(c);
	return 2.0 * m * block * (double)k * (double)calls / elapsed / 1e9;
}
