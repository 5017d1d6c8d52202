/*
 * test_rt_data.c - CUnit tests for the data-movement kernels of k_data.c.
 *
 * Small cases carry expectations written out by hand (checked against
 * numpy); larger transposes, which exercise the tiled path, are checked
 * against a naive index-by-index reference.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static taprt_attr
attr_i(const char *name, int64_t v)
{
	return (taprt_attr){.name = name, .type = TAPRT_ATTR_INT, .i = v};
}

static taprt_attr
attr_is(const char *name, const int64_t *v, int cnt)
{
	return (taprt_attr){.name = name, .type = TAPRT_ATTR_INTS, .is = v, .n = cnt};
}

static taprt_attr
attr_s(const char *name, const char *s)
{
	return (taprt_attr){.name = name, .type = TAPRT_ATTR_STRING, .s = s};
}

/* Compare n elements of es bytes; reports the first difference. */
static void
check_bytes(const void *got, const void *want, int64_t cnt, size_t es, int line)
{
	for (int64_t i = 0; i < cnt; i++)
		if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
			fprintf(stderr, "\nline %d: element %lld differs\n", line, (long long)i);
			CU_FAIL("element differs");
			return;
		}
	CU_PASS("equal");
}
#define CHECK(got, want, cnt) check_bytes((got), (want), (cnt), sizeof *(want), __LINE__)

static void
iota_f(float *v, int64_t cnt)
{
	for (int64_t i = 0; i < cnt; i++)
		v[i] = (float)i;
}

/* ------------------------------------------------------------ Transpose */

static void
test_transpose_small(void)
{
	/* [2,3] -> default perm reverses: [3,2] */
	float xv[] = {1, 2, 3, 4, 5, 6}, yv[6];
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 3));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(3, 2));
	taprt_tensor *in[] = {&x}, *out[] = {&y};
	taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
	taprt_op_Transpose(NULL, &n);
	CHECK(yv, ((float[]){1, 4, 2, 5, 3, 6}), 6);

	/* [2,3,2] perm [2,0,1] -> [2,2,3]: y[c][a][b] = x[a][b][c] */
	int32_t av[12], bv[12];
	for (int i = 0; i < 12; i++)
		av[i] = i;
	int64_t perm[] = {2, 0, 1};
	taprt_attr at[] = {attr_is("perm", perm, 3)};
	taprt_tensor a = rt_tensor(TAPRT_I32, av, 3, DIMS(2, 3, 2));
	taprt_tensor b = rt_tensor(TAPRT_I32, bv, 3, DIMS(2, 2, 3));
	taprt_tensor *in2[] = {&a}, *out2[] = {&b};
	n = rt_node(in2, 1, out2, 1, at, 1);
	taprt_op_Transpose(NULL, &n);
	CHECK(bv, ((int32_t[]){0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}), 12);
}

/* Reference transpose of an iota tensor: the value at each output index is
 * the flat input index it comes from. */
static void
ref_transpose(const int64_t *xd, int r, const int64_t *perm, double *want)
{
	int64_t od[TAPRT_MAX_RANK], xs[TAPRT_MAX_RANK], numel = 1;
	for (int k = r - 1; k >= 0; k--) {
		xs[k] = numel;
		numel *= xd[k];
	}
	for (int k = 0; k < r; k++)
		od[k] = xd[perm[k]];
	for (int64_t i = 0; i < numel; i++) {
		int64_t rem = i, src = 0;
		for (int k = r - 1; k >= 0; k--) {
			src += rem % od[k] * xs[perm[k]];
			rem /= od[k];
		}
		want[i] = (double)src;
	}
}

static void
run_transpose4(int dtype, const int64_t *xd, const int64_t *perm)
{
	enum { N = 2 * 5 * 19 * 17 };
	static double want[N], wide[N];
	static char xv[N * 8], yv[N * 8];
	int64_t numel = xd[0] * xd[1] * xd[2] * xd[3];
	CU_ASSERT_FATAL(numel <= N);
	for (int64_t i = 0; i < numel; i++) {
		switch (dtype) {
		case TAPRT_F32: ((float *)xv)[i] = (float)i; break;
		case TAPRT_F64: ((double *)xv)[i] = (double)i; break;
		case TAPRT_I16: ((int16_t *)xv)[i] = (int16_t)i; break;
		case TAPRT_U8: ((uint8_t *)xv)[i] = (uint8_t)i; break;
		}
	}
	taprt_tensor x = rt_tensor(dtype, xv, 4, xd);
	taprt_tensor y = rt_tensor(dtype, yv, 4,
	    DIMS(xd[perm[0]], xd[perm[1]], xd[perm[2]], xd[perm[3]]));
	taprt_tensor *in[] = {&x}, *out[] = {&y};
	taprt_attr at[] = {attr_is("perm", perm, 4)};
	taprt_node n = rt_node(in, 1, out, 1, at, 1);
	taprt_op_Transpose(NULL, &n);
	ref_transpose(xd, 4, perm, want);
	for (int64_t i = 0; i < numel; i++) {
		switch (dtype) {
		case TAPRT_F32: wide[i] = ((float *)yv)[i]; break;
		case TAPRT_F64: wide[i] = ((double *)yv)[i]; break;
		case TAPRT_I16: wide[i] = ((int16_t *)yv)[i]; break;
		case TAPRT_U8: wide[i] = ((uint8_t *)yv)[i]; want[i] = (uint8_t)want[i]; break;
		}
	}
	CHECK(wide, want, numel);
}

static void
test_transpose_4d(void)
{
	/* the attention layouts, with sizes that leave partial tiles */
	int64_t p0213[] = {0, 2, 1, 3}, p0231[] = {0, 2, 3, 1}, p0312[] = {0, 3, 1, 2};
	int64_t p3210[] = {3, 2, 1, 0}, p1032[] = {1, 0, 3, 2};
	int dts[] = {TAPRT_F32, TAPRT_F64, TAPRT_I16, TAPRT_U8};
	for (int i = 0; i < LEN(dts); i++) {
		run_transpose4(dts[i], DIMS(2, 5, 19, 17), p0213);
		run_transpose4(dts[i], DIMS(2, 5, 19, 17), p0231);
		run_transpose4(dts[i], DIMS(2, 17, 5, 19), p0312);
		run_transpose4(dts[i], DIMS(2, 5, 19, 17), p3210);
		run_transpose4(dts[i], DIMS(2, 5, 19, 17), p1032);
		run_transpose4(dts[i], DIMS(1, 16, 4, 16), p0213);
		run_transpose4(dts[i], DIMS(1, 16, 4, 16), p0231);
	}
}

/* ---------------------------------------------------------- Concat/Split */

static void
test_concat(void)
{
	float a[] = {1, 2, 3, 4}, b[] = {5, 6}, c[] = {7, 8, 9, 10, 11, 12}, y[12];
	/* axis 0: [2,2] [1,2] [3,2] -> [6,2] */
	taprt_tensor ta = rt_tensor(TAPRT_F32, a, 2, DIMS(2, 2));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 2, DIMS(1, 2));
	taprt_tensor tc = rt_tensor(TAPRT_F32, c, 2, DIMS(3, 2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(6, 2));
	taprt_tensor *in[] = {&ta, &tb, &tc}, *out[] = {&ty};
	taprt_attr at[] = {attr_i("axis", 0)};
	taprt_node n = rt_node(in, 3, out, 1, at, 1);
	taprt_op_Concat(NULL, &n);
	CHECK(y, ((float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), 12);

	/* axis 1 of rank 3: [1,2,2] [1,1,2] [1,3,2] -> [1,6,2]; same bytes */
	ta = rt_tensor(TAPRT_F32, a, 3, DIMS(1, 2, 2));
	tb = rt_tensor(TAPRT_F32, b, 3, DIMS(1, 1, 2));
	tc = rt_tensor(TAPRT_F32, c, 3, DIMS(1, 3, 2));
	ty = rt_tensor(TAPRT_F32, y, 3, DIMS(1, 6, 2));
	at[0] = attr_i("axis", 1);
	memset(y, 0, sizeof y);
	taprt_op_Concat(NULL, &n);
	CHECK(y, ((float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), 12);

	/* last axis (-1): [2,2] [2,1] [2,3] -> [2,6] */
	ta = rt_tensor(TAPRT_F32, a, 2, DIMS(2, 2));
	tb = rt_tensor(TAPRT_F32, b, 2, DIMS(2, 1));
	tc = rt_tensor(TAPRT_F32, c, 2, DIMS(2, 3));
	ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 6));
	at[0] = attr_i("axis", -1);
	taprt_op_Concat(NULL, &n);
	CHECK(y, ((float[]){1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12}), 12);

	/* axis 1 of [2,k,2] i64: inner blocks of several elements */
	int64_t p[] = {1, 2, 3, 4}, q[] = {5, 6, 7, 8}, r[] = {9, 10, 11, 12}, z[12];
	taprt_tensor tp = rt_tensor(TAPRT_I64, p, 3, DIMS(2, 1, 2));
	taprt_tensor tq = rt_tensor(TAPRT_I64, q, 3, DIMS(2, 1, 2));
	taprt_tensor tr = rt_tensor(TAPRT_I64, r, 3, DIMS(2, 1, 2));
	taprt_tensor tz = rt_tensor(TAPRT_I64, z, 3, DIMS(2, 3, 2));
	taprt_tensor *in2[] = {&tp, &tq, &tr}, *out2[] = {&tz};
	at[0] = attr_i("axis", 1);
	n = rt_node(in2, 3, out2, 1, at, 1);
	taprt_op_Concat(NULL, &n);
	CHECK(z, ((int64_t[]){1, 2, 5, 6, 9, 10, 3, 4, 7, 8, 11, 12}), 12);
}

static void
test_split(void)
{
	/* equal parts of [2,6] on axis 1 */
	float xv[12], a[4], b[4], c[4];
	iota_f(xv, 12);
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 6));
	taprt_tensor ta = rt_tensor(TAPRT_F32, a, 2, DIMS(2, 2));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 2, DIMS(2, 2));
	taprt_tensor tc = rt_tensor(TAPRT_F32, c, 2, DIMS(2, 2));
	taprt_tensor *in[] = {&x}, *out[] = {&ta, &tb, &tc};
	taprt_attr at[] = {attr_i("axis", 1)};
	taprt_node n = rt_node(in, 1, out, 3, at, 1);
	taprt_op_Split(NULL, &n);
	CHECK(a, ((float[]){0, 1, 6, 7}), 4);
	CHECK(b, ((float[]){2, 3, 8, 9}), 4);
	CHECK(c, ((float[]){4, 5, 10, 11}), 4);

	/* sizes [1,3,2] from input 1 on axis -1; middle output unused */
	int64_t sz[] = {1, 3, 2};
	float d[2], f[4];
	taprt_tensor ts = rt_tensor(TAPRT_I64, sz, 1, DIMS(3));
	taprt_tensor td = rt_tensor(TAPRT_F32, d, 2, DIMS(2, 1));
	taprt_tensor tf = rt_tensor(TAPRT_F32, f, 2, DIMS(2, 2));
	taprt_tensor *in2[] = {&x, &ts}, *out2[] = {&td, NULL, &tf};
	at[0] = attr_i("axis", -1);
	n = rt_node(in2, 2, out2, 3, at, 1);
	taprt_op_Split(NULL, &n);
	CHECK(d, ((float[]){0, 6}), 2);
	CHECK(f, ((float[]){4, 5, 10, 11}), 4);

	/* opset 11: sizes [1,1] as the attribute, axis 0 */
	float g[6], h[6];
	taprt_tensor tg = rt_tensor(TAPRT_F32, g, 2, DIMS(1, 6));
	taprt_tensor th = rt_tensor(TAPRT_F32, h, 2, DIMS(1, 6));
	taprt_tensor *out3[] = {&tg, &th};
	int64_t sz2[] = {1, 1};
	taprt_attr at2[] = {attr_i("axis", 0), attr_is("split", sz2, 2)};
	n = rt_node(in, 1, out3, 2, at2, 2);
	n.opset = 11;
	taprt_op_Split(NULL, &n);
	CHECK(g, ((float[]){0, 1, 2, 3, 4, 5}), 6);
	CHECK(h, ((float[]){6, 7, 8, 9, 10, 11}), 6);
}

/*
 * Concat and Split of larger tensors on 1 to 3 threads, every loop split
 * (taprt_par_min 1): pieces of odd lengths (cut within a piece, at lines of
 * the result, when the blocks are few; whole blocks a thread when there are
 * at least four a thread), and 300 inputs (more than one batch of pieces).
 * Against an element-by-element reference; Split takes the result apart
 * again and must give back the inputs.
 */
static void
concat_split_case(int nin, int64_t outer, const int64_t *len, int64_t inner)
{
	int64_t tot = 0;
	for (int i = 0; i < nin; i++)
		tot += len[i];
	float *y = malloc(outer * tot * inner * sizeof *y);
	float *want = malloc(outer * tot * inner * sizeof *want);
	float **x = malloc(nin * sizeof *x), **back = malloc(nin * sizeof *back);
	taprt_tensor *tx = malloc(nin * sizeof *tx), *tb = malloc(nin * sizeof *tb);
	taprt_tensor **in = malloc(nin * sizeof *in), **outs = malloc(nin * sizeof *outs);
	int64_t at = 0;
	for (int i = 0; i < nin; i++) {
		int64_t cnt = outer * len[i] * inner;
		x[i] = malloc((cnt ? cnt : 1) * sizeof **x);
		back[i] = calloc(cnt ? cnt : 1, sizeof **back);
		for (int64_t e = 0; e < cnt; e++)
			x[i][e] = (float)(i * 100000 + e);
		for (int64_t k = 0; k < outer; k++)
			for (int64_t j = 0; j < len[i] * inner; j++)
				want[(k * tot + at) * inner + j] = x[i][k * len[i] * inner + j];
		at += len[i];
		tx[i] = rt_tensor(TAPRT_F32, x[i], 3, DIMS(outer, len[i], inner));
		tb[i] = rt_tensor(TAPRT_F32, back[i], 3, DIMS(outer, len[i], inner));
		in[i] = &tx[i];
		outs[i] = &tb[i];
	}
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(outer, tot, inner));
	taprt_tensor *out[] = {&ty}, *yin[] = {&ty};
	taprt_attr at1[] = {attr_i("axis", 1)};
	memset(y, 0xff, outer * tot * inner * sizeof *y);
	taprt_node n = rt_node(in, nin, out, 1, at1, 1);
	taprt_op_Concat(NULL, &n);
	CHECK(y, want, outer * tot * inner);
	n = rt_node(yin, 1, outs, nin, at1, 1);
	taprt_op_Split(NULL, &n);
	for (int i = 0; i < nin; i++) {
		CHECK(back[i], x[i], outer * len[i] * inner);
		free(x[i]);
		free(back[i]);
	}
	free(x);
	free(back);
	free(tx);
	free(tb);
	free(in);
	free(outs);
	free(y);
	free(want);
}

static void
test_concat_split_threads(void)
{
	int64_t saved = taprt_par_min, len[300];
	taprt_par_min = 1;
#ifdef _OPENMP
	int nt = omp_get_max_threads();
	for (int t = 1; t <= 3; t++) {
		omp_set_num_threads(t);
#endif
		/* one block (a U-Net's skip Concat): each piece cut on the team */
		concat_split_case(3, 1, (int64_t[]){37, 100, 5}, 129);
		/* few blocks, pieces shorter than a line */
		concat_split_case(2, 5, (int64_t[]){3, 1}, 3);
		/* many blocks (GPT-2's QKV Split): whole blocks a thread */
		concat_split_case(3, 40, (int64_t[]){16, 16, 16}, 7);
		/* an empty input among them */
		concat_split_case(3, 13, (int64_t[]){4, 0, 9}, 5);
		for (int i = 0; i < 300; i++)
			len[i] = 1 + i % 3;
		concat_split_case(300, 2, len, 17);
#ifdef _OPENMP
	}
	omp_set_num_threads(nt);
#endif
	taprt_par_min = saved;
}

/* ----------------------------------------------------------------- Slice */

static void
slice(taprt_tensor *x, taprt_tensor *y, const int64_t *st, const int64_t *en,
    const int64_t *ax, const int64_t *sp, int cnt)
{
	taprt_tensor ts = rt_tensor(TAPRT_I64, (void *)st, 1, DIMS(cnt));
	taprt_tensor te = rt_tensor(TAPRT_I64, (void *)en, 1, DIMS(cnt));
	taprt_tensor ta = rt_tensor(TAPRT_I64, (void *)ax, 1, DIMS(cnt));
	taprt_tensor tp = rt_tensor(TAPRT_I64, (void *)sp, 1, DIMS(cnt));
	taprt_tensor *in[] = {x, &ts, &te, ax ? &ta : NULL, sp ? &tp : NULL}, *out[] = {y};
	taprt_node n = rt_node(in, 5, out, 1, NULL, 0);
	taprt_op_Slice(NULL, &n);
}

static void
test_slice(void)
{
	float xv[12], y[8];
	iota_f(xv, 12);
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(3, 4));

	/* x[:, -1:-1000:-2]: axes subset, negative step, clamped end */
	taprt_tensor t = rt_tensor(TAPRT_F32, y, 2, DIMS(3, 2));
	slice(&x, &t, DIMS(-1), DIMS(-1000), DIMS(1), DIMS(-2), 1);
	CHECK(y, ((float[]){3, 1, 7, 5, 11, 9}), 6);

	/* x[1:1000, 0:3]: clamped end, no axes or steps */
	t = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 3));
	slice(&x, &t, DIMS(1, 0), DIMS(1000, 3), NULL, NULL, 2);
	CHECK(y, ((float[]){4, 5, 6, 8, 9, 10}), 6);

	/* x[::-1, 3:0:-2] with axes given in reverse order */
	t = rt_tensor(TAPRT_F32, y, 2, DIMS(3, 2));
	slice(&x, &t, DIMS(3, INT64_MAX), DIMS(0, INT64_MIN), DIMS(-1, 0), DIMS(-2, -1), 2);
	CHECK(y, ((float[]){11, 9, 7, 5, 3, 1}), 6);

	/* x[-5:2]: clamped negative start */
	t = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 4));
	slice(&x, &t, DIMS(-5), DIMS(2), DIMS(0), NULL, 1);
	CHECK(y, ((float[]){0, 1, 2, 3, 4, 5, 6, 7}), 8);

	/* 1-D x[10:0:-3] */
	taprt_tensor x1 = rt_tensor(TAPRT_F32, xv, 1, DIMS(12));
	t = rt_tensor(TAPRT_F32, y, 1, DIMS(4));
	slice(&x1, &t, DIMS(10), DIMS(0), NULL, DIMS(-3), 1);
	CHECK(y, ((float[]){10, 7, 4, 1}), 4);

	/* opset 9: starts/ends/axes attributes; x[:, 1:3] as u8 */
	uint8_t bv[12], by[6];
	for (int i = 0; i < 12; i++)
		bv[i] = (uint8_t)i;
	taprt_tensor b = rt_tensor(TAPRT_U8, bv, 2, DIMS(3, 4));
	taprt_tensor tb = rt_tensor(TAPRT_U8, by, 2, DIMS(3, 2));
	taprt_tensor *in[] = {&b}, *out[] = {&tb};
	taprt_attr at[] = {attr_is("axes", DIMS(1), 1), attr_is("ends", DIMS(3), 1),
		attr_is("starts", DIMS(1), 1)};
	taprt_node n = rt_node(in, 1, out, 1, at, 3);
	n.opset = 9;
	taprt_op_Slice(NULL, &n);
	CHECK(by, ((uint8_t[]){1, 2, 5, 6, 9, 10}), 6);
}

/* ---------------------------------------------------------------- Gather */

static void
test_gather(void)
{
	/* embedding: data [4,3], i64 indices [2,2] on axis 0 */
	float ev[12], y[12];
	iota_f(ev, 12);
	int64_t iv[] = {3, 0, -1, 1};
	taprt_tensor e = rt_tensor(TAPRT_F32, ev, 2, DIMS(4, 3));
	taprt_tensor ti = rt_tensor(TAPRT_I64, iv, 2, DIMS(2, 2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 2, 3));
	taprt_tensor *in[] = {&e, &ti}, *out[] = {&ty};
	taprt_node n = rt_node(in, 2, out, 1, NULL, 0);
	taprt_op_Gather(NULL, &n);
	CHECK(y, ((float[]){9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}), 12);

	/* axis 1 with i32 negative indices: data [2,4] (i64), indices [3] */
	int64_t dv[] = {10, 11, 12, 13, 20, 21, 22, 23}, z[6];
	int32_t jv[] = {-1, 0, -4};
	taprt_tensor d = rt_tensor(TAPRT_I64, dv, 2, DIMS(2, 4));
	taprt_tensor tj = rt_tensor(TAPRT_I32, jv, 1, DIMS(3));
	taprt_tensor tz = rt_tensor(TAPRT_I64, z, 2, DIMS(2, 3));
	taprt_tensor *in2[] = {&d, &tj}, *out2[] = {&tz};
	taprt_attr at[] = {attr_i("axis", 1)};
	n = rt_node(in2, 2, out2, 1, at, 1);
	taprt_op_Gather(NULL, &n);
	CHECK(z, ((int64_t[]){13, 10, 10, 23, 20, 20}), 6);

	/* axis 1 of [2,3,2] with a scalar index: blocks of two elements */
	float wv[12], w[4];
	iota_f(wv, 12);
	int64_t k = -2;
	taprt_tensor tw = rt_tensor(TAPRT_F32, wv, 3, DIMS(2, 3, 2));
	taprt_tensor tk = rt_tensor(TAPRT_I64, &k, 0, NULL);
	taprt_tensor to = rt_tensor(TAPRT_F32, w, 2, DIMS(2, 2));
	taprt_tensor *in3[] = {&tw, &tk}, *out3[] = {&to};
	n = rt_node(in3, 2, out3, 1, at, 1);
	taprt_op_Gather(NULL, &n);
	CHECK(w, ((float[]){2, 3, 8, 9}), 4);

	/* an index out of range fails with a message, and does not crash */
	taprt_ctx cx = {0};
	jv[1] = 4;
	n = rt_node(in2, 2, out2, 1, at, 1);
	taprt_op_Gather(&cx, &n);
	CU_ASSERT_PTR_NOT_NULL(strstr(cx.error, "index 4 out of range [-4, 4)"));
}

/* --------------------------------------------------------- Expand / Tile */

static void
test_expand(void)
{
	/* [3,1] -> [2,3,4] */
	int32_t xv[] = {1, 2, 3}, y[24];
	int32_t want[24];
	for (int i = 0; i < 24; i++)
		want[i] = 1 + i / 4 % 3;
	int64_t shp[] = {2, 1, 4};
	taprt_tensor x = rt_tensor(TAPRT_I32, xv, 2, DIMS(3, 1));
	taprt_tensor s = rt_tensor(TAPRT_I64, shp, 1, DIMS(3));
	taprt_tensor ty = rt_tensor(TAPRT_I32, y, 3, DIMS(2, 3, 4));
	taprt_tensor *in[] = {&x, &s}, *out[] = {&ty};
	taprt_node n = rt_node(in, 2, out, 1, NULL, 0);
	taprt_op_Expand(NULL, &n);
	CHECK(y, want, 24);

	/* [3] -> [2,3]: whole rows repeated */
	taprt_tensor x1 = rt_tensor(TAPRT_I32, xv, 1, DIMS(3));
	ty = rt_tensor(TAPRT_I32, y, 2, DIMS(2, 3));
	in[0] = &x1;
	taprt_op_Expand(NULL, &n);
	CHECK(y, ((int32_t[]){1, 2, 3, 1, 2, 3}), 6);

	/* a scalar f64 -> [2,2] */
	double dv = 2.5, dy[4];
	taprt_tensor x0 = rt_tensor(TAPRT_F64, &dv, 0, NULL);
	taprt_tensor tdy = rt_tensor(TAPRT_F64, dy, 2, DIMS(2, 2));
	taprt_tensor *in2[] = {&x0, &s}, *out2[] = {&tdy};
	n = rt_node(in2, 2, out2, 1, NULL, 0);
	taprt_op_Expand(NULL, &n);
	CHECK(dy, ((double[]){2.5, 2.5, 2.5, 2.5}), 4);
}

static void
test_tile(void)
{
	/* [2,3] repeats [2,2] -> [4,6] */
	float xv[] = {0, 1, 2, 3, 4, 5}, y[24];
	int64_t rep[] = {2, 2};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 3));
	taprt_tensor r = rt_tensor(TAPRT_I64, rep, 1, DIMS(2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(4, 6));
	taprt_tensor *in[] = {&x, &r}, *out[] = {&ty};
	taprt_node n = rt_node(in, 2, out, 1, NULL, 0);
	taprt_op_Tile(NULL, &n);
	CHECK(y, ((float[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,
		0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}), 24);

	/* repeats [1,3] -> [2,9]; [3,1] -> [6,3] */
	ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 9));
	taprt_op_Tile(NULL, &n);
	CHECK(y, ((float[]){0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5}), 18);
	ty = rt_tensor(TAPRT_F32, y, 2, DIMS(6, 3));
	taprt_op_Tile(NULL, &n);
	CHECK(y, ((float[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}), 18);
}

/* ----------------------------------------------------------------- Trilu */

static void
trilu(int upper, int64_t k, int has_k, const float *want)
{
	/* two [3,4] matrices: the second is the first plus 100 */
	float xv[24], y[24], w2[24];
	/* x is 0 only at [0][0], so want says whether that is kept */
	bool keep0 = upper ? k <= 0 : k >= 0;
	for (int i = 0; i < 12; i++) {
		xv[i] = (float)i;
		xv[i + 12] = (float)i + 100;
		w2[i] = want[i];
		w2[i + 12] = want[i] || (i == 0 && keep0) ? want[i] + 100 : 0;
	}
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 3, DIMS(2, 3, 4));
	taprt_tensor tk = rt_tensor(TAPRT_I64, &k, 0, NULL);
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, 3, 4));
	taprt_tensor *in[] = {&x, has_k ? &tk : NULL}, *out[] = {&ty};
	taprt_attr at[] = {attr_i("upper", upper)};
	taprt_node n = rt_node(in, 2, out, 1, at, upper < 0 ? 0 : 1);
	taprt_op_Trilu(NULL, &n);
	CHECK(y, w2, 24);
}

static void
test_trilu(void)
{
	/* upper with the default k = 0 and no attribute */
	trilu(-1, 0, 0, (float[]){0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11});
	trilu(1, 1, 1, (float[]){0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
	trilu(1, -1, 1, (float[]){0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11});
	trilu(0, 0, 0, (float[]){0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0});
	trilu(0, 1, 1, (float[]){0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11});
	trilu(0, -1, 1, (float[]){0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
	/* k beyond the matrix: all zero / all kept */
	trilu(1, 10, 1, (float[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
	trilu(0, 10, 1, (float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
}

/* ------------------------------------------------------------------- Pad */

static void
pad(const char *mode, const int64_t *pads, const int64_t *ody, const float *cval, float *y)
{
	float xv[] = {1, 2, 3, 4, 5, 6};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 3));
	taprt_tensor tp = rt_tensor(TAPRT_I64, (void *)pads, 1, DIMS(4));
	taprt_tensor tc = rt_tensor(TAPRT_F32, (void *)cval, 0, NULL);
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, ody);
	taprt_tensor *in[] = {&x, &tp, cval ? &tc : NULL}, *out[] = {&ty};
	taprt_attr at[] = {attr_s("mode", mode)};
	taprt_node n = rt_node(in, 3, out, 1, at, mode ? 1 : 0);
	taprt_op_Pad(NULL, &n);
}

static void
test_pad(void)
{
	float y[32], nine = 9;
	pad("constant", DIMS(1, 2, 0, 1), DIMS(3, 6), &nine, y);
	CHECK(y, ((float[]){9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9}), 18);
	/* default mode and value */
	pad(NULL, DIMS(0, 1, 1, 0), DIMS(3, 4), NULL, y);
	CHECK(y, ((float[]){0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0}), 12);
	pad("reflect", DIMS(1, 2, 1, 2), DIMS(4, 7), NULL, y);
	CHECK(y, ((float[]){6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1,
		6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1}), 28);
	pad("edge", DIMS(0, 2, 1, 1), DIMS(3, 6), NULL, y);
	CHECK(y, ((float[]){1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6}), 18);

	pad("wrap", DIMS(0, 1, 0, 2), DIMS(2, 6), NULL, y);
	CHECK(y, ((float[]){3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5}), 12);

	/* negative pads crop: edge pads one column at the front, crops two at the end */
	pad("edge", DIMS(0, 1, 0, -2), DIMS(2, 2), NULL, y);
	CHECK(y, ((float[]){1, 1, 4, 4}), 4);
	/* constant: crop the first row, pad one column at the end */
	pad("constant", DIMS(-1, 0, 0, 1), DIMS(1, 4), NULL, y);
	CHECK(y, ((float[]){4, 5, 6, 0}), 4);
	/* reflect: crop the first column, reflect one more at the end */
	pad("reflect", DIMS(0, -1, 0, 1), DIMS(2, 3), NULL, y);
	CHECK(y, ((float[]){2, 3, 2, 5, 6, 5}), 6);

	/* opset 2 style: pads and value as attributes, i32 data */
	int32_t xi[] = {1, 2}, yi[5];
	taprt_tensor x = rt_tensor(TAPRT_I32, xi, 1, DIMS(2));
	taprt_tensor ty = rt_tensor(TAPRT_I32, yi, 1, DIMS(5));
	taprt_tensor *in[] = {&x}, *out[] = {&ty};
	taprt_attr at[] = {attr_s("mode", "constant"), attr_is("pads", DIMS(2, 1), 2),
		{.name = "value", .type = TAPRT_ATTR_FLOAT, .f = 7}};
	taprt_node n = rt_node(in, 1, out, 1, at, 3);
	n.opset = 7;
	taprt_op_Pad(NULL, &n);
	CHECK(yi, ((int32_t[]){7, 7, 1, 2, 7}), 5);

	/* opset 18 axes input: pad only axis -1 of [2,3], wrap-free edge */
	float xv[] = {1, 2, 3, 4, 5, 6};
	int64_t pv[] = {1, 0}, av[] = {-1};
	taprt_tensor x2 = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 3));
	taprt_tensor tp = rt_tensor(TAPRT_I64, pv, 1, DIMS(2));
	taprt_tensor ta = rt_tensor(TAPRT_I64, av, 1, DIMS(1));
	taprt_tensor t2 = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 4));
	taprt_tensor *in2[] = {&x2, &tp, NULL, &ta}, *out2[] = {&t2};
	taprt_attr at2[] = {attr_s("mode", "edge")};
	n = rt_node(in2, 4, out2, 1, at2, 1);
	taprt_op_Pad(NULL, &n);
	CHECK(y, ((float[]){1, 1, 2, 3, 4, 4, 5, 6}), 8);
}

/* --------------------------------------------------- constants and shapes */

static void
test_constant(void)
{
	int64_t tv[] = {5, -6, 7};
	taprt_tensor t = rt_tensor(TAPRT_I64, tv, 1, DIMS(3));
	int64_t y[3];
	taprt_tensor ty = rt_tensor(TAPRT_I64, y, 1, DIMS(3));
	taprt_tensor *out[] = {&ty};
	taprt_attr at[] = {{.name = "value", .type = TAPRT_ATTR_TENSOR, .t = &t}};
	taprt_node n = rt_node(NULL, 0, out, 1, at, 1);
	taprt_op_Constant(NULL, &n);
	CHECK(y, tv, 3);

	float fs[] = {1.5f, -2}, fy[2], f1;
	taprt_tensor tf = rt_tensor(TAPRT_F32, fy, 1, DIMS(2));
	taprt_tensor *out2[] = {&tf};
	at[0] = (taprt_attr){.name = "value_floats", .type = TAPRT_ATTR_FLOATS, .fs = fs, .n = 2};
	n = rt_node(NULL, 0, out2, 1, at, 1);
	taprt_op_Constant(NULL, &n);
	CHECK(fy, fs, 2);

	tf = rt_tensor(TAPRT_F32, &f1, 0, NULL);
	at[0] = (taprt_attr){.name = "value_float", .type = TAPRT_ATTR_FLOAT, .f = 0.25f};
	taprt_op_Constant(NULL, &n);
	CU_ASSERT_EQUAL(f1, 0.25f);

	ty = rt_tensor(TAPRT_I64, y, 0, NULL);
	at[0] = attr_i("value_int", -9);
	n = rt_node(NULL, 0, out, 1, at, 1);
	taprt_op_Constant(NULL, &n);
	CU_ASSERT_EQUAL(y[0], -9);

	ty = rt_tensor(TAPRT_I64, y, 1, DIMS(2));
	at[0] = attr_is("value_ints", DIMS(4, 3), 2);
	taprt_op_Constant(NULL, &n);
	CHECK(y, ((int64_t[]){4, 3}), 2);
}

static void
test_constant_of_shape(void)
{
	int64_t shp[] = {2, 3};
	float y[6];
	taprt_tensor s = rt_tensor(TAPRT_I64, shp, 1, DIMS(2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&s}, *out[] = {&ty};
	taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
	memset(y, 0xff, sizeof y);
	taprt_op_ConstantOfShape(NULL, &n);
	CHECK(y, ((float[]){0, 0, 0, 0, 0, 0}), 6);

	int32_t v = 42, yi[6];
	taprt_tensor tv = rt_tensor(TAPRT_I32, &v, 1, DIMS(1));
	ty = rt_tensor(TAPRT_I32, yi, 2, DIMS(2, 3));
	taprt_tensor *out2[] = {&ty};
	taprt_attr at[] = {{.name = "value", .type = TAPRT_ATTR_TENSOR, .t = &tv}};
	n = rt_node(in, 1, out2, 1, at, 1);
	taprt_op_ConstantOfShape(NULL, &n);
	CHECK(yi, ((int32_t[]){42, 42, 42, 42, 42, 42}), 6);
}

static void
test_shape_size(void)
{
	float dummy;
	taprt_tensor x = rt_tensor(TAPRT_F32, &dummy, 4, DIMS(2, 3, 5, 7));
	int64_t y[4];
	taprt_tensor ty = rt_tensor(TAPRT_I64, y, 1, DIMS(4));
	taprt_tensor *in[] = {&x}, *out[] = {&ty};
	taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
	taprt_op_Shape(NULL, &n);
	CHECK(y, ((int64_t[]){2, 3, 5, 7}), 4);

	/* start 1, end -1 -> dims 1..2 */
	taprt_attr at[] = {attr_i("end", -1), attr_i("start", 1)};
	ty = rt_tensor(TAPRT_I64, y, 1, DIMS(2));
	n = rt_node(in, 1, out, 1, at, 2);
	taprt_op_Shape(NULL, &n);
	CHECK(y, ((int64_t[]){3, 5}), 2);

	/* start -10 clamps to 0; end 2 */
	at[0] = attr_i("end", 2);
	at[1] = attr_i("start", -10);
	taprt_op_Shape(NULL, &n);
	CHECK(y, ((int64_t[]){2, 3}), 2);

	/* start -1 only: the last dim */
	at[0] = attr_i("start", -1);
	ty = rt_tensor(TAPRT_I64, y, 1, DIMS(1));
	n = rt_node(in, 1, out, 1, at, 1);
	taprt_op_Shape(NULL, &n);
	CU_ASSERT_EQUAL(y[0], 7);

	ty = rt_tensor(TAPRT_I64, y, 0, NULL);
	n = rt_node(in, 1, out, 1, NULL, 0);
	taprt_op_Size(NULL, &n);
	CU_ASSERT_EQUAL(y[0], 210);
}

static void
test_range(void)
{
	float fa = 1, fl = 2, fd = 0.25f, fy[4];
	taprt_tensor a = rt_tensor(TAPRT_F32, &fa, 0, NULL);
	taprt_tensor l = rt_tensor(TAPRT_F32, &fl, 0, NULL);
	taprt_tensor d = rt_tensor(TAPRT_F32, &fd, 0, NULL);
	taprt_tensor y = rt_tensor(TAPRT_F32, fy, 1, DIMS(4));
	taprt_tensor *in[] = {&a, &l, &d}, *out[] = {&y};
	taprt_node n = rt_node(in, 3, out, 1, NULL, 0);
	taprt_op_Range(NULL, &n);
	CHECK(fy, ((float[]){1, 1.25f, 1.5f, 1.75f}), 4);

	int32_t ia = 10, il = 1, id = -3, iy[3];
	a = rt_tensor(TAPRT_I32, &ia, 0, NULL);
	l = rt_tensor(TAPRT_I32, &il, 0, NULL);
	d = rt_tensor(TAPRT_I32, &id, 0, NULL);
	y = rt_tensor(TAPRT_I32, iy, 1, DIMS(3));
	taprt_op_Range(NULL, &n);
	CHECK(iy, ((int32_t[]){10, 7, 4}), 3);

	int64_t la = -2, ll = 3, ld = 2, ly[3];
	a = rt_tensor(TAPRT_I64, &la, 0, NULL);
	l = rt_tensor(TAPRT_I64, &ll, 0, NULL);
	d = rt_tensor(TAPRT_I64, &ld, 0, NULL);
	y = rt_tensor(TAPRT_I64, ly, 1, DIMS(3));
	taprt_op_Range(NULL, &n);
	CHECK(ly, ((int64_t[]){-2, 0, 2}), 3);
}

static void
test_reshape_family(void)
{
	int16_t xv[] = {1, 2, 3, 4, 5, 6}, y[6];
	taprt_tensor x = rt_tensor(TAPRT_I16, xv, 2, DIMS(2, 3));
	taprt_tensor ty = rt_tensor(TAPRT_I16, y, 3, DIMS(3, 1, 2));
	taprt_tensor *in[] = {&x}, *out[] = {&ty};
	taprt_node n = rt_node(in, 1, out, 1, NULL, 0);
	void (*ops[])(taprt_ctx *, const taprt_node *) = {taprt_op_Reshape, taprt_op_Flatten,
		taprt_op_Squeeze, taprt_op_Unsqueeze};
	for (int i = 0; i < LEN(ops); i++) {
		memset(y, 0, sizeof y);
		ops[i](NULL, &n);
		CHECK(y, xv, 6);
	}
}

void
suite_rt_data(CU_pSuite s)
{
	ADD(s, test_transpose_small);
	ADD(s, test_transpose_4d);
	ADD(s, test_concat);
	ADD(s, test_split);
	ADD(s, test_concat_split_threads);
	ADD(s, test_slice);
	ADD(s, test_gather);
	ADD(s, test_expand);
	ADD(s, test_tile);
	ADD(s, test_trilu);
	ADD(s, test_pad);
	ADD(s, test_constant);
	ADD(s, test_constant_of_shape);
	ADD(s, test_shape_size);
	ADD(s, test_range);
	ADD(s, test_reshape_family);
}
