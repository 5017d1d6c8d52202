/*
 * tp_rewrite.c - turn the planned graph into the graph every rank of the
 * tensor-parallel group runs (TAP §IV-G).
 *
 * Needs: tp-plan (Node.tp_axis on the anchors), or an IR file that carries
 * its annotations.  Routes the plan once more with the same patterns
 * (tp_layout.c) and materializes it:
 *   - a weight a pattern splits becomes a slice (Tensor.slice_*): its dims
 *     are the rank's, and the runtime reads only that slice from the model
 *     file; a weight two consumers split differently (a tied embedding and
 *     output projection) gets one slice per layout;
 *   - every Communicate step becomes an explicit op: AllReduce (P->R),
 *     AllGather (S->R), ReduceScatter (P->S) or Shard (R->S, a local slice);
 *   - shapes become the rank's: Reshape targets (a head count shrinks),
 *     Split sizes, and every tensor's dims;
 *   - a Gemm whose contraction is split and that has a bias C computes the
 *     product, all-reduces it, then adds C once.
 * Shape inference is rerun on the result and must agree with the plan's
 * local shapes; a disagreement is a compiler bug and aborts.
 *
 * Guarantees: a valid graph, in topological order, whose outputs are
 * replicated; collectives carry the GraphNode of the op they serve.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/tp.h"

typedef struct {
	TensorId orig;                  /* the logical tensor */
	Layout l;
	TensorId id;                    /* its version in layout l */
} Version;

typedef struct {
	Graph *g;
	TpState *s;
	int64_t (*gdims)[IR_MAX_RANK];  /* global shapes, by original tensor */
	Version *v;
	int nv, capv;
	int counter;
	const Node *at;                 /* the node being rewritten: its collectives
					 * join its subgraph, stage and If branch */
} Rw;

static void
place_like(Graph *g, NodeId n, const Node *at)
{
	Node *x = &g->nodes[n];
	x->group = at->group;
	x->subgraph = at->subgraph;
	x->stage = at->stage;
	x->region = at->region;
	x->branch = at->branch;
}

static void
local_dims(Rw *w, TensorId orig, Layout l, int64_t *d)
{
	memcpy(d, w->gdims[orig], sizeof(int64_t) * IR_MAX_RANK);
	if (l.kind == L_S)
		d[l.axis] /= w->s->tp;
}

static TensorId
find_version(Rw *w, TensorId orig, Layout l)
{
	for (int i = 0; i < w->nv; i++)
		if (w->v[i].orig == orig && tp_same(w->v[i].l, l))
			return w->v[i].id;
	return IR_NONE;
}

static void
add_version(Rw *w, TensorId orig, Layout l, TensorId id)
{
	if (w->nv == w->capv) {
		w->capv = w->capv ? 2 * w->capv : 64;
		w->v = realloc(w->v, sizeof *w->v * w->capv);
		if (!w->v)
			die("out of memory");
	}
	w->v[w->nv++] = (Version){orig, l, id};
}

static TensorId
new_value(Rw *w, TensorId orig, Layout l, const char *what)
{
	Graph *g = w->g;
	char name[512];
	snprintf(name, sizeof name, "%s:%s%d", g->tensors[orig].name, what, w->counter++);
	TensorId t = ir_add_tensor(g, name, TK_VALUE, g->tensors[orig].dtype);
	g->tensors[t].tp_kind = (int8_t)l.kind; /* L_R, L_S, L_P are TPK_R, TPK_S, TPK_P */
	int64_t d[IR_MAX_RANK];
	local_dims(w, orig, l, d);
	ir_set_shape(&g->tensors[t], g->tensors[orig].rank, d);
	return t;
}

/* A collective node from src to a new tensor in layout l. */
static TensorId
collective(Rw *w, Op op, TensorId src, TensorId orig, Layout attr, Layout l, int group,
    const char *at)
{
	Graph *g = w->g;
	TensorId t = new_value(w, orig, l, ir_op_name(op));
	char name[512];
	snprintf(name, sizeof name, "%s/tp.%s", at, ir_op_name(op));
	NodeId n = ir_add_node(g, op, name, 1, &src, 1, &t);
	place_like(g, n, w->at);
	g->nodes[n].group = group;
	if (op != OP_AllReduce) {
		ir_set_attr(g, n, "axis", ATTR_INT)->i = attr.axis;
		ir_set_attr(g, n, "blocks", ATTR_INT)->i = attr.blocks;
		ir_set_attr(g, n, "parts", ATTR_INT)->i = w->s->tp;
	}
	return t;
}

/* The version of orig in layout `to`, converting src (in layout `from`). */
static TensorId
convert(Rw *w, TensorId orig, TensorId src, Layout from, Layout to, int group, const char *at)
{
	TensorId have = find_version(w, orig, to);
	if (have != IR_NONE)
		return have;
	const Layout R = {L_R, 0, 1};
	TensorId t;
	if (from.kind == L_P && to.kind == L_R)
		t = collective(w, OP_AllReduce, src, orig, to, to, group, at);
	else if (from.kind == L_P)
		t = collective(w, OP_ReduceScatter, src, orig, to, to, group, at);
	else if (from.kind == L_R)
		t = collective(w, OP_Shard, src, orig, to, to, group, at);
	else if (to.kind == L_R)
		t = collective(w, OP_AllGather, src, orig, from, to, group, at);
	else
		t = collective(w, OP_Shard, convert(w, orig, src, from, R, group, at), orig, to, to,
		    group, at);
	add_version(w, orig, to, t);
	return t;
}

/* The weight orig sliced as l: in place when every use slices it so. */
static TensorId
slice_weight(Rw *w, TensorId orig, Layout l, bool shared)
{
	Graph *g = w->g;
	TensorId have = find_version(w, orig, l);
	if (have != IR_NONE)
		return have;
	TensorId t = orig;
	if (shared) {
		char name[512];
		snprintf(name, sizeof name, "%s/S%d/%d", g->tensors[orig].name, l.axis, l.blocks);
		t = ir_add_tensor(g, name, TK_WEIGHT, g->tensors[orig].dtype);
		Tensor *x = &g->tensors[t];
		const char *nm = x->name;
		*x = g->tensors[orig];
		x->name = nm;
		x->value = NULL;
	}
	Tensor *x = &g->tensors[t];
	int64_t d[IR_MAX_RANK];
	local_dims(w, orig, l, d);
	memcpy(x->dims, d, sizeof d);
	x->slice_axis = l.axis;
	x->slice_parts = w->s->tp;
	x->slice_blocks = l.blocks;
	x->tp_kind = TPK_S;
	x->value = NULL;
	add_version(w, orig, l, t);
	return t;
}

static TensorId
int_const(Graph *g, const int64_t *v, int n)
{
	TensorId t = ir_add_tensor(g, NULL, TK_CONST, DT_I64);
	int64_t d = n;
	ir_set_shape(&g->tensors[t], 1, &d);
	Tensor *x = &g->tensors[t];
	x->data = DATA_INLINE;
	x->length = n * 8;
	x->bytes = ir_alloc(&g->arena, n * 8 + 1);
	memcpy(x->bytes, v, n * 8);
	return t;
}

static NodeId
push(Graph *g, const Node *nd)
{
	NodeId id = ir_add_node(g, nd->op, NULL, 0, NULL, 0, NULL);
	Node *n = &g->nodes[id];
	*n = *nd;
	for (int i = 0; i < n->nout; i++)
		if (n->out[i] != IR_NONE)
			g->tensors[n->out[i]].producer = id;
	return id;
}

/* Reshape and Split carry shapes in their inputs: make them the rank's. */
static void
local_shape_inputs(Rw *w, Node *nd)
{
	Graph *g = w->g;
	if (nd->op == OP_Reshape && nd->nin > 1) {
		Tensor *y = &g->tensors[nd->out[0]];
		const int64_t *v = ir_value(g, nd->in[1]);
		if (!v || ir_numel(&g->tensors[nd->in[1]]) != y->rank ||
		    memcmp(v, y->dims, sizeof(int64_t) * y->rank) != 0)
			nd->in[1] = int_const(g, y->dims, y->rank);
	} else if (nd->op == OP_Split) {
		Tensor *x = &g->tensors[nd->out[0]];
		int64_t axis = 0;
		for (int i = 0; i < nd->nattr; i++)
			if (strcmp(nd->attr[i].name, "axis") == 0)
				axis = nd->attr[i].i;
		if (axis < 0)
			axis += x->rank;
		int64_t *sz = ir_alloc(&g->arena, sizeof *sz * (nd->nout + 1));
		for (int i = 0; i < nd->nout; i++)
			sz[i] = g->tensors[nd->out[i]].dims[axis];
		if (nd->nin > 1 && nd->in[1] != IR_NONE) {
			const int64_t *v = ir_value(g, nd->in[1]);
			if (!v || memcmp(v, sz, sizeof *sz * nd->nout) != 0)
				nd->in[1] = int_const(g, sz, nd->nout);
		}
		for (int i = 0; i < nd->nattr; i++)
			if (strcmp(nd->attr[i].name, "split") == 0) {
				nd->attr[i].is = sz;
				nd->attr[i].n = nd->nout;
			}
	}
}

static void
regroup(Graph *g)
{
	for (int i = 0; i < g->ngroups; i++)
		g->groups[i].nnodes = 0;
	for (NodeId n = 0; n < g->nnodes; n++)
		if (g->nodes[n].group >= 0 && g->nodes[n].group < g->ngroups)
			g->groups[g->nodes[n].group].nnodes++;
	for (int i = 0; i < g->ngroups; i++) {
		g->groups[i].nodes = ir_alloc(&g->arena, sizeof(NodeId) * (g->groups[i].nnodes + 1));
		g->groups[i].nnodes = 0;
	}
	for (NodeId n = 0; n < g->nnodes; n++) {
		int gr = g->nodes[n].group;
		if (gr >= 0 && gr < g->ngroups)
			g->groups[gr].nodes[g->groups[gr].nnodes++] = n;
	}
}

bool
pass_tp_rewrite(Graph *g, PassCtx *cx)
{
	(void)cx;
	int tp = g->mesh.tp;
	if (tp <= 1 || tp_is_local(g))
		return true;
	ir_reindex(g);
	TpState st, *s = &st;
	tp_state_init(s, g, tp, &g->cost);
	int *greg;
	tp_regions(s, &greg);
	free(greg);
	for (NodeId n = 0; n < g->nnodes; n++)
		if (tp_anchor_input(g, n) >= 0 && g->nodes[n].tp_axis == TP_NONE) {
			diag_node(g, n, "tp-rewrite needs a plan: run tp-plan first");
			tp_state_free(s);
			return false;
		}

	/* 1. route the plan, keeping each input's needed layout */
	int nold = g->nnodes, ntold = g->ntensors;
	int *off = malloc(sizeof *off * (nold + 1));
	bool *gemm_ar = calloc(nold + 1, 1);
	int total = 0;
	for (NodeId n = 0; n < nold; n++) {
		off[n] = total;
		total += g->nodes[n].nin;
	}
	Layout *need = malloc(sizeof *need * (total + 1));
	for (NodeId n = 0; n < nold; n++) {
		if (!tp_eval_node(s, n, NULL)) { /* only an edited IR file gets here */
			diag_node(g, n, "the tensor-parallel plan (tp=) has no sharding pattern here");
			free(off);
			free(gemm_ar);
			free(need);
			tp_state_free(s);
			return false;
		}
		memcpy(need + off[n], s->need, sizeof *need * g->nodes[n].nin);
		gemm_ar[n] = s->gemm_allreduce;
	}
	bool *cross = calloc(ntold + 1, 1);
	for (TensorId t = 0; t < ntold; t++)
		cross[t] = tp_crosses(s, t) && s->lay[t].kind != L_R;

	/* weights split in more than one way are cloned per layout */
	Layout *wl = calloc(ntold + 1, sizeof *wl);
	bool *wshared = calloc(ntold + 1, 1), *wfull = calloc(ntold + 1, 1);
	for (NodeId n = 0; n < nold; n++)
		for (int i = 0; i < g->nodes[n].nin; i++) {
			TensorId t = g->nodes[n].in[i];
			if (t == IR_NONE || g->tensors[t].kind != TK_WEIGHT)
				continue;
			Layout l = need[off[n] + i];
			if (l.kind != L_S)
				wfull[t] = true;
			else if (wl[t].kind == L_S && !tp_same(wl[t], l))
				wshared[t] = true;
			else
				wl[t] = l;
		}

	Rw w = {.g = g, .s = s};
	w.gdims = malloc(sizeof *w.gdims * (ntold + 1));
	for (TensorId t = 0; t < ntold; t++)
		memcpy(w.gdims[t], g->tensors[t].dims, sizeof w.gdims[t]);
	Layout *lay = malloc(sizeof *lay * (ntold + 1));
	memcpy(lay, s->lay, sizeof *lay * ntold);
	int *region = malloc(sizeof *region * (nold + 1));
	memcpy(region, s->region, sizeof *region * nold);
	TensorId *crossed = malloc(sizeof *crossed * (ntold + 1));
	NodeId *oprod = malloc(sizeof *oprod * (ntold + 1));
	for (TensorId t = 0; t < ntold; t++) {
		crossed[t] = t;
		oprod[t] = g->tensors[t].producer;
	}

	/* 2. rebuild the node list with the collectives in place */
	Node *old = malloc(sizeof *old * (nold + 1));
	memcpy(old, g->nodes, sizeof *old * nold);
	g->nnodes = 0;
	const Layout R = {L_R, 0, 1};
	for (NodeId n = 0; n < nold; n++) {
		Node nd = old[n];
		w.at = &old[n];
		for (int i = 0; i < nd.nin; i++) {
			TensorId t = nd.in[i];
			if (t == IR_NONE)
				continue;
			NodeId p = t < ntold ? oprod[t] : IR_NONE;
			bool across = p == IR_NONE || region[p] != region[n];
			Layout have = across ? R : lay[t];
			TensorId src = across ? crossed[t] : t;
			Layout l = need[off[n] + i];
			if (tp_same(have, l))
				nd.in[i] = src;
			else if (g->tensors[t].kind == TK_WEIGHT && l.kind == L_S)
				nd.in[i] = slice_weight(&w, t, l, wshared[t] || wfull[t]);
			else
				nd.in[i] = convert(&w, t, src, have, l, nd.group, nd.name);
		}
		nd.tp_comm = NULL;
		for (int i = 0; i < nd.nout; i++) {
			TensorId t = nd.out[i];
			if (t == IR_NONE)
				continue;
			int64_t d[IR_MAX_RANK];
			local_dims(&w, t, lay[t].kind == L_S ? lay[t] : R, d);
			memcpy(g->tensors[t].dims, d, sizeof d);
			g->tensors[t].tp_kind = (int8_t)lay[t].kind;
		}
		local_shape_inputs(&w, &nd);
		if (gemm_ar[n]) { /* product, all-reduce, then the bias once */
			TensorId y = nd.out[0], c = nd.in[2];
			TensorId part = new_value(&w, y, R, "partial");
			g->tensors[part].tp_kind = TPK_P;
			nd.out = ir_alloc(&g->arena, sizeof(TensorId));
			nd.out[0] = part;
			TensorId *in = ir_alloc(&g->arena, sizeof(TensorId) * 3);
			memcpy(in, nd.in, sizeof(TensorId) * 3);
			in[2] = IR_NONE;
			nd.in = in;
			push(g, &nd);
			TensorId sum = collective(&w, OP_AllReduce, part, y, R, R, nd.group, nd.name);
			TensorId ab[2] = {sum, c};
			char name[512];
			snprintf(name, sizeof name, "%s/tp.bias", nd.name);
			NodeId add = ir_add_node(g, OP_Add, name, 2, ab, 1, &y);
			place_like(g, add, &old[n]);
		} else {
			push(g, &nd);
		}
		for (int i = 0; i < nd.nout; i++) {
			TensorId t = nd.out[i];
			if (t != IR_NONE && t < ntold && cross[t]) {
				TensorId r = convert(&w, t, t, lay[t], R, nd.group, nd.name);
				crossed[t] = r;
			}
		}
	}
	/* outputs and the loss: the replicated versions, under the original names */
	for (int i = 0; i <= g->noutputs; i++) {
		TensorId *at = i < g->noutputs ? &g->outputs[i] : &g->loss;
		if (*at == IR_NONE)
			continue;
		TensorId t = *at, r = crossed[t];
		if (r != t) {
			const char *nm = g->tensors[t].name;
			g->tensors[t].name = g->tensors[r].name;
			g->tensors[r].name = nm;
			*at = r;
		}
	}
	free(old);

	ir_compact(g);          /* drops a weight every use of which was cloned */
	regroup(g);
	g->tp_layouts = true;

	/* 3. shapes: inference must agree with the plan */
	int64_t (*want)[IR_MAX_RANK] = malloc(sizeof *want * (g->ntensors + 1));
	for (TensorId t = 0; t < g->ntensors; t++)
		memcpy(want[t], g->tensors[t].dims, sizeof want[t]);
	if (!ir_infer_all(g))
		die("tp-rewrite: shape inference failed on the rewritten graph");
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].producer != IR_NONE &&
		    memcmp(want[t], g->tensors[t].dims, sizeof(int64_t) * g->tensors[t].rank) != 0) {
			char ty[IR_TYPESTR];
			die("tp-rewrite: %s: inferred %s, the plan expects another shape",
			    g->tensors[t].name, ir_typestr(&g->tensors[t], ty));
		}
	free(want);
	free(off);
	free(gemm_ar);
	free(need);
	free(cross);
	free(wl);
	free(wshared);
	free(wfull);
	free(w.gdims);
	free(w.v);
	free(lay);
	free(region);
	free(crossed);
	free(oprod);
	tp_state_free(s);
	return true;
}
