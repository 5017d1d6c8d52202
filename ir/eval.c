/*
 * eval.c - compile-time evaluation of the shape arithmetic exporters emit
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and the like), so that
 * shapes computed at run time by the model become static for tapc.
 *
 * Needs: the node's outputs already shaped by ir_infer_node, and its inputs'
 * contents known (ir_value), except Shape and Size, which need only the
 * input's shape.  Results go in the graph's arena as t->value.  It refuses
 * (returns false, no error) on unknown inputs, unsupported dtypes, results
 * over IR_EVAL_MAX_ELEMS elements, or anything whose value would be a
 * run-time error (division by zero, an index out of range): those are left
 * to run time, where they are reported.
 *
 * Values are small, so every element goes through one of two domains,
 * int64 or double, chosen by dtype; data movement copies raw elements.
 */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

#define MAX_IN 64                       /* inputs handled; Concat of more is left alone */

/* ---------------------------------------------------- element access */

static bool
is_float(DType t)
{
	return t == DT_F32 || t == DT_F64;
}

/* The dtypes the two domains hold exactly: not uint64, whose values from
 * 2^63 up int64 cannot hold (they are left to run time). */
static bool
is_number(DType t)
{
	switch (t) {
	case DT_F32: case DT_F64: case DT_I8: case DT_U8: case DT_I16: case DT_U16:
	case DT_I32: case DT_U32: case DT_I64: case DT_BOOL:
		return true;
	default:
		return false;
	}
}

/* double to int64 as C++ does for in-range values; no UB for the rest */
static int64_t
to_int(double v)
{
	if (v != v)
		return 0;
	if (v >= 0x1p63)
		return INT64_MAX;
	if (v < -0x1p63)
		return INT64_MIN;
	return (int64_t)v;
}

static double get_f(DType t, const void *p, int64_t i);

/* Does integer type t hold v's integer part? */
static bool
int_holds(DType t, double v)
{
	double lo, hi; /* the range as open bounds, exact in a double */
	switch (t) {
	case DT_I8: lo = -129, hi = 128; break;
	case DT_U8: lo = -1, hi = 256; break;
	case DT_I16: lo = -32769, hi = 32768; break;
	case DT_U16: lo = -1, hi = 65536; break;
	case DT_I32: lo = -0x1p31 - 1, hi = 0x1p31; break;
	case DT_U32: lo = -1, hi = 0x1p32; break;
	case DT_I64: return v >= -0x1p63 && v < 0x1p63;
	default: return false;
	}
	return v > lo && v < hi;
}

static int64_t
get_i(DType t, const void *p, int64_t i)
{
	switch (t) {
	case DT_I8: return ((const int8_t *)p)[i];
	case DT_U8: case DT_BOOL: return ((const uint8_t *)p)[i];
	case DT_I16: return ((const int16_t *)p)[i];
	case DT_U16: return ((const uint16_t *)p)[i];
	case DT_I32: return ((const int32_t *)p)[i];
	case DT_U32: return ((const uint32_t *)p)[i];
	case DT_I64: return ((const int64_t *)p)[i];
	case DT_U64: return (int64_t)((const uint64_t *)p)[i];
	case DT_F32: case DT_F64: return to_int(get_f(t, p, i));
	default: return 0;
	}
}

static double
get_f(DType t, const void *p, int64_t i)
{
	switch (t) {
	case DT_F32: return ((const float *)p)[i];
	case DT_F64: return ((const double *)p)[i];
	case DT_U64: return (double)((const uint64_t *)p)[i];
	default: return (double)get_i(t, p, i);
	}
}

/* Store v, wrapping to the width of narrower integer types. */
static void
put_i(DType t, void *p, int64_t i, int64_t v)
{
	switch (t) {
	case DT_I8: case DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case DT_I16: case DT_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case DT_I32: case DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case DT_I64: case DT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case DT_F32: ((float *)p)[i] = (float)v; break;
	case DT_F64: ((double *)p)[i] = (double)v; break;
	default: break;
	}
}

static void
put_f(DType t, void *p, int64_t i, double v)
{
	if (t == DT_F32) {
		((float *)p)[i] = (float)v;
	} else if (t == DT_F64) {
		((double *)p)[i] = v;
	} else if (t == DT_BOOL) {
		((uint8_t *)p)[i] = v != 0;
	} else {
		put_i(t, p, i, to_int(v));
	}
}

/* --------------------------------------------------------- indexing */

static void
unravel(const Tensor *t, int64_t i, int64_t *c)
{
	for (int k = t->rank - 1; k >= 0; k--) {
		c[k] = i % t->dims[k];
		i /= t->dims[k];
	}
}

static int64_t
ravel(int rank, const int64_t *dims, const int64_t *c)
{
	int64_t i = 0;
	for (int k = 0; k < rank; k++)
		i = i * dims[k] + c[k];
	return i;
}

/* Flat index in t of the element broadcast to output coordinates c. */
static int64_t
bcast_index(const Tensor *o, const Tensor *t, const int64_t *c)
{
	int64_t cin[IR_MAX_RANK];
	for (int j = 0; j < t->rank; j++)
		cin[j] = t->dims[j] == 1 ? 0 : c[j + o->rank - t->rank];
	return ravel(t->rank, t->dims, cin);
}

/* An int list from input idx (known) or attribute name: the count, -1 if
 * absent, -2 if it does not fit buf's IR_MAX_RANK entries. */
static int
ints(Graph *g, NodeId n, const void **v, int idx, const char *name, int64_t *buf)
{
	Node *nd = ir_node(g, n);
	if (idx >= 0 && idx < nd->nin && nd->in[idx] != IR_NONE) {
		Tensor *t = ir_tensor(g, nd->in[idx]);
		int64_t cnt = ir_numel(t);
		if (cnt > IR_MAX_RANK)
			return -2;
		for (int i = 0; i < cnt; i++)
			buf[i] = get_i(t->dtype, v[idx], i);
		return (int)cnt;
	}
	const Attr *a = name ? ir_attr(g, n, name) : NULL;
	if (!a)
		return -1;
	if (a->type == ATTR_INT) {
		buf[0] = a->i;
		return 1;
	}
	if (a->type != ATTR_INTS || a->n > IR_MAX_RANK)
		return -2;
	memcpy(buf, a->is, sizeof *buf * a->n);
	return a->n;
}

static int64_t
norm(int64_t axis, int rank)
{
	return axis < 0 ? axis + rank : axis;
}

/* ------------------------------------------------------- arithmetic */

static bool
arith_i(Op op, const int64_t *a, int na, bool cmod, int64_t *r)
{
	uint64_t x = (uint64_t)a[0], y = na > 1 ? (uint64_t)a[1] : 0;
	switch (op) {
	case OP_Identity: case OP_Dropout: *r = a[0]; break;
	case OP_Neg: *r = (int64_t)(0 - x); break;
	case OP_Abs: *r = a[0] < 0 ? (int64_t)(0 - x) : a[0]; break;
	case OP_Sign: *r = (a[0] > 0) - (a[0] < 0); break;
	case OP_Relu: *r = a[0] > 0 ? a[0] : 0; break;
	case OP_Not: *r = !a[0]; break;
	case OP_Add: *r = (int64_t)(x + y); break;
	case OP_Sub: *r = (int64_t)(x - y); break;
	case OP_Mul: *r = (int64_t)(x * y); break;
	case OP_Div: case OP_Mod:
		/* onnxruntime uses C++ '/' and '%': truncation toward zero */
		if (a[1] == 0 || (a[0] == INT64_MIN && a[1] == -1))
			return false;
		if (op == OP_Div) {
			*r = a[0] / a[1];
		} else {
			*r = a[0] % a[1];
			/* fmod=0: the result takes the divisor's sign, as numpy */
			if (!cmod && *r && (*r < 0) != (a[1] < 0))
				*r += a[1];
		}
		break;
	case OP_Pow:
		if (a[1] < 0)
			return false;
		*r = 1;
		for (uint64_t b = x, e = y; e; e >>= 1, b *= b)
			if (e & 1)
				*r = (int64_t)((uint64_t)*r * b);
		break;
	case OP_Equal: *r = a[0] == a[1]; break;
	case OP_Less: *r = a[0] < a[1]; break;
	case OP_LessOrEqual: *r = a[0] <= a[1]; break;
	case OP_Greater: *r = a[0] > a[1]; break;
	case OP_GreaterOrEqual: *r = a[0] >= a[1]; break;
	case OP_And: *r = a[0] && a[1]; break;
	case OP_Or: *r = a[0] || a[1]; break;
	case OP_Xor: *r = !a[0] != !a[1]; break;
	case OP_Where: *r = a[0] ? a[1] : a[2]; break;
	case OP_Max: case OP_Min: case OP_Sum: case OP_Mean: {
		uint64_t s = x;
		*r = a[0];
		for (int k = 1; k < na; k++) {
			s += (uint64_t)a[k];
			if (op == OP_Max ? a[k] > *r : a[k] < *r)
				*r = a[k];
		}
		if (op == OP_Sum || op == OP_Mean)
			*r = op == OP_Sum ? (int64_t)s : (int64_t)s / na;
		break;
	}
	default:
		return false;
	}
	return true;
}

static bool
arith_f(Op op, const double *a, int na, bool cmod, double *r)
{
	switch (op) {
	case OP_Identity: case OP_Dropout: *r = a[0]; break;
	case OP_Neg: *r = -a[0]; break;
	case OP_Abs: *r = fabs(a[0]); break;
	case OP_Sign: *r = a[0] > 0 ? 1 : a[0] < 0 ? -1 : a[0]; break; /* NaN stays */
	case OP_Relu: *r = a[0] < 0 ? 0 : a[0]; break;
	case OP_Exp: *r = exp(a[0]); break;
	case OP_Log: *r = log(a[0]); break;
	case OP_Sqrt: *r = sqrt(a[0]); break;
	case OP_Reciprocal: *r = 1 / a[0]; break;
	case OP_Floor: *r = floor(a[0]); break;
	case OP_Ceil: *r = ceil(a[0]); break;
	case OP_Round: *r = nearbyint(a[0]); break;  /* half to even */
	case OP_IsNaN: *r = a[0] != a[0]; break;
	case OP_Add: *r = a[0] + a[1]; break;
	case OP_Sub: *r = a[0] - a[1]; break;
	case OP_Mul: *r = a[0] * a[1]; break;
	case OP_Div: *r = a[0] / a[1]; break;
	case OP_Pow: *r = pow(a[0], a[1]); break;
	case OP_Mod:
		if (!cmod)
			return false;      /* the spec requires fmod=1 for floats */
		*r = fmod(a[0], a[1]);
		break;
	case OP_Equal: *r = a[0] == a[1]; break;
	case OP_Less: *r = a[0] < a[1]; break;
	case OP_LessOrEqual: *r = a[0] <= a[1]; break;
	case OP_Greater: *r = a[0] > a[1]; break;
	case OP_GreaterOrEqual: *r = a[0] >= a[1]; break;
	case OP_Where: *r = a[0] != 0 ? a[1] : a[2]; break;
	case OP_Max: case OP_Min: case OP_Sum: case OP_Mean: {
		double s = a[0];
		*r = a[0];
		for (int k = 1; k < na; k++) {
			s += a[k];
			if (a[k] != a[k] || (op == OP_Max ? a[k] > *r : a[k] < *r))
				*r = a[k];      /* a NaN stays, as the kernels keep it */
		}
		if (op == OP_Sum || op == OP_Mean)
			*r = op == OP_Sum ? s : s / na;
		break;
	}
	default:
		return false;
	}
	return true;
}

/* Elementwise ops with broadcasting, Where included. */
static bool
eval_elementwise(Graph *g, NodeId n, const void **v, Tensor *o, void *ov)
{
	Node *nd = ir_node(g, n);
	Tensor *t[MAX_IN];
	DType cdt = ir_tensor(g, nd->in[nd->op == OP_Where ? 1 : 0])->dtype;
	if (!is_number(cdt) || !is_number(o->dtype) || nd->nin > 16)
		return false;
	for (int k = 0; k < nd->nin; k++) {
		if (nd->in[k] == IR_NONE)
			return false;
		t[k] = ir_tensor(g, nd->in[k]);
		if (!is_number(t[k]->dtype) || t[k]->rank > o->rank)
			return false;
		/* shapes from a hand-written IR are not trusted to broadcast */
		for (int j = 0; j < t[k]->rank; j++)
			if (t[k]->dims[j] != 1 && t[k]->dims[j] != o->dims[j + o->rank - t[k]->rank])
				return false;
	}
	/* an integer Pow with a float exponent, and a float32 Sum or Mean of
	 * more than two inputs (rounded after each addition at run time, once
	 * here), are the run-time kernels' */
	if (nd->op == OP_Pow && is_float(t[0]->dtype) != is_float(t[1]->dtype))
		return false;
	if ((nd->op == OP_Sum || nd->op == OP_Mean) && cdt == DT_F32 && nd->nin > 2)
		return false;
	bool cmod = ir_attr_int(g, n, "fmod", 0) != 0;
	int64_t c[IR_MAX_RANK], total = ir_numel(o);
	for (int64_t i = 0; i < total; i++) {
		unravel(o, i, c);
		if (is_float(cdt)) {
			double a[16], r;
			for (int k = 0; k < nd->nin; k++)
				a[k] = get_f(t[k]->dtype, v[k], bcast_index(o, t[k], c));
			if (!arith_f(nd->op, a, nd->nin, cmod, &r))
				return false;
			put_f(o->dtype, ov, i, r);
		} else {
			int64_t a[16], r;
			for (int k = 0; k < nd->nin; k++)
				a[k] = get_i(t[k]->dtype, v[k], bcast_index(o, t[k], c));
			if (!arith_i(nd->op, a, nd->nin, cmod, &r))
				return false;
			put_i(o->dtype, ov, i, r);
		}
	}
	return true;
}

static bool
eval_reduce(Graph *g, NodeId n, const void **v, Tensor *o, void *ov)
{
	Node *nd = ir_node(g, n);
	Op op = nd->op;
	Tensor *x = ir_tensor(g, nd->in[0]);
	if (!is_number(x->dtype) || op == OP_ArgMax || op == OP_ArgMin)
		return false;
	int64_t ax[IR_MAX_RANK], kd[IR_MAX_RANK], c[IR_MAX_RANK];
	int cnt = ints(g, n, v, 1, "axes", ax);
	if (cnt == -2)
		return false;
	unsigned mask = 0;
	if (cnt > 0)
		for (int i = 0; i < cnt; i++) {
			int64_t a = norm(ax[i], x->rank);
			if (a < 0 || a >= x->rank)
				return false;
			mask |= 1u << a;
		}
	else if (!ir_attr_int(g, n, "noop_with_empty_axes", 0))
		mask = (1u << x->rank) - 1;
	for (int k = 0; k < x->rank; k++)
		kd[k] = mask & 1u << k ? 1 : x->dims[k];
	int64_t on = ir_numel(o), xn = ir_numel(x);
	double *acc = ir_alloc(&g->arena, sizeof *acc * (on + 1));
	bool *seen = ir_alloc(&g->arena, on + 1);
	/* doubles hold the small integers of shape arithmetic exactly (larger
	 * integers are left to run time, below) */
	for (int64_t i = 0; i < xn; i++) {
		unravel(x, i, c);
		for (int k = 0; k < x->rank; k++)
			if (mask & 1u << k)
				c[k] = 0;
		int64_t j = ravel(x->rank, kd, c);
		if (j >= on)
			return false;
		double e = get_f(x->dtype, v[0], i);
		double *r = &acc[j];
		switch (op) {
		case OP_ReduceSum: case OP_ReduceMean: *r += e; break;
		case OP_ReduceSumSquare: *r += e * e; break;
		case OP_ReduceProd: *r = seen[j] ? *r * e : e; break;
		case OP_ReduceMax: *r = !seen[j] || e != e || e > *r ? e : *r; break; /* NaN stays */
		case OP_ReduceMin: *r = !seen[j] || e != e || e < *r ? e : *r; break;
		default: return false;
		}
		/* an integer past 2^53 is no longer exact in a double */
		if (!is_float(x->dtype) && !(fabs(*r) < 0x1p53 && fabs(e) < 0x1p53))
			return false;
		seen[j] = true;
	}
	for (int64_t j = 0; j < on; j++) {
		if (op == OP_ReduceMean)
			acc[j] = on ? acc[j] / (double)(xn / on) : 0;
		if ((op == OP_ReduceMax || op == OP_ReduceMin) && !seen[j])
			return false;      /* empty reduction: no identity to give */
		if (op == OP_ReduceProd && !seen[j])
			acc[j] = 1;
		put_f(o->dtype, ov, j, acc[j]);
	}
	return true;
}

/* ------------------------------------------------------ data movement */

/*
 * Ops that copy elements: for each element of output oi, find the input and
 * the flat index it comes from.
 */
static bool
eval_move(Graph *g, NodeId n, const void **v, int oi, Tensor *o, void *ov)
{
	Node *nd = ir_node(g, n);
	Op op = nd->op;
	Tensor *x = ir_tensor(g, nd->in[0]);
	size_t es = ir_dtype_size(o->dtype);
	int64_t p[IR_MAX_RANK], start[IR_MAX_RANK], step[IR_MAX_RANK];
	int64_t c[IR_MAX_RANK], cin[IR_MAX_RANK], axis = norm(ir_attr_int(g, n, "axis", 0), x->rank);
	int64_t off = 0;
	if ((op == OP_Split || op == OP_Concat || op == OP_Gather) && (axis < 0 || axis >= x->rank))
		return false;
	if ((op == OP_Expand && o->rank < x->rank) || (op != OP_Gather && o->rank != x->rank &&
	    op != OP_Expand))
		return false;
	switch (op) {
	case OP_Transpose: {
		int cnt = ints(g, n, v, -1, "perm", p);
		for (int k = 0; k < x->rank; k++) {
			p[k] = cnt == x->rank ? p[k] : x->rank - 1 - k;
			if (p[k] < 0 || p[k] >= x->rank)
				return false;
		}
		break;
	}
	case OP_Tile:
		for (int k = 0; k < x->rank; k++)
			if (x->dims[k] == 0)
				return false;
		break;
	case OP_Slice: {
		int64_t st[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
		int ns = ints(g, n, v, 1, "starts", st);
		int na = ints(g, n, v, 3, "axes", ax);
		int np = ints(g, n, v, 4, NULL, sp);
		if (ns < 0 || na == -2 || np == -2)
			return false;
		for (int k = 0; k < x->rank; k++)
			start[k] = 0, step[k] = 1;
		for (int i = 0; i < ns; i++) {
			int64_t a = na >= 0 ? norm(ax[i], x->rank) : i;
			if (a < 0 || a >= x->rank)
				return false;
			int64_t d = x->dims[a];
			step[a] = np >= 0 ? sp[i] : 1;
			int64_t s = st[i] < 0 ? st[i] + d : st[i], hi = step[a] > 0 ? d : d - 1;
			start[a] = s < 0 ? 0 : s > hi ? hi : s;
		}
		break;
	}
	case OP_Split:
		for (int j = 0; j < oi; j++)
			if (nd->out[j] != IR_NONE)
				off += ir_tensor(g, nd->out[j])->dims[axis];
		break;
	case OP_Gather:
		if (!is_number(ir_tensor(g, nd->in[1])->dtype))
			return false;
		break;
	default:
		break;
	}
	int64_t total = ir_numel(o);
	for (int64_t i = 0; i < total; i++) {
		const Tensor *src = x;
		const void *sv = v[0];
		unravel(o, i, c);
		memcpy(cin, c, sizeof c);
		switch (op) {
		case OP_Transpose:
			for (int k = 0; k < x->rank; k++)
				cin[p[k]] = c[k];
			break;
		case OP_Slice:
			for (int k = 0; k < x->rank; k++)
				cin[k] = start[k] + c[k] * step[k];
			break;
		case OP_Split:
			cin[axis] += off;
			break;
		case OP_Tile:
			for (int k = 0; k < x->rank; k++)
				cin[k] = c[k] % x->dims[k];
			break;
		case OP_Expand: {
			int sh = o->rank - x->rank;
			for (int k = 0; k < x->rank; k++)
				cin[k] = x->dims[k] == 1 ? 0 : c[k + sh];
			break;
		}
		case OP_Concat:
			for (int j = 0; j < nd->nin; j++) {
				if (nd->in[j] == IR_NONE)
					continue;
				src = ir_tensor(g, nd->in[j]);
				sv = v[j];
				if (cin[axis] < src->dims[axis])
					break;
				cin[axis] -= src->dims[axis];
			}
			break;
		case OP_Gather: {
			Tensor *it = ir_tensor(g, nd->in[1]);
			int q = it->rank;
			if (axis + q > o->rank)
				return false;
			for (int m = 0; m < q; m++)
				if (c[axis + m] >= it->dims[m])
					return false;
			int64_t k = get_i(it->dtype, v[1], ravel(q, it->dims, c + axis));
			int64_t d = x->dims[axis];
			if (k < 0)
				k += d;
			if (k < 0 || k >= d)
				return false;
			cin[axis] = k;
			for (int m = axis + 1; m < x->rank; m++)
				cin[m] = c[m + q - 1];
			break;
		}
		default:
			return false;
		}
		/* every source index is checked, whatever shapes the IR claims */
		for (int k = 0; k < src->rank; k++)
			if (cin[k] < 0 || cin[k] >= src->dims[k])
				return false;
		if (ir_dtype_size(src->dtype) != (int)es)
			return false;
		memcpy((char *)ov + i * es, (const char *)sv + ravel(src->rank, src->dims, cin) * es, es);
	}
	return true;
}

/* ------------------------------------------------------ value sources */

static bool
eval_constant(Graph *g, NodeId n, Tensor *o)
{
	const Node *nd = ir_node(g, n);
	if (nd->nattr != 1)
		return false;
	const Attr *a = &nd->attr[0];
	void *val;
	switch (a->type) {
	case ATTR_TENSOR:
		return (o->value = (void *)ir_value(g, a->t)) != NULL;
	case ATTR_FLOAT:
		val = ir_alloc(&g->arena, sizeof(float));
		*(float *)val = a->f;
		break;
	case ATTR_INT:
		val = ir_alloc(&g->arena, sizeof(int64_t));
		*(int64_t *)val = a->i;
		break;
	case ATTR_FLOATS: case ATTR_INTS: {
		size_t sz = a->type == ATTR_FLOATS ? sizeof(float) : sizeof(int64_t);
		val = ir_alloc(&g->arena, sz * a->n + 1);
		if (a->n)
			memcpy(val, a->type == ATTR_FLOATS ? (void *)a->fs : (void *)a->is, sz * a->n);
		break;
	}
	default:
		return false;
	}
	o->value = val;
	return true;
}

static bool
eval_range(Graph *g, Node *nd, const void **v, Tensor *o, void *ov)
{
	DType dt = o->dtype;
	if (!is_number(dt) || ir_tensor(g, nd->in[0])->dtype != dt || ir_tensor(g, nd->in[2])->dtype != dt)
		return false;
	int64_t total = ir_numel(o);
	for (int64_t i = 0; i < total; i++) {
		if (is_float(dt))
			put_f(dt, ov, i, get_f(dt, v[0], 0) + (double)i * get_f(dt, v[2], 0));
		else
			put_i(dt, ov, i, (int64_t)((uint64_t)get_i(dt, v[0], 0) +
			    (uint64_t)i * (uint64_t)get_i(dt, v[2], 0)));
	}
	return true;
}

/* ------------------------------------------------ integer division */

/*
 * An integer Div or Mod whose divisor tapc knows: a zero divisor, or the
 * type's minimum divided by -1, traps (SIGFPE) in C.  The kernels step
 * around both at run time (0 and a wrapped minimum, as numpy), but a model
 * that does it on values known at compile time is refused, naming the node.
 */
bool
ir_check_division(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	if ((nd->op != OP_Div && nd->op != OP_Mod) || nd->nin < 2 || nd->in[0] == IR_NONE ||
	    nd->in[1] == IR_NONE || nd->nout < 1 || nd->out[0] == IR_NONE)
		return true;
	Tensor *a = ir_tensor(g, nd->in[0]), *b = ir_tensor(g, nd->in[1]);
	Tensor *o = ir_tensor(g, nd->out[0]);
	if (!is_number(b->dtype) || is_float(b->dtype) || b->dtype == DT_BOOL || ir_numel(o) == 0)
		return true;
	const void *vb = ir_value(g, nd->in[1]);
	if (!vb)
		return true;
	for (int64_t i = 0; i < ir_numel(b); i++)
		if (get_i(b->dtype, vb, i) == 0) {
			diag_node(g, n, "integer %s by zero: element %lld of input 1 is 0",
			    nd->op == OP_Div ? "division" : "modulo", (long long)i);
			return false;
		}
	int64_t min = b->dtype == DT_I8 ? INT8_MIN : b->dtype == DT_I16 ? INT16_MIN :
	    b->dtype == DT_I32 ? INT32_MIN : b->dtype == DT_I64 ? INT64_MIN : 0;
	const void *va = min ? ir_value(g, nd->in[0]) : NULL;
	if (!va || a->dtype != b->dtype || o->rank < a->rank || o->rank < b->rank ||
	    ir_numel(o) > IR_EVAL_MAX_ELEMS)
		return true;
	int64_t c[IR_MAX_RANK];
	for (int64_t i = 0; i < ir_numel(o); i++) {
		unravel(o, i, c);
		if (get_i(a->dtype, va, bcast_index(o, a, c)) == min &&
		    get_i(b->dtype, vb, bcast_index(o, b, c)) == -1) {
			diag_node(g, n, "integer %s overflows: %s's minimum %lld by -1 (output element %lld)",
			    nd->op == OP_Div ? "division" : "modulo", ir_dtype_name(a->dtype),
			    (long long)min, (long long)i);
			return false;
		}
	}
	return true;
}

/* ----------------------------------------------------------- entry */

bool
ir_eval_node(Graph *g, NodeId n)
{
	Node *nd = ir_node(g, n);
	Op op = nd->op;
	const void *v[MAX_IN];
	void *ov[IR_MAX_RANK * 2];
	if (nd->nin > MAX_IN || nd->nout > (int)(sizeof ov / sizeof ov[0]) || nd->nout < 1)
		return false;
	for (int j = 0; j < nd->nout; j++) {
		if (nd->out[j] == IR_NONE)
			continue;
		Tensor *o = ir_tensor(g, nd->out[j]);
		if (o->rank < 0 || ir_numel(o) > IR_EVAL_MAX_ELEMS || ir_dtype_size(o->dtype) == 0)
			return false;
	}
	Tensor *o = nd->out[0] != IR_NONE ? ir_tensor(g, nd->out[0]) : NULL;
	if (!o)
		return false;
	if (op == OP_Constant)
		return eval_constant(g, n, o);
	if (op == OP_If) { /* a known condition picks its branch's known values */
		const uint8_t *c = ir_value(g, nd->in[0]);
		int k = nd->nout;
		for (int j = 0; c && j < k; j++) {
			TensorId src = nd->in[1 + (*c ? 0 : k) + j];
			const void *v = nd->out[j] != IR_NONE ? ir_value(g, src) : NULL;
			if (nd->out[j] != IR_NONE && !v)
				return false;
		}
		for (int j = 0; c && j < k; j++)
			if (nd->out[j] != IR_NONE)
				ir_tensor(g, nd->out[j])->value = (void *)ir_value(g, nd->in[1 + (*c ? 0 : k) + j]);
		return c != NULL;
	}
	Tensor *x = nd->nin ? ir_tensor(g, nd->in[0]) : NULL;
	bool shape_only = op == OP_Shape || op == OP_Size;
	for (int i = 0; i < nd->nin && !shape_only; i++) {
		if (nd->in[i] == IR_NONE)
			continue;
		/* parameters stay parameters: folding is for shapes and masks */
		Tensor *t = ir_tensor(g, nd->in[i]);
		if (t->kind == TK_WEIGHT && (is_float(t->dtype) || t->dtype == DT_F16 ||
		    t->dtype == DT_BF16))
			return false;
		if (!(v[i] = ir_value(g, nd->in[i])))
			return false;
	}
	for (int j = 0; j < nd->nout; j++)
		if (nd->out[j] != IR_NONE) {
			Tensor *t = ir_tensor(g, nd->out[j]);
			ov[j] = ir_alloc(&g->arena, (size_t)ir_nbytes(t) + 1);
		}
	bool ok = true;
	switch (op) {
	case OP_Shape: {
		int64_t s = ir_attr_int(g, n, "start", 0);
		s = s < 0 ? s + x->rank : s;
		s = s < 0 ? 0 : s > x->rank ? x->rank : s;
		if (o->dtype != DT_I64 || s + ir_numel(o) > x->rank)
			return false;
		for (int64_t i = 0; i < ir_numel(o); i++)
			((int64_t *)ov[0])[i] = x->dims[s + i];
		break;
	}
	case OP_Size:
		if (o->dtype != DT_I64 || ir_numel(o) != 1)
			return false;
		*(int64_t *)ov[0] = ir_numel(x);
		break;
	case OP_ConstantOfShape: {
		const Attr *a = ir_attr(g, n, "value");
		const void *e = a && a->type == ATTR_TENSOR ? ir_value(g, a->t) : NULL;
		size_t es = ir_dtype_size(o->dtype);
		if (a && (!e || ir_tensor(g, a->t)->dtype != o->dtype))
			return false;
		for (int64_t i = 0; e && i < ir_numel(o); i++)
			memcpy((char *)ov[0] + i * es, e, es);
		break;
	}
	case OP_Range:
		ok = eval_range(g, nd, v, o, ov[0]);
		break;
	case OP_Cast: case OP_CastLike: {
		DType st = x->dtype;
		if (!is_number(st) || !is_number(o->dtype) || ir_numel(x) != ir_numel(o))
			return false;
		for (int64_t i = 0; i < ir_numel(o); i++)
			if (is_float(st)) {
				double f = get_f(st, v[0], i);
				/* NaN, an infinity or a value the integer type cannot
				 * hold: the spec leaves it open, so the run-time
				 * kernel's answer, not a second one from here */
				if (!is_float(o->dtype) && o->dtype != DT_BOOL && !int_holds(o->dtype, f))
					return false;
				put_f(o->dtype, ov[0], i, f);
			} else {
				put_i(o->dtype, ov[0], i, get_i(st, v[0], i));
			}
		break;
	}
	case OP_Identity: case OP_Reshape: case OP_Flatten: case OP_Squeeze: case OP_Unsqueeze:
	case OP_Dropout:
		/* same elements, new shape */
		if (ir_nbytes(o) != ir_nbytes(x) || (nd->nout > 1 && nd->out[1] != IR_NONE))
			return false;
		memcpy(ov[0], v[0], (size_t)ir_nbytes(o));
		break;
	case OP_Transpose: case OP_Slice: case OP_Gather: case OP_Concat: case OP_Expand:
	case OP_Tile:
		ok = eval_move(g, n, v, 0, o, ov[0]);
		break;
	case OP_Trilu: {
		/* keep (.., i, j) where j - i >= k (upper) or <= k (lower), else zero */
		int64_t k = nd->nin > 1 && nd->in[1] != IR_NONE ? get_i(ir_tensor(g, nd->in[1])->dtype, v[1], 0) : 0;
		bool upper = ir_attr_int(g, n, "upper", 1) != 0;
		size_t es = ir_dtype_size(o->dtype);
		if (o->rank < 2 || ir_numel(o) != ir_numel(x))
			return false;
		int64_t rows = o->dims[o->rank - 2], cols = o->dims[o->rank - 1];
		for (int64_t e = 0; e < ir_numel(o); e++) {
			int64_t i = e / cols % rows, j = e % cols;
			bool keep = upper ? j - i >= k : j - i <= k;
			if (keep)
				memcpy((char *)ov[0] + e * es, (const char *)v[0] + e * es, es);
		}
		break;
	}
	case OP_Split:
		for (int j = 0; ok && j < nd->nout; j++)
			if (nd->out[j] != IR_NONE)
				ok = eval_move(g, n, v, j, ir_tensor(g, nd->out[j]), ov[j]);
		break;
	default:
		switch (ir_op_kind(op)) {
		case OPK_UNARY: case OPK_BINARY: case OPK_VARIADIC:
			ok = eval_elementwise(g, n, v, o, ov[0]);
			break;
		case OPK_REDUCE:
			ok = eval_reduce(g, n, v, o, ov[0]);
			break;
		default:
			return false;
		}
	}
	if (!ok)
		return false;
	for (int j = 0; j < nd->nout; j++)
		if (nd->out[j] != IR_NONE)
			ir_tensor(g, nd->out[j])->value = ov[j];
	return true;
}
