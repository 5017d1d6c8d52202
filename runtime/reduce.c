/*
 * reduce.c - the elementwise reductions every backend's collectives use.
 *
 * Needs nothing.  Shared so that a sum over a group is the same arithmetic
 * whichever backend moves the data: the threads and MPI backends both
 * reduce in group order with these functions, so they agree to the bit.
 */
#include "runtime/internal.h"

/*
 * acc = acc op x elementwise, per dtype.  Integer SUM/PROD compute in the
 * unsigned type U so overflow wraps instead of being undefined; MAX/MIN
 * propagate NaN (ISNAN is 0 for integers).
 */
#define REDUCERS(T, U, NAME, ISNAN)                                          \
	static void                                                          \
	NAME##_sum(void *acc, const void *x, int64_t n)                      \
	{                                                                    \
		T *restrict a = acc;                                         \
		const T *restrict b = x;                                     \
		for (int64_t i = 0; i < n; i++)                              \
			a[i] = (T)((U)a[i] + (U)b[i]);                       \
	}                                                                    \
	static void                                                          \
	NAME##_prod(void *acc, const void *x, int64_t n)                     \
	{                                                                    \
		T *restrict a = acc;                                         \
		const T *restrict b = x;                                     \
		for (int64_t i = 0; i < n; i++)                              \
			a[i] = (T)((U)a[i] * (U)b[i]);                       \
	}                                                                    \
	static void                                                          \
	NAME##_max(void *acc, const void *x, int64_t n)                      \
	{                                                                    \
		T *restrict a = acc;                                         \
		const T *restrict b = x;                                     \
		for (int64_t i = 0; i < n; i++)                              \
			a[i] = b[i] > a[i] || ISNAN(b[i]) ? b[i] : a[i];     \
	}                                                                    \
	static void                                                          \
	NAME##_min(void *acc, const void *x, int64_t n)                      \
	{                                                                    \
		T *restrict a = acc;                                         \
		const T *restrict b = x;                                     \
		for (int64_t i = 0; i < n; i++)                              \
			a[i] = b[i] < a[i] || ISNAN(b[i]) ? b[i] : a[i];     \
	}

#define FNAN(v) ((v) != (v))
#define INAN(v) 0
REDUCERS(float, float, f32, FNAN)
REDUCERS(double, double, f64, FNAN)
REDUCERS(int32_t, uint32_t, i32, INAN)
REDUCERS(int64_t, uint64_t, i64, INAN)

taprt_reducer *
taprt_reducer_for(int dtype, int op)
{
#define OPS(NAME) { NAME##_sum, NAME##_max, NAME##_min, NAME##_prod }
	static taprt_reducer *const tab[][4] = { OPS(f32), OPS(f64), OPS(i32), OPS(i64) };
#undef OPS
	int d;
	switch (dtype) {
	case TAPRT_F32: d = 0; break;
	case TAPRT_F64: d = 1; break;
	case TAPRT_I32: d = 2; break;
	case TAPRT_I64: d = 3; break;
	default: return NULL;
	}
	_Static_assert(TAPRT_SUM == 0 && TAPRT_MAX == 1 && TAPRT_MIN == 2 && TAPRT_PROD == 3,
	    "reducer table order");
	return op >= 0 && op < 4 ? tab[d][op] : NULL;
}

