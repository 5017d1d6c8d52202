/*
 * autodiff.c - reverse-mode automatic differentiation: append the backward
 * nodes that compute d loss / d weight for every trainable weight.
 *
 * Needs: Graph.loss set (by the loss pass) to a scalar float tensor a node
 * produces, nodes in topological order, every tensor typed; nothing to do
 * when loss is IR_NONE.  Guarantees: backward nodes (phase=bwd) after every
 * forward node, in topological order, each named after the forward node it
 * differentiates ("NAME/grad", "NAME/grad_1", ...) and carrying that node's
 * GraphNode, subgraph, stage and region; Graph.grads holds one (weight,
 * gradient) pair per trainable weight, in tensor order, the gradient of the
 * weight's type.  On an error the graph is left as it was.
 *
 * Trainable weights are the f32/f64 weights from which the loss is reached
 * through differentiable paths: integer and bool tensors, constants, graph
 * inputs and optimizer state are data, and an input an operator's rule
 * marks non-differentiable (indices, shapes, conditions) carries nothing.
 * Two sweeps decide what is computed: forward, which tensors vary with a
 * trainable weight; backward from the loss, which of those the loss
 * depends on.  Only nodes with such an input and such an output are
 * differentiated, last node first, each by its rule in grad_rules.def; the
 * contributions to one tensor's gradient meet in grad_accumulate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"
#include "passes/passes.h"

static const GradInfo rules[OP_COUNT] = {
#define GRAD(op, rule, nodiff) [OP_##op] = {rule, nodiff},
#include "passes/grad_rules.def"
#undef GRAD
};

const GradInfo *
grad_info(Op op)
{
	return &rules[op];
}

/* The dtypes a gradient flows through. */
static bool
diff_dtype(DType t)
{
	return t == DT_F32 || t == DT_F64 || t == DT_F16 || t == DT_BF16;
}

static bool
trainable_kind(const Tensor *t)
{
	return t->kind == TK_WEIGHT && (t->dtype == DT_F32 || t->dtype == DT_F64);
}

/* Is input i of an op of this rule non-differentiable?  Inputs past 31
 * (Concat, Sum) follow bit 31, which GRAD_NONE_FROM sets. */
static bool
nodiff(Op op, int i)
{
	unsigned m = rules[op].nodiff;
	return (i < 32 ? m >> i : m >> 31) & 1;
}

bool
grad_wants(GradCtx *c, NodeId n, int i)
{
	const Node *nd = &c->g->nodes[n];
	TensorId t = i < nd->nin ? nd->in[i] : IR_NONE;
	return t != IR_NONE && t < c->nfwd && c->needs[t] && !nodiff(nd->op, i);
}

/* Forward sweep: var[t] when t varies with a trainable weight. */
static void
mark_varying(Graph *g, bool *var)
{
	for (TensorId t = 0; t < g->ntensors; t++)
		var[t] = trainable_kind(&g->tensors[t]);
	for (NodeId n = 0; n < g->nnodes; n++) {
		const Node *nd = &g->nodes[n];
		if (nd->dead)
			continue;
		bool any = false;
		for (int i = 0; i < nd->nin && !any; i++)
			any = nd->in[i] != IR_NONE && var[nd->in[i]] && !nodiff(nd->op, i);
		for (int i = 0; i < nd->nout; i++)
			if (nd->out[i] != IR_NONE)
				var[nd->out[i]] = any && diff_dtype(g->tensors[nd->out[i]].dtype);
	}
}

/* Backward sweep from the loss: need[t] when t varies and the loss
 * depends on it through differentiable inputs. */
static void
mark_needed(Graph *g, const bool *var, bool *need)
{
	need[g->loss] = var[g->loss];
	for (NodeId n = g->nnodes - 1; n >= 0; n--) {
		const Node *nd = &g->nodes[n];
		bool any = false;
		for (int i = 0; i < nd->nout && !any && !nd->dead; i++)
			any = nd->out[i] != IR_NONE && need[nd->out[i]];
		for (int i = 0; i < nd->nin && any; i++)
			if (nd->in[i] != IR_NONE && var[nd->in[i]] && !nodiff(nd->op, i))
				need[nd->in[i]] = true;
	}
}

/* Does the backward pass differentiate node n (an output it needs)? */
static bool
on_path(const GradCtx *c, NodeId n)
{
	const Node *nd = &c->g->nodes[n];
	for (int i = 0; i < nd->nout && !nd->dead; i++)
		if (nd->out[i] != IR_NONE && c->needs[nd->out[i]])
			return true;
	return false;
}

static bool
check_loss(Graph *g)
{
	if (g->loss < 0 || g->loss >= g->ntensors) {
		diag_file(g->model, "autodiff: the loss is tensor %d of %d", g->loss, g->ntensors);
		return false;
	}
	Tensor *t = &g->tensors[g->loss];
	char ty[IR_TYPESTR];
	if (t->producer == IR_NONE || t->kind != TK_VALUE) {
		diag_file(g->model, "autodiff: the loss '%s' is not computed by the graph", t->name);
		return false;
	}
	if ((t->dtype != DT_F32 && t->dtype != DT_F64) || t->rank < 0 || ir_numel(t) != 1) {
		diag_file(g->model, "autodiff: the loss '%s' is %s, expected one f32 or f64 value",
		    t->name, ir_typestr(t, ty));
		return false;
	}
	for (NodeId n = 0; n < g->nnodes; n++)
		if (!g->nodes[n].dead && g->nodes[n].phase != PHASE_FWD) {
			diag_file(g->model, "autodiff: the graph already has backward or optimizer nodes");
			return false;
		}
	return true;
}

/* Every node on the path has a rule: one error for the last one that has
 * none (the first the backward pass would meet). */
static bool
check_rules(GradCtx *c)
{
	for (NodeId n = c->g->nnodes - 1; n >= 0; n--) {
		Op op = c->g->nodes[n].op;
		if (on_path(c, n) && !rules[op].rule) {
			diag_node(c->g, n, "%s has no gradient in tapc: docs/ops.md lists the "
			    "operators that do", ir_op_name(op));
			return false;
		}
	}
	return true;
}

/* --------------------------------------------------------- building */

/* "NAME/grad", "NAME/grad_1", ... after the forward node (its operator
 * when it has no name). */
static const char *
node_name(GradCtx *c, const char *what)
{
	const Node *f = &c->g->nodes[c->fwd];
	const char *base = f->name[0] ? f->name : ir_op_name(f->op);
	char *buf = ir_alloc(&c->g->arena, strlen(base) + strlen(what) + 24);
	if (c->built)
		sprintf(buf, "%s/%s_%d", base, what, c->built);
	else
		sprintf(buf, "%s/%s", base, what);
	c->built++;
	return buf;
}

static NodeId
build(GradCtx *c, const char *what, Op op, int nin, const TensorId *in, int nout,
    const bool *keep)
{
	Graph *g = c->g;
	const char *name = node_name(c, what);
	TensorId *out = malloc(sizeof *out * (nout + 1));
	char *tname = malloc(strlen(name) + 24);
	if (!out || !tname)
		die("out of memory");
	for (int i = 0; i < nout; i++) {
		sprintf(tname, "%s:%d", name, i);
		out[i] = keep && !keep[i] ? IR_NONE : ir_add_tensor(g, tname, TK_VALUE, DT_UNDEF);
	}
	NodeId n = ir_add_node(g, op, name, nin, in, nout, out);
	free(out);
	free(tname);
	Node *nd = &g->nodes[n];
	const Node *f = &g->nodes[c->fwd];
	nd->phase = PHASE_BWD;
	nd->group = f->group;
	nd->subgraph = f->subgraph;
	nd->stage = f->stage;
	nd->region = f->region;
	nd->branch = f->branch;
	return n;
}

NodeId
grad_begin(GradCtx *c, Op op, int nin, const TensorId *in, int nout, const bool *keep)
{
	return build(c, "grad", op, nin, in, nout, keep);
}

TensorId
grad_finish(GradCtx *c, NodeId n)
{
	Graph *g = c->g;
	if (!ir_infer_node(g, n))
		die("autodiff built a bad %s for '%s' (%s): %s", ir_op_name(g->nodes[n].op),
		    g->nodes[c->fwd].name, ir_op_name(g->nodes[c->fwd].op), diag_last);
	return g->nodes[n].out[0];
}

/* Does the TP group compute forward node n in pieces: a split or partial
 * operand or result?  A collective's rule gives whole gradients. */
static bool
piecewise(const Graph *g, NodeId n)
{
	const Node *nd = &g->nodes[n];
	if (ir_op_kind(nd->op) == OPK_COMM)
		return false;
	for (int i = 0; i < nd->nin; i++)
		if (nd->in[i] != IR_NONE && g->tensors[nd->in[i]].tp_kind != TPK_R)
			return true;
	for (int i = 0; i < nd->nout; i++)
		if (nd->out[i] != IR_NONE && g->tensors[nd->out[i]].tp_kind != TPK_R)
			return true;
	return false;
}

void
grad_accumulate(GradCtx *c, TensorId t, TensorId contribution, NodeId from)
{
	Graph *g = c->g;
	if (t < 0 || t >= c->nfwd)
		die("autodiff: gradient for tensor %d, not a forward tensor", t);
	const Tensor *a = &g->tensors[t], *b = &g->tensors[contribution];
	char ta[IR_TYPESTR], tb[IR_TYPESTR];
	if (a->dtype != b->dtype || a->rank != b->rank ||
	    memcmp(a->dims, b->dims, sizeof a->dims[0] * a->rank))
		die("autodiff: %s's rule gives '%s' %s a gradient of %s", ir_op_name(g->nodes[from].op),
		    a->name, ir_typestr(a, ta), ir_typestr(b, tb));
	TensorId *sum = &c->grad[t];
	if (c->tp && a->tp_kind == TPK_R && piecewise(g, from)) {
		sum = &c->partial[t];
		c->partial_from[t] = from;
	}
	if (*sum == IR_NONE) {
		*sum = contribution;
		return;
	}
	NodeId saved = c->fwd;
	c->fwd = from;
	TensorId in[2] = {*sum, contribution};
	NodeId n = build(c, "grad_acc", OP_Add, 2, in, 1, NULL);
	*sum = grad_finish(c, n);
	c->fwd = saved;
}

/* The shares summed on each rank, all-reduced over the TP group (one
 * collective per tensor), then added to the whole contributions. */
TensorId
grad_whole(GradCtx *c, TensorId t)
{
	if (!c->tp || c->partial[t] == IR_NONE)
		return c->grad[t];
	NodeId saved = c->fwd;
	int built = c->built;
	c->fwd = c->partial_from[t];
	c->built = c->nreduce++;        /* names "/grad_tp", "/grad_tp_N": a counter of the pass */
	NodeId n = build(c, "grad_tp", OP_AllReduce, 1, &c->partial[t], 1, NULL);
	TensorId r = grad_finish(c, n);
	c->partial[t] = IR_NONE;
	if (c->grad[t] == IR_NONE) {
		c->grad[t] = r;
	} else {
		TensorId in[2] = {c->grad[t], r};
		c->built = c->nreduce++;
		c->grad[t] = grad_finish(c, build(c, "grad_tp", OP_Add, 2, in, 1, NULL));
	}
	c->fwd = saved;
	c->built = built;
	return c->grad[t];
}

/* ------------------------------------------------------------- the pass */

/* d loss / d loss = 1, of the loss's type; 1 / M with M micro-batches per
 * replica: the step's loss is the mean of theirs, so each micro-batch's
 * gradient is its share, and the shares add up (GradAccumulate). */
static TensorId
seed(GradCtx *c)
{
	Graph *g = c->g;
	Tensor *l = &g->tensors[g->loss];
	double one = g->microbatches > 1 ? 1.0 / g->microbatches : 1;
	char *name = malloc(strlen(l->name) + 8);
	if (!name)
		die("out of memory");
	sprintf(name, "%s/grad", l->name);
	TensorId s = grad_const(c, l->dtype, l->rank, l->dims, &one);
	g->tensors[s].name = ir_strdup(&g->arena, name);
	free(name);
	return s;
}

static bool
backward(GradCtx *c, int nnodes)
{
	Graph *g = c->g;
	c->grad[g->loss] = seed(c);
	for (NodeId n = nnodes - 1; n >= 0; n--) {
		if (!on_path(c, n))
			continue;
		int nout = g->nodes[n].nout;
		TensorId *dy = malloc(sizeof *dy * (nout + 1));
		if (!dy)
			die("out of memory");
		for (int i = 0; i < nout; i++) {
			TensorId o = g->nodes[n].out[i];
			dy[i] = o != IR_NONE ? grad_whole(c, o) : IR_NONE;
		}
		c->fwd = n;
		c->built = 0;
		bool ok = rules[g->nodes[n].op].rule(c, n, dy);
		free(dy);
		if (!ok)
			return false;
	}
	return true;
}

/* A weight tp-rewrite gave two layouts is two tensors ("NAME/S1/1" beside
 * NAME) over the same bytes: one update each would train two copies. */
static bool
check_clones(GradCtx *c)
{
	Graph *g = c->g;
	for (TensorId a = 0; a < c->nfwd; a++) {
		const Tensor *x = &g->tensors[a];
		if (!trainable_kind(x) || !c->needs[a] || x->data != DATA_FILE)
			continue;
		for (TensorId b = a + 1; b < c->nfwd; b++) {
			const Tensor *y = &g->tensors[b];
			if (trainable_kind(y) && c->needs[b] && y->data == DATA_FILE &&
			    y->file == x->file && y->offset == x->offset) {
				diag_file(g->model, "weight '%s' is used in two tensor-parallel layouts "
				    "('%s' and '%s'), which training cannot update as one weight: "
				    "train it with -tp=1, or untie the weight in the model", x->name,
				    x->name, y->name);
				return false;
			}
		}
	}
	return true;
}

/*
 * With M micro-batches per replica the step's gradient is the sum of the
 * micro-batches' (each scaled by 1/M by the seed): a GradAccumulate node
 * (phase=bwd, the stage of d's producer) adds d into NAME.grad_sum, a
 * state tensor in the weight region that outlives the micro-batches.  The
 * stage's first backward of a step starts the sum.  Returns the sum.
 */
static TensorId
accumulate(GradCtx *c, TensorId w, TensorId d)
{
	Graph *g = c->g;
	char name[512];
	snprintf(name, sizeof name, "%s.grad_sum", g->tensors[w].name);
	TensorId sum = ir_add_tensor(g, name, TK_STATE, g->tensors[d].dtype);
	ir_set_shape(&g->tensors[sum], g->tensors[d].rank, g->tensors[d].dims);
	snprintf(name, sizeof name, "%s.grad_sum:new", g->tensors[w].name);
	TensorId out = ir_add_tensor(g, name, TK_VALUE, g->tensors[d].dtype);
	TensorId in[2] = {sum, d};
	snprintf(name, sizeof name, "/grad_accumulate/%s", g->tensors[w].name);
	NodeId n = ir_add_node(g, OP_GradAccumulate, name, 2, in, 1, &out);
	Node *nd = &g->nodes[n];
	NodeId p = g->tensors[d].producer;
	nd->phase = PHASE_BWD;
	if (p != IR_NONE) {
		nd->group = g->nodes[p].group;
		nd->subgraph = g->nodes[p].subgraph;
		nd->stage = g->nodes[p].stage;
		nd->region = g->nodes[p].region;
		nd->branch = g->nodes[p].branch;
	}
	if (!ir_infer_node(g, n))
		die("autodiff: GradAccumulate of '%s' does not type: %s", g->tensors[w].name, diag_last);
	return out;
}

/* Each GradAccumulate (nodes [first, nnodes)) right after the node making
 * its gradient, so the micro-batch's gradient dies there instead of
 * living to the end of backward beside every other weight's. */
static void
place_accumulates(Graph *g, int first)
{
	NodeId *order = malloc(sizeof *order * (g->nnodes + 1));
	NodeId *after = malloc(sizeof *after * (g->nnodes + 1));
	if (!order || !after)
		die("out of memory");
	for (NodeId n = first; n < g->nnodes; n++) /* grad_whole's nodes stay: -2 */
		after[n] = g->nodes[n].op == OP_GradAccumulate ?
		    g->tensors[g->nodes[n].in[1]].producer : -2;
	int k = 0;
	for (NodeId n = first; n < g->nnodes; n++) /* a gradient no node makes: first */
		if (after[n] == IR_NONE)
			order[k++] = n;
	for (NodeId n = 0; n < g->nnodes; n++) {
		if (n >= first && after[n] != -2)
			continue;
		order[k++] = n;
		for (NodeId a = first; a < g->nnodes; a++)
			if (after[a] == n)
				order[k++] = a;
	}
	if (k != g->nnodes)
		die("autodiff: placing GradAccumulate lost nodes");
	ir_reorder(g, order);
	free(order);
	free(after);
}

static void
record_grads(GradCtx *c)
{
	Graph *g = c->g;
	int k = 0;
	for (TensorId t = 0; t < c->nfwd; t++)
		k += trainable_kind(&g->tensors[t]) && c->needs[t];
	g->grads = ir_alloc(&g->arena, sizeof *g->grads * (k + 1));
	g->ngrads = 0;
	for (TensorId t = 0; t < c->nfwd; t++) {
		if (!trainable_kind(&g->tensors[t]) || !c->needs[t])
			continue;
		TensorId d = grad_whole(c, t);
		if (d == IR_NONE)
			die("autodiff: weight '%s' is on the path but got no gradient", g->tensors[t].name);
		if (g->microbatches > 1)
			d = accumulate(c, t, d);
		g->grads[g->ngrads++] = (struct GradPair){t, d};
	}
}

bool
pass_autodiff(Graph *g, PassCtx *cx)
{
	(void)cx;
	if (g->loss == IR_NONE || g->ngrads > 0) /* no loss, or a differentiated IR file */
		return true;
	if (!check_loss(g))
		return false;
	if (g->mesh.tp > 1 && !g->tp_layouts) {
		/* an IR file: the layouts are not in the text */
		diag_file(g->model, "autodiff: a tensor-parallel graph (tp=%d) without tp-rewrite's "
		    "layouts; differentiate it in the run that rewrites it", g->mesh.tp);
		return false;
	}
	int nt = g->ntensors, nn = g->nnodes;
	GradCtx c = {.g = g, .fwd = IR_NONE, .nfwd = nt, .tp = g->tp_layouts};
	bool *var = calloc(nt + 1, 1);
	c.needs = calloc(nt + 1, 1);
	c.grad = malloc(sizeof *c.grad * (nt + 1));
	c.partial = malloc(sizeof *c.partial * (nt + 1));
	c.partial_from = malloc(sizeof *c.partial_from * (nt + 1));
	if (!var || !c.needs || !c.grad || !c.partial || !c.partial_from)
		die("out of memory");
	for (TensorId t = 0; t < nt; t++)
		c.grad[t] = c.partial[t] = IR_NONE;
	mark_varying(g, var);
	mark_needed(g, var, c.needs);
	bool ok = check_rules(&c) && check_clones(&c) && backward(&c, nn);
	if (ok) {
		int before = g->nnodes;
		record_grads(&c);
		if (g->nnodes > before)
			place_accumulates(g, before);
	} else {
		/* everything built was appended: drop it */
		g->nnodes = nn;
		g->ntensors = nt;
	}
	free(var);
	free(c.needs);
	free(c.grad);
	free(c.partial);
	free(c.partial_from);
	ir_reindex(g);
	return ok;
}
