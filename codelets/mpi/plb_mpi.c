/*
 * plb_mpi.c - the MPI side of `plb app mm-mpi` (compiled only when
 * StarPU-MPI and an MPI library are found, see build.rs).
 *
 * - StarPU-MPI start and stop on MPI_COMM_WORLD (MPI initialised here
 *   with MPI_THREAD_MULTIPLE, StarPU-MPI then told not to initialise it);
 * - small control collectives (allgather, broadcast) on a duplicate of
 *   MPI_COMM_WORLD, non-blocking and polled against a deadline, so that a
 *   rank that died or never answers turns into an error on every other
 *   rank instead of a hang (the collectives of plb_distributed.h, which
 *   C applications of the distributed API use too);
 * - the data exchange of a pivot step with StarPU-MPI (starpu_mpi_isend /
 *   starpu_mpi_irecv on vector handles), also against a deadline: the
 *   caller sleeps on a condition variable that each message's completion
 *   callback (StarPU-MPI's progress thread) signals, with the deadline as
 *   its time-out. The control collectives are polled (MPI_Test, then
 *   0.2 ms asleep): a blocking MPI_Wait cannot time out, and Open MPI's
 *   busy-polls its progress engine meanwhile, which takes a core from the
 *   StarPU workers of ranks sharing the machine.
 *
 * Every function returns 0 on success, -1 on time-out, another negative
 * number on an MPI or StarPU error.
 *
 * License: LGPL-2.1-or-later.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <plb_distributed.h>

static MPI_Comm control = MPI_COMM_NULL;

/* MPI_Init_thread (MULTIPLE: StarPU-MPI's progression thread and our
 * control calls), then rank and size. */
int plb_mpi_init(int *rank, int *size)
{
	int ready = 0, provided = 0;
	MPI_Initialized(&ready);
	if (!ready && MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
		return -2;
	/* Our control collectives (main thread) run beside StarPU-MPI's
	 * progress thread: MULTIPLE, whoever initialised MPI. */
	if (ready)
		MPI_Query_thread(&provided);
	if (provided < MPI_THREAD_MULTIPLE)
		return -3;
	if (MPI_Comm_dup(MPI_COMM_WORLD, &control) != MPI_SUCCESS)
		return -4;
	MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

/* starpu_mpi_init_conf on MPI_COMM_WORLD with `conf` (MPI already up). */
int plb_mpi_starpu_init(struct starpu_conf *conf)
{
	return starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, conf);
}

void plb_mpi_starpu_shutdown(void)
{
	starpu_mpi_shutdown();
}

void plb_mpi_finalize(void)
{
	if (control != MPI_COMM_NULL)
		MPI_Comm_free(&control);
	int done = 0;
	MPI_Finalized(&done);
	if (!done)
		MPI_Finalize();
}

/* Ends every rank of the job (after a time-out or a refused start). */
void plb_mpi_abort(int code)
{
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
}

/* Every rank's `len` bytes into `recv` (size * len bytes), within
 * `timeout_s` seconds (the distributed API's own MPI collective). */
int plb_mpi_allgather(const void *send, int len, void *recv, double timeout_s)
{
	return plb_dist_mpi_allgather(&control, send, len, recv, timeout_s);
}

/* `len` bytes of `root` into every rank's `buf`, within `timeout_s`. */
int plb_mpi_bcast(void *buf, int len, int root, double timeout_s)
{
	return plb_dist_mpi_bcast(&control, buf, len, root, timeout_s);
}

/* One message of an exchange: `count` floats at `buf` to or from `peer`. */
struct plb_mpi_msg {
	float *buf;
	int64_t count;
	int peer;
	int64_t tag;
};

/* Messages of one exchange completed so far, and the condition the
 * exchange sleeps on until all have. */
struct completions {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

/* A message's completion callback (StarPU-MPI's progress thread). */
static void message_done(void *arg)
{
	struct completions *c = arg;
	pthread_mutex_lock(&c->lock);
	c->done++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Sleeps until `posted` messages of `c` completed or `timeout_s` passed
 * (-1). */
static int wait_completions(struct completions *c, int posted, double timeout_s)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	double whole = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + timeout_s;
	until.tv_sec = (time_t)whole;
	until.tv_nsec = (long)((whole - (double)until.tv_sec) * 1e9);
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	while (c->done < posted) {
		int r = pthread_cond_timedwait(&c->cond, &c->lock, &until);
		if (r == ETIMEDOUT && c->done < posted) {
			rc = -1;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Posts every receive and send with StarPU-MPI (detached requests on a
 * vector handle per message; each completion is counted and signalled)
 * and sleeps until all completed, within `timeout_s`. The buffers are in
 * main memory and up to date when it returns 0. */
int plb_mpi_exchange(const struct plb_mpi_msg *sends, int nsends, const struct plb_mpi_msg *recvs,
		     int nrecvs, double timeout_s)
{
	int n = nsends + nrecvs, rc = 0, posted = 0;
	if (n == 0)
		return 0;
	starpu_data_handle_t *h = calloc((size_t)n, sizeof(*h));
	struct completions *completed = malloc(sizeof(*completed));
	pthread_condattr_t attr;
	if (!h || !completed || pthread_condattr_init(&attr) != 0) {
		free(h);
		free(completed);
		return -6;
	}
	/* The deadline is on the monotonic clock. */
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&completed->lock, NULL);
	pthread_cond_init(&completed->cond, &attr);
	pthread_condattr_destroy(&attr);
	completed->done = 0;
	for (int i = 0; i < n; i++) {
		const struct plb_mpi_msg *m = i < nrecvs ? &recvs[i] : &sends[i - nrecvs];
		starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)m->buf,
					    (uint32_t)m->count, sizeof(float));
		int r = i < nrecvs ? starpu_mpi_irecv_detached(h[i], m->peer, m->tag, MPI_COMM_WORLD,
							      message_done, completed)
				   : starpu_mpi_isend_detached(h[i], m->peer, m->tag, MPI_COMM_WORLD,
							      message_done, completed);
		if (r != 0) {
			fprintf(stderr, "plb_mpi_exchange: starpu_mpi_%s to/from %d (tag %lld) failed: %d\n",
				i < nrecvs ? "irecv" : "isend", m->peer, (long long)m->tag, r);
			rc = -7;
			break;
		}
		posted++;
	}
	if (rc == 0)
		rc = wait_completions(completed, posted, timeout_s);
	if (rc == 0) {
		for (int i = 0; i < n; i++)
			starpu_data_unregister(h[i]);
		pthread_cond_destroy(&completed->cond);
		pthread_mutex_destroy(&completed->lock);
		free(completed);
	}
	/* On failure the handles and the completions are left as they are:
	 * their requests may still be pending (and call message_done), and the
	 * caller ends the job. */
	free(h);
	return rc;
}
