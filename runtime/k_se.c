/*
 * k_se.c - FusedSqueezeExcite: a squeeze-and-excitation block in one
 * kernel (passes/fuse_se.c makes it from GlobalAveragePool, two 1x1
 * FusedConvs and a Mul):
 *
 *   s = mean of each channel's plane of x         [N, C]
 *   h = act(W1 s + B1)                             [N, R]
 *   e = gate(W2 h + B2)                            [N, C]
 *   y = x * e, each channel's plane by its e
 *
 * Needs: internal.h (the fused activations and epilogues, GlobalAveragePool's
 * means, taprt_sgemm, the scratch, taprt_team).
 *
 * Why one kernel: the four steps of MobileNetV3's blocks take 1 to 6 us
 * each, too little for a team of threads per step, so three of them ran
 * serial.  Here one team runs them all: each thread averages and later
 * scales one contiguous share of the channels and computes one share of
 * h's and e's rows (e's rows are its own channels, so the scale needs no
 * barrier), with two barriers per image instead of four joins.  Where the
 * plane is large enough (taprt_split_pixels) a thread averages and scales
 * one band of pixels of every plane instead, the band the convolutions
 * around it split by (one barrier more for the means over the bands and
 * one before the scale, which reads every thread's e).  Where the two
 * matrices are small (SE_REDUNDANT) every thread computes all of h itself
 * instead of its share, and so one barrier an image is left: after the
 * means.
 */
#include <stdint.h>

#include "runtime/internal.h"

/* FCs of at most this many weights (R * C) run on every thread of the team
 * (below) */
#define SE_REDUNDANT 4096

/* The first len pixels of y's planes [c0, c1) (sz apart) = x's, each
 * times its e[c]; y may be x (the memory plan runs the block in place when
 * x dies there). */
TAPRT_CLONES static void
se_scale(const float *x, int64_t sz, const float *restrict e, float *y,
    int64_t c0, int64_t c1, int64_t len)
{
	for (int64_t c = c0; c < c1; c++)
		for (int64_t i = 0; i < len; i++)
			y[c * sz + i] = x[c * sz + i] * e[c];
}

/* Rows [r0, r1) of f(W v + B), W [rows][K] row-major, into out[0, r1 - r0):
 * the runtime's GEMM, which runs the library's sgemv on the calling thread
 * inside a team. */
static void
se_fc(const float *W, const float *B, const taprt_act *f, const float *v, int64_t r0,
    int64_t r1, int64_t K, float *out)
{
	taprt_sgemm(false, false, r1 - r0, 1, K, 1, W + r0 * K, K, v, 1, 0, out, 1);
	taprt_epilogue_vec_f32(out, r1 - r0, B ? B + r0 : NULL, NULL, f);
}

/* The means of channels [c0, c1) over the T threads' bands of sz pixels
 * (part [T][stride]: each thread's mean over its band), each band weighted by
 * its pixels, into out[0, c1 - c0). */
static void
se_combine(const float *part, int T, int64_t sz, int64_t c0, int64_t c1, int64_t stride,
    float *out)
{
	for (int64_t c = c0; c < c1; c++) {
		float m = 0;
		for (int t = 0; t < T; t++)
			m += part[t * stride + c] * (float)(sz * (t + 1) / T - sz * t / T);
		out[c - c0] = m / (float)sz;
	}
}

void
taprt_op_FusedSqueezeExcite(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *w1 = n->in[1], *w2 = n->in[2];
	const taprt_tensor *b1 = taprt_input(n, 3), *b2 = taprt_input(n, 4);
	taprt_tensor *y = n->out[0];
	taprt_act act, gate;
	if (x->dtype != TAPRT_F32 || y->dtype != TAPRT_F32 || w1->dtype != TAPRT_F32 ||
	    w2->dtype != TAPRT_F32 || (b1 && b1->dtype != TAPRT_F32) ||
	    (b2 && b2->dtype != TAPRT_F32) || x->rank < 3 || y->numel != x->numel) {
		taprt_fail(cx, "node '%s' (FusedSqueezeExcite): expected f32 [N,C,...] in and out",
		    n->name);
		return;
	}
	int64_t N = x->dims[0], C = x->dims[1], R = w1->rank ? w1->dims[0] : 0;
	if (N * C == 0)
		return;
	int64_t sz = x->numel / (N * C);
	if (w1->numel != R * C || w2->numel != C * R || (b1 && b1->numel != R) ||
	    (b2 && b2->numel != C) || R == 0 || sz == 0) {
		taprt_fail(cx, "node '%s' (FusedSqueezeExcite): weights of %lld and %lld elements,"
		    " biases of %lld and %lld do not fit %lld channels reduced to %lld", n->name,
		    (long long)w1->numel, (long long)w2->numel, (long long)(b1 ? b1->numel : 0),
		    (long long)(b2 ? b2->numel : 0), (long long)C, (long long)R);
		return;
	}
	if (taprt_act_named(cx, n, "activation", "activation_params", &act) ||
	    taprt_act_named(cx, n, "gate", "gate_params", &gate))
		return;
	/* Shared by the team: s (the means, then e in place) and h; with
	 * bands, each thread's means over its band of every plane (part).  s
	 * and part alternate between two copies from one image to the next,
	 * so that a thread may start the next image's means while another
	 * still reads this one's.  With small FCs (R * C <= SE_REDUNDANT) every
	 * thread computes h, and e where it needs it, itself, in its own line-
	 * aligned copy (mine): a barrier, at 0.25-1 us on two cores, costs
	 * more than 2 R C multiply-adds there (MobileNetV3's first block, 16
	 * channels reduced to 8 at 56x56, ran 5.2 us on one thread and 5.7 on
	 * two with four barriers). */
	const int nt0 = TAPRT_PAR(N * (2 * C * sz + 2 * C * R)) ? taprt_team_size() : 1;
	const bool bands = taprt_split_pixels(sz, nt0), redundant = R * C <= SE_REDUNDANT;
	const int64_t Cp = (C + 15) / 16 * 16, nmine = (R + C + 15) / 16 * 16;
	const int64_t npart = bands ? 2 * nt0 * Cp : 0, nm = redundant ? nt0 * nmine : 0;
	float *part = taprt_scratch((16 + npart + nm + 2 * C + R) * (int64_t)sizeof(float));
	if (!part) {
		taprt_fail(cx, "node '%s' (FusedSqueezeExcite): out of memory", n->name);
		return;
	}
	/* each thread's rows of part and its mine on lines of their own: a line
	 * both threads write into passes between the cores at each store */
	part = (float *)(((uintptr_t)part + 63) & ~(uintptr_t)63);
	float *mine = part + npart, *s = mine + nm, *h = s + 2 * C;
	const float *xd = x->data, *W1 = w1->data, *W2 = w2->data;
	const float *B1 = b1 ? b1->data : NULL, *B2 = b2 ? b2->data : NULL;
	float *yd = y->data;
	#pragma omp parallel num_threads(nt0) if (nt0 > 1)
	{
		int id, T = taprt_team(&id);
		int64_t c0 = C * id / T, c1 = C * (id + 1) / T;
		int64_t r0 = R * id / T, r1 = R * (id + 1) / T;
		int64_t p0 = sz * id / T, p1 = sz * (id + 1) / T;
		float *mh = mine + id * nmine, *me = mh + R;
		for (int64_t b = 0; b < N; b++) {
			const float *xb = xd + b * C * sz;
			float *yb = yd + b * C * sz, *sb = s + (b & 1) * C;
			float *pb = part + (b & 1) * T * Cp;
			if (bands) {
				/* the means of its band of every plane */
				for (int64_t c = 0; c < C; c++)
					taprt_means_f32(xb + c * sz + p0, pb + id * Cp + c, 1, p1 - p0);
				#pragma omp barrier
				if (redundant) { /* every channel's e, its own copy */
					se_combine(pb, T, sz, 0, C, Cp, me);
					se_fc(W1, B1, &act, me, 0, R, C, mh);
					se_fc(W2, B2, &gate, mh, 0, C, R, me);
					se_scale(xb + p0, sz, me, yb + p0, 0, C, p1 - p0);
					continue;
				}
				/* the means of its channels, over the bands */
				se_combine(pb, T, sz, c0, c1, Cp, sb + c0);
			} else {
				taprt_means_f32(xb + c0 * sz, sb + c0, c1 - c0, sz);
			}
			#pragma omp barrier
			if (redundant) { /* all of h, e of its own channels */
				se_fc(W1, B1, &act, sb, 0, R, C, mh);
				se_fc(W2, B2, &gate, mh, c0, c1, R, me + c0);
				se_scale(xb, sz, me, yb, c0, c1, sz);
				continue;
			}
			se_fc(W1, B1, &act, sb, r0, r1, C, h + r0);
			#pragma omp barrier
			se_fc(W2, B2, &gate, h, c0, c1, R, sb + c0);
			if (bands) {
				/* its band of every plane: needs every thread's e */
				#pragma omp barrier
				se_scale(xb + p0, sz, sb, yb + p0, 0, C, p1 - p0);
			} else { /* its own channels */
				se_scale(xb, sz, sb, yb, c0, c1, sz);
			}
		}
	}
}
