/*
 * comm_mpi.c - the MPI communication backend: one process per rank, for
 * programs started by mpirun or srun.  The process of world rank w runs the
 * rank the planner placed on device w (taprt_program.devices; identity
 * without one), and every communicator numbers processes by that rank.
 *
 * Needs MPI-3 (non-blocking collectives, MPI_Comm_create_group) at level
 * MPI_THREAD_FUNNELED: only the thread that called taprt_main calls MPI
 * (OpenBLAS's threads never do), so nothing more is asked of the library;
 * the one exception is the set-up watchdog's MPI_Abort, a last resort.
 *
 * Communicators.  init splits the world once per group the program talks
 * in (MPI_Comm_split, the group order as the key, so that a
 * communicator's ranks are group indices): the rank's TP group, its DP
 * group and its pipe, the stages of one replica and TP coordinate.  Every
 * pipeline transfer stays inside a pipe; a tensor may skip stages, so the
 * pipe serves every pair of its stages, neighbours or not.  A collective
 * on another group (the tests use some) creates its communicator on first
 * use (MPI_Comm_create_group, collective over that group only) and keeps
 * it.  Once set up, all of them return errors (MPI_ERRORS_RETURN) instead
 * of aborting inside MPI, so a failure comes back to the kernel that
 * called, with MPI's message, and taprt_main reports the rank and ends the
 * job.
 *
 * Reductions use MPI to move data and the runtime's arithmetic: an
 * all-reduce is an all-to-all of chunks (member i gets chunk i of every
 * member's buffer), each member reducing its chunk in group order with the
 * threads backend's functions (reduce.c), then an all-gather of the chunks;
 * a reduce-scatter is the first half.  MPI_Allreduce associates a sum as
 * the algorithm it picks for the message size does, so its results would
 * differ from the threads backend's in the last bits, and between sizes;
 * this way both backends and every run give the same bits, for the volume
 * of a ring all-reduce.  Data moves as the dtype's MPI type (MPI_FLOAT,
 * MPI_INT64_T, ...; f16 and bf16 as MPI_UINT16_T, bool as MPI_UINT8_T).
 *
 * Point to point.  send copies the tensor into a staging buffer and starts
 * MPI_Isend: the arena is free for the next node at once, and the stage
 * goes on to its next micro-batch while the message travels, so stages
 * overlap.  At most MAX_SENDS are in flight; a send beyond waits for one
 * to finish (no deadlock: in a forward pipeline receivers wait only for
 * earlier stages).  recv posts MPI_Irecv into the tensor and waits.  Each
 * (peer, tag, direction) counts its messages and the MPI tag is tag << 8 |
 * (count mod 256): every message in flight between two ranks has a tag of
 * its own, one per micro-batch and tensor, on top of MPI's non-overtaking
 * order.  Negative tags (taprt_main's output gather) use a communicator of
 * their own.  Messages over 1 GiB go in pieces (MPI counts are ints).
 *
 * Waiting.  Every wait polls MPI_Test, spinning for a few milliseconds
 * while the ranks on this node and their intra-op threads fit on its CPUs
 * (taprt_comm_spin_ns), then sleeping between polls (up to 100 us), so
 * eight ranks on two cores leave the cores to the ranks with work; MPI's
 * blocking calls would spin.  TAPRT_COMM_SPIN=US sets the spinning window
 * in microseconds (0: sleep at once), as for the threads backend.  A wait has
 * no time limit: when a peer dies the launcher ends the job, or an MPI call
 * fails and the failure ends it (abort: MPI_Abort on the world).  Set-up
 * alone has a watchdog (below): Open MPI can spin forever there.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "runtime/internal.h"

/* How init failed: the same way on every process, or on this one only. */
enum { FAIL_ALL = 1, FAIL_ME };

enum {
	MAX_SENDS = 32,                 /* staged sends in flight */
	SEQ_BITS = 8,                   /* message counter bits in an MPI tag */
};
#define PIECE ((int64_t)1 << 30)   /* bytes per point-to-point message */

typedef struct {
	int size;
	int *ranks;                     /* global ranks, group order */
	MPI_Comm comm;
} Group;

typedef struct {
	int peer, tag;
	unsigned sent, received;
} Seq;

struct taprt_comm {
	taprt_layout l;
	int rank;
	bool own_init;                  /* we called MPI_Init_thread: finalize too */
	int failed;                     /* init failed: FAIL_ALL or FAIL_ME */
	int64_t spin_ns;                /* polling before the first sleep */
	int tag_ub;
	MPI_Comm world, ctl;            /* duplicates of the world: the program's, taprt_main's */
	Group tp, dp, pipe;             /* this rank's */
	Group *extra;                   /* made on first use */
	int nextra;
	Seq *seq;
	int nseq, capseq;
	MPI_Request sreq[MAX_SENDS];    /* staged sends; MPI_REQUEST_NULL: slot free */
	void *sbuf[MAX_SENDS];
	size_t scap[MAX_SENDS];
	void *scratch;                  /* reductions' chunks */
	size_t scratch_cap;
	int *counts;                    /* 4 x nranks: all-to-all counts and offsets */
};

static const char *
mpi_strerror(int rc)
{
	static char buf[MPI_MAX_ERROR_STRING + 1];
	int len = 0;
	if (rc < 0)
		return strerror(-rc);
	if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
		snprintf(buf, sizeof buf, "MPI error %d", rc);
	else
		buf[len] = 0;
	return buf;
}

static MPI_Datatype
mpi_type(int dtype)
{
	switch (dtype) {
	case TAPRT_F32: return MPI_FLOAT;
	case TAPRT_F64: return MPI_DOUBLE;
	case TAPRT_I8: return MPI_INT8_T;
	case TAPRT_U8: case TAPRT_BOOL: return MPI_UINT8_T;
	case TAPRT_I16: return MPI_INT16_T;
	case TAPRT_U16: case TAPRT_F16: case TAPRT_BF16: return MPI_UINT16_T;
	case TAPRT_I32: return MPI_INT32_T;
	case TAPRT_U32: return MPI_UINT32_T;
	case TAPRT_I64: return MPI_INT64_T;
	case TAPRT_U64: return MPI_UINT64_T;
	default: return MPI_DATATYPE_NULL;
	}
}

/* --------------------------------------------------------------- waiting */

/* Sleep a little longer each time, up to 100 us. */
static void
nap(long *ns)
{
	struct timespec ts = {0, *ns};
	nanosleep(&ts, NULL);
	if (*ns < 100000)
		*ns *= 2;
}

/* Poll until the n requests are done: MPI_SUCCESS or MPI's error. */
static int
wait_all(taprt_comm *c, int n, MPI_Request *reqs, MPI_Status *st)
{
	long ns = 1000;
	const int64_t end = taprt_now_ns() + c->spin_ns;
	for (;;) {
		int done = 0;
		int rc = n == 1 ? MPI_Test(reqs, &done, st ? st : MPI_STATUS_IGNORE) :
		    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS || done)
			return rc;
		if (taprt_now_ns() >= end)
			nap(&ns);
	}
}

/* ---------------------------------------------------------------- groups */

static void
free_group(Group *g)
{
	if (g->comm != MPI_COMM_NULL)
		MPI_Comm_free(&g->comm);
	free(g->ranks);
}

static bool
same(const Group *a, const taprt_group *g)
{
	return a->size == g->size && memcmp(a->ranks, g->ranks, g->size * sizeof(int)) == 0;
}

/* A communicator for g, made with MPI_Comm_create_group: 0 or an error. */
static int
new_group(taprt_comm *c, const taprt_group *g, Group **out)
{
	Group *e = realloc(c->extra, (c->nextra + 1) * sizeof *e);
	if (!e)
		return -ENOMEM;
	c->extra = e;
	Group *n = &e[c->nextra];
	*n = (Group){.size = g->size, .ranks = malloc(g->size * sizeof(int)), .comm = MPI_COMM_NULL};
	if (!n->ranks)
		return -ENOMEM;
	memcpy(n->ranks, g->ranks, g->size * sizeof(int));
	MPI_Group wg, sub;
	int rc = MPI_Comm_group(c->world, &wg);
	if (rc == MPI_SUCCESS) {
		rc = MPI_Group_incl(wg, g->size, g->ranks, &sub);
		MPI_Group_free(&wg);
	}
	if (rc == MPI_SUCCESS) {
		rc = MPI_Comm_create_group(c->world, sub, 0, &n->comm);
		MPI_Group_free(&sub);
	}
	if (rc != MPI_SUCCESS) {
		free(n->ranks);
		return rc;
	}
	MPI_Comm_set_errhandler(n->comm, MPI_ERRORS_RETURN);
	c->nextra++;
	*out = n;
	return 0;
}

/*
 * The communicator for g and the caller's index in it, or an error code:
 * g must be 1..nranks distinct valid ranks including the caller's.
 */
static int
comm_of(taprt_comm *c, const taprt_group *g, MPI_Comm *comm, int *me)
{
	if (!c || !g || g->size < 1 || g->size > c->l.nranks || !g->ranks)
		return -EINVAL;
	const Group *known[] = {&c->tp, &c->dp, &c->pipe};
	const Group *hit = NULL;
	for (int i = 0; i < 3 && !hit; i++)
		if (same(known[i], g))
			hit = known[i];
	for (int i = 0; i < c->nextra && !hit; i++)
		if (same(&c->extra[i], g))
			hit = &c->extra[i];
	int idx = -1;
	for (int i = 0; i < g->size; i++) {
		if (g->ranks[i] == c->rank)
			idx = i;
		if (!hit && (g->ranks[i] < 0 || g->ranks[i] >= c->l.nranks))
			return -EINVAL;
		for (int j = 0; !hit && j < i; j++)
			if (g->ranks[j] == g->ranks[i])
				return -EINVAL;
	}
	if (idx < 0)
		return -EINVAL;
	if (!hit) {
		bool everyone = g->size == c->l.nranks;
		for (int i = 0; everyone && i < g->size; i++)
			everyone = g->ranks[i] == i;
		if (everyone) {
			*comm = c->world;
			*me = idx;
			return 0;
		}
		Group *n;
		int rc = new_group(c, g, &n);
		if (rc != 0)
			return rc;
		hit = n;
	}
	*comm = hit->comm;
	*me = idx;
	return 0;
}

/* A buffer of at least bytes for the reductions; NULL if out of memory. */
static void *
scratch(taprt_comm *c, size_t bytes)
{
	if (bytes > c->scratch_cap) {
		free(c->scratch);
		c->scratch_cap = 0;
		if (!(c->scratch = malloc(bytes)))
			return NULL;
		c->scratch_cap = bytes;
	}
	return c->scratch;
}

/* ----------------------------------------------------------- collectives */

/* Member i's chunk of count elements split size ways: [*off, *off + *n). */
static void
chunk(int64_t count, int size, int i, int *off, int *n)
{
	int64_t per = count / size, rem = count % size;
	*off = (int)(i * per + (i < rem ? i : rem));
	*n = (int)(per + (i < rem));
}

/* Check a reduction's arguments and find its communicator. */
static int
enter(taprt_comm *c, const taprt_group *g, const void *src, const void *dst, int64_t count,
    int dtype, taprt_reducer **red, MPI_Comm *comm, int *me)
{
	if (count < 0 || (count > 0 && (!src || !dst)) || mpi_type(dtype) == MPI_DATATYPE_NULL)
		return -EINVAL;
	if (red && !*red)
		return -EINVAL;
	if (count > INT_MAX)
		return -EOVERFLOW;
	return comm_of(c, g, comm, me);
}

static int
mpi_allreduce(taprt_comm *c, const taprt_group *g, void *buf, int64_t count, int dtype, int op)
{
	taprt_reducer *red = taprt_reducer_for(dtype, op);
	MPI_Comm comm;
	int me, n = g ? g->size : 0;
	int rc = enter(c, g, buf, buf, count, dtype, &red, &comm, &me);
	if (rc || n == 1 || count == 0)
		return rc;
	int esz = taprt_dtype_size(dtype);
	MPI_Datatype dt = mpi_type(dtype);
	int *scount = c->counts, *soff = scount + n, *rcount = soff + n, *roff = rcount + n;
	for (int i = 0; i < n; i++)
		chunk(count, n, i, &soff[i], &scount[i]);
	int mine = scount[me];
	for (int i = 0; i < n; i++) {
		rcount[i] = mine;
		roff[i] = i * mine;
	}
	char *tmp = scratch(c, (size_t)n * mine * esz + 1);
	if (!tmp)
		return -ENOMEM;
	MPI_Request req;
	if ((rc = MPI_Ialltoallv(buf, scount, soff, dt, tmp, rcount, roff, dt, comm, &req)) ||
	    (rc = wait_all(c, 1, &req, NULL)))
		return rc;
	/* member 0's chunk, then the others' in group order: the threads
	 * backend's arithmetic, so the same bits */
	char *dst = (char *)buf + (size_t)soff[me] * esz;
	memcpy(dst, tmp, (size_t)mine * esz);
	for (int i = 1; i < n; i++)
		red(dst, tmp + (size_t)i * mine * esz, mine);
	if ((rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, scount, soff, dt, comm,
	    &req)))
		return rc;
	return wait_all(c, 1, &req, NULL);
}

/* An MPI request of a started collective. */
struct taprt_request {
	MPI_Request r;
};

/*
 * The gradient buckets' all-reduce, started: MPI_Iallreduce in place (MPI's
 * own reduction, so not bit-for-bit the threads backend's order; a sum of
 * two replicas is the same either way).  Open MPI advances it when test
 * is called between the backward pass's nodes.
 */
static int
mpi_iallreduce(taprt_comm *c, const taprt_group *g, void *buf, int64_t count, int dtype, int op,
    taprt_request **req)
{
	MPI_Comm comm;
	int me;
	if (op != TAPRT_SUM)
		return -EINVAL;
	int rc = enter(c, g, buf, buf, count, dtype, NULL, &comm, &me);
	if (rc)
		return rc;
	taprt_request *q = malloc(sizeof *q);
	if (!q)
		return -ENOMEM;
	if ((rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dtype), MPI_SUM, comm,
	    &q->r)) != MPI_SUCCESS) {
		free(q);
		return rc;
	}
	*req = q;
	return 0;
}

static int
mpi_test(taprt_comm *c, taprt_request *req, int *done)
{
	(void)c;
	*done = 0;
	if (req->r == MPI_REQUEST_NULL) {
		*done = 1;
		return 0;
	}
	return MPI_Test(&req->r, done, MPI_STATUS_IGNORE);
}

static int
mpi_wait(taprt_comm *c, taprt_request *req)
{
	int rc = req->r == MPI_REQUEST_NULL ? 0 : wait_all(c, 1, &req->r, NULL);
	free(req);
	return rc;
}

static int
mpi_reduce_scatter(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
    int64_t count, int dtype, int op)
{
	taprt_reducer *red = taprt_reducer_for(dtype, op);
	MPI_Comm comm;
	int me, n = g ? g->size : 0;
	int rc = enter(c, g, send, recv, count, dtype, &red, &comm, &me);
	if (rc || count == 0)
		return rc;
	int esz = taprt_dtype_size(dtype);
	if (n == 1) {
		memmove(recv, send, (size_t)count * esz);
		return 0;
	}
	if ((int64_t)n * count > INT_MAX)
		return -EOVERFLOW;
	MPI_Datatype dt = mpi_type(dtype);
	char *tmp = scratch(c, (size_t)n * count * esz);
	if (!tmp)
		return -ENOMEM;
	MPI_Request req;
	if ((rc = MPI_Ialltoall(send, (int)count, dt, tmp, (int)count, dt, comm, &req)) ||
	    (rc = wait_all(c, 1, &req, NULL)))
		return rc;
	memcpy(recv, tmp, (size_t)count * esz);
	for (int i = 1; i < n; i++)
		red(recv, tmp + (size_t)i * count * esz, count);
	return 0;
}

static int
mpi_allgather(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
    int64_t count, int dtype)
{
	MPI_Comm comm;
	int me, n = g ? g->size : 0;
	int rc = enter(c, g, send, recv, count, dtype, NULL, &comm, &me);
	if (rc || count == 0)
		return rc;
	if ((int64_t)n * count > INT_MAX)
		return -EOVERFLOW;
	size_t bytes = (size_t)count * taprt_dtype_size(dtype);
	char *mine = (char *)recv + me * bytes;
	const void *from = send;
	if (send == mine) {
		from = MPI_IN_PLACE;
	} else if ((const char *)send < (char *)recv + n * bytes &&
	    (const char *)send + bytes > (const char *)recv) {
		/* send overlaps another member's block of recv: move it aside */
		if (!(from = scratch(c, bytes)))
			return -ENOMEM;
		memcpy((void *)from, send, bytes);
	}
	if (n == 1) {
		if (from != MPI_IN_PLACE)
			memcpy(recv, from, bytes);
		return 0;
	}
	MPI_Datatype dt = mpi_type(dtype);
	MPI_Request req;
	if ((rc = MPI_Iallgather(from, (int)count, dt, recv, (int)count, dt, comm, &req)))
		return rc;
	return wait_all(c, 1, &req, NULL);
}

static int
mpi_barrier(taprt_comm *c, const taprt_group *g)
{
	MPI_Comm comm;
	int me;
	int rc = comm_of(c, g, &comm, &me);
	if (rc || g->size == 1)
		return rc;
	MPI_Request req;
	if ((rc = MPI_Ibarrier(comm, &req)))
		return rc;
	return wait_all(c, 1, &req, NULL);
}

/* -------------------------------------------------------- point to point */

/* The next MPI tag of the messages between us and peer with this tag, in
 * one direction; -ERANGE if tag does not fit beside the counter. */
static int
next_tag(taprt_comm *c, int peer, int tag, bool send, int *mtag)
{
	int t = tag < 0 ? -1 - tag : tag;
	if (t > c->tag_ub >> SEQ_BITS)
		return -ERANGE;
	Seq *s = NULL;
	for (int i = 0; i < c->nseq && !s; i++)
		if (c->seq[i].peer == peer && c->seq[i].tag == tag)
			s = &c->seq[i];
	if (!s) {
		if (c->nseq == c->capseq) {
			int cap = c->capseq ? 2 * c->capseq : 16;
			Seq *n = realloc(c->seq, cap * sizeof *n);
			if (!n)
				return -ENOMEM;
			c->seq = n;
			c->capseq = cap;
		}
		s = &c->seq[c->nseq++];
		*s = (Seq){peer, tag, 0, 0};
	}
	unsigned k = send ? s->sent++ : s->received++;
	*mtag = t << SEQ_BITS | (int)(k & ((1u << SEQ_BITS) - 1));
	return 0;
}

/* Where messages to or from peer go: its pipe's communicator when it is in
 * ours, else the world's; taprt_main's own (negative tags) on ctl. */
static void
route(taprt_comm *c, int peer, int tag, MPI_Comm *comm, int *to)
{
	*comm = tag < 0 ? c->ctl : c->world;
	*to = peer;
	for (int i = 0; tag >= 0 && i < c->pipe.size; i++)
		if (c->pipe.ranks[i] == peer) {
			*comm = c->pipe.comm;
			*to = i;
		}
}

/* A free staging slot with room for bytes in *slot, waiting for a send to
 * finish when all are in flight: 0 or an error code. */
static int
staging_slot(taprt_comm *c, size_t bytes, int *slot)
{
	int idx = MPI_UNDEFINED, flag = 0;
	long ns = 1000;
	const int64_t end = taprt_now_ns() + c->spin_ns;
	for (;;) {
		int free_slot = -1;
		for (int k = 0; k < MAX_SENDS; k++)
			if (c->sreq[k] == MPI_REQUEST_NULL &&
			    (free_slot < 0 || c->scap[k] >= bytes))
				free_slot = k;
		if (free_slot >= 0) {
			idx = free_slot;
			break;
		}
		int rc = MPI_Testany(MAX_SENDS, c->sreq, &idx, &flag, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return rc;
		if (flag && idx != MPI_UNDEFINED)
			break;
		if (taprt_now_ns() >= end)
			nap(&ns);
	}
	if (c->scap[idx] < bytes) {
		free(c->sbuf[idx]);
		c->scap[idx] = 0;
		if (!(c->sbuf[idx] = malloc(bytes ? bytes : 1)))
			return -ENOMEM;
		c->scap[idx] = bytes;
	}
	*slot = idx;
	return 0;
}

static int
mpi_send(taprt_comm *c, const void *buf, int64_t bytes, int peer, int tag)
{
	if (!c || bytes < 0 || (bytes > 0 && !buf) || peer < 0 || peer >= c->l.nranks)
		return -EINVAL;
	MPI_Comm comm;
	int to;
	route(c, peer, tag, &comm, &to);
	int64_t off = 0;
	do { /* an empty message is still one */
		int n = (int)(bytes - off < PIECE ? bytes - off : PIECE), mtag, slot, rc;
		if ((rc = next_tag(c, peer, tag, true, &mtag)) || (rc = staging_slot(c, n, &slot)))
			return rc;
		if (n > 0)
			memcpy(c->sbuf[slot], (const char *)buf + off, n);
		if ((rc = MPI_Isend(c->sbuf[slot], n, MPI_BYTE, to, mtag, comm, &c->sreq[slot])))
			return rc;
		off += n;
	} while (off < bytes);
	return 0;
}

static int
mpi_recv(taprt_comm *c, void *buf, int64_t bytes, int peer, int tag)
{
	if (!c || bytes < 0 || (bytes > 0 && !buf) || peer < 0 || peer >= c->l.nranks)
		return -EINVAL;
	MPI_Comm comm;
	int from;
	route(c, peer, tag, &comm, &from);
	int64_t off = 0;
	do {
		int n = (int)(bytes - off < PIECE ? bytes - off : PIECE), mtag, got = 0, rc;
		MPI_Request req;
		MPI_Status st;
		if ((rc = next_tag(c, peer, tag, false, &mtag)) ||
		    (rc = MPI_Irecv((char *)buf + off, n, MPI_BYTE, from, mtag, comm, &req)) ||
		    (rc = wait_all(c, 1, &req, &st)))
			return rc;
		MPI_Get_count(&st, MPI_BYTE, &got);
		if (got != n)
			return -EBADMSG; /* the sender's tensor was smaller */
		off += n;
	} while (off < bytes);
	return 0;
}

/* ------------------------------------------------------------- the world */

/*
 * A watchdog over set-up.  Creating the communicators is the first time
 * the processes talk; when some cannot reach others (a transport left out,
 * a firewall), Open MPI 4.1 says so and then spins forever inside
 * MPI_Comm_dup, whatever the error handler.  If set-up has not finished
 * after TAPRT_MPI_SETUP_TIMEOUT seconds (default 60; 0: no watchdog), the
 * watchdog says so and ends the job from its own thread: MPI_Abort is the
 * only way out, and the thread that would call it is the one stuck.
 */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rank;
	long secs;
	pthread_t th;
} Watchdog;

static void *
watchdog_main(void *arg)
{
	Watchdog *w = arg;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += w->secs;
	pthread_mutex_lock(&w->mu);
	int rc = 0;
	while (!w->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
	bool fire = !w->done;
	pthread_mutex_unlock(&w->mu);
	if (fire) {
		fprintf(stderr, "%s: rank %d: MPI set-up did not finish in %ld s: can every process "
		    "reach every other one? (TAPRT_MPI_SETUP_TIMEOUT sets the limit)\n",
		    program_invocation_name, w->rank, w->secs);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return NULL;
}

static bool
watchdog_start(Watchdog *w, int rank)
{
	const char *env = getenv("TAPRT_MPI_SETUP_TIMEOUT");
	*w = (Watchdog){.rank = rank, .secs = env ? atol(env) : 60};
	if (w->secs <= 0)
		return false;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->th, NULL, watchdog_main, w) != 0) {
		w->secs = 0;
		return false;
	}
	return true;
}

static void
watchdog_stop(Watchdog *w)
{
	if (w->secs <= 0)
		return;
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}

static void
free_comm(taprt_comm *c)
{
	if (!c)
		return;
	free_group(&c->tp);
	free_group(&c->dp);
	free_group(&c->pipe);
	for (int i = 0; i < c->nextra; i++)
		free_group(&c->extra[i]);
	if (c->world != MPI_COMM_NULL)
		MPI_Comm_free(&c->world);
	if (c->ctl != MPI_COMM_NULL)
		MPI_Comm_free(&c->ctl);
	for (int k = 0; k < MAX_SENDS; k++)
		free(c->sbuf[k]);
	free(c->extra);
	free(c->seq);
	free(c->scratch);
	free(c->counts);
	free(c);
}

/* The rank's group of this kind, split from the world with the group's
 * order as the key. */
static int
split(taprt_comm *c, int kind, Group *g)
{
	g->ranks = malloc(c->l.nranks * sizeof(int));
	if (!g->ranks)
		return -ENOMEM;
	g->size = taprt_group_of(&c->l, c->rank, kind, g->ranks);
	int key = 0;
	for (int i = 0; i < g->size; i++)
		if (g->ranks[i] == c->rank)
			key = i;
	/* a group is named by its first member: no two groups of a kind share one */
	return MPI_Comm_split(c->world, g->ranks[0], key, &g->comm);
}

static int
mpi_init(const taprt_layout *l, taprt_comm **world, int *first, int *count, char *err,
    size_t errlen)
{
	int inited = 0, finalized = 0, provided = 0, size = 0, rank = 0;
	MPI_Finalized(&finalized);
	if (finalized) {
		snprintf(err, errlen, "mpi: MPI was finalized already in this process");
		return -1;
	}
	MPI_Initialized(&inited);
	if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
		snprintf(err, errlen, "mpi: MPI_Init_thread failed");
		return -1;
	}
	if (inited)
		MPI_Query_thread(&provided);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int how = FAIL_ME;
	taprt_comm *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "mpi: rank %d: out of memory", rank);
		goto fail;
	}
	c->own_init = !inited;
	c->world = c->ctl = MPI_COMM_NULL;
	c->tp.comm = c->dp.comm = c->pipe.comm = MPI_COMM_NULL;
	for (int k = 0; k < MAX_SENDS; k++)
		c->sreq[k] = MPI_REQUEST_NULL;
	/* every process knows these; one says so */
	how = FAIL_ALL;
	if (provided < MPI_THREAD_FUNNELED) {
		if (rank == 0)
			snprintf(err, errlen, "mpi: the MPI library gives thread level %d, the runtime needs MPI_THREAD_FUNNELED",
			    provided);
		goto fail;
	}
	if (size != l->nranks) {
		if (rank == 0)
			snprintf(err, errlen, "the program has %d ranks, but MPI started %d process%s: run it with mpirun -np %d (or srun -n %d)",
			    l->nranks, size, size == 1 ? "" : "es", l->nranks, l->nranks);
		goto fail;
	}
	how = FAIL_ME;
	if (!(c->counts = malloc(4 * l->nranks * sizeof(int)))) {
		snprintf(err, errlen, "mpi: rank %d: out of memory", rank);
		goto fail;
	}
	c->l = *l;
	/* the placement: this process (device = world rank) runs the rank
	 * placed on it; the communicator every call uses numbers the
	 * processes by rank */
	c->rank = taprt_rank_on(l, rank);
	if (c->rank < 0) {
		snprintf(err, errlen, "mpi: rank %d: no rank of the program is placed on device %d",
		    rank, rank);
		goto fail;
	}
	int rc, flag = 0, *ub = NULL;
	MPI_Comm node = MPI_COMM_NULL;
	Watchdog dog;
	watchdog_start(&dog, rank);
	rc = MPI_Comm_split(MPI_COMM_WORLD, 0, c->rank, &c->world);
	if (!rc)
		rc = MPI_Comm_dup(c->world, &c->ctl);
	if (!rc)
		rc = split(c, TAPRT_GROUP_TP, &c->tp);
	if (!rc)
		rc = split(c, TAPRT_GROUP_DP, &c->dp);
	if (!rc)
		rc = split(c, TAPRT_GROUP_PIPE, &c->pipe);
	if (!rc)
		rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
	if (!rc)
		rc = MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	watchdog_stop(&dog);
	if (rc) {
		snprintf(err, errlen, "mpi: rank %d: setting up the communicators failed: %s", rank,
		    mpi_strerror(rc));
		goto fail;
	}
	/* Set-up ran with MPI's default handler, which ends the job on an
	 * error: a world whose processes cannot reach each other fails in
	 * the first collective, and Open MPI 4.1 then spins forever in
	 * MPI_Comm_dup if told to return errors.  From here on errors come
	 * back to the caller, who reports the rank and the cause. */
	MPI_Comm *comms[] = {&c->world, &c->ctl, &c->tp.comm, &c->dp.comm, &c->pipe.comm};
	for (int i = 0; i < 5; i++)
		MPI_Comm_set_errhandler(*comms[i], MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	c->tag_ub = flag && ub ? *ub : 32767; /* the least MPI promises */
	int local = 1;
	MPI_Comm_size(node, &local);
	MPI_Comm_free(&node);
	c->spin_ns = taprt_comm_spin_ns(local, l->threads);
	*world = c;
	*first = c->rank;
	*count = 1;
	return 0;
fail:
	/* finalize does the rest, once the message is out */
	if (c)
		c->failed = how;
	*world = c;
	return -1;
}

static taprt_comm *
mpi_rank(taprt_comm *world, int rank)
{
	return world && rank == world->rank ? world : NULL;
}

static void
mpi_abort(taprt_comm *world)
{
	(void)world;
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int
mpi_finalize(taprt_comm *c)
{
	if (!c)
		return 0;
	/* after a failed init: when all failed alike, rank 0 has said why and
	 * nobody leaves before it did; when this process alone failed, the
	 * others may be waiting for it, so the job ends here */
	if (c->failed == FAIL_ALL)
		MPI_Barrier(MPI_COMM_WORLD);
	else if (c->failed == FAIL_ME)
		MPI_Abort(MPI_COMM_WORLD, 1);
	/* the staged sends were all received (every rank ran to the end), so
	 * they complete */
	int rc = wait_all(c, MAX_SENDS, c->sreq, NULL);
	bool own = c->own_init;
	free_comm(c);
	if (own && MPI_Finalize() != MPI_SUCCESS)
		rc = rc ? rc : MPI_ERR_OTHER;
	return rc ? -1 : 0;
}

const taprt_backend taprt_mpi_backend = {
	.name = "mpi",
	.init = mpi_init,
	.rank = mpi_rank,
	.abort = mpi_abort,
	.finalize = mpi_finalize,
	.strerror = mpi_strerror,
	.allreduce = mpi_allreduce,
	.allgather = mpi_allgather,
	.reduce_scatter = mpi_reduce_scatter,
	.send = mpi_send,
	.recv = mpi_recv,
	.barrier = mpi_barrier,
	.iallreduce = mpi_iallreduce,
	.test = mpi_test,
	.wait = mpi_wait,
};
