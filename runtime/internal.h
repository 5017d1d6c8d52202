/*
 * internal.h - helpers shared inside libtaprt; not installed.
 */
#ifndef TAPRT_INTERNAL_H
#define TAPRT_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/half.h"
#include "runtime/taprt.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

/* Input i of a node, or NULL when absent (omitted optional, or past nin). */
static inline const taprt_tensor *
taprt_input(const taprt_node *n, int i)
{
	return i < n->nin ? n->in[i] : NULL;
}

static inline taprt_tensor *
taprt_output(const taprt_node *n, int i)
{
	return i < n->nout ? n->out[i] : NULL;
}

/* A kernel met a dtype it does not implement. */
static inline void
taprt_bad_dtype(taprt_ctx *cx, const taprt_node *n, const char *op, int dtype)
{
	taprt_fail(cx, "node '%s' (%s): dtype %s not supported", n->name, op,
	    taprt_dtype_name(dtype));
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

/*
 * The instruction set of the kernels written once per vector width
 * (conv_pw.c, conv_dw.c, the direct convolution): the CPU's best, capped
 * by TAPRT_ISA=avx2|baseline in the environment (cpu.c).
 */
enum { TAPRT_ISA_BASE, TAPRT_ISA_AVX2, TAPRT_ISA_AVX512 };
int taprt_isa(void);
/* Tests: use at most `level` from now on; returns what taprt_isa then
 * reports (less where the CPU has less). */
int taprt_isa_limit(int level);
/* AVX-512 F, CD, BW, DQ and VL, with the OS's support; TAPRT_ISA does not
 * cap it (gemm.c: OpenBLAS's core type) */
bool taprt_cpu_avx512(void);

/*
 * Per-function multiversioning for the hand-written hot loops: one clone
 * for AVX-512 (x86-64-v4), one for AVX2+FMA (x86-64-v3) and the baseline,
 * chosen by the loader (ifunc) for the CPU the program runs on.
 */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__)
#define TAPRT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TAPRT_CLONES
#endif

/*
 * Intra-op threads (--threads N): the kernels' loops over rows, planes or
 * chunks are OpenMP loops (`#pragma omp parallel for if (TAPRT_PAR(work))`)
 * on the rank thread's team of N (taprt_main sets it per rank thread);
 * below taprt_par_min elements of work (TAPRT_PAR_MIN; main.c takes the
 * environment's TAPRT_PAR_MIN instead, which the tests set to 1 so that
 * every such loop runs split on their small fixtures) a loop stays on one
 * thread.
 */
#define TAPRT_PAR_MIN 32768
extern int64_t taprt_par_min;
#define TAPRT_PAR(work) ((int64_t)(work) >= taprt_par_min)

/* Inside `#pragma omp parallel`: the team's size, and this thread's number
 * in *id (1 and 0 outside a team, or built without OpenMP).  For kernels
 * that cut their work into one contiguous share per thread themselves. */
static inline int
taprt_team(int *id)
{
#ifdef _OPENMP
	*id = omp_get_thread_num();
	return omp_get_num_threads();
#else
	*id = 0;
	return 1;
#endif
}

/*
 * Whether a team of T threads splits a layer whose image has P pixels (the
 * plane of its output; a 1x1 convolution's, a depthwise one's, a
 * squeeze-and-excitation's) by pixels -- each thread one band of every
 * channel -- rather than by channels.  One rule for the kernels a CNN
 * chains (conv_pw.c, conv_dw.c, k_se.c, conv_dnnl.c's bands), so that a
 * thread reads the band its own core wrote: a 1x1 convolution reads every channel of its
 * pixels, and split by filters half of its input came from the other
 * core's cache.  Only from 1024 pixels a thread (MobileNetV3's 56x56
 * planes, not its 28x28 ones): below, a band of every plane costs more
 * than it saves -- the depthwise kernel packs its KH - 1 halo rows again
 * per band, and a band's edge falls inside a cache line of each plane
 * that both threads write (at 14x14, 64 pixels a thread, MobileNetV3's
 * depthwise and squeeze-and-excitation layers ran 1.6x and 3x slower on
 * two threads than split by channels).
 */
static inline bool
taprt_split_pixels(int64_t P, int T)
{
	return T > 1 && P >= 1024 * (int64_t)T;
}

/* A TensorProto file's contents (pbio.c). */
typedef struct {
	char name[256];
	int dtype, rank;
	int64_t dims[TAPRT_MAX_RANK];
	int64_t numel;
	void *data;                     /* malloc'd, numel elements of dtype */
} taprt_pb;

int taprt_pb_parse(const uint8_t *buf, size_t len, taprt_pb *t, char *err, size_t errlen);
/* path must be a regular file of at most max_bytes (taprt_pb_max_bytes). */
int taprt_pb_read(const char *path, int64_t max_bytes, taprt_pb *t, char *err, size_t errlen);
/* Elements [first, first + n) of path's tensor into dst (room for n of
 * shape's dtype), if the file's dtype and dims are shape's; t gets the
 * file's header (no data).  0; 1 when the shape differs (nothing copied);
 * -1 with err. */
int taprt_pb_read_part(const char *path, int64_t max_bytes, const taprt_pb *shape, int64_t first,
    int64_t n, void *dst, taprt_pb *t, char *err, size_t errlen);
/* The largest TensorProto file a tensor of numel elements can be: ten bytes
 * per element (a varint), plus room for the name and dims. */
static inline int64_t
taprt_pb_max_bytes(int64_t numel)
{
	return numel * 10 + (1 << 20);
}
int taprt_pb_write(const char *path, const char *name, int dtype, int rank,
    const int64_t *dims, const void *data);

/* Map the program's files below model_dir (weights.c); 0 or -1 with err. */
int taprt_map_files(const taprt_program *p, const char *model_dir, char *err, size_t errlen);
void taprt_unmap_files(void);

/* The mpi backend (comm_mpi.c), in the table when configure found MPI. */
extern const taprt_backend taprt_mpi_backend;

/* How long a backend's wait spins before it sleeps, in ns (backend.c):
 * TAPRT_COMM_SPIN microseconds when set, else TAPRT_COMM_SPIN_US when the
 * busy threads (a node's ranks times each one's intra-op threads, 0 read
 * as 1) fit on the online CPUs, else 0. */
#define TAPRT_COMM_SPIN_US 4000
int64_t taprt_comm_spin_ns(int ranks, int threads);
/* CLOCK_MONOTONIC in ns (backend.c) */
int64_t taprt_now_ns(void);

/* The threads backend's shared state (comm_threads.c): one world per
 * process, one handle per rank thread. */
taprt_comm *taprt_threads_world(int nranks);                /* NULL on bad nranks / no memory */
taprt_comm *taprt_threads_rank(taprt_comm *world, int rank); /* cx->comm for rank */
void taprt_threads_abort(taprt_comm *world);                 /* wake blocked ranks; later calls fail */
void taprt_threads_free(taprt_comm *world);                  /* after every rank thread is joined */

/* acc = acc op x over n elements of dtype, the backends' reductions
 * (reduce.c); NULL unless dtype is f32, f64, i32 or i64 and op a TAPRT_SUM.. */
typedef void taprt_reducer(void *acc, const void *x, int64_t n);
taprt_reducer *taprt_reducer_for(int dtype, int op);

/*
 * A team's loop over units shared out with stealing (share.c).  Before the
 * team starts, taprt_share_init gives thread i of nt the share [bound[i],
 * bound[i+1]) (false past TAPRT_SHARE_MAX threads or 2^32 - 1 units: no
 * stealing then).  In the team each thread has a cursor: on its slot of
 * the share (c.sh, c.id), or with sh NULL on [c.lo, c.hi) alone, the
 * static split.  taprt_share_take hands it a run of up to max units from
 * its share's front, *u the first: how many, 0 when its share is done;
 * then taprt_share_steal moves the back half of the largest other share
 * with more than min_left units (and two at least) into its own (false
 * when none has one, or without sh).
 */
#define TAPRT_SHARE_MAX 64
typedef struct {
	struct {
		_Alignas(64) uint64_t r;        /* {lo, hi} from base: hi << 32 | lo */
	} slot[TAPRT_SHARE_MAX];
	int64_t base;
	int nt;
} taprt_share;
typedef struct {
	taprt_share *sh;
	int id;
	int64_t lo, hi;
} taprt_cursor;
bool taprt_share_init(taprt_share *sh, int nt, const int64_t *bound);
int64_t taprt_share_take(taprt_cursor *c, int64_t max, int64_t *u);
bool taprt_share_steal(taprt_cursor *c, int64_t min_left);

/* A buffer of at least `bytes`, 64-byte aligned, private to the calling
 * thread and valid until its next call (scratch.c); NULL if out of memory. */
void *taprt_scratch(int64_t bytes);

/* Element i of an f32 or f64 tensor as a double, and a double stored as
 * one (rounded once to f32): the kernels that compute in double. */
static inline double
taprt_getf(const taprt_tensor *t, int64_t i)
{
	return t->dtype == TAPRT_F64 ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}

/* Element i of a tensor of any numeric type, f16, bf16 or bool, as a double
 * and stored from one (a cast, as Cast's: k_elementwise.c); slow paths. */
double taprt_get_any(const taprt_tensor *t, int64_t i);
void taprt_set_any(taprt_tensor *t, int64_t i, double v);

static inline void
taprt_setf(taprt_tensor *t, int64_t i, double v)
{
	if (t->dtype == TAPRT_F64)
		((double *)t->data)[i] = v;
	else
		((float *)t->data)[i] = (float)v;
}

/*
 * The one GEMM interface (gemm.c): row-major c = alpha * op(a) @ op(b) +
 * beta * c, op transposing when ta/tb; on oneDNN's sgemm (large
 * products) and OpenBLAS with the CPU's best kernels, or a portable loop.
 * taprt_gemm_threads, called once before the ranks' threads start, makes
 * the choice; taprt_gemm_name says what has served ("oneDNN + OpenBLAS
 * SkylakeX"; "oneDNN" while OpenBLAS has not been needed).
 */
void taprt_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void taprt_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *a,
    int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
void taprt_gemm_threads(int n);
const char *taprt_gemm_name(void);
/* The threads a parallel loop started here would get (the calling rank
 * thread's OpenMP team, --threads): 1 inside one. */
int taprt_team_size(void);

/* t clamped to [0, 1] for HardSigmoid and HardSwish, f32 or f64: selects
 * that vectorize, min before max as numpy's clip, so NaN stays NaN (the
 * elementwise kernels, the fused epilogues and conv_pw.c's last columns;
 * vact.h has the same comparisons lane by lane) */
#define TAPRT_CLAMP01(t) ((t) > 1 ? 1 : (t) < 0 ? 0 : (t))

/*
 * erf for f32 without a libm call, so the loop vectorizes: GELU makes Erf a
 * quarter of a transformer's time with glibc's scalar erff.  Eigen's
 * rational approximation (odd numerator, even denominator in x^2) on
 * [-4, 4], where erf already rounds to +-1 in f32 outside; NaN passes
 * through the clamp unchanged.
 */
static inline float
taprt_erf_f32(float x)
{
	x = x < -4.f ? -4.f : x > 4.f ? 4.f : x;
	float x2 = x * x;
	float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
	p = p * x2 + -2.10102402082508e-06f;
	p = p * x2 + -5.69250639462346e-05f;
	p = p * x2 + -7.34990630326855e-04f;
	p = p * x2 + -2.95459980854025e-03f;
	p = p * x2 + -1.60960333262415e-02f;
	p *= x;
	float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
	q = q * x2 + -1.68282697438203e-03f;
	q = q * x2 + -7.37332916720468e-03f;
	q = q * x2 + -1.42647390514189e-02f;
	return p / q;
}

/* The erf GELU as torch exports it, (v (erf(v / d) + 1)) 0.5 with d torch's
 * f32 sqrt(2), 1.41421354 (or an f16 model's 1.4140625), in the f32
 * operations of its five nodes (Div, Erf, Add, Mul, Mul): the one formula
 * of the fused kernels that replace them (FusedMatMul's and the 1x1
 * convolutions' Gelu activation, its divisor their activation_params;
 * FusedGelu). */
static inline float
taprt_gelu_f32(float v, float d)
{
	return (v * (taprt_erf_f32(v / d) + 1.0f)) * 0.5f;
}

/* Float bits; a ? b : c on bit masks, with no branch for GCC to thread
 * (with -ftrapping-math it will not if-convert float code, and then the
 * loop does not vectorize). */
typedef union {
	float f;
	uint32_t u;
	int32_t i;
} taprt_fbits;

static inline uint32_t
taprt_sel(uint32_t mask, uint32_t a, uint32_t b)
{
	return (a & mask) | (b & ~mask);
}

/*
 * e^x in f32 to about 2 ulp (Cephes' expf polynomial), branch-free so that
 * loops over it vectorize (Softmax, Exp, Sigmoid, LogSoftmax's gradient;
 * glibc's expf is a scalar call): x = n ln2 + r, |r| <= ln2/2, e^x =
 * 2^n p(r).
 * Inputs are clamped to [-87.34, 88.38] on their bits; below, the result
 * is 0 (no subnormals), above it is inf, NaN stays NaN.
 */
static inline float
taprt_exp_f32(float x)
{
	taprt_fbits in = {x}, c, s, out;
	uint32_t big = -(uint32_t)(in.i > 0x42b0c0a5);          /* x > 88.3762 */
	uint32_t small = -(uint32_t)(in.u > 0xc2aeac50u);       /* x < -87.3365 */
	uint32_t nan = -(uint32_t)((in.u & 0x7fffffffu) > 0x7f800000u);
	c.u = taprt_sel(big, 0x42b0c0a5u, taprt_sel(small, 0xc2aeac50u, in.u));
	/* round to nearest by the 1.5 * 2^23 trick (no libm call) */
	float t = c.f * 1.44269504088896341f + 12582912.0f;
	float fn = t - 12582912.0f;
	float r = c.f - fn * 0.693359375f;
	r = r + fn * 2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	s.i = ((int32_t)fn + 127) << 23;        /* 2^n, n in [-126, 127] */
	out.f = p * s.f;
	out.u = taprt_sel(nan, in.u | 0x00400000u, taprt_sel(big, 0x7f800000u, out.u & ~small));
	return out.f;
}

/* e^v in v's type: the polynomial for f32, libm's (tgmath) otherwise. */
#define TAPRT_EXP(v) _Generic((v), float: taprt_exp_f32((float)(v)), default: exp(v))

/*
 * A fused activation (FusedConv, FusedGemm: passes/fuse_conv.c): applied to
 * a kernel's result while it is in cache, the same arithmetic as the
 * standalone operator's kernel (k_elementwise.c).
 */
enum {
	TAPRT_ACT_NONE, TAPRT_ACT_RELU, TAPRT_ACT_CLIP, TAPRT_ACT_HARDSIGMOID,
	TAPRT_ACT_HARDSWISH, TAPRT_ACT_LEAKYRELU,
	TAPRT_ACT_GELU,                 /* (v * (erf(v / a) + 1)) * 0.5f, as torch exports it (a 1.41421354f) */
};
typedef struct {
	int kind;
	float a, b;                     /* Clip: min, max; HardSigmoid: alpha, beta; LeakyRelu: alpha */
} taprt_act;

/* y[p] = the mean of plane p of x (planes contiguous planes of sz floats),
 * on the calling thread: GlobalAveragePool's loop, for FusedSqueezeExcite's
 * team (k_se.c). */
void taprt_means_f32(const float *x, float *y, int64_t planes, int64_t sz);

/* The node's "activation" attributes (activation, activation_params); -1
 * after taprt_fail on an unknown name.  taprt_act_named reads the pair
 * `name`, `params` (FusedSqueezeExcite's gate, gate_params). */
int taprt_act_get(taprt_ctx *cx, const taprt_node *n, taprt_act *a);
int taprt_act_named(taprt_ctx *cx, const taprt_node *n, const char *name, const char *params,
    taprt_act *a);

/*
 * The spatial geometry of a Conv or pool (k_nn.c), padded to three dims
 * with leading unit dims so one loop nest serves 1-D, 2-D and 3-D.
 * taprt_geom_get fills it from the node's attributes (kdims: the kernel
 * from W when kernel_shape is absent); -1 after taprt_fail.
 * taprt_im2col_f32/f64: col[C * k0*k1*k2, out0*out1*out2] from one image
 * x[C, in0, in1, in2], 0 in the pads (k_quant.c's integer convolutions).
 */
typedef struct {
	int64_t in[3], out[3];          /* spatial sizes of X and Y */
	int64_t k[3], st[3], dil[3];    /* kernel, strides, dilations */
	int64_t pb[3], pe[3];           /* pads at the beginning and end */
	int64_t planes;                 /* N * C of X for pools */
	int64_t isz, osz;               /* in/out plane sizes */
} taprt_geom;
int taprt_geom_get(taprt_ctx *cx, const taprt_node *n, const char *op, const taprt_tensor *x,
    const taprt_tensor *y, const int64_t *kdims, taprt_geom *g);
void taprt_im2col_f32(const float *x, int64_t C, const taprt_geom *g, float *col);
void taprt_im2col_f64(const double *x, int64_t C, const taprt_geom *g, double *col);
/* MatMul's batch (k_nn.c): the matrix strides of t's batch dims (all but
 * its last two), right-aligned to the nb batch dims of the output; 0 where
 * t broadcasts. */
void taprt_batch_strides(const taprt_tensor *t, int nb, int64_t mat, int64_t *st);

/*
 * c[M,N] = a[M,K] @ b[K,N] in s32 on oneDNN's int8 matmul (conv_dnnl.c):
 * a u8 or s8 (adt), b s8 and a weight of node n (reordered on its first
 * run and kept, with its column sums, which *colsum then points at), all
 * row-major, no zero points.  Returns 1 when done, 0 when declined (no
 * oneDNN, or no kernel that sums exactly: VNNI or AMX), -1 after taprt_fail.
 */
int taprt_qmatmul_dnnl(taprt_ctx *cx, const taprt_node *n, int64_t M, int64_t N, int64_t K,
    const void *a, int adt, const int8_t *b, int32_t *c, const int32_t **colsum);
/*
 * The runtime's convolution library (conv_dnnl.c): a 2-D f32 Conv,
 * y = act(conv(x, w) + b + z), on oneDNN when the build has it and its
 * kernels suit the shape.  Returns 1 when done, 0 when declined (the
 * caller computes it), -1 after taprt_fail.  taprt_conv_threads sets its
 * threads per rank.
 */
typedef struct {
	int64_t N, C, H, W, M, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
} taprt_conv2d;
int taprt_conv_dnnl(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w,
    const float *b, const float *z, float *y, const taprt_conv2d *c, const taprt_act *act);
void taprt_conv_threads(int n);
/*
 * 3x3 stride-1 Conv by Winograd F(4x4, 3x3) on AVX2 CPUs (conv_wino.c):
 * group 1, at least 16 channels and filters, a fixed W, enough tiles.
 * Returns 1 when done, 0 when declined, -1 after taprt_fail.
 */
int taprt_conv_wino_f32(taprt_ctx *cx, const taprt_node *n, const float *x, const float *w,
    const float *b, const float *z, float *y, const taprt_conv2d *c, const taprt_act *act);
/*
 * Depthwise 2-D Conv (conv_dw.c): C == M == group, any stride, pads and
 * dilation; y = act(conv(x, w) + b + z).  With e (FusedConvDw) x is NULL
 * and the input is a 1x1 convolution's output that is never stored:
 * act_e(e->w^T @ e->x + e->b), e->x [N][e->C][H*W] its input, e->w
 * [e->C][C] its filters transposed (rows e->ldw = C apart: the pass stores
 * them so), e->b [C] or NULL.
 * Returns 1 when done, 0 when declined (kernels over 64 rows tall), -1
 * when out of scratch memory.
 */
typedef struct {
	const float *x, *w, *b;
	int64_t C, ldw;
	const taprt_act *act;
} taprt_conv_expand;
int taprt_conv_dw_f32(const float *x, const float *w, const float *b, const float *z, float *y,
    const taprt_conv2d *c, const taprt_act *act, const taprt_conv_expand *e);
/*
 * Pointwise Conv of one image and group (conv_pw.c): y[M,P] = act(w[M,C] @
 * x[C,P] + b + z).  Returns 1 when done, 0 when declined (no kernel for this
 * CPU: the caller runs the GEMM), -1 out of memory.  may_scratch: x is not
 * in the thread's scratch buffer, which the kernel may then use.
 */
int taprt_conv_pw_f32(const float *w, const float *x, const float *b, const float *z, float *y,
    int64_t M, int64_t C, int64_t P, const taprt_act *act, bool may_scratch);

/*
 * c[M,N] = act(op(a) @ op(b) (+ c when acc) + bias[N] + z[M,N]) for a b that
 * is a weight or a constant (gemm_pack.c), op transposing when ta/tb (a is
 * then [K,M]): op(b) packed on the first call for `key` (the node) and kept
 * in cx->packs until taprt_packs_free; bias, z and act may be NULL.  Returns
 * 1 when done, 0 when declined before writing anything (not an AVX2 CPU, a
 * small product, a training program, no cx: the caller runs taprt_sgemm),
 * -1 when out of memory part-way.
 */
int taprt_sgemm_fixed_b(taprt_ctx *cx, const void *key, bool ta, bool tb, int64_t M, int64_t N,
    int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, bool acc, float *c,
    int64_t ldc, const float *bias, const float *z, const taprt_act *act);

/*
 * gemm_pack.c's AVX2 register kernel (x86-64 GCC builds only; call it on an
 * AVX2 CPU): c[i * ldc + j] = sum_k a[k * 6 + i] * b[k * 16 + j] for i < mr
 * <= 6, j < nr <= 16; a is kc x 6 and b kc x 16 floats whatever mr and nr.
 */
void taprt_gemm_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr,
    int nr);

/* y[i] = act(y[i] + bias + (z ? z[i] : 0)) for i < n. */
void taprt_epilogue_f32(float *restrict y, int64_t n, float bias, const float *restrict z,
    const taprt_act *a);
/* The same with a bias per element (MatMul's bias along the last dim). */
void taprt_epilogue_vec_f32(float *restrict y, int64_t n, const float *restrict bias,
    const float *restrict z, const taprt_act *a);

#endif
