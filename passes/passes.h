/*
 * passes.h - the pass manager's interface: the pass registry and PassCtx.
 *
 * A pass is `bool pass_x(Graph *g, PassCtx *cx)`: it transforms g in place
 * and returns false after reporting bad input through diag_*.  Passes do not
 * print; the driver prints the IR around them on request.
 */
#ifndef TAPC_PASSES_H
#define TAPC_PASSES_H

#include "ir/ir.h"

typedef struct {
	int64_t batch;                  /* -batch=N, 0 = as the model says */
	int microbatches;               /* -microbatches=M */
	Mesh mesh;                      /* -mesh and forced -dp/-tp/-pp */
	int min_duplicate;              /* -min-duplicate=N (fold-scopes) */
	unsigned tp_random;             /* -tp-random=SEED: a random valid plan (testing) */
} PassCtx;

typedef bool (*PassFn)(Graph *g, PassCtx *cx);

typedef struct {
	const char *name;
	PassFn fn;
	const char *help;
} PassInfo;

#define PASS(name, fn, help) bool fn(Graph *g, PassCtx *cx);
#include "passes/passes.def"
#undef PASS

extern const PassInfo pass_registry[];
extern const int pass_count;
const PassInfo *pass_lookup(const char *name);

/* The pipeline tapc runs when -passes is not given. */
/* The planning passes, then the kernel fusions on each rank's graph
 * (passes/fuse.h); -O0 runs the first alone. */
#define PASS_PLAN_PIPELINE "verify,fold-constants,strip-aux,graph-nodes,fold-scopes,tp-plan,tp-rewrite,pipe-shard,stage-assign"
#define PASS_FUSE_PIPELINE "fold-bn,fuse-conv,fuse-matmul,fuse-norm,fuse-softmax"
#define PASS_DEFAULT_PIPELINE PASS_PLAN_PIPELINE "," PASS_FUSE_PIPELINE ",verify"

typedef struct {
	const char *print_before;       /* comma list of pass names, "" for none */
	const char *print_after;
	bool print_after_all;
	bool print_before_all;
	const char *stop_after;         /* pass name or "" */
	bool time_passes;
	bool verify_each;
	const char *ir_dump_dir;        /* "" for none */
	FILE *print_stream;             /* where banners and IR go (stderr) */
	double load_ms;                 /* time to load the input, for -time-passes */
} PassOptions;

/* Run a comma-separated pipeline.  Returns false on bad input (diagnosed)
 * or an unknown pass name. */
bool pass_run_pipeline(Graph *g, PassCtx *cx, const char *pipeline, const PassOptions *o);
/* Check every name in a pipeline before loading anything. */
bool pass_check_pipeline(const char *pipeline, const char *what);

#endif
