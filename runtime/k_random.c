/*
 * k_random.c - RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike and Bernoulli: every element from a counter-based
 * stream.
 *
 * Needs: internal.h (the node and tensor types, taprt_fail,
 * taprt_bad_dtype, TAPRT_PAR, taprt_get_any and taprt_set_any: each
 * value stored with Cast's conversion, halves rounded to nearest even).
 *
 * Element i of a node's output is a function of (seed, the node's name, the
 * run, the micro-batch, the data-parallel replica, i) alone: SplitMix64's
 * finalizer over those words (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014; the mixer of java.util's
 * SplittableRandom), so any thread can compute any element and a run is
 * reproducible.  The seed is the node's `seed` attribute when it has one,
 * else TAPRT_SEED from the environment, else 0: tapc's programs are
 * deterministic unless asked otherwise (the spec lets a runtime choose a
 * seed; onnxruntime draws one).  The ranks of a tensor-parallel group get
 * the same values, as every rank computes a replicated tensor whole; the
 * replicas of data parallelism and the micro-batches of a pipeline their
 * own, as their samples are different ones; each run (cx->runs) new ones.
 *
 * Uniform: the high bits of the element's word as [0, 1), as many as the
 * output type's significand has (24 for f32, 53 f64, 11 f16, 8 bf16),
 * scaled to [low, high).  Normal: Box-Muller on two 32-bit halves
 * of the word, u1 in (0, 1].  Bernoulli: 1 where u < p.  f16 and bf16
 * outputs are rounded as Cast rounds them; Bernoulli reads half
 * probabilities and writes any numeric type or bool.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

static uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The node's stream: a word from the seed, name, run, micro-batch and
 * replica; element i's word is mix(key + (i + 1) * golden). */
static uint64_t
stream_key(const taprt_ctx *cx, const taprt_node *n)
{
	uint64_t seed = 0;
	const taprt_attr *a = taprt_attr_get(n, "seed");
	if (a) {
		double s = a->f;
		memcpy(&seed, &s, sizeof seed);
	} else {
		const char *e = getenv("TAPRT_SEED");
		seed = e ? strtoull(e, NULL, 0) : 0;
	}
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
	for (const char *p = n->name; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	uint64_t k = mix(seed ^ 0x9e3779b97f4a7c15ull);
	k = mix(k ^ h);
	k = mix(k ^ (uint64_t)cx->runs);
	k = mix(k ^ (uint64_t)(uint32_t)cx->micro << 32 ^ (uint64_t)(uint32_t)cx->dp_rank);
	return k;
}

static inline uint64_t
word(uint64_t key, int64_t i)
{
	return mix(key + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
}

/* [0, 1) from a word's high bits: as many as the type's significand has
 * (53 f64, 24 f32, 11 f16, 8 bf16), so the value is exact in it and a
 * uniform never rounds up to its high end */
static inline double
unit(uint64_t w, int bits)
{
	return (double)(w >> (64 - bits)) * ldexp(1, -bits);
}

static int
bits_of(int dtype)
{
	switch (dtype) {
	case TAPRT_F64: return 53;
	case TAPRT_F16: return 11;
	case TAPRT_BF16: return 8;
	default: return 24;
	}
}

/* A standard normal deviate from a word: Box-Muller, u1 in (0, 1]. */
static inline double
normal(uint64_t w)
{
	double u1 = ((double)(w >> 32) + 1) * 0x1p-32, u2 = (double)(uint32_t)w * 0x1p-32;
	return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static bool
float_type(int dt)
{
	return dt == TAPRT_F32 || dt == TAPRT_F64 || dt == TAPRT_F16 || dt == TAPRT_BF16;
}

/* Uniform (normal: false) or normal deviates into the node's output. */
static void
fill(taprt_ctx *cx, const taprt_node *n, const char *op, bool gauss)
{
	taprt_tensor *y = n->out[0];
	if (!float_type(y->dtype)) {
		taprt_bad_dtype(cx, n, op, y->dtype);
		return;
	}
	const double a = taprt_attr_float(n, gauss ? "mean" : "low", 0),
	    b = taprt_attr_float(n, gauss ? "scale" : "high", 1);
	const uint64_t key = stream_key(cx, n);
	const int bits = bits_of(y->dtype);
	const int64_t count = y->numel;
	#pragma omp parallel for if (TAPRT_PAR(count * 8)) schedule(static)
	for (int64_t i = 0; i < count; i++) {
		uint64_t w = word(key, i);
		taprt_set_any(y, i, gauss ? a + b * normal(w) : a + (b - a) * unit(w, bits));
	}
}

void
taprt_op_RandomUniform(taprt_ctx *cx, const taprt_node *n)
{
	fill(cx, n, "RandomUniform", false);
}

void
taprt_op_RandomNormal(taprt_ctx *cx, const taprt_node *n)
{
	fill(cx, n, "RandomNormal", true);
}

void
taprt_op_RandomUniformLike(taprt_ctx *cx, const taprt_node *n)
{
	fill(cx, n, "RandomUniformLike", false);
}

void
taprt_op_RandomNormalLike(taprt_ctx *cx, const taprt_node *n)
{
	fill(cx, n, "RandomNormalLike", true);
}

void
taprt_op_Bernoulli(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *p = n->in[0];
	taprt_tensor *y = n->out[0];
	if (!float_type(p->dtype)) {
		taprt_bad_dtype(cx, n, "Bernoulli", p->dtype);
		return;
	}
	const uint64_t key = stream_key(cx, n);
	const int bits = p->dtype == TAPRT_F64 ? 53 : 24;
	const int64_t count = y->numel;
	#pragma omp parallel for if (TAPRT_PAR(count * 4)) schedule(static)
	for (int64_t i = 0; i < count; i++)
		taprt_set_any(y, i, unit(word(key, i), bits) < taprt_get_any(p, i) ? 1 : 0);
}
