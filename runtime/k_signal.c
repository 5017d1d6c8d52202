/*
 * k_signal.c - Det and the signal operators of opset 17: HannWindow,
 * HammingWindow, BlackmanWindow, DFT, STFT and MelWeightMatrix (f32 and
 * f64; halves reach them as f32 through legalize-half).
 *
 * Needs: internal.h (the node and tensor types, taprt_input, taprt_getf and
 * taprt_setf, taprt_fail, TAPRT_PAR, taprt_scratch).
 *
 * Every value is computed in double and rounded once to the output's
 * type.  The windows are ONNX's formulas with the exact pi (the ONNX 1.12
 * backend tests' references use 3.1415; torch and onnxruntime pi).  The
 * transforms are a mixed-radix FFT (radix 4 and 2 butterflies written out,
 * any other prime factor p a direct length-p sum: O(L p) for it), every
 * twiddle e^(-2 pi i j / L) read from one table of L values computed from
 * its own angle.  Debian's kissfft (BSD) is float only and FFTW is GPL, so
 * the FFT is tapc's.  Det is LU factorization with partial pivoting.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

static bool
float_io(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *t)
{
	if (t->dtype == TAPRT_F32 || t->dtype == TAPRT_F64)
		return true;
	taprt_bad_dtype(cx, n, op, t->dtype);
	return false;
}

static void *
xmalloc(taprt_ctx *cx, const taprt_node *n, size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);
	if (!p)
		taprt_fail(cx, "node '%s': out of memory (%zu bytes)", n->name, bytes);
	return p;
}

/* ------------------------------------------------------------------- Det */

void
taprt_op_Det(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	if (!float_io(cx, n, "Det", X))
		return;
	int64_t M = X->dims[X->rank - 1], count = Y->numel;
	double *a = xmalloc(cx, n, (size_t)(M * M) * sizeof *a);
	if (!a)
		return;
	for (int64_t b = 0; b < count; b++) {
		for (int64_t i = 0; i < M * M; i++)
			a[i] = taprt_getf(X, b * M * M + i);
		double det = 1;
		for (int64_t c = 0; c < M && det != 0; c++) {
			int64_t p = c; /* the largest magnitude in column c at or below the diagonal */
			for (int64_t r = c + 1; r < M; r++)
				if (fabs(a[r * M + c]) > fabs(a[p * M + c]))
					p = r;
			if (a[p * M + c] == 0) {
				det = 0;
				break;
			}
			if (p != c) {
				for (int64_t k = 0; k < M; k++) {
					double t = a[c * M + k];
					a[c * M + k] = a[p * M + k];
					a[p * M + k] = t;
				}
				det = -det;
			}
			double d = a[c * M + c];
			det *= d;
			for (int64_t r = c + 1; r < M; r++) {
				double f = a[r * M + c] / d;
				for (int64_t k = c + 1; k < M; k++)
					a[r * M + k] -= f * a[c * M + k];
			}
		}
		taprt_setf(Y, b, det);
	}
	free(a);
}

/* --------------------------------------------------------------- windows */

/* sum over j of c[j] cos(2 pi j i / N), signs alternating from +, with N
 * the size (periodic) or size - 1 (symmetric) */
static void
window(taprt_ctx *cx, const taprt_node *n, const char *op, const double *c, int nc)
{
	taprt_tensor *Y = n->out[0];
	if (!float_io(cx, n, op, Y))
		return;
	double N = (double)(taprt_attr_int(n, "periodic", 1) ? Y->numel : Y->numel - 1);
	for (int64_t i = 0; i < Y->numel; i++) {
		double v = 0;
		for (int j = 0; j < nc; j++)
			v += (j % 2 ? -c[j] : c[j]) * cos(2 * M_PI * j * (double)i / N);
		taprt_setf(Y, i, v);
	}
}

void
taprt_op_HannWindow(taprt_ctx *cx, const taprt_node *n)
{
	window(cx, n, "HannWindow", (const double[]){0.5, 0.5}, 2);
}

void
taprt_op_HammingWindow(taprt_ctx *cx, const taprt_node *n)
{
	window(cx, n, "HammingWindow", (const double[]){25.0 / 46, 21.0 / 46}, 2);
}

void
taprt_op_BlackmanWindow(taprt_ctx *cx, const taprt_node *n)
{
	window(cx, n, "BlackmanWindow", (const double[]){0.42, 0.5, 0.08}, 3);
}

/* ------------------------------------------------------------ transforms */

typedef struct {
	double re, im;
} cplx;

/* A scalar i32 or i64 input (a length, a step). */
static int64_t
count(const taprt_tensor *t)
{
	return t->dtype == TAPRT_I64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
}

/*
 * A length-L transform: L's factors (4s first, then 2, 3, 5 and any other
 * primes) and the table of e^(sign 2 pi i j / L), j < L, each from its own
 * exact angle.  The largest factor sizes a thread's scratch.
 */
typedef struct {
	int64_t L, nf, f[64], pmax;
	double sign;
	cplx *tw;
} Plan;

static bool
plan_make(taprt_ctx *cx, const taprt_node *n, Plan *p, int64_t L, double sign)
{
	*p = (Plan){.L = L, .sign = sign, .pmax = 1};
	int64_t r = L;
	for (int64_t d = 4; r > 1; d = d == 4 ? 2 : d == 2 ? 3 : d + 2) {
		if (d * d > r && d > 4)
			d = r; /* what is left is prime */
		while (r % d == 0) {
			p->f[p->nf++] = d;
			p->pmax = d > p->pmax ? d : p->pmax;
			r /= d;
		}
	}
	if (!p->nf)
		p->f[p->nf++] = 1;
	p->tw = xmalloc(cx, n, (size_t)L * sizeof *p->tw);
	for (int64_t j = 0; p->tw && j < L; j++) {
		double a = 2 * M_PI * (double)j / (double)L;
		p->tw[j] = (cplx){cos(a), sign * sin(a)};
	}
	return p->tw != NULL;
}

static inline cplx
cmul(cplx a, cplx b)
{
	return (cplx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

/*
 * Mixed-radix decimation in time: out[k], k < n, the transform of in[i *
 * is], i < n, where n = L / ts (ts: this level's stride through the
 * table) and f its factors.  Each level transforms its p sub-sequences
 * into out's p blocks of m = n / p, then combines them: out[k + v m] =
 * sum over u of W_n^(u k) block_u[k] W_p^(u v), with u k ts < L, so every
 * twiddle is a table entry.
 */
static void
fft(const Plan *pl, cplx *out, const cplx *in, int64_t is, const int64_t *f, int64_t ts, int64_t n,
    cplx *sc)
{
	int64_t p = f[0], m = n / p;
	if (m == 1)
		for (int64_t u = 0; u < p; u++)
			out[u] = in[u * is];
	else
		for (int64_t u = 0; u < p; u++)
			fft(pl, out + u * m, in + u * is, is * p, f + 1, ts * p, m, sc);
	const cplx *tw = pl->tw;
	if (p == 2) {
		for (int64_t k = 0; k < m; k++) {
			cplx a = out[k], b = cmul(out[k + m], tw[k * ts]);
			out[k] = (cplx){a.re + b.re, a.im + b.im};
			out[k + m] = (cplx){a.re - b.re, a.im - b.im};
		}
	} else if (p == 4) {
		double s = pl->sign; /* W_4 = s i: W z = s (-z.im, z.re) */
		for (int64_t k = 0; k < m; k++) {
			cplx b0 = out[k], b1 = cmul(out[k + m], tw[k * ts]);
			cplx b2 = cmul(out[k + 2 * m], tw[2 * k * ts]), b3 = cmul(out[k + 3 * m], tw[3 * k * ts]);
			cplx e = {b0.re + b2.re, b0.im + b2.im}, d = {b0.re - b2.re, b0.im - b2.im};
			cplx g = {b1.re + b3.re, b1.im + b3.im}, h = {b1.re - b3.re, b1.im - b3.im};
			cplx wh = {-s * h.im, s * h.re};
			out[k] = (cplx){e.re + g.re, e.im + g.im};
			out[k + m] = (cplx){d.re + wh.re, d.im + wh.im};
			out[k + 2 * m] = (cplx){e.re - g.re, e.im - g.im};
			out[k + 3 * m] = (cplx){d.re - wh.re, d.im - wh.im};
		}
	} else {
		int64_t step = m * ts; /* W_p = W_L^(L / p) */
		for (int64_t k = 0; k < m; k++) {
			for (int64_t u = 0; u < p; u++)
				sc[u] = cmul(out[k + u * m], tw[u * k * ts]);
			for (int64_t v = 0; v < p; v++) {
				cplx acc = {0, 0};
				for (int64_t u = 0, e = 0; u < p; u++, e = e + v >= p ? e + v - p : e + v)
					acc = (cplx){acc.re + sc[u].re * tw[e * step].re - sc[u].im * tw[e * step].im,
					    acc.im + sc[u].re * tw[e * step].im + sc[u].im * tw[e * step].re};
				out[k + v * m] = acc;
			}
		}
	}
}

/*
 * K outputs of the length-L transform of one signal: x[i * xs] (and the
 * imaginary part at + 1 when cplx) for i < N, zero past N (N <= L), times
 * w[i] when given; out[k * ys] and + 1, k < K, times scale.  buf: 2 L +
 * pmax values of the calling thread's.
 */
static void
transform(const Plan *pl, const taprt_tensor *X, int64_t x0, int64_t xs, bool cplx_in, int64_t N,
    const taprt_tensor *W, taprt_tensor *Y, int64_t y0, int64_t ys, int64_t K, double scale,
    cplx *buf)
{
	int64_t L = pl->L;
	cplx *in = buf, *out = buf + L, *sc = buf + 2 * L;
	for (int64_t i = 0; i < N; i++) {
		double w = W ? taprt_getf(W, i) : 1;
		in[i] = (cplx){taprt_getf(X, x0 + i * xs) * w, cplx_in ? taprt_getf(X, x0 + i * xs + 1) * w : 0};
	}
	for (int64_t i = N; i < L; i++)
		in[i] = (cplx){0, 0};
	fft(pl, out, in, 1, pl->f, 1, L, sc);
	for (int64_t k = 0; k < K; k++) {
		taprt_setf(Y, y0 + k * ys, out[k].re * scale);
		taprt_setf(Y, y0 + k * ys + 1, out[k].im * scale);
	}
}

/* Signals q = o inner + j, q < rows: the input's from xo o + xj j, the
 * output's from yo o + yj j (elements), strides xs and ys. */
typedef struct {
	const taprt_tensor *X, *W;
	taprt_tensor *Y;
	int64_t inner, xo, xj, xs, yo, yj, ys, N, K;
	bool cplx_in;
	double scale;
} Rows;

/* transform() on every signal, on the team when there is enough work */
static void
rows_run(taprt_ctx *cx, const taprt_node *n, const Plan *pl, const Rows *r, int64_t rows)
{
	int64_t bytes = (2 * pl->L + pl->pmax) * (int64_t)sizeof(cplx);
	int failed = 0;
	#pragma omp parallel if (TAPRT_PAR(rows * pl->L * 8))
	{
		cplx *buf = taprt_scratch(bytes);
		#pragma omp for schedule(static)
		for (int64_t q = 0; q < rows; q++) {
			if (!buf) {
				#pragma omp atomic write
				failed = 1;
				continue;
			}
			int64_t o = q / r->inner, j = q % r->inner;
			transform(pl, r->X, o * r->xo + j * r->xj, r->xs, r->cplx_in, r->N, r->W, r->Y,
			    o * r->yo + j * r->yj, r->ys, r->K, r->scale, buf);
		}
	}
	if (failed)
		taprt_fail(cx, "node '%s': out of memory (%lld bytes a thread)", n->name, (long long)bytes);
}

void
taprt_op_DFT(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0];
	taprt_tensor *Y = n->out[0];
	if (!float_io(cx, n, "DFT", X))
		return;
	int r = X->rank;
	int64_t axis = taprt_attr_int(n, "axis", 1);
	axis = axis < 0 ? axis + r : axis;
	bool inverse = taprt_attr_int(n, "inverse", 0) != 0;
	int64_t K = Y->dims[axis], NX = X->dims[axis], L = NX;
	if (taprt_input(n, 1)) /* dft_length */
		L = count(n->in[1]);
	int64_t outer = 1, inner = 1, C = X->dims[r - 1];
	for (int i = 0; i < axis; i++)
		outer *= X->dims[i];
	for (int i = axis + 1; i < r - 1; i++)
		inner *= X->dims[i];
	Plan pl;
	if (!plan_make(cx, n, &pl, L, inverse ? 1 : -1))
		return;
	/* signal (o, ., j): sample i of x at ((o NX + i) inner + j) C, y's k at
	 * ((o K + k) inner + j) 2 */
	Rows rw = {.X = X, .Y = Y, .inner = inner, .xo = NX * inner * C, .xj = C, .xs = inner * C,
		.yo = K * inner * 2, .yj = 2, .ys = inner * 2, .N = NX < L ? NX : L, .K = K,
		.cplx_in = C == 2, .scale = inverse ? 1.0 / (double)L : 1};
	rows_run(cx, n, &pl, &rw, outer * inner);
	free(pl.tw);
}

void
taprt_op_STFT(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *W = taprt_input(n, 2);
	taprt_tensor *Y = n->out[0];
	if (!float_io(cx, n, "STFT", X))
		return;
	const taprt_tensor *S = n->in[1], *FL = taprt_input(n, 3);
	int64_t step = count(S), L = FL ? count(FL) : W->dims[0];
	int64_t B = X->dims[0], T = X->dims[1], C = X->dims[2], F = Y->dims[1], K = Y->dims[2];
	Plan pl;
	if (!plan_make(cx, n, &pl, L, -1))
		return;
	/* frame f of batch b: samples from (b T + f step) C, bins from (b F + f) K 2 */
	Rows rw = {.X = X, .W = W, .Y = Y, .inner = F, .xo = T * C, .xj = step * C, .xs = C,
		.yo = F * K * 2, .yj = K * 2, .ys = 2, .N = L, .K = K, .cplx_in = C == 2, .scale = 1};
	rows_run(cx, n, &pl, &rw, B * F);
	free(pl.tw);
}

/* -------------------------------------------------------- MelWeightMatrix */

/* The FFT bin of a point in mel, in [0, bins), else false. */
static bool
mel_bin(double mel, int64_t len, int64_t rate, int64_t bins, int64_t *b)
{
	double hz = 700 * (pow(10, mel / 2595) - 1);
	double v = floor((double)(len + 1) * hz / (double)rate);
	if (!(v >= 0 && v < (double)bins))
		return false;
	*b = (int64_t)v;
	return true;
}

/*
 * The spec's triangles (its reference and onnxruntime's, in double):
 * num_mel_bins + 2 points evenly spaced in mel from the lower to the upper
 * edge, each at the FFT bin floor((dft_length + 1) hz / sample_rate);
 * filter i rises from point i to point i + 1 and falls to point i + 2.
 * A point outside the output's bins (an edge past the Nyquist frequency, a
 * negative one), the upper edge below the lower or either not a number
 * fails the run.
 */
void
taprt_op_MelWeightMatrix(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *Y = n->out[0];
	if (!float_io(cx, n, "MelWeightMatrix", Y))
		return;
	int64_t bins = Y->dims[0], mels = Y->dims[1], len = count(n->in[1]), rate = count(n->in[2]);
	double lo = taprt_getf(n->in[3], 0), hi = taprt_getf(n->in[4], 0);
	if (rate <= 0 || !(lo <= hi) || !isfinite(hi)) {
		taprt_fail(cx, "node '%s' (MelWeightMatrix): edges %g to %g Hz at %lld Hz", n->name, lo, hi,
		    (long long)rate);
		return;
	}
	double lmel = 2595 * log10(1 + lo / 700), hmel = 2595 * log10(1 + hi / 700);
	double step = (hmel - lmel) / (double)(mels + 2);
	for (int64_t i = 0; i < Y->numel; i++)
		taprt_setf(Y, i, 0);
	for (int64_t i = 0; i < mels; i++) {
		int64_t l, c, h;
		if (!mel_bin(lmel + step * (double)i, len, rate, bins, &l) ||
		    !mel_bin(lmel + step * (double)(i + 1), len, rate, bins, &c) ||
		    !mel_bin(lmel + step * (double)(i + 2), len, rate, bins, &h)) {
			taprt_fail(cx, "node '%s' (MelWeightMatrix): edges %g to %g Hz at %lld Hz put "
			    "filter %lld outside the bins 0 to %lld", n->name, lo, hi, (long long)rate,
			    (long long)i, (long long)bins - 1);
			return;
		}
		if (c == l)
			taprt_setf(Y, c * mels + i, 1);
		else
			for (int64_t j = l; j <= c; j++)
				taprt_setf(Y, j * mels + i, (double)(j - l) / (double)(c - l));
		for (int64_t j = c; j < h; j++)
			taprt_setf(Y, j * mels + i, (double)(h - j) / (double)(h - c));
	}
}
