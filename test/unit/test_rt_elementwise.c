/*
 * test_rt_elementwise.c - the elementwise kernels of runtime/k_elementwise.c
 * against values worked out by hand or from the formula (computed here in
 * double with index arithmetic of their own, never by calling a kernel):
 * broadcasting of several shape pairs, integer Div/Mod signs, Cast, Clip in
 * both forms, Where, Pow's special cases and mixed types, the variadics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

/* y = op(a, b) for f32 a, b of the given shapes; y has out's shape */
static void
bin_f32(kernel *op, const float *a, int ra, const int64_t *da, const float *b, int rb,
    const int64_t *db, float *y, int ry, const int64_t *dy)
{
	taprt_tensor ta = rt_tensor(TAPRT_F32, (void *)a, ra, da);
	taprt_tensor tb = rt_tensor(TAPRT_F32, (void *)b, rb, db);
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, ry, dy);
	taprt_tensor *in[] = {&ta, &tb}, *out[] = {&ty};
	rt_run(op, in, 2, out, 1, NULL, 0, 17);
}

static void
broadcast_shapes(void)
{
	float a[24], b[24], y[24];
	for (int i = 0; i < 24; i++) {
		a[i] = (float)(i + 1);
		b[i] = (float)(100 * (i + 1));
	}

	/* same shape */
	bin_f32(taprt_op_Add, a, 2, DIMS(2, 3), b, 2, DIMS(2, 3), y, 2, DIMS(2, 3));
	for (int i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(y[i], 101 * (i + 1));

	/* bias add: [2,3] + [3] */
	bin_f32(taprt_op_Add, a, 2, DIMS(2, 3), b, 1, DIMS(3), y, 2, DIMS(2, 3));
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			CU_ASSERT_EQUAL(y[i * 3 + j], a[i * 3 + j] + b[j]);

	/* scalar on either side */
	float s = 2;
	bin_f32(taprt_op_Sub, &s, 0, NULL, a, 2, DIMS(2, 2), y, 2, DIMS(2, 2));
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(y[i], 2 - a[i]);
	bin_f32(taprt_op_Div, a, 2, DIMS(2, 2), &s, 1, DIMS(1), y, 2, DIMS(2, 2));
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(y[i], a[i] / 2);

	/* both sides broadcast: [2,1] * [1,3] -> [2,3] */
	bin_f32(taprt_op_Mul, a, 2, DIMS(2, 1), b, 2, DIMS(1, 3), y, 2, DIMS(2, 3));
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			CU_ASSERT_EQUAL(y[i * 3 + j], a[i] * b[j]);

	/* rank-extending on both sides: [4] - [2,3,1] -> [2,3,4] */
	bin_f32(taprt_op_Sub, a, 1, DIMS(4), b, 3, DIMS(2, 3, 1), y, 3, DIMS(2, 3, 4));
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++)
				CU_ASSERT_EQUAL(y[(i * 3 + j) * 4 + k], a[k] - b[i * 3 + j]);

	/* middle axes: [2,1,3] + [1,4,1] -> [2,4,3] */
	bin_f32(taprt_op_Add, a, 3, DIMS(2, 1, 3), b, 3, DIMS(1, 4, 1), y, 3, DIMS(2, 4, 3));
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++)
			for (int k = 0; k < 3; k++)
				CU_ASSERT_EQUAL(y[(i * 4 + j) * 3 + k], a[i * 3 + k] + b[j]);

	/* size-1 axes in the middle of a same-shape op: [2,1,3] + [2,1,3] */
	bin_f32(taprt_op_Mul, a, 3, DIMS(2, 1, 3), b, 3, DIMS(2, 1, 3), y, 3, DIMS(2, 1, 3));
	for (int i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(y[i], a[i] * b[i]);

	/* a leading broadcast: [1,3] + [2,2,3] (rank-extending, outer repeat) */
	bin_f32(taprt_op_Add, a, 2, DIMS(1, 3), b, 3, DIMS(2, 2, 3), y, 3, DIMS(2, 2, 3));
	for (int i = 0; i < 12; i++)
		CU_ASSERT_EQUAL(y[i], a[i % 3] + b[i]);
}

static void
int_div_mod(void)
{
	int32_t a[] = {7, -7, 7, -7, 6, 0}, b[] = {2, 2, -2, -2, 3, 5}, y[6];
	taprt_tensor ta = rt_tensor(TAPRT_I32, a, 1, DIMS(6));
	taprt_tensor tb = rt_tensor(TAPRT_I32, b, 1, DIMS(6));
	taprt_tensor ty = rt_tensor(TAPRT_I32, y, 1, DIMS(6));
	taprt_tensor *in[] = {&ta, &tb}, *out[] = {&ty};

	/* truncation toward zero */
	rt_run(taprt_op_Div, in, 2, out, 1, NULL, 0, 17);
	int32_t div[] = {3, -3, -3, 3, 2, 0};
	CU_ASSERT_EQUAL(memcmp(y, div, sizeof y), 0);

	/* fmod=0: the divisor's sign */
	taprt_attr f0 = {.name = "fmod", .type = TAPRT_ATTR_INT, .i = 0};
	rt_run(taprt_op_Mod, in, 2, out, 1, &f0, 1, 17);
	int32_t mod[] = {1, 1, -1, -1, 0, 0};
	CU_ASSERT_EQUAL(memcmp(y, mod, sizeof y), 0);
	rt_run(taprt_op_Mod, in, 2, out, 1, NULL, 0, 17);   /* default fmod=0 */
	CU_ASSERT_EQUAL(memcmp(y, mod, sizeof y), 0);

	/* fmod=1: the dividend's sign */
	taprt_attr f1 = {.name = "fmod", .type = TAPRT_ATTR_INT, .i = 1};
	rt_run(taprt_op_Mod, in, 2, out, 1, &f1, 1, 17);
	int32_t fm[] = {1, -1, 1, -1, 0, 0};
	CU_ASSERT_EQUAL(memcmp(y, fm, sizeof y), 0);

	/* float Mod, both modes: -4.5 % 2 = 1.5 in Python, fmod gives -0.5 */
	float fa[] = {-4.5f, 4.5f, -4.5f, 5}, fb[] = {2, -2, -2, 2.5f}, fy[4];
	taprt_tensor xa = rt_tensor(TAPRT_F32, fa, 1, DIMS(4));
	taprt_tensor xb = rt_tensor(TAPRT_F32, fb, 1, DIMS(4));
	taprt_tensor xy = rt_tensor(TAPRT_F32, fy, 1, DIMS(4));
	taprt_tensor *fin[] = {&xa, &xb}, *fout[] = {&xy};
	rt_run(taprt_op_Mod, fin, 2, fout, 1, &f0, 1, 17);
	CU_ASSERT_EQUAL(fy[0], 1.5f);
	CU_ASSERT_EQUAL(fy[1], -1.5f);
	CU_ASSERT_EQUAL(fy[2], -0.5f);
	CU_ASSERT_EQUAL(fy[3], 0);
	rt_run(taprt_op_Mod, fin, 2, fout, 1, &f1, 1, 17);
	CU_ASSERT_EQUAL(fy[0], -0.5f);
	CU_ASSERT_EQUAL(fy[1], 0.5f);
	CU_ASSERT_EQUAL(fy[2], -0.5f);

	/* i64 with broadcasting of a scalar divisor */
	int64_t la[] = {-9, 9, -1}, lb = -4, ly[3];
	taprt_tensor za = rt_tensor(TAPRT_I64, la, 1, DIMS(3));
	taprt_tensor zb = rt_tensor(TAPRT_I64, &lb, 0, NULL);
	taprt_tensor zy = rt_tensor(TAPRT_I64, ly, 1, DIMS(3));
	taprt_tensor *lin[] = {&za, &zb}, *lout[] = {&zy};
	rt_run(taprt_op_Mod, lin, 2, lout, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(ly[0], -1);
	CU_ASSERT_EQUAL(ly[1], -3);
	CU_ASSERT_EQUAL(ly[2], -1);
	rt_run(taprt_op_Div, lin, 2, lout, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(ly[0], 2);
	CU_ASSERT_EQUAL(ly[1], -2);
	CU_ASSERT_EQUAL(ly[2], 0);
}

static void
cast(void)
{
	float f[] = {1.7f, -1.7f, 2.5f, -0.5f, 0, NAN};
	int32_t i[6];
	bool bo[6];
	taprt_tensor tf = rt_tensor(TAPRT_F32, f, 1, DIMS(6));
	taprt_tensor ti = rt_tensor(TAPRT_I32, i, 1, DIMS(4));
	taprt_tensor tf4 = rt_tensor(TAPRT_F32, f, 1, DIMS(4));
	taprt_tensor tb = rt_tensor(TAPRT_BOOL, bo, 1, DIMS(6));
	taprt_tensor *in[] = {&tf4}, *out[] = {&ti};
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(i[0], 1);
	CU_ASSERT_EQUAL(i[1], -1);
	CU_ASSERT_EQUAL(i[2], 2);
	CU_ASSERT_EQUAL(i[3], 0);

	/* to bool is != 0; NaN is true */
	in[0] = &tf;
	out[0] = &tb;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	bool want[] = {1, 1, 1, 1, 0, 1};
	CU_ASSERT_EQUAL(memcmp(bo, want, sizeof bo), 0);

	/* bool and i64 to f64 and u8 */
	double d[6];
	taprt_tensor td = rt_tensor(TAPRT_F64, d, 1, DIMS(6));
	in[0] = &tb;
	out[0] = &td;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(d[0], 1.0);
	CU_ASSERT_EQUAL(d[4], 0.0);
	int64_t l[] = {-1, 300, (int64_t)1 << 40};
	uint8_t u[3];
	taprt_tensor tl = rt_tensor(TAPRT_I64, l, 1, DIMS(3));
	taprt_tensor tu = rt_tensor(TAPRT_U8, u, 1, DIMS(3));
	in[0] = &tl;
	out[0] = &tu;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(u[0], 255);     /* integer narrowing wraps, as in numpy */
	CU_ASSERT_EQUAL(u[1], 44);
	CU_ASSERT_EQUAL(u[2], 0);
	out[0] = &td;
	td.numel = td.dims[0] = 3;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(d[2], 1099511627776.0);

	/* f32 <-> f16: exact, rounded, overflow, subnormal */
	float h[] = {1.0f, 65504.0f, 0.1f, 1e6f, 5.9604645e-8f, -2.0f, 1e-9f};
	uint16_t hv[7], want16[] = {0x3c00, 0x7bff, 0x2e66, 0x7c00, 0x0001, 0xc000, 0};
	taprt_tensor th = rt_tensor(TAPRT_F32, h, 1, DIMS(7));
	taprt_tensor t16 = rt_tensor(TAPRT_F16, hv, 1, DIMS(7));
	in[0] = &th;
	out[0] = &t16;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(memcmp(hv, want16, sizeof hv), 0);
	float back[7];
	taprt_tensor tback = rt_tensor(TAPRT_F32, back, 1, DIMS(7));
	in[0] = &t16;
	out[0] = &tback;
	rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(back[0], 1.0f);
	CU_ASSERT_EQUAL(back[1], 65504.0f);
	CU_ASSERT_EQUAL(back[2], 0.0999755859375f);
	CU_ASSERT_TRUE(isinf(back[3]));
	CU_ASSERT_EQUAL(back[4], ldexpf(1, -24));
	CU_ASSERT_EQUAL(back[5], -2.0f);
}

/* The value of half h, from its fields in double arithmetic. */
static double
half_value(uint16_t h)
{
	int e = h >> 10 & 0x1f, m = h & 0x3ff;
	double v = e == 0x1f ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
	return h & 0x8000 ? -v : v;
}

/*
 * Cast f16 <-> f32 over every half (the conversions legalize-half puts
 * around each half node), long enough for the vector loops, at each
 * instruction set the CPU has (F16C's and tapc's bit code): widening gives
 * each half's value; narrowing each half's value gives it back (NaN a
 * NaN), the midpoints between neighbours round to the even one, and a
 * float either side of a midpoint to its side.
 */
static void
cast_half_all(void)
{
	enum { NH = 65536 };
	static uint16_t h[NH], h2[NH], hm[3 * NH];
	static float f[NH], fm[3 * NH];
	static uint16_t wantm[3 * NH];
	int nm = 0;
	for (int i = 0; i < NH; i++)
		h[i] = (uint16_t)i;
	/* midpoints of the positive finite halves a and a + 1 (0x0000 ..
	 * 0x7bfe), and a float either side; mirrored for negatives */
	for (int a = 0; a < 0x7bff; a++) {
		double mid = (half_value((uint16_t)a) + half_value((uint16_t)(a + 1))) / 2;
		float fmid = (float)mid; /* exact: 12 significant bits */
		uint16_t even = a & 1 ? (uint16_t)(a + 1) : (uint16_t)a;
		float lo = nextafterf(fmid, 0), hi = nextafterf(fmid, INFINITY);
		float v[3] = {lo, fmid, hi};
		uint16_t w[3] = {(uint16_t)a, even, (uint16_t)(a + 1)};
		for (int k = 0; k < 3 && nm + 2 <= 3 * NH; k++) {
			fm[nm] = v[k];
			wantm[nm++] = w[k];
			fm[nm] = -v[k];
			wantm[nm++] = w[k] | 0x8000;
		}
	}
	int top = taprt_isa_limit(TAPRT_ISA_AVX512);
	for (int level = TAPRT_ISA_BASE; level <= top; level++) {
		if (taprt_isa_limit(level) != level)
			continue;
		taprt_tensor th = rt_tensor(TAPRT_F16, h, 1, DIMS(NH));
		taprt_tensor tf = rt_tensor(TAPRT_F32, f, 1, DIMS(NH));
		taprt_tensor th2 = rt_tensor(TAPRT_F16, h2, 1, DIMS(NH));
		taprt_tensor *in[] = {&th}, *out[] = {&tf};
		rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
		int bad = 0;
		for (int i = 0; i < NH; i++) {
			double v = half_value(h[i]);
			bad += isnan(v) ? !isnan(f[i]) : (double)f[i] != v || !signbit(f[i]) != !signbit(v);
		}
		CU_ASSERT_EQUAL(bad, 0);
		in[0] = &tf;
		out[0] = &th2;
		rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
		bad = 0;
		for (int i = 0; i < NH; i++)
			bad += isnan(f[i]) ? (h2[i] & 0x7fff) <= 0x7c00 : h2[i] != h[i];
		CU_ASSERT_EQUAL(bad, 0);
		taprt_tensor tfm = rt_tensor(TAPRT_F32, fm, 1, DIMS(nm));
		taprt_tensor thm = rt_tensor(TAPRT_F16, hm, 1, DIMS(nm));
		in[0] = &tfm;
		out[0] = &thm;
		rt_run(taprt_op_Cast, in, 1, out, 1, NULL, 0, 17);
		bad = 0;
		for (int i = 0; i < nm; i++)
			bad += hm[i] != wantm[i];
		CU_ASSERT_EQUAL(bad, 0);
	}
	taprt_isa_limit(top);
}

static void
clip(void)
{
	float x[] = {-3, -1, 0, 1, 3, NAN}, y[6], lo = -1.5f, hi = 2;
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 1, DIMS(6));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 1, DIMS(6));
	taprt_tensor tlo = rt_tensor(TAPRT_F32, &lo, 0, NULL);
	taprt_tensor thi = rt_tensor(TAPRT_F32, &hi, 0, NULL);
	taprt_tensor *out[] = {&ty};

	/* opset 11+: both inputs */
	taprt_tensor *in3[] = {&tx, &tlo, &thi};
	rt_run(taprt_op_Clip, in3, 3, out, 1, NULL, 0, 13);
	float want[] = {-1.5f, -1, 0, 1, 2};
	CU_ASSERT_EQUAL(memcmp(y, want, sizeof want), 0);
	CU_ASSERT_TRUE(isnan(y[5]));

	/* only max (min omitted) */
	taprt_tensor *in_max[] = {&tx, NULL, &thi};
	rt_run(taprt_op_Clip, in_max, 3, out, 1, NULL, 0, 13);
	float want_max[] = {-3, -1, 0, 1, 2};
	CU_ASSERT_EQUAL(memcmp(y, want_max, sizeof want_max), 0);

	/* no bounds at all: a copy */
	rt_run(taprt_op_Clip, in3, 1, out, 1, NULL, 0, 13);
	CU_ASSERT_EQUAL(memcmp(y, x, 5 * sizeof *x), 0);

	/* opset 6: attributes (sorted: max, min) */
	taprt_attr at[] = {
		{.name = "max", .type = TAPRT_ATTR_FLOAT, .f = 0.5f},
		{.name = "min", .type = TAPRT_ATTR_FLOAT, .f = -0.5f},
	};
	rt_run(taprt_op_Clip, in3, 1, out, 1, at, 2, 6);
	float want6[] = {-0.5f, -0.5f, 0, 0.5f, 0.5f};
	CU_ASSERT_EQUAL(memcmp(y, want6, sizeof want6), 0);
	rt_run(taprt_op_Clip, in3, 1, out, 1, at + 1, 1, 6);  /* min only */
	float want6b[] = {-0.5f, -0.5f, 0, 1, 3};
	CU_ASSERT_EQUAL(memcmp(y, want6b, sizeof want6b), 0);

	/* int8 with only a min: the max is the type's */
	int8_t ix[] = {-128, -5, 0, 127}, iy[4], ilo = -4;
	taprt_tensor tix = rt_tensor(TAPRT_I8, ix, 1, DIMS(4));
	taprt_tensor tiy = rt_tensor(TAPRT_I8, iy, 1, DIMS(4));
	taprt_tensor tilo = rt_tensor(TAPRT_I8, &ilo, 0, NULL);
	taprt_tensor *iin[] = {&tix, &tilo}, *iout[] = {&tiy};
	rt_run(taprt_op_Clip, iin, 2, iout, 1, NULL, 0, 13);
	int8_t iwant[] = {-4, -4, 0, 127};
	CU_ASSERT_EQUAL(memcmp(iy, iwant, sizeof iy), 0);
}

static void
where(void)
{
	/* cond [2,1], X [1,3], Y scalar -> [2,3] */
	bool c[] = {true, false};
	float x[] = {1, 2, 3}, yv = -1, out[6];
	taprt_tensor tc = rt_tensor(TAPRT_BOOL, c, 2, DIMS(2, 1));
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(1, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, &yv, 0, NULL);
	taprt_tensor to = rt_tensor(TAPRT_F32, out, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&tc, &tx, &ty}, *o[] = {&to};
	rt_run(taprt_op_Where, in, 3, o, 1, NULL, 0, 17);
	float want[] = {1, 2, 3, -1, -1, -1};
	CU_ASSERT_EQUAL(memcmp(out, want, sizeof out), 0);

	/* cond [3] against i64 X [2,3] and Y [2,1] */
	bool c2[] = {true, false, true};
	int64_t x2[] = {1, 2, 3, 4, 5, 6}, y2[] = {10, 20}, o2[6];
	taprt_tensor tc2 = rt_tensor(TAPRT_BOOL, c2, 1, DIMS(3));
	taprt_tensor tx2 = rt_tensor(TAPRT_I64, x2, 2, DIMS(2, 3));
	taprt_tensor ty2 = rt_tensor(TAPRT_I64, y2, 2, DIMS(2, 1));
	taprt_tensor to2 = rt_tensor(TAPRT_I64, o2, 2, DIMS(2, 3));
	taprt_tensor *in2[] = {&tc2, &tx2, &ty2}, *out2[] = {&to2};
	rt_run(taprt_op_Where, in2, 3, out2, 1, NULL, 0, 17);
	int64_t want2[] = {1, 10, 3, 4, 20, 6};
	CU_ASSERT_EQUAL(memcmp(o2, want2, sizeof o2), 0);
}

static void
unary(void)
{
	float x[] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -1.2f, 0, 3}, y[8];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 1, DIMS(8));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 1, DIMS(8));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty};

	rt_run(taprt_op_Round, in, 1, out, 1, NULL, 0, 17);  /* half to even */
	float round[] = {0, 2, 2, -0.0f, -2, -1, 0, 3};
	CU_ASSERT_EQUAL(memcmp(y, round, sizeof y), 0);
	rt_run(taprt_op_Floor, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(y[5], -2);
	rt_run(taprt_op_Ceil, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(y[5], -1);
	rt_run(taprt_op_Sign, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(y[0], 1);
	CU_ASSERT_EQUAL(y[3], -1);
	CU_ASSERT_EQUAL(y[6], 0);
	rt_run(taprt_op_Relu, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(y[4], 0);
	CU_ASSERT_EQUAL(y[7], 3);
	rt_run(taprt_op_LeakyRelu, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_DOUBLE_EQUAL(y[4], -0.025, 1e-7);
	rt_run(taprt_op_HardSwish, in, 1, out, 1, NULL, 0, 17);   /* x relu6(x+3)/6 */
	CU_ASSERT_DOUBLE_EQUAL(y[7], 3, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(y[3], -0.5 * 2.5 / 6, 1e-6);
	rt_run(taprt_op_Sigmoid, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_DOUBLE_EQUAL(y[6], 0.5, 1e-7);
	CU_ASSERT_DOUBLE_EQUAL(y[7], 1 / (1 + exp(-3.0)), 1e-7);
	rt_run(taprt_op_Softplus, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_DOUBLE_EQUAL(y[7], log(1 + exp(3.0)), 1e-6);
	rt_run(taprt_op_Elu, in, 1, out, 1, NULL, 0, 17);
	CU_ASSERT_DOUBLE_EQUAL(y[4], exp(-2.5) - 1, 1e-6);

	/* erf to fp32 accuracy: erf(0.5), erf(1), erf(-2), erf(0.01) */
	float ex[] = {0.5f, 1, -2, 0.01f}, ey[4];
	taprt_tensor tex = rt_tensor(TAPRT_F32, ex, 1, DIMS(4));
	taprt_tensor tey = rt_tensor(TAPRT_F32, ey, 1, DIMS(4));
	taprt_tensor *ein[] = {&tex}, *eout[] = {&tey};
	rt_run(taprt_op_Erf, ein, 1, eout, 1, NULL, 0, 17);
	CU_ASSERT_DOUBLE_EQUAL(ey[0], 0.5204998778130465, 1e-7);
	CU_ASSERT_DOUBLE_EQUAL(ey[1], 0.8427007929497149, 1e-7);
	CU_ASSERT_DOUBLE_EQUAL(ey[2], -0.9953222650189527, 1e-7);
	/* within 2 ulp (1 ulp here is 9.3e-10): the f32 kernel is a rational
	 * approximation, not libm's correctly rounded erff */
	CU_ASSERT_DOUBLE_EQUAL(ey[3], 0.011283415555849618, 2e-9);

	/* integer Abs and Neg */
	int32_t ix[] = {-3, 0, 5}, iy[3];
	taprt_tensor tix = rt_tensor(TAPRT_I32, ix, 1, DIMS(3));
	taprt_tensor tiy = rt_tensor(TAPRT_I32, iy, 1, DIMS(3));
	taprt_tensor *iin[] = {&tix}, *iout[] = {&tiy};
	rt_run(taprt_op_Abs, iin, 1, iout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(iy[0] == 3 && iy[1] == 0 && iy[2] == 5);
	rt_run(taprt_op_Neg, iin, 1, iout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(iy[0] == 3 && iy[1] == 0 && iy[2] == -5);

	/* Not, IsNaN */
	bool b[] = {true, false}, nb[2];
	taprt_tensor tb = rt_tensor(TAPRT_BOOL, b, 1, DIMS(2));
	taprt_tensor tnb = rt_tensor(TAPRT_BOOL, nb, 1, DIMS(2));
	taprt_tensor *bin[] = {&tb}, *bout[] = {&tnb};
	rt_run(taprt_op_Not, bin, 1, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(!nb[0] && nb[1]);
	float nx[] = {NAN, 1};
	taprt_tensor tnx = rt_tensor(TAPRT_F32, nx, 1, DIMS(2));
	bin[0] = &tnx;
	rt_run(taprt_op_IsNaN, bin, 1, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(nb[0] && !nb[1]);

	/* unsupported dtype: an error, not a crash */
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(iin, 1, iout, 1, NULL, 0);
	taprt_op_Exp(&cx, &n);
	CU_ASSERT_PTR_NOT_NULL(strstr(cx.error, "i32 not supported"));
}

static void
power(void)
{
	float x[] = {-2, 0.25f, 3, 4}, y[4], two = 2, half = 0.5f, e3 = 3, e15 = 1.5f;
	float ys[] = {0, 1, 2, 3};
	bin_f32(taprt_op_Pow, x, 1, DIMS(4), &two, 0, NULL, y, 1, DIMS(4));
	CU_ASSERT_TRUE(y[0] == 4 && y[1] == 0.0625f && y[2] == 9 && y[3] == 16);
	bin_f32(taprt_op_Pow, x + 1, 1, DIMS(3), &half, 0, NULL, y, 1, DIMS(3));
	CU_ASSERT_TRUE(y[0] == 0.5f && y[1] == sqrtf(3) && y[2] == 2);
	bin_f32(taprt_op_Pow, x, 1, DIMS(4), &e3, 1, DIMS(1), y, 1, DIMS(4));
	CU_ASSERT_TRUE(y[0] == -8 && y[3] == 64);
	bin_f32(taprt_op_Pow, x + 1, 1, DIMS(3), &e15, 0, NULL, y, 1, DIMS(3));
	CU_ASSERT_DOUBLE_EQUAL(y[2], 8, 1e-6);
	bin_f32(taprt_op_Pow, x, 1, DIMS(4), ys, 1, DIMS(4), y, 1, DIMS(4));
	CU_ASSERT_TRUE(y[0] == 1 && y[1] == 0.25f && y[2] == 9 && y[3] == 64);

	/* integer base, integer exponent: exact */
	int64_t b[] = {3, -2, 7}, e[] = {39, 3, 0}, r[3];
	taprt_tensor tb = rt_tensor(TAPRT_I64, b, 1, DIMS(3));
	taprt_tensor te = rt_tensor(TAPRT_I64, e, 1, DIMS(3));
	taprt_tensor tr = rt_tensor(TAPRT_I64, r, 1, DIMS(3));
	taprt_tensor *in[] = {&tb, &te}, *out[] = {&tr};
	rt_run(taprt_op_Pow, in, 2, out, 1, NULL, 0, 17);
	CU_ASSERT_EQUAL(r[0], 4052555153018976267LL);
	CU_ASSERT_EQUAL(r[1], -8);
	CU_ASSERT_EQUAL(r[2], 1);

	/* mixed: f32 base ^ i64 exponent -> f32; i32 base ^ f32 -> i32 */
	int64_t le[] = {2, 3, -1, 0};
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 1, DIMS(4));
	taprt_tensor tle = rt_tensor(TAPRT_I64, le, 1, DIMS(4));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 1, DIMS(4));
	taprt_tensor *min[] = {&tx, &tle}, *mout[] = {&ty};
	rt_run(taprt_op_Pow, min, 2, mout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(y[0] == 4 && y[1] == 0.015625f && y[2] == 1.0f / 3 && y[3] == 1);
	int32_t ib[] = {1, 2, 3}, iy[3];
	float fe[] = {1, 2, 3};
	taprt_tensor tib = rt_tensor(TAPRT_I32, ib, 1, DIMS(3));
	taprt_tensor tfe = rt_tensor(TAPRT_F32, fe, 1, DIMS(3));
	taprt_tensor tiy = rt_tensor(TAPRT_I32, iy, 1, DIMS(3));
	taprt_tensor *min2[] = {&tib, &tfe}, *mout2[] = {&tiy};
	rt_run(taprt_op_Pow, min2, 2, mout2, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(iy[0] == 1 && iy[1] == 4 && iy[2] == 27);
}

static void
compare_logic(void)
{
	int32_t a[] = {1, 2, 3, 4, 5, 6}, b[] = {2, 5};
	bool y[6];
	taprt_tensor ta = rt_tensor(TAPRT_I32, a, 2, DIMS(2, 3));
	taprt_tensor tb = rt_tensor(TAPRT_I32, b, 2, DIMS(2, 1));
	taprt_tensor ty = rt_tensor(TAPRT_BOOL, y, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&ta, &tb}, *out[] = {&ty};
	rt_run(taprt_op_Less, in, 2, out, 1, NULL, 0, 17);
	bool lt[] = {1, 0, 0, 1, 0, 0};
	CU_ASSERT_EQUAL(memcmp(y, lt, 6), 0);
	rt_run(taprt_op_GreaterOrEqual, in, 2, out, 1, NULL, 0, 17);
	bool ge[] = {0, 1, 1, 0, 1, 1};
	CU_ASSERT_EQUAL(memcmp(y, ge, 6), 0);
	rt_run(taprt_op_Equal, in, 2, out, 1, NULL, 0, 17);
	bool eq[] = {0, 1, 0, 0, 1, 0};
	CU_ASSERT_EQUAL(memcmp(y, eq, 6), 0);

	bool p[] = {0, 0, 1, 1}, q[] = {0, 1, 0, 1}, r[4];
	taprt_tensor tp = rt_tensor(TAPRT_BOOL, p, 1, DIMS(4));
	taprt_tensor tq = rt_tensor(TAPRT_BOOL, q, 1, DIMS(4));
	taprt_tensor tr = rt_tensor(TAPRT_BOOL, r, 1, DIMS(4));
	taprt_tensor *bin[] = {&tp, &tq}, *bout[] = {&tr};
	rt_run(taprt_op_And, bin, 2, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(!r[0] && !r[1] && !r[2] && r[3]);
	rt_run(taprt_op_Or, bin, 2, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(!r[0] && r[1] && r[2] && r[3]);
	rt_run(taprt_op_Xor, bin, 2, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(!r[0] && r[1] && r[2] && !r[3]);
	rt_run(taprt_op_Equal, bin, 2, bout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(r[0] && !r[1] && !r[2] && r[3]);
}

static void
variadic(void)
{
	/* [2,3], [3], scalar */
	float a[] = {1, 9, 3, -4, 5, 0}, b[] = {2, 2, 2}, c = 4, y[6];
	taprt_tensor ta = rt_tensor(TAPRT_F32, a, 2, DIMS(2, 3));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 1, DIMS(3));
	taprt_tensor tc = rt_tensor(TAPRT_F32, &c, 0, NULL);
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&tc, &tb, &ta}, *out[] = {&ty};  /* smallest first */
	rt_run(taprt_op_Sum, in, 3, out, 1, NULL, 0, 17);
	for (int i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(y[i], a[i] + 6);
	rt_run(taprt_op_Mean, in, 3, out, 1, NULL, 0, 17);
	for (int i = 0; i < 6; i++)
		CU_ASSERT_DOUBLE_EQUAL(y[i], (a[i] + 6) / 3, 1e-6);
	rt_run(taprt_op_Max, in, 3, out, 1, NULL, 0, 17);
	float mx[] = {4, 9, 4, 4, 5, 4};
	CU_ASSERT_EQUAL(memcmp(y, mx, sizeof y), 0);
	rt_run(taprt_op_Min, in, 3, out, 1, NULL, 0, 17);
	float mn[] = {1, 2, 2, -4, 2, 0};
	CU_ASSERT_EQUAL(memcmp(y, mn, sizeof y), 0);

	/* one input: a copy; ints */
	int64_t l[] = {5, -5}, ly[2];
	taprt_tensor tl = rt_tensor(TAPRT_I64, l, 1, DIMS(2));
	taprt_tensor tly = rt_tensor(TAPRT_I64, ly, 1, DIMS(2));
	taprt_tensor *lin[] = {&tl}, *lout[] = {&tly};
	rt_run(taprt_op_Max, lin, 1, lout, 1, NULL, 0, 17);
	CU_ASSERT_TRUE(ly[0] == 5 && ly[1] == -5);
}

static void
prelu_dropout(void)
{
	/* PRelu: slope [3] broadcasts over x [2,3] */
	float x[] = {-1, -2, 3, 4, -5, -6}, s[] = {0.1f, 0.2f, 0.3f}, y[6];
	bin_f32(taprt_op_PRelu, x, 2, DIMS(2, 3), s, 1, DIMS(3), y, 2, DIMS(2, 3));
	float want[] = {-0.1f, -0.4f, 3, 4, -5 * 0.2f, -6 * 0.3f};
	for (int i = 0; i < 6; i++)
		CU_ASSERT_DOUBLE_EQUAL(y[i], want[i], 1e-6);

	/* Dropout in inference: a copy and an all-true mask */
	bool mask[6];
	memset(mask, 0, sizeof mask);
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2, DIMS(2, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 3));
	taprt_tensor tm = rt_tensor(TAPRT_BOOL, mask, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&tx}, *out[] = {&ty, &tm};
	rt_run(taprt_op_Dropout, in, 1, out, 2, NULL, 0, 13);
	CU_ASSERT_EQUAL(memcmp(x, y, sizeof y), 0);
	for (int i = 0; i < 6; i++)
		CU_ASSERT_TRUE(mask[i]);
	rt_run(taprt_op_Identity, in, 1, out, 1, NULL, 0, 13);
	CU_ASSERT_EQUAL(memcmp(x, y, sizeof y), 0);
}

/* A long broadcast case against index arithmetic done here: every row
 * length, with remainders that the vectorized loops leave over. */
static void
broadcast_long(void)
{
	enum { A = 3, B = 5, C = 37 };
	static float a[A * B * C], b[B * C], y[A * B * C];
	for (int i = 0; i < A * B * C; i++)
		a[i] = (float)(i % 11) - 5;
	for (int i = 0; i < B * C; i++)
		b[i] = (float)(i % 7) + 0.5f;
	/* [A,B,C] * [B,C] */
	bin_f32(taprt_op_Mul, a, 3, DIMS(A, B, C), b, 2, DIMS(B, C), y, 3, DIMS(A, B, C));
	int bad = 0;
	for (int i = 0; i < A; i++)
		for (int j = 0; j < B * C; j++)
			bad += y[i * B * C + j] != a[i * B * C + j] * b[j];
	CU_ASSERT_EQUAL(bad, 0);
	/* [A,1,C] - [B,1] -> [A,B,C] */
	bin_f32(taprt_op_Sub, a, 3, DIMS(A, 1, C), b, 2, DIMS(B, 1), y, 3, DIMS(A, B, C));
	bad = 0;
	for (int i = 0; i < A; i++)
		for (int j = 0; j < B; j++)
			for (int k = 0; k < C; k++)
				bad += y[(i * B + j) * C + k] != a[i * C + k] - b[j];
	CU_ASSERT_EQUAL(bad, 0);
}

/* The f32 Erf against libm's double erf over [-6, 6] and special values. */
static void
erf_accuracy(void)
{
	enum { N = 12001 };
	static float xv[N + 4], yv[N + 4];
	for (int i = 0; i < N; i++)
		xv[i] = -6.0f + (float)i * 1e-3f;
	xv[N] = 0.0f;
	xv[N + 1] = -0.0f;
	xv[N + 2] = 1e-30f;
	xv[N + 3] = NAN;
	int64_t d[1] = {N + 4};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 1, d), y = rt_tensor(TAPRT_F32, yv, 1, d);
	taprt_tensor *in[] = {&x}, *out[] = {&y};
	taprt_node nd = rt_node(in, 1, out, 1, NULL, 0);
	taprt_op_Erf(NULL, &nd);
	double worst = 0;
	for (int i = 0; i < N + 3; i++) {
		double e = fabs((double)yv[i] - erf((double)xv[i]));
		worst = e > worst ? e : worst;
	}
	CU_ASSERT_TRUE(worst < 5e-7);
	CU_ASSERT_EQUAL(yv[N], 0.0f);
	CU_ASSERT_TRUE(isnan(yv[N + 3]));
	CU_ASSERT_EQUAL(yv[0], -1.0f);
	CU_ASSERT_EQUAL(yv[N - 1], 1.0f);
}

/*
 * The random operators (k_random.c) against their distributions, 200,000
 * elements each: RandomNormal's mean, deviation and mass within one
 * deviation (0.6827), RandomUniform's range and ten equal bins, Bernoulli's
 * frequencies; then the streams: the same context gives the same values,
 * another run, micro-batch, replica or seed other ones, another rank of
 * the tensor-parallel group the same ones.
 */
enum { RN = 200000 };

static void
random_run(kernel *op, taprt_ctx *cx, taprt_tensor *x, taprt_tensor *y, const taprt_attr *at,
    int nat)
{
	taprt_tensor *in[] = {x}, *out[] = {y};
	taprt_node nd = rt_node(in, x ? 1 : 0, out, 1, at, nat);
	nd.name = "rnd";
	nd.opset = 15;
	op(cx, &nd);
	CU_ASSERT_STRING_EQUAL(cx->error, "");
}

static int
same_count(const float *a, const float *b, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += a[i] == b[i];
	return k;
}

static void
random_ops(void)
{
	float *a = malloc(sizeof *a * RN), *b = malloc(sizeof *b * RN);
	double *d = malloc(sizeof *d * RN);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && d);
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	int64_t dims[1] = {RN};
	taprt_tensor ya = rt_tensor(TAPRT_F32, a, 1, dims);
	taprt_tensor yd = rt_tensor(TAPRT_F64, d, 1, dims);

	/* normal, mean 1 and scale 2: 5 standard errors and more */
	const taprt_attr norm[] = {{.name = "mean", .type = TAPRT_ATTR_FLOAT, .f = 1},
		{.name = "scale", .type = TAPRT_ATTR_FLOAT, .f = 2}};
	random_run(taprt_op_RandomNormal, &cx, NULL, &ya, norm, 2);
	double sum = 0, sq = 0;
	int inside = 0;
	for (int i = 0; i < RN; i++) {
		sum += a[i];
		sq += (a[i] - 1.0) * (a[i] - 1.0);
		inside += fabs(a[i] - 1.0) < 2.0;
	}
	double mean = sum / RN, sd = sqrt(sq / RN);
	CU_ASSERT_TRUE(fabs(mean - 1) < 0.025);
	CU_ASSERT_TRUE(fabs(sd - 2) < 0.02);
	CU_ASSERT_TRUE(fabs((double)inside / RN - 0.6827) < 0.006);
	if (fabs(mean - 1) >= 0.025 || fabs(sd - 2) >= 0.02)
		fprintf(stderr, "\nnormal: mean %g sd %g within %g\n", mean, sd, (double)inside / RN);

	/* uniform on [-1, 3), f64 */
	const taprt_attr uni[] = {{.name = "high", .type = TAPRT_ATTR_FLOAT, .f = 3},
		{.name = "low", .type = TAPRT_ATTR_FLOAT, .f = -1}};
	random_run(taprt_op_RandomUniform, &cx, NULL, &yd, uni, 2);
	int bins[10] = {0}, out = 0;
	for (int i = 0; i < RN; i++) {
		out += !(d[i] >= -1 && d[i] < 3);
		int k = (int)((d[i] + 1) / 0.4);
		bins[k < 0 ? 0 : k > 9 ? 9 : k]++;
	}
	CU_ASSERT_EQUAL(out, 0);
	for (int k = 0; k < 10; k++)
		CU_ASSERT_TRUE(fabs((double)bins[k] / RN - 0.1) < 0.005);

	/* f16 uniform on [0, 1): never 1 */
	uint16_t *h = malloc(sizeof *h * RN);
	taprt_tensor yh = rt_tensor(TAPRT_F16, h, 1, dims);
	random_run(taprt_op_RandomUniform, &cx, NULL, &yh, NULL, 0);
	int ones = 0;
	for (int i = 0; i < RN; i++)
		ones += h[i] >= 0x3c00;
	CU_ASSERT_EQUAL(ones, 0);
	free(h);

	/* Bernoulli: p = 0, 0.25, 0.5, 1 in quarters, into bool */
	float *p = malloc(sizeof *p * RN);
	uint8_t *bo = malloc(RN);
	for (int i = 0; i < RN; i++)
		p[i] = (float)(i / (RN / 4)) * 0.25f + (i >= 3 * RN / 4 ? 0.25f : 0);
	taprt_tensor pt = rt_tensor(TAPRT_F32, p, 1, dims), yo = rt_tensor(TAPRT_BOOL, bo, 1, dims);
	random_run(taprt_op_Bernoulli, &cx, &pt, &yo, NULL, 0);
	int cnt[4] = {0};
	for (int i = 0; i < RN; i++)
		cnt[i / (RN / 4)] += bo[i];
	CU_ASSERT_EQUAL(cnt[0], 0);
	CU_ASSERT_TRUE(fabs((double)cnt[1] / (RN / 4) - 0.25) < 0.01);
	CU_ASSERT_TRUE(fabs((double)cnt[2] / (RN / 4) - 0.5) < 0.01);
	CU_ASSERT_EQUAL(cnt[3], RN / 4);
	free(p);
	free(bo);

	/* the streams, RandomUniformLike of ya's shape */
	taprt_tensor xl = rt_tensor(TAPRT_F32, b, 1, dims);
	float *c = malloc(sizeof *c * RN);
	taprt_tensor yc = rt_tensor(TAPRT_F32, c, 1, dims);
	random_run(taprt_op_RandomUniformLike, &cx, &xl, &ya, NULL, 0);
	random_run(taprt_op_RandomUniformLike, &cx, &xl, &yc, NULL, 0);
	CU_ASSERT_EQUAL(same_count(a, c, RN), RN); /* the same context: the same values */
	taprt_ctx other = cx;
	other.tp_rank = 1;
	random_run(taprt_op_RandomUniformLike, &other, &xl, &yc, NULL, 0);
	CU_ASSERT_EQUAL(same_count(a, c, RN), RN); /* TP ranks agree */
	for (int k = 0; k < 4; k++) {
		other = cx;
		if (k == 0)
			other.runs = 1;
		else if (k == 1)
			other.micro = 1;
		else if (k == 2)
			other.dp_rank = 1;
		else
			setenv("TAPRT_SEED", "12345", 1);
		random_run(taprt_op_RandomUniformLike, &other, &xl, &yc, NULL, 0);
		unsetenv("TAPRT_SEED");
		CU_ASSERT_TRUE(same_count(a, c, RN) < RN / 1000);
	}
	/* a seed attribute decides, whatever TAPRT_SEED says */
	const taprt_attr seed[] = {{.name = "seed", .type = TAPRT_ATTR_FLOAT, .f = 3}};
	random_run(taprt_op_RandomUniformLike, &cx, &xl, &yc, seed, 1);
	CU_ASSERT_TRUE(same_count(a, c, RN) < RN / 1000);
	setenv("TAPRT_SEED", "12345", 1);
	random_run(taprt_op_RandomUniformLike, &cx, &xl, &ya, seed, 1);
	unsetenv("TAPRT_SEED");
	CU_ASSERT_EQUAL(same_count(a, c, RN), RN);
	free(a);
	free(b);
	free(c);
	free(d);
}

void
suite_rt_elementwise(CU_pSuite s)
{
	ADD(s, random_ops);
	ADD(s, erf_accuracy);
	ADD(s, broadcast_shapes);
	ADD(s, broadcast_long);
	ADD(s, int_div_mod);
	ADD(s, cast);
	ADD(s, cast_half_all);
	ADD(s, clip);
	ADD(s, where);
	ADD(s, unary);
	ADD(s, power);
	ADD(s, compare_logic);
	ADD(s, variadic);
	ADD(s, prelu_dropout);
}
