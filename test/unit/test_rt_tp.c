/*
 * test_rt_tp.c - CUnit tests for tensor parallelism in the runtime: the
 * weight loader's blocked slices, the AllReduce, AllGather, ReduceScatter
 * and Shard kernels over rank threads of the threads backend, and
 * taprt_main's TP groups and private outputs.
 *
 * Expected values come from index arithmetic written here on the full
 * tensor, never from the runtime: along the split axis, local index L is
 * block j = L / chunk, offset i = L % chunk, and on TP rank q it holds full
 * index (j * parts + q) * chunk + i.  Values are small non-negative
 * integers, exact in every dtype, so sums do not depend on the order in
 * which a backend reduces.  As in test_rt_comm.c, ranks record their
 * first failure and the main thread asserts after joining them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "test/unit/util.h"
#include "test/unit/rt_util.h"
#include "runtime/internal.h"

#define B (&taprt_threads_backend)
#define MAXN 8

/* --------------------------------------------------------------- harness */

typedef struct Run Run;
typedef void RankFn(Run *t, taprt_ctx *cx);

struct Run {
	taprt_comm *world;
	int n, tp;                      /* ranks; TP degree (n % tp == 0) */
	RankFn *fn;
	const void *arg;                /* the test's parameters */
	int groups[MAXN][MAXN];         /* each rank's TP group */
	int bad[MAXN];
	char why[MAXN][320];
};

typedef struct {
	Run *t;
	int r;
} Arg;


/* A rank's context as taprt_main builds it, from the layout (one stage). */
static void *
rank_main(void *p)
{
	Arg *a = p;
	Run *t = a->t;
	int r = a->r;
	taprt_layout l = {.nranks = t->n, .tp = t->tp, .pp = 1, .dp = t->n / t->tp,
		.microbatches = 1};
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	cx.rank = r;
	cx.nranks = t->n;
	cx.be = B;
	cx.comm = taprt_threads_rank(t->world, r);
	cx.tp_rank = taprt_coords_of(&l, r).tp_rank;
	cx.tp_group = (taprt_group){taprt_group_of(&l, r, TAPRT_GROUP_TP, t->groups[r]), t->groups[r]};
	t->fn(t, &cx);
	taprt_packs_free(&cx);
	return NULL;
}

static void
run_ranks(int n, int tp, RankFn *fn, const void *arg)
{
	Run t = {.n = n, .tp = tp, .fn = fn, .arg = arg};
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
			fprintf(stderr, "\n  n=%d tp=%d rank %d: %s (%d failures)", n, tp, r, t.why[r],
			    t.bad[r]);
		CU_ASSERT_EQUAL(t.bad[r], 0);
	}
	taprt_threads_free(t.world);
}

/* A kernel failed on rank r: record it and wake the others (they may be
 * blocked in a collective this rank will never join). */
static bool
kernel_ok(Run *t, taprt_ctx *cx, const char *what)
{
	if (!cx->error[0])
		return true;
	RANK_CHECK(t, cx->rank, false, "%s: %s", what, cx->error);
	taprt_threads_abort(t->world);
	return false;
}

/* ---------------------------------------------------------------- values */

static double
getv(int dtype, const void *p, int64_t i)
{
	switch (dtype) {
	case TAPRT_F32: return ((const float *)p)[i];
	case TAPRT_F64: return ((const double *)p)[i];
	case TAPRT_I32: return ((const int32_t *)p)[i];
	case TAPRT_I64: return (double)((const int64_t *)p)[i];
	case TAPRT_I16: return ((const int16_t *)p)[i];
	case TAPRT_U8: return ((const uint8_t *)p)[i];
	default: return -1e300;
	}
}

/* A non-negative integer below 2048 (256 for bf16) as a half's bits: exact.
 * Only weights' files hold halves here (converted to f32 as they load). */
static uint16_t
half_bits(int dtype, double v)
{
	int n = (int)v, e = 0;
	if (dtype == TAPRT_BF16) {
		float f = (float)n;
		uint32_t u;
		memcpy(&u, &f, 4);
		return (uint16_t)(u >> 16);
	}
	if (n == 0)
		return 0;
	while (n >> (e + 1))
		e++;
	return (uint16_t)((e + 15) << 10 | ((n << (10 - e)) & 0x3ff));
}

static void
setv(int dtype, void *p, int64_t i, double v)
{
	switch (dtype) {
	case TAPRT_F16: case TAPRT_BF16: ((uint16_t *)p)[i] = half_bits(dtype, v); break;
	case TAPRT_F32: ((float *)p)[i] = (float)v; break;
	case TAPRT_F64: ((double *)p)[i] = v; break;
	case TAPRT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
	case TAPRT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
	case TAPRT_I16: ((int16_t *)p)[i] = (int16_t)v; break;
	case TAPRT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	}
}

/* Rank r's element at flat index k of tensor `salt`: 0..60. */
static double
val(int salt, int r, int64_t k)
{
	return (double)((k * 7 + r * 13 + salt * 29) % 61);
}

#define SENTINEL 77             /* one element past every output */

/* ------------------------------------------------------------ the cases */

/*
 * A split: the full tensor's dims are base's with dims[axis] replaced by
 * blocks * parts * chunk; axis may be negative (-1: the last).
 */
typedef struct {
	int rank;
	int64_t base[3];
	int axis, blocks, chunk;
} Split;

static const Split splits[] = {
	{3, {5, 0, 3}, 0, 1, 3},        /* outer 1, one block: no permutation */
	{3, {5, 0, 3}, 0, 3, 1},
	{3, {5, 0, 3}, 1, 1, 3},
	{3, {5, 0, 3}, 1, 3, 1},
	{3, {5, 0, 3}, -1, 1, 3},
	{3, {5, 0, 3}, -1, 3, 3},
	{3, {3, 5, 7}, 2, 3, 1},
	{1, {0}, 0, 3, 3},
	{1, {0}, -1, 1, 1},
	{2, {7, 0}, 1, 3, 3},
};
#define NSPLITS ((int)(sizeof splits / sizeof splits[0]))

/* The geometry of split s over parts ranks: full and local dims, the
 * numbers of elements before and after the axis, the axis' lengths. */
typedef struct {
	int rank, axis;
	int64_t full[3], local[3];
	int64_t outer, inner, D, L, chunk, blocks, parts;
	int64_t nfull, nlocal;
} Geom;

static Geom
geom(const Split *s, int parts)
{
	Geom g = {.rank = s->rank, .axis = s->axis < 0 ? s->axis + s->rank : s->axis,
		.outer = 1, .inner = 1, .chunk = s->chunk, .blocks = s->blocks, .parts = parts};
	g.D = (int64_t)s->blocks * parts * s->chunk;
	g.L = (int64_t)s->blocks * s->chunk;
	for (int a = 0; a < g.rank; a++) {
		g.full[a] = a == g.axis ? g.D : s->base[a];
		g.local[a] = a == g.axis ? g.L : s->base[a];
		if (a < g.axis)
			g.outer *= s->base[a];
		if (a > g.axis)
			g.inner *= s->base[a];
	}
	g.nfull = g.outer * g.D * g.inner;
	g.nlocal = g.outer * g.L * g.inner;
	return g;
}

/* The full flat index that local flat index l of TP rank q holds. */
static int64_t
full_index(const Geom *g, int q, int64_t l)
{
	int64_t k = l % g->inner, L = l / g->inner % g->L, o = l / g->inner / g->L;
	int64_t j = L / g->chunk, i = L % g->chunk;
	int64_t F = (j * g->parts + q) * g->chunk + i;
	return (o * g->D + F) * g->inner + k;
}

/* Which TP rank's local index full flat index f comes from, and which. */
static int64_t
local_index(const Geom *g, int64_t f, int *q)
{
	int64_t k = f % g->inner, F = f / g->inner % g->D, o = f / g->inner / g->D;
	int64_t j = F / (g->parts * g->chunk), i = F % g->chunk;
	*q = (int)(F / g->chunk % g->parts);
	return (o * g->L + j * g->chunk + i) * g->inner + k;
}

static void *
filled(int dtype, int64_t n, int salt, int r)
{
	void *p = malloc((n + 1) * 8);
	for (int64_t k = 0; k < n; k++)
		setv(dtype, p, k, val(salt, r, k));
	setv(dtype, p, n, SENTINEL);
	return p;
}

/* The attributes a split op carries, sorted by name. */
static void
split_attrs(taprt_attr *at, const Split *s, int parts)
{
	at[0] = (taprt_attr){.name = "axis", .type = TAPRT_ATTR_INT, .i = s->axis};
	at[1] = (taprt_attr){.name = "blocks", .type = TAPRT_ATTR_INT, .i = s->blocks};
	at[2] = (taprt_attr){.name = "parts", .type = TAPRT_ATTR_INT, .i = parts};
}

/* ---------------------------------------------------- Shard, AllGather, RS */

typedef struct {
	int dtype;
} KP;

static bool
reducible(int dtype)
{
	return dtype == TAPRT_F32 || dtype == TAPRT_F64 || dtype == TAPRT_I32 ||
	    dtype == TAPRT_I64;
}

static void
split_ops_rank(Run *t, taprt_ctx *cx)
{
	const KP *kp = t->arg;
	int r = cx->rank, q = cx->tp_rank, parts = cx->tp_group.size, base = r - q;
	int dt = kp->dtype;
	for (int si = 0; si < NSPLITS; si++) {
		const Split *s = &splits[si];
		Geom g = geom(s, parts);
		taprt_attr at[3];
		split_attrs(at, s, parts);

		/* Shard: full (this rank's own values) -> local */
		void *xf = filled(dt, g.nfull, 1, r), *yl = filled(dt, g.nlocal, 9, r);
		taprt_tensor x = rt_tensor(dt, xf, g.rank, g.full);
		taprt_tensor y = rt_tensor(dt, yl, g.rank, g.local);
		taprt_tensor *in[] = {&x}, *out[] = {&y};
		taprt_node n = rt_node(in, 1, out, 1, at, 3);
		taprt_op_Shard(cx, &n);
		if (!kernel_ok(t, cx, "Shard"))
			return;
		for (int64_t l = 0; l < g.nlocal; l++) {
			double want = val(1, r, full_index(&g, q, l));
			RANK_CHECK(t, r, getv(dt, yl, l) == want, "Shard split %d [%lld]: %g want %g", si,
			    (long long)l, getv(dt, yl, l), want);
		}
		RANK_CHECK(t, r, getv(dt, yl, g.nlocal) == SENTINEL, "Shard split %d wrote past y", si);
		free(xf);
		free(yl);

		/* AllGather: local -> full */
		void *xl = filled(dt, g.nlocal, 2, r), *yf = filled(dt, g.nfull, 9, r);
		x = rt_tensor(dt, xl, g.rank, g.local);
		y = rt_tensor(dt, yf, g.rank, g.full);
		taprt_op_AllGather(cx, &n);
		if (!kernel_ok(t, cx, "AllGather"))
			return;
		for (int64_t f = 0; f < g.nfull; f++) {
			int from;
			int64_t l = local_index(&g, f, &from);
			double want = val(2, base + from, l);
			RANK_CHECK(t, r, getv(dt, yf, f) == want, "AllGather split %d [%lld]: %g want %g",
			    si, (long long)f, getv(dt, yf, f), want);
		}
		RANK_CHECK(t, r, getv(dt, yf, g.nfull) == SENTINEL, "AllGather split %d wrote past y", si);
		free(xl);
		free(yf);

		/* ReduceScatter: full -> local, summed over the group */
		if (!reducible(dt))
			continue;
		xf = filled(dt, g.nfull, 3, r);
		yl = filled(dt, g.nlocal, 9, r);
		x = rt_tensor(dt, xf, g.rank, g.full);
		y = rt_tensor(dt, yl, g.rank, g.local);
		taprt_op_ReduceScatter(cx, &n);
		if (!kernel_ok(t, cx, "ReduceScatter"))
			return;
		for (int64_t l = 0; l < g.nlocal; l++) {
			double want = 0;
			for (int m = 0; m < parts; m++)
				want += val(3, base + m, full_index(&g, q, l));
			RANK_CHECK(t, r, getv(dt, yl, l) == want, "ReduceScatter split %d [%lld]: %g want %g",
			    si, (long long)l, getv(dt, yl, l), want);
		}
		RANK_CHECK(t, r, getv(dt, yl, g.nlocal) == SENTINEL, "ReduceScatter split %d wrote past y",
		    si);
		/* and its input is left alone */
		for (int64_t f = 0; f < g.nfull; f++)
			RANK_CHECK(t, r, getv(dt, xf, f) == val(3, r, f), "ReduceScatter changed x");
		free(xf);
		free(yl);
	}
}

static void
test_split_ops(void)
{
	static const int dtypes[] = {TAPRT_F32, TAPRT_F64, TAPRT_I32, TAPRT_I64, TAPRT_I16,
		TAPRT_U8};
	for (int d = 0; d < 6; d++) {
		KP kp = {dtypes[d]};
		run_ranks(2, 2, split_ops_rank, &kp);
		run_ranks(4, 4, split_ops_rank, &kp);
		run_ranks(4, 2, split_ops_rank, &kp);   /* two TP groups at once */
	}
}

/* ------------------------------------------------------------- AllReduce */

static void
allreduce_rank(Run *t, taprt_ctx *cx)
{
	const KP *kp = t->arg;
	int r = cx->rank, base = r - cx->tp_rank, dt = kp->dtype;
	static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {2, 1, 33}, {0, 4, 2}};
	for (int si = 0; si < 4; si++) {
		const int64_t *d = shapes[si];
		int64_t cnt = d[0] * d[1] * d[2];
		for (int inplace = 0; inplace < 2; inplace++) {
			void *xb = filled(dt, cnt, 4 + si, r);
			void *yb = inplace ? xb : filled(dt, cnt, 9, r);
			taprt_tensor x = rt_tensor(dt, xb, 3, d), y = rt_tensor(dt, yb, 3, d);
			taprt_tensor *in[] = {&x}, *out[] = {&y};
			taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
			taprt_op_AllReduce(cx, &n);
			if (!kernel_ok(t, cx, "AllReduce"))
				return;
			for (int64_t k = 0; k < cnt; k++) {
				double want = 0;
				for (int m = 0; m < cx->tp_group.size; m++)
					want += val(4 + si, base + m, k);
				RANK_CHECK(t, r, getv(dt, yb, k) == want, "shape %d inplace %d [%lld]: %g want %g",
				    si, inplace, (long long)k, getv(dt, yb, k), want);
				if (!inplace)
					RANK_CHECK(t, r, getv(dt, xb, k) == val(4 + si, r, k), "changed x");
			}
			RANK_CHECK(t, r, getv(dt, yb, cnt) == SENTINEL, "wrote past y");
			if (!inplace)
				free(yb);
			free(xb);
		}
	}
}

static void
test_allreduce(void)
{
	static const int dtypes[] = {TAPRT_F32, TAPRT_F64, TAPRT_I32, TAPRT_I64};
	for (int d = 0; d < 4; d++) {
		KP kp = {dtypes[d]};
		run_ranks(2, 2, allreduce_rank, &kp);
		run_ranks(4, 4, allreduce_rank, &kp);
		run_ranks(4, 2, allreduce_rank, &kp);
	}
}

/* Kernels composed: Shard a tensor; ReduceScatter then AllGather must
 * equal AllReduce on the same (blocked) split. */
static void
chain_rank(Run *t, taprt_ctx *cx)
{
	int r = cx->rank, parts = cx->tp_group.size;
	enum { M = 3, K = 6 };
	/* full x[M, K*parts] on every rank (the same), local slice along 1 */
	float *xf = malloc(M * K * parts * sizeof *xf), *xl = malloc(M * K * sizeof *xl);
	float *part = malloc(M * K * parts * sizeof *part), *rs = malloc(M * K * sizeof *rs);
	float *full = malloc(M * K * parts * sizeof *full);
	for (int64_t k = 0; k < M * K * parts; k++)
		xf[k] = (float)val(5, 0, k);
	taprt_attr at[3];
	Split s = {2, {M, 0}, 1, 3, K / 3};
	split_attrs(at, &s, parts);
	int64_t fd[2] = {M, K * parts}, ld[2] = {M, K};
	taprt_tensor tf = rt_tensor(TAPRT_F32, xf, 2, fd), tl = rt_tensor(TAPRT_F32, xl, 2, ld);
	taprt_tensor *in[] = {&tf}, *out[] = {&tl};
	taprt_node n = rt_node(in, 1, out, 1, at, 3);
	taprt_op_Shard(cx, &n);
	if (!kernel_ok(t, cx, "Shard"))
		goto done;
	/* each rank contributes its slice scaled by (tp_rank + 1), spread over
	 * the full width; ReduceScatter then AllGather must equal AllReduce */
	for (int64_t k = 0; k < M * K * parts; k++)
		part[k] = xl[k % (M * K)] * (float)(cx->tp_rank + 1);
	taprt_tensor tp = rt_tensor(TAPRT_F32, part, 2, fd), tr = rt_tensor(TAPRT_F32, rs, 2, ld);
	taprt_tensor tg = rt_tensor(TAPRT_F32, full, 2, fd);
	taprt_tensor *in2[] = {&tp}, *out2[] = {&tr}, *in3[] = {&tr}, *out3[] = {&tg};
	taprt_node n2 = rt_node(in2, 1, out2, 1, at, 3), n3 = rt_node(in3, 1, out3, 1, at, 3);
	taprt_op_ReduceScatter(cx, &n2);
	if (!kernel_ok(t, cx, "ReduceScatter"))
		goto done;
	taprt_op_AllGather(cx, &n3);
	if (!kernel_ok(t, cx, "AllGather"))
		goto done;
	taprt_node n4 = rt_node(in2, 1, in2, 1, NULL, 0);
	taprt_op_AllReduce(cx, &n4);
	if (!kernel_ok(t, cx, "AllReduce"))
		goto done;
	for (int64_t k = 0; k < M * K * parts; k++)
		RANK_CHECK(t, r, full[k] == part[k], "[%lld]: %g want %g", (long long)k, full[k], part[k]);
done:
	free(xf);
	free(xl);
	free(part);
	free(rs);
	free(full);
}

static void
test_chain(void)
{
	run_ranks(2, 2, chain_rank, NULL);
	run_ranks(4, 4, chain_rank, NULL);
	run_ranks(4, 2, chain_rank, NULL);
}

/* ---------------------------------------------------------------- errors */

/* Run op with one input and one output on cx; return cx's message. */
static const char *
run_op(taprt_ctx *cx, kernel *op, taprt_tensor *x, taprt_tensor *y, const taprt_attr *at,
    int nat)
{
	taprt_tensor *in[] = {x}, *out[] = {y};
	taprt_node n = rt_node(in, 1, out, 1, at, nat);
	cx->error[0] = 0;
	op(cx, &n);
	return cx->error;
}

static void
test_errors(void)
{
	int ids[] = {0, 1, 2, 3};
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	cx.rank = 1;
	cx.tp_rank = 1;
	cx.tp_group = (taprt_group){2, ids};
	float xb[64] = {0}, yb[64] = {0};
	taprt_tensor x = rt_tensor(TAPRT_F32, xb, 2, DIMS(4, 6));
	taprt_tensor y = rt_tensor(TAPRT_F32, yb, 2, DIMS(4, 3));
	taprt_attr at[3];
	Split s = {2, {4, 0}, 1, 1, 3};
	split_attrs(at, &s, 2);
	/* Shard needs no backend: the good case first */
	for (int k = 0; k < 24; k++)
		xb[k] = (float)k;
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "");
	CU_ASSERT(yb[0] == 3 && yb[2] == 5 && yb[3] == 9 && yb[11] == 23);
	/* parts is the TP degree */
	at[2].i = 3;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "parts=3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 2), "parts=-1"));
	at[2].i = 2;
	/* blocks that do not divide the axis, a wrong local length, a wrong other dim */
	at[1].i = 4;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "do not match"));
	at[1].i = 1;
	y.dims[1] = 2;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "f32[4,2]"));
	y.dims[1] = 3;
	y.dims[0] = 2;
	CU_ASSERT_STRING_NOT_EQUAL(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "");
	y.dims[0] = 4;
	at[0].i = 2;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "axis 2 out of range"));
	at[0].i = -3;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "out of range"));
	at[0].i = -1;
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "");
	/* dtype or rank disagree */
	y.dtype = TAPRT_I32;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "differ"));
	y.dtype = TAPRT_F32;
	/* a member of more than one needs a backend for the collectives */
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_AllGather, &y, &x, at, 3),
	    "no communication backend"));
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_ReduceScatter, &x, &y, at, 3),
	    "no communication backend"));
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_AllReduce, &x, &x, NULL, 0),
	    "no communication backend"));
	/* the coordinate must match the group */
	cx.tp_rank = 0;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_Shard, &x, &y, at, 3), "not member 0"));
	cx.tp_group.size = 0;
	CU_ASSERT_STRING_NOT_EQUAL(run_op(&cx, taprt_op_AllReduce, &x, &x, NULL, 0), "");
	/* reductions: f32, f64, i32, i64 only; AllReduce keeps the shape */
	cx.rank = 0;
	cx.tp_group = (taprt_group){1, ids};
	taprt_tensor u = rt_tensor(TAPRT_U8, xb, 1, DIMS(4)), v = rt_tensor(TAPRT_U8, yb, 1, DIMS(4));
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_AllReduce, &u, &v, NULL, 0),
	    "dtype u8 not supported"));
	at[0].i = 0;
	at[2].i = 1;
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_ReduceScatter, &u, &v, at, 3),
	    "not supported"));
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_AllGather, &u, &v, at, 3), "");
	CU_ASSERT_PTR_NOT_NULL(strstr(run_op(&cx, taprt_op_AllReduce, &x, &y, NULL, 0),
	    "not the input's shape"));
	CU_ASSERT_STRING_NOT_EQUAL(run_op(&cx, taprt_op_AllReduce, &x, NULL, NULL, 0), "");
	/* a group of one needs no backend: the collectives copy */
	for (int k = 0; k < 24; k++)
		xb[k] = (float)k + 0.5f;
	memset(yb, 0, sizeof yb);
	taprt_tensor y6 = rt_tensor(TAPRT_F32, yb, 2, DIMS(4, 6));
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_AllReduce, &x, &y6, NULL, 0), "");
	CU_ASSERT(memcmp(xb, yb, 24 * sizeof *xb) == 0);
	memset(yb, 0, sizeof yb);
	at[1].i = 3;
	at[0].i = 1;
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_AllGather, &x, &y6, at, 3), "");
	CU_ASSERT(memcmp(xb, yb, 24 * sizeof *xb) == 0);
	memset(yb, 0, sizeof yb);
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_ReduceScatter, &x, &y6, at, 3), "");
	CU_ASSERT(memcmp(xb, yb, 24 * sizeof *xb) == 0);
	/* Shard in place */
	cx.rank = 1;
	cx.tp_rank = 1;
	cx.tp_group = (taprt_group){2, ids};
	at[2].i = 2;
	for (int k = 0; k < 24; k++)
		xb[k] = (float)k;
	taprt_tensor x3 = rt_tensor(TAPRT_F32, xb, 2, DIMS(4, 3));
	CU_ASSERT_STRING_EQUAL(run_op(&cx, taprt_op_Shard, &x, &x3, at, 3), ""); /* [4,3,2,1]: blocks 3, chunk 1 */
	static const float want[12] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23};
	CU_ASSERT(memcmp(xb, want, sizeof want) == 0);
}

/* Members that disagree (a count differs) all fail instead of hanging. */
static void
mismatch_rank(Run *t, taprt_ctx *cx)
{
	float xb[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	taprt_tensor x = rt_tensor(TAPRT_F32, xb, 1, DIMS(4 + (cx->rank == 1)));
	taprt_tensor *in[] = {&x};
	taprt_node n = rt_node(in, 1, in, 1, NULL, 0);
	taprt_op_AllReduce(cx, &n);
	RANK_CHECK(t, cx->rank, strstr(cx->error, "allreduce over a TP group of 2 failed"),
	    "error: '%s'", cx->error);
}

static void
test_mismatch(void)
{
	run_ranks(2, 2, mismatch_rank, NULL);
}

/* --------------------------------------------------------------- weights */

/* A weight file in a fresh directory: 40 junk bytes, then tensors. */
typedef struct {
	char dir[64];
	char path[96];
	FILE *f;
	int64_t at;
} WFile;

static void
wfile_open(WFile *w)
{
	strcpy(w->dir, "/tmp/tapc-tp-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(w->dir));
	snprintf(w->path, sizeof w->path, "%s/w.bin", w->dir);
	w->f = fopen(w->path, "wb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(w->f);
	char junk[40];
	memset(junk, 0xa5, sizeof junk);
	fwrite(junk, 1, sizeof junk, w->f);
	w->at = sizeof junk;
}

/* Append n elements of values val(salt, 0, k); return their offset. */
static int64_t
wfile_put(WFile *w, int dtype, int64_t n, int salt)
{
	void *p = filled(dtype, n, salt, 0);
	int64_t off = w->at, bytes = n * taprt_dtype_size(dtype);
	CU_ASSERT_EQUAL(fwrite(p, 1, (size_t)bytes, w->f), (size_t)bytes);
	w->at += bytes;
	free(p);
	return off;
}

static void
wfile_map(WFile *w)
{
	fclose(w->f);
	w->f = NULL;
	const char *files[] = {"w.bin"};
	taprt_program p = {.name = "w", .nfiles = 1, .files = files};
	char err[300];
	int rc = taprt_map_files(&p, w->dir, err, sizeof err);
	if (rc != 0)
		fprintf(stderr, "\n%s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void
wfile_close(WFile *w)
{
	char cmd[128];
	taprt_unmap_files();
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", w->dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

static void
test_weights(void)
{
	static const int dtypes[] = {TAPRT_F32, TAPRT_I16, TAPRT_F64};
	static const int tps[] = {1, 2, 4, 3};
	enum { NW = NSPLITS * 3 * 4 + NSPLITS * 2 + 1 };
	WFile wf;
	wfile_open(&wf);
	taprt_weight ws[NW];
	Geom gs[NW];
	int nw = 0;
	/* every split for every dtype and TP degree, then a whole tensor */
	for (int di = 0; di < 3; di++)
		for (int ti = 0; ti < 4; ti++)
			for (int si = 0; si < NSPLITS; si++) {
				Geom g = geom(&splits[si], tps[ti]);
				taprt_weight *w = &ws[nw];
				*w = (taprt_weight){NULL, 0, wfile_put(&wf, dtypes[di], g.nfull, nw), g.rank,
					{0}, g.axis, tps[ti], splits[si].blocks};
				memcpy(w->full_dims, g.full, sizeof g.full);
				w->t = malloc(sizeof *w->t);
				*w->t = rt_tensor(dtypes[di], NULL, g.rank, g.local);
				gs[nw++] = g;
			}
	/* f16 and bf16 in the file, f32 tensors: every split at tp 2, converted
	 * as they load (legalize-half's sliced half weights) */
	for (int hi = 0; hi < 2; hi++)
		for (int si = 0; si < NSPLITS; si++) {
			int hd = hi ? TAPRT_BF16 : TAPRT_F16;
			Geom g = geom(&splits[si], 2);
			taprt_weight *w = &ws[nw];
			*w = (taprt_weight){NULL, 0, wfile_put(&wf, hd, g.nfull, nw), g.rank, {0}, g.axis,
				2, splits[si].blocks, hd};
			memcpy(w->full_dims, g.full, sizeof g.full);
			w->t = malloc(sizeof *w->t);
			*w->t = rt_tensor(TAPRT_F32, NULL, g.rank, g.local);
			gs[nw++] = g;
		}
	int64_t whole[2] = {3, 5};
	ws[nw] = (taprt_weight){NULL, 0, wfile_put(&wf, TAPRT_F32, 15, nw), 2, {3, 5}, -1, 0, 0};
	ws[nw].t = malloc(sizeof *ws[nw].t);
	*ws[nw].t = rt_tensor(TAPRT_F32, NULL, 2, whole);
	nw++;
	wfile_map(&wf);

	int ids[4] = {0, 1, 2, 3};
	for (int ti = 0; ti < 4; ti++) {
		int tp = tps[ti];
		for (int q = 0; q < tp; q++) {
			/* the weights of this TP degree, and the whole one */
			taprt_weight mine[NW];
			int m = 0;
			for (int i = 0; i < nw; i++)
				if (i == nw - 1 || ws[i].slice_parts == tp) {
					mine[m] = ws[i];
					mine[m].t = malloc(sizeof *mine[m].t);
					*mine[m].t = *ws[i].t;
					mine[m].t->data = malloc(mine[m].t->numel * 8 + 8);
					setv(mine[m].t->dtype, mine[m].t->data, mine[m].t->numel, SENTINEL);
					m++;
				}
			taprt_rank_program rp = {.nweights = m, .weights = mine};
			taprt_ctx cx;
			memset(&cx, 0, sizeof cx);
			cx.rank = q;
			cx.tp_rank = q;
			cx.tp_group = (taprt_group){tp, ids};
			CU_ASSERT_EQUAL(taprt_load_weights(&cx, &rp), 0);
			CU_ASSERT_STRING_EQUAL(cx.error, "");
			for (int i = 0, k = 0; i < nw; i++) {
				if (!(i == nw - 1 || ws[i].slice_parts == tp))
					continue;
				const taprt_tensor *t = mine[k++].t;
				int bad = 0;
				for (int64_t l = 0; l < t->numel; l++) {
					int64_t f = i == nw - 1 ? l : full_index(&gs[i], q, l);
					bad += getv(t->dtype, t->data, l) != val(i, 0, f);
				}
				bad += getv(t->dtype, t->data, t->numel) != SENTINEL;
				if (bad)
					fprintf(stderr, "\nweight %d (tp %d, q %d): %d bad elements", i, tp, q,
					    bad);
				CU_ASSERT_EQUAL(bad, 0);
			}
			for (int k = 0; k < m; k++) {
				free(mine[k].t->data);
				free(mine[k].t);
			}
		}
	}

	/* errors: each one weight, from the 2-way split of splits[2] (f32) */
	int i2 = 1 * NSPLITS + 2;       /* dtype 0, tp 2, split 2: [5, 6, 3] axis 1 */
	CU_ASSERT_EQUAL(ws[i2].slice_parts, 2);
	float buf[256];
	taprt_ctx cx;
	struct {
		const char *what, *needle;
		int tp_rank, tp_size, parts, blocks, axis;
		int64_t full1, local1, local0, local_rank;
	} bad[] = {
		{"ok", "", 1, 2, 2, 1, 1, 6, 3, 5, 3},
		{"indivisible", "does not split", 1, 2, 2, 1, 1, 5, 3, 5, 3},
		{"local length", "expected the full rank 3 with 3", 1, 2, 2, 1, 1, 6, 2, 5, 3},
		{"other dim", "expected", 1, 2, 2, 1, 1, 6, 3, 4, 3},
		{"local rank", "tensor of rank 2", 1, 2, 2, 1, 1, 6, 3, 5, 2},
		{"coordinate", "this rank is 2", 2, 2, 2, 1, 1, 6, 3, 5, 3},
		{"group", "sliced 2 ways", 1, 4, 2, 1, 1, 6, 3, 5, 3},
		{"parts", "0 parts", 1, 2, 0, 1, 1, 6, 3, 5, 3},
		{"blocks", "0 blocks", 1, 2, 2, 0, 1, 6, 3, 5, 3},
		{"axis", "axis 3 out of range", 1, 2, 2, 1, 3, 6, 3, 5, 3},
	};
	for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
		taprt_weight w = ws[i2];
		taprt_tensor t = *w.t;
		t.data = buf;
		w.t = &t;
		w.slice_parts = bad[b].parts;
		w.slice_blocks = bad[b].blocks;
		w.slice_axis = bad[b].axis;
		w.full_dims[1] = bad[b].full1;
		t.dims[1] = bad[b].local1;
		t.dims[0] = bad[b].local0;
		t.rank = (int)bad[b].local_rank;
		memset(&cx, 0, sizeof cx);
		cx.tp_rank = bad[b].tp_rank;
		cx.tp_group = (taprt_group){bad[b].tp_size, ids};
		taprt_rank_program rp = {.nweights = 1, .weights = &w};
		int rc = taprt_load_weights(&cx, &rp);
		bool ok = *bad[b].needle ? rc != 0 && strstr(cx.error, bad[b].needle) :
		    rc == 0 && !cx.error[0];
		if (!ok)
			fprintf(stderr, "\nweight error case '%s': rc %d, '%s'", bad[b].what, rc, cx.error);
		CU_ASSERT(ok);
	}
	/* a whole weight whose tensor is not its size */
	taprt_weight w = ws[nw - 1];
	taprt_tensor t = rt_tensor(TAPRT_F32, buf, 2, DIMS(3, 6));
	w.t = &t;
	memset(&cx, 0, sizeof cx);
	taprt_rank_program rp = {.nweights = 1, .weights = &w};
	CU_ASSERT(taprt_load_weights(&cx, &rp) != 0 && strstr(cx.error, "whole weight"));

	for (int i = 0; i < nw; i++)
		free(ws[i].t);
	wfile_close(&wf);
}

/* ------------------------------------------------------ stage transfers */

/*
 * taprt_send/taprt_recv as a 3-stage pipeline uses them: stage 0 sends two
 * micro-batches of one tensor (same tag), stage 1 receives them in order,
 * adds 1 and passes them on, stage 2 checks; the send runs ahead (buffered).
 * Then the errors: no such peer, a size the sender did not send.
 */
static void
p2p_rank(Run *t, taprt_ctx *cx)
{
	float buf[5];
	taprt_tensor x = rt_tensor(TAPRT_F32, buf, 1, DIMS(5));
	int r = cx->rank;
	for (int m = 0; m < 2; m++) {
		if (r == 0) {
			for (int i = 0; i < 5; i++)
				buf[i] = (float)(10 * m + i);
			RANK_CHECK(t, r, taprt_send(cx, &x, 1, 7) == 0, "send: %s", cx->error);
		} else {
			RANK_CHECK(t, r, taprt_recv(cx, &x, r - 1, 7) == 0, "recv: %s", cx->error);
			for (int i = 0; i < 5; i++)
				RANK_CHECK(t, r, buf[i] == (float)(10 * m + i + r - 1),
				    "micro-batch %d element %d: %g", m, i, buf[i]);
			for (int i = 0; i < 5; i++)
				buf[i] += 1;
			if (r == 1)
				RANK_CHECK(t, r, taprt_send(cx, &x, 2, 7) == 0, "send: %s", cx->error);
		}
	}
	if (r == 0) {
		cx->error[0] = 0;
		RANK_CHECK(t, r, taprt_send(cx, &x, 3, 1) == -1 && strstr(cx->error, "no rank 3"),
		    "send to rank 3 of 3: '%s'", cx->error);
		cx->error[0] = 0;
		RANK_CHECK(t, r, taprt_send(cx, &x, 0, 1) == -1, "send to itself succeeded");
		cx->error[0] = 0;
		RANK_CHECK(t, r, taprt_send(cx, &x, 1, 9) == 0, "send: %s", cx->error);
	} else if (r == 1) {
		float big[6];
		taprt_tensor y = rt_tensor(TAPRT_F32, big, 1, DIMS(6));
		RANK_CHECK(t, r, taprt_recv(cx, &y, 0, 9) == -1 && strstr(cx->error, "recv of tensor 9"),
		    "recv of 24 bytes for 20 sent: '%s'", cx->error);
	}
}

static void
test_p2p(void)
{
	run_ranks(3, 1, p2p_rank, NULL);
}

/* ------------------------------------------------------------ taprt_main */

/*
 * One rank program shared by every rank, as tapc emits for a TP group:
 * it loads its slice (blocks 3) of a 12-element weight, gathers it back
 * and copies its replica's rows of it into output 0, and writes its rank
 * into row 0 of its replica's rows of output 1, the ranks one after
 * another.  Had the ranks shared the program's output buffers, the last
 * writer would win, whatever its TP coordinate.  The tensors are per
 * thread: the ranks are threads of this process.  Ranks with TP
 * coordinate 0 write the program's buffers, the others private ones, so
 * replica d's row of output 1 ends up as its last such rank's:
 * (d * pp + pp - 1) * tp.
 */
static _Thread_local taprt_tensor mw, mo0;
static _Thread_local float gathered[12];
static void *seen_out[MAXN];
static int seen_tp_rank[MAXN], seen_tp_size[MAXN], seen_tp_first[MAXN], seen_stage[MAXN],
    seen_dp[MAXN], seen_ndp;

static int
prog_init(taprt_ctx *cx)
{
	int parts = cx->tp_group.size;
	mw = rt_tensor(TAPRT_F32, cx->weights, 1, DIMS(12 / parts));
	mo0 = rt_tensor(TAPRT_F32, gathered, 1, DIMS(12));
	taprt_weight w = {&mw, 0, 40, 1, {12}, 0, parts, 3};
	taprt_rank_program rp = {.nweights = 1, .weights = &w};
	seen_out[cx->rank] = cx->outputs[0];
	seen_tp_rank[cx->rank] = cx->tp_rank;
	seen_tp_size[cx->rank] = cx->tp_group.size;
	seen_tp_first[cx->rank] = cx->tp_group.ranks[0];
	seen_stage[cx->rank] = cx->stage;
	seen_dp[cx->rank] = cx->dp_rank;
	return taprt_load_weights(cx, &rp);
}

static int
prog_run(taprt_ctx *cx)
{
	taprt_attr at[3];
	Split s = {1, {0}, 0, 3, 1};
	split_attrs(at, &s, cx->tp_group.size);
	taprt_tensor *in[] = {&mw}, *out[] = {&mo0};
	taprt_node n = rt_node(in, 1, out, 1, at, 3);
	taprt_op_AllGather(cx, &n);
	int rows = 12 / seen_ndp;
	memcpy(cx->outputs[0], gathered + cx->dp_rank * rows, rows * sizeof(float));
	int all[MAXN];
	for (int i = 0; i < cx->nranks; i++)
		all[i] = i;
	taprt_group g = {cx->nranks, all};
	for (int k = 0; k < cx->nranks; k++) {
		if (k == cx->rank)
			((float *)cx->outputs[1])[0] = (float)(100 + cx->rank);
		if (cx->nranks > 1 && cx->be->barrier(cx->comm, &g) != 0)
			return taprt_fail(cx, "barrier failed");
	}
	return cx->error[0] ? -1 : 0;
}

static const taprt_rank_program prog_rank = {prog_init, prog_run, 0, 12 * sizeof(float), 0, NULL};

/* Run a program of nranks ranks (TP degree tp) in dir; taprt_main's status. */
static int
run_main(const char *dir, int nranks, int tp, int pp, int dp)
{
	static const taprt_io outs[] = {
		{"gathered", TAPRT_F32, 1, {12}},
		{"last", TAPRT_F32, 1, {8}},
	};
	static const char *const files[] = {"w.bin"};
	const taprt_rank_program *ranks[MAXN];
	for (int r = 0; r < MAXN; r++)
		ranks[r] = &prog_rank;
	taprt_program p = {.name = "tp", .nranks = nranks, .noutputs = 2, .outputs = outs,
		.nfiles = 1, .files = files, .model_dir = dir, .ranks = ranks, .tp = tp, .pp = pp,
		.dp = dp};
	char *argv[] = {"tp", "--inputs", (char *)dir, "--outputs", (char *)dir, NULL};
	memset(seen_out, 0, sizeof seen_out);
	seen_ndp = dp > 1 ? dp : 1;
	return taprt_main(5, argv, &p);
}

/* The layout's coordinates and groups, against the formula written out. */
static void
test_layout(void)
{
	static const struct {
		int tp, pp, dp;
	} cases[] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 2}, {4, 2, 1}, {2, 3, 2}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int tp = cases[c].tp, pp = cases[c].pp, dp = cases[c].dp, n = tp * pp * dp;
		taprt_program p = {.nranks = n, .tp = tp, .pp = pp, .dp = dp};
		taprt_layout l;
		CU_ASSERT_EQUAL_FATAL(taprt_layout_of(&p, &l), 0);
		CU_ASSERT(l.nranks == n && l.tp == tp && l.pp == pp && l.dp == dp);
		int r = 0, g[16];
		for (int d = 0; d < dp; d++)
			for (int s = 0; s < pp; s++)
				for (int q = 0; q < tp; q++, r++) {
					taprt_coords co = taprt_coords_of(&l, r);
					CU_ASSERT(co.dp_rank == d && co.stage == s && co.tp_rank == q);
					CU_ASSERT_EQUAL(taprt_rank_at(&l, d, s, q), r);
					CU_ASSERT_EQUAL(taprt_group_of(&l, r, TAPRT_GROUP_TP, g), tp);
					for (int k = 0; k < tp; k++)
						CU_ASSERT_EQUAL(g[k], r - q + k);
					CU_ASSERT_EQUAL(taprt_group_of(&l, r, TAPRT_GROUP_DP, g), dp);
					for (int k = 0; k < dp; k++)
						CU_ASSERT_EQUAL(g[k], (k * pp + s) * tp + q);
					CU_ASSERT_EQUAL(taprt_group_of(&l, r, TAPRT_GROUP_PIPE, g), pp);
					for (int k = 0; k < pp; k++)
						CU_ASSERT_EQUAL(g[k], (d * pp + k) * tp + q);
					CU_ASSERT_EQUAL(taprt_group_of(&l, r, TAPRT_GROUP_WORLD, g), n);
					CU_ASSERT(g[0] == 0 && g[n - 1] == n - 1);
				}
	}
	taprt_layout l;
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 3, .tp = 2}, &l), -1);
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 2, .tp = -1}, &l), -1);
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 1}, &l), 0);
	CU_ASSERT(l.tp == 1 && l.pp == 1 && l.dp == 1 && l.microbatches == 1);
	CU_ASSERT_EQUAL(taprt_rank_on(&l, 0), 0);
	/* the placement: a permutation of the devices, and its inverse */
	static const int placed[4] = {2, 0, 3, 1}, twice[4] = {0, 1, 1, 2}, past[4] = {0, 1, 2, 4};
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 4, .tp = 2, .pp = 2,
	    .devices = placed}, &l), 0);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(taprt_rank_on(&l, placed[r]), r);
	CU_ASSERT_EQUAL(taprt_rank_on(&l, 4), -1);
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 4, .tp = 4, .devices = twice}, &l), -1);
	CU_ASSERT_EQUAL(taprt_layout_of(&(taprt_program){.nranks = 4, .tp = 4, .devices = past}, &l), -1);
}

/* The backend table: threads always, nccl named but not built. */
static void
test_backend_table(void)
{
	char why[300] = "";
	CU_ASSERT_PTR_EQUAL(taprt_backend_find("threads", why, sizeof why), &taprt_threads_backend);
	CU_ASSERT_PTR_NULL(taprt_backend_find("nccl", why, sizeof why));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "backend 'nccl' is not built into this runtime"));
	CU_ASSERT_PTR_NULL(taprt_backend_find("carrier-pigeon", why, sizeof why));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "unknown backend 'carrier-pigeon'"));
	const taprt_backend *mpi = taprt_backend_find("mpi", why, sizeof why);
	CU_ASSERT(mpi ? strcmp(mpi->name, "mpi") == 0 && strstr(taprt_backends_built(), "mpi") :
	    strstr(why, "not built") && !strstr(taprt_backends_built(), "mpi"));
}

static void
test_main(void)
{
	WFile wf;
	wfile_open(&wf);
	wfile_put(&wf, TAPRT_F32, 12, 7);
	fclose(wf.f);
	static const struct {
		int nranks, tp, pp, dp;
	} cases[] = {{1, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 0, 0}, {4, 2, 2, 0}, {4, 4, 1, 1},
		{4, 2, 0, 2}, {4, 1, 4, 0}, {8, 2, 2, 2}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int n = cases[c].nranks, tp = cases[c].tp > 1 ? cases[c].tp : 1;
		int pp = cases[c].pp > 1 ? cases[c].pp : 1, dp = cases[c].dp > 1 ? cases[c].dp : 1;
		int rc = run_main(wf.dir, n, cases[c].tp, cases[c].pp, cases[c].dp);
		CU_ASSERT_EQUAL_FATAL(rc, 0);
		char path[160], err[300];
		taprt_pb o0, o1;
		snprintf(path, sizeof path, "%s/output_0.pb", wf.dir);
		CU_ASSERT_EQUAL_FATAL(taprt_pb_read(path, 1 << 24, &o0, err, sizeof err), 0);
		snprintf(path, sizeof path, "%s/output_1.pb", wf.dir);
		CU_ASSERT_EQUAL_FATAL(taprt_pb_read(path, 1 << 24, &o1, err, sizeof err), 0);
		for (int k = 0; k < 12; k++)
			CU_ASSERT_EQUAL(((float *)o0.data)[k], (float)val(7, 0, k));
		for (int d = 0; d < dp; d++)
			CU_ASSERT_EQUAL(((float *)o1.data)[d * 8 / dp], (float)(100 + (d * pp + pp - 1) * tp));
		free(o0.data);
		free(o1.data);
		for (int r = 0; r < n; r++) {
			CU_ASSERT_EQUAL(seen_tp_rank[r], r % tp);
			CU_ASSERT_EQUAL(seen_tp_size[r], tp);
			CU_ASSERT_EQUAL(seen_tp_first[r], r - r % tp);
			CU_ASSERT_EQUAL(seen_stage[r], r / tp % pp);
			CU_ASSERT_EQUAL(seen_dp[r], r / (tp * pp));
			/* the program's buffers (the replica's rows) for TP coordinate 0,
			 * private ones otherwise */
			for (int s = 0; s < r; s++)
				CU_ASSERT_EQUAL(seen_out[r] == seen_out[s], r % tp == 0 && s % tp == 0 &&
				    r / (tp * pp) == s / (tp * pp));
		}
	}
	/* ranks that are not dp x tp x pp, or outputs that do not split: a clean failure */
	fflush(stderr);
	int saved = dup(2), null = open("/dev/null", O_WRONLY);
	dup2(null, 2);
	int rc3 = run_main(wf.dir, 3, 2, 0, 0), rcneg = run_main(wf.dir, 2, -1, 0, 0);
	int rcout = run_main(wf.dir, 4, 2, 1, 3), rcsplit = run_main(wf.dir, 3, 1, 1, 3);
	char *nccl[] = {"tp", "--bench", "1", "--backend=nccl", NULL};
	char *pigeon[] = {"tp", "--bench", "1", "--backend=pigeon", NULL};
	taprt_program one = {.name = "tp", .nranks = 1};
	int rcnccl = taprt_main(4, nccl, &one), rcpigeon = taprt_main(4, pigeon, &one);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(null);
	CU_ASSERT_EQUAL(rc3, 1);
	CU_ASSERT_EQUAL(rcneg, 1);
	CU_ASSERT_EQUAL(rcout, 1);
	CU_ASSERT_EQUAL(rcsplit, 1); /* 8 rows of "last" do not split 3 ways */
	CU_ASSERT_EQUAL(rcnccl, 1);  /* known, not built */
	CU_ASSERT_EQUAL(rcpigeon, 2); /* unknown: usage */
	wfile_close(&wf);
}

void
suite_rt_tp(CU_pSuite s)
{
	ADD(s, test_split_ops);
	ADD(s, test_allreduce);
	ADD(s, test_chain);
	ADD(s, test_errors);
	ADD(s, test_mismatch);
	ADD(s, test_p2p);
	ADD(s, test_weights);
	ADD(s, test_layout);
	ADD(s, test_backend_table);
	ADD(s, test_main);
}
