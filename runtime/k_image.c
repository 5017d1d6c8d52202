/*
 * k_image.c - resampling and pixel shuffles: Resize, Upsample,
 * DepthToSpace, SpaceToDepth and GridSample.
 *
 * Needs: output shapes set by tapc (ir/infer.c derived them from the same
 * scales, sizes and attributes), and the data of Resize's scales, sizes and
 * roi inputs (constants or run-time inputs; only the shape-deciding ones
 * had to be known at compile time).
 *
 * Resize works axis by axis, as the ONNX reference does: every output
 * index of an axis gets its taps -- input indices, clamped to the edge
 * (the reference pads with edge values), and weights -- computed in double
 * from the spec's coordinate transformation.  nearest is then one gather
 * over all axes, for any dtype; linear and cubic (antialiased or not) apply
 * the taps one axis at a time in f32 or f64, shrinking axes first so no
 * intermediate exceeds the larger of input and output, and skip axes whose
 * taps are the identity (usually N and C).  Two-tap (linear) passes write
 * each output row in one pass, and along the last axis an exact 2x
 * (segmentation decoders' upsampling) computes the interior two outputs
 * an input step from contiguous loads instead of a gather per output
 * (x2_range): 4x on segnet's two Resizes.  tf_crop_and_resize writes
 * extrapolation_value wherever any axis maps outside the input.
 *
 * Upsample (opsets 7 and 9) and Resize-10 have no coordinate attributes:
 * like onnxruntime they use asymmetric coordinates, and nearest takes
 * ceil(x) on a shrinking axis and floor(x) otherwise.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/internal.h"

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_NN, CT_TF_CROP };
enum { NM_PREFER_FLOOR, NM_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

static const char *const mode_names[] = {"nearest", "linear", "cubic", NULL};
static const char *const ct_names[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
    "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize", NULL};
static const char *const nm_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};

/* What a Resize or Upsample node asks for, per axis of X. */
typedef struct {
	int mode, ct, nm;
	double a;                       /* cubic_coeff_a */
	bool excl;                      /* exclude_outside */
	bool aa;                        /* antialias */
	double extrap;                  /* extrapolation_value */
	double scale[TAPRT_MAX_RANK];
	double roi0[TAPRT_MAX_RANK], roi1[TAPRT_MAX_RANK];
} rz_params;

static int
lookup(const char *s, const char *const *names)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static double
ld(const taprt_tensor *t, int64_t i)
{
	switch (t->dtype) {
	case TAPRT_F32: return ((const float *)t->data)[i];
	case TAPRT_F64: return ((const double *)t->data)[i];
	case TAPRT_I32: return ((const int32_t *)t->data)[i];
	case TAPRT_I64: return (double)((const int64_t *)t->data)[i];
	default: return NAN;
	}
}

static const taprt_tensor *
nonempty(const taprt_node *n, int i)
{
	const taprt_tensor *t = taprt_input(n, i);
	return t && t->numel > 0 ? t : NULL;
}

/* Read the node's attributes and scales/sizes/roi inputs; -1 after taprt_fail. */
static int
rz_get(taprt_ctx *cx, const taprt_node *n, const char *op, rz_params *p)
{
	const taprt_tensor *x = n->in[0];
	int r = x->rank;
	bool up = !strcmp(op, "Upsample"), v10 = up || n->opset < 11;
	p->mode = lookup(taprt_attr_str(n, "mode", "nearest"), mode_names);
	p->ct = v10 ? CT_ASYM : lookup(taprt_attr_str(n, "coordinate_transformation_mode",
	    "half_pixel"), ct_names);
	p->nm = v10 ? NM_SIMPLE : lookup(taprt_attr_str(n, "nearest_mode", "round_prefer_floor"),
	    nm_names);
	p->a = taprt_attr_float(n, "cubic_coeff_a", -0.75f);
	p->excl = !v10 && taprt_attr_int(n, "exclude_outside", 0) != 0;
	p->aa = !v10 && taprt_attr_int(n, "antialias", 0) != 0;
	p->extrap = taprt_attr_float(n, "extrapolation_value", 0.0f);
	if (p->mode < 0 || p->ct < 0 || p->nm < 0)
		return taprt_fail(cx, "node '%s' (%s): unknown mode, coordinate_transformation_mode"
		    " or nearest_mode", n->name, op);
	int64_t axes[TAPRT_MAX_RANK];
	int naxes = v10 ? -1 : taprt_ints(n, -1, "axes", axes, TAPRT_MAX_RANK);
	if (naxes < 0) {
		naxes = r;
		for (int i = 0; i < r; i++)
			axes[i] = i;
	}
	if (naxes > r)
		return taprt_fail(cx, "node '%s' (%s): %d axes for rank %d", n->name, op, naxes, r);
	for (int i = 0; i < naxes; i++) {
		axes[i] = taprt_axis(axes[i], r);
		if (axes[i] < 0 || axes[i] >= r)
			return taprt_fail(cx, "node '%s' (%s): axis out of range", n->name, op);
	}
	for (int d = 0; d < r; d++) {
		p->scale[d] = 1;
		p->roi0[d] = 0;
		p->roi1[d] = 1;
	}
	const taprt_attr *sa = up && !taprt_input(n, 1) ? taprt_attr_get(n, "scales") : NULL;
	const taprt_tensor *sc = nonempty(n, v10 ? 1 : 2), *sz = v10 ? NULL : nonempty(n, 3);
	if (sa && sa->type == TAPRT_ATTR_FLOATS && sa->n == naxes) {
		for (int i = 0; i < naxes; i++)
			p->scale[axes[i]] = sa->fs[i];
	} else if (sc && sc->numel == naxes) {
		for (int i = 0; i < naxes; i++)
			p->scale[axes[i]] = ld(sc, i);
	} else if (sz && sz->numel == naxes) {
		const char *kar = taprt_attr_str(n, "keep_aspect_ratio_policy", "stretch");
		bool larger = !strcmp(kar, "not_smaller");
		double common = larger ? -INFINITY : INFINITY;
		for (int i = 0; i < naxes; i++) {
			int64_t d = x->dims[axes[i]];
			double q = d ? ld(sz, i) / (double)d : 1;
			p->scale[axes[i]] = q;
			common = larger ? fmax(common, q) : fmin(common, q);
		}
		if (strcmp(kar, "stretch"))
			for (int i = 0; i < naxes; i++)
				p->scale[axes[i]] = common;
	} else {
		return taprt_fail(cx, "node '%s' (%s): scales or sizes do not match %d axes",
		    n->name, op, naxes);
	}
	for (int d = 0; d < r; d++)
		if (!(p->scale[d] > 0) || isinf(p->scale[d]))
			return taprt_fail(cx, "node '%s' (%s): scale %g for axis %d is not positive",
			    n->name, op, p->scale[d], d);
	if (p->ct == CT_TF_CROP) {
		const taprt_tensor *roi = taprt_input(n, 1);
		if (!roi || roi->numel != 2 * naxes || (roi->dtype != TAPRT_F32 && roi->dtype != TAPRT_F64))
			return taprt_fail(cx, "node '%s' (%s): roi must hold %d floats", n->name, op,
			    2 * naxes);
		for (int i = 0; i < naxes; i++) {
			p->roi0[axes[i]] = ld(roi, i);
			p->roi1[axes[i]] = ld(roi, naxes + i);
		}
	}
	return 0;
}

/* The input coordinate of output index x along an axis (the spec's
 * coordinate_transformation_mode), in the ONNX reference's order of
 * operations.  Like that reference (and the official node tests that come
 * from it), align_corners and tf_crop_and_resize divide by the unrounded
 * output length ow = scale * in, not by the output dim. */
static double
orig_coord(const rz_params *p, int d, int64_t x, int64_t in, int64_t out)
{
	double s = p->scale[d], ow = s * (double)in, xd = (double)x;
	switch (p->ct) {
	case CT_HALF_PIXEL_SYM: {
		double off = (double)in / 2 * (1 - (double)out / ow);
		return off + (xd + 0.5) / s - 0.5;
	}
	case CT_PYTORCH: /* the spec's 0 for one output; onnx's reference has -0.5 */
		return out > 1 ? (xd + 0.5) / s - 0.5 : 0;
	case CT_ALIGN:
		return ow == 1 ? 0 : xd * (double)(in - 1) / (ow - 1);
	case CT_ASYM:
		return xd / s;
	case CT_TF_NN:
		return (xd + 0.5) / s;
	case CT_TF_CROP: {
		double r0 = p->roi0[d], r1 = p->roi1[d];
		double v = ow == 1 ? (r1 - r0) * (double)(in - 1) / 2 :
		    xd * (r1 - r0) * (double)(in - 1) / (ow - 1);
		return v + r0 * (double)(in - 1);
	}
	default:
		return (xd + 0.5) / s - 0.5;
	}
}

static double
cubic_w(double d, double A)
{
	if (d <= 1)
		return ((A + 2) * d - (A + 3)) * d * d + 1;
	if (d < 2)
		return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
	return 0;
}

/* One axis: for each output index j, K input indices and weights, and
 * whether j maps outside the input (tf_crop_and_resize). */
typedef struct {
	int d;                          /* the axis */
	int64_t in, out;
	int K;
	int64_t *idx;                   /* [out * K], clamped to [0, in) */
	double *w;                      /* [out * K] */
	unsigned char *oob;             /* [out] */
	bool any_oob, ident;
	/* 2x with two taps (linear): outputs 2i and 2i + 1 for 2i in [lo, hi)
	 * are w[lo*2..] x[i + da], x[i + da + 1] and w[lo*2+2..] x[i + db],
	 * x[i + db + 1], the same weights for every i (lo = hi: not so) */
	int64_t lo, hi, da, db;
} axis_taps;

/* Taps per output index: 1 for nearest, 2 and 4 for linear and cubic, and
 * the antialiasing filter's wider support when it shrinks the axis. */
static int64_t
taps_per_out(const rz_params *p, double s)
{
	if (p->mode == M_NEAREST)
		return 1;
	double half = p->mode == M_LINEAR ? 1 : 2;
	if (!p->aa || s >= 1)
		return (int64_t)(2 * half);
	double k = 2 - 2 * (floor(-half / s) + 1);
	return k < 1e9 ? (int64_t)k : -1;
}

static int64_t
nearest_of(const rz_params *p, double x, double s)
{
	double f = floor(x);
	switch (p->nm) {
	case NM_SIMPLE: return (int64_t)(s < 1 ? ceil(x) : trunc(x));
	case NM_FLOOR: return (int64_t)f;
	case NM_CEIL: return (int64_t)ceil(x);
	case NM_PREFER_CEIL: return (int64_t)(x - f < 0.5 ? f : f + 1);
	default: return (int64_t)(x - f <= 0.5 ? f : f + 1);
	}
}

/* Whether output pair (j, j + 1), j even, follows the pair at m (x2_range). */
static bool
x2_pair(const axis_taps *t, int64_t j, int64_t m)
{
	for (int64_t q = 0; q < 2; q++) {
		const int64_t *a = t->idx + (j + q) * 2, *b = t->idx + (m + q) * 2;
		const double *u = t->w + (j + q) * 2, *v = t->w + (m + q) * 2;
		if (a[1] != a[0] + 1 || a[0] - j / 2 != b[0] - m / 2 || u[0] != v[0] || u[1] != v[1] ||
		    t->oob[j + q])
			return false;
	}
	return true;
}

/* A 2x two-tap axis's run of output pairs that repeat the middle pair's
 * taps one input further on each time (all but a pair or two at the
 * clamped edges): pass_f32 computes those two outputs a step, vectorized,
 * instead of one gather per output. */
static void
x2_range(axis_taps *t)
{
	t->lo = t->hi = 0;
	if (t->K != 2 || t->out != 2 * t->in || t->in < 4)
		return;
	int64_t m = t->in / 2 * 2, lo = m, hi = m;
	while (lo >= 2 && x2_pair(t, lo - 2, m))
		lo -= 2;
	while (hi + 2 <= t->out && x2_pair(t, hi, m))
		hi += 2;
	if (hi - lo < 8)
		return;
	t->lo = lo;
	t->hi = hi;
	t->da = t->idx[m * 2] - m / 2;
	t->db = t->idx[(m + 1) * 2] - m / 2;
}

static void
fill_taps(const rz_params *p, axis_taps *t)
{
	int64_t in = t->in, K = t->K;
	double s = p->scale[t->d], sw = p->aa && s < 1 ? s : 1;
	t->any_oob = false;
	t->ident = t->in == t->out;
	for (int64_t j = 0; j < t->out; j++) {
		int64_t *ix = t->idx + j * K;
		double *w = t->w + j * K, x = orig_coord(p, t->d, j, in, t->out);
		t->oob[j] = p->ct == CT_TF_CROP && !(x >= 0 && x <= (double)(in - 1));
		if (t->oob[j]) {
			t->any_oob = true;
			t->ident = false;
			for (int64_t k = 0; k < K; k++)
				ix[k] = 0, w[k] = 0;
			continue;
		}
		/* far outside the input every tap clamps to the same edge */
		x = fmin(fmax(x, -2.0 - (double)K), (double)in + 1.0 + (double)K);
		if (p->mode == M_NEAREST) {
			int64_t i = nearest_of(p, x, s);
			ix[0] = i < 0 ? 0 : i >= in ? in - 1 : i;
			w[0] = 1;
			t->ident = t->ident && ix[0] == j;
			continue;
		}
		/* the K nearest indices, the lower ones on a tie (the reference's
		 * neighbours); weight = filter(|i - x| * sw) */
		double f = floor(x);
		int64_t base = (int64_t)f - K / 2 + (x == f ? 0 : 1);
		double sum = 0;
		for (int64_t k = 0; k < K; k++) {
			int64_t i = base + k;
			double dist = fabs((double)i - x) * sw;
			double v = p->mode == M_LINEAR ? fmax(0, 1 - dist) : cubic_w(dist, p->a);
			if (p->excl && (i < 0 || i >= in))
				v = 0;
			ix[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
			w[k] = v;
			sum += v;
			if (v != 0 && (ix[k] != j || v != 1))
				t->ident = false;
		}
		if ((p->aa && s < 1) || p->excl)
			for (int64_t k = 0; k < K && sum != 0; k++)
				w[k] /= sum;
	}
	x2_range(t);
}

/* extrapolation_value as bytes of the output's dtype.  Integers go through
 * int64 (a float out of an integer type's range converts undefinedly; an
 * integer narrows by wrapping); NaN and values beyond int64 become 0. */
static void
extrap_bytes(int dtype, double v, unsigned char *out)
{
	int64_t i = v > -9e18 && v < 9e18 ? (int64_t)v : 0;
	memset(out, 0, 8);
	switch (dtype) {
	case TAPRT_F32: { float f = (float)v; memcpy(out, &f, 4); break; }
	case TAPRT_F64: memcpy(out, &v, 8); break;
	case TAPRT_I8: case TAPRT_U8: case TAPRT_BOOL: { uint8_t b = (uint8_t)i; memcpy(out, &b, 1); break; }
	case TAPRT_I16: case TAPRT_U16: { uint16_t h = (uint16_t)i; memcpy(out, &h, 2); break; }
	case TAPRT_I32: case TAPRT_U32: { uint32_t w = (uint32_t)i; memcpy(out, &w, 4); break; }
	case TAPRT_I64: case TAPRT_U64: memcpy(out, &i, 8); break;
	default: break;
	}
}

/* nearest: y[j0,..] = x[idx0[j0],..]; every axis's offsets precomputed. */
static void
gather_nearest(const taprt_tensor *x, taprt_tensor *y, axis_taps *ax, int64_t *const *off,
    const unsigned char *ev)
{
	int r = y->rank, es = taprt_dtype_size(y->dtype);
	int64_t last = y->dims[r - 1], rows = y->numel / last, idx[TAPRT_MAX_RANK] = {0};
	const char *xs = x->data;
	char *yp = y->data;
	const int64_t *lo = off[r - 1];
	/* the last axis doubled exactly (a 2x upsample): y[2j] = y[2j+1] = x[j] */
	bool twice = last == 2 * x->dims[r - 1] && !ax[r - 1].any_oob;
	for (int64_t j = 0; j < last && twice; j++)
		twice = lo[j] == j / 2;
	int64_t prev = -1;              /* the source row of the previous output row */
	for (int64_t row = 0; row < rows; row++, yp += last * es) {
		int64_t base = 0;
		bool oob = false;
		for (int d = 0; d < r - 1; d++) {
			base += off[d][idx[d]];
			oob = oob || ax[d].oob[idx[d]];
		}
		const unsigned char *lb = ax[r - 1].oob;
		if (!oob && base == prev) { /* an upsampled row: the one before again */
			memcpy(yp, yp - last * es, last * es);
		} else if (es == 4 && !oob && twice) {
			const uint32_t *xw = (const uint32_t *)xs + base;
			uint32_t *yw = (uint32_t *)yp;
			for (int64_t j = 0; j < last / 2; j++)
				yw[2 * j] = yw[2 * j + 1] = xw[j];
		} else if (es == 4 && !oob && !ax[r - 1].any_oob) { /* f32 and friends: a plain gather */
			const uint32_t *xw = (const uint32_t *)xs + base;
			uint32_t *yw = (uint32_t *)yp;
			for (int64_t j = 0; j < last; j++)
				yw[j] = xw[lo[j]];
		} else
		switch (es) {
#define GATHER(T)                                                                 \
		for (int64_t j = 0; j < last; j++)                                \
			memcpy(yp + j * sizeof(T), oob || lb[j] ? (const void *)ev :      \
			    (const void *)(xs + (base + lo[j]) * sizeof(T)), sizeof(T));  \
		break;
		case 1: GATHER(uint8_t)
		case 2: GATHER(uint16_t)
		case 4: GATHER(uint32_t)
		default: GATHER(uint64_t)
#undef GATHER
		}
		prev = oob ? -1 : base;
		for (int d = r - 2; d >= 0 && ++idx[d] == y->dims[d]; d--)
			idx[d] = 0;
	}
}

/* Outputs [lo, hi) of a 2x two-tap axis (x2_range) from the row sp into
 * the row dr: the scalar loop's arithmetic, two outputs an input. */
#define X2(T, s)                                                                  \
TAPRT_CLONES static void                                                          \
x2_##s(const T *restrict sp, T *restrict dr, const axis_taps *t)                  \
{                                                                                 \
	const T a0 = (T)t->w[t->lo * 2], a1 = (T)t->w[t->lo * 2 + 1];             \
	const T b0 = (T)t->w[t->lo * 2 + 2], b1 = (T)t->w[t->lo * 2 + 3];         \
	const int64_t da = t->da, db = t->db;                                     \
	for (int64_t i = t->lo / 2; i < t->hi / 2; i++) {                         \
		dr[2 * i] = a0 * sp[i + da] + a1 * sp[i + da + 1];                \
		dr[2 * i + 1] = b0 * sp[i + db] + b1 * sp[i + db + 1];            \
	}                                                                         \
}
X2(float, f32)
X2(double, f64)
#undef X2

/* One separable pass along an axis: dst[o, j, :] = sum_k w[j,k] src[o, idx[j,k], :];
 * the outer slices on the rank's threads. */
#define PASS(T, s)                                                                \
static void                                                                       \
pass_##s(const T *src, T *dst, int64_t outer, int64_t inner, const axis_taps *t)  \
{                                                                                 \
	int64_t K = t->K;                                                         \
	_Pragma("omp parallel for if (TAPRT_PAR(outer * t->out * inner)) schedule(static)") \
	for (int64_t o = 0; o < outer; o++) {                                     \
		const T *sp = src + o * t->in * inner;                            \
		for (int64_t j = 0; j < t->out; j++) {                            \
			T *dr = dst + (o * t->out + j) * inner;                   \
			if (inner == 1 && j == t->lo && t->hi > t->lo) {          \
				x2_##s(sp, dr - j, t);                            \
				j = t->hi - 1;                                    \
				continue;                                         \
			}                                                         \
			const int64_t *ix = t->idx + j * K;                       \
			const double *w = t->w + j * K;                           \
			if (inner == 1 && K == 2) { /* linear along the last axis */ \
				dr[0] = (T)w[0] * sp[ix[0]] + (T)w[1] * sp[ix[1]]; \
				continue;                                         \
			}                                                         \
			if (inner == 1) {                                         \
				T acc = 0;                                        \
				for (int64_t k = 0; k < K; k++)                   \
					acc += (T)w[k] * sp[ix[k]];               \
				dr[0] = acc;                                      \
				continue;                                         \
			}                                                         \
			const T *s0 = sp + ix[0] * inner;                         \
			T w0 = (T)w[0];                                           \
			if (K == 2 && w[1] != 0) { /* linear: one pass over dr */ \
				const T *s1 = sp + ix[1] * inner;                 \
				T w1 = (T)w[1];                                   \
				for (int64_t i = 0; i < inner; i++)               \
					dr[i] = w0 * s0[i] + w1 * s1[i];          \
				continue;                                         \
			}                                                         \
			for (int64_t i = 0; i < inner; i++)                       \
				dr[i] = w0 * s0[i];                               \
			for (int64_t k = 1; k < K; k++) {                         \
				const T *sk = sp + ix[k] * inner;                 \
				T wk = (T)w[k];                                   \
				if (wk != 0)                                      \
					for (int64_t i = 0; i < inner; i++)       \
						dr[i] += wk * sk[i];              \
			}                                                         \
		}                                                                 \
	}                                                                         \
}
PASS(float, f32)
PASS(double, f64)
#undef PASS

/* tf_crop_and_resize: every output element some axis maps outside the
 * input is extrapolation_value. */
static void
fill_extrap(taprt_tensor *y, const axis_taps *ax, const unsigned char *ev)
{
	int r = y->rank, es = taprt_dtype_size(y->dtype);
	int64_t idx[TAPRT_MAX_RANK] = {0};
	char *yp = y->data;
	for (int64_t e = 0; e < y->numel; e++, yp += es) {
		bool oob = false;
		for (int d = 0; d < r; d++)
			oob = oob || ax[d].oob[idx[d]];
		if (oob)
			memcpy(yp, ev, es);
		for (int d = r - 1; d >= 0 && ++idx[d] == y->dims[d]; d--)
			idx[d] = 0;
	}
}

static void
resize(taprt_ctx *cx, const taprt_node *n, const char *op)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *y = n->out[0];
	int r = x->rank, es = taprt_dtype_size(y->dtype);
	rz_params p;
	if (y->numel == 0)
		return;
	if (x->numel == 0 || r < 1 || y->rank != r || es == 0) {
		taprt_fail(cx, "node '%s' (%s): cannot resize %lld elements to %lld", n->name, op,
		    (long long)x->numel, (long long)y->numel);
		return;
	}
	if (rz_get(cx, n, op, &p))
		return;
	bool sep = p.mode != M_NEAREST;
	if (sep && y->dtype != TAPRT_F32 && y->dtype != TAPRT_F64) {
		taprt_bad_dtype(cx, n, op, y->dtype);
		return;
	}
	/* the scratch: per axis idx, w, oob (and nearest's offsets), then two
	 * intermediate buffers for the separable passes */
	axis_taps ax[TAPRT_MAX_RANK];
	int64_t bytes = 0, bigger = x->numel > y->numel ? x->numel : y->numel;
	for (int d = 0; d < r; d++) {
		int64_t K = taps_per_out(&p, p.scale[d]);
		if (K < 1) {
			taprt_fail(cx, "node '%s' (%s): scale %g is too small", n->name, op, p.scale[d]);
			return;
		}
		ax[d] = (axis_taps){.d = d, .in = x->dims[d], .out = y->dims[d], .K = (int)K};
		bytes += y->dims[d] * K * 16 + y->dims[d] * 9 + 64;
	}
	if (sep)
		bytes += 2 * bigger * es + 128;
	char *sc = taprt_scratch(bytes);
	if (!sc) {
		taprt_fail(cx, "node '%s' (%s): out of memory for %lld bytes of scratch", n->name, op,
		    (long long)bytes);
		return;
	}
	int64_t *off[TAPRT_MAX_RANK];
	for (int d = 0; d < r; d++) {
		int64_t m = y->dims[d] * ax[d].K;
		ax[d].idx = (int64_t *)sc;
		ax[d].w = (double *)(sc + m * 8);
		off[d] = (int64_t *)(sc + m * 16);
		ax[d].oob = (unsigned char *)(sc + m * 16 + y->dims[d] * 8);
		sc += (m * 16 + y->dims[d] * 9 + 63) & ~(int64_t)63;
		fill_taps(&p, &ax[d]);
	}
	unsigned char ev[8];
	extrap_bytes(y->dtype, p.extrap, ev);
	bool all_ident = true, any_oob = false;
	for (int d = 0; d < r; d++) {
		all_ident = all_ident && ax[d].ident;
		any_oob = any_oob || ax[d].any_oob;
	}
	if (all_ident) {
		memcpy(y->data, x->data, (size_t)y->numel * es);
		return;
	}
	if (!sep) {
		int64_t st = 1;
		for (int d = r - 1; d >= 0; d--) {
			for (int64_t j = 0; j < y->dims[d]; j++)
				off[d][j] = ax[d].idx[j] * st;
			st *= x->dims[d];
		}
		gather_nearest(x, y, ax, off, ev);
		return;
	}
	/* the separable passes, shrinking axes first; between axes that grow
	 * alike, the inner one first (its pass is element by element, so
	 * better on the smaller tensor; the others run along whole rows) */
	int order[TAPRT_MAX_RANK], np = 0;
	for (int d = r - 1; d >= 0; d--)
		if (!ax[d].ident)
			order[np++] = d;
	for (int i = 1; i < np; i++)
		for (int k = i; k > 0; k--) {
			const axis_taps *a = &ax[order[k - 1]], *b = &ax[order[k]];
			if ((double)b->out * (double)a->in >= (double)a->out * (double)b->in)
				break;
			int tmp = order[k];
			order[k] = order[k - 1];
			order[k - 1] = tmp;
		}
	char *buf[2] = {sc, sc + ((bigger * es + 63) & ~(int64_t)63)};
	int64_t cur[TAPRT_MAX_RANK];
	memcpy(cur, x->dims, sizeof cur[0] * r);
	const void *src = x->data;
	for (int i = 0; i < np; i++) {
		int d = order[i];
		int64_t outer = 1, inner = 1;
		for (int k = 0; k < d; k++)
			outer *= cur[k];
		for (int k = d + 1; k < r; k++)
			inner *= cur[k];
		void *dst = i == np - 1 ? y->data : buf[i & 1];
		if (y->dtype == TAPRT_F32)
			pass_f32(src, dst, outer, inner, &ax[d]);
		else
			pass_f64(src, dst, outer, inner, &ax[d]);
		cur[d] = ax[d].out;
		src = dst;
	}
	if (any_oob)
		fill_extrap(y, ax, ev);
}

void
taprt_op_Resize(taprt_ctx *cx, const taprt_node *n)
{
	resize(cx, n, "Resize");
}

void
taprt_op_Upsample(taprt_ctx *cx, const taprt_node *n)
{
	resize(cx, n, "Upsample");
}

/* ------------------------------------------------------ pixel shuffles */

/*
 * y[n, c, h*b+i, w*b+j] = x[n, ch(c, i, j), h, w] (DepthToSpace; DCR:
 * ch = (i*b + j)*C + c, CRD: ch = c*b*b + i*b + j), and SpaceToDepth the
 * inverse of DCR.  Walks the output in order; any dtype.
 */
static void
shuffle(taprt_ctx *cx, const taprt_node *n, const char *op, bool d2s)
{
	const taprt_tensor *x = n->in[0];
	taprt_tensor *y = n->out[0];
	int64_t b = taprt_attr_int(n, "blocksize", 0);
	int es = taprt_dtype_size(y->dtype);
	if (y->numel == 0)
		return;
	bool crd = d2s && !strcmp(taprt_attr_str(n, "mode", "DCR"), "CRD");
	/* the depth side (X for DepthToSpace) and the space side */
	const taprt_tensor *dp = d2s ? x : y, *spc = d2s ? y : x;
	if (b < 1 || x->rank != 4 || y->rank != 4 || es == 0 || dp->dims[1] % (b * b) ||
	    spc->dims[1] != dp->dims[1] / (b * b) || spc->dims[2] != dp->dims[2] * b ||
	    spc->dims[3] != dp->dims[3] * b) {
		taprt_fail(cx, "node '%s' (%s): blocksize %lld does not fit the shapes", n->name, op,
		    (long long)b);
		return;
	}
	int64_t N = spc->dims[0], C = spc->dims[1], H = dp->dims[2], W = dp->dims[3];
	const char *xs = x->data;
	char *ys = y->data;
	/* element e of the space-side tensor <-> element of the depth side */
	int64_t e = 0;
	for (int64_t bn = 0; bn < N; bn++)
	for (int64_t c = 0; c < C; c++)
	for (int64_t oh = 0; oh < H * b; oh++)
	for (int64_t ow = 0; ow < W * b; ow++, e++) {
		int64_t i = oh % b, j = ow % b;
		int64_t ch = crd ? (c * b + i) * b + j : (i * b + j) * C + c;
		int64_t de = ((bn * C * b * b + ch) * H + oh / b) * W + ow / b;
		if (d2s)
			memcpy(ys + e * es, xs + de * es, es);
		else
			memcpy(ys + de * es, xs + e * es, es);
	}
}

void
taprt_op_DepthToSpace(taprt_ctx *cx, const taprt_node *n)
{
	shuffle(cx, n, "DepthToSpace", true);
}

void
taprt_op_SpaceToDepth(taprt_ctx *cx, const taprt_node *n)
{
	shuffle(cx, n, "SpaceToDepth", false);
}

/* ------------------------------------------------------------ GridSample */

/* A grid coordinate in [-1, 1] as a pixel coordinate of an axis of size n. */
static double
gs_unnormalize(double v, int64_t n, bool corners)
{
	return corners ? (v + 1) / 2 * (double)(n - 1) : ((v + 1) * (double)n - 1) / 2;
}

/* v reflected between lo2 / 2 and hi2 / 2 (twice the bounds, as integers). */
static double
gs_reflect(double v, int64_t lo2, int64_t hi2)
{
	if (lo2 == hi2)
		return 0;
	double min = (double)lo2 / 2, span = (double)(hi2 - lo2) / 2;
	v = fabs(v - min);
	double extra = fmod(v, span);
	return (int64_t)floor(v / span) % 2 == 0 ? extra + min : span - extra + min;
}

/* the modes and padding modes, in the order of their names below */
enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

/* The padding mode applied to a pixel coordinate: border clamps it to the
 * axis, reflection reflects it at the borders (the pixels' centres with
 * align_corners, their outer edges without) and then clamps; zeros leaves
 * it, for the reads to skip. */
static double
gs_pad(double v, int64_t n, int pad, bool corners)
{
	if (pad == GS_REFLECTION)
		v = corners ? gs_reflect(v, 0, 2 * (n - 1)) : gs_reflect(v, -1, 2 * n - 1);
	if (pad != GS_ZEROS)
		v = fmin(fmax(v, 0), (double)(n - 1));
	return v;
}

/* Pixel (y, x) of plane p (H x W), or 0 outside it. */
static double
gs_at(const taprt_tensor *X, int64_t p, int64_t H, int64_t W, int64_t y, int64_t x)
{
	if (y < 0 || y >= H || x < 0 || x >= W)
		return 0;
	int64_t i = (p * H + y) * W + x;
	return X->dtype == TAPRT_F64 ? ((const double *)X->data)[i] : ((const float *)X->data)[i];
}

/*
 * GridSample (opset 16): X [N, C, H, W] read at grid [N, Ho, Wo, 2]'s
 * (x, y) points, normalized to [-1, 1] (-1 the first pixel's centre with
 * align_corners, its outer edge without), into [N, C, Ho, Wo]; modes
 * bilinear, nearest (half to even) and bicubic (A = -0.75, Resize's
 * weights), padding zeros, border or reflection -- torch's grid_sample,
 * whose arithmetic this follows: bilinear and nearest pad the point,
 * bicubic each of its 16 taps.  A NaN point gives 0.  In double; f32 and
 * f64.
 */
void
taprt_op_GridSample(taprt_ctx *cx, const taprt_node *n)
{
	const taprt_tensor *X = n->in[0], *G = n->in[1];
	taprt_tensor *Y = n->out[0];
	static const char *const modes[] = {"bilinear", "nearest", "bicubic", NULL};
	static const char *const pads[] = {"zeros", "border", "reflection", NULL};
	const char *ms = taprt_attr_str(n, "mode", "bilinear");
	const char *ps = taprt_attr_str(n, "padding_mode", "zeros");
	int mode = 0, pad = 0;
	while (modes[mode] && strcmp(modes[mode], ms) != 0)
		mode++;
	while (pads[pad] && strcmp(pads[pad], ps) != 0)
		pad++;
	bool corners = taprt_attr_int(n, "align_corners", 0) != 0;
	if ((X->dtype != TAPRT_F32 && X->dtype != TAPRT_F64) || G->dtype != X->dtype) {
		taprt_bad_dtype(cx, n, "GridSample", X->dtype);
		return;
	}
	if (!modes[mode] || !pads[pad]) {
		taprt_fail(cx, "node '%s' (GridSample): mode '%s', padding_mode '%s'", n->name, ms, ps);
		return;
	}
	int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3];
	int64_t Ho = G->dims[1], Wo = G->dims[2], P = Ho * Wo;
	#pragma omp parallel for if (TAPRT_PAR(Y->numel * 8)) schedule(static)
	for (int64_t b = 0; b < N; b++)
		for (int64_t q = 0; q < P; q++) {
			int64_t gi = (b * P + q) * 2;
			double gx = G->dtype == TAPRT_F64 ? ((const double *)G->data)[gi] :
			    ((const float *)G->data)[gi];
			double gy = G->dtype == TAPRT_F64 ? ((const double *)G->data)[gi + 1] :
			    ((const float *)G->data)[gi + 1];
			bool nan = gx != gx || gy != gy;
			/* far outside, every tap reads padding: clamped so the casts below stay defined */
			double x = fmax(fmin(gs_unnormalize(gx, W, corners), 1e15), -1e15);
			double y = fmax(fmin(gs_unnormalize(gy, H, corners), 1e15), -1e15);
			if (mode != GS_BICUBIC) {
				x = gs_pad(x, W, pad, corners);
				y = gs_pad(y, H, pad, corners);
			}
			double x0 = floor(x), y0 = floor(y), tx = x - x0, ty = y - y0;
			int64_t ix = (int64_t)x0, iy = (int64_t)y0;
			for (int64_t c = 0; c < C; c++) {
				int64_t pl = b * C + c;
				double v = 0;
				if (nan) {
					v = 0;  /* a NaN point reads nothing */
				} else if (mode == GS_BILINEAR) {
					v = gs_at(X, pl, H, W, iy, ix) * (1 - tx) * (1 - ty) +
					    gs_at(X, pl, H, W, iy, ix + 1) * tx * (1 - ty) +
					    gs_at(X, pl, H, W, iy + 1, ix) * (1 - tx) * ty +
					    gs_at(X, pl, H, W, iy + 1, ix + 1) * tx * ty;
				} else if (mode == GS_NEAREST) {
					v = gs_at(X, pl, H, W, (int64_t)nearbyint(y), (int64_t)nearbyint(x));
				} else {
					double wx[4] = {cubic_w(tx + 1, -0.75), cubic_w(tx, -0.75),
						cubic_w(1 - tx, -0.75), cubic_w(2 - tx, -0.75)};
					double wy[4] = {cubic_w(ty + 1, -0.75), cubic_w(ty, -0.75),
						cubic_w(1 - ty, -0.75), cubic_w(2 - ty, -0.75)};
					for (int i = 0; i < 4; i++) {
						double row = 0;
						int64_t ry = (int64_t)gs_pad((double)(iy - 1 + i), H, pad, corners);
						for (int j = 0; j < 4; j++) {
							int64_t rx = (int64_t)gs_pad((double)(ix - 1 + j), W,
							    pad, corners);
							row += gs_at(X, pl, H, W, ry, rx) * wx[j];
						}
						v += row * wy[i];
					}
				}
				int64_t o = pl * P + q;
				if (Y->dtype == TAPRT_F64)
					((double *)Y->data)[o] = v;
				else
					((float *)Y->data)[o] = (float)v;
			}
		}
}
