/*
 * conv_dw.c - depthwise 2-D convolution in f32 (one input channel per
 * group, one filter per channel), on blocks of 16 channels held
 * channels-innermost.
 *
 * Needs: nothing beyond the C compiler's vector extensions; k_nn.c's
 * conv_f32 calls taprt_conv_dw_f32 for depthwise Convs.
 *
 * Why this layout: a depthwise filter sees one channel, so along a plane
 * (NCHW) every output pixel needs its own taps and short rows (7, 14, 28
 * pixels in MobileNet) waste most of a vector.  With 16 channels in one
 * vector, a pixel is one vector whatever the plane's width, and an output
 * pixel is KH*KW fused multiply-adds of a weight vector with an input
 * vector -- onnxruntime's NCHWc kernels do the same, but keep the whole
 * network in that layout.  Here tensors stay NCHW: each call transposes its
 * block of 16 input planes into a zero-padded [H][W][16] buffer (16x16
 * register transposes), computes, and transposes the [OH*OW][16] result
 * back, bias and activation applied before (the residual after, since the
 * activation comes last).  The transposes are about a quarter of the work
 * at 5x5 and the kernel still beats the per-plane one by 3-4x on
 * MobileNetV3's layers (bench/README.md).
 *
 * One clone per instruction set (TAPRT_CLONES): 16-float vectors are one
 * AVX-512 register, two AVX2 ones, four SSE ones.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/internal.h"

typedef float v16 __attribute__((vector_size(64)));             /* 64-byte aligned */
typedef float v16u __attribute__((vector_size(64), aligned(4))); /* anywhere */
typedef int v16i __attribute__((vector_size(64)));

/*
 * Transpose r[16][16] in place: four rounds, round b swapping the
 * off-diagonal b x b blocks of every 2b x 2b block (bit b of the row
 * index trades places with bit b of the column index).
 */
#define TR_ROUND(r, b, LO, HI)                                            \
	for (int i_ = 0; i_ < 16; i_++)                                   \
		if (!(i_ & (b))) {                                        \
			v16 a_ = r[i_], c_ = r[i_ + (b)];                 \
			r[i_] = __builtin_shuffle(a_, c_, (v16i)LO);      \
			r[i_ + (b)] = __builtin_shuffle(a_, c_, (v16i)HI); \
		}

static inline __attribute__((always_inline)) void
tr16(v16 *r)
{
	TR_ROUND(r, 8, ((v16i){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}),
	    ((v16i){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}))
	TR_ROUND(r, 4, ((v16i){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}),
	    ((v16i){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}))
	TR_ROUND(r, 2, ((v16i){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}),
	    ((v16i){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}))
	TR_ROUND(r, 1, ((v16i){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}),
	    ((v16i){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}))
}
#undef TR_ROUND

/* The first n < 16 floats of p, the rest 0 (a plane's last pixels: a full
 * load could run past the tensor). */
static inline void
load_part(v16 *v, const float *p, int64_t n)
{
	float *f = (float *)v;
	for (int64_t i = 0; i < 16; i++)
		f[i] = i < n ? p[i] : 0;
}

/* The geometry of one call. */
typedef struct {
	int64_t IH, IW, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
	int64_t Wp;                     /* the padded columns the taps read */
	int64_t RB;                     /* rows in the ring: one output row's taps */
	int64_t cap;                    /* output pixels buffered before a flush */
} dwgeom;

/* Output pixels gathered before they are transposed back (a multiple of
 * 16): 64 KiB, so the buffer stays in L2 however large the plane. */
#define DW_FLUSH 1024

/*
 * Input row ih (padded row ih + PT) of planes x[nc][IH*IW] (nc <= 16
 * channels, `plane` floats apart) into row[Wp] as 16-channel pixels, zero
 * in the padding, outside the input and in the channels past nc.
 */
TAPRT_CLONES static void
dw_pack_row(const float *x, int64_t plane, int nc, const dwgeom *g, int64_t ih, v16 *row)
{
	const int64_t IH = g->IH, IW = g->IW, Wp = g->Wp, PL = g->PL, isz = IH * IW;
	const v16 zero = {0};
	if (ih < 0 || ih >= IH) {
		for (int64_t q = 0; q < Wp; q++)
			row[q] = zero;
		return;
	}
	for (int64_t q = 0; q < PL && q < Wp; q++)
		row[q] = zero;
	for (int64_t q = PL + IW; q < Wp; q++)
		row[q] = zero;
	/* 16 columns at a time; a full vector load stays inside the plane
	 * but for the last row's last columns */
	const int64_t q1 = Wp - PL < IW ? Wp - PL : IW;
	for (int64_t w0 = 0; w0 < q1; w0 += 16) {
		v16 t[16];
		int64_t o = ih * IW + w0, n = q1 - w0 < 16 ? q1 - w0 : 16;
		if (nc == 16 && o + 16 <= isz)
			for (int j = 0; j < 16; j++) /* unrolled, no branches */
				t[j] = *(const v16u *)(x + j * plane + o);
		else
			for (int j = 0; j < 16; j++) {
				if (j >= nc)
					t[j] = zero;
				else if (o + 16 <= isz)
					t[j] = *(const v16u *)(x + j * plane + o);
				else
					load_part(&t[j], x + j * plane + o, isz - o);
			}
		tr16(t);
		for (int64_t k = 0; k < n; k++)
			row[PL + w0 + k] = t[k];
	}
}

/*
 * One output row: o[ow] = bias + sum over taps of wt[tap] * the pixel it
 * reads in rows[kh], four output pixels at a time so each weight vector
 * loaded feeds four accumulators.  Inlined with constant kernel and
 * stride, the loops unroll and the loads overlapping windows share are
 * loaded once.
 */
static inline __attribute__((always_inline)) void
dw_row(const v16 *const *rows, const v16 *wt, v16 bias, v16 *o, int64_t OW, int KH, int KW,
    int SW, int DW)
{
	int64_t ow = 0;
	for (; ow + 4 <= OW; ow += 4) {
		v16 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
		for (int kh = 0; kh < KH; kh++) {
			const v16 *r = rows[kh] + ow * SW;
			for (int kw = 0; kw < KW; kw++) {
				v16 w = wt[kh * KW + kw];
				a0 += w * r[kw * DW];
				a1 += w * r[kw * DW + SW];
				a2 += w * r[kw * DW + 2 * SW];
				a3 += w * r[kw * DW + 3 * SW];
			}
		}
		o[ow] = a0;
		o[ow + 1] = a1;
		o[ow + 2] = a2;
		o[ow + 3] = a3;
	}
	for (; ow < OW; ow++) {
		v16 a = bias;
		for (int kh = 0; kh < KH; kh++) {
			const v16 *r = rows[kh] + ow * SW;
			for (int kw = 0; kw < KW; kw++)
				a += wt[kh * KW + kw] * r[kw * DW];
		}
		o[ow] = a;
	}
}

/* fp-contract: the multiply-adds as fused ones (-std=c11 turns the
 * contraction off) */
TAPRT_CLONES __attribute__((optimize("fp-contract=fast"))) static void
dw_compute_row(const v16 *const *rows, const v16 *wt, const v16 *biasp, v16 *o, const dwgeom *g)
{
	const v16 bias = *biasp;
	const int64_t OW = g->OW;
	const int K = (int)g->KH, S = (int)g->SW;
	/* MobileNet's and EfficientNet's shapes, each unrolled */
	bool sq = g->KH == g->KW && g->SH == g->SW && g->DH == 1 && g->DW == 1;
	if (sq && K == 3 && S == 1)
		dw_row(rows, wt, bias, o, OW, 3, 3, 1, 1);
	else if (sq && K == 3 && S == 2)
		dw_row(rows, wt, bias, o, OW, 3, 3, 2, 1);
	else if (sq && K == 5 && S == 1)
		dw_row(rows, wt, bias, o, OW, 5, 5, 1, 1);
	else if (sq && K == 5 && S == 2)
		dw_row(rows, wt, bias, o, OW, 5, 5, 2, 1);
	else if (sq && K == 7 && S == 1)
		dw_row(rows, wt, bias, o, OW, 7, 7, 1, 1);
	else
		dw_row(rows, wt, bias, o, OW, (int)g->KH, (int)g->KW, (int)g->SW, (int)g->DW);
}

/* n buffered 16-channel pixels into the planes y[nc][P] (pixel 0 of each
 * at y + j * P); whole groups of 16 but for a short last one. */
TAPRT_CLONES static void
dw_unpack(const v16 *out, int64_t n, int nc, int64_t P, float *y)
{
	for (int64_t p = 0; p < n; p += 16) {
		v16 t[16];
		for (int k = 0; k < 16; k++)
			t[k] = p + k < n ? out[p + k] : (v16){0};
		tr16(t);
		if (n - p >= 16)
			for (int j = 0; j < nc; j++)
				*(v16u *)(y + j * P + p) = t[j];
		else
			for (int j = 0; j < nc; j++)
				for (int64_t k = 0; k < n - p; k++)
					y[j * P + p + k] = ((const float *)&t[j])[k];
	}
}

/*
 * One image's block of nc <= 16 channels: x and y at the block's first
 * plane, w its filters; buf holds the ring (RB rows of Wp pixels), the
 * output buffer (cap pixels), the weights (KK pixels) and the bias.
 */
static void
dw_block(const float *x, const float *w, const float *bias, const float *z, float *y, int nc,
    const dwgeom *g, v16 *buf, const taprt_act *act)
{
	const int64_t KH = g->KH, KK = g->KH * g->KW, P = g->OH * g->OW, isz = g->IH * g->IW;
	v16 *ring = buf, *out = ring + g->RB * g->Wp, *wt = out + g->cap, *bv = wt + KK;
	/* (through float pointers: GCC misaligns vectorized stores to
	 * lanes of a vector in memory) */
	float *wf = (float *)wt, *bf = (float *)bv;
	for (int j = 0; j < 16; j++) {
		bf[j] = bias && j < nc ? bias[j] : 0;
		for (int64_t t = 0; t < KK; t++)
			wf[t * 16 + j] = j < nc ? w[j * KK + t] : 0;
	}
	const v16 *rows[64];
	int64_t next = 0;               /* the next padded input row to pack */
	int64_t pf = 0, pc = 0;         /* pixels flushed, computed */
	for (int64_t oh = 0; oh < g->OH; oh++) {
		/* rows top .. bot, each in ring slot row % RB: packing row r
		 * overwrites r - RB, which no later output row reads */
		int64_t top = oh * g->SH, bot = top + (KH - 1) * g->DH;
		if (next < top)
			next = top;
		for (; next <= bot; next++)
			dw_pack_row(x, isz, nc, g, next - g->PT, ring + next % g->RB * g->Wp);
		for (int64_t kh = 0; kh < KH; kh++)
			rows[kh] = ring + (top + kh * g->DH) % g->RB * g->Wp;
		dw_compute_row(rows, wt, bv, out + (pc - pf), g);
		pc += g->OW;
		bool last = oh == g->OH - 1;
		if (!last && pc - pf < DW_FLUSH)
			continue;
		/* whole groups of 16 pixels back to the planes; the rest waits */
		int64_t n = last ? pc - pf : (pc - pf) & ~(int64_t)15;
		if (!z && act->kind != TAPRT_ACT_NONE)
			taprt_epilogue_f32((float *)out, n * 16, 0, NULL, act);
		dw_unpack(out, n, nc, P, y + pf);
		if (z)
			for (int j = 0; j < nc; j++)
				taprt_epilogue_f32(y + j * P + pf, n, 0, z + j * P + pf, act);
		memmove(out, out + n, (pc - pf - n) * sizeof *out);
		pf += n;
	}
}

int
taprt_conv_dw_f32(const float *x, const float *w, const float *bias, const float *z, float *y,
    const taprt_conv2d *c, const taprt_act *act)
{
	dwgeom g = {c->H, c->W, c->OH, c->OW, c->KH, c->KW, c->SH, c->SW, c->DH, c->DW, c->PT,
		c->PL};
	g.Wp = (g.OW - 1) * g.SW + (g.KW - 1) * g.DW + 1;
	g.RB = (g.KH - 1) * g.DH + 1;
	g.cap = DW_FLUSH + g.OW + 16;
	const int64_t C = c->C, KK = g.KH * g.KW, isz = g.IH * g.IW, P = g.OH * g.OW;
	const int64_t nb = (C + 15) / 16;
	const int64_t bytes = (g.RB * g.Wp + g.cap + KK + 1) * (int64_t)sizeof(v16);
	if (g.KH > 64)
		return 0;
	int failed = 0;
	#pragma omp parallel for if (TAPRT_PAR(c->N * C * P * KK / 4) && c->N * nb > 1) \
	    schedule(static)
	for (int64_t it = 0; it < c->N * nb; it++) {
		v16 *buf = taprt_scratch(bytes);
		if (!buf) {
			failed = 1;
			continue;
		}
		const int64_t b = it / nb, c0 = it % nb * 16, o = (b * C + c0) * P;
		const int nc = C - c0 < 16 ? (int)(C - c0) : 16;
		dw_block(x + (b * C + c0) * isz, w + c0 * KK, bias ? bias + c0 : NULL,
		    z ? z + o : NULL, y + o, nc, &g, buf, act);
	}
	return failed ? -1 : 1;
}
