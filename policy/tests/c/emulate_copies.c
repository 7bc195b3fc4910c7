/* Test program of policy/tests/emulate.rs, run with PLB_EMULATE set under
 * the preloaded library: many tasks of a few codelets must make one
 * private codelet copy per codelet version, not one per task, and every
 * task must have its own codelet back in task->cl in its callback and
 * after waiting (the emulation replaces it only while the task is in
 * StarPU).
 *
 * Codelets: a (tasks through starpu_task_insert), b (starpu_task_submit,
 * tasks kept and checked after waiting), c (starpu_task_submit_to_ctx; its
 * implementation changed once between batches, then changed back: two
 * versions). The number of copies is read from the library's
 * plb_emulate_codelet_copies() (found with dlsym). Prints one line, exit
 * status 0 on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>

#define NTASKS 200

static int calls_a, calls_b, calls_c1, calls_c2, wrong_in_callback;

static void kernel_a(void *buffers[], void *arg) { (void)buffers; (void)arg; __atomic_add_fetch(&calls_a, 1, __ATOMIC_RELAXED); }
static void kernel_b(void *buffers[], void *arg) { (void)buffers; (void)arg; __atomic_add_fetch(&calls_b, 1, __ATOMIC_RELAXED); }
static void kernel_c1(void *buffers[], void *arg) { (void)buffers; (void)arg; __atomic_add_fetch(&calls_c1, 1, __ATOMIC_RELAXED); }
static void kernel_c2(void *buffers[], void *arg) { (void)buffers; (void)arg; __atomic_add_fetch(&calls_c2, 1, __ATOMIC_RELAXED); }

static struct starpu_codelet cl_a = { .cpu_funcs = {kernel_a}, .nbuffers = 0, .name = "plb_copies_a" };
static struct starpu_codelet cl_b = { .cpu_funcs = {kernel_b}, .nbuffers = 0, .name = "plb_copies_b" };
static struct starpu_codelet cl_c = { .cpu_funcs = {kernel_c1}, .nbuffers = 0, .name = "plb_copies_c" };

/* The callback runs after the body: the task must hold its own codelet. */
static void check_codelet(void *arg)
{
	struct starpu_task *task = starpu_task_get_current();
	if (!task || task->cl != (struct starpu_codelet *)arg)
		__atomic_add_fetch(&wrong_in_callback, 1, __ATOMIC_RELAXED);
}

static int batch_c(void)
{
	for (int i = 0; i < NTASKS; i++) {
		struct starpu_task *task = starpu_task_create();
		task->cl = &cl_c;
		task->callback_func = check_codelet;
		task->callback_arg = &cl_c;
		int ret = starpu_task_submit_to_ctx(task, 0);
		if (ret)
			return ret;
	}
	return starpu_task_wait_for_all();
}

int main(void)
{
	int ret = starpu_init(NULL);
	if (ret == -ENODEV)
		return 77;
	if (ret) {
		fprintf(stderr, "emulate_copies: starpu_init failed (%d)\n", ret);
		return 1;
	}
	size_t (*copies)(void) = (size_t (*)(void))dlsym(RTLD_DEFAULT, "plb_emulate_codelet_copies");
	if (!copies) {
		fprintf(stderr, "emulate_copies: plb_emulate_codelet_copies not found (library not preloaded?)\n");
		return 2;
	}
	for (int i = 0; i < NTASKS; i++) {
		ret = starpu_task_insert(&cl_a, STARPU_CALLBACK_WITH_ARG_NFREE, check_codelet, &cl_a, 0);
		if (ret)
			return 3;
	}
	static struct starpu_task *kept[NTASKS];
	for (int i = 0; i < NTASKS; i++) {
		kept[i] = starpu_task_create();
		kept[i]->cl = &cl_b;
		kept[i]->destroy = 0;
		kept[i]->callback_func = check_codelet;
		kept[i]->callback_arg = &cl_b;
		if (starpu_task_submit(kept[i]))
			return 4;
	}
	if (batch_c())
		return 5;
	cl_c.cpu_funcs[0] = kernel_c2;
	if (batch_c())
		return 6;
	cl_c.cpu_funcs[0] = kernel_c1;
	if (batch_c())
		return 7;
	starpu_task_wait_for_all();
	int wrong_after_wait = 0;
	for (int i = 0; i < NTASKS; i++) {
		if (kept[i]->cl != &cl_b)
			wrong_after_wait++;
		starpu_task_destroy(kept[i]);
	}
	size_t n = copies();
	starpu_shutdown();
	fprintf(stderr,
		"emulate_copies: tasks=%d copies=%zu calls a=%d b=%d c1=%d c2=%d wrong_in_callback=%d wrong_after_wait=%d\n",
		5 * NTASKS, n, calls_a, calls_b, calls_c1, calls_c2, wrong_in_callback, wrong_after_wait);
	if (n != 4 || wrong_in_callback || wrong_after_wait)
		return 8;
	if (calls_a != NTASKS || calls_b != NTASKS || calls_c1 != 2 * NTASKS || calls_c2 != NTASKS)
		return 9;
	return 0;
}
