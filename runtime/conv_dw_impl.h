/*
 * conv_dw_impl.h - conv_dw.c's kernels for one vector width, included once
 * per instruction set with
 *   DW_S     the names' suffix (z16, y8, p8),
 *   DW_VW    floats per vector = channels per block (16 or 8),
 *   DW_ATTR  the functions' target attributes (may be empty).
 * It defines dw_block_<DW_S> (one image's block of channels, below) and
 * the types it uses; conv_dw.c picks a variant from the CPU.
 */
#define DW_CAT2(a, b) a##_##b
#define DW_CAT(a, b) DW_CAT2(a, b)
#define DW_(name) DW_CAT(dw_##name, DW_S)

typedef float DW_(v) __attribute__((vector_size(DW_VW * 4)));             /* aligned */
typedef float DW_(vu) __attribute__((vector_size(DW_VW * 4), aligned(4))); /* anywhere */
typedef int DW_(vi) __attribute__((vector_size(DW_VW * 4)));
#define V DW_(v)
#define VU DW_(vu)
#define VI DW_(vi)
TAPRT_VACT_X(DW_(act), V, VI, DW_ATTR)
#define SH(a, b, ...) __builtin_shuffle(a, b, (VI){__VA_ARGS__})

#if DW_VW == 16
/*
 * Transpose r[16][16] in place, the classic way: interleave floats and
 * pairs of floats within 128-bit lanes (vunpck*), then move whole lanes
 * (vshuff32x4) -- on AVX-512 64 shuffles, half of them in-lane ones, which
 * a generic two-source permute (vpermt2ps) everywhere would not be.
 */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(tr)(V *r)
{
	V t[16];
	for (int i = 0; i < 16; i += 2) {       /* unpack{lo,hi}_ps */
		t[i] = SH(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
		t[i + 1] = SH(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30,
		    15, 31);
	}
	for (int i = 0; i < 16; i += 4)         /* unpack{lo,hi}_pd */
		for (int k = 0; k < 2; k++) {
			r[i + 2 * k] = SH(t[i + k], t[i + k + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9,
			    24, 25, 12, 13, 28, 29);
			r[i + 2 * k + 1] = SH(t[i + k], t[i + k + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10,
			    11, 26, 27, 14, 15, 30, 31);
		}
	for (int i = 0; i < 16; i += 8)         /* shuffle_f32x4 0x88, 0xdd */
		for (int k = 0; k < 4; k++) {
			t[i + k] = SH(r[i + k], r[i + k + 4], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18,
			    19, 24, 25, 26, 27);
			t[i + k + 4] = SH(r[i + k], r[i + k + 4], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21,
			    22, 23, 28, 29, 30, 31);
		}
	for (int k = 0; k < 8; k++) {
		r[k] = SH(t[k], t[k + 8], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
		r[k + 8] = SH(t[k], t[k + 8], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29,
		    30, 31);
	}
}
#elif DW_VW == 8
/* Transpose r[8][8] in place: vunpck{l,h}ps and vunpck{l,h}pd within
 * 128-bit lanes, then vperm2f128 across them (24 shuffles). */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(tr)(V *r)
{
	V t[8];
	for (int i = 0; i < 8; i += 2) {        /* unpack{lo,hi}_ps */
		t[i] = SH(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
		t[i + 1] = SH(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
	}
	for (int i = 0; i < 8; i += 4)          /* unpack{lo,hi}_pd */
		for (int k = 0; k < 2; k++) {
			r[i + 2 * k] = SH(t[i + k], t[i + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
			r[i + 2 * k + 1] = SH(t[i + k], t[i + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
		}
	for (int k = 0; k < 4; k++) {           /* permute2f128 0x20, 0x31 */
		t[k] = SH(r[k], r[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
		t[k + 4] = SH(r[k], r[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
	}
	for (int k = 0; k < 8; k++)
		r[k] = t[k];
}
#else
#error "conv_dw_impl.h: DW_VW must be 8 or 16"
#endif

/* The first n < DW_VW floats of p, the rest 0 (a plane's last pixels: a
 * full load could run past the tensor). */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(load_part)(V *v, const float *p, int64_t n)
{
	float *f = (float *)v;
	for (int64_t i = 0; i < DW_VW; i++)
		f[i] = i < n ? p[i] : 0;
}

/* Zero row[Wp] if input row ih is outside the input (false: nothing more
 * to do), else its left padding. */
static inline __attribute__((always_inline, DW_ATTR)) bool
DW_(pad_row)(const dwgeom *g, int64_t ih, V *row)
{
	const V zero = {0};
	if (ih < 0 || ih >= g->IH) {
		for (int64_t q = 0; q < g->Wp; q++)
			row[q] = zero;
		return false;
	}
	for (int64_t q = 0; q < g->PL && q < g->Wp; q++)
		row[q] = zero;
	return true;
}

/*
 * Input row ih (padded row ih + PT) of planes x[nc][IH*IW] (nc <= DW_VW
 * channels, `plane` floats apart, readable up to xend) into row[Wp] as
 * DW_VW-channel pixels, zero in the padding, outside the input and in the
 * channels past nc.  The row has DW_VW pixels of slack after Wp, so that
 * every transposed group is stored whole.
 */
static __attribute__((DW_ATTR)) void
DW_(pack_row)(const float *x, const float *xend, int64_t plane, int nc, const dwgeom *g,
    int64_t ih, V *row)
{
	const int64_t IW = g->IW, Wp = g->Wp, PL = g->PL;
	const V zero = {0};
	if (!DW_(pad_row)(g, ih, row))
		return;
	/* DW_VW columns at a time, loaded whole (the next row's first columns
	 * come along and land in the padding, zeroed after) unless that runs
	 * past the tensor */
	const int64_t q1 = Wp - PL < IW ? Wp - PL : IW;
	for (int64_t w0 = 0; w0 < q1; w0 += DW_VW) {
		V t[DW_VW];
		const float *src = x + ih * IW + w0;
		if (nc == DW_VW && xend - src >= (DW_VW - 1) * plane + DW_VW)
			for (int j = 0; j < DW_VW; j++) /* unrolled, no branches */
				t[j] = *(const VU *)(src + j * plane);
		else
			for (int j = 0; j < DW_VW; j++) {
				const float *sj = src + j * plane;
				if (j >= nc)
					t[j] = zero;
				else if (xend - sj >= DW_VW)
					t[j] = *(const VU *)sj;
				else
					DW_(load_part)(&t[j], sj, xend - sj);
			}
		DW_(tr)(t);
		for (int k = 0; k < DW_VW; k++)
			row[PL + w0 + k] = t[k];
	}
	for (int64_t q = PL + q1; q < Wp; q++)
		row[q] = zero;
}

/*
 * nb expanded pixels from the 1x1's input row xr (channel c at xr + c *
 * plane): o[j] = act(b + sum over c of wt[c] * xr[c * plane + j]), each
 * input value broadcast to the block's channels (no transpose: the 1x1
 * writes channel blocks as the taps read them).
 */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(xpx)(const float *xr, int64_t C, int64_t plane, const V *wt, const V *b, V *o, int nb,
    int kind, const taprt_act *a)
{
	const taprt_act act = {kind, a->a, a->b}; /* kind constant: one case inlined */
	V acc[8];
	for (int j = 0; j < nb; j++)
		acc[j] = *b;
	for (int64_t c = 0; c < C; c++) {
		V w = wt[c];
		const float *xc = xr + c * plane;
		for (int j = 0; j < nb; j++)
			acc[j] += w * xc[j];
	}
	for (int j = 0; j < nb; j++) {
		DW_(act)(&acc[j], &act);
		o[j] = acc[j];
	}
}

/* n expanded pixels into o, 8 at a time and the rest in one block; kind
 * (constant after inlining) the activation's. */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(xrow)(const float *xr, int64_t C, int64_t plane, const V *wt, const V *b, V *o, int64_t n,
    int kind, const taprt_act *act)
{
	int64_t q = 0;
	for (; q + 8 <= n; q += 8)
		DW_(xpx)(xr + q, C, plane, wt, b, o + q, 8, kind, act);
	switch (n - q) {
	case 7: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 7, kind, act); break;
	case 6: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 6, kind, act); break;
	case 5: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 5, kind, act); break;
	case 4: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 4, kind, act); break;
	case 3: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 3, kind, act); break;
	case 2: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 2, kind, act); break;
	case 1: DW_(xpx)(xr + q, C, plane, wt, b, o + q, 1, kind, act); break;
	}
}

/*
 * Input row ih of the depthwise layer when a 1x1 convolution computes it
 * (FusedConvDw): row[PL + q] = act(b + W x[:, ih, q]) from the 1x1's input
 * planes e->x (e->C channels), wt[C] its filters for this block as
 * DW_VW-channel vectors, b their bias; zero in the padding, as pack_row.
 * fp-contract: the multiply-adds as fused ones.
 */
static __attribute__((DW_ATTR, optimize("fp-contract=fast"))) void
DW_(expand_row)(const taprt_conv_expand *e, const V *wt, const V *b, const dwgeom *g,
    int64_t ih, V *row)
{
	const int64_t IH = g->IH, IW = g->IW, Wp = g->Wp, PL = g->PL, C = e->C;
	const V zero = {0};
	if (!DW_(pad_row)(g, ih, row))
		return;
	const int64_t q1 = Wp - PL < IW ? Wp - PL : IW, plane = IH * IW;
	const float *xr = e->x + ih * IW;
	V *o = row + PL;
	/* the activation in registers, one inlined row per kind (Gelu after,
	 * on the row) */
	switch (e->act->kind) {
	case TAPRT_ACT_RELU: DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_RELU, e->act); break;
	case TAPRT_ACT_HARDSWISH:
		DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_HARDSWISH, e->act);
		break;
	case TAPRT_ACT_HARDSIGMOID:
		DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_HARDSIGMOID, e->act);
		break;
	case TAPRT_ACT_CLIP: DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_CLIP, e->act); break;
	case TAPRT_ACT_LEAKYRELU:
		DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_LEAKYRELU, e->act);
		break;
	default:
		DW_(xrow)(xr, C, plane, wt, b, o, q1, TAPRT_ACT_NONE, e->act);
		if (e->act->kind != TAPRT_ACT_NONE)
			taprt_epilogue_f32((float *)o, q1 * DW_VW, 0, NULL, e->act);
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
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(px)(const V *const *rows, const V *wt, const V *bias, V *o, int64_t ow, int nb, int KH,
    int KW, int SW, int DWd)
{
	V a[8];
	for (int j = 0; j < nb; j++)
		a[j] = *bias;
	for (int kh = 0; kh < KH; kh++) {
		const V *r = rows[kh] + ow * SW;
		for (int kw = 0; kw < KW; kw++) {
			V w = wt[kh * KW + kw];
			for (int j = 0; j < nb; j++)
				a[j] += w * r[kw * DWd + j * SW];
		}
	}
	for (int j = 0; j < nb; j++)
		o[ow + j] = a[j];
}

/* One output row, 8 pixels at a time and the rest in one block (a lone
 * pixel's 25 dependent multiply-adds cost 4x their throughput). */
static inline __attribute__((always_inline, DW_ATTR)) void
DW_(row)(const V *const *rows, const V *wt, const V *bias, V *o, int64_t OW, int KH, int KW,
    int SW, int DWd)
{
	int64_t ow = 0;
	for (; ow + 8 <= OW; ow += 8)
		DW_(px)(rows, wt, bias, o, ow, 8, KH, KW, SW, DWd);
	switch (OW - ow) {
	case 7: DW_(px)(rows, wt, bias, o, ow, 7, KH, KW, SW, DWd); break;
	case 6: DW_(px)(rows, wt, bias, o, ow, 6, KH, KW, SW, DWd); break;
	case 5: DW_(px)(rows, wt, bias, o, ow, 5, KH, KW, SW, DWd); break;
	case 4: DW_(px)(rows, wt, bias, o, ow, 4, KH, KW, SW, DWd); break;
	case 3: DW_(px)(rows, wt, bias, o, ow, 3, KH, KW, SW, DWd); break;
	case 2: DW_(px)(rows, wt, bias, o, ow, 2, KH, KW, SW, DWd); break;
	case 1: DW_(px)(rows, wt, bias, o, ow, 1, KH, KW, SW, DWd); break;
	}
}

/* fp-contract: the multiply-adds as fused ones (-std=c11 turns the
 * contraction off) */
static __attribute__((DW_ATTR, optimize("fp-contract=fast"))) void
DW_(compute_row)(const V *const *rows, const V *wt, const V *biasp, V *o, const dwgeom *g)
{
	const V *bias = biasp;
	const int64_t OW = g->OW;
	const int K = (int)g->KH, S = (int)g->SW;
	/* MobileNet's and EfficientNet's shapes, each unrolled */
	bool sq = g->KH == g->KW && g->SH == g->SW && g->DH == 1 && g->DW == 1;
	if (sq && K == 3 && S == 1)
		DW_(row)(rows, wt, bias, o, OW, 3, 3, 1, 1);
	else if (sq && K == 3 && S == 2)
		DW_(row)(rows, wt, bias, o, OW, 3, 3, 2, 1);
	else if (sq && K == 5 && S == 1)
		DW_(row)(rows, wt, bias, o, OW, 5, 5, 1, 1);
	else if (sq && K == 5 && S == 2)
		DW_(row)(rows, wt, bias, o, OW, 5, 5, 2, 1);
	else if (sq && K == 7 && S == 1)
		DW_(row)(rows, wt, bias, o, OW, 7, 7, 1, 1);
	else
		DW_(row)(rows, wt, bias, o, OW, (int)g->KH, (int)g->KW, (int)g->SW, (int)g->DW);
}

/* n buffered DW_VW-channel pixels into the planes y[nc][P] (pixel 0 of
 * each at y + j * P); whole groups of DW_VW but for a short last one. */
static __attribute__((DW_ATTR)) void
DW_(unpack)(const V *out, int64_t n, int nc, int64_t P, float *y)
{
	for (int64_t p = 0; p < n; p += DW_VW) {
		V t[DW_VW];
		for (int k = 0; k < DW_VW; k++)
			t[k] = p + k < n ? out[p + k] : (V){0};
		DW_(tr)(t);
		if (n - p >= DW_VW)
			for (int j = 0; j < nc; j++)
				*(VU *)(y + j * P + p) = t[j];
		else
			for (int j = 0; j < nc; j++)
				for (int64_t k = 0; k < n - p; k++)
					y[j * P + p + k] = ((const float *)&t[j])[k];
	}
}

/*
 * The block's filters w[nc][KK] as wt[KK] DW_VW-channel vectors (DW_VW
 * taps at a time through the register transpose: a scalar copy was 3% of
 * MobileNetV3's time), and its bias as one vector; zero past nc.
 */
static __attribute__((DW_ATTR)) void
DW_(pack_weights)(const float *w, const float *bias, int nc, int64_t KK, V *wt, V *bv)
{
	const V zero = {0};
	for (int64_t t0 = 0; t0 < KK; t0 += DW_VW) {
		V t[DW_VW];
		for (int j = 0; j < DW_VW; j++) {
			int64_t o = j * KK + t0;
			if (j >= nc)
				t[j] = zero;
			else if (o + DW_VW <= nc * KK) /* past the row: the next one's */
				t[j] = *(const VU *)(w + o);
			else
				DW_(load_part)(&t[j], w + o, KK - t0 < DW_VW ? KK - t0 : DW_VW);
		}
		DW_(tr)(t);
		for (int64_t k = 0; k < DW_VW && t0 + k < KK; k++)
			wt[t0 + k] = t[k];
	}
	if (bias)
		DW_(load_part)(bv, bias, nc);
	else
		*bv = zero;
}

/* The block's columns of the 1x1's w^T [C][ldw] as C vectors (the
 * filters of the block's nc channels, zero past nc), its bias as one. */
static __attribute__((DW_ATTR)) void
DW_(pack_expand)(const taprt_conv_expand *e, int nc, V *wt, V *bv)
{
	for (int64_t c = 0; c < e->C; c++)
		if (nc == DW_VW)
			wt[c] = *(const VU *)(e->w + c * e->ldw);
		else
			DW_(load_part)(&wt[c], e->w + c * e->ldw, nc);
	if (e->b)
		DW_(load_part)(bv, e->b, nc);
	else
		*bv = (V){0};
}

/*
 * One image's block of nc <= DW_VW channels, output row oh0 (the caller
 * took it from its share) and on, up to row end, while claim hands it the
 * next rows: x and y at the block's first plane, w its filters; buf holds
 * the ring (RB rows of Wr pixels), the output buffer (cap pixels), the
 * weights (KK pixels) and the bias, and with e (x unused: the 1x1 before
 * computes the rows) the 1x1's weights (e->C pixels) and bias.
 */
static void
DW_(block)(const float *x, const float *xend, const float *w, const float *bias,
    const float *z, float *y, int nc, const dwgeom *g, void *bufp, const taprt_act *act,
    int64_t oh0, int64_t end, const taprt_conv_expand *e, dwclaim *claim)
{
	const int64_t KH = g->KH, KK = g->KH * g->KW, P = g->OH * g->OW, isz = g->IH * g->IW;
	V *buf = bufp;
	V *ring = buf, *out = ring + g->RB * g->Wr, *wt = out + g->cap, *bv = wt + KK;
	V *xwt = bv + 1, *xbv = xwt + (e ? e->C : 0); /* the 1x1's, with e */
	DW_(pack_weights)(w, bias, nc, KK, wt, bv);
	if (e)
		DW_(pack_expand)(e, nc, xwt, xbv);
	const V *rows[64];
	/* the ring's slots count from output row oh0's top row */
	int64_t next = oh0 * g->SH, slot = 0; /* the next padded input row to pack, its slot */
	int64_t tslot = 0;              /* the slot of output row oh's top row */
	int64_t pf = oh0 * g->OW, pc = pf; /* pixels flushed, computed */
	for (int64_t oh = oh0, oh1 = oh0 + 1; oh < oh1; oh++) {
		/* rows top .. bot, row r in ring slot r % RB: packing r
		 * overwrites r - RB, which no later output row reads */
		int64_t top = oh * g->SH, bot = top + (KH - 1) * g->DH;
		if (next < top) {
			next = top;
			slot = tslot;
		}
		for (; next <= bot; next++) {
			if (e)
				DW_(expand_row)(e, xwt, xbv, g, next - g->PT, ring + slot * g->Wr);
			else
				DW_(pack_row)(x, xend, isz, nc, g, next - g->PT,
				    ring + slot * g->Wr);
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
		DW_(compute_row)(rows, wt, bv, out + (pc - pf), g);
		/* the activation on the row while it is in L1 (after the
		 * residual, when there is one: below) */
		if (!z && act->kind != TAPRT_ACT_NONE)
			taprt_epilogue_f32((float *)(out + (pc - pf)), g->OW * DW_VW, 0, NULL, act);
		pc += g->OW;
		if (oh == oh1 - 1)
			oh1 = dw_extend(claim, oh1, end);
		bool last = oh == oh1 - 1;
		if (!last && pc - pf < DW_FLUSH)
			continue;
		/* whole groups of DW_VW pixels back to the planes; the rest waits */
		int64_t n = last ? pc - pf : (pc - pf) & ~(int64_t)(DW_VW - 1);
		DW_(unpack)(out, n, nc, P, y + pf);
		if (z)
			for (int j = 0; j < nc; j++)
				taprt_epilogue_f32(y + j * P + pf, n, 0, z + j * P + pf, act);
		memmove(out, out + n, (pc - pf - n) * sizeof *out);
		pf += n;
	}
}

#undef SH
#undef V
#undef VU
#undef VI
#undef DW_
#undef DW_CAT
#undef DW_CAT2
