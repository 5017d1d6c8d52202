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
 * network in that layout.  Here tensors stay NCHW: each block of 16 input
 * planes is transposed row by row (16x16 register transposes) into a ring
 * of zero-padded rows of 16-channel pixels, as many rows as one output
 * row's taps, so the working set stays in L1 however large the plane;
 * output rows are computed 8 pixels at a time (and the rest of the row in
 * one block: a lone pixel's chain of dependent multiply-adds is
 * latency-bound), activated while in L1, and transposed back to the planes
 * in groups of 16 pixels every 1024 (the residual, when there is one, is
 * added there, before the activation).  On MobileNetV3's layers this is
 * 3-5x the per-plane kernel's speed, the transposes included.
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
 * Transpose r[16][16] in place, the classic way: interleave floats and
 * pairs of floats within 128-bit lanes (vunpck*), then move whole lanes
 * (vshuff32x4) -- on AVX-512 64 shuffles, half of them in-lane ones, which
 * a generic two-source permute (vpermt2ps) everywhere would not be.
 */
#define SH(a, b, ...) __builtin_shuffle(a, b, (v16i){__VA_ARGS__})
#define UNPACK_PS_LO 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29
#define UNPACK_PS_HI 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31
#define UNPACK_PD_LO 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define UNPACK_PD_HI 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LANES_0x88 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define LANES_0xDD 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
static inline __attribute__((always_inline)) void
tr16(v16 *r)
{
	v16 t[16];
	for (int i = 0; i < 16; i += 2) {       /* unpack{lo,hi}_ps */
		t[i] = SH(r[i], r[i + 1], UNPACK_PS_LO);
		t[i + 1] = SH(r[i], r[i + 1], UNPACK_PS_HI);
	}
	for (int i = 0; i < 16; i += 4)         /* unpack{lo,hi}_pd */
		for (int k = 0; k < 2; k++) {
			r[i + 2 * k] = SH(t[i + k], t[i + k + 2], UNPACK_PD_LO);
			r[i + 2 * k + 1] = SH(t[i + k], t[i + k + 2], UNPACK_PD_HI);
		}
	for (int i = 0; i < 16; i += 8)         /* shuffle_f32x4 0x88, 0xdd */
		for (int k = 0; k < 4; k++) {
			t[i + k] = SH(r[i + k], r[i + k + 4], LANES_0x88);
			t[i + k + 4] = SH(r[i + k], r[i + k + 4], LANES_0xDD);
		}
	for (int k = 0; k < 8; k++) {
		r[k] = SH(t[k], t[k + 8], LANES_0x88);
		r[k + 8] = SH(t[k], t[k + 8], LANES_0xDD);
	}
}
#undef SH
#undef UNPACK_PS_LO
#undef UNPACK_PS_HI
#undef UNPACK_PD_LO
#undef UNPACK_PD_HI
#undef LANES_0x88
#undef LANES_0xDD

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
	int64_t Wr;                     /* a ring row's pitch: Wp and 16 of slack */
	int64_t RB;                     /* rows in the ring: one output row's taps */
	int64_t cap;                    /* output pixels buffered before a flush */
} dwgeom;

/* Output pixels gathered before they are transposed back (a multiple of
 * 16): 64 KiB, so the buffer stays in L2 however large the plane. */
#define DW_FLUSH 1024

/*
 * Input row ih (padded row ih + PT) of planes x[nc][IH*IW] (nc <= 16
 * channels, `plane` floats apart, readable up to xend) into row[Wp] as
 * 16-channel pixels, zero in the padding, outside the input and in the
 * channels past nc.  The row has 16 pixels of slack after Wp, so that
 * every transposed group is stored whole.
 */
TAPRT_CLONES static void
dw_pack_row(const float *x, const float *xend, int64_t plane, int nc, const dwgeom *g,
    int64_t ih, v16 *row)
{
	const int64_t IH = g->IH, IW = g->IW, Wp = g->Wp, PL = g->PL;
	const v16 zero = {0};
	if (ih < 0 || ih >= IH) {
		for (int64_t q = 0; q < Wp; q++)
			row[q] = zero;
		return;
	}
	for (int64_t q = 0; q < PL && q < Wp; q++)
		row[q] = zero;
	/* 16 columns at a time, loaded whole (the next row's first columns
	 * come along and land in the padding, zeroed after) unless that runs
	 * past the tensor */
	const int64_t q1 = Wp - PL < IW ? Wp - PL : IW;
	for (int64_t w0 = 0; w0 < q1; w0 += 16) {
		v16 t[16];
		const float *src = x + ih * IW + w0;
		if (nc == 16 && xend - src >= 15 * plane + 16)
			for (int j = 0; j < 16; j++) /* unrolled, no branches */
				t[j] = *(const v16u *)(src + j * plane);
		else
			for (int j = 0; j < 16; j++) {
				const float *sj = src + j * plane;
				if (j >= nc)
					t[j] = zero;
				else if (xend - sj >= 16)
					t[j] = *(const v16u *)sj;
				else
					load_part(&t[j], sj, xend - sj);
			}
		tr16(t);
		for (int k = 0; k < 16; k++)
			row[PL + w0 + k] = t[k];
	}
	for (int64_t q = PL + q1; q < Wp; q++)
		row[q] = zero;
}

/*
 * nb output pixels from ow on: o[ow + j] = bias + sum over taps of wt[tap]
 * * the pixel it reads in rows[kh], nb accumulators so that each weight
 * vector loaded feeds nb multiply-adds and nb dependency chains overlap.
 * Inlined with constant nb, kernel and stride, the loops unroll and the
 * loads overlapping windows share are loaded once.
 */
static inline __attribute__((always_inline)) void
dw_px(const v16 *const *rows, const v16 *wt, v16 bias, v16 *o, int64_t ow, int nb, int KH,
    int KW, int SW, int DW)
{
	v16 a[8];
	for (int j = 0; j < nb; j++)
		a[j] = bias;
	for (int kh = 0; kh < KH; kh++) {
		const v16 *r = rows[kh] + ow * SW;
		for (int kw = 0; kw < KW; kw++) {
			v16 w = wt[kh * KW + kw];
			for (int j = 0; j < nb; j++)
				a[j] += w * r[kw * DW + j * SW];
		}
	}
	for (int j = 0; j < nb; j++)
		o[ow + j] = a[j];
}

/* One output row, 8 pixels at a time and the rest in one block (a lone
 * pixel's 25 dependent multiply-adds cost 4x their throughput). */
static inline __attribute__((always_inline)) void
dw_row(const v16 *const *rows, const v16 *wt, v16 bias, v16 *o, int64_t OW, int KH, int KW,
    int SW, int DW)
{
	int64_t ow = 0;
	for (; ow + 8 <= OW; ow += 8)
		dw_px(rows, wt, bias, o, ow, 8, KH, KW, SW, DW);
	switch (OW - ow) {
	case 7: dw_px(rows, wt, bias, o, ow, 7, KH, KW, SW, DW); break;
	case 6: dw_px(rows, wt, bias, o, ow, 6, KH, KW, SW, DW); break;
	case 5: dw_px(rows, wt, bias, o, ow, 5, KH, KW, SW, DW); break;
	case 4: dw_px(rows, wt, bias, o, ow, 4, KH, KW, SW, DW); break;
	case 3: dw_px(rows, wt, bias, o, ow, 3, KH, KW, SW, DW); break;
	case 2: dw_px(rows, wt, bias, o, ow, 2, KH, KW, SW, DW); break;
	case 1: dw_px(rows, wt, bias, o, ow, 1, KH, KW, SW, DW); break;
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
 * The block's filters w[nc][KK] as wt[KK] 16-channel vectors (16 taps at a
 * time through the register transpose: a scalar copy was 3% of
 * MobileNetV3's time), and its bias as one vector; zero past nc.
 */
TAPRT_CLONES static void
dw_pack_weights(const float *w, const float *bias, int nc, int64_t KK, v16 *wt, v16 *bv)
{
	const v16 zero = {0};
	for (int64_t t0 = 0; t0 < KK; t0 += 16) {
		v16 t[16];
		for (int j = 0; j < 16; j++) {
			int64_t o = j * KK + t0;
			if (j >= nc)
				t[j] = zero;
			else if (o + 16 <= nc * KK) /* past the row: the next one's */
				t[j] = *(const v16u *)(w + o);
			else
				load_part(&t[j], w + o, KK - t0 < 16 ? KK - t0 : 16);
		}
		tr16(t);
		for (int64_t k = 0; k < 16 && t0 + k < KK; k++)
			wt[t0 + k] = t[k];
	}
	if (bias)
		load_part(bv, bias, nc);
	else
		*bv = zero;
}

/*
 * One image's block of nc <= 16 channels: x and y at the block's first
 * plane, w its filters; buf holds the ring (RB rows of Wr pixels), the
 * output buffer (cap pixels), the weights (KK pixels) and the bias.
 */
static void
dw_block(const float *x, const float *xend, const float *w, const float *bias, const float *z,
    float *y, int nc, const dwgeom *g, v16 *buf, const taprt_act *act, int64_t oh0,
    int64_t oh1)
{
	const int64_t KH = g->KH, KK = g->KH * g->KW, P = g->OH * g->OW, isz = g->IH * g->IW;
	v16 *ring = buf, *out = ring + g->RB * g->Wr, *wt = out + g->cap, *bv = wt + KK;
	dw_pack_weights(w, bias, nc, KK, wt, bv);
	const v16 *rows[64];
	/* the ring's slots count from output row oh0's top row */
	int64_t next = oh0 * g->SH, slot = 0; /* the next padded input row to pack, its slot */
	int64_t tslot = 0;              /* the slot of output row oh's top row */
	int64_t pf = oh0 * g->OW, pc = pf; /* pixels flushed, computed */
	for (int64_t oh = oh0; oh < oh1; oh++) {
		/* rows top .. bot, row r in ring slot r % RB: packing r
		 * overwrites r - RB, which no later output row reads */
		int64_t top = oh * g->SH, bot = top + (KH - 1) * g->DH;
		if (next < top) {
			next = top;
			slot = tslot;
		}
		for (; next <= bot; next++) {
			dw_pack_row(x, xend, isz, nc, g, next - g->PT, ring + slot * g->Wr);
			if (++slot == g->RB)
				slot = 0;
		}
		for (int64_t kh = 0, s = tslot; kh < KH; kh++) {
			rows[kh] = ring + s * g->Wr;
			if ((s += g->DH) >= g->RB)
				s -= g->RB;
		}
		for (tslot += g->SH; tslot >= g->RB;)
			tslot -= g->RB;
		dw_compute_row(rows, wt, bv, out + (pc - pf), g);
		/* the activation on the row while it is in L1 (after the
		 * residual, when there is one: below) */
		if (!z && act->kind != TAPRT_ACT_NONE)
			taprt_epilogue_f32((float *)(out + (pc - pf)), g->OW * 16, 0, NULL, act);
		pc += g->OW;
		bool last = oh == oh1 - 1;
		if (!last && pc - pf < DW_FLUSH)
			continue;
		/* whole groups of 16 pixels back to the planes; the rest waits */
		int64_t n = last ? pc - pf : (pc - pf) & ~(int64_t)15;
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
	g.Wr = g.Wp + 16;
	g.RB = (g.KH - 1) * g.DH + 1;
	g.cap = DW_FLUSH + g.OW + 16;
	const int64_t C = c->C, KK = g.KH * g.KW, isz = g.IH * g.IW, P = g.OH * g.OW;
	const int64_t nb = (C + 15) / 16;
	const int64_t bytes = (g.RB * g.Wr + g.cap + KK + 1) * (int64_t)sizeof(v16);
	const float *xend = x + c->N * C * isz;
	if (g.KH > 64)
		return 0;
	int failed = 0;
	/* The output rows of every image's blocks of 16 channels, block-major,
	 * one contiguous share per thread (within a row of equal): whole
	 * blocks where there are many, a block's rows in parts where there
	 * are few (MobileNet's 16 or 72 channels: 1 or 5 blocks).  A part
	 * packs its own input rows (KH - SH rows again per cut). */
	const int64_t units = c->N * nb * g.OH;
	#pragma omp parallel if (TAPRT_PAR(c->N * C * P * KK / 4) && units > 1)
	{
		int id, T = taprt_team(&id);
		int64_t u = units * id / T, uend = units * (id + 1) / T;
		v16 *buf = u < uend ? taprt_scratch(bytes) : NULL;
		if (u < uend && !buf) {
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			u = uend;
		}
		while (u < uend) {
			const int64_t bk = u / g.OH, r0 = u % g.OH;
			const int64_t r1 = uend - u < g.OH - r0 ? r0 + (uend - u) : g.OH;
			const int64_t b = bk / nb, c0 = bk % nb * 16, o = (b * C + c0) * P;
			const int nc = C - c0 < 16 ? (int)(C - c0) : 16;
			dw_block(x + (b * C + c0) * isz, xend, w + c0 * KK, bias ? bias + c0 : NULL,
			    z ? z + o : NULL, y + o, nc, &g, buf, act, r0, r1);
			u += r1 - r0;
		}
	}
	return failed ? -1 : 1;
}
