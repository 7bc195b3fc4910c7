/* Test program of policy/tests/emulate.rs, run with PLB_EMULATE set:
 *
 * 1. A codelet in read-only memory (built in an mmap'ed page, then
 *    mprotect'ed PROT_READ): the emulation must wrap it without writing
 *    into it. (StarPU itself writes into the codelet it is given — the
 *    `checked` flag, `per_worker_stats` — so this only runs because the
 *    library substitutes a private copy in the task.)
 * 2. A writable codelet whose implementation the program changes between
 *    two batches (after waiting for the first): the second batch must run
 *    the new function.
 *
 * Every task body counts its calls; the program checks the counts and that
 * the read-only codelet's bytes never changed. Exit status 0 on success. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <starpu.h>

#define NTASKS 20

static int calls_ro, calls_a, calls_b;

static void kernel_ro(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
	__atomic_add_fetch(&calls_ro, 1, __ATOMIC_RELAXED);
}

static void kernel_a(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
	__atomic_add_fetch(&calls_a, 1, __ATOMIC_RELAXED);
}

static void kernel_b(void *buffers[], void *arg)
{
	(void)buffers;
	(void)arg;
	__atomic_add_fetch(&calls_b, 1, __ATOMIC_RELAXED);
}

static struct starpu_codelet changing = {
	.cpu_funcs = {kernel_a},
	.nbuffers = 0,
	.name = "plb_changing_kernel",
};

static int run_batch(struct starpu_codelet *cl)
{
	for (int i = 0; i < NTASKS; i++) {
		struct starpu_task *task = starpu_task_create();
		task->cl = cl;
		int ret = starpu_task_submit(task);
		if (ret) {
			fprintf(stderr, "readonly_codelet: submit failed (%d)\n", ret);
			return ret;
		}
	}
	return starpu_task_wait_for_all();
}

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size = (sizeof(struct starpu_codelet) + page - 1) / page * page;
	struct starpu_codelet *ro = mmap(NULL, size, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED)
		return 10;
	memset(ro, 0, sizeof(*ro));
	ro->cpu_funcs[0] = kernel_ro;
	ro->nbuffers = 0;
	ro->name = "plb_readonly_kernel";
	struct starpu_codelet before = *ro;
	if (mprotect(ro, size, PROT_READ))
		return 11;

	int ret = starpu_init(NULL);
	if (ret == -ENODEV)
		return 77;
	if (ret) {
		fprintf(stderr, "readonly_codelet: starpu_init failed (%d)\n", ret);
		return 1;
	}
	if (run_batch(ro))
		return 3;
	if (run_batch(&changing))
		return 4;
	changing.cpu_funcs[0] = kernel_b;
	if (run_batch(&changing))
		return 5;
	starpu_shutdown();

	if (memcmp(&before, ro, sizeof(before))) {
		fprintf(stderr, "readonly_codelet: the read-only codelet changed\n");
		return 6;
	}
	fprintf(stderr, "readonly_codelet: calls ro=%d a=%d b=%d\n", calls_ro, calls_a, calls_b);
	if (calls_ro != NTASKS || calls_a != NTASKS || calls_b != NTASKS)
		return 7;
	return 0;
}
