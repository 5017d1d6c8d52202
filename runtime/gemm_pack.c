/*
 * gemm_pack.c - f32 products against a constant right-hand side packed
 * once (MatMul, FusedMatMul and Gemm whose B is a weight), on AVX2 CPUs:
 * c = act(op(a) @ op(b) [+ c] + bias + z).
 *
 * Needs: an x86-64 CPU with AVX2+FMA and no AVX-512 (taprt_isa), GCC's
 * vector extensions, the thread's scratch buffer and the epilogue
 * (k_elementwise.c); elsewhere taprt_sgemm_fixed_b declines and the caller
 * runs taprt_sgemm and its epilogue.
 *
 * Why: a GEMM library packs B into panels on every call (for GPT-2's
 * 768x3072 MLP weight 9 MiB read and written per call), and onnxruntime's
 * MLAS packs a constant B once, at session start (MlasGemmPackB); on the
 * AVX2 machine the libraries run these products at 67-77 GFLOP/s of the
 * core's ~90 (docs/runtime.md, "Products against a weight").  Here B is
 * packed on a node's first run into panels of NR = 16 columns, each K x 16
 * contiguous (the last panel zero-filled), and kept in the rank's context
 * (cx->packs, keyed by the node and B's address, freed with the context by
 * taprt_packs_free); a training program (cx->step > 0) changes its weights
 * every step, so it is declined.  The product is Goto's loop nest: for
 * each block of MC rows of a and each chunk of KC of K, the block is packed
 * into slivers of MR = 6 rows ([KC][6], in L2; read down a's columns when
 * it is transposed), then every panel's KC x 16 chunk (16 KiB at KC 256, in
 * L1) is run against every sliver by the register kernel: 6 x 2 vectors of
 * accumulators, per k two loads of B, six broadcasts of a, twelve fused
 * multiply-adds.  The epilogue (bias, residual, activation) runs on each
 * block of rows as soon as its last chunk is done, while the rows are
 * still in cache.
 *
 * Threads: the rank's team splits the panels (columns of c); each thread
 * packs the rows of a it needs itself (a's packing is K * M, against
 * K * M * 16 multiply-adds per panel).
 *
 * The register kernel is also taprt_gemm_6x16, for products that lay out
 * their operands as it reads them (conv_wino.c).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GP_X86 1
#endif

/* A packed B: ceil(N / NR) panels of K x NR floats. */
typedef struct taprt_packs {
	const void *key;                /* the node */
	const float *b;                 /* B's address */
	bool tb;                        /* b is [N, K] */
	int64_t K, N, ldb;
	float *p;                       /* the panels, or NULL: declined */
	struct taprt_packs *next;
} Packed;

#define NR 16
#define MR 6
#define KC 256
#define MC 144

#ifdef GP_X86

/* B's panels: panel q holds columns [16q, 16q + 16) of op(b), row k at
 * q * K * 16 + k * 16; columns past N are zero. */
static float *
pack_b(const float *b, bool tb, int64_t K, int64_t N, int64_t ldb)
{
	int64_t np = (N + NR - 1) / NR;
	float *p = aligned_alloc(64, (size_t)(np * K * NR) * sizeof *p);
	if (!p)
		return NULL;
	#pragma omp parallel for if (TAPRT_PAR(K * N)) schedule(static)
	for (int64_t q = 0; q < np; q++) {
		float *pq = p + q * K * NR;
		int64_t j0 = q * NR, w = N - j0 < NR ? N - j0 : NR;
		for (int64_t k = 0; k < K; k++) {
			float *row = pq + k * NR;
			for (int64_t j = 0; j < w; j++)
				row[j] = tb ? b[(j0 + j) * ldb + k] : b[k * ldb + j0 + j];
			for (int64_t j = w; j < NR; j++)
				row[j] = 0;
		}
	}
	return p;
}

/* The packed B of node n's b, made on first use and kept in cx (a rank's
 * context: one thread); NULL when it cannot be. */
static const Packed *
packed_get(taprt_ctx *cx, const void *key, const float *b, bool tb, int64_t K, int64_t N,
    int64_t ldb)
{
	Packed *e = cx->packs;
	while (e && (e->key != key || e->b != b || e->tb != tb || e->K != K || e->N != N ||
	    e->ldb != ldb))
		e = e->next;
	if (e)
		return e->p ? e : NULL;
	if (!(e = calloc(1, sizeof *e)))
		return NULL;
	*e = (Packed){.key = key, .b = b, .tb = tb, .K = K, .N = N, .ldb = ldb};
	e->p = pack_b(b, tb, K, N, ldb); /* NULL: out of memory, declined from now on */
	e->next = cx->packs;
	cx->packs = e;
	return e->p ? e : NULL;
}

typedef float v8 __attribute__((vector_size(32), aligned(4)));

#define GP_ATTR target("arch=x86-64-v3"), optimize("fp-contract=fast")

/*
 * The register kernel: c[mr][nr] (=|+=) a[kc][6] @ b[kc][16], mr <= 6,
 * nr <= 16; acc adds into c.  Whole tiles go straight to c; edge tiles
 * through a buffer.
 */
static inline __attribute__((always_inline, GP_ATTR)) void
kernel(int64_t kc, const float *restrict a, const float *restrict b, float *c, int64_t ldc,
    int mr, int nr, bool acc)
{
	v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
	v8 c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
	/* c's rows come from L3 or memory: ask for them while the loop runs */
	for (int i = 0; i < mr; i++) {
		__builtin_prefetch(c + i * ldc, 1);
		__builtin_prefetch(c + i * ldc + nr - 1, 1);
	}
	#pragma GCC unroll 4
	for (int64_t k = 0; k < kc; k++) {
		v8 b0 = *(const v8 *)(b + k * NR), b1 = *(const v8 *)(b + k * NR + 8);
		const float *ak = a + k * MR;
		v8 t;
		t = ak[0] - (v8){0}; c00 += t * b0; c01 += t * b1;
		t = ak[1] - (v8){0}; c10 += t * b0; c11 += t * b1;
		t = ak[2] - (v8){0}; c20 += t * b0; c21 += t * b1;
		t = ak[3] - (v8){0}; c30 += t * b0; c31 += t * b1;
		t = ak[4] - (v8){0}; c40 += t * b0; c41 += t * b1;
		t = ak[5] - (v8){0}; c50 += t * b0; c51 += t * b1;
	}
	v8 r[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
	if (mr == MR && nr == NR) {
		for (int i = 0; i < MR; i++) {
			v8 *ci = (v8 *)(c + i * ldc);
			if (acc) {
				ci[0] += r[i][0];
				ci[1] += r[i][1];
			} else {
				ci[0] = r[i][0];
				ci[1] = r[i][1];
			}
		}
		return;
	}
	float t[MR][NR];
	memcpy(t, r, sizeof t);
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
}

/* The register kernel for other products whose operands are already in its
 * layout (conv_wino.c's): c[mr][nr] = a[kc][6] @ b[kc][16]. */
__attribute__((GP_ATTR)) void
taprt_gemm_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr,
    int nr)
{
	kernel(kc, a, b, c, ldc, mr, nr, false);
}

/* Rows [0, mc) x kc of a (row i, column k at a[i * lda + k], or a[k * lda +
 * i] when ta) into slivers of MR rows: sliver s, k, r at s * kc * MR + k *
 * MR + r; rows past mc zero. */
static void
pack_a(const float *a, int64_t lda, bool ta, int64_t mc, int64_t kc, float *restrict ap)
{
	for (int64_t s = 0; s * MR < mc; s++) {
		float *as = ap + s * kc * MR;
		int64_t rows = mc - s * MR < MR ? mc - s * MR : MR;
		if (ta) {
			const float *a0 = a + s * MR;
			for (int64_t k = 0; k < kc; k++) {
				int64_t r = 0;
				for (; r < rows; r++)
					as[k * MR + r] = a0[k * lda + r];
				for (; r < MR; r++)
					as[k * MR + r] = 0;
			}
			continue;
		}
		for (int64_t r = 0; r < rows; r++) {
			const float *ar = a + (s * MR + r) * lda;
			for (int64_t k = 0; k < kc; k++)
				as[k * MR + r] = ar[k];
		}
		for (int64_t r = rows; r < MR; r++)
			for (int64_t k = 0; k < kc; k++)
				as[k * MR + r] = 0;
	}
}

/* One thread's panels [q0, q1): c's columns [16 q0, min(16 q1, N)). */
static __attribute__((GP_ATTR)) int
run_panels(const Packed *pk, int64_t M, const float *a, int64_t lda, bool ta, float *c,
    int64_t ldc, bool acc, const float *bias, const float *z, const taprt_act *act, int64_t q0,
    int64_t q1)
{
	int64_t K = pk->K, N = pk->N;
	float *ap = taprt_scratch((int64_t)MC * KC * sizeof(float));
	if (!ap)
		return -1;
	int64_t col0 = q0 * NR, col1 = q1 * NR < N ? q1 * NR : N;
	bool epi = bias || z || act->kind != TAPRT_ACT_NONE;
	for (int64_t i0 = 0; i0 < M; i0 += MC) {
		int64_t mc = M - i0 < MC ? M - i0 : MC;
		for (int64_t p0 = 0; p0 < K; p0 += KC) {
			int64_t kc = K - p0 < KC ? K - p0 : KC;
			pack_a(ta ? a + p0 * lda + i0 : a + i0 * lda + p0, lda, ta, mc, kc, ap);
			bool add = acc || p0 > 0;
			for (int64_t q = q0; q < q1; q++) {
				const float *bq = pk->p + q * K * NR + p0 * NR;
				int nr = N - q * NR < NR ? (int)(N - q * NR) : NR;
				float *cq = c + i0 * ldc + q * NR;
				/* the next panel's chunk comes from memory: its lines
				 * are asked for a share per sliver, into L2 */
				const char *bn = (const char *)(bq + K * NR);
				int64_t lines = kc * NR * 4 / 64, ns = (mc + MR - 1) / MR;
				int64_t per = (lines + ns - 1) / ns;
				for (int64_t s = 0; s * MR < mc; s++) {
					int mr = mc - s * MR < MR ? (int)(mc - s * MR) : MR;
					if (q + 1 < q1)
						for (int64_t l = s * per; l < (s + 1) * per && l < lines; l++)
							__builtin_prefetch(bn + l * 64, 0, 2);
					const float *as = ap + s * kc * MR;
					float *cs = cq + s * MR * ldc;
					if (mr == MR && nr == NR)
						kernel(kc, as, bq, cs, ldc, MR, NR, add);
					else
						kernel(kc, as, bq, cs, ldc, mr, nr, add);
				}
			}
		}
		if (epi)
			for (int64_t i = i0; i < i0 + mc; i++)
				taprt_epilogue_vec_f32(c + i * ldc + col0, col1 - col0,
				    bias ? bias + col0 : NULL, z ? z + i * ldc + col0 : NULL, act);
	}
	return 0;
}

#endif /* GP_X86 */

void
taprt_packs_free(taprt_ctx *cx)
{
	while (cx->packs) {
		Packed *e = cx->packs;
		cx->packs = e->next;
		free(e->p);
		free(e);
	}
}

/* Whether a product of this size is taken here, on this CPU, for cx. */
static bool
takes(const taprt_ctx *cx, int64_t M, int64_t N, int64_t K)
{
#ifdef GP_X86
	const char *off = getenv("TAPRT_NO_PACK");
	/* AVX2 only: on AVX-512 oneDNN's kernels are twice as wide (and this
	 * was not measured there); small products stay on the library's
	 * small-matrix kernels, a training program's weights move */
	return M >= 16 && N >= NR && K >= 16 && M * N * K >= ((int64_t)1 << 20) && cx &&
	    cx->step == 0 && !(off && *off && strcmp(off, "0") != 0) &&
	    taprt_isa() == TAPRT_ISA_AVX2;
#else
	(void)cx, (void)M, (void)N, (void)K;
	return false;
#endif
}

int
taprt_sgemm_fixed_b(taprt_ctx *cx, const void *key, bool ta, bool tb, int64_t M, int64_t N,
    int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, bool acc, float *c,
    int64_t ldc, const float *bias, const float *z, const taprt_act *act)
{
#ifdef GP_X86
	if (!takes(cx, M, N, K))
		return 0;
	const Packed *pk = packed_get(cx, key, b, tb, K, N, ldb);
	if (!pk)
		return 0;
	taprt_act none = {.kind = TAPRT_ACT_NONE};
	if (!act)
		act = &none;
	int64_t np = (N + NR - 1) / NR;
	int t = taprt_team_size();
	if (t > np)
		t = (int)np;
	int bad = 0;
	if (t > 1) {
		#pragma omp parallel for num_threads(t) schedule(static, 1) reduction(| : bad)
		for (int i = 0; i < t; i++)
			bad |= run_panels(pk, M, a, lda, ta, c, ldc, acc, bias, z, act, np * i / t,
			    np * (i + 1) / t) != 0;
	} else
		bad = run_panels(pk, M, a, lda, ta, c, ldc, acc, bias, z, act, 0, np) != 0;
	/* a thread without its scratch buffer left its columns unwritten
	 * while others wrote theirs: too late to decline */
	return bad ? -1 : 1;
#else
	(void)cx, (void)key, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)a, (void)lda;
	(void)b, (void)ldb, (void)acc, (void)c, (void)ldc, (void)bias, (void)z, (void)act;
	return 0;
#endif
}
