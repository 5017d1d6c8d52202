/*
 * fuse_softmax.c - scale, mask and softmax of attention scores as one
 * FusedSoftmax.
 *
 * Needs: shaped graph; passes/fuse.h says where fusion may happen.  A
 * Softmax over the last axis of f32 t, where t (read only by it) is
 *
 *   Add(s, mask)               mask f32, broadcasting to t (BERT's padding mask)
 *   Where(mask, fill, s)       mask bool, fill a scalar constant (GPT's causal
 *                              mask with -inf)
 *   or s itself,
 *
 * and s (read only there) is Mul(x, c) or Div(x, c) by a scalar constant c,
 * or anything else (scale 1).  y = FusedSoftmax(x, mask) {scale=c,
 * divide=1 for Div, fill} at the Softmax: one pass over the scores instead
 * of three or four.  Guarantees: the same function, the same f32
 * operations in the same order.
 */
#include "passes/fuse.h"

static bool
fuse_one(Graph *g, NodeId sm)
{
	Node *s = &g->nodes[sm];
	TensorId t = s->in[0];
	Tensor *tt = &g->tensors[t];
	if (tt->dtype != DT_F32 || tt->rank < 1)
		return false;
	int64_t axis = ir_attr_int(g, sm, "axis", g->opset >= 13 ? -1 : 1);
	if (axis != -1 && axis != tt->rank - 1)
		return false;
	TensorId x = t, mask = IR_NONE;
	float fill = 0, scale = 1, c;
	bool divide = false;
	NodeId dead[2] = {IR_NONE, IR_NONE};
	NodeId p = tt->kind == TK_VALUE ? tt->producer : IR_NONE;
	if (p != IR_NONE && fuse_sole_user(g, t) == sm && fuse_same_place(g, p, sm)) {
		Node *pn = &g->nodes[p];
		if (pn->op == OP_Add) {
			/* the scores are the operand of t's type produced by a scale or
			 * anything; the mask the other, broadcasting */
			int k = fuse_same_type(&g->tensors[pn->in[0]], tt) ? 0 : 1;
			TensorId m = pn->in[1 - k];
			if (fuse_same_type(&g->tensors[pn->in[k]], tt) && m != pn->in[k] &&
			    g->tensors[m].dtype == DT_F32) {
				x = pn->in[k];
				mask = m;
				dead[0] = p;
			}
		} else if (pn->op == OP_Where && fuse_scalar(g, pn->in[1], &fill) &&
		    fuse_same_type(&g->tensors[pn->in[2]], tt)) {
			x = pn->in[2];
			mask = pn->in[0];
			dead[0] = p;
		}
	}
	NodeId q = g->tensors[x].kind == TK_VALUE ? g->tensors[x].producer : IR_NONE;
	if (q != IR_NONE && fuse_sole_user(g, x) == (dead[0] != IR_NONE ? dead[0] : sm) &&
	    fuse_same_place(g, q, sm) &&
	    (g->nodes[q].op == OP_Mul || g->nodes[q].op == OP_Div)) {
		Node *qn = &g->nodes[q];
		bool div = qn->op == OP_Div;
		int k = fuse_scalar(g, qn->in[1], &c) ? 0 : !div && fuse_scalar(g, qn->in[0], &c) ? 1 : -1;
		if (k >= 0 && fuse_same_type(&g->tensors[qn->in[k]], &g->tensors[x])) {
			x = qn->in[k];
			scale = c;
			divide = div;
			dead[1] = q;
		}
	}
	if (dead[0] == IR_NONE && dead[1] == IR_NONE)
		return false;
	const char *name = s->name;
	fuse_become(g, sm, OP_FusedSoftmax, name);
	ir_set_attr(g, sm, "axis", ATTR_INT)->i = -1;
	if (scale != 1 || divide)
		ir_set_attr(g, sm, "scale", ATTR_FLOAT)->f = scale;
	if (divide)
		ir_set_attr(g, sm, "divide", ATTR_INT)->i = 1;
	if (mask != IR_NONE && g->tensors[mask].dtype == DT_BOOL)
		ir_set_attr(g, sm, "fill", ATTR_FLOAT)->f = fill;
	TensorId in[2] = {x, mask};
	fuse_set_inputs(g, sm, mask != IR_NONE ? 2 : 1, in);
	for (int i = 0; i < 2; i++)
		if (dead[i] != IR_NONE)
			g->nodes[dead[i]].dead = true;
	return true;
}

bool
pass_fuse_softmax(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_Softmax, OP_Softmax, fuse_one);
}
