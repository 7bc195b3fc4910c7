/* Small C wrappers for StarPU macros that bindgen cannot translate. */
#include <stddef.h>
#include "../wrapper.h"

unsigned plb_task_get_nbuffers(const struct starpu_task *task)
{
	if (task->cl == NULL)
		return 0;
	return STARPU_TASK_GET_NBUFFERS(task);
}

starpu_data_handle_t plb_task_get_handle(const struct starpu_task *task, unsigned i)
{
	return STARPU_TASK_GET_HANDLE(task, i);
}

enum starpu_data_access_mode plb_task_get_mode(const struct starpu_task *task, unsigned i)
{
	return STARPU_TASK_GET_MODE(task, i);
}

unsigned plb_sched_ctx_workers(unsigned sched_ctx_id, int *out, unsigned max)
{
	struct starpu_worker_collection *workers = starpu_sched_ctx_get_worker_collection(sched_ctx_id);
	struct starpu_sched_ctx_iterator it;
	unsigned n = 0;
	if (workers == NULL)
		return 0;
	workers->init_iterator(workers, &it);
	while (n < max && workers->has_next(workers, &it))
		out[n++] = workers->get_next(workers, &it);
	return n;
}

unsigned plb_nmaxworkers(void)
{
	return STARPU_NMAXWORKERS;
}

/* 1 when StarPU's drivers put workers to sleep after an empty pop (only a
 * wake-up brings them back: SimGrid builds, --enable-blocking-drivers), 0
 * when they poll (STARPU_NON_BLOCKING_DRIVERS, Debian's 1.3). */
int plb_blocking_drivers(void)
{
#ifdef STARPU_NON_BLOCKING_DRIVERS
	return 0;
#else
	return 1;
#endif
}

unsigned plb_nmax_sched_ctxs(void)
{
	return STARPU_NMAX_SCHED_CTXS;
}

size_t plb_c_layout(unsigned what)
{
	switch (what)
	{
	case 0: return sizeof(struct starpu_sched_policy);
	case 1: return offsetof(struct starpu_sched_policy, policy_name);
	case 2: return offsetof(struct starpu_sched_policy, worker_type);
	case 3: return sizeof(struct starpu_conf);
	case 4: return offsetof(struct starpu_conf, sched_policy);
	case 5: return offsetof(struct starpu_conf, sched_policy_name);
	case 6: return sizeof(struct starpu_task);
	case 7: return offsetof(struct starpu_task, sched_ctx);
	case 8: return sizeof(struct starpu_codelet);
	default: return (size_t)-1;
	}
}
