/*
 * infer_train.c - arity and shapes of tapc's training ops (OPK_TRAIN in
 * ir/ops.def): the optimizers, and the gradient ops autodiff makes.
 *
 * Needs the node's inputs typed.  The optimizers write their results into
 * their inputs' storage (output i is input i), so their outputs have the
 * inputs' types.  Errors go through diag_node, as in ir/infer.c.
 */
#include <string.h>

#include "ir/ir.h"

static Tensor *
input(Graph *g, NodeId n, int i)
{
	Node *nd = &g->nodes[n];
	return i < nd->nin && nd->in[i] != IR_NONE ? &g->tensors[nd->in[i]] : NULL;
}

/* Output i gets input j's type. */
static void
like(Graph *g, NodeId n, int i, int j)
{
	Tensor *x = input(g, n, j), *y = &g->tensors[g->nodes[n].out[i]];
	y->dtype = x->dtype;
	ir_set_shape(y, x->rank, x->dims);
}

static bool
same_type(Graph *g, NodeId n, int i, int j)
{
	Tensor *a = input(g, n, i), *b = input(g, n, j);
	if (a->dtype == b->dtype && a->rank == b->rank &&
	    !memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank))
		return true;
	char ta[IR_TYPESTR], tb[IR_TYPESTR];
	diag_node(g, n, "input %d is %s, expected %s like input %d", j, ir_typestr(b, tb),
	    ir_typestr(a, ta), i);
	return false;
}

/*
 * SGD(weight, grad[, momentum]) -> (weight'[, momentum']): the momentum
 * buffer with momentum != 0.  AdamW(weight, grad, m, v) -> (weight', m',
 * v').  Every input a float tensor of the weight's type.
 */
static bool
infer_optimizer(Graph *g, NodeId n, int nin, int nout)
{
	Node *nd = &g->nodes[n];
	if (nd->nin != nin || nd->nout != nout) {
		diag_node(g, n, "expected %d inputs and %d outputs, got %d and %d", nin, nout, nd->nin,
		    nd->nout);
		return false;
	}
	for (int i = 0; i < nin; i++)
		if (!input(g, n, i)) {
			diag_node(g, n, "input %d is missing", i);
			return false;
		}
	if (input(g, n, 0)->dtype != DT_F32 && input(g, n, 0)->dtype != DT_F64) {
		char t[IR_TYPESTR];
		diag_node(g, n, "input 0 is %s: the optimizers update float weights",
		    ir_typestr(input(g, n, 0), t));
		return false;
	}
	for (int i = 1; i < nin; i++)
		if (!same_type(g, n, 0, i))
			return false;
	for (int i = 0; i < nout; i++)
		if (nd->out[i] != IR_NONE)
			like(g, n, i, i);
	return true;
}

bool
ir_infer_train(Graph *g, NodeId n)
{
	switch (g->nodes[n].op) {
	case OP_SGD: {
		bool momentum = ir_attr_float(g, n, "momentum", 0) != 0;
		return infer_optimizer(g, n, momentum ? 3 : 2, momentum ? 2 : 1);
	}
	case OP_AdamW:
		return infer_optimizer(g, n, 4, 3);
	default:
		diag_node(g, n, "no shape inference for %s", ir_op_name(g->nodes[n].op));
		return false;
	}
}
