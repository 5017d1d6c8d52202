/*
 * fuse_norm.c - find the LayerNorm torch exports below opset 17 as nine
 * nodes and make it one FusedLayerNorm.
 *
 * Needs: shaped graph; passes/fuse.h says where fusion may happen.  The
 * pattern, over the last axis of x (keepdims):
 *
 *   mu = ReduceMean(x)      d = Sub(x, mu)       p = Pow(d, 2)
 *   v = ReduceMean(p)       e = Add(v, eps)      s = Sqrt(e)
 *   n = Div(d, s)           m = Mul(n, scale)    y = Add(m, bias)
 *
 * with eps a scalar constant and scale, bias f32 weights or constants of
 * the axis length; every intermediate read only inside the pattern (d by
 * the Pow and the Div).  y = FusedLayerNorm(x, scale, bias) {axis=-1,
 * epsilon=eps} at the final Add, LayerNormalization's kernel: one pass to
 * reduce and one to normalize instead of nine.  Guarantees: the same
 * function up to the rounding of the mean and variance.
 */
#include "passes/fuse.h"

/* n is a ReduceMean over the last axis of its input, keeping dims. */
static bool
mean_last(Graph *g, NodeId n)
{
	Node *nd = &g->nodes[n];
	if (nd->op != OP_ReduceMean || !ir_attr_int(g, n, "keepdims", 1))
		return false;
	int r = g->tensors[nd->in[0]].rank;
	const Attr *a = ir_attr(g, n, "axes");
	int64_t axis;
	if (a && a->type == ATTR_INTS && a->n == 1)
		axis = a->is[0];
	else if (!a && nd->nin > 1 && nd->in[1] != IR_NONE && ir_numel(&g->tensors[nd->in[1]]) == 1 &&
	    g->tensors[nd->in[1]].dtype == DT_I64 && ir_value(g, nd->in[1]))
		axis = ((const int64_t *)ir_value(g, nd->in[1]))[0];
	else
		return false;
	return r >= 1 && (axis == -1 || axis == r - 1);
}

static bool
is_vec(Graph *g, TensorId t, int64_t n)
{
	Tensor *tt = &g->tensors[t];
	return (tt->kind == TK_WEIGHT || tt->kind == TK_CONST) && tt->dtype == DT_F32 &&
	    tt->rank == 1 && tt->dims[0] == n;
}

/* The other operand of binary node n than t (IR_NONE if both are t). */
static TensorId
other(Graph *g, NodeId n, TensorId t)
{
	Node *nd = &g->nodes[n];
	return nd->in[0] == t ? nd->in[1] : nd->in[1] == t ? nd->in[0] : IR_NONE;
}

/* The pattern from ReduceMean mu, made one FusedLayerNorm (fuse-norm's;
 * fuse-train's too). */
bool
fuse_layernorm(Graph *g, NodeId mu)
{
	Node *m0 = &g->nodes[mu];
	if (!mean_last(g, mu))
		return false;
	TensorId x = m0->in[0];
	Tensor *xt = &g->tensors[x];
	if (xt->dtype != DT_F32)
		return false;
	int64_t len = xt->dims[xt->rank - 1];
	NodeId sub = fuse_sole_user(g, m0->out[0]);
	if (sub == IR_NONE || g->nodes[sub].op != OP_Sub || g->nodes[sub].in[0] != x ||
	    g->nodes[sub].in[1] != m0->out[0])
		return false;
	TensorId d = g->nodes[sub].out[0];
	if (g->nusers[d] != 2 || ir_is_output(g, d))
		return false;
	NodeId pw = g->users[d][0], dv = g->users[d][1];
	if (g->nodes[pw].op != OP_Pow) {
		NodeId t = pw;
		pw = dv;
		dv = t;
	}
	float c;
	if (g->nodes[pw].op != OP_Pow || g->nodes[pw].in[0] != d ||
	    !fuse_scalar(g, g->nodes[pw].in[1], &c) || c != 2.0f)
		return false;
	NodeId m1 = fuse_sole_user(g, g->nodes[pw].out[0]);
	if (m1 == IR_NONE || !mean_last(g, m1))
		return false;
	NodeId ad = fuse_sole_user(g, g->nodes[m1].out[0]);
	float eps;
	if (ad == IR_NONE || g->nodes[ad].op != OP_Add ||
	    !fuse_scalar(g, other(g, ad, g->nodes[m1].out[0]), &eps))
		return false;
	NodeId sq = fuse_sole_user(g, g->nodes[ad].out[0]);
	if (sq == IR_NONE || g->nodes[sq].op != OP_Sqrt || fuse_sole_user(g, g->nodes[sq].out[0]) != dv ||
	    g->nodes[dv].op != OP_Div || g->nodes[dv].in[0] != d)
		return false;
	NodeId mul = fuse_sole_user(g, g->nodes[dv].out[0]);
	if (mul == IR_NONE || g->nodes[mul].op != OP_Mul)
		return false;
	TensorId scale = other(g, mul, g->nodes[dv].out[0]);
	if (scale == IR_NONE || !is_vec(g, scale, len))
		return false;
	NodeId add = fuse_sole_user(g, g->nodes[mul].out[0]);
	if (add == IR_NONE || g->nodes[add].op != OP_Add)
		return false;
	TensorId bias = other(g, add, g->nodes[mul].out[0]);
	if (bias == IR_NONE || !is_vec(g, bias, len))
		return false;
	NodeId all[9] = {mu, sub, pw, m1, ad, sq, dv, mul, add};
	for (int i = 1; i < 9; i++)
		if (!fuse_same_place(g, mu, all[i]))
			return false;
	fuse_become(g, add, OP_FusedLayerNorm, g->nodes[sub].name);
	ir_set_attr(g, add, "axis", ATTR_INT)->i = -1;
	ir_set_attr(g, add, "epsilon", ATTR_FLOAT)->f = eps;
	TensorId in[3] = {x, scale, bias};
	fuse_set_inputs(g, add, 3, in);
	for (int i = 0; i < 8; i++)
		g->nodes[all[i]].dead = true;
	return true;
}

bool
pass_fuse_norm(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_ReduceMean, OP_ReduceMean, fuse_layernorm);
}
