/*
 * taprt.h - libtaprt, the runtime that tapc's generated programs link with.
 *
 * A generated program is a table of tensors and nodes per rank plus a
 * function per rank that calls one kernel per node, in order:
 *
 *     taprt_op_MatMul(cx, &N12);        // /h.0/attn/c_attn/MatMul
 *
 * Kernels implement ONNX semantics on static shapes (tapc checked them at
 * compile time) and read attributes through taprt_attr_*.  Collectives go
 * through a backend chosen at run time from a table (in-process threads
 * by default, MPI with one process per rank when built with it; NCCL
 * later).  taprt_main() is the program's whole command line: --check,
 * --inputs/--outputs, --bench, --backend.
 *
 * The runtime never calls exit(): errors come back as non-zero returns and
 * a message in the context.  The one exception is the MPI backend's abort,
 * which ends the whole job when a rank fails (MPI_Abort), because other
 * processes may be blocked on it.
 */
#ifndef TAPRT_H
#define TAPRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TAPRT_MAX_RANK 8

/* Element types: ONNX TensorProto.DataType numbering. */
enum {
	TAPRT_F32 = 1, TAPRT_U8 = 2, TAPRT_I8 = 3, TAPRT_U16 = 4, TAPRT_I16 = 5,
	TAPRT_I32 = 6, TAPRT_I64 = 7, TAPRT_BOOL = 9, TAPRT_F16 = 10,
	TAPRT_F64 = 11, TAPRT_U32 = 12, TAPRT_U64 = 13, TAPRT_BF16 = 16,
};
int taprt_dtype_size(int dtype);        /* 0 for unsupported */
const char *taprt_dtype_name(int dtype); /* "f32" */

typedef struct {
	void *data;                     /* set at rank start-up */
	int dtype;
	int rank;
	int64_t dims[TAPRT_MAX_RANK];
	int64_t numel;                  /* product of dims (1 for a scalar) */
} taprt_tensor;

enum {
	TAPRT_ATTR_FLOAT, TAPRT_ATTR_INT, TAPRT_ATTR_STRING, TAPRT_ATTR_TENSOR,
	TAPRT_ATTR_FLOATS, TAPRT_ATTR_INTS, TAPRT_ATTR_STRINGS,
};

typedef struct {
	const char *name;
	int type;                       /* TAPRT_ATTR_* */
	int n;                          /* element count of list types */
	float f;
	int64_t i;
	const char *s;
	const float *fs;
	const int64_t *is;
	const char *const *ss;
	const taprt_tensor *t;
} taprt_attr;

typedef struct {
	const char *name;               /* ONNX node name, for messages */
	int opset;                      /* default-domain opset of the model */
	int nin, nout, nattr;
	taprt_tensor *const *in;        /* NULL entries: omitted optional inputs */
	taprt_tensor *const *out;       /* NULL entries: unused optional outputs */
	const taprt_attr *attr;         /* sorted by name */
	uint32_t fixed;                 /* bit i: input i is a weight or a constant (the
	                                 * same bytes at the same address on every run;
	                                 * a training step's optimizer updates weights
	                                 * in place between steps, cx->step > 0): a
	                                 * kernel may keep a repacked copy */
} taprt_node;

const taprt_attr *taprt_attr_get(const taprt_node *n, const char *name);
int64_t taprt_attr_int(const taprt_node *n, const char *name, int64_t dflt);
float taprt_attr_float(const taprt_node *n, const char *name, float dflt);
const char *taprt_attr_str(const taprt_node *n, const char *name, const char *dflt);
/* Integer list from input `input` if present, else attribute `name`.
 * Returns the count, -1 if neither is there; at most max copied to out. */
int taprt_ints(const taprt_node *n, int input, const char *name, int64_t *out, int max);

/* ------------------------------------------------------- communication */

typedef struct taprt_comm taprt_comm;
typedef struct taprt_request taprt_request; /* a backend's started collective */

/* A group of ranks taking part in one collective, in group order. */
typedef struct {
	int size;
	const int *ranks;               /* global ranks */
} taprt_group;

enum { TAPRT_SUM, TAPRT_MAX, TAPRT_MIN, TAPRT_PROD };

typedef struct taprt_layout taprt_layout;

/*
 * A communication backend.  The world functions set up and tear down what
 * the backend needs for one run of a program; the rest are collective over
 * the group (send/recv: the pair) and return 0 or an error code that
 * strerror explains.  Buffers are device or host memory as the backend
 * expects; counts are elements of dtype.  taprt_main picks a backend by
 * name (taprt_backend_find), never by branching on it.
 */
typedef struct {
	const char *name;               /* "threads", "mpi", "nccl" */
	/* Start the backend for a program of layout l.  *world is this
	 * process's handle; the process runs ranks [*first, *first + *count)
	 * (threads: all of them; mpi: its world rank).  0, or -1 with err
	 * set, or left empty to fail without a word (every MPI process but
	 * rank 0, when all of them fail alike); after -1, report err, then
	 * call finalize(*world), which waits for every process to get there
	 * so that no process ends the job before the message is out. */
	int (*init)(const taprt_layout *l, taprt_comm **world, int *first, int *count,
	    char *err, size_t errlen);
	taprt_comm *(*rank)(taprt_comm *world, int rank); /* cx->comm of a rank of this process */
	/* A rank of this process failed and the others must not wait for it:
	 * threads wakes every blocked rank and fails their later calls; mpi
	 * ends the whole job (MPI_Abort) and does not return, since other
	 * processes may be blocked on this one.  Say why before calling it. */
	void (*abort)(taprt_comm *world);
	int (*finalize)(taprt_comm *world); /* after this process's ranks returned: 0 or -1 */
	const char *(*strerror)(int rc); /* what an error code of this backend means */
	int (*allreduce)(taprt_comm *c, const taprt_group *g, void *buf, int64_t count,
	    int dtype, int op);
	int (*allgather)(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
	    int64_t count, int dtype);  /* recv holds size * count, in group order */
	int (*reduce_scatter)(taprt_comm *c, const taprt_group *g, const void *send, void *recv,
	    int64_t count, int dtype, int op); /* send holds size * count */
	/* Point to point: send never waits for the matching recv (it may copy);
	 * messages with one source and tag arrive in the order they were sent.
	 * Tags >= 0 are the program's (tensor numbers); negative tags are
	 * taprt_main's own (the output gather). */
	int (*send)(taprt_comm *c, const void *buf, int64_t bytes, int peer, int tag);
	int (*recv)(taprt_comm *c, void *buf, int64_t bytes, int peer, int tag);
	int (*barrier)(taprt_comm *c, const taprt_group *g);
	/* Optional (NULL: the backend has none, and AllReduce {async=1} runs
	 * blocking): start an in-place all-reduce and return at once; test
	 * advances it (*done set when complete, the request still owned);
	 * wait completes it and frees the request. */
	int (*iallreduce)(taprt_comm *c, const taprt_group *g, void *buf, int64_t count,
	    int dtype, int op, taprt_request **req);
	int (*test)(taprt_comm *c, taprt_request *req, int *done);
	int (*wait)(taprt_comm *c, taprt_request *req);
} taprt_backend;

extern const taprt_backend taprt_threads_backend;

/* The backend called name, or NULL with why set: unknown, or known but not
 * built into this runtime (mpi without MPI at configure time, nccl). */
const taprt_backend *taprt_backend_find(const char *name, char *why, size_t whylen);
/* The names of the backends built into this runtime: "threads, mpi". */
const char *taprt_backends_built(void);

/* ------------------------------------------------------------- a rank */

typedef struct taprt_ctx {
	int rank, nranks;
	const taprt_backend *be;
	taprt_comm *comm;               /* this rank's handle */
	void *arena;                    /* activations, 64-byte aligned */
	void *const *inputs;            /* by index: this replica's rows (see below) */
	void *const *outputs;           /* by index: this replica's rows */
	void *weights;                  /* this rank's weight storage */
	int tp_rank;                    /* this rank's coordinate in its TP group */
	taprt_group tp_group;           /* the TP group's global ranks, in TP order:
	                                 * tp_group.ranks[tp_rank] == rank */
	int stage;                      /* this rank's pipeline stage */
	int dp_rank;                    /* this rank's data-parallel replica */
	taprt_group dp_group;           /* the ranks of its stage and TP coordinate in every
	                                 * replica, by replica: gradients are averaged there */
	int intra_threads;              /* BLAS threads per rank */
	int64_t step;                   /* training: the step being run, from 1 (AdamW's
					 * bias corrections); 0 outside training */
	int64_t runs;                   /* runs of the program before this one (warm-up
					 * included): the random operators' stream */
	struct taprt_pending *pending;  /* started asynchronous all-reduces (k_comm.c) */
	int micro;                      /* the micro-batch the running step of the
					 * schedule is for */
	bool first_backward;            /* that step is the stage's first backward of the
					 * training step: GradAccumulate starts its sums */
	struct taprt_packs *packs;      /* weights packed for products, kept from the first
	                                 * run (gemm_pack.c); taprt_packs_free frees them */
	char error[256];                /* set with a non-zero return */
} taprt_ctx;
/* Free what a context keeps between runs (cx->packs); whoever made cx. */
void taprt_packs_free(taprt_ctx *cx);

/*
 * Where a weight's bytes are: a byte range of a model file (files[file]),
 * optionally this rank's slice of it along an axis (tensor parallelism).
 * The full dimension D along slice_axis is viewed as [blocks, parts, chunk]
 * (chunk = D / (blocks * parts)) and the rank with TP coordinate q loads
 * [:, q, :]: for block j, full indices [(j*parts+q)*chunk, (j*parts+q+1)*chunk)
 * go to local indices [j*chunk, (j+1)*chunk).  blocks = 1 is a plain
 * contiguous split; blocks = 3 splits a fused [Q|K|V] projection so that
 * each rank gets its part of each of Q, K and V.  file_dtype, when not 0,
 * is the type the file holds, converted to the tensor's as the weight loads
 * (TAPRT_F16 or TAPRT_BF16 to TAPRT_F32: a half model's sliced weights,
 * computed in f32); full_dims and offset are then the file's tensor.
 */
typedef struct {
	taprt_tensor *t;                /* the rank's tensor; its dims are the slice's */
	int file;
	int64_t offset;                 /* byte offset of the full tensor */
	int full_rank;
	int64_t full_dims[TAPRT_MAX_RANK]; /* the full tensor's shape */
	int slice_axis;                 /* -1: the whole tensor */
	int slice_parts;                /* ranks sharing the axis (the TP degree) */
	int slice_blocks;               /* >= 1 */
	int file_dtype;                 /* 0: the tensor's; else converted from it */
} taprt_weight;

typedef struct {
	int (*init)(taprt_ctx *cx);     /* bind tensors to arena, inputs, weights */
	int (*run)(taprt_ctx *cx);      /* one forward pass */
	int64_t arena_bytes;
	int64_t weight_bytes;
	int nweights;
	const taprt_weight *weights;
	/* Which of the program's inputs the rank's run() reads and which
	 * outputs it computes (ninputs, noutputs flags); NULL: all inputs, and
	 * every output is the last stage's.  With one rank per process they
	 * say what each process must load and send to rank 0. */
	const bool *reads;
	const bool *writes;
	/* A training program's rank that computes the loss: the scalar tensor
	 * its run() leaves it in (the mean over its replica's rows); NULL
	 * otherwise. */
	const taprt_tensor *loss;
} taprt_rank_program;

/*
 * Where --save puts a trained weight: the weight's bytes in the model files
 * (file and offset, as its taprt_weight names them) and its place in the
 * saved model's data file.  The saved model is `template` (beside the
 * executable; tapc wrote it: the input model with every trained weight an
 * external tensor of `data`, model.onnx.data) with that data file written.
 */
typedef struct {
	int file;
	int64_t offset;
	int64_t out;                    /* byte offset in the data file */
} taprt_saved;

typedef struct {
	const char *template_file;      /* relative to the executable's directory */
	const char *data_file;          /* the data file's name, beside the saved model */
	int64_t data_bytes;
	int nsaved;
	const taprt_saved *saved;
} taprt_save_table;

typedef struct {
	const char *name;               /* -> input_N / output_N names */
	int dtype;
	int rank;
	int64_t dims[TAPRT_MAX_RANK];
} taprt_io;

typedef struct {
	const char *name;               /* program name (the model file's stem) */
	int nranks;
	int ninputs, noutputs;
	const taprt_io *inputs;
	const taprt_io *outputs;        /* inputs and outputs at the whole batch */
	int nfiles;
	const char *const *files;       /* model/external data files, relative to model_dir */
	const char *model_dir;          /* relative to the executable's directory */
	const taprt_rank_program *const *ranks; /* nranks entries */
	int tp;                         /* TP degree (0 or 1: none); see the layout */
	int pp;                         /* pipeline stages (0 or 1: none) */
	int dp;                         /* data-parallel replicas (0 or 1: none) */
	int microbatches;               /* per replica (0 or 1: none) */
	/* The planner's placement: the device that runs rank r, devices
	 * numbered as the cluster's (node by node).  With one rank per process
	 * (mpi) the process of world rank w runs the rank placed on device w,
	 * so mpirun's order of hosts and slots is the cluster's.  NULL: rank r
	 * on device r. */
	const int *devices;             /* nranks entries, a permutation */
	/* A training program (tapc -train): its input named "labels" is read
	 * from labels.pb by --train; save says what --save writes. */
	bool train;
	const taprt_save_table *save;
} taprt_program;

/* --save: the trained weights of the ranks of replica 0 into DIR's model
 * (runtime/save.c).  Collective over every rank of the program: called by
 * each after training, with its context; 0, or -1 with cx->error set. */
int taprt_save(taprt_ctx *cx, const taprt_program *p, const taprt_rank_program *rp,
    const char *exe_dir, const char *dir);

/* ------------------------------------------------------------ layout */

/*
 * Ranks: r = (dp_rank * pp + stage) * tp + tp_rank.  Every backend,
 * taprt_main and the tests compute coordinates and groups with these
 * functions, never by hand.  A TP group is the tp ranks of one stage of
 * one replica (consecutive ranks), a DP group the dp replicas of one
 * (stage, tp_rank), a pipe the pp stages of one (replica, tp_rank): the
 * ranks a tensor travels along between stages.
 */
struct taprt_layout {
	int nranks;                     /* dp * pp * tp */
	int tp, pp, dp;                 /* degrees, >= 1 */
	int microbatches;               /* per replica, >= 1 */
	const int *devices;             /* rank -> device (the program's), or NULL */
	int threads;                    /* intra-op threads a rank runs (--threads), 0 read as 1 */
};

typedef struct {
	int tp_rank, stage, dp_rank;
} taprt_coords;

enum { TAPRT_GROUP_TP, TAPRT_GROUP_DP, TAPRT_GROUP_PIPE, TAPRT_GROUP_WORLD };

/* The program's layout, degrees 0 read as 1: 0, or -1 if a degree is
 * negative, nranks is not dp x pp x tp or devices is not a permutation. */
int taprt_layout_of(const taprt_program *p, taprt_layout *l);
taprt_coords taprt_coords_of(const taprt_layout *l, int rank);
int taprt_rank_at(const taprt_layout *l, int dp_rank, int stage, int tp_rank);
/* The rank the placement puts on device (world rank) d; -1 if none. */
int taprt_rank_on(const taprt_layout *l, int device);
/* The global ranks of rank's group of this kind, in group order (the TP
 * group by tp_rank, the DP group by dp_rank, the pipe by stage), written
 * to out (room for nranks); returns the group's size. */
int taprt_group_of(const taprt_layout *l, int rank, int kind, int *out);

/*
 * Inputs and outputs.  taprt_program.inputs/outputs describe the whole
 * batch; replica d owns rows [d*B/dp, (d+1)*B/dp) of dim 0 of each, split
 * into its micro-batches.  cx->inputs and cx->outputs point at the rank's
 * replica's rows (its first micro-batch), and run() binds micro-batch m at
 * byte offset m * (micro-batch bytes).  With the threads backend they are
 * rows of whole-batch buffers that every rank shares (replicas and stages
 * write disjoint rows: that is the gather); with one rank per process
 * (mpi) each process holds only its replica's rows of what its stage reads
 * and writes, and rank 0 gathers the outputs.  Only the ranks with tp_rank
 * 0 write the program's buffers; the others get private ones (their
 * outputs are equal).
 */

/* Point to point between pipeline stages (send is buffered, recv waits):
 * 0, or -1 with cx->error set.  The byte count is the tensor's. */
int taprt_send(taprt_ctx *cx, const taprt_tensor *t, int peer, int tag);
int taprt_recv(taprt_ctx *cx, taprt_tensor *t, int peer, int tag);

/* Asynchronous all-reduces (AllReduce {async=1}: data parallelism's
 * gradient buckets): progress advances the started ones (generated code
 * calls it after each backward node; nothing when none is started), wait
 * completes them all and applies their mean (the optimizer kernels call it
 * first).  0, or -1 with cx->error set. */
int taprt_comm_progress(taprt_ctx *cx);
int taprt_comm_wait(taprt_ctx *cx);

/* Sub-pipelined TMP (-subpipeline): a TP AllReduce node of one tensor
 * started (the input copied to the output, which is reduced in place until
 * the wait) and completed by the wait; *req is the handle (NULL when start
 * ran it whole: no backend iallreduce, a group of one).  The generated
 * code starts one half's all-reduce, runs the other half's nodes, then
 * waits.  0, or -1 with cx->error set. */
int taprt_allreduce_start(taprt_ctx *cx, const taprt_node *n, taprt_request **req);
int taprt_allreduce_wait(taprt_ctx *cx, taprt_request **req);

/* Load weights for a rank from the mapped files (called by init). */
int taprt_load_weights(taprt_ctx *cx, const taprt_rank_program *rp);

/* The whole generated main: parse argv, load, run, check or bench. */
int taprt_main(int argc, char **argv, const taprt_program *p);

/* ------------------------------------------------------------- kernels */

/* One kernel per ONNX operator, named taprt_op_<OpType>. */
#define TAPRT_OP(name) void taprt_op_##name(taprt_ctx *cx, const taprt_node *n);
#include "taprt_ops.def"
#undef TAPRT_OP

#ifdef __cplusplus
}
#endif
#endif
