/*
 * emit.h - the C backend: a planned graph -> an output directory.
 *
 *   out/Makefile   builds out/NAME against libtaprt (build tree or installed)
 *   out/main.c     the program table and main()
 *   out/stageS.c   one translation unit per pipeline stage, compiled once per
 *                  rank of the stage: tensors, nodes, init, run
 *   out/plan.json  format version, mesh, degrees, ranks, tensors, predictions
 *
 * The directory is written to a temporary sibling and renamed into place,
 * so a failed run leaves nothing half-written.
 */
#ifndef TAPC_EMIT_H
#define TAPC_EMIT_H

#include "ir/ir.h"

typedef struct {
	const char *outdir;             /* -o DIR */
	const char *program;            /* program name: the model file's stem */
	const char *depfile;            /* -MD/-MF: dependency file path, or NULL */
	const char *input;              /* the input file as given (the depfile's first dependency) */
	const char *tapc_exe;           /* /proc/self/exe of this tapc, to find its build tree */
} EmitOptions;

/* A rank's activation arena or weight region may be at most this big: sums
 * of tensors (each at most IR_MAX_BYTES) are checked against it, and a plan
 * past it is refused (emit_program) rather than written with wrapped sizes. */
#define EMIT_MAX_REGION ((int64_t)1 << 56)

/*
 * Memory of one rank of a stage (memplan.c): its weight region, and its
 * activation arena laid out for the stage's whole schedule (Graph.sched):
 * every value gets an instance per micro-batch it is computed or received
 * for (another when recomputed), which lives from the step making it to
 * its last reader's, so the arena holds every micro-batch in flight.
 */
typedef struct {
	bool *recv;                     /* per tensor: received from another stage */
	TensorId *view;                 /* per tensor: the tensor whose memory it is, or IR_NONE */
	bool *bound;                    /* per tensor: in the program's input or output buffers,
					 * re-bound per micro-batch (views of them follow) */
	int64_t arena_bytes;            /* the arena's high-water mark */
	int64_t *woffset;               /* per tensor: offset in the weight region, -1 if none */
	int64_t weight_bytes;
	int nsteps;                     /* the stage's schedule's */
	int64_t **off;                  /* [nsteps][tensor]: arena offset step j binds t to, -1 */
	const int64_t *blob;            /* per tensor: offset in consts.bin, -1 if none (shared
	                                 * by every stage's plan: emit_blob_layout) */
} MemPlan;

/*
 * Inline data bigger than EMIT_BLOB_MIN bytes (the weights fold-bn
 * computes) goes into out/consts.bin, which out/consts.S embeds with
 * .incbin as the symbol taprt_consts (64-byte aligned pieces): C
 * initializers of millions of floats would take the compiler minutes.
 * emit_blob_layout gives each such tensor its offset (-1 for the rest)
 * and the total in *bytes; emit_blob writes both files when there is any.
 */
#define EMIT_BLOB_MIN 4096
int64_t *emit_blob_layout(Graph *g, int64_t *bytes);
bool emit_blob(Graph *g, const int64_t *off, int64_t bytes, const char *dir);

/*
 * An inference program's small tensors (under EMIT_COOL_BYTES) do not take
 * arena bytes a tensor freed until EMIT_COOL_BYTES of other tensors have
 * been made since (memplan.c): on two threads, writing over lines the
 * other core read last waits for each of them (docs/design.md, "The
 * backend's memory plan").  About one core's L2.
 */
#define EMIT_COOL_BYTES ((int64_t)1 << 20)

void emit_memplan(Graph *g, int stage, MemPlan *mp);
/* Pipeline stages: how many the program has (mesh.pp), the stage of a node
 * (0 without a pipeline), of a tensor (its producer's, else its first
 * reader's), and a check that every node has one, in order. */
int emit_nstages(const Graph *g);
int emit_stage(const Graph *g, NodeId n);
int emit_tensor_stage(const Graph *g, TensorId t);
bool emit_check_stages(Graph *g);
/* A node that only renames its input's bytes (Reshape, Flatten, Squeeze,
 * Unsqueeze, a kept Identity): its output is a view, and no code runs. */
bool emit_is_view(Graph *g, NodeId n);
/* An op that writes output out into input i's storage (the optimizers:
 * the weight and its state; FusedSqueezeExcite into x when x dies there):
 * i, else -1. */
int emit_inplace(const Graph *g, NodeId n, int out);
/* Is t a value some node computes (not an input, a weight, a constant)? */
static inline bool
emit_computed(const Graph *g, TensorId t)
{
	return g->tensors[t].kind == TK_VALUE && g->tensors[t].producer != IR_NONE;
}
/* Is graph output t computed straight into its output buffer (a value this
 * stage computes), rather than copied there (an input, a weight, a
 * constant)? */
static inline bool
emit_into_output(const Graph *g, const MemPlan *mp, TensorId t)
{
	return mp->bound[t] && emit_computed(g, t);
}
void emit_memplan_free(MemPlan *mp);
/* Every stage's plan (emit_nstages entries), computed once for the sources
 * and plan.json; freed with emit_memplans_free. */
MemPlan *emit_memplans(Graph *g);
void emit_memplans_free(Graph *g, MemPlan *mps);

/* Every model file opens inside the model's directory and holds the byte
 * ranges of its weights; false after a diag error. */
bool emit_check_files(Graph *g);
/* Write the whole output directory; false after a diag error. */
bool emit_program(Graph *g, const EmitOptions *o);

/* What a training program's --save writes (emit_save.c): dir/save.onnx,
 * the model with its trained weights external, and where each goes. */
typedef struct {
	int file;
	int64_t offset;                 /* the weight's bytes in the model files */
	int64_t out;                    /* its place in model.onnx.data */
} EmitSaved;

typedef struct {
	int nsaved;
	EmitSaved *saved;
	int64_t data_bytes;
} EmitSave;

bool emit_save(Graph *g, const char *dir, EmitSave *s);

/* Pieces, each writing one file into dir (emit_c.c, emit_make.c, plan_json.c). */
bool emit_stage_c(Graph *g, int stage, const MemPlan *mp, const char *dir);
bool emit_main_c(Graph *g, const EmitOptions *o, const char *dir, const char *model_dir,
    const EmitSave *save);
bool emit_makefile(Graph *g, const EmitOptions *o, const char *dir, bool blob);
bool emit_plan_json(Graph *g, const EmitOptions *o, const MemPlan *mps, const char *dir);
/* -MD: a make dependency file naming target's inputs (the input file, the
 * model and its external data), written to *tmp beside path; then
 * emit_depfile_commit renames it into place (and frees tmp). */
bool emit_depfile(Graph *g, const char *input, const char *target, const char *path, char **tmp);
bool emit_depfile_commit(char *tmp, const char *path);
/* plan.json's text (-emit=plan writes it alone). */
void emit_plan(FILE *f, Graph *g, const EmitOptions *o, const MemPlan *mps);
/* -emit=search: mesh-map's table; -emit=schedule: the placement and the
 * simulated pipeline as SVG (emit_search.c). */
void emit_search(FILE *f, Graph *g);
void emit_schedule(FILE *f, Graph *g, const char *name);

#endif
