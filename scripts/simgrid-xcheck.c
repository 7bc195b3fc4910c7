/*
 * simgrid-xcheck.c - one divisible workload on a StarPU-SimGrid machine,
 * driven by our divisible-load API (policy/include/plb_divisible.h), for
 * the cross-check of our own simulator (`plb simgrid --xcheck`, which
 * builds and runs this program through scripts/simgrid.sh and runs the same
 * workload in `plb-core`'s simulator).
 *
 * Usage: plb-xcheck W BALANCER CPU_FIXED_S CPU_S_PER_UNIT GPU_FIXED_S
 *                   GPU_S_PER_UNIT BYTES_PER_UNIT
 *
 * A block of `len` units on a worker of kind k takes FIXED_k + len * PER_UNIT_k
 * simulated seconds (a STARPU_PER_WORKER performance model: SimGrid takes a
 * task's duration from it) and reads a vector of len * BYTES_PER_UNIT bytes
 * (allocated STARPU_MALLOC_SIMULATION_FOLDED: no real memory), which
 * SimGrid moves over the machine's sampled bus to a GPU. The kernels never
 * run. Each block's compute time, as StarPU's profiling measured it in
 * simulated time, is reported to the balancer.
 *
 * Output (stdout): one line per worker "worker ID KIND units U blocks B",
 * then "makespan_s T" (simulated, from the run's creation to the last
 * completion).
 */
#include <starpu.h>
#include <plb_divisible.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double cpu_fixed, cpu_per_unit, gpu_fixed, gpu_per_unit;
static int report_transfer;

struct block {
	plb_dl_run *run;
	uint64_t id, len;
	starpu_data_handle_t handle;
	struct starpu_task *task;
};

/* Simulated duration (us) of a block on a worker. */
static double cost_us(struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	(void)nimpl;
	const struct block *b = task->cl_arg;
	double len = (double)b->len;
	double s = starpu_worker_get_type((int)workerid) == STARPU_CUDA_WORKER
			   ? gpu_fixed + len * gpu_per_unit
			   : cpu_fixed + len * cpu_per_unit;
	return s * 1e6;
}

static struct starpu_perfmodel model = {
	.type = STARPU_PER_WORKER,
	.worker_cost_function = cost_us,
	.symbol = "plb_xcheck_block",
};

/* Never called under SimGrid. */
static void kernel(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
}

static struct starpu_codelet cl = {
	.cpu_funcs = {kernel},
	.cuda_funcs = {kernel},
	.nbuffers = 1,
	.modes = {STARPU_R},
	.model = &model,
	.name = "plb_xcheck_block",
};

static void done(void *arg)
{
	struct block *b = arg;
	/* The task is destroyed only after its callback returns. */
	struct starpu_task *task = b->task;
	double compute_s = 0.0;
	if (task && task->profiling_info)
		compute_s = starpu_timing_timespec_delay_us(&task->profiling_info->start_time,
							    &task->profiling_info->end_time) / 1e6;
	/* PLB_XCHECK_TRANSFER=1: also report, as transfer time, the simulated
	 * time from the worker's pop to the kernel's start (the input fetch
	 * over the sampled bus); default: 0, as before. */
	double transfer_s = 0.0;
	if (report_transfer && task && task->profiling_info)
		transfer_s = starpu_timing_timespec_delay_us(&task->profiling_info->pop_end_time,
							     &task->profiling_info->start_time) / 1e6;
	int rc = plb_dl_done(b->run, b->id, compute_s, transfer_s);
	if (rc < 0)
		fprintf(stderr, "plb-xcheck: plb_dl_done: %s\n", plb_dl_last_error());
}

int main(int argc, char **argv)
{
	if (argc != 8)
	{
		fprintf(stderr, "usage: %s W BALANCER CPU_FIXED_S CPU_S_PER_UNIT GPU_FIXED_S GPU_S_PER_UNIT BYTES_PER_UNIT\n", argv[0]);
		return 2;
	}
	uint64_t total = strtoull(argv[1], NULL, 10);
	const char *balancer = argv[2];
	cpu_fixed = atof(argv[3]);
	cpu_per_unit = atof(argv[4]);
	gpu_fixed = atof(argv[5]);
	gpu_per_unit = atof(argv[6]);
	size_t bytes_per_unit = strtoull(argv[7], NULL, 10);
	if (total == 0 || bytes_per_unit == 0)
	{
		fprintf(stderr, "plb-xcheck: W and BYTES_PER_UNIT must be positive\n");
		return 2;
	}

	const char *rt = getenv("PLB_XCHECK_TRANSFER");
	report_transfer = rt && strcmp(rt, "1") == 0;

	int ret = starpu_init(NULL);
	if (ret == -ENODEV)
		return 77;
	STARPU_CHECK_RETURN_VALUE(ret, "starpu_init");
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);

	char *data;
	starpu_malloc_flags((void **)&data, total * bytes_per_unit, STARPU_MALLOC_SIMULATION_FOLDED);
	struct block *blocks = calloc(total, sizeof(*blocks));
	unsigned nworkers = starpu_worker_get_count();
	uint64_t *units = calloc(nworkers, sizeof(*units));
	uint64_t *nblocks = calloc(nworkers, sizeof(*nblocks));

	double start = starpu_timing_now();
	plb_dl_run *run = plb_dl_create(total, balancer);
	if (!run)
	{
		fprintf(stderr, "plb-xcheck: plb_dl_create(%s): %s\n", balancer, plb_dl_last_error());
		starpu_shutdown();
		return 1;
	}
	uint64_t issued = 0;
	int rc;
	for (;;)
	{
		int w;
		uint64_t id, off, len;
		rc = plb_dl_try_next(run, &w, &id, &off, &len);
		if (rc == PLB_DL_PENDING)
		{
			/* Under SimGrid a blocking wait would stop every actor:
			 * sleep 10 simulated microseconds instead. */
			starpu_usleep(10);
			continue;
		}
		if (rc != PLB_DL_BLOCK)
			break;
		struct block *b = &blocks[issued++];
		b->run = run;
		b->id = id;
		b->len = len;
		starpu_vector_data_register(&b->handle, STARPU_MAIN_RAM,
					    (uintptr_t)(data + off * bytes_per_unit),
					    len * bytes_per_unit, 1);
		struct starpu_task *t = starpu_task_create();
		t->cl = &cl;
		t->cl_arg = b;
		t->handles[0] = b->handle;
		t->execute_on_a_specific_worker = 1;
		t->workerid = (unsigned)w;
		t->callback_func = done;
		t->callback_arg = b;
		b->task = t;
		units[w] += len;
		nblocks[w]++;
		ret = starpu_task_submit(t);
		if (ret != 0)
		{
			fprintf(stderr, "plb-xcheck: submitting block %llu to worker %d (of %u): %s\n",
				(unsigned long long)id, w, nworkers, strerror(-ret));
			return 1;
		}
	}
	starpu_task_wait_for_all();
	double end = starpu_timing_now();
	if (rc != PLB_DL_FINISHED)
		fprintf(stderr, "plb-xcheck: plb_dl_try_next: %d %s\n", rc, plb_dl_last_error());

	for (unsigned w = 0; w < nworkers; w++)
	{
		char name[64];
		starpu_worker_get_name((int)w, name, sizeof(name));
		printf("worker %u %s units %llu blocks %llu\n", w,
		       starpu_worker_get_type((int)w) == STARPU_CUDA_WORKER ? "cuda" : "cpu",
		       (unsigned long long)units[w], (unsigned long long)nblocks[w]);
	}
	printf("makespan_s %.6f\n", (end - start) / 1e6);
	for (uint64_t i = 0; i < issued; i++)
		starpu_data_unregister(blocks[i].handle);
	plb_dl_destroy(run);
	starpu_free_flags(data, total * bytes_per_unit, STARPU_MALLOC_SIMULATION_FOLDED);
	free(blocks);
	free(units);
	free(nblocks);
	starpu_shutdown();
	return rc == PLB_DL_FINISHED ? 0 : 1;
}
