/*
 * k_quant.c - the integer products and dynamic quantization:
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv, the operators onnxruntime's quantize_dynamic (transformers:
 * DynamicQuantizeLinear -> MatMulInteger) and its QOperator format write.
 *
 * Needs: k_nn.c's convolution geometry and im2col (taprt_geom_get,
 * taprt_im2col_i32) and MatMul's batch strides; the thread's scratch.
 *
 * Every product is exact.  The operands less their zero points are int32
 * (|v| <= 255), each product fits in 32 bits and the sums wrap in 32 bits
 * as the spec allows (computed unsigned, so the wrap is defined C).  The
 * right operand (b, or the convolution's im2col'd image) is converted once
 * per call into int32 rows with its zero points taken off; each output row
 * then accumulates a[m][k] * brow_k over k, a loop over a block of columns
 * that GCC vectorizes.  QLinear* requantize as onnx's reference does: the
 * multiplier a_scale * b_scale / y_scale in float, its product with the
 * int32 sum in double (numpy's promotion), rounded half to even, plus the
 * zero point, saturated.  DynamicQuantizeLinear is the reference's float
 * arithmetic: the range [min(x, 0), max(x, 0)] over 255 levels (scale 1/255
 * when x is all zeros), its zero point rounded, then QuantizeLinear's
 * rounding; NaNs take no part in the range and quantize to the zero point.
 *
 * Not built: an int8 GEMM library behind qgemm (oneDNN's u8s8s32 products
 * with VNNI would be the fast path); these run at a plain loop's speed.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/internal.h"

/* Columns of an output row summed at a time: its block of sums stays in L1
 * while the rows of b stream past. */
#define QBLOCK 1024

/* A u8 or i8 element as int32. */
static inline int32_t
q8(const void *p, int dt, int64_t i)
{
	return dt == TAPRT_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

/* Zero point c of z: 0 when absent, its one value when it has one. */
static inline int32_t
qzero(const taprt_tensor *z, int64_t c)
{
	return z ? q8(z->data, z->dtype, z->numel == 1 ? 0 : c) : 0;
}

/* The saturation bounds of a u8 or i8 result. */
static inline void
qrange(int dt, int32_t *lo, int32_t *hi)
{
	*lo = dt == TAPRT_I8 ? -128 : 0;
	*hi = dt == TAPRT_I8 ? 127 : 255;
}

/*
 * c[m][n] (rows ldc apart) = sum over k of (a[m][k] - za(row0 + m)) * b[k][n],
 * for a u8/i8 (rows lda apart, za its zero points: one, or one per row from
 * row0), b int32 (rows ldb apart), wrapping in 32 bits.  Rows split across
 * the rank's team.
 */
static void
qgemm(int64_t M, int64_t N, int64_t K, const void *a, int adt, int64_t lda,
    const taprt_tensor *za, int64_t row0, const int32_t *b, int64_t ldb, int32_t *c, int64_t ldc)
{
	#pragma omp parallel for if (TAPRT_PAR(M * N * K / 8)) schedule(static)
	for (int64_t m = 0; m < M; m++) {
		const int32_t z = qzero(za, row0 + m);
		for (int64_t j0 = 0; j0 < N; j0 += QBLOCK) {
			const int64_t nj = N - j0 < QBLOCK ? N - j0 : QBLOCK;
			uint32_t *restrict cr = (uint32_t *)(c + m * ldc + j0);
			for (int64_t j = 0; j < nj; j++)
				cr[j] = 0;
			for (int64_t k = 0; k < K; k++) {
				const uint32_t av = (uint32_t)(q8(a, adt, m * lda + k) - z);
				const int32_t *restrict br = b + k * ldb + j0;
				if (av)
					for (int64_t j = 0; j < nj; j++)
						cr[j] += av * (uint32_t)br[j];
			}
		}
	}
}

/* y = saturate(round(acc * mult) + zp) for a u8/i8 y, as onnx's reference
 * (the product in double, rounding half to even). */
static inline void
qstore(void *y, int dt, int64_t i, int32_t acc, float mult, int32_t zp, int32_t lo, int32_t hi)
{
	double v = rint((double)acc * (double)mult) + zp;
	int32_t q = v != v ? zp : v < lo ? lo : v > hi ? hi : (int32_t)v;
	if (dt == TAPRT_U8)
		((uint8_t *)y)[i] = (uint8_t)q;
	else
		((int8_t *)y)[i] = (int8_t)q;
}

/* ----------------------------------------------------------- DynamicQuantizeLinear */

void
taprt_op_DynamicQuantizeLinear(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0], *S = n->out[1], *Z = n->out[2];
	if (X->dtype != TAPRT_F32 || Y->dtype != TAPRT_U8) {
		taprt_bad_dtype(cx, n, "DynamicQuantizeLinear", X->dtype);
		return;
	}
	const float *x = X->data;
	const int64_t len = X->numel;
	float lo = 0.0f, hi = 0.0f;
	#pragma omp parallel for if (TAPRT_PAR(len)) reduction(min : lo) reduction(max : hi)
	for (int64_t i = 0; i < len; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
	float zf = 0.0f - lo / scale;
	zf = zf < 0.0f ? 0.0f : zf > 255.0f ? 255.0f : zf;
	const float zp = rintf(zf);
	uint8_t *y = Y->data;
	#pragma omp parallel for if (TAPRT_PAR(len)) schedule(static)
	for (int64_t i = 0; i < len; i++) {
		float v = rintf(x[i] / scale) + zp;
		y[i] = v != v ? (uint8_t)zp : v < 0.0f ? 0 : v > 255.0f ? 255 : (uint8_t)v;
	}
	if (S)
		*(float *)S->data = scale;
	if (Z)
		*(uint8_t *)Z->data = (uint8_t)zp;
}

/* ------------------------------------------------ MatMulInteger, QLinearMatMul */

/* a [..., M, K] @ b [..., K, N] (numpy's matmul; a 1-D a is [1, K], a 1-D b
 * [K, 1]), a per tensor, b per tensor or per column; QLinearMatMul's
 * inputs are a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp. */
static void
qmatmul(taprt_ctx *cx, const taprt_node *n, const char *op, bool ql)
{
	const taprt_tensor *a = n->in[0], *b = n->in[ql ? 3 : 1];
	const taprt_tensor *za = taprt_input(n, 2), *zb = taprt_input(n, ql ? 5 : 3);
	taprt_tensor *y = n->out[0];
	const int ra = a->rank, rb = b->rank;
	const int64_t M = ra >= 2 ? a->dims[ra - 2] : 1, K = a->dims[ra - 1];
	const int64_t N = rb >= 2 ? b->dims[rb - 1] : 1;
	const int nb = y->rank - (ra >= 2) - (rb >= 2);
	if ((a->dtype != TAPRT_U8 && a->dtype != TAPRT_I8) ||
	    (b->dtype != TAPRT_U8 && b->dtype != TAPRT_I8) ||
	    (ql ? y->dtype != TAPRT_U8 && y->dtype != TAPRT_I8 : y->dtype != TAPRT_I32)) {
		taprt_bad_dtype(cx, n, op, a->dtype);
		return;
	}
	if (y->numel == 0)
		return;
	int64_t batch = 1;
	for (int d = 0; d < nb; d++)
		batch *= y->dims[d];
	int64_t sa[TAPRT_MAX_RANK], sb[TAPRT_MAX_RANK];
	taprt_batch_strides(a, nb, M * K, sa);
	taprt_batch_strides(b, nb, K * N, sb);
	int32_t *bi = taprt_scratch((K * N + (ql ? M * N : 0)) * (int64_t)sizeof(int32_t));
	if (!bi) {
		taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
		return;
	}
	int32_t *acc = ql ? bi + K * N : NULL;
	float as = 0.0f, ys = 1.0f;
	const float *bs = NULL;
	int32_t zy = 0, lo = 0, hi = 0;
	if (ql) {
		as = *(const float *)n->in[1]->data;
		bs = n->in[4]->data;
		ys = *(const float *)n->in[6]->data;
		zy = qzero(n->in[7], 0);
		qrange(y->dtype, &lo, &hi);
	}
	for (int64_t i = 0; i < batch; i++) {
		int64_t r = i, oa = 0, ob = 0;
		for (int d = nb - 1; d >= 0; d--) {
			oa += r % y->dims[d] * sa[d];
			ob += r % y->dims[d] * sb[d];
			r /= y->dims[d];
		}
		for (int64_t k = 0; k < K; k++)
			for (int64_t j = 0; j < N; j++)
				bi[k * N + j] = q8(b->data, b->dtype, ob + k * N + j) - qzero(zb, j);
		const void *ap = (const int8_t *)a->data + oa;
		if (!ql) {
			qgemm(M, N, K, ap, a->dtype, K, za, 0, bi, N, (int32_t *)y->data + i * M * N, N);
			continue;
		}
		qgemm(M, N, K, ap, a->dtype, K, za, 0, bi, N, acc, N);
		const int64_t nbs = n->in[4]->numel;
		for (int64_t m = 0; m < M; m++)
			for (int64_t j = 0; j < N; j++) {
				const float mult = as * bs[nbs == 1 ? 0 : j] / ys;
				qstore(y->data, y->dtype, (i * M + m) * N + j, acc[m * N + j], mult, zy, lo,
				    hi);
			}
	}
}

void
taprt_op_MatMulInteger(taprt_ctx *cx, const taprt_node *n)
{
	qmatmul(cx, n, "MatMulInteger", false);
}

void
taprt_op_QLinearMatMul(taprt_ctx *cx, const taprt_node *n)
{
	qmatmul(cx, n, "QLinearMatMul", true);
}

/* ---------------------------------------------------- ConvInteger, QLinearConv */

/* x [N, C, spatial...] (zero point per tensor) and w [M, C/group, k...] (per
 * tensor or per output channel); per image: x less its zero point as int32,
 * im2col (the pads 0, so they count as the zero point), then per group
 * w's rows against the columns.  QLinearConv's inputs are x, x_scale, x_zp,
 * w, w_scale, w_zp, y_scale, y_zp and the bias (i32 [M], added to the sums). */
static void
qconv(taprt_ctx *cx, const taprt_node *n, const char *op, bool ql)
{
	const taprt_tensor *x = n->in[0], *w = n->in[ql ? 3 : 1];
	const taprt_tensor *zx = taprt_input(n, 2), *zw = taprt_input(n, ql ? 5 : 3);
	const taprt_tensor *bias = ql ? taprt_input(n, 8) : NULL;
	taprt_tensor *y = n->out[0];
	taprt_geom g;
	if ((x->dtype != TAPRT_U8 && x->dtype != TAPRT_I8) ||
	    (w->dtype != TAPRT_U8 && w->dtype != TAPRT_I8) ||
	    (ql ? y->dtype != TAPRT_U8 && y->dtype != TAPRT_I8 : y->dtype != TAPRT_I32)) {
		taprt_bad_dtype(cx, n, op, x->dtype);
		return;
	}
	if (y->numel == 0 || taprt_geom_get(cx, n, op, x, y, w->dims + 2, &g))
		return;
	const int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
	const int64_t G = taprt_attr_int(n, "group", 1), Cg = C / G, Mg = M / G;
	const int64_t Kc = Cg * g.k[0] * g.k[1] * g.k[2], P = g.osz, isz = g.isz;
	int32_t *xi = taprt_scratch((C * isz + Kc * P + (ql ? Mg * P : 0)) * (int64_t)sizeof(int32_t));
	if (!xi) {
		taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
		return;
	}
	int32_t *col = xi + C * isz, *acc = col + Kc * P;
	const int32_t z = qzero(zx, 0);
	float xs = 0.0f, ys = 1.0f;
	const float *ws = NULL;
	int32_t zy = 0, lo = 0, hi = 0;
	if (ql) {
		xs = *(const float *)n->in[1]->data;
		ws = n->in[4]->data;
		ys = *(const float *)n->in[6]->data;
		zy = qzero(n->in[7], 0);
		qrange(y->dtype, &lo, &hi);
	}
	for (int64_t b = 0; b < N; b++) {
		for (int64_t i = 0; i < C * isz; i++)
			xi[i] = q8(x->data, x->dtype, b * C * isz + i) - z;
		for (int64_t gi = 0; gi < G; gi++) {
			taprt_im2col_i32(xi + gi * Cg * isz, Cg, &g, col);
			const int8_t *wg = (const int8_t *)w->data + gi * Mg * Kc;
			int32_t *out = ql ? acc : (int32_t *)y->data + (b * M + gi * Mg) * P;
			qgemm(Mg, P, Kc, wg, w->dtype, Kc, zw, gi * Mg, col, P, out, P);
			if (!ql)
				continue;
			for (int64_t m = 0; m < Mg; m++) {
				const int64_t oc = gi * Mg + m;
				const float mult = xs * ws[n->in[4]->numel == 1 ? 0 : oc] / ys;
				const uint32_t bv = bias ? (uint32_t)((const int32_t *)bias->data)[oc] : 0;
				for (int64_t p = 0; p < P; p++)
					qstore(y->data, y->dtype, (b * M + oc) * P + p,
					    (int32_t)((uint32_t)acc[m * P + p] + bv), mult, zy, lo, hi);
			}
		}
	}
}

void
taprt_op_ConvInteger(taprt_ctx *cx, const taprt_node *n)
{
	qconv(cx, n, "ConvInteger", false);
}

void
taprt_op_QLinearConv(taprt_ctx *cx, const taprt_node *n)
{
	qconv(cx, n, "QLinearConv", true);
}
