/*
 * kmeans.cl - OpenCL version of plb_kmeans_block (kmeans.h).
 *
 * plb_kmeans_assign: one work-item per point of the block, the same float
 * operations in the same order as the C version (contraction off; build
 * the program without -cl-mad-enable), so the labels are bit-identical.
 * plb_kmeans_partial: one work-group per (centroid, coordinate-or-count)
 * pair reduces the block's points in local memory and adds the result to
 * partial[]; the sums are exact (grid inputs, kmeans.h), so the reduction
 * order does not matter.
 *
 * License: LGPL-2.1-or-later.
 */
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void plb_kmeans_assign(__global const float *points, ulong first,
				ulong len, uint d, uint k,
				__global const float *centroids,
				__global int *labels)
{
	ulong p = get_global_id(0);
	if (p >= len)
		return;
	__global const float *x = points + (first + p) * d;
	float best_dist = 0.0f;
	int best = 0;
	for (uint j = 0; j < k; j++) {
		__global const float *c = centroids + j * d;
		float dist = 0.0f;
		for (uint i = 0; i < d; i++) {
			float t = x[i] - c[i];
			dist += t * t;
		}
		if (j == 0 || dist < best_dist) {
			best_dist = dist;
			best = (int)j;
		}
	}
	labels[p] = best;
}

__kernel void plb_kmeans_partial(__global const float *points, ulong first,
				 ulong len, uint d, uint k,
				 __global const int *labels,
				 __global double *partial,
				 __local double *scratch)
{
	uint g = get_group_id(0);
	uint j = g / (d + 1);
	uint i = g % (d + 1);
	uint l = get_local_id(0);
	uint size = get_local_size(0);
	double acc = 0.0;
	for (ulong p = l; p < len; p += size)
		if (labels[p] == (int)j)
			acc += i < d ? (double)points[(first + p) * d + i] : 1.0;
	scratch[l] = acc;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint h = size / 2; h > 0; h /= 2) {
		if (l < h)
			scratch[l] += scratch[l + h];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (l == 0)
		partial[j * (d + 1) + i] += scratch[0];
}
