/*
 * cost.c - what a node costs: floating-point operations and bytes moved.
 *
 * The shared vocabulary of the cost models (TAP's plan cost, the stage
 * times of pipe-shard and stage-assign, plan.json's predictions).  Counts
 * are from static shapes only; a multiply-add is two operations.
 */
#include "ir/ir.h"

int64_t
ir_node_flops(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	Tensor *y = n->nout && n->out[0] != IR_NONE ? &g->tensors[n->out[0]] : NULL;
	Tensor *a = n->nin && n->in[0] != IR_NONE ? &g->tensors[n->in[0]] : NULL;
	if (!y || !a || y->rank < 0 || a->rank < 0)
		return 0;
	switch (n->op) {
	case OP_MatMul:
		return 2 * ir_numel(y) * (a->rank ? a->dims[a->rank - 1] : 1);
	case OP_Gemm: {
		int64_t k = ir_attr_int(g, id, "transA", 0) ? a->dims[0] : a->dims[a->rank - 1];
		return 2 * ir_numel(y) * k;
	}
	case OP_Conv: {
		Tensor *w = &g->tensors[n->in[1]];
		int64_t k = 1;
		for (int i = 1; i < w->rank; i++)
			k *= w->dims[i];
		return 2 * ir_numel(y) * k;
	}
	case OP_Softmax: case OP_LogSoftmax: case OP_LayerNormalization:
		return 5 * ir_numel(y);
	default:
		return ir_op_kind(n->op) == OPK_REDUCE ? ir_numel(a) : ir_numel(y);
	}
}

int64_t
ir_node_bytes(Graph *g, NodeId id)
{
	Node *n = &g->nodes[id];
	int64_t b = 0;
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] != IR_NONE && g->tensors[n->in[i]].rank >= 0)
			b += ir_nbytes(&g->tensors[n->in[i]]);
	for (int i = 0; i < n->nout; i++)
		if (n->out[i] != IR_NONE && g->tensors[n->out[i]].rank >= 0)
			b += ir_nbytes(&g->tensors[n->out[i]]);
	return b;
}
