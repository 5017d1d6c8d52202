/*
 * k_rnn.c - the recurrent kernels: RNN, GRU and LSTM (ONNX opsets 1 to 14).
 *
 * Needs: the runtime's GEMM (gemm.c); f32 (tapc rejects other types at compile time).
 * The input projection of every time step and both directions is one
 * sgemm, X[T*B, I] @ W^T -> [T*B, D*G*H] (W is [D, G*H, I], so both
 * directions are one [D*G*H, I] matrix), with the biases folded in where
 * the equations add them outside a gate's product.  The recurrence then
 * runs step by step, per direction one small sgemm H[B,H] @ R^T ->
 * [B, G*H] and the gates elementwise; GRU with linear_before_reset=0 needs
 * a second one, (r . H) @ Rh^T, since its reset gate scales H before the
 * product.  Layout 1 ([B,T,I]) needs no transpose: the projection's rows
 * come out in X's order and each step picks its rows.
 *
 * sequence_lens is implemented as onnxruntime does: a sequence of length
 * L < T is steps 0..L-1 (a reverse direction runs L-1 down to 0), its Y
 * rows past L are 0 and Y_h/Y_c hold the state after its last step; a
 * length 0 gives zeros in Y_h and Y_c.  A length outside [0, T] fails.
 * clip bounds the gates' pre-activations (after biases and peepholes), not
 * the cell state that LSTM's h() reads, again as onnxruntime does.
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "runtime/internal.h"

/* ------------------------------------------------------- activations */

enum {
	A_RELU, A_TANH, A_SIGMOID, A_AFFINE, A_LEAKYRELU, A_THRESHOLDEDRELU,
	A_SCALEDTANH, A_HARDSIGMOID, A_ELU, A_SOFTSIGN, A_SOFTPLUS,
};

/* Which parameters each function takes, and their defaults: those of the
 * ONNX operator of the same name (Affine and ScaledTanh, long gone as
 * operators, default to the identity's scale). */
static const struct {
	const char *name;
	bool alpha, beta;
	float da, db;
} act_info[] = {
	[A_RELU] = {"Relu", false, false, 0, 0},
	[A_TANH] = {"Tanh", false, false, 0, 0},
	[A_SIGMOID] = {"Sigmoid", false, false, 0, 0},
	[A_AFFINE] = {"Affine", true, true, 1.0f, 0},
	[A_LEAKYRELU] = {"LeakyRelu", true, false, 0.01f, 0},
	[A_THRESHOLDEDRELU] = {"ThresholdedRelu", true, false, 1.0f, 0},
	[A_SCALEDTANH] = {"ScaledTanh", true, true, 1.0f, 1.0f},
	[A_HARDSIGMOID] = {"HardSigmoid", true, true, 0.2f, 0.5f},
	[A_ELU] = {"Elu", true, false, 1.0f, 0},
	[A_SOFTSIGN] = {"Softsign", false, false, 0, 0},
	[A_SOFTPLUS] = {"Softplus", false, false, 0, 0},
};
#define NACT (int)(sizeof act_info / sizeof *act_info)

typedef struct {
	int k;                          /* A_* */
	float alpha, beta;
} act;

/*
 * e^x, tanh and the logistic function in plain float arithmetic that the
 * compiler vectorizes (libm's tanhf was a third of an LSTM's time).  e^x:
 * x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts), e^r by its Taylor
 * series to r^6, 2^n put in the exponent; relative error below 3e-7.  x is
 * clamped to [-87, 88] by comparisons, so a NaN passes through.
 */
static inline float
exp_fast(float x)
{
	x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
	const float round = 12582912.0f;        /* 1.5 * 2^23: adding it rounds */
	float n = (x * 1.44269504088896341f + round) - round;
	float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
	float p = 1.0f / 720;
	p = p * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	int32_t e = ((int32_t)n + 127) * (1 << 23);
	float s;
	memcpy(&s, &e, sizeof s);
	return p * s;
}

/* tanh: 1 - 2 / (1 + e^2|x|) would lose the digits of a small result, so
 * below 0.3 the series to x^9 (relative error below 3e-7 everywhere). */
static inline float
tanh_fast(float x)
{
	float a = fabsf(x), x2 = x * x;
	float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 +
	    x2 * (62.0f / 2835)))));
	float big = 1.0f - 2.0f / (1.0f + exp_fast(2.0f * a));
	return a < 0.3f ? small : x < 0 ? -big : big;
}

static inline float
sigmoid_fast(float x)
{
	return 1.0f / (1.0f + exp_fast(-x));
}

static void
act_run(const act *a, float *x, int64_t n)
{
	float al = a->alpha, be = a->beta;
	switch (a->k) {
	case A_RELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > 0 ? x[i] : 0;
		break;
	case A_TANH:
		for (int64_t i = 0; i < n; i++)
			x[i] = tanh_fast(x[i]);
		break;
	case A_SIGMOID:
		for (int64_t i = 0; i < n; i++)
			x[i] = sigmoid_fast(x[i]);
		break;
	case A_AFFINE:
		for (int64_t i = 0; i < n; i++)
			x[i] = al * x[i] + be;
		break;
	case A_LEAKYRELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] >= 0 ? x[i] : al * x[i];
		break;
	case A_THRESHOLDEDRELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > al ? x[i] : 0;
		break;
	case A_SCALEDTANH:
		for (int64_t i = 0; i < n; i++)
			x[i] = al * tanh_fast(be * x[i]);
		break;
	case A_HARDSIGMOID:
		for (int64_t i = 0; i < n; i++)
			x[i] = fminf(fmaxf(al * x[i] + be, 0.0f), 1.0f);
		break;
	case A_ELU:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] >= 0 ? x[i] : al * expm1f(x[i]);
		break;
	case A_SOFTSIGN:
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] / (1.0f + fabsf(x[i]));
		break;
	case A_SOFTPLUS: /* log(1 + e^x) without overflowing e^x */
		for (int64_t i = 0; i < n; i++)
			x[i] = x[i] > 0 ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
		break;
	}
}

static void
clip_run(float c, float *x, int64_t n)
{
	for (int64_t i = 0; i < n && c > 0; i++)
		x[i] = x[i] > c ? c : x[i] < -c ? -c : x[i];
}

/* ------------------------------------------------------------ the op */

typedef struct {
	const char *op;                 /* "LSTM", for messages */
	int gates;                      /* G: 1 (RNN), 3 (GRU), 4 (LSTM) */
	int64_t T, B, H, D, isz;      /* steps, batch, hidden, directions, input */
	bool layout1;                   /* [B,T,...] instead of [T,B,...] */
	bool reverse;                   /* a one-way node's direction */
	const float *x, *w, *r, *bias, *h0, *c0, *p;
	const int32_t *len;             /* NULL: every sequence is T long */
	float *y, *yh, *yc;
	act f[2][3];                    /* per direction: f, g, h */
	float clip;                     /* 0: none */
	bool input_forget;              /* LSTM: f = 1 - i */
	bool lbr;                       /* GRU: linear_before_reset */
} rnn;

/* Fill r->f from the activations, activation_alpha and _beta attributes:
 * the parameters go, in order, to the listed functions that take them. */
static int
get_acts(taprt_ctx *cx, const taprt_node *n, rnn *r, int nfn)
{
	static const int dflt[3][3] = {
		{A_TANH}, {A_SIGMOID, A_TANH}, {A_SIGMOID, A_TANH, A_TANH},
	};
	const taprt_attr *names = taprt_attr_get(n, "activations");
	const taprt_attr *al = taprt_attr_get(n, "activation_alpha");
	const taprt_attr *be = taprt_attr_get(n, "activation_beta");
	int na = al && al->type == TAPRT_ATTR_FLOATS ? al->n : 0;
	int nb = be && be->type == TAPRT_ATTR_FLOATS ? be->n : 0;
	int cnt = names && names->type == TAPRT_ATTR_STRINGS ? names->n : 0;
	act list[6];
	if (!names) {
		for (int d = 0; d < r->D; d++)
			for (int i = 0; i < nfn; i++)
				r->f[d][i] = (act){dflt[nfn - 1][i], 0, 0};
		return 0;
	}
	/* one list per direction; tapc allowed one list for both
	 * directions, or two of which a one-way node uses the first */
	if (cnt != nfn * r->D && cnt != nfn * (3 - r->D))
		return taprt_fail(cx, "node '%s' (%s): %d activations, expected %d", n->name,
		    r->op, cnt, nfn * (int)r->D);
	for (int i = 0, ia = 0, ib = 0; i < cnt; i++) {
		int k = 0;
		while (k < NACT && strcasecmp(names->ss[i], act_info[k].name))
			k++;
		if (k == NACT)
			return taprt_fail(cx, "node '%s' (%s): unknown activation '%s'", n->name,
			    r->op, names->ss[i]);
		list[i] = (act){k, act_info[k].da, act_info[k].db};
		if (act_info[k].alpha && ia < na)
			list[i].alpha = al->fs[ia++];
		if (act_info[k].beta && ib < nb)
			list[i].beta = be->fs[ib++];
	}
	for (int d = 0; d < r->D; d++)
		for (int i = 0; i < nfn; i++)
			r->f[d][i] = list[cnt == nfn * r->D ? d * nfn + i : i];
	return 0;
}

/* Offsets of (t, b) in X's projection rows, in Y, and of b in Y_h. */
static inline int64_t
row_of(const rnn *r, int64_t t, int64_t b)
{
	return r->layout1 ? b * r->T + t : t * r->B + b;
}

static inline float *
y_at(const rnn *r, int64_t t, int64_t d, int64_t b)
{
	return r->y + (r->layout1 ? (b * r->T + t) * r->D + d : (t * r->D + d) * r->B + b) * r->H;
}

static inline int64_t
state_at(const rnn *r, int64_t d, int64_t b)
{
	return (r->layout1 ? b * r->D + d : d * r->B + b) * r->H;
}

/* c[M, N] (ldc) = a[M, K] @ b[N, K]^T; nothing when a dim is 0.  One row
 * (a batch of 1) is a matrix-vector product: sgemm would copy all of b into
 * its packed layout at every step. */
static void
gemm_nt(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *c, int64_t ldc)
{
	if (M == 0 || N == 0)
		return;
	if (K == 0) {
		for (int64_t i = 0; i < M; i++)
			memset(c + i * ldc, 0, sizeof *c * N);
		return;
	}
	taprt_sgemm(false, true, M, N, K, 1.0f, a, K, b, K, 0.0f, c, ldc);
}

/*
 * One direction d over the whole sequence.  xw: the input projection
 * [T*B, D*GH] with the biases in; hr: [B, GH] per step; h, c: the state
 * [B, H]; tmp: [B, H].
 */
static void
run_direction(const rnn *r, int64_t d, bool back, const float *xw, float *hr, float *h,
    float *c, float *tmp)
{
	const int64_t T = r->T, B = r->B, H = r->H, GH = r->gates * H, ld = r->D * GH;
	const float *R = r->r + d * GH * H;
	const float *P = r->p ? r->p + d * 3 * H : NULL;
	const float *rbh = r->bias && r->lbr ? r->bias + d * 2 * GH + GH + 2 * H : NULL;
	const act *f = r->f[d];
	for (int64_t b = 0; b < B; b++) {
		if (r->h0)
			memcpy(h + b * H, r->h0 + state_at(r, d, b), sizeof *h * H);
		else
			memset(h + b * H, 0, sizeof *h * H);
		if (c && r->c0)
			memcpy(c + b * H, r->c0 + state_at(r, d, b), sizeof *c * H);
		else if (c)
			memset(c + b * H, 0, sizeof *c * H);
	}
	bool gru0 = r->gates == 3 && !r->lbr;
	for (int64_t s = 0; s < T; s++) {
		int64_t t = back ? T - 1 - s : s;
		/* GRU's reset gate must be known before its h product */
		gemm_nt(B, gru0 ? 2 * H : GH, H, h, R, hr, GH);
		for (int64_t b = 0; b < B; b++) {
			if (r->len && t >= r->len[b]) {
				if (r->y)
					memset(y_at(r, t, d, b), 0, sizeof(float) * H);
				if (gru0)
					memset(tmp + b * H, 0, sizeof *tmp * H);
				continue;
			}
			float *g = hr + b * GH, *hb = h + b * H;
			const float *x = xw + row_of(r, t, b) * ld + d * GH;
			switch (r->gates) {
			case 1: /* Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi) */
				for (int64_t j = 0; j < H; j++)
					hb[j] = g[j] + x[j];
				clip_run(r->clip, hb, H);
				act_run(&f[0], hb, H);
				break;
			case 3: { /* z, r; h below */
				for (int64_t j = 0; j < 2 * H; j++)
					g[j] += x[j];
				clip_run(r->clip, g, 2 * H);
				act_run(&f[0], g, 2 * H);
				if (gru0) {
					for (int64_t j = 0; j < H; j++)
						tmp[b * H + j] = g[H + j] * hb[j];
					break;
				}
				float *gh = g + 2 * H;
				for (int64_t j = 0; j < H; j++)
					gh[j] = x[2 * H + j] + g[H + j] * (gh[j] + (rbh ? rbh[j] : 0));
				clip_run(r->clip, gh, H);
				act_run(&f[1], gh, H);
				for (int64_t j = 0; j < H; j++)
					hb[j] = (1 - g[j]) * gh[j] + g[j] * hb[j];
				break;
			}
			case 4: { /* gates i, o, f, c */
				float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
				float *cb = c + b * H;
				for (int64_t j = 0; j < 4 * H; j++)
					g[j] += x[j];
				if (P)
					for (int64_t j = 0; j < H; j++) {
						gi[j] += P[j] * cb[j];
						gf[j] += P[2 * H + j] * cb[j];
					}
				clip_run(r->clip, gi, H);
				act_run(&f[0], gi, H);
				if (r->input_forget) {
					for (int64_t j = 0; j < H; j++)
						gf[j] = 1 - gi[j];
				} else {
					clip_run(r->clip, gf, H);
					act_run(&f[0], gf, H);
				}
				clip_run(r->clip, gc, H);
				act_run(&f[1], gc, H);
				for (int64_t j = 0; j < H; j++) {
					cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
					if (P)
						go[j] += P[H + j] * cb[j];
				}
				clip_run(r->clip, go, H);
				act_run(&f[0], go, H);
				memcpy(gc, cb, sizeof *gc * H);
				act_run(&f[2], gc, H);
				for (int64_t j = 0; j < H; j++)
					hb[j] = go[j] * gc[j];
				break;
			}
			}
			if (r->y && !gru0)
				memcpy(y_at(r, t, d, b), hb, sizeof *hb * H);
		}
		if (!gru0)
			continue;
		/* GRU, linear_before_reset=0: (r . H) @ Rh^T, then h and H */
		gemm_nt(B, H, H, tmp, R + 2 * H * H, hr + 2 * H, GH);
		for (int64_t b = 0; b < B; b++) {
			if (r->len && t >= r->len[b])
				continue;
			float *g = hr + b * GH, *gh = g + 2 * H, *hb = h + b * H;
			const float *x = xw + row_of(r, t, b) * ld + d * GH;
			for (int64_t j = 0; j < H; j++)
				gh[j] += x[2 * H + j];
			clip_run(r->clip, gh, H);
			act_run(&f[1], gh, H);
			for (int64_t j = 0; j < H; j++)
				hb[j] = (1 - g[j]) * gh[j] + g[j] * hb[j];
			if (r->y)
				memcpy(y_at(r, t, d, b), hb, sizeof *hb * H);
		}
	}
	/* the final states; a sequence of length 0 has none */
	for (int64_t b = 0; b < B; b++) {
		bool empty = r->len && r->len[b] == 0;
		if (r->yh) {
			float *o = r->yh + state_at(r, d, b);
			if (empty)
				memset(o, 0, sizeof *o * H);
			else
				memcpy(o, h + b * H, sizeof *o * H);
		}
		if (r->yc) {
			float *o = r->yc + state_at(r, d, b);
			if (empty)
				memset(o, 0, sizeof *o * H);
			else
				memcpy(o, c + b * H, sizeof *o * H);
		}
	}
}

static void
rnn_op(taprt_ctx *cx, const taprt_node *n, const char *op, int gates, int nfn)
{
	const taprt_tensor *x = n->in[0], *w = n->in[1], *rt = n->in[2];
	const taprt_tensor *bias = taprt_input(n, 3), *len = taprt_input(n, 4);
	const taprt_tensor *h0 = taprt_input(n, 5);
	const taprt_tensor *c0 = gates == 4 ? taprt_input(n, 6) : NULL;
	const taprt_tensor *p = gates == 4 ? taprt_input(n, 7) : NULL;
	taprt_tensor *y = taprt_output(n, 0), *yh = taprt_output(n, 1);
	taprt_tensor *yc = gates == 4 ? taprt_output(n, 2) : NULL;
	const char *dir = taprt_attr_str(n, "direction", "forward");
	rnn r = {
		.op = op, .gates = gates,
		.layout1 = taprt_attr_int(n, "layout", 0) == 1,
		.reverse = !strcmp(dir, "reverse"),
		.D = w->dims[0], .H = rt->dims[2], .isz = x->dims[2],
		.x = x->data, .w = w->data, .r = rt->data,
		.bias = bias ? bias->data : NULL, .h0 = h0 ? h0->data : NULL,
		.c0 = c0 ? c0->data : NULL, .p = p ? p->data : NULL,
		.len = len ? len->data : NULL,
		.y = y ? y->data : NULL, .yh = yh ? yh->data : NULL, .yc = yc ? yc->data : NULL,
		.clip = taprt_attr_float(n, "clip", 0),
		.input_forget = taprt_attr_int(n, "input_forget", 0) != 0,
		.lbr = taprt_attr_int(n, "linear_before_reset", 0) != 0,
	};
	r.T = x->dims[r.layout1 ? 1 : 0];
	r.B = x->dims[r.layout1 ? 0 : 1];
	if (x->dtype != TAPRT_F32) {
		taprt_bad_dtype(cx, n, op, x->dtype);
		return;
	}
	if (len && len->dtype != TAPRT_I32) {
		taprt_bad_dtype(cx, n, op, len->dtype);
		return;
	}
	for (int64_t b = 0; r.len && b < r.B; b++)
		if (r.len[b] < 0 || r.len[b] > r.T) {
			taprt_fail(cx, "node '%s' (%s): sequence_lens[%lld] is %d, outside [0, %lld]",
			    n->name, op, (long long)b, (int)r.len[b], (long long)r.T);
			return;
		}
	if (get_acts(cx, n, &r, nfn))
		return;
	const int64_t GH = gates * r.H, TB = r.T * r.B;
	int64_t xwn, bgh, bh, need;
	/* the tensors' sizes were checked by tapc, not the buffers' */
	if (__builtin_mul_overflow(TB, r.D * GH, &xwn) ||
	    __builtin_mul_overflow(r.B, GH, &bgh) || __builtin_mul_overflow(r.B, 3 * r.H, &bh) ||
	    __builtin_add_overflow(xwn, bgh, &need) || __builtin_add_overflow(need, bh, &need) ||
	    __builtin_mul_overflow(need, (int64_t)sizeof(float), &need) ||
	    TB > INT_MAX || r.D * GH > INT_MAX || r.isz > INT_MAX) {
		taprt_fail(cx, "node '%s' (%s): %lld steps x %lld gates too large", n->name, op,
		    (long long)TB, (long long)(r.D * GH));
		return;
	}
	float *xw = taprt_scratch(need);
	if (!xw) {
		taprt_fail(cx, "node '%s' (%s): out of memory (%lld bytes)", n->name, op,
		    (long long)need);
		return;
	}
	float *hr = xw + xwn, *h = hr + r.B * GH, *c = h + r.B * r.H, *tmp = c + r.B * r.H;

	/* every step's input projection, both directions at once */
	gemm_nt(TB, r.D * GH, r.isz, r.x, r.w, xw, r.D * GH);
	/* biases outside a product: all but GRU's Rbh with linear_before_reset */
	if (r.bias)
		for (int64_t d = 0; d < r.D; d++) {
			const float *wb = r.bias + d * 2 * GH, *rb = wb + GH;
			int64_t both = gates == 3 && r.lbr ? 2 * r.H : GH;
			for (int64_t i = 0; i < TB; i++) {
				float *o = xw + i * r.D * GH + d * GH;
				for (int64_t j = 0; j < both; j++)
					o[j] += wb[j] + rb[j];
				for (int64_t j = both; j < GH; j++)
					o[j] += wb[j];
			}
		}
	for (int64_t d = 0; d < r.D; d++)
		run_direction(&r, d, d == 1 || r.reverse, xw, hr, h, gates == 4 ? c : NULL, tmp);
}

void
taprt_op_RNN(taprt_ctx *cx, const taprt_node *n)
{
	rnn_op(cx, n, "RNN", 1, 1);
}

void
taprt_op_GRU(taprt_ctx *cx, const taprt_node *n)
{
	rnn_op(cx, n, "GRU", 3, 2);
}

void
taprt_op_LSTM(taprt_ctx *cx, const taprt_node *n)
{
	rnn_op(cx, n, "LSTM", 4, 3);
}
