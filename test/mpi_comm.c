/*
 * mpi_comm.c - the mpi backend's collectives and transfers, run by
 * test/mpi.sh as `mpirun -np 4 test/mpi_comm`.
 *
 * Needs libtaprt built with MPI.  The four processes are the ranks of a
 * tp 2 x pp 2 layout.  Every collective runs on groups the backend split
 * at init (the TP group, the pipe), on the world, and on groups it must
 * make on first use (the world in another order, pairs across the layout,
 * one rank alone), for every dtype the threads backend handles: reductions
 * (f32, f64, i32, i64; sum, max, min, prod) must equal, bit for bit, a
 * reduction written out here in group order, the threads backend's
 * arithmetic; started all-reduces (iallreduce, test, wait) give the sum;
 * all-gathers move every element size, in place or not.  Then
 * point to point: runs of messages of one tag arrive in order, in the pipe
 * and across it, with taprt_main's negative tags beside the program's;
 * errors come back as codes, never as hangs.  Each process counts its
 * checks; rank 0 prints the failures' lines and "N passed, M failed".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "runtime/internal.h"

#define B (&taprt_mpi_backend)

static int me, npass, nfail;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (cond) {                                                  \
			npass++;                                             \
		} else {                                                     \
			nfail++;                                             \
			printf("FAIL: rank %d: ", me);                       \
			printf(__VA_ARGS__);                                 \
			printf(" (%s:%d)\n", __FILE__, __LINE__);            \
		}                                                            \
	} while (0)

/* Rank r's element k: exact in every dtype, of mixed exponents in floats
 * (so that a sum's rounding depends on its order), signed in integers. */
static double
value(int r, int64_t k, int salt)
{
	int64_t h = (r * 7919 + k * 104729 + salt * 31) % 1009;
	if (k % 5 == 0)
		return (double)(h - 504) * ldexp(1.0, (int)(k % 29) - 14);
	return (double)(h - 504);
}

static void
fill(int dtype, void *p, int r, int64_t n, int salt)
{
	for (int64_t k = 0; k < n; k++) {
		double v = value(r, k, salt);
		switch (dtype) {
		case TAPRT_F32: ((float *)p)[k] = (float)v; break;
		case TAPRT_F64: ((double *)p)[k] = v; break;
		case TAPRT_I32: ((int32_t *)p)[k] = (int32_t)((uint32_t)(int32_t)v * 65599u); break;
		case TAPRT_I64: ((int64_t *)p)[k] = (int64_t)v * 4294967311LL; break;
		default: { /* bytes: any element size */
			int es = taprt_dtype_size(dtype);
			for (int b = 0; b < es; b++)
				((uint8_t *)p)[k * es + b] = (uint8_t)(r * 37 + k * 11 + b + salt);
		}
		}
	}
}

/* acc = acc op x, written out: the order is the point. */
#define REDUCE(T, U)                                                         \
	for (int64_t k = 0; k < n; k++) {                                    \
		T a = ((T *)acc)[k], b = ((const T *)x)[k];                  \
		((T *)acc)[k] = op == TAPRT_SUM ? (T)((U)a + (U)b) :         \
		    op == TAPRT_PROD ? (T)((U)a * (U)b) :                    \
		    op == TAPRT_MAX ? (b > a ? b : a) : (b < a ? b : a);     \
	}

static void
reduce(int dtype, int op, void *acc, const void *x, int64_t n)
{
	switch (dtype) {
	case TAPRT_F32: REDUCE(float, float); break;
	case TAPRT_F64: REDUCE(double, double); break;
	case TAPRT_I32: REDUCE(int32_t, uint32_t); break;
	case TAPRT_I64: REDUCE(int64_t, uint64_t); break;
	}
}

/* The group-order reduction of the members' buffers of n elements. */
static void *
expected(const taprt_group *g, int dtype, int op, int64_t n, int64_t off, int salt)
{
	int es = taprt_dtype_size(dtype);
	char *acc = malloc((n + off) * es + 1), *x = malloc((n + off) * es + 1);
	fill(dtype, acc, g->ranks[0], n + off, salt);
	for (int i = 1; i < g->size; i++) {
		fill(dtype, x, g->ranks[i], n + off, salt);
		reduce(dtype, op, acc + off * es, x + off * es, n);
	}
	memmove(acc, acc + off * es, n * es);
	free(x);
	return acc;
}

static const char *
gname(const taprt_group *g)
{
	static char buf[64];
	int k = snprintf(buf, sizeof buf, "{");
	for (int i = 0; i < g->size; i++)
		k += snprintf(buf + k, sizeof buf - k, i ? ",%d" : "%d", g->ranks[i]);
	snprintf(buf + k, sizeof buf - k, "}");
	return buf;
}

static void
collectives(taprt_comm *c, const taprt_group *g)
{
	static const int rdt[] = {TAPRT_F32, TAPRT_F64, TAPRT_I32, TAPRT_I64};
	static const int adt[] = {TAPRT_U8, TAPRT_BOOL, TAPRT_I8, TAPRT_F16, TAPRT_BF16, TAPRT_U16,
		TAPRT_I16, TAPRT_F32, TAPRT_I32, TAPRT_U32, TAPRT_F64, TAPRT_I64, TAPRT_U64};
	static const int64_t counts[] = {1, 7, 1000, 4099};
	int idx = 0;
	while (g->ranks[idx] != me)
		idx++;
	for (size_t d = 0; d < sizeof rdt / sizeof rdt[0]; d++)
		for (int op = 0; op < 4; op++)
			for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
				int dt = rdt[d], es = taprt_dtype_size(dt), salt = op * 3 + (int)ci;
				int64_t n = counts[ci];
				char *buf = malloc(g->size * n * es), *out = malloc(n * es);
				fill(dt, buf, me, n, salt);
				int rc = B->allreduce(c, g, buf, n, dt, op);
				void *want = expected(g, dt, op, n, 0, salt);
				CHECK(rc == 0 && memcmp(buf, want, n * es) == 0,
				    "allreduce %s %s op %d count %lld: rc %d (%s), %s", gname(g),
				    taprt_dtype_name(dt), op, (long long)n, rc, B->strerror(rc),
				    rc ? "" : "the bits differ from the group-order sum");
				free(want);
				/* reduce-scatter: my block of every member's size*n */
				fill(dt, buf, me, g->size * n, salt);
				rc = B->reduce_scatter(c, g, buf, out, n, dt, op);
				want = expected(g, dt, op, n, idx * n, salt);
				CHECK(rc == 0 && memcmp(out, want, n * es) == 0,
				    "reduce_scatter %s %s op %d count %lld: rc %d", gname(g),
				    taprt_dtype_name(dt), op, (long long)n, rc);
				free(want);
				free(buf);
				free(out);
			}
	/* started all-reduces (sum, the gradient buckets'): three outstanding
	 * at once, advanced by test, completed by wait in reverse order;
	 * integers exactly, floats within 1e-6 of the group-order sum (MPI's
	 * own reduction order) */
	for (size_t d = 0; d < sizeof rdt / sizeof rdt[0]; d++) {
		int dt = rdt[d], es = taprt_dtype_size(dt);
		char *bufs[3];
		taprt_request *req[3];
		int rcs[3];
		for (int k = 0; k < 3; k++) {
			bufs[k] = malloc(counts[k + 1] * es);
			fill(dt, bufs[k], me, counts[k + 1], 20 + k);
			rcs[k] = B->iallreduce(c, g, bufs[k], counts[k + 1], dt, TAPRT_SUM, &req[k]);
		}
		for (int k = 0; k < 3; k++) {
			int done = 0, rc = rcs[k] ? 0 : B->test(c, req[k], &done);
			CHECK(rc == 0, "test of a started allreduce %s %s: rc %d", gname(g),
			    taprt_dtype_name(dt), rc);
		}
		for (int k = 2; k >= 0; k--) {
			int64_t n = counts[k + 1];
			int rc = rcs[k] ? rcs[k] : B->wait(c, req[k]);
			char *want = expected(g, dt, TAPRT_SUM, n, 0, 20 + k);
			bool ok = rc == 0;
			for (int64_t i = 0; ok && i < n; i++) {
				double a, b;
				if (dt == TAPRT_F32)
					a = ((float *)bufs[k])[i], b = ((float *)want)[i];
				else if (dt == TAPRT_F64)
					a = ((double *)bufs[k])[i], b = ((double *)want)[i];
				else
					a = dt == TAPRT_I32 ? ((int32_t *)bufs[k])[i] : ((int64_t *)bufs[k])[i],
					b = dt == TAPRT_I32 ? ((int32_t *)want)[i] : ((int64_t *)want)[i];
				ok = dt == TAPRT_F32 || dt == TAPRT_F64 ? fabs(a - b) <= 1e-6 * (1 + fabs(b)) :
				    a == b;
			}
			CHECK(ok, "iallreduce %s %s count %lld: rc %d (%s)", gname(g), taprt_dtype_name(dt),
			    (long long)n, rc, B->strerror(rc));
			free(want);
			free(bufs[k]);
		}
	}
	for (size_t d = 0; d < sizeof adt / sizeof adt[0]; d++)
		for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
			for (int inplace = 0; inplace < 2; inplace++) {
				int dt = adt[d], es = taprt_dtype_size(dt);
				int64_t n = counts[ci];
				char *recv = malloc(g->size * n * es), *send = malloc(n * es), *one = malloc(n * es);
				memset(recv, 0xee, g->size * n * es);
				char *from = inplace ? recv + idx * n * es : send;
				fill(dt, from, me, n, 5);
				int rc = B->allgather(c, g, from, recv, n, dt);
				bool ok = rc == 0;
				for (int i = 0; ok && i < g->size; i++) {
					fill(dt, one, g->ranks[i], n, 5);
					ok = memcmp(recv + i * n * es, one, n * es) == 0;
				}
				CHECK(ok, "allgather %s %s count %lld%s: rc %d", gname(g), taprt_dtype_name(dt),
				    (long long)n, inplace ? " in place" : "", rc);
				free(recv);
				free(send);
				free(one);
			}
	CHECK(B->barrier(c, g) == 0, "barrier %s", gname(g));
}

/* Runs of messages: the peer's k-th message of a tag holds k everywhere. */
static void
transfers(taprt_comm *c)
{
	static const int64_t sizes[] = {0, 4, 4096, 100000, 3 << 20};
	int next = (me + 1) % 4, prev = (me + 3) % 4;   /* a ring, across pipes */
	int down = me ^ 2;                              /* the other stage of my pipe */
	for (int rep = 0; rep < 3; rep++)
		for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
			int64_t n = sizes[s];
			unsigned char *b = malloc(n + 1);
			/* several of one tag before any is received: order by tag count */
			for (int k = 0; k < 5; k++) {
				memset(b, 16 * (int)s + k, n);
				CHECK(B->send(c, b, n, next, 11) == 0, "send %lld bytes to %d", (long long)n, next);
				CHECK(B->send(c, b, n, down, 12) == 0, "send %lld bytes to %d", (long long)n, down);
				CHECK(B->send(c, b, n, next, -1) == 0, "send %lld bytes, tag -1", (long long)n);
			}
			for (int k = 0; k < 5; k++)
				for (int which = 0; which < 3; which++) {
					int from = which == 1 ? down : prev, tag = which == 0 ? 11 : which == 1 ? 12 : -1;
					memset(b, 0xff, n);
					int rc = B->recv(c, b, n, from, tag);
					bool ok = rc == 0;
					for (int64_t i = 0; ok && i < n; i++)
						ok = b[i] == 16 * (int)s + k;
					CHECK(ok, "message %d of %lld bytes, tag %d from %d: rc %d, in order", k,
					    (long long)n, tag, from, rc);
				}
			free(b);
		}
	/* a receive of more bytes than were sent is an error, not a hang */
	char small[8] = {0}, big[16];
	CHECK(B->send(c, small, 8, next, 13) == 0, "send 8 bytes");
	int rc = B->recv(c, big, 16, prev, 13);
	CHECK(rc != 0, "16 bytes received of 8 sent: rc %d", rc);
}

int
main(int argc, char **argv)
{
	taprt_layout l = {.nranks = 4, .tp = 2, .pp = 2, .dp = 1, .microbatches = 1};
	taprt_comm *c = NULL;
	int first = -1, count = 0;
	char err[300] = "";
	if (B->init(&l, &c, &first, &count, err, sizeof err) != 0) {
		fprintf(stderr, "mpi_comm: %s (run it with mpirun -np 4)\n", err);
		B->finalize(c);
		return 1;
	}
	me = first;
	CHECK(count == 1 && B->rank(c, me) == c && B->rank(c, (me + 1) % 4) == NULL,
	    "one rank per process: first %d count %d", first, count);
	int tp[4], pipe[4], world[4], perm[4] = {3, 1, 0, 2}, cross[2], self[1] = {me};
	taprt_group gt = {taprt_group_of(&l, me, TAPRT_GROUP_TP, tp), tp};
	taprt_group gp = {taprt_group_of(&l, me, TAPRT_GROUP_PIPE, pipe), pipe};
	taprt_group gw = {taprt_group_of(&l, me, TAPRT_GROUP_WORLD, world), world};
	taprt_group gperm = {4, perm}, gself = {1, self};
	/* pairs no split made: {0,3} and {2,1} (in that order) */
	cross[0] = me == 0 || me == 3 ? 0 : 2;
	cross[1] = me == 0 || me == 3 ? 3 : 1;
	taprt_group gcross = {2, cross};
	const taprt_group *groups[] = {&gt, &gp, &gw, &gperm, &gcross, &gself};
	for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
		collectives(c, groups[i]);
	transfers(c);

	/* errors come back as codes, on every member alike */
	float f[4] = {0};
	uint8_t u[4] = {0};
	int others[2] = {(me + 1) % 4, (me + 2) % 4};
	taprt_group gnot = {2, others};
	CHECK(B->allreduce(c, &gt, u, 4, TAPRT_U8, TAPRT_SUM) == -EINVAL, "u8 sum refused");
	CHECK(B->allreduce(c, &gt, f, 4, TAPRT_F32, 9) == -EINVAL, "op 9 refused");
	CHECK(B->allreduce(c, &gnot, f, 4, TAPRT_F32, TAPRT_SUM) == -EINVAL, "a group without me refused");
	CHECK(B->send(c, f, 4, 4, 0) == -EINVAL, "send to rank 4 of 4 refused");
	CHECK(strlen(B->strerror(MPI_ERR_TRUNCATE)) > 0 && strcmp(B->strerror(-EINVAL), strerror(EINVAL)) == 0,
	    "strerror");
	fflush(stdout);
	int tot[2] = {npass, nfail};
	MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (me == 0)
		printf("%d passed, %d failed\n", tot[0], tot[1]);
	int frc = B->finalize(c);
	return tot[1] || frc ? 1 : 0;
}
