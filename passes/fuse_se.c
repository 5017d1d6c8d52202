/*
 * fuse_se.c - a squeeze-and-excitation block (MobileNetV3's, EfficientNet's,
 * SE-ResNet's) as one FusedSqueezeExcite.
 *
 * Needs: shaped graph, after fuse-conv (the block's two 1x1 convolutions
 * carry their activations as FusedConv); passes/fuse.h says where fusion
 * may happen.  The pattern, each of s, h and e read only by the next node:
 *
 *   s = GlobalAveragePool(x)          x f32 [N, C, spatial...]
 *   h = FusedConv(s, W1, B1) {act}    W1 [R, C, 1...], h [N, R, 1...]
 *   e = FusedConv(h, W2, B2) {gate}   W2 [C, R, 1...], e [N, C, 1...]
 *   y = Mul(x, e) or Mul(e, x)
 *
 * (either convolution may be a plain Conv: no activation; neither may have
 * a residual or groups).  y = FusedSqueezeExcite(x, W1, W2, B1, B2)
 * {activation, activation_params: act's; gate, gate_params: gate's} at the
 * Mul.  The kernel (runtime/k_se.c) runs the four steps in one team of
 * threads instead of four kernels, three of them too small to split.
 * Guarantees: the same function (sums in another order).
 */
#include "passes/fuse.h"

/* Conv node c as the block's 1x1 from `in` [N, k, 1...] to [N, o, 1...]:
 * group 1, no residual, no explicit pads; sets *o.  (On a 1x1 input to a
 * 1x1 output a 1x1 kernel's stride, dilation and auto_pad do not matter;
 * pads may: begin 1, end 0 at stride 2 reads only the pad.) */
static bool
is_1x1(Graph *g, NodeId c, TensorId in, int64_t k, int64_t *o)
{
	Node *cn = &g->nodes[c];
	if ((cn->op != OP_Conv && cn->op != OP_FusedConv) || cn->in[0] != in ||
	    (cn->op == OP_FusedConv && cn->nin > 3 && cn->in[3] != IR_NONE) ||
	    ir_attr_int(g, c, "group", 1) != 1)
		return false;
	Tensor *w = &g->tensors[cn->in[1]], *y = &g->tensors[cn->out[0]];
	Tensor *x = &g->tensors[in];
	if (w->rank != x->rank || y->rank != x->rank || w->dtype != DT_F32 ||
	    y->dtype != DT_F32 || w->dims[1] != k || y->dims[0] != x->dims[0] ||
	    y->dims[1] != w->dims[0])
		return false;
	for (int d = 2; d < x->rank; d++)
		if (w->dims[d] != 1 || x->dims[d] != 1 || y->dims[d] != 1)
			return false;
	const Attr *pads = ir_attr(g, c, "pads");
	for (int i = 0; pads && i < pads->n; i++)
		if (pads->is[i] != 0)
			return false;
	*o = w->dims[0];
	return true;
}

/* The block ending at Mul node mul, with x its operand k. */
static bool
fuse_at(Graph *g, NodeId mul, int k)
{
	Node *m = &g->nodes[mul];
	TensorId x = m->in[k], e = m->in[1 - k], y = m->out[0];
	Tensor *xt = &g->tensors[x];
	if (x == e || xt->rank < 3 || !fuse_same_type(xt, &g->tensors[y]))
		return false;
	NodeId c2 = fuse_conv_producer(g, e);
	if (c2 == IR_NONE || fuse_sole_user(g, e) != mul || !fuse_same_place(g, c2, mul))
		return false;
	TensorId h = g->nodes[c2].in[0];
	NodeId c1 = fuse_conv_producer(g, h);
	if (c1 == IR_NONE || fuse_sole_user(g, h) != c2 || !fuse_same_place(g, c1, mul))
		return false;
	TensorId s = g->nodes[c1].in[0];
	NodeId gap = fuse_producer(g, s, OP_GlobalAveragePool);
	if (gap == IR_NONE || g->nodes[gap].in[0] != x || fuse_sole_user(g, s) != c1 ||
	    !fuse_same_place(g, gap, mul))
		return false;
	int64_t C = xt->dims[1], R, C2;
	if (!is_1x1(g, c1, s, C, &R) || !is_1x1(g, c2, h, R, &C2) || C2 != C)
		return false;
	Node *n1 = &g->nodes[c1], *n2 = &g->nodes[c2];
	/* the optional biases last: an absent B1 is an empty input 3 */
	TensorId in[5] = {x, n1->in[1], n2->in[1], n1->nin > 2 ? n1->in[2] : IR_NONE,
		n2->nin > 2 ? n2->in[2] : IR_NONE};
	fuse_become(g, mul, OP_FusedSqueezeExcite, m->name);
	fuse_copy_act(g, c1, mul, "activation", "activation_params");
	fuse_copy_act(g, c2, mul, "gate", "gate_params");
	fuse_set_inputs(g, mul, in[4] != IR_NONE ? 5 : in[3] != IR_NONE ? 4 : 3, in);
	g->nodes[gap].dead = g->nodes[c1].dead = g->nodes[c2].dead = true;
	return true;
}

/* A block ending at Mul node n, x either operand. */
static bool
fuse_one(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	return nd->nin == 2 && g->tensors[nd->out[0]].dtype == DT_F32 &&
	    (fuse_at(g, n, 0) || fuse_at(g, n, 1));
}

bool
pass_fuse_se(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_Mul, OP_Mul, fuse_one);
}
