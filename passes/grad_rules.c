/*
 * grad_rules.c - gradient rules for the elementwise operators, the
 * reductions and data movement (the table is passes/grad_rules.def).
 *
 * Needs: the builders of passes/grad_build.c.  Every rule composes ONNX
 * operators except where a scatter is needed (Gather, GatherElements, a
 * strided Slice), which use tapc's GatherGrad, GatherElementsGrad and
 * SliceGrad.  Conventions, as torch's autograd: a kink takes the side
 * torch takes (Relu's gradient at 0 is 0, Abs's is 0, Clip passes the
 * gradient where min <= x <= max); ties of Max/Min (elementwise) and of
 * ReduceMax/ReduceMin share the gradient equally between the tied
 * elements, as torch.maximum and torch.amax do.  Broadcast inputs get the
 * gradient summed back to their shape (grad_sum_to).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/grad.h"

/* ------------------------------------------------------------ helpers */

/* x >= b, in the operators the graph's opset has. */
static TensorId
greater_equal(GradCtx *c, TensorId a, TensorId b)
{
	if (c->g->opset >= 12)
		return grad_op2(c, OP_GreaterOrEqual, a, b);
	return grad_op1(c, OP_Not, grad_op2(c, OP_Less, a, b));
}

/* ------------------------------------------------ elementwise, unary */

GradRule grad_none;

bool
grad_none(GradCtx *c, NodeId n, const TensorId *dy)
{
	(void)dy;
	die("autodiff: %s has a zero gradient and is never differentiated",
	    ir_op_name(c->g->nodes[n].op));
}

/* dx = dy * f: the common shape of the unary rules. */
static bool
unary_times(GradCtx *c, NodeId n, TensorId dy, TensorId f)
{
	grad_give(c, n, 0, grad_op2(c, OP_Mul, dy, f));
	return true;
}

bool
grad_abs(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_op1(c, OP_Sign, grad_in(c, n, 0)));
}

bool
grad_neg(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give(c, n, 0, grad_op1(c, OP_Neg, dy[0]));
	return true;
}

bool
grad_exp(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_out(c, n, 0));
}

bool
grad_log(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give(c, n, 0, grad_op2(c, OP_Div, dy[0], grad_in(c, n, 0)));
	return true;
}

bool
grad_sqrt(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	grad_give(c, n, 0, grad_op2(c, OP_Div, grad_op2(c, OP_Mul, dy[0], grad_num(c, y, 0.5)), y));
	return true;
}

bool
grad_reciprocal(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	grad_give(c, n, 0, grad_op1(c, OP_Neg, grad_op2(c, OP_Mul, dy[0], grad_op2(c, OP_Mul, y, y))));
	return true;
}

bool
grad_relu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	TensorId pos = grad_op2(c, OP_Greater, y, grad_num(c, y, 0));
	grad_give(c, n, 0, grad_op3(c, OP_Where, pos, dy[0], grad_num(c, y, 0)));
	return true;
}

bool
grad_leaky_relu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	double alpha = ir_attr_float(c->g, n, "alpha", 0.01f);
	TensorId pos = grad_op2(c, OP_Greater, x, grad_num(c, x, 0));
	TensorId neg = grad_op2(c, OP_Mul, dy[0], grad_num(c, x, alpha));
	grad_give(c, n, 0, grad_op3(c, OP_Where, pos, dy[0], neg));
	return true;
}

/* x > 0: 1; else alpha * (exp(x) - 1) + alpha = y + alpha. */
bool
grad_elu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0), y = grad_out(c, n, 0);
	double alpha = ir_attr_float(c->g, n, "alpha", 1.0f);
	TensorId pos = grad_op2(c, OP_Greater, x, grad_num(c, x, 0));
	TensorId neg = grad_op2(c, OP_Mul, dy[0], grad_op2(c, OP_Add, y, grad_num(c, y, alpha)));
	grad_give(c, n, 0, grad_op3(c, OP_Where, pos, dy[0], neg));
	return true;
}

bool
grad_sigmoid(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	TensorId d = grad_op2(c, OP_Mul, y, grad_op2(c, OP_Sub, grad_num(c, y, 1), y));
	return unary_times(c, n, dy[0], d);
}

/* alpha where 0 < alpha x + beta < 1 (torch's hardsigmoid: strict). */
bool
grad_hard_sigmoid(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	double alpha = ir_attr_float(c->g, n, "alpha", 0.2f);
	TensorId inside = grad_op2(c, OP_And, grad_op2(c, OP_Greater, y, grad_num(c, y, 0)),
	    grad_op2(c, OP_Less, y, grad_num(c, y, 1)));
	TensorId d = grad_op2(c, OP_Mul, dy[0], grad_num(c, y, alpha));
	grad_give(c, n, 0, grad_op3(c, OP_Where, inside, d, grad_num(c, y, 0)));
	return true;
}

bool
grad_softplus(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_op1(c, OP_Sigmoid, grad_in(c, n, 0)));
}

/* 1 / (1 + |x|)^2 */
bool
grad_softsign(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	TensorId t = grad_op2(c, OP_Add, grad_op1(c, OP_Abs, x), grad_num(c, x, 1));
	grad_give(c, n, 0, grad_op2(c, OP_Div, dy[0], grad_op2(c, OP_Mul, t, t)));
	return true;
}

bool
grad_tanh(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	TensorId d = grad_op2(c, OP_Sub, grad_num(c, y, 1), grad_op2(c, OP_Mul, y, y));
	return unary_times(c, n, dy[0], d);
}

/* 2 / sqrt(pi) * exp(-x^2) */
bool
grad_erf(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	TensorId e = grad_op1(c, OP_Exp, grad_op1(c, OP_Neg, grad_op2(c, OP_Mul, x, x)));
	TensorId d = grad_op2(c, OP_Mul, e, grad_num(c, x, 2 / sqrt(M_PI)));
	return unary_times(c, n, dy[0], d);
}

bool
grad_sin(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_op1(c, OP_Cos, grad_in(c, n, 0)));
}

bool
grad_cos(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId s = grad_op1(c, OP_Sin, grad_in(c, n, 0));
	grad_give(c, n, 0, grad_op1(c, OP_Neg, grad_op2(c, OP_Mul, dy[0], s)));
	return true;
}

/* tan: 1 + y^2 */
bool
grad_tan(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId y = grad_out(c, n, 0);
	return unary_times(c, n, dy[0], grad_op2(c, OP_Add, grad_num(c, y, 1),
	    grad_op2(c, OP_Mul, y, y)));
}

bool
grad_sinh(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_op1(c, OP_Cosh, grad_in(c, n, 0)));
}

bool
grad_cosh(GradCtx *c, NodeId n, const TensorId *dy)
{
	return unary_times(c, n, dy[0], grad_op1(c, OP_Sinh, grad_in(c, n, 0)));
}

/* dy / f(x) for the inverse functions: f is sqrt(1 - x^2) (asin; acos
 * negated), 1 + x^2 (atan), sqrt(x^2 + 1) (asinh), sqrt(x^2 - 1) (acosh),
 * 1 - x^2 (atanh) */
static bool
grad_inverse(GradCtx *c, NodeId n, const TensorId *dy, double a, double b, bool root, bool neg)
{
	TensorId x = grad_in(c, n, 0);
	/* a + b x^2 */
	TensorId f = grad_op2(c, OP_Add, grad_num(c, x, a),
	    grad_op2(c, OP_Mul, grad_num(c, x, b), grad_op2(c, OP_Mul, x, x)));
	if (root)
		f = grad_op1(c, OP_Sqrt, f);
	TensorId d = grad_op2(c, OP_Div, dy[0], f);
	grad_give(c, n, 0, neg ? grad_op1(c, OP_Neg, d) : d);
	return true;
}

bool
grad_asin(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, 1, -1, true, false);
}

bool
grad_acos(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, 1, -1, true, true);
}

bool
grad_atan(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, 1, 1, false, false);
}

bool
grad_asinh(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, 1, 1, true, false);
}

bool
grad_acosh(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, -1, 1, true, false);
}

bool
grad_atanh(GradCtx *c, NodeId n, const TensorId *dy)
{
	return grad_inverse(c, n, dy, 1, -1, false, false);
}

/* Identity, and Dropout in inference (its mask output is bool: no gradient). */
bool
grad_identity(GradCtx *c, NodeId n, const TensorId *dy)
{
	if (dy[0] != IR_NONE && grad_wants(c, n, 0))
		grad_give(c, n, 0, dy[0]);
	return true;
}

/* Between float types only: an integer input is data and never wants. */
bool
grad_cast_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give(c, n, 0, grad_cast(c, dy[0], grad_t(c, grad_in(c, n, 0))->dtype));
	return true;
}

/* min and max: inputs 1 and 2 from opset 11, attributes before. */
static TensorId
clip_bound(GradCtx *c, NodeId n, int slot, const char *name)
{
	if (c->g->opset >= 11)
		return grad_in(c, n, slot);
	const Attr *a = ir_attr(c->g, n, name);
	return a ? grad_num(c, grad_in(c, n, 0), a->f) : IR_NONE;
}

bool
grad_clip(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	TensorId lo = clip_bound(c, n, 1, "min"), hi = clip_bound(c, n, 2, "max");
	TensorId mask = IR_NONE;
	if (lo != IR_NONE)
		mask = greater_equal(c, x, lo);
	if (hi != IR_NONE) {
		TensorId m = greater_equal(c, hi, x);
		mask = mask == IR_NONE ? m : grad_op2(c, OP_And, mask, m);
	}
	grad_give(c, n, 0, mask == IR_NONE ? dy[0] : grad_op3(c, OP_Where, mask, dy[0], grad_num(c, x, 0)));
	return true;
}

/* ------------------------------------------- elementwise, broadcasting */

bool
grad_add(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give_sum(c, n, 0, dy[0]);
	grad_give_sum(c, n, 1, dy[0]);
	return true;
}

bool
grad_sub(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give_sum(c, n, 0, dy[0]);
	if (grad_wants(c, n, 1))
		grad_give(c, n, 1, grad_op1(c, OP_Neg, grad_sum_to(c, dy[0], grad_in(c, n, 1))));
	return true;
}

bool
grad_mul(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1);
	if (grad_wants(c, n, 0))
		grad_give_sum(c, n, 0, grad_op2(c, OP_Mul, dy[0], b));
	if (grad_wants(c, n, 1))
		grad_give_sum(c, n, 1, grad_op2(c, OP_Mul, dy[0], a));
	return true;
}

/* y = a / b: da = dy / b, db = -(dy / b) * y. */
bool
grad_div(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId b = grad_in(c, n, 1);
	TensorId t = grad_op2(c, OP_Div, dy[0], b);
	grad_give_sum(c, n, 0, t);
	if (grad_wants(c, n, 1)) {
		TensorId d = grad_sum_to(c, grad_op2(c, OP_Mul, t, grad_out(c, n, 0)), b);
		grad_give(c, n, 1, grad_op1(c, OP_Neg, d));
	}
	return true;
}

/*
 * y = a^b.  da = dy * b * a^(b-1), 0 where b = 0 (torch's pow_backward);
 * with b a constant scalar the constants b and b-1 are folded (b = 2, the
 * decomposed LayerNorm's square, is dy * 2a).  db = dy * y * log(a), 0 where a = 0 and b >= 0
 * (torch's pow_backward_exponent).
 */
static TensorId
pow_base_grad(GradCtx *c, NodeId n, TensorId dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1);
	Tensor *tb = grad_t(c, b);
	DType dt = grad_t(c, a)->dtype;
	/* only a constant's value: a small float weight has a value at
	 * compile time too, which training changes */
	const void *v = tb->kind == TK_CONST ? ir_value(c->g, b) : NULL;
	if (v && ir_numel(tb) == 1) {
		double e = tb->dtype == DT_F32 ? *(const float *)v : tb->dtype == DT_F64 ?
		    *(const double *)v : tb->dtype == DT_I32 ? *(const int32_t *)v :
		    tb->dtype == DT_I64 ? (double)*(const int64_t *)v : NAN;
		if (e == 1)
			return dy;
		if (e == 0) /* not 0^-1 * 0 = NaN at a = 0: torch's zeros */
			return grad_op2(c, OP_Mul, dy, grad_num(c, a, 0));
		if (e == 2)
			return grad_op2(c, OP_Mul, grad_op2(c, OP_Mul, dy, a), grad_num(c, a, 2));
		if (!isnan(e)) {
			TensorId p = grad_op2(c, OP_Pow, a, grad_num(c, a, e - 1));
			return grad_op2(c, OP_Mul, dy, grad_op2(c, OP_Mul, p, grad_num(c, a, e)));
		}
	}
	TensorId bf = grad_cast(c, b, dt);
	TensorId p = grad_op2(c, OP_Pow, a, grad_op2(c, OP_Sub, bf, grad_num(c, a, 1)));
	/* 0 where b = 0, as torch (b a^(b-1) is 0 * inf = NaN at a = 0) */
	TensorId d = grad_op3(c, OP_Where, grad_op2(c, OP_Equal, bf, grad_num(c, a, 0)),
	    grad_num(c, a, 0), grad_op2(c, OP_Mul, p, bf));
	return grad_op2(c, OP_Mul, dy, d);
}

bool
grad_pow(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1);
	if (grad_wants(c, n, 0))
		grad_give_sum(c, n, 0, pow_base_grad(c, n, dy[0]));
	if (grad_wants(c, n, 1)) {
		TensorId t = grad_op2(c, OP_Mul, grad_op2(c, OP_Mul, dy[0], grad_out(c, n, 0)),
		    grad_op1(c, OP_Log, a));
		TensorId zero = grad_op2(c, OP_And, grad_op2(c, OP_Equal, a, grad_num(c, a, 0)),
		    greater_equal(c, b, grad_num(c, b, 0)));
		grad_give_sum(c, n, 1, grad_op3(c, OP_Where, zero, grad_num(c, a, 0), t));
	}
	return true;
}

/* y = x > 0 ? x : slope * x (slope broadcast to x). */
bool
grad_prelu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0), slope = grad_in(c, n, 1);
	TensorId pos = grad_op2(c, OP_Greater, x, grad_num(c, x, 0));
	if (grad_wants(c, n, 0))
		grad_give(c, n, 0, grad_op3(c, OP_Where, pos, dy[0], grad_op2(c, OP_Mul, dy[0], slope)));
	if (grad_wants(c, n, 1)) {
		TensorId t = grad_op3(c, OP_Where, pos, grad_num(c, x, 0), grad_op2(c, OP_Mul, dy[0], x));
		grad_give_sum(c, n, 1, t);
	}
	return true;
}

/* Max/Min of k inputs: input i gets dy where it equals the result, split
 * equally between the inputs that tie there. */
bool
grad_maxmin(GradCtx *c, NodeId n, const TensorId *dy)
{
	int k = c->g->nodes[n].nin;
	TensorId y = grad_out(c, n, 0);
	DType dt = grad_t(c, y)->dtype;
	if (k == 1) {
		grad_give(c, n, 0, dy[0]);
		return true;
	}
	TensorId *mask = malloc(sizeof *mask * k);
	if (!mask)
		die("out of memory");
	for (int i = 0; i < k; i++)
		mask[i] = grad_cast(c, grad_op2(c, OP_Equal, grad_in(c, n, i), y), dt);
	TensorId count = grad_finish(c, grad_begin(c, OP_Sum, k, mask, 1, NULL));
	TensorId share = grad_op2(c, OP_Div, dy[0], count);
	for (int i = 0; i < k; i++)
		if (grad_wants(c, n, i))
			grad_give_sum(c, n, i, grad_op2(c, OP_Mul, share, mask[i]));
	free(mask);
	return true;
}

bool
grad_sum(GradCtx *c, NodeId n, const TensorId *dy)
{
	int k = c->g->nodes[n].nin;
	TensorId g = dy[0];
	if (c->g->nodes[n].op == OP_Mean && k > 1)
		g = grad_op2(c, OP_Mul, g, grad_num(c, g, 1.0 / k));
	for (int i = 0; i < k; i++)
		grad_give_sum(c, n, i, g);
	return true;
}

bool
grad_where(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId cond = grad_in(c, n, 0), zero = grad_num(c, dy[0], 0);
	if (grad_wants(c, n, 1))
		grad_give_sum(c, n, 1, grad_op3(c, OP_Where, cond, dy[0], zero));
	if (grad_wants(c, n, 2))
		grad_give_sum(c, n, 2, grad_op3(c, OP_Where, cond, zero, dy[0]));
	return true;
}

/* --------------------------------------------------------- reductions */

/* The axes node n reduces, ascending and non-negative; -1 when it reduces
 * nothing (empty axes with noop_with_empty_axes). */
static int
reduce_axes(GradCtx *c, NodeId n, int rank, int64_t *axes)
{
	int64_t a[IR_MAX_RANK];
	int k = grad_int_arg(c, n, 1, "axes", a, IR_MAX_RANK);
	if (k <= 0 && ir_attr_int(c->g, n, "noop_with_empty_axes", 0))
		return -1;
	bool on[IR_MAX_RANK] = {0};
	for (int i = 0; i < rank; i++)
		on[i] = k <= 0;
	for (int i = 0; i < k; i++)
		on[grad_axis(a[i], rank)] = true;
	int cnt = 0;
	for (int i = 0; i < rank; i++)
		if (on[i])
			axes[cnt++] = i;
	return cnt;
}

/* ReduceSum, ReduceMean: dy spread over the reduced axes (divided by
 * their size); ReduceSumSquare: 2 x dy. */
bool
grad_reduce_sum(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0), g = dy[0];
	Op op = c->g->nodes[n].op;
	int64_t dims[IR_MAX_RANK], axes[IR_MAX_RANK];
	int r = grad_dims(c, x, dims);
	int na = reduce_axes(c, n, r, axes);
	if (na >= 0 && !ir_attr_int(c->g, n, "keepdims", 1))
		g = grad_unsqueeze(c, g, na, axes);
	if (op == OP_ReduceMean && na > 0) {
		int64_t count = 1;
		for (int i = 0; i < na; i++)
			count *= dims[axes[i]];
		g = grad_op2(c, OP_Mul, g, grad_num(c, g, count ? 1.0 / (double)count : 0));
	}
	if (op == OP_ReduceSumSquare)
		g = grad_op2(c, OP_Mul, grad_op2(c, OP_Mul, x, g), grad_num(c, x, 2));
	grad_give(c, n, 0, grad_expand_like(c, g, x));
	return true;
}

/* ReduceMax, ReduceMin: dy to the elements equal to the result, shared
 * equally between ties (torch.amax's rule). */
bool
grad_reduce_max(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0), y = grad_out(c, n, 0), g = dy[0];
	int64_t axes[IR_MAX_RANK];
	int na = reduce_axes(c, n, grad_rank(c, x), axes);
	if (na < 0) {
		grad_give(c, n, 0, g);
		return true;
	}
	if (!ir_attr_int(c->g, n, "keepdims", 1)) {
		g = grad_unsqueeze(c, g, na, axes);
		y = grad_unsqueeze(c, y, na, axes);
	}
	TensorId mask = grad_cast(c, grad_op2(c, OP_Equal, x, y), grad_t(c, x)->dtype);
	TensorId count = grad_reduce(c, OP_ReduceSum, mask, na, axes, true);
	grad_give(c, n, 0, grad_op2(c, OP_Mul, mask, grad_op2(c, OP_Div, g, count)));
	return true;
}

/* ------------------------------------------------------- data movement */

/* Reshape, Flatten, Squeeze, Unsqueeze: dy in x's shape (a view). */
bool
grad_reshape_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give(c, n, 0, grad_reshape_like(c, dy[0], grad_in(c, n, 0)));
	return true;
}

bool
grad_transpose_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	int r = grad_rank(c, grad_in(c, n, 0));
	int64_t perm[IR_MAX_RANK], inv[IR_MAX_RANK];
	if (grad_int_arg(c, n, -1, "perm", perm, IR_MAX_RANK) < 0)
		for (int i = 0; i < r; i++)
			perm[i] = r - 1 - i;
	for (int i = 0; i < r; i++)
		inv[perm[i]] = i;
	grad_give(c, n, 0, grad_transpose(c, dy[0], inv));
	return true;
}

/* A Split of x along axis into cnt parts of sizes sz, the parts not kept
 * left out; returns the node. */
static NodeId
split(GradCtx *c, TensorId x, int64_t axis, int cnt, const int64_t *sz, const bool *keep)
{
	bool input = c->g->opset >= 13;
	TensorId in[2] = {x, IR_NONE};
	NodeId s = grad_begin(c, OP_Split, input ? 2 : 1, in, cnt, keep);
	if (input)
		c->g->nodes[s].in[1] = grad_ints(c, cnt, sz);
	else
		grad_set_ints(c, s, "split", cnt, sz);
	grad_set_int(c, s, "axis", axis);
	grad_finish(c, s);
	return s;
}

bool
grad_concat(GradCtx *c, NodeId n, const TensorId *dy)
{
	int k = c->g->nodes[n].nin, r = grad_rank(c, grad_in(c, n, 0));
	int64_t axis = grad_axis(ir_attr_int(c->g, n, "axis", 0), r);
	if (k == 1) {
		grad_give(c, n, 0, dy[0]);
		return true;
	}
	int64_t *sz = malloc(sizeof *sz * k);
	bool *keep = malloc(sizeof *keep * k);
	if (!sz || !keep)
		die("out of memory");
	for (int i = 0; i < k; i++) {
		sz[i] = grad_t(c, grad_in(c, n, i))->dims[axis];
		keep[i] = grad_wants(c, n, i);
	}
	NodeId s = split(c, dy[0], axis, k, sz, keep);
	for (int i = 0; i < k; i++)
		if (keep[i])
			grad_give(c, n, i, c->g->nodes[s].out[i]);
	free(sz);
	free(keep);
	return true;
}

/* The parts' gradients concatenated; zeros for a part without one. */
bool
grad_split(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	int k = c->g->nodes[n].nout;
	int64_t dims[IR_MAX_RANK];
	int r = grad_dims(c, x, dims);
	int64_t axis = grad_axis(ir_attr_int(c->g, n, "axis", 0), r), dim = dims[axis];
	int64_t *sz = malloc(sizeof *sz * k);
	TensorId *part = malloc(sizeof *part * k);
	if (!sz || !part)
		die("out of memory");
	if (grad_int_arg(c, n, 1, "split", sz, k) != k) {
		int64_t chunk = dim / k + (dim % k != 0);
		for (int i = 0; i < k; i++)
			sz[i] = i < k - 1 ? chunk : dim - chunk * (k - 1);
	}
	for (int i = 0; i < k; i++) {
		part[i] = dy[i];
		if (part[i] == IR_NONE) {
			dims[axis] = sz[i];
			part[i] = grad_expand(c, grad_scalar(c, grad_t(c, x)->dtype, 0), r, dims);
		}
	}
	TensorId g = part[0];
	if (k > 1) {
		NodeId cat = grad_begin(c, OP_Concat, k, part, 1, NULL);
		grad_set_int(c, cat, "axis", axis);
		g = grad_finish(c, cat);
	}
	grad_give(c, n, 0, g);
	free(sz);
	free(part);
	return true;
}

/* Slice's first index along an axis of length d, clamped as the spec says
 * (ir/infer.c's slice_dim). */
static int64_t
slice_start(int64_t d, int64_t s, int64_t step)
{
	if (s < 0)
		s += d;
	if (step > 0)
		return s < 0 ? 0 : s > d ? d : s;
	return s < 0 ? 0 : s > d - 1 ? d - 1 : s;
}

/* Steps of 1: dy padded back with zeros; other steps: SliceGrad. */
bool
grad_slice_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	int64_t xd[IR_MAX_RANK], yd[IR_MAX_RANK];
	int r = grad_dims(c, x, xd);
	grad_dims(c, grad_out(c, n, 0), yd);
	int64_t st[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
	int ns = grad_int_arg(c, n, 1, "starts", st, IR_MAX_RANK);
	int na = grad_int_arg(c, n, 3, "axes", ax, IR_MAX_RANK);
	int np = grad_int_arg(c, n, 4, NULL, sp, IR_MAX_RANK);
	int64_t start[IR_MAX_RANK] = {0}, step[IR_MAX_RANK];
	bool unit = true;
	for (int a = 0; a < r; a++)
		step[a] = 1;
	for (int i = 0; i < ns; i++) {
		int64_t a = na >= 0 ? grad_axis(ax[i], r) : i;
		step[a] = np >= 0 ? sp[i] : 1;
		start[a] = xd[a] ? slice_start(xd[a], st[i], step[a]) : 0;
		unit = unit && step[a] == 1;
	}
	if (unit) {
		int64_t pads[2 * IR_MAX_RANK];
		for (int a = 0; a < r; a++) {
			pads[a] = start[a];
			pads[r + a] = xd[a] - start[a] - yd[a];
		}
		grad_give(c, n, 0, grad_pad(c, dy[0], pads));
		return true;
	}
	NodeId s = grad_begin(c, OP_SliceGrad, 1, dy, 1, NULL);
	grad_set_ints(c, s, "shape", r, xd);
	grad_set_ints(c, s, "starts", r, start);
	grad_set_ints(c, s, "steps", r, step);
	grad_give(c, n, 0, grad_finish(c, s));
	return true;
}

/* Gather and GatherElements: a scatter-add of dy into zeros of x's shape
 * (GatherGrad, GatherElementsGrad); the indices get nothing. */
static bool
scatter_back(GradCtx *c, NodeId n, Op op, TensorId dy)
{
	TensorId x = grad_in(c, n, 0);
	int64_t dims[IR_MAX_RANK];
	int r = grad_dims(c, x, dims);
	TensorId in[2] = {dy, grad_in(c, n, 1)};
	NodeId s = grad_begin(c, op, 2, in, 1, NULL);
	grad_set_int(c, s, "axis", grad_axis(ir_attr_int(c->g, n, "axis", 0), r));
	grad_set_ints(c, s, "shape", r, dims);
	grad_give(c, n, 0, grad_finish(c, s));
	return true;
}

bool
grad_gather(GradCtx *c, NodeId n, const TensorId *dy)
{
	return scatter_back(c, n, OP_GatherGrad, dy[0]);
}

bool
grad_gather_elements(GradCtx *c, NodeId n, const TensorId *dy)
{
	return scatter_back(c, n, OP_GatherElementsGrad, dy[0]);
}

bool
grad_expand_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	grad_give_sum(c, n, 0, dy[0]);
	return true;
}

/* dy viewed as [repeat, dim] per repeated axis, summed over the repeats. */
bool
grad_tile(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	int64_t xd[IR_MAX_RANK], rep[IR_MAX_RANK], d2[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
	int r = grad_dims(c, x, xd), r2 = 0, na = 0;
	grad_int_arg(c, n, 1, NULL, rep, IR_MAX_RANK);
	for (int i = 0; i < r; i++) {
		if (rep[i] > 1) {
			axes[na++] = r2;
			d2[r2++] = rep[i];
		}
		d2[r2++] = xd[i];
	}
	if (r2 > IR_MAX_RANK) {
		diag_node(c->g, n, "the gradient of a Tile of %d axes repeating %d of them needs rank %d, over tapc's %d",
		    r, na, r2, IR_MAX_RANK);
		return false;
	}
	TensorId g = grad_reshape(c, dy[0], r2, d2);
	grad_give(c, n, 0, grad_reduce(c, OP_ReduceSum, g, na, axes, false));
	return true;
}

bool
grad_trilu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId in[2] = {dy[0], grad_in(c, n, 1)};
	NodeId t = grad_begin(c, OP_Trilu, in[1] != IR_NONE ? 2 : 1, in, 1, NULL);
	grad_copy_attr(c, t, n, "upper");
	grad_give(c, n, 0, grad_finish(c, t));
	return true;
}

/* Constant mode: dy cropped where the pads added, padded with zeros where
 * they cropped (negative pads). */
bool
grad_pad_rule(GradCtx *c, NodeId n, const TensorId *dy)
{
	const char *mode = ir_attr_str(c->g, n, "mode", "constant");
	if (strcmp(mode, "constant")) {
		diag_node(c->g, n, "Pad has a gradient in tapc only in mode constant, not '%s'", mode);
		return false;
	}
	TensorId x = grad_in(c, n, 0);
	int64_t yd[IR_MAX_RANK], p[2 * IR_MAX_RANK], ax[IR_MAX_RANK];
	int r = grad_rank(c, x);
	grad_dims(c, grad_out(c, n, 0), yd);
	int np = grad_int_arg(c, n, 1, c->g->opset >= 2 ? "pads" : "paddings", p, 2 * IR_MAX_RANK);
	int na = grad_int_arg(c, n, 3, NULL, ax, IR_MAX_RANK);
	int naxes = na >= 0 ? na : np / 2;
	int64_t pb[IR_MAX_RANK] = {0}, pe[IR_MAX_RANK] = {0};
	for (int i = 0; i < naxes; i++) {
		int64_t a = na >= 0 ? grad_axis(ax[i], r) : i;
		pb[a] = p[i];
		pe[a] = p[naxes + i];
	}
	int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], sa[IR_MAX_RANK], back[2 * IR_MAX_RANK];
	int ns = 0;
	for (int a = 0; a < r; a++) {
		if (pb[a] > 0 || pe[a] > 0) {
			st[ns] = pb[a] > 0 ? pb[a] : 0;
			en[ns] = yd[a] - (pe[a] > 0 ? pe[a] : 0);
			sa[ns++] = a;
		}
		back[a] = pb[a] < 0 ? -pb[a] : 0;
		back[r + a] = pe[a] < 0 ? -pe[a] : 0;
	}
	grad_give(c, n, 0, grad_pad(c, grad_slice(c, dy[0], ns, st, en, sa), back));
	return true;
}

/* The adjoint of a running sum is the running sum the other way. */
bool
grad_cumsum(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId in[2] = {dy[0], grad_in(c, n, 1)};
	NodeId s = grad_begin(c, OP_CumSum, 2, in, 1, NULL);
	grad_copy_attr(c, s, n, "exclusive");
	grad_set_int(c, s, "reverse", !ir_attr_int(c->g, n, "reverse", 0));
	grad_give(c, n, 0, grad_finish(c, s));
	return true;
}
