/*
 * gemm.c - the runtime's one GEMM interface (taprt_sgemm, taprt_dgemm), on
 * the best kernels of the CPU the program runs on.
 *
 * Needs: libdl, and OpenBLAS's shared library (Debian's libopenblas0) at run
 * time; without it a portable C product serves (correct, slow).  Every
 * kernel that multiplies matrices (MatMul, Gemm, Conv, ConvTranspose,
 * Einsum, the recurrent ops) calls these, never a BLAS directly, so the
 * library behind them is this file's choice alone.  When the build has
 * oneDNN (HAVE_DNNL), products of 1M multiply-adds and more go to its
 * sgemm: 2-7% faster than OpenBLAS's AVX-512 kernels on GPT-2's
 * projections and 19% on attention's per-head products, while OpenBLAS's
 * small-matrix kernels stay 3x faster below (docs/runtime.md, "GEMM").
 *
 * Why OpenBLAS, loaded with dlopen: measured on tapc's own shapes
 * (docs/runtime.md, "GEMM"), OpenBLAS with its AVX-512 (SkylakeX) kernels is
 * the fastest of OpenBLAS, BLIS 0.9 and oneDNN 2.6's sgemm, by far on the
 * small attention and Conv products.  OpenBLAS chooses its kernels once,
 * in a constructor, when the library is loaded, and an OPENBLAS_CORETYPE in
 * the environment overrides its CPU detection -- the machines this was
 * written on export OPENBLAS_CORETYPE=Haswell, which halves sgemm's speed
 * on their AVX-512 CPU.  A program linked with -lopenblas gets no say, so
 * the runtime loads the library itself, with the core type it chooses
 * from the CPU: SKYLAKEX when the CPU and the OS support AVX-512 (F, CD,
 * BW, DQ, VL), else OpenBLAS's own detection (an inherited
 * OPENBLAS_CORETYPE is set aside).  It does so on the first product that
 * oneDNN does not take, so that a program whose products all go to oneDNN
 * never maps it.
 * TAPRT_GEMM_CORE=NAME chooses an OpenBLAS core type by hand;
 * TAPRT_GEMM=openblas leaves oneDNN out, TAPRT_GEMM=portable forces the
 * fallback (tests).  taprt_gemm_name() says
 * what serves (the program's --bench line prints it).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "runtime/internal.h"
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* cblas's enums and prototypes, so that no BLAS header is needed to build */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*sgemv_fn)(int order, int ta, int m, int n, float alpha, const float *a,
    int lda, const float *x, int incx, float beta, float *y, int incy);
typedef void (*dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
    const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);

static struct {
	sgemm_fn sgemm;
	sgemv_fn sgemv;
	dgemm_fn dgemm;
	char name[96];
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT, blas_once = PTHREAD_ONCE_INIT;
static bool blas_wanted;                /* OpenBLAS to be loaded when needed */
static int lib_threads = 1;
static bool use_dnnl;                   /* large products on oneDNN's sgemm */

/* From this many multiply-adds on, oneDNN's sgemm (below). */
#define DNNL_MIN_MACS ((int64_t)1 << 20)

static void
lib_load(void)
{
	const char *want = getenv("TAPRT_GEMM");
	snprintf(lib.name, sizeof lib.name, "portable");
	if (want && strcmp(want, "portable") == 0)
		return;
#ifdef HAVE_DNNL
	use_dnnl = !(want && strcmp(want, "openblas") == 0);
	if (use_dnnl)
		snprintf(lib.name, sizeof lib.name, "oneDNN");
#endif
	/* OpenBLAS is loaded later, by the first product that needs it
	 * (blas_load), but its environment is set here: this runs once, from
	 * taprt_gemm_threads before the ranks' threads start, and setenv is
	 * not safe while other threads may read the environment.  The core
	 * type: the user's TAPRT_GEMM_CORE, else AVX-512's kernels where the
	 * CPU has them, else OpenBLAS's detection (an inherited
	 * OPENBLAS_CORETYPE set aside).  And no thread pool of its own:
	 * products are split across the rank's OpenMP threads (taprt_sgemm),
	 * so that two runtimes' idle threads never spin against each other
	 * on the same cores.  The program starts no processes, so the
	 * variables stay as set. */
	const char *core = getenv("TAPRT_GEMM_CORE");
	if (core && *core)
		setenv("OPENBLAS_CORETYPE", core, 1);
	else if (taprt_cpu_avx512())
		setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
	else
		unsetenv("OPENBLAS_CORETYPE");
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	blas_wanted = true;
}

/* OpenBLAS itself, on the first product oneDNN does not take: a program
 * whose products all go to oneDNN never maps it (2.2 MB resident with
 * libgfortran, per process: an MPI rank's share of the memory). */
static void
blas_load(void)
{
	if (!blas_wanted)
		return;
	void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	sgemm_fn s = (sgemm_fn)dlsym(h, "cblas_sgemm");
	dgemm_fn d = (dgemm_fn)dlsym(h, "cblas_dgemm");
	if (!s || !d) {
		dlclose(h);
		return;
	}
	lib.sgemv = (sgemv_fn)dlsym(h, "cblas_sgemv");
	lib.dgemm = d;
	void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
	char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
	snprintf(lib.name, sizeof lib.name, "%sOpenBLAS %s", use_dnnl ? "oneDNN + " : "",
	    corename ? corename() : "");
	if (set_threads)
		set_threads(1);
	lib.sgemm = s; /* what blas_init reports */
}

static void
lib_init(void)
{
	pthread_once(&lib_once, lib_load);
}

/* Whether OpenBLAS serves (loading it on the first call). */
static bool
blas_init(void)
{
	lib_init();
	pthread_once(&blas_once, blas_load);
	return lib.sgemm != NULL;
}

void
taprt_gemm_threads(int n)
{
	lib_threads = n > 0 ? n : 1;
	lib_init();
}

int
taprt_team_size(void)
{
#ifdef _OPENMP
	return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
	return 1;
#endif
}

const char *
taprt_gemm_name(void)
{
	lib_init();
	if (!use_dnnl) /* OpenBLAS would serve every product */
		blas_init();
	return lib.name;
}

/*
 * The portable product: c = alpha * op(a) @ op(b) + beta * c, with element
 * strides, i-k-j order so the inner loop runs along c's contiguous rows
 * and vectorizes.  Only used without OpenBLAS.
 */
#define PORTABLE(T, s)                                                    \
static void                                                               \
portable_##s(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha,  \
    const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,       \
    int64_t ldc)                                                          \
{                                                                         \
	int64_t ar = ta ? 1 : lda, ac = ta ? lda : 1;                     \
	int64_t br = tb ? 1 : ldb, bc = tb ? ldb : 1;                     \
	for (int64_t i = 0; i < M; i++) {                                 \
		T *ci = c + i * ldc;                                      \
		for (int64_t j = 0; j < N; j++)                           \
			ci[j] = beta == 0 ? 0 : beta * ci[j];             \
		for (int64_t k = 0; k < K; k++) {                         \
			T v = alpha * a[i * ar + k * ac];                 \
			const T *bk = b + k * br;                         \
			if (bc == 1)                                      \
				for (int64_t j = 0; j < N; j++)           \
					ci[j] += v * bk[j];               \
			else                                              \
				for (int64_t j = 0; j < N; j++)           \
					ci[j] += v * bk[j * bc];          \
		}                                                         \
	}                                                                 \
}
PORTABLE(float, s)
PORTABLE(double, d)
#undef PORTABLE

/*
 * The library's sgemm, or its sgemv when c is one row or one column: a
 * classifier's [1,K] @ W^T[K,N] goes through OpenBLAS's sgemm 7x slower
 * than through sgemv (it packs all of W first: 0.28 against 0.04 ms at
 * K 1024, N 1000, measured).
 */
static void
lib_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
#ifdef HAVE_DNNL
	if (use_dnnl && M > 1 && N > 1 && M * N * K >= DNNL_MIN_MACS &&
	    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c,
	    ldc) == dnnl_success)
		return;
#endif
	if (!blas_init()) {
		portable_s(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	if (lib.sgemv && M == 1) /* c[1,N] = op(b)^T op(a)^T: b [N,K] if tb, else [K,N] */
		lib.sgemv(ROW_MAJOR, tb ? NO_TRANS : TRANS, (int)(tb ? N : K), (int)(tb ? K : N),
		    alpha, b, (int)ldb, a, ta ? (int)lda : 1, beta, c, 1);
	else if (lib.sgemv && N == 1) /* c[M,1] = op(a) op(b): a [K,M] if ta, else [M,K] */
		lib.sgemv(ROW_MAJOR, ta ? TRANS : NO_TRANS, (int)(ta ? K : M), (int)(ta ? M : K),
		    alpha, a, (int)lda, b, tb ? 1 : (int)ldb, beta, c, (int)ldc);
	else
		lib.sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N,
		    (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* One thread's share of c: rows [i0, i1) and columns [j0, j1). */
static void
sgemm_part(bool ta, bool tb, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t K,
    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
    int64_t ldc)
{
	const float *ap = ta ? a + i0 : a + i0 * lda, *bp = tb ? b + j0 * ldb : b + j0;
	float *cp = c + i0 * ldc + j0;
	if (K > 0)
		lib_sgemm(ta, tb, i1 - i0, j1 - j0, K, alpha, ap, lda, bp, ldb, beta, cp, ldc);
	else
		portable_s(ta, tb, i1 - i0, j1 - j0, K, alpha, ap, lda, bp, ldb, beta, cp, ldc);
}

void
taprt_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a,
    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
	if (M <= 0 || N <= 0)
		return;
	lib_init();
#if defined(_OPENMP) && defined(HAVE_DNNL)
	/* oneDNN's sgemm threads itself on the calling rank's team (the same
	 * libgomp), partitioned so that no thread packs all of b again, as a
	 * split by rows below would */
	if (use_dnnl && M > 1 && N > 1 && M * N * K >= DNNL_MIN_MACS) {
		lib_sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
#endif
#ifdef _OPENMP
	blas_init(); /* here, before the team forks */
	/* the rank's threads split c by rows (by columns when it is short),
	 * in blocks of 16 so the kernels' tiles stay whole */
	int t = taprt_team_size();
	/* a matrix-vector product streams its matrix from memory: worth
	 * splitting from 256 KiB (a classifier's W) */
	int64_t work = M * N * (K > 0 ? K : 1);
	if (t > 1 && (work >= (int64_t)1 << 21 || ((M == 1 || N == 1) && work >= (int64_t)1 << 16))) {
		bool rows = M >= N || M >= 64 * t;
		int64_t len = rows ? M : N, per = ((len + t - 1) / t + 15) & ~(int64_t)15;
		#pragma omp parallel for num_threads(t) schedule(static, 1)
		for (int i = 0; i < t; i++) {
			int64_t lo = i * per, hi = lo + per < len ? lo + per : len;
			if (lo >= hi)
				continue;
			if (rows)
				sgemm_part(ta, tb, lo, hi, 0, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
			else
				sgemm_part(ta, tb, 0, M, lo, hi, K, alpha, a, lda, b, ldb, beta, c, ldc);
		}
		return;
	}
#endif
	if (K > 0)
		lib_sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
	else
		portable_s(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void
taprt_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *a,
    int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc)
{
	if (M <= 0 || N <= 0)
		return;
	if (blas_init() && lib.dgemm && K > 0)
		lib.dgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N,
		    (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
	else
		portable_d(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}
