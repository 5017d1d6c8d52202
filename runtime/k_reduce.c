/*
 * k_reduce.c - reductions and normalizations: ReduceMean/Sum/Max/Min/Prod/
 * SumSquare/L1/L2/LogSum/LogSumExp, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, LayerNormalization,
 * BatchNormalization, InstanceNormalization, LRN and
 * MeanVarianceNormalization.
 *
 * Needs: output dtypes, shapes and buffers set by tapc.  Reductions first
 * merge neighbouring axes that are both reduced or both kept, then walk the
 * input once in memory order, one contiguous row (the innermost merged
 * axis) at a time: a reduced row folds into one output element, a kept row
 * into a row of outputs.  The transformer hot paths (reduce, Softmax and
 * LayerNormalization over the last axis, f32) are per-row loops written so
 * the compiler vectorizes them: sums use 8 partial accumulators, and
 * Softmax uses a polynomial expf that vectorizes (taprt_exp_f32, internal.h;
 * libm's does not).  A contiguous f32 softmax row has an AVX2 + FMA kernel
 * too (softmax_row_avx2, chosen by taprt_isa).
 *
 * Types: reductions and Arg* take every integer and float type (LogSumExp
 * f32 and f64); Softmax, the losses and the normalizations take f32 and f64.
 */
#include <stdbool.h>
#include <string.h>
#include <tgmath.h>

#include "runtime/internal.h"
#include "runtime/vec8.h"

#define FLOAT_TYPES(X, ...)                                                  \
	X(TAPRT_F32, float, __VA_ARGS__) X(TAPRT_F64, double, __VA_ARGS__)
#define NUM_TYPES(X, ...)                                                    \
	FLOAT_TYPES(X, __VA_ARGS__)                                          \
	X(TAPRT_I8, int8_t, __VA_ARGS__) X(TAPRT_I16, int16_t, __VA_ARGS__)    \
	X(TAPRT_I32, int32_t, __VA_ARGS__) X(TAPRT_I64, int64_t, __VA_ARGS__)  \
	X(TAPRT_U8, uint8_t, __VA_ARGS__) X(TAPRT_U16, uint16_t, __VA_ARGS__)  \
	X(TAPRT_U32, uint32_t, __VA_ARGS__) X(TAPRT_U64, uint64_t, __VA_ARGS__)

static int64_t
prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

/* Sums with 8 independent accumulators, so -O3 vectorizes them without
 * reassociating floating point behind our back. */
static inline float
sum_f32(const float *x, int64_t len)
{
	float acc[8] = {0};
	int64_t i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += x[i + j];
	float s = 0;
	for (; i < len; i++)
		s += x[i];
	return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
	    ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* sum of (x - c)^2 */
static inline float
sumsq_f32(const float *x, int64_t len, float c)
{
	float acc[8] = {0};
	int64_t i = 0;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += (x[i + j] - c) * (x[i + j] - c);
	float s = 0;
	for (; i < len; i++)
		s += (x[i] - c) * (x[i] - c);
	return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
	    ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static inline float
max_f32(const float *x, int64_t len)
{
	float acc[8];
	int64_t i = 0;
	for (int j = 0; j < 8; j++)
		acc[j] = -INFINITY;
	for (; i + 8 <= len; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
	float m = -INFINITY;
	for (; i < len; i++)
		m = x[i] > m ? x[i] : m;
	for (int j = 0; j < 8; j++)
		m = acc[j] > m ? acc[j] : m;
	return m;
}

/* --------------------------------------------------------------- Reduce* */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_SUMSQ, R_L1, R_L2, R_LOGSUM, R_LSE };

/* The input as merged groups of axes: rows of len elements in memory
 * order; ystep[g] is the output step of outer group g (0 if reduced). */
typedef struct {
	int ng;                         /* outer groups */
	int64_t dim[TAPRT_MAX_RANK], ystep[TAPRT_MAX_RANK];
	int64_t len;                    /* innermost group */
	bool inner_reduced;
	int64_t rows;
	int64_t count;                  /* elements folded into each output */
} rwalk;

/* Output offset of the next row: advance the outer index vector. */
static inline int64_t
next_row(const rwalk *w, int64_t *idx, int64_t yo)
{
	for (int g = w->ng - 1; g >= 0; g--) {
		yo += w->ystep[g];
		if (++idx[g] < w->dim[g])
			return yo;
		yo -= w->ystep[g] * w->dim[g];
		idx[g] = 0;
	}
	return yo;
}

/*
 * A typed reduction.  Outputs start at the op's identity; each row folds
 * in (FOLD(acc, v) combines, SQ squares for SumSquare).  Float rows of a
 * sum go through sum_f32.  Max and Min keep a NaN (numpy's, onnx's
 * reference; the elementwise Max and Min do too).  L1 sums magnitudes, L2
 * is the root of SumSquare's sum and LogSum the log of Sum's, each taken
 * in double and stored in the type (onnx's reference: numpy's, then
 * astype).
 */
#define REDUCE_T(D, T, ...)                                                  \
	static void                                                          \
	reduce_##D(const taprt_tensor *X, taprt_tensor *Y, int op, const rwalk *w, \
	    T lowest, T highest)                                             \
	{                                                                    \
		const T *x = X->data;                                        \
		T *y = Y->data;                                              \
		T init = op == R_MAX ? lowest : op == R_MIN ? highest :      \
		    op == R_PROD ? 1 : 0;                                    \
		for (int64_t i = 0; i < Y->numel; i++)                       \
			y[i] = init;                                         \
		int64_t idx[TAPRT_MAX_RANK] = {0}, yo = 0, len = w->len;     \
		for (int64_t row = 0; row < w->rows; row++, x += len) {      \
			T *yr = y + yo;                                      \
			if (w->inner_reduced) {                              \
				T a = *yr;                                   \
				switch (op) {                                \
				case R_SUM: case R_MEAN: case R_LOGSUM:      \
					if (D == TAPRT_F32) {                \
						a += (T)sum_f32((const float *)x, len); \
						break;                       \
					}                                    \
					for (int64_t i = 0; i < len; i++)    \
						a += x[i];                   \
					break;                               \
				case R_SUMSQ: case R_L2:                     \
					for (int64_t i = 0; i < len; i++)    \
						a += x[i] * x[i];            \
					break;                               \
				case R_L1:                                   \
					for (int64_t i = 0; i < len; i++)    \
						a += x[i] > 0 ? x[i] : -x[i]; \
					break;                               \
				case R_PROD:                                 \
					for (int64_t i = 0; i < len; i++)    \
						a *= x[i];                   \
					break;                               \
				case R_MAX:                                  \
					for (int64_t i = 0; i < len; i++)    \
						a = x[i] > a || x[i] != x[i] ? x[i] : a; \
					break;                               \
				case R_MIN:                                  \
					for (int64_t i = 0; i < len; i++)    \
						a = x[i] < a || x[i] != x[i] ? x[i] : a; \
					break;                               \
				}                                            \
				*yr = a;                                     \
			} else {                                             \
				switch (op) {                                \
				case R_SUM: case R_MEAN: case R_LOGSUM:      \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] += x[i];               \
					break;                               \
				case R_SUMSQ: case R_L2:                     \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] += x[i] * x[i];        \
					break;                               \
				case R_L1:                                   \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] += x[i] > 0 ? x[i] : -x[i]; \
					break;                               \
				case R_PROD:                                 \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] *= x[i];               \
					break;                               \
				case R_MAX:                                  \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] = x[i] > yr[i] || x[i] != x[i] ? x[i] : yr[i]; \
					break;                               \
				case R_MIN:                                  \
					for (int64_t i = 0; i < len; i++)    \
						yr[i] = x[i] < yr[i] || x[i] != x[i] ? x[i] : yr[i]; \
					break;                               \
				}                                            \
			}                                                    \
			yo = next_row(w, idx, yo);                           \
		}                                                            \
		if (op == R_MEAN && w->count > 0)                            \
			for (int64_t i = 0; i < Y->numel; i++)               \
				y[i] = (T)(y[i] / (T)w->count);              \
		if (op == R_L2 || op == R_LOGSUM)                            \
			for (int64_t i = 0; i < Y->numel; i++)               \
				y[i] = (T)(op == R_L2 ? sqrt((double)y[i]) : log((double)y[i])); \
	}
NUM_TYPES(REDUCE_T, _)

/*
 * LogSumExp: log(sum(exp(x - m))) + m, m the largest finite element of
 * each output's (0 when none: then the sum itself overflows to inf or
 * underflows to 0 as it should), summed in double (m and the sums in the
 * thread's scratch); a NaN anywhere gives NaN.  onnx's reference takes m
 * the same way.
 */
#define LSE_T(D, T)                                                          \
	static int                                                           \
	lse_##D(const taprt_tensor *X, taprt_tensor *Y, const rwalk *w)      \
	{                                                                    \
		double *m = taprt_scratch(Y->numel * 2 * (int64_t)sizeof *m), *s; \
		if (!m)                                                      \
			return -1;                                           \
		s = m + Y->numel;                                            \
		T *y = Y->data;                                              \
		for (int64_t i = 0; i < Y->numel; i++) {                     \
			m[i] = -INFINITY;                                    \
			s[i] = 0;                                            \
		}                                                            \
		for (int pass = 0; pass < 2; pass++) {                       \
			const T *x = X->data;                                \
			int64_t idx[TAPRT_MAX_RANK] = {0}, yo = 0, len = w->len; \
			for (int64_t row = 0; row < w->rows; row++, x += len) { \
				for (int64_t i = 0; i < len; i++) {          \
					int64_t j = yo + (w->inner_reduced ? 0 : i); \
					double v = x[i];                     \
					if (pass == 0 && isfinite(v) && v > m[j]) \
						m[j] = v;                    \
					else if (pass == 1)                  \
						s[j] += exp(v - m[j]);       \
				}                                            \
				yo = next_row(w, idx, yo);                   \
			}                                                    \
			for (int64_t i = 0; pass == 0 && i < Y->numel; i++)  \
				m[i] = isfinite(m[i]) ? m[i] : 0;            \
		}                                                            \
		for (int64_t i = 0; i < Y->numel; i++)                       \
			y[i] = (T)(log(s[i]) + m[i]);                        \
		return 0;                                                    \
	}
LSE_T(TAPRT_F32, float)
LSE_T(TAPRT_F64, double)

static void
reduce(taprt_ctx *cx, const taprt_node *n, int op, const char *name)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	int rank = X->rank;
	int64_t axes[TAPRT_MAX_RANK];
	bool from_input = n->opset >= 18 || (op == R_SUM && n->opset >= 13);
	int na = taprt_ints(n, from_input ? 1 : -1, "axes", axes, TAPRT_MAX_RANK);
	bool red[TAPRT_MAX_RANK];
	if (na > TAPRT_MAX_RANK) {
		taprt_fail(cx, "node '%s' (%s): %d axes for rank %d", n->name, name, na, rank);
		return;
	}
	/* no axes and noop_with_empty_axes: the input, squared for SumSquare
	 * (onnx's reference), which the walk below does over no reduced axis */
	bool noop = na <= 0 && taprt_attr_int(n, "noop_with_empty_axes", 0);
	if (noop && op != R_SUMSQ) {
		if (X->numel)
			memcpy(Y->data, X->data, (size_t)X->numel * taprt_dtype_size(X->dtype));
		return;
	}
	for (int i = 0; i < rank; i++)
		red[i] = na <= 0 && !noop;
	for (int i = 0; i < na; i++) {
		int a = taprt_axis(axes[i], rank);
		if (a < 0 || a >= rank) {
			taprt_fail(cx, "node '%s' (%s): axis %lld out of range for rank %d",
			    n->name, name, (long long)axes[i], rank);
			return;
		}
		red[a] = true;
	}

	/* merge axes; size-1 axes vanish */
	int64_t gdim[TAPRT_MAX_RANK];
	bool gred[TAPRT_MAX_RANK];
	int ng = 0;
	rwalk w = {.count = 1};
	for (int i = 0; i < rank; i++) {
		if (red[i])
			w.count *= X->dims[i];
		if (X->dims[i] == 1)
			continue;
		if (ng > 0 && gred[ng - 1] == red[i]) {
			gdim[ng - 1] *= X->dims[i];
			continue;
		}
		gdim[ng] = X->dims[i];
		gred[ng++] = red[i];
	}
	if (ng == 0) {
		gdim[0] = 1;
		gred[0] = false;
		ng = 1;
	}
	w.ng = ng - 1;
	w.len = gdim[ng - 1];
	w.inner_reduced = gred[ng - 1];
	w.rows = X->numel / (w.len ? w.len : 1);
	if (X->numel == 0)
		w.rows = 0;
	int64_t ys = w.inner_reduced ? 1 : w.len;
	for (int g = ng - 2; g >= 0; g--) {
		w.dim[g] = gdim[g];
		w.ystep[g] = gred[g] ? 0 : ys;
		if (!gred[g])
			ys *= gdim[g];
	}

	if (op == R_LSE) {
		int rc = X->dtype == TAPRT_F32 ? lse_TAPRT_F32(X, Y, &w) :
		    X->dtype == TAPRT_F64 ? lse_TAPRT_F64(X, Y, &w) : 1;
		if (rc > 0)
			taprt_bad_dtype(cx, n, name, X->dtype);
		else if (rc < 0)
			taprt_fail(cx, "node '%s' (%s): out of memory", n->name, name);
		return;
	}
	switch (X->dtype) {
	case TAPRT_F32: reduce_TAPRT_F32(X, Y, op, &w, -INFINITY, INFINITY); return;
	case TAPRT_F64: reduce_TAPRT_F64(X, Y, op, &w, -INFINITY, INFINITY); return;
	case TAPRT_I8: reduce_TAPRT_I8(X, Y, op, &w, INT8_MIN, INT8_MAX); return;
	case TAPRT_I16: reduce_TAPRT_I16(X, Y, op, &w, INT16_MIN, INT16_MAX); return;
	case TAPRT_I32: reduce_TAPRT_I32(X, Y, op, &w, INT32_MIN, INT32_MAX); return;
	case TAPRT_I64: reduce_TAPRT_I64(X, Y, op, &w, INT64_MIN, INT64_MAX); return;
	case TAPRT_U8: reduce_TAPRT_U8(X, Y, op, &w, 0, UINT8_MAX); return;
	case TAPRT_U16: reduce_TAPRT_U16(X, Y, op, &w, 0, UINT16_MAX); return;
	case TAPRT_U32: reduce_TAPRT_U32(X, Y, op, &w, 0, UINT32_MAX); return;
	case TAPRT_U64: reduce_TAPRT_U64(X, Y, op, &w, 0, UINT64_MAX); return;
	}
	taprt_bad_dtype(cx, n, name, X->dtype);
}

void
taprt_op_ReduceMean(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_MEAN, "ReduceMean");
}

void
taprt_op_ReduceSum(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_SUM, "ReduceSum");
}

void
taprt_op_ReduceMax(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_MAX, "ReduceMax");
}

void
taprt_op_ReduceMin(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_MIN, "ReduceMin");
}

void
taprt_op_ReduceProd(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_PROD, "ReduceProd");
}

void
taprt_op_ReduceSumSquare(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_SUMSQ, "ReduceSumSquare");
}

void
taprt_op_ReduceL1(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_L1, "ReduceL1");
}

void
taprt_op_ReduceL2(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_L2, "ReduceL2");
}

void
taprt_op_ReduceLogSum(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_LOGSUM, "ReduceLogSum");
}

void
taprt_op_ReduceLogSumExp(taprt_ctx *cx, const taprt_node *n)
{
	reduce(cx, n, R_LSE, "ReduceLogSumExp");
}

/* --------------------------------------------------------- ArgMax/ArgMin */

/* Index of the best element along the axis: x viewed as [outer, len,
 * inner].  Ties keep the first index unless select_last_index. */
#define ARG_T(D, T, ...)                                                     \
	static void                                                          \
	arg_##D(const void *xv, int64_t *y, int64_t outer, int64_t len,     \
	    int64_t inner, bool max, bool last)                              \
	{                                                                    \
		const T *x = xv;                                             \
		for (int64_t o = 0; o < outer; o++, x += len * inner)        \
			for (int64_t j = 0; j < inner; j++) {                \
				T best = x[j];                               \
				int64_t bi = 0;                              \
				for (int64_t k = 1; k < len; k++) {          \
					T v = x[k * inner + j];              \
					bool take = max ? v > best : v < best; \
					if (take || (last && v == best)) {   \
						best = v;                    \
						bi = k;                      \
					}                                    \
				}                                            \
				y[o * inner + j] = bi;                       \
			}                                                    \
	}
NUM_TYPES(ARG_T, _)

#define ARG_CASE(D, T, ...) case D: arg_##D(X->data, y, outer, len, inner, max, last); return;

static void
arg(taprt_ctx *cx, const taprt_node *n, bool max, const char *name)
{
	const taprt_tensor *X = n->in[0];
	int64_t *y = n->out[0]->data;
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), X->rank);
	bool last = taprt_attr_int(n, "select_last_index", 0) != 0;
	if (axis < 0 || axis >= (X->rank ? X->rank : 1)) {
		taprt_fail(cx, "node '%s' (%s): axis out of range for rank %d", n->name, name,
		    X->rank);
		return;
	}
	int64_t outer = prod(X->dims, 0, axis);
	int64_t len = X->rank ? X->dims[axis] : 1;
	int64_t inner = X->rank ? prod(X->dims, axis + 1, X->rank) : 1;
	if (len == 0 || X->numel == 0)
		return;
	switch (X->dtype) {
	NUM_TYPES(ARG_CASE, _)
	}
	taprt_bad_dtype(cx, n, name, X->dtype);
}

void
taprt_op_ArgMax(taprt_ctx *cx, const taprt_node *n)
{
	arg(cx, n, true, "ArgMax");
}

void
taprt_op_ArgMin(taprt_ctx *cx, const taprt_node *n)
{
	arg(cx, n, false, "ArgMin");
}

/* ---------------------------------------------------- Softmax/LogSoftmax */

#ifdef TAPRT_VEC8

typedef unsigned v8w __attribute__((vector_size(32)));

/*
 * e^x in 8 lanes for x <= 0 or NaN, as a row less its max is: the
 * polynomial of taprt_exp_f32 with the multiply-adds fused and without its
 * overflow arm; below -87.34 the result is 0 (a masked score gives exactly
 * 0), NaN stays NaN (it runs through the arithmetic).
 */
TAPRT_AVX2 static inline v8
exp8_nonpos(v8 x)
{
	v8i small = x < -87.3365f;
	v8 c = (v8)((small & (v8i)((v8){0} - 87.3365f)) | (~small & (v8i)x));
	v8 fn = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	v8 r = c - fn * 0.693359375f;
	r = r + fn * 2.12194440e-4f;
	v8 p = (v8){0} + 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * (r * r) + r + 1.0f;
	/* 2^fn, fn in [-126, 0]; NaN lanes convert to anything: p is NaN there */
	v8w e = ((v8w)__builtin_convertvector(fn, v8i) + 127) << 23;
	return (v8)((v8i)(p * (v8)e) & ~small);
}

/*
 * Softmax of one contiguous f32 row (x may be y) with AVX2 and FMA: the max
 * (NaN skipped, like max_f32), then e^(x - max) stored and summed in one
 * pass, then the scale.  The last len % 8 elements run through the same
 * lanes from a copy padded with -inf (e^-inf = 0 adds nothing).
 */
TAPRT_AVX2 static void
softmax_row_avx2(const float *x, float *y, int64_t len)
{
	int64_t n8 = len & ~(int64_t)7, k = len - n8;
	v8 tail = (v8){0} - INFINITY;
	for (int64_t j = 0; j < k; j++)
		tail[j] = x[n8 + j];
	v8 m8 = tail;
	for (int64_t i = 0; i < n8; i += 8) {
		v8 v = *(const v8u *)(x + i);
		v8i gt = v > m8;
		m8 = (v8)((gt & (v8i)v) | (~gt & (v8i)m8));
	}
	float m = -INFINITY;
	for (int j = 0; j < 8; j++)
		m = m8[j] > m ? m8[j] : m;
	v8 s8 = {0};
	for (int64_t i = 0; i < n8; i += 8) {
		v8 e = exp8_nonpos(*(const v8u *)(x + i) - m);
		*(v8u *)(y + i) = e;
		s8 += e;
	}
	tail = exp8_nonpos(tail - m);
	s8 += tail;
	float s = ((s8[0] + s8[4]) + (s8[1] + s8[5])) + ((s8[2] + s8[6]) + (s8[3] + s8[7]));
	float r = 1.0f / s;
	for (int64_t i = 0; i < n8; i += 8)
		*(v8u *)(y + i) *= r;
	tail *= r;
	for (int64_t j = 0; j < k; j++)
		y[n8 + j] = tail[j];
}

#endif

/* One contiguous f32 row: the hot path (attention scores).  x may be y. */
TAPRT_CLONES static void
softmax_row_f32(const float *x, float *y, int64_t len, bool logsm)
{
	float m = max_f32(x, len);
	for (int64_t i = 0; i < len; i++)
		y[i] = taprt_exp_f32(x[i] - m);
	float s = sum_f32(y, len);
	if (logsm) {
		/* (x - m) is exact near the max; m + log(s) would round */
		float ls = logf(s);
		for (int64_t i = 0; i < len; i++)
			y[i] = (x[i] - m) - ls;
	} else {
		float r = 1.0f / s;
		for (int64_t i = 0; i < len; i++)
			y[i] *= r;
	}
}

/* softmax_row_f32 or, on an AVX2 CPU, its vector twin. */
static void
softmax_row(const float *x, float *y, int64_t len, bool logsm, bool avx2)
{
#ifdef TAPRT_VEC8
	if (avx2 && !logsm) {
		softmax_row_avx2(x, y, len);
		return;
	}
#endif
	softmax_row_f32(x, y, len, logsm);
}

/* Any float type along a strided axis: x viewed as [outer, len, inner]. */
#define SOFTMAX_T(D, T, ...)                                                 \
	static void                                                          \
	softmax_##D(const void *xv, void *yv, int64_t outer, int64_t len,   \
	    int64_t inner, bool logsm)                                       \
	{                                                                    \
		const T *x = xv;                                             \
		T *y = yv;                                                   \
		for (int64_t o = 0; o < outer; o++, x += len * inner, y += len * inner) \
			for (int64_t j = 0; j < inner; j++) {                \
				T m = -INFINITY, s = 0;                      \
				for (int64_t k = 0; k < len; k++)            \
					m = x[k * inner + j] > m ? x[k * inner + j] : m; \
				for (int64_t k = 0; k < len; k++)            \
					s += exp(x[k * inner + j] - m);      \
				T ls = log(s);                               \
				for (int64_t k = 0; k < len; k++)            \
					y[k * inner + j] = logsm ? (x[k * inner + j] - m) - ls : \
					    exp(x[k * inner + j] - m) / s;   \
			}                                                    \
	}
FLOAT_TYPES(SOFTMAX_T, _)

/* Hardmax: 1 at the first largest element of each row along the axis (a
 * NaN counts as the largest, as numpy's argmax has it), 0 elsewhere. */
#define HARDMAX_T(D, T)                                                      \
	static void                                                          \
	hardmax_##D(const T *x, T *y, int64_t outer, int64_t len, int64_t inner) \
	{                                                                    \
		for (int64_t o = 0; o < outer; o++)                          \
			for (int64_t i = 0; i < inner; i++) {                \
				const T *xr = x + o * len * inner + i;       \
				T *yr = y + o * len * inner + i;             \
				int64_t best = 0;                            \
				for (int64_t k = 1; k < len && xr[best * inner] == xr[best * inner]; k++) \
					if (xr[k * inner] > xr[best * inner] || xr[k * inner] != xr[k * inner]) \
						best = k;                    \
				for (int64_t k = 0; k < len; k++)            \
					yr[k * inner] = k == best;           \
			}                                                    \
	}
HARDMAX_T(TAPRT_F32, float)
HARDMAX_T(TAPRT_F64, double)

enum { SM_SOFT, SM_LOG, SM_HARD };

/* Softmax, LogSoftmax and Hardmax (mode) over the axis. */
static void
softmax(taprt_ctx *cx, const taprt_node *n, int mode, const char *name)
{
	const bool logsm = mode == SM_LOG;
	const taprt_tensor *X = n->in[0];
	int r = X->rank;
	int64_t outer, len, inner;
	int axis = taprt_axis(taprt_attr_int(n, "axis", n->opset >= 13 ? -1 : 1), r);
	if (r == 0) {
		outer = len = inner = 1;
	} else if (axis < 0 || axis >= r) {
		taprt_fail(cx, "node '%s' (%s): axis out of range for rank %d", n->name, name, r);
		return;
	} else if (n->opset < 13) {     /* coerced to 2-D at axis */
		outer = prod(X->dims, 0, axis);
		len = prod(X->dims, axis, r);
		inner = 1;
	} else {
		outer = prod(X->dims, 0, axis);
		len = X->dims[axis];
		inner = prod(X->dims, axis + 1, r);
	}
	if (X->numel == 0)
		return;
	if (mode == SM_HARD) {
		if (X->dtype == TAPRT_F32)
			hardmax_TAPRT_F32(X->data, n->out[0]->data, outer, len, inner);
		else if (X->dtype == TAPRT_F64)
			hardmax_TAPRT_F64(X->data, n->out[0]->data, outer, len, inner);
		else
			taprt_bad_dtype(cx, n, name, X->dtype);
		return;
	}
	if (X->dtype == TAPRT_F32 && inner == 1) {
		const float *x = X->data;
		float *y = n->out[0]->data;
		bool avx2 = taprt_isa() >= TAPRT_ISA_AVX2;
		#pragma omp parallel for if (TAPRT_PAR(X->numel)) schedule(static)
		for (int64_t o = 0; o < outer; o++)
			softmax_row(x + o * len, y + o * len, len, logsm, avx2);
		return;
	}
	switch (X->dtype) {
	case TAPRT_F32:
		softmax_TAPRT_F32(X->data, n->out[0]->data, outer, len, inner, logsm);
		return;
	case TAPRT_F64:
		softmax_TAPRT_F64(X->data, n->out[0]->data, outer, len, inner, logsm);
		return;
	}
	taprt_bad_dtype(cx, n, name, X->dtype);
}

void
taprt_op_Softmax(taprt_ctx *cx, const taprt_node *n)
{
	softmax(cx, n, SM_SOFT, "Softmax");
}

void
taprt_op_LogSoftmax(taprt_ctx *cx, const taprt_node *n)
{
	softmax(cx, n, SM_LOG, "LogSoftmax");
}

void
taprt_op_Hardmax(taprt_ctx *cx, const taprt_node *n)
{
	softmax(cx, n, SM_HARD, "Hardmax");
}

/*
 * NegativeLogLikelihoodLoss over log-probabilities lp viewed as [N, C, D]
 * (D: the dims after axis 1 as one), target [N, D]: loss[n, d] =
 * -w[t] lp[n, t, d] with t = target[n, d], 0 with weight 0 where t is
 * ignore_index.  Reduction none: the losses; sum: their sum; mean: the sum
 * over the sum of the weights (1 each without a weight input), as onnx's
 * reference has it: every target ignored gives 0 / 0, NaN.  Sums in double.
 * Returns -1 and the target in *bad for one outside [0, C) that is not
 * ignore_index (the spec leaves that undefined; torch fails too).
 */
enum { RED_NONE, RED_SUM, RED_MEAN };
#define NLL_T(D, T, ...)                                                     \
	static int                                                           \
	nll_##D(const T *lp, const taprt_tensor *tg, const T *w, T *y, int64_t N, \
	    int64_t C, int64_t Dn, bool ign, int64_t ii, int red, int64_t *bad) \
	{                                                                    \
		double sum = 0, wsum = 0;                                    \
		for (int64_t i = 0; i < N * Dn; i++) {                       \
			int64_t t = tg->dtype == TAPRT_I64 ? ((const int64_t *)tg->data)[i] : \
			    ((const int32_t *)tg->data)[i];                  \
			double l = 0, wt = 0;                                \
			if (!ign || t != ii) {                               \
				if (t < 0 || t >= C) {                       \
					*bad = t;                            \
					return -1;                           \
				}                                            \
				wt = w ? (double)w[t] : 1.0;                 \
				l = -(double)lp[(i / Dn * C + t) * Dn + i % Dn] * wt; \
			}                                                    \
			if (red == RED_NONE)                                 \
				y[i] = (T)l;                                 \
			sum += l;                                            \
			wsum += wt;                                          \
		}                                                            \
		if (red != RED_NONE)                                         \
			*y = (T)(red == RED_SUM ? sum : sum / wsum);         \
		return 0;                                                    \
	}
FLOAT_TYPES(NLL_T, _)

/* NegativeLogLikelihoodLoss of lp (the input, or SoftmaxCrossEntropyLoss's
 * log-probabilities), the node's target and weight inputs. */
static void
nll(taprt_ctx *cx, const taprt_node *n, const void *lp, const char *name)
{
	const taprt_tensor *X = n->in[0], *T = n->in[1], *W = taprt_input(n, 2);
	const char *r = taprt_attr_str(n, "reduction", "mean");
	int red = strcmp(r, "none") == 0 ? RED_NONE : strcmp(r, "sum") == 0 ? RED_SUM : RED_MEAN;
	const taprt_attr *ia = taprt_attr_get(n, "ignore_index");
	int64_t N = X->dims[0], C = X->dims[1], D = N * C != 0 ? X->numel / (N * C) : 0, bad = 0;
	if (N * C == 0)
		D = T->numel / (N ? N : 1);
	int64_t ii = ia ? taprt_attr_int(n, "ignore_index", 0) : 0;
	int rc;
	if (X->dtype == TAPRT_F32)
		rc = nll_TAPRT_F32(lp, T, W ? W->data : NULL, n->out[0]->data, N, C, D, ia, ii, red,
		    &bad);
	else if (X->dtype == TAPRT_F64)
		rc = nll_TAPRT_F64(lp, T, W ? W->data : NULL, n->out[0]->data, N, C, D, ia, ii, red,
		    &bad);
	else {
		taprt_bad_dtype(cx, n, name, X->dtype);
		return;
	}
	if (rc)
		taprt_fail(cx, "node '%s' (%s): target %lld is not a class in [0, %lld)", n->name,
		    name, (long long)bad, (long long)C);
}

void
taprt_op_NegativeLogLikelihoodLoss(taprt_ctx *cx, const taprt_node *n)
{
	nll(cx, n, n->in[0]->data, "NegativeLogLikelihoodLoss");
}

/* LogSoftmax along axis 1 (into the second output when the graph reads it,
 * else scratch), then NegativeLogLikelihoodLoss. */
void
taprt_op_SoftmaxCrossEntropyLoss(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *LP = n->nout > 1 ? n->out[1] : NULL;
	int64_t N = X->dims[0], C = X->dims[1], D = N * C != 0 ? X->numel / (N * C) : 0;
	int es = taprt_dtype_size(X->dtype);
	void *lp = LP && LP->data ? LP->data : taprt_scratch(X->numel * es);
	if (X->numel && !lp) {
		taprt_fail(cx, "node '%s' (SoftmaxCrossEntropyLoss): out of memory", n->name);
		return;
	}
	if (X->dtype == TAPRT_F32 && D == 1)
		for (int64_t o = 0; o < N; o++)
			softmax_row_f32((const float *)X->data + o * C, (float *)lp + o * C, C, true);
	else if (X->dtype == TAPRT_F32)
		softmax_TAPRT_F32(X->data, lp, N, C, D, true);
	else if (X->dtype == TAPRT_F64)
		softmax_TAPRT_F64(X->data, lp, N, C, D, true);
	nll(cx, n, lp, "SoftmaxCrossEntropyLoss");
}

/*
 * FusedSoftmax: softmax along the last axis of t = X * scale (X / scale
 * with divide) + mask, or where(mask, fill, X * scale) for a bool mask;
 * the mask broadcasts to X (numpy).  t is built in the output row, then
 * normalized in place: one pass over X instead of three nodes' worth.
 * A mask broadcast to X steps along the last axis by 1, or by 0 when it
 * holds one value per row: each case builds t in a loop that vectorizes.
 */
enum { FSM_NONE, FSM_ADD, FSM_WHERE };

TAPRT_CLONES static void
fsm_row(const float *x, float *y, int64_t len, float scale, bool divide, int kind,
    const void *mask, int64_t s, float fill)
{
	const float *mf = mask;
	const uint8_t *mb = mask;
	if (kind == FSM_ADD && s == 0) {
		float c = mf[0];
		if (divide)
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] / scale + c;
		else
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] * scale + c;
	} else if (kind == FSM_ADD && s == 1) {
		if (divide)
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] / scale + mf[i];
		else
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] * scale + mf[i];
	} else if (kind == FSM_WHERE && s == 1) {
		if (divide)
			for (int64_t i = 0; i < len; i++)
				y[i] = mb[i] ? fill : x[i] / scale;
		else
			for (int64_t i = 0; i < len; i++)
				y[i] = mb[i] ? fill : x[i] * scale;
	} else if (kind == FSM_WHERE && mb[0]) {        /* s == 0: the row masked */
		for (int64_t i = 0; i < len; i++)
			y[i] = fill;
	} else {                                        /* no mask, or none here */
		if (divide)
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] / scale;
		else
			for (int64_t i = 0; i < len; i++)
				y[i] = x[i] * scale;
	}
}

void
taprt_op_FusedSoftmax(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *M = taprt_input(n, 1);
	taprt_tensor *Y = n->out[0];
	float scale = taprt_attr_float(n, "scale", 1.0f), fill = taprt_attr_float(n, "fill", 0.0f);
	bool divide = taprt_attr_int(n, "divide", 0) != 0;
	int r = X->rank;
	if (X->dtype != TAPRT_F32 || r < 1 || (M && M->dtype != TAPRT_F32 && M->dtype != TAPRT_BOOL)) {
		taprt_bad_dtype(cx, n, "FusedSoftmax", X->dtype);
		return;
	}
	int64_t len = X->dims[r - 1], rows = len ? X->numel / len : 0;
	int64_t sm[TAPRT_MAX_RANK] = {0};
	if (M)
		taprt_bcast_strides(M, X, sm);
	int kind = !M ? FSM_NONE : M->dtype == TAPRT_F32 ? FSM_ADD : FSM_WHERE;
	size_t es = M && M->dtype == TAPRT_F32 ? sizeof(float) : 1;
	const float *xd = X->data;
	float *yd = Y->data;
	bool avx2 = taprt_isa() >= TAPRT_ISA_AVX2;
	#pragma omp parallel for if (TAPRT_PAR(X->numel)) schedule(static)
	for (int64_t o = 0; o < rows; o++) {
		/* the mask's offset for row o: its index over the outer dims */
		int64_t mo = 0, q = o;
		for (int d = r - 2; d >= 0; d--) {
			mo += q % X->dims[d] * sm[d];
			q /= X->dims[d];
		}
		const void *m = M ? (const char *)M->data + mo * es : NULL;
		fsm_row(xd + o * len, yd + o * len, len, scale, divide, kind, m, sm[r - 1], fill);
		softmax_row(yd + o * len, yd + o * len, len, false, avx2);
	}
}

/* ----------------------------------------------------- normalizations */

static bool
is_float(const taprt_tensor *t)
{
	return t->dtype == TAPRT_F32 || t->dtype == TAPRT_F64;
}

/* LayerNormalization over rows of len, any float type, Scale/B repeating
 * with period ns/nb (they broadcast as a suffix of the row). */
static void
layernorm_generic(const taprt_tensor *X, const taprt_tensor *S, const taprt_tensor *B,
    taprt_tensor *Y, taprt_tensor *M, taprt_tensor *IS, int64_t outer, int64_t len,
    double eps)
{
	int64_t ns = S->numel, nb = B ? B->numel : 1;
	for (int64_t o = 0; o < outer; o++) {
		int64_t base = o * len;
		double mean = 0, var = 0;
		for (int64_t i = 0; i < len; i++)
			mean += taprt_getf(X, base + i);
		mean /= (double)len;
		for (int64_t i = 0; i < len; i++) {
			double d = taprt_getf(X, base + i) - mean;
			var += d * d;
		}
		var /= (double)len;
		double inv = 1 / sqrt(var + eps);
		for (int64_t i = 0; i < len; i++) {
			double v = (taprt_getf(X, base + i) - mean) * inv * taprt_getf(S, i % ns);
			if (B)
				v += taprt_getf(B, i % nb);
			taprt_setf(Y, base + i, v);
		}
		if (M)
			taprt_setf(M, o, mean);
		if (IS)
			taprt_setf(IS, o, inv);
	}
}

void
taprt_op_LayerNormalization(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *S = n->in[1], *B = taprt_input(n, 2);
	taprt_tensor *Y = n->out[0], *M = taprt_output(n, 1), *IS = taprt_output(n, 2);
	int r = X->rank;
	int axis = taprt_axis(taprt_attr_int(n, "axis", -1), r);
	double eps = taprt_attr_float(n, "epsilon", 1e-5f);
	if (axis < 0 || axis >= r) {
		taprt_fail(cx, "node '%s' (LayerNormalization): axis out of range for rank %d",
		    n->name, r);
		return;
	}
	int64_t outer = prod(X->dims, 0, axis), len = prod(X->dims, axis, r);
	if (!is_float(X) || !is_float(S) || (B && !is_float(B)) || (M && !is_float(M)) ||
	    (IS && !is_float(IS))) {
		taprt_bad_dtype(cx, n, "LayerNormalization", X->dtype);
		return;
	}
	if (!len || !outer)
		return;
	if (!S->numel || len % S->numel || (B && (!B->numel || len % B->numel))) {
		taprt_fail(cx, "node '%s' (LayerNormalization): Scale/B do not broadcast to "
		    "the %lld normalized elements", n->name, (long long)len);
		return;
	}
	bool fast = X->dtype == TAPRT_F32 && S->dtype == TAPRT_F32 && S->numel == len &&
	    (!B || (B->dtype == TAPRT_F32 && B->numel == len)) &&
	    (!M || M->dtype == TAPRT_F32) && (!IS || IS->dtype == TAPRT_F32);
	if (!fast) {
		layernorm_generic(X, S, B, Y, M, IS, outer, len, eps);
		return;
	}
	const float *xd = X->data, *s = S->data, *b = B ? B->data : NULL;
	float *yd = Y->data;
	float rlen = 1.0f / (float)len;
	#pragma omp parallel for if (TAPRT_PAR(outer * len)) schedule(static)
	for (int64_t o = 0; o < outer; o++) {
		const float *x = xd + o * len;
		float *y = yd + o * len;
		float mean = sum_f32(x, len) * rlen;
		float var = sumsq_f32(x, len, mean) * rlen;
		float inv = 1.0f / sqrtf(var + (float)eps);
		if (b)
			for (int64_t i = 0; i < len; i++)
				y[i] = (x[i] - mean) * inv * s[i] + b[i];
		else
			for (int64_t i = 0; i < len; i++)
				y[i] = (x[i] - mean) * inv * s[i];
		if (M)
			((float *)M->data)[o] = mean;
		if (IS)
			((float *)IS->data)[o] = inv;
	}
}

/* FusedLayerNorm: LayerNormalization's arithmetic, one output (fuse-norm
 * makes it from the decomposed form, at any opset). */
void
taprt_op_FusedLayerNorm(taprt_ctx *cx, const taprt_node *n)
{
	taprt_op_LayerNormalization(cx, n);
}

/*
 * BatchNormalization, per channel c = dim 1: y = a_c x + b_c with
 * a_c = scale/sqrt(var+eps), b_c = B - mean a_c.  With training_mode=1
 * (opset 14+) mean and var are the batch's (population variance), and
 * outputs 1 and 2 are the running statistics blended with momentum.
 */
void
taprt_op_BatchNormalization(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *S = n->in[1], *B = n->in[2];
	const taprt_tensor *Mu = n->in[3], *Var = n->in[4];
	taprt_tensor *Y = n->out[0];
	double eps = taprt_attr_float(n, "epsilon", 1e-5f);
	bool train = n->opset >= 14 && taprt_attr_int(n, "training_mode", 0);
	double mom = taprt_attr_float(n, "momentum", 0.9f);
	if (!is_float(X) || !is_float(S) || !is_float(B) || !is_float(Mu) || !is_float(Var)) {
		taprt_bad_dtype(cx, n, "BatchNormalization", X->dtype);
		return;
	}
	int64_t N = X->rank > 0 ? X->dims[0] : 1, C = X->rank > 1 ? X->dims[1] : 1;
	int64_t inner = X->rank > 2 ? prod(X->dims, 2, X->rank) : 1;
	for (int64_t c = 0; c < C; c++) {
		double mean = taprt_getf(Mu, c), var = taprt_getf(Var, c);
		if (train) {
			double sm = 0, sv = 0, cnt = (double)(N * inner);
			for (int64_t b = 0; b < N; b++)
				for (int64_t i = 0; i < inner; i++)
					sm += taprt_getf(X, (b * C + c) * inner + i);
			sm /= cnt;
			for (int64_t b = 0; b < N; b++)
				for (int64_t i = 0; i < inner; i++) {
					double d = taprt_getf(X, (b * C + c) * inner + i) - sm;
					sv += d * d;
				}
			sv /= cnt;
			taprt_tensor *rm = taprt_output(n, 1), *rv = taprt_output(n, 2);
			if (rm && is_float(rm))
				taprt_setf(rm, c, mean * mom + sm * (1 - mom));
			if (rv && is_float(rv))
				taprt_setf(rv, c, var * mom + sv * (1 - mom));
			mean = sm;
			var = sv;
		}
		double a = taprt_getf(S, c) / sqrt(var + eps), sh = taprt_getf(B, c) - mean * a;
		for (int64_t b = 0; b < N; b++) {
			int64_t off = (b * C + c) * inner;
			if (X->dtype == TAPRT_F32) {
				const float *x = (const float *)X->data + off;
				float *y = (float *)Y->data + off, fa = (float)a, fb = (float)sh;
				for (int64_t i = 0; i < inner; i++)
					y[i] = x[i] * fa + fb;
			} else {
				const double *x = (const double *)X->data + off;
				double *y = (double *)Y->data + off;
				for (int64_t i = 0; i < inner; i++)
					y[i] = x[i] * a + sh;
			}
		}
	}
}

/*
 * InstanceNormalization: per image and channel, y = scale_c (x - mean) /
 * sqrt(var + epsilon) + B_c over the spatial dims (population variance).
 */
void
taprt_op_InstanceNormalization(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *S = n->in[1], *B = n->in[2];
	taprt_tensor *Y = n->out[0];
	double eps = taprt_attr_float(n, "epsilon", 1e-5f);
	if (!is_float(X) || !is_float(S) || !is_float(B)) {
		taprt_bad_dtype(cx, n, "InstanceNormalization", X->dtype);
		return;
	}
	int64_t N = X->rank > 0 ? X->dims[0] : 1, C = X->rank > 1 ? X->dims[1] : 1;
	int64_t len = X->rank > 2 ? prod(X->dims, 2, X->rank) : 1;
	if (S->numel != C || B->numel != C) {
		taprt_fail(cx, "node '%s' (InstanceNormalization): scale and B must hold %lld values",
		    n->name, (long long)C);
		return;
	}
	if (!len)
		return;
	for (int64_t p = 0; p < N * C; p++) {
		int64_t c = p % C, base = p * len;
		if (X->dtype == TAPRT_F32) {
			const float *x = (const float *)X->data + base;
			float *y = (float *)Y->data + base;
			float mean = sum_f32(x, len) / (float)len;
			float var = sumsq_f32(x, len, mean) / (float)len;
			float a = (float)(taprt_getf(S, c) / sqrt((double)var + eps)), b = (float)taprt_getf(B, c);
			for (int64_t i = 0; i < len; i++)
				y[i] = (x[i] - mean) * a + b;
			continue;
		}
		double mean = 0, var = 0;
		for (int64_t i = 0; i < len; i++)
			mean += taprt_getf(X, base + i);
		mean /= (double)len;
		for (int64_t i = 0; i < len; i++) {
			double d = taprt_getf(X, base + i) - mean;
			var += d * d;
		}
		var /= (double)len;
		double a = taprt_getf(S, c) / sqrt(var + eps), b = taprt_getf(B, c);
		for (int64_t i = 0; i < len; i++)
			taprt_setf(Y, base + i, (taprt_getf(X, base + i) - mean) * a + b);
	}
}

/*
 * LRN (local response normalization across channels): for x [N, C, ...],
 * y = x / (bias + alpha / size * s)^beta, s the sum of x^2 over the
 * channels c - floor((size - 1) / 2) to c + ceil((size - 1) / 2) that
 * exist, at the same image and position.  In double, per image and
 * channel over a row of the positions.
 */
void
taprt_op_LRN(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	const int64_t size = taprt_attr_int(n, "size", 1);
	const double alpha = taprt_attr_float(n, "alpha", 1e-4f);
	const double beta = taprt_attr_float(n, "beta", 0.75f);
	const double bias = taprt_attr_float(n, "bias", 1.0f);
	if (!is_float(X)) {
		taprt_bad_dtype(cx, n, "LRN", X->dtype);
		return;
	}
	int64_t N = X->dims[0], C = X->dims[1], len = prod(X->dims, 2, X->rank);
	int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
	if (!X->numel)
		return;
	double *s = taprt_scratch(len * (int64_t)sizeof *s);
	if (!s) {
		taprt_fail(cx, "node '%s' (LRN): out of memory", n->name);
		return;
	}
	for (int64_t b = 0; b < N; b++)
		for (int64_t c = 0; c < C; c++) {
			memset(s, 0, (size_t)len * sizeof *s);
			int64_t from = c - lo < 0 ? 0 : c - lo, to = c + hi >= C ? C - 1 : c + hi;
			for (int64_t k = from; k <= to; k++)
				for (int64_t p = 0; p < len; p++) {
					double v = taprt_getf(X, (b * C + k) * len + p);
					s[p] += v * v;
				}
			for (int64_t p = 0; p < len; p++) {
				int64_t i = (b * C + c) * len + p;
				taprt_setf(Y, i, taprt_getf(X, i) / pow(bias + alpha / (double)size * s[p], beta));
			}
		}
}

/*
 * MeanVarianceNormalization: y = (x - mean) / (sqrt(E[x^2] - mean^2) +
 * 1e-9), the mean and E[x^2] over `axes` (default 0, 2, 3), as the
 * operator's function body computes it.  In double; a variance that
 * rounding makes negative counts as 0.
 */
void
taprt_op_MeanVarianceNormalization(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	const taprt_attr *ax = taprt_attr_get(n, "axes");
	static const int64_t dflt[3] = {0, 2, 3};
	const int64_t *axes = ax ? ax->is : dflt;
	int na = ax ? ax->n : 3, r = X->rank;
	if (!is_float(X)) {
		taprt_bad_dtype(cx, n, "MeanVarianceNormalization", X->dtype);
		return;
	}
	/* each element's statistics slot: its index with the reduced axes' coordinates 0 */
	bool red[TAPRT_MAX_RANK] = {false};
	for (int k = 0; k < na; k++) {
		int a = taprt_axis(axes[k], r);
		if (a < 0 || a >= r) {
			taprt_fail(cx, "node '%s' (MeanVarianceNormalization): axis %lld out of range "
			    "for rank %d", n->name, (long long)axes[k], r);
			return;
		}
		red[a] = true;
	}
	int64_t slots = 1, count = 1, sst[TAPRT_MAX_RANK];
	for (int d = r - 1; d >= 0; d--) {
		sst[d] = red[d] ? 0 : slots;
		slots *= red[d] ? 1 : X->dims[d];
		count *= red[d] ? X->dims[d] : 1;
	}
	if (!X->numel)
		return;
	double *m = taprt_scratch(slots * 2 * (int64_t)sizeof *m), *q = m + slots;
	if (!m) {
		taprt_fail(cx, "node '%s' (MeanVarianceNormalization): out of memory", n->name);
		return;
	}
	memset(m, 0, (size_t)slots * 2 * sizeof *m);
	for (int pass = 0; pass < 2; pass++)
		for (int64_t i = 0; i < X->numel; i++) {
			int64_t rest = i, slot = 0;
			for (int d = r - 1; d >= 0; d--) {
				slot += rest % X->dims[d] * sst[d];
				rest /= X->dims[d];
			}
			double v = taprt_getf(X, i);
			if (pass == 0) {
				m[slot] += v;
				q[slot] += v * v;
				continue;
			}
			double mean = m[slot] / (double)count, var = q[slot] / (double)count - mean * mean;
			taprt_setf(Y, i, (v - mean) / (sqrt(var > 0 ? var : 0) + 1e-9));
		}
}
