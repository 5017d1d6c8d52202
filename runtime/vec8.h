/*
 * vec8.h - 8-float AVX2 vectors in GCC's vector extensions, for the kernels
 * written with them: conv_wino.c, conv_dnnl.c's result transpose and
 * k_reduce.c's softmax row.
 *
 * Needs: GCC on x86-64 (target attributes, __builtin_shuffle); elsewhere
 * TAPRT_VEC8 stays undefined and those kernels are left out (their callers
 * check taprt_isa too, so an AVX2 function only runs on an AVX2 CPU).
 */
#ifndef TAPC_RUNTIME_VEC8_H
#define TAPC_RUNTIME_VEC8_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TAPRT_VEC8 1

/* A function for AVX2 + FMA CPUs; a * b + c there is one fused
 * multiply-add (-std=c11 turns the contraction off). */
#define TAPRT_AVX2 __attribute__((target("arch=x86-64-v3"), optimize("fp-contract=fast")))

typedef float v8 __attribute__((vector_size(32)));              /* aligned: registers */
typedef float v8u __attribute__((vector_size(32), aligned(4))); /* loads, stores anywhere */
typedef int v8i __attribute__((vector_size(32)));
#endif

#endif
