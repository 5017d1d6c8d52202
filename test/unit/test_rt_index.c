/*
 * test_rt_index.c - CUnit tests for the kernels of k_index.c and k_einsum.c.
 *
 * The node tests compare these kernels with numpy on many shapes; here are
 * the things they cannot show: a run-time index out of range is an error
 * with a message (never a stray read or write), a repeated index with
 * reduction none keeps the last update, OneHot's negative indices before
 * and after opset 11, TopK's ties, CumSum's run-time axis check, and the
 * Einsum equation parser's labels and messages.  Expectations are worked
 * out by hand in the comments.
 */
#include <string.h>

#include "runtime/einsum.h"
#include "runtime/internal.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

static taprt_attr
attr_i(const char *name, int64_t v)
{
	return (taprt_attr){.name = name, .type = TAPRT_ATTR_INT, .i = v};
}

static taprt_attr
attr_s(const char *name, const char *s)
{
	return (taprt_attr){.name = name, .type = TAPRT_ATTR_STRING, .s = s};
}

/* Run a kernel at an opset; returns its error message ("" for none). */
static const char *
run(kernel *op, taprt_tensor **in, int nin, taprt_tensor **out, int nout, const taprt_attr *at,
    int nat, int opset)
{
	static taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(in, nin, out, nout, at, nat);
	n.opset = opset;
	op(&cx, &n);
	return cx.error;
}

static void
check_f(const float *got, const float *want, int cnt)
{
	for (int i = 0; i < cnt; i++)
		CU_ASSERT_DOUBLE_EQUAL(got[i], want[i], 1e-6);
}
#define CHECK_F(got, ...) check_f(got, (float[]){__VA_ARGS__}, \
	(int)(sizeof((float[]){__VA_ARGS__}) / sizeof(float)))

static void
check_i(const int64_t *got, const int64_t *want, int cnt)
{
	for (int i = 0; i < cnt; i++)
		CU_ASSERT_EQUAL(got[i], want[i]);
}
#define CHECK_I(got, ...) check_i(got, (int64_t[]){__VA_ARGS__}, \
	(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

static void
test_gather_elements(void)
{
	/* data [[1,2,3],[4,5,6]], axis 1, indices [[2,-3],[-1,1]]:
	 * [[3,1],[6,5]] */
	float xv[] = {1, 2, 3, 4, 5, 6}, yv[4];
	int64_t iv[] = {2, -3, -1, 1};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(2, 3));
	taprt_tensor ix = rt_tensor(TAPRT_I64, iv, 2, DIMS(2, 2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(2, 2));
	taprt_tensor *in[] = {&x, &ix}, *out[] = {&y};
	taprt_attr at[] = {attr_i("axis", 1)};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_GatherElements, in, 2, out, 1, at, 1, 13), "");
	CHECK_F(yv, 3, 1, 6, 5);
	/* 3 and -4 are outside [-3, 3): errors, not reads past the row */
	iv[3] = 3;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_GatherElements, in, 2, out, 1, at, 1, 13),
	    "index 3 out of range [-3, 3)"));
	iv[3] = -4;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_GatherElements, in, 2, out, 1, at, 1, 13),
	    "index -4 out of range [-3, 3)"));
}

static void
test_scatter_elements(void)
{
	/* data [0,0,0,0] (axis 0), indices [1,3,1], updates [5,6,7]:
	 * none keeps the last update of 1 -> [0,7,0,6]; add -> [0,12,0,6];
	 * mul on ones -> [1,35,1,6] */
	float xv[4] = {0}, uv[] = {5, 6, 7}, yv[4];
	int32_t iv[] = {1, 3, 1};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 1, DIMS(4));
	taprt_tensor ix = rt_tensor(TAPRT_I32, iv, 1, DIMS(3));
	taprt_tensor u = rt_tensor(TAPRT_F32, uv, 1, DIMS(3));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 1, DIMS(4));
	taprt_tensor *in[] = {&x, &ix, &u}, *out[] = {&y};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterElements, in, 3, out, 1, NULL, 0, 16), "");
	CHECK_F(yv, 0, 7, 0, 6);
	taprt_attr add[] = {attr_s("reduction", "add")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterElements, in, 3, out, 1, add, 1, 16), "");
	CHECK_F(yv, 0, 12, 0, 6);
	for (int i = 0; i < 4; i++)
		xv[i] = 1;
	taprt_attr mul[] = {attr_s("reduction", "mul")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterElements, in, 3, out, 1, mul, 1, 16), "");
	CHECK_F(yv, 1, 35, 1, 6);
	taprt_attr mx[] = {attr_s("reduction", "max")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterElements, in, 3, out, 1, mx, 1, 18), "");
	CHECK_F(yv, 1, 7, 1, 6);
	/* Scatter (opsets 9-10) is the same without reductions */
	CU_ASSERT_STRING_EQUAL(run(taprt_op_Scatter, in, 3, out, 1, NULL, 0, 9), "");
	CHECK_F(yv, 1, 7, 1, 6);
	/* out of range: an error naming the index */
	iv[2] = 4;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_ScatterElements, in, 3, out, 1, NULL, 0, 16),
	    "index 4 out of range [-4, 4)"));
	iv[2] = -5;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_ScatterElements, in, 3, out, 1, NULL, 0, 16),
	    "index -5 out of range"));
	/* a reduction on bool has no arithmetic */
	uint8_t bx[4] = {0}, bu[3] = {1, 1, 1}, by[4];
	iv[2] = 0;
	taprt_tensor b = rt_tensor(TAPRT_BOOL, bx, 1, DIMS(4));
	taprt_tensor bup = rt_tensor(TAPRT_BOOL, bu, 1, DIMS(3));
	taprt_tensor byt = rt_tensor(TAPRT_BOOL, by, 1, DIMS(4));
	taprt_tensor *bin[] = {&b, &ix, &bup}, *bout[] = {&byt};
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_ScatterElements, bin, 3, bout, 1, add, 1, 16),
	    "reduction on bool is not supported"));
}

static void
test_scatternd(void)
{
	/* data [4,2] zeros, indices [[1],[-1],[1]] (k = 1), updates rows
	 * [1,2],[3,4],[5,6]: none -> row 1 = [5,6] (last), row 3 = [3,4];
	 * min on data 2s -> row 1 = min(2,1,5) = 1, min(2,2,6) = 2 */
	float xv[8] = {0}, uv[] = {1, 2, 3, 4, 5, 6}, yv[8];
	int64_t iv[] = {1, -1, 1};
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 2, DIMS(4, 2));
	taprt_tensor ix = rt_tensor(TAPRT_I64, iv, 2, DIMS(3, 1));
	taprt_tensor u = rt_tensor(TAPRT_F32, uv, 2, DIMS(3, 2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(4, 2));
	taprt_tensor *in[] = {&x, &ix, &u}, *out[] = {&y};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterND, in, 3, out, 1, NULL, 0, 16), "");
	CHECK_F(yv, 0, 0, 5, 6, 0, 0, 3, 4);
	for (int i = 0; i < 8; i++)
		xv[i] = 2;
	taprt_attr mn[] = {attr_s("reduction", "min")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_ScatterND, in, 3, out, 1, mn, 1, 18), "");
	CHECK_F(yv, 2, 2, 1, 2, 2, 2, 2, 2);
	iv[1] = -5;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_ScatterND, in, 3, out, 1, NULL, 0, 16),
	    "index -5 out of range [-4, 4) for dim 0"));
}

static void
test_onehot(void)
{
	/* indices [1,-1,5], depth 4 (the output's dim), values [0,9]:
	 * opset 11: -1 is 3, 5 is out of range -> all off;
	 * opset 9: -1 is out of range too */
	int64_t iv[] = {1, -1, 5}, dv = 4;
	float vv[] = {0, 9}, yv[12];
	taprt_tensor ix = rt_tensor(TAPRT_I64, iv, 1, DIMS(3));
	taprt_tensor d = rt_tensor(TAPRT_I64, &dv, 0, NULL);
	taprt_tensor v = rt_tensor(TAPRT_F32, vv, 1, DIMS(2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(3, 4));
	taprt_tensor *in[] = {&ix, &d, &v}, *out[] = {&y};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_OneHot, in, 3, out, 1, NULL, 0, 11), "");
	CHECK_F(yv, 0, 9, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0);
	CU_ASSERT_STRING_EQUAL(run(taprt_op_OneHot, in, 3, out, 1, NULL, 0, 9), "");
	CHECK_F(yv, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	/* axis 0: the output is [4,3], column j holds index j */
	taprt_tensor y0 = rt_tensor(TAPRT_F32, yv, 2, DIMS(4, 3));
	taprt_tensor *out0[] = {&y0};
	taprt_attr ax[] = {attr_i("axis", 0)};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_OneHot, in, 3, out0, 1, ax, 1, 11), "");
	CHECK_F(yv, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 9, 0);
}

static void
test_topk(void)
{
	/* [3,1,3,2,1] largest k=3: 3 (index 0), 3 (2), 2 (3) - ties to the
	 * lower index; smallest k=3: 1 (1), 1 (4), 2 (3) */
	float xv[] = {3, 1, 3, 2, 1}, vv[3];
	int64_t iv[3];
	taprt_tensor x = rt_tensor(TAPRT_F32, xv, 1, DIMS(5));
	taprt_tensor v = rt_tensor(TAPRT_F32, vv, 1, DIMS(3));
	taprt_tensor ix = rt_tensor(TAPRT_I64, iv, 1, DIMS(3));
	taprt_tensor *in[] = {&x}, *out[] = {&v, &ix};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_TopK, in, 1, out, 2, NULL, 0, 11), "");
	CHECK_F(vv, 3, 3, 2);
	CHECK_I(iv, 0, 2, 3);
	taprt_attr sm[] = {attr_i("largest", 0)};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_TopK, in, 1, out, 2, sm, 1, 11), "");
	CHECK_F(vv, 1, 1, 2);
	CHECK_I(iv, 1, 4, 3);
	/* 40 values 0,1,0,1,...: k = 20 takes the merge sort; the twenty 1s
	 * at odd indices come first, in index order */
	float bx[40], bv[20];
	int64_t bi[20];
	for (int i = 0; i < 40; i++)
		bx[i] = (float)(i % 2);
	taprt_tensor tx = rt_tensor(TAPRT_F32, bx, 1, DIMS(40));
	taprt_tensor tv = rt_tensor(TAPRT_F32, bv, 1, DIMS(20));
	taprt_tensor ti = rt_tensor(TAPRT_I64, bi, 1, DIMS(20));
	taprt_tensor *bin[] = {&tx}, *bout[] = {&tv, &ti};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_TopK, bin, 1, bout, 2, NULL, 0, 11), "");
	for (int i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL(bi[i], 2 * i + 1);
		CU_ASSERT_EQUAL(bv[i], 1);
	}
}

static void
test_cumsum(void)
{
	/* [[1,2,3],[4,5,6]] axis 1 exclusive reverse: [[5,3,0],[11,6,0]] */
	int32_t xv[] = {1, 2, 3, 4, 5, 6}, yv[6];
	int64_t axis = -1;
	taprt_tensor x = rt_tensor(TAPRT_I32, xv, 2, DIMS(2, 3));
	taprt_tensor a = rt_tensor(TAPRT_I64, &axis, 0, NULL);
	taprt_tensor y = rt_tensor(TAPRT_I32, yv, 2, DIMS(2, 3));
	taprt_tensor *in[] = {&x, &a}, *out[] = {&y};
	taprt_attr at[] = {attr_i("exclusive", 1), attr_i("reverse", 1)};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_CumSum, in, 2, out, 1, at, 2, 14), "");
	int32_t want[] = {5, 3, 0, 11, 6, 0};
	CU_ASSERT_EQUAL(memcmp(yv, want, sizeof want), 0);
	/* the axis may arrive at run time: out of range is an error */
	axis = 2;
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_CumSum, in, 2, out, 1, at, 2, 14),
	    "axis 2 out of range for rank 2"));
}

/* Labels of an equation as letters ('.' for an ellipsis dim), one string
 * per operand then the output, joined by '|'. */
static const char *
labels(const char *eq, int nin, const int *rank)
{
	static char buf[256];
	char err[200];
	einsum_eq e;
	if (einsum_parse(eq, nin, rank, &e, err, sizeof err)) {
		snprintf(buf, sizeof buf, "error: %s", err);
		return buf;
	}
	char *p = buf, nb[2];
	for (int t = 0; t <= nin; t++) {
		int r = t < nin ? e.rank[t] : e.orank;
		for (int a = 0; a < r; a++) {
			int l = t < nin ? e.lab[t][a] : e.olab[a];
			*p++ = l >= EINSUM_LETTERS ? (char)('0' + l - EINSUM_LETTERS) :
			    einsum_label_name(l, nb)[0];
		}
		*p++ = t < nin ? '|' : 0;
	}
	return buf;
}

static void
test_einsum_parse(void)
{
	/* implicit output: letters seen once, ASCII order (upper case first) */
	CU_ASSERT_STRING_EQUAL(labels("ij,jk", 2, (int[]){2, 2}), "ij|jk|ik");
	CU_ASSERT_STRING_EQUAL(labels("bA", 1, (int[]){2}), "bA|Ab");
	CU_ASSERT_STRING_EQUAL(labels("ii", 1, (int[]){2}), "ii|");
	/* ellipses right-aligned: operand 0 covers dims 0,1, operand 1 dim 1 */
	CU_ASSERT_STRING_EQUAL(labels("...ij,...jk->...ik", 2, (int[]){4, 3}),
	    "01ij|1jk|01ik");
	CU_ASSERT_STRING_EQUAL(labels(" b i j , b j k -> b i k ", 2, (int[]){3, 3}), "bij|bjk|bik");
	CU_ASSERT_STRING_EQUAL(labels("ij...", 1, (int[]){3}), "ij0|0ij");
	CU_ASSERT_STRING_EQUAL(labels("ij,jk->ik", 2, (int[]){2, 3}),
	    "error: term 1 ('jk') has 2 letters for operand 1 of rank 3");
	CU_ASSERT_STRING_EQUAL(labels("ij->iz", 1, (int[]){2}),
	    "error: output label 'z' appears in no input");
	CU_ASSERT_STRING_EQUAL(labels("ij->ii", 1, (int[]){2}), "error: output label 'i' is repeated");
	CU_ASSERT_STRING_EQUAL(labels("i1", 1, (int[]){2}), "error: unexpected character '1'");
	CU_ASSERT_STRING_EQUAL(labels("i.j", 1, (int[]){2}),
	    "error: a '.' that is not part of '...'");
	CU_ASSERT_STRING_EQUAL(labels("ij", 2, (int[]){2, 2}), "error: 1 terms for 2 operands");
	CU_ASSERT_STRING_EQUAL(labels("...i->i", 1, (int[]){3}),
	    "error: the output has no '...' for the 2 dims the inputs' ellipsis stands for");

	/* sizes: a 1 broadcasts, anything else must agree */
	einsum_eq e;
	char err[200];
	int64_t size[EINSUM_LABELS];
	CU_ASSERT_EQUAL_FATAL(einsum_parse("ij,jk->ik", 2, (int[]){2, 2}, &e, err, sizeof err), 0);
	const int64_t *ok[] = {DIMS(3, 1), DIMS(4, 5)}, *bad[] = {DIMS(3, 4), DIMS(5, 6)};
	CU_ASSERT_EQUAL(einsum_sizes(&e, ok, size, err, sizeof err), 0);
	CU_ASSERT_EQUAL(size['j' - 'a'], 4);
	CU_ASSERT_EQUAL(size['b' - 'a'], -1);
	CU_ASSERT_EQUAL(einsum_sizes(&e, bad, size, err, sizeof err), -1);
	CU_ASSERT_STRING_EQUAL(err, "label 'j' is 5 in operand 1 but 4 in an earlier operand");
}

static void
test_einsum_kernel(void)
{
	/* "ij,jk->ki" on [2,3] x [3,2]: the output [N, M] swaps the operands.
	 * A = [[1,2,3],[4,5,6]], B = [[1,0],[0,1],[1,1]]: A B = [[4,5],[10,11]],
	 * transposed [[4,10],[5,11]] */
	float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {1, 0, 0, 1, 1, 1}, yv[4];
	taprt_tensor a = rt_tensor(TAPRT_F32, av, 2, DIMS(2, 3));
	taprt_tensor b = rt_tensor(TAPRT_F32, bv, 2, DIMS(3, 2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(2, 2));
	taprt_tensor *in[] = {&a, &b}, *out[] = {&y};
	taprt_attr eq[] = {attr_s("equation", "ij,jk->ki")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_Einsum, in, 2, out, 1, eq, 1, 12), "");
	CHECK_F(yv, 4, 10, 5, 11);
	/* the trace "ii" of [[1,2],[3,4]] (A's first four values): 5 */
	taprt_tensor sq = rt_tensor(TAPRT_F32, av, 2, DIMS(2, 2));
	taprt_tensor s = rt_tensor(TAPRT_F32, yv, 0, NULL);
	taprt_tensor *in1[] = {&sq}, *out1[] = {&s};
	taprt_attr tr[] = {attr_s("equation", "ii")};
	CU_ASSERT_STRING_EQUAL(run(taprt_op_Einsum, in1, 1, out1, 1, tr, 1, 12), "");
	CHECK_F(yv, 5);
	/* a shape the equation does not give is an error, not a write past y */
	taprt_attr wrong[] = {attr_s("equation", "ij,jk->ik")};
	taprt_tensor *in2[] = {&a, &a};
	CU_ASSERT_PTR_NOT_NULL(strstr(run(taprt_op_Einsum, in2, 2, out, 1, wrong, 1, 12),
	    "label 'j' is 2 in operand 1 but 3 in an earlier operand"));
}

void
suite_rt_index(CU_pSuite s)
{
	ADD(s, test_gather_elements);
	ADD(s, test_scatter_elements);
	ADD(s, test_scatternd);
	ADD(s, test_onehot);
	ADD(s, test_topk);
	ADD(s, test_cumsum);
	ADD(s, test_einsum_parse);
	ADD(s, test_einsum_kernel);
}
