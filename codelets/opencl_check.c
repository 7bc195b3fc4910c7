/*
 * opencl_check.c - checks the OpenCL kernels (grn.cl, kmeans.cl) against
 * the C ones block by block, on the first OpenCL device found, without
 * StarPU (the unit tests call these; the StarPU path is tested by running
 * the applications on an OpenCL worker).
 *
 * Each function returns 0 when every block agrees bit for bit, 1 on a
 * mismatch, 2 when there is no OpenCL platform or device (skip), -1 on an
 * OpenCL or allocation error; msg receives a one-line explanation.
 *
 * License: LGPL-2.1-or-later.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grn.h"
#include "kmeans.h"

struct ocl {
	cl_context ctx;
	cl_command_queue queue;
	cl_program program;
	cl_device_id device;
};

static void say(char *msg, size_t len, const char *fmt, ...)
{
	if (!msg || len == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
}

static void ocl_release(struct ocl *o)
{
	if (o->program)
		clReleaseProgram(o->program);
	if (o->queue)
		clReleaseCommandQueue(o->queue);
	if (o->ctx)
		clReleaseContext(o->ctx);
}

/* 0, 2 (no device) or -1. */
static int ocl_open(struct ocl *o, const char *source, char *msg, size_t len)
{
	memset(o, 0, sizeof(*o));
	cl_platform_id platforms[8];
	cl_uint np = 0;
	if (clGetPlatformIDs(8, platforms, &np) != CL_SUCCESS || np == 0) {
		say(msg, len, "no OpenCL platform");
		return 2;
	}
	int found = 0;
	for (cl_uint i = 0; i < np && i < 8 && !found; i++) {
		cl_uint nd = 0;
		if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &o->device, &nd) == CL_SUCCESS &&
		    nd > 0)
			found = 1;
	}
	if (!found) {
		say(msg, len, "no OpenCL device");
		return 2;
	}
	cl_int err;
	o->ctx = clCreateContext(NULL, 1, &o->device, NULL, NULL, &err);
	if (err != CL_SUCCESS)
		goto fail;
	o->queue = clCreateCommandQueue(o->ctx, o->device, 0, &err);
	if (err != CL_SUCCESS)
		goto fail;
	o->program = clCreateProgramWithSource(o->ctx, 1, &source, NULL, &err);
	if (err != CL_SUCCESS)
		goto fail;
	err = clBuildProgram(o->program, 1, &o->device, "", NULL, NULL);
	if (err != CL_SUCCESS) {
		char log[2048] = "";
		clGetProgramBuildInfo(o->program, o->device, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1,
				      log, NULL);
		say(msg, len, "clBuildProgram failed (%d): %s", (int)err, log);
		ocl_release(o);
		return -1;
	}
	return 0;
fail:
	say(msg, len, "OpenCL error %d", (int)err);
	ocl_release(o);
	return -1;
}

int plb_grn_opencl_check(const char *source, uint64_t seed, uint32_t n, uint32_t m,
			 uint32_t levels, uint32_t k, uint64_t block, char *msg, size_t msglen)
{
	struct plb_grn_problem p;
	if (plb_grn_problem_init(&p, n, m, levels, k) != 0 || n < k + 1 || block == 0) {
		say(msg, msglen, "unsupported sizes");
		return -1;
	}
	struct ocl o;
	int rc = ocl_open(&o, source, msg, msglen);
	if (rc != 0)
		return rc;
	uint64_t units = plb_grn_binom(n, k);
	size_t nbytes = 2 * (size_t)n * m;
	uint8_t *data = malloc(nbytes);
	uint32_t *reg = malloc((size_t)n * k * sizeof(uint32_t));
	int64_t *flogf = malloc((size_t)(m + 1) * sizeof(int64_t));
	/* n + 1 entries: the targets' best, then the evaluated count. */
	struct plb_grn_best *cpu = malloc((n + 1) * sizeof(*cpu));
	struct plb_grn_best *dev = malloc((n + 1) * sizeof(*dev));
	cl_mem bdata = NULL, bflogf = NULL, bbest = NULL;
	cl_kernel kern = NULL;
	cl_int err = CL_SUCCESS;
	rc = -1;
	if (!data || !reg || !flogf || !cpu || !dev) {
		say(msg, msglen, "out of memory");
		goto out;
	}
	plb_grn_generate(seed, n, m, levels, k, 0.05, data, reg);
	plb_grn_flogf_table(m, flogf);
	bdata = clCreateBuffer(o.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nbytes, data, &err);
	if (err == CL_SUCCESS)
		bflogf = clCreateBuffer(o.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
					(m + 1) * sizeof(int64_t), flogf, &err);
	if (err == CL_SUCCESS)
		bbest = clCreateBuffer(o.ctx, CL_MEM_READ_WRITE, (n + 1) * sizeof(*dev), NULL, &err);
	if (err == CL_SUCCESS)
		kern = clCreateKernel(o.program, "plb_grn_block", &err);
	if (err != CL_SUCCESS) {
		say(msg, msglen, "OpenCL error %d", (int)err);
		goto out;
	}
	rc = 0;
	for (uint64_t first = 0; first < units && rc == 0; first += block) {
		uint64_t len = units - first < block ? units - first : block;
		/* Every other block starts from the previous block's result, to
		 * check the merge into existing contents too. */
		if ((first / block) % 2 == 0)
			plb_grn_best_reset(cpu, n);
		err = clEnqueueWriteBuffer(o.queue, bbest, CL_TRUE, 0, (n + 1) * sizeof(*cpu), cpu, 0,
					   NULL, NULL);
		plb_grn_block(&p, data, flogf, first, len, cpu);
		cl_ulong f = first, l = len;
		err |= clSetKernelArg(kern, 0, sizeof(cl_mem), &bdata);
		err |= clSetKernelArg(kern, 1, sizeof(cl_mem), &bflogf);
		err |= clSetKernelArg(kern, 2, sizeof(cl_mem), &bbest);
		err |= clSetKernelArg(kern, 3, sizeof(cl_uint), &p.n);
		err |= clSetKernelArg(kern, 4, sizeof(cl_uint), &p.m);
		err |= clSetKernelArg(kern, 5, sizeof(cl_uint), &p.levels);
		err |= clSetKernelArg(kern, 6, sizeof(cl_uint), &p.k);
		err |= clSetKernelArg(kern, 7, sizeof(cl_long), &p.penalty);
		err |= clSetKernelArg(kern, 8, sizeof(cl_ulong), &f);
		err |= clSetKernelArg(kern, 9, sizeof(cl_ulong), &l);
		size_t global = n;
		if (err == CL_SUCCESS)
			err = clEnqueueNDRangeKernel(o.queue, kern, 1, NULL, &global, NULL, 0, NULL, NULL);
		if (err == CL_SUCCESS)
			err = clEnqueueReadBuffer(o.queue, bbest, CL_TRUE, 0, (n + 1) * sizeof(*dev), dev,
						  0, NULL, NULL);
		if (err != CL_SUCCESS) {
			say(msg, msglen, "OpenCL error %d", (int)err);
			rc = -1;
			break;
		}
		for (uint32_t t = 0; t <= n; t++)
			if (cpu[t].score != dev[t].score || cpu[t].rank != dev[t].rank) {
				say(msg, msglen,
				    "block [%llu, +%llu) target %u: CPU (%lld, %llu), OpenCL (%lld, %llu)",
				    (unsigned long long)first, (unsigned long long)len, t,
				    (long long)cpu[t].score, (unsigned long long)cpu[t].rank,
				    (long long)dev[t].score, (unsigned long long)dev[t].rank);
				rc = 1;
				break;
			}
	}
	if (rc == 0)
		say(msg, msglen, "%llu subsets in blocks of %llu: OpenCL equals C",
		    (unsigned long long)units, (unsigned long long)block);
out:
	if (kern)
		clReleaseKernel(kern);
	if (bdata)
		clReleaseMemObject(bdata);
	if (bflogf)
		clReleaseMemObject(bflogf);
	if (bbest)
		clReleaseMemObject(bbest);
	ocl_release(&o);
	free(data);
	free(reg);
	free(flogf);
	free(cpu);
	free(dev);
	return rc;
}

int plb_kmeans_opencl_check(const char *source, uint64_t seed, uint64_t n, uint32_t d,
			    uint32_t k, uint64_t block, char *msg, size_t msglen)
{
	if (plb_kmeans_check(n, d, k) != 0 || block == 0) {
		say(msg, msglen, "unsupported sizes");
		return -1;
	}
	struct ocl o;
	int rc = ocl_open(&o, source, msg, msglen);
	if (rc != 0)
		return rc;
	size_t np = (size_t)k * (d + 1);
	float *points = malloc(n * d * sizeof(float));
	float *cent = malloc((size_t)k * d * sizeof(float));
	int32_t *lab_c = malloc(block * sizeof(int32_t));
	int32_t *lab_d = malloc(block * sizeof(int32_t));
	double *part_c = malloc(np * sizeof(double));
	double *part_d = malloc(np * sizeof(double));
	cl_mem bpoints = NULL, bcent = NULL, blab = NULL, bpart = NULL;
	cl_kernel kassign = NULL, kpartial = NULL;
	cl_int err = CL_SUCCESS;
	rc = -1;
	if (!points || !cent || !lab_c || !lab_d || !part_c || !part_d) {
		say(msg, msglen, "out of memory");
		goto out;
	}
	plb_kmeans_generate(seed, n, d, k, points, cent);
	bpoints = clCreateBuffer(o.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
				 n * d * sizeof(float), points, &err);
	if (err == CL_SUCCESS)
		bcent = clCreateBuffer(o.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
				       (size_t)k * d * sizeof(float), cent, &err);
	if (err == CL_SUCCESS)
		blab = clCreateBuffer(o.ctx, CL_MEM_READ_WRITE, block * sizeof(int32_t), NULL, &err);
	if (err == CL_SUCCESS)
		bpart = clCreateBuffer(o.ctx, CL_MEM_READ_WRITE, np * sizeof(double), NULL, &err);
	if (err == CL_SUCCESS)
		kassign = clCreateKernel(o.program, "plb_kmeans_assign", &err);
	if (err == CL_SUCCESS)
		kpartial = clCreateKernel(o.program, "plb_kmeans_partial", &err);
	if (err != CL_SUCCESS) {
		say(msg, msglen, "OpenCL error %d", (int)err);
		goto out;
	}
	size_t wg = 0;
	clGetKernelWorkGroupInfo(kpartial, o.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg,
				 NULL);
	size_t local = 64;
	while (local > wg && local > 1)
		local /= 2;
	rc = 0;
	for (uint64_t first = 0; first < n && rc == 0; first += block) {
		uint64_t len = n - first < block ? n - first : block;
		memset(part_c, 0, np * sizeof(double));
		err = clEnqueueWriteBuffer(o.queue, bpart, CL_TRUE, 0, np * sizeof(double), part_c, 0,
					   NULL, NULL);
		plb_kmeans_block(d, k, points + first * d, cent, len, lab_c, part_c);
		cl_ulong f = first, l = len;
		err |= clSetKernelArg(kassign, 0, sizeof(cl_mem), &bpoints);
		err |= clSetKernelArg(kassign, 1, sizeof(cl_ulong), &f);
		err |= clSetKernelArg(kassign, 2, sizeof(cl_ulong), &l);
		err |= clSetKernelArg(kassign, 3, sizeof(cl_uint), &d);
		err |= clSetKernelArg(kassign, 4, sizeof(cl_uint), &k);
		err |= clSetKernelArg(kassign, 5, sizeof(cl_mem), &bcent);
		err |= clSetKernelArg(kassign, 6, sizeof(cl_mem), &blab);
		err |= clSetKernelArg(kpartial, 0, sizeof(cl_mem), &bpoints);
		err |= clSetKernelArg(kpartial, 1, sizeof(cl_ulong), &f);
		err |= clSetKernelArg(kpartial, 2, sizeof(cl_ulong), &l);
		err |= clSetKernelArg(kpartial, 3, sizeof(cl_uint), &d);
		err |= clSetKernelArg(kpartial, 4, sizeof(cl_uint), &k);
		err |= clSetKernelArg(kpartial, 5, sizeof(cl_mem), &blab);
		err |= clSetKernelArg(kpartial, 6, sizeof(cl_mem), &bpart);
		err |= clSetKernelArg(kpartial, 7, local * sizeof(double), NULL);
		size_t g1 = len, g2 = np * local;
		if (err == CL_SUCCESS)
			err = clEnqueueNDRangeKernel(o.queue, kassign, 1, NULL, &g1, NULL, 0, NULL, NULL);
		if (err == CL_SUCCESS)
			err = clEnqueueNDRangeKernel(o.queue, kpartial, 1, NULL, &g2, &local, 0, NULL,
						     NULL);
		if (err == CL_SUCCESS)
			err = clEnqueueReadBuffer(o.queue, blab, CL_TRUE, 0, len * sizeof(int32_t), lab_d,
						  0, NULL, NULL);
		if (err == CL_SUCCESS)
			err = clEnqueueReadBuffer(o.queue, bpart, CL_TRUE, 0, np * sizeof(double), part_d,
						  0, NULL, NULL);
		if (err != CL_SUCCESS) {
			say(msg, msglen, "OpenCL error %d", (int)err);
			rc = -1;
			break;
		}
		for (uint64_t p = 0; p < len && rc == 0; p++)
			if (lab_c[p] != lab_d[p]) {
				say(msg, msglen, "point %llu: C label %d, OpenCL label %d",
				    (unsigned long long)(first + p), lab_c[p], lab_d[p]);
				rc = 1;
			}
		for (size_t i = 0; i < np && rc == 0; i++)
			if (part_c[i] != part_d[i]) {
				say(msg, msglen, "block at %llu, partial %zu: C %.17g, OpenCL %.17g",
				    (unsigned long long)first, i, part_c[i], part_d[i]);
				rc = 1;
			}
		/* Move the centroids a little so later blocks see
		 * non-grid centroids too, as in later iterations. */
		for (uint32_t i = 0; i < k * d; i++)
			cent[i] = cent[i] * 0.999f + 0.01f;
		if (rc == 0)
			err = clEnqueueWriteBuffer(o.queue, bcent, CL_TRUE, 0,
						   (size_t)k * d * sizeof(float), cent, 0, NULL, NULL);
		if (err != CL_SUCCESS) {
			say(msg, msglen, "OpenCL error %d", (int)err);
			rc = -1;
		}
	}
	if (rc == 0)
		say(msg, msglen, "%llu points in blocks of %llu: OpenCL equals C",
		    (unsigned long long)n, (unsigned long long)block);
out:
	if (kassign)
		clReleaseKernel(kassign);
	if (kpartial)
		clReleaseKernel(kpartial);
	if (bpoints)
		clReleaseMemObject(bpoints);
	if (bcent)
		clReleaseMemObject(bcent);
	if (blab)
		clReleaseMemObject(blab);
	if (bpart)
		clReleaseMemObject(bpart);
	ocl_release(&o);
	free(points);
	free(cent);
	free(lab_c);
	free(lab_d);
	free(part_c);
	free(part_d);
	return rc;
}
