/*
 * main.c - taprt_main: the command line of every generated program.
 *
 *   prog --check DIR [--outputs DIR]  run on DIR/input_N.pb, compare with DIR/output_N.pb
 *   prog --inputs DIR --outputs DIR   run, write output_N.pb
 *   prog --bench N [--inputs DIR]     N timed iterations after warm-up
 *   --backend=threads|mpi|nccl  --rtol R  --atol A  --threads N  --model FILE
 *
 * Needs a backend from the table (backend.c) and the rank layout
 * (layout.c).  The backend's init says which ranks this process runs:
 * all of them (threads: one thread per rank, sharing whole-batch input and
 * output buffers, so replicas and stages writing their own rows is the
 * gather) or one (mpi: the process holds its replica's rows of the inputs
 * its stage reads and of the outputs it computes; afterwards the ranks
 * with tp_rank 0 that computed outputs send their rows to rank 0).  Only
 * rank 0's process prints results, compares them and writes output files.
 * Every process maps the model's files and copies in only its own ranks'
 * weights, or their slices (weights.c).  Exit status: 0 success, 1 a
 * failed check or a run-time error, 2 bad usage.
 *
 * Failures.  A failed rank is reported as "PROG: rank R: why".  With
 * threads the failing rank wakes the others (their calls fail, they stop)
 * and every rank's error is printed after they are joined.  With one rank
 * per process the line is printed at once and the backend's abort ends the
 * whole job, since other processes may be blocked waiting for this one.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/internal.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* The least work a kernel's OpenMP loop is split for (internal.h); the
 * environment's TAPRT_PAR_MIN replaces it in taprt_main. */
int64_t taprt_par_min = TAPRT_PAR_MIN;

/* --threads' bound: libgomp crashes creating a team of 100,000 */
#define TAPRT_MAX_THREADS 1024

typedef struct {
	const char *check, *inputs, *outputs, *backend, *model;
	long bench, warmup;
	double rtol, atol;
	int threads;
	long train, bench_train;        /* --train N, --bench-train N: steps */
	const char *data, *save;        /* --data DIR, --save DIR */
	bool memory_report;             /* --memory-report */
} Options;

/* This process's part of one run of the program. */
typedef struct {
	const char *argv0;
	const taprt_program *p;         /* with the model file as found */
	taprt_layout l;
	const taprt_backend *be;
	taprt_comm *world;
	int first, count;               /* this process runs ranks [first, first + count) */
	bool spread;                    /* one rank per process of several: rows only */
	int *all;                       /* 0 .. nranks-1, the group of every rank */
	void **keep;                    /* buffers to free at the end */
	int nkeep, capkeep;
	const Options *o;
	char *exe_dir;                  /* the executable's directory (--save's template) */
} Run;

typedef struct {
	Run *run;
	int rank;
	int *tp_ranks;                  /* its TP group's global ranks */
	int *dp_ranks;                  /* its DP group's */
	void **in, **out;               /* its replica's rows; NULL: not its stage's */
	long iters, warmup;
	int threads;                    /* intra-op threads of this rank */
	double ms;
	int64_t peak;                   /* --memory-report: the arena's high-water mark */
	bool reported;                  /* the failure is printed already */
	char error[300];
} RankArg;

static void
usage(FILE *f, const char *argv0)
{
	fprintf(f,
	    "usage: %s [--check DIR | --inputs DIR] [--outputs DIR] [--bench N] [options]\n"
	    "  --check DIR      run on DIR/input_N.pb and compare with DIR/output_N.pb\n"
	    "  --inputs DIR     read the inputs from DIR/input_N.pb\n"
	    "  --outputs DIR    write the outputs to DIR/output_N.pb\n"
	    "  --bench N        time N iterations (after --warmup W, default 3)\n"
	    "  --rtol R --atol A  --check tolerances (default 1e-4, 1e-5)\n"
	    "  --backend=B      threads (default: one process, a thread per rank),\n"
	    "                   mpi (a process per rank: mpirun -np RANKS or srun) or nccl;\n"
	    "                   built into this runtime: %s\n"
	    "  --threads N      each rank's team of threads for its kernels, GEMMs and\n"
	    "                   oneDNN (OpenMP; 1 to %d, default 1)\n"
	    "  --model FILE     the model file, if it moved since compiling\n"
	    "training programs (tapc -train):\n"
	    "  --train N        run N training steps on --data DIR's batch, print each loss\n"
	    "  --data DIR       DIR/input_N.pb and DIR/labels.pb: the batch\n"
	    "  --save DIR       after training, write DIR/model.onnx with the trained weights\n"
	    "  --bench-train N  time N training steps (after --warmup W)\n"
	    "  --memory-report  after the run, print each rank's peak of activations, measured:\n"
	    "                   the highest arena byte the run wrote (the arena is filled with\n"
	    "                   a pattern first), beside the memory plan's size\n",
	    argv0, taprt_backends_built(), TAPRT_MAX_THREADS);
}

static double
now_ms(void)
{
	return taprt_now_ns() / 1e6;
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

/* A zeroed buffer freed when the run ends; NULL if out of memory. */
static void *
buffer(Run *m, int64_t bytes)
{
	if (m->nkeep == m->capkeep) {
		int cap = m->capkeep ? 2 * m->capkeep : 16;
		void **k = realloc(m->keep, cap * sizeof *k);
		if (!k)
			return NULL;
		m->keep = k;
		m->capkeep = cap;
	}
	void *p = aligned(bytes);
	if (p)
		m->keep[m->nkeep++] = p;
	return p;
}

/* A rank of this process failed (a->error says why): stop the others. */
static void
rank_failed(RankArg *a)
{
	Run *m = a->run;
	if (m->count == 1 && m->l.nranks > 1) {
		/* the abort below may end this process: say why first */
		fprintf(stderr, "%s: %s\n", m->argv0, a->error);
		fflush(stderr);
		a->reported = true;
	}
	if (m->l.nranks > 1)
		m->be->abort(m->world);
}

/* A failure while this process sets up: say so, naming the rank when each
 * process runs one, and end the job when others may wait for this one.
 * Returns 1, the exit status. */
static int
setup_failed(Run *m, const char *fmt, ...)
{
	char msg[1000];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!m->spread) {
		fprintf(stderr, "%s: %s\n", m->argv0, msg);
		return 1;
	}
	fprintf(stderr, "%s: rank %d: %s\n", m->argv0, m->first, msg);
	fflush(stderr);
	m->be->abort(m->world);
	return 1;
}

/* After training step k: the loss of the step, the mean over the
 * replicas of each replica's mean (the ranks holding a loss each add
 * loss / count to an all-reduce over every rank); rank 0 prints it. */
static int
report_loss(Run *m, taprt_ctx *cx, const taprt_rank_program *rp, taprt_group *all, long k)
{
	double v[2] = {0, 0}; /* sum of losses, ranks that hold one */
	if (rp->loss) {
		v[0] = rp->loss->dtype == TAPRT_F64 ? *(const double *)rp->loss->data :
		    *(const float *)rp->loss->data;
		v[1] = 1;
	}
	int brc;
	if (m->l.nranks > 1 && (brc = cx->be->allreduce(cx->comm, all, v, 2, TAPRT_F64,
	    TAPRT_SUM)) != 0)
		return taprt_fail(cx, "the loss of step %ld: allreduce failed: %s", k,
		    cx->be->strerror(brc));
	if (cx->rank == 0)
		printf("step %ld loss %.6g\n", k, v[1] > 0 ? v[0] / v[1] : 0.0);
	return 0;
}

#define MEMORY_PATTERN 0xA5

static void *
rank_main(void *arg)
{
	RankArg *a = arg;
	Run *m = a->run;
	const taprt_rank_program *rp = m->p->ranks[a->rank];
	taprt_coords c = taprt_coords_of(&m->l, a->rank);
	taprt_ctx cx = {.rank = a->rank, .nranks = m->l.nranks, .be = m->be,
		.comm = m->be->rank(m->world, a->rank), .tp_rank = c.tp_rank,
		.tp_group = {m->l.tp, a->tp_ranks}, .stage = c.stage, .dp_rank = c.dp_rank,
		.dp_group = {m->l.dp, a->dp_ranks}};
	cx.intra_threads = m->o->threads > 0 ? m->o->threads : 1;
#ifdef _OPENMP
	omp_set_num_threads(cx.intra_threads); /* this rank thread's team */
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
	if (m->o->memory_report) /* a pattern the run overwrites: its high-water mark */
		memset(cx.arena, MEMORY_PATTERN, rp->arena_bytes);
	if ((rc = rp->init(&cx)) != 0)
		goto done;
	/* A pipeline's iterations end together, as a training step's would:
	 * otherwise the first stage runs ahead and its buffered sends pile up. */
	taprt_group all = {m->l.nranks, m->all};
	bool flush = m->l.pp > 1;
	bool train = m->o->train > 0 || m->o->bench_train > 0;
	for (long i = 0; i < a->warmup + a->iters && rc == 0; i++) {
		if (i == a->warmup)
			a->ms = now_ms();
		cx.step = train ? i + 1 : 0;
		cx.runs = i;
		rc = rp->run(&cx);
		if (cx.pending && taprt_comm_wait(&cx) != 0) /* none left once the step ends */
			rc = -1;
		int brc;
		if (rc == 0 && flush && (brc = cx.be->barrier(cx.comm, &all)) != 0)
			rc = taprt_fail(&cx, "barrier after iteration %ld failed: %s", i,
			    cx.be->strerror(brc));
		if (rc == 0 && m->o->train > 0)
			rc = report_loss(m, &cx, rp, &all, i + 1);
	}
	a->ms = now_ms() - a->ms;
	if (m->o->memory_report) {
		const unsigned char *b = cx.arena;
		int64_t top = rp->arena_bytes;
		while (top > 0 && b[top - 1] == MEMORY_PATTERN)
			top--;
		a->peak = (top + 63) & ~(int64_t)63; /* blocks are 64-byte aligned */
	}
	if (rc == 0 && m->o->save)
		rc = taprt_save(&cx, m->p, rp, m->exe_dir, m->o->save);
done:
	if (rc != 0) {
		snprintf(a->error, sizeof a->error, "rank %d: %s", a->rank,
		    cx.error[0] ? cx.error : "failed");
		rank_failed(a);
	}
	taprt_packs_free(&cx);
	free(cx.arena);
	free(cx.weights);
	return NULL;
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

static int64_t
io_bytes(const taprt_io *io)
{
	return io_numel(io) * taprt_dtype_size(io->dtype);
}

/* The part of input i a replica reads: its rows, or all of a scalar (a
 * flag every replica reads whole). */
static int64_t
replica_numel(const Run *m, const taprt_io *io)
{
	return io->rank ? io_numel(io) / m->l.dp : io_numel(io);
}

/* Does rank program rp read input i, may it write output i? (NULL: all) */
static bool
reads(const taprt_rank_program *rp, int i)
{
	return !rp->reads || rp->reads[i];
}

static bool
writes(const taprt_rank_program *rp, int i)
{
	return !rp->writes || rp->writes[i];
}

/* The stage that computes output i (without flags: the last one). */
static int
owner_stage(const Run *m, int i)
{
	for (int s = 0; s < m->l.pp; s++) {
		const taprt_rank_program *rp = m->p->ranks[taprt_rank_at(&m->l, 0, s, 0)];
		if (rp->writes && rp->writes[i])
			return s;
	}
	return m->l.pp - 1;
}

/*
 * Elements [first, first + n) of input i (a replica's rows, or all of
 * them) from DIR/input_i.pb into dst, which holds n: 0, or -1 with err.
 */
static int
read_input(const taprt_program *p, const char *dir, int i, int64_t first, int64_t n, void *dst,
    char *err, size_t errlen)
{
	const taprt_io *io = &p->inputs[i];
	char path[PATH_MAX];
	if (p->train && strcmp(io->name, "labels") == 0) /* the training batch's labels */
		snprintf(path, sizeof path, "%s/labels.pb", dir);
	else
		snprintf(path, sizeof path, "%s/input_%d.pb", dir, i);
	taprt_pb shape = {.dtype = io->dtype, .rank = io->rank}, got;
	memcpy(shape.dims, io->dims, sizeof shape.dims);
	int rc = taprt_pb_read_part(path, taprt_pb_max_bytes(io_numel(io)), &shape, first, n, dst,
	    &got, err, errlen);
	if (rc == 1) {
		char g[160], e[160];
		shape_str(g, sizeof g, got.dtype, got.rank, got.dims);
		shape_str(e, sizeof e, io->dtype, io->rank, io->dims);
		snprintf(err, errlen, "%.400s: input '%.100s' is %.100s, but the program was compiled for %.100s%s",
		    path, io->name, g, e,
		    got.dtype == io->dtype && got.rank == io->rank ? " (tapc -batch=N recompiles)" : "");
	}
	return rc ? -1 : 0;
}

/*
 * Every rank in this process (threads): whole-batch buffers shared by all
 * ranks, each rank pointing at its replica's rows; the ranks with tp_rank
 * other than 0 get private outputs.  whole_out gets the outputs.
 */
static int
setup_shared(Run *m, RankArg *args, const char *indir, void **whole_out)
{
	const taprt_program *p = m->p;
	char err[800];
	for (int i = 0; i < p->ninputs; i++) {
		const taprt_io *io = &p->inputs[i];
		void *buf = buffer(m, io_bytes(io));
		if (!buf)
			return setup_failed(m, "out of memory for input %d (%lld bytes)", i,
			    (long long)io_bytes(io));
		/* --bench alone: zeros (valid indices, finite values) */
		if (indir && read_input(p, indir, i, 0, io_numel(io), buf, err, sizeof err) != 0)
			return setup_failed(m, "%s", err);
		for (int r = 0; r < m->count; r++) {
			int d = taprt_coords_of(&m->l, r).dp_rank;
			args[r].in[i] = (char *)buf + (io->rank ? d * (io_bytes(io) / m->l.dp) : 0);
		}
	}
	for (int i = 0; i < p->noutputs; i++) {
		const taprt_io *io = &p->outputs[i];
		int64_t rows = io_bytes(io) / m->l.dp;
		if (!(whole_out[i] = buffer(m, io_bytes(io))))
			return setup_failed(m, "out of memory for output %d (%lld bytes)", i,
			    (long long)io_bytes(io));
		for (int r = 0; r < m->count; r++) {
			taprt_coords c = taprt_coords_of(&m->l, r);
			if (c.tp_rank == 0)
				args[r].out[i] = (char *)whole_out[i] + c.dp_rank * rows;
			else if (writes(p->ranks[r], i) && !(args[r].out[i] = buffer(m, rows)))
				return setup_failed(m, "out of memory for rank %d's output %d", r, i);
		}
	}
	return 0;
}

/*
 * One rank in this process of several (mpi): its replica's rows of the
 * inputs its stage reads and of the outputs it computes; rank 0 holds the
 * whole outputs, its own rows first, and gathers the rest (whole_out).
 */
static int
setup_spread(Run *m, RankArg *a, const char *indir, void **whole_out)
{
	const taprt_program *p = m->p;
	const taprt_rank_program *rp = p->ranks[a->rank];
	int d = taprt_coords_of(&m->l, a->rank).dp_rank;
	char err[800];
	for (int i = 0; i < p->ninputs; i++) {
		const taprt_io *io = &p->inputs[i];
		int64_t n = replica_numel(m, io);
		if (!reads(rp, i))
			continue;
		if (!(a->in[i] = buffer(m, n * taprt_dtype_size(io->dtype))))
			return setup_failed(m, "out of memory for input %d's rows (%lld bytes)", i,
			    (long long)(n * taprt_dtype_size(io->dtype)));
		if (indir && read_input(p, indir, i, io->rank ? d * n : 0, n, a->in[i], err,
		    sizeof err) != 0)
			return setup_failed(m, "%s", err);
	}
	for (int i = 0; i < p->noutputs; i++) {
		const taprt_io *io = &p->outputs[i];
		int64_t bytes = a->rank == 0 ? io_bytes(io) : io_bytes(io) / m->l.dp;
		if (a->rank != 0 && !writes(rp, i))
			continue;
		if (!(a->out[i] = buffer(m, bytes)))
			return setup_failed(m, "out of memory for output %d (%lld bytes)", i,
			    (long long)bytes);
		if (a->rank == 0)
			whole_out[i] = a->out[i];
	}
	return 0;
}

/*
 * The outputs to rank 0: for each output and replica, the rank with
 * tp_rank 0 of the stage that computes it sends its rows, unless it is
 * rank 0 itself (its rows are in place).  Tags -1 - i: taprt_main's own.
 */
static int
gather_outputs(Run *m, RankArg *a, void **whole_out)
{
	const taprt_program *p = m->p;
	taprt_comm *c = m->be->rank(m->world, a->rank);
	for (int i = 0; i < p->noutputs; i++) {
		int s = owner_stage(m, i);
		int64_t rows = io_bytes(&p->outputs[i]) / m->l.dp;
		for (int d = 0; d < m->l.dp; d++) {
			int src = taprt_rank_at(&m->l, d, s, 0), rc = 0;
			if (src == 0)
				continue;
			if (a->rank == 0)
				rc = m->be->recv(c, (char *)whole_out[i] + d * rows, rows, src, -1 - i);
			else if (a->rank == src)
				rc = m->be->send(c, a->out[i], rows, 0, -1 - i);
			if (rc != 0) {
				snprintf(a->error, sizeof a->error, "rank %d: %s output %d '%s' (%lld bytes) %s rank %d failed: %s",
				    a->rank, a->rank == 0 ? "receiving" : "sending", i, p->outputs[i].name,
				    (long long)rows, a->rank == 0 ? "from" : "to", a->rank == 0 ? src : 0,
				    m->be->strerror(rc));
				rank_failed(a);
				return -1;
			}
		}
	}
	return 0;
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
	case TAPRT_F16: return taprt_half_to_float(((const uint16_t *)p)[i]);
	case TAPRT_BF16: return taprt_bf16_to_float(((const uint16_t *)p)[i]);
	default: return NAN;
	}
}

/* Element i of integer tensor p, as its bits in 64 (exact where a double is not). */
static uint64_t
elem_bits(int dtype, const void *p, int64_t i)
{
	switch (dtype) {
	case TAPRT_I64: case TAPRT_U64: return ((const uint64_t *)p)[i];
	case TAPRT_U32: return ((const uint32_t *)p)[i];
	case TAPRT_U16: return ((const uint16_t *)p)[i];
	case TAPRT_U8: case TAPRT_BOOL: return ((const uint8_t *)p)[i];
	default: return (uint64_t)(int64_t)elem(dtype, p, i); /* i8 to i32: exact */
	}
}

/* numpy.allclose per element: |got - want| <= atol + rtol * |want|; NaN matches NaN.
 * Integers and booleans must be equal. */
static bool
compare(const char *name, int k, const taprt_io *io, const void *got, const taprt_pb *want,
    const Options *o)
{
	int64_t n = io_numel(io);
	double maxabs = 0, maxrel = 0;
	int64_t bad = 0;
	bool exact = io->dtype != TAPRT_F32 && io->dtype != TAPRT_F64 && io->dtype != TAPRT_F16 &&
	    io->dtype != TAPRT_BF16;
	for (int64_t i = 0; i < n; i++) {
		double g = elem(io->dtype, got, i), w = elem(io->dtype, want->data, i);
		if (exact && elem_bits(io->dtype, got, i) != elem_bits(io->dtype, want->data, i)) {
			double d = g == w ? 1 : fabs(g - w); /* apart, though not as doubles */
			maxabs = d > maxabs ? d : maxabs;
			maxrel = INFINITY;
			bad++;
			continue;
		}
		if (exact)
			continue;
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
		if (!strcmp(key, "--memory-report") && !eq) {
			o->memory_report = true;
			continue;
		}
		const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
		bool takes = strcmp(key, "--check") == 0 || strcmp(key, "--inputs") == 0 ||
		    strcmp(key, "--outputs") == 0 || strcmp(key, "--bench") == 0 ||
		    strcmp(key, "--warmup") == 0 || strcmp(key, "--rtol") == 0 ||
		    strcmp(key, "--atol") == 0 || strcmp(key, "--backend") == 0 ||
		    strcmp(key, "--threads") == 0 || strcmp(key, "--model") == 0 ||
		    strcmp(key, "--train") == 0 || strcmp(key, "--data") == 0 ||
		    strcmp(key, "--save") == 0 || strcmp(key, "--bench-train") == 0;
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
		else if (!strcmp(key, "--data")) o->data = v;
		else if (!strcmp(key, "--save")) o->save = v;
		else if (!strcmp(key, "--rtol") || !strcmp(key, "--atol")) {
			double d = strtod(v, &end);
			if (*end || errno || !(d >= 0)) {
				fprintf(stderr, "%s: %s=%s: expected a non-negative number\n", argv[0], key, v);
				return 2;
			}
			*(key[2] == 'r' ? &o->rtol : &o->atol) = d;
		} else {
			/* --warmup may be 0; a run of 0 steps or a team of 0 threads is no run */
			bool warmup = !strcmp(key, "--warmup"), threads = !strcmp(key, "--threads");
			long n = strtol(v, &end, 10), lo = warmup ? 0 : 1;
			long hi = threads ? TAPRT_MAX_THREADS : INT_MAX;
			if (*end || errno || n < lo || n > hi) {
				fprintf(stderr, "%s: %s=%s: expected a count from %ld to %ld\n", argv[0],
				    key, v, lo, hi);
				return 2;
			}
			if (!strcmp(key, "--bench")) o->bench = n;
			else if (!strcmp(key, "--warmup")) o->warmup = n;
			else if (!strcmp(key, "--train")) o->train = n;
			else if (!strcmp(key, "--bench-train")) o->bench_train = n;
			else o->threads = (int)n;
		}
	}
	if (o->check && o->inputs) {
		fprintf(stderr, "%s: --check takes its inputs from DIR; do not add --inputs\n", argv[0]);
		return 2;
	}
	bool training = o->train || o->bench_train;
	if (training && (o->check || o->inputs || o->bench || o->outputs)) {
		fprintf(stderr, "%s: --train and --bench-train take --data DIR (and --save DIR); "
		    "not --check, --inputs, --outputs or --bench\n", argv[0]);
		return 2;
	}
	if (o->train && o->bench_train) {
		fprintf(stderr, "%s: give --train or --bench-train, not both\n", argv[0]);
		return 2;
	}
	if (o->train && !o->data) {
		fprintf(stderr, "%s: --train needs --data DIR (DIR/input_N.pb and DIR/labels.pb)\n",
		    argv[0]);
		return 2;
	}
	if ((o->data || o->save) && !training) {
		fprintf(stderr, "%s: --data and --save go with --train\n", argv[0]);
		return 2;
	}
	if (!o->check && !o->inputs && !o->bench && !training) {
		usage(stderr, argv[0]);
		return 2;
	}
	return 0;
}

/* The executable's directory (malloc'd). */
static char *
exe_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return strdup(".");
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = 0;
	return strdup(buf);
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
	Run m = {.argv0 = argv[0], .o = &o};
	const char *pm = getenv("TAPRT_PAR_MIN");
	if (pm && *pm) {
		char *end;
		errno = 0;
		long long v = strtoll(pm, &end, 10);
		if (errno || *end || v < 1) {
			fprintf(stderr, "%s: TAPRT_PAR_MIN=%s: expected a positive count of elements\n",
			    argv[0], pm);
			return 2;
		}
		taprt_par_min = v;
	}
	if ((o.train || o.bench_train) && !p->train) {
		fprintf(stderr, "%s: --train and --bench-train need a training program (tapc -train)\n",
		    argv[0]);
		return 2;
	}
	if (taprt_layout_of(p, &m.l) != 0) {
		fprintf(stderr, "%s: bad program table: %d ranks, degrees dp %d, tp %d, pp %d "
		    "(the ranks must be dp x tp x pp, and their devices a permutation of them)\n",
		    argv[0], p->nranks, p->dp, p->tp, p->pp);
		return 1;
	}
	m.l.threads = o.threads; /* how long a backend's waits may spin */
	/* every input and output splits into replicas and micro-batches along
	 * dim 0, but a scalar input (a flag), which every replica reads whole */
	int split = m.l.dp * m.l.microbatches;
	for (int i = 0; split > 1 && i < p->ninputs + p->noutputs; i++) {
		const taprt_io *io = i < p->ninputs ? &p->inputs[i] : &p->outputs[i - p->ninputs];
		if (i < p->ninputs && io->rank == 0)
			continue;
		if (io->rank < 1 || io->dims[0] % split != 0) {
			fprintf(stderr, "%s: bad program table: %s '%s' of rank %d does not split into %d "
			    "replicas x micro-batches along dim 0\n", argv[0],
			    i < p->ninputs ? "input" : "output", io->name, io->rank, split);
			return 1;
		}
	}
	char err[800];
	if (!(m.be = taprt_backend_find(o.backend, err, sizeof err))) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		return strncmp(err, "unknown", 7) == 0 ? 2 : 1;
	}
	err[0] = 0;
	if (m.be->init(&m.l, &m.world, &m.first, &m.count, err, sizeof err) != 0) {
		if (err[0])
			fprintf(stderr, "%s: %s\n", argv[0], err);
		fflush(stderr);
		m.be->finalize(m.world);
		return 1;
	}
	m.spread = m.count < m.l.nranks;
	bool root = m.first == 0;       /* this process reports the results */
	if (getenv("TAPRT_SHOW_PLACEMENT")) { /* which device runs which rank, here */
		char host[256] = "?";
		gethostname(host, sizeof host - 1);
		for (int r = m.first; r < m.first + m.count; r++)
			fprintf(stderr, "%s: rank %d on device %d (%s host %s)\n", argv[0], r,
			    p->devices ? p->devices[r] : r, m.be->name, host);
		fflush(stderr);
	}
	/* an MPI launcher started several copies, each running every rank:
	 * the likely mistake is a forgotten --backend=mpi */
	const char *wsize = getenv("OMPI_COMM_WORLD_SIZE"), *wrank = getenv("OMPI_COMM_WORLD_RANK");
	if (!wsize) {
		wsize = getenv("PMI_SIZE");
		wrank = getenv("PMI_RANK");
	}
	if (!m.spread && wsize && atoi(wsize) > 1 && (!wrank || atoi(wrank) == 0))
		fprintf(stderr, "%s: warning: %s processes were started together, and each runs all %d "
		    "ranks with the %s backend (add --backend=mpi for a process per rank)\n", argv[0],
		    wsize, m.l.nranks, m.be->name);

	const char *f0;
	char *dir = model_dir(p, &o, &f0);
	const char **files = malloc(sizeof *files * (p->nfiles + 1));
	taprt_program fp = *p;
	fp.files = files;
	m.p = &fp;
	rc = 1;
	void **whole_out = calloc(p->noutputs + 1, sizeof *whole_out);
	taprt_pb *want = calloc(p->noutputs + 1, sizeof *want);
	RankArg *args = calloc(m.count, sizeof *args);
	pthread_t *th = calloc(m.count, sizeof *th);
	m.all = calloc(m.l.nranks, sizeof *m.all);
	bool ok = dir && files && whole_out && want && args && th && m.all;
	for (int r = 0; ok && r < m.count; r++) {
		RankArg *a = &args[r];
		*a = (RankArg){.run = &m, .rank = m.first + r,
			.iters = o.train ? o.train : o.bench_train ? o.bench_train : o.bench ? o.bench : 1,
			.warmup = o.bench || o.bench_train ? o.warmup : 0};
		a->tp_ranks = calloc(m.l.tp, sizeof *a->tp_ranks);
		a->dp_ranks = calloc(m.l.dp, sizeof *a->dp_ranks);
		a->in = calloc(p->ninputs + 1, sizeof *a->in);
		a->out = calloc(p->noutputs + 1, sizeof *a->out);
		ok = a->tp_ranks && a->dp_ranks && a->in && a->out;
		if (ok) {
			taprt_group_of(&m.l, a->rank, TAPRT_GROUP_TP, a->tp_ranks);
			taprt_group_of(&m.l, a->rank, TAPRT_GROUP_DP, a->dp_ranks);
		}
	}
	if (!ok) {
		setup_failed(&m, "out of memory");
		goto out;
	}
	if (p->nfiles) {
		memcpy(files, p->files, sizeof *files * p->nfiles);
		files[0] = f0;
	}
	taprt_group_of(&m.l, 0, TAPRT_GROUP_WORLD, m.all);
	if (taprt_map_files(&fp, dir, err, sizeof err) != 0) {
		setup_failed(&m, "%s", err);
		goto out;
	}
	const char *indir = o.check ? o.check : o.inputs ? o.inputs : o.data;
	m.exe_dir = exe_dir();
	if ((m.spread ? setup_spread(&m, &args[0], indir, whole_out) :
	    setup_shared(&m, args, indir, whole_out)) != 0)
		goto out;
	for (int i = 0; root && o.check && i < p->noutputs; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/output_%d.pb", o.check, i);
		const taprt_io *io = &p->outputs[i];
		if (taprt_pb_read(path, taprt_pb_max_bytes(io_numel(io)), &want[i], err, sizeof err) != 0) {
			setup_failed(&m, "%s", err);
			goto out;
		}
		bool same = want[i].dtype == io->dtype && want[i].rank == io->rank;
		for (int k = 0; same && k < io->rank; k++)
			same = want[i].dims[k] == io->dims[k];
		if (!same) {
			char got[160], exp[160];
			shape_str(got, sizeof got, want[i].dtype, want[i].rank, want[i].dims);
			shape_str(exp, sizeof exp, io->dtype, io->rank, io->dims);
			setup_failed(&m, "%s: reference '%s' is %s, the program computes %s", path, io->name,
			    got, exp);
			goto out;
		}
	}

	taprt_gemm_threads(o.threads);
	taprt_conv_threads(o.threads);
	int started = 0;
	for (int r = 0; r < m.count; r++, started++) {
		if (m.count == 1)
			rank_main(&args[r]);
		else if (pthread_create(&th[r], NULL, rank_main, &args[r]) != 0) {
			snprintf(args[r].error, sizeof args[r].error, "rank %d: cannot start its thread",
			    args[r].rank);
			rank_failed(&args[r]);
			break;
		}
	}
	for (int r = 0; m.count > 1 && r < started; r++)
		pthread_join(th[r], NULL);
	bool failed = false;
	for (int r = 0; r < m.count; r++)
		if (args[r].error[0]) {
			if (!args[r].reported)
				fprintf(stderr, "%s: %s\n", argv[0], args[r].error);
			failed = true;
		}
	if (failed || (m.spread && gather_outputs(&m, &args[0], whole_out) != 0))
		goto out;
	for (int r = 0; o.memory_report && r < m.count; r++) {
		const taprt_rank_program *rp = p->ranks[args[r].rank];
		printf("rank %d stage %d peak_activation_bytes %lld planned_bytes %lld\n", args[r].rank,
		    taprt_coords_of(&m.l, args[r].rank).stage, (long long)args[r].peak,
		    (long long)rp->arena_bytes);
	}
	fflush(stdout);
	if (o.bench || o.bench_train) {
		long n = o.bench ? o.bench : o.bench_train;
		double ms = 0; /* the slowest rank's: the pipeline drains last */
		for (int r = 0; r < m.count; r++)
			ms = args[r].ms > ms ? args[r].ms : ms;
		int brc;
		taprt_group all = {m.l.nranks, m.all};
		if (m.spread && (brc = m.be->allreduce(m.be->rank(m.world, m.first), &all, &ms, 1,
		    TAPRT_F64, TAPRT_MAX)) != 0) {
			setup_failed(&m, "the slowest rank's time: allreduce failed: %s", m.be->strerror(brc));
			goto out;
		}
		ms /= n;
		int64_t batch = p->ninputs && p->inputs[0].rank ? p->inputs[0].dims[0] : 1;
		if (root)
			printf("%s: %ld %s, %.4f ms/%s, %.1f samples/s (batch %lld, %d rank%s, %d thread%s, "
			    "%s)\n", p->name, n, o.bench ? "iterations" : "training steps", ms,
			    o.bench ? "iteration" : "step", ms > 0 ? batch * 1e3 / ms : 0.0,
			    (long long)batch, p->nranks, p->nranks == 1 ? "" : "s", o.threads,
			    o.threads == 1 ? "" : "s", taprt_gemm_name());
	}
	rc = 0;
	for (int i = 0; root && o.check && i < p->noutputs; i++)
		if (!compare(p->outputs[i].name, i, &p->outputs[i], whole_out[i], &want[i], &o))
			rc = 1;
	for (int i = 0; root && o.outputs && i < p->noutputs; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/output_%d.pb", o.outputs, i);
		const taprt_io *io = &p->outputs[i];
		if (taprt_pb_write(path, io->name, io->dtype, io->rank, io->dims, whole_out[i]) != 0) {
			fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], path, strerror(errno));
			rc = 1;
		}
	}
out:
	fflush(stdout);
	if (m.be->finalize(m.world) != 0 && rc == 0) {
		fprintf(stderr, "%s: %s: shutting down the backend failed\n", argv[0], m.be->name);
		rc = 1;
	}
	taprt_unmap_files();
	for (int r = 0; args && r < m.count; r++) {
		free(args[r].tp_ranks);
		free(args[r].dp_ranks);
		free(args[r].in);
		free(args[r].out);
	}
	for (int i = 0; i < m.nkeep; i++)
		free(m.keep[i]);
	for (int i = 0; want && i < p->noutputs; i++)
		free(want[i].data);
	free(m.keep);
	free(m.all);
	free(whole_out);
	free(want);
	free(args);
	free(th);
	free(files);
	free(dir);
	free(m.exe_dir);
	return rc;
}
