/*
 * optimizer.c - the optimizer step of a training program: one SGD or
 * AdamW node (ir/ops.def, kernels in runtime/k_optim.c) per trainable
 * weight, after backward, updating the weight in place from its gradient,
 * with its optimizer state (SGD's momentum buffer, AdamW's two moments) as
 * TK_STATE tensors of the weight's local shape: a tensor-parallel rank
 * keeps the state of its own slice and updates only that slice.
 *
 * The hyper-parameters are -train's (-lr, -momentum, -weight-decay,
 * -beta1, -beta2, -eps) with torch.optim's defaults: weight decay 0 for
 * SGD and 0.01 for AdamW.
 *
 * Needs: autodiff (Graph.grads; grad-sync's averaged ones with replicas).
 * Guarantees: phase=opt nodes at the end of the graph, outputs that alias
 * their inputs (the emitter binds output i to input i's storage: weight,
 * then state).  Without gradients it does nothing.
 */
#include <stdio.h>
#include <stdlib.h>

#include "passes/passes.h"

static TensorId
state(Graph *g, TensorId w, const char *what)
{
	char name[512];
	snprintf(name, sizeof name, "%s.%s", g->tensors[w].name, what);
	TensorId t = ir_add_tensor(g, name, TK_STATE, g->tensors[w].dtype);
	ir_set_shape(&g->tensors[t], g->tensors[w].rank, g->tensors[w].dims);
	return t;
}

static TensorId
updated(Graph *g, TensorId src)
{
	char name[512];
	snprintf(name, sizeof name, "%s:new", g->tensors[src].name);
	return ir_add_tensor(g, name, TK_VALUE, g->tensors[src].dtype);
}

static void
set_float(Graph *g, NodeId n, const char *name, double v)
{
	ir_set_attr(g, n, name, ATTR_FLOAT)->f = (float)v;
}

/* One update of weight w from gradient gr, in `stage` (subgraph sub);
 * suffix names the state of a second stage's copy ("" for the first). */
static bool
add_update(Graph *g, const TrainRequest *t, TensorId w, TensorId gr, int stage, int sub,
    const char *suffix)
{
	bool adam = t->optimizer == OPT_ADAMW;
	double wd = t->weight_decay >= 0 ? t->weight_decay : adam ? 0.01 : 0;
	TensorId in[4], out[3];
	int nin, nout;
	char name[512], what[64];
	snprintf(name, sizeof name, "/optimizer/%s%s", g->tensors[w].name, suffix);
	in[0] = w;
	in[1] = gr;
	out[0] = updated(g, w);
	if (*suffix) /* the copy's new weight: another name */
		g->tensors[out[0]].name = ir_strdup(&g->arena, name);
	if (adam) {
		snprintf(what, sizeof what, "exp_avg%s", suffix);
		in[2] = state(g, w, what);
		snprintf(what, sizeof what, "exp_avg_sq%s", suffix);
		in[3] = state(g, w, what);
		out[1] = updated(g, in[2]);
		out[2] = updated(g, in[3]);
		nin = 4, nout = 3;
	} else if (t->momentum != 0) {
		snprintf(what, sizeof what, "momentum_buffer%s", suffix);
		in[2] = state(g, w, what);
		out[1] = updated(g, in[2]);
		nin = 3, nout = 2;
	} else {
		nin = 2, nout = 1;
	}
	NodeId n = ir_add_node(g, adam ? OP_AdamW : OP_SGD, name, nin, in, nout, out);
	g->nodes[n].phase = PHASE_OPT;
	g->nodes[n].subgraph = sub;
	g->nodes[n].stage = stage;
	set_float(g, n, "lr", t->lr);
	set_float(g, n, "weight_decay", wd);
	if (adam) {
		set_float(g, n, "beta1", t->beta1);
		set_float(g, n, "beta2", t->beta2);
		set_float(g, n, "eps", t->eps);
	} else {
		set_float(g, n, "momentum", t->momentum);
	}
	return ir_infer_node(g, n);
}

bool
pass_optimizer(Graph *g, PassCtx *cx)
{
	const TrainRequest *t = &cx->train;
	if (g->ngrads == 0 || ir_has_phase(g, PHASE_OPT)) /* a training IR file: done */
		return true;
	ir_reindex(g);
	int ngrads = g->ngrads;
	for (int i = 0; i < ngrads; i++) {
		TensorId w = g->grads[i].weight, gr = g->grads[i].grad;
		NodeId p = g->tensors[gr].producer; /* the weight's stage: its gradient's */
		int stage = p != IR_NONE ? g->nodes[p].stage : IR_NONE;
		int sub = p != IR_NONE ? g->nodes[p].subgraph : IR_NONE;
		if (!add_update(g, t, w, gr, stage, sub, ""))
			return false;
		/* A weight read by several pipeline stages (a tied embedding) has
		 * a copy in each: the others apply the same update to theirs from
		 * the same gradient (the schedule sends it), with their own state,
		 * so the copies stay equal. */
		if (g->mesh.pp <= 1 || stage == IR_NONE)
			continue;
		bool *done = calloc(g->mesh.pp + 1, 1);
		done[stage] = true;
		for (int u = 0; u < g->nusers[w]; u++) {
			Node *nd = &g->nodes[g->users[w][u]];
			if (nd->dead || nd->phase != PHASE_FWD || nd->stage < 0 || nd->stage >= g->mesh.pp ||
			    done[nd->stage])
				continue;
			done[nd->stage] = true;
			char suffix[32];
			snprintf(suffix, sizeof suffix, ".stage%d", nd->stage);
			if (!add_update(g, t, w, gr, nd->stage, nd->subgraph, suffix)) {
				free(done);
				return false;
			}
		}
		free(done);
	}
	ir_reindex(g);
	return true;
}
