/*
 * plb_mpi.c - the MPI side of `plb app mm-mpi` (compiled only when
 * StarPU-MPI and an MPI library are found, see build.rs).
 *
 * - StarPU-MPI start and stop on MPI_COMM_WORLD (MPI initialised here
 *   with MPI_THREAD_MULTIPLE, StarPU-MPI then told not to initialise it);
 * - small control collectives (allgather, broadcast) against a deadline,
 *   so that a rank that died or never answers turns into an error on
 *   every other rank instead of a hang: plb_distributed.h's collectives
 *   over StarPU-MPI messages, which C applications of the distributed API
 *   use too. The caller sleeps until they complete or the deadline
 *   passes; there are none before StarPU-MPI starts (mm-mpi checks its
 *   configuration once it has);
 * - the data exchange of a pivot step with StarPU-MPI (starpu_mpi_isend /
 *   starpu_mpi_irecv on vector handles), also against a deadline: the
 *   caller sleeps on a condition variable that each message's completion
 *   callback (StarPU-MPI's progress thread) signals, with the deadline as
 *   its time-out (plb_distributed.h's exchange). Nothing is polled: a
 *   blocking MPI_Wait could not time out, and Open MPI busy-polls its
 *   progress engine meanwhile, which takes a core from the StarPU
 *   workers of ranks sharing the machine.
 *
 * Every function returns 0 on success, -1 on time-out, another negative
 * number on an MPI or StarPU error.
 *
 * License: LGPL-2.1-or-later.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <plb_distributed.h>

/* MPI_Init_thread (MULTIPLE: StarPU-MPI's progression thread and the
 * main thread's calls, MPI_Abort among them), then rank and size. */
int plb_mpi_init(int *rank, int *size)
{
	int ready = 0, provided = 0;
	MPI_Initialized(&ready);
	if (!ready && MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
		return -2;
	/* The main thread calls MPI beside StarPU-MPI's progress thread:
	 * MULTIPLE, whoever initialised MPI. */
	if (ready)
		MPI_Query_thread(&provided);
	if (provided < MPI_THREAD_MULTIPLE)
		return -3;
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

/* The control collectives are StarPU-MPI messages (plb_distributed.h's:
 * the caller sleeps until they complete or the deadline passes), with
 * tags from 2^50 up, above every tag of the data exchanges; they fail
 * (-2) while StarPU-MPI is not running. */
static int starpu_running;
static struct plb_dist_starpu_mpi starpu_control;

/* starpu_mpi_init_conf on MPI_COMM_WORLD with `conf` (MPI already up). */
int plb_mpi_starpu_init(struct starpu_conf *conf)
{
	int rc = starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, conf);
	struct plb_dist_comm unused;
	if (rc == 0 &&
	    plb_dist_comm_starpu_mpi(MPI_COMM_WORLD, (int64_t)1 << 50, &starpu_control, &unused) == 0)
		starpu_running = 1;
	return rc;
}

void plb_mpi_starpu_shutdown(void)
{
	starpu_running = 0;
	starpu_mpi_shutdown();
}

void plb_mpi_finalize(void)
{
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
 * `timeout_s` seconds. */
static int control_allgather(void *arg, const void *send, int len, void *recv, double timeout_s)
{
	(void)arg;
	return starpu_running
		       ? plb_dist_starpu_mpi_allgather(&starpu_control, send, len, recv, timeout_s)
		       : -2;
}

/* `len` bytes of `root` into every rank's `buf`, within `timeout_s`. */
static int control_bcast(void *arg, void *buf, int len, int root, double timeout_s)
{
	(void)arg;
	return starpu_running ? plb_dist_starpu_mpi_bcast(&starpu_control, buf, len, root, timeout_s)
			      : -2;
}

/* The control collectives as plb_distributed.h's communicator (after
 * plb_mpi_init). */
void plb_mpi_control(struct plb_dist_comm *out)
{
	MPI_Comm_rank(MPI_COMM_WORLD, &out->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &out->size);
	out->arg = NULL;
	out->allgather = control_allgather;
	out->bcast = control_bcast;
}

/* One message of an exchange: `count` floats at `buf` to or from `peer`. */
struct plb_mpi_msg {
	float *buf;
	int64_t count;
	int peer;
	int64_t tag;
};

/* Posts every receive and send with StarPU-MPI and sleeps until all
 * completed, within `timeout_s` (plb_distributed.h's exchange: a detached
 * request per message on a vector handle, each completion signalled; on
 * failure everything is left pending, and the caller ends the job). The
 * buffers are in main memory and up to date when it returns 0. */
int plb_mpi_exchange(const struct plb_mpi_msg *sends, int nsends, const struct plb_mpi_msg *recvs,
		     int nrecvs, double timeout_s)
{
	const int n = nsends + nrecvs;
	if (n == 0)
		return 0;
	struct plb_dist_msg *m = calloc((size_t)n, sizeof *m);
	if (!m)
		return -6;
	for (int i = 0; i < n; i++) {
		const struct plb_mpi_msg *x = i < nrecvs ? &recvs[i] : &sends[i - nrecvs];
		m[i] = plb_dist_msg_of(x->buf, (size_t)x->count * sizeof(float), x->peer, x->tag,
				       i < nrecvs);
	}
	const int rc = plb_dist_starpu_mpi_exchange(m, n, MPI_COMM_WORLD, timeout_s);
	free(m);
	return rc;
}
