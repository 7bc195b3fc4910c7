/*
 * plb_distributed.h - the distributed divisible-load API of
 * libstarpu_plb.so, for StarPU-MPI applications (docs/cluster.md).
 *
 * A 2-D workload of G x G blocks of b x b elements (e.g. C = A * B) is
 * shared out over the ranks of a communicator, one rank per node, by the
 * two-level partitioning of Clarke, Ilic, Lastovetsky and Sousa: the head
 * rank (0) proposes each node's rectangle of blocks (INPA, with the CMA's
 * column-based arrangement), every rank splits its rectangle's columns
 * over its own devices (IDPA) by running the application's node kernel on
 * them, and the node times are gathered until they agree. The algorithm
 * is FPM with the GPA ("fpm-hier"), PLB-HAC's models ("plb-hac"), or one
 * of the paper's baselines.
 *
 *   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
 *   starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, NULL);
 *   struct plb_dist_starpu_mpi state; struct plb_dist_comm comm;
 *   plb_dist_comm_starpu_mpi(MPI_COMM_WORLD, FIRST_TAG, &state, &comm);
 *   // (or plb_dist_comm_mpi: MPI collectives on a duplicated communicator)
 *   struct plb_dist_config cfg = { .grid = G, .block = b,
 *       .ndevices = starpu_worker_get_count(),
 *       .bench = my_bench, .bench_arg = &my_state };
 *   struct plb_dist_rect rects[size]; uint64_t split[ndevices];
 *   int rc = plb_dist_partition(&cfg, &comm, rects, split);
 *   if (rc == PLB_DIST_ECOMM) MPI_Abort(MPI_COMM_WORLD, 3);
 *   if (rc < 0) ... plb_dist_last_error() ...          // every rank fails
 *   // rects[rank] is this rank's share: compute it, e.g. with the node's
 *   // own PLB-HAC through plb_divisible.h over rects[rank].cols * b
 *   // columns (plb_dl_create(..., "plb-hac")).
 *
 * The node kernel (struct plb_dist_config's bench) runs the application's
 * kernel on this node's devices at once (e.g. one StarPU task pinned to
 * each worker), device j on `rows` rows and cols[j] columns, and returns
 * each device's seconds. It runs on the thread that called
 * plb_dist_partition, between the collectives.
 *
 * Every rank takes part in every collective in the same order, failures
 * included: a rank whose kernel fails says so in the round's gather, and
 * every rank returns PLB_DIST_EFAILED naming it. A collective that fails
 * or outlasts its deadline returns PLB_DIST_ECOMM: the ranks no longer
 * match, end the job (MPI_Abort). A deadline is the larger of the floor
 * (timeout_s) and 10 times the slowest node's benchmark so far.
 *
 * Thread safety: plb_dist_partition may be called from any one thread per
 * rank; plb_dist_last_error is per thread.
 * License: LGPL-2.1-or-later.
 */
#ifndef PLB_DISTRIBUTED_H
#define PLB_DISTRIBUTED_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include "plb_divisible.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of plb_dist_partition. */
#define PLB_DIST_OK 0
#define PLB_DIST_EINVAL (-1)  /* NULL pointer or invalid configuration */
#define PLB_DIST_EFAILED (-2) /* the partitioning failed; every rank returns it */
#define PLB_DIST_ECOMM (-3)   /* a collective failed or timed out: end the job */
#define PLB_DIST_EFAULT (-8)  /* internal error */

/* What a communicator callback returns when its collective did not
 * complete within timeout_s (0: done; any other negative: failed). */
#define PLB_DIST_TIMEDOUT (-1)

/*
 * The communicator the partitioning runs on: this rank, the number of
 * ranks, and two collectives over all of them, each bounded by timeout_s
 * seconds. On PLB_DIST_TIMEDOUT the collective may still be pending: the
 * library then never frees or reuses its buffers. plb_dist_comm_mpi()
 * below fills one for an MPI communicator.
 */
struct plb_dist_comm {
	int rank;
	int size;
	void *arg;
	/* Every rank's len bytes of send into recv (size * len bytes, in
	 * rank order). */
	int (*allgather)(void *arg, const void *send, int len, void *recv, double timeout_s);
	/* root's len bytes of buf into every rank's buf. */
	int (*bcast)(void *arg, void *buf, int len, int root, double timeout_s);
};

/*
 * The node kernel: run on this node's ndevices devices at once, device j
 * on rows rows and cols[j] columns (none when cols[j] is 0); write each
 * device's seconds into seconds[j] (0 without columns). Return 0, or
 * non-zero on failure (every rank then returns PLB_DIST_EFAILED).
 */
typedef int (*plb_dist_bench_fn)(void *arg, uint64_t rows, const uint64_t *cols,
				 unsigned ndevices, double *seconds);

/* The partitioning's settings (identical on every rank but ndevices,
 * bench and bench_arg). Zero fields take the defaults. */
struct plb_dist_config {
	/* "fpm-hier" (NULL: the default), "plb-hac", "multiple-cpm",
	 * "single-cpm" or "homogeneous". */
	const char *algorithm;
	uint64_t grid;       /* G: blocks per side (>= 1) */
	uint64_t block;      /* b: elements per block side (>= 1) */
	double node_eps;     /* INPA: node times agree within this (0: 0.05) */
	double device_eps;   /* IDPA: device times agree within this (0: 0.05) */
	unsigned max_rounds; /* per level (0: 20) */
	double timeout_s;    /* floor of every collective's deadline (0: 60) */
	unsigned ndevices;   /* this node's devices (>= 1) */
	plb_dist_bench_fn bench;
	void *bench_arg;
	int verbose;         /* rank 0 prints every INPA round to stderr */
};

/* A node's share, in blocks: rows [row, row + rows), columns
 * [col, col + cols) of the G x G grid. */
struct plb_dist_rect {
	uint64_t row, col, rows, cols;
};

/*
 * The two-level partitioning; call it on every rank of comm. On success
 * (0) rects[0 .. size - 1] holds every rank's rectangle (they tile the
 * grid) and split[0 .. ndevices - 1] this rank's columns per device
 * (summing to rects[rank].cols * block). Otherwise a negative PLB_DIST_E*
 * code and plb_dist_last_error() says why.
 */
int plb_dist_partition(const struct plb_dist_config *cfg, const struct plb_dist_comm *comm,
		       struct plb_dist_rect *rects, uint64_t *split);

/* Message of the last failed plb_dist_* call on the calling thread (""
 * if none); valid until the next failing call on this thread. */
const char *plb_dist_last_error(void);

/*
 * Ready-made collectives over an MPI communicator: non-blocking MPI
 * collectives polled (MPI_Test, then 0.2 ms asleep) until done or the
 * deadline. Use a communicator of its own (MPI_Comm_dup), so the
 * partitioning's messages never meet the application's or StarPU-MPI's.
 */
static inline int plb_dist_mpi_wait(MPI_Request *req, double timeout_s)
{
	const double deadline = MPI_Wtime() + timeout_s;
	for (;;) {
		int flag = 0;
		if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return -5;
		if (flag)
			return 0;
		if (MPI_Wtime() > deadline)
			return PLB_DIST_TIMEDOUT;
		struct timespec nap = { 0, 200000 };
		nanosleep(&nap, NULL);
	}
}

static inline int plb_dist_mpi_allgather(void *arg, const void *send, int len, void *recv,
					 double timeout_s)
{
	MPI_Request req;
	if (MPI_Iallgather(send, len, MPI_BYTE, recv, len, MPI_BYTE, *(MPI_Comm *)arg, &req) !=
	    MPI_SUCCESS)
		return -5;
	return plb_dist_mpi_wait(&req, timeout_s);
}

static inline int plb_dist_mpi_bcast(void *arg, void *buf, int len, int root, double timeout_s)
{
	MPI_Request req;
	if (MPI_Ibcast(buf, len, MPI_BYTE, root, *(MPI_Comm *)arg, &req) != MPI_SUCCESS)
		return -5;
	return plb_dist_mpi_wait(&req, timeout_s);
}

/*
 * Fills *out for *comm (which must outlive every use of *out). MPI must
 * run at MPI_THREAD_MULTIPLE: these collectives run on the caller's
 * thread beside StarPU-MPI's progress thread (not checked under SimGrid's
 * SMPI, whose actors run one at a time). Returns 0, -3 when MPI gives a
 * lower thread level, or an MPI error code.
 */
static inline int plb_dist_comm_mpi(MPI_Comm *comm, struct plb_dist_comm *out)
{
	int rc;
#ifndef SMPI_H
	/* (SimGrid's SMPI reports MPI_THREAD_SINGLE, but runs one actor at a
	 * time: the calls of StarPU-MPI's thread and ours never overlap.) */
	int provided = 0;
	MPI_Query_thread(&provided);
	if (provided < MPI_THREAD_MULTIPLE)
		return -3;
#endif
	if ((rc = MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
		return rc;
	if ((rc = MPI_Comm_rank(*comm, &out->rank)) != MPI_SUCCESS)
		return rc;
	if ((rc = MPI_Comm_size(*comm, &out->size)) != MPI_SUCCESS)
		return rc;
	out->arg = comm;
	out->allgather = plb_dist_mpi_allgather;
	out->bcast = plb_dist_mpi_bcast;
	return 0;
}

/*
 * Collectives over StarPU-MPI's messages instead (StarPU-MPI must be
 * running): each is a set of detached StarPU-MPI messages on registered
 * byte vectors whose completion callbacks (StarPU-MPI's progress thread)
 * signal a condition variable; the caller sleeps on it until every
 * message completed or the deadline passed. Nothing polls. Not for
 * StarPU-SimGrid, where a thread may not sleep outside the simulation.
 */

/* One message of plb_dist_starpu_mpi_exchange: bytes at buf to or from
 * peer, with tag. */
struct plb_dist_msg {
	void *buf;
	size_t bytes;
	int peer;
	int64_t tag;
	int receive; /* 1: receive into buf, 0: send buf */
};

struct plb_dist_completions {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

static inline struct plb_dist_msg plb_dist_msg_of(void *buf, size_t bytes, int peer, int64_t tag,
						   int receive)
{
	struct plb_dist_msg m;
	m.buf = buf;
	m.bytes = bytes;
	m.peer = peer;
	m.tag = tag;
	m.receive = receive;
	return m;
}

static inline void plb_dist_message_done(void *arg)
{
	struct plb_dist_completions *c = (struct plb_dist_completions *)arg;
	pthread_mutex_lock(&c->lock);
	c->done++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Posts every message of msgs[0 .. n - 1] with StarPU-MPI on comm, then
 * waits until all completed, at most timeout_s seconds. Returns 0,
 * PLB_DIST_TIMEDOUT, or -5 (StarPU-MPI refused a message). On anything
 * but 0 the messages may still be pending: their buffers, handles and
 * completion state are left as they are (never freed under StarPU-MPI).
 */
static inline int plb_dist_starpu_mpi_exchange(const struct plb_dist_msg *msgs, int n, MPI_Comm comm,
					       double timeout_s)
{
	starpu_data_handle_t *h = (starpu_data_handle_t *)calloc((size_t)n + 1, sizeof *h);
	struct plb_dist_completions *c =
		(struct plb_dist_completions *)malloc(sizeof(struct plb_dist_completions));
	pthread_condattr_t attr;
	if (!h || !c || pthread_condattr_init(&attr) != 0) {
		free(h);
		free(c);
		return -6;
	}
	/* The deadline is on the monotonic clock. */
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
	c->done = 0;
	int posted = 0, rc = 0;
	for (int i = 0; i < n; i++) {
		const struct plb_dist_msg *m = &msgs[i];
		starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)m->buf,
					    (uint32_t)m->bytes, 1);
		if ((m->receive ? starpu_mpi_irecv_detached(h[i], m->peer, m->tag, comm,
							   plb_dist_message_done, c)
				: starpu_mpi_isend_detached(h[i], m->peer, m->tag, comm,
							   plb_dist_message_done, c)) != 0) {
			rc = -5;
			break;
		}
		posted++;
	}
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	const double whole = (double)(long long)timeout_s;
	until.tv_sec += (time_t)whole;
	until.tv_nsec += (long)((timeout_s - whole) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (rc == 0 && c->done < posted)
		if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT &&
		    c->done < posted)
			rc = PLB_DIST_TIMEDOUT;
	pthread_mutex_unlock(&c->lock);
	if (rc == 0) {
		for (int i = 0; i < n; i++)
			starpu_data_unregister(h[i]);
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
		free(c);
		free(h);
	}
	return rc;
}

/* A communicator for plb_dist_comm_starpu_mpi: StarPU-MPI's comm and the
 * next message tag (one per collective; every rank calls the same
 * collectives in the same order, so their tags agree). */
struct plb_dist_starpu_mpi {
	MPI_Comm comm;
	int64_t next_tag;
	int rank, size;
};

static inline int plb_dist_starpu_mpi_allgather(void *arg, const void *send, int len, void *recv,
						double timeout_s)
{
	struct plb_dist_starpu_mpi *s = (struct plb_dist_starpu_mpi *)arg;
	const int64_t tag = s->next_tag++;
	memcpy((char *)recv + (size_t)s->rank * len, send, (size_t)len);
	struct plb_dist_msg *m =
		(struct plb_dist_msg *)calloc(2 * (size_t)s->size, sizeof(struct plb_dist_msg));
	if (!m)
		return -6;
	int n = 0;
	for (int r = 0; r < s->size; r++) {
		if (r == s->rank)
			continue;
		m[n++] = plb_dist_msg_of((char *)recv + (size_t)r * len, (size_t)len, r, tag, 1);
		m[n++] = plb_dist_msg_of((void *)send, (size_t)len, r, tag, 0);
	}
	const int rc = plb_dist_starpu_mpi_exchange(m, n, s->comm, timeout_s);
	free(m);
	return rc;
}

static inline int plb_dist_starpu_mpi_bcast(void *arg, void *buf, int len, int root,
					    double timeout_s)
{
	struct plb_dist_starpu_mpi *s = (struct plb_dist_starpu_mpi *)arg;
	const int64_t tag = s->next_tag++;
	struct plb_dist_msg *m =
		(struct plb_dist_msg *)calloc((size_t)s->size, sizeof(struct plb_dist_msg));
	if (!m)
		return -6;
	int n = 0;
	if (s->rank == root) {
		for (int r = 0; r < s->size; r++)
			if (r != root)
				m[n++] = plb_dist_msg_of(buf, (size_t)len, r, tag, 0);
	} else {
		m[n++] = plb_dist_msg_of(buf, (size_t)len, root, tag, 1);
	}
	const int rc = plb_dist_starpu_mpi_exchange(m, n, s->comm, timeout_s);
	free(m);
	return rc;
}

/*
 * Fills *out with collectives over StarPU-MPI's messages on comm (the
 * communicator StarPU-MPI was started on), using message tags from
 * first_tag up, one per collective: give the partitioning tags no data of
 * the application uses. *state must outlive every use of *out. Returns
 * 0 or an MPI error code.
 */
static inline int plb_dist_comm_starpu_mpi(MPI_Comm comm, int64_t first_tag,
					   struct plb_dist_starpu_mpi *state, struct plb_dist_comm *out)
{
	int rc;
	state->comm = comm;
	state->next_tag = first_tag;
	if ((rc = starpu_mpi_comm_rank(comm, &state->rank)) != 0)
		return rc;
	if ((rc = starpu_mpi_comm_size(comm, &state->size)) != 0)
		return rc;
	out->rank = state->rank;
	out->size = state->size;
	out->arg = state;
	out->allgather = plb_dist_starpu_mpi_allgather;
	out->bcast = plb_dist_starpu_mpi_bcast;
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* PLB_DISTRIBUTED_H */
