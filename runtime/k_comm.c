/*
 * k_comm.c - the tensor-parallel kernels tapc inserts: AllReduce,
 * AllGather and ReduceScatter over the rank's TP group, and Shard, which
 * takes this rank's slice of a full tensor without communicating; and
 * taprt_send/taprt_recv, which move a tensor between pipeline stages.
 *
 * Needs: cx->tp_rank and cx->tp_group (taprt_main sets them), and cx->be
 * and cx->comm when the group has more than one rank (a group of one only
 * copies).  Output dims, dtypes and buffers are set by tapc; the kernels
 * check them against the inputs and the attributes, and fail with the
 * shapes in the message rather than read or write out of bounds.
 *
 * Layout.  The split axis of a full tensor, of length blocks*parts*chunk,
 * is viewed as [blocks, parts, chunk]; the local tensor of the rank with
 * TP coordinate q is [:, q, :], blocks*chunk long: the same map as the
 * weight loader's (taprt_weight in taprt.h), so blocks = 3 keeps a fused
 * [Q|K|V] projection's thirds apart.  With the dims before the axis folded
 * into `outer`, the full tensor is [outer*blocks, parts, run] and the local
 * one [outer*blocks, run], a run being chunk times the dims after the axis
 * in bytes.  The backends' allgather and reduce_scatter work on rank-major
 * buffers [parts, outer*blocks, run], so both permute through a per-thread
 * scratch buffer, except when outer*blocks is 1 and the layouts coincide.
 *
 * Reductions sum, for f32, f64, i32 and i64 (what the backends reduce);
 * AllGather and Shard only move bytes, so they take any dtype.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

/* memmove that tolerates empty buffers and in-place nodes */
static inline void
move(void *dst, const void *src, int64_t bytes)
{
	if (bytes > 0 && dst != src)
		memmove(dst, src, (size_t)bytes);
}

/* ------------------------------------------------------------- checks */

static void
shape_str(char *buf, size_t len, const taprt_tensor *t)
{
	int k = snprintf(buf, len, "%s[", taprt_dtype_name(t->dtype));
	for (int i = 0; i < t->rank && k < (int)len; i++)
		k += snprintf(buf + k, len - k, i ? ",%lld" : "%lld", (long long)t->dims[i]);
	if (k < (int)len)
		snprintf(buf + k, len - k, "]");
}

/* The node's input and output, present, of one dtype the op supports. */
static bool
io(taprt_ctx *cx, const taprt_node *n, const char *op, bool reduce,
    const taprt_tensor **x, taprt_tensor **y)
{
	*x = taprt_input(n, 0);
	*y = taprt_output(n, 0);
	if (!*x || !*y) {
		taprt_fail(cx, "node '%s' (%s): needs an input and an output", n->name, op);
		return false;
	}
	if ((*x)->dtype != (*y)->dtype || (*x)->rank != (*y)->rank) {
		char a[160], b[160];
		shape_str(a, sizeof a, *x);
		shape_str(b, sizeof b, *y);
		taprt_fail(cx, "node '%s' (%s): input %s and output %s differ in dtype or rank",
		    n->name, op, a, b);
		return false;
	}
	int d = (*x)->dtype;
	if (taprt_dtype_size(d) == 0 || (reduce && d != TAPRT_F32 && d != TAPRT_F64 &&
	    d != TAPRT_I32 && d != TAPRT_I64)) {
		taprt_bad_dtype(cx, n, op, d);
		return false;
	}
	return true;
}

/* The TP group is usable: this rank is member tp_rank, and a group of
 * more than one has a backend to talk through (comm: it is needed). */
static bool
group_ok(taprt_ctx *cx, const taprt_node *n, const char *op, bool comm)
{
	const taprt_group *g = &cx->tp_group;
	if (g->size < 1 || !g->ranks || cx->tp_rank < 0 || cx->tp_rank >= g->size ||
	    g->ranks[cx->tp_rank] != cx->rank) {
		taprt_fail(cx, "node '%s' (%s): rank %d is not member %d of its TP group (of %d)",
		    n->name, op, cx->rank, cx->tp_rank, g->size);
		return false;
	}
	if (comm && g->size > 1 && (!cx->be || !cx->comm)) {
		taprt_fail(cx, "node '%s' (%s): a TP group of %d ranks but no communication backend",
		    n->name, op, g->size);
		return false;
	}
	return true;
}

static void
comm_failed(taprt_ctx *cx, const taprt_node *n, const char *op, const char *call, int rc)
{
	taprt_fail(cx, "node '%s' (%s): %s %s over a TP group of %d failed: %s (%d)", n->name, op,
	    cx->be->name, call, cx->tp_group.size, cx->be->strerror(rc), rc);
}

/* A full tensor's axis as [rows = outer*blocks, parts, run bytes]. */
typedef struct {
	int64_t rows, parts, run;
} Split;

/*
 * Read axis/blocks/parts and check that local is full's [:, q, :] along
 * the axis; the TP group must be checked first (parts is its size).
 */
static bool
split_of(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *full,
    const taprt_tensor *local, Split *sp)
{
	int64_t ax = taprt_attr_int(n, "axis", 0);
	int64_t blocks = taprt_attr_int(n, "blocks", 1);
	int64_t parts = taprt_attr_int(n, "parts", -1);
	if (ax < -full->rank || ax >= full->rank) {
		taprt_fail(cx, "node '%s' (%s): axis %lld out of range for rank %d", n->name, op,
		    (long long)ax, full->rank);
		return false;
	}
	int axis = taprt_axis(ax, full->rank);
	if (parts != cx->tp_group.size || blocks < 1) {
		taprt_fail(cx, "node '%s' (%s): parts=%lld blocks=%lld, expected parts equal to the TP degree %d and blocks >= 1",
		    n->name, op, (long long)parts, (long long)blocks, cx->tp_group.size);
		return false;
	}
	int64_t d = full->dims[axis], chunk = d / (blocks * parts);
	bool ok = d % (blocks * parts) == 0 && local->dims[axis] == blocks * chunk;
	for (int a = 0; ok && a < full->rank; a++)
		ok = a == axis || local->dims[a] == full->dims[a];
	if (!ok) {
		char f[160], l[160];
		shape_str(f, sizeof f, full);
		shape_str(l, sizeof l, local);
		taprt_fail(cx, "node '%s' (%s): full %s and local %s do not match axis %d split into %lld blocks of %lld parts",
		    n->name, op, f, l, axis, (long long)blocks, (long long)parts);
		return false;
	}
	int64_t outer = 1, run = chunk * taprt_dtype_size(full->dtype);
	for (int a = 0; a < axis; a++)
		outer *= full->dims[a];
	for (int a = axis + 1; a < full->rank; a++)
		run *= full->dims[a];
	*sp = (Split){outer * blocks, parts, run};
	return true;
}

/* ------------------------------------------------------------ kernels */

/* The group a collective runs over: the TP group, or with group="dp" the
 * data-parallel group (the gradient all-reduce). */
static const taprt_group *
group_of(taprt_ctx *cx, const taprt_node *n)
{
	const char *g = taprt_attr_str(n, "group", "tp");
	return strcmp(g, "dp") == 0 ? &cx->dp_group : &cx->tp_group;
}

/* Scale a reduced buffer by 1/k: the mean over the group. */
static void
scale(void *buf, int64_t count, int dtype, int k)
{
	if (dtype == TAPRT_F32) {
		float *p = buf, s = 1.0f / (float)k;
		for (int64_t i = 0; i < count; i++)
			p[i] *= s;
	} else if (dtype == TAPRT_F64) {
		double *p = buf, s = 1.0 / k;
		for (int64_t i = 0; i < count; i++)
			p[i] *= s;
	}
}

/*
 * Started all-reduces of this rank, in start order: each a request of the
 * backend over one tensor, in place, and the divisor of its mean (1: a sum).
 */
typedef struct {
	taprt_request *req;
	void *buf;
	int64_t count;
	int dtype, divisor;
} Pending;

struct taprt_pending {
	Pending *p;
	int n, cap;
};

static int
pending_add(taprt_ctx *cx, Pending e)
{
	struct taprt_pending *q = cx->pending;
	if (!q && !(q = cx->pending = calloc(1, sizeof *q)))
		return -1;
	if (q->n == q->cap) {
		int cap = q->cap ? 2 * q->cap : 16;
		Pending *p = realloc(q->p, sizeof *p * cap);
		if (!p)
			return -1;
		q->p = p;
		q->cap = cap;
	}
	q->p[q->n++] = e;
	return 0;
}

int
taprt_comm_progress(taprt_ctx *cx)
{
	struct taprt_pending *q = cx->pending;
	for (int i = 0; q && i < q->n; i++) {
		int done, rc = cx->be->test(cx->comm, q->p[i].req, &done);
		if (rc != 0)
			return taprt_fail(cx, "an asynchronous allreduce failed: %s", cx->be->strerror(rc));
	}
	return 0;
}

int
taprt_comm_wait(taprt_ctx *cx)
{
	struct taprt_pending *q = cx->pending;
	int bad = 0;
	for (int i = 0; q && i < q->n; i++) {
		Pending *e = &q->p[i];
		int rc = cx->be->wait(cx->comm, e->req);
		if (rc != 0 && !bad)
			bad = rc;
		if (rc == 0 && e->divisor > 1)
			scale(e->buf, e->count, e->dtype, e->divisor);
	}
	if (q) {
		free(q->p);
		free(q);
		cx->pending = NULL;
	}
	if (bad)
		return taprt_fail(cx, "an asynchronous allreduce failed: %s", cx->be->strerror(bad));
	return 0;
}

/* Start the bucket's all-reduces, one per tensor, on the outputs (the
 * inputs may still be read by the rest of backward: a gradient that is
 * also an activation's); the optimizer waits. */
static void
start_async(taprt_ctx *cx, const taprt_node *n, const taprt_group *grp, bool mean)
{
	for (int i = 0; i < n->nin; i++) {
		taprt_tensor *y = n->out[i];
		if (y->data != n->in[i]->data)
			move(y->data, n->in[i]->data, y->numel * taprt_dtype_size(y->dtype));
		if (y->numel == 0)
			continue;
		taprt_request *req;
		int rc = cx->be->iallreduce(cx->comm, grp, y->data, y->numel, y->dtype, TAPRT_SUM,
		    &req);
		if (rc != 0) {
			taprt_fail(cx, "node '%s' (AllReduce): %s iallreduce over a group of %d failed: %s "
			    "(%d)", n->name, cx->be->name, grp->size, cx->be->strerror(rc), rc);
			return;
		}
		if (pending_add(cx, (Pending){req, y->data, y->numel, y->dtype,
		    mean ? grp->size : 1}) != 0) {
			cx->be->wait(cx->comm, req);
			taprt_fail(cx, "node '%s' (AllReduce): out of memory", n->name);
			return;
		}
	}
}

/* The node's tensors and group as AllReduce needs them: false (cx->error
 * set) if not; else the element count of all tensors and their dtype. */
static bool
allreduce_ok(taprt_ctx *cx, const taprt_node *n, const taprt_group *grp, int64_t *ptotal,
    int *pdtype)
{
	if (n->nin != n->nout || n->nin < 1) {
		taprt_fail(cx, "node '%s' (AllReduce): %d inputs and %d outputs, expected as many of each",
		    n->name, n->nin, n->nout);
		return false;
	}
	int64_t total = 0;
	int dtype = -1;
	for (int i = 0; i < n->nin; i++) {
		const taprt_tensor *x = n->in[i];
		taprt_tensor *y = n->out[i];
		if (!x || !y || x->dtype != y->dtype) {
			taprt_fail(cx, "node '%s' (AllReduce): input and output %d differ", n->name, i);
			return false;
		}
		if (x->numel != y->numel) {
			char a[160], b[160];
			shape_str(a, sizeof a, x);
			shape_str(b, sizeof b, y);
			taprt_fail(cx, "node '%s' (AllReduce): output %d %s is not the input's shape %s",
			    n->name, i, b, a);
			return false;
		}
		if (dtype >= 0 && x->dtype != dtype) {
			taprt_fail(cx, "node '%s' (AllReduce): a bucket of mixed dtypes", n->name);
			return false;
		}
		dtype = x->dtype;
		if (dtype != TAPRT_F32 && dtype != TAPRT_F64 && dtype != TAPRT_I32 && dtype != TAPRT_I64) {
			taprt_bad_dtype(cx, n, "AllReduce", dtype);
			return false;
		}
		total += y->numel;
	}
	if (grp == &cx->tp_group && !group_ok(cx, n, "AllReduce", true))
		return false;
	if (grp->size > 1 && (!cx->be || !cx->comm)) {
		taprt_fail(cx, "node '%s' (AllReduce): a group of %d ranks but no communication backend",
		    n->name, grp->size);
		return false;
	}
	*ptotal = total;
	*pdtype = dtype;
	return true;
}

/*
 * AllReduce(x1..xn) -> (y1..yn): each y the sum (mean=1: the mean) of its x
 * over the group.  Several tensors are one bucket: packed into a scratch
 * buffer, reduced by one call, unpacked, as DDP's gradient buckets.  With
 * async=1 and a backend that starts collectives (iallreduce), each tensor's
 * all-reduce is started in place and completed by taprt_comm_wait.
 */
void
taprt_op_AllReduce(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_group *grp = group_of(cx, n);
	bool mean = taprt_attr_int(n, "mean", 0) != 0;
	int64_t total;
	int dtype;
	if (!allreduce_ok(cx, n, grp, &total, &dtype))
		return;
	if (grp->size > 1 && total > 0 && taprt_attr_int(n, "async", 0) && cx->be->iallreduce) {
		start_async(cx, n, grp, mean);
		return;
	}
	int es = taprt_dtype_size(dtype);
	for (int i = 0; i < n->nin; i++)
		move(n->out[i]->data, n->in[i]->data, n->out[i]->numel * es);
	if (grp->size == 1 || total == 0)
		return;
	void *buf = n->nout == 1 ? n->out[0]->data : taprt_scratch(total * es);
	if (!buf) {
		taprt_fail(cx, "node '%s' (AllReduce): no memory for a bucket of %lld bytes", n->name,
		    (long long)(total * es));
		return;
	}
	int64_t at = 0;
	for (int i = 0; n->nout > 1 && i < n->nout; i++) {
		memcpy((char *)buf + at, n->out[i]->data, n->out[i]->numel * es);
		at += n->out[i]->numel * es;
	}
	int rc = cx->be->allreduce(cx->comm, grp, buf, total, dtype, TAPRT_SUM);
	if (rc != 0) {
		taprt_fail(cx, "node '%s' (AllReduce): %s allreduce over a %s group of %d failed: %s (%d)",
		    n->name, cx->be->name, grp == &cx->dp_group ? "DP" : "TP", grp->size,
		    cx->be->strerror(rc), rc);
		return;
	}
	if (mean)
		scale(buf, total, dtype, grp->size);
	at = 0;
	for (int i = 0; n->nout > 1 && i < n->nout; i++) {
		memcpy(n->out[i]->data, (char *)buf + at, n->out[i]->numel * es);
		at += n->out[i]->numel * es;
	}
}

/*
 * Sub-pipelined TMP's all-reduce of one tensor, in two calls: start copies
 * the input to the output and starts the backend's all-reduce on it in
 * place; wait completes it.  Whatever cannot be started (a bucket, a mean,
 * a group of one, a backend without iallreduce) runs whole in start and
 * leaves *req NULL, so wait has nothing to do.
 */
int
taprt_allreduce_start(taprt_ctx *cx, const taprt_node *n, taprt_request **req)
{
	const taprt_group *grp = group_of(cx, n);
	int64_t total;
	int dtype;
	*req = NULL;
	if (!allreduce_ok(cx, n, grp, &total, &dtype))
		return -1;
	if (n->nin != 1 || grp->size < 2 || total == 0 || taprt_attr_int(n, "mean", 0) ||
	    taprt_attr_int(n, "async", 0) || !cx->be->iallreduce) {
		taprt_op_AllReduce(cx, n);
		return cx->error[0] ? -1 : 0;
	}
	taprt_tensor *y = n->out[0];
	move(y->data, n->in[0]->data, total * taprt_dtype_size(dtype));
	int rc = cx->be->iallreduce(cx->comm, grp, y->data, total, dtype, TAPRT_SUM, req);
	if (rc != 0) {
		*req = NULL;
		return taprt_fail(cx, "node '%s' (AllReduce): %s iallreduce over a TP group of %d "
		    "failed: %s (%d)", n->name, cx->be->name, grp->size, cx->be->strerror(rc), rc);
	}
	return 0;
}

int
taprt_allreduce_wait(taprt_ctx *cx, taprt_request **req)
{
	if (!*req)
		return 0;
	int rc = cx->be->wait(cx->comm, *req);
	*req = NULL;
	if (rc != 0)
		return taprt_fail(cx, "a started TP all-reduce failed: %s (%d)", cx->be->strerror(rc),
		    rc);
	return 0;
}

void
taprt_op_AllGather(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x;
	taprt_tensor *y;
	Split sp;
	if (!io(cx, n, "AllGather", false, &x, &y) || !group_ok(cx, n, "AllGather", true) ||
	    !split_of(cx, n, "AllGather", y, x, &sp))
		return;
	int64_t local = sp.rows * sp.run;
	if (sp.parts == 1 || local == 0) {
		move(y->data, x->data, local);
		return;
	}
	/* bytes, whatever the dtype: a backend need not know f16 to move it */
	if (sp.rows == 1) {
		int rc = cx->be->allgather(cx->comm, &cx->tp_group, x->data, y->data, local,
		    TAPRT_U8);
		if (rc != 0)
			comm_failed(cx, n, "AllGather", "allgather", rc);
		return;
	}
	char *buf = taprt_scratch(sp.parts * local);
	if (!buf) {
		taprt_fail(cx, "node '%s' (AllGather): out of memory for %lld bytes of scratch",
		    n->name, (long long)(sp.parts * local));
		return;
	}
	int rc = cx->be->allgather(cx->comm, &cx->tp_group, x->data, buf, local, TAPRT_U8);
	if (rc != 0) {
		comm_failed(cx, n, "AllGather", "allgather", rc);
		return;
	}
	char *d = y->data;
	for (int64_t q = 0; q < sp.parts; q++)
		for (int64_t r = 0; r < sp.rows; r++)
			memcpy(d + (r * sp.parts + q) * sp.run, buf + q * local + r * sp.run,
			    (size_t)sp.run);
}

void
taprt_op_ReduceScatter(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x;
	taprt_tensor *y;
	Split sp;
	if (!io(cx, n, "ReduceScatter", true, &x, &y) ||
	    !group_ok(cx, n, "ReduceScatter", true) || !split_of(cx, n, "ReduceScatter", x, y, &sp))
		return;
	int64_t local = sp.rows * sp.run;
	if (sp.parts == 1 || local == 0) {
		move(y->data, x->data, local);
		return;
	}
	const char *send = x->data;
	if (sp.rows > 1) {
		/* rank-major: rank q's share of every row, then rank q+1's */
		char *buf = taprt_scratch(sp.parts * local);
		if (!buf) {
			taprt_fail(cx, "node '%s' (ReduceScatter): out of memory for %lld bytes of scratch",
			    n->name, (long long)(sp.parts * local));
			return;
		}
		for (int64_t q = 0; q < sp.parts; q++)
			for (int64_t r = 0; r < sp.rows; r++)
				memcpy(buf + q * local + r * sp.run, send + (r * sp.parts + q) * sp.run,
				    (size_t)sp.run);
		send = buf;
	}
	int rc = cx->be->reduce_scatter(cx->comm, &cx->tp_group, send, y->data, y->numel,
	    y->dtype, TAPRT_SUM);
	if (rc != 0)
		comm_failed(cx, n, "ReduceScatter", "reduce_scatter", rc);
}

void
taprt_op_Shard(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x;
	taprt_tensor *y;
	Split sp;
	if (!io(cx, n, "Shard", false, &x, &y) || !group_ok(cx, n, "Shard", false) ||
	    !split_of(cx, n, "Shard", x, y, &sp))
		return;
	/* a move: in place, run r's destination never reaches a later source */
	const char *s = x->data;
	char *d = y->data;
	for (int64_t r = 0; r < sp.rows; r++)
		move(d + r * sp.run, s + (r * sp.parts + cx->tp_rank) * sp.run, sp.run);
}

/* -------------------------------------------------- pipeline transfers */

static int
p2p(taprt_ctx *cx, taprt_tensor *t, int peer, int tag, bool send)
{
	int64_t bytes = t->numel * taprt_dtype_size(t->dtype);
	if (peer < 0 || peer >= cx->nranks || peer == cx->rank || !cx->comm)
		return taprt_fail(cx, "%s of tensor %d: no rank %d to %s (rank %d of %d)",
		    send ? "send" : "recv", tag, peer, send ? "send to" : "receive from", cx->rank,
		    cx->nranks);
	int rc = send ? cx->be->send(cx->comm, t->data, bytes, peer, tag) :
	    cx->be->recv(cx->comm, t->data, bytes, peer, tag);
	if (rc != 0)
		return taprt_fail(cx, "%s of tensor %d (%lld bytes) %s rank %d failed: %s (%d)",
		    send ? "send" : "recv", tag, (long long)bytes, send ? "to" : "from", peer,
		    cx->be->strerror(rc), rc);
	return 0;
}

int
taprt_send(taprt_ctx *cx, const taprt_tensor *t, int peer, int tag)
{
	return p2p(cx, (taprt_tensor *)t, peer, tag, true);
}

int
taprt_recv(taprt_ctx *cx, taprt_tensor *t, int peer, int tag)
{
	return p2p(cx, t, peer, tag, false);
}
