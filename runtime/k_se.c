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
 * one before the scale, which reads every thread's e).  A
 * thread's rows of the matrix-vector products are one call of the
 * runtime's GEMM, which runs the library's sgemv on the calling thread
 * inside a team.
 */
#include <stdint.h>

#include "runtime/internal.h"

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
	/* s (the means, then e in place) and h, shared by the team; with
	 * bands, each thread's means over its band of every plane (part) */
	const int nt0 = TAPRT_PAR(N * (2 * C * sz + 2 * C * R)) ? taprt_team_size() : 1;
	const bool bands = taprt_split_pixels(sz, nt0);
	float *s = taprt_scratch((C + R + (bands ? nt0 * C : 0)) * (int64_t)sizeof(float));
	if (!s) {
		taprt_fail(cx, "node '%s' (FusedSqueezeExcite): out of memory", n->name);
		return;
	}
	float *h = s + C, *part = h + R;
	const float *xd = x->data, *W1 = w1->data, *W2 = w2->data;
	const float *B1 = b1 ? b1->data : NULL, *B2 = b2 ? b2->data : NULL;
	float *yd = y->data;
	#pragma omp parallel num_threads(nt0) if (nt0 > 1)
	{
		int id, T = taprt_team(&id);
		int64_t c0 = C * id / T, c1 = C * (id + 1) / T;
		int64_t r0 = R * id / T, r1 = R * (id + 1) / T;
		int64_t p0 = sz * id / T, p1 = sz * (id + 1) / T;
		for (int64_t b = 0; b < N; b++) {
			const float *xb = xd + b * C * sz;
			float *yb = yd + b * C * sz;
			/* a thread's channels of s (and its part) are its own
			 * until the next image's first barrier: another reads
			 * them only in between */
			if (bands) {
				/* the means of its band of every plane; then of its
				 * channels, over the bands, each weighted by its
				 * pixels */
				for (int64_t c = 0; c < C; c++)
					taprt_means_f32(xb + c * sz + p0, part + id * C + c, 1, p1 - p0);
				#pragma omp barrier
				for (int64_t c = c0; c < c1; c++) {
					float m = 0;
					for (int t = 0; t < T; t++)
						m += part[t * C + c] * (float)(sz * (t + 1) / T - sz * t / T);
					s[c] = m / (float)sz;
				}
			} else {
				taprt_means_f32(xb + c0 * sz, s + c0, c1 - c0, sz);
			}
			#pragma omp barrier
			taprt_sgemm(false, false, r1 - r0, 1, C, 1, W1 + r0 * C, C, s, 1, 0,
			    h + r0, 1);
			taprt_epilogue_vec_f32(h + r0, r1 - r0, B1 ? B1 + r0 : NULL, NULL, &act);
			#pragma omp barrier
			taprt_sgemm(false, false, c1 - c0, 1, R, 1, W2 + c0 * R, R, h, 1, 0,
			    s + c0, 1);
			taprt_epilogue_vec_f32(s + c0, c1 - c0, B2 ? B2 + c0 : NULL, NULL, &gate);
			if (bands) {
				/* its band of every plane: needs every thread's e */
				#pragma omp barrier
				se_scale(xb + p0, sz, s, yb + p0, 0, C, p1 - p0);
			} else { /* its own channels (the next image's s waits
				  * at its first barrier) */
				se_scale(xb, sz, s, yb, c0, c1, sz);
			}
		}
	}
}
