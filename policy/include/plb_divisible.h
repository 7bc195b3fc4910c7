/*
 * plb_divisible.h - divisible-load API of libstarpu_plb.so.
 *
 * An application with W independent units of work asks a PLB balancer
 * (any of those listed below) which StarPU worker processes which range
 * [offset, offset + len) next. The application's own thread
 * creates and submits each block's task, pinned to the chosen worker; the
 * balancer decides block sizes and order and learns from the timings
 * reported with plb_dl_done(). Every unit is handed out exactly once.
 *
 *   starpu_init(NULL);
 *   plb_dl_run *run = plb_dl_create(W, "plb-hac");   // NULL: STARPU_SCHED
 *   int w; uint64_t id, off, len; int rc;
 *   while ((rc = plb_dl_next(run, &w, &id, &off, &len)) == PLB_DL_BLOCK) {
 *       struct starpu_task *t = starpu_task_create();
 *       t->cl = &my_codelet;                 // measures its compute time
 *       t->execute_on_a_specific_worker = 1;
 *       t->workerid = w;
 *       t->callback_func = my_callback;      // calls plb_dl_done(run, id, ...)
 *       ...                                  // arguments: run, id, off, len
 *       starpu_task_submit(t);
 *   }
 *   if (rc < 0) fprintf(stderr, "%s\n", plb_dl_last_error());
 *   starpu_task_wait_for_all();
 *   plb_dl_destroy(run);
 *
 * plb_dl_done() may be called from a StarPU task callback: it only records
 * the completion and wakes plb_dl_next(); it never submits a task. Never
 * submit from a callback yourself: submit from the thread that calls
 * plb_dl_next().
 *
 * Thread safety: every function may be called from any thread.
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_DIVISIBLE_H
#define PLB_DIVISIBLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define PLB_DL_BLOCK 1        /* a block was returned */
#define PLB_DL_FINISHED 0     /* every unit handed out and reported done */
#define PLB_DL_PENDING 2      /* plb_dl_try_next only: call again later */
#define PLB_DL_EINVAL (-1)    /* NULL pointer or invalid argument */
#define PLB_DL_EBALANCER (-2) /* unknown balancer name / bad configuration */
#define PLB_DL_ENOWORKERS (-3) /* no worker, bad or duplicated worker id */
#define PLB_DL_EUNKNOWN (-4)  /* plb_dl_done: block id never handed out */
#define PLB_DL_EDONE (-5)     /* plb_dl_done: block already reported done */
#define PLB_DL_ETIME (-6)     /* plb_dl_done: negative or non-finite time */
#define PLB_DL_ESTALLED (-7)  /* the balancer can make no progress */
#define PLB_DL_EFAULT (-8)    /* internal error */

/* Opaque run handle. */
typedef struct plb_dl_run plb_dl_run;

/* Counters of a run (plb_dl_get_stats). */
struct plb_dl_stats {
	uint64_t total_units;
	uint64_t blocks_issued;
	uint64_t blocks_done;
	uint64_t units_issued;
	uint64_t units_done;
	/* Balancer model updates: PLB-HAC/PLB-HeC refits, HDSS weight fits,
	 * Acosta rebalances, 0 for greedy. */
	uint64_t refits;
	/* Seconds since the run was created. */
	double elapsed_s;
};

/*
 * Creates a run of total_units units on every StarPU worker
 * (0 .. starpu_worker_get_count() - 1). Call after starpu_init().
 * balancer: one of the names below, optionally with arguments,
 * NAME[:ARG[,ARG]...] (e.g. "greedy:<block size>", "static:speeds=1/4";
 * docs/usage.md, "Balancer names"), or NULL for the one named by
 * STARPU_SCHED (greedy if STARPU_SCHED names none of them). Returns NULL
 * on error (plb_dl_last_error() says why).
 *
 * Balancer names (every balancer of the library; a test checks this list
 * against the library's registry):
 *   greedy plb-hac plb-hec hdss acosta static dynamic hguided adaptive sigmoid
 */
plb_dl_run *plb_dl_create(uint64_t total_units, const char *balancer);

/* As plb_dl_create, on the nworkers StarPU worker ids in workerids. */
plb_dl_run *plb_dl_create_on(uint64_t total_units, const char *balancer,
			     const int *workerids, unsigned nworkers);

/*
 * A new run of total_units units on the same workers with the same balancer
 * as previous (e.g. the next pass of an iterative application), continuing
 * from what previous learned: PLB-HAC keeps its performance models and
 * skips its training; the other balancers start afresh. Call it once
 * previous is finished; previous must still be destroyed. NULL on error.
 */
plb_dl_run *plb_dl_create_next(const plb_dl_run *previous, uint64_t total_units);

/*
 * Next block: blocks while no block can be handed out and blocks are in
 * flight. Returns PLB_DL_BLOCK with *workerid (StarPU worker to pin the
 * task to), *block_id (for plb_dl_done), *offset and *len (> 0) set;
 * PLB_DL_FINISHED once every block was handed out and reported done; or a
 * negative PLB_DL_E* code. Out-pointers may be NULL.
 */
int plb_dl_next(const plb_dl_run *run, int *workerid, uint64_t *block_id,
		uint64_t *offset, uint64_t *len);

/* As plb_dl_next, never blocking: PLB_DL_PENDING when nothing can be
 * handed out until a block in flight is reported done. */
int plb_dl_try_next(const plb_dl_run *run, int *workerid, uint64_t *block_id,
		    uint64_t *offset, uint64_t *len);

/*
 * Block block_id finished: compute_s seconds computing (measured in the
 * codelet, e.g. with starpu_timing_now() around the kernel, / 1e6) and
 * transfer_s seconds moving its data (0 if unknown). Exactly once per
 * block. Returns 0, or PLB_DL_EUNKNOWN / PLB_DL_EDONE / PLB_DL_ETIME /
 * PLB_DL_EINVAL (nothing recorded; with PLB_DL_ETIME the block is still in
 * flight). Callable from a StarPU callback.
 */
int plb_dl_done(const plb_dl_run *run, uint64_t block_id, double compute_s,
		double transfer_s);

/* Fills *out. Returns 0 or a negative code. */
int plb_dl_get_stats(const plb_dl_run *run, struct plb_dl_stats *out);

/*
 * Frees the run. Call it after plb_dl_next() returned PLB_DL_FINISHED (or
 * after every block handed out was reported done): a run with blocks in
 * flight is leaked (and an error logged) rather than freed. NULL: no-op.
 */
void plb_dl_destroy(plb_dl_run *run);

/* Message of the last failed plb_dl_* call on the calling thread ("" if
 * none); valid until the next failing call on this thread. */
const char *plb_dl_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* PLB_DIVISIBLE_H */
