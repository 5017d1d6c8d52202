/*
 * k_elementwise.c - elementwise kernels: unary math, Cast, CastLike, Clip, Dropout,
 * binary arithmetic / comparison / logic with numpy broadcasting, the
 * variadic Max, Min, Sum and Mean, and Where.
 *
 * Needs: output dtypes, shapes and buffers set by tapc (for broadcasting
 * ops, the broadcast shape).  Outputs never alias inputs.
 *
 * Per-dtype code is written once as an expression and instantiated for
 * every type of a list (FLOAT_TYPES, SINT_TYPES, ...) by X-macros; <tgmath.h>
 * makes exp(v) mean expf for float and exp for double (Exp and Sigmoid
 * take internal.h's vectorizing polynomial for float, TAPRT_EXP).  Broadcasting goes
 * through bcast_run(), which merges the output's dimensions wherever every
 * operand steps through them alike, so same-shape operands become one long
 * row, a scalar operand a row with stride 0, and a bias add (b's shape a
 * suffix of a's) a few rows; each row is one call to a typed row function
 * whose inner strides are 0 or 1, with a loop the compiler vectorizes.
 *
 * f16/bf16 are supported by Cast, Identity, Dropout and Where, and f16 by
 * Max, Min and Mod (HALF_ROW: the halves compared or divided as floats);
 * tapc computes the rest in f32 between Casts (passes/legalize_half.c),
 * which half_cast makes fast.
 */
#include <float.h>
#include <stdbool.h>
#include <string.h>
#include <tgmath.h>

#include "runtime/internal.h"
#include "runtime/vec8.h"
#ifdef TAPRT_VEC8
#include <immintrin.h>
#endif

/* ------------------------------------------------------------ type lists */

/* X(dtype, C type, extra...): one line per type. Bool is C's _Bool, so a
 * conversion to it is "!= 0" for free. */
#define FLOAT_TYPES(X, ...)                                                  \
	X(TAPRT_F32, float, __VA_ARGS__) X(TAPRT_F64, double, __VA_ARGS__)
#define SINT_TYPES(X, ...)                                                   \
	X(TAPRT_I8, int8_t, __VA_ARGS__) X(TAPRT_I16, int16_t, __VA_ARGS__)    \
	X(TAPRT_I32, int32_t, __VA_ARGS__) X(TAPRT_I64, int64_t, __VA_ARGS__)
#define UINT_TYPES(X, ...)                                                   \
	X(TAPRT_U8, uint8_t, __VA_ARGS__) X(TAPRT_U16, uint16_t, __VA_ARGS__)  \
	X(TAPRT_U32, uint32_t, __VA_ARGS__) X(TAPRT_U64, uint64_t, __VA_ARGS__)
#define BOOL_TYPES(X, ...) X(TAPRT_BOOL, bool, __VA_ARGS__)
#define INT_TYPES(X, ...) SINT_TYPES(X, __VA_ARGS__) UINT_TYPES(X, __VA_ARGS__)
#define NUM_TYPES(X, ...) FLOAT_TYPES(X, __VA_ARGS__) INT_TYPES(X, __VA_ARGS__)
#define SIGNED_TYPES(X, ...) FLOAT_TYPES(X, __VA_ARGS__) SINT_TYPES(X, __VA_ARGS__)
#define ALL_TYPES(X, ...) NUM_TYPES(X, __VA_ARGS__) BOOL_TYPES(X, __VA_ARGS__)

/* A second copy for nesting (a macro does not expand inside itself). */
#define ALL_TYPES2(X, ...)                                                   \
	X(TAPRT_F32, float, __VA_ARGS__) X(TAPRT_F64, double, __VA_ARGS__)     \
	X(TAPRT_I8, int8_t, __VA_ARGS__) X(TAPRT_I16, int16_t, __VA_ARGS__)    \
	X(TAPRT_I32, int32_t, __VA_ARGS__) X(TAPRT_I64, int64_t, __VA_ARGS__)  \
	X(TAPRT_U8, uint8_t, __VA_ARGS__) X(TAPRT_U16, uint16_t, __VA_ARGS__)  \
	X(TAPRT_U32, uint32_t, __VA_ARGS__) X(TAPRT_U64, uint64_t, __VA_ARGS__) \
	X(TAPRT_BOOL, bool, __VA_ARGS__)

static void
copy_tensor(taprt_tensor *y, const taprt_tensor *x)
{
	size_t bytes = (size_t)x->numel * (size_t)taprt_dtype_size(x->dtype);
	if (bytes)
		memcpy(y->data, x->data, bytes);
}

/* ------------------------------------------------------------------ unary */

/* y = EXPR(v) for every element v of input 0, in type T; then return. */
#define MAP(T, EXPR)                                                         \
	{                                                                    \
		const T *x_ = n->in[0]->data;                                \
		T *y_ = n->out[0]->data;                                     \
		int64_t n_ = n->out[0]->numel;                               \
		_Pragma("omp parallel for if (TAPRT_PAR(n_)) schedule(static)") \
		for (int64_t i_ = 0; i_ < n_; i_++) {                        \
			T v = x_[i_];                                        \
			y_[i_] = (T)(EXPR);                                  \
		}                                                            \
		return;                                                      \
	}
#define MAP_CASE(D, T, EXPR) case D: MAP(T, EXPR)

/* A kernel mapping EXPR over input 0 for the types in TYPES, after the
 * statement in the trailing arguments (commas and all: the declarations of
 * the attributes EXPR reads, "const float a = ..., b = ..."). */
#define UNARY_P(NAME, TYPES, EXPR, ...)                                      \
	void                                                                 \
	taprt_op_##NAME(taprt_ctx *cx, const taprt_node *n)                  \
	{                                                                    \
		__VA_ARGS__;                                                 \
		switch (n->in[0]->dtype) {                                   \
		TYPES(MAP_CASE, EXPR)                                        \
		default:                                                     \
			break;                                               \
		}                                                            \
		taprt_bad_dtype(cx, n, #NAME, n->in[0]->dtype);              \
	}
#define UNARY(NAME, TYPES, EXPR) UNARY_P(NAME, TYPES, EXPR, (void)0)

UNARY(Neg, SIGNED_TYPES, -v)
UNARY(Exp, FLOAT_TYPES, TAPRT_EXP(v))
UNARY(Log, FLOAT_TYPES, log(v))
UNARY(Sqrt, FLOAT_TYPES, sqrt(v))
UNARY(Reciprocal, FLOAT_TYPES, 1 / v)
UNARY(Floor, FLOAT_TYPES, floor(v))
UNARY(Ceil, FLOAT_TYPES, ceil(v))
/* rint rounds half to even in the default rounding mode */
UNARY(Round, FLOAT_TYPES, rint(v))
UNARY(Sigmoid, FLOAT_TYPES, 1 / (1 + TAPRT_EXP(-v)))
UNARY(Softsign, FLOAT_TYPES, v / (1 + fabs(v)))
/* log(1 + e^v) without overflow for large v */
UNARY(Softplus, FLOAT_TYPES, v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)))
UNARY(Tanh, FLOAT_TYPES, tanh(v))
UNARY(Sin, FLOAT_TYPES, sin(v))
UNARY(Cos, FLOAT_TYPES, cos(v))
UNARY(Tan, FLOAT_TYPES, tan(v))
UNARY(Asin, FLOAT_TYPES, asin(v))
UNARY(Acos, FLOAT_TYPES, acos(v))
UNARY(Atan, FLOAT_TYPES, atan(v))
UNARY(Sinh, FLOAT_TYPES, sinh(v))
UNARY(Cosh, FLOAT_TYPES, cosh(v))
UNARY(Asinh, FLOAT_TYPES, asinh(v))
UNARY(Acosh, FLOAT_TYPES, acosh(v))
UNARY(Atanh, FLOAT_TYPES, atanh(v))
UNARY(Not, BOOL_TYPES, !v)

void
taprt_op_Erf(taprt_ctx *cx, const taprt_node *n)
{
	switch (n->in[0]->dtype) {
	case TAPRT_F32: MAP(float, taprt_erf_f32(v))
	case TAPRT_F64: MAP(double, erf(v))
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "Erf", n->in[0]->dtype);
}

void
taprt_op_Abs(taprt_ctx *cx, const taprt_node *n)
{
	switch (n->in[0]->dtype) {
	FLOAT_TYPES(MAP_CASE, fabs(v))
	SINT_TYPES(MAP_CASE, v < 0 ? -v : v)
	UINT_TYPES(MAP_CASE, v)
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "Abs", n->in[0]->dtype);
}

void
taprt_op_Sign(taprt_ctx *cx, const taprt_node *n)
{
	switch (n->in[0]->dtype) {
	/* keeps NaN and the zero's sign, like numpy */
	FLOAT_TYPES(MAP_CASE, v > 0 ? 1 : v < 0 ? -1 : v)
	SINT_TYPES(MAP_CASE, (v > 0) - (v < 0))
	UINT_TYPES(MAP_CASE, v != 0)
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "Sign", n->in[0]->dtype);
}

void
taprt_op_Relu(taprt_ctx *cx, const taprt_node *n)
{
	switch (n->in[0]->dtype) {
	SIGNED_TYPES(MAP_CASE, v < 0 ? 0 : v)   /* NaN stays NaN */
	UINT_TYPES(MAP_CASE, v)
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "Relu", n->in[0]->dtype);
}

UNARY_P(LeakyRelu, FLOAT_TYPES, v < 0 ? alpha * v : v,
    const float alpha = taprt_attr_float(n, "alpha", 0.01f))
UNARY_P(Elu, FLOAT_TYPES, v < 0 ? alpha * expm1(v) : v,
    const float alpha = taprt_attr_float(n, "alpha", 1.0f))
UNARY_P(Selu, FLOAT_TYPES, v > 0 ? gamma * v : gamma * alpha * expm1(v),
    const float alpha = taprt_attr_float(n, "alpha", 1.67326319217681884765625f),
    gamma = taprt_attr_float(n, "gamma", 1.05070102214813232421875f))
/* NaN: the second arm */
UNARY_P(Celu, FLOAT_TYPES, v > 0 ? v : alpha * expm1(v / alpha),
    const float alpha = taprt_attr_float(n, "alpha", 1.0f))
/* NaN: 0, as onnx's np.where */
UNARY_P(ThresholdedRelu, FLOAT_TYPES, v > alpha ? v : 0,
    const float alpha = taprt_attr_float(n, "alpha", 1.0f))
/* every numeric type: the float attributes compared and added in float,
 * the result converted to the type (onnx's reference: astype) */
UNARY_P(Shrink, NUM_TYPES, v < -l ? v + b : v > l ? v - b : 0,
    const float l = taprt_attr_float(n, "lambd", 0.5f), b = taprt_attr_float(n, "bias", 0.0f))
/* clip(t, 0, 1) without the calls: NaN stays NaN (TAPRT_CLAMP01) */
UNARY_P(HardSigmoid, FLOAT_TYPES, TAPRT_CLAMP01(alpha * v + beta),
    const float alpha = taprt_attr_float(n, "alpha", 0.2f),
    beta = taprt_attr_float(n, "beta", 0.5f))

void
taprt_op_HardSwish(taprt_ctx *cx, const taprt_node *n)
{
	switch (n->in[0]->dtype) {
	FLOAT_TYPES(MAP_CASE, v * TAPRT_CLAMP01(v * (1.0f / 6) + 0.5f))
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "HardSwish", n->in[0]->dtype);
}

void
taprt_op_IsNaN(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	bool *y = n->out[0]->data;
	switch (x->dtype) {
	case TAPRT_F32:
		for (int64_t i = 0; i < x->numel; i++)
			y[i] = isnan(((const float *)x->data)[i]);
		return;
	case TAPRT_F64:
		for (int64_t i = 0; i < x->numel; i++)
			y[i] = isnan(((const double *)x->data)[i]);
		return;
	}
	taprt_bad_dtype(cx, n, "IsNaN", x->dtype);
}

/* detect_negative, detect_positive: which infinities count */
void
taprt_op_IsInf(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	bool *y = n->out[0]->data;
	const bool neg = taprt_attr_int(n, "detect_negative", 1) != 0;
	const bool pos = taprt_attr_int(n, "detect_positive", 1) != 0;
	switch (x->dtype) {
	case TAPRT_F32:
		for (int64_t i = 0; i < x->numel; i++) {
			float v = ((const float *)x->data)[i];
			y[i] = isinf(v) && (v > 0 ? pos : neg);
		}
		return;
	case TAPRT_F64:
		for (int64_t i = 0; i < x->numel; i++) {
			double v = ((const double *)x->data)[i];
			y[i] = isinf(v) && (v > 0 ? pos : neg);
		}
		return;
	}
	taprt_bad_dtype(cx, n, "IsInf", x->dtype);
}

void
taprt_op_Identity(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx;
	copy_tensor(n->out[0], n->in[0]);
}

void
taprt_op_Dropout(taprt_ctx *cx, const taprt_node *n)
{
	/* training mode draws a random mask: only ratio 0 (a copy) is honest */
	const taprt_tensor *tm = taprt_input(n, 2), *ratio = taprt_input(n, 1);
	if (tm && *(const uint8_t *)tm->data) {
		double r = !ratio ? 0.5 : ratio->dtype == TAPRT_F64 ? *(const double *)ratio->data :
		    ratio->dtype == TAPRT_F32 ? *(const float *)ratio->data : 0.5;
		if (r != 0) {
			taprt_fail(cx, "node '%s' (Dropout): training mode with ratio %g is not supported",
			    n->name, r);
			return;
		}
	}
	copy_tensor(n->out[0], n->in[0]);
	taprt_tensor *mask = taprt_output(n, 1);
	if (mask)   /* inference: nothing is dropped */
		memset(mask->data, 1, (size_t)mask->numel);
}

/* Clip's bounds: inputs 1 and 2 from opset 11, float attributes before. */
#define CLIP_CASE(D, T, LO, HI)                                              \
	case D: {                                                            \
		T lo = LO, hi = HI;                                          \
		if (n->opset < 11) {                                         \
			lo = (T)taprt_attr_float(n, "min", (float)lo);       \
			hi = (T)taprt_attr_float(n, "max", (float)hi);       \
		}                                                            \
		if (tlo)                                                     \
			lo = *(const T *)tlo->data;                          \
		if (thi)                                                     \
			hi = *(const T *)thi->data;                          \
		if (lo > hi) /* min(max(v, lo), hi): every v is hi */        \
			lo = hi;                                             \
		MAP(T, v < lo ? lo : v > hi ? hi : v) /* NaN stays NaN */    \
	}

void
taprt_op_Clip(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *tlo = n->opset >= 11 ? taprt_input(n, 1) : NULL;
	const taprt_tensor *thi = n->opset >= 11 ? taprt_input(n, 2) : NULL;
	switch (n->in[0]->dtype) {
	CLIP_CASE(TAPRT_F32, float, -FLT_MAX, FLT_MAX) /* the spec's lowest() and max() */
	CLIP_CASE(TAPRT_F64, double, -DBL_MAX, DBL_MAX)
	CLIP_CASE(TAPRT_I8, int8_t, INT8_MIN, INT8_MAX)
	CLIP_CASE(TAPRT_I16, int16_t, INT16_MIN, INT16_MAX)
	CLIP_CASE(TAPRT_I32, int32_t, INT32_MIN, INT32_MAX)
	CLIP_CASE(TAPRT_I64, int64_t, INT64_MIN, INT64_MAX)
	CLIP_CASE(TAPRT_U8, uint8_t, 0, UINT8_MAX)
	CLIP_CASE(TAPRT_U16, uint16_t, 0, UINT16_MAX)
	CLIP_CASE(TAPRT_U32, uint32_t, 0, UINT32_MAX)
	CLIP_CASE(TAPRT_U64, uint64_t, 0, UINT64_MAX)
	default:
		break;
	}
	taprt_bad_dtype(cx, n, "Clip", n->in[0]->dtype);
}

/* ------------------------------------------------------------------- Cast */

/* Element i of t as a double / stored from a double (slow paths only). */
#define LD_CASE(D, T, ...) case D: return (double)((const T *)p)[i];
static double
ld_f(const void *p, int dt, int64_t i)
{
	switch (dt) {
	ALL_TYPES(LD_CASE, _)
	case TAPRT_F16: return taprt_half_to_float(((const uint16_t *)p)[i]);
	case TAPRT_BF16: return taprt_bf16_to_float(((const uint16_t *)p)[i]);
	}
	return 0;
}

#define LDI_CASE(D, T, ...) case D: return (int64_t)((const T *)p)[i];
static int64_t
ld_i(const void *p, int dt, int64_t i)
{
	switch (dt) {
	INT_TYPES(LDI_CASE, _)
	BOOL_TYPES(LDI_CASE, _)
	}
	return (int64_t)ld_f(p, dt, i);
}

#define ST_CASE(D, T, ...) case D: ((T *)p)[i] = (T)v; return;
static void
st_f(void *p, int dt, int64_t i, double v)
{
	switch (dt) {
	ALL_TYPES(ST_CASE, _)
	case TAPRT_F16:
		((uint16_t *)p)[i] = taprt_float_to_half((float)v);
		return;
	case TAPRT_BF16:
		((uint16_t *)p)[i] = taprt_float_to_bf16((float)v);
		return;
	}
}

/* The same for other kernels' slow paths (internal.h). */
double
taprt_get_any(const taprt_tensor *t, int64_t i)
{
	return ld_f(t->data, t->dtype, i);
}

void
taprt_set_any(taprt_tensor *t, int64_t i, double v)
{
	st_f(t->data, t->dtype, i, v);
}

#define STI_CASE(D, T, ...) case D: ((T *)p)[i] = (T)v; return;
static void
st_i(void *p, int dt, int64_t i, int64_t v)
{
	switch (dt) {
	INT_TYPES(STI_CASE, _)
	}
	st_f(p, dt, i, (double)v);
}

/*
 * The conversions passes/legalize_half.c puts around every half node (a
 * weight's each run): f16 <-> f32 with the F16C instructions of an AVX2
 * CPU (widening exact; narrowing to nearest even, as float_to_half, a NaN
 * staying a NaN), bf16 by moving the high half; in chunks on the team.
 */
#define HALF_CHUNK 16384
#ifdef TAPRT_VEC8
TAPRT_AVX2 static void
f16_to_f32_avx2(const uint16_t *x, float *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = taprt_half_to_float(x[i]);
}

TAPRT_AVX2 static void
f32_to_f16_avx2(const float *x, uint16_t *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
		    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		y[i] = taprt_float_to_half(x[i]);
}
#endif

TAPRT_CLONES static void
half_chunk(const void *x, int xd, void *y, int yd, int64_t n, bool avx2)
{
#ifdef TAPRT_VEC8
	if (avx2 && xd == TAPRT_F16) {
		f16_to_f32_avx2(x, y, n);
		return;
	}
	if (avx2 && yd == TAPRT_F16) {
		f32_to_f16_avx2(x, y, n);
		return;
	}
#else
	(void)avx2;
#endif
	const uint16_t *xh = x;
	uint16_t *yh = y;
	const float *xf = x;
	float *yf = y;
	if (xd == TAPRT_F16)
		for (int64_t i = 0; i < n; i++)
			yf[i] = taprt_half_to_float(xh[i]);
	else if (yd == TAPRT_F16)
		for (int64_t i = 0; i < n; i++)
			yh[i] = taprt_float_to_half(xf[i]);
	else if (xd == TAPRT_BF16)
		for (int64_t i = 0; i < n; i++)
			yf[i] = taprt_bf16_to_float(xh[i]);
	else
		for (int64_t i = 0; i < n; i++)
			yh[i] = taprt_float_to_bf16(xf[i]);
}

/* x (f16 or bf16) to f32 or back; false for other pairs. */
static bool
half_cast(const taprt_tensor *X, taprt_tensor *Y)
{
	int xd = X->dtype, yd = Y->dtype;
	bool half_in = xd == TAPRT_F16 || xd == TAPRT_BF16;
	if (!(half_in ? yd == TAPRT_F32 : xd == TAPRT_F32 && (yd == TAPRT_F16 || yd == TAPRT_BF16)))
		return false;
	const bool avx2 = taprt_isa() >= TAPRT_ISA_AVX2;
	const int xs = taprt_dtype_size(xd), ys = taprt_dtype_size(yd);
	const int64_t n = X->numel, chunks = (n + HALF_CHUNK - 1) / HALF_CHUNK;
	#pragma omp parallel for if (TAPRT_PAR(n)) schedule(static)
	for (int64_t c = 0; c < chunks; c++) {
		int64_t i = c * HALF_CHUNK, len = n - i < HALF_CHUNK ? n - i : HALF_CHUNK;
		half_chunk((const char *)X->data + i * xs, xd, (char *)Y->data + i * ys, yd, len,
		    avx2);
	}
	return true;
}

#define CAST_DST(D, U, T)                                                    \
	case D: {                                                            \
		const T *x = X->data;                                        \
		U *y = Y->data;                                              \
		for (int64_t i = 0; i < X->numel; i++)                       \
			y[i] = (U)x[i];                                      \
		return;                                                      \
	}
#define CAST_SRC(D, T, ...)                                                  \
	case D:                                                              \
		switch (Y->dtype) {                                          \
		ALL_TYPES2(CAST_DST, T)                                      \
		}                                                            \
		break;

void
taprt_op_Cast(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	if (X->dtype == Y->dtype) {
		copy_tensor(Y, X);
		return;
	}
	switch (X->dtype) {
	ALL_TYPES(CAST_SRC, _)
	}
	if (half_cast(X, Y))
		return;
	bool half = X->dtype == TAPRT_F16 || X->dtype == TAPRT_BF16 ||
	    Y->dtype == TAPRT_F16 || Y->dtype == TAPRT_BF16;
	if (!half || !taprt_dtype_size(X->dtype) || !taprt_dtype_size(Y->dtype)) {
		taprt_fail(cx, "node '%s' (Cast): %s to %s not supported", n->name,
		    taprt_dtype_name(X->dtype), taprt_dtype_name(Y->dtype));
		return;
	}
	/* halves go through float; a bool target still means "!= 0" */
	for (int64_t i = 0; i < X->numel; i++)
		st_f(Y->data, Y->dtype, i, ld_f(X->data, X->dtype, i));
}

/* ------------------------------------------------- Quantize/DequantizeLinear */

/* The scale's (and zero point's) element for each element of x: one for
 * all, or one per index of axis `axis` (the index is (i / inner) % per). */
static void
qdq_walk(const taprt_node *n, int64_t *per, int64_t *inner)
{
	const taprt_tensor *X = n->in[0];
	*per = n->in[1]->numel;
	*inner = 1;
	if (*per > 1) {
		int axis = taprt_axis(taprt_attr_int(n, "axis", 1), X->rank);
		for (int d = axis + 1; d < X->rank; d++)
			*inner *= X->dims[d];
	}
}

static int64_t
zero_point(const taprt_tensor *Z, int64_t c)
{
	if (!Z)
		return 0;
	switch (Z->dtype) {
	case TAPRT_U8: return ((const uint8_t *)Z->data)[c];
	case TAPRT_I8: return ((const int8_t *)Z->data)[c];
	case TAPRT_I32: return ((const int32_t *)Z->data)[c];
	}
	return 0;
}

/* y = saturate(round(x / scale) + zero point), rounding half to even in
 * float as onnx's reference (numpy float32) does; a NaN gives the zero
 * point (the spec leaves it open) */
void
taprt_op_QuantizeLinear(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *Z = taprt_input(n, 2);
	const float *s = n->in[1]->data;
	taprt_tensor *Y = n->out[0];
	const int lo = Y->dtype == TAPRT_I8 ? -128 : 0, hi = Y->dtype == TAPRT_I8 ? 127 : 255;
	if ((Y->dtype != TAPRT_U8 && Y->dtype != TAPRT_I8) ||
	    (X->dtype != TAPRT_F32 && X->dtype != TAPRT_I32)) {
		taprt_bad_dtype(cx, n, "QuantizeLinear", Y->dtype);
		return;
	}
	int64_t per, inner;
	qdq_walk(n, &per, &inner);
	#pragma omp parallel for if (TAPRT_PAR(X->numel)) schedule(static)
	for (int64_t i = 0; i < X->numel; i++) {
		int64_t c = per > 1 ? i / inner % per : 0;
		float v = X->dtype == TAPRT_F32 ? ((const float *)X->data)[i] :
		    (float)((const int32_t *)X->data)[i];
		float r = rintf(v / s[c]);
		int64_t z = zero_point(Z, c), q = z;
		if (r == r)
			q = r < (float)(lo - z) ? lo : r > (float)(hi - z) ? hi : (int64_t)r + z;
		if (Y->dtype == TAPRT_U8)
			((uint8_t *)Y->data)[i] = (uint8_t)q;
		else
			((int8_t *)Y->data)[i] = (int8_t)q;
	}
}

/* y = (x - zero point) * scale, in float as onnx's reference */
void
taprt_op_DequantizeLinear(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *Z = taprt_input(n, 2);
	const float *s = n->in[1]->data;
	float *y = n->out[0]->data;
	if (X->dtype != TAPRT_U8 && X->dtype != TAPRT_I8 && X->dtype != TAPRT_I32) {
		taprt_bad_dtype(cx, n, "DequantizeLinear", X->dtype);
		return;
	}
	int64_t per, inner;
	qdq_walk(n, &per, &inner);
	#pragma omp parallel for if (TAPRT_PAR(X->numel)) schedule(static)
	for (int64_t i = 0; i < X->numel; i++) {
		int64_t c = per > 1 ? i / inner % per : 0;
		float v = X->dtype == TAPRT_U8 ? ((const uint8_t *)X->data)[i] :
		    X->dtype == TAPRT_I8 ? ((const int8_t *)X->data)[i] :
		    (float)((const int32_t *)X->data)[i];
		y[i] = (v - (float)zero_point(Z, c)) * s[c];
	}
}

/* Cast to the type of input 1, which tapc gave the output */
void
taprt_op_CastLike(taprt_ctx *cx, const taprt_node *n)
{
	taprt_op_Cast(cx, n);
}

/* ----------------------------------------------------------- broadcasting */

/* One output row: y[i] = f(x0[i*s0], x1[i*s1], ...), strides 0 or 1. */
typedef void rowfn(void *y, const char *const *x, const int64_t *s, int64_t len,
    const void *arg);

/*
 * Call f for every row of out, with x[k] broadcast to out's shape (numpy
 * rules).  Output dimensions of size 1 are dropped and neighbours that all
 * operands step through contiguously (or all broadcast) are merged, so
 * rows are as long as they can be.
 */
static void
bcast_run(const taprt_tensor *out, int nx, const taprt_tensor *const *x, rowfn *f,
    const void *arg)
{
	int64_t full[3][TAPRT_MAX_RANK], st[3][TAPRT_MAX_RANK], dim[TAPRT_MAX_RANK];
	int r = 0;
	if (out->numel == 0)
		return;
	for (int k = 0; k < nx; k++)
		taprt_bcast_strides(x[k], out, full[k]);
	for (int i = 0; i < out->rank; i++) {
		int64_t d = out->dims[i];
		if (d == 1)
			continue;
		bool merge = r > 0;
		for (int k = 0; k < nx && merge; k++)
			merge = st[k][r - 1] == full[k][i] * d;
		if (merge) {
			dim[r - 1] *= d;
			for (int k = 0; k < nx; k++)
				st[k][r - 1] = full[k][i];
			continue;
		}
		dim[r] = d;
		for (int k = 0; k < nx; k++)
			st[k][r] = full[k][i];
		r++;
	}
	if (r == 0) {
		dim[r] = 1;
		for (int k = 0; k < nx; k++)
			st[k][r] = 0;
		r = 1;
	}

	/* byte steps per outer dimension, and the rewind when it wraps */
	int64_t step[3][TAPRT_MAX_RANK], back[3][TAPRT_MAX_RANK], in[3], idx[TAPRT_MAX_RANK];
	const char *p[3];
	for (int k = 0; k < nx; k++) {
		int64_t es = taprt_dtype_size(x[k]->dtype);
		for (int d = 0; d < r; d++) {
			step[k][d] = st[k][d] * es;
			back[k][d] = step[k][d] * dim[d];
		}
		in[k] = st[k][r - 1];
		p[k] = x[k]->data;
	}
	for (int d = 0; d < r; d++)
		idx[d] = 0;
	int64_t len = dim[r - 1];
	size_t ystep = (size_t)len * (size_t)taprt_dtype_size(out->dtype);
	char *y = out->data;
	if (TAPRT_PAR(out->numel)) {
		/* threads: chunks of one long row, or rows found from their index */
		int64_t rows = out->numel / len, ye = taprt_dtype_size(out->dtype);
		int64_t xe[3];
		for (int k = 0; k < nx; k++)
			xe[k] = taprt_dtype_size(x[k]->dtype);
		int64_t chunk = rows == 1 ? 4096 : len, pieces = rows == 1 ? (len + 4095) / 4096 : rows;
		#pragma omp parallel for schedule(static)
		for (int64_t i = 0; i < pieces; i++) {
			const char *q[3];
			int64_t lo = rows == 1 ? i * chunk : 0, n = rows == 1 ? (len - lo < chunk ? len - lo : chunk) : len;
			for (int k = 0; k < nx; k++) {
				q[k] = p[k] + lo * in[k] * xe[k];
				for (int64_t d = r - 2, rr = i; rows > 1 && d >= 0; d--) {
					q[k] += rr % dim[d] * step[k][d];
					rr /= dim[d];
				}
			}
			f((char *)y + (rows == 1 ? lo : i * len) * ye, q, in, n, arg);
		}
		return;
	}
	for (;;) {
		f(y, p, in, len, arg);
		y += ystep;
		int d = r - 2;
		for (; d >= 0; d--) {
			for (int k = 0; k < nx; k++)
				p[k] += step[k][d];
			if (++idx[d] < dim[d])
				break;
			for (int k = 0; k < nx; k++)
				p[k] -= back[k][d];
			idx[d] = 0;
		}
		if (d < 0)
			break;
	}
}

/*
 * A binary row function: the four stride cases are separate loops so each
 * vectorizes (no restrict: Max/Min/Sum accumulate in place).
 */
#define BIN_ROW(FN, TA, TY, EXPR)                                            \
	static void                                                          \
	FN(void *y_, const char *const *x, const int64_t *s, int64_t len,    \
	    const void *arg)                                                 \
	{                                                                    \
		const TA *a = (const TA *)x[0], *b = (const TA *)x[1];       \
		TY *y = y_;                                                  \
		(void)arg;                                                   \
		if (s[0] && s[1]) {                                          \
			for (int64_t i = 0; i < len; i++) {                  \
				TA u = a[i], v = b[i];                       \
				y[i] = (TY)(EXPR);                           \
			}                                                    \
		} else if (s[0]) {                                           \
			const TA v = b[0];                                   \
			for (int64_t i = 0; i < len; i++) {                  \
				TA u = a[i];                                 \
				y[i] = (TY)(EXPR);                           \
			}                                                    \
		} else if (s[1]) {                                           \
			const TA u = a[0];                                   \
			for (int64_t i = 0; i < len; i++) {                  \
				TA v = b[i];                                 \
				y[i] = (TY)(EXPR);                           \
			}                                                    \
		} else {                                                     \
			const TA u = a[0], v = b[0];                         \
			const TY r = (TY)(EXPR);                             \
			for (int64_t i = 0; i < len; i++)                    \
				y[i] = r;                                    \
		}                                                            \
	}
/* rows named row_<Op>_<dtype>; the output type is the inputs' or bool */
#define ROW(D, T, OP, EXPR) BIN_ROW(row_##OP##_##D, T, T, EXPR)
#define ROW_BOOL(D, T, OP, EXPR) BIN_ROW(row_##OP##_##D, T, bool, EXPR)
#define ROW_CASE(D, T, OP, ...) case D: f = row_##OP##_##D; break;

static void
binary(taprt_ctx *cx, const taprt_node *n, const char *op, rowfn *f)
{
	if (!f) {
		taprt_bad_dtype(cx, n, op, n->in[0]->dtype);
		return;
	}
	const taprt_tensor *x[2] = {n->in[0], n->in[1]};
	bcast_run(n->out[0], 2, x, f, NULL);
}

/* The kernel of a binary op whose rows exist for the types in TYPES. */
#define BINARY_KERNEL(OP, TYPES)                                             \
	void                                                                 \
	taprt_op_##OP(taprt_ctx *cx, const taprt_node *n)                    \
	{                                                                    \
		rowfn *f = NULL;                                             \
		switch (n->in[0]->dtype) {                                   \
		TYPES(ROW_CASE, OP)                                          \
		}                                                            \
		binary(cx, n, #OP, f);                                       \
	}
#define BINARY(OP, TYPES, ROWDEF, EXPR) TYPES(ROWDEF, OP, EXPR) BINARY_KERNEL(OP, TYPES)

BINARY(Add, NUM_TYPES, ROW, u + v)
BINARY(Sub, NUM_TYPES, ROW, u - v)
BINARY(Mul, NUM_TYPES, ROW, u * v)
BINARY(Equal, ALL_TYPES, ROW_BOOL, u == v)
BINARY(Less, NUM_TYPES, ROW_BOOL, u < v)
BINARY(LessOrEqual, NUM_TYPES, ROW_BOOL, u <= v)
BINARY(Greater, NUM_TYPES, ROW_BOOL, u > v)
BINARY(GreaterOrEqual, NUM_TYPES, ROW_BOOL, u >= v)
BINARY(And, BOOL_TYPES, ROW, u && v)
BINARY(Or, BOOL_TYPES, ROW, u || v)
BINARY(Xor, BOOL_TYPES, ROW, u != v)

/* BitShift: unsigned types; shifting by the width or more gives 0 (numpy's
 * answer; in C it is undefined) */
UINT_TYPES(ROW, ShiftLeft, v >= 8 * sizeof u ? 0 : u << v)
UINT_TYPES(ROW, ShiftRight, v >= 8 * sizeof u ? 0 : u >> v)

void
taprt_op_BitShift(taprt_ctx *cx, const taprt_node *n)
{
	rowfn *f = NULL;
	const char *dir = taprt_attr_str(n, "direction", "");
	if (!strcmp(dir, "LEFT")) {
		switch (n->in[0]->dtype) {
		UINT_TYPES(ROW_CASE, ShiftLeft)
		}
	} else if (!strcmp(dir, "RIGHT")) {
		switch (n->in[0]->dtype) {
		UINT_TYPES(ROW_CASE, ShiftRight)
		}
	} else {
		taprt_fail(cx, "node '%s' (BitShift): direction '%s' is neither LEFT nor RIGHT",
		    n->name, dir);
		return;
	}
	binary(cx, n, "BitShift", f);
}

/* C division truncates toward zero, as onnxruntime does.  The integer
 * cases that trap in C never reach the divide: x/0 gives 0, and MIN/-1
 * wraps to MIN, as numpy's do (tapc refuses both when it can see them at
 * compile time; a program never raises SIGFPE). */
FLOAT_TYPES(ROW, Div, u / v)
SINT_TYPES(ROW, Div, v == 0 ? 0 : v == -1 ? 0 - (uint64_t)u : u / v)
UINT_TYPES(ROW, Div, v == 0 ? 0 : u / v)
BINARY_KERNEL(Div, NUM_TYPES)

/* PRelu: slope v broadcasts to x (tapc made the output x's shape) */
SIGNED_TYPES(ROW, PRelu, u < 0 ? u * v : u)
UINT_TYPES(ROW, PRelu, ((void)v, u))
BINARY_KERNEL(PRelu, NUM_TYPES)

/* Mod with fmod=0: the result takes the divisor's sign (Python's %) */
FLOAT_TYPES(ROW, Mod, fmod(u, v) != 0 && (fmod(u, v) < 0) != (v < 0) ?
    fmod(u, v) + v : fmod(u, v))
SINT_TYPES(ROW, Mod, v == 0 || v == -1 ? 0 : u % v != 0 && (u % v < 0) != (v < 0) ?
    u % v + v : u % v)
UINT_TYPES(ROW, Mod, v == 0 ? 0 : u % v)
/* fmod=1: C's fmod / %, the sign of the dividend */
FLOAT_TYPES(ROW, Fmod, fmod(u, v))
SINT_TYPES(ROW, Fmod, v == 0 || v == -1 ? 0 : u % v)
UINT_TYPES(ROW, Fmod, v == 0 ? 0 : u % v)

/*
 * A row of f16 (IEEE half) operands, u and v their values as floats, hu and
 * hv their bits, EXPR the result's bits (broadcasting as BIN_ROW; y may be
 * x[0]: element i is read before it is written).  Max and Min pick one
 * operand's bits, exact; Mod's fmod is exact in float (a remainder of two
 * halves is a half) and Python's sign fix-up, r + v, one float addition
 * rounded to half once -- numpy's float16 remainder computes the same in
 * float.
 */
#define HALF_ROW(FN, EXPR)                                                   \
	static void                                                          \
	FN(void *y_, const char *const *x, const int64_t *s, int64_t len,    \
	    const void *arg)                                                 \
	{                                                                    \
		const uint16_t *a = (const uint16_t *)x[0], *b = (const uint16_t *)x[1]; \
		uint16_t *y = y_;                                            \
		(void)arg;                                                   \
		for (int64_t i = 0; i < len; i++) {                          \
			const uint16_t hu = a[s[0] ? i : 0], hv = b[s[1] ? i : 0]; \
			const float u = taprt_half_to_float(hu), v = taprt_half_to_float(hv); \
			(void)hu;                                            \
			(void)hv;                                            \
			y[i] = (EXPR);                                       \
		}                                                            \
	}
HALF_ROW(row_Fmod_f16, taprt_float_to_half(fmodf(u, v)))
HALF_ROW(row_Mod_f16, taprt_float_to_half(fmodf(u, v) != 0 && (fmodf(u, v) < 0) != (v < 0) ?
    fmodf(u, v) + v : fmodf(u, v)))

void
taprt_op_Mod(taprt_ctx *cx, const taprt_node *n)
{
	rowfn *f = NULL;
	if (taprt_attr_int(n, "fmod", 0)) {
		switch (n->in[0]->dtype) {
		NUM_TYPES(ROW_CASE, Fmod)
		case TAPRT_F16: f = row_Fmod_f16; break;
		}
	} else {
		switch (n->in[0]->dtype) {
		NUM_TYPES(ROW_CASE, Mod)
		case TAPRT_F16: f = row_Mod_f16; break;
		}
	}
	binary(cx, n, "Mod", f);
}

/* Integer power by squaring, wrapping on overflow; negative exponents
 * give the truncated 1/b^-e. */
static int64_t
ipow(int64_t b, int64_t e)
{
	if (e < 0)
		return b == 1 ? 1 : b == -1 ? (e & 1 ? -1 : 1) : 0;
	uint64_t r = 1, x = (uint64_t)b;
	for (; e; e >>= 1, x *= x)
		if (e & 1)
			r *= x;
	return (int64_t)r;
}

FLOAT_TYPES(ROW, Pow, pow(u, v))
INT_TYPES(ROW, Pow, ipow((int64_t)u, (int64_t)v))

/* Pow with different base and exponent dtypes: the output is the base's. */
static void
row_pow_mixed(void *y, const char *const *x, const int64_t *s, int64_t len,
    const void *arg)
{
	const int *dt = arg;    /* base, exponent */
	bool fbase = dt[0] == TAPRT_F32 || dt[0] == TAPRT_F64;
	bool fexp = dt[1] == TAPRT_F32 || dt[1] == TAPRT_F64;
	for (int64_t i = 0; i < len; i++) {
		int64_t ia = i * s[0], ib = i * s[1];
		if (fbase || fexp)
			st_f(y, dt[0], i, pow(ld_f(x[0], dt[0], ia), ld_f(x[1], dt[1], ib)));
		else
			st_i(y, dt[0], i, ipow(ld_i(x[0], dt[0], ia), ld_i(x[1], dt[1], ib)));
	}
}

/* y = x^e for a scalar f32 exponent: the squares, cubes and roots that
 * decomposed LayerNorm and GELU use skip powf. */
static bool
pow_f32_scalar(const taprt_node *n)
{
	const taprt_tensor *a = n->in[0], *b = n->in[1];
	if (a->dtype != TAPRT_F32 || b->dtype != TAPRT_F32 || b->numel != 1 ||
	    a->numel != n->out[0]->numel)
		return false;
	const float *x = a->data, e = *(const float *)b->data;
	float *y = n->out[0]->data;
	int64_t cnt = a->numel;
	if (e == 2) {
		for (int64_t i = 0; i < cnt; i++)
			y[i] = x[i] * x[i];
	} else if (e == 3) {
		for (int64_t i = 0; i < cnt; i++)
			y[i] = x[i] * x[i] * x[i];
	} else if (e == 1) {
		memcpy(y, x, (size_t)cnt * 4);
	} else if (e == 0.5f) {
		for (int64_t i = 0; i < cnt; i++)
			y[i] = sqrtf(x[i]);
	} else {
		return false;
	}
	return true;
}

void
taprt_op_Pow(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *a = n->in[0], *b = n->in[1];
	if (a->dtype != b->dtype) {
		int dt[2] = {a->dtype, b->dtype};
		bool ok = true;
		for (int k = 0; k < 2; k++)
			ok &= dt[k] != TAPRT_BOOL && taprt_dtype_size(dt[k]) > 0;
		if (!ok) {
			taprt_fail(cx, "node '%s' (Pow): %s ^ %s not supported", n->name,
			    taprt_dtype_name(dt[0]), taprt_dtype_name(dt[1]));
			return;
		}
		const taprt_tensor *x[2] = {a, b};
		bcast_run(n->out[0], 2, x, row_pow_mixed, dt);
		return;
	}
	if (pow_f32_scalar(n))
		return;
	rowfn *f = NULL;
	switch (a->dtype) {
	NUM_TYPES(ROW_CASE, Pow)
	}
	binary(cx, n, "Pow", f);
}

/* ---------------------------------------------------- variadic and Where */

/* NaN wins, as in numpy's maximum/minimum */
NUM_TYPES(ROW, Max, u > v || u != u ? u : v)
NUM_TYPES(ROW, Min, u < v || u != u ? u : v)
HALF_ROW(row_Max_f16, u > v || u != u ? hu : hv)
HALF_ROW(row_Min_f16, u < v || u != u ? hu : hv)

/* y = in0 op in1 op ... , folding into y (same shape as y, so in place) */
static void
variadic(taprt_ctx *cx, const taprt_node *n, const char *op, rowfn *f)
{
	taprt_tensor *y = n->out[0];
	if (!f) {
		taprt_bad_dtype(cx, n, op, n->in[0]->dtype);
		return;
	}
	if (n->nin == 1) {
		copy_tensor(y, n->in[0]);
		return;
	}
	const taprt_tensor *x[2] = {n->in[0], n->in[1]};
	bcast_run(y, 2, x, f, NULL);
	for (int k = 2; k < n->nin; k++) {
		x[0] = y;
		x[1] = n->in[k];
		bcast_run(y, 2, x, f, NULL);
	}
}

/* F16_ROW: its f16 row function, or NULL */
#define VARIADIC(OP, ROWOP, F16_ROW)                                         \
	void                                                                 \
	taprt_op_##OP(taprt_ctx *cx, const taprt_node *n)                    \
	{                                                                    \
		rowfn *f = NULL;                                             \
		switch (n->in[0]->dtype) {                                   \
		NUM_TYPES(ROW_CASE, ROWOP)                                   \
		case TAPRT_F16: f = F16_ROW; break;                          \
		}                                                            \
		variadic(cx, n, #OP, f);                                     \
	}

VARIADIC(Max, Max, row_Max_f16)
VARIADIC(Min, Min, row_Min_f16)
VARIADIC(Sum, Add, NULL)

void
taprt_op_Mean(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *y = n->out[0];
	rowfn *f = NULL;
	switch (y->dtype) {
	FLOAT_TYPES(ROW_CASE, Add)
	}
	variadic(cx, n, "Mean", f);
	if (!f)
		return;
	if (y->dtype == TAPRT_F32) {
		float *p = y->data, s = 1.0f / (float)n->nin;
		for (int64_t i = 0; i < y->numel; i++)
			p[i] *= s;
	} else {
		double *p = y->data;
		for (int64_t i = 0; i < y->numel; i++)
			p[i] /= n->nin;
	}
}

/* Where moves bits, so one row function per element size */
#define WHERE_ROW(T)                                                         \
	static void                                                          \
	row_where_##T(void *y_, const char *const *x, const int64_t *s,      \
	    int64_t len, const void *arg)                                    \
	{                                                                    \
		const uint8_t *c = (const uint8_t *)x[0];                    \
		const T *a = (const T *)x[1], *b = (const T *)x[2];          \
		T *y = y_;                                                   \
		(void)arg;                                                   \
		for (int64_t i = 0; i < len; i++)                            \
			y[i] = c[i * s[0]] ? a[i * s[1]] : b[i * s[2]];      \
	}
WHERE_ROW(uint8_t)
WHERE_ROW(uint16_t)
WHERE_ROW(uint32_t)
WHERE_ROW(uint64_t)

void
taprt_op_Where(taprt_ctx *cx, const taprt_node *n)
{
	rowfn *f = NULL;
	switch (taprt_dtype_size(n->out[0]->dtype)) {
	case 1: f = row_where_uint8_t; break;
	case 2: f = row_where_uint16_t; break;
	case 4: f = row_where_uint32_t; break;
	case 8: f = row_where_uint64_t; break;
	default:
		taprt_bad_dtype(cx, n, "Where", n->out[0]->dtype);
		return;
	}
	const taprt_tensor *x[3] = {n->in[0], n->in[1], n->in[2]};
	bcast_run(n->out[0], 3, x, f, NULL);
}
