/*
 * k_data.c - data-movement and shape kernels: Constant, ConstantOfShape,
 * Shape, Size, Range, Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
 * Concat, Split, Slice, Gather, Expand, Tile, Trilu, ReverseSequence, Pad,
 * and If (copying the taken branch's outputs).  Transpose's blocks, Concat's
 * and Split's pieces are copied on the rank's team of threads (OpenMP).
 *
 * Needs: output dims, dtypes and buffers set by tapc (static shapes, checked
 * at compile time).  Kernels only move bytes, so they work for every dtype
 * of size 1, 2, 4 or 8 (f16/bf16 included) without per-dtype code; the few
 * that compute values (Range, Pad's old float `value`) switch on dtype.
 *
 * Transpose, Slice, Expand and Tile are all "walk the output in order and
 * read the input through a strided view", so they share view_copy(), which
 * merges contiguous axes first and then copies whole rows with memcpy, fills
 * broadcast rows, or transposes 2-D tiles when the view is a transpose.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/internal.h"

/* Tile doubles the rank of its view: (repeat, dim) per axis. */
#define VRANK (2 * TAPRT_MAX_RANK)

/* A strided view of an input: element (i0..ik) is at sum i*s, in elements. */
typedef struct {
	int rank;
	int64_t d[VRANK];
	int64_t s[VRANK];
} view;

/* memcpy that tolerates empty (possibly NULL) buffers and in-place nodes. */
static inline void
copy(void *dst, const void *src, int64_t bytes)
{
	if (bytes > 0 && dst != src)
		memcpy(dst, src, (size_t)bytes);
}

/* Element size of t's dtype, or 0 after reporting an unsupported dtype. */
static int
esize(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *t)
{
	int es = taprt_dtype_size(t->dtype);
	if (!es)
		taprt_fail(cx, "node '%s' (%s): unsupported dtype %d", n->name, op, t->dtype);
	return es;
}

/*
 * Element loops are written once with the size as a parameter; the
 * switches below call them with a constant so that each size gets its own
 * inlined copy (memcpy of a constant 4 bytes is a single move).
 */
#define BY_SIZE(es, call)                                                    \
	switch (es) {                                                        \
	case 1: { const size_t es_ = 1; call; break; }                       \
	case 2: { const size_t es_ = 2; call; break; }                       \
	case 4: { const size_t es_ = 4; call; break; }                       \
	case 8: { const size_t es_ = 8; call; break; }                       \
	default: { const size_t es_ = (es); call; break; }                   \
	}

static inline void
fill_(char *d, const void *v, int64_t cnt, size_t es)
{
	for (int64_t i = 0; i < cnt; i++)
		memcpy(d + i * es, v, es);
}

/* Fill cnt elements at d with the element at v. */
static void
fill(void *d, const void *v, int64_t cnt, size_t es)
{
	BY_SIZE(es, fill_(d, v, cnt, es_));
}

static inline void
gather_row_(char *d, const char *s, int64_t cnt, int64_t st, size_t es)
{
	for (int64_t i = 0; i < cnt; i++)
		memcpy(d + i * es, s + i * st * (int64_t)es, es);
}

/* One output row: cnt elements read with stride st (elements). */
static void
row_copy(void *d, const char *s, int64_t cnt, int64_t st, size_t es)
{
	if (st == 1)
		copy(d, s, cnt * (int64_t)es);
	else if (st == 0)
		fill(d, s, cnt, es);
	else
		BY_SIZE(es, gather_row_(d, s, cnt, st, es_));
}

/* out[i][j] = in[i + j*sc] for an R x C output: a transpose, in tiles so
 * that both the reads and the writes stay within a few cache lines. */
static inline void
tile_copy_(char *d, const char *s, int64_t R, int64_t C, int64_t sc, size_t es)
{
	enum { B = 16 };
	int64_t e = (int64_t)es;
	for (int64_t i0 = 0; i0 < R; i0 += B) {
		int64_t i1 = i0 + B < R ? i0 + B : R;
		for (int64_t j0 = 0; j0 < C; j0 += B) {
			int64_t j1 = j0 + B < C ? j0 + B : C;
			for (int64_t i = i0; i < i1; i++)
				for (int64_t j = j0; j < j1; j++)
					memcpy(d + (i * C + j) * e, s + (i + j * sc) * e, es);
		}
	}
}

/* Drop unit axes and merge axes that are contiguous with each other. */
static void
view_simplify(view *v)
{
	int r = 0;
	for (int i = 0; i < v->rank; i++) {
		if (v->d[i] == 1)
			continue;
		if (r > 0 && v->s[r - 1] == v->s[i] * v->d[i]) {
			v->d[r - 1] *= v->d[i];
			v->s[r - 1] = v->s[i];
			continue;
		}
		v->d[r] = v->d[i];
		v->s[r] = v->s[i];
		r++;
	}
	if (r == 0) {
		v->d[0] = 1;
		v->s[0] = 1;
		r = 1;
	}
	v->rank = r;
}

/* Rows of an R x C block: out[i][j] = in[i*sr + j*sc]. */
static void
rows_copy(char *d, const char *s, int64_t R, int64_t C, int64_t sr, int64_t sc, size_t es)
{
	int64_t rb = C * (int64_t)es, sb = sr * (int64_t)es;
	if (sc == 1) {
		for (int64_t i = 0; i < R; i++)
			copy(d + i * rb, s + i * sb, rb);
		return;
	}
	for (int64_t i = 0; i < R; i++)
		row_copy(d + i * rb, s + i * sb, C, sc, es);
}

/* Copy the view v of src (element 0 at src) to dst, densely, in row-major
 * order.  The caller makes sure no dim is 0. */
static void
view_copy(void *dst, const void *src, view v, size_t es)
{
	view_simplify(&v);
	if (v.rank == 1) {
		row_copy(dst, src, v.d[0], v.s[0], es);
		return;
	}
	/* the last two axes are one block; an odometer walks the others */
	int r = v.rank;
	int64_t e = (int64_t)es, R = v.d[r - 2], C = v.d[r - 1], sr = v.s[r - 2], sc = v.s[r - 1];
	/* output rows run across the input, input runs down output columns */
	bool tiled = sc != 1 && sc != 0 && sr == 1;
	int64_t idx[VRANK] = {0}, off = 0;
	char *d = dst;
	const char *s = src;
	int64_t blocks = 1;
	for (int k = 0; k < r - 2; k++)
		blocks *= v.d[k];
	if (blocks > 1 && TAPRT_PAR(blocks * R * C)) {
		/* threads: blocks found from their index */
		#pragma omp parallel for schedule(static)
		for (int64_t b = 0; b < blocks; b++) {
			int64_t o = 0;
			for (int64_t k = r - 3, bb = b; k >= 0; k--) {
				o += bb % v.d[k] * v.s[k] * e;
				bb /= v.d[k];
			}
			char *db = (char *)dst + b * R * C * e;
			if (tiled)
				BY_SIZE(es, tile_copy_(db, s + o, R, C, sc, es_))
			else
				rows_copy(db, s + o, R, C, sr, sc, es);
		}
		return;
	}
	for (;;) {
		if (tiled)
			BY_SIZE(es, tile_copy_(d, s + off, R, C, sc, es_))
		else
			rows_copy(d, s + off, R, C, sr, sc, es);
		d += R * C * e;
		int k = r - 3;
		for (; k >= 0; k--) {
			off += v.s[k] * e;
			if (++idx[k] < v.d[k])
				break;
			off -= v.s[k] * v.d[k] * e;
			idx[k] = 0;
		}
		if (k < 0)
			break;
	}
}

/* ------------------------------------------------------------ constants */

void
taprt_op_Constant(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *o = n->out[0];
	const taprt_attr *a;
	if ((a = taprt_attr_get(n, "value")) && a->type == TAPRT_ATTR_TENSOR) {
		int es = esize(cx, n, "Constant", o);
		if (es)
			copy(o->data, a->t->data, o->numel * es);
	} else if ((a = taprt_attr_get(n, "value_float")) && a->type == TAPRT_ATTR_FLOAT) {
		*(float *)o->data = a->f;
	} else if ((a = taprt_attr_get(n, "value_floats")) && a->type == TAPRT_ATTR_FLOATS) {
		copy(o->data, a->fs, (int64_t)a->n * (int64_t)sizeof(float));
	} else if ((a = taprt_attr_get(n, "value_int")) && a->type == TAPRT_ATTR_INT) {
		*(int64_t *)o->data = a->i;
	} else if ((a = taprt_attr_get(n, "value_ints")) && a->type == TAPRT_ATTR_INTS) {
		copy(o->data, a->is, (int64_t)a->n * (int64_t)sizeof(int64_t));
	} else {
		taprt_fail(cx, "node '%s' (Constant): no supported value attribute", n->name);
	}
}

void
taprt_op_ConstantOfShape(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *o = n->out[0];
	const taprt_attr *a = taprt_attr_get(n, "value");
	int es = esize(cx, n, "ConstantOfShape", o);
	if (!es || o->numel == 0)
		return;
	if (a && a->type == TAPRT_ATTR_TENSOR && a->t->numel >= 1)
		fill(o->data, a->t->data, o->numel, (size_t)es);
	else
		memset(o->data, 0, (size_t)(o->numel * es));  /* default: f32 0 */
}

void
taprt_op_Shape(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx;
	const taprt_tensor *x = n->in[0];
	int64_t a = taprt_attr_int(n, "start", 0);
	if (a < 0)
		a += x->rank;
	a = a < 0 ? 0 : a > x->rank ? x->rank : a;
	int64_t *o = n->out[0]->data;
	/* the output's length already says where end is */
	for (int64_t i = 0; i < n->out[0]->numel; i++)
		o[i] = x->dims[a + i];
}

void
taprt_op_Size(taprt_ctx *cx, const taprt_node *n)
{
	(void)cx;
	*(int64_t *)n->out[0]->data = n->in[0]->numel;
}

#define RANGE(T)                                                             \
	do {                                                                 \
		T a_ = *(const T *)n->in[0]->data, d_ = *(const T *)n->in[2]->data; \
		T *o_ = o->data;                                             \
		for (int64_t i = 0; i < o->numel; i++)                       \
			o_[i] = (T)(a_ + (T)i * d_);                         \
	} while (0)

void
taprt_op_Range(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *o = n->out[0];
	switch (o->dtype) {
	case TAPRT_F32: RANGE(float); break;
	case TAPRT_F64: RANGE(double); break;
	case TAPRT_I16: RANGE(int16_t); break;
	case TAPRT_I32: RANGE(int32_t); break;
	case TAPRT_I64: RANGE(int64_t); break;
	default:
		taprt_fail(cx, "node '%s' (Range): unsupported dtype %s", n->name,
		    taprt_dtype_name(o->dtype));
	}
}

/* ---------------------------------------------------------- plain copies */

/* Reshape and friends only relabel dims: the bytes are the same. */
static void
same_bytes(taprt_ctx *cx, const taprt_node *n, const char *op)
{
	int es = esize(cx, n, op, n->out[0]);
	if (es)
		copy(n->out[0]->data, n->in[0]->data, n->out[0]->numel * es);
}

void
taprt_op_Reshape(taprt_ctx *cx, const taprt_node *n)
{
	same_bytes(cx, n, "Reshape");
}

void
taprt_op_Flatten(taprt_ctx *cx, const taprt_node *n)
{
	same_bytes(cx, n, "Flatten");
}

void
taprt_op_Squeeze(taprt_ctx *cx, const taprt_node *n)
{
	same_bytes(cx, n, "Squeeze");
}

void
taprt_op_Unsqueeze(taprt_ctx *cx, const taprt_node *n)
{
	same_bytes(cx, n, "Unsqueeze");
}

/* ------------------------------------------------------- strided copies */

void
taprt_op_Transpose(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Transpose", o);
	if (!es || o->numel == 0)
		return;
	int64_t perm[TAPRT_MAX_RANK], st[TAPRT_MAX_RANK];
	int cnt = taprt_ints(n, -1, "perm", perm, TAPRT_MAX_RANK);
	if (cnt >= 0 && cnt != x->rank) {
		taprt_fail(cx, "node '%s' (Transpose): perm has %d entries for rank %d", n->name,
		    cnt, x->rank);
		return;
	}
	taprt_strides(x, st);
	view v = {.rank = x->rank};
	for (int i = 0; i < x->rank; i++) {
		int64_t p = cnt < 0 ? x->rank - 1 - i : perm[i];
		v.d[i] = o->dims[i];
		v.s[i] = st[p];
	}
	view_copy(o->data, x->data, v, (size_t)es);
}

void
taprt_op_Slice(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Slice", o);
	if (!es || o->numel == 0)
		return;
	int64_t sts[TAPRT_MAX_RANK], ax[TAPRT_MAX_RANK], sp[TAPRT_MAX_RANK];
	int ns = taprt_ints(n, 1, "starts", sts, TAPRT_MAX_RANK);
	int na = taprt_ints(n, 3, "axes", ax, TAPRT_MAX_RANK);
	int np = taprt_ints(n, 4, NULL, sp, TAPRT_MAX_RANK);
	if (ns < 0 || ns > x->rank || (na >= 0 && na != ns) || (np >= 0 && np != ns)) {
		taprt_fail(cx, "node '%s' (Slice): bad starts/axes/steps (%d, %d, %d) for rank %d",
		    n->name, ns, na, np, x->rank);
		return;
	}
	int64_t st[TAPRT_MAX_RANK], start[TAPRT_MAX_RANK] = {0}, step[TAPRT_MAX_RANK];
	for (int k = 0; k < x->rank; k++)
		step[k] = 1;
	for (int i = 0; i < ns; i++) {
		int a = taprt_axis(na >= 0 ? ax[i] : i, x->rank);
		if (a < 0 || a >= x->rank) {
			taprt_fail(cx, "node '%s' (Slice): axis %lld out of range for rank %d",
			    n->name, (long long)(na >= 0 ? ax[i] : i), x->rank);
			return;
		}
		int64_t d = x->dims[a], s = sts[i];
		step[a] = np >= 0 ? sp[i] : 1;
		/* clamp as the spec does: [0, d] going up, [0, d-1] going down */
		int64_t hi = step[a] > 0 ? d : d - 1;
		if (s < 0)
			s += d;
		start[a] = s < 0 ? 0 : s > hi ? hi : s;
	}
	taprt_strides(x, st);
	view v = {.rank = x->rank};
	int64_t off = 0;
	for (int k = 0; k < x->rank; k++) {
		off += start[k] * st[k];
		v.d[k] = o->dims[k];
		/* a one-element axis may have a huge step: never multiply it */
		v.s[k] = o->dims[k] == 1 ? 0 : step[k] * st[k];
	}
	view_copy(o->data, (const char *)x->data + off * es, v, (size_t)es);
}

void
taprt_op_Expand(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Expand", o);
	if (!es || o->numel == 0)
		return;
	view v = {.rank = o->rank};
	taprt_bcast_strides(x, o, v.s);
	for (int k = 0; k < o->rank; k++)
		v.d[k] = o->dims[k];
	view_copy(o->data, x->data, v, (size_t)es);
}

void
taprt_op_Tile(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Tile", o);
	if (!es || o->numel == 0)
		return;
	/* output axis k of length r*d is the pair (repeat r, stride 0; dim d) */
	int64_t st[TAPRT_MAX_RANK];
	taprt_strides(x, st);
	view v = {.rank = 2 * x->rank};
	for (int k = 0; k < x->rank; k++) {
		v.d[2 * k] = o->dims[k] / x->dims[k];
		v.s[2 * k] = 0;
		v.d[2 * k + 1] = x->dims[k];
		v.s[2 * k + 1] = st[k];
	}
	view_copy(o->data, x->data, v, (size_t)es);
}

/* ------------------------------------------------------ blocks on an axis */

/* Product of dims [from, to). */
static int64_t
span(const taprt_tensor *t, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p *= t->dims[i];
	return p;
}

/*
 * Concat's and Split's copies: outer blocks of np pieces, piece i row[i]
 * bytes at at[i] in each orow-byte block of cat and contiguous in part[i]
 * (NULL: none), into cat (gather) or out of it.  On the team from
 * taprt_par_min elements (of 4 bytes): with at least four blocks a thread
 * each thread takes a contiguous share of the blocks, else a share of
 * every piece (blocks_share: thread id of nt), cut on 64-byte lines of
 * cat, so that a piece is copied at the team's bandwidth and no line inside
 * it is written by two threads.  Serial, GPT-2's Split of the QKV product
 * (4.7 MB) took 0.64 ms of a forward at two threads as at one.
 */
static void
blocks_share(char *cat, int64_t orow, int64_t outer, char *const *part, const int64_t *row,
    const int64_t *at, int np, bool gather, int id, int nt)
{
	const bool by_block = outer >= 4 * (int64_t)nt;
	const int64_t k0 = by_block ? outer * id / nt : 0;
	const int64_t k1 = by_block ? outer * (id + 1) / nt : outer;
	for (int64_t k = k0; k < k1; k++)
		for (int i = 0; i < np; i++) {
			if (!part[i] || row[i] == 0)
				continue;
			char *c = cat + k * orow + at[i], *p = part[i] + k * row[i];
			int64_t lo = 0, hi = row[i];
			if (!by_block) {
				/* thread j's share starts at the line of cat
				 * nearest row[i] * j / nt (the piece's ends
				 * excepted) */
				uintptr_t base = (uintptr_t)c;
				lo = id == 0 ? 0 : (int64_t)(((base + (uintptr_t)(row[i] * id / nt) + 32) &
				    ~(uintptr_t)63) - base);
				hi = id == nt - 1 ? row[i] : (int64_t)(((base +
				    (uintptr_t)(row[i] * (id + 1) / nt) + 32) & ~(uintptr_t)63) - base);
				lo = lo < 0 ? 0 : lo > row[i] ? row[i] : lo;
				hi = hi < lo ? lo : hi > row[i] ? row[i] : hi;
			}
			if (gather)
				copy(c + lo, p + lo, hi - lo);
			else
				copy(p + lo, c + lo, hi - lo);
		}
}

static void
blocks_copy(char *cat, int64_t orow, int64_t outer, char *const *part, const int64_t *row,
    const int64_t *at, int np, bool gather)
{
	const int T = TAPRT_PAR(outer * orow / 4) ? taprt_team_size() : 1;
	if (T == 1) {   /* no team at all: shape arithmetic's Concats are tiny */
		blocks_share(cat, orow, outer, part, row, at, np, gather, 0, 1);
		return;
	}
	#pragma omp parallel num_threads(T)
	{
		int id, nt = taprt_team(&id);
		blocks_share(cat, orow, outer, part, row, at, np, gather, id, nt);
	}
}

/* Concat and Split hand blocks_copy this many pieces at a time */
#define PIECES 256

void
taprt_op_Concat(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Concat", o);
	if (!es || o->numel == 0)
		return;
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), o->rank);
	int64_t outer = span(o, 0, axis), orow = span(o, axis, o->rank) * es, pos = 0;
	int64_t at[PIECES], row[PIECES];
	char *part[PIECES];
	/* input by input: each contributes one block of its rows per outer index */
	for (int i0 = 0; i0 < n->nin; i0 += PIECES) {
		int np = n->nin - i0 < PIECES ? n->nin - i0 : PIECES;
		for (int i = 0; i < np; i++) {
			const taprt_tensor *t = n->in[i0 + i];
			bool some = t && t->numel > 0;
			part[i] = some ? t->data : NULL;
			row[i] = some ? t->numel / outer * es : 0;
			at[i] = pos;
			pos += row[i];
		}
		blocks_copy(o->data, orow, outer, part, row, at, np, true);
	}
}

void
taprt_op_Split(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0];
	int es = esize(cx, n, "Split", x);
	if (!es || x->numel == 0 || n->nout < 1)
		return;
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), x->rank);
	int64_t outer = span(x, 0, axis), inner = span(x, axis + 1, x->rank) * es;
	int64_t irow = x->dims[axis] * inner, pos = 0, sz[64], at[PIECES], row[PIECES];
	char *part[PIECES];
	int cnt = taprt_ints(n, 1, "split", sz, 64);
	int64_t dim = x->dims[axis], chunk = (dim + n->nout - 1) / n->nout;
	for (int i0 = 0; i0 < n->nout; i0 += PIECES) {
		int np = n->nout - i0 < PIECES ? n->nout - i0 : PIECES;
		for (int i = 0; i < np; i++) {
			const taprt_tensor *t = n->out[i0 + i];
			int j = i0 + i;
			/* an unused output still takes its share of the axis */
			int64_t len = t ? t->dims[axis] : cnt == n->nout && j < 64 ? sz[j] :
			    j < n->nout - 1 ? chunk : dim - chunk * (n->nout - 1);
			row[i] = len * inner;
			part[i] = t && row[i] > 0 ? t->data : NULL;
			at[i] = pos;
			pos += row[i];
		}
		blocks_copy((char *)x->data, irow, outer, part, row, at, np, false);
	}
}

static inline int64_t
index_at(const taprt_tensor *t, int64_t i)
{
	return t->dtype == TAPRT_I32 ? ((const int32_t *)t->data)[i] :
	    ((const int64_t *)t->data)[i];
}

/* Gather with blocks of `inner` bytes (inner == es: one element each). */
static inline bool
gather_(char *d, const char *s, const taprt_tensor *idx, int64_t outer, int64_t dim,
    int64_t inner, int64_t *bad)
{
	int64_t ni = idx->numel;
	for (int64_t o = 0; o < outer; o++) {
		const char *so = s + o * dim * inner;
		for (int64_t j = 0; j < ni; j++) {
			int64_t k = index_at(idx, j);
			if (k < 0)
				k += dim;
			if (k < 0 || k >= dim) {
				*bad = index_at(idx, j);
				return false;
			}
			memcpy(d, so + k * inner, (size_t)inner);
			d += inner;
		}
	}
	return true;
}

void
taprt_op_Gather(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *idx = n->in[1];
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Gather", o);
	if (!es || o->numel == 0)
		return;
	if (idx->dtype != TAPRT_I32 && idx->dtype != TAPRT_I64) {
		taprt_fail(cx, "node '%s' (Gather): indices are %s, expected i32 or i64", n->name,
		    taprt_dtype_name(idx->dtype));
		return;
	}
	int axis = taprt_axis(taprt_attr_int(n, "axis", 0), x->rank);
	int64_t outer = span(x, 0, axis), dim = x->dims[axis];
	int64_t inner = span(x, axis + 1, x->rank) * es, bad = 0;
	bool ok;
	/* constant block sizes let the compiler turn memcpy into a move */
	switch (inner) {
	case 1: ok = gather_(o->data, x->data, idx, outer, dim, 1, &bad); break;
	case 2: ok = gather_(o->data, x->data, idx, outer, dim, 2, &bad); break;
	case 4: ok = gather_(o->data, x->data, idx, outer, dim, 4, &bad); break;
	case 8: ok = gather_(o->data, x->data, idx, outer, dim, 8, &bad); break;
	default: ok = gather_(o->data, x->data, idx, outer, dim, inner, &bad); break;
	}
	if (!ok)
		taprt_fail(cx, "node '%s' (Gather): index %lld out of range [-%lld, %lld)", n->name,
		    (long long)bad, (long long)dim, (long long)dim);
}

/* ---------------------------------------------------------------- EyeLike */

/* ones on the k-th diagonal (j - i = k) of the output's type, zeros
 * elsewhere (all-zero bytes in every type) */
void
taprt_op_EyeLike(taprt_ctx *cx, const taprt_node *n)
{
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "EyeLike", o);
	if (!es || o->numel == 0)
		return;
	unsigned char one[8] = {0};
	switch (o->dtype) {
	case TAPRT_F32: memcpy(one, &(float){1}, 4); break;
	case TAPRT_F64: memcpy(one, &(double){1}, 8); break;
	case TAPRT_F16: memcpy(one, &(uint16_t){0x3c00}, 2); break;
	case TAPRT_BF16: memcpy(one, &(uint16_t){0x3f80}, 2); break;
	case TAPRT_I16: case TAPRT_U16: memcpy(one, &(uint16_t){1}, 2); break;
	case TAPRT_I32: case TAPRT_U32: memcpy(one, &(uint32_t){1}, 4); break;
	case TAPRT_I64: case TAPRT_U64: memcpy(one, &(uint64_t){1}, 8); break;
	default: one[0] = 1; break;  /* one byte: I8, U8, BOOL */
	}
	int64_t R = o->dims[0], C = o->dims[1], k = taprt_attr_int(n, "k", 0);
	k = k < -R ? -R : k > C ? C : k;  /* no diagonal past these: no overflow */
	memset(o->data, 0, (size_t)(o->numel * es));
	for (int64_t i = 0; i < R; i++)
		if (i + k >= 0 && i + k < C)
			memcpy((char *)o->data + (i * C + i + k) * es, one, (size_t)es);
}

/* ------------------------------------------------------- ReverseSequence */

/* For each batch entry b (along batch_axis), the first sequence_lens[b]
 * steps along time_axis reversed, the rest copied; the two axes are 0 and
 * 1 (either order), so each (time, batch) pair is one block of the dims
 * after them.  A length outside [0, time steps] fails the run. */
void
taprt_op_ReverseSequence(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *L = n->in[1];
	taprt_tensor *Y = n->out[0];
	int es = esize(cx, n, "ReverseSequence", Y);
	if (!es || Y->numel == 0)
		return;
	int ta = (int)taprt_attr_int(n, "time_axis", 0), ba = (int)taprt_attr_int(n, "batch_axis", 1);
	int64_t T = X->dims[ta], B = X->dims[ba], blk = X->numel / (T * B) * es;
	for (int64_t b = 0; b < B; b++) {
		int64_t len = L->dtype == TAPRT_I32 ? ((const int32_t *)L->data)[b] :
		    ((const int64_t *)L->data)[b];
		if (len < 0 || len > T) {
			taprt_fail(cx, "node '%s' (ReverseSequence): sequence length %lld of batch entry "
			    "%lld is not in [0, %lld]", n->name, (long long)len, (long long)b,
			    (long long)T);
			return;
		}
		for (int64_t t = 0; t < T; t++) {
			int64_t from = t < len ? len - 1 - t : t;
			int64_t yo = ta == 0 ? t * B + b : b * T + t, xo = ta == 0 ? from * B + b : b * T + from;
			memcpy((char *)Y->data + yo * blk, (const char *)X->data + xo * blk, (size_t)blk);
		}
	}
}

/* ----------------------------------------------------------------- Trilu */

void
taprt_op_Trilu(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *kt = taprt_input(n, 1);
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Trilu", o);
	if (!es || o->numel == 0)
		return;
	bool upper = taprt_attr_int(n, "upper", 1) != 0;
	int64_t R = o->dims[o->rank - 2], C = o->dims[o->rank - 1], k = 0;
	if (kt && kt->numel > 0)
		k = index_at(kt, 0);
	/* beyond +-(R+C) every row is all kept or all zero: avoids overflow */
	k = k < -(R + C) ? -(R + C) : k > R + C ? R + C : k;
	int64_t mats = o->numel / (R * C), row = C * es;
	const char *s = x->data;
	char *d = o->data;
	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < R; i++, s += row, d += row) {
			/* upper keeps columns j >= i+k, lower keeps j <= i+k */
			int64_t c = upper ? i + k : i + k + 1;
			c = c < 0 ? 0 : c > C ? C : c;
			/* all-zero bytes are 0 in every dtype */
			if (upper) {
				memset(d, 0, (size_t)(c * es));
				copy(d + c * es, s + c * es, (C - c) * es);
			} else {
				copy(d, s, c * es);
				memset(d + c * es, 0, (size_t)((C - c) * es));
			}
		}
}

/* ------------------------------------------------------------------- Pad */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Input index for out-of-range index i on an axis of length d > 0. */
static int64_t
pad_src(int mode, int64_t i, int64_t d)
{
	switch (mode) {
	case PAD_EDGE:
		return i < 0 ? 0 : d - 1;
	case PAD_WRAP:
		i %= d;
		return i < 0 ? i + d : i;
	default: {
		if (d == 1)
			return 0;
		int64_t p = 2 * (d - 1);
		i %= p;
		if (i < 0)
			i += p;
		return i < d ? i : p - i;
	}
	}
}

/* Pad's old float `value` attribute in the output's dtype. */
static bool
pad_value(void *v, int dtype, double f)
{
	switch (dtype) {
	case TAPRT_F32: *(float *)v = (float)f; return true;
	case TAPRT_F64: *(double *)v = f; return true;
	case TAPRT_I8: *(int8_t *)v = (int8_t)f; return true;
	case TAPRT_U8: *(uint8_t *)v = (uint8_t)f; return true;
	case TAPRT_BOOL: *(uint8_t *)v = f != 0; return true;
	case TAPRT_I16: *(int16_t *)v = (int16_t)f; return true;
	case TAPRT_U16: *(uint16_t *)v = (uint16_t)f; return true;
	case TAPRT_I32: *(int32_t *)v = (int32_t)f; return true;
	case TAPRT_U32: *(uint32_t *)v = (uint32_t)f; return true;
	case TAPRT_I64: *(int64_t *)v = (int64_t)f; return true;
	case TAPRT_U64: *(uint64_t *)v = (uint64_t)f; return true;
	default: return f == 0;    /* zero bits are zero for f16/bf16 too */
	}
}

void
taprt_op_Pad(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *x = n->in[0], *vt = taprt_input(n, 2);
	taprt_tensor *o = n->out[0];
	int es = esize(cx, n, "Pad", o);
	if (!es || o->numel == 0)
		return;
	int r = x->rank;
	const char *ms = taprt_attr_str(n, "mode", "constant");
	int mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE :
	    !strcmp(ms, "wrap") ? PAD_WRAP : PAD_CONSTANT;
	int64_t pads[2 * TAPRT_MAX_RANK], ax[TAPRT_MAX_RANK], pb[TAPRT_MAX_RANK] = {0};
	int np = taprt_ints(n, 1, "pads", pads, 2 * TAPRT_MAX_RANK);
	int na = taprt_ints(n, 3, NULL, ax, TAPRT_MAX_RANK);
	int naxes = na >= 0 ? na : r;
	if (np != 2 * naxes || naxes > r) {
		taprt_fail(cx, "node '%s' (Pad): %d pads for %d axes of rank %d", n->name, np,
		    naxes, r);
		return;
	}
	for (int i = 0; i < naxes; i++) {
		int a = taprt_axis(na >= 0 ? ax[i] : i, r);
		if (a < 0 || a >= r) {
			taprt_fail(cx, "node '%s' (Pad): axis %lld out of range", n->name,
			    (long long)ax[i]);
			return;
		}
		pb[a] = pads[i];
	}
	unsigned char val[8] = {0};
	if (mode == PAD_CONSTANT) {
		if (vt && vt->numel > 0)
			memcpy(val, vt->data, (size_t)es);
		else if (!pad_value(val, o->dtype, taprt_attr_float(n, "value", 0))) {
			taprt_fail(cx, "node '%s' (Pad): no float value for %s", n->name,
			    taprt_dtype_name(o->dtype));
			return;
		}
	} else if (x->numel == 0) {
		taprt_fail(cx, "node '%s' (Pad): %s padding of an empty tensor", n->name, ms);
		return;
	}
	if (r == 0) {
		copy(o->data, x->data, es);
		return;
	}
	int64_t st[TAPRT_MAX_RANK], idx[TAPRT_MAX_RANK] = {0};
	taprt_strides(x, st);
	int64_t od = o->dims[r - 1], d = x->dims[r - 1], p = pb[r - 1];
	/* output columns [lo, hi) come straight from input columns [lo-p, hi-p) */
	int64_t lo = p < 0 ? 0 : p > od ? od : p;
	int64_t hi = p + d < lo ? lo : p + d > od ? od : p + d;
	int64_t rows = o->numel / od;
	char *dst = o->data;
	const char *src = x->data;
	for (int64_t row = 0; row < rows; row++, dst += od * es) {
		/* where this row comes from: O(rank) per row, not per element */
		bool pad_row = false;
		int64_t off = 0;
		for (int k = 0; k < r - 1; k++) {
			int64_t i = idx[k] - pb[k];
			if (i < 0 || i >= x->dims[k]) {
				if (mode == PAD_CONSTANT) {
					pad_row = true;
					break;
				}
				i = pad_src(mode, i, x->dims[k]);
			}
			off += i * st[k];
		}
		for (int k = r - 2; k >= 0 && ++idx[k] == o->dims[k]; k--)
			idx[k] = 0;
		if (pad_row) {
			fill(dst, val, od, (size_t)es);
			continue;
		}
		const char *s = src + off * es;
		copy(dst + lo * es, s + (lo - p) * es, (hi - lo) * es);
		if (mode == PAD_CONSTANT) {
			fill(dst, val, lo, (size_t)es);
			fill(dst + hi * es, val, od - hi, (size_t)es);
			continue;
		}
		for (int64_t j = 0; j < lo; j++)
			memcpy(dst + j * es, s + pad_src(mode, j - p, d) * es, (size_t)es);
		for (int64_t j = hi; j < od; j++)
			memcpy(dst + j * es, s + pad_src(mode, j - p, d) * es, (size_t)es);
	}
}

/* If: the program already ran the taken branch (the generated code puts its
 * nodes inside `if (cond)`); copy that branch's outputs, inputs 1..K for
 * then and K+1..2K for else, into the If's. */
void
taprt_op_If(taprt_ctx *cx, const taprt_node *n)
{
	int k = n->nout;
	if (n->nin != 1 + 2 * k) {
		taprt_fail(cx, "node '%s' (If): %d inputs for %d outputs", n->name, n->nin, k);
		return;
	}
	int pick = *(const uint8_t *)n->in[0]->data ? 0 : 1;
	for (int j = 0; j < k; j++) {
		taprt_tensor *o = n->out[j];
		const taprt_tensor *s = n->in[1 + pick * k + j];
		if (o && s && o->data != s->data)
			memcpy(o->data, s->data, (size_t)(o->numel * taprt_dtype_size(o->dtype)));
	}
}
