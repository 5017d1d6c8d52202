/*
 * conv_dw.c - depthwise 2-D convolution in f32 (one input channel per
 * group, one filter per channel), on blocks of 16 channels (AVX-512) or 8
 * (AVX2 and the portable code) held channels-innermost.
 *
 * Needs: the C compiler's vector extensions and share.c; k_nn.c's
 * conv_f32 calls taprt_conv_dw_f32 for depthwise Convs, and
 * taprt_op_FusedConvDw for a 1x1 convolution and the depthwise one after
 * it (passes/fuse_dw.c).
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
 * FusedConvDw: when a 1x1 convolution computes the input, the ring's rows
 * are its output rows, computed as the taps need them straight into
 * channel blocks (expand_row: each input value broadcast against a vector
 * of the block's filters, which the pass stored transposed), activated in
 * the registers; the 1x1's output is never stored and nothing transposed
 * on the way in.
 *
 * Written once per vector width (conv_dw_impl.h, included below for each):
 * blocks of 16 channels with AVX-512, of 8 with AVX2, so that a pixel is
 * one register and the transposes and the 8 accumulators of dw_px fit the
 * register file; the portable variant is the 8-channel code in the
 * compiler's generic vectors.  taprt_isa chooses.  (One 16-channel source
 * cloned per instruction set left the AVX2 clone with two registers per
 * vector, its 16x16 transposes and 8 accumulators spilled to the stack:
 * MobileNetV3's depthwise layers ran 3-8x slower than these.)
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/internal.h"
#include "runtime/vact.h"

/* The geometry of one call. */
typedef struct {
	int64_t IH, IW, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
	int64_t Wp;                     /* the padded columns the taps read */
	int64_t Wr;                     /* a ring row's pitch: Wp and a block of slack */
	int64_t RB;                     /* rows in the ring: one output row's taps */
	int64_t cap;                    /* output pixels buffered before a flush */
} dwgeom;

/* Output pixels gathered before they are transposed back (a multiple of
 * either block size): 64 KiB with 16 channels, so the buffer stays in L2
 * however large the plane. */
#define DW_FLUSH 1024

/* A thread's cursor on the output rows (taprt_share; a unit is a row of
 * one image's block), from which dw_block takes grain rows at a time as it
 * goes -- a few, so that what is left of a share can still be stolen, and
 * at least 64 pixels' worth, so that taking costs little beside them. */
typedef struct {
	taprt_cursor cur;
	int64_t grain;
} dwclaim;

/* The rows past oh1 of the run dw_block is on, up to its end and a grain:
 * the new oh1.  (A share's front moves on from the last take, so they are
 * the rows right after oh1.) */
static inline int64_t
dw_extend(dwclaim *c, int64_t oh1, int64_t end)
{
	int64_t u;
	return oh1 + taprt_share_take(&c->cur, end - oh1 < c->grain ? end - oh1 : c->grain, &u);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DW_X86 1
#define DW_S z16
#define DW_VW 16
#define DW_ATTR target("arch=x86-64-v4")
#include "runtime/conv_dw_impl.h"
#undef DW_S
#undef DW_VW
#undef DW_ATTR
#define DW_S y8
#define DW_VW 8
#define DW_ATTR target("arch=x86-64-v3")
#include "runtime/conv_dw_impl.h"
#undef DW_S
#undef DW_VW
#undef DW_ATTR
#endif
#define DW_S p8
#define DW_VW 8
#define DW_ATTR
#include "runtime/conv_dw_impl.h"
#undef DW_S
#undef DW_ATTR
#undef DW_VW

/* Where share t of n starts (t = n: where the last ends): a band of rows of
 * every one of nbk blocks (units nbk * row on), or a block-major part. */
static inline int64_t
dw_bound(bool bands, int64_t nbk, int64_t OH, int64_t t, int64_t n)
{
	return bands ? nbk * (OH * t / n) : nbk * OH * t / n;
}

typedef void (*dw_block_fn)(const float *, const float *, const float *, const float *,
    const float *, float *, int, const dwgeom *, void *, const taprt_act *, int64_t, int64_t,
    const taprt_conv_expand *, dwclaim *);

int
taprt_conv_dw_f32(const float *x, const float *w, const float *bias, const float *z, float *y,
    const taprt_conv2d *c, const taprt_act *act, const taprt_conv_expand *ex)
{
	dwgeom g = {c->H, c->W, c->OH, c->OW, c->KH, c->KW, c->SH, c->SW, c->DH, c->DW, c->PT,
		c->PL};
	g.Wp = (g.OW - 1) * g.SW + (g.KW - 1) * g.DW + 1;
	/* the variant for this CPU: its block of channels */
	dw_block_fn block = dw_block_p8;
	int vw = 8;
#ifdef DW_X86
	int isa = taprt_isa();
	if (isa >= TAPRT_ISA_AVX512) {
		block = dw_block_z16;
		vw = 16;
	} else if (isa >= TAPRT_ISA_AVX2) {
		block = dw_block_y8;
	}
#endif
	g.Wr = g.Wp + vw;
	g.RB = (g.KH - 1) * g.DH + 1;
	g.cap = DW_FLUSH + g.OW + vw;
	const int64_t C = c->C, KK = g.KH * g.KW, isz = g.IH * g.IW, P = g.OH * g.OW;
	const int64_t nb = (C + vw - 1) / vw;
	const int64_t bytes =
	    (g.RB * g.Wr + g.cap + KK + 1 + (ex ? ex->C + 1 : 0)) * (int64_t)vw * 4;
	const float *xend = ex ? NULL : x + c->N * C * isz;
	if (g.KH > 64)
		return 0;
	int failed = 0;
	/* The output rows of every image's blocks of vw channels, one
	 * contiguous share per thread.  Where the plane is large enough
	 * (taprt_split_pixels) a share is one band of rows of every block:
	 * the band of pixels the 1x1 convolutions before and after split by.
	 * Elsewhere block-major (within a row of equal): whole blocks where
	 * there are many, a block's rows in parts where there are few.  A
	 * thread runs its share block by block, and with two threads or more
	 * shares with stealing (taprt_share): one done first takes the back
	 * half of what is left of another's.  A cut packs its own input rows
	 * (KH - SH rows again), so only a share of more than twice that many
	 * rows is stolen from. */
	const int64_t nbk = c->N * nb, units = nbk * g.OH;
	/* the work as conv_pw.c counts a 1x1's */
	const int64_t work = c->N * C * (P * KK / 4 + (ex ? ex->C * isz / 8 : 0));
	const int T = TAPRT_PAR(work) && units > 1 ? taprt_team_size() : 1;
	const bool bands = taprt_split_pixels(P, T) && g.OH >= 4 * T; /* rows to share */
	int64_t bound[TAPRT_SHARE_MAX + 1];
	for (int t = 0; t <= T && t <= TAPRT_SHARE_MAX; t++)
		bound[t] = dw_bound(bands, nbk, g.OH, t, T);
	taprt_share sh;
	const bool stealing = T > 1 && T <= TAPRT_SHARE_MAX && taprt_share_init(&sh, T, bound);
	/* a cut's KH - SH rows packed again, as output rows (SH input rows each) */
	const int64_t min_left = 2 * ((g.RB - 1) / g.SH) + 2;
	#pragma omp parallel num_threads(T) if (T > 1)
	{
		int id, nt = taprt_team(&id);
		const bool steal = stealing && nt == T;
		dwclaim cl = {{steal ? &sh : NULL, id, 0, 0}, (64 + g.OW - 1) / g.OW};
		if (!steal) { /* the static split, for the team there is */
			cl.cur.lo = dw_bound(bands, nbk, g.OH, id, nt);
			cl.cur.hi = dw_bound(bands, nbk, g.OH, id + 1, nt);
		}
		void *buf = steal || cl.cur.lo < cl.cur.hi ? taprt_scratch(bytes) : NULL;
		if ((steal || cl.cur.lo < cl.cur.hi) && !buf) {
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			int64_t u;
			while (steal && taprt_share_take(&cl.cur, units, &u))
				; /* nothing left here for others to steal */
		}
		int64_t u;
		while (buf) {
			/* one row, to learn where the run starts; dw_block
			 * takes the rest of it as it goes */
			if (!taprt_share_take(&cl.cur, 1, &u)) {
				if (taprt_share_steal(&cl.cur, min_left))
					continue;
				break;
			}
			int64_t bk = u / g.OH, oh = u % g.OH, end = g.OH;
			if (bands) {
				/* u in band t of nbands, rows [r0, end) of every
				 * block from unit nbk * r0 on: row u / nbk is one
				 * of the band's */
				const int64_t nbands = steal ? T : nt, rr = u / nbk;
				int64_t t = rr * nbands / g.OH;
				while (g.OH * (t + 1) / nbands <= rr)
					t++;
				while (g.OH * t / nbands > rr)
					t--;
				const int64_t r0 = g.OH * t / nbands, l = u - nbk * r0;
				end = g.OH * (t + 1) / nbands;
				bk = l / (end - r0);
				oh = r0 + l % (end - r0);
			}
			const int64_t b = bk / nb, c0 = bk % nb * vw, o = (b * C + c0) * P;
			const int nc = C - c0 < vw ? (int)(C - c0) : vw;
			taprt_conv_expand e = {0};
			if (ex)
				e = (taprt_conv_expand){ex->x + b * ex->C * isz, ex->w + c0,
					ex->b ? ex->b + c0 : NULL, ex->C, ex->ldw, ex->act};
			block(ex ? NULL : x + (b * C + c0) * isz, xend, w + c0 * KK,
			    bias ? bias + c0 : NULL, z ? z + o : NULL, y + o, nc, &g, buf, act, oh, end,
			    ex ? &e : NULL, &cl);
		}
	}
	return failed ? -1 : 1;
}
