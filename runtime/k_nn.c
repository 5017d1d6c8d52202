/*
 * k_nn.c - the compute-heavy kernels: MatMul, Gemm, Conv, ConvTranspose and
 * the pools.
 *
 * Needs: the runtime's GEMM (gemm.c) for f32/f64 products.
 * Output shapes are set by tapc, so every kernel walks the output positions
 * and derives windows from strides and pads; nothing here infers a shape.
 *
 * f32 is the fast path: MatMul folds a batched A against a 2-D B into one
 * sgemm (x[B,T,H] @ W[H,N]); other batches (attention's per-head
 * [T,d] @ [d,T]) are a loop of sgemm calls.  Integer MatMul/Gemm use a
 * naive loop.
 * Conv is im2col + gemm per image and group, with a per-thread scratch
 * buffer (ranks run as threads); a 1x1 stride-1 unpadded Conv skips im2col;
 * depthwise and 1x1 convolutions have their own kernels (conv_dw.c,
 * conv_pw.c), the large ones oneDNN's (conv_dnnl.c).
 * ConvTranspose is the adjoint: one gemm W^T @ X per image and group into
 * the scratch buffer, then col2im adds each product into its output pixel,
 * or, where no two taps meet an output pixel (kernel <= stride), each pixel
 * is written once from its product.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

/* X(dtype, C type, suffix) for every integer type the products support. */
#define INT_TYPES(X)                                                      \
	X(TAPRT_I8, int8_t, i8) X(TAPRT_U8, uint8_t, u8)                  \
	X(TAPRT_I16, int16_t, i16) X(TAPRT_U16, uint16_t, u16)            \
	X(TAPRT_I32, int32_t, i32) X(TAPRT_U32, uint32_t, u32)            \
	X(TAPRT_I64, int64_t, i64) X(TAPRT_U64, uint64_t, u64)
#define FLOAT_TYPES(X) X(TAPRT_F32, float, f32) X(TAPRT_F64, double, f64)
#define ALL_TYPES(X) FLOAT_TYPES(X) INT_TYPES(X)

static void
unsupported(taprt_ctx *cx, const taprt_node *n, const char *op, int dtype)
{
	taprt_fail(cx, "node '%s' (%s): dtype %s not supported", n->name, op,
	    taprt_dtype_name(dtype));
}

/* ------------------------------------------------------------ products */

/*
 * c[M,N] = a[M,K] @ b[K,N], row-major with leading dimensions.  Always
 * BLAS: OpenBLAS's small-matrix kernels beat a plain vectorized loop by
 * 4-7x even at attention's 16x16x16 (measured, one thread).
 */
static void
sgemm_nn(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
    const float *b, int64_t ldb, float *c, int64_t ldc)
{
	taprt_sgemm(false, false, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

static void
dgemm_nn(int64_t M, int64_t N, int64_t K, const double *a, int64_t lda,
    const double *b, int64_t ldb, double *c, int64_t ldc)
{
	taprt_dgemm(false, false, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

/*
 * Integer c[M,N] (=|+=) alpha * a @ b with element strides for a's rows
 * and columns and b's, so Gemm's transposes need no copy.  alpha is applied
 * in double only when it is not 1, keeping plain products exact.
 */
#define NAIVE_GEMM(E, T, s)                                               \
static void                                                               \
naive_gemm_##s(const void *a_, int64_t ar, int64_t ac, const void *b_,    \
    int64_t br, int64_t bc, void *c_, int64_t M, int64_t N, int64_t K,    \
    double alpha, bool acc)                                               \
{                                                                         \
	const T *a = a_, *b = b_;                                         \
	T *c = c_;                                                        \
	for (int64_t i = 0; i < M; i++)                                   \
		for (int64_t j = 0; j < N; j++) {                         \
			T sum = 0;                                        \
			for (int64_t k = 0; k < K; k++)                   \
				sum += a[i * ar + k * ac] * b[k * br + j * bc]; \
			T v = alpha == 1 ? sum : (T)(alpha * (double)sum); \
			c[i * N + j] = acc ? (T)(c[i * N + j] + v) : v;   \
		}                                                         \
}
INT_TYPES(NAIVE_GEMM)
#undef NAIVE_GEMM

/* false: dtype has no naive product */
static bool
naive_gemm(int dtype, const void *a, int64_t ar, int64_t ac, const void *b,
    int64_t br, int64_t bc, void *c, int64_t M, int64_t N, int64_t K,
    double alpha, bool acc)
{
	switch (dtype) {
#define CASE(E, T, s)                                                     \
	case E:                                                           \
		naive_gemm_##s(a, ar, ac, b, br, bc, c, M, N, K, alpha, acc); \
		return true;
	INT_TYPES(CASE)
#undef CASE
	default:
		return false;
	}
}

/* Step a row-major index over dims[0..nd), moving two offsets along. */
static inline void
next_index(int nd, const int64_t *dims, int64_t *idx, const int64_t *sa,
    int64_t *oa, const int64_t *sb, int64_t *ob)
{
	for (int d = nd - 1; d >= 0; d--) {
		*oa += sa[d];
		*ob += sb[d];
		if (++idx[d] < dims[d])
			return;
		*oa -= sa[d] * dims[d];
		*ob -= sb[d] * dims[d];
		idx[d] = 0;
	}
}

/* MatMul's batch strides (internal.h; k_quant.c's products use them too). */
void
taprt_batch_strides(const taprt_tensor *t, int nb, int64_t mat, int64_t *st)
{
	int tb = t->rank > 2 ? t->rank - 2 : 0;
	int64_t s = mat;
	for (int d = nb - 1; d >= 0; d--) {
		int j = d - (nb - tb);
		if (j < 0) {
			st[d] = 0;
			continue;
		}
		st[d] = t->dims[j] == 1 ? 0 : s;
		s *= t->dims[j];
	}
}

void
taprt_op_MatMul(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *a = n->in[0], *b = n->in[1];
	taprt_tensor *y = n->out[0];
	int ra = a->rank, rb = b->rank;
	/* numpy: a 1-D A is [1,K], a 1-D B is [K,1]; those dims then vanish */
	int64_t M = ra >= 2 ? a->dims[ra - 2] : 1;
	int64_t K = ra >= 1 ? a->dims[ra - 1] : 1;
	int64_t N = rb >= 2 ? b->dims[rb - 1] : 1;
	int nb = y->rank - (ra >= 2) - (rb >= 2);
	int es = taprt_dtype_size(y->dtype);

	if (y->numel == 0)
		return;
	if (K == 0) {
		memset(y->data, 0, (size_t)y->numel * es);
		return;
	}
	int64_t batch = 1;
	for (int d = 0; d < nb; d++)
		batch *= y->dims[d];

	/* B without batch dims: A's batch folds into M (one contiguous gemm) */
	if (rb <= 2) {
		M *= batch;
		batch = 1;
		nb = 0;
	}
	int64_t sa[TAPRT_MAX_RANK], sb[TAPRT_MAX_RANK], idx[TAPRT_MAX_RANK] = {0};
	taprt_batch_strides(a, nb, M * K, sa);
	taprt_batch_strides(b, nb, K * N, sb);
	int64_t oa = 0, ob = 0, mn = M * N;

	switch (y->dtype) {
	case TAPRT_F32: {
		const float *ad = a->data, *bd = b->data;
		float *yd = y->data;
		/* a weight's product: B packed once (gemm_pack.c) */
		if (batch == 1 && (n->fixed & 2) && ra >= 2 && rb == 2) {
			int rc = taprt_sgemm_fixed_b(cx, n, false, false, M, N, K, ad, K, bd, N, false,
			    yd, N, NULL, NULL, NULL);
			if (rc < 0)
				taprt_fail(cx, "node '%s' (MatMul): out of memory", n->name);
			if (rc != 0)
				break;
		}
		/* attention's per-head products: too small for the library to
		 * thread, so the batch is split across the rank's threads */
		if (batch > 1 && M * N * K <= (1 << 22) && TAPRT_PAR(batch * M * N)) {
			#pragma omp parallel for schedule(static)
			for (int64_t i = 0; i < batch; i++) {
				int64_t ix[TAPRT_MAX_RANK], r = i, pa = 0, pb = 0;
				for (int d = nb - 1; d >= 0; d--) {
					ix[d] = r % y->dims[d];
					r /= y->dims[d];
					pa += ix[d] * sa[d];
					pb += ix[d] * sb[d];
				}
				sgemm_nn(M, N, K, ad + pa, K, bd + pb, N, yd + i * mn, N);
			}
			break;
		}
		for (int64_t i = 0; i < batch; i++) {
			sgemm_nn(M, N, K, ad + oa, K, bd + ob, N, yd + i * mn, N);
			next_index(nb, y->dims, idx, sa, &oa, sb, &ob);
		}
		break;
	}
	case TAPRT_F64: {
		const double *ad = a->data, *bd = b->data;
		double *yd = y->data;
		for (int64_t i = 0; i < batch; i++) {
			dgemm_nn(M, N, K, ad + oa, K, bd + ob, N, yd + i * mn, N);
			next_index(nb, y->dims, idx, sa, &oa, sb, &ob);
		}
		break;
	}
	default:
		for (int64_t i = 0; i < batch; i++) {
			if (!naive_gemm(y->dtype, (const char *)a->data + oa * es, K, 1,
			    (const char *)b->data + ob * es, N, 1,
			    (char *)y->data + i * mn * es, M, N, K, 1, false)) {
				unsupported(cx, n, "MatMul", y->dtype);
				return;
			}
			next_index(nb, y->dims, idx, sa, &oa, sb, &ob);
		}
	}
}

/*
 * FusedMatMul: act(A @ B + bias + Z), the product by MatMul's kernel and
 * the rest on each output row (bias along the last dim, Z shaped like Y).
 * partial=1 (fuse-matmul's row-parallel product, an AllReduce after it):
 * only the TP group's first rank adds bias and Z, so the sum adds them
 * once.
 */
void
taprt_op_FusedMatMul(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *bias = taprt_input(n, 2), *z = taprt_input(n, 3);
	taprt_tensor *y = n->out[0];
	taprt_act act;
	if (y->dtype != TAPRT_F32 || taprt_act_get(cx, n, &act) != 0) {
		taprt_fail(cx, "node '%s' (FusedMatMul): expected f32 and a known activation",
		    n->name);
		return;
	}
	int64_t N = y->rank ? y->dims[y->rank - 1] : 1;
	if ((bias && bias->numel != N) || (z && z->numel != y->numel)) {
		taprt_fail(cx, "node '%s' (FusedMatMul): bias of %lld or residual of %lld elements"
		    " do not fit the output's %lld", n->name, (long long)(bias ? bias->numel : 0),
		    (long long)(z ? z->numel : 0), (long long)y->numel);
		return;
	}
	float *yd = y->data;
	const float *bd = bias ? bias->data : NULL, *zd = z ? z->data : NULL;
	if (cx->tp_rank != 0 && taprt_attr_int(n, "partial", 0))
		bd = zd = NULL;
	/* a weight's product with the epilogue in it (gemm_pack.c) */
	const taprt_tensor *a = n->in[0], *b = n->in[1];
	if ((n->fixed & 2) && a->rank >= 2 && b->rank == 2 && y->numel > 0 &&
	    a->dims[a->rank - 1] == b->dims[0]) {
		int64_t K = b->dims[0];
		int rc = taprt_sgemm_fixed_b(cx, n, false, false, y->numel / N, N, K, a->data, K,
		    b->data, N, false, yd, N, bd, zd, &act);
		if (rc < 0)
			taprt_fail(cx, "node '%s' (FusedMatMul): out of memory", n->name);
		if (rc != 0)
			return;
	}
	taprt_op_MatMul(cx, n);
	if (cx->error[0] || y->numel == 0 || (!bd && !zd && act.kind == TAPRT_ACT_NONE))
		return;
	int64_t rows = y->numel / N;
	#pragma omp parallel for if (TAPRT_PAR(y->numel)) schedule(static)
	for (int64_t r = 0; r < rows; r++)
		taprt_epilogue_vec_f32(yd + r * N, N, bd, zd ? zd + r * N : NULL, &act);
}

/* y[M,N] = beta * c broadcast (scalar, [N], [1,N], [M,1], [M,N]). */
#define FILL_C(E, T, s)                                                   \
static void                                                               \
fill_c_##s(const void *c_, int64_t rs, int64_t cs, void *y_, int64_t M,   \
    int64_t N, double beta)                                               \
{                                                                         \
	const T *c = c_;                                                  \
	T *y = y_;                                                        \
	for (int64_t i = 0; i < M; i++)                                   \
		for (int64_t j = 0; j < N; j++) {                         \
			T v = c[i * rs + j * cs];                         \
			y[i * N + j] = beta == 1 ? v : (T)(beta * v);     \
		}                                                         \
}
ALL_TYPES(FILL_C)
#undef FILL_C

void
taprt_op_Gemm(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *a = n->in[0], *b = n->in[1];
	const taprt_tensor *c = n->nin > 2 ? n->in[2] : NULL;
	taprt_tensor *y = n->out[0];
	int ta = (int)taprt_attr_int(n, "transA", 0);
	int tb = (int)taprt_attr_int(n, "transB", 0);
	float alpha = taprt_attr_float(n, "alpha", 1.0f);
	float beta = taprt_attr_float(n, "beta", 1.0f);
	int64_t M = y->dims[0], N = y->dims[1];
	int64_t K = ta ? a->dims[0] : a->dims[1];
	int es = taprt_dtype_size(y->dtype);

	if (y->numel == 0)
		return;
	/* beta 0 drops C entirely, as BLAS does */
	bool have_c = c && beta != 0;
	if (have_c) {
		int64_t cm = c->rank == 2 ? c->dims[0] : 1;
		int64_t cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
		int64_t rs = cm == 1 ? 0 : cn, cs = cn == 1 ? 0 : 1;
		switch (y->dtype) {
#define CASE(E, T, s)                                                     \
		case E: fill_c_##s(c->data, rs, cs, y->data, M, N, beta); break;
		ALL_TYPES(CASE)
#undef CASE
		default:
			unsupported(cx, n, "Gemm", y->dtype);
			return;
		}
	}
	if (K == 0) {
		if (!have_c)
			memset(y->data, 0, (size_t)y->numel * es);
		return;
	}
	float yb = have_c ? 1.0f : 0.0f;
	int64_t lda = a->dims[1], ldb = b->dims[1];
	switch (y->dtype) {
	case TAPRT_F32: {
		/* a weight's product: B packed once (gemm_pack.c) */
		int rc = alpha == 1 && (n->fixed & 2) ? taprt_sgemm_fixed_b(cx, n, ta, tb, M, N, K,
		    a->data, lda, b->data, ldb, have_c, y->data, N, NULL, NULL, NULL) : 0;
		if (rc < 0)
			taprt_fail(cx, "node '%s' (Gemm): out of memory", n->name);
		if (rc == 0)
			taprt_sgemm(ta, tb, M, N, K, alpha, a->data, lda, b->data, ldb, yb, y->data,
			    N);
		break;
	}
	case TAPRT_F64:
		taprt_dgemm(ta, tb, M, N, K, alpha, a->data, lda, b->data, ldb, yb, y->data, N);
		break;
	default:
		/* element strides of op(A) rows/cols and op(B) rows/cols */
		if (!naive_gemm(y->dtype, a->data, ta ? 1 : lda, ta ? lda : 1,
		    b->data, tb ? 1 : ldb, tb ? ldb : 1, y->data, M, N, K, alpha,
		    have_c))
			unsupported(cx, n, "Gemm", y->dtype);
	}
}

/* ------------------------------------------------------ windows (Conv, pools) */

/* The geometry of a Conv or pool (internal.h: k_quant.c's integer
 * convolutions share it and im2col). */
typedef taprt_geom geom;

/* Fill g from the attributes (internal.h). */
int
taprt_geom_get(taprt_ctx *cx, const taprt_node *n, const char *op,
    const taprt_tensor *x, const taprt_tensor *y, const int64_t *kdims,
    geom *g)
{
	int ns = x->rank - 2;
	if (ns < 1 || ns > 3) {
		taprt_fail(cx, "node '%s' (%s): %d spatial dims, expected 1 to 3",
		    n->name, op, ns);
		return -1;
	}
	int64_t ks[3], st[3], dil[3], pads[6] = {0};
	int nk = taprt_ints(n, -1, "kernel_shape", ks, 3);
	if (nk < 0 && kdims) {
		memcpy(ks, kdims, ns * sizeof *ks);
		nk = ns;
	}
	int nst = taprt_ints(n, -1, "strides", st, 3);
	int nd = taprt_ints(n, -1, "dilations", dil, 3);
	int np = taprt_ints(n, -1, "pads", pads, 6);
	if (nk != ns || (nst >= 0 && nst != ns) || (nd >= 0 && nd != ns) ||
	    (np >= 0 && np != 2 * ns)) {
		taprt_fail(cx, "node '%s' (%s): kernel_shape/strides/dilations/pads do"
		    " not match %d spatial dims", n->name, op, ns);
		return -1;
	}
	const char *ap = taprt_attr_str(n, "auto_pad", "NOTSET");
	int off = 3 - ns;
	g->planes = x->dims[0] * x->dims[1];
	g->isz = g->osz = 1;
	for (int d = 0; d < 3; d++) {
		int i = d - off;
		if (i < 0) {
			g->in[d] = g->out[d] = g->k[d] = g->st[d] = g->dil[d] = 1;
			g->pb[d] = g->pe[d] = 0;
			continue;
		}
		g->in[d] = x->dims[2 + i];
		g->out[d] = y->dims[2 + i];
		g->k[d] = ks[i];
		g->st[d] = nst < 0 ? 1 : st[i];
		g->dil[d] = nd < 0 ? 1 : dil[i];
		g->pb[d] = pads[i];
		g->pe[d] = pads[ns + i];
		g->isz *= g->in[d];
		g->osz *= g->out[d];
		/* the ONNX auto_pad formula, from the output size tapc computed */
		if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			int64_t tot = (g->out[d] - 1) * g->st[d] +
			    (g->k[d] - 1) * g->dil[d] + 1 - g->in[d];
			if (tot < 0)
				tot = 0;
			g->pb[d] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
			g->pe[d] = tot - g->pb[d];
		} else if (!strcmp(ap, "VALID")) {
			g->pb[d] = g->pe[d] = 0;
		}
		if (g->k[d] < 1 || g->st[d] < 1 || g->dil[d] < 1) {
			taprt_fail(cx, "node '%s' (%s): kernel %lld stride %lld dilation"
			    " %lld, expected positive", n->name, op, (long long)g->k[d],
			    (long long)g->st[d], (long long)g->dil[d]);
			return -1;
		}
	}
	return 0;
}

/* ceil(a / s) for s > 0 and any sign of a, clamped to [0, hi]. */
static inline int64_t
ceil_clamp(int64_t a, int64_t s, int64_t hi)
{
	int64_t q = a >= 0 ? (a + s - 1) / s : -(-a / s);
	return q < 0 ? 0 : q > hi ? hi : q;
}

/*
 * col[C * k0*k1*k2, out0*out1*out2] from one image x[C, in0, in1, in2]:
 * row (c, kd, kh, kw) holds x at every output position's tap, 0 in pads.
 * The valid output columns of a tap are a range, found once per kw.
 */
#define IM2COL(E, T, s)                                                   \
static void                                                               \
im2col_##s(const T *x, int64_t C, const geom *g, T *col)                  \
{                                                                         \
	const int64_t O0 = g->out[0], O1 = g->out[1], O2 = g->out[2];     \
	const int64_t I0 = g->in[0], I1 = g->in[1], I2 = g->in[2];        \
	for (int64_t c = 0; c < C; c++)                                   \
	for (int64_t kd = 0; kd < g->k[0]; kd++)                          \
	for (int64_t kh = 0; kh < g->k[1]; kh++)                          \
	for (int64_t kw = 0; kw < g->k[2]; kw++) {                        \
		int64_t base = kw * g->dil[2] - g->pb[2];                 \
		int64_t lo = ceil_clamp(-base, g->st[2], O2);             \
		int64_t hi = ceil_clamp(I2 - base, g->st[2], O2);         \
		if (hi < lo)                                              \
			hi = lo;                                          \
		for (int64_t od = 0; od < O0; od++) {                     \
			int64_t id = od * g->st[0] - g->pb[0] + kd * g->dil[0]; \
			for (int64_t oh = 0; oh < O1; oh++, col += O2) {  \
				int64_t ih = oh * g->st[1] - g->pb[1] +   \
				    kh * g->dil[1];                       \
				if (id < 0 || id >= I0 || ih < 0 || ih >= I1) { \
					memset(col, 0, O2 * sizeof *col); \
					continue;                         \
				}                                         \
				const T *xr = x + ((c * I0 + id) * I1 + ih) * I2; \
				for (int64_t ow = 0; ow < lo; ow++)       \
					col[ow] = 0;                      \
				if (g->st[2] == 1 && hi > lo)             \
					memcpy(col + lo, xr + lo + base,  \
					    (hi - lo) * sizeof *col);     \
				else                                      \
					for (int64_t ow = lo; ow < hi; ow++) \
						col[ow] = xr[ow * g->st[2] + base]; \
				for (int64_t ow = hi; ow < O2; ow++)      \
					col[ow] = 0;                      \
			}                                                 \
		}                                                         \
	}                                                                 \
}
FLOAT_TYPES(IM2COL)
#undef IM2COL

/* im2col for k_quant.c's integer convolutions (internal.h) */
void
taprt_im2col_f32(const float *x, int64_t C, const taprt_geom *g, float *col)
{
	im2col_f32(x, C, g, col);
}

void
taprt_im2col_f64(const double *x, int64_t C, const taprt_geom *g, double *col)
{
	im2col_f64(x, C, g, col);
}


/* ------------------------------------------------ activations, epilogues */

int
taprt_act_get(taprt_ctx *cx, const taprt_node *n, taprt_act *a)
{
	return taprt_act_named(cx, n, "activation", "activation_params", a);
}

int
taprt_act_named(taprt_ctx *cx, const taprt_node *n, const char *name, const char *params,
    taprt_act *a)
{
	const char *s = taprt_attr_str(n, name, "");
	const taprt_attr *p = taprt_attr_get(n, params);
	*a = (taprt_act){TAPRT_ACT_NONE, 0, 0};
	if (!*s)
		return 0;
	/* a kernel reads only its kind's params */
#define ACT(NAME, KIND, D0, D1)                                           \
	if (!strcmp(s, #NAME)) {                                          \
		*a = (taprt_act){TAPRT_ACT_##KIND, p && p->n > 0 ? p->fs[0] : D0, \
			p && p->n > 1 ? p->fs[1] : D1};                   \
		if (a->kind == TAPRT_ACT_CLIP && a->a > a->b)             \
			a->a = a->b; /* Clip's min above its max: all max */ \
		return 0;                                                 \
	}
#include "runtime/taprt_acts.def"
#undef ACT
	return taprt_fail(cx, "node '%s': unknown fused activation '%s'", n->name, s);
}

/* EPI(expression of v) for a's activation, the same expressions as
 * k_elementwise.c's kernels: one loop per activation, so each vectorizes. */
#define ACT_SWITCH(a, EPI)                                                \
	const float lo = (a)->a, hi = (a)->b;                             \
	switch ((a)->kind) {                                              \
	case TAPRT_ACT_RELU: EPI(v < 0 ? 0 : v)                           \
	case TAPRT_ACT_CLIP: EPI(v < lo ? lo : v > hi ? hi : v)           \
	case TAPRT_ACT_HARDSIGMOID: EPI(TAPRT_CLAMP01(lo * v + hi))      \
	case TAPRT_ACT_HARDSWISH:                                          \
		EPI(v * TAPRT_CLAMP01(v * (1.0f / 6) + 0.5f))               \
	case TAPRT_ACT_LEAKYRELU: EPI(v < 0 ? lo * v : v)                 \
	case TAPRT_ACT_GELU: EPI(taprt_gelu_f32(v, lo))                   \
	default: EPI(v)                                                   \
	}

/* y[i] = act(y[i] + bias + z[i]) */
TAPRT_CLONES void
taprt_epilogue_f32(float *restrict y, int64_t n, float bias, const float *restrict z,
    const taprt_act *a)
{
#define EPI(EXPR)                                                         \
	if (z)                                                            \
		for (int64_t i = 0; i < n; i++) {                         \
			float v = y[i] + bias + z[i];                     \
			y[i] = EXPR;                                      \
		}                                                         \
	else                                                              \
		for (int64_t i = 0; i < n; i++) {                         \
			float v = y[i] + bias;                            \
			y[i] = EXPR;                                      \
		}                                                         \
	return;
	ACT_SWITCH(a, EPI)
#undef EPI
}

TAPRT_CLONES void
taprt_epilogue_vec_f32(float *restrict y, int64_t n, const float *restrict bias,
    const float *restrict z, const taprt_act *a)
{
#define EPI(EXPR)                                                         \
	for (int64_t i = 0; i < n; i++) {                                 \
		float v = y[i];                                           \
		if (bias)                                                 \
			v += bias[i];                                     \
		if (z)                                                    \
			v += z[i];                                        \
		y[i] = EXPR;                                              \
	}                                                                 \
	return;
	ACT_SWITCH(a, EPI)
#undef EPI
}

/* ----------------------------------------------------------------- Conv */

/*
 * Direct 2-D convolution for strides 1 and 2, dilation 1: a plane is
 * copied once into a zero-padded buffer (for stride 2 as four phase
 * planes: even/odd rows x even/odd columns), so that every tap reads one
 * contiguous run: acc[i] += w * src[i + tap offset] over the whole plane at
 * the buffer's row pitch -- long loops that vectorize even on 7x7 planes --
 * and the valid columns of acc are the output.  Small convolutions (few
 * input channels and taps, where im2col and a GEMM call cost more than the
 * arithmetic) and depthwise ones with a channel multiplier run this way.
 */
typedef struct {
	int64_t hp, wp;                 /* the padded extent the output reads */
	int64_t hq, wq;                 /* a phase plane's extent (stride 2) */
	int64_t pitch, len;             /* acc's row pitch; acc elements used */
	int64_t plane;                  /* floats of one padded plane (+ phases) */
} dplan;

static void
dplan_get(const geom *g, dplan *d)
{
	d->hp = (g->out[1] - 1) * g->st[1] + g->k[1];
	d->wp = (g->out[2] - 1) * g->st[2] + g->k[2];
	d->hq = (d->hp + 1) / 2 + 1;
	d->wq = (d->wp + 1) / 2 + 1;
	d->pitch = g->st[1] == 1 ? d->wp : d->wq;
	d->len = (g->out[1] - 1) * d->pitch + g->out[2];
	d->plane = g->st[1] == 1 ? d->hp * d->wp : 4 * d->hq * d->wq;
}

/*
 * A convolution of one depth slice into one: the 2-D kernels' case.  A 3-D
 * Conv of depth 1 and kernel depth 1 is not one when the depth pads add
 * output slices (torch's Conv3d((1, 3, 3), padding=1): pads of 1 give an
 * output of depth 3, two of them the bias alone) or shift the one there is.
 */
static bool
planar(const geom *g)
{
	return g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 && g->pb[0] == 0;
}

static bool
direct_ok(const geom *g)
{
	return planar(g) && g->dil[1] == 1 && g->dil[2] == 1 &&
	    (g->st[1] == 1 || g->st[1] == 2) && g->st[2] == g->st[1];
}

/* Rows [r0, r1) of plane x padded into buf (dplan's plane floats): one
 * plane (stride 1), or four phase planes (stride 2), phase (a, b) at
 * (a * 2 + b) * hq * wq holding the padded plane's rows a, a+2, ... and
 * columns b, b+2, ...; a row range is the same range of each phase plane.
 * A stride-2 row fills both column phases in one pass over the input
 * row.  The rows stay loops, not memcpy/memset calls: they are 8 to 113
 * floats, and the calls cost more than the copies (a quarter of an 8x8
 * Conv's time). */
TAPRT_CLONES __attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
pad_rows_f32(const float *restrict x, const geom *g, const dplan *d, float *restrict buf,
    int64_t r0, int64_t r1)
{
	const int64_t IH = g->in[1], IW = g->in[2], PH = g->pb[1], PW = g->pb[2];
	if (g->st[1] == 1) {
		const int64_t cols = d->wp;
		/* column c reads input column c - PW: inside for c in [c0, c1) */
		int64_t c0 = PW < cols ? PW : cols, c1 = IW + PW;
		c1 = c1 < c0 ? c0 : c1 > cols ? cols : c1;
		for (int64_t r = r0; r < r1; r++) {
			float *restrict row = buf + r * cols;
			int64_t ih = r - PH, c = 0;
			if (ih >= 0 && ih < IH) {
				const float *restrict xr = x + ih * IW;
				for (; c < c0; c++)
					row[c] = 0;
				for (; c < c1; c++)
					row[c] = xr[c - PW];
			}
			for (; c < cols; c++)
				row[c] = 0;
		}
		return;
	}
	const int64_t rows = d->hq, cols = d->wq;
	/* phase b's column c reads input column 2c + b - PW: inside for c in
	 * [lo[b], hi[b]); both inside for c in [m0, m1) */
	int64_t lo[2], hi[2];
	for (int b = 0; b < 2; b++) {
		lo[b] = (PW - b + 1) / 2;
		lo[b] = lo[b] < 0 ? 0 : lo[b] > cols ? cols : lo[b];
		hi[b] = (IW + PW - b + 1) / 2;
		hi[b] = hi[b] < lo[b] ? lo[b] : hi[b] > cols ? cols : hi[b];
	}
	int64_t m0 = lo[0] > lo[1] ? lo[0] : lo[1], m1 = hi[0] < hi[1] ? hi[0] : hi[1];
	m1 = m1 < m0 ? m0 : m1;
	for (int a = 0; a < 2; a++)
		for (int64_t r = r0; r < r1; r++) {
			float *restrict p0 = buf + (2 * a * rows + r) * cols;
			float *restrict p1 = p0 + rows * cols;
			int64_t ih = 2 * r + a - PH;
			if (ih < 0 || ih >= IH) {
				for (int64_t c = 0; c < cols; c++)
					p0[c] = p1[c] = 0;
				continue;
			}
			const float *restrict xr = x + ih * IW;
			int64_t c = 0;
			for (; c < m0; c++) {
				p0[c] = c >= lo[0] && c < hi[0] ? xr[2 * c - PW] : 0;
				p1[c] = c >= lo[1] && c < hi[1] ? xr[2 * c + 1 - PW] : 0;
			}
			for (; c < m1; c++) {
				p0[c] = xr[2 * c - PW];
				p1[c] = xr[2 * c + 1 - PW];
			}
			for (; c < cols; c++) {
				p0[c] = c >= lo[0] && c < hi[0] ? xr[2 * c - PW] : 0;
				p1[c] = c >= lo[1] && c < hi[1] ? xr[2 * c + 1 - PW] : 0;
			}
		}
}

/* The run tap (kh, kw) reads from the padded planes (channel 0's; the
 * offsets are the same in every plane). */
static inline int64_t
tap_off(const geom *g, const dplan *d, int64_t kh, int64_t kw)
{
	return g->st[1] == 1 ? kh * d->pitch + kw :
	    ((kh & 1) * 2 + (kw & 1)) * d->hq * d->wq + (kh >> 1) * d->pitch + (kw >> 1);
}

/* y's plane from acc: the valid columns, with bias, residual, activation,
 * in one pass (a memcpy per row and an epilogue call cost more than the
 * arithmetic on 8x8 planes). */
TAPRT_CLONES static void
unpad_f32(const float *restrict acc, int64_t pitch, int64_t OH, int64_t OW, float *restrict y,
    float bias, const float *restrict z, const taprt_act *a)
{
#define EPI(EXPR)                                                         \
	for (int64_t oh = 0; oh < OH; oh++, acc += pitch, y += OW) {      \
		if (z)                                                    \
			for (int64_t i = 0; i < OW; i++) {                \
				float v = acc[i] + bias + z[i];           \
				y[i] = EXPR;                              \
			}                                                 \
		else                                                      \
			for (int64_t i = 0; i < OW; i++) {                \
				float v = acc[i] + bias;                  \
				y[i] = EXPR;                              \
			}                                                 \
		if (z)                                                    \
			z += OW;                                          \
	}                                                                 \
	return;
	ACT_SWITCH(a, EPI)
#undef EPI
}

/*
 * The direct kernel proper: out[m][i] = sum over channels c and taps t of
 * w[m][c][t] * plane_c[i + off(t)], for i in blocks of positions and up
 * to MB filters at a time, so each loaded input vector feeds MB
 * accumulators held in registers and each broadcast weight the block's
 * vectors.  planes holds Cg padded planes `stride` floats apart, with
 * slack after the last one for the rounded-up 16-position blocks (whose
 * extra columns are never output).
 *
 * Written once per vector width (DK_IMPL) and chosen from the CPU
 * (taprt_isa), since the register tile is what makes it fast: 8 filters x
 * three 16-float vectors with AVX-512 (24 of 32 registers; with one
 * vector, a tap's 8 broadcasts and its vector load fed only 8 multiply-adds
 * and the loads set the pace: MobileNetV3's first layer 199 -> 175 us),
 * 6 filters x two 8-float vectors with AVX2 (12 of 16).  The AVX2 code was
 * a clone of the AVX-512 one before, and GCC kept its eight 64-byte
 * accumulators on the stack: MobileNetV3's first layer took 1.9 ms instead
 * of 0.35.  Other CPUs take the portable instance, p16.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DK_X86 1
#endif

/* dk_tile_S: one block of nv vectors of positions from i0 x mb <= MB
 * filters (mb and nv constant after inlining); dk_block_S: positions [0,
 * n) (n a multiple of 16) in blocks of NB vectors, the rest 16 positions
 * at a time; dk_kernel_S: every filter, MB at a time. */
#define DK_IMPL(S, VW, MB, NB)                                                    \
typedef float dkv_##S __attribute__((vector_size(VW * 4), aligned(4)));           \
                                                                                  \
static inline __attribute__((always_inline, DK_ATTR_##S)) void                    \
dk_tile_##S(const float *restrict planes, int64_t stride, const int64_t *restrict off, \
    int64_t ntaps, const float *restrict w, int64_t Cg, float *restrict out,      \
    int64_t lenr, int64_t m0, int64_t i0, int mb, int nv)                         \
{                                                                                 \
	dkv_##S acc[MB][NB];                                                      \
	for (int mm = 0; mm < mb; mm++)                                           \
		for (int j = 0; j < nv; j++)                                      \
			acc[mm][j] = (dkv_##S){0};                                \
	for (int64_t c = 0; c < Cg; c++) {                                        \
		const float *pc = planes + c * stride + i0;                       \
		const float *wc = w + (m0 * Cg + c) * ntaps;                      \
		for (int64_t t = 0; t < ntaps; t++) {                             \
			dkv_##S v[NB];                                            \
			for (int j = 0; j < nv; j++)                              \
				v[j] = *(const dkv_##S *)(pc + off[t] + j * VW);  \
			for (int mm = 0; mm < mb; mm++) {                         \
				dkv_##S wv = wc[mm * Cg * ntaps + t] - (dkv_##S){0}; \
				for (int j = 0; j < nv; j++)                      \
					acc[mm][j] += wv * v[j];                  \
			}                                                         \
		}                                                                 \
	}                                                                         \
	for (int mm = 0; mm < mb; mm++)                                           \
		for (int j = 0; j < nv; j++)                                      \
			*(dkv_##S *)(out + (m0 + mm) * lenr + i0 + j * VW) = acc[mm][j]; \
}                                                                                 \
                                                                                  \
static inline __attribute__((always_inline, DK_ATTR_##S)) void                    \
dk_block_##S(const float *restrict planes, int64_t stride, const int64_t *restrict off, \
    int64_t ntaps, const float *restrict w, int64_t Cg, float *restrict out, int64_t n, \
    int64_t lenr, int64_t m0, int mb)                                             \
{                                                                                 \
	int64_t i0 = 0;                                                           \
	for (; i0 + NB * VW <= n; i0 += NB * VW)                                  \
		dk_tile_##S(planes, stride, off, ntaps, w, Cg, out, lenr, m0, i0, mb, NB); \
	for (; i0 < n; i0 += 16)                                                  \
		dk_tile_##S(planes, stride, off, ntaps, w, Cg, out, lenr, m0, i0, mb, 16 / VW); \
}                                                                                 \
                                                                                  \
static __attribute__((DK_ATTR_##S)) void                                          \
dk_kernel_##S(const float *restrict planes, int64_t stride, const int64_t *restrict off, \
    int64_t ntaps, const float *restrict w, int64_t Cg, int64_t Mg, float *restrict out, \
    int64_t n, int64_t lenr)                                                      \
{                                                                                 \
	for (int64_t m0 = 0; m0 < Mg; m0 += MB) {                                 \
		/* a constant mb, so that the filter loop unrolls and the      \
		 * accumulators stay in registers */                              \
		switch (Mg - m0 < MB ? (int)(Mg - m0) : MB) {                     \
		DK_CASES_##S                                                      \
		}                                                                 \
	}                                                                         \
}

#define DK_C(S, K)                                                                \
	case K:                                                                   \
		dk_block_##S(planes, stride, off, ntaps, w, Cg, out, n, lenr, m0, K); \
		break;
#define DK_CASES_y8 DK_C(y8, 1) DK_C(y8, 2) DK_C(y8, 3) DK_C(y8, 4) DK_C(y8, 5) DK_C(y8, 6)
#define DK_CASES_z16 DK_C(z16, 1) DK_C(z16, 2) DK_C(z16, 3) DK_C(z16, 4) DK_C(z16, 5) \
	DK_C(z16, 6) DK_C(z16, 7) DK_C(z16, 8)
#define DK_CASES_p16 DK_C(p16, 1) DK_C(p16, 2) DK_C(p16, 3) DK_C(p16, 4) DK_C(p16, 5) \
	DK_C(p16, 6) DK_C(p16, 7) DK_C(p16, 8)
/* fp-contract: the multiply-adds as fused ones where the CPU has them
 * (-std=c11 turns the contraction off) */
#define DK_ATTR_z16 target("arch=x86-64-v4"), optimize("fp-contract=fast")
#define DK_ATTR_y8 target("arch=x86-64-v3"), optimize("fp-contract=fast")
#define DK_ATTR_p16 optimize("fp-contract=fast")
#ifdef DK_X86
DK_IMPL(z16, 16, 8, 3)
DK_IMPL(y8, 8, 6, 2)
#endif
/* the portable kernel: 8 filters x 16 positions in the compiler's generic
 * vectors */
DK_IMPL(p16, 16, 8, 1)

static void
direct_kernel_f32(const float *restrict planes, int64_t stride, const int64_t *restrict off,
    int64_t ntaps, const float *restrict w, int64_t Cg, int64_t Mg, float *restrict out,
    int64_t n, int64_t lenr)
{
#ifdef DK_X86
	int isa = taprt_isa();
	if (isa >= TAPRT_ISA_AVX512) {
		dk_kernel_z16(planes, stride, off, ntaps, w, Cg, Mg, out, n, lenr);
		return;
	}
	if (isa >= TAPRT_ISA_AVX2) {
		dk_kernel_y8(planes, stride, off, ntaps, w, Cg, Mg, out, n, lenr);
		return;
	}
#endif
	dk_kernel_p16(planes, stride, off, ntaps, w, Cg, Mg, out, n, lenr);
}

/* Output rows per chunk of a direct Conv: the chunk's accumulators (Mg
 * rows of direct_lenc floats) stay in L2, about 128 KiB, until its rows
 * are written out. */
static int64_t
direct_chunk_rows(const geom *g, const dplan *d, int64_t Mg)
{
	int64_t r = 32768 / (Mg * d->pitch);
	return r < 1 ? 1 : r > g->out[1] ? g->out[1] : r;
}

/* A chunk's positions: from up to 15 before its first row (whole blocks of
 * 16) to its last row's end, rounded up to a block. */
static int64_t
direct_lenc(const geom *g, const dplan *d, int64_t Mg)
{
	return (direct_chunk_rows(g, d, Mg) * d->pitch + 15 + 15) & ~(int64_t)15;
}

/* Where a thread's chunk accumulators start in its part of the buffer:
 * after the padded planes and their slack. */
static int64_t
direct_acc_at(const dplan *d, int64_t Cg)
{
	return (Cg * d->plane + 64 + 15) & ~(int64_t)15;
}

/* Floats of one thread's part of an image's group's buffer: the padded
 * planes, slack, and the chunk accumulators. */
static int64_t
direct_part(const geom *g, const dplan *d, int64_t Cg, int64_t Mg)
{
	return direct_acc_at(d, Cg) + Mg * direct_lenc(g, d, Mg);
}

/* Floats of one image's group's buffer: a part for each of nthr threads. */
static int64_t
direct_buf_floats(const geom *g, const dplan *d, int64_t Cg, int64_t Mg, int nthr)
{
	return nthr * direct_part(g, d, Cg, Mg);
}

/* Rows [r0, r1) of every channel's padded planes (pad_rows_f32). */
static void
pad_channels(const float *x, const geom *g, const dplan *d, float *planes, int64_t Cg,
    int64_t r0, int64_t r1)
{
	for (int64_t c = 0; c < Cg; c++)
		pad_rows_f32(x + c * g->isz, g, d, planes + c * d->plane, r0, r1);
}

/* The taps' offsets into a padded plane. */
static void
direct_taps(const geom *g, const dplan *d, int64_t *off)
{
	for (int64_t kh = 0; kh < g->k[1]; kh++)
		for (int64_t kw = 0; kw < g->k[2]; kw++)
			off[kh * g->k[2] + kw] = tap_off(g, d, kh, kw);
}

/* Zeros in the slack after the last plane (the rounded-up blocks read it). */
static void
direct_slack(const dplan *d, float *planes, int64_t Cg)
{
	for (int64_t i = Cg * d->plane; i < Cg * d->plane + 64; i++)
		planes[i] = 0;
}

/* Output rows [oh0, oh1) of a direct Conv, a chunk of rows at a time: the
 * rows of the padded planes the chunk reads that are not padded yet (each
 * chunk pads the rows after the last one's, so they are in L1/L2 when the
 * kernel reads them, not written for the whole image first and read back
 * from L3), the chunk's positions for every filter into acc (direct_lenc
 * floats per filter; a chunk starts at the block holding its first row,
 * so up to 15 positions of the row before are computed twice), then its
 * rows out with the epilogue while acc is in cache.  planes are this
 * thread's own, with slack after the last one (zeroed here).  Positions
 * past a chunk's last row that only its rounded-up last block computes
 * may read rows not padded yet; they are never output. */
static void
direct_rows(const float *x, float *planes, const int64_t *off, const float *w,
    const float *bias, const float *z, float *y, int64_t Cg, int64_t Mg, const geom *g,
    const dplan *d, float *acc, int64_t oh0, int64_t oh1, const taprt_act *act)
{
	const int64_t KK = g->k[1] * g->k[2], P = g->osz, OW = g->out[2], pitch = d->pitch;
	const int64_t ch = direct_chunk_rows(g, d, Mg), lenc = direct_lenc(g, d, Mg);
	/* a plane's rows (a phase plane's at stride 2), and the furthest a
	 * tap reads past its position inside one */
	const int64_t rows = g->st[1] == 1 ? d->hp : d->hq;
	const int64_t reach = g->st[1] == 1 ? (g->k[1] - 1) * pitch + g->k[2] - 1 :
	    (g->k[1] - 1) / 2 * pitch + (g->k[2] - 1) / 2;
	int64_t done = -1; /* rows [first, done) are padded */
	direct_slack(d, planes, Cg);
	for (int64_t oh = oh0; oh < oh1; oh += ch) {
		int64_t ohe = oh + ch < oh1 ? oh + ch : oh1;
		int64_t p0 = oh * pitch & ~(int64_t)15, p1 = (ohe - 1) * pitch + OW;
		int64_t n = (p1 - p0 + 15) & ~(int64_t)15;
		int64_t r1 = (p0 + n - 1 + reach) / pitch + 1;
		r1 = r1 < rows ? r1 : rows;
		if (done < 0)
			done = p0 / pitch;
		if (done < r1) {
			pad_channels(x, g, d, planes, Cg, done, r1);
			done = r1;
		}
		direct_kernel_f32(planes + p0, d->plane, off, KK, w, Cg, Mg, acc, n, lenc);
		for (int64_t m = 0; m < Mg; m++)
			unpad_f32(acc + m * lenc + oh * pitch - p0, pitch, ohe - oh, OW,
			    y + m * P + oh * OW, bias ? bias[m] : 0, z ? z + m * P + oh * OW : NULL,
			    act);
	}
}

/*
 * One image's group of a direct Conv: Mg filters over Cg channels; buf
 * holds direct_buf_floats() for one thread, or with par for the team a
 * region started here gets (taprt_team_size()).  With par (one image's
 * group alone: an RGB input's first convolution) each thread computes and
 * writes out one contiguous band of output rows, chunk by chunk, padding
 * the input rows it reads into planes of its own: no barrier between
 * padding and computing (the rows at the bands' edge are padded by both
 * threads).  The band is the rows the next kernel's thread of the same
 * number reads when it splits by rows too (the depthwise convolution
 * does).  Without par the loops run outside OpenMP: a region, even one
 * its if clause makes serial, is a libgomp team, and nested in the
 * caller's per-image loop each costs futex calls (a fifth of a small
 * CNN's time at batch 4).
 */
static void
direct_group_f32(const float *x, const float *w, const float *bias, const float *z, float *y,
    int64_t Cg, int64_t Mg, const geom *g, const dplan *d, float *buf, const taprt_act *act,
    bool par)
{
	const int64_t OH = g->out[1], part = direct_part(g, d, Cg, Mg), at = direct_acc_at(d, Cg);
	int64_t off[64];
	direct_taps(g, d, off);
	if (!par) {
		direct_rows(x, buf, off, w, bias, z, y, Cg, Mg, g, d, buf + at, 0, OH, act);
		return;
	}
	#pragma omp parallel
	{
		int id, T = taprt_team(&id);
		float *mine = buf + id * part;
		direct_rows(x, mine, off, w, bias, z, y, Cg, Mg, g, d, mine + at, OH * id / T,
		    OH * (id + 1) / T, act);
	}
}

/* The same, any stride and dilation: each output row accumulates its taps'
 * input rows over the columns whose tap lies inside the input. */
static void
dw_plane_any_f32(const float *x, const float *w, float *y, const geom *g, float b0)
{
	const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
	const int64_t KH = g->k[1], KW = g->k[2], SH = g->st[1], SW = g->st[2];
	const int64_t DH = g->dil[1], DW = g->dil[2], PH = g->pb[1], PW = g->pb[2];
	for (int64_t oh = 0; oh < OH; oh++) {
		float *yr = y + oh * OW;
		for (int64_t ow = 0; ow < OW; ow++)
			yr[ow] = b0;
		for (int64_t kh = 0; kh < KH; kh++) {
			int64_t ih = oh * SH - PH + kh * DH;
			if (ih < 0 || ih >= IH)
				continue;
			const float *xr = x + ih * IW;
			for (int64_t kw = 0; kw < KW; kw++) {
				int64_t base = kw * DW - PW;
				int64_t lo = ceil_clamp(-base, SW, OW), hi = ceil_clamp(IW - base, SW, OW);
				for (int64_t ow = lo; ow < hi; ow++)
					yr[ow] += w[kh * KW + kw] * xr[ow * SW + base];
			}
		}
	}
}

/* A 2-D (or 1-D: H = 1) convolution's geometry g as conv_dw.c, conv_wino.c
 * and conv_dnnl.c take it: N images of C channels to M. */
static taprt_conv2d
conv2d_of(const geom *g, int64_t N, int64_t C, int64_t M)
{
	return (taprt_conv2d){N, C, g->in[1], g->in[2], M, g->out[1], g->out[2], g->k[1],
		g->k[2], g->st[1], g->st[2], g->dil[1], g->dil[2], g->pb[1], g->pb[2]};
}

/*
 * Conv in f32: y = act(conv(x, w) + bias + z) (z, the residual, and act
 * from FusedConv; NULL and none for Conv).  Depthwise 2-D convolutions run
 * conv_dw.c's kernel; small ones the direct kernel above; a 1x1 stride-1
 * unpadded Conv is W_g[Mg, Cg] @ X_g[Cg, P] on the input as it is
 * (conv_pw.c's kernel from 16 pixels on, else one GEMM), a strided
 * unpadded one the same on the pixels it reads, gathered; the GEMM-sized
 * ones oneDNN's; the rest im2col + GEMM.  The epilogue runs on each
 * group's rows right after its GEMM, while they are in cache.
 */
static int
conv_f32(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w, const float *bias,
    const float *z, float *y, int64_t N, int64_t C, int64_t M, int64_t G, const geom *g,
    const taprt_act *act)
{
	int64_t Cg = C / G, Mg = M / G;
	int64_t KK = g->k[0] * g->k[1] * g->k[2], P = g->osz;
	bool epi = bias || z || act->kind != TAPRT_ACT_NONE;
	/* depthwise 2-D: on blocks of 16 or 8 channels (conv_dw.c) */
	if (Cg == 1 && Mg == 1 && planar(g) && KK > 1) {
		taprt_conv2d c2 = conv2d_of(g, N, C, M);
		int rc = taprt_conv_dw_f32(x, w, bias, z, y, &c2, act, NULL);
		if (rc)
			return rc > 0 ? 0 : -1;
	}
	bool direct = KK == 1 && g->isz == P;
	for (int d = 0; d < 3; d++)
		direct = direct && g->st[d] == 1 && g->pb[d] == 0;
	/* unpadded 1x1: the product and epilogue in one pass (conv_pw.c),
	 * from one vector of pixels (a 1x1 plane is a gemv); at stride 1 on
	 * the input as it is, with strides (ResNet's downsampling shortcuts)
	 * on the pixels it reads, gathered into [C, P] (im2col's layout; a
	 * quarter of the input at stride 2) on the team -- oneDNN transposed
	 * all of the input to its layout and the result back */
	bool pw = KK == 1 && P >= 16;
	for (int d = 0; d < 3; d++)
		pw = pw && g->pb[d] == 0 && g->pe[d] == 0;
	if (pw) {
		float *col = direct ? NULL : taprt_scratch(C * P * (int64_t)sizeof(float));
		if (!direct && !col)
			return -1;
		int rc = 1;
		for (int64_t b = 0; b < N && rc > 0; b++) {
			const float *xb = x + b * C * g->isz;
			if (!direct) {
				#pragma omp parallel for if (TAPRT_PAR(C * P)) schedule(static)
				for (int64_t c = 0; c < C; c++)
					im2col_f32(xb + c * g->isz, 1, g, col + c * P);
				xb = col;
			}
			for (int64_t gi = 0; gi < G && rc > 0; gi++) {
				int64_t o = (b * M + gi * Mg) * P;
				rc = taprt_conv_pw_f32(w + gi * Mg * Cg, xb + gi * Cg * P,
				    bias ? bias + gi * Mg : NULL, z ? z + o : NULL, y + o, Mg, Cg, P, act,
				    direct);
			}
		}
		if (rc)
			return rc > 0 ? 0 : -1;
	}
	/* oneDNN's kernels (conv_dnnl.c), when the build has them, for 2-D
	 * kernels over 16 channels and filters or more (its vectors hold 16
	 * channels: 4x16x8x8 -> 16 3x3 in 7 us there, 11 in the direct
	 * kernel; with 8 channels the direct kernel is faster) and for the
	 * GEMM-sized rest */
	dplan d;
	dplan_get(g, &d);
	bool small = direct_ok(g) && KK > 1 && KK <= 64 &&
	    Cg * d.plane <= (Mg <= 32 ? 1 << 18 : 65536) &&
	    (Cg == 1 || Cg * KK <= 160 || Mg * Cg * KK * P <= 300000);
	if (G == 1 && planar(g) &&
	    ((KK > 1 && C >= 16 && M >= 16) || (!small && M * C * KK * P * N >= (int64_t)1 << 21))) {
		taprt_conv2d c2 = conv2d_of(g, N, C, M);
		/* on an AVX2 CPU, whose oneDNN has no Winograd, tapc's own for 3x3
		 * stride 1 (conv_wino.c) */
		int rc = taprt_conv_wino_f32(cx, n, x, w, bias, z, y, &c2, act);
		if (!rc)
			rc = taprt_conv_dnnl(cx, n, x, w, bias, z, y, &c2, act);
		if (rc)
			return rc > 0 ? 0 : -2;
	}
	/* direct: depthwise with a channel multiplier, or few enough channels
	 * and taps that im2col and the GEMM call cost more than the arithmetic
	 * (measured on the cnn, resnet and unet fixtures' 3..32-channel 3x3
	 * convolutions); planes up to 1 MiB for up to 32 filters (an RGB
	 * image's first 3x3: MobileNetV3's 16 filters 100 us here, 126 on
	 * oneDNN; ResNet's 64 7x7 ones stay faster there, 1.14 ms against 1.38) */
	if (small) {
		int64_t bytes = direct_buf_floats(g, &d, Cg, Mg, 1) * (int64_t)sizeof(float);
		if (N * G == 1) { /* the group's own loops in parallel (no nested team) */
			bool par = TAPRT_PAR(M * P);
			float *buf = taprt_scratch(par ? direct_buf_floats(g, &d, Cg, Mg,
			    taprt_team_size()) * (int64_t)sizeof(float) : bytes);
			if (!buf)
				return -1;
			direct_group_f32(x, w, bias, z, y, Cg, Mg, g, &d, buf, act, par);
			return 0;
		}
		int failed = 0;
		/* groups (and images) in parallel, each thread with its scratch */
		#pragma omp parallel for if (TAPRT_PAR(N * M * P)) schedule(static)
		for (int64_t bg = 0; bg < N * G; bg++) {
			int64_t b = bg / G, gi = bg % G, o = (b * M + gi * Mg) * P;
			float *buf = taprt_scratch(bytes);
			if (!buf) {
				failed = 1;
				continue;
			}
			direct_group_f32(x + (b * C + gi * Cg) * g->isz, w + gi * Mg * Cg * KK,
			    bias ? bias + gi * Mg : NULL, z ? z + o : NULL, y + o, Cg, Mg, g, &d, buf, act,
			    false);
		}
		return failed ? -1 : 0;
	}
	if (Cg == 1 && planar(g) && KK > 1) {
		for (int64_t b = 0; b < N; b++)
			for (int64_t m = 0; m < M; m++) {
				float *yp = y + (b * M + m) * P;
				dw_plane_any_f32(x + (b * C + m / Mg) * g->isz, w + m * KK, yp, g,
				    bias ? bias[m] : 0);
				if (z || act->kind != TAPRT_ACT_NONE)
					taprt_epilogue_f32(yp, P, 0, z ? z + (b * M + m) * P : NULL, act);
			}
		return 0;
	}
	float *col = NULL;
	if (!direct && !(col = taprt_scratch((size_t)Cg * KK * P * sizeof(float))))
		return -1;
	for (int64_t b = 0; b < N; b++)
		for (int64_t gi = 0; gi < G; gi++) {
			const float *xg = x + (b * C + gi * Cg) * g->isz;
			float *yg = y + (b * M + gi * Mg) * P;
			if (!direct)
				im2col_f32(xg, Cg, g, col);
			sgemm_nn(Mg, P, Cg * KK, w + gi * Mg * Cg * KK, Cg * KK, direct ? xg : col, P,
			    yg, P);
			if (epi) {
				#pragma omp parallel for if (TAPRT_PAR(Mg * P)) schedule(static)
				for (int64_t m = 0; m < Mg; m++)
					taprt_epilogue_f32(yg + m * P, P, bias ? bias[gi * Mg + m] : 0,
					    z ? z + (b * M + gi * Mg + m) * P : NULL, act);
			}
		}
	return 0;
}

/* One Conv in type T: per image and group, W_g[Mg, Cg*KK] @ col[Cg*KK, P]. */
#define CONV(T, s, gemm)                                                  \
static int                                                                \
conv_##s(const T *x, const T *w, const T *bias, T *y, int64_t N, int64_t C, \
    int64_t M, int64_t G, const geom *g)                                  \
{                                                                         \
	int64_t Cg = C / G, Mg = M / G;                                   \
	int64_t KK = g->k[0] * g->k[1] * g->k[2], P = g->osz;             \
	bool direct = KK == 1 && g->isz == P;                             \
	for (int d = 0; d < 3; d++)                                       \
		direct = direct && g->st[d] == 1 && g->pb[d] == 0;        \
	T *col = NULL;                                                    \
	if (!direct && !(col = taprt_scratch((size_t)Cg * KK * P * sizeof(T)))) \
		return -1;                                                \
	for (int64_t b = 0; b < N; b++)                                   \
		for (int64_t gi = 0; gi < G; gi++) {                      \
			const T *xg = x + (b * C + gi * Cg) * g->isz;     \
			T *yg = y + (b * M + gi * Mg) * P;                \
			if (!direct)                                      \
				im2col_##s(xg, Cg, g, col);               \
			gemm(Mg, P, Cg * KK, w + gi * Mg * Cg * KK,       \
			    Cg * KK, direct ? xg : col, P, yg, P);        \
			if (bias)                                         \
				for (int64_t m = 0; m < Mg; m++)          \
					for (int64_t p = 0; p < P; p++)   \
						yg[m * P + p] += bias[gi * Mg + m]; \
		}                                                         \
	return 0;                                                         \
}
CONV(double, f64, dgemm_nn)
#undef CONV

/* Conv and FusedConv: fused adds input 3 (the residual z, shaped like y)
 * and applies the node's activation. */
static void
conv_op(taprt_ctx *cx, const taprt_node *n, const char *op, bool fused)
{
	const taprt_tensor *x = n->in[0], *w = n->in[1];
	const taprt_tensor *b = taprt_input(n, 2);
	const taprt_tensor *z = fused ? taprt_input(n, 3) : NULL;
	taprt_tensor *y = n->out[0];
	int64_t G = taprt_attr_int(n, "group", 1);
	int64_t C = x->dims[1], M = w->dims[0];
	taprt_act act = {TAPRT_ACT_NONE, 0, 0};
	geom g;

	if (y->numel == 0)
		return;
	if (G < 1 || C % G || M % G || w->dims[1] != C / G) {
		taprt_fail(cx, "node '%s' (%s): group %lld does not divide %lld input"
		    " channels and %lld filters of %lld channels", n->name, op, (long long)G,
		    (long long)C, (long long)M, (long long)w->dims[1]);
		return;
	}
	if (taprt_geom_get(cx, n, op, x, y, w->dims + 2, &g))
		return;
	if (w->numel == 0) {
		taprt_fail(cx, "node '%s' (%s): empty filters", n->name, op);
		return;
	}
	if (fused && (taprt_act_get(cx, n, &act) || (z && z->numel != y->numel) ||
	    y->dtype != TAPRT_F32)) {
		taprt_fail(cx, "node '%s' (%s): expected f32 and a residual shaped like the output",
		    n->name, op);
		return;
	}
	int rc;
	switch (y->dtype) {
	case TAPRT_F32:
		rc = conv_f32(cx, n, x->data, w->data, b ? b->data : NULL, z ? z->data : NULL,
		    y->data, x->dims[0], C, M, G, &g, &act);
		break;
	case TAPRT_F64:
		rc = conv_f64(x->data, w->data, b ? b->data : NULL, y->data,
		    x->dims[0], C, M, G, &g);
		break;
	default:
		unsupported(cx, n, op, y->dtype);
		return;
	}
	if (rc == -1)
		taprt_fail(cx, "node '%s' (%s): out of memory for the im2col buffer",
		    n->name, op);
}

void
taprt_op_Conv(taprt_ctx *cx, const taprt_node *n)
{
	conv_op(cx, n, "Conv", false);
}

void
taprt_op_FusedConv(taprt_ctx *cx, const taprt_node *n)
{
	conv_op(cx, n, "FusedConv", true);
}

/*
 * FusedConvDw (passes/fuse_dw.c): y = act(DepthwiseConv(act1(W1^T x +
 * B1), W, B)), x [N, C1, spatial...], W1 [C1, C], W [C, 1, k...]; the
 * depthwise Conv's attributes, act1 from expand_activation.  conv_dw.c
 * computes the 1x1's rows as its taps read them.
 */
void
taprt_op_FusedConvDw(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *w1 = n->in[1], *w = n->in[2];
	const taprt_tensor *b1 = taprt_input(n, 3), *b = taprt_input(n, 4);
	taprt_tensor *y = n->out[0];
	taprt_act act, act1;
	geom g;
	if (y->numel == 0)
		return;
	int64_t C1 = x->rank > 1 ? x->dims[1] : 0, C = w->rank ? w->dims[0] : 0;
	if (x->dtype != TAPRT_F32 || y->dtype != TAPRT_F32 || w1->dtype != TAPRT_F32 ||
	    w->dtype != TAPRT_F32 || (b1 && b1->dtype != TAPRT_F32) ||
	    (b && b->dtype != TAPRT_F32) || x->rank < 3 || x->rank > 4 || w->rank != x->rank ||
	    y->rank != x->rank || w1->numel != C1 * C || w->dims[1] != 1 || y->dims[1] != C ||
	    (b1 && b1->numel != C) || (b && b->numel != C)) {
		taprt_fail(cx, "node '%s' (FusedConvDw): expected f32 x [N,C1,...], W1 [C1,C],"
		    " W [C,1,k...], biases [C]", n->name);
		return;
	}
	if (taprt_geom_get(cx, n, "FusedConvDw", x, y, w->dims + 2, &g) ||
	    taprt_act_named(cx, n, "activation", "activation_params", &act) ||
	    taprt_act_named(cx, n, "expand_activation", "expand_activation_params", &act1))
		return;
	taprt_conv2d c2 = conv2d_of(&g, x->dims[0], C, C);
	taprt_conv_expand e = {x->data, w1->data, b1 ? b1->data : NULL, C1, C, &act1};
	int rc = taprt_conv_dw_f32(NULL, w->data, b ? b->data : NULL, NULL, y->data, &c2, &act, &e);
	if (rc < 0)
		taprt_fail(cx, "node '%s' (FusedConvDw): out of memory", n->name);
	else if (rc == 0)
		taprt_fail(cx, "node '%s' (FusedConvDw): a kernel of %lld rows, at most 64",
		    n->name, (long long)g.k[1]);
}

/* ------------------------------------------------------- ConvTranspose */

/*
 * ConvTranspose's geometry in a geom: in/out are X's and Y's spatial
 * sizes, pb the leading pad (output index o is position o + pb of the
 * unpadded result).  With output_shape or SAME_* the pads come from the
 * spec's total padding s*(D-1) + output_padding + (k-1)*d + 1 - O, split
 * with floor division (the lower half at the start for SAME_UPPER, the
 * upper half otherwise); a negative total leaves zeros at the end.
 */
static int
convt_geom(taprt_ctx *cx, const taprt_node *n, const taprt_tensor *x,
    const taprt_tensor *w, const taprt_tensor *y, geom *g)
{
	int ns = x->rank - 2;
	memset(g, 0, sizeof *g);
	if (ns < 1 || ns > 3 || w->rank != x->rank || y->rank != x->rank)
		return taprt_fail(cx, "node '%s' (ConvTranspose): %d spatial dims, expected 1 to 3",
		    n->name, ns);
	int64_t st[3], dil[3], pads[6] = {0}, opad[3] = {0}, os[TAPRT_MAX_RANK];
	int nst = taprt_ints(n, -1, "strides", st, 3);
	int nd = taprt_ints(n, -1, "dilations", dil, 3);
	int np = taprt_ints(n, -1, "pads", pads, 6);
	int nop = taprt_ints(n, -1, "output_padding", opad, 3);
	int nos = taprt_ints(n, -1, "output_shape", os, TAPRT_MAX_RANK);
	if ((nst >= 0 && nst != ns) || (nd >= 0 && nd != ns) || (np >= 0 && np != 2 * ns) ||
	    (nop >= 0 && nop != ns) || (nos >= 0 && nos != ns && nos != x->rank))
		return taprt_fail(cx, "node '%s' (ConvTranspose): strides/dilations/pads/"
		    "output_padding/output_shape do not match %d spatial dims", n->name, ns);
	const char *ap = taprt_attr_str(n, "auto_pad", "NOTSET");
	bool upper = !strcmp(ap, "SAME_UPPER"), same = upper || !strcmp(ap, "SAME_LOWER");
	bool derive = same || nos >= 0;
	int off = 3 - ns;
	g->planes = x->dims[0] * x->dims[1];
	g->isz = g->osz = 1;
	for (int d = 0; d < 3; d++) {
		int i = d - off;
		if (i < 0) {
			g->in[d] = g->out[d] = g->k[d] = g->st[d] = g->dil[d] = 1;
			g->pb[d] = g->pe[d] = 0;
			continue;
		}
		g->in[d] = x->dims[2 + i];
		g->out[d] = y->dims[2 + i];
		g->k[d] = w->dims[2 + i];
		g->st[d] = nst < 0 ? 1 : st[i];
		g->dil[d] = nd < 0 ? 1 : dil[i];
		if (g->k[d] < 1 || g->st[d] < 1 || g->dil[d] < 1 || opad[i] < 0)
			return taprt_fail(cx, "node '%s' (ConvTranspose): kernel %lld stride %lld"
			    " dilation %lld, expected positive", n->name, (long long)g->k[d],
			    (long long)g->st[d], (long long)g->dil[d]);
		g->pb[d] = strcmp(ap, "VALID") ? pads[i] : 0;
		if (derive) {
			int64_t tot = g->st[d] * (g->in[d] - 1) + opad[i] +
			    (g->k[d] - 1) * g->dil[d] + 1 - g->out[d];
			int64_t half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2); /* floor */
			g->pb[d] = upper ? half : tot - half;
		}
		g->pe[d] = 0;           /* unused: the output size bounds the result */
		g->isz *= g->in[d];
		g->osz *= g->out[d];
	}
	return 0;
}

/*
 * col2im, ConvTranspose's scatter: col[Mg * k0*k1*k2, in0*in1*in2] holds
 * every (channel, tap, input position) product; each adds into the output
 * position in*stride - pad + tap*dilation when that lies inside y.  The
 * valid input columns of a tap are a range, found once per kw.  Channels
 * write disjoint planes: they run on the rank's threads.
 */
#define COL2IM(E, T, s)                                                   \
static void                                                               \
col2im_##s(const T *col, int64_t M, const geom *g, T *y)                  \
{                                                                         \
	const int64_t O0 = g->out[0], O1 = g->out[1], O2 = g->out[2];     \
	const int64_t I0 = g->in[0], I1 = g->in[1], I2 = g->in[2];        \
	const int64_t KK = g->k[0] * g->k[1] * g->k[2];                   \
	_Pragma("omp parallel for if (TAPRT_PAR(M * KK * g->isz)) schedule(static)") \
	for (int64_t m = 0; m < M; m++) {                                 \
	const T *colm = col + m * KK * g->isz;                            \
	for (int64_t kd = 0; kd < g->k[0]; kd++)                          \
	for (int64_t kh = 0; kh < g->k[1]; kh++)                          \
	for (int64_t kw = 0; kw < g->k[2]; kw++, colm += g->isz) {        \
		int64_t base = kw * g->dil[2] - g->pb[2];                 \
		int64_t lo = ceil_clamp(-base, g->st[2], I2);             \
		int64_t hi = ceil_clamp(O2 - base, g->st[2], I2);         \
		if (hi <= lo)                                             \
			continue;                                         \
		for (int64_t id = 0; id < I0; id++) {                     \
			int64_t od = id * g->st[0] - g->pb[0] + kd * g->dil[0]; \
			if (od < 0 || od >= O0)                           \
				continue;                                 \
			for (int64_t ih = 0; ih < I1; ih++) {             \
				int64_t oh = ih * g->st[1] - g->pb[1] +   \
				    kh * g->dil[1];                       \
				if (oh < 0 || oh >= O1)                   \
					continue;                         \
				const T *cr = colm + (id * I1 + ih) * I2; \
				T *yr = y + ((m * O0 + od) * O1 + oh) * O2; \
				if (g->st[2] == 1)                        \
					for (int64_t iw = lo; iw < hi; iw++) \
						yr[iw + base] += cr[iw];  \
				else                                      \
					for (int64_t iw = lo; iw < hi; iw++) \
						yr[iw * g->st[2] + base] += cr[iw]; \
			}                                                 \
		}                                                         \
	}                                                                 \
	}                                                                 \
}
FLOAT_TYPES(COL2IM)
#undef COL2IM

/*
 * Taps that never meet: (k - 1) * dilation < stride along every dim (a
 * U-Net's 2x2 stride-2 upsampling, a 1x1 stride-s one).  Then every output
 * position takes at most one product, from the one (input, tap) pair with
 * o + pb = i * stride + tap * dilation, and y is written once from col (a
 * gather) instead of filled with the bias and then added into tap by tap
 * (one pass over y per tap, strided): the segmentation net's 2x2 stride-2
 * layer, per-node minima, 484-504 -> 428-438 us on one thread and 274-281
 * -> 229-232 on two (its product, 0.32 ms on one thread, is the rest).
 */
static bool
convt_disjoint(const geom *g)
{
	for (int d = 0; d < 3; d++)
		if ((g->k[d] - 1) * g->dil[d] >= g->st[d])
			return false;
	return true;
}

/* Output position o along dim d of a disjoint ConvTranspose: the input
 * position it reads, its tap in *k; -1 where no tap reaches o (the
 * output's extra positions, taps shorter than the stride, pads). */
static int64_t
convt_src(const geom *g, int d, int64_t o, int64_t *k)
{
	int64_t p = o + g->pb[d], s = g->st[d];
	int64_t i = p >= 0 ? p / s : -((-p + s - 1) / s);       /* floor */
	int64_t r = p - i * s;
	if (i < 0 || i >= g->in[d] || r % g->dil[d] || r / g->dil[d] >= g->k[d])
		return -1;
	*k = r / g->dil[d];
	return i;
}

/* y[M, out...] of one image and group from col[M * KK, P] (as col2im
 * reads it), each position its product plus the bias, or the bias alone;
 * off[ow] (O2 of them) is the last dim's tap and input position as an
 * offset into a row of col (tap * P + iw), -1 for none.  Rows on the
 * team, split by rows. */
#define CONVT_GATHER(E, T, s)                                             \
static void                                                               \
convt_gather_##s(const T *col, const T *bias, int64_t M, const geom *g,   \
    const int64_t *off, T *y)                                             \
{                                                                         \
	const int64_t O0 = g->out[0], O1 = g->out[1], O2 = g->out[2];     \
	const int64_t P = g->isz, KK = g->k[0] * g->k[1] * g->k[2];       \
	/* the common case, 2 taps of stride 2 covering the row: y's row  \
	 * interleaves two rows of col */                                 \
	const bool pair = g->st[2] == 2 && g->k[2] == 2 && g->dil[2] == 1 && \
	    g->pb[2] == 0 && O2 == 2 * g->in[2];                          \
	_Pragma("omp parallel for if (TAPRT_PAR(M * g->osz)) schedule(static)") \
	for (int64_t r = 0; r < M * O0 * O1; r++) {                       \
		const int64_t m = r / (O0 * O1);                          \
		int64_t kd = 0, kh = 0;                                   \
		const int64_t id = convt_src(g, 0, r / O1 % O0, &kd);     \
		const int64_t ih = convt_src(g, 1, r % O1, &kh);          \
		const T b = bias ? bias[m] : 0;                           \
		T *yr = y + r * O2;                                       \
		if (id < 0 || ih < 0) {                                   \
			for (int64_t ow = 0; ow < O2; ow++)               \
				yr[ow] = b;                               \
			continue;                                         \
		}                                                         \
		const T *c = col + (m * KK + (kd * g->k[1] + kh) * g->k[2]) * P + \
		    (id * g->in[1] + ih) * g->in[2];                      \
		if (pair) {                                               \
			const T *c1 = c + P;                              \
			for (int64_t iw = 0; iw < g->in[2]; iw++) {       \
				yr[2 * iw] = c[iw] + b;                   \
				yr[2 * iw + 1] = c1[iw] + b;              \
			}                                                 \
			continue;                                         \
		}                                                         \
		for (int64_t ow = 0; ow < O2; ow++)                       \
			yr[ow] = off[ow] < 0 ? b : c[off[ow]] + b;        \
	}                                                                 \
}
FLOAT_TYPES(CONVT_GATHER)
#undef CONVT_GATHER

/* One ConvTranspose in type T: per image and group, col = W_g^T @ X_g
 * ([Mg*KK, Cg] x [Cg, P]) by one gemm, then col2im into y (bias first),
 * or, with disjoint taps, the gather above. */
#define CONVT(T, s, gemm_t)                                               \
static int                                                                \
convt_##s(const T *x, const T *w, const T *bias, T *y, int64_t N, int64_t C, \
    int64_t M, int64_t G, const geom *g)                                  \
{                                                                         \
	int64_t Cg = C / G, Mg = M / G;                                   \
	int64_t KK = g->k[0] * g->k[1] * g->k[2], P = g->isz, O = g->osz; \
	const bool disjoint = Cg > 0 && convt_disjoint(g);                \
	int64_t ncol = (Mg * KK * P * (int64_t)sizeof(T) + 63) / 64 * 64; \
	T *col = taprt_scratch(ncol + (disjoint ? g->out[2] * (int64_t)sizeof(int64_t) : 0)); \
	if (!col)                                                         \
		return -1;                                                \
	int64_t *off = (int64_t *)((char *)col + ncol);                   \
	for (int64_t ow = 0; disjoint && ow < g->out[2]; ow++) {          \
		int64_t kw = 0, iw = convt_src(g, 2, ow, &kw);            \
		off[ow] = iw < 0 ? -1 : kw * P + iw;                      \
	}                                                                 \
	for (int64_t b = 0; b < N; b++)                                   \
		for (int64_t gi = 0; gi < G; gi++) {                      \
			T *yg = y + (b * M + gi * Mg) * O;                \
			if (disjoint) {                                   \
				gemm_t(Mg * KK, P, Cg, w + gi * Cg * Mg * KK, Mg * KK, \
				    x + (b * C + gi * Cg) * P, P, col, P); \
				convt_gather_##s(col, bias ? bias + gi * Mg : NULL, \
				    Mg, g, off, yg);                      \
				continue;                                 \
			}                                                 \
			_Pragma("omp parallel for if (TAPRT_PAR(Mg * O)) schedule(static)") \
			for (int64_t m = 0; m < Mg; m++) {                \
				T v = bias ? bias[gi * Mg + m] : 0;       \
				for (int64_t p = 0; p < O; p++)           \
					yg[m * O + p] = v;                \
			}                                                 \
			if (Cg == 0)                                      \
				continue;                                 \
			gemm_t(Mg * KK, P, Cg, w + gi * Cg * Mg * KK, Mg * KK, \
			    x + (b * C + gi * Cg) * P, P, col, P);        \
			col2im_##s(col, Mg, g, yg);                       \
		}                                                         \
	return 0;                                                         \
}

/* c[M,N] = a^T @ b with a stored [K, M] (lda) and b [K, N]. */
static void
sgemm_tn(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
    const float *b, int64_t ldb, float *c, int64_t ldc)
{
	taprt_sgemm(true, false, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

static void
dgemm_tn(int64_t M, int64_t N, int64_t K, const double *a, int64_t lda,
    const double *b, int64_t ldb, double *c, int64_t ldc)
{
	taprt_dgemm(true, false, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

CONVT(float, f32, sgemm_tn)
CONVT(double, f64, dgemm_tn)
#undef CONVT

void
taprt_op_ConvTranspose(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *w = n->in[1];
	const taprt_tensor *b = taprt_input(n, 2);
	taprt_tensor *y = n->out[0];
	int64_t G = taprt_attr_int(n, "group", 1);
	int64_t C = x->dims[1], M = y->dims[1];
	geom g;

	if (y->numel == 0)
		return;
	if (G < 1 || C % G || M % G || w->dims[0] != C || w->dims[1] != M / G) {
		taprt_fail(cx, "node '%s' (ConvTranspose): group %lld does not fit %lld input"
		    " and %lld output channels", n->name, (long long)G, (long long)C,
		    (long long)M);
		return;
	}
	if (convt_geom(cx, n, x, w, y, &g))
		return;
	int rc;
	switch (y->dtype) {
	case TAPRT_F32:
		rc = convt_f32(x->data, w->data, b ? b->data : NULL, y->data,
		    x->dims[0], C, M, G, &g);
		break;
	case TAPRT_F64:
		rc = convt_f64(x->data, w->data, b ? b->data : NULL, y->data,
		    x->dims[0], C, M, G, &g);
		break;
	default:
		unsupported(cx, n, "ConvTranspose", y->dtype);
		return;
	}
	if (rc)
		taprt_fail(cx, "node '%s' (ConvTranspose): out of memory for the col2im buffer",
		    n->name);
}

/* --------------------------------------------------------------- pools */

/*
 * Window taps along one dim for output o: first tap index in [k0, k1) and
 * input position start + k * dil; taps outside the input are skipped.
 */
static inline void
taps(const geom *g, int d, int64_t o, int64_t *start, int64_t *k0, int64_t *k1)
{
	int64_t s = o * g->st[d] - g->pb[d];
	*start = s;
	*k0 = ceil_clamp(-s, g->dil[d], g->k[d]);
	*k1 = ceil_clamp(g->in[d] - s, g->dil[d], g->k[d]);
	if (*k1 < *k0)
		*k1 = *k0;
}

/*
 * The common 2-D case, f32: no padding, dilation 1, every window inside the
 * input, no indices.  Fixed window loops with none of taps()' per-output
 * bounds arithmetic; same order of operations as the general loops.
 */
static bool
pool2d_simple(const geom *g)
{
	if (!planar(g))
		return false;
	for (int d = 1; d < 3; d++)
		if (g->pb[d] || g->pe[d] || g->dil[d] != 1 ||
		    (g->out[d] - 1) * g->st[d] + g->k[d] > g->in[d])
			return false;
	return true;
}

/* The 2x2 stride-2 window (UNet's, ResNet-style downsampling): one output
 * row from two input rows, with no per-tap loop; the same order of
 * operations as the general loop below. */
TAPRT_CLONES static void
pool2x2_plane_f32(const float *restrict x, float *restrict y, int64_t IW, int64_t OH,
    int64_t OW, bool avg)
{
	for (int64_t oh = 0; oh < OH; oh++, y += OW) {
		const float *r0 = x + 2 * oh * IW, *r1 = r0 + IW;
		if (avg)
			for (int64_t ow = 0; ow < OW; ow++)
				y[ow] = (((0 + r0[2 * ow]) + r0[2 * ow + 1]) + r1[2 * ow] + r1[2 * ow + 1]) / 4.0f;
		else
			for (int64_t ow = 0; ow < OW; ow++) {
				float m = r0[2 * ow];
				m = r0[2 * ow + 1] > m ? r0[2 * ow + 1] : m;
				m = r1[2 * ow] > m ? r1[2 * ow] : m;
				m = r1[2 * ow + 1] > m ? r1[2 * ow + 1] : m;
				y[ow] = m;
			}
	}
}

static void
pool2d_f32(const float *x, float *y, const geom *g, bool avg)
{
	const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
	const int64_t KH = g->k[1], KW = g->k[2], SH = g->st[1], SW = g->st[2];
	const float count = (float)(KH * KW);
	if (KH == 2 && KW == 2 && SH == 2 && SW == 2) {
		#pragma omp parallel for if (TAPRT_PAR(g->planes * IH * IW)) schedule(static)
		for (int64_t p = 0; p < g->planes; p++)
			pool2x2_plane_f32(x + p * IH * IW, y + p * OH * OW, IW, OH, OW, avg);
		return;
	}
	for (int64_t p = 0; p < g->planes; p++, x += IH * IW)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				const float *xw = x + oh * SH * IW + ow * SW;
				float acc = avg ? 0 : xw[0];
				for (int64_t kh = 0; kh < KH; kh++)
					for (int64_t kw = 0; kw < KW; kw++) {
						float v = xw[kh * IW + kw];
						acc = avg ? acc + v : (v > acc ? v : acc);
					}
				*y++ = avg ? acc / count : acc;
			}
}

/*
 * Padded 2-D f32 MaxPool whose every window holds at least one input
 * element (ResNet's 3x3 stride-2 pad-1 pool), windows up to MP_TAPS
 * columns wide.  Per output row, the maximum over its taps' input rows
 * goes into a row t (contiguous loads, one vector op per 16 columns and
 * tap row), then each output column takes the maximum over its window's
 * columns of t: KH times fewer strided reads than a pass per tap over
 * the output row (0.44 -> 0.14 ms for ResNet-18's pool, one thread);
 * tap rows three at a time, and the 3-wide stride-2 window in one pass
 * (0.262 -> 0.175 ms with the input in cache).
 * Columns of t outside the input are -inf, which is what skipping the
 * pads' taps gives; a row of output columns goes in chunks so that t
 * fits a fixed buffer.  NaN: never kept (v > m is false), as the general
 * loop's windows starting at a number; onnxruntime does not keep one
 * either.
 */
enum { MP_TAPS = 256, MP_T = 2048 };

/* the larger of m and v, m where v is NaN */
static inline float
mp_max(float m, float v)
{
	return v > m ? v : m;
}

static bool
maxpool2d_padded(const geom *g)
{
	if (!planar(g) || g->k[2] > MP_TAPS)
		return false;
	for (int d = 1; d < 3; d++)
		if (g->pb[d] >= g->k[d] || g->dil[d] != 1 ||
		    (g->out[d] - 1) * g->st[d] - g->pb[d] >= g->in[d])
			return false;
	return true;
}

TAPRT_CLONES static void
maxpool2d_plane_f32(const float *restrict x, float *restrict y, const geom *g)
{
	const int64_t IH = g->in[1], IW = g->in[2], OH = g->out[1], OW = g->out[2];
	const int64_t KH = g->k[1], KW = g->k[2], SH = g->st[1], SW = g->st[2];
	const int64_t PH = g->pb[1], PW = g->pb[2];
	/* output columns per chunk: their windows span at most MP_T columns */
	const int64_t cw = (MP_T - KW) / SW + 1;
	float t[MP_T];
	for (int64_t oh = 0; oh < OH; oh++, y += OW)
		for (int64_t o0 = 0; o0 < OW; o0 += cw) {
			const int64_t o1 = o0 + cw < OW ? o0 + cw : OW;
			/* t[j] is input column c0 + j */
			const int64_t c0 = o0 * SW - PW, n = (o1 - 1 - o0) * SW + KW;
			const int64_t j0 = c0 < 0 ? -c0 : 0, j1 = c0 + n > IW ? IW - c0 : n;
			for (int64_t j = 0; j < j0; j++)
				t[j] = -INFINITY;
			for (int64_t j = j1; j < n; j++)
				t[j] = -INFINITY;
			/* the taps' rows inside the input, three at a time */
			const float *r[3];
			int nr = 0;
			bool first = true;
			for (int64_t kh = 0; kh <= KH; kh++) {
				const int64_t ih = oh * SH - PH + kh;
				if (kh < KH && ih >= 0 && ih < IH)
					r[nr++] = x + ih * IW + c0;
				if (nr < 3 && kh < KH)
					continue;
				if (nr == 0)
					break;
				const float *a = r[0], *b = r[nr > 1], *c = r[nr - 1];
				if (first)
					for (int64_t j = j0; j < j1; j++)
						t[j] = mp_max(mp_max(mp_max(-INFINITY, a[j]), b[j]), c[j]);
				else
					for (int64_t j = j0; j < j1; j++)
						t[j] = mp_max(mp_max(mp_max(t[j], a[j]), b[j]), c[j]);
				first = false;
				nr = 0;
			}
			if (first)
				for (int64_t j = j0; j < j1; j++)
					t[j] = -INFINITY;
			float *yo = y + o0;
			const int64_t m = o1 - o0;
			if (KW == 3 && SW == 2) { /* the common pool: one pass */
				for (int64_t i = 0; i < m; i++)
					yo[i] = mp_max(mp_max(t[2 * i], t[2 * i + 1]),
					    t[2 * i + 2]);      /* t holds no NaN */
				continue;
			}
			for (int64_t i = 0; i < m; i++)
				yo[i] = -INFINITY;
			for (int64_t kw = 0; kw < KW; kw++) {
				const float *tk = t + kw;
				if (SW == 2)    /* a stride the compiler vectorizes when it knows it */
					for (int64_t i = 0; i < m; i++)
						yo[i] = tk[2 * i] > yo[i] ? tk[2 * i] : yo[i];
				else
					for (int64_t i = 0; i < m; i++)
						yo[i] = tk[i * SW] > yo[i] ? tk[i * SW] : yo[i];
			}
		}
}

static void
maxpool2d_f32(const float *x, float *y, const geom *g)
{
	#pragma omp parallel for if (TAPRT_PAR(g->planes * g->isz)) schedule(static)
	for (int64_t p = 0; p < g->planes; p++)
		maxpool2d_plane_f32(x + p * g->isz, y + p * g->osz, g);
}

/*
 * MaxPool in type T; ind (may be NULL) gets the flat input index of each
 * maximum (first one on ties), row-major or, with colmajor, column-major
 * within the spatial dims.
 */
#define MAXPOOL(E, T, s)                                                  \
static void                                                               \
maxpool_##s(const T *x, T *y, int64_t *ind, const geom *g, bool colmajor) \
{                                                                         \
	const int64_t I0 = g->in[0], I1 = g->in[1], I2 = g->in[2];        \
	for (int64_t p = 0; p < g->planes; p++) {                         \
		const T *xp = x + p * g->isz;                             \
		for (int64_t od = 0; od < g->out[0]; od++)                \
		for (int64_t oh = 0; oh < g->out[1]; oh++)                \
		for (int64_t ow = 0; ow < g->out[2]; ow++) {              \
			int64_t sd, d0, d1, sh, h0, h1, sw, w0, w1;       \
			taps(g, 0, od, &sd, &d0, &d1);                    \
			taps(g, 1, oh, &sh, &h0, &h1);                    \
			taps(g, 2, ow, &sw, &w0, &w1);                    \
			T best = 0;                                       \
			int64_t at = -1;                                  \
			for (int64_t kd = d0; kd < d1; kd++)              \
			for (int64_t kh = h0; kh < h1; kh++) {            \
				int64_t id = sd + kd * g->dil[0];         \
				int64_t ih = sh + kh * g->dil[1];         \
				const T *xr = xp + (id * I1 + ih) * I2;   \
				for (int64_t kw = w0; kw < w1; kw++) {    \
					int64_t iw = sw + kw * g->dil[2]; \
					if (at < 0 || xr[iw] > best) {    \
						best = xr[iw];            \
						at = colmajor ?           \
						    id + (ih + iw * I1) * I0 : \
						    (id * I1 + ih) * I2 + iw; \
					}                                 \
				}                                         \
			}                                                 \
			*y++ = best;                                      \
			if (ind)                                          \
				*ind++ = at < 0 ? -1 : p * g->isz + at;   \
		}                                                         \
	}                                                                 \
}
ALL_TYPES(MAXPOOL)
#undef MAXPOOL

void
taprt_op_MaxPool(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *y = n->out[0];
	taprt_tensor *ind = n->nout > 1 ? n->out[1] : NULL;
	bool colmajor = taprt_attr_int(n, "storage_order", 0) == 1;
	geom g;

	if (taprt_geom_get(cx, n, "MaxPool", x, y, NULL, &g))
		return;
	if (!ind && y->dtype == TAPRT_F32 && pool2d_simple(&g)) {
		pool2d_f32(x->data, y->data, &g, false);
		return;
	}
	if (!ind && y->dtype == TAPRT_F32 && maxpool2d_padded(&g)) {
		maxpool2d_f32(x->data, y->data, &g);
		return;
	}
	int64_t *id = ind ? ind->data : NULL;
	switch (y->dtype) {
#define CASE(E, T, s) case E: maxpool_##s(x->data, y->data, id, &g, colmajor); break;
	ALL_TYPES(CASE)
#undef CASE
	default:
		unsupported(cx, n, "MaxPool", y->dtype);
	}
}

/*
 * AveragePool in type T.  The divisor is the number of taps inside the
 * input, or with count_include_pad the taps inside the padded extent
 * [-pad_begin, in + pad_end) -- so a ceil_mode window overhanging the end
 * pads still counts only what lies within them (onnxruntime does the same).
 */
#define AVGPOOL(E, T, s)                                                  \
static void                                                               \
avgpool_##s(const T *x, T *y, const geom *g, bool incl)                   \
{                                                                         \
	const int64_t I1 = g->in[1], I2 = g->in[2];                       \
	for (int64_t p = 0; p < g->planes; p++) {                         \
		const T *xp = x + p * g->isz;                             \
		for (int64_t od = 0; od < g->out[0]; od++)                \
		for (int64_t oh = 0; oh < g->out[1]; oh++)                \
		for (int64_t ow = 0; ow < g->out[2]; ow++) {              \
			int64_t sd, d0, d1, sh, h0, h1, sw, w0, w1;       \
			taps(g, 0, od, &sd, &d0, &d1);                    \
			taps(g, 1, oh, &sh, &h0, &h1);                    \
			taps(g, 2, ow, &sw, &w0, &w1);                    \
			T sum = 0;                                        \
			for (int64_t kd = d0; kd < d1; kd++)              \
			for (int64_t kh = h0; kh < h1; kh++) {            \
				const T *xr = xp + ((sd + kd * g->dil[0]) * I1 + \
				    sh + kh * g->dil[1]) * I2;            \
				for (int64_t kw = w0; kw < w1; kw++)      \
					sum += xr[sw + kw * g->dil[2]];   \
			}                                                 \
			int64_t cnt = (d1 - d0) * (h1 - h0) * (w1 - w0);  \
			if (incl)                                         \
				cnt = padded_taps(g, 0, sd) *             \
				    padded_taps(g, 1, sh) * padded_taps(g, 2, sw); \
			*y++ = cnt ? sum / (T)cnt : (T)NAN;               \
		}                                                         \
	}                                                                 \
}

/* Taps of the window starting at s inside [-pad_begin, in + pad_end). */
static inline int64_t
padded_taps(const geom *g, int d, int64_t s)
{
	int64_t lo = ceil_clamp(-g->pb[d] - s, g->dil[d], g->k[d]);
	int64_t hi = ceil_clamp(g->in[d] + g->pe[d] - s, g->dil[d], g->k[d]);
	return hi > lo ? hi - lo : 0;
}

FLOAT_TYPES(AVGPOOL)
#undef AVGPOOL

void
taprt_op_AveragePool(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *y = n->out[0];
	bool incl = taprt_attr_int(n, "count_include_pad", 0) != 0;
	geom g;

	if (taprt_geom_get(cx, n, "AveragePool", x, y, NULL, &g))
		return;
	if (y->dtype == TAPRT_F32 && pool2d_simple(&g)) { /* no pads: incl is moot */
		pool2d_f32(x->data, y->data, &g, true);
		return;
	}
	switch (y->dtype) {
#define CASE(E, T, s) case E: avgpool_##s(x->data, y->data, &g, incl); break;
	FLOAT_TYPES(CASE)
#undef CASE
	default:
		unsupported(cx, n, "AveragePool", y->dtype);
	}
}

/* Global pools: one reduction over each contiguous [N, C] plane; the sum
 * in 16 running partial sums, so that it vectorizes (an in-order float
 * sum cannot be reordered by the compiler).  means_ on the calling thread,
 * gavg_ a contiguous share of the planes per thread, from half the usual
 * work: the kernel only reads, and in a CNN the layer before split by
 * channels, so each thread's share is what its core wrote (MobileNetV3's
 * 576x7x7 head, 28224 elements, ran 3.6 us on one thread and on two;
 * 2.2 us on two split). */
#define GLOBAL(E, T, s)                                                   \
TAPRT_CLONES static void                                                  \
means_##s(const T *x, T *y, int64_t planes, int64_t sz)                   \
{                                                                         \
	for (int64_t p = 0; p < planes; p++) {                            \
		const T *xp = x + p * sz;                                 \
		T part[16] = {0}, sum = 0;                                \
		int64_t i = 0;                                            \
		for (; i + 16 <= sz; i += 16)                             \
			for (int l = 0; l < 16; l++)                      \
				part[l] += xp[i + l];                     \
		for (int l = 0; l < 16; l++)                              \
			sum += part[l];                                   \
		for (; i < sz; i++)                                       \
			sum += xp[i];                                     \
		y[p] = sum / (T)sz;                                       \
	}                                                                 \
}                                                                         \
static void                                                               \
gavg_##s(const T *x, T *y, int64_t planes, int64_t sz)                    \
{                                                                         \
	_Pragma("omp parallel if (TAPRT_PAR(2 * planes * sz))")               \
	{                                                                 \
		int id, nt = taprt_team(&id);                             \
		int64_t p0 = planes * id / nt, p1 = planes * (id + 1) / nt; \
		means_##s(x + p0 * sz, y + p0, p1 - p0, sz);              \
	}                                                                 \
}                                                                         \
static void                                                               \
gmax_##s(const T *x, T *y, int64_t planes, int64_t sz)                    \
{                                                                         \
	for (int64_t p = 0; p < planes; p++, x += sz) {                   \
		T m = x[0];                                               \
		for (int64_t i = 1; i < sz; i++)                          \
			m = x[i] > m ? x[i] : m;                          \
		y[p] = m;                                                 \
	}                                                                 \
}
FLOAT_TYPES(GLOBAL)
#undef GLOBAL

static void
global_pool(taprt_ctx *cx, const taprt_node *n, bool avg)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *y = n->out[0];
	int64_t planes = x->rank >= 2 ? x->dims[0] * x->dims[1] : 1;
	int64_t sz = planes ? x->numel / planes : 0;

	if (planes == 0)
		return;
	if (sz == 0) {
		taprt_fail(cx, "node '%s' (%s): empty spatial dims", n->name,
		    avg ? "GlobalAveragePool" : "GlobalMaxPool");
		return;
	}
	switch (y->dtype) {
#define CASE(E, T, s)                                                     \
	case E:                                                           \
		(avg ? gavg_##s : gmax_##s)(x->data, y->data, planes, sz); \
		break;
	FLOAT_TYPES(CASE)
#undef CASE
	default:
		unsupported(cx, n, avg ? "GlobalAveragePool" : "GlobalMaxPool",
		    y->dtype);
	}
}

void
taprt_means_f32(const float *x, float *y, int64_t planes, int64_t sz)
{
	means_f32(x, y, planes, sz);
}

void
taprt_op_GlobalAveragePool(taprt_ctx *cx, const taprt_node *n)
{
	global_pool(cx, n, true);
}

void
taprt_op_GlobalMaxPool(taprt_ctx *cx, const taprt_node *n)
{
	global_pool(cx, n, false);
}
