/*
 * loss.c - the loss of a training program (-train, -loss): nodes after the
 * model's first output y that compute one scalar, Graph.loss, from y and a
 * new graph input "labels".
 *
 *   cross_entropy   labels int64, y's shape without its last axis:
 *                   loss = mean(-GatherElements(LogSoftmax(y, -1),
 *                                               Unsqueeze(labels, -1), -1))
 *                   torch's F.cross_entropy(y.reshape(-1, C), labels.reshape(-1))
 *   mse             labels like y: loss = mean((y - labels)^2), F.mse_loss
 *
 * The mean is over every element, so with data-parallel replicas each
 * computes the mean of its rows and the gradient all-reduce averages them
 * (equal rows per replica): the global mean's gradient.  The nodes are
 * ordinary ONNX operators at the model's opset, so every later pass (the
 * tensor-parallel plan, autodiff) treats them like the model's.
 *
 * Needs: shapes (verify).  Guarantees with -train: Graph.loss set, labels
 * the last graph input; the model's outputs stay its outputs.  Without
 * -train the pass does nothing.
 */
#include <string.h>

#include "passes/passes.h"

static TensorId
value(Graph *g, const char *name)
{
	return ir_add_tensor(g, name, TK_VALUE, DT_UNDEF);
}

static NodeId
node(Graph *g, Op op, const char *name, int nin, const TensorId *in, TensorId out)
{
	NodeId n = ir_add_node(g, op, name, nin, in, 1, &out);
	return n;
}

static TensorId
i64_const(Graph *g, int64_t v)
{
	TensorId t = ir_add_tensor(g, NULL, TK_CONST, DT_I64);
	int64_t d = 1;
	ir_set_shape(&g->tensors[t], 1, &d);
	Tensor *x = &g->tensors[t];
	x->data = DATA_INLINE;
	x->length = 8;
	x->bytes = ir_alloc(&g->arena, 16);
	memcpy(x->bytes, &v, 8);
	return t;
}

bool
pass_loss(Graph *g, PassCtx *cx)
{
	if (!cx->train.on)
		return true;
	if (g->loss != IR_NONE) {
		diag_file(g->model, "the graph has a loss already (a training IR file): -train adds one");
		return false;
	}
	if (g->noutputs < 1)
		die("loss: a graph without outputs");
	TensorId y = g->outputs[0];
	Tensor *yt = &g->tensors[y];
	char ty[IR_TYPESTR];
	if (yt->dtype != DT_F32 || yt->rank < 1) {
		diag_file(g->model, "-train: the loss needs the first output as f32 with at least one "
		    "axis; '%s' is %s", yt->name, ir_typestr(yt, ty));
		return false;
	}
	for (TensorId t = 0; t < g->ntensors; t++)
		if (g->tensors[t].name && strcmp(g->tensors[t].name, "labels") == 0) {
			diag_file(g->model, "-train: the model has a value named 'labels' already: the "
			    "labels input needs that name");
			return false;
		}
	bool ce = cx->train.loss == LOSS_CROSS_ENTROPY;
	if (ce && g->opset < 11) {
		diag_file(g->model, "-loss=cross_entropy needs opset 11 or later (GatherElements); the "
		    "model is opset %lld: export it again at a newer opset", (long long)g->opset);
		return false;
	}
	if (ce && yt->rank < 2) {
		diag_file(g->model, "-loss=cross_entropy: the first output '%s' is %s; it needs a batch "
		    "axis and a class axis", yt->name, ir_typestr(yt, ty));
		return false;
	}
	/* labels: int64 without the class axis, or y's type */
	TensorId lab = ir_add_tensor(g, "labels", TK_INPUT, ce ? DT_I64 : DT_F32);
	ir_set_shape(&g->tensors[lab], ce ? yt->rank - 1 : yt->rank, yt->dims);
	g->tensors[lab].sym0 = yt->sym0;
	ir_add_input(g, lab);

	NodeId first = g->nnodes;
	TensorId per; /* the per-element loss */
	if (ce) {
		NodeId n;
		TensorId logp = value(g, "loss/logp"), lu = value(g, "loss/labels"), pick = value(g, "loss/picked");
		n = node(g, OP_LogSoftmax, "/loss/LogSoftmax", 1, &y, logp);
		ir_set_attr(g, n, "axis", ATTR_INT)->i = -1;
		if (g->opset >= 13) {
			TensorId in[2] = {lab, i64_const(g, -1)};
			node(g, OP_Unsqueeze, "/loss/Unsqueeze", 2, in, lu);
		} else {
			n = node(g, OP_Unsqueeze, "/loss/Unsqueeze", 1, &lab, lu);
			Attr *a = ir_set_attr(g, n, "axes", ATTR_INTS);
			a->n = 1;
			a->is = ir_alloc(&g->arena, sizeof(int64_t));
			a->is[0] = -1;
		}
		TensorId in[2] = {logp, lu};
		n = node(g, OP_GatherElements, "/loss/GatherElements", 2, in, pick);
		ir_set_attr(g, n, "axis", ATTR_INT)->i = -1;
		per = value(g, "loss/nll");
		node(g, OP_Neg, "/loss/Neg", 1, &pick, per);
	} else {
		TensorId d = value(g, "loss/diff"), sq = value(g, "loss/square");
		TensorId in[2] = {y, lab};
		node(g, OP_Sub, "/loss/Sub", 2, in, d);
		TensorId in2[2] = {d, d};
		node(g, OP_Mul, "/loss/Mul", 2, in2, sq);
		per = sq;
	}
	/* the mean last: it is what batch analysis lets replicas compute apart */
	TensorId loss = value(g, "loss");
	NodeId n = node(g, OP_ReduceMean, "/loss/ReduceMean", 1, &per, loss);
	ir_set_attr(g, n, "keepdims", ATTR_INT)->i = 0;
	for (NodeId k = first; k < g->nnodes; k++)
		if (!ir_infer_node(g, k))
			return false;
	g->loss = loss;
	ir_reindex(g);
	return true;
}
