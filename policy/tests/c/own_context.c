/* Test program of policy/tests/loading.rs: submits every task to a
 * scheduling context of its own, created with the policy named by
 * $PLB_TEST_CTX_POLICY (default: StarPU's eager), as a third-party library
 * building parallel-worker contexts does; the global context (whatever
 * STARPU_SCHED selects) gets no task.
 * Exit status: 0 on success, 77 without a CPU worker, else a failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>

#define NTASKS 20

static int ran;

static void kernel(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
	__atomic_add_fetch(&ran, 1, __ATOMIC_RELAXED);
}

static struct starpu_codelet cl = {
	.cpu_funcs = {kernel},
	.nbuffers = 0,
	.name = "plb_own_context_kernel",
};

int main(void)
{
	const char *policy = getenv("PLB_TEST_CTX_POLICY");
	if (!policy)
		policy = "eager";
	int ret = starpu_init(NULL);
	if (ret == -ENODEV)
		return 77;
	if (ret) {
		fprintf(stderr, "own_context: starpu_init failed (%d)\n", ret);
		return 1;
	}
	int workers[STARPU_NMAXWORKERS];
	int n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, workers, STARPU_NMAXWORKERS);
	if (n == 0)
		return 77;
	unsigned ctx = starpu_sched_ctx_create(workers, n, "plb_own_ctx",
					       STARPU_SCHED_CTX_POLICY_NAME, policy, 0);
	for (int i = 0; i < NTASKS; i++) {
		struct starpu_task *task = starpu_task_create();
		task->cl = &cl;
		ret = starpu_task_submit_to_ctx(task, ctx);
		if (ret) {
			fprintf(stderr, "own_context: submit failed (%d)\n", ret);
			return 3;
		}
	}
	if (starpu_task_wait_for_all_in_ctx(ctx))
		return 4;
	starpu_sched_ctx_delete(ctx);
	starpu_shutdown();
	fprintf(stderr, "own_context: %d tasks ran in context %u (%s)\n", ran, ctx, policy);
	return ran == NTASKS ? 0 : 5;
}
