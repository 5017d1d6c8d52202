/*
 * half.h - the value of an IEEE half's bits and of a bf16's, and a float's
 * half and bf16, shared by tapc (legalize-half converts half weights at compile
 * time) and libtaprt (Cast, the half kernels) so that both compute the
 * same floats.
 *
 * Header-only and self-contained (no IR or runtime types); not installed.
 * Both conversions to float are exact; NaN payloads are kept.  bf16 is
 * the high half of a float: tapc's Cast truncates, as ONNX 1.12's
 * reference does.
 */
#ifndef TAPRT_HALF_H
#define TAPRT_HALF_H

#include <stdint.h>
#include <string.h>

static inline float
taprt_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	uint32_t bits;
	if (e == 0x1f)
		bits = sign | 0x7f800000 | m << 13;
	else if (e)
		bits = sign | (e + 112) << 23 | m << 13;
	else if (!m)
		bits = sign;
	else {                  /* subnormal: normalize */
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		bits = sign | e << 23 | (m & 0x3ff) << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline float
taprt_bf16_to_float(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/* float -> IEEE half, round to nearest even (Cast's; k_random.c's halves) */
static inline uint16_t
taprt_float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return sign | 0x7e00;                   /* NaN */
	if (ax >= 0x477ff000)
		return sign | 0x7c00;                   /* overflows to inf */
	if (ax < 0x38800000) {                          /* subnormal or zero */
		if (ax < 0x33000000)
			return sign;
		uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
		uint32_t shift = 126 - e;               /* 14..24 */
		uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return sign | (uint16_t)r;
	}
	uint32_t r = ((ax - 0x38000000) >> 13);
	uint32_t rem = ax & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++;
	return sign | (uint16_t)r;
}

static inline uint16_t
taprt_float_to_bf16(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return (uint16_t)(b >> 16);
}

#endif
