/*
 * k_signal.c - Det and the signal operators of opset 17: HannWindow,
 * HammingWindow, BlackmanWindow, DFT and STFT (f32 and f64; halves reach
 * them as f32 through legalize-half).
 *
 * Needs: internal.h (the node and tensor types, taprt_input, taprt_fail,
 * TAPRT_PAR).
 *
 * Every value is computed in double and rounded once to the output's
 * type.  The windows are ONNX's formulas with the exact pi (the ONNX 1.12
 * backend tests' references use 3.1415; torch and onnxruntime pi).  The
 * transforms are direct sums, O(N K) for a signal of N samples and K
 * outputs, the twiddles e^(-2 pi i m / L) read from a table of L values at
 * m = k n mod L (an exact index, so every angle is as exact as one cos and
 * one sin of it): right for any length, and slower than an FFT on long
 * frames (docs/ops.md says where this matters).  Det is LU factorization
 * with partial pivoting.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

static double
rd(const taprt_tensor *t, int64_t i)
{
	return t->dtype == TAPRT_F64 ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}

static void
wr(taprt_tensor *t, int64_t i, double v)
{
	if (t->dtype == TAPRT_F64)
		((double *)t->data)[i] = v;
	else
		((float *)t->data)[i] = (float)v;
}

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
			a[i] = rd(X, b * M * M + i);
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
		wr(Y, b, det);
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
		wr(Y, i, v);
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

/* A scalar i32 or i64 input (a length, a step). */
static int64_t
count(const taprt_tensor *t)
{
	return t->dtype == TAPRT_I64 ? *(const int64_t *)t->data : *(const int32_t *)t->data;
}

/* cos and sin of 2 pi m / L for m in [0, L) */
static double *
twiddles(taprt_ctx *cx, const taprt_node *n, int64_t L)
{
	double *t = xmalloc(cx, n, (size_t)(2 * L) * sizeof *t);
	for (int64_t m = 0; t && m < L; m++) {
		t[2 * m] = cos(2 * M_PI * (double)m / (double)L);
		t[2 * m + 1] = sin(2 * M_PI * (double)m / (double)L);
	}
	return t;
}

/*
 * K outputs of the length-L transform of one signal: x[i * xs] (and the
 * imaginary part at + 1 when cplx) for i < N, zero past N (N <= L); out[k *
 * ys] and + 1, k < K.  sign -1: forward; +1 with scale 1 / L: inverse.  w,
 * when given, multiplies sample i.
 */
static void
transform(const taprt_tensor *X, int64_t x0, int64_t xs, bool cplx, int64_t N, const taprt_tensor *W,
    taprt_tensor *Y, int64_t y0, int64_t ys, int64_t K, int64_t L, const double *tw, double sign,
    double scale)
{
	for (int64_t k = 0; k < K; k++) {
		double re = 0, im = 0;
		int64_t m = 0; /* k i mod L */
		for (int64_t i = 0; i < N; i++) {
			double xr = rd(X, x0 + i * xs), xi = cplx ? rd(X, x0 + i * xs + 1) : 0;
			if (W) {
				double w = rd(W, i);
				xr *= w;
				xi *= w;
			}
			double c = tw[2 * m], s = sign * tw[2 * m + 1];
			re += xr * c - xi * s;
			im += xr * s + xi * c;
			m += k; /* k < L */
			m = m >= L ? m - L : m;
		}
		wr(Y, y0 + k * ys, re * scale);
		wr(Y, y0 + k * ys + 1, im * scale);
	}
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
	bool inverse = taprt_attr_int(n, "inverse", 0) != 0, cplx = X->dims[r - 1] == 2;
	int64_t K = Y->dims[axis], NX = X->dims[axis], L = NX;
	if (taprt_input(n, 1)) /* dft_length */
		L = count(n->in[1]);
	int64_t N = NX < L ? NX : L, outer = 1, inner = 1;
	for (int i = 0; i < axis; i++)
		outer *= X->dims[i];
	for (int i = axis + 1; i < r - 1; i++)
		inner *= X->dims[i];
	double *tw = twiddles(cx, n, L);
	if (!tw)
		return;
	int64_t C = X->dims[r - 1], rows = outer * inner;
	#pragma omp parallel for if (TAPRT_PAR(rows * K * N)) schedule(static)
	for (int64_t q = 0; q < rows; q++) {
		int64_t o = q / inner, j = q % inner;
		transform(X, (o * NX * inner + j) * C, inner * C, cplx, N, NULL, Y, (o * K * inner + j) * 2,
		    inner * 2, K, L, tw, inverse ? 1 : -1, inverse ? 1.0 / (double)L : 1);
	}
	free(tw);
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
	double *tw = twiddles(cx, n, L);
	if (!tw)
		return;
	#pragma omp parallel for if (TAPRT_PAR(B * F * K * L)) schedule(static)
	for (int64_t q = 0; q < B * F; q++) {
		int64_t b = q / F, f = q % F;
		transform(X, (b * T + f * step) * C, C, C == 2, L, W, Y, q * K * 2, 2, K, L, tw, -1, 1);
	}
	free(tw);
}
