/*
 * test_rt_reduce.c - the kernels of runtime/k_reduce.c against values
 * worked out by hand or from closed forms (x[i] = i makes sums over any
 * axes arithmetic series): reductions over middle and outer axes with and
 * without keepdims, axes from inputs, ArgMax ties, Softmax stability and
 * its exp accuracy, FusedSoftmax's masks against softmax in double (each
 * on every instruction set the CPU has), LayerNorm and BatchNorm on small known cases.
 */
#include <math.h>
#include <string.h>

#include "runtime/internal.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

static float iota24[24];

static void
fill_iota(void)
{
	for (int i = 0; i < 24; i++)
		iota24[i] = (float)i;
}

/* x[a,b,c] = 12a + 4b + c over [2,3,4], one reduction with the given axes
 * attribute and keepdims; y gets yrank/ydims */
static void
reduce_iota(kernel *op, const int64_t *axes, int naxes, int keep, float *y, int yrank,
    const int64_t *ydims, int opset)
{
	fill_iota();
	taprt_tensor tx = rt_tensor(TAPRT_F32, iota24, 3, DIMS(2, 3, 4));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, yrank, ydims);
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};
	taprt_attr at[] = {
		{.name = "axes", .type = TAPRT_ATTR_INTS, .n = naxes, .is = axes},
		{.name = "keepdims", .type = TAPRT_ATTR_INT, .i = keep},
	};
	if (naxes)
		rt_run(op, in, 1, out, 1, at, 2, opset);
	else
		rt_run(op, in, 1, out, 1, at + 1, 1, opset);
}

static void
reduce_axes(void)
{
	float y[24];

	/* middle axis, keepdims=1 and 0: sum_b (12a + 4b + c) = 36a + 3c + 12 */
	reduce_iota(taprt_op_ReduceSum, DIMS(1), 1, 1, y, 3, DIMS(2, 1, 4), 11);
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 4; c++)
			CU_ASSERT_EQUAL(y[a * 4 + c], 36 * a + 3 * c + 12);
	reduce_iota(taprt_op_ReduceSum, DIMS(-2), 1, 0, y, 2, DIMS(2, 4), 11);
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 4; c++)
			CU_ASSERT_EQUAL(y[a * 4 + c], 36 * a + 3 * c + 12);

	/* outer and inner axes: mean over a, c of 12a + 4b + c = 7.5 + 4b */
	reduce_iota(taprt_op_ReduceMean, DIMS(0, 2), 2, 0, y, 1, DIMS(3), 17);
	for (int b = 0; b < 3; b++)
		CU_ASSERT_DOUBLE_EQUAL(y[b], 7.5 + 4 * b, 1e-6);

	/* last axis (the LayerNorm-style mean): 12a + 4b + 1.5 */
	reduce_iota(taprt_op_ReduceMean, DIMS(-1), 1, 1, y, 3, DIMS(2, 3, 1), 17);
	for (int r = 0; r < 6; r++)
		CU_ASSERT_DOUBLE_EQUAL(y[r], 4 * r + 1.5, 1e-6);

	/* Max over axes 0,1; Min over everything (no axes attribute) */
	reduce_iota(taprt_op_ReduceMax, DIMS(0, 1), 2, 1, y, 3, DIMS(1, 1, 4), 17);
	for (int c = 0; c < 4; c++)
		CU_ASSERT_EQUAL(y[c], 20 + c);
	reduce_iota(taprt_op_ReduceMin, NULL, 0, 0, y, 0, NULL, 17);
	CU_ASSERT_EQUAL(y[0], 0);
	reduce_iota(taprt_op_ReduceMax, NULL, 0, 1, y, 3, DIMS(1, 1, 1), 17);
	CU_ASSERT_EQUAL(y[0], 23);

	/* SumSquare over the middle axis: sum_b (12a+4b+c)^2 */
	reduce_iota(taprt_op_ReduceSumSquare, DIMS(1), 1, 0, y, 2, DIMS(2, 4), 17);
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 4; c++) {
			double s = 0;
			for (int b = 0; b < 3; b++)
				s += (12.0 * a + 4 * b + c) * (12.0 * a + 4 * b + c);
			CU_ASSERT_EQUAL(y[a * 4 + c], s);
		}

	/* Prod of small ints, i32, over the first axis: (c+1)(c+5) */
	int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, p[4];
	taprt_tensor tx = rt_tensor(TAPRT_I32, x, 2, DIMS(2, 4));
	taprt_tensor tp = rt_tensor(TAPRT_I32, p, 1, DIMS(4));
	taprt_tensor *in[] = {&tx}, *out[] = {&tp};
	taprt_attr at[] = {
		{.name = "axes", .type = TAPRT_ATTR_INTS, .n = 1, .is = DIMS(0)},
		{.name = "keepdims", .type = TAPRT_ATTR_INT, .i = 0},
	};
	rt_run(taprt_op_ReduceProd, in, 1, out, 1, at, 2, 13);
	for (int c = 0; c < 4; c++)
		CU_ASSERT_EQUAL(p[c], (c + 1) * (c + 5));
	/* integer mean truncates: (c+1 + c+5)/2 = c+3 exactly */
	rt_run(taprt_op_ReduceMean, in, 1, out, 1, at, 2, 13);
	for (int c = 0; c < 4; c++)
		CU_ASSERT_EQUAL(p[c], c + 3);
}

static void
reduce_axes_input(void)
{
	float y[24];
	fill_iota();
	taprt_tensor tx = rt_tensor(TAPRT_F32, iota24, 3, DIMS(2, 3, 4));
	int64_t ax[] = {1};
	taprt_tensor ta = rt_tensor(TAPRT_I64, ax, 1, DIMS(1));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 1, 4));
	taprt_tensor *in[] = {&tx, &ta}, *out[] = {&ty};

	/* ReduceSum at opset 13 takes axes from input 1 */
	rt_run(taprt_op_ReduceSum, in, 2, out, 1, NULL, 0, 13);
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 4; c++)
			CU_ASSERT_EQUAL(y[a * 4 + c], 36 * a + 3 * c + 12);

	/* other reductions do from opset 18 */
	rt_run(taprt_op_ReduceMax, in, 2, out, 1, NULL, 0, 18);
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 4; c++)
			CU_ASSERT_EQUAL(y[a * 4 + c], 12 * a + 8 + c);

	/* empty axes: everything, or nothing with noop_with_empty_axes */
	taprt_tensor te = rt_tensor(TAPRT_I64, ax, 1, DIMS(0));
	in[1] = &te;
	taprt_tensor t1 = rt_tensor(TAPRT_F32, y, 3, DIMS(1, 1, 1));
	out[0] = &t1;
	rt_run(taprt_op_ReduceSum, in, 2, out, 1, NULL, 0, 13);
	CU_ASSERT_EQUAL(y[0], 276);
	/* absent axes input: the same */
	rt_run(taprt_op_ReduceSum, in, 1, out, 1, NULL, 0, 13);
	CU_ASSERT_EQUAL(y[0], 276);
	taprt_attr noop = {.name = "noop_with_empty_axes", .type = TAPRT_ATTR_INT, .i = 1};
	taprt_tensor tall = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 3, 4));
	out[0] = &tall;
	rt_run(taprt_op_ReduceSum, in, 2, out, 1, &noop, 1, 13);
	CU_ASSERT_EQUAL(memcmp(y, iota24, sizeof y), 0);
}

static void
argmax_ties(void)
{
	float x[] = {1, 3, 3, 2, 2, 1};
	int64_t y[3];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(2, 3));
	taprt_tensor ty = rt_tensor(TAPRT_I64, y, 2, DIMS(2, 1));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};
	taprt_attr at[] = {
		{.name = "axis", .type = TAPRT_ATTR_INT, .i = 1},
		{.name = "keepdims", .type = TAPRT_ATTR_INT, .i = 1},
		{.name = "select_last_index", .type = TAPRT_ATTR_INT, .i = 1},
	};
	rt_run(taprt_op_ArgMax, in, 1, out, 1, at, 2, 13);
	CU_ASSERT_TRUE(y[0] == 1 && y[1] == 0);
	rt_run(taprt_op_ArgMax, in, 1, out, 1, at, 3, 13);
	CU_ASSERT_TRUE(y[0] == 2 && y[1] == 1);
	rt_run(taprt_op_ArgMin, in, 1, out, 1, at, 2, 13);
	CU_ASSERT_TRUE(y[0] == 0 && y[1] == 2);

	/* axis 0 (the default), ints: ties between the rows at column 2 */
	int32_t ix[] = {5, 1, 7, 4, 9, 7};
	taprt_tensor tix = rt_tensor(TAPRT_I32, ix, 2, DIMS(2, 3));
	taprt_tensor ty3 = rt_tensor(TAPRT_I64, y, 1, DIMS(3));
	in[0] = &tix;
	out[0] = &ty3;
	rt_run(taprt_op_ArgMax, in, 1, out, 1, NULL, 0, 13);
	CU_ASSERT_TRUE(y[0] == 0 && y[1] == 1 && y[2] == 0);
	rt_run(taprt_op_ArgMin, in, 1, out, 1, at + 2, 1, 13);
	CU_ASSERT_TRUE(y[0] == 1 && y[1] == 0 && y[2] == 1);
}

static void
softmax_stable(void)
{
	/* large values: a naive exp overflows */
	float x[] = {1000, 1001, 1002, -1000, -1001, -1002}, y[6];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(2, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};
	double e[] = {1, exp(1.0), exp(2.0)}, s = e[0] + e[1] + e[2];
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 13);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_DOUBLE_EQUAL(y[i], e[i] / s, 1e-6);
		CU_ASSERT_DOUBLE_EQUAL(y[3 + i], e[2 - i] / s, 1e-6);
	}
	rt_run(taprt_op_LogSoftmax, in, 1, out, 1, NULL, 0, 13);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_DOUBLE_EQUAL(y[i], i - 2 - log1p(exp(-1.0) + exp(-2.0)), 1e-5);
		CU_ASSERT_DOUBLE_EQUAL(y[3 + i], -i - log1p(exp(-1.0) + exp(-2.0)), 1e-5);
	}

	/* -inf (a masked position) gives exactly 0 */
	float m[] = {0, -INFINITY, 0, 1};
	taprt_tensor tm = rt_tensor(TAPRT_F32, m, 1, DIMS(4));
	taprt_tensor tmy = rt_tensor(TAPRT_F32, y, 1, DIMS(4));
	in[0] = &tm;
	out[0] = &tmy;
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 13);
	CU_ASSERT_EQUAL(y[1], 0);
	CU_ASSERT_DOUBLE_EQUAL(y[3], exp(1.0) / (2 + exp(1.0)), 1e-6);
}

/* x viewed [outer, len, inner]; softmax along len, in double */
static void
softmax_ref(const float *x, double *y, int outer, int len, int inner)
{
	for (int o = 0; o < outer; o++)
		for (int j = 0; j < inner; j++) {
			double s = 0;
			for (int k = 0; k < len; k++)
				s += exp(x[(o * len + k) * inner + j]);
			for (int k = 0; k < len; k++)
				y[(o * len + k) * inner + j] = exp(x[(o * len + k) * inner + j]) / s;
		}
}

static void
softmax_axes(void)
{
	float x[12], y[12];
	double r[12];
	for (int i = 0; i < 12; i++)
		x[i] = (float)((i * 7) % 5) * 0.5f - 1;
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 3, DIMS(2, 3, 2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 3, 2));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};
	taprt_attr ax1 = {.name = "axis", .type = TAPRT_ATTR_INT, .i = 1};

	/* opset 13: a single middle axis */
	rt_run(taprt_op_Softmax, in, 1, out, 1, &ax1, 1, 13);
	softmax_ref(x, r, 2, 3, 2);
	for (int i = 0; i < 12; i++)
		CU_ASSERT_DOUBLE_EQUAL(y[i], r[i], 1e-6);

	/* opset 11: flattened to [2, 6] at axis 1 (the default) */
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 11);
	softmax_ref(x, r, 2, 6, 1);
	for (int i = 0; i < 12; i++)
		CU_ASSERT_DOUBLE_EQUAL(y[i], r[i], 1e-6);

	/* opset 13 default: the last axis; f64 */
	double dx[12], dy[12];
	for (int i = 0; i < 12; i++)
		dx[i] = x[i];
	taprt_tensor tdx = rt_tensor(TAPRT_F64, dx, 3, DIMS(2, 3, 2));
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 3, DIMS(2, 3, 2));
	in[0] = &tdx;
	out[0] = &tdy;
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 13);
	softmax_ref(x, r, 6, 2, 1);
	for (int i = 0; i < 12; i++)
		CU_ASSERT_DOUBLE_EQUAL(dy[i], r[i], 1e-12);
}

/*
 * FusedSoftmax (passes/fuse_softmax.c) against softmax in double of the
 * scores it stands for: X [2,3,4,37] (rows of 37 leave remainders after
 * the 8-wide loops) scaled by a multiply or a divide, with no mask, an
 * additive f32 mask along the row (BERT's [B,1,1,T]) or one value per row
 * ([B,H,T,1]), and a bool mask along the row (GPT's causal [T,T]) or one
 * per row, some rows wholly masked.
 */
static void
fused_softmax_masks(void)
{
	enum { B = 2, H = 3, T = 4, L = 37, N = B * H * T * L };
	static float x[N], y[N], mrow[B * L], mone[B * H * T];
	static uint8_t causal[T * L], bone[B * T];
	static double t[N];
	for (int i = 0; i < N; i++)
		x[i] = sinf(0.37f * (float)i) * 6;
	for (int i = 0; i < B * L; i++)
		mrow[i] = i % 5 == 0 ? -10000.0f : 0.1f * (float)(i % 7);
	for (int i = 0; i < B * H * T; i++)
		mone[i] = (float)i - 7;
	for (int i = 0; i < T * L; i++)
		causal[i] = i % L > i / L + 30;
	for (int i = 0; i < B * T; i++)
		bone[i] = i == 5;
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(B, H, T, L));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(B, H, T, L));
	struct {
		taprt_tensor m;         /* rank 0: no mask */
		int divide;
	} cases[] = {
		{{.rank = 0}, 0},
		{{.rank = 0}, 1},
		{rt_tensor(TAPRT_F32, mrow, 4, DIMS(B, 1, 1, L)), 1},
		/* softmax ignores a constant per row: this runs the path, no more */
		{rt_tensor(TAPRT_F32, mone, 4, DIMS(B, H, T, 1)), 0},
		{rt_tensor(TAPRT_BOOL, causal, 2, DIMS(T, L)), 0},
		{rt_tensor(TAPRT_BOOL, causal, 2, DIMS(T, L)), 1},
		{rt_tensor(TAPRT_BOOL, bone, 4, DIMS(B, 1, T, 1)), 0},
	};
	const float scale = 0.125f, fill = -3.4e38f;
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		taprt_tensor *M = cases[c].m.rank ? &cases[c].m : NULL;
		taprt_attr at[] = {
			{.name = "divide", .type = TAPRT_ATTR_INT, .i = 1},
			{.name = "fill", .type = TAPRT_ATTR_FLOAT, .f = fill},
			{.name = "scale", .type = TAPRT_ATTR_FLOAT, .f = scale},
		};
		taprt_tensor *in[] = {&tx, M}, *out[] = {&ty};
		int d = cases[c].divide;
		rt_run(taprt_op_FusedSoftmax, in, M ? 2 : 1, out, 1, at + !d, 3 - !d, 13);
		/* the reference: index the mask by the broadcast by hand */
		for (int i = 0; i < N; i++) {
			int b = i / (H * T * L), h = i / (T * L) % H, r = i / L % T, k = i % L;
			double v = d ? (double)x[i] / scale : (double)x[i] * scale;
			if (c == 2)
				v += mrow[b * L + k];
			else if (c == 3)
				v += mone[(b * H + h) * T + r];
			else if (c == 4 || c == 5)
				v = causal[r * L + k] ? fill : v;
			else if (c == 6)
				v = bone[b * T + r] ? fill : v;
			t[i] = v;
		}
		int bad = 0;
		for (int o = 0; o < N / L; o++) {
			double m = -INFINITY, s = 0;
			for (int k = 0; k < L; k++)
				m = fmax(m, t[o * L + k]);
			for (int k = 0; k < L; k++)
				s += exp(t[o * L + k] - m);
			for (int k = 0; k < L; k++) {
				double want = exp(t[o * L + k] - m) / s;
				/* t in f32 rounds by up to 3e-6 at |t| ~ 50 */
				bad += fabs(y[o * L + k] - want) > 1e-5 * want + 1e-9;
			}
		}
		CU_ASSERT_EQUAL(bad, 0);
		if (bad)
			fprintf(stderr, "fused_softmax_masks case %zu: %d bad\n", c, bad);
	}
}

/* Softmax of [t, 0] is 1/(1+e^-t): sweeps the f32 exp over its range. */
static void
softmax_exp_accuracy(void)
{
	enum { N = 4001 };
	static float x[2 * N], y[2 * N];
	for (int i = 0; i < N; i++) {
		x[2 * i] = -100 + 0.05f * (float)i;
		x[2 * i + 1] = 0;
	}
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(N, 2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(N, 2));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 13);
	int bad = 0;
	for (int i = 0; i < N; i++) {
		double want = 1 / (1 + exp(-(double)x[2 * i]));
		double err = fabs(y[2 * i] - want);
		if (err > 4e-7 * want && err > 1e-30)
			bad++;
	}
	CU_ASSERT_EQUAL(bad, 0);

	/* a long row (remainders after the 8-wide loops) */
	static float lx[75], ly[75];
	double s = 0;
	for (int i = 0; i < 75; i++) {
		lx[i] = sinf((float)i) * 10;
		s += exp(lx[i]);
	}
	taprt_tensor tlx = rt_tensor(TAPRT_F32, lx, 1, DIMS(75));
	taprt_tensor tly = rt_tensor(TAPRT_F32, ly, 1, DIMS(75));
	in[0] = &tlx;
	out[0] = &tly;
	rt_run(taprt_op_Softmax, in, 1, out, 1, NULL, 0, 13);
	bad = 0;
	for (int i = 0; i < 75; i++)
		bad += fabs(ly[i] - exp(lx[i]) / s) > 1e-6 * (exp(lx[i]) / s) + 1e-12;
	CU_ASSERT_EQUAL(bad, 0);
}

static void
layernorm(void)
{
	/* rows {1,2,3,4}: mean 2.5, var 1.25; {2,2,6,6}: mean 4, var 4 */
	float x[] = {1, 2, 3, 4, 2, 2, 6, 6}, s[] = {1, 2, 0.5f, -1}, b[] = {0, 1, 0, 1};
	float y[8], mean[2], inv[2];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(2, 4));
	taprt_tensor ts = rt_tensor(TAPRT_F32, s, 1, DIMS(4));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 1, DIMS(4));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 4));
	taprt_tensor tm = rt_tensor(TAPRT_F32, mean, 2, DIMS(2, 1));
	taprt_tensor ti = rt_tensor(TAPRT_F32, inv, 2, DIMS(2, 1));
	taprt_tensor *in[] = {&tx, &ts, &tb}, *out[] = {&ty, &tm, &ti};
	rt_run(taprt_op_LayerNormalization, in, 3, out, 3, NULL, 0, 17);
	double m[] = {2.5, 4}, v[] = {1.25, 4};
	for (int r = 0; r < 2; r++) {
		double is = 1 / sqrt(v[r] + 1e-5);
		CU_ASSERT_DOUBLE_EQUAL(mean[r], m[r], 1e-6);
		CU_ASSERT_DOUBLE_EQUAL(inv[r], is, 1e-5);
		for (int i = 0; i < 4; i++)
			CU_ASSERT_DOUBLE_EQUAL(y[r * 4 + i], (x[r * 4 + i] - m[r]) * is * s[i] + b[i],
			    1e-5);
	}

	/* axis 1 of [2,2,2] (normalize the last two), epsilon 0.5, no B, a
	 * scalar-period Scale of [2] broadcast over [2,2] */
	taprt_attr at[] = {
		{.name = "axis", .type = TAPRT_ATTR_INT, .i = 1},
		{.name = "epsilon", .type = TAPRT_ATTR_FLOAT, .f = 0.5f},
	};
	taprt_tensor tx3 = rt_tensor(TAPRT_F32, x, 3, DIMS(2, 2, 2));
	taprt_tensor ts2 = rt_tensor(TAPRT_F32, s, 1, DIMS(2));
	taprt_tensor ty3 = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 2, 2));
	taprt_tensor *in2[] = {&tx3, &ts2}, *out2[] = {&ty3};
	rt_run(taprt_op_LayerNormalization, in2, 2, out2, 1, at, 2, 17);
	for (int r = 0; r < 2; r++) {
		double is = 1 / sqrt(v[r] + 0.5);
		for (int i = 0; i < 4; i++)
			CU_ASSERT_DOUBLE_EQUAL(y[r * 4 + i], (x[r * 4 + i] - m[r]) * is * s[i % 2],
			    1e-5);
	}
}

static void
batchnorm(void)
{
	/* [N=2, C=2, 2]: channel c scales by s/sqrt(var+eps), shifts by B */
	float x[] = {1, 2, 10, 20, 3, 4, 30, 40};
	float s[] = {2, 0.5f}, b[] = {1, -1}, mu[] = {2, 25}, var[] = {4, 100}, y[8];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 3, DIMS(2, 2, 2));
	taprt_tensor ts = rt_tensor(TAPRT_F32, s, 1, DIMS(2));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 1, DIMS(2));
	taprt_tensor tmu = rt_tensor(TAPRT_F32, mu, 1, DIMS(2));
	taprt_tensor tv = rt_tensor(TAPRT_F32, var, 1, DIMS(2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 2, 2));
	taprt_tensor *in[] = {&tx, &ts, &tb, &tmu, &tv}, *out[] = {&ty, NULL, NULL};
	rt_run(taprt_op_BatchNormalization, in, 5, out, 1, NULL, 0, 15);
	for (int n = 0; n < 2; n++)
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < 2; i++) {
				int k = (n * 2 + c) * 2 + i;
				double want = s[c] * (x[k] - mu[c]) / sqrt(var[c] + 1e-5) + b[c];
				CU_ASSERT_DOUBLE_EQUAL(y[k], want, 1e-5);
			}

	/* training mode: batch statistics; channel 0 holds {1,2,3,4}: mean
	 * 2.5, var 1.25; channel 1 {10,20,30,40}: mean 25, var 125 */
	float rm[2], rv[2];
	taprt_tensor trm = rt_tensor(TAPRT_F32, rm, 1, DIMS(2));
	taprt_tensor trv = rt_tensor(TAPRT_F32, rv, 1, DIMS(2));
	out[1] = &trm;
	out[2] = &trv;
	taprt_attr at[] = {
		{.name = "epsilon", .type = TAPRT_ATTR_FLOAT, .f = 0.01f},
		{.name = "momentum", .type = TAPRT_ATTR_FLOAT, .f = 0.5f},
		{.name = "training_mode", .type = TAPRT_ATTR_INT, .i = 1},
	};
	rt_run(taprt_op_BatchNormalization, in, 5, out, 3, at, 3, 15);
	double bm[] = {2.5, 25}, bv[] = {1.25, 125};
	for (int c = 0; c < 2; c++) {
		CU_ASSERT_DOUBLE_EQUAL(rm[c], 0.5 * mu[c] + 0.5 * bm[c], 1e-5);
		CU_ASSERT_DOUBLE_EQUAL(rv[c], 0.5 * var[c] + 0.5 * bv[c], 1e-4);
	}
	for (int n = 0; n < 2; n++)
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < 2; i++) {
				int k = (n * 2 + c) * 2 + i;
				double want = s[c] * (x[k] - bm[c]) / sqrt(bv[c] + 0.01f) + b[c];
				CU_ASSERT_DOUBLE_EQUAL(y[k], want, 1e-5);
			}
}

/* The softmax tests again with each instruction set the CPU has turned
 * off in turn: the AVX2 row kernel and the portable one both answer. */
static void
softmax_isa_variants(void)
{
	int top = taprt_isa_limit(TAPRT_ISA_AVX512);
	for (int l = top; l >= TAPRT_ISA_BASE; l--) {
		CU_ASSERT_EQUAL(taprt_isa_limit(l), l);
		softmax_stable();
		softmax_axes();
		softmax_exp_accuracy();
		fused_softmax_masks();
	}
	taprt_isa_limit(TAPRT_ISA_AVX512);
}

void
suite_rt_reduce(CU_pSuite s)
{
	ADD(s, reduce_axes);
	ADD(s, reduce_axes_input);
	ADD(s, argmax_ties);
	ADD(s, softmax_stable);
	ADD(s, softmax_axes);
	ADD(s, softmax_exp_accuracy);
	ADD(s, fused_softmax_masks);
	ADD(s, softmax_isa_variants);
	ADD(s, layernorm);
	ADD(s, batchnorm);
}
