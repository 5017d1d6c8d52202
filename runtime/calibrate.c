/*
 * calibrate.c - taprt-calibrate: measure this machine for the planner and
 * write a -cluster file (docs/planner.md, "Calibration").
 *
 *   taprt-calibrate [--devices N] [--backend=threads] [-o FILE]
 *
 * Runs N ranks (default: the online cores) with a backend from the
 * runtime's table, as a generated program would on this machine, and
 * measures, all ranks at once:
 *   flops     FLOP/s of one rank's f32 MatMul through the runtime's own
 *             kernel (taprt_op_MatMul, so whatever GEMM the runtime uses), on
 *             square matrices of 256, one BLAS thread per rank; the slowest
 *             rank's, since ranks sharing cores slow each other down;
 *   op_latency  what one operator call costs beyond its work: an Add of
 *             16 floats;
 *   mem_bw    the bytes per second one rank's Add over 4 MiB arrays reads
 *             and writes (the slowest rank's);
 *   latency   seconds per all-reduce of one float over the N ranks;
 *   intra_bw  the link bandwidth that makes the cost model's ring formula,
 *             latency + 2(N-1)/N x bytes / bw, give the measured time of an
 *             all-reduce of 16 MiB over the N ranks (one rank: a memcpy);
 *   memory    physical memory over N.
 * and writes them as a one-node cluster of N devices.  Needs the runtime
 * (libtaprt) and nothing else.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/internal.h"

#define GEMM_N 256
#define BW_FLOATS (4 << 20)             /* 16 MiB */

typedef struct {
	const taprt_backend *be;
	taprt_comm *world;
	int rank, n;
	const int *all;
	double flops, call, stream, latency, seconds; /* this rank's results */
	int rc;
} Rank;

/* seconds, on the runtime's clock */
static double
now(void)
{
	return taprt_now_ns() / 1e9;
}

static void *
run(void *arg)
{
	Rank *r = arg;
	taprt_comm *c = r->be->rank(r->world, r->rank);
	taprt_group all = {.size = r->n, .ranks = r->all};
	/* GEMM: one rank's MatMul, timed over half a second */
	taprt_tensor a = {.dtype = TAPRT_F32, .rank = 2, .dims = {GEMM_N, GEMM_N},
		.numel = GEMM_N * GEMM_N};
	taprt_tensor b = a, y = a;
	a.data = calloc(a.numel, sizeof(float));
	b.data = calloc(b.numel, sizeof(float));
	y.data = calloc(y.numel, sizeof(float));
	float *big = calloc(BW_FLOATS, sizeof(float));
	if (!a.data || !b.data || !y.data || !big) {
		r->rc = -ENOMEM;
		return NULL;
	}
	for (int64_t i = 0; i < a.numel; i++) {
		((float *)a.data)[i] = (float)(i % 7) * 0.25f;
		((float *)b.data)[i] = (float)(i % 5) * 0.5f;
	}
	taprt_tensor *in[2] = {&a, &b}, *out[1] = {&y};
	taprt_node mm = {.name = "calibrate", .opset = 17, .nin = 2, .nout = 1, .in = in, .out = out};
	taprt_ctx cx = {.rank = r->rank, .nranks = r->n, .be = r->be, .comm = c, .intra_threads = 1};
	int rc = r->be->barrier(c, &all);
	taprt_op_MatMul(&cx, &mm); /* warm-up */
	double t0 = now(), t = 0;
	int64_t reps = 0;
	while ((t = now() - t0) < 0.5) {
		taprt_op_MatMul(&cx, &mm);
		reps++;
	}
	r->flops = 2.0 * GEMM_N * GEMM_N * GEMM_N * reps / t;
	/* what a call costs beyond its work: an Add of 16 floats */
	taprt_tensor sa = {.dtype = TAPRT_F32, .rank = 1, .dims = {16}, .numel = 16, .data = a.data};
	taprt_tensor sb = sa, sy = sa;
	sb.data = b.data;
	sy.data = y.data;
	taprt_tensor *sin[2] = {&sa, &sb}, *sout[1] = {&sy};
	taprt_node small = {.name = "calibrate", .opset = 17, .nin = 2, .nout = 1, .in = sin,
		.out = sout};
	t0 = now();
	reps = 0;
	while ((t = now() - t0) < 0.2) {
		taprt_op_Add(&cx, &small);
		reps++;
	}
	r->call = t / reps;
	/* what an operator streams: an Add over three 4 MiB arrays of big */
	int64_t q = BW_FLOATS / 4;
	taprt_tensor xa = {.dtype = TAPRT_F32, .rank = 1, .dims = {q}, .numel = q, .data = big};
	taprt_tensor xb = xa, xy = xa;
	xb.data = big + q;
	xy.data = big + 2 * q;
	taprt_tensor *xin[2] = {&xa, &xb}, *xout[1] = {&xy};
	taprt_node add = {.name = "calibrate", .opset = 17, .nin = 2, .nout = 1, .in = xin,
		.out = xout};
	taprt_op_Add(&cx, &add);
	t0 = now();
	reps = 0;
	while ((t = now() - t0) < 0.3) {
		taprt_op_Add(&cx, &add);
		reps++;
	}
	r->stream = 3.0 * q * sizeof(float) * reps / t;
	/* latency: an all-reduce of one float */
	float one = 1;
	if (!rc)
		rc = r->be->barrier(c, &all);
	int nlat = 2000;
	t0 = now();
	for (int i = 0; i < nlat && !rc; i++)
		rc = r->be->allreduce(c, &all, &one, 1, TAPRT_F32, TAPRT_SUM);
	r->latency = (now() - t0) / nlat;
	/* bandwidth: all-reduces of 16 MiB (one rank: copies of it) */
	if (!rc)
		rc = r->be->barrier(c, &all);
	int nbw = 10;
	t0 = now();
	for (int i = 0; i < nbw && !rc; i++) {
		if (r->n > 1)
			rc = r->be->allreduce(c, &all, big, BW_FLOATS, TAPRT_F32, TAPRT_SUM);
		else
			memcpy(big, big + BW_FLOATS / 2, sizeof(float) * BW_FLOATS / 2);
	}
	r->seconds = (now() - t0) / nbw;
	r->rc = rc;
	free(a.data);
	free(b.data);
	free(y.data);
	free(big);
	return NULL;
}

static void
usage(FILE *f, const char *argv0)
{
	fprintf(f, "usage: %s [--devices N] [--backend=threads] [-o FILE]\n"
	    "Measures this machine's GEMM FLOP/s, collective latency and bandwidth with N ranks\n"
	    "(default: the online cores) and writes a tapc -cluster file (default: stdout).\n",
	    argv0);
}

int
main(int argc, char **argv)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int n = cores > 0 ? (int)cores : 1;
	const char *backend = "threads", *path = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout, argv[0]);
			return 0;
		} else if (!strcmp(a, "--devices") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 1 || v > 4096) {
				fprintf(stderr, "%s: --devices %s: expected 1 to 4096\n", argv[0], argv[i]);
				return 2;
			}
			n = (int)v;
		} else if (!strncmp(a, "--backend=", 10)) {
			backend = a + 10;
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			path = argv[++i];
		} else {
			usage(stderr, argv[0]);
			return 2;
		}
	}
	char err[512];
	const taprt_backend *be = taprt_backend_find(backend, err, sizeof err);
	if (!be) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		return 2;
	}
	taprt_layout l = {.nranks = n, .tp = n, .pp = 1, .dp = 1, .microbatches = 1};
	taprt_comm *world = NULL;
	int first = 0, count = 0;
	err[0] = 0;
	if (be->init(&l, &world, &first, &count, err, sizeof err) != 0) {
		fprintf(stderr, "%s: %s\n", argv[0], err[0] ? err : "the backend did not start");
		be->finalize(world);
		return 1;
	}
	if (count != n) {
		fprintf(stderr, "%s: the %s backend runs %d of the %d ranks here: taprt-calibrate "
		    "measures one machine with the threads backend\n", argv[0], be->name, count, n);
		be->finalize(world);
		return 1;
	}
	taprt_gemm_threads(1);
	int *all = calloc(n, sizeof *all);
	Rank *r = calloc(n, sizeof *r);
	pthread_t *th = calloc(n, sizeof *th);
	if (!all || !r || !th) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return 1;
	}
	for (int i = 0; i < n; i++)
		all[i] = i;
	for (int i = 0; i < n; i++) {
		r[i] = (Rank){.be = be, .world = world, .rank = i, .n = n, .all = all};
		if (pthread_create(&th[i], NULL, run, &r[i]) != 0) {
			fprintf(stderr, "%s: cannot start rank %d\n", argv[0], i);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double flops = r[0].flops, lat = 0, t = 0, call = 0, stream = r[0].stream;
	for (int i = 0; i < n; i++) {
		if (r[i].rc) {
			fprintf(stderr, "%s: rank %d: %s\n", argv[0], i, be->strerror(r[i].rc));
			return 1;
		}
		flops = r[i].flops < flops ? r[i].flops : flops;
		call = r[i].call > call ? r[i].call : call;
		stream = r[i].stream < stream ? r[i].stream : stream;
		lat = r[i].latency > lat ? r[i].latency : lat;
		t = r[i].seconds > t ? r[i].seconds : t;
	}
	be->finalize(world);
	double bytes = (double)BW_FLOATS * sizeof(float);
	double moved = n > 1 ? 2.0 * (n - 1) / n * bytes : bytes / 2;
	double bw = moved / (t - (n > 1 ? lat : 0) > 1e-9 ? t - (n > 1 ? lat : 0) : 1e-9);
	double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / n;
	char host[64] = "this-machine", name[64];
	gethostname(host, sizeof host - 1);
	int k = 0;
	for (const char *p = host; *p && k < 40; p++) /* a name JSON and make take as is */
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '.' || *p == '_')
			name[k++] = *p;
	name[k] = 0;
	FILE *f = path ? fopen(path, "w") : stdout;
	if (!f) {
		fprintf(stderr, "%s: cannot write '%s': %s\n", argv[0], path, strerror(errno));
		return 1;
	}
	fprintf(f, "{\"comment\": \"taprt-calibrate: %d %s ranks; f32 MatMul %dx%d per rank, "
	    "all-reduce of 4 bytes and 16 MiB\",\n", n, be->name, GEMM_N, GEMM_N);
	fprintf(f, " \"latency\": %.4g, \"op_latency\": %.4g,\n \"nodes\": [\n  {\"name\": \"%s\", "
	    "\"count\": 1, \"devices\": %d, \"flops\": %.4g, \"memory\": %.4g,\n   \"intra_bw\": "
	    "%.4g, \"inter_bw\": %.4g, \"mem_bw\": %.4g}]}\n", lat, call > 0 ? call : 0,
	    *name ? name : "calibrated", n, flops, mem, bw, bw, stream);
	if ((path && fclose(f) != 0) || (!path && fflush(f) != 0)) {
		fprintf(stderr, "%s: cannot write '%s': %s\n", argv[0], path ? path : "stdout",
		    strerror(errno));
		return 1;
	}
	free(all);
	free(r);
	free(th);
	return 0;
}
