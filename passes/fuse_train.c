/*
 * fuse_train.c - on a training graph, before autodiff, two patterns torch
 * exports as many nodes become one node each, so that autodiff gives each
 * one gradient node instead of the score of elementwise nodes and
 * reductions the pieces' rules make:
 *
 *   the LayerNorm below opset 17, nine nodes (fuse_norm.c's pattern)
 *     -> FusedLayerNorm (LayerNormalization's kernel, at any opset: a
 *        training dump reads back); gradient LayerNormalizationGrad (dX,
 *        dScale and dBias in one pass over the rows)
 *   the erf GELU, Div by 1.41421354, Erf, Add 1, Mul, Mul 0.5
 *     (fuse_matmul.c's) -> FusedGelu; gradient GeluGrad (one pass)
 *
 * Needs: shaped graph, the loss (Graph.loss); runs after tp-rewrite and
 * stage-assign (each pattern inside one stage: passes/fuse.h) and before
 * autodiff.  An inference graph is left to the fusion passes after
 * planning, which fuse more (the GELU into its MatMul's epilogue).
 * Guarantees: the same function; the GELU with its nodes' f32
 * operations, the LayerNorm up to the rounding of the mean and variance
 * (as fuse-norm's).
 */
#include "passes/fuse.h"

/* div: the GELU's Div, reading its input y */
static bool
gelu(Graph *g, NodeId div)
{
	TensorId y = g->nodes[div].in[0];
	NodeId chain[4], to;
	float d;
	if (g->tensors[y].dtype != DT_F32 || (to = fuse_gelu(g, div, y, chain, &d)) == IR_NONE ||
	    d != 1.41421354f) /* FusedGelu's is torch's */
		return false;
	fuse_become(g, to, OP_FusedGelu, g->nodes[div].name);
	fuse_set_inputs(g, to, 1, &y);
	for (int i = 0; i < 4; i++)
		g->nodes[chain[i]].dead = true;
	return true;
}

bool
pass_fuse_train(Graph *g, PassCtx *cx)
{
	(void)cx;
	if (g->loss == IR_NONE)
		return true;
	return fuse_each_any(g, OP_ReduceMean, OP_ReduceMean, fuse_layernorm) &&
	    fuse_each_any(g, OP_Div, OP_Div, gelu);
}
