/*
 * fuse.h - what the fusion passes share (fold_qdq.c, fold_bn.c, fuse_conv.c,
 * fuse_dw.c, fuse_se.c, fuse_matmul.c, fuse_norm.c, fuse_softmax.c).
 *
 * The fusion passes run after planning, on the per-rank graph tp-rewrite
 * and stage-assign made, before the schedule pass lists its nodes: they
 * only merge nodes of one stage, one If branch and the forward phase,
 * never across a collective (but for fuse-matmul's bias and residual of a
 * row-parallel product, fuse_matmul.c), and they keep every graph output.
 * A training graph (Graph.loss set) is left alone: its backward pass reads
 * the values a fusion would remove, and fold-bn would fold weights the
 * optimizer changes.  A fused node takes the place of the last node of its
 * pattern, whose inputs are all computed before it, so the order stays
 * topological without moving anything (the row-parallel product keeps its
 * MatMul's place, before its AllReduce: its residual must come earlier).
 */
#ifndef TAPC_FUSE_H
#define TAPC_FUSE_H

#include <string.h>

#include "passes/passes.h"

/* The one node reading t, if t is read by exactly one node (once) and is
 * not a graph output; else IR_NONE. */
static inline NodeId
fuse_sole_user(const Graph *g, TensorId t)
{
	if (t == IR_NONE || g->nusers[t] != 1 || ir_is_output(g, t))
		return IR_NONE;
	NodeId u = g->users[t][0];
	const Node *n = &g->nodes[u];
	int reads = 0;
	for (int i = 0; i < n->nin; i++)
		reads += n->in[i] == t;
	return n->dead || reads != 1 ? IR_NONE : u;
}

/* May nodes a and b become one node: same stage, same If branch, both live
 * forward computations? */
static inline bool
fuse_same_place(const Graph *g, NodeId a, NodeId b)
{
	const Node *x = &g->nodes[a], *y = &g->nodes[b];
	return !x->dead && !y->dead && x->stage == y->stage && x->region == y->region &&
	    x->branch == y->branch && x->phase == PHASE_FWD && y->phase == PHASE_FWD;
}

/* The f32 scalar (any shape of one element) a constant or weight holds. */
static inline bool
fuse_scalar(Graph *g, TensorId t, float *v)
{
	if (t == IR_NONE)
		return false;
	Tensor *tt = &g->tensors[t];
	if ((tt->kind != TK_CONST && tt->kind != TK_WEIGHT) || tt->dtype != DT_F32 ||
	    tt->rank < 0 || ir_numel(tt) != 1)
		return false;
	const float *p = ir_value(g, t);
	if (!p)
		return false;
	*v = p[0];
	return true;
}

/* The producer of t if it is a live node of op `op`, else IR_NONE. */
static inline NodeId
fuse_producer(const Graph *g, TensorId t, Op op)
{
	if (t == IR_NONE || g->tensors[t].kind != TK_VALUE)
		return IR_NONE;
	NodeId p = g->tensors[t].producer;
	return p != IR_NONE && !g->nodes[p].dead && g->nodes[p].op == op ? p : IR_NONE;
}

/* The producer of t if it is a live Conv or FusedConv, else IR_NONE. */
static inline NodeId
fuse_conv_producer(const Graph *g, TensorId t)
{
	NodeId c = fuse_producer(g, t, OP_FusedConv);
	return c != IR_NONE ? c : fuse_producer(g, t, OP_Conv);
}

static inline bool
fuse_same_type(const Tensor *a, const Tensor *b)
{
	return a->dtype == b->dtype && a->rank == b->rank &&
	    memcmp(a->dims, b->dims, sizeof a->dims[0] * (a->rank > 0 ? a->rank : 0)) == 0;
}

/* Give node n new inputs (copied into the arena). */
static inline void
fuse_set_inputs(Graph *g, NodeId n, int nin, const TensorId *in)
{
	TensorId *a = ir_alloc(&g->arena, sizeof *a * (nin > 0 ? nin : 1));
	memcpy(a, in, sizeof *a * nin);
	g->nodes[n].in = a;
	g->nodes[n].nin = nin;
}

/* Node `to` becomes op `op`: its attributes cleared, its name `name`
 * (the pattern's main node's, for diagnostics), its output kept. */
static inline void
fuse_become(Graph *g, NodeId to, Op op, const char *name)
{
	Node *n = &g->nodes[to];
	n->op = op;
	n->nattr = 0;
	n->attr = NULL;
	n->name = name;
}

/* Copy attribute a onto node n (the value arrays are shared: both live in
 * the graph's arena). */
static inline void
fuse_copy_attr(Graph *g, NodeId n, const Attr *a)
{
	Attr *d = ir_set_attr(g, n, a->name, a->type);
	const char *name = d->name;
	*d = *a;
	d->name = name;
}

/* Copy conv node c's activation (a FusedConv's `activation` and
 * `activation_params`) onto node `to` as (name, params). */
static inline void
fuse_copy_act(Graph *g, NodeId c, NodeId to, const char *name, const char *params)
{
	if (g->nodes[c].op != OP_FusedConv)
		return;
	const Attr *a = ir_attr(g, c, "activation");
	const Attr *p = ir_attr(g, c, "activation_params");
	if (!a || !*a->s)
		return;
	ir_set_attr(g, to, name, ATTR_STRING)->s = a->s;
	if (p) {
		Attr *d = ir_set_attr(g, to, params, ATTR_FLOATS);
		d->n = p->n;
		d->fs = p->fs;
	}
}

/* The fusion passes' driver: try(g, n) at every live node n of op a or
 * b, in order -- a fused node lands at its pattern's last node, later in
 * the order, where the loop meets it again -- re-indexing the users after
 * each fusion (try returned true) and compacting the graph at the end.
 * fuse_each leaves a training graph (Graph.loss set) alone; fuse_each_any
 * is fuse-train's, before autodiff. */
static inline bool
fuse_each_any(Graph *g, Op a, Op b, bool (*try)(Graph *g, NodeId n))
{
	ir_reindex(g);
	bool any = false;
	for (NodeId n = 0; n < g->nnodes; n++) {
		Op op = g->nodes[n].op;
		if (!g->nodes[n].dead && (op == a || op == b) && try(g, n)) {
			any = true;
			ir_reindex(g);
		}
	}
	if (any)
		ir_compact(g);
	return true;
}

static inline bool
fuse_each(Graph *g, Op a, Op b, bool (*try)(Graph *g, NodeId n))
{
	if (g->loss != IR_NONE) /* training: backward reads what a fusion would remove */
		return true;
	return fuse_each_any(g, a, b, try);
}

/* Weights a fusion computes at compile time (fold_bn.c): a weight's or
 * constant's bytes (whole; NULL if not readable), a parameter's f32 bytes
 * (whole, numel elements), a tensor name no tensor has (base + suffix,
 * then ".N"), a new inline f32 weight. */
const void *fuse_whole(Graph *g, TensorId t);
const float *fuse_param(Graph *g, TensorId t, int64_t numel);
const char *fuse_fresh_name(Graph *g, const char *base, const char *suffix);
TensorId fuse_new_weight(Graph *g, const char *name, int rank, const int64_t *dims, float *data);

/* The decomposed LayerNorm from its first ReduceMean mu as one
 * FusedLayerNorm (fuse_norm.c). */
bool fuse_layernorm(Graph *g, NodeId mu);

/* The erf GELU torch exports on y (Div by a constant, Erf, Add 1, Mul by
 * y, Mul 0.5), each node in node mm's place: its final Mul, the other four
 * in chain[0..3], the Div's divisor in *div (torch's f32 sqrt(2),
 * 1.41421354, or what a conversion rounded it to: f16's 1.4140625);
 * IR_NONE if y's readers are not that (fuse_matmul.c). */
NodeId fuse_gelu(Graph *g, NodeId mm, TensorId y, NodeId chain[4], float *div);

/* Node n as a fusable activation (fuse_conv.c): its name for the fused
 * kernels' `activation` and up to two `activation_params`. */
bool fuse_epilogue_activation(Graph *g, NodeId n, const char **name, float *p, int *np);

#endif
