/*
 * fold_qdq.c - fold the fake quantization of a weight into the weight.
 *
 * Needs: shaped graph; runs after planning, first of the fusions
 * (passes/fuse.h).  A QDQ model exported from quantization-aware training
 * (torch's fake quantization) quantizes each f32 weight on every run:
 *
 *     W' = DequantizeLinear(QuantizeLinear(W, s, z), s2, z2)
 *
 * with W, the scales and the zero points weights or constants.  This pass
 * computes W' here, element for element the kernels' float arithmetic
 * (runtime/k_elementwise.c: round half to even of W / s, saturated, a NaN
 * to the zero point; then (q - z2) * s2), so the result is the same bits,
 * and makes it a new f32 weight (inline data, like fold-bn's): the
 * Conv/Gemm/MatMul behind it then reads a weight, which its kernels keep
 * packed (oneDNN's reordered filters, the packed GEMM) instead of a tensor
 * computed on every run.  W' is W's size, so no memory grows; the old W
 * goes when nothing else reads it.  A DequantizeLinear of a stored int8
 * weight is left as it is: folding it would hold the weight as f32, 4x
 * its bytes.  Only whole (unsliced) parameters, per tensor or per axis,
 * and a DequantizeLinear output that is not a graph output.  Guarantees:
 * the same function, two nodes fewer per folded weight.
 */
#include <math.h>

#include "passes/fuse.h"

/* A quantization node's parameters: the scale (f32), the zero point's
 * bytes (NULL: 0) and type, and the walk of x: scale index (i / inner) %
 * per for element i. */
typedef struct {
	const float *s;
	const void *z;
	DType zt;
	int64_t per, inner;
} QParams;

/* The parameters of node n (a QuantizeLinear or DequantizeLinear) over
 * input 0 x; false when one is not a whole constant. */
static bool
qparams(Graph *g, NodeId n, QParams *p)
{
	Node *nd = &g->nodes[n];
	Tensor *x = &g->tensors[nd->in[0]], *s = &g->tensors[nd->in[1]];
	TensorId z = nd->nin > 2 ? nd->in[2] : IR_NONE;
	if (s->dtype != DT_F32 || !(p->s = fuse_whole(g, nd->in[1])))
		return false;
	p->z = NULL;
	p->zt = DT_UNDEF;
	if (z != IR_NONE) {
		if (!(p->z = fuse_whole(g, z)))
			return false;
		p->zt = g->tensors[z].dtype;
	}
	p->per = ir_numel(s);
	p->inner = 1;
	if (p->per > 1) {
		int64_t axis = ir_attr_int(g, n, "axis", 1);
		axis = axis < 0 ? axis + x->rank : axis;
		for (int d = (int)axis + 1; d < x->rank; d++)
			p->inner *= x->dims[d];
	}
	return true;
}

static int64_t
zero_point(const QParams *p, int64_t c)
{
	switch (p->zt) {
	case DT_U8: return ((const uint8_t *)p->z)[c];
	case DT_I8: return ((const int8_t *)p->z)[c];
	case DT_I32: return ((const int32_t *)p->z)[c];
	default: return 0;
	}
}

static bool
fold_one(Graph *g, NodeId dq)
{
	Node *d = &g->nodes[dq];
	TensorId qv = d->in[0], y = d->out[0];
	NodeId qn = fuse_producer(g, qv, OP_QuantizeLinear);
	if (qn == IR_NONE || !fuse_same_place(g, qn, dq) || ir_is_output(g, y))
		return false;
	Node *q = &g->nodes[qn];
	Tensor *wt = &g->tensors[q->in[0]], *qt = &g->tensors[qv];
	int64_t numel = ir_numel(wt);
	const float *W = fuse_param(g, q->in[0], numel);
	QParams a, b;
	if (!W || (qt->dtype != DT_U8 && qt->dtype != DT_I8) || !qparams(g, qn, &a) ||
	    !qparams(g, dq, &b))
		return false;
	const int lo = qt->dtype == DT_I8 ? -128 : 0, hi = qt->dtype == DT_I8 ? 127 : 255;
	float *w2 = ir_alloc(&g->arena, sizeof *w2 * (size_t)(numel ? numel : 1));
	for (int64_t i = 0; i < numel; i++) {
		int64_t c = a.per > 1 ? i / a.inner % a.per : 0;
		float r = rintf(W[i] / a.s[c]);
		int64_t z = zero_point(&a, c), v = z;
		if (r == r)
			v = r < (float)(lo - z) ? lo : r > (float)(hi - z) ? hi : (int64_t)r + z;
		int64_t c2 = b.per > 1 ? i / b.inner % b.per : 0;
		w2[i] = ((float)v - (float)zero_point(&b, c2)) * b.s[c2];
	}
	/* new tensors may move g->tensors: copy what is needed first */
	int rank = wt->rank;
	int64_t dims[IR_MAX_RANK];
	memcpy(dims, wt->dims, sizeof dims);
	const char *name = fuse_fresh_name(g, wt->name, "|qdq");
	TensorId nw = fuse_new_weight(g, name, rank, dims, w2);
	ir_replace_uses(g, y, nw);
	g->nodes[dq].dead = true;
	if (g->nusers[qv] == 1 && !ir_is_output(g, qv))
		g->nodes[qn].dead = true;
	return true;
}

bool
pass_fold_qdq(Graph *g, PassCtx *cx)
{
	(void)cx;
	return fuse_each(g, OP_DequantizeLinear, OP_DequantizeLinear, fold_one);
}
