/*
 * fuse_dw.c - a 1x1 convolution and the depthwise one reading it (the
 * expand and depthwise layers of MobileNet's and EfficientNet's inverted
 * residual blocks) as one FusedConvDw.
 *
 * Needs: shaped graph, after fuse-conv (both convolutions carry their
 * activations as FusedConv); passes/fuse.h says where fusion may happen.
 * The pattern, t read only by the depthwise Conv:
 *
 *   t = FusedConv(x, W1, B1) {act1}   1x1: W1 [C, C1, 1...], stride 1, no
 *                                     pads, group 1, no residual
 *   y = FusedConv(t, W, B) {act}      depthwise: W [C, 1, k...], group C,
 *                                     no residual, 1 or 2 spatial dims,
 *                                     kernels up to 64 rows
 *
 * (either may be a plain Conv: no activation).  y = FusedConvDw(x, W1',
 * W, B1, B) {the depthwise Conv's attributes; expand_activation,
 * expand_activation_params: act1's} at the depthwise node, W1' [C1, C] W1
 * transposed here, at compile time (a new weight; W1 goes when nothing
 * else reads it).  The kernel (runtime/conv_dw.c) computes t's rows as
 * the depthwise taps read them, in blocks of 16 channels, and never
 * stores t: t is the block's largest tensor (4.5x x at MobileNetV3's
 * 16 -> 72 layer), and the depthwise kernel no longer transposes its
 * planes into channel blocks.  Guarantees: the same function (the 1x1's
 * sums in the same order, over the input channels).
 */
#include "passes/fuse.h"

/* Conv node c as the pattern's 1x1 from x [N, C1, spatial...] to its
 * output, whose dims it keeps: group 1, no residual, unit strides, no
 * pads; f32 filters W [C, C1, 1...] readable at compile time. */
static bool
is_expand(Graph *g, NodeId c)
{
	Node *cn = &g->nodes[c];
	if ((cn->op == OP_FusedConv && cn->nin > 3 && cn->in[3] != IR_NONE) ||
	    ir_attr_int(g, c, "group", 1) != 1)
		return false;
	Tensor *x = &g->tensors[cn->in[0]], *w = &g->tensors[cn->in[1]];
	Tensor *t = &g->tensors[cn->out[0]];
	if (x->dtype != DT_F32 || x->rank < 3 || x->rank > 4 || w->rank != x->rank ||
	    t->rank != x->rank || w->dims[1] != x->dims[1] ||
	    !fuse_param(g, cn->in[1], ir_numel(w)))
		return false;
	for (int d = 2; d < x->rank; d++)
		if (w->dims[d] != 1 || t->dims[d] != x->dims[d])
			return false;
	const Attr *st = ir_attr(g, c, "strides"), *pads = ir_attr(g, c, "pads");
	for (int i = 0; st && i < st->n; i++)
		if (st->is[i] != 1)
			return false;
	for (int i = 0; pads && i < pads->n; i++)
		if (pads->is[i] != 0)
			return false;
	return true;
}

/* Conv node d as the pattern's depthwise Conv: W [C, 1, k...] over C
 * channels in C groups, no residual, at most 64 kernel rows (the
 * kernel's limit). */
static bool
is_depthwise(Graph *g, NodeId d)
{
	Node *dn = &g->nodes[d];
	if (dn->op == OP_FusedConv && dn->nin > 3 && dn->in[3] != IR_NONE)
		return false;
	Tensor *t = &g->tensors[dn->in[0]], *w = &g->tensors[dn->in[1]];
	if (t->dtype != DT_F32 || t->rank < 3 || t->rank > 4 || w->rank != t->rank)
		return false;
	int64_t C = t->dims[1];
	return w->dims[0] == C && w->dims[1] == 1 && ir_attr_int(g, d, "group", 1) == C &&
	    (t->rank == 3 || w->dims[2] <= 64);
}

/* The pattern ending at depthwise node d, if it is one. */
static bool
fuse_at(Graph *g, NodeId d)
{
	if (!is_depthwise(g, d))
		return false;
	TensorId t = g->nodes[d].in[0];
	NodeId e = fuse_conv_producer(g, t);
	if (e == IR_NONE || fuse_sole_user(g, t) != d || !fuse_same_place(g, e, d) ||
	    !is_expand(g, e))
		return false;
	/* W1 [C, C1, 1...] transposed to [C1, C] */
	Node *en = &g->nodes[e];
	Tensor *w1 = &g->tensors[en->in[1]];
	const int64_t C = w1->dims[0], C1 = w1->dims[1];
	const float *W1 = fuse_param(g, en->in[1], ir_numel(w1));
	float *wt = ir_alloc(&g->arena, sizeof *wt * (size_t)(C * C1 > 0 ? C * C1 : 1));
	for (int64_t m = 0; m < C; m++)
		for (int64_t c = 0; c < C1; c++)
			wt[c * C + m] = W1[m * C1 + c];
	int64_t dims[2] = {C1, C};
	/* new tensors may move g->tensors: gather the inputs first */
	Node *dn = &g->nodes[d];
	TensorId in[5] = {en->in[0], IR_NONE, dn->in[1], en->nin > 2 ? en->in[2] : IR_NONE,
		dn->nin > 2 ? dn->in[2] : IR_NONE};
	const char *wname = w1->name;
	in[1] = fuse_new_weight(g, fuse_fresh_name(g, wname, "|T"), 2, dims, wt);
	/* the depthwise node becomes the FusedConvDw: its attributes (and
	 * activation) as they are, the 1x1's activation renamed */
	dn = &g->nodes[d];
	const Attr *attrs = dn->attr;
	int nattr = dn->nattr;
	fuse_become(g, d, OP_FusedConvDw, dn->name);
	for (int k = 0; k < nattr; k++)
		fuse_copy_attr(g, d, &attrs[k]);
	fuse_copy_act(g, e, d, "expand_activation", "expand_activation_params");
	fuse_set_inputs(g, d, in[4] != IR_NONE ? 5 : in[3] != IR_NONE ? 4 : 3, in);
	g->nodes[e].dead = true;
	return true;
}

bool
pass_fuse_dw(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_Conv, OP_FusedConv, fuse_at);
}
