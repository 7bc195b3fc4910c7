/*
 * raytrace_scene.h - the scene and the per-pixel tracer of `plb app
 * raytrace`, one copy for the CPU codelet (raytrace.c) and the CUDA one
 * (raytrace_cuda.cu, where the scene lives in constant memory and the
 * functions run on the device). The OpenCL kernel is a string in
 * raytrace.c with the same steps. The numbers are those of
 * plb_core::kernels::raytrace, the double-precision reference.
 *
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_RAYTRACE_SCENE_H
#define PLB_RAYTRACE_SCENE_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define PLB_RT_FN __device__ static inline
#define PLB_RT_SCENE __constant__
#else
#define PLB_RT_FN static inline
#define PLB_RT_SCENE
#endif

#define PLB_RT_N 6
/* centre x, y, z, radius, colour r, g, b, reflectivity */
PLB_RT_SCENE static const float plb_rt_scene[PLB_RT_N][8] = {
	{ 0.0f, -1002.0f, -6.0f, 1000.0f, 0.6f, 0.6f, 0.6f, 0.3f },
	{ -1.0f, -0.6f, -4.0f, 0.9f, 0.9f, 0.3f, 0.3f, 0.8f },
	{ 0.9f, -1.0f, -3.5f, 0.6f, 0.3f, 0.9f, 0.3f, 0.9f },
	{ -0.2f, 0.8f, -5.5f, 0.7f, 0.3f, 0.3f, 0.9f, 0.6f },
	{ 1.6f, 0.3f, -6.0f, 0.8f, 0.9f, 0.9f, 0.2f, 0.0f },
	{ -1.8f, 1.2f, -7.0f, 0.5f, 0.8f, 0.8f, 0.8f, 0.9f },
};

/* Distance along the unit ray (o, d) to sphere s beyond 1e-4, or -1. */
PLB_RT_FN float plb_rt_hit(const float *s, const float *o, const float *d)
{
	/* The cancellation-free forms: c = (|oc| - r)(|oc| + r), and the near
	 * root as c / q (the ground is a sphere of radius 1000). */
	float oc[3] = { o[0] - s[0], o[1] - s[1], o[2] - s[2] };
	float b = oc[0] * d[0] + oc[1] * d[1] + oc[2] * d[2];
	float len = sqrtf(oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2]);
	float c = (len - s[3]) * (len + s[3]);
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

PLB_RT_FN void plb_rt_pixel(size_t row, size_t col, size_t size, float *rgb)
{
	float px = -1.0f + ((float)col + 0.5f) * 2.0f / (float)size;
	float py = 1.0f - ((float)row + 0.5f) * 2.0f / (float)size;
	float l = sqrtf(px * px + py * py + 2.25f);
	float d[3] = { px / l, py / l, -1.5f / l }, o[3] = { 0.0f, 0.0f, 0.0f };
	float col_[3] = { 0.0f, 0.0f, 0.0f }, weight = 1.0f;
	for (int depth = 0; depth < 8; depth++) {
		int best = -1;
		float tbest = 0.0f;
		for (int i = 0; i < PLB_RT_N; i++) {
			float t = plb_rt_hit(plb_rt_scene[i], o, d);
			if (t > 0.0f && (best < 0 || t < tbest)) {
				best = i;
				tbest = t;
			}
		}
		if (best < 0) {
			col_[0] += weight * (0.5f + 0.3f * d[1]);
			col_[1] += weight * 0.7f;
			col_[2] += weight * 0.9f;
			break;
		}
		const float *s = plb_rt_scene[best];
		float h[3] = { o[0] + tbest * d[0], o[1] + tbest * d[1], o[2] + tbest * d[2] };
		float n[3] = { h[0] - s[0], h[1] - s[1], h[2] - s[2] };
		float nl = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
		n[0] /= nl, n[1] /= nl, n[2] /= nl;
		/* Secondary rays leave from just outside the surface (no
		 * self-shadowing from rounding). */
		h[0] += 1e-3f * n[0], h[1] += 1e-3f * n[1], h[2] += 1e-3f * n[2];
		float tl[3] = { -4.0f - h[0], 6.0f - h[1], 0.0f - h[2] };
		float dist = sqrtf(tl[0] * tl[0] + tl[1] * tl[1] + tl[2] * tl[2]);
		float ld[3] = { tl[0] / dist, tl[1] / dist, tl[2] / dist };
		float lambert = n[0] * ld[0] + n[1] * ld[1] + n[2] * ld[2];
		float shade = 0.1f;
		if (lambert > 0.0f) {
			int shadowed = 0;
			for (int i = 0; i < PLB_RT_N; i++) {
				float t = plb_rt_hit(plb_rt_scene[i], h, ld);
				if (t > 0.0f && t < dist)
					shadowed = 1;
			}
			if (!shadowed)
				shade += 0.9f * lambert;
		}
		float w = weight * (1.0f - s[7]) * shade;
		col_[0] += w * s[4], col_[1] += w * s[5], col_[2] += w * s[6];
		if (s[7] <= 0.0f)
			break;
		weight *= s[7];
		float dn = -2.0f * (d[0] * n[0] + d[1] * n[1] + d[2] * n[2]);
		d[0] += dn * n[0], d[1] += dn * n[1], d[2] += dn * n[2];
		o[0] = h[0], o[1] = h[1], o[2] = h[2];
	}
	rgb[0] += col_[0], rgb[1] += col_[1], rgb[2] += col_[2];
}

#endif /* PLB_RAYTRACE_SCENE_H */
