/*
 * internal.h - helpers shared inside libtaprt; not installed.
 */
#ifndef TAPRT_INTERNAL_H
#define TAPRT_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

#include "runtime/taprt.h"

/* Record an error message in cx (first one wins) and return -1. */
static inline int
taprt_fail(taprt_ctx *cx, const char *fmt, ...)
{
	if (cx && !cx->error[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(cx->error, sizeof cx->error, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Normalize a possibly negative axis for a tensor of this rank. */
static inline int
taprt_axis(int64_t axis, int rank)
{
	return (int)(axis < 0 ? axis + rank : axis);
}

/* Element strides (row-major) of t. */
static inline void
taprt_strides(const taprt_tensor *t, int64_t *st)
{
	int64_t s = 1;
	for (int i = t->rank - 1; i >= 0; i--) {
		st[i] = s;
		s *= t->dims[i];
	}
}

/* Strides of t broadcast against out's shape (numpy rules, right-aligned):
 * 0 where t's dim is 1 or missing. */
static inline void
taprt_bcast_strides(const taprt_tensor *t, const taprt_tensor *out, int64_t *st)
{
	int64_t own[TAPRT_MAX_RANK];
	taprt_strides(t, own);
	int off = out->rank - t->rank;
	for (int i = 0; i < out->rank; i++) {
		int j = i - off;
		st[i] = j < 0 || t->dims[j] == 1 ? 0 : own[j];
	}
}

/* BLAS threads per rank (set by taprt_main). */
void taprt_blas_threads(int n);

#endif
