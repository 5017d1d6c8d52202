/*
 * grad_build.c - the node builders autodiff's gradient rules share
 * (passes/grad.h): constants, attributes, and the shape operations in the
 * form the graph's opset takes.
 *
 * Needs: a GradCtx whose fwd is the node being differentiated.  ONNX moved
 * several attributes to inputs over the opsets (ReduceSum's axes at 13,
 * the other reductions' at 18, Squeeze/Unsqueeze's at 13, Split's at 13,
 * Slice's at 10, Pad's at 11); the builders write what the graph's opset
 * has, so a dump of the backward graph reads back and checks like a model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"

/* ------------------------------------------------------ the forward node */

TensorId
grad_in(GradCtx *c, NodeId n, int i)
{
	const Node *nd = &c->g->nodes[n];
	return i < nd->nin ? nd->in[i] : IR_NONE;
}

TensorId
grad_out(GradCtx *c, NodeId n, int i)
{
	return c->g->nodes[n].out[i];
}

/* A scalar constant of t's dtype. */
TensorId
grad_num(GradCtx *c, TensorId t, double v)
{
	return grad_scalar(c, grad_t(c, t)->dtype, v);
}

/* Hand input i its contribution. */
void
grad_give(GradCtx *c, NodeId n, int i, TensorId contribution)
{
	grad_accumulate(c, grad_in(c, n, i), contribution, n);
}

/* Hand input i dy summed to its shape, when it wants a gradient. */
void
grad_give_sum(GradCtx *c, NodeId n, int i, TensorId dy)
{
	if (grad_wants(c, n, i))
		grad_give(c, n, i, grad_sum_to(c, dy, grad_in(c, n, i)));
}

int
grad_rank(GradCtx *c, TensorId t)
{
	return grad_t(c, t)->rank;
}

/* dims of t copied out (the tensor array may move while building). */
int
grad_dims(GradCtx *c, TensorId t, int64_t *dims)
{
	const Tensor *tt = grad_t(c, t);
	memcpy(dims, tt->dims, sizeof tt->dims[0] * IR_MAX_RANK);
	return tt->rank;
}

/*
 * An integer list from input slot (a known value) or attribute name:
 * the count, -1 when neither is there.  Shapes are static in tapc, so an
 * input the forward node's shape depended on is known.
 */
int
grad_int_arg(GradCtx *c, NodeId n, int slot, const char *name, int64_t *out, int max)
{
	TensorId t = slot >= 0 ? grad_in(c, n, slot) : IR_NONE;
	if (t != IR_NONE) {
		const void *v = ir_value(c->g, t);
		const Tensor *tt = grad_t(c, t);
		int64_t cnt = ir_numel(tt);
		if (!v || (tt->dtype != DT_I64 && tt->dtype != DT_I32) || cnt > max)
			die("autodiff: input %d of '%s' is not a known list", slot, c->g->nodes[n].name);
		for (int64_t i = 0; i < cnt; i++)
			out[i] = tt->dtype == DT_I64 ? ((const int64_t *)v)[i] : ((const int32_t *)v)[i];
		return (int)cnt;
	}
	const Attr *a = name ? ir_attr(c->g, n, name) : NULL;
	if (!a)
		return -1;
	if (a->type == ATTR_INT) {
		out[0] = a->i;
		return 1;
	}
	for (int i = 0; i < a->n && i < max; i++)
		out[i] = a->is[i];
	return a->n;
}

int64_t
grad_axis(int64_t a, int rank)
{
	return a < 0 ? a + rank : a;
}

/* ---------------------------------------------------------- attributes */

void
grad_set_int(GradCtx *c, NodeId n, const char *name, int64_t v)
{
	ir_set_attr(c->g, n, name, ATTR_INT)->i = v;
}

void
grad_set_float(GradCtx *c, NodeId n, const char *name, float v)
{
	ir_set_attr(c->g, n, name, ATTR_FLOAT)->f = v;
}

void
grad_set_ints(GradCtx *c, NodeId n, const char *name, int cnt, const int64_t *v)
{
	int64_t *copy = ir_alloc(&c->g->arena, sizeof *copy * (cnt + 1));
	memcpy(copy, v, sizeof *copy * cnt);
	Attr *a = ir_set_attr(c->g, n, name, ATTR_INTS);
	a->n = cnt;
	a->is = copy;
}

void
grad_set_str(GradCtx *c, NodeId n, const char *name, const char *s)
{
	ir_set_attr(c->g, n, name, ATTR_STRING)->s = ir_strdup(&c->g->arena, s);
}

void
grad_copy_attr(GradCtx *c, NodeId n, NodeId from, const char *name)
{
	const Attr *a = ir_attr(c->g, from, name);
	if (!a)
		return;
	Attr copy = *a;                 /* lists stay shared: the arena owns them */
	Attr *d = ir_set_attr(c->g, n, name, copy.type);
	copy.name = d->name;
	*d = copy;
}

/* ------------------------------------------------------------ nodes */

TensorId
grad_op1(GradCtx *c, Op op, TensorId a)
{
	return grad_finish(c, grad_begin(c, op, 1, &a, 1, NULL));
}

TensorId
grad_op2(GradCtx *c, Op op, TensorId a, TensorId b)
{
	TensorId in[2] = {a, b};
	return grad_finish(c, grad_begin(c, op, 2, in, 1, NULL));
}

TensorId
grad_op3(GradCtx *c, Op op, TensorId a, TensorId b, TensorId d)
{
	TensorId in[3] = {a, b, d};
	return grad_finish(c, grad_begin(c, op, 3, in, 1, NULL));
}

/* -------------------------------------------------------- constants */

/* IEEE half and bfloat16 from a float, rounding to nearest even. */
static uint16_t
to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
	int exp = (int)((x >> 23) & 0xff) - 127 + 15;
	if (((x >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000;
		int shift = 14 - exp;
		uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | (uint32_t)exp << 10 | mant >> 13, rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)h;
}

static uint16_t
to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static void
put_elem(DType dt, void *p, int64_t i, double v)
{
	switch (dt) {
	case DT_F32: ((float *)p)[i] = (float)v; break;
	case DT_F64: ((double *)p)[i] = v; break;
	case DT_F16: ((uint16_t *)p)[i] = to_f16((float)v); break;
	case DT_BF16: ((uint16_t *)p)[i] = to_bf16((float)v); break;
	case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case DT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
	default: die("autodiff: no constant of dtype %s", ir_dtype_name(dt));
	}
}

/* A new inline constant with the values v (or the integers iv). */
static TensorId
make_const(GradCtx *c, DType dt, int rank, const int64_t *dims, const double *v,
    const int64_t *iv)
{
	Graph *g = c->g;
	TensorId t = ir_add_tensor(g, "", TK_CONST, dt);
	Tensor *tt = &g->tensors[t];
	ir_set_shape(tt, rank, dims);
	int64_t n = ir_numel(tt);
	tt->data = DATA_INLINE;
	tt->length = n * ir_dtype_size(dt);
	tt->bytes = ir_alloc(&g->arena, (size_t)tt->length + 1);
	for (int64_t i = 0; i < n; i++) {
		if (iv)
			((int64_t *)tt->bytes)[i] = iv[i];
		else
			put_elem(dt, tt->bytes, i, v[i]);
	}
	return t;
}

TensorId
grad_scalar(GradCtx *c, DType dt, double v)
{
	return make_const(c, dt, 0, NULL, &v, NULL);
}

TensorId
grad_const(GradCtx *c, DType dt, int rank, const int64_t *dims, const double *v)
{
	return make_const(c, dt, rank, dims, v, NULL);
}

TensorId
grad_ints(GradCtx *c, int cnt, const int64_t *v)
{
	int64_t d = cnt;
	return make_const(c, DT_I64, 1, &d, NULL, v);
}

/* ---------------------------------------------------------- shapes */

/* A list given as an input (i64 constant) from opset `since`, else as
 * attribute name: add it to node n at input slot `slot`. */
static void
list_arg(GradCtx *c, NodeId n, int slot, int64_t since, const char *name, int cnt,
    const int64_t *v)
{
	if (c->g->opset >= since)
		c->g->nodes[n].in[slot] = grad_ints(c, cnt, v);
	else
		grad_set_ints(c, n, name, cnt, v);
}

TensorId
grad_reduce(GradCtx *c, Op op, TensorId x, int naxes, const int64_t *axes, bool keep)
{
	if (naxes == 0)
		return x;
	int64_t since = op == OP_ReduceSum ? 13 : 18;
	TensorId in[2] = {x, IR_NONE};
	NodeId n = grad_begin(c, op, c->g->opset >= since ? 2 : 1, in, 1, NULL);
	list_arg(c, n, 1, since, "axes", naxes, axes);
	grad_set_int(c, n, "keepdims", keep);
	return grad_finish(c, n);
}

TensorId
grad_reshape(GradCtx *c, TensorId x, int rank, const int64_t *dims)
{
	Tensor *t = grad_t(c, x);
	if (t->rank == rank && !memcmp(t->dims, dims, sizeof *dims * rank))
		return x;
	TensorId in[2] = {x, IR_NONE};
	NodeId n = grad_begin(c, OP_Reshape, c->g->opset >= 5 ? 2 : 1, in, 1, NULL);
	list_arg(c, n, 1, 5, "shape", rank, dims);
	return grad_finish(c, n);
}

TensorId
grad_reshape_like(GradCtx *c, TensorId x, TensorId like)
{
	Tensor *l = grad_t(c, like);
	int64_t dims[IR_MAX_RANK];
	memcpy(dims, l->dims, sizeof dims);
	return grad_reshape(c, x, l->rank, dims);
}

TensorId
grad_expand(GradCtx *c, TensorId x, int rank, const int64_t *dims)
{
	Tensor *t = grad_t(c, x);
	if (t->rank == rank && !memcmp(t->dims, dims, sizeof *dims * rank))
		return x;
	return grad_op2(c, OP_Expand, x, grad_ints(c, rank, dims));
}

TensorId
grad_expand_like(GradCtx *c, TensorId x, TensorId like)
{
	Tensor *l = grad_t(c, like);
	int64_t dims[IR_MAX_RANK];
	memcpy(dims, l->dims, sizeof dims);
	return grad_expand(c, x, l->rank, dims);
}

TensorId
grad_transpose(GradCtx *c, TensorId x, const int64_t *perm)
{
	int r = grad_t(c, x)->rank;
	bool id = true;
	for (int i = 0; i < r; i++)
		id = id && perm[i] == i;
	if (id)
		return x;
	NodeId n = grad_begin(c, OP_Transpose, 1, &x, 1, NULL);
	grad_set_ints(c, n, "perm", r, perm);
	return grad_finish(c, n);
}

TensorId
grad_unsqueeze(GradCtx *c, TensorId x, int naxes, const int64_t *axes)
{
	if (naxes == 0)
		return x;
	TensorId in[2] = {x, IR_NONE};
	NodeId n = grad_begin(c, OP_Unsqueeze, c->g->opset >= 13 ? 2 : 1, in, 1, NULL);
	list_arg(c, n, 1, 13, "axes", naxes, axes);
	return grad_finish(c, n);
}

TensorId
grad_cast(GradCtx *c, TensorId x, DType to)
{
	if (grad_t(c, x)->dtype == to)
		return x;
	NodeId n = grad_begin(c, OP_Cast, 1, &x, 1, NULL);
	grad_set_int(c, n, "to", to);
	return grad_finish(c, n);
}

TensorId
grad_slice(GradCtx *c, TensorId x, int cnt, const int64_t *starts, const int64_t *ends,
    const int64_t *axes)
{
	if (cnt == 0)
		return x;
	TensorId in[4] = {x, IR_NONE, IR_NONE, IR_NONE};
	bool inputs = c->g->opset >= 10;
	NodeId n = grad_begin(c, OP_Slice, inputs ? 4 : 1, in, 1, NULL);
	list_arg(c, n, 1, 10, "starts", cnt, starts);
	list_arg(c, n, 2, 10, "ends", cnt, ends);
	list_arg(c, n, 3, 10, "axes", cnt, axes);
	return grad_finish(c, n);
}

TensorId
grad_pad(GradCtx *c, TensorId x, const int64_t *pads)
{
	int r = grad_t(c, x)->rank;
	bool zero = true;
	for (int i = 0; i < 2 * r; i++)
		zero = zero && pads[i] == 0;
	if (zero)
		return x;
	TensorId in[2] = {x, IR_NONE};
	NodeId n = grad_begin(c, OP_Pad, c->g->opset >= 11 ? 2 : 1, in, 1, NULL);
	list_arg(c, n, 1, 11, c->g->opset >= 2 ? "pads" : "paddings", 2 * r, pads);
	return grad_finish(c, n);
}

TensorId
grad_zeros(GradCtx *c, TensorId like)
{
	Tensor *l = grad_t(c, like);
	int64_t dims[IR_MAX_RANK];
	int r = l->rank;
	memcpy(dims, l->dims, sizeof dims);
	return grad_expand(c, grad_scalar(c, l->dtype, 0), r, dims);
}

TensorId
grad_sum_to(GradCtx *c, TensorId dy, TensorId like)
{
	Tensor *y = grad_t(c, dy), *x = grad_t(c, like);
	int off = y->rank - x->rank, n = 0;
	int64_t axes[IR_MAX_RANK];
	if (off < 0)
		die("autodiff: %s cannot sum a rank %d gradient to rank %d",
		    ir_op_name(c->g->nodes[c->fwd].op), y->rank, x->rank);
	for (int i = 0; i < y->rank; i++)
		if (i < off || (x->dims[i - off] == 1 && y->dims[i] != 1))
			axes[n++] = i;
	TensorId s = grad_reduce(c, OP_ReduceSum, dy, n, axes, true);
	return grad_reshape_like(c, s, like);
}
