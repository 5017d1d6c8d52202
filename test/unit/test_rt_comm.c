/*
 * test_rt_comm.c - CUnit tests for the threads communication backend.
 *
 * Each test starts N threads (one per rank) on one world.  CUnit's asserts
 * are not thread-safe, so ranks record their first failure in the harness
 * and the main thread asserts after joining.  Expected values are computed
 * here from the inputs' formulas, reducing in group order; float inputs mix
 * exponents so that the sum's rounding depends on that order.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/unit/util.h"
#include "runtime/internal.h"
#include "test/unit/rt_util.h"

#define B (&taprt_threads_backend)
#define MAXN 8

typedef struct Run Run;
typedef void RankFn(Run *t, taprt_comm *c, int r);

struct Run {
	taprt_comm *world;
	int n;
	RankFn *fn;
	void *arg;                      /* the test's parameters */
	int bad[MAXN];
	char why[MAXN][160];
	void *share[MAXN];              /* results ranks compare */
	atomic_int counter;
};

typedef struct {
	Run *t;
	int r;
} Arg;


static void *
rank_main(void *p)
{
	Arg *a = p;
	a->t->fn(a->t, taprt_threads_rank(a->t->world, a->r), a->r);
	return NULL;
}

/* Run fn on n ranks and assert none failed. */
static void
run_ranks(int n, RankFn *fn, void *arg)
{
	Run t = {.n = n, .fn = fn, .arg = arg};
	pthread_t th[MAXN];
	Arg a[MAXN];
	t.world = taprt_threads_world(n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t.world);
	for (int r = 0; r < n; r++) {
		a[r] = (Arg){&t, r};
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, rank_main, &a[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	for (int r = 0; r < n; r++) {
		if (t.bad[r])
			fprintf(stderr, "\n  n=%d rank %d: %s (%d failures)", n, r, t.why[r], t.bad[r]);
		CU_ASSERT_EQUAL(t.bad[r], 0);
	}
	taprt_threads_free(t.world);
}

static const int nsizes[] = {2, 3, 4, 8};
#define FOR_N(n) for (int ni_ = 0, n; ni_ < 4 && (n = nsizes[ni_], 1); ni_++)

/* Rank r's input element k: exact in f32, exponents spread over 2^-15..2^14. */
static float
fval(int r, int64_t k, int salt)
{
	int m = (int)((k * 37 + r * 101 + salt * 7) % 997) - 498;
	/* both products are exact: a power of two times a 9-bit integer */
	return (float)m * (float)(1 << (r * 7 + k + salt) % 30) * (1.0f / 32768);
}

static int64_t
ival(int r, int64_t k, int salt)
{
	return ((int64_t)((k * 2654435761u + r * 97u + salt * 13u) % 1000003u) - 500001) * 1000003;
}

static int
group_world(int n, int *ranks, bool reversed)
{
	for (int i = 0; i < n; i++)
		ranks[i] = reversed ? n - 1 - i : i;
	return n;
}

/* ------------------------------------------------------------ allreduce */

typedef struct {
	int64_t count;
	int dtype, op, salt;
	bool reversed;
	void *want;                     /* the result, computed by expect() */
} ArP;

/* p->want for n ranks: each element reduced in group order. */
static void
expect(ArP *p, int n)
{
	int ranks[MAXN];
	group_world(n, ranks, p->reversed);
	float *fw = p->want = malloc((p->count ? p->count : 1) * 8);
	int64_t *iw = p->want;
	for (int64_t k = 0; k < p->count; k++) {
		if (p->dtype == TAPRT_F32) {
			float e = fval(ranks[0], k, p->salt);
			for (int i = 1; i < n; i++) {
				float v = fval(ranks[i], k, p->salt);
				e = p->op == TAPRT_SUM ? e + v : v > e ? v : e;
			}
			fw[k] = e;
		} else {
			int64_t e = ival(ranks[0], k, p->salt);
			for (int i = 1; i < n; i++) {
				int64_t v = ival(ranks[i], k, p->salt);
				e = p->op == TAPRT_SUM ? e + v : v > e ? v : e;
			}
			iw[k] = e;
		}
	}
}

static void
allreduce_rank(Run *t, taprt_comm *c, int r)
{
	const ArP *p = t->arg;
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, p->reversed), ranks};
	int64_t n = p->count;
	size_t esz = p->dtype == TAPRT_F32 ? 4 : 8;
	void *x = malloc((n ? n : 1) * esz);
	for (int64_t k = 0; k < n; k++)
		if (p->dtype == TAPRT_F32)
			((float *)x)[k] = fval(r, k, p->salt);
		else
			((int64_t *)x)[k] = ival(r, k, p->salt);
	int rc = B->allreduce(c, &g, x, n, p->dtype, p->op);
	RANK_CHECK(t, r, rc == 0, "allreduce returned %d", rc);
	/* bits, not values: every rank must hold exactly the group-order result */
	for (int64_t k = 0; k < n && !rc; k++)
		RANK_CHECK(t, r, memcmp((char *)x + k * esz, (char *)p->want + k * esz, esz) == 0,
		    "%s %s count %lld: element %lld differs", p->dtype == TAPRT_F32 ? "f32" : "i64",
		    p->op == TAPRT_SUM ? "sum" : "max", (long long)n, (long long)k);
	free(x);
}

static void
run_allreduce(int n, ArP p)
{
	expect(&p, n);
	run_ranks(n, allreduce_rank, &p);
	free(p.want);
}

static void
test_allreduce(void)
{
	static const int64_t counts[] = {0, 1, 5, 17, 1000, 4099};
	FOR_N(n) {
		for (int ci = 0; ci < 6; ci++)
			for (int dt = 0; dt < 2; dt++)
				for (int op = 0; op < 2; op++) {
					run_allreduce(n, (ArP){counts[ci],
					    dt ? TAPRT_I64 : TAPRT_F32, op ? TAPRT_MAX : TAPRT_SUM,
					    ci, ci & 1});
				}
	}
}

static void
test_allreduce_large(void)
{
	FOR_N(n) run_allreduce(n, (ArP){1 << 20, TAPRT_F32, TAPRT_SUM, n, n == 3});
	run_allreduce(4, (ArP){1 << 20, TAPRT_I64, TAPRT_MAX, 1, false});
}

/* MIN and PROD on the other dtypes, small integers so PROD is exact. */
static void
minprod_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	enum { N = 40 };
	double d[N], dmin[N];
	int32_t i[N], iprod[N];
	for (int k = 0; k < N; k++) {
		d[k] = (k * 5 + r * 3) % 11 - 5.5;
		i[k] = (k + r) % 5 - 2;
	}
	RANK_CHECK(t, r, B->allreduce(c, &g, d, N, TAPRT_F64, TAPRT_MIN) == 0, "f64 min");
	RANK_CHECK(t, r, B->allreduce(c, &g, i, N, TAPRT_I32, TAPRT_PROD) == 0, "i32 prod");
	for (int k = 0; k < N; k++) {
		dmin[k] = INFINITY;
		iprod[k] = 1;
		for (int q = 0; q < t->n; q++) {
			dmin[k] = fmin(dmin[k], (k * 5 + q * 3) % 11 - 5.5);
			iprod[k] *= (k + q) % 5 - 2;
		}
		RANK_CHECK(t, r, d[k] == dmin[k], "f64 min [%d]: %g want %g", k, d[k], dmin[k]);
		RANK_CHECK(t, r, i[k] == iprod[k], "i32 prod [%d]: %d want %d", k, i[k], iprod[k]);
	}
}

static void
test_allreduce_minprod(void)
{
	FOR_N(n) run_ranks(n, minprod_rank, NULL);
}

/* Two runs on the same inputs: the same bits on every rank and run. */
static void
determinism_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	enum { N = 1 << 16 };
	float *x = malloc(2 * N * sizeof *x);
	for (int run = 0; run < 2; run++) {
		float *y = x + run * N;
		for (int k = 0; k < N; k++)
			y[k] = fval(r, k, 3) * (1.0f + r / 3.0f);
		RANK_CHECK(t, r, B->allreduce(c, &g, y, N, TAPRT_F32, TAPRT_SUM) == 0, "allreduce");
	}
	RANK_CHECK(t, r, memcmp(x, x + N, N * sizeof *x) == 0, "runs differ");
	t->share[r] = x;
	B->barrier(c, &g);
	RANK_CHECK(t, r, memcmp(x, t->share[0], N * sizeof *x) == 0, "differs from rank 0");
	B->barrier(c, &g);
	free(x);
}

static void
test_determinism(void)
{
	FOR_N(n) run_ranks(n, determinism_rank, NULL);
}

/*
 * Disjoint groups at once: {0,2} and {1,3} (data parallel) interleaved with
 * {0,1} and {2,3} (tensor parallel) and the whole world; each rank builds
 * its own rank lists, so groups match by content.
 */
static void
groups_rank(Run *t, taprt_comm *c, int r)
{
	int dp[2] = {r % 2, r % 2 + 2}, tp[2] = {r / 2 * 2, r / 2 * 2 + 1}, all[4] = {0, 1, 2, 3};
	taprt_group gdp = {2, dp}, gtp = {2, tp}, gall = {4, all};
	for (int it = 0; it < 300; it++) {
		int64_t x[3] = {it, r, 1000 * r + it};
		int rc = B->allreduce(c, &gdp, x, 3, TAPRT_I64, TAPRT_SUM);
		RANK_CHECK(t, r, rc == 0 && x[0] == 2 * it && x[1] == dp[0] + dp[1] &&
		    x[2] == 1000 * (dp[0] + dp[1]) + 2 * it, "dp it %d: %lld %lld %lld", it,
		    (long long)x[0], (long long)x[1], (long long)x[2]);
		int64_t y = r * it;
		rc = B->allreduce(c, &gtp, &y, 1, TAPRT_I64, TAPRT_MAX);
		RANK_CHECK(t, r, rc == 0 && y == tp[1] * it, "tp it %d: %lld", it, (long long)y);
		if (it % 50 == 0) {
			int64_t z = r + it;
			rc = B->allreduce(c, &gall, &z, 1, TAPRT_I64, TAPRT_SUM);
			RANK_CHECK(t, r, rc == 0 && z == 6 + 4 * it, "world it %d: %lld", it, (long long)z);
		}
	}
}

static void
test_disjoint_groups(void)
{
	run_ranks(4, groups_rank, NULL);
}

/* 1000 small allreduces back to back: a generation bug shows up here. */
static void
repeat_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	int64_t n = t->n;
	for (int it = 0; it < 1000; it++) {
		int64_t x[2] = {it + r, -r};
		int rc = B->allreduce(c, &g, x, 2, TAPRT_I64, TAPRT_SUM);
		RANK_CHECK(t, r, rc == 0 && x[0] == it * n + n * (n - 1) / 2 && x[1] == -n * (n - 1) / 2,
		    "it %d: %lld %lld", it, (long long)x[0], (long long)x[1]);
	}
}

static void
test_repeated(void)
{
	run_ranks(3, repeat_rank, NULL);
	run_ranks(8, repeat_rank, NULL);
}

/* --------------------------------------------- allgather, reduce_scatter */

/* Group order is a rotation of the ranks, so layout mistakes show. */
static int
group_rotated(int n, int *ranks)
{
	for (int i = 0; i < n; i++)
		ranks[i] = (i + 1) % n;
	return n;
}

static void
allgather_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_rotated(t->n, ranks), ranks};
	static const int64_t counts[] = {0, 1, 33};
	for (int ci = 0; ci < 3; ci++) {
		int64_t cnt = counts[ci];
		int32_t send[33], recv[MAXN * 33 + 1];
		double dsend[33], drecv[MAXN * 33 + 1];
		for (int k = 0; k < cnt; k++) {
			send[k] = r * 1000 + k;
			dsend[k] = r + k / 64.0;
		}
		recv[g.size * cnt] = drecv[g.size * cnt] = -7;
		int rc = B->allgather(c, &g, send, recv, cnt, TAPRT_I32);
		RANK_CHECK(t, r, rc == 0, "allgather i32 returned %d", rc);
		rc = B->allgather(c, &g, dsend, drecv, cnt, TAPRT_F64);
		RANK_CHECK(t, r, rc == 0, "allgather f64 returned %d", rc);
		for (int j = 0; j < g.size; j++)
			for (int k = 0; k < cnt; k++) {
				RANK_CHECK(t, r, recv[j * cnt + k] == ranks[j] * 1000 + k,
				    "i32 block %d [%d]: %d", j, k, recv[j * cnt + k]);
				RANK_CHECK(t, r, drecv[j * cnt + k] == ranks[j] + k / 64.0,
				    "f64 block %d [%d]: %g", j, k, drecv[j * cnt + k]);
			}
		RANK_CHECK(t, r, recv[g.size * cnt] == -7 && drecv[g.size * cnt] == -7, "wrote past recv");
	}
}

static void
test_allgather(void)
{
	FOR_N(n) run_ranks(n, allgather_rank, NULL);
}

static void
reduce_scatter_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_rotated(t->n, ranks), ranks};
	int me = (r + t->n - 1) % t->n;   /* r's index in the rotated group */
	static const int64_t counts[] = {1, 17, 1000};
	for (int ci = 0; ci < 3; ci++) {
		int64_t cnt = counts[ci], tot = cnt * g.size;
		float *fs = malloc(tot * sizeof *fs), *fr = malloc((cnt + 1) * sizeof *fr);
		int64_t *is = malloc(tot * sizeof *is), *ir = malloc((cnt + 1) * sizeof *ir);
		for (int64_t k = 0; k < tot; k++) {
			fs[k] = fval(r, k, ci);
			is[k] = ival(r, k, ci);
		}
		fr[cnt] = -7;
		ir[cnt] = -7;
		int rc = B->reduce_scatter(c, &g, fs, fr, cnt, TAPRT_F32, TAPRT_SUM);
		RANK_CHECK(t, r, rc == 0, "reduce_scatter f32 returned %d", rc);
		rc = B->reduce_scatter(c, &g, is, ir, cnt, TAPRT_I64, TAPRT_MAX);
		RANK_CHECK(t, r, rc == 0, "reduce_scatter i64 returned %d", rc);
		for (int64_t k = 0; k < cnt; k++) {
			int64_t at = me * cnt + k;
			float fe = fval(ranks[0], at, ci);
			int64_t ie = ival(ranks[0], at, ci);
			for (int i = 1; i < g.size; i++) {
				fe += fval(ranks[i], at, ci);
				int64_t v = ival(ranks[i], at, ci);
				ie = v > ie ? v : ie;
			}
			RANK_CHECK(t, r, memcmp(&fe, &fr[k], sizeof fe) == 0, "f32 [%lld]: %a want %a",
			    (long long)k, fr[k], fe);
			RANK_CHECK(t, r, ir[k] == ie, "i64 [%lld]: %lld want %lld", (long long)k,
			    (long long)ir[k], (long long)ie);
		}
		RANK_CHECK(t, r, fr[cnt] == -7 && ir[cnt] == -7, "wrote past recv");
		free(fs);
		free(fr);
		free(is);
		free(ir);
	}
}

static void
test_reduce_scatter(void)
{
	FOR_N(n) run_ranks(n, reduce_scatter_rank, NULL);
}

/* -------------------------------------------------------- point to point */

static void
pingpong_rank(Run *t, taprt_comm *c, int r)
{
	if (r > 1)
		return;         /* the other ranks stay out of it */
	int64_t v = 0;
	for (int it = 0; it < 200; it++) {
		if (r == 0) {
			v = it * 2;
			RANK_CHECK(t, r, B->send(c, &v, sizeof v, 1, 3) == 0, "send");
			RANK_CHECK(t, r, B->recv(c, &v, sizeof v, 1, 4) == 0, "recv");
			RANK_CHECK(t, r, v == it * 2 + 1, "it %d: got %lld", it, (long long)v);
		} else {
			RANK_CHECK(t, r, B->recv(c, &v, sizeof v, 0, 3) == 0, "recv");
			RANK_CHECK(t, r, v == it * 2, "it %d: got %lld", it, (long long)v);
			v++;
			RANK_CHECK(t, r, B->send(c, &v, sizeof v, 0, 4) == 0, "send");
		}
	}
	/* a large message each way, and an empty one */
	enum { N = 1 << 18 };
	int32_t *buf = malloc(N * sizeof *buf);
	for (int it = 0; it < 2; it++) {
		if (r == it) {
			for (int k = 0; k < N; k++)
				buf[k] = k ^ it;
			RANK_CHECK(t, r, B->send(c, buf, N * sizeof *buf, 1 - r, 9) == 0, "big send");
		} else {
			memset(buf, 0, N * sizeof *buf);
			RANK_CHECK(t, r, B->recv(c, buf, N * sizeof *buf, 1 - r, 9) == 0, "big recv");
			for (int k = 0; k < N; k++)
				RANK_CHECK(t, r, buf[k] == (k ^ it), "big [%d]: %d", k, buf[k]);
		}
	}
	if (r == 0)
		RANK_CHECK(t, r, B->send(c, NULL, 0, 1, 0) == 0, "empty send");
	else
		RANK_CHECK(t, r, B->recv(c, NULL, 0, 0, 0) == 0, "empty recv");
	free(buf);
}

static void
test_pingpong(void)
{
	run_ranks(2, pingpong_rank, NULL);
	run_ranks(3, pingpong_rank, NULL);
}

/* Every rank sends to r+1 and then receives from r-1: no deadlock. */
static void
ring_rank(Run *t, taprt_comm *c, int r)
{
	enum { N = 1 << 14 };
	int n = t->n, next = (r + 1) % n, prev = (r + n - 1) % n;
	int32_t *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
	for (int it = 0; it < 20; it++) {
		for (int k = 0; k < N; k++)
			out[k] = r * 100000 + it * 1000 + k % 1000;
		RANK_CHECK(t, r, B->send(c, out, N * sizeof *out, next, it) == 0, "send");
		RANK_CHECK(t, r, B->recv(c, in, N * sizeof *in, prev, it) == 0, "recv");
		for (int k = 0; k < N; k++)
			RANK_CHECK(t, r, in[k] == prev * 100000 + it * 1000 + k % 1000,
			    "it %d [%d]: %d", it, k, in[k]);
	}
	free(out);
	free(in);
}

static void
test_ring(void)
{
	FOR_N(n) run_ranks(n, ring_rank, NULL);
}

/*
 * Matching by tag and source: rank 0 receives 64 tags in reverse order,
 * three messages with one tag in send order, and messages with the same
 * tag from ranks 1 and 2 in the opposite order from their sources'.
 */
static void
tags_rank(Run *t, taprt_comm *c, int r)
{
	int v;
	if (r == 1) {
		for (int tag = 0; tag < 64; tag++) {
			v = tag * 3;
			RANK_CHECK(t, r, B->send(c, &v, sizeof v, 0, tag) == 0, "send tag %d", tag);
		}
		for (v = 1; v <= 3; v++)
			RANK_CHECK(t, r, B->send(c, &v, sizeof v, 0, 100) == 0, "send 100");
	}
	if (r >= 1) {
		v = 1000 + r;
		RANK_CHECK(t, r, B->send(c, &v, sizeof v, 0, 200) == 0, "send 200");
	}
	if (r == 0) {
		for (int tag = 63; tag >= 0; tag--) {
			RANK_CHECK(t, r, B->recv(c, &v, sizeof v, 1, tag) == 0, "recv tag %d", tag);
			RANK_CHECK(t, r, v == tag * 3, "tag %d: got %d", tag, v);
		}
		for (int want = 1; want <= 3; want++) {
			RANK_CHECK(t, r, B->recv(c, &v, sizeof v, 1, 100) == 0, "recv 100");
			RANK_CHECK(t, r, v == want, "tag 100: got %d, want %d", v, want);
		}
		for (int src = t->n - 1; src >= 1; src--) {
			RANK_CHECK(t, r, B->recv(c, &v, sizeof v, src, 200) == 0, "recv 200");
			RANK_CHECK(t, r, v == 1000 + src, "from %d: got %d", src, v);
		}
	}
}

static void
test_tags(void)
{
	run_ranks(2, tags_rank, NULL);
	run_ranks(3, tags_rank, NULL);
}

/* Both sides send first then receive, large messages, many times. */
static void
exchange_rank(Run *t, taprt_comm *c, int r)
{
	enum { N = 1 << 16 };
	int peer = r ^ 1;
	int64_t *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
	for (int it = 0; it < 30; it++) {
		for (int k = 0; k < N; k++)
			out[k] = (int64_t)r << 40 | (int64_t)it << 20 | k;
		RANK_CHECK(t, r, B->send(c, out, N * sizeof *out, peer, it % 3) == 0, "send");
		RANK_CHECK(t, r, B->recv(c, in, N * sizeof *in, peer, it % 3) == 0, "recv");
		for (int k = 0; k < N; k++)
			RANK_CHECK(t, r, in[k] == ((int64_t)peer << 40 | (int64_t)it << 20 | k),
			    "it %d [%d]", it, k);
	}
	free(out);
	free(in);
}

static void
test_exchange(void)
{
	run_ranks(2, exchange_rank, NULL);
	run_ranks(4, exchange_rank, NULL);
}

/* ----------------------------------------------------------------- barrier */

/* Nobody passes phase p's barrier before everyone has counted phase p. */
static void
barrier_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, true), ranks};
	for (int p = 0; p < 100; p++) {
		atomic_fetch_add(&t->counter, 1);
		RANK_CHECK(t, r, B->barrier(c, &g) == 0, "barrier");
		int v = atomic_load(&t->counter);
		RANK_CHECK(t, r, v == (p + 1) * t->n, "phase %d: counter %d", p, v);
		RANK_CHECK(t, r, B->barrier(c, &g) == 0, "barrier");
	}
}

static void
test_barrier(void)
{
	FOR_N(n) run_ranks(n, barrier_rank, NULL);
}

/* ------------------------------------------------------------------ errors */

static void
test_bad_args(void)
{
	taprt_comm *w = taprt_threads_world(2);
	CU_ASSERT_PTR_NULL(taprt_threads_world(0));
	CU_ASSERT_PTR_NULL(taprt_threads_rank(w, 2));
	CU_ASSERT_PTR_NULL(taprt_threads_rank(w, -1));
	taprt_comm *c = taprt_threads_rank(w, 0);
	int r01[] = {0, 1}, r1[] = {1}, r00[] = {0, 0}, r05[] = {0, 5}, r0[] = {0};
	taprt_group g01 = {2, r01}, g1 = {1, r1}, g00 = {2, r00}, g05 = {2, r05}, g0 = {1, r0};
	taprt_group empty = {0, r0};
	float x[4] = {1, 2, 3, 4}, y[4];
	CU_ASSERT(B->allreduce(c, &g01, x, 4, TAPRT_BOOL, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(c, &g01, x, 4, TAPRT_F16, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(c, &g01, x, 4, TAPRT_F32, 7) < 0);
	CU_ASSERT(B->allreduce(c, &g01, x, -1, TAPRT_F32, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(c, &g1, x, 4, TAPRT_F32, TAPRT_SUM) < 0);  /* not a member */
	CU_ASSERT(B->allreduce(c, &g00, x, 4, TAPRT_F32, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(c, &g05, x, 4, TAPRT_F32, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(c, &empty, x, 4, TAPRT_F32, TAPRT_SUM) < 0);
	CU_ASSERT(B->allreduce(w, &g01, x, 4, TAPRT_F32, TAPRT_SUM) < 0); /* the world handle */
	CU_ASSERT(B->allgather(c, &g01, x, y, 4, 99) < 0);
	CU_ASSERT(B->reduce_scatter(c, &g01, x, y, 2, TAPRT_U8, TAPRT_SUM) < 0);
	CU_ASSERT(B->barrier(c, &g1) < 0);
	CU_ASSERT(B->send(c, x, 4, 2, 0) < 0);
	CU_ASSERT(B->send(c, x, -4, 1, 0) < 0);
	CU_ASSERT(B->recv(c, y, 4, -1, 0) < 0);
	/* a group of one needs nobody else */
	CU_ASSERT_EQUAL(B->allreduce(c, &g0, x, 4, TAPRT_F32, TAPRT_MAX), 0);
	CU_ASSERT(x[0] == 1 && x[3] == 4);
	CU_ASSERT_EQUAL(B->allgather(c, &g0, x, y, 4, TAPRT_F32), 0);
	CU_ASSERT(memcmp(x, y, sizeof x) == 0);
	CU_ASSERT_EQUAL(B->barrier(c, &g0), 0);
	/* sending to oneself is buffered, so it works on one thread */
	CU_ASSERT_EQUAL(B->send(c, x, sizeof x, 0, 5), 0);
	memset(y, 0, sizeof y);
	CU_ASSERT_EQUAL(B->recv(c, y, sizeof y, 0, 5), 0);
	CU_ASSERT(memcmp(x, y, sizeof x) == 0);
	taprt_threads_free(w);
}

/* Members disagreeing on count or size all fail instead of hanging. */
static void
mismatch_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	float x[8] = {0};
	int rc = B->allreduce(c, &g, x, 4 + (r == 1), TAPRT_F32, TAPRT_SUM);
	RANK_CHECK(t, r, rc == -EBADMSG, "count mismatch: %d", rc);
	rc = r == 0 ? B->barrier(c, &g) : B->allreduce(c, &g, x, 1, TAPRT_F32, TAPRT_SUM);
	RANK_CHECK(t, r, rc == -EBADMSG, "kind mismatch: %d", rc);
	/* and the group still works afterwards */
	x[0] = 1;
	rc = B->allreduce(c, &g, x, 1, TAPRT_F32, TAPRT_SUM);
	RANK_CHECK(t, r, rc == 0 && x[0] == t->n, "after mismatch: %d %g", rc, x[0]);
	if (r == 0)
		B->send(c, x, 8, 1, 1);
	else if (r == 1) {
		rc = B->recv(c, x, 4, 0, 1);
		RANK_CHECK(t, r, rc == -EBADMSG, "recv size mismatch: %d", rc);
	}
}

static void
test_mismatch(void)
{
	run_ranks(2, mismatch_rank, NULL);
	run_ranks(3, mismatch_rank, NULL);
}

/* The last rank aborts; the others, blocked in recv or a barrier, return. */
static void
abort_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	int v, rc;
	if (r == t->n - 1) {
		taprt_threads_abort(t->world);
		rc = B->allreduce(c, &g, &v, 1, TAPRT_I32, TAPRT_SUM);
		RANK_CHECK(t, r, rc == -ECANCELED, "after abort: %d", rc);
	} else if (r == 0) {
		rc = B->recv(c, &v, sizeof v, t->n - 1, 0);
		RANK_CHECK(t, r, rc == -ECANCELED, "recv: %d", rc);
	} else {
		rc = B->barrier(c, &g);
		RANK_CHECK(t, r, rc == -ECANCELED, "barrier: %d", rc);
	}
}

static void
test_abort(void)
{
	run_ranks(2, abort_rank, NULL);
	run_ranks(4, abort_rank, NULL);
}

/* ------------------------------------------------- started all-reduces */

#define NSTARTED 40                     /* more than the backend's ring of 16 */

static int64_t
started_count(int i)
{
	return (int64_t)(i * 397 % 3001);  /* 0 .. 3000 elements, 0 included */
}

/*
 * Rank r's started all-reduces: first in the sub-pipeline's pattern (two in
 * flight, each waited two starts later, with a blocking all-reduce of the
 * same group between), then the gradient buckets' (all started, then all
 * waited, so starts must advance earlier requests to free ring entries).
 * Every result must have the bits of the group-order sum.
 */
static void
iallreduce_rank(Run *t, taprt_comm *c, int r)
{
	ArP *want = t->arg;
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	float *x[NSTARTED];
	taprt_request *req[NSTARTED];
	for (int phase = 0; phase < 2; phase++) {
		for (int i = 0; i < NSTARTED; i++) {
			int64_t n = started_count(i);
			x[i] = malloc((n ? n : 1) * sizeof *x[i]);
			for (int64_t k = 0; k < n; k++)
				x[i][k] = fval(r, k, i);
			int rc = B->iallreduce(c, &g, x[i], n, TAPRT_F32, TAPRT_SUM, &req[i]);
			RANK_CHECK(t, r, rc == 0, "iallreduce %d returned %d", i, rc);
			if (rc)
				return;
			if (phase == 0 && i % 3 == 0) {
				float y[300];
				for (int k = 0; k < 300; k++)
					y[k] = fval(r, k, 7);
				rc = B->allreduce(c, &g, y, 300, TAPRT_F32, TAPRT_SUM);
				RANK_CHECK(t, r, rc == 0 && memcmp(y, want[NSTARTED].want, sizeof y) == 0,
				    "a blocking all-reduce between started ones: rc %d or wrong bits", rc);
			}
			if (phase == 0 && i % 2 == 1) {
				int done = 0;
				rc = B->test(c, req[i - 1], &done);
				RANK_CHECK(t, r, rc == 0, "test returned %d", rc);
			}
			if (phase == 0 && i >= 2) {
				rc = B->wait(c, req[i - 2]);
				RANK_CHECK(t, r, rc == 0, "wait %d returned %d", i - 2, rc);
			}
		}
		for (int i = phase == 0 ? NSTARTED - 2 : 0; i < NSTARTED; i++) {
			int rc = B->wait(c, req[i]);
			RANK_CHECK(t, r, rc == 0, "wait %d returned %d", i, rc);
		}
		for (int i = 0; i < NSTARTED; i++) {
			RANK_CHECK(t, r, memcmp(x[i], want[i].want, started_count(i) * sizeof(float)) == 0,
			    "phase %d: started all-reduce %d (%lld elements) has other bits than the "
			    "group-order sum", phase, i, (long long)started_count(i));
			free(x[i]);
		}
	}
}

static void
test_iallreduce(void)
{
	FOR_N(n) {
		ArP want[NSTARTED + 1];
		for (int i = 0; i <= NSTARTED; i++) {
			want[i] = (ArP){.count = i < NSTARTED ? started_count(i) : 300,
				.dtype = TAPRT_F32, .op = TAPRT_SUM, .salt = i < NSTARTED ? i : 7};
			expect(&want[i], n);
		}
		run_ranks(n, iallreduce_rank, want);
		for (int i = 0; i <= NSTARTED; i++)
			free(want[i].want);
	}
}

/* A member that starts with another count: every member's wait fails. */
static void
imismatch_rank(Run *t, taprt_comm *c, int r)
{
	int ranks[MAXN];
	taprt_group g = {group_world(t->n, ranks, false), ranks};
	float x[64] = {0};
	taprt_request *q;
	int rc = B->iallreduce(c, &g, x, r == 1 ? 32 : 64, TAPRT_F32, TAPRT_SUM, &q);
	RANK_CHECK(t, r, rc == 0, "iallreduce returned %d", rc);
	if (!rc)
		rc = B->wait(c, q);
	RANK_CHECK(t, r, rc == -EBADMSG, "wait returned %d, expected -EBADMSG", rc);
}

static void
test_imismatch(void)
{
	run_ranks(2, imismatch_rank, NULL);
	run_ranks(3, imismatch_rank, NULL);
}

/* How long a wait spins (backend.c, docs/runtime.md "Waiting"): 4 ms while
 * the busy threads fit on the CPUs, none when they do not, and
 * TAPRT_COMM_SPIN microseconds whatever they are. */
static void
test_spin_window(void)
{
	const char *was = getenv("TAPRT_COMM_SPIN");
	char *keep = was ? strdup(was) : NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsetenv("TAPRT_COMM_SPIN");
	CU_ASSERT_EQUAL(taprt_comm_spin_ns(1, 1), 4000000);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns(1, 0), 4000000);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns((int)ncpu, 1), 4000000);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns((int)ncpu + 1, 1), 0);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns(1, (int)ncpu + 1), 0);
	setenv("TAPRT_COMM_SPIN", "250", 1);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns(1, 1), 250000);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns((int)ncpu + 1, 1), 250000);
	setenv("TAPRT_COMM_SPIN", "0", 1);
	CU_ASSERT_EQUAL(taprt_comm_spin_ns(1, 1), 0);
	if (keep)
		setenv("TAPRT_COMM_SPIN", keep, 1);
	else
		unsetenv("TAPRT_COMM_SPIN");
	free(keep);
}

void
suite_rt_comm(CU_pSuite s)
{
	ADD(s, test_bad_args);
	ADD(s, test_allreduce);
	ADD(s, test_allreduce_minprod);
	ADD(s, test_allreduce_large);
	ADD(s, test_determinism);
	ADD(s, test_disjoint_groups);
	ADD(s, test_repeated);
	ADD(s, test_allgather);
	ADD(s, test_reduce_scatter);
	ADD(s, test_pingpong);
	ADD(s, test_ring);
	ADD(s, test_tags);
	ADD(s, test_exchange);
	ADD(s, test_barrier);
	ADD(s, test_mismatch);
	ADD(s, test_abort);
	ADD(s, test_iallreduce);
	ADD(s, test_imismatch);
	ADD(s, test_spin_window);
}
