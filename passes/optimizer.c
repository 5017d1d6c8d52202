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

bool
pass_optimizer(Graph *g, PassCtx *cx)
{
	const TrainRequest *t = &cx->train;
	if (g->ngrads == 0 || ir_has_phase(g, PHASE_OPT)) /* a training IR file: done */
		return true;
	bool adam = t->optimizer == OPT_ADAMW;
	double wd = t->weight_decay >= 0 ? t->weight_decay : adam ? 0.01 : 0;
	for (int i = 0; i < g->ngrads; i++) {
		TensorId w = g->grads[i].weight, gr = g->grads[i].grad;
		TensorId in[4], out[3];
		int nin, nout;
		char name[512];
		snprintf(name, sizeof name, "/optimizer/%s", g->tensors[w].name);
		in[0] = w;
		in[1] = gr;
		out[0] = updated(g, w);
		if (adam) {
			in[2] = state(g, w, "exp_avg");
			in[3] = state(g, w, "exp_avg_sq");
			out[1] = updated(g, in[2]);
			out[2] = updated(g, in[3]);
			nin = 4, nout = 3;
		} else if (t->momentum != 0) {
			in[2] = state(g, w, "momentum_buffer");
			out[1] = updated(g, in[2]);
			nin = 3, nout = 2;
		} else {
			nin = 2, nout = 1;
		}
		NodeId n = ir_add_node(g, adam ? OP_AdamW : OP_SGD, name, nin, in, nout, out);
		g->nodes[n].phase = PHASE_OPT;
		NodeId p = g->tensors[gr].producer; /* the weight's stage: its gradient's */
		if (p != IR_NONE) {
			g->nodes[n].subgraph = g->nodes[p].subgraph;
			g->nodes[n].stage = g->nodes[p].stage;
		}
		set_float(g, n, "lr", t->lr);
		set_float(g, n, "weight_decay", wd);
		if (adam) {
			set_float(g, n, "beta1", t->beta1);
			set_float(g, n, "beta2", t->beta2);
			set_float(g, n, "eps", t->eps);
		} else {
			set_float(g, n, "momentum", t->momentum);
		}
		if (!ir_infer_node(g, n))
			return false;
	}
	ir_reindex(g);
	return true;
}
