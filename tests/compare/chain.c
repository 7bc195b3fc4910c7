/* A small StarPU program that is not one of PLB's applications, for
 * `plb compare`'s tests: NVEC vectors, each scaled then summed by a chain
 * of NSTEP tasks (two codelets with history-based models), the checksum
 * printed (it must not depend on the policy), then the elapsed time.
 *
 * Build: cc chain.c $(pkg-config --cflags --libs starpu-1.3) -o chain
 * Usage: chain [NVEC [NSTEP [N]]]   (defaults 8, 16, 4096) */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

static void scale_cpu(void *buffers[], void *arg)
{
	(void)arg;
	float *v = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	unsigned n = STARPU_VECTOR_GET_NX(buffers[0]);
	for (unsigned i = 0; i < n; i++)
		v[i] = v[i] * 0.5f + 1.0f;
}

static void accumulate_cpu(void *buffers[], void *arg)
{
	(void)arg;
	const float *v = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	double *sum = (double *)STARPU_VARIABLE_GET_PTR(buffers[1]);
	unsigned n = STARPU_VECTOR_GET_NX(buffers[0]);
	for (unsigned i = 0; i < n; i++)
		*sum += v[i];
}

static struct starpu_perfmodel scale_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_compare_chain_scale",
};
static struct starpu_perfmodel accumulate_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "plb_compare_chain_accumulate",
};
static struct starpu_codelet scale_cl = {
	.cpu_funcs = {scale_cpu},
	.nbuffers = 1,
	.modes = {STARPU_RW},
	.model = &scale_model,
	.name = "chain_scale",
};
static struct starpu_codelet accumulate_cl = {
	.cpu_funcs = {accumulate_cpu},
	.nbuffers = 2,
	.modes = {STARPU_R, STARPU_RW},
	.model = &accumulate_model,
	.name = "chain_accumulate",
};

int main(int argc, char **argv)
{
	unsigned nvec = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
	unsigned nstep = argc > 2 ? (unsigned)atoi(argv[2]) : 16;
	unsigned n = argc > 3 ? (unsigned)atoi(argv[3]) : 4096;
	if (nvec == 0 || nstep == 0 || n == 0) {
		fprintf(stderr, "usage: %s [NVEC [NSTEP [N]]] (all positive)\n", argv[0]);
		return 2;
	}
	int ret = starpu_init(NULL);
	if (ret == -ENODEV)
		return 77;
	STARPU_CHECK_RETURN_VALUE(ret, "starpu_init");

	float *v = malloc(sizeof(float) * nvec * n);
	double *sums = calloc(nvec, sizeof(double));
	starpu_data_handle_t *vh = malloc(sizeof(*vh) * nvec);
	starpu_data_handle_t *sh = malloc(sizeof(*sh) * nvec);
	for (unsigned k = 0; k < nvec * n; k++)
		v[k] = (float)(k % 97);
	for (unsigned j = 0; j < nvec; j++) {
		starpu_vector_data_register(&vh[j], STARPU_MAIN_RAM, (uintptr_t)&v[j * n], n, sizeof(float));
		starpu_variable_data_register(&sh[j], STARPU_MAIN_RAM, (uintptr_t)&sums[j], sizeof(double));
	}
	double start = starpu_timing_now();
	for (unsigned s = 0; s < nstep; s++)
		for (unsigned j = 0; j < nvec; j++) {
			ret = starpu_task_insert(&scale_cl, STARPU_RW, vh[j], 0);
			STARPU_CHECK_RETURN_VALUE(ret, "starpu_task_insert");
			ret = starpu_task_insert(&accumulate_cl, STARPU_R, vh[j], STARPU_RW, sh[j], 0);
			STARPU_CHECK_RETURN_VALUE(ret, "starpu_task_insert");
		}
	starpu_task_wait_for_all();
	double end = starpu_timing_now();
	for (unsigned j = 0; j < nvec; j++) {
		starpu_data_unregister(vh[j]);
		starpu_data_unregister(sh[j]);
	}
	double total = 0;
	for (unsigned j = 0; j < nvec; j++)
		total += sums[j];
	printf("checksum: %.6e\n", total);
	printf("time: %.3f ms\n", (end - start) / 1000.0);
	free(v);
	free(sums);
	free(vh);
	free(sh);
	starpu_shutdown();
	return 0;
}
