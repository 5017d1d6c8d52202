/*
 * conv_wino.c - f32 3x3 stride-1 convolutions by Winograd's minimal
 * filtering F(4x4, 3x3), for AVX2 CPUs.
 *
 * Needs: GCC on x86-64 (target attributes, vector extensions), an AVX2 CPU
 * (taprt_isa exactly AVX2: with AVX-512 oneDNN's own Winograd serves);
 * gemm_pack.c's register kernel (taprt_gemm_6x16) and the epilogue
 * (taprt_epilogue_f32).
 * k_nn.c's conv_f32 asks here first for group-1 2-D 3x3 stride-1
 * undilated convolutions of at least 16 channels and filters with a fixed
 * W; 0 means declined, and the caller goes on to oneDNN or the rest.
 *
 * Why: oneDNN 2.6 has Winograd kernels only for AVX-512; on an AVX2 CPU its
 * jit:avx2 direct kernels run ResNet-18's 3x3 layers at 57-83% of the
 * GEMM's throughput (bench/README.md).  F(4x4, 3x3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", CVPR 2016) computes a 4x4
 * tile of outputs from the 6x6 input patch under it with 36 multiply-adds
 * per filter and channel instead of 144: V = B^T d B per channel and tile,
 * U = G g G^T per filter and channel (once per node, kept like oneDNN's
 * reordered weights), then for each of the 36 positions xi the product
 * M[xi] = U[xi] V[xi] ([M x C] by [C x tiles], 36 GEMMs), and Y = A^T M A.
 * The products run gemm_pack.c's 6x16 register kernel on operands already
 * in its layout: U kept in slivers of 6 filters, V written by the input
 * transform in panels of 16 tiles.  Through taprt_sgemm (OpenBLAS at these
 * sizes) both operands were packed and M cleared on each of the 36 calls
 * per band: 13% of the segmentation net's profile; without them its
 * Winograd layers run 2-4% faster (the products are now ~35% of it).
 *
 * A unit of work is one image's band of tile rows: each channel's rows of
 * the band zero-padded into a small plane, the input transform 8 tiles at
 * a time in AVX2 vectors (a row's tiles padded to a multiple of 8 so every
 * vector is whole; the padding tiles' products are computed and dropped),
 * V [36][tiles / 16][C][16] and M [M][36][tiles] in scratch, the 36
 * products, then the output transform writes the band's output rows
 * whole, and the bias, residual and activation go over them while they
 * are in cache.  With at least four bands a thread the rank's threads
 * take whole bands; with fewer (one image) the team works on one band at
 * a time, channels shared out for the input transform and, after a
 * barrier, filters (whole slivers of 6) for the products and the output
 * transform.
 *
 * Rounding: on Lavin and Gray's points (0, 1, -1, 2, -2 and infinity) the
 * transforms hold coefficients up to 5 and 8, and test/fuse.sh's bigconvs
 * output was 3.3e-4 off the im2col reference, past its tolerance.  The
 * points 0, 1, -1, 1/2, -2 (Barabasz et al., "Error analysis and improving
 * the accuracy of Winograd convolution for deep neural networks",
 * arXiv:1803.10986) keep A^T's and B^T's coefficients small:
 * bench/wino_points.py measures the float32 error of a 32-channel 4x4
 * tile at 2.6e-5 largest, 1.0e-5 mean, against 5.6e-5 and 1.7e-5 on
 * Lavin's (a float32 direct sum: 1.1e-5 and 3.7e-6), and bigconvs is
 * 2.65e-4 off where oneDNN's direct kernel is 2.1e-4.  docs/runtime.md
 * has the rest.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"
#include "runtime/vec8.h"

#ifdef TAPRT_VEC8

/* A node's transformed weights U, keyed like conv_dnnl.c's: for each xi,
 * ceil(M / 6) slivers of 6 filters, each [C][6] (filter 6s + r, channel c at
 * ((xi * ns + s) * C + c) * 6 + r; filters past M zero), as
 * taprt_gemm_6x16 reads its left operand. */
typedef struct Wino {
	const void *key;                /* the node */
	const float *w;                 /* its weights */
	int64_t M, C;
	float *u;
	struct Wino *next;
} Wino;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static Wino *cache;

/* U = G g G^T for each filter m and channel c of w[M][C][3][3] into u (36
 * ceil(M / 6) 6 C floats, zeroed), laid out as above; G rows
 * (1/2, 0, 0), (1/6, 1/6, 1/6), (-1/6, 1/6, -1/6), (-16/15, -8/15, -4/15),
 * (1/30, -1/15, 2/15), (0, 0, 1/2): the points 0, 1, -1, 1/2, -2 and
 * infinity, rows scaled by powers of two so that B^T is whole numbers. */
static void
wino_weights(const float *w, int64_t M, int64_t C, float *u)
{
	static const double G[6][3] = {{1.0 / 2, 0, 0}, {1.0 / 6, 1.0 / 6, 1.0 / 6},
		{-1.0 / 6, 1.0 / 6, -1.0 / 6}, {-16.0 / 15, -8.0 / 15, -4.0 / 15},
		{1.0 / 30, -1.0 / 15, 2.0 / 15}, {0, 0, 1.0 / 2}};
	const int64_t ns = (M + 5) / 6;
	for (int64_t m = 0; m < M; m++)
		for (int64_t c = 0; c < C; c++) {
			const float *g = w + (m * C + c) * 9;
			double t[6][3];
			for (int i = 0; i < 6; i++)
				for (int k = 0; k < 3; k++)
					t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
			for (int i = 0; i < 6; i++)
				for (int j = 0; j < 6; j++)
					u[(((i * 6 + j) * ns + m / 6) * C + c) * 6 + m % 6] =
					    (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] +
					    t[i][2] * G[j][2]);
		}
}

/* The node's U, made on its first call; NULL if out of memory. */
static const float *
wino_get(const taprt_node *n, const float *w, int64_t M, int64_t C)
{
	pthread_mutex_lock(&cache_lock);
	Wino *p = cache;
	while (p && !(p->key == n && p->w == w && p->M == M && p->C == C))
		p = p->next;
	pthread_mutex_unlock(&cache_lock);
	if (p)
		return p->u;
	p = malloc(sizeof *p);
	float *u = calloc(36 * ((M + 5) / 6) * 6 * C, sizeof *u);
	if (!p || !u) {
		free(p);
		free(u);
		return NULL;
	}
	wino_weights(w, M, C, u);
	*p = (Wino){n, w, M, C, u, NULL};
	pthread_mutex_lock(&cache_lock);
	p->next = cache;
	cache = p;
	pthread_mutex_unlock(&cache_lock);
	return u;
}

/* o = B^T i along one axis: B^T rows (2, -3, -4, 3, 2, 0), (0, -2, 1, 5, 2,
 * 0), (0, 2, -5, 1, 2, 0), (0, -2, -1, 2, 1, 0), (0, 1, -2, -1, 2, 0),
 * (0, 2, -3, -4, 3, 2). */
static inline __attribute__((always_inline)) TAPRT_AVX2 void
bt6(v8 *o, int os, const v8 *i, int is)
{
	v8 i0 = i[0], i1 = i[is], i2 = i[2 * is], i3 = i[3 * is], i4 = i[4 * is], i5 = i[5 * is];
	o[0] = 2 * (i0 - 2 * i2 + i4) + 3 * (i3 - i1);
	o[os] = i2 + 5 * i3 + 2 * (i4 - i1);
	o[2 * os] = i3 - 5 * i2 + 2 * (i4 + i1);
	o[3 * os] = i4 - i2 + 2 * (i3 - i1);
	o[4 * os] = i1 - i3 + 2 * (i4 - i2);
	o[5 * os] = 2 * (i1 - 2 * i3 + i5) + 3 * (i4 - i2);
}

/* o = A^T i along one axis: A^T rows (1, 1, 1, 1, 1, 0), (0, 1, -1, 1/2, -2,
 * 0), (0, 1, 1, 1/4, 4, 0), (0, 1, -1, 1/8, -8, 1). */
static inline __attribute__((always_inline)) TAPRT_AVX2 void
at6(v8 *o, int os, const v8 *i, int is)
{
	v8 i0 = i[0], i1 = i[is], i2 = i[2 * is], i3 = i[3 * is], i4 = i[4 * is], i5 = i[5 * is];
	v8 s12 = i1 + i2, d12 = i1 - i2;
	o[0] = i0 + s12 + i3 + i4;
	o[os] = d12 + 0.5f * i3 - 2 * i4;
	o[2 * os] = s12 + 0.25f * i3 + 4 * i4;
	o[3 * os] = d12 + 0.125f * i3 - 8 * i4 + i5;
}

/*
 * The input transform of one channel's band: pad holds its padded rows
 * (Wq floats apart); tile (ty, tx) reads rows 4ty.. and columns 4tx..;
 * V[xi][t] for the band's tile t = ty TWp + tx goes to v + xi xs + (t / 16)
 * ps + t % 16 (the channel's row of xi's panel of 16 tiles), 8 tiles at a
 * time.  A row of 8 tiles' patches is columns 4tx .. 4tx + 33:
 * four vectors of 8 columns de-interleaved into columns 0-3 of each tile,
 * and columns 4-5 are columns 0-1 of the next tile.
 */
static TAPRT_AVX2 void
wino_in(const float *pad, int64_t Wq, int64_t rows, int64_t TWp, float *v, int64_t xs,
    int64_t ps)
{
	for (int64_t ty = 0; ty < rows; ty++)
		for (int64_t tx = 0; tx < TWp; tx += 8) {
			v8 d[36], t[36];
			for (int r = 0; r < 6; r++) {
				const float *p = pad + (4 * ty + r) * Wq + 4 * tx;
				v8 r0 = *(const v8u *)p, r1 = *(const v8u *)(p + 8);
				v8 r2 = *(const v8u *)(p + 16), r3 = *(const v8u *)(p + 24);
				v8i lo = {0, 4, 8, 12, 1, 5, 9, 13}, hi = {2, 6, 10, 14, 3, 7, 11, 15};
				v8 a = __builtin_shuffle(r0, r1, lo), b = __builtin_shuffle(r0, r1, hi);
				v8 c = __builtin_shuffle(r2, r3, lo), e = __builtin_shuffle(r2, r3, hi);
				v8i first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
				v8 k0 = __builtin_shuffle(a, c, first), k1 = __builtin_shuffle(a, c, second);
				v8 *dr = d + r * 6;
				dr[0] = k0;
				dr[1] = k1;
				dr[2] = __builtin_shuffle(b, e, first);
				dr[3] = __builtin_shuffle(b, e, second);
				v8i next = {1, 2, 3, 4, 5, 6, 7, 8};
				dr[4] = __builtin_shuffle(k0, (v8){p[32]}, next);
				dr[5] = __builtin_shuffle(k1, (v8){p[33]}, next);
			}
			for (int k = 0; k < 6; k++)     /* B^T d: down the columns */
				bt6(t + k, 6, d + k, 6);
			for (int r = 0; r < 6; r++)     /* (B^T d) B: along the rows */
				bt6(d + r * 6, 1, t + r * 6, 1);
			const int64_t t0 = ty * TWp + tx;
			float *o = v + t0 / 16 * ps + t0 % 16;
			for (int xi = 0; xi < 36; xi++)
				*(v8u *)(o + xi * xs) = d[xi];
		}
}

/*
 * The output transform of one filter's band: mo holds M[xi][t] (rows ms
 * floats apart); the 4x4 outputs of tile (ty, tx) go to y's rows 4ty..
 * (OW floats apart, nrow of them in the band), columns 4tx.. below OW.
 */
static TAPRT_AVX2 void
wino_out(const float *mo, int64_t ms, int64_t rows, int64_t TWp, float *y, int64_t OW,
    int64_t nrow)
{
	for (int64_t ty = 0; ty < rows; ty++)
		for (int64_t tx = 0; tx < TWp && 4 * tx < OW; tx += 8) {
			v8 m[36], t[24], o[16];
			const float *p = mo + ty * TWp + tx;
			for (int xi = 0; xi < 36; xi++)
				m[xi] = *(const v8u *)(p + xi * ms);
			for (int k = 0; k < 6; k++)     /* A^T m: down the columns */
				at6(t + k, 6, m + k, 6);
			for (int r = 0; r < 4; r++)     /* (A^T m) A: along the rows */
				at6(o + r * 4, 1, t + r * 6, 1);
			/* o[r*4 + s] holds output (r, s) of 8 tiles: interleave to
			 * 32 consecutive columns of row r */
			int64_t ncol = OW - 4 * tx < 32 ? OW - 4 * tx : 32;
			for (int r = 0; r < 4 && 4 * ty + r < nrow; r++) {
				v8 s0 = o[r * 4], s1 = o[r * 4 + 1], s2 = o[r * 4 + 2], s3 = o[r * 4 + 3];
				v8 a = __builtin_shuffle(s0, s1, (v8i){0, 8, 1, 9, 2, 10, 3, 11});
				v8 b = __builtin_shuffle(s2, s3, (v8i){0, 8, 1, 9, 2, 10, 3, 11});
				v8 c = __builtin_shuffle(s0, s1, (v8i){4, 12, 5, 13, 6, 14, 7, 15});
				v8 d = __builtin_shuffle(s2, s3, (v8i){4, 12, 5, 13, 6, 14, 7, 15});
				v8 row[4] = {
					__builtin_shuffle(a, b, (v8i){0, 1, 8, 9, 2, 3, 10, 11}),
					__builtin_shuffle(a, b, (v8i){4, 5, 12, 13, 6, 7, 14, 15}),
					__builtin_shuffle(c, d, (v8i){0, 1, 8, 9, 2, 3, 10, 11}),
					__builtin_shuffle(c, d, (v8i){4, 5, 12, 13, 6, 7, 14, 15}),
				};
				float *q = y + (4 * ty + r) * OW + 4 * tx;
				if (ncol == 32)
					for (int k = 0; k < 4; k++)
						*(v8u *)(q + 8 * k) = row[k];
				else
					memcpy(q, row, ncol * sizeof *q);
			}
		}
}

/* Rows [r0, r1) of plane x (H x W) into pad (rows Wq floats apart), column
 * -PL first, zero outside the plane. */
static void
wino_pad(const float *x, int64_t H, int64_t W, int64_t r0, int64_t r1, int64_t PL, float *pad,
    int64_t Wq)
{
	for (int64_t r = r0; r < r1; r++) {
		float *d = pad + (r - r0) * Wq;
		if (r < 0 || r >= H) {
			memset(d, 0, Wq * sizeof *d);
			continue;
		}
		int64_t c0 = PL < Wq ? PL : Wq, n = W < Wq - c0 ? W : Wq - c0;
		memset(d, 0, c0 * sizeof *d);
		memcpy(d + c0, x + r * W, n * sizeof *d);
		memset(d + c0 + n, 0, (Wq - c0 - n) * sizeof *d);
	}
}

/* Tiles a band aims at: the products are [M x C] by [C x tiles]. */
#define WINO_BAND_TILES 128

/* One band: image b, tile rows ty0 .. ty0 + nr - 1 (bt tiles, TWp a row;
 * btp rounded up to 16), V at v: for each xi, btp / 16 panels of [C][16]
 * (taprt_gemm_6x16's right operand; tiles past bt zero) and 16 floats
 * more, xs in all, and M [M][36][bt] at mo, after V.  The 16 floats: the
 * input transform stores to all 36 xi at once, and at a power-of-two
 * distance apart those lines share a set of L1 (wino_in took twice the
 * time with C * btp = 8192). */
typedef struct {
	const taprt_conv2d *c;
	int64_t TWp, Wq, b, ty0, nr, bt, btp, xs;
	float *v, *mo;
} WinoBand;

/* Floats of one xi's block of V for a band of bt tiles (see above). */
static int64_t
wino_xs(int64_t C, int64_t bt)
{
	return C * ((bt + 15) & ~(int64_t)15) + 16;
}

/* Band bb of the N * nb bands (nb an image, of `rows` tile rows each but
 * an image's last), its buffers at v. */
static WinoBand
wino_band(const taprt_conv2d *c, int64_t TWp, int64_t Wq, int64_t TH, int64_t rows, int64_t nb,
    int64_t bb, float *v)
{
	const int64_t ty0 = bb % nb * rows, nr = ty0 + rows < TH ? rows : TH - ty0;
	const int64_t bt = nr * TWp, btp = (bt + 15) & ~(int64_t)15, xs = wino_xs(c->C, bt);
	return (WinoBand){c, TWp, Wq, bb / nb, ty0, nr, bt, btp, xs, v, v ? v + 36 * xs : NULL};
}

/* The input transform of channels [c0, c1) of the band, pad holding
 * (4 nr + 2) rows of Wq floats. */
static void
wino_band_in(const WinoBand *B, const float *x, int64_t c0, int64_t c1, float *pad)
{
	const taprt_conv2d *c = B->c;
	const float *xb = x + B->b * c->C * c->H * c->W;
	const int64_t xs = B->xs, ps = c->C * 16;
	for (int64_t ch = c0; ch < c1; ch++) {
		wino_pad(xb + ch * c->H * c->W, c->H, c->W, 4 * B->ty0 - c->PT,
		    4 * B->ty0 - c->PT + 4 * B->nr + 2, c->PL, pad, B->Wq);
		wino_in(pad, B->Wq, B->nr, B->TWp, B->v + ch * 16, xs, ps);
		if (B->bt < B->btp)     /* the last panel's 8 tiles past bt */
			for (int xi = 0; xi < 36; xi++)
				memset(B->v + xi * xs + (B->btp - 16) * c->C + ch * 16 + 8, 0,
				    8 * sizeof(float));
	}
}

/* Filters [m0, m1) of the band (m0 a multiple of 6; m1 too, or M): their
 * rows of the 36 products, 6 filters by 16 tiles at a time, the output
 * transform and the epilogue. */
static void
wino_band_out(const WinoBand *B, const float *u, const float *bias, const float *z, float *y,
    const taprt_act *act, int64_t m0, int64_t m1)
{
	const taprt_conv2d *c = B->c;
	const int64_t M = c->M, C = c->C, OH = c->OH, OW = c->OW, P = OH * OW, bt = B->bt;
	if (m1 <= m0)
		return;
	const int64_t ns = (M + 5) / 6;
	for (int xi = 0; xi < 36; xi++)
		for (int64_t j = 0; j < bt; j += 16) {   /* a panel of V in L1 ... */
			const float *vp = B->v + xi * B->xs + j * C;
			const int nr = bt - j < 16 ? (int)(bt - j) : 16;
			for (int64_t s = m0 / 6; s * 6 < m1; s++)   /* ... for every sliver */
				taprt_gemm_6x16(C, u + (xi * ns + s) * C * 6, vp,
				    B->mo + (6 * s * 36 + xi) * bt + j, 36 * bt,
				    M - 6 * s < 6 ? (int)(M - 6 * s) : 6, nr);
		}
	const int64_t oh0 = 4 * B->ty0, oh1 = 4 * (B->ty0 + B->nr) < OH ? 4 * (B->ty0 + B->nr) : OH;
	const bool epi = bias || z || act->kind != TAPRT_ACT_NONE;
	for (int64_t m = m0; m < m1; m++) {
		float *ym = y + (B->b * M + m) * P;
		wino_out(B->mo + m * 36 * bt, bt, B->nr, B->TWp, ym + oh0 * OW, OW, oh1 - oh0);
		if (epi)
			taprt_epilogue_f32(ym + oh0 * OW, (oh1 - oh0) * OW, bias ? bias[m] : 0,
			    z ? z + (B->b * M + m) * P + oh0 * OW : NULL, act);
	}
}

#endif /* TAPRT_VEC8 */

int
taprt_conv_wino_f32(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w,
    const float *bias, const float *z, float *y, const taprt_conv2d *c, const taprt_act *act)
{
#ifdef TAPRT_VEC8
	if (taprt_isa() != TAPRT_ISA_AVX2 || getenv("TAPRT_NO_WINOGRAD") || !(n->fixed & 2) ||
	    (cx && cx->step > 0) || c->KH != 3 || c->KW != 3 || c->SH != 1 || c->SW != 1 ||
	    c->DH != 1 || c->DW != 1 || c->C < 16 || c->M < 16)
		return 0;
	const int64_t N = c->N, C = c->C, M = c->M, OH = c->OH, OW = c->OW;
	const int64_t TH = (OH + 3) / 4, TW = (OW + 3) / 4, TWp = (TW + 7) & ~(int64_t)7;
	/* enough tiles to make products worth their transforms (ResNet-18's
	 * 14x14 and 7x7 layers stay with the direct kernels) */
	if (TH * TWp < 48)
		return 0;
	const float *u = wino_get(n, w, M, C);
	if (!u)
		return taprt_fail(cx, "node '%s': out of memory for the Winograd weights", n->name);
	const int T = taprt_team_size();
	int64_t rows = WINO_BAND_TILES / TWp > 1 ? WINO_BAND_TILES / TWp : 1;
	/* Few bands for the team (one image: ResNet-18's 56x56 layer is two
	 * bands of 8 and 6 tile rows, its 28x28 one 7 rows, which a band per
	 * thread split 8:6 and 4:3): the team works on one band at a time,
	 * each thread transforming an equal share of the channels, then
	 * (after a barrier) computing an equal share of the filters.  With
	 * many bands each thread takes whole bands (no barriers). */
	const bool coop = T > 1 && N * ((TH + rows - 1) / rows) < 4 * T && M >= 16 * T;
	if (T > 1 && !coop && N * ((TH + rows - 1) / rows) < T) { /* a band for every thread */
		int64_t per = (T + N - 1) / N;
		rows = (TH + per - 1) / per;
	}
	const int64_t nb = (TH + rows - 1) / rows;
	/* the largest band's V and M, and a padded plane */
	const int64_t nt = rows * TWp, vm = 36 * (wino_xs(C, nt) + M * nt);
	const int64_t Wq = 4 * TWp + 2, R = 4 * rows + 2;
	int failed = 0;
	if (coop) {
		float *v = taprt_scratch((vm + T * R * Wq) * (int64_t)sizeof(float));
		if (!v)
			return taprt_fail(cx, "node '%s': out of memory for the Winograd buffers",
			    n->name);
		#pragma omp parallel
		{
			int id, TT = taprt_team(&id);
			float *pad = v + vm + id * R * Wq;
			/* filter shares in whole slivers of 6 */
			const int64_t ns = (M + 5) / 6, m0 = 6 * (ns * id / TT);
			const int64_t m1 = 6 * (ns * (id + 1) / TT) < M ? 6 * (ns * (id + 1) / TT) : M;
			for (int64_t bb = 0; bb < N * nb; bb++) {
				WinoBand B = wino_band(c, TWp, Wq, TH, rows, nb, bb, v);
				wino_band_in(&B, x, C * id / TT, C * (id + 1) / TT, pad);
				#pragma omp barrier
				wino_band_out(&B, u, bias, z, y, act, m0, m1);
				#pragma omp barrier     /* V is the next band's */
			}
		}
		return 1;
	}
	const int64_t bytes = (vm + R * Wq) * (int64_t)sizeof(float);
	#pragma omp parallel for if (T > 1 && N * nb > 1) schedule(static)
	for (int64_t bb = 0; bb < N * nb; bb++) {
		WinoBand B = wino_band(c, TWp, Wq, TH, rows, nb, bb, taprt_scratch(bytes));
		if (!B.v) {
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			continue;
		}
		wino_band_in(&B, x, 0, C, B.v + vm);
		wino_band_out(&B, u, bias, z, y, act, 0, M);
	}
	if (failed)
		return taprt_fail(cx, "node '%s': out of memory for the Winograd buffers", n->name);
	return 1;
#else
	(void)cx, (void)n, (void)x, (void)w, (void)bias, (void)z, (void)y, (void)c, (void)act;
	return 0;
#endif
}
