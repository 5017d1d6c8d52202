/*
 * infer_train.c - arity and shapes of tapc's training ops (OPK_TRAIN in
 * ir/ops.def): the optimizers, and the gradient ops autodiff makes.
 *
 * Needs the node's inputs typed.  The optimizers write their results into
 * their inputs' storage (output i is input i), so their outputs have the
 * inputs' types.  The gradient ops (docs/training.md) are checked as
 * closely as the kernels rely on: an IR file is untrusted, and its
 * attributes decide where the kernels read and write (a SliceGrad's
 * starts, a pool's window).  Errors go through diag_node, as in
 * ir/infer.c.
 */
#include <string.h>

#include "ir/ir.h"

static Tensor *
input(Graph *g, NodeId n, int i)
{
	Node *nd = &g->nodes[n];
	return i < nd->nin && nd->in[i] != IR_NONE ? &g->tensors[nd->in[i]] : NULL;
}

/* Output i gets input j's type. */
static void
like(Graph *g, NodeId n, int i, int j)
{
	Tensor *x = input(g, n, j), *y = &g->tensors[g->nodes[n].out[i]];
	y->dtype = x->dtype;
	ir_set_shape(y, x->rank, x->dims);
}

static bool
same_type(Graph *g, NodeId n, int i, int j)
{
	Tensor *a = input(g, n, i), *b = input(g, n, j);
	if (a->dtype == b->dtype && a->rank == b->rank &&
	    !memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank))
		return true;
	char ta[IR_TYPESTR], tb[IR_TYPESTR];
	diag_node(g, n, "input %d is %s, expected %s like input %d", j, ir_typestr(b, tb),
	    ir_typestr(a, ta), i);
	return false;
}

/*
 * SGD(weight, grad[, momentum]) -> (weight'[, momentum']): the momentum
 * buffer with momentum != 0.  AdamW(weight, grad, m, v) -> (weight', m',
 * v').  Every input a float tensor of the weight's type.
 */
static bool
infer_optimizer(Graph *g, NodeId n, int nin, int nout)
{
	Node *nd = &g->nodes[n];
	if (nd->nin != nin || nd->nout != nout) {
		diag_node(g, n, "expected %d inputs and %d outputs, got %d and %d", nin, nout, nd->nin,
		    nd->nout);
		return false;
	}
	for (int i = 0; i < nin; i++)
		if (!input(g, n, i)) {
			diag_node(g, n, "input %d is missing", i);
			return false;
		}
	if (input(g, n, 0)->dtype != DT_F32 && input(g, n, 0)->dtype != DT_F64) {
		char t[IR_TYPESTR];
		diag_node(g, n, "input 0 is %s: the optimizers update float weights",
		    ir_typestr(input(g, n, 0), t));
		return false;
	}
	for (int i = 1; i < nin; i++)
		if (!same_type(g, n, 0, i))
			return false;
	for (int i = 0; i < nout; i++)
		if (nd->out[i] != IR_NONE)
			like(g, n, i, i);
	return true;
}

/* ---------------------------------------------------- gradient ops */

static bool
arity(Graph *g, NodeId n, int nin, int nout)
{
	Node *nd = &g->nodes[n];
	if (nd->nin != nin || nd->nout != nout) {
		diag_node(g, n, "expected %d inputs and %d outputs, got %d and %d", nin, nout, nd->nin,
		    nd->nout);
		return false;
	}
	for (int i = 0; i < nin; i++)
		if (!input(g, n, i) || input(g, n, i)->rank < 0) {
			diag_node(g, n, "input %d is missing or has no shape", i);
			return false;
		}
	return true;
}

static bool
is_float(Graph *g, NodeId n, int i)
{
	Tensor *t = input(g, n, i);
	if (t->dtype == DT_F32 || t->dtype == DT_F64)
		return true;
	char ty[IR_TYPESTR];
	diag_node(g, n, "input %d is %s, expected f32 or f64", i, ir_typestr(t, ty));
	return false;
}

static bool
same_dims(const Tensor *t, int rank, const int64_t *dims)
{
	return t->rank == rank && !memcmp(t->dims, dims, sizeof *dims * rank);
}

/* Set output i (when present) to dtype and shape. */
static bool
set(Graph *g, NodeId n, int i, DType dt, int rank, const int64_t *dims)
{
	TensorId o = g->nodes[n].out[i];
	if (o == IR_NONE)
		return true;
	if (ir_shape_bytes(dt, rank, dims) < 0) {
		diag_node(g, n, "output %d would be over tapc's limit of 2^%d bytes", i, IR_MAX_BYTES_LOG2);
		return false;
	}
	g->tensors[o].dtype = dt;
	ir_set_shape(&g->tensors[o], rank, dims);
	return true;
}

/* An int-list attribute of exactly cnt values, each >= lo (all dflt
 * when absent and not required). */
static bool
ints(Graph *g, NodeId n, const char *name, int cnt, int64_t lo, int64_t dflt, bool required,
    int64_t *out)
{
	const Attr *a = ir_attr(g, n, name);
	if (!a && required) {
		diag_node(g, n, "attribute '%s' is missing", name);
		return false;
	}
	if (a && (a->type != ATTR_INTS || a->n != cnt)) {
		diag_node(g, n, "attribute '%s' must be %d ints", name, cnt);
		return false;
	}
	for (int i = 0; i < cnt; i++) {
		out[i] = a ? a->is[i] : dflt;
		if (out[i] < lo) {
			diag_node(g, n, "attribute '%s' has %lld, expected at least %lld", name,
			    (long long)out[i], (long long)lo);
			return false;
		}
	}
	return true;
}

/* The `shape` attribute: the forward input's shape. */
static int
shape_attr(Graph *g, NodeId n, int64_t *dims)
{
	const Attr *a = ir_attr(g, n, "shape");
	if (!a || a->type != ATTR_INTS || a->n > IR_MAX_RANK) {
		diag_node(g, n, "attribute 'shape' must be at most %d ints", IR_MAX_RANK);
		return -1;
	}
	return ints(g, n, "shape", a->n, 0, 0, true, dims) ? a->n : -1;
}

/* An axis attribute in [-rank, rank), made non-negative. */
static bool
axis_attr(Graph *g, NodeId n, int rank, int64_t *axis)
{
	*axis = ir_attr_int(g, n, "axis", 0);
	if (*axis < -rank || *axis >= rank) {
		diag_node(g, n, "axis %lld is out of range for rank %d", (long long)*axis, rank);
		return false;
	}
	if (*axis < 0)
		*axis += rank;
	return true;
}

/* SoftmaxGrad(dY, Y), LogSoftmaxGrad(dY, Y) -> dX of Y's type. */
static bool
infer_softmax_grad(Graph *g, NodeId n)
{
	int64_t axis;
	if (!arity(g, n, 2, 1) || !is_float(g, n, 0) || !same_type(g, n, 0, 1) ||
	    !axis_attr(g, n, input(g, n, 0)->rank, &axis))
		return false;
	like(g, n, 0, 0);
	return true;
}

/* LayerNormalizationGrad(dY, X, Scale) -> (dX, dScale, dBias), each
 * optional; Scale's dims are the last dims of the normalized ones. */
static bool
infer_layernorm_grad(Graph *g, NodeId n)
{
	int64_t axis;
	if (!arity(g, n, 3, 3) || !is_float(g, n, 0) || !same_type(g, n, 0, 1) ||
	    !is_float(g, n, 2) || !axis_attr(g, n, input(g, n, 1)->rank, &axis))
		return false;
	Tensor *x = input(g, n, 1), *s = input(g, n, 2);
	int skip = 0;
	while (skip < s->rank && s->dims[skip] == 1)     /* leading 1s broadcast */
		skip++;
	bool ok = s->rank - skip <= x->rank - axis && ir_numel(s) > 0;
	for (int i = skip; ok && i < s->rank; i++)
		ok = s->dims[i] == x->dims[x->rank - s->rank + i];
	if (!ok) {
		char tx[IR_TYPESTR], tsc[IR_TYPESTR];
		diag_node(g, n, "input 2 is %s, which is not the last dims of %s from axis %lld",
		    ir_typestr(s, tsc), ir_typestr(x, tx), (long long)axis);
		return false;
	}
	return set(g, n, 0, x->dtype, x->rank, x->dims) && set(g, n, 1, s->dtype, s->rank, s->dims) &&
	    set(g, n, 2, s->dtype, s->rank, s->dims);
}

/*
 * A window's output dims over in[ns] from the attributes kernel_shape,
 * strides, pads, dilations and ceil_mode, as ir/infer.c computes a
 * Conv's or pool's (explicit pads only).
 */
static bool
window(Graph *g, NodeId n, int ns, const int64_t *in, int64_t *out)
{
	int64_t k[IR_MAX_RANK], st[IR_MAX_RANK], dil[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
	bool ceil_mode = ir_attr_int(g, n, "ceil_mode", 0) != 0;
	if (ns < 1 || ns > 3) {
		diag_node(g, n, "%d spatial dims, expected 1 to 3", ns);
		return false;
	}
	if (!ints(g, n, "kernel_shape", ns, 1, 1, true, k) || !ints(g, n, "strides", ns, 1, 1, false, st) ||
	    !ints(g, n, "dilations", ns, 1, 1, false, dil) ||
	    !ints(g, n, "pads", 2 * ns, 0, 0, false, pads))
		return false;
	for (int i = 0; i < ns; i++) {
		int64_t ek, num;
		if (__builtin_mul_overflow(k[i] - 1, dil[i], &ek) || __builtin_add_overflow(ek, 1, &ek) ||
		    __builtin_add_overflow(in[i], pads[i], &num) ||
		    __builtin_add_overflow(num, pads[ns + i], &num) || num < ek) {
			diag_node(g, n, "spatial dim %d (%lld) with its pads is smaller than the kernel", i,
			    (long long)in[i]);
			return false;
		}
		num -= ek;
		out[i] = num / st[i] + 1;
		if (ceil_mode && num % st[i] && out[i] <= (in[i] + pads[i] - 1) / st[i])
			out[i]++;
	}
	return true;
}

/* dY's spatial dims are the window's over x (shape xd, rank r). */
static bool
window_matches(Graph *g, NodeId n, int r, const int64_t *xd, const Tensor *dy)
{
	int64_t o[IR_MAX_RANK];
	if (!window(g, n, r - 2, xd + 2, o))
		return false;
	if (dy->rank == r && !memcmp(dy->dims + 2, o, sizeof *o * (r - 2)))
		return true;
	char t[IR_TYPESTR];
	diag_node(g, n, "input 0 is %s, which is not the window's output over the input", ir_typestr(dy, t));
	return false;
}

/* ConvGradWeight(X, dY) -> dW [M, C/group, k...]. */
static bool
infer_conv_grad_weight(Graph *g, NodeId n)
{
	if (!arity(g, n, 2, 1) || !is_float(g, n, 0) || !is_float(g, n, 1))
		return false;
	Tensor *x = input(g, n, 0), *dy = input(g, n, 1);
	int64_t grp = ir_attr_int(g, n, "group", 1);
	char tx[IR_TYPESTR], ty[IR_TYPESTR];
	if (x->rank < 3 || dy->rank != x->rank || dy->dtype != x->dtype || dy->dims[0] != x->dims[0] ||
	    grp < 1 || x->dims[1] % grp || dy->dims[1] % grp) {
		diag_node(g, n, "inputs %s and %s do not fit a Conv of group %lld", ir_typestr(x, tx),
		    ir_typestr(dy, ty), (long long)grp);
		return false;
	}
	if (!window_matches(g, n, x->rank, x->dims, dy))
		return false;
	int64_t d[IR_MAX_RANK];
	d[0] = dy->dims[1];
	d[1] = x->dims[1] / grp;
	ints(g, n, "kernel_shape", x->rank - 2, 1, 1, true, d + 2);
	return set(g, n, 0, x->dtype, x->rank, d);
}

/* MaxPoolGrad(dY, X) -> dX like X; AveragePoolGrad(dY) -> dX of `shape`. */
static bool
infer_pool_grad(Graph *g, NodeId n)
{
	bool max = g->nodes[n].op == OP_MaxPoolGrad;
	if (!arity(g, n, max ? 2 : 1, 1) || !is_float(g, n, 0))
		return false;
	Tensor *dy = input(g, n, 0);
	int64_t xd[IR_MAX_RANK];
	int r;
	if (max) {
		Tensor *x = input(g, n, 1);
		if (x->dtype != dy->dtype) {
			char tx[IR_TYPESTR];
			diag_node(g, n, "input 1 is %s, expected %s like input 0", ir_typestr(x, tx),
			    ir_dtype_name(dy->dtype));
			return false;
		}
		r = x->rank;
		memcpy(xd, x->dims, sizeof xd);
	} else if ((r = shape_attr(g, n, xd)) < 0) {
		return false;
	}
	char t[IR_TYPESTR];
	if (r < 3 || dy->rank != r || dy->dims[0] != xd[0] || dy->dims[1] != xd[1]) {
		diag_node(g, n, "input 0 is %s, which does not fit an input of rank %d", ir_typestr(dy, t), r);
		return false;
	}
	return window_matches(g, n, r, xd, dy) && set(g, n, 0, dy->dtype, r, xd);
}

static bool
want_indices(Graph *g, NodeId n, int i)
{
	Tensor *t = input(g, n, i);
	if (t->dtype == DT_I64 || t->dtype == DT_I32)
		return true;
	char ty[IR_TYPESTR];
	diag_node(g, n, "input %d is %s, expected i64 or i32 indices", i, ir_typestr(t, ty));
	return false;
}

/*
 * GatherGrad(dY, indices) {axis, shape}: dY is Gather's output over an
 * input of `shape`; GatherElementsGrad(dY, indices): dY is shaped like
 * the indices.  Both give zeros of `shape` with dY added at the indices
 * (checked at run time).
 */
static bool
infer_gather_grad(Graph *g, NodeId n)
{
	int64_t xd[IR_MAX_RANK], axis, want[2 * IR_MAX_RANK];
	int r;
	if (!arity(g, n, 2, 1) || !is_float(g, n, 0) || !want_indices(g, n, 1) ||
	    (r = shape_attr(g, n, xd)) < 1 || !axis_attr(g, n, r, &axis))
		return false;
	Tensor *dy = input(g, n, 0), *idx = input(g, n, 1);
	int k = 0;
	bool ok = true;
	if (g->nodes[n].op == OP_GatherGrad) {
		for (int i = 0; i < r; i++) {
			if (i != axis)
				want[k++] = xd[i];
			else
				for (int j = 0; j < idx->rank; j++)
					want[k++] = idx->dims[j];
		}
	} else {
		for (int i = 0; i < r; i++)
			ok = ok && idx->rank == r && (i == axis || idx->dims[i] <= xd[i]);
		k = idx->rank;
		memcpy(want, idx->dims, sizeof idx->dims[0] * k);
	}
	if (!ok || k > IR_MAX_RANK || !same_dims(dy, k, want)) {
		char td[IR_TYPESTR], ti[IR_TYPESTR];
		diag_node(g, n, "inputs %s and %s do not fit a %s of an input of rank %d on axis %lld",
		    ir_typestr(dy, td), ir_typestr(idx, ti),
		    g->nodes[n].op == OP_GatherGrad ? "Gather" : "GatherElements", r, (long long)axis);
		return false;
	}
	return set(g, n, 0, dy->dtype, r, xd);
}

/* SliceGrad(dY) {shape, starts, steps}: dY[j] goes to starts + j * steps
 * along each axis, which must stay inside `shape`. */
static bool
infer_slice_grad(Graph *g, NodeId n)
{
	int64_t xd[IR_MAX_RANK], st[IR_MAX_RANK], sp[IR_MAX_RANK];
	int r;
	if (!arity(g, n, 1, 1) || !is_float(g, n, 0) || (r = shape_attr(g, n, xd)) < 0 ||
	    !ints(g, n, "starts", r, 0, 0, true, st) || !ints(g, n, "steps", r, INT64_MIN, 1, true, sp))
		return false;
	Tensor *dy = input(g, n, 0);
	char t[IR_TYPESTR];
	if (dy->rank != r) {
		diag_node(g, n, "input 0 is %s, expected rank %d", ir_typestr(dy, t), r);
		return false;
	}
	for (int i = 0; i < r; i++) {
		int64_t cnt = dy->dims[i], last;
		if (sp[i] == 0 || (cnt > 0 && (st[i] >= xd[i] ||
		    __builtin_mul_overflow(cnt - 1, sp[i], &last) ||
		    __builtin_add_overflow(last, st[i], &last) || last < 0 || last >= xd[i]))) {
			diag_node(g, n, "axis %d: %lld elements from %lld by %lld do not fit in %lld", i,
			    (long long)cnt, (long long)st[i], (long long)sp[i], (long long)xd[i]);
			return false;
		}
	}
	return set(g, n, 0, dy->dtype, r, xd);
}

bool
ir_infer_train(Graph *g, NodeId n)
{
	switch (g->nodes[n].op) {
	case OP_SGD: {
		bool momentum = ir_attr_float(g, n, "momentum", 0) != 0;
		return infer_optimizer(g, n, momentum ? 3 : 2, momentum ? 2 : 1);
	}
	case OP_AdamW:
		return infer_optimizer(g, n, 4, 3);
	case OP_GradAccumulate: /* (sum, dW) -> sum': a float sum of dW's type */
		return infer_optimizer(g, n, 2, 1);
	case OP_SoftmaxGrad: case OP_LogSoftmaxGrad:
		return infer_softmax_grad(g, n);
	case OP_LayerNormalizationGrad:
		return infer_layernorm_grad(g, n);
	case OP_GeluGrad: /* (dY, X) -> dX, f32 (fuse-train's FusedGelu) */
		if (!arity(g, n, 2, 1) || !same_type(g, n, 0, 1))
			return false;
		if (input(g, n, 0)->dtype != DT_F32) {
			diag_node(g, n, "input 0 is not f32");
			return false;
		}
		like(g, n, 0, 0);
		return true;
	case OP_ConvGradWeight:
		return infer_conv_grad_weight(g, n);
	case OP_MaxPoolGrad: case OP_AveragePoolGrad:
		return infer_pool_grad(g, n);
	case OP_GatherGrad: case OP_GatherElementsGrad:
		return infer_gather_grad(g, n);
	case OP_SliceGrad:
		return infer_slice_grad(g, n);
	default:
		diag_node(g, n, "no shape inference for %s", ir_op_name(g->nodes[n].op));
		return false;
	}
}
