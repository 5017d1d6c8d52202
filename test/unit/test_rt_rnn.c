/*
 * test_rt_rnn.c - the recurrent kernels where a hand computation says more
 * than the node tests: the activations' accuracy over the whole float
 * range (k_rnn.c computes e^x, tanh and the logistic function itself), an
 * LSTM step worked out by hand, and sequence_lens (an empty sequence, a
 * length past seq_length).
 */
#include <math.h>
#include <string.h>

#include "runtime/taprt.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

#define A_STR(nm, v) {.name = (nm), .type = TAPRT_ATTR_STRING, .s = (v)}

enum { N = 64 };

/* An RNN with W = identity, R = 0 and no bias computes Y = f(X) for one
 * step: x's values through the activation `act`. */
static void
rnn_identity(const char *act, const float *x, float *y)
{
	static float w[N * N], r[N * N];
	memset(w, 0, sizeof w);
	for (int i = 0; i < N; i++)
		w[i * N + i] = 1;
	taprt_tensor tx = rt_tensor(TAPRT_F32, (void *)x, 3, DIMS(1, 1, N));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 3, DIMS(1, N, N));
	taprt_tensor tr = rt_tensor(TAPRT_F32, r, 3, DIMS(1, N, N));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 1, N));
	taprt_tensor *in[] = {&tx, &tw, &tr}, *out[] = {&ty};
	const char *names[] = {act};
	taprt_attr at[] = {{.name = "activations", .type = TAPRT_ATTR_STRINGS, .n = 1, .ss = names}};
	rt_run(taprt_op_RNN, in, 3, out, 1, at, 1, 14);
}

/* Relative accuracy 1e-6 from 1e-30 to 1e37, both signs, so a small result
 * keeps its digits and a large argument saturates. */
static void
test_activation_accuracy(void)
{
	for (int which = 0; which < 2; which++) {
		float x[N], y[N];
		int bad = 0;
		for (double base = 1e-30; base < 1e37; base *= 1.7) {
			for (int i = 0; i < N; i++) {
				double m = base * (1 + i / (double)N);
				x[i] = (float)(i % 2 ? -m : m);
			}
			rnn_identity(which ? "Sigmoid" : "Tanh", x, y);
			for (int i = 0; i < N; i++) {
				double v = x[i];
				double want = which ? 1 / (1 + exp(-v)) : tanh(v);
				if (!(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-37) && !bad++)
					printf("\n  %s(%g) = %.9g, want %.9g\n", which ? "sigmoid" : "tanh",
					    v, y[i], want);
			}
		}
		CU_ASSERT_EQUAL(bad, 0);
	}
}

static double
sig(double v)
{
	return 1 / (1 + exp(-v));
}

/*
 * One LSTM step, hidden size 1, two batch rows, by hand:
 * gates i, o, f, c = W x + R h0 + Wb + Rb with peepholes P (i, o, f), then
 * C = f C0 + i c, H = o tanh(C).
 */
static void
test_lstm_step_by_hand(void)
{
	float x[] = {0.5f, -1.0f}, w[] = {0.1f, 0.2f, 0.3f, 0.4f}, r[] = {-0.5f, 0.6f, 0.7f, -0.8f};
	float b[] = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f};
	float h0[] = {0.3f, -0.2f}, c0[] = {-0.4f, 0.9f}, p[] = {0.25f, -0.5f, 0.75f};
	float y[2], yh[2], yc[2];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 3, DIMS(1, 2, 1));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 3, DIMS(1, 4, 1));
	taprt_tensor tr = rt_tensor(TAPRT_F32, r, 3, DIMS(1, 4, 1));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 2, DIMS(1, 8));
	taprt_tensor th = rt_tensor(TAPRT_F32, h0, 3, DIMS(1, 2, 1));
	taprt_tensor tc = rt_tensor(TAPRT_F32, c0, 3, DIMS(1, 2, 1));
	taprt_tensor tp = rt_tensor(TAPRT_F32, p, 2, DIMS(1, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 2, 1));
	taprt_tensor tyh = rt_tensor(TAPRT_F32, yh, 3, DIMS(1, 2, 1));
	taprt_tensor tyc = rt_tensor(TAPRT_F32, yc, 3, DIMS(1, 2, 1));
	taprt_tensor *in[] = {&tx, &tw, &tr, &tb, NULL, &th, &tc, &tp};
	taprt_tensor *out[] = {&ty, &tyh, &tyc};
	rt_run(taprt_op_LSTM, in, 8, out, 3, NULL, 0, 14);
	for (int k = 0; k < 2; k++) {
		double g[4];
		for (int j = 0; j < 4; j++)
			g[j] = w[j] * x[k] + r[j] * h0[k] + b[j] + b[4 + j];
		double i = sig(g[0] + p[0] * c0[k]), f = sig(g[2] + p[2] * c0[k]);
		double C = f * c0[k] + i * tanh(g[3]);
		double o = sig(g[1] + p[1] * C), H = o * tanh(C);
		CU_ASSERT_DOUBLE_EQUAL(y[k], H, 1e-6);
		CU_ASSERT_DOUBLE_EQUAL(yh[k], H, 1e-6);
		CU_ASSERT_DOUBLE_EQUAL(yc[k], C, 1e-6);
	}
}

/* sequence_lens {2, 0}, reverse: row 0 runs x[1] then x[0]; row 1 has no
 * steps, so its Y rows and Y_h are 0 (onnxruntime's choice) despite h0. */
static void
test_seq_lens(void)
{
	float x[] = {1, 2, 3, 4, 5, 6}, w[] = {0.5f}, r[] = {0.25f}, h0[] = {0.1f, 0.2f};
	float y[6], yh[2];
	int32_t len[] = {2, 0};
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 3, DIMS(3, 2, 1));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 3, DIMS(1, 1, 1));
	taprt_tensor tr = rt_tensor(TAPRT_F32, r, 3, DIMS(1, 1, 1));
	taprt_tensor tl = rt_tensor(TAPRT_I32, len, 1, DIMS(2));
	taprt_tensor th = rt_tensor(TAPRT_F32, h0, 3, DIMS(1, 2, 1));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(3, 1, 2, 1));
	taprt_tensor tyh = rt_tensor(TAPRT_F32, yh, 3, DIMS(1, 2, 1));
	taprt_tensor *in[] = {&tx, &tw, &tr, NULL, &tl, &th}, *out[] = {&ty, &tyh};
	taprt_attr at[] = {A_STR("direction", "reverse")};
	memset(y, 0x7f, sizeof y);
	rt_run(taprt_op_RNN, in, 6, out, 2, at, 1, 14);
	double h1 = tanh(0.5 * x[2] + 0.25 * h0[0]);    /* t = 1, row 0 */
	double h0v = tanh(0.5 * x[0] + 0.25 * h1);      /* t = 0 */
	CU_ASSERT_DOUBLE_EQUAL(y[2], h1, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(y[0], h0v, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(yh[0], h0v, 1e-6);
	CU_ASSERT_EQUAL(y[4], 0.0f);                    /* t = 2: past row 0's end */
	CU_ASSERT_EQUAL(y[1], 0.0f);
	CU_ASSERT_EQUAL(y[3], 0.0f);
	CU_ASSERT_EQUAL(y[5], 0.0f);
	CU_ASSERT_EQUAL(yh[1], 0.0f);

	/* a length past seq_length is an error, not a read past X */
	len[1] = 4;
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(in, 6, out, 2, at, 1);
	taprt_op_RNN(&cx, &n);
	CU_ASSERT_PTR_NOT_NULL(strstr(cx.error, "sequence_lens[1] is 4, outside [0, 3]"));
}

void
suite_rt_rnn(CU_pSuite s)
{
	ADD(s, test_activation_accuracy);
	ADD(s, test_lstm_step_by_hand);
	ADD(s, test_seq_lens);
}
