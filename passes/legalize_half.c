/*
 * legalize_half.c - half-precision arithmetic computed in f32.
 *
 * libtaprt's kernels compute in f32 (and f64 and the integer types); on
 * f16 and bf16 tensors only the kernels that move bytes (half_native
 * below) and Cast, Max, Min and Mod run.  Every other node with an f16 or
 * bf16 input or output is rewritten, as onnxruntime's CPU provider does for
 * the float16 kernels it lacks (its InsertCastTransformer):
 *
 *   y:f16 = Op(a:f16, b:f32)   ->   a' = Cast(a) to f32
 *                                   y' = Op(a', b)         y' f32
 *                                   y  = Cast(y') to f16
 *
 * so each such node computes in f32.  What happens between two such nodes
 * is -half's choice (PassCtx.half_exact):
 *
 * -half=exact: each result is rounded to the half type once, where the
 * model's tensor is, and the next node converts it back.  Every tensor of
 * the model keeps its name, type and producer's meaning.  For the
 * elementwise operators this is the ONNX result exactly: a half converts
 * to f32 exactly, and one f32 operation rounded to f16 is the correctly
 * rounded f16 operation (24 >= 2 * 11 + 2 significand bits); products and
 * sums carry f32's precision to the one rounding, as numpy's float16
 * matmul and torch's CPU half kernels do.
 *
 * -half=f32 (the default): a node reads the f32 result of a rewritten
 * node of its own place (stage, If branch) itself, and so does a
 * byte-moving node whose every half is there in f32 (moves_f32): it moves
 * f32.  The Cast to the half stays only for a graph output, another
 * place's reader or a half-native one that still reads halves; the rest are
 * dropped (drop_roundings).  The model computes in
 * f32 between the byte movers and its outputs, more precisely than the
 * halves and without a conversion per node, as onnxruntime does (its
 * RemoveDuplicateCastTransformer drops the Cast pairs its
 * InsertCastTransformer made).  This pass runs before the fusions, which
 * then find their f32 patterns: a GPT-2-small-width model in f16 ran
 * 291 -> 247 ms a forward on one thread (docs/ops.md).
 *
 * bf16 rounds as tapc's Cast does (keeps the high half: docs/ops.md).
 *
 * A half tensor read by several rewritten nodes of one stage and one If
 * branch is converted once, before the first of them.  A half weight or
 * constant whose bytes tapc has (read by no backward or optimizer node)
 * is converted here instead, once, in either mode (a tensor-parallel
 * slice, whose bytes are each rank's, as the program loads it:
 * f32_slice): its f32 copy is a weight of its own (exact: every half is
 * a float), so no Cast of it runs per call and the GEMMs and fusions
 * see a weight, as in an f32 model.  The program holds it at twice its
 * bytes, as onnxruntime's constant folding of its Casts does; a weight
 * that half-native nodes also read (an embedding's Gather) keeps its f16
 * bytes for them.  Nodes that the pass would rewrite in the backward or
 * optimizer phase are refused: the optimizer updates its weight in place,
 * and a copy of it would not be the weight.
 *
 * Needs: a shaped per-rank graph, before the fusions and the schedule.
 * Guarantees: no live node but half_native's reads or writes an f16 or
 * bf16 tensor.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/fuse.h"
#include "runtime/half.h"

/* Runs on halves as they are: byte movement (libtaprt copies elements of
 * any size), the comparisons of Max and Min, Mod, Cast itself, and the
 * random operators (k_random.c rounds each value to its type).  Every
 * other operator computes its outputs' type from its inputs', so that the
 * node retypes to f32 with them; the rest may move bytes too, but run in
 * f32 all the same (a conversion there and back is exact). */
static bool
half_native(const Graph *g, NodeId id)
{
	const Node *n = &g->nodes[id];
	switch (n->op) {
	case OP_Identity: case OP_Cast: case OP_CastLike: case OP_Max: case OP_Min: case OP_Mod:
	case OP_Shape: case OP_Size: case OP_Reshape: case OP_Flatten: case OP_Squeeze:
	case OP_Unsqueeze: case OP_Transpose: case OP_Concat: case OP_Split: case OP_Slice:
	case OP_Gather: case OP_Expand: case OP_Tile: case OP_Where: case OP_If:
	case OP_AllGather: case OP_Shard:
	case OP_Pad:             /* constant, edge and reflect copy elements */
	case OP_ConstantOfShape: /* fills with its value's bytes (its type is the value's) */
	case OP_EyeLike:         /* writes ones and zeros of its type */
	case OP_RandomUniform: case OP_RandomNormal: case OP_RandomUniformLike:
	case OP_RandomNormalLike: case OP_Bernoulli: /* round each value to its type */
		return true;
	default:
		return false;
	}
}

static bool
is_half(DType t)
{
	return t == DT_F16 || t == DT_BF16;
}

/* Does node id read or write a half tensor? */
static bool
touches_half(const Graph *g, const Node *n)
{
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] != IR_NONE && is_half(g->tensors[n->in[i]].dtype))
			return true;
	for (int i = 0; i < n->nout; i++)
		if (n->out[i] != IR_NONE && is_half(g->tensors[n->out[i]].dtype))
			return true;
	return false;
}

/* A half tensor's f32 copy, made for the nodes of one place (stage -1: a
 * converted weight, for every place). */
typedef struct {
	TensorId copy;
	int stage, region, branch;
	int next;               /* the same tensor's next copy (another place), or -1 */
} Conv;

typedef struct {
	Graph *g;
	Conv *conv;
	int nconv, capconv;
	int *head;              /* per tensor of the graph as it came, its first copy or -1 */
	TensorId *from;         /* per such tensor made by a rewritten node, the f32 value
				 * it is rounded from (its Cast's input), or IR_NONE */
	bool exact;             /* -half=exact: every node's f32 result rounded to its half */
	TensorId ntold;         /* tensors before the pass */
	int64_t *slot;          /* per Cast made (node nold + i): 2 * n to go right before
				 * node n, 2 * n + 1 right after it */
	int capslot;
	int nold;
} Legal;

/* c, a copy of t, first in t's list. */
static void
conv_push(Legal *l, TensorId t, Conv c)
{
	if (l->nconv == l->capconv) {
		l->capconv = l->capconv ? 2 * l->capconv : 32;
		l->conv = realloc(l->conv, sizeof *l->conv * l->capconv);
		if (!l->conv)
			die("out of memory");
	}
	c.next = l->head[t];
	l->conv[l->nconv] = c;
	l->head[t] = l->nconv++;
}

/* A Cast node y = Cast(x) to dt in node at's place (stage, branch,
 * phase), to go right before at or right after it. */
static void
add_cast(Legal *l, NodeId at, bool after, TensorId x, TensorId y, DType dt)
{
	Graph *g = l->g;
	char name[512];
	snprintf(name, sizeof name, "%s/legalize_half", g->nodes[at].name);
	NodeId c = ir_add_node(g, OP_Cast, name, 1, &x, 1, &y);
	Node *cn = &g->nodes[c], *an = &g->nodes[at];
	cn->subgraph = an->subgraph;
	cn->stage = an->stage;
	cn->region = an->region;
	cn->branch = an->branch;
	cn->phase = an->phase;
	ir_set_attr(g, c, "to", ATTR_INT)->i = dt;
	int i = c - l->nold;
	if (i == l->capslot) {
		l->capslot = l->capslot ? 2 * l->capslot : 64;
		l->slot = realloc(l->slot, sizeof *l->slot * l->capslot);
		if (!l->slot)
			die("out of memory");
	}
	l->slot[i] = 2 * (int64_t)at + after;
}

/* Tensor-parallel slice t of a half weight as an f32 weight that reads the
 * same bytes of the same file and converts them as the program loads its
 * slice (Tensor.file_dtype; runtime/weights.c): the slice is the rank's,
 * known only there, so its bytes cannot be converted here. */
static TensorId
f32_slice(Graph *g, TensorId t)
{
	const char *name = fuse_fresh_name(g, g->tensors[t].name, ":to_f32");
	TensorId y = ir_add_tensor(g, name, TK_WEIGHT, DT_F32);
	Tensor *yt = &g->tensors[y];
	const Tensor *tt = &g->tensors[t];
	*yt = *tt;
	yt->name = name;
	yt->dtype = DT_F32;
	yt->file_dtype = tt->dtype;
	yt->value = NULL;
	yt->producer = IR_NONE;
	return y;
}

/* Half weight or constant t (f32_copy checks) converted to an f32 one of
 * the same kind, or IR_NONE where it cannot be (no bytes here, or a weight
 * the backward or optimizer reads: training keeps its own).  A
 * tensor-parallel slice converts as it loads (f32_slice). */
static TensorId
f32_weight(Graph *g, TensorId t)
{
	const Tensor *tt = &g->tensors[t];
	for (NodeId id = 0; id < g->nnodes; id++) {
		const Node *n = &g->nodes[id];
		if (n->dead || n->phase == PHASE_FWD)
			continue;
		for (int i = 0; i < n->nin; i++)
			if (n->in[i] == t)
				return IR_NONE;
	}
	if (tt->data == DATA_FILE && tt->slice_axis >= 0)
		return f32_slice(g, t);
	const uint16_t *h = fuse_whole(g, t);
	if (!h)
		return IR_NONE;
	const int64_t n = ir_numel(tt);
	const bool bf16 = tt->dtype == DT_BF16;
	float *f = ir_alloc(&g->arena, sizeof *f * (size_t)(n ? n : 1));
	for (int64_t i = 0; i < n; i++) /* as libtaprt's Cast: exact */
		f[i] = bf16 ? taprt_bf16_to_float(h[i]) : taprt_half_to_float(h[i]);
	/* new tensors may move g->tensors: copied first */
	const TensorKind kind = tt->kind;
	const int rank = tt->rank;
	const int8_t tp_kind = tt->tp_kind;
	const char *sym0 = tt->sym0;
	int64_t dims[IR_MAX_RANK];
	memcpy(dims, tt->dims, sizeof dims);
	TensorId y = fuse_new_weight(g, fuse_fresh_name(g, tt->name, ":to_f32"), rank, dims, f);
	g->tensors[y].kind = kind;
	g->tensors[y].tp_kind = tp_kind;
	g->tensors[y].sym0 = sym0;
	return y;
}

/* The f32 copy of half tensor t for node at: a weight's converted here
 * (f32_weight), one for every place; otherwise made before at if its place
 * has none yet. */
static TensorId
f32_copy(Legal *l, NodeId at, TensorId t)
{
	Graph *g = l->g;
	/* a half a rewritten node of the same place rounded: the f32 value
	 * itself, unless every rounding is kept */
	if (!l->exact && l->from[t] != IR_NONE) {
		const Node *p = &g->nodes[g->tensors[l->from[t]].producer], *a = &g->nodes[at];
		if (p->stage == a->stage && p->region == a->region && p->branch == a->branch)
			return l->from[t];
	}
	if (g->tensors[t].kind == TK_WEIGHT || g->tensors[t].kind == TK_CONST) {
		if (l->head[t] >= 0 && l->conv[l->head[t]].stage < 0)
			return l->conv[l->head[t]].copy;
		TensorId y = f32_weight(g, t);
		if (y != IR_NONE) {
			conv_push(l, t, (Conv){y, -1, -1, -1, -1});
			return y;
		}
	}
	/* the place, copied: adding the Cast moves the node array */
	const int stage = g->nodes[at].stage, region = g->nodes[at].region,
	    branch = g->nodes[at].branch;
	int same = 0;
	for (int i = l->head[t]; i >= 0; i = l->conv[i].next, same++) {
		const Conv *c = &l->conv[i];
		if (c->stage == stage && c->region == region && c->branch == branch)
			return c->copy;
	}
	char name[512];
	if (same)
		snprintf(name, sizeof name, "%s:to_f32.%d", g->tensors[t].name, same);
	else
		snprintf(name, sizeof name, "%s:to_f32", g->tensors[t].name);
	TensorId y = ir_add_tensor(g, name, TK_VALUE, DT_F32);
	ir_set_shape(&g->tensors[y], g->tensors[t].rank, g->tensors[t].dims);
	g->tensors[y].sym0 = g->tensors[t].sym0;
	add_cast(l, at, false, t, y, DT_F32);
	conv_push(l, t, (Conv){y, stage, region, branch, -1});
	return y;
}

static bool
legalize_node(Legal *l, NodeId id)
{
	Graph *g = l->g;
	if (g->nodes[id].phase != PHASE_FWD) {
		diag_node(g, id, "training on f16 or bf16 tensors is not supported: the backward "
		    "and optimizer nodes compute in f32 (export the model in float32)");
		return false;
	}
	for (int i = 0; i < g->nodes[id].nin; i++) {
		TensorId t = g->nodes[id].in[i];
		if (t != IR_NONE && is_half(g->tensors[t].dtype)) {
			TensorId c = f32_copy(l, id, t);
			g->nodes[id].in[i] = c;
		}
	}
	for (int i = 0; i < g->nodes[id].nout; i++) {
		TensorId t = g->nodes[id].out[i];
		if (t == IR_NONE || !is_half(g->tensors[t].dtype))
			continue;
		char name[512];
		snprintf(name, sizeof name, "%s:f32", g->tensors[t].name);
		TensorId y = ir_add_tensor(g, name, TK_VALUE, DT_F32);
		Tensor *yt = &g->tensors[y], *tt = &g->tensors[t];
		ir_set_shape(yt, tt->rank, tt->dims);
		yt->sym0 = tt->sym0;
		yt->tp_kind = tt->tp_kind;
		g->nodes[id].out[i] = y;
		yt->producer = id;
		l->from[t] = y;
		add_cast(l, id, true, y, t, tt->dtype);
	}
	/* the node types again on f32: its outputs are f32 now */
	if (!ir_infer_node(g, id))
		die("legalize-half: node '%s' (%s) does not type on f32", g->nodes[id].name,
		    ir_op_name(g->nodes[id].op));
	for (int i = 0; i < g->nodes[id].nout; i++) {
		TensorId t = g->nodes[id].out[i];
		if (t != IR_NONE && is_half(g->tensors[t].dtype))
			die("legalize-half: node '%s' (%s) still makes %s", g->nodes[id].name,
			    ir_op_name(g->nodes[id].op), ir_dtype_name(g->tensors[t].dtype));
	}
	return true;
}

/* The Casts to a half that nothing reads any more (each reader took the
 * f32 value: f32_copy) marked dead; a graph output, a half-native node's
 * input or another place's keeps its. */
static void
drop_roundings(Legal *l)
{
	Graph *g = l->g;
	int *readers = calloc((size_t)g->ntensors + 1, sizeof *readers);
	if (!readers)
		die("out of memory");
	for (NodeId id = 0; id < g->nnodes; id++) {
		const Node *n = &g->nodes[id];
		for (int i = 0; !n->dead && i < n->nin; i++)
			if (n->in[i] != IR_NONE)
				readers[n->in[i]]++;
	}
	for (int i = 0; i < g->noutputs; i++)
		readers[g->outputs[i]]++;
	for (TensorId t = 0; t < l->ntold; t++)
		if (l->from[t] != IR_NONE && !readers[t])
			g->nodes[g->tensors[t].producer].dead = true;
	free(readers);
}

/*
 * With -half=f32, does byte-moving node id move f32 instead?  When every
 * half it reads is there in f32 already -- the f32 result of a rewritten
 * (or moved) node of its own place, or a small or converted weight -- the
 * node reads those and makes f32, and its own readers then need no Cast
 * (legalize_node rounds its outputs for the readers that keep halves; the
 * rest of the roundings go in drop_roundings).  GPT-2's c_attn Add ->
 * Split -> Reshape -> Transpose -> MatMul then carries f32 from the Add to
 * the product, as in an f32 model, and the fusions after this pass see the
 * same patterns (scale, mask and softmax: one FusedSoftmax).  The values
 * moved are the unrounded ones, as between two converted nodes.  Not moved
 * to f32: Cast, Shape and Size (their outputs are not the half), Mod, If,
 * the collectives (their bytes cross between ranks: halves cost half), and
 * a node that would make a big half weight f32 (an embedding's Gather:
 * the program would hold the whole table at twice its bytes).
 */
static bool
moves_f32(Legal *l, NodeId id)
{
	Graph *g = l->g;
	const Node *n = &g->nodes[id];
	if (l->exact || n->phase != PHASE_FWD)
		return false;
	switch (n->op) {
	case OP_Identity: case OP_Reshape: case OP_Flatten: case OP_Squeeze: case OP_Unsqueeze:
	case OP_Transpose: case OP_Concat: case OP_Split: case OP_Slice: case OP_Gather:
	case OP_Expand: case OP_Tile: case OP_Where: case OP_Pad: case OP_Max: case OP_Min:
		break;
	default:
		return false;
	}
	int halves = 0;
	for (int i = 0; i < n->nin; i++) {
		TensorId t = n->in[i];
		if (t == IR_NONE || !is_half(g->tensors[t].dtype))
			continue;
		halves++;
		const Tensor *tt = &g->tensors[t];
		if (l->from[t] != IR_NONE) {
			const Node *p = &g->nodes[g->tensors[l->from[t]].producer];
			if (p->stage != n->stage || p->region != n->region || p->branch != n->branch)
				return false;
		} else if (tt->kind == TK_WEIGHT || tt->kind == TK_CONST) {
			bool converted = l->head[t] >= 0 && l->conv[l->head[t]].stage < 0;
			if (!converted && (ir_numel(tt) > 4096 || !fuse_whole(g, t)))
				return false;
		} else {
			return false;
		}
	}
	return halves > 0;
}

bool
pass_legalize_half(Graph *g, PassCtx *cx)
{
	Legal l = {.g = g, .nold = g->nnodes, .ntold = g->ntensors};
	l.head = malloc(sizeof *l.head * (g->ntensors + 1));
	if (!l.head)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		l.head[t] = -1;
	l.from = malloc(sizeof *l.from * (g->ntensors + 1));
	if (!l.from)
		die("out of memory");
	for (TensorId t = 0; t < g->ntensors; t++)
		l.from[t] = IR_NONE;
	l.exact = cx->half_exact;
	bool ok = true;
	for (NodeId id = 0; id < l.nold; id++) {
		Node *n = &g->nodes[id];
		if (n->dead || !touches_half(g, n) || (half_native(g, id) && !moves_f32(&l, id)))
			continue;
		ok &= legalize_node(&l, id);
	}
	const int nnew = g->nnodes - l.nold;
	if (ok && nnew) {
		/* each input's Cast right before its first reader, each output's
		 * right after its node */
		NodeId *order = malloc(sizeof *order * (g->nnodes + 1));
		if (!order)
			die("out of memory");
		int k = 0, c = 0; /* made in node order: a node's befores, then afters */
		for (NodeId id = 0; id < l.nold; id++) {
			while (c < nnew && l.slot[c] == 2 * (int64_t)id)
				order[k++] = l.nold + c++;
			order[k++] = id;
			while (c < nnew && l.slot[c] == 2 * (int64_t)id + 1)
				order[k++] = l.nold + c++;
		}
		if (k != g->nnodes)
			die("legalize-half: %d of %d nodes placed", k, g->nnodes);
		ir_reorder(g, order);
		free(order);
	}
	if (ok && !l.exact)
		drop_roundings(&l);
	free(l.head);
	free(l.from);
	free(l.conv);
	free(l.slot);
	return ok;
}
