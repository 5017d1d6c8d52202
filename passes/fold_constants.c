/*
 * fold_constants.c - replace nodes whose values are known by constants.
 *
 * Needs: a verified, shape-inferred graph.  Shape inference already
 * evaluated shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape chains, ConstantOfShape, Range, Constant...) where it could; this
 * pass evaluates what is still unknown (an IR read back from text), then
 * turns each fully known node into inline constants and drops it.
 * An If whose condition is known is replaced by its chosen branch.
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

/*
 * An If whose condition is known: its chosen branch's nodes join the
 * region around the If (top level, or an enclosing branch), the other
 * branch's nodes go, and every reader of an If output reads the chosen
 * branch's value.  A graph output that is an If output takes the branch
 * value's tensor and its name, unless that tensor is not the branch's own
 * (an outer value or a constant): then the If stays, and the program
 * chooses at run time.  True if it inlined.
 */
static bool
inline_if(Graph *g, NodeId id)
{
	Node *nd = &g->nodes[id];
	const uint8_t *c = ir_value(g, nd->in[0]);
	if (!c)
		return false;
	int k = nd->nout, pick = *c ? 0 : 1;
	for (int j = 0; j < k; j++) {
		TensorId src = nd->in[1 + pick * k + j];
		NodeId p = g->tensors[src].producer;
		bool own = p != IR_NONE && g->nodes[p].region == nd->owns && g->nodes[p].branch == pick;
		for (int i = 0; i < g->noutputs; i++)
			if (g->outputs[i] == nd->out[j] && !own)
				return false;
	}
	for (NodeId m = 0; m < g->nnodes; m++) {
		Node *x = &g->nodes[m];
		if (x->region != nd->owns)
			continue;
		if (x->branch != pick) {
			x->dead = true;
		} else {
			x->region = nd->region;
			x->branch = nd->branch;
		}
	}
	for (int j = 0; j < k; j++) {
		TensorId o = nd->out[j], src = nd->in[1 + pick * k + j];
		if (o == IR_NONE)
			continue;
		ir_replace_uses(g, o, src);
		for (int i = 0; i < g->noutputs; i++)
			if (g->outputs[i] == o) {
				g->outputs[i] = src;
				g->tensors[src].name = g->tensors[o].name;
			}
	}
	nd->dead = true;
	return true;
}

bool
pass_fold_constants(Graph *g, PassCtx *cx)
{
	(void)cx;
	bool changed = false;
	for (NodeId id = 0; id < g->nnodes; id++)
		if (!g->nodes[id].dead && g->nodes[id].op == OP_If && inline_if(g, id))
			changed = true;
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
