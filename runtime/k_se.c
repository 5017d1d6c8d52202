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
 * Needs: internal.h (the fused activations, GlobalAveragePool's means,
 * the scratch, taprt_team).
 *
 * Why one kernel: the four steps of MobileNetV3's blocks take 1 to 6 us
 * each, too little for a team of threads per step, so three of them ran
 * serial.  Here one team runs them all: each thread averages and later
 * scales one contiguous share of the channels and computes one share of
 * h's and e's rows (e's rows are its own channels, so the scale needs no
 * barrier), with two barriers per image instead of four joins.  The
 * matrix-vector products run 8 rows at a time, so that each loaded vector
 * of s or h feeds 8 independent multiply-add chains.
 */
#include <stdint.h>

#include "runtime/internal.h"

typedef float v16f __attribute__((vector_size(64), aligned(4)));

/* out[r] = B[r] + sum_i W[r, i] v[i] for the mb (at most 8) rows from r0,
 * a constant mb where it is 8 so the row loop unrolls into registers. */
static inline __attribute__((always_inline)) void
se_rows(const float *restrict w, int64_t n, const float *restrict v, const float *restrict b,
    float *restrict out, int64_t r0, int mb)
{
	v16f acc[8] = {{0}};
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		v16f x = *(const v16f *)(v + i);
		for (int m = 0; m < mb; m++)
			acc[m] += *(const v16f *)(w + (r0 + m) * n + i) * x;
	}
	for (int m = 0; m < mb; m++) {
		float s = 0;
		for (int l = 0; l < 16; l++)
			s += acc[m][l];
		for (int64_t j = i; j < n; j++)
			s += w[(r0 + m) * n + j] * v[j];
		out[r0 + m] = s + (b ? b[r0 + m] : 0);
	}
}

/* fp-contract: the multiply-adds as fused ones (-std=c11 turns the
 * contraction off) */
TAPRT_CLONES __attribute__((optimize("fp-contract=fast"))) static void
se_gemv(const float *restrict w, int64_t n, const float *restrict v, const float *restrict b,
    float *restrict out, int64_t r0, int64_t r1)
{
	for (; r0 + 8 <= r1; r0 += 8)
		se_rows(w, n, v, b, out, r0, 8);
	if (r0 < r1)
		se_rows(w, n, v, b, out, r0, (int)(r1 - r0));
}

/* y's planes [c0, c1) = x's, each times its e[c]. */
TAPRT_CLONES static void
se_scale(const float *restrict x, int64_t sz, const float *restrict e, float *restrict y,
    int64_t c0, int64_t c1)
{
	for (int64_t c = c0; c < c1; c++)
		for (int64_t i = 0; i < sz; i++)
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
	/* s (the means, then e in place) and h, shared by the team */
	float *s = taprt_scratch((C + R) * (int64_t)sizeof(float));
	if (!s) {
		taprt_fail(cx, "node '%s' (FusedSqueezeExcite): out of memory", n->name);
		return;
	}
	float *h = s + C;
	const float *xd = x->data, *W1 = w1->data, *W2 = w2->data;
	const float *B1 = b1 ? b1->data : NULL, *B2 = b2 ? b2->data : NULL;
	float *yd = y->data;
	#pragma omp parallel if (TAPRT_PAR(N * (2 * C * sz + 2 * C * R)))
	{
		int id, T = taprt_team(&id);
		int64_t c0 = C * id / T, c1 = C * (id + 1) / T;
		int64_t r0 = R * id / T, r1 = R * (id + 1) / T;
		for (int64_t b = 0; b < N; b++) {
			const float *xb = xd + b * C * sz;
			/* a thread's channels of s are its own until the next
			 * image's first barrier: another reads them only in
			 * between, for h */
			taprt_means_f32(xb + c0 * sz, s + c0, c1 - c0, sz);
			#pragma omp barrier
			se_gemv(W1, C, s, B1, h, r0, r1);
			taprt_epilogue_f32(h + r0, r1 - r0, 0, NULL, &act);
			#pragma omp barrier
			se_gemv(W2, R, h, B2, s, c0, c1);
			taprt_epilogue_f32(s + c0, c1 - c0, 0, NULL, &gate);
			se_scale(xb, sz, s, yd + b * C * sz, c0, c1);
		}
	}
}
