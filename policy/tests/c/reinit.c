/* Test program of policy/tests/loading.rs: initialises StarPU twice in one
 * process (each time running tasks in the global context, the second time
 * also in a context created with STARPU_SCHED_CTX_POLICY_NAME set to
 * $STARPU_SCHED) and checks that the environment variable STARPU_SCHED is
 * never rewritten (getenv must keep returning the same string).
 * Exit status: 0 on success, 77 without a CPU worker, else a failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>

#define NTASKS 20

static void kernel(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
}

static struct starpu_codelet cl = {
	.cpu_funcs = {kernel},
	.nbuffers = 0,
	.name = "plb_reinit_kernel",
};

static int run_tasks(unsigned ctx)
{
	for (int i = 0; i < NTASKS; i++) {
		struct starpu_task *task = starpu_task_create();
		task->cl = &cl;
		int ret = ctx ? starpu_task_submit_to_ctx(task, ctx) : starpu_task_submit(task);
		if (ret) {
			fprintf(stderr, "reinit: submit failed (%d)\n", ret);
			return ret;
		}
	}
	return ctx ? starpu_task_wait_for_all_in_ctx(ctx) : starpu_task_wait_for_all();
}

int main(void)
{
	const char *before = getenv("STARPU_SCHED");
	for (int session = 0; session < 2; session++) {
		int ret = starpu_init(NULL);
		if (ret == -ENODEV)
			return 77;
		if (ret) {
			fprintf(stderr, "reinit: starpu_init failed (%d)\n", ret);
			return 1;
		}
		if (getenv("STARPU_SCHED") != before) {
			fprintf(stderr, "reinit: STARPU_SCHED was rewritten during starpu_init\n");
			return 2;
		}
		if (run_tasks(0))
			return 3;
		if (session == 1 && before) {
			int workers[STARPU_NMAXWORKERS];
			int n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, workers, STARPU_NMAXWORKERS);
			unsigned ctx = starpu_sched_ctx_create(workers, n, "plb_reinit_ctx",
							       STARPU_SCHED_CTX_POLICY_NAME, before, 0);
			if (run_tasks(ctx))
				return 4;
			starpu_sched_ctx_delete(ctx);
		}
		starpu_shutdown();
		if (getenv("STARPU_SCHED") != before) {
			fprintf(stderr, "reinit: STARPU_SCHED was rewritten during the session\n");
			return 2;
		}
		fprintf(stderr, "reinit: session %d done\n", session);
	}
	return 0;
}
