/*
 * graph_exec.c - run an IR graph on libtaprt's kernels, for tests (see
 * graph_exec.h).
 *
 * Needs: a typed graph (shape inference done), libtaprt.  Each tensor is
 * a taprt_tensor with a calloc'd buffer; each node a taprt_node whose
 * attributes are the IR's converted one to one (tensor attributes point
 * at the executor's tensors).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/graph_exec.h"

struct GExec {
	Graph *g;
	taprt_tensor *t;                /* per tensor */
	taprt_node *n;                  /* per node */
	taprt_tensor ***ptrs;           /* per node: inputs then outputs */
	taprt_attr **attrs;             /* per node */
	char error[512];
};

static char why[512];

static const struct {
	const char *name;
	gx_kernel *fn;
} kernels[] = {
#define TAPRT_OP(name) {#name, taprt_op_##name},
#include "runtime/taprt_ops.def"
#undef TAPRT_OP
};

gx_kernel *
gx_kernel_of(Op op)
{
	for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
		if (!strcmp(kernels[i].name, ir_op_name(op)))
			return kernels[i].fn;
	return NULL;
}

const char *
gx_why(void)
{
	return why;
}

const char *
gx_error(GExec *x)
{
	return x->error;
}

taprt_tensor *
gx_tensor(GExec *x, TensorId t)
{
	return &x->t[t];
}

/* Bytes of a weight: its file range, read whole. */
static bool
read_weight(Graph *g, const Tensor *t, void *dst)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", g->dir, g->files[t->file]);
	FILE *f = fopen(path, "rb");
	bool ok = f && fseek(f, (long)t->offset, SEEK_SET) == 0 &&
	    fread(dst, 1, (size_t)t->length, f) == (size_t)t->length;
	if (f)
		fclose(f);
	return ok;
}

/* A tensor's initial bytes: inline data, a file's, or f32 data widened to
 * the f64 that gx_promote_f64 made the tensor. */
static bool
load(Graph *g, const Tensor *t, taprt_tensor *rt)
{
	int64_t n = rt->numel;
	const void *src = t->data == DATA_INLINE ? t->bytes : NULL;
	void *tmp = NULL;
	if (t->data == DATA_FILE) {
		if (!(tmp = malloc((size_t)t->length + 1)) || !read_weight(g, t, tmp)) {
			snprintf(why, sizeof why, "cannot read weight '%s'", t->name);
			free(tmp);
			return false;
		}
		src = tmp;
	}
	if (!src)
		return true;
	if (t->dtype == DT_F64 && t->length == n * 4)
		for (int64_t i = 0; i < n; i++)
			((double *)rt->data)[i] = ((const float *)src)[i];
	else if (t->length == n * ir_dtype_size(t->dtype))
		memcpy(rt->data, src, (size_t)t->length);
	else {
		snprintf(why, sizeof why, "tensor '%s' has %lld bytes for %lld elements", t->name,
		    (long long)t->length, (long long)n);
		free(tmp);
		return false;
	}
	free(tmp);
	return true;
}

static bool
make_tensors(GExec *x)
{
	Graph *g = x->g;
	for (TensorId id = 0; id < g->ntensors; id++) {
		const Tensor *t = &g->tensors[id];
		taprt_tensor *rt = &x->t[id];
		if (t->rank < 0)
			continue;       /* unused (an optional output's placeholder) */
		rt->dtype = t->dtype;
		rt->rank = t->rank;
		rt->numel = ir_numel(t);
		memcpy(rt->dims, t->dims, sizeof rt->dims[0] * t->rank);
		rt->data = calloc((size_t)(rt->numel ? rt->numel : 1), (size_t)ir_dtype_size(t->dtype) + 1);
		if (!rt->data || !load(g, t, rt))
			return false;
	}
	return true;
}

static taprt_attr
convert(GExec *x, const Attr *a)
{
	taprt_attr r = {.name = a->name, .n = a->n};
	switch (a->type) {
	case ATTR_FLOAT: r.type = TAPRT_ATTR_FLOAT; r.f = a->f; break;
	case ATTR_INT: r.type = TAPRT_ATTR_INT; r.i = a->i; break;
	case ATTR_STRING: r.type = TAPRT_ATTR_STRING; r.s = a->s; break;
	case ATTR_TENSOR: r.type = TAPRT_ATTR_TENSOR; r.t = &x->t[a->t]; break;
	case ATTR_FLOATS: r.type = TAPRT_ATTR_FLOATS; r.fs = a->fs; break;
	case ATTR_INTS: r.type = TAPRT_ATTR_INTS; r.is = a->is; break;
	case ATTR_STRINGS: r.type = TAPRT_ATTR_STRINGS; r.ss = a->ss; break;
	}
	return r;
}

static void
make_nodes(GExec *x)
{
	Graph *g = x->g;
	for (NodeId id = 0; id < g->nnodes; id++) {
		const Node *nd = &g->nodes[id];
		taprt_tensor **p = calloc((size_t)(nd->nin + nd->nout + 1), sizeof *p);
		taprt_attr *a = calloc((size_t)nd->nattr + 1, sizeof *a);
		if (!p || !a)
			die("out of memory");
		for (int i = 0; i < nd->nin; i++)
			p[i] = nd->in[i] != IR_NONE ? &x->t[nd->in[i]] : NULL;
		for (int i = 0; i < nd->nout; i++)
			p[nd->nin + i] = nd->out[i] != IR_NONE ? &x->t[nd->out[i]] : NULL;
		for (int k = 0; k < nd->nattr; k++)
			a[k] = convert(x, &nd->attr[k]);
		x->ptrs[id] = p;
		x->attrs[id] = a;
		x->n[id] = (taprt_node){.name = nd->name, .opset = (int)g->opset, .nin = nd->nin,
			.nout = nd->nout, .nattr = nd->nattr, .in = p, .out = p + nd->nin, .attr = a};
	}
}

GExec *
gx_new(Graph *g)
{
	GExec *x = calloc(1, sizeof *x);
	if (!x)
		die("out of memory");
	x->g = g;
	x->t = calloc((size_t)g->ntensors + 1, sizeof *x->t);
	x->n = calloc((size_t)g->nnodes + 1, sizeof *x->n);
	x->ptrs = calloc((size_t)g->nnodes + 1, sizeof *x->ptrs);
	x->attrs = calloc((size_t)g->nnodes + 1, sizeof *x->attrs);
	if (!x->t || !x->n || !x->ptrs || !x->attrs)
		die("out of memory");
	why[0] = 0;
	if (!make_tensors(x)) {
		gx_free(x);
		return NULL;
	}
	make_nodes(x);
	return x;
}

void
gx_free(GExec *x)
{
	if (!x)
		return;
	for (TensorId t = 0; t < x->g->ntensors; t++)
		free(x->t[t].data);
	for (NodeId n = 0; n < x->g->nnodes; n++) {
		free(x->ptrs[n]);
		free(x->attrs[n]);
	}
	free(x->t);
	free(x->n);
	free(x->ptrs);
	free(x->attrs);
	free(x);
}

double
gx_get(GExec *x, TensorId t, int64_t i)
{
	const taprt_tensor *r = &x->t[t];
	switch (r->dtype) {
	case TAPRT_F32: return ((const float *)r->data)[i];
	case TAPRT_F64: return ((const double *)r->data)[i];
	case TAPRT_I64: return (double)((const int64_t *)r->data)[i];
	case TAPRT_I32: return ((const int32_t *)r->data)[i];
	case TAPRT_BOOL: return ((const uint8_t *)r->data)[i];
	default: die("gx_get: dtype %d", r->dtype);
	}
}

void
gx_set(GExec *x, TensorId t, int64_t i, double v)
{
	taprt_tensor *r = &x->t[t];
	switch (r->dtype) {
	case TAPRT_F32: ((float *)r->data)[i] = (float)v; break;
	case TAPRT_F64: ((double *)r->data)[i] = v; break;
	case TAPRT_I64: ((int64_t *)r->data)[i] = (int64_t)v; break;
	case TAPRT_I32: ((int32_t *)r->data)[i] = (int32_t)v; break;
	case TAPRT_BOOL: ((uint8_t *)r->data)[i] = v != 0; break;
	default: die("gx_set: dtype %d", r->dtype);
	}
}

bool
gx_run(GExec *x, NodeId from, NodeId to)
{
	Graph *g = x->g;
	for (NodeId id = from; id < to; id++) {
		const Node *nd = &g->nodes[id];
		if (nd->dead)
			continue;
		gx_kernel *k = gx_kernel_of(nd->op);
		if (!k || nd->region != IR_NONE || nd->op == OP_If || ir_op_is_comm(nd->op)) {
			snprintf(x->error, sizeof x->error, "node '%s' (%s): not run by the test executor",
			    nd->name, ir_op_name(nd->op));
			return false;
		}
		taprt_ctx cx;
		memset(&cx, 0, sizeof cx);
		k(&cx, &x->n[id]);
		taprt_packs_free(&cx);
		if (cx.error[0]) {
			snprintf(x->error, sizeof x->error, "%s", cx.error);
			return false;
		}
	}
	return true;
}

void
gx_promote_f64(Graph *g)
{
	for (TensorId id = 0; id < g->ntensors; id++) {
		Tensor *t = &g->tensors[id];
		if (t->dtype != DT_F32)
			continue;
		t->dtype = DT_F64;
		t->value = NULL;
		if (t->data != DATA_INLINE || t->rank < 0)
			continue;
		int64_t n = ir_numel(t);
		double *d = ir_alloc(&g->arena, sizeof *d * (n + 1));
		for (int64_t i = 0; i < n; i++)
			d[i] = ((const float *)t->bytes)[i];
		t->bytes = d;
		t->length = n * 8;
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Attr *a = ir_attr(g, n, "to");
		if (g->nodes[n].op == OP_Cast && a && a->i == DT_F32)
			ir_set_attr(g, n, "to", ATTR_INT)->i = DT_F64;
	}
}
