/* Everything a scheduling policy and the applications need from StarPU. */
#include <starpu.h>
#include <starpu_scheduler.h>
#include <starpu_sched_ctx.h>
#include <starpu_worker.h>
#include <starpu_profiling.h>
#include <starpu_perfmodel.h>

/* C wrappers for StarPU's function-like macros and inline helpers
 * (implemented in src/wrappers.c). */
unsigned plb_task_get_nbuffers(const struct starpu_task *task);
starpu_data_handle_t plb_task_get_handle(const struct starpu_task *task, unsigned i);
enum starpu_data_access_mode plb_task_get_mode(const struct starpu_task *task, unsigned i);
/* Iterate a scheduling context's workers into `out` (at most `max`);
 * returns how many were written. */
unsigned plb_sched_ctx_workers(unsigned sched_ctx_id, int *out, unsigned max);
/* The STARPU_NMAXWORKERS and STARPU_NMAX_SCHED_CTXS of this build. */
unsigned plb_nmaxworkers(void);
int plb_blocking_drivers(void);
unsigned plb_nmax_sched_ctxs(void);
/* Sizes and offsets as the C compiler sees them, to check bindgen's
 * layouts against (see the tests in src/lib.rs). */
size_t plb_c_layout(unsigned what);
