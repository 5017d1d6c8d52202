/*
 * gemm_pack.c - the packed-weight product of docs/runtime.md ("Products
 * against a weight"): GFLOP/s of runtime/gemm_pack.c's taprt_sgemm_fixed_b
 * against taprt_sgemm (the GEMM library the runtime would call instead) on
 * GPT-2-small's projections at batch 4, T 128, interleaved calls, minimum
 * and median; and the core's fused multiply-add peak.  From a build tree
 * (../../ the source, configured with oneDNN and MPI):
 *
 *   cc -O2 -fopenmp -I../.. -I. ../../bench/gemm_pack.c -o gemm_pack \
 *      runtime/.libs/libtaprt.a -lmpi -ldnnl -lm -ldl -lpthread
 *   OMP_NUM_THREADS=1 ./gemm_pack [CALLS]; OMP_NUM_THREADS=2 ./gemm_pack
 *
 * An AVX2 CPU without AVX-512 runs the packed kernel; elsewhere it declines
 * and this says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "runtime/internal.h"

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Twelve independent chains of fused multiply-adds: GFLOP/s of one core. */
__attribute__((target("avx2,fma"), optimize("unroll-loops"))) static double
peak(void)
{
	typedef float v8 __attribute__((vector_size(32)));
	v8 a[12], m = {0}, c = {0};
	m += 1.0000001f;
	c += 1e-9f;
	for (int i = 0; i < 12; i++)
		a[i] = c * (float)i;
	long n = 20000000;
	double t = now();
	for (long i = 0; i < n; i++)
		for (int j = 0; j < 12; j++)
			a[j] = a[j] * m + c;
	t = now() - t;
	float s = 0;
	for (int i = 0; i < 12; i++)
		s += a[i][0];
	if (s == 1234.5f)
		printf("-");
	return n * 12.0 * 16 / t / 1e6;
}

int
main(int argc, char **argv)
{
	static const struct { int M, K, N; const char *what; } sh[] = {
		{512, 768, 3072, "GPT-2 mlp.0"}, {512, 3072, 768, "GPT-2 mlp.2"},
		{512, 768, 2304, "GPT-2 c_attn"}, {512, 768, 768, "GPT-2 c_proj"},
		{512, 768, 2048, "gpt2s lm_head"},
	};
	int calls = argc > 1 ? atoi(argv[1]) : 20;
	if (calls < 1 || calls > 1000)
		calls = 20;
	int threads = 1;
#ifdef _OPENMP
	threads = omp_get_max_threads();
#endif
	printf("%d thread(s), %d calls each; FMA peak %.1f GFLOP/s (one core)\n\n", threads, calls,
	    peak());
	printf("| M x K x N | what | library min / median | packed min / median | ratio (medians) |\n");
	printf("|---|---|--:|--:|--:|\n");
	double *t = malloc(2 * calls * sizeof *t);
	for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
		int64_t M = sh[s].M, K = sh[s].K, N = sh[s].N;
		float *a = aligned_alloc(64, M * K * 4), *b = aligned_alloc(64, K * N * 4);
		float *c = aligned_alloc(64, M * N * 4);
		for (int64_t i = 0; i < M * K; i++)
			a[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
		for (int64_t i = 0; i < K * N; i++)
			b[i] = (float)((i * 3) % 11) * 0.1f - 0.5f;
		taprt_ctx cx;
		memset(&cx, 0, sizeof cx);
		if (taprt_sgemm_fixed_b(&cx, b, false, false, M, N, K, a, K, b, N, false, c, N, NULL, NULL,
		    NULL) != 1) {
			printf("| %lldx%lldx%lld | %s | declined on this CPU |||\n", (long long)M,
			    (long long)K, (long long)N, sh[s].what);
			continue;
		}
		for (int r = 0; r < calls; r++) {
			double t0 = now();
			taprt_sgemm(false, false, M, N, K, 1, a, K, b, N, 0, c, N);
			t[r] = now() - t0;
			t0 = now();
			taprt_sgemm_fixed_b(&cx, b, false, false, M, N, K, a, K, b, N, false, c, N, NULL, NULL,
			    NULL);
			t[calls + r] = now() - t0;
		}
		qsort(t, calls, sizeof *t, cmp);
		qsort(t + calls, calls, sizeof *t, cmp);
		double f = 2.0 * M * N * K / 1e6;
		printf("| %lldx%lldx%lld | %s | %.1f / %.1f | %.1f / %.1f | %.2f |\n", (long long)M,
		    (long long)K, (long long)N, sh[s].what, f / t[0], f / t[calls / 2],
		    f / t[calls], f / t[calls + calls / 2], t[calls / 2] / t[calls + calls / 2]);
		taprt_packs_free(&cx);
		free(a);
		free(b);
		free(c);
	}
	free(t);
	return 0;
}
