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

/* What the user asks of the passes; what they decide is in the Graph (the
 * plan: Graph.mesh, device, search, stages). */
enum { SEARCH_AUTO, SEARCH_EXHAUSTIVE, SEARCH_ANNEAL };
enum { LOSS_CROSS_ENTROPY, LOSS_MSE };
enum { OPT_SGD, OPT_ADAMW };

/* -train's request (passes/loss.c, optimizer.c). */
typedef struct {
	bool on;                        /* -train */
	int loss;                       /* LOSS_* */
	int optimizer;                  /* OPT_* */
	double lr, momentum, weight_decay, beta1, beta2, eps;
} TrainRequest;

typedef struct {
	int dp, tp, pp, microbatches;   /* -dp -tp -pp -microbatches: > 0 forced, 0 searched */
	int search;                     /* -search=auto|exhaustive|anneal (mesh-map) */
	int anneal_steps;               /* -anneal-steps=N; 0: AMP's 500 */
	unsigned seed;                  /* -seed=N for the annealing */
	int min_duplicate;              /* -min-duplicate=N (fold-scopes) */
	unsigned tp_random;             /* -tp-random=SEED: a random valid plan (testing) */
	TrainRequest train;
	int schedule;                   /* -schedule: 0 the best predicted, else SchedKind + 1 */
	int recompute;                  /* -recompute: RECOMPUTE_* */
	bool slice;                     /* -slice: AutoPipe's micro-batch slicer (mesh-map
	                                 * halves the micro-batch, schedule solves the count) */
	bool subpipeline;               /* -subpipeline: Merak's sub-pipelined TMP (mesh-map
	                                 * halves the micro-batch, schedule pairs the halves) */
	bool half_exact;                /* -half=exact: legalize-half rounds every node's
	                                 * result to its f16/bf16 tensor */
} PassCtx;

enum { RECOMPUTE_NONE, RECOMPUTE_ALL, RECOMPUTE_AUTO };

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
/* The planning passes (with -train the loss, autodiff, the gradient sync
 * and the optimizer; fuse-train before autodiff), then half-precision
 * arithmetic moved to f32 (legalize-half), then the kernel fusions on each
 * rank's graph (passes/fuse.h; they leave a training graph alone), then
 * the schedule the emitter runs; -O0 leaves the fusions (fuse-train too)
 * out. */
#define PASS_PLAN_HEAD "verify,fold-constants,loss,strip-aux,graph-nodes,fold-scopes,pipe-shard,mesh-map,tp-plan,tp-rewrite,stage-assign"
#define PASS_TRAIN_TAIL "autodiff,grad-sync,optimizer"
#define PASS_PLAN_PIPELINE PASS_PLAN_HEAD "," PASS_TRAIN_TAIL
#define PASS_FUSE_PIPELINE "fold-qdq,fold-bn,fuse-conv,fuse-dw,fuse-se,fuse-matmul,fuse-norm,fuse-softmax"
#define PASS_DEFAULT_PIPELINE PASS_PLAN_HEAD ",fuse-train," PASS_TRAIN_TAIL ",legalize-half," \
	PASS_FUSE_PIPELINE ",schedule,verify"
#define PASS_O0_PIPELINE PASS_PLAN_PIPELINE ",legalize-half,schedule,verify"

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

/* "-dp=2 -pp=4": the degrees given (> 0), for diagnostics; "" when none. */
const char *pass_degrees(char buf[48], int dp, int tp, int pp);

/* Run a comma-separated pipeline.  Returns false on bad input (diagnosed)
 * or an unknown pass name. */
bool pass_run_pipeline(Graph *g, PassCtx *cx, const char *pipeline, const PassOptions *o);
/* Check every name in a pipeline before loading anything. */
bool pass_check_pipeline(const char *pipeline, const char *what);

#endif
