/*
 * test_rt_nn.c - MatMul, Gemm, Conv, pool and Resize kernels against
 * hand-computed values and, for the larger cases, naive loops written here
 * independently of the kernels' BLAS and im2col paths.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"
#include "test/unit/rt_util.h"
#include "test/unit/util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define RANK(...) ((int)NELEM(DIMS(__VA_ARGS__)))
#define A_INT(nm, v) {.name = (nm), .type = TAPRT_ATTR_INT, .i = (v)}
#define A_FLOAT(nm, v) {.name = (nm), .type = TAPRT_ATTR_FLOAT, .f = (v)}
#define A_STR(nm, v) {.name = (nm), .type = TAPRT_ATTR_STRING, .s = (v)}
#define A_INTS(nm, ...) {.name = (nm), .type = TAPRT_ATTR_INTS,            \
	.n = RANK(__VA_ARGS__), .is = DIMS(__VA_ARGS__)}

/* The rank's team: OpenMP's threads and oneDNN's (conv_dnnl.c sets
 * OpenMP's count to taprt_conv_threads' on each call, as --threads does
 * in a program: OpenMP's alone would fall back to one thread there). */
static void
set_threads(int t)
{
#ifdef _OPENMP
	omp_set_num_threads(t);
#endif
	taprt_conv_threads(t);
}

/* cases(t) on 1 to maxt threads (on one alone without OpenMP), every
 * parallel loop split however small (taprt_par_min 1); the thread count
 * and the bound put back after. */
static void
on_threads(int maxt, void (*cases)(int t))
{
	int64_t saved = taprt_par_min;
	taprt_par_min = 1;
#ifdef _OPENMP
	int nt = omp_get_max_threads();
	for (int t = 1; t <= maxt; t++) {
		set_threads(t);
		cases(t);
	}
	set_threads(nt);
#else
	(void)maxt;
	cases(1);
#endif
	taprt_par_min = saved;
}

/* true when got and want agree to a relative/absolute 1e-4; reports the
 * first difference */
static int
close_f(const float *got, const float *want, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!(fabsf(got[i] - want[i]) <= 1e-4f * (1 + fabsf(want[i])))) {
			printf("\n  [%lld] got %g want %g\n", (long long)i, got[i],
			    want[i]);
			return 0;
		}
	return 1;
}

/* Fill with small deterministic values (exact in float sums). */
static void
seq(float *v, int64_t n, int mul)
{
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)((i * mul) % 13 - 6) / 4;
}

/* The reference product: c[M,N] = a[M,K] @ b[K,N]. */
static void
ref_mm(const float *a, const float *b, float *c, int M, int N, int K)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0;
			for (int k = 0; k < K; k++)
				s += (double)a[i * K + k] * b[k * N + j];
			c[i * N + j] = (float)s;
		}
}

/* Run a two-input, one-output node. */
static void
run2(void (*op)(taprt_ctx *, const taprt_node *), taprt_tensor *a,
    taprt_tensor *b, taprt_tensor *y, const taprt_attr *at, int nat)
{
	taprt_tensor *in[] = {a, b}, *out[] = {y};
	taprt_node n = rt_node(in, b ? 2 : 1, out, 1, at, nat);
	op(NULL, &n);
}

/* ------------------------------------------------------------- MatMul */

static void
test_matmul_2d(void)
{
	float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {7, 8, 9, 10, 11, 12};
	float yv[4], want[] = {58, 64, 139, 154};
	taprt_tensor a = rt_tensor(TAPRT_F32, av, 2, DIMS(2, 3));
	taprt_tensor b = rt_tensor(TAPRT_F32, bv, 2, DIMS(3, 2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 2, DIMS(2, 2));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(close_f(yv, want, 4));
}

static void
test_matmul_vectors(void)
{
	float av[] = {1, 2, 3}, mv[] = {1, 2, 3, 4, 5, 6}, yv[2];
	/* [3] @ [3,2] = [22, 28] */
	taprt_tensor v = rt_tensor(TAPRT_F32, av, 1, DIMS(3));
	taprt_tensor m = rt_tensor(TAPRT_F32, mv, 2, DIMS(3, 2));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 1, DIMS(2));
	run2(taprt_op_MatMul, &v, &m, &y, NULL, 0);
	CU_ASSERT(close_f(yv, (float[]){22, 28}, 2));
	/* [2,3] @ [3] = [14, 32] */
	m = rt_tensor(TAPRT_F32, mv, 2, DIMS(2, 3));
	run2(taprt_op_MatMul, &m, &v, &y, NULL, 0);
	CU_ASSERT(close_f(yv, (float[]){14, 32}, 2));
	/* [3] @ [3] = 14, a scalar */
	y = rt_tensor(TAPRT_F32, yv, 0, NULL);
	run2(taprt_op_MatMul, &v, &v, &y, NULL, 0);
	CU_ASSERT(close_f(yv, (float[]){14}, 1));
	/* [2,1,3] @ [3] = [2,1] (folded: B is 1-D) */
	y = rt_tensor(TAPRT_F32, yv, 2, DIMS(2, 1));
	m = rt_tensor(TAPRT_F32, mv, 3, DIMS(2, 1, 3));
	run2(taprt_op_MatMul, &m, &v, &y, NULL, 0);
	CU_ASSERT(close_f(yv, (float[]){14, 32}, 2));
	/* [3] @ [2,3,1] = [2,1]: A broadcast over B's batch */
	m = rt_tensor(TAPRT_F32, mv, 3, DIMS(2, 3, 1));
	run2(taprt_op_MatMul, &v, &m, &y, NULL, 0);
	CU_ASSERT(close_f(yv, (float[]){14, 32}, 2));
}

/* A[2,1,M,K] @ B[3,K,N] -> [2,3,M,N]: both operands broadcast. */
static void
test_matmul_broadcast(void)
{
	enum { M = 2, K = 3, N = 4 };
	float av[2 * M * K], bv[3 * K * N], yv[6 * M * N], want[6 * M * N];
	seq(av, NELEM(av), 5);
	seq(bv, NELEM(bv), 7);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			ref_mm(av + i * M * K, bv + j * K * N,
			    want + (i * 3 + j) * M * N, M, N, K);
	taprt_tensor a = rt_tensor(TAPRT_F32, av, 4, DIMS(2, 1, M, K));
	taprt_tensor b = rt_tensor(TAPRT_F32, bv, 3, DIMS(3, K, N));
	taprt_tensor y = rt_tensor(TAPRT_F32, yv, 4, DIMS(2, 3, M, N));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(close_f(yv, want, NELEM(yv)));

	/* attention shape [B,h,T,d] @ [B,h,d,T], one product per (b, h) */
	enum { B = 2, H = 2, T = 16, D = 8 };
	static float q[B * H * T * D], k[B * H * D * T], s[B * H * T * T],
	    sw[B * H * T * T];
	seq(q, NELEM(q), 3);
	seq(k, NELEM(k), 11);
	for (int i = 0; i < B * H; i++)
		ref_mm(q + i * T * D, k + i * D * T, sw + i * T * T, T, T, D);
	a = rt_tensor(TAPRT_F32, q, 4, DIMS(B, H, T, D));
	b = rt_tensor(TAPRT_F32, k, 4, DIMS(B, H, D, T));
	y = rt_tensor(TAPRT_F32, s, 4, DIMS(B, H, T, T));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(close_f(s, sw, NELEM(s)));
}

/* x[B,T,H] @ W[H,N]: the batch folds into one product; big enough for the
 * BLAS path, and a small one for the plain loop. */
static void
test_matmul_folded(void)
{
	enum { B = 3, T = 16, H = 64, N = 96 };
	static float x[B * T * H], w[H * N], y[B * T * N], want[B * T * N];
	seq(x, NELEM(x), 3);
	seq(w, NELEM(w), 5);
	ref_mm(x, w, want, B * T, N, H);
	taprt_tensor a = rt_tensor(TAPRT_F32, x, 3, DIMS(B, T, H));
	taprt_tensor b = rt_tensor(TAPRT_F32, w, 2, DIMS(H, N));
	taprt_tensor yt = rt_tensor(TAPRT_F32, y, 3, DIMS(B, T, N));
	run2(taprt_op_MatMul, &a, &b, &yt, NULL, 0);
	CU_ASSERT(close_f(y, want, NELEM(y)));

	a = rt_tensor(TAPRT_F32, x, 3, DIMS(B, 2, 4));
	b = rt_tensor(TAPRT_F32, w, 2, DIMS(4, 5));
	yt = rt_tensor(TAPRT_F32, y, 3, DIMS(B, 2, 5));
	ref_mm(x, w, want, B * 2, 5, 4);
	run2(taprt_op_MatMul, &a, &b, &yt, NULL, 0);
	CU_ASSERT(close_f(y, want, B * 2 * 5));
}

static void
test_matmul_types(void)
{
	int32_t ai[] = {1, -2, 3, 4, 5, -6}, bi[] = {7, 8, 9, 10, 11, 12}, yi[4];
	taprt_tensor a = rt_tensor(TAPRT_I32, ai, 2, DIMS(2, 3));
	taprt_tensor b = rt_tensor(TAPRT_I32, bi, 2, DIMS(3, 2));
	taprt_tensor y = rt_tensor(TAPRT_I32, yi, 2, DIMS(2, 2));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(yi[0] == 22 && yi[1] == 24 && yi[2] == 7 && yi[3] == 10);

	/* i64, batched with A broadcast: [2,2] @ [2,2,1] */
	int64_t al[] = {1, 2, 3, 4}, bl[] = {1, 1, 2, -1}, yl[4];
	a = rt_tensor(TAPRT_I64, al, 2, DIMS(2, 2));
	b = rt_tensor(TAPRT_I64, bl, 3, DIMS(2, 2, 1));
	y = rt_tensor(TAPRT_I64, yl, 3, DIMS(2, 2, 1));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(yl[0] == 3 && yl[1] == 7 && yl[2] == 0 && yl[3] == 2);

	uint32_t au[] = {1, 2, 3}, bu[] = {4, 5, 6}, yu[1];
	a = rt_tensor(TAPRT_U32, au, 1, DIMS(3));
	b = rt_tensor(TAPRT_U32, bu, 1, DIMS(3));
	y = rt_tensor(TAPRT_U32, yu, 0, NULL);
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(yu[0] == 32);

	double ad[] = {1, 2, 3, 4, 5, 6}, bd[] = {7, 8, 9, 10, 11, 12}, yd[4];
	a = rt_tensor(TAPRT_F64, ad, 2, DIMS(2, 3));
	b = rt_tensor(TAPRT_F64, bd, 2, DIMS(3, 2));
	y = rt_tensor(TAPRT_F64, yd, 2, DIMS(2, 2));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(yd[0] == 58 && yd[1] == 64 && yd[2] == 139 && yd[3] == 154);

	/* K = 0: all zeros */
	float none[1] = {0}, yz[4] = {1, 1, 1, 1};
	a = rt_tensor(TAPRT_F32, none, 2, DIMS(2, 0));
	b = rt_tensor(TAPRT_F32, none, 2, DIMS(0, 2));
	y = rt_tensor(TAPRT_F32, yz, 2, DIMS(2, 2));
	run2(taprt_op_MatMul, &a, &b, &y, NULL, 0);
	CU_ASSERT(close_f(yz, (float[]){0, 0, 0, 0}, 4));
}

/* --------------------------------------------------------------- Gemm */

/* Y = 0.5 * A' B' + 2 C over every transpose and C broadcast. */
/* A product too small for oneDNN loads OpenBLAS (gemm.c loads it on the
 * first such product), unless the machine has none: the loader's own
 * answer, not the runtime's name for it. */
static void
test_gemm_loads_blas(void)
{
	const char *want = getenv("TAPRT_GEMM");
	if (want && strcmp(want, "portable") == 0)
		return;
	float a[4 * 8], b[8 * 4], c[16], ref[16];
	seq(a, NELEM(a), 3);
	seq(b, NELEM(b), 5);
	ref_mm(a, b, ref, 4, 4, 8);
	taprt_sgemm(false, false, 4, 4, 8, 1, a, 8, b, 4, 0, c, 4);
	for (int i = 0; i < 16; i++)
		CU_ASSERT_DOUBLE_EQUAL(c[i], ref[i], 1e-4);
	void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		CU_ASSERT_PTR_NOT_NULL(strstr(taprt_gemm_name(), "OpenBLAS"));
		dlclose(h);
	} else if ((h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL))) {
		CU_FAIL("OpenBLAS is installed and the small product did not load it");
		dlclose(h);
	}
}

static void
test_gemm(void)
{
	enum { M = 2, K = 3, N = 4 };
	float a[M * K], b[K * N], at[K * M], bt[N * K], ab[M * N];
	seq(a, NELEM(a), 3);
	seq(b, NELEM(b), 5);
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++)
			at[k * M + i] = a[i * K + k];
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			bt[j * K + k] = b[k * N + j];
	ref_mm(a, b, ab, M, N, K);

	float cfull[M * N];
	seq(cfull, NELEM(cfull), 7);
	struct {
		int rank;
		int64_t dims[2];
		float v[M * N];
	} cs[] = {
		{-1, {0}, {0}},                         /* no C */
		{0, {0}, {1.5f}},                       /* scalar */
		{1, {N}, {1, 2, 3, 4}},
		{2, {1, N}, {-1, 0, 1, 2}},
		{2, {M, 1}, {10, 20}},
		{2, {M, N}, {0}},
	};
	memcpy(cs[5].v, cfull, sizeof cfull);

	for (int ci = 0; ci < (int)NELEM(cs); ci++)
		for (int tr = 0; tr < 4; tr++) {
			int ta = tr & 1, tb = tr >> 1;
			float y[M * N], want[M * N];
			for (int i = 0; i < M; i++)
				for (int j = 0; j < N; j++) {
					float c = 0;
					switch (cs[ci].rank) {
					case 0: c = cs[ci].v[0]; break;
					case 1: c = cs[ci].v[j]; break;
					case 2:
						c = cs[ci].dims[0] == 1 ? cs[ci].v[j] :
						    cs[ci].dims[1] == 1 ? cs[ci].v[i] :
						    cs[ci].v[i * N + j];
					}
					want[i * N + j] = 0.5f * ab[i * N + j] + 2 * c;
				}
			taprt_tensor ta_ = ta ? rt_tensor(TAPRT_F32, at, 2, DIMS(K, M)) :
			    rt_tensor(TAPRT_F32, a, 2, DIMS(M, K));
			taprt_tensor tb_ = tb ? rt_tensor(TAPRT_F32, bt, 2, DIMS(N, K)) :
			    rt_tensor(TAPRT_F32, b, 2, DIMS(K, N));
			taprt_tensor tc = rt_tensor(TAPRT_F32, cs[ci].v,
			    cs[ci].rank < 0 ? 0 : cs[ci].rank, cs[ci].dims);
			taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2, DIMS(M, N));
			taprt_tensor *in[] = {&ta_, &tb_, &tc}, *out[] = {&ty};
			taprt_attr at_[] = {A_FLOAT("alpha", 0.5f), A_FLOAT("beta", 2.0f),
				A_INT("transA", ta), A_INT("transB", tb)};
			taprt_node n = rt_node(in, cs[ci].rank < 0 ? 2 : 3, out, 1, at_, 4);
			taprt_op_Gemm(NULL, &n);
			if (!close_f(y, want, M * N))
				printf("  C case %d, transA %d transB %d\n", ci, ta, tb);
			CU_ASSERT(close_f(y, want, M * N));
		}
}

/*
 * Products against a weight packed once (gemm_pack.c), through FusedMatMul,
 * MatMul and Gemm with a context (the packs live in it), at one and two
 * threads, against a double-precision loop: rows past the 144-row blocks
 * and off the 6-row slivers, K past the 256 chunks, N off the 16-column
 * panels, A and B transposed (Gemm), Gemm's C added, bias, residual and
 * activations in the epilogue; each node run twice (the second on the
 * kept panels).  On a CPU without AVX2 the same calls run the library's
 * product.
 */
typedef struct {
	int64_t M, K, N;                /* A [2, M/2, K] for FusedMatMul */
} pkcase;

static int
packed_case(const pkcase *p, int ta, int tb, int bias, int z, const char *act)
{
	int64_t M = p->M, K = p->K, N = p->N;
	float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b);
	float *at = malloc(M * K * sizeof *at);
	float *bv = malloc(N * sizeof *bv), *zv = malloc(M * N * sizeof *zv);
	float *y = malloc(M * N * sizeof *y), *want = malloc(M * N * sizeof *want);
	seq(a, M * K, 5);
	seq(b, K * N, 3);
	seq(bv, N, 7);
	seq(zv, M * N, 11);
	for (int64_t i = 0; i < M; i++)
		for (int64_t k = 0; k < K; k++)
			at[k * M + i] = a[i * K + k];
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double v = 0;
			for (int64_t k = 0; k < K; k++) /* b is [N, K] when tb */
				v += (double)a[i * K + k] * (tb ? b[j * K + k] : b[k * N + j]);
			v += (bias ? bv[j] : 0) + (z ? zv[i * N + j] : 0);
			if (!strcmp(act, "Relu"))
				v = v > 0 ? v : 0;
			else if (!strcmp(act, "Gelu"))
				v = v * (erf(v / sqrt(2.0)) + 1) * 0.5;
			want[i * N + j] = (float)v;
		}
	taprt_tensor tA = rt_tensor(TAPRT_F32, a, 3, DIMS(2, M / 2, K));
	taprt_tensor tw = tb ? rt_tensor(TAPRT_F32, b, 2, DIMS(N, K)) :
	    rt_tensor(TAPRT_F32, b, 2, DIMS(K, N));
	taprt_tensor tbias = rt_tensor(TAPRT_F32, bv, 1, DIMS(N));
	taprt_tensor tz = rt_tensor(TAPRT_F32, zv, 3, DIMS(2, M / 2, N));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 3, DIMS(2, M / 2, N));
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	int ok = 1;
	for (int run = 0; run < 2 && ok; run++) {
		memset(y, 0, M * N * sizeof *y);
		if (ta || tb) {         /* Gemm, transposes, C (the residual) added */
			tA = ta ? rt_tensor(TAPRT_F32, at, 2, DIMS(K, M)) :
			    rt_tensor(TAPRT_F32, a, 2, DIMS(M, K));
			tz = rt_tensor(TAPRT_F32, zv, 2, DIMS(M, N));
			ty = rt_tensor(TAPRT_F32, y, 2, DIMS(M, N));
			taprt_tensor *in[] = {&tA, &tw, &tz}, *out[] = {&ty};
			taprt_attr gat[] = {A_INT("transA", ta), A_INT("transB", tb)};
			taprt_node n = rt_node(in, z ? 3 : 2, out, 1, gat, 2);
			taprt_op_Gemm(&cx, &n);
		} else if (!bias && !z && !*act) {
			taprt_tensor *in[] = {&tA, &tw}, *out[] = {&ty};
			taprt_node n = rt_node(in, 2, out, 1, NULL, 0);
			taprt_op_MatMul(&cx, &n);
		} else {
			taprt_tensor *in[] = {&tA, &tw, bias ? &tbias : NULL, z ? &tz : NULL};
			taprt_tensor *out[] = {&ty};
			taprt_attr fat[] = {A_STR("activation", act)};
			taprt_node n = rt_node(in, 4, out, 1, fat, *act ? 1 : 0);
			taprt_op_FusedMatMul(&cx, &n);
		}
		ok = !cx.error[0] && close_f(y, want, M * N);
		if (!ok)
			printf("  %lldx%lldx%lld ta %d tb %d bias %d z %d act '%s' run %d: %s\n",
			    (long long)M, (long long)K, (long long)N, ta, tb, bias, z, act, run,
			    cx.error);
	}
	/* the panels are kept in the context exactly when AVX2's kernel ran */
	const char *off = getenv("TAPRT_NO_PACK");
	bool packs = taprt_isa() == TAPRT_ISA_AVX2 && !(off && *off && strcmp(off, "0") != 0);
	if (ok && (cx.packs != NULL) != packs) {
		printf("  %lldx%lldx%lld: packs %s\n", (long long)M, (long long)K, (long long)N,
		    cx.packs ? "kept" : "missing");
		ok = 0;
	}
	taprt_packs_free(&cx);
	CU_ASSERT_PTR_NULL(cx.packs);
	free(a);
	free(at);
	free(b);
	free(bv);
	free(zv);
	free(y);
	free(want);
	return ok;
}

static void
test_matmul_packed(void)
{
	pkcase cs[] = {
		{150, 300, 50},         /* M: a block and 6 rows; K: a chunk and 44; N: 3 panels + 2 */
		{16, 64, 1024},         /* the smallest M taken */
		{38, 520, 66},          /* K: two chunks and 8 */
		{300, 17, 256},
	};
	int saved = taprt_isa();
#ifdef _OPENMP
	int nt = omp_get_max_threads();
#endif
	for (int t = 1; t <= 2; t++) {
#ifdef _OPENMP
		set_threads(t);
#endif
		for (int i = 0; i < (int)NELEM(cs); i++) {
			CU_ASSERT(packed_case(&cs[i], 0, 0, 0, 0, ""));
			CU_ASSERT(packed_case(&cs[i], 0, 0, 1, 1, "Relu"));
			CU_ASSERT(packed_case(&cs[i], 0, 0, 1, 0, "Gelu"));
			CU_ASSERT(packed_case(&cs[i], 0, 0, 0, 1, ""));
			CU_ASSERT(packed_case(&cs[i], 0, 1, 0, 0, ""));
			CU_ASSERT(packed_case(&cs[i], 0, 1, 0, 1, ""));
			CU_ASSERT(packed_case(&cs[i], 1, 0, 0, 1, ""));
			CU_ASSERT(packed_case(&cs[i], 1, 1, 0, 0, ""));
		}
	}
#ifdef _OPENMP
	set_threads(nt);
#endif
	/* declined before anything is written: no context, a training step, a
	 * small product */
	static float a[16 * 64], b[64 * 1024], c[16 * 1024];
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	CU_ASSERT_EQUAL(taprt_sgemm_fixed_b(NULL, b, false, false, 16, 1024, 64, a, 64, b, 1024,
	    false, c, 1024, NULL, NULL, NULL), 0);
	cx.step = 1;
	CU_ASSERT_EQUAL(taprt_sgemm_fixed_b(&cx, b, false, false, 16, 1024, 64, a, 64, b, 1024,
	    false, c, 1024, NULL, NULL, NULL), 0);
	cx.step = 0;
	CU_ASSERT_EQUAL(taprt_sgemm_fixed_b(&cx, b, false, false, 8, 1024, 64, a, 64, b, 1024,
	    false, c, 1024, NULL, NULL, NULL), 0);
	CU_ASSERT_PTR_NULL(cx.packs);
	/* below AVX2, declined */
	taprt_isa_limit(TAPRT_ISA_BASE);
	CU_ASSERT_EQUAL(taprt_sgemm_fixed_b(&cx, b, false, false, 16, 1024, 64, a, 64, b, 1024,
	    false, c, 1024, NULL, NULL, NULL), 0);
	taprt_isa_limit(TAPRT_ISA_AVX512);
	CU_ASSERT_EQUAL(taprt_isa(), saved);
	taprt_packs_free(&cx);
}

/* One-row and one-column products (the library's gemv), every transpose,
 * with alpha and beta: a classifier's [1,K] @ W^T and its transpose. */
static void
test_gemm_vector(void)
{
	enum { K = 37, L = 29 };
	float a[K], w[L * K], wt[K * L], c[L], y[L], want[L];
	seq(a, K, 3);
	seq(w, L * K, 5);
	seq(c, L, 7);
	for (int j = 0; j < L; j++)
		for (int k = 0; k < K; k++)
			wt[k * L + j] = w[j * K + k];
	for (int j = 0; j < L; j++) {
		double s = 0;
		for (int k = 0; k < K; k++)
			s += (double)a[k] * w[j * K + k];
		want[j] = (float)(0.5 * s + 2 * c[j]);
	}
	for (int col = 0; col < 2; col++)       /* y as [1,L], or as [L,1] */
		for (int tr = 0; tr < 4; tr++) {
			int ta = tr & 1, tb = tr >> 1;
			taprt_tensor tx, tw, tc, ty;
			if (!col) {     /* y[1,L] = a[1,K] @ W^T */
				tx = rt_tensor(TAPRT_F32, a, 2, ta ? DIMS(K, 1) : DIMS(1, K));
				tw = tb ? rt_tensor(TAPRT_F32, w, 2, DIMS(L, K)) :
				    rt_tensor(TAPRT_F32, wt, 2, DIMS(K, L));
				tc = rt_tensor(TAPRT_F32, c, 2, DIMS(1, L));
				ty = rt_tensor(TAPRT_F32, y, 2, DIMS(1, L));
			} else {        /* y[L,1] = W @ a[K,1] */
				tx = ta ? rt_tensor(TAPRT_F32, wt, 2, DIMS(K, L)) :
				    rt_tensor(TAPRT_F32, w, 2, DIMS(L, K));
				tw = rt_tensor(TAPRT_F32, a, 2, tb ? DIMS(1, K) : DIMS(K, 1));
				tc = rt_tensor(TAPRT_F32, c, 2, DIMS(L, 1));
				ty = rt_tensor(TAPRT_F32, y, 2, DIMS(L, 1));
			}
			taprt_tensor *in[] = {&tx, &tw, &tc}, *out[] = {&ty};
			taprt_attr at_[] = {A_FLOAT("alpha", 0.5f), A_FLOAT("beta", 2.0f),
				A_INT("transA", ta), A_INT("transB", tb)};
			taprt_node n = rt_node(in, 3, out, 1, at_, 4);
			memset(y, 0, sizeof y);
			taprt_op_Gemm(NULL, &n);
			if (!close_f(y, want, L))
				printf("  %s, transA %d transB %d\n", col ? "column" : "row", ta, tb);
			CU_ASSERT(close_f(y, want, L));
		}
}

/* Defaults (alpha = beta = 1), and integers through the naive loop. */
static void
test_gemm_int(void)
{
	/* A' = [[1,2],[3,4]] stored transposed, B' = [[1,0],[1,-1]] stored
	 * transposed, C = [5, 6]: A'B' + C = [[8,4],[12,2]] */
	int32_t a[] = {1, 3, 2, 4}, b[] = {1, 1, 0, -1}, c[] = {5, 6}, y[4];
	taprt_tensor ta = rt_tensor(TAPRT_I32, a, 2, DIMS(2, 2));
	taprt_tensor tb = rt_tensor(TAPRT_I32, b, 2, DIMS(2, 2));
	taprt_tensor tc = rt_tensor(TAPRT_I32, c, 1, DIMS(2));
	taprt_tensor ty = rt_tensor(TAPRT_I32, y, 2, DIMS(2, 2));
	taprt_tensor *in[] = {&ta, &tb, &tc}, *out[] = {&ty};
	taprt_attr at[] = {A_INT("transA", 1), A_INT("transB", 1)};
	taprt_node n = rt_node(in, 3, out, 1, at, 2);
	taprt_op_Gemm(NULL, &n);
	CU_ASSERT(y[0] == 8 && y[1] == 4 && y[2] == 12 && y[3] == 2);

	/* f32 without attributes: plain A @ B + C */
	float af[] = {1, 2, 3, 4}, bf[] = {1, 0, 1, -1}, cf[] = {5, 6}, yf[4];
	ta = rt_tensor(TAPRT_F32, af, 2, DIMS(2, 2));
	tb = rt_tensor(TAPRT_F32, bf, 2, DIMS(2, 2));
	tc = rt_tensor(TAPRT_F32, cf, 1, DIMS(2));
	ty = rt_tensor(TAPRT_F32, yf, 2, DIMS(2, 2));
	n = rt_node(in, 3, out, 1, NULL, 0);
	taprt_op_Gemm(NULL, &n);
	CU_ASSERT(close_f(yf, (float[]){8, 4, 12, 2}, 4));
}

/* --------------------------------------------------------------- Conv */

/*
 * The oracle: a direct convolution over 3-D spatial dims (leading unit
 * dims for 1-D/2-D), pads given at the beginning; positions outside the
 * input contribute nothing.
 */
typedef struct {
	int64_t n, c, m, g;             /* batch, channels, filters, groups */
	int64_t in[3], k[3], st[3], dil[3], pb[3], out[3];
	int64_t pe[3];                  /* pads at the end (fused_check) */
} convcase;

static void
ref_conv(const convcase *p, const float *x, const float *w, const float *b,
    float *y)
{
	int64_t cg = p->c / p->g, mg = p->m / p->g;
	for (int64_t n = 0; n < p->n; n++)
	for (int64_t m = 0; m < p->m; m++)
	for (int64_t o0 = 0; o0 < p->out[0]; o0++)
	for (int64_t o1 = 0; o1 < p->out[1]; o1++)
	for (int64_t o2 = 0; o2 < p->out[2]; o2++) {
		double s = b ? b[m] : 0;
		for (int64_t c = 0; c < cg; c++)
		for (int64_t k0 = 0; k0 < p->k[0]; k0++)
		for (int64_t k1 = 0; k1 < p->k[1]; k1++)
		for (int64_t k2 = 0; k2 < p->k[2]; k2++) {
			int64_t i0 = o0 * p->st[0] - p->pb[0] + k0 * p->dil[0];
			int64_t i1 = o1 * p->st[1] - p->pb[1] + k1 * p->dil[1];
			int64_t i2 = o2 * p->st[2] - p->pb[2] + k2 * p->dil[2];
			if (i0 < 0 || i0 >= p->in[0] || i1 < 0 || i1 >= p->in[1] ||
			    i2 < 0 || i2 >= p->in[2])
				continue;
			int64_t xc = (m / mg) * cg + c;
			s += (double)x[(((n * p->c + xc) * p->in[0] + i0) * p->in[1] + i1) *
			    p->in[2] + i2] *
			    w[(((m * cg + c) * p->k[0] + k0) * p->k[1] + k1) * p->k[2] + k2];
		}
		*y++ = (float)s;
	}
}

/* Run Conv on case p with nsp spatial dims and attributes at (sorted),
 * compare with the oracle. */
static int
conv_check(const convcase *p, int nsp, const taprt_attr *at, int nat, bool bias)
{
	int64_t cg = p->c / p->g, isz = 1, osz = 1, ksz = 1;
	int64_t xd[5] = {p->n, p->c}, wd[5] = {p->m, cg}, yd[5] = {p->n, p->m};
	for (int d = 3 - nsp; d < 3; d++) {
		isz *= p->in[d];
		osz *= p->out[d];
		ksz *= p->k[d];
		xd[2 + d - (3 - nsp)] = p->in[d];
		wd[2 + d - (3 - nsp)] = p->k[d];
		yd[2 + d - (3 - nsp)] = p->out[d];
	}
	float *x = malloc(p->n * p->c * isz * sizeof *x);
	float *w = malloc(p->m * cg * ksz * sizeof *w);
	float *y = malloc(p->n * p->m * osz * sizeof *y);
	float *want = malloc(p->n * p->m * osz * sizeof *y);
	float bv[64];
	seq(x, p->n * p->c * isz, 5);
	seq(w, p->m * cg * ksz, 3);
	seq(bv, p->m, 7);
	ref_conv(p, x, w, bias ? bv : NULL, want);
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 2 + nsp, xd);
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 2 + nsp, wd);
	taprt_tensor tb = rt_tensor(TAPRT_F32, bv, 1, DIMS(p->m));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 2 + nsp, yd);
	taprt_tensor *in[] = {&tx, &tw, &tb}, *out[] = {&ty};
	taprt_node n = rt_node(in, bias ? 3 : 2, out, 1, at, nat);
	taprt_op_Conv(NULL, &n);
	int ok = close_f(y, want, p->n * p->m * osz);
	free(x);
	free(w);
	free(y);
	free(want);
	return ok;
}

/* The ONNX example: 5x5 ramp, 3x3 ones, pads 1. */
static void
test_conv_basic(void)
{
	float x[25], w[9], y[25];
	for (int i = 0; i < 25; i++)
		x[i] = (float)i;
	for (int i = 0; i < 9; i++)
		w[i] = 1;
	float want[] = {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117,
		81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 1, 5, 5));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 4, DIMS(1, 1, 3, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 5, 5));
	taprt_attr at[] = {A_INTS("kernel_shape", 3, 3), A_INTS("pads", 1, 1, 1, 1)};
	run2(taprt_op_Conv, &tx, &tw, &ty, at, 2);
	CU_ASSERT(close_f(y, want, 25));

	/* no kernel_shape attribute: taken from W; no pads */
	float want2[] = {54, 63, 72, 99, 108, 117, 144, 153, 162};
	ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 3, 3));
	run2(taprt_op_Conv, &tx, &tw, &ty, NULL, 0);
	CU_ASSERT(close_f(y, want2, 9));

	/* auto_pad SAME_LOWER, stride 2 (ONNX test_conv_with_autopad_same):
	 * pads 1 at the beginning, 1 at the end */
	float want3[] = {12, 27, 24, 63, 108, 81, 72, 117, 84};
	taprt_attr at3[] = {A_STR("auto_pad", "SAME_LOWER"),
		A_INTS("kernel_shape", 3, 3), A_INTS("strides", 2, 2)};
	run2(taprt_op_Conv, &tx, &tw, &ty, at3, 3);
	CU_ASSERT(close_f(y, want3, 9));

	/* f64: 2x2 ones over a 3x3 ramp, bias 0.5 */
	double xd[] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, wd[] = {1, 1, 1, 1}, bd[] = {0.5};
	double yd[4];
	tx = rt_tensor(TAPRT_F64, xd, 4, DIMS(1, 1, 3, 3));
	tw = rt_tensor(TAPRT_F64, wd, 4, DIMS(1, 1, 2, 2));
	taprt_tensor tb = rt_tensor(TAPRT_F64, bd, 1, DIMS(1));
	ty = rt_tensor(TAPRT_F64, yd, 4, DIMS(1, 1, 2, 2));
	taprt_tensor *in[] = {&tx, &tw, &tb}, *out[] = {&ty};
	taprt_node n = rt_node(in, 3, out, 1, NULL, 0);
	taprt_op_Conv(NULL, &n);
	CU_ASSERT(yd[0] == 8.5 && yd[1] == 12.5 && yd[2] == 20.5 && yd[3] == 24.5);
}

/* Stride, asymmetric pads, dilation, groups, bias, batch: against the
 * oracle. */
static void
test_conv_oracle(void)
{
	/* 2-D: 2 images, 4 channels in 2 groups, 6 filters, 3x2 kernel,
	 * strides 2x1, dilations 1x2, pads (1,0) begin (2,1) end on 7x6 */
	convcase p = {.n = 2, .c = 4, .m = 6, .g = 2, .in = {1, 7, 6},
		.k = {1, 3, 2}, .st = {1, 2, 1}, .dil = {1, 1, 2}, .pb = {0, 1, 0}};
	p.out[0] = 1;
	p.out[1] = (7 + 1 + 2 - 3) / 2 + 1;     /* 4 */
	p.out[2] = (6 + 0 + 1 - 3) / 1 + 1;     /* 5 */
	taprt_attr at[] = {A_INTS("dilations", 1, 2), A_INT("group", 2),
		A_INTS("kernel_shape", 3, 2), A_INTS("pads", 1, 0, 2, 1),
		A_INTS("strides", 2, 1)};
	CU_ASSERT(conv_check(&p, 2, at, 5, true));
	CU_ASSERT(conv_check(&p, 2, at, 5, false));

	/* depthwise 3x3, pads 1, stride 1 */
	convcase dw = {.n = 1, .c = 3, .m = 3, .g = 3, .in = {1, 5, 4},
		.k = {1, 3, 3}, .st = {1, 1, 1}, .dil = {1, 1, 1}, .pb = {0, 1, 1},
		.out = {1, 5, 4}};
	taprt_attr atd[] = {A_INT("group", 3), A_INTS("pads", 1, 1, 1, 1)};
	CU_ASSERT(conv_check(&dw, 2, atd, 2, true));

	/* 1x1 stride 1 without pads: the im2col-free path, with groups */
	convcase pw = {.n = 2, .c = 4, .m = 6, .g = 2, .in = {1, 3, 5},
		.k = {1, 1, 1}, .st = {1, 1, 1}, .dil = {1, 1, 1}, .out = {1, 3, 5}};
	taprt_attr atp[] = {A_INT("group", 2)};
	CU_ASSERT(conv_check(&pw, 2, atp, 1, true));

	/* 1x1 with stride 2: im2col again */
	convcase ps = pw;
	ps.st[1] = ps.st[2] = 2;
	ps.out[1] = 2;
	ps.out[2] = 3;
	taprt_attr atps[] = {A_INT("group", 2), A_INTS("strides", 2, 2)};
	CU_ASSERT(conv_check(&ps, 2, atps, 2, false));

	/* 1-D: stride 3, pads 2/1, dilation 2 on 11 */
	convcase p1 = {.n = 1, .c = 2, .m = 3, .g = 1, .in = {1, 1, 11},
		.k = {1, 1, 3}, .st = {1, 1, 3}, .dil = {1, 1, 2}, .pb = {0, 0, 2}};
	p1.out[0] = p1.out[1] = 1;
	p1.out[2] = (11 + 3 - 5) / 3 + 1;       /* 4 */
	taprt_attr at1[] = {A_INTS("dilations", 2), A_INTS("pads", 2, 1),
		A_INTS("strides", 3)};
	CU_ASSERT(conv_check(&p1, 1, at1, 3, true));

	/* 3-D: 4x5x3 input, 2x3x2 kernel, SAME_UPPER with stride 2 in dim 1:
	 * out 4x3x3, total pads (1, 2, 1) -> begin (0, 1, 0) */
	convcase p3 = {.n = 1, .c = 2, .m = 2, .g = 1, .in = {4, 5, 3},
		.k = {2, 3, 2}, .st = {1, 2, 1}, .dil = {1, 1, 1}, .pb = {0, 1, 0},
		.out = {4, 3, 3}};
	taprt_attr at3[] = {A_STR("auto_pad", "SAME_UPPER"),
		A_INTS("strides", 1, 2, 1)};
	CU_ASSERT(conv_check(&p3, 3, at3, 2, true));
	/* SAME_LOWER puts the odd pad first: begin (1, 1, 1) */
	p3.pb[0] = p3.pb[2] = 1;
	taprt_attr at3l[] = {A_STR("auto_pad", "SAME_LOWER"),
		A_INTS("strides", 1, 2, 1)};
	CU_ASSERT(conv_check(&p3, 3, at3l, 2, false));
}

/*
 * FusedConv against the oracle: y = act(conv(x, w) + b + z) with the
 * activation applied in double here.  act "" leaves it out; z adds a
 * residual shaped like y.
 */
static int
fused_check(const convcase *p, const char *act, const float *actp, int nactp, bool z)
{
	int64_t cg = p->c / p->g, isz = p->in[1] * p->in[2], osz = p->out[1] * p->out[2];
	int64_t ksz = p->k[1] * p->k[2], ny = p->n * p->m * osz;
	float *x = malloc(p->n * p->c * isz * sizeof *x), *w = malloc(p->m * cg * ksz * sizeof *w);
	float *b = malloc(p->m * sizeof *b), *zv = malloc(ny * sizeof *zv);
	float *y = malloc(ny * sizeof *y), *want = malloc(ny * sizeof *want);
	seq(x, p->n * p->c * isz, 5);
	seq(w, p->m * cg * ksz, 3);
	seq(b, p->m, 7);
	seq(zv, ny, 11);
	ref_conv(p, x, w, b, want);
	for (int64_t i = 0; i < ny; i++) {
		double v = (double)want[i] + (z ? zv[i] : 0);
		if (!strcmp(act, "Relu"))
			v = v > 0 ? v : 0;
		else if (!strcmp(act, "Clip"))
			v = v < actp[0] ? actp[0] : v > actp[1] ? actp[1] : v;
		else if (!strcmp(act, "HardSigmoid"))
			v = fmin(1, fmax(0, actp[0] * v + actp[1]));
		else if (!strcmp(act, "HardSwish"))
			v = v * fmin(1, fmax(0, v / 6 + 0.5));
		else if (!strcmp(act, "LeakyRelu"))
			v = v < 0 ? actp[0] * v : v;
		else if (!strcmp(act, "Gelu")) /* the divisor: its parameter, or sqrt 2 */
			v = v * (erf(v / (nactp ? actp[0] : sqrt(2.0))) + 1) * 0.5;
		want[i] = (float)v;
	}
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(p->n, p->c, p->in[1], p->in[2]));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 4, DIMS(p->m, cg, p->k[1], p->k[2]));
	taprt_tensor tb = rt_tensor(TAPRT_F32, b, 1, DIMS(p->m));
	taprt_tensor tz = rt_tensor(TAPRT_F32, zv, 4, DIMS(p->n, p->m, p->out[1], p->out[2]));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(p->n, p->m, p->out[1], p->out[2]));
	taprt_tensor *in[] = {&tx, &tw, &tb, z ? &tz : NULL}, *out[] = {&ty};
	int64_t pads[4] = {p->pb[1], p->pb[2], p->pe[1], p->pe[2]};
	taprt_attr at[7];
	int nat = 0;
	if (*act)
		at[nat++] = (taprt_attr)A_STR("activation", act);
	if (nactp)
		at[nat++] = (taprt_attr){.name = "activation_params", .type = TAPRT_ATTR_FLOATS,
			.n = nactp, .fs = actp};
	at[nat++] = (taprt_attr){.name = "dilations", .type = TAPRT_ATTR_INTS, .n = 2,
		.is = p->dil + 1};
	at[nat++] = (taprt_attr)A_INT("group", p->g);
	at[nat++] = (taprt_attr){.name = "kernel_shape", .type = TAPRT_ATTR_INTS, .n = 2,
		.is = p->k + 1};
	at[nat++] = (taprt_attr){.name = "pads", .type = TAPRT_ATTR_INTS, .n = 4, .is = pads};
	at[nat++] = (taprt_attr){.name = "strides", .type = TAPRT_ATTR_INTS, .n = 2,
		.is = p->st + 1};
	taprt_ctx cx;
	memset(&cx, 0, sizeof cx);
	taprt_node n = rt_node(in, z ? 4 : 3, out, 1, at, nat);
	taprt_op_FusedConv(&cx, &n);
	int ok = !cx.error[0] && close_f(y, want, ny);
	if (!ok)
		printf("  n%lld c%lld m%lld g%lld %lldx%lld k%lldx%lld s%lld d%lld pads %lld,%lld,"
		    "%lld,%lld %s%s: %s\n", (long long)p->n, (long long)p->c, (long long)p->m,
		    (long long)p->g, (long long)p->in[1], (long long)p->in[2], (long long)p->k[1],
		    (long long)p->k[2], (long long)p->st[1], (long long)p->dil[1],
		    (long long)pads[0], (long long)pads[1], (long long)pads[2], (long long)pads[3],
		    act, z ? " +z" : "", cx.error);
	free(x);
	free(w);
	free(b);
	free(zv);
	free(y);
	free(want);
	return ok;
}

/* A 2-D case: n images, c channels, m filters in g groups, h x w input,
 * kh x kw kernel, stride s, dilation d, pads t, l (begin) and bo, r (end). */
static convcase
case2d(int64_t n, int64_t c, int64_t m, int64_t g, int64_t h, int64_t w, int64_t kh,
    int64_t kw, int64_t s, int64_t d, int64_t t, int64_t l, int64_t bo, int64_t r)
{
	convcase p = {.n = n, .c = c, .m = m, .g = g, .in = {1, h, w}, .k = {1, kh, kw},
		.st = {1, s, s}, .dil = {1, d, d}, .pb = {0, t, l}, .pe = {0, bo, r}};
	p.out[0] = 1;
	p.out[1] = (h + t + bo - (kh - 1) * d - 1) / s + 1;
	p.out[2] = (w + l + r - (kw - 1) * d - 1) / s + 1;
	return p;
}

/*
 * The depthwise kernel (conv_dw.c: blocks of 16 or 8 channels, a ring of packed
 * rows, output flushed in groups of 16 pixels): channel counts around the
 * block size, planes narrower and wider than a vector and taller than a
 * flush, the unrolled 3x3/5x5/7x7 kernels and the generic one (3x5,
 * dilation, stride 3), asymmetric and over-sized pads, every activation,
 * a residual, and two images; planes large enough that a team splits
 * them by rows rather than by blocks.
 */
static void
conv_depthwise_cases(void)
{
	static const float clip[] = {-0.5f, 1.5f}, hsig[] = {0.2f, 0.5f}, leaky[] = {0.1f};
	convcase cs[] = {
		case2d(1, 16, 16, 16, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2),
		case2d(1, 17, 17, 17, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2),
		case2d(2, 40, 40, 40, 28, 28, 3, 3, 2, 1, 1, 1, 1, 1),
		case2d(1, 3, 3, 3, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 24, 24, 24, 33, 70, 3, 3, 1, 1, 1, 1, 1, 1),  /* > 1 flush */
		case2d(1, 8, 8, 8, 19, 21, 5, 5, 2, 1, 2, 2, 2, 2),
		case2d(1, 33, 33, 33, 11, 9, 7, 7, 1, 1, 3, 3, 3, 3),
		case2d(1, 5, 5, 5, 12, 13, 3, 5, 1, 1, 1, 2, 1, 2),     /* 3x5 */
		case2d(1, 18, 18, 18, 15, 16, 3, 3, 1, 2, 2, 2, 2, 2),  /* dilation 2 */
		case2d(1, 6, 6, 6, 17, 17, 3, 3, 3, 1, 0, 1, 2, 0),     /* stride 3 */
		case2d(1, 16, 16, 16, 4, 4, 3, 3, 1, 1, 3, 3, 3, 3),    /* pads > input */
		case2d(1, 20, 20, 20, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1),    /* 1x1 plane */
		case2d(1, 16, 16, 16, 9, 9, 3, 3, 2, 1, 0, 0, 0, 0),    /* no pads, s2 */
		/* planes of 2048 pixels and more: on 2 and 3 threads a band
		 * of rows of every block per thread (taprt_split_pixels) */
		case2d(2, 20, 20, 20, 64, 50, 5, 5, 1, 1, 2, 2, 2, 2),
		case2d(1, 17, 17, 17, 112, 112, 3, 3, 2, 1, 1, 1, 1, 1),
	};
	for (int i = 0; i < (int)NELEM(cs); i++) {
		CU_ASSERT(fused_check(&cs[i], "", NULL, 0, false));
		CU_ASSERT(fused_check(&cs[i], "Relu", NULL, 0, i % 2));
	}
	convcase p = case2d(1, 48, 48, 48, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2);
	CU_ASSERT(fused_check(&p, "HardSwish", NULL, 0, false));
	CU_ASSERT(fused_check(&p, "HardSwish", NULL, 0, true));
	CU_ASSERT(fused_check(&p, "HardSigmoid", hsig, 2, false));
	CU_ASSERT(fused_check(&p, "Clip", clip, 2, true));
	CU_ASSERT(fused_check(&p, "LeakyRelu", leaky, 1, false));
}

/*
 * Pointwise convolutions (conv_pw.c from 16 pixels on, the GEMM below):
 * filter counts off the 6-row tile, planes off the 64-pixel block (a short
 * block of whole vectors, then the last columns through the GEMM), channel
 * counts from 1 up, groups, two images, every activation in the tile and
 * in the last columns (GELU after the tile), and a residual; strided ones
 * (k_nn.c gathers the pixels they read first).
 * test_conv_isa_variants runs them on each variant the CPU has.
 */
static void
conv_pointwise_cases(void)
{
	static const float clip[] = {0.0f, 6.0f}, hsig[] = {1.0f / 6, 0.5f}, leaky[] = {0.01f};
	/* a GELU whose Div is by 1 (the parameter read, not sqrt 2) */
	static const float gdiv[] = {1.0f};
	convcase cs[] = {
		case2d(1, 16, 72, 1, 56, 56, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 96, 576, 1, 7, 7, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 40, 13, 1, 14, 14, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(2, 5, 7, 1, 16, 9, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 1, 1, 1, 13, 11, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 8, 12, 2, 16, 16, 1, 1, 1, 1, 0, 0, 0, 0),    /* groups */
		case2d(1, 64, 50, 1, 28, 28, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 3, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),       /* one pixel */
		/* strided: the read pixels gathered first (ResNet's shortcut,
		 * odd sizes and two images, groups at stride 3) */
		case2d(1, 64, 128, 1, 56, 56, 1, 1, 2, 1, 0, 0, 0, 0),
		case2d(2, 24, 40, 1, 15, 13, 1, 1, 2, 1, 0, 0, 0, 0),
		case2d(1, 8, 12, 2, 20, 20, 1, 1, 3, 1, 0, 0, 0, 0),
		/* on 2400 pixels: two threads split them */
		case2d(1, 16, 24, 1, 100, 96, 1, 1, 2, 1, 0, 0, 0, 0),
		/* 3150 pixels, two images, a residual: a band of pixels per
		 * thread on 2 and 3 threads (taprt_split_pixels), the tail in
		 * the last band */
		case2d(2, 24, 40, 1, 50, 63, 1, 1, 1, 1, 0, 0, 0, 0),
		/* fewer filters than channels on planes under 512 pixels
		 * (MobileNet's projections): on 2 and 3 threads a share of
		 * the channels each, the partial products summed by filters
		 * (pw_channels); 7x7's last column, channel shares of 16
		 * and 17, two images */
		case2d(1, 96, 40, 1, 14, 14, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(1, 288, 96, 1, 7, 7, 1, 1, 1, 1, 0, 0, 0, 0),
		case2d(2, 50, 7, 1, 9, 11, 1, 1, 1, 1, 0, 0, 0, 0),
	};
	for (int i = 0; i < (int)NELEM(cs); i++) {
		CU_ASSERT(fused_check(&cs[i], "", NULL, 0, false));
		CU_ASSERT(fused_check(&cs[i], "Relu", NULL, 0, i % 2));
	}
	convcase p = case2d(1, 24, 30, 1, 20, 21, 1, 1, 1, 1, 0, 0, 0, 0);
	CU_ASSERT(fused_check(&p, "HardSwish", NULL, 0, false));
	CU_ASSERT(fused_check(&p, "HardSwish", NULL, 0, true));
	CU_ASSERT(fused_check(&p, "HardSigmoid", hsig, 2, true));
	CU_ASSERT(fused_check(&p, "Clip", clip, 2, false));
	CU_ASSERT(fused_check(&p, "LeakyRelu", leaky, 1, true));
	CU_ASSERT(fused_check(&p, "Gelu", NULL, 0, true));
	CU_ASSERT(fused_check(&p, "Gelu", gdiv, 1, false));
	p = case2d(1, 96, 40, 1, 14, 14, 1, 1, 1, 1, 0, 0, 0, 0);
	CU_ASSERT(fused_check(&p, "HardSwish", NULL, 0, true));
	CU_ASSERT(fused_check(&p, "Clip", clip, 2, false));
}

static void
test_conv_depthwise(void)
{
	conv_depthwise_cases();
}

static void
test_conv_pointwise(void)
{
	conv_pointwise_cases();
}

/*
 * The direct convolution of one image's group (an RGB input's first layer)
 * against the oracle: stride 1 and 2, symmetric and asymmetric pads, bands
 * not multiples of the 16-position blocks, bands of several chunks of rows
 * (32 filters on 120 columns: 8 rows a chunk), filter counts off both
 * register tiles (8 and 6 filters), and two images (each image's
 * convolution on one thread when split).
 */
static void
conv_direct_cases(void)
{
	convcase direct[] = {
		case2d(1, 3, 16, 1, 30, 29, 3, 3, 2, 1, 1, 1, 1, 1),
		case2d(1, 3, 8, 1, 17, 23, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 4, 6, 1, 9, 40, 5, 5, 1, 1, 2, 2, 2, 2),
		case2d(1, 3, 9, 1, 21, 18, 3, 3, 2, 1, 0, 2, 2, 1),     /* asymmetric pads */
		case2d(1, 2, 5, 1, 19, 33, 5, 5, 2, 1, 2, 3, 1, 2),
		case2d(2, 3, 9, 1, 21, 18, 3, 3, 2, 1, 0, 2, 2, 1),     /* per image, serial */
		case2d(1, 3, 32, 1, 20, 120, 3, 3, 1, 1, 1, 1, 1, 1),   /* chunks of 8 rows */
		case2d(1, 3, 32, 1, 40, 241, 3, 3, 2, 1, 1, 1, 1, 1),
		case2d(2, 3, 32, 1, 20, 120, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 3, 13, 1, 18, 21, 3, 3, 1, 1, 1, 1, 1, 1),    /* 8 + 5, 6 + 6 + 1 */
	};
	for (int i = 0; i < (int)NELEM(direct); i++) {
		CU_ASSERT(fused_check(&direct[i], "", NULL, 0, false));
		CU_ASSERT(fused_check(&direct[i], "HardSwish", NULL, 0, true));
	}
}

/*
 * The same kernels split across 2 and 3 threads from the smallest work up
 * (TAPRT_PAR_MIN 1): the depthwise blocks' rows and the pointwise units
 * cut into one contiguous share per thread (a share may begin or end
 * inside a block, a row band or a chunk's tail), and the direct
 * convolution of one image's group (a band of rows each, each thread
 * padding the input rows its band reads into planes of its own).
 */
static void
test_conv_threads(void)
{
#ifdef _OPENMP
	int64_t saved = taprt_par_min;
	int nt = omp_get_max_threads();
	taprt_par_min = 1;
	for (int t = 2; t <= 3; t++) {
		set_threads(t);
		conv_depthwise_cases();
		conv_pointwise_cases();
		conv_direct_cases();
	}
	set_threads(nt);
	taprt_par_min = saved;
#endif
}

/*
 * taprt_share (share.c), which the depthwise kernel's team shares its rows
 * with: on 1-3 threads, runs of 1-4 units, stealing when a share is done,
 * every unit handed out exactly once (counted); and a steal made certain -- thread 1 waits until thread 0 has
 * run its own share and stolen the back half of thread 1's -- then
 * nothing left to steal at the end.  A cursor without a share runs its
 * static range alone.
 */
static void
share_count(int nt, int64_t n, int *count)
{
	int64_t bound[4];
	taprt_share sh;
	for (int t = 0; t <= nt; t++)
		bound[t] = n * t / nt;
	CU_ASSERT_FATAL(taprt_share_init(&sh, nt, bound));
	#pragma omp parallel num_threads(nt)
	{
		int id = 0;
#ifdef _OPENMP
		id = omp_get_thread_num();
#endif
		taprt_cursor c = {&sh, id, 0, 0};
		int64_t u, k;
		for (int i = 0;; i++) {
			if (!(k = taprt_share_take(&c, 1 + (id + i) % 4, &u))) {
				if (taprt_share_steal(&c, 0))
					continue;
				break;
			}
			for (int64_t j = u; j < u + k; j++)
				__atomic_add_fetch(&count[j], 1, __ATOMIC_RELAXED);
		}
	}
}

static void
test_share(void)
{
	int count[200];
#ifdef _OPENMP
	const int most = 3;
#else
	const int most = 1; /* one thread runs the region: no one to take the others' shares */
#endif
	for (int nt = 1; nt <= most; nt++)
		for (int64_t n = 0; n <= 200; n += n < 8 ? 1 : 64) {
			int once = 0;
			memset(count, 0, sizeof count);
			share_count(nt, n, count);
			for (int64_t j = 0; j < n; j++)
				once += count[j] == 1;
			CU_ASSERT_EQUAL(once, n);
		}
#ifdef _OPENMP
	int64_t bound[] = {0, 50, 100}, first = -1;
	int stolen = 0, go = 0, again = 1, team = 0;
	taprt_share sh;
	memset(count, 0, sizeof count);
	CU_ASSERT_FATAL(taprt_share_init(&sh, 2, bound));
	#pragma omp parallel num_threads(2)
	{
		int id = omp_get_thread_num();
		#pragma omp single
		team = omp_get_num_threads();
		if (team == 2) {
			taprt_cursor c = {&sh, id, 0, 0};
			int64_t u, k;
			while (id == 1 && !__atomic_load_n(&go, __ATOMIC_ACQUIRE))
				;
			while ((k = taprt_share_take(&c, 7, &u)) > 0)
				for (int64_t j = u; j < u + k; j++)
					count[j]++;
			if (id == 0) {
				stolen = taprt_share_steal(&c, 0);
				if (stolen && taprt_share_take(&c, 1, &first))
					count[first]++;
				__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
				while ((k = taprt_share_take(&c, 7, &u)) > 0)
					for (int64_t j = u; j < u + k; j++)
						count[j]++;
			}
			#pragma omp barrier
			if (id == 0)
				again = taprt_share_steal(&c, 0);
		}
	}
	CU_ASSERT_EQUAL(team, 2);
	CU_ASSERT(stolen);
	CU_ASSERT_EQUAL(first, 75);
	CU_ASSERT(!again);
	for (int j = 0; j < 100; j++)
		CU_ASSERT_EQUAL(count[j], 1);
#endif
	/* no share: the cursor's own range, in runs of at most max */
	taprt_cursor c = {NULL, 0, 3, 12};
	int64_t u, k, runs[5][2], nr = 0;
	while (nr < 5 && (k = taprt_share_take(&c, 4, &u)) > 0) {
		runs[nr][0] = u;
		runs[nr++][1] = k;
	}
	CU_ASSERT_EQUAL(nr, 3); /* [3, 7) [7, 11) [11, 12) */
	CU_ASSERT(runs[0][0] == 3 && runs[0][1] == 4 && runs[1][0] == 7 && runs[1][1] == 4 &&
	    runs[2][0] == 11 && runs[2][1] == 1);
	CU_ASSERT(!taprt_share_steal(&c, 0));
}

/*
 * Convolutions oneDNN runs (conv_dnnl.c: 3x3 stride 2, 5x5), whose
 * 8-channel-blocked result comes back with the residual and activation in
 * one pass (dst_out; below AVX2 oneDNN's reorder and the epilogue): filter
 * counts off 8 (a last block of 4), planes of more than one 512-pixel step
 * with a pixel past the last 8, two images.
 */
static void
conv_dnnl_cases(void)
{
	static const float clip[] = {-0.5f, 1.5f};
	convcase cs[] = {
		case2d(2, 16, 20, 1, 54, 54, 3, 3, 2, 1, 1, 1, 1, 1),   /* 27x27 */
		case2d(1, 32, 64, 1, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2),
		case2d(1, 24, 36, 1, 33, 31, 3, 3, 2, 1, 1, 0, 1, 1),
		/* AVX-512: Winograd's nChw16c with a last block of 8 (72
		 * filters), brgconv's NHWC with 40 (runs of 8, not 16) */
		case2d(1, 64, 72, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 16, 40, 1, 23, 25, 3, 3, 2, 1, 1, 1, 1, 1),
		/* planes of 2048 pixels and more: on two threads a band of
		 * output rows each (bands_make), an odd row count (25 + 26),
		 * Winograd; stride 2 with asymmetric pads (the bottom band's
		 * end pad 1, the top's 2), brgconv; 20 filters, a layout the
		 * bands decline (the whole primitive then); dilation 2 */
		case2d(1, 16, 24, 1, 51, 45, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 16, 24, 1, 97, 91, 5, 5, 2, 1, 2, 2, 1, 2),
		case2d(1, 16, 20, 1, 97, 91, 5, 5, 2, 1, 2, 2, 1, 2),
		case2d(1, 16, 16, 1, 50, 50, 3, 3, 1, 2, 2, 2, 2, 2),
		/* results over 512 KiB (BAND_BYTES): several bands a thread,
		 * one thread included -- Winograd, 100 rows in 3 bands on one
		 * thread and 4 on two; brgconv's NHWC at stride 2 with
		 * asymmetric pads, 75 rows likewise */
		case2d(1, 16, 32, 1, 100, 90, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 16, 64, 1, 150, 140, 3, 3, 2, 1, 1, 0, 1, 1),
	};
	for (int i = 0; i < (int)NELEM(cs); i++) {
		CU_ASSERT(fused_check(&cs[i], "", NULL, 0, false));
		CU_ASSERT(fused_check(&cs[i], "Relu", NULL, 0, true));
		CU_ASSERT(fused_check(&cs[i], "Clip", clip, 2, i % 2));
	}
}

/*
 * Every variant of the kernels written once per vector width that this
 * CPU can run (taprt_isa: AVX-512's, AVX2's, the portable code), on the
 * depthwise, pointwise, direct and oneDNN cases (the last for the AVX2
 * result transpose and the path without it), one thread and two: the CI
 * machine's best variant is not the only one users' CPUs run.
 */
static void
test_conv_isa_variants(void)
{
	int top = taprt_isa_limit(TAPRT_ISA_AVX512);
#ifdef _OPENMP
	int64_t saved = taprt_par_min;
	int nt = omp_get_max_threads();
#endif
	for (int l = top; l >= TAPRT_ISA_BASE; l--) {
		CU_ASSERT_EQUAL(taprt_isa_limit(l), l);
		for (int t = 1; t <= 2; t++) {
#ifdef _OPENMP
			set_threads(t);
			taprt_par_min = t == 1 ? saved : 1;
#endif
			conv_depthwise_cases();
			conv_pointwise_cases();
			conv_direct_cases();
			conv_dnnl_cases();
		}
	}
#ifdef _OPENMP
	set_threads(nt);
	taprt_par_min = saved;
#endif
	taprt_isa_limit(TAPRT_ISA_AVX512);
}

/*
 * Winograd F(4x4, 3x3) (conv_wino.c, AVX2 CPUs: an AVX-512 one runs it
 * capped to AVX2) against the naive convolution: one and several bands of
 * tile rows, partial tiles at the right and bottom edges, a row of more
 * than 8 tiles, asymmetric and no pads, channel and filter counts off 8,
 * two images, bias, residual and activations, one and two threads (with
 * two, both ways of splitting: a band per thread, and the team on one
 * band, channels then filters shared out), at the tolerance of every
 * other kernel (close_f; on Lavin's points the 64-channel case was past
 * it); and a direct call that must not decline, so the cases above are
 * known to run it.
 */
static void
test_conv_winograd(void)
{
	int saved = taprt_isa();
	if (taprt_isa_limit(TAPRT_ISA_AVX2) != TAPRT_ISA_AVX2) {
		taprt_isa_limit(TAPRT_ISA_AVX512);
		return;                 /* no AVX2: nothing runs it */
	}
	convcase cs[] = {
		case2d(1, 16, 16, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(1, 64, 64, 1, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1),   /* two bands */
		case2d(2, 17, 24, 1, 30, 27, 3, 3, 1, 1, 0, 2, 1, 0),   /* asymmetric pads */
		case2d(1, 16, 20, 1, 26, 40, 3, 3, 1, 1, 0, 0, 0, 0),   /* no pads, 10 tiles a row */
		case2d(1, 24, 16, 1, 33, 23, 3, 3, 1, 1, 1, 1, 1, 1),
		/* a team on one band: channel and filter shares off 8 */
		case2d(1, 33, 40, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1),
		case2d(2, 32, 32, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1),  /* a band per image */
	};
#ifdef _OPENMP
	int nt = omp_get_max_threads();
#endif
	for (int t = 1; t <= 2; t++) {
#ifdef _OPENMP
		set_threads(t);
#endif
		for (int i = 0; i < (int)NELEM(cs); i++) {
			CU_ASSERT(fused_check(&cs[i], "", NULL, 0, false));
			CU_ASSERT(fused_check(&cs[i], "Relu", NULL, 0, true));
			CU_ASSERT(fused_check(&cs[i], "HardSwish", NULL, 0, i % 2));
		}
	}
#ifdef _OPENMP
	set_threads(nt);
#endif
	/* the kernel itself takes the first case */
	convcase p = cs[0];
	int64_t nx = 16 * 28 * 28, nw = 16 * 16 * 9;
	float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc(16 * sizeof *b);
	float *y = malloc(nx * sizeof *y), *want = malloc(nx * sizeof *want);
	seq(x, nx, 5);
	seq(w, nw, 3);
	seq(b, 16, 7);
	ref_conv(&p, x, w, b, want);
	taprt_node n = rt_node(NULL, 0, NULL, 0, NULL, 0);
	taprt_conv2d c2 = {1, 16, 28, 28, 16, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1};
	taprt_act none = {.kind = TAPRT_ACT_NONE};
	CU_ASSERT_EQUAL(taprt_conv_wino_f32(NULL, &n, x, w, b, NULL, y, &c2, &none), 1);
	CU_ASSERT(close_f(y, want, nx));
	free(x);
	free(w);
	free(b);
	free(y);
	free(want);
	taprt_isa_limit(TAPRT_ISA_AVX512);
	CU_ASSERT_EQUAL(taprt_isa(), saved);
}

/*
 * Three calls of one 16 -> 16 3x3 Conv node on an hw x hw image, the
 * weights rewritten in place before each (at the same address), on
 * `threads` threads; fixed is the node's taprt_node.fixed, and with step
 * each call is a training step (cx->step = 1, 2: the optimizer changed
 * kept weights).  Every call must match the naive convolution with the
 * weights it was given.
 */
static void
conv_weight_calls(int64_t hw, unsigned fixed, bool step, int threads)
{
	convcase p = case2d(1, 16, 16, 1, hw, hw, 3, 3, 1, 1, 1, 1, 1, 1);
	int64_t nx = 16 * hw * hw, nw = 16 * 16 * 9;
	float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = calloc(16, sizeof *b);
	float *y = malloc(nx * sizeof *y), *want = malloc(nx * sizeof *want);
	seq(x, nx, 5);
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 16, hw, hw));
	taprt_tensor tw = rt_tensor(TAPRT_F32, w, 4, DIMS(16, 16, 3, 3));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 16, hw, hw));
	taprt_tensor *in[] = {&tx, &tw}, *out[] = {&ty};
	taprt_attr at[] = {A_INTS("kernel_shape", 3, 3), A_INTS("pads", 1, 1, 1, 1)};
	taprt_node n = rt_node(in, 2, out, 1, at, 2);
	n.fixed = fixed;
#ifdef _OPENMP
	int nt = omp_get_max_threads();
	set_threads(threads);
#else
	(void)threads;
#endif
	for (int call = 0; call < 3; call++) {
		seq(w, nw, 3 + 2 * call);
		ref_conv(&p, x, w, b, want);
		taprt_ctx cx;
		memset(&cx, 0, sizeof cx);
		cx.step = step ? call : 0;
		taprt_op_Conv(&cx, &n);
		CU_ASSERT(!cx.error[0] && close_f(y, want, nx));
	}
#ifdef _OPENMP
	set_threads(nt);
#endif
	free(x);
	free(w);
	free(b);
	free(y);
	free(want);
}

/*
 * A W the graph computes changes between calls of one node (a Loop body, a
 * pipeline's micro-batches), at the same address: each call must use its
 * own values.  The shape is one oneDNN takes (conv_dnnl.c), whose kept,
 * reordered weights are only for W a weight or constant (taprt_node.fixed).
 */
static void
test_conv_computed_weights(void)
{
	conv_weight_calls(12, 1, false, 1); /* fixed: x alone, w is computed */
}

/*
 * A training program's kept oneDNN weights (cx->step > 0: the optimizer
 * changed them in place since the last call) on planes split into bands
 * (two threads, or one on a large result), each band with weights of its own where its Winograd layout
 * differs from the node's: every call must use the new values.
 */
static void
test_conv_bands_step(void)
{
	conv_weight_calls(64, ~0u, true, 2);
	/* results over BAND_BYTES: two bands on one thread, two a thread
	 * on two */
	conv_weight_calls(128, ~0u, true, 1);
	conv_weight_calls(150, ~0u, true, 2);
}

/* -------------------------------------------------------------- pools */

/* Run a pool with one input and one or two outputs. */
static void
pool(void (*op)(taprt_ctx *, const taprt_node *), taprt_tensor *x,
    taprt_tensor *y, taprt_tensor *ind, const taprt_attr *at, int nat)
{
	taprt_tensor *in[] = {x}, *out[] = {y, ind};
	taprt_node n = rt_node(in, 1, out, ind ? 2 : 1, at, nat);
	op(NULL, &n);
}

static void
test_maxpool(void)
{
	/* two planes of 4x4 ramps (1..16, 101..116); 3x3 stride 2 ceil_mode:
	 * the second window overhangs the end */
	float x[32], y[8];
	int64_t ind[8];
	for (int i = 0; i < 16; i++) {
		x[i] = (float)(i + 1);
		x[16 + i] = (float)(i + 101);
	}
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 2, 4, 4));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 2, 2, 2));
	taprt_tensor ti = rt_tensor(TAPRT_I64, ind, 4, DIMS(1, 2, 2, 2));
	taprt_attr at[] = {A_INT("ceil_mode", 1), A_INTS("kernel_shape", 3, 3),
		A_INTS("strides", 2, 2)};
	pool(taprt_op_MaxPool, &tx, &ty, &ti, at, 3);
	CU_ASSERT(close_f(y, (float[]){11, 12, 15, 16, 111, 112, 115, 116}, 8));
	int64_t wanti[] = {10, 11, 14, 15, 26, 27, 30, 31};
	CU_ASSERT(memcmp(ind, wanti, sizeof ind) == 0);

	/* without Indices; dilations 2 (ONNX test_maxpool_2d_dilations) */
	ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 2, 2));
	tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 1, 4, 4));
	taprt_attr atd[] = {A_INTS("dilations", 2, 2), A_INTS("kernel_shape", 2, 2)};
	pool(taprt_op_MaxPool, &tx, &ty, NULL, atd, 2);
	CU_ASSERT(close_f(y, (float[]){11, 12, 15, 16}, 4));

	/* storage_order 1: column-major indices (ONNX
	 * test_maxpool_with_argmax_2d_precomputed_strides) */
	float x5[25], y5[4];
	for (int i = 0; i < 25; i++)
		x5[i] = (float)(i + 1);
	tx = rt_tensor(TAPRT_F32, x5, 4, DIMS(1, 1, 5, 5));
	ty = rt_tensor(TAPRT_F32, y5, 4, DIMS(1, 1, 2, 2));
	ti = rt_tensor(TAPRT_I64, ind, 4, DIMS(1, 1, 2, 2));
	taprt_attr ats[] = {A_INTS("kernel_shape", 2, 2), A_INT("storage_order", 1),
		A_INTS("strides", 2, 2)};
	pool(taprt_op_MaxPool, &tx, &ty, &ti, ats, 3);
	CU_ASSERT(close_f(y5, (float[]){7, 9, 17, 19}, 4));
	CU_ASSERT(ind[0] == 6 && ind[1] == 16 && ind[2] == 8 && ind[3] == 18);

	/* pads 2 with a 5x5 kernel: the maximum ignores the pads */
	float y25[25], want25[25];
	int64_t ind25[25];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++) {
			int r = i + 2 > 4 ? 4 : i + 2, c = j + 2 > 4 ? 4 : j + 2;
			want25[i * 5 + j] = (float)(r * 5 + c + 1);
		}
	ty = rt_tensor(TAPRT_F32, y25, 4, DIMS(1, 1, 5, 5));
	ti = rt_tensor(TAPRT_I64, ind25, 4, DIMS(1, 1, 5, 5));
	taprt_attr atp[] = {A_INTS("kernel_shape", 5, 5), A_INTS("pads", 2, 2, 2, 2)};
	pool(taprt_op_MaxPool, &tx, &ty, &ti, atp, 2);
	CU_ASSERT(close_f(y25, want25, 25));
	CU_ASSERT(ind25[0] == 12 && ind25[24] == 24);

	/* u8, 1-D, SAME_UPPER: windows [3,9] [9,2] [2,7] [7] */
	uint8_t xu[] = {3, 9, 2, 7}, yu[4];
	tx = rt_tensor(TAPRT_U8, xu, 3, DIMS(1, 1, 4));
	ty = rt_tensor(TAPRT_U8, yu, 3, DIMS(1, 1, 4));
	taprt_attr atu[] = {A_STR("auto_pad", "SAME_UPPER"), A_INTS("kernel_shape", 2)};
	pool(taprt_op_MaxPool, &tx, &ty, NULL, atu, 2);
	CU_ASSERT(yu[0] == 9 && yu[1] == 9 && yu[2] == 7 && yu[3] == 7);

	/* 3-D: 2x2x2 kernel over a 2x2x2 ramp: the last element */
	float x3[8] = {1, 8, 3, 4, 5, 6, 7, 2}, y3[1];
	tx = rt_tensor(TAPRT_F32, x3, 5, DIMS(1, 1, 2, 2, 2));
	ty = rt_tensor(TAPRT_F32, y3, 5, DIMS(1, 1, 1, 1, 1));
	ti = rt_tensor(TAPRT_I64, ind, 5, DIMS(1, 1, 1, 1, 1));
	taprt_attr at3[] = {A_INTS("kernel_shape", 2, 2, 2)};
	pool(taprt_op_MaxPool, &tx, &ty, &ti, at3, 1);
	CU_ASSERT(y3[0] == 8 && ind[0] == 1);
}

/*
 * The padded f32 MaxPool (no Indices, every window reaching the input:
 * k_nn.c's row-then-columns path) against windows maximized here one tap
 * at a time: ResNet's 3x3/2 pad 1, odd sizes, stride 1 and 3, asymmetric
 * pads, rows wide enough to take several column chunks (stride 1, 2 and
 * a 256-wide window at stride 5), 7 tap rows with NaNs among the inputs
 * (never kept: the reference's x > m), on 1, 2 and 3 threads.
 */
static void
maxpool_padded_cases(int t)
{
	static const struct { int64_t C, H, W, KH, KW, SH, SW, pt, pl, pb, pr; } cs[] = {
		{2, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1},
		{3, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1},
		{2, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1},
		{2, 10, 17, 5, 4, 3, 3, 2, 0, 1, 3},
		{1, 3, 4500, 3, 3, 1, 1, 1, 1, 1, 1},
		{1, 2, 5001, 2, 3, 1, 2, 0, 1, 1, 1},
		{1, 4, 700, 1, 256, 1, 5, 0, 255, 0, 0},
		/* 7 tap rows (two of three and one), NaNs in the input */
		{2, 31, 29, 7, 3, 2, 2, 3, 1, 3, 1},
	};
	for (int i = 0; i < (int)NELEM(cs); i++) {
		int64_t C = cs[i].C, H = cs[i].H, W = cs[i].W, KH = cs[i].KH, KW = cs[i].KW;
		int64_t SH = cs[i].SH, SW = cs[i].SW, PT = cs[i].pt, PL = cs[i].pl;
		int64_t OH = (H + PT + cs[i].pb - KH) / SH + 1;
		int64_t OW = (W + PL + cs[i].pr - KW) / SW + 1;
		float *x = malloc(sizeof *x * C * H * W), *y = malloc(sizeof *y * C * OH * OW);
		float *want = malloc(sizeof *want * C * OH * OW);
		for (int64_t j = 0; j < C * H * W; j++)
			x[j] = KH == 7 && j % 37 == 0 ? NAN : (float)((j * 7919) % 1009 - 500);
		for (int64_t c = 0; c < C; c++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					float m = -INFINITY;
					for (int64_t kh = 0; kh < KH; kh++)
						for (int64_t kw = 0; kw < KW; kw++) {
							int64_t ih = oh * SH - PT + kh, iw = ow * SW - PL + kw;
							if (ih >= 0 && ih < H && iw >= 0 && iw < W &&
							    x[(c * H + ih) * W + iw] > m)
								m = x[(c * H + ih) * W + iw];
						}
					want[(c * OH + oh) * OW + ow] = m;
				}
		taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, C, H, W));
		taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, C, OH, OW));
		taprt_attr at[] = {A_INTS("kernel_shape", KH, KW),
			A_INTS("pads", PT, PL, cs[i].pb, cs[i].pr), A_INTS("strides", SH, SW)};
		pool(taprt_op_MaxPool, &tx, &ty, NULL, at, 3);
		if (memcmp(y, want, sizeof *y * C * OH * OW) != 0) {
			printf("\n  case %d, %d threads differs\n", i, t);
			CU_FAIL("padded MaxPool");
		}
		free(x);
		free(y);
		free(want);
	}
}

static void
test_maxpool_padded(void)
{
	on_threads(3, maxpool_padded_cases);
}

static void
test_avgpool(void)
{
	/* 4x4 ramp, 3x3 stride 2 ceil_mode (ONNX test_averagepool_2d_ceil):
	 * overhanging windows average only the real elements */
	float x[16], y[9];
	for (int i = 0; i < 16; i++)
		x[i] = (float)(i + 1);
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 1, 4, 4));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 2, 2));
	taprt_attr at[] = {A_INT("ceil_mode", 1), A_INTS("kernel_shape", 3, 3),
		A_INTS("strides", 2, 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, at, 3);
	CU_ASSERT(close_f(y, (float[]){6, 7.5f, 12, 13.5f}, 4));
	/* count_include_pad changes nothing without pads */
	taprt_attr atc[] = {A_INT("ceil_mode", 1), A_INT("count_include_pad", 1),
		A_INTS("kernel_shape", 3, 3), A_INTS("strides", 2, 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, atc, 4);
	CU_ASSERT(close_f(y, (float[]){6, 7.5f, 12, 13.5f}, 4));

	/* 3x3 ramp 1..9, 3x3 kernel, pads 1: corner 1+2+4+5, edge 1..6 */
	tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 1, 3, 3));
	ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 1, 3, 3));
	taprt_attr at0[] = {A_INTS("kernel_shape", 3, 3), A_INTS("pads", 1, 1, 1, 1)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, at0, 2);
	CU_ASSERT(close_f(y, (float[]){12 / 4.f, 21 / 6.f, 16 / 4.f, 27 / 6.f, 5,
	    33 / 6.f, 24 / 4.f, 39 / 6.f, 28 / 4.f}, 9));
	taprt_attr at1[] = {A_INT("count_include_pad", 1), A_INTS("kernel_shape", 3, 3),
		A_INTS("pads", 1, 1, 1, 1)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, at1, 3);
	CU_ASSERT(close_f(y, (float[]){12 / 9.f, 21 / 9.f, 16 / 9.f, 27 / 9.f, 5,
	    33 / 9.f, 24 / 9.f, 39 / 9.f, 28 / 9.f}, 9));

	/* count_include_pad with ceil_mode: 1-D 1..5, kernel 3 stride 2, pads
	 * 1/0, out 3 (ceil): windows [-1,1] [1,3] [3,5]; the last overhangs
	 * the padded extent [-1,5) and counts 2 */
	ty = rt_tensor(TAPRT_F32, y, 3, DIMS(1, 1, 3));
	tx = rt_tensor(TAPRT_F32, x, 3, DIMS(1, 1, 5));
	taprt_attr atx[] = {A_INT("ceil_mode", 1), A_INT("count_include_pad", 1),
		A_INTS("kernel_shape", 3), A_INTS("pads", 1, 0), A_INTS("strides", 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, atx, 5);
	CU_ASSERT(close_f(y, (float[]){3 / 3.f, 9 / 3.f, 9 / 2.f}, 3));

	/* 1-D SAME_UPPER / SAME_LOWER, kernel 2: the pad goes last / first */
	ty = rt_tensor(TAPRT_F32, y, 3, DIMS(1, 1, 5));
	taprt_attr atu[] = {A_STR("auto_pad", "SAME_UPPER"), A_INTS("kernel_shape", 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, atu, 2);
	CU_ASSERT(close_f(y, (float[]){1.5f, 2.5f, 3.5f, 4.5f, 5}, 5));
	taprt_attr atl[] = {A_STR("auto_pad", "SAME_LOWER"), A_INTS("kernel_shape", 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, atl, 2);
	CU_ASSERT(close_f(y, (float[]){1, 1.5f, 2.5f, 3.5f, 4.5f}, 5));

	/* f64, 3-D, stride 2 */
	double xd[8] = {1, 2, 3, 4, 5, 6, 7, 8}, yd[1];
	tx = rt_tensor(TAPRT_F64, xd, 5, DIMS(1, 1, 2, 2, 2));
	ty = rt_tensor(TAPRT_F64, yd, 5, DIMS(1, 1, 1, 1, 1));
	taprt_attr at3[] = {A_INTS("kernel_shape", 2, 2, 2), A_INTS("strides", 2, 2, 2)};
	pool(taprt_op_AveragePool, &tx, &ty, NULL, at3, 2);
	CU_ASSERT(yd[0] == 4.5);
}

static void
test_global_pools(void)
{
	float x[] = {1, 2, 3, 6, -1, -2, -8, -3}, y[2];
	taprt_tensor tx = rt_tensor(TAPRT_F32, x, 4, DIMS(1, 2, 2, 2));
	taprt_tensor ty = rt_tensor(TAPRT_F32, y, 4, DIMS(1, 2, 1, 1));
	pool(taprt_op_GlobalAveragePool, &tx, &ty, NULL, NULL, 0);
	CU_ASSERT(close_f(y, (float[]){3, -3.5f}, 2));
	pool(taprt_op_GlobalMaxPool, &tx, &ty, NULL, NULL, 0);
	CU_ASSERT(close_f(y, (float[]){6, -1}, 2));

	double xd[] = {1, 2, 3, 4, 5, 6}, yd[2];
	tx = rt_tensor(TAPRT_F64, xd, 3, DIMS(2, 1, 3));
	ty = rt_tensor(TAPRT_F64, yd, 3, DIMS(2, 1, 1));
	pool(taprt_op_GlobalAveragePool, &tx, &ty, NULL, NULL, 0);
	CU_ASSERT(yd[0] == 2 && yd[1] == 5);
	pool(taprt_op_GlobalMaxPool, &tx, &ty, NULL, NULL, 0);
	CU_ASSERT(yd[0] == 3 && yd[1] == 6);
}

/* ------------------------------------------------------------- Resize */

/* ONNX's linear interpolation along one axis, half_pixel coordinates,
 * indices clamped to the edge: the taps of output j of an axis in -> out. */
static void
lin_taps(int64_t j, int64_t in, int64_t out, int64_t *i0, int64_t *i1, double *f)
{
	double x = (j + 0.5) * (double)in / (double)out - 0.5, fl = floor(x);
	*f = x - fl;
	*i0 = fl < 0 ? 0 : fl > in - 1 ? in - 1 : (int64_t)fl;
	*i1 = fl + 1 < 0 ? 0 : fl + 1 > in - 1 ? in - 1 : (int64_t)fl + 1;
}

/*
 * Linear Resize (k_image.c's separable passes) against bilinear
 * interpolation computed here in double, on one and two threads: an
 * exact 2x (its fast path), other scales growing and shrinking, a rank-3
 * tensor, a small one.
 */
static void
resize_cases(int t)
{
	static const struct { int r; int64_t in[4], out[4]; } cs[] = {
		{4, {1, 2, 50, 46}, {1, 2, 100, 92}},
		{4, {1, 3, 40, 60}, {1, 3, 64, 90}},
		{4, {1, 2, 120, 90}, {1, 2, 61, 70}},
		{3, {2, 80, 60}, {2, 160, 120}},
		{4, {2, 3, 9, 7}, {2, 3, 18, 13}},
	};
	for (int i = 0; i < (int)NELEM(cs); i++) {
		int r = cs[i].r;
		int64_t planes = 1, H = cs[i].in[r - 2], W = cs[i].in[r - 1];
		int64_t OH = cs[i].out[r - 2], OW = cs[i].out[r - 1];
		for (int d = 0; d < r - 2; d++)
			planes *= cs[i].in[d];
		float *x = malloc(sizeof *x * planes * H * W), *y = malloc(sizeof *y * planes * OH * OW);
		float *want = malloc(sizeof *want * planes * OH * OW);
		for (int64_t j = 0; j < planes * H * W; j++)
			x[j] = (float)((j * 7919) % 1009 - 500) / 64;
		for (int64_t p = 0; p < planes; p++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					int64_t h0, h1, w0, w1;
					double fh, fw;
					lin_taps(oh, H, OH, &h0, &h1, &fh);
					lin_taps(ow, W, OW, &w0, &w1, &fw);
					const float *xp = x + p * H * W;
					double top = (1 - fw) * xp[h0 * W + w0] + fw * xp[h0 * W + w1];
					double bot = (1 - fw) * xp[h1 * W + w0] + fw * xp[h1 * W + w1];
					want[(p * OH + oh) * OW + ow] = (float)((1 - fh) * top + fh * bot);
				}
		int64_t sz[4];
		for (int d = 0; d < r; d++)
			sz[d] = cs[i].out[d];
		taprt_tensor tx = rt_tensor(TAPRT_F32, x, r, cs[i].in);
		taprt_tensor ts = rt_tensor(TAPRT_I64, sz, 1, DIMS(r));
		taprt_tensor ty = rt_tensor(TAPRT_F32, y, r, cs[i].out);
		taprt_tensor *in[] = {&tx, NULL, NULL, &ts}, *out[] = {&ty};
		taprt_attr at[] = {A_STR("mode", "linear")};
		taprt_node n = rt_node(in, 4, out, 1, at, 1);
		taprt_ctx cx;
		memset(&cx, 0, sizeof cx);
		taprt_op_Resize(&cx, &n);
		CU_ASSERT(!cx.error[0]);
		bool ok = close_f(y, want, planes * OH * OW);
		CU_ASSERT(ok);
		if (!ok)
			printf("  case %d, %d threads\n", i, t);
		free(x);
		free(y);
		free(want);
	}
}

static void
test_resize_threads(void)
{
	on_threads(2, resize_cases);
}

void
suite_rt_nn(CU_pSuite s)
{
	ADD(s, test_matmul_2d);
	ADD(s, test_matmul_vectors);
	ADD(s, test_matmul_broadcast);
	ADD(s, test_matmul_folded);
	ADD(s, test_matmul_types);
	ADD(s, test_gemm);
	ADD(s, test_gemm_loads_blas);
	ADD(s, test_gemm_int);
	ADD(s, test_gemm_vector);
	ADD(s, test_matmul_packed);
	ADD(s, test_conv_basic);
	ADD(s, test_conv_oracle);
	ADD(s, test_conv_depthwise);
	ADD(s, test_conv_pointwise);
	ADD(s, test_conv_threads);
	ADD(s, test_share);
	ADD(s, test_conv_bands_step);
	ADD(s, test_conv_isa_variants);
	ADD(s, test_conv_winograd);
	ADD(s, test_conv_computed_weights);
	ADD(s, test_maxpool);
	ADD(s, test_maxpool_padded);
	ADD(s, test_avgpool);
	ADD(s, test_global_pools);
	ADD(s, test_resize_threads);
}
