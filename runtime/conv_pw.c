/*
 * conv_pw.c - pointwise f32 convolution (1x1, stride 1, no pads): per image
 * and group, y[M,P] = act(W[M,C] @ x[C,P] + b + z), the product and the
 * epilogue in one pass over y.
 *
 * Needs: an x86-64 CPU with AVX2+FMA or AVX-512 and GCC's vector
 * extensions; elsewhere taprt_conv_pw_f32 declines and k_nn.c's conv_f32
 * runs the product on taprt_sgemm and the epilogue after it.
 *
 * Why not the GEMM library: NCHW activations are already the row-major
 * [C,P] right-hand side of a 1x1 convolution, and MobileNet's are thin (C
 * 16..96 channels at 3136..196 pixels).  OpenBLAS packs all of x before
 * every product (sgemm_incopy was half of the time of MobileNetV3's 1x1
 * layers) and the epilogue then reads y again; oneDNN wants NHWC and so
 * transposes both ways.  Here a register tile of MR filters x NV vectors of
 * pixels accumulates over the channels straight from x's rows (each loaded
 * vector of x feeds MR fused multiply-adds, each broadcast weight NV), and
 * bias, residual and activation are applied to the tile before it is
 * stored.  x's rows for one block of pixels stay in L1/L2 across the
 * filters.  A plane that is not a whole number of vectors (7x7 = 3 x 16 +
 * 1) leaves its last columns to the GEMM library: a vector with one pixel
 * in it would cost as much as a full one.
 *
 * Multiversioned by hand: the tile is 6 x 4 vectors of 16 with AVX-512 (24
 * of its 32 registers), 6 x 2 of 8 with AVX2 (12 of 16); the variant is
 * chosen from the CPU (taprt_isa; TAPRT_ISA=avx2 in the environment
 * chooses the AVX2 one on an AVX-512 CPU, =baseline none).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/internal.h"
#include "runtime/vact.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PW_X86 1
#endif

#ifdef PW_X86

/* One element's activation, k_elementwise.c's formulas. */
static inline float
act1(float v, const taprt_act *a)
{
	switch (a->kind) {
	case TAPRT_ACT_RELU: return v < 0 ? 0 : v;
	case TAPRT_ACT_CLIP: return v < a->a ? a->a : v > a->b ? a->b : v;
	case TAPRT_ACT_HARDSIGMOID: return TAPRT_CLAMP01(a->a * v + a->b);
	case TAPRT_ACT_HARDSWISH: return v * TAPRT_CLAMP01(v * (1.0f / 6) + 0.5f);
	case TAPRT_ACT_LEAKYRELU: return v < 0 ? a->a * v : v;
	case TAPRT_ACT_GELU: return taprt_gelu_f32(v, a->a);
	default: return v;
	}
}

/*
 * PW_IMPL(suffix, VW, MR, NV): the kernels for one instruction set
 * (PW_ATTR_suffix: its target), vectors of VW floats, tiles of MR filters x
 * NV vectors.
 *
 * pw_tile: filters w[mr][C] (rows C apart) against x[C][nv*VW] (rows ldx
 * apart) into y (rows ldy apart; z likewise), mr <= MR, nv <= NV constant
 * after inlining.
 */
#define PW_IMPL(S, VW, MR, NV)                                            \
typedef float vf_##S __attribute__((vector_size(VW * 4), aligned(4)));            \
typedef int vi_##S __attribute__((vector_size(VW * 4)));                          \
                                                                                  \
TAPRT_VACT(act_##S, vf_##S, vi_##S, PW_ATTR_##S)                                  \
                                                                                  \
static inline __attribute__((always_inline, PW_ATTR_##S)) void                        \
pw_tile_##S(const float *w, int64_t ldw, int64_t C, const float *x, int64_t ldx,  \
    float *y, int64_t ldy, const float *bias, const float *z, const taprt_act *act, \
    bool epi, int mr, int nv)                                                     \
{                                                                                 \
	vf_##S acc[MR][NV];                                                       \
	for (int i = 0; i < mr; i++)                                              \
		for (int j = 0; j < nv; j++)                                      \
			acc[i][j] = (bias ? bias[i] : 0.0f) - (vf_##S){0};        \
	for (int64_t c = 0; c < C; c++) {                                         \
		vf_##S xv[NV];                                                    \
		for (int j = 0; j < nv; j++)                                      \
			xv[j] = *(const vf_##S *)(x + c * ldx + j * VW);          \
		for (int i = 0; i < mr; i++) {                                    \
			vf_##S wv = w[i * ldw + c] - (vf_##S){0};                 \
			for (int j = 0; j < nv; j++)                              \
				acc[i][j] += wv * xv[j];                          \
		}                                                                 \
	}                                                                         \
	for (int i = 0; i < mr; i++)                                              \
		for (int j = 0; j < nv; j++) {                                    \
			vf_##S v = acc[i][j];                                     \
			if (epi) {                                                \
				if (z)                                            \
					v += *(const vf_##S *)(z + i * ldy + j * VW); \
				act_##S(&v, act);                                 \
			}                                                         \
			*(vf_##S *)(y + i * ldy + j * VW) = v;                    \
		}                                                                 \
}                                                                                 \
                                                                                  \
/* Filters [m0, m1) over pixel columns [0, nv*VW) of x; epi: z and act in     \
 * the tile. */                                                                   \
static __attribute__((PW_ATTR_##S)) void                                               \
pw_rows_##S(const float *w, int64_t ldw, int64_t C, const float *x, int64_t ldx,  \
    float *y, int64_t ldy, const float *bias, const float *z, const taprt_act *act, \
    bool epi, int64_t m0, int64_t m1, int nv)                                     \
{                                                                                 \
	for (int64_t m = m0; m < m1; m += MR) {                                   \
		int mr = m1 - m < MR ? (int)(m1 - m) : MR;                        \
		const float *wm = w + m * ldw, *bm = bias ? bias + m : NULL;      \
		const float *zm = z ? z + m * ldy : NULL;                         \
		float *ym = y + m * ldy;                                          \
		/* one inlined tile per (mr, nv): the loops unroll fully */       \
		switch (mr * 8 + nv) {                                            \
		PW_ALL(S, NV)                                                     \
		}                                                                 \
	}                                                                         \
}

/* the switch's cases: every tile shape up to MR x NV */
#define PW_T(S, MRV, NVV)                                                         \
	case MRV * 8 + NVV:                                                       \
		pw_tile_##S(wm, ldw, C, x, ldx, ym, ldy, bm, zm, act, epi, MRV, NVV); \
		break;
#define PW_NV4(S, MRV) PW_T(S, MRV, 1) PW_T(S, MRV, 2) PW_T(S, MRV, 3) PW_T(S, MRV, 4)
#define PW_NV2(S, MRV) PW_T(S, MRV, 1) PW_T(S, MRV, 2)
#define PW_ALL(S, NVM) PW_NV##NVM(S, 1) PW_NV##NVM(S, 2) PW_NV##NVM(S, 3) PW_NV##NVM(S, 4) \
	PW_NV##NVM(S, 5) PW_NV##NVM(S, 6)

/* fp-contract: a * b + c as one fused multiply-add (-std=c11 turns the
 * contraction off) */
#define PW_ATTR_z16 target("arch=x86-64-v4"), optimize("fp-contract=fast")
#define PW_ATTR_y8 target("arch=x86-64-v3"), optimize("fp-contract=fast")
PW_IMPL(z16, 16, 6, 4)
PW_IMPL(y8, 8, 6, 2)

typedef void (*pw_rows_fn)(const float *, int64_t, int64_t, const float *, int64_t, float *,
    int64_t, const float *, const float *, const taprt_act *, bool, int64_t, int64_t, int);

/* The variant for this CPU (taprt_isa): its rows function and pixels per
 * block; NULL below AVX2. */
static pw_rows_fn
pw_variant(int *nb)
{
	int isa = taprt_isa();
	if (isa >= TAPRT_ISA_AVX512) {
		*nb = 64;
		return pw_rows_z16;
	}
	if (isa >= TAPRT_ISA_AVX2) {
		*nb = 16;
		return pw_rows_y8;
	}
	return NULL;
}

#endif /* PW_X86 */

#ifdef PW_X86
/* The channel split (pw_channels) for planes of fewer pixels than this */
#define PW_CHANNELS_P 512

/* The geometry of one call, for pw_span. */
typedef struct {
	pw_rows_fn rows;
	const float *w, *x, *bias, *z;
	float *y;
	const taprt_act *act;
	int64_t C, P, vw, bv, nvec, tail;
	bool tile_epi;
	int64_t ldw;            /* w's rows apart (C, or more for a share of the channels) */
} pw_call;

/* Filters [m0, m1) over the pixel units [v, v1): vectors, unit nvec the
 * last P % vw columns. */
static void
pw_span(const pw_call *k, int64_t m0, int64_t m1, int64_t v, int64_t v1)
{
	const int64_t C = k->C, P = k->P, vw = k->vw, nvec = k->nvec, tail = k->tail;
	const float *w = k->w, *x = k->x, *bias = k->bias, *z = k->z;
	float *y = k->y;
	for (; v < v1 && v < nvec;) {
		int nv = (int)((v1 < nvec ? v1 : nvec) - v);
		nv = nv < k->bv ? nv : (int)k->bv;
		const int64_t p0 = v * vw, np = (int64_t)nv * vw;
		k->rows(w, k->ldw, C, x + p0, P, y + p0, P, bias, z ? z + p0 : NULL, k->act,
		    k->tile_epi, m0, m1, nv);
		if (!k->tile_epi)
			for (int64_t m = m0; m < m1; m++)
				taprt_epilogue_f32(y + m * P + p0, np, 0, z ? z + m * P + p0 : NULL,
				    k->act);
		v += nv;
	}
	if (v < v1) {
		/* the last P % vw columns, too few for a vector: the GEMM
		 * library's (gemv for one), then the epilogue element-wise */
		const int64_t p0 = P - tail;
		taprt_sgemm(false, false, m1 - m0, tail, C, 1.0f, w + m0 * k->ldw, k->ldw, x + p0, P, 0.0f,
		    y + m0 * P + p0, P);
		for (int64_t m = m0; m < m1; m++)
			for (int64_t j = 0; j < tail; j++) {
				float *o = y + m * P + p0 + j;
				*o = act1(*o + (bias ? bias[m] : 0) + (z ? z[m * P + p0 + j] : 0),
				    k->act);
			}
	}
}
/* Every filter of M, 48 (a chunk) at a time, over the pixel units [v0, v1). */
static void
pw_chunks(const pw_call *k, int64_t M, int64_t v0, int64_t v1)
{
	for (int64_t m0 = 0; m0 < M && v0 < v1; m0 += 48)
		pw_span(k, m0, m0 + 48 < M ? m0 + 48 : M, v0, v1);
}

/*
 * The channel split (below): thread id of T computes the partial product
 * of its share of the channels, all filters and pixels, into part[id]
 * ([M][P], mp floats apart); after a barrier each thread sums the T
 * partials of its share of the filters with the bias, residual and
 * activation into y.
 */
static void
pw_channels(const pw_call *k, int64_t M, float *part, int64_t mp, int id, int T)
{
	static const taprt_act none = {TAPRT_ACT_NONE};
	const int64_t C = k->C, P = k->P, c0 = C * id / T, c1 = C * (id + 1) / T;
	pw_call kt = *k;
	kt.w = k->w + c0;
	kt.x = k->x + c0 * P;
	kt.C = c1 - c0;
	kt.bias = kt.z = NULL;
	kt.y = part + id * mp;
	kt.act = &none;
	kt.tile_epi = true;
	pw_chunks(&kt, M, 0, k->nvec + (k->tail > 0));
	#pragma omp barrier
	for (int64_t m = M * id / T; m < M * (id + 1) / T; m++) {
		float *restrict ym = k->y + m * P;
		const float *restrict p0 = part + m * P;
		for (int64_t j = 0; j < P; j++)
			ym[j] = p0[j];
		for (int t = 1; t < T; t++) {
			const float *restrict pt = part + t * mp + m * P;
			for (int64_t j = 0; j < P; j++)
				ym[j] += pt[j];
		}
		taprt_epilogue_f32(ym, P, k->bias ? k->bias[m] : 0, k->z ? k->z + m * P : NULL,
		    k->act);
	}
}
#endif /* PW_X86 */

/*
 * One image and group: w[M][C], x[C][P], y[M][P] (z likewise).  The
 * filters are cut into chunks of at most 48 (whole tiles of 6), a chunk's
 * pixels into P / vw vectors and, when P is not a whole number of vectors,
 * a tail of the last P % vw columns, run in blocks of up to nb pixels:
 * alone chunk by chunk, a chunk's filters in L1 while x's rows stream
 * past.  A team splits by pixels where the plane is large enough
 * (taprt_split_pixels): each thread every chunk over one contiguous band
 * of the units (the tail one unit), the band the layer before it wrote
 * and the one after reads.  Smaller planes (14x14, 7x7) with fewer
 * filters than channels (MobileNet's projections) split by channels
 * (pw_channels): each thread reads only its share of x -- the share the
 * kernel before it wrote, split by channels at these sizes -- and the
 * partial products, M * P where x is C * P, are what crosses between the
 * cores.  The rest split by filters: nmc chunks made equal (64 filters are
 * 32 + 32, not 48 + 16), and each thread one contiguous share of the
 * chunk-major sequence of units (within one unit of equal: at 7x7, three
 * vectors and a tail per chunk, whole chunks left one thread a third more
 * to do).
 */
int
taprt_conv_pw_f32(const float *w, const float *x, const float *bias, const float *z, float *y,
    int64_t M, int64_t C, int64_t P, const taprt_act *act, bool may_scratch)
{
#ifdef PW_X86
	int nb = 0;
	pw_rows_fn rows = pw_variant(&nb);
	if (!rows)
		return 0;
	const int vw = nb / (nb == 64 ? 4 : 2);
	pw_call k = {rows, w, x, bias, z, y, act, C, P, vw, nb / vw, P / vw, P % vw,
		taprt_vact_ok(act), C};
	const int64_t per = k.nvec + (k.tail > 0);
	const int T = TAPRT_PAR(M * C * P / 8) ? taprt_team_size() : 1;
	if (T == 1) {
		pw_chunks(&k, M, 0, per);
		return 1;
	}
	if (taprt_split_pixels(P, T)) {
		#pragma omp parallel num_threads(T)
		{
			int id, nt = taprt_team(&id);
			pw_chunks(&k, M, per * id / nt, per * (id + 1) / nt);
		}
		return 1;
	}
	if (may_scratch && M < C && P < PW_CHANNELS_P && C >= 16 * T &&
	    !getenv("TAPRT_PW_NO_CHANNELS")) {
		const int64_t mp = (M * P + 15) / 16 * 16;
		float *part = taprt_scratch(T * mp * (int64_t)sizeof(float));
		if (!part)
			return -1;
		#pragma omp parallel num_threads(T)
		{
			int id, nt = taprt_team(&id);
			pw_channels(&k, M, part, mp, id, nt);
		}
		return 1;
	}
	const int64_t nmc = (M + 47) / 48, MC = (M + nmc - 1) / nmc, units = nmc * per;
	#pragma omp parallel num_threads(T) if (units > 1)
	{
		int id, nt = taprt_team(&id);
		int64_t u = units * id / nt, uend = units * (id + 1) / nt;
		while (u < uend) {
			const int64_t mc = u / per, m0 = mc * MC, m1 = m0 + MC < M ? m0 + MC : M;
			const int64_t v1 = uend - mc * per < per ? uend - mc * per : per;
			pw_span(&k, m0, m1, u % per, v1);
			u = mc * per + v1;
		}
	}
	return 1;
#else
	(void)may_scratch;
	return 0;
#endif
}
