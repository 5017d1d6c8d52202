/*
 * tapc.c - the compiler driver: options, load, pass pipeline, emit.
 *
 * Needs: the options from cl.cpp, the ONNX loader, the IR reader and the
 * pass manager.  Exit status 0 on success, 1 for bad input or usage (one
 * diag line per problem).  Output files are written to a temporary sibling
 * and renamed, so a failed run leaves nothing half-written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/emit.h"
#include "frontend/cl.h"
#include "frontend/cluster.h"
#include "frontend/onnx.h"
#include "passes/passes.h"

static const char overview[] =
    "tapc - automatic 3D-parallel compiler for ONNX models\n"
    "\n"
    "  tapc model.onnx -o out/ && make -C out && out/model --check test_data_set_0\n"
    "  tapc model.onnx -emit=ir               print the shaped, folded IR\n"
    "  tapc model.onnx -emit=ir -o m.ir       ... big computed values in m.ir.weights\n"
    "  tapc model.onnx -print-after-all       watch every pass change it\n"
    "  tapc dump.ir -passes=fold-constants    run one pass on a dumped IR file\n"
    "\n"
    "tapc reads an ONNX model (or tapc's textual IR, *.ir), validates it as\n"
    "untrusted input, infers a static shape for every tensor and runs the\n"
    "pass pipeline.  Options take one dash or two, with '=' or a space\n"
    "(-mesh 2x8, -mesh=2x8, --mesh 2x8); @FILE reads more options from FILE.\n";

static char *
extra_help(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fprintf(f, "\nPASSES (-passes=a,b,c; default %s; -O0 leaves out fuse-train,%s):\n",
	    PASS_DEFAULT_PIPELINE, PASS_FUSE_PIPELINE);
	for (int i = 0; i < pass_count; i++)
		fprintf(f, "  %-18s %s\n", pass_registry[i].name, pass_registry[i].help);
	fprintf(f, "\nEXIT STATUS: 0 success; 1 bad input or usage, one line per problem:\n"
	    "  tapc: error: model.onnx: node '/h.0/attn/MatMul' (MatMul): input 1 is f32[5,4], expected [4,N]\n"
	    "\nTHE PROGRAM: make -C OUT builds OUT/NAME (NAME: the model file's stem), which takes\n"
	    "  --check DIR, --inputs DIR --outputs DIR, --bench N; OUT/NAME --help lists them.\n"
	    "\nTRAINING: -train compiles a training step: the loss (-loss=cross_entropy over the last\n"
	    "  axis of the first output with int64 labels, or mse), autodiff's backward pass, the\n"
	    "  data-parallel gradient average and the optimizer (-optimizer=sgd|adamw, -lr, -momentum,\n"
	    "  -weight-decay, -beta1, -beta2, -eps: torch.optim's rules and defaults). The labels are\n"
	    "  an input named labels. OUT/NAME --train N --data DIR [--save DIR] runs N steps on\n"
	    "  DIR/input_K.pb and DIR/labels.pb, prints \"step K loss L\", and saves DIR/model.onnx\n"
	    "  with the trained weights; --bench-train N times N steps. Data, tensor and pipeline\n"
	    "  parallelism: with M micro-batches each adds its gradient / M (GradAccumulate) and the\n"
	    "  optimizer runs once per step. docs/training.md.\n"
	    "\nTHE PLANNER: -mesh RxC is R nodes of C alike devices (-cost=flops=...,bw_intra=...,\n"
	    "  bw_inter=...,latency=...,memory=...,op_latency=...,mem_bw=... sets them; mem_bw,\n"
	    "  1e10 by default, charges each micro-batch the weights it reads again: 0 is AMP's);\n"
	    "  -cluster=FILE any cluster, in JSON (taprt-calibrate measures this machine):\n"
	    "    {\"latency\": 1e-5, \"nodes\": [{\"name\": \"a100x4\", \"count\": 3, \"devices\": 4,\n"
	    "      \"flops\": 1.56e14, \"memory\": 4e10, \"intra_bw\": 3e11, \"inter_bw\": 1.25e9}]}\n"
	    "  mesh-map searches dp, tp, pp, the micro-batch size and which device runs which rank\n"
	    "  on AMP's cost model (eq. 1-4, memory a hard limit; -cost=objective=train|infer):\n"
	    "  exhaustively up to 100000 candidates, else simulated annealing (-search, -seed,\n"
	    "  -anneal-steps); -dp/-tp/-pp/-microbatches force a coordinate. Megatron's rule is\n"
	    "  costed as the baseline. -emit=search prints the table, plan.json has \"search\",\n"
	    "  -emit=schedule draws the placement (docs/planner.md).\n"
	    "\nTENSOR PARALLELISM: tp-plan picks each weight's pattern by TAP's search and the cost\n"
	    "  model; tp-rewrite emits sliced weights and AllReduce/AllGather/ReduceScatter/Shard ops.\n"
	    "\nPIPELINES: pipe-shard cuts the model into subgraphs (Merak), stage-assign groups them\n"
	    "  into stages (AMP's pipe_dp, AutoPipe, the even split; the simulator picks); each stage\n"
	    "  is one source, stageS.c, whose ranks send activations on by send/recv. The schedule\n"
	    "  pass lists each stage's steps (forward, backward, recompute of a micro-batch, sends,\n"
	    "  receives, gradient buckets, optimizer): -schedule=gpipe|1f1b|merak (default: the\n"
	    "  fastest simulated; ties to 1f1b), -recompute=none|all|auto (auto: Merak's\n"
	    "  stage-aware rule: each stage keeps the activations of as many of its modules as\n"
	    "  fit, the rest re-run before the backward), -slice (AutoPipe's slicer: micro-batches\n"
	    "  run as halves, the first ones' forward halves sent on their own to shorten the\n"
	    "  start-up; the count is solved by simulation), -subpipeline (Merak's sub-pipelined\n"
	    "  TMP, with tp > 1: each micro-batch runs as two halves taking turns at every TP\n"
	    "  all-reduce, one half's all-reduce in flight while the other computes). The program's\n"
	    "  --memory-report prints each rank's measured peak of activations. -emit=plan shows\n"
	    "  the stage table, -emit=schedule draws the schedule.\n"
	    "\nHALF PRECISION: libtaprt computes f16/bf16 models in f32 (legalize-half). Weights\n"
	    "  are converted once, at compile time; -half=f32 (default) keeps the f32 value between\n"
	    "  two nodes that compute in f32 (as onnxruntime does: the fusions then see an f32\n"
	    "  graph), -half=exact rounds every node's result to its half tensor (docs/ops.md).\n"
	    "\nSHAPES: every symbolic dim needs a value: dim 0 (the batch) is 1 or -batch=N; others come\n"
	    "  from -dim NAME=N or -input-shape INPUT=AxBxC. A model exported at a fixed batch is\n"
	    "  re-specialized for -batch, -dp and micro-batches: the batch baked into its constants\n"
	    "  is found and rewritten (docs/usage.md, \"The batch and symbolic dimensions\").\n"
	    "\nUNTRUSTED INPUT: models and IR files are checked alike (opset, dtypes, byte sizes up\n"
	    "  to 2^48, attribute types by ONNX's schema, shape inference re-run on an IR file's\n"
	    "  declared types); paths found inside them stay in their directory without symbolic\n"
	    "  links (an IR file's model= inside the current directory, or -model=FILE); only regular\n"
	    "  files are read; names are escaped for every file written (docs/design.md).\n"
	    "\nDocumentation: README.md, docs/usage.md (every option, the program), docs/ir.md\n"
	    "(reading the IR), docs/ops.md (operators), docs/tensor-parallel.md, docs/pipeline.md,\n"
	    "docs/planner.md, docs/training.md, docs/runtime.md, docs/build-integration.md.\n");
	fclose(f);
	return buf;
}

/* "RxC" (or "RXC", as documented): two positive decimal counts (digits
 * only), at most IR_MAX_DEVICES devices in all. */
static bool
parse_mesh(const char *s, Mesh *m)
{
	int64_t v[2] = {0, 0};
	int k = 0;
	for (const char *p = s;; p++) {
		if (*p >= '0' && *p <= '9') {
			v[k] = v[k] * 10 + (*p - '0');
			if (v[k] > IR_MAX_DEVICES)
				return false;
		} else if ((*p == 'x' || *p == 'X') && k == 0 && p > s) {
			k = 1;
			if (!(p[1] >= '0' && p[1] <= '9'))
				return false;
		} else {
			if (*p || k != 1)
				return false;
			break;
		}
	}
	if (v[0] < 1 || v[1] < 1 || v[0] * v[1] > IR_MAX_DEVICES)
		return false;
	m->rows = (int)v[0];
	m->cols = (int)v[1];
	return true;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

#define MAX_IR_TEXT ((int64_t)1 << 30)

static Graph *
read_ir_file(const char *path, const char *model)
{
	char why[512];
	size_t len;
	char *buf = ir_file_read(NULL, path, "", "", MAX_IR_TEXT, &len, why, sizeof why);
	if (!buf) {
		diag_file(path, "%s", why);
		return NULL;
	}
	Graph *g = ir_read(buf, len, path, *model ? model : NULL);
	free(buf);
	return g;
}

typedef struct {
	Graph *g;
	const EmitOptions *eo;
	char what;                      /* 'i' the IR, 'p' plan.json, 's' the schedule SVG,
					 * 'S' the search table */
} Writer;

static void
write_to(FILE *f, const Writer *w)
{
	if (w->what == 'i') {
		ir_print(f, w->g);
		return;
	}
	if (w->what == 's') {
		emit_schedule(f, w->g, w->eo->program);
		return;
	}
	if (w->what == 'S') {
		emit_search(f, w->g);
		return;
	}
	MemPlan *mps = emit_memplans(w->g);
	emit_plan(f, w->g, w->eo, mps);
	emit_memplans_free(w->g, mps);
}

/* Is path the model or one of its external data files?  By device and
 * inode, as emit.c checks an output directory.  (An IR file's own data file
 * may be replaced: its values were read with the IR.) */
static bool
model_file(const Graph *g, const char *path)
{
	struct stat st, in;
	if (stat(path, &st) != 0)
		return false;
	char buf[8192];
	for (int i = 0; i < g->nfiles; i++) {
		snprintf(buf, sizeof buf, "%s/%s", g->dir, g->files[i]);
		if (stat(buf, &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
			return true;
	}
	return false;
}

/* Write the IR or plan to path through a temporary sibling renamed into
 * place; "" or "-" is standard output.  The IR's big values go to a second
 * file, PATH.weights, written the same way and renamed first. */
static bool
write_file(const char *path, const Writer *w)
{
	struct stat st;
	if (!*path || strcmp(path, "-") == 0) {
		write_to(stdout, w);
		if (fflush(stdout) != 0 || ferror(stdout)) {
			diag_error("cannot write standard output: %s", strerror(errno));
			return false;
		}
		return true;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* /dev/null, a pipe */
		FILE *f = fopen(path, "w");
		if (f)
			write_to(f, w);
		if (!f || fclose(f) != 0) {
			diag_error("cannot write '%s': %s", path, strerror(errno));
			return false;
		}
		return true;
	}
	size_t n = strlen(path) + 32;
	char *tmp = malloc(n), *data = malloc(n), *datatmp = malloc(n);
	snprintf(tmp, n, "%s.tmpXXXXXX", path);
	snprintf(data, n, "%s.weights", path);
	snprintf(datatmp, n, "%s.weights.tmpXXXXXX", path);
	int fd = mkstemp(tmp), dfd = -1;
	bool ok = fd >= 0;
	const char *failed = path;
	if (ok && w->what == 'i') {
		if (model_file(w->g, data)) {
			diag_error("cannot write '%s': the IR's data file would replace the model's "
			    "file of that name (choose another -o)", data);
			failed = NULL;
			ok = false;
		} else if ((dfd = mkstemp(datatmp)) < 0) {
			failed = data;
			ok = false;
		}
	}
	if (!ok) {
		if (failed)
			diag_error("cannot write '%s': %s", failed, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
		free(tmp);
		free(data);
		free(datatmp);
		if (fd >= 0)
			close(fd);
		return false;
	}
	fchmod(fd, 0644);
	FILE *f = fdopen(fd, "w");
	int64_t bytes = 0;
	if (dfd >= 0) {
		/* the values of big weights and constants in PATH.weights beside it */
		fchmod(dfd, 0644);
		FILE *df = fdopen(dfd, "w");
		const char *slash = strrchr(data, '/');
		ok = ir_print_data(f, w->g, df, slash ? slash + 1 : data, &bytes);
		ok = (fclose(df) == 0) && ok;
		if (!ok)
			failed = data;
		if (!ok || bytes == 0)
			unlink(datatmp);
		else if (rename(datatmp, data) != 0) {
			failed = data;
			unlink(datatmp);
			ok = false;
		}
	} else {
		write_to(f, w);
	}
	ok = fflush(f) == 0 && ok;
	ok = (fclose(f) == 0) && ok && rename(tmp, path) == 0;
	if (!ok) {
		diag_error("cannot write '%s': %s", failed, strerror(errno));
		unlink(tmp);
		if (bytes > 0 && failed == path)
			unlink(data); /* the IR that names it is not there */
	}
	free(tmp);
	free(data);
	free(datatmp);
	return ok;
}

/* "dir/gpt2.onnx" -> "gpt2": the program's name, a file name that make and
 * the shell take as is ([A-Za-z0-9_.-], not starting with '.' or '-') and
 * that is not one of the files the output directory holds or builds
 * ("main.onnx" is fine, "Makefile.onnx" becomes Makefile.bin). */
static char *
stem(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	char *s = malloc(n + 16);
	if (!s)
		die("out of memory");
	memcpy(s, base, n + 1);
	char *dot = strrchr(s, '.');
	if (dot && dot != s)
		*dot = 0;
	for (char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || (p > s && (*p == '-' || *p == '.'))))
			*p = '_';
	if (!*s)
		strcpy(s, "model");
	static const char *const taken[] = {"Makefile", "makefile", "GNUmakefile", "clean"};
	static const char *const built[] = {".c", ".o", ".h", ".d", ".json"};
	bool clash = false;
	for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
		clash |= strcmp(s, taken[i]) == 0;
	for (size_t i = 0; i < sizeof built / sizeof *built; i++)
		clash |= ends_with(s, built[i]);
	if (clash)
		strcat(s, ".bin");
	return s;
}

static bool
emit(Graph *g, const TapcOptions *o)
{
	char exe[4096] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	char *name = stem(g->model);
	EmitOptions eo = {.outdir = o->output, .program = name, .tapc_exe = exe, .input = o->input};
	char dep[4096] = "";
	bool ok;
	if (o->md) {
		size_t len = strlen(o->output);
		while (len > 1 && o->output[len - 1] == '/')
			len--;
		snprintf(dep, sizeof dep, "%s", *o->mf ? o->mf : "");
		if (!*dep)
			snprintf(dep, sizeof dep, "%.*s.d", (int)len, o->output);
	}
	if (strcmp(o->emit, "c") == 0) {
		eo.depfile = o->md ? dep : NULL;
		ok = emit_program(g, &eo);
	} else {
		Writer w = {g, &eo, strcmp(o->emit, "search") == 0 ? 'S' : o->emit[0]};
		char *deptmp = NULL;
		ok = (!o->md || emit_depfile(g, o->input, o->output, dep, &deptmp)) &&
		    write_file(o->output, &w);
		if (deptmp && ok)
			ok = emit_depfile_commit(deptmp, dep);
		else if (deptmp) {
			unlink(deptmp);
			free(deptmp);
		}
	}
	free(name);
	return ok;
}

/* A positive decimal count, digits only, at most 2^48; false otherwise. */
static bool
parse_count(const char *s, const char *end, int64_t *v)
{
	if (s == end)
		return false;
	*v = 0;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		*v = *v * 10 + (*p - '0');
		if (*v > IR_MAX_BYTES)
			return false;
	}
	return *v >= 1;
}

/* -dim NAME=N and -input-shape NAME=AxBxC into the loader's options (NAME
 * runs to the last '=', so input names may hold one).  Errors name the
 * option as given. */
static bool
parse_pins(const TapcOptions *o, OnnxOptions *lo)
{
	static OnnxDim *dims;
	static OnnxShape *shapes;
	dims = calloc(o->ndim + 1, sizeof *dims);
	shapes = calloc(o->ninput_shape + 1, sizeof *shapes);
	if (!dims || !shapes)
		die("out of memory");
	bool ok = true;
	for (int i = 0; i < o->ndim; i++) {
		const char *eq = strrchr(o->dim[i], '=');
		if (!eq || eq == o->dim[i] || !parse_count(eq + 1, eq + strlen(eq), &dims[i].value)) {
			diag_error("-dim %s: expected NAME=N with N a positive count", o->dim[i]);
			ok = false;
			continue;
		}
		dims[i].name = strndup(o->dim[i], (size_t)(eq - o->dim[i]));
	}
	for (int i = 0; i < o->ninput_shape; i++) {
		const char *s = o->input_shape[i], *eq = strrchr(s, '=');
		OnnxShape *p = &shapes[i];
		bool good = eq && eq != s;
		for (const char *c = eq ? eq + 1 : NULL; good && *c;) {
			const char *x = strpbrk(c, "xX");
			const char *e = x ? x : c + strlen(c);
			good = p->rank < IR_MAX_RANK && parse_count(c, e, &p->dims[p->rank]);
			p->rank++;
			c = x ? x + 1 : e;
			good = good && !(x && !*c);
		}
		if (!good) {
			diag_error("-input-shape %s: expected NAME=AxBxC with positive sizes, at most %d of them",
			    s, IR_MAX_RANK);
			ok = false;
			continue;
		}
		p->input = strndup(s, (size_t)(eq - s));
	}
	lo->ndims = o->ndim;
	lo->dims = dims;
	lo->nshapes = o->ninput_shape;
	lo->shapes = shapes;
	return ok;
}

/*
 * @FILE response files, expanded here rather than by LLVM, whose reader
 * follows any path without a size limit (@/dev/zero grows without end) and
 * reports a missing file as "Too many positional arguments".  The words of
 * FILE are separated by whitespace; quotes ('' or "") group, a backslash
 * escapes the next character (outside single quotes), as GNU tools and
 * LLVM read them.  Files nest up to RSP_DEPTH deep.
 */
#define RSP_DEPTH 16
#define RSP_MAX_FILE ((int64_t)1 << 20)
#define RSP_MAX_ARGS (1 << 16)

typedef struct {
	char **v;
	int n, cap;
} Args;

static void
args_add(Args *a, char *s)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 64;
		if (!(a->v = realloc(a->v, sizeof *a->v * (a->cap + 1))))
			die("out of memory");
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static bool expand_arg(Args *a, char *arg, int depth);

static bool
expand_file(Args *a, const char *path, int depth)
{
	if (depth >= RSP_DEPTH) {
		diag_file(path, "response files nest deeper than %d", RSP_DEPTH);
		return false;
	}
	char why[512];
	size_t len;
	char *text = ir_file_read(NULL, path, "", "", RSP_MAX_FILE, &len, why, sizeof why);
	if (!text) {
		diag_file(path, "%s", why);
		return false;
	}
	if (memchr(text, 0, len)) {
		diag_file(path, "response file holds a NUL byte");
		free(text);
		return false;
	}
	bool ok = true;
	char *p = text;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f')
			p++;
		if (!*p)
			break;
		char *word = p, *w = p; /* unquote in place: w never passes p */
		char quote = 0;
		for (; *p; p++) {
			if (quote == '\'') {
				if (*p == '\'')
					quote = 0;
				else
					*w++ = *p;
			} else if (*p == '\\' && p[1]) {
				*w++ = *++p;
			} else if (quote) {
				if (*p == quote)
					quote = 0;
				else
					*w++ = *p;
			} else if (*p == '\'' || *p == '"') {
				quote = *p;
			} else if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' ||
			    *p == '\f') {
				break;
			} else {
				*w++ = *p;
			}
		}
		bool more = *p != 0;
		*w = 0;
		if (more)
			p++;
		if (quote) {
			diag_file(path, "response file: a quote is not closed");
			ok = false;
			break;
		}
		char *copy = strdup(word);
		if (!copy)
			die("out of memory");
		if (!(ok = expand_arg(a, copy, depth + 1)))
			break;
		if (!more)
			break;
	}
	free(text);
	return ok;
}

static bool
expand_arg(Args *a, char *arg, int depth)
{
	if (arg[0] != '@') {
		if (a->n >= RSP_MAX_ARGS) {
			diag_error("more than %d arguments", RSP_MAX_ARGS);
			return false;
		}
		args_add(a, arg);
		return true;
	}
	return expand_file(a, arg + 1, depth);
}

int
main(int argc, char **argv)
{
	TapcOptions o = {0};
	static Args args; /* lives until exit: the options point into it */
	args_add(&args, argv[0]);
	for (int i = 1; i < argc; i++)
		if (!expand_arg(&args, argv[i], 0))
			return 1;
	char *extra = extra_help();
	if (!cl_parse(args.n, args.v, overview, extra, &o))
		return 1;
	if (o.list_passes) {
		for (int i = 0; i < pass_count; i++)
			printf("%-18s %s\n", pass_registry[i].name, pass_registry[i].help);
		return 0;
	}

	PassCtx cx = {.dp = o.dp, .tp = o.tp, .pp = o.pp, .microbatches = o.microbatches,
		.anneal_steps = o.anneal_steps, .seed = o.seed, .min_duplicate = o.min_duplicate,
		.tp_random = o.tp_random};
	if (o.min_duplicate < 2) {
		diag_error("-min-duplicate=%d: a block must repeat at least twice", o.min_duplicate);
		return 1;
	}
	const char *pipeline = *o.passes ? o.passes :
	    o.no_fuse ? PASS_O0_PIPELINE : PASS_DEFAULT_PIPELINE;
	bool ok = pass_check_pipeline(pipeline, "-passes") &
	    pass_check_pipeline(o.print_before, "-print-before") &
	    pass_check_pipeline(o.print_after, "-print-after") &
	    pass_check_pipeline(o.stop_after, "-stop-after");
	Mesh mesh = {1, 1};
	if ((*o.mesh || (o.given & CL_GIVEN_MESH)) && !parse_mesh(o.mesh, &mesh)) {
		diag_error("-mesh=%s: expected ROWSxCOLS with positive sizes, e.g. 2x8, at most %d "
		    "devices in all", o.mesh, IR_MAX_DEVICES);
		ok = false;
	}
	if (strcmp(o.search, "auto") == 0)
		cx.search = SEARCH_AUTO;
	else if (strcmp(o.search, "exhaustive") == 0)
		cx.search = SEARCH_EXHAUSTIVE;
	else if (strcmp(o.search, "anneal") == 0)
		cx.search = SEARCH_ANNEAL;
	else {
		diag_error("-search=%s: expected auto, exhaustive or anneal", o.search);
		ok = false;
	}
	if ((o.given & CL_GIVEN_ANNEAL_STEPS) && (o.anneal_steps < 1 || o.anneal_steps > 100000000)) {
		diag_error("-anneal-steps=%d: expected 1 to 100000000", o.anneal_steps);
		ok = false;
	}
	CostModel cost;
	ir_cost_defaults(&cost);
	const char *bad;
	if (!ir_cost_parse(&cost, o.cost, &bad)) {
		diag_error("-cost: '%s': expected KEY=VALUE with KEY one of flops, bw_intra, bw_inter, "
		    "latency, memory, op_latency, mem_bw (numbers > 0; latency, op_latency and mem_bw "
		    "may be 0) or objective=train|infer", bad);
		ok = false;
	}
	Cluster cluster;
	bool have_cluster = *o.cluster != 0;
	if (have_cluster && *o.mesh) {
		diag_error("-mesh and -cluster both describe the devices: give one");
		ok = false;
	} else if (have_cluster && !cluster_read(o.cluster, &cluster)) {
		ok = false;
	}
	if (have_cluster && *o.cost) { /* only the objective: the file has the devices */
		CostModel probe;
		ir_cost_defaults(&probe);
		probe.train = cost.train;
		if (memcmp(&probe, &cost, sizeof probe) != 0) {
			diag_error("-cost=%s: with -cluster only objective= applies (the file gives the "
			    "devices' flops, memory and links)", o.cost);
			ok = false;
		}
	}
	const struct { const char *name; int v; unsigned bit; } forcing[] = {
		{"dp", o.dp, CL_GIVEN_DP}, {"tp", o.tp, CL_GIVEN_TP}, {"pp", o.pp, CL_GIVEN_PP},
		{"microbatches", o.microbatches, CL_GIVEN_MICROBATCHES}};
	for (size_t i = 0; i < sizeof forcing / sizeof *forcing; i++)
		if ((o.given & forcing[i].bit) && forcing[i].v < 1) {
			diag_error("-%s=%d: expected a positive count (leave it out to have it searched)",
			    forcing[i].name, forcing[i].v);
			ok = false;
		}
	int64_t forced = (int64_t)(o.dp > 0 ? o.dp : 1) * (o.tp > 0 ? o.tp : 1) * (o.pp > 0 ? o.pp : 1);
	if (ok && forced > IR_MAX_DEVICES) {
		char d[48];
		diag_error("%s: %lld ranks, over tapc's limit of %d", pass_degrees(d, o.dp, o.tp, o.pp),
		    (long long)forced, IR_MAX_DEVICES);
		ok = false;
	}
	if (ok && o.microbatches > IR_MAX_DEVICES) {
		diag_error("-microbatches=%d: at most %d", o.microbatches, IR_MAX_DEVICES);
		ok = false;
	}
	/* -train */
	cx.train = (TrainRequest){.on = o.train, .lr = o.lr, .momentum = o.momentum,
		.weight_decay = o.weight_decay, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps};
	if (strcmp(o.loss, "cross_entropy") == 0)
		cx.train.loss = LOSS_CROSS_ENTROPY;
	else if (strcmp(o.loss, "mse") == 0)
		cx.train.loss = LOSS_MSE;
	else {
		diag_error("-loss=%s: expected cross_entropy or mse", o.loss);
		ok = false;
	}
	if (strcmp(o.optimizer, "sgd") == 0)
		cx.train.optimizer = OPT_SGD;
	else if (strcmp(o.optimizer, "adamw") == 0)
		cx.train.optimizer = OPT_ADAMW;
	else {
		diag_error("-optimizer=%s: expected sgd or adamw", o.optimizer);
		ok = false;
	}
	if (!(o.lr > 0 && o.lr < 1e6) || !(o.momentum >= 0 && o.momentum < 1) ||
	    !((!(o.given & CL_GIVEN_WEIGHT_DECAY) && o.weight_decay < 0) ||
	    (o.weight_decay >= 0 && o.weight_decay < 1e6)) ||
	    !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) ||
	    !(o.eps > 0 && o.eps < 1)) {
		diag_error("-lr=%g -momentum=%g -weight-decay=%g -beta1=%g -beta2=%g -eps=%g: expected "
		    "lr > 0, momentum, beta1 and beta2 in [0, 1), weight decay >= 0, 0 < eps < 1",
		    o.lr, o.momentum, o.weight_decay, o.beta1, o.beta2, o.eps);
		ok = false;
	}
	if (!*o.schedule)
		cx.schedule = 0;
	else if (strcmp(o.schedule, "1f1b") == 0)
		cx.schedule = SCHED_1F1B + 1;
	else if (strcmp(o.schedule, "gpipe") == 0)
		cx.schedule = SCHED_GPIPE + 1;
	else if (strcmp(o.schedule, "merak") == 0)
		cx.schedule = SCHED_MERAK + 1;
	else {
		diag_error("-schedule=%s: expected gpipe, 1f1b or merak", o.schedule);
		ok = false;
	}
	cx.slice = o.slice;
	cx.subpipeline = o.subpipeline;
	if (strcmp(o.recompute, "none") == 0)
		cx.recompute = RECOMPUTE_NONE;
	else if (strcmp(o.recompute, "all") == 0)
		cx.recompute = RECOMPUTE_ALL;
	else if (strcmp(o.recompute, "auto") == 0)
		cx.recompute = RECOMPUTE_AUTO;
	else {
		diag_error("-recompute=%s: expected none, all or auto", o.recompute);
		ok = false;
	}
	if (strcmp(o.half, "f32") == 0 || strcmp(o.half, "exact") == 0) {
		cx.half_exact = strcmp(o.half, "exact") == 0;
	} else {
		diag_error("-half=%s: expected f32 or exact", o.half);
		ok = false;
	}
	if (o.train && strstr(o.cost, "objective=infer")) {
		diag_error("-train -cost=objective=infer: a training program is planned for training");
		ok = false;
	}
	if (o.train)
		cost.train = true;

	/* -dp/-tp/-pp alone: a single node of that many devices */
	if (ok && !*o.mesh && !have_cluster && (o.dp > 0 || o.tp > 0 || o.pp > 0))
		mesh.cols = (int)forced;
	if (strcmp(o.emit, "ir") != 0 && strcmp(o.emit, "c") != 0 && strcmp(o.emit, "plan") != 0 &&
	    strcmp(o.emit, "schedule") != 0 && strcmp(o.emit, "search") != 0) {
		diag_error("-emit=%s: expected c, ir, plan, schedule or search", o.emit);
		ok = false;
	}
	if (strcmp(o.emit, "c") == 0 && (!*o.output || strcmp(o.output, "-") == 0)) {
		diag_error("-emit=c writes a directory: give it with -o DIR (or use -emit=ir)");
		ok = false;
	}
	if (o.md && (!*o.output || strcmp(o.output, "-") == 0)) {
		diag_error("-MD/-MF need an output file or directory (-o)");
		ok = false;
	}
	if ((o.given & CL_GIVEN_BATCH) && o.batch < 1) {
		diag_error("-batch=%lld: expected a positive batch size", (long long)o.batch);
		ok = false;
	}
	if ((o.given & CL_GIVEN_MAX_MODEL_SIZE) && o.max_model_size < 1) {
		diag_error("-max-model-size=%lld: expected a positive number of bytes",
		    (long long)o.max_model_size);
		ok = false;
	}
	if (!*o.input) {
		diag_error("no input file (tapc -help shows usage)");
		ok = false;
	}
	if (*o.model && !ends_with(o.input, ".ir")) {
		diag_error("-model=%s names the model of an IR file; the input is a model already", o.model);
		ok = false;
	}
	OnnxOptions lo = {.max_size = o.max_model_size, .batch = o.batch};
	ok = parse_pins(&o, &lo) && ok;
	if ((o.ndim || o.ninput_shape) && ends_with(o.input, ".ir")) {
		diag_error("-dim and -input-shape apply to ONNX models; an IR file's shapes are fixed");
		ok = false;
	}
	if (!ok)
		return 1;

	Graph *g;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool is_ir = ends_with(o.input, ".ir");
	if (is_ir) {
		if (o.batch) {
			diag_error("-batch applies to ONNX models, not to IR files");
			return 1;
		}
		g = read_ir_file(o.input, o.model);
	} else {
		g = onnx_load(o.input, &lo);
	}
	if (!g)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* the devices: -cluster, -mesh (with -cost's constants), an IR file's
	 * mesh, or one */
	g->cost = cost;
	if (g->loss != IR_NONE) /* an IR file of a training graph: planned for training */
		g->cost.train = true;
	if (is_ir && g->mesh.dp && !*o.mesh && !have_cluster) {
		mesh.rows = g->mesh.rows;
		mesh.cols = g->mesh.cols;
	}
	if (have_cluster) {
		g->cluster = cluster;
		const NodeKind *k = &cluster.kinds[0]; /* tp-plan's constants before placement */
		g->cost.flops = k->flops;
		g->cost.memory = k->memory;
		g->cost.bw_intra = k->intra_bw ? k->intra_bw : k->inter_bw;
		g->cost.bw_inter = k->inter_bw ? k->inter_bw : k->intra_bw;
		g->cost.latency = cluster.latency;
	} else {
		ir_cluster_mesh(&g->cluster, mesh.rows, mesh.cols, &cost);
	}
	if (!g->mesh.dp)
		ir_cluster_shape(&g->cluster, &g->mesh.rows, &g->mesh.cols);

	PassOptions po = {
		.print_before = o.print_before,
		.print_after = o.print_after,
		.print_before_all = o.print_before_all,
		.print_after_all = o.print_after_all,
		.stop_after = o.stop_after,
		.time_passes = o.time_passes,
		.verify_each = o.verify_each,
		.ir_dump_dir = o.ir_dump_dir,
		.print_stream = stderr,
		.load_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
	};
	ok = pass_run_pipeline(g, &cx, pipeline, &po) && emit(g, &o);
	ir_free(g);
	free(extra);
	return ok && diag_count == 0 ? 0 : 1;
}
