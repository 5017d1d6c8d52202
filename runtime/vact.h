/*
 * vact.h - the fused activations of runtime/taprt_acts.def on one vector
 * register, with k_elementwise.c's formulas, for the kernels that apply
 * them before a store (conv_pw.c's tiles, conv_dw_impl.h's pixels).
 *
 *   TAPRT_VACT(name, VF, VI, target attributes...)
 *
 * defines `static inline void name(VF *v, const taprt_act *a)`, *v =
 * act(*v), for a GCC vector type VF of floats and VI of as many ints
 * (through a pointer: no vector passed by value where the target has no
 * AVX).  Gelu (and an unknown kind) leaves *v as it is: the callers run
 * it after the store, through taprt_epilogue_f32 (taprt_vact_ok says
 * which).
 *
 * Needs: runtime/internal.h (taprt_act).
 */
#ifndef TAPC_RUNTIME_VACT_H
#define TAPC_RUNTIME_VACT_H

#include <stdbool.h>

#include "runtime/internal.h"

/* Does TAPRT_VACT's function apply a? */
static inline bool
taprt_vact_ok(const taprt_act *a)
{
	return a->kind != TAPRT_ACT_GELU;
}

/* lane-wise min(x, 1) then max(.., 0) of x (a local), by masks: x > 1 ? 1
 * : x < 0 ? 0 : x, the scalar formula's comparisons, so that NaN stays NaN
 * (numpy's clip, onnx's reference) */
#define TAPRT_VMIN1_(VF, VI, x, one) ((VF)(((VI)(one) & ((x) > (one))) | ((VI)(x) & ~((x) > (one)))))
#define TAPRT_VMAX0_(VF, VI, x, zero) ((VF)(((VI)(zero) & ((x) < (zero))) | ((VI)(x) & ~((x) < (zero)))))
#define TAPRT_VACT(NAME, VF, VI, ...)                                             \
static inline __attribute__((always_inline, __VA_ARGS__)) void                    \
NAME(VF *p, const taprt_act *a)                                                   \
{                                                                                 \
	const VF zero = {0}, one = 1.0f - zero;                                   \
	VF v = *p, t;                                                             \
	switch (a->kind) {                                                        \
	case TAPRT_ACT_RELU: /* v < 0 ? 0 : v: NaN stays NaN */                \
		*p = (VF)((VI)v & ~(v < zero));                                   \
		break;                                                            \
	case TAPRT_ACT_CLIP: { /* v < lo ? lo : v > hi ? hi : v */                \
		const VF lo = a->a - zero, hi = a->b - zero;                      \
		VI m = v < lo;                                                    \
		t = (VF)(((VI)lo & m) | ((VI)v & ~m));                            \
		m = t > hi;                                                       \
		*p = (VF)(((VI)hi & m) | ((VI)t & ~m));                           \
		break;                                                            \
	}                                                                         \
	case TAPRT_ACT_HARDSIGMOID:                                               \
		t = v * a->a + a->b;                                              \
		t = TAPRT_VMIN1_(VF, VI, t, one);                                 \
		*p = TAPRT_VMAX0_(VF, VI, t, zero);                               \
		break;                                                            \
	case TAPRT_ACT_HARDSWISH:                                                 \
		t = v * (1.0f / 6) + 0.5f;                                        \
		t = TAPRT_VMIN1_(VF, VI, t, one);                                 \
		*p = v * TAPRT_VMAX0_(VF, VI, t, zero);                           \
		break;                                                            \
	case TAPRT_ACT_LEAKYRELU: {                                               \
		t = v * a->a;                                                     \
		VI m = v < zero;                                                  \
		*p = (VF)(((VI)t & m) | ((VI)v & ~m));                            \
		break;                                                            \
	}                                                                         \
	default:                                                                  \
		break;                                                            \
	}                                                                         \
}

/* TAPRT_VACT with NAME macro-expanded first (NAME may be a macro call,
 * as conv_dw_impl.h's DW_(act)) */
#define TAPRT_VACT_X(NAME, ...) TAPRT_VACT(NAME, __VA_ARGS__)

#endif
