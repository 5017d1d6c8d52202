/*
 * grad_rules_nn.c - gradient rules for the products, convolution, pools,
 * normalizations and softmax (the table is passes/grad_rules.def).
 *
 * Needs: the builders of passes/grad_build.c and tapc's gradient kernels
 * (ir/ops.def's TRAIN block).  MatMul and Gemm differentiate into Gemm
 * (transposes as attributes, batch rows folded into one product) or
 * MatMul; Conv's input gradient is a ConvTranspose with the Conv's
 * geometry, its weight gradient ConvGradWeight; MaxPool, AveragePool,
 * LayerNormalization, Softmax and LogSoftmax use their *Grad ops, which
 * recompute what they need from the forward node's inputs or output
 * rather than keep extra tensors.  BatchNormalization is differentiated in
 * inference form only (running statistics are constants of the step).
 */
#include <string.h>

#include "passes/grad.h"

/* --------------------------------------------------------- products */

/* a @ b with transposes, times alpha: Gemm where the opset has the
 * two-input form (11), else MatMul with Transpose nodes. */
static TensorId
product(GradCtx *c, TensorId a, TensorId b, bool ta, bool tb, double alpha)
{
	static const int64_t swap[2] = {1, 0};
	if (c->g->opset >= 11) {
		TensorId in[2] = {a, b};
		NodeId n = grad_begin(c, OP_Gemm, 2, in, 1, NULL);
		if (ta)
			grad_set_int(c, n, "transA", 1);
		if (tb)
			grad_set_int(c, n, "transB", 1);
		if (alpha != 1)
			grad_set_float(c, n, "alpha", (float)alpha);
		return grad_finish(c, n);
	}
	TensorId y = grad_op2(c, OP_MatMul, ta ? grad_transpose(c, a, swap) : a,
	    tb ? grad_transpose(c, b, swap) : b);
	return alpha != 1 ? grad_op2(c, OP_Mul, y, grad_num(c, y, alpha)) : y;
}

/* x with its last two axes swapped. */
static TensorId
swap_last(GradCtx *c, TensorId x)
{
	int r = grad_rank(c, x);
	int64_t perm[IR_MAX_RANK];
	for (int i = 0; i < r; i++)
		perm[i] = i;
	perm[r - 2] = r - 1;
	perm[r - 1] = r - 2;
	return grad_transpose(c, x, perm);
}

/* A [rows.., K] @ B [K, N]: every row of A against one matrix, so the
 * gradients are two 2-D products over all rows at once. */
static void
matmul_2d(GradCtx *c, NodeId n, TensorId dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1);
	int64_t ad[IR_MAX_RANK], bd[IR_MAX_RANK];
	int ra = grad_dims(c, a, ad);
	grad_dims(c, b, bd);
	int64_t k = ad[ra - 1], rows = 1;
	for (int i = 0; i < ra - 1; i++)
		rows *= ad[i];
	int64_t d2[2] = {rows, bd[1]}, a2[2] = {rows, k};
	TensorId dy2 = grad_reshape(c, dy, 2, d2);
	if (grad_wants(c, n, 0))
		grad_give(c, n, 0, grad_reshape_like(c, product(c, dy2, b, false, true, 1), a));
	if (grad_wants(c, n, 1))
		grad_give(c, n, 1, product(c, grad_reshape(c, a, 2, a2), dy2, true, false, 1));
}

/* The general case: batch dims broadcast, 1-D operands promoted to
 * matrices as the spec does ([K] is [1,K] on the left, [K,1] on the
 * right) and the gradients summed back over broadcast batch dims. */
static void
matmul_batched(GradCtx *c, NodeId n, TensorId dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1);
	int64_t ad[IR_MAX_RANK], bd[IR_MAX_RANK], yd[IR_MAX_RANK], d[IR_MAX_RANK];
	int ra = grad_dims(c, a, ad), rb = grad_dims(c, b, bd), ry = grad_dims(c, dy, yd);
	bool a1 = ra == 1, b1 = rb == 1;
	int64_t av[2] = {1, ad[0]}, bv[2] = {bd[0], 1};
	TensorId am = a1 ? grad_reshape(c, a, 2, av) : a;
	TensorId bm = b1 ? grad_reshape(c, b, 2, bv) : b;
	/* dy with the dims a 1-D operand dropped put back as 1 */
	int nb = ry - !a1 - !b1, r = 0;
	for (int i = 0; i < nb; i++)
		d[r++] = yd[i];
	d[r++] = a1 ? 1 : yd[nb];
	d[r++] = b1 ? 1 : yd[ry - 1];
	TensorId g = grad_reshape(c, dy, r, d);
	if (grad_wants(c, n, 0)) {
		TensorId da = grad_op2(c, OP_MatMul, g, swap_last(c, bm));
		grad_give(c, n, 0, grad_reshape_like(c, grad_sum_to(c, da, am), a));
	}
	if (grad_wants(c, n, 1)) {
		TensorId db = grad_op2(c, OP_MatMul, swap_last(c, am), g);
		grad_give(c, n, 1, grad_reshape_like(c, grad_sum_to(c, db, bm), b));
	}
}

bool
grad_matmul(GradCtx *c, NodeId n, const TensorId *dy)
{
	int ra = grad_rank(c, grad_in(c, n, 0)), rb = grad_rank(c, grad_in(c, n, 1));
	if (ra >= 2 && rb == 2 && c->g->opset >= 11)
		matmul_2d(c, n, dy[0]);
	else
		matmul_batched(c, n, dy[0]);
	return true;
}

/* Y = alpha A' B' + beta C with A' = transA ? A^T : A, B' likewise. */
bool
grad_gemm(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId a = grad_in(c, n, 0), b = grad_in(c, n, 1), g = dy[0];
	bool ta = ir_attr_int(c->g, n, "transA", 0), tb = ir_attr_int(c->g, n, "transB", 0);
	double alpha = ir_attr_float(c->g, n, "alpha", 1), beta = ir_attr_float(c->g, n, "beta", 1);
	if (grad_wants(c, n, 0))
		grad_give(c, n, 0, ta ? product(c, b, g, tb, true, alpha) :
		    product(c, g, b, false, !tb, alpha));
	if (grad_wants(c, n, 1))
		grad_give(c, n, 1, tb ? product(c, g, a, true, ta, alpha) :
		    product(c, a, g, !ta, false, alpha));
	if (grad_wants(c, n, 2)) {
		TensorId s = grad_sum_to(c, g, grad_in(c, n, 2));
		grad_give(c, n, 2, beta != 1 ? grad_op2(c, OP_Mul, s, grad_num(c, s, beta)) : s);
	}
	return true;
}

/* ------------------------------------------------------ windows */

/* A Conv's or pool's window with explicit pads (auto_pad resolved from
 * the sizes, as the kernels do). */
typedef struct {
	int ns;                         /* spatial dims */
	int64_t k[IR_MAX_RANK], st[IR_MAX_RANK], dil[IR_MAX_RANK];
	int64_t pads[2 * IR_MAX_RANK];  /* begins, then ends */
	int64_t in[IR_MAX_RANK], out[IR_MAX_RANK];
} Window;

static void
ints_or(GradCtx *c, NodeId n, const char *name, int cnt, int64_t dflt, int64_t *v)
{
	if (grad_int_arg(c, n, -1, name, v, cnt) != cnt)
		for (int i = 0; i < cnt; i++)
			v[i] = dflt;
}

static void
window_of(GradCtx *c, NodeId n, const int64_t *kdims, Window *w)
{
	int64_t xd[IR_MAX_RANK], yd[IR_MAX_RANK];
	int r = grad_dims(c, grad_in(c, n, 0), xd);
	grad_dims(c, grad_out(c, n, 0), yd);
	w->ns = r - 2;
	if (grad_int_arg(c, n, -1, "kernel_shape", w->k, w->ns) != w->ns)
		memcpy(w->k, kdims, sizeof *kdims * w->ns);
	ints_or(c, n, "strides", w->ns, 1, w->st);
	ints_or(c, n, "dilations", w->ns, 1, w->dil);
	ints_or(c, n, "pads", 2 * w->ns, 0, w->pads);
	const char *ap = ir_attr_str(c->g, n, "auto_pad", "NOTSET");
	for (int i = 0; i < w->ns; i++) {
		w->in[i] = xd[2 + i];
		w->out[i] = yd[2 + i];
		if (!strcmp(ap, "VALID"))
			w->pads[i] = w->pads[w->ns + i] = 0;
		if (strncmp(ap, "SAME_", 5))
			continue;
		int64_t tot = (w->out[i] - 1) * w->st[i] + (w->k[i] - 1) * w->dil[i] + 1 - w->in[i];
		tot = tot < 0 ? 0 : tot;
		w->pads[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
		w->pads[w->ns + i] = tot - w->pads[i];
	}
}

static void
set_window(GradCtx *c, NodeId m, const Window *w, bool dil)
{
	grad_set_ints(c, m, "kernel_shape", w->ns, w->k);
	grad_set_ints(c, m, "strides", w->ns, w->st);
	grad_set_ints(c, m, "pads", 2 * w->ns, w->pads);
	if (dil)
		grad_set_ints(c, m, "dilations", w->ns, w->dil);
}

/* -------------------------------------------------------- convolution */

/* dX: ConvTranspose(dY, W) with the Conv's geometry and the output
 * padding that gives back X's size; dW: ConvGradWeight; dB: dY summed
 * over images and positions. */
bool
grad_conv(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0), w = grad_in(c, n, 1);
	int64_t wd[IR_MAX_RANK];
	int r = grad_dims(c, w, wd);
	Window win;
	window_of(c, n, wd + 2, &win);
	int64_t group = ir_attr_int(c->g, n, "group", 1);
	if (grad_wants(c, n, 0)) {
		int64_t opad[IR_MAX_RANK];
		for (int i = 0; i < win.ns; i++)
			opad[i] = win.in[i] - ((win.out[i] - 1) * win.st[i] +
			    (win.k[i] - 1) * win.dil[i] + 1 - win.pads[i] - win.pads[win.ns + i]);
		TensorId in[2] = {dy[0], w};
		NodeId m = grad_begin(c, OP_ConvTranspose, 2, in, 1, NULL);
		set_window(c, m, &win, true);
		grad_set_ints(c, m, "output_padding", win.ns, opad);
		grad_set_int(c, m, "group", group);
		grad_give(c, n, 0, grad_finish(c, m));
	}
	if (grad_wants(c, n, 1)) {
		TensorId in[2] = {x, dy[0]};
		NodeId m = grad_begin(c, OP_ConvGradWeight, 2, in, 1, NULL);
		set_window(c, m, &win, true);
		grad_set_int(c, m, "group", group);
		grad_give(c, n, 1, grad_finish(c, m));
	}
	if (grad_wants(c, n, 2)) {
		int64_t axes[IR_MAX_RANK];
		axes[0] = 0;
		for (int i = 2; i < r; i++)
			axes[i - 1] = i;
		grad_give(c, n, 2, grad_reduce(c, OP_ReduceSum, dy[0], r - 1, axes, false));
	}
	return true;
}

/* -------------------------------------------------------------- pools */

bool
grad_maxpool(GradCtx *c, NodeId n, const TensorId *dy)
{
	Window win;
	window_of(c, n, NULL, &win);
	TensorId in[2] = {dy[0], grad_in(c, n, 0)};
	NodeId m = grad_begin(c, OP_MaxPoolGrad, 2, in, 1, NULL);
	set_window(c, m, &win, true);
	grad_copy_attr(c, m, n, "ceil_mode");
	grad_give(c, n, 0, grad_finish(c, m));
	return true;
}

bool
grad_avgpool(GradCtx *c, NodeId n, const TensorId *dy)
{
	Window win;
	window_of(c, n, NULL, &win);
	int64_t xd[IR_MAX_RANK];
	int r = grad_dims(c, grad_in(c, n, 0), xd);
	NodeId m = grad_begin(c, OP_AveragePoolGrad, 1, dy, 1, NULL);
	set_window(c, m, &win, false);
	grad_set_ints(c, m, "shape", r, xd);
	grad_copy_attr(c, m, n, "ceil_mode");
	grad_copy_attr(c, m, n, "count_include_pad");
	grad_give(c, n, 0, grad_finish(c, m));
	return true;
}

/* GlobalAveragePool: dy / positions everywhere; GlobalMaxPool: MaxPool's
 * gradient with one window over all positions. */
bool
grad_global_pool(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId x = grad_in(c, n, 0);
	int64_t xd[IR_MAX_RANK], size = 1;
	int r = grad_dims(c, x, xd);
	if (c->g->nodes[n].op == OP_GlobalAveragePool) {
		for (int i = 2; i < r; i++)
			size *= xd[i];
		TensorId g = grad_op2(c, OP_Mul, dy[0], grad_num(c, x, size ? 1.0 / (double)size : 0));
		grad_give(c, n, 0, grad_expand_like(c, g, x));
		return true;
	}
	Window win = {.ns = r - 2};
	for (int i = 0; i < win.ns; i++) {
		win.k[i] = xd[2 + i];
		win.st[i] = win.dil[i] = 1;
		win.pads[i] = win.pads[win.ns + i] = 0;
	}
	TensorId in[2] = {dy[0], x};
	NodeId m = grad_begin(c, OP_MaxPoolGrad, 2, in, 1, NULL);
	set_window(c, m, &win, false);
	grad_give(c, n, 0, grad_finish(c, m));
	return true;
}

/* ----------------------------------------------------- normalizations */

/* Inference form: y = (x - mean) * s + B with s = scale / sqrt(var + eps)
 * per channel (axis 1).  dX = dy * s, dscale = sum(dy * (x - mean) /
 * sqrt(var + eps)), dB = sum(dy), sums over all but the channel axis. */
bool
grad_batchnorm(GradCtx *c, NodeId n, const TensorId *dy)
{
	Graph *g = c->g;
	if ((g->opset >= 14 && ir_attr_int(g, n, "training_mode", 0)) ||
	    (g->opset < 7 && !ir_attr_int(g, n, "is_test", 0)) ||
	    (g->opset < 9 && !ir_attr_int(g, n, "spatial", 1))) {
		diag_node(g, n, "BatchNormalization has a gradient in tapc only in inference form (running statistics, per channel)");
		return false;
	}
	for (int i = 1; i < g->nodes[n].nout; i++)
		if (dy[i] != IR_NONE) {
			diag_node(g, n, "output %d of BatchNormalization has no gradient in tapc", i);
			return false;
		}
	TensorId x = grad_in(c, n, 0), scale = grad_in(c, n, 1), mean = grad_in(c, n, 3);
	int r = grad_rank(c, x);
	int64_t axes[IR_MAX_RANK], chan[IR_MAX_RANK];
	int na = 0;
	for (int i = 0; i < r; i++)
		if (i != 1)
			axes[na++] = i;
	for (int i = 1; i < r - 1; i++)
		chan[i - 1] = i;
	double eps = ir_attr_float(g, n, "epsilon", 1e-5f);
	TensorId var = grad_in(c, n, 4);
	TensorId inv = grad_op1(c, OP_Reciprocal, grad_op1(c, OP_Sqrt,
	    grad_op2(c, OP_Add, var, grad_num(c, var, eps))));
	if (grad_wants(c, n, 0)) {
		TensorId s = grad_unsqueeze(c, grad_op2(c, OP_Mul, scale, inv), r - 2, chan);
		grad_give(c, n, 0, grad_op2(c, OP_Mul, dy[0], s));
	}
	if (grad_wants(c, n, 1)) {
		TensorId xc = grad_op2(c, OP_Sub, x, grad_unsqueeze(c, mean, r - 2, chan));
		TensorId xhat = grad_op2(c, OP_Mul, xc, grad_unsqueeze(c, inv, r - 2, chan));
		grad_give(c, n, 1, grad_reduce(c, OP_ReduceSum, grad_op2(c, OP_Mul, dy[0], xhat), na,
		    axes, false));
	}
	if (grad_wants(c, n, 2))
		grad_give(c, n, 2, grad_reduce(c, OP_ReduceSum, dy[0], na, axes, false));
	return true;
}

/* LayerNormalizationGrad gives dX, dScale and dBias in one pass over the
 * rows; a bias of another shape than the scale gets dy summed instead. */
bool
grad_layernorm(GradCtx *c, NodeId n, const TensorId *dy)
{
	Graph *g = c->g;
	for (int i = 1; i < g->nodes[n].nout; i++)
		if (dy[i] != IR_NONE) {
			diag_node(g, n, "output %d of LayerNormalization (%s) has no gradient in tapc", i,
			    i == 1 ? "Mean" : "InvStdDev");
			return false;
		}
	TensorId x = grad_in(c, n, 0), scale = grad_in(c, n, 1), bias = grad_in(c, n, 2);
	int r = grad_rank(c, x);
	int64_t axis = grad_axis(ir_attr_int(g, n, "axis", -1), r);
	const Tensor *ts = grad_t(c, scale), *tb = bias != IR_NONE ? grad_t(c, bias) : NULL;
	bool same = tb && tb->rank == ts->rank && !memcmp(tb->dims, ts->dims, sizeof tb->dims[0] * tb->rank);
	bool keep[3] = {grad_wants(c, n, 0), grad_wants(c, n, 1), same && grad_wants(c, n, 2)};
	if (keep[0] || keep[1] || keep[2]) {
		TensorId in[3] = {dy[0], x, scale};
		NodeId m = grad_begin(c, OP_LayerNormalizationGrad, 3, in, 3, keep);
		grad_set_int(c, m, "axis", axis);
		grad_set_float(c, m, "epsilon", ir_attr_float(g, n, "epsilon", 1e-5f));
		grad_finish(c, m);
		for (int i = 0; i < 3; i++)
			if (keep[i])
				grad_give(c, n, i, g->nodes[m].out[i]);
	}
	if (!same && grad_wants(c, n, 2)) {
		int64_t lead[IR_MAX_RANK];
		for (int i = 0; i < axis; i++)
			lead[i] = i;
		TensorId s = grad_reduce(c, OP_ReduceSum, dy[0], (int)axis, lead, false);
		grad_give_sum(c, n, 2, s);
	}
	return true;
}

/* fuse-train's FusedGelu: GeluGrad(dY, X), one pass. */
bool
grad_gelu(GradCtx *c, NodeId n, const TensorId *dy)
{
	TensorId in[2] = {dy[0], grad_in(c, n, 0)};
	grad_give(c, n, 0, grad_finish(c, grad_begin(c, OP_GeluGrad, 2, in, 1, NULL)));
	return true;
}

/* Softmax: dx = y (dy - sum(dy y)); LogSoftmax: dx = dy - exp(y) sum(dy),
 * along the axis.  Before opset 13 the axis splits the input into a
 * matrix [outer, rest] (the reduction runs over everything after it):
 * the gradient runs on that matrix. */
bool
grad_softmax(GradCtx *c, NodeId n, const TensorId *dy)
{
	Graph *g = c->g;
	TensorId x = grad_in(c, n, 0), y = grad_out(c, n, 0), gy = dy[0];
	int64_t xd[IR_MAX_RANK];
	int r = grad_dims(c, x, xd);
	int64_t axis = grad_axis(ir_attr_int(g, n, "axis", g->opset >= 13 ? -1 : 1), r);
	if (g->opset < 13 && axis != r - 1) {
		int64_t m[2] = {1, 1};
		for (int i = 0; i < r; i++)
			m[i >= axis] *= xd[i];
		gy = grad_reshape(c, gy, 2, m);
		y = grad_reshape(c, y, 2, m);
		axis = 1;
	}
	TensorId in[2] = {gy, y};
	NodeId s = grad_begin(c, g->nodes[n].op == OP_Softmax ? OP_SoftmaxGrad : OP_LogSoftmaxGrad,
	    2, in, 1, NULL);
	grad_set_int(c, s, "axis", axis);
	grad_give(c, n, 0, grad_reshape_like(c, grad_finish(c, s), x));
	return true;
}
