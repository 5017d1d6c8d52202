/*
 * infer.c - static shape inference: the dtype and shape of every node's
 * outputs from its inputs and attributes, following the ONNX operator spec.
 *
 * Needs: graph inputs, weights and constants already shaped, nodes in
 * topological order.  tapc compiles static shapes only, so every input that
 * decides a shape (Reshape's shape, Slice's starts, Expand's shape, ...) must
 * be known at compile time: a weight or constant (ir_value) or a value that
 * ir_eval_node computed from earlier nodes; ir_infer_all runs the two in
 * turn so Shape -> Gather -> Concat -> Reshape chains fold.  Both attribute
 * and input forms of ops that changed between opsets are accepted: the
 * input where it is present, else the attribute.
 *
 * Dims come from strangers' models: arithmetic on them is overflow-checked
 * and every axis and index range-checked.  Errors go through diag_node and
 * make the function return false.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ir/ir.h"
#include "runtime/einsum.h"

typedef struct {
	int rank;
	int64_t d[IR_MAX_RANK];
} Shape;

/* ------------------------------------------------------------ helpers */

static bool
mul_ck(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

static bool
add_ck(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_add_overflow(a, b, r);
}

/* Input i, or NULL when it is omitted or past the end. */
static Tensor *
in(Graph *g, NodeId n, int i)
{
	Node *nd = ir_node(g, n);
	return i < nd->nin && nd->in[i] != IR_NONE ? ir_tensor(g, nd->in[i]) : NULL;
}

static Shape
shape_of(const Tensor *t)
{
	Shape s = {t->rank > 0 ? t->rank : 0, {0}};
	memcpy(s.d, t->dims, sizeof s.d[0] * s.rank);
	return s;
}

/* Rotating buffers so one message can show several types. */
static const char *
ts(const Tensor *t)
{
	static char buf[4][IR_TYPESTR];
	static int k;
	return ir_typestr(t, buf[k++ % 4]);
}

static const char *
ss(const Shape *s)
{
	Tensor t = {.dtype = DT_UNDEF, .rank = s->rank};
	memcpy(t.dims, s->d, sizeof s->d[0] * s->rank);
	return ts(&t) + 1;              /* skip the "?" dtype */
}

static bool
set_out(Graph *g, NodeId n, int i, DType dt, const Shape *s)
{
	Node *nd = ir_node(g, n);
	if (i >= nd->nout || nd->out[i] == IR_NONE)
		return true;
	int64_t total = 1;
	for (int k = 0; k < s->rank; k++)
		if (s->d[k] < 0 || !mul_ck(total, s->d[k], &total)) {
			diag_node(g, n, "output %d would be %s, which is not a valid shape", i, ss(s));
			return false;
		}
	/* bytes too: an Expand or ConstantOfShape to 2^61 f32 elements fits in
	 * int64 elements but not in any buffer the program could allocate */
	if (ir_shape_bytes(dt, s->rank, s->d) < 0) {
		diag_node(g, n, "output %d would be %s%s, over tapc's limit of 2^%d bytes", i,
		    ir_dtype_name(dt), ss(s), IR_MAX_BYTES_LOG2);
		return false;
	}
	Tensor *t = ir_tensor(g, nd->out[i]);
	t->dtype = dt;
	ir_set_shape(t, s->rank, s->d);
	return true;
}

/* Normalise an axis in [-rank, rank) to [0, rank). */
static bool
norm_axis(Graph *g, NodeId n, int64_t *axis, int rank)
{
	if (*axis < -rank || *axis >= rank) {
		diag_node(g, n, "axis %lld is out of range for rank %d", (long long)*axis, rank);
		return false;
	}
	if (*axis < 0)
		*axis += rank;
	return true;
}

/* A list of axes as a bit mask, rejecting repeats. */
static bool
axes_mask(Graph *g, NodeId n, const int64_t *ax, int cnt, int rank, unsigned *mask)
{
	*mask = 0;
	for (int i = 0; i < cnt; i++) {
		int64_t a = ax[i];
		if (!norm_axis(g, n, &a, rank))
			return false;
		if (*mask & 1u << a) {
			diag_node(g, n, "axis %lld is repeated", (long long)ax[i]);
			return false;
		}
		*mask |= 1u << a;
	}
	return true;
}

/* Element i of a value as an integer or a double (known-content readers). */
static int64_t
elem_i(DType dt, const void *p, int64_t i)
{
	switch (dt) {
	case DT_I64: return ((const int64_t *)p)[i];
	case DT_I32: return ((const int32_t *)p)[i];
	case DT_I16: return ((const int16_t *)p)[i];
	case DT_I8: return ((const int8_t *)p)[i];
	case DT_U8: return ((const uint8_t *)p)[i];
	case DT_U16: return ((const uint16_t *)p)[i];
	case DT_U32: return ((const uint32_t *)p)[i];
	case DT_U64: {
		uint64_t u = ((const uint64_t *)p)[i];
		return u > INT64_MAX ? INT64_MAX : (int64_t)u;
	}
	case DT_F32: {
		float f = ((const float *)p)[i];
		return f >= -9e18f && f <= 9e18f ? (int64_t)f : 0;
	}
	case DT_F64: {
		double f = ((const double *)p)[i];
		return f >= -9e18 && f <= 9e18 ? (int64_t)f : 0;
	}
	default: return 0;
	}
}

static double
elem_f(DType dt, const void *p, int64_t i)
{
	switch (dt) {
	case DT_F32: return ((const float *)p)[i];
	case DT_F64: return ((const double *)p)[i];
	default: return (double)elem_i(dt, p, i);
	}
}

/*
 * An int list from input idx where present, else from attribute name (NULL
 * for none).  Returns the count, -1 when neither is given, -2 after an
 * error.  *out points into the arena.
 */
static int
int_list(Graph *g, NodeId n, int idx, const char *name, const int64_t **out)
{
	Tensor *t = idx >= 0 ? in(g, n, idx) : NULL;
	if (t) {
		const void *v = ir_value(g, ir_node(g, n)->in[idx]);
		if (!v) {
			diag_node(g, n, "input %d '%s' is not a compile-time constant", idx, t->name);
			return -2;
		}
		if (t->dtype != DT_I64 && t->dtype != DT_I32) {
			diag_node(g, n, "input %d is %s, expected i64", idx, ts(t));
			return -2;
		}
		if (t->rank > 1) {
			diag_node(g, n, "input %d is %s, expected a 1-D list", idx, ts(t));
			return -2;
		}
		int cnt = (int)ir_numel(t);
		int64_t *l = ir_alloc(&g->arena, sizeof *l * (cnt + 1));
		for (int i = 0; i < cnt; i++)
			l[i] = elem_i(t->dtype, v, i);
		*out = l;
		return cnt;
	}
	const Attr *a = name ? ir_attr(g, n, name) : NULL;
	if (!a)
		return -1;
	if (a->type == ATTR_INT) {
		*out = &a->i;
		return 1;
	}
	if (a->type != ATTR_INTS) {
		diag_node(g, n, "attribute '%s' is not a list of ints", name);
		return -2;
	}
	*out = a->is;
	return a->n;
}

/* An int-list attribute of exactly cnt elements, each >= lo, or all dflt. */
static bool
attr_ints(Graph *g, NodeId n, const char *name, int cnt, int64_t lo, int64_t dflt, int64_t *out)
{
	const int64_t *l;
	int k = int_list(g, n, -1, name, &l);
	if (k == -2)
		return false;
	if (k >= 0 && k != cnt) {
		diag_node(g, n, "attribute '%s' has %d values, expected %d", name, k, cnt);
		return false;
	}
	for (int i = 0; i < cnt; i++) {
		out[i] = k < 0 ? dflt : l[i];
		if (out[i] < lo) {
			diag_node(g, n, "attribute '%s' has %lld, expected at least %lld", name,
			    (long long)out[i], (long long)lo);
			return false;
		}
	}
	return true;
}

/* Multidirectional (numpy) broadcast of b into acc. */
static bool
bcast(Shape *acc, const Shape *b)
{
	Shape o = {acc->rank > b->rank ? acc->rank : b->rank, {0}};
	for (int i = 0; i < o.rank; i++) {
		int ia = i - (o.rank - acc->rank), ib = i - (o.rank - b->rank);
		int64_t da = ia >= 0 ? acc->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
		if (da == db || db == 1)
			o.d[i] = da;
		else if (da == 1)
			o.d[i] = db;
		else
			return false;
	}
	*acc = o;
	return true;
}

/* Does from broadcast to exactly to (unidirectional)? */
static bool
bcast_to(const Shape *from, const Shape *to)
{
	Shape s = *to;
	if (from->rank > to->rank || !bcast(&s, from))
		return false;
	return memcmp(s.d, to->d, sizeof s.d[0] * to->rank) == 0;
}

static bool
want_rank(Graph *g, NodeId n, int i, int lo, int hi)
{
	Tensor *t = in(g, n, i);
	if (t->rank >= lo && t->rank <= hi)
		return true;
	if (lo == hi)
		diag_node(g, n, "input %d is %s, expected rank %d", i, ts(t), lo);
	else
		diag_node(g, n, "input %d is %s, expected rank %d to %d", i, ts(t), lo, hi);
	return false;
}

static bool
same_dtype(Graph *g, NodeId n, int i, int j)
{
	Tensor *a = in(g, n, i), *b = in(g, n, j);
	if (!a || !b || a->dtype == b->dtype)
		return true;
	diag_node(g, n, "input %d is %s, expected %s like input %d", j, ts(b),
	    ir_dtype_name(a->dtype), i);
	return false;
}

static bool
want_scalar(Graph *g, NodeId n, int i)
{
	Tensor *t = in(g, n, i);
	if (!t || ir_numel(t) == 1)
		return true;
	diag_node(g, n, "input %d is %s, expected a scalar", i, ts(t));
	return false;
}

/* ------------------------------------------------------------- arity */

/* Input and output counts: min, max (-1: any).  Rows left zero (omax 0)
 * take the defaults of their kind (unary or binary elementwise). */
static const struct {
	signed char imin, imax, omin, omax;
} arity[OP_COUNT] = {
	[OP_Clip] = {1, 3, 1, 1}, [OP_Dropout] = {1, 3, 1, 2},
	[OP_AllReduce] = {1, -1, 1, -1}, [OP_AllGather] = {1, 1, 1, 1},
	[OP_ReduceScatter] = {1, 1, 1, 1}, [OP_Shard] = {1, 1, 1, 1},
	[OP_Max] = {1, -1, 1, 1}, [OP_Min] = {1, -1, 1, 1}, [OP_Sum] = {1, -1, 1, 1},
	[OP_Mean] = {1, -1, 1, 1}, [OP_Where] = {3, 3, 1, 1},
	[OP_ReduceMean] = {1, 2, 1, 1}, [OP_ReduceSum] = {1, 2, 1, 1},
	[OP_ReduceMax] = {1, 2, 1, 1}, [OP_ReduceMin] = {1, 2, 1, 1},
	[OP_ReduceProd] = {1, 2, 1, 1}, [OP_ReduceSumSquare] = {1, 2, 1, 1},
	[OP_ReduceL1] = {1, 2, 1, 1}, [OP_ReduceL2] = {1, 2, 1, 1},
	[OP_ReduceLogSum] = {1, 2, 1, 1}, [OP_ReduceLogSumExp] = {1, 2, 1, 1},
	[OP_ArgMax] = {1, 1, 1, 1}, [OP_ArgMin] = {1, 1, 1, 1}, [OP_CastLike] = {2, 2, 1, 1},
	[OP_Constant] = {0, 0, 1, 1}, [OP_ConstantOfShape] = {1, 1, 1, 1},
	[OP_Shape] = {1, 1, 1, 1}, [OP_Size] = {1, 1, 1, 1}, [OP_Range] = {3, 3, 1, 1},
	[OP_Reshape] = {1, 2, 1, 1}, [OP_Flatten] = {1, 1, 1, 1},
	[OP_Squeeze] = {1, 2, 1, 1}, [OP_Unsqueeze] = {1, 2, 1, 1},
	[OP_Transpose] = {1, 1, 1, 1}, [OP_Concat] = {1, -1, 1, 1},
	[OP_Split] = {1, 2, 1, -1}, [OP_Slice] = {1, 5, 1, 1}, [OP_Gather] = {2, 2, 1, 1},
	[OP_Expand] = {2, 2, 1, 1}, [OP_Tile] = {2, 2, 1, 1}, [OP_Trilu] = {1, 2, 1, 1}, [OP_EyeLike] = {1, 1, 1, 1},
	[OP_RandomUniform] = {0, 0, 1, 1}, [OP_RandomNormal] = {0, 0, 1, 1},
	[OP_RandomUniformLike] = {1, 1, 1, 1}, [OP_RandomNormalLike] = {1, 1, 1, 1},
	[OP_Bernoulli] = {1, 1, 1, 1},
	[OP_GatherND] = {2, 2, 1, 1},
	[OP_Pad] = {1, 4, 1, 1},
	[OP_MatMul] = {2, 2, 1, 1}, [OP_Gemm] = {2, 3, 1, 1}, [OP_Conv] = {2, 3, 1, 1},
	[OP_FusedConv] = {2, 4, 1, 1}, [OP_FusedMatMul] = {2, 4, 1, 1},
	[OP_FusedMatMulInteger] = {5, 7, 1, 1},
	[OP_FusedLayerNorm] = {2, 3, 1, 1}, [OP_FusedGelu] = {1, 1, 1, 1},
	[OP_FusedSoftmax] = {1, 2, 1, 1},
	[OP_FusedSqueezeExcite] = {3, 5, 1, 1}, [OP_FusedConvDw] = {3, 5, 1, 1},
	[OP_BatchNormalization] = {5, 5, 1, 5}, [OP_LayerNormalization] = {2, 3, 1, 3},
	[OP_Softmax] = {1, 1, 1, 1}, [OP_LogSoftmax] = {1, 1, 1, 1}, [OP_Hardmax] = {1, 1, 1, 1},
	[OP_QuantizeLinear] = {2, 3, 1, 1}, [OP_DequantizeLinear] = {2, 3, 1, 1},
	[OP_DynamicQuantizeLinear] = {1, 1, 3, 3}, [OP_MatMulInteger] = {2, 4, 1, 1},
	[OP_QLinearMatMul] = {8, 8, 1, 1}, [OP_ConvInteger] = {2, 4, 1, 1},
	[OP_QLinearConv] = {8, 9, 1, 1},
	[OP_LRN] = {1, 1, 1, 1}, [OP_MeanVarianceNormalization] = {1, 1, 1, 1},
	[OP_ReverseSequence] = {2, 2, 1, 1}, [OP_GridSample] = {2, 2, 1, 1},
	[OP_NegativeLogLikelihoodLoss] = {2, 3, 1, 1}, [OP_SoftmaxCrossEntropyLoss] = {2, 3, 1, 2},
	[OP_MaxPool] = {1, 1, 1, 2}, [OP_AveragePool] = {1, 1, 1, 1},
	[OP_GlobalAveragePool] = {1, 1, 1, 1}, [OP_GlobalMaxPool] = {1, 1, 1, 1},
	/* every output of the recurrent ops is optional */
	[OP_RNN] = {3, 6, 0, 2}, [OP_GRU] = {3, 6, 0, 2}, [OP_LSTM] = {3, 8, 0, 3},
	[OP_GatherElements] = {2, 2, 1, 1}, [OP_ScatterElements] = {3, 3, 1, 1},
	[OP_Scatter] = {3, 3, 1, 1}, [OP_ScatterND] = {3, 3, 1, 1}, [OP_OneHot] = {3, 3, 1, 1},
	[OP_Einsum] = {1, -1, 1, 1}, [OP_CumSum] = {2, 2, 1, 1}, [OP_TopK] = {1, 2, 2, 2},
	[OP_If] = {3, -1, 1, -1},
	[OP_ConvTranspose] = {2, 3, 1, 1}, [OP_InstanceNormalization] = {3, 3, 1, 1},
	[OP_Resize] = {1, 4, 1, 1}, [OP_Upsample] = {1, 2, 1, 1},
	[OP_DepthToSpace] = {1, 1, 1, 1}, [OP_SpaceToDepth] = {1, 1, 1, 1},
	[OP_Det] = {1, 1, 1, 1}, [OP_HannWindow] = {1, 1, 1, 1}, [OP_HammingWindow] = {1, 1, 1, 1},
	[OP_BlackmanWindow] = {1, 1, 1, 1}, [OP_DFT] = {1, 2, 1, 1}, [OP_STFT] = {2, 4, 1, 1},
	[OP_MelWeightMatrix] = {5, 5, 1, 1},
};

static bool
check_arity(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	int imin = arity[nd->op].imin, imax = arity[nd->op].imax;
	int omin = arity[nd->op].omin, omax = arity[nd->op].omax;
	if (omax == 0) {
		imin = imax = ir_op_kind(nd->op) == OPK_BINARY ? 2 : 1;
		omin = omax = 1;
	}
	/* trailing omitted optional inputs do not count */
	int nin = nd->nin, nout = nd->nout;
	while (nin > imin && nd->in[nin - 1] == IR_NONE)
		nin--;
	while (nout > omin && nd->out[nout - 1] == IR_NONE)
		nout--;
	if (nin < imin || (imax >= 0 && nin > imax)) {
		if (imax < 0)
			diag_node(g, n, "expected at least %d inputs, got %d", imin, nin);
		else if (imin == imax)
			diag_node(g, n, "expected %d inputs, got %d", imin, nin);
		else
			diag_node(g, n, "expected %d to %d inputs, got %d", imin, imax, nin);
		return false;
	}
	if (nout < omin || (omax >= 0 && nout > omax)) {
		diag_node(g, n, "expected %d to %d outputs, got %d", omin, omax, nout);
		return false;
	}
	for (int i = 0; i < nd->nin; i++) {
		if (nd->in[i] == IR_NONE) {
			if (i < imin) {
				diag_node(g, n, "input %d is missing", i);
				return false;
			}
			continue;
		}
		if (nd->in[i] < 0 || nd->in[i] >= g->ntensors)
			die("node %d input %d: bad tensor id %d", n, i, nd->in[i]);
		Tensor *t = ir_tensor(g, nd->in[i]);
		if (t->rank < 0) {
			diag_node(g, n, "input %d '%s' has no known shape", i, t->name);
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------- elementwise */

static bool
infer_unary(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x);
	DType dt = x->dtype;
	switch (ir_node(g, n)->op) {
	case OP_IsNaN: case OP_IsInf:
		dt = DT_BOOL;
		break;
	case OP_CastLike:
		dt = in(g, n, 1)->dtype;
		break;
	case OP_Cast: {
		const Attr *a = ir_attr(g, n, "to");
		if (!a || a->type != ATTR_INT) {
			diag_node(g, n, "attribute 'to' is missing");
			return false;
		}
		if (a->i <= 0 || a->i >= DT_COUNT || ir_dtype_size((DType)a->i) == 0) {
			diag_node(g, n, "cannot cast to dtype %lld", (long long)a->i);
			return false;
		}
		dt = (DType)a->i;
		break;
	}
	case OP_Clip:
		if (!want_scalar(g, n, 1) || !want_scalar(g, n, 2))
			return false;
		break;
	case OP_Dropout: {
		if (!want_scalar(g, n, 1) || !want_scalar(g, n, 2))
			return false;
		/* tapc compiles inference: a training-mode Dropout (a random mask)
		 * would silently become a copy */
		const Node *nd = ir_node(g, n);
		TensorId tm = nd->nin > 2 ? nd->in[2] : IR_NONE;
		TensorId ratio = nd->nin > 1 ? nd->in[1] : IR_NONE;
		const uint8_t *v = tm != IR_NONE ? ir_value(g, tm) : NULL;
		const void *r = ratio != IR_NONE && g->tensors[ratio].dtype == DT_F32 ?
		    ir_value(g, ratio) : NULL;
		/* ratio 0 is a copy even in training; a mode known only at run
		 * time is checked by the kernel */
		bool nonzero = ratio == IR_NONE || (r && *(const float *)r != 0);
		if ((v && *v && nonzero) || ir_attr_int(g, n, "is_test", 1) == 0) {
			diag_node(g, n, "training-mode Dropout is not supported (a random mask): training_mode must be false, or the ratio 0");
			return false;
		}
		if (!set_out(g, n, 1, DT_BOOL, &s))
			return false;
		break;
	}
	default:
		break;
	}
	return set_out(g, n, 0, dt, &s);
}

static bool
is_predicate(Op op)
{
	switch (op) {
	case OP_Equal: case OP_Less: case OP_LessOrEqual: case OP_Greater:
	case OP_GreaterOrEqual: case OP_And: case OP_Or: case OP_Xor:
		return true;
	default:
		return false;
	}
}

/* Binary and variadic broadcasting ops, Where included. */
static bool
infer_bcast(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	Op op = nd->op;
	int first = op == OP_Where ? 1 : 0;
	Tensor *x = in(g, n, first);
	if (op == OP_Where && in(g, n, 0)->dtype != DT_BOOL) {
		diag_node(g, n, "input 0 is %s, expected bool", ts(in(g, n, 0)));
		return false;
	}
	if (op == OP_PRelu) {
		Shape sx = shape_of(x), sl = shape_of(in(g, n, 1));
		if (!bcast_to(&sl, &sx)) {
			diag_node(g, n, "input 1 is %s, which does not broadcast to input 0 %s",
			    ts(in(g, n, 1)), ts(x));
			return false;
		}
		return same_dtype(g, n, 0, 1) && set_out(g, n, 0, x->dtype, &sx);
	}
	Shape s = shape_of(in(g, n, 0));
	for (int i = 1; i < nd->nin; i++) {
		Tensor *t = in(g, n, i);
		if (!t)
			continue;
		Shape st = shape_of(t);
		Shape before = s;
		if (!bcast(&s, &st)) {
			diag_node(g, n, "input %d is %s, which does not broadcast with %s", i,
			    ts(t), ss(&before));
			return false;
		}
		if (i > first && op != OP_Pow && !same_dtype(g, n, first, i))
			return false;
	}
	return set_out(g, n, 0, is_predicate(op) ? DT_BOOL : x->dtype, &s);
}

/* --------------------------------------------------------- reductions */

static bool
infer_reduce(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Op op = ir_node(g, n)->op;
	bool keep = ir_attr_int(g, n, "keepdims", 1) != 0;
	unsigned mask = 0;
	/* exp of an integer: the opsets' type lists have them by mistake
	 * (opset 21 dropped them) */
	if (op == OP_ReduceLogSumExp && x->dtype != DT_F32 && x->dtype != DT_F64 &&
	    x->dtype != DT_F16 && x->dtype != DT_BF16) {
		diag_node(g, n, "input 0 is %s, but only float types are supported", ts(x));
		return false;
	}
	if (op == OP_ArgMax || op == OP_ArgMin) {
		int64_t axis = ir_attr_int(g, n, "axis", 0);
		if (!norm_axis(g, n, &axis, x->rank))
			return false;
		mask = 1u << axis;
	} else {
		const int64_t *ax;
		int cnt = int_list(g, n, 1, "axes", &ax);
		if (cnt == -2)
			return false;
		if (cnt <= 0)
			mask = ir_attr_int(g, n, "noop_with_empty_axes", 0) ? 0 : (1u << x->rank) - 1;
		else if (!axes_mask(g, n, ax, cnt, x->rank, &mask))
			return false;
	}
	Shape s = {0, {0}};
	for (int i = 0; i < x->rank; i++)
		if (!(mask & 1u << i))
			s.d[s.rank++] = x->dims[i];
		else if (keep)
			s.d[s.rank++] = 1;
	return set_out(g, n, 0, op == OP_ArgMax || op == OP_ArgMin ? DT_I64 : x->dtype, &s);
}

/* ---------------------------------------------------- shape arithmetic */

static bool
infer_constant(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	if (nd->nattr != 1) {
		diag_node(g, n, "expected one value attribute, got %d", nd->nattr);
		return false;
	}
	const Attr *a = &nd->attr[0];
	Shape s = {0, {0}};
	if (strcmp(a->name, "value") == 0 && a->type == ATTR_TENSOR) {
		Tensor *t = ir_tensor(g, a->t);
		if (t->rank < 0)
			die("constant tensor '%s' has no shape", t->name);
		return set_out(g, n, 0, t->dtype, (s = shape_of(t), &s));
	}
	if (strcmp(a->name, "value_float") == 0 && a->type == ATTR_FLOAT)
		return set_out(g, n, 0, DT_F32, &s);
	if (strcmp(a->name, "value_int") == 0 && a->type == ATTR_INT)
		return set_out(g, n, 0, DT_I64, &s);
	s.rank = 1;
	s.d[0] = a->n;
	if (strcmp(a->name, "value_floats") == 0 && a->type == ATTR_FLOATS)
		return set_out(g, n, 0, DT_F32, &s);
	if (strcmp(a->name, "value_ints") == 0 && a->type == ATTR_INTS)
		return set_out(g, n, 0, DT_I64, &s);
	diag_node(g, n, "unsupported value attribute '%s'", a->name);
	return false;
}

/* A shape held in input idx: constant, at most IR_MAX_RANK dims. */
static bool
shape_input(Graph *g, NodeId n, int idx, const char *attr, Shape *s, bool neg_ok)
{
	const int64_t *l;
	int cnt = int_list(g, n, idx, attr, &l);
	if (cnt == -2)
		return false;
	if (cnt == -1) {
		diag_node(g, n, "input %d (shape) is missing", idx);
		return false;
	}
	if (cnt > IR_MAX_RANK) {
		diag_node(g, n, "input %d has %d dims, more than %d", idx, cnt, IR_MAX_RANK);
		return false;
	}
	s->rank = cnt;
	for (int i = 0; i < cnt; i++) {
		s->d[i] = l[i];
		if (l[i] < (neg_ok ? -1 : 0)) {
			diag_node(g, n, "input %d has dim %lld", idx, (long long)l[i]);
			return false;
		}
	}
	return true;
}

static bool
infer_const_of_shape(Graph *g, NodeId n)
{
	Shape s;
	if (!shape_input(g, n, 0, NULL, &s, false))
		return false;
	DType dt = DT_F32;
	const Attr *a = ir_attr(g, n, "value");
	if (a) {
		Tensor *v = a->type == ATTR_TENSOR ? ir_tensor(g, a->t) : NULL;
		if (!v || ir_numel(v) != 1) {
			diag_node(g, n, "attribute 'value' must be a one-element tensor");
			return false;
		}
		dt = v->dtype;
	}
	return set_out(g, n, 0, dt, &s);
}

/* Shape's start/end, clamped to [0, rank] as the spec says. */
static int64_t
clamp_end(int64_t v, int rank)
{
	if (v < 0)
		v += rank;
	return v < 0 ? 0 : v > rank ? rank : v;
}

static bool
infer_range(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	const void *v[3];
	for (int i = 0; i < 3; i++) {
		if (!want_scalar(g, n, i) || (i && !same_dtype(g, n, 0, i)))
			return false;
		if (!(v[i] = ir_value(g, nd->in[i]))) {
			diag_node(g, n, "input %d '%s' is not a compile-time constant", i, in(g, n, i)->name);
			return false;
		}
	}
	DType dt = in(g, n, 0)->dtype;
	int64_t cnt;
	if (dt == DT_F32 || dt == DT_F64) {
		double a = elem_f(dt, v[0], 0), b = elem_f(dt, v[1], 0), d = elem_f(dt, v[2], 0);
		double c = ceil((b - a) / d);
		if (d == 0 || !(c < 1e15)) {
			diag_node(g, n, "range from %g to %g by %g is not finite", a, b, d);
			return false;
		}
		cnt = c > 0 ? (int64_t)c : 0;
	} else if (dt == DT_I64 || dt == DT_I32) {
		int64_t a = elem_i(dt, v[0], 0), b = elem_i(dt, v[1], 0), d = elem_i(dt, v[2], 0);
		if (d == 0) {
			diag_node(g, n, "range delta is 0");
			return false;
		}
		/* ceil((b - a) / d) in unsigned magnitudes: b - a may overflow */
		cnt = 0;
		if ((b > a && d > 0) || (b < a && d < 0)) {
			uint64_t diff = b > a ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
			uint64_t step = d > 0 ? (uint64_t)d : -(uint64_t)d;
			uint64_t q = diff / step + (diff % step != 0);
			if (q > INT64_MAX) {
				diag_node(g, n, "range has too many elements");
				return false;
			}
			cnt = (int64_t)q;
		}
	} else {
		diag_node(g, n, "input 0 is %s, expected a number", ts(in(g, n, 0)));
		return false;
	}
	Shape s = {1, {cnt}};
	return set_out(g, n, 0, dt, &s);
}

static bool
infer_reshape(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s;
	if (!shape_input(g, n, 1, "shape", &s, true))
		return false;
	bool allowzero = ir_attr_int(g, n, "allowzero", 0) != 0;
	int infer = -1;
	int64_t prod = 1;
	for (int i = 0; i < s.rank; i++) {
		if (s.d[i] == -1) {
			if (infer >= 0) {
				diag_node(g, n, "shape %s has more than one -1", ss(&s));
				return false;
			}
			infer = i;
			continue;
		}
		if (s.d[i] == 0 && !allowzero) {
			if (i >= x->rank) {
				diag_node(g, n, "shape %s copies dim %d of input 0 %s, which has none",
				    ss(&s), i, ts(x));
				return false;
			}
			s.d[i] = x->dims[i];
		}
		if (!mul_ck(prod, s.d[i], &prod)) {
			diag_node(g, n, "shape %s has too many elements", ss(&s));
			return false;
		}
	}
	int64_t numel = ir_numel(x);
	if (infer >= 0) {
		if (prod == 0 || numel % prod) {
			diag_node(g, n, "cannot reshape %s (%lld elements) to %s", ts(x),
			    (long long)numel, ss(&s));
			return false;
		}
		s.d[infer] = numel / prod;
	} else if (prod != numel) {
		diag_node(g, n, "cannot reshape %s (%lld elements) to %s (%lld elements)", ts(x),
		    (long long)numel, ss(&s), (long long)prod);
		return false;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_flatten(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	int64_t axis = ir_attr_int(g, n, "axis", 1);
	if (axis == x->rank)
		axis = x->rank;
	else if (!norm_axis(g, n, &axis, x->rank))
		return false;
	Shape s = {2, {1, 1}};
	for (int i = 0; i < x->rank; i++)
		s.d[i >= axis] *= x->dims[i];  /* cannot overflow: numel was checked */
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_squeeze(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Op op = ir_node(g, n)->op;
	const int64_t *ax;
	int cnt = int_list(g, n, 1, "axes", &ax);
	if (cnt == -2)
		return false;
	Shape s = {0, {0}};
	unsigned mask = 0;
	if (op == OP_Squeeze) {
		if (cnt < 0) {
			for (int i = 0; i < x->rank; i++)
				mask |= (x->dims[i] == 1) << i;
		} else if (!axes_mask(g, n, ax, cnt, x->rank, &mask)) {
			return false;
		}
		for (int i = 0; i < x->rank; i++) {
			if (!(mask & 1u << i))
				s.d[s.rank++] = x->dims[i];
			else if (x->dims[i] != 1) {
				diag_node(g, n, "cannot squeeze dim %d of %s, which is not 1", i, ts(x));
				return false;
			}
		}
		return set_out(g, n, 0, x->dtype, &s);
	}
	if (cnt < 0) {
		diag_node(g, n, "axes are missing");
		return false;
	}
	if (x->rank + cnt > IR_MAX_RANK) {
		diag_node(g, n, "output rank %d is more than %d", x->rank + cnt, IR_MAX_RANK);
		return false;
	}
	s.rank = x->rank + cnt;
	if (!axes_mask(g, n, ax, cnt, s.rank, &mask))
		return false;
	for (int i = 0, j = 0; i < s.rank; i++)
		s.d[i] = mask & 1u << i ? 1 : x->dims[j++];
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_transpose(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	const int64_t *perm = NULL;
	int cnt = int_list(g, n, -1, "perm", &perm);
	if (cnt == -2)
		return false;
	Shape s = {x->rank, {0}};
	unsigned seen = 0;
	if (cnt >= 0 && cnt != x->rank) {
		diag_node(g, n, "perm has %d entries for input 0 %s", cnt, ts(x));
		return false;
	}
	for (int i = 0; i < x->rank; i++) {
		int64_t p = cnt < 0 ? x->rank - 1 - i : perm[i];
		if (p < 0 || p >= x->rank || seen & 1u << p) {
			diag_node(g, n, "perm is not a permutation of 0..%d", x->rank - 1);
			return false;
		}
		seen |= 1u << p;
		s.d[i] = x->dims[p];
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_concat(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	Tensor *x = in(g, n, 0);
	const Attr *a = ir_attr(g, n, "axis");
	if (!a || a->type != ATTR_INT) {
		diag_node(g, n, "attribute 'axis' is missing");
		return false;
	}
	int64_t axis = a->i;
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	Shape s = shape_of(x);
	for (int i = 1; i < nd->nin; i++) {
		Tensor *t = in(g, n, i);
		if (!t)
			continue;
		if (!same_dtype(g, n, 0, i))
			return false;
		bool ok = t->rank == x->rank;
		for (int k = 0; ok && k < x->rank; k++)
			ok = k == axis || t->dims[k] == x->dims[k];
		if (!ok) {
			diag_node(g, n, "input %d is %s, which does not concatenate with %s on axis %lld",
			    i, ts(t), ts(x), (long long)axis);
			return false;
		}
		if (!add_ck(s.d[axis], t->dims[axis], &s.d[axis])) {
			diag_node(g, n, "concatenated dim overflows");
			return false;
		}
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_split(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	Tensor *x = in(g, n, 0);
	int64_t axis = ir_attr_int(g, n, "axis", 0);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	int64_t dim = x->dims[axis];
	int nout = nd->nout;
	const int64_t *sz;
	int cnt = int_list(g, n, 1, "split", &sz);
	if (cnt == -2)
		return false;
	int64_t num = ir_attr_int(g, n, "num_outputs", nout);
	if (num != nout) {
		diag_node(g, n, "num_outputs is %lld but the node has %d outputs", (long long)num, nout);
		return false;
	}
	int64_t sum = 0;
	if (cnt >= 0) {
		if (cnt != nout) {
			diag_node(g, n, "split has %d sizes for %d outputs", cnt, nout);
			return false;
		}
		for (int i = 0; i < cnt; i++)
			if (sz[i] < 0 || !add_ck(sum, sz[i], &sum)) {
				diag_node(g, n, "split size %lld is negative", (long long)sz[i]);
				return false;
			}
		if (sum != dim) {
			diag_node(g, n, "split sizes add up to %lld, but dim %lld of %s is %lld",
			    (long long)sum, (long long)axis, ts(x), (long long)dim);
			return false;
		}
	}
	/* no sizes: equal parts; opset 18 lets the last one be smaller */
	int64_t chunk = dim / nout + (dim % nout != 0), used;
	if (cnt < 0 && dim % nout && (!mul_ck(chunk, nout - 1, &used) || used >= dim ||
	    (g->opset < 18 && !ir_attr(g, n, "num_outputs")))) {
		diag_node(g, n, "dim %lld of %s does not split into %d parts", (long long)axis,
		    ts(x), nout);
		return false;
	}
	Shape s = shape_of(x);
	for (int i = 0; i < nout; i++) {
		s.d[axis] = cnt >= 0 ? sz[i] : i < nout - 1 ? chunk : dim - chunk * (nout - 1);
		if (!set_out(g, n, i, x->dtype, &s))
			return false;
	}
	return true;
}

/* Slice one axis of length d: clamp start, return the output length. */
static int64_t
slice_dim(int64_t d, int64_t *start, int64_t end, int64_t step)
{
	int64_t s = *start;
	if (d == 0)
		return 0;
	if (s < 0)
		s += d;
	if (end < 0)
		end += d;
	if (step > 0) {
		s = s < 0 ? 0 : s > d ? d : s;
		end = end < 0 ? 0 : end > d ? d : end;
	} else {
		s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
		end = end < -1 ? -1 : end > d - 1 ? d - 1 : end;
	}
	*start = s;
	/* all in [-1, d]: no overflow; |step| > d gives at most one element */
	if (step > 0)
		return end > s ? (end - s - 1) / step + 1 : 0;
	if (step < -d - 1)
		step = -d - 1;
	return s > end ? (s - end - 1) / -step + 1 : 0;
}

static bool
infer_slice(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	const int64_t *st, *en, *ax = NULL, *sp = NULL;
	int ns = int_list(g, n, 1, "starts", &st);
	int ne = ns == -2 ? -2 : int_list(g, n, 2, "ends", &en);
	int na = ne == -2 ? -2 : int_list(g, n, 3, "axes", &ax);
	int np = na == -2 ? -2 : int_list(g, n, 4, NULL, &sp);
	if (np == -2)
		return false;
	if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns)) {
		diag_node(g, n, "starts, ends, axes and steps have different lengths");
		return false;
	}
	Shape s = shape_of(x);
	unsigned seen = 0;
	for (int i = 0; i < ns; i++) {
		int64_t a = na >= 0 ? ax[i] : i;
		int64_t step = np >= 0 ? sp[i] : 1, start = st[i];
		if (!norm_axis(g, n, &a, x->rank))
			return false;
		if (seen & 1u << a) {
			diag_node(g, n, "axis %lld is repeated", (long long)a);
			return false;
		}
		seen |= 1u << a;
		if (step == 0) {
			diag_node(g, n, "step for axis %lld is 0", (long long)a);
			return false;
		}
		s.d[a] = slice_dim(x->dims[a], &start, en[i], step);
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_gather(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1);
	int64_t axis = ir_attr_int(g, n, "axis", 0);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	if (idx->dtype != DT_I64 && idx->dtype != DT_I32) {
		diag_node(g, n, "input 1 is %s, expected i64 or i32 indices", ts(idx));
		return false;
	}
	if (x->rank - 1 + idx->rank > IR_MAX_RANK) {
		diag_node(g, n, "output rank %d is more than %d", x->rank - 1 + idx->rank, IR_MAX_RANK);
		return false;
	}
	int64_t d = x->dims[axis];
	const void *v = ir_value(g, ir_node(g, n)->in[1]);
	for (int64_t i = 0; v && i < ir_numel(idx); i++) {
		int64_t k = elem_i(idx->dtype, v, i);
		if (k < -d || k >= d) {
			diag_node(g, n, "index %lld is out of range for dim %lld of %s", (long long)k,
			    (long long)axis, ts(x));
			return false;
		}
	}
	Shape s = {0, {0}};
	for (int i = 0; i < axis; i++)
		s.d[s.rank++] = x->dims[i];
	for (int i = 0; i < idx->rank; i++)
		s.d[s.rank++] = idx->dims[i];
	for (int i = axis + 1; i < x->rank; i++)
		s.d[s.rank++] = x->dims[i];
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_expand(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x), to;
	if (!shape_input(g, n, 1, NULL, &to, false))
		return false;
	if (!bcast(&s, &to)) {
		diag_node(g, n, "input 0 is %s, which does not broadcast with %s", ts(x), ss(&to));
		return false;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_tile(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	const int64_t *rep;
	int cnt = int_list(g, n, 1, NULL, &rep);
	if (cnt == -2)
		return false;
	if (cnt != x->rank) {
		diag_node(g, n, "repeats has %d values for input 0 %s", cnt, ts(x));
		return false;
	}
	Shape s = shape_of(x);
	for (int i = 0; i < s.rank; i++)
		if (rep[i] < 0 || !mul_ck(s.d[i], rep[i], &s.d[i])) {
			diag_node(g, n, "cannot repeat dim %d of %s %lld times", i, ts(x), (long long)rep[i]);
			return false;
		}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_trilu(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x);
	if (!want_rank(g, n, 0, 2, IR_MAX_RANK) || !want_scalar(g, n, 1))
		return false;
	return set_out(g, n, 0, x->dtype, &s);
}

/* EyeLike: x's 2-D shape, `dtype` or x's type */
static bool
infer_eyelike(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x);
	if (!want_rank(g, n, 0, 2, 2))
		return false;
	int64_t dt = ir_attr_int(g, n, "dtype", x->dtype);
	if (dt <= 0 || dt >= DT_COUNT || ir_dtype_size((DType)dt) == 0) {
		diag_node(g, n, "unsupported dtype %lld", (long long)dt);
		return false;
	}
	return set_out(g, n, 0, (DType)dt, &s);
}

static bool
infer_pad(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	const char *mode = ir_attr_str(g, n, "mode", "constant");
	if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") &&
	    strcmp(mode, "wrap")) {
		diag_node(g, n, "unknown mode '%s'", mode);
		return false;
	}
	if (!strcmp(mode, "wrap") && g->opset < 19) {
		diag_node(g, n, "mode wrap needs Pad at opset 19 or later, the model has %lld",
		    (long long)g->opset);
		return false;
	}
	const int64_t *pads, *ax = NULL;
	int np = int_list(g, n, 1, "pads", &pads);
	int na = np == -2 ? -2 : int_list(g, n, 3, NULL, &ax);
	if (na == -2 || !want_scalar(g, n, 2))
		return false;
	int naxes = na >= 0 ? na : x->rank;
	if (np != 2 * naxes) {
		diag_node(g, n, "pads has %d values, expected %d for %s", np < 0 ? 0 : np,
		    2 * naxes, ts(x));
		return false;
	}
	Shape s = shape_of(x);
	for (int i = 0; i < naxes; i++) {
		int64_t a = na >= 0 ? ax[i] : i, r;
		if (!norm_axis(g, n, &a, x->rank))
			return false;
		if (!add_ck(pads[i], pads[i + naxes], &r) || !add_ck(s.d[a], r, &r) || r < 0) {
			diag_node(g, n, "pads %lld,%lld do not fit dim %lld of %s",
			    (long long)pads[i], (long long)pads[i + naxes], (long long)a, ts(x));
			return false;
		}
		s.d[a] = r;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* ------------------------------------------------------ indexing by data */

/* The dtypes the computing kernels (scatter reductions, CumSum, TopK,
 * Einsum) implement: halves too, computed in f32 (passes/legalize_half.c). */
static bool
is_arith(DType t)
{
	switch (t) {
	case DT_F32: case DT_F64: case DT_I8: case DT_U8: case DT_I16: case DT_U16:
	case DT_I32: case DT_U32: case DT_I64: case DT_U64: case DT_F16: case DT_BF16:
		return true;
	default:
		return false;
	}
}

static bool
want_arith(Graph *g, NodeId n, int i, const char *what)
{
	Tensor *t = in(g, n, i);
	if (is_arith(t->dtype))
		return true;
	diag_node(g, n, "input %d is %s, but %s needs a number type", i, ts(t), what);
	return false;
}

/* Input i of a float type (halves computed in f32: legalize-half). */
static bool
want_float(Graph *g, NodeId n, int i)
{
	Tensor *t = in(g, n, i);
	if (t->dtype == DT_F32 || t->dtype == DT_F64 || t->dtype == DT_F16 || t->dtype == DT_BF16)
		return true;
	diag_node(g, n, "input %d is %s, expected a float type", i, ts(t));
	return false;
}

static bool
want_indices(Graph *g, NodeId n, int i)
{
	Tensor *t = in(g, n, i);
	if (t->dtype == DT_I64 || t->dtype == DT_I32)
		return true;
	diag_node(g, n, "input %d is %s, expected i64 or i32 indices", i, ts(t));
	return false;
}

/* Constant indices of input i along an axis of length d, checked now (the
 * kernels check run-time ones); every `every`-th element from `first`. */
static bool
const_indices(Graph *g, NodeId n, int i, int64_t first, int64_t every, int64_t d, int axis)
{
	Tensor *t = in(g, n, i);
	const void *v = ir_value(g, ir_node(g, n)->in[i]);
	for (int64_t e = first; v && e < ir_numel(t); e += every) {
		int64_t k = elem_i(t->dtype, v, e);
		if (k < -d || k >= d) {
			diag_node(g, n, "index %lld is out of range [-%lld, %lld) for axis %d", (long long)k,
			    (long long)d, (long long)d, axis);
			return false;
		}
	}
	return true;
}

/* Indices of the data's rank whose other dims fit the data (GatherElements,
 * ScatterElements). */
static bool
elements_shape(Graph *g, NodeId n, int64_t axis)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1);
	if (idx->rank != x->rank) {
		diag_node(g, n, "input 1 is %s, expected rank %d like input 0 %s", ts(idx), x->rank, ts(x));
		return false;
	}
	for (int d = 0; d < x->rank; d++)
		if (d != axis && idx->dims[d] > x->dims[d]) {
			diag_node(g, n, "input 1 is %s, larger than input 0 %s in dim %d", ts(idx), ts(x), d);
			return false;
		}
	return const_indices(g, n, 1, 0, 1, x->dims[axis], (int)axis);
}

static bool
infer_gather_elements(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1);
	int64_t axis = ir_attr_int(g, n, "axis", 0);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_indices(g, n, 1) ||
	    !norm_axis(g, n, &axis, x->rank) || !elements_shape(g, n, axis))
		return false;
	Shape s = shape_of(idx);
	return set_out(g, n, 0, x->dtype, &s);
}

/* The reduction attribute: known, allowed at the model's opset (add and
 * mul came in 16, max and min in 18) and computable on the data's dtype. */
static bool
check_reduction(Graph *g, NodeId n)
{
	const char *r = ir_attr_str(g, n, "reduction", "none");
	int since = !strcmp(r, "none") ? 0 : !strcmp(r, "add") || !strcmp(r, "mul") ? 16 :
	    !strcmp(r, "max") || !strcmp(r, "min") ? 18 : -1;
	if (since < 0) {
		diag_node(g, n, "unknown reduction '%s'", r);
		return false;
	}
	if (since && ir_node(g, n)->op == OP_Scatter) {
		diag_node(g, n, "Scatter has no reduction (ScatterElements has, from opset 16)");
		return false;
	}
	if (g->opset < since) {
		diag_node(g, n, "reduction '%s' needs opset %d, the model has %lld", r, since, (long long)g->opset);
		return false;
	}
	return !since || want_arith(g, n, 0, "a scatter reduction");
}

static bool
infer_scatter_elements(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1), *upd = in(g, n, 2);
	int64_t axis = ir_attr_int(g, n, "axis", 0);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_indices(g, n, 1) ||
	    !same_dtype(g, n, 0, 2) || !check_reduction(g, n) || !norm_axis(g, n, &axis, x->rank))
		return false;
	Shape si = shape_of(idx), su = shape_of(upd);
	if (su.rank != si.rank || memcmp(su.d, si.d, sizeof su.d[0] * su.rank)) {
		diag_node(g, n, "input 2 is %s, expected the shape of input 1 %s", ts(upd), ts(idx));
		return false;
	}
	if (!elements_shape(g, n, axis))
		return false;
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_scatternd(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1), *upd = in(g, n, 2);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_rank(g, n, 1, 1, IR_MAX_RANK) ||
	    !want_indices(g, n, 1) || !same_dtype(g, n, 0, 2) || !check_reduction(g, n))
		return false;
	int q = idx->rank;
	int64_t k = idx->dims[q - 1];
	if (k > x->rank) {
		diag_node(g, n, "input 1 is %s: index tuples of %lld for input 0 %s of rank %d",
		    ts(idx), (long long)k, ts(x), x->rank);
		return false;
	}
	/* updates: indices' dims but the last, then data's dims from k on */
	Shape want = {0, {0}};
	bool fits = q - 1 + x->rank - k <= IR_MAX_RANK;
	for (int i = 0; fits && i < q - 1; i++)
		want.d[want.rank++] = idx->dims[i];
	for (int i = (int)k; fits && i < x->rank; i++)
		want.d[want.rank++] = x->dims[i];
	Shape su = shape_of(upd);
	if (!fits || su.rank != want.rank || memcmp(su.d, want.d, sizeof su.d[0] * su.rank)) {
		if (fits)
			diag_node(g, n, "input 2 is %s, expected %s", ts(upd), ss(&want));
		else
			diag_node(g, n, "input 2 is %s, expected rank %lld", ts(upd),
			    (long long)(q - 1 + x->rank - k));
		return false;
	}
	for (int j = 0; j < k; j++)
		if (!const_indices(g, n, 1, j, k, x->dims[j], j))
			return false;
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * GatherND: indices [..., k] pick slices of data's dims from b + k on (b =
 * batch_dims: the first b dims of both are one loop): the result is
 * indices' dims but the last, then data's from b + k.
 */
static bool
infer_gathernd(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *idx = in(g, n, 1);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_rank(g, n, 1, 1, IR_MAX_RANK) ||
	    !want_indices(g, n, 1))
		return false;
	int64_t b = ir_attr_int(g, n, "batch_dims", 0), q = idx->rank, k = idx->dims[q - 1];
	if (b < 0 || b >= q || b >= x->rank || k < 1 || k > x->rank - b) {
		diag_node(g, n, "input 1 is %s: with batch_dims %lld, index tuples of 1 to %lld for "
		    "input 0 %s", ts(idx), (long long)b, (long long)(x->rank - b), ts(x));
		return false;
	}
	for (int i = 0; i < b; i++)
		if (idx->dims[i] != x->dims[i]) {
			diag_node(g, n, "inputs %s and %s differ in their first %lld dims (batch_dims)",
			    ts(x), ts(idx), (long long)b);
			return false;
		}
	Shape s = {0, {0}};
	if (q - 1 + x->rank - b - k > IR_MAX_RANK) {
		diag_node(g, n, "the result would have rank %lld", (long long)(q - 1 + x->rank - b - k));
		return false;
	}
	for (int i = 0; i < q - 1; i++)
		s.d[s.rank++] = idx->dims[i];
	for (int64_t i = b + k; i < x->rank; i++)
		s.d[s.rank++] = x->dims[i];
	for (int j = 0; j < k; j++)
		if (!const_indices(g, n, 1, j, k, x->dims[b + j], (int)(b + j)))
			return false;
	return set_out(g, n, 0, x->dtype, &s);
}

/* A one-element numeric input known at compile time, as an integer
 * (floats truncate, as a cast does). */
static bool
const_scalar(Graph *g, NodeId n, int i, const char *what, int64_t *v)
{
	Tensor *t = in(g, n, i);
	const void *p = ir_value(g, ir_node(g, n)->in[i]);
	if (!p) {
		diag_node(g, n, "input %d '%s' is not a compile-time constant (the %s decides the output shape)",
		    i, t->name, what);
		return false;
	}
	/* halves are numbers at run time (legalize-half), not to this reader */
	if (ir_numel(t) != 1 || t->rank > 1 || !is_arith(t->dtype) || t->dtype == DT_F16 ||
	    t->dtype == DT_BF16) {
		diag_node(g, n, "input %d (%s) is %s, expected one number", i, what, ts(t));
		return false;
	}
	*v = elem_i(t->dtype, p, 0);
	return true;
}

static bool
infer_onehot(Graph *g, NodeId n)
{
	Tensor *idx = in(g, n, 0), *val = in(g, n, 2);
	int64_t depth, axis = ir_attr_int(g, n, "axis", -1);
	if (!want_arith(g, n, 0, "OneHot's indices") || !const_scalar(g, n, 1, "depth", &depth))
		return false;
	if (depth < 1) {
		diag_node(g, n, "depth %lld is not positive", (long long)depth);
		return false;
	}
	if (val->rank != 1 || val->dims[0] != 2) {
		diag_node(g, n, "input 2 is %s, expected [off, on] values of shape [2]", ts(val));
		return false;
	}
	if (idx->rank + 1 > IR_MAX_RANK) {
		diag_node(g, n, "output rank %d is more than %d", idx->rank + 1, IR_MAX_RANK);
		return false;
	}
	if (!norm_axis(g, n, &axis, idx->rank + 1))
		return false;
	Shape s = {0, {0}};
	for (int i = 0; i <= idx->rank; i++)
		s.d[s.rank++] = i == axis ? depth : idx->dims[i - (i > axis)];
	return set_out(g, n, 0, val->dtype, &s);
}

/* DepthToSpace and SpaceToDepth: [N,C,H,W] with blocksize b moves b*b
 * channels into b x b pixels and back. */
static bool
infer_depth_space(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	bool d2s = ir_node(g, n)->op == OP_DepthToSpace;
	if (!want_rank(g, n, 0, 4, 4))
		return false;
	const Attr *a = ir_attr(g, n, "blocksize");
	if (!a || a->type != ATTR_INT) {
		diag_node(g, n, "attribute 'blocksize' is missing");
		return false;
	}
	int64_t b = a->i, bb;
	if (b < 1 || !mul_ck(b, b, &bb)) {
		diag_node(g, n, "blocksize %lld is not positive", (long long)b);
		return false;
	}
	Shape s = shape_of(x);
	if (d2s) {
		const char *mode = ir_attr_str(g, n, "mode", "DCR");
		if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) {
			diag_node(g, n, "unknown mode '%s', expected DCR or CRD", mode);
			return false;
		}
		if (s.d[1] % bb) {
			diag_node(g, n, "input 0 is %s, whose %lld channels do not divide by blocksize %lld squared",
			    ts(x), (long long)s.d[1], (long long)b);
			return false;
		}
		s.d[1] /= bb;
		if (!mul_ck(s.d[2], b, &s.d[2]) || !mul_ck(s.d[3], b, &s.d[3])) {
			diag_node(g, n, "input 0 is %s, too large for blocksize %lld", ts(x), (long long)b);
			return false;
		}
	} else {
		if (s.d[2] % b || s.d[3] % b) {
			diag_node(g, n, "input 0 is %s, whose height and width do not divide by blocksize %lld",
			    ts(x), (long long)b);
			return false;
		}
		s.d[2] /= b;
		s.d[3] /= b;
		if (!mul_ck(s.d[1], bb, &s.d[1])) {
			diag_node(g, n, "input 0 is %s, too large for blocksize %lld", ts(x), (long long)b);
			return false;
		}
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* --------------------------------------------------------------- NN */

/* CumSum's axis may come at run time (it does not change the shape): the
 * kernel checks it then; a constant one is checked now. */
static bool
infer_cumsum(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *at = in(g, n, 1);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_arith(g, n, 0, "CumSum"))
		return false;
	if ((at->dtype != DT_I64 && at->dtype != DT_I32) || ir_numel(at) != 1 || at->rank > 1) {
		diag_node(g, n, "input 1 (axis) is %s, expected one i64 or i32", ts(at));
		return false;
	}
	const void *v = ir_value(g, ir_node(g, n)->in[1]);
	int64_t axis = v ? elem_i(at->dtype, v, 0) : 0;
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

/* TopK's k: the attribute at opset 1, a compile-time constant input from
 * opset 10 (the outputs' shape depends on it). */
static bool
infer_topk(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	int64_t axis = ir_attr_int(g, n, "axis", -1);
	if (!want_rank(g, n, 0, 1, IR_MAX_RANK) || !want_arith(g, n, 0, "TopK") ||
	    !norm_axis(g, n, &axis, x->rank))
		return false;
	const int64_t *kl;
	int cnt = int_list(g, n, g->opset >= 10 ? 1 : -1, "k", &kl);
	if (cnt == -2)
		return false;
	if (cnt < 0) {
		diag_node(g, n, "k is missing (%s)", g->opset >= 10 ? "input 1 from opset 10" :
		    "an attribute before opset 10");
		return false;
	}
	if (cnt != 1) {
		diag_node(g, n, "k has %d values, expected one", cnt);
		return false;
	}
	int64_t k = kl[0], d = x->dims[axis];
	if (k < 0 || k > d) {
		diag_node(g, n, "k %lld is out of range for dim %lld of %s", (long long)k, (long long)axis,
		    ts(x));
		return false;
	}
	Shape s = shape_of(x);
	s.d[axis] = k;
	return set_out(g, n, 0, x->dtype, &s) && set_out(g, n, 1, DT_I64, &s);
}

/* Einsum: the equation is parsed (and its dims checked) here, with
 * runtime/einsum.h, the parser the kernel uses too. */
static bool
infer_einsum(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	const char *eq = ir_attr_str(g, n, "equation", NULL);
	if (!eq) {
		diag_node(g, n, "attribute 'equation' is missing");
		return false;
	}
	int rank[EINSUM_MAX_IN];
	const int64_t *dims[EINSUM_MAX_IN];
	if (nd->nin > EINSUM_MAX_IN) {
		diag_node(g, n, "%d operands, at most %d are supported", nd->nin, EINSUM_MAX_IN);
		return false;
	}
	for (int i = 0; i < nd->nin; i++) {
		if (!in(g, n, i)) {
			diag_node(g, n, "input %d is missing", i);
			return false;
		}
		if (!same_dtype(g, n, 0, i) || (i == 0 && !want_arith(g, n, 0, "Einsum")))
			return false;
		rank[i] = in(g, n, i)->rank;
		dims[i] = in(g, n, i)->dims;
	}
	einsum_eq e;
	int64_t size[EINSUM_LABELS];
	char err[200];
	if (einsum_parse(eq, nd->nin, rank, &e, err, sizeof err) ||
	    einsum_sizes(&e, dims, size, err, sizeof err)) {
		diag_node(g, n, "equation '%s': %s", eq, err);
		return false;
	}
	Shape s = {e.orank, {0}};
	for (int i = 0; i < e.orank; i++)
		s.d[i] = size[e.olab[i]];
	return set_out(g, n, 0, in(g, n, 0)->dtype, &s);
}


/* numpy's matmul shape of inputs ia @ ib of node n, into *o. */
static bool
matmul_shape(Graph *g, NodeId n, int ia, int ib, Shape *o)
{
	Tensor *ta = in(g, n, ia), *tb = in(g, n, ib);
	if (!want_rank(g, n, ia, 1, IR_MAX_RANK) || !want_rank(g, n, ib, 1, IR_MAX_RANK))
		return false;
	Shape a = shape_of(ta), b = shape_of(tb);
	bool a1 = a.rank == 1, b1 = b.rank == 1;
	if (a1)
		a = (Shape){2, {1, a.d[0]}};
	if (b1)
		b = (Shape){2, {b.d[0], 1}};
	int64_t k = a.d[a.rank - 1];
	if (b.d[b.rank - 2] != k) {
		diag_node(g, n, "input %d is %s, expected %s%lld%s", ib, ts(tb),
		    b1 ? "[" : b.rank == 2 ? "[" : "[...,", (long long)k, b1 ? "]" : ",N]");
		return false;
	}
	Shape ba = a, bb = b;
	ba.rank -= 2;
	bb.rank -= 2;
	if (!bcast(&ba, &bb)) {
		diag_node(g, n, "input %d is %s, whose batch dims do not broadcast with input %d %s",
		    ib, ts(tb), ia, ts(ta));
		return false;
	}
	if (!a1)
		ba.d[ba.rank++] = a.d[a.rank - 2];
	if (!b1)
		ba.d[ba.rank++] = b.d[b.rank - 1];
	*o = ba;
	return true;
}

static bool
infer_matmul(Graph *g, NodeId n)
{
	Shape s;
	return same_dtype(g, n, 0, 1) && matmul_shape(g, n, 0, 1, &s) &&
	    set_out(g, n, 0, in(g, n, 0)->dtype, &s);
}

static bool
infer_gemm(Graph *g, NodeId n)
{
	Tensor *ta = in(g, n, 0), *tb = in(g, n, 1), *tc = in(g, n, 2);
	if (!want_rank(g, n, 0, 2, 2) || !want_rank(g, n, 1, 2, 2) || !same_dtype(g, n, 0, 1))
		return false;
	bool tra = ir_attr_int(g, n, "transA", 0), trb = ir_attr_int(g, n, "transB", 0);
	int64_t m = ta->dims[tra], k = ta->dims[!tra], nn = tb->dims[!trb];
	if (tb->dims[trb] != k) {
		diag_node(g, n, trb ? "input 1 is %s, expected [N,%lld]" : "input 1 is %s, expected [%lld,N]",
		    ts(tb), (long long)k);
		return false;
	}
	Shape s = {2, {m, nn}};
	if (tc) {
		Shape c = shape_of(tc);
		if (!bcast_to(&c, &s)) {
			diag_node(g, n, "input 2 is %s, which does not broadcast to %s", ts(tc), ss(&s));
			return false;
		}
	}
	return set_out(g, n, 0, ta->dtype, &s);
}

/*
 * Output spatial dims of a sliding window (Conv and pooling): x is
 * [N,C,D1..], k the kernel; pads, strides, dilations, auto_pad come from the
 * node's attributes.
 */
static bool
window(Graph *g, NodeId n, const Tensor *x, const int64_t *k, bool ceil_mode, Shape *o)
{
	int sp = x->rank - 2;
	int64_t pads[2 * IR_MAX_RANK], str[IR_MAX_RANK], dil[IR_MAX_RANK];
	if (!attr_ints(g, n, "pads", 2 * sp, 0, 0, pads) ||
	    !attr_ints(g, n, "strides", sp, 1, 1, str) ||
	    !attr_ints(g, n, "dilations", sp, 1, 1, dil))
		return false;
	const char *ap = ir_attr_str(g, n, "auto_pad", "NOTSET");
	bool same = strncmp(ap, "SAME_", 5) == 0, valid = strcmp(ap, "VALID") == 0;
	if (!same && !valid && strcmp(ap, "NOTSET")) {
		diag_node(g, n, "unknown auto_pad '%s'", ap);
		return false;
	}
	if (same && strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER")) {
		diag_node(g, n, "unknown auto_pad '%s'", ap);
		return false;
	}
	*o = shape_of(x);
	for (int i = 0; i < sp; i++) {
		int64_t d = x->dims[2 + i], ek, num;
		if (same) {
			o->d[2 + i] = d / str[i] + (d % str[i] != 0);
			continue;
		}
		if (valid)
			pads[i] = pads[i + sp] = 0;
		if (!mul_ck(k[i] - 1, dil[i], &ek) || !add_ck(ek, 1, &ek) ||
		    !add_ck(d, pads[i], &num) || !add_ck(num, pads[i + sp], &num) || num < ek) {
			diag_node(g, n, "spatial dim %d of %s with pads %lld,%lld is smaller than kernel %lld dilated by %lld",
			    i, ts(x), (long long)pads[i], (long long)pads[i + sp], (long long)k[i],
			    (long long)dil[i]);
			return false;
		}
		num -= ek;
		int64_t out = num / str[i] + 1;
		/* ceil_mode: a last partial window, unless it starts in the end
		 * padding (out * stride >= d + pad_begin), as onnxruntime does */
		if (ceil_mode && num % str[i] && out <= (d + pads[i] - 1) / str[i])
			out++;
		o->d[2 + i] = out;
	}
	return true;
}

/* A convolution's output shape: x (input ix) [N,C,D...], w (input iw)
 * [M,C/group,k...], the window attributes of node n; into *o. */
static bool
conv_shape(Graph *g, NodeId n, int ix, int iw, Shape *o)
{
	Tensor *x = in(g, n, ix), *w = in(g, n, iw);
	if (!want_rank(g, n, ix, 3, IR_MAX_RANK))
		return false;
	if (w->rank != x->rank) {
		diag_node(g, n, "input %d is %s, expected rank %d like input %d %s", iw, ts(w), x->rank,
		    ix, ts(x));
		return false;
	}
	int64_t grp = ir_attr_int(g, n, "group", 1), cin = x->dims[1], m = w->dims[0];
	int64_t wc;
	if (grp < 1 || m % grp || !mul_ck(w->dims[1], grp, &wc) || wc != cin) {
		diag_node(g, n, "input %d is %s, expected [M,%lld,...] with M divisible by group %lld",
		    iw, ts(w), (long long)(grp >= 1 && cin % grp == 0 ? cin / grp : cin), (long long)grp);
		return false;
	}
	int64_t ks[IR_MAX_RANK];
	if (!attr_ints(g, n, "kernel_shape", x->rank - 2, 1, 1, ks))
		return false;
	for (int i = 0; i < x->rank - 2; i++)
		if ((ir_attr(g, n, "kernel_shape") && ks[i] != w->dims[2 + i]) || w->dims[2 + i] < 1) {
			diag_node(g, n, "kernel_shape does not match input %d %s", iw, ts(w));
			return false;
		}
	if (!window(g, n, x, w->dims + 2, false, o))
		return false;
	o->d[1] = m;
	return true;
}

static bool
infer_conv(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *w = in(g, n, 1), *b = in(g, n, 2);
	Shape s;
	if (!same_dtype(g, n, 0, 1) || !conv_shape(g, n, 0, 1, &s))
		return false;
	if (b && (b->rank != 1 || b->dims[0] != w->dims[0])) {
		diag_node(g, n, "input 2 is %s, expected [%lld]", ts(b), (long long)w->dims[0]);
		return false;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_pool(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Op op = ir_node(g, n)->op;
	if (!want_rank(g, n, 0, 3, IR_MAX_RANK))
		return false;
	Shape s = shape_of(x);
	if (op == OP_GlobalAveragePool || op == OP_GlobalMaxPool) {
		for (int i = 2; i < s.rank; i++)
			s.d[i] = 1;
		return set_out(g, n, 0, x->dtype, &s);
	}
	int64_t ks[IR_MAX_RANK];
	if (!ir_attr(g, n, "kernel_shape")) {
		diag_node(g, n, "attribute 'kernel_shape' is missing");
		return false;
	}
	if (!attr_ints(g, n, "kernel_shape", x->rank - 2, 1, 1, ks) ||
	    !window(g, n, x, ks, ir_attr_int(g, n, "ceil_mode", 0) != 0, &s))
		return false;
	return set_out(g, n, 0, x->dtype, &s) && set_out(g, n, 1, DT_I64, &s);
}

/*
 * ConvTranspose: X [N,C,D1..], W [C,M/group,k1..] -> [N,M,O1..] with
 * O = stride*(D-1) + output_padding + (k-1)*dilation + 1 - pads, or
 * output_shape when given (the kernel then derives the pads), or D*stride
 * for SAME_UPPER/SAME_LOWER.
 */
static bool
infer_conv_transpose(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *w = in(g, n, 1), *b = in(g, n, 2);
	if (!want_rank(g, n, 0, 3, IR_MAX_RANK) || !same_dtype(g, n, 0, 1))
		return false;
	if (w->rank != x->rank) {
		diag_node(g, n, "input 1 is %s, expected rank %d like input 0 %s", ts(w), x->rank, ts(x));
		return false;
	}
	int sp = x->rank - 2;
	int64_t grp = ir_attr_int(g, n, "group", 1), cin = x->dims[1], m;
	if (grp < 1 || cin % grp || w->dims[0] != cin || !mul_ck(w->dims[1], grp, &m)) {
		diag_node(g, n, "input 1 is %s, expected [%lld,M/group,...] with %lld channels divisible by group %lld",
		    ts(w), (long long)cin, (long long)cin, (long long)grp);
		return false;
	}
	if (b && (b->rank != 1 || b->dims[0] != m)) {
		diag_node(g, n, "input 2 is %s, expected [%lld]", ts(b), (long long)m);
		return false;
	}
	int64_t ks[IR_MAX_RANK], str[IR_MAX_RANK], dil[IR_MAX_RANK], opad[IR_MAX_RANK];
	int64_t pads[2 * IR_MAX_RANK];
	if (!attr_ints(g, n, "kernel_shape", sp, 1, 1, ks) ||
	    !attr_ints(g, n, "strides", sp, 1, 1, str) ||
	    !attr_ints(g, n, "dilations", sp, 1, 1, dil) ||
	    !attr_ints(g, n, "output_padding", sp, 0, 0, opad) ||
	    !attr_ints(g, n, "pads", 2 * sp, 0, 0, pads))
		return false;
	for (int i = 0; i < sp; i++)
		if ((ir_attr(g, n, "kernel_shape") && ks[i] != w->dims[2 + i]) || w->dims[2 + i] < 1) {
			diag_node(g, n, "kernel_shape does not match input 1 %s", ts(w));
			return false;
		}
	const char *ap = ir_attr_str(g, n, "auto_pad", "NOTSET");
	bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
	if (!same && strcmp(ap, "VALID") && strcmp(ap, "NOTSET")) {
		diag_node(g, n, "unknown auto_pad '%s'", ap);
		return false;
	}
	const int64_t *os;
	int nos = int_list(g, n, -1, "output_shape", &os);
	if (nos == -2)
		return false;
	if (nos >= 0 && nos != sp && nos != x->rank) {
		diag_node(g, n, "output_shape has %d values, expected %d spatial dims", nos, sp);
		return false;
	}
	if (nos == x->rank)
		os += 2;                /* [N,C,D1..]: only the spatial dims count */
	Shape s = shape_of(x);
	s.d[1] = m;
	for (int i = 0; i < sp; i++) {
		int64_t d = x->dims[2 + i], o, ek, full;
		/* the unpadded extent, which output_shape and SAME_* pad against */
		if (!mul_ck(w->dims[2 + i] - 1, dil[i], &ek) || !mul_ck(str[i], d - 1, &full) ||
		    !add_ck(full, ek, &full) || !add_ck(full, opad[i], &full) || !add_ck(full, 1, &full)) {
			diag_node(g, n, "spatial dim %d of %s is too large for strides and dilations", i, ts(x));
			return false;
		}
		if (nos >= 0) {
			o = os[i];
		} else if (same) {
			if (!mul_ck(d, str[i], &o))
				o = -1;
		} else {
			int64_t pb = strcmp(ap, "VALID") ? pads[i] : 0, pe = strcmp(ap, "VALID") ? pads[sp + i] : 0;
			if (!mul_ck(w->dims[2 + i] - 1, dil[i], &ek) || !add_ck(ek, 1, &ek) ||
			    !mul_ck(str[i], d - 1, &o) || !add_ck(o, ek, &o) || !add_ck(o, opad[i], &o) || !add_ck(o, -pb, &o) ||
			    !add_ck(o, -pe, &o))
				o = -1;
		}
		if (o < 0 || d < 1) {
			diag_node(g, n, "spatial dim %d of %s gives output size %lld", i, ts(x), (long long)o);
			return false;
		}
		s.d[2 + i] = o;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* InstanceNormalization: X [N,C,D1..], scale and B [C]. */
static bool
infer_instance_norm(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	if (!want_rank(g, n, 0, 3, IR_MAX_RANK))
		return false;
	for (int i = 1; i < 3; i++) {
		Tensor *t = in(g, n, i);
		if (t->rank != 1 || t->dims[0] != x->dims[1]) {
			diag_node(g, n, "input %d is %s, expected [%lld]", i, ts(t), (long long)x->dims[1]);
			return false;
		}
		if (!same_dtype(g, n, 0, i))
			return false;
	}
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_norm(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x);
	if (nd->op == OP_BatchNormalization) {
		if (!want_rank(g, n, 0, 2, IR_MAX_RANK))
			return false;
		Shape c = {1, {x->dims[1]}};
		for (int i = 1; i < 5; i++) {
			Tensor *t = in(g, n, i);
			if (t->rank != 1 || t->dims[0] != c.d[0]) {
				diag_node(g, n, "input %d is %s, expected [%lld]", i, ts(t), (long long)c.d[0]);
				return false;
			}
		}
		for (int i = 1; i < nd->nout; i++)
			if (!set_out(g, n, i, in(g, n, 3)->dtype, &c))
				return false;
		return set_out(g, n, 0, x->dtype, &s);
	}
	/* LayerNormalization: normalise over dims axis.. */
	int64_t axis = ir_attr_int(g, n, "axis", -1);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	Shape tail = {x->rank - (int)axis, {0}};
	memcpy(tail.d, x->dims + axis, sizeof tail.d[0] * tail.rank);
	for (int i = 1; i < 3; i++) {
		Tensor *t = in(g, n, i);
		Shape st = t ? shape_of(t) : tail;
		if (!bcast_to(&st, &tail)) {
			diag_node(g, n, "input %d is %s, which does not broadcast to %s", i, ts(t), ss(&tail));
			return false;
		}
		/* the kernels read Scale and B as the tail's last elements
		 * repeated: leading 1s, then the tail's own last dims */
		int lead = 0;
		while (lead < st.rank && st.d[lead] == 1)
			lead++;
		for (int k = lead; k < st.rank; k++)
			if (st.d[k] != tail.d[tail.rank - st.rank + k]) {
				diag_node(g, n, "input %d is %s: broadcasting inside the normalized dims %s "
				    "is not supported (only leading 1s)", i, ts(t), ss(&tail));
				return false;
			}
	}
	Shape m = s;
	for (int i = axis; i < m.rank; i++)
		m.d[i] = 1;
	int64_t st = ir_attr_int(g, n, "stash_type", DT_F32);
	if (st != DT_F32 && st != DT_F64 && st != DT_F16 && st != DT_BF16) {
		diag_node(g, n, "unsupported stash_type %lld", (long long)st);
		return false;
	}
	return set_out(g, n, 0, x->dtype, &s) && set_out(g, n, 1, (DType)st, &m) &&
	    set_out(g, n, 2, (DType)st, &m);
}

/*
 * The fused kernels' extra inputs, after their base operator's shape: a
 * bias (input b, -1 for none) of the output's last dim, and a residual
 * (input z) of exactly the output's type; f32 only (the kernels' type).
 */
static bool
fused_extra(Graph *g, NodeId n, int b, int z)
{
	Tensor *y = &g->tensors[ir_node(g, n)->out[0]];
	Tensor *tb = b >= 0 ? in(g, n, b) : NULL, *tz = in(g, n, z);
	char t1[IR_TYPESTR], t2[IR_TYPESTR];
	if (y->dtype != DT_F32) {
		diag_node(g, n, "output is %s, expected f32", ir_typestr(y, t1));
		return false;
	}
	if (tb && (tb->dtype != DT_F32 || tb->rank != 1 || y->rank < 1 ||
	    tb->dims[0] != y->dims[y->rank - 1])) {
		diag_node(g, n, "input %d is %s, expected f32[%lld]", b, ir_typestr(tb, t1),
		    (long long)(y->rank ? y->dims[y->rank - 1] : 1));
		return false;
	}
	if (tz && (tz->dtype != DT_F32 || tz->rank != y->rank ||
	    memcmp(tz->dims, y->dims, sizeof y->dims[0] * y->rank) != 0)) {
		diag_node(g, n, "input %d is %s, expected %s", z, ir_typestr(tz, t1), ir_typestr(y, t2));
		return false;
	}
	return true;
}

/* A fused kernel's activation attribute `attr`: absent, or one the
 * runtime's epilogues apply (runtime/taprt_acts.def). */
static bool
fused_act(Graph *g, NodeId n, const char *attr)
{
	static const char *const known[] = {
#define ACT(NAME, KIND, D0, D1) #NAME,
#include "runtime/taprt_acts.def"
#undef ACT
	};
	enum { NKNOWN = sizeof known / sizeof known[0] };
	const char *s = ir_attr_str(g, n, attr, "");
	if (!*s)
		return true;
	for (int i = 0; i < NKNOWN; i++)
		if (!strcmp(s, known[i]))
			return true;
	/* the list as a sentence: "A, B or C" */
	char list[256] = "";
	for (int i = 0; i < NKNOWN; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
		    i == 0 ? "" : i == NKNOWN - 1 ? " or " : ", ", known[i]);
	diag_node(g, n, "attribute '%s' is '%s', expected %s", attr, s, list);
	return false;
}

/* FusedSoftmax: X f32 and a mask (f32 added, or bool selecting `fill`)
 * that broadcasts to X; the softmax runs along the last axis. */
static bool
infer_fused_softmax(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *m = in(g, n, 1);
	Shape s = shape_of(x);
	int64_t axis = ir_attr_int(g, n, "axis", -1);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	if (x->dtype != DT_F32 || axis != x->rank - 1) {
		diag_node(g, n, "input 0 is %s, expected f32 normalized along its last axis", ts(x));
		return false;
	}
	if (m) {
		Shape ms = shape_of(m);
		if ((m->dtype != DT_F32 && m->dtype != DT_BOOL) || !bcast_to(&ms, &s)) {
			diag_node(g, n, "input 1 is %s, expected f32 or bool broadcasting to %s", ts(m),
			    ss(&s));
			return false;
		}
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* FusedSqueezeExcite: X f32 [N, C, spatial...], W1 [R, C, 1...], W2 [C, R,
 * 1...], B1 [R] and B2 [C] (both optional); Y like X. */
static bool
infer_fused_se(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *w[2] = {in(g, n, 1), in(g, n, 2)};
	Tensor *b[2] = {in(g, n, 3), in(g, n, 4)};
	if (x->dtype != DT_F32 || x->rank < 3) {
		diag_node(g, n, "input 0 is %s, expected f32 with channels and spatial dims", ts(x));
		return false;
	}
	int64_t C = x->dims[1], R = w[0] && w[0]->rank >= 1 ? w[0]->dims[0] : 0;
	for (int i = 0; i < 2; i++) {
		int64_t o = i ? C : R, k = i ? R : C;
		bool ok = w[i] && w[i]->dtype == DT_F32 && w[i]->rank == x->rank &&
		    w[i]->dims[0] == o && w[i]->dims[1] == k;
		for (int d = 2; ok && d < x->rank; d++)
			ok = w[i]->dims[d] == 1;
		if (!ok) {
			diag_node(g, n, "input %d is %s, expected f32[%lld,%lld,1...]", 1 + i,
			    w[i] ? ts(w[i]) : "absent", (long long)o, (long long)k);
			return false;
		}
		if (b[i] && (b[i]->dtype != DT_F32 || b[i]->rank != 1 || b[i]->dims[0] != o)) {
			diag_node(g, n, "input %d is %s, expected f32[%lld]", 3 + i, ts(b[i]),
			    (long long)o);
			return false;
		}
	}
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

/* FusedConvDw: X f32 [N, C1, spatial...] (1 or 2 spatial dims), W1 [C1, C]
 * (the 1x1's filters transposed), W [C, 1, k...] depthwise, group C, B1
 * and B [C] optional; Y the depthwise Conv's of a [N, C, spatial...] input.
 * Kernels up to 64 rows (conv_dw.c's limit). */
static bool
infer_fused_conv_dw(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *w1 = in(g, n, 1), *w = in(g, n, 2);
	Tensor *b[2] = {in(g, n, 3), in(g, n, 4)};
	if (x->dtype != DT_F32 || x->rank < 3 || x->rank > 4) {
		diag_node(g, n, "input 0 is %s, expected f32 [N,C,H,W] or [N,C,W]", ts(x));
		return false;
	}
	int64_t C1 = x->dims[1], C = w1->rank == 2 ? w1->dims[1] : -1;
	if (w1->dtype != DT_F32 || w1->rank != 2 || w1->dims[0] != C1) {
		diag_node(g, n, "input 1 is %s, expected f32[%lld,C]", ts(w1), (long long)C1);
		return false;
	}
	bool ok = w->dtype == DT_F32 && w->rank == x->rank && w->dims[0] == C && w->dims[1] == 1;
	for (int d = 2; ok && d < w->rank; d++)
		ok = w->dims[d] >= 1 && (d > 2 || x->rank == 3 || w->dims[d] <= 64);
	if (!ok) {
		diag_node(g, n, "input 2 is %s, expected f32[%lld,1,k...] (at most 64 rows)", ts(w),
		    (long long)C);
		return false;
	}
	if (ir_attr_int(g, n, "group", C) != C) {
		diag_node(g, n, "attribute 'group' is %lld, expected %lld (depthwise)",
		    (long long)ir_attr_int(g, n, "group", C), (long long)C);
		return false;
	}
	for (int i = 0; i < 2; i++)
		if (b[i] && (b[i]->dtype != DT_F32 || b[i]->rank != 1 || b[i]->dims[0] != C)) {
			diag_node(g, n, "input %d is %s, expected f32[%lld]", 3 + i, ts(b[i]),
			    (long long)C);
			return false;
		}
	int64_t ks[IR_MAX_RANK];
	if (!attr_ints(g, n, "kernel_shape", x->rank - 2, 1, 1, ks))
		return false;
	for (int i = 0; i < x->rank - 2; i++)
		if (ir_attr(g, n, "kernel_shape") && ks[i] != w->dims[2 + i]) {
			diag_node(g, n, "kernel_shape does not match input 2 %s", ts(w));
			return false;
		}
	Shape s;
	if (!window(g, n, x, w->dims + 2, false, &s))
		return false;
	s.d[1] = C;
	return set_out(g, n, 0, x->dtype, &s);
}

static bool
infer_softmax(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	int64_t axis = ir_attr_int(g, n, "axis", g->opset >= 13 ? -1 : 1);
	Shape s = shape_of(x);
	return norm_axis(g, n, &axis, x->rank) && set_out(g, n, 0, x->dtype, &s);
}

/*
 * LRN (x [N, C, ...], `size` >= 1 channels) and MeanVarianceNormalization
 * (`axes`, default 0, 2, 3, each within x's rank): a float x, the output
 * its shape.
 */
static bool
infer_lrn_mvn(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	bool lrn = ir_node(g, n)->op == OP_LRN;
	if (!want_float(g, n, 0))
		return false;
	if (lrn) {
		if (!want_rank(g, n, 0, 2, IR_MAX_RANK))
			return false;
		if (ir_attr_int(g, n, "size", 0) < 1) {
			diag_node(g, n, "size %lld: expected 1 or more channels",
			    (long long)ir_attr_int(g, n, "size", 0));
			return false;
		}
	} else {
		const Attr *a = ir_attr(g, n, "axes");
		static const int64_t dflt[3] = {0, 2, 3};
		for (int k = 0; k < (a ? a->n : 3); k++) {
			int64_t ax = a ? a->is[k] : dflt[k];
			if (!norm_axis(g, n, &ax, x->rank))
				return false;
		}
	}
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * GridSample (opset 16, 2-D): X [N, C, H, W] and grid [N, Ho, Wo, 2] of one
 * float type; the result is [N, C, Ho, Wo].
 */
static bool
infer_gridsample(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *gr = in(g, n, 1);
	if (!want_rank(g, n, 0, 4, 4) || !want_rank(g, n, 1, 4, 4) || !want_float(g, n, 0) ||
	    !same_dtype(g, n, 0, 1))
		return false;
	if (gr->dims[0] != x->dims[0] || gr->dims[3] != 2) {
		diag_node(g, n, "the grid is %s, expected [%lld, H_out, W_out, 2] for input %s", ts(gr),
		    (long long)x->dims[0], ts(x));
		return false;
	}
	const char *m = ir_attr_str(g, n, "mode", "bilinear");
	const char *p = ir_attr_str(g, n, "padding_mode", "zeros");
	if (strcmp(m, "bilinear") && strcmp(m, "nearest") && strcmp(m, "bicubic")) {
		diag_node(g, n, "mode '%s': expected bilinear, nearest or bicubic", m);
		return false;
	}
	if (strcmp(p, "zeros") && strcmp(p, "border") && strcmp(p, "reflection")) {
		diag_node(g, n, "padding_mode '%s': expected zeros, border or reflection", p);
		return false;
	}
	Shape s = {4, {x->dims[0], x->dims[1], gr->dims[1], gr->dims[2]}};
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * Det: x [..., M, M] of a float type; the output is [...], one
 * determinant a matrix.
 */
static bool
infer_det(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	if (!want_rank(g, n, 0, 2, IR_MAX_RANK) || !want_float(g, n, 0))
		return false;
	if (x->dims[x->rank - 1] != x->dims[x->rank - 2]) {
		diag_node(g, n, "input 0 is %s, expected square matrices", ts(x));
		return false;
	}
	Shape s = shape_of(x);
	s.rank -= 2;
	return set_out(g, n, 0, x->dtype, &s);
}

/* The operators of opset 17 and later exist only there. */
static bool
want_opset(Graph *g, NodeId n, int since)
{
	if (g->opset >= since)
		return true;
	diag_node(g, n, "%s needs opset %d or later, the model has %lld", ir_op_name(ir_node(g, n)->op),
	    since, (long long)g->opset);
	return false;
}

/* Input i, when present, an i32/i64 const_scalar of at least lo; *v
 * untouched when the input is omitted. */
static bool
want_const_count(Graph *g, NodeId n, int i, const char *what, int64_t lo, int64_t *v)
{
	Tensor *t = in(g, n, i);
	if (!t)
		return true;
	if (t->dtype != DT_I32 && t->dtype != DT_I64) {
		diag_node(g, n, "input %d (%s) is %s, expected i32 or i64", i, what, ts(t));
		return false;
	}
	if (!const_scalar(g, n, i, what, v))
		return false;
	if (*v < lo) {
		diag_node(g, n, "input %d (%s) is %lld, expected at least %lld", i, what, (long long)*v,
		    (long long)lo);
		return false;
	}
	return true;
}

/* A 0/1 attribute. */
static bool
flag_attr(Graph *g, NodeId n, const char *name, int64_t dflt, int64_t *v)
{
	*v = ir_attr_int(g, n, name, dflt);
	if (*v == 0 || *v == 1)
		return true;
	diag_node(g, n, "%s %lld: expected 0 or 1", name, (long long)*v);
	return false;
}

/* The output_datatype attribute of the signal operators: a float type,
 * default f32 (halves computed in f32 by legalize-half). */
static bool
float_datatype(Graph *g, NodeId n, int64_t *dt)
{
	*dt = ir_attr_int(g, n, "output_datatype", DT_F32);
	if (*dt == DT_F32 || *dt == DT_F64 || *dt == DT_F16 || *dt == DT_BF16)
		return true;
	diag_node(g, n, "output_datatype %lld: tapc makes f32, f64, f16 or bf16", (long long)*dt);
	return false;
}

/*
 * HannWindow, HammingWindow, BlackmanWindow: size, a scalar i32/i64 known
 * at compile time; the output is [size] of output_datatype (default f32; a
 * float type: halves computed in f32 by legalize-half).
 */
static bool
infer_window(Graph *g, NodeId n)
{
	int64_t size = 0;
	if (!want_opset(g, n, 17) || !want_const_count(g, n, 0, "size", 0, &size))
		return false;
	int64_t dt, periodic;
	if (!float_datatype(g, n, &dt) || !flag_attr(g, n, "periodic", 1, &periodic))
		return false;
	Shape s = {1, {size}};
	return set_out(g, n, 0, (DType)dt, &s);
}

/*
 * RandomUniform, RandomNormal: `shape`, `dtype` (default f32); the Like
 * forms: the input's shape, `dtype` or the input's type; Bernoulli: its
 * probabilities' shape (a float type), `dtype` or theirs (any numeric type
 * or bool).  The random ones make f16, f32 or f64 (and bf16, which the
 * Like forms may inherit).
 */
static bool
infer_random(Graph *g, NodeId n)
{
	const Node *nd = &g->nodes[n];
	Shape s = {0, {0}};
	int64_t dt = DT_F32;
	if (nd->op == OP_RandomUniform || nd->op == OP_RandomNormal) {
		const Attr *a = ir_attr(g, n, "shape");
		if (!a || a->type != ATTR_INTS || a->n > IR_MAX_RANK) {
			diag_node(g, n, "needs a shape of at most %d dims", IR_MAX_RANK);
			return false;
		}
		s.rank = a->n;
		for (int i = 0; i < a->n; i++) {
			if (a->is[i] < 0) {
				diag_node(g, n, "shape dim %d is %lld", i, (long long)a->is[i]);
				return false;
			}
			s.d[i] = a->is[i];
		}
	} else {
		Tensor *x = in(g, n, 0);
		if (nd->op == OP_Bernoulli && (!want_opset(g, n, 15) || !want_float(g, n, 0)))
			return false;
		s = shape_of(x);
		dt = x->dtype;
	}
	dt = ir_attr_int(g, n, "dtype", dt);
	bool ok = dt == DT_F32 || dt == DT_F64 || dt == DT_F16 || dt == DT_BF16;
	if (nd->op == OP_Bernoulli)
		ok = dt > DT_UNDEF && dt < DT_COUNT && dt != DT_STRING && dt != DT_C64 && dt != DT_C128;
	if (!ok) {
		diag_node(g, n, "dtype %lld: tapc makes %s", (long long)dt, nd->op == OP_Bernoulli ?
		    "numbers or bool" : "f16, bf16, f32 or f64");
		return false;
	}
	return set_out(g, n, 0, (DType)dt, &s);
}

/* A real ([..., 1]) or complex ([..., 2]) signal of a float type, rank at
 * least lo. */
static bool
want_signal(Graph *g, NodeId n, int lo)
{
	Tensor *x = in(g, n, 0);
	if (!want_rank(g, n, 0, lo, IR_MAX_RANK) || !want_float(g, n, 0))
		return false;
	if (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2) {
		diag_node(g, n, "input 0 is %s, expected its last dim 1 (real) or 2 (complex)", ts(x));
		return false;
	}
	return true;
}

/*
 * DFT: x [batch, d1, ..., dN, 1|2], the transform along axis (1 to N;
 * negative counts from the end of x's dims), dft_length (input 1, known
 * at compile time) the signal cut or zero-padded to; the output has
 * dft_length values there (floor(dft_length / 2) + 1 when onesided, real
 * inputs only) and 2 in the last dim.
 */
static bool
infer_dft(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	int64_t inverse, onesided;
	if (!want_opset(g, n, 17) || !want_signal(g, n, 3) || !flag_attr(g, n, "inverse", 0, &inverse) ||
	    !flag_attr(g, n, "onesided", 0, &onesided))
		return false;
	int64_t axis = ir_attr_int(g, n, "axis", 1);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	if (axis < 1 || axis > x->rank - 2) {
		diag_node(g, n, "axis %lld of %s: expected a signal axis, 1 to %d", (long long)axis, ts(x),
		    x->rank - 2);
		return false;
	}
	int64_t len = x->dims[axis];
	if (!want_const_count(g, n, 1, "dft_length", 1, &len))
		return false;
	if (onesided && (inverse || x->dims[x->rank - 1] == 2)) {
		diag_node(g, n, "onesided with %s: tapc computes the one-sided transform of real "
		    "signals only", inverse ? "inverse" : "a complex input");
		return false;
	}
	Shape s = shape_of(x);
	s.d[axis] = onesided ? len / 2 + 1 : len;
	s.d[s.rank - 1] = 2;
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * STFT: signal [batch, length, 1|2]; frame_step (input 1) and frame_length
 * (input 3) scalar integers known at compile time; window (input 2) a
 * vector of the signal's type, as long as a frame (its length is the
 * frame's when frame_length is omitted).  The output is [batch, frames,
 * bins, 2]: frames = (length - frame_length) / frame_step + 1, bins =
 * frame_length / 2 + 1 when onesided (the default; real signals only),
 * else frame_length.
 */
static bool
infer_stft(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *w = in(g, n, 2);
	int64_t onesided, step = 0, flen = -1;
	if (!want_opset(g, n, 17) || !want_signal(g, n, 3) || !want_rank(g, n, 0, 3, 3) ||
	    !flag_attr(g, n, "onesided", 1, &onesided) ||
	    !want_const_count(g, n, 1, "frame_step", 1, &step) ||
	    !want_const_count(g, n, 3, "frame_length", 1, &flen))
		return false;
	if (w && (!want_rank(g, n, 2, 1, 1) || !same_dtype(g, n, 0, 2)))
		return false;
	if (!w && flen < 0) {
		diag_node(g, n, "neither a window nor a frame_length: the frame's length is unknown");
		return false;
	}
	if (w && flen >= 0 && w->dims[0] != flen) {
		diag_node(g, n, "the window is %s, frame_length %lld", ts(w), (long long)flen);
		return false;
	}
	if (flen < 0)
		flen = w->dims[0];
	if (flen < 1 || flen > x->dims[1]) {
		diag_node(g, n, "frames of %lld samples from a signal of %lld", (long long)flen,
		    (long long)x->dims[1]);
		return false;
	}
	if (onesided && x->dims[2] == 2) {
		diag_node(g, n, "onesided with a complex signal: tapc computes the one-sided transform "
		    "of real signals only");
		return false;
	}
	Shape s = {4, {x->dims[0], (x->dims[1] - flen) / step + 1, onesided ? flen / 2 + 1 : flen, 2}};
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * MelWeightMatrix: num_mel_bins and dft_length (inputs 0, 1) scalar
 * integers known at compile time, sample_rate (2) a scalar integer,
 * lower_edge_hertz and upper_edge_hertz (3, 4) scalars of a float type; the
 * output is [dft_length / 2 + 1, num_mel_bins] of output_datatype (a float
 * type, default f32).
 */
static bool
infer_melweightmatrix(Graph *g, NodeId n)
{
	int64_t mels = 0, len = 0;
	if (!want_opset(g, n, 17) || !want_const_count(g, n, 0, "num_mel_bins", 1, &mels) ||
	    !want_const_count(g, n, 1, "dft_length", 1, &len) || !want_scalar(g, n, 2) ||
	    !want_scalar(g, n, 3) || !want_scalar(g, n, 4) || !want_float(g, n, 3) ||
	    !want_float(g, n, 4) || !same_dtype(g, n, 3, 4))
		return false;
	Tensor *sr = in(g, n, 2);
	if (sr->dtype != DT_I32 && sr->dtype != DT_I64) {
		diag_node(g, n, "input 2 (sample_rate) is %s, expected i32 or i64", ts(sr));
		return false;
	}
	int64_t dt;
	if (!float_datatype(g, n, &dt))
		return false;
	Shape s = {2, {len / 2 + 1, mels}};
	return set_out(g, n, 0, (DType)dt, &s);
}

/*
 * ReverseSequence: x of rank 2 or more, sequence_lens i64 [batch];
 * time_axis and batch_axis 0 and 1, either order.  The output is x's.
 */
static bool
infer_reverse_sequence(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *l = in(g, n, 1);
	int64_t ta = ir_attr_int(g, n, "time_axis", 0), ba = ir_attr_int(g, n, "batch_axis", 1);
	if (!want_rank(g, n, 0, 2, IR_MAX_RANK))
		return false;
	if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0))) {
		diag_node(g, n, "time_axis %lld, batch_axis %lld: expected 0 and 1, either order",
		    (long long)ta, (long long)ba);
		return false;
	}
	if (l->dtype != DT_I64 || l->rank != 1 || l->dims[0] != x->dims[ba]) {
		diag_node(g, n, "sequence_lens is %s, expected i64[%lld] (one per batch entry of %s)",
		    ts(l), (long long)x->dims[ba], ts(x));
		return false;
	}
	Shape s = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s);
}

/*
 * NegativeLogLikelihoodLoss (input: log-probabilities) and
 * SoftmaxCrossEntropyLoss (input: scores): input [N, C, d...] of a float
 * type, target [N, d...] i32 or i64, weight [C] like the input.  The loss
 * is target's shape with reduction "none", else one value (rank 0); the
 * cross entropy's optional second output, the log-probabilities, is the
 * input's shape.
 */
static bool
infer_loss(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0), *t = in(g, n, 1), *w = in(g, n, 2);
	if (!want_rank(g, n, 0, 2, IR_MAX_RANK) || !want_float(g, n, 0) || !want_indices(g, n, 1))
		return false;
	bool shaped = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
	for (int i = 2; i < x->rank && shaped; i++)
		shaped = t->dims[i - 1] == x->dims[i];
	if (!shaped) {
		diag_node(g, n, "the target %s is not input 0 %s without its axis 1", ts(t), ts(x));
		return false;
	}
	if (w && (w->rank != 1 || w->dims[0] != x->dims[1] || w->dtype != x->dtype)) {
		diag_node(g, n, "the weight is %s, expected %s[%lld] (one per class)", ts(w),
		    ir_dtype_name(x->dtype), (long long)x->dims[1]);
		return false;
	}
	const char *red = ir_attr_str(g, n, "reduction", "mean");
	bool none = strcmp(red, "none") == 0;
	if (!none && strcmp(red, "sum") != 0 && strcmp(red, "mean") != 0) {
		diag_node(g, n, "reduction '%s': expected none, sum or mean", red);
		return false;
	}
	Shape s = none ? shape_of(t) : (Shape){0, {0}}, xs = shape_of(x);
	return set_out(g, n, 0, x->dtype, &s) && set_out(g, n, 1, x->dtype, &xs);
}

/*
 * QuantizeLinear (x f32 or i32 -> the zero point's type, u8 or i8; u8
 * without one) and DequantizeLinear (x u8, i8 or i32 -> f32): the scale f32
 * and the zero point one value each, or from opset 13 one per element of
 * x's axis `axis` (1-D, that long).
 */
static bool
infer_qdq(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	bool q = nd->op == OP_QuantizeLinear;
	Tensor *x = in(g, n, 0), *s = in(g, n, 1);
	Tensor *z = nd->nin > 2 && nd->in[2] != IR_NONE ? in(g, n, 2) : NULL;
	bool xok = q ? x->dtype == DT_F32 || x->dtype == DT_I32 :
	    x->dtype == DT_U8 || x->dtype == DT_I8 || x->dtype == DT_I32;
	if (!xok) {
		diag_node(g, n, "input 0 is %s, which %s does not take", ts(x), ir_op_name(nd->op));
		return false;
	}
	if (s->dtype != DT_F32) {
		diag_node(g, n, "the scale is %s, but only f32 is supported", ts(s));
		return false;
	}
	DType zt = q ? (z ? z->dtype : DT_U8) : x->dtype;
	if (z && (z->dtype != zt || (q && zt != DT_U8 && zt != DT_I8))) {
		diag_node(g, n, "the zero point is %s, but %s", ts(z),
		    q ? "only u8 and i8 are supported" : "it must be input 0's type");
		return false;
	}
	if (ir_numel(s) != 1 || s->rank > 1) {
		int64_t axis = ir_attr_int(g, n, "axis", 1);
		if (g->opset < 13 || s->rank != 1) {
			diag_node(g, n, "the scale is %s: one value%s", ts(s),
			    g->opset < 13 ? " before opset 13" : ", or 1-D along the axis");
			return false;
		}
		if (!norm_axis(g, n, &axis, x->rank))
			return false;
		if (s->dims[0] != x->dims[axis]) {
			diag_node(g, n, "the scale has %lld values for axis %lld of %s",
			    (long long)s->dims[0], (long long)axis, ts(x));
			return false;
		}
	}
	if (z && (z->rank != s->rank || ir_numel(z) != ir_numel(s))) {
		diag_node(g, n, "the zero point %s is not shaped as the scale %s", ts(z), ts(s));
		return false;
	}
	Shape sh = shape_of(x);
	return set_out(g, n, 0, q ? zt : DT_F32, &sh);
}

/*
 * DynamicQuantizeLinear: x f32 -> y u8 shaped like x, its scale (f32) and
 * zero point (u8), both scalars.
 */
static bool
infer_dql(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	if (x->dtype != DT_F32) {
		diag_node(g, n, "input 0 is %s, expected f32", ts(x));
		return false;
	}
	Shape s = shape_of(x), one = {0, {0}};
	return set_out(g, n, 0, DT_U8, &s) && set_out(g, n, 1, DT_F32, &one) &&
	    set_out(g, n, 2, DT_U8, &one);
}

/* Input i of node n is u8 or i8. */
static bool
want_q8(Graph *g, NodeId n, int i)
{
	Tensor *t = in(g, n, i);
	if (!t || t->dtype == DT_U8 || t->dtype == DT_I8)
		return true;
	diag_node(g, n, "input %d is %s, expected u8 or i8", i, ts(t));
	return false;
}

/*
 * Input i of node n (when present) is a quantization parameter: a scale (f32;
 * of < 0) or input of's zero point (its type); one value, or with per > 1
 * one per column or output channel, `per` values along its last dim.
 */
static bool
want_qparam(Graph *g, NodeId n, int i, int of, int64_t per, const char *what)
{
	Tensor *t = in(g, n, i);
	if (!t)
		return true;
	DType want = of < 0 ? DT_F32 : in(g, n, of)->dtype;
	if (t->dtype != want) {
		diag_node(g, n, "input %d (%s) is %s, expected %s", i, what, ts(t),
		    ir_dtype_name(want));
		return false;
	}
	int64_t k = ir_numel(t);
	if (k == 1 || (per > 1 && k == per && t->dims[t->rank - 1] == per))
		return true;
	if (per > 1)
		diag_node(g, n, "input %d (%s) is %s: one value, or %lld along its last dim", i, what,
		    ts(t), (long long)per);
	else
		diag_node(g, n, "input %d (%s) is %s: one value (tapc quantizes this operand per tensor)",
		    i, what, ts(t));
	return false;
}

/*
 * MatMulInteger and QLinearMatMul (numpy's matmul of u8/i8 operands a and
 * b), ConvInteger and QLinearConv (Conv's shapes): the left operand (a, x)
 * and QLinear*'s result quantized per tensor, the right one (b, w) per
 * tensor or per column of b / output channel of w -- onnxruntime's forms.
 * The Integer ops give i32; QLinear* the type of y_zero_point (input 7),
 * QLinearConv's bias (input 8) i32 [M].  FusedMatMulInteger (fuse-matmul)
 * is MatMulInteger's inputs, then the f32 scale (input 4, one value) its
 * sums are multiplied by; f32 out.
 */
static bool
infer_qlinear(Graph *g, NodeId n)
{
	Op op = ir_node(g, n)->op;
	bool conv = op == OP_ConvInteger || op == OP_QLinearConv;
	bool ql = op == OP_QLinearMatMul || op == OP_QLinearConv;
	int iw = ql ? 3 : 1;
	Shape s;
	if (!want_q8(g, n, 0) || !want_q8(g, n, iw) ||
	    !(conv ? conv_shape(g, n, 0, iw, &s) : matmul_shape(g, n, 0, iw, &s)))
		return false;
	Tensor *w = in(g, n, iw);
	int64_t per = conv ? w->dims[0] : w->rank >= 2 ? w->dims[w->rank - 1] : 1;
	const char *an = conv ? "x" : "a", *bn = conv ? "w" : "b";
	char az[32], bz[32], as[32], bs[32];
	snprintf(az, sizeof az, "%s_zero_point", an);
	snprintf(bz, sizeof bz, "%s_zero_point", bn);
	snprintf(as, sizeof as, "%s_scale", an);
	snprintf(bs, sizeof bs, "%s_scale", bn);
	if ((ql && !want_qparam(g, n, 1, -1, 1, as)) || !want_qparam(g, n, 2, 0, 1, az))
		return false;
	if (op == OP_FusedMatMulInteger) {
		Tensor *sc = in(g, n, 4);
		if (!sc || sc->dtype != DT_F32 || ir_numel(sc) != 1) {
			diag_node(g, n, "input 4 (the scale) is %s, expected one f32 value",
			    sc ? ts(sc) : "absent");
			return false;
		}
	}
	if (!ql)
		return want_qparam(g, n, 3, 1, per, bz) &&
		    set_out(g, n, 0, op == OP_FusedMatMulInteger ? DT_F32 : DT_I32, &s);
	if (!want_qparam(g, n, 4, -1, per, bs) || !want_qparam(g, n, 5, 3, per, bz) ||
	    !want_qparam(g, n, 6, -1, 1, "y_scale") || !want_q8(g, n, 7) ||
	    !want_qparam(g, n, 7, 7, 1, "y_zero_point"))
		return false;
	Tensor *b = conv ? in(g, n, 8) : NULL;
	if (b && (b->dtype != DT_I32 || b->rank != 1 || b->dims[0] != per)) {
		diag_node(g, n, "input 8 (B) is %s, expected i32[%lld]", ts(b), (long long)per);
		return false;
	}
	return set_out(g, n, 0, in(g, n, 7)->dtype, &s);
}

/*
 * RNN, GRU and LSTM (opsets 1 to 14): X [T,B,I] (layout 1: [B,T,I]),
 * W [D,G*H,I], R [D,G*H,H], B [D,2*G*H], sequence_lens [B] (i32),
 * initial_h and initial_c [D,B,H] ([B,D,H]), P [D,3*H]; G gates (1, 3, 4),
 * D directions.  Y is [T,D,B,H] ([B,T,D,H]), Y_h and Y_c [D,B,H] ([B,D,H]).
 */
static const char *const rnn_acts[] = {
	"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu",
	"ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus",
};

static bool
rnn_shape_of(Graph *g, NodeId n, int i, const Shape *want)
{
	Tensor *t = in(g, n, i);
	if (!t || (t->rank == want->rank &&
	    memcmp(t->dims, want->d, sizeof want->d[0] * want->rank) == 0))
		return true;
	diag_node(g, n, "input %d is %s, expected %s", i, ts(t), ss(want));
	return false;
}

static bool
infer_rnn(Graph *g, NodeId n)
{
	Op op = ir_node(g, n)->op;
	int gates = op == OP_LSTM ? 4 : op == OP_GRU ? 3 : 1;
	int nfn = op == OP_LSTM ? 3 : op == OP_GRU ? 2 : 1;
	Tensor *x = in(g, n, 0), *r = in(g, n, 2), *sl = in(g, n, 4);
	if (!want_rank(g, n, 0, 3, 3) || !want_rank(g, n, 1, 3, 3) || !want_rank(g, n, 2, 3, 3))
		return false;
	if (x->dtype != DT_F32 && x->dtype != DT_F16 && x->dtype != DT_BF16) {
		diag_node(g, n, "input 0 is %s, but only f32 (or f16, bf16: computed in f32) is supported",
		    ts(x));
		return false;
	}
	for (int i = 1; i < 8; i++)
		if (i != 4 && !same_dtype(g, n, 0, i))
			return false;
	const char *dir = ir_attr_str(g, n, "direction", "forward");
	int64_t nd = !strcmp(dir, "bidirectional") ? 2 :
	    !strcmp(dir, "forward") || !strcmp(dir, "reverse") ? 1 : 0;
	if (!nd) {
		diag_node(g, n, "unknown direction '%s'", dir);
		return false;
	}
	int64_t layout = ir_attr_int(g, n, "layout", 0);
	if (layout != 0 && layout != 1) {
		diag_node(g, n, "layout %lld, expected 0 or 1", (long long)layout);
		return false;
	}
	int64_t T = x->dims[layout ? 1 : 0], B = x->dims[layout ? 0 : 1], I = x->dims[2];
	int64_t H = r->dims[2], GH, GH2, H3;
	const Attr *hs = ir_attr(g, n, "hidden_size");
	if (hs && (hs->type != ATTR_INT || hs->i != H)) {
		diag_node(g, n, "hidden_size %lld does not match input 2 %s",
		    hs->type == ATTR_INT ? (long long)hs->i : -1LL, ts(r));
		return false;
	}
	if (!mul_ck(H, gates, &GH) || !mul_ck(GH, 2, &GH2) || !mul_ck(H, 3, &H3)) {
		diag_node(g, n, "hidden size %lld is too large", (long long)H);
		return false;
	}
	Shape sw = {3, {nd, GH, I}}, sr = {3, {nd, GH, H}}, sb = {2, {nd, GH2}};
	Shape sseq = {1, {B}}, sp = {2, {nd, H3}};
	Shape sh = layout ? (Shape){3, {B, nd, H}} : (Shape){3, {nd, B, H}};
	if (!rnn_shape_of(g, n, 1, &sw) || !rnn_shape_of(g, n, 2, &sr) ||
	    !rnn_shape_of(g, n, 3, &sb) || !rnn_shape_of(g, n, 4, &sseq) ||
	    !rnn_shape_of(g, n, 5, &sh) || (op == OP_LSTM && (!rnn_shape_of(g, n, 6, &sh) ||
	    !rnn_shape_of(g, n, 7, &sp))))
		return false;
	if (sl) {
		if (sl->dtype != DT_I32) {
			diag_node(g, n, "input 4 (sequence_lens) is %s, expected i32", ts(sl));
			return false;
		}
		const int32_t *v = ir_value(g, ir_node(g, n)->in[4]);
		for (int64_t b = 0; v && b < B; b++)
			if (v[b] < 0 || v[b] > T) {
				diag_node(g, n, "sequence_lens[%lld] is %d, outside [0, %lld]",
				    (long long)b, (int)v[b], (long long)T);
				return false;
			}
	}
	const Attr *acts = ir_attr(g, n, "activations");
	if (acts) {
		/* one list per direction; a bidirectional node may list one
		 * for both, a one-way node two of which it uses the first */
		if (acts->type != ATTR_STRINGS || (acts->n != nfn * nd && acts->n != nfn * (3 - nd))) {
			diag_node(g, n, "activations has %d names, expected %lld", acts->type ==
			    ATTR_STRINGS ? acts->n : 0, (long long)(nfn * nd));
			return false;
		}
		for (int i = 0; i < acts->n; i++) {
			size_t k = 0;
			while (k < sizeof rnn_acts / sizeof *rnn_acts && strcasecmp(acts->ss[i], rnn_acts[k]))
				k++;
			if (k == sizeof rnn_acts / sizeof *rnn_acts) {
				diag_node(g, n, "unknown activation '%s'", acts->ss[i]);
				return false;
			}
		}
	}
	const Attr *clip = ir_attr(g, n, "clip");
	if (clip && (clip->type != ATTR_FLOAT || !(clip->f > 0))) {
		diag_node(g, n, "clip must be a positive float");
		return false;
	}
	Shape y = layout ? (Shape){4, {B, T, nd, H}} : (Shape){4, {T, nd, B, H}};
	return set_out(g, n, 0, x->dtype, &y) && set_out(g, n, 1, x->dtype, &sh) &&
	    set_out(g, n, 2, x->dtype, &sh);
}

/*
 * The floats of input idx (Resize's scales): the count, -1 when the input
 * is omitted or empty (Resize-11 takes an empty tensor for "absent"), -2
 * after an error.  The values must be known at compile time.
 */
static int
float_input(Graph *g, NodeId n, int idx, double *out, int max)
{
	Tensor *t = in(g, n, idx);
	if (!t || ir_numel(t) == 0)
		return -1;
	if ((t->dtype != DT_F32 && t->dtype != DT_F64) || t->rank != 1) {
		diag_node(g, n, "input %d is %s, expected a 1-D f32 list", idx, ts(t));
		return -2;
	}
	const void *v = ir_value(g, ir_node(g, n)->in[idx]);
	if (!v) {
		diag_node(g, n, "input %d '%s' is not a compile-time constant", idx, t->name);
		return -2;
	}
	int cnt = (int)ir_numel(t);
	if (cnt > max) {
		diag_node(g, n, "input %d has %d values, more than %d", idx, cnt, max);
		return -2;
	}
	for (int i = 0; i < cnt; i++)
		out[i] = elem_f(t->dtype, v, i);
	return cnt;
}

static bool
one_of(Graph *g, NodeId n, const char *attr, const char *dflt, const char *const *ok)
{
	const char *v = ir_attr_str(g, n, attr, dflt);
	for (int i = 0; ok[i]; i++)
		if (!strcmp(v, ok[i]))
			return true;
	diag_node(g, n, "unknown %s '%s'", attr, v);
	return false;
}

/*
 * Resize (opsets 10, 11, 13, 18) and Upsample (7, 9).  Upsample and
 * Resize-10 take (X, scales); Resize-11 on (X, roi, scales, sizes), one of
 * scales and sizes non-empty; opset 18 adds axes (scales/sizes then list
 * only those axes) and keep_aspect_ratio_policy.  Output dims are
 * floor(D * scale), or sizes, or round(D * s) with the policy's common s.
 */
static bool
infer_resize(Graph *g, NodeId n)
{
	static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
	static const char *const cts[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
	    "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize", NULL};
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
	static const char *const kars[] = {"stretch", "not_larger", "not_smaller", NULL};
	Tensor *x = in(g, n, 0);
	bool up = ir_node(g, n)->op == OP_Upsample;
	bool v10 = up || g->opset < 11; /* (X, scales), asymmetric coordinates */
	int r = x->rank;
	const char *mode = ir_attr_str(g, n, "mode", "nearest");
	if (!one_of(g, n, "mode", "nearest", modes))
		return false;
	if (v10 && !strcmp(mode, "cubic")) {
		diag_node(g, n, "mode cubic needs Resize at opset 11 or later");
		return false;
	}
	if (strcmp(mode, "nearest") && x->dtype != DT_F32 && x->dtype != DT_F64 &&
	    x->dtype != DT_F16 && x->dtype != DT_BF16) {
		diag_node(g, n, "mode %s needs float data, input 0 is %s", mode, ts(x));
		return false;
	}
	if (!v10 && (!one_of(g, n, "coordinate_transformation_mode", "half_pixel", cts) ||
	    !one_of(g, n, "nearest_mode", "round_prefer_floor", nms) ||
	    !one_of(g, n, "keep_aspect_ratio_policy", "stretch", kars)))
		return false;
	int64_t axes[IR_MAX_RANK];
	int naxes = r;
	for (int i = 0; i < r; i++)
		axes[i] = i;
	if (!v10) {
		const int64_t *ax;
		int k = int_list(g, n, -1, "axes", &ax);
		unsigned mask;
		if (k == -2 || (k >= 0 && !axes_mask(g, n, ax, k, r, &mask)))
			return false;
		if (k >= 0) {
			naxes = k;
			for (int i = 0; i < k; i++)
				axes[i] = ax[i] < 0 ? ax[i] + r : ax[i];
		}
	}
	double sc[IR_MAX_RANK];
	int nsc, nsz = -1;
	const int64_t *sizes = NULL;
	if (up && !in(g, n, 1)) {
		const Attr *a = ir_attr(g, n, "scales");
		if (!a || a->type != ATTR_FLOATS) {
			diag_node(g, n, "attribute 'scales' is missing");
			return false;
		}
		nsc = a->n;
		for (int i = 0; i < a->n && i < IR_MAX_RANK; i++)
			sc[i] = a->fs[i];
	} else {
		nsc = float_input(g, n, v10 ? 1 : 2, sc, IR_MAX_RANK);
	}
	if (nsc == -2)
		return false;
	Tensor *tsz = v10 ? NULL : in(g, n, 3);
	if (tsz && ir_numel(tsz) > 0 && (nsz = int_list(g, n, 3, NULL, &sizes)) == -2)
		return false;
	if (nsc >= 0 && nsz >= 0) {
		diag_node(g, n, "scales and sizes are both given: one of them must be empty");
		return false;
	}
	if (nsc < 0 && nsz < 0) {
		diag_node(g, n, v10 ? "input 1 (scales) is missing or empty" :
		    "one of input 2 (scales) and input 3 (sizes) must be given");
		return false;
	}
	if ((nsc >= 0 ? nsc : nsz) != naxes) {
		diag_node(g, n, "%s has %d values, expected %d for %s", nsc >= 0 ? "scales" : "sizes",
		    nsc >= 0 ? nsc : nsz, naxes, ts(x));
		return false;
	}
	Shape s = shape_of(x);
	const char *kar = ir_attr_str(g, n, "keep_aspect_ratio_policy", "stretch");
	if (nsc >= 0) {
		for (int i = 0; i < naxes; i++) {
			int64_t a = axes[i];
			if (!(sc[i] > 0) || isinf(sc[i]) || (up && sc[i] < 1)) {
				diag_node(g, n, "scale %g for axis %lld is not %s", sc[i], (long long)a,
				    up ? "at least 1" : "positive");
				return false;
			}
			double o = floor((double)x->dims[a] * sc[i]);
			if (!(o < 0x1p62)) {
				diag_node(g, n, "scale %g makes axis %lld of %s too large", sc[i], (long long)a, ts(x));
				return false;
			}
			s.d[a] = (int64_t)o;
		}
	} else {
		bool stretch = !strcmp(kar, "stretch");
		double common = !strcmp(kar, "not_larger") ? INFINITY : -INFINITY;
		for (int i = 0; i < naxes; i++) {
			int64_t a = axes[i], d = x->dims[a];
			if (sizes[i] < 0 || (d == 0 && sizes[i] != 0) || (!stretch && d == 0)) {
				diag_node(g, n, "cannot resize axis %lld of %s to %lld", (long long)a, ts(x),
				    (long long)sizes[i]);
				return false;
			}
			s.d[a] = sizes[i];
			double q = stretch ? 0 : (double)sizes[i] / (double)d;
			common = !strcmp(kar, "not_larger") ? fmin(common, q) : fmax(common, q);
		}
		for (int i = 0; i < naxes && !stretch; i++) {
			double o = common * (double)x->dims[axes[i]] + 0.5;
			if (!(o < 0x1p62)) {
				diag_node(g, n, "sizes make axis %lld of %s too large", (long long)axes[i], ts(x));
				return false;
			}
			s.d[axes[i]] = (int64_t)o;
		}
	}
	if (!v10 && !strcmp(ir_attr_str(g, n, "coordinate_transformation_mode", ""), "tf_crop_and_resize")) {
		Tensor *roi = in(g, n, 1);
		if (!roi || ir_numel(roi) != 2 * naxes) {
			diag_node(g, n, "coordinate_transformation_mode tf_crop_and_resize needs input 1 (roi) with %d values",
			    2 * naxes);
			return false;
		}
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* If: the condition (one bool), then K outputs of each branch.  tapc
 * compiles both branches and reserves one buffer per output, so the two
 * branches must agree on each output's dtype and shape. */
static bool
infer_if(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	int k = nd->nout;
	Tensor *c = in(g, n, 0);
	if (nd->nin != 1 + 2 * k) {
		diag_node(g, n, "expected a condition and %d outputs of each branch, got %d inputs", k, nd->nin);
		return false;
	}
	if (c->dtype != DT_BOOL || ir_numel(c) != 1) {
		diag_node(g, n, "the condition is %s, expected one bool", ts(c));
		return false;
	}
	for (int i = 0; i < k; i++) {
		Tensor *a = in(g, n, 1 + i), *b = in(g, n, 1 + k + i);
		if (!a || !b) {
			diag_node(g, n, "output %d: a branch does not compute it", i);
			return false;
		}
		bool same = a->dtype == b->dtype && a->rank == b->rank;
		for (int d = 0; same && d < a->rank; d++)
			same = a->dims[d] == b->dims[d];
		if (!same) {
			diag_node(g, n, "output %d is %s in the then branch but %s in the else branch; tapc "
			    "compiles both and needs them the same", i, ts(a), ts(b));
			return false;
		}
		Shape s = shape_of(a);
		if (!set_out(g, n, i, a->dtype, &s))
			return false;
	}
	return true;
}

/* AllReduce keeps the shape; AllGather multiplies the split axis by the
 * number of parts, ReduceScatter and Shard divide it (tensor parallelism). */
static bool
infer_comm(Graph *g, NodeId n)
{
	Tensor *x = in(g, n, 0);
	Shape s = shape_of(x);
	if (g->nodes[n].op == OP_AllReduce) { /* a bucket: each output its input's */
		Node *nd = &g->nodes[n];
		if (nd->nin != nd->nout) {
			diag_node(g, n, "%d inputs and %d outputs: an all-reduce of a bucket has as many "
			    "of each", nd->nin, nd->nout);
			return false;
		}
		for (int i = 0; i < nd->nin; i++) {
			Shape si = shape_of(in(g, n, i));
			if (!set_out(g, n, i, in(g, n, i)->dtype, &si))
				return false;
		}
		return true;
	}
	int64_t axis = ir_attr_int(g, n, "axis", 0);
	int64_t parts = ir_attr_int(g, n, "parts", 0);
	int64_t blocks = ir_attr_int(g, n, "blocks", 1);
	if (!norm_axis(g, n, &axis, x->rank))
		return false;
	if (parts < 1 || blocks < 1) {
		diag_node(g, n, "parts=%lld and blocks=%lld must be positive", (long long)parts,
		    (long long)blocks);
		return false;
	}
	if (g->nodes[n].op == OP_AllGather) {
		if (s.d[axis] % blocks != 0) {
			diag_node(g, n, "axis %lld of %s does not hold %lld blocks", (long long)axis,
			    ts(x), (long long)blocks);
			return false;
		}
		s.d[axis] *= parts;
	} else {
		if (s.d[axis] % (parts * blocks) != 0) {
			diag_node(g, n, "axis %lld of %s does not split into %lld x %lld parts",
			    (long long)axis, ts(x), (long long)blocks, (long long)parts);
			return false;
		}
		s.d[axis] /= parts;
	}
	return set_out(g, n, 0, x->dtype, &s);
}

/* -------------------------------------------------------------- entry */

bool
ir_infer_node(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	if (ir_op_kind(nd->op) == OPK_TRAIN)
		return ir_infer_train(g, n);
	if (!check_arity(g, n))
		return false;
	switch (nd->op) {
	case OP_Constant: return infer_constant(g, n);
	case OP_ConstantOfShape: return infer_const_of_shape(g, n);
	case OP_Shape: {
		Tensor *x = in(g, n, 0);
		int64_t a = clamp_end(ir_attr_int(g, n, "start", 0), x->rank);
		int64_t b = clamp_end(ir_attr_int(g, n, "end", x->rank), x->rank);
		Shape s = {1, {b > a ? b - a : 0}};
		return set_out(g, n, 0, DT_I64, &s);
	}
	case OP_Size: {
		Shape s = {0, {0}};
		return set_out(g, n, 0, DT_I64, &s);
	}
	case OP_Range: return infer_range(g, n);
	case OP_Reshape: return infer_reshape(g, n);
	case OP_Flatten: return infer_flatten(g, n);
	case OP_Squeeze: case OP_Unsqueeze: return infer_squeeze(g, n);
	case OP_Transpose: return infer_transpose(g, n);
	case OP_Concat: return infer_concat(g, n);
	case OP_Split: return infer_split(g, n);
	case OP_Slice: return infer_slice(g, n);
	case OP_Gather: return infer_gather(g, n);
	case OP_Expand: return infer_expand(g, n);
	case OP_Tile: return infer_tile(g, n);
	case OP_Trilu: return infer_trilu(g, n);
	case OP_EyeLike: return infer_eyelike(g, n);
	case OP_Det: return infer_det(g, n);
	case OP_HannWindow: case OP_HammingWindow: case OP_BlackmanWindow: return infer_window(g, n);
	case OP_RandomUniform: case OP_RandomNormal: case OP_RandomUniformLike:
	case OP_RandomNormalLike: case OP_Bernoulli: return infer_random(g, n);
	case OP_DFT: return infer_dft(g, n);
	case OP_STFT: return infer_stft(g, n);
	case OP_MelWeightMatrix: return infer_melweightmatrix(g, n);
	case OP_Pad: return infer_pad(g, n);
	case OP_GatherElements: return infer_gather_elements(g, n);
	case OP_ScatterElements: case OP_Scatter: return infer_scatter_elements(g, n);
	case OP_ScatterND: return infer_scatternd(g, n);
	case OP_GatherND: return infer_gathernd(g, n);
	case OP_OneHot: return infer_onehot(g, n);
	case OP_CumSum: return infer_cumsum(g, n);
	case OP_TopK: return infer_topk(g, n);
	case OP_Einsum: return infer_einsum(g, n);
	case OP_DepthToSpace: case OP_SpaceToDepth: return infer_depth_space(g, n);
	case OP_MatMul: return infer_matmul(g, n);
	case OP_Gemm: return infer_gemm(g, n);
	case OP_Conv: return infer_conv(g, n);
	case OP_ConvTranspose: return infer_conv_transpose(g, n);
	case OP_InstanceNormalization: return infer_instance_norm(g, n);
	case OP_Resize: case OP_Upsample: return infer_resize(g, n);
	case OP_MaxPool: case OP_AveragePool: case OP_GlobalAveragePool: case OP_GlobalMaxPool:
		return infer_pool(g, n);
	case OP_BatchNormalization: case OP_LayerNormalization: return infer_norm(g, n);
	case OP_Softmax: case OP_LogSoftmax: case OP_Hardmax: return infer_softmax(g, n);
	case OP_QuantizeLinear: case OP_DequantizeLinear: return infer_qdq(g, n);
	case OP_DynamicQuantizeLinear: return infer_dql(g, n);
	case OP_MatMulInteger: case OP_QLinearMatMul: case OP_ConvInteger: case OP_QLinearConv:
		return infer_qlinear(g, n);
	case OP_NegativeLogLikelihoodLoss: case OP_SoftmaxCrossEntropyLoss:
		return infer_loss(g, n);
	case OP_LRN: case OP_MeanVarianceNormalization: return infer_lrn_mvn(g, n);
	case OP_ReverseSequence: return infer_reverse_sequence(g, n);
	case OP_GridSample: return infer_gridsample(g, n);
	case OP_RNN: case OP_GRU: case OP_LSTM: return infer_rnn(g, n);
	case OP_AllReduce: case OP_AllGather: case OP_ReduceScatter: case OP_Shard:
		return infer_comm(g, n);
	case OP_Div: case OP_Mod:
		return infer_bcast(g, n) && ir_check_division(g, n);
	case OP_If: return infer_if(g, n);
	case OP_FusedConv:
		return infer_conv(g, n) && fused_extra(g, n, -1, 3) && fused_act(g, n, "activation");
	case OP_FusedMatMul:
		return infer_matmul(g, n) && fused_extra(g, n, 2, 3) && fused_act(g, n, "activation");
	case OP_FusedMatMulInteger:
		return infer_qlinear(g, n) && fused_extra(g, n, 5, 6) &&
		    fused_act(g, n, "activation");
	case OP_FusedLayerNorm: return infer_norm(g, n);
	case OP_FusedGelu:
		if (in(g, n, 0)->dtype != DT_F32) {
			diag_node(g, n, "expected f32, got %s", ts(in(g, n, 0)));
			return false;
		}
		return infer_unary(g, n);
	case OP_FusedSoftmax: return infer_fused_softmax(g, n);
	case OP_FusedSqueezeExcite:
		return infer_fused_se(g, n) && fused_act(g, n, "activation") && fused_act(g, n, "gate");
	case OP_FusedConvDw:
		return infer_fused_conv_dw(g, n) && fused_act(g, n, "activation") &&
		    fused_act(g, n, "expand_activation");
	default:
		break;
	}
	switch (ir_op_kind(nd->op)) {
	case OPK_UNARY: return infer_unary(g, n);
	case OPK_BINARY: case OPK_VARIADIC: return infer_bcast(g, n);
	case OPK_REDUCE: return infer_reduce(g, n);
	default: die("no shape inference for %s", ir_op_name(nd->op));
	}
}

bool
ir_infer_all(Graph *g)
{
	for (NodeId n = 0; n < g->nnodes; n++) {
		if (g->nodes[n].dead)
			continue;
		if (!ir_infer_node(g, n))
			return false;
		ir_eval_node(g, n);
	}
	return true;
}
