/*
 * k_index.c - kernels that index by data: GatherElements, ScatterElements
 * (and its opset-9 name Scatter), ScatterND, OneHot, CumSum, TopK.
 *
 * Needs: output dims, dtypes and buffers set by tapc (static shapes; TopK's
 * k and OneHot's depth are the output's dims along the axis).  Indices are
 * run-time data, so every one is range-checked here: an index outside
 * [-d, d) is a taprt_fail error naming it, never a stray read or write
 * (OneHot alone maps such an index to an all-off row, as the spec says).
 * Gathers and plain scatters move bytes and take every dtype of size 1, 2,
 * 4 or 8; the scatter reductions, CumSum and TopK compute and switch on the
 * dtype.  Integer sums and products wrap (done in unsigned arithmetic), as
 * numpy's and onnxruntime's do, instead of overflowing.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/internal.h"

/* X(dtype, C type, unsigned C type of the same size, suffix): the numeric
 * types the computing kernels support. */
#define NUM_TYPES(X)                                                          \
	X(TAPRT_F32, float, float, f32) X(TAPRT_F64, double, double, f64)     \
	X(TAPRT_I8, int8_t, uint8_t, i8) X(TAPRT_U8, uint8_t, uint8_t, u8)     \
	X(TAPRT_I16, int16_t, uint16_t, i16) X(TAPRT_U16, uint16_t, uint16_t, u16) \
	X(TAPRT_I32, int32_t, uint32_t, i32) X(TAPRT_U32, uint32_t, uint32_t, u32) \
	X(TAPRT_I64, int64_t, uint64_t, i64) X(TAPRT_U64, uint64_t, uint64_t, u64)

static inline void
copy(void *dst, const void *src, int64_t bytes)
{
	if (bytes > 0 && dst != src)
		memcpy(dst, src, (size_t)bytes);
}

static int
esize(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *t)
{
	int es = taprt_dtype_size(t->dtype);
	if (!es)
		taprt_fail(cx, "node '%s' (%s): unsupported dtype %d", n->name, op, t->dtype);
	return es;
}

static inline int64_t
index_at(const taprt_tensor *t, int64_t i)
{
	return t->dtype == TAPRT_I32 ? ((const int32_t *)t->data)[i] :
	    ((const int64_t *)t->data)[i];
}

static bool
want_indices(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *t)
{
	if (t->dtype == TAPRT_I32 || t->dtype == TAPRT_I64)
		return true;
	taprt_fail(cx, "node '%s' (%s): indices are %s, expected i32 or i64", n->name, op,
	    taprt_dtype_name(t->dtype));
	return false;
}

/* Index k on an axis of length d, wrapped when negative: false if outside [-d, d). */
static inline bool
wrap(int64_t *k, int64_t d)
{
	if (*k < 0)
		*k += d;
	return *k >= 0 && *k < d;
}

/* ------------------------------------------------------------ reductions */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

/* The reduction attribute's code, or -1 after reporting an unknown one. */
static int
reduction(taprt_ctx *cx, const taprt_node *n, const char *op)
{
	const char *r = taprt_attr_str(n, "reduction", "none");
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	for (int i = 0; i < 5; i++)
		if (!strcmp(r, names[i]))
			return i;
	taprt_fail(cx, "node '%s' (%s): unknown reduction '%s'", n->name, op, r);
	return -1;
}

/* cnt elements at d combined with those at s by red; false for a dtype
 * without arithmetic.  Sums and products of integers wrap. */
#define RED_LOOP(E, T, U, sfx)                                                \
	case E: {                                                             \
		T *d_ = d;                                                    \
		const T *s_ = s;                                              \
		for (int64_t i = 0; i < cnt; i++)                             \
			switch (red) {                                        \
			case RED_ADD: d_[i] = (T)((U)d_[i] + (U)s_[i]); break; \
			case RED_MUL: d_[i] = (T)((U)d_[i] * (U)s_[i]); break; \
			case RED_MAX: d_[i] = s_[i] > d_[i] ? s_[i] : d_[i]; break; \
			default: d_[i] = s_[i] < d_[i] ? s_[i] : d_[i]; break; \
			}                                                     \
		return true;                                                  \
	}

static bool
combine(int dtype, int red, void *d, const void *s, int64_t cnt)
{
	switch (dtype) {
	NUM_TYPES(RED_LOOP)
	default:
		return false;
	}
}
#undef RED_LOOP

static bool
can_combine(taprt_ctx *cx, const taprt_node *n, const char *op, int red, int dtype)
{
	unsigned char a[8] = {0}, b[8] = {0};
	if (red == RED_NONE || combine(dtype, red, a, b, 1))
		return true;
	taprt_fail(cx, "node '%s' (%s): reduction on %s is not supported", n->name, op,
	    taprt_dtype_name(dtype));
	return false;
}

/* ------------------------------------------- GatherElements, ScatterElements */

/*
 * Walk every position of idx (rank r, row-major): element e of idx sits at
 * data offset base + k * xs[axis], base from the other coordinates with
 * data's strides xs.  Calls body(e, off) for each, with k checked against
 * d = data's dim along axis; returns the first bad index through *bad.
 */
#define WALK_ELEMENTS(idx, xs, axis, d, bad, body)                            \
	do {                                                                  \
		int r_ = (idx)->rank;                                         \
		int64_t pos_[TAPRT_MAX_RANK] = {0}, base_ = 0;                \
		int64_t inner_ = (idx)->dims[r_ - 1];                         \
		int64_t ws_ = r_ - 1 == (axis) ? 0 : (xs)[r_ - 1];            \
		int64_t e = 0;                                                \
		for (int64_t row_ = 0, rows_ = (idx)->numel / inner_; row_ < rows_; row_++) { \
			for (int64_t j_ = 0; j_ < inner_; j_++, e++) {        \
				int64_t k_ = index_at(idx, e);                \
				if (!wrap(&k_, d)) {                          \
					*(bad) = index_at(idx, e);            \
					goto walk_bad_;                       \
				}                                             \
				int64_t off = base_ + j_ * ws_ + k_ * (xs)[axis]; \
				body;                                         \
			}                                                     \
			for (int k = r_ - 2; k >= 0; k--) {                   \
				int64_t s_ = k == (axis) ? 0 : (xs)[k];       \
				base_ += s_;                                  \
				if (++pos_[k] < (idx)->dims[k])               \
					break;                                \
				base_ -= s_ * (idx)->dims[k];                 \
				pos_[k] = 0;                                  \
			}                                                     \
		}                                                             \
	} while (0)

void
taprt_op_GatherElements(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *idx = n->in[1];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "GatherElements", o);
	if (!es || o->numel == 0 || !want_indices(cx, n, "GatherElements", idx))
		return;
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), x->rank);
	int64_t xs[TAPRT_MAX_RANK], d = x->dims[axis], bad = 0;
	taprt_strides(x, xs);
	const char *s = x->data;
	char *dst = o->data;
	switch (es) {
	case 4:
		WALK_ELEMENTS(idx, xs, axis, d, &bad,
		    memcpy(dst + e * 4, s + off * 4, 4));
		break;
	case 8:
		WALK_ELEMENTS(idx, xs, axis, d, &bad,
		    memcpy(dst + e * 8, s + off * 8, 8));
		break;
	default:
		WALK_ELEMENTS(idx, xs, axis, d, &bad,
		    memcpy(dst + e * es, s + off * es, (size_t)es));
		break;
	}
	return;
walk_bad_:
	taprt_fail(cx, "node '%s' (GatherElements): index %lld out of range [-%lld, %lld)", n->name,
	    (long long)bad, (long long)d, (long long)d);
}

static void
scatter_elements(taprt_ctx *cx, const taprt_node *n, const char *op)
{
	const taprt_tensor *x = n->in[0], *idx = n->in[1], *upd = n->in[2];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, op, o);
	int red = reduction(cx, n, op);
	if (!es || red < 0 || !want_indices(cx, n, op, idx) || !can_combine(cx, n, op, red, o->dtype))
		return;
	copy(o->data, x->data, o->numel * es);
	if (idx->numel == 0)
		return;
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), x->rank);
	int64_t xs[TAPRT_MAX_RANK], d = x->dims[axis], bad = 0;
	taprt_strides(x, xs);
	char *dst = o->data;
	const char *s = upd->data;
	/* in order: with reduction none a repeated index keeps the last update */
	if (red == RED_NONE)
		WALK_ELEMENTS(idx, xs, axis, d, &bad,
		    memcpy(dst + off * es, s + e * es, (size_t)es));
	else
		WALK_ELEMENTS(idx, xs, axis, d, &bad,
		    combine(o->dtype, red, dst + off * es, s + e * es, 1));
	return;
walk_bad_:
	taprt_fail(cx, "node '%s' (%s): index %lld out of range [-%lld, %lld)", n->name, op,
	    (long long)bad, (long long)d, (long long)d);
}

void
taprt_op_ScatterElements(taprt_ctx *cx, const taprt_node *n)
{
	scatter_elements(cx, n, "ScatterElements");
}

/* Scatter (opsets 9 and 10) is ScatterElements without a reduction. */
void
taprt_op_Scatter(taprt_ctx *cx, const taprt_node *n)
{
	scatter_elements(cx, n, "Scatter");
}

/* -------------------------------------------------------------- ScatterND */

void
taprt_op_ScatterND(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *idx = n->in[1], *upd = n->in[2];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "ScatterND", o);
	int red = reduction(cx, n, "ScatterND");
	if (!es || red < 0 || !want_indices(cx, n, "ScatterND", idx) ||
	    !can_combine(cx, n, "ScatterND", red, o->dtype))
		return;
	copy(o->data, x->data, o->numel * es);
	/* indices [..., k] address slices of data's dims [k:], each `slice` long */
	int q = idx->rank;
	int64_t k = idx->dims[q - 1], tuples = 1, slice = 1, xs[TAPRT_MAX_RANK];
	if (k > x->rank) {
		taprt_fail(cx, "node '%s' (ScatterND): index tuples of %lld for rank %d", n->name,
		    (long long)k, x->rank);
		return;
	}
	for (int i = 0; i < q - 1; i++)
		tuples *= idx->dims[i];
	for (int i = (int)k; i < x->rank; i++)
		slice *= x->dims[i];
	if (slice == 0)
		return;
	taprt_strides(x, xs);
	char *dst = o->data;
	const char *s = upd->data;
	for (int64_t t = 0; t < tuples; t++) {
		int64_t off = 0;
		for (int j = 0; j < k; j++) {
			int64_t v = index_at(idx, t * k + j);
			if (!wrap(&v, x->dims[j])) {
				taprt_fail(cx, "node '%s' (ScatterND): index %lld out of range [-%lld, %lld) for dim %d",
				    n->name, (long long)index_at(idx, t * k + j), (long long)x->dims[j],
				    (long long)x->dims[j], j);
				return;
			}
			off += v * xs[j];
		}
		/* in order: with reduction none a repeated index keeps the last update */
		if (red == RED_NONE)
			memcpy(dst + off * es, s + t * slice * es, (size_t)(slice * es));
		else
			combine(o->dtype, red, dst + off * es, s + t * slice * es, slice);
	}
}

/* -------------------------------------------------------------- GatherND */

/* For each of the B = prod(dims[:b]) batch blocks and each index tuple in
 * it, the slice of data's dims [b + k:] it addresses, copied whole. */
void
taprt_op_GatherND(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *idx = n->in[1];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "GatherND", o);
	if (!es || !want_indices(cx, n, "GatherND", idx) || o->numel == 0)
		return;
	int q = idx->rank, b = (int)taprt_attr_int(n, "batch_dims", 0);
	int64_t k = idx->dims[q - 1], B = 1, T = 1, slice = 1, block = 1, xs[TAPRT_MAX_RANK];
	if (b < 0 || b >= q || k < 1 || k > x->rank - b) {
		taprt_fail(cx, "node '%s' (GatherND): index tuples of %lld, batch_dims %d, rank %d",
		    n->name, (long long)k, b, x->rank);
		return;
	}
	for (int i = 0; i < b; i++)
		B *= x->dims[i];
	for (int i = b; i < q - 1; i++)
		T *= idx->dims[i];
	for (int i = b; i < x->rank; i++)
		block *= x->dims[i];
	for (int i = b + (int)k; i < x->rank; i++)
		slice *= x->dims[i];
	taprt_strides(x, xs);
	const char *src = x->data;
	char *dst = o->data;
	for (int64_t bi = 0; bi < B; bi++)
		for (int64_t t = 0; t < T; t++) {
			int64_t off = bi * block, e = (bi * T + t) * k;
			for (int j = 0; j < k; j++) {
				int64_t v = index_at(idx, e + j), d = x->dims[b + j];
				if (!wrap(&v, d)) {
					taprt_fail(cx, "node '%s' (GatherND): index %lld out of range [-%lld, %lld) for dim %d",
					    n->name, (long long)index_at(idx, e + j), (long long)d, (long long)d,
					    b + j);
					return;
				}
				off += v * xs[b + j];
			}
			copy(dst + (bi * T + t) * slice * es, src + off * es, slice * es);
		}
}

/* ----------------------------------------------------------------- OneHot */

/* Element i of a numeric tensor as an integer, truncated toward zero (as a
 * cast does); false when it has none (NaN, out of int64's range). */
static bool
int_at(const taprt_tensor *t, int64_t i, int64_t *v)
{
	double f;
	switch (t->dtype) {
	case TAPRT_I8: *v = ((const int8_t *)t->data)[i]; return true;
	case TAPRT_U8: *v = ((const uint8_t *)t->data)[i]; return true;
	case TAPRT_I16: *v = ((const int16_t *)t->data)[i]; return true;
	case TAPRT_U16: *v = ((const uint16_t *)t->data)[i]; return true;
	case TAPRT_I32: *v = ((const int32_t *)t->data)[i]; return true;
	case TAPRT_U32: *v = ((const uint32_t *)t->data)[i]; return true;
	case TAPRT_I64: *v = ((const int64_t *)t->data)[i]; return true;
	case TAPRT_U64: {
		uint64_t u = ((const uint64_t *)t->data)[i];
		*v = u > INT64_MAX ? INT64_MAX : (int64_t)u;
		return true;
	}
	case TAPRT_F32: f = ((const float *)t->data)[i]; break;
	case TAPRT_F64: f = ((const double *)t->data)[i]; break;
	default: return false;
	}
	if (!(f > -9.2e18 && f < 9.2e18))
		return false;
	*v = (int64_t)f;
	return true;
}

void
taprt_op_OneHot(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *idx = n->in[0], *val = n->in[2];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "OneHot", o);
	if (!es || o->numel == 0)
		return;
	int64_t probe;
	if (idx->numel > 0 && !int_at(idx, 0, &probe) && idx->dtype != TAPRT_F32 &&
	    idx->dtype != TAPRT_F64) {
		taprt_bad_dtype(cx, n, "OneHot", idx->dtype);
		return;
	}
	if (val->numel != 2 || val->dtype != o->dtype) {
		taprt_fail(cx, "node '%s' (OneHot): values has %lld elements of %s, expected [off, on] of %s",
		    n->name, (long long)val->numel, taprt_dtype_name(val->dtype),
		    taprt_dtype_name(o->dtype));
		return;
	}
	int axis = taprt_axis(taprt_attr_int(n, "axis", -1), o->rank);
	int64_t depth = o->dims[axis], outer = 1;
	for (int i = 0; i < axis; i++)
		outer *= o->dims[i];
	int64_t inner = idx->numel / outer;     /* outer > 0: o->numel > 0 */
	const char *off = val->data, *on = off + es;
	char *d = o->data;
	for (int64_t i = 0; i < o->numel; i++)
		memcpy(d + i * es, off, (size_t)es);
	/* opset 11 wraps negative indices; before, they were out of range */
	bool neg = n->opset >= 11;
	for (int64_t a = 0; a < outer; a++)
		for (int64_t b = 0; b < inner; b++) {
			int64_t k;
			if (!int_at(idx, a * inner + b, &k))
				continue;
			if (k < 0 && neg)
				k += depth;
			if (k < 0 || k >= depth)
				continue;       /* out of range: an all-off row */
			memcpy(d + ((a * depth + k) * inner + b) * es, on, (size_t)es);
		}
}

/* ----------------------------------------------------------------- CumSum */

/* Running sums along an axis of length len, `inner` lines side by side
 * (the axis's stride), for `outer` blocks.  Integers wrap. */
#define CUMSUM(E, T, U, sfx)                                                  \
static void                                                                   \
cumsum_##sfx(const T *x, T *y, int64_t outer, int64_t len, int64_t inner,     \
    bool excl, bool rev)                                                      \
{                                                                             \
	int64_t step = rev ? -inner : inner;                                  \
	for (int64_t o = 0; o < outer; o++) {                                 \
		const T *xb = x + o * len * inner;                            \
		T *yb = y + o * len * inner;                                  \
		int64_t first = rev ? (len - 1) * inner : 0;                  \
		for (int64_t i = 0; i < inner; i++)                           \
			yb[first + i] = excl ? (T)0 : xb[first + i];          \
		for (int64_t a = 1, p = first, c = first + step; a < len;     \
		    a++, p = c, c += step) {                                  \
			const T *xs = excl ? xb + p : xb + c;                 \
			for (int64_t i = 0; i < inner; i++)                   \
				yb[c + i] = (T)((U)yb[p + i] + (U)xs[i]);     \
		}                                                             \
	}                                                                     \
}
NUM_TYPES(CUMSUM)
#undef CUMSUM

void
taprt_op_CumSum(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *at = n->in[1];
	taprt_tensor *o = n->out[0];
	if (o->numel == 0)
		return;
	/* the axis may be a run-time input: it does not change the shape */
	if ((at->dtype != TAPRT_I32 && at->dtype != TAPRT_I64) || at->numel != 1) {
		taprt_fail(cx, "node '%s' (CumSum): axis is %lld elements of %s, expected one i32 or i64",
		    n->name, (long long)at->numel, taprt_dtype_name(at->dtype));
		return;
	}
	int64_t axis = index_at(at, 0);
	if (axis < -x->rank || axis >= x->rank) {
		taprt_fail(cx, "node '%s' (CumSum): axis %lld out of range for rank %d", n->name,
		    (long long)axis, x->rank);
		return;
	}
	if (axis < 0)
		axis += x->rank;
	int64_t outer = 1, inner = 1, len = x->dims[axis];
	for (int i = 0; i < axis; i++)
		outer *= x->dims[i];
	for (int i = (int)axis + 1; i < x->rank; i++)
		inner *= x->dims[i];
	bool excl = taprt_attr_int(n, "exclusive", 0) != 0;
	bool rev = taprt_attr_int(n, "reverse", 0) != 0;
	switch (o->dtype) {
#define CASE(E, T, U, sfx)                                                    \
	case E: cumsum_##sfx(x->data, o->data, outer, len, inner, excl, rev); break;
	NUM_TYPES(CASE)
#undef CASE
	default:
		taprt_bad_dtype(cx, n, "CumSum", o->dtype);
	}
}

/* ------------------------------------------------------------------- TopK */

/*
 * Per line (n values, stride st): the indices of the k best, best first,
 * ties to the lower index.  "Best" is larger (or smaller) with NaN above
 * every number, as torch.topk orders it.  k <= 16 keeps a sorted list of
 * the best so far (O(n*k)); larger k merge-sorts all n indices (stable, so
 * equal values keep index order).  a and b hold n entries each; returns
 * the one that holds the result.
 */
#define IS_NAN(v) _Generic((v), float: isnan((float)(v)), double: isnan((double)(v)), default: 0)
#define TOPK(E, T, U, sfx)                                                    \
static inline bool                                                            \
better_##sfx(T a, T b, bool largest)                                          \
{                                                                             \
	bool na = IS_NAN(a), nb = IS_NAN(b);                                  \
	if (largest)                                                          \
		return (na && !nb) || a > b;                                  \
	return (!na && nb) || a < b;                                          \
}                                                                             \
static int64_t *                                                              \
topk_##sfx(const T *x, int64_t n, int64_t st, int64_t k, bool largest,        \
    int64_t *a, int64_t *b)                                                   \
{                                                                             \
	if (k <= 16) {                                                        \
		int64_t cnt = 0;                                              \
		for (int64_t i = 0; i < n && k > 0; i++) {                    \
			T v = x[i * st];                                      \
			if (cnt == k && !better_##sfx(v, x[a[cnt - 1] * st], largest)) \
				continue;                                     \
			int64_t j = cnt < k ? cnt++ : cnt - 1;                \
			for (; j > 0 && better_##sfx(v, x[a[j - 1] * st], largest); j--) \
				a[j] = a[j - 1];                              \
			a[j] = i;                                             \
		}                                                             \
		return a;                                                     \
	}                                                                     \
	for (int64_t i = 0; i < n; i++)                                       \
		a[i] = i;                                                     \
	for (int64_t w = 1; w < n; w *= 2) {                                  \
		for (int64_t lo = 0; lo < n; lo += 2 * w) {                   \
			int64_t mid = lo + w < n ? lo + w : n;                \
			int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;         \
			int64_t p = lo, q = mid, t = lo;                      \
			while (p < mid && q < hi)                             \
				b[t++] = better_##sfx(x[a[q] * st], x[a[p] * st], largest) ? \
				    a[q++] : a[p++];                          \
			while (p < mid)                                       \
				b[t++] = a[p++];                              \
			while (q < hi)                                        \
				b[t++] = a[q++];                              \
		}                                                             \
		int64_t *sw = a;                                              \
		a = b;                                                        \
		b = sw;                                                       \
	}                                                                     \
	return a;                                                             \
}                                                                             \
static void                                                                   \
topk_lines_##sfx(const T *x, T *vals, int64_t *inds, int64_t outer, int64_t n, \
    int64_t inner, int64_t k, bool largest, int64_t *a, int64_t *b)           \
{                                                                             \
	for (int64_t o = 0; o < outer; o++)                                   \
		for (int64_t i = 0; i < inner; i++) {                         \
			const T *line = x + o * n * inner + i;                \
			int64_t *best = topk_##sfx(line, n, inner, k, largest, a, b); \
			int64_t at = o * k * inner + i;                       \
			for (int64_t j = 0; j < k; j++, at += inner) {        \
				if (vals)                                     \
					vals[at] = line[best[j] * inner];     \
				if (inds)                                     \
					inds[at] = best[j];                   \
			}                                                     \
		}                                                             \
}
NUM_TYPES(TOPK)
#undef TOPK

void
taprt_op_TopK(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *v = taprt_output(n, 0), *ix = taprt_output(n, 1);
	const taprt_tensor *shape = v ? v : ix;
	if (!shape || shape->numel == 0)
		return;
	if (ix && ix->dtype != TAPRT_I64) {
		taprt_fail(cx, "node '%s' (TopK): indices output is %s, expected i64", n->name,
		    taprt_dtype_name(ix->dtype));
		return;
	}
	/* k is the outputs' dim along the axis: tapc checked it against x */
	int axis = taprt_axis(taprt_attr_int(n, "axis", -1), x->rank);
	int64_t outer = 1, inner = 1, len = x->dims[axis], k = shape->dims[axis];
	for (int i = 0; i < axis; i++)
		outer *= x->dims[i];
	for (int i = axis + 1; i < x->rank; i++)
		inner *= x->dims[i];
	if (k > len) {
		taprt_fail(cx, "node '%s' (TopK): k %lld is more than dim %d's %lld", n->name,
		    (long long)k, axis, (long long)len);
		return;
	}
	bool largest = taprt_attr_int(n, "largest", 1) != 0;
	/* sorted=0 leaves the order to us: sorted is a valid order too */
	int64_t *a = taprt_scratch(2 * len * (int64_t)sizeof(int64_t) + 64);
	if (!a) {
		taprt_fail(cx, "node '%s' (TopK): out of memory for %lld values", n->name,
		    (long long)len);
		return;
	}
	int64_t *inds = ix ? ix->data : NULL;
	switch (x->dtype) {
#define CASE(E, T, U, sfx)                                                    \
	case E:                                                               \
		topk_lines_##sfx(x->data, v ? v->data : NULL, inds, outer, len, inner, k, \
		    largest, a, a + len);                                     \
		break;
	NUM_TYPES(CASE)
#undef CASE
	default:
		taprt_bad_dtype(cx, n, "TopK", x->dtype);
	}
}
