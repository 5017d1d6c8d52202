/*
 * fold_constants.c - replace nodes whose values are known by constants.
 *
 * Needs: a verified, shape-inferred graph.  Shape inference already
 * evaluated shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape chains, ConstantOfShape, Range, Constant...) where it could; this
 * pass evaluates what is still unknown (an IR read back from text), then
 * turns each fully known node into inline constants and drops it.
 * Guarantees: no node remains whose outputs are all known and small.
 *
 * Floating-point weights are never read, and results over FOLD_MAX_ELEMS
 * elements stay as nodes: folding is for shapes and masks, not for copying
 * parameters into the IR.
 */
#include "passes/passes.h"

#define FOLD_MAX_ELEMS 4096

static bool
foldable(Graph *g, Node *n)
{
	int nout = 0;
	for (int i = 0; i < n->nout; i++) {
		TensorId t = n->out[i];
		if (t == IR_NONE)
			continue;
		if (!g->tensors[t].value || ir_numel(&g->tensors[t]) > FOLD_MAX_ELEMS)
			return false;
		nout++;
	}
	return nout > 0;
}

bool
pass_fold_constants(Graph *g, PassCtx *cx)
{
	(void)cx;
	bool changed = false;
	for (NodeId id = 0; id < g->nnodes; id++) {
		Node *n = &g->nodes[id];
		if (n->dead)
			continue;
		if (!foldable(g, n))
			ir_eval_node(g, id);
		if (!foldable(g, n))
			continue;
		for (int i = 0; i < n->nout; i++) {
			if (n->out[i] == IR_NONE)
				continue;
			Tensor *t = &g->tensors[n->out[i]];
			t->kind = TK_CONST;
			t->data = DATA_INLINE;
			t->bytes = t->value;
			t->length = ir_nbytes(t);
			t->producer = IR_NONE;
		}
		n->dead = true;
		changed = true;
	}
	if (changed)
		ir_compact(g);
	return true;
}
