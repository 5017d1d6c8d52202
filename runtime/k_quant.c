/*
 * k_quant.c - the integer products and dynamic quantization:
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv, the operators onnxruntime's quantize_dynamic (transformers:
 * DynamicQuantizeLinear -> MatMulInteger) and its QOperator format write;
 * FusedMatMulInteger, fuse-matmul's quantize_dynamic Linear (the product,
 * Cast, the Mul by the scales and FusedMatMul's epilogue).
 *
 * Needs: the GEMM interface (gemm.c), oneDNN's int8 matmul (conv_dnnl.c's
 * taprt_qmatmul_dnnl); k_nn.c's convolution geometry and im2col
 * (taprt_geom_get, taprt_im2col_f32/f64), MatMul's batch strides and the
 * epilogue; the thread's scratch.
 *
 * An s8 weight b: oneDNN's int8 matmul of the raw operands (u8 or s8 a)
 * where it sums exactly (VNNI, AMX), the zero points then folded in a row
 * at a time from a's row sums and b's column sums (qfold), the row then
 * converted (and for the fused op scaled and given its epilogue) while in
 * L1.  Every other product is exact too, at the float GEMM's speed.  The operands less
 * their zero points are integers of at most 255 in magnitude, so a product
 * of two is exact in float, and a sum of K of them is exact in any order as
 * long as K * max|a - za| * max|b - zb| stays below 2^24 (every partial sum
 * is then an integer float holds): such products -- MobileNet's and BERT's
 * layers with their usual zero points -- run on taprt_sgemm over the
 * operands converted to float, the others on taprt_dgemm in double (exact
 * below 2^53, so for any K a model can hold).  The sums are then the
 * spec's int32, wrapping in 32 bits where a sum overflows it.  QLinear*
 * requantize as onnx's reference does: the multiplier a_scale * b_scale /
 * y_scale in float, its product with the int32 sum in double (numpy's
 * promotion), rounded half to even, plus the zero point, saturated.
 * DynamicQuantizeLinear is the reference's float arithmetic: the range
 * [min(x, 0), max(x, 0)] over 255 levels (scale 1/255 when x is all
 * zeros), its zero point rounded, then QuantizeLinear's rounding; NaNs take
 * no part in the range and quantize to the zero point.
 *
 * Not built: int8 products for u8 weights and for convolutions (oneDNN
 * takes s8 weights only; ConvInteger and QLinearConv run on the float
 * path), and for a b that is not a weight (it would be reordered per call).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

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

/* The largest sum of K products of operands at most amax and bmax in
 * magnitude that float computes exactly: below 2^24. */
static inline bool
qfloat_ok(int64_t K, int32_t amax, int32_t bmax)
{
	return (double)K * amax * bmax < 16777216.0;
}

/*
 * An r x c u8/i8 matrix (element off + i * ld + j of p) less its zero
 * points z (one; or per column j when zcol, per row row0 + i otherwise):
 * qmax gives the largest magnitude, qconvert writes it into dst (float, or
 * double when dbl) rows c apart.
 */
static int32_t
qmax(const void *p, int dt, int64_t off, int64_t r, int64_t c, int64_t ld,
    const taprt_tensor *z, bool zcol, int64_t row0)
{
	int32_t m = 0;
	for (int64_t i = 0; i < r; i++)
		for (int64_t j = 0; j < c; j++) {
			int32_t v = q8(p, dt, off + i * ld + j) - qzero(z, zcol ? j : row0 + i);
			v = v < 0 ? -v : v;
			m = v > m ? v : m;
		}
	return m;
}

static void
qconvert(void *dst, bool dbl, const void *p, int dt, int64_t off, int64_t r, int64_t c,
    int64_t ld, const taprt_tensor *z, bool zcol, int64_t row0)
{
	#pragma omp parallel for if (TAPRT_PAR(r * c)) schedule(static)
	for (int64_t i = 0; i < r; i++)
		for (int64_t j = 0; j < c; j++) {
			int32_t v = q8(p, dt, off + i * ld + j) - qzero(z, zcol ? j : row0 + i);
			if (dbl)
				((double *)dst)[i * c + j] = v;
			else
				((float *)dst)[i * c + j] = (float)v;
		}
}

/* c = a @ b over converted operands (M x K, K x N), in float or double. */
static void
qproduct(bool dbl, int64_t M, int64_t N, int64_t K, const void *a, const void *b, void *c)
{
	if (dbl)
		taprt_dgemm(false, false, M, N, K, 1.0, a, K, b, N, 0.0, c, N);
	else
		taprt_sgemm(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

/* Sum i of a product as the spec's int32 (an exact integer in float or
 * double; in double it may pass int32's range, and wraps). */
static inline int32_t
qsum(const void *c, bool dbl, int64_t i)
{
	if (!dbl)
		return (int32_t)((const float *)c)[i];
	return (int32_t)(uint32_t)(uint64_t)(int64_t)((const double *)c)[i];
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

/* Elements a chunk of the team's loops. */
#define DQL_CHUNK 16384

/* The range of x[0, n) widened to lo, hi (NaNs skipped), and x quantized
 * with its scale and zero point: the two passes, vectorized per CPU. */
static TAPRT_CLONES void
dql_range(const float *x, int64_t n, float *lo, float *hi)
{
	/* 16 lanes apart, so that the compare-and-selects vectorize (a
	 * reduction of one float would keep its order) */
	typedef float v16 __attribute__((vector_size(64), aligned(4)));
	typedef int v16i __attribute__((vector_size(64)));
	v16 l = {0}, h = {0};
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		v16 v;
		memcpy(&v, x + i, sizeof v);
		v16i ml = v < l, mh = v > h;
		l = (v16)(((v16i)v & ml) | ((v16i)l & ~ml));
		h = (v16)(((v16i)v & mh) | ((v16i)h & ~mh));
	}
	float lo1 = *lo, hi1 = *hi;
	for (int k = 0; k < 16; k++) {
		lo1 = l[k] < lo1 ? l[k] : lo1;
		hi1 = h[k] > hi1 ? h[k] : hi1;
	}
	for (; i < n; i++) {
		lo1 = x[i] < lo1 ? x[i] : lo1;
		hi1 = x[i] > hi1 ? x[i] : hi1;
	}
	*lo = lo1;
	*hi = hi1;
}

static TAPRT_CLONES void
dql_quant(const float *x, int64_t n, float scale, float zp, uint8_t *y)
{
	for (int64_t i = 0; i < n; i++) {
		float v = rintf(x[i] / scale) + zp;
		v = v < 0.0f ? 0.0f : v;
		v = v > 255.0f ? 255.0f : v;
		y[i] = v == v ? (uint8_t)v : (uint8_t)zp;
	}
}

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
	const int64_t chunks = (len + DQL_CHUNK - 1) / DQL_CHUNK;
	float lo = 0.0f, hi = 0.0f;
	#pragma omp parallel for if (TAPRT_PAR(len)) reduction(min : lo) reduction(max : hi)
	for (int64_t c = 0; c < chunks; c++) {
		const int64_t i = c * DQL_CHUNK;
		dql_range(x + i, len - i < DQL_CHUNK ? len - i : DQL_CHUNK, &lo, &hi);
	}
	const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
	float zf = 0.0f - lo / scale;
	zf = zf < 0.0f ? 0.0f : zf > 255.0f ? 255.0f : zf;
	const float zp = rintf(zf);
	#pragma omp parallel for if (TAPRT_PAR(len)) schedule(static)
	for (int64_t c = 0; c < chunks; c++) {
		const int64_t i = c * DQL_CHUNK;
		dql_quant(x + i, len - i < DQL_CHUNK ? len - i : DQL_CHUNK, scale, zp,
		    (uint8_t *)Y->data + i);
	}
	if (S)
		*(float *)S->data = scale;
	if (Z)
		*(uint8_t *)Z->data = (uint8_t)zp;
}

/* ------------------------------------------------ MatMulInteger, QLinearMatMul */

/*
 * c[M,N] = sum (a - za)(b - zb) from c = sum a b (oneDNN's), a row at a time
 * in place: less za times b's column sums and zb's times a's row sums, plus
 * K za zb -- in 32 bits, wrapping as the sums themselves do.  qfold_init
 * makes the per-column terms (nothing to do: f->t NULL); -1 out of memory.
 */
typedef struct {
	uint32_t *t, *zj;               /* per column: K za zb - za colsum; zb */
	bool zbany;                     /* some zb is not 0: the row sums count */
} qfold_t;

static int
qfold_init(qfold_t *f, int64_t N, int64_t K, const taprt_tensor *za, const taprt_tensor *zb,
    const int32_t *colsum)
{
	const uint32_t z = (uint32_t)qzero(za, 0);
	f->t = f->zj = NULL;
	f->zbany = false;
	for (int64_t j = 0; j < N && zb; j++)
		f->zbany |= qzero(zb, j) != 0;
	if (!z && !f->zbany)
		return 0;
	if (!(f->t = malloc((size_t)N * 2 * sizeof *f->t)))
		return -1;
	f->zj = f->t + N;
	for (int64_t j = 0; j < N; j++) {
		f->zj[j] = (uint32_t)qzero(zb, j);
		f->t[j] = (uint32_t)K * z * f->zj[j] - z * (uint32_t)colsum[j];
	}
	return 0;
}

/* Row m of c (N long), a's row m K long. */
static TAPRT_CLONES void
qfold_row(const qfold_t *f, int32_t *c, int64_t N, int64_t K, const void *a, int adt)
{
	uint32_t *restrict cr = (uint32_t *)c;
	const uint32_t *restrict t = f->t, *restrict zj = f->zj;
	if (!t)
		return;
	if (!f->zbany) {
		for (int64_t j = 0; j < N; j++)
			cr[j] += t[j];
		return;
	}
	uint32_t rs = 0;
	if (adt == TAPRT_U8)
		for (int64_t k = 0; k < K; k++)
			rs += ((const uint8_t *)a)[k];
	else
		for (int64_t k = 0; k < K; k++)
			rs += (uint32_t)((const int8_t *)a)[k];
	for (int64_t j = 0; j < N; j++)
		cr[j] += t[j] - zj[j] * rs;
}

/* What a product's sums become: MatMulInteger's int32; QLinearMatMul's
 * requantized u8/i8 (a_scale * b_scale[j] / y_scale, y's zero point);
 * FusedMatMulInteger's f32 sum * scale, its epilogue after (qmatmul). */
enum { QM_INT, QM_QLINEAR, QM_FUSED };
typedef struct {
	int kind, dt;
	float as, ys, scale;
	const float *bs;
	int64_t nbs;
	int32_t zy, lo, hi;
} qout_t;

static inline void
qout(const qout_t *q, void *y, int64_t o, int64_t j, int32_t v)
{
	if (q->kind == QM_INT)
		((int32_t *)y)[o] = v;
	else if (q->kind == QM_FUSED)
		((float *)y)[o] = (float)v * q->scale;
	else
		qstore(y, q->dt, o, v, q->as * q->bs[q->nbs == 1 ? 0 : j] / q->ys, q->zy, q->lo,
		    q->hi);
}

/* y = float(c) * s over a row: FusedMatMulInteger's Cast and Mul,
 * vectorized per CPU. */
static TAPRT_CLONES void
qscale_row(const int32_t *restrict c, float *restrict y, int64_t n, float s)
{
	for (int64_t j = 0; j < n; j++)
		y[j] = (float)c[j] * s;
}

/* FusedMatMulInteger's epilogue on output row r (N long): its bias
 * (input 5), Z (input 6) and activation, as FusedMatMul's. */
static inline void
qepilogue(const taprt_node *n, taprt_tensor *y, int64_t r, int64_t N, const taprt_act *act)
{
	const taprt_tensor *bias = taprt_input(n, 5), *z = taprt_input(n, 6);
	if (bias || z || act->kind != TAPRT_ACT_NONE)
		taprt_epilogue_vec_f32((float *)y->data + r * N, N, bias ? bias->data : NULL,
		    z ? (const float *)z->data + r * N : NULL, act);
}

/* a [..., M, K] @ b [..., K, N] (numpy's matmul; a 1-D a is [1, K], a 1-D b
 * [K, 1]), a per tensor, b per tensor or per column.  The inputs: a, b,
 * a_zp, b_zp (MatMulInteger); a, a_scale, a_zp, b, b_scale, b_zp,
 * y_scale, y_zp (QLinearMatMul); a, b, a_zp, b_zp, scale, bias, Z
 * (FusedMatMulInteger: act(sum * scale + bias + Z), fuse-matmul's). */
static void
qmatmul(taprt_ctx *cx, const taprt_node *n, const char *op, int kind)
{
	const bool ql = kind == QM_QLINEAR;
	const taprt_tensor *a = n->in[0], *b = n->in[ql ? 3 : 1];
	const taprt_tensor *za = taprt_input(n, 2), *zb = taprt_input(n, ql ? 5 : 3);
	taprt_tensor *y = n->out[0];
	const int ra = a->rank, rb = b->rank;
	const int64_t M = ra >= 2 ? a->dims[ra - 2] : 1, K = a->dims[ra - 1];
	const int64_t N = rb >= 2 ? b->dims[rb - 1] : 1;
	const int nb = y->rank - (ra >= 2) - (rb >= 2);
	const int ydt = kind == QM_INT ? TAPRT_I32 : kind == QM_FUSED ? TAPRT_F32 : -1;
	taprt_act act = {TAPRT_ACT_NONE};
	if ((a->dtype != TAPRT_U8 && a->dtype != TAPRT_I8) ||
	    (b->dtype != TAPRT_U8 && b->dtype != TAPRT_I8) ||
	    (ydt >= 0 ? y->dtype != ydt : y->dtype != TAPRT_U8 && y->dtype != TAPRT_I8)) {
		taprt_bad_dtype(cx, n, op, a->dtype);
		return;
	}
	if (y->numel == 0 || (kind == QM_FUSED && taprt_act_get(cx, n, &act)))
		return;
	qout_t q = {kind, y->dtype, 0.0f, 1.0f, 0.0f, NULL, 0, 0, 0, 0};
	if (ql) {
		q.as = *(const float *)n->in[1]->data;
		q.bs = n->in[4]->data;
		q.nbs = n->in[4]->numel;
		q.ys = *(const float *)n->in[6]->data;
		q.zy = qzero(n->in[7], 0);
		qrange(y->dtype, &q.lo, &q.hi);
	} else if (kind == QM_FUSED) {
		q.scale = *(const float *)n->in[4]->data;
	}
	int64_t batch = 1;
	for (int d = 0; d < nb; d++)
		batch *= y->dims[d];
	/* an s8 weight b against every row of a: oneDNN's int8 matmul (VNNI),
	 * the zero points folded in after */
	if (rb == 2 && b->dtype == TAPRT_I8 && (n->fixed & (1u << (ql ? 3 : 1))) && K > 0) {
		const int64_t Mt = a->numel / K;
		int32_t *c = kind == QM_INT ? y->data : taprt_scratch(Mt * N * (int64_t)sizeof(int32_t));
		const int32_t *colsum = NULL;
		if (!c) {
			taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
			return;
		}
		int rc = taprt_qmatmul_dnnl(cx, n, Mt, N, K, a->data, a->dtype, b->data, c, &colsum);
		if (rc < 0)
			return;
		if (rc > 0) {
			qfold_t f;
			if (qfold_init(&f, N, K, za, zb, colsum)) {
				taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
				return;
			}
			/* row by row: the zero points, then the output and the
			 * fused epilogue while the row is in L1 */
			#pragma omp parallel for if (TAPRT_PAR(Mt * (N + K))) schedule(static)
			for (int64_t r = 0; r < Mt; r++) {
				qfold_row(&f, c + r * N, N, K, (const int8_t *)a->data + r * K, a->dtype);
				if (kind == QM_FUSED) {
					qscale_row(c + r * N, (float *)y->data + r * N, N, q.scale);
					qepilogue(n, y, r, N, &act);
				} else if (kind == QM_QLINEAR) {
					for (int64_t j = 0; j < N; j++)
						qout(&q, y->data, r * N + j, j, c[r * N + j]);
				}
			}
			free(f.t);
			return;
		}
	}
	int64_t sa[TAPRT_MAX_RANK], sb[TAPRT_MAX_RANK];
	taprt_batch_strides(a, nb, M * K, sa);
	taprt_batch_strides(b, nb, K * N, sb);
	/* one precision for every matrix of the batch */
	const bool dbl = K > 0 && !qfloat_ok(K, qmax(a->data, a->dtype, 0, a->numel / K, K,
	    K, za, false, 0), qmax(b->data, b->dtype, 0, b->numel / N, N, N, zb, true, 0));
	const int64_t es = dbl ? 8 : 4;
	char *af = taprt_scratch((M * K + K * N + M * N) * es);
	if (!af) {
		taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
		return;
	}
	char *bf = af + M * K * es, *cf = bf + K * N * es;
	if (K == 0)
		memset(cf, 0, M * N * es);
	for (int64_t i = 0, pa = -1, pb = -1; i < batch; i++) {
		int64_t r = i, oa = 0, ob = 0;
		for (int d = nb - 1; d >= 0; d--) {
			oa += r % y->dims[d] * sa[d];
			ob += r % y->dims[d] * sb[d];
			r /= y->dims[d];
		}
		if (oa != pa) /* a broadcast operand is converted once */
			qconvert(af, dbl, a->data, a->dtype, oa, M, K, K, za, false, 0);
		if (ob != pb)
			qconvert(bf, dbl, b->data, b->dtype, ob, K, N, N, zb, true, 0);
		pa = oa;
		pb = ob;
		if (K > 0)
			qproduct(dbl, M, N, K, af, bf, cf);
		for (int64_t m = 0; m < M; m++)
			for (int64_t j = 0; j < N; j++)
				qout(&q, y->data, (i * M + m) * N + j, j,
				    qsum(cf, dbl, m * N + j));
	}
	if (kind == QM_FUSED) {
		const int64_t rows = y->numel / N;
		#pragma omp parallel for if (TAPRT_PAR(y->numel)) schedule(static)
		for (int64_t r = 0; r < rows; r++)
			qepilogue(n, y, r, N, &act);
	}
}

void
taprt_op_MatMulInteger(taprt_ctx *cx, const taprt_node *n)
{
	qmatmul(cx, n, "MatMulInteger", QM_INT);
}

void
taprt_op_QLinearMatMul(taprt_ctx *cx, const taprt_node *n)
{
	qmatmul(cx, n, "QLinearMatMul", QM_QLINEAR);
}

/* FusedMatMulInteger (fuse-matmul): act(float(MatMulInteger) * scale +
 * bias + Z), with the f32 operations of the nodes it replaces. */
void
taprt_op_FusedMatMulInteger(taprt_ctx *cx, const taprt_node *n)
{
	qmatmul(cx, n, "FusedMatMulInteger", QM_FUSED);
}

/* ---------------------------------------------------- ConvInteger, QLinearConv */

/* x [N, C, spatial...] (zero point per tensor) and w [M, C/group, k...] (per
 * tensor or per output channel); per image: x less its zero point in float
 * or double (qfloat_ok), im2col (the pads 0, so they count as the zero
 * point), then per group w's rows against the columns.  QLinearConv's inputs are x, x_scale, x_zp,
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
	const bool dbl = !qfloat_ok(Kc, qmax(w->data, w->dtype, 0, M, Kc, Kc, zw, false, 0),
	    qmax(x->data, x->dtype, 0, N * C, isz, isz, zx, false, 0));
	const int64_t es = dbl ? 8 : 4;
	char *wf = taprt_scratch((M * Kc + C * isz + Kc * P + Mg * P) * es);
	if (!wf) {
		taprt_fail(cx, "node '%s' (%s): out of memory", n->name, op);
		return;
	}
	char *xf = wf + M * Kc * es, *col = xf + C * isz * es, *cf = col + Kc * P * es;
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
	qconvert(wf, dbl, w->data, w->dtype, 0, M, Kc, Kc, zw, false, 0);
	for (int64_t b = 0; b < N; b++) {
		qconvert(xf, dbl, x->data, x->dtype, b * C * isz, C, isz, isz, zx, false, 0);
		for (int64_t gi = 0; gi < G; gi++) {
			if (dbl)
				taprt_im2col_f64((const double *)xf + gi * Cg * isz, Cg, &g, (double *)col);
			else
				taprt_im2col_f32((const float *)xf + gi * Cg * isz, Cg, &g, (float *)col);
			qproduct(dbl, Mg, P, Kc, wf + gi * Mg * Kc * es, col, cf);
			for (int64_t m = 0; m < Mg; m++) {
				const int64_t oc = gi * Mg + m;
				int32_t *yi = (int32_t *)y->data + (b * M + oc) * P;
				if (!ql) {
					for (int64_t p = 0; p < P; p++)
						yi[p] = qsum(cf, dbl, m * P + p);
					continue;
				}
				const float mult = xs * ws[n->in[4]->numel == 1 ? 0 : oc] / ys;
				const uint32_t bv = bias ? (uint32_t)((const int32_t *)bias->data)[oc] : 0;
				for (int64_t p = 0; p < P; p++)
					qstore(y->data, y->dtype, (b * M + oc) * P + p,
					    (int32_t)((uint32_t)qsum(cf, dbl, m * P + p) + bv), mult, zy,
					    lo, hi);
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
