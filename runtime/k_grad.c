/*
 * k_grad.c - the gradient kernels of autodiff's backward graphs, where
 * composing the ONNX kernels would not do: SoftmaxGrad, LogSoftmaxGrad,
 * LayerNormalizationGrad, ConvGradWeight, MaxPoolGrad, AveragePoolGrad,
 * GatherGrad, GatherElementsGrad and SliceGrad (docs/training.md); and
 * fuse-train's erf GELU, FusedGelu, with its GeluGrad (f32 only).
 *
 * Needs: shapes and attributes checked by tapc (ir/infer_train.c);
 * the runtime's GEMM (gemm.c) for ConvGradWeight's products.  f32 and f64.  Each kernel is
 * the adjoint of the forward kernel as written in k_nn.c and k_reduce.c:
 * MaxPool's first maximum on ties, AveragePool's divisor (taps inside the
 * input, or inside the pads with count_include_pad), LayerNormalization's
 * population variance and suffix-broadcast scale.  Scatters add in the
 * order of dY's elements on one thread, so results are the same on every
 * run.  Sums over a row accumulate in double.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/internal.h"

#define FLOAT_TYPES(X) X(TAPRT_F32, float, f32) X(TAPRT_F64, double, f64)

static int64_t
prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

static bool
is_float(int dtype)
{
	return dtype == TAPRT_F32 || dtype == TAPRT_F64;
}

static void
zero(taprt_tensor *t)
{
	if (t && t->numel)
		memset(t->data, 0, (size_t)(t->numel * taprt_dtype_size(t->dtype)));
}

/* ------------------------------------------------ Softmax, LogSoftmax */

/* x viewed as [outer, len, inner] around the axis. */
#define SMGRAD(E, T, s)                                                   \
static void                                                               \
smgrad_##s(const T *dy, const T *y, T *dx, int64_t outer, int64_t len,    \
    int64_t inner, bool logsm)                                            \
{                                                                         \
	for (int64_t o = 0; o < outer; o++) {                             \
		int64_t base = o * len * inner;                           \
		for (int64_t j = 0; j < inner; j++) {                     \
			const T *g = dy + base + j, *v = y + base + j;    \
			T *d = dx + base + j;                             \
			double acc = 0;                                   \
			for (int64_t k = 0; k < len; k++)                 \
				acc += logsm ? (double)g[k * inner] :     \
				    (double)g[k * inner] * v[k * inner];  \
			T a = (T)acc; /* the rows' loops in T: they vectorize */ \
			if (logsm)                                        \
				for (int64_t k = 0; k < len; k++)         \
					d[k * inner] = g[k * inner] -     \
					    TAPRT_EXP(v[k * inner]) * a;  \
			else                                              \
				for (int64_t k = 0; k < len; k++)         \
					d[k * inner] = v[k * inner] *     \
					    (g[k * inner] - a);           \
		}                                                         \
	}                                                                 \
}
FLOAT_TYPES(SMGRAD)
#undef SMGRAD

/* SoftmaxGrad(dY, Y): dX = Y (dY - sum(dY Y)); LogSoftmaxGrad(dY, Y):
 * dX = dY - exp(Y) sum(dY); sums along axis. */
static void
softmax_grad(taprt_ctx *cx, const taprt_node *n, bool logsm, const char *op)
{
	const taprt_tensor *dy = n->in[0], *y = n->in[1];
	taprt_tensor *dx = n->out[0];
	int r = y->rank, axis = taprt_axis(taprt_attr_int(n, "axis", -1), r);
	if (axis < 0 || axis >= r) {
		taprt_fail(cx, "node '%s' (%s): axis out of range for rank %d", n->name, op, r);
		return;
	}
	int64_t outer = prod(y->dims, 0, axis), len = y->dims[axis];
	int64_t inner = prod(y->dims, axis + 1, r);
	if (!dx->numel)
		return;
	switch (y->dtype) {
#define CASE(E, T, s)                                                     \
	case E:                                                           \
		smgrad_##s(dy->data, y->data, dx->data, outer, len, inner, logsm); \
		return;
	FLOAT_TYPES(CASE)
#undef CASE
	}
	taprt_bad_dtype(cx, n, op, y->dtype);
}

void
taprt_op_SoftmaxGrad(taprt_ctx *cx, const taprt_node *n)
{
	softmax_grad(cx, n, false, "SoftmaxGrad");
}

void
taprt_op_LogSoftmaxGrad(taprt_ctx *cx, const taprt_node *n)
{
	softmax_grad(cx, n, true, "LogSoftmaxGrad");
}

/* -------------------------------------------------- LayerNormalization */

/*
 * Per row of len (the dims from axis on), with xhat = (x - mean) inv and
 * g = dY scale: dX = inv (g - mean(g) - xhat mean(g xhat)); dScale and
 * dBias sum dY xhat and dY over rows, folded onto the scale's period ns.
 * acc holds 2 ns doubles.  In double; a scale as long as the row (every
 * LayerNorm a transformer has) takes loops without the period's index
 * arithmetic, vectorized (omp simd: its sums in vector lanes, then the
 * lanes added) in the CPU's clone.
 */
#define LNGRAD(E, T, s)                                                   \
TAPRT_CLONES static void                                                  \
lngrad_##s(const T *dy, const T *x, const T *sc, T *dx, double *acc,      \
    int64_t outer, int64_t len, int64_t ns, double eps)                   \
{                                                                         \
	double *restrict as = acc, *restrict ab = acc + ns;               \
	for (int64_t o = 0; o < outer; o++, dy += len, x += len) {        \
		double mean = 0, var = 0, mg = 0, mgx = 0;                \
		_Pragma("omp simd reduction(+:mean)")                     \
		for (int64_t i = 0; i < len; i++)                         \
			mean += x[i];                                     \
		mean /= (double)len;                                      \
		_Pragma("omp simd reduction(+:var)")                      \
		for (int64_t i = 0; i < len; i++)                         \
			var += (x[i] - mean) * (x[i] - mean);             \
		var /= (double)len;                                       \
		double inv = 1 / sqrt(var + eps);                         \
		if (ns == len) {                                          \
			_Pragma("omp simd reduction(+:mg, mgx)")          \
			for (int64_t i = 0; i < len; i++) {               \
				double xh = (x[i] - mean) * inv, g = (double)dy[i] * sc[i]; \
				mg += g;                                  \
				mgx += g * xh;                            \
				as[i] += (double)dy[i] * xh;              \
				ab[i] += dy[i];                           \
			}                                                 \
		} else {                                                  \
			for (int64_t i = 0; i < len; i++) {               \
				double xh = (x[i] - mean) * inv, g = (double)dy[i] * sc[i % ns]; \
				mg += g;                                  \
				mgx += g * xh;                            \
				as[i % ns] += (double)dy[i] * xh;         \
				ab[i % ns] += dy[i];                      \
			}                                                 \
		}                                                         \
		mg /= (double)len;                                        \
		mgx /= (double)len;                                       \
		if (!dx)                                                  \
			continue;                                         \
		if (ns == len) {                                          \
			_Pragma("omp simd")                               \
			for (int64_t i = 0; i < len; i++) {               \
				double xh = (x[i] - mean) * inv;          \
				dx[i] = (T)(inv * ((double)dy[i] * sc[i] - mg - xh * mgx)); \
			}                                                 \
		} else {                                                  \
			for (int64_t i = 0; i < len; i++) {               \
				double xh = (x[i] - mean) * inv;          \
				dx[i] = (T)(inv * ((double)dy[i] * sc[i % ns] - mg - xh * mgx)); \
			}                                                 \
		}                                                         \
		dx += len;                                                \
	}                                                                 \
}
FLOAT_TYPES(LNGRAD)
#undef LNGRAD

static void
store_f(taprt_tensor *t, const double *v)
{
	for (int64_t i = 0; t && i < t->numel; i++) {
		if (t->dtype == TAPRT_F64)
			((double *)t->data)[i] = v[i];
		else
			((float *)t->data)[i] = (float)v[i];
	}
}

void
taprt_op_LayerNormalizationGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0], *x = n->in[1], *sc = n->in[2];
	taprt_tensor *dx = taprt_output(n, 0), *ds = taprt_output(n, 1), *db = taprt_output(n, 2);
	int r = x->rank, axis = taprt_axis(taprt_attr_int(n, "axis", -1), r);
	double eps = taprt_attr_float(n, "epsilon", 1e-5f);
	if (axis < 0 || axis >= r || !is_float(x->dtype) || sc->dtype != x->dtype) {
		taprt_fail(cx, "node '%s' (LayerNormalizationGrad): axis %d of rank %d, dtypes %s and %s",
		    n->name, axis, r, taprt_dtype_name(x->dtype), taprt_dtype_name(sc->dtype));
		return;
	}
	int64_t outer = prod(x->dims, 0, axis), len = prod(x->dims, axis, r), ns = sc->numel;
	if (!ns || (len && len % ns)) {
		taprt_fail(cx, "node '%s' (LayerNormalizationGrad): the scale's %lld values do not "
		    "repeat over %lld", n->name, (long long)ns, (long long)len);
		return;
	}
	double *acc = taprt_scratch(2 * ns * (int64_t)sizeof(double));
	if (!acc) {
		taprt_fail(cx, "node '%s' (LayerNormalizationGrad): out of memory", n->name);
		return;
	}
	memset(acc, 0, 2 * ns * sizeof(double));
	if (len && outer) {
		if (x->dtype == TAPRT_F64)
			lngrad_f64(dy->data, x->data, sc->data, dx ? dx->data : NULL, acc, outer, len,
			    ns, eps);
		else
			lngrad_f32(dy->data, x->data, sc->data, dx ? dx->data : NULL, acc, outer, len,
			    ns, eps);
	}
	store_f(ds, acc);
	store_f(db, acc + ns);
}

/* ---------------------------------------------------------------- GELU */

/*
 * fuse-train's erf GELU: FusedGelu y = taprt_gelu_f32(x, sqrt 2), the f32
 * operations of the five nodes it replaces, so the same bits; GeluGrad
 * dx = dy (0.5 (erf(x / sqrt 2) + 1) + x exp(-x^2 / 2) / sqrt(2 pi)),
 * torch's gelu backward, in f32.  Spans of 4096 elements shared by the
 * team, each a loop vectorized in the CPU's clone.
 */
TAPRT_CLONES static void
gelu_span(const float *dy, const float *x, float *y, int64_t n)
{
	if (!dy) {
		for (int64_t i = 0; i < n; i++)
			y[i] = taprt_gelu_f32(x[i], 1.41421354f);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		float cdf = 0.5f * (taprt_erf_f32(v * 0.707106781f) + 1.0f);
		float pdf = taprt_exp_f32(-0.5f * v * v) * 0.398942280f;
		y[i] = dy[i] * (cdf + v * pdf);
	}
}

static void
gelu(taprt_ctx *cx, const taprt_node *n, const taprt_tensor *dy, const taprt_tensor *x,
    taprt_tensor *y, const char *op)
{
	if (x->dtype != TAPRT_F32 || y->dtype != TAPRT_F32 || y->numel != x->numel ||
	    (dy && (dy->dtype != TAPRT_F32 || dy->numel != x->numel))) {
		taprt_fail(cx, "node '%s' (%s): expected f32 tensors of one size", n->name, op);
		return;
	}
	const int64_t span = 4096, ns = (x->numel + span - 1) / span;
	const float *dyd = dy ? dy->data : NULL, *xd = x->data;
	float *yd = y->data;
	#pragma omp parallel for if (TAPRT_PAR(x->numel)) schedule(static)
	for (int64_t s = 0; s < ns; s++) {
		int64_t i = s * span, m = x->numel - i < span ? x->numel - i : span;
		gelu_span(dyd ? dyd + i : NULL, xd + i, yd + i, m);
	}
}

void
taprt_op_FusedGelu(taprt_ctx *cx, const taprt_node *n)
{
	gelu(cx, n, NULL, n->in[0], n->out[0], "FusedGelu");
}

void
taprt_op_GeluGrad(taprt_ctx *cx, const taprt_node *n)
{
	gelu(cx, n, n->in[0], n->in[1], n->out[0], "GeluGrad");
}

/* ----------------------------------------------------------- windows */

/*
 * The spatial geometry of a Conv or pool, padded to three dims with
 * leading unit dims (as k_nn.c's): in/out are the sizes of X and Y, pads
 * explicit (autodiff resolves auto_pad).
 */
typedef struct {
	int64_t in[3], out[3], k[3], st[3], dil[3], pb[3], pe[3];
	int64_t isz, osz, planes;
} geom;

static int
geom_of(taprt_ctx *cx, const taprt_node *n, const char *op, int rank, const int64_t *xd,
    const int64_t *yd, geom *g)
{
	int ns = rank - 2;
	int64_t ks[3], st[3], dil[3], pads[6] = {0};
	if (ns < 1 || ns > 3)
		return taprt_fail(cx, "node '%s' (%s): %d spatial dims, expected 1 to 3", n->name, op, ns);
	int nk = taprt_ints(n, -1, "kernel_shape", ks, 3);
	int nst = taprt_ints(n, -1, "strides", st, 3);
	int nd = taprt_ints(n, -1, "dilations", dil, 3);
	int np = taprt_ints(n, -1, "pads", pads, 6);
	if (nk != ns || (nst >= 0 && nst != ns) || (nd >= 0 && nd != ns) || (np >= 0 && np != 2 * ns))
		return taprt_fail(cx, "node '%s' (%s): kernel_shape/strides/dilations/pads do not "
		    "match %d spatial dims", n->name, op, ns);
	int off = 3 - ns;
	g->planes = xd[0] * xd[1];
	g->isz = g->osz = 1;
	for (int d = 0; d < 3; d++) {
		int i = d - off;
		bool unit = i < 0;
		g->in[d] = unit ? 1 : xd[2 + i];
		g->out[d] = unit ? 1 : yd[2 + i];
		g->k[d] = unit ? 1 : ks[i];
		g->st[d] = unit || nst < 0 ? 1 : st[i];
		g->dil[d] = unit || nd < 0 ? 1 : dil[i];
		g->pb[d] = unit ? 0 : pads[i];
		g->pe[d] = unit ? 0 : pads[ns + i];
		if (g->k[d] < 1 || g->st[d] < 1 || g->dil[d] < 1)
			return taprt_fail(cx, "node '%s' (%s): kernel, strides and dilations must be "
			    "positive", n->name, op);
		g->isz *= g->in[d];
		g->osz *= g->out[d];
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

/* The taps [k0, k1) of output o's window along dim d that fall inside the
 * input; the window starts at input position *start. */
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

/* Taps of the window starting at s inside [-pad_begin, in + pad_end). */
static inline int64_t
padded_taps(const geom *g, int d, int64_t s)
{
	int64_t lo = ceil_clamp(-g->pb[d] - s, g->dil[d], g->k[d]);
	int64_t hi = ceil_clamp(g->in[d] + g->pe[d] - s, g->dil[d], g->k[d]);
	return hi > lo ? hi - lo : 0;
}

/* ------------------------------------------------------------- pools */

/* Every output's window, with its taps inside the input: body sees
 * p (plane), the output index o, the window start sd/sh/sw and tap
 * ranges [d0,d1) x [h0,h1) x [w0,w1). */
#define FOR_WINDOWS(g, ...)                                              \
	for (int64_t p = 0, o = 0; p < (g)->planes; p++)                  \
	for (int64_t od = 0; od < (g)->out[0]; od++)                      \
	for (int64_t oh = 0; oh < (g)->out[1]; oh++)                      \
	for (int64_t ow = 0; ow < (g)->out[2]; ow++, o++) {               \
		int64_t sd, d0, d1, sh, h0, h1, sw, w0, w1;               \
		taps(g, 0, od, &sd, &d0, &d1);                            \
		taps(g, 1, oh, &sh, &h0, &h1);                            \
		taps(g, 2, ow, &sw, &w0, &w1);                            \
		__VA_ARGS__                                               \
	}

/* The input offset (in a plane) of tap (kd, kh, kw). */
#define TAP(g, kd, kh, kw)                                                \
	(((sd + (kd) * (g)->dil[0]) * (g)->in[1] + sh + (kh) * (g)->dil[1]) * \
	    (g)->in[2] + sw + (kw) * (g)->dil[2])

/* dY to the first maximum of each window, as MaxPool chose it. */
#define MAXPOOL_GRAD(E, T, s)                                             \
static void                                                               \
maxpool_grad_##s(const T *dy, const T *x, T *dx, const geom *g)           \
{                                                                         \
	FOR_WINDOWS(g, {                                                  \
		const T *xp = x + p * g->isz;                             \
		T best = 0;                                               \
		int64_t at = -1;                                          \
		for (int64_t kd = d0; kd < d1; kd++)                      \
		for (int64_t kh = h0; kh < h1; kh++)                      \
		for (int64_t kw = w0; kw < w1; kw++) {                    \
			int64_t i = TAP(g, kd, kh, kw);                   \
			if (at < 0 || xp[i] > best) {                     \
				best = xp[i];                             \
				at = i;                                   \
			}                                                 \
		}                                                         \
		if (at >= 0)                                              \
			dx[p * g->isz + at] += dy[o];                     \
	})                                                                \
}
FLOAT_TYPES(MAXPOOL_GRAD)
#undef MAXPOOL_GRAD

void
taprt_op_MaxPoolGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0], *x = n->in[1];
	taprt_tensor *dx = n->out[0];
	geom g;
	if (geom_of(cx, n, "MaxPoolGrad", x->rank, x->dims, dy->dims, &g))
		return;
	zero(dx);
	switch (dx->dtype) {
#define CASE(E, T, s) case E: maxpool_grad_##s(dy->data, x->data, dx->data, &g); return;
	FLOAT_TYPES(CASE)
#undef CASE
	}
	taprt_bad_dtype(cx, n, "MaxPoolGrad", dx->dtype);
}

/* dY / count to every tap of the window that AveragePool summed. */
#define AVGPOOL_GRAD(E, T, s)                                             \
static void                                                               \
avgpool_grad_##s(const T *dy, T *dx, const geom *g, bool incl)            \
{                                                                         \
	FOR_WINDOWS(g, {                                                  \
		int64_t cnt = (d1 - d0) * (h1 - h0) * (w1 - w0);          \
		if (incl)                                                 \
			cnt = padded_taps(g, 0, sd) * padded_taps(g, 1, sh) * \
			    padded_taps(g, 2, sw);                        \
		if (!cnt)                                                 \
			continue;                                         \
		T v = dy[o] / (T)cnt, *xp = dx + p * g->isz;              \
		for (int64_t kd = d0; kd < d1; kd++)                      \
		for (int64_t kh = h0; kh < h1; kh++)                      \
		for (int64_t kw = w0; kw < w1; kw++)                      \
			xp[TAP(g, kd, kh, kw)] += v;                      \
	})                                                                \
}
FLOAT_TYPES(AVGPOOL_GRAD)
#undef AVGPOOL_GRAD

void
taprt_op_AveragePoolGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0];
	taprt_tensor *dx = n->out[0];
	bool incl = taprt_attr_int(n, "count_include_pad", 0) != 0;
	geom g;
	if (geom_of(cx, n, "AveragePoolGrad", dx->rank, dx->dims, dy->dims, &g))
		return;
	zero(dx);
	switch (dx->dtype) {
#define CASE(E, T, s) case E: avgpool_grad_##s(dy->data, dx->data, &g, incl); return;
	FLOAT_TYPES(CASE)
#undef CASE
	}
	taprt_bad_dtype(cx, n, "AveragePoolGrad", dx->dtype);
}

/* -------------------------------------------------------- convolution */

/*
 * col[C * k0*k1*k2, out positions] from one image's channels x[C, in..]:
 * row (c, kd, kh, kw) holds x at every output position's tap, 0 in pads.
 */
#define IM2COL(E, T, s)                                                   \
static void                                                               \
im2col_##s(const T *x, int64_t C, const geom *g, T *col)                  \
{                                                                         \
	for (int64_t c = 0; c < C; c++)                                   \
	for (int64_t kd = 0; kd < g->k[0]; kd++)                          \
	for (int64_t kh = 0; kh < g->k[1]; kh++)                          \
	for (int64_t kw = 0; kw < g->k[2]; kw++)                          \
	for (int64_t od = 0; od < g->out[0]; od++)                        \
	for (int64_t oh = 0; oh < g->out[1]; oh++)                        \
	for (int64_t ow = 0; ow < g->out[2]; ow++) {                      \
		int64_t id = od * g->st[0] - g->pb[0] + kd * g->dil[0];   \
		int64_t ih = oh * g->st[1] - g->pb[1] + kh * g->dil[1];   \
		int64_t iw = ow * g->st[2] - g->pb[2] + kw * g->dil[2];   \
		bool in = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1] && \
		    iw >= 0 && iw < g->in[2];                             \
		*col++ = in ? x[((c * g->in[0] + id) * g->in[1] + ih) * g->in[2] + iw] : 0; \
	}                                                                 \
}
FLOAT_TYPES(IM2COL)
#undef IM2COL

/* c[M,N] += a[M,K] @ b[N,K]^T, row-major. */
static void
gemm_nt_f32(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *c)
{
	taprt_sgemm(false, true, M, N, K, 1.0f, a, K, b, K, 1.0f, c, N);
}

static void
gemm_nt_f64(int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *c)
{
	taprt_dgemm(false, true, M, N, K, 1.0, a, K, b, K, 1.0, c, N);
}

/* dW_g[Mg, Cg*KK] = sum over images of dY_g[Mg, P] @ col_g[Cg*KK, P]^T. */
#define CONV_GRAD_W(E, T, s)                                              \
static int                                                                \
conv_grad_w_##s(const T *x, const T *dy, T *dw, int64_t N, int64_t C,     \
    int64_t M, int64_t G, const geom *g)                                  \
{                                                                         \
	int64_t Cg = C / G, Mg = M / G, KK = g->k[0] * g->k[1] * g->k[2]; \
	int64_t P = g->osz;                                               \
	bool direct = KK == 1 && g->isz == P;                             \
	for (int d = 0; d < 3; d++)                                       \
		direct = direct && g->st[d] == 1 && g->pb[d] == 0;        \
	T *col = NULL;                                                    \
	if (!direct && !(col = taprt_scratch(Cg * KK * P * (int64_t)sizeof(T)))) \
		return -1;                                                \
	for (int64_t b = 0; b < N; b++)                                   \
		for (int64_t gi = 0; gi < G; gi++) {                      \
			const T *xg = x + (b * C + gi * Cg) * g->isz;     \
			if (!direct)                                      \
				im2col_##s(xg, Cg, g, col);               \
			gemm_nt_##s(Mg, Cg * KK, P, dy + (b * M + gi * Mg) * P, \
			    direct ? xg : col, dw + gi * Mg * Cg * KK);   \
		}                                                         \
	return 0;                                                         \
}
FLOAT_TYPES(CONV_GRAD_W)
#undef CONV_GRAD_W

void
taprt_op_ConvGradWeight(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *dy = n->in[1];
	taprt_tensor *dw = n->out[0];
	int64_t G = taprt_attr_int(n, "group", 1), C = x->dims[1], M = dy->dims[1];
	geom g;
	if (G < 1 || C % G || M % G)
		taprt_fail(cx, "node '%s' (ConvGradWeight): group %lld does not divide %lld and %lld "
		    "channels", n->name, (long long)G, (long long)C, (long long)M);
	else if (!geom_of(cx, n, "ConvGradWeight", x->rank, x->dims, dy->dims, &g)) {
		zero(dw);
		if (!dw->numel || !dy->numel)
			return;
		int rc = 0;
		switch (dw->dtype) {
#define CASE(E, T, s)                                                             \
		case E:                                                           \
			rc = conv_grad_w_##s(x->data, dy->data, dw->data, x->dims[0], C, M, G, &g); \
			break;
		FLOAT_TYPES(CASE)
#undef CASE
		default:
			taprt_bad_dtype(cx, n, "ConvGradWeight", dw->dtype);
			return;
		}
		if (rc)
			taprt_fail(cx, "node '%s' (ConvGradWeight): out of memory for the im2col buffer",
			    n->name);
	}
}

/* ----------------------------------------------------------- scatters */

static inline int64_t
index_at(const taprt_tensor *t, int64_t i)
{
	return t->dtype == TAPRT_I32 ? ((const int32_t *)t->data)[i] :
	    ((const int64_t *)t->data)[i];
}

/* GatherGrad: dX[o, idx[j], i] += dY[o, j, i] (Gather's output viewed as
 * [outer, indices, inner]). */
#define GATHER_GRAD(E, T, s)                                              \
static int64_t                                                            \
gather_grad_##s(const T *dy, const taprt_tensor *idx, T *dx, int64_t outer, \
    int64_t d, int64_t inner)                                             \
{                                                                         \
	int64_t ni = idx->numel;                                          \
	for (int64_t o = 0; o < outer; o++)                               \
		for (int64_t j = 0; j < ni; j++) {                        \
			int64_t k = index_at(idx, j);                     \
			if (k < -d || k >= d)                             \
				return j;                                 \
			k += k < 0 ? d : 0;                               \
			const T *src = dy + (o * ni + j) * inner;         \
			T *dst = dx + (o * d + k) * inner;                \
			for (int64_t i = 0; i < inner; i++)               \
				dst[i] += src[i];                         \
		}                                                         \
	return -1;                                                        \
}
FLOAT_TYPES(GATHER_GRAD)
#undef GATHER_GRAD

void
taprt_op_GatherGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0], *idx = n->in[1];
	taprt_tensor *dx = n->out[0];
	int r = dx->rank, axis = taprt_axis(taprt_attr_int(n, "axis", 0), r);
	int64_t outer = prod(dx->dims, 0, axis), d = dx->dims[axis];
	int64_t inner = prod(dx->dims, axis + 1, r), bad = -1;
	zero(dx);
	switch (dx->dtype) {
#define CASE(E, T, s)                                                             \
	case E: bad = gather_grad_##s(dy->data, idx, dx->data, outer, d, inner); break;
	FLOAT_TYPES(CASE)
#undef CASE
	default:
		taprt_bad_dtype(cx, n, "GatherGrad", dx->dtype);
		return;
	}
	if (bad >= 0)
		taprt_fail(cx, "node '%s' (GatherGrad): index %lld is out of range for dim %d of size %lld",
		    n->name, (long long)index_at(idx, bad), axis, (long long)d);
}

/* GatherElementsGrad: dX at idx's position with axis replaced by the
 * index gets dY there.  Walks idx's positions with a counter. */
#define ELEMENTS_GRAD(E, T, s)                                            \
static int64_t                                                            \
elements_grad_##s(const T *dy, const taprt_tensor *idx, T *dx,            \
    const taprt_tensor *X, int axis)                                      \
{                                                                         \
	int r = idx->rank;                                                \
	int64_t st[TAPRT_MAX_RANK], pos[TAPRT_MAX_RANK] = {0}, d = X->dims[axis]; \
	taprt_strides(X, st);                                             \
	for (int64_t p = 0; p < idx->numel; p++) {                        \
		int64_t k = index_at(idx, p), off = 0;                    \
		if (k < -d || k >= d)                                     \
			return p;                                         \
		k += k < 0 ? d : 0;                                       \
		for (int a = 0; a < r; a++)                               \
			off += (a == axis ? k : pos[a]) * st[a];          \
		dx[off] += dy[p];                                         \
		for (int a = r - 1; a >= 0 && ++pos[a] == idx->dims[a]; a--) \
			pos[a] = 0;                                       \
	}                                                                 \
	return -1;                                                        \
}
FLOAT_TYPES(ELEMENTS_GRAD)
#undef ELEMENTS_GRAD

void
taprt_op_GatherElementsGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0], *idx = n->in[1];
	taprt_tensor *dx = n->out[0];
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), dx->rank);
	int64_t bad = -1;
	zero(dx);
	switch (dx->dtype) {
#define CASE(E, T, s) case E: bad = elements_grad_##s(dy->data, idx, dx->data, dx, axis); break;
	FLOAT_TYPES(CASE)
#undef CASE
	default:
		taprt_bad_dtype(cx, n, "GatherElementsGrad", dx->dtype);
		return;
	}
	if (bad >= 0)
		taprt_fail(cx, "node '%s' (GatherElementsGrad): index %lld is out of range for dim %d "
		    "of size %lld", n->name, (long long)index_at(idx, bad), axis,
		    (long long)dx->dims[axis]);
}

/* SliceGrad: dY[j] to dX[starts + j * steps] per axis, zeros elsewhere. */
void
taprt_op_SliceGrad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *dy = n->in[0];
	taprt_tensor *dx = n->out[0];
	int r = dx->rank, es = taprt_dtype_size(dx->dtype);
	int64_t st[TAPRT_MAX_RANK], sp[TAPRT_MAX_RANK], xs[TAPRT_MAX_RANK];
	int64_t pos[TAPRT_MAX_RANK] = {0};
	if (taprt_ints(n, -1, "starts", st, TAPRT_MAX_RANK) != r ||
	    taprt_ints(n, -1, "steps", sp, TAPRT_MAX_RANK) != r || !is_float(dx->dtype)) {
		taprt_fail(cx, "node '%s' (SliceGrad): starts and steps must have %d values", n->name, r);
		return;
	}
	taprt_strides(dx, xs);
	zero(dx);
	int64_t base = 0;
	for (int a = 0; a < r; a++)
		base += st[a] * xs[a];
	for (int64_t p = 0; p < dy->numel; p++) {
		int64_t off = base;
		for (int a = 0; a < r; a++)
			off += pos[a] * sp[a] * xs[a];
		memcpy((char *)dx->data + off * es, (const char *)dy->data + p * es, (size_t)es);
		for (int a = r - 1; a >= 0 && ++pos[a] == dy->dims[a]; a--)
			pos[a] = 0;
	}
}
