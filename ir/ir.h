/*
 * ir.h - tapc's intermediate representation: every IR type in one header.
 *
 * A Graph is an op graph in SSA form.  Tensors and nodes live in arrays owned
 * by the graph and are referenced by integer ids (TensorId, NodeId), never by
 * pointers a pass has to keep in sync.  Strings and small arrays come from
 * the graph's arena and are freed with it at once (ir_free).
 *
 * Weights are referenced, not loaded: a tensor whose bytes live in a file
 * records (file, offset, length); only small constants (shape arithmetic,
 * Constant nodes, varint-encoded initializers) carry their bytes inline.
 *
 * Later passes annotate the same graph: GraphNode groups (TAP), shared
 * subgraph templates, sharding, pipeline stages, and the phase field leaves
 * room for backward and optimizer nodes without changing the layout.
 */
#ifndef TAPC_IR_H
#define TAPC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- ops */

typedef enum {
#define OP(name, kind) OP_##name,
#include "ir/ops.def"
#undef OP
	OP_COUNT
} Op;

typedef enum {
	OPK_UNARY, OPK_BINARY, OPK_VARIADIC, OPK_REDUCE, OPK_SHAPE, OPK_NN,
	OPK_COMM,                       /* tapc's own collectives: never in a model file */
	OPK_TRAIN,                      /* tapc's own training ops (gradients, optimizers):
					 * made by passes, never in a model file */
	OPK_FUSED,                      /* tapc's fused kernels (fusion passes): never in a model file */
} OpKind;

const char *ir_op_name(Op op);          /* "MatMul" */
OpKind ir_op_kind(Op op);
bool ir_op_lookup(const char *name, Op *op); /* false if unsupported */
bool ir_op_is_comm(Op op);              /* AllReduce, AllGather, ReduceScatter, Shard */
bool ir_op_is_view(Op op);              /* may only rename its input's bytes: Reshape, Flatten,
					 * Squeeze, Unsqueeze, Identity */

/* -------------------------------------------------------------- dtypes */

/* Values are ONNX TensorProto.DataType's, so the loader copies them. */
typedef enum {
	DT_UNDEF = 0,
	DT_F32 = 1, DT_U8 = 2, DT_I8 = 3, DT_U16 = 4, DT_I16 = 5,
	DT_I32 = 6, DT_I64 = 7, DT_STRING = 8, DT_BOOL = 9, DT_F16 = 10,
	DT_F64 = 11, DT_U32 = 12, DT_U64 = 13, DT_C64 = 14, DT_C128 = 15,
	DT_BF16 = 16,
	DT_COUNT
} DType;

const char *ir_dtype_name(DType t);     /* "f32"; "?" for unknown values */
bool ir_dtype_lookup(const char *name, DType *t);
int ir_dtype_size(DType t);             /* bytes per element; 0 for string/undef */

/* --------------------------------------------------------------- arena */

typedef struct ArenaBlock ArenaBlock;
typedef struct {
	ArenaBlock *head;                /* newest block first */
} Arena;

void *ir_alloc(Arena *a, size_t n);     /* zeroed, 16-byte aligned; dies on OOM */
char *ir_strdup(Arena *a, const char *s);
void ir_arena_free(Arena *a);

/* ------------------------------------------------------------- tensors */

typedef int32_t TensorId;
typedef int32_t NodeId;
#define IR_NONE (-1)                    /* absent tensor, node or group */

#define IR_MAX_RANK 8

typedef enum {
	TK_VALUE,                       /* produced by a node */
	TK_INPUT,                       /* graph input, fed at run time */
	TK_WEIGHT,                      /* initializer (parameter) */
	TK_CONST,                       /* constant made by tapc or a Constant attribute */
	TK_STATE,                       /* optimizer state (momentum, Adam's moments): persists
					 * across training steps, zero at the start */
} TensorKind;

/* Where a tensor's bytes are.  Only weights and constants have data. */
typedef enum {
	DATA_NONE,
	DATA_FILE,                      /* little-endian bytes in files[file] */
	DATA_INLINE,                    /* bytes in the arena */
} DataKind;

typedef struct {
	const char *name;               /* ONNX value name, unique in the graph */
	TensorKind kind;
	DType dtype;
	int rank;                       /* -1 until shape inference has run */
	int64_t dims[IR_MAX_RANK];      /* static shape, each >= 0 */
	NodeId producer;                /* IR_NONE for inputs, weights, constants */
	DataKind data;
	int file;                       /* DATA_FILE: index into Graph.files */
	int64_t offset;                 /* DATA_FILE: byte offset in that file */
	int64_t length;                 /* DATA_FILE/INLINE: byte length */
	void *bytes;                    /* DATA_INLINE: element data */
	void *value;                    /* known contents (any kind), or NULL: see ir_value */
	const char *sym0;               /* symbolic name of dim 0 before -batch, or NULL */
	/* A weight sharded by tp-rewrite: dims are this rank's slice; the full
	 * dimension along slice_axis is [slice_blocks, slice_parts, chunk] and
	 * the rank with tensor-parallel coordinate q holds [:, q, :]. */
	int slice_axis;                 /* -1: the whole tensor */
	int slice_parts;                /* ranks sharing the axis (the TP degree) */
	int slice_blocks;               /* >= 1; 3 for a fused q,k,v weight */
	/* DATA_FILE: the element type the file holds when the program converts
	 * it to dtype as it loads the weight (legalize-half's f32 copy of a
	 * sliced f16 or bf16 weight); DT_UNDEF: the file holds dtype. */
	DType file_dtype;
	/* After tp-rewrite (Graph.tp_layouts): how the TP ranks hold the tensor,
	 * TPK_R replicated, TPK_S split, TPK_P partial sums; autodiff needs it
	 * to sum the ranks' partial gradients. */
	int8_t tp_kind;
} Tensor;

enum { TPK_R, TPK_S, TPK_P };

int64_t ir_numel(const Tensor *t);      /* product of dims; 1 for a scalar */
int64_t ir_nbytes(const Tensor *t);

/* ---------------------------------------------------------- attributes */

typedef enum {
	ATTR_FLOAT, ATTR_INT, ATTR_STRING, ATTR_TENSOR,
	ATTR_FLOATS, ATTR_INTS, ATTR_STRINGS,
} AttrType;

typedef struct {
	const char *name;
	AttrType type;
	int n;                          /* element count for the list types */
	union {
		float f;
		int64_t i;
		const char *s;
		TensorId t;             /* a TK_CONST tensor holding the value */
		float *fs;
		int64_t *is;
		const char **ss;
	};
} Attr;

/* --------------------------------------------------------------- nodes */

typedef enum {
	PHASE_FWD,                      /* forward (inference) computation */
	PHASE_BWD,                      /* backward: gradients (training) */
	PHASE_OPT,                      /* optimizer step (training) */
} Phase;

typedef struct {
	Op op;
	const char *name;               /* ONNX node name, kept for diagnostics ("" if none) */
	int nin, nout;
	TensorId *in;                   /* IR_NONE for an omitted optional input */
	TensorId *out;
	int nattr;
	Attr *attr;                     /* sorted by name */
	int group;                      /* GraphNode id, IR_NONE before grouping */
	int subgraph;                   /* pipe-shard's subgraph (Merak), IR_NONE before */
	int stage;                      /* pipeline stage, IR_NONE before stage-assign */
	Phase phase;
	bool dead;                      /* removed; ir_compact drops it */
	/* tp-plan's choice for the weight of a sharding anchor (MatMul, Gemm,
	 * Conv, embedding Gather): TP_NONE if the node is not one (or no plan
	 * yet), TP_REPLICATE, or the weight axis split across the TP ranks. */
	int tp_axis;
	int tp_blocks;                  /* the split's block count (>= 1) */
	const char *tp_comm;            /* tp-plan's note of the collectives this
					 * node's inputs need ("allreduce:1"), or NULL */
	/* Control flow (If).  A branch's nodes are ordinary nodes placed just
	 * before their If, marked with the If's region and the branch; the If
	 * node's inputs are its condition, then the then-branch's outputs,
	 * then the else-branch's.  The program runs one branch's nodes where
	 * the If is (docs/ir.md, "Control flow"). */
	int region;                     /* the innermost If region this node is in, or IR_NONE */
	int branch;                     /* in a region: 0 the then branch, 1 the else branch */
	int owns;                       /* an If node: the region of its branches; else IR_NONE */
} Node;

#define TP_NONE (-2)
#define TP_REPLICATE (-1)

/* --------------------------------------------------------------- graph */

typedef struct {
	const char *name;               /* GraphNode name (its ops' common scope) */
	int nnodes;
	NodeId *nodes;                  /* member ops in topological order */
	int tmpl;                       /* shared-subgraph template, IR_NONE if none */
} GraphNode;

/* A shared subgraph (TAP §IV-C): a block of GraphNodes that repeats.  The
 * k-th GraphNode of every instance plays the same role, so a plan derived
 * for the template applies to each instance position by position. */
typedef struct {
	const char *name;               /* the instances' scope pattern ("/h.#"), or "" */
	int ngroups;                    /* GraphNodes per instance */
	int ninstances;
	int *inst;                      /* [ninstances][ngroups] GraphNode ids */
} Template;

typedef struct {
	int rows, cols;                 /* device mesh rows x cols (nodes x devices) */
	int dp, tp, pp;                 /* degrees; 0 = not chosen yet */
} Mesh;

/*
 * The analytical cost model's constants (TAP §IV-F, docs/tensor-parallel.md):
 * what one device computes and how fast its links are.  Defaults describe
 * the default backend (CPU threads); -cost=key=value,... overrides them.
 */
typedef struct {
	double flops;                   /* floating-point operations per second per device */
	double bw_intra;                /* bytes/s between devices of one mesh row (node) */
	double bw_inter;                /* bytes/s between nodes */
	double latency;                 /* seconds per collective call */
	double memory;                  /* bytes per device */
	double mem_bw;                  /* bytes/s an operator streams (0: not modelled) */
	double op_latency;              /* seconds per operator call (0: not modelled) */
	bool train;                     /* cost a training step (fwd+bwd) or a forward pass */
} CostModel;

void ir_cost_defaults(CostModel *m);
/* Parse "flops=1e12,bw_intra=1e11,..." into m; false (and *bad set to the
 * offending item) on an unknown key or a bad value. */
bool ir_cost_parse(CostModel *m, const char *spec, const char **bad);
/* Seconds for one collective over n ranks on bandwidth bw moving a tensor
 * of `bytes` (the full tensor): ring algorithms, TAP's communication cost. */
double ir_cost_allreduce(const CostModel *m, int n, double bw, double bytes);
double ir_cost_allgather(const CostModel *m, int n, double bw, double bytes);

/*
 * The cluster a plan is for (frontend/cluster.c reads -cluster=FILE; -mesh
 * RxC is R nodes of one kind): kinds of nodes, `count` nodes of each, each
 * node `devices` devices.  Devices are numbered node by node in the order of
 * the kinds.  A link inside a node runs at its kind's intra_bw, a link
 * between two nodes at the smaller inter_bw of the two.  alpha and beta are
 * AMP's calibration factors (eq. 1 and 3): seconds per predicted second of
 * computation and of communication.
 */
#define CLUSTER_MAX_KINDS 64
#define CLUSTER_NAME 64

typedef struct {
	char name[CLUSTER_NAME];
	int count, devices;             /* nodes of this kind, devices per node */
	double flops;                   /* per device, FLOP/s */
	double memory;                  /* per device, bytes */
	double intra_bw, inter_bw;      /* bytes/s */
	double mem_bw;                  /* bytes/s an operator streams on one device (0: not modelled) */
} NodeKind;

typedef struct {
	int nkinds;
	NodeKind kinds[CLUSTER_MAX_KINDS];
	int nnodes, ndevices;
	double latency;                 /* seconds per message or collective */
	double op_latency;              /* seconds per operator call, on any device */
	double alpha, beta;
} Cluster;

/* The device's node and kind and its index inside the node. */
void ir_cluster_device(const Cluster *c, int device, int *node, int *kind, int *slot);
/* Bytes/s between two devices (the faster of the two ends for a = b). */
double ir_cluster_link(const Cluster *c, int a, int b);
/* R nodes of C devices with the constants of m: the -mesh shorthand. */
void ir_cluster_mesh(Cluster *c, int rows, int cols, const CostModel *m);
/* R x C when every node has the same kind; else 1 x devices. */
void ir_cluster_shape(const Cluster *c, int *rows, int *cols);

/*
 * One candidate of the planner (passes/mesh_map.c): degrees, micro-batch
 * size and count, and the placement: which axis of the rank grid runs
 * along consecutive devices (order: a permutation of tp, dp, pp from the
 * innermost out) and whether devices are taken node by node or slot by
 * slot (slot 0 of every node, then slot 1: AMP's vertical dominoes).
 */
enum { PLACE_ORDERS = 6, PLACE_COUNT = 12 };

typedef struct {
	int dp, tp, pp;
	int64_t mbs;                    /* rows of a micro-batch */
	int micro;                      /* micro-batches per replica */
	int place;                      /* order * 2 + by-slot */
	double seconds;                 /* predicted iteration (AMP eq. 2); < 0: does not fit */
	double pipeline, dpsync;        /* its terms: the slowest pipeline, the slowest sync */
	double memory;                  /* bytes the fullest device needs */
} PlanChoice;

#define PLAN_TOP 10

/* What mesh-map searched and found (plan.json's "search"). */
typedef struct {
	const char *method;             /* "exhaustive", "simulated annealing", "given" */
	int64_t total, evaluated;       /* candidates in the space; cost-model calls */
	double seconds;                 /* the search's time */
	unsigned seed;
	PlanChoice chosen, megatron;    /* megatron.dp == 0: no plan of Megatron's fits */
	int ntop;
	PlanChoice top[PLAN_TOP];       /* the best, cheapest first */
} PlanSearch;

/* The axis order of a placement as text: "tp,dp,pp" (innermost first). */
const char *ir_place_order(int place);
/* The device of every rank (rank = (replica * pp + stage) * tp + q), into
 * dev[dp * tp * pp]. */
void ir_place(const Cluster *c, int dp, int tp, int pp, int place, int *dev);

/* One pipeline stage as stage-assign chose it. */
typedef struct {
	int first, nsub;                /* subgraphs [first, first + nsub) */
	double fwd, bwd;                /* predicted seconds per micro-batch */
	double fwd_coll, bwd_coll;      /* ... of which TP collectives (latency and bytes) */
	int ncoll;                      /* TP collectives of the forward of one micro-batch */
	int64_t weight_bytes;           /* per rank */
} PipeStage;

/*
 * The schedule (passes/schedule.c): for every pipeline stage, the ordered
 * list of steps its ranks run in one iteration (a training step, or one
 * batch of inference).  The simulator (passes/pipeline.c), -emit=schedule
 * and the emitter (backend/emit_c.c, memplan.c) all read this one list.
 */
typedef enum {
	SCHED_1F1B,                     /* warm-up, one forward one backward, cool-down */
	SCHED_GPIPE,                    /* all forwards, then all backwards */
	SCHED_MERAK,                    /* 1F1B with Merak's shifted critical path (§5.1) */
	SCHED_COUNT
} SchedKind;

typedef enum {
	STEP_FWD,                       /* the stage's forward nodes for micro-batch `micro` */
	STEP_BWD,                       /* its backward nodes (GradAccumulate included) */
	STEP_RECOMPUTE,                 /* the forward nodes again, for the backward that follows */
	STEP_RECV,                      /* tensor t of micro-batch `micro` from stage `peer` */
	STEP_SEND,                      /* tensor t of micro-batch `micro` to stage `peer` */
	STEP_SYNC,                      /* one data-parallel gradient bucket: node */
	STEP_OPT,                       /* the optimizer nodes of the stage */
	STEP_COUNT
} StepKind;

typedef struct {
	StepKind kind;
	int micro;                      /* the micro-batch; -1 for SYNC and OPT */
	TensorId t;                     /* RECV, SEND: the tensor; else IR_NONE */
	int peer;                       /* RECV, SEND: the other stage; else -1 */
	NodeId node;                    /* SYNC: the bucket's AllReduce; else IR_NONE */
	bool pair;                      /* FWD, RECOMPUTE, BWD with Graph.subpipe: this step
	                                 * and the next (the same kind, micro + 1) run
	                                 * interleaved, part by part (sched_split) */
} SchedStep;

typedef struct {
	int nsteps;
	SchedStep *steps;               /* arena */
	int inflight;                   /* most micro-batches forwarded and not yet backward */
	bool recompute;                 /* backward of each micro-batch re-runs its forward */
	int keep_from;                  /* with recompute: forward nodes of subgraphs from this
	                                 * one on keep their values for the backward; those
	                                 * before it are re-run (Merak's alpha_i: the share of
	                                 * the stage's modules kept); INT_MAX: all re-run */
} StageSched;

/* One search of tp-plan (TAP Alg. 2), for plan.json and the benchmark. */
typedef struct {
	const char *name;               /* the template's pattern, or "graph" */
	int first;                      /* first GraphNode searched */
	int instances;                  /* copies the plan was applied to */
	int choices;                    /* weight anchors searched (V) */
	int64_t enumerated, valid;      /* plans tried; plans pattern routing accepted */
	double cost;                    /* the best plan's cost, seconds */
	double ms;                      /* search time */
} TpSearch;

typedef struct Graph {
	Arena arena;
	const char *name;               /* ONNX graph name */
	const char *model;              /* model path as given (diagnostics, dumps) */
	const char *dir;                /* directory that file paths are relative to */
	const char *ir_data;            /* the IR file's data file that was read (-MD), or NULL */
	int64_t opset;                  /* default-domain opset version */

	int ntensors, captensors;
	Tensor *tensors;
	int nnodes, capnodes;
	Node *nodes;                    /* topological order once verified */

	int ninputs, noutputs;
	TensorId *inputs;               /* graph inputs, in ONNX order */
	TensorId *outputs;

	int nfiles;
	const char **files;             /* [0] the model; others external data, relative to dir */

	int ngroups;
	GraphNode *groups;              /* TAP GraphNodes, empty before grouping */
	int ntemplates;
	Template *templates;            /* shared subgraphs, empty before fold-scopes */
	int stripped[OP_COUNT];         /* nodes strip-aux removed, per op (plan.json) */
	int stripped_dead;              /* ... of which dead (no user) */
	int ops_loaded;                 /* node count as loaded, before any pass */

	/* the plan: mesh-map's decisions for the cluster (and the stage table
	 * and tp-plan's record below) */
	Cluster cluster;                /* the devices; the driver sets it */
	Mesh mesh;
	const char *degree_rule;        /* why these degrees (plan.json), or NULL */
	CostModel cost;
	int *device;                    /* [dp * tp * pp] rank -> device, or NULL */
	int place;                      /* the placement that gave it */
	PlanSearch search;              /* search.method NULL: no search ran */

	/* tp-plan's record (plan.json) */
	int ntpsearch;
	TpSearch *tpsearch;
	double tp_search_ms;            /* all searches */
	double tp_cost;                 /* predicted cost of the whole plan, seconds */
	int64_t tp_memory;              /* bytes per device the plan's weights need */

	/* pipe-shard and stage-assign's record (plan.json, -emit=schedule) */
	int nsubgraphs;
	int nregions;                   /* If regions handed out (ids 0 .. nregions-1) */

	int nstages;
	PipeStage *stages;              /* [nstages] */
	double *subgraph_fwd;           /* [nsubgraphs] predicted forward seconds of each
	                                 * subgraph on its stage's devices (arena) */
	int microbatches;               /* M of the simulated schedule (halves when slice > 0) */
	int slice;                      /* -slice (AutoPipe's slicer): 0 off; else every
	                                 * micro-batch runs as a pair of halves (the graph is
	                                 * a half's, microbatches counts halves) and the first
	                                 * `slice` pairs' forwards are sliced: each half sent
	                                 * on its own (the schedule pass solves it; 1 before) */
	bool subpipe;                   /* -subpipeline (Merak's sub-pipelined TMP, §5.3):
	                                 * every micro-batch runs as a pair of halves (the
	                                 * graph is a half's, microbatches counts halves)
	                                 * whose steps interleave at each TP all-reduce,
	                                 * one half's reduction in flight while the other
	                                 * computes (SchedStep.pair) */
	double pipe_comm;               /* seconds per stage-to-stage transfer (mean) */
	double pipe_time;               /* simulated iteration, chosen assignment */
	double pipe_even_time;          /* ... Megatron's even split of the blocks (-1: none) */
	double pipe_std, pipe_even_std; /* std dev of the stage times of each */
	const char *pipe_method;        /* which planner's assignment won */
	double pipe_ms;                 /* stage-assign's time */

	/* the schedule (passes/schedule.c): kind, and per stage its steps;
	 * sched NULL before the pass (the emitter then makes the default) */
	int sched_kind;                 /* SchedKind */
	StageSched *sched;              /* [emit_nstages] */
	double sched_time;              /* the schedule's simulated iteration, seconds */
	double sched_times[SCHED_COUNT]; /* each kind's, for plan.json (-1: not simulated) */
	double slice_none_time;         /* -slice: the step with no pair sliced (plan.json) */
	double subpipe_none_time;       /* -subpipeline: the step with each pair's halves one
	                                 * after the other, nothing overlapped (plan.json) */

	/* training (passes/loss.c, autodiff.c, optimizer.c): the scalar loss and,
	 * per trainable weight, the tensor holding d loss / d weight */
	TensorId loss;                  /* IR_NONE: an inference graph */
	bool tp_layouts;                /* tp-rewrite set every Tensor.tp_kind (not kept in
					 * IR text: a rank's graph read back lacks them) */
	int ngrads;
	struct GradPair { TensorId weight, grad; } *grads; /* arena */

	/* def-use, rebuilt by ir_reindex */
	int *nusers;                    /* per tensor */
	NodeId **users;                 /* per tensor, the consuming nodes */
} Graph;

Graph *ir_new(const char *name);
/* Per GraphNode, the shared-subgraph instance ("block") it belongs to,
 * numbered template by template, instance by instance; -1 outside every
 * template.  malloc'd; *nblocks (may be NULL) gets the count. */
int *ir_group_blocks(const Graph *g, int *nblocks);
void ir_free(Graph *g);

TensorId ir_add_tensor(Graph *g, const char *name, TensorKind kind, DType dt);
NodeId ir_add_node(Graph *g, Op op, const char *name, int nin, const TensorId *in,
    int nout, const TensorId *out);
void ir_set_shape(Tensor *t, int rank, const int64_t *dims);
int ir_add_file(Graph *g, const char *path);        /* index; reuses an equal path */
void ir_add_input(Graph *g, TensorId t);
void ir_add_output(Graph *g, TensorId t);

/* Attributes: setters keep the node's list sorted by name. */
Attr *ir_set_attr(Graph *g, NodeId n, const char *name, AttrType type);
const Attr *ir_attr(const Graph *g, NodeId n, const char *name);
int64_t ir_attr_int(const Graph *g, NodeId n, const char *name, int64_t dflt);
float ir_attr_float(const Graph *g, NodeId n, const char *name, float dflt);
const char *ir_attr_str(const Graph *g, NodeId n, const char *name, const char *dflt);

/* Rebuild users[] from the node list; call after changing edges. */
void ir_reindex(Graph *g);
/* Does a live node of this phase exist?  (A training IR file has its
 * backward and optimizer nodes already: the training passes skip it.) */
bool ir_has_phase(const Graph *g, int phase);
/* Is t one of the graph's outputs? */
bool ir_is_output(const Graph *g, TensorId t);
/* Every node that reads `from` reads `to` instead (graph outputs stay;
 * users[] is stale until the next ir_reindex). */
void ir_replace_uses(Graph *g, TensorId from, TensorId to);
/* Drop dead nodes and tensors nothing refers to; renumbers ids and reindexes. */
void ir_compact(Graph *g);
/* Put the nodes in a new order: order[i] is the id of the node to be at
 * position i (a permutation; the caller keeps it topological).  Producers
 * and GraphNode lists follow; reindexes. */
void ir_reorder(Graph *g, const NodeId *order);

static inline Tensor *ir_tensor(Graph *g, TensorId t) { return &g->tensors[t]; }
static inline Node *ir_node(Graph *g, NodeId n) { return &g->nodes[n]; }

/* Shape string "f32[4,16,64]" into buf (at least IR_TYPESTR bytes). */
#define IR_TYPESTR 160
char *ir_typestr(const Tensor *t, char *buf);

/* --------------------------------------------------------- diagnostics */

/*
 * Errors in the user's input go through diag_*: one line each,
 * "tapc: error: FILE: node 'NAME' (OP): message".  They are counted, written
 * to diag_stream (stderr unless a test redirects it) and the last one is kept
 * for tests.  Compiler bugs use die(), which reports file:line and aborts.
 */
extern FILE *diag_stream;
extern int diag_count;
extern char diag_last[1536];

void diag_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag_file(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_node(const Graph *g, NodeId n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_reset(void);

_Noreturn void die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)
#define unreachable() die_at(__FILE__, __LINE__, "unreachable")

/* --------------------------------------------------------- the checker */

#define IR_MIN_OPSET 1
#define IR_MAX_OPSET 18
#define IR_MAX_DEVICES 65536            /* ranks of a mesh, micro-batches */
#define IR_MAX_BYTES_LOG2 48
#define IR_MAX_BYTES ((int64_t)1 << IR_MAX_BYTES_LOG2) /* one tensor, one arena */

/*
 * The rules every graph from outside passes, from the ONNX loader or the IR
 * reader (ir/check.c): opset in range, supported dtypes, byte sizes within
 * IR_MAX_BYTES, at least one output, attributes per ONNX's schema
 * (ir/attrs.def), degrees that multiply to the mesh.  ir_reinfer runs shape
 * inference over a graph read from text in order and fails where a
 * declared type differs from what the inputs give.  False after a diag.
 */
bool ir_check(Graph *g);
bool ir_reinfer(Graph *g);
bool ir_dtype_supported(DType t);       /* not undefined, string or complex */
/* Bytes of a tensor of this type, or -1 if a dim is negative or the size is
 * over IR_MAX_BYTES (so sums of a few of them cannot overflow int64). */
int64_t ir_shape_bytes(DType dt, int rank, const int64_t *dims);

/* ---------------------------------------------------------- the batch */

/*
 * Where the batch is (ir/batch.c): the axis that carries the samples, with
 * dims[axis] == outer * B * inner when a reshape merged it with other dims;
 * axis -1 for none.  ir_batch_plan analyses a graph shaped at its export
 * batch B0 (inputs carry it in dim 0) and finds the constant elements that
 * are the batch (patches), the first operator that mixes samples (mixer:
 * the batch may change, not be split) and the first place the batch cannot
 * be followed (stuck: it may not change).  ir_batch_respecialize rewrites
 * the patched constants (private copies) and infers every shape again at
 * the new batch.
 */
typedef struct {
	int axis;                       /* -1: no batch */
	int64_t outer, inner;
} BPos;

typedef struct {
	TensorId t;                     /* a source constant */
	int64_t elem;                   /* its element that is factor x batch */
	int64_t factor;
	NodeId user;                    /* the node whose shape needs it */
	TensorId copy;                  /* set by ir_batch_respecialize */
	int axis;                       /* -1: elem is the batch; else t's data repeats
					 * one block per sample along axis (a zero state) */
} BatchPatch;

typedef struct {
	int64_t b0;                     /* the batch the graph is shaped at */
	BPos *pos;                      /* per tensor */
	int npatch, cappatch;
	BatchPatch *patch;
	NodeId mixer;                   /* IR_NONE, or the first op mixing samples */
	char mix_why[200];
	NodeId stuck;                   /* IR_NONE, or where the batch is lost */
	bool stuck_input;               /* ... or the inputs do not agree on it */
	char stuck_why[300];
} BatchPlan;

bool ir_batch_plan(Graph *g, BatchPlan *plan);  /* false: stuck_input */
void ir_batch_plan_free(BatchPlan *plan);
bool ir_batch_respecialize(Graph *g, const BatchPlan *plan, int64_t batch);

/* ------------------------------------------------- shape and constants */

/*
 * Shape inference (ir/infer.c) sets the dtype and shape of a node's outputs
 * from its inputs and attributes, and for shape arithmetic (ir/eval.c)
 * computes their values when all inputs are known.  Returns false after a
 * diag_node() error.
 */
bool ir_infer_node(Graph *g, NodeId n);
/* Arity and shapes of the OPK_TRAIN ops (ir/infer_train.c). */
bool ir_infer_train(Graph *g, NodeId n);
bool ir_infer_all(Graph *g);            /* every node in order */
bool ir_eval_node(Graph *g, NodeId n);  /* true if it set the outputs' values */
/* An integer Div/Mod by a known zero, or of a known minimum by -1: false
 * after a diag (ir_infer_node calls it). */
bool ir_check_division(Graph *g, NodeId n);
/* The contents of t if known: inline bytes, a small integer weight (or a
 * float one of at most 16 elements) read from its file and cached, or an
 * evaluated value.  NULL if unknown or too large: floating-point
 * parameters are never read to plan. */
const void *ir_value(Graph *g, TensorId t);
/* A weight's or constant's whole contents, whatever its size (the folding
 * passes read parameters); not cached in value.  NULL if unreadable. */
const void *ir_weight_bytes(Graph *g, TensorId t);
#define IR_EVAL_MAX_ELEMS 65536         /* larger results are left to run time */

/* ---------------------------------------------------------------- cost */

int64_t ir_node_flops(Graph *g, NodeId n);  /* floating-point operations */
int64_t ir_node_bytes(Graph *g, NodeId n);  /* bytes read and written */

/* ------------------------------------------------------- input files */

/*
 * Every file tapc reads is opened here (ir/file.c): regular files only,
 * O_NONBLOCK, and read up to a cap.  dir == NULL: a path the user gave,
 * opened as given.  Otherwise an untrusted path found inside a file,
 * relative to dir: no absolute path, no ".." component, no symbolic link on
 * the way (O_NOFOLLOW per component).  On failure `why`
 * gets a phrase for the caller's diag line: "NOUN 'PATH' leaves WHERE",
 * "not a regular file", ...
 */
bool ir_path_inside(const char *path);  /* relative, no ".." component, no '\' */
int ir_file_open(const char *dir, const char *path, const char *noun, const char *where,
    int64_t *size, char *why, size_t n);
/* The same for a directory (untrusted path only): true if it opens. */
bool ir_dir_inside(const char *dir, const char *path, const char *noun, const char *where,
    char *why, size_t n);
/* The whole file, NUL-terminated and malloc'd, if at most cap bytes. */
char *ir_file_read(const char *dir, const char *path, const char *noun, const char *where,
    int64_t cap, size_t *len, char *why, size_t n);

/* ------------------------------------------- names into output files */

/*
 * Every name or path that reaches a generated file goes through the one
 * writer of that file's context (ir/escape.c): a C string literal (with
 * its quotes), C comment text, a make target or prerequisite (only after
 * ir_make_path_ok accepted it; *bad gets the byte make cannot take), a JSON
 * string (with quotes), an IR string (quoted, or the unquoted "# comment"
 * form) and XML text.
 */
void ir_esc_c_string(FILE *f, const char *s);
void ir_esc_c_comment(FILE *f, const char *s);
bool ir_make_path_ok(const char *s, int *bad);
void ir_esc_make(FILE *f, const char *s);
void ir_esc_json(FILE *f, const char *s);
void ir_esc_ir(FILE *f, const char *s, bool quoted);
void ir_esc_xml(FILE *f, const char *s);

/* ------------------------------------------------------ text form (IR) */

void ir_print(FILE *f, Graph *g);
/* Values of more than this many elements go to the data file, when there is one */
#define IR_INLINE_MAX 16
/* ir_print, with the values of weights and constants of more than
 * IR_INLINE_MAX elements written to data (a new file, data_name in the
 * header: the file's name in the IR file's directory) and the lines reading
 * "@+0xOFFSET".  *data_bytes: the bytes written there (0: none, and the
 * header names no data file); false, -1, if a write to data failed. */
bool ir_print_data(FILE *f, Graph *g, FILE *data, const char *data_name, int64_t *data_bytes);
/* The %N each tensor gets in ir_print's text (-1: not printed); malloc'd. */
int *ir_print_numbers(Graph *g);
/* A float that reads back as one: always has '.', 'e', "inf" or "nan". */
void ir_put_float(FILE *f, double v, int digits);
/* Parse the text form (syntax only: the printer's inverse); NULL after diag
 * errors.  path names the input for them. */
Graph *ir_parse(const char *text, size_t len, const char *path);
/* Parse, then check as a model is checked (ir_check, ir_reinfer): how tapc
 * reads an IR file.  model: the model the user names (-model=FILE), or NULL
 * for the one the header names, which must be a relative path inside the
 * current directory. */
Graph *ir_read(const char *text, size_t len, const char *path, const char *model);

#endif
