/*
 * pipeline.h - the pipeline planner's arithmetic, on cost arrays: a
 * pipeline simulator (AutoPipe §III-B-1), AMP's pipe_dp (Algorithm 2),
 * AutoPipe's balanced partition (Algorithm 1) and its critical-path
 * heuristic.  stage-assign (issue 6) calls them with per-subgraph costs
 * from pipe-shard; they need nothing from the IR, so they are tested
 * against brute force and hand-computed timelines on their own.
 *
 * A partition of n items into p contiguous stages is written as p+1
 * boundaries: stage s holds items [cut[s], cut[s+1]), cut[0] = 0,
 * cut[p] = n, every stage non-empty.
 */
#ifndef TAPC_PIPELINE_H
#define TAPC_PIPELINE_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/ir.h"

/* One operation of a stage's order, and of the simulated schedule. */
typedef struct {
	int stage, micro;
	bool backward;
	bool recompute;                 /* the forward again, before the backward (not backward) */
	int release;                    /* its result leaves with that of micro + release (a
	                                 * send held for the pair's other half, -slice); 0 */
	double start, end;
	bool critical;                  /* on the critical path (see pipe_simulate) */
} PipeOp;

typedef struct {
	int nstages, micro;             /* K stages, M micro-batches */
	const double *fwd;              /* [K] forward time of one micro-batch per stage */
	const double *bwd;              /* [K] backward times, or NULL: forward only */
	const double *refwd;            /* [K] recompute times, or NULL: a forward's */
	double comm;                    /* seconds per activation transfer between stages */
	int sched;                      /* SchedKind of a training schedule (0: 1F1B) */
	const bool *recompute;          /* [K] stages that recompute (a forward's time), or NULL */
	/* Explicit orders (the schedule pass's lists): order[s] holds norder[s]
	 * operations of stage s; NULL: pipe_order's for sched. */
	const PipeOp *const *order;
	const int *norder;
} PipeSpec;

/*
 * Stage s's order of operations in one training step of K stages and M
 * micro-batches (ir.h SchedKind) into out (room for 3 M); returns the
 * count.  GPipe: every forward, then every backward, micro-batches in
 * order.  1F1B: min(K-s-1, M) warm-up forwards, then one forward and one
 * backward, then the remaining backwards.  Merak (§5.1, shifted critical
 * path): 1F1B with one more warm-up forward on the penultimate stage and
 * no recomputation on the last.  With recompute, each backward is preceded
 * by the recompute of its micro-batch, which waits on nothing from other
 * stages (early recomputation: it fills the wait for the gradient).
 */
int pipe_order(int sched, int K, int M, int s, bool recompute, PipeOp *out);
/* Most micro-batches an order holds forwarded and not yet backward. */
int pipe_inflight(const PipeOp *o, int n);

typedef struct {
	double time;                    /* iteration time: the last operation's end */
	int master;                     /* AutoPipe's master stage: the one the critical
					 * path spends most compute time in (ties: the later) */
	int nops;
	PipeOp *ops;                    /* per stage in execution order, stage-major */
} PipeSim;

/*
 * Simulate one iteration: forward only (bwd NULL: every stage runs the
 * micro-batches' forwards in order) or a training schedule (the orders
 * given, else pipe_order's for p->sched).  An operation starts when its
 * stage is free and its input has arrived: the forward of the previous
 * stage plus comm, the backward of the next stage plus comm (the last
 * stage's backward: its own forward); a recompute waits for nothing but
 * its stage.  False on bad arguments or an order that deadlocks.
 */
bool pipe_simulate(const PipeSpec *p, PipeSim *out);
void pipe_sim_free(PipeSim *s);

/*
 * AMP's pipe_dp: cut n layers of costs a[] into k contiguous stages
 * minimizing (M-1) * max stage time + sum of stage times + sum of the cut
 * costs, where cutting after layer i into stage j costs b[i * (k-1) + j]
 * (b may be NULL: free cuts).  Exact.  Returns the objective and fills
 * cut[0..k]; a negative value if k > n or k < 1.
 */
double pipe_dp(const double *a, int n, int k, const double *b, int micro, int *cut);

/*
 * pipe_dp for stages that differ (AMP §4.3 with stage times scaled by each
 * stage's devices, tapc's heterogeneous clusters): item i has ncomp cost
 * components (FLOPs, collective bytes, collective count), and stage j turns
 * them into seconds with its own coefficients, so a stage's time is
 * t_j = sum over its items and components of coef[j][c] * item[i][c].
 * Minimizes (M-1) * max t_j + sum t_j + sum of cut costs, as pipe_dp, with
 * an optional memory limit per stage: sum of mem_coef[j][m] * mem_item[i][m]
 * at most mem_cap[j].  Costs must be >= 0.  max_bounds > 0 caps how many
 * candidate bounds on the largest stage are tried past the smallest
 * feasible one (evenly spaced among them): exact when 0.  Returns the
 * objective and fills cut[0..k]; < 0 when no partition fits.
 */
#define PIPE_MAX_COMP 6

typedef struct {
	int n, k, micro;
	int ncomp;                      /* 1 .. PIPE_MAX_COMP */
	const double *item;             /* [n * ncomp] */
	const double *coef;             /* [k * ncomp] */
	const double *cut;              /* [n * (k-1)]: as pipe_dp's b; NULL: free */
	int nmem;                       /* 0 .. PIPE_MAX_COMP; 0: no limit */
	const double *mem_item;         /* [n * nmem] */
	const double *mem_coef;         /* [k * nmem] */
	const double *mem_cap;          /* [k] */
	int max_bounds;
} PipeProblem;

double pipe_dp_stages(const PipeProblem *p, int *cut);
/* The time of stage j holding items [s, e) (after the problem's prefix sums
 * are known: for callers that evaluate a cut). */
double pipe_stage_time(const PipeProblem *p, int j, int s, int e);

/* AutoPipe's Algorithm 1: the partition minimizing the largest stage sum
 * of w[] (w = forward + backward per block).  Returns that sum. */
double pipe_balance(const double *w, int n, int k, int *cut);

/*
 * AutoPipe's planner: start from pipe_balance, simulate, and move the
 * master stage forward (its first block to the stage before, or its last
 * block to the stage after, rebalancing the stages before with Algorithm
 * 1) while the simulated iteration time improves.  Returns the best
 * simulated time and fills cut[0..k].
 */
double pipe_autopipe(const double *f, const double *b, int n, int k, int micro, double comm,
    int *cut);

/*
 * Merak's graph sharding (pipe_shard.c): subgraph ids for every node, in
 * node order and non-decreasing, at most max_subgraphs of them (issue 6's
 * default: 2 x blocks + 4).  A value consumed in a later subgraph comes
 * from the one just before it, unless it is a graph input (kept with its
 * first user) or a common tensor (read in more than one block, relayed).
 * A subgraph that reaches its parameter share ends at the next point where
 * the fewest values cross (a block's residual Add): transformer blocks
 * split into attention and FFN subgraphs.  Returns the number of subgraphs.
 */
struct Graph;
int pipe_shard(struct Graph *g, int max_subgraphs, int *sub);

/* A Gantt chart of a simulated schedule as SVG: one row per stage, one box
 * per operation (colour: micro-batch; lighter: backward; outlined: on the
 * critical path), for -emit=schedule (issue 6). */
void pipe_svg(FILE *f, const PipeSim *s, int nstages, const char *title);

/* Simulate the partition cut of per-item forward (and backward, or NULL)
 * times: the iteration time, and the master stage if master is not NULL. */
double pipe_simulate_cuts(const double *f, const double *b, int k, int micro, double comm,
    const int *cut, int *master);

/*
 * The schedule pass's pieces (schedule.c).  sched_node_step: which step
 * runs node n (FWD, BWD, SYNC: a "dp" AllReduce bucket, OPT).
 * sched_build: Graph.sched for a kind, stage s recomputing where rec[s]
 * (rec may be NULL).  sched_simulate: the simulated iteration of
 * Graph.sched on the stage table (-1 without a pipeline), and the
 * simulation itself into *out when out is not NULL (pipe_sim_free it).
 */
StepKind sched_node_step(const Graph *g, NodeId n);
/* Does stage's recompute step re-run forward node n (Graph.sched's
 * keep_from; every forward node when it is INT_MAX or without sched)? */
bool sched_reruns(const Graph *g, int stage, NodeId n);
void sched_build(Graph *g, int kind, const bool *rec);
/* -subpipeline: does a part of a paired step end after node n (a TP
 * all-reduce of one tensor at the top level, which the emitter starts and
 * the half's next part waits for)?  False without Graph.subpipe. */
bool sched_split(const Graph *g, NodeId n);
double sched_simulate(Graph *g, PipeSim *out);
const char *sched_name(int kind);       /* "gpipe", "1f1b", "merak" */

/*
 * Merak's sub-pipelined TMP (§5.3): the time of a pair of halves of a
 * micro-batch, each n + 1 compute segments c[0..n] with an all-reduce of
 * a[i] seconds after segment i < n, interleaved as the program runs them:
 * one compute stream running A's then B's segment i, in turn, and one
 * communication stream running their all-reduces in the same turns.  A
 * segment waits for its half's previous all-reduce, an all-reduce for its
 * segment.  (Uniform blocks give the paper's 1/4 T_m + (K - 1/4) max{T_m,
 * T_a} + 1/4 T_a for the forward.)
 */
double pipe_subpipe_time(const double *c, const double *a, int n);
/* The same for a stage whose half runs `compute` seconds with ncoll
 * all-reduces of `coll` seconds in all, blocks alike each ending with its
 * all-reduce (the paper's model); 2 (compute + coll) when ncoll is 0. */
double pipe_subpipe_stage(double compute, double coll, int ncoll);

/* Stage sums of a partition: out[s] = sum of v[cut[s] .. cut[s+1]). */
void pipe_stage_sums(const double *v, const int *cut, int k, double *out);

#endif
