/*
 * main.c - taprt_main: the command line of every generated program.
 *
 *   prog --check DIR          run on DIR/input_N.pb, compare with DIR/output_N.pb
 *   prog --inputs DIR --outputs DIR   run, write output_N.pb
 *   prog --bench N [--inputs DIR]     N timed iterations after warm-up
 *   --backend=threads|mpi|nccl  --rtol R  --atol A  --threads N  --model FILE
 *
 * It maps the model's files, starts one thread per rank (threads backend),
 * lets each rank bind and load its weights, runs, and compares or writes
 * the outputs.  Exit status: 0 success, 1 a
 * failed check or a run-time error, 2 bad usage.  Never one full copy of
 * the model per rank: see weights.c.
 *
 * Ranks (taprt.h): r = (dp_rank * pp + stage) * tp + tp_rank.  The ranks of
 * one TP group run the same stage program and differ only in cx->tp_rank
 * (which weight slices they load), so only tp_rank 0 writes into the
 * program's output buffers and the others into private ones.  Replicas and
 * stages write disjoint rows of the shared buffers: with the threads
 * backend that is the gather of the outputs.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
	const char *check, *inputs, *outputs, *backend, *model;
	long bench, warmup;
	double rtol, atol;
	int threads;
} Options;

typedef struct {
	const taprt_program *p;
	const taprt_backend *be;
	taprt_comm *world;
	int rank;
	int tp, pp;                     /* the TP and pipeline degrees, >= 1 */
	const int *ids;                 /* 0..nranks-1: TP groups point into it */
	void **in, **out;               /* out: this rank's output buffers */
	long iters, warmup;
	int threads;                    /* intra-op threads of this rank */
	double ms;
	char error[300];
} RankArg;

static void
usage(FILE *f, const char *argv0)
{
	fprintf(f,
	    "usage: %s [--check DIR | --inputs DIR [--outputs DIR]] [--bench N] [options]\n"
	    "  --check DIR      run on DIR/input_N.pb and compare with DIR/output_N.pb\n"
	    "  --inputs DIR     read the inputs from DIR/input_N.pb\n"
	    "  --outputs DIR    write the outputs to DIR/output_N.pb\n"
	    "  --bench N        time N iterations (after --warmup W, default 3)\n"
	    "  --rtol R --atol A  --check tolerances (default 1e-4, 1e-5)\n"
	    "  --backend=B      threads (default), mpi or nccl\n"
	    "  --threads N      BLAS threads per rank (default 1)\n"
	    "  --model FILE     the model file, if it moved since compiling\n",
	    argv0);
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *
aligned(int64_t bytes)
{
	size_t n = ((size_t)bytes + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, n ? n : 64);
	if (p)
		memset(p, 0, n ? n : 64);
	return p;
}

static void *
rank_main(void *arg)
{
	RankArg *a = arg;
	const taprt_rank_program *rp = a->p->ranks[a->rank];
	int base = a->rank - a->rank % a->tp;
	taprt_ctx cx = {.rank = a->rank, .nranks = a->p->nranks, .be = a->be,
		.tp_rank = a->rank % a->tp, .tp_group = {a->tp, a->ids + base},
		.stage = a->rank / a->tp % a->pp, .dp_rank = a->rank / (a->tp * a->pp)};
	cx.comm = a->world ? taprt_threads_rank(a->world, a->rank) : NULL;
	cx.intra_threads = a->threads;
#ifdef _OPENMP
	omp_set_num_threads(a->threads); /* this rank thread's team */
#endif
	cx.arena = aligned(rp->arena_bytes);
	cx.weights = aligned(rp->weight_bytes);
	cx.inputs = a->in;
	cx.outputs = a->out;
	int rc = -1;
	if (!cx.arena || !cx.weights) {
		taprt_fail(&cx, "out of memory (%lld bytes of activations, %lld of weights)",
		    (long long)rp->arena_bytes, (long long)rp->weight_bytes);
		goto done;
	}
	if ((rc = rp->init(&cx)) != 0)
		goto done;
	/* A pipeline's iterations end together, as a training step's would:
	 * otherwise the first stage runs ahead and its buffered sends pile up. */
	taprt_group all = {a->p->nranks, a->ids};
	bool flush = a->pp > 1 && a->world;
	for (long i = 0; i < a->warmup + a->iters && rc == 0; i++) {
		if (i == a->warmup)
			a->ms = now_ms();
		rc = rp->run(&cx);
		if (rc == 0 && flush && cx.be->barrier(cx.comm, &all) != 0)
			rc = taprt_fail(&cx, "barrier after iteration %ld failed", i);
	}
	a->ms = now_ms() - a->ms;
done:
	if (rc != 0) {
		snprintf(a->error, sizeof a->error, "rank %d: %s", a->rank,
		    cx.error[0] ? cx.error : "failed");
		if (a->world) /* the others may wait on us: wake them with an error */
			taprt_threads_abort(a->world);
	}
	free(cx.arena);
	free(cx.weights);
	return NULL;
}

static bool
same_shape(const taprt_pb *t, const taprt_io *io)
{
	if (t->dtype != io->dtype || t->rank != io->rank)
		return false;
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i] != io->dims[i])
			return false;
	return true;
}

static void
shape_str(char *buf, size_t n, int dtype, int rank, const int64_t *dims)
{
	int k = snprintf(buf, n, "%s[", taprt_dtype_name(dtype));
	for (int i = 0; i < rank && k < (int)n; i++)
		k += snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)dims[i]);
	if (k < (int)n)
		snprintf(buf + k, n - k, "]");
}

static int64_t
io_numel(const taprt_io *io)
{
	int64_t n = 1;
	for (int i = 0; i < io->rank; i++)
		n *= io->dims[i];
	return n;
}

/* Output buffers o[0..noutputs) of the program's shapes; false if out of memory. */
static bool
alloc_outputs(const taprt_program *p, void **o)
{
	for (int i = 0; i < p->noutputs; i++)
		if (!(o[i] = aligned(io_numel(&p->outputs[i]) * taprt_dtype_size(p->outputs[i].dtype))))
			return false;
	return true;
}

static double
elem(int dtype, const void *p, int64_t i)
{
	switch (dtype) {
	case TAPRT_F32: return ((const float *)p)[i];
	case TAPRT_F64: return ((const double *)p)[i];
	case TAPRT_I64: return (double)((const int64_t *)p)[i];
	case TAPRT_U64: return (double)((const uint64_t *)p)[i];
	case TAPRT_I32: return ((const int32_t *)p)[i];
	case TAPRT_U32: return ((const uint32_t *)p)[i];
	case TAPRT_I16: return ((const int16_t *)p)[i];
	case TAPRT_U16: return ((const uint16_t *)p)[i];
	case TAPRT_I8: return ((const int8_t *)p)[i];
	case TAPRT_U8: case TAPRT_BOOL: return ((const uint8_t *)p)[i];
	default: return NAN;
	}
}

/* numpy.allclose per element: |got - want| <= atol + rtol * |want|; NaN matches NaN. */
static bool
compare(const char *name, int k, const taprt_io *io, const void *got, const taprt_pb *want,
    const Options *o)
{
	int64_t n = io_numel(io);
	double maxabs = 0, maxrel = 0;
	int64_t bad = 0;
	for (int64_t i = 0; i < n; i++) {
		double g = elem(io->dtype, got, i), w = elem(io->dtype, want->data, i);
		if (isnan(g) && isnan(w))
			continue;
		if (isinf(w) && g == w)
			continue;
		double d = fabs(g - w);
		if (isnan(d))
			d = INFINITY;
		double r = w != 0 ? d / fabs(w) : (d != 0 ? INFINITY : 0);
		maxabs = d > maxabs ? d : maxabs;
		maxrel = r > maxrel ? r : maxrel;
		if (!(d <= o->atol + o->rtol * fabs(w)))
			bad++;
	}
	char sh[160];
	shape_str(sh, sizeof sh, io->dtype, io->rank, io->dims);
	printf("output %d '%s' %s: max abs err %.3g, max rel err %.3g: %s", k, name, sh, maxabs,
	    maxrel, bad ? "FAIL" : "ok");
	if (bad)
		printf(" (%lld of %lld elements past atol %g + rtol %g)", (long long)bad, (long long)n,
		    o->atol, o->rtol);
	printf("\n");
	return bad == 0;
}

static int
parse_options(int argc, char **argv, Options *o)
{
	*o = (Options){.rtol = 1e-4, .atol = 1e-5, .warmup = 3, .threads = 1, .backend = "threads"};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		char key[64];
		size_t kl = eq ? (size_t)(eq - a) : strlen(a);
		if (kl >= sizeof key) {
			fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
			return 2;
		}
		memcpy(key, a, kl);
		key[kl] = 0;
		if (!strcmp(key, "--help") || !strcmp(key, "-h")) {
			usage(stdout, argv[0]);
			return 1;
		}
		const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
		bool takes = strcmp(key, "--check") == 0 || strcmp(key, "--inputs") == 0 ||
		    strcmp(key, "--outputs") == 0 || strcmp(key, "--bench") == 0 ||
		    strcmp(key, "--warmup") == 0 || strcmp(key, "--rtol") == 0 ||
		    strcmp(key, "--atol") == 0 || strcmp(key, "--backend") == 0 ||
		    strcmp(key, "--threads") == 0 || strcmp(key, "--model") == 0;
		if (!takes) {
			fprintf(stderr, "%s: unknown option '%s' (--help lists them)\n", argv[0], a);
			return 2;
		}
		if (!v) {
			fprintf(stderr, "%s: %s needs a value\n", argv[0], key);
			return 2;
		}
		if (!eq)
			i++;
		char *end;
		errno = 0;
		if (!strcmp(key, "--check")) o->check = v;
		else if (!strcmp(key, "--inputs")) o->inputs = v;
		else if (!strcmp(key, "--outputs")) o->outputs = v;
		else if (!strcmp(key, "--backend")) o->backend = v;
		else if (!strcmp(key, "--model")) o->model = v;
		else if (!strcmp(key, "--rtol") || !strcmp(key, "--atol")) {
			double d = strtod(v, &end);
			if (*end || errno || !(d >= 0)) {
				fprintf(stderr, "%s: %s=%s: expected a non-negative number\n", argv[0], key, v);
				return 2;
			}
			*(key[2] == 'r' ? &o->rtol : &o->atol) = d;
		} else {
			long n = strtol(v, &end, 10);
			if (*end || errno || n < 0 || n > INT_MAX) {
				fprintf(stderr, "%s: %s=%s: expected a count\n", argv[0], key, v);
				return 2;
			}
			if (!strcmp(key, "--bench")) o->bench = n;
			else if (!strcmp(key, "--warmup")) o->warmup = n;
			else o->threads = (int)n;
		}
	}
	if (o->check && (o->inputs || o->outputs)) {
		fprintf(stderr, "%s: --check takes its inputs from DIR; do not add --inputs/--outputs\n", argv[0]);
		return 2;
	}
	if (!o->check && !o->inputs && !o->bench) {
		usage(stderr, argv[0]);
		return 2;
	}
	return 0;
}

/* The directory the model files are in: --model's, else model_dir beside the executable. */
static char *
model_dir(const taprt_program *p, const Options *o, const char **files0)
{
	char buf[PATH_MAX];
	if (o->model) {
		const char *slash = strrchr(o->model, '/');
		*files0 = slash ? slash + 1 : o->model;
		return slash ? strndup(o->model, (size_t)(slash - o->model + 1)) : strdup(".");
	}
	*files0 = p->nfiles ? p->files[0] : NULL;
	if (p->model_dir[0] == '/')
		return strdup(p->model_dir);
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return strdup(p->model_dir);
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	*slash = 0;
	size_t len = strlen(buf) + strlen(p->model_dir) + 2;
	char *d = malloc(len);
	snprintf(d, len, "%s/%s", buf, p->model_dir);
	return d;
}

int
taprt_main(int argc, char **argv, const taprt_program *p)
{
	Options o;
	int rc = parse_options(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : rc;
	const taprt_backend *be = &taprt_threads_backend;
	int tp = p->tp > 1 ? p->tp : 1, pp = p->pp > 1 ? p->pp : 1, dp = p->dp > 1 ? p->dp : 1;
	if (p->tp < 0 || p->pp < 0 || p->dp < 0 || p->microbatches < 0 || p->nranks < 1 ||
	    (int64_t)tp * pp * dp != p->nranks) {
		fprintf(stderr, "%s: bad program table: %d ranks, degrees dp %d, tp %d, pp %d "
		    "(the ranks must be dp x tp x pp)\n", argv[0], p->nranks, p->dp, p->tp, p->pp);
		return 1;
	}
	if (strcmp(o.backend, "threads") != 0) {
		fprintf(stderr, "%s: backend '%s' is not built into this runtime (threads only so far)\n",
		    argv[0], o.backend);
		return 2;
	}
	char err[600];
	const char *f0;
	char *dir = model_dir(p, &o, &f0);
	const char **files = malloc(sizeof *files * (p->nfiles + 1));
	if (p->nfiles) {
		memcpy(files, p->files, sizeof *files * p->nfiles);
		files[0] = f0;
	}
	taprt_program fp = *p;
	fp.files = files;
	rc = 1;
	void **in = calloc(p->ninputs + 1, sizeof *in), **out = calloc(p->noutputs + 1, sizeof *out);
	taprt_pb *want = calloc(p->noutputs + 1, sizeof *want);
	taprt_comm *world = NULL;
	RankArg *args = calloc(p->nranks, sizeof *args);
	pthread_t *th = calloc(p->nranks, sizeof *th);
	int *ids = calloc(p->nranks, sizeof *ids);
	/* private output buffers of the ranks whose TP coordinate is not 0 */
	void ***priv = calloc(p->nranks, sizeof *priv);
	if (!in || !out || !want || !args || !th || !ids || !priv) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		goto out;
	}
	for (int r = 0; r < p->nranks; r++)
		ids[r] = r;
	if (taprt_map_files(&fp, dir, err, sizeof err) != 0) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		goto out;
	}
	const char *indir = o.check ? o.check : o.inputs;
	for (int i = 0; i < p->ninputs; i++) {
		const taprt_io *io = &p->inputs[i];
		int64_t bytes = io_numel(io) * taprt_dtype_size(io->dtype);
		if (!indir) { /* --bench alone: zeros (valid indices, finite values) */
			in[i] = aligned(bytes);
			continue;
		}
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/input_%d.pb", indir, i);
		taprt_pb t;
		if (taprt_pb_read(path, taprt_pb_max_bytes(io_numel(io)), &t, err, sizeof err) != 0) {
			fprintf(stderr, "%s: %s\n", argv[0], err);
			goto out;
		}
		if (!same_shape(&t, io)) {
			char got[160], exp[160];
			shape_str(got, sizeof got, t.dtype, t.rank, t.dims);
			shape_str(exp, sizeof exp, io->dtype, io->rank, io->dims);
			fprintf(stderr, "%s: %s: input '%s' is %s, but the program was compiled for %s%s\n",
			    argv[0], path, io->name, got, exp,
			    t.dtype == io->dtype && t.rank == io->rank ? " (tapc -batch=N recompiles)" : "");
			free(t.data);
			goto out;
		}
		in[i] = aligned(bytes);
		memcpy(in[i], t.data, (size_t)bytes);
		free(t.data);
	}
	bool ok = alloc_outputs(p, out);
	for (int r = 0; ok && r < p->nranks; r++)
		if (r % tp != 0)
			ok = (priv[r] = calloc(p->noutputs + 1, sizeof **priv)) && alloc_outputs(p, priv[r]);
	if (!ok) {
		fprintf(stderr, "%s: out of memory for the outputs\n", argv[0]);
		goto out;
	}
	if (o.check)
		for (int i = 0; i < p->noutputs; i++) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/output_%d.pb", o.check, i);
			if (taprt_pb_read(path, taprt_pb_max_bytes(io_numel(&p->outputs[i])), &want[i], err,
			    sizeof err) != 0) {
				fprintf(stderr, "%s: %s\n", argv[0], err);
				goto out;
			}
			if (!same_shape(&want[i], &p->outputs[i])) {
				char got[160], exp[160];
				shape_str(got, sizeof got, want[i].dtype, want[i].rank, want[i].dims);
				shape_str(exp, sizeof exp, p->outputs[i].dtype, p->outputs[i].rank,
				    p->outputs[i].dims);
				fprintf(stderr, "%s: %s: reference '%s' is %s, the program computes %s\n",
				    argv[0], path, p->outputs[i].name, got, exp);
				goto out;
			}
		}

	taprt_gemm_threads(o.threads);
	taprt_conv_threads(o.threads);
	if (p->nranks > 1)
		world = taprt_threads_world(p->nranks);
	for (int r = 0; r < p->nranks; r++) {
		args[r] = (RankArg){.p = &fp, .be = be, .world = world, .rank = r, .tp = tp,
			.pp = pp, .ids = ids, .in = in, .out = r % tp == 0 ? out : priv[r],
			.iters = o.bench ? o.bench : 1, .warmup = o.bench ? o.warmup : 0,
			.threads = o.threads > 0 ? o.threads : 1};
		if (p->nranks == 1)
			rank_main(&args[r]);
		else if (pthread_create(&th[r], NULL, rank_main, &args[r]) != 0) {
			fprintf(stderr, "%s: cannot start rank %d\n", argv[0], r);
			for (int k = 0; k < r; k++)
				pthread_join(th[k], NULL);
			goto out;
		}
	}
	if (p->nranks > 1)
		for (int r = 0; r < p->nranks; r++)
			pthread_join(th[r], NULL);
	bool failed = false;
	for (int r = 0; r < p->nranks; r++)
		if (args[r].error[0]) {
			fprintf(stderr, "%s: %s\n", argv[0], args[r].error);
			failed = true;
		}
	if (failed)
		goto out;
	if (o.bench) {
		double ms = 0; /* the slowest rank's: the pipeline drains last */
		for (int r = 0; r < p->nranks; r++)
			ms = args[r].ms > ms ? args[r].ms : ms;
		ms /= o.bench;
		int64_t batch = p->ninputs && p->inputs[0].rank ? p->inputs[0].dims[0] : 1;
		printf("%s: %ld iterations, %.4f ms/iteration, %.1f samples/s (batch %lld, %d rank%s, "
		    "%d thread%s, %s)\n", p->name, o.bench, ms, ms > 0 ? batch * 1e3 / ms : 0.0,
		    (long long)batch, p->nranks, p->nranks == 1 ? "" : "s", o.threads,
		    o.threads == 1 ? "" : "s", taprt_gemm_name());
	}
	rc = 0;
	if (o.check)
		for (int i = 0; i < p->noutputs; i++)
			if (!compare(p->outputs[i].name, i, &p->outputs[i], out[i], &want[i], &o))
				rc = 1;
	if (o.outputs)
		for (int i = 0; i < p->noutputs; i++) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/output_%d.pb", o.outputs, i);
			const taprt_io *io = &p->outputs[i];
			if (taprt_pb_write(path, io->name, io->dtype, io->rank, io->dims, out[i]) != 0) {
				fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], path, strerror(errno));
				rc = 1;
			}
		}
out:
	if (world)
		taprt_threads_free(world);
	taprt_unmap_files();
	for (int i = 0; in && i < p->ninputs; i++)
		free(in[i]);
	for (int i = 0; i < p->noutputs; i++) {
		if (out)
			free(out[i]);
		if (want)
			free(want[i].data);
	}
	for (int r = 0; priv && r < p->nranks; r++) {
		for (int i = 0; priv[r] && i < p->noutputs; i++)
			free(priv[r][i]);
		free(priv[r]);
	}
	free(priv);
	free(ids);
	free(in);
	free(out);
	free(want);
	free(args);
	free(th);
	free(files);
	free(dir);
	return rc;
}
